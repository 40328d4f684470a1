/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * For tests/check_metrics: calls of known counts, arguments and nesting. leaf is called
 * 51 times: 5 from main through inner (arguments 0..4), 12 inside outer (0, 1, 2 four
 * times), once at the bottom of rec's recursion (100), once in escape inside guarded
 * (50), which a longjmp then leaves without its exits, twice through around (0, 1: not
 * inside guarded), and 3t times inside outer(t) in each of 4 threads t = 1..4.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>

volatile long sink;
void leaf(long x);
void inner(long k);
long outer(long n);
void rec(long d);
void escape(void);
void guarded(void);
void around(void);

__attribute__((noinline)) void
leaf(long x)
{
    sink += x;
}

__attribute__((noinline)) void
inner(long k)
{
    for (long i = 0; i < k; i++)
        leaf(i);
}

__attribute__((noinline)) long
outer(long n)
{
    for (long i = 0; i < n; i++)
        inner(3);
    return sink * 3 + 1; /* a return block long enough for a live patch */
}

__attribute__((noinline)) void
rec(long d)
{
    if (d == 0) {
        leaf(100);
        return;
    }
    rec(d - 1);
    __asm__ volatile(""); /* not a tail call */
}

static jmp_buf jb;

__attribute__((noinline)) void
escape(void)
{
    leaf(50);
    longjmp(jb, 1);
}

__attribute__((noinline)) void
guarded(void)
{
    __asm__ volatile("nop; nop; nop; nop; nop"); /* live: its entry must not be a call */
    escape();
    __asm__ volatile("");
}

__attribute__((noinline)) void
around(void)
{
    inner(2);
    __asm__ volatile("");
}

/* The threads live at once but take turns: leaf's `sink += x` is not atomic, and the sum
 * is the output (the rewritten program's slower threads overlapped and lost updates). */
static pthread_mutex_t turn = PTHREAD_MUTEX_INITIALIZER;

static void *
thread(void *arg)
{
    pthread_mutex_lock(&turn);
    outer((long)arg);
    pthread_mutex_unlock(&turn);
    return NULL;
}

int
main(void)
{
    inner(5);
    outer(4);
    rec(3);
    if (!setjmp(jb))
        guarded();
    around();
    pthread_t th[4];
    for (long t = 0; t < 4; t++)
        pthread_create(&th[t], NULL, thread, (void *)(t + 1));
    for (int t = 0; t < 4; t++)
        pthread_join(th[t], NULL);
    printf("%ld\n", sink);
    return 0;
}
