/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * CFG construction. Each procedure is traversed from its entry (recursive descent, never
 * a linear sweep: bytes no path reaches are data or padding, seed 3.4); jump tables are
 * resolved as they are met; blocks end at branches, calls and branch targets. Then a
 * fixpoint finds procedures that never return, their call sites lose the fall-through
 * edge, and unreached code between procedures becomes new procedures (seed 3.6).
 */
#include <stdarg.h>
#include <stdio.h>

#include "base/qp_search.h"
#include "base/qp_sort.h"
#include "cfg/cfg_priv.h"

/* The end of a phase of cfg_prog_build, for the caller's on_phase (development). */
static void
dbg_phase(const cfg_builder_t *b, const char *what)
{
    if (b->opts.on_phase != NULL)
        b->opts.on_phase(b->opts.cb_arg, what, b->procs.n);
}
#define DBG_PHASE(s) dbg_phase(b, s)

/*****************************************************************************
 * Ranges of procedures with cold fragments
 */

static uint64_t
ranges_hash(const cfg_bproc_t *bp)
{
    uint64_t h = bp->ranges.n;
    for (size_t r = 0; r < bp->ranges.n; r++)
        h = (h * 0x100000001b3ull) ^ bp->ranges.v[r].start ^ (bp->ranges.v[r].end << 1);
    return h;
}

/* ranges_hash of the one range [START, END). */
static uint64_t
range_hash1(uint64_t start, uint64_t end)
{
    return 0x100000001b3ull ^ start ^ (end << 1);
}

typedef CFG_VEC(uint32_t) idx_vec_t;

/* Sort V and drop repeats. */
static void
idx_sort_unique(idx_vec_t *v)
{
    int sorted = 1;
    for (size_t i = 1; i < v->n && sorted; i++)
        sorted = v->v[i - 1] <= v->v[i];
    if (!sorted)
        qp_sort_u32(v->v, v->n); /* (qsort's calls of a comparison: 28 M instructions of a
                                  * session on python3.11) */
    size_t k = 0;
    for (size_t i = 0; i < v->n; i++)
        if (k == 0 || v->v[k - 1] != v->v[i])
            v->v[k++] = v->v[i];
    v->n = k;
}

/* Where X is in the sorted V, or -1. */
static ptrdiff_t
idx_find(const idx_vec_t *v, uint32_t x)
{
    size_t lo = 0, hi = v->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v->v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < v->n && v->v[lo] == x ? (ptrdiff_t)lo : -1;
}

/* Push the indices of the procedures whose entries are in E (those still there). */
static int
idx_push_entries(const cfg_builder_t *b, idx_vec_t *v, const cfg_u64_vec_t *e)
{
    for (size_t k = 0; k < e->n; k++) {
        uint32_t i = cfg_proc_by_entry(b, e->v[k]);
        if (i != CFG_NONE)
            QP_CHECK(CFG_VEC_PUSH(*v, i));
    }
    return 0;
}

/*
 * The procedures assign_ranges must look at, in *LOOK (sorted): the fragments (*FRAG,
 * sorted, their parents in *PARENT: CFG_NONE when gone, and then no longer fragments),
 * the parents (*PARENTS, sorted), the procedures that had fragments when it last ran,
 * and those marked not built since (among them every one whose extent changed, and the
 * new ones). Any other is neither a fragment nor a parent and has the one range it had.
 */
static int
ranges_to_look_at(cfg_builder_t *b, idx_vec_t *look, idx_vec_t *frag, idx_vec_t *parent,
                  idx_vec_t *parents)
{
    size_t n = b->procs.n;
    if (b->unbuilt_lost) {
        for (size_t i = 0; i < n; i++) {
            QP_CHECK(CFG_VEC_PUSH(*look, (uint32_t)i));
            if (cfg_bproc_at(b, i)->p.flags & CFG_PROC_FRAGMENT)
                QP_CHECK(CFG_VEC_PUSH(*frag, (uint32_t)i));
        }
    } else {
        QP_CHECK(idx_push_entries(b, frag, &b->frags));
        idx_sort_unique(frag);
        size_t k = 0;
        for (size_t j = 0; j < frag->n; j++)
            if (cfg_bproc_at(b, frag->v[j])->p.flags & CFG_PROC_FRAGMENT)
                frag->v[k++] = frag->v[j];
        frag->n = k;
        QP_CHECK(idx_push_entries(b, look, &b->unbuilt));
        QP_CHECK(idx_push_entries(b, look, &b->parents));
        for (size_t j = 0; j < frag->n; j++)
            QP_CHECK(CFG_VEC_PUSH(*look, frag->v[j]));
    }
    b->frags.n = 0;
    for (size_t j = 0; j < frag->n; j++) {
        cfg_bproc_t *f = cfg_bproc_at(b, frag->v[j]);
        uint32_t pi = cfg_proc_by_entry(b, f->parent_entry);
        QP_CHECK(CFG_VEC_PUSH(*parent, pi));
        if (pi == CFG_NONE) {
            f->p.flags &= ~(uint32_t)CFG_PROC_FRAGMENT;
            cfg_mark_nr_dirty(b, f);
            b->gen++;
        } else {
            QP_CHECK(CFG_VEC_PUSH(*parents, pi));
            QP_CHECK(CFG_VEC_PUSH(b->frags, f->p.entry));
        }
    }
    idx_sort_unique(parents);
    b->parents.n = 0;
    for (size_t j = 0; j < parents->n; j++) {
        QP_CHECK(CFG_VEC_PUSH(b->parents, cfg_bproc_at(b, parents->v[j])->p.entry));
        if (!b->unbuilt_lost)
            QP_CHECK(CFG_VEC_PUSH(*look, parents->v[j]));
    }
    idx_sort_unique(look);
    return 0;
}

/* Is procedure I a parent, or a fragment (with a parent), as ranges_to_look_at found? */
static int
is_parent_of(const idx_vec_t *parents, uint32_t i)
{
    return idx_find(parents, i) >= 0;
}

static int
is_fragment_of(const idx_vec_t *frag, const idx_vec_t *parent, uint32_t i)
{
    ptrdiff_t j = idx_find(frag, i);
    return j >= 0 && parent->v[j] != CFG_NONE;
}

/*
 * Every procedure's ranges: its main extent, then its tied fragments' extents. A
 * procedure whose ranges changed is built again. Each keeps the hash of its ranges
 * (ranges_h), so that one with a single, unchanged range is not touched; only those
 * that may have changed are looked at (ranges_to_look_at).
 */
static int
assign_ranges(cfg_builder_t *b)
{
    size_t n = b->procs.n;
    /* Nothing it looks at changed since it last ran (procedures, extents, fragments
     * all bump b->gen): it would change nothing. */
    if (b->ranges_done && b->ranges_gen == b->gen && b->ranges_n == n)
        return 0;
    idx_vec_t look = { 0 }, frag = { 0 }, parent = { 0 }, parents = { 0 };
    int rc = ranges_to_look_at(b, &look, &frag, &parent, &parents);
    /* A procedure that is neither a fragment nor a parent is done here, in one look. */
    for (size_t j = 0; j < look.n && rc == 0; j++) {
        uint32_t i = look.v[j];
        cfg_bproc_t *bp = cfg_bproc_at(b, i);
        int is_parent = is_parent_of(&parents, i);
        uint64_t h1 = range_hash1(bp->p.start, bp->p.end);
        if (!is_parent && h1 == bp->ranges_h)
            continue; /* the one range it has already */
        bp->ranges.n = 0;
        rc = CFG_VEC_PUSH(bp->ranges, ((cfg_range_t) { bp->p.start, bp->p.end }));
        if (!is_parent && !is_fragment_of(&frag, &parent, i)) {
            cfg_mark_unbuilt(b, bp);
            bp->ranges_h = h1;
        }
    }
    for (size_t j = 0; j < frag.n && rc == 0; j++) {
        if (parent.v[j] == CFG_NONE)
            continue;
        cfg_bproc_t *f = cfg_bproc_at(b, frag.v[j]);
        rc = CFG_VEC_PUSH(cfg_bproc_at(b, parent.v[j])->ranges,
                          ((cfg_range_t) { f->p.start, f->p.end }));
        if (f->blocks.n > 0) {
            f->blocks_ver = cfg_blocks_changed(b);
            cfg_spans_dirty(b, f);
        }
        f->blocks.n = f->edges.n = f->noret_sites.n = f->ntail = 0; /* a fragment has no
                                                                     * blocks of its own */
        f->entry_block = CFG_NONE;
    }
    for (size_t j = 0; j < look.n && rc == 0; j++) {
        uint32_t i = look.v[j];
        int is_parent = is_parent_of(&parents, i);
        if (!is_parent && !is_fragment_of(&frag, &parent, i))
            continue;
        cfg_bproc_t *bp = cfg_bproc_at(b, i);
        uint64_t h = is_parent ? ranges_hash(bp) : range_hash1(bp->p.start, bp->p.end);
        if (bp->p.flags & CFG_PROC_FRAGMENT)
            bp->built = 1;
        else if (h != bp->ranges_h)
            cfg_mark_unbuilt(b, bp);
        bp->ranges_h = h;
    }
    CFG_VEC_FREE(look);
    CFG_VEC_FREE(frag);
    CFG_VEC_FREE(parent);
    CFG_VEC_FREE(parents);
    b->ranges_done = rc == 0;
    b->ranges_gen = b->gen;
    b->ranges_n = n;
    return rc;
}

/*****************************************************************************
 * Gaps: code no procedure reaches
 */

typedef cfg_range_t span_t;
typedef cfg_range_vec_t span_vec_t;

/*
 * Push the blocks of BP that start in [LO, HI) (blocks are in address order), adjacent
 * ones as one span: the gaps between them are the same. Those of one procedure's extent
 * lie in one section (for_each_gap must not see a span across sections). The spans are
 * kept in HOLDER (BP, or a fragment of it) for the next sweep, which takes them as they
 * are if BP's blocks did not change since.
 */
static int
push_spans_in(cfg_bproc_t *holder, const cfg_bproc_t *bp, uint64_t lo, uint64_t hi,
              span_vec_t *v)
{
    if (bp->blocks_ver != holder->covered_ver || lo != holder->covered_lo
        || hi != holder->covered_hi) {
        size_t a = 0, z = bp->blocks.n;
        while (a < z) {
            size_t mid = (a + z) / 2;
            if (bp->blocks.v[mid].start < lo)
                a = mid + 1;
            else
                z = mid;
        }
        /* Kept at their exact size: most procedures have one run. */
        size_t nruns = 0;
        for (size_t k = a; k < bp->blocks.n && bp->blocks.v[k].start < hi; k++)
            nruns += k == a || bp->blocks.v[k - 1].end != bp->blocks.v[k].start;
        if (nruns != holder->covered.cap) {
            cfg_range_t *r = realloc(holder->covered.v, (nruns ? nruns : 1) * sizeof(*r));
            if (r == NULL)
                return QP_ENOMEM;
            holder->covered.v = r;
            holder->covered.cap = nruns;
        }
        holder->covered.n = 0;
        for (; a < bp->blocks.n && bp->blocks.v[a].start < hi; a++) {
            const cfg_block_t *bl = &bp->blocks.v[a];
            cfg_range_t *last = holder->covered.n ? &holder->covered.v[holder->covered.n - 1] : NULL;
            if (last != NULL && last->end == bl->start)
                last->end = bl->end;
            else
                holder->covered.v[holder->covered.n++] = (cfg_range_t) { bl->start, bl->end };
        }
        holder->covered_ver = bp->blocks_ver;
        holder->covered_lo = lo;
        holder->covered_hi = hi;
    }
    for (size_t k = 0; k < holder->covered.n; k++)
        QP_CHECK(CFG_VEC_PUSH(*v, ((span_t) { holder->covered.v[k].start, holder->covered.v[k].end })));
    return 0;
}

