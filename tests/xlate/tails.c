/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Indirect jumps whose targets the analysis cannot know (tests/xlate.sh): tail calls
 * through a table of pointers (apply: 1000 calls, to add 333, mul 334, sub 333 times),
 * and a jump that goes into the middle of another procedure (jumper, through tab: 7 of
 * its 107 jumps go to twoentry_inner, a label inside twoentry; twoentry is entered 104
 * times).
 */
#include <stdio.h>

typedef long (*op_t)(long, long);
__attribute__((noinline)) long add(long a, long b) { return a + b; }
__attribute__((noinline)) long mul(long a, long b) { return a * b; }
__attribute__((noinline)) long sub(long a, long b) { return a - b; }
op_t volatile table[3] = { add, mul, sub };

__attribute__((noinline)) long
apply(int k, long a, long b)
{
    return table[k % 3](a, b);
}

extern int twoentry(int);
extern char twoentry_inner[];
__asm__(".text\n.globl twoentry\n.type twoentry,@function\ntwoentry:\n"
        " test %edi,%edi\n jz twoentry_inner\n mov $1,%eax\n ret\n"
        ".globl twoentry_inner\ntwoentry_inner:\n mov $2,%eax\n ret\n"
        ".size twoentry,.-twoentry\n");

typedef int (*fn_t)(int);
fn_t volatile tab[2];

__attribute__((noinline)) int
jumper(int x)
{
    return tab[x & 1](x);
}

int
main(int argc, char **argv)
{
    (void)argv;
    long s = 0;
    for (int i = 0; i < 1000; i++)
        s += apply(i + argc, i, 3);
    int t = 0;
    tab[0] = tab[1] = twoentry;
    for (int i = 0; i < 100; i++)
        t += jumper(i);
    tab[1] = (fn_t)(void *)twoentry_inner;
    for (int i = 0; i < 7; i++)
        t += jumper(i);
    printf("%ld %d\n", s, t);
    return 0;
}
