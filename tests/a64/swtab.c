/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Switch tables of 1- and 2-byte entries, dispatched often (tests/a64.sh): rewritten,
 * their cases are reached from the table in the new code, never through the redirects
 * at the old case addresses. spread()'s and small()'s cases lie far enough apart that
 * counters between them may push a byte table out of its reach (then it keeps the
 * redirects, and says so). stay() is left in place.
 */
#include <stdio.h>
#include <stdlib.h>
#define S(k) acc = acc * 31 + (k) + (acc >> 7);
#define S8(k) S(k) S(k + 1) S(k + 2) S(k + 3) S(k + 4) S(k + 5) S(k + 6) S(k + 7)
#define S64(k) S8(k) S8(k + 8) S8(k + 16) S8(k + 24) S8(k + 32) S8(k + 40) S8(k + 48) S8(k + 56)
/* short cases: byte entries */
#define SM(k) case k: return acc * (k + 3) + (acc >> (k % 5));
__attribute__((noinline)) long small(int op, long acc)
{
    switch (op) {
    SM(0) SM(1) SM(2) SM(3) SM(4) SM(5) SM(6) SM(7) SM(8) SM(9) SM(10) SM(11)
    SM(12) SM(13) SM(14) SM(15) SM(16) SM(17) SM(18) SM(19)
    default: return 0;
    }
}
/* long cases: halfword entries */
#define BG(k) case k: S64(k) break;
__attribute__((noinline)) long big(int op, long acc)
{
    switch (op) {
    BG(0) BG(1) BG(2) BG(3) BG(4) BG(5) BG(6) BG(7) BG(8) BG(9) BG(10) BG(11)
    BG(12) BG(13) BG(14) BG(15) BG(16) BG(17) BG(18) BG(19)
    default: acc = 0;
    }
    return acc;
}
/* cases that fill a byte table's reach: counters between them overflow it */
#define SP(k) case k: S(k) if (acc & (1 << (k % 7))) { S(k + 1) } else { acc ^= k; } break;
__attribute__((noinline)) long spread(int op, long acc)
{
    switch (op) {
    SP(0) SP(1) SP(2) SP(3) SP(4) SP(5) SP(6) SP(7) SP(8) SP(9) SP(10) SP(11)
    SP(12) SP(13) SP(14) SP(15) SP(16) SP(17) SP(18) SP(19) SP(20) SP(21) SP(22)
    default: acc = 3;
    }
    return acc;
}
/* A procedure left in place (its `br` goes where the analysis cannot tell): its direct
 * calls of small() go straight to the new entry, not through the old one's redirect. */
__attribute__((noinline)) long stay(int n, long acc)
{
    for (int i = 0; i < n; i++)
        acc = (small(i % 21, acc) + i) & 0xffffff;
    if (n < 0) /* (after the calls: code its jump reaches is only swept, never patched) */
        __asm__ volatile("adr x9, 1f\n\tbr x9\n1:" ::: "x9");
    return acc;
}
int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 3000;
    long a = 1, b = 2, c = 3;
    for (int i = 0; i < n; i++) {
        a = small((int)((i * 7 + (a & 1)) % 21), a) & 0xffffff;
        b = big((int)((i * 5 + (b & 1)) % 21), b) & 0xffffff;
        c = spread((int)((i * 3 + (c & 1)) % 24), c) & 0xffffff;
    }
    printf("%ld %ld %ld %ld\n", a, b, c, stay(n, a));
    return 0;
}
