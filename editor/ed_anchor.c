/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * AArch64 switch tables retargeted by moving their base (issue 34).
 *
 * gcc's and clang's tables hold word offsets from an `adr` base in the code:
 *
 *     ldrb  w2, [x2, w0, uxtw]     ; entry (1, 2 or 4 bytes, signed or not)
 *     adr   x0, .Lrtx4             ; the anchor
 *     add   x2, x0, w2, sxtb #2    ; base + (entry << 2)
 *     br    x2
 *
 * Relocated as it is, the `adr` still forms the old base, so every dispatch lands on the
 * redirect at an old case address: one `b` more per dispatch (lua's and sqlite's VMs
 * dispatch millions of times). Here the relocated `adr` forms a new base instead, near
 * the new code, and the table's entries are rewritten as offsets from it to the cases'
 * new addresses (a slot's new address: where its redirect would jump, counters of the
 * table's edges included, so qp's counts stay exact).
 *
 * Only where it is safe (else the table and its `adr` stay as they are, and the cases
 * keep their redirects, which stay in any case for anything else that reaches them):
 *  - the dispatch is the compiler's whole sequence (arch_jtab_t.anchor: nothing but the
 *    add reads the adr's register), its `adr` and `br` in one moved procedure;
 *  - the bound is proven and no other table found shares the entries' bytes (a table's
 *    entries count from one label in its procedure's code: no code elsewhere can use
 *    them; every `br` of a moved procedure has known targets);
 *  - every case moved, and all the new offsets fit the entries: 1-byte entries reach
 *    256 words (1 KiB), 2-byte ones 256 KiB. A table whose cases spread further in the
 *    new code (qp's counters between them) keeps its redirects and is counted
 *    (ed_stats_t.ntables_kept); widening its entries is left.
 * The old `adr` becomes a `b` to the new one: old code that runs into the dispatch (an
 * address held inside the procedure) goes on in the new code, where the rewritten
 * entries mean what they say, never to an old base with new offsets.
 */
#include <stdlib.h>
#include <string.h>

#include "base/qp_search.h"
#include "editor/ed_layout_priv.h"

/* Entries' value range: [*LO, *HI] for ENTRY_SIZE bytes, signed unless ZEXT. */
static void
entry_range(const cfg_table_t *tb, int64_t *lo, int64_t *hi)
{
    unsigned bits = 8u * tb->entry_size;
    if (tb->zext) {
        *lo = 0;
        *hi = (int64_t)((1ull << bits) - 1);
    } else {
        *lo = -(int64_t)(1ull << (bits - 1));
        *hi = (int64_t)((1ull << (bits - 1)) - 1);
    }
}

/* May table T move its base at all (its shape and its users)? */
static int
anchor_candidate(const ed_plan_t *plan, uint32_t t)
{
    const cfg_prog_t *prog = plan->prog;
    const cfg_table_t *tb = &prog->tables[t];
    if (tb->anchor == 0 || !tb->bounded || !tb->relative || tb->nentries == 0
        || tb->shift > 3 || (tb->entry_size != 1 && tb->entry_size != 2 && tb->entry_size != 4))
        return 0;
    uint32_t owner = edl_owner_at(prog, tb->jump);
    if (owner == CFG_NONE || plan->reason[owner] != NULL
        || edl_owner_at(prog, tb->anchor) != owner || edl_slot_new(plan, tb->anchor) == 0
        || edl_slot_new(plan, tb->jump) == 0)
        return 0;
    uint64_t tend = tb->addr + (uint64_t)tb->nentries * tb->entry_size;
    for (uint32_t u = 0; u < prog->ntables; u++) {
        const cfg_table_t *o = &prog->tables[u];
        uint64_t oend = o->addr + (uint64_t)o->nentries * o->entry_size;
        if (u != t && o->addr < tend && tb->addr < oend)
            return 0;
    }
    return 1;
}

/* The old entry I of TB, read from the image (as cfg_jtab_entry): its target. */
static uint64_t
old_target(const uint8_t *e, const cfg_table_t *tb)
{
    uint64_t v = 0;
    memcpy(&v, e, tb->entry_size); /* little-endian host and target */
    if (!tb->zext && tb->entry_size < 8) {
        uint64_t m = 1ull << (8u * tb->entry_size - 1);
        v = (v ^ m) - m;
    }
    return tb->base + (v << tb->shift);
}

/*
 * The new base of table T, with its cases' new addresses in NEW (nentries), into *BASE:
 * 1, or 0 when the table stays as it is. Closest to the relocated `adr` itself that the
 * entries allow (so it stays one `adr`).
 */
static int
choose_base(const ed_plan_t *plan, const cfg_table_t *tb, const uint8_t *old,
            uint64_t *new_, uint64_t *base)
{
    uint64_t lo = UINT64_MAX, hi = 0, step = 1ull << tb->shift;
    for (uint32_t i = 0; i < tb->nentries; i++) {
        uint64_t n = edl_slot_new(plan, old_target(old + (size_t)i * tb->entry_size, tb));
        if (n == 0)
            return 0; /* a case that stays: its old address is no offset from new code */
        new_[i] = n;
        lo = n < lo ? n : lo;
        hi = n > hi ? n : hi;
    }
    for (uint32_t i = 0; i < tb->nentries; i++)
        if ((new_[i] - lo) % step != 0)
            return 0;
    int64_t elo, ehi;
    entry_range(tb, &elo, &ehi);
    /* base in [hi - ehi * step, lo - elo * step], a multiple of step away from lo */
    if ((hi - lo) / step > (uint64_t)(ehi - elo))
        return 0;
    int64_t bmin = (int64_t)hi - ehi * (int64_t)step, bmax = (int64_t)lo - elo * (int64_t)step;
    int64_t want = (int64_t)edl_slot_new(plan, tb->anchor);
    int64_t b = want < bmin ? bmin : want > bmax ? bmax : want;
    b -= (b - (int64_t)lo) % (int64_t)step;
    if (b < bmin)
        b += (int64_t)step;
    if (b < bmin || b > bmax)
        return 0;
    *base = (uint64_t)b;
    return 1;
}

static int
anchor_cmp(const void *a, const void *b)
{
    uint64_t x = ((const ed_anchor_t *)a)->adr, y = ((const ed_anchor_t *)b)->adr;
    return x < y ? -1 : x > y;
}

int
edl_anchors_plan(ed_plan_t *plan)
{
    const cfg_prog_t *prog = plan->prog;
    plan->nanchors = 0;
    for (uint32_t t = 0; t < prog->ntables; t++) {
        if (!anchor_candidate(plan, t))
            continue;
        const cfg_table_t *tb = &prog->tables[t];
        size_t avail, len = (size_t)tb->nentries * tb->entry_size;
        const uint8_t *old = cfg_image_ptr(prog->img, tb->addr, &avail);
        if (old == NULL || avail < len)
            continue;
        uint64_t *new_ = malloc(tb->nentries * sizeof(uint64_t)), base = 0;
        if (new_ == NULL)
            return QP_ENOMEM;
        int ok = choose_base(plan, tb, old, new_, &base);
        free(new_);
        if (!ok) {
            if (plan->stats.ntables_kept++ == 0)
                plan->stats.table_kept = tb->jump;
            continue;
        }
        if (plan->nanchors == plan->anchor_cap) {
            size_t cap = plan->anchor_cap ? 2 * plan->anchor_cap : 16;
            ed_anchor_t *v = realloc(plan->anchors, cap * sizeof *v);
            if (v == NULL)
                return QP_ENOMEM;
            plan->anchors = v;
            plan->anchor_cap = cap;
        }
        plan->anchors[plan->nanchors++] = (ed_anchor_t) { tb->anchor, base, t };
    }
    if (plan->nanchors > 0)
        qsort(plan->anchors, plan->nanchors, sizeof *plan->anchors, anchor_cmp);
    for (size_t i = 1; i < plan->nanchors; i++)
        if (plan->anchors[i - 1].adr == plan->anchors[i].adr)
            return QP_EBUG; /* one adr, two tables: anchor_candidate's overlap check */
    return 0;
}

const ed_anchor_t *
edl_anchor_at(const ed_plan_t *plan, uint64_t adr)
{
    size_t i = qp_lower_bound_u64(plan->anchors, plan->nanchors, sizeof(*plan->anchors),
                                  offsetof(ed_anchor_t, adr), adr);
    return i < plan->nanchors && plan->anchors[i].adr == adr ? &plan->anchors[i] : NULL;
}

int
edl_anchors_apply(ed_plan_t *plan, const qp_space_ops_t *ops, void *space)
{
    const cfg_prog_t *prog = plan->prog;
    for (size_t k = 0; k < plan->nanchors; k++) {
        const ed_anchor_t *a = &plan->anchors[k];
        const cfg_table_t *tb = &prog->tables[a->table];
        size_t avail, len = (size_t)tb->nentries * tb->entry_size;
        const uint8_t *old = cfg_image_ptr(prog->img, tb->addr, &avail);
        uint8_t *buf = old != NULL && avail >= len ? malloc(len) : NULL;
        if (buf == NULL)
            return old != NULL && avail >= len ? QP_ENOMEM : QP_EBUG;
        for (uint32_t i = 0; i < tb->nentries; i++) {
            uint8_t *e = buf + (size_t)i * tb->entry_size;
            uint64_t n = edl_slot_new(plan, old_target(old + (size_t)i * tb->entry_size, tb));
            /* in range and a whole number of steps (choose_base); the low bytes of
             * the two's complement are the entry, signed or not */
            int64_t v = (int64_t)(n - a->base) / (int64_t)(1ull << tb->shift);
            memcpy(e, &v, tb->entry_size);
        }
        int rc = ops->write(space, tb->addr, buf, len);
        free(buf);
        QP_CHECK(rc);
        /* The old adr: on to the new one (after its block's snippets unless it starts
         * the block, where a redirect would have gone through them). */
        uint32_t bi = cfg_block_at(prog, a->adr);
        uint64_t to = edl_slot_new(plan, a->adr);
        if (bi == CFG_NONE || prog->blocks[bi].start != a->adr)
            to = edl_slot_insn(plan, a->adr);
        uint8_t jmp[ARCH_MAX_INSN];
        int n = plan->isa->emit_jmp(a->adr, to, jmp, sizeof(jmp));
        if (n < 0)
            return n;
        QP_CHECK(ops->write(space, a->adr, jmp, (size_t)n));
        plan->stats.ntables++;
        plan->stats.ntable_entries += tb->nentries;
    }
    return 0;
}

/*
 * The layout reserves 8 bytes for a moved `adr` (adrp + add where its target is out of
 * reach) and pads a shorter form with a nop. An anchor's new base lies near, so its
 * `adr` is one instruction and a nop that every dispatch would run (sqlite's VM: 355,000
 * of them on bench.sql, 0.5% of the whole run). The instructions after the `adr` up to
 * the `br` - one block, none with snippets, stubs or jumps after it, none pc-relative -
 * move up 4 bytes and the nop goes after the `br`, where nothing runs it. (Those two or
 * three instructions are then 4 bytes before where the old-to-new map puts them; no
 * branch goes to them, being inside a block, and no call returns there.)
 */
void
edl_anchors_unpad(const ed_plan_t *plan, uint8_t *buf)
{
    const cfg_prog_t *prog = plan->prog;
    uint8_t nop[4];
    if (plan->opts.stretch || plan->isa->jmp_len != 4
        || plan->isa->emit_nops(sizeof nop, nop, sizeof nop) != (int)sizeof nop)
        return;
    for (size_t i = 0; i < plan->nanchors; i++) {
        const ed_anchor_t *a = &plan->anchors[i];
        const cfg_table_t *tb = &prog->tables[a->table];
        const ed_slot_t *s = edl_slot_at(plan, a->adr);
        uint32_t blk = cfg_block_at(prog, a->adr);
        if (s == NULL || s->len != 8 || s->post != 0 || s->stub != NO_STUB
            || (s->flags & (SLOT_JMP_AFTER | SLOT_XLATE)) || blk == CFG_NONE
            || blk != cfg_block_at(prog, tb->jump) || tb->jump <= a->adr)
            continue;
        uint64_t insn = slot_new(plan, s) + s->pre, end = insn + s->len;
        uint8_t *p = buf + (insn - plan->text);
        if (memcmp(p + 4, nop, sizeof nop) != 0)
            continue; /* the long form */
        int ok = 1;
        for (uint64_t o = a->adr + 4; ok && o <= tb->jump; o += 4, end += 4) {
            const ed_slot_t *t = edl_slot_at(plan, o);
            arch_insn_t in;
            ok = t != NULL && slot_new(plan, t) == end && t->pre == 0 && t->post == 0
                && slot_lead(t) == 0 && t->len == 4 && t->olen == 4 && t->stub == NO_STUB
                && !(t->flags & (SLOT_JMP_AFTER | SLOT_XLATE))
                && cfg_image_decode(prog->img, o, 0, &in) == 0
                && !(in.flags & ARCH_F_RIPREL)
                && in.kind == (o == tb->jump ? ARCH_KIND_JMP_IND : ARCH_KIND_SEQ);
        }
        if (!ok)
            continue;
        memmove(p + 4, p + 8, (size_t)(end - (insn + 8)));
        memcpy(buf + (end - 4 - plan->text), nop, sizeof nop);
    }
}
