/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Edge weights from an earlier run (qpt-rewrite --weights PROFILE): the seed's
 * alternative to the loop-depth heuristic. The counts come keyed by original addresses
 * (block starts), which are the same in the program being rewritten again as long as it
 * is the same input; the hottest edges then stay in the spanning tree, uncounted
 * (drv_qp.c). Reading the profile is report/'s business (qp_edge_counts_read): the tool
 * hands the counts over with drv_weights_add, so driver/ never depends on report/.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"

static int
cmp_wedge(const void *a, const void *b)
{
    const drv_wedge_t *x = a, *y = b;
    if (x->from != y->from)
        return x->from < y->from ? -1 : 1;
    if (x->to != y->to)
        return x->to < y->to ? -1 : 1;
    return x->kind < y->kind ? -1 : x->kind > y->kind;
}

int
drv_weights_add(
    drv_weights_t *w, uint64_t from, uint64_t to, uint64_t count, uint8_t kind)
{
    if (w == NULL)
        return QP_EINVAL;
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 1024;
        drv_wedge_t *v = realloc(w->v, cap * sizeof(*v));
        if (v == NULL)
            return QP_ENOMEM;
        w->v = v;
        w->cap = cap;
    }
    w->v[w->n++] = (drv_wedge_t) { from, to, count, kind };
    w->sorted = 0;
    return 0;
}

void
drv_weights_sort(drv_weights_t *w)
{
    if (w->n > 0)
        qsort(w->v, w->n, sizeof(drv_wedge_t), cmp_wedge);
    w->sorted = 1;
}

void
drv_weights_free(drv_weights_t *w)
{
    free(w->v);
    memset(w, 0, sizeof(*w));
}

int64_t
drv_weights_get(const drv_weights_t *w, uint64_t from, uint64_t to, uint8_t kind)
{
    assert(w->sorted);
    drv_wedge_t key = { from, to, 0, kind };
    size_t lo = 0, hi = w->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_wedge(&w->v[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < w->n && cmp_wedge(&w->v[lo], &key) == 0 ? (int64_t)w->v[lo].count : -1;
}

double
drv_weights_match(const drv_weights_t *w, const cfg_prog_t *prog)
{
    size_t ok = 0;
    for (size_t i = 0; i < w->n; i++) {
        int good = 1;
        uint64_t ends[2] = { w->v[i].from, w->v[i].to };
        for (int k = 0; k < 2 && good; k++) {
            if (ends[k] == 0)
                continue;
            uint32_t b = cfg_block_at(prog, ends[k]);
            good = b != CFG_NONE && prog->blocks[b].start == ends[k];
        }
        ok += good;
    }
    return w->n ? (double)ok / (double)w->n : 1.0;
}
