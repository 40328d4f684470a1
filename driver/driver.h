/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_DRIVER_H
#define QP_DRIVER_H
/*
 * PURPOSE: measurement drivers. Given the program's CFGs and the relocation plan (which
 * procedures move), a driver decides what to measure where: it returns probes for the
 * editor (ed_probe_t: a snippet before/after an instruction or on a taken branch) and
 * the description of what each counter measures (qp_format.h), which the file half
 * writes into the instrumented program as `.qpt.desc`. A driver is a small table of
 * functions (drv_ops_t); adding one touches neither the editor nor the other drivers.
 * The formats it writes (base/qp_format.h, base/qp_desc.h) are base/'s, which report/
 * reads; driver/ never includes report/ itself and never reads a profile (--weights counts are handed
 * in with drv_weights_add).
 *
 * Shared by all drivers (drv_graph.c): the per-procedure graph with the virtual node X
 * (EXIT and ENTRY), liveness of the arithmetic flags (a counter increment goes where
 * they are dead, else it saves them), where a counter for an edge or a block can go,
 * and exit hooks before calls to exit()-like functions.
 */
#include <stddef.h>
#include <stdint.h>

#include "cfg/cfg.h"
#include "base/qp_format.h"
#include "base/qp_desc.h"
#include "editor/ed.h"

/* A node of a procedure's graph: blocks 0..nblocks-1, then X. */
typedef struct drv_edge {
    uint32_t from, to;  /* local nodes; X = nblocks */
    uint32_t cfg_edge;  /* index in prog->edges, or CFG_NONE for virtual edges */
    uint32_t counter;   /* counter placed on it, or QP_NOCOUNTER */
    uint8_t kind;       /* cfg_edge_kind_t or QP_EDGE_ENTRY / QP_EDGE_ROOT */
    uint8_t place;      /* DRV_PLACE_*: where a counter for it would go */
    uint8_t save_flags; /* ... and whether the flags must be saved there */
    uint8_t fall_in;    /* DRV_PLACE_TAKEN: DRV_FALL_* bits (a stub before the target block,
                         * falling into it: no jmp back) */
    uint64_t at;        /* ... the instruction the probe names */
    double weight;      /* estimated frequency x cost (spanning tree: heavier stays uncounted) */
} drv_edge_t;

enum {
    DRV_PLACE_NONE = 0, /* no counter can go on this edge (table, indirect, shared root) */
    DRV_PLACE_BEFORE,   /* ED_AT_BEFORE `at` */
    DRV_PLACE_AFTER,    /* ED_AT_AFTER `at` */
    DRV_PLACE_TAKEN,    /* ED_AT_TAKEN `at` (splits a critical edge) */
};

enum {
    DRV_FALL_MAY = 1,   /* its stub may fall into the target block (ed_block_fall_free) */
    DRV_FALL_CHOSEN = 2,/* qp chose so (ED_PROBE_FALL_IN): one stub a block, the heaviest */
    DRV_FALL_JUMP = 4,  /* ... and the block before the target, which falls into it, then
                         * jumps over the stub (ed_block_fall_free 2) */
};

/* Edge counts of an earlier run, keyed by original block addresses (0 = X). */
typedef struct drv_wedge {
    uint64_t from, to;
    uint64_t count;
    uint8_t kind;
} drv_wedge_t;

typedef struct drv_weights {
    drv_wedge_t *v;          /* sorted by (from, to, kind) once `sorted` */
    size_t n, cap;           /* how many; allocated */
    int sorted;              /* drv_weights_sort was called after the last add */
} drv_weights_t;

/*
 * Add the count COUNT of the edge FROM -> TO of KIND (original block addresses, 0 for X)
 * to W (zero-initialised at first), and call drv_weights_sort after the last one. The
 * counts of an earlier run come from report/'s qp_edge_counts_read, read by the tool:
 * driver/ never reads a profile. Returns 0, QP_EINVAL or QP_ENOMEM.
 */
int drv_weights_add(drv_weights_t *w, uint64_t from, uint64_t to, uint64_t count,
                    uint8_t kind);
void drv_weights_sort(drv_weights_t *w);
void drv_weights_free(drv_weights_t *w);

