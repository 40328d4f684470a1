/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_TRACE_H
#define QP_TRACE_H
/*
 * PURPOSE: reading control-flow traces (base/qpt_trace_format.h) and regenerating the
 * complete block trace from them: a naive trace lists every block; a chord trace
 * (--driver=trace) lists only the events the CFG cannot foresee, and the walk here
 * follows the CFG between them (driver/drv_trace.c says which events there are).
 * Where the walk cannot follow (a thread control block reused unseen, a longjmp, an
 * exception, an asynchronous entry such as a signal handler, a trace that was cut
 * short), it says so through the sink's `mark`, never silently.
 */
#include <stddef.h>
#include <stdint.h>

#include "base/qpt_trace_format.h"

typedef struct qp_trace_desc {
    qpt_trace_hdr_t hdr;
    const qpt_trace_proc_t *procs;
    const qpt_trace_block_t *blocks;
    const qpt_trace_edge_t *edges;
    const qpt_trace_event_t *events;
    /* per block its first instruction (nblocks + 1), and the instructions' lengths */
    const uint32_t *ifirst;
    const uint8_t *ilen;
    /* where each instruction went in the rewritten program (placing signal handlers) */
    qpt_trace_new_hdr_t nhdr;
    const qpt_trace_new_t *inew;
    uint32_t *norder;  /* the instructions with a known place, by address (malloc'ed) */
    uint32_t nnorder;
    uint32_t *iblock;  /* per instruction, its block (malloc'ed) */
    uint8_t *ntext;    /* the new code's bytes (nhdr.size; malloc'ed; NULL: not read) */
    /* --trace-mem (NULL without): per block its accesses, and the accesses */
    const qpt_trace_mblock_t *mblocks;
    const qpt_trace_mref_t *mrefs;
    uint32_t nmrefs;
    /* code that is not traced: PLT stubs, procedures left in place (nouts 0 when the
     * description does not list them); blocks' `callee` for their direct calls */
    const qpt_trace_out_t *outs;
    uint32_t nouts;
    const char *out_names; /* outs[i].name: an offset in it, NUL-terminated */
    uint8_t *mem;   /* owns the above */
} qp_trace_desc_t;

/*
 * Read the `.qpt.trace` section of the instrumented program PATH into *D (free with
 * qp_trace_desc_free), checking every index. 0, or QP_EIO (errno kept), QP_EFORMAT
 * (not ELF, no such section, or a malformed one) or QP_ENOMEM, with one line in WHY.
 */
int qp_trace_desc_read(const char *path, qp_trace_desc_t *d /*OUT*/, char *why, size_t whylen);
void qp_trace_desc_free(qp_trace_desc_t *d);

/* A trace file: its header and its records (malloc'ed; QPT_TRACE_REPEAT runs expanded),
 * and the file's size in *BYTES (may be NULL). 0 or QP_E* with WHY. */
int qp_trace_file_read(const char *path, qpt_trace_file_t *hdr /*OUT*/, uint32_t **rec /*OUT*/,
                       size_t *n /*OUT*/, uint64_t *bytes /*OUT*/, char *why, size_t whylen);

/* The same, and the values of QPT_TRACE_VAL records in *VALS[0..*NVALS) (malloc'ed;
 * VALS may be NULL: dropped), the program's load bias in *BIAS (0 when the file does not
 * say; may be NULL). A QPT_TRACE_SIGNAL, QPT_TRACE_FAULT or QPT_TRACE_JUMP record stays in
 * the records as three words: the marker, then the address (the interrupted rip, the
 * jump's target) less the load bias, low word first. */
int qp_trace_file_read_vals(const char *path, qpt_trace_file_t *hdr /*OUT*/,
                            uint32_t **rec /*OUT*/, size_t *n /*OUT*/, uint64_t **vals /*OUT*/,
                            size_t *nvals /*OUT*/, uint64_t *bias /*OUT*/, uint64_t *bytes /*OUT*/,
                            char *why, size_t whylen);

/* Where the regenerated trace goes. */
typedef struct qp_trace_sink {
    /* Block BLOCK (of the description; its start address ADDR) ran. Non-zero stops. */
    int (*block)(void *arg, uint32_t block, uint64_t addr);
    /* The walk could not follow exactly here: WHAT says why; ADDR a block's start or 0. */
    int (*mark)(void *arg, const char *what, uint64_t addr);
    void *arg;
    /* When not NULL: a signal handler placed exactly starts; it interrupted the
     * instruction at INSN (link-time address; 0: code not traced). Non-zero stops. */
    int (*signal)(void *arg, uint64_t insn);
} qp_trace_sink_t;

typedef struct qp_trace_stats {
    uint64_t records;  /* records read (events and markers) */
    uint64_t blocks;   /* blocks regenerated */
    uint64_t marks;    /* places where the walk said it could not follow */
    int complete;      /* the trace ends with QPT_TRACE_END */
} qp_trace_stats_t;

/*
 * Regenerate the blocks of one thread's trace REC[0..N) of a program described by D.
 * 0, QP_EINVAL (a record names no event of D), QP_ENOMEM, or the sink's non-zero
 * return.
 */
