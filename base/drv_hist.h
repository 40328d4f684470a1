/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_DRV_HIST_H
#define QP_DRV_HIST_H
/*
 * PURPOSE: live series (running totals sampled over time) as time histograms (seed 001,
 * section 2.2): a fixed number of buckets per series; when time runs past the last
 * bucket, neighbouring buckets are merged in pairs and the width doubles, so a session
 * of any length fits in the same memory. dyn's --histogram and libqpt's qpt_hist_* (the
 * metrics') use it.
 */
#include <stddef.h>
#include <stdint.h>

#include "arch/qp_err.h"

typedef struct drv_hist {
    size_t nseries;  /* series */
    size_t nbuckets; /* fixed, even */
    double width;    /* seconds per bucket: doubles whenever time runs past the end */
    size_t used;     /* buckets up to the last sample */
    double t0;       /* time of bucket 0's start */
    uint64_t *v;     /* nseries x nbuckets: what each series added in each bucket */
    uint64_t *last;  /* per series: the total at the previous sample */
} drv_hist_t;

/* NBUCKETS (even, >= 2) buckets of WIDTH seconds from T0. 0, QP_EINVAL or QP_ENOMEM. */
int drv_hist_init(drv_hist_t *h, size_t nseries, size_t nbuckets, double width, double t0);

/* A sample at time T (increasing): TOTALS[s] is series s's running total; what it added
 * since the previous sample goes into T's bucket. */
void drv_hist_add(drv_hist_t *h, double t, const uint64_t *totals);

/* At least NSERIES series (rows that appeared since); the new ones start empty. 0, or
 * QP_ENOMEM (H unchanged). */
int drv_hist_grow(drv_hist_t *h, size_t nseries);

/* What SERIES added in BUCKET (0 out of range). */
uint64_t drv_hist_get(const drv_hist_t *h, size_t series, size_t bucket);

void drv_hist_free(drv_hist_t *h);

#endif
