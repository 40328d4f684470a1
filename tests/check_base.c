/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Unit tests of base/'s LEB128 (base/qp_leb.h) and the bounded reader and writer over it
 * (base/qp_bytes.h): the one pair every reader of the project uses (DWARF, .eh_frame,
 * the description's stream, the runtime's lock sites, pprof's varints).
 */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/qp_bytes.h"
#include "base/qp_leb.h"

/* The DWARF 5 standard's examples (7.6, figures 22 and 23) and the edges of 64 bits. */
static const struct {
    uint64_t v;
    uint8_t b[10];
    size_t n;
} uleb_cases[] = {
    { 2, { 2 }, 1 },
    { 127, { 0x7f }, 1 },
    { 128, { 0x80, 1 }, 2 },
    { 129, { 0x81, 1 }, 2 },
    { 130, { 0x82, 1 }, 2 },
    { 12857, { 0xb9, 0x64 }, 2 },
    { UINT64_MAX, { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1 }, 10 },
};

static const struct {
    int64_t v;
    uint8_t b[10];
    size_t n;
} sleb_cases[] = {
    { 2, { 2 }, 1 },
    { -2, { 0x7e }, 1 },
    { 127, { 0xff, 0 }, 2 },
    { -127, { 0x81, 0x7f }, 2 },
    { 128, { 0x80, 1 }, 2 },
    { -128, { 0x80, 0x7f }, 2 },
    { 129, { 0x81, 1 }, 2 },
    { -129, { 0xff, 0x7e }, 2 },
    { INT64_MIN, { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f }, 10 },
    { INT64_MAX, { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0 }, 10 },
};

START_TEST(test_base_uleb_round_trip)
{
    for (size_t i = 0; i < sizeof(uleb_cases) / sizeof(uleb_cases[0]); i++) {
        uint8_t b[16];
        size_t n = uleb_encode(b, uleb_cases[i].v, 0);
        ck_assert_uint_eq(n, uleb_cases[i].n);
        ck_assert_uint_eq(uleb_size(uleb_cases[i].v), n);
        ck_assert_mem_eq(b, uleb_cases[i].b, n);
        rd_t r = { b, n, 0, 0 };
        ck_assert_uint_eq(rd_uleb(&r), uleb_cases[i].v);
        ck_assert_uint_eq(r.pos, n);
        ck_assert_int_eq(r.err, 0);
    }
}
END_TEST

START_TEST(test_base_sleb_round_trip)
{
    for (size_t i = 0; i < sizeof(sleb_cases) / sizeof(sleb_cases[0]); i++) {
        wb_t w = { 0 };
        wb_sleb(&w, sleb_cases[i].v);
        ck_assert_uint_eq(w.len, sleb_cases[i].n);
        ck_assert_mem_eq(w.p, sleb_cases[i].b, w.len);
        rd_t r = { w.p, w.len, 0, 0 };
        ck_assert_int_eq(rd_sleb(&r), sleb_cases[i].v);
        ck_assert_uint_eq(r.pos, w.len);
        free(w.p);
    }
}
END_TEST

/* A padded number reads the same (the DWARF patcher rewrites fields in place). */
START_TEST(test_base_uleb_padded)
{
    uint8_t b[16];
    ck_assert_uint_eq(uleb_encode(b, 5, 4), 4);
    const uint8_t want[] = { 0x85, 0x80, 0x80, 0 };
    ck_assert_mem_eq(b, want, 4);
    rd_t r = { b, 4, 0, 0 };
    ck_assert_uint_eq(rd_uleb(&r), 5);
    ck_assert_uint_eq(r.pos, 4);
}
END_TEST

/* A number cut by the end of the data is an error, never a value. */
START_TEST(test_base_leb_truncated)
{
    const uint8_t b[] = { 0x80, 0x80 };
    rd_t r = { b, sizeof(b), 0, 0 };
    ck_assert_uint_eq(rd_uleb(&r), 0);
    ck_assert_int_eq(r.err, 1);
    rd_t s = { b, sizeof(b), 0, 0 };
    ck_assert_int_eq(rd_sleb(&s), 0);
    ck_assert_int_eq(s.err, 1);
}
END_TEST

/* leb_fits: the 10th byte of a 64-bit number holds bit 63 alone (the description's
 * reader refuses more); leb_step drops what does not fit. */
START_TEST(test_base_leb_fits)
{
    ck_assert(leb_fits(0, 0xff));
    ck_assert(leb_fits(56, 0xff));
    ck_assert(leb_fits(63, 0));
    ck_assert(leb_fits(63, 1));
    ck_assert(leb_fits(63, 0x81)); /* fits; the continuation is the reader's to refuse */
    ck_assert(!leb_fits(63, 2));
    ck_assert(!leb_fits(70, 1));
    ck_assert(leb_fits(70, 0x80));
    uint64_t v = 0;
    unsigned shift = 63;
    ck_assert_int_eq(leb_step(&v, &shift, 0x7f), 0);
    ck_assert_uint_eq(v, (uint64_t)1 << 63);
    ck_assert_uint_eq(shift, 70);
}
END_TEST

static Suite *
base_suite(void)
{
    Suite *s = suite_create("base");
    TCase *tc = tcase_create("leb128");
    tcase_add_test(tc, test_base_uleb_round_trip);
    tcase_add_test(tc, test_base_sleb_round_trip);
    tcase_add_test(tc, test_base_uleb_padded);
    tcase_add_test(tc, test_base_leb_truncated);
    tcase_add_test(tc, test_base_leb_fits);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(base_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
