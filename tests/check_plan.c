/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The relocation plan's indexes (editor/ed_select.c): the jump tables by jump address
 * and whether another table shares a table's bytes (edl_index_tables), against the
 * definition (a scan of every pair) on tables that start together, nest, touch, are
 * empty or stand apart; the pool's serial step beside its items
 * (qp_parallel_for_beside), a single item on a thread of its own; and the layout's
 * slots collected in parts on the pool and joined in procedure order: the same plan
 * from parts of one procedure each as from the default parts (tests/threads.sh cannot
 * see a join that drops or reorders parts: the parts are cut by instructions, not by
 * threads); the runs of label words (edl_label_runs) where sections overlap; the
 * pool's error: the lowest failed item's, for any number of threads.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/qp_pool.h"
#include "editor/ed.h"

#include "cfg/cfg_priv.h"
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

/*
 * An image of read-only data sections (N of them, V; their bytes stay the caller's),
 * non-PIE or, with NREL relocations REL, a PIE.
 */
static cfg_image_t *
data_image(const cfg_section_t *v, size_t n, const cfg_reloc_t *rel, size_t nrel)
{
    cfg_image_t *img = cfg_image_alloc();
    ck_assert_ptr_nonnull(img);
    img->sections = calloc(n, sizeof(*v));
    ck_assert_ptr_nonnull(img->sections);
    memcpy(img->sections, v, n * sizeof(*v));
    img->nsections = n;
    if (nrel > 0) {
        img->flags |= CFG_IMG_PIE;
        img->relocs = calloc(nrel, sizeof(*rel));
        ck_assert_ptr_nonnull(img->relocs);
        memcpy(img->relocs, rel, nrel * sizeof(*rel));
        img->nrelocs = nrel;
    }
    ck_assert_int_eq(cfg_image_finish(img), 0);
    return img;
}

/*
 * edl_label_runs on sections that overlap (a malformed file): which bytes load there is
 * not known, and cfg_image_section_at's search assumes no overlap, so no word of them
 * makes a run; the section beside them still gives its one. Each layout, with the
 * overlapping pair in either order and as a PIE: before, the pair's words (read from
 * either section's bytes, the fast path's own or the search's) made runs too.
 */
START_TEST(test_plan_label_runs_overlap)
{
    enum { WORDS = 32, LO = 0x10000, A = 0x20000 };
    static const edl_label_t lab[] = { { 0x1000, 1 }, { 0x1010, 1 }, { 0x1020, 1 } };
    static uint64_t alone[WORDS], a[WORDS], b[WORDS];
    for (size_t i = 0; i < WORDS; i++) {
        alone[i] = i < 8 ? lab[i % 3].addr : 0;
        a[i] = lab[i % 3].addr;
        b[i] = i % 2 ? lab[(i + 1) % 3].addr : 0;
    }
    const uint32_t ro = CFG_SEC_ALLOC | CFG_SEC_LOAD;
    /* The other section overlaps the middle, the start or the end of A, or all of it. */
    static const uint64_t b_at[] = { A + 0x40, A - 0x40, A + 0xc0, A };
    for (size_t layout = 0; layout < 4 * 2 * 2; layout++) {
        size_t where = layout / 4, swap = layout % 2, pie = layout / 2 % 2;
        cfg_section_t sec[3] = {
            { ".rodata", LO, sizeof(alone), 0, (const uint8_t *)alone, ro },
            { ".rodata.a", A, sizeof(a), 0, (const uint8_t *)a, ro },
            { ".rodata.b", b_at[where % 4], where % 4 == 0 ? 0x40 : sizeof(b), 0,
              (const uint8_t *)b, ro },
        };
        if (swap) {
            cfg_section_t t = sec[1];
            sec[1] = sec[2];
            sec[2] = t;
        }
        /* A PIE's candidate words are its RELATIVE relocations: every word of them. */
        cfg_reloc_t rel[3 * WORDS];
        size_t nrel = 0;
        for (size_t k = 0; k < 3 && pie; k++)
            for (uint64_t off = 0; off + 8 <= sec[k].size; off += 8) {
                uint64_t w;
                memcpy(&w, sec[k].bytes + off, 8);
                if (w != 0)
                    rel[nrel++] = (cfg_reloc_t) { .where = sec[k].vma + off, .value = w,
                                                  .kind = CFG_RELOC_RELATIVE };
            }
        cfg_image_t *img = data_image(sec, 3, rel, nrel);
        edl_run_t *run = NULL;
        size_t nrun = 0;
        ck_assert_int_eq(edl_label_runs(img, lab, 3, &run, &nrun), 0);
        ck_assert_msg(nrun == 1, "layout %zu: %zu runs", layout, nrun);
        ck_assert_uint_eq(run[0].lo, LO);
        ck_assert_uint_eq(run[0].hi, LO + 8 * 8);
        ck_assert_uint_eq(run[0].owner, 1);
        free(run);
        cfg_image_destroy(img);
    }
}
END_TEST

