/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/* Timers per call site (tests/mdl-sites.sh): nap is called from three sites, each
 * sleeping a known time in all: work's first site 5 x 30 ms, its second 5 x 10 ms, and
 * main's 1 x 20 ms; nanosleep (through the PLT) from nap's one site, 220 ms. With an
 * argument N: N naps of 200 ms from one site of main (a thread almost always inside the
 * callee, for an attach). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

volatile int done;

__attribute__((noinline)) void
nap(int ms)
{
    struct timespec t = { 0, ms * 1000000L };
    nanosleep(&t, NULL);
}

__attribute__((noinline)) void
work(void)
{
    for (int i = 0; i < 5; i++) {
        nap(30);
        nap(10);
    }
    done = 1;
}

int
main(int argc, char **argv)
{
    for (int i = argc > 1 ? atoi(argv[1]) : 0; i > 0; i--)
        nap(200);
    if (argc > 1) {
        printf("slept\n");
        return 0;
    }
    work();
    nap(20);
    printf("slept\n");
    return 0;
}
