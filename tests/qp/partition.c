/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * tests/qp-estimate.sh: loops that run a few times a visit. bzip2's three-way partition
 * (blocksort.c, mainQSort3) of 64 keys: each scan runs a few steps before it stops. With
 * the compilers' loop odds (back edge 9:1) the static estimate made the scan from the
 * left ten times as frequent as the code around it, and gcc's layout then left a counter
 * in a taken edge's stub, whose jump back ran 650,000 times (28% of the increments);
 * with 3:1 it runs once.
 */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) int
part(int *a, int lo, int hi, int med)
{
    int unLo = lo, ltLo = lo, unHi = hi, gtHi = hi, t;
    for (;;) {
        for (;;) {
            if (unLo > unHi)
                break;
            int n = a[unLo] - med;
            if (n == 0) {
                t = a[unLo], a[unLo] = a[ltLo], a[ltLo] = t;
                ltLo++, unLo++;
                continue;
            }
            if (n > 0)
                break;
            unLo++;
        }
        for (;;) {
            if (unLo > unHi)
                break;
            int n = a[unHi] - med;
            if (n == 0) {
                t = a[unHi], a[unHi] = a[gtHi], a[gtHi] = t;
                gtHi--, unHi--;
                continue;
            }
            if (n < 0)
                break;
            unHi--;
        }
        if (unLo > unHi)
            break;
        t = a[unLo], a[unLo] = a[unHi], a[unHi] = t;
        unLo++, unHi--;
    }
    return unLo + ltLo + gtHi;
}

int
main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 20000, t = 0, a[64];
    unsigned s = 12345;
    for (int r = 0; r < n; r++) {
        for (int i = 0; i < 64; i++) {
            s = s * 1103515245 + 12345;
            a[i] = (int)((s >> 16) % 16);
        }
        t += part(a, 0, 63, 11);
    }
    printf("%d\n", t);
    return 0;
}
