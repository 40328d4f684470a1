/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_QM_PRIV_H
#define QP_QM_PRIV_H
/* metrics/ inside: the parsed metrics (qm_parse.c), and where qm_insert put them. */
#include "include/qpt/qpt_metrics.h"

/* Return the status of E when it failed. */
#define QM_CHECK(e)                                                                      \
    do {                                                                                 \
        int qm_rc_ = (e);                                                                \
        if (qm_rc_ < 0)                                                                  \
            return qm_rc_;                                                               \
    } while (0)

/* A where-expression. */
enum {
    QE_NUM = 1, QE_ARG, QE_VAR, QE_RET,   /* leaves */
    QE_NEG, QE_NOT,                       /* unary (a) */
    QE_LOAD,                              /* memory at address a, NUM bytes (1, 2, 4, 8) */
    QE_ADD, QE_SUB, QE_MUL, QE_DIV, QE_MOD, QE_SHL, QE_SHR, QE_AND, QE_OR, QE_XOR,
    QE_EQ, QE_NE, QE_LT, QE_LE, QE_GT, QE_GE, QE_LAND, QE_LOR,
    QE_TID,                               /* tid(): the calling thread's kernel id */
    QE_FIELD,                             /* argN->path: a = the QE_ARG, NAME the path
                                           * ("->len.x"), NUM the argument (0..5) */
};

typedef struct qm_expr {
    int op;
    int64_t num;           /* QE_NUM; QE_ARG: 0..5 */
    char *name;            /* QE_VAR; QE_FIELD: the path */
    qpt_field_t field;     /* QE_FIELD: resolved for the procedure being placed */
    unsigned line, col;    /* where it was written */
    unsigned depth;        /* of the tree under it: 1 for a leaf */
    struct qm_expr *a, *b;
    /* Copied from a constraint: the text and origin LINE:COL are of (its definition's,
     * owned by the set's qm_def_t); NULL: the metric's own. */
    const char *src, *origin;
} qm_expr_t;

/* Words a row of a metric of KIND takes in a block: a count 1; a value 2 (calls counted,
 * then the sum, max or min of the values); a timer 4 (depth, start, total, and the stack
 * pointer of a tail call under way: the caller's time ends when its callee returns). */
#define QM_ROW_WORDS(kind) ((kind) == QM_COUNT ? 1u : QM_IS_VALUED(kind) ? 2u : 4u)

/* Thread TID of PID's CPU time so far in ns (CLOCK_THREAD_CPUTIME_ID's clock, from
 * /proc), or -1 when it cannot be read (qm_results.c). */
int64_t qm_thread_cpu_ns(int pid, uint64_t tid);

/*
 * After a failed commit whose refused insertion is H in SPACE (qpt_commit_refused): the
 * metric that made it leaves that procedure out (its insertions there taken out, its
 * row "not measured", a NOTE with WHY), and with it every procedure whose pending tail
 * calls it was to stop. 0 when something was taken out (commit again), QPT_ENOTFOUND
 * when no metric of SET owns H.
 */
int qm_drop_refused(qm_set_t *set, qpt_space_t *s, qpt_space_t *space, qpt_handle_t h,
                    qm_note_fn note, void *arg, const char *why);

/* The text and origin an error at E of metric M names. */
#define QM_SRC(m, e) ((e)->src != NULL ? (e)->src : (m)->src)
#define QM_ORIGIN(m, e) ((e)->origin != NULL ? (e)->origin : (m)->origin)

/* The deepest expression (and the most nested parentheses and unary operators) the parser
 * takes: the parser recurses, and a snippet is at most 64 nodes deep (with a few above
 * the expression's). */
#define QM_MAX_DEPTH 48
/* The levels a memory read (*E, E[I], loadN) takes of those (one node, qpt_load_safe;
 * E[I] adds its address's). */
#define QM_LOAD_DEPTH 1

/* One procedure of a metric (a row when per procedure). */
typedef struct qm_proc {
    char *name;
    char *module;          /* QM_PER_MODULE: its source file (or "?") */
    int measured;
    int untimed;           /* placed: a shared timer's procedure with no exit, its calls
                            * counted at its entry, never timed (not caught up) */
    uint32_t index;        /* placed (not read from a layout): the procedure's number in
                            * its space, or UINT32_MAX (a call site's row) */
} qm_proc_t;

