/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * What a live metric costs (seed 001 §3.1, 000 §6: predicted before it goes in, observed
 * while it runs). For each metric, an entry counter at each procedure its snippets go
 * into (qm_metric_procs) counts that procedure's calls: put in first, for a short sample,
 * they give the call rates the prediction multiplies by the cycles the metric's snippets
 * add per call (qm_metric_cost: libqpt's cost model); kept in while the metric is, they
 * give the observed figure the same way, from the calls that really happened. Both are
 * overheads: the time added over the program's own CPU time in the same window (the
 * process's, from /proc/PID/stat with threads that ended, less the time added; at least
 * 1% of one CPU, so that an idle process is not said to be slowed 1,000-fold by a few
 * calls). 100% is twice as slow.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "metrics/qm_priv.h"

#define MIN_CPU_NS_PER_S 1e7 /* 1% of one CPU */

typedef struct cost {
    int on;               /* its counters are in */
    qpt_space_t *s;       /* the metric's space (qm_space: a library's, or the program's) */
    uint32_t *procs;      /* the procedures, and the metric's cycles per call of each */
    double *cycles;
    size_t n;
    uint64_t var;         /* n words: the calls of each */
    qpt_handle_t *h;      /* the counters' insertions */
    size_t nh;
    int freeing;          /* removed: VAR freed after the commit */
    uint64_t *last;       /* the words at the last look, and when */
    double t_last, cpu_last;
    uint64_t *first;      /* ... at the metric's insertion */
    double t_first, cpu_first;
    double predicted, observed, overall; /* %, or -1 */
    double calls_per_s;
    double base;          /* calls per CPU second before the metric went in (0: unknown) */
    double slowdown;      /* % fewer calls per CPU second since then (-1: unknown) */
} cost_t;

struct qm_costs {
    cost_t *v;
    size_t n;
};

/* The CPU time of PID so far in ns, threads that ended included (utime + stime of
 * /proc/PID/stat, in clock ticks: 10 ms steps, so windows are 0.2 s or more). */
static double
cpu_ns(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* After the command name (which may hold spaces and parentheses): fields 3 on. */
    char *p = strrchr(buf, ')');
    unsigned long long ut, st;
    if (p == NULL || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
                            &st) != 2)
        return 0;
    long hz = sysconf(_SC_CLK_TCK);
    return (double)(ut + st) * 1e9 / (double)(hz > 0 ? hz : 100);
}

qm_costs_t *
qm_costs_new(void)
{
    return calloc(1, sizeof(qm_costs_t));
}

static void
cost_clear(cost_t *c)
{
    free(c->procs);
    free(c->cycles);
    free(c->h);
    free(c->last);
    free(c->first);
    memset(c, 0, sizeof(*c));
}

void
qm_costs_free(qm_costs_t *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->n; i++)
        cost_clear(&c->v[i]);
    free(c->v);
    free(c);
}

static cost_t *
cost_of(qm_costs_t *c, size_t i)
{
    if (i >= c->n) {
        cost_t *v = realloc(c->v, (i + 1) * sizeof(cost_t));
        if (v == NULL)
            return NULL;
        memset(v + c->n, 0, (i + 1 - c->n) * sizeof(cost_t));
        c->v = v;
        c->n = i + 1;
    }
    return &c->v[i];
}

/* Read metric K's counters into W (its n words). */
static int
read_calls(const cost_t *k, qpt_space_t *s, uint64_t *w)
{
    return k->n ? qpt_read_memory(s, k->var, w, 8 * k->n) : 0;
}

