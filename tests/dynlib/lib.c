/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The library of tests/dyn-libs.sh (built there as libqt.so): each lib_sum(100) calls
 * lib_square 34 times (i = 0, 3, ..., 99), through the library's own PLT.
 */
__attribute__((noinline)) int
lib_square(int x)
{
    return x * x;
}

long
lib_sum(int n)
{
    long s = 0;
    for (int i = 0; i < n; i++)
        s += (i % 3 == 0) ? lib_square(i) : i;
    return s;
}
