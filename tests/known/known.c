/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/* Small functions whose CFG shape tests/check_cfg.c asserts. Not a corpus program. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((noinline)) int
straight(int x)
{
    return x * 3 + 1;
}

__attribute__((noinline)) int
count_loop(int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += i * straight(i);
    return s;
}

__attribute__((noinline)) int
nested_loops(int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            s += straight(i ^ j);
    return s;
}

/* Ten dense cases: gcc and clang both make a jump table at -O0 and -O2. */
__attribute__((noinline)) int
sw10(int k)
{
    switch (k) {
    case 0: return straight(11);
    case 1: return straight(23) + 1;
    case 2: return straight(37) * 2;
    case 3: return straight(41) - 3;
    case 4: return straight(53) ^ 4;
    case 5: return straight(67) + 5;
    case 6: return straight(71) * 6;
    case 7: return straight(83) - 7;
    case 8: return straight(97) ^ 8;
    case 9: return straight(101) + 9;
    default: return -1;
    }
}

__attribute__((noinline, noreturn)) void
die(int code)
{
    fprintf(stderr, "die %d\n", code);
    exit(code);
}

/* Never returns, but is not declared so: the analysis must prove it. */
__attribute__((noinline)) void
die_quietly(int code)
{
    _exit(code);
}

__attribute__((noinline)) int
check_positive(int x)
{
    if (x < 0)
        die(3);
    return x + 1;
}

int
main(int argc, char **argv)
{
    (void)argv;
    int s = count_loop(argc + 9) + nested_loops(argc + 5) + check_positive(argc);
    for (int k = 0; k < 12; k++)
        s += sw10(k);
    printf("%d\n", s);
    if (argc > 5)
        die_quietly(4);
    return 0;
}