/* Counters at the procedures of metric I (parsed: placed next), not committed. */
static int
count_one(qm_costs_t *c, const qm_set_t *set, size_t i, qpt_space_t *s, qpt_snippet_t *sn,
          char *why, size_t whylen)
{
    cost_t *k = cost_of(c, i);
    if (k == NULL)
        return QPT_ENOMEM;
    cost_clear(k);
    k->predicted = k->observed = k->overall = -1;
    if ((k->s = qm_space(set, i, s, why, whylen)) == NULL)
        return QPT_ENOTFOUND;
    QM_CHECK(qm_metric_procs(set, i, s, &k->procs, &k->n));
    k->cycles = calloc(k->n + 1, sizeof(double));
    k->h = calloc(k->n + 1, sizeof(qpt_handle_t));
    k->last = calloc(k->n + 1, sizeof(uint64_t));
    k->first = calloc(k->n + 1, sizeof(uint64_t));
    if (k->cycles == NULL || k->h == NULL || k->last == NULL || k->first == NULL)
        return QPT_ENOMEM;
    if (k->n == 0)
        return 0;
    int rc = qpt_alloc(k->s, 8 * k->n, &k->var);
    if (rc < 0) {
        snprintf(why, whylen, "%s: %s", qm_name(set, i), qpt_error(k->s));
        return rc;
    }
    for (size_t p = 0; p < k->n; p++) {
        qpt_point_t pt;
        size_t np;
        /* A procedure whose entry cannot take it: its calls are not seen (0). */
        if (qpt_points(k->s, k->procs[p], QPT_ENTRY, &pt, 1, &np) == 0 && np == 1
            && qpt_insert(k->s, &pt, sn, qpt_add_to(sn, k->var + 8 * p, qpt_const(sn, 1), 0),
                          &k->h[k->nh]) == 0)
            k->nh++;
    }
    k->on = 1;
    return 0;
}

int
qm_costs_count(qm_costs_t *c, const qm_set_t *set, size_t first, qpt_space_t *s, char *why,
               size_t whylen)
{
    int rc = 0;
    qpt_snippet_t *sn = qpt_snippet_create();
    if (sn == NULL)
        return QPT_ENOMEM;
    /* (A metric waiting for its library has no procedures yet.) */
    for (size_t i = first; rc == 0 && i < qm_count(set); i++)
        if (qm_state(set, i) == QM_PARSED)
            rc = count_one(c, set, i, s, sn, why, whylen);
    qpt_snippet_destroy(sn);
    return rc;
}

int
qm_costs_count_one(qm_costs_t *c, const qm_set_t *set, size_t i, qpt_space_t *s, char *why,
                   size_t whylen)
{
    qpt_snippet_t *sn = qpt_snippet_create();
    if (sn == NULL)
        return QPT_ENOMEM;
    int rc = count_one(c, set, i, s, sn, why, whylen);
    qpt_snippet_destroy(sn);
    return rc;
}

void
qm_costs_forget(qm_costs_t *c, size_t i)
{
    if (i < c->n) {
        cost_clear(&c->v[i]);
        c->v[i].predicted = c->v[i].observed = c->v[i].overall = -1;
    }
}

void
qm_costs_mark(qm_costs_t *c, const qm_set_t *set, size_t first, qpt_space_t *s)
{
    double t = qm_now(), cpu = cpu_ns(qpt_pid(s));
    for (size_t i = first; i < qm_count(set) && i < c->n; i++) {
        cost_t *k = &c->v[i];
        if (!k->on)
            continue;
        read_calls(k, s, k->last);
        k->t_last = t;
        k->cpu_last = cpu;
    }
}

#define MIN_CALLS 1000 /* for a rate to compare */

/* The calls in K's procedures between THEN_W and NOW_W. */
static double
calls_between(const cost_t *k, const uint64_t *now_w, const uint64_t *then_w)
{
    double calls = 0;
    for (size_t p = 0; p < k->n; p++)
        calls += (double)(now_w[p] - then_w[p]);
    return calls;
}

/* The overhead (%) that the calls in K's procedures between THEN_W and NOW_W (over DT
 * seconds and DCPU ns of the process's CPU) cost at K's cycles per call; *RATE: calls a
 * second. */
