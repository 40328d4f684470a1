/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Building one procedure, second half: its blocks and edges from the traversal's marks
 * (cfg_trav.c), and the rounds of builds cfg_build.c runs (cfg_build_proc: traverse,
 * then form blocks and edges).
 */
#include <stdio.h>

#include "cfg/cfg_trav_priv.h"

/*****************************************************************************
 * Blocks and edges
 */

uint32_t
cfg_local_block_at(const cfg_bproc_t *bp, uint64_t addr)
{
    size_t lo = 0, hi = bp->blocks.n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const cfg_block_t *bl = &bp->blocks.v[mid];
        if (addr < bl->start)
            hi = mid;
        else if (addr >= bl->end)
            lo = mid + 1;
        else
            return (uint32_t)mid;
    }
    return CFG_NONE;
}

/* The blocks of range RG of T's procedure, whose marks start at MAP. */
static int
form_range_blocks(trav_t *t, const cfg_range_t *rg, const uint8_t *map)
{
    cfg_builder_t *b = t->b;
    cfg_bproc_t *bp = t->bp;
    uint64_t len = rg->end - rg->start;
    int open = 0;
    for (uint64_t off = 0; off < len;) {
        uint8_t m = map[off];
        if (!(m & M_START)) {
            open = 0;
            off++;
            continue;
        }
        uint64_t a = rg->start + off;
        if (M_LEN(m) == 0) {
            if (b->opts.on_note != NULL) {
                char line[160];
                snprintf(line, sizeof(line), "zero length at 0x%llx m=%x range %llx-%llx",
                         (unsigned long long)a, m, (unsigned long long)rg->start,
                         (unsigned long long)rg->end);
                b->opts.on_note(b->opts.cb_arg, line);
            }
            return QP_EDECODE;
        }
        if (!open || (m & M_LEADER)) {
            cfg_block_t bl;
            memset(&bl, 0, sizeof(bl));
            bl.start = a;
            bl.proc = t->self;
            bl.idom = CFG_NONE;
            bl.last_kind = ARCH_KIND_SEQ;
            arch_insn_t none;
            memset(&none, 0, sizeof(none));
            QP_CHECK(CFG_VEC_PUSH(bp->blocks, bl));
            QP_CHECK(CFG_VEC_PUSH(t->last, none));
            open = 1;
        }
        cfg_block_t *cur = &bp->blocks.v[bp->blocks.n - 1];
        cur->end = a + M_LEN(m);
        cur->ninsns++;
        if (m & M_END) {
            /* Only a block's last instruction is decoded again: its edges. */
            arch_insn_t *in = &t->last.v[bp->blocks.n - 1];
            if (cfg_decode_at(b, a, rg->end, in) < 0)
                return QP_EDECODE; /* decoded fine during traversal: cannot happen */
            if (in->kind == ARCH_KIND_SYSCALL) /* one that never returns */
                in->kind = ARCH_KIND_HALT;
            cur->last_kind = in->kind;
            open = 0;
        }
        off += M_LEN(m);
    }
    return 0;
}

/* A range of a procedure and where its marks start in the traversal's map. */
typedef struct range_at {
    const cfg_range_t *rg;
    uint64_t base;
} range_at_t;

/*
 * The blocks of T's procedure in address order. Fragments may lie below the main part
 * (ranges are main first), so the ranges are visited in address order: they do not
 * overlap, and each one's blocks come out sorted (sorting the blocks afterwards moved
 * every block of a large procedure with a fragment below it once per block above).
 */
static int
form_blocks(trav_t *t)
{
    const cfg_bproc_t *bp = t->bp;
    size_t n = bp->ranges.n;
    range_at_t one[4], *at = n <= 4 ? one : malloc(n * sizeof(*at));
    if (at == NULL)
        return QP_ENOMEM;
    uint64_t base = 0;
    for (size_t r = 0; r < n; r++) { /* insertion by start: ranges are few */
        range_at_t x = { &bp->ranges.v[r], base };
        size_t k = r;
        for (; k > 0 && at[k - 1].rg->start > x.rg->start; k--)
            at[k] = at[k - 1];
        at[k] = x;
        base += x.rg->end - x.rg->start;
    }
    int rc = 0;
    for (size_t r = 0; r < n && rc == 0; r++)
        rc = form_range_blocks(t, at[r].rg, t->sc->map + at[r].base);
    if (at != one)
        free(at);
    return rc;
}