static int
cmp_span(const void *a, const void *b)
{
    const span_t *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* *TO = FROM's values, sorted. */
static int
sorted_copy(const cfg_u64_vec_t *from, cfg_u64_vec_t *to)
{
    to->n = 0;
    for (size_t i = 0; i < from->n; i++)
        QP_CHECK(CFG_VEC_PUSH(*to, from->v[i]));
    if (to->n > 1)
        qsort(to->v, to->n, sizeof(uint64_t), cfg_u64_cmp);
    return 0;
}

/* The runs of the holder at index I: its blocks', or its parent's when a fragment. */
static int
push_holder_spans(cfg_builder_t *b, size_t i, span_vec_t *v)
{
    cfg_bproc_t *bp = cfg_bproc_walk(b, i);
    if (!(bp->p.flags & CFG_PROC_FRAGMENT))
        return push_spans_in(bp, bp, bp->p.start, bp->p.end, v);
    uint32_t pi = cfg_proc_by_entry(b, bp->parent_entry);
    return pi != CFG_NONE ? push_spans_in(bp, cfg_bproc_at(b, pi), bp->p.start, bp->p.end, v)
                          : 0;
}

void
cfg_spans_dirty(cfg_builder_t *b, const cfg_bproc_t *bp)
{
    if (b->spans.valid && CFG_VEC_PUSH(b->spans.dirty, bp->p.entry) < 0)
        b->spans.valid = 0;
}

void
cfg_spans_cut(cfg_builder_t *b, const cfg_bproc_t *bp)
{
    if (b->spans.valid && bp->covered_hi > bp->covered_lo
        && CFG_VEC_PUSH(b->spans.cut, ((span_t) { bp->covered_lo, bp->covered_hi })) < 0)
        b->spans.valid = 0;
}

/* Append V[FROM, TO) to *OUT. */
static int
append_spans(span_vec_t *out, const span_t *v, size_t from, size_t to)
{
    if (to == from)
        return 0;
    QP_CHECK(CFG_VEC_FIT(*out, out->n + (to - from)));
    memcpy(out->v + out->n, v + from, (to - from) * sizeof(span_t));
    out->n += to - from;
    return 0;
}

/* Where the procedure at ENTRY had its runs when they were last collected, and its
 * extent now, into D (nothing when it is no more: cfg_spans_cut noted it). */
static int
push_dirty_proc(const cfg_builder_t *b, uint64_t entry, span_vec_t *d)
{
    uint32_t i = cfg_proc_by_entry(b, entry);
    if (i == CFG_NONE)
        return 0;
    const cfg_bproc_t *bp = cfg_bproc_at(b, i);
    if (bp->covered_hi > bp->covered_lo)
        QP_CHECK(CFG_VEC_PUSH(*d, ((span_t) { bp->covered_lo, bp->covered_hi })));
    uint64_t end = bp->p.end > bp->p.start ? bp->p.end : bp->p.start + 1;
    return CFG_VEC_PUSH(*d, ((span_t) { bp->p.start, end }));
}

static int
push_dirty_procs(const cfg_builder_t *b, const cfg_u64_vec_t *entries, span_vec_t *d)
{
    for (size_t k = 0; k < entries->n; k++)
        QP_CHECK(push_dirty_proc(b, entries->v[k], d));
    return 0;
}

/* R widened to the whole extents of the procedures it meets (extents are disjoint). */
static span_t
whole_extents(const cfg_builder_t *b, span_t r)
{
    size_t i = cfg_u64_lower_bound(b->entry.v, b->entry.n, r.start + 1);
    const cfg_bproc_t *bp = i > 0 ? cfg_bproc_at(b, i - 1) : NULL;
    if (bp != NULL && bp->p.start <= r.start && r.start < bp->p.end)
        r.start = bp->p.start;
    i = cfg_u64_lower_bound(b->entry.v, b->entry.n, r.end);
    bp = i > 0 ? cfg_bproc_at(b, i - 1) : NULL;
    if (bp != NULL && bp->p.start < r.end && r.end < bp->p.end)
        r.end = bp->p.end;
    return r;
}

/*
 * The addresses whose runs are to be collected again, in *D (sorted, disjoint, each
 * made of whole extents): where the procedures that changed or were dropped had runs
 * and lie now, and every fragment's (a parent's blocks may have changed under it);
 * everything when the notes are not to be trusted.
 */
static int
spans_dirty_ranges(const cfg_builder_t *b, span_vec_t *d)
{
    const cfg_spans_t *s = &b->spans;
    d->n = 0;
    if (!s->valid)
        return CFG_VEC_PUSH(*d, ((span_t) { 0, UINT64_MAX }));
    QP_CHECK(append_spans(d, s->cut.v, 0, s->cut.n));
    QP_CHECK(push_dirty_procs(b, &s->dirty, d));
    QP_CHECK(push_dirty_procs(b, &s->frags, d));
    QP_CHECK(push_dirty_procs(b, &b->frags, d));
    qsort(d->v, d->n, sizeof(span_t), cmp_span);
    size_t m = 0;
    for (size_t k = 0; k < d->n; k++) {
        span_t r = whole_extents(b, d->v[k]);
        if (m > 0 && r.start <= d->v[m - 1].end) {
            if (r.end > d->v[m - 1].end)
                d->v[m - 1].end = r.end;
        } else
            d->v[m++] = r;
    }
    d->n = m;
    return 0;
}

static void
spans_free(cfg_spans_t *s)
{
    CFG_VEC_FREE(s->runs);
    CFG_VEC_FREE(s->tmp);
    CFG_VEC_FREE(s->dirty);
    CFG_VEC_FREE(s->cut);
    CFG_VEC_FREE(s->frags);
    s->valid = 0;
}

/* opts.check_incremental: b->spans.runs against a walk of every procedure. */
static int
check_spans(cfg_builder_t *b)
{
    span_vec_t all = { 0 };
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < b->procs.n; i++)
        rc = push_holder_spans(b, i, &all);
    const span_vec_t *kept = &b->spans.runs;
    if (rc == 0 && (all.n != kept->n
                    || (all.n > 0 && memcmp(all.v, kept->v, all.n * sizeof(span_t)) != 0))) {
        if (b->opts.on_note != NULL)
            b->opts.on_note(b->opts.cb_arg, "gap sweep: the runs of blocks kept from the last "
                                            "sweep differ from those of every procedure");
        rc = QP_EINVAL;
    }
    CFG_VEC_FREE(all);
    return rc;
}

/*
 * Every block as a span in b->spans.runs, in address order without sorting:
 * procedures are in address order with disjoint extents; a fragment's blocks are its
 * parent's, within its extent. The runs of the last call are taken again outside the
 * ranges of spans_dirty_ranges (most of chromium's 670,000 procedures are the same from
 * one sweep to the next: walking them all was as long as a late sweep itself).
 */
static int
collect_spans(cfg_builder_t *b)
{
    cfg_spans_t *s = &b->spans;
    span_vec_t d = { 0 };
    int rc = spans_dirty_ranges(b, &d);
    const span_vec_t *old = &s->runs;
    span_vec_t *out = &s->tmp;
    size_t k = 0;
    out->n = 0;
    for (size_t r = 0; r < d.n && rc == 0; r++) {
        size_t from = k;
        while (k < old->n && old->v[k].start < d.v[r].start)
            k++;
        rc = append_spans(out, old->v, from, k);
        while (k < old->n && old->v[k].start < d.v[r].end)
            k++;
        size_t i = cfg_u64_lower_bound(b->entry.v, b->entry.n, d.v[r].start);
        for (; rc == 0 && i < b->procs.n && b->entry.v[i] < d.v[r].end; i++)
            rc = push_holder_spans(b, i, out);
    }
    if (rc == 0)
        rc = append_spans(out, old->v, k, old->n);
    span_vec_t t = s->runs;
    s->runs = s->tmp;
    s->tmp = t;
    s->dirty.n = s->cut.n = s->frags.n = 0;
    if (rc == 0)
        rc = sorted_copy(&b->frags, &s->frags);
    s->valid = rc == 0;
    CFG_VEC_FREE(d);
    return rc == 0 && b->opts.check_incremental ? check_spans(b) : rc;
}

/* Walk the uncovered parts of code sections; FN gets each gap. */
static int
for_each_gap(cfg_builder_t *b, const span_vec_t *v,
             int (*fn)(cfg_builder_t *b, uint64_t start, uint64_t end, void *arg), void *arg)
{
    const cfg_image_t *img = b->img;
    size_t k = 0;
    for (size_t i = 0; i < img->nsections; i++) {
        const cfg_section_t *s = &img->sections[i];
        if (!(s->flags & CFG_SEC_CODE) || s->bytes == NULL || !(s->flags & CFG_SEC_ALLOC))
            continue;
        uint64_t cur = s->vma, end = s->vma + s->size;
        while (k < v->n && v->v[k].end <= cur)
            k++;
        for (; k < v->n && v->v[k].start < end; k++) {
            if (v->v[k].start > cur)
                QP_CHECK(fn(b, cur, v->v[k].start, arg));
            if (v->v[k].end > cur)
                cur = v->v[k].end;
        }
        if (cur < end)
            QP_CHECK(fn(b, cur, end, arg));
    }
    return 0;
}

typedef struct gap_ctx {
    cfg_u64_vec_t rejected;   /* gap starts that proved not to be code, sorted */
    const span_vec_t *pad;    /* gaps that were all padding in the last sweep, sorted */
    span_vec_t pad_now;       /* ... and in this one, in the order met */
    size_t pad_at;            /* where the last look in `pad` ended */
    struct predecode *pd;     /* the gaps decoded ahead (sweep_gaps), or NULL */
} gap_ctx_t;

/* Was [START, END) a gap of nothing but padding in the last sweep (G->pad)? Gaps come
 * in address order (within a section): the search goes on from where the last ended. */
