/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/* A CPU-bound procedure (crunch) that its caller (work) calls after 20 light ones: more
 * callees than the search tests at once. Runs for argv[1] seconds. */
#include <stdlib.h>
#include <time.h>

volatile double sink;
/* Each procedure ends with a store after its last call: room for a live exit snippet. */
volatile int done;

#define LIGHT(k)                                                                          \
    __attribute__((noinline)) void light##k(void)                                         \
    {                                                                                     \
        sink += k;                                                                        \
        done = k;                                                                         \
    }
LIGHT(1) LIGHT(2) LIGHT(3) LIGHT(4) LIGHT(5) LIGHT(6) LIGHT(7) LIGHT(8) LIGHT(9) LIGHT(10)
LIGHT(11) LIGHT(12) LIGHT(13) LIGHT(14) LIGHT(15) LIGHT(16) LIGHT(17) LIGHT(18) LIGHT(19)
LIGHT(20)

__attribute__((noinline)) void
crunch(int n)
{
    double x = 0;
    for (int i = 0; i < n; i++)
        x += (double)i * 0.5;
    sink = x;
    done = 21;
}

__attribute__((noinline)) void
work(void)
{
    light1(), light2(), light3(), light4(), light5(), light6(), light7(), light8();
    light9(), light10(), light11(), light12(), light13(), light14(), light15(), light16();
    light17(), light18(), light19(), light20();
    crunch(200000);
    done = 22;
}

static double
now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int
main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 5, t0 = now();
    while (now() - t0 < secs)
        work();
    return 0;
}
