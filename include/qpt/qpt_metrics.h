/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QPT_METRICS_H
#define QPT_METRICS_H
/*
 * PURPOSE: metrics in the spirit of Paradyn's MDL (qpt-metrics(5)): a counter or a timer
 * defined once over the procedures matching a pattern and constrained by predicates -
 * inside(P) (only while a procedure matching P is active in the thread), where EXPR (a
 * condition on the arguments and the program's variables) - with a focus (per
 * procedure, per thread, total). qm_parse reads the language, qm_insert compiles each
 * metric to snippets of libqpt's public API (include/qpt/qpt.h) in a file or a process
 * alike, the layout says where the values are (a note of a rewritten program), and
 * qm_results turns the words into a metric x focus table.
 * Part of libqpt (its code in metrics/, on <qpt/qpt.h> only; qpt(3), qpt-metrics(5)):
 * it never prints, exits or reads the environment.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "qpt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qm_set qm_set_t;

enum { QM_COUNT = 1, QM_WALL, QM_CPU,                    /* what a metric measures */
       QM_SUM, QM_MAX, QM_MIN, QM_AVG };                 /* ... an expression's value */
/* A metric valued by an expression (sum(EXPR), max, min, avg): signed 64-bit values. */
#define QM_IS_VALUED(kind) ((kind) >= QM_SUM && (kind) <= QM_AVG)
enum { QM_PER_PROC = 1, QM_PER_THREAD, QM_TOTAL, QM_PER_VALUE, QM_PER_MODULE, /* focus */
       QM_PER_SITE };

/*
 * Parse TEXT (ORIGIN names it in messages: a file name, or "-e"). With ONE nonzero, TEXT
 * is one metric without `metric NAME =` and without `;` (the tools' -e), named by its
 * text. Metrics are appended to *SET (created when NULL). On a syntax error QP_EINVAL
 * with WHY: "ORIGIN:LINE:COL: message", the line, and a caret under the column.
 */
int qm_parse(const char *text, const char *origin, int one, qm_set_t **set, char *why,
             size_t whylen);

/* An empty set (metrics come later: qm_parse, a live session's commands); NULL. */
qm_set_t *qm_new(void);

/* The number of metrics in SET, and the name of metric I. */
size_t qm_count(const qm_set_t *set);
const char *qm_name(const qm_set_t *set, size_t i);

void qm_free(qm_set_t *set);

/*
 * A front end that words things itself (dyn --count, --all): told of each procedure a
 * metric leaves out, and why (REFUSED: instead of a note), of a metric whose pattern
 * matches no procedure (NOMATCH: with LENIENT, instead of an error: the metric is then
 * out, QM_OFF, and the others go in; a lenient set's patterns name a PLT stub by its own
 * name only, never by the symbol of the function it calls, as dyn --count always did). PLAIN: counts with plain increments, not locked
 * ones (faster; calls made by threads at the same moment may be lost). NOMATCH gets
 * the space the pattern was looked up in (NULL: its library is not loaded and cannot
 * be). Set before
 * qm_insert; the set keeps a copy.
 */
typedef struct qm_hooks {
    void (*refused)(void *arg, size_t metric, const char *proc, const char *why);
    void (*nomatch)(void *arg, size_t metric, const char *pattern, qpt_space_t *s);
    void *arg;             /* ARG of both */
    int lenient;           /* a pattern matching nothing is not an error */
    int plain;             /* plain counter increments */
    void (*detail)(void *arg, const char *note); /* a detail (how counts are made), or
                                                  * NULL: not told */
} qm_hooks_t;
void qm_set_hooks(qm_set_t *set, const qm_hooks_t *hooks);

/* A note for the user (a procedure left out, and why). */
typedef void (*qm_note_fn)(void *arg, const char *note);

/*
 * Compile the metrics of SET not placed yet (all, the first time) into S: resolve the patterns and names (an unknown
 * procedure pattern or variable is an error naming it, with its position, and then
 * nothing is inserted), allocate the metrics' memory, insert the snippets (not
 * committed). A procedure whose points cannot take a snippet is left out with a NOTE
 * (its row says "not measured"). QP_EINVAL/QP_ENOTFOUND with WHY.
 */
