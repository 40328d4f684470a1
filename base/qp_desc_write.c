/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The description (see qp_desc.c), writing: key call sites, the plan of version 6's
 * chunks, the encoder of every version and the LZMA2 packing.
 */
#include "base/qp_desc_priv.h"
#include "base/qp_pool.h"

/*****************************************************************************
 * Key call sites
 */

/* Is call site C, whose target is the entry of procedure CALLEE (QP_VIRT: none) of
 * QP_EMAP_* KIND, a key site (qp_desc_keys_t)? */
int
desc_is_key_site(const qp_desc_call_t *c, uint32_t callee, uint8_t kind)
{
    if (c->flags != 0)
        return 1;
    if ((c->kind != QP_CALL_DIRECT && c->kind != QP_CALL_TAIL) || c->target == 0)
        return 0;
    return callee == QP_VIRT || (kind & QP_EMAP_SHARED)
        || (kind & (QP_EMAP_MEASURED | QP_EMAP_BY_CALLS)) != QP_EMAP_MEASURED;
}

/* K->first for D's procedures (K's sites in block order): one sweep while the
 * procedures' blocks go up, a search where they do not. */
int
desc_keys_index_procs(const qp_desc_t *d, qp_desc_keys_t *k)
{
    k->first = malloc(((size_t)d->hdr.nprocs + 1) * sizeof(uint32_t));
    if (k->first == NULL)
        return QP_ENOMEM;
    uint32_t i = 0, prev = 0;
    for (uint32_t p = 0; p < d->hdr.nprocs; p++) {
        uint32_t b = d->procs[p].block;
        if (b < prev) {
            uint32_t lo = 0, hi = k->n;
            while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (k->calls[mid].block < b)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            i = lo;
        }
        while (i < k->n && k->calls[i].block < b)
            i++;
        k->first[p] = i;
        prev = b;
    }
    return 0;
}

/* D's key sites picked from its call sites (every one present) into a new *OUT. */
int
desc_keys_from_calls(const qp_desc_t *d, qp_desc_keys_t **out)
{
    qp_entry_map_t local;
    const qp_entry_map_t *m;
    *out = NULL;
    QP_CHECK(qp_desc_entry_map(d, &local, &m));
    qp_desc_keys_t *k = calloc(1, sizeof(*k));
    int rc = k == NULL ? QP_ENOMEM : 0;
    uint32_t n = 0;
    for (uint32_t pass = 0; pass < 2 && rc == 0; pass++) {
        for (uint32_t i = 0; i < d->hdr.ncalls; i++) {
            uint8_t kind;
            uint32_t callee = qp_entry_map_callee(m, i, &kind);
            if (!desc_is_key_site(&d->calls[i], callee, kind))
                continue;
            if (pass == 1) {
                k->calls[k->n] = d->calls[i];
                k->index[k->n] = i;
                k->callee[k->n++] = callee;
            } else
                n++;
        }
        if (pass == 0) {
            k->calls = malloc(((size_t)n + 1) * sizeof(qp_desc_call_t));
            k->index = malloc(((size_t)n + 1) * sizeof(uint32_t));
            k->callee = malloc(((size_t)n + 1) * sizeof(uint32_t));
            if (k->calls == NULL || k->index == NULL || k->callee == NULL)
                rc = QP_ENOMEM;
        }
    }
    if (rc == 0)
        rc = desc_keys_index_procs(d, k);
    qp_entry_map_free(&local);
    if (rc < 0) {
        desc_keys_free(k);
        return rc;
    }
    *out = k;
    return 0;
}

const qp_desc_keys_t *
qp_desc_keys(const qp_desc_t *d)
{
    if (d == NULL)
        return NULL;
    if (d->keys == NULL) {
        qp_desc_keys_t *k;
        if (desc_keys_from_calls(d, &k) < 0)
            return NULL;
        ((qp_desc_t *)d)->keys = k;
    }
    return d->keys;
}

/* R's index of D's procedures by entry (once they are known): D's own when it has one. */
int
desc_index_entries(run_t *r)
{
    r->entries = calloc(1, sizeof(qp_entry_map_t));
    if (r->entries == NULL || qp_entry_map_build(r->d, 0, r->entries) < 0) {
        free(r->entries);
        r->entries = NULL;
        return QP_ENOMEM;
    }
    /* Filled by desc_get_call as it looks the callees up. */
    r->entries->call_proc = malloc(((size_t)r->d->hdr.ncalls + 1) * sizeof(uint32_t));
    if (r->entries->call_proc == NULL) {
        qp_entry_map_free(r->entries);
        free(r->entries);
        r->entries = NULL;
        return QP_ENOMEM;
    }
    return 0;
}

/* R's index freed, or kept as D's (KEEP: D is a parse's result, its call sites read):
 * with each call site's procedure, but not the table (8 MB for chromium). */
void
desc_entries_done(run_t *r, qp_desc_t *keep)
{
    if (keep != NULL && r->entries != NULL && keep->hdr.version >= QP_FORMAT_V7
        && keep->lazy != NULL) {
        /* Version 7 and later: no call site's procedure (the key sites have theirs), the
         * kinds. */
        free(r->entries->slot);
        free(r->entries->call_proc);
        r->entries->slot = NULL;
        r->entries->call_proc = NULL;
        keep->by_entry = r->entries;
    } else if (keep != NULL && r->entries != NULL && r->ncalls_read == keep->hdr.ncalls) {
        free(r->entries->slot);
        r->entries->slot = NULL;
        keep->by_entry = r->entries;
    } else {
        qp_entry_map_free(r->entries);
        free(r->entries);
    }
    r->entries = NULL;
}

