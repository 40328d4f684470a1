/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The relocation plan's public side: a plan created and freed, the drivers' probes,
 * snippets and runtime addresses handed in, old addresses mapped to new ones, and the
 * plan applied to a space - the new code written (in parallel parts), the redirects in
 * the old text, jump tables retargeted. Which procedures move and where each instruction
 * goes is ed_layout.c's (its header says how).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/qp_pool.h"
#include "base/qp_sort.h"
#include "editor/ed.h"

#include "editor/ed_layout_priv.h"

/*****************************************************************************
 * Public
 */

int
ed_plan_create(const cfg_prog_t *prog, const ed_opts_t *opts, ed_plan_t **out)
{
    if (prog == NULL || out == NULL)
        return QP_EINVAL;
    ed_plan_t *plan = calloc(1, sizeof(*plan));
    if (plan == NULL)
        return QP_ENOMEM;
    plan->prog = prog;
    plan->pads_rc = 1; /* (not read yet) */
    plan->isa = cfg_image_isa(prog->img);
    if (opts)
        plan->opts = *opts;
    plan->reason = calloc(prog->nprocs + 1, sizeof(char *));
    int rc = plan->reason ? edl_sort_leave(plan) : QP_ENOMEM;
    if (rc == 0)
        rc = edl_index_tables(plan);
    uint8_t *vouched = NULL; /* (the decision's, read again by the unfit reasons) */
    if (rc == 0)
        rc = edl_decide(plan, &vouched);
    plan->opts.stay = NULL; /* the caller's: read by decide only */
    plan->opts.nstay = 0;
    plan->opts.leave = NULL; /* the caller's too */
    plan->opts.nleave = 0;
    free(plan->leave);
    plan->leave = NULL;
    plan->nleave = 0;
    if (rc == 0)
        rc = edl_build_segments(plan);
    if (rc == 0)
        rc = edl_decide_unfit(plan, vouched);
    free(vouched);
    if (rc < 0) {
        ed_plan_destroy(plan);
        return rc;
    }
    for (uint32_t i = 0; i < prog->nprocs; i++)
        if (plan->reason[i] != NULL && !(prog->procs[i].flags & CFG_PROC_FRAGMENT))
            plan->stats.nleft++;
    *out = plan;
    return 0;
}

void
ed_plan_destroy(ed_plan_t *plan)
{
    if (plan == NULL)
        return;
    for (size_t i = 0; i < plan->nowned; i++)
        free(plan->owned[i]);
    free(plan->owned);
    free(plan->reason);
    free(plan->unfit);
    free(plan->copied);
    free(plan->ip_probes);
    ed_inplace_destroy(plan->inplace);
    free(plan->dropped);
    free(plan->dropped_owner);
    free(plan->idx);
    free(plan->buckets.at);
    free(plan->lay);
    free(plan->fall);
    free(plan->table_by_jump);
    free(plan->table_alone);
    free(plan->groups);
    free(plan->segs);
    free(plan->seg_new_end);
    free(plan->probes);
    free(plan->stubs);
    free(plan->lock_sites);
    free(plan->snips);
    free(plan->xlate_sites);
    free(plan->xlate_counters);
    free(plan->chunk);
    free(plan->chunk_at);
    free(plan->pads);
    free(plan->stub_at);
    free(plan->holes);
    free(plan->anchors);
    free(plan);
}

const char *
ed_plan_left_reason(const ed_plan_t *plan, uint32_t proc)
{
    if (plan == NULL || proc >= plan->prog->nprocs)
        return NULL;
    return plan->reason[proc];
}

/*
 * Sort the N probes at V as edl_cmp_probe orders them, stably (as glibc's qsort, a merge
 * sort, did: the plans are the same): by address and then index through qp_sort_u64,
 * then the probes of one address by the rest (a few per instruction: by insertion).
 * qsort's calls of edl_cmp_probe cost cc1's qp rewrite 0.35 G instructions here, on the
 * main thread alone. Without the memory, qsort.
 */
/* The N probes at V, all at one address, ordered by edl_cmp_probe, stably. */
static void
sort_probe_run(ed_probe_t *v, size_t n)
{
    if (n > 16) { /* many at one address: a merge sort, stable too */
        qsort(v, n, sizeof(ed_probe_t), edl_cmp_probe);
        return;
    }
    for (size_t k = 1; k < n; k++) {
        ed_probe_t x = v[k];
        size_t m = k;
        for (; m > 0 && edl_cmp_probe(&v[m - 1], &x) > 0; m--)
            v[m] = v[m - 1];
        v[m] = x;
    }
}

static void
sort_probes(ed_probe_t *v, size_t n)
{
    if (n < 2)
        return;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < n; i++) {
        lo = v[i].addr < lo ? v[i].addr : lo;
        hi = v[i].addr > hi ? v[i].addr : hi;
    }
    uint64_t *key = hi - lo <= UINT32_MAX && n < UINT32_MAX ? malloc(n * sizeof(uint64_t)) : NULL;
    if (key == NULL) { /* (a span of 4 GiB of code, or no memory) */
        qsort(v, n, sizeof(ed_probe_t), edl_cmp_probe);
        return;
    }
    for (size_t i = 0; i < n; i++)
        key[i] = (v[i].addr - lo) << 32 | i;
    qp_sort_u64_tied(key, n, 32);
    /* The probes moved into that order in place, a cycle of the permutation at a time
     * (no second copy of them: memory as qsort's merge buffer): slot I takes probe
     * key[I]'s index; a slot filled is marked UINT64_MAX (no index is UINT32_MAX). */
    for (size_t i = 0; i < n; i++) {
        if (key[i] == UINT64_MAX)
            continue;
        ed_probe_t first = v[i];
        size_t j = i;
        for (size_t src = key[j] & UINT32_MAX; src != i; src = key[j] & UINT32_MAX) {
            v[j] = v[src];
            key[j] = UINT64_MAX;
            j = src;
        }
        v[j] = first;
        key[j] = UINT64_MAX;
    }
    free(key);
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && v[j].addr == v[i].addr;)
            j++;
        sort_probe_run(v + i, j - i);
    }
}

