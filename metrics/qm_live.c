/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * A live metrics session on libqpt's public API: attach or start, insert in one stop,
 * run, sample, read the final table, take everything out. The process is stopped only
 * while the snippets go in (its executable is analysed before: qpt_attach does it while
 * the process runs).
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metrics/qm_priv.h"

static double
now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void
nap(double secs)
{
    if (secs <= 0)
        return;
    struct timespec ts = { (time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9) };
    nanosleep(&ts, NULL);
}

static int
read_words(void *arg, uint64_t addr, uint64_t *w, size_t n)
{
    return qpt_read_memory(arg, addr, w, 8 * n);
}

/* Is the attached process PID still there? */
static int
alive(int pid)
{
    return kill(pid, 0) == 0 || errno == EPERM;
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
    double cpn = qm_cycles_per_ns();
    if ((rc = qm_insert(set, s, o->note, o->note_arg, why, whylen)) < 0) {
        qpt_close(s);
        return rc;
    }
    double t0 = now();
    if ((rc = qpt_commit(s)) < 0 || (rc = qpt_run(s)) < 0) {
        snprintf(why, whylen, "%d: %s", rep->pid, qpt_error(s));
        qpt_close(s);
        return rc;
    }
    rep->stop_ms = (now() - t0) * 1e3;
    double start = now(), next = o->interval > 0 ? start + o->interval : 0;
    for (;;) {
        if (o->stop != NULL && *o->stop)
            break;
        double t = now();
        if (o->duration > 0 && t - start >= o->duration)
            break;
        if (o->pid <= 0 ? qpt_ended(s, &rep->status) == 1 : !alive(rep->pid)) {
            rep->ended = 1;
            break;
        }
        if (next > 0 && t >= next) {
            qm_row_t *rows;
            size_t n;
            if (o->on_sample != NULL
                && qm_results(set, read_words, s, cpn, &rows, &n, why, whylen) == 0) {
                int enough = o->on_sample(o->arg, set, rows, n, t - start);
                free(rows);
                if (enough)
                    break;
            }
            next += o->interval;
        }
        double until = 0.02;
        if (next > 0 && next - t < until)
            until = next - t;
        nap(until);
    }
    rep->secs = now() - start;
    rc = qm_results(set, read_words, s, cpn, &rep->rows, &rep->nrows, why, whylen);
    qpt_close(s); /* the snippets out, the process let go */
    return rc;
}
