/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * dyn: live instrumentation of a running process (dyn attach PID) or of a program started
 * stopped at its first instruction (dyn run -- COMMAND). Entry counters (with --time also
 * timers at entry and exits, with --calls-from counters at call sites) are patched in,
 * sampled while the process runs, and taken out again; the process is left running.
 * Every session runs on metrics/'s live session engine (qm_live_run, on libqpt): -e's
 * metrics, and the options as metrics: --count P is `count calls(P)`, --time P
 * `time wall(P) shared`, --calls-from F `count calls(*) per call site from(F)`
 * (MODULE:GLOB patterns too, '*:malloc'). This file parses options, turns signals
 * into the sessions' stop flag, prints what they report and maps failures to exit
 * statuses.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "include/qpt/qpt.h"
#include "include/qpt/qpt_rewrite.h"
#include "tools/tool.h"
#include "tools/tool_metrics.h"
#include "tools/dyn_search.h"

enum { EXIT_FAIL = 1, EXIT_USAGE = 2 };

static const char *prog_name = "dyn";
/* What a row of the tables is: "procedures", or "points" with call sites among them. */
static const char *what = "procedures";
/* SIGINT, SIGTERM or SIGHUP arrived: end the session (never in the middle of a step). */
static volatile sig_atomic_t stop_flag;
/* Standard output is a closed pipe (EPIPE): end the session, then fail. */
static int out_closed;

/*
 * --trace=FILE: the calls over time as a Chrome trace (JSON Trace Event Format, which
 * Perfetto and chrome://tracing load): a counter track per procedure, one event per live
 * sample with its calls per second and its calls so far. A procedure appears from its
 * first call; after its last, one event brings it back to 0.
 */
typedef struct trace_out {
    FILE *f;          /* OUT's stream while tracing, else NULL */
    const char *path;
    tool_out_t out;   /* written beside PATH, renamed over it when complete */
    size_t nevents;
    uint64_t *last;   /* per point: its rate in the previous sample (0: none) */
    int64_t *wall;    /* per point: its time inside at the previous sample */
    size_t nlast;
    int tables;       /* print the live tables too (--interval given) */
} trace_out_t;

static trace_out_t trace;

static char *show_name(const char *name);

/*****************************************************************************
 * Tables: a session's rows (procedures or call sites), live and at the end
 */

/* One row of a table and its counts. */
typedef struct row {
    const char *name; /* the row's name */
    size_t point;     /* its index among the session's rows (counting_t.names) */
    uint64_t calls;   /* calls counted */
    uint64_t rate;    /* ... since the previous live table (live tables only, else 0) */
    int64_t wall_ns;  /* time inside so far, -1 when not timed */
} row_t;

/* A live table (--interval). */
typedef struct live {
    int pid;          /* the process */
    double t;         /* seconds since the instrumentation went in */
    double dt;        /* seconds since the previous table */
    const row_t *rows; /* every row, by rate, then calls, then name */
    size_t nrows;
} live_t;

/* The final table. */
typedef struct final {
    size_t npoints;          /* rows */
    char **names;            /* per row: its name */
    const uint64_t *calls;   /* per row: calls counted */
    row_t *rows;             /* every row, by calls (descending), then name */
    int timed;               /* some row has a timer */
    double secs;             /* from the install to the final sample */
    const qpt_hist_t *hist;  /* the calls over time (NULL: no --histogram) */
} final_t;