/*
 * The probes that are not ED_PROBE_INPLACE among PROBES[0..N), NV of them, into V in
 * sort_probes' order (the same: by address and then index, the index here the one in
 * PROBES, whose order among them is theirs in V; then each address's by
 * edl_cmp_probe), with THREADS threads: the keys sorted here, then the probes gathered
 * into their places and each address's run sorted on the pool. sort_probes moved them
 * a cycle of the permutation at a time, a cache miss a probe on the main thread alone
 * (cc1: 1.1 million probes, 0.16 G instructions after the driver). 0, or 1 when it
 * cannot (the probes' span or count past 32 bits, or no memory: then V is untouched).
 */
typedef struct gather_job {
    const ed_probe_t *probes; /* what the driver gave */
    ed_probe_t *v;            /* the sorted probes, nv of them */
    const uint64_t *key;      /* (address - lowest) << 32 | index in PROBES, sorted */
    size_t nv;
} gather_job_t;

#define GATHER_GRAIN 65536

/* Is position I of the sorted keys K the first of its address? */
static int
run_starts(const uint64_t *k, size_t i)
{
    return i == 0 || k[i - 1] >> 32 != k[i] >> 32;
}

/* The end of the part of J that starts at LO. */
static size_t
part_end(const gather_job_t *j, size_t lo)
{
    return lo + GATHER_GRAIN < j->nv ? lo + GATHER_GRAIN : j->nv;
}

/* qp_task_fn: positions [K, K + 1) * GATHER_GRAIN of the gather_job_t ARG gathered; then
 * the runs of one address that start there (they may end past them), sorted. */
static int
gather_part(void *arg, unsigned worker, size_t k)
{
    (void)worker;
    const gather_job_t *j = arg;
    size_t lo = k * GATHER_GRAIN, hi = part_end(j, lo);
    for (size_t i = lo; i < hi; i++)
        j->v[i] = j->probes[j->key[i] & UINT32_MAX];
    return 0;
}

static int
runs_part(void *arg, unsigned worker, size_t k)
{
    (void)worker;
    const gather_job_t *j = arg;
    size_t lo = k * GATHER_GRAIN, hi = part_end(j, lo);
    size_t i = lo;
    while (i < hi && !run_starts(j->key, i))
        i++; /* (the run an earlier part began) */
    while (i < hi) {
        size_t e = i + 1;
        while (e < j->nv && !run_starts(j->key, e))
            e++;
        sort_probe_run(j->v + i, e - i);
        i = e;
    }
    return 0;
}

static int
gather_probes(const ed_probe_t *probes, size_t n, size_t nv, unsigned threads,
              ed_probe_t *v)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < n; i++)
        if (!(probes[i].flags & ED_PROBE_INPLACE)) {
            lo = probes[i].addr < lo ? probes[i].addr : lo;
            hi = probes[i].addr > hi ? probes[i].addr : hi;
        }
    if (nv == 0)
        return 0;
    int fits = hi - lo <= UINT32_MAX && n < UINT32_MAX; /* (keys of 32 + 32 bits) */
    uint64_t *key = fits ? malloc(nv * sizeof(uint64_t)) : NULL;
    if (key == NULL)
        return 1;
    for (size_t i = 0, k = 0; i < n; i++)
        if (!(probes[i].flags & ED_PROBE_INPLACE))
            key[k++] = (probes[i].addr - lo) << 32 | i;
    qp_sort_u64_tied(key, nv, 32); /* (the indices ascend: 4 passes, not 7) */
    gather_job_t job = { probes, v, key, nv };
    size_t nparts = (nv + GATHER_GRAIN - 1) / GATHER_GRAIN;
    /* (neither fails: the runs sorted after every probe is in place) */
    (void)qp_parallel_for(threads, nparts, 1, gather_part, &job, NULL);
    (void)qp_parallel_for(threads, nparts, 1, runs_part, &job, NULL);
    free(key);
    return 0;
}

int
ed_plan_set_probes(ed_plan_t *plan, const ed_probe_t *probes, size_t n)
{
    if (plan == NULL || (n > 0 && probes == NULL) || plan->laid_out)
        return QP_EINVAL;
    /* Probes of procedures left in place go to ed_inplace.c (W). */
    size_t nw = 0;
    for (size_t i = 0; i < n; i++)
        nw += (probes[i].flags & ED_PROBE_INPLACE) != 0;
    size_t nv = n - nw;
    ed_probe_t *v = malloc((nv + 1) * sizeof(ed_probe_t));
    ed_probe_t *w = malloc((nw + 1) * sizeof(ed_probe_t));
    if (v == NULL || w == NULL) {
        free(v);
        free(w);
        return QP_ENOMEM;
    }
    int gathered = gather_probes(probes, n, nv, plan->opts.threads, v) == 0;
    for (size_t i = 0, kv = 0, kw = 0; i < n; i++) {
        if (probes[i].flags & ED_PROBE_INPLACE)
            w[kw++] = probes[i];
        else if (!gathered)
            v[kv++] = probes[i];
    }
    if (!gathered)
        sort_probes(v, nv);
    sort_probes(w, nw);
    free(plan->probes);
    free(plan->ip_probes);
    plan->probes = v;
    plan->nprobes = nv;
    plan->ip_probes = w;
    plan->nip_probes = nw;
    return 0;
}

void
ed_plan_set_runtime(ed_plan_t *plan, uint64_t counters, uint64_t exit_hook, uint64_t fork_hook,
                    uint64_t thread_hook, uint64_t exec_hook)
{
    plan->counters = counters;
    plan->exit_hook = exit_hook;
    plan->fork_hook = fork_hook;
    plan->thread_hook = thread_hook;
    plan->exec_hook = exec_hook;
}

uint64_t
ed_plan_exit_hook(const ed_plan_t *plan)
{
    return plan->exit_hook;
}

int
ed_plan_set_snippets(ed_plan_t *plan, const ed_snippet_t *v, size_t n)
{
    if (plan == NULL || (n > 0 && v == NULL) || plan->laid_out)
        return QP_EINVAL;
    ed_snippet_t *c = malloc((n + 1) * sizeof(ed_snippet_t));
    if (c == NULL)
        return QP_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (arch_snip_check(v[i].nodes, v[i].n, v[i].root, &v[i].ctx, NULL, 0) < 0) {
            free(c);
            return QP_EINVAL;
        }
        c[i] = v[i];
    }
    free(plan->snips);
    plan->snips = c;
    plan->nsnips = n;
    return 0;
}

