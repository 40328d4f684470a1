/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * libqpt speed (a benchmark, not a test; make bench runs it):
 *  1. the cost per hit of `if (arg1 > 10) counter++` at a procedure's entry, rewritten
 *     and live, against the plain program (bench/argcall: 100M calls, median of 5);
 *     then a per-thread counter and a per-thread CPU timer (rewritten);
 *  2. inserting 10,000 points into a live process in one stop (python3.11 running a
 *     loop: entry counters, then block counters, until 10,000), chosen while it runs,
 *     then stop + commit + run: the time it is stopped (median of 5);
 *  3. steering: one metric added to and removed from a live python3.11 that has 1,000
 *     points already (the time stopped for each, medians of 5).
 * Usage: qpt-bench ARGCALL [PYTHON]   (ARGCALL "-": the second part only; QPT_BENCH_ROUNDS=N)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <qpt/qpt.h>

#include "include/qpt/qpt_metrics.h"

static double
now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int
cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double
median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_d);
    return v[n / 2];
}

/* The cost model's ns per call of PROC in S (the insertions at its points). */
static double
model_ns(qpt_space_t *s, const char *proc)
{
    static double cpn;
    uint32_t f;
    qpt_point_t pt;
    double sum = 0, c;
    if (cpn == 0)
        cpn = qm_cycles_per_ns();
    if (qpt_proc_find(s, proc, &f) < 0)
        return -1;
    for (qpt_handle_t h = 0; qpt_insertion_point(s, h, &pt) == 0; h++)
        if (pt.proc == f && qpt_cost_cycles(s, h, &c) == 0)
            sum += c;
    return sum / cpn;
}

/* Run ARGV, return the ns/call it prints. */
static double
ns_per_call(char *const argv[])
{
    int fd[2];
    if (pipe(fd) < 0)
        return -1;
    pid_t p = fork();
    if (p == 0) {
        dup2(fd[1], 1);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fd[1]);
    char buf[64] = "";
    ssize_t r = read(fd[0], buf, sizeof(buf) - 1);
    close(fd[0]);
    waitpid(p, NULL, 0);
    return r > 0 ? atof(buf) : -1;
}

/* The benchmark's snippet at F's entry of S; *CTR its counter. */
static int
insert_if(qpt_space_t *s, uint64_t *ctr)
{
    uint32_t f;
    qpt_point_t pt;
    size_t n;
    if (qpt_proc_find(s, "f", &f) < 0 || qpt_alloc(s, 8, ctr) < 0
        || qpt_points(s, f, QPT_ENTRY, &pt, 1, &n) < 0)
        return -1;
    qpt_snippet_t *sn = qpt_snippet_create();
    qpt_expr_t e = qpt_if(sn, qpt_op(sn, QPT_GT, qpt_arg(sn, 0), qpt_const(sn, 10)),
                          qpt_add_to(sn, *ctr, qpt_const(sn, 1), 0), QPT_NONE);
    int rc = qpt_insert(s, &pt, sn, e, NULL);
    qpt_snippet_destroy(sn);
    return rc;
}

