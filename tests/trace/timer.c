/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Asynchronous signals: an interval timer (SIGALRM every argv[2] us, default 100)
 * interrupts a loop of argv[1] turns (default 300000) of branches and calls (direct,
 * through a pointer, of the C library) anywhere, hundreds of times; the handler runs code
 * of its own (on_alarm, tick_work) and returns. Where the signals come differs from run
 * to run, so tests/trace.sh compares the naive and chord traces without the handler's
 * blocks (the program's own path is the same), and requires no cut mark: every handler
 * placed exactly or marked "async".
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static volatile long ticks, tacc;

static void __attribute__((noinline))
tick_work(long n)
{
    for (long i = 0; i < n % 7 + 1; i++)
        tacc += (i & 1) ? i : -i;
}

static void
on_alarm(int sig)
{
    (void)sig;
    ticks++;
    tick_work(ticks);
}

static int __attribute__((noinline))
step(int x)
{
    int r = x;
    if (x % 3 == 0)
        r += x / 3;
    else if (x % 3 == 1)
        r ^= 0x55;
    else
        r -= 7;
    return r;
}

static int (*volatile step_ptr)(int) = step;

int
main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 300000, acc = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    long us = argc > 2 ? atol(argv[2]) : 100;
    struct itimerval it = { { 0, us }, { 0, us } };
    setitimer(ITIMER_REAL, &it, NULL);
    char buf[32];
    for (long i = 0; i < n; i++) {
        if (i & 1)
            acc += step((int)i);
        else
            acc += step_ptr((int)i);
        if (i % 1000 == 0) {
            snprintf(buf, sizeof buf, "%ld", acc); /* the C library, calling nothing back */
            acc += (long)strlen(buf);
        }
    }
    memset(&it, 0, sizeof it);
    setitimer(ITIMER_REAL, &it, NULL);
    printf("acc=%ld\n", acc);
    return ticks > 0 ? 0 : 1;
}
