/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_REPORT_H
#define QP_REPORT_H
/*
 * PURPOSE: report/ reads what was measured, and this is its public face (it includes the
 * folder's other headers: qp_profile.h, qp_flow.h, qp_backtrace.h). Here: what qp's
 * reports show, computed once for a description and a (merged, checked) profile:
 * abandoned counts from the exit back-traces, every measured procedure's calls and
 * instructions from flow reconstruction, the flat-profile order, what may be approximate
 * and why; per source line counts for lcov; the edge counts of an earlier run for
 * qpt-rewrite --weights. tools/qp only formats these. No printing here.
 * The formats are base/'s (qp_format.h, and the description in memory, qp_desc.h):
 * the drivers write them and report/ reads them; report/ includes nothing of driver/,
 * and driver/ never includes report/ (the tool reads an earlier profile for --weights
 * and hands its counts to the driver). Only
 * qp_backtrace.c uses elfutils (libdw).
 * Lifetimes: a report points to its description and profile (not owned), which must
 * outlive it; free it with qp_report_free.
 */
#include <stddef.h>
#include <stdint.h>

#include "cfg/cfg.h"
#include "base/qp_desc.h"
#include "report/qp_backtrace.h"
#include "report/qp_flow.h"
#include "report/qp_profile.h"

/* Why a procedure's counts may not be exact (qp_proc_result_t.flags). */
enum {
    QP_RES_APPROX_EH = 1u << 0, /* QP_PROC_APPROX_EH: exceptions may unbalance its flow */
    QP_RES_APPROX_JMP = 1u << 1, /* QP_PROC_APPROX_JMP: longjmp may unbalance its flow */
    QP_RES_APPROX_IND = 1u << 7, /* QP_PROC_APPROX_IND: guessed indirect-jump targets */
    QP_RES_VIOLATION
    = 1u << 2,                /* Kirchhoff fails somewhere in it (counts inconsistent) */
    QP_RES_UNKNOWN = 1u << 3, /* some counts are not determined by the measured ones */
    QP_RES_SATURATED = 1u << 4, /* a counter of it reached 2^64 - 1, or a count it implies
                                 * does not fit in 64 bits: its counts are lower bounds,
                                 * or the profile is damaged */
    QP_RES_PLT = 1u << 5,       /* a PLT stub, counted from the calls measured code made
                                 * to it (qp_report_count_plt) */
    QP_RES_APPROX_LAZY = 1u << 6,   /* a PLT stub whose symbol is bound lazily: each
                                     * symbol's first call runs more than is counted */
    QP_RES_APPROX_CALLER = 1u << 8, /* a PLT stub called from a procedure whose counts
                                     * may be approximate or are inconsistent */
    QP_RES_APPROX_RESUME = 1u << 9, /* QP_PROC_APPROX_RESUME: a Go program's stack growth
                                     * may count as a call (its names unread) */
};

/* The flags that make a count approximate ('~'). */
#define QP_RES_APPROX_ANY                                                                \
    (QP_RES_APPROX_PROC | QP_RES_APPROX_LAZY | QP_RES_APPROX_CALLER)

/* ... those of a procedure's own (a PLT stub's are LAZY and CALLER). */
#define QP_RES_APPROX_PROC                                                               \
    (QP_RES_APPROX_EH | QP_RES_APPROX_JMP | QP_RES_APPROX_IND | QP_RES_APPROX_RESUME)

/*
 * The counts of a measured procedure, or of a PLT stub (QP_RES_PLT: proc is QP_VIRT, the
 * stub is no procedure of the description; its qp_plt_stub_t says which it is). 40 bytes:
 * chromium's report holds 667,000 of them.
 */
typedef struct qp_proc_result {
    uint32_t proc;           /* procedure index in the description, QP_VIRT for a stub */
    uint32_t flags;          /* QP_RES_* */
    uint64_t calls;          /* flow on its entry edge, when calls_known; a stub: the
                              * sum of the calls of the sites that target it */
    uint64_t insns;          /* sum over blocks of count x ninsns (known blocks only); a
                              * stub: calls x per_call */
    uint8_t calls_known;     /* the entry edge's count is determined (a stub: every
                              * site's) */
    uint8_t insns_exact;     /* every block count is determined */
    uint32_t nviolations;    /* Kirchhoff violations found */
    uint32_t nunknown_edges; /* edges whose count is not determined */
    uint32_t stub;           /* a stub: its index in the report's stubs[] (and plt[]);
                              * QP_VIRT for a procedure (qp_report_stub) */
} qp_proc_result_t;

