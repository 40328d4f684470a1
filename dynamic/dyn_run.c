/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A whole measuring session, as `dyn attach` and `dyn run` run it: start the program or
 * attach to the process, read and analyse its executable, choose the points, stop it,
 * install, let it run; sample (live tables, the histogram) until the duration, the
 * caller's stop flag or the end of the process; stop it, take everything out, read the
 * final counts, let it go. Nothing here prints, exits or installs a signal handler: the
 * caller gets one line per event through its note callback, live tables through its
 * live callback, the final counts in a report, and one line saying why on failure. A
 * signal is the caller's business: its handler sets the flag polled here, so a session
 * is never cut in the middle of an install or a removal.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dynamic/dyn.h"

/* The step of the sampling loop, in seconds: how soon a stop or the end is seen. */
#define STEP 0.05

double
dyn_run_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void
sleep_s(double s)
{
    struct timespec ts;
    if (s <= 0)
        return;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    nanosleep(&ts, NULL); /* EINTR (a signal of the caller's): the loop looks at *stop */
}

/* Write one line (printf FMT) into WHY (WHYLEN bytes); nothing when WHY is NULL. */
static void __attribute__((format(printf, 3, 4)))
say_why(char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;
    if (why == NULL || whylen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
}

/* Hand the caller one line (printf FMT, any length); DETAIL: worth showing on request. */
static void __attribute__((format(printf, 3, 4)))
note(const dyn_run_cb_t *cb, int detail, const char *fmt, ...)
{
    char buf[512], *line = buf;
    va_list ap, again;
    if (cb == NULL || cb->note == NULL)
        return;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    if (n >= (int)sizeof(buf) && (line = malloc((size_t)n + 1)) != NULL)
        vsnprintf(line, (size_t)n + 1, fmt, again);
    va_end(again);
    va_end(ap);
    cb->note(cb->arg, detail, line != NULL ? line : buf); /* buf: cut short, no memory */
    if (line != buf)
        free(line);
}

/*****************************************************************************
 * Why tracing failed
 */

/*
 * The line for a failure RC to trace PID, into WHY: "PID: [WHAT: ]REASON". Call right
 * after the failure: errno says why (QP_EIO).
 */
static void
trace_why(int pid, const char *what, int rc, char *why, size_t whylen)
{
    int err = errno;
    char buf[256];
    const char *reason
        = rc == QP_EIO ? dyn_proc_why(pid, err, buf, sizeof(buf)) : qp_strerror(rc);

    if (what == NULL)
        say_why(why, whylen, "%d: %s", pid, reason);
    else
        say_why(why, whylen, "%d: %s: %s", pid, what, reason);
}

/* The reason of a failure RC that is not about tracing: errno's for QP_EIO. */
static const char *
reason(int rc)
{
    return rc == QP_EIO ? strerror(errno) : qp_strerror(rc);
}

/*****************************************************************************
 * Rows
 */

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

dyn_row_t *
dyn_rows_make(size_t n, const char *const *names, const uint64_t *now, const uint64_t *prev,
    const int64_t *ns)
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

/*****************************************************************************
 * The session
 */

/* One file measured: the executable, or a shared library named by MODULE:GLOB. */
typedef struct mod {
    char *name;         /* the library's base name; NULL for the executable */
    cfg_image_t *img;   /* its file */
    cfg_prog_t *prog;   /* its CFGs */
    uint64_t bias;      /* its load bias */
    dyn_session_t *s;   /* its session, once created */
    size_t nref;        /* refusals before `all` chose (executable) */
    uint64_t dev, ino;  /* the library's file (dyn_module_t) */
    uint64_t lo;        /* ... where it is mapped */
    int dropped;        /* unloaded (dlclose) or gone with an exec: counts kept */
    size_t image;       /* the image of the process it belongs to (0: the first) */
} mod_t;

/* What one session holds while it runs. */
typedef struct run {
    const dyn_run_opts_t *o; /* the caller's options */
    const dyn_run_cb_t *cb;  /* the caller's callbacks (may be NULL) */
    dyn_proc_t *p;           /* the process */
    int pid;                 /* its id */
    mod_t *m;                /* the files measured (the executable first, if at all) */
    size_t nm;               /* how many */
    size_t npoints;          /* points installed, over every session */
    char **names;            /* their names ("MODULE:name" in libraries), in order */
    int ended;               /* the process ended during the session */
    int status;              /* ... its wait status */
    int follow;              /* libraries loaded later are seen (dyn_proc_follow) */
    uint64_t rdebug, brk;    /* ... the loader's r_debug and r_brk */
    unsigned char *seen;     /* per MODULE:GLOB pattern (count, time, calls): a
                              * library it names was read */
    size_t forks;            /* children forked while followed, not measured */
    size_t forks_counted;    /* ... counted with the parent (shared counters) */
    size_t image;            /* the current image (execs while followed so far) */
    char **progs;            /* per image: its program's base name (or NULL) */
    size_t nprogs;           /* ... how many are known */
    int lib;                 /* some pattern names a library (MODULE:GLOB) */
    int late;                /* instrumenting libraries loaded later (on_break) */
} run_t;

static int
stopping(const run_t *r)
{
    return r->o->stop != NULL && *r->o->stop;
}

/* The counters of every point of every session, in order, into C. */
static void
sample_all(run_t *r, uint64_t *c)
{
    for (size_t i = 0, k = 0; i < r->nm; k += dyn_session_npoints(r->m[i++].s))
        dyn_session_sample(r->m[i].s, c + k);
}

/* Their times (after sample_all), -1 where not timed; < 0 when not known. */
static int
wall_all(run_t *r, int64_t *ns)
{
    int rc = 0;
    for (size_t i = 0, k = 0; i < r->nm; k += dyn_session_npoints(r->m[i++].s))
        if (dyn_session_wall_ns(r->m[i].s, ns + k) < 0)
            rc = -1;
    return rc;
}

/* Are the counters of every session shared with us? */
static int
shared_all(const run_t *r)
{
    for (size_t i = 0; i < r->nm; i++)
        if (dyn_session_npoints(r->m[i].s) > 0 && !dyn_session_shared(r->m[i].s))
            return 0;
    return 1;
}

/*
 * "MODULE:" before the names of a library's rows, "" for the executable's; rows of an
 * earlier image of the process (before an exec) get "PROG[N]:" in front (N from 1).
 */
/* The base name of the program of image I of R's process, "?" when not known. */
static const char *
prog_of(const run_t *r, size_t i)
{
    return i < r->nprogs && r->progs[i] != NULL ? r->progs[i] : "?";
}

static const char *
prefix(const run_t *r, const mod_t *m, char *buf, size_t cap)
{
    int k = 0;
    if (m->image < r->image)
        k = snprintf(buf, cap, "%s[%zu]:", prog_of(r, m->image), m->image + 1);
    if (k < 0 || (size_t)k >= cap)
        k = 0;
    if (m->name != NULL)
        snprintf(buf + k, cap - (size_t)k, "%s:", m->name);
    else if (k == 0)
        return "";
    return buf;
}

/* r->names: the name of every point, in order. 0 or QP_ENOMEM. */
static int
make_names(run_t *r)
{
    size_t k = 0;
    for (size_t i = 0; r->names != NULL && i < r->npoints; i++)
        free(r->names[i]);
    free(r->names);
    r->names = NULL;
    r->npoints = 0;
    for (size_t i = 0; i < r->nm; i++)
        r->npoints += dyn_session_npoints(r->m[i].s);
    if ((r->names = calloc(r->npoints + 1, sizeof(*r->names))) == NULL)
        return QP_ENOMEM;
    for (size_t i = 0; i < r->nm; i++) {
        char pre[512];
        const char *pf = prefix(r, &r->m[i], pre, sizeof(pre));
        for (size_t j = 0; j < dyn_session_npoints(r->m[i].s); j++, k++) {
            const char *n = dyn_session_point(r->m[i].s, j, NULL);
            size_t len = strlen(pf) + strlen(n) + 1;
            if ((r->names[k] = malloc(len)) == NULL)
                return QP_ENOMEM;
            snprintf(r->names[k], len, "%s%s", pf, n);
        }
    }
    return 0;
}

/*
 * Does the glob MG name the library NAME (the base name of its file)? As the file is
 * named, or as ldd and DT_NEEDED name it, without the file's trailing version numbers
 * ("libsqlite3.so.0" for libsqlite3.so.0.8.6).
 */
static int
lib_name_matches(const char *mg, const char *name)
{
    char *n = strdup(name);
    int yes = 0;
    if (n == NULL)
        return fnmatch(mg, name, 0) == 0;
    for (;;) {
        if ((yes = fnmatch(mg, n, 0) == 0))
            break;
        char *dot = strrchr(n, '.');
        if (dot == NULL || dot[1] == '\0' || strspn(dot + 1, "0123456789") != strlen(dot + 1)
            || strstr(n, ".so.") == NULL)
            break;
        *dot = '\0';
    }
    free(n);
    return yes;
}

/*
 * Does PATTERN choose in M, and with which glob (*GLOB)? A bare pattern chooses in the
 * executable, MODULE:GLOB in the libraries whose base name matches MODULE.
 */
static int
applies(const mod_t *m, const char *pattern, const char **glob /*OUT*/)
{
    const char *sep = cfg_module_sep(pattern);
    if (sep == NULL) {
        *glob = pattern;
        return m->name == NULL;
    }
    *glob = sep + 1;
    if (m->name == NULL)
        return 0;
    char *mg = strndup(pattern, (size_t)(sep - pattern));
    int yes = mg != NULL && lib_name_matches(mg, m->name);
    free(mg);
    return yes;
}

/*
 * When a bare name matches nothing in the executable but the executable calls it through
 * its PLT, or it is a library function here, what to write instead, into HINT: the
 * library that defines it in dyn's own process (libc's functions are the usual case:
 * the same libc.so.6), or the MODULE:NAME form with '*'.
 */
static void
import_hint(const run_t *r, const char *name, char *hint, size_t len)
{
    char plt[300];
    const cfg_prog_t *exe = NULL;
    hint[0] = '\0';
    for (size_t i = 0; i < r->nm && exe == NULL; i++)
        if (r->m[i].name == NULL)
            exe = r->m[i].prog;
    if (exe == NULL || name[strcspn(name, "*?[")] != '\0')
        return;
    snprintf(plt, sizeof(plt), "%s@plt", name);
    void *f = dlsym(RTLD_DEFAULT, name);
    Dl_info info;
    const char *lib = NULL;
    if (f != NULL && dladdr(f, &info) != 0 && info.dli_fname != NULL) {
        lib = strrchr(info.dli_fname, '/');
        lib = lib != NULL ? lib + 1 : info.dli_fname;
        if (strstr(lib, ".so") == NULL)
            lib = NULL; /* dyn's own (static) code */
    }
    if (cfg_proc_by_name(exe, plt) == NULL && lib == NULL)
        return;
    if (lib != NULL)
        snprintf(hint, len, " in the executable; a shared library's procedure is named with "
                 "its library: '%s:%s' (or '*:%s', any library)", lib, name, name);
    else
        snprintf(hint, len, " in the executable; it calls %s in a shared library: name it "
                 "'LIBRARY:%s' (LIBRARY as ldd shows it, or '*', any library)", name, name);
}

enum { SEL_COUNT, SEL_TIME, SEL_CALLS };

/* Choose with PATTERN (of KIND) in every session it applies to; 0 or QP_E*. */
static int
select_all(
    run_t *r, size_t from, int kind, const char *pattern, char *why, size_t whylen)
{
    unsigned total = 0, nmod = 0;
    if (r->late && cfg_module_sep(pattern) == NULL)
        return 0; /* (late modules are libraries) */
    for (size_t i = from; i < r->nm; i++) {
        const char *glob;
        unsigned nm = 0;
        int rc;
        if (!applies(&r->m[i], pattern, &glob))
            continue;
        nmod++;
        rc = kind == SEL_TIME   ? dyn_session_select_time(r->m[i].s, glob, &nm)
            : kind == SEL_CALLS ? dyn_session_select_calls(r->m[i].s, glob, &nm)
                                : dyn_session_select(r->m[i].s, glob, 0, &nm);
        if (rc < 0) {
            say_why(why, whylen, "%s", qp_strerror(rc));
            return rc;
        }
        total += nm;
    }
    /* (A MODULE that names no library read: read_libs said so.) */
    if (total == 0 && (nmod > 0 || (!r->late && cfg_module_sep(pattern) == NULL))) {
        char hint[512] = "";
        if (cfg_module_sep(pattern) == NULL)
            import_hint(r, pattern, hint, sizeof(hint));
        note(r->cb, 0, "no procedure matches '%s'%s", pattern, hint);
    }
    return 0;
}

static int follow_start(run_t *r);
static void on_break(run_t *r);
static void on_fork(run_t *r, dyn_proc_t *child);
static void on_exec(run_t *r);

/*
 * Choose and patch in the files r->m[FROM..] and let go (FROM > 0: libraries loaded
 * later, the process is stopped on the loader's breakpoint). 0 or QP_E* (line in WHY).
 */
static int
instrument(run_t *r, size_t from, char *why, size_t whylen)
{
    const dyn_run_opts_t *o = r->o;
    const char *what = o->ncalls > 0 ? "points" : "procedures";
    int rc;
    double t0;
    size_t nin = 0, nref = 0;

    for (size_t i = from; i < r->nm; i++) {
        mod_t *m = &r->m[i];
        if ((rc = dyn_session_create(r->p, m->prog, m->bias, &m->s)) < 0) {
            say_why(why, whylen, "%s", qp_strerror(rc));
            return rc;
        }
        dyn_session_set_atomic(m->s, !o->no_atomic);
    }
    /* Timers first: a procedure chosen by a count pattern would be counted only. */
    for (size_t i = 0; i < o->ntime; i++)
        QP_CHECK(select_all(r, from, SEL_TIME, o->time[i], why, whylen));
    for (size_t i = 0; i < o->ncalls; i++)
        QP_CHECK(select_all(r, from, SEL_CALLS, o->calls[i], why, whylen));
    for (size_t i = 0; i < o->ncount; i++)
        QP_CHECK(select_all(r, from, SEL_COUNT, o->count[i], why, whylen));
    for (size_t i = from; i < r->nm; i++) {
        mod_t *m = &r->m[i];
        m->nref = dyn_session_nrefused(m->s);
        /* `all`: the executable's procedures only. */
        if (o->all && m->name == NULL
            && (rc = dyn_session_select(m->s, NULL, DYN_SEL_ALL, NULL)) < 0) {
            say_why(why, whylen, "%s", qp_strerror(rc));
            return rc;
        }
    }
    if (!r->late && stopping(r)) {
        say_why(why, whylen, "%d: interrupted before anything was instrumented", r->pid);
        return QP_EINTR;
    }
    t0 = dyn_run_now();
    if (!dyn_proc_is_stopped(r->p) && (rc = dyn_proc_stop(r->p)) < 0) {
        trace_why(r->pid, "cannot stop it", rc, why, whylen);
        return rc;
    }
    for (size_t i = from; i < r->nm; i++) {
        if ((rc = dyn_session_install(r->m[i].s)) < 0) {
            int err = errno;
            for (size_t j = from; j < i; j++) /* all or nothing */
                dyn_session_remove(r->m[j].s, NULL);
            if (r->late) { /* a late library: without its sessions, the rest goes on */
                errno = err;
                note(r->cb, 0, "%d: cannot instrument %s: %s", r->pid, r->m[from].name,
                    reason(rc));
                for (size_t j = from; j < r->nm; j++)
                    r->m[j].dropped = 1;
                return 0;
            }
            dyn_proc_resume(r->p);
            errno = err;
            trace_why(r->pid, "cannot instrument it", rc, why, whylen);
            return rc;
        }
        nin += dyn_session_npoints(r->m[i].s);
        nref += dyn_session_nrefused(r->m[i].s);
    }
    if (!r->late && r->follow && follow_start(r) < 0)
        r->follow = 0;
    if (!r->late && (nin > 0 || r->follow))
        dyn_proc_resume(r->p);
    /* Refusals: those of named patterns always, the rest of `all` as details. */
    for (size_t k = from; k < r->nm; k++) {
        const mod_t *m = &r->m[k];
        char pre[512];
        const char *pf = prefix(r, m, pre, sizeof(pre));
        for (size_t i = 0; i < dyn_session_nrefused(m->s); i++) {
            const char *whyref, *name = dyn_session_refusal(m->s, i, &whyref);
            note(r->cb, i >= m->nref && o->all, "%s%s: not instrumented: %s", pf, name,
                whyref);
        }
    }
    double t1 = dyn_run_now();
    if (r->late) {
        char list[512] = "";
        for (size_t k = from, len = 0; k < r->nm && len < sizeof(list) - 1; k++)
            len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
                len ? ", " : "", r->m[k].name);
        note(r->cb, 0, "%d: %s loaded: %zu %s instrumented, %zu refused, stopped %.1f ms",
            r->pid, list, nin, what, nref, (t1 - t0) * 1e3);
        return make_names(r);
    }
    /* How the executable's counts are made. */
    const char *cwhy = NULL;
    unsigned ncpu = r->nm > 0 ? dyn_session_per_cpu(r->m[0].s, &cwhy) : 0;
    if (ncpu > 0)
        note(r->cb, 1, "counts per CPU (rseq): %u copies, summed when read", ncpu);
    else if (cwhy != NULL)
        note(r->cb, 0, "note: counts with locked adds, not per CPU: %s", cwhy);
    note(r->cb, 0,
        "%d: %zu %s instrumented, %zu refused, stopped %.1f ms, %.2f s after dyn "
        "started%s",
        r->pid, nin, what, nref, (t1 - t0) * 1e3, t1 - o->t_start,
        shared_all(r) ? "" : " (counters not shared)");
    if (nin == 0 && r->follow && r->lib) {
        note(r->cb, 0, "%d: waiting for the libraries named to be loaded", r->pid);
    } else if (nin == 0 && r->image > 0) {
        note(r->cb, 0, "%d: nothing to measure in the new program", r->pid);
    } else if (nin == 0) {
        say_why(why, whylen, "nothing to measure");
        return QP_ENOTFOUND;
    }
    return make_names(r);
}

