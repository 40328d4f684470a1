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

/* Every instruction of block B (count COUNT) into LV. */
static int
block_lines(
    const cfg_image_t *img, const qp_desc_block_t *b, uint64_t count, line_vec_t *lv)
{
    uint64_t addr = b->start, end = b->start + b->size;
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

/* The lines of one procedure's blocks, and its FN record. */
static int
proc_lines(const cfg_image_t *img, const qp_report_t *r, uint32_t proc, line_vec_t *lv,
    qp_lines_t *out)
{
    const qp_desc_t *d = r->desc;
    const qp_desc_proc_t *p = &d->procs[proc];
    qp_flow_t f;
    QP_CHECK(qp_report_flow(r, proc, &f));
    int rc = 0;
    for (uint32_t b = 0; b < p->nblocks && rc == 0; b++) {
        if (f.block_state[b] == QP_FLOW_UNKNOWN) {
            out->nblocks_skipped++;
            continue;
        }
        rc = block_lines(img, &d->blocks[p->block + b], f.block_count[b], lv);
    }
    /*
     * gcov gives the function's declaration line the count of its entry block, while
     * the line table puts the prologue on the line of the `{`: add that line too.
     */
    const char *file;
    unsigned line;
    const char *name = qp_desc_str(d, p->name);
    int found = cfg_image_func_line(img, name, p->entry, &file, &line);
    if (found == QP_ENOMEM)
        rc = found;
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
    int rc = 0;
    for (uint32_t i = 0; i < r->nprocs && rc == 0; i++)
        rc = proc_lines(img, r, r->procs[i].proc, &lv, out);
    if (rc < 0) {
        free(lv.v);
        qp_lines_free(out);
        return rc;
    }
    merge_lines(&lv);
    qsort(out->fns, out->nfns, sizeof(qp_line_fn_t), cmp_fn);
    out->lines = lv.v;
    out->nlines = lv.n;
    return 0;
}
