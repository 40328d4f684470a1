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
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/qp_pool.h"
#include "editor/ed.h"

#include "editor/ed_layout_priv.h"

/*****************************************************************************
 * Layout
 */

/* The position (in idx) of the first slot at OLD or above; nslots when there is none. */
static size_t
slot_lower(const ed_plan_t *plan, uint64_t old)
{
    size_t lo = 0, hi = plan->nslots;
    if (plan->bucket != NULL && hi > 0) {
        uint64_t first = SLOT(plan, 0)->old;
        if (old <= first)
            return 0;
        size_t b = (size_t)((old - first) >> BUCKET_SHIFT);
        if (b >= plan->nbuckets)
            return plan->nslots;
        /* Every slot below bucket[b] is below OLD, every one from bucket[b + 1] above. */
        lo = plan->bucket[b];
        hi = plan->bucket[b + 1];
    }
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (SLOT(plan, mid)->old < old)
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
    size_t lo = slot_lower(plan, old);
    return lo < plan->nslots && SLOT(plan, lo)->old == old ? SLOT(plan, lo) : NULL;
}

uint64_t
edl_slot_new(const ed_plan_t *plan, uint64_t old)
{
    const ed_slot_t *s = slot_at(plan, old);
    return s != NULL ? s->new_ : 0;
}

uint64_t
edl_slot_insn(const ed_plan_t *plan, uint64_t old)
{
    const ed_slot_t *s = slot_at(plan, old);
    return s != NULL ? s->new_ + s->pre : 0;
}

const ed_slot_t *
edl_slot_at(const ed_plan_t *plan, uint64_t old)
{
    return slot_at(plan, old);
}

/* Build plan->bucket from plan->idx. */
static int
index_buckets(ed_plan_t *plan)
{
    size_t n = plan->nslots;
    if (n == 0)
        return 0;
    uint64_t first = SLOT(plan, 0)->old, last = SLOT(plan, n - 1)->old;
    size_t nb = (size_t)((last - first) >> BUCKET_SHIFT) + 1;
    uint32_t *v = malloc((nb + 1) * sizeof(uint32_t));
    if (v == NULL)
        return QP_ENOMEM;
    size_t k = 0;
    for (size_t b = 0; b <= nb; b++) {
        uint64_t lo = first + ((uint64_t)b << BUCKET_SHIFT);
        while (k < n && SLOT(plan, k)->old < lo)
            k++;
        v[b] = (uint32_t)k;
    }
    plan->bucket = v;
    plan->nbuckets = nb;
    return 0;
}

const ed_seg_t *
edl_seg_at(const ed_plan_t *plan, uint64_t old, size_t *idx)
{
    size_t lo = 0, hi = plan->nsegs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (plan->segs[mid].end <= old)
            lo = mid + 1;
        else
            hi = mid;
    }
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

static int
cmp_probe(const void *a, const void *b)
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

/* Where the switchable increments (ARCH_INC_SWITCH) of a part of the new code went. */
typedef struct lock_sites {
    uint64_t *v;                 /* each increment's first byte, in layout order */
    size_t n, cap;
} lock_sites_t;

/* Note the switchable increment at ADDR (SITES: when writing; NULL when sizing). */
static int
note_lock_site(lock_sites_t *sites, uint64_t addr)
{
    return sites != NULL ? edl_push_u64(&sites->v, &sites->n, &sites->cap, addr) : 0;
}

/*
 * The snippet of probe P at ADDR into OUT. Its size does not depend on ADDR. SITES (or
 * NULL when only sizing) collects where switchable increments go.
 */
static int
emit_snippet(const ed_plan_t *plan, const ed_probe_t *p, uint64_t addr, uint8_t *out, size_t cap,
             lock_sites_t *sites)
{
    switch (p->what) {
    case ED_SNIP_COUNT: {
        /* The ISA's increment at a point: x86-64 saves the flags around `incq` where
         * they are live, AArch64's increments write no flags. */
        arch_snip_ctx_t ctx;
        memset(&ctx, 0, sizeof(ctx));
        ctx.live_flags = p->save_flags ? ARCH_FLAGS_STATUS : 0;
        if (plan->opts.atomic == ARCH_INC_SWITCH) { /* its first byte: after the save */
            uint8_t save[ARCH_MAX_RELOC];
            int k = p->save_flags ? plan->isa->emit_flags_save(save, sizeof(save)) : 0;
            QP_CHECK(k);
            QP_CHECK(note_lock_site(sites, addr + (uint64_t)k));
        }
        return plan->isa->emit_counter_inc_at(addr, plan->counters + 8ull * p->counter,
                                              plan->opts.atomic, &ctx, out, cap);
    }
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
    default:
        return QP_EINVAL;
    }
}

static size_t probes_from(const ed_plan_t *plan, uint64_t old);

/*
 * Emit (or size, with OUT NULL) the snippets of the probes at (OLD, AT) from ADDR into OUT
 * (CAP bytes); with ENTRY_ONLY only those of ED_PROBE_ENTRY probes (they come first).
 * Returns their total size.
 */
