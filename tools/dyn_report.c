/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * dyn's tables and reports: a session's rows (procedures or call sites) live and at the
 * end, the --trace file, notes, the histograms and the final table (with -o its CSV).
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/dyn_priv.h"

/*****************************************************************************
 * Tables: a session's rows (procedures or call sites), live and at the end
 */

/* CLOCK_MONOTONIC in seconds. */
double
dyn_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int
row_cmp(const void *a, const void *b)
{
    const dyn_row_t *x = a, *y = b;
    if (x->rate != y->rate)
        return x->rate < y->rate ? 1 : -1;
    if (x->calls != y->calls)
        return x->calls < y->calls ? 1 : -1;
    return strcmp(x->name, y->name);
}

/*
 * The rows of the N points named NAMES with the counts NOW (PREV: at the previous table,
 * for rates, may be NULL; NS: times, may be NULL), by rate, then calls, then name
 * (malloc'ed). NULL when out of memory.
 */
dyn_row_t *
dyn_rows_make(size_t n, const char *const *names, const uint64_t *now,
    const uint64_t *prev, const int64_t *ns)
{
    dyn_row_t *r = calloc(n ? n : 1, sizeof(*r));
    if (r == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        r[i].name = names[i];
        r[i].point = i;
        r[i].calls = now[i];
        r[i].rate = prev != NULL ? now[i] - prev[i] : 0;
        r[i].wall_ns = ns != NULL ? ns[i] : -1;
    }
    qsort(r, n, sizeof(*r), row_cmp);
    return r;
}


static int
trace_sample(const dyn_live_t *l)
{
    for (size_t i = 0; i < l->nrows; i++) {
        const dyn_row_t *r = &l->rows[i];
        if (r->point >= dyn_trace.nlast) {
            size_t n = 2 * r->point + 16;
            uint64_t *v = realloc(dyn_trace.last, n * sizeof(uint64_t));
            if (v != NULL)
                dyn_trace.last = v;
            int64_t *w = realloc(dyn_trace.wall, n * sizeof(int64_t));
            if (w != NULL)
                dyn_trace.wall = w;
            if (v == NULL || w == NULL)
                return -1;
            memset(v + dyn_trace.nlast, 0, (n - dyn_trace.nlast) * sizeof(uint64_t));
            memset(w + dyn_trace.nlast, 0, (n - dyn_trace.nlast) * sizeof(int64_t));
            dyn_trace.nlast = n;
        }
        if (r->rate == 0 && dyn_trace.last[r->point] == 0)
            continue;
        dyn_trace.last[r->point] = r->rate;
        /* A timed procedure: the share of the interval spent inside it (its timer). */
        char busy[64] = "";
        if (r->wall_ns >= 0 && l->dt > 0) {
            snprintf(busy, sizeof(busy), ",\"inside %%\":%.2f",
                100.0 * (double)(r->wall_ns - dyn_trace.wall[r->point]) / (l->dt * 1e9));
            dyn_trace.wall[r->point] = r->wall_ns;
        }
        char *dm = dyn_show_name(r->name);
        fprintf(dyn_trace.f,
            "%s\n{\"ph\":\"C\",\"pid\":%d,\"tid\":%d,\"ts\":%.0f,\"name\":",
            dyn_trace.nevents++ ? "," : "", l->pid, l->pid, l->t * 1e6);
        tool_json_string(dyn_trace.f, dm != NULL ? dm : r->name);
        free(dm);
        fprintf(dyn_trace.f, ",\"args\":{\"calls/s\":%.1f,\"calls\":%llu%s}}",
                l->dt > 0 ? (double)r->rate / l->dt : 0.0, (unsigned long long)r->calls, busy);
    }
    return ferror(dyn_trace.f) ? -1 : 0;
}

/*****************************************************************************
 * Reports
 */

/* A row's name as shown (malloc'ed; NULL: show it as it is): demangled, also after the
 * "MODULE:" of a library's row. */
