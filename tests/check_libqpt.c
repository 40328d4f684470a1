/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Unit tests of libqpt's public face (include/qpt/qpt.h) on tests/qpt/api_prog: the
 * same snippets - a conditional counter and a sum of arguments at an entry, a sum of
 * return values at the exits, counters after the calls of one procedure, a counter per
 * block of a loop - inserted into the file (rewritten, run, its profile read) and into
 * the live process (spawned, committed, run, its memory read), with exact expected
 * values; and the errors a mutator gets (a snippet that does not fit its point, an
 * incomplete snippet, a file's memory).
 */
#include "config.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "include/qpt/qpt.h"
#include "include/qpt/qpt_rewrite.h"

#define PROG "tests/qpt/api_prog"
#define N 20 /* work(i) for i < N */

/* Words: [0] calls of work with i > 10, [1] sum of i, [2] sum of returns, [3] returns
 * of main's calls of work, [4..] one counter per block of loop. */
enum { W_BIG, W_SUM, W_RET, W_AFTER, W_BLOCKS };
#define NWORDS 32

/* The handles of the block insertions of the last instrument(). */
static qpt_handle_t block_h[NWORDS];
static int block_refused[NWORDS]; /* live: a block too short for the 5-byte jump */

/* Insert the test's snippets into S, whose words are at VARS; *NB: loop's blocks. */
static void
instrument(qpt_space_t *s, uint64_t vars, size_t *nb)
{
    uint32_t work, loop, mainp;
    ck_assert_int_eq(qpt_proc_find(s, "work", &work), 0);
    ck_assert_int_eq(qpt_proc_find(s, "loop", &loop), 0);
    ck_assert_int_eq(qpt_proc_find(s, "main", &mainp), 0);
    qpt_point_t pt[64];
    size_t n;

    /* work's entry: two snippets at one point. */
    ck_assert_int_eq(qpt_points(s, work, QPT_ENTRY, pt, 64, &n), 0);
    ck_assert_uint_eq(n, 1);
    qpt_snippet_t *a = qpt_snippet_create();
    qpt_expr_t big = qpt_if(a, qpt_op(a, QPT_GT, qpt_arg(a, 0), qpt_const(a, 10)),
                            qpt_add_to(a, vars + 8 * W_BIG, qpt_const(a, 1), 0), QPT_NONE);
    ck_assert_int_eq(qpt_insert(s, &pt[0], a, big, NULL), 0);
    qpt_snippet_t *b = qpt_snippet_create();
    qpt_expr_t sum = qpt_add_to(b, vars + 8 * W_SUM, qpt_arg(b, 0), 0);
    ck_assert_int_eq(qpt_insert(s, &pt[0], b, sum, NULL), 0);

    /* work's exits: the return values. */
    ck_assert_int_eq(qpt_points(s, work, QPT_EXIT, pt, 64, &n), 0);
    ck_assert_uint_ge(n, 1);
    qpt_snippet_t *c = qpt_snippet_create();
    qpt_expr_t ret = qpt_add_to(c, vars + 8 * W_RET, qpt_retval(c), 0);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(qpt_insert(s, &pt[i], c, ret, NULL), 0);

    /* After main's calls of work. */
    ck_assert_int_eq(qpt_points(s, mainp, QPT_AFTER_CALL, pt, 64, &n), 0);
    qpt_snippet_t *d = qpt_snippet_create();
    qpt_expr_t after = qpt_add_to(d, vars + 8 * W_AFTER, qpt_const(d, 1), 0);
    size_t sites = 0;
    for (size_t i = 0; i < n; i++)
        if (qpt_point_callee(s, &pt[i]) == qpt_proc_entry(s, work)) {
            ck_assert_int_eq(qpt_insert(s, &pt[i], d, after, NULL), 0);
            sites++;
        }
    ck_assert_uint_ge(sites, 1);

    /* Every block of loop. */
    ck_assert_int_eq(qpt_points(s, loop, QPT_BLOCK, pt, 64, nb), 0);
    ck_assert_uint_le(*nb, NWORDS - W_BLOCKS);
    for (size_t i = 0; i < *nb; i++) {
        qpt_snippet_t *e = qpt_snippet_create();
        qpt_expr_t inc = qpt_add_to(e, vars + 8 * (W_BLOCKS + i), qpt_const(e, 1), 0);
        int rc = qpt_insert(s, &pt[i], e, inc, &block_h[i]);
        /* Live, a block shorter than the 5-byte jump is refused here, with its reason. */
        block_refused[i] = rc != 0;
        if (rc != 0)
            ck_assert_msg(qpt_is_live(s) && rc == QPT_EUNSUPP
                          && strstr(qpt_error(s), "5-byte") != NULL, "block %zu: %s", i,
                          qpt_error(s));
        qpt_snippet_destroy(e);
    }
    qpt_snippet_destroy(a);
    qpt_snippet_destroy(b);
    qpt_snippet_destroy(c);
    qpt_snippet_destroy(d);
}

static void
check_words(const uint64_t *w, size_t nb)
{
    uint64_t sum = 0, big = 0, max = 0;
    for (int i = 0; i < N; i++) {
        sum += (uint64_t)i;
        big += i > 10;
    }
    ck_assert_uint_eq(w[W_BIG], big);
    ck_assert_uint_eq(w[W_SUM], sum);
    ck_assert_uint_eq(w[W_RET], 3 * sum);
    ck_assert_uint_eq(w[W_AFTER], N);
    int refused = 0;
    for (size_t i = 0; i < nb; i++) {
        refused |= block_refused[i];
        if (!block_refused[i])
            max = w[W_BLOCKS + i] > max ? w[W_BLOCKS + i] : max;
    }
    if (refused)
        ck_assert_uint_le(max, 7);
    else
        ck_assert_uint_eq(max, 7); /* the loop body: loop(7) */
}

#ifdef ENABLE_DYNAMIC_TESTS
/* api_prog N, spawned stopped; NULL when ptrace is not allowed here (the test passes). */
static qpt_space_t *
spawn_prog(void)
{
    char why[512] = "", n[16];
    snprintf(n, sizeof(n), "%d", N);
    char *argv[] = { PROG, n, NULL };
    qpt_space_t *s = NULL;
    int rc = qpt_spawn(argv, &s, why, sizeof(why));
    if (rc == QPT_EIO && strstr(why, "ermission") != NULL)
        return NULL;
    ck_assert_msg(rc == 0, "%s", why);
    return s;
}

/* qpt_call_now right after qpt_spawn (nothing loaded yet): refused, as qpt(3) says. */
START_TEST(test_libqpt_call_before_start)
{
    qpt_space_t *s = spawn_prog();
    if (s == NULL)
        return;
    uint32_t work;
    ck_assert_int_eq(qpt_proc_find(s, "work", &work), 0);
    uint64_t a = 1, r = 0;
    ck_assert_int_eq(qpt_call_now(s, qpt_proc_entry(s, work), &a, 1, &r), QPT_EINVAL);
    ck_assert_str_eq(qpt_error(s), "the process has not started: qpt_run it (and qpt_stop) "
                                   "before qpt_call_now");
    qpt_kill(s);
}
END_TEST

/* Let S run to its end; its wait status. */
static int
run_to_end(qpt_space_t *s)
{
    ck_assert_int_eq(qpt_run(s), 0);
    int st;
    while (qpt_ended(s, &st) == 0) {
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    return st;
}
#endif

#ifdef ENABLE_DYNAMIC_TESTS
/* A shared library's space (qpt_library): libc's printf, called once by api_prog, counted
 * exactly; committed and read through the executable's space; errors. */
START_TEST(test_libqpt_library)
{
    char why[512] = "";
    qpt_space_t *f = NULL, *l = NULL, *l2 = NULL;
    ck_assert_msg(qpt_open(PROG, &f, why, sizeof(why)) == 0, "%s", why);
    ck_assert_int_eq(qpt_library(f, "libc.so*", &l, why, sizeof(why)), QPT_EUNSUPP);
    qpt_close(f);
    qpt_space_t *s = spawn_prog();
    if (s == NULL)
        return;
    ck_assert_int_eq(qpt_library(s, "libnope.so", &l, why, sizeof(why)), QPT_ENOTFOUND);
    ck_assert_msg(strstr(why, "libc.so.6") != NULL, "%s", why); /* the ones loaded */
    ck_assert_msg(qpt_library(s, "libc.so*", &l, why, sizeof(why)) == 0, "%s", why);
    ck_assert_int_eq(qpt_library(s, "libc.so.6", &l2, why, sizeof(why)), 0);
    ck_assert_ptr_eq(l, l2); /* the same library: the same space */
    ck_assert_int_eq(qpt_is_live(l), 1);
    uint64_t addr, size, var;
    uint32_t p = UINT32_MAX;
    ck_assert_int_eq(qpt_symbol(l, "printf", &addr, &size), 0);
    for (uint32_t i = 0; i < qpt_nprocs(l); i++)
        if (qpt_proc_entry(l, i) == addr)
            p = i;
    ck_assert_uint_ne(p, UINT32_MAX);
    ck_assert_msg(qpt_alloc(l, 8, &var) == 0, "%s", qpt_error(l));
    qpt_point_t pt;
    size_t n;
    ck_assert_int_eq(qpt_points(l, p, QPT_ENTRY, &pt, 1, &n), 0);
    ck_assert_uint_eq(n, 1);
    qpt_snippet_t *sn = qpt_snippet_create();
    qpt_handle_t h;
    ck_assert_msg(qpt_insert(l, &pt, sn, qpt_add_to(sn, var, qpt_const(sn, 1), 1), &h) == 0,
                  "%s", qpt_error(l));
    qpt_snippet_destroy(sn);
    ck_assert_msg(qpt_commit(s) == 0, "%s", qpt_error(s)); /* commits the library's too */
    ck_assert_int_eq(run_to_end(s), 0);
    uint64_t calls = 0;
    ck_assert_int_eq(qpt_read_memory(s, var, &calls, 8), 0); /* the library's variable */
    ck_assert_uint_eq(calls, 1);
    qpt_close(s); /* closes L too */
}
END_TEST
#endif

/* Time histograms: buckets fold in pairs as time runs past the last, nothing is lost. */
START_TEST(test_libqpt_hist)
{
    qpt_hist_t *h;
    ck_assert_int_eq(qpt_hist_create(2, 3, 1.0, 10.0, &h), QPT_EINVAL); /* odd */
    ck_assert_int_eq(qpt_hist_create(2, 4, 1.0, 10.0, &h), 0);
    uint64_t t[2] = { 1, 10 };
    qpt_hist_add(h, 10.5, t); /* bucket 0 */
    t[0] = 3;
    qpt_hist_add(h, 11.5, t); /* bucket 1: +2 */
    t[0] = 6;
    t[1] = 40;
    qpt_hist_add(h, 13.5, t); /* bucket 3: +3, +30 */
    ck_assert_uint_eq(qpt_hist_used(h), 4);
    t[0] = 10;
    qpt_hist_add(h, 14.5, t); /* past the end: fold to 2 s buckets, then bucket 2: +4 */
    ck_assert(qpt_hist_width(h) == 2.0);
    ck_assert_uint_eq(qpt_hist_used(h), 3);
    ck_assert_uint_eq(qpt_hist_get(h, 0, 0), 3);
    ck_assert_uint_eq(qpt_hist_get(h, 0, 1), 3);
    ck_assert_uint_eq(qpt_hist_get(h, 0, 2), 4);
    ck_assert_uint_eq(qpt_hist_get(h, 1, 0), 10);
    ck_assert_uint_eq(qpt_hist_get(h, 1, 1), 30);
    t[0] = 12;
    qpt_hist_add(h, 40.0, t); /* far past: folds until it fits (8 s buckets: 30 s in) */
    ck_assert(qpt_hist_width(h) == 8.0);
    uint64_t sum = 0;
    for (size_t b = 0; b < qpt_hist_used(h); b++)
        sum += qpt_hist_get(h, 0, b);
    ck_assert_uint_eq(sum, 12);
    qpt_hist_add(h, 5.0, t); /* before the start: ignored */
    ck_assert_uint_eq(qpt_hist_get(h, 0, 9), 0); /* out of range: 0 */
    qpt_hist_destroy(h);
}
END_TEST

/* Library names: as the file is named, or as ldd names it (trailing versions off). */
START_TEST(test_libqpt_module_matches)
{
    ck_assert(qpt_module_matches("libc.so.6", "libc.so.6"));
    ck_assert(qpt_module_matches("libqv.so.0", "libqv.so.0.8.6"));
    ck_assert(qpt_module_matches("libqv.so", "libqv.so.0.8.6"));
    ck_assert(qpt_module_matches("libqv*", "libqv.so.0.8.6"));
    ck_assert(!qpt_module_matches("libqv.so.0.8", "libqv.so.0.9.1"));
    ck_assert(!qpt_module_matches("libq", "libqv.so.0"));
    ck_assert(!qpt_module_matches("libfoo.so.1", "libfoo.so.1x"));
    ck_assert(!qpt_module_matches(NULL, "libc.so.6"));
    ck_assert_int_eq(qpt_set_analysis_threads(17), QPT_EINVAL);
    ck_assert_int_eq(qpt_set_analysis_threads(0), 0);
}
END_TEST

START_TEST(test_libqpt_file)
{
    char why[512] = "";
    qpt_space_t *s = NULL;
    ck_assert_msg(qpt_open(PROG, &s, why, sizeof(why)) == 0, "%s", why);
    ck_assert_int_eq(qpt_is_live(s), 0);
    uint64_t vars;
    ck_assert_int_eq(qpt_alloc(s, 8 * NWORDS, &vars), 0);
    size_t nb;
    instrument(s, vars, &nb);
    const char *out = "tests/qpt/api_prog.inst";
    unlink("tests/qpt/api_prog.inst.qp");
    ck_assert_msg(qpt_write(s, out) == 0, "%s", qpt_error(s));
    /* The rewritten program prints what the original prints. */
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "%s %d > tests/qpt/orig.out && %s %d > tests/qpt/inst.out && "
             "cmp -s tests/qpt/orig.out tests/qpt/inst.out", PROG, N, out, N);
    ck_assert_int_eq(system(cmd), 0);
    uint64_t w[NWORDS];
    ck_assert_msg(qpt_profile_read("tests/qpt/api_prog.inst.qp", vars, w, NWORDS, why,
                                   sizeof(why)) == 0, "%s", why);
    check_words(w, nb);
    /* A second run adds to the profile. */
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(qpt_profile_read("tests/qpt/api_prog.inst.qp", vars, w, NWORDS, why,
                                      sizeof(why)), 0);
    ck_assert_uint_eq(w[W_SUM], 2 * (N * (N - 1) / 2));
    qpt_close(s);
}
END_TEST

/* The rewrite engine's options and failures (its outputs: tests/rewrite-engine.sh). */
static void
count_line(void *arg, const char *line)
{
    (void)line;
    ++*(int *)arg;
}

START_TEST(test_libqpt_rewrite_engine)
{
    qpt_rewrite_t *r = NULL;
    ck_assert_int_eq(qpt_rewrite_create(&r), 0);
    ck_assert_str_eq(qpt_rewrite_error(r), "");
    ck_assert_int_eq(qpt_rewrite_set_driver(r, "bogus"), QPT_EINVAL);
    ck_assert_ptr_nonnull(strstr(qpt_rewrite_error(r), "unknown driver 'bogus'"));
    ck_assert_int_eq(qpt_rewrite_set(r, QPT_RW_THREADS, 0), QPT_EINVAL);
    ck_assert_int_eq(qpt_rewrite_set(r, QPT_RW_THREADS, 17), QPT_EINVAL);
    ck_assert_int_eq(qpt_rewrite_set(r, QPT_RW_ATOMIC, 2), QPT_EINVAL);
    ck_assert_int_eq(qpt_rewrite_set(r, 999, 1), QPT_EINVAL);
    ck_assert_int_eq(qpt_rewrite_set(r, QPT_RW_THREADS, 2), 0);
    /* A missing input: one line naming it, nothing written. */
    ck_assert_int_lt(qpt_rewrite_run(r, "tests/qpt/no-such-program", "tests/qpt/x.out"), 0);
    ck_assert_ptr_nonnull(strstr(qpt_rewrite_error(r), "tests/qpt/no-such-program: "));
    ck_assert_int_ne(access("tests/qpt/x.out", F_OK), 0);
    /* --weights from a file that is not a profile: refused before anything is written. */
    ck_assert_int_eq(qpt_rewrite_set_weights(r, PROG), 0);
    ck_assert_int_lt(qpt_rewrite_run(r, PROG, "tests/qpt/x.out"), 0);
    ck_assert_ptr_nonnull(strstr(qpt_rewrite_error(r), "--weights "));
    ck_assert_int_ne(access("tests/qpt/x.out", F_OK), 0);
    ck_assert_int_eq(qpt_rewrite_set_weights(r, NULL), 0);
    /* A rewrite: its lines through the hook, its counts in the summary. */
    int lines = 0;
    qpt_rewrite_on_message(r, count_line, &lines);
    ck_assert_msg(qpt_rewrite_run(r, PROG, "tests/qpt/x.out") == 0, "%s", qpt_rewrite_error(r));
    qpt_rewrite_summary_t sum;
    ck_assert_int_eq(qpt_rewrite_summary(r, &sum), 0);
    ck_assert_uint_gt(sum.relocated, 0);
    ck_assert_uint_gt(sum.measured, 0);
    ck_assert_uint_gt(sum.counters, 0);
    ck_assert_uint_gt(sum.output_size, sum.input_size);
    ck_assert_int_ge(lines, 2);
    /* The dump of a procedure that does not exist. */
    ck_assert_int_eq(qpt_rewrite_dump_cfg(r, PROG, QPT_DUMP_DOT, "no_such_proc", NULL, NULL),
                     QPT_EINVAL);
    ck_assert_int_eq(qpt_rewrite_dump_cfg(r, PROG, QPT_DUMP_DOT, "no_such_proc", count_line,
                                          &lines), QPT_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(qpt_rewrite_error(r), "no procedure named 'no_such_proc'"));
    unlink("tests/qpt/x.out");
    qpt_rewrite_destroy(r);
}
END_TEST

#ifdef ENABLE_DYNAMIC_TESTS
START_TEST(test_libqpt_live)
{
    char why[512] = "", file[] = "tests/qpt/live.done", n[16];
    unlink(file);
    snprintf(n, sizeof(n), "%d", N);
    char *argv[] = { PROG, n, "wait", file, NULL };
    qpt_space_t *s = NULL;
    int rc = qpt_spawn(argv, &s, why, sizeof(why));
    if (rc == QPT_EIO && strstr(why, "ermission") != NULL)
        return; /* ptrace not allowed here */
    ck_assert_msg(rc == 0, "%s", why);
    ck_assert_int_eq(qpt_is_live(s), 1);
    uint64_t vars;
    ck_assert_msg(qpt_alloc(s, 8 * NWORDS, &vars) == 0, "%s", qpt_error(s));
    size_t nb;
    instrument(s, vars, &nb);
    ck_assert_msg(qpt_commit(s) == 0, "%s", qpt_error(s));
    ck_assert_int_eq(qpt_run(s), 0);
    struct stat st;
    for (int i = 0; i < 500 && stat(file, &st) != 0; i++) {
        struct timespec ts = { 0, 10000000 };
        nanosleep(&ts, NULL);
    }
    ck_assert_int_eq(stat(file, &st), 0);
    ck_assert_int_eq(qpt_stop(s), 0);
    uint64_t w[NWORDS];
    ck_assert_int_eq(qpt_read_memory(s, vars, w, sizeof(w)), 0);
    check_words(w, nb);
    /* One-time calls of the program's procedures: six arguments; printf of a double
     * (vector registers, stack alignment); work, whose snippets count the call too. */
    uint32_t six, fmt, work;
    ck_assert_int_eq(qpt_proc_find(s, "six", &six), 0);
    ck_assert_int_eq(qpt_proc_find(s, "fmt", &fmt), 0);
    ck_assert_int_eq(qpt_proc_find(s, "work", &work), 0);
    uint64_t args[6] = { 1, 2, 3, 4, 5, 6 }, r = 0;
    ck_assert_msg(qpt_call_now(s, qpt_proc_entry(s, six), args, 6, &r) == 0, "%s",
                  qpt_error(s));
    ck_assert_uint_eq(r, 91);
    args[0] = 5;
    ck_assert_msg(qpt_call_now(s, qpt_proc_entry(s, fmt), args, 1, &r) == 0, "%s",
                  qpt_error(s));
    ck_assert_uint_eq(r, 5); /* "2.500" */
    args[0] = 1000;
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(qpt_call_now(s, qpt_proc_entry(s, work), args, 1, &r) == 0, "%s",
                      qpt_error(s));
        ck_assert_uint_eq(r, 3000);
    }
    uint64_t w2[NWORDS];
    ck_assert_int_eq(qpt_read_memory(s, vars, w2, sizeof(w2)), 0);
    ck_assert_uint_eq(w2[W_SUM], w[W_SUM] + 3000);
    ck_assert_uint_eq(w2[W_BIG], w[W_BIG] + 3);
    /* A program variable by name: sink, the sum of work's arguments. */
    uint64_t sink_addr, sink_size, sink = 0;
    ck_assert_int_eq(qpt_symbol(s, "sink", &sink_addr, &sink_size), 0);
    ck_assert_uint_eq(sink_size, 8);
    ck_assert_int_eq(qpt_read_memory(s, sink_addr, &sink, 8), 0);
    ck_assert_uint_eq(sink, (uint64_t)N * (N - 1) / 2 + 3000);
    ck_assert_int_eq(qpt_symbol(s, "no_such_symbol", &sink_addr, NULL), QPT_ENOTFOUND);
    /* Everything out, and back in. */
    ck_assert_msg(qpt_set_active(s, 0) == 0, "%s", qpt_error(s));
    ck_assert_int_eq(qpt_call_now(s, qpt_proc_entry(s, work), args, 1, &r), 0);
    ck_assert_int_eq(qpt_read_memory(s, vars, w, sizeof(w)), 0);
    ck_assert_uint_eq(w[W_SUM], w2[W_SUM]); /* not counted */
    ck_assert_msg(qpt_set_active(s, 1) == 0, "%s", qpt_error(s));
    ck_assert_int_eq(qpt_call_now(s, qpt_proc_entry(s, work), args, 1, &r), 0);
    ck_assert_int_eq(qpt_read_memory(s, vars, w, sizeof(w)), 0);
    ck_assert_uint_eq(w[W_SUM], w2[W_SUM] + 1000);
    /* Memory freed only once no snippet uses it. */
    uint64_t extra;
    ck_assert_int_eq(qpt_alloc(s, 8, &extra), 0);
    qpt_point_t ept;
    size_t ne;
    ck_assert_int_eq(qpt_points(s, work, QPT_ENTRY, &ept, 1, &ne), 0);
    qpt_snippet_t *sn = qpt_snippet_create();
    qpt_handle_t eh;
    ck_assert_int_eq(qpt_insert(s, &ept, sn, qpt_add_to(sn, extra, qpt_const(sn, 1), 0), &eh), 0);
    qpt_snippet_destroy(sn);
    ck_assert_msg(qpt_commit(s) == 0, "%s", qpt_error(s));
    ck_assert_int_eq(qpt_call_now(s, qpt_proc_entry(s, work), args, 1, &r), 0);
    uint64_t one = 0;
    ck_assert_int_eq(qpt_read_memory(s, extra, &one, 8), 0);
    ck_assert_uint_eq(one, 1);
    ck_assert_int_eq(qpt_free(s, extra), QPT_EINVAL);
    ck_assert_msg(strstr(qpt_error(s), "uses it") != NULL, "%s", qpt_error(s));
    ck_assert_int_eq(qpt_remove(s, eh), 0);
    ck_assert_int_eq(qpt_free(s, extra), QPT_EINVAL); /* still in the process */
    ck_assert_msg(qpt_commit(s) == 0, "%s", qpt_error(s));
    ck_assert_msg(qpt_free(s, extra) == 0, "%s", qpt_error(s));
    ck_assert_int_eq(qpt_free(s, extra), QPT_EINVAL);
    /* The process goes on as before the calls. */
    ck_assert_int_eq(qpt_run(s), 0);
    ck_assert_int_eq(qpt_stop(s), 0);
    /* Remove one insertion live: the sum stops, the conditional counter goes on. */
    ck_assert_int_eq(qpt_remove(s, 1), 0);
    ck_assert_msg(qpt_commit(s) == 0, "%s", qpt_error(s));
    int pid = qpt_pid(s);
    ck_assert_int_gt(pid, 0);
    qpt_close(s); /* takes everything out, lets it run */
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}
END_TEST
#endif

