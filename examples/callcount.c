/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * callcount: count the calls of the procedures whose names match a pattern - in a
 * program file (rewritten, run, its profile read) or in a live process (attached, or
 * started) - with the same instrumenting code for both.
 *
 *   callcount PATTERN PROGRAM [ARGS...]      rewrite PROGRAM, run it, print the counts
 *   callcount -p PID [-t SECONDS] PATTERN    count in process PID for SECONDS (default 1)
 *   callcount -r PATTERN PROGRAM [ARGS...]   start PROGRAM live, count until it ends
 *
 * Build: cc callcount.c $(pkg-config --cflags --libs qpt) -o callcount
 */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <qpt/qpt.h>

#define MAX 4096

static uint32_t procs[MAX];
static size_t nprocs;
static uint64_t words;

/* The same for a file and a process: a counter at the entry of every matching procedure. */
static int
instrument(qpt_space_t *s, const char *pattern)
{
    for (uint32_t i = 0; i < qpt_nprocs(s) && nprocs < MAX; i++)
        if (fnmatch(pattern, qpt_proc_name(s, i), 0) == 0 && qpt_proc_refusal(s, i) == NULL)
            procs[nprocs++] = i;
    if (nprocs == 0) {
        fprintf(stderr, "callcount: no procedure matches '%s'\n", pattern);
        return -1;
    }
    if (qpt_alloc(s, 8 * nprocs, &words) < 0)
        return -1;
    for (size_t k = 0; k < nprocs; k++) {
        qpt_point_t pt;
        size_t n;
        qpt_snippet_t *sn = qpt_snippet_create();
        qpt_expr_t inc = qpt_add_to(sn, words + 8 * k, qpt_const(sn, 1), 1);
        if (qpt_points(s, procs[k], QPT_ENTRY, &pt, 1, &n) < 0
            || qpt_insert(s, &pt, sn, inc, NULL) < 0) {
            qpt_snippet_destroy(sn);
            return -1;
        }
        qpt_snippet_destroy(sn);
    }
    return 0;
}

static void
print(qpt_space_t *s, const uint64_t *counts)
{
    for (size_t k = 0; k < nprocs; k++)
        printf("%12llu  %s\n", (unsigned long long)counts[k], qpt_proc_name(s, procs[k]));
}

static int
fail(qpt_space_t *s, const char *what)
{
    fprintf(stderr, "callcount: %s: %s\n", what, qpt_error(s));
    qpt_close(s);
    return 1;
}

static void
nap(double secs)
{
    struct timespec ts = { (time_t)secs, (long)((secs - (time_t)secs) * 1e9) };
    nanosleep(&ts, NULL);
}

int
main(int argc, char **argv)
{
    int pid = 0, run = 0, c;
    double secs = 1;
    char why[512] = "";
    qpt_space_t *s = NULL;
    uint64_t counts[MAX];
    while ((c = getopt(argc, argv, "+p:t:r")) != -1)
        switch (c) {
        case 'p': pid = atoi(optarg); break;
        case 't': secs = atof(optarg); break;
        case 'r': run = 1; break;
        default: return 2;
        }
    if (optind >= argc || (!pid && optind + 1 >= argc)) {
        fprintf(stderr, "usage: callcount [-p PID [-t SECONDS] | -r] PATTERN [PROGRAM ARGS...]\n");
        return 2;
    }
    const char *pattern = argv[optind];
    char **prog = argv + optind + 1;
    if (pid || run) { /* live */
        if ((pid ? qpt_attach(pid, &s, why, sizeof(why)) : qpt_spawn(prog, &s, why, sizeof(why))) < 0) {
            fprintf(stderr, "callcount: %s\n", why);
            return 1;
        }
        if (instrument(s, pattern) < 0 || qpt_commit(s) < 0 || qpt_run(s) < 0)
            return fail(s, "instrumenting");
        int status;
        if (pid)
            nap(secs);
        else
            while (qpt_ended(s, &status) == 0)
                nap(0.01);
        if (qpt_read_memory(s, words, counts, 8 * nprocs) < 0)
            return fail(s, "reading");
        print(s, counts);
        qpt_close(s);
        return 0;
    }
    /* A file: rewrite, run, read the profile. */
    char out[4096], profile[4200];
    snprintf(out, sizeof(out), "%s.callcount", prog[0]);
    snprintf(profile, sizeof(profile), "%s.qp", out);
    if (qpt_open(prog[0], &s, why, sizeof(why)) < 0) {
        fprintf(stderr, "callcount: %s\n", why);
        return 1;
    }
    if (instrument(s, pattern) < 0 || qpt_write(s, out) < 0)
        return fail(s, "rewriting");
    unlink(profile);
    pid_t child = fork();
    if (child == 0) {
        execv(out, prog);
        _exit(127);
    }
    waitpid(child, NULL, 0);
    if (qpt_profile_read(profile, words, counts, nprocs, why, sizeof(why)) < 0) {
        fprintf(stderr, "callcount: %s: %s\n", profile, why);
        return 1;
    }
    print(s, counts);
    qpt_close(s);
    return 0;
}
