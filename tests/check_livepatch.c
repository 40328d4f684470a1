/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Live points that share their bytes, on tests/qpt/patch_prog (issue 29): each a truth
 * test with exact counts, through libqpt's public face.
 *  - two or three points at one address (an entry, its block and its first instruction;
 *    a block and its first instruction; an edge and its destination's first
 *    instruction) are one trampoline with every snippet, in the order they were made;
 *  - a loop header `mov; call` gets its block's counter (the call made from the
 *    trampoline with its original return address);
 *  - a one-byte `ret` procedure gets its entry and its exit.
 * Passes (skipping) where ptrace is not allowed.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "include/qpt/qpt.h"

#define PROG "tests/qpt/patch_prog"
#define N 50
#define NWORDS 16

static qpt_space_t *
spawn(void)
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

/* Commit, run S to its end (exit status 0), read its NWORDS words at VARS into W. */
static void
run(qpt_space_t *s, uint64_t vars, uint64_t *w)
{
    ck_assert_msg(qpt_commit(s) == 0, "%s", qpt_error(s));
    ck_assert_int_eq(qpt_run(s), 0);
    int st;
    while (qpt_ended(s, &st) == 0) {
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ck_assert_int_eq(qpt_read_memory(s, vars, w, 8 * NWORDS), 0);
}

/* The point of KIND of procedure NAME at ADDR (0: its first), to (EDGE) TO when not 0. */
static qpt_point_t
point(qpt_space_t *s, const char *name, uint32_t kind, uint64_t addr, uint64_t to)
{
    uint32_t p;
    qpt_point_t pt[64];
    size_t n;
    ck_assert_int_eq(qpt_proc_find(s, name, &p), 0);
    ck_assert_int_eq(qpt_points(s, p, kind, pt, 64, &n), 0);
    for (size_t i = 0; i < n && i < 64; i++)
        if ((addr == 0 || pt[i].addr == addr) && (to == 0 || pt[i].to == to))
            return pt[i];
    ck_abort_msg(
        "%s: no point of kind %u at 0x%llx", name, kind, (unsigned long long)addr);
    return pt[0];
}

/* WORDS[W] += 1 at PT (FIRST: before what is there already). */
static void
count(qpt_space_t *s, const qpt_point_t *pt, uint64_t vars, int w, int first)
{
    qpt_snippet_t *sn = qpt_snippet_create();
    qpt_expr_t e = qpt_add_to(sn, vars + 8 * (uint64_t)w, qpt_const(sn, 1), 1);
    int rc
        = first ? qpt_insert_first(s, pt, sn, e, NULL) : qpt_insert(s, pt, sn, e, NULL);
    ck_assert_msg(rc == 0, "%s", qpt_error(s));
    qpt_snippet_destroy(sn);
}

/* WORDS[W] := V at PT (FIRST: before what is there already). */
static void
store(qpt_space_t *s, const qpt_point_t *pt, uint64_t vars, int w, int64_t v, int first)
{
    qpt_snippet_t *sn = qpt_snippet_create();
    qpt_expr_t e = qpt_store(sn, vars + 8 * (uint64_t)w, 8, qpt_const(sn, v));
    int rc
        = first ? qpt_insert_first(s, pt, sn, e, NULL) : qpt_insert(s, pt, sn, e, NULL);
    ck_assert_msg(rc == 0, "%s", qpt_error(s));
    qpt_snippet_destroy(sn);
}

START_TEST(test_same_address)
{
    qpt_space_t *s = spawn();
    if (s == NULL)
        return;
    uint64_t vars, w[NWORDS];
    ck_assert_int_eq(qpt_alloc(s, 8 * NWORDS, &vars), 0);
    /* both: entry + first block + first instruction at one address. */
    qpt_point_t e = point(s, "both", QPT_ENTRY, 0, 0);
    qpt_point_t b = point(s, "both", QPT_BLOCK, e.addr, 0);
    qpt_point_t i = point(s, "both", QPT_INSN, e.addr, 0);
    count(s, &e, vars, 0, 0);
    count(s, &b, vars, 1, 0);
    count(s, &i, vars, 2, 1);
    /* The order they were made in: [3] := 1 (entry), then [3] := 2 before it (block),
     * then [4] := 1 (entry) and [4] := 2 after it (instruction). */
    store(s, &e, vars, 3, 1, 0);
    store(s, &b, vars, 3, 2, 1);
    store(s, &e, vars, 4, 1, 0);
    store(s, &i, vars, 4, 2, 0);
    /* twoway: its second block and its first instruction; the taken edge and the first
     * instruction of the block it goes to. */
    uint32_t tw;
    qpt_point_t bl[8];
    size_t nb;
    ck_assert_int_eq(qpt_proc_find(s, "twoway", &tw), 0);
    ck_assert_int_eq(qpt_points(s, tw, QPT_BLOCK, bl, 8, &nb), 0);
    ck_assert_uint_eq(nb, 3);
    qpt_point_t b1 = bl[1], b2 = bl[2];
    ck_assert_uint_lt(b1.addr, b2.addr);
    qpt_point_t i1 = point(s, "twoway", QPT_INSN, b1.addr, 0);
    qpt_point_t ed = point(s, "twoway", QPT_EDGE, 0, b2.addr);
    qpt_point_t i2 = point(s, "twoway", QPT_INSN, b2.addr, 0);
    count(s, &b1, vars, 5, 0);
    count(s, &i1, vars, 6, 0);
    count(s, &ed, vars, 7, 0);
    count(s, &i2, vars, 8, 0);
    run(s, vars, w);
    for (int k = 0; k < 3; k++)
        ck_assert_uint_eq(w[k], N);
    ck_assert_uint_eq(w[3], 1); /* the block's, made first, ran first */
    ck_assert_uint_eq(w[4], 2); /* the instruction's, made last, ran last */
    for (int k = 5; k < 9; k++)
        ck_assert_uint_eq(w[k], N);
    qpt_close(s);
}
END_TEST

START_TEST(test_call_in_block)
{
    qpt_space_t *s = spawn();
    if (s == NULL)
        return;
    uint64_t vars, w[NWORDS];
    ck_assert_int_eq(qpt_alloc(s, 8 * NWORDS, &vars), 0);
    uint32_t p;
    qpt_point_t bl[8];
    size_t nb;
    ck_assert_int_eq(qpt_proc_find(s, "loopcall", &p), 0);
    ck_assert_int_eq(qpt_points(s, p, QPT_BLOCK, bl, 8, &nb), 0);
    ck_assert_uint_ge(nb, 3);
    /* bl[1]: the loop header, `mov %rbx,%rdi; call tick`. */
    count(s, &bl[1], vars, 0, 0);
    qpt_point_t t = point(s, "tick", QPT_ENTRY, 0, 0);
    count(s, &t, vars, 1, 0);
    run(s, vars, w);
    ck_assert_uint_eq(w[0], 3 * N);
    ck_assert_uint_eq(w[1], 3 * N);
    qpt_close(s);
}
END_TEST

START_TEST(test_ret_only)
{
    qpt_space_t *s = spawn();
    if (s == NULL)
        return;
    uint64_t vars, w[NWORDS];
    ck_assert_int_eq(qpt_alloc(s, 8 * NWORDS, &vars), 0);
    qpt_point_t x = point(s, "ret_only", QPT_EXIT, 0, 0);
    qpt_point_t e = point(s, "ret_only", QPT_ENTRY, 0, 0);
    count(s, &x, vars, 1, 0);
    count(s, &e, vars, 0, 0);
    /* both: a one-block procedure's exit (its entry block moved whole) too. */
    qpt_point_t bx = point(s, "both", QPT_EXIT, 0, 0);
    qpt_point_t be = point(s, "both", QPT_ENTRY, 0, 0);
    count(s, &bx, vars, 3, 0);
    count(s, &be, vars, 2, 0);
    run(s, vars, w);
    ck_assert_uint_eq(w[0], N);
    ck_assert_uint_eq(w[1], N);
    ck_assert_uint_eq(w[2], N);
    ck_assert_uint_eq(w[3], N);
    qpt_close(s);
}
END_TEST

int
main(void)
{
    Suite *su = suite_create("livepatch");
    TCase *tc = tcase_create("livepatch");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_same_address);
    tcase_add_test(tc, test_call_in_block);
    tcase_add_test(tc, test_ret_only);
    suite_add_tcase(su, tc);
    SRunner *sr = srunner_create(su);
    srunner_set_fork_status(sr, CK_NOFORK); /* a traced child must stay ours */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
