/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_DRV_TRACE_PRIV_H
#define QP_DRV_TRACE_PRIV_H
/*
 * PURPOSE: what the two halves of the trace drivers share: drv_trace.c plans which
 * blocks and edges record which events (and describes them), drv_trace_emit.c builds
 * the events' snippets, places their probes and writes the description section. No
 * other folder includes this header.
 */
#include <stddef.h>
#include <stdint.h>

#include "driver/driver.h"
#include "base/qpt_trace_format.h"

/* A place where an event is recorded. */
typedef struct trace_point {
    uint64_t addr;
    uint8_t at;     /* ed_at_t */
    uint8_t save;   /* flags live */
    uint8_t entry;  /* ED_PROBE_ENTRY (an ENTER) */
    uint8_t pad;
    uint32_t event;
} trace_point_t;

/* An indirect jump of unknown target that records where it goes (QPT_TRACE_JUMP). */
typedef struct jump_point {
    uint64_t addr;   /* the jump */
    arch_opnd_t op;  /* its target operand (a register, or memory holding the target) */
} jump_point_t;

/* A trace plan (drv_trace_plan): the description, the events and where they record. */
struct drv_trace {
    int naive;
    uint64_t id;
    qpt_trace_proc_t *procs;
    uint32_t nprocs;
    qpt_trace_block_t *blocks;
    uint32_t nblocks;
    qpt_trace_edge_t *edges;
    uint32_t nedges;
    qpt_trace_event_t *events;
    uint32_t nevents;
    trace_point_t *pts;
    size_t npts;
    uint32_t *ifirst; /* per block, its first instruction (nblocks + 1) */
    uint8_t *ilen;    /* the instructions' lengths */
    uint32_t ninsns;
    uint64_t restorer;     /* the program's own signal restorer (a static glibc's), or 0 */
    qpt_trace_new_t *inew; /* per instruction, where it went (drv_trace_set_layout) */
    uint64_t new_base, new_size, rt, rt_size;
    /* --trace-mem */
    int mem;
    qpt_trace_mblock_t *mblocks; /* per block */
    qpt_trace_mref_t *mrefs;
    arch_mref_t *marefs;         /* the same accesses, as decoded (registers) */
    uint32_t nmrefs;
    struct mem_point *mpts;
    size_t nmpts, mrefs_cap, marefs_cap, mpts_cap;
    /* indirect jumps of unknown targets that record their target (QPT_TB_JUMPVAL) */
    struct jump_point *jpts;
    size_t njpts, jpts_cap;
    arch_snip_t *nodes;
    ed_snippet_t *snips;
    size_t blocks_cap, edges_cap, events_cap, pts_cap;
    /* code that is not traced (the QPTTROUT part) */
    qpt_trace_out_t *outs;
    uint32_t nouts;
    char *out_names;
    size_t out_nbytes;
    uint32_t *out_of; /* per procedure of the program: its entry in outs, or NONE */
};

#endif
