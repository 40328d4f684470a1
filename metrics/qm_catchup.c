/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Catch-up (seed 001, Paradyn): a timer that goes into a running process sees only the
 * calls that start afterwards; one under way (main, a long computation, a thread's loop)
 * would read 0 until it returns, and its return would find the timer idle. So after the
 * commit, while the process is still stopped, each thread's stack is unwound and every
 * timed procedure with frames on it gets its depth (how many of its calls are under
 * way, each of which will pass an exit snippet) and a start of now, in the thread's own
 * block, as its entry snippet would have set them (a 'shared' timer: in its one set of
 * words, the threads' depths added up).
 *
 * Not caught up (they start at their next call, as before): a frame about to run its
 * procedure's entry (the pc at the entry: the entry snippet will count it), procedures
 * running as a relocated copy (a call under way runs in the original code, whose exits
 * take no snippet), frames beyond where unwinding stops, and metrics with inside().
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/qp_clock.h"
#include "metrics/qm_priv.h"

typedef struct thread_stack {
    int tid;
    uint64_t tp;
    uint64_t *pcs;
    size_t n;
} thread_stack_t;

typedef struct stacks {
    thread_stack_t *v;
    size_t n, cap;
} stacks_t;

static int
keep_stack(void *arg, int tid, uint64_t tp, const uint64_t *pcs, size_t n)
{
    stacks_t *st = arg;
    if (st->n == st->cap) {
        size_t cap = st->cap ? 2 * st->cap : 16;
        thread_stack_t *v = realloc(st->v, cap * sizeof(*v));
        if (v == NULL)
            return 1;
        st->v = v;
        st->cap = cap;
    }
    thread_stack_t *s = &st->v[st->n];
    if ((s->pcs = malloc((n + 1) * sizeof(uint64_t))) == NULL)
        return 1;
    memcpy(s->pcs, pcs, n * sizeof(uint64_t));
    s->n = n;
    s->tid = tid;
    s->tp = tp;
    st->n++;
    return 0;
}

static int
cmp_proc(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = ((const qm_proc_t *)b)->index;
    return x < y ? -1 : x > y;
}

/* The row of M whose procedure is P (M's procedures are in procedure order), or -1. */
static long
row_of(const qm_metric_t *m, uint32_t p, int by_proc)
{
    const qm_proc_t *q = bsearch(&p, m->procs, m->nprocs, sizeof(qm_proc_t), cmp_proc);
    if (q == NULL || !q->measured || q->untimed)
        return -1;
    return by_proc ? (long)(q - m->procs) : 0;
}

/* Catch M up in the thread of stack T: the calls under way per row; *CAUGHT += them,
 * *MISSED += those that could not be (a relocated copy, no block, the thread gone). */
static int
catch_thread(qpt_space_t *s, qm_metric_t *m, const thread_stack_t *t, size_t *caught,
             size_t *missed)
{
    int by_proc = m->focus == QM_PER_PROC || m->focus == QM_PER_MODULE;
    size_t rows = by_proc ? m->nprocs : 1;
    uint64_t *depth = calloc(rows + 1, sizeof(uint64_t));
    if (depth == NULL)
        return QPT_ENOMEM;
    int any = 0; /* calls caught up in this thread */
    for (size_t k = 0; k < t->n; k++) {
        uint32_t p;
        if (qpt_block_at(s, t->pcs[k], &p, NULL) != 0)
            continue;
        if (k == 0 && t->pcs[0] == qpt_proc_entry(s, p))
            continue; /* its entry snippet counts this one */
        long r = row_of(m, p, by_proc);
        if (r < 0)
            continue;
        if (qpt_proc_runs_as_copy(s, p) != 0) {
            (*missed)++;
            continue;
        }
        depth[r]++;
        any++;
    }
    int rc = 0;
    uint64_t block = m->var, wpr = QM_ROW_WORDS(m->kind);
    if (any && !m->shared && (rc = qpt_thread_block(s, m->var, m->stride, t->tp, &block)) < 0) {
        free(depth);
        *missed += (size_t)any;
        return rc == QPT_ERANGE ? 0 : rc; /* every block taken: not caught up */
    }
    uint64_t start = 0;
    if (any && m->kind == QM_CPU) {
        int64_t ns = qm_thread_cpu_ns(qpt_pid(s), (uint64_t)t->tid);
        if (ns < 0) {
            *missed += (size_t)any;
            any = 0; /* the thread is gone */
        }
        start = (uint64_t)ns;
        uint64_t tid = (uint64_t)t->tid;
        if (any)
            rc = qpt_write_memory(s, block + 8 * (m->base - 1), &tid, 8);
    } else
        start = qp_cycles();
    for (size_t r = 0; any && rc == 0 && r < rows; r++) {
        if (depth[r] == 0)
            continue;
        uint64_t at = block + 8 * (m->base + r * wpr), now_depth;
        if ((rc = qpt_read_memory(s, at, &now_depth, 8)) < 0)
            continue;
        if (m->shared && now_depth != 0) {
            /* A shared timer: another thread's calls caught up already (nothing else
             * ran since the commit), its start theirs; these calls add to the depth. */
            uint64_t d = now_depth + depth[r];
            if ((rc = qpt_write_memory(s, at, &d, 8)) == 0)
                *caught += depth[r];
            continue;
        }
        if (now_depth != 0)
            continue; /* (already active: left as it is) */
        /* The start before the depth, as the entry snippet stores them. */
        if ((rc = qpt_write_memory(s, at + 8, &start, 8)) == 0
            && (rc = qpt_write_memory(s, at, &depth[r], 8)) == 0)
            *caught += depth[r];
    }
    free(depth);
    return rc;
}

int
qm_catch_up(qm_set_t *set, qpt_space_t *s, qm_note_fn note, void *arg)
{
    int pending = 0;
    for (size_t i = 0; set != NULL && i < set->n; i++)
        pending |= set->v[i].catch_up && set->v[i].state == QM_ON;
    if (!pending || s == NULL)
        return 0;
    stacks_t st = { 0 };
    int rc = qpt_thread_stacks(s, keep_stack, &st);
    for (size_t i = 0; i < set->n; i++) {
        qm_metric_t *m = &set->v[i];
        if (!m->catch_up || m->state != QM_ON)
            continue;
        m->catch_up = 0;
        char lwhy[8];
        qpt_space_t *ms = qm_space(set, i, s, lwhy, sizeof(lwhy));
        size_t caught = 0, missed = 0;
        for (size_t t = 0; rc == 0 && ms != NULL && t < st.n; t++)
            rc = catch_thread(ms, m, &st.v[t], &caught, &missed);
        if (caught > 0 && note != NULL) {
            char line[600];
            snprintf(line, sizeof(line), "%s: %zu call%s under way when it went in, timed from "
                     "then on", m->name, caught, caught == 1 ? "" : "s");
            note(arg, line);
        }
        if (missed > 0 && note != NULL) {
            char line[600];
            snprintf(line, sizeof(line), "%s: %zu call%s under way when it went in not timed "
                     "(in a procedure running as a relocated copy, or a thread without a block): "
                     "they count from their next call", m->name, missed, missed == 1 ? "" : "s");
            note(arg, line);
        }
    }
    for (size_t t = 0; t < st.n; t++)
        free(st.v[t].pcs);
    free(st.v);
    return rc;
}
