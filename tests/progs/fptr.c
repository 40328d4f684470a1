/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Function pointers: a table of handlers in writable and read-only data, a callback
 * passed to libc (qsort, bsearch), a pointer returned by a function, and a struct of
 * operations (a vtable written by hand). Code addresses live in data: with PIE they
 * come from R_X86_64_RELATIVE relocations, without it they are absolute words.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*unop)(int);

static int
dbl(int x)
{
    return 2 * x;
}
static int
inc(int x)
{
    return x + 1;
}
static int
sq(int x)
{
    return x * x % 10007;
}
static int
neg(int x)
{
    return -x;
}
static int
half(int x)
{
    return x / 2;
}

static const unop rotable[] = { dbl, inc, sq, neg, half };
static unop rwtable[] = { inc, inc, dbl, sq, neg, half, dbl };

static unsigned long ncompares;

static int
cmp_int(const void* a, const void* b)
{
    int x = *(const int*)a, y = *(const int*)b;
    ncompares++;
    return (x > y) - (x < y);
}

static int
cmp_str(const void* a, const void* b)
{
    ncompares++;
    return strcmp(*(const char* const*)a, *(const char* const*)b);
}

static unop __attribute__((noinline)) pick(int k)
{
    return k % 3 == 0 ? sq : k % 3 == 1 ? dbl : inc;
}

struct shape_ops {
    const char* name;
    long (*area)(long);
    long (*perimeter)(long);
};

static long
sq_area(long s)
{
    return s * s;
}
static long
sq_per(long s)
{
    return 4 * s;
}
static long
tri_area(long s)
{
    return s * s * 433 / 1000;
}
static long
tri_per(long s)
{
    return 3 * s;
}

static const struct shape_ops shapes[] = {
    { "square", sq_area, sq_per },
    { "triangle", tri_area, tri_per },
};

int
main(void)
{
    int v = 3;
    int arr[200];
    static const char* words[]
        = { "pear", "apple", "fig", "kiwi", "banana", "cherry", "date", "lime" };
    unsigned seed = 7;

    for (int i = 0; i < 50; i++) {
        v = rotable[i % 5](v);
        v = rwtable[(i * 3) % 7](v) % 100003;
        v = pick(i)(v) % 100003;
    }
    printf("v=%d\n", v);

    for (int i = 0; i < 200; i++) {
        seed = seed * 1664525u + 1013904223u;
        arr[i] = (int)(seed >> 8) % 5000;
    }
    qsort(arr, 200, sizeof arr[0], cmp_int);
    int key = arr[123];
    int* found = bsearch(&key, arr, 200, sizeof arr[0], cmp_int);
    printf("sorted: first=%d mid=%d last=%d found=%d\n", arr[0], arr[100], arr[199],
        found ? *found : -1);
    qsort(words, 8, sizeof words[0], cmp_str);
    for (int i = 0; i < 8; i++)
        printf("%s%c", words[i], i == 7 ? '\n' : ' ');
    /* qsort's comparison count depends on libc's algorithm; print only that it ran. */
    printf("compares>0: %d\n", ncompares > 0);

    for (unsigned i = 0; i < 2; i++)
        printf("%s: area=%ld perimeter=%ld\n", shapes[i].name, shapes[i].area(10),
            shapes[i].perimeter(10));
    return v & 0x7f;
}