_Static_assert(sizeof(qp_proc_result_t) == 40, "a result row is 40 bytes");

/* What only a PLT stub's row needs, beside the row (qp_report_t.stubs). */
typedef struct qp_plt_stub {
    uint64_t entry;    /* its address (link time) */
    const char *name;  /* its name as stored ("puts@plt", or "sub_1036" when the sites
                        * name none); owned by the report or its description */
    uint32_t per_call; /* the instructions one call runs in it (to and with its first
                        * jump), 0 when they do not decode */
} qp_plt_stub_t;

typedef struct qp_report {
    const qp_desc_t *desc;    /* not owned */
    const qp_profile_t *prof; /* not owned */
    uint64_t *abandoned;      /* per global block: executions abandoned at exits;
                               * NULL when none was */
    uint8_t *left;            /* per procedure: whether ABANDONED counts in its blocks
                               * (NULL with it) */
    qp_flow_entries_t entries; /* calls of the procedures counted by their calls */
    qp_backtrace_stats_t bt;  /* what the back-traces found */
    qp_proc_result_t *procs;  /* measured procedures in flat-profile order:
                               * instructions, then calls, descending, then name */
    uint32_t nprocs;          /* how many */
    uint32_t *unmeasured;     /* indices of procedures not measured, by address */
    uint32_t nunmeasured;     /* how many */
    uint64_t *unmeasured_calls; /* per unmeasured[]: the calls and tail calls measured code
                               * made to it (qp_report_count_plt; NULL before) */
    uint64_t calls_unmeasured; /* their sum (saturated): how often the run went into code
                               * not measured from code that is */
    uint64_t total_insns;     /* sum of procs[].insns (saturated) */
    uint32_t nviolating;      /* procedures with QP_RES_VIOLATION */
    uint32_t napprox;         /* procedures with QP_RES_APPROX_* */
    uint32_t napprox_resume;  /* ... of them QP_RES_APPROX_RESUME */
    uint32_t napprox_other;   /* ... of them for another reason (EH, JMP, IND) */
    uint32_t nunknown;        /* procedures with QP_RES_UNKNOWN */
    uint32_t nsaturated;      /* procedures with QP_RES_SATURATED */
    qp_proc_result_t *plt;    /* PLT stubs that measured code calls, by entry
                               * (qp_report_count_plt; NULL before) */
    qp_plt_stub_t *stubs;     /* ... and their entries, names, per_call (plt[i].stub
                               * is i) */
    uint32_t nplt;            /* how many */
    uint64_t plt_insns;       /* sum of plt[].insns (saturated), not in total_insns */
    uint8_t plt_lazy;         /* the module binds symbols lazily (no BIND_NOW) */
    const qp_proc_result_t **flat; /* procs and plt together in flat-profile order
                                    * (nprocs + nplt; NULL before qp_report_count_plt:
                                    * procs alone) */
    char *plt_names;          /* storage of the stubs' made-up names */
    uint8_t leaving_ran;      /* kinds of leaving seen in this run (1: a longjmp, 2: a
                               * throw): qp_report_mark_leaving */
    uint64_t *site_count;     /* per key call site of the description (qp_desc_keys)
                               * that qp_report_site_kept keeps, in the order of the
                               * keys: its count (a call's block's, a tail call's
                               * edge's), 0 in procedures not measured */
    uint8_t *site_state;      /* ... and how it is known (QP_FLOW_*) */
    uint32_t *site_first;     /* per procedure: the index in site_count of its first
                               * kept site */
} qp_report_t;

/*
 * Build the report of profile P (already checked against D with qp_profile_check).
 * U unwinds P's exit dumps (may be NULL when P has none). Returns 0, QP_EINVAL or
 * QP_ENOMEM. Free with qp_report_free.
 */
int
qp_report_build(const qp_desc_t *d, const qp_profile_t *p, qp_unwinder_t *u,
    qp_report_t *out /*OUT*/);

/*
 * qp_report_build, telling PHASE(ARG, NAME) (may be NULL) as its last step starts:
 * "ordering the procedures", once every procedure was solved (a caller may give the
 * memory the walk freed back to the system there: chromium's 53 MB).
 */
