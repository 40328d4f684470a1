/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_BASE_SEARCH_H
#define QP_BASE_SEARCH_H
/*
 * PURPOSE: the binary search of a sorted table by a 64-bit key (an address, most
 * often) that the project's tables share: relocations by place, anchors by adr, ...,
 * and the buckets that narrow a search of millions of keys to a few (qp_buckets_t);
 * the hash of the hash tables of names.
 * Header-only, on the C library alone; below every folder.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
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

/* A hash of string S (FNV-1a), for the hash tables of names. */
static inline uint64_t
qp_str_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3u;
    return h;
}

/* The key at position I of the caller's table CTX (a table read through an index, or
 * one whose keys are computed). */
typedef uint64_t (*qp_bucket_key_fn)(const void *ctx, size_t i);

/* The first of the positions 0 .. N - 1 whose key KEY(CTX, i) (ascending) is at least K;
 * N when there is none. */
static inline size_t
qp_lower_bound_fn(size_t n, qp_bucket_key_fn key, const void *ctx, uint64_t k)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (key(ctx, mid) < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/*
 * Buckets over N ascending keys (addresses), so that a search looks at the keys of one
 * bucket of 2^SHIFT addresses instead of all of them: over millions of keys (blocks,
 * procedures, slots) every step of the whole search misses the cache.
 * at[k] is the first position whose key is at or above base + (k << shift), for k in
 * 0 .. n (n + 1 entries: at[n] is N). Zero it before the first qp_buckets_build; free
 * at when done.
 */
typedef struct qp_buckets {
    uint32_t *at;   /* n + 1 positions, or NULL */
    size_t n, cap;  /* buckets (0: none, search all the keys); entries allocated */
    uint64_t base;  /* bucket 0's first address */
    unsigned shift; /* a bucket holds 1 << shift addresses */
} qp_buckets_t;

/*
 * (Re)build B over the N keys KEY(CTX, 0 .. N - 1), ascending and none below BASE. No
 * buckets (B->n 0) when the keys lie far apart (more buckets than 4N + 1024: they would
 * cost more memory than they save), N does not fit 32 bits, or there is no memory, which
 * alone returns -1 (B->at kept); else 0.
 */
static inline int
qp_buckets_build(qp_buckets_t *b, uint64_t base, unsigned shift, size_t n, qp_bucket_key_fn key,
                 const void *ctx)
{
    b->n = 0;
    b->base = base;
    b->shift = shift;
    if (n == 0 || n >= UINT32_MAX)
        return 0;
    uint64_t last = key(ctx, n - 1);
    size_t nb = last < base ? 1 : (size_t)((last - base) >> shift) + 1;
    if (nb > 4 * n + 1024)
        return 0;
    if (nb + 1 > b->cap) {
        uint32_t *v = realloc(b->at, (nb + 1) * sizeof(uint32_t));
        if (v == NULL)
            return -1;
        b->at = v;
        b->cap = nb + 1;
    }
    size_t i = 0;
    for (size_t k = 0; k <= nb; k++) {
        uint64_t lo = base + ((uint64_t)k << shift);
        while (i < n && key(ctx, i) < lo)
            i++;
        b->at[k] = (uint32_t)i;
    }
    b->n = nb;
    return 0;
}

/*
 * The positions [*LO, *HI) of B's keys (built over N) to search for ADDR: every key
 * before *LO is below ADDR's bucket, every one from *HI above it. [0, N) without buckets.
 */
static inline void
qp_buckets_range(const qp_buckets_t *b, size_t n, uint64_t addr, size_t *lo, size_t *hi)
{
    *lo = 0;
    *hi = n;
    if (b->n == 0)
        return;
    if (addr < b->base) {
        *hi = 0;
        return;
    }
    uint64_t k = (addr - b->base) >> b->shift;
    *lo = k < b->n ? b->at[k] : b->at[b->n];
    *hi = k < b->n ? b->at[k + 1] : b->at[b->n];
}

/*
 * How many of the N keys at KEYS (ascending, B's buckets built over them) are at most
 * ADDR: the position after the last key <= ADDR, searched within ADDR's bucket.
 */
static inline size_t
qp_buckets_upto(const qp_buckets_t *b, const uint64_t *keys, size_t n, uint64_t addr)
{
    size_t lo, hi;
    qp_buckets_range(b, n, addr, &lo, &hi);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (keys[mid] <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

#endif
