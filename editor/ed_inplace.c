/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * In-place measurement for files: the points of procedures left in place (their code
 * must keep its address, or cannot be moved) get a 5-byte jmp to a trampoline
 * (patch/pt_inplace.c) in a new executable region; the live technique applied to a file.
 * To join the shared patch layer (issue 29).
 *
 * A point may take a jump only when no control can enter the bytes the jump covers but
 * at their first: those bytes stay inside the point's block (every block start is an
 * entry), and hold no other block's start, procedure entry, landing pad, nor any address
 * the program holds (a label stored as a value). A block too short for a jump may take
 * one when it does not fall through and padding follows it. Points that cannot are left
 * unmeasured and counted (ED_IP_*), never patched by luck.
 *
 * Counters in trampolines are incremented with a lock when the plan's mode is anything
 * but plain: they are not in the lock-site table of switchable increments.
 */
#include <stdlib.h>
#include <string.h>

#include "base/qp_sort.h"
#include "editor/ed.h"
#include "editor/ed_layout_priv.h"
#include "patch/patch.h"

struct ed_inplace {
    const cfg_prog_t *prog;
    int go;             /* a Go program: no instruction that may fault is displaced */
    const ed_plan_t *plan; /* or NULL */
    uint64_t *starts;   /* every block start and procedure entry, sorted */
    size_t nstarts;
    uint64_t *entries;  /* held addresses, interior entries, landing pads, sorted */
    size_t nentries;
    size_t cap;
};

const char *
ed_inplace_why(int code)
{
    switch (code) {
    case ED_IP_OK: return "patched";
    case ED_IP_SHORT: return "block too short for a jump";
    case ED_IP_TARGET: return "an entry (block start, landing pad, held address) inside "
                              "the bytes of the jump";
    case ED_IP_INSN: return "an instruction that cannot be moved";
    case ED_IP_FAULT: return pt_go_fault_why;
    default: return "?";
    }
}

static int
push_entry(ed_inplace_t *ip, uint64_t a)
{
    QP_CHECK(cfg_vec_grow((void **)&ip->entries, &ip->cap, ip->nentries + 1, sizeof(uint64_t)));
    ip->entries[ip->nentries++] = a;
    return 0;
}

static int
on_pad(void *arg, uint64_t func, uint64_t pad)
{
    (void)func;
    return push_entry(arg, pad);
}

/* ed_unwind_landing_pads' pads into IP's entries, and its answer: the ones PLAN read
 * (edl_decide) when it did, of the same program. When the plan ran out of memory keeping
 * them, its list may be short: read them again, as when it did not read them. */
static int
landing_pads(ed_inplace_t *ip, const ed_plan_t *plan)
{
    if (plan == NULL || plan->pads_rc == 1 || plan->pads_rc == QP_ENOMEM
        || plan->prog->img != ip->prog->img)
        return ed_unwind_landing_pads(ip->prog->img, on_pad, ip);
    for (size_t i = 0; i < plan->npads; i++)
        QP_CHECK(push_entry(ip, plan->pads[i]));
    return plan->pads_rc;
}

void
ed_inplace_destroy(ed_inplace_t *ip)
{
    if (ip == NULL)
        return;
    free(ip->starts);
    free(ip->entries);
    free(ip);
}

/*
 * The start of every block and the entry of every procedure into V (nblocks + nprocs),
 * merged in address order from the blocks by address and the procedures (sorted by
 * entry) - a sort of millions of addresses otherwise, twice a rewrite - and 1; or as
 * they come, and 0, when the procedures are not in order.
 */
static int
block_and_proc_starts(const cfg_prog_t *prog, uint64_t *v)
{
    size_t nb;
    const uint32_t *by_addr = cfg_blocks_by_addr(prog, &nb);
    int sorted = by_addr != NULL || nb == 0;
    for (uint32_t i = 1; sorted && i < prog->nprocs; i++)
        sorted = prog->procs[i - 1].entry <= prog->procs[i].entry;
    if (!sorted) {
        for (uint32_t i = 0; i < prog->nblocks; i++)
            v[i] = prog->blocks[i].start;
        for (uint32_t i = 0; i < prog->nprocs; i++)
            v[prog->nblocks + i] = prog->procs[i].entry;
        return 0;
    }
    size_t b = 0, p = 0, k = 0;
    while (b < nb || p < prog->nprocs) {
        uint64_t bs = b < nb ? prog->blocks[by_addr[b]].start : UINT64_MAX;
        if (p < prog->nprocs && (b == nb || prog->procs[p].entry < bs))
            v[k++] = prog->procs[p++].entry;
        else {
            v[k++] = bs;
            b++;
        }
    }
    return 1;
}