/* The name of the first procedure whose entry is TARGET, or UINT64_MAX when none has. */
static uint64_t
callee_name(const run_t *r, uint64_t target)
{
    uint32_t p = qp_entry_map_find(r->d, r->entries, target, NULL);
    return p == QP_VIRT ? UINT64_MAX : r->d->procs[p].name;
}

/* What a return address is a delta from: the new address of the block returned to
 * (TO), when it moved (most often equal), else the previous return address. */
uint64_t
desc_ret_base(const run_t *r, uint32_t to)
{
    const qp_desc_block_t *b = NULL;
    if (r->windowed)
        b = to != QP_VIRT && to - r->win0 < r->nwin ? &r->win[to - r->win0] : NULL;
    else if (to != QP_VIRT && to < r->d->hdr.nblocks)
        b = &r->d->blocks[to];
    return b != NULL && b->new_start != 0 ? b->new_start : r->ret_addr;
}

static void
put_proc(wb_t *w, run_t *r, const qp_desc_proc_t *p)
{
    wb_uleb(w, (uint64_t)p->flags << 3 | (uint64_t)(p->miss != 0) << 2
                 | (uint64_t)(p->reason != 0) << 1 | (p->new_entry != 0));
    wb_uleb(w, desc_zz32(p->name, r->name));
    wb_uleb(w, desc_zz64(p->entry, r->entry));
    r->name = p->name;
    r->entry = p->entry;
    if (p->new_entry != 0) {
        wb_uleb(w, desc_zz64(p->new_entry, r->new_entry));
        r->new_entry = p->new_entry;
    }
    wb_uleb(w, desc_zz32(p->block, r->block));
    wb_uleb(w, p->nblocks);
    wb_uleb(w, desc_zz32(p->edge, r->edge));
    wb_uleb(w, p->nedges);
    r->block = p->block + p->nblocks;
    r->edge = p->edge + p->nedges;
    if (p->reason != 0)
        wb_uleb(w, p->reason);
    if (p->miss != 0)
        wb_uleb(w, p->miss);
}

static void
put_counter(wb_t *w, run_t *r, uint32_t counter)
{
    wb_uleb(w, desc_zz32(counter, r->counter));
    r->counter = counter + 1;
}

static void
put_block(wb_t *w, run_t *r, const qp_desc_block_t *b)
{
    wb_uleb(w, (uint64_t)b->ninsns << 2 | (uint64_t)(b->new_start != 0) << 1
                 | (b->counter != QP_NOCOUNTER));
    wb_uleb(w, desc_zz64(b->start, r->start));
    wb_uleb(w, b->size);
    r->start = b->start + b->size;
    if (b->new_start != 0) {
        wb_uleb(w, desc_zz64(b->new_start, r->new_start));
        r->new_start = b->new_start + b->size;
    }
    if (b->counter != QP_NOCOUNTER)
        put_counter(w, r, b->counter);
}

static void
put_edge(wb_t *w, run_t *r, const qp_desc_edge_t *e)
{
    wb_uleb(w, (uint64_t)e->kind << 2 | (uint64_t)(e->counter != QP_NOCOUNTER) << 1
                 | (e->ret_addr != 0));
    uint32_t ref = r->from;
    if (e->from != QP_VIRT) {
        wb_uleb(w, 1 + desc_zz32(e->from, r->from));
        r->from = ref = e->from;
    } else
        wb_uleb(w, 0);
    wb_uleb(w, e->to == QP_VIRT ? 0 : 1 + desc_zz32(e->to, ref));
    if (e->counter != QP_NOCOUNTER)
        put_counter(w, r, e->counter);
    if (e->ret_addr != 0) {
        wb_uleb(w, desc_zz64(e->ret_addr, desc_ret_base(r, e->to)));
        r->ret_addr = e->ret_addr;
    }
}

static void
put_call(wb_t *w, run_t *r, const qp_desc_call_t *c)
{
    int callees = !r->plain_names && c->target != 0 && callee_name(r, c->target) == c->name;
    wb_uleb(w, (uint64_t)c->flags << 11 | (uint64_t)c->kind << 3 | (uint64_t)callees << 2
                 | (uint64_t)(c->target != 0) << 1 | (c->edge != QP_VIRT));
    wb_uleb(w, desc_zz32(c->block, r->call_block));
    r->call_block = c->block;
    if (c->edge != QP_VIRT) {
        wb_uleb(w, desc_zz32(c->edge, r->call_edge));
        r->call_edge = c->edge;
    }
    if (c->target != 0) {
        wb_uleb(w, desc_zz64(c->target, r->target));
        r->target = c->target;
    }
    if (!callees) {
        wb_uleb(w, desc_zz32(c->name, r->call_name));
        r->call_name = c->name;
    }
}

/*
 * Version 6's chunks (qp_format.h): consecutive procedures with the blocks and edges
 * they use, each chunk a stream of its own, so that a reader decodes only those of the
 * procedures that ran. A chunk's counters lie in [clo, clo + cn).
 */

typedef struct chunk_plan {
    uint32_t proc, nprocs, block, nblocks, edge, nedges, clo, cn;
    uint32_t call, ncalls; /* version 7: the call sites of its blocks */
    uint64_t ns_lo, ns_hi; /* the new addresses of its moved blocks (0, 0: none) */
    /* The return addresses of its edges, in NRA intervals (clusters: code relocated and
     * code measured in place lie far apart). */
    uint64_t ra_lo[RA_PARTS], ra_hi[RA_PARTS];
    uint32_t nra;
} chunk_plan_t;

/* Blocks and edges a chunk gathers before it may end (about 4 KB of varints): small
 * enough that the procedures of a chunk mostly ran together or not at all, large enough
 * to compress (chromium: 16% of its procedures ran). */
