/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The live series of a session as a time histogram (seed 001, section 2.2): a fixed
 * number of buckets per series; when time runs past the last bucket, neighbouring
 * buckets are merged in pairs and the bucket width doubles. Any session length then
 * fits in the same memory, with a resolution that coarsens as it grows.
 */
#include <stdlib.h>
#include <string.h>

#include "base/drv_hist.h"

int
drv_hist_init(drv_hist_t *h, size_t nseries, size_t nbuckets, double width, double t0)
{
    memset(h, 0, sizeof(*h));
    if (nbuckets < 2 || (nbuckets & 1) || width <= 0)
        return QP_EINVAL;
    h->v = calloc(nseries * nbuckets + 1, sizeof(uint64_t));
    h->last = calloc(nseries + 1, sizeof(uint64_t));
    if (h->v == NULL || h->last == NULL) {
        drv_hist_free(h);
        return QP_ENOMEM;
    }
    h->nseries = nseries;
    h->nbuckets = nbuckets;
    h->width = width;
    h->t0 = t0;
    return 0;
}

/* Merge buckets in pairs: the first half holds everything, the width doubles. */
static void
fold(drv_hist_t *h)
{
    for (size_t s = 0; s < h->nseries; s++) {
        uint64_t *b = h->v + s * h->nbuckets;
        for (size_t i = 0; i < h->nbuckets / 2; i++)
            b[i] = b[2 * i] + b[2 * i + 1];
        memset(b + h->nbuckets / 2, 0, h->nbuckets / 2 * sizeof(uint64_t));
    }
    h->width *= 2;
}

void
drv_hist_add(drv_hist_t *h, double t, const uint64_t *totals)
{
    if (h->v == NULL || t < h->t0)
        return;
    size_t k;
    while ((k = (size_t)((t - h->t0) / h->width)) >= h->nbuckets)
        fold(h);
    for (size_t s = 0; s < h->nseries; s++) {
        uint64_t d = totals[s] >= h->last[s] ? totals[s] - h->last[s] : 0;
        h->v[s * h->nbuckets + k] += d;
        h->last[s] = totals[s];
    }
    h->used = k + 1; /* samples come in time order */
}

int
drv_hist_grow(drv_hist_t *h, size_t n)
{
    if (n <= h->nseries)
        return 0;
    uint64_t *v = calloc(n * h->nbuckets + 1, sizeof(*v)), *l = calloc(n + 1, sizeof(*l));
    if (v == NULL || l == NULL) {
        free(v);
        free(l);
        return QP_ENOMEM;
    }
    if (h->v != NULL)
        memcpy(v, h->v, h->nseries * h->nbuckets * sizeof(*v));
    if (h->last != NULL)
        memcpy(l, h->last, h->nseries * sizeof(*l));
    free(h->v);
    free(h->last);
    h->v = v;
    h->last = l;
    h->nseries = n;
    return 0;
}

uint64_t
drv_hist_get(const drv_hist_t *h, size_t series, size_t bucket)
{
    return series < h->nseries && bucket < h->nbuckets ? h->v[series * h->nbuckets + bucket]
                                                       : 0;
}

void
drv_hist_free(drv_hist_t *h)
{
    free(h->v);
    free(h->last);
    memset(h, 0, sizeof(*h));
}
