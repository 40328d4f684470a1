/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Sparse switches: case values too far apart for a table, so compilers emit compare
 * chains or a binary search tree; plus a mixed switch (a dense cluster and outliers),
 * which can become a table behind a range check.
 */
#include <stdio.h>

static int __attribute__((noinline)) sparse(long x)
{
    switch (x) {
    case 1: return 3;
    case 100: return 5;
    case 1000: return 7;
    case 4096: return 11;
    case 65537: return 13;
    case 1000000: return 17;
    case -5: return 19;
    case 123456789: return 23;
    case 77: return 29;
    default: return 1;
    }
}

static int __attribute__((noinline)) mixed(int x)
{
    switch (x) {
    case 10: return 1;
    case 11: return 4;
    case 12: return 9;
    case 13: return 16;
    case 14: return 25;
    case 15: return 36;
    case 16: return 49;
    case 17: return 64;
    case 500: return 100;
    case 9000: return 200;
    default: return 0;
    }
}

int
main(void)
{
    static const long keys[]
        = { 1, 2, 100, 1000, 4096, 65537, 1000000, -5, 123456789, 77, 0 };
    long prod = 1;
    int msum = 0;
    for (unsigned i = 0; i < sizeof keys / sizeof keys[0]; i++)
        prod = prod * sparse(keys[i]) % 1000003;
    for (int x = 0; x < 10000; x += 7)
        msum += mixed(x) + mixed(x + 10 - x % 8);
    msum += mixed(500) + mixed(9000);
    printf("sparse prod=%ld\n", prod);
    printf("mixed sum=%d\n", msum);
    return 0;
}
