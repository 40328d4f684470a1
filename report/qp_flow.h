/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_FLOW_H
#define QP_FLOW_H
/*
 * PURPOSE: every edge and block count of one procedure from the measured ones, by flow
 * conservation (Kirchhoff's law) over the procedure's blocks plus the virtual node X,
 * which stands for both EXIT and ENTRY. qp's counters (every edge outside a spanning
 * tree) determine everything; a naive profile (block counts) may leave some edges
 * unknown, and they are reported unknown, never guessed. Where the counts over-determine
 * a node, the law is checked and every violation is returned.
 * Memory only: no printing, no files. A qp_flow_t owns its arrays (qp_flow_free).
 */
#include <stddef.h>
#include <stdint.h>

#include "base/qp_desc.h"

/* How a count is known (qp_flow_t.edge_state, block_state). */
enum {
    QP_FLOW_UNKNOWN = 0, /* not determined by the measured counts */
    QP_FLOW_MEASURED,    /* read from a counter */
    QP_FLOW_SOLVED,      /* reconstructed by flow conservation */
    QP_FLOW_CLAMPED,     /* conservation asked for a negative count: set to 0 (see the
                          * violations) */
};

/* What went wrong at a node (qp_flow_violation_t.kind). */
enum {
    QP_FLOW_V_NEGATIVE = 1, /* solving an edge gave a negative count */
    QP_FLOW_V_UNBALANCED, /* the node's flow in != its count or != flow out + abandoned */
    QP_FLOW_V_OVERFLOW,   /* a count does not fit in 64 bits */
};

typedef struct qp_flow_violation {
    uint8_t kind;   /* QP_FLOW_V_* */
    uint32_t block; /* global block index, or QP_VIRT for X */
    uint32_t edge;  /* NEGATIVE: the global index of the edge, else QP_VIRT */
    uint64_t count; /* the node's count (UNBALANCED; 0 when it is unknown) */
    uint64_t in;    /* known flow in, X: plus every abandoned count (saturated) */
    uint64_t out;   /* known flow out, blocks: plus abandoned (saturated) */
} qp_flow_violation_t;

/* The counts of one procedure. Edge and block arrays use local indices. */
typedef struct qp_flow {
    uint32_t proc;         /* procedure index in the description */
    uint32_t nedges;       /* = procs[proc].nedges; edge i is edges[proc.edge + i] */
    uint32_t nblocks;      /* = procs[proc].nblocks; block i is blocks[proc.block + i] */
    uint64_t *edge_count;  /* per edge (0 when unknown) */
    uint8_t *edge_state;   /* per edge: QP_FLOW_* */
    uint64_t *block_count; /* per block: executions (0 when unknown) */
    uint8_t *block_state;  /* per block: QP_FLOW_* */
    uint64_t calls;        /* flow on the QP_EDGE_ENTRY edge: times it was called */
    int calls_known;       /* the entry edge's count is known */
    uint64_t insns;        /* sum over known blocks of count x ninsns (saturated) */
    int insns_exact;       /* every block count known and no overflow */
    uint32_t nunknown_edges;         /* edges whose count stays unknown */
    qp_flow_violation_t *violations; /* where Kirchhoff fails, in the order found */
    size_t nviolations;              /* how many */
} qp_flow_t;

/*
 * Reconstruct the counts of procedure PROC of D (which must be measured). COUNTERS has
 * NCOUNTERS values (a checked profile). ABANDONED may be NULL or hold one count per
 * global block of D: executions of the block that left the procedure for good (frames
 * active at exit, from back-traces), extra flow from the block to X.
 * Returns 0 (violations are results, not failures), QP_EINVAL (bad arguments, PROC not
 * measured, NCOUNTERS not D's) or QP_ENOMEM. Free *OUT with qp_flow_free.
 */
int
qp_flow_solve(const qp_desc_t *d, uint32_t proc, const uint64_t *counters,
    size_t ncounters, const uint64_t *abandoned, qp_flow_t *out /*OUT*/);

/*
 * The calls of the procedures counted where they are called (QP_PROC_BY_CALLS): for
 * each, the sum of the counts of the direct calls and tail calls naming its entry, from
 * the solved flow of their procedures (callers first; the description's dependencies are
 * acyclic). known[i] is 0 when a site's count is not known, the sum overflows, or the
 * procedure's callers could not be ordered (a cycle: then the description is bad).
 */
/*
 * A procedure whose inputs are all zero (no counter of it counted, nothing abandoned in
 * it, and, counted by its calls, no call) solves to 0 everywhere; only which counts are
 * known depends on it, through its graph. Most procedures of a big program never run,
 * and a report solves each several times (the calls of those counted by their calls,
 * the flat profile, the PLT stubs): so the first solution of such a procedure is kept
 * in this summary and the later ones are not solved again.
 */
typedef struct qp_flow_zero {
    uint32_t nunknown_edges; /* qp_flow_t's, with zero inputs */
    uint8_t done;            /* the fields below are filled */
    uint8_t calls_known;     /* qp_flow_t's */
    uint8_t insns_exact;     /* qp_flow_t's */
    uint8_t all_known;       /* every edge and block count is known (0) */
} qp_flow_zero_t;

