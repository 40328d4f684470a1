/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Where the metrics are (the layout, saved next to a rewritten program as text) and
 * what they measured: the metric x focus table, per-thread blocks summed over threads.
 *
 * The layout file:
 *   qpt-metrics-layout 1
 *   metric KIND FOCUS PER_THREAD VAR STRIDE BASE NPROCS
 *   name THE METRIC'S NAME (the rest of the line)
 *   proc MEASURED NAME                (NPROCS lines)
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

#include "metrics/qm_priv.h"

#define MAX_PROCS 10000000u
#define MAX_LINE 8192

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

int
qm_layout_save(const qm_set_t *set, uint64_t id, const char *path, char *why, size_t whylen)
{
    if (set == NULL || path == NULL || !set->placed)
        return QPT_EINVAL;
    char tmp[4200];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid()) >= (int)sizeof(tmp))
        return QPT_EINVAL;
    strbuf_t b = { 0 };
    sb_printf(&b, "qpt-metrics-layout 2\nid %016llx\n", (unsigned long long)id);
    for (size_t i = 0; i < set->n; i++) {
        const qm_metric_t *m = &set->v[i];
        if (m->state != QM_ON)
            continue;
        sb_printf(&b, "metric %d %d %d %llx %llu %llu %zu\nname %s\n", m->kind, m->focus,
                  m->per_thread, (unsigned long long)m->var, (unsigned long long)m->stride,
                  (unsigned long long)m->base, m->nprocs, m->name);
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
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644), e = 0;
    if (fd < 0)
        e = errno;
    else {
        size_t done = 0;
        while (done < b.n && e == 0) {
            ssize_t w = write(fd, b.p + done, b.n - done);
            if (w < 0 && errno != EINTR)
                e = errno;
            else if (w > 0)
                done += (size_t)w;
        }
        if (close(fd) != 0 && e == 0)
            e = errno;
        if (e == 0 && rename(tmp, path) < 0)
            e = errno;
        if (e != 0)
            unlink(tmp);
    }
    free(b.p);
    if (e != 0) {
        if (why != NULL && whylen > 0)
            snprintf(why, whylen, "%s: %s", path, strerror(e));
        return QPT_EIO;
    }
    return 0;
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
    int rc = qm_layout_read(f, path, out, why, whylen);
    fclose(f);
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
    /* Version 2 has the rewrite's id; 1 (before ids) is read, unchecked. */
    int v2 = 0;
    if (rc == 0 && (read_line(f, line, MAX_LINE) != 1
                    || (strcmp(line, "qpt-metrics-layout 1") != 0
                        && !(v2 = strcmp(line, "qpt-metrics-layout 2") == 0))))
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
        if (sscanf(line, "metric %d %d %d %llx %llu %llu %zu%c", &m.kind, &m.focus,
                   &m.per_thread, &var, &stride, &base, &np, &tail) != 7
            || m.kind < QM_COUNT || m.kind > QM_CPU || m.focus < QM_PER_PROC
            || m.focus > QM_PER_SITE || (m.per_thread != 0 && m.per_thread != 1) || np > MAX_PROCS
            || stride % 8 != 0 || stride > 65536 || (base != 0 && base != 3)) {
            rc = QPT_EFORMAT;
            break;
        }
        uint64_t wpr = m.kind == QM_COUNT ? 1 : 3,
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
            if (!r->measured || r->metric >= set->n)
                continue;
            int threads = set->v[r->metric].focus == QM_PER_THREAD;
            const char *focus = threads ? "threads" : r->focus;
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
                g[ng] = (agg_t) { r->metric, r->kind, "", 0, UINT64_MAX, 0, 0 };
                snprintf(g[ng].focus, sizeof(g[ng].focus), "%s", focus);
                ng++;
            }
            g[x].sum += r->value;
            g[x].min = r->value < g[x].min ? r->value : g[x].min;
            g[x].max = r->value > g[x].max ? r->value : g[x].max;
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
        if (k == 1 && strcmp(g[x].focus, "threads") != 0)
            continue;
        g[kept++] = g[x];
    }
    ng = kept;
    for (size_t x = 0; x < ng; x++) {
        /* Over processes, a process without the row is a 0; over threads, the threads. */
        uint64_t over = strcmp(g[x].focus, "threads") == 0 ? g[x].count : k;
        uint64_t min = g[x].count < over ? 0 : g[x].min;
        static const char *const what[] = { "sum", "min", "max", "mean" };
        uint64_t v[4] = { g[x].sum, min, g[x].max, over ? g[x].sum / over : 0 };
        for (int w = 0; w < 4; w++) {
            qm_row_t *r = &o[4 * x + (size_t)w];
            *r = (qm_row_t) { g[x].metric, g[x].kind, "", v[w], 1, 0, 0 };
            snprintf(r->focus, sizeof(r->focus), "%s: %.150s", what[w], g[x].focus);
        }
    }
    free(g);
    *out = o;
    *nout = 4 * ng;
    return 0;
}

static uint64_t in_unit(const qm_metric_t *m, uint64_t v, double cpn);

/* Per module: the procedures' sums SUM added up by module (a module is measured when one
 * of its procedures is), in the order the modules first appear. */
