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
#include <unistd.h>

volatile long sink;
long work(long i);
long loop(long n);

__attribute__((noinline)) long
work(long i)
{
    sink += i;
    return i * 3;
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