/*
 * After the commit that put timers of SET into the stopped process of S: the calls of
 * their procedures under way then (in every thread's stack, Paradyn's catch-up) are
 * timed from now, as if they had just been entered; a note says how many. Calls in a
 * procedure running as a relocated copy, in frames the unwinder cannot pass, or with
 * inside() are not (they count from their next call). 0, or the error of reading the
 * stacks (the metrics stay in).
 */
int qm_catch_up(qm_set_t *set, qpt_space_t *s, qm_note_fn note, void *arg);

int qm_insert(qm_set_t *set, qpt_space_t *s, qm_note_fn note, void *arg, char *why,
              size_t whylen);

/*
 * A process: take metric I (in the program) out of S: its snippets go at the next
 * qpt_commit, its rows leave the results. QPT_EINVAL when it is not in.
 */
int qm_remove(qm_set_t *set, size_t i, qpt_space_t *s, char *why, size_t whylen);

/* After the commit that took them out: the memory of the metrics removed, freed. */
void qm_release(qm_set_t *set, qpt_space_t *s);

/* Metric I: QM_PARSED (not placed yet), QM_ON (in the program), QM_OFF (taken out),
 * QM_WAITING (a live session's: not placed until its library is loaded or the process
 * runs another program; qm_insert leaves it); -1. */
enum { QM_PARSED = 0, QM_ON, QM_OFF, QM_WAITING };
int qm_state(const qm_set_t *set, size_t i);

/*
 * A live session following its process. qm_wait: metric I (parsed) waits (WAIT nonzero),
 * or waits no more and is placed by the next qm_insert. qm_forget: metric I's insertions
 * and memory went with the program or library they were in (an execve, a dlclose):
 * forgotten without touching the process (its values are read before, by the caller);
 * a metric in the program then waits to be placed again, one taken out stays out.
 * QPT_EINVAL when I is in no such state.
 */
int qm_wait(qm_set_t *set, size_t i, int wait);
/* Metric I (parsed or waiting, never placed) is out (QM_OFF) without having been in. */
int qm_set_off(qm_set_t *set, size_t i);
int qm_forget(qm_set_t *set, size_t i);

/* The shared library metric I names (its MODULE of LIB:PROC, a glob as qpt_library
 * takes it) into BUF; 0, or -1 when it names the executable's procedures. */
int qm_library_of(const qm_set_t *set, size_t i, char *buf, size_t len);

/* A live session's metric whose library is a glob (count calls(*.so*:malloc)) is measured
 * in every library that matches, as one metric per library added to the set (qm_live):
 * the metric instance I is of, or I itself when it is none. */
size_t qm_instance_of(const qm_set_t *set, size_t i);

/*
 * The procedures metric I's snippets go into (those matching its pattern and its
 * inside(), that can take snippets), in order, without repeats: *PROCS (malloc'ed), *N.
 */
int qm_metric_procs(const qm_set_t *set, size_t i, qpt_space_t *s, uint32_t **procs,
                    size_t *n);

/*
 * After qm_insert: the estimated cycles that metric I adds per call of each of PROCS
 * (qm_metric_procs), into CYCLES[NPROCS] (qpt_cost_cycles of its insertions there).
 */
int qm_metric_cost(const qm_set_t *set, size_t i, qpt_space_t *s, const uint32_t *procs,
                   size_t nprocs, double *cycles);

/*
 * After qm_insert: the time metric I would add to a run in which each procedure was
 * called CALLS(ARG, its entry address) times (an earlier profile's counts), in ns into
 * *NS (the cost model's cycles at CPN cycles a ns), with the calls counted into *NCALLS
 * and how many of its procedures were called at all into *NCALLED.
 */
int qm_metric_predict(const qm_set_t *set, size_t i, qpt_space_t *s,
                      uint64_t (*calls)(void *arg, uint64_t entry), void *arg, double cpn,
                      double *ns, uint64_t *ncalls, size_t *ncalled);

