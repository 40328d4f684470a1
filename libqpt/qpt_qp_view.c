/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * include/qpt/qpt_qp.h, second half: the views over a loaded module by index - blocks,
 * edges and call sites as described, a procedure's counts (flow conservation), the call
 * graph, source lines, the code and symbols of the executable, and several modules of
 * one process. Every index is checked against its range: QPT_EINVAL, never a read past
 * an array.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "libqpt/qpt_qp_priv.h"
#include "report/qp_callgraph.h"

/*****************************************************************************
 * Blocks, edges, call sites
 */

/* Procedure PROC of loaded M with its blocks and edges present, or NULL (*RC says why). */
static const qp_desc_proc_t *
proc_present(const qpt_qp_t *m, uint32_t proc, int *rc)
{
    *rc = QPT_EINVAL;
    if (m == NULL || !m->loaded || proc >= m->desc.hdr.nprocs)
        return NULL;
    if ((*rc = qp_desc_need(&m->desc, proc)) < 0)
        return NULL;
    return &m->desc.procs[proc];
}

int
qpt_qp_block(const qpt_qp_t *m, uint32_t proc, uint32_t b, qpt_qp_block_t *out)
{
    int rc;
    const qp_desc_proc_t *p = proc_present(m, proc, &rc);
    if (p == NULL || out == NULL || b >= p->nblocks)
        return p == NULL ? rc : QPT_EINVAL;
    const qp_desc_block_t *blk = &qp_desc_proc_blocks(&m->desc, proc)[b];
    *out = (qpt_qp_block_t) {
        .start = blk->start,
        .size = blk->size,
        .ninsns = blk->ninsns,
        .abandoned = m->rep.abandoned != NULL ? m->rep.abandoned[p->block + b] : 0,
    };
    return 0;
}

/* Global block index G of procedure P as its local index, or QPT_QP_NONE for X. */
static uint32_t
local_block(const qp_desc_proc_t *p, uint32_t g)
{
    return g == QP_VIRT ? QPT_QP_NONE : g - p->block;
}

int
qpt_qp_edge(const qpt_qp_t *m, uint32_t proc, uint32_t e, qpt_qp_edge_t *out)
{
    int rc;
    const qp_desc_proc_t *p = proc_present(m, proc, &rc);
    if (p == NULL || out == NULL || e >= p->nedges)
        return p == NULL ? rc : QPT_EINVAL;
    const qp_desc_edge_t *ed = &qp_desc_proc_edges(&m->desc, proc)[e];
    *out = (qpt_qp_edge_t) { local_block(p, ed->from), local_block(p, ed->to),
                             qp_edge_kind_name(ed->kind) };
    return 0;
}

int
qpt_qp_branch_edges(const qpt_qp_t *m, uint32_t proc, uint8_t *keep)
{
    int rc;
    if (proc_present(m, proc, &rc) == NULL || keep == NULL)
        return keep == NULL ? QPT_EINVAL : rc;
    return qp_report_branch_edges(&m->desc, proc, keep);
}

uint32_t
qpt_qp_nsites(const qpt_qp_t *m, uint32_t proc)
{
    int rc;
    const qp_desc_proc_t *p = proc_present(m, proc, &rc);
    if (p == NULL || m->desc.lazy != NULL)
        return 0; /* a lazy description keeps most call sites compressed */
    const qp_desc_t *d = &m->desc;
    uint32_t first = qp_desc_first_call(d, proc), c = first;
    while (c < d->hdr.ncalls && d->calls[c].block - p->block < p->nblocks)
        c++;
    return c - first;
}

int
qpt_qp_site(const qpt_qp_t *m, uint32_t proc, uint32_t i, qpt_qp_site_t *out)
{
    if (out == NULL || i >= qpt_qp_nsites(m, proc))
        return QPT_EINVAL;
    const qp_desc_t *d = &m->desc;
    const qp_desc_proc_t *p = &d->procs[proc];
    const qp_desc_call_t *c = &d->calls[qp_desc_first_call(d, proc) + i];
    *out = (qpt_qp_site_t) {
        .block = c->block - p->block,
        .edge = qp_call_is_tail(c) ? c->edge - p->edge : QPT_QP_NONE,
        .target = c->target,
        .name = qp_desc_str(d, c->name),
    };
    return 0;
}