static int
gap_was_padding(gap_ctx_t *g, uint64_t start, uint64_t end)
{
    const span_t *v = g->pad->v;
    size_t n = g->pad->n, lo = g->pad_at, hi;
    if (lo > n || (lo > 0 && v[lo - 1].start >= start))
        lo = 0; /* (an earlier address: another section) */
    /* v[lo - 1].start < start: the first start >= START is in [lo, hi). */
    for (size_t step = 1;; step *= 2) {
        hi = lo + step;
        if (hi >= n) {
            hi = n;
            break;
        }
        if (v[hi - 1].start >= start)
            break;
        lo = hi;
    }
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (g->pad->v[mid].start < start)
            lo = mid + 1;
        else
            hi = mid;
    }
    g->pad_at = lo;
    return lo < g->pad->n && g->pad->v[lo].start == start && g->pad->v[lo].end == end;
}

static int
spans_sorted(const span_vec_t *v)
{
    for (size_t i = 1; i < v->n; i++)
        if (v->v[i - 1].start > v->v[i].start)
            return 0;
    return 1;
}

/*
 * The gaps a sweep will look at, decoded ahead on another thread while it runs: the
 * sweep builds the procedures it finds one at a time on the main thread (chromium's
 * first sweep 117,000 of them), and the builds' instructions are then in the image's
 * cache (cfg_image_decode), which keeps what any thread decoded. The cache only saves
 * decoding again: whatever the two threads do, the sweep's outcome is the same.
 */
typedef struct predecode {
    const cfg_image_t *img;
    span_vec_t gaps;          /* the gaps not known all padding, in the order met */
    atomic_size_t at;         /* how many of them the sweep has reached */
    atomic_int done;          /* the sweep is over: stop */
} predecode_t;

/* The sweep is at the next gap of PD's list (its only writer). */
static void
predecode_reached(predecode_t *pd)
{
    atomic_fetch_add_explicit(&pd->at, 1, memory_order_relaxed);
}

static int
on_gap_new_proc(cfg_builder_t *b, uint64_t start, uint64_t end, void *arg)
{
    gap_ctx_t *g = arg;
    size_t avail;
    const uint8_t *p = cfg_image_ptr(b->img, start, &avail);
    if (p == NULL)
        return 0;
    /* Most gaps are padding between procedures, and the same from sweep to sweep: the
     * bytes are decoded once. */
    if (gap_was_padding(g, start, end))
        return CFG_VEC_PUSH(g->pad_now, ((span_t) { start, end }));
    if (g->pd != NULL)
        predecode_reached(g->pd);
    size_t n = (size_t)(end - start) < avail ? (size_t)(end - start) : avail;
    size_t pad = cfg_padding_len(cfg_image_isa(b->img), p, n, start);
    if (pad >= n)
        return CFG_VEC_PUSH(g->pad_now, ((span_t) { start, end }));
    uint64_t a = start + pad;
    if (cfg_u64_contains(g->rejected.v, g->rejected.n, a))
        return 0;
    /* Sweep the gap: a procedure at its first code, then at the first code after what
     * that procedure reaches, and so on (seed 3.6: hidden procedures). */
    while (a < end) {
        if (cfg_proc_by_entry(b, a) != CFG_NONE)
            return 0;
        if (cfg_u64_contains(g->rejected.v, g->rejected.n, a))
            return 0;
        /* Unreached bytes inside a symbol's or FDE's range belong to that procedure. */
        uint32_t in = cfg_discover_find(b, a);
        if (in != CFG_NONE && cfg_discover_proc(b, in)->hint_end > a)
            return 0;
        QP_CHECK(CFG_VEC_PUSH(b->new_entries, a));
        QP_CHECK(CFG_VEC_PUSH(b->new_srcs, (uint32_t)CFG_SRC_GAP));
        QP_CHECK(cfg_discover_add_new(b));
        uint32_t pi = cfg_proc_by_entry(b, a);
        if (pi == CFG_NONE)
            return 0;
        cfg_bproc_t *bp = cfg_discover_proc(b, pi);
        /* Bounded by the gap: what lies beyond is known code already. */
        bp->limit_end = end;
        bp->p.end = cfg_discover_end(b, pi);
        if (bp->p.end > end)
            bp->p.end = end;
        bp->ranges.n = 0;
        QP_CHECK(CFG_VEC_PUSH(bp->ranges, ((cfg_range_t) { bp->p.start, bp->p.end })));
        bp->ranges_h = ranges_hash(bp);
        QP_CHECK(cfg_build_proc(b, &b->scratch[0], pi));
        cfg_note_built(b, pi);
        QP_CHECK(cfg_scratch_flush(b, &b->scratch[0]));
        bp = cfg_discover_proc(b, pi);
        if (bp->p.unsafe != NULL)
            return 0; /* not code: reject_bad_gap_procs drops it */
        uint64_t reach = a;
        for (size_t k = 0; k < bp->blocks.n; k++)
            if (bp->blocks.v[k].end > reach && bp->blocks.v[k].start < end)
                reach = bp->blocks.v[k].end;
        if (reach <= a || reach >= end)
            return 0;
        p = cfg_image_ptr(b->img, reach, &avail);
        if (p == NULL)
            return 0;
        n = (size_t)(end - reach) < avail ? (size_t)(end - reach) : avail;
        a = reach + cfg_padding_len(cfg_image_isa(b->img), p, n, reach);
    }
    return 0;
}

/* for_each_gap's callback that lists the gaps the sweep will decode. */
static int
on_gap_list(cfg_builder_t *b, uint64_t start, uint64_t end, void *arg)
{
    gap_ctx_t *g = arg;
    size_t avail;
    if (cfg_image_ptr(b->img, start, &avail) == NULL || gap_was_padding(g, start, end))
        return 0; /* (as on_gap_new_proc) */
    return CFG_VEC_PUSH(g->pd->gaps, ((span_t) { start, end }));
}

/* Decode gap K (qp_parallel_for's item) unless the sweep is there or past it: at each
 * byte that is not padding's 0x00 or int3, the instruction there, then the next. */
static int
predecode_gap(void *arg, unsigned worker, size_t k)
{
    predecode_t *pd = arg;
    (void)worker;
    uint64_t a = pd->gaps.v[k].start, end = pd->gaps.v[k].end;
    for (unsigned n = 0; a < end; n++) {
        if (n % 64 == 0
            && (atomic_load_explicit(&pd->done, memory_order_relaxed)
                || atomic_load_explicit(&pd->at, memory_order_relaxed) > k))
            return 0;
        size_t avail;
        const uint8_t *p = cfg_image_ptr(pd->img, a, &avail);
        if (p == NULL)
            return 0;
        arch_insn_t in;
        if (*p == 0x00 || *p == 0xcc || cfg_image_decode(pd->img, a, end, &in) < 0)
            a++;
        else
            a += in.len;
    }
    return 0;
}

typedef struct sweep_job {
    cfg_builder_t *b;
    const span_vec_t *spans;
    gap_ctx_t *g;
    int rc;
} sweep_job_t;

/* The sweep itself (qp_parallel_for_beside's serial step); then the decoder stops. */
static void
sweep_beside(void *arg)
{
    sweep_job_t *j = arg;
    j->rc = for_each_gap(j->b, j->spans, on_gap_new_proc, j->g);
    atomic_store_explicit(&j->g->pd->done, 1, memory_order_relaxed);
}

/* Sweep the gaps between SPANS for procedures (on_gap_new_proc), their code decoded
 * ahead on a second thread when there is one (the host's instructions only: the decode
 * cache keeps no other ISA's). */
static int
sweep_gaps(cfg_builder_t *b, const span_vec_t *spans, gap_ctx_t *g)
{
    if (b->nscratch < 2 || cfg_image_isa(b->img) != arch_isa_host())
        return for_each_gap(b, spans, on_gap_new_proc, g);
    predecode_t pd = { .img = b->img };
    atomic_init(&pd.at, 0);
    atomic_init(&pd.done, 0);
    g->pd = &pd;
    int rc = for_each_gap(b, spans, on_gap_list, g);
    g->pad_at = 0; /* (the list's walk moved it) */
    if (rc == 0 && pd.gaps.n == 0)
        g->pd = NULL;
    if (rc == 0) {
        sweep_job_t j = { b, spans, g, 0 };
        if (g->pd == NULL)
            rc = for_each_gap(b, spans, on_gap_new_proc, g);
        else if ((rc = qp_parallel_for_beside(2, pd.gaps.n, 1, predecode_gap, &pd,
                                              sweep_beside, &j)) == 0)
            rc = j.rc;
    }
    g->pd = NULL;
    CFG_VEC_FREE(pd.gaps);
    return rc;
}

typedef struct stat_ctx {
    cfg_stats_t *st;
    const cfg_prog_t *prog;   /* for the block before a gap */
    CFG_VEC(cfg_span_t) unreached;
} stat_ctx_t;

static int
on_gap_stats(cfg_builder_t *b, uint64_t start, uint64_t end, void *arg)
{
    stat_ctx_t *c = arg;
    size_t avail;
    const uint8_t *p = cfg_image_ptr(b->img, start, &avail);
    size_t n = (size_t)(end - start);
    size_t pad = 0;
    /* Padding may sit anywhere in the gap; count every padding run. */
    while (p != NULL && pad < n) {
        size_t run =
            cfg_padding_len(cfg_image_isa(b->img), p + pad, n - pad, start + pad);
        if (run == 0)
            break;
        pad += run;
    }
    if (p != NULL && pad == n) {
        c->st->padding_bytes += n;
        return 0;
    }
    /* Dead code: the rest of a procedure after a call that never returns (an epilogue
     * the compiler could not remove), decoded linearly up to a return or jump. */
    if (p != NULL && pad == 0 && c->prog != NULL) {
        uint32_t bi = cfg_block_at(c->prog, start - 1);
        const cfg_block_t *bl = bi == CFG_NONE ? NULL : &c->prog->blocks[bi];
        int after_noreturn = 0;
        for (uint32_t e = 0; bl != NULL && bl->end == start && e < bl->nsucc; e++)
            after_noreturn |= cfg_block_succ(c->prog, bl, e)->kind == CFG_EDGE_NORETURN
                && bl->last_kind == ARCH_KIND_CALL;
        size_t dead = 0;
        while (after_noreturn && dead < n) {
            arch_insn_t in;
            if (cfg_image_isa(b->img)->decode(p + dead, n - dead, start + dead, &in) < 0)
                break;
            dead += in.len;
            if (in.kind == ARCH_KIND_RET || in.kind == ARCH_KIND_JMP || in.kind == ARCH_KIND_HALT)
                break;
        }
        if (dead > 0 && dead <= n) {
            c->st->dead_bytes += dead;
            if (dead == n)
                return 0;
            return on_gap_stats(b, start + dead, end, arg);
        }
    }
    /* Trailing padding before the next procedure. */
    size_t tail = 0;
    const arch_isa_t *isa = cfg_image_isa(b->img);
    if (isa != arch_isa_host()) { /* whole instructions: nops, zero words */
        size_t al = isa->insn_align;
        while (p != NULL && tail + al <= n && (start + n - tail) % al == 0
               && isa->is_padding(p + n - tail - al, al))
            tail += al;
    }
    while (p != NULL && isa == arch_isa_host() && tail < n
           && (p[n - 1 - tail] == 0xcc || p[n - 1 - tail] == 0x00
               || p[n - 1 - tail] == 0x90))
        tail++;
    c->st->padding_bytes += pad + tail;
    c->st->data_bytes += n - pad - tail;
    return CFG_VEC_PUSH(c->unreached, ((cfg_span_t) { start + pad, end - tail }));
}