/* Undo qm_insert of metric I before the commit (or the write): its insertions and memory
 * go, and it is parsed again (qm_drop_parsed forgets it). */
int qm_take_back(qm_set_t *set, size_t i, qpt_space_t *s);

/* Forget the metrics parsed but not placed (after a qm_insert that failed). */
void qm_drop_parsed(qm_set_t *set);

/*
 * The layout of SET (which words hold which metric) after qm_insert into file S: the
 * note QM_LAYOUT_NOTE of the program the next qpt_write of S writes (qpt_note_set), so
 * that qp metrics reads it from there. Back: qm_layout_of_profile reads it from the
 * program that wrote PROFILE (checked against it); qm_layout_load from PATH, a rewritten
 * program or a layout file that an older qpt-rewrite wrote (PROGRAM.qpm). A set read
 * back gives results but cannot insert. qm_layout_id: the rewrite's id (0: a file written
 * before ids, not checked).
 */
#define QM_LAYOUT_NOTE "metrics"
int qm_layout_attach(const qm_set_t *set, qpt_space_t *s, char *why, size_t whylen);
int qm_layout_of_profile(const char *profile, qm_set_t **set, char *why, size_t whylen);
uint64_t qm_layout_id(const qm_set_t *set);
int qm_layout_load(const char *path, qm_set_t **set, char *why, size_t whylen);
/* ... from F, opened by the caller (a tool checks it is a regular file), named PATH. */
int qm_layout_read(FILE *f, const char *path, qm_set_t **set, char *why, size_t whylen);

/* Words of memory: NWORDS from ADDR (a process's memory, or a profile's words). */
typedef int (*qm_read_fn)(void *arg, uint64_t addr, uint64_t *words, size_t nwords);

typedef struct qm_row {
    size_t metric;      /* index in the set */
    int kind;           /* QM_COUNT (a count), QM_WALL or QM_CPU (nanoseconds) */
    char focus[160];    /* the procedure, "thread 0x...", or "total" */
    uint64_t value;
    int measured;       /* 0: the procedure was left out (value 0) */
    int keyed;          /* per value: KEY is the row's value (the focus names it) */
    uint64_t key;
    uint64_t thread;    /* per thread: the thread's pointer (its key), 0 otherwise */
    size_t thread_at;   /* per procedure per thread: where FOCUS's thread part starts
                         * ("PROC / thread ..."); 0 for a per-thread row */
    int empty;          /* max, min, avg: no call was counted (VALUE means nothing) */
    char unit[16];      /* the metric's unit ("bytes": its `unit` clause), or "" */
    uint64_t calls;     /* a 'shared' timer's row: the calls counted with its time */
} qm_row_t;

/* Per-value rows whose value is the address of a symbol of the program in S (a lock, a
 * buffer): " (NAME)" or " (NAME+0xOFF)" after their focus. */
void qm_symbolize(qpt_space_t *s, qm_row_t *rows, size_t n);

/*
 * Thread names for per-thread rows of a live process: its threads' ids and names
 * (/proc/PID/task/TID/comm), learnt while they are alive (qm_threads_learn, often:
 * a thread's id is gone with it), then put in the rows' focus ("thread TID (NAME)") and
 * the rows of each metric sorted by thread id (qm_threads_apply). glibc programs only:
 * the id is read from the thread's descriptor at the offset libc publishes for
 * libthread_db; elsewhere rows keep "thread 0xPOINTER".
 */
typedef struct qm_threads qm_threads_t;
qm_threads_t *qm_threads_new(qpt_space_t *s);
void qm_threads_learn(qm_threads_t *t, const qm_set_t *set, qm_read_fn read, void *arg);
void qm_threads_apply(qm_threads_t *t, qm_row_t *rows, size_t n);
void qm_threads_free(qm_threads_t *t);

/*
 * The metric x focus table of SET (after qm_insert or qm_layout_load), its words read
 * through READ. CYCLES_PER_NS converts wall-clock timers (the time-stamp counter of the
 * machine that ran the program). *ROWS is malloc'ed.
 */