static int
add_edge(cfg_bproc_t *bp, uint32_t from, uint32_t to, uint64_t target, uint8_t kind)
{
    cfg_edge_t e = { from, to, target, kind };
    QP_CHECK(CFG_VEC_PUSH(bp->edges, e));
    bp->blocks.v[from].nsucc++;
    return 0;
}

/*
 * The edges of block I's jump through TAB: one per distinct target, in table order (at
 * its first entry). A target that starts a block is marked there; only the others
 * (none, in compiled code) are compared with the edges so far: comparing every entry
 * cost a large switch's table hundreds of entries times its targets.
 */
static int
table_edges(trav_t *t, uint32_t i, const cfg_table_t *tab)
{
    cfg_bproc_t *bp = t->bp;
    uint8_t *seen = calloc(bp->blocks.n + 1, 1);
    if (seen == NULL)
        return QP_ENOMEM;
    uint32_t first = (uint32_t)bp->edges.n;
    int rc = 0;
    for (uint32_t k = 0; k < tab->nentries && rc == 0; k++) {
        uint64_t tg = cfg_jtab_entry(t->b->img, tab, k);
        uint32_t to = cfg_local_block_at(bp, tg);
        int dup = 0;
        if (to != CFG_NONE && bp->blocks.v[to].start == tg) {
            dup = seen[to];
            seen[to] = 1;
        } else
            for (uint32_t e = first; e < bp->edges.n && !dup; e++)
                dup = bp->edges.v[e].target == tg;
        if (!dup)
            rc = add_edge(bp, i, to, tg, CFG_EDGE_TABLE);
    }
    free(seen);
    return rc;
}

/* Control continues at NEXT after block I (fall-through or return site). */
static int
edge_to_next(trav_t *t, uint32_t i, uint64_t next, uint8_t kind)
{
    cfg_bproc_t *bp = t->bp;
    int64_t s = cfg_slot(bp, next);
    if (s >= 0 && (t->sc->map[s] & M_START)) {
        uint32_t to = cfg_local_block_at(bp, next);
        return add_edge(bp, i, to, 0, kind);
    }
    /* Falling through alignment nops into the next procedure is a tail call to it. */
    size_t avail;
    const uint8_t *p = cfg_image_ptr(t->b->img, next, &avail);
    uint64_t after =
        next + (p ? cfg_padding_len(cfg_image_isa(t->b->img), p, avail < 32 ? avail : 32, next)
                  : 0);
    /*
     * Nothing of this procedure after a call: the compiler knew the call never returns
     * here (an error report that longjmps at this level, while the callee returns at
     * others). When the next procedure starts after it, the return is kept where the
     * original code sends it, as a tail call to that procedure: the procedure stays
     * measurable whatever the callee does. Otherwise the call cannot return.
     */
    if (kind == CFG_EDGE_CALLRET && cfg_proc_by_entry(t->b, after) == CFG_NONE)
        return add_edge(bp, i, CFG_NONE, bp->blocks.v[i].call_target, CFG_EDGE_NORETURN);
    if (cfg_proc_by_entry(t->b, after) != CFG_NONE)
        return add_edge(bp, i, CFG_NONE, after, CFG_EDGE_TAILCALL);
    QP_CHECK(cfg_set_unsafe(&t->sc->strings, bp, "runs past the end of its code at 0x%llx",
                        (unsigned long long)next));
    return add_edge(bp, i, CFG_NONE, next, CFG_EDGE_UNRESOLVED);
}

static int
edge_to_target(trav_t *t, uint32_t i, uint64_t target, uint8_t kind)
{
    cfg_bproc_t *bp = t->bp;
    if (cfg_slot(bp, target) >= 0) {
        target = cfg_lock_skip_target(t->b, bp->blocks.v[i].end, target);
        uint32_t to = cfg_local_block_at(bp, target);
        if (to != CFG_NONE && bp->blocks.v[to].start == target)
            return add_edge(bp, i, to, 0, kind);
        /* Only when traversal stopped early (unsafe procedure). */
        return add_edge(bp, i, CFG_NONE, target, CFG_EDGE_UNRESOLVED);
    }
    return add_edge(bp, i, CFG_NONE, target, CFG_EDGE_TAILCALL);
}

