/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Unit tests of include/qpt/qpt_report.h through the public library only: checked reads
 * (a FIFO and a folder refused without blocking), atomic outputs (committed whole,
 * aborted without a trace, a FIFO never replaced), an earlier run's calls refused with
 * one line, the cache simulator's specs and misses, pprof's protobuf encoding.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "include/qpt/qpt.h"
#include "include/qpt/qpt_qp.h"
#include "include/qpt/qpt_report.h"
#include "include/qpt/qpt_rewrite.h"

static char dir[64];

static void
setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/qpt-report.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void
teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* DIR/NAME into BUF. */
static const char *
path_of(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
    return buf;
}

/* The whole of PATH (at most 63 bytes), or "" when it cannot be read. */
static const char *
contents(const char *path)
{
    static char buf[64];
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

/*****************************************************************************
 * Files
 */

START_TEST(test_qpt_report_open_read_refuses_fifo_and_folder)
{
    char p[128], why[256] = "";
    ck_assert_int_eq(mkfifo(path_of(p, sizeof(p), "fifo"), 0600), 0);
    ck_assert_int_lt(qpt_file_open_read(p, why, sizeof(why)), 0); /* no writer: no wait */
    ck_assert_str_ne(why, "");
    why[0] = '\0';
    ck_assert_int_lt(qpt_file_open_read(dir, why, sizeof(why)), 0);
    ck_assert_str_ne(why, "");
    FILE *f = fopen(path_of(p, sizeof(p), "plain"), "w");
    ck_assert_ptr_nonnull(f);
    fputs("x", f);
    fclose(f);
    int fd = qpt_file_open_read(p, why, sizeof(why));
    ck_assert_int_ge(fd, 0);
    close(fd);
}
END_TEST

START_TEST(test_qpt_report_out_commit_and_abort)
{
    char p[128], why[256] = "";
    path_of(p, sizeof(p), "out");
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs("old", f);
    fclose(f);
    /* Aborted: the path keeps its bytes and no temporary file is left. */
    qpt_out_t *o = NULL;
    int fd = -1;
    ck_assert_int_eq(qpt_out_open(&o, p, &fd, why, sizeof(why)), 0);
    ck_assert_int_eq(write(fd, "new", 3), 3);
    qpt_out_abort(o, 0);
    ck_assert_str_eq(contents(p), "old");
    /* Committed through a stream the caller closed. */
    ck_assert_int_eq(qpt_out_open(&o, p, &fd, why, sizeof(why)), 0);
    FILE *s = fdopen(fd, "w");
    ck_assert_ptr_nonnull(s);
    fputs("new", s);
    ck_assert_int_eq(fclose(s), 0);
    ck_assert_int_eq(qpt_out_commit(o, 1, why, sizeof(why)), 0);
    ck_assert_str_eq(contents(p), "new");
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "test $(ls '%s' | wc -l) -eq 1", dir);
    ck_assert_int_eq(system(cmd), 0); /* no temporary file left */
    /* A FIFO is never replaced. */
    ck_assert_int_eq(mkfifo(path_of(p, sizeof(p), "fifo"), 0600), 0);
    why[0] = '\0';
    ck_assert_int_lt(qpt_out_open(&o, p, &fd, why, sizeof(why)), 0);
    ck_assert_str_ne(why, "");
    struct stat st;
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert(S_ISFIFO(st.st_mode));
}
END_TEST

/*****************************************************************************
 * An earlier run
 */

START_TEST(test_qpt_report_entry_calls_missing_profile)
{
    char p[128], why[256] = "";
    qpt_entry_calls_t *v = (qpt_entry_calls_t *)&v; /* set to NULL on failure */
    size_t n = 7;
    ck_assert_int_lt(qpt_profile_entry_calls(path_of(p, sizeof(p), "none.qp"), &v, &n, why,
                                             sizeof(why)),
                     0);
    ck_assert_ptr_null(v);
    ck_assert_uint_eq(n, 0);
    ck_assert_str_ne(why, "");
    ck_assert_int_eq(qpt_profile_entry_calls(NULL, &v, &n, why, sizeof(why)), QPT_EINVAL);
}
END_TEST

/*****************************************************************************
 * The cache simulator
 */

