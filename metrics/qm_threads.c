/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Per-thread rows named by thread id and name, not by thread pointer.
 *
 * A per-thread variable's keys are thread pointers (%fs base): stable while the thread
 * lives, meaningless to a user. glibc publishes where a thread descriptor keeps the
 * kernel's thread id, for libthread_db, as the constant _thread_db_pthread_tid
 * ({bits, count, offset}); the descriptor is at the thread pointer. The id is read there
 * while the thread lives (the kernel clears it when the thread exits), and its name from
 * /proc/PID/task/TID/comm. What cannot be learnt keeps its pointer: a name is never
 * guessed.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/qm_priv.h"

typedef struct thread_name {
    uint64_t tp;             /* the key: the thread pointer */
    int tid;                 /* 0: not learnt */
    char name[32];
} thread_name_t;

struct qm_threads {
    qpt_space_t *s;
    int pid;
    int64_t tid_off;         /* the id's offset in a descriptor; -1 unknown, -2 none */
    double retry;            /* tid_off -1: when to look again */
    thread_name_t *v;
    size_t n, cap;
    uint64_t *keys;          /* QPT_MAX_THREADS words read at a time */
};

qm_threads_t *
qm_threads_new(qpt_space_t *s)
{
    qm_threads_t *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->s = s;
    t->pid = qpt_pid(s);
    t->tid_off = -1;
    return t;
}

void
qm_threads_free(qm_threads_t *t)
{
    if (t == NULL)
        return;
    free(t->v);
    free(t->keys);
    free(t);
}

/* Where glibc keeps a thread's id in its descriptor: libc's libthread_db description,
 * in the program (static) or in libc.so.6. -2 when neither has it; -1 while libc may
 * still be loaded (a process started here runs its loader first): asked again, at
 * most 20 times a second. */
static int64_t
tid_offset(qm_threads_t *t)
{
    if (t->tid_off != -1 || qm_now() < t->retry)
        return t->tid_off;
    t->retry = qm_now() + 0.05;
    uint64_t addr, size;
    qpt_space_t *libc = NULL;
    char why[256];
    if (qpt_symbol(t->s, "_thread_db_pthread_tid", &addr, &size) < 0) {
        if (qpt_library(t->s, "libc.so.6", &libc, why, sizeof(why)) < 0)
            return t->tid_off; /* not (yet) loaded */
        if (qpt_symbol(libc, "_thread_db_pthread_tid", &addr, &size) < 0)
            return t->tid_off = -2;
    }
    uint32_t desc[3];
    t->tid_off = -2;
    if (qpt_read_memory(t->s, addr, desc, sizeof(desc)) == 0 && desc[0] == 32
        && desc[2] < 65536)
        t->tid_off = desc[2];
    return t->tid_off;
}

static thread_name_t *
find(qm_threads_t *t, uint64_t tp)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].tp == tp)
            return &t->v[i];
    return NULL;
}

/* Learn TP's id and name if it is a live thread of the process. */
static void
learn(qm_threads_t *t, uint64_t tp)
{
    thread_name_t *e = find(t, tp);
    if (e != NULL && e->tid != 0)
        return;
    int64_t off = tid_offset(t);
    int32_t tid = 0;
    if (off < 0 || qpt_read_memory(t->s, tp + (uint64_t)off, &tid, sizeof(tid)) < 0
        || tid <= 0)
        return;
    char path[96], name[32] = "";
    snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", t->pid, (int)tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return; /* not a thread of this process (any more) */
    if (fgets(name, sizeof(name), f) == NULL)
        name[0] = '\0';
    fclose(f);
    name[strcspn(name, "\n")] = '\0';
    if (e == NULL) {
        if (t->n == t->cap) {
            size_t cap = t->cap ? 2 * t->cap : 16;
            thread_name_t *v = realloc(t->v, cap * sizeof(*v));
            if (v == NULL)
                return;
            t->v = v;
            t->cap = cap;
        }
        e = &t->v[t->n++];
    }
    e->tp = tp;
    e->tid = tid;
    snprintf(e->name, sizeof(e->name), "%s", name);
}

void
qm_threads_learn(qm_threads_t *t, const qm_set_t *set, qm_read_fn read, void *arg)
{
    if (t == NULL || t->pid <= 0)
        return;
    for (size_t i = 0; i < set->n; i++) {
        const qm_metric_t *m = &set->v[i];
        if (m->state != QM_ON || !m->per_thread || (m->focus != QM_PER_THREAD && !m->by_thread))
            continue;
        if (tid_offset(t) < 0)
            return;
        if (t->keys == NULL && (t->keys = malloc(8 * QPT_MAX_THREADS)) == NULL)
            return;
        if (read(arg, m->var, t->keys, QPT_MAX_THREADS) < 0)
            continue;
        for (size_t k = 0; k < QPT_MAX_THREADS; k++)
            if (t->keys[k] != 0)
                learn(t, t->keys[k]);
    }
}

static int
by_thread(const void *a, const void *b)
{
    const qm_row_t *x = a, *y = b;
    /* Rows named by id first, by id; then the others by pointer. */
    int tx = x->key != 0, ty = y->key != 0;
    if (tx != ty)
        return ty - tx;
    uint64_t kx = tx ? x->key : x->thread, ky = ty ? y->key : y->thread;
    return kx < ky ? -1 : kx > ky;
}

void
qm_threads_apply(qm_threads_t *t, qm_row_t *rows, size_t n)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        if (rows[i].thread == 0)
            continue;
        learn(t, rows[i].thread); /* a thread still there that no sample saw yet */
        const thread_name_t *e = find(t, rows[i].thread);
        /* per procedure per thread: "PROC / " stays, the thread part is named */
        size_t at = rows[i].thread_at < sizeof(rows[i].focus) - 32 ? rows[i].thread_at : 0;
        char *focus = rows[i].focus + at;
        size_t flen = sizeof(rows[i].focus) - at;
        if (e == NULL || e->tid == 0) {
            /* Ids can be read, but this thread's was not while it lived. */
            size_t l = strlen(rows[i].focus);
            if (t->tid_off >= 0)
                snprintf(rows[i].focus + l, sizeof(rows[i].focus) - l, " (ended)");
            continue;
        }
        if (e->name[0])
            snprintf(focus, flen, "thread %d (%s)", e->tid, e->name);
        else
            snprintf(focus, flen, "thread %d", e->tid);
        rows[i].key = (uint64_t)e->tid; /* the sort's; not KEYED: not a value */
    }
    /* Each metric's thread rows (consecutive; per procedure per thread: those of one
     * procedure) in id order. */
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && rows[j].thread != 0 && rows[j].metric == rows[i].metric
               && rows[j].thread_at == rows[i].thread_at
               && strncmp(rows[j].focus, rows[i].focus, rows[i].thread_at) == 0)
            j++;
        if (j - i > 1)
            qsort(rows + i, j - i, sizeof(*rows), by_thread);
        i = j > i ? j : i + 1;
    }
}
