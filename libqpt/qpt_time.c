/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Cycles of the time-stamp counter (what qpt_cycles and the wall-clock timers read) to
 * nanoseconds. The counter runs at a constant rate on every x86-64 CPU Linux supports
 * (constant_tsc), the same for every process of the machine, so one calibration against
 * CLOCK_MONOTONIC serves every space: two readings 20 ms apart, each taken as a
 * CLOCK_MONOTONIC read bracketed by two rdtsc, the tightest bracket of five kept (a
 * thread preempted between the two clocks would otherwise skew the rate by the time it
 * waited: on a loaded machine that is milliseconds).
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "base/qp_clock.h"
#include "libqpt/qpt_priv.h"

/* One simultaneous reading of both clocks: *TSC the middle of the tightest bracket. */
static void
reading(uint64_t *tsc, int64_t *ns)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t a = qp_cycles();
        int64_t m = (int64_t)qp_mono_ns();
        uint64_t b = qp_cycles();
        if (b - a < best) {
            best = b - a;
            *tsc = a + (b - a) / 2;
            *ns = m;
        }
    }
}

static double cycles_per_ns; /* set once by calibrate */
static pthread_once_t calibrated = PTHREAD_ONCE_INIT;

static void
calibrate(void)
{
    uint64_t c0, c1;
    int64_t n0, n1;
    reading(&c0, &n0);
    struct timespec d = { 0, 20000000 };
    while (nanosleep(&d, &d) != 0)
        ;
    reading(&c1, &n1);
    cycles_per_ns = n1 > n0 && c1 > c0 ? (double)(c1 - c0) / (double)(n1 - n0) : 0.0;
}

double
qpt_cycles_per_ns(void)
{
    pthread_once(&calibrated, calibrate);
    return cycles_per_ns;
}

uint64_t
qpt_cycles_to_ns(uint64_t cycles)
{
    double per = qpt_cycles_per_ns();
    return per > 0 ? (uint64_t)((double)cycles / per + 0.5) : 0;
}