int
ed_plan_set_xlate_miss(ed_plan_t *plan, const uint64_t *sites, const uint64_t *counters, size_t n)
{
    if (plan == NULL || plan->laid_out || (n > 0 && (sites == NULL || counters == NULL)))
        return QP_EINVAL;
    uint64_t *s = malloc((n + 1) * sizeof(uint64_t)), *c = malloc((n + 1) * sizeof(uint64_t));
    if (s == NULL || c == NULL) {
        free(s);
        free(c);
        return QP_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && sites[i] <= sites[i - 1]) {
            free(s);
            free(c);
            return QP_EINVAL; /* ascending, once each */
        }
        s[i] = sites[i];
        c[i] = counters[i];
    }
    free(plan->xlate_sites);
    free(plan->xlate_counters);
    plan->xlate_sites = s;
    plan->xlate_counters = c;
    plan->nxlate_sites = n;
    return 0;
}

void
ed_plan_set_inc_mode(ed_plan_t *plan, int mode)
{
    if (plan != NULL && !plan->laid_out)
        plan->opts.atomic = mode;
}

const uint64_t *
ed_plan_lock_sites(const ed_plan_t *plan, size_t *n)
{
    *n = plan != NULL ? plan->nlock_sites : 0;
    return plan != NULL ? plan->lock_sites : NULL;
}

uint64_t
ed_plan_insn_new(const ed_plan_t *plan, uint64_t old, uint64_t *after)
{
    const ed_slot_t *s = edl_slot_at(plan, old);
    if (s == NULL)
        return 0;
    if (after)
        *after = slot_new(plan, s) + s->pre + s->len - (plan->opts.stretch ? 1 : 0);
    return slot_new(plan, s) + s->pre;
}

const ed_stats_t *
ed_plan_stats(const ed_plan_t *plan)
{
    return &plan->stats;
}

uint64_t
ed_plan_text(const ed_plan_t *plan, uint64_t *size)
{
    if (size)
        *size = plan->text_size;
    return plan->text;
}

uint64_t
ed_plan_map(void *arg, uint64_t old)
{
    const ed_plan_t *plan = arg;
    const ed_slot_t *s = edl_slot_at(plan, old);
    if (s != NULL)
        return slot_new(plan, s);
    size_t si;
    const ed_seg_t *seg = edl_seg_at(plan, old, &si);
    if (seg == NULL)
        return 0;
    /* Not an instruction start: the next moved instruction of the same extent, or the
     * end of the extent's new code. */
    size_t lo = edl_slot_lower(plan, old);
    if (lo < plan->nslots && slot_old(plan, SLOT(plan, lo)) < seg->end)
        return slot_new(plan, SLOT(plan, lo));
    return plan->seg_new_end[si];
}

uint64_t
ed_plan_map_state(void *arg, uint64_t old)
{
    const ed_plan_t *plan = arg;
    size_t lo = edl_slot_lower(plan, old), si;
    if (lo < plan->nslots && slot_old(plan, SLOT(plan, lo)) == old)
        return slot_new(plan, SLOT(plan, lo)) - slot_lead(SLOT(plan, lo));
    const ed_seg_t *seg = edl_seg_at(plan, old, &si);
    if (seg == NULL)
        return 0;
    /* As ed_plan_map: the next moved instruction of the extent (its stub first). */
    if (lo < plan->nslots && slot_old(plan, SLOT(plan, lo)) < seg->end)
        return slot_new(plan, SLOT(plan, lo)) - slot_lead(SLOT(plan, lo));
    return plan->seg_new_end[si];
}

uint64_t
ed_plan_map_insn(void *arg, uint64_t old)
{
    const ed_slot_t *s = edl_slot_at(arg, old);
    return s ? slot_new(arg, s) : 0;
}

/* The slot whose original instruction ends at OLD, or NULL. */
static const ed_slot_t *
slot_ending_at(const ed_plan_t *plan, uint64_t old)
{
    size_t lo = edl_slot_lower(plan, old);
    if (lo == 0)
        return NULL;
    const ed_slot_t *s = SLOT(plan, lo - 1);
    return slot_old(plan, s) + s->olen == old ? s : NULL;
}

uint64_t
ed_plan_map_end(void *arg, uint64_t old)
{
    const ed_plan_t *plan = arg;
    const ed_slot_t *s = slot_ending_at(plan, old);
    return s ? slot_new(plan, s) + slot_size(plan, s) : 0;
}

uint64_t
ed_plan_map_return(void *arg, uint64_t old)
{
    const ed_plan_t *plan = arg;
    const ed_slot_t *s = slot_ending_at(plan, old);
    return s ? slot_new(plan, s) + s->pre + s->len - (plan->opts.stretch ? 1 : 0) : 0;
}

int
ed_plan_pieces(void *arg, uint64_t lo, uint64_t hi, ed_piece_fn fn, void *fnarg)
{
    const ed_plan_t *plan = arg;
    if (plan == NULL || fn == NULL || hi < lo)
        return QP_EINVAL;
    uint64_t pos = lo;
    while (pos < hi) {
        size_t a = edl_seg_after(plan, pos);
        if (a == plan->nsegs || plan->segs[a].start > pos) {
            /* Bytes outside every moved procedure stay where they are. */
            uint64_t end = a < plan->nsegs && plan->segs[a].start < hi ? plan->segs[a].start : hi;
            QP_CHECK(fn(fnarg, pos, end - pos, 0, end - pos));
            pos = end;
            continue;
        }
        uint64_t end = plan->segs[a].end < hi ? plan->segs[a].end : hi;
        /* Moved instructions in [pos, end), by old address; runs whose new code is
         * contiguous make one piece. */
        size_t k = edl_slot_lower(plan, pos);
        uint64_t run_old = 0, run_oend = 0, run_new = 0, run_end = 0;
        int have = 0;
        for (; k < plan->nslots && slot_old(plan, SLOT(plan, k)) < end; k++) {
            const ed_slot_t *s = SLOT(plan, k);
            /* A stub falling into the slot is part of its piece. */
            if (have && slot_new(plan, s) - slot_lead(s) == run_end) {
                run_end += slot_lead(s) + slot_size(plan, s);
                run_oend = slot_old(plan, s) + s->olen;
                continue;
            }
            if (have)
                QP_CHECK(fn(fnarg, run_old, run_oend - run_old, run_new, run_end - run_new));
            have = 1;
            run_old = slot_old(plan, s);
            run_oend = slot_old(plan, s) + s->olen;
            run_new = slot_new(plan, s) - slot_lead(s);
            run_end = slot_new(plan, s) + slot_size(plan, s);
        }
        if (have)
            QP_CHECK(fn(fnarg, run_old, run_oend - run_old, run_new, run_end - run_new));
        pos = end;
    }
    return 0;
}