/* CLOCK_MONOTONIC in seconds. */
static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int
row_cmp(const void *a, const void *b)
{
    const row_t *x = a, *y = b;
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
static row_t *
rows_make(size_t n, const char *const *names, const uint64_t *now, const uint64_t *prev,
          const int64_t *ns)
{
    row_t *r = calloc(n ? n : 1, sizeof(*r));
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
trace_sample(const live_t *l)
{
    for (size_t i = 0; i < l->nrows; i++) {
        const row_t *r = &l->rows[i];
        if (r->point >= trace.nlast) {
            size_t n = 2 * r->point + 16;
            uint64_t *v = realloc(trace.last, n * sizeof(uint64_t));
            if (v != NULL)
                trace.last = v;
            int64_t *w = realloc(trace.wall, n * sizeof(int64_t));
            if (w != NULL)
                trace.wall = w;
            if (v == NULL || w == NULL)
                return -1;
            memset(v + trace.nlast, 0, (n - trace.nlast) * sizeof(uint64_t));
            memset(w + trace.nlast, 0, (n - trace.nlast) * sizeof(int64_t));
            trace.nlast = n;
        }
        if (r->rate == 0 && trace.last[r->point] == 0)
            continue;
        trace.last[r->point] = r->rate;
        /* A timed procedure: the share of the interval spent inside it (its timer). */
        char busy[64] = "";
        if (r->wall_ns >= 0 && l->dt > 0) {
            snprintf(busy, sizeof(busy), ",\"inside %%\":%.2f",
                     100.0 * (double)(r->wall_ns - trace.wall[r->point]) / (l->dt * 1e9));
            trace.wall[r->point] = r->wall_ns;
        }
        char *dm = show_name(r->name);
        fprintf(trace.f, "%s\n{\"ph\":\"C\",\"pid\":%d,\"tid\":%d,\"ts\":%.0f,\"name\":",
                trace.nevents++ ? "," : "", l->pid, l->pid, l->t * 1e6);
        tool_json_string(trace.f, dm != NULL ? dm : r->name);
        free(dm);
        fprintf(trace.f, ",\"args\":{\"calls/s\":%.1f,\"calls\":%llu%s}}",
                l->dt > 0 ? (double)r->rate / l->dt : 0.0, (unsigned long long)r->calls, busy);
    }
    return ferror(trace.f) ? -1 : 0;
}

static void
usage(FILE *f)
{
    fprintf(f,
        "Usage: %s attach PID [OPTIONS]\n"
        "       %s attach PID,PID... | --children PID  -e METRIC...|--commands [OPTIONS]\n"
        "       %s run [OPTIONS] -- COMMAND [ARGS...]\n"
        "       %s clean PID\n"
        "\n"
        "Count calls of procedures of a live process (and time them, or count their\n"
        "call sites): patch counters in, watch them, take them out and leave the\n"
        "process running.\n"
        "\n"
        "Options:\n"
        "  -c, --count=PATTERN    count calls of procedures matching the shell glob\n"
        "                         PATTERN (repeatable); MODULE:GLOB names those of\n"
        "                         the shared libraries matching MODULE, e.g.\n"
        "                         'libc.so.6:malloc', '*:malloc' (every library, also\n"
        "                         those loaded later; also with --time, --calls-from)\n"
        "  -a, --all              every procedure that can be patched safely\n"
        "  -i, --interval=SEC     print a live table every SEC seconds (rates, totals)\n"
        "      --histogram        at the end, print the calls over time of the most "
        "called\n"
        "                         points (32 buckets whose width doubles as needed)\n"
        "  -d, --duration=SEC     end the session after SEC seconds (fractions allowed;\n"
        "                         default: until Ctrl-C or the process ends)\n"
        "      --trace=FILE.json  also write the calls over time as a Chrome trace\n"
        "                         (Perfetto, chrome://tracing): a counter per\n"
        "                         procedure, sampled every --interval (default 0.1 s)\n"
        "      --zeros            the final table lists the rows never called too\n"
        "                         (default: one line counts them)\n"
        "      --debug-dir=DIRS   where a stripped program's separate debug file is\n"
        "                         looked for (colon-separated; default /usr/lib/debug)\n"
        "  -o, --output=FILE.csv  also write the final counts as CSV\n"
        "                         (name,calls,wall_ns; wall_ns empty when not timed)\n"
        "      --follow-exec      taken, changes nothing: after an exec the new\n"
        "                         program is always instrumented again; earlier\n"
        "                         programs' rows are named PROG[N]:NAME; forked\n"
        "                         children add to the same rows (their dlopen/exec\n"
        "                         not followed)\n"
        "      --no-atomic        plain counter increments in one word: calls made by\n"
        "                         threads at the same moment may be lost (default:\n"
        "                         per-CPU increments (rseq), exact and as cheap; locked\n"
        "                         ones where the process has no rseq)\n"
        "  -t, --time=PATTERN     also the wall time inside procedures matching PATTERN\n"
        "                         (from the outermost call to its return: nested and\n"
        "                         recursive calls count once; wall time only, not\n"
        "                         CPU time; repeatable)\n"
        "  -f, --calls-from=FUNC  count the calls made at each call site inside the\n"
        "                         procedures matching FUNC (FUNC+0xOFF->callee;\n"
        "                         repeatable)\n"
        "  -e, --metric=METRIC    measure METRIC (qpt-metrics(5)) instead, e.g.\n"
        "                         'count calls(lua_*) inside(luaV_execute)'; repeatable;\n"
        "                         a library's procedures: 'count calls(libc.so.6:malloc)'\n"
        "      --metrics=FILE     the metrics defined in FILE (repeatable); with -e or\n"
        "                         --metrics, -o writes metric,focus,kind,value,measured\n"
        "      --commands         steer metrics while attached: read commands from\n"
        "                         standard input (add METRIC, remove NAME|#N, list,\n"
        "                         show, help, quit; its end is quit); -e is optional\n"
        "                         (--count, --all, --time: taken as their metrics)\n"
        "      --aggregate        the sum, min, max and mean of per-thread metrics over\n"
        "                         the threads, after the table\n"
        "      --max-overhead=PCT keep the time the metrics add under PCT%% of the\n"
        "                         program's own: one predicted above it is not inserted,\n"
        "                         the costliest goes when the observed total exceeds it\n"
        "  -v, --verbose          list every procedure not patched and why\n"
        "  -h, --help             print this help and exit\n"
        "  -V, --version          print the version and exit\n"
        "\n"
        "Several processes (a parallel job's ranks): PID,PID,... or --children PID (the\n"
        "processes PID started, e.g. mpirun's) with metrics (--count, --all and --time\n"
        "as their metrics too): each process measured at\n"
        "once, its table (named by its rank when its launcher set one), then the sum,\n"
        "min, max and mean over them; --interval shows them together, --commands steers\n"
        "them all at once, --histogram sums their histograms.\n"
        "\n"
        "`dyn clean PID` takes out what a dyn that was killed (SIGKILL) left in PID.\n"
        "`dyn search attach PID` / `dyn search run -- CMD` finds the bottlenecks by itself\n"
        "(see dyn search --help).\n"
        "\n"
        "Ctrl-C (SIGINT), SIGTERM or SIGHUP ends the session cleanly, at any moment. "
        "Exit\n"
        "status: 0 success (dyn run: the program's status when it ended during the\n"
        "session), 1 failure (also: standard output was closed), 2 usage error.\n",
        prog_name, prog_name, prog_name, prog_name);
}

static void
on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

/*****************************************************************************
 * Reports
 */

/* A row's name as shown (malloc'ed; NULL: show it as it is): demangled, also after the
 * "MODULE:" of a library's row. */
static char *
show_name(const char *name)
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
static int
print_live(void *arg, const live_t *l)
{
    size_t shown = 0;
    (void)arg;
    if (trace.f != NULL && trace_sample(l) < 0) {
        fprintf(stderr, "%s: %s: %s\n", prog_name, trace.path, strerror(errno ? errno : EIO));
        return 1;
    }
    if (trace.f != NULL && !trace.tables)
        return 0;
    if (isatty(STDOUT_FILENO))
        fputs("\033[H\033[J", stdout);
    /* Timed rows (--time): their time inside so far, running calls included. */
    int timed = 0;
    for (size_t i = 0; i < l->nrows; i++)
        timed |= l->rows[i].wall_ns >= 0;
    printf("dyn: pid %d  t=%.1fs  %zu %s\n", l->pid, l->t, l->nrows, what);
    if (timed)
        printf("%14s %16s %14s  %s\n", "calls/s", "calls", "wall ms", "procedure");
    else
        printf("%14s %16s  %s\n", "calls/s", "calls", "procedure");
    for (size_t i = 0; i < l->nrows && shown < 20; i++, shown++) {
        const row_t *r = &l->rows[i];
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
        out_closed = 1; /* EPIPE (SIGPIPE is ignored) or EIO: nobody reads any more */
    return out_closed;
}

/* A note: one line on stderr; DETAIL ones only with -v (*ARG). */
static void
print_note(void *arg, int detail, const char *line)
{
    const int *verbose = arg;
    if (!detail || *verbose)
        fprintf(stderr, "%s: %s\n", prog_name, line);
}

/* Buckets of the time histogram (they merge in pairs when the session outlasts them). */
#define HIST_BUCKETS 32
/* Their width at first, in seconds. */
#define HIST_WIDTH 0.05
/* Series shown in the histogram: the most called. */
#define HIST_SERIES 6

/* The calls over time of the most called points, one line per bucket used. */
static void
print_histogram(const final_t *rep)
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
static void
print_metric_histogram(const qm_set_t *set, const qm_live_report_t *rep)
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
static int
report(const final_t *rep, const char *csv, int zeros)
{
    size_t n = rep->npoints;
    const row_t *r = rep->rows;
    FILE *f;

    /* The CSV first: scripts rely on it even when stdout is a closed pipe. */
    if (csv != NULL) {
        tool_out_t t;
        if (tool_out_open(&t, prog_name, csv) < 0)
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
        if (tool_out_close(&t, prog_name, 1) < 0)
            return -1;
    }
    printf("dyn: %zu %s, %.3f s\n", n, what, rep->secs);
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
        char *dm = show_name(r[i].name);
        printf("  %s\n", dm != NULL ? dm : r[i].name);
        free(dm);
    }
    if (hidden > 0)
        printf("%16s  (%zu more never called: --zeros lists them)\n", "0", hidden);
    fflush(stdout);
    return 0;
}

/*****************************************************************************
 * The session
 */

typedef struct opts {
    const char **count; /* --count patterns */
    size_t ncount;
    const char **time; /* --time patterns */
    size_t ntime;
    const char **calls; /* --calls-from patterns */
    size_t ncalls;
    const char **margs; /* -e texts and --metrics files, in order */
    char *morder;       /* 'e' or 'f' for each */
    size_t nm;
    int all;         /* --all */
    int zeros;       /* --zeros */
    double interval; /* --interval, 0 = none */
    double duration; /* --duration, 0 = until the end */
    const char *csv; /* -o */
    int verbose;     /* -v */
    int commands;    /* --commands */
    int children;    /* --children: the processes PID started */
    int aggregate;   /* --aggregate: per-thread metrics' sum, min, max, mean */
    int *pids;       /* attach PID,PID,...: the processes (npids > 1) */
    size_t npids;
    double max_overhead; /* --max-overhead, percent; 0: none */
    const char *trace;   /* --trace=FILE.json */
    int histogram;   /* --histogram: print the calls over time at the end */
    int no_atomic;   /* --no-atomic */
    int follow_exec; /* --follow-exec (taken: every session follows) */
} opts_t;

static int
parse_secs(const char *arg, const char *opt, double *out)
{
    char *end;
    double v = strtod(arg, &end);
    if (end == arg || *end != '\0' || !(v > 0) || v > 1e9) {
        fprintf(stderr, "%s: %s: not a positive number of seconds: '%s'\n", prog_name,
            opt, arg);
        return -1;
    }
    *out = v;
    return 0;
}

static int steering; /* --commands: the screen is the conversation's, never cleared */

/* The analysis on every CPU (at most 8), as qpt-rewrite's: the same
 * result, sooner ready (python3.11 --all: half its time to ready on 2 CPUs). */
static void
analysis_threads(void)
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
        out_closed = 1;
    return out_closed;
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
        out_closed = 1;
}

/*
 * A metrics session (-e, --metrics): metrics/'s qm_live_run on libqpt. Returns the exit
 * status as session() does.
 */
static int
metrics_session(const opts_t *o, int pid, char *const *argv)
{
    qm_set_t *set = NULL;
    if (tool_metrics_parse(prog_name, o->margs, o->morder, o->nm, &set) < 0)
        return EXIT_USAGE;
    steering = o->commands;
    if (set == NULL && (set = qm_new()) == NULL)
        return EXIT_FAIL;
    analysis_threads();
    qm_live_opts_t lo = { 0 };
    lo.pid = pid;
    lo.argv = argv;
    lo.interval = o->interval;
    lo.duration = o->duration;
    lo.stop = (const volatile int *)&stop_flag;
    lo.note = tool_metrics_note;
    lo.note_arg = (void *)prog_name;
    lo.on_sample = print_metrics_live;
    lo.arg = &pid;
    lo.commands = o->commands;
    lo.relocate = 1; /* as --count and --time: what does not fit in place, in a copy */
    lo.max_overhead = o->max_overhead;
    lo.hist_buckets = o->histogram ? HIST_BUCKETS : 0;
    lo.hist_width = HIST_WIDTH;
    lo.commands_fd = STDIN_FILENO;
    lo.on_reply = print_reply;
    qm_live_report_t rep;
    char why[2048];
    int ret = 0;
    int rc = qm_live_run(set, &lo, &rep, why, sizeof(why));
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", prog_name, why);
        ret = rc == QPT_EINVAL || rc == QPT_ENOTFOUND ? EXIT_USAGE : EXIT_FAIL;
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
            if (tool_out_open(&t, prog_name, o->csv) < 0
                || tool_out_close(&t, prog_name,
                                  tool_metrics_print(t.f, set, rep.rows, rep.nrows, TM_CSV) == 0) < 0)
                ret = EXIT_FAIL;
        }
        printf("dyn: pid %d, %.3f s (stopped %.1f ms to insert)", rep.pid, rep.secs,
               rep.stop_ms);
        if (o->commands)
            printf(", %u metric%s added and %u removed by commands", rep.added,
                   rep.added == 1 ? "" : "s", rep.removed);
        printf("\n");
        if (tool_metrics_print(stdout, set, rep.rows, rep.nrows, TM_TEXT) < 0
            || tool_metrics_print_costs(stdout, set, rep.costs, rep.ncosts, 1) < 0)
            out_closed = 1;
        if (o->histogram)
            print_metric_histogram(set, &rep);
        if (ret == 0 && rep.ended && argv != NULL)
            ret = WIFEXITED(rep.status) ? WEXITSTATUS(rep.status) : 128 + WTERMSIG(rep.status);
        if (out_closed) {
            fprintf(stderr, "%s: %d: standard output was closed: session ended\n", prog_name,
                    rep.pid);
            ret = EXIT_FAIL;
        }
    }
    qm_live_report_free(&rep);
    qm_free(set);
    return ret;
}

