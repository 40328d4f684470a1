/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * A live metrics session on libqpt's public API: attach or start, insert in one stop,
 * run, sample, read the final table, take everything out. The process is stopped only
 * while the snippets go in (its executable is analysed before: qpt_attach does it while
 * the process runs). This file: the session, its rows (what went away included), its
 * samples and budget; qm_live_follow.c follows the process (libraries, execs, forks,
 * library globs), qm_live_steer.c answers its commands (what they share: qm_priv.h,
 * qml_).
 */
#include "config.h"

#include <errno.h>
#include <fnmatch.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "metrics/qm_priv.h"

static void
nap(double secs)
{
    if (secs <= 0)
        return;
    struct timespec ts = { (time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9) };
    nanosleep(&ts, NULL);
}

int
qml_read_words(void *arg, uint64_t addr, uint64_t *w, size_t n)
{
    return qpt_read_memory(arg, addr, w, 8 * n);
}

/* Is the attached process PID still there? */
static int
alive(int pid)
{
    return kill(pid, 0) == 0 || errno == EPERM;
}

/*****************************************************************************
 * Rows of what went away: libraries unloaded, earlier images
 */

/* ROWS (N) after *V (*NV). */
int
qml_append_rows(qm_row_t **v, size_t *nv, const qm_row_t *rows, size_t n)
{
    qm_row_t *w = realloc(*v, (*nv + n + 1) * sizeof(qm_row_t));
    if (w == NULL)
        return QPT_ENOMEM;
    memcpy(w + *nv, rows, n * sizeof(qm_row_t));
    *v = w;
    *nv += n;
    return 0;
}

/* Add C (a row of a library before its dlclose) into R, the same metric and focus now:
 * 0, or -1 when the two cannot be combined (averages: on_unload names them apart). */
static int
combine(qm_row_t *r, const qm_row_t *c)
{
    if (c->empty)
        return 0;
    switch (r->kind) {
    case QM_AVG:
        return r->empty ? (*r = *c, 0) : -1;
    case QM_MAX:
        r->value = r->empty || (int64_t)c->value > (int64_t)r->value ? c->value : r->value;
        break;
    case QM_MIN:
        r->value = r->empty || (int64_t)c->value < (int64_t)r->value ? c->value : r->value;
        break;
    default: /* counts, times and sums add up */
        r->value += c->value;
        r->calls += c->calls; /* (a shared timer's) */
        break;
    }
    r->empty = 0;
    r->measured |= c->measured;
    return 0;
}

/* The rows of libraries unloaded, into *ROWS (*N): added to the same metric's row of
 * the same focus, or a row of their own. */
int
qml_merge_carry(qml_live_t *l, qm_row_t **rows, size_t *n)
{
    for (size_t k = 0; k < l->ncarry; k++) {
        const qm_row_t *c = &l->carry[k];
        size_t r = 0;
        while (r < *n && ((*rows)[r].metric != c->metric
                          || strcmp((*rows)[r].focus, c->focus) != 0))
            r++;
        if (r < *n && combine(&(*rows)[r], c) == 0)
            continue;
        QM_CHECK(qml_append_rows(rows, n, c, 1));
    }
    return 0;
}

/* A row's place when sorting: its metric, then where it was (a stable sort). */
typedef struct place_key {
    size_t metric, at;
} place_key_t;