#ifdef ENABLE_DYNAMIC_TESTS
static int
wait_file(const char *path, int ms)
{
    struct stat st;
    for (int i = 0; i < ms / 10 && stat(path, &st) != 0; i++) {
        struct timespec ts = { 0, 10000000 };
        nanosleep(&ts, NULL);
    }
    return stat(path, &st);
}

/* A mutator killed during a one-time call: the thread finishes the call and goes on. */
START_TEST(test_libqpt_call_killed)
{
    const char *file = "tests/qpt/killed.done", *called = "tests/qpt/killed.done.called";
    unlink(file);
    unlink(called);
    pid_t target = fork();
    if (target == 0) {
        execl(PROG, PROG, "20", "wait", file, (char *)NULL);
        _exit(127);
    }
    ck_assert_int_eq(wait_file(file, 5000), 0);
    pid_t mutator = fork();
    if (mutator == 0) {
        char why[512];
        qpt_space_t *s;
        uint32_t slow;
        uint64_t ms = 400, r;
        if (qpt_attach(target, &s, why, sizeof(why)) < 0)
            _exit(strstr(why, "ermission") ? 3 : 1);
        if (qpt_proc_find(s, "slow", &slow) < 0)
            _exit(1);
        qpt_call_now(s, qpt_proc_entry(s, slow), &ms, 1, &r);
        _exit(2); /* killed before this */
    }
    struct timespec ts = { 0, 150000000 };
    nanosleep(&ts, NULL);
    int st;
    pid_t done = waitpid(mutator, &st, WNOHANG);
    if (done == mutator && WIFEXITED(st) && WEXITSTATUS(st) == 3) {
        kill(target, SIGKILL);
        waitpid(target, NULL, 0);
        return; /* ptrace not allowed here */
    }
    ck_assert_int_eq(done, 0); /* still in the call */
    kill(mutator, SIGKILL);
    waitpid(mutator, NULL, 0);
    /* The call ends on its own; the process lives on, sane enough to be called again. */
    ck_assert_int_eq(wait_file(called, 5000), 0);
    ck_assert_int_eq(waitpid(target, &st, WNOHANG), 0);
    char why[512];
    qpt_space_t *s;
    ck_assert_msg(qpt_attach(target, &s, why, sizeof(why)) == 0, "%s", why);
    uint32_t work;
    uint64_t a = 7, r = 0;
    ck_assert_int_eq(qpt_proc_find(s, "work", &work), 0);
    ck_assert_msg(qpt_call_now(s, qpt_proc_entry(s, work), &a, 1, &r) == 0, "%s",
                  qpt_error(s));
    ck_assert_uint_eq(r, 21);
    qpt_close(s);
    ck_assert_int_eq(waitpid(target, &st, WNOHANG), 0);
    kill(target, SIGKILL);
    waitpid(target, &st, 0);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL); /* not a crash before */
}
END_TEST