/* The state of test_plan_pool_lowest_error: which items fail, with which error. */
enum { FAIL_ITEMS = 200, FAIL_LOW = 10, FAIL_HIGH = 11 };
typedef struct failing {
    int err[FAIL_ITEMS];        /* per item: 0, or the error it returns */
    unsigned spin[FAIL_ITEMS];  /* per item: how long it works first */
    int wait_high;              /* FAIL_LOW fails only once FAIL_HIGH has (threads > 1) */
    atomic_int high_failed;     /* FAIL_HIGH has returned its error */
    atomic_int ran[FAIL_ITEMS]; /* per item: how many times it ran */
} failing_t;

static int
fail_some(void *arg, unsigned worker, size_t k)
{
    (void)worker;
    failing_t *f = arg;
    atomic_fetch_add(&f->ran[k], 1);
    for (volatile unsigned i = 0; i < f->spin[k]; i++)
        ;
    if (k == FAIL_LOW && f->wait_high) /* (at most 5 s: a failure then says so) */
        for (int i = 0; i < 5000 && !atomic_load(&f->high_failed); i++)
            usleep(1000);
    if (k == FAIL_HIGH)
        atomic_store(&f->high_failed, 1);
    return f->err[k];
}

/*
 * The pool reports the error of the lowest item that failed - the one a run on one
 * thread reports - not the first in time: the layout's parts are procedures in order,
 * so --threads never changes which error a rewrite reports. Item 11 fails while item
 * 10, on another thread, is still working and then fails (before: item 11's error);
 * then random failures, work and grains on 1 to 4 threads: the lowest failing item's
 * error, and every item below it ran once.
 */