/* cfg_procs_drop's question for reject_bad_gap_procs: found only in a gap (perhaps
 * jumped to by code that is no better) and not code, noted in *ARG (rejected)? */
static int
is_bad_gap_proc(void *arg, const cfg_bproc_t *bp)
{
    if (!cfg_gap_only(bp) || bp->p.unsafe == NULL)
        return 0;
    cfg_u64_vec_t *rejected = arg;
    QP_CHECK(CFG_VEC_PUSH(*rejected, bp->p.entry));
    return 1;
}

/* Drop procedures found in gaps that turned out not to be code. */
static int
reject_bad_gap_procs(cfg_builder_t *b, cfg_u64_vec_t *rejected)
{
    /* Only builds make procedures unsafe, and sources are only ever added: none is
     * to be dropped unless a build made one found only in a gap unsafe. */
    if (!atomic_exchange_explicit(&b->unsafe_built, 0, memory_order_relaxed))
        return 0;
    int dropped = cfg_procs_drop(b, is_bad_gap_proc, rejected);
    return dropped < 0 ? dropped : dropped > 0;
}

/*****************************************************************************
 * Flattening into the program
 */

typedef struct prog_priv {
    CFG_VEC(char *) strings; /* names and reasons made up by the builder */
    uint32_t *by_addr;       /* block indices sorted by start address */
    qp_buckets_t buckets;    /* index_blocks': over by_addr, from the first block's start */
    cfg_held_cache_t held;   /* cfg_held_addrs, once asked */
} prog_priv_t;

cfg_held_cache_t *
cfg_prog_held_cache(const cfg_prog_t *prog)
{
    prog_priv_t *pp = prog->priv;
    return pp != NULL ? &pp->held : NULL;
}

/* Block X before block Y by address (then by index: the order is total). */
static int
block_before(const cfg_prog_t *prog, uint32_t x, uint32_t y)
{
    uint64_t sx = prog->blocks[x].start, sy = prog->blocks[y].start;
    return sx < sy || (sx == sy && x < y);
}

/*
 * One pass of sort_block_runs' merges, in pieces: piece K is the output positions
 * [lo, hi) of one pair of runs (or of an odd run out), so that one long merge is split
 * over the threads too. Blocks are distinct under block_before (a total order): the
 * first K blocks a merge puts out are the K least of both runs, found by a search.
 */
#define MERGE_PIECE ((size_t)1 << 15)

typedef struct merge_piece {
    size_t a, am, bm;         /* the pair: runs [a, am) and [am, bm) (am == bm: one run) */
    size_t lo, hi;            /* the output positions of the piece, from a */
} merge_piece_t;

typedef struct merge_pass {
    const cfg_prog_t *prog;
    const merge_piece_t *pieces;
    const uint32_t *from;
    uint32_t *to;
} merge_pass_t;

/* How many of the K first blocks of the merge of A (NA) and B (NB) come from A. */
static size_t
merge_split(const cfg_prog_t *prog, const uint32_t *a, size_t na, const uint32_t *b, size_t nb,
            size_t k)
{
    size_t lo = k > nb ? k - nb : 0, hi = k < na ? k : na;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (block_before(prog, a[mid], b[k - mid - 1]))
            lo = mid + 1; /* a[mid] is among the K first */
        else
            hi = mid;
    }
    return lo;
}

static int
merge_piece_task(void *arg, unsigned worker, size_t k)
{
    const merge_pass_t *m = arg;
    const merge_piece_t *pc = &m->pieces[k];
    const uint32_t *from = m->from, *x = from + pc->a, *y = from + pc->am;
    size_t nx = pc->am - pc->a, ny = pc->bm - pc->am;
    uint32_t *to = m->to + pc->a;
    (void)worker;
    size_t i = merge_split(m->prog, x, nx, y, ny, pc->lo), j = pc->lo - i;
    size_t ie = merge_split(m->prog, x, nx, y, ny, pc->hi), je = pc->hi - ie;
    size_t o = pc->lo;
    while (i < ie && j < je)
        to[o++] = block_before(m->prog, y[j], x[i]) ? y[j++] : x[i++];
    while (i < ie)
        to[o++] = x[i++];
    while (j < je)
        to[o++] = y[j++];
    return 0;
}

/*
 * Sort the N block indices V by address. They come as runs in address order, one per
 * procedure, nearly all in order one after the other (a procedure's cold fragments
 * break the order): runs are merged, pairwise, until one is left, each pass in pieces on
 * NTHREADS threads. TMP holds N.
 */
static void
sort_block_runs(const cfg_prog_t *prog, uint32_t *v, uint32_t *tmp, size_t n,
                unsigned nthreads)
{
    CFG_VEC(size_t) runs = { 0 };        /* run starts, then n */
    CFG_VEC(merge_piece_t) pieces = { 0 };
    for (size_t i = 0; i < n; i++)
        if ((i == 0 || !block_before(prog, v[i - 1], v[i])) && CFG_VEC_PUSH(runs, i) < 0)
            goto fallback;
    if (CFG_VEC_PUSH(runs, n) < 0)
        goto fallback;
    uint32_t *from = v, *to = tmp;
    while (runs.n > 2) {
        pieces.n = 0;
        size_t k = 0;
        for (size_t r = 0; r + 1 < runs.n; r += 2) {
            size_t a = runs.v[r], am = runs.v[r + 1], bm = r + 2 < runs.n ? runs.v[r + 2] : am;
            for (size_t lo = 0; lo < bm - a; lo += MERGE_PIECE) {
                size_t hi = bm - a - lo > MERGE_PIECE ? lo + MERGE_PIECE : bm - a;
                if (CFG_VEC_PUSH(pieces, ((merge_piece_t) { a, am, bm, lo, hi })) < 0)
                    goto fallback; /* (V holds every block: as this pass or the last left them) */
            }
            runs.v[k++] = a;
        }
        merge_pass_t m = { prog, pieces.v, from, to };
        /* (The pieces cannot fail.) */
        (void)qp_parallel_for(nthreads, pieces.n, pieces.n > 64 ? 8 : 1, merge_piece_task, &m,
                              NULL);
        runs.v[k++] = n;
        runs.n = k;
        uint32_t *t = from;
        from = to;
        to = t;
    }
    if (from != v)
        memcpy(v, from, n * sizeof(*v));
    CFG_VEC_FREE(runs);
    CFG_VEC_FREE(pieces);
    return;
fallback:
    /* Without memory for the runs: one element at a time (insertion). */
    CFG_VEC_FREE(runs);
    CFG_VEC_FREE(pieces);
    for (size_t i = 1; i < n; i++) {
        uint32_t x = v[i];
        size_t k = i;
        for (; k > 0 && block_before(prog, x, v[k - 1]); k--)
            v[k] = v[k - 1];
        v[k] = x;
    }
}

/*
 * Buckets for cfg_block_at over the blocks' last bytes: at[k] is the first position in
 * by_addr whose block ends above bucket k's start, so a lookup searches a few blocks
 * instead of all of them (the whole search reads two scattered cache lines a step:
 * chromium's millions of blocks made it a visible part of every phase that maps
 * addresses). Built only when the blocks do not overlap, which is what makes a bucket's
 * range certain to hold the answer (then the unique one, found by either search);
 * overlapping blocks keep the plain search.
 */
#define BLOCK_BUCKET_SHIFT 8

/* The last byte of the block at position I of by_addr (qp_bucket_key_fn). */
static uint64_t
block_last_byte(const void *ctx, size_t i)
{
    const cfg_prog_t *prog = ctx;
    const prog_priv_t *pp = prog->priv;
    return prog->blocks[pp->by_addr[i]].end - 1;
}

static int
index_blocks(cfg_prog_t *prog)
{
    prog_priv_t *pp = prog->priv;
    size_t n = prog->nblocks;
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        const cfg_block_t *bl = &prog->blocks[pp->by_addr[i]];
        if (bl->end < bl->start || bl->end == 0 /* no last byte */
            || (i > 0 && prog->blocks[pp->by_addr[i - 1]].end > bl->start))
            return 0;
    }
    return qp_buckets_build(&pp->buckets, prog->blocks[pp->by_addr[0]].start,
                            BLOCK_BUCKET_SHIFT, n, block_last_byte, prog) < 0
        ? QP_ENOMEM
        : 0;
}

/*
 * The flattening: each procedure's blocks, edges and tables copied into the program's
 * arrays at its own offsets (prefix sums of the counts), on the pool, and then its
 * predecessors. A procedure's edges go to its own blocks only, so all of it is the
 * procedure's own range of each array, and the result does not depend on the threads.
 * Until its copy, a procedure of the program holds its offsets: block in `block`, edge
 * in `nblocks`, table in `ntables` (no array for them at the analysis' peak of memory).
 */
typedef struct flat_ctx {
    cfg_builder_t *b;
    cfg_prog_t *prog;
    uint32_t *npred;           /* per procedure: its predecessors (first pass), then its
                                * first entry in prog->preds (second pass) */
    uint32_t *local_to_global; /* a procedure's local block K: at its first block + K */
} flat_ctx_t;

/* Copy procedure I into the program (entry block first, the rest in address order;
 * edges follow their block), counting its blocks' predecessors; the builder's copy is
 * freed. */