/*
 * A mutator that exits without qpt_close: its snippets come out (the point can be
 * patched again by the next one), unless it said qpt_keep_on_exit (then the next one
 * finds the code changed). The process runs on either way.
 */
static int
mutate_and_exit(pid_t target, int keep)
{
    pid_t m = fork();
    if (m == 0) {
        char why[512];
        qpt_space_t *s;
        uint32_t work;
        qpt_point_t pt;
        size_t n;
        uint64_t v;
        if (qpt_attach(target, &s, why, sizeof(why)) < 0)
            _exit(strstr(why, "ermission") ? 3 : 1);
        qpt_snippet_t *sn = qpt_snippet_create();
        if (qpt_proc_find(s, "work", &work) < 0 || qpt_points(s, work, QPT_ENTRY, &pt, 1, &n) < 0
            || qpt_alloc(s, 8, &v) < 0
            || qpt_insert(s, &pt, sn, qpt_add_to(sn, v, qpt_const(sn, 1), 0), NULL) < 0
            || qpt_commit(s) < 0 || qpt_run(s) < 0)
            _exit(1);
        if (keep)
            qpt_keep_on_exit(s, 1);
        exit(0); /* no qpt_close */
    }
    int st;
    waitpid(m, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

START_TEST(test_libqpt_exit_restores)
{
    const char *file = "tests/qpt/exit.done";
    unlink(file);
    pid_t target = fork();
    if (target == 0) {
        execl(PROG, PROG, "20", "wait", file, (char *)NULL);
        _exit(127);
    }
    ck_assert_int_eq(wait_file(file, 5000), 0);
    int rc = mutate_and_exit(target, 0);
    if (rc == 3) {
        kill(target, SIGKILL);
        waitpid(target, NULL, 0);
        return;
    }
    ck_assert_int_eq(rc, 0);
    /* Restored: a second mutator patches the same entry. */
    ck_assert_int_eq(mutate_and_exit(target, 1), 0);
    /* Kept: the entry's code differs from the file now, and the next commit says so. */
    char why[512];
    qpt_space_t *s;
    ck_assert_msg(qpt_attach(target, &s, why, sizeof(why)) == 0, "%s", why);
    uint32_t work;
    qpt_point_t pt;
    size_t n;
    uint64_t v;
    ck_assert_int_eq(qpt_proc_find(s, "work", &work), 0);
    ck_assert_int_eq(qpt_points(s, work, QPT_ENTRY, &pt, 1, &n), 0);
    ck_assert_int_eq(qpt_alloc(s, 8, &v), 0);
    qpt_snippet_t *sn = qpt_snippet_create();
    ck_assert_int_eq(qpt_insert(s, &pt, sn, qpt_add_to(sn, v, qpt_const(sn, 1), 0), NULL), 0);
    qpt_snippet_destroy(sn);
    ck_assert_int_lt(qpt_commit(s), 0);
    ck_assert_msg(strstr(qpt_error(s), "differs from the file") != NULL, "%s", qpt_error(s));
    /* The kept snippet still runs: a one-time call of work goes through it unharmed. */
    uint64_t a = 2, r = 0;
    ck_assert_msg(qpt_call_now(s, qpt_proc_entry(s, work), &a, 1, &r) == 0, "%s", qpt_error(s));
    ck_assert_uint_eq(r, 6);
    qpt_close(s);
    int st;
    ck_assert_int_eq(waitpid(target, &st, WNOHANG), 0);
    kill(target, SIGKILL);
    waitpid(target, &st, 0);
}
END_TEST

/* A target that dies before the commit: a clean error. */
START_TEST(test_libqpt_target_dies)
{
    char why[512] = "", n[16];
    snprintf(n, sizeof(n), "%d", N);
    char *argv[] = { PROG, n, "wait", "tests/qpt/dies.done", NULL };
    qpt_space_t *s = NULL;
    int rc = qpt_spawn(argv, &s, why, sizeof(why));
    if (rc == QPT_EIO && strstr(why, "ermission") != NULL)
        return;
    ck_assert_msg(rc == 0, "%s", why);
    uint32_t work;
    qpt_point_t pt;
    size_t np;
    uint64_t v;
    ck_assert_int_eq(qpt_alloc(s, 8, &v), 0);
    ck_assert_int_eq(qpt_proc_find(s, "work", &work), 0);
    ck_assert_int_eq(qpt_points(s, work, QPT_ENTRY, &pt, 1, &np), 0);
    qpt_snippet_t *sn = qpt_snippet_create();
    ck_assert_int_eq(qpt_insert(s, &pt, sn, qpt_add_to(sn, v, qpt_const(sn, 1), 0), NULL), 0);
    qpt_snippet_destroy(sn);
    kill(qpt_pid(s), SIGKILL);
    struct timespec ts = { 0, 50000000 };
    nanosleep(&ts, NULL);
    rc = qpt_commit(s);
    ck_assert_int_eq(rc, QPT_EEXITED);
    ck_assert_msg(strstr(qpt_error(s), "has exited (killed by signal 9") != NULL, "%s",
                  qpt_error(s));
    uint64_t a = 1, r;
    ck_assert_int_eq(qpt_call_now(s, qpt_proc_entry(s, work), &a, 1, &r), QPT_EEXITED);
    qpt_close(s);
}
END_TEST

/* Variables are shared with the process: exact after it ended. */
START_TEST(test_libqpt_live_exit)
{
    qpt_space_t *s = spawn_prog();
    if (s == NULL)
        return; /* ptrace not allowed here */
    uint64_t vars;
    ck_assert_int_eq(qpt_alloc(s, 8 * NWORDS, &vars), 0);
    uint32_t work;
    ck_assert_int_eq(qpt_proc_find(s, "work", &work), 0);
    qpt_point_t pt;
    size_t np;
    ck_assert_int_eq(qpt_points(s, work, QPT_ENTRY, &pt, 1, &np), 0);
    qpt_snippet_t *a = qpt_snippet_create();
    qpt_expr_t e = qpt_add_to(a, vars, qpt_arg(a, 0), 0);
    ck_assert_int_eq(qpt_insert(s, &pt, a, e, NULL), 0);
    qpt_snippet_destroy(a);
    ck_assert_msg(qpt_commit(s) == 0, "%s", qpt_error(s));
    ck_assert_int_eq(qpt_run(s), 0);
    int status = 0;
    for (int i = 0; i < 1000 && qpt_ended(s, &status) == 0; i++) {
        struct timespec ts = { 0, 5000000 };
        nanosleep(&ts, NULL);
    }
    ck_assert_int_eq(qpt_ended(s, &status), 1);
    uint64_t w;
    ck_assert_int_eq(qpt_read_memory(s, vars, &w, 8), 0);
    ck_assert_uint_eq(w, N * (N - 1) / 2);
    qpt_close(s);
}
END_TEST
#endif

START_TEST(test_libqpt_errors)
{
    char why[512] = "";
    qpt_space_t *s = NULL;
    ck_assert_int_ne(qpt_open("/nonexistent", &s, why, sizeof(why)), 0);
    ck_assert_ptr_null(s);
    ck_assert_ptr_nonnull(strstr(why, "/nonexistent"));
    /* Only public codes leave the library: a directory or an object file is not an ELF
     * executable (the core's QP_EDIR, QP_ENOTEXEC are not in the public enum). */
    ck_assert_int_eq(qpt_open("/", &s, why, sizeof(why)), QPT_ENOTELF);
    ck_assert_int_eq(qpt_open("runtime/qprt.o", &s, why, sizeof(why)),
                     QPT_ENOTELF);
    /* One version: the header's, the library's and the package's. */
    ck_assert_str_eq(qpt_version(), QPT_VERSION_STRING);
    ck_assert_str_eq(qpt_version(), PACKAGE_VERSION);
    ck_assert_int_eq(qpt_open(PROG, &s, why, sizeof(why)), 0);
    uint32_t work;
    ck_assert_int_eq(qpt_proc_find(s, "work", &work), 0);
    ck_assert_int_eq(qpt_proc_find(s, "no such thing", &work), QPT_ENOTFOUND);
    ck_assert_int_eq(qpt_proc_find(s, "work", &work), 0);
    qpt_point_t pt[8];
    size_t n;
    ck_assert_int_eq(qpt_points(s, work, QPT_EXIT, pt, 8, &n), 0);
    /* An argument where there is none: refused, the node named. */
    qpt_snippet_t *a = qpt_snippet_create();
    qpt_expr_t e = qpt_store(a, 0x1000, 8, qpt_arg(a, 0));
    ck_assert_int_eq(qpt_insert(s, &pt[0], a, e, NULL), QPT_EINVAL);
    ck_assert_ptr_nonnull(strstr(qpt_error(s), "argument"));
    /* An incomplete snippet (a builder given QPT_NONE). */
    qpt_expr_t bad = qpt_op(a, QPT_ADD, QPT_NONE, qpt_const(a, 1));
    ck_assert_uint_eq(bad, QPT_NONE);
    ck_assert_int_eq(qpt_insert(s, &pt[0], a, e, NULL), QPT_EINVAL);
    ck_assert_ptr_nonnull(strstr(qpt_error(s), "incomplete"));
    /* A file has no memory to read; commit is for processes. */
    uint64_t w;
    ck_assert_int_eq(qpt_read_memory(s, 0x1000, &w, 8), QPT_EUNSUPP);
    ck_assert_int_eq(qpt_commit(s), QPT_EUNSUPP);
    /* Words: multiples of 8 only. */
    uint64_t at;
    ck_assert_int_eq(qpt_alloc(s, 12, &at), QPT_EINVAL);
    /* Per-CPU words are a process's; an offset beyond a CPU's copy is refused. */
    qpt_cpu_var_t cv;
    ck_assert_int_eq(qpt_alloc_per_cpu(s, 8, &cv), QPT_EUNSUPP);
    ck_assert_ptr_nonnull(strstr(qpt_error(s), "process"));
    ck_assert_int_eq(qpt_alloc_per_cpu(s, 12, &cv), QPT_EINVAL);
    cv = (qpt_cpu_var_t) { 0x10000, 64, 2, 2336 };
    qpt_snippet_t *c = qpt_snippet_create();
    ck_assert_uint_ne(qpt_add_to_cpu(c, &cv, 56, qpt_const(c, 1)), QPT_NONE);
    ck_assert_uint_eq(qpt_add_to_cpu(c, &cv, 64, qpt_const(c, 1)), QPT_NONE);
    qpt_snippet_destroy(c);
    qpt_snippet_destroy(a);
    qpt_close(s);
}
END_TEST

/*****************************************************************************
 * Order at a point: qpt_insert appends, qpt_insert_first prepends
 */

/* v = v * 10 + D at work's entry, for D = 1 (insert), 2 (first), 3 (insert). */
static uint64_t
order_instrument(qpt_space_t *s)
{
    uint64_t v;
    uint32_t work;
    qpt_point_t pt;
    size_t n;
    ck_assert_int_eq(qpt_alloc(s, 8, &v), 0);
    ck_assert_int_eq(qpt_proc_find(s, "work", &work), 0);
    ck_assert_int_eq(qpt_points(s, work, QPT_ENTRY, &pt, 1, &n), 0);
    qpt_snippet_t *sn = qpt_snippet_create();
    for (int d = 1; d <= 3; d++) {
        qpt_expr_t e = qpt_store(sn, v, 8, qpt_op(sn, QPT_ADD, qpt_op(sn, QPT_MUL, qpt_load(sn, v, 8),
                                                                   qpt_const(sn, 10)),
                                                qpt_const(sn, d)));
        int rc = d == 2 ? qpt_insert_first(s, &pt, sn, e, NULL) : qpt_insert(s, &pt, sn, e, NULL);
        ck_assert_msg(rc == 0, "%s", qpt_error(s));
    }
    qpt_snippet_destroy(sn);
    return v;
}

#ifdef ENABLE_DYNAMIC_TESTS
static uint64_t
order_expected(int calls)
{
    uint64_t v = 0;
    for (int i = 0; i < calls; i++)
        v = ((v * 10 + 2) * 10 + 1) * 10 + 3;
    return v;
}
#endif

/* A snippet that calls a procedure of the program: six(1..6) = 91 at each of work's
 * calls, added up. */
static uint64_t
call_instrument(qpt_space_t *s)
{
    uint64_t v;
    uint32_t work, six;
    qpt_point_t pt;
    size_t n;
    ck_assert_int_eq(qpt_alloc(s, 8, &v), 0);
    ck_assert_int_eq(qpt_proc_find(s, "work", &work), 0);
    ck_assert_int_eq(qpt_proc_find(s, "six", &six), 0);
    ck_assert_int_eq(qpt_points(s, work, QPT_ENTRY, &pt, 1, &n), 0);
    qpt_snippet_t *sn = qpt_snippet_create();
    qpt_expr_t a[6];
    for (int i = 0; i < 6; i++)
        a[i] = qpt_const(sn, i + 1);
    qpt_expr_t e = qpt_add_to(sn, v, qpt_call(sn, qpt_proc_entry(s, six), a, 6), 0);
    ck_assert_msg(qpt_insert(s, &pt, sn, e, NULL) == 0, "%s", qpt_error(s));
    qpt_snippet_destroy(sn);
    return v;
}

/* A thread-local variable of the program read by a snippet: tcalls (work's calls in the
 * thread) at loop's entry, after the N calls. */
static uint64_t
tls_instrument(qpt_space_t *s)
{
    uint64_t v, a;
    int64_t off;
    uint32_t loop;
    qpt_point_t pt;
    size_t n;
    ck_assert_int_eq(qpt_symbol(s, "tcalls", &a, NULL), QPT_EUNSUPP);
    ck_assert_int_eq(qpt_tls_offset(s, "tcalls", &off), 0);
    ck_assert_int_eq(qpt_tls_offset(s, "sink", &off), QPT_ENOTFOUND);
    ck_assert_int_eq(qpt_tls_offset(s, "tcalls", &off), 0);
    ck_assert_int_lt(off, 0);
    ck_assert_int_eq(qpt_alloc(s, 8, &v), 0);
    ck_assert_int_eq(qpt_proc_find(s, "loop", &loop), 0);
    ck_assert_int_eq(qpt_points(s, loop, QPT_ENTRY, &pt, 1, &n), 0);
    qpt_snippet_t *sn = qpt_snippet_create();
    qpt_expr_t e = qpt_store(sn, v, 8, qpt_load_at(sn, qpt_tls_addr(sn, off), 8));
    ck_assert_msg(qpt_insert(s, &pt, sn, e, NULL) == 0, "%s", qpt_error(s));
    qpt_snippet_destroy(sn);
    return v;
}

START_TEST(test_libqpt_tls)
{
    char why[512] = "";
    qpt_space_t *s = NULL;
    ck_assert_msg(qpt_open(PROG, &s, why, sizeof(why)) == 0, "%s", why);
    uint64_t v = tls_instrument(s);
    unlink("tests/qpt/tls.inst.qp");
    ck_assert_msg(qpt_write(s, "tests/qpt/tls.inst") == 0, "%s", qpt_error(s));
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "tests/qpt/tls.inst %d > tests/qpt/inst.out", N);
    ck_assert_int_eq(system(cmd), 0);
    uint64_t got = 0;
    ck_assert_int_eq(qpt_profile_read("tests/qpt/tls.inst.qp", v, &got, 1, why, sizeof(why)), 0);
    ck_assert_uint_eq(got, N);
    qpt_close(s);
#ifdef ENABLE_DYNAMIC_TESTS
    if ((s = spawn_prog()) == NULL)
        return;
    v = tls_instrument(s);
    ck_assert_msg(qpt_commit(s) == 0, "%s", qpt_error(s));
    run_to_end(s);
    ck_assert_int_eq(qpt_read_memory(s, v, &got, 8), 0);
    ck_assert_uint_eq(got, N);
    qpt_close(s);
#endif
}
END_TEST

START_TEST(test_libqpt_snippet_call)
{
    char why[512] = "";
    qpt_space_t *s = NULL;
    ck_assert_msg(qpt_open(PROG, &s, why, sizeof(why)) == 0, "%s", why);
    uint64_t v = call_instrument(s);
    unlink("tests/qpt/call.inst.qp");
    ck_assert_msg(qpt_write(s, "tests/qpt/call.inst") == 0, "%s", qpt_error(s));
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "%s %d > tests/qpt/orig.out && tests/qpt/call.inst %d > "
             "tests/qpt/inst.out && cmp -s tests/qpt/orig.out tests/qpt/inst.out", PROG, N, N);
    ck_assert_int_eq(system(cmd), 0);
    uint64_t got = 0;
    ck_assert_int_eq(qpt_profile_read("tests/qpt/call.inst.qp", v, &got, 1, why, sizeof(why)), 0);
    ck_assert_uint_eq(got, 91 * N);
    qpt_close(s);
#ifdef ENABLE_DYNAMIC_TESTS
    if ((s = spawn_prog()) == NULL)
        return;
    v = call_instrument(s);
    ck_assert_msg(qpt_commit(s) == 0, "%s", qpt_error(s));
    int st = run_to_end(s);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ck_assert_int_eq(qpt_read_memory(s, v, &got, 8), 0);
    ck_assert_uint_eq(got, 91 * N);
    qpt_close(s);
#endif
}
END_TEST

