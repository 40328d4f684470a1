/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Events of a live process (qpt_watch, qpt_next_event, qpt_set_callback, qpt_wait):
 * dynamic/'s following of a process (dyn_proc_follow, dyn_proc_poll: the same one dyn
 * uses for forks, execs and dlopen) turned into the public events. Library loads are
 * seen on the dynamic loader's r_brk breakpoint: when the link map is consistent again,
 * the executable mappings of /proc/PID/maps are compared with those seen before. Every
 * event but the end is handed over with the process stopped, so that the mutator can
 * instrument what it announces before any of it runs.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dynamic/dyn.h"
#include "libqpt/qpt_priv.h"

/* A mapped file, as the last look at the link map saw it. */
typedef struct seen {
    uint64_t dev, ino, lo;
    char name[256];             /* its base name */
} seen_t;

struct qpt_watch {
    unsigned mask;              /* QPT_EV_BIT()s reported */
    uint64_t rdebug, brk;       /* the loader's r_debug and r_brk (0: none) */
    int brk_set;                /* the breakpoint is in */
    seen_t *seen;               /* the libraries mapped at the last look */
    size_t nseen;
    qpt_event_t *queue;         /* events found, not yet handed over */
    size_t nqueue, capqueue;
    int exit_told;              /* QPT_EV_EXIT was handed over */
    int in_callback;            /* qpt_wait is calling a callback */
    unsigned quiet_polls;       /* polls without news since the last look at /proc */
    qpt_event_fn fn[QPT_EV_EXIT + 1]; /* qpt_set_callback's */
    void *arg[QPT_EV_EXIT + 1];
};

void
qpt_watch_free(qpt_space_t *s)
{
    struct qpt_watch *w = s->watch;
    if (w == NULL)
        return;
    free(w->seen);
    free(w->queue);
    free(w);
    s->watch = NULL;
}

static int
push(struct qpt_watch *w, const qpt_event_t *ev)
{
    if (w->nqueue == w->capqueue) {
        size_t cap = w->capqueue ? 2 * w->capqueue : 8;
        qpt_event_t *v = realloc(w->queue, cap * sizeof(*v));
        if (v == NULL)
            return QP_ENOMEM;
        w->queue = v;
        w->capqueue = cap;
    }
    w->queue[w->nqueue++] = *ev;
    return 0;
}

static void
pop(struct qpt_watch *w, qpt_event_t *ev)
{
    *ev = w->queue[0];
    memmove(w->queue, w->queue + 1, --w->nqueue * sizeof(*ev));
}

/*
 * Compare the libraries mapped now with those seen before: events for those new and
 * gone (when watched), the spaces of those gone made stale; the list replaced.
 */
