/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * For tests/mdl-fields.sh: calls under way when a timer goes in (catch-up). main and one
 * thread each enter busy() at once and spin in it for argv[1] seconds; a tool attaches
 * meanwhile. A timer of busy() inserted then must count both calls from its insertion
 * on, where it read 0 before.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

double busy(double secs);

static double
now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

__attribute__((noipa)) double
busy(double secs)
{
    volatile double x = 0;
    double end = now() + secs;
    while (now() < end)
        for (int i = 0; i < 1000; i++)
            x += i;
    return x;
}

static void *
thread_main(void *arg)
{
    busy(*(double *)arg);
    return NULL;
}

int
main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 5;
    pthread_t t;
    if (pthread_create(&t, NULL, thread_main, &secs) != 0)
        return 1;
    busy(secs);
    pthread_join(t, NULL);
    printf("done\n");
    return 0;
}