/* The share of W's edges whose ends are block starts of PROG (1.0: same program). */
double drv_weights_match(const drv_weights_t *w, const cfg_prog_t *prog);

/* The count of the edge FROM -> TO of KIND, or -1 when the profile does not have it. */
int64_t drv_weights_get(const drv_weights_t *w, uint64_t from, uint64_t to, uint8_t kind);

/*
 * The procedure entries PROG holds (cfg_held_addrs: relocated words of any kind, an
 * IFUNC resolver's too; functions of the dynamic symbol table; rip-relative operands;
 * and in a non-PIE file immediates and aligned data words), sorted and unique, into
 * *OUT (malloc'ed, *N of them). The CFG's CFG_SRC_ADDR names only procedures found that
 * way, not those a symbol names as well. Returns 0 or QP_ENOMEM.
 */
int drv_addr_taken(const cfg_prog_t *prog, uint64_t **out, size_t *n);

typedef struct drv_iv_plan drv_iv_plan_t; /* drv_ivloop.c */

/* One procedure's graph, built by drv_graph_build. */
typedef struct drv_graph {
    const cfg_prog_t *prog;
    uint32_t proc;           /* index in prog->procs */
    uint32_t nblocks;        /* its blocks: prog->blocks[first + i] */
    uint32_t first;
    drv_edge_t *edges;       /* every edge, virtual ones included */
    uint32_t nedges;
    uint64_t *last;          /* per block: address of its last instruction (the one
                              * allocation of all the per-block arrays below) */
    uint64_t *last_target;   /* ... its direct target (jmp, jcc, call), else 0 */
    uint8_t *last_kind;      /* ... its arch_kind_t */
    uint32_t *callee;        /* ... the procedure its direct call or jump enters
                              * (drv_entered), else CFG_NONE: filled by drv_run, on
                              * the thread that builds the graph (not drv_graph_build) */
    uint8_t *tests_status;   /* ... DRV_STATUS_*: a conditional branch, right after a
                              * call, on whether a register is zero (the estimate's) */
    uint8_t *live_in;        /* per block: flags live on entry (ARCH_FLAG_* bits) */
    uint8_t *live_out;       /* per block: flags live on exit */
    uint32_t *indeg, *outdeg;/* per node, X included */
    uint32_t *block_counter; /* per block: naive counter or QP_NOCOUNTER */
    uint64_t *block_at;      /* per block: where a block counter goes (ED_AT_BEFORE) */
    uint8_t *block_save;     /* ... and whether it saves the flags */
    uint64_t *fork_after;    /* instructions after which the process may be a new child
                              * (calls of forkers, system calls that may fork) */
    uint32_t nfork_after;
    uint64_t *thread_before; /* calls that may start a thread (calls of starters) */
    uint32_t nthread_before;
    const char *why;         /* DRV_NOT_MEASURED: the reason */
    uint8_t clobbers;        /* flags a probe changes: saved where any of them is live */
    uint8_t abi_flags_unsure;/* flags may be live across calls, returns and jumps out
                              * (drv_prog_info_t) */
    const drv_weights_t *weights; /* an earlier profile's edge counts, or NULL */
    uint8_t entry_by_calls;  /* the entry edge's count comes from the call sites (set by
                              * drv_run for qp: QP_PROC_BY_CALLS): no counter needs it */
    uint8_t iv_loops;        /* count loops from induction variables (drv_result_t's) */
    drv_iv_plan_t *iv;       /* ... those the tree counts so (qp), or NULL */
    double *freq;            /* drv_ops_t.prepare's estimate per edge, or NULL */
    uint8_t *tree;           /* ... and its spanning tree (qp), or NULL */
    uint8_t tree_per_block;  /* ... which counts the blocks instead */
} drv_graph_t;

/* drv_graph_t.tests_status: a block entered from a call's return that tests an integer
 * of at most 32 bits against zero (`test %eax,%eax`, `cmp $0,%al`; mostly the status the
 * call returned, but any register) and ends in a branch on equality: taken when it is
 * zero, or falling through when it is. */
enum {
    DRV_STATUS_NONE = 0,
    DRV_STATUS_ZERO_TAKEN,
    DRV_STATUS_ZERO_FALLS,
};

