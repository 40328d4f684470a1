/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * A live metrics session on libqpt's public API: attach or start, insert in one stop,
 * run, sample, read the final table, take everything out. The process is stopped only
 * while the snippets go in (its executable is analysed before: qpt_attach does it while
 * the process runs).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "metrics/qm_priv.h"

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

/*****************************************************************************
 * Steering: commands while the process runs
 */

typedef struct live {
    qm_set_t *set;
    const qm_live_opts_t *o;
    qm_live_report_t *rep;
    qpt_space_t *s;
    double start, cpn;
    qm_costs_t *costs;       /* what each metric costs */
    qpt_hist_t **hist;       /* per metric: its total over time (with hist_buckets) */
    size_t nhist;
    qm_threads_t *threads;   /* the ids and names of the threads of per-thread rows */
    char buf[8192];          /* a command line being read */
    size_t nbuf;
    int eof, quit;
    qm_row_t *prev;          /* the rows of the last sample (timers never read lower) */
    size_t nprev;
    /* Following the process (qpt_watch): libraries loaded later, execs, forks. */
    int watching;            /* its events are followed */
    qm_row_t *carry;         /* rows of libraries unloaded (dlclose) in this image: added
                              * to the same rows if they are loaded again */
    size_t ncarry;
    qm_row_t *apart;         /* rows of earlier images (before an exec), named PROG[N]: */
    size_t napart;
    size_t image;            /* execs so far */
    size_t unloads;          /* libraries unloaded (dlclose) with metrics in, so far */
    char prog[256];          /* the base name of the program the process runs */
    uint8_t *placed;         /* per metric: placed at least once (a library was loaded) */
    size_t nplaced;
    unsigned forks_counted, forks_apart; /* children counted with it, and not */
} live_t;

/*****************************************************************************
 * Rows of what went away: libraries unloaded, earlier images
 */

/* ROWS (N) after *V (*NV). */
static int
append_rows(qm_row_t **v, size_t *nv, const qm_row_t *rows, size_t n)
{
    qm_row_t *w = realloc(*v, (*nv + n + 1) * sizeof(qm_row_t));
    if (w == NULL)
        return QPT_ENOMEM;
    memcpy(w + *nv, rows, n * sizeof(qm_row_t));
    *v = w;
    *nv += n;
    return 0;
}

/* Add C (a row of a library before its dlclose) into R, the same metric and focus now:
 * 0, or -1 when the two cannot be combined (averages: on_unload names them apart). */
static int
combine(qm_row_t *r, const qm_row_t *c)
{
    if (c->empty)
        return 0;
    switch (r->kind) {
    case QM_AVG:
        return r->empty ? (*r = *c, 0) : -1;
    case QM_MAX:
        r->value = r->empty || (int64_t)c->value > (int64_t)r->value ? c->value : r->value;
        break;
    case QM_MIN:
        r->value = r->empty || (int64_t)c->value < (int64_t)r->value ? c->value : r->value;
        break;
    default: /* counts, times and sums add up */
        r->value += c->value;
        r->calls += c->calls; /* (a shared timer's) */
        break;
    }
    r->empty = 0;
    r->measured |= c->measured;
    return 0;
}

/* The rows of libraries unloaded, into *ROWS (*N): added to the same metric's row of
 * the same focus, or a row of their own. */
static int
merge_carry(live_t *l, qm_row_t **rows, size_t *n)
{
    for (size_t k = 0; k < l->ncarry; k++) {
        const qm_row_t *c = &l->carry[k];
        size_t r = 0;
        while (r < *n && ((*rows)[r].metric != c->metric
                          || strcmp((*rows)[r].focus, c->focus) != 0))
            r++;
        if (r < *n && combine(&(*rows)[r], c) == 0)
            continue;
        QM_CHECK(append_rows(rows, n, c, 1));
    }
    return 0;
}

/* A row's place when sorting: its metric, then where it was (a stable sort). */
typedef struct place_key {
    size_t metric, at;
} place_key_t;

