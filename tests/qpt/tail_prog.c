/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * For tests/mdl-fields.sh: timers over tail calls (seed 000, 4.3). outer() tail-calls
 * mid(), which tail-calls work(), which spins; outer is also called from inside work()
 * once (a nested call of a pending one); via() tail-calls work() through a pointer. The
 * program times each call of outer and of via itself and prints the totals (ns) on
 * stderr as its truth: "truth outer_ns N", "truth via_ns N".
 */
#include <stdio.h>
#include <time.h>

long outer(long n);
long mid(long n);
long work(long n);
long via(long n);

static long (*volatile target)(long) = work;

static long
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

__attribute__((noipa)) long
work(long n)
{
    volatile long x = 0;
    for (long i = 0; i < n; i++)
        x += i;
    if (n == 3000001)
        x += outer(1000); /* nested in a pending outer: covered by it */
    return x;
}

__attribute__((noipa)) long
mid(long n)
{
    return work(n + 1);
}

__attribute__((noipa)) long
outer(long n)
{
    return mid(n);
}

__attribute__((noipa)) long
via(long n)
{
    return target(n);
}

int
main(void)
{
    long s = 0, outer_ns = 0, via_ns = 0;
    for (int i = 0; i < 20; i++) {
        long t0 = now_ns();
        s += outer(i == 5 ? 3000000 : 2000000);
        outer_ns += now_ns() - t0;
        t0 = now_ns();
        s += via(1000);
        via_ns += now_ns() - t0;
    }
    printf("%d\n", s != 0);
    fprintf(stderr, "truth outer_ns %ld\ntruth via_ns %ld\n", outer_ns, via_ns);
    return 0;
}
