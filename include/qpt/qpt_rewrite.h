/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QPT_QPT_REWRITE_H
#define QPT_QPT_REWRITE_H
/*
 * PURPOSE: the static rewrite engine of libqpt, the whole pipeline that qpt-rewrite runs:
 * analyse an executable or shared library, let a measurement driver (none, qp, naive,
 * trace, trace-naive) decide what to measure where, relocate, patch what stays in place,
 * write a new ELF file - re-planning when unwind data of moved code cannot be rewritten.
 * qpt_write (qpt.h) runs the same engine for a mutator's own snippets.
 *
 * A rewrite object holds the options; each qpt_rewrite_run writes one output and leaves
 * what it did as lines of text (the summary qpt-rewrite prints: the on_message hook) and
 * as counts (qpt_rewrite_summary). Conventions as in qpt.h: 0 or a negative QPT_E* code,
 * the one-line message in qpt_rewrite_error; the library never prints (text goes to the
 * caller's callbacks) and never reads the environment.
 */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qpt_rewrite qpt_rewrite_t;

/* A new rewrite with the defaults: driver qp, counters atomic when the program can start
 * threads, analysis on one thread, old text reused. */
int qpt_rewrite_create(qpt_rewrite_t **out /*OUT*/);
void qpt_rewrite_destroy(qpt_rewrite_t *r);

/* The message of the last failure of R ("" when none): "INPUT: why". */
const char *qpt_rewrite_error(const qpt_rewrite_t *r);

/*****************************************************************************
 * Options
 */

/* The measurement: "qp" (edge profiling), "naive" (a counter per block), "none" (relocate
 * only), "trace", "trace-naive" (control-flow tracing). QPT_EINVAL for another name. */
int qpt_rewrite_set_driver(qpt_rewrite_t *r, const char *name);

/* qp: place counters by the edge counts of PROFILE, an earlier profile of the program
 * (NULL: by loop depth). Read at qpt_rewrite_run. */
int qpt_rewrite_set_weights(qpt_rewrite_t *r, const char *profile);

typedef enum qpt_rewrite_option {
    QPT_RW_ATOMIC = 1,     /* 1 locked increments, 0 plain, -1 (default) decide */
    QPT_RW_CALL_TARGETS,   /* qp: record the targets of indirect calls */
    QPT_RW_TRACE_MEM,      /* trace drivers: also load and store addresses */
    QPT_RW_THREADS,        /* analyse on N threads (1..16) */
    QPT_RW_KEEP_OLD_TEXT,  /* never put new code into the old bytes of moved code */
    QPT_RW_VERBOSE,        /* more lines: every procedure left in place and why */
    QPT_RW_STRETCH,        /* testing: a nop after every relocated instruction */
    QPT_RW_KEEP_TABLES,    /* testing: never retarget jump tables */
    QPT_RW_LOCAL_LIBS,     /* the output looks for its libraries in its own folder first */
    QPT_RW_IV_LOOPS,       /* qp: count a loop stepped by one register from that register
                            * where it costs less (experimental: doc/qp.md) */
} qpt_rewrite_option_t;

/* Set OPTION (qpt_rewrite_option_t) to VALUE. QPT_EINVAL for an unknown option or a
 * value out of range. */
int qpt_rewrite_set(qpt_rewrite_t *r, int option, long value);

/* Testing aids: the procedures NAMES (N exact names, copied) stay in place; with REASON
 * not NULL every procedure does, for that reason. */
int qpt_rewrite_set_leave(qpt_rewrite_t *r, const char *const *names, size_t n);
int qpt_rewrite_set_leave_all(qpt_rewrite_t *r, const char *reason);

/* Where the separate debug files of stripped programs are looked for (colon-separated
 * folders; default /usr/lib/debug). Global to the process: set it before any rewrite. */
int qpt_set_debug_dirs(const char *dirs);

/*
 * The path of the input file whose mapping holds ADDR (a rewrite reads its input, and
 * its separate debug file, through mappings of them), or NULL. Async-signal-safe: a
 * tool's SIGBUS handler calls it to tell an input truncated while it was rewritten
 * (a read past its new end faults) from a bug. Valid while the rewrite runs.
 */
const char *qpt_mapped_input_at(const void *addr);

/*****************************************************************************
 * Libraries of another machine (issue 34: --with-libs on AArch64 programs)
 */