static int
flat_copy_task(void *arg, unsigned worker, size_t i)
{
    flat_ctx_t *f = arg;
    cfg_prog_t *prog = f->prog;
    prog_priv_t *pp = prog->priv;
    cfg_bproc_t *bp = cfg_bproc_at(f->b, i);
    cfg_proc_t *p = &prog->procs[i];
    uint32_t block = p->block, ne = p->nblocks, table = p->ntables; /* (the offsets) */
    uint32_t *l2g = f->local_to_global + block;
    (void)worker;
    *p = bp->p;
    p->block = block;
    p->nblocks = (uint32_t)bp->blocks.n;
    p->ntables = (uint32_t)bp->tables.n;
    if (p->flags & CFG_PROC_FRAGMENT)
        p->parent = cfg_proc_by_entry(f->b, bp->parent_entry);
    uint32_t g = block;
    if (bp->entry_block >= bp->blocks.n)
        bp->entry_block = CFG_NONE;
    if (bp->entry_block != CFG_NONE)
        l2g[bp->entry_block] = g++;
    for (uint32_t k = 0; k < bp->blocks.n; k++)
        if (k != bp->entry_block)
            l2g[k] = g++;
    uint32_t first_edge = ne;
    for (uint32_t n = 0; n < bp->blocks.n; n++) {
        uint32_t k = n;
        if (bp->entry_block != CFG_NONE)
            k = n == 0 ? bp->entry_block : (n <= bp->entry_block ? n - 1 : n);
        cfg_block_t bl = bp->blocks.v[k];
        bl.proc = (uint32_t)i;
        uint32_t first = ne;
        for (uint32_t e = 0; e < bl.nsucc; e++) {
            cfg_edge_t ed = bp->edges.v[bl.succ + e];
            ed.from = l2g[k];
            ed.to = ed.to == CFG_NONE ? CFG_NONE : l2g[ed.to];
            prog->edges[ne++] = ed;
        }
        bl.succ = first;
        prog->blocks[l2g[k]] = bl;
    }
    for (uint32_t k = 0; k < bp->blocks.n; k++) /* local blocks are in address order */
        pp->by_addr[block + k] = l2g[k];
    if (bp->tables.n > 0)
        memcpy(&prog->tables[table], bp->tables.v, bp->tables.n * sizeof(cfg_table_t));
    /* Predecessors counted (the sums make the next pass's offsets). */
    for (uint32_t e = first_edge; e < ne; e++)
        if (prog->edges[e].to != CFG_NONE)
            prog->blocks[prog->edges[e].to].npred++;
    uint32_t npred = 0;
    for (uint32_t k = block; k < g; k++)
        npred += prog->blocks[k].npred;
    f->npred[i] = npred;
    CFG_VEC_FREE(bp->blocks);
    CFG_VEC_FREE(bp->edges);
    return 0;
}

/* Predecessors of procedure I's blocks: a counting sort of its edges (those of its
 * blocks, in order) by destination, from its offset in prog->preds. */
static int
flat_preds_task(void *arg, unsigned worker, size_t i)
{
    flat_ctx_t *f = arg;
    cfg_prog_t *prog = f->prog;
    const cfg_proc_t *p = &prog->procs[i];
    (void)worker;
    uint32_t acc = f->npred[i];
    for (uint32_t k = p->block; k < p->block + p->nblocks; k++) {
        prog->blocks[k].pred = acc;
        acc += prog->blocks[k].npred;
        prog->blocks[k].npred = 0;
    }
    for (uint32_t k = p->block; k < p->block + p->nblocks; k++) {
        const cfg_block_t *bl = &prog->blocks[k];
        for (uint32_t e = bl->succ; e < bl->succ + bl->nsucc; e++) {
            uint32_t to = prog->edges[e].to;
            if (to != CFG_NONE)
                prog->preds[prog->blocks[to].pred + prog->blocks[to].npred++] = e;
        }
    }
    return 0;
}

static int
flatten(cfg_builder_t *b, cfg_prog_t *prog)
{
    size_t np = b->procs.n, nb = 0, ne = 0, nt = 0;
    prog->procs = calloc(np + 1, sizeof(cfg_proc_t));
    if (prog->procs == NULL)
        return QP_ENOMEM;
    for (size_t i = 0; i < np; i++) {
        prog->procs[i].block = (uint32_t)nb;
        prog->procs[i].nblocks = (uint32_t)ne;
        prog->procs[i].ntables = (uint32_t)nt;
        nb += cfg_bproc_at(b, i)->blocks.n;
        ne += cfg_bproc_at(b, i)->edges.n;
        nt += cfg_bproc_at(b, i)->tables.n;
    }
    /* Every block and edge is written below: only the spare last ones need zeroing
     * (calloc would clear hundreds of megabytes of chromium's for nothing). */
    prog->blocks = malloc((nb + 1) * sizeof(cfg_block_t));
    prog->edges = malloc((ne + 1) * sizeof(cfg_edge_t));
    if (prog->blocks != NULL)
        memset(&prog->blocks[nb], 0, sizeof(cfg_block_t));
    if (prog->edges != NULL)
        memset(&prog->edges[ne], 0, sizeof(cfg_edge_t));
    prog->preds = calloc(ne + 1, sizeof(uint32_t));
    prog->tables = calloc(nt + 1, sizeof(cfg_table_t));
    uint32_t *local_to_global = malloc((nb + 1) * sizeof(uint32_t));
    uint32_t *npred = malloc((np + 1) * sizeof(uint32_t));
    prog_priv_t *pp = prog->priv;
    pp->by_addr = malloc((nb + 1) * sizeof(uint32_t));
    if (!prog->blocks || !prog->edges || !prog->preds || !prog->tables
        || local_to_global == NULL || npred == NULL || pp->by_addr == NULL) {
        free(npred);
        free(local_to_global);
        return QP_ENOMEM;
    }
    flat_ctx_t f = { b, prog, npred, local_to_global };
    cfg_discover_freeze(b, 1); /* (the copies look fragments' parents up at once) */
    int rc = qp_parallel_for(b->nscratch, np, 64, flat_copy_task, &f, NULL);
    cfg_discover_freeze(b, 0);
    prog->nprocs = (uint32_t)np;
    prog->nblocks = (uint32_t)nb;
    prog->nedges = (uint32_t)ne;
    prog->ntables = (uint32_t)nt;
    if (rc == 0) {
        uint32_t acc = 0;
        for (size_t i = 0; i < np; i++) {
            uint32_t n = npred[i];
            npred[i] = acc;
            acc += n;
        }
        rc = qp_parallel_for(b->nscratch, np, 64, flat_preds_task, &f, NULL);
    }
    free(npred);
    if (rc < 0) {
        free(local_to_global);
        return rc;
    }
    /* Block lookup by address (local_to_global is scratch enough). */
    sort_block_runs(prog, pp->by_addr, local_to_global, prog->nblocks, b->nscratch);
    free(local_to_global);
    return index_blocks(prog);
}

/*****************************************************************************
 * Statistics and final marks
 */

/*
 * Other procedures that jump into a procedure's interior (hand-written assembly such as
 * glibc's mempcpy jumping into memcpy) give it extra entries: they start blocks, and
 * traversal starts there too. Direct jumps are retargeted through the global old-to-new
 * map, so such entries need no redirect in the old text. Returns how many were new.
 */
static int
collect_interior_entries(cfg_builder_t *b)
{
    int added = 0;
    for (size_t i = 0; i < b->procs.n; i++) {
        const cfg_bproc_t *bp = cfg_bproc_at(b, i);
        for (size_t e = 0; bp->ntail > 0 && e < bp->edges.n; e++) {
            const cfg_edge_t *ed = &bp->edges.v[e];
            if (ed->kind != CFG_EDGE_TAILCALL || ed->target == 0)
                continue;
            uint32_t ti = cfg_discover_find(b, ed->target);
            if (ti == CFG_NONE || cfg_bproc_at(b, ti)->p.entry == ed->target)
                continue;
            if (cfg_bproc_at(b, ti)->p.flags & CFG_PROC_FRAGMENT)
                ti = cfg_proc_by_entry(b, cfg_bproc_at(b, ti)->parent_entry);
            if (ti == CFG_NONE || ti == i)
                continue;
            cfg_bproc_t *tp = cfg_bproc_at(b, ti);
            int known = 0;
            for (size_t k = 0; k < tp->extra_entries.n && !known; k++)
                known = tp->extra_entries.v[k] == ed->target;
            if (known)
                continue;
            QP_CHECK(CFG_VEC_PUSH(tp->extra_entries, ed->target));
            tp->p.flags |= CFG_PROC_MULTI_ENTRY;
            cfg_mark_unbuilt(b, tp);
            if (tp->p.flags & CFG_PROC_FRAGMENT)
                b->ranges_done = 0; /* assign_ranges marks it built (it has no blocks) */
            added++;
        }
    }
    return added;
}

/* An extra entry that does not start a block (it lies inside an instruction) is unsafe. */
static int
check_extra_entries(cfg_builder_t *b)
{
    for (size_t i = 0; i < b->procs.n; i++) {
        cfg_bproc_t *bp = cfg_bproc_at(b, i);
        for (size_t k = 0; k < bp->extra_entries.n; k++) {
            uint64_t a = bp->extra_entries.v[k];
            uint32_t bl = cfg_local_block_at(bp, a);
            if (bl == CFG_NONE || bp->blocks.v[bl].start != a)
                QP_CHECK(cfg_set_unsafe(&b->strings, bp, "entered at 0x%llx, not an instruction boundary",
                                    (unsigned long long)a));
        }
    }
    return 0;
}

/*
 * Code whose entry lies inside an instruction that the code before it runs (that code's
 * range ends there, cutting the instruction: cfg_trav.c) is unsafe too. Moved, its
 * entry's redirect would overwrite the bytes of an instruction of code that stays, which
 * runs on through them. One of the two is no code at all, and the analysis cannot say which
 * (chromium 156: a procedure at 0x5b85964, noted by a call decoded inside a `movq`).
 */
static int
check_entries_inside_insns(cfg_builder_t *b)
{
    for (size_t i = 0; i < b->procs.n; i++) {
        const cfg_bproc_t *bp = cfg_bproc_at(b, i);
        uint32_t q = bp->runs_into != 0 ? cfg_proc_by_entry(b, bp->runs_into) : CFG_NONE;
        if (q != CFG_NONE)
            QP_CHECK(cfg_set_unsafe(&b->strings, cfg_discover_proc(b, q),
                "its entry lies inside an instruction of the code at 0x%llx before it",
                (unsigned long long)bp->p.entry));
    }
    return 0;
}

static int
compute_stats(cfg_builder_t *b, cfg_prog_t *prog)
{
    cfg_stats_t *st = &prog->stats;
    const cfg_image_t *img = b->img;
    for (size_t i = 0; i < img->nsections; i++)
        if ((img->sections[i].flags & CFG_SEC_CODE) && img->sections[i].bytes
            && (img->sections[i].flags & CFG_SEC_ALLOC))
            st->text_bytes += img->sections[i].size;
    for (uint32_t k = 0; k < prog->nblocks; k++) {
        st->block_bytes += prog->blocks[k].end - prog->blocks[k].start;
        st->ninsns += prog->blocks[k].ninsns;
        if (prog->blocks[k].last_kind == ARCH_KIND_JMP_IND) {
            const cfg_edge_t *e = &prog->edges[prog->blocks[k].succ];
            if (prog->blocks[k].nsucc == 0)
                continue;
            if (e->kind == CFG_EDGE_TAILCALL)
                st->nind_tailcalls++;
            else {
                st->nind_jumps++;
                if (e->kind != CFG_EDGE_UNRESOLVED)
                    st->nind_resolved++;
            }
        }
    }
    for (uint32_t i = 0; i < prog->nprocs; i++) {
        const cfg_proc_t *p = &prog->procs[i];
        if (p->unsafe != NULL)
            st->nunsafe++;
        for (int s = 0; s < CFG_NSRC; s++)
            if (p->sources & (1u << s))
                st->nprocs_by_src[s]++;
    }
    /* The blocks as spans, adjacent ones of a section as one (the gaps are the same). */
    span_vec_t v = { 0 };
    const prog_priv_t *pp = prog->priv;
    const cfg_section_t *sec = NULL; /* the section of the last span's start */
    int rc = 0;
    for (uint32_t k = 0; k < prog->nblocks && rc == 0; k++) {
        const cfg_block_t *bl = &prog->blocks[pp->by_addr[k]];
        span_t *last = v.n > 0 ? &v.v[v.n - 1] : NULL;
        if (last != NULL && last->end == bl->start && sec != NULL && bl->start > sec->vma
            && bl->start < sec->vma + sec->size) {
            last->end = bl->end;
            continue;
        }
        sec = cfg_image_section_at(b->img, bl->start);
        rc = CFG_VEC_PUSH(v, ((span_t) { bl->start, bl->end }));
    }
    stat_ctx_t c = { st, prog, { 0 } };
    if (rc == 0)
        rc = for_each_gap(b, &v, on_gap_stats, &c);
    CFG_VEC_FREE(v);
    prog->unreached = c.unreached.v;
    prog->nunreached = (uint32_t)c.unreached.n;
    return rc;
}