static double
share(const cost_t *k, const uint64_t *now_w, const uint64_t *then_w, double dt, double dcpu,
      double cpn, int inside, double *rate)
{
    double ns = 0, calls = 0;
    for (size_t p = 0; p < k->n; p++) {
        double d = (double)(now_w[p] - then_w[p]);
        calls += d;
        ns += d * k->cycles[p] / cpn;
    }
    if (rate != NULL)
        *rate = dt > 0 ? calls / dt : 0;
    /* Against the program's own time: the process's, less what the snippets added when
     * they ran in it (INSIDE; at least a tenth of it: the model can overshoot). */
    double floor = MIN_CPU_NS_PER_S * dt, own = inside ? dcpu - ns : dcpu;
    if (inside && own < dcpu / 10)
        own = dcpu / 10;
    return 100 * ns / (own > floor ? own : floor);
}

/* Metric K (I): its cycles per call from the cost model, the windows start now; with
 * SAMPLED, the prediction from the calls since qm_costs_mark. */
static int
predict_one(cost_t *k, const qm_set_t *set, size_t i, qpt_space_t *s, double cpn, int sampled,
            double t, double cpu)
{
    uint64_t *w = calloc(k->n + 1, sizeof(uint64_t));
    if (w == NULL)
        return QPT_ENOMEM;
    int rc = read_calls(k, s, w);
    if (rc == 0)
        rc = qm_metric_cost(set, i, s, k->procs, k->n, k->cycles);
    if (rc < 0) {
        free(w);
        return rc;
    }
    k->slowdown = -1;
    if (sampled) {
        double calls = calls_between(k, w, k->last), dcpu = cpu - k->cpu_last;
        k->predicted = share(k, w, k->last, t - k->t_last, dcpu, cpn, 0, &k->calls_per_s);
        k->base = calls >= MIN_CALLS && dcpu > 0 ? calls / dcpu : 0;
    }
    memcpy(k->last, w, k->n * sizeof(uint64_t));
    memcpy(k->first, w, k->n * sizeof(uint64_t));
    k->t_last = k->t_first = t;
    k->cpu_last = k->cpu_first = cpu;
    free(w);
    return 0;
}

int
qm_costs_predict(qm_costs_t *c, const qm_set_t *set, size_t first, qpt_space_t *s, double cpn,
                 int sampled)
{
    double t = qm_now(), cpu = cpu_ns(qpt_pid(s));
    for (size_t i = first; i < qm_count(set) && i < c->n; i++) {
        cost_t *k = &c->v[i];
        if (!k->on || qm_state(set, i) != QM_ON)
            continue;
        QM_CHECK(predict_one(k, set, i, s, cpn, sampled, t, cpu));
    }
    return 0;
}

int
qm_costs_start(qm_costs_t *c, const qm_set_t *set, size_t i, qpt_space_t *s, double cpn)
{
    if (i >= c->n || !c->v[i].on || qm_state(set, i) != QM_ON)
        return 0;
    return predict_one(&c->v[i], set, i, s, cpn, 0, qm_now(), cpu_ns(qpt_pid(s)));
}

double
qm_costs_predicted(const qm_costs_t *c, size_t i)
{
    return i < c->n ? c->v[i].predicted : -1;
}

int
qm_costs_observe(qm_costs_t *c, const qm_set_t *set, qpt_space_t *s, double cpn)
{
    double t = qm_now(), cpu = cpu_ns(qpt_pid(s));
    for (size_t i = 0; i < qm_count(set) && i < c->n; i++) {
        cost_t *k = &c->v[i];
        if (!k->on || qm_state(set, i) != QM_ON || t - k->t_last < 1e-3)
            continue;
        uint64_t *w = calloc(k->n + 1, sizeof(uint64_t));
        if (w == NULL)
            return QPT_ENOMEM;
        if (read_calls(k, s, w) == 0) {
            double calls = calls_between(k, w, k->last), dcpu = cpu - k->cpu_last;
            k->observed = share(k, w, k->last, t - k->t_last, dcpu, cpn, 1, &k->calls_per_s);
            /* Measured: the same procedures' calls per CPU second, before and now (a
             * steady workload: a change of phase shows here too). */
            if (k->base > 0 && calls >= MIN_CALLS && dcpu > 0)
                k->slowdown = 100 * (k->base / (calls / dcpu) - 1);
            else
                k->slowdown = -1;
            k->overall = share(k, w, k->first, t - k->t_first, cpu - k->cpu_first, cpn, 1, NULL);
            memcpy(k->last, w, k->n * sizeof(uint64_t));
            k->t_last = t;
            k->cpu_last = cpu;
        }
        free(w);
    }
    return 0;
}

