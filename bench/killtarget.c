/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The small target of bench/dyn-kill-stress.sh and tests/dyn-clean.sh: procedures of
 * every shape dyn patches (1-byte rets followed by a REX-prefixed neighbour, entries
 * shorter than a jump with and without padding after them, loops at the entry, call
 * sites), called nonstop from two threads.
 *   killtarget STOPFILE   work in rounds until STOPFILE exists, then print the result
 *   killtarget -          print the result a run must print (no work)
 * Built with -O2 -falign-functions=1 (procedures packed: neighbours' bytes borrowed).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define NOINL __attribute__((noinline))
#define PADDED __attribute__((noinline, aligned(16)))

volatile long sink;

NOINL void r0(void) { }
NOINL long q0(long x) { return x * 3 + 1; } /* (a REX prefix first) */
NOINL void r1(void) { }
NOINL long q1(long x) { return x ^ 0x55; }
NOINL int t0(int x) { return x + 1; }
NOINL int t1(int x) { return x - 1; }
PADDED int t2(int x) { return x * 2; }
PADDED int t3(int x) { return x >> 1; }
NOINL int t4(int x) { return -x; }
NOINL long loop0(long n)
{
    long s = 0;
    for (long i = 0; i < n; i++)
        s += i * i ^ (s >> 3);
    return s;
}
NOINL long loop1(const int *v, int n)
{
    long s = 0;
    while (n-- > 0)
        s += *v++;
    return s;
}
NOINL long work(long k)
{
    int v[8];
    long s = 0;
    for (int i = 0; i < 8; i++)
        v[i] = t0(i) + t1((int)k) + t2(i) + t3(i) + t4(i);
    r0();
    s += q0(k) + q1(k);
    r1();
    s += loop0(k & 63) + loop1(v, 8);
    return s;
}
PADDED long round_once(void)
{
    long s = 0;
    for (long k = 0; k < 2000; k++)
        s += work(k);
    return s;
}

static const char *stop;
static long expect;
static long errors[2];

static void *
worker(void *arg)
{
    long *err = arg;
    while (access(stop, F_OK) != 0)
        if (round_once() != expect)
            (*err)++;
    return NULL;
}

int
main(int argc, char **argv)
{
    pthread_t t;

    if (argc != 2)
        return 2;
    expect = round_once();
    if (strcmp(argv[1], "-") != 0) {
        stop = argv[1];
        pthread_create(&t, NULL, worker, &errors[1]);
        worker(&errors[0]);
        pthread_join(t, NULL);
    }
    printf("result %ld errors=%ld\n", expect, errors[0] + errors[1]);
    return errors[0] + errors[1] != 0;
}