/*****************************************************************************
 * --count, --all, --time and --calls-from on the live session engine (metrics/qm_live.c)
 *
 * Each --count PATTERN is the metric `count calls(PATTERN)`, --all `count calls(*)`,
 * --time PATTERN `time wall(PATTERN) shared` (one timer a procedure for the process,
 * which counts the calls too: the calls and wall ms columns), --calls-from F `count
 * calls(*) per call site from(F)` (a row per call site), run by qm_live like -e's
 * (it follows dlopen, dlclose, exec and fork; a library glob gets a metric in each
 * library it matches); the engine tells what happens through hooks and events, worded
 * here as dyn has always worded them, and its rows become dyn's tables (a procedure
 * matched twice is one row).
 */

/* Seconds between two samples while a histogram is kept (its series are sampled). */
#define COUNT_STEP 0.05

typedef struct counting {
    const opts_t *o;
    qm_set_t *set;
    const char **mpat;   /* per metric: the pattern of its option */
    char *mkind;         /* per metric: 'c' --count, 'a' --all, 'w' --time (a shared
                          * timer, which counts the calls too), 'f' --calls-from */
    size_t nm;           /* how many metrics */
    int timed;           /* --time: rows have a wall time (wall) */
    double t_start;      /* when dyn started */
    int verbose;         /* -v */
    int pid;
    size_t image;        /* execs so far */
    char **ref;          /* procedures refused since the last placement (names) */
    char **refwhy;       /* ... why */
    uint8_t *refall;     /* ... refused by --all's metric only */
    size_t nref;
    char **names;        /* every row so far, in the order first seen (series) */
    size_t nnames;
    size_t *slots;       /* a hash table of names: index + 1 per slot, 0 empty */
    size_t nslots;       /* its size (a power of 2, at least twice nnames) */
    uint64_t *prev;      /* per row: its calls at the previous live table */
    uint64_t *now;       /* per row: its calls at the last sample */
    int64_t *wall;       /* per row: its time inside at the last sample, ns (-1: none) */
    qpt_hist_t *hist;    /* --histogram: the calls over time (NULL: none) */
    double t0;           /* when the metrics went in (qm_now's clock) */
    double last_table;   /* when the previous live table was shown (0: none yet) */
    double next_table;   /* when the next is due (0: no live tables) */
    int gone;            /* print_live said standard output is gone */
} counting_t;

