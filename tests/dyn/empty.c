/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * For the speed of entry counters (bench/dyn-bench.sh, not a test): calls an empty
 * procedure N times and prints the time per call, wall clock ("X ns/call") and the
 * thread's CPU time ("X cpu ns/call": steadier on a loaded machine).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__GNUC__) && !defined(__clang__)
#define NOIPA __attribute__((noinline, noipa))
#else
#define NOIPA __attribute__((noinline))
#endif

NOIPA void
empty(void);

NOIPA void
empty(void)
{
    /* A 4-byte nop, as endbr64 is in a CET build: the entry block (nop, ret) then has
     * the 5 bytes a jump needs. */
    __asm__ volatile(".byte 0x0f, 0x1f, 0x40, 0x00"); /* nopl 0(%rax) */
}

int
main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000000;
    struct timespec a, b, ca, cb;

    clock_gettime(CLOCK_MONOTONIC, &a);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ca);
    for (long i = 0; i < n; i++)
        empty();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cb);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.3f ns/call\n",
        ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec))
            / (double)n);
    printf("%.3f cpu ns/call\n",
        ((double)(cb.tv_sec - ca.tv_sec) * 1e9 + (double)(cb.tv_nsec - ca.tv_nsec))
            / (double)n);
    return 0;
}
