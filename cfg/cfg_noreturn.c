/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Procedures that never return (cfg_build.c's fixpoint): which procedures may return,
 * by the calls and jumps they make, kept up to date as procedures are built again; and
 * the calls of those that never return cut (their fall-through edges gone).
 *
 * What the analysis asks of procedures other than the one it looks at (where a call
 * goes, whether that callee may return, whether it is marked as never returning) it
 * asks of compact arrays kept here by procedure index, not of the procedures (352
 * bytes each, a cache miss a question: chromium has 670,000 of them).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "cfg/cfg_priv.h"

/*****************************************************************************
 * What the analysis keeps from one run to the next
 */

/* A procedure's state in the analysis (nr_index_t.state). */
enum {
    NR_MAY_RETURN = 1, /* the fixpoint's "may return" */
    NR_MARKED = 2,     /* CFG_PROC_NORETURN, as set_noreturn_mark last set it */
    NR_PENDING = 4     /* its dependencies to be added anew (nr_deps_pending) */
};

/* Per procedure, by its index in b->procs as it was when last brought up to date. */
typedef struct nr_index {
    uint64_t *entry;                  /* its entry (sorted, as b->procs) */
    uint64_t *end;                    /* the end of its main extent */
    uint8_t *state;                   /* NR_* bits */
    uint32_t *head;                   /* as a callee: its first dependency, or CFG_NONE */
    uint32_t *fwd;                    /* as a caller: its dependencies as last added, */
    uint32_t *nfwd;                   /* ... [fwd, fwd + nfwd) */
    size_t cap;                       /* elements allocated in each array */
} nr_index_t;

/* A call or tail call of a procedure to a procedure. */
typedef struct nr_dep {
    uint32_t who;                     /* the caller (CFG_NONE: removed, or stale) */
    uint32_t next;                    /* the next one of its callee, or CFG_NONE */
    uint32_t callee;                  /* the callee (CFG_NONE: removed) */
} nr_dep_t;

/* A call or jump to an address in no procedure. */
typedef struct nr_unres {
    uint64_t target;                  /* the address */
    uint32_t who;                     /* the procedure that calls or jumps there */
} nr_unres_t;

/*
 * Who depends on whom: a dependency per call or tail call of a procedure to a
 * procedure, on a list per callee (linked through `next`, newest first; a procedure's
 * calls of itself on none) and, in the order they were added, per caller (nfwd of them
 * from fwd). Kept from one analysis to the next: when procedures were added or removed
 * since, everything follows them to their new indices (by entry address). A procedure
 * looked at again adds its dependencies anew, its old ones marked stale (left on the
 * callees' lists until stale ones are the most, then dropped).
 */
typedef struct cfg_nr_deps {
    uint64_t gen;                     /* b->gen when last brought up to date */
    size_t n;                         /* b->procs.n then */
    nr_index_t ix;                    /* the procedures then */
    nr_index_t alt;                   /* the arrays nr_deps_remap fills next */
    qp_buckets_t buckets;             /* over ix.entry[0 .. n) */
    CFG_VEC(nr_dep_t) deps;           /* the dependencies */
    size_t nstale;                    /* ... of which stale */
    CFG_VEC(nr_unres_t) unres;        /* calls and jumps to no procedure */
    /* The scratch of one analysis, n + 1 each, kept to be reused (fresh pages would
     * be faulted in each time: a tenth of chromium's time here). */
    size_t scap;                      /* elements allocated in each */
    uint32_t *queue;                  /* the worklist */
    uint32_t *old2new;                /* nr_deps_remap: old index to new, */
    size_t ocap;                      /* ... elements allocated */
    uint8_t *queued;                  /* per procedure: on the worklist */
    uint8_t *restarted;               /* per procedure: restarted this time */
    uint8_t *prune;                   /* per procedure: its calls to be looked at */
    uint8_t *seen;                    /* proc_may_return's walk: blocks seen, */
    uint32_t *stack;                  /* ... and to visit */
    size_t wcap;                      /* ... elements allocated */
} cfg_nr_deps_t;

static void
nr_index_free(nr_index_t *ix)
{
    free(ix->entry);
    free(ix->end);
    free(ix->state);
    free(ix->head);
    free(ix->fwd);
    free(ix->nfwd);
}

void
cfg_nr_deps_free(cfg_nr_deps_t *d)
{
    if (d == NULL)
        return;
    nr_index_free(&d->ix);
    nr_index_free(&d->alt);
    free(d->buckets.at);
    CFG_VEC_FREE(d->deps);
    CFG_VEC_FREE(d->unres);
    free(d->queue);
    free(d->old2new);
    free(d->queued);
    free(d->restarted);
    free(d->prune);
    free(d->seen);
    free(d->stack);
    free(d);
}

/* Make *P hold at least N elements of SIZE bytes (its contents kept); 0 or QP_ENOMEM. */
static int
nr_grow(void **p, size_t n, size_t size)
{
    void *v = realloc(*p, n * size);
    if (v == NULL)
        return QP_ENOMEM;
    *p = v;
    return 0;
}

/* Room in IX for N procedures. */
static int
nr_index_fit(nr_index_t *ix, size_t n)
{
    if (n <= ix->cap)
        return 0;
    n += n / 8;
    QP_CHECK(nr_grow((void **)&ix->entry, n, sizeof(uint64_t)));
    QP_CHECK(nr_grow((void **)&ix->end, n, sizeof(uint64_t)));
    QP_CHECK(nr_grow((void **)&ix->state, n, 1));
    QP_CHECK(nr_grow((void **)&ix->head, n, sizeof(uint32_t)));
    QP_CHECK(nr_grow((void **)&ix->fwd, n, sizeof(uint32_t)));
    QP_CHECK(nr_grow((void **)&ix->nfwd, n, sizeof(uint32_t)));
    ix->cap = n;
    return 0;
}

/* Room in D's scratch for an analysis of N procedures, queued, restarted and prune
 * zeroed. */
static int
nr_scratch_fit(cfg_nr_deps_t *d, size_t n)
{
    if (n + 1 > d->scap) {
        size_t c = n + 1 + n / 8;
        QP_CHECK(nr_grow((void **)&d->queue, c, sizeof(uint32_t)));
        QP_CHECK(nr_grow((void **)&d->queued, c, 1));
        QP_CHECK(nr_grow((void **)&d->restarted, c, 1));
        QP_CHECK(nr_grow((void **)&d->prune, c, 1));
        d->scap = c;
    }
    memset(d->queued, 0, n + 1);
    memset(d->restarted, 0, n + 1);
    memset(d->prune, 0, n + 1);
    return 0;
}

/* IX's entries and ends: those of b->procs now (the one walk of all procedures). */
static void
nr_index_read(const cfg_builder_t *b, nr_index_t *ix)
{
    memcpy(ix->entry, b->entry.v, b->procs.n * sizeof(uint64_t));
    for (size_t i = 0; i < b->procs.n; i++)
        ix->end[i] = cfg_bproc_walk_head(b, i)->p.end;
}

/* The entry at position I of D's index (qp_bucket_key_fn). */
static uint64_t
nr_entry_key(const void *ctx, size_t i)
{
    return ((const cfg_nr_deps_t *)ctx)->ix.entry[i];
}

/* D is up to date for B's procedures as they are (read into d->ix). */
static void
nr_stamp(const cfg_builder_t *b, cfg_nr_deps_t *d)
{
    d->n = b->procs.n;
    d->gen = b->gen;
    /* Without memory for the buckets, the searches look at all the entries. */
    if (d->n > 0)
        (void)qp_buckets_build(&d->buckets, d->ix.entry[0], 12, d->n, nr_entry_key, d);
    else
        d->buckets.n = 0;
}

/* What cfg_discover_find answers (D up to date): the procedure whose main extent holds
 * ADDR, or CFG_NONE. */
static uint32_t
nr_find(const cfg_nr_deps_t *d, uint64_t addr)
{
    size_t lo = qp_buckets_upto(&d->buckets, d->ix.entry, d->n, addr);
    return lo > 0 && addr < d->ix.end[lo - 1] ? (uint32_t)(lo - 1) : CFG_NONE;
}

/* What cfg_proc_by_entry answers (D up to date). */
static uint32_t
nr_by_entry(const cfg_nr_deps_t *d, uint64_t addr)
{
    uint32_t i = nr_find(d, addr);
    return i != CFG_NONE && d->ix.entry[i] == addr ? i : CFG_NONE;
}

/*****************************************************************************
 * Procedures that never return
 */

/* Room in D's walk scratch for BP's blocks. */
static int
walk_fit(cfg_nr_deps_t *d, const cfg_bproc_t *bp)
{
    if (bp->blocks.n <= d->wcap)
        return 0;
    QP_CHECK(nr_grow((void **)&d->seen, bp->blocks.n, 1));
    QP_CHECK(nr_grow((void **)&d->stack, bp->blocks.n, sizeof(uint32_t)));
    d->wcap = bp->blocks.n;
    return 0;
}

/* Start a walk of BP's blocks from its entry on D's scratch: the first block pushed
 * and seen. */
static size_t
walk_start(const cfg_bproc_t *bp, cfg_nr_deps_t *d)
{
    memset(d->seen, 0, bp->blocks.n);
    d->stack[0] = bp->entry_block;
    d->seen[bp->entry_block] = 1;
    return 1;
}

/* Push E's block on the walk's stack (of SP blocks) unless it was seen: the new SP. */
static size_t
walk_push(cfg_nr_deps_t *d, size_t sp, const cfg_edge_t *e)
{
    if (e->to != CFG_NONE && !d->seen[e->to]) {
        d->seen[e->to] = 1;
        d->stack[sp++] = e->to;
    }
    return sp;
}

/* Does a return of BP's (or a jump of unknown targets) follow its entry with no call or
 * tail call on the way (D's walk scratch large enough)? 1 or 0. */
static int
returns_directly(const cfg_bproc_t *bp, cfg_nr_deps_t *d)
{
    uint32_t *stack = d->stack;
    size_t sp = walk_start(bp, d);
    while (sp > 0) {
        const cfg_block_t *bl = &bp->blocks.v[stack[--sp]];
        for (uint32_t k = 0; k < bl->nsucc; k++) {
            const cfg_edge_t *e = &bp->edges.v[bl->succ + k];
            if (e->kind == CFG_EDGE_RETURN || e->kind == CFG_EDGE_UNRESOLVED)
                return 1;
            if (e->kind == CFG_EDGE_NORETURN || e->kind == CFG_EDGE_TAILCALL
                || e->kind == CFG_EDGE_CALLRET)
                continue;
            sp = walk_push(d, sp, e);
        }
    }
    return 0;
}

/* Does procedure I's "may return" hold (of D, up to date)? */
static int
nr_may_return(const cfg_nr_deps_t *d, uint32_t i)
{
    return d->ix.state[i] & NR_MAY_RETURN;
}

/*
 * May procedure I return, by the current "may return" of the procedures it calls and
 * jumps to? ALONE: whatever those are (every procedure it calls or jumps to taken as
 * never returning); then it returns in every fixpoint. 1, 0 or QP_ENOMEM.
 */
static int
proc_may_return(cfg_builder_t *b, cfg_nr_deps_t *d, uint32_t i, int alone)
{
    cfg_bproc_t *bp = cfg_bproc_at(b, i);
    if (bp->blocks.n == 0 || bp->entry_block == CFG_NONE || bp->p.unsafe != NULL)
        return 1; /* not analysable: assume it returns */
    if (bp->p.flags & CFG_PROC_RESUMED)
        return 1; /* its caller is resumed at the return address */
    QP_CHECK(walk_fit(d, bp));
    /* The walk below follows every edge but a call's, a tail call's and a
     * never-returning one always: a return reached through those others alone is found
     * whatever the callees do, and stays so while the blocks do (the fixpoint asks
     * again and again). */
    if (bp->ret_direct >> 1 != bp->blocks_ver || bp->blocks_ver == 0)
        bp->ret_direct = 2 * bp->blocks_ver + (uint64_t)returns_directly(bp, d);
    if (bp->ret_direct & 1)
        return 1;
    uint32_t *stack = d->stack;
    size_t sp = walk_start(bp, d);
    while (sp > 0) {
        const cfg_block_t *bl = &bp->blocks.v[stack[--sp]];
        for (uint32_t k = 0; k < bl->nsucc; k++) {
            const cfg_edge_t *e = &bp->edges.v[bl->succ + k];
            switch (e->kind) {
            case CFG_EDGE_RETURN:
            case CFG_EDGE_UNRESOLVED: return 1;
            case CFG_EDGE_NORETURN: continue;
            case CFG_EDGE_TAILCALL: {
                uint32_t ti = e->target ? nr_find(d, e->target) : CFG_NONE;
                if (ti == CFG_NONE || (!alone && nr_may_return(d, ti)))
                    return 1;
                continue;
            }
            case CFG_EDGE_CALLRET:
                if (bl->call_target) {
                    uint32_t ci = nr_by_entry(d, bl->call_target);
                    if (ci != CFG_NONE && (alone || !nr_may_return(d, ci)))
                        continue;
                }
                break;
            default: break;
            }
            sp = walk_push(d, sp, e);
        }
    }
    return 0;
}

/* Add the dependencies of procedure I (its calls and tail calls) to D, those it had
 * made stale. */
static int
nr_deps_add(const cfg_builder_t *b, cfg_nr_deps_t *d, uint32_t i)
{
    const cfg_bproc_t *bp = cfg_bproc_at(b, i);
    for (uint32_t k = d->ix.fwd[i], end = k + d->ix.nfwd[i]; k < end; k++)
        d->deps.v[k].who = CFG_NONE;
    d->nstale += d->ix.nfwd[i];
    size_t first = d->deps.n;
    for (size_t e = 0; e < bp->edges.n; e++) {
        const cfg_edge_t *ed = &bp->edges.v[e];
        uint64_t callee = 0;
        if (ed->kind == CFG_EDGE_CALLRET)
            callee = bp->blocks.v[ed->from].call_target;
        else if (ed->kind == CFG_EDGE_TAILCALL)
            callee = ed->target;
        if (callee == 0)
            continue;
        uint32_t ci = nr_find(d, callee);
        if (ci == CFG_NONE) {
            QP_CHECK(CFG_VEC_PUSH(d->unres, ((nr_unres_t) { callee, i })));
            continue;
        }
        nr_dep_t x = { i, ci != i ? d->ix.head[ci] : CFG_NONE, ci };
        QP_CHECK(CFG_VEC_PUSH(d->deps, x));
        if (ci != i)
            d->ix.head[ci] = (uint32_t)(d->deps.n - 1);
    }
    d->ix.fwd[i] = (uint32_t)first;
    d->ix.nfwd[i] = (uint32_t)(d->deps.n - first);
    return 0;
}

/* Drop D's stale dependencies (those of removed procedures too), the others kept in
 * their order (and so the callees' lists). */
static void
nr_deps_compact(cfg_nr_deps_t *d)
{
    size_t m = 0;
    for (size_t k = 0; k < d->deps.n; k++) {
        nr_dep_t x = d->deps.v[k];
        if (x.who == CFG_NONE)
            continue;
        if (k == d->ix.fwd[x.who]) /* a caller's dependencies are together */
            d->ix.fwd[x.who] = (uint32_t)m;
        d->deps.v[m++] = x;
    }
    d->deps.n = m;
    d->nstale = 0;
    for (size_t i = 0; i < d->n; i++)
        d->ix.head[i] = CFG_NONE;
    for (size_t k = 0; k < m; k++) {
        nr_dep_t *x = &d->deps.v[k];
        x->next = CFG_NONE;
        if (x->callee != CFG_NONE && x->callee != x->who) {
            x->next = d->ix.head[x->callee];
            d->ix.head[x->callee] = (uint32_t)k;
        }
    }
}

/*
 * Add procedure I's dependencies if they are pending. They are added just before the
 * fixpoint first looks at it (every procedure whose dependencies are pending is on its
 * worklist): its blocks and edges are then read twice in a row, not once each in two
 * walks of all of them (chromium: a cache miss for most). Until then its old ones
 * stand: they only make procedures be looked at that are on the worklist already.
 */
static int
nr_deps_pending(const cfg_builder_t *b, cfg_nr_deps_t *d, uint32_t i)
{
    if (!(d->ix.state[i] & NR_PENDING))
        return 0;
    d->ix.state[i] &= (uint8_t)~NR_PENDING;
    return nr_deps_add(b, d, i);
}

/* D (new) for every procedure, their dependencies pending. */
static int
nr_deps_collect(const cfg_builder_t *b, cfg_nr_deps_t *d)
{
    size_t n = b->procs.n;
    QP_CHECK(nr_index_fit(&d->ix, n + 1));
    nr_index_read(b, &d->ix);
    for (size_t i = 0; i < n; i++) {
        d->ix.state[i] = NR_PENDING;
        d->ix.head[i] = CFG_NONE;
        d->ix.fwd[i] = d->ix.nfwd[i] = 0;
    }
    nr_stamp(b, d);
    return 0;
}

/*
 * Procedures were added or removed since D was brought up to date: move everything to
 * the new indices. ROOT (b->procs.n bytes) gets 1 for the procedures whose calls may
 * now go to another procedure: new ones, callers of removed ones, callers of an address
 * that lies in a procedure now. (Callers of one whose extent changed are found by the
 * caller: that one was built again.)
 */
static int
nr_deps_remap(const cfg_builder_t *b, cfg_nr_deps_t *d, uint8_t *root)
{
    size_t n = b->procs.n, on = d->n;
    nr_index_t *ix = &d->alt, *old = &d->ix;
    QP_CHECK(nr_index_fit(ix, n + 1));
    if (on + 1 > d->ocap) {
        QP_CHECK(nr_grow((void **)&d->old2new, on + 1 + on / 8, sizeof(uint32_t)));
        d->ocap = on + 1 + on / 8;
    }
    uint32_t *old2new = d->old2new;
    nr_index_read(b, ix);
    for (size_t j = 0; j < n; j++) {
        ix->state[j] = 0;
        ix->head[j] = CFG_NONE;
        ix->fwd[j] = ix->nfwd[j] = 0;
        root[j] = 1; /* new, until matched below */
    }
    for (size_t i = 0, j = 0; i < on; i++) {
        while (j < n && ix->entry[j] < old->entry[i])
            j++;
        old2new[i] = j < n && ix->entry[j] == old->entry[i] ? (uint32_t)j : CFG_NONE;
        if (old2new[i] != CFG_NONE) {
            ix->state[j] = old->state[i];
            ix->head[j] = old->head[i];
            ix->fwd[j] = old->fwd[i];
            ix->nfwd[j] = old->nfwd[i];
            root[j] = 0;
        }
    }
    for (size_t e = 0; e < d->deps.n; e++) {
        nr_dep_t *x = &d->deps.v[e];
        if (x->who != CFG_NONE && (x->who = old2new[x->who]) == CFG_NONE)
            d->nstale++;
        if (x->callee != CFG_NONE)
            x->callee = old2new[x->callee];
    }
    for (size_t i = 0; i < on; i++)
        if (old2new[i] == CFG_NONE)
            for (uint32_t e = old->head[i]; e != CFG_NONE; e = d->deps.v[e].next)
                if (d->deps.v[e].who != CFG_NONE)
                    root[d->deps.v[e].who] = 1;
    nr_index_t t = d->ix;
    d->ix = d->alt;
    d->alt = t;
    nr_stamp(b, d);
    size_t k = 0;
    for (size_t u = 0; u < d->unres.n; u++) {
        nr_unres_t x = d->unres.v[u];
        x.who = old2new[x.who];
        if (x.who == CFG_NONE)
            continue;
        if (nr_find(d, x.target) != CFG_NONE)
            root[x.who] = 1; /* added again with its new dependencies */
        else
            d->unres.v[k++] = x;
    }
    d->unres.n = k;
    return 0;
}

/*
 * Bring D up to date for an analysis that keeps what did not change: ROOT (zeroed,
 * b->procs.n bytes) gets 1 for every procedure whose "may return" must be looked at
 * again: those built again (or whose fragment mark changed) since, their callers, and
 * what nr_deps_remap finds. Their dependencies are to be added anew (pending).
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
        uint32_t j = b->nr_dirty_lost ? (uint32_t)k : nr_by_entry(d, b->nr_dirty.v[k]);
        if (j == CFG_NONE || !cfg_bproc_at(b, j)->nr_dirty)
            continue;
        cfg_bproc_at(b, j)->nr_dirty = 0; /* (find_noreturn would clear it) */
        root[j] = 1;
        for (uint32_t e = d->ix.head[j]; e != CFG_NONE; e = d->deps.v[e].next)
            if (d->deps.v[e].who != CFG_NONE)
                root[d->deps.v[e].who] = 1;
    }
    b->nr_dirty.n = 0;
    b->nr_dirty_lost = 0;
    for (size_t j = 0; j < n; j++)
        if (root[j])
            d->ix.state[j] |= NR_PENDING;
    return 0;
}

