/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * cfg_prog: procedures of a known shape for the CFG walk of libqpt (tests/check_qptcfg.c,
 * built -O0 and -O2): nested has two nested loops and an if, classify a switch dense
 * enough for a jump table, rec a recursion that is no loop (a side effect after the call
 * keeps the compiler from turning it into one). The MARK comments name the lines whose
 * blocks the test places in or out of the loops. Stores go to volatile words so that the
 * optimiser keeps the shape (no vectorised copies of the loops, no lookup table for the
 * switch).
 *
 *   cfg_prog N     runs each with N; prints their results
 */
#include <stdio.h>
#include <stdlib.h>

volatile long sink, sink2;

__attribute__((noinline)) long
nested(int n)
{
    for (int i = 0; i < n; i++) { /* MARK:ofor */
        sink2 += i;               /* MARK:outer */
        for (int j = 0; j < i; j++) { /* MARK:ifor */
            if ((i ^ j) & 1) /* MARK:inner */
                sink += j;
            else
                sink -= i;
        }
    }
    return sink; /* MARK:after */
}

__attribute__((noinline)) long
classify(int c)
{
    switch (c) {
    case 0: sink += 3; break;
    case 1: sink *= 5; break;
    case 2: sink ^= 7; break;
    case 3: sink -= 11; break;
    case 4: sink |= 13; break;
    case 5: sink &= ~17L; break;
    case 6: sink <<= 1; break;
    case 7: sink >>= 2; break;
    default: sink2++; break;
    }
    return sink;
}

__attribute__((noinline)) long
rec(int n)
{
    if (n <= 0)
        return 0;
    long a = rec(n - 1);
    sink += a; /* not a tail call, and no accumulator to make a loop of */
    return a + n;
}

int
main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 10;
    long r = 0;
    nested(n);
    for (int c = 0; c < n; c++)
        r += classify(c);
    printf("nested %ld classify %ld rec %ld\n", sink2, r, rec(n));
    return 0;
}