static const cfg_table_t *
table_for(const cfg_bproc_t *bp, uint64_t jump)
{
    for (size_t i = 0; i < bp->tables.n; i++)
        if (bp->tables.v[i].jump == jump)
            return &bp->tables.v[i];
    return NULL;
}

/*
 * Possible targets of a computed jump in this procedure: blocks whose address the program
 * holds as data, except the entry and the targets of the switch tables already recovered
 * (in non-PIE files those tables are exactly such words). Only tables whose bound a
 * compare proves are switches: a table found by scanning may be the computed-goto table
 * itself, read by one dispatch that was taken for a jump table, and its labels are the
 * targets of the other dispatches.
 */
static int
computed_goto_labels(trav_t *t)
{
    const cfg_builder_t *b = t->b;
    const cfg_bproc_t *bp = t->bp;
    cfg_u64_vec_t tabt = { 0 };
    int rc = 0;
    for (size_t k = 0; k < bp->tables.n && rc == 0; k++)
        for (uint32_t e = 0; bp->tables.v[k].bounded && e < bp->tables.v[k].nentries && rc == 0;
             e++)
            rc = CFG_VEC_PUSH(tabt, cfg_jtab_entry(b->img, &bp->tables.v[k], e));
    if (rc == 0 && tabt.n)
        qsort(tabt.v, tabt.n, sizeof(uint64_t), cfg_u64_cmp);
    for (uint32_t k = 0; k < bp->blocks.n && rc == 0; k++) {
        uint64_t st = bp->blocks.v[k].start;
        if (st != bp->p.entry && cfg_u64_contains(b->addr_taken.v, b->addr_taken.n, st)
            && !cfg_u64_contains(tabt.v, tabt.n, st))
            rc = CFG_VEC_PUSH(t->labels, k);
    }
    CFG_VEC_FREE(tabt);
    return rc;
}

static int
form_edges(trav_t *t)
{
    cfg_builder_t *b = t->b;
    cfg_bproc_t *bp = t->bp;
    for (uint32_t i = 0; i < bp->blocks.n; i++) {
        cfg_block_t *bl = &bp->blocks.v[i];
        const arch_insn_t *in = &t->last.v[i];
        bl->succ = (uint32_t)bp->edges.n;
        bl->nsucc = 0;
        switch (in->kind) {
        case ARCH_KIND_JCC:
            QP_CHECK(edge_to_target(t, i, in->target, CFG_EDGE_TAKEN));
            QP_CHECK(edge_to_next(t, i, bl->end, CFG_EDGE_FALL));
            break;
        case ARCH_KIND_JMP: QP_CHECK(edge_to_target(t, i, in->target, CFG_EDGE_JUMP)); break;
        case ARCH_KIND_CALL:
            if (in->target == bl->end) {
                QP_CHECK(edge_to_next(t, i, bl->end, CFG_EDGE_FALL));
                break;
            }
            bl->call_target = in->target;
            if (cfg_callee_noreturn(b, in->target))
                QP_CHECK(add_edge(bp, i, CFG_NONE, in->target, CFG_EDGE_NORETURN));
            else
                QP_CHECK(edge_to_next(t, i, bl->end, CFG_EDGE_CALLRET));
            break;
        case ARCH_KIND_CALL_IND:
            if (cfg_indirect_call_noreturn(b->img, in))
                QP_CHECK(add_edge(bp, i, CFG_NONE, 0, CFG_EDGE_NORETURN));
            else
                QP_CHECK(edge_to_next(t, i, bl->end, CFG_EDGE_CALLRET));
            break;
        case ARCH_KIND_RET: QP_CHECK(add_edge(bp, i, CFG_NONE, 0, CFG_EDGE_RETURN)); break;
        case ARCH_KIND_HALT: QP_CHECK(add_edge(bp, i, CFG_NONE, 0, CFG_EDGE_NORETURN)); break;
        case ARCH_KIND_JMP_IND: {
            const cfg_table_t *tab = table_for(bp, in->addr);
            if (tab != NULL) {
                QP_CHECK(table_edges(t, i, tab));
                break;
            }
            int ptr = 0;
            for (size_t k = 0; k < t->ptr_jumps.n && !ptr; k++)
                ptr = t->ptr_jumps.v[k] == in->addr;
            if (((in->flags & ARCH_F_MEM_IND) && (in->flags & ARCH_F_RIPREL)) || ptr) {
                QP_CHECK(add_edge(bp, i, CFG_NONE, 0, CFG_EDGE_TAILCALL));
                break;
            }
            if (!t->labels_done) {
                QP_CHECK(computed_goto_labels(t));
                t->labels_done = 1;
            }
            if (t->labels.n > 0 && t->labels.n <= CFG_MAX_INDIRECT) {
                /* A computed goto: every address-taken label inside may be the target. */
                for (size_t k = 0; k < t->labels.n; k++)
                    QP_CHECK(add_edge(bp, i, t->labels.v[k], bp->blocks.v[t->labels.v[k]].start,
                                      CFG_EDGE_INDIRECT));
                break;
            }
            bp->p.nind_unresolved++;
            QP_CHECK(add_edge(bp, i, CFG_NONE, 0, CFG_EDGE_UNRESOLVED));
            break;
        }
        default: QP_CHECK(edge_to_next(t, i, bl->end, CFG_EDGE_FALL)); break;
        }
    }
    return 0;
}