int qm_results(const qm_set_t *set, qm_read_fn read, void *arg, double cycles_per_ns,
               qm_row_t **rows, size_t *nrows, char *why, size_t whylen);

/*
 * qm_results of a running process PID (seed 001, section 3.3, "timers read while
 * running"): a timer's value includes the running part of the calls active in each
 * thread now, read without stopping it. An active timer's words are read again until
 * two reads agree (its thread was starting or stopping it); an active wall timer adds the
 * cycles since its start, an active CPU timer the thread's CPU time since its start
 * (/proc/PID/task/TID/schedstat, the clock the snippets read). A thread that cannot be
 * read, whose words keep changing, or the threads beyond QPT_MAX_THREADS that share a
 * block, add nothing (their calls count when they return). A value may read low for a
 * moment (a stop between its two stores), never high. PID 0: as qm_results.
 */
int qm_results_running(const qm_set_t *set, qm_read_fn read, void *arg, double cycles_per_ns,
                       int pid, qm_row_t **rows, size_t *nrows, char *why, size_t whylen);

/* Keep each timer row of ROWS (N) at least at its value in PREV (NPREV, the same
 * metric and focus, an earlier sample of the same session): what a stop read between
 * its two stores took away for a moment is not shown as time going back. */
void qm_rows_keep_larger(qm_row_t *rows, size_t n, const qm_row_t *prev, size_t nprev);

/*
 * Aggregates over K processes' tables of SET (ROWS[j][0..N[j]), e.g. the ranks of a
 * parallel job): for each metric and focus, the sum, min, max and mean over the
 * processes (one without the row counts 0); a per-thread metric's rows are taken all
 * together (focus "threads": over every thread of every process). With K = 1, only
 * the per-thread metrics (over the process's threads). Rows not measured are
 * left out. Four rows each, focus "sum: FOCUS", "min: ...", "max: ...", "mean: ..."
 * (the mean rounded down); *OUT malloc'ed.
 */
int qm_aggregate(const qm_set_t *set, qm_row_t *const *rows, const size_t *n, size_t k,
                 qm_row_t **out, size_t *nout);

/* The time-stamp counter's rate on this machine (measured over about 20 ms). */
double qm_cycles_per_ns(void);

/*****************************************************************************
 * A live session (qm_live.c): what `dyn -e` runs
 */

/* What a metric costs a live process: the time its snippets add over the program's own
 * CPU time, in percent (100: twice as slow), or -1 when not known. */
typedef struct qm_cost {
    size_t metric;       /* index in the set */
    double predicted;    /* before it went in: sampled call rates x the cost model */
    double observed;     /* over the last interval: the calls made x the cost model */
    double overall;      /* since it went in */
    double calls_per_s;  /* calls of the procedures its snippets are in (last interval) */
    double slowdown;     /* measured over the last interval: how many % fewer calls of
                          * those procedures a CPU second than before it went in - what
                          * every snippet in them costs together, on a steady workload (a
                          * change of phase shows too) */
} qm_cost_t;

struct qm_many_report; /* (qm_live_run_many's, below) */

/* What a live session tells a front end that words it itself (qm_live_opts_t.on_event)
 * instead of its own notes. */
