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
#include "include/qpt/qpt_report.h"

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
