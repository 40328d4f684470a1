/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * A switch dispatched in a loop with more values live across calls than AArch64 has
 * callee-saved registers (tests/a64.sh): gcc -O2 keeps the table's address in a stack
 * slot and reloads it before each `br` (as sqlite's VM does). Rewritten, vm() is
 * relocated and its table retargeted: no dispatch through the old text.
 */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) long mix(long a, long b)
{
    return (a * 31 + b) ^ (a >> 5);
}
/* The default case: rare, out of the way (the table's code falls through its bound). */
__attribute__((cold, noinline)) long odd(long a, int pc)
{
    return a ^ pc;
}
/* Called through a pointer: gcc cannot know which registers it keeps. */
static long (*volatile mixp)(long, long) = mix;

#define C(k, x, y) case k: x = mixp(x, y + k); y += x >> 3; break;
__attribute__((noinline)) long vm(const unsigned char *code, long seed)
{
    long a = seed, b = seed + 1, c = seed + 2, d = seed + 3, e = seed + 4, f = seed + 5;
    long g = seed + 6, h = seed + 7, i = seed + 8, j = seed + 9, k = seed + 10, l = seed + 11;
    for (int pc = 0;; pc++) {
        switch (code[pc]) {
        C(0, a, b) C(1, b, c) C(2, c, d) C(3, d, e) C(4, e, f) C(5, f, g)
        C(6, g, h) C(7, h, i) C(8, i, j) C(9, j, k) C(10, k, l) C(11, l, a)
        C(12, a, c) C(13, b, d) C(14, c, e) C(15, d, f) C(16, e, g) C(17, f, h)
        C(18, g, i) C(19, h, j) C(20, i, k) C(21, j, l) C(22, k, a) C(23, l, b)
        case 24: return a + b + c + d + e + f + g + h + i + j + k + l;
        default: a = odd(a, pc);
        }
    }
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 5000;
    unsigned char *code = malloc((size_t)n + 1);
    if (code == NULL)
        return 1;
    for (int p = 0; p < n; p++)
        code[p] = (unsigned char)((p * 7919) % 29 == 24 ? 99 : (p * 7919) % 29);
    code[n] = 24; /* the end */
    /* The ground truth of the counts: how often vm() calls mix() and odd(). */
    int nmix = 0, nodd = 0;
    for (int p = 0; p < n; p++)
        nmix += code[p] < 24, nodd += code[p] > 24;
    printf("%ld\ncalls: mix %d odd %d\n", vm(code, 3), nmix, nodd);
    free(code);
    return 0;
}