enum {
    QM_EV_PLACED = 1,    /* the metrics went in (the first time, and after an execve):
                          * PLACED says which */
    QM_EV_LOADED,        /* library NAME was loaded: the metrics in PLACED went in */
    QM_EV_UNLOADED,      /* library NAME was unloaded (dlclose): values kept */
    QM_EV_EXEC,          /* the process ran NAME (execve); WAS ran before, IMAGE: execs
                          * so far; the values up to then are rows WAS[IMAGE]:FOCUS */
    QM_EV_FORKS,         /* at the end: COUNTED children counted with the parent, APART
                          * not measured */
    QM_EV_NEVER_LOADED,  /* at the end: metric METRIC's library NAME was never loaded */
    QM_EV_WAITING,       /* metric METRIC waits for its library NAME (dlopen) */
    QM_EV_REMOVED,       /* at the end: every snippet out, the process let go; it was
                          * stopped STOP_MS for it */
};
typedef struct qm_live_event {
    int kind;                /* QM_EV_* */
    int pid;                 /* the process */
    double stop_ms;          /* PLACED, LOADED: how long it was stopped */
    const char *name;        /* see the kinds */
    const char *was;         /* EXEC */
    size_t image;            /* EXEC */
    size_t metric;           /* NEVER_LOADED, WAITING */
    unsigned counted, apart; /* FORKS */
    const uint8_t *placed;   /* PLACED, LOADED: per metric (NMETRICS), 1 when it went in
                              * at this step */
    size_t nmetrics;
} qm_live_event_t;

/* The names of the rows of metric I that are measured (it went in there), in order:
 * *NAMES (malloc'ed array; the strings are the set's, valid until it changes), *N. */
int qm_measured(const qm_set_t *set, size_t i, const char ***names, size_t *n);

typedef struct qm_live_opts {
    int pid;                 /* attach to this process, or (0) */
    char *const *argv;       /* start this program (stopped before its first instruction) */
    double interval;         /* > 0: a sample every INTERVAL seconds, to on_sample */
    double duration;         /* > 0: end after DURATION seconds; else when the process
                              * ends or *stop is set */
    const volatile int *stop; /* set (by the caller's signal handler): end the session */
    qm_note_fn note;         /* notes (procedures left out), with NOTE_ARG */
    void *note_arg;
    /* A sample (T seconds since the start), with the metrics' costs; nonzero ends the
     * session. */
    int (*on_sample)(void *arg, const qm_set_t *set, const qm_row_t *rows, size_t n,
                     const qm_cost_t *costs, size_t ncosts, double t);
    /* > 0: a metric whose predicted cost (with the others' observed) exceeds MAX_OVERHEAD
     * percent is not inserted, and while running, when the observed total (the larger of
     * the modelled costs' sum and the largest measured slowdown) exceeds it, the metric
     * modelled costliest is taken out (said through NOTE). */
    double max_overhead;
    double sample;           /* seconds of call counting before a metric goes in (0.2) */
    /* Called once the first metrics are in the process (PID, the ms it was stopped). */
    void (*on_ready)(void *arg, int pid, double stop_ms);
    size_t hist_buckets;     /* > 0 (even): each metric's total over time in this many
                              * buckets of HIST_WIDTH seconds (they fold in pairs as the
                              * session outlasts them; see qpt_hist_t) */
    double hist_width;
    void *arg;
    /* Steering: with COMMANDS nonzero, commands are read from COMMANDS_FD, one a line
     * (add METRIC, remove NAME|#N, list, show, help, quit; the end of the input is quit)
     * and answered through ON_REPLY (ARG), a line at a time; NULL when the session waits
     * for the next command (a prompt's moment). The session may start with no metric. */
    int commands;
    int commands_fd;
    int relocate;            /* a procedure whose entry or exits do not fit in place is
                              * measured in a copy of it (qpt_set_relocate) */
    void (*on_reply)(void *arg, const char *line);
    int refuse_unloaded;     /* a metric naming a library not loaded is an error (else,
                              * the process being followed, it waits for one: dlopen) */
    int keep_numbers;        /* an `add` refused leaves its metric in the set, out
                              * (QM_OFF): the numbers stay those of the same commands in
                              * other processes (qm_live_run_many's sessions) */
    /* qm_live_run_many: every INTERVAL seconds (and at a `show`) the latest table of each
     * process, in NOW (its rows; rc, secs... only once a process's session ended), T the
     * session's seconds. */
    void (*on_many_sample)(void *arg, const qm_set_t *set, const struct qm_many_report *now,
                           double t);
    /* A front end that words the session's events itself (dyn --count): each through
     * ON_EVENT (ARG) instead of a note. */
    void (*on_event)(void *arg, const qm_live_event_t *ev);
    int no_costs;            /* no cost counters, no prediction (the metrics' own counts
                              * are all there is to see; not with max_overhead) */
} qm_live_opts_t;