/* Start ARGV live with the benchmark's snippet, run it; the ns/call it prints. */
static double
live_ns(char *const argv[])
{
    char why[512];
    int fd[2], saved = dup(1);
    uint64_t ctr;
    qpt_space_t *s = NULL;
    if (pipe(fd) < 0 || saved < 0)
        return -1;
    fflush(stdout);
    dup2(fd[1], 1); /* the process inherits our stdout: a pipe, for once */
    int rc = qpt_spawn(argv, &s, why, sizeof(why));
    dup2(saved, 1);
    close(saved);
    close(fd[1]);
    if (rc < 0 || insert_if(s, &ctr) < 0 || qpt_commit(s) < 0 || qpt_run(s) < 0) {
        fprintf(stderr, "qpt-bench: live: %s\n", s ? qpt_error(s) : why);
        exit(1);
    }
    char buf[64] = "";
    ssize_t r = read(fd[0], buf, sizeof(buf) - 1);
    close(fd[0]);
    int st;
    while (qpt_ended(s, &st) == 0) {
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    uint64_t c = 0;
    qpt_read_memory(s, ctr, &c, 8);
    if (c != 100000000ull / 21 * 10 + (100000000ull % 21 > 11 ? 100000000ull % 21 - 11 : 0))
        fprintf(stderr, "qpt-bench: live counter %llu: not the expected count\n",
                (unsigned long long)c);
    qpt_close(s);
    return r > 0 ? atof(buf) : -1;
}

/* F's entry (and exits) of S get KIND: 1 a per-thread counter, 2 a per-thread CPU timer. */
static int
insert_kind(qpt_space_t *s, int kind)
{
    uint32_t f;
    qpt_point_t pt[8];
    size_t n;
    uint64_t var;
    if (qpt_proc_find(s, "f", &f) < 0 || qpt_alloc_per_thread(s, kind == 1 ? 8 : 24, &var) < 0
        || qpt_points(s, f, QPT_ENTRY, pt, 1, &n) < 0)
        return -1;
    qpt_snippet_t *sn = qpt_snippet_create();
    qpt_expr_t e = kind == 1 ? qpt_add_at(sn, qpt_thread_var(sn, var, 8), qpt_const(sn, 1), 0)
                             : qpt_cpu_timer_start(sn, var);
    int rc = qpt_insert(s, &pt[0], sn, e, NULL);
    if (rc == 0 && kind == 2 && (rc = qpt_points(s, f, QPT_EXIT, pt, 8, &n)) == 0)
        for (size_t i = 0; i < n && i < 8 && rc == 0; i++)
            rc = qpt_insert(s, &pt[i], sn, qpt_cpu_timer_stop(sn, var), NULL);
    qpt_snippet_destroy(sn);
    return rc;
}

/* What goes into a rewrite of bench/argcall: KIND 1 a per-thread counter, 2 a CPU timer,
 * 3 `if (arg1 > 10) counter++`, 4 the metric `count calls(f) inside(main) total`. */
static int
insert_what(qpt_space_t *s, int kind, char *why, size_t whylen)
{
    uint64_t ctr;
    if (kind == 1 || kind == 2)
        return insert_kind(s, kind);
    if (kind == 3)
        return insert_if(s, &ctr);
    qm_set_t *set = NULL;
    int rc = qm_parse("count calls(f) inside(main) total", "-e", 1, &set, why, whylen);
    if (rc == 0)
        rc = qm_insert(set, s, NULL, NULL, why, whylen);
    qm_free(set);
    return rc;
}

/* ARGCALL rewritten into OUT with KIND (insert_what), the profile of an earlier rewrite
 * removed; the cost model's ns per call of f. Exits when it cannot be made. */
static double
rewrite(const char *argcall, const char *out, int kind)
{
    char why[2048] = "", qp[4300];
    qpt_space_t *s = NULL;
    if (qpt_open(argcall, &s, why, sizeof(why)) < 0 || insert_what(s, kind, why, sizeof(why)) < 0
        || qpt_write(s, out) < 0) {
        fprintf(stderr, "qpt-bench: %s: %s\n", argcall, s && why[0] == 0 ? qpt_error(s) : why);
        exit(1);
    }
    double model = model_ns(s, "f");
    qpt_close(s);
    snprintf(qp, sizeof(qp), "%s.qp", out);
    unlink(qp);
    return model;
}

/* Medians of 5 alternating runs of PLAIN and REW: ns per call into *MP and *MR. */
static void
paired(char *const plain[], char *const rew[], double *mp, double *mr)
{
    double p[5], r[5];
    for (int i = 0; i < 5; i++) {
        p[i] = ns_per_call(plain);
        r[i] = ns_per_call(rew);
    }
    *mp = median(p, 5);
    *mr = median(r, 5);
}

/* The added cost per call of a metric constrained by inside(main) (qpt-metrics), rewritten:
 * the counted procedure's snippet finds its thread's block and tests the activation. */
static void
per_metric(const char *argcall)
{
    char out[4200];
    snprintf(out, sizeof(out), "%s.inside", argcall);
    double model = rewrite(argcall, out, 4), mp, mr;
    char *plain[] = { (char *)argcall, "100000000", NULL };
    char *rew[] = { out, "100000000", NULL };
    paired(plain, rew, &mp, &mr);
    printf("count calls(f) inside(main) (median of 5, 100M calls, rewritten): plain %.3f ns, "
           "instrumented %.3f ns (+%.3f ns); cost model %.2f ns\n", mp, mr, mr - mp, model);
}

/* The added cost per call of a per-thread counter and of a CPU timer, rewritten. */
static void
per_thread(const char *argcall)
{
    static const char *what[] = { "", "a per-thread counter at an entry",
                                  "a per-thread CPU timer (entry and exit)" };
    static const char *calls[] = { "", "100000000", "1000000" };
    for (int kind = 1; kind <= 2; kind++) {
        char out[4200];
        snprintf(out, sizeof(out), "%s.k%d", argcall, kind);
        double model = rewrite(argcall, out, kind), mp, mr;
        char *plain[] = { (char *)argcall, (char *)calls[kind], NULL };
        char *rew[] = { out, (char *)calls[kind], NULL };
        paired(plain, rew, &mp, &mr);
        printf("%s (median of 5, %s calls, rewritten): plain %.3f ns, instrumented %.3f ns "
               "(+%.3f ns); cost model %.2f ns\n", what[kind], calls[kind], mp, mr, mr - mp,
               model);
    }
}

static void
per_hit(const char *argcall)
{
    char out[4200];
    char *plain[] = { (char *)argcall, "100000000", NULL };
    double p[5], r[5], l[5];
    snprintf(out, sizeof(out), "%s.if", argcall);
    double model = rewrite(argcall, out, 3);
    char *rew[] = { out, "100000000", NULL };
    for (int i = 0; i < 5; i++) {
        p[i] = ns_per_call(plain);
        r[i] = ns_per_call(rew);
        l[i] = live_ns(plain);
    }
    double mp = median(p, 5), mr = median(r, 5), ml = median(l, 5);
    printf("if (arg1 > 10) counter++ at an entry (median of 5, 100M calls): plain %.3f ns, "
           "rewritten %.3f ns (+%.3f ns), live %.3f ns (+%.3f ns); cost model %.2f ns "
           "rewritten\n", mp, mr, mr - mp, ml, ml - mp, model);
}

/* PYTHON running a loop of calls for two minutes at most, given a second to start. */
static pid_t
start_python(const char *python)
{
    pid_t p = fork();
    if (p == 0) {
        execl(python, python, "-c",
              "import time\nt=time.time()\ndef f(x): return x+1\ns=0\n"
              "while time.time()-t < 120:\n    for i in range(10000): s=f(s)\n", (char *)NULL);
        _exit(127);
    }
    sleep(1);
    return p;
}

static void
insert_10k(const char *python)
{
    pid_t p = start_python(python);
    double stopped[5];
    int npts = 0, rounds = getenv("QPT_BENCH_ROUNDS") ? atoi(getenv("QPT_BENCH_ROUNDS")) : 5;
    rounds = rounds < 1 ? 1 : rounds > 5 ? 5 : rounds;
    for (int r = 0; r < rounds; r++) {
        char why[512];
        qpt_space_t *s;
        if (qpt_attach(p, &s, why, sizeof(why)) < 0) {
            fprintf(stderr, "qpt-bench: attach: %s\n", why);
            break;
        }
        uint64_t words;
        qpt_alloc(s, 8 * 16384, &words);
        qpt_run(s); /* the points are chosen while it runs */
        qpt_snippet_t *sn = qpt_snippet_create();
        npts = 0;
        for (int kind = QPT_ENTRY; kind <= QPT_BLOCK && npts < 10000; kind += QPT_BLOCK - QPT_ENTRY)
            for (uint32_t i = 0; i < qpt_nprocs(s) && npts < 10000; i++) {
                qpt_point_t pt[64];
                size_t n;
                if (qpt_proc_refusal(s, i) != NULL || qpt_points(s, i, (uint32_t)kind, pt, 64, &n) < 0)
                    continue;
                /* Entries first; blocks after, skipping each entry block. */
                for (size_t k = kind == QPT_BLOCK ? 1 : 0; k < n && k < 64 && npts < 10000; k++) {
                    qpt_expr_t e = qpt_add_to(sn, words + 8 * (uint64_t)npts, qpt_const(sn, 1), 0);
                    if (qpt_insert(s, &pt[k], sn, e, NULL) == 0)
                        npts++;
                }
            }
        /* One stop: stop, commit, run. */
        double t0 = now();
        int rc = qpt_stop(s);
        if (rc == 0)
            rc = qpt_commit(s);
        qpt_run(s);
        stopped[r] = (now() - t0) * 1e3;
        if (rc < 0)
            fprintf(stderr, "qpt-bench: commit: %s\n", qpt_error(s));
        qpt_snippet_destroy(sn);
        qpt_close(s);
    }
    kill(p, SIGKILL);
    waitpid(p, NULL, 0);
    printf("%d points inserted into a live python3.11 in one stop: %.1f ms stopped (median of %d, "
           "stop + commit + run)\n", npts, median(stopped, rounds), rounds);
}

/* Stop S, add the metrics parsed (ADD) or remove the last one, commit, run: the ms
 * stopped (-1: failed). */
static double
steer_once(qpt_space_t *s, qm_set_t *set, int add)
{
    char why[1024] = "";
    double t0 = now();
    int rc = qpt_stop(s);
    if (rc == 0)
        rc = add ? qm_insert(set, s, NULL, NULL, why, sizeof(why))
                 : qm_remove(set, qm_count(set) - 1, s, why, sizeof(why));
    if (rc == 0 && (rc = qpt_commit(s)) < 0)
        snprintf(why, sizeof(why), "%s", qpt_error(s));
    qpt_run(s);
    double ms = (now() - t0) * 1e3;
    if (rc < 0)
        fprintf(stderr, "qpt-bench: steer: %s\n", why);
    if (!add)
        qm_release(set, s);
    return rc < 0 ? -1 : ms;
}

/*
 * Steering: a live python3.11 with 1,000 entry counters; one metric (count calls of a
 * procedure inside the interpreter's loop) added, then removed, 5 times: the ms stopped.
 */
static void
steer_1k(const char *python)
{
    pid_t p = start_python(python);
    char why[1024];
    qpt_space_t *s;
    if (qpt_attach(p, &s, why, sizeof(why)) < 0) {
        fprintf(stderr, "qpt-bench: attach: %s\n", why);
        kill(p, SIGKILL);
        waitpid(p, NULL, 0);
        return;
    }
    uint64_t words;
    qpt_alloc(s, 8 * 1024, &words);
    qpt_snippet_t *sn = qpt_snippet_create();
    int npts = 0;
    for (uint32_t i = 0; i < qpt_nprocs(s) && npts < 1000; i++) {
        qpt_point_t pt;
        size_t n;
        if (qpt_proc_refusal(s, i) != NULL || qpt_points(s, i, QPT_ENTRY, &pt, 1, &n) < 0)
            continue;
        if (qpt_insert(s, &pt, sn, qpt_add_to(sn, words + 8 * (uint64_t)npts, qpt_const(sn, 1), 0),
                       NULL) == 0)
            npts++;
    }
    qpt_snippet_destroy(sn);
    if (qpt_commit(s) < 0 || qpt_run(s) < 0) {
        fprintf(stderr, "qpt-bench: commit: %s\n", qpt_error(s));
        qpt_close(s);
        kill(p, SIGKILL);
        waitpid(p, NULL, 0);
        return;
    }
    const char *metric = "count calls(PyLong_FromLong) inside(PyEval_EvalCode)";
    qm_set_t *set = qm_new();
    double add[5], rem[5];
    int r = 0;
    for (; set != NULL && r < 5; r++) {
        if (qm_parse(metric, "bench", 1, &set, why, sizeof(why)) < 0
            || (add[r] = steer_once(s, set, 1)) < 0)
            break;
        usleep(100000);
        if ((rem[r] = steer_once(s, set, 0)) < 0)
            break;
    }
    if (r == 5)
        printf("steering a live python3.11 with %d points: '%s' added in %.1f ms, removed in "
               "%.1f ms stopped (medians of 5)\n", npts, metric, median(add, 5), median(rem, 5));
    qm_free(set);
    qpt_close(s);
    kill(p, SIGKILL);
    waitpid(p, NULL, 0);
}

/* The same predicate as a bpftrace uprobe (the comparison), when bpftrace runs
 * here: ns per call of ARGCALL under it, 1M calls, median of 3. */
static void
bpftrace_hit(const char *argcall)
{
    if (system("command -v bpftrace >/dev/null 2>&1") != 0) {
        printf("bpftrace: not installed, no comparison\n");
        return;
    }
    double v[3];
    int ok = 0;
    for (int r = 0; r < 3; r++) {
        char cmd[9000], line[256];
        snprintf(cmd, sizeof(cmd), "timeout 120 bpftrace -e 'uprobe:%s:f /arg0 > 10/ "
                 "{ @c = count(); }' -c '%s 1000000' 2>/dev/null", argcall, argcall);
        FILE *f = popen(cmd, "r");
        v[r] = -1;
        while (f != NULL && fgets(line, sizeof(line), f) != NULL)
            if (strstr(line, "ns/call") != NULL)
                v[r] = atof(line);
        if (f != NULL)
            pclose(f);
        ok += v[r] > 0;
    }
    char *plain[] = { (char *)argcall, "1000000", NULL };
    double p[3];
    for (int r = 0; r < 3; r++)
        p[r] = ns_per_call(plain);
    if (ok < 3) {
        printf("bpftrace: the uprobe did not run here, no comparison\n");
        return;
    }
    double mb = median(v, 3), mp = median(p, 3);
    printf("if (arg1 > 10) count as a bpftrace uprobe (median of 3, 1M calls): plain %.3f ns, "
           "bpftrace %.1f ns (+%.1f ns per call)\n", mp, mb, mb - mp);
}

int
main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: qpt-bench ARGCALL [PYTHON]\n");
        return 2;
    }
    if (strcmp(argv[1], "-") != 0) {
        per_hit(argv[1]);
        per_thread(argv[1]);
        per_metric(argv[1]);
        bpftrace_hit(argv[1]);
    }
    if (argc > 2) {
        insert_10k(argv[2]);
        steer_1k(argv[2]);
    }
    return 0;
}
