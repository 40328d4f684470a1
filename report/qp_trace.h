/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_TRACE_H
#define QP_TRACE_H
/*
 * PURPOSE: reading control-flow traces (driver/qpt_trace_format.h) and regenerating the
 * complete block trace from them: a naive trace lists every block; a chord trace
 * (--driver=trace) lists only the events the CFG cannot foresee, and the walk here
 * follows the CFG between them (driver/drv_trace.c says which events there are).
 * Where the walk cannot follow (a thread control block reused unseen, a longjmp, an
 * exception, an asynchronous entry such as a signal handler, a trace that was cut
 * short), it says so through the sink's `mark`, never silently.
 */
#include <stddef.h>
#include <stdint.h>

#include "driver/qpt_trace_format.h"

typedef struct qp_trace_desc {
    qpt_trace_hdr_t hdr;
    const qpt_trace_proc_t *procs;
    const qpt_trace_block_t *blocks;
    const qpt_trace_edge_t *edges;
    const qpt_trace_event_t *events;
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

/* Where the regenerated trace goes. */
typedef struct qp_trace_sink {
    /* Block BLOCK (of the description; its start address ADDR) ran. Non-zero stops. */
    int (*block)(void *arg, uint32_t block, uint64_t addr);
    /* The walk could not follow exactly here: WHAT says why; ADDR a block's start or 0. */
    int (*mark)(void *arg, const char *what, uint64_t addr);
    void *arg;
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

#endif
