/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Truth program for timers read while running (tests/dyn-timers.sh): long calls whose
 * running part a sampler must see grow, before they return.
 *   prog sleep SECS      one call of wait_call: sleeps SECS (wall time, no CPU)
 *   prog spin SECS       one call of spin_call: spins SECS of the thread's CPU time
 *   prog threads SECS    two threads in wait_call at once, each for SECS
 *   prog spins SECS      two threads in spin_call at once, each for SECS of its CPU
 *   prog recurse SECS    rec_call 5 levels deep, the innermost sleeps SECS
 *   prog inside SECS FILE  writes FILE inside a call of wait_call (SECS): a dyn that
 *                          attaches now finds the thread inside, with no start
 *                          recorded; then one more call of 1 s
 * Each prints what it did; exit status 0.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double
secs_of(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *mark; /* inside: the file written once inside wait_call */

__attribute__((noinline)) void
wait_call(double secs)
{
    if (mark != NULL) {
        FILE *f = fopen(mark, "w");
        if (f != NULL)
            fclose(f);
    }
    double end = secs_of(CLOCK_MONOTONIC) + secs;
    for (double now; (now = secs_of(CLOCK_MONOTONIC)) < end;) {
        double left = end - now;
        struct timespec ts
            = { (time_t)left, (long)((left - (double)(time_t)left) * 1e9) };
        nanosleep(&ts, NULL);
    }
}

__attribute__((noinline)) unsigned long
spin_call(double secs)
{
    volatile unsigned long x = 0;
    double end = secs_of(CLOCK_THREAD_CPUTIME_ID) + secs;
    while (secs_of(CLOCK_THREAD_CPUTIME_ID) < end)
        for (int i = 0; i < 100000; i++)
            x += (unsigned long)i;
    return x;
}

__attribute__((noinline)) int
rec_call(int depth, double secs)
{
    volatile int here = depth; /* a frame: room for dyn's jumps at entry and exit */
    int r = 0;
    if (depth == 0)
        wait_call(secs);
    else
        r = rec_call(depth - 1, secs) + 1;
    return r + here - depth;
}

static void *
thread_main(void *arg)
{
    wait_call(*(double *)arg);
    return NULL;
}

static void *
spin_main(void *arg)
{
    spin_call(*(double *)arg);
    return NULL;
}

int
main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s sleep|spin|threads|spins|recurse|inside SECS [FILE]\n",
            argv[0]);
        return 2;
    }
    double secs = atof(argv[2]);
    if (strcmp(argv[1], "sleep") == 0)
        wait_call(secs);
    else if (strcmp(argv[1], "spin") == 0)
        spin_call(secs);
    else if (strcmp(argv[1], "threads") == 0 || strcmp(argv[1], "spins") == 0) {
        pthread_t t[2];
        for (int i = 0; i < 2; i++)
            if (pthread_create(
                    &t[i], NULL, argv[1][1] == 'h' ? thread_main : spin_main, &secs)
                != 0)
                return 3;
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
    } else if (strcmp(argv[1], "recurse") == 0)
        printf("depth %d\n", rec_call(4, secs) + 1);
    else if (strcmp(argv[1], "inside") == 0 && argc > 3) {
        mark = argv[3];
        wait_call(secs);
        mark = NULL;
        wait_call(1.0);
    } else
        return 2;
    printf("%s %.1f done\n", argv[1], secs);
    return 0;
}