typedef struct qm_metric {
    char *name;
    char *origin;          /* for messages */
    char *src;             /* the text it was parsed from (for messages with a caret) */
    int kind;              /* QM_COUNT, QM_WALL, QM_CPU, QM_SUM... */
    int focus;             /* QM_PER_* */
    int by_thread;         /* per procedure (or module) per thread: a row per pair */
    qm_expr_t *value;      /* QM_SUM...: the expression summed, maxed... */
    char unit[16];         /* its `unit "..."` clause, or "" */
    int post;              /* 'post': counted at the returns (calls that returned) */
    int append;            /* 'append': after the other snippets at its points */
    int shared;            /* 'shared' (wall timers): one timer a row for the whole
                            * process, in shared words (qpt_timer_start; a 4th word
                            * counts the calls): the time some thread is inside, no
                            * per-thread state */
    unsigned shared_line, shared_col; /* ... where it was written */
    char *from;            /* per call site from(F): the sites are the calls made inside
                            * the procedures matching F, to those matching PATTERN (and
                            * through pointers: "*indirect"); NULL: the calls of PATTERN */
    unsigned from_line, from_col;
    size_t instance_of;    /* a library glob's metric placed in one library (qm_live):
                            * the glob's index + 1; 0 otherwise */
    char *pattern, *inside;
    unsigned pat_line, pat_col, in_line, in_col;
    qm_expr_t *where;
    qm_expr_t *key;        /* QM_PER_VALUE: a row per value of this */
    char *key_text;        /* ... as written (the rows' name) */
    uint64_t kvar;         /* QM_PER_VALUE: the counts by value (a keyed variable) */
    /* Placed by qm_insert (or read from a layout). */
    int per_thread;        /* VAR is a per-thread variable of STRIDE bytes a thread */
    qpt_cpu_var_t cpu;     /* cpu.ncpu > 0: VAR is a per-CPU variable (cpu.addr), a
                            * copy of the rows a CPU, added to without a lock and read
                            * summed (counts in a live process: qpt_alloc_per_cpu) */
    uint64_t var;
    uint64_t stride;
    uint64_t base;         /* the first row's word in a block (after the inside state) */
    qm_proc_t *procs;      /* the matching procedures */
    size_t nprocs;
    int state;             /* QM_PARSED, QM_ON, QM_OFF */
    qpt_handle_t *handles; /* QM_ON: its insertions (a process's: for qm_remove) */
    size_t nhandles;
    struct qm_tail_pair {  /* timers: a pending call of procedure FROM is stopped at the */
        uint32_t at, from; /* returns of procedure AT (a tail callee's) */
    } *tail_pairs;
    size_t ntail_pairs;
    int catch_up;          /* placed in a process, its timers not yet caught up with the
                            * calls under way (qm_catch_up) */
} qm_metric_t;

/* A named list of patterns (`list NAME = { P, Q };`) or a constraint
 * (`constraint NAME = EXPR;`), defined once in a set and used by its later metrics. */
typedef struct qm_def {
    char *name;
    char *patterns;        /* a list: its patterns joined by '\n' (a pattern has none) */
    qm_expr_t *expr;       /* a constraint */
    char *src, *origin;    /* the text it was defined in (its expression's positions) */
} qm_def_t;

struct qm_set {
    qm_metric_t *v;
    size_t n, cap;
    qm_def_t *defs;        /* lists and constraints, in order of definition */
    size_t ndefs;
    int placed;            /* a metric was placed (qm_insert) or read (qm_layout_load) */
    uint64_t id;           /* read from a layout: the rewrite's id (0: an older layout) */
    qm_hooks_t hooks;      /* a front end's (qm_set_hooks); zero: none */
    struct qm_memo *memo;  /* while a live placement lasts: the procedures matched by
                            * name, kept (qm_memo_new); NULL: each match scans */
    int cpu_said;          /* the note that counts are not per CPU was given */
};

/* The procedures matched by name, kept while a placement looks more than once. */
typedef struct qm_memo qm_memo_t;
qm_memo_t *qm_memo_new(void);
void qm_memo_free(qm_memo_t *memo);
/* Metric I's matches (qmc_matching) and call sites looked up into SET's memo, for its
 * placement in S. */
void qm_memo_warm(qm_set_t *set, size_t i, qpt_space_t *s);
/* How many times MEMO's placements scanned the procedures for a pattern. */
size_t qm_memo_scans(const qm_memo_t *memo);

