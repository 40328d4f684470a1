/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/* Control-flow tracing: a block that starts with a `jae` whose carry flag a compare in
 * the blocks before it set (glibc's cache-size table search has one). A record at its
 * start must keep CF: the record compares its cursor with the limit, and the naive
 * tracer's BLOCK record there once flipped the branch (drv_graph placed records as
 * counter increments, which keep CF). The output says which way each branch went. */
#include <stdio.h>

static int __attribute__((noinline)) carry_way(unsigned long a, unsigned long b)
{
    int r;
    __asm__ volatile("cmp %2, %1\n\t"
                     "je 1f\n\t"
                     "jae 2f\n\t" /* a block of its own: only CF is live at its start */
                     "mov $1, %0\n\t"
                     "jmp 3f\n"
                     "1:\tmov $2, %0\n\t"
                     "jmp 3f\n"
                     "2:\tmov $3, %0\n"
                     "3:"
                     : "=r"(r)
                     : "r"(a), "r"(b)
                     : "cc");
    return r;
}

int main(void)
{
    unsigned long v[] = { 5, 3, 3, 9, 0, 1, 7, 7, 100, 2 };
    for (unsigned i = 0; i + 1 < sizeof(v) / sizeof(v[0]); i++)
        printf("%lu %lu: %d\n", v[i], v[i + 1], carry_way(v[i], v[i + 1]));
    return 0;
}
