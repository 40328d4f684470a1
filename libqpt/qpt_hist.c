/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/* Time histograms for mutators: driver/'s, behind the public names. */
#include <stdlib.h>

#include "base/drv_hist.h"
#include "include/qpt/qpt.h"

struct qpt_hist {
    drv_hist_t h;
};

int
qpt_hist_create(size_t nseries, size_t nbuckets, double width, double t0, qpt_hist_t **out)
{
    if (out == NULL)
        return QP_EINVAL;
    qpt_hist_t *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return QP_ENOMEM;
    int rc = drv_hist_init(&h->h, nseries, nbuckets, width, t0);
    if (rc < 0) {
        free(h);
        return rc;
    }
    *out = h;
    return 0;
}

void
qpt_hist_add(qpt_hist_t *h, double t, const uint64_t *totals)
{
    if (h != NULL && totals != NULL)
        drv_hist_add(&h->h, t, totals);
}

int
qpt_hist_grow(qpt_hist_t *h, size_t nseries)
{
    return h != NULL ? drv_hist_grow(&h->h, nseries) : QP_EINVAL;
}

uint64_t
qpt_hist_get(const qpt_hist_t *h, size_t series, size_t bucket)
{
    return h != NULL ? drv_hist_get(&h->h, series, bucket) : 0;
}

size_t
qpt_hist_used(const qpt_hist_t *h)
{
    return h != NULL ? h->h.used : 0;
}

double
qpt_hist_width(const qpt_hist_t *h)
{
    return h != NULL ? h->h.width : 0;
}

void
qpt_hist_destroy(qpt_hist_t *h)
{
    if (h == NULL)
        return;
    drv_hist_free(&h->h);
    free(h);
}