int
qp_report_build_phased(const qp_desc_t *d, const qp_profile_t *p, qp_unwinder_t *u,
    void (*phase)(void *arg, const char *name), void *arg, qp_report_t *out /*OUT*/);

void
qp_report_free(qp_report_t *r);

/*
 * Mark approximate the procedures of R that may be left by a longjmp (RAN bit 1) or a
 * throw (bit 2) below them, and count the flags again. qp_report_build does it with what
 * the module itself saw (R->leaving_ran); a report over a whole process does it again
 * with what any module saw (a library's frames left by the program's callback that
 * threw see no throw in the library).
 */
void
qp_report_mark_leaving(qp_report_t *r, int ran);

/*
 * The reports R[0..N-1] of one process's modules: mark each with what any of them saw
 * of a throw or a longjmp (qp_report_mark_leaving with the union of their leaving_ran).
 */
void
qp_report_mark_leaving_all(qp_report_t *const *r, size_t n);

/*
 * A library's report read alone: how many of its procedures a throw or a longjmp of
 * another module (a callback that threw) may leave without R seeing it, and that are not
 * marked approximate for it.
 */
uint32_t
qp_report_unseen_leaving(const qp_report_t *r);

/*
 * PLT stubs, counted from their callers (qp_plt.c). A PLT stub is never relocated nor
 * measured, and the description does not list it; the call sites of the measured
 * procedures name it (their target, and a name such as "puts@plt"). Each call runs the
 * stub's straight-line instructions to and including its first jump (`jmp *GOT(%rip)`: 1;
 * `endbr64; bnd jmp *GOT(%rip)` in .plt.sec: 2) once the symbol is bound, so a stub's
 * calls are the sum of the counts of the direct call sites and tail calls of measured
 * code that target it (exact, as those counts are) and its instructions calls x that
 * number, decoded from IMG (the module's file: the instrumented one keeps its PLT in
 * place). Calls from code that was not measured, and through pointers, are not seen.
 * When the module binds symbols lazily (its dynamic section has neither DF_BIND_NOW nor
 * DF_1_NOW) each symbol's first call also runs the rest of its PLT entry, PLT0 and the
 * dynamic linker's resolver: the stubs whose GOT slot has a JUMP_SLOT relocation are then
 * QP_RES_APPROX_LAZY (low by a few instructions per symbol; exact when the program ran
 * with LD_BIND_NOW set, which the profile does not record).
 * Fills R's plt, nplt, plt_insns, plt_lazy and flat (again when called again). IMG must
 * outlive nothing: names are copied or come from the description. Returns 0, QP_EINVAL
 * or QP_ENOMEM (R is then as qp_report_build left it).
 */
int
qp_report_count_plt(qp_report_t *r, const cfg_image_t *img);

/*
 * Does qp_report_count_plt read the count of key call site K (KEYS: qp_desc_keys, MAP:
 * qp_desc_entry_map of the description): a direct call or tail call whose target is no
 * measured procedure's entry alone (a procedure not measured, a PLT stub, or nothing the
 * description knows)? The report keeps the counts of those sites only (chromium: 0.4 of
 * its 2 million key sites; most call procedures counted by their calls).
 */
int
qp_report_site_kept(const qp_entry_map_t *map, const qp_desc_keys_t *keys, uint32_t k);

/* Row I (0 .. nprocs + nplt - 1) of R in flat-profile order: R's flat, or its procs. */
const qp_proc_result_t *
qp_report_row(const qp_report_t *r, uint32_t i);

/* R's instructions: total_insns and plt_insns (saturated). */
uint64_t
qp_report_insns(const qp_report_t *r);

/* The name of row RES of R as stored: the description's, or a stub's. */
const char *
qp_report_name(const qp_report_t *r, const qp_proc_result_t *res);

/* The stub part of row RES of R, or NULL when RES is a procedure's. */
const qp_plt_stub_t *
qp_report_stub(const qp_report_t *r, const qp_proc_result_t *res);

/* The stub of R whose entry is TARGET, or NULL. */
const qp_proc_result_t *
qp_report_plt_at(const qp_report_t *r, uint64_t target);

