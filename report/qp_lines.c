/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Counts per source line for lcov. Each block's instructions are decoded at their
 * original addresses in the executable (arch/) and looked up in the DWARF line table
 * (cfg_image_line); a line gets the largest count of the blocks that touch it, which is
 * what gcov prints for a line spanning several blocks; a function's declaration line
 * gets its entry block's count, as in gcov. In a rewritten executable the
 * first bytes of a moved procedure's entry (and of indirect-jump targets) hold a jump to
 * the new code; decoding goes on after it, and the addresses found there still map to
 * the lines of the original instructions around them.
 */
#include <stdlib.h>
#include <string.h>

#include "arch/arch.h"
#include "report/qp_report.h"

typedef struct line_vec {
    qp_line_t *v;
    size_t n, cap;
} line_vec_t;

static int
push_line(line_vec_t *lv, const char *file, unsigned line, uint64_t count)
{
    /* Consecutive instructions of one line are the common case: merge them here. */
    if (lv->n > 0 && lv->v[lv->n - 1].file == file && lv->v[lv->n - 1].line == line) {
        if (count > lv->v[lv->n - 1].count)
            lv->v[lv->n - 1].count = count;
        return 0;
    }
    if (lv->n == lv->cap) {
        size_t cap = lv->cap ? 2 * lv->cap : 1024;
        qp_line_t *v = realloc(lv->v, cap * sizeof(*v));
        if (v == NULL)
            return QP_ENOMEM;
        lv->v = v;
        lv->cap = cap;
    }
    lv->v[lv->n++] = (qp_line_t) { file, line, count };
    return 0;
}

/*
 * Every instruction of block B (count COUNT) into LV. DECL_FILE/DECL_LINE (NULL: none):
 * B is the entry block and this is the function's declaration line; its leading
 * instructions on a later line of that file (the prologue, which the line table puts on
 * the line of the `{` or of the last parameters) count for the declaration line instead,
 * as gcov counts them.
 */
static int
block_lines(const cfg_image_t *img, const qp_desc_block_t *b, uint64_t count, line_vec_t *lv,
    const char *decl_file, unsigned decl_line)
{
    uint64_t addr = b->start, end = b->start + b->size;
    unsigned prologue = 0; /* the line of the leading instructions, while skipping */
    int leading = decl_file != NULL;
    while (addr < end) {
        size_t avail;
        const uint8_t *p = cfg_image_ptr(img, addr, &avail);
        if (p == NULL)
            return 0; /* the block is not in the file: nothing to map */
        arch_insn_t in;
        size_t len = 1; /* undecodable bytes: step one byte and resynchronise */
        if (arch_decode(p, avail < end - addr ? avail : end - addr, addr, &in) == 0)
            len = in.len;
        const char *file;
        unsigned line;
        int rc = cfg_image_line(img, addr, &file, &line);
        if (rc == QP_ENOMEM)
            return rc;
        if (rc == 0 && leading) {
            if (prologue == 0 && file == decl_file && line > decl_line)
                prologue = line;
            if (prologue != 0 && file == decl_file && line == prologue) {
                addr += len;
                continue;
            }
            leading = 0;
        }
        if (rc == 0)
            QP_CHECK(push_line(lv, file, line, count));
        addr += len;
    }
    return 0;
}

static int
cmp_line(const void *a, const void *b)
{
    const qp_line_t *x = a, *y = b;
    if (x->file != y->file)
        return strcmp(x->file, y->file);
    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    return x->count > y->count ? -1 : x->count < y->count; /* largest first */
}

static int
cmp_fn(const void *a, const void *b)
{
    const qp_line_fn_t *x = a, *y = b;
    if (x->file != y->file)
        return strcmp(x->file, y->file);
    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    return x->proc < y->proc ? -1 : x->proc > y->proc;
}

/* Sort LV and keep one entry per line, with the largest count. */
static void
merge_lines(line_vec_t *lv)
{
    if (lv->n == 0)
        return;
    qsort(lv->v, lv->n, sizeof(qp_line_t), cmp_line);
    size_t k = 0;
    for (size_t i = 1; i < lv->n; i++)
        if (lv->v[i].file != lv->v[k].file || lv->v[i].line != lv->v[k].line)
            lv->v[++k] = lv->v[i];
    lv->n = k + 1;
}

typedef struct branch_vec {
    qp_line_branch_t *v;
    size_t n, cap;
} branch_vec_t;