/*****************************************************************************
 * The driver loop
 */

static void
builder_free(cfg_builder_t *b)
{
    cfg_bpool_free(b);
    CFG_VEC_FREE(b->addr_taken);
    CFG_VEC_FREE(b->new_entries);
    CFG_VEC_FREE(b->new_srcs);
    CFG_VEC_FREE(b->rejected);
    CFG_VEC_FREE(b->landing_pads);
    CFG_VEC_FREE(b->unbuilt);
    CFG_VEC_FREE(b->frags);
    CFG_VEC_FREE(b->parents);
    CFG_VEC_FREE(b->nr_dirty);
    CFG_VEC_FREE(b->plt_held);
    spans_free(&b->spans);
    cfg_nr_deps_free(b->nr);
    b->nr = NULL;
    for (size_t i = 0; i < b->strings.n; i++)
        free(b->strings.v[i]);
    CFG_VEC_FREE(b->strings);
    for (unsigned w = 0; b->scratch != NULL && w < b->nscratch; w++)
        cfg_scratch_free(&b->scratch[w]);
    free(b->scratch);
}

/* Is ED the way on after a call that ends its procedure (a tail call into the next)? */
static int
after_call(const cfg_bproc_t *bp, const cfg_edge_t *ed)
{
    uint8_t k = bp->blocks.v[ed->from].last_kind;
    return k == ARCH_KIND_CALL || k == ARCH_KIND_CALL_IND;
}

/* Does procedure BP's CFG, as built, have a block at ADDR? */
static int
has_block_at(const cfg_bproc_t *bp, uint64_t addr)
{
    for (size_t k = 0; k < bp->blocks.n; k++)
        if (bp->blocks.v[k].start == addr)
            return 1;
    return 0;
}

/* cfg_procs_drop's question for tie_nameless_fragments: a procedure found only in a gap
 * inside the FDE range of the fragment before it (*ARG: where the last fragment's
 * range ends)? */
static int
is_in_tied_fragment(void *arg, const cfg_bproc_t *bp)
{
    uint64_t *cut_end = arg;
    if (bp->p.flags & CFG_PROC_FRAGMENT)
        *cut_end = bp->hint_end ? bp->hint_end : bp->p.end;
    else if (bp->p.sources == CFG_SRC_GAP && bp->p.entry < *cut_end)
        return 1;
    return 0;
}

/*
 * Stripped binaries have no "foo.cold" names: a nameless procedure that is never called
 * nor address-taken, that is entered only by jumps from one procedure P, and that
 * jumps back into P or never returns, is P's cold fragment. P is no fragment itself, nor
 * becoming one this round: a fragment's fragment is not built with the blocks of the
 * root. A tie holds only while P's CFG, built with the fragment, reaches the fragment's
 * start: a start that P does not reach is reached some other way (a pointer in data,
 * which a program that is not position independent holds without a relocation), and it
 * is a procedure; left tied, its head would stay in place, unreached, while the rest
 * moved with P. Such a procedure is never tied again. UNTIE_ONLY: undo ties that do not
 * hold, tie nothing. Returns the number tied or untied.
 */
