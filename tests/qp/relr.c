/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * A procedure called directly and through a pointer that only relocated data holds:
 * linked with -z pack-relative-relocs that pointer's relocation is an SHT_RELR entry,
 * not an R_X86_64_RELATIVE one (glibc's static-pie programs, newer distributions'
 * default). twice: 1,000 direct calls and 150 through ops; thrice: 150 through ops.
 */
#include <stdio.h>

#define NOINLINE __attribute__((noipa))

static volatile int sink;

NOINLINE static int twice(int x) { sink++; return 2 * x; }
NOINLINE static int thrice(int x) { sink++; return 3 * x; }

int (*ops[2])(int) = { twice, thrice }; /* global: the compiler cannot see its values */

int main(int argc, char **argv)
{
    (void)argv;
    int s = 0;
    for (int i = 0; i < 1000; i++)
        s += twice(i);
    for (int i = 0; i < 300; i++)
        s += ops[(i + argc) & 1](i);
    printf("%d %d\n", s, sink);
    return 0;
}
