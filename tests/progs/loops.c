/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Loops with known trip counts, for exact-count profiling tests: a triple nest, a
 * do-while, a loop with break and continue, an irreducible loop (two entries, built
 * with goto) and a loop over a linked list. The expected counts are printed.
 */
#include <stdio.h>

static unsigned long inner_iters, dowhile_iters, irreducible_iters;

static long __attribute__((noinline)) nest(int n)
{
    long s = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j <= i; j++)
            for (int k = 0; k < 3; k++) {
                inner_iters++;
                s += (i ^ j) + k;
            }
    return s;
}

static int __attribute__((noinline)) collatz(long x)
{
    int steps = 0;
    do {
        dowhile_iters++;
        x = (x & 1) ? 3 * x + 1 : x / 2;
        steps++;
    } while (x != 1);
    return steps;
}

static int __attribute__((noinline)) first_multiple(const int* a, int n, int m)
{
    int skipped = 0;
    for (int i = 0; i < n; i++) {
        if (a[i] < 0) {
            skipped++;
            continue;
        }
        if (a[i] % m == 0)
            return i * 100 + skipped;
    }
    return -1;
}

static long __attribute__((noinline)) irreducible(int start_in_b, int n)
{
    long v = 1;
    if (start_in_b)
        goto b;
a:
    irreducible_iters++;
    v = v * 3 % 1009;
    if (--n <= 0)
        return v;
b:
    irreducible_iters++;
    v += 7;
    if (--n > 0)
        goto a;
    return v;
}

struct item {
    int val;
    struct item* next;
};

int
main(void)
{
    static struct item items[10];
    static const int arr[] = { -1, 4, -3, 9, 10, 25, 14 };
    long lsum = 0;
    int csteps = 0;
    for (int i = 0; i < 10; i++) {
        items[i].val = i * i;
        items[i].next = i < 9 ? &items[i + 1] : NULL;
    }
    for (const struct item* it = items; it; it = it->next)
        lsum += it->val;
    for (long x = 1; x <= 30; x++)
        csteps += x == 1 ? 0 : collatz(x);
    long ns = nest(40);
    printf("nest=%ld inner_iters=%lu (expect %d)\n", ns, inner_iters, 40 * 41 / 2 * 3);
    printf("collatz steps=%d dowhile_iters=%lu\n", csteps, dowhile_iters);
    int f5 = first_multiple(arr, 7, 5), f7 = first_multiple(arr, 7, 7);
    printf("first_multiple=%d %d\n", f5, f7);
    long i0 = irreducible(0, 11), i1 = irreducible(1, 10);
    printf("irreducible=%ld %ld iters=%lu\n", i0, i1, irreducible_iters);
    printf("list sum=%ld\n", lsum);
    return (int)(lsum % 256);
}
