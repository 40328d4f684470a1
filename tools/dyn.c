/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * dyn: live instrumentation of a running process (dyn attach PID) or of a program started
 * stopped at its first instruction (dyn run -- COMMAND). Entry counters (with --time also
 * timers at entry and exits, with --calls-from counters at call sites) are patched in,
 * sampled while the process runs, and taken out again; the process is left running.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cfg/cfg.h"
#include "dynamic/dyn.h"
#include "tools/tool.h"

enum { EXIT_FAIL = 1, EXIT_USAGE = 2 };

static const char *prog_name = "dyn";
/* What a row of the tables is: "procedures", or "points" with call sites among them. */
static const char *what = "procedures";
/* SIGINT, SIGTERM or SIGHUP arrived: end the session (never in the middle of a step). */
static volatile sig_atomic_t stop_flag;
/* Standard output is a closed pipe (EPIPE): end the session, then fail. */
static int out_closed;

static void
usage(FILE *f)
{
    fprintf(f,
        "Usage: %s attach PID [OPTIONS]\n"
        "       %s run [OPTIONS] -- COMMAND [ARGS...]\n"
        "       %s clean PID\n"
        "\n"
        "Count calls of procedures of a live process (and time them, or count their\n"
        "call sites): patch counters in, watch them, take them out and leave the\n"
        "process running.\n"
        "\n"
        "Options:\n"
        "  -c, --count=PATTERN    count calls of procedures matching the shell glob\n"
        "                         PATTERN (repeatable)\n"
        "  -a, --all              every procedure that can be patched safely\n"
        "  -i, --interval=SEC     print a live table every SEC seconds (rates, totals)\n"
        "      --histogram        at the end, print the calls over time of the most "
        "called\n"
        "                         points (32 buckets whose width doubles as needed)\n"
        "  -d, --duration=SEC     end the session after SEC seconds (fractions allowed;\n"
        "                         default: until Ctrl-C or the process ends)\n"
        "  -o, --output=FILE.csv  also write the final counts as CSV\n"
        "                         (name,calls,wall_ns; wall_ns empty when not timed)\n"
        "      --no-atomic        plain counter increments: faster, but calls made by\n"
        "                         threads at the same moment may be lost (default:\n"
        "                         locked increments, exact)\n"
        "  -t, --time=PATTERN     also the wall time inside procedures matching PATTERN\n"
        "                         (from the outermost call to its return: nested and\n"
        "                         recursive calls count once; wall time only, not\n"
        "                         CPU time; repeatable)\n"
        "  -f, --calls-from=FUNC  count the calls made at each call site inside the\n"
        "                         procedures matching FUNC (FUNC+0xOFF->callee;\n"
        "                         repeatable)\n"
        "  -v, --verbose          list every procedure not patched and why\n"
        "  -h, --help             print this help and exit\n"
        "  -V, --version          print the version and exit\n"
        "\n"
        "`dyn clean PID` takes out what a dyn that was killed (SIGKILL) left in PID.\n"
        "\n"
        "Ctrl-C (SIGINT), SIGTERM or SIGHUP ends the session cleanly, at any moment. "
        "Exit\n"
        "status: 0 success (dyn run: the program's status when it ended during the\n"
        "session), 1 failure (also: standard output was closed), 2 usage error.\n",
        prog_name, prog_name, prog_name);
}

static void
on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static double
now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* When main began: attach time counts from here (reading and analysing included). */
static double t_started;

static void
sleep_s(double s)
{
    struct timespec ts;
    if (s <= 0)
        return;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    nanosleep(&ts, NULL); /* EINTR: the caller looks at stop_flag */
}

/* The first line of /proc/PID/status starting with KEY, or 0 when none (into BUF). */
static int
status_field(int pid, const char *key, char *buf, size_t cap)
{
    char path[64], line[256];
    size_t n = strlen(key);
    FILE *f;
    int found = 0;

    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    while (!found && fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, key, n) == 0) {
            snprintf(buf, cap, "%s", line + n + strspn(line + n, " \t"));
            buf[strcspn(buf, "\n")] = '\0';
            found = 1;
        }
    fclose(f);
    return found;
}

