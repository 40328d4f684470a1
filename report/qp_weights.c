/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Edge counts of an earlier profile (qpt-rewrite --weights PROFILE): the seed's
 * alternative to the loop-depth heuristic. The profile names the instrumented program
 * that wrote it; its description says which counter measured which edge, flow
 * conservation gives every edge's count, and the edges are keyed by original addresses
 * (block starts), which are the same in the program being rewritten again as long as
 * it is the same input. The driver (drv_weights_add) then keeps the hottest edges in the
 * spanning tree, uncounted; the tool hands the counts over, so driver/ never reads a
 * profile.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/qp_report.h"

/* Old start of desc block B, or 0 for X. */
static uint64_t
block_addr(const qp_desc_t *d, uint32_t b)
{
    return b == QP_VIRT ? 0 : d->blocks[b].start;
}

static int
collect(const qp_desc_t *d, const qp_profile_t *p, qp_edge_count_t **out, size_t *n)
{
    size_t cap = (size_t)d->hdr.nedges + d->hdr.nblocks + 1;
    qp_edge_count_t *v = malloc(cap * sizeof(*v));
    if (v == NULL)
        return QP_ENOMEM;
    *out = v;
    qp_flow_entries_t calls;
    int rc = qp_flow_entries(d, p->counters, p->hdr.ncounters, NULL, &calls);
    for (uint32_t pi = 0; rc == 0 && pi < d->hdr.nprocs; pi++) {
        const qp_desc_proc_t *pr = &d->procs[pi];
        if (!(pr->flags & QP_PROC_MEASURED))
            continue;
        qp_flow_t f;
        if ((rc = qp_flow_solve_in(d, pi, p->counters, p->hdr.ncounters, NULL, &calls, &f)) < 0)
            break;
        for (uint32_t e = 0; e < f.nedges; e++) {
            const qp_desc_edge_t *ed = &d->edges[pr->edge + e];
            if (f.edge_state[e] == QP_FLOW_UNKNOWN)
                continue;
            v[(*n)++] = (qp_edge_count_t) { block_addr(d, ed->from),
                block_addr(d, ed->to), f.edge_count[e], ed->kind };
        }
        /* Block counts too: those of blocks whose edges are unknown (dispatch blocks
         * sharing a table's targets) are known all the same. */
        for (uint32_t b = 0; b < f.nblocks; b++)
            if (f.block_state[b] != QP_FLOW_UNKNOWN) {
                uint64_t at = block_addr(d, pr->block + b);
                v[(*n)++] = (qp_edge_count_t) { at, at, f.block_count[b], QP_EDGE_BLOCK };
            }
        qp_flow_free(&f);
    }
    qp_flow_entries_free(&calls);
    return rc;
}

int
qp_edge_counts_read(
    const char *path, qp_edge_count_t **out, size_t *n, char *why, size_t whylen)
{
    if (path == NULL || out == NULL || n == NULL)
        return QP_EINVAL;
    *out = NULL;
    *n = 0;
    qp_profile_t p;
    qp_desc_t d;
    cfg_image_t *img = NULL;
    memset(&d, 0, sizeof(d));
    int rc = qp_profile_read(path, &p, why, whylen);
    if (rc < 0)
        return rc;
    rc = cfg_image_open_bfd(p.hdr.exe, &img);
    if (rc < 0) {
        qp_why(why, whylen, "%s: cannot read the program that wrote it (%s): %s", path,
            p.hdr.exe, qp_strerror(rc));
        goto out;
    }
    const cfg_section_t *s = cfg_image_section_named(img, QP_DESC_SECTION);
    if (s == NULL) {
        qp_why(why, whylen, "%s: %s has no %s section", path, p.hdr.exe, QP_DESC_SECTION);
        rc = QP_EFORMAT;
        goto out;
    }
    if ((rc = qp_desc_parse(s->bytes, s->size, &d, why, whylen)) < 0
        || (rc = qp_profile_check(&p, &d, why, whylen)) < 0)
        goto out;
    rc = collect(&d, &p, out, n);
    if (rc < 0)
        qp_why(why, whylen, "%s: %s", path, qp_strerror(rc));
out:
    if (rc < 0) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    qp_desc_free(&d);
    qp_profile_free(&p);
    cfg_image_destroy(img);
    return rc;
}
