/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The relocation plan: which procedures move, where each of their instructions goes,
 * and the bytes of the new code. Every moved instruction is re-encoded at its new address
 * by arch_reloc_insn; direct branches go through one global old-to-new map (so tail calls
 * and jumps between a procedure and its cold fragment stay right); rip-relative operands
 * keep addressing the same data. The old bytes of a moved procedure become its
 * translation table (seed 004, section 3.2, adapted to x86-64): a `jmp` to the new code
 * at its entry and at every indirect-jump target (jump-table cases, address-taken labels,
 * interior entries), so function pointers, vtables, callbacks, signal handlers and
 * jump tables - which keep their old values, data never changes - all land in new code.
 * Each such dispatch costs one extra direct jump; procedures whose redirects do not fit
 * stay in place.
 *
 * Layout is two passes over the moving code: sizes with long (rel32) branches, then rel8
 * wherever the target is in reach in that layout - shrinking code only brings targets
 * closer, so the choice stays valid - and the final addresses.
 *
 * This file: the slots and their lookup, the probes' snippets sized and emitted, the
 * layout passes. ed_plan.c: the public calls, writing the new code and applying the plan.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/qp_pool.h"
#include "editor/ed.h"

#include "editor/ed_layout_priv.h"

/*****************************************************************************
 * Layout
 */