void qm_expr_free(qm_expr_t *e);

/*
 * The space metric I is measured in: S, or for a pattern LIB:PROC whose module names a
 * shared library (has ".so" in it: "libc.so.6:malloc") the space of that library of S's
 * process (qpt_library: opened the first time, S's from then on). NULL with WHY when the
 * library cannot be (not loaded, S a file).
 */
qpt_space_t *qm_space(const qm_set_t *set, size_t i, qpt_space_t *s, char *why, size_t whylen);

/* Does metric I name a shared library's procedures (LIB:PROC)? */
int qm_is_library(const qm_set_t *set, size_t i);

/* Seconds of CLOCK_MONOTONIC. */
double qm_now(void);

/* The job rank of PID from its environment (Open MPI, PMI, PMIx, Slurm), or -1. */
long qm_rank_of(int pid);

/* Costs of the metrics of a live session (qm_cost.c). */
typedef struct qm_costs qm_costs_t;
qm_costs_t *qm_costs_new(void);
void qm_costs_free(qm_costs_t *c);
/* Stopped: call counters at the procedures of metrics [FIRST, n) (not committed). */
int qm_costs_count(qm_costs_t *c, const qm_set_t *set, size_t first, qpt_space_t *s, char *why,
                   size_t whylen);
/* ... of metric I alone (placed on its own, as a session following its process does). */
int qm_costs_count_one(qm_costs_t *c, const qm_set_t *set, size_t i, qpt_space_t *s,
                       char *why, size_t whylen);
/* Metric I's counters went with the program or library they were in: forgotten. */
void qm_costs_forget(qm_costs_t *c, size_t i);
/* After the commit that put metric I in (on its own): its observed costs start now
 * (no prediction). */
int qm_costs_start(qm_costs_t *c, const qm_set_t *set, size_t i, qpt_space_t *s, double cpn);
/* After the commit: the start of the sample window of metrics [FIRST, n). */
void qm_costs_mark(qm_costs_t *c, const qm_set_t *set, size_t first, qpt_space_t *s);
/* Stopped, after qm_insert: the predicted costs of metrics [FIRST, n) (SAMPLED: the
 * counters ran since qm_costs_mark; else none); the window of the observed ones starts. */
int qm_costs_predict(qm_costs_t *c, const qm_set_t *set, size_t first, qpt_space_t *s,
                     double cpn, int sampled);
double qm_costs_predicted(const qm_costs_t *c, size_t i);
/* Running: the observed costs since the last look. */
int qm_costs_observe(qm_costs_t *c, const qm_set_t *set, qpt_space_t *s, double cpn);
/* The metric modelled costliest (SIZE_MAX: none), and the total observed: the larger of
 * the modelled costs' sum and the largest measured slowdown. */
size_t qm_costs_worst(const qm_costs_t *c, const qm_set_t *set, double *total);
/* Running, between the looks of qm_costs_observe (their windows untouched): the metric
 * whose modelled cost since the last look (0.2 s at least) exceeds LIMIT the most
 * (SIZE_MAX: none), and that cost in *COST. */
size_t qm_costs_runaway(const qm_costs_t *c, const qm_set_t *set, qpt_space_t *s, double cpn,
                        double limit, double *cost);
/* Metric I's counters out (before the commit); their memory freed (after it). */
void qm_costs_remove(qm_costs_t *c, size_t i, qpt_space_t *s);
/* The cost counter H of SPACE taken out (a point the commit could not install): 0, or
 * QPT_ENOTFOUND when no metric's costs hold it. */
int qm_costs_drop(qm_costs_t *c, qpt_space_t *space, qpt_handle_t h);
void qm_costs_release(qm_costs_t *c, qpt_space_t *s);
/* The costs of the metrics in, *OUT malloc'ed; their number. */
size_t qm_costs_table(const qm_costs_t *c, const qm_set_t *set, qm_cost_t **out);

/* Free what M owns (M itself is an element of a set's array). */
void qm_metric_free(qm_metric_t *m);

/* WHY: "ORIGIN:LINE:COL: message", then line LINE of TEXT and a caret under COL.
 * Returns QP_EINVAL. */
int qm_error_at(const char *text, const char *origin, unsigned line, unsigned col,
                char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));


/*****************************************************************************
 * Compiling and placing metrics: what qm_compile.c, qm_place.c and qm_insert.c share
 * (qmc_: theirs; each commented at its definition)
 */