static int
look_at_libraries(qpt_space_t *s, struct qpt_watch *w, int quiet)
{
    dyn_module_t *v = NULL;
    size_t n = 0;
    int pid = dyn_proc_pid(s->proc);
    int rc = dyn_proc_modules(pid, &v, &n);
    if (rc < 0)
        return rc;
    seen_t *now = calloc(n + 1, sizeof(*now));
    if (now == NULL) {
        dyn_modules_free(v, n);
        return QP_ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!v[i].exe) {
            now[k] = (seen_t) { v[i].dev, v[i].ino, v[i].lo, "" };
            snprintf(now[k++].name, sizeof(now[0].name), "%s", v[i].name);
        }
    for (size_t i = 0, j = 0; i < n && rc == 0; i++) {
        if (v[i].exe)
            continue;
        int known = 0;
        for (size_t q = 0; q < w->nseen && !known; q++)
            known = w->seen[q].dev == now[j].dev && w->seen[q].ino == now[j].ino
                && w->seen[q].lo == now[j].lo;
        if (!known && !quiet && (w->mask & QPT_EV_BIT(QPT_EV_LIBRARY_LOAD))) {
            qpt_event_t ev = { .kind = QPT_EV_LIBRARY_LOAD, .tid = pid, .status = -1,
                               .base = v[i].lo };
            snprintf(ev.name, sizeof(ev.name), "%s", v[i].name);
            rc = push(w, &ev);
        }
        j++;
    }
    for (size_t q = 0; q < w->nseen && rc == 0; q++) {
        int mapped = 0;
        for (size_t j = 0; j < k && !mapped; j++)
            mapped = w->seen[q].dev == now[j].dev && w->seen[q].ino == now[j].ino
                && w->seen[q].lo == now[j].lo;
        if (mapped)
            continue;
        qpt_event_t ev = { .kind = QPT_EV_LIBRARY_UNLOAD, .tid = pid, .status = -1,
                           .base = w->seen[q].lo };
        snprintf(ev.name, sizeof(ev.name), "%s", w->seen[q].name);
        for (qpt_space_t *l = s->libs; l != NULL; l = l->next_lib)
            if (!l->stale && l->lib_lo == w->seen[q].lo)
                qpt_live_lib_gone(l, 0, "unloaded (dlclose)");
        if (!quiet && (w->mask & QPT_EV_BIT(QPT_EV_LIBRARY_UNLOAD)))
            rc = push(w, &ev);
    }
    dyn_modules_free(v, n);
    free(w->seen);
    w->seen = now;
    w->nseen = k;
    return rc;
}

/* The loader's breakpoint, when library events are watched and there is a loader. */
static int
set_break(qpt_space_t *s, struct qpt_watch *w)
{
    if (w->brk_set || !(w->mask & (QPT_EV_BIT(QPT_EV_LIBRARY_LOAD)
                                   | QPT_EV_BIT(QPT_EV_LIBRARY_UNLOAD))))
        return 0;
    if (dyn_proc_r_debug(s->proc, &w->rdebug, &w->brk) < 0) {
        w->rdebug = w->brk = 0; /* a static program: no library is ever loaded */
        return 0;
    }
    int rc = dyn_proc_set_break(s->proc, w->brk);
    if (rc < 0)
        return qpt_fail(s, rc, "cannot watch the dynamic loader: %s",
                        rc == QP_EUNSUPP ? "its r_brk is not a bare return"
                                         : qp_strerror(rc));
    w->brk_set = 1;
    return look_at_libraries(s, w, 1); /* what is there now is not news */
}

int
qpt_watch_unguarded(const qpt_space_t *s)
{
    if (s == NULL)
        return QP_EINVAL;
    const qpt_space_t *top = s->parent != NULL ? s->parent : s;
    if (top->watch == NULL || !top->watch->brk_set || top->proc == NULL)
        return 0;
    return dyn_proc_break_unguarded(top->proc);
}

/*
 * The children that unfollowing let go stopped, not yet taken by
 * qpt_children_left_stopped, oldest first: the spaces they came from may be closed
 * since (qpt_close unfollows its process). One list for the library, under its lock:
 * spaces of different processes may be closed from different threads at once.
 */
static struct {
    pthread_mutex_t lock;
    int *v;          /* the children's pids */
    size_t n, cap;   /* in v, room in v */
    size_t unnamed;  /* those whose pid could not be kept (no memory, here or in dyn) */
} left = { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0 };

/*
 * The children of S's process that dyn_proc_unfollow let go stopped, onto the list; but
 * the first when NAMED is not NULL: into *NAMED instead (its caller says it as an
 * error: each child is told once). One whose pid cannot be kept is counted in
 * left.unnamed. The number put on the list, and *UNNAMED (not NULL) those counted.
 */