size_t
qm_costs_runaway(const qm_costs_t *c, const qm_set_t *set, qpt_space_t *s, double cpn,
                 double limit, double *cost)
{
    double t = qm_now(), cpu = cpu_ns(qpt_pid(s));
    size_t worst = SIZE_MAX;
    *cost = limit;
    for (size_t i = 0; i < qm_count(set) && i < c->n; i++) {
        const cost_t *k = &c->v[i];
        if (!k->on || qm_state(set, i) != QM_ON || t - k->t_last < 0.2)
            continue;
        uint64_t *w = calloc(k->n + 1, sizeof(uint64_t));
        if (w == NULL)
            return SIZE_MAX;
        if (read_calls(k, s, w) == 0) {
            double v = share(k, w, k->last, t - k->t_last, cpu - k->cpu_last, cpn, 1, NULL);
            if (v > *cost) {
                *cost = v;
                worst = i;
            }
        }
        free(w);
    }
    return worst;
}

void
qm_costs_remove(qm_costs_t *c, size_t i, qpt_space_t *s)
{
    if (i >= c->n || !c->v[i].on)
        return;
    cost_t *k = &c->v[i];
    for (size_t h = 0; h < k->nh; h++)
        qpt_remove(k->s ? k->s : s, k->h[h]);
    k->nh = 0;
    k->on = 0;
    k->freeing = k->var != 0;
}

int
qm_costs_drop(qm_costs_t *c, qpt_space_t *space, qpt_handle_t h)
{
    for (size_t i = 0; c != NULL && i < c->n; i++) {
        cost_t *k = &c->v[i];
        for (size_t j = 0; k->on && (k->s == NULL || k->s == space) && j < k->nh; j++)
            if (k->h[j] == h) {
                qpt_remove(space, h);
                k->h[j] = k->h[--k->nh];
                return 0;
            }
    }
    return QPT_ENOTFOUND;
}

void
qm_costs_release(qm_costs_t *c, qpt_space_t *s)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].freeing && qpt_free(c->v[i].s ? c->v[i].s : s, c->v[i].var) == 0) {
            c->v[i].freeing = 0;
            c->v[i].var = 0;
        }
}

size_t
qm_costs_table(const qm_costs_t *c, const qm_set_t *set, qm_cost_t **out)
{
    size_t n = 0;
    *out = calloc(c->n + 1, sizeof(qm_cost_t));
    if (*out == NULL)
        return 0;
    for (size_t i = 0; i < c->n && i < qm_count(set); i++) {
        const cost_t *k = &c->v[i];
        if (qm_state(set, i) != QM_ON || (k->predicted < 0 && k->overall < 0))
            continue;
        (*out)[n++] = (qm_cost_t) { i, k->predicted, k->observed, k->overall, k->calls_per_s,
                                    k->slowdown };
    }
    return n;
}

size_t
qm_costs_worst(const qm_costs_t *c, const qm_set_t *set, double *total)
{
    /* The modelled costs add up; a measured slowdown is all the metrics' at once (each
     * sees the same procedures slowed by every snippet in them): the largest counts. */
    size_t worst = SIZE_MAX;
    double max = -1, modelled = 0, measured = 0;
    for (size_t i = 0; i < c->n && i < qm_count(set); i++) {
        const cost_t *k = &c->v[i];
        if (!k->on || qm_state(set, i) != QM_ON || k->observed < 0)
            continue;
        modelled += k->observed;
        measured = k->slowdown > measured ? k->slowdown : measured;
        if (k->observed > max) {
            max = k->observed;
            worst = i;
        }
    }
    *total = modelled > measured ? modelled : measured;
    return worst;
}