/*****************************************************************************
 * Counts of one procedure
 */

struct qpt_qp_flow {
    qp_flow_t fl;    /* the solution */
    uint32_t block;  /* the procedure's first block (global) */
    uint32_t edge;   /* ... and edge */
};

const char *
qpt_qp_count_state_name(int state)
{
    return qp_flow_state_name((uint8_t)state);
}

int
qpt_qp_flow(const qpt_qp_t *m, uint32_t proc, qpt_qp_flow_t **out)
{
    if (out == NULL)
        return QPT_EINVAL;
    *out = NULL;
    if (m == NULL || !m->loaded || proc >= m->desc.hdr.nprocs
        || !(m->desc.procs[proc].flags & QP_PROC_MEASURED))
        return QPT_EINVAL;
    qpt_qp_flow_t *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return QPT_ENOMEM;
    int rc = qp_report_flow(&m->rep, proc, &f->fl);
    if (rc < 0) {
        free(f);
        return rc;
    }
    f->block = m->desc.procs[proc].block;
    f->edge = m->desc.procs[proc].edge;
    *out = f;
    return 0;
}

void
qpt_qp_flow_free(qpt_qp_flow_t *f)
{
    if (f == NULL)
        return;
    qp_flow_free(&f->fl);
    free(f);
}

void
qpt_qp_flow_info(const qpt_qp_flow_t *f, qpt_qp_flow_info_t *out)
{
    if (f == NULL || out == NULL)
        return;
    *out = (qpt_qp_flow_info_t) {
        .proc = f->fl.proc,
        .nblocks = f->fl.nblocks,
        .nedges = f->fl.nedges,
        .calls = f->fl.calls,
        .calls_known = f->fl.calls_known,
        .insns = f->fl.insns,
        .insns_exact = f->fl.insns_exact,
        .nviolations = (uint32_t)f->fl.nviolations,
    };
}

int
qpt_qp_flow_block(const qpt_qp_flow_t *f, uint32_t b, uint64_t *count, int *state)
{
    if (f == NULL || count == NULL || state == NULL || b >= f->fl.nblocks)
        return QPT_EINVAL;
    *count = f->fl.block_count[b];
    *state = f->fl.block_state[b];
    return 0;
}

int
qpt_qp_flow_edge(const qpt_qp_flow_t *f, uint32_t e, uint64_t *count, int *state)
{
    if (f == NULL || count == NULL || state == NULL || e >= f->fl.nedges)
        return QPT_EINVAL;
    *count = f->fl.edge_count[e];
    *state = f->fl.edge_state[e];
    return 0;
}

int
qpt_qp_flow_violation(const qpt_qp_flow_t *f, uint32_t i, qpt_qp_violation_t *out)
{
    if (f == NULL || out == NULL || i >= f->fl.nviolations)
        return QPT_EINVAL;
    const qp_flow_violation_t *v = &f->fl.violations[i];
    *out = (qpt_qp_violation_t) {
        .kind = v->kind == QP_FLOW_V_NEGATIVE ? QPT_QP_V_NEGATIVE
            : v->kind == QP_FLOW_V_OVERFLOW   ? QPT_QP_V_OVERFLOW
                                              : QPT_QP_V_UNBALANCED,
        .block = v->block == QP_VIRT ? QPT_QP_NONE : v->block - f->block,
        .edge = v->edge == QP_VIRT ? QPT_QP_NONE : v->edge - f->edge,
        .count = v->count,
        .in = v->in,
        .out = v->out,
    };
    return 0;
}

/*****************************************************************************
 * The call graph
 */

struct qpt_qp_calls {
    qp_callgraph_t cg;    /* the graph */
    const qpt_qp_t *m;    /* its module (the PLT stubs at the arcs' targets) */
};

int
qpt_qp_calls(const qpt_qp_t *m, qpt_qp_calls_t **out)
{
    if (out == NULL)
        return QPT_EINVAL;
    *out = NULL;
    if (m == NULL || !m->loaded || m->desc.lazy != NULL)
        return QPT_EINVAL;
    qpt_qp_calls_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return QPT_ENOMEM;
    int rc = qp_callgraph_build(&m->rep, &c->cg);
    if (rc < 0) {
        free(c);
        return rc;
    }
    c->m = m;
    *out = c;
    return 0;
}