enum { CHUNK_RECORDS = 1024 };

/* The chunk of C (N chunks, their block ranges consecutive from 0) holding block B. */
static uint32_t
chunk_of_block(const chunk_plan_t *c, uint32_t n, uint32_t b)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) { /* the last chunk starting at or before B */
        uint32_t mid = lo + (hi - lo) / 2;
        if (c[mid].block <= b)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == 0 || b - c[lo - 1].block >= c[lo - 1].nblocks ? n : lo - 1;
}

/* Are D's call sites in block order, each in a block (what version 7's chunks need)? */
static int
calls_in_order(const qp_desc_t *d)
{
    for (uint32_t i = 0; i < d->hdr.ncalls; i++)
        if (d->calls[i].block >= d->hdr.nblocks || (i && d->calls[i].block < d->calls[i - 1].block))
            return 0;
    return 1;
}

/* Every tail call's edge in the chunk of its block (what a reader checks on loading)? */
static int
calls_fit(const qp_desc_t *d, const chunk_plan_t *c, uint32_t n)
{
    for (uint32_t i = 0; i < d->hdr.ncalls; i++) {
        const qp_desc_call_t *s = &d->calls[i];
        if (!qp_call_is_tail(s) || s->block >= d->hdr.nblocks || s->edge >= d->hdr.nedges)
            continue;
        uint32_t k = chunk_of_block(c, n, s->block);
        if (k == n || s->edge - c[k].edge >= c[k].nedges)
            return 0;
    }
    return 1;
}

static int
cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* RA (N return addresses) as at most RA_PARTS intervals of C: split at the widest gaps. */
static void
ra_parts(uint64_t *ra, uint32_t n, chunk_plan_t *c)
{
    qsort(ra, n, sizeof(uint64_t), qp_u64_cmp);
    uint32_t cut[RA_PARTS - 1], ncut = 0; /* an interval ends after ra[cut[j]] */
    while (ncut < RA_PARTS - 1) {
        uint32_t best = n;
        for (uint32_t i = 0; i + 1 < n; i++) {
            int taken = 0;
            for (uint32_t j = 0; j < ncut; j++)
                taken |= cut[j] == i;
            if (!taken && ra[i + 1] > ra[i]
                && (best == n || ra[i + 1] - ra[i] > ra[best + 1] - ra[best]))
                best = i;
        }
        if (best == n)
            break;
        cut[ncut++] = best;
    }
    qsort(cut, ncut, sizeof(uint32_t), cmp_u32);
    uint32_t first = 0;
    for (uint32_t j = 0; n > 0 && j <= ncut; j++) {
        uint32_t last = j < ncut ? cut[j] : n - 1;
        c->ra_lo[c->nra] = ra[first];
        c->ra_hi[c->nra++] = ra[last];
        first = last + 1;
    }
}

/* [*LO, *HI] grown to hold X (not 0); *LO 0: empty. */
static void
widen(uint64_t *lo, uint64_t *hi, uint64_t x)
{
    if (*lo == 0 || x < *lo)
        *lo = x;
    if (x > *hi)
        *hi = x;
}

/* The counters C's blocks and edges use, as [clo, clo + cn); the new addresses of its
 * blocks and the return addresses of its edges, as ranges. */
static void
chunk_ranges(const qp_desc_t *d, chunk_plan_t *c)
{
    uint32_t lo = UINT32_MAX, hi = 0;
    c->ns_lo = c->ns_hi = 0;
    c->nra = 0;
    uint64_t *ra = malloc((c->nedges + 1) * sizeof(uint64_t));
    uint32_t n = 0;
    for (uint32_t i = 0; i < c->nblocks; i++) {
        const qp_desc_block_t *b = &d->blocks[c->block + i];
        if (b->counter != QP_NOCOUNTER) {
            lo = b->counter < lo ? b->counter : lo;
            hi = b->counter >= hi ? b->counter + 1 : hi;
        }
        if (b->new_start != 0)
            widen(&c->ns_lo, &c->ns_hi, b->new_start);
    }
    for (uint32_t i = 0; i < c->nedges; i++) {
        const qp_desc_edge_t *e = &d->edges[c->edge + i];
        if (e->counter != QP_NOCOUNTER) {
            lo = e->counter < lo ? e->counter : lo;
            hi = e->counter >= hi ? e->counter + 1 : hi;
        }
        if (e->ret_addr != 0 && ra != NULL)
            ra[n++] = e->ret_addr;
    }
    c->clo = hi > 0 ? lo : 0;
    c->cn = hi > 0 ? hi - lo : 0;
    if (ra == NULL) { /* one interval, everything */
        c->ra_lo[0] = 1;
        c->ra_hi[0] = UINT64_MAX;
        c->nra = 1;
        return;
    }
    ra_parts(ra, n, c);
    free(ra);
}

/*
 * D's chunks into *OUT (*N of them): a chunk ends after a procedure once it holds
 * CHUNK_RECORDS blocks and edges and no later procedure uses a block or an edge before
 * its end. Contents that do not cut that way (or are not valid) make one chunk. Their
 * ranges (chunk_ranges) are found on the pool, with their records.
 */