static size_t
take_left_stopped(qpt_space_t *s, int *named /*OUT*/, size_t *unnamed /*OUT*/)
{
    size_t listed = 0, lost = 0;
    int child;
    pthread_mutex_lock(&left.lock);
    while ((child = dyn_proc_left_stopped(s->proc)) != 0) {
        if (child > 0 && named != NULL && *named == 0) {
            *named = child;
            continue;
        }
        if (child > 0 && left.n == left.cap) {
            size_t cap = left.cap ? 2 * left.cap : 8;
            int *v = realloc(left.v, cap * sizeof(*v));
            if (v != NULL) {
                left.v = v;
                left.cap = cap;
            }
        }
        if (child < 0 || left.n == left.cap) {
            lost++;
            continue;
        }
        left.v[left.n++] = child;
        listed++;
    }
    left.unnamed += lost;
    pthread_mutex_unlock(&left.lock);
    if (unnamed != NULL)
        *unnamed = lost;
    return listed;
}

void
qpt_live_unfollow(qpt_space_t *s)
{
    dyn_proc_unfollow(s->proc);
    take_left_stopped(s, NULL, NULL);
}

size_t
qpt_children_left_stopped(int *pids, size_t max)
{
    if (pids == NULL)
        return 0;
    pthread_mutex_lock(&left.lock);
    size_t k = max < left.n ? max : left.n;
    if (k > 0) {
        memcpy(pids, left.v, k * sizeof(*pids));
        memmove(left.v, left.v + k, (left.n - k) * sizeof(*left.v));
        left.n -= k;
    }
    pthread_mutex_unlock(&left.lock);
    return k;
}

size_t
qpt_children_left_stopped_unnamed(void)
{
    pthread_mutex_lock(&left.lock);
    size_t n = left.unnamed;
    left.unnamed = 0;
    pthread_mutex_unlock(&left.lock);
    return n;
}

/* Children dyn_proc_unfollow let go stopped (the loader's int3 still in their copy):
 * the first said as S's error, QPT_EIO, the others onto the list or (pid not kept)
 * counted, each told once, the error pointing at them; else 0. */
static int
said_left_stopped(qpt_space_t *s)
{
    int child = 0;
    size_t unnamed;
    size_t more = take_left_stopped(s, &child, &unnamed);
    if (child == 0 && unnamed == 0)
        return 0;
    if (child == 0)
        return qpt_fail(s, QP_EIO, "children left stopped (the loader's int3 could not "
                                   "be taken out), no memory to keep their pids: "
                                   "qpt_children_left_stopped_unnamed counts them");
    return qpt_fail(s, QP_EIO, "child %d left stopped (the loader's int3 could not be "
                               "taken out of it): run 'dyn clean %d', then kill -CONT %d%s%s",
                    child, child, child,
                    more ? "; others too (qpt_children_left_stopped)" : "",
                    unnamed ? "; others unnamed (qpt_children_left_stopped_unnamed)" : "");
}

