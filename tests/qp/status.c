/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * tests/qp-estimate.sh: a status a call returned, tested against zero right after the
 * call. The compiler is told that nonzero is likely, so it lays that way out straight
 * and reaches the zero case by `je`; at run time zero is the common case (9,990 of
 * 10,000 calls). The static estimate takes zero for the likelier status (C's convention)
 * and puts work's counter on the rare way out.
 */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) int
check(int x)
{
    return x % 1000 == 999;
}

__attribute__((noinline)) int
work(int i)
{
    if (__builtin_expect(check(i) != 0, 1))
        return i * 3 + 7;
    return i ^ 5;
}

int
main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 10000, t = 0;
    for (int i = 0; i < n; i++)
        t += work(i);
    printf("%d\n", t);
    return 0;
}