static int
plan_chunks(const qp_desc_t *d, chunk_plan_t **out, uint32_t *n)
{
    uint32_t np = d->hdr.nprocs;
    chunk_plan_t *c = malloc(((size_t)np + 1) * sizeof(*c));
    uint32_t *minb = malloc(((size_t)np + 1) * sizeof(uint32_t));
    uint32_t *mine = malloc(((size_t)np + 1) * sizeof(uint32_t));
    if (c == NULL || minb == NULL || mine == NULL) {
        free(c);
        free(minb);
        free(mine);
        return QP_ENOMEM;
    }
    int ok = np > 0;
    for (uint32_t i = 0; i < np && ok; i++)
        ok = desc_range_ok(d->procs[i].block, d->procs[i].nblocks, d->hdr.nblocks)
            && desc_range_ok(d->procs[i].edge, d->procs[i].nedges, d->hdr.nedges);
    uint32_t k = 0;
    if (ok) {
        /* minb[i]: the first block any procedure from I on uses (likewise edges). */
        minb[np] = d->hdr.nblocks;
        mine[np] = d->hdr.nedges;
        for (uint32_t i = np; i-- > 0;) {
            const qp_desc_proc_t *p = &d->procs[i];
            minb[i] = p->nblocks && p->block < minb[i + 1] ? p->block : minb[i + 1];
            mine[i] = p->nedges && p->edge < mine[i + 1] ? p->edge : mine[i + 1];
        }
        uint32_t first = 0, b0 = 0, e0 = 0, endb = 0, ende = 0;
        uint64_t recs = 0;
        for (uint32_t i = 0; i < np; i++) {
            const qp_desc_proc_t *p = &d->procs[i];
            if (p->nblocks && p->block + p->nblocks > endb)
                endb = p->block + p->nblocks;
            if (p->nedges && p->edge + p->nedges > ende)
                ende = p->edge + p->nedges;
            recs += (uint64_t)p->nblocks + p->nedges;
            int last = i + 1 == np;
            if (!last && (recs < CHUNK_RECORDS || minb[i + 1] < endb || mine[i + 1] < ende))
                continue;
            uint32_t b1 = last ? d->hdr.nblocks : endb, e1 = last ? d->hdr.nedges : ende;
            c[k++] = (chunk_plan_t) { .proc = first, .nprocs = i + 1 - first, .block = b0,
                                  .nblocks = b1 - b0, .edge = e0, .nedges = e1 - e0 };
            first = i + 1;
            b0 = b1;
            e0 = e1;
            recs = 0;
        }
        ok = calls_fit(d, c, k) && calls_in_order(d);
    }
    if (!ok) {
        c[0] = (chunk_plan_t) { .nprocs = np, .nblocks = d->hdr.nblocks,
                                .nedges = d->hdr.nedges, .ncalls = d->hdr.ncalls };
        k = 1;
    } else /* in block order: a chunk's call sites follow the previous chunk's */
        for (uint32_t i = 0; i < k; i++) {
            c[i].call = i ? c[i - 1].call + c[i - 1].ncalls : 0;
            c[i].ncalls
                = (i + 1 < k ? desc_first_call_at(d, c[i + 1].block) : d->hdr.ncalls)
                - c[i].call;
        }
    free(minb);
    free(mine);
    *out = c;
    *n = k;
    return 0;
}

/* A zero-input summary as one varint: 0 when not given. */
static void
put_zero(wb_t *w, const qp_desc_zero_t *z)
{
    if (z == NULL || !z->given)
        wb_uleb(w, 0);
    else
        wb_uleb(w, 1 + ((uint64_t)z->nunknown_edges << 3 | (uint64_t)(z->calls_known != 0) << 2
                        | (uint64_t)(z->insns_exact != 0) << 1 | (z->all_known != 0)));
}

/*
 * Per exec call site (QP_CALLF_EXEC) what finding the block of a dump taken before it
 * needs (qp_backtrace.c) without every block decoded: the lowest new address of any block
 * above its block's (0: none), and the highest index of a block at its block's.
 */
void
desc_exec_next(const qp_desc_t *d, uint32_t block, uint64_t *next, uint32_t *tie)
{
    uint64_t ns = block < d->hdr.nblocks ? d->blocks[block].new_start : 0;
    *next = 0;
    *tie = block;
    for (uint32_t i = 0; ns != 0 && i < d->hdr.nblocks; i++) {
        uint64_t x = d->blocks[i].new_start;
        if (x > ns && (*next == 0 || x < *next))
            *next = x;
        if (x == ns && i > *tie)
            *tie = i;
    }
}

static void
put_exec_next(wb_t *w, const qp_desc_t *d, const qp_desc_call_t *calls, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (!(calls[i].flags & QP_CALLF_EXEC))
            continue;
        uint64_t next;
        uint32_t tie;
        desc_exec_next(d, calls[i].block, &next, &tie);
        wb_uleb(w, next);
        wb_uleb(w, tie - calls[i].block);
    }
}

/* The records of chunk C (its blocks, then its edges; version 7, KEYS not NULL: then its
 * call sites that are not among KEYS), each chunk's deltas from 0. *CALLBYTES: the
 * bytes of its call sites. */
static void
encode_chunk(const qp_desc_t *d, const chunk_plan_t *c, const qp_desc_keys_t *keys,
    wb_t *w, size_t *callbytes)
{
    run_t r;
    memset(&r, 0, sizeof(r));
    r.d = d;
    r.windowed = 1;
    r.win = &d->blocks[c->block];
    r.win0 = c->block;
    r.nwin = c->nblocks;
    for (uint32_t i = 0; i < c->nblocks; i++)
        put_block(w, &r, &d->blocks[c->block + i]);
    for (uint32_t i = 0; i < c->nedges; i++)
        put_edge(w, &r, &d->edges[c->edge + i]);
    size_t before = w->len;
    if (keys != NULL) {
        memset(&r, 0, sizeof(r));
        r.d = d;
        r.plain_names = 1;
        uint32_t k = desc_first_key_from(keys, c->call);
        for (uint32_t i = c->call; i < c->call + c->ncalls; i++) {
            if (k < keys->n && keys->index[k] == i) {
                k++;
                continue;
            }
            put_call(w, &r, &d->calls[i]);
        }
    }
    *callbytes = w->len - before;
}