/* Does global block GB end in a jump table (has TABLE edges)? Conditional (TAKEN)? */
static int
has_edge_kind(const qp_desc_t *d, const qp_desc_proc_t *p, uint32_t gb, uint8_t kind)
{
    for (uint32_t k = 0; k < p->nedges; k++)
        if (d->edges[p->edge + k].from == gb && d->edges[p->edge + k].kind == kind)
            return 1;
    return 0;
}

/* The source line of the last instruction of global block GB; 0 when unknown. */
static int
branch_line(const cfg_image_t *img, const qp_desc_t *d, uint32_t gb, const char **file,
    unsigned *line)
{
    /* The block's last byte is in its last instruction: its line is the branch's (no
     * decoding: a moved entry's first bytes hold the rewriter's jump). */
    uint64_t at = d->blocks[gb].size > 0 ? d->blocks[gb].start + d->blocks[gb].size - 1 : 0;
    return at != 0 && cfg_image_line(img, at, file, line) == 0;
}

/* Is table block TB the target of a conditional block on the same line (the bounds check
 * of a switch)? Then that block reports the switch's outcomes. */
static int
guarded_table(const cfg_image_t *img, const qp_desc_t *d, const qp_desc_proc_t *p,
    uint32_t tb, const char *file, unsigned line)
{
    for (uint32_t k = 0; k < p->nedges; k++) {
        const qp_desc_edge_t *e = &d->edges[p->edge + k];
        const char *gf;
        unsigned gl;
        if (e->to == tb && e->from != QP_VIRT && e->from != tb
            && (e->kind == CFG_EDGE_TAKEN || e->kind == CFG_EDGE_FALL)
            && has_edge_kind(d, p, e->from, CFG_EDGE_TAKEN)
            && branch_line(img, d, e->from, &gf, &gl) && gf == file && gl == line)
            return 1;
    }
    return 0;
}

static int
push_outcome(branch_vec_t *bv, size_t first, const qp_line_branch_t *o, uint32_t to,
    uint32_t *tos)
{
    /* Outcomes that go to the same block are one (as gcov counts a switch's arcs). */
    for (size_t i = first; to != QP_VIRT && i < bv->n; i++)
        if (tos[i - first] == to) {
            bv->v[i].taken += o->taken;
            return 0;
        }
    if (bv->n == bv->cap) {
        size_t cap = bv->cap ? 2 * bv->cap : 256;
        qp_line_branch_t *v = realloc(bv->v, cap * sizeof(*v));
        if (v == NULL)
            return QP_ENOMEM;
        bv->v = v;
        bv->cap = cap;
    }
    tos[bv->n - first] = to;
    bv->v[bv->n] = *o;
    bv->v[bv->n].branch = (uint32_t)(bv->n - first);
    bv->n++;
    return 0;
}

/*
 * The outcomes of block B (local index) of procedure P when it branches: a conditional
 * jump, or a jump table. A switch's bounds check and its table (one source line) are one
 * branch whose outcomes are the blocks they lead to, as in gcov.
 */
static int
block_branches(const cfg_image_t *img, const qp_desc_t *d, const qp_desc_proc_t *p,
    const qp_flow_t *f, uint32_t b, branch_vec_t *bv)
{
    uint32_t gb = p->block + b;
    int cond = has_edge_kind(d, p, gb, CFG_EDGE_TAKEN);
    int table = has_edge_kind(d, p, gb, CFG_EDGE_TABLE);
    const char *file;
    unsigned line;
    if ((!cond && !table) || !branch_line(img, d, gb, &file, &line))
        return 0;
    if (table && guarded_table(img, d, p, gb, file, line))
        return 0;
    uint8_t executed = f->block_state[b] != QP_FLOW_UNKNOWN && f->block_count[b] > 0;
    uint32_t *tos = malloc((p->nedges + 1) * sizeof(uint32_t));
    if (tos == NULL)
        return QP_ENOMEM;
    size_t first = bv->n;
    int rc = 0;
    for (uint32_t k = 0; k < p->nedges && rc == 0; k++) {
        const qp_desc_edge_t *e = &d->edges[p->edge + k];
        /* The outcomes: every edge out of the block but a call's return. */
        if (e->from != gb || e->kind == CFG_EDGE_CALLRET)
            continue;
        const char *tf;
        unsigned tl;
        if (cond && e->to != QP_VIRT && e->to != gb && has_edge_kind(d, p, e->to, CFG_EDGE_TABLE)
            && branch_line(img, d, e->to, &tf, &tl) && tf == file && tl == line) {
            /* The bounds check of a switch: its table's outcomes instead. */
            for (uint32_t t = 0; t < p->nedges && rc == 0; t++) {
                const qp_desc_edge_t *te = &d->edges[p->edge + t];
                if (te->from != e->to || te->kind != CFG_EDGE_TABLE)
                    continue;
                qp_line_branch_t o = { file, line, gb, 0, f->edge_count[t], executed };
                rc = push_outcome(bv, first, &o, te->to, tos);
            }
            continue;
        }
        qp_line_branch_t o = { file, line, gb, 0, f->edge_count[k], executed };
        rc = push_outcome(bv, first, &o, e->to, tos);
    }
    free(tos);
    return rc;
}