/* A positive return of drv_graph_build or drv_ops_t.place: the procedure is relocated
 * but not measured (the graph's or the driver's `why` says why). */
#define DRV_NOT_MEASURED 1

/* The result of running a driver over a program. */
/* An indirect call site whose targets are recorded (drv_indirect.c). */
typedef struct drv_ind_site {
    uint64_t addr;      /* old address of the call instruction */
    arch_opnd_t opnd;   /* where its target comes from */
    uint32_t table;     /* its first counter (QP_TARGET_WORDS of them) */
} drv_ind_site_t;

/* Procedures left in place and not measured for one reason (its text up to the first
 * address in it: "invalid instruction at"). */
typedef struct drv_ip_why {
    const char *why;         /* the reason (the plan's or the program's string) */
    uint32_t keylen;         /* bytes of it that name the reason */
    uint32_t nprocs;         /* procedures */
    uint64_t bytes;          /* bytes of their blocks */
} drv_ip_why_t;

/* What counters add to a run, in instructions, by kind (qp --weights). */
typedef struct drv_cost {
    uint64_t incs;       /* increments, one per counter run */
    uint64_t flags;      /* flag saves: lea, pushf ... popf, lea around an increment */
    uint64_t back_jumps; /* taken-edge stubs' jumps back to their target */
    uint64_t over_jumps; /* jumps over a stub that falls into its target */
} drv_cost_t;

/* The instructions of C, all kinds. */
uint64_t drv_cost_insns(const drv_cost_t *c);

/* Add C to *SUM. */
void drv_cost_add(drv_cost_t *sum, const drv_cost_t *c);

/* qp --weights: a procedure whose counters, placed without --weights, would add more
 * over the profiled run than those the weights place (where the static estimate
 * misses). */
typedef struct drv_gap {
    uint32_t proc;           /* the procedure's index in the program */
    uint64_t static_insns;   /* what the static estimate's counters add over the run */
    uint64_t weighted_insns; /* what the weights' counters add */
} drv_gap_t;

#define DRV_GAPS 5 /* procedures kept in drv_result_t.gaps */

/* A block that could be counted from an induction variable of a loop around it
 * (drv_ivloop.c; doc/qp.md): priced for qp --weights -v, counted so with --iv-loops. */
typedef struct drv_iv_loop {
    uint32_t block;   /* the block (local index) */
    uint32_t loop;    /* the loop (index in the procedure's cfg_loop_forest_t) */
    uint8_t reg;      /* the 64-bit register the block alone steps in the loop */
    int64_t step;     /* ... by this much each run */
} drv_iv_loop_t;

/*
 * G's candidates into *OUT (*N of them, at most one a loop; free), with the loop forest
 * they index into *FOREST (cfg_loop_forest_destroy; NULL when G has no loops): loops with
 * no call, every way in and out able to take code, one block the only writer of a 64-bit
 * register, by a constant step. Returns 0, QP_ENOMEM or the forest's error.
 */
int drv_iv_find(const drv_graph_t *g, cfg_loop_forest_t **forest /*OUT*/,
                drv_iv_loop_t **out /*OUT*/, uint32_t *n /*OUT*/);

/* Is G's edge E a way into or out of IV's loop (in forest F)? */
int drv_iv_edge_crosses(const drv_graph_t *g, const cfg_loop_forest_t *f,
                        const drv_iv_loop_t *iv, uint32_t e);

/* Can every way into and out of IV's loop carry its instruction where drv_graph_build
 * put that edge's counter: with the register's value as it crosses the edge (no write
 * to it between that spot and the edge)? 1 or 0. */
int drv_iv_spots_ok(const drv_graph_t *g, const cfg_loop_forest_t *f, const drv_iv_loop_t *iv);

/* The blocks a qp tree counts from induction variables (drv_graph_t.iv). */
struct drv_iv_plan {
    cfg_loop_forest_t *forest; /* the loops v[] index into */
    drv_iv_loop_t *v;          /* the candidates */
    uint32_t n;
    uint32_t *cand;            /* per block: the candidate that counts it, or UINT32_MAX */
};
void drv_iv_plan_free(drv_iv_plan_t *p);

/* Must the register's add or sub on edge E of G (where drv_graph_build put its counter)
 * save the flags? Unlike an increment it writes CF too. 1 or 0. */