START_TEST(test_qpt_report_cachesim_specs_and_misses)
{
    ck_assert(qpt_tr_cache_spec_ok("32k:8:64"));
    ck_assert(qpt_tr_cache_spec_ok("8m:16:64"));
    ck_assert(!qpt_tr_cache_spec_ok("32k:8:60")); /* a line not a power of 2 */
    ck_assert(!qpt_tr_cache_spec_ok("nonsense"));
    qpt_tr_cachesim_t *s = NULL;
    ck_assert_int_eq(qpt_tr_cachesim_create("32k:8:60", "8m:16:64", &s), QPT_EINVAL);
    ck_assert_int_eq(qpt_tr_cachesim_create("32k:8:64", "8m:16:64", &s), 0);
    qpt_tr_cachesim_access(s, 0x1000, 8, 0); /* cold: misses both levels */
    qpt_tr_cachesim_access(s, 0x1008, 8, 0); /* the same line: hits */
    qpt_tr_cachesim_access(s, 0x2000, 4, 1); /* a write to a new line */
    qpt_tr_cache_counts_t c;
    qpt_tr_cachesim_counts(s, &c);
    ck_assert_uint_eq(c.reads, 2);
    ck_assert_uint_eq(c.writes, 1);
    ck_assert_uint_eq(c.l1_read_misses, 1);
    ck_assert_uint_eq(c.l1_write_misses, 1);
    ck_assert_uint_eq(c.ll_read_misses, 1);
    ck_assert_uint_eq(c.ll_write_misses, 1);
    qpt_tr_cachesim_destroy(s);
    qpt_tr_cachesim_destroy(NULL);
}
END_TEST

/* A small pprof profile, byte by byte: messages in the order given (strings interned in
 * that order, copied), zero fields left out but for a sample's packed values, the string
 * table last; nothing may be added after the bytes were taken. */
START_TEST(test_qpt_report_pprof_bytes)
{
    qpt_pprof_t *pp;
    ck_assert_int_eq(qpt_pprof_create(&pp), 0);
    char name[] = "f";
    qpt_pprof_sample_type(pp, "instructions", "count");
    qpt_pprof_mapping(pp, 0x10, 0x20, "a", "ab");
    qpt_pprof_function(pp, 1, name, "f", NULL, 0);
    name[0] = 'x'; /* copied: the profile keeps "f" */
    qpt_pprof_location(pp, 1, 0x10, 1, 7);
    uint64_t vals[2] = { 3, 0 };
    qpt_pprof_sample(pp, 1, vals, 2);
    qpt_pprof_comment(pp, "c");
    qpt_pprof_default_sample_type(pp, "count");
    const uint8_t *b;
    size_t n;
    ck_assert_int_eq(qpt_pprof_bytes(pp, &b, &n), 0);
    static const uint8_t want[] = {
        0x0a, 0x04, 0x08, 0x01, 0x10, 0x02,                         /* sample_type */
        0x1a, 0x10, 0x08, 0x01, 0x10, 0x10, 0x18, 0x20, 0x28, 0x03, /* mapping */
        0x30, 0x04, 0x38, 0x01, 0x40, 0x01, 0x48, 0x01,
        0x2a, 0x06, 0x08, 0x01, 0x10, 0x05, 0x18, 0x05,             /* function */
        0x22, 0x0c, 0x08, 0x01, 0x10, 0x01, 0x18, 0x10, 0x22, 0x04, /* location */
        0x08, 0x01, 0x10, 0x07,
        0x12, 0x06, 0x08, 0x01, 0x12, 0x02, 0x03, 0x00,             /* sample */
        0x68, 0x06,                                                 /* comment */
        0x70, 0x02,                                                 /* default */
        0x32, 0x00,                                                 /* strings */
        0x32, 0x0c, 'i', 'n', 's', 't', 'r', 'u', 'c', 't', 'i', 'o', 'n', 's',
        0x32, 0x05, 'c', 'o', 'u', 'n', 't',
        0x32, 0x01, 'a',
        0x32, 0x02, 'a', 'b',
        0x32, 0x01, 'f',
        0x32, 0x01, 'c',
    };
    ck_assert_uint_eq(n, sizeof(want));
    ck_assert_mem_eq(b, want, n);
    qpt_pprof_comment(pp, "late"); /* ignored */
    ck_assert_int_eq(qpt_pprof_bytes(pp, &b, &n), 0);
    ck_assert_uint_eq(n, sizeof(want));
    qpt_pprof_destroy(pp);
    qpt_pprof_destroy(NULL);
    ck_assert_int_eq(qpt_pprof_create(NULL), QPT_EINVAL);
}
END_TEST