/* The overflow (what found no hole) SKIP bytes further from the mirror: the layout is
 * still relative to the mirror's first byte. Pieces are placed apart (long branches
 * between them), so nothing inside one changes. */
static int
shift_overflow(ed_plan_t *plan, size_t skip)
{
    if (skip == 0)
        return 0;
    for (size_t i = 0; i < plan->nslots; i++)
        if (slot_new(plan, &plan->lay[i]) >= plan->overflow)
            plan->lay[i].new_ += skip;
    for (size_t i = 0; i < plan->nstubs; i++)
        if (plan->stubs[i].before == NO_STUB && plan->stubs[i].new_ >= plan->overflow)
            plan->stubs[i].new_ += skip;
    edl_place_fall_stubs(plan);
    if (plan->nxlate > 0 && plan->xlate >= plan->overflow)
        plan->xlate += skip;
    memset(plan->seg_new_end, 0, (plan->prog->nprocs + 1) * sizeof(uint64_t));
    plan->overflow += skip;
    plan->text_size += skip;
    return edl_segment_ends(plan);
}

/* Rebase every new address by DELTA (layout was computed from 0); the slots' through
 * plan->new_base. */
static void
rebase(ed_plan_t *plan, uint64_t delta)
{
    plan->new_base += delta;
    for (size_t i = 0; i < plan->nstubs; i++)
        plan->stubs[i].new_ += delta;
    for (size_t i = 0; i < plan->nsegs; i++)
        if (plan->seg_new_end[i])
            plan->seg_new_end[i] += delta;
    if (plan->nxlate > 0)
        plan->xlate += delta;
}

/*
 * Where the new code is emitted: below SPLIT (layout-relative) into a buffer mapped
 * apart, written through the space afterwards (the pieces in the old text's holes), from
 * SPLIT on straight into the space's own bytes when it shows them (qp_space_ops_t.bytes:
 * the file's new region), else into the same buffer.
 */
typedef struct emit_dst {
    uint8_t *low;   /* layout-relative [0, split) */
    uint8_t *high;  /* [split, text_size): the space's bytes, or low + split */
    uint64_t split; /* plan->overflow with text reused, else 0 */
} emit_dst_t;

/* The byte the new code's layout-relative offset OFF goes to. */
static inline uint8_t *
emit_ptr(const emit_dst_t *d, uint64_t off)
{
    return off < d->split ? d->low + off : d->high + (off - d->split);
}

/*
 * The translation stub and its table (arch.h) into D (the new code, from plan->text):
 * the entries of the file's procedures, each to its new code when it moved.
 */
static int
emit_xlate(ed_plan_t *plan, const emit_dst_t *d)
{
    const cfg_prog_t *prog = plan->prog;
    int rc = plan->isa->emit_xlate_stub(plan->xlate, edl_xlate_table_at(plan),
                                        emit_ptr(d, plan->xlate - plan->text),
                                        ARCH_XLATE_STUB_LEN);
    if (rc < 0)
        return rc;
    uint64_t lo, hi;
    edl_xlate_range(prog, &lo, &hi);
    if (hi - lo >= UINT32_MAX)
        return QP_ERANGE;
    uint64_t at = edl_xlate_table_at(plan), nslots = edl_xlate_slots(prog), shift = 32;
    for (uint64_t k = nslots; k > 1; k /= 2)
        shift--;
    uint8_t *t = emit_ptr(d, at - plan->text); /* (the stub's piece: after it) */
    uint8_t *slots = t + ARCH_XLATE_HDR;
    memset(slots, 0, 8 * nslots);
    for (uint32_t i = 0; i < prog->nprocs; i++) {
        const cfg_proc_t *p = &prog->procs[i];
        if (!edl_xlate_key(p, lo, hi))
            continue;
        uint32_t key = (uint32_t)(p->entry - lo);
        const ed_slot_t *s = edl_slot_at(plan, p->entry);
        int64_t d = (int64_t)((s != NULL ? slot_new(plan, s) : p->entry) - lo);
        if (d < INT32_MIN || d > INT32_MAX)
            return QP_ERANGE;
        uint64_t h = ((uint32_t)(key * 0x9e3779b1u) >> shift) & (nslots - 1);
        uint32_t key1 = key + 1, cur;
        for (;; h = (h + 1) & (nslots - 1)) {
            memcpy(&cur, slots + 8 * h, 4);
            if (cur == 0 || cur == key1)
                break;
        }
        int32_t d32 = (int32_t)d;
        memcpy(slots + 8 * h, &key1, 4);
        memcpy(slots + 8 * h + 4, &d32, 4);
    }
    uint64_t hdr[6] = { at, nslots - 1, lo, hi - lo, 0, shift };
    memcpy(t, hdr, sizeof(hdr));
    return 0;
}

/*
 * The moved code is written on the pool, EMIT_GRAIN slots at a time: each slot's bytes
 * go to their own place in the buffer and depend on the plan alone, so the code is the
 * same for any number of threads. What a slot takes from a sequence (the next of
 * plan->fall, the lock sites) is counted per part ahead, or gathered per part and joined
 * in layout order.
 */
#define EMIT_GRAIN 4096

/* Parts emitted between two releases of the input's pages (cfg_image_release_pages): the
 * old code they read comes back from the page cache when read again, and the input is
 * not resident beside the new code (chromium: its 236 MB of text, 1M slots a batch). */
#define EMIT_BATCH 256

typedef struct emit_job {
    const ed_plan_t *plan;
    const emit_dst_t *dst;       /* where the new code goes */
    size_t first;                /* the batch's first part */
    size_t *fall;                /* per part: the first of plan->fall its slots use */
    edl_lock_sites_t *sites;         /* per part: its switchable increments */
    size_t nslot_parts;          /* the slots' parts; the stubs' come after */
} emit_job_t;

