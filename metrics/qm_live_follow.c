/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * A live session follows its process (qpt_watch): libraries loaded and unloaded, execs,
 * forks; a metric whose library is a glob gets an instance in each library that matches.
 */
#include "config.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics/qm_priv.h"

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
void
qml_mark_placed(qml_live_t *l, size_t i)
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
void
qml_wait_for_libraries(qml_live_t *l, size_t first)
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
        if (!qml_event(l, &ev))
            qml_say(l,
                "#%zu %s: no library matching %s is loaded: measured once one is "
                "(dlopen)",
                i + 1, qm_name(l->set, i), lib);
    }
}

/*
 * Metric I (waiting) into the stopped process on its own, in one commit: 0, or < 0 with
 * WHY (then it waits on, nothing of it in).
 */
static int
place_one(qml_live_t *l, size_t i, char *why, size_t whylen)
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
    qml_mark_placed(l, i);
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
is_template(const qml_live_t *l, size_t i)
{
    char lib[256];
    return qm_instance_of(l->set, i) == i && qm_library_of(l->set, i, lib, sizeof(lib)) == 0
           && strpbrk(lib, "*?[") != NULL;
}

/* Template T's instance in library NAME, added (parsed, or waiting with WAIT) unless it
 * has one there. */
static void
instance_in(qml_live_t *l, size_t t, const char *name, int wait)
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
void
qml_instances_loaded(qml_live_t *l, size_t first, int wait)
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
instance_placed(const qml_live_t *l, size_t t)
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
on_library(qml_live_t *l, const char *name)
{
    char lib[256], why[2048], in[256] = "";
    double t0 = qm_now();
    uint8_t *was = qml_on_now(l);
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
            qml_say(l, "#%zu %s: %s loaded, but not measured: %s", i + 1,
                qm_name(l->set, i), name, first_line(why));
        else
            list_add(in, sizeof(in), i);
    }
    if (in[0] != '\0' && l->o->on_event != NULL)
        qml_placed_event(l, QM_EV_LOADED, name, was, nm, (qm_now() - t0) * 1e3);
    else if (in[0] != '\0')
        qml_say(
            l, "%d: %s loaded: metrics %s measured from now on", l->rep->pid, name, in);
    free(was);
}

/* Tell the user that CHILD was left stopped, and what to do. */
void
qml_warn_left_stopped(qml_live_t *l, int child)
{
    qml_warn(l, "child %d left stopped (the loader's int3 could not be taken out of it): "
                "run 'dyn clean %d', then kill -CONT %d", child, child, child);
}

/* Tell the user that N children were left stopped whose pids libqpt could not keep (no
 * memory): where to find them. */
void
qml_warn_unnamed_left_stopped(qml_live_t *l, size_t n)
{
    if (n > 0)
        qml_warn(l, "%zu more %s of %d left stopped, %s pid lost (no memory): find %s in "
                    "state T (ps -o pid,ppid,stat), run 'dyn clean PID', then kill -CONT PID",
            n, n == 1 ? "child" : "children", l->rep->pid, n == 1 ? "its" : "their",
            n == 1 ? "it" : "them");
}

/* Library NAME was unloaded (dlclose): the values of the metrics in it are kept (added to
 * theirs if it is loaded again; an average's kept apart, its focus "... (until dlclose
 * N)"), and those metrics wait for it. */