/*
 * Note BP's "never returns" edges that are calls of a procedure's entry in
 * bp->noret_sites, for rebuild_stale_noreturn_callers (which would otherwise look at
 * every edge of their procedures each round), and count its tail calls (bp->ntail).
 * Called whenever BP's edges change.
 */
int
cfg_note_noret_sites(cfg_bproc_t *bp)
{
    bp->noret_sites.n = 0;
    bp->ntail = 0;
    for (size_t e = 0; e < bp->edges.n; e++) {
        const cfg_edge_t *ed = &bp->edges.v[e];
        const cfg_block_t *bl = &bp->blocks.v[ed->from];
        bp->ntail += ed->kind == CFG_EDGE_TAILCALL && ed->target != 0;
        if (ed->kind == CFG_EDGE_NORETURN && ed->target != 0 && bl->call_target == ed->target)
            QP_CHECK(CFG_VEC_PUSH(bp->noret_sites, ((cfg_noret_site_t) { ed->target, bl->end })));
    }
    return 0;
}

/* Was BP found only in a gap (perhaps jumped to by code that is no better)? */
int
cfg_gap_only(const cfg_bproc_t *bp)
{
    return (bp->p.sources & CFG_SRC_GAP) && !(bp->p.sources & ~(CFG_SRC_GAP | CFG_SRC_TAILCALL));
}

/* Note procedure I, just built, for the noreturn analysis: its calls may go elsewhere
 * now (build_proc set nr_dirty); and for the gap sweeps: its blocks changed. */
void
cfg_note_built(cfg_builder_t *b, uint32_t i)
{
    cfg_bproc_t *bp = cfg_discover_proc(b, i);
    if (CFG_VEC_PUSH(b->nr_dirty, bp->p.entry) < 0)
        b->nr_dirty_lost = 1;
    cfg_spans_dirty(b, bp);
}

/* The lists of a traversal T. */
static void
trav_free(trav_t *t)
{
    CFG_VEC_FREE(t->pending);
    CFG_VEC_FREE(t->last);
    CFG_VEC_FREE(t->labels);
    CFG_VEC_FREE(t->ptr_jumps);
    CFG_VEC_FREE(t->proofs);
    CFG_VEC_FREE(t->slot_proofs);
    CFG_VEC_FREE(t->gap_entries);
    CFG_VEC_FREE(t->data_refs);
    CFG_VEC_FREE(t->own_addrs);
}

/* BP without blocks, edges, tables or what a traversal found unsafe. */
static void
bproc_clear(cfg_bproc_t *bp)
{
    bp->blocks.n = bp->edges.n = bp->tables.n = 0;
    bp->p.unsafe = NULL;
    bp->p.nind_unresolved = 0;
    bp->runs_into = 0;
}

