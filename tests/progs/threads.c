/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * POSIX threads: four workers each sum a slice and bump a mutex-protected shared
 * counter; every worker keeps a thread-local (__thread, TLS) accumulator; pthread_once
 * runs an initialiser once. The main thread joins every worker before it prints, so the
 * output does not depend on scheduling.
 * qpt-build-flags: -pthread
 */
#include <pthread.h>
#include <stdio.h>

#define NTHREADS 4
#define N 200000

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static long shared_counter;
static int init_runs;
static __thread long tls_acc;
static __thread int tls_id = -1;

static void
init_once(void)
{
    init_runs++;
}

struct work {
    int id;
    long lo, hi;
    long sum;
    long tls_seen;
};

static void* __attribute__((noinline)) worker(void* arg)
{
    struct work* w = arg;
    pthread_once(&once, init_once);
    tls_id = w->id;
    for (long i = w->lo; i < w->hi; i++) {
        tls_acc += i % 7;
        w->sum += i * (i % 3);
        if (i % 1000 == 0) {
            pthread_mutex_lock(&lock);
            shared_counter += tls_id + 1;
            pthread_mutex_unlock(&lock);
        }
    }
    w->tls_seen = tls_acc;
    return (void*)(long)(w->id * 10);
}

int
main(void)
{
    pthread_t tid[NTHREADS];
    struct work w[NTHREADS];
    long total = 0, rets = 0;

    tls_acc = 1000; /* the main thread's copy; workers start from 0 */
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (struct work) {
            .id = i, .lo = (long)i * N / NTHREADS, .hi = (long)(i + 1) * N / NTHREADS
        };
        if (pthread_create(&tid[i], NULL, worker, &w[i]) != 0)
            return 100;
    }
    for (int i = 0; i < NTHREADS; i++) {
        void* ret;
        pthread_join(tid[i], &ret);
        rets += (long)ret;
    }
    for (int i = 0; i < NTHREADS; i++) {
        printf("thread %d: sum=%ld tls=%ld\n", i, w[i].sum, w[i].tls_seen);
        total += w[i].sum;
    }
    printf("total=%ld counter=%ld init_runs=%d rets=%ld main_tls=%ld main_id=%d\n", total,
        shared_counter, init_runs, rets, tls_acc, tls_id);
    return (int)(total % 11);
}