/* The index of D (qp_format.h, version 6; version 7 when KEYS is not NULL): everything
 * but the chunks' records. Its head, made before the chunks are packed, holds the
 * procedures and the call sites (all of them in version 6, the key sites in 7); its
 * tail, the NC chunks' table (encode_chunk_table) and the strings. */
static int
encode_index_head(const qp_desc_t *d, const qp_desc_keys_t *keys, uint32_t nc, wb_t *w)
{
    run_t r;
    memset(&r, 0, sizeof(r));
    r.d = d;
    if (desc_index_entries(&r) < 0)
        return QP_ENOMEM;
    wb_uleb(w, nc);
    for (uint32_t i = 0; i < d->hdr.nprocs; i++)
        put_proc(w, &r, &d->procs[i]);
    for (uint32_t i = 0; i < d->hdr.nprocs; i++) {
        put_zero(w, d->zero != NULL ? &d->zero[i] : NULL);
        if (d->procs[i].flags & QP_PROC_BY_CALLS)
            put_zero(w, d->zero_entry != NULL ? &d->zero_entry[i] : NULL);
    }
    if (keys != NULL) {
        wb_uleb(w, keys->n);
        for (uint32_t i = 0; i < keys->n; i++) {
            wb_uleb(w, keys->index[i] - (i ? keys->index[i - 1] + 1 : 0));
            put_call(w, &r, &keys->calls[i]);
        }
        put_exec_next(w, d, keys->calls, keys->n);
    } else {
        for (uint32_t i = 0; i < d->hdr.ncalls; i++)
            put_call(w, &r, &d->calls[i]);
        put_exec_next(w, d, d->calls, d->hdr.ncalls);
    }
    desc_entries_done(&r, NULL);
    return w->err ? QP_ENOMEM : 0;
}

/* The index's chunks' table: chunks C[0..NC) (chunk k's RAW[k] bytes before and Z[k]
 * after compression, CB[k] of them call sites; KEYS: version 7's fields too). The
 * strings follow it in the index. */
static void
encode_chunk_table(const qp_desc_keys_t *keys, const chunk_plan_t *c, uint32_t nc,
    const size_t *raw, const size_t *z, const size_t *cb, wb_t *w)
{
    for (uint32_t k = 0; k < nc; k++) {
        const chunk_plan_t *p = k ? &c[k - 1] : NULL;
        wb_uleb(w, c[k].nprocs);
        wb_uleb(w, c[k].nblocks);
        wb_uleb(w, c[k].nedges);
        wb_uleb(w, c[k].clo);
        wb_uleb(w, c[k].cn);
        wb_uleb(w, z[k]);
        wb_uleb(w, raw[k]);
        wb_uleb(w, desc_zz64(c[k].ns_lo, p ? p->ns_lo : 0));
        wb_uleb(w, desc_zz64(c[k].ns_hi, c[k].ns_lo));
        wb_uleb(w, c[k].nra);
        uint64_t prev = p != NULL && p->nra ? p->ra_lo[0] : 0;
        for (uint32_t j = 0; j < c[k].nra; j++) {
            wb_uleb(w, desc_zz64(c[k].ra_lo[j], prev));
            wb_uleb(w, desc_zz64(c[k].ra_hi[j], c[k].ra_lo[j]));
            prev = c[k].ra_hi[j];
        }
        if (keys != NULL) {
            wb_uleb(w, c[k].ncalls);
            wb_uleb(w, cb[k]);
        }
    }
}

uint32_t
desc_dict_for(uint64_t n)
{
    return n < LZMA_DICT_SIZE_MIN ? LZMA_DICT_SIZE_MIN : n > LZMA_DICT_MAX ? LZMA_DICT_MAX : (uint32_t)n;
}

int
desc_lzma_options(uint32_t preset, lzma_options_lzma *o)
{
    if (lzma_lzma_preset(o, preset))
        return QP_EINVAL;
    o->lc = 1;
    o->lp = 0;
    o->pb = 0;
    return 0;
}

/* Append the raw LZMA2 stream of IN (N bytes) to W; *ZLEN gets its size. */
static int
pack_lzma(const uint8_t *in, size_t n, uint32_t preset, wb_t *w, size_t *zlen)
{
    lzma_options_lzma o;
    QP_CHECK(desc_lzma_options(preset, &o));
    o.dict_size = desc_dict_for(n);
    size_t cap = n + (n >> 3) + 4096, start = w->len; /* LZMA2 stores what does not shrink */
    wb_put(w, NULL, cap);
    if (w->err)
        return QP_ENOMEM;
    lzma_filter f[2] = { { LZMA_FILTER_LZMA2, &o }, { LZMA_VLI_UNKNOWN, NULL } };
    size_t pos = start;
    lzma_ret lr = lzma_raw_buffer_encode(f, NULL, in, n, w->p, &pos, start + cap);
    if (lr != LZMA_OK)
        return lr == LZMA_MEM_ERROR ? QP_ENOMEM : QP_ERANGE;
    w->len = pos;
    *zlen = pos - start;
    return 0;
}

/* How the pieces (index parts, chunks) of a version 8 or 9 description are compressed:
 * VERSION's way, LEVEL an LZMA preset (8) or a zstd level (9, at most 19: a window of
 * at most 2^ZSTD_WINDOW_LOG bytes), and per worker its zstd context, kept between
 * pieces (a context per piece cost chromium's 13,700 chunks an allocation each). */
