/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The same metrics in several processes at once (the ranks of a parallel job): a child
 * process per target runs qm_live_run on it (each tracer its own process: ptrace and
 * wait stay per target), and sends its report back through a pipe. The parent reads
 * the pipes as they fill, waits for the children, and passes a stop on to them; a parent
 * that dies (SIGKILL) stops them too (PR_SET_PDEATHSIG), so no target is left measured.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "metrics/qm_priv.h"

/* What a child sends: this, then NROWS rows. */
typedef struct wire {
    int rc, ended, status;
    double secs, stop_ms;
    size_t nrows;
    char why[1024];
} wire_t;

long
qm_rank_of(int pid)
{
    static const char *const vars[] = { "OMPI_COMM_WORLD_RANK=", "PMI_RANK=", "PMIX_RANK=",
                                        "SLURM_PROCID=" };
    char path[64], *buf = malloc(1 << 20);
    snprintf(path, sizeof(path), "/proc/%d/environ", pid);
    FILE *f = buf ? fopen(path, "r") : NULL;
    size_t n = f ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    if (f != NULL)
        fclose(f);
    long rank = -1;
    for (size_t v = 0; buf != NULL && rank < 0 && v < sizeof(vars) / sizeof(vars[0]); v++)
        for (size_t i = 0; i < n && rank < 0; i += strlen(buf + i) + 1) {
            buf[n] = '\0';
            size_t len = strlen(vars[v]);
            if (strncmp(buf + i, vars[v], len) == 0) {
                char *end;
                long r = strtol(buf + i + len, &end, 10);
                if (end != buf + i + len && *end == '\0' && r >= 0)
                    rank = r;
            }
        }
    free(buf);
    return rank;
}

static void
child(qm_set_t *set, const qm_live_opts_t *o, int pid, int fd, pid_t parent)
{
    /* A parent killed (even by SIGKILL) ends this session the clean way: SIGINT, which
     * the caller's handler turns into *o->stop, as it does for the parent. */
    prctl(PR_SET_PDEATHSIG, SIGINT);
    if (getppid() != parent)
        _exit(1); /* it died before that: take nothing in */
    qm_live_opts_t mine = *o;
    mine.pid = pid;
    mine.argv = NULL;
    mine.interval = 0;
    mine.on_sample = NULL;
    mine.commands = 0;
    mine.hist_buckets = 0;
    qm_live_report_t rep;
    wire_t w;
    memset(&w, 0, sizeof(w));
    w.rc = qm_live_run(set, &mine, &rep, w.why, sizeof(w.why));
    w.ended = rep.ended;
    w.status = rep.status;
    w.secs = rep.secs;
    w.stop_ms = rep.stop_ms;
    w.nrows = rep.rows ? rep.nrows : 0;
    const char *p = (const char *)&w;
    size_t left = sizeof(w);
    int ok = 1;
    for (int part = 0; part < 2 && ok; part++) {
        while (left > 0) {
            ssize_t k = write(fd, p, left);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0) {
                ok = 0;
                break;
            }
            p += k;
            left -= (size_t)k;
        }
        p = (const char *)rep.rows;
        left = w.nrows * sizeof(qm_row_t);
    }
    qm_live_report_free(&rep);
    _exit(ok ? 0 : 1);
}