/* (Re)build the CFG of procedure I with the scratch SC (see cfg_scratch_t). */
int
cfg_build_proc(cfg_builder_t *b, cfg_scratch_t *sc, uint32_t i)
{
    cfg_bproc_t *bp = cfg_discover_proc(b, i);
    bproc_clear(bp);
    uint64_t total = 0;
    for (size_t r = 0; r < bp->ranges.n; r++)
        total += bp->ranges.v[r].end - bp->ranges.v[r].start;
    if (total > sc->mapcap) {
        free(sc->map);
        sc->map = malloc(total);
        if (sc->map == NULL) {
            sc->mapcap = 0;
            return QP_ENOMEM;
        }
        sc->mapcap = total;
    }
    trav_t t;
    cfg_u64_vec_t no_far = { 0 }, stops = { 0 }, rejected = { 0 };
    unsigned pass = 0;
    size_t n_entries = sc->new_entries.n, n_srcs = sc->new_srcs.n, n_known = sc->known.n,
           n_strings = sc->strings.n;
    int rc;
    for (;;) {
        memset(sc->map, 0, total);
        memset(&t, 0, sizeof(t));
        t.b = b;
        t.sc = sc;
        t.bp = bp;
        t.self = i;
        t.no_far = &no_far;
        t.stops = &stops;
        sc->work.n = 0;
        rc = cfg_traverse(&t);
        if (rc == 0)
            rc = cfg_verify_hoisted(&t, &no_far);
        if (rc == 0)
            rc = cfg_scan_stops(&t, &stops, &rejected, pass++);
        if (rc != 1)
            break;
        /* A hoisted table base that does not hold, or a scanned table that runs into
         * other data: again without it, from scratch. */
        trav_free(&t);
        sc->new_entries.n = n_entries;
        sc->new_srcs.n = n_srcs;
        sc->known.n = n_known;
        while (sc->strings.n > n_strings)
            free(sc->strings.v[--sc->strings.n]);
        bproc_clear(bp);
    }
    CFG_VEC_FREE(no_far);
    CFG_VEC_FREE(stops);
    CFG_VEC_FREE(rejected);
    if (rc == 0)
        rc = form_blocks(&t);
    for (size_t k = 0; rc == 0 && k < t.gap_entries.n; k++) {
        uint32_t gb = cfg_local_block_at(bp, t.gap_entries.v[k]);
        if (gb != CFG_NONE && bp->blocks.v[gb].start == t.gap_entries.v[k])
            bp->blocks.v[gb].gap_entry = 1;
    }
    if (rc == 0) {
        bp = cfg_discover_proc(b, i); /* no procedure is added here, but be explicit */
        rc = form_edges(&t);
    }
    bp->entry_block = cfg_local_block_at(bp, bp->p.entry);
    if (bp->p.unsafe != NULL && cfg_gap_only(bp))
        atomic_store_explicit(&b->unsafe_built, 1, memory_order_relaxed);
    bp->blocks_ver = cfg_blocks_changed(b);
    bp->built = 1;
    bp->nr_dirty = 1;
    if (cfg_note_noret_sites(bp) < 0)
        rc = QP_ENOMEM;
    /* Blocks and edges are the analysis's largest lists, and most procedures small:
     * kept at their size, not at the next power of two. */
    cfg_vec_trim((void **)&bp->blocks.v, &bp->blocks.cap, bp->blocks.n, sizeof(*bp->blocks.v));
    cfg_vec_trim((void **)&bp->edges.v, &bp->edges.cap, bp->edges.n, sizeof(*bp->edges.v));
    trav_free(&t);
    return rc == QP_EDECODE ? 0 : rc;
}

/* Hand what the builds with SC found to the builder, and empty SC's lists. */
int
cfg_scratch_flush(cfg_builder_t *b, cfg_scratch_t *sc)
{
    for (size_t k = 0; k < sc->new_entries.n; k++) {
        QP_CHECK(CFG_VEC_PUSH(b->new_entries, sc->new_entries.v[k]));
        QP_CHECK(CFG_VEC_PUSH(b->new_srcs, sc->new_srcs.v[k]));
    }
    for (size_t k = 0; k + 1 < sc->known.n; k += 2)
        cfg_discover_proc(b, sc->known.v[k])->p.sources |= sc->known.v[k + 1];
    for (size_t k = 0; k < sc->strings.n; k++) {
        int rc = CFG_VEC_PUSH(b->strings, sc->strings.v[k]);
        if (rc < 0) {
            for (; k < sc->strings.n; k++)
                free(sc->strings.v[k]); /* the procedures' reasons are lost: ENOMEM */
            sc->strings.n = 0;
            return rc;
        }
    }
    sc->new_entries.n = sc->new_srcs.n = sc->known.n = sc->strings.n = 0;
    return 0;
}