int drv_iv_save_flags(const drv_graph_t *g, uint32_t e);

/* PROG's procedures by entry (drv_entries.c): drv_entered(M, ADDR) is the index of the
 * procedure cfg_proc_entered_at(PROG, ADDR) gives, or CFG_NONE, found by hashing.
 * drv_entries_build: 0 or QP_ENOMEM. */
typedef struct drv_entries {
    uint64_t *addr;  /* per slot: an entry, or 0 */
    uint32_t *proc;  /* ... its procedure */
    uint32_t mask;   /* the slots, less one */
} drv_entries_t;

int drv_entries_build(const cfg_prog_t *prog, drv_entries_t *m /*OUT*/);
uint32_t drv_entered(const drv_entries_t *m, uint64_t addr);
void drv_entries_free(drv_entries_t *m);

typedef struct drv_result {
    ed_probe_t *probes;      /* for ed_plan_set_probes */
    size_t nprobes;
    uint32_t ncounters;      /* counters used */
    uint32_t driver;         /* enum qp_driver_kind */
    uint32_t nmeasured;      /* procedures measured */
    uint32_t nunmeasured;    /* relocated procedures the driver could not measure */
    uint32_t nedges_total;   /* edges of the measured procedures, virtual ones included */
    uint32_t nexit_hooks;    /* exit hooks placed */
    uint32_t nby_calls;      /* qp: procedures whose calls are counted at their call
                              * sites (QP_PROC_BY_CALLS) */
    uint32_t nblock_counted; /* qp: procedures counted per block (a cycle of edges that
                              * cannot carry a counter, with a jump translated at run
                              * time) */
    /* qp --weights: what the counters add over the run the weights measured, by kind,
     * the least of any spanning tree for those counts; counters left out (the profile
     * has no count there). */
    drv_cost_t weighted;
    uint32_t weighted_unknown;
    /* ... and what the counters placed without --weights (by the static estimate) would
     * add over that run, for comparison. */
    drv_cost_t weighted_static;
    /* ... and the DRV_GAPS procedures where those two differ most, largest first (then
     * the lowest index); NGAPS of them, only those where the static tree costs more. */
    drv_gap_t gaps[DRV_GAPS];
    uint32_t ngaps;
    /* ... and, -v, what they would add with blocks counted from induction variables where
     * that costs less (drv_ivloop.c; every step priced), placed by the weights and
     * without them, the blocks so counted (by the weights' tree) and the candidates, and
     * the DRV_GAPS procedures that would gain most (static_insns: the weights' tree,
     * weighted_insns: with induction variables). */
    drv_cost_t weighted_iv, placed_iv;
    uint32_t niv_used, niv_found;
    drv_gap_t iv_gaps[DRV_GAPS];
    uint32_t niv_gaps;
    uint32_t nfork_hooks;    /* fork hooks placed */
    uint32_t nfork_unseen;   /* fork sites in procedures not measured (no hook) */
    uint64_t *xlate_site;    /* jumps of unknown targets, translated at run time ... */
    uint32_t *xlate_miss;    /* ... and the miss counter of each (its procedure's) */
    size_t nxlate, xlate_cap;
    uint32_t nthread_hooks;  /* thread hooks placed */
    uint8_t iv_loops;        /* set by the caller before drv_run (kept by it): qp counts
                              * loops from their induction variables (drv_ivloop.c) */
    uint32_t niv_counted;    /* ... the blocks so counted */
    qp_desc_summarize_fn summarize; /* set by the caller, or NULL: fills the description's
                              * zero-input summaries before it is serialized */
    uint32_t nthread_unseen; /* thread-start sites in procedures not measured, plus one when
                              * a starter's address is taken */
    /* Procedures left in place, measured where they are (editor/ed_inplace.c): per-block
     * counters in trampolines, so every block count claimed is exact by itself. */
    uint32_t ninplace;       /* procedures left in place and measured there */
    uint32_t ninplace_partial; /* ... of which some blocks have no counter */
    uint32_t nip_points;     /* blocks counted in place */
    uint64_t ip_bytes;       /* bytes of the blocks counted in place */
    uint32_t nip_block_why[ED_IP_NREASONS]; /* blocks of them without a counter, by
                              * ED_IP_* ... */
    uint64_t ip_block_why_bytes[ED_IP_NREASONS]; /* ... and their bytes */
    drv_ip_why_t *ip_why;    /* procedures left in place and not measured, by reason */
    size_t nip_why, ip_why_cap;
    ed_inplace_t *inplace;   /* the in-place entries the points were fitted with, for
                              * ed_plan_set_inplace (the caller hands them to the plan,
                              * then sets this NULL); or NULL */
    int atomic;              /* counters use locked increments (QP_DESC_ATOMIC) */
    int threads;             /* the program can start threads (QP_DESC_THREADS) */
    int watcher;             /* a shared library that defines pthread_create (a libc): its
                              * entry got a thread hook (QPRT_F_WATCHER) */
    int pie;                 /* the program is position independent (QP_DESC_PIE) */
    int resume_unnamed;      /* a Go program whose runtime.morestack and mcall have no
                              * name: every measured procedure is QP_PROC_APPROX_RESUME */
    unsigned workers;        /* threads drv_describe may compress on (drv_run_threads') */
    /* The description, new addresses filled in by drv_result_finish. */
    qp_desc_proc_t *procs;
    uint32_t nprocs;
    qp_desc_block_t *blocks;
    uint32_t nblocks;
    qp_desc_edge_t *edges;
    uint32_t nedges;
    qp_desc_call_t *calls;   /* the call sites, per procedure in block order */
    uint32_t ncalls;
    uint32_t *callee_names;  /* per program procedure: its name's string offset once a
                              * call site named it, else 0 (while describing) */
    uint8_t *callee_marks;   /* per program procedure: what a call to it does by its name
                              * (QP_CALLF_*, setjmp; while describing) */
    drv_entries_t entries;   /* the program's procedures by entry (freed after describing) */
    size_t calls_site_cap;
    drv_ind_site_t *ind;     /* indirect call sites with a target table */
    size_t nind;
    arch_snip_t *ind_nodes;  /* their snippets' nodes (drv_indirect_place) */
    ed_snippet_t *ind_snips; /* ... and snippets, for the plan */
    char *strtab;
    uint32_t strtab_size, strtab_cap;
    /* The reasons for leaving procedures unmeasured written last (their string offsets):
     * a few texts, each stored once (chromium: 300,000 reasons, 27 MB of strings). */
    uint32_t reasons[8];
    uint32_t nreasons;
    size_t probes_cap, procs_cap, blocks_cap, edges_cap;
    int ret_mapped;          /* drv_result_finish ran: edges' ret_addr are new addresses
                              * (before, a CALLRET edge's holds its call's old address) */
} drv_result_t;

