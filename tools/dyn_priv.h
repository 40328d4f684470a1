/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * tools/dyn_priv.h: what the parts of the dyn tool share (dyn.c: options and main;
 * dyn_report.c: its tables and reports; dyn_session.c: -e's sessions on one or several
 * processes; dyn_count.c: --count, --all, --time and --calls-from as metrics). Only
 * tools/dyn*.c include it.
 */
#ifndef QPT_TOOLS_DYN_PRIV_H
#define QPT_TOOLS_DYN_PRIV_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "include/qpt/qpt.h"
#include "tools/tool.h"
#include "tools/tool_metrics.h"

enum { DYN_EXIT_FAIL = 1, DYN_EXIT_USAGE = 2 };

/* "dyn", for messages. */
extern const char *dyn_prog_name;
/* What a row of the tables is: "procedures", or "points" with call sites among them. */
extern const char *dyn_what;
/* SIGINT, SIGTERM or SIGHUP arrived: end the session (never in the middle of a step). */
extern volatile sig_atomic_t dyn_stop_flag;
/* Standard output is a closed pipe (EPIPE): end the session, then fail. */
extern int dyn_out_closed;

/*
 * --trace=FILE: the calls over time as a Chrome trace (JSON Trace Event Format, which
 * Perfetto and chrome://tracing load): a counter track per procedure, one event per live
 * sample with its calls per second and its calls so far. A procedure appears from its
 * first call; after its last, one event brings it back to 0.
 */
typedef struct dyn_trace_out {
    FILE *f;          /* OUT's stream while tracing, else NULL */
    const char *path;
    tool_out_t out;   /* written beside PATH, renamed over it when complete */
    size_t nevents;
    uint64_t *last;   /* per point: its rate in the previous sample (0: none) */
    int64_t *wall;    /* per point: its time inside at the previous sample */
    size_t nlast;
    int tables;       /* print the live tables too (--interval given) */
} dyn_trace_out_t;

/* dyn.c */
extern dyn_trace_out_t dyn_trace;

/* One row of a table and its counts. */
typedef struct dyn_row {
    const char *name; /* the row's name */
    size_t point;     /* its index among the session's rows (counting_t.names) */
    uint64_t calls;   /* calls counted */
    uint64_t rate;    /* ... since the previous live table (live tables only, else 0) */
    int64_t wall_ns;  /* time inside so far, -1 when not timed */
} dyn_row_t;

/* A live table (--interval). */
typedef struct dyn_live {
    int pid;          /* the process */
    double t;         /* seconds since the instrumentation went in */
    double dt;        /* seconds since the previous table */
    const dyn_row_t *rows; /* every row, by rate, then calls, then name */
    size_t nrows;
} dyn_live_t;

/* The final table. */
typedef struct dyn_final {
    size_t npoints;          /* rows */
    char **names;            /* per row: its name */
    const uint64_t *calls;   /* per row: calls counted */
    dyn_row_t *rows;             /* every row, by calls (descending), then name */
    int timed;               /* some row has a timer */
    double secs;             /* from the install to the final sample */
    const qpt_hist_t *hist;  /* the calls over time (NULL: no --histogram) */
} dyn_final_t;

typedef struct dyn_opts {
    const char **count; /* --count patterns */
    size_t ncount;
    const char **time; /* --time patterns */
    size_t ntime;
    const char **calls; /* --calls-from patterns */
    size_t ncalls;
    const char **margs; /* -e texts and --metrics files, in order */
    char *morder;       /* 'e' or 'f' for each */
    size_t nm;
    int all;         /* --all */
    int zeros;       /* --zeros */
    double interval; /* --interval, 0 = none */
    double duration; /* --duration, 0 = until the end */
    const char *csv; /* -o */
    int verbose;     /* -v */
    int commands;    /* --commands */
    int children;    /* --children: the processes PID started */
    int aggregate;   /* --aggregate: per-thread metrics' sum, min, max, mean */
    int *pids;       /* attach PID,PID,...: the processes (npids > 1) */
    size_t npids;
    double max_overhead; /* --max-overhead, percent; 0: none */
    const char *trace;   /* --trace=FILE.json */
    int histogram;   /* --histogram: print the calls over time at the end */
    int no_atomic;   /* --no-atomic */
    int follow_exec; /* --follow-exec (taken: every session follows) */
} dyn_opts_t;

/* Buckets of the time histogram (they merge in pairs when the session outlasts them). */
#define DYN_HIST_BUCKETS 32
/* Their width at first, in seconds. */
#define DYN_HIST_WIDTH 0.05

/* dyn_report.c */
double dyn_now_s(void);
dyn_row_t *dyn_rows_make(size_t n, const char *const *names, const uint64_t *now,
                         const uint64_t *prev, const int64_t *ns);
char *dyn_show_name(const char *name);
int dyn_print_live(void *arg, const dyn_live_t *l);
void dyn_print_note(void *arg, int detail, const char *line);
void dyn_print_histogram(const dyn_final_t *rep);
void dyn_print_metric_histogram(const qm_set_t *set, const qm_live_report_t *rep);
int dyn_report(const dyn_final_t *rep, const char *csv, int zeros);

/* dyn_session.c */
void dyn_analysis_threads(void);
int dyn_metrics_session(const dyn_opts_t *o, int pid, char *const *argv);
int dyn_many_session(const dyn_opts_t *o);

/* dyn_count.c */
void dyn_option_metric(char kind, const char *pattern, char *text, size_t len);
int dyn_count_session(const dyn_opts_t *o, int pid, char *const *argv, double t_start);

#endif