void
cfg_scratch_free(cfg_scratch_t *sc)
{
    free(sc->map);
    CFG_VEC_FREE(sc->work);
    CFG_VEC_FREE(sc->new_entries);
    CFG_VEC_FREE(sc->new_srcs);
    CFG_VEC_FREE(sc->known);
    for (size_t k = 0; k < sc->strings.n; k++)
        free(sc->strings.v[k]);
    CFG_VEC_FREE(sc->strings);
}

/* A round of builds: the procedures TODO, each built by one of the workers. */
typedef struct round_ctx {
    cfg_builder_t *b;
    const uint32_t *todo;     /* procedure indices */
    size_t n;                 /* how many */
    size_t step;              /* progress is told every STEP procedures */
    size_t told;              /* progress told last at */
} round_ctx_t;

static int
round_task(void *arg, unsigned worker, size_t k)
{
    round_ctx_t *r = arg;
    return cfg_build_proc(r->b, &r->b->scratch[worker], r->todo[k]);
}

static void
round_progress(void *arg, size_t done)
{
    round_ctx_t *r = arg;
    if (r->b->opts.on_progress != NULL && done >= r->told + r->step) {
        r->told = done;
        r->b->opts.on_progress(r->b->opts.cb_arg, done, r->n);
    }
}

/*
 * Build the procedures TODO (N indices). Procedures are independent once discovered: a
 * build writes only its own procedure and its worker's scratch, so the round runs on
 * b->nscratch threads, and the findings are handed over in worker order.
 */
int
cfg_build_round(cfg_builder_t *b, const uint32_t *todo, size_t n)
{
    round_ctx_t r = { b, todo, n, n / 128 + 1, 0 };
    if (b->opts.on_progress != NULL)
        b->opts.on_progress(b->opts.cb_arg, 0, n);
    /* A small round is a few large procedures (the callers of a callee found to
     * return after all: python3.11's 6 take 7 ms of CPU), so it is split too, a
     * procedure at a time. */
    unsigned nt = n >= 2 ? b->nscratch : 1;
    size_t grain = n >= 256 ? 16 : 1;
    if (nt > 1)
        cfg_discover_freeze(b, 1);
    int rc = qp_parallel_for(nt, n, grain, round_task, &r, round_progress);
    if (nt > 1)
        cfg_discover_freeze(b, 0);
    for (size_t k = 0; k < n; k++)
        cfg_note_built(b, todo[k]);
    for (unsigned w = 0; w < nt; w++) {
        int frc = cfg_scratch_flush(b, &b->scratch[w]);
        if (rc == 0)
            rc = frc;
    }
    return rc;
}

/* Length of the padding at P (at most N bytes): nops, zero bytes and traps (hlt, ud2,
 * int3), which compilers put after calls that never return. */
size_t
cfg_padding_len(const arch_isa_t *isa, const uint8_t *p, size_t n, uint64_t addr)
{
    size_t off = 0;
    if (isa != arch_isa_host()) {
        /* Fixed-length code: nop and zero words (isa->is_padding), and traps. */
        size_t al = isa->insn_align;
        arch_insn_t in;
        while (off + al <= n && (addr + off) % al == 0
               && (isa->is_padding(p + off, al)
                   || (isa->decode(p + off, n - off, addr + off, &in) == 0
                       && in.kind == ARCH_KIND_HALT)))
            off += al;
        return off;
    }
    while (off < n) {
        if (p[off] == 0x00 || p[off] == 0xcc) {
            off++;
            continue;
        }
        arch_insn_t in;
        if (arch_decode(p + off, n - off, addr + off, &in) < 0
            || (in.kind != ARCH_KIND_NOP && in.kind != ARCH_KIND_HALT))
            break;
        off += in.len;
    }
    return off;
}