int qp_trace_regen(const qp_trace_desc_t *d, const uint32_t *rec, size_t n,
                   const qp_trace_sink_t *sink, qp_trace_stats_t *st /*OUT*/);

/* Where a regenerated address trace goes. */
typedef struct qp_trace_mem_sink {
    /* The instruction at INSN (link-time address) accessed SIZE bytes at ADDR (ACCESS:
     * QPT_TM_LOAD, QPT_TM_STORE, or both: a modify). Non-zero stops. */
    int (*access)(void *arg, unsigned access, uint64_t addr, uint32_t size, uint64_t insn);
    /* As qp_trace_sink_t's (also: an access not traced, values that ran out). */
    int (*mark)(void *arg, const char *what, uint64_t addr);
    void *arg;
} qp_trace_mem_sink_t;

/*
 * Regenerate the data accesses of one thread's trace: the walk of qp_trace_regen, each
 * block's accesses (D's mem part, QP_EINVAL without) taking their values from
 * VALS[0..NVALS) in order; BIAS (the file's) is added to statically known addresses. *NACC (may be NULL): accesses given to the sink. Values that
 * run out (a cut trace) or are left over are marked.
 */
int qp_trace_mem_regen(const qp_trace_desc_t *d, const uint32_t *rec, size_t n,
                       const uint64_t *vals, size_t nvals, uint64_t bias,
                       const qp_trace_mem_sink_t *sink,
                       qp_trace_stats_t *st /*OUT*/, uint64_t *nacc /*OUT*/);

/*
 * What a trace does not cover (a summary, never a silent gap; report/qp_trace_cover.c):
 * the regenerated blocks that end in a call of code that is not traced - the C library
 * and other shared objects, the loader, code reached through a pointer or the PLT
 * (QPT_TC_OUTSIDE: what it ran is not in the trace; callbacks into traced code are) and
 * C library functions that never call back (QPT_TB_LEAFCALL: they record nothing) - and
 * the cut marks. Fed block by block and mark by mark from a sink (the walk that prints
 * them), or by a walk of its own (qp_trace_untraced_walk).
 */
typedef struct qp_trace_untraced {
    uint64_t calls;      /* calls of code not traced */
    uint64_t leaf;       /* calls of C library functions that never call back */
    uint64_t cuts;       /* "cut:" marks */
    uint64_t *by;        /* calls (both kinds) per entry of the description's list of code
                          * not traced (d->outs; nouts + 1 counts, malloc'ed) */
    int ptr;             /* the last block called through a pointer: whether to traced
                          * code is known at the next block */
    uint32_t ptr_callee; /* ... its entry in d->outs, or QPT_TRACE_NONE */
    const qp_trace_desc_t *desc; /* during qp_trace_untraced_walk */
} qp_trace_untraced_t;

/* Zeroed counts for D's code not traced in *U (free with qp_trace_untraced_free). 0,
 * QP_EINVAL or QP_ENOMEM. */
int qp_trace_untraced_init(qp_trace_untraced_t *u /*OUT*/, const qp_trace_desc_t *d);
void qp_trace_untraced_free(qp_trace_untraced_t *u);
/* Every count back to 0 (the array kept). */
void qp_trace_untraced_reset(qp_trace_untraced_t *u, const qp_trace_desc_t *d);
/* Block BLOCK of D was regenerated (a sink's block callback passes each on). */
void qp_trace_untraced_block(qp_trace_untraced_t *u, const qp_trace_desc_t *d, uint32_t block);
/* The walk marked WHAT (a sink's mark callback passes each on). */
void qp_trace_untraced_mark(qp_trace_untraced_t *u, const char *what);
/* The trace ended: a call through a pointer in its last block counts. */
void qp_trace_untraced_end(qp_trace_untraced_t *u, const qp_trace_desc_t *d);
/* Add U's counts to TO's. */
void qp_trace_untraced_add(qp_trace_untraced_t *to, const qp_trace_untraced_t *u,
                           const qp_trace_desc_t *d);
/* Count the blocks of trace REC[0..N) into U with a walk of their own (its marks not
 * counted: an address walk gives no blocks, and marks them itself). qp_trace_regen's
 * return. */
int qp_trace_untraced_walk(const qp_trace_desc_t *d, const uint32_t *rec, size_t n,
                           qp_trace_untraced_t *u);
/* The entries of d->outs most called in U: at most MAX indexes in TOP, most called
 * first; the number of other entries called in *MORE, and the calls of no entry
 * (through pointers) in *POINTERS. Returns how many TOP holds. */
uint32_t qp_trace_untraced_top(const qp_trace_desc_t *d, const qp_trace_untraced_t *u,
                               uint32_t *top /*OUT*/, uint32_t max, uint32_t *more /*OUT*/,
                               uint64_t *pointers /*OUT*/);
/* How many procedures the rewrite left in place (d->outs of kind QPT_TO_LEFT). */
uint32_t qp_trace_left_in_place(const qp_trace_desc_t *d);

#endif
