/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Where a scanned jump table ends (issue 29). A table whose bound no compare proves
 * (clang omits it for a switch on an enum loaded from memory whose default cannot be
 * reached) is read while its entries land in the procedure (cfg_jtab.c). The next table
 * of the same procedure often follows it in read-only data, and its entries - offsets
 * from another base - land in the procedure too: read as this table's, they lead into
 * the middle of instructions or onto data, and the whole procedure was refused
 * (chromium: 37 of 40 sampled procedures refused for a jump into an instruction).
 *
 * Here a scanned table stops before the start of other data its procedure knows of:
 * the base of another of its tables, or read-only data that a `lea` of its code forms
 * (`lea T2(%rip),%rdx; movslq (%rdx,%rcx,4),%rcx`, or a base hoisted far from its use).
 * Objects do not overlap, and code forms no address inside a jump table: the table ends
 * there. The next switch is mostly reached through the cases of this
 * one, after its jump was met: the starts are gathered once the procedure is traversed,
 * and it is traversed again from scratch, its scanned tables cut at them (cfg_build_proc),
 * until no scanned table runs past a start. A start that the next traversal no longer
 * sees was found in code reached only through the entries it cut (or through another
 * table's entries cut since): it is dropped for good, and that table read as before.
 *
 * What stays a guess: the scan itself. A table cut to fewer than 2 entries is dropped
 * (its jump keeps unknown targets: translated at run time, as any other). A `lea` into
 * the middle of a table (a base biased by a constant index) would cut it short; no
 * compiler was seen to form one after a table's start.
 */
#include "cfg/cfg_trav_priv.h"

/* Traversals that may change the starts, at most; then one more without any when the
 * last used one it did not see (each change adds or drops one start at least). */
#define SCAN_MAX_PASSES 8

/* The end of the entries of TAB. */
static uint64_t
table_end(const cfg_table_t *tab)
{
    return tab->addr + (uint64_t)tab->nentries * tab->entry_size;
}

/* The lowest of V[0..N) (sorted) in (LO, HI), or HI. */
static uint64_t
first_inside(const uint64_t *v, size_t n, uint64_t lo, uint64_t hi)
{
    size_t k = cfg_u64_lower_bound(v, n, lo + 1);
    return k < n && v[k] < hi ? v[k] : hi;
}

int
cfg_scan_cut(const trav_t *t, cfg_table_t *tab)
{
    if (tab->bounded || t->stops == NULL)
        return 1;
    uint64_t end = table_end(tab);
    uint64_t stop = first_inside(t->stops->v, t->stops->n, tab->addr, end);
    if (stop < end) {
        tab->nentries = (uint32_t)((stop - tab->addr) / tab->entry_size);
        tab->cut = 1;
    }
    return tab->nentries >= 2;
}

/* The read-only data that `lea`s of T's decoded code form, onto *OUT. 0 or QP_ENOMEM. */
static int
rodata_leas(trav_t *t, cfg_u64_vec_t *out)
{
    const cfg_bproc_t *bp = t->bp;
    uint64_t base = 0;
    for (size_t r = 0; r < bp->ranges.n; r++) {
        const cfg_range_t *rg = &bp->ranges.v[r];
        for (uint64_t a = rg->start; a < rg->end; a++) {
            arch_insn_t in;
            uint8_t reg;
            if ((t->sc->map[base + (a - rg->start)] & M_START)
                && cfg_rodata_lea(t, a, rg->end, &in, &reg))
                QP_CHECK(CFG_VEC_PUSH(*out, in.target));
        }
        base += rg->end - rg->start;
    }
    return 0;
}

/* Insert X into the sorted V unless it is there: 1 inserted, 0 there, or QP_ENOMEM. */
static int
insert_sorted(cfg_u64_vec_t *v, uint64_t x)
{
    size_t k = cfg_u64_lower_bound(v->v, v->n, x);
    if (k < v->n && v->v[k] == x)
        return 0;
    QP_CHECK(CFG_VEC_GROW(*v));
    memmove(v->v + k + 1, v->v + k, (v->n - k) * sizeof(uint64_t));
    v->v[k] = x;
    v->n++;
    return 1;
}

/* The starts of other data T's traversal knows of: its tables' bases and the read-only
 * data its `lea`s form, sorted into *OUT. 0 or QP_ENOMEM. */
static int
known_starts(trav_t *t, cfg_u64_vec_t *out)
{
    const cfg_bproc_t *bp = t->bp;
    QP_CHECK(rodata_leas(t, out));
    for (size_t k = 0; k < bp->tables.n; k++)
        QP_CHECK(CFG_VEC_PUSH(*out, bp->tables.v[k].addr));
    if (out->n > 1)
        qsort(out->v, out->n, sizeof(uint64_t), cfg_u64_cmp);
    return 0;
}

/* The first of STARTS (sorted) in (LO, HI) that REJECTED (sorted) does not hold, or HI. */
static uint64_t
first_start(const cfg_u64_vec_t *starts, const cfg_u64_vec_t *rejected, uint64_t lo,
            uint64_t hi)
{
    for (size_t k = cfg_u64_lower_bound(starts->v, starts->n, lo + 1);
         k < starts->n && starts->v[k] < hi; k++)
        if (!cfg_u64_contains(rejected->v, rejected->n, starts->v[k]))
            return starts->v[k];
    return hi;
}

int
cfg_scan_stops(trav_t *t, cfg_u64_vec_t *stops, cfg_u64_vec_t *rejected, unsigned pass)
{
    const cfg_bproc_t *bp = t->bp;
    int scanned = 0;
    for (size_t k = 0; k < bp->tables.n && !scanned; k++)
        scanned = !bp->tables.v[k].bounded;
    if ((!scanned && stops->n == 0) || pass > SCAN_MAX_PASSES)
        return 0;
    cfg_u64_vec_t starts = { 0 };
    int rc = known_starts(t, &starts), changed = 0;
    /* A start that this traversal no longer sees came from code reached only through
     * the entries it cut (or from what another table's cut entries reached): drop it,
     * and never take it again. */
    for (size_t k = 0; rc == 0 && k < stops->n;) {
        if (cfg_u64_contains(starts.v, starts.n, stops->v[k])) {
            k++;
            continue;
        }
        rc = insert_sorted(rejected, stops->v[k]);
        rc = rc < 0 ? rc : 0;
        memmove(stops->v + k, stops->v + k + 1, (stops->n - k - 1) * sizeof(uint64_t));
        stops->n--;
        changed = 1;
    }
    if (rc == 0 && pass == SCAN_MAX_PASSES) {
        /* No fixpoint in time: a last traversal as if nothing were known, unless this
         * one used only starts it saw. */
        if (changed)
            stops->n = 0;
        CFG_VEC_FREE(starts);
        return changed;
    }
    for (size_t k = 0; rc == 0 && k < bp->tables.n; k++) {
        const cfg_table_t *tab = &bp->tables.v[k];
        uint64_t end = table_end(tab);
        uint64_t stop = first_start(&starts, rejected, tab->addr, end);
        if (tab->bounded || stop == end)
            continue;
        rc = insert_sorted(stops, stop);
        changed |= rc == 1;
        rc = rc < 0 ? rc : 0;
    }
    CFG_VEC_FREE(starts);
    return rc < 0 ? rc : changed;
}
