/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A gap sweep's builds ahead, on the pool. The sweep (cfg_build.c) builds the procedures
 * it finds in gaps one after the other, each seeing what the ones before found (chromium:
 * 117,000 procedures, 4.7 s on one thread). Most see nothing of each other: the first
 * procedure of each gap is built ahead on the pool, as if it were the only one found,
 * with every lookup of the procedures it made and what each answered. When the sweep
 * comes to it, the same lookups are made again: the same answers (and the same start)
 * mean its own build would be this one, which it takes; any other answer, and it builds
 * the procedure itself, as before. The result is the serial sweep's, whatever the threads.
 */
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
} spec_ctx_t;

static int
spec_task(void *arg, unsigned worker, size_t k)
{
    spec_ctx_t *c = arg;
    cfg_scratch_t *sc = &c->b->scratch[worker];
    cfg_spec_t *s = &c->sp->v[k];
    s->ok = 1;
    cfg_discover_spec_on(s);
    int rc = cfg_build_proc(c->b, sc, (uint32_t)c->b->procs.n);
    cfg_discover_spec_on(NULL);
    take_findings(s, sc);
    if (rc < 0)
        s->ok = 0; /* built again by the sweep, which meets the error itself */
    return 0;
}

int
cfg_gapspec_build(cfg_builder_t *b, cfg_gapspecs_t *sp)
{
    if (sp->n == 0)
        return 0;
    /* A build notes a procedure found only in a gap made unsafe: a note the sweep's own
     * build makes, or its taking this one (cfg_gapspec_take). */
    int unsafe_built = atomic_load_explicit(&b->unsafe_built, memory_order_relaxed);
    spec_ctx_t c = { b, sp };
    cfg_discover_freeze(b, 1);
    b->spec_on = 1;
    int rc = qp_parallel_for(b->nscratch, sp->n, 16, spec_task, &c, NULL);
    b->spec_on = 0;
    cfg_discover_freeze(b, 0);
    atomic_store_explicit(&b->unsafe_built, unsafe_built, memory_order_relaxed);
    if (rc < 0)
        for (size_t k = 0; k < sp->n; k++)
            sp->v[k].ok = 0;
    return rc;
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
            /* Sources only grow, and a build reads them only to skip noting a use the
             * procedure has already (note_external): one more noted is a no-op. */
            if (p->p.entry != l->entry || p->p.flags != l->flags
                || (p->p.sources & l->sources) != l->sources)
                return 0;
        }
    }
    return 1;
}

/* Does BP, about to be built, start as S->bp did (what a build reads of its own)? */
static int
same_start(const cfg_bproc_t *bp, const cfg_spec_t *s)
{
    const cfg_bproc_t *x = &s->bp;
    /* Its own sources as for any procedure looked up (same_looks). */
    return bp->p.entry == x->p.entry && bp->p.flags == x->p.flags
        && (bp->p.sources & x->p.sources) == x->p.sources && bp->ranges.n == 1 && x->ranges.n == 1
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

/* Hand S's findings to B as cfg_scratch_flush would (index b->procs.n: PI). */
static int
flush_findings(cfg_builder_t *b, cfg_spec_t *s, uint32_t pi)
{
    for (size_t k = 0; k < s->new_entries.n; k++) {
        QP_CHECK(CFG_VEC_PUSH(b->new_entries, s->new_entries.v[k]));
        QP_CHECK(CFG_VEC_PUSH(b->new_srcs, s->new_srcs.v[k]));
    }
    for (size_t k = 0; k + 1 < s->known.n; k += 2) {
        uint32_t i = s->known.v[k] == b->procs.n ? pi : s->known.v[k];
        cfg_discover_proc(b, i)->p.sources |= s->known.v[k + 1];
    }
    for (size_t k = 0; k < s->strings.n; k++) {
        int rc = CFG_VEC_PUSH(b->strings, s->strings.v[k]);
        if (rc < 0)
            return rc; /* (spec_free frees the rest) */
        s->strings.v[k] = NULL;
    }
    s->strings.n = 0;
    return 0;
}

int
cfg_gapspec_take(cfg_builder_t *b, cfg_gapspecs_t *sp, uint32_t pi)
{
    cfg_bproc_t *bp = cfg_discover_proc(b, pi);
    size_t lo = 0, hi = sp->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sp->v[mid].bp.p.entry < bp->p.entry)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == sp->n || sp->v[lo].bp.p.entry != bp->p.entry)
        return 0;
    cfg_spec_t *s = &sp->v[lo];
    int ok = s->ok && same_start(bp, s) && same_looks(b, s, pi);
    s->ok = 0; /* used once */
    if (!ok)
        return 0;
    swap_build(bp, &s->bp, pi);
    s->bp.p.unsafe = NULL;
    bp->blocks_ver = cfg_blocks_changed(b);
    if (bp->p.unsafe != NULL && cfg_gap_only(bp))
        atomic_store_explicit(&b->unsafe_built, 1, memory_order_relaxed);
    cfg_note_built(b, pi);
    QP_CHECK(flush_findings(b, s, pi));
    return 1;
}

void
cfg_gapspec_free(cfg_gapspecs_t *sp)
{
    for (size_t k = 0; k < sp->n; k++)
        spec_free(&sp->v[k]);
    free(sp->v);
    memset(sp, 0, sizeof(*sp));
}
