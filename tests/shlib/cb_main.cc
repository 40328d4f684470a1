// Copyright 2026 the qpt authors
// SPDX-License-Identifier: MIT
// 100 calls of lib_apply (tests/shlib/cb.c), 90 of them left by the callback's throw.
#include <cstdio>
#include <stdexcept>
extern "C" int lib_apply(int (*cb)(int), int n);
static int limit;
static int cb(int i) { if (i == limit) throw std::runtime_error("x"); return i; }
int main() {
    int caught = 0; long s = 0;
    for (int k = 0; k < 100; k++) {
        limit = k % 10 == 0 ? 1000 : k % 7;
        try { s += lib_apply(cb, 20); } catch (const std::exception &) { caught++; }
    }
    std::printf("%d %ld\n", caught, s);
}
