/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Switch tables whose address the compiler spilled to a stack slot (issue 34; sqlite's
 * VM on AArch64):
 *
 *     adrp x0, table ; add x0, x0, :lo12:table ; str x0, [sp, #16]    (once, on entry)
 *     ...
 *     ldr x0, [sp, #16] ; ldrh w0, [x0, w27, uxtw #1] ; adr x1, base ; add ; br x0
 *
 * The ISA's recogniser stops at the `ldr` (arch_jtab_t.slot_load); here the slot is
 * followed, a bounded data-flow that refuses rather than guesses:
 *  - while the procedure is traversed (cfg_slot_find): exactly one instruction of its
 *    code stores to any byte of the slot, a whole register formed just before it as an
 *    address (`adrp` + `add`, or `adr`): the table;
 *  - once it is traversed (cfg_slot_holds), over every instruction found: none stores to
 *    the slot but that one; no address of the frame at or below the slot reaches a
 *    register (`add xN, sp, #k` with k below the slot's end, `mov xN, sp`; anything
 *    computed from the frame pointer, which is not followed), so no callee or pointer can
 *    write it; no use of sp or x29 the ISA cannot describe; every indirect jump resolved;
 *    nothing joins between the address's formation and the store, or between the load
 *    and the `br`; and every way into the load - from the procedure's entries, landing
 *    pads, and from right after each change of sp (the frame moves: alloca, epilogues) -
 *    passes the store. Then every load reads the stored address.
 * A proof that fails makes the procedure be built again without the table (its jump stays
 * unresolved, as before), as for x86-64's hoisted bases (cfg_verify_hoisted).
 */
#include <stdlib.h>
#include <string.h>

#include "cfg/cfg_trav_priv.h"

/* Does [LO, HI) overlap the 8-byte slot at SLOT? */
static int
hits_slot(int64_t lo, int64_t hi, int64_t slot)
{
    return lo < slot + 8 && slot < hi;
}

/* Is J a jump whose slot proof already failed (t->no_far)? */
static int
refused(const trav_t *t, uint64_t j)
{
    for (size_t k = 0; t->no_far != NULL && k < t->no_far->n; k++)
        if (t->no_far->v[k] == j)
            return 1;
    return 0;
}

int
cfg_slot_find(trav_t *t, uint64_t j, arch_jtab_t *jt, slot_proof_t *pf)
{
    const cfg_image_t *img = t->b->img;
    const cfg_bproc_t *bp = t->bp;
    const arch_isa_t *isa = cfg_image_isa(img);
    if (jt->slot_load == 0 || isa->sp_access == NULL || isa->slot_store == NULL
        || refused(t, j))
        return 0;
    /* The one store to the slot, among every word of the procedure (the proof looks at
     * the traversed instructions again). */
    uint64_t store = 0;
    int nstores = 0;
    for (size_t r = 0; r < bp->ranges.n; r++) {
        const cfg_range_t *rg = &bp->ranges.v[r];
        for (uint64_t a = rg->start; a + isa->max_insn <= rg->end; a += isa->insn_align) {
            size_t avail;
            const uint8_t *p = cfg_image_ptr(img, a, &avail);
            arch_sp_access_t acc;
            if (p == NULL || isa->sp_access(p, avail, a, &acc) < 0)
                continue;
            if ((acc.flags & ARCH_SP_STORE) && hits_slot(acc.lo, acc.hi, jt->slot)) {
                store = a;
                nstores++;
            }
        }
    }
    if (nstores != 1)
        return 0;
    uint64_t from = store;
    for (size_t r = 0; r < bp->ranges.n; r++)
        if (store >= bp->ranges.v[r].start && store < bp->ranges.v[r].end)
            from = store - bp->ranges.v[r].start > 256 ? store - 256
                                                       : bp->ranges.v[r].start;
    size_t avail;
    const uint8_t *p = cfg_image_ptr(img, from, &avail);
    uint64_t value, first;
    if (p == NULL || avail < store - from + 4
        || isa->slot_store(p, (size_t)(store - from) + 4, from, jt->slot, &value, &first)
            < 0)
        return 0;
    jt->table = value;
    *pf = (slot_proof_t) {
        .jump = j, .load = jt->slot_load, .store = store, .first = first, .slot = jt->slot
    };
    return 1;
}

/* Is A an instruction the traversal found, and no other way joins in (A0, A1]? */
static int
straight(const trav_t *t, uint64_t a0, uint64_t a1)
{
    const cfg_bproc_t *bp = t->bp;
    int64_t s0 = cfg_slot(bp, a0), s1 = cfg_slot(bp, a1);
    if (s0 < 0 || s1 < 0 || s1 < s0 || s1 - s0 != (int64_t)(a1 - a0)
        || !(t->sc->map[s0] & M_START) || !(t->sc->map[s1] & M_START))
        return 0;
    for (int64_t s = s0 + 1; s <= s1; s++)
        if (t->sc->map[s] & M_LEADER)
            return 0;
    for (uint64_t a = a0 + 1; a <= a1; a++) {
        if (a == bp->p.entry)
            return 0;
        for (size_t k = 0; k < bp->extra_entries.n; k++)
            if (bp->extra_entries.v[k] == a)
                return 0;
    }
    return 1;
}

/* The frame checks over every traversed instruction; the ways in (entries, and right
 * after each change of sp: marked with the high bit) pushed on Q. 1 holds, 0 not, <0. */
static int
frame_kept(trav_t *t, const slot_proof_t *pf, cfg_u64_vec_t *q)
{
    cfg_builder_t *b = t->b;
    const cfg_bproc_t *bp = t->bp;
    const arch_isa_t *isa = cfg_image_isa(b->img);
    QP_CHECK(CFG_VEC_PUSH(*q, bp->p.entry));
    for (size_t k = 0; k < bp->extra_entries.n; k++)
        QP_CHECK(CFG_VEC_PUSH(*q, bp->extra_entries.v[k]));
    for (size_t k = 0; k < b->landing_pads.n; k++)
        if (cfg_slot(bp, b->landing_pads.v[k]) >= 0)
            QP_CHECK(CFG_VEC_PUSH(*q, b->landing_pads.v[k]));
    uint64_t base = 0;
    for (size_t r = 0; r < bp->ranges.n; r++) {
        const cfg_range_t *rg = &bp->ranges.v[r];
        for (uint64_t off = 0; off < rg->end - rg->start; off++) {
            if (!(t->sc->map[base + off] & M_START))
                continue;
            uint64_t a = rg->start + off;
            size_t avail;
            const uint8_t *p = cfg_image_ptr(b->img, a, &avail);
            arch_sp_access_t acc;
            if (p == NULL || isa->sp_access(p, avail, a, &acc) < 0
                || (acc.flags & ARCH_SP_UNKNOWN))
                return 0;
            if ((acc.flags & ARCH_SP_STORE) && hits_slot(acc.lo, acc.hi, pf->slot)
                && a != pf->store)
                return 0; /* another store to the slot */
            if ((acc.flags & ARCH_SP_ADDR) && acc.lo < pf->slot + 8)
                return 0; /* the slot's address may be taken */
            if (acc.flags & ARCH_SP_WRITES_SP)
                QP_CHECK(CFG_VEC_PUSH(*q, a | (1ull << 63)));
        }
        base += rg->end - rg->start;
    }
    return 1;
}

int
cfg_slot_holds(trav_t *t, const slot_proof_t *pf)
{
    const cfg_bproc_t *bp = t->bp;
    if (t->unresolved > 0 || !straight(t, pf->first, pf->store)
        || !straight(t, pf->load, pf->jump))
        return 0;
    size_t total = 0;
    for (size_t r = 0; r < bp->ranges.n; r++)
        total += bp->ranges.v[r].end - bp->ranges.v[r].start;
    uint8_t *seen = calloc(total + 1, 1);
    cfg_u64_vec_t q = { 0 };
    if (seen == NULL)
        return QP_ENOMEM;
    int rc = frame_kept(t, pf, &q), proven = rc == 1;
    rc = rc < 0 ? rc : 0;
    /* Every way into the load passes the store. */
    if (rc == 0 && proven)
        rc = cfg_ways_pass(t, &q, seen, pf->store, pf->load);
    else
        rc = rc < 0 ? rc : 0;
    free(seen);
    CFG_VEC_FREE(q);
    return rc;
}