/* qpt_rewrite_with_libs: the folder DIR (copied; NULL or "": none, the default) under
 * which the program's libraries are looked for first, as qemu-user's -L or a cross
 * toolchain's sysroot (/usr/aarch64-linux-gnu): every absolute folder of the search is
 * tried as DIR/folder, then as itself. Only libraries of the program's own machine are
 * ever taken. QPT_ENOMEM. */
int qpt_rewrite_set_sysroot(qpt_rewrite_t *r, const char *dir);

/*****************************************************************************
 * Hooks (each may be NULL; called from the thread that runs the rewrite)
 */

/* Progress for a user waiting on a terminal: PHASE ("analysing", "placing counters",
 * "relocating", "writing", "relocating and writing") with DONE of TOTAL (TOTAL 0: the
 * phase alone); PHASE NULL: the work shown is over. A new pass of the analysis restarts
 * at DONE 0. */
typedef void (*qpt_rewrite_progress_fn)(void *arg, const char *phase, size_t done,
                                        size_t total);
void qpt_rewrite_on_progress(qpt_rewrite_t *r, qpt_rewrite_progress_fn fn, void *arg);

/* Each line of what the rewrite did (the summary, notes, what stayed unmeasured), without
 * a newline; qpt-rewrite prints "qpt-rewrite: LINE". */
typedef void (*qpt_rewrite_message_fn)(void *arg, const char *line);
void qpt_rewrite_on_message(qpt_rewrite_t *r, qpt_rewrite_message_fn fn, void *arg);

/* The temporary file the output is written to before its rename (PATH NULL: none any
 * more), for a signal handler that removes it. */
typedef void (*qpt_rewrite_temp_fn)(void *arg, const char *path);
void qpt_rewrite_on_temp_file(qpt_rewrite_t *r, qpt_rewrite_temp_fn fn, void *arg);

/* The end of each phase of the analysis and of the rewrite (PHASE, NPROCS procedures
 * known; a development aid, and where qpt-rewrite gives its heap's free pages back) and
 * the analysis' notes (NOTE may be NULL). Called on the caller's thread, between the
 * phases' parallel parts. */
typedef void (*qpt_rewrite_phase_fn)(void *arg, const char *phase, size_t nprocs);
void qpt_rewrite_on_debug(qpt_rewrite_t *r, qpt_rewrite_phase_fn phase,
                          qpt_rewrite_message_fn note, void *arg);

/*****************************************************************************
 * Running
 */

/* Rewrite INPUT into OUTPUT (written to a temporary file and renamed; mode kept). */
int qpt_rewrite_run(qpt_rewrite_t *r, const char *input, const char *output);

/*
 * INPUT, a program, and every library it loads at start, into the folder DIR (created if
 * need be; one holding other files only with FORCE): DIR/PROGRAM and DIR/NAME for each
 * library, each looking in its own folder first. A library that cannot be rewritten is
 * named (on_message) and left out; the dynamic linker is never rewritten. QPT_EINVAL only
 * when DIR is not a folder or holds other files without FORCE.
 */
int qpt_rewrite_with_libs(qpt_rewrite_t *r, const char *input, const char *dir, int force);

/*
 * What the analysis of INPUT found, as text passed to OUT in pieces (each may hold several
 * lines or part of one): QPT_DUMP_SUMMARY (with the `coverage: NN.NN% of text bytes`
 * line), QPT_DUMP_TEXT (every block and edge), QPT_DUMP_DOT (Graphviz of the procedure
 * PROC, a name or a demangled name; QPT_ENOTFOUND when none has it).
 */
enum { QPT_DUMP_SUMMARY = 1, QPT_DUMP_TEXT, QPT_DUMP_DOT };
typedef void (*qpt_rewrite_text_fn)(void *arg, const char *text);
int qpt_rewrite_dump_cfg(qpt_rewrite_t *r, const char *input, int kind, const char *proc,
                         qpt_rewrite_text_fn out, void *arg);

/* Counts of the last successful qpt_rewrite_run. */
typedef struct qpt_rewrite_summary {
    uint32_t relocated;    /* procedures relocated */
    uint32_t left;         /* procedures left in place */
    uint32_t measured;     /* procedures measured (0 for driver none) */
    uint32_t unmeasured;   /* procedures not measured */
    uint32_t counters;     /* counters placed */
    uint32_t retries;      /* re-plans for unwind data that could not be rewritten */
    uint64_t input_size;   /* bytes of the input */
    uint64_t output_size;  /* bytes of the output */
} qpt_rewrite_summary_t;
int qpt_rewrite_summary(const qpt_rewrite_t *r, qpt_rewrite_summary_t *out /*OUT*/);

#ifdef __cplusplus
}
#endif
#endif
