/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_BASE_SORT_H
#define QP_BASE_SORT_H
/*
 * PURPOSE: the sort of 64- and 32-bit keys that large serial sorts share (the editor's
 * probes by address, pieces by size, entries by address; the analysis' procedure
 * indices): a radix sort, which costs a few passes over the keys where qsort calls a
 * comparison function n log n times (on cc1, 0.35 G instructions for the probes alone). A caller whose order has ties packs them into the
 * key (the low bits: an index) or sorts the runs of equal keys after. Header-only, on
 * the C library alone; below every folder.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* qsort's comparisons of two uint64_t and of two uint32_t (the sorts without memory). */
static inline int
qp_sort_u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static inline int
qp_sort_u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/*
 * NAME(V, N): sort the N keys of type T at V ascending: LSD radix, a byte a pass from the
 * lowest, through a buffer of N keys; a byte that is the same in every key costs no pass
 * (addresses of one program differ in three or four), and sorted keys none. Without the
 * buffer's memory, qsort with CMP. One body for the key widths below.
 * NAME##_tied(V, N, LOW): the same order, faster for keys whose LOW bits ascend strictly
 * in V's order (an index the keys were made in, which orders the ties of the bits
 * above): LSD radix is stable, so the passes over the higher bytes alone give that
 * order (the probes' keys, cc1: 4 passes of 7). Checked on the way: keys whose low bits
 * do not ascend are sorted by every byte. LOW is a multiple of 8.
 */
#define QP_DEFINE_RADIX_SORT(NAME, T, CMP)                                                  \
    static inline void NAME##_tied(T *v, size_t n, unsigned low)                            \
    {                                                                                       \
        if (n < 2)                                                                          \
            return;                                                                         \
        T all_or = 0, all_and = (T)~(T)0;                                                   \
        T low_mask = low >= 8 * sizeof(T) ? (T)~(T)0 : (T)(((T)1 << low) - 1);             \
        int sorted = 1, low_ascends = low > 0;                                              \
        for (size_t i = 0; i < n; i++) {                                                    \
            all_or |= v[i];                                                                 \
            all_and &= v[i];                                                                \
            sorted &= i == 0 || v[i - 1] <= v[i];                                           \
            low_ascends &= i == 0 || (v[i - 1] & low_mask) < (v[i] & low_mask);             \
        }                                                                                   \
        if (sorted)                                                                         \
            return;                                                                         \
        T *tmp = malloc(n * sizeof(T));                                                     \
        if (tmp == NULL) {                                                                  \
            qsort(v, n, sizeof(T), CMP);                                                    \
            return;                                                                         \
        }                                                                                   \
        T *from = v, *to = tmp;                                                             \
        for (unsigned shift = low_ascends ? low : 0; shift < 8 * sizeof(T); shift += 8) {   \
            if ((((all_or ^ all_and) >> shift) & 0xff) == 0)                                \
                continue; /* this byte is alike in all */                                   \
            size_t count[257] = { 0 };                                                      \
            for (size_t i = 0; i < n; i++)                                                  \
                count[((from[i] >> shift) & 0xff) + 1]++;                                   \
            for (unsigned d = 1; d < 257; d++)                                              \
                count[d] += count[d - 1];                                                   \
            for (size_t i = 0; i < n; i++)                                                  \
                to[count[(from[i] >> shift) & 0xff]++] = from[i];                           \
            T *t = from;                                                                    \
            from = to;                                                                      \
            to = t;                                                                         \
        }                                                                                   \
        if (from != v)                                                                      \
            memcpy(v, from, n * sizeof(T));                                                 \
        free(tmp);                                                                          \
    }                                                                                       \
    static inline void NAME(T *v, size_t n)                                                 \
    {                                                                                       \
        NAME##_tied(v, n, 0);                                                               \
    }

QP_DEFINE_RADIX_SORT(qp_sort_u64, uint64_t, qp_sort_u64_cmp)
QP_DEFINE_RADIX_SORT(qp_sort_u32, uint32_t, qp_sort_u32_cmp)

#endif