/*****************************************************************************
 * What qp report prints, by index (include/qpt/qpt_qp.h)
 *
 * tests/qpt/cfg_prog_O2 (-g -O2) rewritten with the qp driver and run once with N = 10:
 * main runs once, nested once, classify 10 times, rec 11 times (10 from itself, 1 from
 * main).
 */

#define QP_PROG "tests/qpt/cfg_prog_O2"

/* DIR/prog.inst rewritten from QP_PROG and run once: its profile's path into BUF. */
static const char *
qp_profile(char *buf, size_t len)
{
    char exe[128], cmd[512];
    qpt_rewrite_t *r;
    ck_assert_int_eq(qpt_rewrite_create(&r), 0);
    ck_assert_int_eq(qpt_rewrite_run(r, QP_PROG, path_of(exe, sizeof(exe), "prog.inst")), 0);
    qpt_rewrite_destroy(r);
    snprintf(cmd, sizeof(cmd), "env -u QP_PROFILE '%s' 10 >/dev/null", exe);
    ck_assert_int_eq(system(cmd), 0);
    return path_of(buf, len, "prog.inst.qp");
}

/* The loaded module of the profile PROF (in *SET). */
static qpt_qp_t *
qp_loaded(const char *prof, qpt_qp_set_t **set)
{
    char why[512] = "";
    const char *files[] = { prof };
    ck_assert_int_eq(qpt_qp_set_read(files, 1, NULL, 0, set, why, sizeof(why)), 0);
    ck_assert_uint_eq(qpt_qp_set_count(*set), 1);
    qpt_qp_t *m = qpt_qp_set_module(*set, 0);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(qpt_qp_load(m, 0, NULL, NULL, why, sizeof(why)), 0);
    qpt_qp_name(m, QPT_QP_DEMANGLE | QPT_QP_QUALIFY);
    return m;
}

/* The calls of procedure NAME of M, by its counts. */
static uint64_t
qp_calls_of(const qpt_qp_t *m, const char *name)
{
    uint32_t p = qpt_qp_find(m, name);
    ck_assert_uint_ne(p, QPT_QP_NONE);
    qpt_qp_flow_t *f;
    ck_assert_int_eq(qpt_qp_flow(m, p, &f), 0);
    qpt_qp_flow_info_t fi;
    qpt_qp_flow_info(f, &fi);
    ck_assert_int_eq(fi.calls_known, 1);
    ck_assert_uint_eq(fi.proc, p);
    /* The instructions are the blocks' counts times their sizes. */
    uint64_t insns = 0, count;
    int state;
    for (uint32_t b = 0; b < fi.nblocks; b++) {
        qpt_qp_block_t blk;
        ck_assert_int_eq(qpt_qp_block(m, p, b, &blk), 0);
        ck_assert_int_eq(qpt_qp_flow_block(f, b, &count, &state), 0);
        ck_assert_int_ne(state, QPT_QP_COUNT_UNKNOWN);
        insns += count * blk.ninsns;
    }
    ck_assert_uint_eq(insns, fi.insns);
    qpt_qp_flow_free(f);
    return fi.calls;
}

