/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A parallel loop over independent items: the only thread code of qpt. Items are handed
 * out in small grains from one atomic counter, so a slow item does not hold up the rest;
 * what each item computes must not depend on which worker ran it or when, and the
 * caller merges per-worker results in a fixed order, so that the outcome is the same for
 * any number of threads.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "arch/qp_err.h"
#include "base/qp_pool.h"

typedef struct pool_run {
    size_t n, grain;             /* items, and how many a worker takes at a time */
    qp_task_fn fn;              /* the work of one item */
    void *arg;                   /* FN's first argument */
    atomic_size_t next;          /* the first item not handed out */
    _Atomic uint64_t failed;     /* the lowest item that failed and its error
                                  * (fail_key), or FAIL_NONE */
    void (*progress)(void *arg, size_t done); /* called by worker 0 between grains */
} pool_run_t;

typedef struct pool_worker {
    pool_run_t *run;
    unsigned id;                 /* 0: the caller's own thread */
    pthread_t tid;
} pool_worker_t;

/*
 * The error reported is the lowest failed item's, not the first in time: the one a run
 * on one thread reports, for any number of threads. Items are handed out in order and a
 * worker runs the rest of its grain unless one of them fails, so every item below one
 * that failed has run. An item and its error are one word, lowered by compare-and-swap.
 */
#define FAIL_NONE UINT64_MAX

static uint64_t
fail_key(size_t k, int rc)
{
    uint64_t item = k < UINT32_MAX ? k : UINT32_MAX; /* (never so many items) */
    return item << 32 | (uint32_t)rc;
}

/* Item K failed with RC: kept unless a lower item failed. */
static void
fail_item(pool_run_t *r, size_t k, int rc)
{
    uint64_t key = fail_key(k, rc);
    uint64_t now = atomic_load(&r->failed);
    while (key < now && !atomic_compare_exchange_weak(&r->failed, &now, key))
        ;
}

static void *
pool_work(void *p)
{
    pool_worker_t *w = p;
    pool_run_t *r = w->run;
    while (atomic_load_explicit(&r->failed, memory_order_relaxed) == FAIL_NONE) {
        size_t k = atomic_fetch_add_explicit(&r->next, r->grain, memory_order_relaxed);
        if (k >= r->n)
            break;
        if (w->id == 0 && r->progress != NULL)
            r->progress(r->arg, k);
        size_t end = k + r->grain < r->n ? k + r->grain : r->n;
        for (; k < end; k++) {
            int rc = r->fn(r->arg, w->id, k);
            if (rc < 0) {
                fail_item(r, k, rc);
                break;
            }
        }
    }
    return NULL;
}

/* qp_parallel_for and qp_parallel_for_beside: BESIDE (or NULL) first on the caller's
 * thread. */
static int
parallel_for(unsigned nthreads, size_t n, size_t grain, qp_task_fn fn, void *arg,
             void (*progress)(void *arg, size_t done), void (*beside)(void *beside_arg),
             void *beside_arg)
{
    if (fn == NULL)
        return QP_EINVAL;
    if (nthreads > QP_MAX_THREADS)
        nthreads = QP_MAX_THREADS;
    if (nthreads == 0)
        nthreads = 1;
    pool_run_t r = { .n = n, .grain = grain ? grain : 1, .fn = fn, .arg = arg,
                     .progress = progress };
    atomic_init(&r.next, 0);
    atomic_init(&r.failed, FAIL_NONE);
    pool_worker_t w[QP_MAX_THREADS];
    unsigned started = 1;
    /* More threads than grains would only wait; the caller takes the first grain, or
     * none while it runs BESIDE (one item beside a serial step gets its own thread). */
    const unsigned busy = beside != NULL;
    for (unsigned i = 1; i < nthreads && (size_t)(i - busy) * r.grain < n; i++) {
        w[i] = (pool_worker_t) { &r, i, 0 };
        if (pthread_create(&w[i].tid, NULL, pool_work, &w[i]) != 0)
            break; /* fewer threads: the same result, later */
        started++;
    }
    w[0] = (pool_worker_t) { &r, 0, 0 };
    if (beside != NULL)
        beside(beside_arg);
    pool_work(&w[0]);
    for (unsigned i = 1; i < started; i++)
        pthread_join(w[i].tid, NULL);
    uint64_t failed = atomic_load(&r.failed);
    return failed == FAIL_NONE ? 0 : (int)(int32_t)(uint32_t)failed;
}

int
qp_parallel_for(unsigned nthreads, size_t n, size_t grain, qp_task_fn fn, void *arg,
                void (*progress)(void *arg, size_t done))
{
    return parallel_for(nthreads, n, grain, fn, arg, progress, NULL, NULL);
}

int
qp_parallel_for_beside(unsigned nthreads, size_t n, size_t grain, qp_task_fn fn, void *arg,
                       void (*beside)(void *beside_arg), void *beside_arg)
{
    return parallel_for(nthreads, n, grain, fn, arg, NULL, beside, beside_arg);
}
