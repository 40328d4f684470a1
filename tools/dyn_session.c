/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * dyn's -e and --metrics sessions: metrics/'s live session engine (qm_live_run) on one
 * process, or on several at once (qm_many), their live tables and their final ones.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/dyn_priv.h"

/*****************************************************************************
 * The session
 */

static int steering; /* --commands: the screen is the conversation's, never cleared */

/* The analysis on every CPU (at most 8), as qpt-rewrite's: the same
 * result, sooner ready (python3.11 --all: half its time to ready on 2 CPUs). */
void
dyn_analysis_threads(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    qpt_set_analysis_threads(cpus < 1 ? 1 : cpus > 8 ? 8 : (unsigned)cpus);
}

/* qm_live_opts_t.on_sample: the table every --interval seconds, and at 'show'. */
static int
print_metrics_live(void *arg, const qm_set_t *set, const qm_row_t *rows, size_t n,
                   const qm_cost_t *costs, size_t ncosts, double t)
{
    const int *pid = arg;
    if (isatty(STDOUT_FILENO) && !steering)
        fputs("\033[H\033[J", stdout);
    printf("dyn: pid %d  t=%.1fs\n", *pid, t);
    if (tool_metrics_print(stdout, set, rows, n, TM_TEXT) < 0
        || tool_metrics_print_costs(stdout, set, costs, ncosts, 0) < 0
        || (putchar('\n'), fflush(stdout)) != 0)
        dyn_out_closed = 1;
    return dyn_out_closed;
}

/* qm_live_opts_t.on_reply: a command's answer; NULL: the prompt, on a terminal. */
static void
print_reply(void *arg, const char *line)
{
    (void)arg;
    if (line != NULL)
        printf("%s\n", line);
    else if (isatty(STDIN_FILENO) && isatty(STDOUT_FILENO))
        fputs("qpt> ", stdout);
    if (fflush(stdout) != 0)
        dyn_out_closed = 1;
}

/*
 * A metrics session (-e, --metrics): metrics/'s qm_live_run on libqpt. Returns the exit
 * status as session() does.
 */
int
dyn_metrics_session(const dyn_opts_t *o, int pid, char *const *argv)
{
    qm_set_t *set = NULL;
    if (tool_metrics_parse(dyn_prog_name, o->margs, o->morder, o->nm, &set) < 0)
        return DYN_EXIT_USAGE;
    steering = o->commands;
    if (set == NULL && (set = qm_new()) == NULL)
        return DYN_EXIT_FAIL;
    dyn_analysis_threads();
    qm_live_opts_t lo = { 0 };
    lo.pid = pid;
    lo.argv = argv;
    lo.interval = o->interval;
    lo.duration = o->duration;
    lo.stop = (const volatile int *)&dyn_stop_flag;
    lo.note = tool_metrics_note;
    lo.note_arg = (void *)dyn_prog_name;
    lo.on_sample = print_metrics_live;
    lo.arg = &pid;
    lo.commands = o->commands;
    lo.relocate = 1; /* as --count and --time: what does not fit in place, in a copy */
    lo.max_overhead = o->max_overhead;
    lo.hist_buckets = o->histogram ? DYN_HIST_BUCKETS : 0;
    lo.hist_width = DYN_HIST_WIDTH;
    lo.commands_fd = STDIN_FILENO;
    lo.on_reply = print_reply;
    qm_live_report_t rep;
    char why[2048];
    int ret = 0;
    int rc = qm_live_run(set, &lo, &rep, why, sizeof(why));
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", dyn_prog_name, why);
        ret = rc == QPT_EINVAL || rc == QPT_ENOTFOUND ? DYN_EXIT_USAGE : DYN_EXIT_FAIL;
    }
    if (rep.rows != NULL) {
        qm_row_t *agg = NULL, *one = rep.rows;
        size_t nagg = 0, none = rep.nrows;
        if (o->aggregate && qm_aggregate(set, &one, &none, 1, &agg, &nagg) == 0 && nagg > 0) {
            qm_row_t *all = realloc(rep.rows, (rep.nrows + nagg) * sizeof(qm_row_t));
            if (all != NULL) {
                memcpy(all + rep.nrows, agg, nagg * sizeof(qm_row_t));
                rep.rows = all;
                rep.nrows += nagg;
            }
        }
        free(agg);
        if (o->csv != NULL) {
            tool_out_t t;
            if (tool_out_open(&t, dyn_prog_name, o->csv) < 0
                || tool_out_close(&t, dyn_prog_name,
                                  tool_metrics_print(t.f, set, rep.rows, rep.nrows, TM_CSV) == 0) < 0)
                ret = DYN_EXIT_FAIL;
        }
        printf("dyn: pid %d, %.3f s (stopped %.1f ms to insert)", rep.pid, rep.secs,
               rep.stop_ms);
        if (o->commands)
            printf(", %u metric%s added and %u removed by commands", rep.added,
                   rep.added == 1 ? "" : "s", rep.removed);
        printf("\n");
        if (tool_metrics_print(stdout, set, rep.rows, rep.nrows, TM_TEXT) < 0
            || tool_metrics_print_costs(stdout, set, rep.costs, rep.ncosts, 1) < 0)
            dyn_out_closed = 1;
        if (o->histogram)
            dyn_print_metric_histogram(set, &rep);
        if (ret == 0 && rep.ended && argv != NULL)
            ret = WIFEXITED(rep.status) ? WEXITSTATUS(rep.status) : 128 + WTERMSIG(rep.status);
        if (dyn_out_closed) {
            fprintf(stderr, "%s: %d: standard output was closed: session ended\n",
                dyn_prog_name, rep.pid);
            ret = DYN_EXIT_FAIL;
        }
    }
    qm_live_report_free(&rep);
    qm_free(set);
    return ret;
}

