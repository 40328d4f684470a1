/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_BASE_SEARCH_H
#define QP_BASE_SEARCH_H
/*
 * PURPOSE: the binary search of a sorted table by a 64-bit key (an address, most
 * often) that the project's tables share: relocations by place, anchors by adr, ...
 * Header-only, on the C library alone; below every folder.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/*
 * The first of the N elements at BASE (each SIZE bytes, sorted by the uint64_t at
 * OFFSET in each, ascending) whose key is at least KEY; N when there is none.
 */
static inline size_t
qp_lower_bound_u64(const void *base, size_t n, size_t size, size_t offset, uint64_t key)
{
    const unsigned char *b = base;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t k;
        memcpy(&k, b + mid * size + offset, sizeof(k));
        if (k < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

#endif
