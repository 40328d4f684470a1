/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_QPT_REWRITE_PRIV_H
#define QP_QPT_REWRITE_PRIV_H
/*
 * PURPOSE: the inside of libqpt's rewrite engine (include/qpt/qpt_rewrite.h): the one
 * loop that plans, measures and writes a file - re-planning when unwind data of moved code
 * cannot be rewritten - shared by qpt_rewrite_run (the drivers) and qpt_write (a
 * mutator's snippets); the --dump-cfg printers.
 */
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>

#include "cfg/cfg.h"
#include "driver/driver.h"
#include "editor/ed.h"
#include "editor/elfw.h"
#include "include/qpt/qpt_rewrite.h"
#include "libqpt/qpt_priv.h"

/*****************************************************************************
 * The engine loop
 */

/* What a measurement does with each plan the engine makes (a retry makes a new one). */
typedef struct qpt_measure {
    /* Put the probes into PLAN; *INSTR: the runtime's description (NULL: no runtime). */
    int (*plan)(void *arg, ed_plan_t *plan, const elfw_instr_t **instr /*OUT*/);
    /* Free what plan made, before the next plan (may be NULL). */
    void (*undo)(void *arg);
    void *arg;
} qpt_measure_t;

/* How the engine writes, beside the plan's options. */
typedef struct qpt_engine_io {
    const char *input, *output;
    const elfw_rewrite_opts_t *wo; /* may be NULL */
    qpt_rewrite_progress_fn progress; /* may be NULL */
    void *progress_arg;
} qpt_engine_io_t;

/* What the engine did: the last plan (the caller destroys it, also after a failure), the
 * writer's figures, the re-plans, and on failure ERR (the one line, "" for rc's text). */
typedef struct qpt_engine_out {
    ed_plan_t *plan;
    elfw_rewrite_stats_t st;
    uint32_t retries;
    char err[512];
} qpt_engine_out_t;

/*
 * Plan PROG's layout with EO (its stay list is the engine's), let M measure, write; when
 * the writer reports an FDE of moved code it could not rewrite for the new layout, plan
 * again with that code in place (at most 16 times). 0 or QP_E*.
 */
int qpt_engine_write(const cfg_prog_t *prog, ed_opts_t *eo, const qpt_measure_t *m,
                     const qpt_engine_io_t *io, qpt_engine_out_t *out /*OUT*/);

/* Why every procedure of IMG stays in place (a Go or GHC program), or NULL. */
const char *qpt_all_in_place_reason(const cfg_image_t *img);

/* The plan options a rewrite of a file starts from (qpt-rewrite's defaults): old text
 * reused, every procedure in place when the runtime needs it (ALL_IN_PLACE). */
void qpt_engine_defaults(ed_opts_t *eo /*OUT*/, const char *all_in_place);

/*****************************************************************************
 * The rewrite object, the drivers' measurement, and what both print
 */

struct qpt_rewrite {
    const drv_ops_t *drv;      /* the driver; NULL: none */
    const char *driver;        /* its name */
    char *weights;             /* qp: an earlier profile's edge counts, or NULL */
    int atomic;                /* counters: 1 locked, 0 plain, -1 decide */
    int call_targets;          /* qp: record indirect calls' targets */
    int iv_loops;              /* qp: loops counted from induction variables */
    int trace_mem;             /* trace drivers: load and store addresses too */
    int keep_old_text;         /* never reuse the old bytes of moved code */
    int verbose;               /* more lines (every procedure left in place) */
    int stretch;               /* testing: a nop after each relocated instruction */
    int keep_tables;           /* testing: jump tables never retargeted */
    int local_libs;            /* outputs look in their own folder first */
    unsigned threads;          /* of the analysis */
    char **leave;              /* procedures left in place (testing) */
    size_t nleave;             /* how many */
    char *leave_all;           /* every procedure left in place, for this reason */
    char *sysroot;             /* --with-libs: another machine's libraries, or NULL */
    qpt_rewrite_progress_fn progress; /* the hooks, each with its argument */
    void *progress_arg;        /* ... */
    qpt_rewrite_message_fn message; /* ... */
    void *message_arg;         /* ... */
    qpt_rewrite_temp_fn temp;  /* ... */
    void *temp_arg;            /* ... */
    qpt_rewrite_phase_fn debug_phase; /* ... */
    qpt_rewrite_message_fn debug_note; /* ... */
    void *debug_arg;           /* ... */
    qpt_rewrite_summary_t sum; /* of the last run */
    char err[1024];            /* the last failure */
};

/* One measurement by a driver, remade for each plan of the engine loop. */
typedef struct measure_ctx {
    qpt_rewrite_t *r;          /* the options */
    const cfg_prog_t *prog;    /* the program */
    drv_weights_t *w;          /* --weights, or NULL */
    int tracing;               /* a trace driver */
    int atomic;                /* r->atomic, or 1 for Go (threads no hook sees) */
    drv_result_t res;          /* the driver's counters and description */
    drv_trace_t *tr;           /* tracing: the events */
    drv_inc_t inc;             /* how counters are incremented */
    elfw_instr_t instr;        /* what the writer adds */
    uint32_t ntraced;          /* tracing: procedures traced */
    uint32_t nmrefs, nmvals;   /* --trace-mem: accesses described, values recorded */
} measure_ctx_t;

/* Set R's message (printf-style) and return RC. */
int qpt_rw_fail(qpt_rewrite_t *r, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "INPUT: why" for a failure RC of the core (errno's text for a failed system call). */
int qpt_rw_fail_input(qpt_rewrite_t *r, const char *input, int rc);
/* FMT and AP formatted (in a buffer grown for long names) and handed to FN. */
void qpt_rw_vsay(void (*fn)(void *arg, const char *line), void *arg, const char *fmt,
                 va_list ap);
/* One line for R's on_message hook. */
void qpt_rw_say(const qpt_rewrite_t *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* PHASE alone (NULL: over) for R's on_progress hook. */
void qpt_rw_progress(const qpt_rewrite_t *r, const char *phase);

/* Analyse INPUT and rewrite it to OUTPUT with R's driver (qpt_rewrite_run). */
int qpt_rw_file(qpt_rewrite_t *r, const char *input, const char *output);
/* The rewrite of PROG, analysed, ALL_IN_PLACE: why every procedure stays (or NULL). */
int qpt_rw_rewrite(qpt_rewrite_t *r, const cfg_prog_t *prog, const char *input,
                   const char *output, const char *all_in_place);
/* The summary lines of a rewrite that succeeded (qpt_rewrite_report.c). */
void qpt_rw_report(qpt_rewrite_t *r, const cfg_prog_t *prog, const char *input,
                   const char *output,
                   const qpt_engine_out_t *eout, const measure_ctx_t *c);

/*****************************************************************************
 * --dump-cfg (qpt_dump.c)
 */

typedef struct dump_out {
    qpt_rewrite_text_fn fn;
    void *arg;
} dump_out_t;

void qpt_dump_summary(dump_out_t *f, const cfg_prog_t *prog, int verbose);
void qpt_dump_text(dump_out_t *f, const cfg_prog_t *prog);
void qpt_dump_unreached(dump_out_t *f, const cfg_prog_t *prog);
void qpt_dump_dot(dump_out_t *f, const cfg_prog_t *prog, const cfg_proc_t *p);

#endif
