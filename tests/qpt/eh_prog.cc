// Copyright 2026 the qpt authors
// SPDX-License-Identifier: MIT
//
// For tests/metrics.sh (built there with g++): inside() left by a C++ exception. guard(n)
// calls thrower(n), which calls leaf(n) and throws when n > 0; guard(0) also calls
// leaf(7). main calls guard(0..2), catching, and leaf(100) after each: leaf runs 7 times,
// 4 of them inside guard (the exception leaves guard without its return).
#include <cstdio>
#include <stdexcept>

volatile long sink, depth;
extern "C" void leaf(long x);
extern "C" void thrower(long n);
extern "C" void guard(long n);

extern "C" __attribute__((noinline)) void
leaf(long x)
{
    sink += x;
}

extern "C" __attribute__((noinline)) void
thrower(long n)
{
    leaf(n);
    if (n > 0)
        throw std::runtime_error("out of guard");
}

extern "C" __attribute__((noinline)) void
guard(long n)
{
    depth++;
    thrower(n);
    leaf(7);
    depth--;
}

int
main()
{
    for (int i = 0; i < 3; i++) {
        try {
            guard(i);
        } catch (...) {
        }
        leaf(100);
    }
    std::printf("%ld %ld\n", sink, depth);
    return 0;
}