int
ed_inplace_create(const cfg_prog_t *prog, const ed_plan_t *plan, ed_inplace_t **out)
{
    if (prog == NULL || out == NULL)
        return QP_EINVAL;
    ed_inplace_t *ip = calloc(1, sizeof(*ip));
    if (ip == NULL)
        return QP_ENOMEM;
    ip->prog = prog;
    ip->plan = plan;
    int rc = 0;
    ip->starts = malloc(((size_t)prog->nblocks + prog->nprocs + 1) * sizeof(uint64_t));
    if (ip->starts == NULL)
        rc = QP_ENOMEM;
    int sorted = rc == 0 && block_and_proc_starts(prog, ip->starts);
    ip->nstarts = rc == 0 ? (size_t)prog->nblocks + prog->nprocs : 0;
    const cfg_held_t *held = NULL; /* lent (cfg_held_addrs_view): read, not copied */
    size_t nheld = 0;
    if (rc == 0)
        rc = cfg_held_addrs_view(prog, &held, &nheld);
    for (size_t i = 0; rc == 0 && i < nheld; i++)
        rc = push_entry(ip, held[i].addr);
    const uint64_t *xt = NULL;
    size_t nxt = 0;
    if (rc == 0)
        rc = cfg_interior_entries(prog, &xt, &nxt);
    for (size_t i = 0; rc == 0 && i < nxt; i++)
        rc = push_entry(ip, xt[i]);
    /* Go enters code right after a 1-byte nop that its compiler and assembler put
     * there for that: every goroutine returns to runtime.goexit + 1 (past its nop:
     * PCQuantum), and recover() resumes a function at its deferreturn call (after a
     * nop, so that it is not the return address of the call to gopanic). */
    int go = ip->go = cfg_image_runtime(prog->img) == CFG_RUNTIME_GO;
    for (uint32_t i = 0; rc == 0 && go && i < prog->nblocks; i++) {
        arch_insn_t in;
        for (uint64_t a = prog->blocks[i].start; rc == 0 && a < prog->blocks[i].end;
             a += in.len) {
            if (cfg_image_decode(prog->img, a, prog->blocks[i].end, &in) < 0)
                break;
            if (in.kind == ARCH_KIND_NOP && in.len == 1)
                rc = push_entry(ip, a + 1);
        }
    }
    /* Every return address is an entry, also after a call the CFG takes for one that
     * never returns (Go's mcall does return). */
    for (uint32_t i = 0; rc == 0 && i < prog->nblocks; i++)
        if (prog->blocks[i].last_kind == ARCH_KIND_CALL
            || prog->blocks[i].last_kind == ARCH_KIND_CALL_IND)
            rc = push_entry(ip, prog->blocks[i].end);
    if (rc == 0) {
        rc = landing_pads(ip, plan);
        if (rc == QP_EFORMAT)
            rc = 0; /* the pads that could be read are in; the rest are in no block */
    }
    if (rc < 0) {
        ed_inplace_destroy(ip);
        return rc;
    }
    /* (a radix sort: qsort's comparisons of the entries cost cc1's qp rewrite 0.24 G
     * instructions, on the main thread) */
    if (!sorted)
        qp_sort_u64(ip->starts, ip->nstarts);
    qp_sort_u64(ip->entries, ip->nentries);
    *out = ip;
    return 0;
}

/* Is any address of the sorted V[0..N) in (LO, HI)? */
static int
any_inside(const uint64_t *v, size_t n, uint64_t lo, uint64_t hi)
{
    size_t k = cfg_u64_lower_bound(v, n, lo + 1);
    return k < n && v[k] < hi;
}