static void
on_unload(qml_live_t *l, const char *name)
{
    char lib[256], why[1024], out[256] = "";
    for (size_t i = 0; i < qm_count(l->set); i++) {
        qpt_space_t *x;
        if (qm_state(l->set, i) != QM_ON || qm_library_of(l->set, i, lib, sizeof(lib)) < 0
            || !qpt_module_matches(lib, name) || qpt_library(l->s, lib, &x, why, sizeof(why)) == 0)
            continue; /* (another library of that name still in) */
        qm_row_t *rows;
        size_t n;
        if (qm_results(l->set, qml_read_words, l->s, l->cpn, &rows, &n, why, sizeof(why))
            < 0) {
            qml_say(l, "#%zu %s: %s unloaded; its values are lost: %s", i + 1,
                qm_name(l->set, i), name, first_line(why));
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
            if (qml_append_rows(&l->carry, &l->ncarry, &rows[r], 1) < 0)
                qml_say(l, "#%zu %s: a row lost: %s", i + 1, qm_name(l->set, i),
                    qpt_strerror(QPT_ENOMEM));
        }
        free(rows);
        qm_forget(l->set, i);
        qm_costs_forget(l->costs, i);
        list_add(out, sizeof(out), i);
    }
    qm_live_event_t ev = { .kind = QM_EV_UNLOADED, .name = name };
    if (out[0] != '\0' && qml_event(l, &ev))
        ;
    else if (out[0] != '\0')
        qml_say(l,
            "%d: %s unloaded (dlclose): the values of metrics %s are those until then "
            "(added to if it is loaded again)",
            l->rep->pid, name, out);
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
on_exec(qml_live_t *l, const char *path)
{
    char why[2048] = "", was[256];
    qm_row_t *rows = NULL;
    size_t n = 0;
    snprintf(was, sizeof(was), "%s", l->prog);
    /* The old image's memory we shared keeps its values (its timers stopped with it). */
    if (qm_results(l->set, qml_read_words, l->s, l->cpn, &rows, &n, why, sizeof(why)) == 0
        && qml_merge_carry(l, &rows, &n) == 0) {
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
        if (qml_append_rows(&l->apart, &l->napart, rows, n) < 0)
            qml_say(l, "%d: the values before the exec are lost: %s", l->rep->pid,
                qpt_strerror(QPT_ENOMEM));
    } else
        qml_say(l, "%d: the values before the exec are lost: %s", l->rep->pid,
            first_line(why));
    free(rows);
    free(l->carry);
    free(l->prev);
    l->carry = l->prev = NULL;
    l->ncarry = l->nprev = 0;
    l->image++;
    base_name(path, l->prog, sizeof(l->prog));
    qm_live_event_t ev = { .kind = QM_EV_EXEC, .name = path, .was = was, .image = l->image };
    if (!qml_event(l, &ev))
        qml_say(l,
            "%d: the process ran execve (%s): the values up to the exec are kept apart "
            "(rows %s[%zu]:...); measuring the new program",
            l->rep->pid, path, was, l->image);
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
    qml_instances_loaded(l, 0, 1); /* (the new program's libraries) */
    for (size_t i = 0; i < qm_count(l->set); i++) {
        char lib[256];
        qpt_space_t *x;
        if (qm_state(l->set, i) != QM_WAITING || is_template(l, i))
            continue;
        if (qm_library_of(l->set, i, lib, sizeof(lib)) == 0
            && qpt_library(l->s, lib, &x, why, sizeof(why)) == QPT_ENOTFOUND) {
            if (was_on == NULL || i >= nm || was_on[i])
                qml_say(l,
                    "#%zu %s: no library matching %s is loaded in the new program: "
                    "measured once one is (dlopen)",
                    i + 1, qm_name(l->set, i), lib);
            continue;
        }
        if (place_one(l, i, why, sizeof(why)) < 0)
            qml_say(l, "#%zu %s: not measured in the new program: %s", i + 1,
                qm_name(l->set, i), first_line(why));
    }
    free(was_on);
    if (l->o->on_event != NULL)
        qml_placed_event(l, QM_EV_PLACED, NULL, NULL, 0, (qm_now() - t0) * 1e3);
}

/* Once per session: the loader's breakpoint is the plain int3 (qpt_watch_unguarded),
 * which a killed dyn leaves behind to kill the program. */
static void
say_if_unguarded(qml_live_t *l)
{
    int how = qpt_watch_unguarded(l->s);
    if (how <= 0 || (l->told_unguarded & how))
        return;
    l->told_unguarded |= how;
    if (how == 2) {
        qml_warn(l,
            "%d: the loader's breakpoint cannot tell a forked child from the process but "
            "by its pid (MADV_WIPEONFORK refused): a child that is process 1 of a new pid "
            "namespace would wait at its dlopens until dyn ends",
            l->rep->pid);
        return;
    }
    qml_warn(l, /* (not an answer: a --commands front end may not show those) */
        "%d: the loader's breakpoint is a plain int3 here (no room for the guarded jump at "
        "r_brk, or the process could not make the shared page): should dyn be killed "
        "(SIGKILL), the program dies (SIGTRAP) at its next dlopen or dlclose unless "
        "'dyn clean %d' runs first",
        l->rep->pid, l->rep->pid);
}

/*
 * The process's events for up to SECS seconds, each handled while it is stopped; then
 * it runs on. Its end sets rep->ended; a process that cannot be followed any more ends
 * the session (said).
 */
void
qml_follow(qml_live_t *l, double secs)
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
            say_if_unguarded(l);
            break;
        case QPT_EV_FORK:
            if (ev.child_counted < 0)
                qml_warn_left_stopped(l, ev.tid);
            else if (ev.child_counted)
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
        qml_say(l, "%d: the process cannot be followed any more: %s", l->rep->pid,
            qpt_error(l->s));
        l->watching = 0;
        l->quit = 1;
    }
}

