/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * For bench/qpt-bench (not a test): calls f(i % 21) N times - half of the arguments
 * above 10 - and prints the time per call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__attribute__((noinline, noipa)) void f(long x);

__attribute__((noinline, noipa)) void
f(long x)
{
    /* A 4-byte nop, as endbr64 is in a CET build: the entry block then has the 5 bytes
     * a jump needs. */
    __asm__ volatile(".byte 0x0f, 0x1f, 0x40, 0x00" ::"r"(x));
}

int
main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000000;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++)
        f(i % 21);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.3f ns/call\n",
           ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)n);
    return 0;
}