typedef struct packer {
    uint32_t version;
    int level;
    ZSTD_CCtx *cz[QP_MAX_THREADS];
} packer_t;

_Static_assert(ZSTD_LEVEL_SMALL <= 19 && ZSTD_LEVEL_BIG <= 19, "zstd window");

/* Append the zstd frame of IN (N bytes) at P's level, made with WORKER's context, to W;
 * *ZLEN gets its size. The frame depends on the bytes and the level only. */
static int
pack_zstd(const uint8_t *in, size_t n, packer_t *p, unsigned worker, wb_t *w, size_t *zlen)
{
    ZSTD_CCtx **cz = &p->cz[worker];
    if (*cz == NULL && (*cz = ZSTD_createCCtx()) == NULL)
        return QP_ENOMEM;
    size_t cap = ZSTD_compressBound(n), start = w->len;
    wb_put(w, NULL, cap);
    if (w->err)
        return QP_ENOMEM;
    size_t z = ZSTD_isError(ZSTD_CCtx_setParameter(*cz, ZSTD_c_compressionLevel, p->level))
        ? (size_t)-1
        : ZSTD_compress2(*cz, w->p + start, cap, in, n);
    if (ZSTD_isError(z))
        return ZSTD_getErrorCode(z) == ZSTD_error_memory_allocation ? QP_ENOMEM : QP_ERANGE;
    w->len = start + z;
    *zlen = z;
    return 0;
}

/* A piece of IN (N bytes) compressed as P says, on WORKER, appended to W (*ZLEN bytes). */
static int
pack(const uint8_t *in, size_t n, packer_t *p, unsigned worker, wb_t *w, size_t *zlen)
{
    if (p->version >= QP_FORMAT_V9)
        return pack_zstd(in, n, p, worker, w, zlen);
    return pack_lzma(in, n, (uint32_t)p->level, w, zlen);
}

/* Version 8's index parts (qp_format.h): its head and its strings cut into pieces of at
 * most this many bytes, each compressed apart on the pool (cc1: 3 and 6 of them). */
enum { INDEX_PART = 256u << 10 };

/* A piece of the index to compress on its own (version 8): N bytes at P (not owned),
 * its stream (malloc'd, Z bytes) once packed. */
typedef struct index_part {
    const uint8_t *p;
    size_t n;
    uint8_t *out;
    size_t z;
} index_part_t;

/* The chunks to encode and compress on the pool: chunk k's records (RAW[k] bytes, CB[k]
 * of them call sites, in RECS[k]) become OUT[k] (malloc'd, ZLEN[k] bytes); the NPARTS
 * index parts, items [0, NPARTS) before the chunks' (the larger first), are compressed
 * with them. Each is a stream of its own, so the bytes do not depend on which thread
 * packed it. */
typedef struct pack_job {
    const qp_desc_t *d;          /* the description */
    const qp_desc_keys_t *keys;  /* its key call sites (version 7 and later), or NULL */
    chunk_plan_t *c;             /* the chunks (their ranges found with their records) */
    packer_t *how;               /* how every chunk and part is compressed */
    wb_t *recs;                  /* chunk k's records */
    size_t *raw, *cb;            /* ... their bytes, and those of call sites */
    uint8_t **out;               /* chunk k's stream (or NULL until packed) */
    size_t *zlen;                /* ... and its bytes */
    index_part_t *parts;         /* the index's parts packed with the chunks */
    size_t nparts;
} pack_job_t;

/* qp_task_fn: the ranges and the records of chunk K of the pack_job_t ARG (the ranges'
 * sorts of return addresses took cc1's description 0.1 G instructions before the pool). */
static int
encode_one(void *arg, unsigned worker, size_t k)
{
    (void)worker;
    pack_job_t *j = arg;
    chunk_ranges(j->d, &j->c[k]);
    encode_chunk(j->d, &j->c[k], j->keys, &j->recs[k], &j->cb[k]);
    j->raw[k] = j->recs[k].len;
    return j->recs[k].err ? QP_ENOMEM : 0;
}

/* The piece of N bytes at IN compressed as HOW says on WORKER into *OUT (malloc'd, *ZLEN
 * bytes). */
static int
pack_alone(const uint8_t *in, size_t n, packer_t *how, unsigned worker, uint8_t **out,
    size_t *zlen)
{
    wb_t w = { 0 };
    int rc = pack(in, n, how, worker, &w, zlen);
    if (rc < 0) {
        free(w.p);
        return rc;
    }
    uint8_t *p = realloc(w.p, w.len + 1); /* give back pack's room for the worst case */
    *out = p != NULL ? p : w.p;
    return 0;
}

/* qp_task_fn: pack item K of the pack_job_t ARG: an index part, or a chunk. */
static int
pack_one(void *arg, unsigned worker, size_t k)
{
    pack_job_t *j = arg;
    if (k < j->nparts) {
        index_part_t *x = &j->parts[k];
        return pack_alone(x->p, x->n, j->how, worker, &x->out, &x->z);
    }
    k -= j->nparts;
    int rc = pack_alone(j->recs[k].p, j->recs[k].len, j->how, worker, &j->out[k],
        &j->zlen[k]);
    free(j->recs[k].p);
    j->recs[k].p = NULL;
    return rc;
}

/* The level of a description of VERSION whose pieces take TOTAL bytes: LZMA's preset 6
 * or zstd's ZSTD_LEVEL_SMALL when they take at most LZMA_SMALL, else preset 1 or
 * ZSTD_LEVEL_BIG. */
static int
pick_level(uint32_t version, size_t total)
{
    int small = total <= LZMA_SMALL;
    if (version < QP_FORMAT_V9)
        return small ? 6 : 1;
    return small ? ZSTD_LEVEL_SMALL : ZSTD_LEVEL_BIG;
}

