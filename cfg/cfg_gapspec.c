/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A gap sweep's builds ahead, on the pool. The sweep (cfg_build.c) builds the procedures
 * it finds in gaps one after the other, each seeing what the ones before found (chromium:
 * 117,000 procedures in 50,000 gaps, 3.2 s on one thread). Most see nothing of each
 * other: while the sweep runs, the pool's other threads build each gap's procedures
 * ahead, from the last gap on, as if they were the only ones found, noting every lookup
 * of the procedures each build made and what it answered. When the sweep comes to such
 * a procedure, built by then, the same lookups are made again: the same answers (and the
 * same start) mean its own build would be this one, which it takes; any other answer,
 * or a build not done yet, and it builds the procedure itself, as before. The result is
 * the serial sweep's, whatever the threads.
 */
#include <stdlib.h>
#include <string.h>

#include "base/qp_pool.h"
#include "cfg/cfg_priv.h"

/* What a build with scratch SC found, moved into S (SC's lists left empty). */
static void
take_findings(cfg_spec_t *s, cfg_scratch_t *sc)
{
    s->new_entries = sc->new_entries;
    s->new_srcs = sc->new_srcs;
    s->known = sc->known;
    s->strings = sc->strings;
    memset(&sc->new_entries, 0, sizeof(sc->new_entries));
    memset(&sc->new_srcs, 0, sizeof(sc->new_srcs));
    memset(&sc->known, 0, sizeof(sc->known));
    memset(&sc->strings, 0, sizeof(sc->strings));
}

static void
spec_free(cfg_spec_t *s)
{
    for (size_t k = 0; k < s->nmore; k++)
        spec_free(&s->more[k]);
    free(s->more);
    cfg_bproc_free(&s->bp);
    CFG_VEC_FREE(s->looks);
    CFG_VEC_FREE(s->new_entries);
    CFG_VEC_FREE(s->new_srcs);
    CFG_VEC_FREE(s->known);
    for (size_t k = 0; k < s->strings.n; k++)
        free(s->strings.v[k]);
    CFG_VEC_FREE(s->strings);
}

int
cfg_gapspec_add(cfg_gapspecs_t *sp, cfg_builder_t *b, uint64_t entry, uint64_t gap_end)
{
    QP_CHECK(cfg_vec_grow((void **)&sp->v, &sp->cap, sp->n + 1, sizeof(cfg_spec_t)));
    cfg_spec_t *s = &sp->v[sp->n];
    memset(s, 0, sizeof(*s));
    s->gap_end = gap_end;
    int rc = cfg_discover_spec_init(b, entry, gap_end, &s->bp);
    if (rc < 0) {
        spec_free(s);
        return rc;
    }
    sp->n++;
    return 0;
}

typedef struct spec_ctx {
    cfg_builder_t *b;
    cfg_gapspecs_t *sp;
    int (*sweep)(void *arg);
    void *arg;
    int rc;                       /* SWEEP's */
} spec_ctx_t;

/* Build procedure C->n - 1 of C ahead with the scratch SC. */
static void
spec_build(cfg_builder_t *b, cfg_spec_chain_t *c, cfg_scratch_t *sc)
{
    cfg_spec_t *x = cfg_spec_chain_at(c, c->n - 1);
    x->ok = 1;
    c->quiet = 0;
    cfg_discover_spec_on(c);
    int rc = cfg_build_proc(b, sc, (uint32_t)(b->procs.n + c->n - 1));
    cfg_discover_spec_on(NULL);
    take_findings(x, sc);
    if (rc < 0)
        x->ok = 0; /* built again by the sweep, which meets the error itself */
}

/*
 * The next procedure of C's gap as the sweep (on_gap_new_proc) would find it after the
 * last one, built, were nothing else found meanwhile: 1 and added to C, 0 none, QP_ENOMEM.
 */
static int
spec_next(cfg_builder_t *b, const cfg_gapspecs_t *sp, cfg_spec_chain_t *c)
{
    const cfg_bproc_t *bp = &cfg_spec_chain_at(c, c->n - 1)->bp;
    uint64_t a = bp->p.entry, end = c->first->gap_end, reach = a;
    if (!cfg_spec_chain_at(c, c->n - 1)->ok || bp->p.unsafe != NULL)
        return 0;
    for (size_t k = 0; k < bp->blocks.n; k++)
        if (bp->blocks.v[k].end > reach && bp->blocks.v[k].start < end)
            reach = bp->blocks.v[k].end;
    size_t avail;
    const uint8_t *p = reach > a && reach < end ? cfg_image_ptr(b->img, reach, &avail) : NULL;
    if (p == NULL)
        return 0;
    size_t n = (size_t)(end - reach) < avail ? (size_t)(end - reach) : avail;
    a = reach + cfg_padding_len(cfg_image_isa(b->img), p, n, reach);
    if (a >= end || cfg_u64_contains(sp->rejected, sp->nrejected, a))
        return 0;
    /* A procedure there already, or a symbol's or FDE's range holding it: no more. */
    c->quiet = 1;
    cfg_discover_spec_on(c);
    uint32_t in = cfg_discover_find(b, a);
    int stop = in != CFG_NONE && (cfg_discover_proc(b, in)->p.entry == a
                                  || cfg_discover_proc(b, in)->hint_end > a);
    cfg_discover_spec_on(NULL);
    if (stop)
        return 0;
    cfg_spec_t *f = c->first;
    QP_CHECK(cfg_vec_grow((void **)&f->more, &f->capmore, f->nmore + 1, sizeof(cfg_spec_t)));
    cfg_spec_t *x = &f->more[f->nmore];
    memset(x, 0, sizeof(*x));
    int rc = cfg_discover_spec_init(b, a, end, &x->bp);
    if (rc < 0) {
        spec_free(x);
        return rc;
    }
    f->nmore++;
    c->n++;
    return 1;
}