char *
dyn_show_name(const char *name)
{
    char *dm = qpt_demangle(name), *out;
    const char *sep;
    if (dm != NULL || (sep = qpt_module_sep(name)) == NULL
        || (dm = qpt_demangle(sep + 1)) == NULL)
        return dm;
    size_t n = (size_t)(sep - name) + 1 + strlen(dm) + 1;
    if ((out = malloc(n)) != NULL)
        snprintf(out, n, "%.*s%s", (int)(sep - name) + 1, name, dm);
    free(dm);
    return out;
}

/* The live table L; nonzero once standard output is gone. */
int
dyn_print_live(void *arg, const dyn_live_t *l)
{
    size_t shown = 0;
    (void)arg;
    if (dyn_trace.f != NULL && trace_sample(l) < 0) {
        fprintf(stderr, "%s: %s: %s\n", dyn_prog_name, dyn_trace.path,
            strerror(errno ? errno : EIO));
        return 1;
    }
    if (dyn_trace.f != NULL && !dyn_trace.tables)
        return 0;
    if (isatty(STDOUT_FILENO))
        fputs("\033[H\033[J", stdout);
    /* Timed rows (--time): their time inside so far, running calls included. */
    int timed = 0;
    for (size_t i = 0; i < l->nrows; i++)
        timed |= l->rows[i].wall_ns >= 0;
    printf("dyn: pid %d  t=%.1fs  %zu %s\n", l->pid, l->t, l->nrows, dyn_what);
    if (timed)
        printf("%14s %16s %14s  %s\n", "calls/s", "calls", "wall ms", "procedure");
    else
        printf("%14s %16s  %s\n", "calls/s", "calls", "procedure");
    for (size_t i = 0; i < l->nrows && shown < 20; i++, shown++) {
        const dyn_row_t *r = &l->rows[i];
        printf("%14.0f %16llu", l->dt > 0 ? (double)r->rate / l->dt : 0.0,
            (unsigned long long)r->calls);
        if (timed && r->wall_ns >= 0)
            printf(" %14.3f", (double)r->wall_ns * 1e-6);
        else if (timed)
            printf(" %14s", "-");
        printf("  %s\n", r->name);
    }
    putchar('\n');
    if (fflush(stdout) != 0 || ferror(stdout))
        dyn_out_closed = 1; /* EPIPE (SIGPIPE is ignored) or EIO: nobody reads any more */
    return dyn_out_closed;
}

/* A note: one line on stderr; DETAIL ones only with -v (*ARG). */
void
dyn_print_note(void *arg, int detail, const char *line)
{
    const int *verbose = arg;
    if (!detail || *verbose)
        fprintf(stderr, "%s: %s\n", dyn_prog_name, line);
}

/* Series shown in the histogram: the most called. */
#define HIST_SERIES 6

/* The calls over time of the most called points, one line per bucket used. */
void
dyn_print_histogram(const dyn_final_t *rep)
{
    const qpt_hist_t *h = rep->hist;
    const uint64_t *c = rep->calls;
    size_t n = rep->npoints, top[HIST_SERIES], ntop = 0;
    for (size_t k = 0; k < HIST_SERIES; k++) {
        size_t best = n;
        for (size_t i = 0; i < n; i++) {
            int taken = 0;
            for (size_t j = 0; j < ntop; j++)
                taken |= top[j] == i;
            if (!taken && c[i] > 0 && (best == n || c[i] > c[best]))
                best = i;
        }
        if (best == n)
            break;
        top[ntop++] = best;
    }
    printf("\ncalls over time (%zu buckets of %.3f s; widths double as the session "
           "grows):\n",
        qpt_hist_used(h), qpt_hist_width(h));
    printf("%10s", "t/s");
    for (size_t j = 0; j < ntop; j++)
        printf(" %14.14s", rep->names[top[j]]);
    putchar('\n');
    for (size_t b = 0; b < qpt_hist_used(h); b++) {
        printf("%10.2f", (double)b * qpt_hist_width(h));
        for (size_t j = 0; j < ntop; j++)
            printf(" %14llu", (unsigned long long)qpt_hist_get(h, top[j], b));
        putchar('\n');
    }
}

