/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "report/qp_callgraph.h"
#include "report/qp_flow.h"

/* The described procedure entered at TARGET (the measured one first), or QP_VIRT. */
static uint32_t
proc_at(const qp_desc_t *d, const qp_flow_entry_ref_t *ix, uint32_t n, uint64_t target)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ix[mid].entry < target)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint32_t found = QP_VIRT;
    for (; lo < n && ix[lo].entry == target; lo++) {
        if (d->procs[ix[lo].proc].flags & QP_PROC_MEASURED)
            return ix[lo].proc;
        if (found == QP_VIRT)
            found = ix[lo].proc;
    }
    return found;
}

/* Arcs of one caller before merging: sorted so that one callee's sites are adjacent. */
static int
cmp_arc(const void *a, const void *b)
{
    const qp_cg_arc_t *x = a, *y = b;
    /* Indirect sites (target 0) last. */
    uint64_t tx = x->target ? x->target : UINT64_MAX, ty = y->target ? y->target : UINT64_MAX;
    if (tx != ty)
        return tx < ty ? -1 : 1;
    return x->site < y->site ? -1 : x->site > y->site;
}

static uint64_t
sat_add(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

/* Room for one more arc. */
static int
arc_room(qp_callgraph_t *cg, size_t *cap)
{
    if (cg->narcs < *cap)
        return 0;
    size_t nc = *cap ? 2 * *cap : 256;
    qp_cg_arc_t *v = realloc(cg->arcs, nc * sizeof(*v));
    if (v == NULL)
        return QP_ENOMEM;
    cg->arcs = v;
    *cap = nc;
    return 0;
}

/* The inverse of odd X modulo 2^64 (Newton's iteration). */
static uint64_t
inverse64(uint64_t x)
{
    uint64_t y = x;
    for (int i = 0; i < 6; i++)
        y *= 2 - x * y;
    return y;
}

/*
 * The one target of bucket B of a target table (qp_format.h): CALLS calls whose targets
 * sum to SUM and whose squares sum to SQ (mod 2^64). Returns the described procedure it
 * is the entry of, or QP_VIRT when the bucket held several targets (or one outside the
 * description).
 */
static uint32_t
bucket_target(const qp_desc_t *d, const qp_flow_entry_ref_t *ix, uint32_t b, uint64_t calls,
              uint64_t sum, uint64_t sq)
{
    int t = __builtin_ctzll(calls);
    if (t > 0 && (sum & ((1ull << t) - 1)) != 0)
        return QP_VIRT;
    uint64_t k = (sum >> t) * inverse64(calls >> t);
    if (t > 0)
        k &= (~0ull) >> t; /* known modulo 2^(64 - t): the smallest is an address */
    if (k * calls != sum || k * k * calls != sq || ((k >> 4) % QP_TARGET_BUCKETS) != b)
        return QP_VIRT;
    uint32_t p = proc_at(d, ix, d->hdr.nprocs, k);
    return p != QP_VIRT && d->procs[p].entry == k ? p : QP_VIRT;
}

/*
 * The calls an indirect site C (COUNT of them) made, per target, from its table: an arc
 * per target found, and what is left (buckets several targets shared) as one indirect
 * arc. Returns 0 or QP_ENOMEM.
 */
static int
add_indirect_arcs(qp_callgraph_t *cg, const qp_report_t *r, uint32_t p, const qp_desc_call_t *c,
                  uint64_t count, int known, size_t *cap, const qp_flow_entry_ref_t *ix)
{
    const qp_desc_t *d = r->desc;
    const uint64_t *w = r->prof->counters + c->edge;
    uint64_t left = count;
    for (uint32_t b = 0; b < QP_TARGET_BUCKETS; b++) {
        uint64_t calls = w[3 * b], sum = w[3 * b + 1], sq = w[3 * b + 2];
        if (calls == 0 || calls > left)
            continue;
        uint32_t callee = bucket_target(d, ix, b, calls, sum, sq);
        if (callee == QP_VIRT)
            continue;
        QP_CHECK(arc_room(cg, cap));
        cg->arcs[cg->narcs++] = (qp_cg_arc_t) {
            .caller = p, .callee = callee, .target = d->procs[callee].entry,
            .site = d->blocks[c->block].start, .name = qp_desc_str(d, d->procs[callee].name),
            .count = calls, .nsites = 1, .known = (uint8_t)known, .through_pointer = 1,
        };
        left -= calls;
    }
    QP_CHECK(arc_room(cg, cap));
    cg->arcs[cg->narcs++] = (qp_cg_arc_t) {
        .caller = p, .callee = QP_VIRT, .target = 0, .site = d->blocks[c->block].start,
        .name = "", .count = left, .nsites = 1, .known = (uint8_t)known,
    };
    return 0;
}

/* The sites of measured procedure P as arcs appended to CG (merged by callee). */
static int
add_arcs(qp_callgraph_t *cg, const qp_report_t *r, uint32_t p, size_t *cap,
         const qp_flow_entry_ref_t *ix)
{
    const qp_desc_t *d = r->desc;
    const qp_desc_proc_t *pr = &d->procs[p];
    qp_flow_t fl;
    QP_CHECK(qp_report_flow(r, p, &fl));
    cg->self[p] = fl.insns;
    cg->calls[p] = fl.calls_known ? fl.calls : 0;
    cg->measured[p] = (uint8_t)(fl.calls_known != 0);
    size_t first = cg->narcs;
    for (size_t i = qp_desc_first_call(d, p); i < d->hdr.ncalls && d->calls[i].block - pr->block < pr->nblocks; i++) {
        const qp_desc_call_t *c = &d->calls[i];
        int tail = c->kind == QP_CALL_TAIL || c->kind == QP_CALL_TAIL_INDIRECT;
        uint64_t n;
        int known;
        if (tail) {
            n = fl.edge_count[c->edge - pr->edge];
            known = fl.edge_state[c->edge - pr->edge] != QP_FLOW_UNKNOWN;
        } else {
            n = fl.block_count[c->block - pr->block];
            known = fl.block_state[c->block - pr->block] != QP_FLOW_UNKNOWN;
        }
        int rc = 0;
        if (c->kind == QP_CALL_INDIRECT && c->edge != QP_VIRT && r->prof != NULL
            && (rc = add_indirect_arcs(cg, r, p, c, n, known, cap, ix)) == 0)
            continue;
        if (rc < 0 || arc_room(cg, cap) < 0) {
            qp_flow_free(&fl);
            return QP_ENOMEM;
        }
        qp_cg_arc_t *arc = &cg->arcs[cg->narcs++];
        *arc = (qp_cg_arc_t) {
            .caller = p, .callee = c->target ? proc_at(d, ix, d->hdr.nprocs, c->target) : QP_VIRT,
            .target = c->target, .site = d->blocks[c->block].start,
            .name = qp_desc_str(d, c->name), .count = n, .nsites = 1,
            .known = (uint8_t)known, .tail = (uint8_t)tail,
        };
        /* The sites the report counts a stub's calls from (qp_plt.c). */
        int direct = c->kind == QP_CALL_DIRECT || c->kind == QP_CALL_TAIL;
        const qp_proc_result_t *stub
            = arc->callee == QP_VIRT && direct ? qp_report_plt_at(r, c->target) : NULL;
        if (stub != NULL) {
            uint32_t per_call = qp_report_stub(r, stub)->per_call;
            if (__builtin_mul_overflow(n, (uint64_t)per_call, &arc->plt_insns))
                arc->plt_insns = UINT64_MAX;
            arc->plt_lower = (uint8_t)(per_call == 0
                || (stub->flags & (QP_RES_APPROX_LAZY | QP_RES_SATURATED)) != 0);
        }
    }
    qp_flow_free(&fl);
    /* Merge the sites of one callee (and all indirect sites) into one arc. */
    size_t n = cg->narcs - first, out = first;
    qsort(cg->arcs + first, n, sizeof(qp_cg_arc_t), cmp_arc);
    for (size_t i = first; i < cg->narcs; i++) {
        qp_cg_arc_t *a = &cg->arcs[i];
        if (out > first && cg->arcs[out - 1].target == a->target) {
            qp_cg_arc_t *m = &cg->arcs[out - 1];
            m->count = sat_add(m->count, a->count);
            m->nsites++;
            m->known &= a->known;
            m->tail &= a->tail;
            m->through_pointer |= a->through_pointer;
            m->plt_insns = sat_add(m->plt_insns, a->plt_insns);
            m->plt_lower |= a->plt_lower;
            continue;
        }
        cg->arcs[out++] = *a;
    }
    cg->narcs = out;
    return 0;
}

/*****************************************************************************
 * Inclusive counts over the strongly connected components (Tarjan, iteratively)
 */

typedef struct scc_state {
    const qp_callgraph_t *cg;
    uint32_t *index, *low, *stack, *comp; /* comp: component number + 1, 0 unvisited */
    uint8_t *on_stack;
    uint32_t *frame_node, *frame_arc;     /* the DFS stack */
    uint32_t counter, sp, ncomp;
    uint32_t *order;                      /* members by component, in completion order */
    uint32_t *comp_first;                 /* component c: order[comp_first[c]..] */
    uint32_t norder;
} scc_state_t;

static void
strongconnect(scc_state_t *s, uint32_t root)
{
    const qp_callgraph_t *cg = s->cg;
    uint32_t fp = 0;
    s->frame_node[fp] = root;
    s->frame_arc[fp++] = cg->arc_first[root];
    s->index[root] = s->low[root] = ++s->counter;
    s->stack[s->sp++] = root;
    s->on_stack[root] = 1;
    while (fp > 0) {
        uint32_t v = s->frame_node[fp - 1];
        uint32_t a = s->frame_arc[fp - 1];
        if (a < cg->arc_first[v + 1]) {
            s->frame_arc[fp - 1]++;
            uint32_t w = cg->arcs[a].callee;
            if (w == QP_VIRT)
                continue;
            if (s->index[w] == 0) {
                s->index[w] = s->low[w] = ++s->counter;
                s->stack[s->sp++] = w;
                s->on_stack[w] = 1;
                s->frame_node[fp] = w;
                s->frame_arc[fp++] = cg->arc_first[w];
            } else if (s->on_stack[w] && s->index[w] < s->low[v]) {
                s->low[v] = s->index[w];
            }
            continue;
        }
        fp--;
        if (fp > 0) {
            uint32_t u = s->frame_node[fp - 1];
            if (s->low[v] < s->low[u])
                s->low[u] = s->low[v];
        }
        if (s->low[v] == s->index[v]) {
            s->comp_first[s->ncomp] = s->norder;
            uint32_t w;
            do {
                w = s->stack[--s->sp];
                s->on_stack[w] = 0;
                s->comp[w] = s->ncomp + 1;
                s->order[s->norder++] = w;
            } while (w != v);
            s->ncomp++;
        }
    }
}

/* Components come out callees first: each one's inclusive count from those below. */
static void
inclusive(qp_callgraph_t *cg, scc_state_t *s)
{
    uint32_t ncycles = 0;
    double *comp_incl = calloc(s->ncomp + 1, sizeof(double));
    double *comp_ext = calloc(s->ncomp + 1, sizeof(double));
    uint8_t *comp_flags = calloc(s->ncomp + 1, 1);
    if (comp_incl == NULL || comp_ext == NULL || comp_flags == NULL)
        goto out;
    s->comp_first[s->ncomp] = s->norder;
    for (uint32_t c = 0; c < s->ncomp; c++) {
        double self = 0, calls = 0, internal = 0;
        uint8_t fl = 0;
        uint32_t k0 = s->comp_first[c], k1 = s->comp_first[c + 1];
        for (uint32_t k = k0; k < k1; k++) {
            uint32_t m = s->order[k];
            self += (double)cg->self[m];
            calls += (double)cg->calls[m];
            for (uint32_t a = cg->arc_first[m]; a < cg->arc_first[m + 1]; a++) {
                const qp_cg_arc_t *arc = &cg->arcs[a];
                if (arc->callee != QP_VIRT && s->comp[arc->callee] == c + 1) {
                    internal += (double)arc->count;
                    fl |= QP_CG_CYCLE;
                }
            }
        }
        double incl = self;
        for (uint32_t k = k0; k < k1; k++) {
            uint32_t m = s->order[k];
            for (uint32_t a = cg->arc_first[m]; a < cg->arc_first[m + 1]; a++) {
                const qp_cg_arc_t *arc = &cg->arcs[a];
                if (arc->count == 0)
                    continue;
                if (arc->callee == QP_VIRT) {
                    /* Indirect: the callee is unknown. Direct to code outside the
                     * description (PLT stubs, libraries): outside the program, which the
                     * report states once; a PLT stub the report counted adds its own
                     * instructions. */
                    incl += (double)arc->plt_insns;
                    if (arc->target == 0 || arc->plt_lower)
                        fl |= QP_CG_LOWER;
                    continue;
                }
                uint32_t t = s->comp[arc->callee] - 1;
                if (t == c)
                    continue;
                if (!cg->measured[arc->callee]) {
                    fl |= QP_CG_LOWER;
                    continue;
                }
                double ext = comp_ext[t], share = ext > 0 ? (double)arc->count / ext : 0;
                if (share > 1)
                    share = 1;
                if (share < 1 - 1e-12)
                    fl |= QP_CG_APPROX;
                incl += share * comp_incl[t];
                fl |= comp_flags[t] & (QP_CG_APPROX | QP_CG_LOWER);
            }
        }
        comp_incl[c] = incl;
        comp_ext[c] = calls > internal ? calls - internal : 0;
        comp_flags[c] = fl;
        if (fl & QP_CG_CYCLE)
            ncycles++;
        for (uint32_t k = k0; k < k1; k++) {
            uint32_t m = s->order[k];
            cg->incl[m] = incl;
            cg->ext[m] = comp_ext[c];
            cg->flags[m] = fl;
            cg->cycle[m] = (fl & QP_CG_CYCLE) ? ncycles : 0;
        }
    }
out:
    free(comp_incl);
    free(comp_ext);
    free(comp_flags);
}

static int
compute_inclusive(qp_callgraph_t *cg)
{
    uint32_t n = cg->desc->hdr.nprocs;
    scc_state_t s = { .cg = cg };
    s.index = calloc(n + 1, sizeof(uint32_t));
    s.low = calloc(n + 1, sizeof(uint32_t));
    s.stack = calloc(n + 1, sizeof(uint32_t));
    s.comp = calloc(n + 1, sizeof(uint32_t));
    s.on_stack = calloc(n + 1, 1);
    s.frame_node = calloc(n + 1, sizeof(uint32_t));
    s.frame_arc = calloc(n + 1, sizeof(uint32_t));
    s.order = calloc(n + 1, sizeof(uint32_t));
    s.comp_first = calloc(n + 2, sizeof(uint32_t));
    int rc = QP_ENOMEM;
    if (s.index && s.low && s.stack && s.comp && s.on_stack && s.frame_node && s.frame_arc
        && s.order && s.comp_first) {
        for (uint32_t v = 0; v < n; v++)
            if (s.index[v] == 0)
                strongconnect(&s, v);
        inclusive(cg, &s);
        rc = 0;
    }
    free(s.index);
    free(s.low);
    free(s.stack);
    free(s.comp);
    free(s.on_stack);
    free(s.frame_node);
    free(s.frame_arc);
    free(s.order);
    free(s.comp_first);
    return rc;
}

int
qp_callgraph_build(const qp_report_t *r, qp_callgraph_t *out)
{
    if (r == NULL || r->desc == NULL || out == NULL)
        return QP_EINVAL;
    memset(out, 0, sizeof(*out));
    const qp_desc_t *d = r->desc;
    uint32_t n = d->hdr.nprocs;
    out->desc = d;
    out->arc_first = calloc(n + 1, sizeof(uint32_t));
    out->self = calloc(n + 1, sizeof(uint64_t));
    out->calls = calloc(n + 1, sizeof(uint64_t));
    out->measured = calloc(n + 1, 1);
    out->incl = calloc(n + 1, sizeof(double));
    out->ext = calloc(n + 1, sizeof(double));
    out->flags = calloc(n + 1, 1);
    out->cycle = calloc(n + 1, sizeof(uint32_t));
    qp_flow_entry_ref_t *ix = calloc(n + 1, sizeof(qp_flow_entry_ref_t));
    int rc = QP_ENOMEM;
    if (!out->arc_first || !out->self || !out->calls || !out->measured
        || !out->incl || !out->ext || !out->flags || !out->cycle || !ix)
        goto fail;
    for (uint32_t i = 0; i < n; i++)
        ix[i] = (qp_flow_entry_ref_t) { d->procs[i].entry, i };
    qsort(ix, n, sizeof(*ix), qp_flow_entry_cmp);
    size_t cap = 0;
    for (uint32_t p = 0; p < n; p++) {
        out->arc_first[p] = (uint32_t)out->narcs;
        if ((d->procs[p].flags & QP_PROC_MEASURED) && (rc = add_arcs(out, r, p, &cap, ix)) < 0)
            goto fail;
    }
    out->arc_first[n] = (uint32_t)out->narcs;
    if ((rc = compute_inclusive(out)) < 0)
        goto fail;
    free(ix);
    return 0;
fail:
    free(ix);
    qp_callgraph_free(out);
    return rc < 0 ? rc : QP_ENOMEM;
}

void
qp_callgraph_free(qp_callgraph_t *cg)
{
    if (cg == NULL)
        return;
    free(cg->arcs);
    free(cg->arc_first);
    free(cg->self);
    free(cg->calls);
    free(cg->measured);
    free(cg->incl);
    free(cg->ext);
    free(cg->flags);
    free(cg->cycle);
    memset(cg, 0, sizeof(*cg));
}
