/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/* A CPU-bound procedure deep in a call chain: main -> run_app -> stage1 -> stage2 ->
 * crunch, beside light procedures (log_progress, tidy) that take little time. Runs for
 * argv[1] seconds. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

volatile double sink;
/* Each procedure ends with a store after its last call: room for a live exit snippet. */
volatile int done;

__attribute__((noinline)) void
crunch(int n)
{
    double x = 0;
    for (int i = 0; i < n; i++)
        x += (double)i * 0.5;
    sink = x;
    done = 4;
}

__attribute__((noinline)) void
tidy(void)
{
    sink = 0;
}

__attribute__((noinline)) void
log_progress(int k)
{
    if (k < 0)
        printf("%d\n", k);
}

__attribute__((noinline)) void
stage2(void)
{
    crunch(200000);
    tidy();
    done = 2;
}

__attribute__((noinline)) void
stage1(int k)
{
    stage2();
    log_progress(k);
    done = 1;
}

static double
now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

__attribute__((noinline)) void
run_app(double secs)
{
    double end = now() + secs;
    for (int k = 0; now() < end; k++)
        stage1(k);
    done = 3;
}

int
main(int argc, char **argv)
{
    run_app(argc > 1 ? atof(argv[1]) : 3);
    return 0;
}
