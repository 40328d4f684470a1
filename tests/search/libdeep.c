/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/* A CPU-bound procedure deep in a shared library: main -> run_app -> stage1 ->
 * hot_entry (libsearchhot.so, through the PLT) -> hot_mid -> hot_crunch. Runs for argv[1]
 * seconds. */
#include <stdlib.h>
#include <time.h>

void hot_entry(int n);
volatile int done;

static double
now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

__attribute__((noinline)) void
stage1(void)
{
    hot_entry(200000);
    done = 1;
}

__attribute__((noinline)) void
run_app(double secs)
{
    double end = now() + secs;
    while (now() < end)
        stage1();
    done = 2;
}

int
main(int argc, char **argv)
{
    run_app(argc > 1 ? atof(argv[1]) : 3);
    return 0;
}