int
qm_live_run_many(qm_set_t *set, const qm_live_opts_t *o, const int *pids, size_t n,
                 qm_many_report_t *rep, char *why, size_t whylen)
{
    memset(rep, 0, sizeof(*rep));
    if (set == NULL || o == NULL || pids == NULL || n == 0)
        return QPT_EINVAL;
    rep->v = calloc(n, sizeof(qm_proc_report_t));
    pid_t *kids = calloc(n, sizeof(pid_t));
    int *fds = calloc(n, sizeof(int));
    char **buf = calloc(n, sizeof(char *));
    size_t *got = calloc(n, sizeof(size_t)), *cap = calloc(n, sizeof(size_t));
    if (rep->v == NULL || kids == NULL || fds == NULL || buf == NULL || got == NULL
        || cap == NULL) {
        free(kids);
        free(fds);
        free(buf);
        free(got);
        free(cap);
        free(rep->v);
        rep->v = NULL;
        return QPT_ENOMEM;
    }
    rep->n = n;
    int rc = 0;
    pid_t parent = getpid();
    for (size_t i = 0; i < n; i++) {
        rep->v[i].pid = pids[i];
        rep->v[i].rank = qm_rank_of(pids[i]);
        fds[i] = -1;
        int pf[2];
        if (pipe(pf) < 0) {
            snprintf(why, whylen, "pipe: %s", strerror(errno));
            rc = QPT_EIO;
            break;
        }
        fflush(NULL);
        kids[i] = fork();
        if (kids[i] == 0) {
            close(pf[0]);
            for (size_t j = 0; j < i; j++)
                close(fds[j]);
            child(set, o, pids[i], pf[1], parent);
        }
        close(pf[1]);
        if (kids[i] < 0) {
            close(pf[0]);
            snprintf(why, whylen, "fork: %s", strerror(errno));
            rc = QPT_EIO;
            break;
        }
        fds[i] = pf[0];
    }
    /* Read every pipe to its end (a child blocks on a full one); pass a stop on. */
    size_t open = 0;
    for (size_t i = 0; i < n; i++)
        open += fds[i] >= 0;
    int stopped = 0;
    while (open > 0) {
        if (!stopped && o->stop != NULL && *o->stop) {
            stopped = 1;
            for (size_t i = 0; i < n; i++)
                if (kids[i] > 0)
                    kill(kids[i], SIGINT);
        }
        struct pollfd *pf = calloc(n, sizeof(*pf));
        if (pf == NULL)
            break;
        for (size_t i = 0; i < n; i++)
            pf[i] = (struct pollfd) { fds[i], POLLIN, 0 };
        int r = poll(pf, (nfds_t)n, 100);
        for (size_t i = 0; r > 0 && i < n; i++) {
            if (fds[i] < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (got[i] == cap[i]) {
                size_t c = cap[i] ? 2 * cap[i] : 65536;
                char *b = realloc(buf[i], c);
                if (b == NULL) {
                    close(fds[i]);
                    fds[i] = -1;
                    open--;
                    continue;
                }
                buf[i] = b;
                cap[i] = c;
            }
            ssize_t k = read(fds[i], buf[i] + got[i], cap[i] - got[i]);
            if (k > 0)
                got[i] += (size_t)k;
            else if (k == 0 || errno != EINTR) {
                close(fds[i]);
                fds[i] = -1;
                open--;
            }
        }
        free(pf);
    }
    for (size_t i = 0; i < n; i++) {
        int st;
        if (kids[i] > 0)
            while (waitpid(kids[i], &st, 0) < 0 && errno == EINTR)
                ;
        qm_proc_report_t *p = &rep->v[i];
        wire_t w;
        if (got[i] < sizeof(w)) {
            p->rc = QPT_EIO;
            snprintf(p->why, sizeof(p->why), "%d: its session ended without a report", pids[i]);
            continue;
        }
        memcpy(&w, buf[i], sizeof(w));
        p->rc = w.rc;
        p->ended = w.ended;
        p->status = w.status;
        p->secs = w.secs;
        p->stop_ms = w.stop_ms;
        snprintf(p->why, sizeof(p->why), "%s", w.why);
        if (w.nrows > 0 && got[i] >= sizeof(w) + w.nrows * sizeof(qm_row_t)
            && (p->rows = malloc(w.nrows * sizeof(qm_row_t))) != NULL) {
            memcpy(p->rows, buf[i] + sizeof(w), w.nrows * sizeof(qm_row_t));
            p->nrows = w.nrows;
        }
    }
    for (size_t i = 0; i < n; i++) {
        free(buf[i]);
        if (fds[i] >= 0)
            close(fds[i]);
    }
    free(kids);
    free(fds);
    free(buf);
    free(got);
    free(cap);
    return rc;
}

void
qm_many_report_free(qm_many_report_t *rep)
{
    for (size_t i = 0; rep != NULL && i < rep->n; i++)
        free(rep->v[i].rows);
    if (rep != NULL) {
        free(rep->v);
        rep->v = NULL;
        rep->n = 0;
    }
}