START_TEST(test_libqpt_order)
{
    char why[512] = "";
    qpt_space_t *s = NULL;
    ck_assert_msg(qpt_open(PROG, &s, why, sizeof(why)) == 0, "%s", why);
    uint64_t v = order_instrument(s);
    unlink("tests/qpt/order.inst.qp");
    ck_assert_msg(qpt_write(s, "tests/qpt/order.inst") == 0, "%s", qpt_error(s));
    ck_assert_int_eq(system("tests/qpt/order.inst 1 > tests/qpt/inst.out"), 0);
    uint64_t got = 0;
    ck_assert_int_eq(qpt_profile_read("tests/qpt/order.inst.qp", v, &got, 1, why, sizeof(why)), 0);
    ck_assert_uint_eq(got, 213);
    qpt_close(s);
#ifdef ENABLE_DYNAMIC_TESTS
    if ((s = spawn_prog()) == NULL)
        return;
    v = order_instrument(s);
    ck_assert_msg(qpt_commit(s) == 0, "%s", qpt_error(s));
    run_to_end(s);
    ck_assert_int_eq(qpt_read_memory(s, v, &got, 8), 0);
    ck_assert_uint_eq(got, order_expected(N));
    qpt_close(s);
#endif
}
END_TEST

/*****************************************************************************
 * Edges and lines
 */