static int
by_metric(const void *a, const void *b)
{
    const place_key_t *x = a, *y = b;
    if (x->metric != y->metric)
        return x->metric < y->metric ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* ROWS (N) in the order of their metrics, each metric's rows in the order they have. */
static int
sort_by_metric(qm_row_t *rows, size_t n)
{
    place_key_t *k = malloc((n + 1) * sizeof(place_key_t));
    qm_row_t *v = malloc((n + 1) * sizeof(qm_row_t));
    if (k == NULL || v == NULL) {
        free(k);
        free(v);
        return QPT_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        k[i] = (place_key_t) { rows[i].metric, i };
    qsort(k, n, sizeof(place_key_t), by_metric);
    for (size_t i = 0; i < n; i++)
        v[i] = rows[k[i].at];
    memcpy(rows, v, n * sizeof(qm_row_t));
    free(k);
    free(v);
    return 0;
}

/* The rows of earlier images before *ROWS (*N), each with its metric's. */
static int
with_apart(qml_live_t *l, qm_row_t **rows, size_t *n)
{
    if (l->napart == 0)
        return 0;
    qm_row_t *all = NULL;
    size_t nall = 0;
    QM_CHECK(qml_append_rows(&all, &nall, l->apart, l->napart));
    if (qml_append_rows(&all, &nall, *rows, *n) < 0 || sort_by_metric(all, nall) < 0) {
        free(all);
        return QPT_ENOMEM;
    }
    free(*rows);
    *rows = all;
    *n = nall;
    return 0;
}

/*
 * The table now into *ROWS (*N): while the process runs, the timers with the running
 * part of active calls (seed 001, section 3.3), never lower than at the last sample.
 */
static int
results(qml_live_t *l, qm_row_t **rows, size_t *n, char *why, size_t whylen)
{
    int pid = l->rep->ended ? 0 : l->rep->pid;
    int rc = qm_results_running(
        l->set, qml_read_words, l->s, l->cpn, pid, rows, n, why, whylen);
    if (rc < 0)
        return rc;
    if ((rc = qml_merge_carry(l, rows, n)) < 0
        || (l->ncarry > 0 && (rc = sort_by_metric(*rows, *n)) < 0)) {
        free(*rows);
        return rc;
    }
    qm_rows_keep_larger(*rows, *n, l->prev, l->nprev);
    qm_row_t *keep = malloc((*n ? *n : 1) * sizeof(qm_row_t));
    if (keep != NULL) {
        memcpy(keep, *rows, *n * sizeof(qm_row_t));
        free(l->prev);
        l->prev = keep;
        l->nprev = *n;
    }
    return 0;
}

void
qml_reply(qml_live_t *l, const char *fmt, ...)
{
    if (l->o->on_reply == NULL)
        return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    l->o->on_reply(l->o->arg, line);
}

/* LINE as an answer when ANSWER and steering, else as a note (when there is none, an
 * answer). */
static void
say_line(qml_live_t *l, int answer, const char *line)
{
    if (answer && l->o->commands && l->o->on_reply != NULL)
        l->o->on_reply(l->o->arg, line);
    else if (l->o->note != NULL)
        l->o->note(l->o->note_arg, line);
    else if (l->o->on_reply != NULL)
        l->o->on_reply(l->o->arg, line);
}

static void __attribute__((format(printf, 3, 0)))
say_fmt(qml_live_t *l, int reply, const char *fmt, va_list ap)
{
    char line[2048];
    vsnprintf(line, sizeof(line), fmt, ap);
    say_line(l, reply, line);
}

/* A message of the session's own (a metric taken out): an answer when steering, else a
 * note. */
void
qml_say(qml_live_t *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say_fmt(l, 1, fmt, ap);
    va_end(ap);
}

void
qml_warn(qml_live_t *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say_fmt(l, 0, fmt, ap);
    va_end(ap);
}

/* EV (its kind and fields set) to the front end's on_event: 1, or 0 when there is none
 * (the session then says it itself). */
int
qml_event(qml_live_t *l, qm_live_event_t *ev)
{
    if (l->o->on_event == NULL)
        return 0;
    ev->pid = l->rep->pid;
    l->o->on_event(l->o->arg, ev);
    return 1;
}

/* The metrics ON now that were not in PLACED's copy WAS (NM, may be NULL: none were),
 * into a PLACED event of KIND (library NAME) that stopped the process MS. */
void
qml_placed_event(
    qml_live_t *l, int kind, const char *name, const uint8_t *was, size_t nm, double ms)
{
    size_t n = qm_count(l->set);
    uint8_t *v = calloc(n + 1, 1);
    if (v == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        v[i] = qm_state(l->set, i) == QM_ON && (was == NULL || i >= nm || !was[i]);
    qm_live_event_t ev = { .kind = kind, .name = name, .stop_ms = ms, .placed = v,
                           .nmetrics = n };
    qml_event(l, &ev);
    free(v);
}

/* Which metrics are in now (per metric, 1: QM_ON), malloc'ed; NULL when out of memory. */
uint8_t *
qml_on_now(qml_live_t *l)
{
    size_t n = qm_count(l->set);
    uint8_t *v = calloc(n + 1, 1);
    for (size_t i = 0; v != NULL && i < n; i++)
        v[i] = qm_state(l->set, i) == QM_ON;
    return v;
}

/* A multi-line message (a parse error with its caret), a line at a time. */
void
qml_reply_lines(qml_live_t *l, const char *text)
{
    while (*text != '\0') {
        const char *nl = strchr(text, '\n');
        int n = nl ? (int)(nl - text) : (int)strlen(text);
        qml_reply(l, "%.*s", n, text);
        text += n + (nl != NULL);
    }
}

/* Stop the process, apply what the set says (SET_UP), commit, let it go; the ms stopped. */
int
qml_steer(qml_live_t *l,
    int (*set_up)(qml_live_t *l, void *arg, char *why, size_t whylen), void *arg,
    double *ms, char *why, size_t whylen)
{
    double t0 = qm_now();
    int rc = qpt_stop(l->s);
    if (rc < 0) {
        snprintf(why, whylen, "%s", qpt_error(l->s));
        return rc;
    }
    if ((rc = set_up(l, arg, why, whylen)) == 0 && (rc = qpt_commit(l->s)) < 0)
        snprintf(why, whylen, "%s", qpt_error(l->s));
    int r2 = qpt_run(l->s);
    *ms = (qm_now() - t0) * 1e3;
    if (rc == 0 && r2 < 0) {
        snprintf(why, whylen, "%s", qpt_error(l->s));
        rc = r2;
    }
    return rc;
}

int
qml_set_up_remove(qml_live_t *l, void *arg, char *why, size_t whylen)
{
    size_t i = *(size_t *)arg;
    int rc = qm_remove(l->set, i, l->s, why, whylen);
    if (rc == 0)
        qm_costs_remove(l->costs, i, l->s);
    return rc;
}

/* The spaces of the libraries metrics [FIRST, n) name, opened (qm_space): read and
 * analysed while the process runs, rather than in the stop that follows. */
static int
open_libraries(qml_live_t *l, size_t first, char *why, size_t whylen)
{
    for (size_t i = first; i < qm_count(l->set); i++)
        if (qm_state(l->set, i) == QM_PARSED && qm_is_library(l->set, i)
            && qm_space(l->set, i, l->s, why, whylen) == NULL)
            return QPT_ENOTFOUND;
    return 0;
}

/* Does some metric of SET name a shared library's procedures? */
static int
any_library(const qm_set_t *set)
{
    for (size_t i = 0; i < qm_count(set); i++)
        if (qm_is_library(set, i))
            return 1;
    return 0;
}

/*
 * Put the metrics [FIRST, n) in. First the call counters of their procedures; with
 * PREDICT, a stop for them alone, SAMPLE seconds of running, and a second stop in which
 * the metrics go in with their predicted costs (one over --max-overhead, with what the
 * others are observed to cost, is taken back). STOPPED: the process is stopped already.
 * *STOP_MS: the last stop. Nothing of the metrics stays on failure; *REFUSED: how many
 * the budget kept out.
 */
int
qml_place(qml_live_t *l, size_t first, int stopped, int predict, double *stop_ms,
    unsigned *refused, char *why, size_t whylen)
{
    qpt_space_t *s = l->s;
    qml_instances_loaded(l, first, 0); /* (before N: they go in with the others) */
    size_t n = qm_count(l->set);
    *refused = 0;
    *stop_ms = 0;
    qml_wait_for_libraries(l, first);
    if (!stopped) {
        int lrc = open_libraries(l, first, why, whylen);
        if (lrc < 0)
            return lrc;
    }
    /* The procedures each metric names, matched before the process stops (a scan of
     * every procedure's names each: 80 ms of a 200 ms stop for 22 timers in a postgres
     * backend), and the call sites of those per call site (--calls-from: in the stop,
     * 37M of its 40M instructions); the stop then looks them up. */
    qm_memo_t *memo = qm_memo_new();
    l->set->memo = memo;
    for (size_t i = first; memo != NULL && i < n; i++) {
        uint32_t *procs;
        size_t np;
        if (qm_state(l->set, i) == QM_PARSED && qm_metric_procs(l->set, i, s, &procs, &np) == 0) {
            free(procs);
            qm_memo_warm(l->set, i, s);
        }
    }
    double t0 = qm_now(), counters_ms = 0;
    int rc = stopped ? 0 : qpt_stop(s);
    if (l->o->no_costs)
        predict = 0;
    if (rc == 0 && !l->o->no_costs
        && (rc = qm_costs_count(l->costs, l->set, first, s, why, whylen)) == 0 && predict) {
        if ((rc = qpt_commit(s)) == 0 && (rc = qpt_run(s)) == 0) {
            counters_ms = (qm_now() - t0) * 1e3; /* (the first stop counts too) */
            qm_costs_mark(l->costs, l->set, first, s);
            nap(l->o->sample > 0 ? l->o->sample : 0.2);
            t0 = qm_now();
            rc = qpt_stop(s);
        }
    }
    if (rc < 0 && why[0] == '\0')
        snprintf(why, whylen, "%s", qpt_error(s));
    if (rc == 0)
        rc = qm_insert(l->set, s, l->o->note, l->o->note_arg, why, whylen);
    if (rc == 0)
        rc = qm_costs_predict(l->costs, l->set, first, s, l->cpn, predict);
    if (rc == 0 && predict && l->o->max_overhead > 0) {
        double others;
        qm_costs_worst(l->costs, l->set, &others);
        for (size_t i = first; i < n; i++) {
            double p = qm_costs_predicted(l->costs, i);
            if (qm_state(l->set, i) != QM_ON || p < 0)
                continue;
            if (others + p > l->o->max_overhead) {
                qml_say(l,
                    "#%zu %s not inserted: predicted cost %.2f%% (with the others' "
                    "%.2f%%) "
                    "exceeds --max-overhead %.2f%%",
                    i + 1, qm_name(l->set, i), p, others, l->o->max_overhead);
                qm_take_back(l->set, i, s);
                qm_costs_remove(l->costs, i, s);
                (*refused)++;
            } else
                others += p;
        }
    }
    if (rc < 0) {
        for (size_t i = first; i < n; i++) {
            if (qm_state(l->set, i) == QM_ON)
                qm_take_back(l->set, i, s);
            qm_costs_remove(l->costs, i, s);
        }
    }
    int rc2 = qpt_commit(s);
    /* A point the commit could not install (its padding taken by the others): that
     * procedure left out, with a note, and the rest committed again. A point refused
     * only because a thread was inside its bytes at that instant (a tight loop through
     * them) is tried again first, the process let run for a moment in between, unless
     * it was stopped when this began (it must not run before its metrics are in). */
    int moments = stopped ? 0 : 10, moment = 0; /* about 0.1 s in all */
    for (int tries = 0; rc == 0 && rc2 < 0 && tries < 256; tries++) {
        qpt_space_t *where;
        qpt_handle_t h;
        char msg[600];
        snprintf(msg, sizeof(msg), "%s", qpt_error(s));
        char *tail = strstr(msg, " (nothing changed)");
        if (tail != NULL)
            *tail = '\0';
        if (moments > 0 && strstr(msg, "a thread is inside") != NULL) {
            moments--;
            if (qpt_run(s) < 0)
                break;
            /* longer and longer: a loop through them may run a while between calls */
            moment++;
            nap(0.002 * moment);
            if ((rc2 = qpt_stop(s)) < 0)
                break;
            rc2 = qpt_commit(s);
            continue;
        }
        if (qpt_commit_refused(s, &where, &h) != 0)
            break;
        int by_metric = qm_drop_refused(l->set, s, where, h, l->o->note, l->o->note_arg, msg);
        if (qm_costs_drop(l->costs, where, h) != 0 && by_metric != 0)
            break;
        rc2 = qpt_commit(s);
    }
    if (rc == 0 && rc2 < 0) {
        snprintf(why, whylen, "%s", qpt_error(s));
        rc = rc2;
        /* All or nothing: taken out again. */
        for (size_t i = first; i < n; i++) {
            if (qm_state(l->set, i) == QM_ON)
                qm_take_back(l->set, i, s);
            qm_costs_remove(l->costs, i, s);
        }
        qpt_commit(s);
    }
    /* The timers' calls under way now, taken up while the process is still stopped (a
     * failure to read the stacks leaves them to their next calls). */
    if (rc == 0)
        qm_catch_up(l->set, s, l->o->note, l->o->note_arg);
    /* A process that was stopped when this began and whose metrics failed stays
     * stopped: the caller ends a command it started (qpt_kill) before its code runs, or
     * lets an attached one go when it closes the space. */
    rc2 = rc < 0 && stopped ? 0 : qpt_run(s);
    *stop_ms = counters_ms + (qm_now() - t0) * 1e3;
    l->set->memo = NULL;
    qm_memo_free(memo);
    qm_costs_release(l->costs, s);
    if (rc == 0 && rc2 < 0) {
        snprintf(why, whylen, "%s", qpt_error(s));
        rc = rc2;
    }
    return rc;
}

/* Each metric's total now into its histogram (made when the metric is first seen in). */
static void
hist_sample(qml_live_t *l)
{
    qm_row_t *rows;
    size_t n, nm = qm_count(l->set);
    char why[256];
    double t = qm_now();
    if (results(l, &rows, &n, why, sizeof(why)) < 0)
        return;
    if (with_apart(l, &rows, &n) < 0) {
        free(rows);
        return;
    }
    if (nm > l->nhist) {
        qpt_hist_t **v = realloc(l->hist, nm * sizeof(qpt_hist_t *));
        if (v == NULL) {
            free(rows);
            return;
        }
        memset(v + l->nhist, 0, (nm - l->nhist) * sizeof(qpt_hist_t *));
        l->hist = v;
        l->nhist = nm;
    }
    for (size_t i = 0; i < nm; i++) {
        if (qm_state(l->set, i) != QM_ON)
            continue;
        uint64_t total = 0;
        for (size_t r = 0; r < n; r++)
            if (rows[r].metric == i)
                total += rows[r].value;
        if (l->hist[i] == NULL
            && qpt_hist_create(1, l->o->hist_buckets, l->o->hist_width, l->start, &l->hist[i])
                   < 0)
            continue;
        qpt_hist_add(l->hist[i], t, &total);
    }
    free(rows);
}

void
qm_live_report_free(qm_live_report_t *rep)
{
    if (rep == NULL)
        return;
    free(rep->rows);
    free(rep->costs);
    for (size_t i = 0; i < rep->nhist; i++)
        qpt_hist_destroy(rep->hist[i]);
    free(rep->hist);
    rep->rows = NULL;
    rep->costs = NULL;
    rep->hist = NULL;
    rep->nrows = rep->ncosts = rep->nhist = 0;
}

/* The table and the costs now, to on_sample: its answer (nonzero: enough), or < 0. */
int
qml_sample(qml_live_t *l, char *why, size_t whylen)
{
    qm_row_t *rows;
    size_t n;
    int rc = results(l, &rows, &n, why, whylen);
    if (rc < 0)
        return rc;
    qm_symbolize(l->s, rows, n);
    qm_threads_apply(l->threads, rows, n);
    if ((rc = with_apart(l, &rows, &n)) < 0) {
        free(rows);
        return rc;
    }
    qm_costs_observe(l->costs, l->set, l->s, l->cpn);
    qm_cost_t *costs = NULL;
    size_t nc = qm_costs_table(l->costs, l->set, &costs);
    int enough = l->o->on_sample ? l->o->on_sample(l->o->arg, l->set, rows, n, costs, nc,
                                                   qm_now() - l->start)
                                 : 0;
    free(rows);
    free(costs);
    return enough;
}

static void
take_out_over_budget(qml_live_t *l, size_t worst, double cost, const char *whose);

/* --max-overhead while running: the costliest metric out when the total observed is over
 * the budget. */
static void
enforce(qml_live_t *l)
{
    double total;
    qm_costs_observe(l->costs, l->set, l->s, l->cpn);
    size_t worst = qm_costs_worst(l->costs, l->set, &total);
    if (worst == SIZE_MAX || total <= l->o->max_overhead)
        return;
    take_out_over_budget(l, worst, total, "in all");
}

/* Between those checks (a second apart: a window long enough to be steady), a metric
 * whose modelled cost alone is RUNAWAY times the budget goes at once: one predicted
 * cheap while the program waited (no calls in the sample) may cost several times the
 * program's own time once it works again (the search's lock timers in a postgres
 * backend: 300%). */
enum { RUNAWAY = 4 };

static void
runaway(qml_live_t *l)
{
    double cost;
    size_t worst = qm_costs_runaway(l->costs, l->set, l->s, l->cpn,
                                    RUNAWAY * l->o->max_overhead, &cost);
    if (worst != SIZE_MAX)
        take_out_over_budget(l, worst, cost, "alone");
}

static void
take_out_over_budget(qml_live_t *l, size_t worst, double cost, const char *whose)
{
    char why[512] = "";
    double ms;
    if (qml_steer(l, qml_set_up_remove, &worst, &ms, why, sizeof(why)) < 0) {
        qml_say(l, "#%zu %s: %s", worst + 1, qm_name(l->set, worst), why);
        return;
    }
    qm_release(l->set, l->s);
    qm_costs_release(l->costs, l->s);
    l->rep->removed++;
    qml_say(l, "removed #%zu %s: observed cost %.2f%% %s exceeds --max-overhead %.2f%% "
        "(stopped %.1f ms)", worst + 1, qm_name(l->set, worst), cost, whose, l->o->max_overhead,
        ms);
}

int
qm_live_run(qm_set_t *set, const qm_live_opts_t *o, qm_live_report_t *rep, char *why,
            size_t whylen)
{
    memset(rep, 0, sizeof(*rep));
    if (set == NULL || o == NULL || (o->pid <= 0 && (o->argv == NULL || o->argv[0] == NULL)))
        return QPT_EINVAL;
    qpt_space_t *s = NULL;
    int rc = o->pid > 0 ? qpt_attach(o->pid, &s, why, whylen) : qpt_spawn(o->argv, &s, why, whylen);
    if (rc < 0)
        return rc;
    rep->pid = qpt_pid(s);
    if (o->relocate)
        qpt_set_relocate(s, 1);
    double cpn = qm_cycles_per_ns();
    qml_live_t l = { 0 };
    l.set = set;
    l.o = o;
    l.rep = rep;
    l.s = s;
    l.cpn = cpn;
    l.costs = qm_costs_new();
    l.threads = qm_threads_new(s);
    int histo = o->hist_buckets >= 2 && o->hist_buckets % 2 == 0 && o->hist_width > 0;
    if (l.costs == NULL) {
        qpt_kill(s);
        return QPT_ENOMEM;
    }
    if (qm_count(set) == 0 && !o->commands) {
        snprintf(why, whylen, "no metric to measure");
        qm_costs_free(l.costs);
        qm_threads_free(l.threads);
        qpt_kill(s);
        return QPT_EINVAL;
    }
    /* Its libraries loaded later, its execs and forks are followed (a process started
     * here is let run to its entry point: its libraries are loaded then). */
    qml_start_following(&l);
    /* Attached: the process runs, so its calls can be sampled first; a process started
     * here has not run yet (no prediction, the observed costs only). */
    unsigned refused = 0;
    if (qm_count(set) > 0) {
        why[0] = '\0';
        /* Attached: the libraries named are analysed while it runs again. (A process
         * started here stays at its execve: qpt_library runs it to its entry.) */
        int stopped = 1;
        if (o->pid > 0 && any_library(set)) {
            if ((rc = qpt_run(s)) < 0)
                snprintf(why, whylen, "%s", qpt_error(s));
            stopped = 0;
        }
        if (rc == 0)
            rc = qml_place(
                &l, 0, stopped, o->pid > 0, &rep->stop_ms, &refused, why, whylen);
    } else if ((rc = qpt_run(s)) < 0)
        snprintf(why, whylen, "%s", qpt_error(s));
    if (rc == 0 && o->on_event != NULL && !o->commands) {
        /* A front end's lenient metrics: none in, none waiting for a library. */
        size_t live = 0;
        for (size_t i = 0; i < qm_count(set); i++)
            live += qm_state(set, i) == QM_ON || qm_state(set, i) == QM_WAITING;
        if (live == 0) {
            snprintf(why, whylen, "nothing to measure");
            rc = QPT_ENOTFOUND;
        }
    }
    if (rc == 0 && qm_count(set) > 0 && refused == qm_count(set) && !o->commands) {
        snprintf(why, whylen, "no metric within --max-overhead %.2f%%", o->max_overhead);
        rc = QPT_EINVAL;
    }
    if (rc < 0) {
        char msg[2048];
        snprintf(msg, sizeof(msg), "%d: %s", rep->pid, why);
        snprintf(why, whylen, "%s", msg);
        qm_costs_free(l.costs);
        qm_threads_free(l.threads);
        free(l.placed);
        qpt_kill(s); /* a command whose metrics are refused is not run */
        return rc;
    }
    for (size_t i = 0; i < qm_count(set); i++)
        if (qm_state(set, i) == QM_ON)
            qml_mark_placed(&l, i);
    if (o->on_event != NULL && qm_count(set) > 0)
        qml_placed_event(&l, QM_EV_PLACED, NULL, NULL, 0, rep->stop_ms);
    if (o->on_ready != NULL)
        o->on_ready(o->arg, rep->pid, rep->stop_ms);
    double start = qm_now(), next = o->interval > 0 ? start + o->interval : 0;
    double next_check = o->max_overhead > 0 ? start + 1 : 0;
    double next_runaway = o->max_overhead > 0 ? start + 0.25 : 0;
    /* The histograms are fed once a bucket, in its middle: each bucket then holds what
     * was counted over one bucket's time (from the middle of the one before). */
    double hist_step = histo ? o->hist_width : 0;
    double next_hist = histo ? start + hist_step / 2 : 0;
    l.start = start;
    if (o->commands && o->on_reply != NULL)
        o->on_reply(o->arg, NULL);
    for (;;) {
        if ((o->stop != NULL && *o->stop) || l.quit || l.eof || rep->ended)
            break;
        double t = qm_now();
        if (o->duration > 0 && t - start >= o->duration)
            break;
        if (o->pid <= 0 ? qpt_ended(s, &rep->status) == 1 : !alive(rep->pid)) {
            rep->ended = 1;
            break;
        }
        if (next > 0 && t >= next) {
            if (o->on_sample != NULL && qml_sample(&l, why, whylen) > 0)
                break;
            /* Past samples are not made up for: a command that stopped the process
             * longer than an interval must not leave NEXT behind (a negative wait). */
            while (next <= qm_now())
                next += o->interval;
        }
        if (next_hist > 0 && t >= next_hist) {
            hist_sample(&l);
            /* The width doubles as buckets fold: one sample a bucket still. */
            for (size_t i = 0; i < l.nhist; i++)
                if (qpt_hist_width(l.hist[i]) > hist_step)
                    hist_step = qpt_hist_width(l.hist[i]);
            while (next_hist <= t)
                next_hist += hist_step;
        }
        if (next_check > 0 && t >= next_check) {
            enforce(&l); /* each second: a window long enough to be steady */
            next_check += 1;
        } else if (next_runaway > 0 && t >= next_runaway) {
            runaway(&l);
            next_runaway = t + 0.25;
        }
        /* A thread's id is learnt while it lives (a short one may live 20 ms). */
        qm_threads_learn(l.threads, set, qml_read_words, s);
        double until = 0.02;
        if (next > 0 && next - t < until)
            until = next - t;
        if (next_hist > 0 && next_hist - t < until)
            until = next_hist - t;
        if (until < 0)
            until = 0;
        /* Followed, its events are waited for (each handled at once); the commands'
         * input is looked at between. */
        if (o->commands)
            qml_commands(&l, l.watching ? 0 : until);
        if (l.watching)
            qml_follow(&l, until);
        else if (!o->commands)
            nap(until);
    }
    qml_followed_notes(&l);
    rep->secs = qm_now() - start;
    if (histo)
        hist_sample(&l); /* also after the end: the variables are shared */
    rep->hist = l.hist;
    rep->nhist = l.nhist;
    rc = results(&l, &rep->rows, &rep->nrows, why, whylen);
    free(l.prev);
    free(l.carry);
    free(l.placed);
    if (rc == 0) {
        qm_symbolize(s, rep->rows, rep->nrows);
        qm_threads_apply(l.threads, rep->rows, rep->nrows);
        rc = with_apart(&l, &rep->rows, &rep->nrows);
    }
    qm_threads_free(l.threads);
    if (!rep->ended) {
        qm_costs_observe(l.costs, set, s, cpn);
        rep->ncosts = qm_costs_table(l.costs, set, &rep->costs);
    }
    qm_costs_free(l.costs);
    free(l.apart);
    double t_close = qm_now();
    int gone = rep->ended;
    qpt_close(s); /* the snippets out, the process let go */
    int kids[16];
    for (size_t n; (n = qpt_children_left_stopped(kids, 16)) > 0;)
        for (size_t k = 0; k < n; k++)
            qml_warn_left_stopped(&l, kids[k]);
    qml_warn_unnamed_left_stopped(&l, qpt_children_left_stopped_unnamed());
    qm_live_event_t ev = { .kind = QM_EV_REMOVED, .pid = rep->pid,
                           .stop_ms = (qm_now() - t_close) * 1e3 };
    if (!gone && o->on_event != NULL)
        o->on_event(o->arg, &ev);
    return rc;
}