/* D's chunks: their records (chunk k's RAW[k] bytes, CB[k] of them call sites), encoded,
 * then compressed, on THREADS threads into Z (ZLEN[k] bytes each, in chunk order
 * whatever the threads), with the NPARTS index PARTS, as HOW says (its level set here:
 * pick_level of the chunks' records and the EXTRA bytes of the index). */
static int
pack_chunks(const qp_desc_t *d, const qp_desc_keys_t *keys, chunk_plan_t *c,
    uint32_t nc, unsigned threads, size_t *raw, size_t *cb, size_t *zlen, wb_t *z,
    index_part_t *parts, size_t nparts, size_t extra, packer_t *how)
{
    wb_t *recs = calloc((size_t)nc + 1, sizeof(wb_t));
    uint8_t **out = calloc((size_t)nc + 1, sizeof(uint8_t *));
    pack_job_t job = { d, keys, c, how, recs, raw, cb, out, zlen, parts, nparts };
    int rc = recs == NULL || out == NULL ? QP_ENOMEM : 0;
    if (rc == 0)
        rc = qp_parallel_for(threads, nc, 4, encode_one, &job, NULL);
    size_t total = extra;
    for (uint32_t k = 0; k < nc && rc == 0; k++)
        total += raw[k];
    how->level = pick_level(how->version, total);
    if (rc == 0)
        rc = qp_parallel_for(threads, nparts + nc, 4, pack_one, &job, NULL);
    for (uint32_t k = 0; k < nc && out != NULL; k++) {
        if (rc == 0 && out[k] != NULL)
            wb_put(z, out[k], zlen[k]);
        free(out[k]);
        if (recs != NULL)
            free(recs[k].p);
    }
    if (rc == 0 && z->err)
        rc = QP_ENOMEM;
    free(out);
    free(recs);
    return rc;
}

/* Cut N bytes at P into parts of at most INDEX_PART bytes, appended to PARTS (*N_PARTS of
 * them; room for them all). */
static void
cut_parts(const uint8_t *p, size_t n, index_part_t *parts, size_t *nparts)
{
    for (size_t at = 0; at < n; at += INDEX_PART) {
        index_part_t *x = &parts[(*nparts)++];
        x->p = p + at;
        x->n = n - at < INDEX_PART ? n - at : INDEX_PART;
    }
}

/* The header of D's version VERSION, with BODY bytes of index, into OUT. */
static void
put_header(const qp_desc_t *d, uint32_t version, size_t body, wb_t *out)
{
    qp_desc_hdr_t h = d->hdr;
    memcpy(h.magic, QP_DESC_MAGIC, sizeof(h.magic));
    h.version = version;
    h.body_size = (uint32_t)body;
    h.id = 0;
    wb_put(out, &h, sizeof(h));
}

/* Version 5 (qp_format.h): one stream of every record. */
static int
encode_v5(const qp_desc_t *d, wb_t *out)
{
    wb_t body = { 0 };
    run_t r;
    memset(&r, 0, sizeof(r));
    r.d = d;
    if (desc_index_entries(&r) < 0)
        return QP_ENOMEM;
    for (uint32_t i = 0; i < d->hdr.nprocs; i++)
        put_proc(&body, &r, &d->procs[i]);
    for (uint32_t i = 0; i < d->hdr.nblocks; i++)
        put_block(&body, &r, &d->blocks[i]);
    for (uint32_t i = 0; i < d->hdr.nedges; i++)
        put_edge(&body, &r, &d->edges[i]);
    for (uint32_t i = 0; i < d->hdr.ncalls; i++)
        put_call(&body, &r, &d->calls[i]);
    wb_put(&body, d->strtab, d->hdr.strtab_size);
    desc_entries_done(&r, NULL);
    put_header(d, QP_FORMAT_V5, body.len, out);
    int rc = body.err || out->err ? QP_ENOMEM : body.len > UINT32_MAX ? QP_ERANGE : 0;
    /* Version 5's dictionary is always 8 MiB (desc_unpack_init). */
    lzma_options_lzma o;
    if (rc == 0)
        rc = desc_lzma_options(body.len <= LZMA_SMALL ? 6 : 1, &o);
    if (rc == 0) {
        o.dict_size = LZMA_DICT_MAX;
        size_t cap = body.len + (body.len >> 3) + 4096, start = out->len;
        wb_put(out, NULL, cap);
        lzma_filter f[2] = { { LZMA_FILTER_LZMA2, &o }, { LZMA_VLI_UNKNOWN, NULL } };
        size_t pos = start;
        if (out->err)
            rc = QP_ENOMEM;
        else if (lzma_raw_buffer_encode(f, NULL, body.p, body.len, out->p, &pos, start + cap)
                 != LZMA_OK)
            rc = QP_ERANGE;
        out->len = pos;
    }
    free(body.p);
    return rc;
}

int
qp_desc_encode(const qp_desc_t *d, uint8_t **buf, size_t *len)
{
    return qp_desc_encode_version(d, QP_FORMAT_VERSION, buf, len);
}

int
qp_desc_encode_version(const qp_desc_t *d, uint32_t version, uint8_t **buf, size_t *len)
{
    return qp_desc_encode_threads(d, version, 1, buf, len);
}

/* Version 8's index part I in the file's order: the head's NHEAD PARTS, the chunks'
 * TABLE, then the strings' (the PARTS after the head's). */
static const index_part_t *
part_in_order(
    const index_part_t *parts, size_t nhead, const index_part_t *table, size_t i)
{
    return i < nhead ? &parts[i] : i == nhead ? table : &parts[i - 1];
}