/*
 * A counter on every edge and every block of loop (and of main); run; flow conservation
 * against the blocks' own counts: into every block but the entry, and out of every block
 * whose edges all have counters, the edges add up to the block's count; loop's body ran 7
 * times. Live, edges refused (not the only way into their block) are left out of the sums.
 */
typedef struct {
    qpt_point_t blocks[64], edges[128];
    size_t nb, ne;
    int edge_in[128];
    uint64_t vars;
} edges_t;

static void
edges_instrument(qpt_space_t *s, const char *name, edges_t *e)
{
    uint32_t p;
    ck_assert_int_eq(qpt_proc_find(s, name, &p), 0);
    ck_assert_int_eq(qpt_points(s, p, QPT_BLOCK, e->blocks, 64, &e->nb), 0);
    ck_assert_int_eq(qpt_points(s, p, QPT_EDGE, e->edges, 128, &e->ne), 0);
    ck_assert_uint_le(e->nb, 64);
    ck_assert_uint_le(e->ne, 128);
    ck_assert_int_eq(qpt_alloc(s, 8 * (e->nb + e->ne), &e->vars), 0);
    qpt_snippet_t *sn = qpt_snippet_create();
    int refused = 0;
    for (size_t i = 0; i < e->nb; i++) {
        int rc = qpt_insert(s, &e->blocks[i], sn, qpt_add_to(sn, e->vars + 8 * i,
                                                            qpt_const(sn, 1), 0), NULL);
        /* Live, a block shorter than the jump is refused: its count stays unknown. */
        ck_assert_msg(rc == 0 || qpt_is_live(s), "%s", qpt_error(s));
        if (rc != 0)
            e->blocks[i].kind = 0;
    }
    for (size_t i = 0; i < e->ne; i++) {
        int rc = qpt_insert(s, &e->edges[i], sn,
                            qpt_add_to(sn, e->vars + 8 * (e->nb + i), qpt_const(sn, 1), 0), NULL);
        e->edge_in[i] = rc == 0;
        if (rc != 0) {
            ck_assert_msg(qpt_is_live(s), "edge %zu: %s", i, qpt_error(s));
            refused++;
        }
    }
    qpt_snippet_destroy(sn);
    if (!qpt_is_live(s))
        ck_assert_int_eq(refused, 0);
}