/* Taken-edge stubs written a part at a time too (after the slots' parts: their lock
 * sites follow the slots'); on the main thread alone they were cc1's 0.2 G
 * instructions. */
#define STUB_GRAIN 4096

/* The taken-edge stubs [K, K + 1) * STUB_GRAIN of J: the snippets, then a jmp to where
 * the branch used to go (none when the stub falls into its target; its target as the
 * layout decoded it: the old code is not read again). */
static int
emit_stubs_part(const emit_job_t *j, size_t k)
{
    const ed_plan_t *plan = j->plan;
    edl_lock_sites_t *sites = &j->sites[j->nslot_parts + k];
    size_t end = (k + 1) * STUB_GRAIN < plan->nstubs ? (k + 1) * STUB_GRAIN : plan->nstubs;
    for (size_t i = k * STUB_GRAIN; i < end; i++) {
        const ed_stub_t *st = &plan->stubs[i];
        uint8_t *out = emit_ptr(j->dst, st->new_ - plan->text);
        uint32_t jmp = st->before == NO_STUB ? PAD_LEN(plan) : 0; /* else it falls in */
        int n = edl_emit_probes(plan, st->jcc, ED_AT_TAKEN, st->new_, out, st->len - jmp, sites);
        if (n != (int)(st->len - jmp))
            return n < 0 ? n : QP_ERANGE;
        if (jmp == 0)
            continue;
        QP_CHECK(plan->isa->emit_jmp(st->new_ + (uint64_t)n,
                                     edl_map_branch(plan, st->jcc, st->target), out + n,
                                     PAD_LEN(plan)));
    }
    return 0;
}

/* qp_task_fn: the slots of part K of the emit_job_t ARG (or its stubs' part, past the
 * slots' parts). */
static int
emit_part(void *arg, unsigned worker, size_t k)
{
    (void)worker;
    const emit_job_t *j = arg;
    k += j->first;
    if (k >= j->nslot_parts)
        return emit_stubs_part(j, k - j->nslot_parts);
    const ed_plan_t *plan = j->plan;
    const cfg_prog_t *prog = plan->prog;
    const emit_dst_t *dst = j->dst;
    edl_lock_sites_t *sites = &j->sites[k];
    int stretch = plan->opts.stretch ? 1 : 0;
    size_t fall = j->fall[k]; /* the next of plan->fall */
    size_t end = (k + 1) * EMIT_GRAIN < plan->nslots ? (k + 1) * EMIT_GRAIN : plan->nslots;
    for (size_t i = k * EMIT_GRAIN; i < end; i++) {
        const ed_slot_t *s = &plan->lay[i];
        const uint64_t old = slot_old(plan, s), at_new = slot_new(plan, s);
        const uint8_t *bytes = cfg_image_ptr(prog->img, old, NULL);
        arch_insn_t in;
        if (bytes == NULL || cfg_image_decode(prog->img, old, 0, &in) < 0)
            return QP_EDECODE;
        uint64_t insn = at_new + s->pre;
        uint64_t target = 0;
        if (in.kind == ARCH_KIND_JMP || in.kind == ARCH_KIND_JCC || in.kind == ARCH_KIND_CALL)
            /* `call next` (reads its own return address) keeps going to the next
             * relocated instruction; a jump to the next address goes where that code is
             * (another procedure's, maybe not moved at all). */
            target = in.kind == ARCH_KIND_CALL && in.target == old + in.len
                ? insn + s->len - stretch
                : in.kind == ARCH_KIND_CALL ? edl_map_target(plan, in.target)
                                            : edl_map_branch(plan, old, in.target);
        if (s->stub != NO_STUB)
            target = plan->stubs[s->stub].new_;
        /* An AArch64 switch table's adr forms its new base (ed_anchor.c). */
        const ed_anchor_t *anchor = plan->nanchors > 0 ? edl_anchor_at(plan, old) : NULL;
        if (anchor != NULL)
            in.target = anchor->base;
        uint8_t *out = emit_ptr(dst, at_new - plan->text);
        if (s->pre > 0
            && edl_emit_probes(plan, old, ED_AT_BEFORE, at_new, out, s->pre, sites) != s->pre)
            return QP_ERANGE;
        out += s->pre;
        int len = (s->flags & SLOT_XLATE)
            ? plan->isa->emit_jmp_xlate(bytes, &in, insn, plan->xlate,
                                        edl_xlate_miss_rel(plan, old), out, ARCH_MAX_RELOC)
            : plan->isa->reloc_insn(bytes, &in, insn, target, (s->flags & SLOT_SHORT) != 0, out,
                                    ARCH_MAX_RELOC);
        QP_CHECK(len);
        /* A form shorter than the layout's bound (AArch64: an adr or ldr literal whose
         * data the new address still reaches) is padded with nops. */
        if (len + stretch < s->len && !(s->flags & SLOT_XLATE)) {
            int n = plan->isa->emit_nops((size_t)(s->len - stretch - len), out + len,
                                         (size_t)(s->len - stretch - len));
            QP_CHECK(n);
            len += n;
        }
        if (len + stretch != s->len)
            return QP_ERANGE; /* the layout assumed another size: never silently wrong */
        if (stretch)
            out[len] = 0x90;
        if (s->post > 0
            && edl_emit_probes(plan, old, ED_AT_AFTER, insn + s->len, out + s->len, s->post, sites)
                   != s->post)
            return QP_ERANGE;
        if (s->flags & SLOT_JMP_AFTER) {
            if (fall >= plan->nfall)
                return QP_ERANGE;
            uint64_t at = insn + s->len + s->post;
            QP_CHECK(plan->isa->emit_jmp(at, edl_map_branch(plan, old, plan->fall[fall++]),
                                         emit_ptr(dst, at - plan->text), PAD_LEN(plan)));
        }
    }
    return 0;
}

/* qp_parallel_for's progress: "relocating... 45%" by slots. */
static void
emit_progress(void *arg, size_t done)
{
    const emit_job_t *j = arg;
    const ed_plan_t *plan = j->plan;
    done += j->first;
    size_t slots = done < j->nslot_parts ? done * EMIT_GRAIN : plan->nslots;
    if (plan->opts.on_progress != NULL)
        plan->opts.on_progress(plan->opts.progress_arg,
                               slots < plan->nslots ? slots : plan->nslots, plan->nslots);
}

