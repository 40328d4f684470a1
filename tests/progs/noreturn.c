/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Noreturn paths: a function that always calls exit, an abort() that is never reached,
 * __builtin_unreachable after a switch that covers every value, and the final exit(3)
 * three calls deep, so the program's status is 3 and its stdio buffers are flushed by
 * exit.
 */
#include <stdio.h>
#include <stdlib.h>

static void __attribute__((noreturn, noinline)) die(const char* why, int status)
{
    fprintf(stderr, "noreturn: %s\n", why);
    exit(status);
}

static int __attribute__((noinline)) check(int x)
{
    if (x < 0)
        abort(); /* never happens */
    if (x > 1000000)
        die("too big", 4); /* never happens */
    return x * 2;
}

static int __attribute__((noinline)) classify(unsigned x)
{
    switch (x & 3) {
    case 0: return 10;
    case 1: return 20;
    case 2: return 30;
    case 3: return 40;
    }
    __builtin_unreachable();
}

static int total;

static void __attribute__((noinline)) depth3(int v)
{
    total += v;
    printf("depth3: total=%d\n", total);
    if (total > 100)
        die("total over 100 at depth 3", 3);
    printf("depth3: not reached\n");
}

static void __attribute__((noinline)) depth2(int v)
{
    depth3(v + 1);
    printf("depth2: not reached\n");
}

static void __attribute__((noinline)) depth1(int v)
{
    depth2(v + 1);
    printf("depth1: not reached\n");
}

int
main(void)
{
    for (unsigned i = 0; i < 7; i++)
        total += check(classify(i));
    printf("total=%d\n", total);
    depth1(total);
    return 0;
}
