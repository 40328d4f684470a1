/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * libcount: start a program and count the calls of the procedures whose names match a
 * pattern in it and in every library it loads later (dlopen), each library instrumented
 * from a callback before its code runs, and in the program it execs, if it does;
 * printing what the process does (threads, forks, exec, libraries, its end) as it
 * happens: libqpt's events, the Dyninst way.
 *
 *   libcount PATTERN PROGRAM [ARGS...]
 *
 * Build: cc libcount.c $(pkg-config --cflags --libs qpt) -o libcount
 */
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include <qpt/qpt.h>

#define MAX 4096

typedef struct row {
    char name[300];   /* MODULE:PROCEDURE */
    uint64_t ctr;     /* its counter (qpt_alloc'ed in the space of its module) */
    qpt_space_t *s;   /* that space: read through it, an unloaded library's too */
} row_t;

static row_t rows[MAX];
static size_t nrows;
static const char *pattern;

/* A counter at the entry of every procedure of S that matches the pattern; commit. */
static void
instrument(qpt_space_t *s, const char *module)
{
    qpt_snippet_t *sn = qpt_snippet_create();
    for (uint32_t i = 0; i < qpt_nprocs(s) && nrows < MAX; i++) {
        qpt_point_t pt;
        size_t n;
        uint64_t ctr;
        if (fnmatch(pattern, qpt_proc_name(s, i), 0) != 0 || qpt_proc_refusal(s, i) != NULL
            || qpt_points(s, i, QPT_ENTRY, &pt, 1, &n) < 0 || n == 0
            || qpt_alloc(s, 8, &ctr) < 0)
            continue;
        if (qpt_insert(s, &pt, sn, qpt_add_to(sn, ctr, qpt_const(sn, 1), 1), NULL) < 0) {
            fprintf(stderr, "libcount: %s\n", qpt_error(s));
            continue;
        }
        snprintf(rows[nrows].name, sizeof(rows[0].name), "%s:%s", module, qpt_proc_name(s, i));
        rows[nrows].s = s;
        rows[nrows++].ctr = ctr;
    }
    qpt_snippet_destroy(sn);
    if (qpt_commit(s) < 0)
        fprintf(stderr, "libcount: %s: %s\n", module, qpt_error(s));
}

/* Every event: one line; a library just loaded is instrumented before it runs. */
static void
on_event(qpt_space_t *s, const qpt_event_t *ev, void *arg)
{
    (void)arg;
    switch (ev->kind) {
    case QPT_EV_THREAD_START: printf("libcount: thread %d started\n", ev->tid); break;
    case QPT_EV_THREAD_EXIT: printf("libcount: thread %d ended\n", ev->tid); break;
    case QPT_EV_FORK:
        if (ev->child_counted < 0) /* its loader breakpoint could not be taken out */
            printf("libcount: child %d left stopped: run 'dyn clean %d', then kill -CONT %d\n",
                   ev->tid, ev->tid, ev->tid);
        else
            printf("libcount: forked child %d\n", ev->tid);
        break;
    case QPT_EV_EXEC: /* S is the new program: count in it too */
        printf("libcount: exec %s\n", ev->name);
        instrument(s, "exe");
        break;
    case QPT_EV_LIBRARY_LOAD: {
        char why[1024];
        qpt_space_t *lib;
        printf("libcount: library %s loaded\n", ev->name);
        if (qpt_library(s, ev->name, &lib, why, sizeof(why)) == 0)
            instrument(lib, ev->name);
        else
            fprintf(stderr, "libcount: %s\n", why);
        break;
    }
    case QPT_EV_LIBRARY_UNLOAD: printf("libcount: library %s unloaded\n", ev->name); break;
    case QPT_EV_EXIT:
        if (WIFEXITED(ev->status))
            printf("libcount: exit status %d\n", WEXITSTATUS(ev->status));
        else
            printf("libcount: killed by signal %d\n", WTERMSIG(ev->status));
        break;
    }
    fflush(stdout);
}

int
main(int argc, char **argv)
{
    char why[1024];
    qpt_space_t *s;
    if (argc < 3) {
        fprintf(stderr, "usage: libcount PATTERN PROGRAM [ARGS...]\n");
        return 2;
    }
    pattern = argv[1];
    if (qpt_spawn(argv + 2, &s, why, sizeof(why)) < 0) {
        fprintf(stderr, "libcount: %s\n", why);
        return 1;
    }
    for (uint32_t k = QPT_EV_THREAD_START; k <= QPT_EV_EXIT; k++)
        if (qpt_set_callback(s, k, on_event, NULL) < 0) {
            fprintf(stderr, "libcount: %s\n", qpt_error(s));
            qpt_kill(s);
            return 1;
        }
    /* The program itself (the libraries loaded with it: qpt_library(s, "libc.so.6"...)). */
    instrument(s, "exe");
    if (qpt_wait(s, -1) < 0) {
        fprintf(stderr, "libcount: %s\n", qpt_error(s));
        qpt_close(s);
        return 1;
    }
    for (size_t i = 0; i < nrows; i++) {
        uint64_t v = 0;
        if (qpt_read_memory(rows[i].s, rows[i].ctr, &v, 8) == 0 && v > 0)
            printf("%12llu  %s\n", (unsigned long long)v, rows[i].name);
    }
    qpt_close(s);
    /* Children its close let go stopped (forked as it stopped the process for good). */
    int kids[16];
    for (size_t n; (n = qpt_children_left_stopped(kids, 16)) > 0;)
        for (size_t k = 0; k < n; k++)
            printf("libcount: child %d left stopped: run 'dyn clean %d', then kill -CONT %d\n",
                   kids[k], kids[k], kids[k]);
    return 0;
}