static int
emit_probes_part(const ed_plan_t *plan, uint64_t old, int at, int entry_only, uint64_t addr,
                 uint8_t *out, size_t cap, lock_sites_t *sites)
{
    uint8_t scratch[SNIPPET_MAX];
    int total = 0;
    for (size_t k = probes_from(plan, old); k < plan->nprobes && plan->probes[k].addr == old;
         k++) {
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
static int
emit_probes(const ed_plan_t *plan, uint64_t old, int at, uint64_t addr, uint8_t *out, size_t cap,
            lock_sites_t *sites)
{
    return emit_probes_part(plan, old, at, 0, addr, out, cap, sites);
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

/* Size the probes of the instruction IN at A into slot S (and a stub for TAKEN ones);
 * HINT: probes_from_hint's. */
static int
size_probes(ed_plan_t *plan, const arch_insn_t *in, ed_slot_t *s, ed_stub_t **stubs,
            size_t *cap, size_t *hint)
{
    uint64_t a = s->old;
    size_t k0 = probes_from_hint(plan, a, hint), k = k0;
    while (k < plan->nprobes && plan->probes[k].addr == a)
        k++;
    if (k == k0)
        return 0;
    plan->nprobes_placed += k - k0;
    int pre = emit_probes(plan, a, ED_AT_BEFORE, 0, NULL, 0, NULL);
    int entry_pre = emit_probes_part(plan, a, ED_AT_BEFORE, 1, 0, NULL, 0, NULL);
    int post = emit_probes(plan, a, ED_AT_AFTER, 0, NULL, 0, NULL);
    int taken = emit_probes(plan, a, ED_AT_TAKEN, 0, NULL, 0, NULL);
    if (pre < 0 || post < 0 || taken < 0 || entry_pre < 0)
        return pre < 0 ? pre : post < 0 ? post : taken < 0 ? taken : entry_pre;
    if (pre > UINT16_MAX || post > UINT16_MAX)
        return QP_ERANGE;
    s->pre = (uint16_t)pre;
    s->entry_pre = (uint16_t)entry_pre;
    s->post = (uint16_t)post;
    if (taken > 0) {
        if (in->kind != ARCH_KIND_JCC)
            return QP_EINVAL; /* only a conditional branch has a taken edge to split */
        if (plan->nstubs == *cap) {
            size_t ncap = *cap ? *cap * 2 : 256;
            ed_stub_t *v = realloc(*stubs, ncap * sizeof(ed_stub_t));
            if (v == NULL)
                return QP_ENOMEM;
            *stubs = v;
            *cap = ncap;
        }
        int want = 0;
        for (size_t j = k0; j < k; j++)
            want |= plan->probes[j].at == ED_AT_TAKEN && (plan->probes[j].flags & ED_PROBE_FALL_IN);
        s->stub = (uint32_t)plan->nstubs;
        (*stubs)[plan->nstubs++] = (ed_stub_t) { a, 0, in->target, (uint32_t)taken + PAD_LEN(plan),
                                                 NO_STUB, (uint8_t)want };
    }
    return 0;
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

/* Fill plan->lay with every moved instruction in layout order, sizes long. */
static int
collect_slots(ed_plan_t *plan)
{
    const cfg_prog_t *prog = plan->prog;
    /* Sized once from the blocks' instruction counts: doubling a vector of millions of
     * slots copies it and leaves the old copies' memory behind. */
    size_t cap = 1024, n = 0;
    for (uint32_t pi = 0; pi < prog->nprocs; pi++) {
        const cfg_proc_t *p = &prog->procs[pi];
        if (plan->reason[pi] != NULL || (p->flags & CFG_PROC_FRAGMENT))
            continue;
        for (uint32_t k = 0; k < p->nblocks; k++)
            cap += prog->blocks[p->block + k].ninsns;
    }
    ed_slot_t *v = malloc(cap * sizeof(ed_slot_t));
    /* Procedures that share an FDE are one chunk: the FDE describes one range. */
    uint8_t *in_group = calloc(prog->nprocs + 1, 1);
    for (size_t g = 0; in_group != NULL && g + 1 < plan->ngroups; g += 2)
        for (uint64_t pi = plan->groups[g] + 1; pi <= plan->groups[g + 1] && pi < prog->nprocs; pi++)
            in_group[pi] = 1;
    uint32_t *order = NULL;
    size_t ordercap = 0, stubcap = 0, fallcap = 0, probe_hint = 0;
    int rc = 0;
    uint8_t scratch[ARCH_MAX_RELOC];
    if (v == NULL || in_group == NULL) {
        free(v);
        free(in_group);
        return QP_ENOMEM;
    }
    for (uint32_t pi = 0; pi < prog->nprocs && rc == 0; pi++) {
        const cfg_proc_t *p = &prog->procs[pi];
        if (plan->reason[pi] != NULL || (p->flags & CFG_PROC_FRAGMENT))
            continue;
        if (p->nblocks > ordercap) {
            free(order);
            ordercap = p->nblocks;
            if ((order = malloc(ordercap * sizeof(uint32_t))) == NULL) {
                rc = QP_ENOMEM;
                break;
            }
        }
        /* Blocks in address order: cfg/ puts the entry block first, the rest sorted. */
        uint32_t k0;
        layout_rank(prog, p, &k0);
        uint32_t o = 0;
        for (uint32_t k = 1; k <= k0; k++)
            order[o++] = p->block + k;
        order[o++] = p->block;
        for (uint32_t k = k0 + 1; k < p->nblocks; k++)
            order[o++] = p->block + k;
        plan->stats.nmoved++;
        if ((!in_group[pi] || plan->nchunks == 0) && (rc = push_chunk(plan, n)) < 0)
            break; /* else the chunk of the group's first procedure goes on */
        for (uint32_t k = 0; k < p->nblocks && rc == 0; k++) {
            const cfg_block_t *b = &prog->blocks[order[k]];
            plan->stats.bytes_old += b->end - b->start;
            for (uint64_t a = b->start; a < b->end;) {
                const uint8_t *bytes = cfg_image_ptr(prog->img, a, NULL);
                arch_insn_t in;
                if (bytes == NULL || cfg_image_decode(prog->img, a, 0, &in) < 0) {
                    rc = QP_EDECODE;
                    break;
                }
                /* The long form: an upper bound of the size (an ISA without the
                 * translation has its procedures stay, ed_select.c). */
                int xlate = in.kind == ARCH_KIND_JMP_IND && a + in.len == b->end
                    && edl_block_unresolved(prog, b);
                int len = !xlate ? plan->isa->reloc_max_len(bytes, &in)
                    : plan->isa->emit_jmp_xlate != NULL
                    ? plan->isa->emit_jmp_xlate(bytes, &in, a, a + 0x1000, 0, scratch,
                                                sizeof(scratch))
                    : QP_EBUG;
                if (len < 0) {
                    rc = len;
                    break;
                }
                if (n == cap) {
                    ed_slot_t *nv = realloc(v, (cap *= 2) * sizeof(ed_slot_t));
                    if (nv == NULL) {
                        rc = QP_ENOMEM;
                        break;
                    }
                    v = nv;
                }
                v[n] = (ed_slot_t) { .old = a, .stub = NO_STUB,
                                     .len = (uint8_t)(len + (plan->opts.stretch ? 1 : 0)),
                                     .olen = in.len,
                                     .flags = (in.kind == ARCH_KIND_JMP || in.kind == ARCH_KIND_JCC)
                                         ? SLOT_BRANCH : xlate ? SLOT_XLATE : 0 };
                plan->nxlate += xlate != 0;
                if (plan->nprobes > 0
                    && (rc = size_probes(plan, &in, &v[n], &plan->stubs, &stubcap,
                                         &probe_hint)) < 0)
                    break;
                n++;
                a += in.len;
            }
            /* A fall-through to anything but the next block in layout needs a jmp. */
            uint64_t to;
            if (rc == 0 && n > 0 && falls_through(prog, b, &to)
                && !(k + 1 < p->nblocks && prog->blocks[order[k + 1]].start == to)) {
                v[n - 1].flags |= SLOT_JMP_AFTER;
                rc = edl_push_u64(&plan->fall, &plan->nfall, &fallcap, to);
            }
        }
    }
    free(order);
    free(in_group);
    if (rc < 0) {
        free(v);
        return rc;
    }
    plan->lay = v;
    plan->nslots = n;
    if (plan->chunk != NULL)
        plan->chunk[plan->nchunks] = (uint32_t)n; /* room kept above */
    return 0;
}

/* The miss counter of the jump translated at OLD, relative to the table, or 0. */
static int32_t
xlate_miss_rel(const ed_plan_t *plan, uint64_t old)
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
static void
xlate_range(const cfg_prog_t *prog, uint64_t *lo, uint64_t *hi)
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
static int
xlate_key(const cfg_proc_t *p, uint64_t lo, uint64_t hi)
{
    return !(p->flags & CFG_PROC_FRAGMENT) && p->entry >= lo && p->entry < hi;
}

/* Slots of the translation table: a power of two, a third more than the entries at
 * least (every procedure entry: PLT stubs and procedures that stay map to themselves, a
 * jump there is a call, not a miss), so that a lookup probes about two slots and always
 * ends at an empty one. */
static uint64_t
xlate_slots(const cfg_prog_t *prog)
{
    uint64_t lo, hi, keys = 0, n = 16;
    xlate_range(prog, &lo, &hi);
    for (uint32_t i = 0; i < prog->nprocs; i++)
        keys += xlate_key(&prog->procs[i], lo, hi);
    while (3 * n < 4 * keys)
        n *= 2;
    return n;
}

uint64_t
edl_xlate_table_size(const cfg_prog_t *prog)
{
    return ARCH_XLATE_HDR + 8 * xlate_slots(prog);
}

/* The stubs that fall into their slots: just before them (after the slots' addresses). */
void
edl_place_fall_stubs(ed_plan_t *plan)
{
    for (size_t i = 0; i < plan->nstubs; i++)
        if (plan->stubs[i].before != NO_STUB)
            plan->stubs[i].new_ = plan->lay[plan->stubs[i].before].new_ - plan->stubs[i].len;
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
        if (t == NULL || t->lead != 0 || t->entry_pre != 0 || st->len - PAD_LEN(plan) > UINT16_MAX)
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
        t->lead = (uint16_t)st->len;
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
        uint64_t to = (plan->lay[i].flags & SLOT_JMP_ADDED) ? plan->lay[i + 1].old : plan->fall[k++];
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
        at += s->lead;
        s->new_ = at;
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

/*
 * plan->idx: the slots by old address. Old addresses never change, so this is built once
 * (slots are not copied: layout passes update plan->lay in place). An LSD radix sort on
 * the address (16 bits a pass): the layout order is almost address order, but not quite
 * (entry blocks first, cold fragments with their procedure).
 */
static int
index_slots(ed_plan_t *plan)
{
    if (plan->idx != NULL)
        return 0;
    size_t n = plan->nslots;
    uint32_t *a = malloc((n + 1) * sizeof(uint32_t));
    uint32_t *b = malloc((n + 1) * sizeof(uint32_t));
    size_t *count = malloc(65537 * sizeof(size_t));
    if (a == NULL || b == NULL || count == NULL) {
        free(a);
        free(b);
        free(count);
        return QP_ENOMEM;
    }
    uint64_t maxold = 0;
    for (size_t i = 0; i < n; i++) {
        a[i] = (uint32_t)i;
        if (plan->lay[i].old > maxold)
            maxold = plan->lay[i].old;
    }
    for (unsigned shift = 0; shift < 64 && (maxold >> shift) != 0; shift += 16) {
        memset(count, 0, 65537 * sizeof(size_t));
        for (size_t i = 0; i < n; i++)
            count[((plan->lay[a[i]].old >> shift) & 0xffff) + 1]++;
        for (size_t d = 1; d <= 65536; d++)
            count[d] += count[d - 1];
        for (size_t i = 0; i < n; i++)
            b[count[(plan->lay[a[i]].old >> shift) & 0xffff]++] = a[i];
        uint32_t *t = a;
        a = b;
        b = t;
    }
    free(b);
    free(count);
    plan->idx = a;
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
static uint64_t
map_target(const ed_plan_t *plan, uint64_t target)
{
    const ed_slot_t *s = target_slot(plan, target);
    return s ? s->new_ : target;
}


/* The target of a branch at FROM: a jump inside a procedure to its own entry skips the
 * snippets that run for calls only (ED_PROBE_ENTRY). */
static uint64_t
map_branch(const ed_plan_t *plan, uint64_t from, uint64_t target)
{
    const ed_slot_t *s = target_slot(plan, target);
    if (s == NULL)
        return target;
    if (s->entry_pre > 0) {
        const ed_seg_t *a = edl_seg_at(plan, from, NULL), *b = edl_seg_at(plan, target, NULL);
        if (a != NULL && b != NULL && a->owner == b->owner)
            return s->new_ + s->entry_pre;
    }
    return s->new_;
}

static int
build_segments(ed_plan_t *plan)
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

/* The new end of every segment: after its last instruction (and added jmp). */
static void
segment_ends(ed_plan_t *plan)
{
    size_t k = 0;
    for (size_t i = 0; i < plan->nslots; i++) {
        const ed_slot_t *s = SLOT(plan, i);
        while (k < plan->nsegs && plan->segs[k].end <= s->old)
            k++;
        if (k == plan->nsegs || plan->segs[k].start > s->old)
            continue;
        uint64_t end = s->new_ + slot_size(plan, s);
        if (end > plan->seg_new_end[k])
            plan->seg_new_end[k] = end;
    }
}

static int
layout(ed_plan_t *plan, int reuse)
{
    plan->laid_out = 1;
    QP_CHECK(collect_slots(plan));
    if (plan->nprobes_placed != plan->nprobes)
        return QP_EINVAL; /* a probe on code that does not move: never dropped silently */
    QP_CHECK(index_slots(plan));
    QP_CHECK(fall_stubs(plan));
    /* Pass 1: long forms. */
    assign(plan, 0);
    if (reuse)
        QP_CHECK(edl_plan_reuse(plan));
    /* Pass 2: rel8 where the target is in reach in the long layout (in the same
     * chunk when chunks go into holes: chunks are placed apart). */
    for (size_t i = 0; i < plan->nslots && !plan->opts.long_branches; i++) {
        ed_slot_t *s = &plan->lay[i];
        if (!(s->flags & SLOT_BRANCH) || s->stub != NO_STUB)
            continue; /* only direct branches have a short form; decode nothing else */
        const uint8_t *bytes = cfg_image_ptr(plan->prog->img, s->old, NULL);
        arch_insn_t in;
        if (bytes == NULL || cfg_image_decode(plan->prog->img, s->old, 0, &in) < 0)
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
        int len = plan->isa->reloc_insn(bytes, &in, s->new_ + s->pre, t->new_, 1, scratch,
                                        sizeof(scratch));
        int stretch = plan->opts.stretch ? 1 : 0;
        if (len > 0 && len + stretch < s->len) {
            s->len = (uint8_t)(len + stretch);
            s->flags |= SLOT_SHORT;
        }
    }
    plan->text_size = plan->mirror != 0 ? edl_assign_reuse(plan) : assign(plan, 0);
    if (plan->mirror == 0)
        QP_CHECK(edl_check_kept_exits(plan, NULL)); /* (with reuse: checked in there) */
    QP_CHECK(index_slots(plan));
    segment_ends(plan);
    return 0;
}

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
    plan->isa = cfg_image_isa(prog->img);
    if (opts)
        plan->opts = *opts;
    plan->reason = calloc(prog->nprocs + 1, sizeof(char *));
    int rc = plan->reason ? edl_sort_leave(plan) : QP_ENOMEM;
    if (rc == 0)
        rc = edl_decide(plan);
    plan->opts.stay = NULL; /* the caller's: read by decide only */
    plan->opts.nstay = 0;
    plan->opts.leave = NULL; /* the caller's too */
    plan->opts.nleave = 0;
    free(plan->leave);
    plan->leave = NULL;
    plan->nleave = 0;
    if (rc == 0)
        rc = build_segments(plan);
    if (rc == 0) {
        uint8_t *vouched = edl_vouched_procs(prog);
        rc = vouched != NULL ? edl_decide_unfit(plan, vouched) : QP_ENOMEM;
        free(vouched);
    }
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
    free(plan->dropped);
    free(plan->dropped_owner);
    free(plan->idx);
    free(plan->bucket);
    free(plan->lay);
    free(plan->fall);
    free(plan->xt);
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

int
ed_plan_set_probes(ed_plan_t *plan, const ed_probe_t *probes, size_t n)
{
    if (plan == NULL || (n > 0 && probes == NULL) || plan->laid_out)
        return QP_EINVAL;
    ed_probe_t *v = malloc((n + 1) * sizeof(ed_probe_t));
    ed_probe_t *w = malloc((n + 1) * sizeof(ed_probe_t));
    if (v == NULL || w == NULL) {
        free(v);
        free(w);
        return QP_ENOMEM;
    }
    /* Probes of procedures left in place go to ed_inplace.c. */
    size_t nv = 0, nw = 0;
    for (size_t i = 0; i < n; i++) {
        if (probes[i].flags & ED_PROBE_INPLACE)
            w[nw++] = probes[i];
        else
            v[nv++] = probes[i];
    }
    qsort(v, nv, sizeof(ed_probe_t), cmp_probe);
    qsort(w, nw, sizeof(ed_probe_t), cmp_probe);
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
    const ed_slot_t *s = slot_at(plan, old);
    if (s == NULL)
        return 0;
    if (after)
        *after = s->new_ + s->pre + s->len - (plan->opts.stretch ? 1 : 0);
    return s->new_ + s->pre;
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
    const ed_slot_t *s = slot_at(plan, old);
    if (s != NULL)
        return s->new_;
    size_t si;
    const ed_seg_t *seg = edl_seg_at(plan, old, &si);
    if (seg == NULL)
        return 0;
    /* Not an instruction start: the next moved instruction of the same extent, or the
     * end of the extent's new code. */
    size_t lo = slot_lower(plan, old);
    if (lo < plan->nslots && SLOT(plan, lo)->old < seg->end)
        return SLOT(plan, lo)->new_;
    return plan->seg_new_end[si];
}

uint64_t
ed_plan_map_state(void *arg, uint64_t old)
{
    const ed_plan_t *plan = arg;
    size_t lo = slot_lower(plan, old), si;
    if (lo < plan->nslots && SLOT(plan, lo)->old == old)
        return SLOT(plan, lo)->new_ - SLOT(plan, lo)->lead;
    const ed_seg_t *seg = edl_seg_at(plan, old, &si);
    if (seg == NULL)
        return 0;
    /* As ed_plan_map: the next moved instruction of the extent (its stub first). */
    if (lo < plan->nslots && SLOT(plan, lo)->old < seg->end)
        return SLOT(plan, lo)->new_ - SLOT(plan, lo)->lead;
    return plan->seg_new_end[si];
}

uint64_t
ed_plan_map_insn(void *arg, uint64_t old)
{
    const ed_slot_t *s = slot_at(arg, old);
    return s ? s->new_ : 0;
}

uint64_t
ed_plan_map_end(void *arg, uint64_t old)
{
    const ed_plan_t *plan = arg;
    size_t lo = slot_lower(plan, old);
    if (lo == 0)
        return 0;
    const ed_slot_t *s = SLOT(plan, lo - 1);
    if (s->old + s->olen != old)
        return 0;
    return s->new_ + slot_size(plan, s);
}

uint64_t
ed_plan_map_return(void *arg, uint64_t old)
{
    const ed_plan_t *plan = arg;
    size_t lo = 0, hi = plan->nslots;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (SLOT(plan, mid)->old < old)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return 0;
    const ed_slot_t *s = SLOT(plan, lo - 1);
    if (s->old + s->olen != old)
        return 0;
    return s->new_ + s->pre + s->len - (plan->opts.stretch ? 1 : 0);
}

int
ed_plan_pieces(void *arg, uint64_t lo, uint64_t hi, ed_piece_fn fn, void *fnarg)
{
    const ed_plan_t *plan = arg;
    if (plan == NULL || fn == NULL || hi < lo)
        return QP_EINVAL;
    uint64_t pos = lo;
    while (pos < hi) {
        /* The first segment that ends after POS. */
        size_t a = 0, b = plan->nsegs;
        while (a < b) {
            size_t mid = (a + b) / 2;
            if (plan->segs[mid].end <= pos)
                a = mid + 1;
            else
                b = mid;
        }
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
        size_t k = 0, n = plan->nslots;
        while (k < n) {
            size_t mid = (k + n) / 2;
            if (SLOT(plan, mid)->old < pos)
                k = mid + 1;
            else
                n = mid;
        }
        uint64_t run_old = 0, run_oend = 0, run_new = 0, run_end = 0;
        int have = 0;
        for (; k < plan->nslots && SLOT(plan, k)->old < end; k++) {
            const ed_slot_t *s = SLOT(plan, k);
            /* A stub falling into the slot is part of its piece. */
            if (have && s->new_ - s->lead == run_end) {
                run_end += s->lead + slot_size(plan, s);
                run_oend = s->old + s->olen;
                continue;
            }
            if (have)
                QP_CHECK(fn(fnarg, run_old, run_oend - run_old, run_new, run_end - run_new));
            have = 1;
            run_old = s->old;
            run_oend = s->old + s->olen;
            run_new = s->new_ - s->lead;
            run_end = s->new_ + slot_size(plan, s);
        }
        if (have)
            QP_CHECK(fn(fnarg, run_old, run_oend - run_old, run_new, run_end - run_new));
        pos = end;
    }
    return 0;
}

/* Rebase every new address by DELTA (layout was computed from 0). */
/* The overflow (what found no hole) SKIP bytes further from the mirror: the layout is
 * still relative to the mirror's first byte. Pieces are placed apart (long branches
 * between them), so nothing inside one changes. */
static void
shift_overflow(ed_plan_t *plan, size_t skip)
{
    if (skip == 0)
        return;
    for (size_t i = 0; i < plan->nslots; i++)
        if (plan->lay[i].new_ >= plan->overflow)
            plan->lay[i].new_ += skip;
    for (size_t i = 0; i < plan->nstubs; i++)
        if (plan->stubs[i].before == NO_STUB && plan->stubs[i].new_ >= plan->overflow)
            plan->stubs[i].new_ += skip;
    edl_place_fall_stubs(plan);
    if (plan->nxlate > 0 && plan->xlate >= plan->overflow)
        plan->xlate += skip;
    memset(plan->seg_new_end, 0, (plan->prog->nprocs + 1) * sizeof(uint64_t));
    segment_ends(plan);
    plan->overflow += skip;
    plan->text_size += skip;
}

static void
rebase(ed_plan_t *plan, uint64_t delta)
{
    for (size_t i = 0; i < plan->nslots; i++)
        plan->lay[i].new_ += delta;
    for (size_t i = 0; i < plan->nstubs; i++)
        plan->stubs[i].new_ += delta;
    for (size_t i = 0; i < plan->nsegs; i++)
        if (plan->seg_new_end[i])
            plan->seg_new_end[i] += delta;
    if (plan->nxlate > 0)
        plan->xlate += delta;
}

/*
 * The translation stub and its table (arch.h) into BUF (the new code, from plan->text):
 * the entries of the file's procedures, each to its new code when it moved.
 */
static int
emit_xlate(ed_plan_t *plan, uint8_t *buf)
{
    const cfg_prog_t *prog = plan->prog;
    int rc = plan->isa->emit_xlate_stub(plan->xlate, edl_xlate_table_at(plan), buf + (plan->xlate - plan->text),
                                  ARCH_XLATE_STUB_LEN);
    if (rc < 0)
        return rc;
    uint64_t lo, hi;
    xlate_range(prog, &lo, &hi);
    if (hi - lo >= UINT32_MAX)
        return QP_ERANGE;
    uint64_t at = edl_xlate_table_at(plan), nslots = xlate_slots(prog), shift = 32;
    for (uint64_t k = nslots; k > 1; k /= 2)
        shift--;
    uint8_t *t = buf + (at - plan->text);
    uint8_t *slots = t + ARCH_XLATE_HDR;
    memset(slots, 0, 8 * nslots);
    for (uint32_t i = 0; i < prog->nprocs; i++) {
        const cfg_proc_t *p = &prog->procs[i];
        if (!xlate_key(p, lo, hi))
            continue;
        uint32_t key = (uint32_t)(p->entry - lo);
        const ed_slot_t *s = slot_at(plan, p->entry);
        int64_t d = (int64_t)((s != NULL ? s->new_ : p->entry) - lo);
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

typedef struct emit_job {
    const ed_plan_t *plan;
    uint8_t *buf;                /* the new code (from plan->text) */
    size_t *fall;                /* per part: the first of plan->fall its slots use */
    lock_sites_t *sites;         /* per part: its switchable increments */
} emit_job_t;

/* qp_task_fn: the slots of part K of the emit_job_t ARG. */
static int
emit_part(void *arg, unsigned worker, size_t k)
{
    (void)worker;
    const emit_job_t *j = arg;
    const ed_plan_t *plan = j->plan;
    const cfg_prog_t *prog = plan->prog;
    uint8_t *buf = j->buf;
    lock_sites_t *sites = &j->sites[k];
    int stretch = plan->opts.stretch ? 1 : 0;
    size_t fall = j->fall[k]; /* the next of plan->fall */
    size_t end = (k + 1) * EMIT_GRAIN < plan->nslots ? (k + 1) * EMIT_GRAIN : plan->nslots;
    for (size_t i = k * EMIT_GRAIN; i < end; i++) {
        const ed_slot_t *s = &plan->lay[i];
        const uint8_t *bytes = cfg_image_ptr(prog->img, s->old, NULL);
        arch_insn_t in;
        if (bytes == NULL || cfg_image_decode(prog->img, s->old, 0, &in) < 0)
            return QP_EDECODE;
        uint64_t insn = s->new_ + s->pre;
        uint64_t target = 0;
        if (in.kind == ARCH_KIND_JMP || in.kind == ARCH_KIND_JCC || in.kind == ARCH_KIND_CALL)
            /* `call next` (reads its own return address) keeps going to the next
             * relocated instruction; a jump to the next address goes where that code is
             * (another procedure's, maybe not moved at all). */
            target = in.kind == ARCH_KIND_CALL && in.target == s->old + in.len
                ? insn + s->len - stretch
                : in.kind == ARCH_KIND_CALL ? map_target(plan, in.target)
                                            : map_branch(plan, s->old, in.target);
        if (s->stub != NO_STUB)
            target = plan->stubs[s->stub].new_;
        /* An AArch64 switch table's adr forms its new base (ed_anchor.c). */
        const ed_anchor_t *anchor = plan->nanchors > 0 ? edl_anchor_at(plan, s->old) : NULL;
        if (anchor != NULL)
            in.target = anchor->base;
        uint8_t *out = buf + (s->new_ - plan->text);
        if (s->pre > 0
            && emit_probes(plan, s->old, ED_AT_BEFORE, s->new_, out, s->pre, sites) != s->pre)
            return QP_ERANGE;
        out += s->pre;
        int len = (s->flags & SLOT_XLATE)
            ? plan->isa->emit_jmp_xlate(bytes, &in, insn, plan->xlate,
                                        xlate_miss_rel(plan, s->old), out, ARCH_MAX_RELOC)
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
            && emit_probes(plan, s->old, ED_AT_AFTER, insn + s->len, out + s->len, s->post,
                           sites)
                   != s->post)
            return QP_ERANGE;
        if (s->flags & SLOT_JMP_AFTER) {
            if (fall >= plan->nfall)
                return QP_ERANGE;
            uint64_t at = insn + s->len + s->post;
            QP_CHECK(plan->isa->emit_jmp(at, map_branch(plan, s->old, plan->fall[fall++]),
                                         buf + (at - plan->text), PAD_LEN(plan)));
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
    if (plan->opts.on_progress != NULL)
        plan->opts.on_progress(plan->opts.progress_arg, done * EMIT_GRAIN, plan->nslots);
}

/* The moved slots into BUF on the pool (EMIT_GRAIN of them at a time), their lock sites
 * into the plan in layout order. */
static int
emit_slots(ed_plan_t *plan, uint8_t *buf)
{
    size_t nparts = (plan->nslots + EMIT_GRAIN - 1) / EMIT_GRAIN;
    size_t *fall = malloc((nparts + 1) * sizeof(size_t));
    lock_sites_t *sites = calloc(nparts + 1, sizeof(lock_sites_t));
    int rc = fall != NULL && sites != NULL ? 0 : QP_ENOMEM;
    for (size_t k = 0, n = 0; rc == 0 && k < nparts; k++) {
        fall[k] = n;
        size_t end = (k + 1) * EMIT_GRAIN < plan->nslots ? (k + 1) * EMIT_GRAIN : plan->nslots;
        for (size_t i = k * EMIT_GRAIN; i < end; i++)
            n += (plan->lay[i].flags & SLOT_JMP_AFTER) != 0;
    }
    emit_job_t job = { plan, buf, fall, sites };
    if (rc == 0)
        rc = qp_parallel_for(plan->opts.threads, nparts, 1, emit_part, &job, emit_progress);
    lock_sites_t all = { plan->lock_sites, plan->nlock_sites, plan->lock_cap };
    for (size_t k = 0; sites != NULL && k < nparts; k++) {
        for (size_t i = 0; rc == 0 && i < sites[k].n; i++)
            rc = note_lock_site(&all, sites[k].v[i]);
        free(sites[k].v);
    }
    plan->lock_sites = all.v;
    plan->nlock_sites = all.n;
    plan->lock_cap = all.cap;
    free(sites);
    free(fall);
    return rc;
}

/* The moved code in layout order, written through the space in one piece. */
static int
emit_code(ed_plan_t *plan, const qp_space_ops_t *ops, void *space)
{
    const cfg_prog_t *prog = plan->prog;
    /* Zeroed: the bytes nothing is emitted to (alignment before the translation table)
     * are then the same in every run, whatever the heap held. */
    uint8_t *buf = calloc(plan->text_size + 1, 1);
    if (buf == NULL)
        return QP_ENOMEM;
    /* Holes in the old text: what no code fills traps (int3), never old code. */
    for (size_t h = 0; h < plan->nholes; h++)
        if (plan->holes[3 * h + 2] > 0)
            memset(buf + plan->holes[3 * h], 0xcc, plan->holes[3 * h + 1] - plan->holes[3 * h]);
    int rc = emit_slots(plan, buf);
    /* Taken-edge stubs: the snippets, then a jmp to where the branch used to go. */
    lock_sites_t sites = { plan->lock_sites, plan->nlock_sites, plan->lock_cap };
    for (size_t i = 0; i < plan->nstubs && rc == 0; i++) {
        const ed_stub_t *st = &plan->stubs[i];
        arch_insn_t in;
        if (cfg_image_decode(prog->img, st->jcc, 0, &in) < 0) {
            rc = QP_EDECODE;
            break;
        }
        uint8_t *out = buf + (st->new_ - plan->text);
        uint32_t jmp = st->before == NO_STUB ? PAD_LEN(plan) : 0; /* else it falls in */
        int n = emit_probes(plan, st->jcc, ED_AT_TAKEN, st->new_, out, st->len - jmp, &sites);
        if (n != (int)(st->len - jmp)) {
            rc = n < 0 ? n : QP_ERANGE;
            break;
        }
        if (jmp == 0)
            continue;
        int j = plan->isa->emit_jmp(st->new_ + (uint64_t)n, map_branch(plan, st->jcc, in.target),
                                    out + n, PAD_LEN(plan));
        if (j < 0)
            rc = j;
    }
    plan->lock_sites = sites.v;
    plan->nlock_sites = sites.n;
    plan->lock_cap = sites.cap;
    if (rc == 0 && plan->nxlate > 0)
        rc = emit_xlate(plan, buf);
    if (rc == 0)
        edl_anchors_unpad(plan, buf);
    if (rc == 0 && plan->mirror == 0)
        rc = ops->write(space, plan->text, buf, plan->text_size);
    for (size_t h = 0; h < plan->nholes && rc == 0 && plan->mirror != 0; h++) {
        const uint64_t *hole = &plan->holes[3 * h];
        if (hole[2] > 0)
            rc = ops->write(space, plan->text + hole[0], buf + hole[0], hole[1] - hole[0]);
    }
    if (rc == 0 && plan->mirror != 0 && plan->text_size > plan->overflow)
        rc = ops->write(space, plan->text + plan->overflow, buf + plan->overflow,
                        plan->text_size - plan->overflow);
    free(buf);
    if (rc == 0 && plan->opts.on_progress != NULL)
        plan->opts.on_progress(plan->opts.progress_arg, plan->nslots, plan->nslots);
    return rc;
}

/* A jmp to the new code at every entry and indirect target in the old bytes. */
static int
emit_pads(ed_plan_t *plan, const qp_space_ops_t *ops, void *space)
{
    const cfg_prog_t *prog = plan->prog;
    for (uint32_t pi = 0; pi < prog->nprocs; pi++) {
        if (plan->reason[pi] != NULL || (prog->procs[pi].flags & CFG_PROC_FRAGMENT))
            continue;
        uint64_t *pads;
        size_t npads;
        uint32_t nind;
        QP_CHECK(edl_collect_pads(plan, pi, &pads, &npads, &nind));
        int rc = 0;
        for (size_t k = 0; k < npads && rc == 0; k++) {
            uint8_t jmp[ARCH_MAX_INSN];
            if (edl_dropped_at(plan, pads[k]) != CFG_NONE)
                continue; /* only direct branches of moved code reach it */
            const ed_slot_t *s = slot_at(plan, pads[k]);
            if (s == NULL)
                rc = QP_ENOTFOUND;
            else if ((rc = plan->isa->emit_jmp(pads[k], s->new_, jmp, sizeof(jmp))) > 0)
                rc = ops->write(space, pads[k], jmp, PAD_LEN(plan));
        }
        free(pads);
        QP_CHECK(rc);
        plan->stats.npads += (uint32_t)npads;
        plan->stats.nind_pads += nind;
    }
    return 0;
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
        /* Every jump that uses these entries must be in moved code. */
        int ok = 1;
        for (uint32_t u = 0; u < prog->ntables && ok; u++) {
            const cfg_table_t *o = &prog->tables[u];
            uint64_t oend = o->addr + (uint64_t)o->nentries * o->entry_size;
            uint64_t tend = tb->addr + (uint64_t)tb->nentries * tb->entry_size;
            if (o->addr < tend && tb->addr < oend && (slot_at(plan, o->jump) == NULL || u < t))
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
            const ed_slot_t *s = slot_at(plan, target);
            if (s == NULL && sure && edl_owner_at(prog, target) == owner) {
                free(buf);
                return QP_ERANGE; /* a case of moved code without its redirect */
            }
            if (s == NULL)
                continue; /* not moved: the entry stays */
            if (tb->relative) {
                int64_t rel = (int64_t)(s->new_ - tb->base);
                if (rel < INT32_MIN || rel > INT32_MAX) {
                    if (sure) {
                        free(buf);
                        return QP_ERANGE;
                    }
                    continue;
                }
                int32_t r32 = (int32_t)rel;
                memcpy(e, &r32, 4);
            } else
                memcpy(e, &s->new_, 8);
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
    if (!plan->laid_out)
        QP_CHECK(layout(plan, plan->opts.reuse_text && ops->alloc_over != NULL));
    QP_CHECK(edl_inplace_apply(plan, ops, space));
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
        shift_overflow(plan, skip);
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
    QP_CHECK(emit_code(plan, ops, space));
    QP_CHECK(emit_pads(plan, ops, space));
    QP_CHECK(edl_retarget_kept_calls(plan, ops, space));
    if (plan->opts.keep_tables)
        return 0;
    QP_CHECK(edl_anchors_apply(plan, ops, space));
    QP_CHECK(retarget_tables(plan, ops, space));
    return edl_retarget_labels(plan, ops, space);
}