/* qm_live_opts_t.on_ready with several processes: a line as each one's metrics are in
 * (what a script waits for before the job's work starts). */
static void
print_ready(void *arg, int pid, double stop_ms)
{
    (void)arg;
    fprintf(stderr, "%s: pid %d: measuring (stopped %.1f ms to insert)\n", dyn_prog_name,
        pid, stop_ms);
}

/*
 * Several processes' tables as one (each row's focus named by its rank or pid), then
 * the aggregates, to F (TM_TEXT or TM_CSV); the sessions that failed said on stderr
 * when SAY_FAILED. 0, or -1 (out of memory, F closed).
 */
static int
print_many(FILE *f, int format, const qm_set_t *set, const qm_many_report_t *rep,
           int say_failed)
{
    size_t total = 0, measured = 0, n = 0;
    for (size_t i = 0; i < rep->n; i++)
        total += rep->v[i].nrows;
    qm_row_t *rows = calloc(total + 1, sizeof(qm_row_t)), **per = calloc(rep->n + 1, sizeof(*per));
    size_t *nper = calloc(rep->n + 1, sizeof(size_t));
    int rc = rows == NULL || per == NULL || nper == NULL ? -1 : 0;
    for (size_t i = 0; rc == 0 && i < rep->n; i++) {
        const qm_proc_report_t *p = &rep->v[i];
        char label[48];
        if (p->rank >= 0)
            snprintf(label, sizeof(label), "rank %ld", p->rank);
        else
            snprintf(label, sizeof(label), "pid %d", p->pid);
        if (p->rc < 0) {
            if (say_failed)
                fprintf(stderr, "%s: %s: %s\n", dyn_prog_name, label, p->why);
            continue;
        }
        per[measured] = p->rows;
        nper[measured++] = p->nrows;
        for (size_t k = 0; k < p->nrows; k++) {
            qm_row_t r = p->rows[k];
            snprintf(r.focus, sizeof(r.focus), "%.30s: %.120s", label, p->rows[k].focus);
            rows[n++] = r;
        }
    }
    qm_row_t *agg = NULL, *all = NULL;
    size_t nagg = 0;
    if (rc == 0 && measured > 1 && qm_aggregate(set, per, nper, measured, &agg, &nagg) < 0)
        rc = -1;
    if (rc == 0 && (all = calloc(n + nagg + 1, sizeof(qm_row_t))) == NULL)
        rc = -1;
    if (rc == 0) {
        memcpy(all, rows, n * sizeof(qm_row_t));
        if (nagg > 0)
            memcpy(all + n, agg, nagg * sizeof(qm_row_t));
        rc = tool_metrics_print(f, set, all, n + nagg, format) < 0 ? -1 : 0;
    }
    free(all);
    free(agg);
    free(rows);
    free(per);
    free(nper);
    return rc;
}