static void
count_note(counting_t *c, int detail, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void
count_note(counting_t *c, int detail, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    print_note(&c->verbose, detail, line);
}

/* FNV-1a of NAME. */
static size_t
name_hash(const char *name)
{
    uint64_t h = 14695981039346656037ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return (size_t)h;
}

/* Where NAME is (or would go) in the hash table of c->names. */
static size_t
count_slot(const counting_t *c, const char *name)
{
    size_t k = name_hash(name) & (c->nslots - 1);
    while (c->slots[k] != 0 && strcmp(c->names[c->slots[k] - 1], name) != 0)
        k = (k + 1) & (c->nslots - 1);
    return k;
}

/* The hash table with room for one more name; -1 when out of memory. */
static int
count_slots_grow(counting_t *c)
{
    if (2 * (c->nnames + 1) <= c->nslots)
        return 0;
    size_t n = c->nslots ? 2 * c->nslots : 64;
    size_t *v = calloc(n, sizeof(size_t));
    if (v == NULL)
        return -1;
    free(c->slots);
    c->slots = v;
    c->nslots = n;
    for (size_t i = 0; i < c->nnames; i++)
        c->slots[count_slot(c, c->names[i])] = i + 1;
    return 0;
}

/* The index of row NAME among c->names, added when new; SIZE_MAX when out of memory. */
static size_t
count_row(counting_t *c, const char *name)
{
    if (c->nslots > 0) {
        size_t k = count_slot(c, name);
        if (c->slots[k] != 0)
            return c->slots[k] - 1;
    }
    if (count_slots_grow(c) < 0)
        return SIZE_MAX;
    char **v = realloc(c->names, (c->nnames + 1) * sizeof(char *));
    uint64_t *p = v != NULL ? realloc(c->prev, (c->nnames + 1) * sizeof(uint64_t)) : NULL;
    if (v != NULL)
        c->names = v;
    if (p != NULL)
        c->prev = p;
    uint64_t *q = p != NULL ? realloc(c->now, (c->nnames + 1) * sizeof(uint64_t)) : NULL;
    if (q != NULL)
        c->now = q;
    int64_t *w = q != NULL ? realloc(c->wall, (c->nnames + 1) * sizeof(int64_t)) : NULL;
    if (w != NULL)
        c->wall = w;
    if (v == NULL || p == NULL || q == NULL || w == NULL
        || (v[c->nnames] = strdup(name)) == NULL)
        return SIZE_MAX;
    c->prev[c->nnames] = c->now[c->nnames] = 0;
    c->wall[c->nnames] = -1;
    c->slots[count_slot(c, name)] = c->nnames + 1;
    return c->nnames++;
}

/* The name of a row of metric M whose focus is FOCUS: FOCUS, but a call site's
 * (--calls-from) as dyn writes it, "F+0xOFF->CALLEE" (the language's "F+0xOFF ->
 * CALLEE"), into NAME (LEN bytes). */
static const char *
row_name(const counting_t *c, size_t m, const char *focus, char *name, size_t len)
{
    const char *arrow = strstr(focus, " -> ");
    if (arrow == NULL || c->mkind[qm_instance_of(c->set, m)] != 'f')
        return focus;
    snprintf(name, len, "%.*s->%s", (int)(arrow - focus), focus, arrow + 4);
    return name;
}

/* The engine's rows (ROWS, N) as calls per row of c->names, into c->now, and the
 * timers' values (--time) into c->wall. */
static void
count_take(counting_t *c, const qm_row_t *rows, size_t n)
{
    uint8_t *seen = calloc(c->nnames + n + 1, 1);
    for (size_t i = 0; i < c->nnames; i++)
        c->now[i] = 0;
    for (size_t i = 0; i < n; i++) {
        if (!rows[i].measured)
            continue;
        char name[200];
        size_t k = count_row(c, row_name(c, rows[i].metric, rows[i].focus, name, sizeof(name)));
        if (k == SIZE_MAX || seen == NULL)
            continue;
        /* --time's timer: its time (running calls included, never lower than before)
         * and its calls. */
        uint64_t calls = rows[i].kind == QM_WALL ? rows[i].calls : rows[i].value;
        if (rows[i].kind == QM_WALL)
            c->wall[k] = (int64_t)rows[i].value;
        /* A procedure matched by two patterns: one row (its two counters agree). */
        if (!seen[k] || calls > c->now[k])
            c->now[k] = calls;
        seen[k] = 1;
    }
    free(seen);
}

/* qm_hooks_t.refused: procedure PROC of metric M is not instrumented (said once placed). */
static void
count_refused(void *arg, size_t m, const char *proc, const char *why)
{
    counting_t *c = arg;
    char name[200];
    proc = row_name(c, m, proc, name, sizeof(name));
    /* "PROC at 0xADDR: reason": the note names PROC already (a call site's, PROC+0xOFF
     * ->CALLEE, names its procedure). */
    const char *at = strstr(why, " at 0x"), *bare = qpt_module_sep(proc);
    size_t np = at != NULL ? (size_t)(at - why) : 0;
    bare = bare != NULL ? bare + 1 : proc; /* (a library's: LIB:PROC) */
    if (at != NULL && strncmp(why, bare, np) == 0
        && (bare[np] == '\0' || bare[np] == '+' || bare[np] == '-') && strstr(at, ": ") != NULL)
        why = strstr(at, ": ") + 2;
    for (size_t i = 0; i < c->nref; i++)
        if (strcmp(c->ref[i], proc) == 0) {
            c->refall[i] &= c->mkind[qm_instance_of(c->set, m)] == 'a';
            return;
        }
    char **r = realloc(c->ref, (c->nref + 1) * sizeof(char *));
    char **w = r != NULL ? realloc(c->refwhy, (c->nref + 1) * sizeof(char *)) : NULL;
    if (r != NULL)
        c->ref = r;
    if (w != NULL)
        c->refwhy = w;
    uint8_t *a = w != NULL ? realloc(c->refall, c->nref + 1) : NULL;
    if (a == NULL)
        return;
    c->refall = a;
    if ((r[c->nref] = strdup(proc)) == NULL || (w[c->nref] = strdup(why)) == NULL) {
        free(r[c->nref]);
        return;
    }
    a[c->nref++] = c->mkind[qm_instance_of(c->set, m)] == 'a';
}

/*
 * qm_hooks_t.nomatch: a --count pattern names nothing. When it is a bare name that the
 * executable calls through its PLT, or a library function here, what to write instead:
 * the library that defines it in dyn's own process (libc's functions are the usual
 * case: the same libc.so.6), or the MODULE:NAME form with '*'.
 */
static const char *count_pattern(const counting_t *c, size_t m);

static void
count_nomatch(void *arg, size_t m, const char *pattern, qpt_space_t *s)
{
    counting_t *c = arg;
    char hint[512] = "", plt[300];
    uint32_t p;
    pattern = count_pattern(c, m); /* (as the user wrote it) */
    const char *sep = qpt_module_sep(pattern);
    if (s == NULL && sep != NULL) { /* a static program: no library to wait for */
        count_note(c, 0, "%d: no loaded library matches '%.*s' (in '%s'; the executable's "
                   "procedures are named without MODULE:)", c->pid, (int)(sep - pattern),
                   pattern, pattern);
        return;
    }
    if (s != NULL && pattern[strcspn(pattern, "*?[")] == '\0') {
        snprintf(plt, sizeof(plt), "%s@plt", pattern);
        void *f = dlsym(RTLD_DEFAULT, pattern);
        Dl_info info;
        const char *lib = NULL;
        if (f != NULL && dladdr(f, &info) != 0 && info.dli_fname != NULL) {
            lib = strrchr(info.dli_fname, '/');
            lib = lib != NULL ? lib + 1 : info.dli_fname;
            if (strstr(lib, ".so") == NULL)
                lib = NULL; /* dyn's own (static) code */
        }
        if (lib != NULL)
            snprintf(hint, sizeof(hint), " in the executable; a shared library's procedure is "
                     "named with its library: '%s:%s' (or '*:%s', any library)", lib, pattern,
                     pattern);
        else if (qpt_proc_find(s, plt, &p) == 0)
            snprintf(hint, sizeof(hint), " in the executable; it calls %s in a shared library: "
                     "name it 'LIBRARY:%s' (LIBRARY as ldd shows it, or '*', any library)",
                     pattern, pattern);
    }
    count_note(c, 0, "no procedure matches '%s'%s", pattern, hint);
}

/* The length of the procedure's part of call site NAME ("F+0xOFF->CALLEE": F's), or 0
 * when NAME is no call site's. */
static size_t
site_proc_len(const char *name)
{
    const char *plus = strstr(name, "+0x");
    return plus != NULL && strstr(plus, "->") != NULL ? (size_t)(plus - name) : 0;
}

/* The refusals gathered since the last placement: said (those of --all only with -v)
 * and forgotten; their number. The call sites of one procedure refused for one reason
 * (its code, not the site's: an indirect jump of unknown targets) are one line. */
static size_t
count_refusals(counting_t *c)
{
    size_t n = c->nref;
    for (size_t i = 0; i < c->nref; i++) {
        if (c->ref[i] == NULL)
            continue;
        size_t lp = site_proc_len(c->ref[i]), same = 1;
        for (size_t j = i + 1; lp > 0 && j < c->nref; j++)
            if (c->ref[j] != NULL && site_proc_len(c->ref[j]) == lp
                && strncmp(c->ref[j], c->ref[i], lp) == 0 && strcmp(c->refwhy[j], c->refwhy[i]) == 0) {
                same++;
                free(c->ref[j]);
                free(c->refwhy[j]);
                c->ref[j] = NULL;
            }
        if (same > 1)
            count_note(c, c->refall[i], "%.*s: %zu call sites not instrumented: %s", (int)lp,
                       c->ref[i], same, c->refwhy[i]);
        else
            count_note(c, c->refall[i], "%s: not instrumented: %s", c->ref[i], c->refwhy[i]);
        free(c->ref[i]);
        free(c->refwhy[i]);
    }
    c->nref = 0;
    return n;
}

static int
str_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The procedures metrics PLACED (N) measure, each once. */
static size_t
count_placed(counting_t *c, const uint8_t *placed, size_t n)
{
    const char **all = NULL;
    size_t nall = 0, nseen = 0;
    for (size_t i = 0; i < n; i++) {
        const char **names;
        size_t k;
        if (!placed[i] || qm_measured(c->set, i, &names, &k) < 0)
            continue;
        const char **v = realloc(all, (nall + k + 1) * sizeof(char *));
        if (v != NULL) {
            all = v;
            memcpy(all + nall, names, k * sizeof(char *));
            nall += k;
        }
        free(names);
    }
    if (all != NULL)
        qsort(all, nall, sizeof(char *), str_cmp);
    for (size_t i = 0; i < nall; i++)
        nseen += i == 0 || strcmp(all[i - 1], all[i]) != 0;
    free(all);
    return nseen;
}

/* The pattern of metric M (its text is "count calls(PATTERN)" or "time wall(PATTERN)"). */
static const char *
count_pattern(const counting_t *c, size_t m)
{
    return c->mpat[qm_instance_of(c->set, m)]; /* (a library glob's in one library: its) */
}

/* qm_live_opts_t.on_event: what the engine did, as dyn says it. */
static void
count_event(void *arg, const qm_live_event_t *ev)
{
    counting_t *c = arg;
    switch (ev->kind) {
    case QM_EV_PLACED: {
        size_t nref = count_refusals(c), nin = count_placed(c, ev->placed, ev->nmetrics);
        if (c->image == 0)
            count_note(c, 0, "%d: %zu %s instrumented, %zu refused, stopped %.1f ms, "
                       "%.2f s after dyn started", ev->pid, nin, what, nref, ev->stop_ms,
                       now_s() - c->t_start);
        else
            count_note(c, 0, "%d: %zu %s instrumented, %zu refused, stopped %.1f ms",
                       ev->pid, nin, what, nref, ev->stop_ms);
        size_t waiting = 0;
        for (size_t i = 0; i < qm_count(c->set); i++)
            waiting += qm_state(c->set, i) == QM_WAITING;
        if (nin == 0 && waiting > 0)
            count_note(c, 0, "%d: waiting for the libraries named to be loaded", ev->pid);
        else if (nin == 0 && c->image > 0)
            count_note(c, 0, "%d: nothing to measure in the new program", ev->pid);
        break;
    }
    case QM_EV_LOADED: {
        size_t nref = count_refusals(c), nin = count_placed(c, ev->placed, ev->nmetrics);
        count_note(c, 0, "%d: %s loaded: %zu %s instrumented, %zu refused, stopped "
                   "%.1f ms", ev->pid, ev->name, nin, what, nref, ev->stop_ms);
        break;
    }
    case QM_EV_REMOVED:
        count_note(c, 1, "%d: instrumentation removed, stopped %.1f ms", ev->pid, ev->stop_ms);
        break;
    case QM_EV_UNLOADED:
        count_note(c, 0, "%d: %s unloaded: its counts are those until then", ev->pid, ev->name);
        break;
    case QM_EV_EXEC:
        c->image = ev->image;
        count_note(c, 0, "%d: the process ran execve (%s): the counts up to the exec are kept "
                   "apart (rows %s[%zu]:...); measuring the new program", ev->pid, ev->name,
                   ev->was, ev->image);
        break;
    case QM_EV_FORKS:
        if (ev->counted > 0)
            count_note(c, 0, "%d: %u %s forked: counted with the parent (%s later dlopen and "
                       "exec not followed)", ev->pid, ev->counted,
                       ev->counted == 1 ? "child" : "children", ev->counted == 1 ? "its" : "their");
        if (ev->apart > 0)
            count_note(c, 0, "%d: %u %s forked: not measured", ev->pid, ev->apart,
                       ev->apart == 1 ? "child" : "children");
        break;
    case QM_EV_NEVER_LOADED: {
        const char *p = count_pattern(c, ev->metric), *sep = qpt_module_sep(p);
        count_note(c, 0, "%d: no library matching '%.*s' (in '%s') was loaded during the "
                   "session", ev->pid, sep != NULL ? (int)(sep - p) : (int)strlen(p), p, p);
        break;
    }
    default:
        break;
    }
}

/* The rows now (c->now), with their rates since the previous table when RATES; by rate,
 * then calls, then name. NULL when out of memory. */
static row_t *
count_rows(const counting_t *c, int rates)
{
    return rows_make(c->nnames, (const char *const *)c->names, c->now,
                         rates ? c->prev : NULL, c->timed ? c->wall : NULL);
}

/* The histogram's series up to the rows known now (from T); -1 when out of memory. */
static int
count_hist_grow(counting_t *c, double t)
{
    if (c->hist == NULL)
        return qpt_hist_create(c->nnames, HIST_BUCKETS, HIST_WIDTH, t, &c->hist) < 0 ? -1 : 0;
    return qpt_hist_grow(c->hist, c->nnames) < 0 ? -1 : 0;
}

/* qm_live_opts_t.on_sample: the histogram's series, the live table when due. */
static int
count_sample(void *arg, const qm_set_t *set, const qm_row_t *rows, size_t n,
             const qm_cost_t *costs, size_t ncosts, double t)
{
    counting_t *c = arg;
    (void)set, (void)costs, (void)ncosts;
    count_take(c, rows, n);
    double now = now_s();
    if (c->o->histogram && count_hist_grow(c, c->t0) == 0)
        qpt_hist_add(c->hist, now, c->now);
    if (c->next_table <= 0 || now < c->next_table)
        return 0;
    row_t *r = count_rows(c, 1);
    if (r != NULL) {
        live_t l = { c->pid, t, now - c->last_table, r, c->nnames };
        c->gone = print_live(NULL, &l) != 0;
    }
    free(r);
    memcpy(c->prev, c->now, c->nnames * sizeof(uint64_t));
    c->last_table = now;
    while (c->next_table <= now)
        c->next_table += c->o->interval;
    return c->gone;
}

/* qm_live_opts_t.on_ready: the clocks of the tables and the histogram start. */
static void
count_ready(void *arg, int pid, double stop_ms)
{
    counting_t *c = arg;
    (void)stop_ms;
    c->pid = pid;
    c->t0 = c->last_table = now_s();
    c->next_table = c->o->interval > 0 ? c->t0 + c->o->interval : 0;
}

/* The metric of option KIND ('c' --count, 'a' --all, 'w' --time, 'f' --calls-from) of
 * PATTERN into TEXT (LEN bytes). */
static void
option_metric(char kind, const char *pattern, char *text, size_t len)
{
    /* (--time's timer is shared by the threads, as it always was: the time some thread
     * is inside, and no per-thread memory, so that thousands of procedures fit.) */
    /* MODULE:NAME names shared libraries; a MODULE that is a glob without .so in it
     * ('*:malloc', 'libc*:malloc') is given one ('*.so*'), as the metric language reads
     * them: a metric in every library that matches, loaded now or later. */
    const char *sep = qpt_module_sep(pattern);
    int glob = sep != NULL && strcspn(pattern, "*?[") < (size_t)(sep - pattern);
    char pat[4100];
    if (glob && memmem(pattern, (size_t)(sep - pattern), ".so", 3) == NULL)
        snprintf(pat, sizeof(pat), "%.*s.so*%s", (int)(sep - pattern), pattern, sep);
    else
        snprintf(pat, sizeof(pat), "%s", pattern);
    if (kind == 'f') {
        /* The calls made inside the procedures PATTERN names: every callee (calls
         * through pointers as *indirect), in the same library as they. */
        const char *ps = qpt_module_sep(pat);
        snprintf(text, len, "count calls(%.*s*) per call site from(%s)",
                 ps != NULL ? (int)(ps - pat) + 1 : 0, pat, pat);
        return;
    }
    snprintf(text, len, kind == 'w' ? "time wall(%s) shared" : "count calls(%s)", pat);
}

/* Metric KIND (see counting_t.mkind) of PATTERN into C->set; -1 (said) when the
 * language cannot take the pattern. */
static int
count_metric(counting_t *c, char kind, const char *pattern)
{
    char text[4200], why[2048];
    const char *opt = kind == 'c' ? "--count" : kind == 'a' ? "--all"
                    : kind == 'f' ? "--calls-from" : "--time";
    option_metric(kind, pattern, text, sizeof(text));
    if (qm_parse(text, opt, 1, &c->set, why, sizeof(why)) < 0) {
        fprintf(stderr, "%s: %s '%s': %s\n", prog_name, opt, pattern, why);
        return -1;
    }
    c->mpat[c->nm] = pattern;
    c->mkind[c->nm++] = kind;
    return 0;
}

/* qm_hooks_t.detail: shown with -v. */
static void
count_detail(void *arg, const char *note)
{
    count_note(arg, 1, "%s", note);
}

/* The metrics of --time (chosen first: a procedure refused for its timer says that
 * reason), --count and --all into C->set: --time PATTERN is `time wall(PATTERN) shared`
 * (which counts the calls too). -1 (said) on a pattern the language cannot take. */
static int
count_metrics(counting_t *c)
{
    const opts_t *o = c->o;
    size_t n = o->ntime + o->ncalls + o->ncount + 1;
    c->mpat = calloc(n, sizeof(char *));
    c->mkind = calloc(n, 1);
    if (c->mpat == NULL || c->mkind == NULL)
        return -1;
    c->timed = o->ntime > 0;
    for (size_t i = 0; i < o->ntime; i++)
        if (count_metric(c, 'w', o->time[i]) < 0)
            return -1;
    for (size_t i = 0; i < o->ncalls; i++)
        if (count_metric(c, 'f', o->calls[i]) < 0)
            return -1;
    for (size_t i = 0; i < o->ncount; i++)
        if (count_metric(c, 'c', o->count[i]) < 0)
            return -1;
    if (o->all && count_metric(c, 'a', "*") < 0)
        return -1;
    qm_hooks_t h = { count_refused, count_nomatch, c, 1, c->o->no_atomic, count_detail };
    qm_set_hooks(c->set, &h);
    return 0;
}

/*
 * A --count/--all/--time session on the engine of -e. Returns the exit status as
 * session() does.
 */
static int
count_session(const opts_t *o, int pid, char *const *argv, double t_start)
{
    counting_t c = { 0 };
    analysis_threads();
    c.o = o;
    c.t_start = t_start;
    c.verbose = o->verbose;
    c.pid = pid;
    if (count_metrics(&c) < 0) {
        qm_free(c.set);
        return EXIT_USAGE;
    }
    qm_live_opts_t lo = { 0 };
    lo.pid = pid;
    lo.argv = argv;
    /* Sampled every step for a histogram, else at each live table. */
    lo.interval = o->histogram ? COUNT_STEP : o->interval;
    if (o->histogram && o->interval > 0 && o->interval < COUNT_STEP)
        lo.interval = o->interval;
    lo.duration = o->duration;
    lo.stop = (const volatile int *)&stop_flag;
    lo.note = tool_metrics_note;
    lo.note_arg = (void *)prog_name;
    lo.on_sample = lo.interval > 0 ? count_sample : NULL;
    lo.on_ready = count_ready;
    lo.on_event = count_event;
    lo.arg = &c;
    lo.relocate = 1;
    lo.no_costs = 1;
    qm_live_report_t rep;
    char why[2048];
    int ret = 0;
    int rc = qm_live_run(c.set, &lo, &rep, why, sizeof(why));
    count_refusals(&c); /* (a session that failed: what was refused, said first) */
    if (rc < 0) {
        const char *nothing = strstr(why, ": nothing to measure");
        fprintf(stderr, "%s: %s\n", prog_name, nothing != NULL ? nothing + 2 : why);
        ret = EXIT_FAIL;
    }
    if (rep.rows != NULL || rc == 0) { /* (no row: nothing matched, still a table) */
        count_take(&c, rep.rows, rep.nrows);
        final_t r = { 0 };
        r.npoints = c.nnames;
        r.names = c.names;
        r.calls = c.now;
        r.rows = count_rows(&c, 0);
        r.timed = c.timed;
        r.secs = rep.secs;
        if (o->histogram && count_hist_grow(&c, c.t0) == 0) {
            qpt_hist_add(c.hist, now_s(), c.now);
            r.hist = c.hist;
        }
        if (r.rows == NULL || report(&r, o->csv, o->zeros) < 0)
            ret = EXIT_FAIL;
        if (r.hist != NULL)
            print_histogram(&r);
        free(r.rows);
        if (ret == 0 && rep.ended && argv != NULL)
            ret = WIFEXITED(rep.status) ? WEXITSTATUS(rep.status) : 128 + WTERMSIG(rep.status);
        if (out_closed || c.gone) {
            fprintf(stderr, "%s: %d: standard output was closed: session ended%s\n", prog_name,
                    rep.pid, rep.ended ? "" : ", instrumentation removed");
            ret = EXIT_FAIL;
        }
    }
    qpt_hist_destroy(c.hist);
    for (size_t i = 0; i < c.nnames; i++)
        free(c.names[i]);
    free(c.names);
    free(c.slots);
    free(c.prev);
    free(c.now);
    free(c.wall);
    free(c.mpat);
    free(c.mkind);
    free(c.ref);
    free(c.refwhy);
    free(c.refall);
    qm_live_report_free(&rep);
    qm_free(c.set);
    return ret;
}

/*
 * SIGINT, SIGTERM and SIGHUP only set stop_flag: a session is never cut in the middle of
 * an install or a removal (nothing in dynamic/ is left half done by a signal), it ends
 * at the next check. SIGPIPE is ignored: a closed standard output is seen as EPIPE and
 * ends the session like a signal (out_closed).
 */
static void
catch_signals(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal; /* no SA_RESTART: sleeps end early */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* ARG as a process id into *PID, or a usage message (for COMMAND) and -1. */
static int
parse_pid(const char *cmd, const char *arg, int *pid)
{
    char *end;
    long v;

    if (arg == NULL) {
        fprintf(stderr, "%s: %s: missing PID\n", prog_name, cmd);
        return -1;
    }
    v = strtol(arg, &end, 10);
    if (end == arg || *end != '\0' || v <= 0 || v > INT32_MAX) {
        fprintf(stderr, "%s: %s: not a process id: '%s'\n", prog_name, cmd, arg);
        return -1;
    }
    *pid = (int)v;
    return 0;
}

/* PID or PID,PID,... into O->pids. */
static int
parse_pids(const char *arg, opts_t *o)
{
    if (arg == NULL) {
        fprintf(stderr, "%s: attach: missing PID\n", prog_name);
        return -1;
    }
    size_t n = 1;
    for (const char *c = arg; *c; c++)
        n += *c == ',';
    if ((o->pids = calloc(n, sizeof(int))) == NULL)
        return -1;
    char *copy = strdup(arg), *save = NULL;
    if (copy == NULL)
        return -1;
    int rc = 0;
    for (char *t = strtok_r(copy, ",", &save); t != NULL && rc == 0; t = strtok_r(NULL, ",", &save))
        rc = parse_pid("attach", t, &o->pids[o->npids++]);
    if (rc == 0 && o->npids != n) {
        fprintf(stderr, "%s: attach: not a list of process ids: '%s'\n", prog_name, arg);
        rc = -1;
    }
    free(copy);
    return rc;
}

/* --children: O->pids becomes the processes whose parent is O->pids[0]. */
static int
children_of(opts_t *o)
{
    int parent = o->pids[0], *v = NULL;
    size_t n = 0;
    int rc = qpt_children(parent, &v, &n);
    if (rc < 0) {
        fprintf(stderr, "%s: --children: %s\n", prog_name,
                rc == QPT_ENOTFOUND ? "the process has no children" : qpt_strerror(rc));
        return -1;
    }
    free(o->pids);
    o->pids = v;
    o->npids = n;
    return 0;
}

/* qm_live_opts_t.on_ready with several processes: a line as each one's metrics are in
 * (what a script waits for before the job's work starts). */
static void
print_ready(void *arg, int pid, double stop_ms)
{
    (void)arg;
    fprintf(stderr, "%s: pid %d: measuring (stopped %.1f ms to insert)\n", prog_name, pid,
            stop_ms);
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
                fprintf(stderr, "%s: %s: %s\n", prog_name, label, p->why);
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
        out_closed = 1;
}

/* Several processes: each one's table (focus named by its rank or pid), the aggregates;
 * steered all at once with --commands, their tables together every --interval. */
static int
many_session(const opts_t *o)
{
    qm_set_t *set = NULL;
    if (tool_metrics_parse(prog_name, o->margs, o->morder, o->nm, &set) < 0)
        return EXIT_USAGE;
    if (set == NULL && (set = qm_new()) == NULL)
        return EXIT_FAIL;
    steering = o->commands;
    qm_live_opts_t lo = { 0 };
    lo.duration = o->duration;
    lo.stop = (const volatile int *)&stop_flag;
    lo.note = tool_metrics_note;
    lo.note_arg = (void *)prog_name;
    lo.max_overhead = o->max_overhead;
    lo.relocate = 1;
    lo.on_ready = print_ready;
    lo.interval = o->interval;
    lo.commands = o->commands;
    lo.commands_fd = STDIN_FILENO;
    lo.on_reply = print_reply;
    lo.on_many_sample = print_many_live;
    lo.hist_buckets = o->histogram ? HIST_BUCKETS : 0;
    lo.hist_width = HIST_WIDTH;
    qm_many_report_t rep;
    char why[2048];
    int ret = 0;
    if (qm_live_run_many(set, &lo, o->pids, o->npids, &rep, why, sizeof(why)) < 0) {
        fprintf(stderr, "%s: %s\n", prog_name, why);
        ret = EXIT_FAIL;
    }
    for (size_t i = 0; i < rep.n; i++) {
        const qm_proc_report_t *p = &rep.v[i];
        char label[48];
        if (p->rc < 0)
            ret = EXIT_FAIL;
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
        out_closed = 1;
    if (o->histogram) { /* the processes' together */
        qm_live_report_t all = { 0 };
        all.hist = rep.hist;
        all.nhist = rep.nhist;
        print_metric_histogram(set, &all);
    }
    if (rep.n > 0 && o->csv != NULL) {
        tool_out_t t;
        if (tool_out_open(&t, prog_name, o->csv) < 0
            || tool_out_close(&t, prog_name, print_many(t.f, TM_CSV, set, &rep, 0) == 0) < 0)
            ret = EXIT_FAIL;
    }
    if (out_closed)
        ret = EXIT_FAIL;
    qm_many_report_free(&rep);
    qm_free(set);
    return ret;
}

/* The one line of dyn clean: what was found and taken out. */
static void
print_clean(int pid, const qpt_clean_report_t *r)
{
    /* A stub a killed dyn left in the slack after the code ends whichever line is last.
     */
    const char *stub
        = r->stub > 0 ? "; the bytes under its system-call stub put back" : "";

    if (r->busy > 0)
        fprintf(stderr,
            "%s: %d: %u trampoline memor%s of a dyn still running left alone\n",
            prog_name, pid, r->busy, r->busy == 1 ? "y" : "ies");
    if (r->regions == 0 && r->breaks > 0) {
        printf("%s: %d: the loader's breakpoint (libraries loaded later) put back%s\n",
            prog_name, pid, stub);
        return;
    }
    /* With trampolines too, one line still: the breakpoint goes after the stub's part. */
    char both[160];
    snprintf(both, sizeof(both), "%s%s", stub,
        r->breaks > 0 ? "; the loader's breakpoint (libraries loaded later) put back" : "");
    stub = both;
    if (r->regions == 0) {
        if (r->stub > 0)
            printf("%s: %d: the bytes under a killed dyn's system-call stub put back "
                   "(nothing else of dyn's found)\n",
                prog_name, pid);
        else
            printf("%s: %d: nothing of dyn's found\n", prog_name, pid);
        return;
    }
    if (r->jumps + r->moved + r->unmapped == 0) {
        printf("%s: %d: nothing to take out (%u trampoline memor%s stay%s mapped: "
               "call-site code, or a thread may still return there)%s\n",
            prog_name, pid, r->kept, r->kept == 1 ? "y" : "ies", r->kept == 1 ? "s" : "",
            stub);
        return;
    }
    printf("%s: %d: %u jump%s put back, %u thread%s moved out, %u mapping%s unmapped",
        prog_name, pid, r->jumps, r->jumps == 1 ? "" : "s", r->moved,
        r->moved == 1 ? "" : "s", r->unmapped, r->unmapped == 1 ? "" : "s");
    if (r->kept > 0)
        printf(", %u trampoline memor%s left mapped (call sites, or a thread may still "
               "return there)",
            r->kept, r->kept == 1 ? "y" : "ies");
    printf("%s\n", stub);
}

/* dyn clean PID: take out what a killed dyn left. */
static int
clean_main(int argc, char **argv)
{
    qpt_clean_report_t r;
    char why[512];
    int pid;

    if (parse_pid("clean", argc >= 2 ? argv[1] : NULL, &pid) < 0)
        return EXIT_USAGE;
    if (argc > 2) {
        fprintf(stderr, "%s: clean: unexpected argument '%s'\n", prog_name, argv[2]);
        return EXIT_USAGE;
    }
    catch_signals();
    if (qpt_clean(pid, &r, why, sizeof(why)) < 0) {
        fprintf(stderr, "%s: %s\n", prog_name, why);
        return EXIT_FAIL;
    }
    print_clean(pid, &r);
    return fflush(stdout) == 0 ? 0 : EXIT_FAIL;
}

int
main(int argc, char **argv)
{
    static const struct option lopts[] = {
        { "count", required_argument, NULL, 'c' },
        { "all", no_argument, NULL, 'a' },
        { "zeros", no_argument, NULL, 'Z' },
        { "debug-dir", required_argument, NULL, 'B' },
        { "trace", required_argument, NULL, 'T' },
        { "interval", required_argument, NULL, 'i' },
        { "duration", required_argument, NULL, 'd' },
        { "output", required_argument, NULL, 'o' },
        { "time", required_argument, NULL, 't' },
        { "calls-from", required_argument, NULL, 'f' },
        { "no-atomic", no_argument, NULL, 'N' },
        { "follow-exec", no_argument, NULL, 'X' },
        { "verbose", no_argument, NULL, 'v' },
        { "histogram", no_argument, NULL, 'H' },
        { "metric", required_argument, NULL, 'e' },
        { "metrics", required_argument, NULL, 'M' },
        { "commands", no_argument, NULL, 'C' },
        { "children", no_argument, NULL, 'K' },
        { "aggregate", no_argument, NULL, 'G' },
        { "max-overhead", required_argument, NULL, 'O' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    double t_started
        = now_s(); /* attach time counts from here (analysis included) */
    tool_heap_setup();
    opts_t o = { 0 };
    const char *cmd;
    int opt, ret, pid = 0, run;

    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
        printf("dyn (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
        return 0;
    }
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "attach") != 0 && strcmp(argv[1], "run") != 0
        && strcmp(argv[1], "clean") != 0 && strcmp(argv[1], "search") != 0) {
        if (argv[1][0] == '-')
            fprintf(stderr, "dyn: unknown option '%s' (try --help)\n", argv[1]);
        else
            fprintf(stderr, "dyn: unknown command '%s' (attach, run, search or clean; try --help)\n",
                    argv[1]);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "clean") == 0)
        return clean_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "search") == 0)
        return dyn_search_main(argc - 1, argv + 1);
    cmd = argv[1];
    run = strcmp(cmd, "run") == 0;
    o.count = calloc((size_t)argc, sizeof(*o.count));
    o.time = calloc((size_t)argc, sizeof(*o.time));
    o.calls = calloc((size_t)argc, sizeof(*o.calls));
    o.margs = calloc((size_t)argc, sizeof(*o.margs));
    o.morder = calloc((size_t)argc, 1);
    if (o.count == NULL || o.time == NULL || o.calls == NULL || o.margs == NULL
        || o.morder == NULL)
        return EXIT_FAIL;
    argv++;
    argc--;
    if (!run) {
        /* attach PID, attach PID,PID,..., and --children before or after PID. */
        if (argc >= 2 && strcmp(argv[1], "--children") == 0) {
            o.children = 1;
            argv++;
            argc--;
        }
        if (parse_pids(argc >= 2 ? argv[1] : NULL, &o) < 0)
            return EXIT_USAGE;
        pid = o.pids[0];
        argv++;
        argc--;
    }
    opterr = 0; /* tool_option_error says it in one line */
    while ((opt = getopt_long(argc, argv, "+:c:at:f:i:d:o:vhVe:", lopts, NULL)) != -1) {
        switch (opt) {
        case 'e':
        case 'M':
            o.margs[o.nm] = optarg;
            o.morder[o.nm++] = opt == 'e' ? 'e' : 'f';
            break;
        case 'C': o.commands = 1; break;
        case 'K': o.children = 1; break;
        case 'G': o.aggregate = 1; break;
        case 'O': {
            char *end;
            o.max_overhead = strtod(optarg, &end);
            if (end == optarg || (*end != '\0' && strcmp(end, "%") != 0) || !(o.max_overhead > 0)
                || o.max_overhead > 1000) {
                fprintf(stderr, "%s: --max-overhead: '%s' is not a percentage above 0\n",
                        prog_name, optarg);
                return EXIT_USAGE;
            }
            break;
        }
        case 'c': o.count[o.ncount++] = optarg; break;
        case 'a': o.all = 1; break;
        case 'Z': o.zeros = 1; break;
        case 'B':
            if (qpt_set_debug_dirs(optarg) < 0) {
                fprintf(stderr, "%s: %s\n", prog_name, qpt_strerror(QPT_ENOMEM));
                return EXIT_FAIL;
            }
            break;
        case 'T': o.trace = optarg; break;
        case 'i':
            if (parse_secs(optarg, "--interval", &o.interval) < 0)
                return EXIT_USAGE;
            break;
        case 'd':
            if (parse_secs(optarg, "--duration", &o.duration) < 0)
                return EXIT_USAGE;
            break;
        case 'o': o.csv = optarg; break;
        case 'v': o.verbose = 1; break;
        case 'H': o.histogram = 1; break;
        case 'N': o.no_atomic = 1; break;
        case 'X': o.follow_exec = 1; break;
        case 't': o.time[o.ntime++] = optarg; break;
        case 'f':
            o.calls[o.ncalls++] = optarg;
            what = "points";
            break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("dyn (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION); return 0;
        default: return tool_option_error("dyn", argv, opt);
        }
    }
    /* --count, --all and --time with several processes or --commands: the metrics they
     * are (count calls(P), time wall(P) shared), in the metrics' sessions and tables. */
    char **texts = calloc((size_t)argc + 1, sizeof(char *));
    size_t ntexts = 0;
    if (texts == NULL)
        return EXIT_FAIL;
    if ((((o.npids > 1 || o.children) && !run) || o.commands) && !o.no_atomic) {
        size_t nt = o.ntime, nf = nt + o.ncalls, nc = nf + o.ncount;
        for (size_t i = 0; i < nc + (size_t)o.all; i++) {
            char kind = i < nt ? 'w' : i < nf ? 'f' : i < nc ? 'c' : 'a';
            const char *pat = i < nt ? o.time[i] : i < nf ? o.calls[i - nt]
                              : i < nc ? o.count[i - nf] : "*";
            char text[4200];
            option_metric(kind, pat, text, sizeof(text));
            if ((texts[ntexts] = strdup(text)) == NULL)
                return EXIT_FAIL;
            o.margs[o.nm] = texts[ntexts++];
            o.morder[o.nm++] = 'e';
        }
        o.ntime = o.ncount = o.ncalls = 0;
        o.all = 0;
    }
    if (o.max_overhead > 0 && o.nm == 0 && !o.commands) {
        fprintf(stderr, "%s: --max-overhead applies to metrics (-e, --metrics, --commands)\n",
                prog_name);
        return EXIT_USAGE;
    }
    if ((o.children || o.npids > 1) && !run) {
        if (o.children && o.npids > 1) {
            fprintf(stderr, "%s: --children takes one PID (the launcher)\n", prog_name);
            return EXIT_USAGE;
        }
        if (o.nm == 0 && !o.commands) {
            fprintf(stderr, "%s: several processes are measured with metrics (-e, "
                    "--metrics, --commands)\n", prog_name);
            return EXIT_USAGE;
        }
        if (o.children && children_of(&o) < 0)
            return EXIT_FAIL;
    }
    /* (--follow-exec is welcome with metrics: their session always follows.) */
    int counting = o.ncount || o.all || o.ntime || o.ncalls || o.no_atomic;
    if (o.commands && counting) {
        fprintf(stderr, "%s: --commands steers metrics: not with --count, --all, --time, "
                "--calls-from or --no-atomic\n", prog_name);
        return EXIT_USAGE;
    }
    if (o.nm > 0 && counting) {
        fprintf(stderr, "%s: -e/--metrics measure the metrics only: not with --count, --all, "
                "--time, --calls-from or --no-atomic\n", prog_name);
        return EXIT_USAGE;
    }
    if (o.nm == 0 && !o.commands && o.ncount == 0 && !o.all && o.ntime == 0 && o.ncalls == 0) {
        fprintf(stderr,
            "%s: say what to measure: --count PATTERN, --time PATTERN, --calls-from "
            "FUNC, --all, or -e METRIC\n",
            prog_name);
        return EXIT_USAGE;
    }
    if (run && optind >= argc) {
        fprintf(stderr, "%s: run: missing COMMAND (after --)\n", prog_name);
        return EXIT_USAGE;
    }
    if (!run && optind < argc) {
        fprintf(
            stderr, "%s: attach: unexpected argument '%s'\n", prog_name, argv[optind]);
        return EXIT_USAGE;
    }

    /* A CSV that cannot be written must fail now, not after the whole session. */
    tool_out_t t;
    if (o.csv != NULL && tool_out_open(&t, prog_name, o.csv) < 0)
        return EXIT_FAIL;
    if (o.csv != NULL)
        tool_out_close(&t, prog_name, 0); /* a trial: nothing written */
    if (o.trace != NULL) {
        if (o.nm > 0 || o.commands || o.npids > 1 || o.children) {
            fprintf(stderr, "%s: --trace records --count, --all, --time or --calls-from "
                    "sessions of one process\n", prog_name);
            return EXIT_USAGE;
        }
        trace.path = o.trace;
        trace.tables = o.interval > 0;
        if (o.interval <= 0)
            o.interval = 0.1;
        /* Written beside FILE and renamed when complete: a dyn killed on the way leaves
         * FILE.tmpXXXXXX, never a FILE cut short; a FIFO or device is refused. */
        if (tool_out_open(&trace.out, prog_name, o.trace) < 0)
            return EXIT_FAIL;
        trace.f = trace.out.f;
        fprintf(trace.f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"creator\":\"dyn (%s) %s\"},"
                "\"traceEvents\":[", PACKAGE_NAME, PACKAGE_VERSION);
    }

    catch_signals();
    if (o.npids > 1 || o.children)
        ret = many_session(&o);
    else if (o.nm > 0 || o.commands)
        ret = metrics_session(&o, pid, run ? argv + optind : NULL);
    else
        ret = count_session(&o, pid, run ? argv + optind : NULL, t_started);
    if (trace.f != NULL) {
        fprintf(trace.f, "\n]}\n");
        if (tool_out_close(&trace.out, prog_name, 1) < 0) {
            ret = EXIT_FAIL;
        } else {
            fprintf(stderr, "%s: %s: %zu counter events (Chrome trace: Perfetto, "
                    "chrome://tracing)\n", prog_name, trace.path, trace.nevents);
        }
        free(trace.last);
        free(trace.wall);
    }
    for (size_t i = 0; i < ntexts; i++)
        free(texts[i]);
    free(texts);
    free(o.margs);
    free(o.morder);
    free(o.count);
    free(o.time);
    free(o.calls);
    return ret;
}
