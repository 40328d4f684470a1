/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Recursion: naive Fibonacci (two self-calls per frame), Ackermann (deep, with a tail
 * self-call that -O2 turns into a loop), mutual recursion (is_even/is_odd) and a
 * recursive tree walk. The call counts are printed: a profile can be checked against
 * them.
 */
#include <stdio.h>
#include <stdlib.h>

static unsigned long fib_calls, ack_calls, parity_calls;

static unsigned long __attribute__((noinline)) fib(unsigned n)
{
    fib_calls++;
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

static unsigned long __attribute__((noinline)) ack(unsigned long m, unsigned long n)
{
    ack_calls++;
    if (m == 0)
        return n + 1;
    if (n == 0)
        return ack(m - 1, 1);
    return ack(m - 1, ack(m, n - 1));
}

static int
is_odd(unsigned n);

static int __attribute__((noinline)) is_even(unsigned n)
{
    parity_calls++;
    return n == 0 ? 1 : is_odd(n - 1);
}

static int __attribute__((noinline)) is_odd(unsigned n)
{
    parity_calls++;
    return n == 0 ? 0 : is_even(n - 1);
}

struct node {
    int key;
    struct node *left, *right;
};

static struct node*
insert(struct node* t, int key)
{
    if (!t) {
        t = calloc(1, sizeof *t);
        if (!t)
            exit(2);
        t->key = key;
    } else if (key < t->key) {
        t->left = insert(t->left, key);
    } else {
        t->right = insert(t->right, key);
    }
    return t;
}

static int
depth(const struct node* t)
{
    if (!t)
        return 0;
    int l = depth(t->left), r = depth(t->right);
    return 1 + (l > r ? l : r);
}

static long
walk(const struct node* t, long acc)
{
    if (!t)
        return acc;
    acc = walk(t->left, acc);
    acc = acc * 31 % 1000003 + t->key;
    return walk(t->right, acc);
}

static void
freetree(struct node* t)
{
    if (t) {
        freetree(t->left);
        freetree(t->right);
        free(t);
    }
}

int
main(void)
{
    struct node* t = NULL;
    unsigned seed = 12345;
    unsigned long f = fib(24), a1 = ack(2, 3), a2 = ack(3, 4);
    int e = is_even(1001), o = is_odd(777);
    printf("fib(24)=%lu calls=%lu\n", f, fib_calls);
    printf("ack(2,3)=%lu ack(3,4)=%lu calls=%lu\n", a1, a2, ack_calls);
    printf("even(1001)=%d odd(777)=%d calls=%lu\n", e, o, parity_calls);
    for (int i = 0; i < 500; i++) {
        seed = seed * 1103515245u + 12345u;
        t = insert(t, (int)(seed >> 16) % 10000);
    }
    int d = depth(t);
    printf("tree depth=%d walk=%ld\n", d, walk(t, 0));
    freetree(t);
    return (int)(fib_calls % 100);
}