/* A driver: places counters in one procedure's graph (its edges' `counter`s or
 * block_counter[]), using drv_alloc_counter. Returns 0, a positive "not measured"
 * (then *WHY says why) or QP_E*. */
typedef struct drv_ops {
    const char *name;        /* "qp", "naive" */
    uint32_t kind;           /* enum qp_driver_kind */
    int (*place)(drv_graph_t *g, drv_result_t *res, const char **why /*OUT*/);
    uint32_t trace;          /* 0: counts only; DRV_TRACE_CHORDS or DRV_TRACE_BLOCKS: a
                              * tracer (drv_trace_plan decides the events) */
    /* The part of place that depends on G alone (qp: the edge frequency estimate, into
     * G->freq), run ahead on any thread of drv_run_threads' pool; place does it itself
     * when it was not run. NULL: none. Returns 0 or QP_E*. */
    int (*prepare)(drv_graph_t *g);
} drv_ops_t;

enum { DRV_TRACE_CHORDS = 1, DRV_TRACE_BLOCKS = 2 };

extern const drv_ops_t drv_qp_ops;
extern const drv_ops_t drv_naive_ops;

/* The driver named NAME, or NULL. */
const drv_ops_t *drv_find(const char *name);

/*
 * Run DRV over every procedure that PLAN relocates (WEIGHTS: an earlier profile's edge
 * counts for the spanning tree, or NULL for the loop-depth heuristic): build its graph, let the driver place
 * counters, turn them into probes, add exit hooks, and describe it. Fills *RES (free with
 * drv_result_free). Returns 0 or QP_E*.
 */