static int
module_rows(const qm_metric_t *m, size_t i, const uint64_t *sum, double cpn, qm_row_t **rows,
            size_t *nrows, size_t *cap)
{
    int rc = 0;
    char *done = calloc(m->nprocs + 1, 1);
    if (done == NULL)
        return QPT_ENOMEM;
    for (size_t a = 0; a < m->nprocs && rc == 0; a++) {
        if (done[a])
            continue;
        const char *mod = m->procs[a].module ? m->procs[a].module : "?";
        uint64_t v = 0;
        int measured = 0;
        for (size_t b = a; b < m->nprocs; b++) {
            const char *mb = m->procs[b].module ? m->procs[b].module : "?";
            if (done[b] || strcmp(mb, mod) != 0)
                continue;
            done[b] = 1;
            v += sum[b];
            measured |= m->procs[b].measured;
        }
        qm_row_t r = { i, m->kind, "", in_unit(m, v, cpn), measured, 0, 0 };
        snprintf(r.focus, sizeof(r.focus), "module %s", mod);
        rc = push_row(rows, nrows, cap, &r);
    }
    free(done);
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
        qm_row_t r = { i, m->kind, "", count[k], 1, 1, v };
        if ((int64_t)v > -1000000 && (int64_t)v < 1000000)
            snprintf(r.focus, sizeof(r.focus), "%s=%lld", m->key_text, (long long)v);
        else
            snprintf(r.focus, sizeof(r.focus), "%s=0x%llx", m->key_text, (unsigned long long)v);
        rc = push_row(rows, nrows, cap, &r);
    }
    if (rc == 0)
        qsort(*rows + first, *nrows - first, sizeof(qm_row_t), cmp_row_value);
    if (rc == 0 && (count[QPT_MAX_THREADS] != 0 || *nrows == first)) {
        qm_row_t r = { i, m->kind, "", count[QPT_MAX_THREADS], 1, 0, 0 };
        snprintf(r.focus, sizeof(r.focus), *nrows == first ? "no value seen"
                                                           : "values beyond the first %d",
                 QPT_MAX_THREADS);
        rc = push_row(rows, nrows, cap, &r);
    }
    free(w);
    return rc;
}

int
qm_results(const qm_set_t *set, qm_read_fn read, void *arg, double cpn, qm_row_t **rowsp,
           size_t *nrowsp, char *why, size_t whylen)
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
        uint64_t wpr = m->kind == QM_COUNT ? 1 : 3, off = m->kind == QM_COUNT ? 0 : 2;
        int by_proc = m->focus == QM_PER_PROC || m->focus == QM_PER_MODULE
                      || m->focus == QM_PER_SITE;
        size_t nr = by_proc ? m->nprocs : 1;
        uint64_t *sum = calloc(nr + 1, sizeof(uint64_t));
        uint64_t *w = NULL;
        size_t nw;
        if (sum == NULL) {
            rc = QPT_ENOMEM;
            break;
        }
        if (m->per_thread)
            nw = QPT_PER_THREAD_SIZE(m->stride) / 8;
        else
            nw = nr;
        if ((w = calloc(nw + 1, sizeof(uint64_t))) == NULL)
            rc = QPT_ENOMEM;
        else if ((rc = read(arg, m->var, w, nw)) < 0) {
            if (why != NULL && whylen > 0)
                snprintf(why, whylen, "%s: its words cannot be read (%s)", m->name,
                         qpt_strerror(rc));
        }
        size_t before = nrows;
        if (rc == 0 && m->per_thread) {
            const uint64_t *blocks = w + QPT_MAX_THREADS;
            size_t sw = m->stride / 8;
            for (size_t k = 0; k <= QPT_MAX_THREADS && rc == 0; k++) {
                /* Used keys, and the shared copy of the threads beyond them. */
                if (k < QPT_MAX_THREADS && w[k] == 0)
                    continue;
                const uint64_t *b = blocks + k * sw;
                if (m->focus == QM_PER_THREAD) {
                    qm_row_t r = { i, m->kind, "", in_unit(m, b[m->base + off], cpn), 1, 0, 0 };
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
                    sum[row] += b[m->base + row * wpr + off];
            }
        } else if (rc == 0)
            for (size_t row = 0; row < nr; row++)
                sum[row] = w[row];
        if (rc == 0 && m->focus == QM_PER_THREAD && nrows == before) {
            qm_row_t r = { i, m->kind, "no thread ran it", 0, 1, 0, 0 };
            rc = push_row(&rows, &nrows, &cap, &r);
        }
        if (rc == 0 && m->focus == QM_PER_SITE && nr > 0) {
            /* The last row holds every call: the calls of no site are those less the
             * sites'. */
            uint64_t sites = 0;
            for (size_t row = 0; row + 1 < nr; row++)
                sites += sum[row];
            sum[nr - 1] = sum[nr - 1] >= sites ? sum[nr - 1] - sites : 0;
        }
        if (rc == 0 && m->focus == QM_PER_MODULE)
            rc = module_rows(m, i, sum, cpn, &rows, &nrows, &cap);
        else if (rc == 0 && m->focus != QM_PER_THREAD)
            for (size_t row = 0; row < nr && rc == 0; row++) {
                qm_row_t r = { i, m->kind, "", in_unit(m, sum[row], cpn), 1, 0, 0 };
                if (m->focus == QM_TOTAL)
                    snprintf(r.focus, sizeof(r.focus), "total");
                else {
                    snprintf(r.focus, sizeof(r.focus), "%s", m->procs[row].name);
                    r.measured = m->procs[row].measured;
                }
                rc = push_row(&rows, &nrows, &cap, &r);
            }
        free(sum);
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