void
qpt_qp_calls_free(qpt_qp_calls_t *c)
{
    if (c == NULL)
        return;
    qp_callgraph_free(&c->cg);
    free(c);
}

int
qpt_qp_cg_proc(const qpt_qp_calls_t *c, uint32_t proc, qpt_qp_cg_proc_t *out)
{
    if (c == NULL || out == NULL || proc >= c->cg.desc->hdr.nprocs)
        return QPT_EINVAL;
    const qp_callgraph_t *cg = &c->cg;
    *out = (qpt_qp_cg_proc_t) {
        .measured = cg->measured[proc],
        .calls = cg->calls[proc],
        .self = cg->self[proc],
        .incl = cg->incl[proc],
        .ext = cg->ext[proc],
        .flags = ((cg->flags[proc] & QP_CG_APPROX) ? QPT_QP_INCL_APPROX : 0)
            | ((cg->flags[proc] & QP_CG_LOWER) ? QPT_QP_INCL_LOWER : 0)
            | ((cg->flags[proc] & QP_CG_CYCLE) ? QPT_QP_INCL_CYCLE : 0),
        .cycle = cg->cycle[proc],
        .first_arc = cg->arc_first[proc],
        .narcs = cg->arc_first[proc + 1] - cg->arc_first[proc],
    };
    return 0;
}

uint32_t
qpt_qp_cg_narcs(const qpt_qp_calls_t *c)
{
    return c != NULL ? (uint32_t)c->cg.narcs : 0;
}

int
qpt_qp_cg_arc(const qpt_qp_calls_t *c, uint32_t a, qpt_qp_arc_t *out)
{
    if (c == NULL || out == NULL || a >= c->cg.narcs)
        return QPT_EINVAL;
    const qp_cg_arc_t *arc = &c->cg.arcs[a];
    const qp_report_t *r = &c->m->rep;
    const qp_proc_result_t *stub
        = arc->callee == QP_VIRT && arc->target != 0 ? qp_report_plt_at(r, arc->target) : NULL;
    *out = (qpt_qp_arc_t) {
        .caller = arc->caller,
        .callee = arc->callee == QP_VIRT ? QPT_QP_NONE : arc->callee,
        .target = arc->target,
        .site = arc->site,
        .name = arc->name,
        .count = arc->count,
        .nsites = arc->nsites,
        .known = arc->known,
        .tail = arc->tail,
        .through_pointer = arc->through_pointer,
        .stub = stub != NULL ? stub->stub : QPT_QP_NONE,
        .plt_insns = arc->plt_insns,
        .plt_lower = arc->plt_lower,
    };
    return 0;
}

/*****************************************************************************
 * Source lines
 */

struct qpt_qp_lines {
    qp_lines_t l; /* report/'s lists */
};

int
qpt_qp_lines(const qpt_qp_t *m, qpt_qp_lines_t **out)
{
    if (out == NULL)
        return QPT_EINVAL;
    *out = NULL;
    if (m == NULL || !m->loaded || m->desc.lazy != NULL)
        return QPT_EINVAL;
    qpt_qp_lines_t *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return QPT_ENOMEM;
    int rc = qp_lines_collect(m->img, &m->rep, &l->l);
    if (rc < 0) {
        free(l);
        return rc;
    }
    *out = l;
    return 0;
}

void
qpt_qp_lines_free(qpt_qp_lines_t *l)
{
    if (l == NULL)
        return;
    qp_lines_free(&l->l);
    free(l);
}

void
qpt_qp_lines_info(const qpt_qp_lines_t *l, qpt_qp_lines_info_t *out)
{
    if (l != NULL && out != NULL)
        *out = (qpt_qp_lines_info_t) { (uint32_t)l->l.nlines, (uint32_t)l->l.nbranches,
                                       (uint32_t)l->l.nfns };
}

int
qpt_qp_lines_line(const qpt_qp_lines_t *l, uint32_t i, qpt_qp_line_count_t *out)
{
    if (l == NULL || out == NULL || i >= l->l.nlines)
        return QPT_EINVAL;
    const qp_line_t *x = &l->l.lines[i];
    *out = (qpt_qp_line_count_t) { x->file, x->line, x->count, QPT_QP_NONE, QPT_QP_NONE, 0, 0 };
    return 0;
}