int drv_run(const drv_ops_t *drv, const cfg_prog_t *prog, const ed_plan_t *plan,
            const drv_weights_t *weights, drv_result_t *res /*OUT*/);

/* drv_run, calling ON_PROGRESS(ARG, procedures done, all of them) now and then (a long
 * run on a large program is seen to move). */
int drv_run_progress(const drv_ops_t *drv, const cfg_prog_t *prog, const ed_plan_t *plan,
                     const drv_weights_t *weights, drv_result_t *res /*OUT*/,
                     void (*on_progress)(void *arg, size_t done, size_t total), void *arg);

/* After ed_plan_apply: fill in the new addresses of the description (entries, blocks,
 * return sites of calls); the return sites once (later calls leave them). */
void drv_result_finish(drv_result_t *res, const ed_plan_t *plan, uint64_t counters_vaddr);

/* drv_run_progress with the procedures' graphs (and drv_ops_t.prepare) made ahead on
 * THREADS threads (1: none), a batch at a time; the result is the same for any THREADS. */
int drv_run_threads(const drv_ops_t *drv, const cfg_prog_t *prog, const ed_plan_t *plan,
                    const drv_weights_t *weights, drv_result_t *res /*OUT*/,
                    void (*on_progress)(void *arg, size_t done, size_t total), void *arg,
                    unsigned threads);

void drv_result_free(drv_result_t *res);

/*
 * drv_result_finish, then the serialized description (qp_format.h) in *BUF (malloc'ed,
 * *LEN bytes) and its id. COUNTERS: the address of counter 0. Fits elfw_instr_t.describe.
 */
int drv_describe(drv_result_t *res, const ed_plan_t *plan, uint64_t counters, uint8_t **buf,
                 size_t *len, uint64_t *id);

/* The next counter. */
/*
 * The targets of indirect calls (drv_indirect.c; qp_format.h says how they are kept):
 * drv_indirect_tables gives every indirect call site of RES whose operand it can read a
 * table of counters after the others (after drv_run, on request: it costs about 30
 * instructions per indirect call); drv_indirect_place, once counter
 * 0 is at COUNTERS (elfw_instr_t.placed), adds the snippets that fill them to RES's
 * probes and gives PLAN both; it also gives PLAN the miss counter of translated jumps
 * (drv_result_t.xlate_site). 0 or QP_ENOMEM (or ed_plan_set_* errors).
 */
int drv_indirect_tables(drv_result_t *res, const cfg_prog_t *prog);
int drv_indirect_place(drv_result_t *res, ed_plan_t *plan, uint64_t counters);

uint32_t drv_alloc_counter(drv_result_t *res);

/* What drv_graph_build needs to know of the whole program (sorted address arrays). */
typedef struct drv_prog_info {
    const uint64_t *xt;      /* interior entries (cfg_interior_entries): roots of the graph */
    size_t nxt;
    const uint64_t *forkers; /* entries of procedures after whose call a child may run */
    size_t nforkers;
    const uint64_t *starters;/* entries of procedures that may start a thread */
    size_t nstarters;
    uint8_t clobbers;        /* flags the probes change (ARCH_FLAG_*); 0: a counter
                              * increment's, every status flag but CF */
    uint8_t abi_flags_unsure;/* assume the flags live across calls and at returns (Go: its
                              * assembly helpers keep them for their callers) */
} drv_prog_info_t;

/*
 * Build procedure PROC's graph (drv_graph.c). Returns 0, DRV_NOT_MEASURED (g->why
 * says why; nothing else is left allocated) or QP_E*.
 */
int drv_graph_build(const cfg_prog_t *prog, uint32_t proc, const drv_prog_info_t *info,
                    drv_graph_t *g /*OUT*/);

/*
 * Must a counter put before the instruction at AT, inside block BI of G (not at its
 * start: a point in place that the start cannot take), save the flags? From the block's
 * live_out back to AT; 1 when its instructions cannot be decoded or are too many.
 */
int drv_graph_save_at(const drv_graph_t *g, uint32_t bi, uint64_t at);

/* The operands of instruction I of PROG into *OPS (the ISA's decode_ops). Returns 0, or
 * -1 when they cannot be read. */
