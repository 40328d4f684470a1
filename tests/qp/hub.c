/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * A recursion through a hub, as in an interpreter: eval calls one of three helpers, each
 * of which calls eval again, so the four are one cycle of the call graph. qp keeps a
 * counter of its own for the hub alone and counts the helpers' calls at their call sites
 * (QP_PROC_BY_CALLS); built with -DFLAT the helpers do not call back, and eval too is
 * counted so (tests/qp-truth.sh compares the two).
 */
#include <stdio.h>

#ifdef FLAT
#define BACK(op, depth) 0L
#else
#define BACK(op, depth) eval(op, depth)
#endif

static long eval(int op, int depth);

static long __attribute__((noinline)) one(int depth)
{
    return 1 + BACK(1, depth - 1);
}

static long __attribute__((noinline)) two(int depth)
{
    return 2 * BACK(2, depth - 1) + 1;
}

static long __attribute__((noinline)) three(int depth)
{
    return 3 + BACK(0, depth - 2);
}

static long __attribute__((noinline)) eval(int op, int depth)
{
    if (depth <= 0)
        return 0;
    return op == 0 ? one(depth) : op == 1 ? two(depth) : three(depth);
}

int
main(int argc, char **argv)
{
    long sum = 0;
    (void)argv;
    for (int i = 0; i < 100 + argc; i++)
        sum += eval(i % 3, 12) % 1000;
    printf("%ld\n", sum);
    return 0;
}