typedef struct qp_flow_entries {
    uint32_t nprocs;
    uint64_t *count;      /* per procedure (0 for the others) */
    uint8_t *known;       /* per procedure: count[i] is exact */
    qp_flow_zero_t *zero; /* per procedure: its solution with zero inputs, once one was
                           * solved (a cache qp_flow_solve_in fills; NULL: none kept) */
    /* Per procedure: a block of it has abandoned flow in LEFT_FOR (the ABANDONED these
     * counts were made with), so that asking whether its inputs are all zero does not
     * read every block's again; NULL: not known. The caller's LEFT, not owned: it must
     * live as long as these (qp_report_t keeps it beside ABANDONED). */
    const uint8_t *left;
    const uint64_t *left_for;
} qp_flow_entries_t;

/*
 * The entry counts of every QP_PROC_BY_CALLS procedure of D into *OUT, with COUNTERS and
 * ABANDONED as for qp_flow_solve. Returns 0, QP_EINVAL or QP_ENOMEM. Free *OUT with
 * qp_flow_entries_free.
 */
int
qp_flow_entries(const qp_desc_t *d, const uint64_t *counters, size_t ncounters,
    const uint64_t *abandoned, qp_flow_entries_t *out /*OUT*/);

void
qp_flow_entries_free(qp_flow_entries_t *e);

/*
 * What qp_flow_entries_visit hands over of measured procedure PROC, once its inputs are
 * final (for one counted by its calls, its entry count in the entries): Z, when its
 * inputs are all zero (qp_flow_zero_known), else NULL; F, its solved flow, or NULL when
 * Z says every count is known (each one 0). F and Z are the callee's until it returns;
 * the procedure's blocks and edges are still decoded then. A negative return stops
 * the walk and is returned.
 */
typedef int (*qp_flow_visit_fn)(void *arg, uint32_t proc, const qp_flow_t *f,
    const qp_flow_zero_t *z);

/*
 * qp_flow_entries, solving each measured procedure of D once and handing it to VISIT
 * (ARG) then: by index, except that one counted by its calls waits until its callers
 * were (then the lowest index of those ready first), and those whose callers form a
 * cycle come last (their calls stay unknown). A report that reads every procedure's
 * counts this way solves none twice, and a lazy description decodes most chunks once.
 * LEFT (or NULL): per procedure, whether a block of it has abandoned flow in ABANDONED,
 * as its writer knows (qp_backtrace_abandoned): then ABANDONED is read only in those
 * procedures' blocks; without it, in each solved procedure's.
 */
int
qp_flow_entries_visit(const qp_desc_t *d, const uint64_t *counters, size_t ncounters,
    const uint64_t *abandoned, const uint8_t *left, qp_flow_visit_fn visit, void *arg,
    qp_flow_entries_t *out /*OUT*/);

/*
 * qp_flow_solve with the calls of the procedures counted by their calls (ENTRIES, from
 * qp_flow_entries with the same counters): without them (NULL, or not known), such a
 * procedure's entry edge and what follows from it stay unknown.
 */
int
qp_flow_solve_in(const qp_desc_t *d, uint32_t proc, const uint64_t *counters,
    size_t ncounters, const uint64_t *abandoned, const qp_flow_entries_t *entries,
    qp_flow_t *out /*OUT*/);

/*
 * Are the inputs of measured procedure PROC of D all zero (as qp_flow_solve_in would
 * read them: its counters, the ABANDONED counts of its blocks, and, when it is counted
 * by its calls, ENTRIES' count of it), and was such a solution of it kept in ENTRIES
 * (qp_flow_zero_t)? Then 1 with *OUT filled: every count of PROC is 0, and *OUT says
 * which are known. Else 0: solve it.
 */
int
qp_flow_zero_known(const qp_desc_t *d, uint32_t proc, const uint64_t *counters,
    const uint64_t *abandoned, const qp_flow_entries_t *entries,
    qp_flow_zero_t *out /*OUT*/);

/* A procedure of a description by its entry address. A table of these sorted with
 * qp_flow_entry_cmp (by entry, then procedure) finds the procedures entered at an
 * address (report/qp_flow.c, report/qp_callgraph.c). */
typedef struct qp_flow_entry_ref {
    uint64_t entry; /* its entry address */
    uint32_t proc;  /* its index in the description */
} qp_flow_entry_ref_t;

/* qsort's comparison of two qp_flow_entry_ref_t. */
int
qp_flow_entry_cmp(const void *a, const void *b);

/*
 * D's zero-input summaries (D->zero, D->zero_entry, allocated here; qp_desc_summarize_fn
 * for the writer): each measured procedure solved with zero inputs, as a report solves
 * one that did not run; one counted by its calls twice, its entry count unknown and
 * known to be 0, on up to THREADS threads (the same result for any number). D must be
 * valid. Returns 0 or QP_ENOMEM.
 */
int
qp_flow_zero_summaries(qp_desc_t *d, unsigned threads);

/* Free F's arrays and zero it. NULL is fine. */
void
qp_flow_free(qp_flow_t *f);

/* A short name for a QP_FLOW_* state ("measured", "reconstructed", "unknown", ...). */
const char *
qp_flow_state_name(uint8_t state);

#endif