int
ed_inplace_fit(const ed_inplace_t *ip, uint32_t block, uint64_t at, uint32_t *len,
               uint32_t *span)
{
    if (ip == NULL || len == NULL || span == NULL || block >= ip->prog->nblocks)
        return QP_EINVAL;
    const cfg_image_t *img = ip->prog->img;
    const cfg_block_t *b = &ip->prog->blocks[block];
    if (at < b->start || at >= b->end)
        return QP_EINVAL;
    uint64_t a = at;
    arch_insn_t in = { 0 };
    while (a - at < 5 && a < b->end) {
        if (cfg_image_decode(img, a, b->end, &in) < 0)
            return ED_IP_INSN;
        /* Go: no instruction that may fault is displaced (patch/pt_go.c). */
        if (ip->go && pt_go_may_fault(cfg_image_isa(img), cfg_image_ptr(img, a, NULL), in.len, a))
            return ED_IP_FAULT;
        a += in.len;
        if (in.kind != ARCH_KIND_SEQ && in.kind != ARCH_KIND_NOP && in.kind != ARCH_KIND_ENDBR
            && in.kind != ARCH_KIND_SYSCALL)
            break; /* control leaves here (the block's last instruction) */
    }
    uint64_t end = a;
    if (a - at < 5) {
        /* Padding after a block that does not fall through may take the jump's tail. */
        int leaves = a == b->end
            && (in.kind == ARCH_KIND_JMP || in.kind == ARCH_KIND_JMP_IND
                || in.kind == ARCH_KIND_RET || in.kind == ARCH_KIND_HALT);
        size_t avail = 0;
        const uint8_t *p = leaves ? cfg_image_ptr(img, a, &avail) : NULL;
        if (p == NULL || avail < 5 - (a - at) || !arch_is_padding(p, 5 - (a - at))
            || !cfg_image_is_code(img, at + 4))
            return ED_IP_SHORT;
        end = at + 5;
        for (uint64_t q = a; ip->plan != NULL && q < end; q++)
            if (edl_seg_at(ip->plan, q, NULL) != NULL)
                return ED_IP_SHORT; /* padding of moved code: redirects and reuse take it */
    }
    if (any_inside(ip->starts, ip->nstarts, at, end)
        || any_inside(ip->entries, ip->nentries, at, end))
        return ED_IP_TARGET;
    /* Every displaced instruction must be movable: build the trampoline once. */
    const uint8_t *orig = cfg_image_ptr(img, at, NULL);
    if (orig == NULL)
        return ED_IP_INSN;
    uint8_t scratch[PT_INPLACE_MAX(24)];
    pt_inplace_t t = { .addr = at, .orig = orig, .len = (uint32_t)(a - at),
                        .counter = at, .inc_mode = ARCH_INC_ATOMIC, .save_flags = 1 };
    if (pt_inplace_emit(&t, at, scratch, sizeof(scratch)) < 0)
        return ED_IP_INSN;
    *len = (uint32_t)(a - at);
    *span = (uint32_t)(end - at);
    return ED_IP_OK;
}

const char *
ed_plan_inplace_unfit(const ed_plan_t *plan, uint32_t proc)
{
    if (plan == NULL || proc >= plan->prog->nprocs || plan->reason[proc] == NULL)
        return NULL;
    return plan->unfit != NULL ? plan->unfit[proc] : "not decided";
}

/*****************************************************************************
 * Applying the plan's in-place probes (ed_plan_apply)
 */

int
ed_plan_set_inplace(ed_plan_t *plan, ed_inplace_t *ip)
{
    if (plan == NULL || (ip != NULL && (ip->plan != plan || ip->prog != plan->prog))
        || plan->stats.inplace_text != 0)
        return QP_EINVAL;
    ed_inplace_destroy(plan->inplace);
    plan->inplace = ip;
    return 0;
}