int drv_insn_ops(const cfg_prog_t *prog, const arch_insn_t *i, arch_ops_t *ops /*OUT*/);

/* The flags live before the instruction at AT in block BI of G (ARCH_FLAG_* bits), from
 * the block's live_out back to AT; 0xff when its instructions cannot be decoded or are
 * too many. */
uint8_t drv_graph_live_at(const drv_graph_t *g, uint32_t bi, uint64_t at);

/* What instruction IN (PREV: the one before it in its block, or NULL) is: DRV_SITE_FORK
 * (a child may run after it), DRV_SITE_THREAD (a thread may start in it), both, or 0. */
enum { DRV_SITE_FORK = 1, DRV_SITE_THREAD = 2 };
int drv_site_kind(const cfg_prog_t *prog, const arch_insn_t *prev, const arch_insn_t *in,
                  const drv_prog_info_t *info);


/*
 * Which procedures qp counts by their calls (QP_PROC_BY_CALLS, drv_bycalls.c): BY_CALLS
 * (prog->nprocs bytes) gets 1 for each. SOLID[i]: procedure i will be measured and its
 * counts are exact by themselves apart from its entry edge (no landing pads, setjmp,
 * longjmp or throw calls, guessed or translated indirect jumps). LEAVE (leaving bits, see
 * drv_run.c) grows: a procedure counted by its calls may be left as its callers may.
 * ENTRIES: PROG's procedures by entry (drv_entries_build). Returns 0 or QP_ENOMEM (then
 * nothing is counted by calls).
 */
int drv_by_calls(const cfg_prog_t *prog, const drv_entries_t *entries, const uint8_t *solid,
                 uint8_t *leave, uint8_t *by_calls /*OUT*/);

/*
 * Processes and threads (drv_procs.c).
 * drv_forkers: the sorted entries of PROG's procedures that may return in a new child
 * (fork-like names, and procedures that tail-call one; ENTRIES: PROG's procedures by
 * entry, drv_entries_build); *OUT is malloc'ed. 0 or QP_ENOMEM. Reads PROG only: may
 * run beside other readers.
 * drv_is_fork_name: NAME (fork@plt, a GOT symbol) is a fork-like function.
 * drv_syscall_may_fork: system call number NR (-1 unknown) may create a process.
 * drv_threads_reason: why PROG may run its code in several threads ("it calls
 * pthread_create@plt"), written into BUF; NULL when nothing says it can.
 */
int drv_forkers(const cfg_prog_t *prog, const drv_entries_t *entries, uint64_t **out /*OUT*/,
                size_t *n /*OUT*/);
/* NAME, without a trailing "@plt" (not any version: exit@GLIBC_2.2.5 is no "exit"), is
 * one of the NULL-terminated NAMES (drv_run's and drv_trace's lists). */
int drv_name_in(const char *name, const char *const *names);
int drv_is_fork_name(const char *name);
int drv_syscall_may_fork(long nr);
const char *drv_threads_reason(const cfg_prog_t *prog, char *buf, size_t len,
                               int *unhooked /*OUT*/);

/*
 * drv_starters: like drv_forkers, for the functions that start threads (pthread_create,
 * thrd_create, std::thread, OpenMP, glib); *TAKEN is set when one has its address taken.
 * drv_is_thread_name: NAME is one of them. drv_threads_reason sets *UNHOOKED when the
 * threads it found start where no call can carry a thread hook (system calls of a static
 * program's own clone).
 */
int drv_starters(const cfg_prog_t *prog, const drv_entries_t *entries, uint64_t **out /*OUT*/,
                 size_t *n /*OUT*/, int *taken /*OUT*/);
int drv_is_thread_name(const char *name);

/* How the counters of a measured program are incremented (drv_choose_inc). */
typedef struct drv_inc {
    int mode;               /* ARCH_INC_PLAIN, ARCH_INC_ATOMIC or ARCH_INC_SWITCH */
    int lock_at_start;      /* SWITCH: 1 atomic before the program runs; 2 likewise unless
                             * a watcher is in the process (QPRT_F_LOCK_UNWATCHED) */
    int watcher;            /* this module's hooks see every thread start and fork
                             * (QPRT_F_WATCHER) */
    const char *why;        /* a phrase for the summary line */
    char buf[320];          /* holds it */
} drv_inc_t;