static int
spec_task(void *arg, unsigned worker, size_t k)
{
    spec_ctx_t *c = arg;
    /* From the last: the sweep takes them from the first, as fast, and so would be
     * there first all the way along; they meet in the middle. */
    cfg_spec_t *s = &c->sp->v[c->sp->n - 1 - k];
    int st = CFG_SPEC_WAITING;
    if (atomic_load_explicit(&c->sp->closed, memory_order_relaxed)
        || !atomic_compare_exchange_strong(&s->state, &st, CFG_SPEC_BUILDING))
        return 0; /* the sweep is past it */
    cfg_spec_chain_t ch = { s, 1, c->sp->entries, 0 };
    int rc;
    do {
        spec_build(c->b, &ch, &c->b->scratch[worker]);
    } while ((rc = spec_next(c->b, c->sp, &ch)) > 0
             && !atomic_load_explicit(&c->sp->closed, memory_order_relaxed));
    atomic_store_explicit(&s->state, CFG_SPEC_BUILT, memory_order_release);
    return rc < 0 ? rc : 0;
}

/* The sweep on the caller's thread; the builds ahead stop with it. */
static void
sweep_beside(void *arg)
{
    spec_ctx_t *c = arg;
    c->rc = c->sweep(c->arg);
    atomic_store_explicit(&c->sp->closed, 1, memory_order_relaxed);
}

int
cfg_gapspec_sweep(cfg_builder_t *b, cfg_gapspecs_t *sp, int (*sweep)(void *arg), void *arg)
{
    spec_ctx_t c = { b, sp, sweep, arg, 0 };
    if (sp->n == 0 || b->nscratch < 2)
        return sweep(arg);
    sp->entries = malloc(b->procs.n * sizeof(uint64_t));
    if (sp->entries == NULL || cfg_discover_spec_ready(b) < 0)
        return sweep(arg); /* (the same, later) */
    for (size_t i = 0; i < b->procs.n; i++)
        sp->entries[i] = b->procs.v[i].p.entry;
    atomic_store_explicit(&sp->closed, 0, memory_order_relaxed);
    b->spec_on = 1;
    int rc = qp_parallel_for_beside(b->nscratch, sp->n, 16, spec_task, &c, sweep_beside, &c);
    b->spec_on = 0;
    return c.rc < 0 ? c.rc : rc;
}

/* Would S's lookups answer the same now, S->bp being procedure PI? */
static int
same_looks(const cfg_builder_t *b, const cfg_spec_t *s, uint32_t pi)
{
    for (size_t k = 0; k < s->looks.n; k++) {
        const cfg_spec_look_t *l = &s->looks.v[k];
        uint32_t i = cfg_discover_find(b, l->addr);
        if (l->what == CFG_SPEC_NONE) {
            if (i != CFG_NONE)
                return 0;
        } else if (l->what == CFG_SPEC_SELF) {
            if (i != pi)
                return 0;
        } else {
            if (i == CFG_NONE || i == pi)
                return 0;
            const cfg_bproc_t *p = cfg_discover_proc(b, i);
            if (p->p.entry != l->entry || p->p.flags != l->flags)
                return 0;
        }
    }
    return 1;
}

/* Does BP, about to be built, start as S->bp did (what a build reads of its own: no
 * sources ahead, see cfg_discover_spec_active)? */
static int
same_start(const cfg_bproc_t *bp, const cfg_spec_t *s)
{
    const cfg_bproc_t *x = &s->bp;
    return bp->p.entry == x->p.entry && bp->p.flags == x->p.flags
        && bp->ranges.n == 1 && x->ranges.n == 1
        && bp->ranges.v[0].start == x->ranges.v[0].start
        && bp->ranges.v[0].end == x->ranges.v[0].end && bp->extra_entries.n == 0
        && x->extra_entries.n == 0;
}