#define QMC_MAX_PER_THREAD (32u << 20) /* bytes of per-thread memory for one metric */

/* One qm_insert: the space, the notes, the insertions made, the timers' pending checks. */
typedef struct qmc_ctx {
    qpt_space_t *s;       /* the space of the metric placed (qm_space) */
    qm_note_fn note;
    void *arg;
    char *why;
    size_t whylen;
    qpt_handle_t *done;   /* insertions made by this call (taken back on failure) */
    qpt_space_t **dspace; /* ... and the space of each */
    size_t ndone, capdone;
    /* Timers: the returns of tail callees that end a row's pending call, by (row word,
     * procedure), each placed once a metric; the tail calls not followed. */
    struct tail_check {
        uint64_t w;
        uint32_t proc;
    } *chk;
    size_t nchk, capchk;
    size_t tail_unfollowed;
    /* Shared timers: the procedures with no exit, counted but not timed (the last one
     * placed was: untimed_last), and how many in the metric, the first one's name. */
    int untimed_last;
    size_t untimed;
    char untimed_first[128];
    const qm_set_t *set;  /* the set placed (its front end's hooks) */
    int *cpu_said;        /* the set's cpu_said (NULL: no note) */
    qm_memo_t *memo;      /* the procedures matched by name, kept (or NULL) */
    uint32_t *last_named; /* ... without one: the last names_procs array */
} qmc_ctx_t;

/* How qmc_matching() takes procedures that cannot take snippets: told in notes; taken all
 * the same (the callees of a timer per call site, timed at their sites). */
enum { QMC_MATCH_NOTE = 1, QMC_MATCH_ANY = 2 };

/* qm_compile.c */
/* The call sites of metric M in C's space kept in C's memo (*N; NULL: none kept), and
 * V (N of them, malloc'ed: the memo's from then on) kept there: 0, or QPT_ENOMEM (V
 * freed). */
struct site;
struct site *qmc_memo_sites(qmc_ctx_t *c, const qm_metric_t *m, size_t *n);
int qmc_memo_keep_sites(qmc_ctx_t *c, const qm_metric_t *m, struct site *v, size_t n);
int qmc_at_returns(const qm_metric_t *m);
int qmc_check_expr(qmc_ctx_t *c, const qm_metric_t *m, const qm_expr_t *e);
qpt_expr_t qmc_compile_expr(qmc_ctx_t *c, qpt_snippet_t *sn, const qm_expr_t *e);
qpt_expr_t qmc_inside_cond(qpt_snippet_t *sn, const qm_metric_t *m);
const char *qmc_lib_sep(const char *pattern);
int qmc_list_in_one_space(const char *pattern);
uint32_t *qmc_matching(qmc_ctx_t *c, const qm_metric_t *m, const char *pattern, size_t *n,
                       size_t *nrefused, int flags);