/* kernel.yama.ptrace_scope, or -1 without Yama. */
static int
yama_scope(void)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    int scope = -1;

    if (f != NULL) {
        if (fscanf(f, "%d", &scope) != 1)
            scope = -1;
        fclose(f);
    }
    return scope;
}

/* Is PID a kernel thread (PF_KTHREAD in the flags of /proc/PID/stat)? */
static int
is_kthread(int pid)
{
    char path[64], buf[1024];
    unsigned long flags = 0;
    FILE *f;
    char *rp = NULL;

    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    if ((f = fopen(path, "r")) != NULL) {
        if (fgets(buf, sizeof(buf), f) != NULL)
            rp = strrchr(buf, ')');
        fclose(f);
    }
    /* ") S ppid pgrp session tty_nr tpgid flags" */
    return rp != NULL && sscanf(rp + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags) == 1
        && (flags & 0x00200000ul) != 0;
}

/*
 * Why tracing PID failed with ERR (errno): the right reason, in BUF. EPERM says nothing
 * by itself, so the process is looked at: gone, a zombie, a kernel thread, traced by
 * someone else, another user's, or what Yama allows.
 */
static const char *
trace_reason(int pid, int err, char *buf, size_t cap)
{
    char st[64] = "", tracer[64] = "", uid[64] = "", comm[64] = "";
    int scope = yama_scope();
    long tp = 0, ruid = -1, euid = -1;

    if (!status_field(pid, "State:", st, sizeof(st)))
        return "no such process";
    if (st[0] == 'Z' || st[0] == 'X')
        return "is a zombie (exited, not yet reaped by its parent)";
    if (err != EPERM && err != EACCES)
        return strerror(err);
    if (is_kthread(pid))
        return "is a kernel thread (it has no program to instrument)";
    if (status_field(pid, "TracerPid:", tracer, sizeof(tracer))
        && (tp = strtol(tracer, NULL, 10)) > 0) {
        char path[64];
        FILE *f;
        snprintf(path, sizeof(path), "/proc/%ld/comm", tp);
        if ((f = fopen(path, "r")) != NULL) {
            if (fgets(comm, sizeof(comm), f) == NULL)
                comm[0] = '\0';
            comm[strcspn(comm, "\n")] = '\0';
            fclose(f);
        }
        snprintf(buf, cap,
            "is already traced by process %ld (%s): only one tracer at a time; detach "
            "the debugger or strace first",
            tp, comm[0] ? comm : "?");
        return buf;
    }
    if (status_field(pid, "Uid:", uid, sizeof(uid))
        && sscanf(uid, "%ld %ld", &ruid, &euid) == 2 && geteuid() != 0
        && (ruid != (long)geteuid() || euid != (long)geteuid())) {
        snprintf(buf, cap,
            "belongs to another user (uid %ld): ptrace not permitted; run dyn as that "
            "user or as root",
            euid);
        return buf;
    }
    if (scope >= 1 && geteuid() != 0) {
        snprintf(buf, cap, "ptrace not permitted by kernel.yama.ptrace_scope = %d (%s)",
            scope,
            scope == 1       ? "only descendants: use `dyn run`, run as root, or `sysctl "
                               "kernel.yama.ptrace_scope=0`"
                : scope == 2 ? "only root may attach"
                             : "no attaching at all until reboot");
        return buf;
    }
    return "ptrace not permitted (the process is not dumpable: setuid, or made so by "
           "prctl; or a security module refuses)";
}