/* The counts of measured procedure PROC with the report's inputs (qp_flow_solve). */
int
qp_report_flow(const qp_report_t *r, uint32_t proc, qp_flow_t *out /*OUT*/);

/*
 * Does NAME name the procedure whose stored (possibly mangled) name is MANGLED: equal to
 * it, to its demangled form, or to that form without the parameter list ("ns::f" for
 * "_ZN2ns1fEi")?
 */
int qp_name_matches(const char *mangled, const char *name);

/*
 * Does the rewritten program IMG keep new code in its old text (qpt-rewrite without
 * --keep-old-text: a .qpt.text section over the file bytes of the old code)? Then the
 * old bytes of moved code are not the original instructions any more.
 */
int qp_old_text_reused(const cfg_image_t *img);

/*
 * How many of block B's first bytes (its bytes in the rewritten program IMG at BUF, AVAIL
 * readable) qpt-rewrite overwrote: the redirect to its copy there, or the one of the
 * block before it running on (*OVER_END: where the last redirect ended, 0 at first;
 * updated), or all of them when new code went into the old text. Blocks in address order.
 */
size_t qp_overwritten(const cfg_image_t *img, const qp_desc_block_t *b, const uint8_t *buf,
                      size_t avail, uint64_t *over_end);

/*
 * The original bytes of block B of DESC (B->size of them into OUT) in the rewritten
 * program IMG, whose first HEAD bytes at BUF (its bytes in the file) were overwritten -
 * by the redirect to its copy, or by new code placed in the old text - rebuilt from the
 * block's relocated copy (report/qp_original.c). 1 when rebuilt: *LOST is then the
 * offset of an instruction whose bytes stay unknown (re-encoded where they were
 * overwritten), or SIZE_MAX, *LOST_LEN its length; 0 when no copy fits.
 */
int qp_original_block(const cfg_image_t *img, const qp_desc_t *desc, const qp_desc_block_t *b,
                      const uint8_t *buf, size_t head, uint8_t *out, size_t *lost,
                      size_t *lost_len);

/*
 * The index of the procedure named NAME in D (the measured one first when several
 * share the name), or QP_VIRT. NAME may be demangled, with or without the parameters
 * (qp_name_matches); an exact match of the stored name comes first.
 */
uint32_t
qp_desc_find_proc(const qp_desc_t *d, const char *name);

/*
 * S as one CSV field (RFC 4180): unchanged unless it holds a comma, a double quote, a
 * CR or a LF, else in double quotes with inner quotes doubled. Writes at most OUTLEN
 * bytes (NUL included) into OUT and returns the length of the whole field, like
 * snprintf.
 */
size_t
qp_csv_field(const char *s, char *out, size_t outlen);

/*****************************************************************************
 * A whole process: several modules (qp_process.c)
 */

/*
 * One report over several modules of a process: a program and the shared libraries it
 * loaded, each rewritten and measured into a profile of its own, each with its own
 * report. Code outside them (the dynamic loader, the vDSO, libraries not rewritten) and
 * what each module left unmeasured are in no total; a module's PLT stubs are, as far as
 * its report counted them (qp_report_count_plt).
 */
typedef struct qp_process_row {
    uint32_t module;             /* index of its module (into the reports given) */
    const qp_proc_result_t *res; /* its result in that module's report */
} qp_process_row_t;

typedef struct qp_process {
    const qp_report_t *const *reps; /* per module, not owned */
    uint32_t nmodules;              /* how many */
    uint32_t *by_insns;             /* module indices, most instructions first (then in
                                     * the order given) */
    qp_process_row_t *rows;         /* the measured procedures and counted PLT stubs
                                     * of every module in flat-profile order:
                                     * instructions, then calls, descending, then name,
                                     * module, procedure (stubs after it, by entry) */
    uint32_t nrows;                 /* how many */
    uint64_t total_insns;           /* sum of the modules' total_insns and plt_insns
                                     * (saturated) */
    uint32_t nplt;                  /* sums over the modules of the same fields */
    uint32_t nunmeasured;
    uint32_t nviolating;
    uint32_t napprox;
    uint32_t nunknown;
    uint32_t nsaturated;
} qp_process_t;

/*
 * Build the process report of the N module reports REPS (each built by
 * qp_report_build; they, and REPS itself, must outlive *OUT). Returns 0, QP_EINVAL or
 * QP_ENOMEM. Free with qp_process_free.
 */
