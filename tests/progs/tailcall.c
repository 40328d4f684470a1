/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Tail calls: at -O2 the calls in return position become jumps, to other functions,
 * through a switch whose cases are all tail calls (a table of tail jumps), and through
 * a function pointer (jmp *reg). A procedure's end is then a jump, not a ret.
 */
#include <stdio.h>

typedef long (*op_fn)(long, long);

static long __attribute__((noinline)) op_add(long a, long b) { return a + b; }
static long __attribute__((noinline)) op_sub(long a, long b) { return a - b; }
static long __attribute__((noinline)) op_mul(long a, long b) { return a * b % 1000003; }
static long __attribute__((noinline)) op_xor(long a, long b) { return a ^ b; }
static long __attribute__((noinline)) op_max(long a, long b) { return a > b ? a : b; }
static long __attribute__((noinline)) op_min(long a, long b) { return a < b ? a : b; }
static long __attribute__((noinline)) op_avg(long a, long b) { return (a + b) / 2; }
static long __attribute__((noinline)) op_mod(long a, long b) { return b ? a % b : a; }

static long __attribute__((noinline)) by_switch(int k, long a, long b)
{
    switch (k) {
    case 0: return op_add(a, b);
    case 1: return op_sub(a, b);
    case 2: return op_mul(a, b);
    case 3: return op_xor(a, b);
    case 4: return op_max(a, b);
    case 5: return op_min(a, b);
    case 6: return op_avg(a, b);
    case 7: return op_mod(a, b);
    default: return a;
    }
}

static op_fn volatile table[8]
    = { op_add, op_sub, op_mul, op_xor, op_max, op_min, op_avg, op_mod };

static long __attribute__((noinline)) by_pointer(int k, long a, long b)
{
    return table[k & 7](a, b);
}

/* A self tail call that becomes a loop, and a mutual tail call pair. */
static long __attribute__((noinline)) gcd(long a, long b)
{
    return b == 0 ? a : gcd(b, a % b);
}

static long
ping(long n, long acc);
static long __attribute__((noinline)) pong(long n, long acc)
{
    return n <= 0 ? acc : ping(n - 1, acc * 3 % 10007);
}
static long __attribute__((noinline)) ping(long n, long acc)
{
    return n <= 0 ? acc : pong(n - 1, acc + 7);
}

int
main(void)
{
    long s = 1, p = 1;
    for (int i = 0; i < 300; i++) {
        s = by_switch(i % 9, s, i + 3);
        p = by_pointer(i, p, i * 5 + 1);
    }
    printf("switch=%ld pointer=%ld\n", s, p);
    printf("gcd=%ld pingpong=%ld\n", gcd(1071, 462), ping(100001, 1));
    return (int)((s ^ p) & 7);
}