/* The lock sites of parts [FROM, TO) appended to ALL in layout order, their vectors
 * freed. 0 or QP_ENOMEM. */
static int
join_sites(edl_lock_sites_t *all, edl_lock_sites_t *sites, size_t from, size_t to)
{
    int rc = 0;
    for (size_t k = from; k < to; k++) {
        for (size_t i = 0; rc == 0 && i < sites[k].n; i++)
            rc = edl_note_lock_site(all, sites[k].v[i]);
        free(sites[k].v);
        sites[k] = (edl_lock_sites_t) { NULL, 0, 0 };
    }
    return rc;
}

/* The moved slots and the taken-edge stubs into DST on the pool (EMIT_GRAIN slots or
 * STUB_GRAIN stubs at a time), their lock sites into the plan in layout order, the
 * stubs' after (joined after each batch: the parts' vectors are not all held beside
 * the plan's). */
static int
emit_slots(ed_plan_t *plan, const emit_dst_t *dst)
{
    size_t nslot_parts = (plan->nslots + EMIT_GRAIN - 1) / EMIT_GRAIN;
    size_t nparts = nslot_parts + (plan->nstubs + STUB_GRAIN - 1) / STUB_GRAIN;
    size_t *fall = malloc((nparts + 1) * sizeof(size_t));
    edl_lock_sites_t *sites = calloc(nparts + 1, sizeof(edl_lock_sites_t));
    int rc = fall != NULL && sites != NULL ? 0 : QP_ENOMEM;
    for (size_t k = 0, n = 0; rc == 0 && k < nslot_parts; k++) {
        fall[k] = n;
        size_t end = (k + 1) * EMIT_GRAIN < plan->nslots ? (k + 1) * EMIT_GRAIN : plan->nslots;
        for (size_t i = k * EMIT_GRAIN; i < end; i++)
            n += (plan->lay[i].flags & SLOT_JMP_AFTER) != 0;
    }
    emit_job_t job = { .plan = plan, .dst = dst, .fall = fall, .sites = sites,
                       .nslot_parts = nslot_parts };
    edl_lock_sites_t all = { plan->lock_sites, plan->nlock_sites, plan->lock_cap };
    for (; rc == 0 && job.first < nparts; job.first += EMIT_BATCH) {
        cfg_image_release_pages(plan->prog->img);
        size_t n = nparts - job.first < EMIT_BATCH ? nparts - job.first : EMIT_BATCH;
        rc = qp_parallel_for(plan->opts.threads, n, 1, emit_part, &job, emit_progress);
        int jrc = join_sites(&all, sites, job.first, job.first + n);
        rc = rc < 0 ? rc : jrc;
    }
    cfg_image_release_pages(plan->prog->img);
    for (size_t k = 0; sites != NULL && k < nparts; k++)
        free(sites[k].v); /* (parts not joined after an error) */
    plan->lock_sites = all.v;
    plan->nlock_sites = all.n;
    plan->lock_cap = all.cap;
    free(sites);
    free(fall);
    return rc;
}

/*
 * The buffer the new code is emitted to: mapped apart, so that the pages of each piece
 * the space has copied can go back at once (chromium: the new code's few hundred MB are
 * not held twice at the end of the relocation).
 */
typedef struct emit_buf {
    uint8_t *p;    /* SIZE bytes, zero-filled */
    size_t size;   /* bytes mapped */
    size_t gone;   /* the pages below this offset are given back */
} emit_buf_t;

static int
emit_buf_map(emit_buf_t *b, size_t size)
{
    b->size = size;
    b->gone = 0;
    b->p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return b->p != MAP_FAILED ? 0 : (b->p = NULL, QP_ENOMEM);
}

/* A piece of the new code larger than this is written through the space this much at a
 * time, its pages given back after each: the copy does not hold it twice (chromium: the
 * overflow of the reused text, most of the new code, is one piece). */
#define EMIT_WRITE_STEP ((size_t)4 << 20)

/* Write [OFF, OFF + LEN) of B to AT in the space, then give back the pages below its
 * end: the pieces are written in address order and do not overlap, and the bytes between
 * them are no code (chromium's holes in the old text are small: given back piece by
 * piece, the pages they share stayed, the reused code held twice). */
static int
emit_buf_write(emit_buf_t *b, size_t off, size_t len, const qp_space_ops_t *ops,
               void *space, uint64_t at)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (off < b->gone)
        return QP_EBUG; /* a piece below one written: its bytes may be gone */
    size_t lo = b->gone; /* the first page not given back */
    for (size_t done = 0; done < len;) {
        size_t n = len - done > EMIT_WRITE_STEP ? EMIT_WRITE_STEP : len - done;
        QP_CHECK(ops->write(space, at + done, b->p + off + done, n));
        done += n;
        size_t hi = (off + done) / page * page; /* (a last page shared with the rest) */
        if (hi > lo)
            (void)madvise(b->p + lo, hi - lo, MADV_DONTNEED); /* (reads would see zeros) */
        lo = hi > lo ? hi : lo;
    }
    b->gone = lo;
    return 0;
}

/* The moved code in layout order, emitted into the space's bytes or written through it
 * (emit_dst_t). */