static int
cmp_branch(const void *a, const void *b)
{
    const qp_line_branch_t *x = a, *y = b;
    int c = strcmp(x->file, y->file);
    if (c != 0)
        return c;
    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    if (x->block != y->block)
        return x->block < y->block ? -1 : 1;
    return x->branch < y->branch ? -1 : x->branch > y->branch;
}

/* The lines of one procedure's blocks, and its FN record. */
static int
proc_lines(const cfg_image_t *img, const qp_report_t *r, uint32_t proc, line_vec_t *lv,
    branch_vec_t *bv, qp_lines_t *out)
{
    const qp_desc_t *d = r->desc;
    const qp_desc_proc_t *p = &d->procs[proc];
    qp_flow_t f;
    QP_CHECK(qp_report_flow(r, proc, &f));
    int rc = 0;
    /*
     * gcov gives the function's declaration line the count of its entry block, while
     * the line table puts the prologue on the line of the `{`: the declaration line
     * gets it (the rewriter moved the function's DIE to its relocated code: looked up
     * there too).
     */
    const char *file;
    unsigned line;
    const char *name = qp_desc_str(d, p->name);
    int found = cfg_image_func_line(img, name, p->entry, &file, &line);
    if (found == QP_ENOTFOUND && p->new_entry != 0)
        found = cfg_image_func_line(img, name, p->new_entry, &file, &line);
    if (found == QP_ENOMEM)
        rc = found;
    for (uint32_t b = 0; b < p->nblocks && rc == 0; b++) {
        if (f.block_state[b] == QP_FLOW_UNKNOWN) {
            out->nblocks_skipped++;
            continue;
        }
        int entry = b == 0 && found == 0;
        rc = block_lines(img, &d->blocks[p->block + b], f.block_count[b], lv,
                         entry ? file : NULL, entry ? line : 0);
        if (rc == 0)
            rc = block_branches(img, d, p, &f, b, bv);
    }
    if (rc == 0 && found == 0 && f.block_state[0] != QP_FLOW_UNKNOWN)
        rc = push_line(lv, file, line, f.block_count[0]);
    if (rc == 0 && found != 0)
        found = cfg_image_line(img, p->entry, &file, &line);
    if (rc == 0 && found == 0 && f.calls_known)
        out->fns[out->nfns++] = (qp_line_fn_t) { file, line, proc, f.calls };
    qp_flow_free(&f);
    return rc;
}

void
qp_lines_free(qp_lines_t *l)
{
    if (l == NULL)
        return;
    free(l->lines);
    free(l->branches);
    free(l->fns);
    memset(l, 0, sizeof(*l));
}

int
qp_lines_collect(const cfg_image_t *img, const qp_report_t *r, qp_lines_t *out)
{
    if (out != NULL)
        memset(out, 0, sizeof(*out));
    if (img == NULL || r == NULL || r->desc == NULL || out == NULL)
        return QP_EINVAL;
    out->fns = calloc(r->nprocs ? r->nprocs : 1, sizeof(qp_line_fn_t));
    if (out->fns == NULL)
        return QP_ENOMEM;
    line_vec_t lv = { 0 };
    branch_vec_t bv = { 0 };
    int rc = 0;
    for (uint32_t i = 0; i < r->nprocs && rc == 0; i++)
        rc = proc_lines(img, r, r->procs[i].proc, &lv, &bv, out);
    if (rc < 0) {
        free(lv.v);
        free(bv.v);
        qp_lines_free(out);
        return rc;
    }
    if (bv.n > 0)
        qsort(bv.v, bv.n, sizeof(qp_line_branch_t), cmp_branch);
    out->branches = bv.v;
    out->nbranches = bv.n;
    merge_lines(&lv);
    qsort(out->fns, out->nfns, sizeof(qp_line_fn_t), cmp_fn);
    out->lines = lv.v;
    out->nlines = lv.n;
    return 0;
}