START_TEST(test_qpt_qp_counts_rows_and_calls)
{
    char prof[128];
    qpt_qp_set_t *set;
    qpt_qp_t *m = qp_loaded(qp_profile(prof, sizeof(prof)), &set);
    qpt_qp_info_t info;
    ck_assert_int_eq(qpt_qp_info(m, &info), 0);
    ck_assert_uint_eq(info.runs, 1);
    ck_assert_uint_eq(info.driver, QPT_QP_DRIVER_EDGES);
    ck_assert_int_eq(info.is_library, 0);
    ck_assert_uint_gt(info.nmeasured, 3);
    ck_assert_uint_eq(qp_calls_of(m, "main"), 1);
    ck_assert_uint_eq(qp_calls_of(m, "nested"), 1);
    ck_assert_uint_eq(qp_calls_of(m, "classify"), 10);
    ck_assert_uint_eq(qp_calls_of(m, "rec"), 11);
    /* FILE:NAME, and a name nothing has. */
    ck_assert_uint_eq(qpt_qp_find(m, "cfg_prog.c:rec"), qpt_qp_find(m, "rec"));
    ck_assert_uint_eq(qpt_qp_find(m, "no_such_proc"), QPT_QP_NONE);
    uint32_t p;
    char why[256];
    ck_assert_int_eq(qpt_qp_find_measured(m, "no_such_proc", &p, why, sizeof(why)),
                     QPT_ENOTFOUND);
    ck_assert_str_eq(why, "no procedure named 'no_such_proc'");
    /* The flat rows: the instructions sum to the total, most first. */
    uint64_t sum = 0, last = UINT64_MAX;
    qpt_qp_row_t row;
    for (uint32_t i = 0; i < info.nmeasured + info.nplt; i++) {
        ck_assert_int_eq(qpt_qp_row(m, QPT_QP_FLAT, i, &row), 0);
        ck_assert_uint_le(row.insns, last);
        last = row.insns;
        sum += row.insns;
    }
    ck_assert_uint_eq(sum, info.total_insns);
    /* The call graph: rec's callers are rec (10) and main (1). */
    qpt_qp_calls_t *cg;
    ck_assert_int_eq(qpt_qp_calls(m, &cg), 0);
    uint32_t rec = qpt_qp_find(m, "rec"), main_ = qpt_qp_find(m, "main");
    uint64_t from_rec = 0, from_main = 0;
    for (uint32_t a = 0; a < qpt_qp_cg_narcs(cg); a++) {
        qpt_qp_arc_t arc;
        ck_assert_int_eq(qpt_qp_cg_arc(cg, a, &arc), 0);
        if (arc.callee == rec && arc.caller == rec)
            from_rec += arc.count;
        if (arc.callee == rec && arc.caller == main_)
            from_main += arc.count;
    }
    ck_assert_uint_eq(from_rec, 10);
    ck_assert_uint_eq(from_main, 1);
    qpt_qp_cg_proc_t cp;
    ck_assert_int_eq(qpt_qp_cg_proc(cg, rec, &cp), 0);
    ck_assert_uint_eq(cp.calls, 11);
    ck_assert_uint_ne(cp.cycle, 0); /* recursion */
    qpt_qp_calls_free(cg);
    /* Lines (built -g): rec's first line is a function with its calls. */
    qpt_qp_lines_t *l;
    qpt_qp_lines_info_t li;
    ck_assert_int_eq(qpt_qp_lines(m, &l), 0);
    qpt_qp_lines_info(l, &li);
    ck_assert_uint_gt(li.nlines, 0);
    int found = 0;
    for (uint32_t i = 0; i < li.nfns; i++) {
        qpt_qp_line_count_t c;
        ck_assert_int_eq(qpt_qp_lines_fn(l, i, &c), 0);
        if (c.proc == rec) {
            ck_assert_uint_eq(c.count, 11);
            found = 1;
        }
    }
    ck_assert_int_eq(found, 1);
    qpt_qp_lines_free(l);
    qpt_qp_set_free(set);
}
END_TEST

/* Every index out of its range is QPT_EINVAL (or NULL, or QPT_QP_NONE), never a read
 * past an array; NULL handles likewise. */
