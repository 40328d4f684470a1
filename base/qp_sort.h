/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_BASE_SORT_H
#define QP_BASE_SORT_H
/*
 * PURPOSE: the sort of 64-bit keys that the editor's large serial sorts share (probes by
 * address, pieces by size, entries by address): a radix sort, which costs a few passes
 * over the keys where qsort calls a comparison function n log n times (on cc1, 0.35 G
 * instructions for the probes alone). A caller whose order has ties packs them into the
 * key (the low bits: an index) or sorts the runs of equal keys after. Header-only, on
 * the C library alone; below every folder.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* qsort's comparison of two uint64_t (qp_sort_u64 without the memory). */
static inline int
qp_sort_u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/*
 * Sort the N keys at V ascending: LSD radix, a byte a pass from the lowest, through a
 * buffer of N keys; a byte that is the same in every key costs no pass (addresses of
 * one program differ in three or four). Without the buffer's memory, qsort.
 */
static inline void
qp_sort_u64(uint64_t *v, size_t n)
{
    if (n < 2)
        return;
    uint64_t all_or = 0, all_and = ~(uint64_t)0;
    int sorted = 1;
    for (size_t i = 0; i < n; i++) {
        all_or |= v[i];
        all_and &= v[i];
        sorted &= i == 0 || v[i - 1] <= v[i];
    }
    if (sorted)
        return;
    uint64_t *tmp = malloc(n * sizeof(uint64_t));
    if (tmp == NULL) {
        qsort(v, n, sizeof(uint64_t), qp_sort_u64_cmp);
        return;
    }
    uint64_t *from = v, *to = tmp;
    for (unsigned shift = 0; shift < 64; shift += 8) {
        if ((((all_or ^ all_and) >> shift) & 0xff) == 0)
            continue; /* this byte is alike in all */
        size_t count[257] = { 0 };
        for (size_t i = 0; i < n; i++)
            count[((from[i] >> shift) & 0xff) + 1]++;
        for (unsigned d = 1; d < 257; d++)
            count[d] += count[d - 1];
        for (size_t i = 0; i < n; i++)
            to[count[(from[i] >> shift) & 0xff]++] = from[i];
        uint64_t *t = from;
        from = to;
        to = t;
    }
    if (from != v)
        memcpy(v, from, n * sizeof(uint64_t));
    free(tmp);
}

#endif
