/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/* The second module of tests/qpt/mod_prog (see mod_a.c). */
long fb1(long);
long fb2(long);

__attribute__((noinline)) long
fb1(long x)
{
    return 2 * x;
}

__attribute__((noinline)) long
fb2(long x)
{
    return 3 * x;
}