static int
by_metric(const void *a, const void *b)
{
    const place_key_t *x = a, *y = b;
    if (x->metric != y->metric)
        return x->metric < y->metric ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* ROWS (N) in the order of their metrics, each metric's rows in the order they have. */
static int
sort_by_metric(qm_row_t *rows, size_t n)
{
    place_key_t *k = malloc((n + 1) * sizeof(place_key_t));
    qm_row_t *v = malloc((n + 1) * sizeof(qm_row_t));
    if (k == NULL || v == NULL) {
        free(k);
        free(v);
        return QPT_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        k[i] = (place_key_t) { rows[i].metric, i };
    qsort(k, n, sizeof(place_key_t), by_metric);
    for (size_t i = 0; i < n; i++)
        v[i] = rows[k[i].at];
    memcpy(rows, v, n * sizeof(qm_row_t));
    free(k);
    free(v);
    return 0;
}

/* The rows of earlier images before *ROWS (*N), each with its metric's. */
static int
with_apart(live_t *l, qm_row_t **rows, size_t *n)
{
    if (l->napart == 0)
        return 0;
    qm_row_t *all = NULL;
    size_t nall = 0;
    QM_CHECK(append_rows(&all, &nall, l->apart, l->napart));
    if (append_rows(&all, &nall, *rows, *n) < 0 || sort_by_metric(all, nall) < 0) {
        free(all);
        return QPT_ENOMEM;
    }
    free(*rows);
    *rows = all;
    *n = nall;
    return 0;
}

/*
 * The table now into *ROWS (*N): while the process runs, the timers with the running
 * part of active calls (seed 001, section 3.3), never lower than at the last sample.
 */
static int
results(live_t *l, qm_row_t **rows, size_t *n, char *why, size_t whylen)
{
    int pid = l->rep->ended ? 0 : l->rep->pid;
    int rc = qm_results_running(l->set, read_words, l->s, l->cpn, pid, rows, n, why, whylen);
    if (rc < 0)
        return rc;
    if ((rc = merge_carry(l, rows, n)) < 0
        || (l->ncarry > 0 && (rc = sort_by_metric(*rows, *n)) < 0)) {
        free(*rows);
        return rc;
    }
    qm_rows_keep_larger(*rows, *n, l->prev, l->nprev);
    qm_row_t *keep = malloc((*n ? *n : 1) * sizeof(qm_row_t));
    if (keep != NULL) {
        memcpy(keep, *rows, *n * sizeof(qm_row_t));
        free(l->prev);
        l->prev = keep;
        l->nprev = *n;
    }
    return 0;
}

static void
reply(live_t *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
reply(live_t *l, const char *fmt, ...)
{
    if (l->o->on_reply == NULL)
        return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    l->o->on_reply(l->o->arg, line);
}

/* A message of the session's own (a metric taken out): an answer when steering, else a
 * note. */
static void
say(live_t *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
say(live_t *l, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (l->o->commands && l->o->on_reply != NULL)
        l->o->on_reply(l->o->arg, line);
    else if (l->o->note != NULL)
        l->o->note(l->o->note_arg, line);
}

/* EV (its kind and fields set) to the front end's on_event: 1, or 0 when there is none
 * (the session then says it itself). */
static int
event(live_t *l, qm_live_event_t *ev)
{
    if (l->o->on_event == NULL)
        return 0;
    ev->pid = l->rep->pid;
    l->o->on_event(l->o->arg, ev);
    return 1;
}

/* The metrics ON now that were not in PLACED's copy WAS (NM, may be NULL: none were),
 * into a PLACED event of KIND (library NAME) that stopped the process MS. */
static void
placed_event(live_t *l, int kind, const char *name, const uint8_t *was, size_t nm, double ms)
{
    size_t n = qm_count(l->set);
    uint8_t *v = calloc(n + 1, 1);
    if (v == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        v[i] = qm_state(l->set, i) == QM_ON && (was == NULL || i >= nm || !was[i]);
    qm_live_event_t ev = { .kind = kind, .name = name, .stop_ms = ms, .placed = v,
                           .nmetrics = n };
    event(l, &ev);
    free(v);
}

/* Which metrics are in now (per metric, 1: QM_ON), malloc'ed; NULL when out of memory. */
static uint8_t *
on_now(live_t *l)
{
    size_t n = qm_count(l->set);
    uint8_t *v = calloc(n + 1, 1);
    for (size_t i = 0; v != NULL && i < n; i++)
        v[i] = qm_state(l->set, i) == QM_ON;
    return v;
}

/* A multi-line message (a parse error with its caret), a line at a time. */
static void
reply_lines(live_t *l, const char *text)
{
    while (*text != '\0') {
        const char *nl = strchr(text, '\n');
        int n = nl ? (int)(nl - text) : (int)strlen(text);
        reply(l, "%.*s", n, text);
        text += n + (nl != NULL);
    }
}

/* Stop the process, apply what the set says (SET_UP), commit, let it go; the ms stopped. */
static int
steer(live_t *l, int (*set_up)(live_t *l, void *arg, char *why, size_t whylen), void *arg,
      double *ms, char *why, size_t whylen)
{
    double t0 = qm_now();
    int rc = qpt_stop(l->s);
    if (rc < 0) {
        snprintf(why, whylen, "%s", qpt_error(l->s));
        return rc;
    }
    if ((rc = set_up(l, arg, why, whylen)) == 0 && (rc = qpt_commit(l->s)) < 0)
        snprintf(why, whylen, "%s", qpt_error(l->s));
    int r2 = qpt_run(l->s);
    *ms = (qm_now() - t0) * 1e3;
    if (rc == 0 && r2 < 0) {
        snprintf(why, whylen, "%s", qpt_error(l->s));
        rc = r2;
    }
    return rc;
}

static int
set_up_remove(live_t *l, void *arg, char *why, size_t whylen)
{
    size_t i = *(size_t *)arg;
    int rc = qm_remove(l->set, i, l->s, why, whylen);
    if (rc == 0)
        qm_costs_remove(l->costs, i, l->s);
    return rc;
}

/* The spaces of the libraries metrics [FIRST, n) name, opened (qm_space): read and
 * analysed while the process runs, rather than in the stop that follows. */
static int
open_libraries(live_t *l, size_t first, char *why, size_t whylen)
{
    for (size_t i = first; i < qm_count(l->set); i++)
        if (qm_state(l->set, i) == QM_PARSED && qm_is_library(l->set, i)
            && qm_space(l->set, i, l->s, why, whylen) == NULL)
            return QPT_ENOTFOUND;
    return 0;
}

/* Does some metric of SET name a shared library's procedures? */
static int
any_library(const qm_set_t *set)
{
    for (size_t i = 0; i < qm_count(set); i++)
        if (qm_is_library(set, i))
            return 1;
    return 0;
}

/*****************************************************************************
 * Following the process (qpt_watch): libraries loaded and unloaded, execs, forks
 */

/* WHY up to its first line (a parse error's text and caret stay out of a note). */
static const char *
first_line(char *why)
{
    why[strcspn(why, "\n")] = '\0';
    return why;
}

/* Metric I went in (at least once: the notes at the end name those never in). */
static void
mark_placed(live_t *l, size_t i)
{
    if (i >= l->nplaced) {
        uint8_t *v = realloc(l->placed, i + 1);
        if (v == NULL)
            return;
        memset(v + l->nplaced, 0, i + 1 - l->nplaced);
        l->placed = v;
        l->nplaced = i + 1;
    }
    l->placed[i] = 1;
}

/* Does process PID map a dynamic loader (ld-*.so*: glibc's, musl's)? Only then can it
 * load a library later (a static program has none: no dlopen to wait for). */
static int
has_loader(int pid)
{
    char path[64], line[4400];
    snprintf(path, sizeof(path), "/proc/%d/maps", pid);
    FILE *f = fopen(path, "r");
    int found = 0;
    while (f != NULL && !found && fgets(line, sizeof(line), f) != NULL) {
        const char *b = strrchr(line, '/');
        found = b != NULL && strncmp(b + 1, "ld-", 3) == 0 && strstr(b, ".so") != NULL;
    }
    if (f != NULL)
        fclose(f);
    return found;
}

/* The metrics [FIRST, n) naming a library that is not loaded wait for one (said), when
 * the process is followed, can load one, and the caller lets them; the others are
 * placed as they are (qm_insert refuses a library not loaded). */
static void
wait_for_libraries(live_t *l, size_t first)
{
    char lib[256], why[1024];
    int can = l->watching && !l->o->refuse_unloaded;
    for (size_t i = first; can && i < qm_count(l->set); i++) {
        qpt_space_t *x;
        if (qm_state(l->set, i) != QM_PARSED || qm_library_of(l->set, i, lib, sizeof(lib)) < 0
            || qpt_library(l->s, lib, &x, why, sizeof(why)) != QPT_ENOTFOUND)
            continue;
        if (!has_loader(l->rep->pid)) {
            can = 0; /* (a static program: refused as it was) */
            continue;
        }
        qm_wait(l->set, i, 1);
        qm_live_event_t ev = { .kind = QM_EV_WAITING, .metric = i, .name = lib };
        if (!event(l, &ev))
            say(l, "#%zu %s: no library matching %s is loaded: measured once one is (dlopen)",
                i + 1, qm_name(l->set, i), lib);
    }
}

/*
 * Metric I (waiting) into the stopped process on its own, in one commit: 0, or < 0 with
 * WHY (then it waits on, nothing of it in).
 */
static int
place_one(live_t *l, size_t i, char *why, size_t whylen)
{
    qpt_space_t *s = l->s;
    why[0] = '\0';
    qm_wait(l->set, i, 0);
    int rc = l->o->no_costs ? 0 : qm_costs_count_one(l->costs, l->set, i, s, why, whylen);
    if (rc == 0)
        rc = qm_insert(l->set, s, l->o->note, l->o->note_arg, why, whylen);
    if (rc == 0 && (rc = qpt_commit(s)) < 0)
        snprintf(why, whylen, "%s", qpt_error(s));
    if (rc < 0) {
        if (qm_state(l->set, i) == QM_ON)
            qm_take_back(l->set, i, s);
        qm_costs_remove(l->costs, i, s);
        qpt_commit(s);
        qm_costs_release(l->costs, s);
        qm_wait(l->set, i, 1);
        if (why[0] == '\0')
            snprintf(why, whylen, "%s", qpt_strerror(rc));
        return rc;
    }
    qm_costs_release(l->costs, s);
    qm_costs_start(l->costs, l->set, i, s, l->cpn);
    mark_placed(l, i);
    return 0;
}

/*****************************************************************************
 * Library globs: a metric in every library that matches
 *
 * A metric whose library is a glob (count calls(*.so*:malloc); dyn's '*:malloc') is a
 * template: never placed itself (it waits), it gets an instance in each library that
 * matches it, loaded now or later (dlopen, or after an exec), each an ordinary metric
 * of one library (its rows LIB:PROC) added to the set. An instance matching nothing in
 * its library is quietly out; a template none of whose instances measured anything is
 * told at the end.
 */

/* Is metric I such a template? */
static int
is_template(const live_t *l, size_t i)
{
    char lib[256];
    return qm_instance_of(l->set, i) == i && qm_library_of(l->set, i, lib, sizeof(lib)) == 0
           && strpbrk(lib, "*?[") != NULL;
}

/* Template T's instance in library NAME, added (parsed, or waiting with WAIT) unless it
 * has one there. */
static void
instance_in(live_t *l, size_t t, const char *name, int wait)
{
    char lib[256], text[1024], why[1024];
    for (size_t k = 0; k < qm_count(l->set); k++)
        if (qm_instance_of(l->set, k) == t && k != t
            && qm_library_of(l->set, k, lib, sizeof(lib)) == 0 && strcmp(lib, name) == 0)
            return;
    const qm_metric_t *m = &l->set->v[t];
    qm_library_of(l->set, t, lib, sizeof(lib));
    /* The text with the library's name for the glob (a metric named by its text), in
     * its pattern and in its from() (which names the same library). */
    const char *at = strstr(m->name, m->pattern);
    size_t ll = strlen(lib);
    if (at == NULL || strncmp(at, lib, ll) != 0)
        return;
    const char *from = m->from != NULL ? strstr(at + ll, "from(") : NULL;
    if (from != NULL && (strncmp(from + 5, lib, ll) != 0 || from[5 + ll] != ':'))
        from = NULL;
    if (from != NULL)
        snprintf(text, sizeof(text), "%.*s%s%.*s%s%s", (int)(at - m->name), m->name, name,
                 (int)(from + 5 - (at + ll)), at + ll, name, from + 5 + ll);
    else
        snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - m->name), m->name, name,
                 at + ll);
    size_t k = qm_count(l->set);
    if (qm_parse(text, m->origin, 1, &l->set, why, sizeof(why)) < 0 || qm_count(l->set) != k + 1)
        return;
    l->set->v[k].instance_of = t + 1;
    if (wait)
        qm_wait(l->set, k, 1);
}

/* The templates among metrics [FIRST, n) wait, with an instance (WAIT: waiting) in
 * each library the process maps now that matches. */
static void
instances_loaded(live_t *l, size_t first, int wait)
{
    size_t n = qm_count(l->set);
    char lib[256], path[64], line[4400];
    for (size_t t = first; t < n; t++) {
        if (!is_template(l, t) || qm_library_of(l->set, t, lib, sizeof(lib)) < 0)
            continue;
        if (qm_state(l->set, t) == QM_PARSED)
            qm_wait(l->set, t, 1);
        snprintf(path, sizeof(path), "/proc/%d/maps", l->rep->pid);
        FILE *f = fopen(path, "r");
        while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
            line[strcspn(line, "\n")] = '\0';
            const char *b = strrchr(line, '/');
            if (b != NULL && strstr(b, ".so") != NULL && qpt_module_matches(lib, b + 1))
                instance_in(l, t, b + 1, wait);
        }
        if (f != NULL)
            fclose(f);
    }
}

/* Has template T an instance that went in? */
static int
instance_placed(const live_t *l, size_t t)
{
    for (size_t k = 0; k < qm_count(l->set); k++)
        if (k != t && qm_instance_of(l->set, k) == t
            && (qm_state(l->set, k) == QM_ON || (k < l->nplaced && l->placed[k])))
            return 1;
    return 0;
}

/* "#I" after the list in LIST (LEN bytes), comma-separated. */
static void
list_add(char *list, size_t len, size_t i)
{
    size_t at = strlen(list);
    if (at + 24 < len)
        snprintf(list + at, len - at, "%s#%zu", at > 0 ? ", " : "", i + 1);
    else if (at + 5 < len && strcmp(list + at - 3, "...") != 0)
        snprintf(list + at, len - at, ", ...");
}

/* Library NAME was loaded (the process stopped before any of its code ran): the metrics
 * waiting for it go in. */
static void
on_library(live_t *l, const char *name)
{
    char lib[256], why[2048], in[256] = "";
    double t0 = qm_now();
    uint8_t *was = on_now(l);
    size_t nm = qm_count(l->set);
    for (size_t t = 0; t < nm; t++)
        if (is_template(l, t) && qm_library_of(l->set, t, lib, sizeof(lib)) == 0
            && qpt_module_matches(lib, name))
            instance_in(l, t, name, 1);
    for (size_t i = 0; i < qm_count(l->set); i++) {
        if (qm_state(l->set, i) != QM_WAITING || qm_library_of(l->set, i, lib, sizeof(lib)) < 0
            || !qpt_module_matches(lib, name) || is_template(l, i))
            continue;
        if (place_one(l, i, why, sizeof(why)) < 0)
            say(l, "#%zu %s: %s loaded, but not measured: %s", i + 1, qm_name(l->set, i), name,
                first_line(why));
        else
            list_add(in, sizeof(in), i);
    }
    if (in[0] != '\0' && l->o->on_event != NULL)
        placed_event(l, QM_EV_LOADED, name, was, nm, (qm_now() - t0) * 1e3);
    else if (in[0] != '\0')
        say(l, "%d: %s loaded: metrics %s measured from now on", l->rep->pid, name, in);
    free(was);
}

/* Library NAME was unloaded (dlclose): the values of the metrics in it are kept (added to
 * theirs if it is loaded again; an average's kept apart, its focus "... (until dlclose
 * N)"), and those metrics wait for it. */
static void
on_unload(live_t *l, const char *name)
{
    char lib[256], why[1024], out[256] = "";
    for (size_t i = 0; i < qm_count(l->set); i++) {
        qpt_space_t *x;
        if (qm_state(l->set, i) != QM_ON || qm_library_of(l->set, i, lib, sizeof(lib)) < 0
            || !qpt_module_matches(lib, name) || qpt_library(l->s, lib, &x, why, sizeof(why)) == 0)
            continue; /* (another library of that name still in) */
        qm_row_t *rows;
        size_t n;
        if (qm_results(l->set, read_words, l->s, l->cpn, &rows, &n, why, sizeof(why)) < 0) {
            say(l, "#%zu %s: %s unloaded; its values are lost: %s", i + 1, qm_name(l->set, i),
                name, first_line(why));
            continue;
        }
        if (out[0] == '\0')
            l->unloads++;
        for (size_t r = 0; r < n; r++) {
            if (rows[r].metric != i)
                continue;
            if (rows[r].kind == QM_AVG) { /* (an average of averages would be wrong) */
                size_t len = strlen(rows[r].focus);
                len = len + 32 > sizeof(rows[r].focus) ? sizeof(rows[r].focus) - 32 : len;
                snprintf(rows[r].focus + len, sizeof(rows[r].focus) - len,
                         " (until dlclose %zu)", l->unloads);
            }
            if (append_rows(&l->carry, &l->ncarry, &rows[r], 1) < 0)
                say(l, "#%zu %s: a row lost: %s", i + 1, qm_name(l->set, i),
                    qpt_strerror(QPT_ENOMEM));
        }
        free(rows);
        qm_forget(l->set, i);
        qm_costs_forget(l->costs, i);
        list_add(out, sizeof(out), i);
    }
    qm_live_event_t ev = { .kind = QM_EV_UNLOADED, .name = name };
    if (out[0] != '\0' && event(l, &ev))
        ;
    else if (out[0] != '\0')
        say(l, "%d: %s unloaded (dlclose): the values of metrics %s are those until then "
            "(added to if it is loaded again)", l->rep->pid, name, out);
}

/* The base name of PATH into BUF. */
static void
base_name(const char *path, char *buf, size_t len)
{
    const char *b = strrchr(path, '/');
    b = b != NULL ? b + 1 : path;
    size_t n = strlen(b) < len ? strlen(b) : len - 1;
    memcpy(buf, b, n);
    buf[n] = '\0';
}

/*
 * The process ran execve: the metrics' values up to then are kept apart (rows named
 * PROG[N]:FOCUS, as dyn --count names them), and every metric goes into the new program
 * again, each on its own (one the new program cannot take waits, said).
 */
static void
on_exec(live_t *l, const char *path)
{
    char why[2048] = "", was[256];
    qm_row_t *rows = NULL;
    size_t n = 0;
    snprintf(was, sizeof(was), "%s", l->prog);
    /* The old image's memory we shared keeps its values (its timers stopped with it). */
    if (qm_results(l->set, read_words, l->s, l->cpn, &rows, &n, why, sizeof(why)) == 0
        && merge_carry(l, &rows, &n) == 0) {
        qm_threads_apply(l->threads, rows, n);
        for (size_t r = 0; r < n; r++) {
            char focus[sizeof(rows[r].focus)];
            int k = snprintf(focus, sizeof(focus), "%s[%zu]:%s", was, l->image + 1,
                             rows[r].focus);
            size_t moved = (size_t)k - strlen(rows[r].focus);
            memcpy(rows[r].focus, focus, sizeof(focus));
            /* (the thread part of a per procedure per thread row moved too) */
            if (rows[r].thread_at > 0)
                rows[r].thread_at = rows[r].thread_at + moved < sizeof(focus) - 32
                    ? rows[r].thread_at + moved : 0;
        }
        if (append_rows(&l->apart, &l->napart, rows, n) < 0)
            say(l, "%d: the values before the exec are lost: %s", l->rep->pid,
                qpt_strerror(QPT_ENOMEM));
    } else
        say(l, "%d: the values before the exec are lost: %s", l->rep->pid, first_line(why));
    free(rows);
    free(l->carry);
    free(l->prev);
    l->carry = l->prev = NULL;
    l->ncarry = l->nprev = 0;
    l->image++;
    base_name(path, l->prog, sizeof(l->prog));
    qm_live_event_t ev = { .kind = QM_EV_EXEC, .name = path, .was = was, .image = l->image };
    if (!event(l, &ev))
        say(l, "%d: the process ran execve (%s): the values up to the exec are kept apart "
            "(rows %s[%zu]:...); measuring the new program", l->rep->pid, path, was, l->image);
    double t0 = qm_now();
    qm_threads_free(l->threads);
    l->threads = qm_threads_new(l->s);
    size_t nm = qm_count(l->set);
    uint8_t *was_on = calloc(nm + 1, 1); /* (waiting already: said before) */
    for (size_t i = 0; i < nm; i++) {
        if (was_on != NULL)
            was_on[i] = qm_state(l->set, i) == QM_ON;
        qm_forget(l->set, i);
        qm_costs_forget(l->costs, i);
    }
    instances_loaded(l, 0, 1); /* (the new program's libraries) */
    for (size_t i = 0; i < qm_count(l->set); i++) {
        char lib[256];
        qpt_space_t *x;
        if (qm_state(l->set, i) != QM_WAITING || is_template(l, i))
            continue;
        if (qm_library_of(l->set, i, lib, sizeof(lib)) == 0
            && qpt_library(l->s, lib, &x, why, sizeof(why)) == QPT_ENOTFOUND) {
            if (was_on == NULL || i >= nm || was_on[i])
                say(l, "#%zu %s: no library matching %s is loaded in the new program: "
                    "measured once one is (dlopen)", i + 1, qm_name(l->set, i), lib);
            continue;
        }
        if (place_one(l, i, why, sizeof(why)) < 0)
            say(l, "#%zu %s: not measured in the new program: %s", i + 1, qm_name(l->set, i),
                first_line(why));
    }
    free(was_on);
    if (l->o->on_event != NULL)
        placed_event(l, QM_EV_PLACED, NULL, NULL, 0, (qm_now() - t0) * 1e3);
}

/*
 * The process's events for up to SECS seconds, each handled while it is stopped; then
 * it runs on. Its end sets rep->ended; a process that cannot be followed any more ends
 * the session (said).
 */
static void
follow(live_t *l, double secs)
{
    qpt_event_t ev;
    int rc, ms = secs > 0 ? (int)(secs * 1e3 + 0.5) : 0;
    while ((rc = qpt_next_event(l->s, &ev, ms)) == 1) {
        ms = 0; /* what else came with it, then it runs on */
        switch (ev.kind) {
        case QPT_EV_LIBRARY_LOAD:
            on_library(l, ev.name);
            break;
        case QPT_EV_LIBRARY_UNLOAD:
            on_unload(l, ev.name);
            break;
        case QPT_EV_EXEC:
            on_exec(l, ev.name);
            break;
        case QPT_EV_FORK:
            if (ev.child_counted)
                l->forks_counted++;
            else
                l->forks_apart++;
            break;
        case QPT_EV_EXIT:
            l->rep->ended = 1;
            if (ev.status != -1)
                l->rep->status = ev.status;
            return;
        default:
            break;
        }
    }
    if (rc < 0) {
        int st;
        if (qpt_ended(l->s, &st) == 1) {
            l->rep->ended = 1;
            l->rep->status = st;
            return;
        }
        say(l, "%d: the process cannot be followed any more: %s", l->rep->pid,
            qpt_error(l->s));
        l->watching = 0;
        l->quit = 1;
    }
}

/* Follow the process of L (stopped): its libraries, execs and forks; said when it cannot
 * be, and the session goes on without. */
static void
start_following(live_t *l)
{
    unsigned mask = QPT_EV_BIT(QPT_EV_LIBRARY_LOAD) | QPT_EV_BIT(QPT_EV_LIBRARY_UNLOAD)
        | QPT_EV_BIT(QPT_EV_EXEC) | QPT_EV_BIT(QPT_EV_FORK);
    char link[64], exe[4096];
    snprintf(link, sizeof(link), "/proc/%d/exe", l->rep->pid);
    ssize_t k = readlink(link, exe, sizeof(exe) - 1);
    exe[k > 0 ? k : 0] = '\0';
    base_name(k > 0 ? exe : "?", l->prog, sizeof(l->prog));
    if (qpt_watch(l->s, mask) < 0)
        say(l, "%d: libraries loaded later, execs and forks are not followed: %s", l->rep->pid,
            qpt_error(l->s));
    else
        l->watching = 1;
}

/* What following saw, at the end: forks, metrics never in. */
static void
followed_notes(live_t *l)
{
    char lib[256];
    qm_live_event_t ev = { .kind = QM_EV_FORKS, .counted = l->forks_counted,
                           .apart = l->forks_apart };
    if ((l->forks_counted > 0 || l->forks_apart > 0) && event(l, &ev))
        ;
    else if (l->forks_counted > 0)
        say(l, "%d: %u %s forked: counted with the parent (%s own dlopen and exec not "
            "followed)", l->rep->pid, l->forks_counted,
            l->forks_counted == 1 ? "child" : "children",
            l->forks_counted == 1 ? "its" : "their");
    if (l->forks_apart > 0 && l->o->on_event == NULL)
        say(l, "%d: %u %s forked: not measured", l->rep->pid, l->forks_apart,
            l->forks_apart == 1 ? "child" : "children");
    for (size_t i = 0; i < qm_count(l->set); i++) {
        if (qm_state(l->set, i) != QM_WAITING || (i < l->nplaced && l->placed[i]))
            continue;
        if (is_template(l, i) && instance_placed(l, i))
            continue;
        int some = 0; /* a template with instances: libraries matched, none had it */
        for (size_t k = 0; is_template(l, i) && k < qm_count(l->set); k++)
            some |= k != i && qm_instance_of(l->set, k) == i;
        if (some && l->set->hooks.nomatch != NULL) {
            l->set->hooks.nomatch(l->set->hooks.arg, i, l->set->v[i].pattern, l->s);
            continue;
        }
        if (some) {
            say(l, "#%zu %s: no library loaded during the session had a procedure matching "
                "it", i + 1, qm_name(l->set, i));
            continue;
        }
        qm_live_event_t nev = { .kind = QM_EV_NEVER_LOADED, .metric = i, .name = lib };
        if (qm_library_of(l->set, i, lib, sizeof(lib)) == 0 && event(l, &nev))
            ;
        else if (l->o->on_event != NULL)
            ;
        else if (qm_library_of(l->set, i, lib, sizeof(lib)) == 0)
            say(l, "#%zu %s: no library matching %s was loaded during the session", i + 1,
                qm_name(l->set, i), lib);
        else
            say(l, "#%zu %s: not measured (see above)", i + 1, qm_name(l->set, i));
    }
}

/*
 * Put the metrics [FIRST, n) in. First the call counters of their procedures; with
 * PREDICT, a stop for them alone, SAMPLE seconds of running, and a second stop in which
 * the metrics go in with their predicted costs (one over --max-overhead, with what the
 * others are observed to cost, is taken back). STOPPED: the process is stopped already.
 * *STOP_MS: the last stop. Nothing of the metrics stays on failure; *REFUSED: how many
 * the budget kept out.
 */
static int
place(live_t *l, size_t first, int stopped, int predict, double *stop_ms, unsigned *refused,
      char *why, size_t whylen)
{
    qpt_space_t *s = l->s;
    instances_loaded(l, first, 0); /* (before N: they go in with the others) */
    size_t n = qm_count(l->set);
    *refused = 0;
    *stop_ms = 0;
    wait_for_libraries(l, first);
    if (!stopped) {
        int lrc = open_libraries(l, first, why, whylen);
        if (lrc < 0)
            return lrc;
    }
    /* The procedures each metric names, matched before the process stops (a scan of
     * every procedure's names each: 80 ms of a 200 ms stop for 22 timers in a postgres
     * backend); the stop then looks them up. */
    qm_memo_t *memo = qm_memo_new();
    l->set->memo = memo;
    for (size_t i = first; memo != NULL && i < n; i++) {
        uint32_t *procs;
        size_t np;
        if (qm_state(l->set, i) == QM_PARSED && qm_metric_procs(l->set, i, s, &procs, &np) == 0)
            free(procs);
    }
    double t0 = qm_now(), counters_ms = 0;
    int rc = stopped ? 0 : qpt_stop(s);
    if (l->o->no_costs)
        predict = 0;
    if (rc == 0 && !l->o->no_costs
        && (rc = qm_costs_count(l->costs, l->set, first, s, why, whylen)) == 0 && predict) {
        if ((rc = qpt_commit(s)) == 0 && (rc = qpt_run(s)) == 0) {
            counters_ms = (qm_now() - t0) * 1e3; /* (the first stop counts too) */
            qm_costs_mark(l->costs, l->set, first, s);
            nap(l->o->sample > 0 ? l->o->sample : 0.2);
            t0 = qm_now();
            rc = qpt_stop(s);
        }
    }
    if (rc < 0 && why[0] == '\0')
        snprintf(why, whylen, "%s", qpt_error(s));
    if (rc == 0)
        rc = qm_insert(l->set, s, l->o->note, l->o->note_arg, why, whylen);
    if (rc == 0)
        rc = qm_costs_predict(l->costs, l->set, first, s, l->cpn, predict);
    if (rc == 0 && predict && l->o->max_overhead > 0) {
        double others;
        qm_costs_worst(l->costs, l->set, &others);
        for (size_t i = first; i < n; i++) {
            double p = qm_costs_predicted(l->costs, i);
            if (qm_state(l->set, i) != QM_ON || p < 0)
                continue;
            if (others + p > l->o->max_overhead) {
                say(l, "#%zu %s not inserted: predicted cost %.2f%% (with the others' %.2f%%) "
                    "exceeds --max-overhead %.2f%%", i + 1, qm_name(l->set, i), p, others,
                    l->o->max_overhead);
                qm_take_back(l->set, i, s);
                qm_costs_remove(l->costs, i, s);
                (*refused)++;
            } else
                others += p;
        }
    }
    if (rc < 0) {
        for (size_t i = first; i < n; i++) {
            if (qm_state(l->set, i) == QM_ON)
                qm_take_back(l->set, i, s);
            qm_costs_remove(l->costs, i, s);
        }
    }
    int rc2 = qpt_commit(s);
    /* A point the commit could not install (its padding taken by the others): that
     * procedure left out, with a note, and the rest committed again. A point refused
     * only because a thread was inside its bytes at that instant (a tight loop through
     * them) is tried again first, the process let run for a moment in between, unless
     * it was stopped when this began (it must not run before its metrics are in). */
    int moments = stopped ? 0 : 10, moment = 0; /* about 0.1 s in all */
    for (int tries = 0; rc == 0 && rc2 < 0 && tries < 256; tries++) {
        qpt_space_t *where;
        qpt_handle_t h;
        char msg[600];
        snprintf(msg, sizeof(msg), "%s", qpt_error(s));
        char *tail = strstr(msg, " (nothing changed)");
        if (tail != NULL)
            *tail = '\0';
        if (moments > 0 && strstr(msg, "a thread is inside") != NULL) {
            moments--;
            if (qpt_run(s) < 0)
                break;
            /* longer and longer: a loop through them may run a while between calls */
            moment++;
            nap(0.002 * moment);
            if ((rc2 = qpt_stop(s)) < 0)
                break;
            rc2 = qpt_commit(s);
            continue;
        }
        if (qpt_commit_refused(s, &where, &h) != 0)
            break;
        int by_metric = qm_drop_refused(l->set, s, where, h, l->o->note, l->o->note_arg, msg);
        if (qm_costs_drop(l->costs, where, h) != 0 && by_metric != 0)
            break;
        rc2 = qpt_commit(s);
    }
    if (rc == 0 && rc2 < 0) {
        snprintf(why, whylen, "%s", qpt_error(s));
        rc = rc2;
        /* All or nothing: taken out again. */
        for (size_t i = first; i < n; i++) {
            if (qm_state(l->set, i) == QM_ON)
                qm_take_back(l->set, i, s);
            qm_costs_remove(l->costs, i, s);
        }
        qpt_commit(s);
    }
    /* The timers' calls under way now, taken up while the process is still stopped (a
     * failure to read the stacks leaves them to their next calls). */
    if (rc == 0)
        qm_catch_up(l->set, s, l->o->note, l->o->note_arg);
    /* A process that was stopped when this began and whose metrics failed stays
     * stopped: the caller ends a command it started (qpt_kill) before its code runs, or
     * lets an attached one go when it closes the space. */
    rc2 = rc < 0 && stopped ? 0 : qpt_run(s);
    *stop_ms = counters_ms + (qm_now() - t0) * 1e3;
    l->set->memo = NULL;
    qm_memo_free(memo);
    qm_costs_release(l->costs, s);
    if (rc == 0 && rc2 < 0) {
        snprintf(why, whylen, "%s", qpt_error(s));
        rc = rc2;
    }
    return rc;
}

/* The answer to the add of metric I, in: waiting for its library, or in since a stop of
 * MS, said on the answer of metric FIRST (I itself, or one added with it before). */
static void
answer_added(live_t *l, size_t i, double ms, size_t first)
{
    l->rep->added++;
    if (qm_state(l->set, i) == QM_WAITING) {
        reply(l, "added #%zu %s (waiting for its library)", i + 1, qm_name(l->set, i));
        return;
    }
    mark_placed(l, i);
    if (first == i)
        reply(l, "added #%zu %s (stopped %.1f ms; predicted cost %.2f%%)", i + 1,
              qm_name(l->set, i), ms, qm_costs_predicted(l->costs, i));
    else
        reply(l, "added #%zu %s (stopped with #%zu; predicted cost %.2f%%)", i + 1,
              qm_name(l->set, i), first + 1, qm_costs_predicted(l->costs, i));
}

static void
cmd_add(live_t *l, const char *text)
{
    char why[2048] = "";
    size_t before = qm_count(l->set);
    int rc = qm_parse(text, "add", 1, &l->set, why, sizeof(why));
    if (rc < 0) {
        reply_lines(l, why);
        return;
    }
    double ms;
    unsigned refused;
    rc = place(l, before, 0, 1, &ms, &refused, why, sizeof(why));
    if (rc < 0 || refused > 0) {
        /* (Kept, out, when the numbers must stay those of the other processes.) */
        for (size_t i = before; l->o->keep_numbers && i < qm_count(l->set); i++)
            qm_set_off(l->set, i);
        qm_drop_parsed(l->set);
        if (rc < 0)
            reply_lines(l, why);
        reply(l, "nothing added");
        return;
    }
    answer_added(l, before, ms, before);
}

/*
 * Several adds read together (the search asks for a procedure's callees at once) go in
 * at one placement: one stop for their call counters and one for the metrics, not two
 * for each. They are answered in order, a line each, as one by one; the stop is said on
 * the first line (the others: "stopped with #N"). If the placement fails as a whole,
 * each is added alone again, for its own answer.
 */
static void
cmd_adds(live_t *l, char **texts, size_t n)
{
    if (n == 1 || l->o->keep_numbers) {
        for (size_t k = 0; k < n; k++)
            cmd_add(l, texts[k]);
        return;
    }
    size_t before = qm_count(l->set), nbad = n;
    size_t *at = calloc(n, sizeof(size_t));   /* its metric, or SIZE_MAX */
    char **bad = calloc(n, sizeof(char *));    /* its parse error */
    int alone = at == NULL || bad == NULL;
    for (size_t k = 0; !alone && k < n; k++) {
        char why[2048] = "";
        size_t b = qm_count(l->set);
        if (qm_parse(texts[k], "add", 1, &l->set, why, sizeof(why)) < 0) {
            at[k] = SIZE_MAX;
            alone = (bad[k] = strdup(why)) == NULL;
        } else {
            at[k] = b;
            alone = qm_count(l->set) != b + 1;
        }
    }
    char why[2048] = "";
    double ms = 0;
    unsigned refused = 0;
    int rc = 0;
    if (!alone && qm_count(l->set) > before)
        rc = place(l, before, 0, 1, &ms, &refused, why, sizeof(why));
    if (alone || rc < 0) {
        qm_drop_parsed(l->set);
        /* (One left waiting for its library by a failed placement: out, numbered.) */
        int each = alone || qm_count(l->set) == before;
        for (size_t i = before; i < qm_count(l->set); i++)
            qm_set_off(l->set, i);
        for (size_t k = 0; k < n; k++) {
            if (each)
                cmd_add(l, texts[k]);
            else {
                reply_lines(l, why);
                reply(l, "nothing added");
            }
        }
        n = 0;
    }
    size_t first = SIZE_MAX;
    for (size_t k = 0; k < n; k++) {
        if (at[k] == SIZE_MAX) {
            reply_lines(l, bad[k]);
            reply(l, "nothing added");
            continue;
        }
        size_t i = at[k];
        if (qm_state(l->set, i) == QM_PARSED) {
            qm_set_off(l->set, i); /* over the budget (said): its number stays taken */
            reply(l, "nothing added");
            continue;
        }
        if (first == SIZE_MAX && qm_state(l->set, i) != QM_WAITING)
            first = i;
        answer_added(l, i, ms, first);
    }
    for (size_t k = 0; bad != NULL && k < nbad; k++)
        free(bad[k]);
    free(bad);
    free(at);
}

/* The metric named by ARG: "#N" (as list numbers them) or its name. */
static int
find_metric(live_t *l, const char *arg, size_t *i)
{
    size_t n = qm_count(l->set);
    if (arg[0] == '#') {
        char *end;
        unsigned long k = strtoul(arg + 1, &end, 10);
        if (*end != '\0' || k == 0 || k > n)
            return -1;
        *i = k - 1;
        return 0;
    }
    for (size_t k = 0; k < n; k++)
        if (qm_state(l->set, k) == QM_ON && strcmp(qm_name(l->set, k), arg) == 0) {
            *i = k;
            return 0;
        }
    return -1;
}

static void
cmd_remove(live_t *l, const char *arg)
{
    size_t i;
    if (find_metric(l, arg, &i) < 0 || qm_state(l->set, i) != QM_ON) {
        reply(l, "remove: no metric '%s' in the program (see 'list')", arg);
        return;
    }
    char why[2048] = "";
    double ms;
    if (steer(l, set_up_remove, &i, &ms, why, sizeof(why)) < 0) {
        reply_lines(l, why);
        return;
    }
    qm_release(l->set, l->s);
    qm_costs_release(l->costs, l->s);
    l->rep->removed++;
    reply(l, "removed #%zu %s (stopped %.1f ms)", i + 1, qm_name(l->set, i), ms);
}

static int
set_up_removes(live_t *l, void *arg, char *why, size_t whylen)
{
    const size_t *v = arg; /* v[0]: how many, then the metrics */
    for (size_t k = 1; k <= v[0]; k++)
        QM_CHECK(set_up_remove(l, (void *)&v[k], why, whylen));
    return 0;
}

/* Removes read together, in one stop (the search refutes several tests at once). */
static void
cmd_removes(live_t *l, char **args, size_t n)
{
    size_t *v = n > 1 ? calloc(n + 1, sizeof(size_t)) : NULL;
    for (size_t k = 0; v != NULL && k < n; k++) {
        size_t i;
        int twice = 0;
        for (size_t j = 1; j <= v[0]; j++)
            twice |= find_metric(l, args[k], &i) == 0 && v[j] == i;
        if (find_metric(l, args[k], &i) < 0 || qm_state(l->set, i) != QM_ON || twice) {
            free(v); /* (an error to answer in its place: one by one) */
            v = NULL;
        } else
            v[++v[0]] = i;
    }
    if (v == NULL) {
        for (size_t k = 0; k < n; k++)
            cmd_remove(l, args[k]);
        return;
    }
    char why[2048] = "";
    double ms;
    if (steer(l, set_up_removes, v, &ms, why, sizeof(why)) < 0) {
        for (size_t k = 0; k < n; k++)
            reply_lines(l, why);
        free(v);
        return;
    }
    qm_release(l->set, l->s);
    qm_costs_release(l->costs, l->s);
    for (size_t k = 1; k <= v[0]; k++) {
        l->rep->removed++;
        if (k == 1)
            reply(l, "removed #%zu %s (stopped %.1f ms)", v[k] + 1, qm_name(l->set, v[k]), ms);
        else
            reply(l, "removed #%zu %s (stopped with #%zu)", v[k] + 1, qm_name(l->set, v[k]),
                  v[1] + 1);
    }
    free(v);
}

/* One thread's stack for cmd_stacks: a line of the executable's procedures on it,
 * innermost first ("?" for code elsewhere: libraries, trampolines). */
static int
stack_line(void *arg, int tid, uint64_t thread_ptr, const uint64_t *pcs, size_t n)
{
    (void)thread_ptr;
    live_t *l = arg;
    char line[2000];
    size_t len = (size_t)snprintf(line, sizeof(line), "stack %d:", tid);
    for (size_t k = 0; k < n && len < sizeof(line) - 200; k++) {
        uint32_t p;
        const char *name = qpt_block_at(l->s, pcs[k], &p, NULL) == 0 ? qpt_proc_name(l->s, p)
                                                                     : NULL;
        len += (size_t)snprintf(line + len, sizeof(line) - len, " %s", name ? name : "?");
    }
    reply(l, "%s", line);
    return 0;
}

/* Each thread's call stack now (the process stopped for it): the procedures of the
 * executable on it, innermost first; then "stacks end". The search takes the callees
 * on the stacks first. */
static void
cmd_stacks(live_t *l)
{
    double t0 = qm_now();
    int rc = qpt_stop(l->s);
    if (rc == 0) {
        rc = qpt_thread_stacks(l->s, stack_line, l);
        int r2 = qpt_run(l->s);
        rc = rc < 0 ? rc : r2;
    }
    if (rc < 0)
        reply(l, "stacks: %s", qpt_error(l->s));
    reply(l, "stacks end (stopped %.1f ms)", (qm_now() - t0) * 1e3);
}

static void
cmd_list(live_t *l)
{
    size_t n = qm_count(l->set), on = 0;
    for (size_t i = 0; i < n; i++)
        if (qm_state(l->set, i) != QM_PARSED) {
            reply(l, "#%zu %s%s", i + 1, qm_name(l->set, i),
                  qm_state(l->set, i) == QM_OFF       ? "  (removed)"
                  : qm_state(l->set, i) == QM_WAITING ? "  (waiting: its library not loaded, "
                                                        "or not in this program)"
                                                      : "");
            on++;
        }
    if (on == 0)
        reply(l, "no metric (add one: add count calls(PATTERN))");
}

/* Each metric's total now into its histogram (made when the metric is first seen in). */
static void
hist_sample(live_t *l)
{
    qm_row_t *rows;
    size_t n, nm = qm_count(l->set);
    char why[256];
    double t = qm_now();
    if (results(l, &rows, &n, why, sizeof(why)) < 0)
        return;
    if (with_apart(l, &rows, &n) < 0) {
        free(rows);
        return;
    }
    if (nm > l->nhist) {
        qpt_hist_t **v = realloc(l->hist, nm * sizeof(qpt_hist_t *));
        if (v == NULL) {
            free(rows);
            return;
        }
        memset(v + l->nhist, 0, (nm - l->nhist) * sizeof(qpt_hist_t *));
        l->hist = v;
        l->nhist = nm;
    }
    for (size_t i = 0; i < nm; i++) {
        if (qm_state(l->set, i) != QM_ON)
            continue;
        uint64_t total = 0;
        for (size_t r = 0; r < n; r++)
            if (rows[r].metric == i)
                total += rows[r].value;
        if (l->hist[i] == NULL
            && qpt_hist_create(1, l->o->hist_buckets, l->o->hist_width, l->start, &l->hist[i])
                   < 0)
            continue;
        qpt_hist_add(l->hist[i], t, &total);
    }
    free(rows);
}

void
qm_live_report_free(qm_live_report_t *rep)
{
    if (rep == NULL)
        return;
    free(rep->rows);
    free(rep->costs);
    for (size_t i = 0; i < rep->nhist; i++)
        qpt_hist_destroy(rep->hist[i]);
    free(rep->hist);
    rep->rows = NULL;
    rep->costs = NULL;
    rep->hist = NULL;
    rep->nrows = rep->ncosts = rep->nhist = 0;
}

/* The table and the costs now, to on_sample: its answer (nonzero: enough), or < 0. */
static int
sample(live_t *l, char *why, size_t whylen)
{
    qm_row_t *rows;
    size_t n;
    int rc = results(l, &rows, &n, why, whylen);
    if (rc < 0)
        return rc;
    qm_symbolize(l->s, rows, n);
    qm_threads_apply(l->threads, rows, n);
    if ((rc = with_apart(l, &rows, &n)) < 0) {
        free(rows);
        return rc;
    }
    qm_costs_observe(l->costs, l->set, l->s, l->cpn);
    qm_cost_t *costs = NULL;
    size_t nc = qm_costs_table(l->costs, l->set, &costs);
    int enough = l->o->on_sample ? l->o->on_sample(l->o->arg, l->set, rows, n, costs, nc,
                                                   qm_now() - l->start)
                                 : 0;
    free(rows);
    free(costs);
    return enough;
}

static void take_out_over_budget(live_t *l, size_t worst, double cost, const char *whose);

/* --max-overhead while running: the costliest metric out when the total observed is over
 * the budget. */
static void
enforce(live_t *l)
{
    double total;
    qm_costs_observe(l->costs, l->set, l->s, l->cpn);
    size_t worst = qm_costs_worst(l->costs, l->set, &total);
    if (worst == SIZE_MAX || total <= l->o->max_overhead)
        return;
    take_out_over_budget(l, worst, total, "in all");
}

/* Between those checks (a second apart: a window long enough to be steady), a metric
 * whose modelled cost alone is RUNAWAY times the budget goes at once: one predicted
 * cheap while the program waited (no calls in the sample) may cost several times the
 * program's own time once it works again (the search's lock timers in a postgres
 * backend: 300%). */
enum { RUNAWAY = 4 };

static void
runaway(live_t *l)
{
    double cost;
    size_t worst = qm_costs_runaway(l->costs, l->set, l->s, l->cpn,
                                    RUNAWAY * l->o->max_overhead, &cost);
    if (worst != SIZE_MAX)
        take_out_over_budget(l, worst, cost, "alone");
}

static void
take_out_over_budget(live_t *l, size_t worst, double cost, const char *whose)
{
    char why[512] = "";
    double ms;
    if (steer(l, set_up_remove, &worst, &ms, why, sizeof(why)) < 0) {
        say(l, "#%zu %s: %s", worst + 1, qm_name(l->set, worst), why);
        return;
    }
    qm_release(l->set, l->s);
    qm_costs_release(l->costs, l->s);
    l->rep->removed++;
    say(l, "removed #%zu %s: observed cost %.2f%% %s exceeds --max-overhead %.2f%% "
        "(stopped %.1f ms)", worst + 1, qm_name(l->set, worst), cost, whose, l->o->max_overhead,
        ms);
}

static int
cmd_show(live_t *l)
{
    char why[512];
    int enough = sample(l, why, sizeof(why));
    if (enough < 0) {
        reply(l, "show: %s", why);
        return 0;
    }
    return enough;
}

static void
command(live_t *l, char *line)
{
    while (isspace((unsigned char)*line))
        line++;
    size_t len = strlen(line);
    while (len > 0 && isspace((unsigned char)line[len - 1]))
        line[--len] = '\0';
    char *arg = line + strcspn(line, " \t");
    if (*arg != '\0')
        *arg++ = '\0';
    while (isspace((unsigned char)*arg))
        arg++;
    if (line[0] == '\0' || line[0] == '#')
        return;
    if (strcmp(line, "add") == 0 && *arg != '\0')
        cmd_add(l, arg);
    else if (strcmp(line, "remove") == 0 && *arg != '\0')
        cmd_remove(l, arg);
    else if (strcmp(line, "list") == 0 && *arg == '\0')
        cmd_list(l);
    else if (strcmp(line, "stacks") == 0 && *arg == '\0')
        cmd_stacks(l);
    else if (strcmp(line, "show") == 0 && *arg == '\0')
        l->quit = cmd_show(l);
    else if ((strcmp(line, "quit") == 0 || strcmp(line, "exit") == 0) && *arg == '\0')
        l->quit = 1;
    else if (strcmp(line, "help") == 0) {
        reply(l, "add METRIC      measure METRIC from now on (qpt-metrics(5)), e.g.");
        reply(l, "                add count calls(malloc) inside(main)");
        reply(l, "remove NAME|#N  take a metric out (its snippets leave the process)");
        reply(l, "list            the metrics, numbered");
        reply(l, "stacks          each thread's call stack: the program's procedures on it");
        reply(l, "show            the table now");
        reply(l, "quit            end the session (the final table, everything out)");
    } else
        reply(l, "%s: unknown command, or its argument missing (try 'help')", line);
}

/* The first complete line of the command input into LINE (its newline gone, no spaces at
 * its start): 0 when there is none. */
static int
take_line(live_t *l, char *line)
{
    char *nl = memchr(l->buf, '\n', l->nbuf);
    if (nl == NULL)
        return 0;
    *nl = '\0';
    size_t k = (size_t)(nl - l->buf) + 1;
    const char *p = l->buf;
    while (isspace((unsigned char)*p))
        p++;
    memmove(line, p, strlen(p) + 1);
    memmove(l->buf, l->buf + k, l->nbuf - k);
    l->nbuf -= k;
    return 1;
}

/* Is the next complete line of the input VERB's? */
static int
next_is(const live_t *l, const char *verb)
{
    const char *nl = memchr(l->buf, '\n', l->nbuf), *p = l->buf;
    while (nl != NULL && p < nl && isspace((unsigned char)*p))
        p++;
    size_t len = strlen(verb);
    return nl != NULL && (size_t)(nl - p) > len && strncmp(p, verb, len) == 0;
}

/* TEXT without the spaces around it (in place). */
static char *
trimmed(char *text)
{
    while (isspace((unsigned char)*text))
        text++;
    size_t len = strlen(text);
    while (len > 0 && isspace((unsigned char)text[len - 1]))
        text[--len] = '\0';
    return text;
}

/* Read what the command input has (waiting at most SECS), and run the complete lines. */
static void
commands(live_t *l, double secs)
{
    struct pollfd pfd = { l->o->commands_fd, POLLIN, 0 };
    int r = poll(&pfd, 1, (int)(secs * 1e3));
    if (r <= 0)
        return;
    ssize_t n = read(l->o->commands_fd, l->buf + l->nbuf, sizeof(l->buf) - 1 - l->nbuf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        l->eof = 1;
        if (l->nbuf > 0) { /* a last line without its newline */
            l->buf[l->nbuf] = '\0';
            l->nbuf = 0;
            command(l, l->buf);
        }
        return;
    }
    l->nbuf += (size_t)n;
    char line[sizeof(l->buf)];
    while (!l->quit && take_line(l, line)) {
        /* Adds (removes) that came together are done together: one stop for all. */
        const char *verb = strncmp(line, "add ", 4) == 0      ? "add "
                           : strncmp(line, "remove ", 7) == 0 ? "remove "
                                                              : NULL;
        if (verb == NULL) {
            command(l, line);
        } else {
            char *lines[64];
            size_t k = 0, len = strlen(verb);
            lines[k++] = strdup(line);
            while (k < 64 && next_is(l, verb) && take_line(l, line))
                lines[k++] = strdup(line);
            int ok = 1;
            for (size_t j = 0; j < k; j++)
                ok &= lines[j] != NULL && trimmed(lines[j] + len)[0] != '\0';
            if (!ok || k == 1) {
                for (size_t j = 0; j < k && !l->quit; j++)
                    if (lines[j] != NULL)
                        command(l, lines[j]);
            } else {
                char *args[64];
                for (size_t j = 0; j < k; j++)
                    args[j] = trimmed(lines[j] + len);
                if (verb[0] == 'a')
                    cmd_adds(l, args, k);
                else
                    cmd_removes(l, args, k);
            }
            for (size_t j = 0; j < k; j++)
                free(lines[j]);
        }
        if (!l->quit && l->o->on_reply != NULL)
            l->o->on_reply(l->o->arg, NULL);
    }
    if (l->nbuf == sizeof(l->buf) - 1) {
        reply(l, "a command longer than %zu bytes: ignored", sizeof(l->buf) - 2);
        l->nbuf = 0;
    }
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
    if (o->relocate)
        qpt_set_relocate(s, 1);
    double cpn = qm_cycles_per_ns();
    live_t l = { 0 };
    l.set = set;
    l.o = o;
    l.rep = rep;
    l.s = s;
    l.cpn = cpn;
    l.costs = qm_costs_new();
    l.threads = qm_threads_new(s);
    int histo = o->hist_buckets >= 2 && o->hist_buckets % 2 == 0 && o->hist_width > 0;
    if (l.costs == NULL) {
        qpt_kill(s);
        return QPT_ENOMEM;
    }
    if (qm_count(set) == 0 && !o->commands) {
        snprintf(why, whylen, "no metric to measure");
        qm_costs_free(l.costs);
        qm_threads_free(l.threads);
        qpt_kill(s);
        return QPT_EINVAL;
    }
    /* Its libraries loaded later, its execs and forks are followed (a process started
     * here is let run to its entry point: its libraries are loaded then). */
    start_following(&l);
    /* Attached: the process runs, so its calls can be sampled first; a process started
     * here has not run yet (no prediction, the observed costs only). */
    unsigned refused = 0;
    if (qm_count(set) > 0) {
        why[0] = '\0';
        /* Attached: the libraries named are analysed while it runs again. (A process
         * started here stays at its execve: qpt_library runs it to its entry.) */
        int stopped = 1;
        if (o->pid > 0 && any_library(set)) {
            if ((rc = qpt_run(s)) < 0)
                snprintf(why, whylen, "%s", qpt_error(s));
            stopped = 0;
        }
        if (rc == 0)
            rc = place(&l, 0, stopped, o->pid > 0, &rep->stop_ms, &refused, why, whylen);
    } else if ((rc = qpt_run(s)) < 0)
        snprintf(why, whylen, "%s", qpt_error(s));
    if (rc == 0 && o->on_event != NULL && !o->commands) {
        /* A front end's lenient metrics: none in, none waiting for a library. */
        size_t live = 0;
        for (size_t i = 0; i < qm_count(set); i++)
            live += qm_state(set, i) == QM_ON || qm_state(set, i) == QM_WAITING;
        if (live == 0) {
            snprintf(why, whylen, "nothing to measure");
            rc = QPT_ENOTFOUND;
        }
    }
    if (rc == 0 && qm_count(set) > 0 && refused == qm_count(set) && !o->commands) {
        snprintf(why, whylen, "no metric within --max-overhead %.2f%%", o->max_overhead);
        rc = QPT_EINVAL;
    }
    if (rc < 0) {
        char msg[2048];
        snprintf(msg, sizeof(msg), "%d: %s", rep->pid, why);
        snprintf(why, whylen, "%s", msg);
        qm_costs_free(l.costs);
        qm_threads_free(l.threads);
        free(l.placed);
        qpt_kill(s); /* a command whose metrics are refused is not run */
        return rc;
    }
    for (size_t i = 0; i < qm_count(set); i++)
        if (qm_state(set, i) == QM_ON)
            mark_placed(&l, i);
    if (o->on_event != NULL && qm_count(set) > 0)
        placed_event(&l, QM_EV_PLACED, NULL, NULL, 0, rep->stop_ms);
    if (o->on_ready != NULL)
        o->on_ready(o->arg, rep->pid, rep->stop_ms);
    double start = qm_now(), next = o->interval > 0 ? start + o->interval : 0;
    double next_check = o->max_overhead > 0 ? start + 1 : 0;
    double next_runaway = o->max_overhead > 0 ? start + 0.25 : 0;
    /* The histograms are fed once a bucket, in its middle: each bucket then holds what
     * was counted over one bucket's time (from the middle of the one before). */
    double hist_step = histo ? o->hist_width : 0;
    double next_hist = histo ? start + hist_step / 2 : 0;
    l.start = start;
    if (o->commands && o->on_reply != NULL)
        o->on_reply(o->arg, NULL);
    for (;;) {
        if ((o->stop != NULL && *o->stop) || l.quit || l.eof || rep->ended)
            break;
        double t = qm_now();
        if (o->duration > 0 && t - start >= o->duration)
            break;
        if (o->pid <= 0 ? qpt_ended(s, &rep->status) == 1 : !alive(rep->pid)) {
            rep->ended = 1;
            break;
        }
        if (next > 0 && t >= next) {
            if (o->on_sample != NULL && sample(&l, why, whylen) > 0)
                break;
            /* Past samples are not made up for: a command that stopped the process
             * longer than an interval must not leave NEXT behind (a negative wait). */
            while (next <= qm_now())
                next += o->interval;
        }
        if (next_hist > 0 && t >= next_hist) {
            hist_sample(&l);
            /* The width doubles as buckets fold: one sample a bucket still. */
            for (size_t i = 0; i < l.nhist; i++)
                if (qpt_hist_width(l.hist[i]) > hist_step)
                    hist_step = qpt_hist_width(l.hist[i]);
            while (next_hist <= t)
                next_hist += hist_step;
        }
        if (next_check > 0 && t >= next_check) {
            enforce(&l); /* each second: a window long enough to be steady */
            next_check += 1;
        } else if (next_runaway > 0 && t >= next_runaway) {
            runaway(&l);
            next_runaway = t + 0.25;
        }
        /* A thread's id is learnt while it lives (a short one may live 20 ms). */
        qm_threads_learn(l.threads, set, read_words, s);
        double until = 0.02;
        if (next > 0 && next - t < until)
            until = next - t;
        if (next_hist > 0 && next_hist - t < until)
            until = next_hist - t;
        if (until < 0)
            until = 0;
        /* Followed, its events are waited for (each handled at once); the commands'
         * input is looked at between. */
        if (o->commands)
            commands(&l, l.watching ? 0 : until);
        if (l.watching)
            follow(&l, until);
        else if (!o->commands)
            nap(until);
    }
    followed_notes(&l);
    rep->secs = qm_now() - start;
    if (histo)
        hist_sample(&l); /* also after the end: the variables are shared */
    rep->hist = l.hist;
    rep->nhist = l.nhist;
    rc = results(&l, &rep->rows, &rep->nrows, why, whylen);
    free(l.prev);
    free(l.carry);
    free(l.placed);
    if (rc == 0) {
        qm_symbolize(s, rep->rows, rep->nrows);
        qm_threads_apply(l.threads, rep->rows, rep->nrows);
        rc = with_apart(&l, &rep->rows, &rep->nrows);
    }
    qm_threads_free(l.threads);
    if (!rep->ended) {
        qm_costs_observe(l.costs, set, s, cpn);
        rep->ncosts = qm_costs_table(l.costs, set, &rep->costs);
    }
    qm_costs_free(l.costs);
    free(l.apart);
    double t_close = qm_now();
    int gone = rep->ended;
    qpt_close(s); /* the snippets out, the process let go */
    qm_live_event_t ev = { .kind = QM_EV_REMOVED, .pid = rep->pid,
                           .stop_ms = (qm_now() - t_close) * 1e3 };
    if (!gone && o->on_event != NULL)
        o->on_event(o->arg, &ev);
    return rc;
}