static int
emit_code(ed_plan_t *plan, const qp_space_ops_t *ops, void *space)
{
    /* Zeroed, the buffer and the space's new memory: the bytes nothing is emitted to
     * (alignment before the translation table) are then the same in every run, whatever
     * the heap held. */
    uint64_t split = plan->mirror != 0 ? plan->overflow : 0;
    uint8_t *direct = ops->bytes != NULL && plan->text_size > split
        ? ops->bytes(space, plan->text + split, plan->text_size - split) : NULL;
    emit_buf_t eb;
    if (emit_buf_map(&eb, (direct != NULL ? split : plan->text_size) + 1) < 0)
        return QP_ENOMEM;
    emit_dst_t dst = { eb.p, direct != NULL ? direct : eb.p + split, split };
    /* The input's pages go before the new code's come (emit_slots reads the old code a
     * batch at a time). */
    cfg_image_release_pages(plan->prog->img);
    /* Holes in the old text: what no code fills traps (int3), never old code. */
    for (size_t h = 0; h < plan->nholes; h++)
        if (plan->holes[3 * h + 2] > 0)
            memset(eb.p + plan->holes[3 * h], 0xcc, plan->holes[3 * h + 1] - plan->holes[3 * h]);
    int rc = emit_slots(plan, &dst);
    if (rc == 0 && plan->nxlate > 0)
        rc = emit_xlate(plan, &dst);
    if (rc == 0 && plan->nanchors > 0 && split != 0)
        rc = QP_EBUG; /* AArch64 reuses no old text (TODO(#34)): the new code is one piece */
    if (rc == 0)
        edl_anchors_unpad(plan, emit_ptr(&dst, 0));
    /* The last reader of the decoded instructions (the anchors' unpadding decodes a few
     * again): they go before the new code is written (chromium: 0.5 GiB). What decodes
     * later decodes anew, into a cache of its own. */
    cfg_image_decode_done(plan->prog->img);
    if (rc == 0 && plan->mirror == 0 && direct == NULL)
        rc = emit_buf_write(&eb, 0, plan->text_size, ops, space, plan->text);
    for (size_t h = 0; h < plan->nholes && rc == 0 && plan->mirror != 0; h++) {
        const uint64_t *hole = &plan->holes[3 * h];
        if (hole[2] > 0)
            rc = emit_buf_write(&eb, hole[0], hole[1] - hole[0], ops, space,
                                plan->text + hole[0]);
    }
    if (rc == 0 && plan->mirror != 0 && plan->text_size > plan->overflow && direct == NULL)
        rc = emit_buf_write(&eb, plan->overflow, plan->text_size - plan->overflow, ops,
                            space, plan->text + plan->overflow);
    munmap(eb.p, eb.size);
    if (rc == 0 && plan->opts.on_progress != NULL)
        plan->opts.on_progress(plan->opts.progress_arg, plan->nslots, plan->nslots);
    return rc;
}

/* A jmp to the new code at every entry and indirect target in the old bytes. */
static int
emit_pads(ed_plan_t *plan, const qp_space_ops_t *ops, void *space)
{
    const cfg_prog_t *prog = plan->prog;
    edl_pads_t all;
    QP_CHECK(edl_pads_all(plan, &all));
    int rc = 0;
    for (uint32_t pi = 0; pi < prog->nprocs && rc == 0; pi++) {
        if (plan->reason[pi] != NULL || (prog->procs[pi].flags & CFG_PROC_FRAGMENT))
            continue;
        const uint64_t *pads = all.v + all.off[pi];
        size_t npads = all.off[pi + 1] - all.off[pi];
        for (size_t k = 0; k < npads && rc == 0; k++) {
            uint8_t jmp[ARCH_MAX_INSN];
            if (edl_dropped_at(plan, pads[k]) != CFG_NONE)
                continue; /* only direct branches of moved code reach it */
            const ed_slot_t *s = edl_slot_at(plan, pads[k]);
            if (s == NULL)
                rc = QP_ENOTFOUND;
            else if ((rc = plan->isa->emit_jmp(pads[k], slot_new(plan, s), jmp, sizeof(jmp))) > 0)
                rc = ops->write(space, pads[k], jmp, PAD_LEN(plan));
        }
        plan->stats.npads += (uint32_t)npads;
        plan->stats.nind_pads += all.nind[pi];
    }
    edl_pads_free(&all);
    return rc;
}

/*
 * Proven jump tables of moved procedures point straight at the new code: one jump per
 * dispatch less than going through the redirect at the old case address (the
 * interpreter loops of lua and sqlite dispatch millions of times). Only tables whose
 * bound a guarding compare proves, whose every user is a moved procedure, and whose
 * entries can be rewritten without a dynamic relocation: 4-byte entries relative to a
 * base, or 8-byte absolute entries in a program that is not position independent (in a
 * PIE those are relocated at load time from addends, which stay as they are here;
 * edl_retarget_labels rewrites the addends of such tables, and of unbounded ones, that
 * it proves only their procedure reads). The redirects stay too, for anything else that
 * reaches the old addresses.
 */
static int
retarget_tables(ed_plan_t *plan, const qp_space_ops_t *ops, void *space)
{
    const cfg_prog_t *prog = plan->prog;
    int pie = (prog->img->flags & CFG_IMG_PIE) != 0;
    for (uint32_t t = 0; t < prog->ntables; t++) {
        const cfg_table_t *tb = &prog->tables[t];
        if (!tb->bounded || tb->nentries == 0 || tb->shift != 0 || tb->zext
            || !(tb->relative ? tb->entry_size == 4 : tb->entry_size == 8 && !pie))
            continue; /* (edl_table_sure's tables) */
        /* Every jump that uses these entries must be in moved code. A table no other
         * shares bytes with (plan->table_alone: a scan of every table for each was
         * quadratic, cc1's 3,060 tables 0.16 G instructions) has its own jump alone. */
        int ok = 1;
        if (plan->table_alone[t])
            ok = edl_slot_at(plan, tb->jump) != NULL;
        for (uint32_t u = 0; u < prog->ntables && ok && !plan->table_alone[t]; u++) {
            const cfg_table_t *o = &prog->tables[u];
            uint64_t oend = o->addr + (uint64_t)o->nentries * o->entry_size;
            uint64_t tend = tb->addr + (uint64_t)tb->nentries * tb->entry_size;
            if (o->addr < tend && tb->addr < oend && (edl_slot_at(plan, o->jump) == NULL || u < t))
                ok = 0; /* used by code that stays, or already seen (write bytes once) */
        }
        if (!ok)
            continue;
        /* Its cases got no redirects (edl_collect_pads): every entry must be rewritten. */
        uint32_t owner = edl_owner_at(prog, tb->jump);
        int sure = owner != CFG_NONE && plan->reason[owner] == NULL && edl_table_sure(plan, t, owner);
        size_t avail;
        const uint8_t *old = cfg_image_ptr(prog->img, tb->addr, &avail);
        size_t len = (size_t)tb->nentries * tb->entry_size;
        if (old == NULL || avail < len) {
            if (sure)
                return QP_EFORMAT;
            continue;
        }
        uint8_t *buf = malloc(len);
        if (buf == NULL)
            return QP_ENOMEM;
        memcpy(buf, old, len);
        uint32_t changed = 0;
        for (uint32_t i = 0; i < tb->nentries; i++) {
            uint8_t *e = buf + (size_t)i * tb->entry_size;
            uint64_t target;
            if (tb->relative) {
                int32_t rel;
                memcpy(&rel, e, 4);
                target = tb->base + (uint64_t)(int64_t)rel;
            } else
                memcpy(&target, e, 8);
            const ed_slot_t *s = edl_slot_at(plan, target);
            if (s == NULL && sure && edl_owner_at(prog, target) == owner) {
                free(buf);
                return QP_ERANGE; /* a case of moved code without its redirect */
            }
            if (s == NULL)
                continue; /* not moved: the entry stays */
            if (tb->relative) {
                int64_t rel = (int64_t)(slot_new(plan, s) - tb->base);
                if (rel < INT32_MIN || rel > INT32_MAX) {
                    if (sure) {
                        free(buf);
                        return QP_ERANGE;
                    }
                    continue;
                }
                int32_t r32 = (int32_t)rel;
                memcpy(e, &r32, 4);
            } else {
                uint64_t na = slot_new(plan, s);
                memcpy(e, &na, 8);
            }
            changed++;
        }
        int rc = changed ? ops->write(space, tb->addr, buf, len) : 0;
        free(buf);
        QP_CHECK(rc);
        if (changed) {
            plan->stats.ntables++;
            plan->stats.ntable_entries += changed;
        }
    }
    return 0;
}

