/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Dense switches: one with 16 cases (a jump table at every -O level), one with a small
 * range of 8 cases that gcc and clang turn into a table at -O2, and one whose cases tail
 * into different code so the table entries are not all alike.
 */
#include <stdio.h>

static unsigned __attribute__((noinline)) dense16(unsigned x, unsigned acc)
{
    switch (x) {
    case 0: return acc + 1;
    case 1: return acc * 3;
    case 2: return acc ^ 0x55;
    case 3: return acc - 7;
    case 4: return acc << 1;
    case 5: return acc >> 1;
    case 6: return acc + x * x;
    case 7: return ~acc;
    case 8: return acc * 5 + 1;
    case 9: return acc | 0x100;
    case 10: return acc & 0xfff;
    case 11: return acc + 11;
    case 12: return acc * 7;
    case 13: return acc - 13;
    case 14: return acc ^ 0xabc;
    case 15: return acc + (acc >> 3);
    default: return acc;
    }
}

static int __attribute__((noinline)) small_range(int c)
{
    int r;
    switch (c) {
    case 'a': r = 10; break;
    case 'b': r = 22; break;
    case 'c': r = 31; break;
    case 'd': r = 47; break;
    case 'e': r = 53; break;
    case 'f': r = 68; break;
    case 'g': r = 71; break;
    case 'h': r = 89; break;
    default: r = -1; break;
    }
    return r;
}

static const char* __attribute__((noinline)) day_name(int d)
{
    switch (d) {
    case 1: return "mon";
    case 2: return "tue";
    case 3: return "wed";
    case 4: return "thu";
    case 5: return "fri";
    case 6: return "sat";
    case 7: return "sun";
    case 8: return "extra";
    case 9: return "nine";
    default: return "?";
    }
}

int
main(void)
{
    unsigned acc = 1;
    int sum = 0;
    for (unsigned i = 0; i < 1000; i++)
        acc = dense16((i * 7 + acc) % 18, acc);
    for (const char* p = "abcdefghijzab"; *p; p++)
        sum += small_range(*p);
    printf("dense16 acc=%u\n", acc);
    printf("small_range sum=%d\n", sum);
    for (int d = 0; d <= 10; d++)
        printf("%s%c", day_name(d), d == 10 ? '\n' : ' ');
    return (int)(acc % 5);
}