int
qpt_live_watch(qpt_space_t *s, unsigned mask)
{
    if (s->parent != NULL)
        return qpt_fail(s, QP_EINVAL, "a library's space: watch its process (qpt_watch on "
                                      "the space of qpt_attach or qpt_spawn)");
    QP_CHECK(qpt_live_gone(s, 0));
    if (!dyn_proc_is_stopped(s->proc)) {
        QP_CHECK(qpt_live_gone(s, 1));
        return qpt_fail(s, QP_EINVAL, "the process must be stopped (qpt_stop)");
    }
    mask &= QPT_EV_ALL;
    struct qpt_watch *w = s->watch;
    if (mask == 0) {
        if (w != NULL) {
            dyn_proc_unfollow(s->proc);
            qpt_watch_free(s);
        }
        return said_left_stopped(s);
    }
    int rc;
    /* A program not run yet has no loader's r_debug: run it to its entry first (not
     * followed meanwhile: dyn_proc_run_to_entry runs its one thread alone). */
    if (s->at_exec && (mask & (QPT_EV_BIT(QPT_EV_LIBRARY_LOAD)
                               | QPT_EV_BIT(QPT_EV_LIBRARY_UNLOAD)))) {
        if (w != NULL) {
            dyn_proc_unfollow(s->proc);
            w->brk_set = 0;
        }
        errno = 0;
        rc = dyn_proc_run_to_entry(s->proc);
        if (rc == 0)
            s->at_exec = 0;
        if (w != NULL && dyn_proc_follow(s->proc) < 0 && rc == 0)
            rc = QP_EIO;
        if (rc == 0)
            QP_CHECK(said_left_stopped(s));
        if (rc < 0) {
            QP_CHECK(qpt_live_gone(s, 1));
            return qpt_fail(s, rc, "cannot run it to its entry point: %s",
                            rc == QP_EIO && errno ? strerror(errno) : qp_strerror(rc));
        }
    }
    if (w == NULL) {
        if ((w = calloc(1, sizeof(*w))) == NULL)
            return QP_ENOMEM;
        if ((rc = dyn_proc_follow(s->proc)) < 0) {
            free(w);
            return qpt_fail(s, rc, "cannot follow the process: %s",
                            rc == QP_EIO ? strerror(errno) : qp_strerror(rc));
        }
        s->watch = w;
    }
    for (uint32_t k = 1; k <= QPT_EV_EXIT; k++) /* a callback's kind stays watched */
        if (w->fn[k] != NULL)
            mask |= QPT_EV_BIT(k);
    w->mask = mask;
    dyn_proc_report_threads(s->proc, (mask & (QPT_EV_BIT(QPT_EV_THREAD_START)
                                              | QPT_EV_BIT(QPT_EV_THREAD_EXIT))) != 0);
    return set_break(s, w);
}

/* The process ran execve and is stopped in the new image: S becomes it. */
static int
on_exec(qpt_space_t *s, struct qpt_watch *w, qpt_event_t *ev)
{
    char why[512] = "";
    int rc = dyn_proc_exec_to_entry(s->proc);
    if (rc < 0) {
        QP_CHECK(qpt_live_gone(s, 1));
        return qpt_fail(s, rc, "cannot run the new program to its entry point: %s",
                        rc == QP_EIO ? strerror(errno) : qp_strerror(rc));
    }
    if ((rc = qpt_live_new_image(s, why, sizeof(why))) < 0) {
        /* S cannot be the new program: every live call refuses it from now on. */
        s->stale = 1;
        return qpt_fail(s, QP_EEXITED, "the process ran execve, and the new program "
                        "cannot be instrumented: %s", why[0] ? why : qp_strerror(rc));
    }
    w->brk_set = 0;
    free(w->seen);
    w->seen = NULL;
    w->nseen = 0;
    QP_CHECK(set_break(s, w));
    *ev = (qpt_event_t) { .kind = QPT_EV_EXEC, .tid = qpt_pid(s), .status = -1 };
    snprintf(ev->name, sizeof(ev->name), "%s", s->path);
    char link[64];
    snprintf(link, sizeof(link), "/proc/%d/exe", qpt_pid(s));
    ssize_t k = readlink(link, ev->name, sizeof(ev->name) - 1);
    if (k > 0)
        ev->name[k] = '\0';
    return 1;
}

static double
now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/*
 * One look at the running process: 1 with *EV (the process stopped, but for the end),
 * 0 when nothing to report happened (*BUSY: something was handled), QPT_E*.
 */