/* Procedure I's CFG_PROC_NORETURN mark (and D's copy of it), from its "may return"
 * (fragments have none). */
static void
set_noreturn_mark(cfg_builder_t *b, cfg_nr_deps_t *d, uint32_t i)
{
    cfg_bproc_t *bp = cfg_bproc_at(b, i);
    if (!nr_may_return(d, i) && !(bp->p.flags & CFG_PROC_FRAGMENT)) {
        bp->p.flags |= CFG_PROC_NORETURN;
        d->ix.state[i] |= NR_MARKED;
    } else {
        bp->p.flags &= ~(uint32_t)CFG_PROC_NORETURN;
        d->ix.state[i] &= (uint8_t)~NR_MARKED;
    }
}

/* Is position K of a circular queue whose entries are [QH, QT) taken? */
static int
queued_at(size_t qh, size_t qt, size_t k)
{
    return qh <= qt ? k >= qh && k < qt : k >= qh || k < qt;
}

/* Ask BP's entry block and first edges into the cache (the fixpoint reads them next). */
static void
prefetch_cfg(const cfg_bproc_t *bp)
{
    if (bp->entry_block < bp->blocks.n)
        qp_prefetch(&bp->blocks.v[bp->entry_block]);
    if (bp->edges.n > 0)
        qp_prefetch(bp->edges.v);
}