/*
 * Versions 6 to 9 (qp_format.h) of D into OUT, the chunks compressed on THREADS
 * threads. Version 8 and 9's index parts are compressed with them, but for the chunks'
 * table (their sizes), packed after; 6 and 7 compress the index whole after the chunks.
 */
static int
encode_chunked(const qp_desc_t *d, uint32_t version, unsigned threads, wb_t *out)
{
    chunk_plan_t *c = NULL;
    uint32_t nc = 0;
    QP_CHECK(plan_chunks(d, &c, &nc));
    qp_desc_keys_t *keys = NULL; /* version 7 and later: the key sites go in the index */
    size_t *raw = calloc(nc, sizeof(size_t)), *zlen = calloc(nc, sizeof(size_t));
    size_t *cb = calloc(nc, sizeof(size_t));
    wb_t chunks = { 0 }, index = { 0 }, table = { 0 };
    int v8 = version >= QP_FORMAT_V8; /* or 9 */
    packer_t how = { .version = version };
    int rc = raw == NULL || zlen == NULL || cb == NULL ? QP_ENOMEM : 0;
    if (rc == 0 && version >= QP_FORMAT_V7)
        rc = desc_keys_from_calls(d, &keys);
    if (rc == 0)
        rc = encode_index_head(d, keys, nc, &index);
    /* Version 8 and 9: the head's NHEAD parts and the strings', packed on the pool; the
     * chunks' table, a part between them, after. */
    size_t nparts = 0, nhead = 0, strtab = d->hdr.strtab_size;
    index_part_t *parts = NULL, tpart = { 0 };
    if (rc == 0 && v8) {
        parts = calloc(index.len / INDEX_PART + strtab / INDEX_PART + 2, sizeof(*parts));
        rc = parts == NULL ? QP_ENOMEM : 0;
    }
    if (rc == 0 && v8) {
        cut_parts(index.p, index.len, parts, &nparts);
        nhead = nparts;
        cut_parts((const uint8_t *)d->strtab, strtab, parts, &nparts);
    }
    if (rc == 0)
        rc = pack_chunks(d, keys, c, nc, threads, raw, cb, zlen, &chunks, parts, nparts,
            v8 ? index.len + strtab : 0, &how);
    if (rc == 0)
        encode_chunk_table(keys, c, nc, raw, zlen, cb, v8 ? &table : &index);
    size_t body = index.len + (v8 ? table.len + strtab : 0);
    if (rc == 0 && !v8)
        wb_put(&index, d->strtab, strtab);
    if (rc == 0 && (index.err || table.err))
        rc = QP_ENOMEM;
    if (rc == 0 && (v8 ? body : index.len) > UINT32_MAX)
        rc = QP_ERANGE;
    put_header(d, version, v8 ? body : index.len, out);
    if (rc == 0 && v8) {
        rc = pack_alone(table.p, table.len, &how, 0, &tpart.out, &tpart.z);
        tpart.n = table.len;
        wb_uleb(out, nparts + 1);
        for (size_t i = 0; i <= nparts; i++) {
            const index_part_t *x = part_in_order(parts, nhead, &tpart, i);
            wb_uleb(out, x->n);
            wb_uleb(out, x->z);
        }
        for (size_t i = 0; i <= nparts && rc == 0; i++) {
            const index_part_t *x = part_in_order(parts, nhead, &tpart, i);
            wb_put(out, x->out, x->z);
        }
    } else if (rc == 0) {
        size_t zindex = 0;
        rc = pack_lzma(index.p, index.len, index.len + chunks.len <= LZMA_SMALL ? 6 : 1, out,
            &zindex);
    }
    if (rc == 0)
        wb_put(out, chunks.p, chunks.len);
    if (rc == 0 && out->err)
        rc = QP_ENOMEM;
    for (size_t i = 0; i < nparts; i++)
        free(parts[i].out);
    for (unsigned i = 0; i < QP_MAX_THREADS; i++)
        ZSTD_freeCCtx(how.cz[i]);
    free(parts);
    free(tpart.out);
    desc_keys_free(keys);
    free(cb);
    free(c);
    free(raw);
    free(zlen);
    free(chunks.p);
    free(index.p);
    free(table.p);
    return rc;
}

int
qp_desc_encode_threads(
    const qp_desc_t *d, uint32_t version, unsigned threads, uint8_t **buf, size_t *len)
{
    if (d == NULL || buf == NULL || len == NULL || version < QP_FORMAT_V5
        || version > QP_FORMAT_VERSION)
        return QP_EINVAL;
    wb_t out = { 0 };
    int rc = version == QP_FORMAT_V5 ? encode_v5(d, &out)
                                     : encode_chunked(d, version, threads, &out);
    if (rc < 0) {
        free(out.p);
        return rc;
    }
    uint64_t id;
    qp_desc_id(out.p, out.len, &id);
    memcpy(out.p + offsetof(qp_desc_hdr_t, id), &id, sizeof(id));
    uint8_t *shrunk = realloc(out.p, out.len);
    *buf = shrunk != NULL ? shrunk : out.p;
    *len = out.len;
    return 0;
}

int
qp_desc_serialize(const qp_desc_t *d, uint8_t **buf, size_t *len)
{
    return qp_desc_serialize_threads(d, 1, buf, len);
}

int
qp_desc_serialize_threads(const qp_desc_t *d, unsigned threads, uint8_t **buf, size_t *len)
{
    if (d == NULL || buf == NULL || len == NULL)
        return QP_EINVAL;
    if (qp_desc_validate(d, NULL, 0) < 0)
        return QP_EINVAL;
    return qp_desc_encode_threads(d, QP_FORMAT_VERSION, threads, buf, len);
}