static void
edges_check(const edges_t *e, const uint64_t *w, uint64_t entry_calls)
{
    int sums = 0;
    uint64_t max = 0;
    for (size_t b = 0; b < e->nb; b++) {
        if (e->blocks[b].kind == 0)
            continue;
        uint64_t count = w[b], in = 0, out = 0;
        int all_in = 1, all_out = 1, nin = 0, nout = 0;
        for (size_t i = 0; i < e->ne; i++) {
            if (e->edges[i].to == e->blocks[b].addr) {
                nin++;
                all_in &= e->edge_in[i];
                in += w[e->nb + i];
            }
            if (e->edges[i].addr == e->blocks[b].addr) {
                nout++;
                all_out &= e->edge_in[i];
                out += w[e->nb + i];
            }
        }
        if (b == 0)
            in += entry_calls; /* the calls */
        if (all_in && (nin > 0 || b == 0)) {
            ck_assert_msg(in == count, "block %zu: %llu in, %llu counted", b,
                          (unsigned long long)in, (unsigned long long)count);
            sums++;
        }
        if (all_out && nout > 0 && e->blocks[b].kind) {
            ck_assert_msg(out <= count, "block %zu: %llu out, %llu counted", b,
                          (unsigned long long)out, (unsigned long long)count);
        }
        max = count > max ? count : max;
    }
    ck_assert_int_gt(sums, 0);
    (void)max;
}

START_TEST(test_libqpt_edges_file)
{
    char why[512] = "";
    qpt_space_t *s = NULL;
    ck_assert_msg(qpt_open(PROG, &s, why, sizeof(why)) == 0, "%s", why);
    edges_t lp, mn;
    edges_instrument(s, "loop", &lp);
    edges_instrument(s, "main", &mn);
    unlink("tests/qpt/edges.inst.qp");
    ck_assert_msg(qpt_write(s, "tests/qpt/edges.inst") == 0, "%s", qpt_error(s));
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "%s %d > tests/qpt/orig.out && tests/qpt/edges.inst %d > "
             "tests/qpt/inst.out && cmp -s tests/qpt/orig.out tests/qpt/inst.out", PROG, N, N);
    ck_assert_int_eq(system(cmd), 0);
    uint64_t w[192];
    ck_assert_int_eq(qpt_profile_read("tests/qpt/edges.inst.qp", lp.vars, w, lp.nb + lp.ne, why,
                                      sizeof(why)), 0);
    edges_check(&lp, w, 1);
    uint64_t body = 0;
    for (size_t b = 0; b < lp.nb; b++)
        body = w[b] > body ? w[b] : body;
    ck_assert_uint_eq(body, 7);
    ck_assert_int_eq(qpt_profile_read("tests/qpt/edges.inst.qp", mn.vars, w, mn.nb + mn.ne, why,
                                      sizeof(why)), 0);
    edges_check(&mn, w, 1);
    qpt_close(s);
}
END_TEST

/* A source line's instructions (the line of work marked LINE-MARK): 20 calls. */
START_TEST(test_libqpt_lines_file)
{
    char why[512] = "", path[4096];
    const char *src = getenv("top_srcdir");
    snprintf(path, sizeof(path), "%s/tests/qpt/api_prog.c", src ? src : ".");
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char buf[512];
    unsigned line = 0, mark = 0;
    while (fgets(buf, sizeof(buf), f) != NULL) {
        line++;
        if (strstr(buf, "LINE-MARK") != NULL && strstr(buf, "sink") != NULL)
            mark = line;
    }
    fclose(f);
    ck_assert_uint_gt(mark, 0);
    qpt_space_t *s = NULL;
    ck_assert_msg(qpt_open(PROG, &s, why, sizeof(why)) == 0, "%s", why);
    qpt_point_t pt[16];
    size_t n;
    ck_assert_msg(qpt_line_points(s, "api_prog.c", mark, pt, 16, &n) == 0, "%s", qpt_error(s));
    ck_assert_uint_ge(n, 1);
    ck_assert_uint_le(n, 16);
    ck_assert_int_eq(qpt_line_points(s, "api_prog.c", 100000, pt, 16, &n), QPT_ENOTFOUND);
    ck_assert_int_eq(qpt_line_points(s, "other.c", mark, pt, 16, &n), QPT_ENOTFOUND);
    ck_assert_int_eq(qpt_line_points(s, "qpt/api_prog.c", mark, pt, 16, &n), 0);
    uint32_t work;
    ck_assert_int_eq(qpt_proc_find(s, "work", &work), 0);
    uint64_t ctr;
    ck_assert_int_eq(qpt_alloc(s, 8, &ctr), 0);
    qpt_snippet_t *sn = qpt_snippet_create();
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_eq(pt[i].proc, work);
        ck_assert_int_eq(pt[i].kind, QPT_INSN);
        ck_assert_msg(qpt_insert(s, &pt[i], sn, qpt_add_to(sn, ctr, qpt_const(sn, 1), 0), NULL)
                      == 0, "%s", qpt_error(s));
    }
    qpt_snippet_destroy(sn);
    unlink("tests/qpt/lines.inst.qp");
    ck_assert_msg(qpt_write(s, "tests/qpt/lines.inst") == 0, "%s", qpt_error(s));
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "tests/qpt/lines.inst %d > tests/qpt/inst.out", N);
    ck_assert_int_eq(system(cmd), 0);
    uint64_t count = 0;
    ck_assert_int_eq(qpt_profile_read("tests/qpt/lines.inst.qp", ctr, &count, 1, why,
                                      sizeof(why)), 0);
    ck_assert_uint_eq(count, (uint64_t)N * n);
    qpt_close(s);
}
END_TEST

/*
 * Before and after instructions: the value of sink after each instruction of work. Only
 * the store into sink changes it, so the sums read after each instruction take two
 * values, the second larger by the sum of work's arguments; every point runs once a call.
 * The return has no one place after it.
 */
START_TEST(test_libqpt_after_file)
{
    char why[512] = "";
    qpt_space_t *s = NULL;
    ck_assert_msg(qpt_open(PROG, &s, why, sizeof(why)) == 0, "%s", why);
    uint32_t work;
    ck_assert_int_eq(qpt_proc_find(s, "work", &work), 0);
    qpt_point_t pt[64];
    size_t n;
    ck_assert_int_eq(qpt_points(s, work, QPT_INSN, pt, 64, &n), 0);
    ck_assert_uint_ge(n, 3);
    ck_assert_uint_le(n, 30);
    uint64_t sink_addr, vars;
    ck_assert_int_eq(qpt_symbol(s, "sink", &sink_addr, NULL), 0);
    ck_assert_int_eq(qpt_alloc(s, 8 * 64, &vars), 0);
    /* The same points by address. */
    qpt_point_t by;
    ck_assert_int_eq(qpt_insn_point(s, pt[1].addr, &by), 0);
    ck_assert_int_eq(by.kind, QPT_INSN);
    ck_assert_uint_eq(by.addr, pt[1].addr);
    ck_assert_uint_eq(by.proc, work);
    ck_assert_int_eq(qpt_insn_point(s, pt[1].addr + 1, &by), QPT_ENOTFOUND);
    ck_assert_int_eq(qpt_insn_point(s, 1, &by), QPT_ENOTFOUND);
    size_t placed = 0, rets = 0;
    qpt_snippet_t *sn = qpt_snippet_create();
    for (size_t i = 0; i < n; i++) {
        qpt_point_t after;
        int rc = qpt_point_after(s, &pt[i], &after);
        if (rc != 0) {
            ck_assert_int_eq(rc, QPT_EUNSUPP);
            ck_assert_msg(strstr(qpt_error(s), "return") != NULL, "%s", qpt_error(s));
            rets++;
            continue;
        }
        /* Word 2i: sink after instruction i; word 2i+1: runs. */
        qpt_expr_t e = qpt_seq(sn, qpt_add_to(sn, vars + 16 * i, qpt_load(sn, sink_addr, 8), 0),
                               qpt_add_to(sn, vars + 16 * i + 8, qpt_const(sn, 1), 0));
        ck_assert_msg(qpt_insert(s, &after, sn, e, NULL) == 0, "%s", qpt_error(s));
        placed++;
    }
    qpt_snippet_destroy(sn);
    ck_assert_uint_ge(rets, 1);
    ck_assert_uint_eq(placed + rets, n);
    unlink("tests/qpt/after.inst.qp");
    ck_assert_msg(qpt_write(s, "tests/qpt/after.inst") == 0, "%s", qpt_error(s));
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "tests/qpt/after.inst %d > tests/qpt/inst.out", N);
    ck_assert_int_eq(system(cmd), 0);
    uint64_t w[128];
    ck_assert_int_eq(qpt_profile_read("tests/qpt/after.inst.qp", vars, w, 2 * n, why,
                                      sizeof(why)), 0);
    uint64_t first = UINT64_MAX, second = UINT64_MAX, sum = (uint64_t)N * (N - 1) / 2;
    size_t changes = 0;
    for (size_t i = 0; i < n; i++) {
        qpt_point_t after;
        if (qpt_point_after(s, &pt[i], &after) != 0)
            continue;
        ck_assert_uint_eq(w[2 * i + 1], N);
        if (first == UINT64_MAX)
            first = w[2 * i];
        else if (w[2 * i] != (second == UINT64_MAX ? first : second)) {
            ck_assert_uint_eq(second, UINT64_MAX); /* one change only */
            second = w[2 * i];
            changes++;
        }
    }
    ck_assert_uint_eq(changes, 1);
    ck_assert_uint_eq(second - first, sum);
    qpt_close(s);
}
END_TEST

