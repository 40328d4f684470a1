/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_BASE_CLOCK_H
#define QP_BASE_CLOCK_H
/*
 * PURPOSE: the two clocks the timers are converted with, read one way everywhere: the
 * cycle counter the snippets' wall timers read (rdtsc), and CLOCK_MONOTONIC in ns.
 * Header-only.
 */
#include <stdint.h>
#include <time.h>

static inline uint64_t
qp_cycles(void)
{
#if defined(__x86_64__)
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
#else
    return 0;
#endif
}

static inline uint64_t
qp_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