/* qm_live_opts_t.on_many_sample: the tables of every process now (-i, and at 'show'). */
static void
print_many_live(void *arg, const qm_set_t *set, const struct qm_many_report *now, double t)
{
    (void)arg;
    if (isatty(STDOUT_FILENO) && !steering)
        fputs("\033[H\033[J", stdout);
    printf("dyn: %zu processes  t=%.1fs\n", now->n, t);
    if (print_many(stdout, TM_TEXT, set, now, 0) < 0 || (putchar('\n'), fflush(stdout)) != 0)
        dyn_out_closed = 1;
}

/* Several processes: each one's table (focus named by its rank or pid), the aggregates;
 * steered all at once with --commands, their tables together every --interval. */
int
dyn_many_session(const dyn_opts_t *o)
{
    qm_set_t *set = NULL;
    if (tool_metrics_parse(dyn_prog_name, o->margs, o->morder, o->nm, &set) < 0)
        return DYN_EXIT_USAGE;
    if (set == NULL && (set = qm_new()) == NULL)
        return DYN_EXIT_FAIL;
    steering = o->commands;
    qm_live_opts_t lo = { 0 };
    lo.duration = o->duration;
    lo.stop = (const volatile int *)&dyn_stop_flag;
    lo.note = tool_metrics_note;
    lo.note_arg = (void *)dyn_prog_name;
    lo.max_overhead = o->max_overhead;
    lo.relocate = 1;
    lo.on_ready = print_ready;
    lo.interval = o->interval;
    lo.commands = o->commands;
    lo.commands_fd = STDIN_FILENO;
    lo.on_reply = print_reply;
    lo.on_many_sample = print_many_live;
    lo.hist_buckets = o->histogram ? DYN_HIST_BUCKETS : 0;
    lo.hist_width = DYN_HIST_WIDTH;
    qm_many_report_t rep;
    char why[2048];
    int ret = 0;
    if (qm_live_run_many(set, &lo, o->pids, o->npids, &rep, why, sizeof(why)) < 0) {
        fprintf(stderr, "%s: %s\n", dyn_prog_name, why);
        ret = DYN_EXIT_FAIL;
    }
    for (size_t i = 0; i < rep.n; i++) {
        const qm_proc_report_t *p = &rep.v[i];
        char label[48];
        if (p->rc < 0)
            ret = DYN_EXIT_FAIL;
        if (p->rc < 0)
            continue;
        if (p->rank >= 0)
            snprintf(label, sizeof(label), "rank %ld", p->rank);
        else
            snprintf(label, sizeof(label), "pid %d", p->pid);
        printf("dyn: %s (pid %d), %.3f s (stopped %.1f ms to insert)%s\n", label, p->pid,
               p->secs, p->stop_ms, p->ended ? ", ended" : "");
    }
    if (rep.n > 0 && print_many(stdout, TM_TEXT, set, &rep, 1) < 0)
        dyn_out_closed = 1;
    if (o->histogram) { /* the processes' together */
        qm_live_report_t all = { 0 };
        all.hist = rep.hist;
        all.nhist = rep.nhist;
        dyn_print_metric_histogram(set, &all);
    }
    if (rep.n > 0 && o->csv != NULL) {
        tool_out_t t;
        if (tool_out_open(&t, dyn_prog_name, o->csv) < 0
            || tool_out_close(
                   &t, dyn_prog_name, print_many(t.f, TM_CSV, set, &rep, 0) == 0)
                < 0)
            ret = DYN_EXIT_FAIL;
    }
    if (dyn_out_closed)
        ret = DYN_EXIT_FAIL;
    qm_many_report_free(&rep);
    qm_free(set);
    return ret;
}
