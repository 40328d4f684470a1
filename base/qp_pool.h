/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_BASE_POOL_H
#define QP_BASE_POOL_H
/*
 * PURPOSE: a parallel loop over independent items (qp_pool.c, the only thread code but
 * libqpt's reader of profiles, qpt_qp_set_read's QPT_QP_BACKGROUND), for the
 * per-procedure work of the analysis, the drivers and the editor, and the description's
 * chunks. Below every folder but the runtime; knows nothing of programs.
 */
#include <stddef.h>

/* The most threads qp_parallel_for runs. */
#define QP_MAX_THREADS 16

/* The work of item K, run by worker WORKER (0 .. nthreads-1; 0 is the caller's thread). */
typedef int (*qp_task_fn)(void *arg, unsigned worker, size_t k);

/*
 * Call FN(ARG, worker, k) once for every k in [0, N), on up to NTHREADS threads (at
 * most QP_MAX_THREADS; 0 or 1: on the caller's thread alone), GRAIN items at a time.
 * PROGRESS (or NULL) is called on the caller's thread with the items handed out so far.
 * After an error no more items are started. Returns 0, or the error FN returned for the
 * lowest item that failed: every item below it has run, so it is the error a run on one
 * thread returns, whatever the threads (QP_EINVAL when FN is NULL).
 */
int qp_parallel_for(unsigned nthreads, size_t n, size_t grain, qp_task_fn fn, void *arg,
                    void (*progress)(void *arg, size_t done));

/*
 * As qp_parallel_for, with BESIDE(BESIDE_ARG) run on the caller's thread first, while
 * the other threads start on the items; the caller then joins them. For a serial step
 * over work made ahead (BESIDE takes batch k while the items make batch k + 1): the
 * outcome does not depend on how the two overlap. With one thread, BESIDE runs, then
 * the items; with more, even a single item runs on a thread of its own beside it.
 */
int qp_parallel_for_beside(unsigned nthreads, size_t n, size_t grain, qp_task_fn fn, void *arg,
                           void (*beside)(void *beside_arg), void *beside_arg);

#endif