/* The one line for a failure to trace PID: "dyn: PID: [WHAT: ]REASON". */
static void
fail_trace(int pid, const char *what, int rc)
{
    int err = errno;
    char buf[256];
    const char *why
        = rc == QP_EIO ? trace_reason(pid, err, buf, sizeof(buf)) : qp_strerror(rc);

    if (what == NULL)
        fprintf(stderr, "%s: %d: %s\n", prog_name, pid, why);
    else
        fprintf(stderr, "%s: %d: %s: %s\n", prog_name, pid, what, why);
}

/*****************************************************************************
 * Reports
 */

typedef struct row {
    const char *name; /* procedure or call site */
    uint64_t calls;   /* total */
    uint64_t rate;    /* in the last interval */
    int64_t wall_ns;  /* time inside, -1 when not timed */
} row_t;

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

static row_t *
rows_make(const dyn_session_t *s, const uint64_t *now_c, const uint64_t *prev,
    const int64_t *ns, int by_rate)
{
    size_t n = dyn_session_npoints(s);
    row_t *r = calloc(n ? n : 1, sizeof(*r));
    if (r == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        r[i].name = dyn_session_point(s, i, NULL);
        r[i].calls = now_c[i];
        r[i].rate = by_rate && prev ? now_c[i] - prev[i] : 0;
        r[i].wall_ns = ns != NULL ? ns[i] : -1;
    }
    qsort(r, n, sizeof(*r), row_cmp);
    return r;
}

static void
print_live(const dyn_session_t *s, int pid, const uint64_t *c, const uint64_t *prev,
    double dt, double t)
{
    size_t n = dyn_session_npoints(s), shown = 0;
    row_t *r = rows_make(s, c, prev, NULL, 1);
    if (r == NULL)
        return;
    if (isatty(STDOUT_FILENO))
        fputs("\033[H\033[J", stdout);
    printf("dyn: pid %d  t=%.1fs  %zu %s\n", pid, t, n, what);
    printf("%14s %16s  %s\n", "calls/s", "calls", "procedure");
    for (size_t i = 0; i < n && shown < 20; i++, shown++)
        printf("%14.0f %16llu  %s\n", dt > 0 ? (double)r[i].rate / dt : 0.0,
            (unsigned long long)r[i].calls, r[i].name);
    putchar('\n');
    if (fflush(stdout) != 0 || ferror(stdout))
        out_closed = 1; /* EPIPE (SIGPIPE is ignored) or EIO: nobody reads any more */
    free(r);
}

static void
csv_name(FILE *f, const char *s)
{
    if (strpbrk(s, ",\"\n") == NULL) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* Buckets of the time histogram (they merge in pairs when the session outlasts them). */
#define HIST_BUCKETS 32
/* Series shown in the histogram: the most called. */
#define HIST_SERIES 6

/* The calls over time of the most called points, one line per bucket used. */
static void
print_histogram(const dyn_session_t *s, const dyn_hist_t *h, const uint64_t *c)
{
    size_t n = dyn_session_npoints(s), top[HIST_SERIES], ntop = 0;
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
        h->used, h->width);
    printf("%10s", "t/s");
    for (size_t j = 0; j < ntop; j++)
        printf(" %14.14s", dyn_session_point(s, top[j], NULL));
    putchar('\n');
    for (size_t b = 0; b < h->used; b++) {
        printf("%10.2f", (double)b * h->width);
        for (size_t j = 0; j < ntop; j++)
            printf(" %14llu", (unsigned long long)dyn_hist_get(h, top[j], b));
        putchar('\n');
    }
}

/* Can PATH be written (an existing file, or a new one in its directory)? errno if not. */
static int
writable(const char *path)
{
    if (access(path, W_OK) == 0)
        return 1;
    if (errno != ENOENT)
        return 0;
    char dir[4096];
    const char *slash = strrchr(path, '/');
    size_t n = slash == NULL ? 0 : (size_t)(slash - path);
    if (n >= sizeof(dir)) {
        errno = ENAMETOOLONG;
        return 0;
    }
    memcpy(dir, path, n);
    strcpy(dir + n, slash == NULL ? "." : n == 0 ? "/" : "");
    return access(dir, W_OK | X_OK) == 0;
}