static int
tie_nameless_fragments(cfg_builder_t *b, int untie_only)
{
    const uint32_t not_fragment = CFG_SRC_SYMBOL | CFG_SRC_CALL | CFG_SRC_ENTRY | CFG_SRC_INIT
        | CFG_SRC_PLT | CFG_SRC_ADDR | CFG_SRC_SECTION;
    size_t n = b->procs.n;
    int changed = 0;
    for (size_t i = 0; i < n; i++) {
        cfg_bproc_t *fp = cfg_bproc_walk(b, i);
        if (!fp->tied_nameless)
            continue;
        uint32_t pi = cfg_proc_by_entry(b, fp->parent_entry);
        const cfg_bproc_t *pp = pi != CFG_NONE ? cfg_discover_proc(b, pi) : NULL;
        fp->never_tie |= pp != NULL && pp->built && !(pp->p.flags & CFG_PROC_FRAGMENT)
            && !has_block_at(pp, fp->p.entry);
        if ((fp->p.sources & not_fragment) || fp->never_tie || pp == NULL
            || (pp->p.flags & CFG_PROC_FRAGMENT)) {
            fp->p.flags &= ~(uint32_t)CFG_PROC_FRAGMENT;
            fp->tied_nameless = 0;
            if (pi != CFG_NONE && pi < b->procs.n)
                cfg_mark_unbuilt(b, cfg_bproc_at(b, pi)); /* without the fragment's
                                                           * blocks */
            cfg_mark_unbuilt(b, fp);
            cfg_mark_nr_dirty(b, fp);
            b->gen++;
            changed++;
        }
    }
    if (untie_only) {
        if (changed)
            QP_CHECK(cfg_list_fragments(b));
        return changed;
    }
    uint32_t *from = malloc((n + 1) * sizeof(uint32_t)); /* sole jumping proc, or NONE */
    uint8_t *many = calloc(n + 1, 1);                    /* jumped to from several */
    uint32_t *cand = malloc((n + 1) * sizeof(uint32_t)); /* the parent to tie to, or NONE */
    if (from == NULL || many == NULL || cand == NULL) {
        free(from);
        free(many);
        free(cand);
        return QP_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        from[i] = CFG_NONE;
    for (size_t i = 0; i < n; i++) {
        const cfg_bproc_t *bp = cfg_bproc_walk(b, i);
        for (size_t e = 0; bp->ntail > 0 && e < bp->edges.n; e++) {
            const cfg_edge_t *ed = &bp->edges.v[e];
            /* (A call's way on into the next procedure is no jump to a fragment.) */
            if (ed->kind != CFG_EDGE_TAILCALL || ed->target == 0 || after_call(bp, ed))
                continue;
            uint32_t ti = cfg_discover_find(b, ed->target);
            if (ti == CFG_NONE || ti == i)
                continue;
            /* Jumps between pieces of one FDE range do not count. */
            const cfg_bproc_t *tp = cfg_bproc_at(b, ti);
            uint32_t head = ti;
            while (head > 0 && (tp->p.sources & CFG_SRC_GAP) && !(tp->p.sources & CFG_SRC_EH_FRAME))
                tp = cfg_bproc_at(b, --head);
            uint64_t hend = tp->hint_end ? tp->hint_end : tp->p.end;
            if (ed->target >= hend) {
                head = ti;
                tp = cfg_bproc_at(b, ti);
                hend = tp->hint_end ? tp->hint_end : tp->p.end;
            }
            if (bp->p.entry >= tp->p.entry && bp->p.entry < hend)
                continue;
            if (from[head] == CFG_NONE)
                from[head] = (uint32_t)i;
            else if (from[head] != i)
                many[head] = 1;
        }
    }
    for (size_t f = 0; f < n; f++) {
        cfg_bproc_t *fp = cfg_bproc_walk(b, f);
        cand[f] = CFG_NONE;
        if (from[f] == CFG_NONE || many[f] || (fp->p.sources & not_fragment) || fp->never_tie
            || (fp->p.flags & CFG_PROC_FRAGMENT) || !(fp->p.sources & CFG_SRC_EH_FRAME))
            continue;
        const cfg_bproc_t *pp = cfg_bproc_at(b, from[f]);
        if (pp->p.flags & CFG_PROC_FRAGMENT)
            continue;
        /* Does the fragment jump back into P, or never return? */
        int back = 0, returns = 0;
        uint64_t fend = fp->hint_end ? fp->hint_end : fp->p.end;
        for (size_t k = f; k < n && cfg_bproc_at(b, k)->p.entry < fend; k++)
            for (size_t e = 0; e < cfg_bproc_at(b, k)->edges.n; e++) {
                const cfg_edge_t *ed = &cfg_bproc_at(b, k)->edges.v[e];
                returns |= ed->kind == CFG_EDGE_RETURN;
                back |= ed->kind == CFG_EDGE_TAILCALL && ed->target >= pp->p.start
                    && ed->target < pp->p.end && !after_call(cfg_bproc_at(b, k), ed);
            }
        if (!back && returns)
            continue;
        cand[f] = from[f];
    }
    int tied = 0;
    for (size_t f = 0; f < n; f++) {
        /* (Of two that only jump to each other, the first is tied: the cold part comes
         * first in GNU ld's layout, and a wrong guess does not hold.) */
        if (cand[f] == CFG_NONE || (cand[cand[f]] != CFG_NONE && !(cand[cand[f]] == f && f < cand[f])))
            continue;
        cfg_bproc_t *fp = cfg_bproc_at(b, f);
        const cfg_bproc_t *pp = cfg_bproc_at(b, cand[f]);
        fp->p.flags |= CFG_PROC_FRAGMENT;
        fp->parent_entry = pp->p.entry;
        fp->tied_nameless = 1;
        cfg_mark_nr_dirty(b, fp);
        b->gen++;
        tied++;
    }
    free(from);
    free(many);
    free(cand);
    QP_CHECK(cfg_list_fragments(b));
    if (!tied)
        return changed;
    /* Gap procedures inside a tied fragment's FDE range are part of it. */
    uint64_t cut_end = 0;
    QP_CHECK(cfg_procs_drop(b, is_in_tied_fragment, &cut_end));
    return tied + changed;
}


/*
 * Build every procedure that is not current, then find procedures that never return and
 * code in gaps, until nothing changes. Work is only redone where something changed.
 */
/*
 * Would a call of BP that returns to NEXT get anything but a "never returns" edge, were
 * BP built again with its callee returning? Yes when NEXT is in BP's ranges (the code
 * there is traversed) or a procedure starts after the padding there (a tail call to it,
 * see edge_to_next). No: the call ends the procedure's code and nothing follows, and
 * building it again would give the same edge (the compiler knew the call never returns
 * there).
 */
static int
return_site_used(const cfg_builder_t *b, const cfg_bproc_t *bp, uint64_t next)
{
    if (cfg_slot(bp, next) >= 0)
        return 1;
    size_t avail;
    const uint8_t *p = cfg_image_ptr(b->img, next, &avail);
    uint64_t after =
        next + (p ? cfg_padding_len(cfg_image_isa(b->img), p, avail < 32 ? avail : 32, next)
                  : 0);
    return cfg_proc_by_entry(b, after) != CFG_NONE;
}

/*
 * Mark BP to be built again when one of its "never returns" calls goes to a callee
 * that may return (see rebuild_stale_noreturn_callers); 1 when marked. NORET: the
 * entries of the procedures that never return (sorted), most callees: one look there
 * instead of a search of the procedures.
 */
/*
 * A walk's answers of "is CALLEE in NORET" (rebuild_if_stale), by CALLEE's hash: most
 * "never returns" calls go to a few callees (abort, __stack_chk_fail, the throw
 * helpers), where each site searched all of NORET. Key 0: empty (a site's callee is
 * never 0).
 */
#define NORET_MEMO_BITS 12
typedef struct noret_memo {
    const cfg_u64_vec_t *noret;
    uint64_t key[1u << NORET_MEMO_BITS];
    uint8_t in[1u << NORET_MEMO_BITS];
} noret_memo_t;

static int
noret_has(noret_memo_t *m, uint64_t callee)
{
    size_t h = (size_t)((callee * 0x9e3779b97f4a7c15ull) >> (64 - NORET_MEMO_BITS));
    if (m->key[h] != callee) {
        m->key[h] = callee;
        m->in[h] = (uint8_t)cfg_u64_contains(m->noret->v, m->noret->n, callee);
    }
    return m->in[h];
}

static size_t
rebuild_if_stale(cfg_builder_t *b, cfg_bproc_t *bp, noret_memo_t *noret)
{
    for (size_t s = 0; s < bp->noret_sites.n; s++) {
        const cfg_noret_site_t *ns = &bp->noret_sites.v[s];
        if (noret_has(noret, ns->callee))
            continue; /* never returns still */
        uint32_t c = cfg_proc_by_entry(b, ns->callee);
        if (c != CFG_NONE && !(cfg_bproc_at(b, c)->p.flags & CFG_PROC_NORETURN)
            && return_site_used(b, bp, ns->ret)) {
            cfg_mark_unbuilt(b, bp);
            if (bp->p.flags & CFG_PROC_FRAGMENT)
                b->ranges_done = 0; /* see assign_ranges */
            return 1;
        }
    }
    return 0;
}

/*
 * Procedures with a "never returns" call to a callee that the last fixpoint says may
 * return: marked to be built again. Their call then gets its return edge (or a tail call
 * into the next procedure, when nothing follows it). NORET: the entries of the procedures
 * that never return (noreturn_and_prune), sorted. Returns how many.
 */
static size_t
rebuild_stale_noreturn_callers(cfg_builder_t *b, const cfg_u64_vec_t *noret)
{
    noret_memo_t memo; /* (36 KiB) */
    memo.noret = noret;
    memset(memo.key, 0, sizeof(memo.key));
    size_t n = 0;
    for (size_t i = 0; i < b->procs.n; i++) {
        cfg_bproc_prefetch_sites(b, i + 2 * CFG_WALK_AHEAD, i + CFG_WALK_AHEAD);
        n += rebuild_if_stale(b, cfg_bproc_at(b, i), &memo);
    }
    return n;
}

/*
 * What a stale round (see build_all) may change: every procedure's flags and "may
 * return", and what it builds again. A round that changes none of it leaves the state
 * as it found it, so the rounds after it would do the same again, to no effect.
 */
typedef struct stale_snap {
    size_t n;                 /* b->procs.n */
    CFG_VEC(uint32_t) flags;  /* per procedure: p.flags */
    CFG_VEC(uint8_t) mayret;  /* per procedure: "may return" (cfg_nr_may_return) */
    CFG_VEC(uint8_t) bytes;   /* the procedures to be built again: their blocks, edges */
} stale_snap_t;

static int
snap_push(stale_snap_t *sn, const void *p, size_t len)
{
    QP_CHECK(cfg_vec_grow((void **)&sn->bytes.v, &sn->bytes.cap, sn->bytes.n + len, 1));
    memcpy(sn->bytes.v + sn->bytes.n, p, len);
    sn->bytes.n += len;
    return 0;
}

/* Append what can change of procedure I (one to be built again). */
static int
snap_proc(const cfg_builder_t *b, size_t i, stale_snap_t *sn)
{
    const cfg_bproc_t *bp = cfg_bproc_at(b, i);
    size_t u = bp->p.unsafe ? strlen(bp->p.unsafe) + 1 : 0;
    size_t head[4] = { i, bp->blocks.n, bp->edges.n, u };
    QP_CHECK(snap_push(sn, head, sizeof(head)));
    QP_CHECK(snap_push(sn, bp->blocks.v, bp->blocks.n * sizeof(cfg_block_t)));
    QP_CHECK(snap_push(sn, bp->edges.v, bp->edges.n * sizeof(cfg_edge_t)));
    QP_CHECK(snap_push(sn, &bp->entry_block, sizeof(bp->entry_block)));
    QP_CHECK(snap_push(sn, &bp->p.nind_unresolved, sizeof(bp->p.nind_unresolved)));
    if (u > 0)
        QP_CHECK(snap_push(sn, bp->p.unsafe, u));
    return 0;
}

/* Take SN of B, whose procedures to be built again are marked. */
static int
snap_take(const cfg_builder_t *b, stale_snap_t *sn)
{
    sn->n = b->procs.n;
    sn->flags.n = sn->mayret.n = sn->bytes.n = 0;
    for (size_t i = 0; i < b->procs.n; i++) {
        QP_CHECK(CFG_VEC_PUSH(sn->flags, cfg_bproc_walk(b, i)->p.flags));
        QP_CHECK(CFG_VEC_PUSH(sn->mayret, (uint8_t)cfg_nr_may_return(b, i)));
        if (!cfg_bproc_at(b, i)->built)
            QP_CHECK(snap_proc(b, i, sn));
    }
    return 0;
}

/*
 * Is B as SN found it (the procedures SN marked now built again)? 1 yes, 0 no (or not
 * sure: padding bytes may differ), QP_ENOMEM.
 */
static int
snap_same(const cfg_builder_t *b, const stale_snap_t *sn)
{
    if (b->procs.n != sn->n)
        return 0;
    for (size_t i = 0; i < sn->n; i++)
        if (cfg_bproc_at(b, i)->p.flags != sn->flags.v[i]
            || cfg_nr_may_return(b, i) != sn->mayret.v[i])
            return 0;
    /* The same procedures, as they are now. */
    stale_snap_t now = { 0 };
    size_t at = 0;
    int rc = 0, same = 1;
    while (at < sn->bytes.n && rc == 0 && same) {
        size_t head[4];
        memcpy(head, sn->bytes.v + at, sizeof(head));
        now.bytes.n = 0;
        rc = snap_proc(b, head[0], &now);
        size_t len = now.bytes.n;
        same = rc == 0 && at + len <= sn->bytes.n && memcmp(now.bytes.v, sn->bytes.v + at, len) == 0;
        at += len;
    }
    CFG_VEC_FREE(now.bytes);
    return rc < 0 ? rc : same;
}

/*
 * The procedures not built, in *TODO (in order): those marked since the last round
 * (b->unbuilt, emptied), or every procedure looked at when one could not be noted.
 */
static int
unbuilt_procs(cfg_builder_t *b, idx_vec_t *todo)
{
    todo->n = 0;
    if (b->unbuilt_lost) {
        for (size_t i = 0; i < b->procs.n; i++)
            if (!cfg_bproc_at(b, i)->built)
                QP_CHECK(CFG_VEC_PUSH(*todo, (uint32_t)i));
    } else {
        QP_CHECK(idx_push_entries(b, todo, &b->unbuilt));
        idx_sort_unique(todo);
        size_t k = 0;
        for (size_t j = 0; j < todo->n; j++)
            if (!cfg_bproc_at(b, todo->v[j])->built)
                todo->v[k++] = todo->v[j];
        todo->n = k;
    }
    b->unbuilt.n = 0;
    b->unbuilt_lost = 0;
    return 0;
}

/*
 * PAD_GAPS: the gaps that were all padding in the last sweep, kept from one call to the
 * next (the sweeps after ties of fragments see most of the same gaps: the first sweep
 * of each call decoded them all again, 0.3 s of chromium's main thread a call at load
 * 16).
 */
static int
build_all(cfg_builder_t *b, span_vec_t *pad_gaps)
{
    cfg_u64_vec_t noret = { 0 }; /* procedures that never return (noreturn_and_prune) */
    idx_vec_t todo = { 0 };
    int rc = 0, gap_rounds = 0, stale_rounds = 0, in_stale = 0;
    stale_snap_t snap = { 0 };
    size_t built = 0;
    for (int round = 0; round < 64; round++) {
        DBG_PHASE("round");
        if ((rc = assign_ranges(b)) < 0)
            break;
        if ((rc = unbuilt_procs(b, &todo)) < 0)
            break;
        if (rc == 0 && todo.n > 0)
            rc = cfg_build_round(b, todo.v, todo.n);
        built += todo.n;
        if (rc < 0)
            break;
        if ((rc = cfg_discover_add_new(b)) < 0)
            break;
        if (rc > 0)
            continue; /* new call targets: extents changed */
        if ((rc = reject_bad_gap_procs(b, &b->rejected)) < 0)
            break;
        if (rc > 0)
            continue;
        rc = 0;
        if (built == 0)
            break; /* nothing changed since the last fixpoint and gap scan */
        DBG_PHASE("built");
        if ((rc = cfg_nr_noreturn_and_prune(b, &noret)) < 0)
            break;
        rc = 0;
        built = 0;
        DBG_PHASE("noreturn");
        /* A stale round that changed nothing: the next ones would repeat it (they are
         * counted as if they ran). */
        if (in_stale && (rc = snap_same(b, &snap)) != 0) {
            if (rc < 0)
                break;
            round += 4 - stale_rounds;
            stale_rounds = 4;
            if (round >= 64)
                break; /* where the rounds would have stopped */
        }
        rc = in_stale = 0;
        /* Callers built while a callee seemed never to return, which returns after all:
         * built again, the code after the call now traversed (a few times at most). */
        if (stale_rounds < 4 && rebuild_stale_noreturn_callers(b, &noret) > 0) {
            stale_rounds++;
            built = 1;
            if (stale_rounds < 4) {
                if ((rc = snap_take(b, &snap)) < 0)
                    break;
                in_stale = 1;
            }
            continue;
        }
        DBG_PHASE("stale walk");
        if (b->opts.no_gap_procs || ++gap_rounds > 6)
            break;
        gap_ctx_t g = { { 0 }, pad_gaps, { 0 }, 0, NULL };
        size_t before = b->procs.n;
        if ((rc = collect_spans(b)) < 0 || (rc = sorted_copy(&b->rejected, &g.rejected)) < 0
            || (rc = cfg_discover_sweep_begin(b)) < 0) {
            CFG_VEC_FREE(g.rejected);
            break;
        }
        DBG_PHASE("spans");
        rc = sweep_gaps(b, &b->spans.runs, &g);
        int merged = cfg_discover_sweep_end(b);
        CFG_VEC_FREE(g.rejected);
        CFG_VEC_FREE(*pad_gaps);
        *pad_gaps = g.pad_now;
        if (!spans_sorted(pad_gaps)) /* (met in address order but for the sections') */
            qsort(pad_gaps->v, pad_gaps->n, sizeof(span_t), cmp_span);
        if (rc >= 0)
            rc = merged;
        if (rc < 0)
            break;
        DBG_PHASE("gaps");
        if ((rc = cfg_discover_add_new(b)) < 0)
            break;
        if (rc == 0 && b->procs.n == before)
            break;
        built = 1; /* gap procedures were built: redo the fixpoint */
        rc = 0;
    }
    CFG_VEC_FREE(noret);
    CFG_VEC_FREE(todo);
    CFG_VEC_FREE(snap.flags);
    CFG_VEC_FREE(snap.mayret);
    CFG_VEC_FREE(snap.bytes);
    return rc < 0 ? rc : 0;
}

/*
 * A last consistency check: a call edge marked "never returns" must go to a procedure
 * that the final analysis still says never returns. Rounds of discovery can revise a
 * callee (its cold fragment and the return in it tied on later), and the code after such
 * a call was then never traversed: moving the caller would let the call return into
 * whatever follows it in the new layout. Such callers are unsafe, so they stay in place
 * (seen in Debian's python3.11, built with hot/cold splitting).
 */
static int
check_noreturn_calls(cfg_prog_t *prog)
{
    /* The calls that matter: "never returns" edges to a procedure's entry (what else
     * there is does not change below). */
    CFG_VEC(uint32_t) calls = { 0 };
    for (uint32_t k = 0; k < prog->nblocks; k++) {
        const cfg_block_t *bl = &prog->blocks[k];
        if (bl->last_kind != ARCH_KIND_CALL || bl->call_target == 0 || bl->nsucc == 0)
            continue;
        int noret = 0;
        for (uint32_t e = 0; e < bl->nsucc; e++)
            noret |= prog->edges[bl->succ + e].kind == CFG_EDGE_NORETURN;
        const cfg_proc_t *callee = noret ? cfg_proc_at(prog, bl->call_target) : NULL;
        if (callee != NULL && callee->entry == bl->call_target)
            QP_CHECK(CFG_VEC_PUSH(calls, k));
    }
    /* To a fixpoint: a caller found this way may itself be marked "never returns" on the
     * strength of that call, so its own callers' edges are suspect too. */
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t c = 0; c < calls.n; c++) {
            const cfg_block_t *bl = &prog->blocks[calls.v[c]];
            const cfg_proc_t *callee = cfg_proc_at(prog, bl->call_target);
            if (callee->flags & CFG_PROC_NORETURN)
                continue;
            cfg_proc_t *caller = &prog->procs[bl->proc];
            if ((caller->flags & CFG_PROC_FRAGMENT) && caller->parent != CFG_NONE)
                caller = &prog->procs[caller->parent];
            if (caller->unsafe == NULL)
                caller->unsafe = "a call assumed never to return goes to a procedure that "
                                 "returns";
            if (caller->flags & CFG_PROC_NORETURN) {
                caller->flags &= ~(uint32_t)CFG_PROC_NORETURN; /* it may return after all */
                changed = 1;
            }
        }
    }
    CFG_VEC_FREE(calls);
    return 0;
}