void qmc_notef(qmc_ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int qmc_per_cpu(qmc_ctx_t *c, qm_metric_t *m, uint64_t bytes);
qpt_point_t *qmc_points_of(qmc_ctx_t *c, uint32_t p, uint32_t kind, size_t *n);
const char *qmc_proc_pattern(const char *pattern);
int qmc_put(qmc_ctx_t *c, const qpt_point_t *pt, qpt_snippet_t *sn, qpt_expr_t e,
            int first);
void qmc_refusal(qmc_ctx_t *c, const qm_metric_t *m, const char *what, const char *proc,
                 const char *why);
int qmc_resolve_metric_fields(qmc_ctx_t *c, uint32_t p, qm_metric_t *m, char *why,
                              size_t whylen);
void qmc_returns_only(qmc_ctx_t *c, qpt_point_t *v, size_t *n);
uint64_t qmc_row_words(const qm_metric_t *m);
qpt_space_t *qmc_space_of(const qm_set_t *set, const qm_metric_t *m, qpt_space_t *s);
qpt_expr_t qmc_tally(qmc_ctx_t *c, qpt_snippet_t *sn, const qm_metric_t *m, uint64_t w);
qpt_expr_t qmc_tload(qpt_snippet_t *sn, const qm_metric_t *m, uint64_t k);
qpt_expr_t qmc_tword(qpt_snippet_t *sn, const qm_metric_t *m, uint64_t k);
void qmc_undo_to(qmc_ctx_t *c, size_t mark);
int qmc_uses(const qm_expr_t *e, int op, const qm_expr_t **at);

/* qm_place.c */
int qmc_check_metric(qmc_ctx_t *c, qm_metric_t *m);
void qmc_memo_warm(qmc_ctx_t *c, const qm_metric_t *m);
int qmc_matches_nothing(qmc_ctx_t *c, qm_metric_t *m, int *rc);
int qmc_place_metric(qmc_ctx_t *c, qm_metric_t *m);


/*****************************************************************************
 * The live session: what qm_live.c, qm_live_follow.c and qm_live_steer.c share
 * (qml_: theirs; each commented at its definition)
 */

/* One qm_live_run: the set, the process, its replies, samples and what it follows. */
typedef struct qml_live {
    qm_set_t *set;
    const qm_live_opts_t *o;
    qm_live_report_t *rep;
    qpt_space_t *s;
    double start, cpn;
    qm_costs_t *costs;       /* what each metric costs */
    qpt_hist_t **hist;       /* per metric: its total over time (with hist_buckets) */
    size_t nhist;
    qm_threads_t *threads;   /* the ids and names of the threads of per-thread rows */
    char buf[8192];          /* a command line being read */
    size_t nbuf;
    int eof, quit;
    qm_row_t *prev;          /* the rows of the last sample (timers never read lower) */
    size_t nprev;
    /* Following the process (qpt_watch): libraries loaded later, execs, forks. */
    int watching;            /* its events are followed */
    int told_unguarded;      /* the notes said of qpt_watch_unguarded: 1 the int3, 2 no
                              * MADV_WIPEONFORK (bits) */
    qm_row_t *carry;         /* rows of libraries unloaded (dlclose) in this image: added
                              * to the same rows if they are loaded again */
    size_t ncarry;
    qm_row_t *apart;         /* rows of earlier images (before an exec), named PROG[N]: */
    size_t napart;
    size_t image;            /* execs so far */
    size_t unloads;          /* libraries unloaded (dlclose) with metrics in, so far */
    char prog[256];          /* the base name of the program the process runs */
    uint8_t *placed;         /* per metric: placed at least once (a library was loaded) */
    size_t nplaced;
    unsigned forks_counted, forks_apart; /* children counted with it, and not */
} qml_live_t;

/* qm_live.c */
int qml_append_rows(qm_row_t **v, size_t *nv, const qm_row_t *rows, size_t n);
int qml_event(qml_live_t *l, qm_live_event_t *ev);
int qml_merge_carry(qml_live_t *l, qm_row_t **rows, size_t *n);
uint8_t *qml_on_now(qml_live_t *l);
int qml_place(qml_live_t *l, size_t first, int stopped, int predict, double *stop_ms,
              unsigned *refused, char *why, size_t whylen);
void qml_placed_event(qml_live_t *l, int kind, const char *name, const uint8_t *was,
                      size_t nm, double ms);
int qml_read_words(void *arg, uint64_t addr, uint64_t *w, size_t n);
void qml_reply(qml_live_t *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void qml_reply_lines(qml_live_t *l, const char *text);
int qml_sample(qml_live_t *l, char *why, size_t whylen);
void qml_say(qml_live_t *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A warning for the user in every mode: a note (standard error) even when steering. */
void qml_warn(qml_live_t *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The warning for a forked child left stopped (QPT_EV_FORK's child_counted -1, or
 * qpt_children_left_stopped after the close): what its user runs. */
void qml_warn_left_stopped(qml_live_t *l, int child);
/* ... N more whose pids were lost (qpt_children_left_stopped_unnamed); none: silent. */
void qml_warn_unnamed_left_stopped(qml_live_t *l, size_t n);
int qml_set_up_remove(qml_live_t *l, void *arg, char *why, size_t whylen);
int qml_steer(qml_live_t *l,
              int (*set_up)(qml_live_t *l, void *arg, char *why, size_t whylen),
              void *arg, double *ms, char *why, size_t whylen);

/* qm_live_follow.c */
void qml_follow(qml_live_t *l, double secs);
void qml_followed_notes(qml_live_t *l);
void qml_instances_loaded(qml_live_t *l, size_t first, int wait);
void qml_mark_placed(qml_live_t *l, size_t i);
void qml_start_following(qml_live_t *l);
void qml_wait_for_libraries(qml_live_t *l, size_t first);

/* qm_live_steer.c */
void qml_commands(qml_live_t *l, double secs);

#endif
