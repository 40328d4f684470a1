/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_BASE_PREFETCH_H
#define QP_BASE_PREFETCH_H
/*
 * PURPOSE: ask a line into the cache ahead of its use, for sure. GCC 12 at -O2 deletes a
 * __builtin_prefetch whose block or loop does nothing else (its dead code elimination
 * does not count the prefetch as an effect): the analysis' walks of the procedures, whose
 * prefetches sit under a bounds check or in a loop over a struct's lines, had none in
 * the binary. An asm statement is kept. Header-only; only speed, never a fault (a
 * prefetch of any address is harmless).
 */

static inline void
qp_prefetch(const void *p)
{
#if defined(__x86_64__)
    __asm__ volatile("prefetcht0 (%0)" : : "r"(p));
#elif defined(__aarch64__)
    __asm__ volatile("prfm pldl1keep, [%0]" : : "r"(p));
#else
    __builtin_prefetch(p);
#endif
}

#endif
