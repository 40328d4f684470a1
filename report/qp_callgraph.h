/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_CALLGRAPH_H
#define QP_CALLGRAPH_H
/*
 * PURPOSE: the call graph of a profile: who called whom how often, from the call sites
 * of the description (qp_desc_call_t) and the block and edge counts of each caller.
 * Counts per call site are exact (a call is made as often as its block runs; a tail
 * call as often as its edge is taken); per caller->callee pair they are sums of sites.
 * Calls through a pointer go to the callee their site's target table names (qp_format.h:
 * exact for each target that had a bucket to itself); what the tables cannot say is kept
 * apart: calls whose bucket several targets shared, or whose site has no table, and calls
 * that come from code that was not measured (the callee's entry count minus every
 * measured call to it).
 *
 * Inclusive instructions (a procedure and everything it called) are not measured; they
 * are derived the way gprof derives inclusive time: a callee's inclusive count is shared
 * among its callers in proportion to their calls. A share is exact when the caller made
 * every call of the callee; the result is marked approximate otherwise. Recursion:
 * procedures that call each other (a strongly connected component) are one cycle whose
 * members all get the cycle's inclusive count, shared among callers from outside it.
 * Calls whose callee is unknown or not measured add nothing: the result is then a lower
 * bound and marked so. Calls to a PLT stub that the report counted add the stub's
 * instructions (exact: a call runs a fixed number of them), not what the stub jumps to
 * (outside the module, as every direct call out of it).
 * Memory only: no printing.
 */
#include <stddef.h>
#include <stdint.h>

#include "report/qp_report.h"

/* An arc: every call site of `caller` to one callee (or one indirect site). */
typedef struct qp_cg_arc {
    uint32_t caller;     /* description procedure index */
    uint32_t callee;     /* description procedure index, QP_VIRT when not described or
                          * indirect */
    uint64_t target;     /* the callee's entry, 0 for an indirect site */
    uint64_t site;       /* indirect: the site's address; else the first site's */
    const char *name;    /* the callee's name ("" when unknown) */
    uint64_t count;      /* calls made (sum over the sites) */
    uint32_t nsites;     /* call sites merged */
    uint8_t known;       /* every site's count is known */
    uint8_t tail;        /* made by jumps (tail calls) only */
    uint8_t through_pointer; /* some of its calls were indirect (a site's target table
                              * named the callee) */
    uint8_t plt_lower;   /* plt_insns is a lower bound (lazy binding, not decoded) */
    uint64_t plt_insns;  /* direct calls to a PLT stub the report counted
                          * (qp_report_count_plt): the instructions they ran in it */
} qp_cg_arc_t;

enum {
    QP_CG_APPROX = 1u << 0, /* inclusive: apportioned by call counts */
    QP_CG_LOWER = 1u << 1,  /* inclusive: calls to unknown or unmeasured code add nothing */
    QP_CG_CYCLE = 1u << 2,  /* part of a cycle (recursion): the cycle's inclusive count */
};

typedef struct qp_callgraph {
    const qp_desc_t *desc;  /* not owned */
    qp_cg_arc_t *arcs;      /* by caller, then callee entry (indirect sites last) */
    size_t narcs;
    uint32_t *arc_first;    /* per procedure: its first arc (arcs of p: arc_first[p] ..
                             * arc_first[p + 1]) */
    uint64_t *self;         /* per procedure: instructions executed in it */
    uint64_t *calls;        /* per procedure: times it was entered (measured ones) */
    uint8_t *measured;      /* per procedure: its counts are known (calls) */
    double *incl;           /* per procedure: inclusive instructions */
    double *ext;            /* per procedure: calls into its cycle from outside it (its
                             * calls when it is in none): a caller's share of incl is
                             * its calls / ext */
    uint8_t *flags;         /* per procedure: QP_CG_* */
    uint32_t *cycle;        /* per procedure: its cycle number (1..), 0 when none */
} qp_callgraph_t;

/* Build the call graph of report R. 0, QP_EINVAL or QP_ENOMEM; free with _free. */
int qp_callgraph_build(const qp_report_t *r, qp_callgraph_t *out /*OUT*/);

void qp_callgraph_free(qp_callgraph_t *cg);

#endif