START_TEST(test_qpt_qp_index_out_of_range)
{
    char prof[128];
    qpt_qp_set_t *set;
    qpt_qp_t *m = qp_loaded(qp_profile(prof, sizeof(prof)), &set);
    qpt_qp_info_t info;
    ck_assert_int_eq(qpt_qp_info(m, &info), 0);
    ck_assert_ptr_null(qpt_qp_set_module(set, 1));
    ck_assert_ptr_null(qpt_qp_set_module(NULL, 0));
    qpt_qp_proc_t pr;
    ck_assert_int_eq(qpt_qp_proc(m, info.nprocs, &pr), QPT_EINVAL);
    ck_assert_int_eq(qpt_qp_proc(m, UINT32_MAX, &pr), QPT_EINVAL);
    ck_assert_int_eq(qpt_qp_proc(NULL, 0, &pr), QPT_EINVAL);
    qpt_qp_row_t row;
    ck_assert_int_eq(qpt_qp_row(m, QPT_QP_FLAT, info.nmeasured + info.nplt, &row), QPT_EINVAL);
    ck_assert_int_eq(qpt_qp_row(m, QPT_QP_PROCS, info.nmeasured, &row), QPT_EINVAL);
    ck_assert_int_eq(qpt_qp_row(m, QPT_QP_STUBS, info.nplt, &row), QPT_EINVAL);
    ck_assert_int_eq(qpt_qp_row(m, 7, 0, &row), QPT_EINVAL);
    uint32_t up;
    uint64_t uc;
    ck_assert_int_eq(qpt_qp_unmeasured(m, info.nunmeasured, &up, &uc), QPT_EINVAL);
    uint32_t p = qpt_qp_find(m, "classify");
    ck_assert_int_eq(qpt_qp_proc(m, p, &pr), 0);
    qpt_qp_block_t blk;
    qpt_qp_edge_t ed;
    qpt_qp_site_t site;
    ck_assert_int_eq(qpt_qp_block(m, p, pr.nblocks, &blk), QPT_EINVAL);
    ck_assert_int_eq(qpt_qp_block(m, info.nprocs, 0, &blk), QPT_EINVAL);
    ck_assert_int_eq(qpt_qp_edge(m, p, pr.nedges, &ed), QPT_EINVAL);
    ck_assert_int_eq(qpt_qp_site(m, p, qpt_qp_nsites(m, p), &site), QPT_EINVAL);
    ck_assert_uint_eq(qpt_qp_block_last_insn(m, p, pr.nblocks), 0);
    uint64_t over = 0;
    qpt_qp_code_t code;
    ck_assert_int_eq(qpt_qp_block_code(m, p, pr.nblocks, &over, &code), QPT_EINVAL);
    ck_assert_int_eq(qpt_qp_edge(m, p, 0, &ed), 0);
    ck_assert_int_eq(qpt_qp_block_code(m, p, 0, &over, &code), 0);
    ck_assert_ptr_nonnull(code.bytes);
    qpt_qp_flow_t *f;
    ck_assert_int_eq(qpt_qp_flow(m, info.nprocs, &f), QPT_EINVAL);
    ck_assert_ptr_null(f);
    ck_assert_int_eq(qpt_qp_flow(m, p, &f), 0);
    uint64_t count;
    int state;
    qpt_qp_violation_t v;
    qpt_qp_flow_info_t fi;
    qpt_qp_flow_info(f, &fi);
    ck_assert_uint_eq(fi.nviolations, 0);
    ck_assert_int_eq(qpt_qp_flow_block(f, pr.nblocks, &count, &state), QPT_EINVAL);
    ck_assert_int_eq(qpt_qp_flow_edge(f, pr.nedges, &count, &state), QPT_EINVAL);
    ck_assert_int_eq(qpt_qp_flow_violation(f, 0, &v), QPT_EINVAL);
    ck_assert_int_eq(qpt_qp_flow_block(NULL, 0, &count, &state), QPT_EINVAL);
    qpt_qp_flow_free(f);
    qpt_qp_calls_t *cg;
    ck_assert_int_eq(qpt_qp_calls(m, &cg), 0);
    qpt_qp_cg_proc_t cp;
    qpt_qp_arc_t arc;
    ck_assert_int_eq(qpt_qp_cg_proc(cg, info.nprocs, &cp), QPT_EINVAL);
    ck_assert_int_eq(qpt_qp_cg_arc(cg, qpt_qp_cg_narcs(cg), &arc), QPT_EINVAL);
    ck_assert_int_eq(qpt_qp_cg_arc(NULL, 0, &arc), QPT_EINVAL);
    qpt_qp_calls_free(cg);
    qpt_qp_lines_t *l;
    qpt_qp_lines_info_t li;
    qpt_qp_line_count_t lc;
    ck_assert_int_eq(qpt_qp_lines(m, &l), 0);
    qpt_qp_lines_info(l, &li);
    ck_assert_int_eq(qpt_qp_lines_line(l, li.nlines, &lc), QPT_EINVAL);
    ck_assert_int_eq(qpt_qp_lines_branch(l, li.nbranches, &lc), QPT_EINVAL);
    ck_assert_int_eq(qpt_qp_lines_fn(l, li.nfns, &lc), QPT_EINVAL);
    qpt_qp_lines_free(l);
    qpt_qp_process_t *pp;
    qpt_qp_process_info_t pi;
    uint32_t mod;
    ck_assert_int_eq(qpt_qp_process(&m, 1, &pp), 0);
    qpt_qp_process_info(pp, &pi);
    ck_assert_uint_eq(pi.nrows, info.nmeasured + info.nplt);
    ck_assert_uint_eq(pi.total_insns, info.total_insns);
    ck_assert_int_eq(qpt_qp_process_row(pp, 0, &mod, &row), 0);
    ck_assert_uint_eq(mod, 0);
    ck_assert_int_eq(qpt_qp_process_row(pp, pi.nrows, &mod, &row), QPT_EINVAL);
    ck_assert_uint_eq(qpt_qp_process_by_insns(pp, 1), QPT_QP_NONE);
    qpt_qp_process_free(pp);
    ck_assert_int_eq(qpt_qp_process(NULL, 1, &pp), QPT_EINVAL);
    qpt_qp_set_free(set);
    qpt_qp_set_free(NULL);
}
END_TEST