int
qp_process_build(const qp_report_t *const *reps, uint32_t n, qp_process_t *out /*OUT*/);

/* Free P's arrays and zero it. NULL is fine. */
void
qp_process_free(qp_process_t *p);

/*****************************************************************************
 * Source lines (for lcov)
 */

typedef struct qp_line {
    const char *file; /* source file (owned by the image; one pointer per name) */
    unsigned line;    /* line number */
    uint64_t count;   /* the largest count of the blocks with an instruction on it */
} qp_line_t;

typedef struct qp_line_fn {
    const char *file; /* source file of the procedure's declaration (or entry) */
    unsigned line;    /* its line */
    uint32_t proc;    /* procedure index in the description */
    uint64_t calls;   /* times called */
} qp_line_fn_t;

/*
 * Which edges of procedure PROC of D a branch profile has (the CFG of BOLT and of branch
 * samplers: blocks end at branches and start at their targets, a call ends none): the
 * edges of jumps, conditional jumps (both ways) and jump tables, and a fall-through
 * (after a call too) into a block that something else enters. KEEP gets a byte per
 * edge of PROC (1: kept). 0 or QP_ENOMEM.
 */
int qp_report_branch_edges(const qp_desc_t *d, uint32_t proc, uint8_t *keep /*OUT*/);

/* One outcome of a branch (a block with a conditional jump or a jump table). */
typedef struct qp_line_branch {
    const char *file;  /* source file of the branching instruction */
    unsigned line;     /* its line */
    uint32_t block;    /* the branching block (global index in the description) */
    uint32_t branch;   /* the outcome: 0, 1, ... in the order of the block's edges */
    uint64_t taken;    /* times it was taken */
    uint8_t executed;  /* the block ran (else lcov prints "-") */
} qp_line_branch_t;

typedef struct qp_lines {
    qp_line_t *lines;         /* sorted by file name, then line */
    size_t nlines;            /* how many */
    qp_line_branch_t *branches; /* sorted by file name, then line, block, branch */
    size_t nbranches;         /* how many */
    qp_line_fn_t *fns;        /* measured procedures with a known calls count and a line,
                               * sorted by file name, then line, then procedure index */
    size_t nfns;              /* how many */
    uint64_t nblocks_skipped; /* blocks left out: count not determined */
} qp_lines_t;

/*
 * Map every instruction of every measured procedure of R (its original address: the
 * instrumented file keeps the original debug information) to its source line through
 * IMG (the executable), and give each line the largest count of the blocks that have
 * an instruction on it. That is what gcov reports for a line that spans several basic
 * blocks (a `for` header: init, test, increment), where a sum would count one pass
 * through the line several times. Like gcov, a procedure's declaration line (from
 * DW_AT_decl_line) gets the count of its entry block, and its FN record that line.
 * Blocks whose count is not determined are left out, never guessed. Returns 0,
 * QP_EINVAL or QP_ENOMEM. Free with qp_lines_free.
 */
int
qp_lines_collect(const cfg_image_t *img, const qp_report_t *r, qp_lines_t *out /*OUT*/);

void
qp_lines_free(qp_lines_t *l);

/*****************************************************************************
 * Edge counts of an earlier run (qp_weights.c), for qpt-rewrite --weights
 */

typedef struct qp_edge_count {
    uint64_t from, to; /* original starts of the blocks at its ends, 0 for X */
    uint64_t count;    /* times it ran */
    uint8_t kind;      /* cfg_edge_kind_t, QP_EDGE_ENTRY or QP_EDGE_ROOT; QP_EDGE_BLOCK:
                        * the count of the block at from = to */
} qp_edge_count_t;

/*
 * Read the profile PATH and the description of the program that wrote it (the executable
 * its header names, read through cfg/), check one against the other, and reconstruct
 * every edge and block count the counters determine (those left unknown are not listed;
 * blocks come after their procedure's edges, as QP_EDGE_BLOCK). *OUT
 * (malloc'd, the caller frees it) gets *N counts in description order. Returns 0 or
 * QP_E* with one line in WHY (which names PATH); *OUT is NULL on failure.
 */
int
qp_edge_counts_read(const char *path, qp_edge_count_t **out /*OUT*/, size_t *n /*OUT*/,
    char *why, size_t whylen);

#endif