#ifdef ENABLE_DYNAMIC_TESTS
/* Live: after instructions of work, those whose bytes do not overlap: sink read there
 * is its value before every call's store or after it, in every call. */
START_TEST(test_libqpt_after_live)
{
    qpt_space_t *s = spawn_prog();
    if (s == NULL)
        return; /* ptrace not allowed here */
    uint32_t work;
    ck_assert_int_eq(qpt_proc_find(s, "work", &work), 0);
    qpt_point_t pt[64];
    size_t ni, placed = 0;
    ck_assert_int_eq(qpt_points(s, work, QPT_INSN, pt, 64, &ni), 0);
    uint64_t sink_addr, vars;
    ck_assert_int_eq(qpt_symbol(s, "sink", &sink_addr, NULL), 0);
    ck_assert_int_eq(qpt_alloc(s, 16 * 64, &vars), 0);
    int used[64] = { 0 };
    qpt_snippet_t *sn = qpt_snippet_create();
    for (size_t i = 0; i < ni && i < 64; i++) {
        qpt_point_t after;
        if (qpt_point_after(s, &pt[i], &after) != 0)
            continue;
        qpt_expr_t e = qpt_seq(sn, qpt_add_to(sn, vars + 16 * i, qpt_load(sn, sink_addr, 8), 0),
                               qpt_add_to(sn, vars + 16 * i + 8, qpt_const(sn, 1), 0));
        if (qpt_insert(s, &after, sn, e, NULL) == 0) {
            used[i] = 1;
            placed++;
        } else /* its bytes overlap another's, or no room for a jump: said why */
            ck_assert_msg(qpt_error(s)[0] != '\0', "refused without a reason");
    }
    qpt_snippet_destroy(sn);
    ck_assert_uint_gt(placed, 0);
    ck_assert_msg(qpt_commit(s) == 0, "%s", qpt_error(s));
    run_to_end(s);
    uint64_t w[128];
    ck_assert_int_eq(qpt_read_memory(s, vars, w, 16 * ni), 0);
    uint64_t before = 0, after = 0; /* the sums of sink before and after each store */
    for (int i = 0; i < N; i++) {
        before += (uint64_t)i * (i - 1) / 2;
        after += (uint64_t)i * (i + 1) / 2;
    }
    for (size_t i = 0; i < ni; i++)
        if (used[i]) {
            ck_assert_uint_eq(w[2 * i + 1], N);
            ck_assert_msg(w[2 * i] == before || w[2 * i] == after, "after insn %zu: %llu", i,
                          (unsigned long long)w[2 * i]);
        }
    qpt_close(s);
}
END_TEST

/* Live: the edges that are the only way into their block, and instruction points. */
START_TEST(test_libqpt_edges_live)
{
    qpt_space_t *s = spawn_prog();
    if (s == NULL)
        return; /* ptrace not allowed here */
    edges_t lp;
    edges_instrument(s, "loop", &lp);
    int in = 0;
    for (size_t i = 0; i < lp.ne; i++)
        in += lp.edge_in[i];
    ck_assert_int_gt(in, 0);
    /* Instruction points: every instruction of work that can take a jump. */
    uint32_t work;
    ck_assert_int_eq(qpt_proc_find(s, "work", &work), 0);
    qpt_point_t ipt[64];
    size_t ni, taken = 0;
    ck_assert_int_eq(qpt_points(s, work, QPT_INSN, ipt, 64, &ni), 0);
    uint64_t ctr;
    ck_assert_int_eq(qpt_alloc(s, 8, &ctr), 0);
    qpt_snippet_t *sn = qpt_snippet_create();
    uint64_t lastend = 0;
    for (size_t i = 0; i < ni && i < 64; i++) {
        if (ipt[i].addr < lastend)
            continue; /* within the 5 bytes of the one before */
        if (qpt_insert(s, &ipt[i], sn, qpt_add_to(sn, ctr, qpt_const(sn, 1), 0), NULL) == 0) {
            taken++;
            lastend = ipt[i].addr + 5;
        }
    }
    qpt_snippet_destroy(sn);
    ck_assert_uint_gt(taken, 0);
    ck_assert_msg(qpt_commit(s) == 0, "%s", qpt_error(s));
    run_to_end(s);
    uint64_t w[192];
    ck_assert_int_eq(qpt_read_memory(s, lp.vars, w, 8 * (lp.nb + lp.ne)), 0);
    edges_check(&lp, w, 1);
    uint64_t count = 0;
    ck_assert_int_eq(qpt_read_memory(s, ctr, &count, 8), 0);
    ck_assert_uint_eq(count, (uint64_t)N * taken); /* work has one block */
    qpt_close(s);
}
END_TEST
#endif

/*****************************************************************************
 * Per-thread variables and timers (tests/qpt/thr_prog: 8 threads)
 */
#define THR "tests/qpt/thr_prog"

typedef struct {
    uint64_t per_thread; /* tick's calls, per thread */
    uint64_t cpu;        /* burn's CPU time, per thread */
    uint64_t wall;       /* nap's wall time (a process-wide timer) */
} thr_vars_t;

static void
thr_instrument(qpt_space_t *s, thr_vars_t *v)
{
    ck_assert_int_eq(qpt_alloc_per_thread(s, 8, &v->per_thread), 0);
    ck_assert_int_eq(qpt_alloc_per_thread(s, 24, &v->cpu), 0);
    ck_assert_int_eq(qpt_alloc(s, 24, &v->wall), 0);
    uint32_t tick, nap, burn;
    ck_assert_int_eq(qpt_proc_find(s, "tick", &tick), 0);
    ck_assert_int_eq(qpt_proc_find(s, "nap", &nap), 0);
    ck_assert_int_eq(qpt_proc_find(s, "burn", &burn), 0);
    qpt_point_t pt[16];
    size_t n;
    qpt_snippet_t *sn = qpt_snippet_create();
    ck_assert_int_eq(qpt_points(s, tick, QPT_ENTRY, pt, 1, &n), 0);
    qpt_expr_t inc = qpt_add_at(sn, qpt_thread_var(sn, v->per_thread, 8), qpt_const(sn, 1), 0);
    ck_assert_msg(qpt_insert(s, &pt[0], sn, inc, NULL) == 0, "%s", qpt_error(s));
    /* Timers: start at the entry, stop at every exit. */
    uint32_t procs[2] = { nap, burn };
    for (int k = 0; k < 2; k++) {
        int cpu = procs[k] == burn;
        ck_assert_int_eq(qpt_points(s, procs[k], QPT_ENTRY, pt, 1, &n), 0);
        qpt_expr_t start = cpu ? qpt_cpu_timer_start(sn, v->cpu) : qpt_timer_start(sn, v->wall);
        ck_assert_msg(qpt_insert(s, &pt[0], sn, start, NULL) == 0, "%s", qpt_error(s));
        ck_assert_int_eq(qpt_points(s, procs[k], QPT_EXIT, pt, 16, &n), 0);
        ck_assert_uint_ge(n, 1);
        for (size_t i = 0; i < n && i < 16; i++) {
            qpt_expr_t stop = cpu ? qpt_cpu_timer_stop(sn, v->cpu) : qpt_timer_stop(sn, v->wall);
            ck_assert_msg(qpt_insert(s, &pt[i], sn, stop, NULL) == 0, "%s", qpt_error(s));
        }
    }
    qpt_snippet_destroy(sn);
}

