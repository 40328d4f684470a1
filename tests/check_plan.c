/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The relocation plan's indexes (editor/ed_select.c): the jump tables by jump address
 * and whether another table shares a table's bytes (edl_index_tables), against the
 * definition (a scan of every pair) on tables that start together, nest, touch, are
 * empty or stand apart; and the pool's serial step beside its items
 * (qp_parallel_for_beside), a single item on a thread of its own.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/qp_pool.h"
#include "editor/ed.h"

#include "editor/ed_layout_priv.h"

/* Does another of the N tables share bytes with table T (the definition)? */
static int
shared(const cfg_table_t *v, uint32_t n, uint32_t t)
{
    uint64_t tend = v[t].addr + (uint64_t)v[t].nentries * v[t].entry_size;
    for (uint32_t u = 0; u < n; u++) {
        uint64_t oend = v[u].addr + (uint64_t)v[u].nentries * v[u].entry_size;
        if (u != t && v[u].addr < tend && v[t].addr < oend)
            return 1;
    }
    return 0;
}

START_TEST(test_plan_tables_alone)
{
    enum { N = 400 };
    cfg_table_t v[N];
    unsigned seed = 12345;
    for (int round = 0; round < 20; round++) {
        memset(v, 0, sizeof(v));
        for (uint32_t t = 0; t < N; t++) {
            seed = seed * 1103515245u + 12345u;
            v[t].jump = 0x1000 + (seed >> 8) % 5000;
            v[t].addr = 0x100000 + 4 * ((seed >> 4) % (round < 10 ? 4000 : 400000));
            v[t].entry_size = 4;
            v[t].nentries = (seed >> 20) % 7 == 0 ? 0 : 1 + (seed >> 12) % 6;
        }
        cfg_prog_t prog;
        memset(&prog, 0, sizeof(prog));
        prog.tables = v;
        prog.ntables = N;
        ed_plan_t plan;
        memset(&plan, 0, sizeof(plan));
        plan.prog = &prog;
        ck_assert_int_eq(edl_index_tables(&plan), 0);
        for (uint32_t t = 0; t < N; t++)
            if (v[t].nentries > 0) /* (edl_table_sure asks of no empty table) */
                ck_assert_int_eq(plan.table_alone[t], !shared(v, N, t));
        for (uint32_t i = 1; i < N; i++)
            ck_assert(v[plan.table_by_jump[i - 1]].jump < v[plan.table_by_jump[i]].jump
                      || (v[plan.table_by_jump[i - 1]].jump == v[plan.table_by_jump[i]].jump
                          && plan.table_by_jump[i - 1] < plan.table_by_jump[i]));
        free(plan.table_by_jump);
        free(plan.table_alone);
    }
}
END_TEST

/* The state of test_plan_pool_beside: every item once, the step once, on the caller. */
typedef struct beside {
    atomic_int done[1000];
    pthread_t caller;
    int ran, on_caller;
} beside_t;

static int
mark(void *arg, unsigned worker, size_t k)
{
    (void)worker;
    beside_t *b = arg;
    atomic_fetch_add(&b->done[k], 1);
    return 0;
}

static void
step(void *arg)
{
    beside_t *b = arg;
    b->ran++;
    b->on_caller = pthread_equal(pthread_self(), b->caller);
}

START_TEST(test_plan_pool_beside)
{
    for (unsigned threads = 1; threads <= 3; threads++) {
        static beside_t b;
        memset(&b, 0, sizeof(b));
        b.caller = pthread_self();
        ck_assert_int_eq(qp_parallel_for_beside(threads, 1000, 8, mark, &b, step, &b), 0);
        ck_assert_int_eq(b.ran, 1);
        ck_assert(b.on_caller);
        for (int k = 0; k < 1000; k++)
            ck_assert_int_eq(atomic_load(&b.done[k]), 1);
    }
}
END_TEST

/* The state of test_plan_pool_beside_one: the thread of the step and of the item. */
typedef struct beside_one {
    pthread_t step, item;
    atomic_int item_done;
    int wait;       /* the step waits for the item (a thread of its own runs it) */
} beside_one_t;

static int
one_item(void *arg, unsigned worker, size_t k)
{
    (void)worker;
    (void)k;
    beside_one_t *b = arg;
    b->item = pthread_self();
    atomic_store(&b->item_done, 1);
    return 0;
}

static void
one_step(void *arg)
{
    beside_one_t *b = arg;
    b->step = pthread_self();
    /* Until the item is done elsewhere: otherwise the caller could take it after the
     * step. Not forever when no thread runs it (10 s: the test then fails). */
    for (int i = 0; b->wait && !atomic_load(&b->item_done) && i < 10000; i++)
        nanosleep(&(struct timespec) { 0, 1000000 }, NULL);
}

/* One item beside the step (the writer's description beside its unwind tables): with
 * two threads, on the other one; with one, after the step on the caller's. */
START_TEST(test_plan_pool_beside_one)
{
    for (unsigned threads = 1; threads <= 2; threads++) {
        beside_one_t b;
        memset(&b, 0, sizeof(b));
        b.wait = threads > 1;
        ck_assert_int_eq(qp_parallel_for_beside(threads, 1, 1, one_item, &b, one_step, &b), 0);
        ck_assert(pthread_equal(b.step, pthread_self()));
        ck_assert_int_eq(pthread_equal(b.item, pthread_self()) != 0, threads == 1);
    }
}
END_TEST

static Suite *
plan_suite(void)
{
    Suite *s = suite_create("plan");
    TCase *tc = tcase_create("index");
    tcase_add_test(tc, test_plan_tables_alone);
    tcase_add_test(tc, test_plan_pool_beside);
    tcase_add_test(tc, test_plan_pool_beside_one);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(plan_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