int
qpt_qp_lines_branch(const qpt_qp_lines_t *l, uint32_t i, qpt_qp_line_count_t *out)
{
    if (l == NULL || out == NULL || i >= l->l.nbranches)
        return QPT_EINVAL;
    const qp_line_branch_t *x = &l->l.branches[i];
    *out = (qpt_qp_line_count_t) { x->file, x->line, x->taken, QPT_QP_NONE, x->block,
                                   x->branch, x->executed };
    return 0;
}

int
qpt_qp_lines_fn(const qpt_qp_lines_t *l, uint32_t i, qpt_qp_line_count_t *out)
{
    if (l == NULL || out == NULL || i >= l->l.nfns)
        return QPT_EINVAL;
    const qp_line_fn_t *x = &l->l.fns[i];
    *out = (qpt_qp_line_count_t) { x->file, x->line, x->calls, x->proc, QPT_QP_NONE, 0, 0 };
    return 0;
}

/*****************************************************************************
 * The executable's code, symbols and lines
 */

int
qpt_qp_line(const qpt_qp_t *m, uint64_t addr, const char **file, unsigned *line)
{
    if (m == NULL || m->img == NULL || file == NULL || line == NULL)
        return QPT_EINVAL;
    return cfg_image_line(m->img, addr, file, line) == 0 ? 0 : QPT_ENOTFOUND;
}

int
qpt_qp_symbol_at(const qpt_qp_t *m, uint64_t addr, const char **name, int *global)
{
    if (m == NULL || m->img == NULL || name == NULL || global == NULL)
        return QPT_EINVAL;
    const cfg_symbol_t *s = cfg_image_symbol_at(m->img, addr);
    if (s == NULL)
        return QPT_ENOTFOUND;
    *name = s->name;
    *global = s->global;
    return 0;
}

unsigned
qpt_qp_local_rank(const qpt_qp_t *m, uint64_t addr, const char *name)
{
    unsigned nth = 1;
    for (size_t i = 0; m != NULL && m->img != NULL && name != NULL && i < m->img->nsymbols
                       && m->img->symbols[i].addr < addr;
         i++)
        if (!m->img->symbols[i].global && strcmp(m->img->symbols[i].name, name) == 0)
            nth++;
    return nth;
}

int
qpt_qp_section_at(const qpt_qp_t *m, uint64_t addr, const char **name, uint64_t *vma,
                  int *code)
{
    if (m == NULL || m->img == NULL || name == NULL || vma == NULL || code == NULL)
        return QPT_EINVAL;
    const cfg_section_t *sec = cfg_image_section_at(m->img, addr);
    if (sec == NULL)
        return QPT_ENOTFOUND;
    *name = sec->name;
    *vma = sec->vma;
    *code = (sec->flags & CFG_SEC_CODE) != 0;
    return 0;
}

int
qpt_qp_code_span(const qpt_qp_t *m, uint64_t *lo, uint64_t *hi)
{
    if (m == NULL || !m->loaded || lo == NULL || hi == NULL)
        return QPT_EINVAL;
    const qp_desc_t *d = &m->desc;
    uint64_t l = UINT64_MAX, h = 0;
    for (uint32_t b = 0; b < d->hdr.nblocks; b++) {
        int rc = qp_desc_need_block(d, b);
        if (rc < 0)
            return rc;
        if (d->blocks[b].start < l)
            l = d->blocks[b].start;
        if (d->blocks[b].start + d->blocks[b].size > h)
            h = d->blocks[b].start + d->blocks[b].size;
    }
    for (uint32_t i = 0; i < m->rep.nplt; i++) {
        uint64_t e = m->rep.stubs[i].entry;
        l = e < l ? e : l;
        h = e + 1 > h ? e + 1 : h;
    }
    *lo = l == UINT64_MAX ? 0 : l;
    *hi = h;
    return 0;
}

/* Block B of PROC (present), or NULL. */
static const qp_desc_block_t *
block_of(const qpt_qp_t *m, uint32_t proc, uint32_t b)
{
    int rc;
    const qp_desc_proc_t *p = proc_present(m, proc, &rc);
    return p != NULL && b < p->nblocks ? &qp_desc_proc_blocks(&m->desc, proc)[b] : NULL;
}