typedef struct qm_live_report {
    int pid;
    int ended;               /* the process ended during the session (STATUS: its wait
                              * status, when we started it) */
    int status;
    double secs;             /* the session's length */
    double stop_ms;          /* how long the process was stopped to insert the metrics */
    unsigned added, removed; /* metrics added and removed by commands */
    qm_row_t *rows;          /* the final table (malloc'ed), or NULL */
    size_t nrows;
    qm_cost_t *costs;        /* the metrics' costs (malloc'ed), or NULL */
    size_t ncosts;
    qpt_hist_t **hist;       /* with hist_buckets: per metric (index in the set), its total
                              * over time from the session's start (NULL: never in) */
    size_t nhist;
} qm_live_report_t;

/* Free what a report holds (not REP itself). */
void qm_live_report_free(qm_live_report_t *rep);

/*
 * Attach to (or start) the process, insert SET in one stop, let it run, sample, and at
 * the end read the final table and take every snippet out (a process that ended is left
 * as it is). The process is followed (qpt_watch): a metric naming a library not loaded
 * goes in when one is (dlopen), the values of a library unloaded are kept (and added to
 * if it is loaded again), after an execve every metric goes into the new program again
 * (the earlier image's rows kept apart, their focus "PROG[N]:..."), forks are counted
 * with the parent when the metrics' memory is shared (else their snippets are taken out
 * of the child); each said through NOTE (through ON_REPLY when steering). The library installs no signal handler: the caller sets *o->stop. QPT_E*
 * with WHY; REP says what was measured even then (rows when there are).
 */
int qm_live_run(qm_set_t *set, const qm_live_opts_t *o, qm_live_report_t *rep, char *why,
                size_t whylen);

/*****************************************************************************
 * Several processes (qm_many.c): the same metrics in each, e.g. a parallel job's ranks
 */

typedef struct qm_proc_report {
    int pid;
    long rank;               /* its job rank (OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK,
                              * SLURM_PROCID in its environment), or -1 */
    int rc;                  /* its session's status, and why when it failed */
    char why[1024];
    int ended, status;
    double secs, stop_ms;
    qm_row_t *rows;          /* its final table (malloc'ed), or NULL */
    size_t nrows;
} qm_proc_report_t;

typedef struct qm_many_report {
    qm_proc_report_t *v;     /* one per process, in the order given */
    size_t n;
    qpt_hist_t **hist;       /* with hist_buckets: per metric, its total over time summed
                              * over the processes (NULL: never in) */
    size_t nhist;
} qm_many_report_t;

/*
 * Attach to each of PIDS[N] and run O's session on it (O->pid and argv are not used),
 * all at once: a child process per target (its tracer), its samples, answers
 * and report sent back through a pipe; *O->stop is passed on to them (SIGINT). With
 * O->interval, O->on_many_sample gets every process's table together; with O->commands,
 * each line of O->commands_fd goes to every session, and their answers come through
 * O->on_reply as "rank R: ..." or "pid P: ..." (NULL once all wait for the next
 * command); with O->hist_buckets, REP's histograms are the processes' summed. Each
 * process's outcome is in REP (one may fail while the others are measured); QPT_E* with
 * WHY when the sessions could not be started.
 */
int qm_live_run_many(qm_set_t *set, const qm_live_opts_t *o, const int *pids, size_t n,
                     qm_many_report_t *rep, char *why, size_t whylen);
void qm_many_report_free(qm_many_report_t *rep);


/*****************************************************************************
 * The automated bottleneck search (qm_search.c): Paradyn's Performance Consultant
 */

enum { QM_HYP_CPU = 1, QM_HYP_SYNC, QM_HYP_IO, QM_HYP_SYSCALL };   /* why */
enum { QM_NODE_UNTESTED = 0, QM_NODE_TESTING, QM_NODE_TRUE, QM_NODE_FALSE,
       QM_NODE_UNMEASURED };                                         /* its outcome */