int
edl_inplace_apply(ed_plan_t *plan, const qp_space_ops_t *ops, void *space)
{
    ed_inplace_t *ip = plan->inplace; /* the driver's, or made here */
    plan->inplace = NULL;
    if (plan->nip_probes == 0 || plan->stats.inplace_text != 0) {
        ed_inplace_destroy(ip);
        return 0; /* none, or applied already */
    }
    const cfg_prog_t *prog = plan->prog;
    if (ip == NULL)
        QP_CHECK(ed_inplace_create(prog, plan, &ip));
    uint32_t *lens = malloc(plan->nip_probes * 2 * sizeof(uint32_t));
    int rc = lens == NULL ? QP_ENOMEM : 0;
    uint64_t size = 0;
    /* Fit each point again (the driver did: a point that no longer fits is a bug). */
    for (size_t i = 0; rc == 0 && i < plan->nip_probes; i++) {
        const ed_probe_t *pr = &plan->ip_probes[i];
        uint32_t blk = cfg_block_at(prog, pr->addr);
        if (blk == CFG_NONE || plan->reason[prog->blocks[blk].proc] == NULL
            || pr->at != ED_AT_BEFORE || pr->what != ED_SNIP_COUNT
            || (i > 0 && plan->ip_probes[i - 1].addr + lens[2 * i - 1] > pr->addr)) {
            rc = QP_EINVAL; /* not a point in place, or two that overlap */
            break;
        }
        int fit = ed_inplace_fit(ip, blk, pr->addr, &lens[2 * i], &lens[2 * i + 1]);
        if (fit != ED_IP_OK)
            rc = fit < 0 ? fit : QP_EBUG;
    }
    const cfg_image_t *img = prog->img;
    uint64_t lo = UINT64_MAX, hi = 0, region = 0;
    for (size_t i = 0; i < img->nsections; i++)
        if (img->sections[i].flags & CFG_SEC_ALLOC) {
            const cfg_section_t *s = &img->sections[i];
            lo = s->vma < lo ? s->vma : lo;
            hi = s->vma + s->size > hi ? s->vma + s->size : hi;
        }
    /* Sizes: the trampolines emitted once past the image (a size depends on the address
     * only for a loop/jrcxz whose target would be in rel8 reach: never from there). */
    int mode = plan->opts.atomic == ARCH_INC_PLAIN ? ARCH_INC_PLAIN : ARCH_INC_ATOMIC;
    for (size_t i = 0; rc == 0 && i < plan->nip_probes; i++) {
        const ed_probe_t *pr = &plan->ip_probes[i];
        uint8_t scratch[PT_INPLACE_MAX(24)];
        pt_inplace_t t = {
            .addr = pr->addr, .orig = cfg_image_ptr(img, pr->addr, NULL), .len = lens[2 * i],
            .counter = plan->counters + 8 * (uint64_t)pr->counter, .inc_mode = mode,
            .save_flags = pr->save_flags,
        };
        int n = pt_inplace_emit(&t, (hi + 4096 + size + 15) & ~(uint64_t)15, scratch,
                                 sizeof(scratch));
        if (n < 0)
            rc = n;
        size += n > 0 ? (uint64_t)n : 0;
    }
    size += 16; /* (slack: never needed) */
    if (rc == 0)
        rc = ops->alloc_near(space, lo, hi, size, ED_PROT_R | ED_PROT_X, &region);
    uint8_t *buf = rc == 0 ? malloc(size) : NULL;
    if (rc == 0 && buf == NULL)
        rc = QP_ENOMEM;
    if (buf != NULL)
        memset(buf, 0xcc, size); /* int3 after the last trampoline */
    size_t k = 0;
    for (size_t i = 0; rc == 0 && i < plan->nip_probes; i++) {
        const ed_probe_t *pr = &plan->ip_probes[i];
        pt_inplace_t t = {
            .addr = pr->addr, .orig = cfg_image_ptr(img, pr->addr, NULL), .len = lens[2 * i],
            .counter = plan->counters + 8 * (uint64_t)pr->counter, .inc_mode = mode,
            .save_flags = pr->save_flags,
        };
        int n = pt_inplace_emit(&t, region + k, buf + k, size - k);
        if (n < 0) {
            rc = n;
            break;
        }
        uint8_t patch[64];
        uint32_t span = lens[2 * i + 1];
        rc = pt_inplace_patch(&t, region + k, span, patch, sizeof(patch));
        if (rc >= 0)
            rc = ops->write(space, pr->addr, patch, span);
        k += (size_t)n;
        plan->stats.nflag_saves += pr->save_flags != 0;
    }
    if (rc == 0)
        rc = ops->write(space, region, buf, size);
    if (rc == 0) {
        plan->stats.ninplace = (uint32_t)plan->nip_probes;
        plan->stats.bytes_inplace = k;
        plan->stats.inplace_text = region;
    }
    free(buf);
    free(lens);
    ed_inplace_destroy(ip);
    return rc;
}