/* prefetch_cfg, unless proc_may_return will answer without walking BP's blocks (a
 * return found with no call on the way, for these blocks). */
static void
prefetch_walked(const cfg_bproc_t *bp)
{
    int known = bp->ret_direct >> 1 == bp->blocks_ver && bp->blocks_ver != 0;
    if (!known || !(bp->ret_direct & 1))
        prefetch_cfg(bp);
}

/* Callers looked at together by find_noreturn (their misses overlapped). */
#define NR_BATCH 32

/*
 * Least fixpoint of "may return", driven by a worklist: a procedure is looked at again
 * only when one of the procedures it calls or jumps to is found to return.
 *
 * When only some procedures were built again since the last analysis (same b->gen), the
 * fixpoint is updated instead of recomputed: the rebuilt ones and every procedure whose
 * "may return" might have rested on them (its callers that may return, transitively)
 * start again from "never returns", the others keep their value (what supports it did
 * not change), and the worklist starts from the restarted ones. The result is the same
 * least fixpoint. d->restarted (b->procs.n bytes, zeroed) gets 1 for each procedure
 * restarted, d->prune (the same) for each whose calls may have changed: built again,
 * callers of those, and what nr_deps_remap finds (every procedure, the first time).
 */
static int
find_noreturn(cfg_builder_t *b, cfg_nr_deps_t *d, int first)
{
    size_t n = b->procs.n;
    CFG_VEC(uint32_t) now_returning = { 0 }; /* found to return, not restarted */
    uint32_t *queue = d->queue;
    uint8_t *queued = d->queued, *restarted = d->restarted, *root = d->prune;
    int rc = 0;
    size_t qh = 0, qt = 0; /* circular queue of at most n entries */
    if (!first) {
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
        for (size_t k = 0; k < qt; k++) {
            uint32_t e = d->ix.head[queue[k]];
            while (e != CFG_NONE) {
                /* The callers are looked at a batch at a time, each asked into the cache
                 * first (a miss each, waited for in turn when looked at one by one). */
                uint32_t batch[NR_BATCH];
                size_t m = 0;
                for (; e != CFG_NONE && m < NR_BATCH; e = d->deps.v[e].next) {
                    uint32_t c = d->deps.v[e].who;
                    if (c == CFG_NONE || queued[c] || !nr_may_return(d, c))
                        continue;
                    queued[c] = 1; /* looked at */
                    batch[m++] = c;
                    cfg_bproc_prefetch(b, c);
                }
                for (size_t j = 0; j < m; j++)
                    prefetch_walked(cfg_bproc_at(b, batch[j]));
                for (size_t j = 0; j < m; j++) {
                    int alone = proc_may_return(b, d, batch[j], 1);
                    if (alone < 0) {
                        rc = alone;
                        goto out;
                    }
                    if (!alone)
                        queue[qt++] = batch[j];
                    else
                        queue[n - ++nkept] = batch[j];
                }
            }
        }
        for (size_t k = 0; k < nkept; k++)
            queued[queue[n - 1 - k]] = 0;
    } else {
        if ((rc = nr_deps_collect(b, d)) < 0)
            goto out;
        for (size_t i = 0; i < n; i++) {
            queue[qt++] = (uint32_t)i;
            queued[i] = root[i] = 1;
        }
        for (size_t i = 0; i < n; i++)
            cfg_bproc_at(b, i)->nr_dirty = 0; /* (else cleared by nr_deps_update) */
        b->nr_dirty.n = 0;
        b->nr_dirty_lost = 0;
    }
    for (size_t k = 0; k < qt; k++) {
        d->ix.state[queue[k]] &= (uint8_t)~NR_MAY_RETURN;
        restarted[queue[k]] = 1;
    }
    qt %= n + 1;
    while (qh != qt) {
        uint32_t i = queue[qh];
        /* The ones a few places on, if queued (the queue's order is no array's): the
         * procedure, and nearer, the blocks and edges of one asked for before. */
        size_t ahead = (qh + CFG_WALK_AHEAD) % (n + 1);
        if (queued_at(qh, qt, ahead))
            cfg_bproc_prefetch(b, queue[ahead]);
        ahead = (qh + CFG_WALK_AHEAD / 2) % (n + 1);
        if (queued_at(qh, qt, ahead))
            prefetch_cfg(cfg_bproc_at(b, queue[ahead]));
        qh = (qh + 1) % (n + 1);
        queued[i] = 0;
        if ((rc = nr_deps_pending(b, d, i)) < 0)
            goto out;
        if (nr_may_return(d, i))
            continue;
        cfg_bproc_t *bp = cfg_bproc_at(b, i);
        if ((bp->p.flags & CFG_PROC_FRAGMENT) || bp->name_noreturn)
            continue;
        int r = proc_may_return(b, d, i, 0);
        if (r < 0) {
            rc = r;
            goto out;
        }
        if (!r)
            continue;
        d->ix.state[i] |= NR_MAY_RETURN;
        if (!restarted[i] && (rc = CFG_VEC_PUSH(now_returning, i)) < 0)
            goto out;
        for (uint32_t e = d->ix.head[i]; e != CFG_NONE; e = d->deps.v[e].next) {
            uint32_t c = d->deps.v[e].who;
            if (c != CFG_NONE && !queued[c] && !nr_may_return(d, c)) {
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
            set_noreturn_mark(b, d, (uint32_t)i);
    for (size_t k = 0; k < now_returning.n; k++)
        set_noreturn_mark(b, d, now_returning.v[k]);
    if (d->nstale > d->deps.n / 2)
        nr_deps_compact(d);
out:
    CFG_VEC_FREE(now_returning);
    return rc;
}

/* Does procedure I call or jump to a procedure marked as never returning (by its
 * dependencies as last added: all its calls, or more)? */
static int
calls_marked(const cfg_nr_deps_t *d, uint32_t i)
{
    for (uint32_t k = d->ix.fwd[i], end = k + d->ix.nfwd[i]; k < end; k++) {
        uint32_t c = d->deps.v[k].callee;
        if (c != CFG_NONE && (d->ix.state[c] & NR_MARKED))
            return 1;
    }
    return 0;
}

/* Is the procedure entered at ENTRY marked as never returning (D up to date)? */
static int
nr_marked_at(const cfg_nr_deps_t *d, uint64_t entry)
{
    uint32_t c = nr_by_entry(d, entry);
    return c != CFG_NONE && (d->ix.state[c] & NR_MARKED);
}

/* Remove blocks not reachable from the entry, after cutting return edges of the calls
 * of procedures marked as never returning (D's marks). Returns 1 when something
 * changed. */
static int
prune_proc(cfg_builder_t *b, cfg_bproc_t *bp, const cfg_nr_deps_t *d)
{
    int cut = 0;
    for (size_t e = 0; e < bp->edges.n; e++) {
        cfg_edge_t *ed = &bp->edges.v[e];
        const cfg_block_t *bl = &bp->blocks.v[ed->from];
        if (ed->kind == CFG_EDGE_CALLRET && bl->call_target
            && nr_marked_at(d, bl->call_target)) {
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
    cfg_spans_dirty(b, bp);
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
 * to cut: looking at them all cost more than the rest of the analysis.) Of those, only
 * the procedures that call one marked as never returning have their edges looked at.
 */
int
cfg_nr_noreturn_and_prune(cfg_builder_t *b, cfg_u64_vec_t *noret)
{
    size_t n = b->procs.n;
    int first = b->nr == NULL;
    assert(b->side == NULL);
    if (first && (b->nr = calloc(1, sizeof(cfg_nr_deps_t))) == NULL)
        return QP_ENOMEM;
    cfg_nr_deps_t *d = b->nr;
    QP_CHECK(nr_scratch_fit(d, n));
    int rc = find_noreturn(b, d, first);
    uint8_t *prune = d->prune;
    noret->n = 0;
    for (size_t i = 0; i < n && rc >= 0; i++)
        if (d->ix.state[i] & NR_MARKED)
            rc = CFG_VEC_PUSH(*noret, d->ix.entry[i]);
    for (size_t i = 0; i < n && rc >= 0; i++) {
        if (!d->restarted[i] || !(d->ix.state[i] & NR_MARKED))
            continue;
        for (uint32_t e = d->ix.head[i]; e != CFG_NONE; e = d->deps.v[e].next)
            if (d->deps.v[e].who != CFG_NONE)
                prune[d->deps.v[e].who] = 1;
    }
    for (size_t i = 0; i < n && rc >= 0; i++)
        if (prune[i] && calls_marked(d, (uint32_t)i))
            rc = prune_proc(b, cfg_bproc_at(b, i), d);
    return rc < 0 ? rc : 0;
}

int
cfg_nr_may_return(const cfg_builder_t *b, size_t i)
{
    assert(b->nr != NULL && b->nr->n == b->procs.n && i < b->nr->n);
    return nr_may_return(b->nr, (uint32_t)i);
}