/*
 * Choose for PROG, after drv_run filled RES: FORCE 1 (--atomic) or 0 (--no-atomic)
 * decides; with -1, plain increments when nothing says threads can start or a child
 * can count into its parent's counters, else switchable ones, made atomic by the
 * thread hook before the first thread starts - or at start when a thread or child may
 * start where no hook sees it. Sets RES->atomic (not PLAIN) and RES->threads.
 */
void drv_choose_inc(const cfg_prog_t *prog, drv_result_t *res, int force, drv_inc_t *out /*OUT*/);
void drv_graph_free(drv_graph_t *g);

/*
 * N zeroed arrays in one allocation (the graphs' and the estimate's per-procedure
 * arrays: chromium's some 40 mallocs and frees a procedure took 40% of the graphs'
 * time): array k of SIZES[k] bytes, each starting 8-aligned, its address into
 * *PARTS[k]. Returns the allocation, which alone is freed (free), or NULL when out of
 * memory (the *PARTS[k] then NULL).
 */
void *drv_carve(void **const *parts, const size_t *sizes, size_t n);

/*****************************************************************************
 * Control-flow tracing (drv_trace.c; formats in qpt_trace_format.h)
 */

/* "trace" and "trace-naive": drv_run with them places no counter (the exit, fork and
 * thread hooks only); drv_trace_plan then decides the events. */
extern const drv_ops_t drv_trace_ops;
extern const drv_ops_t drv_trace_naive_ops;

typedef struct drv_trace drv_trace_t;

/*
 * After drv_run (RES): the events of every procedure it measured that can be traced
 * (NAIVE: a BLOCK event in every block), into *OUT (free with drv_trace_free); *NTRACED
 * gets their number. WEIGHTS (--weights, or NULL): an earlier run's edge counts choose
 * the silent ways out. 0 or QP_E*.
 */
int drv_trace_plan(const cfg_prog_t *prog, const drv_result_t *res, int naive,
                   const drv_weights_t *weights, drv_trace_t **out /*OUT*/,
                   uint32_t *ntraced /*OUT*/);

/*
 * --trace-mem: after drv_trace_plan, the data accesses of every traced block (the
 * description's mem part) and a probe before each instruction whose address is not
 * known statically, recording the values it needs (QPT_TRACE_VAL). *NREFS and *NVALS
 * (may be NULL): accesses described, values recorded per run of their instructions.
 * 0 or QP_E*.
 */
int drv_trace_plan_mem(drv_trace_t *t, const cfg_prog_t *prog, uint32_t *nrefs, uint32_t *nvals);

/* Once the runtime's place is known (elfw_instr_t.placed): the snippets, REFILL the
 * address of the runtime's buffer refill; appends the probes to RES's and gives PLAN
 * both. 0 or QP_E*. */
int drv_trace_place(drv_trace_t *t, drv_result_t *res, ed_plan_t *plan, uint64_t refill);

/* The id that trace files of the program carry (the qp description's). */
void drv_trace_set_id(drv_trace_t *t, uint64_t id);

/* Once PLAN is laid out: where every traced instruction went (the description's new code
 * part, which places signal handlers), and the runtime's code [RT, RT + RT_SIZE). 0 or
 * QP_ENOMEM. */
int drv_trace_set_layout(drv_trace_t *t, const ed_plan_t *plan, uint64_t rt, uint64_t rt_size);

/* The serialized description (`.qpt.trace`), malloc'ed. 0 or QP_ENOMEM. */
int drv_trace_section(const drv_trace_t *t, uint8_t **buf /*OUT*/, size_t *len /*OUT*/);

/* The width of the trace files' records in bytes (elfw_instr_t.trace): 2 for the chord
 * tracer (16-bit units, QPT_TRACE_FMAGIC16), 4 for the naive one (the baseline: a
 * 32-bit word per block run). */
int drv_trace_unit(const drv_trace_t *t);

/* Probes placed and events described. */
void drv_trace_stats(const drv_trace_t *t, size_t *npoints /*OUT*/, uint32_t *nevents /*OUT*/);

void drv_trace_free(drv_trace_t *t);

#endif
