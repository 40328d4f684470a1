/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

#include "config.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tools/dyn_priv.h"

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
    const dyn_opts_t *o;
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
    int gone;            /* dyn_print_live said standard output is gone */
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
    dyn_print_note(&c->verbose, detail, line);
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
            count_note(c, 0,
                "%d: %zu %s instrumented, %zu refused, stopped %.1f ms, "
                "%.2f s after dyn started",
                ev->pid, nin, dyn_what, nref, ev->stop_ms, dyn_now_s() - c->t_start);
        else
            count_note(c, 0, "%d: %zu %s instrumented, %zu refused, stopped %.1f ms",
                       ev->pid, nin, dyn_what, nref, ev->stop_ms);
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
                   "%.1f ms", ev->pid, ev->name, nin, dyn_what, nref, ev->stop_ms);
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
static dyn_row_t *
count_rows(const counting_t *c, int rates)
{
    return dyn_rows_make(c->nnames, (const char *const *)c->names, c->now,
                         rates ? c->prev : NULL, c->timed ? c->wall : NULL);
}

/* The histogram's series up to the rows known now (from T); -1 when out of memory. */
static int
count_hist_grow(counting_t *c, double t)
{
    if (c->hist == NULL)
        return qpt_hist_create(c->nnames, DYN_HIST_BUCKETS, DYN_HIST_WIDTH, t, &c->hist)
                < 0
            ? -1
            : 0;
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
    double now = dyn_now_s();
    if (c->o->histogram && count_hist_grow(c, c->t0) == 0)
        qpt_hist_add(c->hist, now, c->now);
    if (c->next_table <= 0 || now < c->next_table)
        return 0;
    dyn_row_t *r = count_rows(c, 1);
    if (r != NULL) {
        dyn_live_t l = { c->pid, t, now - c->last_table, r, c->nnames };
        c->gone = dyn_print_live(NULL, &l) != 0;
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
    c->t0 = c->last_table = dyn_now_s();
    c->next_table = c->o->interval > 0 ? c->t0 + c->o->interval : 0;
}

/* The metric of option KIND ('c' --count, 'a' --all, 'w' --time, 'f' --calls-from) of
 * PATTERN into TEXT (LEN bytes). */
void
dyn_option_metric(char kind, const char *pattern, char *text, size_t len)
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
    dyn_option_metric(kind, pattern, text, sizeof(text));
    if (qm_parse(text, opt, 1, &c->set, why, sizeof(why)) < 0) {
        fprintf(stderr, "%s: %s '%s': %s\n", dyn_prog_name, opt, pattern, why);
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
    const dyn_opts_t *o = c->o;
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
int
dyn_count_session(const dyn_opts_t *o, int pid, char *const *argv, double t_start)
{
    counting_t c = { 0 };
    dyn_analysis_threads();
    c.o = o;
    c.t_start = t_start;
    c.verbose = o->verbose;
    c.pid = pid;
    if (count_metrics(&c) < 0) {
        qm_free(c.set);
        return DYN_EXIT_USAGE;
    }
    qm_live_opts_t lo = { 0 };
    lo.pid = pid;
    lo.argv = argv;
    /* Sampled every step for a histogram, else at each live table. */
    lo.interval = o->histogram ? COUNT_STEP : o->interval;
    if (o->histogram && o->interval > 0 && o->interval < COUNT_STEP)
        lo.interval = o->interval;
    lo.duration = o->duration;
    lo.stop = (const volatile int *)&dyn_stop_flag;
    lo.note = tool_metrics_note;
    lo.note_arg = (void *)dyn_prog_name;
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
        fprintf(stderr, "%s: %s\n", dyn_prog_name, nothing != NULL ? nothing + 2 : why);
        ret = DYN_EXIT_FAIL;
    }
    if (rep.rows != NULL || rc == 0) { /* (no row: nothing matched, still a table) */
        count_take(&c, rep.rows, rep.nrows);
        dyn_final_t r = { 0 };
        r.npoints = c.nnames;
        r.names = c.names;
        r.calls = c.now;
        r.rows = count_rows(&c, 0);
        r.timed = c.timed;
        r.secs = rep.secs;
        if (o->histogram && count_hist_grow(&c, c.t0) == 0) {
            qpt_hist_add(c.hist, dyn_now_s(), c.now);
            r.hist = c.hist;
        }
        if (r.rows == NULL || dyn_report(&r, o->csv, o->zeros) < 0)
            ret = DYN_EXIT_FAIL;
        if (r.hist != NULL)
            dyn_print_histogram(&r);
        free(r.rows);
        if (ret == 0 && rep.ended && argv != NULL)
            ret = WIFEXITED(rep.status) ? WEXITSTATUS(rep.status) : 128 + WTERMSIG(rep.status);
        if (dyn_out_closed || c.gone) {
            fprintf(stderr, "%s: %d: standard output was closed: session ended%s\n",
                dyn_prog_name, rep.pid, rep.ended ? "" : ", instrumentation removed");
            ret = DYN_EXIT_FAIL;
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
