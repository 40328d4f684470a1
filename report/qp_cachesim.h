/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_CACHESIM_H
#define QP_CACHESIM_H
/*
 * PURPOSE: a two-level data cache simulator for address traces (qp trace cachesim):
 * set-associative, LRU, write-allocate, as valgrind's cachegrind models its D1 and LL
 * (an access that straddles two lines references both and misses when either does; a
 * first-level miss references the last level).
 */
#include <stddef.h>
#include <stdint.h>

typedef struct qp_cache {
    uint64_t size;
    uint32_t ways, line, sets, line_shift;
    uint64_t *tags;  /* sets x ways, most recently used first; 0: empty (tags are line + 1) */
    uint64_t refs, misses;
} qp_cache_t;

/*
 * Parse "SIZE:WAYS:LINE" (SIZE with an optional k or m suffix) into *C's geometry.
 * 0, or QP_EINVAL (malformed; LINE and the number of sets not powers of 2).
 */
int qp_cache_parse(const char *spec, qp_cache_t *c /*OUT*/);

/* Allocate C's lines (after qp_cache_parse). 0 or QP_ENOMEM. */
int qp_cache_init(qp_cache_t *c);
void qp_cache_free(qp_cache_t *c);

typedef struct qp_cachesim {
    qp_cache_t l1, ll;
    uint64_t reads, writes, l1_read_misses, l1_write_misses, ll_read_misses, ll_write_misses;
} qp_cachesim_t;

/* One data access of SIZE bytes at ADDR; WRITE: a store (the caller counts a modify as
 * one load, as cachegrind does: the load brings the line, the store then hits). */
void qp_cachesim_access(qp_cachesim_t *s, uint64_t addr, uint32_t size, int write);

#endif
