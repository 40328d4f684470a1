/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * qp report --lcov: an lcov tracefile (geninfo's format: TN, SF, FN, FNDA, FNF, FNH, DA,
 * LF, LH, end_of_record), one record per source file, from the per-line counts of
 * report/qp_report.h (a line's count is the largest count of the blocks that have an
 * instruction on it, as gcov prints).
 */
#include <inttypes.h>
#include <string.h>

#include "tools/qp_tool.h"

/* One record: the functions FNS[0..nfns) and lines LINES[0..nlines) of one file. */
static void
print_record(FILE *f, const qp_inputs_t *in, const char *file, const qp_line_fn_t *fns,
             size_t nfns, const qp_line_t *lines, size_t nlines,
             const qp_line_branch_t *brs, size_t nbrs)
{
    fprintf(f, "TN:\nSF:%s\n", file);
    size_t hit = 0;
    for (size_t i = 0; i < nfns; i++)
        fprintf(f, "FN:%u,%s\n", fns[i].line, qp_desc_str(in->desc, in->desc->procs[fns[i].proc].name));
    for (size_t i = 0; i < nfns; i++) {
        fprintf(f, "FNDA:%" PRIu64 ",%s\n", fns[i].calls,
                qp_desc_str(in->desc, in->desc->procs[fns[i].proc].name));
        hit += fns[i].calls > 0;
    }
    fprintf(f, "FNF:%zu\nFNH:%zu\n", nfns, hit);
    /* Branches: every outcome of a conditional jump or jump table, exact from the edge
     * counts; "-" when the branching block never ran (geninfo's convention). */
    hit = 0;
    for (size_t i = 0; i < nbrs; i++) {
        if (brs[i].executed)
            fprintf(f, "BRDA:%u,%u,%u,%" PRIu64 "\n", brs[i].line, brs[i].block, brs[i].branch,
                    brs[i].taken);
        else
            fprintf(f, "BRDA:%u,%u,%u,-\n", brs[i].line, brs[i].block, brs[i].branch);
        hit += brs[i].executed && brs[i].taken > 0;
    }
    if (nbrs > 0)
        fprintf(f, "BRF:%zu\nBRH:%zu\n", nbrs, hit);
    hit = 0;
    for (size_t i = 0; i < nlines; i++) {
        fprintf(f, "DA:%u,%" PRIu64 "\n", lines[i].line, lines[i].count);
        hit += lines[i].count > 0;
    }
    fprintf(f, "LF:%zu\nLH:%zu\nend_of_record\n", nlines, hit);
}

/* The first of two file names in sorted order (NULL: none). */
static const char *
first_file(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        return a ? a : b;
    return strcmp(a, b) <= 0 ? a : b;
}

/* The next file name in sorted order among the three lists, or NULL at their end. */
static const char *
next_file(const qp_lines_t *l, size_t fi, size_t li, size_t bi)
{
    const char *a = fi < l->nfns ? l->fns[fi].file : NULL;
    const char *b = li < l->nlines ? l->lines[li].file : NULL;
    const char *c = bi < l->nbranches ? l->branches[bi].file : NULL;
    return first_file(first_file(a, b), c);
}

int
qp_print_lcov(FILE *f, const qp_inputs_t *in)
{
    qp_lines_t l;
    if (qp_lines_collect(in->img, in->rep, &l) < 0) {
        fprintf(stderr, "qp: %s: %s\n", in->exe, qp_strerror(QP_ENOMEM));
        return 1;
    }
    if (l.nlines == 0) {
        /* An empty tracefile would read as "nothing covered": refuse instead. */
        fprintf(stderr, "qp: %s: no line information for the measured code (build it with "
                        "-g, unstripped): no tracefile written\n", in->exe);
        qp_lines_free(&l);
        return 1;
    }
    size_t fi = 0, li = 0, bi = 0;
    const char *file;
    /* The lists are sorted by file name, and one name is one pointer. */
    while ((file = next_file(&l, fi, li, bi)) != NULL) {
        size_t f0 = fi, l0 = li, b0 = bi;
        while (fi < l.nfns && l.fns[fi].file == file)
            fi++;
        while (li < l.nlines && l.lines[li].file == file)
            li++;
        while (bi < l.nbranches && l.branches[bi].file == file)
            bi++;
        print_record(f, in, file, l.fns + f0, fi - f0, l.lines + l0, li - l0, l.branches + b0,
                     bi - b0);
    }
    qp_lines_free(&l);
    return 0;
}