/* Grow H to N series (libraries loaded while measuring); the new ones start empty. */
static int
hist_grow(drv_hist_t *h, size_t n)
{
    uint64_t *v = calloc(n * h->nbuckets + 1, sizeof(*v)), *l = calloc(n + 1, sizeof(*l));
    if (v == NULL || l == NULL) {
        free(v);
        free(l);
        return QP_ENOMEM;
    }
    memcpy(v, h->v, h->nseries * h->nbuckets * sizeof(*v));
    memcpy(l, h->last, h->nseries * sizeof(*l));
    free(h->v);
    free(h->last);
    h->v = v;
    h->last = l;
    h->nseries = n;
    return 0;
}

/* Watch until the duration, a stop, the caller's live callback or the end of the process.
 */
static void
watch(run_t *r, double t0, drv_hist_t *hist)
{
    const dyn_run_opts_t *o = r->o;
    size_t n = r->npoints;
    uint64_t *c = calloc(n + 1, sizeof(*c)), *prev = calloc(n + 1, sizeof(*prev));
    int64_t *ns = calloc(n + 1, sizeof(*ns));
    const char *const *names = (const char *const *)r->names;
    double next = o->interval > 0 ? t0 + o->interval : 0, last = t0;
    int gone = 0; /* the live callback said its output is gone */

    while (!stopping(r) && !gone && c != NULL && prev != NULL && ns != NULL) {
        double t = dyn_run_now(), step = r->follow ? STEP / 5 : STEP;
        if (r->follow) {
            dyn_event_t ev;
            if (dyn_proc_poll(r->p, &ev) < 0)
                ;
            else if (ev.kind == DYN_EV_BREAK) {
                on_break(r);
                dyn_proc_resume(r->p);
            } else if (ev.kind == DYN_EV_FORK) {
                on_fork(r, ev.child);
            } else if (ev.kind == DYN_EV_EXEC) {
                on_exec(r); /* the new program instrumented, or unmeasured */
                if (dyn_proc_is_stopped(r->p))
                    dyn_proc_resume(r->p);
            }
            names = (const char *const *)r->names; /* (made again) */
            if (r->npoints != n) { /* libraries loaded: more points */
                size_t m = r->npoints;
                uint64_t *c2 = realloc(c, (m + 1) * sizeof(*c));
                c = c2 != NULL ? c2 : c;
                uint64_t *p2 = realloc(prev, (m + 1) * sizeof(*prev));
                prev = p2 != NULL ? p2 : prev;
                int64_t *n2 = realloc(ns, (m + 1) * sizeof(*ns));
                ns = n2 != NULL ? n2 : ns;
                if (c2 == NULL || p2 == NULL || n2 == NULL
                    || (hist->v != NULL && hist_grow(hist, m) < 0))
                    break;
                memset(prev + n, 0, (m - n) * sizeof(*prev)); /* new rows: from 0 */
                n = m;
                names = (const char *const *)r->names;
            }
        }
        if ((r->ended = dyn_proc_ended(r->p, &r->status)) != 0)
            break;
        if (hist->v != NULL) { /* the series, every step: a read of shared memory */
            sample_all(r, c);
            drv_hist_add(hist, t, c);
        }
        if (o->duration > 0 && t >= t0 + o->duration)
            break;
        if (next > 0 && t >= next) {
            sample_all(r, c);
            /* The timers so far too (the sample read them): calibrated, no stop. */
            if (ns != NULL && wall_all(r, ns) < 0)
                for (size_t i = 0; i < n; i++)
                    ns[i] = -1;
            dyn_row_t *rows = dyn_rows_make(n, names, c, prev, ns);
            if (rows != NULL && r->cb != NULL && r->cb->live != NULL) {
                dyn_live_t l = { r->pid, t - t0, t - last, rows, n };
                gone = r->cb->live(r->cb->arg, &l) != 0;
            }
            free(rows);
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
    free(ns);
}

/*
 * Stop the process and take the instrumentation out (notes say what stays), unless it
 * ended. Returns 0, or QP_E* with the line in WHY when it could not be stopped.
 */
static int
take_out(run_t *r, char *why, size_t whylen)
{
    int rc = 0, leaked = 0;

    if (r->ended)
        return 0;
    if ((rc = dyn_proc_stop(r->p)) < 0) {
        if (dyn_proc_ended(r->p, &r->status) == 1) {
            r->ended = 1;
            return 0;
        }
        trace_why(
            r->pid, "cannot stop it to remove the instrumentation", rc, why, whylen);
        return rc;
    }
    double t1 = dyn_run_now();
    for (size_t i = 0; i < r->nm; i++) {
        int lk = 0, e = r->m[i].dropped ? 0 : dyn_session_remove(r->m[i].s, &lk);
        if (e < 0 && rc == 0)
            rc = e;
        if (lk == 1 || (lk == 2 && leaked == 0))
            leaked = lk;
    }
    if (dyn_proc_unfollow(r->p) < 0 && rc == 0)
        rc = QP_EIO;
    dyn_proc_resume(r->p);
    note(r->cb, 1, "%d: instrumentation removed, stopped %.1f ms", r->pid,
        (dyn_run_now() - t1) * 1e3);
    if (rc < 0)
        note(r->cb, 0, "%d: removing the instrumentation: %s", r->pid, qp_strerror(rc));
    if (leaked == 1)
        note(r->cb, 0,
            "%d: a thread may still be in a trampoline: its memory stays mapped", r->pid);
    else if (leaked == 2)
        note(r->cb, 1,
            "%d: call-site trampolines stay mapped (a callee may still return into them)",
            r->pid);
    return 0;
}

/* The final counts into REP (measured from T0, with HIST). 0 or QP_ENOMEM. */
static int
final_counts(run_t *r, double t0, drv_hist_t *hist, dyn_run_report_t *rep)
{
    size_t n = r->npoints;

    rep->npoints = n;
    rep->names = calloc(n + 1, sizeof(*rep->names));
    rep->calls = calloc(n + 1, sizeof(*rep->calls));
    rep->wall_ns = calloc(n + 1, sizeof(*rep->wall_ns));
    if (rep->names == NULL || rep->calls == NULL || rep->wall_ns == NULL)
        return QP_ENOMEM;
    for (size_t i = 0; i < n; i++)
        if ((rep->names[i] = strdup(r->names[i])) == NULL)
            return QP_ENOMEM;
    sample_all(r, rep->calls);
    wall_all(r, rep->wall_ns);
    if (r->ended && !shared_all(r))
        note(r->cb, 0, "%d: the process ended: counts are from the last sample", r->pid);
    if (hist->v != NULL)
        drv_hist_add(hist, dyn_run_now(), rep->calls);
    rep->rows
        = dyn_rows_make(n, (const char *const *)rep->names, rep->calls, NULL, rep->wall_ns);
    if (rep->rows == NULL)
        return QP_ENOMEM;
    for (size_t i = 0; i < n; i++)
        rep->timed |= rep->wall_ns[i] >= 0;
    rep->secs = dyn_run_now() - t0;
    rep->ended = r->ended;
    rep->status = r->status;
    rep->hist = *hist;
    memset(hist, 0, sizeof(*hist));
    rep->measured = 1;
    return 0;
}

/*****************************************************************************
 * The files to measure
 */

/* A new entry of r->m (zeroed), or NULL. */
static mod_t *
mod_add(run_t *r)
{
    mod_t *v = realloc(r->m, (r->nm + 1) * sizeof(*v));
    if (v == NULL)
        return NULL;
    r->m = v;
    memset(&v[r->nm], 0, sizeof(*v));
    v[r->nm].image = r->image;
    return &v[r->nm++];
}

/* Does some pattern of O name a library (MODULE:GLOB)? Does one name the executable? */
static void
patterns_of(const dyn_run_opts_t *o, int *lib, int *exe)
{
    const char *const *lists[3] = { o->count, o->time, o->calls };
    size_t ns[3] = { o->ncount, o->ntime, o->ncalls };
    *lib = 0;
    *exe = o->all;
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < ns[k]; i++) {
            if (cfg_module_sep(lists[k][i]) != NULL)
                *lib = 1;
            else
                *exe = 1;
        }
}

/* The executable of R's process, read and analysed into a new r->m. */
static int
read_exe(run_t *r, char *why, size_t whylen)
{
    char exe[64];
    mod_t *m;
    int rc;

    if ((m = mod_add(r)) == NULL) {
        say_why(why, whylen, "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    dyn_proc_exe_path(r->p, exe, sizeof(exe));
    if ((rc = cfg_image_open_bfd(exe, &m->img)) < 0) {
        say_why(why, whylen, "%d: cannot read its executable %s: %s", r->pid, exe,
            reason(rc));
        return rc;
    }
    const char *unsupported = ed_image_unsupported(m->img);
    if (unsupported != NULL) {
        say_why(why, whylen, "%d: %s", r->pid, unsupported);
        return QP_EFORMAT;
    }
    if ((rc = cfg_prog_build(m->img, r->o->cfg, &m->prog)) < 0
        || (rc = dyn_proc_load_bias(r->p, m->img->entry, &m->bias)) < 0) {
        trace_why(r->pid, "cannot analyse its executable", rc, why, whylen);
        return rc;
    }
    return 0;
}

/* Is library L named by the module part of some pattern of O? */
static int
lib_named(const dyn_run_opts_t *o, const dyn_module_t *l)
{
    const char *const *lists[3] = { o->count, o->time, o->calls };
    size_t ns[3] = { o->ncount, o->ntime, o->ncalls };
    mod_t m = { 0 };
    const char *glob;

    m.name = l->name;
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < ns[k]; i++)
            if (applies(&m, lists[k][i], &glob))
                return 1;
    return 0;
}

/* The MODULE:GLOB patterns of O, in order (count, time, calls): pattern I into *PAT. */
static size_t
lib_patterns(const dyn_run_opts_t *o, size_t i, const char **pat /*OUT*/)
{
    const char *const *lists[3] = { o->count, o->time, o->calls };
    size_t ns[3] = { o->ncount, o->ntime, o->ncalls };
    *pat = NULL;
    for (int k = 0; k < 3; k++) {
        if (i < ns[k]) {
            *pat = lists[k][i];
            return 1;
        }
        i -= ns[k];
    }
    return 0;
}

/* Is library L already measured (or was it, and is still mapped there)? */
static int
lib_known(const run_t *r, const dyn_module_t *l)
{
    for (size_t i = 0; i < r->nm; i++)
        if (r->m[i].name != NULL && !r->m[i].dropped && r->m[i].dev == l->dev
            && r->m[i].ino == l->ino && r->m[i].lo == l->lo)
            return 1;
    return 0;
}

/*
 * The libraries of V (N of them, dyn_proc_modules) named by MODULE:GLOB patterns and not
 * measured yet, read and analysed into new entries of r->m. A library that cannot be
 * read is a note (its patterns then match nothing); so is a MODULE that names no library
 * loaded, unless libraries loaded later are seen (then the end says so).
 */
static int
read_libs(run_t *r, const dyn_module_t *v, size_t n, char *why, size_t whylen)
{
    const dyn_run_opts_t *o = r->o;
    int rc = 0;
    const char *p;

    for (size_t i = 0; i < n; i++) {
        char path[4200];
        const char *bad = NULL;
        mod_t *m;
        if (v[i].exe || !lib_named(o, &v[i]) || lib_known(r, &v[i]))
            continue;
        if ((m = mod_add(r)) == NULL || (m->name = strdup(v[i].name)) == NULL) {
            rc = QP_ENOMEM;
            say_why(why, whylen, "%s", qp_strerror(rc));
            break;
        }
        m->dev = v[i].dev;
        m->ino = v[i].ino;
        m->lo = v[i].lo;
        for (size_t k = 0; lib_patterns(o, k, &p); k++) {
            const char *glob;
            if (cfg_module_sep(p) != NULL && applies(m, p, &glob))
                r->seen[k] = 1;
        }
        if ((rc = dyn_module_path(r->pid, &v[i], path, sizeof(path), &bad)) < 0)
            ;
        else if ((rc = cfg_image_open_bfd(path, &m->img)) < 0)
            bad = reason(rc);
        else if ((bad = ed_image_unsupported(m->img)) != NULL)
            rc = QP_EFORMAT;
        else if ((rc = cfg_prog_build(m->img, o->cfg, &m->prog)) < 0
            || (rc = dyn_module_bias(&v[i], m->img, &m->bias)) < 0)
            bad = qp_strerror(rc);
        if (rc < 0) {
            note(r->cb, 0, "%d: %s (%s): not measured: %s", r->pid, v[i].name, v[i].path,
                bad != NULL ? bad : qp_strerror(rc));
            free(m->name);
            cfg_prog_destroy(m->prog);
            cfg_image_destroy(m->img);
            r->nm--;
            rc = 0;
        }
    }
    if (r->follow)
        return rc; /* the end says which MODULE was never loaded */
    /* A MODULE that names no library: say which are loaded. */
    for (size_t k = 0; rc == 0 && lib_patterns(o, k, &p); k++) {
        const char *sep = cfg_module_sep(p);
        if (sep == NULL || r->seen[k])
            continue;
        char list[1024] = "";
        size_t len = 0;
        for (size_t j = 0; j < n && len < sizeof(list) - 1; j++)
            if (!v[j].exe)
                len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
                    len ? ", " : "", v[j].name);
        note(r->cb, 0,
            "%d: no loaded library matches '%.*s' (in '%s'; the executable's "
            "procedures are named without MODULE:); loaded: %s",
            r->pid, (int)(sep - p), p, p, list[0] ? list : "none");
    }
    return rc;
}

/* The libraries of the process now, read into new entries of r->m: read_libs. */
static int
read_libs_now(run_t *r, char *why, size_t whylen)
{
    dyn_module_t *v = NULL;
    size_t n = 0;
    int rc;

    if ((rc = dyn_proc_modules(r->pid, &v, &n)) < 0) {
        trace_why(r->pid, "cannot read its memory map", rc, why, whylen);
        return rc;
    }
    rc = read_libs(r, v, n, why, whylen);
    dyn_modules_free(v, n);
    return rc;
}

/*****************************************************************************
 * Following the process: libraries loaded later, forks, exec
 */

/* The process is stopped after install: follow it, the breakpoint on r_brk. */
static int
follow_start(run_t *r)
{
    int rc;
    if ((rc = dyn_proc_follow(r->p)) < 0
        || (r->brk != 0 && (rc = dyn_proc_set_break(r->p, r->brk)) < 0)) {
        note(r->cb, 0, "%d: libraries loaded later are not seen: %s", r->pid,
            rc == QP_EUNSUPP ? "the loader's r_brk is not a bare return" : reason(rc));
        dyn_proc_unfollow(r->p);
        return rc;
    }
    return 0;
}

/*
 * On the loader's breakpoint (the process stopped): when the link map is consistent,
 * drop the sessions of libraries no longer mapped and instrument the new ones named.
 */
static void
on_break(run_t *r)
{
    dyn_module_t *v = NULL;
    size_t n = 0, from = r->nm;
    char why[512] = "";

    if (dyn_proc_r_state(r->p, r->rdebug) != 0 /* RT_CONSISTENT */
        || dyn_proc_modules(r->pid, &v, &n) < 0)
        return;
    for (size_t i = 0; i < r->nm; i++) {
        mod_t *m = &r->m[i];
        int mapped = 0;
        if (m->name == NULL || m->dropped)
            continue;
        for (size_t j = 0; j < n && !mapped; j++)
            mapped = v[j].dev == m->dev && v[j].ino == m->ino && v[j].lo == m->lo;
        if (mapped)
            continue;
        dyn_session_drop(m->s, 0);
        m->dropped = 1;
        note(r->cb, 0, "%d: %s unloaded: its counts are those until then", r->pid,
            m->name);
    }
    if (read_libs(r, v, n, why, sizeof(why)) < 0 && why[0])
        note(r->cb, 0, "%d: %s", r->pid, why);
    dyn_modules_free(v, n);
    r->late = 1;
    if (r->nm > from && instrument(r, from, why, sizeof(why)) < 0)
        note(r->cb, 0, "%d: %s", r->pid, why);
    r->late = 0;
}

/*
 * A child forked (CHILD, stopped, the loader's breakpoint already out of its copy of the
 * code). With shared counters it keeps the parent's patches and adds its calls to the
 * same rows (its trampolines are its own copy, never touched again); otherwise its
 * copy would count apart, unseen, so the patches are taken out of it. Either way it is
 * let go (detached): its own dlopen and exec are not followed, and dyn dying later
 * leaves it as a killed dyn leaves any process (`dyn clean`).
 */
static void
on_fork(run_t *r, dyn_proc_t *child)
{
    int counted = 1;
    for (size_t i = 0; i < r->nm; i++)
        if (!r->m[i].dropped && !dyn_session_counts_copies(r->m[i].s))
            counted = 0;
    for (size_t i = 0; i < r->nm && !counted; i++)
        if (!r->m[i].dropped)
            dyn_session_unpatch_copy(r->m[i].s, child);
    note(r->cb, 1, "%d: child %d forked: %s", r->pid, dyn_proc_pid(child),
        counted ? "counted with the parent" : "not measured");
    dyn_proc_destroy(child);
    if (counted)
        r->forks_counted++;
    else
        r->forks++;
}

/* The base name of the program of R's process now, into r->progs[r->image]. */
static void
prog_name(run_t *r)
{
    char exe[4200] = "", link[64];
    ssize_t k;
    char **v;

    if (r->nprogs != r->image
        || (v = realloc(r->progs, (r->image + 1) * sizeof(*v))) == NULL)
        return;
    r->progs = v;
    v[r->nprogs++] = NULL;
    snprintf(link, sizeof(link), "/proc/%d/exe", r->pid);
    if ((k = readlink(link, exe, sizeof(exe) - 1)) > 0) {
        exe[k] = '\0';
        const char *b = strrchr(exe, '/');
        v[r->image] = strdup(b != NULL ? b + 1 : exe);
    }
}

/*
 * The process ran execve (stopped in the new image): the sessions are gone with the old
 * one (their counts kept, never touched again); the new program is run to its entry and
 * instrumented with the same patterns. Left stopped when that failed.
 */
static void
on_exec(run_t *r)
{
    char exe[4200] = "", link[64], why[512] = "";
    size_t from = r->nm;
    ssize_t k;
    int rc, e, lib, exep;

    for (size_t i = 0; i < r->nm; i++)
        if (!r->m[i].dropped) {
            dyn_session_drop(r->m[i].s, 1);
            r->m[i].dropped = 1;
        }
    r->image++;
    prog_name(r);
    snprintf(link, sizeof(link), "/proc/%d/exe", r->pid);
    if ((k = readlink(link, exe, sizeof(exe) - 1)) > 0)
        exe[k] = '\0';
    note(r->cb, 0,
        "%d: the process ran execve (%s): the counts up to the exec are kept apart "
        "(rows %s[%zu]:...); measuring the new program",
        r->pid, exe[0] ? exe : "?", prog_of(r, r->image - 1), r->image);
    if ((rc = make_names(r)) < 0)
        return;
    if ((rc = dyn_proc_exec_to_entry(r->p)) < 0) {
        if (!(rc == QP_EIO && errno == ESRCH))
            trace_why(r->pid, "cannot run the new program to its entry point", rc, why,
                sizeof(why));
        goto fail;
    }
    patterns_of(r->o, &lib, &exep);
    if (exep && (rc = read_exe(r, why, sizeof(why))) < 0)
        goto fail;
    r->rdebug = r->brk = 0;
    if ((e = dyn_proc_r_debug(r->p, &r->rdebug, &r->brk)) < 0) {
        r->rdebug = r->brk = 0;
        if (r->lib)
            note(r->cb, 1, "%d: libraries loaded later are not seen: no r_debug (%s)",
                r->pid, reason(e));
    }
    if (r->lib && (rc = read_libs_now(r, why, sizeof(why))) < 0)
        goto fail;
    if ((rc = instrument(r, from, why, sizeof(why))) < 0)
        goto fail;
    return;
fail:
    if (why[0])
        note(r->cb, 0, "%s", why);
    if (from < r->nm || rc < 0)
        note(r->cb, 0, "%d: the new program runs unmeasured", r->pid);
    for (size_t i = from; i < r->nm; i++) { /* never installed (or taken out) */
        dyn_session_destroy(r->m[i].s);
        cfg_prog_destroy(r->m[i].prog);
        cfg_image_destroy(r->m[i].img);
        free(r->m[i].name);
    }
    r->nm = from;
    make_names(r);
}

/* The session over the attached (or started) process of R. *STARTED: it was let run. */
static int
session(run_t *r, dyn_run_report_t *rep, int *started, char *why, size_t whylen)
{
    const dyn_run_opts_t *o = r->o;
    int rc, lib, exe;
    double t0 = 0;
    drv_hist_t hist = { 0 };

    patterns_of(o, &lib, &exe);
    r->lib = lib;
    prog_name(r);
    /* A program started by dyn: its libraries are there once it is at its entry. */
    if (lib && o->argv != NULL && (rc = dyn_proc_run_to_entry(r->p)) < 0) {
        if (rc == QP_EIO && errno == ESRCH)
            say_why(why, whylen, "%d: the program ended before its entry point", r->pid);
        else
            trace_why(r->pid, "cannot run it to its entry point", rc, why, whylen);
        goto out;
    }
    if ((exe || !lib) && (rc = read_exe(r, why, whylen)) < 0)
        goto out;
    if (lib) {
        const char *p;
        size_t npat = 0;
        while (lib_patterns(o, npat, &p))
            npat++;
        if ((r->seen = calloc(npat + 1, 1)) == NULL) {
            rc = QP_ENOMEM;
            say_why(why, whylen, "%s", qp_strerror(rc));
            goto out;
        }
        /* Libraries loaded later (dlopen): seen through the loader's breakpoint. */
        int e = dyn_proc_r_debug(r->p, &r->rdebug, &r->brk);
        r->follow = e == 0;
        if (e < 0)
            note(r->cb, 1, "%d: libraries loaded later are not seen: no r_debug (%s)",
                r->pid, reason(e));
        if ((rc = read_libs_now(r, why, whylen)) < 0)
            goto out;
    } else if (o->follow_exec) {
        /* Execs followed: the breakpoint too when there is a loader (forks seen). */
        if (dyn_proc_r_debug(r->p, &r->rdebug, &r->brk) < 0)
            r->rdebug = r->brk = 0;
        r->follow = 1;
    }
    rc = instrument(r, 0, why, whylen);
    *started = !dyn_proc_is_stopped(r->p);
    if (rc < 0)
        goto out;
    t0 = dyn_run_now();
    int err = 0; /* no histogram: measure nothing, but take everything out */
    if (o->hist_buckets > 0
        && (err = drv_hist_init(&hist, r->npoints, o->hist_buckets, o->hist_width, t0))
            < 0)
        say_why(why, whylen, "%s", qp_strerror(err));
    else
        watch(r, t0, &hist);
    rc = take_out(r, why, whylen);
    if (r->forks_counted > 0)
        note(r->cb, 0,
            "%d: %zu %s forked: counted with the parent (%s later dlopen and exec not "
            "followed)", r->pid, r->forks_counted,
            r->forks_counted == 1 ? "child" : "children",
            r->forks_counted == 1 ? "its" : "their");
    if (r->forks > 0)
        note(r->cb, 0, "%d: %zu %s forked: not measured", r->pid, r->forks,
            r->forks == 1 ? "child" : "children");
    for (size_t k = 0, any = r->follow; any && k < o->ncount + o->ntime + o->ncalls; k++) {
        const char *p, *sep;
        lib_patterns(o, k, &p);
        if ((sep = cfg_module_sep(p)) != NULL && !r->seen[k])
            note(r->cb, 0, "%d: no library matching '%.*s' (in '%s') was loaded during "
                "the session", r->pid, (int)(sep - p), p, p);
    }
    if (err < 0)
        rc = err;
    else if ((err = final_counts(r, t0, &hist, rep)) < 0) {
        say_why(why, whylen, "%s", qp_strerror(err));
        rc = err;
    }
out:
    drv_hist_free(&hist);
    if (dyn_proc_is_stopped(r->p)) {
        int any = 0;
        for (size_t i = 0; i < r->nm; i++)
            if (r->m[i].s != NULL) {
                dyn_session_remove(r->m[i].s, NULL);
                any = 1;
            }
        any |= dyn_proc_unfollow(r->p) == 0 && r->follow;
        if (any)
            dyn_proc_resume(r->p);
    }
    free(r->seen);
    r->seen = NULL;
    for (size_t i = 0; i < r->nprogs; i++)
        free(r->progs[i]);
    free(r->progs);
    r->progs = NULL;
    r->nprogs = 0;
    for (size_t i = 0; i < r->nm; i++) {
        dyn_session_destroy(r->m[i].s);
        cfg_prog_destroy(r->m[i].prog);
        cfg_image_destroy(r->m[i].img);
        free(r->m[i].name);
    }
    free(r->m);
    r->m = NULL;
    r->nm = 0;
    for (size_t i = 0; r->names != NULL && i < r->npoints; i++)
        free(r->names[i]);
    free(r->names);
    r->names = NULL;
    return rc;
}

int
dyn_run_session(const dyn_run_opts_t *o, const dyn_run_cb_t *cb, dyn_run_report_t *rep,
    char *why, size_t whylen)
{
    run_t r;
    int rc, started = 0;

    if (rep != NULL)
        memset(rep, 0, sizeof(*rep));
    if (why != NULL && whylen > 0)
        why[0] = '\0';
    if (o == NULL || rep == NULL || (o->argv == NULL && o->pid <= 0)
        || (o->argv != NULL && o->argv[0] == NULL)) {
        say_why(why, whylen, "%s", qp_strerror(QP_EINVAL));
        return QP_EINVAL;
    }
    memset(&r, 0, sizeof(r));
    r.o = o;
    r.cb = cb;
    if (o->argv != NULL) {
        if ((rc = dyn_proc_spawn(o->argv, &r.p)) < 0) {
            say_why(why, whylen, "%s: %s", o->argv[0], reason(rc));
            return rc;
        }
        r.pid = dyn_proc_pid(r.p);
    } else {
        /* Attach only to check permissions early; analysis runs while it runs. */
        r.pid = o->pid;
        if ((rc = dyn_proc_attach(o->pid, &r.p)) < 0) {
            trace_why(o->pid, NULL, rc, why, whylen);
            return rc;
        }
        dyn_proc_resume(r.p);
    }
    rep->pid = r.pid;
    rc = session(&r, rep, &started, why, whylen);
    if (o->argv != NULL && !started)
        dyn_proc_kill(r.p); /* nothing could be measured: the program is not run */
    else
        dyn_proc_destroy(r.p);
    return rc;
}

void
dyn_run_report_free(dyn_run_report_t *rep)
{
    if (rep == NULL)
        return;
    for (size_t i = 0; rep->names != NULL && i < rep->npoints; i++)
        free(rep->names[i]);
    free(rep->names);
    free(rep->calls);
    free(rep->wall_ns);
    free(rep->rows);
    drv_hist_free(&rep->hist);
    memset(rep, 0, sizeof(*rep));
}

/*****************************************************************************
 * dyn clean
 */

int
dyn_run_clean(int pid, dyn_clean_report_t *out, char *why, size_t whylen)
{
    char exe[64];
    cfg_image_t *img = NULL;
    dyn_proc_t *p = NULL;
    uint64_t bias = 0;
    int rc;

    if (why != NULL && whylen > 0)
        why[0] = '\0';
    if (pid <= 0 || out == NULL) {
        say_why(why, whylen, "%s", qp_strerror(QP_EINVAL));
        return QP_EINVAL;
    }
    snprintf(exe, sizeof(exe), "/proc/%d/exe", pid);
    /* Attach first: the reason it fails (no such process, ...) is the one to give. */
    if ((rc = dyn_proc_attach(pid, &p)) < 0) {
        trace_why(pid, NULL, rc, why, whylen);
        return rc;
    }
    dyn_proc_resume(p);
    if ((rc = cfg_image_open_bfd(exe, &img)) < 0
        || (rc = dyn_proc_load_bias(p, img->entry, &bias)) < 0) {
        say_why(
            why, whylen, "%d: cannot read its executable %s: %s", pid, exe, reason(rc));
        cfg_image_destroy(img);
        dyn_proc_destroy(p);
        return rc;
    }
    if ((rc = dyn_proc_stop(p)) < 0)
        trace_why(pid, "cannot stop it", rc, why, whylen);
    else if ((rc = dyn_clean(p, img, bias, out)) < 0)
        say_why(why, whylen, "%d: cleaning: %s", pid, reason(rc));
    dyn_proc_destroy(p);
    cfg_image_destroy(img);
    return rc;
}