/* Inputs refused with one line naming the file: a missing profile, a profile of another
 * executable (--exe), a module not loaded. Profiles merged: their runs summed. */
START_TEST(test_qpt_qp_refusals_and_merge)
{
    char prof[128], why[512], merged[128];
    qp_profile(prof, sizeof(prof));
    qpt_qp_set_t *set;
    const char *missing[] = { path_of(merged, sizeof(merged), "none.qp") };
    ck_assert_int_lt(qpt_qp_set_read(missing, 1, NULL, 0, &set, why, sizeof(why)), 0);
    ck_assert_ptr_null(set);
    ck_assert_ptr_nonnull(strstr(why, "none.qp: "));
    /* The uninstrumented program has no description. */
    const char *files[] = { prof, prof };
    ck_assert_int_eq(qpt_qp_set_read(files, 1, QP_PROG, 0, &set, why, sizeof(why)), 0);
    qpt_qp_t *m = qpt_qp_set_module(set, 0);
    qpt_qp_info_t info;
    ck_assert_int_eq(qpt_qp_info(m, &info), QPT_EINVAL); /* not loaded */
    ck_assert_uint_eq(qpt_qp_find(m, "main"), QPT_QP_NONE);
    ck_assert_int_lt(qpt_qp_load(m, 0, NULL, NULL, why, sizeof(why)), 0);
    ck_assert_ptr_nonnull(strstr(why, QP_PROG ": "));
    qpt_qp_set_free(set);
    /* Loaded lazily (a flat profile): counts and rows, but no call sites, call graph
     * nor lines. */
    ck_assert_int_eq(qpt_qp_set_read(files, 1, NULL, 0, &set, why, sizeof(why)), 0);
    m = qpt_qp_set_module(set, 0);
    ck_assert_int_eq(qpt_qp_load(m, QPT_QP_LAZY, NULL, NULL, why, sizeof(why)), 0);
    ck_assert_int_eq(qpt_qp_load(m, 0, NULL, NULL, why, sizeof(why)), QPT_EINVAL); /* once */
    ck_assert_uint_eq(qp_calls_of(m, "rec"), 11);
    qpt_qp_row_t row;
    ck_assert_int_eq(qpt_qp_row(m, QPT_QP_FLAT, 0, &row), 0);
    qpt_qp_calls_t *cg;
    qpt_qp_lines_t *l;
    ck_assert_int_eq(qpt_qp_calls(m, &cg), QPT_EINVAL);
    ck_assert_int_eq(qpt_qp_lines(m, &l), QPT_EINVAL);
    ck_assert_uint_eq(qpt_qp_nsites(m, qpt_qp_find(m, "main")), 0);
    qpt_qp_set_free(set);
    /* Two runs' profiles summed into one. */
    ck_assert_int_eq(qpt_qp_set_read(files, 2, NULL, 1, &set, why, sizeof(why)), 0);
    ck_assert_int_eq(qpt_qp_set_merge(set, path_of(merged, sizeof(merged), "sum.qp"), why,
                                      sizeof(why)), 0);
    qpt_qp_set_free(set);
    qpt_qp_t *sum = qp_loaded(merged, &set);
    ck_assert_int_eq(qpt_qp_info(sum, &info), 0);
    ck_assert_uint_eq(info.runs, 2);
    ck_assert_uint_eq(qp_calls_of(sum, "classify"), 20);
    qpt_qp_set_free(set);
}
END_TEST

