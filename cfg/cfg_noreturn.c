/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Procedures that never return (cfg_build.c's fixpoint): which procedures may return,
 * by the calls and jumps they make, kept up to date as procedures are built again; and
 * the calls of those that never return cut (their fall-through edges gone).
 */
#include <stdlib.h>
#include <string.h>

#include "cfg/cfg_priv.h"

/*****************************************************************************
 * Procedures that never return
 */

/* The DFS scratch of proc_may_return, grown as needed. */
typedef struct nr_scratch {
    uint8_t *seen;
    uint32_t *stack;
    size_t cap;
} nr_scratch_t;

/* Start a walk of BP's blocks from its entry on SC: the first block pushed and seen. */
static size_t
walk_start(const cfg_bproc_t *bp, nr_scratch_t *sc)
{
    memset(sc->seen, 0, bp->blocks.n);
    sc->stack[0] = bp->entry_block;
    sc->seen[bp->entry_block] = 1;
    return 1;
}

/* Push E's block on the walk's stack (of SP blocks) unless it was seen: the new SP. */
static size_t
walk_push(nr_scratch_t *sc, size_t sp, const cfg_edge_t *e)
{
    if (e->to != CFG_NONE && !sc->seen[e->to]) {
        sc->seen[e->to] = 1;
        sc->stack[sp++] = e->to;
    }
    return sp;
}

/* Does a return of BP's (or a jump of unknown targets) follow its entry with no call or
 * tail call on the way (SC: proc_may_return's scratch, large enough)? 1 or 0. */
static int
returns_directly(const cfg_bproc_t *bp, nr_scratch_t *sc)
{
    uint32_t *stack = sc->stack;
    size_t sp = walk_start(bp, sc);
    while (sp > 0) {
        const cfg_block_t *bl = &bp->blocks.v[stack[--sp]];
        for (uint32_t k = 0; k < bl->nsucc; k++) {
            const cfg_edge_t *e = &bp->edges.v[bl->succ + k];
            if (e->kind == CFG_EDGE_RETURN || e->kind == CFG_EDGE_UNRESOLVED)
                return 1;
            if (e->kind == CFG_EDGE_NORETURN || e->kind == CFG_EDGE_TAILCALL
                || e->kind == CFG_EDGE_CALLRET)
                continue;
            sp = walk_push(sc, sp, e);
        }
    }
    return 0;
}

/*
 * May BP return, by the current "may return" of the procedures it calls and jumps to?
 * ALONE: whatever those are (every procedure it calls or jumps to taken as never
 * returning); then BP returns in every fixpoint.
 */
static int
proc_may_return(const cfg_builder_t *b, cfg_bproc_t *bp, nr_scratch_t *sc, int alone)
{
    if (bp->blocks.n == 0 || bp->entry_block == CFG_NONE || bp->p.unsafe != NULL)
        return 1; /* not analysable: assume it returns */
    if (bp->p.flags & CFG_PROC_RESUMED)
        return 1; /* its caller is resumed at the return address */
    if (bp->blocks.n > sc->cap) {
        free(sc->seen);
        free(sc->stack);
        sc->seen = malloc(bp->blocks.n);
        sc->stack = malloc(bp->blocks.n * sizeof(uint32_t));
        sc->cap = sc->seen != NULL && sc->stack != NULL ? bp->blocks.n : 0;
        if (sc->cap == 0)
            return QP_ENOMEM;
    }
    /* The walk below follows every edge but a call's, a tail call's and a
     * never-returning one always: a return reached through those others alone is found
     * whatever the callees do, and stays so while the blocks do (the fixpoint asks
     * again and again). */
    if (bp->ret_direct >> 1 != bp->blocks_ver || bp->blocks_ver == 0)
        bp->ret_direct = 2 * bp->blocks_ver + (uint64_t)returns_directly(bp, sc);
    if (bp->ret_direct & 1)
        return 1;
    uint32_t *stack = sc->stack;
    size_t sp = walk_start(bp, sc);
    while (sp > 0) {
        const cfg_block_t *bl = &bp->blocks.v[stack[--sp]];
        for (uint32_t k = 0; k < bl->nsucc; k++) {
            const cfg_edge_t *e = &bp->edges.v[bl->succ + k];
            switch (e->kind) {
            case CFG_EDGE_RETURN:
            case CFG_EDGE_UNRESOLVED: return 1;
            case CFG_EDGE_NORETURN: continue;
            case CFG_EDGE_TAILCALL: {
                uint32_t ti = e->target ? cfg_discover_find(b, e->target) : CFG_NONE;
                if (ti == CFG_NONE || (!alone && b->procs.v[ti].may_return))
                    return 1;
                continue;
            }
            case CFG_EDGE_CALLRET:
                if (bl->call_target) {
                    uint32_t ci = cfg_proc_by_entry(b, bl->call_target);
                    if (ci != CFG_NONE && (alone || !b->procs.v[ci].may_return))
                        continue;
                }
                break;
            default: break;
            }
            sp = walk_push(sc, sp, e);
        }
    }
    return 0;
}

/*
 * Who depends on whom for the noreturn analysis: for each procedure, the procedures
 * that call it or jump to it (a list per callee, linked through `next`), and the calls
 * and jumps to addresses in no procedure. Kept from one analysis to the next: when
 * procedures were added or removed since, the lists follow them to their new indices
 * (by entry address). A procedure built again adds its new edges, and its old ones stay
 * (a stale dependency only makes a procedure be looked at again).
 */
typedef struct nr_unres {
    uint64_t target;                  /* an address in no procedure */
    uint32_t who;                     /* the procedure that calls or jumps there */
} nr_unres_t;

typedef struct cfg_nr_deps {
    uint64_t gen;                     /* b->gen when last brought up to date */
    size_t n;                         /* b->procs.n then */
    uint64_t *entries;                /* the procedures' entries then */
    uint32_t *head;                   /* per callee: first dependency, or CFG_NONE */
    CFG_VEC(uint32_t) next;           /* per dependency: the next one of its callee */
    CFG_VEC(uint32_t) who;            /* per dependency: the caller (CFG_NONE: removed) */
    CFG_VEC(nr_unres_t) unres;        /* calls and jumps to no procedure */
} cfg_nr_deps_t;

void
cfg_nr_deps_free(cfg_nr_deps_t *d)
{
    if (d == NULL)
        return;
    free(d->entries);
    free(d->head);
    CFG_VEC_FREE(d->next);
    CFG_VEC_FREE(d->who);
    CFG_VEC_FREE(d->unres);
    free(d);
}

/* Add the dependencies of procedure I (its calls and tail calls) to D. */
static int
nr_deps_add(const cfg_builder_t *b, cfg_nr_deps_t *d, size_t i)
{
    const cfg_bproc_t *bp = &b->procs.v[i];
    for (size_t e = 0; e < bp->edges.n; e++) {
        const cfg_edge_t *ed = &bp->edges.v[e];
        uint64_t callee = 0;
        if (ed->kind == CFG_EDGE_CALLRET)
            callee = bp->blocks.v[ed->from].call_target;
        else if (ed->kind == CFG_EDGE_TAILCALL)
            callee = ed->target;
        uint32_t ci = callee ? cfg_discover_find(b, callee) : CFG_NONE;
        if (ci == CFG_NONE && callee != 0)
            QP_CHECK(CFG_VEC_PUSH(d->unres, ((nr_unres_t) { callee, (uint32_t)i })));
        if (ci == CFG_NONE || ci == i)
            continue;
        QP_CHECK(CFG_VEC_PUSH(d->next, d->head[ci]));
        QP_CHECK(CFG_VEC_PUSH(d->who, (uint32_t)i));
        d->head[ci] = (uint32_t)(d->who.n - 1);
    }
    return 0;
}

/* Note the procedures' entries and b->gen in D (after the lists were made to fit). */
static int
nr_deps_stamp(const cfg_builder_t *b, cfg_nr_deps_t *d)
{
    uint64_t *e = realloc(d->entries, (b->procs.n + 1) * sizeof(uint64_t));
    if (e == NULL)
        return QP_ENOMEM;
    d->entries = e;
    for (size_t i = 0; i < b->procs.n; i++)
        e[i] = b->procs.v[i].p.entry;
    d->n = b->procs.n;
    d->gen = b->gen;
    return 0;
}

/* The dependencies of every procedure, or NULL on ENOMEM. */
static cfg_nr_deps_t *
nr_deps_collect(const cfg_builder_t *b)
{
    cfg_nr_deps_t *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return NULL;
    d->head = malloc((b->procs.n + 1) * sizeof(uint32_t));
    int rc = d->head == NULL ? QP_ENOMEM : nr_deps_stamp(b, d);
    for (size_t i = 0; i < d->n && rc == 0; i++)
        d->head[i] = CFG_NONE;
    for (size_t i = 0; i < d->n && rc == 0; i++)
        rc = nr_deps_add(b, d, i);
    if (rc < 0) {
        cfg_nr_deps_free(d);
        return NULL;
    }
    return d;
}

/*
 * Procedures were added or removed since D was brought up to date: move the lists to
 * the new indices. ROOT (b->procs.n bytes) gets 1 for the procedures whose calls may
 * now go to another procedure: new ones, callers of removed ones, callers of an address
 * that lies in a procedure now. (Callers of one whose extent changed are found by the
 * caller: that one was built again.)
 */
static int
nr_deps_remap(const cfg_builder_t *b, cfg_nr_deps_t *d, uint8_t *root)
{
    size_t n = b->procs.n;
    uint32_t *old2new = malloc((d->n + 1) * sizeof(uint32_t));
    uint32_t *head = malloc((n + 1) * sizeof(uint32_t));
    if (old2new == NULL || head == NULL) {
        free(old2new);
        free(head);
        return QP_ENOMEM;
    }
    for (size_t j = 0; j < n; j++) {
        head[j] = CFG_NONE;
        root[j] = 1; /* new, until matched below */
    }
    for (size_t i = 0, j = 0; i < d->n; i++) {
        while (j < n && b->procs.v[j].p.entry < d->entries[i])
            j++;
        old2new[i] = j < n && b->procs.v[j].p.entry == d->entries[i] ? (uint32_t)j : CFG_NONE;
        if (old2new[i] != CFG_NONE) {
            head[j] = d->head[i];
            root[j] = 0;
        }
    }
    for (size_t e = 0; e < d->who.n; e++)
        if (d->who.v[e] != CFG_NONE)
            d->who.v[e] = old2new[d->who.v[e]];
    for (size_t i = 0; i < d->n; i++)
        if (old2new[i] == CFG_NONE)
            for (uint32_t e = d->head[i]; e != CFG_NONE; e = d->next.v[e])
                if (d->who.v[e] != CFG_NONE)
                    root[d->who.v[e]] = 1;
    size_t k = 0;
    for (size_t u = 0; u < d->unres.n; u++) {
        nr_unres_t x = d->unres.v[u];
        x.who = old2new[x.who];
        if (x.who == CFG_NONE)
            continue;
        if (cfg_discover_find(b, x.target) != CFG_NONE)
            root[x.who] = 1; /* added again with its new dependencies */
        else
            d->unres.v[k++] = x;
    }
    d->unres.n = k;
    free(old2new);
    free(d->head);
    d->head = head;
    return nr_deps_stamp(b, d);
}

/*
 * Bring D up to date for an analysis that keeps what did not change: ROOT (zeroed,
 * b->procs.n bytes) gets 1 for every procedure whose "may return" must be looked at
 * again: those built again (or whose fragment mark changed) since, their callers, and
 * what nr_deps_remap finds. Their dependencies are added anew.
 */
static int
nr_deps_update(cfg_builder_t *b, cfg_nr_deps_t *d, uint8_t *root)
{
    size_t n = b->procs.n;
    if (d->gen != b->gen || d->n != n)
        QP_CHECK(nr_deps_remap(b, d, root));
    /* Those marked nr_dirty: noted in b->nr_dirty (all looked at when one was not). */
    size_t nd = b->nr_dirty_lost ? n : b->nr_dirty.n;
    for (size_t k = 0; k < nd; k++) {
        uint32_t j = b->nr_dirty_lost ? (uint32_t)k : cfg_proc_by_entry(b, b->nr_dirty.v[k]);
        if (j == CFG_NONE || !b->procs.v[j].nr_dirty)
            continue;
        b->procs.v[j].nr_dirty = 0; /* (find_noreturn would clear it) */
        root[j] = 1;
        for (uint32_t e = d->head[j]; e != CFG_NONE; e = d->next.v[e])
            if (d->who.v[e] != CFG_NONE)
                root[d->who.v[e]] = 1;
    }
    b->nr_dirty.n = 0;
    b->nr_dirty_lost = 0;
    for (size_t j = 0; j < n; j++)
        if (root[j])
            QP_CHECK(nr_deps_add(b, d, j));
    return 0;
}

/* BP's CFG_PROC_NORETURN mark, from its "may return" (fragments have none). */
static void
set_noreturn_mark(cfg_bproc_t *bp)
{
    if (!bp->may_return && !(bp->p.flags & CFG_PROC_FRAGMENT))
        bp->p.flags |= CFG_PROC_NORETURN;
    else
        bp->p.flags &= ~(uint32_t)CFG_PROC_NORETURN;
}

/*
 * Least fixpoint of "may return", driven by a worklist: a procedure is looked at again
 * only when one of the procedures it calls or jumps to is found to return.
 *
 * When only some procedures were built again since the last analysis (same b->gen), the
 * fixpoint is updated instead of recomputed: the rebuilt ones and every procedure whose
 * "may return" might have rested on them (its callers that may return, transitively)
 * start again from "never returns", the others keep their value (what supports it did
 * not change), and the worklist starts from the restarted ones. The result is the same
 * least fixpoint. RESTARTED (b->procs.n bytes) gets 1 for each procedure restarted,
 * ROOT (the same) for each whose calls may have changed: built again, callers of those,
 * and what nr_deps_remap finds (every procedure, the first time).
 */
static int
find_noreturn(cfg_builder_t *b, uint8_t *restarted, uint8_t *root)
{
    size_t n = b->procs.n;
    nr_scratch_t sc = { 0 };
    CFG_VEC(uint32_t) now_returning = { 0 }; /* found to return, not restarted */
    int first = b->nr == NULL;
    uint32_t *queue = malloc((n + 1) * sizeof(uint32_t));
    uint8_t *queued = calloc(n + 1, 1);
    int rc = 0;
    if (queue == NULL || queued == NULL) {
        rc = QP_ENOMEM;
        goto out;
    }
    size_t qh = 0, qt = 0; /* circular queue of at most n entries */
    cfg_nr_deps_t *d = b->nr;
    if (d != NULL) {
        if ((rc = nr_deps_update(b, d, queued)) < 0)
            goto out;
        for (size_t i = 0; i < n; i++)
            if (queued[i]) {
                queue[qt++] = (uint32_t)i;
                root[i] = 1;
            }
        /* The callers that may return, transitively (queue[0..qt) grows as a stack),
         * but for those that return whatever they call: they keep "may return" (noted
         * from the queue's end down, to be unmarked after). */
        size_t nkept = 0;
        for (size_t k = 0; k < qt; k++)
            for (uint32_t e = d->head[queue[k]]; e != CFG_NONE; e = d->next.v[e]) {
                uint32_t c = d->who.v[e];
                if (c == CFG_NONE || queued[c] || !b->procs.v[c].may_return)
                    continue;
                queued[c] = 1; /* looked at */
                int alone = proc_may_return(b, &b->procs.v[c], &sc, 1);
                if (alone < 0) {
                    rc = alone;
                    goto out;
                }
                if (!alone)
                    queue[qt++] = c;
                else
                    queue[n - ++nkept] = c;
            }
        for (size_t k = 0; k < nkept; k++)
            queued[queue[n - 1 - k]] = 0;
    } else {
        d = b->nr = nr_deps_collect(b);
        if (d == NULL) {
            rc = QP_ENOMEM;
            goto out;
        }
        for (size_t i = 0; i < n; i++) {
            queue[qt++] = (uint32_t)i;
            queued[i] = root[i] = 1;
        }
    }
    for (size_t k = 0; k < qt; k++) {
        b->procs.v[queue[k]].may_return = 0;
        restarted[queue[k]] = 1;
    }
    if (first) {
        for (size_t i = 0; i < n; i++)
            b->procs.v[i].nr_dirty = 0; /* (else cleared by nr_deps_update) */
        b->nr_dirty.n = 0;
        b->nr_dirty_lost = 0;
    }
    qt %= n + 1;
    while (qh != qt) {
        uint32_t i = queue[qh];
        qh = (qh + 1) % (n + 1);
        queued[i] = 0;
        cfg_bproc_t *bp = &b->procs.v[i];
        if (bp->may_return || (bp->p.flags & CFG_PROC_FRAGMENT) || bp->name_noreturn)
            continue;
        int r = proc_may_return(b, bp, &sc, 0);
        if (r < 0) {
            rc = r;
            goto out;
        }
        if (!r)
            continue;
        bp->may_return = 1;
        if (!restarted[i] && (rc = CFG_VEC_PUSH(now_returning, i)) < 0)
            goto out;
        for (uint32_t e = d->head[i]; e != CFG_NONE; e = d->next.v[e]) {
            uint32_t c = d->who.v[e];
            if (c != CFG_NONE && !queued[c] && !b->procs.v[c].may_return) {
                queued[c] = 1;
                queue[qt] = c;
                qt = (qt + 1) % (n + 1);
            }
        }
    }
    /* The mark follows "may return" where that may have changed: the procedures
     * restarted (new ones, fragments tied or untied since: all restarted), and those
     * found to return that were not. */
    for (size_t i = 0; i < n; i++)
        if (restarted[i])
            set_noreturn_mark(&b->procs.v[i]);
    for (size_t k = 0; k < now_returning.n; k++)
        set_noreturn_mark(&b->procs.v[now_returning.v[k]]);
out:
    CFG_VEC_FREE(now_returning);
    free(sc.seen);
    free(sc.stack);
    free(queue);
    free(queued);
    return rc;
}

/*
 * The entries of the procedures that never return, as a set that answers "no" for most
 * calls (to procedures that return) without a search: a bit per hash of an entry, at
 * least 16 bits an entry (a few percent of the others hit a bit), the sorted entries
 * searched only when the bit is set. (cc1: 860,000 calls looked at, 114 M instructions
 * in the searches.)
 */
typedef struct nr_set {
    const cfg_u64_vec_t *sorted;      /* the entries, sorted */
    uint64_t *bits;                   /* 1 << (64 - shift) bits, or NULL: always search */
    unsigned shift;                   /* 64 - log2 of the number of bits */
} nr_set_t;

static size_t
nr_set_bit(const nr_set_t *s, uint64_t entry)
{
    return (size_t)((entry * UINT64_C(0x9E3779B97F4A7C15)) >> s->shift);
}

/* S for the entries of SORTED (kept by the caller); without memory, a set that always
 * searches. */
static void
nr_set_init(nr_set_t *s, const cfg_u64_vec_t *sorted)
{
    unsigned lg = 12;
    while (lg < 40 && ((size_t)1 << lg) < 16 * sorted->n)
        lg++;
    s->sorted = sorted;
    s->shift = 64 - lg;
    s->bits = calloc(((size_t)1 << lg) / 64, sizeof(uint64_t));
    for (size_t i = 0; s->bits != NULL && i < sorted->n; i++) {
        size_t bit = nr_set_bit(s, sorted->v[i]);
        s->bits[bit / 64] |= UINT64_C(1) << (bit % 64);
    }
}

static int
nr_set_contains(const nr_set_t *s, uint64_t entry)
{
    if (s->bits != NULL) {
        size_t bit = nr_set_bit(s, entry);
        if (!(s->bits[bit / 64] & (UINT64_C(1) << (bit % 64))))
            return 0;
    }
    return cfg_u64_contains(s->sorted->v, s->sorted->n, entry);
}

/* Remove blocks not reachable from the entry, after cutting return edges of noreturn
 * calls (NORET: the entries of the procedures that never return). Returns 1 when
 * something changed. */
static int
prune_proc(cfg_builder_t *b, cfg_bproc_t *bp, const nr_set_t *noret)
{
    int cut = 0;
    for (size_t e = 0; e < bp->edges.n; e++) {
        cfg_edge_t *ed = &bp->edges.v[e];
        const cfg_block_t *bl = &bp->blocks.v[ed->from];
        if (ed->kind == CFG_EDGE_CALLRET && bl->call_target
            && nr_set_contains(noret, bl->call_target)) {
            ed->kind = CFG_EDGE_NORETURN;
            ed->to = CFG_NONE;
            ed->target = bl->call_target;
            cut = 1;
        }
    }
    if (!cut)
        return 0;
    if (bp->entry_block == CFG_NONE)
        return cfg_note_noret_sites(bp);
    size_t n = bp->blocks.n;
    uint32_t *newidx = malloc(n * sizeof(uint32_t));
    uint32_t *stack = malloc(n * sizeof(uint32_t));
    if (newidx == NULL || stack == NULL) {
        free(newidx);
        free(stack);
        return QP_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        newidx[i] = CFG_NONE;
    size_t sp = 0;
    stack[sp++] = bp->entry_block;
    newidx[bp->entry_block] = 0;
    /* The other roots: interior entries and exception landing pads. */
    for (size_t i = 0; i < n; i++) {
        uint64_t st = bp->blocks.v[i].start;
        int root = 0;
        for (size_t k = 0; k < bp->extra_entries.n && !root; k++)
            root = bp->extra_entries.v[k] == st;
        root |= cfg_u64_contains(b->landing_pads.v, b->landing_pads.n, st);
        if (root && newidx[i] == CFG_NONE) {
            newidx[i] = 0;
            stack[sp++] = (uint32_t)i;
        }
    }
    while (sp > 0) {
        const cfg_block_t *bl = &bp->blocks.v[stack[--sp]];
        for (uint32_t k = 0; k < bl->nsucc; k++) {
            uint32_t to = bp->edges.v[bl->succ + k].to;
            if (to != CFG_NONE && newidx[to] == CFG_NONE) {
                newidx[to] = 0;
                stack[sp++] = to;
            }
        }
    }
    uint32_t nb = 0;
    for (size_t i = 0; i < n; i++)
        if (newidx[i] != CFG_NONE)
            newidx[i] = nb++;
    if (nb == n) {
        free(newidx);
        free(stack);
        return cfg_note_noret_sites(bp);
    }
    /* Compact blocks and edges in place (both are in block order). */
    size_t ne = 0;
    for (size_t i = 0; i < n; i++) {
        if (newidx[i] == CFG_NONE)
            continue;
        cfg_block_t bl = bp->blocks.v[i];
        uint32_t first = (uint32_t)ne;
        for (uint32_t k = 0; k < bl.nsucc; k++) {
            cfg_edge_t e = bp->edges.v[bl.succ + k];
            e.from = newidx[i];
            if (e.to != CFG_NONE)
                e.to = newidx[e.to];
            bp->edges.v[ne++] = e;
        }
        bl.succ = first;
        bp->blocks.v[newidx[i]] = bl;
    }
    bp->entry_block = newidx[bp->entry_block];
    bp->blocks.n = nb;
    bp->blocks_ver = cfg_blocks_changed(b);
    bp->edges.n = ne;
    free(newidx);
    free(stack);
    QP_CHECK(cfg_note_noret_sites(bp));
    return 1;
}

/*
 * Find the procedures that never return, and cut the calls to them. *NORET gets their
 * entries, sorted. Calls to cut are
 * in the procedures whose calls may have changed (built again, or whose calls may go to
 * another procedure now) and in callers of restarted procedures that never return. No
 * other procedure has one: after the last analysis none had a call to a procedure that
 * never returns, and a procedure that never returns now but did not then was restarted.
 * (The others restarted, callers that may return of those built again, have nothing
 * to cut: looking at them all cost more than the rest of the analysis.)
 */
int
cfg_nr_noreturn_and_prune(cfg_builder_t *b, cfg_u64_vec_t *noret)
{
    size_t n = b->procs.n;
    uint8_t *prune = calloc(n + 1, 1), *restarted = calloc(n + 1, 1);
    int rc = prune == NULL || restarted == NULL ? QP_ENOMEM : find_noreturn(b, restarted, prune);
    noret->n = 0;
    for (size_t i = 0; i < n && rc >= 0; i++)
        if (b->procs.v[i].p.flags & CFG_PROC_NORETURN)
            rc = CFG_VEC_PUSH(*noret, b->procs.v[i].p.entry);
    for (size_t i = 0; i < n && rc >= 0; i++) {
        if (!restarted[i] || !(b->procs.v[i].p.flags & CFG_PROC_NORETURN))
            continue;
        for (uint32_t e = b->nr->head[i]; e != CFG_NONE; e = b->nr->next.v[e])
            if (b->nr->who.v[e] != CFG_NONE)
                prune[b->nr->who.v[e]] = 1;
    }
    nr_set_t set;
    nr_set_init(&set, noret);
    for (size_t i = 0; i < n && rc >= 0; i++)
        if (prune[i])
            rc = prune_proc(b, &b->procs.v[i], &set);
    free(set.bits);
    free(prune);
    free(restarted);
    return rc < 0 ? rc : 0;
}
