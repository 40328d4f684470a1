/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Where the metrics are (the layout, saved next to a rewritten program as text) and
 * what they measured: the metric x focus table, per-thread blocks summed over threads.
 *
 * The layout file (version 3; 2 and 1 are read too):
 *   qpt-metrics-layout 3
 *   id ID                             (the rewrite's; from version 2)
 *   metric KIND FOCUS PER_THREAD VAR STRIDE BASE NPROCS BY_THREAD  (BY_THREAD from 3)
 *   name THE METRIC'S NAME (the rest of the line)
 *   unit UNIT                         (from 3; "-": none)
 *   key KVAR KEY TEXT                 (per value)
 *   proc MEASURED NAME                (NPROCS lines, each with "module M" per module)
 *   ...
 *   end
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/qp_clock.h"
#include "metrics/qm_priv.h"

#define MAX_PROCS 10000000u
#define MAX_LINE 8192

static uint64_t
row_words(int kind)
{
    return QM_ROW_WORDS(kind);
}


/* Text built in memory (the layout), then written in one go. */
typedef struct strbuf {
    char *p;
    size_t n, cap;
    int failed;
} strbuf_t;

static void
sb_printf(strbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
sb_printf(strbuf_t *b, const char *fmt, ...)
{
    va_list ap;
    for (int pass = 0; pass < 2 && !b->failed; pass++) {
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if (b->p != NULL && b->n + (size_t)n < b->cap) {
            b->n += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *q = realloc(b->p, cap);
        if (q == NULL) {
            b->failed = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

/* The layout of SET as text (malloc'ed into *TEXT), with ID. */
static int
layout_format(const qm_set_t *set, uint64_t id, char **text)
{
    strbuf_t b = { 0 };
    sb_printf(&b, "qpt-metrics-layout 3\nid %016llx\n", (unsigned long long)id);
    for (size_t i = 0; i < set->n; i++) {
        const qm_metric_t *m = &set->v[i];
        if (m->state != QM_ON)
            continue;
        sb_printf(&b, "metric %d %d %d %llx %llu %llu %zu %d\nname %s\nunit %s\n", m->kind,
                  m->focus, m->per_thread, (unsigned long long)m->var,
                  (unsigned long long)m->stride, (unsigned long long)m->base, m->nprocs,
                  m->by_thread, m->name, m->unit[0] ? m->unit : "-");
        if (m->focus == QM_PER_VALUE)
            sb_printf(&b, "key %llx %s\n", (unsigned long long)m->kvar, m->key_text);
        for (size_t k = 0; k < m->nprocs; k++) {
            sb_printf(&b, "proc %d %s\n", m->procs[k].measured, m->procs[k].name);
            if (m->focus == QM_PER_MODULE)
                sb_printf(&b, "module %s\n", m->procs[k].module ? m->procs[k].module : "?");
        }
    }
    sb_printf(&b, "end\n");
    if (b.failed) {
        free(b.p);
        return QPT_ENOMEM;
    }
    *text = b.p;
    return 0;
}

int
qm_layout_attach(const qm_set_t *set, qpt_space_t *s, char *why, size_t whylen)
{
    if (set == NULL || s == NULL || !set->placed)
        return QPT_EINVAL;
    char *text = NULL;
    /* Id 0: the note is part of the description that the id hashes. */
    int rc = layout_format(set, 0, &text);
    if (rc == 0 && (rc = qpt_note_set(s, QM_LAYOUT_NOTE, text)) < 0 && why != NULL && whylen)
        snprintf(why, whylen, "%s", qpt_error(s));
    free(text);
    return rc;
}

/* SET from the layout TEXT (named ORIGIN in messages), with ID when it has none. */
static int
layout_parse(const char *text, const char *origin, uint64_t id, qm_set_t **out, char *why,
             size_t whylen)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    if (f == NULL)
        return QPT_ENOMEM;
    int rc = qm_layout_read(f, origin, out, why, whylen);
    fclose(f);
    if (rc == 0 && (*out)->id == 0)
        (*out)->id = id;
    return rc;
}

/* One line of F into BUF (its newline removed); 0 at the end, -1 when too long. */
static int
read_line(FILE *f, char *buf, size_t len)
{
    if (fgets(buf, (int)len, f) == NULL)
        return 0;
    size_t n = strlen(buf);
    if (n == 0 || buf[n - 1] != '\n')
        return -1;
    buf[n - 1] = '\0';
    return 1;
}

int
qm_layout_load(const char *path, qm_set_t **out, char *why, size_t whylen)
{
    if (path == NULL || out == NULL)
        return QPT_EINVAL;
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        if (why != NULL && whylen > 0)
            snprintf(why, whylen, "%s: %s", path, strerror(errno));
        return QPT_EIO;
    }
    /* A layout file of an older qpt-rewrite (text), or the program itself. */
    char head[20] = "";
    size_t n = fread(head, 1, sizeof(head) - 1, f);
    head[n] = '\0';
    int rc;
    if (strncmp(head, "qpt-metrics-layout ", 19) == 0) {
        rewind(f);
        rc = qm_layout_read(f, path, out, why, whylen);
        fclose(f);
        return rc;
    }
    fclose(f);
    char *text = NULL;
    uint64_t id = 0;
    rc = qpt_note_read(path, QM_LAYOUT_NOTE, &text, &id, why, whylen);
    if (rc == QPT_ENOTFOUND && why != NULL && whylen > 0)
        snprintf(why, whylen, "%s: a program rewritten without metrics (qpt-rewrite -e or "
                              "--metrics)", path);
    if (rc == 0)
        rc = layout_parse(text, path, id, out, why, whylen);
    free(text);
    return rc;
}

int
qm_layout_of_profile(const char *profile, qm_set_t **out, char *why, size_t whylen)
{
    if (profile == NULL || out == NULL)
        return QPT_EINVAL;
    *out = NULL;
    char *text = NULL;
    uint64_t id = 0;
    int rc = qpt_profile_note(profile, QM_LAYOUT_NOTE, &text, why, whylen);
    if (rc == 0)
        rc = qpt_profile_id(profile, &id, why, whylen);
    if (rc == 0)
        rc = layout_parse(text, profile, id, out, why, whylen);
    free(text);
    return rc;
}

int
qm_layout_read(FILE *f, const char *path, qm_set_t **out, char *why, size_t whylen)
{
    if (f == NULL || path == NULL || out == NULL)
        return QPT_EINVAL;
    *out = NULL;
    qm_set_t *set = calloc(1, sizeof(*set));
    char *line = malloc(MAX_LINE);
    unsigned lineno = 1;
    int rc = set && line ? 0 : QPT_ENOMEM, ended = 0;
    /* Version 2 has the rewrite's id; 1 (before ids) is read, unchecked; 3 has units and
     * combined foci. */
    int v2 = 0, v3 = 0;
    if (rc == 0 && (read_line(f, line, MAX_LINE) != 1
                    || (strcmp(line, "qpt-metrics-layout 1") != 0
                        && !(v2 = strcmp(line, "qpt-metrics-layout 2") == 0)
                        && !(v2 = v3 = strcmp(line, "qpt-metrics-layout 3") == 0))))
        rc = QPT_EFORMAT;
    if (rc == 0 && v2) {
        unsigned long long id = 0;
        char tail;
        lineno++;
        if (read_line(f, line, MAX_LINE) != 1 || sscanf(line, "id %llx%c", &id, &tail) != 1)
            rc = QPT_EFORMAT;
        set->id = id;
    }
    while (rc == 0) {
        lineno++;
        int r = read_line(f, line, MAX_LINE);
        if (r <= 0) {
            rc = QPT_EFORMAT;
            break;
        }
        if (strcmp(line, "end") == 0) {
            ended = 1;
            break;
        }
        qm_metric_t m;
        memset(&m, 0, sizeof(m));
        unsigned long long var, stride, base;
        size_t np;
        char tail;
        int fields = v3 ? sscanf(line, "metric %d %d %d %llx %llu %llu %zu %d%c", &m.kind,
                                 &m.focus, &m.per_thread, &var, &stride, &base, &np,
                                 &m.by_thread, &tail)
                        : sscanf(line, "metric %d %d %d %llx %llu %llu %zu%c", &m.kind,
                                 &m.focus, &m.per_thread, &var, &stride, &base, &np, &tail);
        if (fields != (v3 ? 8 : 7)
            || m.kind < QM_COUNT || m.kind > QM_AVG || m.focus < QM_PER_PROC
            || (m.by_thread != 0 && (m.by_thread != 1 || !m.per_thread
                                     || !(m.focus == QM_PER_PROC || m.focus == QM_PER_MODULE)))
            || m.focus > QM_PER_SITE || (m.per_thread != 0 && m.per_thread != 1) || np > MAX_PROCS
            || stride % 8 != 0 || stride > 65536
            || (base != 0 && base != 3 && (m.kind != QM_CPU || (base != 1 && base != 4)))) {
            rc = QPT_EFORMAT;
            break;
        }
        uint64_t wpr = row_words(m.kind),
                 rows = m.focus == QM_PER_PROC || m.focus == QM_PER_MODULE
                                || m.focus == QM_PER_SITE
                            ? np
                        : m.focus == QM_PER_VALUE                        ? 0
                                                                         : 1;
        if ((m.per_thread && stride != 8 * (base + rows * wpr)) || (!m.per_thread && (base || m.kind != QM_COUNT))) {
            rc = QPT_EFORMAT;
            break;
        }
        m.var = var;
        m.state = QM_ON;
        m.stride = stride;
        m.base = base;
        lineno++;
        if (read_line(f, line, MAX_LINE) != 1 || strncmp(line, "name ", 5) != 0
            || line[5] == '\0')
            rc = QPT_EFORMAT;
        else if ((m.name = strdup(line + 5)) == NULL || (m.origin = strdup(path)) == NULL
                 || (m.src = strdup("")) == NULL || (m.pattern = strdup("")) == NULL
                 || (m.procs = calloc(np + 1, sizeof(qm_proc_t))) == NULL)
            rc = QPT_ENOMEM;
        if (rc == 0 && v3) {
            lineno++;
            if (read_line(f, line, MAX_LINE) != 1 || strncmp(line, "unit ", 5) != 0
                || line[5] == '\0' || strlen(line + 5) >= sizeof(m.unit))
                rc = QPT_EFORMAT;
            else if (strcmp(line + 5, "-") != 0)
                snprintf(m.unit, sizeof(m.unit), "%s", line + 5);
        }
        if (rc == 0 && m.focus == QM_PER_VALUE) {
            unsigned long long kv;
            int off = 0;
            lineno++;
            if (read_line(f, line, MAX_LINE) != 1
                || sscanf(line, "key %llx %n", &kv, &off) != 1 || off == 0 || line[off] == '\0'
                || m.kind != QM_COUNT)
                rc = QPT_EFORMAT;
            else if ((m.key_text = strdup(line + off)) == NULL)
                rc = QPT_ENOMEM;
            m.kvar = kv;
        }
        for (size_t k = 0; rc == 0 && k < np; k++) {
            lineno++;
            int measured;
            int off = 0;
            if (read_line(f, line, MAX_LINE) != 1
                || sscanf(line, "proc %d %n", &measured, &off) != 1 || off == 0
                || (measured != 0 && measured != 1) || line[off] == '\0') {
                rc = QPT_EFORMAT;
                break;
            }
            if ((m.procs[k].name = strdup(line + off)) == NULL)
                rc = QPT_ENOMEM;
            m.procs[k].measured = measured;
            m.nprocs = k + 1;
            if (rc == 0 && m.focus == QM_PER_MODULE) {
                lineno++;
                if (read_line(f, line, MAX_LINE) != 1 || strncmp(line, "module ", 7) != 0
                    || line[7] == '\0')
                    rc = QPT_EFORMAT;
                else if ((m.procs[k].module = strdup(line + 7)) == NULL)
                    rc = QPT_ENOMEM;
            }
        }
        if (rc == 0 && set->n == set->cap) {
            size_t cap = set->cap ? 2 * set->cap : 8;
            qm_metric_t *v = realloc(set->v, cap * sizeof(*v));
            if (v == NULL)
                rc = QPT_ENOMEM;
            else {
                set->v = v;
                set->cap = cap;
            }
        }
        if (rc == 0)
            set->v[set->n++] = m;
        else {
            qm_metric_free(&m); /* a half-read metric */
        }
    }
    if (rc == 0 && (!ended || set->n == 0))
        rc = QPT_EFORMAT;
    free(line);
    if (rc < 0) {
        if (why != NULL && whylen > 0)
            snprintf(why, whylen, rc == QPT_EFORMAT ? "%s:%u: not a metrics layout (or a damaged "
                                                     "one)"
                                                   : "%s:%u: %s",
                     path, lineno, qpt_strerror(rc));
        qm_free(set);
        return rc;
    }
    set->placed = 1;
    *out = set;
    return 0;
}

uint64_t
qm_layout_id(const qm_set_t *set)
{
    return set != NULL ? set->id : 0;
}

double
qm_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* libqpt's one calibration of the cycle counter (qpt_cycles_per_ns): once a process. */
double
qm_cycles_per_ns(void)
{
    double cpn = qpt_cycles_per_ns();
    return cpn > 0 ? cpn : 1;
}

static int
push_row(qm_row_t **rows, size_t *n, size_t *cap, const qm_row_t *r)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        qm_row_t *v = realloc(*rows, c * sizeof(*v));
        if (v == NULL)
            return QPT_ENOMEM;
        *rows = v;
        *cap = c;
    }
    (*rows)[(*n)++] = *r;
    return 0;
}

/* A value in its unit: counts as they are, timers in ns. */
static uint64_t
in_unit(const qm_metric_t *m, uint64_t v, double cpn)
{
    if (m->kind == QM_WALL)
        return cpn > 0 ? (uint64_t)((double)v / cpn) : v;
    return v;
}

/* One group of qm_aggregate: a metric and focus, and its statistics. */
typedef struct agg {
    size_t metric;
    int kind;
    char focus[160];
    uint64_t sum, min, max, count;
    int threads;       /* over threads (per thread; "PROC / threads" per procedure per
                        * thread), not processes */
} agg_t;

int
qm_aggregate(const qm_set_t *set, qm_row_t *const *rows, const size_t *n, size_t k,
             qm_row_t **out, size_t *nout)
{
    if (set == NULL || rows == NULL || n == NULL || out == NULL || nout == NULL)
        return QPT_EINVAL;
    agg_t *g = NULL;
    size_t ng = 0, cap = 0;
    for (size_t j = 0; j < k; j++)
        for (size_t i = 0; i < n[j]; i++) {
            const qm_row_t *r = &rows[j][i];
            if (!r->measured || r->empty || r->metric >= set->n)
                continue;
            const qm_metric_t *m = &set->v[r->metric];
            int threads = m->focus == QM_PER_THREAD || (m->by_thread && r->thread_at >= 3);
            char pair[160];
            if (threads && m->focus != QM_PER_THREAD)
                snprintf(pair, sizeof(pair), "%.*s / threads", (int)(r->thread_at - 3), r->focus);
            const char *focus = !threads ? r->focus : m->focus == QM_PER_THREAD ? "threads" : pair;
            /* values of sum, max... are signed: compared with their sign flipped */
            uint64_t flip = QM_IS_VALUED(r->kind) ? 1ull << 63 : 0, v = r->value ^ flip;
            size_t x = 0;
            while (x < ng && !(g[x].metric == r->metric && strcmp(g[x].focus, focus) == 0))
                x++;
            if (x == ng) {
                if (ng == cap) {
                    cap = cap ? 2 * cap : 32;
                    agg_t *v = realloc(g, cap * sizeof(agg_t));
                    if (v == NULL) {
                        free(g);
                        return QPT_ENOMEM;
                    }
                    g = v;
                }
                g[ng] = (agg_t) { r->metric, r->kind, "", 0, UINT64_MAX, 0, 0, threads };
                snprintf(g[ng].focus, sizeof(g[ng].focus), "%s", focus);
                ng++;
            }
            g[x].sum += r->value;
            g[x].min = v < g[x].min ? v : g[x].min;
            g[x].max = v > g[x].max || g[x].count == 0 ? v : g[x].max;
            g[x].count++;
        }
    qm_row_t *o = calloc(4 * ng + 1, sizeof(qm_row_t));
    if (o == NULL) {
        free(g);
        return QPT_ENOMEM;
    }
    size_t kept = 0;
    for (size_t x = 0; x < ng; x++) {
        /* One process: only threads have something to aggregate. */
        if (k == 1 && !g[x].threads)
            continue;
        g[kept++] = g[x];
    }
    ng = kept;
    for (size_t x = 0; x < ng; x++) {
        /* Over processes, a process without the row is a 0; over threads, the threads. */
        uint64_t over = g[x].threads ? g[x].count : k;
        uint64_t flip = QM_IS_VALUED(g[x].kind) ? 1ull << 63 : 0;
        uint64_t min = g[x].count < over ? 0 : g[x].min ^ flip, max = g[x].max ^ flip;
        if (flip && g[x].count < over && (int64_t)max < 0)
            max = 0; /* a process without the row is a 0 */
        uint64_t mean = !over ? 0 : flip ? (uint64_t)((int64_t)g[x].sum / (int64_t)over)
                                         : g[x].sum / over;
        static const char *const what[] = { "sum", "min", "max", "mean" };
        uint64_t v[4] = { g[x].sum, min, max, mean };
        for (int w = 0; w < 4; w++) {
            qm_row_t *r = &o[4 * x + (size_t)w];
            *r = (qm_row_t) { g[x].metric, g[x].kind, "", v[w], 1, 0, 0, 0, 0, 0, "", 0 };
            snprintf(r->focus, sizeof(r->focus), "%s: %.150s", what[w], g[x].focus);
        }
    }
    free(g);
    *out = o;
    *nout = 4 * ng;
    return 0;
}


/*****************************************************************************
 * A row's value from the words of the threads' blocks
 */

/* What a row accumulated: a count's calls (N), a timer's total (ACC), a value metric's
 * calls and sum, max or min of the values (N, ACC). */
typedef struct tally {
    uint64_t n, acc;
} tally_t;

/* The tally of the row at word W of a block B of M. */
static tally_t
block_tally(const qm_metric_t *m, const uint64_t *b, uint64_t w)
{
    if (m->kind == QM_COUNT)
        return (tally_t) { b[w], 0 };
    if (QM_IS_VALUED(m->kind))
        return (tally_t) { b[w], b[w + 1] };
    return (tally_t) { 0, b[w + 2] };
}

/* T merged into *INTO (other threads, other procedures of a module). */
static void
merge(int kind, tally_t *into, tally_t t)
{
    if ((kind == QM_MAX || kind == QM_MIN) && t.n != 0
        && (into->n == 0 || (kind == QM_MAX ? (int64_t)t.acc > (int64_t)into->acc
                                            : (int64_t)t.acc < (int64_t)into->acc)))
        into->acc = t.acc;
    else if (kind != QM_MAX && kind != QM_MIN)
        into->acc += t.acc;
    into->n += t.n;
}

/* A row of metric I (M) for tally T. */
static qm_row_t
make_row(const qm_metric_t *m, size_t i, tally_t t, double cpn, int measured)
{
    qm_row_t r = { i, m->kind, "", 0, measured, 0, 0, 0, 0, 0, "", 0 };
    if (m->kind == QM_COUNT)
        r.value = t.n;
    else if (m->kind == QM_AVG)
        r.value = t.n ? (uint64_t)((int64_t)t.acc / (int64_t)t.n) : 0; /* toward 0 */
    else
        r.value = in_unit(m, t.acc, cpn);
    r.empty = (m->kind == QM_MAX || m->kind == QM_MIN || m->kind == QM_AVG) && t.n == 0;
    if (m->shared)
        r.calls = t.n;
    snprintf(r.unit, sizeof(r.unit), "%s", m->unit);
    return r;
}

/*
 * The groups of M's rows: per module, a module's procedures; else a row each. GROUP
 * holds 3 * (NR + 1) words: GROUP[row] is its group's first row, and GROUP[NR + 1 +
 * row] the next row of its group (NR after the last), so that a group's rows are
 * visited without a look at every row (FOR_GROUP).
 */
static size_t
row_groups(const qm_metric_t *m, size_t nr, size_t *group)
{
    size_t ng = 0, *next = group + nr + 1, *last = next + nr + 1;
    for (size_t a = 0; a < nr; a++) {
        group[a] = a;
        next[a] = nr;
        last[a] = a;
        if (m->focus != QM_PER_MODULE)
            continue;
        const char *ma = m->procs[a].module ? m->procs[a].module : "?";
        for (size_t b = 0; b < a; b++)
            if (group[b] == b && strcmp(m->procs[b].module ? m->procs[b].module : "?", ma) == 0) {
                group[a] = b;
                next[last[b]] = a;
                last[b] = a;
                break;
            }
    }
    for (size_t a = 0; a < nr; a++)
        ng += group[a] == a;
    return ng;
}

/* Each row A of the group whose first row is G (GROUP and NR: row_groups'). */
#define FOR_GROUP(a, g, group, nr) for (size_t a = (g); a < (nr); a = (group)[(nr) + 1 + a])

/* The focus of group G (its first row) of M. */
static void
group_name(const qm_metric_t *m, size_t g, char *buf, size_t len)
{
    if (m->focus == QM_TOTAL)
        snprintf(buf, len, "total");
    else if (m->focus == QM_PER_MODULE)
        snprintf(buf, len, "module %s", m->procs[g].module ? m->procs[g].module : "?");
    else
        snprintf(buf, len, "%s", m->procs[g].name);
}

/* Is group G (first row) of M measured: one of its procedures is. */
static int
group_measured(const qm_metric_t *m, const size_t *group, size_t nr, size_t g)
{
    if (m->focus == QM_TOTAL)
        return 1;
    FOR_GROUP(a, g, group, nr)
        if (m->procs[a].measured)
            return 1;
    return 0;
}

/*
 * Per procedure (or module) per thread: a row for each pair in which something was
 * counted ("PROC / thread 0x..."), procedure-major; a procedure not measured has one
 * row, "not measured". W: the per-thread variable's words (keys, then blocks).
 */
static int
pair_rows(const qm_metric_t *m, size_t i, const uint64_t *w, size_t nr, const size_t *group,
          double cpn, qm_row_t **rows, size_t *nrows, size_t *cap)
{
    const uint64_t *blocks = w + QPT_MAX_THREADS;
    size_t sw = m->stride / 8;
    uint64_t wpr = row_words(m->kind);
    int rc = 0;
    for (size_t g = 0; g < nr && rc == 0; g++) {
        if (group[g] != g)
            continue;
        char name[160];
        group_name(m, g, name, sizeof(name));
        if (!group_measured(m, group, nr, g)) {
            qm_row_t r = make_row(m, i, (tally_t) { 0, 0 }, cpn, 0);
            snprintf(r.focus, sizeof(r.focus), "%s", name);
            rc = push_row(rows, nrows, cap, &r);
            continue;
        }
        for (size_t k = 0; k <= QPT_MAX_THREADS && rc == 0; k++) {
            if (k < QPT_MAX_THREADS && w[k] == 0)
                continue;
            const uint64_t *b = blocks + k * sw;
            tally_t t = { 0, 0 };
            FOR_GROUP(a, g, group, nr)
                merge(m->kind, &t, block_tally(m, b, m->base + a * wpr));
            if (t.n == 0 && t.acc == 0)
                continue; /* the thread did not count here */
            qm_row_t r = make_row(m, i, t, cpn, 1);
            if (k < QPT_MAX_THREADS) {
                snprintf(r.focus, sizeof(r.focus), "%.100s / thread 0x%llx", name,
                         (unsigned long long)w[k]);
                r.thread = w[k];
            } else
                snprintf(r.focus, sizeof(r.focus), "%.100s / threads beyond %d", name,
                         QPT_MAX_THREADS);
            r.thread_at = strlen(name) < 100 ? strlen(name) + 3 : 103;
            rc = push_row(rows, nrows, cap, &r);
        }
    }
    return rc;
}

void
qm_symbolize(qpt_space_t *s, qm_row_t *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t off;
        const char *name;
        if (!rows[i].keyed || rows[i].key < 4096
            || (name = qpt_symbol_at(s, rows[i].key, &off)) == NULL)
            continue;
        size_t l = strlen(rows[i].focus);
        if (off == 0)
            snprintf(rows[i].focus + l, sizeof(rows[i].focus) - l, " (%s)", name);
        else
            snprintf(rows[i].focus + l, sizeof(rows[i].focus) - l, " (%s+0x%llx)", name,
                     (unsigned long long)off);
    }
}

static int
cmp_row_value(const void *a, const void *b)
{
    const qm_row_t *x = a, *y = b;
    return x->value > y->value ? -1 : x->value < y->value;
}

/* The rows of metric I, per value: one for each value seen (largest count first), then
 * the values beyond the table's. */
static int
value_rows(const qm_set_t *set, size_t i, qm_read_fn read, void *arg, qm_row_t **rows,
           size_t *nrows, size_t *cap, char *why, size_t whylen)
{
    const qm_metric_t *m = &set->v[i];
    size_t nw = QPT_PER_THREAD_SIZE(8) / 8;
    uint64_t *w = calloc(nw, sizeof(uint64_t));
    if (w == NULL)
        return QPT_ENOMEM;
    int rc = read(arg, m->kvar, w, nw);
    if (rc < 0) {
        if (why != NULL && whylen > 0)
            snprintf(why, whylen, "%s: its words cannot be read (%s)", m->name,
                     qpt_strerror(rc));
        free(w);
        return rc;
    }
    const uint64_t *count = w + QPT_MAX_THREADS;
    size_t first = *nrows;
    for (size_t k = 0; k < QPT_MAX_THREADS && rc == 0; k++) {
        if (w[k] == 0)
            continue;
        uint64_t v = w[k] ^ QPT_KEY_XOR;
        qm_row_t r = { i, m->kind, "", count[k], 1, 1, v, 0, 0, 0, "", 0 };
        if ((int64_t)v > -1000000 && (int64_t)v < 1000000)
            snprintf(r.focus, sizeof(r.focus), "%s=%lld", m->key_text, (long long)v);
        else
            snprintf(r.focus, sizeof(r.focus), "%s=0x%llx", m->key_text, (unsigned long long)v);
        rc = push_row(rows, nrows, cap, &r);
    }
    if (rc == 0)
        qsort(*rows + first, *nrows - first, sizeof(qm_row_t), cmp_row_value);
    if (rc == 0 && (count[QPT_MAX_THREADS] != 0 || *nrows == first)) {
        qm_row_t r = { i, m->kind, "", count[QPT_MAX_THREADS], 1, 0, 0, 0, 0, 0, "", 0 };
        snprintf(r.focus, sizeof(r.focus), *nrows == first ? "no value seen"
                                                           : "values beyond the first %d",
                 QPT_MAX_THREADS);
        rc = push_row(rows, nrows, cap, &r);
    }
    free(w);
    return rc;
}

/*****************************************************************************
 * Timers read while running
 */

#define READ_TRIES 4 /* reads of a thread's changing block before its running part is
                      * left out */

/* (qm_priv.h) */
int64_t
qm_thread_cpu_ns(int pid, uint64_t tid)
{
    char path[96];
    snprintf(path, sizeof(path), "/proc/%d/task/%llu/schedstat", pid, (unsigned long long)tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    unsigned long long run;
    int ok = fscanf(f, "%llu", &run) == 1;
    fclose(f);
    return ok && run <= INT64_MAX ? (int64_t)run : -1;
}

/* Is some timer of metric M active in block B (its words, m->stride bytes)? */
static int
block_active(const qm_metric_t *m, const uint64_t *b, size_t nr)
{
    for (size_t row = 0; row < nr; row++)
        if ((int64_t)b[m->base + QM_ROW_WORDS(m->kind) * row] > 0)
            return 1;
    return 0;
}

/*
 * Add the running part of M's active timers to the totals of block K (at B, read from
 * the process PID by READ; NR rows), in place. An active row is read again until two
 * reads of its words (depth, start, total, and a CPU timer's thread id) agree: the
 * snippets store a start before the depth leaves 0 and the depth before the total at a
 * stop, so an agreed read shows no start of an inactive timer. Rows are judged one by
 * one: the other procedures the thread calls meanwhile do not hide a long call.
 */
static void
add_running(const qm_metric_t *m, size_t k, uint64_t *b, size_t nr, qm_read_fn read,
            void *arg, int pid)
{
    size_t sw = m->stride / 8;
    uint64_t addr = m->var + 8 * QPT_MAX_THREADS + 8 * (uint64_t)k * sw;
    /* (a CPU timer's block has the thread's id before its rows: base 1 or 4) */
    int has_tid = m->kind == QM_CPU && (m->base == 1 || m->base == 4);
    uint64_t *again = malloc(m->stride);
    unsigned char *stable = calloc(nr, 1);
    size_t left = 0;
    for (size_t row = 0; stable != NULL && row < nr; row++)
        if ((int64_t)b[m->base + QM_ROW_WORDS(m->kind) * row] > 0)
            left++;
        else
            stable[row] = 1; /* inactive: nothing to add */
    for (int t = 1; again != NULL && stable != NULL && left > 0 && t < READ_TRIES; t++) {
        if (read(arg, addr, again, sw) < 0)
            break;
        int same_tid = !has_tid || again[m->base - 1] == b[m->base - 1];
        for (size_t row = 0; row < nr; row++) {
            size_t w = m->base + QM_ROW_WORDS(m->kind) * row;
            if (stable[row])
                continue;
            if (same_tid && memcmp(again + w, b + w, 24) == 0) {
                stable[row] = 1;
                left--;
            }
            memcpy(b + w, again + w, 24);
        }
        if (has_tid)
            b[m->base - 1] = again[m->base - 1];
    }
    free(again);
    int64_t cpu = has_tid && b[m->base - 1] != 0 ? qm_thread_cpu_ns(pid, b[m->base - 1]) : -1;
    uint64_t now = qp_cycles(); /* after the reads: not before a start they saw */
    for (size_t row = 0; stable != NULL && row < nr; row++) {
        uint64_t *w = b + m->base + QM_ROW_WORDS(m->kind) * row; /* depth, start, total */
        if (!stable[row] || (int64_t)w[0] <= 0 || w[1] == 0)
            continue; /* (unstable: busy starting and stopping; counts as calls return) */
        if (m->kind == QM_WALL && now > w[1])
            w[2] += now - w[1];
        else if (m->kind == QM_CPU && cpu > 0 && (uint64_t)cpu > w[1])
            w[2] += (uint64_t)cpu - w[1];
    }
    free(stable);
}

/*
 * The totals and calls of M's shared timers (W: NR rows of 4 words, depth, start, total,
 * calls; read from
 * M->var) into SUM, with the running part of those active now when PID is a live
 * process: an active row's words are read again until two reads agree (the snippets
 * store the start before the depth leaves 0, as add_running's).
 */
static void
shared_timers(const qm_metric_t *m, uint64_t *w, size_t nr, tally_t *sum, qm_read_fn read,
              void *arg, int pid)
{
    uint64_t again[4];
    for (size_t row = 0; row < nr; row++) {
        uint64_t *t = w + 4 * row;
        int stable = (int64_t)t[0] <= 0 || pid <= 0;
        for (int k = 1; !stable && k < READ_TRIES; k++) {
            if (read(arg, m->var + 32 * row, again, 3) < 0)
                break;
            stable = memcmp(again, t, 24) == 0;
            memcpy(t, again, 24);
        }
        uint64_t now = qp_cycles(); /* after the reads: not before a start they saw */
        sum[row].acc = t[2];
        sum[row].n = t[3];
        if (stable && pid > 0 && (int64_t)t[0] > 0 && t[1] != 0 && now > t[1])
            sum[row].acc += now - t[1];
    }
}

void
qm_rows_keep_larger(qm_row_t *rows, size_t n, const qm_row_t *prev, size_t nprev)
{
    if (rows == NULL || prev == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        qm_row_t *r = &rows[i];
        if (r->kind == QM_COUNT)
            continue;
        /* Rows come in the same order from sample to sample: try the same index first. */
        for (size_t k = 0; k < nprev; k++) {
            const qm_row_t *p = &prev[(i + k) % nprev];
            if (p->metric == r->metric && p->keyed == r->keyed && p->key == r->key
                && strcmp(p->focus, r->focus) == 0) {
                if (p->value > r->value)
                    r->value = p->value;
                break;
            }
        }
    }
}

/* The NW words of M into W: a per-CPU variable's copies summed (all read at once). */
static int
read_summed(const qm_metric_t *m, qm_read_fn read, void *arg, uint64_t *w, size_t nw)
{
    if (m->cpu.ncpu == 0)
        return read(arg, m->var, w, nw);
    size_t sw = m->cpu.stride / 8;
    uint64_t *all = malloc(m->cpu.ncpu * m->cpu.stride);
    int rc = all == NULL ? QPT_ENOMEM : read(arg, m->var, all, sw * m->cpu.ncpu);
    for (size_t k = 0; rc == 0 && k < nw; k++) {
        w[k] = 0;
        for (size_t cpu = 0; cpu < m->cpu.ncpu; cpu++)
            w[k] += all[cpu * sw + k];
    }
    free(all);
    return rc;
}

int
qm_results(const qm_set_t *set, qm_read_fn read, void *arg, double cpn, qm_row_t **rowsp,
           size_t *nrowsp, char *why, size_t whylen)
{
    return qm_results_running(set, read, arg, cpn, 0, rowsp, nrowsp, why, whylen);
}

int
qm_results_running(const qm_set_t *set, qm_read_fn read, void *arg, double cpn, int pid,
                   qm_row_t **rowsp, size_t *nrowsp, char *why, size_t whylen)
{
    if (set == NULL || read == NULL || rowsp == NULL || nrowsp == NULL)
        return QPT_EINVAL;
    qm_row_t *rows = NULL;
    size_t nrows = 0, cap = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < set->n; i++) {
        const qm_metric_t *m = &set->v[i];
        if (m->state != QM_ON)
            continue; /* not placed, or taken out */
        if (m->focus == QM_PER_VALUE) {
            rc = value_rows(set, i, read, arg, &rows, &nrows, &cap, why, whylen);
            continue;
        }
        uint64_t wpr = row_words(m->kind);
        int by_proc = m->focus == QM_PER_PROC || m->focus == QM_PER_MODULE
                      || m->focus == QM_PER_SITE;
        size_t nr = by_proc ? m->nprocs : 1;
        tally_t *sum = calloc(nr + 1, sizeof(tally_t));
        size_t *group = calloc(3 * (nr + 1), sizeof(size_t)); /* row_groups */
        uint64_t *w = NULL;
        size_t nw;
        if (sum == NULL || group == NULL) {
            free(sum);
            free(group);
            rc = QPT_ENOMEM;
            break;
        }
        if (m->per_thread)
            nw = QPT_PER_THREAD_SIZE(m->stride) / 8;
        else
            nw = nr * wpr;
        if ((w = calloc(nw + 1, sizeof(uint64_t))) == NULL)
            rc = QPT_ENOMEM;
        else if ((rc = read_summed(m, read, arg, w, nw)) < 0) {
            if (why != NULL && whylen > 0)
                snprintf(why, whylen, "%s: its words cannot be read (%s)", m->name,
                         qpt_strerror(rc));
        }
        size_t before = nrows;
        if (rc == 0)
            row_groups(m, nr, group);
        if (rc == 0 && m->by_thread && m->per_thread) {
            rc = pair_rows(m, i, w, nr, group, cpn, &rows, &nrows, &cap);
            free(sum);
            free(group);
            free(w);
            continue;
        }
        if (rc == 0 && m->per_thread) {
            uint64_t *blocks = w + QPT_MAX_THREADS;
            size_t sw = m->stride / 8;
            /* Running calls, in the threads' own blocks (not the one threads beyond
             * QPT_MAX_THREADS share: no one start is theirs). */
            for (size_t k = 0; pid > 0 && m->kind != QM_COUNT && k < QPT_MAX_THREADS; k++)
                if (w[k] != 0 && block_active(m, blocks + k * sw, nr))
                    add_running(m, k, blocks + k * sw, nr, read, arg, pid);
            for (size_t k = 0; k <= QPT_MAX_THREADS && rc == 0; k++) {
                /* Used keys, and the shared copy of the threads beyond them. */
                if (k < QPT_MAX_THREADS && w[k] == 0)
                    continue;
                const uint64_t *b = blocks + k * sw;
                if (m->focus == QM_PER_THREAD) {
                    qm_row_t r = make_row(m, i, block_tally(m, b, m->base), cpn, 1);
                    r.thread = k < QPT_MAX_THREADS ? w[k] : 0;
                    if (k < QPT_MAX_THREADS)
                        snprintf(r.focus, sizeof(r.focus), "thread 0x%llx",
                                 (unsigned long long)w[k]);
                    else
                        snprintf(r.focus, sizeof(r.focus), "threads beyond %d",
                                 QPT_MAX_THREADS);
                    if (k < QPT_MAX_THREADS || r.value != 0)
                        rc = push_row(&rows, &nrows, &cap, &r);
                    continue;
                }
                for (size_t row = 0; row < nr; row++)
                    merge(m->kind, &sum[row], block_tally(m, b, m->base + row * wpr));
            }
        } else if (rc == 0 && m->shared)
            shared_timers(m, w, nr, sum, read, arg, pid);
        else if (rc == 0)
            for (size_t row = 0; row < nr; row++)
                sum[row].n = w[row];
        if (rc == 0 && m->focus == QM_PER_THREAD && nrows == before) {
            qm_row_t r = make_row(m, i, (tally_t) { 0, 0 }, cpn, 1);
            snprintf(r.focus, sizeof(r.focus), "no thread ran it");
            rc = push_row(&rows, &nrows, &cap, &r);
        }
        if (rc == 0 && m->focus == QM_PER_SITE && nr > 0 && m->kind != QM_WALL && m->kind != QM_CPU
            && m->from == NULL) { /* (from(): no such row, every row a site) */
            /* The last row holds every call: the calls of no site are those less the
             * sites' (counts and sums only: qm_parse refuses the others). */
            tally_t sites = { 0, 0 };
            for (size_t row = 0; row + 1 < nr; row++)
                merge(m->kind, &sites, sum[row]);
            tally_t *last = &sum[nr - 1];
            last->n = last->n >= sites.n ? last->n - sites.n : 0;
            last->acc -= sites.acc;
        }
        if (rc == 0 && m->focus != QM_PER_THREAD)
            for (size_t g = 0; g < nr && rc == 0; g++) {
                if (group[g] != g)
                    continue;
                tally_t t = { 0, 0 };
                FOR_GROUP(a, g, group, nr)
                    merge(m->kind, &t, sum[a]);
                qm_row_t r = make_row(m, i, t, cpn, group_measured(m, group, nr, g));
                group_name(m, g, r.focus, sizeof(r.focus));
                rc = push_row(&rows, &nrows, &cap, &r);
            }
        free(sum);
        free(group);
        free(w);
    }
    if (rc < 0) {
        free(rows);
        return rc;
    }
    *rowsp = rows;
    *nrowsp = nrows;
    return 0;
}