/* Follow the process of L (stopped): its libraries, execs and forks; said when it cannot
 * be, and the session goes on without. */
void
qml_start_following(qml_live_t *l)
{
    unsigned mask = QPT_EV_BIT(QPT_EV_LIBRARY_LOAD) | QPT_EV_BIT(QPT_EV_LIBRARY_UNLOAD)
        | QPT_EV_BIT(QPT_EV_EXEC) | QPT_EV_BIT(QPT_EV_FORK);
    char link[64], exe[4096];
    snprintf(link, sizeof(link), "/proc/%d/exe", l->rep->pid);
    ssize_t k = readlink(link, exe, sizeof(exe) - 1);
    exe[k > 0 ? k : 0] = '\0';
    base_name(k > 0 ? exe : "?", l->prog, sizeof(l->prog));
    if (qpt_watch(l->s, mask) < 0)
        qml_say(l, "%d: libraries loaded later, execs and forks are not followed: %s",
            l->rep->pid, qpt_error(l->s));
    else
        l->watching = 1;
    say_if_unguarded(l);
}

/* What following saw, at the end: forks, metrics never in. */
void
qml_followed_notes(qml_live_t *l)
{
    char lib[256];
    qm_live_event_t ev = { .kind = QM_EV_FORKS, .counted = l->forks_counted,
                           .apart = l->forks_apart };
    if ((l->forks_counted > 0 || l->forks_apart > 0) && qml_event(l, &ev))
        ;
    else if (l->forks_counted > 0)
        qml_say(l,
            "%d: %u %s forked: counted with the parent (%s own dlopen and exec not "
            "followed)",
            l->rep->pid, l->forks_counted, l->forks_counted == 1 ? "child" : "children",
            l->forks_counted == 1 ? "its" : "their");
    if (l->forks_apart > 0 && l->o->on_event == NULL)
        qml_say(l, "%d: %u %s forked: not measured", l->rep->pid, l->forks_apart,
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
            qml_say(l,
                "#%zu %s: no library loaded during the session had a procedure matching "
                "it",
                i + 1, qm_name(l->set, i));
            continue;
        }
        qm_live_event_t nev = { .kind = QM_EV_NEVER_LOADED, .metric = i, .name = lib };
        if (qm_library_of(l->set, i, lib, sizeof(lib)) == 0 && qml_event(l, &nev))
            ;
        else if (l->o->on_event != NULL)
            ;
        else if (qm_library_of(l->set, i, lib, sizeof(lib)) == 0)
            qml_say(l, "#%zu %s: no library matching %s was loaded during the session",
                i + 1, qm_name(l->set, i), lib);
        else
            qml_say(l, "#%zu %s: not measured (see above)", i + 1, qm_name(l->set, i));
    }
}