/* Loops of procedure K: each procedure's blocks are its own. */
static int
loops_task(void *arg, unsigned worker, size_t k)
{
    cfg_prog_t *prog = arg;
    (void)worker;
    return cfg_loops_proc(prog, &prog->procs[k]);
}

int
cfg_prog_build(const cfg_image_t *img, const cfg_opts_t *opts, cfg_prog_t **out)
{
    if (img == NULL || out == NULL)
        return QP_EINVAL;
    cfg_builder_t b;
    memset(&b, 0, sizeof(b));
    cfg_find_index_t find = { 0 };
    span_vec_t pad_gaps = { 0 }; /* see build_all */
    b.find = &find;
    b.img = img;
    if (opts != NULL)
        b.opts = *opts;
    b.nscratch = b.opts.threads > QP_MAX_THREADS ? QP_MAX_THREADS
                 : b.opts.threads > 1                ? b.opts.threads
                                                     : 1;
    b.scratch = calloc(b.nscratch, sizeof(cfg_scratch_t));
    cfg_prog_t *prog = calloc(1, sizeof(*prog));
    prog_priv_t *pp = calloc(1, sizeof(*pp));
    if (prog == NULL || pp == NULL || b.scratch == NULL) {
        free(prog);
        free(pp);
        free(b.scratch);
        return QP_ENOMEM;
    }
    prog->img = img;
    prog->isa = cfg_image_isa(img);
    prog->priv = pp;
    pp->held.threads = b.nscratch;
    dbg_phase(&b, "start");
    int rc = cfg_discover(&b);
    dbg_phase(&b, "discovered");
    if (rc == 0)
        rc = build_all(&b, &pad_gaps);
    for (int round = 0; rc == 0 && round < 8; round++) {
        int tied = tie_nameless_fragments(&b, 0);
        int entries = tied < 0 ? tied : collect_interior_entries(&b);
        rc = entries < 0 ? entries : 0;
        if (rc < 0 || tied + entries == 0)
            break;
        rc = build_all(&b, &pad_gaps);
    }
    /* The last round's ties must hold too. */
    for (int round = 0; rc == 0 && round < 8; round++) {
        int untied = tie_nameless_fragments(&b, 1);
        if (untied <= 0) {
            rc = untied;
            break;
        }
        rc = build_all(&b, &pad_gaps);
    }
    CFG_VEC_FREE(pad_gaps);
    spans_free(&b.spans); /* (before the flattening's peak) */
    if (rc == 0) {
        rc = check_extra_entries(&b);
        if (rc == 0)
            rc = check_entries_inside_insns(&b);
        dbg_phase(&b, "converged");
        /* What the noreturn analysis kept is no longer needed: its memory serves the
         * program's arrays. */
        cfg_nr_deps_free(b.nr);
        b.nr = NULL;
        /* Every instruction the rewrite decodes again was decoded by now: the cache
         * need not take more, and takes much less memory read only. */
        cfg_image_decode_freeze(img, b.nscratch);
        if (rc == 0)
            rc = flatten(&b, prog);
    }
    dbg_phase(&b, "flattened");
    if (rc == 0)
        rc = check_noreturn_calls(prog);
    if (rc == 0)
        rc = qp_parallel_for(b.nscratch, prog->nprocs, 64, loops_task, prog, NULL);
    dbg_phase(&b, "loops");
    if (rc == 0)
        rc = compute_stats(&b, prog);
    dbg_phase(&b, "stats");
    /* The program keeps the builder's strings (names and reasons). */
    pp->strings.v = b.strings.v;
    pp->strings.n = b.strings.n;
    pp->strings.cap = b.strings.cap;
    b.strings.v = NULL;
    b.strings.n = b.strings.cap = 0;
    builder_free(&b);
    free(find.buckets.at);
    if (rc < 0) {
        cfg_prog_destroy(prog);
        return rc;
    }
    *out = prog;
    return 0;
}

void
cfg_prog_destroy(cfg_prog_t *prog)
{
    if (prog == NULL)
        return;
    prog_priv_t *pp = prog->priv;
    if (pp != NULL) {
        for (size_t i = 0; i < pp->strings.n; i++)
            free(pp->strings.v[i]);
        CFG_VEC_FREE(pp->strings);
        free(pp->by_addr);
        free(pp->buckets.at);
        free(pp->held.v);
        free(pp->held.xt);
        free(pp);
    }
    free(prog->procs);
    free(prog->blocks);
    free(prog->edges);
    free(prog->preds);
    free(prog->tables);
    free(prog->unreached);
    free(prog);
}

/*****************************************************************************
 * Lookups
 */

uint32_t
cfg_block_at(const cfg_prog_t *prog, uint64_t addr)
{
    if (prog == NULL)
        return CFG_NONE;
    const prog_priv_t *pp = prog->priv;
    size_t lo = 0, hi = prog->nblocks;
    if (pp != NULL && pp->buckets.n > 0) {
        /* The block that holds ADDR ends above its bucket's start, and the one after the
         * first block that ends above the next bucket's start starts above ADDR. */
        qp_buckets_range(&pp->buckets, prog->nblocks, addr, &lo, &hi);
        hi = hi < prog->nblocks ? hi + 1 : hi;
    }
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const cfg_block_t *bl = &prog->blocks[pp->by_addr[mid]];
        if (addr < bl->start)
            hi = mid;
        else if (addr >= bl->end)
            lo = mid + 1;
        else
            return pp->by_addr[mid];
    }
    return CFG_NONE;
}

int
cfg_block_dominates(const cfg_prog_t *prog, uint32_t a, uint32_t b)
{
    for (uint32_t k = 0; b != CFG_NONE && k < 1u << 20; k++) {
        if (b == a)
            return 1;
        b = prog->blocks[b].idom;
    }
    return 0;
}

const uint32_t *
cfg_blocks_by_addr(const cfg_prog_t *prog, size_t *n)
{
    *n = 0;
    if (prog == NULL)
        return NULL;
    const prog_priv_t *pp = prog->priv;
    *n = prog->nblocks;
    return pp->by_addr;
}

const cfg_proc_t *
cfg_proc_at(const cfg_prog_t *prog, uint64_t addr)
{
    uint32_t k = cfg_block_at(prog, addr);
    return k == CFG_NONE ? NULL : &prog->procs[prog->blocks[k].proc];
}

const cfg_proc_t *
cfg_proc_entered_at(const cfg_prog_t *prog, uint64_t addr)
{
    const cfg_proc_t *p = addr != 0 ? cfg_proc_at(prog, addr) : NULL;
    return p != NULL && p->entry == addr ? p : NULL;
}

/* The start of the block at position I of by_addr (qp_bucket_key_fn). */
static uint64_t
block_start_at(const void *ctx, size_t i)
{
    const cfg_prog_t *prog = ctx;
    const prog_priv_t *pp = prog->priv;
    return prog->blocks[pp->by_addr[i]].start;
}

size_t
cfg_blocks_from(const cfg_prog_t *prog, uint64_t addr)
{
    size_t n;
    (void)cfg_blocks_by_addr(prog, &n);
    return qp_lower_bound_fn(n, block_start_at, prog, addr);
}

const cfg_proc_t *
cfg_proc_by_name(const cfg_prog_t *prog, const char *name)
{
    if (prog == NULL || name == NULL)
        return NULL;
    for (uint32_t i = 0; i < prog->nprocs; i++)
        if (strcmp(prog->procs[i].name, name) == 0)
            return &prog->procs[i];
    return NULL;
}
