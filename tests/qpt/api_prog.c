/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The program tests/check_libqpt instruments: work(i) is called for i = 0..N-1 and
 * returns i * 3; loop() runs a loop of known trips. With "wait FILE" it then writes
 * "done" to FILE and sleeps until killed (so a live test reads its variables), at most a
 * minute: a test that failed half-way never leaves it behind.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

volatile long sink;
__thread long tcalls; /* thread-local: work's calls in this thread */
long work(long i);
long loop(long n);

__attribute__((noinline)) long
work(long i)
{
    sink += i; /* LINE-MARK: tests/check_libqpt finds this line */
    tcalls++;
    return i * 3;
}

/* For one-time calls: six arguments, and the vector registers and an aligned stack
 * (printf of a double). */
long six(long a, long b, long c, long d, long e, long f);
long fmt(long n);

__attribute__((noinline)) long
six(long a, long b, long c, long d, long e, long f)
{
    return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f;
}

__attribute__((noinline)) long
fmt(long n)
{
    char b[64];
    return snprintf(b, sizeof(b), "%.3f", (double)n * 0.5);
}

/* A slow one, for a mutator killed during the call: sleeps MS, then creates the file
 * argv[3].called. */
long slow(long ms);
static char called[4200];

__attribute__((noinline)) long
slow(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
    while (nanosleep(&ts, &ts) != 0)
        ;
    FILE *f = fopen(called, "w");
    if (f != NULL)
        fclose(f);
    return ms;
}

__attribute__((noinline)) long
loop(long n)
{
    long s = 0;
    for (long k = 0; k < n; k++)
        s += k * sink;
    return s;
}

int
main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20;
    long t = 0;
    for (long i = 0; i < n; i++)
        t += work(i);
    t += loop(7);
    printf("%ld\n", t);
    fflush(stdout);
    if (argc > 3 && strcmp(argv[2], "wait") == 0) {
        snprintf(called, sizeof(called), "%s.called", argv[3]);
        FILE *f = fopen(argv[3], "w");
        if (f != NULL) {
            fputs("done\n", f);
            fclose(f);
        }
        alarm(60);
        for (;;)
            pause();
    }
    return 0;
}
