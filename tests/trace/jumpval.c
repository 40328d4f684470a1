/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * A tail call through a pointer (QPT_TB_JUMPVAL: the jump records its target) to a
 * procedure that records no ENTER: its address is computed at run time (g's plus the
 * offset argv[1] gives; tests/trace.sh passes f's address less g's), so the analysis
 * does not see it held, and main calls it directly. Without the target record the walk
 * could not tell where the jump went (a cut at f's first record).
 */
#include <stdio.h>
#include <stdlib.h>

static volatile int sink;

__attribute__((noipa)) int g(int x)
{
    sink++;
    return x + 1;
}

__attribute__((noipa)) int f(int x)
{
    int s = 0;
    for (int i = 0; i < x % 7; i++)
        s += i;
    return s;
}

static long delta;

__attribute__((noipa)) int jumper(int x)
{
    int (*fp)(int) = (int (*)(int))((char *)g + delta);
    return fp(x + 1); /* jmp *%rax at -O2 */
}

int main(int argc, char **argv)
{
    delta = argc > 1 ? strtol(argv[1], NULL, 0) : 0;
    int s = f(3);
    for (int i = 0; i < 200; i++)
        s += jumper(i);
    printf("%d %d\n", s, sink);
    return 0;
}
