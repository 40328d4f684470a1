/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/* For tests/check_metrics, modules: fa (this file) is called 3 times, fb1 and fb2
 * (mod_b.c) 5 and 7 times. */
#include <stdio.h>

long fb1(long);
long fb2(long);
long fa(long);

__attribute__((noinline)) long
fa(long x)
{
    return x + 1;
}

int
main(void)
{
    long s = 0;
    for (int i = 0; i < 3; i++)
        s += fa(i);
    for (int i = 0; i < 5; i++)
        s += fb1(i);
    for (int i = 0; i < 7; i++)
        s += fb2(i);
    printf("%ld\n", s);
    return 0;
}