static int
poll_once(qpt_space_t *s, struct qpt_watch *w, qpt_event_t *ev, int *busy)
{
    dyn_event_t de;
    int rc = dyn_proc_poll(s->proc, &de);
    if (rc < 0)
        return rc;
    *busy = de.kind != DYN_EV_NONE || de.handled > 0;
    switch (de.kind) {
    case DYN_EV_BREAK: /* stopped on the loader's r_brk */
        if (dyn_proc_r_state(s->proc, w->rdebug) == 0 /* RT_CONSISTENT */)
            QP_CHECK(look_at_libraries(s, w, 0));
        if (w->nqueue > 0) {
            pop(w, ev);
            return 1;
        }
        QP_CHECK(dyn_proc_resume(s->proc));
        return 0;
    case DYN_EV_FORK: {
        int counted = qpt_live_fork_child(s, de.child);
        int child = dyn_proc_pid(de.child);
        dyn_proc_destroy(de.child); /* let go, detached */
        if (!(w->mask & QPT_EV_BIT(QPT_EV_FORK)))
            return 0;
        *ev = (qpt_event_t) { .kind = QPT_EV_FORK, .tid = child, .status = -1,
                              .child_counted = counted };
        break;
    }
    case DYN_EV_CHILD_LEFT: /* told even when forks are not asked for: a stopped child */
        *ev = (qpt_event_t) { .kind = QPT_EV_FORK, .tid = de.tid, .status = -1,
                              .child_counted = -1 };
        break;
    case DYN_EV_EXEC:
        rc = on_exec(s, w, ev);
        if (rc == 1 && !(w->mask & QPT_EV_BIT(QPT_EV_EXEC))) {
            QP_CHECK(dyn_proc_resume(s->proc));
            return 0;
        }
        return rc;
    case DYN_EV_THREAD_START:
    case DYN_EV_THREAD_EXIT: {
        uint32_t k = de.kind == DYN_EV_THREAD_START ? QPT_EV_THREAD_START : QPT_EV_THREAD_EXIT;
        if (!(w->mask & QPT_EV_BIT(k)))
            return 0;
        *ev = (qpt_event_t) { .kind = k, .tid = de.tid,
                              .status = k == QPT_EV_THREAD_EXIT ? de.status : -1 };
        break;
    }
    default: {
        /* The end is seen by dyn_proc_poll (the first thread's exit); /proc is asked
         * too, every 100th time (about 0.1 s), for an end it could not see. */
        int st;
        if (dyn_proc_ended(s->proc, &st) != 1 && ++w->quiet_polls % 100 != 0)
            return 0;
        if (qpt_live_gone(s, 1) < 0) {
            /* The ends of threads seen with the process's, first (dyn_proc_exited reaped
             * them), then the end. */
            while (dyn_proc_poll(s->proc, &de) == 0 && de.kind == DYN_EV_THREAD_EXIT)
                if (w->mask & QPT_EV_BIT(QPT_EV_THREAD_EXIT))
                    QP_CHECK(push(w, &(qpt_event_t) { .kind = QPT_EV_THREAD_EXIT,
                                                      .tid = de.tid, .status = de.status }));
            QP_CHECK(push(w, &(qpt_event_t) { .kind = QPT_EV_EXIT, .tid = qpt_pid(s),
                                              .status = s->exit_status }));
            pop(w, ev);
            w->exit_told = w->nqueue == 0;
            return 1;
        }
        return 0;
    }
    }
    /* A fork or a thread: the process is stopped for the mutator. */
    rc = dyn_proc_stop(s->proc);
    if (rc < 0 && qpt_live_gone(s, 1) < 0) {
        /* It ended meanwhile: this event, then the end. */
        return 1;
    }
    return rc < 0 ? qpt_fail(s, rc, "cannot stop it: %s", strerror(errno)) : 1;
}