/*
 * The addresses the program holds inside a block of a moved procedure, not at its start
 * (never a redirect: entered there, the old code runs, unmeasured), for the report
 * (plan->stats.nheld_inside). Immediates and data words count only at block starts: a
 * number that falls inside the text is no pointer.
 */
static int
count_held_inside(ed_plan_t *plan)
{
    uint64_t *mid;
    size_t n;
    QP_CHECK(edl_held_mid_block(plan->prog, &mid, &n));
    for (size_t i = 0; i < n; i++) {
        uint32_t o = edl_owner_at(plan->prog, mid[i]);
        if (o == CFG_NONE || plan->reason[o] != NULL)
            continue;
        if (plan->stats.nheld_inside++ == 0)
            plan->stats.held_inside = mid[i];
    }
    free(mid);
    return 0;
}

int
ed_plan_apply(ed_plan_t *plan, const qp_space_ops_t *ops, void *space)
{
    if (plan == NULL || ops == NULL)
        return QP_EINVAL;
    /* The points in place first: what their patching allocates for a while (the
     * program's block starts, held addresses) is freed before the slots are. */
    QP_CHECK(edl_inplace_apply(plan, ops, space));
    /* The input's pages the analysis and the drivers read (its data, its relocations)
     * are not resident beside the slots; the layout reads the moved code's again. */
    cfg_image_release_pages(plan->prog->img);
    if (plan->opts.on_phase != NULL)
        plan->opts.on_phase(plan->opts.phase_arg, "patched in place");
    if (!plan->laid_out) {
        QP_CHECK(edl_layout(plan, plan->opts.reuse_text && ops->alloc_over != NULL));
        if (plan->opts.on_phase != NULL)
            plan->opts.on_phase(plan->opts.phase_arg, "laid out");
    }
    if (plan->nslots == 0)
        return 0;
    /* The new code must reach the whole image (rip-relative data, calls to code that
     * stays) with rel32. */
    const cfg_image_t *img = plan->prog->img;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < img->nsections; i++)
        if (img->sections[i].flags & CFG_SEC_ALLOC) {
            if (img->sections[i].vma < lo)
                lo = img->sections[i].vma;
            if (img->sections[i].vma + img->sections[i].size > hi)
                hi = img->sections[i].vma + img->sections[i].size;
        }
    if (plan->mirror != 0) {
        size_t skip = 0;
        QP_CHECK(ops->alloc_over(space, lo, hi, plan->mirror, plan->mirror_len,
                                 plan->text_size - plan->overflow, ED_PROT_R | ED_PROT_X,
                                 &plan->text, &skip));
        if (skip % 64 != 0)
            return QP_ERANGE;
        if (plan->text_size + skip > UINT32_MAX)
            return QP_ERANGE; /* slots hold 32-bit offsets */
        QP_CHECK(shift_overflow(plan, skip));
    } else
        QP_CHECK(ops->alloc_near(space, lo, hi, plan->text_size, ED_PROT_R | ED_PROT_X,
                                 &plan->text));
    rebase(plan, plan->text);
    plan->stats.bytes_new = plan->mirror != 0
        ? plan->stats.bytes_reused + plan->text_size - plan->overflow : plan->text_size;
    plan->stats.nprobes = (uint32_t)plan->nprobes;
    plan->stats.nstubs = (uint32_t)plan->nstubs;
    plan->stats.nxlate = (uint32_t)plan->nxlate;
    QP_CHECK(count_held_inside(plan));
    for (size_t i = 0; i < plan->nprobes; i++)
        plan->stats.nflag_saves += plan->probes[i].save_flags != 0;
    for (size_t i = 0; i < plan->nslots; i++)
        plan->stats.bytes_probes += plan->lay[i].pre + plan->lay[i].post;
    for (size_t i = 0; i < plan->nstubs; i++)
        plan->stats.bytes_probes += plan->stubs[i].len;
    if (!plan->opts.keep_tables)
        QP_CHECK(edl_anchors_plan(plan));
    if (plan->opts.on_phase != NULL)
        plan->opts.on_phase(plan->opts.phase_arg, "new code placed");
    /* The tables of labels before the new code: their check decodes every block of the
     * program, through the decoded instructions that emit_code lets go (the tables need
     * the new addresses only). */
    if (!plan->opts.keep_tables) {
        QP_CHECK(edl_retarget_labels(plan, ops, space));
        if (plan->opts.on_phase != NULL) /* (what the check allocated goes back) */
            plan->opts.on_phase(plan->opts.phase_arg, "tables of labels retargeted");
    }
    QP_CHECK(emit_code(plan, ops, space));
    if (plan->opts.on_phase != NULL) /* (the decoded instructions' memory goes back) */
        plan->opts.on_phase(plan->opts.phase_arg, "new code emitted");
    QP_CHECK(emit_pads(plan, ops, space));
    QP_CHECK(edl_retarget_kept_calls(plan, ops, space));
    if (plan->opts.keep_tables)
        return 0;
    QP_CHECK(edl_anchors_apply(plan, ops, space));
    return retarget_tables(plan, ops, space);
}