static int
report(const dyn_session_t *s, const uint64_t *c, const int64_t *ns, double secs,
    const char *csv)
{
    size_t n = dyn_session_npoints(s);
    row_t *r = rows_make(s, c, NULL, ns, 0);
    int timed = 0;
    FILE *f;

    for (size_t i = 0; i < n; i++)
        timed |= r != NULL && r[i].wall_ns >= 0;

    if (r == NULL)
        return -1;
    /* The CSV first: scripts rely on it even when stdout is a closed pipe. */
    if (csv != NULL) {
        f = fopen(csv, "w");
        if (f == NULL) {
            fprintf(stderr, "%s: %s: %s\n", prog_name, csv, strerror(errno));
            free(r);
            return -1;
        }
        fprintf(f, "name,calls,wall_ns\n");
        for (size_t i = 0; i < n; i++) {
            csv_name(f, r[i].name);
            fprintf(f, ",%llu,", (unsigned long long)r[i].calls);
            if (r[i].wall_ns >= 0)
                fprintf(f, "%lld", (long long)r[i].wall_ns);
            fputc('\n', f);
        }
        if (fclose(f) != 0) {
            fprintf(stderr, "%s: %s: %s\n", prog_name, csv, strerror(errno));
            free(r);
            return -1;
        }
    }
    printf("dyn: %zu %s, %.3f s\n", n, what, secs);
    if (timed)
        printf("%16s %14s  %s\n", "calls", "wall ms", "procedure");
    else
        printf("%16s  %s\n", "calls", "procedure");
    for (size_t i = 0; i < n; i++) {
        printf("%16llu", (unsigned long long)r[i].calls);
        if (r[i].wall_ns >= 0)
            printf(" %14.3f", (double)r[i].wall_ns * 1e-6);
        else if (timed)
            printf(" %14s", "");
        printf("  %s\n", r[i].name);
    }
    fflush(stdout);
    free(r);
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
    int all;         /* --all */
    double interval; /* --interval, 0 = none */
    double duration; /* --duration, 0 = until the end */
    const char *csv; /* -o */
    int verbose;     /* -v */
    int histogram;   /* --histogram: print the calls over time at the end */
    int no_atomic;   /* --no-atomic */
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

/* Choose, patch and let go. Returns 0 or EXIT_FAIL (message printed). */
static int
instrument(dyn_proc_t *p, const cfg_prog_t *prog, uint64_t bias, const opts_t *o,
    dyn_session_t **out)
{
    dyn_session_t *s;
    int pid = dyn_proc_pid(p), rc;
    double t0;
    size_t nref;

    if ((rc = dyn_session_create(p, prog, bias, &s)) < 0) {
        fprintf(stderr, "%s: %s\n", prog_name, qp_strerror(rc));
        return EXIT_FAIL;
    }
    *out = s;
    dyn_session_set_atomic(s, !o->no_atomic);
    /* Timers first: a procedure chosen by --count would be counted only. */
    for (size_t i = 0; i < o->ntime; i++) {
        unsigned nm = 0;
        if ((rc = dyn_session_select_time(s, o->time[i], &nm)) < 0) {
            fprintf(stderr, "%s: %s\n", prog_name, qp_strerror(rc));
            return EXIT_FAIL;
        }
        if (nm == 0)
            fprintf(stderr, "%s: no procedure matches '%s'\n", prog_name, o->time[i]);
    }
    for (size_t i = 0; i < o->ncalls; i++) {
        unsigned nm = 0;
        if ((rc = dyn_session_select_calls(s, o->calls[i], &nm)) < 0) {
            fprintf(stderr, "%s: %s\n", prog_name, qp_strerror(rc));
            return EXIT_FAIL;
        }
        if (nm == 0)
            fprintf(stderr, "%s: no procedure matches '%s'\n", prog_name, o->calls[i]);
    }
    for (size_t i = 0; i < o->ncount; i++) {
        unsigned nm = 0;
        if ((rc = dyn_session_select(s, o->count[i], 0, &nm)) < 0) {
            fprintf(stderr, "%s: %s\n", prog_name, qp_strerror(rc));
            return EXIT_FAIL;
        }
        if (nm == 0)
            fprintf(stderr, "%s: no procedure matches '%s'\n", prog_name, o->count[i]);
    }
    nref = dyn_session_nrefused(s);
    if (o->all && (rc = dyn_session_select(s, NULL, DYN_SEL_ALL, NULL)) < 0) {
        fprintf(stderr, "%s: %s\n", prog_name, qp_strerror(rc));
        return EXIT_FAIL;
    }
    if (stop_flag) {
        fprintf(stderr, "%s: %d: interrupted before anything was instrumented\n",
            prog_name, pid);
        return EXIT_FAIL;
    }
    t0 = now();
    if (!dyn_proc_is_stopped(p) && (rc = dyn_proc_stop(p)) < 0) {
        fail_trace(pid, "cannot stop it", rc);
        return EXIT_FAIL;
    }
    rc = dyn_session_install(s);
    if (rc < 0) {
        int err = errno;
        dyn_proc_resume(p);
        errno = err;
        fail_trace(pid, "cannot instrument it", rc);
        return EXIT_FAIL;
    }
    if (dyn_session_npoints(s) > 0)
        dyn_proc_resume(p);
    /* Refusals: those of named patterns always, the rest of --all with -v. */
    for (size_t i = 0; i < dyn_session_nrefused(s); i++) {
        const char *why, *name = dyn_session_refusal(s, i, &why);
        if (i < nref || o->verbose || !o->all)
            fprintf(stderr, "%s: %s: not instrumented: %s\n", prog_name, name, why);
    }
    double t1 = now();
    fprintf(stderr,
        "%s: %d: %zu %s instrumented, %zu refused, stopped %.1f ms, %.2f s after "
        "dyn started%s\n",
        prog_name, pid, dyn_session_npoints(s), what, dyn_session_nrefused(s),
        (t1 - t0) * 1e3, t1 - t_started,
        dyn_session_shared(s) ? "" : " (counters not shared)");
    if (dyn_session_npoints(s) == 0) {
        fprintf(stderr, "%s: nothing to measure\n", prog_name);
        return EXIT_FAIL;
    }
    return 0;
}

/* Watch until the duration, a signal or the end of the process. *ENDED, *STATUS. */
static void
watch(dyn_proc_t *p, dyn_session_t *s, const opts_t *o, double t0, dyn_hist_t *hist,
    int *ended, int *status)
{
    size_t n = dyn_session_npoints(s);
    uint64_t *c = calloc(n + 1, sizeof(*c)), *prev = calloc(n + 1, sizeof(*prev));
    double next = o->interval > 0 ? t0 + o->interval : 0, last = t0;

    *ended = 0;
    while (!stop_flag && !out_closed && c != NULL && prev != NULL) {
        double t = now(), step = 0.05;
        if ((*ended = dyn_proc_ended(p, status)) != 0)
            break;
        if (hist->v != NULL) { /* the series, every step: a read of shared memory */
            dyn_session_sample(s, c);
            dyn_hist_add(hist, t, c);
        }
        if (o->duration > 0 && t >= t0 + o->duration)
            break;
        if (next > 0 && t >= next) {
            dyn_session_sample(s, c);
            print_live(s, dyn_proc_pid(p), c, prev, t - last, t - t0);
            memcpy(prev, c, n * sizeof(*c));
            last = t;
            next += o->interval;
        }
        if (o->duration > 0 && t0 + o->duration - t < step)
            step = t0 + o->duration - t;
        if (next > 0 && next - t < step)
            step = next - t;
        sleep_s(step);
    }
    free(c);
    free(prev);
}

static int
session(dyn_proc_t *p, const opts_t *o, int spawned, int *started /*OUT*/)
{
    char exe[64];
    cfg_image_t *img = NULL;
    cfg_prog_t *prog = NULL;
    dyn_session_t *s = NULL;
    uint64_t bias = 0, *c = NULL;
    int64_t *ns = NULL;
    int pid = dyn_proc_pid(p), rc, ret = 0, ended = 0, status = 0, leaked = 0;
    double t0;
    dyn_hist_t hist = { 0 };

    dyn_proc_exe_path(p, exe, sizeof(exe));
    if ((rc = cfg_image_open_bfd(exe, &img)) < 0) {
        fprintf(stderr, "%s: %d: cannot read its executable %s: %s\n", prog_name, pid,
            exe, rc == QP_EIO ? strerror(errno) : qp_strerror(rc));
        ret = EXIT_FAIL;
        goto out;
    }
    const char *unsupported = ed_image_unsupported(img);
    if (unsupported != NULL) {
        fprintf(stderr, "%s: %d: %s\n", prog_name, pid, unsupported);
        ret = EXIT_FAIL;
        goto out;
    }
    cfg_opts_t co = { 0 };
    tool_cfg_debug(&co); /* QP_DEBUG: development aid, see dyn(1) */
    if ((rc = cfg_prog_build(img, &co, &prog)) < 0
        || (rc = dyn_proc_load_bias(p, img->entry, &bias)) < 0) {
        fail_trace(pid, "cannot analyse its executable", rc);
        ret = EXIT_FAIL;
        goto out;
    }
    ret = instrument(p, prog, bias, o, &s);
    *started = !dyn_proc_is_stopped(p);
    if (ret != 0)
        goto out;
    t0 = now();
    if (o->histogram
        && dyn_hist_init(&hist, dyn_session_npoints(s), HIST_BUCKETS, 0.05, t0) < 0) {
        ret = EXIT_FAIL;
        goto out;
    }
    watch(p, s, o, t0, &hist, &ended, &status);
    if (!ended) {
        if ((rc = dyn_proc_stop(p)) < 0) {
            if (dyn_proc_ended(p, &status) == 1) {
                ended = 1;
            } else {
                fail_trace(pid, "cannot stop it to remove the instrumentation", rc);
                ret = EXIT_FAIL;
            }
        } else {
            double t1 = now();
            rc = dyn_session_remove(s, &leaked);
            dyn_proc_resume(p);
            if (o->verbose)
                fprintf(stderr, "%s: %d: instrumentation removed, stopped %.1f ms\n",
                    prog_name, pid, (now() - t1) * 1e3);
            if (rc < 0)
                fprintf(stderr, "%s: %d: removing the instrumentation: %s\n", prog_name,
                    pid, qp_strerror(rc));
            if (leaked == 1)
                fprintf(stderr,
                    "%s: %d: a thread may still be in a trampoline: its memory stays "
                    "mapped\n",
                    prog_name, pid);
            else if (leaked == 2 && o->verbose)
                fprintf(stderr,
                    "%s: %d: call-site trampolines stay mapped (a callee may still "
                    "return into them)\n",
                    prog_name, pid);
        }
    }
    c = calloc(dyn_session_npoints(s) + 1, sizeof(*c));
    ns = calloc(dyn_session_npoints(s) + 1, sizeof(*ns));
    if (c == NULL || ns == NULL) {
        ret = EXIT_FAIL;
        goto out;
    }
    dyn_session_sample(s, c);
    dyn_session_wall_ns(s, ns);
    if (ended && !dyn_session_shared(s))
        fprintf(stderr, "%s: %d: the process ended: counts are from the last sample\n",
            prog_name, pid);
    if (hist.v != NULL)
        dyn_hist_add(&hist, now(), c);
    if (report(s, c, ns, now() - t0, o->csv) < 0 && ret == 0)
        ret = EXIT_FAIL;
    if (hist.v != NULL)
        print_histogram(s, &hist, c);
    if (ret == 0 && ended && spawned)
        ret = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (out_closed) {
        fprintf(stderr, "%s: %d: standard output was closed: session ended%s\n",
            prog_name, pid, ended ? "" : ", instrumentation removed");
        ret = EXIT_FAIL;
    }
out:
    free(c);
    free(ns);
    dyn_hist_free(&hist);
    if (s != NULL && dyn_proc_is_stopped(p)) {
        dyn_session_remove(s, NULL);
        dyn_proc_resume(p);
    }
    dyn_session_destroy(s);
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
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

/* The one line of dyn clean: what was found and taken out. */
static void
print_clean(int pid, const dyn_clean_report_t *r)
{
    if (r->busy > 0)
        fprintf(stderr,
            "%s: %d: %u trampoline memor%s of a dyn still running left alone\n",
            prog_name, pid, r->busy, r->busy == 1 ? "y" : "ies");
    if (r->regions == 0) {
        printf("%s: %d: nothing of dyn's found\n", prog_name, pid);
        return;
    }
    if (r->jumps + r->moved + r->unmapped == 0) {
        printf("%s: %d: nothing to take out (%u trampoline memor%s stay%s mapped: "
               "call-site code, or a thread may still return there)\n",
            prog_name, pid, r->kept, r->kept == 1 ? "y" : "ies", r->kept == 1 ? "s" : "");
        return;
    }
    printf("%s: %d: %u jump%s put back, %u thread%s moved out, %u mapping%s unmapped",
        prog_name, pid, r->jumps, r->jumps == 1 ? "" : "s", r->moved,
        r->moved == 1 ? "" : "s", r->unmapped, r->unmapped == 1 ? "" : "s");
    if (r->kept > 0)
        printf(", %u trampoline memor%s left mapped (call sites, or a thread may still "
               "return there)",
            r->kept, r->kept == 1 ? "y" : "ies");
    printf("\n");
}

/* dyn clean PID: take out what a killed dyn left. */
static int
clean_main(int argc, char **argv)
{
    char exe[64];
    cfg_image_t *img = NULL;
    dyn_proc_t *p = NULL;
    dyn_clean_report_t r;
    uint64_t bias = 0;
    int pid, rc;

    if (parse_pid("clean", argc >= 2 ? argv[1] : NULL, &pid) < 0)
        return EXIT_USAGE;
    if (argc > 2) {
        fprintf(stderr, "%s: clean: unexpected argument '%s'\n", prog_name, argv[2]);
        return EXIT_USAGE;
    }
    catch_signals();
    snprintf(exe, sizeof(exe), "/proc/%d/exe", pid);
    /* Attach first: the reason it fails (no such process, ...) is the one to give. */
    if ((rc = dyn_proc_attach(pid, &p)) < 0) {
        fail_trace(pid, NULL, rc);
        return EXIT_FAIL;
    }
    dyn_proc_resume(p);
    if ((rc = cfg_image_open_bfd(exe, &img)) < 0
        || (rc = dyn_proc_load_bias(p, img->entry, &bias)) < 0) {
        fprintf(stderr, "%s: %d: cannot read its executable %s: %s\n", prog_name, pid,
            exe, rc == QP_EIO ? strerror(errno) : qp_strerror(rc));
        cfg_image_destroy(img);
        dyn_proc_destroy(p);
        return EXIT_FAIL;
    }
    if ((rc = dyn_proc_stop(p)) < 0) {
        fail_trace(pid, "cannot stop it", rc);
    } else if ((rc = dyn_clean(p, img, bias, &r)) < 0) {
        fprintf(stderr, "%s: %d: cleaning: %s\n", prog_name, pid,
            rc == QP_EIO ? strerror(errno) : qp_strerror(rc));
    }
    dyn_proc_destroy(p);
    cfg_image_destroy(img);
    if (rc < 0)
        return EXIT_FAIL;
    print_clean(pid, &r);
    return fflush(stdout) == 0 ? 0 : EXIT_FAIL;
}

int
main(int argc, char **argv)
{
    static const struct option lopts[] = {
        { "count", required_argument, NULL, 'c' },
        { "all", no_argument, NULL, 'a' },
        { "interval", required_argument, NULL, 'i' },
        { "duration", required_argument, NULL, 'd' },
        { "output", required_argument, NULL, 'o' },
        { "time", required_argument, NULL, 't' },
        { "calls-from", required_argument, NULL, 'f' },
        { "no-atomic", no_argument, NULL, 'N' },
        { "verbose", no_argument, NULL, 'v' },
        { "histogram", no_argument, NULL, 'H' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    t_started = now();
    tool_heap_setup();
    opts_t o = { 0 };
    dyn_proc_t *p = NULL;
    const char *cmd;
    int opt, ret, pid = 0, run, started = 0;

    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
        printf("dyn (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
        return 0;
    }
    if (argc < 2
        || (strcmp(argv[1], "attach") != 0 && strcmp(argv[1], "run") != 0
            && strcmp(argv[1], "clean") != 0)) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "clean") == 0)
        return clean_main(argc - 1, argv + 1);
    cmd = argv[1];
    run = strcmp(cmd, "run") == 0;
    o.count = calloc((size_t)argc, sizeof(*o.count));
    o.time = calloc((size_t)argc, sizeof(*o.time));
    o.calls = calloc((size_t)argc, sizeof(*o.calls));
    if (o.count == NULL || o.time == NULL || o.calls == NULL)
        return EXIT_FAIL;
    argv++;
    argc--;
    if (!run) {
        if (parse_pid("attach", argc >= 2 ? argv[1] : NULL, &pid) < 0)
            return EXIT_USAGE;
        argv++;
        argc--;
    }
    while ((opt = getopt_long(argc, argv, "+c:at:f:i:d:o:vhV", lopts, NULL)) != -1) {
        switch (opt) {
        case 'c': o.count[o.ncount++] = optarg; break;
        case 'a': o.all = 1; break;
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
        case 't': o.time[o.ntime++] = optarg; break;
        case 'f':
            o.calls[o.ncalls++] = optarg;
            what = "points";
            break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("dyn (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION); return 0;
        default: usage(stderr); return EXIT_USAGE;
        }
    }
    if (o.ncount == 0 && !o.all && o.ntime == 0 && o.ncalls == 0) {
        fprintf(stderr,
            "%s: say what to measure: --count PATTERN, --time PATTERN, --calls-from "
            "FUNC or --all\n",
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
    if (o.csv != NULL && !writable(o.csv)) {
        fprintf(stderr, "%s: %s: %s\n", prog_name, o.csv, strerror(errno));
        return EXIT_FAIL;
    }

    catch_signals();

    if (run) {
        ret = dyn_proc_spawn(argv + optind, &p);
        if (ret < 0) {
            fprintf(stderr, "%s: %s: %s\n", prog_name, argv[optind],
                ret == QP_EIO ? strerror(errno) : qp_strerror(ret));
            return EXIT_FAIL;
        }
        pid = dyn_proc_pid(p);
    } else {
        /* Attach only to check permissions early; analysis runs while it runs. */
        ret = dyn_proc_attach(pid, &p);
        if (ret < 0) {
            fail_trace(pid, NULL, ret);
            return EXIT_FAIL;
        }
        dyn_proc_resume(p);
    }
    ret = session(p, &o, run, &started);
    if (run && !started) {
        /* Nothing could be measured: the program is not run. */
        kill(pid, SIGKILL);
        dyn_proc_destroy(p);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        p = NULL;
    }
    dyn_proc_destroy(p);
    free(o.count);
    free(o.time);
    free(o.calls);
    return ret;
}