enum { QM_FOCUS_PROGRAM = 1, QM_FOCUS_THREAD, QM_FOCUS_PROC, QM_FOCUS_CALLER,
       QM_FOCUS_OBJECT, QM_FOCUS_SITE };                                            /* where */

typedef struct qm_search_node {
    int hyp;                 /* QM_HYP_* */
    int focus_kind;          /* QM_FOCUS_* */
    char focus[256];         /* "whole program", "thread 1234", "crunch", "mutex 0x... (m)" */
    char metric[320];        /* the metric that tested it ("" from /proc: no snippets) */
    long parent;             /* index of its parent in the tree, or -1 */
    int depth;
    int state;               /* QM_NODE_* */
    double value;            /* the share of wall time (summed over threads: may pass 1) */
    double threshold;
    double t_start, t_end;   /* when tested: seconds since the search began */
    char why[256];           /* QM_NODE_UNMEASURED: why */
    int round;               /* the when axis: which round of the search (0, 1, ...) */
} qm_search_node_t;

typedef struct qm_search_opts {
    int pid;                 /* attach to this process, or (0) */
    char *const *argv;       /* start this program */
    double threshold;        /* a hypothesis holds above this share of wall time (0.2) */
    double step;             /* seconds each test measures (0.5) */
    double max_overhead;     /* > 0: the cost budget in percent (qm_live_opts_t) */
    double duration;         /* > 0: end the search after this many seconds */
    const char *roots;       /* comma-separated procedures the CPU search refines from
                              * ("main") */
    const volatile int *stop;
    qm_note_fn note;         /* notes (procedures left out, metrics refused), NOTE_ARG */
    void *note_arg;
    /* Each node as it is concluded (ARG); with INTERVAL > 0 also every INTERVAL s with
     * NODE NULL (a progress tick: T seconds, the number of nodes, tested, true). */
    void (*on_node)(void *arg, const qm_search_node_t *node, double t, size_t n,
                    size_t tested, size_t ntrue);
    double interval;
    int repeat;              /* search again from the roots after each round, until
                              * DURATION or the process ends (the when axis) */
    void *arg;
} qm_search_opts_t;

typedef struct qm_search_report {
    int pid;
    int ended, status;       /* the process ended during the search */
    double secs;
    qm_search_node_t *nodes; /* the tree in order of creation (malloc'ed) */
    size_t n;
    size_t *ranked;          /* the bottlenecks: indices of true nodes with no true
                              * descendant, by round, then refined ones (depth > 0,
                              * threads aside) first, then by value (malloc'ed) */
    size_t nranked;
    unsigned added, removed; /* metrics inserted and taken out */
    double stopped_ms;       /* how long the process was stopped for them, in all */
} qm_search_report_t;

/*
 * Search the process for its bottlenecks (W3: why, where, when): test each hypothesis
 * program-wide, refine those above the threshold down the resource hierarchy (process ->
 * threads; procedure -> callees; lock procedure -> lock object; I/O procedure -> its
 * callers), take the metrics of refuted nodes out, keep within O->max_overhead. QPT_E*
 * with WHY; REP holds the tree even then.
 */
int qm_search_run(const qm_search_opts_t *o, qm_search_report_t *rep, char *why,
                  size_t whylen);
void qm_search_report_free(qm_search_report_t *rep);

/*
 * The search in each of PIDS[N] at once (a parallel job's ranks), a child process per
 * target: REPS[N] (each freed with qm_search_report_free), RANKS[N] (the job rank from
 * its environment, or -1), RCS[N] (each search's status). QPT_E* with WHY when the
 * searches could not be started.
 */
int qm_search_run_many(const qm_search_opts_t *o, const int *pids, size_t n,
                       qm_search_report_t *reps, long *ranks, int *rcs, char *why,
                       size_t whylen);
const char *qm_search_hyp_name(int hyp);
const char *qm_search_state_name(int state);

#ifdef __cplusplus
}
#endif

#endif
