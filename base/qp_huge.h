/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_BASE_HUGE_H
#define QP_BASE_HUGE_H
/*
 * PURPOSE: big arrays that are written whole (qp report's counters, rows, the
 * description's procedures and key sites) asked to be backed by transparent huge pages
 * where they span them: one page fault per 2 MB instead of 512 (a fault costs about 6
 * microseconds on a paravirtualised VM). Nothing more becomes resident: every page of
 * such an array is written anyway, and only the whole 2 MB pages inside it are asked for.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Arrays smaller than this are left alone (their edges would be most of them). */
#define QP_HUGE_MIN ((size_t)8 << 20)

/* Ask for huge pages for the whole 2 MB pages of the N bytes at P (not touched yet). */
static inline void
qp_huge_advise(void *p, size_t n)
{
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t hi = ((uintptr_t)p + n) & ~(huge - 1);
    if (n >= QP_HUGE_MIN && hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
}

/* calloc(N, SIZE) for an array the caller writes whole. */
static inline void *
qp_calloc_whole(size_t n, size_t size)
{
    if (size != 0 && n > SIZE_MAX / size)
        return NULL;
    size_t bytes = n * size;
    if (bytes < QP_HUGE_MIN)
        return calloc(n, size);
    void *p = malloc(bytes);
    if (p != NULL) {
        qp_huge_advise(p, bytes);
        memset(p, 0, bytes);
    }
    return p;
}

#endif
