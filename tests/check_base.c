/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Unit tests of base/'s LEB128 (base/qp_leb.h) and the bounded reader and writer over it
 * (base/qp_bytes.h): the one pair every reader of the project uses (DWARF, .eh_frame,
 * the description's stream, the runtime's lock sites, pprof's varints); the buckets
 * that narrow a search of sorted addresses (base/qp_search.h: cfg_block_at,
 * cfg_discover_find and the editor's slots share them); the radix sort of 64-bit keys
 * (base/qp_sort.h) against qsort.
 */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/qp_bytes.h"
#include "base/qp_leb.h"
#include "base/qp_search.h"
#include "base/qp_sort.h"

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

/*****************************************************************************
 * Buckets over sorted keys
 */

static uint64_t
key_of(const void *ctx, size_t i)
{
    return ((const uint64_t *)ctx)[i];
}

/* Over keys with runs, gaps and repeats, every address's lower bound searched in its
 * bucket's range is the lower bound over all the keys, and qp_buckets_upto counts the
 * keys at most it. */
START_TEST(test_base_buckets_range)
{
    enum { N = 2000 };
    static uint64_t k[N];
    uint64_t a = 0x401000;
    srand(7);
    for (size_t i = 0; i < N; i++) {
        k[i] = a;
        a += i % 97 == 0 ? 3000 + (uint64_t)(rand() % 5000) : (uint64_t)(rand() % 9);
    }
    qp_buckets_t b = { 0 };
    for (unsigned shift = 4; shift <= 12; shift += 4) {
        ck_assert_int_eq(qp_buckets_build(&b, k[0], shift, N, key_of, k), 0);
        ck_assert_uint_gt(b.n, 0);
        ck_assert_uint_eq(b.at[b.n], N);
        for (uint64_t x = k[0] - 70; x < k[N - 1] + 70; x += 3) {
            size_t lo, hi;
            qp_buckets_range(&b, N, x, &lo, &hi);
            size_t want = qp_lower_bound_u64(k, N, sizeof(k[0]), 0, x);
            size_t got = lo + qp_lower_bound_u64(k + lo, hi - lo, sizeof(k[0]), 0, x);
            ck_assert_msg(lo <= hi && got == want, "shift %u at %#llx: %zu, not %zu", shift,
                          (unsigned long long)x, got, want);
            /* the keys at most X: the lower bound of X + 1 */
            size_t upto = qp_lower_bound_u64(k, N, sizeof(k[0]), 0, x + 1);
            ck_assert_uint_eq(qp_buckets_upto(&b, k, N, x), upto);
        }
    }
    free(b.at);
}
END_TEST

/* Keys far apart get no buckets: the plain search over them all. */
START_TEST(test_base_buckets_sparse)
{
    static const uint64_t k[] = { 0x1000, 0x1000000000 };
    qp_buckets_t b = { 0 };
    size_t lo, hi;
    ck_assert_int_eq(qp_buckets_build(&b, k[0], 8, 2, key_of, k), 0);
    ck_assert_uint_eq(b.n, 0);
    qp_buckets_range(&b, 2, 0x5000, &lo, &hi);
    ck_assert_uint_eq(lo, 0);
    ck_assert_uint_eq(hi, 2);
    ck_assert_int_eq(qp_buckets_build(&b, 0, 8, 0, key_of, k), 0);
    ck_assert_uint_eq(b.n, 0);
    free(b.at);
}
END_TEST

/* qp_sort_u64 orders as qsort does: keys that differ in every byte, in a few low bytes
 * only (a byte alike in all is skipped), with repeats, sorted already, reversed, one. */
START_TEST(test_base_sort_u64)
{
    enum { N = 5000 };
    static uint64_t v[N], w[N];
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int round = 0; round < 6; round++) {
        size_t n = round == 5 ? 1 : N;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v[i] = round == 0 ? x
                : round == 1 ? 0x400000 + (x & 0xffff) * 4 /* addresses: two bytes differ */
                : round == 2 ? (x & 7) << 40 | 0x1234 /* repeats, one byte differs */
                : round == 3 ? i * 3 : round == 4 ? (uint64_t)(N - i) << 32 : x;
        }
        memcpy(w, v, n * sizeof(uint64_t));
        qsort(w, n, sizeof(uint64_t), qp_sort_u64_cmp);
        qp_sort_u64(v, n);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(v[i] == w[i], "round %d: key %zu is 0x%llx, not 0x%llx", round, i,
                          (unsigned long long)v[i], (unsigned long long)w[i]);
        /* The 32-bit sort (the same body) on the keys' low and high halves. */
        for (int half = 0; half < 2; half++) {
            static uint32_t v32[N], w32[N];
            for (size_t i = 0; i < n; i++)
                v32[i] = w32[i] = (uint32_t)(w[(i * 7919) % n] >> (32 * half));
            qsort(w32, n, sizeof(uint32_t), qp_sort_u32_cmp);
            qp_sort_u32(v32, n);
            for (size_t i = 0; i < n; i++)
                ck_assert_msg(v32[i] == w32[i], "round %d, half %d: 32-bit key %zu is 0x%x, not 0x%x",
                              round, half, i, v32[i], w32[i]);
        }
    }
}
END_TEST

/* qp_sort_u64_tied orders as qsort does: keys of an address and the index they were made
 * in (its passes over the address alone), a few addresses with many ties, and keys whose
 * low bits do not ascend (then every byte is sorted). Fails when the skipped passes lose
 * the order of the ties, or are skipped when they may not be. */
START_TEST(test_base_sort_u64_tied)
{
    enum { N = 5000 };
    static uint64_t v[N], w[N];
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int round = 0; round < 4; round++) {
        for (size_t i = 0; i < N; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            uint64_t addr = round == 1 ? x & 3 : x & 0xffffff;
            uint64_t low = round == 2 ? (x >> 40) & 0xffff /* not ascending */ : i;
            v[i] = round == 3 ? (uint64_t)(N - i) << 32 | i : addr << 32 | low;
        }
        memcpy(w, v, sizeof(v));
        qsort(w, N, sizeof(uint64_t), qp_sort_u64_cmp);
        qp_sort_u64_tied(v, N, 32);
        for (size_t i = 0; i < N; i++)
            ck_assert_msg(v[i] == w[i], "round %d: key %zu is 0x%llx, not 0x%llx", round,
                i, (unsigned long long)v[i], (unsigned long long)w[i]);
    }
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
    tc = tcase_create("buckets");
    tcase_add_test(tc, test_base_buckets_range);
    tcase_add_test(tc, test_base_buckets_sparse);
    suite_add_tcase(s, tc);
    tc = tcase_create("sort");
    tcase_add_test(tc, test_base_sort_u64);
    tcase_add_test(tc, test_base_sort_u64_tied);
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