/* The metrics over time (--histogram with -e): the largest HIST_SERIES, a line a bucket. */
void
dyn_print_metric_histogram(const qm_set_t *set, const qm_live_report_t *rep)
{
    size_t top[HIST_SERIES], ntop = 0;
    uint64_t tot[HIST_SERIES];
    const qpt_hist_t *h0 = NULL;
    for (size_t i = 0; i < rep->nhist; i++) {
        const qpt_hist_t *h = rep->hist[i];
        if (h == NULL)
            continue;
        h0 = h0 == NULL || qpt_hist_used(h) > qpt_hist_used(h0) ? h : h0;
        uint64_t t = 0;
        for (size_t b = 0; b < qpt_hist_used(h); b++)
            t += qpt_hist_get(h, 0, b);
        /* Insert by total, largest first. */
        size_t k = ntop < HIST_SERIES ? ntop++ : HIST_SERIES;
        while (k > 0 && tot[k - 1] < t) {
            if (k < HIST_SERIES) {
                top[k] = top[k - 1];
                tot[k] = tot[k - 1];
            }
            k--;
        }
        if (k < HIST_SERIES) {
            top[k] = i;
            tot[k] = t;
        }
    }
    if (h0 == NULL)
        return;
    printf("\nmetrics over time (%zu buckets of %.3f s; widths double as the session "
           "grows; timers in ns):\n", qpt_hist_used(h0), qpt_hist_width(h0));
    printf("%10s", "t/s");
    for (size_t j = 0; j < ntop; j++)
        printf(" %16.16s", qm_name(set, top[j]));
    putchar('\n');
    for (size_t b = 0; b < qpt_hist_used(h0); b++) {
        printf("%10.2f", (double)b * qpt_hist_width(h0));
        for (size_t j = 0; j < ntop; j++)
            printf(" %16llu", (unsigned long long)qpt_hist_get(rep->hist[top[j]], 0, b));
        putchar('\n');
    }
}

/* The CSV (CSV, may be NULL) and the final table of REP: the rows never called only
 * with ZEROS (the CSV has every row). 0, or -1 (message printed). */
int
dyn_report(const dyn_final_t *rep, const char *csv, int zeros)
{
    size_t n = rep->npoints;
    const dyn_row_t *r = rep->rows;
    FILE *f;

    /* The CSV first: scripts rely on it even when stdout is a closed pipe. */
    if (csv != NULL) {
        tool_out_t t;
        if (tool_out_open(&t, dyn_prog_name, csv) < 0)
            return -1;
        f = t.f;
        fprintf(f, "name,calls,wall_ns\n");
        for (size_t i = 0; i < n; i++) {
            tool_csv_field(f, r[i].name);
            fprintf(f, ",%llu,", (unsigned long long)r[i].calls);
            if (r[i].wall_ns >= 0)
                fprintf(f, "%lld", (long long)r[i].wall_ns);
            fputc('\n', f);
        }
        if (tool_out_close(&t, dyn_prog_name, 1) < 0)
            return -1;
    }
    printf("dyn: %zu %s, %.3f s\n", n, dyn_what, rep->secs);
    if (rep->timed)
        printf("%16s %14s  %s\n", "calls", "wall ms", "procedure");
    else
        printf("%16s  %s\n", "calls", "procedure");
    size_t hidden = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].calls == 0 && !zeros) {
            hidden++;
            continue;
        }
        printf("%16llu", (unsigned long long)r[i].calls);
        if (r[i].wall_ns >= 0)
            printf(" %14.3f", (double)r[i].wall_ns * 1e-6);
        else if (rep->timed)
            printf(" %14s", "");
        char *dm = dyn_show_name(r[i].name);
        printf("  %s\n", dm != NULL ? dm : r[i].name);
        free(dm);
    }
    if (hidden > 0)
        printf("%16s  (%zu more never called: --zeros lists them)\n", "0", hidden);
    fflush(stdout);
    return 0;
}
