/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Trace buffers that end at every phase (tests/trace-mem.sh, --trace-mem): a
 * data-dependent mix of blocks with one to four address values each fills some forty
 * 1 MB buffers, so that some buffer ends with a value record just below its limit and
 * the next record is another (12 bytes each: the cursor then lies past the buffer's
 * end). Such a buffer was dropped whole, silently: the naive trace lost its blocks and
 * both walks took the wrong values from there on (bzip2's bench hung on a `rep stos`
 * count that was an address).
 */
#include <stdio.h>
#include <stdlib.h>

static long a[4096], b[4096], c[4096];

int main(int argc, char **argv)
{
    unsigned x = argc > 1 ? (unsigned)atoi(argv[1]) : 12345u, n = 1000000;
    long s = 0, *p = calloc(4096, sizeof(long));
    if (p == NULL)
        return 1;
    for (unsigned i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        unsigned k = (x >> 16) & 4095;
        switch ((x >> 8) & 3) {
        case 0: s += a[k]; break;
        case 1: s += a[k] + b[(k * 7) & 4095]; break;
        case 2: s += a[k] + b[(k * 3) & 4095] + c[(k * 5) & 4095]; break;
        default: s += p[k]; p[(k + 1) & 4095] = s; c[k] = s; break;
        }
        a[(k * 11) & 4095] = s;
    }
    printf("%ld\n", s);
    free(p);
    return 0;
}