/* TSC cycles per ns on this machine. */
static double
tsc_per_ns(void)
{
    struct timespec a, b;
    uint32_t lo, hi;
    clock_gettime(CLOCK_MONOTONIC, &a);
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    uint64_t c0 = ((uint64_t)hi << 32) | lo;
    struct timespec ts = { 0, 50000000 };
    nanosleep(&ts, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    uint64_t c1 = ((uint64_t)hi << 32) | lo;
    double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
    return (double)(c1 - c0) / ns;
}

/* The values: per-thread counts 1000..8000, CPU time >= 20 ms in each of 8 threads, and
 * nap's 50 ms. W: the three regions, as read. */
static void
thr_check(const uint64_t *pt, const uint64_t *cpu, const uint64_t *wall)
{
    int seen[9] = { 0 }, used = 0, cpu_used = 0;
    for (int k = 0; k < QPT_MAX_THREADS; k++) {
        if (pt[k] == 0)
            continue;
        used++;
        uint64_t calls = pt[QPT_MAX_THREADS + k];
        ck_assert_msg(calls % 1000 == 0 && calls >= 1000 && calls <= 8000,
                      "a thread counted %llu calls", (unsigned long long)calls);
        seen[calls / 1000]++;
    }
    ck_assert_int_eq(used, 8);
    for (int i = 1; i <= 8; i++)
        ck_assert_int_eq(seen[i], 1);
    ck_assert_uint_eq(pt[2 * QPT_MAX_THREADS], 0); /* the overflow copy */
    for (int k = 0; k < QPT_MAX_THREADS; k++) {
        if (cpu[k] == 0)
            continue;
        cpu_used++;
        const uint64_t *w = &cpu[QPT_MAX_THREADS + 3 * k];
        ck_assert_uint_eq(w[0], 0); /* depth back to 0 */
        ck_assert_msg(w[2] >= 20000000 && w[2] < 2000000000, "burn: %llu ns of CPU",
                      (unsigned long long)w[2]);
    }
    ck_assert_int_eq(cpu_used, 8);
    double ms = (double)wall[2] / tsc_per_ns() / 1e6;
    ck_assert_uint_eq(wall[0], 0);
    ck_assert_msg(ms >= 49 && ms < 1000, "nap: %.1f ms", ms);
}

START_TEST(test_libqpt_threads_file)
{
    char why[512] = "";
    qpt_space_t *s = NULL;
    ck_assert_msg(qpt_open(THR, &s, why, sizeof(why)) == 0, "%s", why);
    thr_vars_t v;
    thr_instrument(s, &v);
    unlink("tests/qpt/thr_prog.inst.qp");
    ck_assert_msg(qpt_write(s, "tests/qpt/thr_prog.inst") == 0, "%s", qpt_error(s));
    ck_assert_int_eq(system("tests/qpt/thr_prog.inst > tests/qpt/thr.out"), 0);
    size_t npt = QPT_PER_THREAD_SIZE(8) / 8, ncpu = QPT_PER_THREAD_SIZE(24) / 8;
    uint64_t *pt = calloc(npt, 8), *cpu = calloc(ncpu, 8), wall[3];
    ck_assert_msg(qpt_profile_read("tests/qpt/thr_prog.inst.qp", v.per_thread, pt, npt, why,
                                   sizeof(why)) == 0, "%s", why);
    ck_assert_int_eq(qpt_profile_read("tests/qpt/thr_prog.inst.qp", v.cpu, cpu, ncpu, why,
                                      sizeof(why)), 0);
    ck_assert_int_eq(qpt_profile_read("tests/qpt/thr_prog.inst.qp", v.wall, wall, 3, why,
                                      sizeof(why)), 0);
    thr_check(pt, cpu, wall);
    free(pt);
    free(cpu);
    qpt_close(s);
}
END_TEST

#ifdef ENABLE_DYNAMIC_TESTS
START_TEST(test_libqpt_threads_live)
{
    char why[512] = "";
    char *argv[] = { THR, NULL };
    qpt_space_t *s = NULL;
    int rc = qpt_spawn(argv, &s, why, sizeof(why));
    if (rc == QPT_EIO && strstr(why, "ermission") != NULL)
        return;
    ck_assert_msg(rc == 0, "%s", why);
    thr_vars_t v;
    thr_instrument(s, &v);
    ck_assert_msg(qpt_commit(s) == 0, "%s", qpt_error(s));
    ck_assert_int_eq(qpt_run(s), 0);
    int st;
    for (int i = 0; i < 1000 && qpt_ended(s, &st) == 0; i++) {
        struct timespec ts = { 0, 10000000 };
        nanosleep(&ts, NULL);
    }
    ck_assert_int_eq(qpt_ended(s, &st), 1);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    size_t npt = QPT_PER_THREAD_SIZE(8) / 8, ncpu = QPT_PER_THREAD_SIZE(24) / 8;
    uint64_t *pt = calloc(npt, 8), *cpu = calloc(ncpu, 8), wall[3];
    ck_assert_int_eq(qpt_read_memory(s, v.per_thread, pt, npt * 8), 0);
    ck_assert_int_eq(qpt_read_memory(s, v.cpu, cpu, ncpu * 8), 0);
    ck_assert_int_eq(qpt_read_memory(s, v.wall, wall, sizeof(wall)), 0);
    thr_check(pt, cpu, wall);
    free(pt);
    free(cpu);
    qpt_close(s);
}
END_TEST
#endif

/* A file's kind of space (libqpt/qpt_file.c's ops table): every call of a process's life
 * and of live memory refused, each with the code and message it has always had; a NULL
 * space refused before any kind is asked. */
static void
refused(const qpt_space_t *s, int rc, const char *msg)
{
    ck_assert_int_eq(rc, QPT_EUNSUPP);
    ck_assert_str_eq(qpt_error(s), msg);
}

START_TEST(test_libqpt_file_kind)
{
    char why[512] = "";
    qpt_space_t *s = NULL, *l = NULL;
    ck_assert_msg(qpt_open(PROG, &s, why, sizeof(why)) == 0, "%s", why);
    ck_assert_int_eq(qpt_is_live(s), 0);
    ck_assert_int_eq(qpt_pid(s), 0);
    refused(s, qpt_alive(s), "not a process");
    refused(s, qpt_run(s), "not a process");
    refused(s, qpt_stop(s), "not a process");
    refused(s, qpt_keep_on_exit(s, 1), "not a process");
    refused(s, qpt_watch(s, QPT_EV_ALL), "not a process");
    refused(s, qpt_set_callback(s, QPT_EV_EXIT, NULL, NULL), "not a process");
    refused(s, qpt_wait(s, 0), "not a process");
    refused(s, qpt_commit(s), "a file takes its snippets at qpt_write");
    refused(s, qpt_set_relocate(s, 1), "a file's procedures are relocated by qpt_write");
    refused(s, qpt_write_memory(s, 0x1000, why, 8), "a file has no memory to write");
    ck_assert_int_eq(qpt_call_now(s, 0x1000, NULL, 0, (uint64_t[1]) { 0 }), QPT_EUNSUPP);
    ck_assert_str_eq(qpt_error(s), "not a process");
    ck_assert_int_eq(qpt_set_active(s, 0), QPT_EUNSUPP);
    ck_assert_str_eq(qpt_error(s), "a file has no running snippets (leave them out of "
                                   "qpt_write instead)");
    ck_assert_int_eq(qpt_free(s, 0x1000), QPT_EUNSUPP);
    ck_assert_str_eq(qpt_error(s), "a file's variables are part of the program it writes: "
                                   "they cannot be freed");
    uint64_t w;
    ck_assert_int_eq(qpt_read_memory(s, 0x1000, &w, 8), QPT_EUNSUPP);
    ck_assert_ptr_nonnull(strstr(qpt_error(s), "a file has no memory to read"));
    ck_assert_int_eq(qpt_next_event(s, &(qpt_event_t) { 0 }, 0), QPT_EUNSUPP);
    ck_assert_str_eq(qpt_error(s), "not a process");
    int st = 0;
    int64_t ret;
    uint64_t args[6] = { 0 };
    ck_assert_int_eq(qpt_ended(s, &st), QPT_EINVAL);
    ck_assert_int_eq(qpt_syscall(s, 39, args, &ret), QPT_EINVAL);
    ck_assert_int_eq(qpt_library(s, "libc.so*", &l, why, sizeof(why)), QPT_EUNSUPP);
    ck_assert_ptr_null(l);
    ck_assert_str_eq(why, "libc.so*: a shared library is measured in a live process only");
    qpt_close(s);
    /* No space: refused by the argument checks. */
    ck_assert_int_eq(qpt_alive(NULL), QPT_EINVAL);
    ck_assert_int_eq(qpt_run(NULL), QPT_EUNSUPP);
    ck_assert_int_eq(qpt_pid(NULL), 0);
    ck_assert_int_eq(qpt_is_live(NULL), 0);
    ck_assert_int_eq(qpt_wait(NULL, 0), QPT_EINVAL);
    ck_assert_int_eq(qpt_write(NULL, "x"), QPT_EINVAL);
    ck_assert_int_eq(qpt_commit(NULL), QPT_EINVAL);
}
END_TEST

static Suite *
libqpt_suite(void)
{
    Suite *s = suite_create("libqpt");
    TCase *tc = tcase_create("libqpt");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_libqpt_file);
    tcase_add_test(tc, test_libqpt_rewrite_engine);
#ifdef ENABLE_DYNAMIC_TESTS
    tcase_add_test(tc, test_libqpt_live);
    tcase_add_test(tc, test_libqpt_library);
    tcase_add_test(tc, test_libqpt_live_exit);
    tcase_add_test(tc, test_libqpt_call_killed);
    tcase_add_test(tc, test_libqpt_call_before_start);
    tcase_add_test(tc, test_libqpt_threads_live);
    tcase_add_test(tc, test_libqpt_edges_live);
    tcase_add_test(tc, test_libqpt_after_live);
    tcase_add_test(tc, test_libqpt_exit_restores);
    tcase_add_test(tc, test_libqpt_target_dies);
#endif
    tcase_add_test(tc, test_libqpt_errors);
    tcase_add_test(tc, test_libqpt_file_kind);
    tcase_add_test(tc, test_libqpt_threads_file);
    tcase_add_test(tc, test_libqpt_edges_file);
    tcase_add_test(tc, test_libqpt_lines_file);
    tcase_add_test(tc, test_libqpt_hist);
    tcase_add_test(tc, test_libqpt_module_matches);
    tcase_add_test(tc, test_libqpt_after_file);
    tcase_add_test(tc, test_libqpt_order);
    tcase_add_test(tc, test_libqpt_snippet_call);
    tcase_add_test(tc, test_libqpt_tls);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(libqpt_suite());
    srunner_set_fork_status(sr, CK_NOFORK); /* a traced child must stay ours */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
