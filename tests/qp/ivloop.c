/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * For tests/qp-estimate.sh: a loop stepped by one register, with no call in it (fill's),
 * visited 1,000 times for 1,000 rounds each. Counted from its induction variable it would
 * cost a counter on its way in and out (2,000 runs) instead of one a round (1,000,000):
 * qpt-rewrite -v --weights prices that (doc/qp.md).
 */
#include <stdio.h>

static long a[1000];

__attribute__((noinline)) void
fill(long *p, long n, long k)
{
    for (long i = 0; i < n; i++)
        p[i] = i * k;
}

int
main(void)
{
    long sum = 0;
    for (long r = 0; r < 1000; r++) {
        fill(a, 1000, r);
        sum += a[999];
    }
    printf("%ld\n", sum);
    return 0;
}
