/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Ground truth for edge profiling: every procedure's number of calls is fixed by
 * construction and listed in truth.expect (name calls). Run as `truth` it returns from
 * main; `truth exit` leaves through exit() called three frames below main, with calls
 * still in flight, so conservation only holds once the exit back-trace is used.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

/* Every procedure writes it: no procedure is pure, so the compiler cannot merge or drop
 * calls. */
volatile int sink;

/* A loop with a fixed trip count and a branch taken one time in three. */
NOINLINE static int
thirds(int n)
{
    int s = 0;
    sink++;
    for (int i = 0; i < n; i++) {
        if (i % 3 == 0)
            s += i;
        else
            s -= 1;
    }
    return s;
}

/* Recursion: fib(n) is called fib_calls(n) = 2 fib(n+1) - 1 times. */
NOINLINE static int
fib(int n)
{
    sink++;
    if (n < 2)
        return n;
    int a = fib(n - 1);
    int b = fib(n - 2);
    sink++; /* neither call is in tail position: no accumulator loop */
    return a + b;
}

/* A switch dense enough for a jump table. */
NOINLINE static int
dispatch(int op, int x)
{
    sink++;
    switch (op) {
    case 0: return x + 1;
    case 1: return x * 3;
    case 2: return x - 7;
    case 3: return x ^ 0x55;
    case 4: return x << 2;
    case 5: return x / 3;
    case 6: return -x;
    default: return 0;
    }
}

/* Calls through pointers. */
NOINLINE static int op_a(int x) { sink++; return x + 1; }
NOINLINE static int op_b(int x) { sink++; return x * 2; }
NOINLINE static int op_c(int x) { sink++; return x - 3; }
static int (*const table[3])(int) = { op_a, op_b, op_c };

/* A loop back to the entry block: a tail-recursive count-down the compiler may turn
 * into a loop. Calls are entries from outside, not iterations. */
NOINLINE static int
countdown(int n, int acc)
{
    sink++;
    if (n == 0)
        return acc;
    return countdown(n - 1, acc + n);
}

NOINLINE static void
depth3(int code)
{
    sink = code;
    exit(code);
}

NOINLINE static void
depth2(int code)
{
    depth3(code);
    sink = 2; /* never reached */
}

NOINLINE static void
depth1(int code)
{
    depth2(code);
    sink = 1; /* never reached */
}

int
main(int argc, char **argv)
{
    int s = 0;
    for (int k = 0; k < 10; k++)
        s += thirds(100);
    s += fib(15);
    for (int i = 0; i < 800; i++)
        s += dispatch(i % 8, i);
    for (int i = 0; i < 300; i++)
        s += table[i % 3](i);
    for (int i = 0; i < 5; i++)
        s += countdown(20, 0);
    printf("%d\n", s);
    fflush(stdout);
    if (argc > 1 && strcmp(argv[1], "exit") == 0)
        depth1(7);
    return 0;
}