START_TEST(test_plan_pool_lowest_error)
{
    static failing_t f;
    for (unsigned threads = 2; threads <= 4; threads++) {
        memset(&f, 0, sizeof(f));
        f.err[FAIL_LOW] = QP_EDECODE;
        f.err[FAIL_HIGH] = QP_ERANGE;
        f.wait_high = 1;
        ck_assert_int_eq(qp_parallel_for(threads, FAIL_ITEMS, 1, fail_some, &f, NULL),
                         QP_EDECODE);
        ck_assert_int_eq(atomic_load(&f.high_failed), 1);
    }
    static const int codes[] = { QP_EDECODE, QP_ERANGE, QP_ENOMEM, QP_EBUG, QP_EFORMAT };
    unsigned seed = 4242;
    for (int round = 0; round < 200; round++) {
        memset(&f, 0, sizeof(f));
        size_t lowest = FAIL_ITEMS;
        for (size_t k = 0; k < FAIL_ITEMS; k++) {
            seed = seed * 1103515245u + 12345u;
            f.spin[k] = (seed >> 8) % 20000;
            if ((seed >> 20) % 25 == 0) {
                f.err[k] = codes[(seed >> 12) % 5];
                lowest = lowest < k ? lowest : k;
            }
        }
        unsigned threads = 1 + round % 4;
        size_t grain = 1 + (size_t)(round / 4) % 5;
        int rc = qp_parallel_for(threads, FAIL_ITEMS, grain, fail_some, &f, NULL);
        ck_assert_int_eq(rc, lowest < FAIL_ITEMS ? f.err[lowest] : 0);
        for (size_t k = 0; k <= lowest && k < FAIL_ITEMS; k++)
            ck_assert_int_eq(atomic_load(&f.ran[k]), 1);
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

/*
 * A plan of PROG laid out with parts of the slots' collection of about GRAIN
 * instructions (0: the default), on THREADS threads: a counter before every block of
 * a moved procedure, one more for calls only at its entry (ED_PROBE_ENTRY: the slot's
 * shared `extra` then holds entry bytes), and on the taken edge of every conditional
 * branch ending one (every other asking to fall into its target), so that the join
 * numbers stubs too.
 */
static ed_plan_t *
laid_out(const cfg_prog_t *prog, size_t grain, unsigned threads)
{
    ed_opts_t eo = { 0 };
    eo.threads = threads;
    ed_plan_t *plan = NULL;
    ck_assert_int_eq(ed_plan_create(prog, &eo, &plan), 0);
    ed_probe_t *pr = malloc(3 * ((size_t)prog->nblocks + 1) * sizeof(ed_probe_t));
    ck_assert_ptr_nonnull(pr);
    size_t n = 0;
    for (uint32_t b = 0; b < prog->nblocks; b++) {
        const cfg_block_t *bl = &prog->blocks[b];
        const cfg_proc_t *p = &prog->procs[bl->proc];
        uint32_t owner = (p->flags & CFG_PROC_FRAGMENT) ? p->parent : bl->proc;
        if (owner == CFG_NONE || ed_plan_left_reason(plan, owner) != NULL
            || ed_plan_left_reason(plan, bl->proc) != NULL || bl->end <= bl->start)
            continue;
        if (bl->start == p->entry)
            pr[n++] = (ed_probe_t) { .addr = bl->start, .at = ED_AT_BEFORE,
                                     .what = ED_SNIP_COUNT, .flags = ED_PROBE_ENTRY,
                                     .counter = (uint32_t)n };
        pr[n++] = (ed_probe_t) { .addr = bl->start, .at = ED_AT_BEFORE, .what = ED_SNIP_COUNT,
                                 .counter = (uint32_t)n };
        if (bl->last_kind != ARCH_KIND_JCC)
            continue;
        arch_insn_t in = { 0 };
        uint64_t last = bl->start;
        for (uint64_t a = bl->start; a < bl->end; a += in.len) {
            ck_assert_int_eq(cfg_image_decode(prog->img, a, bl->end, &in), 0);
            last = a;
        }
        pr[n++] = (ed_probe_t) { .addr = last, .at = ED_AT_TAKEN, .what = ED_SNIP_COUNT,
                                 .flags = (b & 1) ? ED_PROBE_FALL_IN : 0,
                                 .counter = (uint32_t)n };
    }
    ck_assert_int_eq(ed_plan_set_probes(plan, pr, n), 0);
    free(pr);
    ed_plan_set_runtime(plan, 0x10000000, 0, 0, 0, 0);
    plan->collect_grain = grain;
    ck_assert_int_eq(edl_layout(plan, 1), 0);
    return plan;
}

/* Are A and B laid out alike: slots, stubs, fall-through targets, chunks, figures? */
static void
same_layout(const ed_plan_t *a, const ed_plan_t *b)
{
    ck_assert_uint_eq(a->nslots, b->nslots);
    ck_assert_uint_eq(a->old_base, b->old_base);
    for (size_t i = 0; i < a->nslots; i++) {
        const ed_slot_t *x = &a->lay[i], *y = &b->lay[i];
        ck_assert_msg(x->old == y->old && x->new_ == y->new_ && x->stub == y->stub
                          && x->pre == y->pre && x->extra == y->extra
                          && x->post == y->post && x->len == y->len
                          && x->olen == y->olen && x->flags == y->flags,
                      "slot %zu of %zu differs: old 0x%x / 0x%x, new 0x%x / 0x%x", i,
                      a->nslots, x->old, y->old, x->new_, y->new_);
    }
    ck_assert(memcmp(a->idx, b->idx, a->nslots * sizeof(uint32_t)) == 0); /* by address */
    ck_assert_uint_eq(a->nstubs, b->nstubs);
    for (size_t i = 0; i < a->nstubs; i++) {
        const ed_stub_t *x = &a->stubs[i], *y = &b->stubs[i];
        ck_assert(x->jcc == y->jcc && x->new_ == y->new_ && x->target == y->target
                  && x->len == y->len && x->before == y->before && x->want_fall == y->want_fall);
    }
    ck_assert_uint_eq(a->nfall, b->nfall);
    ck_assert(a->nfall == 0 || memcmp(a->fall, b->fall, a->nfall * sizeof(uint64_t)) == 0);
    ck_assert_uint_eq(a->nchunks, b->nchunks);
    ck_assert(memcmp(a->chunk, b->chunk, (a->nchunks + 1) * sizeof(uint32_t)) == 0);
    ck_assert_uint_eq(a->text_size, b->text_size);
    ck_assert_uint_eq(a->mirror, b->mirror);
    ck_assert_uint_eq(a->stats.nmoved, b->stats.nmoved);
    ck_assert_uint_eq(a->stats.bytes_old, b->stats.bytes_old);
    ck_assert_uint_eq(a->nxlate, b->nxlate);
    ck_assert_uint_eq(a->nprobes_placed, b->nprobes_placed);
}

START_TEST(test_plan_collect_parts_joined)
{
    const char *path = "/usr/bin/bash";
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "test_plan_collect_parts_joined: no %s, skipped\n", path);
        return;
    }
    cfg_image_t *img = NULL;
    cfg_prog_t *prog = NULL;
    ck_assert_int_eq(cfg_image_open_bfd(path, &img), 0);
    ck_assert_int_eq(cfg_prog_build(img, NULL, &prog), 0);
    ed_plan_t *whole = laid_out(prog, 0, 1);
    ck_assert_uint_gt(whole->nstubs, 100);
    ck_assert_uint_gt(whole->nfall, 100);
    ck_assert_uint_gt(whole->nchunks, 100);
    /* The slot's `extra` holds entry bytes (SLOT_ENTRY) or a falling stub's, never both:
     * entry slots are many, and no stub falls into one. */
    size_t nentry = 0, nfalling = 0;
    for (size_t i = 0; i < whole->nslots; i++)
        if (whole->lay[i].flags & SLOT_ENTRY) {
            nentry++;
            ck_assert_uint_gt(slot_entry_pre(&whole->lay[i]), 0);
            ck_assert_uint_eq(slot_lead(&whole->lay[i]), 0);
        }
    for (size_t k = 0; k < whole->nstubs; k++)
        if (whole->stubs[k].before != NO_STUB) {
            nfalling++;
            ck_assert(!(whole->lay[whole->stubs[k].before].flags & SLOT_ENTRY));
            ck_assert_uint_eq(slot_lead(&whole->lay[whole->stubs[k].before]), whole->stubs[k].len);
        }
    ck_assert_uint_gt(nentry, 100);
    ck_assert_uint_gt(nfalling, 100);
    /* One procedure a part (as many parts as procedures), and about one slot a part of
     * the index by address, on one and on three threads. */
    for (unsigned threads = 1; threads <= 3; threads += 2) {
        ed_plan_t *small = laid_out(prog, 1, threads);
        same_layout(whole, small);
        ed_plan_destroy(small);
    }
    ed_plan_destroy(whole);
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
}
END_TEST