/* BP gets the build of X (what cfg_build_proc writes), X keeps BP's old lists. */
static void
swap_build(cfg_bproc_t *bp, cfg_bproc_t *x, uint32_t pi)
{
#define SWAP(f)                                                                          \
    do {                                                                                 \
        __typeof__(bp->f) t_ = bp->f;                                                    \
        bp->f = x->f;                                                                    \
        x->f = t_;                                                                       \
    } while (0)
    SWAP(blocks);
    SWAP(edges);
    SWAP(tables);
    SWAP(noret_sites);
#undef SWAP
    bp->p.unsafe = x->p.unsafe;
    bp->p.nind_unresolved = x->p.nind_unresolved;
    bp->runs_into = x->runs_into;
    bp->entry_block = x->entry_block;
    bp->ntail = x->ntail;
    bp->built = x->built;
    bp->nr_dirty = x->nr_dirty;
    for (size_t k = 0; k < bp->blocks.n; k++)
        bp->blocks.v[k].proc = pi;
}

/* Hand S's findings to B as cfg_scratch_flush would; KNOWN: the procedures of its known
 * pairs now. */
static int
flush_findings(cfg_builder_t *b, cfg_spec_t *s, const uint32_t *known)
{
    for (size_t k = 0; k < s->new_entries.n; k++) {
        QP_CHECK(CFG_VEC_PUSH(b->new_entries, s->new_entries.v[k]));
        QP_CHECK(CFG_VEC_PUSH(b->new_srcs, s->new_srcs.v[k]));
    }
    for (size_t k = 0; k + 1 < s->known.n; k += 2)
        cfg_discover_proc(b, known[k / 2])->p.sources |= s->known.v[k + 1];
    for (size_t k = 0; k < s->strings.n; k++) {
        int rc = CFG_VEC_PUSH(b->strings, s->strings.v[k]);
        if (rc < 0)
            return rc; /* (spec_free frees the rest) */
        s->strings.v[k] = NULL;
    }
    s->strings.n = 0;
    return 0;
}

/*
 * The procedures now of the known pairs of procedure AT of C (PI now) into *KNOWN (the
 * indices b->procs.n on were C's): 1, or 0 when one is not there (then its lookup does
 * not answer the same either), QP_ENOMEM.
 */
static int
known_now(const cfg_builder_t *b, const cfg_spec_chain_t *c, size_t at, uint32_t pi,
          uint32_t **known)
{
    const cfg_spec_t *x = cfg_spec_chain_at(c, at);
    *known = malloc((x->known.n / 2 + 1) * sizeof(uint32_t));
    if (*known == NULL)
        return QP_ENOMEM;
    for (size_t k = 0; k + 1 < x->known.n; k += 2) {
        uint32_t i = x->known.v[k];
        if (i >= b->procs.n)
            i = i - b->procs.n == at ? pi
                : cfg_proc_by_entry(b, cfg_spec_chain_at(c, i - b->procs.n)->bp.p.entry);
        if (i == CFG_NONE)
            return 0;
        (*known)[k / 2] = i;
    }
    return 1;
}

int
cfg_gapspec_take(cfg_builder_t *b, cfg_gapspecs_t *sp, uint32_t pi)
{
    cfg_bproc_t *bp = cfg_discover_proc(b, pi);
    size_t lo = 0, hi = sp->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sp->v[mid].bp.p.entry <= bp->p.entry)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return 0;
    /* The gap's first procedure, built ahead with the others once BUILT. */
    cfg_spec_t *g = &sp->v[lo - 1];
    int st = CFG_SPEC_WAITING;
    if (atomic_compare_exchange_strong(&g->state, &st, CFG_SPEC_CLAIMED) || st != CFG_SPEC_BUILT)
        return 0; /* not built yet: not waited for */
    cfg_spec_chain_t c = { g, g->nmore + 1, NULL, 1 };
    size_t at = 0;
    while (at < c.n && cfg_spec_chain_at(&c, at)->bp.p.entry != bp->p.entry)
        at++;
    if (at == c.n)
        return 0;
    cfg_spec_t *s = cfg_spec_chain_at(&c, at);
    uint32_t *known = NULL;
    int ok = s->ok && same_start(bp, s) && same_looks(b, s, pi);
    if (ok)
        ok = known_now(b, &c, at, pi, &known);
    s->ok = 0; /* used once */
    if (ok <= 0) {
        free(known);
        return ok;
    }
    swap_build(bp, &s->bp, pi);
    s->bp.p.unsafe = NULL;
    bp->blocks_ver = cfg_blocks_changed(b);
    if (bp->p.unsafe != NULL && cfg_gap_only(bp))
        atomic_store_explicit(&b->unsafe_built, 1, memory_order_relaxed);
    cfg_note_built(b, pi);
    int rc = flush_findings(b, s, known);
    free(known);
    return rc < 0 ? rc : 1;
}

void
cfg_gapspec_free(cfg_gapspecs_t *sp)
{
    for (size_t k = 0; k < sp->n; k++)
        spec_free(&sp->v[k]);
    free(sp->v);
    free(sp->entries);
    sp->v = NULL;
    sp->entries = NULL;
    sp->n = sp->cap = 0;
}