/* The position (in idx) of the first slot at OLD or above; nslots when there is none. */
size_t
edl_slot_lower(const ed_plan_t *plan, uint64_t old)
{
    size_t lo, hi;
    qp_buckets_range(&plan->buckets, plan->nslots, old, &lo, &hi);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (slot_old(plan, SLOT(plan, mid)) < old)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The slot of the instruction at OLD, or NULL. */
static ed_slot_t *
slot_at(const ed_plan_t *plan, uint64_t old)
{
    size_t lo = edl_slot_lower(plan, old);
    return lo < plan->nslots && slot_old(plan, SLOT(plan, lo)) == old ? SLOT(plan, lo) : NULL;
}

uint64_t
edl_slot_new(const ed_plan_t *plan, uint64_t old)
{
    const ed_slot_t *s = slot_at(plan, old);
    return s != NULL ? slot_new(plan, s) : 0;
}

uint64_t
edl_slot_insn(const ed_plan_t *plan, uint64_t old)
{
    const ed_slot_t *s = slot_at(plan, old);
    return s != NULL ? slot_new(plan, s) + s->pre : 0;
}

const ed_slot_t *
edl_slot_at(const ed_plan_t *plan, uint64_t old)
{
    return slot_at(plan, old);
}

/* The old address of the slot at position I of idx (qp_bucket_key_fn). */
static uint64_t
slot_key(const void *ctx, size_t i)
{
    const ed_plan_t *plan = ctx;
    return slot_old(plan, SLOT(plan, i));
}

/* Build plan->buckets from plan->idx. */
static int
index_buckets(ed_plan_t *plan)
{
    if (plan->nslots == 0)
        return 0;
    return qp_buckets_build(&plan->buckets, slot_old(plan, SLOT(plan, 0)), BUCKET_SHIFT,
                            plan->nslots, slot_key, plan) < 0
        ? QP_ENOMEM
        : 0;
}

size_t
edl_seg_after(const ed_plan_t *plan, uint64_t old)
{
    size_t lo = 0, hi = plan->nsegs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (plan->segs[mid].end <= old)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

const ed_seg_t *
edl_seg_at(const ed_plan_t *plan, uint64_t old, size_t *idx)
{
    size_t lo = edl_seg_after(plan, old);
    if (lo < plan->nsegs && plan->segs[lo].start <= old) {
        if (idx)
            *idx = lo;
        return &plan->segs[lo];
    }
    return NULL;
}

/* Can control fall off the end of block B (into the next address)? */
static int
falls_through(const cfg_prog_t *prog, const cfg_block_t *b, uint64_t *to /*OUT*/)
{
    for (uint32_t e = 0; e < b->nsucc; e++) {
        const cfg_edge_t *ed = cfg_block_succ(prog, b, e);
        if ((ed->kind == CFG_EDGE_FALL || ed->kind == CFG_EDGE_CALLRET) && ed->to != CFG_NONE) {
            *to = prog->blocks[ed->to].start;
            return 1;
        }
    }
    switch (b->last_kind) {
    case ARCH_KIND_JMP:
    case ARCH_KIND_JMP_IND:
    case ARCH_KIND_RET:
    case ARCH_KIND_HALT: return 0;
    default: break;
    }
    /* Falls through padding into the next procedure: a tail-call edge to it. */
    for (uint32_t e = 0; e < b->nsucc; e++) {
        const cfg_edge_t *ed = cfg_block_succ(prog, b, e);
        if (ed->kind == CFG_EDGE_TAILCALL && ed->target >= b->end && ed->target < b->end + 64) {
            *to = ed->target;
            return 1;
        }
    }
    return 0;
}

/*
 * How block PREV, laid out just before the block at START, ends (ed_block_fall_free): 1,
 * nothing falls from it into that block (it ends in a jump, a return or a halt, or falls
 * through elsewhere: then a jmp is added); 2, it falls into it, not as a call's return,
 * and could jump there instead; 0 otherwise (a call that CFG says never returns is not
 * trusted to stay there).
 */
static int
ends_apart(const cfg_prog_t *prog, const cfg_block_t *prev, uint64_t start)
{
    uint64_t to;
    if (falls_through(prog, prev, &to))
        return to != start ? 1
            : prev->last_kind != ARCH_KIND_CALL && prev->last_kind != ARCH_KIND_CALL_IND ? 2 : 0;
    switch (prev->last_kind) {
    case ARCH_KIND_JMP:
    case ARCH_KIND_JMP_IND:
    case ARCH_KIND_RET:
    case ARCH_KIND_HALT: return 1;
    default: return 0;
    }
}

/* How many of procedure P's blocks are laid out before its entry, into *K0 (returned
 * too): cfg/ puts the entry first in P's blocks and the rest by address; the layout
 * (collect_slots) takes those below the entry, the entry, then the rest. */
static uint32_t
layout_rank(const cfg_prog_t *prog, const cfg_proc_t *p, uint32_t *k0)
{
    uint64_t entry = prog->blocks[p->block].start;
    *k0 = 0;
    for (uint32_t k = 1; k < p->nblocks; k++)
        if (*k0 == k - 1 && prog->blocks[p->block + k].start < entry)
            *k0 = k;
    return *k0;
}

int
ed_block_fall_free(const cfg_prog_t *prog, uint32_t proc, uint32_t block)
{
    if (proc >= prog->nprocs)
        return 0;
    const cfg_proc_t *p = &prog->procs[proc];
    if (block <= p->block || block >= p->block + p->nblocks)
        return 0; /* the entry, or not the procedure's */
    /* layout_rank's K0 by binary search (the blocks after the entry are sorted): drivers
     * ask for every taken edge, and procedures have thousands of blocks. */
    uint64_t entry = prog->blocks[p->block].start;
    uint32_t lo = 1, hi = p->nblocks, k = block - p->block;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (prog->blocks[p->block + mid].start < entry)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint32_t k0 = lo - 1;
    /* The block laid out before it: the entry follows the blocks below it. */
    uint32_t prev = k == 1 ? (k0 >= 1 ? CFG_NONE : p->block) : k == k0 + 1 ? p->block
                                                                            : block - 1;
    if (prev == CFG_NONE)
        return 0; /* laid out first */
    return ends_apart(prog, &prog->blocks[prev], prog->blocks[block].start);
}

/*****************************************************************************
 * Probes
 */

/* The longest snippet: flags save + locked increment + flags restore (x86-64), the
 * spilled ldxr/stxr increment (AArch64, 40 bytes). */
#define SNIPPET_MAX 64

/* Order of snippets at one place: a forked child must move to its own counters before
 * it counts anything. */
static int
snip_rank(uint8_t what)
{
    return what == ED_SNIP_FORK_HOOK ? -1 : what;
}

int
edl_cmp_probe(const void *a, const void *b)
{
    const ed_probe_t *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    if (x->at != y->at)
        return x->at < y->at ? -1 : 1;
    if ((x->flags & ED_PROBE_ENTRY) != (y->flags & ED_PROBE_ENTRY))
        return (x->flags & ED_PROBE_ENTRY) ? -1 : 1; /* calls only: first */
    if (x->what != y->what)
        return snip_rank(x->what) < snip_rank(y->what) ? -1 : 1;
    return x->counter < y->counter ? -1 : x->counter > y->counter;
}

/* Note the switchable increment at ADDR (SITES: when writing; NULL when sizing). */
int
edl_note_lock_site(edl_lock_sites_t *sites, uint64_t addr)
{
    return sites != NULL ? edl_push_u64(&sites->v, &sites->n, &sites->cap, addr) : 0;
}

/*
 * Counter probe P at ADDR into OUT: one added to its counter (REG ARCH_REG_NONE), or
 * register REG added or subtracted (SUB: ED_SNIP_COUNT_REG). x86-64 saves the flags
 * around the instruction where they are live, AArch64's increments write no flags.
 * SITES (NULL when sizing) gets its switchable first byte.
 */
static int
emit_count(const ed_plan_t *plan, const ed_probe_t *p, uint8_t reg, int sub, uint64_t addr,
           uint8_t *out, size_t cap, edl_lock_sites_t *sites)
{
    arch_snip_ctx_t ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.live_flags = p->save_flags ? ARCH_FLAGS_STATUS : 0;
    if (reg != ARCH_REG_NONE && plan->isa->emit_counter_add_reg_at == NULL)
        return QP_EUNSUPP;
    if (plan->opts.atomic == ARCH_INC_SWITCH) { /* its first byte: after the save */
        uint8_t save[ARCH_MAX_RELOC];
        int k = p->save_flags ? plan->isa->emit_flags_save(save, sizeof(save)) : 0;
        QP_CHECK(k);
        QP_CHECK(edl_note_lock_site(sites, addr + (uint64_t)k));
    }
    uint64_t counter = plan->counters + 8ull * p->counter;
    return reg == ARCH_REG_NONE
        ? plan->isa->emit_counter_inc_at(addr, counter, plan->opts.atomic, &ctx, out, cap)
        : plan->isa->emit_counter_add_reg_at(addr, counter, plan->opts.atomic, reg, sub, &ctx,
                                             out, cap);
}

/*
 * The snippet of probe P at ADDR into OUT. Its size does not depend on ADDR. SITES (or
 * NULL when only sizing) collects where switchable increments go.
 */
static int
emit_snippet(const ed_plan_t *plan, const ed_probe_t *p, uint64_t addr, uint8_t *out, size_t cap,
             edl_lock_sites_t *sites)
{
    switch (p->what) {
    case ED_SNIP_COUNT:
        return emit_count(plan, p, ARCH_REG_NONE, 0, addr, out, cap, sites);
    case ED_SNIP_EXIT_HOOK:
        return plan->isa->emit_call_protected(addr, plan->exit_hook, out, cap);
    case ED_SNIP_FORK_HOOK:
        return plan->isa->emit_call_protected(addr, plan->fork_hook, out, cap);
    case ED_SNIP_THREAD_HOOK:
        return plan->isa->emit_call_protected(addr, plan->thread_hook, out, cap);
    case ED_SNIP_EXEC_HOOK:
        return plan->isa->emit_call_protected(addr, plan->exec_hook, out, cap);
    case ED_SNIP_CODE: {
        if (p->counter >= plan->nsnips)
            return QP_EINVAL;
        if (plan->isa != arch_isa_host())
            return QP_EUNSUPP; /* TODO(#34): arch_snip_emit is x86-64's */
        const ed_snippet_t *sn = &plan->snips[p->counter];
        arch_snip_ctx_t ctx = sn->ctx;
        if (p->save_flags)
            ctx.live_flags = ARCH_FLAGS_STATUS;
        return arch_snip_emit(sn->nodes, sn->n, sn->root, &ctx, addr, out, out ? cap : 0);
    }
    default: {
        uint8_t reg;
        int sub;
        if (ed_snip_count_reg(p->what, &reg, &sub))
            return emit_count(plan, p, reg, sub, addr, out, cap, sites);
        return QP_EINVAL;
    }
    }
}

static size_t probes_from(const ed_plan_t *plan, uint64_t old);

/*
 * Emit (or size, with OUT NULL) the snippets of the probes at (OLD, AT) from ADDR into OUT
 * (CAP bytes); with ENTRY_ONLY only those of ED_PROBE_ENTRY probes (they come first).
 * K0: the first probe at OLD or above (probes_from's; a caller that has it saves the
 * search: sizing asks four times per instruction). Returns their total size.
 */
static int
emit_probes_part(const ed_plan_t *plan, size_t k0, uint64_t old, int at, int entry_only,
                 uint64_t addr, uint8_t *out, size_t cap, edl_lock_sites_t *sites)
{
    uint8_t scratch[SNIPPET_MAX];
    int total = 0;
    for (size_t k = k0; k < plan->nprobes && plan->probes[k].addr == old; k++) {
        const ed_probe_t *p = &plan->probes[k];
        if (p->at != at || (entry_only && !(p->flags & ED_PROBE_ENTRY)))
            continue;
        int n;
        if (out != NULL)
            n = emit_snippet(plan, p, addr + (uint64_t)total, out + total, cap - (size_t)total,
                             sites);
        else if (p->what == ED_SNIP_CODE) /* any length: sized without a buffer */
            n = emit_snippet(plan, p, addr, NULL, 0, NULL);
        else
            n = emit_snippet(plan, p, addr, scratch, sizeof(scratch), NULL);
        if (n < 0)
            return n;
        total += n;
    }
    return total;
}

/* Index of the first probe at OLD or above. */
static size_t
probes_from(const ed_plan_t *plan, uint64_t old)
{
    size_t lo = 0, hi = plan->nprobes;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (plan->probes[mid].addr < old)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/*
 * Emit the snippets of the probes at (OLD, AT) from ADDR into OUT (CAP bytes); returns
 * their total size. With OUT == NULL only sizes them.
 */
int
edl_emit_probes(const ed_plan_t *plan, uint64_t old, int at, uint64_t addr, uint8_t *out,
                size_t cap, edl_lock_sites_t *sites)
{
    return emit_probes_part(plan, probes_from(plan, old), old, at, 0, addr, out, cap, sites);
}

/*
 * probes_from(PLAN, OLD) for OLD in mostly rising order (the instructions of a block):
 * from *HINT, the answer for the previous one, a few steps on, else by bisection.
 */
static size_t
probes_from_hint(const ed_plan_t *plan, uint64_t old, size_t *hint)
{
    size_t k = *hint;
    if (k <= plan->nprobes && (k == 0 || plan->probes[k - 1].addr < old))
        for (int step = 0; step < 4; step++, k++)
            if (k == plan->nprobes || plan->probes[k].addr >= old)
                return *hint = k;
    return *hint = probes_from(plan, old);
}

/*
 * The slots of a part of the procedures (collect_slots): filled on the pool, each part
 * into its own range of plan->lay reserved from its blocks' instruction counts; what
 * follows a sequence over all slots (plan->fall, the chunks, the statistics) is gathered
 * per part and joined in procedure order, so that the plan is the same for any number
 * of threads. A slot's taken-edge stub waits in its stub field (STUB_PENDING, its
 * length and whether it may fall into its target) until the join numbers it: stubs
 * gathered per part would be held twice while joined (chromium: 2.1 million).
 */
#define COLLECT_GRAIN 8192 /* instructions a part reserves, about */
#define STUB_PENDING 0x80000000u /* a stub's bytes (its TAKEN snippets) below ... */
#define STUB_WANT 0x40000000u    /* ... and ED_PROBE_FALL_IN asked for */

typedef struct collect_part {
    uint32_t lo, hi;           /* its procedures [lo, hi) */
    size_t base, cap;          /* the slots reserved for it: plan->lay[base, base + cap) */
    size_t n;                  /* slots filled */
    size_t nstubs;             /* its slots with a stub pending */
    uint64_t *fall;            /* its part of plan->fall */
    size_t nfall, fallcap;
    uint64_t *chunk;           /* the slots (from base) where its chunks start ... */
    size_t nchunk, chunkcap;
    size_t first;              /* ... and its first moved procedure's first slot, when that
                                * is in a group (it starts a chunk if it is the first of
                                * all), or SIZE_MAX */
    uint32_t nmoved;           /* plan->stats.nmoved's part ... */
    uint64_t bytes_old;        /* ... and plan->stats.bytes_old's */
    size_t nxlate, nplaced;    /* plan->nxlate's and plan->nprobes_placed's part */
} collect_part_t;

typedef struct collect_job {
    const ed_plan_t *plan;
    ed_slot_t *lay;            /* every part's slots */
    const uint8_t *in_group;   /* per procedure: not the first of a group sharing an FDE */
    collect_part_t *parts;
} collect_job_t;

/* Size the probes of the instruction IN at A into slot S of part C (and a stub pending
 * for TAKEN ones); HINT: probes_from_hint's. */
static int
size_probes(const ed_plan_t *plan, const arch_insn_t *in, ed_slot_t *s, collect_part_t *c,
            size_t *hint)
{
    uint64_t a = slot_old(plan, s);
    size_t k0 = probes_from_hint(plan, a, hint), k = k0;
    while (k < plan->nprobes && plan->probes[k].addr == a)
        k++;
    if (k == k0)
        return 0;
    c->nplaced += k - k0;
    int pre = emit_probes_part(plan, k0, a, ED_AT_BEFORE, 0, 0, NULL, 0, NULL);
    int entry_pre = emit_probes_part(plan, k0, a, ED_AT_BEFORE, 1, 0, NULL, 0, NULL);
    int post = emit_probes_part(plan, k0, a, ED_AT_AFTER, 0, 0, NULL, 0, NULL);
    int taken = emit_probes_part(plan, k0, a, ED_AT_TAKEN, 0, 0, NULL, 0, NULL);
    if (pre < 0 || post < 0 || taken < 0 || entry_pre < 0)
        return pre < 0 ? pre : post < 0 ? post : taken < 0 ? taken : entry_pre;
    if (pre > UINT16_MAX || post > UINT16_MAX)
        return QP_ERANGE;
    s->pre = (uint16_t)pre;
    if (entry_pre > 0) {
        s->extra = (uint16_t)entry_pre; /* (part of pre) */
        s->flags |= SLOT_ENTRY;
    }
    s->post = (uint16_t)post;
    if (taken > 0) {
        if (in->kind != ARCH_KIND_JCC)
            return QP_EINVAL; /* only a conditional branch has a taken edge to split */
        if ((uint32_t)taken >= STUB_WANT - 1)
            return QP_ERANGE; /* (all ones is NO_STUB) */
        int want = 0;
        for (size_t j = k0; j < k; j++)
            want |= plan->probes[j].at == ED_AT_TAKEN && (plan->probes[j].flags & ED_PROBE_FALL_IN);
        s->stub = STUB_PENDING | (want ? STUB_WANT : 0) | (uint32_t)taken;
        c->nstubs++;
    }
    return 0;
}

/* Does procedure PI move as a procedure of its own (not a fragment: those are laid out
 * with their parent's blocks)? */
static int
lays_out(const ed_plan_t *plan, uint32_t pi)
{
    return plan->reason[pi] == NULL && !(plan->prog->procs[pi].flags & CFG_PROC_FRAGMENT);
}

/* Procedure PI's slots into C's range of J->lay, sizes long. ORDER: room for its
 * blocks. */
static int
collect_proc(const collect_job_t *j, collect_part_t *c, uint32_t pi, uint32_t *order,
             size_t *probe_hint)
{
    const ed_plan_t *plan = j->plan;
    const cfg_prog_t *prog = plan->prog;
    const cfg_proc_t *p = &prog->procs[pi];
    ed_slot_t *v = j->lay + c->base;
    uint8_t scratch[ARCH_MAX_RELOC];
    /* Blocks in address order: cfg/ puts the entry block first, the rest sorted. */
    uint32_t k0;
    layout_rank(prog, p, &k0);
    uint32_t o = 0;
    for (uint32_t k = 1; k <= k0; k++)
        order[o++] = p->block + k;
    order[o++] = p->block;
    for (uint32_t k = k0 + 1; k < p->nblocks; k++)
        order[o++] = p->block + k;
    c->nmoved++;
    if (!j->in_group[pi])
        QP_CHECK(edl_push_u64(&c->chunk, &c->nchunk, &c->chunkcap, c->n));
    else if (c->first == SIZE_MAX && c->nmoved == 1)
        c->first = c->n; /* else the chunk of the group's first procedure goes on */
    for (uint32_t k = 0; k < p->nblocks; k++) {
        const cfg_block_t *b = &prog->blocks[order[k]];
        c->bytes_old += b->end - b->start;
        for (uint64_t a = b->start; a < b->end;) {
            const uint8_t *bytes = cfg_image_ptr(prog->img, a, NULL);
            arch_insn_t in;
            if (bytes == NULL || cfg_image_decode(prog->img, a, 0, &in) < 0)
                return QP_EDECODE;
            /* The long form: an upper bound of the size (an ISA without the translation
             * has its procedures stay, ed_select.c). */
            int xlate = in.kind == ARCH_KIND_JMP_IND && a + in.len == b->end
                && edl_block_unresolved(prog, b);
            int len = !xlate ? plan->isa->reloc_max_len(bytes, &in)
                : plan->isa->emit_jmp_xlate != NULL
                ? plan->isa->emit_jmp_xlate(bytes, &in, a, a + 0x1000, 0, scratch,
                                            sizeof(scratch))
                : QP_EBUG;
            QP_CHECK(len);
            if (c->n == c->cap)
                return QP_EBUG; /* more instructions than the blocks counted */
            v[c->n] = (ed_slot_t) { .old = (uint32_t)(a - plan->old_base), .stub = NO_STUB,
                                    .len = (uint8_t)(len + (plan->opts.stretch ? 1 : 0)),
                                    .olen = in.len,
                                    .flags = (in.kind == ARCH_KIND_JMP || in.kind == ARCH_KIND_JCC)
                                        ? SLOT_BRANCH : xlate ? SLOT_XLATE : 0 };
            c->nxlate += xlate != 0;
            if (plan->nprobes > 0)
                QP_CHECK(size_probes(plan, &in, &v[c->n], c, probe_hint));
            c->n++;
            a += in.len;
        }
        /* A fall-through to anything but the next block in layout needs a jmp. */
        uint64_t to;
        if (c->n > 0 && falls_through(prog, b, &to)
            && !(k + 1 < p->nblocks && prog->blocks[order[k + 1]].start == to)) {
            v[c->n - 1].flags |= SLOT_JMP_AFTER;
            QP_CHECK(edl_push_u64(&c->fall, &c->nfall, &c->fallcap, to));
        }
    }
    return 0;
}

/* qp_task_fn: the slots of part K of the collect_job_t ARG. */
static int
collect_part(void *arg, unsigned worker, size_t k)
{
    (void)worker;
    const collect_job_t *j = arg;
    collect_part_t *c = &j->parts[k];
    const cfg_prog_t *prog = j->plan->prog;
    uint32_t most = 0;
    for (uint32_t pi = c->lo; pi < c->hi; pi++)
        most = prog->procs[pi].nblocks > most ? prog->procs[pi].nblocks : most;
    uint32_t *order = malloc((most + 1) * sizeof(uint32_t));
    if (order == NULL)
        return QP_ENOMEM;
    size_t probe_hint = 0;
    c->first = SIZE_MAX;
    int rc = 0;
    for (uint32_t pi = c->lo; pi < c->hi && rc == 0; pi++)
        if (lays_out(j->plan, pi))
            rc = collect_proc(j, c, pi, order, &probe_hint);
    free(order);
    return rc;
}

/* A chunk starts at slot N: a procedure, or procedures sharing an FDE (one entry is
 * kept free for the end). */
static int
push_chunk(ed_plan_t *plan, size_t n)
{
    QP_CHECK(cfg_vec_grow((void **)&plan->chunk, &plan->chunkcap, plan->nchunks + 2,
                          sizeof(uint32_t)));
    plan->chunk[plan->nchunks++] = (uint32_t)n;
    return 0;
}

/* The stub pending in slot S (its conditional branch's target decoded again) numbered
 * next in plan->stubs. */
static int
number_stub(ed_plan_t *plan, ed_slot_t *s, size_t *stubcap)
{
    uint64_t a = slot_old(plan, s);
    arch_insn_t in;
    if (cfg_image_decode(plan->prog->img, a, 0, &in) < 0)
        return QP_EDECODE;
    QP_CHECK(cfg_vec_grow((void **)&plan->stubs, stubcap, plan->nstubs + 1, sizeof(ed_stub_t)));
    uint32_t taken = s->stub & (STUB_WANT - 1);
    plan->stubs[plan->nstubs] = (ed_stub_t) { a, 0, in.target, taken + PAD_LEN(plan), NO_STUB,
                                              (uint8_t)((s->stub & STUB_WANT) != 0) };
    s->stub = (uint32_t)plan->nstubs++;
    return 0;
}

/* *V (of *CAP elements of ELEM bytes) with room for NEED exactly, unless it has it. */
static int
reserve_exact(void **v, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    void *nv = realloc(*v, need * elem);
    if (nv == NULL)
        return QP_ENOMEM;
    *v = nv;
    *cap = need;
    return 0;
}

/* Join part C's slots, stubs, fall targets, chunks and figures to the plan's (the slots
 * so far: *N). */
static int
join_part(ed_plan_t *plan, collect_part_t *c, size_t *n, size_t *stubcap, size_t *fallcap)
{
    if (c->base != *n)
        memmove(&plan->lay[*n], &plan->lay[c->base], c->n * sizeof(ed_slot_t));
    for (size_t i = 0; c->nstubs > 0 && i < c->n; i++)
        if (plan->lay[*n + i].stub != NO_STUB)
            QP_CHECK(number_stub(plan, &plan->lay[*n + i], stubcap));
    for (size_t i = 0; i < c->nfall; i++)
        QP_CHECK(edl_push_u64(&plan->fall, &plan->nfall, fallcap, c->fall[i]));
    if (c->first != SIZE_MAX && plan->nchunks == 0)
        QP_CHECK(push_chunk(plan, *n + c->first));
    for (size_t i = 0; i < c->nchunk; i++)
        QP_CHECK(push_chunk(plan, *n + (size_t)c->chunk[i]));
    plan->stats.nmoved += c->nmoved;
    plan->stats.bytes_old += c->bytes_old;
    plan->nxlate += c->nxlate;
    plan->nprobes_placed += c->nplaced;
    *n += c->n;
    return 0;
}

/* Fill plan->lay with every moved instruction in layout order, sizes long. */
static int
collect_slots(ed_plan_t *plan)
{
    const cfg_prog_t *prog = plan->prog;
    /* Sized once from the blocks' instruction counts: doubling a vector of millions of
     * slots copies it and leaves the old copies' memory behind. Parts of about
     * COLLECT_GRAIN instructions, in procedure order. */
    size_t cap = 0, nparts = 0, partcap = 0;
    uint64_t lo = UINT64_MAX, hi = 0; /* the old addresses: offsets from lo in a slot */
    collect_part_t *parts = NULL;
    size_t grain = plan->collect_grain != 0 ? plan->collect_grain : COLLECT_GRAIN;
    int rc = 0;
    for (uint32_t pi = 0; pi < prog->nprocs && rc == 0; pi++) {
        if (nparts == 0 || parts[nparts - 1].cap >= grain) {
            if ((rc = cfg_vec_grow((void **)&parts, &partcap, nparts + 1, sizeof(*parts))) < 0)
                break;
            parts[nparts++] = (collect_part_t) { .lo = pi, .base = cap };
        }
        parts[nparts - 1].hi = pi + 1;
        if (!lays_out(plan, pi))
            continue;
        const cfg_proc_t *p = &prog->procs[pi];
        for (uint32_t k = 0; k < p->nblocks; k++) {
            const cfg_block_t *b = &prog->blocks[p->block + k];
            parts[nparts - 1].cap += b->ninsns;
            cap += b->ninsns;
            lo = b->start < lo ? b->start : lo;
            hi = b->end > hi ? b->end : hi;
        }
    }
    if (rc == 0 && hi > lo && hi - lo > UINT32_MAX)
        rc = QP_ERANGE;
    plan->old_base = hi > lo ? lo : 0;
    ed_slot_t *v = rc == 0 ? malloc((cap + 1) * sizeof(ed_slot_t)) : NULL;
    /* Procedures that share an FDE are one chunk: the FDE describes one range. */
    uint8_t *in_group = rc == 0 ? calloc(prog->nprocs + 1, 1) : NULL;
    if (rc == 0 && (v == NULL || in_group == NULL))
        rc = QP_ENOMEM;
    for (size_t g = 0; in_group != NULL && g + 1 < plan->ngroups; g += 2)
        for (uint64_t pi = plan->groups[g] + 1; pi <= plan->groups[g + 1] && pi < prog->nprocs; pi++)
            in_group[pi] = 1;
    collect_job_t job = { plan, v, in_group, parts };
    if (rc == 0)
        rc = qp_parallel_for(plan->opts.threads, nparts, 1, collect_part, &job, NULL);
    plan->lay = v;
    size_t n = 0, stubcap = 0, fallcap = 0;
    /* The joined vectors sized once, exactly: doubling them would leave up to half of
     * chromium's 2 million stubs' room unused, at the rewrite's peak. */
    size_t nstubs = plan->nstubs, nfall = plan->nfall, nchunks = plan->nchunks + 3;
    for (size_t k = 0; rc == 0 && k < nparts; k++) {
        nstubs += parts[k].nstubs;
        nfall += parts[k].nfall;
        nchunks += parts[k].nchunk;
    }
    if (rc == 0)
        rc = reserve_exact((void **)&plan->stubs, &stubcap, nstubs + 1, sizeof(ed_stub_t));
    if (rc == 0 && nfall > 0)
        rc = reserve_exact((void **)&plan->fall, &fallcap, nfall, sizeof(uint64_t));
    if (rc == 0)
        rc = reserve_exact((void **)&plan->chunk, &plan->chunkcap, nchunks, sizeof(*plan->chunk));
    for (size_t k = 0; k < nparts; k++) {
        if (rc == 0)
            rc = join_part(plan, &parts[k], &n, &stubcap, &fallcap);
        free(parts[k].fall);
        free(parts[k].chunk);
    }
    free(parts);
    free(in_group);
    if (rc < 0) {
        free(v);
        plan->lay = NULL;
        return rc;
    }
    /* What the instruction counts reserved and the slots did not take serves the
     * index; the stubs too. */
    cfg_vec_trim((void **)&plan->lay, &cap, n, sizeof(ed_slot_t));
    cfg_vec_trim((void **)&plan->stubs, &stubcap, plan->nstubs, sizeof(ed_stub_t));
    plan->nslots = n;
    if (plan->chunk != NULL)
        plan->chunk[plan->nchunks] = (uint32_t)n; /* room kept above */
    return 0;
}

/* The miss counter of the jump translated at OLD, relative to the table, or 0. */
int32_t
edl_xlate_miss_rel(const ed_plan_t *plan, uint64_t old)
{
    size_t k = cfg_u64_lower_bound(plan->xlate_sites, plan->nxlate_sites, old);
    if (k == plan->nxlate_sites || plan->xlate_sites[k] != old)
        return 0;
    int64_t d = (int64_t)(plan->xlate_counters[k] - edl_xlate_table_at(plan));
    return d >= INT32_MIN && d <= INT32_MAX ? (int32_t)d : 0;
}

uint64_t
edl_xlate_table_at(const ed_plan_t *plan)
{
    return (plan->xlate + ARCH_XLATE_STUB_LEN + 7) & ~(uint64_t)7;
}

/* The addresses the translation table's keys are relative to: the loaded sections'. */
void
edl_xlate_range(const cfg_prog_t *prog, uint64_t *lo, uint64_t *hi)
{
    *lo = UINT64_MAX;
    *hi = 0;
    for (size_t i = 0; i < prog->img->nsections; i++)
        if (prog->img->sections[i].flags & CFG_SEC_ALLOC) {
            const cfg_section_t *sec = &prog->img->sections[i];
            *lo = sec->vma < *lo ? sec->vma : *lo;
            *hi = sec->vma + sec->size > *hi ? sec->vma + sec->size : *hi;
        }
}

/* Is procedure P's entry a key of the translation table? */
int
edl_xlate_key(const cfg_proc_t *p, uint64_t lo, uint64_t hi)
{
    return !(p->flags & CFG_PROC_FRAGMENT) && p->entry >= lo && p->entry < hi;
}

/* Slots of the translation table: a power of two, a third more than the entries at
 * least (every procedure entry: PLT stubs and procedures that stay map to themselves, a
 * jump there is a call, not a miss), so that a lookup probes about two slots and always
 * ends at an empty one. */
uint64_t
edl_xlate_slots(const cfg_prog_t *prog)
{
    uint64_t lo, hi, keys = 0, n = 16;
    edl_xlate_range(prog, &lo, &hi);
    for (uint32_t i = 0; i < prog->nprocs; i++)
        keys += edl_xlate_key(&prog->procs[i], lo, hi);
    while (3 * n < 4 * keys)
        n *= 2;
    return n;
}

uint64_t
edl_xlate_table_size(const cfg_prog_t *prog)
{
    return ARCH_XLATE_HDR + 8 * edl_xlate_slots(prog);
}

/* The stubs that fall into their slots: just before them (after the slots' addresses). */
void
edl_place_fall_stubs(ed_plan_t *plan)
{
    for (size_t i = 0; i < plan->nstubs; i++)
        if (plan->stubs[i].before != NO_STUB)
            plan->stubs[i].new_
                = slot_new(plan, &plan->lay[plan->stubs[i].before]) - plan->stubs[i].len;
}

/*
 * Which stubs that asked to fall into their target (ED_PROBE_FALL_IN) can: the target is
 * the first slot of a block nothing falls into or only the block before it (which then
 * jumps over the stub: ed_block_fall_free), in the branch's own procedure, runs no
 * snippets for calls only, and no earlier stub took its place. Such a stub becomes the
 * slot's lead, without its jmp. Every other stub stays apart.
 */
static int
fall_stubs(ed_plan_t *plan)
{
    size_t added = 0; /* jumps added over a stub */
    for (size_t i = 0; i < plan->nstubs; i++) {
        ed_stub_t *st = &plan->stubs[i];
        if (!st->want_fall)
            continue;
        ed_slot_t *t = slot_at(plan, st->target);
        if (t == NULL || t->extra != 0 || st->len - PAD_LEN(plan) > UINT16_MAX)
            continue;
        const ed_seg_t *a = edl_seg_at(plan, st->jcc, NULL), *b = edl_seg_at(plan, st->target, NULL);
        uint32_t bi = cfg_block_at(plan->prog, st->target);
        if (a == NULL || b == NULL || a->owner != b->owner || bi == CFG_NONE
            || plan->prog->blocks[bi].start != st->target)
            continue;
        int how = ed_block_fall_free(plan->prog, b->owner, bi);
        if (how == 0 || t == plan->lay)
            continue;
        ed_slot_t *prev = t - 1; /* how 2: the block before falls in, and then jumps */
        if (how == 2 && (prev->old == st->jcc || (prev->flags & SLOT_JMP_AFTER)))
            continue; /* (the branch itself before T: it goes both ways to T) */
        if (how == 2) {
            prev->flags |= SLOT_JMP_AFTER | SLOT_JMP_ADDED;
            added++;
        }
        st->len -= PAD_LEN(plan);
        st->before = (uint32_t)(t - plan->lay);
        t->extra = (uint16_t)st->len; /* (no SLOT_ENTRY: extra was 0) */
        plan->stats.nstubs_fall++;
    }
    if (added == 0)
        return 0;
    /* plan->fall again in layout order, with the jumps over the stubs: to the next slot. */
    size_t n = 0, k = 0, cap = 0;
    uint64_t *v = NULL;
    for (size_t i = 0; i < plan->nslots; i++) {
        if (!(plan->lay[i].flags & SLOT_JMP_AFTER))
            continue;
        uint64_t to = (plan->lay[i].flags & SLOT_JMP_ADDED) ? slot_old(plan, &plan->lay[i + 1])
                                                             : plan->fall[k++];
        if (edl_push_u64(&v, &n, &cap, to) < 0) {
            free(v);
            return QP_ENOMEM;
        }
    }
    free(plan->fall);
    plan->fall = v;
    plan->nfall = n;
    return 0;
}

/* Assign addresses from BASE in layout order; returns the size. */
static uint64_t
assign(ed_plan_t *plan, uint64_t base)
{
    uint64_t at = base;
    for (size_t i = 0; i < plan->nslots; i++) {
        ed_slot_t *s = &plan->lay[i];
        at += slot_lead(s);
        s->new_ = (uint32_t)at; /* (edl_layout refuses a size past 32 bits) */
        at += slot_size(plan, s);
    }
    for (size_t i = 0; i < plan->nstubs; i++) {
        if (plan->stubs[i].before != NO_STUB)
            continue;
        plan->stubs[i].new_ = at;
        at += plan->stubs[i].len;
    }
    edl_place_fall_stubs(plan);
    if (plan->nxlate > 0) {
        plan->xlate = at;
        at = edl_xlate_table_at(plan) + edl_xlate_table_size(plan->prog);
    }
    return at - base;
}

/* Sort the slots IDX[0 .. N) by the low SHIFT bits of their old address less LO, stable:
 * LSD radix, 8 bits a pass, through TMP (N entries); nothing to do when in order. */
static void
sort_bucket(const ed_plan_t *plan, uint32_t *idx, size_t n, uint64_t lo, unsigned shift,
            uint32_t *tmp)
{
    size_t i = 1;
    while (i < n && slot_old(plan, &plan->lay[idx[i - 1]]) <= slot_old(plan, &plan->lay[idx[i]]))
        i++;
    if (i >= n)
        return;
    size_t count[257];
    for (unsigned d = 0; d < shift; d += 8) {
        memset(count, 0, sizeof(count));
        for (i = 0; i < n; i++)
            count[(((slot_old(plan, &plan->lay[idx[i]]) - lo) >> d) & 0xff) + 1]++;
        for (unsigned k = 1; k <= 256; k++)
            count[k] += count[k - 1];
        for (i = 0; i < n; i++)
            tmp[count[((slot_old(plan, &plan->lay[idx[i]]) - lo) >> d) & 0xff]++] = idx[i];
        memcpy(idx, tmp, n * sizeof(uint32_t));
    }
}

/* index_slots' work on the pool: the slots in parts of INDEX_GRAIN, each part's
 * counters of the buckets (at most INDEX_COUNTERS in all: fewer, larger parts when the
 * buckets are many), then the buckets one an item. */
#define INDEX_GRAIN ((size_t)1 << 18)
#define INDEX_COUNTERS ((size_t)1 << 22)

typedef struct index_job {
    const ed_plan_t *plan;
    size_t grain;        /* slots a part */
    uint64_t lo;         /* the lowest old address, then ... */
    unsigned shift;      /* ... a bucket: the slots of one value of (old - lo) >> shift */
    size_t nb;           /* buckets */
    uint64_t *range;     /* per part: its lowest and highest old address */
    size_t *at;          /* per part: NB counts, then where its next slot of each goes */
    uint32_t *idx;       /* the slots by bucket, then by old address */
    size_t *start;       /* bucket k: idx[start[k] .. start[k + 1]) */
} index_job_t;

/* The slots of part K of the index_job_t J. */
static void
index_part(const index_job_t *j, size_t k, size_t *from, size_t *to)
{
    *from = k * j->grain;
    *to = *from + j->grain < j->plan->nslots ? *from + j->grain : j->plan->nslots;
}

/* qp_task_fn: the lowest and highest old address of part K. */
static int
index_range_part(void *arg, unsigned worker, size_t k)
{
    (void)worker;
    index_job_t *j = arg;
    size_t from, to;
    index_part(j, k, &from, &to);
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = from; i < to; i++) {
        uint64_t a = slot_old(j->plan, &j->plan->lay[i]);
        lo = a < lo ? a : lo;
        hi = a > hi ? a : hi;
    }
    j->range[2 * k] = lo;
    j->range[2 * k + 1] = hi;
    return 0;
}

/* qp_task_fn: part K's slots counted by bucket. */
static int
index_count_part(void *arg, unsigned worker, size_t k)
{
    (void)worker;
    index_job_t *j = arg;
    size_t from, to, *c = j->at + k * j->nb;
    index_part(j, k, &from, &to);
    for (size_t i = from; i < to; i++)
        c[(slot_old(j->plan, &j->plan->lay[i]) - j->lo) >> j->shift]++;
    return 0;
}

/* qp_task_fn: part K's slots into their buckets, in slot order after the earlier parts'. */
static int
index_scatter_part(void *arg, unsigned worker, size_t k)
{
    (void)worker;
    index_job_t *j = arg;
    size_t from, to, *at = j->at + k * j->nb;
    index_part(j, k, &from, &to);
    for (size_t i = from; i < to; i++)
        j->idx[at[(slot_old(j->plan, &j->plan->lay[i]) - j->lo) >> j->shift]++] = (uint32_t)i;
    return 0;
}

/* qp_task_fn: bucket K sorted by the low bits. */
static int
index_sort_bucket(void *arg, unsigned worker, size_t k)
{
    (void)worker;
    index_job_t *j = arg;
    size_t n = j->start[k + 1] - j->start[k];
    uint32_t *tmp = n > 1 ? malloc(n * sizeof(uint32_t)) : NULL;
    if (n > 1 && tmp == NULL)
        return QP_ENOMEM;
    sort_bucket(j->plan, j->idx + j->start[k], n, j->lo, j->shift, tmp);
    free(tmp);
    return 0;
}

/*
 * plan->idx: the slots by old address. Old addresses never change, so this is built once
 * (slots are not copied: layout passes update plan->lay in place). A stable sort in two
 * steps: slots go to buckets by the high part of their address (a pass in layout order),
 * then each bucket is sorted by the low part, where it is not in order already: the
 * layout order is almost address order, but not quite (entry blocks first, cold
 * fragments with their procedure). A bucket's slots sit close together in plan->lay,
 * where a radix sort of the whole address by passes over all slots read them scattered.
 * The passes over the slots run on the pool by parts, each part's slots of a bucket
 * after the earlier parts' (the order of one pass), and the buckets' sorts too (cc1:
 * 0.25 G instructions that were the main thread's).
 */
static int
index_slots(ed_plan_t *plan)
{
    if (plan->idx != NULL)
        return 0;
    size_t n = plan->nslots;
    index_job_t j = { plan, plan->collect_grain != 0 ? plan->collect_grain : INDEX_GRAIN,
                      UINT64_MAX, 16, 0, NULL, NULL, NULL, NULL };
    size_t nparts = (n + j.grain - 1) / j.grain;
    j.range = malloc((2 * nparts + 1) * sizeof(uint64_t));
    if (j.range == NULL)
        return QP_ENOMEM;
    int rc = qp_parallel_for(plan->opts.threads, nparts, 1, index_range_part, &j, NULL);
    uint64_t hi = 0;
    for (size_t k = 0; k < nparts; k++) {
        j.lo = j.range[2 * k] < j.lo ? j.range[2 * k] : j.lo;
        hi = j.range[2 * k + 1] > hi ? j.range[2 * k + 1] : hi;
    }
    free(j.range);
    /* Buckets of 64 KiB of code, or larger ones: no more buckets than slots. */
    while (n > 0 && j.shift < 56 && ((hi - j.lo) >> j.shift) > n)
        j.shift += 8;
    j.nb = n > 0 ? (size_t)((hi - j.lo) >> j.shift) + 1 : 0;
    while (nparts > 1 && nparts * j.nb > INDEX_COUNTERS) {
        j.grain *= 2;
        nparts = (n + j.grain - 1) / j.grain;
    }
    j.idx = malloc((n + 1) * sizeof(uint32_t));
    j.start = malloc((j.nb + 1) * sizeof(size_t));
    j.at = calloc(nparts * j.nb + 1, sizeof(size_t));
    if (rc == 0 && (j.idx == NULL || j.start == NULL || j.at == NULL))
        rc = QP_ENOMEM;
    if (rc == 0)
        rc = qp_parallel_for(plan->opts.threads, nparts, 1, index_count_part, &j, NULL);
    size_t at = 0;
    for (size_t b = 0; rc == 0 && b < j.nb; b++) { /* counts -> where each part's go */
        j.start[b] = at;
        for (size_t k = 0; k < nparts; k++) {
            size_t c = j.at[k * j.nb + b];
            j.at[k * j.nb + b] = at;
            at += c;
        }
    }
    if (rc == 0) {
        j.start[j.nb] = at;
        rc = qp_parallel_for(plan->opts.threads, nparts, 1, index_scatter_part, &j, NULL);
    }
    if (rc == 0)
        rc = qp_parallel_for(plan->opts.threads, j.nb, 8, index_sort_bucket, &j, NULL);
    free(j.at);
    free(j.start);
    if (rc < 0) {
        free(j.idx);
        return rc;
    }
    plan->idx = j.idx;
    return index_buckets(plan);
}

/*
 * The slot of a branch TARGET: its instruction's, or - for a branch just past a lock
 * prefix (glibc's `je 1f; lock; 1: op`, cfg/ takes it as a branch to the locked
 * instruction) - the locked instruction's: the same operation, atomic on that path too.
 */
static const ed_slot_t *
target_slot(const ed_plan_t *plan, uint64_t target)
{
    const ed_slot_t *s = slot_at(plan, target);
    if (s != NULL)
        return s;
    s = slot_at(plan, target - 1);
    const uint8_t *p = s != NULL ? cfg_image_ptr(plan->prog->img, target - 1, NULL) : NULL;
    return p != NULL && *p == 0xf0 && s->olen > 1 ? s : NULL;
}

/* A branch target: the new address of a moved instruction, else the old address. */
uint64_t
edl_map_target(const ed_plan_t *plan, uint64_t target)
{
    const ed_slot_t *s = target_slot(plan, target);
    return s ? slot_new(plan, s) : target;
}


/* The target of a branch at FROM: a jump inside a procedure to its own entry skips the
 * snippets that run for calls only (ED_PROBE_ENTRY). */
uint64_t
edl_map_branch(const ed_plan_t *plan, uint64_t from, uint64_t target)
{
    const ed_slot_t *s = target_slot(plan, target);
    if (s == NULL)
        return target;
    if (slot_entry_pre(s) > 0) {
        const ed_seg_t *a = edl_seg_at(plan, from, NULL), *b = edl_seg_at(plan, target, NULL);
        if (a != NULL && b != NULL && a->owner == b->owner)
            return slot_new(plan, s) + slot_entry_pre(s);
    }
    return slot_new(plan, s);
}

int
edl_build_segments(ed_plan_t *plan)
{
    const cfg_prog_t *prog = plan->prog;
    plan->segs = malloc((prog->nprocs + 1) * sizeof(ed_seg_t));
    plan->seg_new_end = calloc(prog->nprocs + 1, sizeof(uint64_t));
    if (plan->segs == NULL || plan->seg_new_end == NULL)
        return QP_ENOMEM;
    for (uint32_t i = 0; i < prog->nprocs; i++) {
        const cfg_proc_t *p = &prog->procs[i];
        uint32_t owner = (p->flags & CFG_PROC_FRAGMENT) ? p->parent : i;
        if (owner == CFG_NONE || plan->reason[owner] != NULL || plan->reason[i] != NULL)
            continue;
        plan->segs[plan->nsegs++] = (ed_seg_t) { p->start, p->end, owner };
    }
    return 0;
}

/*
 * The new ends of the segments on the pool, SEG_GRAIN segments a part: a part reads the
 * slots of its own segments (by old address, from its first segment's start) and
 * writes their ends alone, so the ends are the same for any number of threads.
 */
#define SEG_GRAIN 2048

/* qp_task_fn: the new ends of segments [K, K + 1) * SEG_GRAIN of plan ARG. */
static int
ends_part(void *arg, unsigned worker, size_t part)
{
    (void)worker;
    ed_plan_t *plan = arg;
    size_t k = part * SEG_GRAIN;
    size_t hi = k + SEG_GRAIN < plan->nsegs ? k + SEG_GRAIN : plan->nsegs;
    for (size_t i = edl_slot_lower(plan, plan->segs[k].start); i < plan->nslots; i++) {
        const ed_slot_t *s = SLOT(plan, i);
        while (k < hi && plan->segs[k].end <= slot_old(plan, s))
            k++;
        if (k == hi)
            break;
        if (plan->segs[k].start > slot_old(plan, s))
            continue;
        uint64_t end = slot_new(plan, s) + slot_size(plan, s);
        if (end > plan->seg_new_end[k])
            plan->seg_new_end[k] = end;
    }
    return 0;
}

/* The new end of every segment: after its last instruction (and added jmp). */
int
edl_segment_ends(ed_plan_t *plan)
{
    if (plan->nsegs == 0 || plan->nslots == 0)
        return 0;
    return qp_parallel_for(plan->opts.threads, (plan->nsegs + SEG_GRAIN - 1) / SEG_GRAIN, 1,
                           ends_part, plan, NULL);
}

/*
 * Layout pass 2 on the pool, SHORT_GRAIN slots at a time: a slot's short form depends on
 * the long layout's addresses alone, which this pass does not change, and the pass
 * writes that slot only.
 */
#define SHORT_GRAIN 16384

/* qp_task_fn: the direct branches of slots [K, K + 1) * SHORT_GRAIN of plan ARG in their
 * rel8 form where the target is in reach. */
static int
shorten_part(void *arg, unsigned worker, size_t k)
{
    (void)worker;
    ed_plan_t *plan = arg;
    size_t end = (k + 1) * SHORT_GRAIN < plan->nslots ? (k + 1) * SHORT_GRAIN : plan->nslots;
    for (size_t i = k * SHORT_GRAIN; i < end; i++) {
        ed_slot_t *s = &plan->lay[i];
        if (!(s->flags & SLOT_BRANCH) || s->stub != NO_STUB)
            continue; /* only direct branches have a short form; decode nothing else */
        const uint8_t *bytes = cfg_image_ptr(plan->prog->img, slot_old(plan, s), NULL);
        arch_insn_t in;
        if (bytes == NULL || cfg_image_decode(plan->prog->img, slot_old(plan, s), 0, &in) < 0)
            return QP_EDECODE;
        if ((in.kind != ARCH_KIND_JMP && in.kind != ARCH_KIND_JCC) || s->stub != NO_STUB)
            continue;
        const ed_slot_t *t = slot_at(plan, in.target);
        if (t == NULL
            || (plan->mirror != 0 && edl_chunk_of(plan, i) != edl_chunk_of(plan, (size_t)(t - plan->lay))))
            continue;
        /* The short form where the ISA's reloc_insn finds the target in its reach
         * (x86-64: rel8; AArch64: b.cond, cbz and tbz without the inverted branch). */
        uint8_t scratch[ARCH_MAX_RELOC];
        int len = plan->isa->reloc_insn(bytes, &in, slot_new(plan, s) + s->pre,
                                        slot_new(plan, t), 1, scratch,
                                        sizeof(scratch));
        int stretch = plan->opts.stretch ? 1 : 0;
        if (len > 0 && len + stretch < s->len) {
            s->len = (uint8_t)(len + stretch);
            s->flags |= SLOT_SHORT;
        }
    }
    return 0;
}

int
edl_layout(ed_plan_t *plan, int reuse)
{
    plan->laid_out = 1;
    QP_CHECK(collect_slots(plan));
    if (plan->nprobes_placed != plan->nprobes)
        return QP_EINVAL; /* a probe on code that does not move: never dropped silently */
    QP_CHECK(index_slots(plan));
    QP_CHECK(fall_stubs(plan));
    /* Pass 1: long forms (an upper bound of the size: slots hold 32-bit offsets). */
    if (assign(plan, 0) > UINT32_MAX)
        return QP_ERANGE;
    if (reuse)
        QP_CHECK(edl_plan_reuse(plan));
    /* Pass 2: rel8 where the target is in reach in the long layout (in the same
     * chunk when chunks go into holes: chunks are placed apart). */
    if (!plan->opts.long_branches)
        QP_CHECK(qp_parallel_for(plan->opts.threads, (plan->nslots + SHORT_GRAIN - 1) / SHORT_GRAIN,
                                 1, shorten_part, plan, NULL));
    plan->text_size = plan->mirror != 0 ? edl_assign_reuse(plan) : assign(plan, 0);
    if (plan->text_size > UINT32_MAX)
        return QP_ERANGE;
    if (plan->mirror == 0)
        QP_CHECK(edl_check_kept_exits(plan, NULL, NULL)); /* (with reuse: in there) */
    QP_CHECK(index_slots(plan));
    return edl_segment_ends(plan);
}