/* A probe and its place among those given, for the reference's stable order. */
typedef struct probe_at {
    ed_probe_t p;
    size_t i;
} probe_at_t;

static int
cmp_probe_at(const void *a, const void *b)
{
    const probe_at_t *x = a, *y = b;
    int c = edl_cmp_probe(&x->p, &y->p);
    return c != 0 ? c : (x->i > y->i) - (x->i < y->i);
}

/* The probes of PR (N) with IN_PLACE's flag as set or not, stably ordered by
 * edl_cmp_probe, into a new array (*M of them). */
static ed_probe_t *
probes_ref(const ed_probe_t *pr, size_t n, int in_place, size_t *m)
{
    probe_at_t *v = malloc((n + 1) * sizeof(probe_at_t));
    ed_probe_t *out = malloc((n + 1) * sizeof(ed_probe_t));
    ck_assert(v != NULL && out != NULL);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (((pr[i].flags & ED_PROBE_INPLACE) != 0) == in_place)
            v[k++] = (probe_at_t) { pr[i], i };
    qsort(v, k, sizeof(probe_at_t), cmp_probe_at);
    for (size_t i = 0; i < k; i++)
        out[i] = v[i].p;
    free(v);
    *m = k;
    return out;
}

/*
 * ed_plan_set_probes gathers the probes into their sorted places and sorts each
 * address's run on the pool, by parts of 65,536 places: runs longer than a part and
 * runs across the parts' ends (of up to 40 probes: insertion, and a merge sort past 16)
 * come out as a stable sort by edl_cmp_probe gives them, on one thread and on three, and
 * the probes left in place apart.
 */
