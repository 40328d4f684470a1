/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/* Control-flow tracing: calls the trace must tell apart - the same function called twice
 * in a row, a callback from the C library (qsort), mutual recursion, a function pointer
 * table, a switch table, a loop whose body calls nothing, a tail call. */
#include <stdio.h>
#include <stdlib.h>

static int seen;

static int __attribute__((noinline)) pick(int x)
{
    if (x & 1)
        return x * 3;
    return x / 2;
}

static int cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    seen++;
    return x < y ? -1 : x > y;
}

static int is_even(unsigned n);
static int __attribute__((noinline)) is_odd(unsigned n) { return n == 0 ? 0 : is_even(n - 1); }
static int __attribute__((noinline)) is_even(unsigned n) { return n == 0 ? 1 : is_odd(n - 1); }

static int add1(int x) { return x + 1; }
static int dbl(int x) { return 2 * x; }
static int neg(int x) { return -x; }
static int (*const ops[])(int) = { add1, dbl, neg };

static int __attribute__((noinline)) classify(int x)
{
    switch (x % 9) {
    case 0: return 10;
    case 1: return x + 7;
    case 2: return x ^ 3;
    case 3: return x * 5;
    case 4: return x - 2;
    case 5: return 4;
    case 6: return x << 1;
    default: return -1;
    }
}

static int __attribute__((noinline)) tail(int x) { return x > 5 ? pick(x + 1) : classify(x); }

int main(int argc, char **argv)
{
    int v[64];
    long s = 0;
    (void)argv;
    for (int i = 0; i < 64; i++)
        v[i] = (i * 7919 + argc) % 101;
    qsort(v, 64, sizeof v[0], cmp);
    for (int i = 0; i < 200; i++) {
        s += pick(i) + pick(i + 1);
        s += ops[i % 3](i) + classify(i) + tail(i % 11);
    }
    for (int i = 0; i < 1000; i++)
        s += i & 5;
    printf("%ld %d %d %d %d\n", s, v[0], v[63], seen > 0, is_odd(77) + is_even(40));
    return 0;
}
