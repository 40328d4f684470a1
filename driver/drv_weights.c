/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Edge weights from an earlier profile (qpt-rewrite --weights PROFILE): the seed's
 * alternative to the loop-depth heuristic. The profile names the instrumented program
 * that wrote it; its description says which counter measured which edge, flow
 * conservation gives every edge's count, and the edges are keyed by original addresses
 * (block starts), which are the same in the program being rewritten again as long as
 * it is the same input. The hottest edges then stay in the spanning tree, uncounted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"
#include "driver/qp_desc.h"
#include "driver/qp_flow.h"

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

/* Old start of desc block B, or 0 for X. */
static uint64_t
block_addr(const qp_desc_t *d, uint32_t b)
{
    return b == QP_VIRT ? 0 : d->blocks[b].start;
}

static int
collect(const qp_desc_t *d, const qp_profile_t *p, drv_weights_t *w)
{
    size_t cap = d->hdr.nedges + 1;
    if ((w->v = malloc(cap * sizeof(drv_wedge_t))) == NULL)
        return QP_ENOMEM;
    for (uint32_t pi = 0; pi < d->hdr.nprocs; pi++) {
        const qp_desc_proc_t *pr = &d->procs[pi];
        if (!(pr->flags & QP_PROC_MEASURED))
            continue;
        qp_flow_t f;
        int rc = qp_flow_solve(d, pi, p->counters, p->hdr.ncounters, NULL, &f);
        if (rc < 0)
            return rc;
        for (uint32_t e = 0; e < f.nedges; e++) {
            const qp_desc_edge_t *ed = &d->edges[pr->edge + e];
            if (f.edge_state[e] == QP_FLOW_UNKNOWN)
                continue;
            w->v[w->n++] = (drv_wedge_t) { block_addr(d, ed->from), block_addr(d, ed->to),
                                           f.edge_count[e], ed->kind };
        }
        qp_flow_free(&f);
    }
    qsort(w->v, w->n, sizeof(drv_wedge_t), cmp_wedge);
    return 0;
}

int
drv_weights_load(const char *path, drv_weights_t *w, char *why, size_t whylen)
{
    memset(w, 0, sizeof(*w));
    qp_profile_t p;
    qp_desc_t d;
    cfg_image_t *img = NULL;
    memset(&d, 0, sizeof(d));
    int rc = qp_profile_read(path, &p, why, whylen);
    if (rc < 0)
        return rc;
    rc = cfg_image_open_bfd(p.hdr.exe, &img);
    if (rc < 0) {
        snprintf(why, whylen, "%s: cannot read the program that wrote it (%s): %s", path,
                 p.hdr.exe, qp_strerror(rc));
        goto out;
    }
    const cfg_section_t *s = NULL;
    for (size_t i = 0; i < img->nsections && s == NULL; i++)
        if (strcmp(img->sections[i].name, QP_DESC_SECTION) == 0 && img->sections[i].bytes)
            s = &img->sections[i];
    if (s == NULL) {
        snprintf(why, whylen, "%s: %s has no %s section", path, p.hdr.exe, QP_DESC_SECTION);
        rc = QP_EFORMAT;
        goto out;
    }
    if ((rc = qp_desc_parse(s->bytes, s->size, &d, why, whylen)) < 0
        || (rc = qp_profile_check(&p, &d, why, whylen)) < 0)
        goto out;
    rc = collect(&d, &p, w);
    if (rc < 0)
        snprintf(why, whylen, "%s: %s", path, qp_strerror(rc));
out:
    if (rc < 0)
        drv_weights_free(w);
    qp_desc_free(&d);
    qp_profile_free(&p);
    cfg_image_destroy(img);
    return rc;
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