/* The counters read on another thread (QPT_QP_BACKGROUND): the same counts; the load
 * waits for them, and refusals of the executable still come after the read. */
START_TEST(test_qpt_qp_background_read)
{
    char prof[128], why[512] = "";
    qp_profile(prof, sizeof(prof));
    const char *files[] = { prof, prof };
    qpt_qp_set_t *set;
    ck_assert_int_eq(qpt_qp_set_read(files, 2, NULL, QPT_QP_BACKGROUND, &set, why,
                                     sizeof(why)), 0);
    ck_assert_uint_eq(qpt_qp_set_count(set), 1);
    qpt_qp_t *m = qpt_qp_set_module(set, 0);
    ck_assert_int_eq(qpt_qp_load(m, QPT_QP_LAZY, NULL, NULL, why, sizeof(why)), 0);
    ck_assert_int_eq(qpt_qp_set_wait(set, why, sizeof(why)), 0);
    ck_assert_uint_eq(qp_calls_of(m, "rec"), 22); /* two runs' */
    qpt_qp_set_free(set);
    /* Freed while the read may still run. */
    ck_assert_int_eq(qpt_qp_set_read(files, 2, NULL, QPT_QP_BACKGROUND, &set, why,
                                     sizeof(why)), 0);
    qpt_qp_set_free(set);
    /* An executable without a description: refused as without the flag. */
    ck_assert_int_eq(qpt_qp_set_read(files, 1, QP_PROG, QPT_QP_BACKGROUND, &set, why,
                                     sizeof(why)), 0);
    ck_assert_int_lt(qpt_qp_load(qpt_qp_set_module(set, 0), 0, NULL, NULL, why, sizeof(why)),
                     0);
    ck_assert_ptr_nonnull(strstr(why, QP_PROG ": "));
    qpt_qp_set_free(set);
    /* A missing profile: refused by qpt_qp_set_read itself. */
    char missing[128];
    const char *none[] = { prof, path_of(missing, sizeof(missing), "none.qp") };
    ck_assert_int_lt(qpt_qp_set_read(none, 2, NULL, QPT_QP_BACKGROUND, &set, why, sizeof(why)),
                     0);
    ck_assert_ptr_null(set);
    ck_assert_ptr_nonnull(strstr(why, "none.qp: "));
    ck_assert_int_eq(qpt_qp_set_wait(NULL, why, sizeof(why)), QPT_EINVAL);
}
END_TEST

static Suite *
qpt_report_suite(void)
{
    Suite *s = suite_create("qpt_report");
    TCase *tc = tcase_create("files");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_qpt_report_open_read_refuses_fifo_and_folder);
    tcase_add_test(tc, test_qpt_report_out_commit_and_abort);
    suite_add_tcase(s, tc);
    tc = tcase_create("earlier_run");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_qpt_report_entry_calls_missing_profile);
    suite_add_tcase(s, tc);
    tc = tcase_create("cachesim");
    tcase_add_test(tc, test_qpt_report_cachesim_specs_and_misses);
    suite_add_tcase(s, tc);
    tc = tcase_create("pprof");
    tcase_add_test(tc, test_qpt_report_pprof_bytes);
    suite_add_tcase(s, tc);
    tc = tcase_create("qp");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_qpt_qp_counts_rows_and_calls);
    tcase_add_test(tc, test_qpt_qp_index_out_of_range);
    tcase_add_test(tc, test_qpt_qp_refusals_and_merge);
    tcase_add_test(tc, test_qpt_qp_background_read);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(qpt_report_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
