/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * qp report --lcov: an lcov tracefile (geninfo's format: TN, SF, FN, FNDA, FNF, FNH, DA,
 * LF, LH, end_of_record), one record per source file, from the per-line counts of
 * libqpt's report (qpt_qp_lines: a line's count is the largest count of the blocks that
 * have an instruction on it, as gcov prints).
 */
#include <inttypes.h>
#include <string.h>

#include "include/qpt/qpt.h"
#include "tools/qp_tool.h"

/* One record: the functions, lines and branches [F0, F1), [L0, L1), [B0, B1) of L, all of
 * one file. */
static void
print_record(FILE *f, const qp_inputs_t *in, const char *file, const qpt_qp_lines_t *l,
             uint32_t f0, uint32_t f1, uint32_t l0, uint32_t l1, uint32_t b0, uint32_t b1)
{
    qpt_qp_line_count_t c;
    qpt_qp_proc_t p;
    fprintf(f, "TN:\nSF:%s\n", file);
    size_t hit = 0;
    for (uint32_t i = f0; i < f1; i++)
        if (qpt_qp_lines_fn(l, i, &c) == 0 && qpt_qp_proc(in->qp, c.proc, &p) == 0)
            fprintf(f, "FN:%u,%s\n", c.line, p.stored_name);
    for (uint32_t i = f0; i < f1; i++)
        if (qpt_qp_lines_fn(l, i, &c) == 0 && qpt_qp_proc(in->qp, c.proc, &p) == 0) {
            fprintf(f, "FNDA:%" PRIu64 ",%s\n", c.count, p.stored_name);
            hit += c.count > 0;
        }
    fprintf(f, "FNF:%zu\nFNH:%zu\n", (size_t)(f1 - f0), hit);
    /* Branches: every outcome of a conditional jump or jump table, exact from the edge
     * counts; "-" when the branching block never ran (geninfo's convention). */
    hit = 0;
    for (uint32_t i = b0; i < b1; i++) {
        if (qpt_qp_lines_branch(l, i, &c) < 0)
            continue;
        if (c.executed)
            fprintf(f, "BRDA:%u,%u,%u,%" PRIu64 "\n", c.line, c.block, c.branch, c.count);
        else
            fprintf(f, "BRDA:%u,%u,%u,-\n", c.line, c.block, c.branch);
        hit += c.executed && c.count > 0;
    }
    if (b1 > b0)
        fprintf(f, "BRF:%zu\nBRH:%zu\n", (size_t)(b1 - b0), hit);
    hit = 0;
    for (uint32_t i = l0; i < l1; i++)
        if (qpt_qp_lines_line(l, i, &c) == 0) {
            fprintf(f, "DA:%u,%" PRIu64 "\n", c.line, c.count);
            hit += c.count > 0;
        }
    fprintf(f, "LF:%zu\nLH:%zu\nend_of_record\n", (size_t)(l1 - l0), hit);
}

/* The first of two file names in sorted order (NULL: none). */
static const char *
first_file(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        return a ? a : b;
    return strcmp(a, b) <= 0 ? a : b;
}

/* The file of entry I of a list (GET), or NULL past its end. */
static const char *
file_at(int (*get)(const qpt_qp_lines_t *, uint32_t, qpt_qp_line_count_t *),
        const qpt_qp_lines_t *l, uint32_t i)
{
    qpt_qp_line_count_t c;
    return get(l, i, &c) == 0 ? c.file : NULL;
}

/* The next file name in sorted order among the three lists, or NULL at their end. */
static const char *
next_file(const qpt_qp_lines_t *l, uint32_t fi, uint32_t li, uint32_t bi)
{
    const char *a = file_at(qpt_qp_lines_fn, l, fi);
    const char *b = file_at(qpt_qp_lines_line, l, li);
    const char *c = file_at(qpt_qp_lines_branch, l, bi);
    return first_file(first_file(a, b), c);
}

int
qp_print_lcov(FILE *f, const qp_inputs_t *in)
{
    qpt_qp_lines_t *l;
    qpt_qp_lines_info_t n;
    if (qpt_qp_lines(in->qp, &l) < 0) {
        fprintf(stderr, "qp: %s: %s\n", in->exe, qpt_strerror(QPT_ENOMEM));
        return 1;
    }
    qpt_qp_lines_info(l, &n);
    if (n.nlines == 0) {
        /* An empty tracefile would read as "nothing covered": refuse instead. */
        fprintf(stderr, "qp: %s: no line information for the measured code (build it with "
                        "-g, unstripped): no tracefile written\n", in->exe);
        qpt_qp_lines_free(l);
        return 1;
    }
    uint32_t fi = 0, li = 0, bi = 0;
    const char *file;
    /* The lists are sorted by file name, and one name is one pointer. */
    while ((file = next_file(l, fi, li, bi)) != NULL) {
        uint32_t f0 = fi, l0 = li, b0 = bi;
        while (file_at(qpt_qp_lines_fn, l, fi) == file)
            fi++;
        while (file_at(qpt_qp_lines_line, l, li) == file)
            li++;
        while (file_at(qpt_qp_lines_branch, l, bi) == file)
            bi++;
        print_record(f, in, file, l, f0, fi, l0, li, b0, bi);
    }
    qpt_qp_lines_free(l);
    return 0;
}
