/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * For tests/qp-estimate.sh and tests/iv-loops.sh: a loop stepped by one register, with no
 * call in it (fill's), visited 1,000 times for 1,000 rounds each. Counted from its
 * induction variable it costs a counter on its way in and out (2,000 runs) instead of one
 * a round (1,000,000). With -DTHREADS=N (N > 1), N threads do that at once, each on an
 * array of its own.
 */
#include <stdio.h>
#if defined(THREADS) && THREADS > 1
#include <pthread.h>
#else
#undef THREADS
#define THREADS 1
#endif

static long a[THREADS][1000], b[1000];

/* (Two arrays: compilers step one index by 1 rather than a pointer by 8.) */
__attribute__((noinline)) void
fill(long *p, const long *q, long n, long k)
{
    for (long i = 0; i < n; i++)
        p[i] = q[i] + k;
}

static void *
work(void *arg)
{
    long *p = arg, sum = 0;
    for (long r = 0; r < 1000; r++) {
        fill(p, b, 1000, r);
        sum += p[999];
    }
    return (void *)sum;
}

int
main(void)
{
    long sum = 0;
#if THREADS > 1
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, work, a[i]);
    for (int i = 0; i < THREADS; i++) {
        void *s;
        pthread_join(t[i], &s);
        sum += (long)s;
    }
#else
    sum = (long)work(a[0]);
#endif
    printf("%ld\n", sum);
    return 0;
}