START_TEST(test_plan_probes_sorted)
{
    const char *path = "/usr/bin/bash";
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "test_plan_probes_sorted: no %s, skipped\n", path);
        return;
    }
    cfg_image_t *img = NULL;
    cfg_prog_t *prog = NULL;
    ck_assert_int_eq(cfg_image_open_bfd(path, &img), 0);
    ck_assert_int_eq(cfg_prog_build(img, NULL, &prog), 0);
    size_t n = 300000;
    ed_probe_t *pr = malloc(n * sizeof(ed_probe_t));
    ck_assert_ptr_nonnull(pr);
    uint64_t seed = 12345;
    size_t i = 0;
    for (uint32_t run = 0; i < n; run++) {
        /* Runs of 1 to 40 probes, one of 70,000 (longer than a part), at addresses
         * in no order (some again later: one address's probes far apart). */
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t len = run == 7 ? 70000 : 1 + (size_t)(seed >> 59) + (size_t)((seed >> 40) & 7);
        uint64_t addr = 0x400000 + ((seed >> 20) % 50000) * 4;
        for (size_t k = 0; k < len && i < n; k++, i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            pr[i] = (ed_probe_t) { .addr = addr, .at = (uint8_t)((seed >> 61) % 3),
                                   .what = (uint8_t)((seed >> 50) & 1 ? ED_SNIP_COUNT
                                                                     : ED_SNIP_EXIT_HOOK),
                                   .flags = (uint8_t)(((seed >> 33) & 15) == 0 ? ED_PROBE_INPLACE
                                                     : ((seed >> 37) & 7) == 0 ? ED_PROBE_ENTRY
                                                                               : 0),
                                   .counter = (uint32_t)((seed >> 24) & 3) };
        }
    }
    size_t nv, nw;
    ed_probe_t *v = probes_ref(pr, n, 0, &nv), *w = probes_ref(pr, n, 1, &nw);
    ck_assert_uint_gt(nw, 1000);
    for (unsigned threads = 1; threads <= 3; threads += 2) {
        ed_opts_t eo = { 0 };
        eo.threads = threads;
        ed_plan_t *plan = NULL;
        ck_assert_int_eq(ed_plan_create(prog, &eo, &plan), 0);
        ck_assert_int_eq(ed_plan_set_probes(plan, pr, n), 0);
        ck_assert_uint_eq(plan->nprobes, nv);
        ck_assert_uint_eq(plan->nip_probes, nw);
        for (size_t k = 0; k < nv; k++)
            ck_assert_msg(memcmp(&plan->probes[k], &v[k], sizeof(ed_probe_t)) == 0,
                          "probe %zu of %zu (threads %u): 0x%llx counter %u, not 0x%llx "
                          "counter %u", k, nv, threads,
                          (unsigned long long)plan->probes[k].addr, plan->probes[k].counter,
                          (unsigned long long)v[k].addr, v[k].counter);
        ck_assert(memcmp(plan->ip_probes, w, nw * sizeof(ed_probe_t)) == 0);
        ed_plan_destroy(plan);
    }
    free(v);
    free(w);
    free(pr);
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
}
END_TEST

/* The driver's in-place entries handed to the plan (ed_plan_set_inplace): taken only
 * for the plan and program they were made for, then owned (freed) by the plan. */
START_TEST(test_plan_set_inplace)
{
    const char *path = "/usr/bin/bash";
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "test_plan_set_inplace: no %s, skipped\n", path);
        return;
    }
    cfg_image_t *img = NULL;
    cfg_prog_t *prog = NULL;
    ck_assert_int_eq(cfg_image_open_bfd(path, &img), 0);
    ck_assert_int_eq(cfg_prog_build(img, NULL, &prog), 0);
    ed_opts_t eo = { 0 };
    ed_plan_t *a = NULL, *b = NULL;
    ck_assert_int_eq(ed_plan_create(prog, &eo, &a), 0);
    ck_assert_int_eq(ed_plan_create(prog, &eo, &b), 0);
    ed_inplace_t *ip = NULL, *other = NULL;
    ck_assert_int_eq(ed_inplace_create(prog, a, &ip), 0);
    ck_assert_int_eq(ed_inplace_create(prog, a, &other), 0);
    ck_assert_int_eq(ed_plan_set_inplace(b, ip), QP_EINVAL); /* made for A */
    ck_assert_ptr_null(b->inplace);
    ck_assert_int_eq(ed_plan_set_inplace(a, ip), 0);
    ck_assert_ptr_eq(a->inplace, ip);
    ck_assert_int_eq(ed_plan_set_inplace(a, other), 0); /* IP freed (valgrind/ASan) */
    ck_assert_ptr_eq(a->inplace, other);
    ck_assert_int_eq(ed_plan_set_inplace(a, NULL), 0);
    ck_assert_ptr_null(a->inplace);
    ck_assert_int_eq(ed_inplace_create(prog, a, &ip), 0);
    ck_assert_int_eq(ed_plan_set_inplace(a, ip), 0);
    ck_assert_int_eq(ed_plan_set_inplace(NULL, NULL), QP_EINVAL);
    ed_plan_destroy(b);
    ed_plan_destroy(a); /* frees IP */
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
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
    tcase_add_test(tc, test_plan_label_runs_overlap);
    tcase_add_test(tc, test_plan_pool_lowest_error);
    suite_add_tcase(s, tc);
    TCase *lay = tcase_create("layout");
    tcase_set_timeout(lay, 120);
    tcase_add_test(lay, test_plan_set_inplace);
    tcase_add_test(lay, test_plan_collect_parts_joined);
    tcase_add_test(lay, test_plan_probes_sorted);
    suite_add_tcase(s, lay);
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
