/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * libqpt/qpt_live_index.c: a live space's insertions found by procedure and by page give
 * the same answers as the scans of all insertions they replace (qpt_live_point_ok), on
 * a space of made-up insertions (no process).
 */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "libqpt/qpt_priv.h"

/* A space holding N insertions, with room for CAP. */
static qpt_space_t *
space_new(size_t cap)
{
    qpt_space_t *s = calloc(1, sizeof(*s));
    ck_assert_ptr_nonnull(s);
    s->ins = calloc(cap, sizeof(qpt_ins_t));
    ck_assert_ptr_nonnull(s->ins);
    s->capins = cap;
    return s;
}

static void
space_free(qpt_space_t *s)
{
    qpt_live_index_free(s);
    ck_assert_ptr_null(s->index);
    free(s->ins);
    free(s);
}

static void
add_ins(qpt_space_t *s, uint32_t proc, uint64_t lo, uint64_t hi, int removed)
{
    ck_assert_uint_lt(s->nins, s->capins);
    qpt_ins_t *in = &s->ins[s->nins++];
    in->pt.proc = proc;
    in->patch_lo = lo;
    in->patch_hi = hi;
    in->removed = removed;
}

/* The overlap test of qpt_live_point_ok, with ARG the range asked about. */
static int
overlaps(const qpt_space_t *s, size_t h, void *arg)
{
    const uint64_t *r = arg;
    const qpt_ins_t *o = &s->ins[h];
    return !o->removed && o->patch_lo < r[1] && r[0] < o->patch_hi;
}

/* What the scan of all insertions says: the first overlapping one, or SIZE_MAX. */
static size_t
scan(const qpt_space_t *s, uint64_t lo, uint64_t hi)
{
    uint64_t r[2] = { lo, hi };
    for (size_t i = 0; i < s->nins; i++)
        if (overlaps(s, i, r))
            return i;
    return SIZE_MAX;
}

static size_t
ask(const qpt_space_t *s, uint64_t lo, uint64_t hi)
{
    uint64_t r[2] = { lo, hi };
    return qpt_live_index_overlap(s, lo, hi, overlaps, r);
}

/* A fixed pseudo-random sequence (the same test every run). */
static uint64_t
rnd(void)
{
    static uint64_t seed = 12345;
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return seed >> 33;
}

START_TEST(test_qpt_index_overlap_as_scan)
{
    qpt_space_t *s = space_new(3000);
    /* Mostly jumps of 1 to 14 bytes, some across a page, some removed, a few copies of
     * whole procedures (wide ranges), added and asked about in several rounds. */
    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < 800; k++) {
            uint64_t lo = 0x400000 + rnd() % 0x40000, len = 1 + rnd() % 14;
            if (rnd() % 50 == 0)
                len = 0x1000 * (16 + rnd() % 20);
            add_ins(s, (uint32_t)(rnd() % 300), lo, lo + len, rnd() % 7 == 0);
        }
        ck_assert_int_eq(qpt_live_index_sync(s), 0);
        for (int k = 0; k < 2000; k++) {
            uint64_t lo = 0x400000 + rnd() % 0x41000, len = rnd() % 16;
            ck_assert_uint_eq(ask(s, lo, lo + len), scan(s, lo, lo + len));
        }
    }
    space_free(s);
}
END_TEST

/* An empty range strictly inside another's counts as overlapping it (as the scan's test
 * says); at its start it does not. */
START_TEST(test_qpt_index_empty_range)
{
    qpt_space_t *s = space_new(4);
    add_ins(s, 1, 0x401ffe, 0x402003, 0); /* across a page */
    ck_assert_int_eq(qpt_live_index_sync(s), 0);
    ck_assert_uint_eq(ask(s, 0x402001, 0x402001), 0);
    ck_assert_uint_eq(ask(s, 0x401ffe, 0x401ffe), SIZE_MAX);
    ck_assert_uint_eq(ask(s, 0x402003, 0x402008), SIZE_MAX);
    ck_assert_uint_eq(ask(s, 0x401000, 0x401fff), 0);
    space_free(s);
}
END_TEST

START_TEST(test_qpt_index_by_proc)
{
    qpt_space_t *s = space_new(8);
    add_ins(s, 3, 0x1000, 0x1005, 0);
    add_ins(s, 7, 0x2000, 0x2005, 0);
    add_ins(s, 3, 0x1010, 0x1015, 1);
    ck_assert_int_eq(qpt_live_index_sync(s), 0);
    add_ins(s, 3, 0x1020, 0x1025, 0); /* after a sync: taken at the next */
    ck_assert_int_eq(qpt_live_index_sync(s), 0);
    size_t n;
    const size_t *v = qpt_live_index_proc(s, 3, &n);
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(v[0], 0);
    ck_assert_uint_eq(v[1], 2);
    ck_assert_uint_eq(v[2], 3);
    v = qpt_live_index_proc(s, 7, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(v[0], 1);
    ck_assert_ptr_null(qpt_live_index_proc(s, 5, &n));
    ck_assert_uint_eq(n, 0);
    space_free(s);
}
END_TEST

/* A range that changes after it was indexed (a lender's points into its copy): found at
 * its new place, as the scan finds it, in the order of handles. */
START_TEST(test_qpt_index_moved)
{
    qpt_space_t *s = space_new(3000);
    for (int k = 0; k < 1000; k++) {
        uint64_t lo = 0x400000 + rnd() % 0x40000;
        add_ins(s, (uint32_t)(rnd() % 300), lo, lo + 1 + rnd() % 14, 0);
    }
    ck_assert_int_eq(qpt_live_index_sync(s), 0);
    for (int k = 0; k < 100; k++) {
        size_t h = rnd() % s->nins;
        uint64_t lo = 0x400000 + rnd() % 0x40000;
        s->ins[h].patch_lo = lo;
        s->ins[h].patch_hi = lo + (rnd() % 4 == 0 ? 0x1000 * (16 + rnd() % 4) : 1 + rnd() % 300);
        ck_assert_int_eq(qpt_live_index_moved(s, h), 0);
        ck_assert_int_eq(qpt_live_index_moved(s, h), 0); /* twice: once in each list */
    }
    for (int k = 0; k < 3000; k++) {
        uint64_t lo = 0x400000 + rnd() % 0x41000, len = rnd() % 16;
        ck_assert_uint_eq(ask(s, lo, lo + len), scan(s, lo, lo + len));
    }
    space_free(s);
}
END_TEST

static Suite *
qpt_index_suite(void)
{
    Suite *s = suite_create("qpt_index");
    TCase *tc = tcase_create("index");
    tcase_add_test(tc, test_qpt_index_overlap_as_scan);
    tcase_add_test(tc, test_qpt_index_empty_range);
    tcase_add_test(tc, test_qpt_index_by_proc);
    tcase_add_test(tc, test_qpt_index_moved);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(qpt_index_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