int
qpt_live_next_event(qpt_space_t *s, qpt_event_t *ev, int timeout_ms)
{
    if (s->parent != NULL)
        return qpt_fail(s, QP_EINVAL, "a library's space: its process's events come through "
                                      "the space of qpt_attach or qpt_spawn");
    struct qpt_watch *w = s->watch;
    if (w == NULL)
        return qpt_fail(s, QP_EINVAL, "the process is not watched (qpt_watch)");
    if (w->in_callback)
        return qpt_fail(s, QP_EINVAL, "called from a callback of qpt_wait: return from it "
                                      "instead");
    if (w->exit_told || (s->stale && !s->exited))
        return qpt_live_gone(s, 0) < 0 ? QP_EEXITED
                                       : qpt_fail(s, QP_EEXITED, "the process has exited");
    int rc;
    if (w->nqueue > 0) { /* more news from the last stop (or from the end) */
        if (!s->exited && !dyn_proc_is_stopped(s->proc) && (rc = dyn_proc_stop(s->proc)) < 0
            && qpt_live_gone(s, 1) == 0)
            return qpt_fail(s, rc, "cannot stop it: %s", strerror(errno));
        pop(w, ev);
        w->exit_told = ev->kind == QPT_EV_EXIT;
        return 1;
    }
    if (dyn_proc_is_stopped(s->proc) && (rc = qpt_run(s)) < 0 && rc != QPT_EEXITED)
        return rc;
    double end = now_ms() + timeout_ms;
    long pause = 20000; /* ns; dyn_proc_poll does not block */
    for (;;) {
        int busy = 0;
        rc = poll_once(s, w, ev, &busy);
        if (rc != 0)
            return rc < 0 ? qpt_public_rc(rc) : 1;
        if (timeout_ms >= 0 && now_ms() >= end)
            return 0;
        /* Soon again while the process has stops for us (a thread waits in each), up to
         * 1 ms apart when it has none. */
        pause = busy ? 20000 : pause < 1000000 ? 2 * pause : 1000000;
        struct timespec d = { 0, pause };
        nanosleep(&d, NULL);
    }
}

int
qpt_live_set_callback(qpt_space_t *s, uint32_t kind, qpt_event_fn fn, void *arg)
{
    struct qpt_watch *w = s->watch;
    unsigned mask = (w != NULL ? w->mask : 0) | QPT_EV_BIT(kind);
    if (fn == NULL)
        mask &= ~QPT_EV_BIT(kind);
    if (w != NULL) {
        w->fn[kind] = fn;
        w->arg[kind] = arg;
        if (mask == w->mask)
            return 0;
        if (!dyn_proc_is_stopped(s->proc) && (mask & ~w->mask)
            & (QPT_EV_BIT(QPT_EV_LIBRARY_LOAD) | QPT_EV_BIT(QPT_EV_LIBRARY_UNLOAD))) {
            w->fn[kind] = NULL;
            return qpt_fail(s, QP_EINVAL, "the process must be stopped (qpt_stop) to watch "
                                          "its libraries");
        }
        if (!dyn_proc_is_stopped(s->proc)) { /* (no breakpoint to set) */
            w->mask = mask;
            dyn_proc_report_threads(s->proc, (mask & (QPT_EV_BIT(QPT_EV_THREAD_START)
                                                      | QPT_EV_BIT(QPT_EV_THREAD_EXIT))) != 0);
            return 0;
        }
    }
    int rc = qpt_watch(s, mask);
    if (rc == 0 && s->watch != NULL) {
        s->watch->fn[kind] = fn;
        s->watch->arg[kind] = arg;
    }
    return rc;
}

int
qpt_live_wait(qpt_space_t *s, int timeout_ms)
{
    double end = now_ms() + timeout_ms;
    for (;;) {
        int left = timeout_ms < 0 ? -1 : (int)(end - now_ms());
        if (timeout_ms >= 0 && left < 0)
            left = 0;
        qpt_event_t ev;
        int rc = qpt_next_event(s, &ev, left);
        if (rc <= 0)
            return rc;
        struct qpt_watch *w = s->watch;
        if (w->fn[ev.kind] != NULL) {
            w->in_callback = 1;
            w->fn[ev.kind](s, &ev, w->arg[ev.kind]);
            w->in_callback = 0;
        }
        if (ev.kind == QPT_EV_EXIT)
            return 1;
        if (dyn_proc_is_stopped(s->proc) && w->nqueue == 0 && (rc = qpt_run(s)) < 0
            && rc != QPT_EEXITED)
            return rc;
        if (timeout_ms >= 0 && now_ms() >= end)
            return 0;
    }
}