int
qpt_qp_block_code(const qpt_qp_t *m, uint32_t proc, uint32_t b, uint64_t *over_end,
                  qpt_qp_code_t *out)
{
    const qp_desc_block_t *blk = block_of(m, proc, b);
    if (blk == NULL || over_end == NULL || out == NULL)
        return QPT_EINVAL;
    const cfg_image_t *img = qpt_qp_code_image(m);
    size_t avail;
    const uint8_t *buf = cfg_image_ptr(img, blk->start, &avail);
    *out = (qpt_qp_code_t) { NULL, 0, 0, img->path };
    if (buf == NULL || avail < blk->size)
        return 0;
    out->bytes = buf;
    out->avail = avail;
    out->head = img == m->img ? qp_overwritten(img, blk, buf, avail, over_end) : 0;
    return 0;
}

int
qpt_qp_block_original(const qpt_qp_t *m, uint32_t proc, uint32_t b, const qpt_qp_code_t *c,
                      uint8_t *out, size_t *lost, size_t *lost_len)
{
    const qp_desc_block_t *blk = block_of(m, proc, b);
    if (blk == NULL || c == NULL || c->bytes == NULL || out == NULL || lost == NULL
        || lost_len == NULL)
        return 0;
    return qp_original_block(qpt_qp_code_image(m), &m->desc, blk, c->bytes, c->head, out, lost,
                             lost_len);
}

uint64_t
qpt_qp_block_last_insn(const qpt_qp_t *m, uint32_t proc, uint32_t b)
{
    const qp_desc_block_t *blk = block_of(m, proc, b);
    if (blk == NULL)
        return 0;
    const cfg_image_t *orig = m->set != NULL ? m->set->original : NULL;
    uint64_t a = orig != NULL ? cfg_image_last_insn(orig, blk->start, blk->size, blk->ninsns) : 0;
    if (a == 0)
        a = cfg_image_last_insn(m->img, blk->start, blk->size, blk->ninsns);
    return a;
}

/*****************************************************************************
 * Several modules of a process
 */

struct qpt_qp_process {
    qp_process_t p;              /* report/'s */
    const qp_report_t **reps;    /* per module */
    qpt_qp_t *const *mods;       /* the caller's */
};

int
qpt_qp_process(qpt_qp_t *const *mods, uint32_t n, qpt_qp_process_t **out)
{
    if (out == NULL)
        return QPT_EINVAL;
    *out = NULL;
    if (mods == NULL || n == 0)
        return QPT_EINVAL;
    for (uint32_t k = 0; k < n; k++)
        if (mods[k] == NULL || !mods[k]->loaded)
            return QPT_EINVAL;
    qpt_qp_process_t *p = calloc(1, sizeof(*p));
    const qp_report_t **reps = malloc(n * sizeof(*reps));
    if (p == NULL || reps == NULL) {
        free(p);
        free(reps);
        return QPT_ENOMEM;
    }
    for (uint32_t k = 0; k < n; k++)
        reps[k] = &mods[k]->rep;
    int rc = qp_process_build(reps, n, &p->p);
    if (rc < 0) {
        free(p);
        free(reps);
        return rc;
    }
    p->reps = reps;
    p->mods = mods;
    *out = p;
    return 0;
}

void
qpt_qp_process_free(qpt_qp_process_t *p)
{
    if (p == NULL)
        return;
    qp_process_free(&p->p);
    free(p->reps);
    free(p);
}

void
qpt_qp_process_info(const qpt_qp_process_t *p, qpt_qp_process_info_t *out)
{
    if (p != NULL && out != NULL)
        *out = (qpt_qp_process_info_t) { p->p.nrows, p->p.total_insns, p->p.nplt,
                                         p->p.nunmeasured };
}

int
qpt_qp_process_row(const qpt_qp_process_t *p, uint32_t i, uint32_t *module, qpt_qp_row_t *out)
{
    if (p == NULL || module == NULL || out == NULL || i >= p->p.nrows)
        return QPT_EINVAL;
    const qp_process_row_t *row = &p->p.rows[i];
    *module = row->module;
    qpt_qp_fill_row(p->mods[row->module], row->res, out);
    return 0;
}

uint32_t
qpt_qp_process_by_insns(const qpt_qp_process_t *p, uint32_t i)
{
    return p != NULL && i < p->p.nmodules ? p->p.by_insns[i] : QPT_QP_NONE;
}
