/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * A shared library whose procedures' counts are known (tests/shlib.sh): a hot loop, a
 * call through the library's own PLT, an IFUNC (its resolver runs during relocation,
 * before the library's DT_INIT), callbacks into the program, calls from threads, and an
 * exit from two frames deep inside the library.
 */
#include <stdio.h>
#include <stdlib.h>

int lib_square(int x);
static int ctor_ran;

__attribute__((constructor)) static void
lib_ctor(void)
{
    ctor_ran++;
}

__attribute__((noinline)) int
lib_square(int x)
{
    return x * x;
}

/* lib_square is preemptible: called through the PLT unless -fno-plt. */
long
lib_sum(int n)
{
    long s = 0;
    for (int i = 0; i < n; i++)
        s += (i % 3 == 0) ? lib_square(i) : i;
    return s;
}

static int
pick_plain(int x)
{
    return x + 1;
}

static int (*resolve_pick(void))(int)
{
    return pick_plain;
}

int lib_pick(int x) __attribute__((ifunc("resolve_pick")));

int
lib_apply(int (*f)(int), int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += f(i);
    return s;
}

static volatile long ticks_seen;

__attribute__((noinline)) void
lib_tick(void)
{
    ticks_seen++; /* racy on purpose: only the calls are counted exactly */
}

int
lib_ctor_ran(void)
{
    return ctor_ran;
}

__attribute__((noinline)) static void
quit_inner(int code)
{
    printf("quitting with %d\n", code);
    fflush(stdout);
    exit(code);
}

__attribute__((noinline)) void
lib_quit(int code)
{
    if (code > 0)
        quit_inner(code);
}
