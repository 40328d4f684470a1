/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The description (.qpt.desc): serialization for the rewriter, parsing and validation of
 * untrusted bytes for qp. In memory the records are the qp_format.h structs; on disk
 * (version 5) a fixed header and an LZMA2 stream of varints and deltas (qp_format.h): the
 * encoder is total (any struct contents round-trip), the decoder bounds-checks every
 * value and then validates the result.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <lzma.h>
#include <string.h>

#include "base/qp_bytes.h"
#include "cfg/cfg.h"
#include "driver/qp_desc.h"

/* Edge kinds 0..CFG_NEDGE_KINDS-1 must be cfg's; the format relies on the same values. */
_Static_assert(CFG_EDGE_FALL == 0 && CFG_EDGE_CALLRET == 5 && CFG_EDGE_RETURN == 6
                   && CFG_EDGE_UNRESOLVED == 9 && CFG_NEDGE_KINDS == 10,
               "qp_format.h edge kinds are cfg_edge_kind_t values");

void
qp_why(char *why, size_t whylen, const char *fmt, ...)
{
    if (why == NULL || whylen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
}

/*****************************************************************************
 * Names and small queries
 */

const char *
qp_edge_kind_name(uint8_t kind)
{
    if (kind < CFG_NEDGE_KINDS)
        return cfg_edge_kind_names[kind];
    if (kind == QP_EDGE_ENTRY)
        return "entry";
    if (kind == QP_EDGE_ROOT)
        return "root";
    return "?";
}

int
qp_edge_kind_leaves(uint8_t kind)
{
    return kind == CFG_EDGE_RETURN || kind == CFG_EDGE_TAILCALL || kind == CFG_EDGE_NORETURN
        || kind == CFG_EDGE_UNRESOLVED;
}

const char *
qp_desc_str(const qp_desc_t *d, uint32_t off)
{
    if (d == NULL || d->strtab == NULL || off >= d->hdr.strtab_size)
        return "";
    return d->strtab + off;
}

uint32_t
qp_desc_entry_edge(const qp_desc_t *d, uint32_t proc)
{
    if (d == NULL || proc >= d->hdr.nprocs)
        return QP_VIRT;
    const qp_desc_proc_t *p = &d->procs[proc];
    for (uint32_t i = 0; i < p->nedges; i++)
        if (d->edges[p->edge + i].kind == QP_EDGE_ENTRY)
            return p->edge + i;
    return QP_VIRT;
}

int
qp_desc_add_string(qp_desc_t *d, const char *s, uint32_t *off)
{
    if (d == NULL || s == NULL || off == NULL)
        return QP_EINVAL;
    if (d->strtab == NULL) {
        d->strtab = calloc(1, 64);
        if (d->strtab == NULL)
            return QP_ENOMEM;
        d->strtab_cap = 64;
        d->hdr.strtab_size = 1; /* offset 0 is "" */
    }
    if (s[0] == '\0') {
        *off = 0;
        return 0;
    }
    size_t n = strlen(s) + 1, size = d->hdr.strtab_size;
    if (n > UINT32_MAX - size)
        return QP_ERANGE;
    if (size + n > d->strtab_cap) {
        size_t cap = d->strtab_cap;
        while (cap < size + n)
            cap *= 2;
        char *t = realloc(d->strtab, cap);
        if (t == NULL)
            return QP_ENOMEM;
        d->strtab = t;
        d->strtab_cap = cap;
    }
    memcpy(d->strtab + size, s, n);
    *off = (uint32_t)size;
    d->hdr.strtab_size = (uint32_t)(size + n);
    return 0;
}

void
qp_desc_free(qp_desc_t *d)
{
    if (d == NULL)
        return;
    free(d->procs);
    free(d->blocks);
    free(d->edges);
    free(d->calls);
    free(d->strtab);
    memset(d, 0, sizeof(*d));
}

uint32_t
qp_desc_first_call(const qp_desc_t *d, uint32_t proc)
{
    uint32_t lo = 0, hi = d->hdr.ncalls, first = d->procs[proc].block;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (d->calls[mid].block < first)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/*****************************************************************************
 * Validation
 */

/* True when [first, first + n) lies inside an array of TOTAL elements. */
static int
range_ok(uint32_t first, uint32_t n, uint32_t total)
{
    return first <= total && n <= total - first;
}

static int
counter_ok(const qp_desc_t *d, uint32_t counter)
{
    return counter == QP_NOCOUNTER || counter < d->hdr.ncounters;
}

static int
validate_strtab(const qp_desc_t *d, char *why, size_t whylen)
{
    uint32_t n = d->hdr.strtab_size;
    if (n == 0 || d->strtab == NULL || d->strtab[0] != '\0') {
        qp_why(why, whylen, "string table missing or not starting with an empty string");
        return QP_EFORMAT;
    }
    /* A final NUL makes every offset below the size a NUL-terminated string. */
    if (d->strtab[n - 1] != '\0') {
        qp_why(why, whylen, "string table not NUL-terminated");
        return QP_EFORMAT;
    }
    return 0;
}

static int
validate_blocks(const qp_desc_t *d, char *why, size_t whylen)
{
    for (uint32_t i = 0; i < d->hdr.nblocks; i++) {
        const qp_desc_block_t *b = &d->blocks[i];
        if (!counter_ok(d, b->counter)) {
            qp_why(why, whylen, "block %u: counter %u out of range (%u counters)", i,
                   b->counter, d->hdr.ncounters);
            return QP_EFORMAT;
        }
        if (b->start + b->size < b->start || b->ninsns > b->size
            || (b->size > 0 && b->ninsns == 0)) {
            qp_why(why, whylen, "block %u: bad extent (start 0x%llx, %u bytes, %u instructions)",
                   i, (unsigned long long)b->start, b->size, b->ninsns);
            return QP_EFORMAT;
        }
    }
    return 0;
}

static int
kind_ok(uint8_t kind)
{
    return kind < CFG_NEDGE_KINDS || kind == QP_EDGE_ENTRY || kind == QP_EDGE_ROOT;
}

/* One edge on its own: kind, which ends may be X, counter, block indices. */
static int
validate_edge(const qp_desc_t *d, uint32_t i, char *why, size_t whylen)
{
    const qp_desc_edge_t *e = &d->edges[i];
    int from_x = e->from == QP_VIRT, to_x = e->to == QP_VIRT;
    const char *bad = NULL;
    if (!kind_ok(e->kind))
        bad = "unknown kind";
    else if ((!from_x && e->from >= d->hdr.nblocks) || (!to_x && e->to >= d->hdr.nblocks))
        bad = "block index out of range";
    else if (from_x != (e->kind == QP_EDGE_ENTRY || e->kind == QP_EDGE_ROOT))
        bad = "only entry and root edges start at X";
    else if (to_x != qp_edge_kind_leaves(e->kind))
        bad = "only return, tailcall, noreturn and unresolved edges end at X";
    else if (!counter_ok(d, e->counter))
        bad = "counter out of range";
    if (bad != NULL) {
        qp_why(why, whylen, "edge %u (%u -> %u, kind %u): %s", i, e->from, e->to, e->kind,
               bad);
        return QP_EFORMAT;
    }
    return 0;
}

/* True when block index B (or X) belongs to procedure P. */
static int
in_proc(const qp_desc_proc_t *p, uint32_t b)
{
    return b == QP_VIRT || (b >= p->block && b - p->block < p->nblocks);
}

static int
validate_proc(const qp_desc_t *d, uint32_t i, char *why, size_t whylen)
{
    const qp_desc_proc_t *p = &d->procs[i];
    uint32_t nstr = d->hdr.strtab_size;
    if (p->name >= nstr || p->reason >= nstr) {
        qp_why(why, whylen, "procedure %u: string offset out of range", i);
        return QP_EFORMAT;
    }
    if (!range_ok(p->block, p->nblocks, d->hdr.nblocks)
        || !range_ok(p->edge, p->nedges, d->hdr.nedges)) {
        qp_why(why, whylen, "procedure %u (%s): blocks or edges outside the arrays", i,
               d->strtab + p->name);
        return QP_EFORMAT;
    }
    if (p->miss > d->hdr.ncounters) {
        qp_why(why, whylen, "procedure %u (%s): miss counter %u out of range", i,
               d->strtab + p->name, p->miss - 1);
        return QP_EFORMAT;
    }
    uint32_t nentry = 0;
    for (uint32_t k = 0; k < p->nedges; k++) {
        const qp_desc_edge_t *e = &d->edges[p->edge + k];
        if (!in_proc(p, e->from) || !in_proc(p, e->to)) {
            qp_why(why, whylen, "procedure %u (%s): edge %u leads to another procedure's block",
                   i, d->strtab + p->name, p->edge + k);
            return QP_EFORMAT;
        }
        if (e->kind == QP_EDGE_ENTRY) {
            nentry++;
            if (e->to != p->block) {
                qp_why(why, whylen, "procedure %u (%s): entry edge to a block other than the "
                       "entry block", i, d->strtab + p->name);
                return QP_EFORMAT;
            }
        }
    }
    if ((p->flags & QP_PROC_MEASURED) && (p->nblocks == 0 || nentry != 1)) {
        qp_why(why, whylen, "measured procedure %u (%s): %s", i, d->strtab + p->name,
               p->nblocks == 0 ? "no blocks" : "not exactly one entry edge");
        return QP_EFORMAT;
    }
    return 0;
}

/* The call sites: in block order, kinds known, ends inside the arrays. */
static int
validate_calls(const qp_desc_t *d, char *why, size_t whylen)
{
    for (uint32_t i = 0; i < d->hdr.ncalls; i++) {
        const qp_desc_call_t *c = &d->calls[i];
        int tail = c->kind == QP_CALL_TAIL || c->kind == QP_CALL_TAIL_INDIRECT;
        const char *bad = NULL;
        if (c->kind < QP_CALL_DIRECT || c->kind > QP_CALL_TAIL_INDIRECT)
            bad = "unknown kind";
        else if (c->block >= d->hdr.nblocks || (i > 0 && c->block < d->calls[i - 1].block))
            bad = "block out of range or out of order";
        else if (tail ? c->edge >= d->hdr.nedges || d->edges[c->edge].from != c->block
                 : c->kind == QP_CALL_INDIRECT
                     ? c->edge != QP_VIRT && (c->edge >= d->hdr.ncounters
                                              || d->hdr.ncounters - c->edge < QP_TARGET_WORDS)
                     : c->edge != QP_VIRT)
            bad = "edge does not fit the kind";
        else if (c->name >= d->hdr.strtab_size)
            bad = "string offset out of range";
        else if (c->flags & ~(QP_CALLF_LONGJMP | QP_CALLF_THROW | QP_CALLF_EXEC))
            bad = "unknown flags";
        else if ((c->target == 0) != (c->kind == QP_CALL_INDIRECT
                                      || c->kind == QP_CALL_TAIL_INDIRECT))
            bad = "a target only for direct calls";
        if (bad != NULL) {
            qp_why(why, whylen, "call site %u (block %u, kind %u): %s", i, c->block, c->kind,
                   bad);
            return QP_EFORMAT;
        }
    }
    return 0;
}

int
qp_desc_validate(const qp_desc_t *d, char *why, size_t whylen)
{
    if (d == NULL)
        return QP_EINVAL;
    const qp_desc_hdr_t *h = &d->hdr;
    if (h->driver != QP_DRIVER_QP && h->driver != QP_DRIVER_NAIVE && h->driver != QP_DRIVER_LIB) {
        qp_why(why, whylen, "unknown driver kind %u", h->driver);
        return QP_EFORMAT;
    }
    if ((h->nprocs && d->procs == NULL) || (h->nblocks && d->blocks == NULL)
        || (h->nedges && d->edges == NULL) || (h->ncalls && d->calls == NULL)) {
        qp_why(why, whylen, "an array is missing");
        return QP_EFORMAT;
    }
    QP_CHECK(validate_strtab(d, why, whylen));
    QP_CHECK(validate_blocks(d, why, whylen));
    for (uint32_t i = 0; i < h->nedges; i++)
        QP_CHECK(validate_edge(d, i, why, whylen));
    for (uint32_t i = 0; i < h->nprocs; i++)
        QP_CHECK(validate_proc(d, i, why, whylen));
    QP_CHECK(validate_calls(d, why, whylen));
    return 0;
}

/*****************************************************************************
 * Serialization and the id
 */

#define FNV64_BASIS 0xcbf29ce484222325ull
#define FNV64_PRIME 0x100000001b3ull

static uint64_t
fnv1a(uint64_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= FNV64_PRIME;
    }
    return h;
}

int
qp_desc_id(const uint8_t *buf, size_t len, uint64_t *id)
{
    if (buf == NULL || id == NULL || len < sizeof(qp_desc_hdr_t))
        return QP_EINVAL;
    size_t id_at = offsetof(qp_desc_hdr_t, id), id_end = id_at + sizeof(uint64_t);
    uint64_t h = fnv1a(FNV64_BASIS, buf, id_at);
    h = fnv1a(h, buf + id_end, len - id_end);
    *id = h;
    return 0;
}

/*****************************************************************************
 * The compact body (since version 3, qp_format.h): LEB128 varints, zigzag deltas, raw
 * LZMA2 (version 5; zlib before)
 */

/* Zigzag: a difference taken as signed, small magnitudes to small numbers. */
static uint64_t
zz64(uint64_t x, uint64_t prev)
{
    uint64_t u = x - prev;
    return (u << 1) ^ (0 - (u >> 63));
}

static uint64_t
zz32(uint32_t x, uint32_t prev)
{
    uint32_t u = x - prev;
    return (uint32_t)((u << 1) ^ (0u - (u >> 31)));
}

static uint64_t
unzz64(uint64_t z, uint64_t prev)
{
    return prev + ((z >> 1) ^ (0 - (z & 1)));
}

static uint32_t
unzz32(uint64_t z, uint32_t prev)
{
    return prev + (uint32_t)((z >> 1) ^ (0 - (z & 1)));
}

/* A procedure by its entry, to find a callee's. */
typedef struct by_entry {
    uint64_t entry;
    uint32_t proc;
} by_entry_t;

/*
 * The running values the deltas are taken from (qp_format.h names them), and what both
 * directions look up: D's blocks (decoded before the edges) and its procedures by entry
 * (decoded before the calls).
 */
typedef struct run {
    uint32_t name, block, edge, counter, from, call_block, call_edge, call_name;
    uint64_t entry, new_entry, start, new_start, ret_addr, target;
    const qp_desc_t *d;
    by_entry_t *entries; /* d->hdr.nprocs, by entry then index */
} run_t;

static int
cmp_by_entry(const void *a, const void *b)
{
    const by_entry_t *x = a, *y = b;
    if (x->entry != y->entry)
        return x->entry < y->entry ? -1 : 1;
    return x->proc < y->proc ? -1 : x->proc > y->proc;
}

/* R's index of D's procedures by entry (once they are known). */
static int
index_entries(run_t *r)
{
    uint32_t n = r->d->hdr.nprocs;
    r->entries = malloc((n ? n : 1) * sizeof(by_entry_t));
    if (r->entries == NULL)
        return QP_ENOMEM;
    for (uint32_t i = 0; i < n; i++)
        r->entries[i] = (by_entry_t) { r->d->procs[i].entry, i };
    qsort(r->entries, n, sizeof(by_entry_t), cmp_by_entry);
    return 0;
}

/* The name of the first procedure whose entry is TARGET, or UINT64_MAX when none has. */
static uint64_t
callee_name(const run_t *r, uint64_t target)
{
    uint32_t lo = 0, hi = r->d->hdr.nprocs;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (r->entries[mid].entry < target)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == r->d->hdr.nprocs || r->entries[lo].entry != target)
        return UINT64_MAX;
    return r->d->procs[r->entries[lo].proc].name;
}

/* What a return address is a delta from: the new address of the block returned to
 * (TO), when it moved (most often equal), else the previous return address. */
static uint64_t
ret_base(const run_t *r, uint32_t to)
{
    if (to != QP_VIRT && to < r->d->hdr.nblocks && r->d->blocks[to].new_start != 0)
        return r->d->blocks[to].new_start;
    return r->ret_addr;
}

static void
put_proc(wb_t *w, run_t *r, const qp_desc_proc_t *p)
{
    wb_uleb(w, (uint64_t)p->flags << 3 | (uint64_t)(p->miss != 0) << 2
                 | (uint64_t)(p->reason != 0) << 1 | (p->new_entry != 0));
    wb_uleb(w, zz32(p->name, r->name));
    wb_uleb(w, zz64(p->entry, r->entry));
    r->name = p->name;
    r->entry = p->entry;
    if (p->new_entry != 0) {
        wb_uleb(w, zz64(p->new_entry, r->new_entry));
        r->new_entry = p->new_entry;
    }
    wb_uleb(w, zz32(p->block, r->block));
    wb_uleb(w, p->nblocks);
    wb_uleb(w, zz32(p->edge, r->edge));
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
    wb_uleb(w, zz32(counter, r->counter));
    r->counter = counter + 1;
}

static void
put_block(wb_t *w, run_t *r, const qp_desc_block_t *b)
{
    wb_uleb(w, (uint64_t)b->ninsns << 2 | (uint64_t)(b->new_start != 0) << 1
                 | (b->counter != QP_NOCOUNTER));
    wb_uleb(w, zz64(b->start, r->start));
    wb_uleb(w, b->size);
    r->start = b->start + b->size;
    if (b->new_start != 0) {
        wb_uleb(w, zz64(b->new_start, r->new_start));
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
        wb_uleb(w, 1 + zz32(e->from, r->from));
        r->from = ref = e->from;
    } else
        wb_uleb(w, 0);
    wb_uleb(w, e->to == QP_VIRT ? 0 : 1 + zz32(e->to, ref));
    if (e->counter != QP_NOCOUNTER)
        put_counter(w, r, e->counter);
    if (e->ret_addr != 0) {
        wb_uleb(w, zz64(e->ret_addr, ret_base(r, e->to)));
        r->ret_addr = e->ret_addr;
    }
}

static void
put_call(wb_t *w, run_t *r, const qp_desc_call_t *c)
{
    int callees = c->target != 0 && callee_name(r, c->target) == c->name;
    wb_uleb(w, (uint64_t)c->flags << 11 | (uint64_t)c->kind << 3 | (uint64_t)callees << 2
                 | (uint64_t)(c->target != 0) << 1 | (c->edge != QP_VIRT));
    wb_uleb(w, zz32(c->block, r->call_block));
    r->call_block = c->block;
    if (c->edge != QP_VIRT) {
        wb_uleb(w, zz32(c->edge, r->call_edge));
        r->call_edge = c->edge;
    }
    if (c->target != 0) {
        wb_uleb(w, zz64(c->target, r->target));
        r->target = c->target;
    }
    if (!callees) {
        wb_uleb(w, zz32(c->name, r->call_name));
        r->call_name = c->name;
    }
}

/* The inflated body of D: its records and string table. */
static int
encode_body(const qp_desc_t *d, wb_t *w)
{
    run_t r;
    memset(&r, 0, sizeof(r));
    r.d = d;
    if (index_entries(&r) < 0)
        return QP_ENOMEM;
    for (uint32_t i = 0; i < d->hdr.nprocs; i++)
        put_proc(w, &r, &d->procs[i]);
    for (uint32_t i = 0; i < d->hdr.nblocks; i++)
        put_block(w, &r, &d->blocks[i]);
    for (uint32_t i = 0; i < d->hdr.nedges; i++)
        put_edge(w, &r, &d->edges[i]);
    for (uint32_t i = 0; i < d->hdr.ncalls; i++)
        put_call(w, &r, &d->calls[i]);
    wb_put(w, d->strtab, d->hdr.strtab_size);
    free(r.entries);
    if (w->err)
        return QP_ENOMEM;
    return w->len > UINT32_MAX ? QP_ERANGE : 0;
}

/*
 * The body's compression (qp_format.h): raw LZMA2 with lc 1, lp 0, pb 0 (varints are
 * bytes with no alignment) and the dictionary of preset 6 (8 MiB) or, for a body over
 * LZMA_SMALL, of preset 1 (1 MiB): preset 6 takes 0.3 s a MB, preset 1 0.04 s (cc1's
 * 16.8 MB of records: 4.5 MB in 0.7 s, zlib -6 4.8 MB in 0.6 s; ls's 68 KB: 24.8 KB, zlib
 * 28.1 KB). The decoder's dictionary is the larger one.
 */
#define LZMA_SMALL (2u << 20)
#define LZMA_DICT_MAX (8u << 20)

static int
lzma_options(uint32_t preset, lzma_options_lzma *o)
{
    if (lzma_lzma_preset(o, preset))
        return QP_EINVAL;
    o->lc = 1;
    o->lp = 0;
    o->pb = 0;
    return 0;
}

int
qp_desc_encode(const qp_desc_t *d, uint8_t **buf, size_t *len)
{
    if (d == NULL || buf == NULL || len == NULL)
        return QP_EINVAL;
    wb_t w = { 0 };
    int rc = encode_body(d, &w);
    size_t cap = w.len + (w.len >> 3) + 4096, zlen = 0; /* LZMA2 stores what does not shrink */
    uint8_t *b = rc == 0 ? malloc(sizeof(qp_desc_hdr_t) + cap) : NULL;
    if (rc == 0 && b == NULL)
        rc = QP_ENOMEM;
    lzma_options_lzma o;
    if (rc == 0)
        rc = lzma_options(w.len <= LZMA_SMALL ? 6 : 1, &o);
    if (rc == 0) {
        lzma_filter f[2] = { { LZMA_FILTER_LZMA2, &o }, { LZMA_VLI_UNKNOWN, NULL } };
        lzma_ret lr = lzma_raw_buffer_encode(f, NULL, w.p, w.len, b + sizeof(qp_desc_hdr_t),
                                             &zlen, cap);
        if (lr != LZMA_OK)
            rc = lr == LZMA_MEM_ERROR ? QP_ENOMEM : QP_ERANGE;
    }
    free(w.p);
    if (rc < 0) {
        free(b);
        return rc;
    }
    qp_desc_hdr_t h = d->hdr;
    memcpy(h.magic, QP_DESC_MAGIC, sizeof(h.magic));
    h.version = QP_FORMAT_VERSION;
    h.body_size = (uint32_t)w.len;
    h.id = 0;
    memcpy(b, &h, sizeof(h));
    size_t n = sizeof(h) + zlen;
    qp_desc_id(b, n, &h.id);
    memcpy(b + offsetof(qp_desc_hdr_t, id), &h.id, sizeof(h.id));
    uint8_t *shrunk = realloc(b, n);
    *buf = shrunk != NULL ? shrunk : b;
    *len = n;
    return 0;
}

int
qp_desc_serialize(const qp_desc_t *d, uint8_t **buf, size_t *len)
{
    if (d == NULL || buf == NULL || len == NULL)
        return QP_EINVAL;
    if (qp_desc_validate(d, NULL, 0) < 0)
        return QP_EINVAL;
    return qp_desc_encode(d, buf, len);
}

/*****************************************************************************
 * Parsing
 */

/*
 * The body being read, inflated a window at a time (a whole body held at once cost
 * chromium's qp 150 MB more at its peak); `bad` once a varint ran past the end or out
 * of range. Without a stream (Z NULL), P holds the whole body.
 */
typedef struct rbuf {
    const uint8_t *p;
    size_t n, off;
    int bad;
    lzma_stream *z;   /* the body's stream, or NULL */
    uint8_t *win;     /* the window it inflates into (WINSIZE bytes) */
    size_t winsize;   /* WINDOW, or less for a smaller body */
    uint64_t left;    /* body bytes (header's body_size) not inflated yet */
    lzma_ret zret;    /* the stream's last status (LZMA_OK while it runs) */
} rbuf_t;

enum { WINDOW = 1u << 20 };

/* Inflate the next window of R's stream (at most the LEFT bytes the header promises).
 * Returns the bytes now in R->p, 0 at the end or on a stream error (R->zret). */
static size_t
refill(rbuf_t *r)
{
    if (r->z == NULL || r->left == 0 || r->zret != LZMA_OK)
        return 0;
    size_t want = r->left < r->winsize ? (size_t)r->left : r->winsize;
    r->z->next_out = r->win;
    r->z->avail_out = want;
    while (r->z->avail_out > 0 && r->zret == LZMA_OK) {
        r->zret = lzma_code(r->z, LZMA_FINISH);
        if (r->zret == LZMA_OK && r->z->avail_in == 0 && r->z->avail_out > 0)
            r->zret = LZMA_BUF_ERROR; /* the input ended inside the stream */
    }
    size_t got = want - r->z->avail_out;
    if (r->zret == LZMA_STREAM_END && got == want)
        r->zret = LZMA_OK; /* ended exactly here: said again by the next call */
    r->left -= got;
    r->p = r->win;
    r->n = got;
    r->off = 0;
    return got;
}

static uint64_t
get_u(rbuf_t *r)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (r->off == r->n && refill(r) == 0)
            break;
        uint8_t b = r->p[r->off++];
        if (shift == 63 && b > 1)
            break; /* more than 64 bits */
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    r->bad = 1;
    return 0;
}

/* Copy the next N body bytes of R into OUT; 0, or -1 when fewer are left. */
static int
get_bytes(rbuf_t *r, uint8_t *out, size_t n)
{
    while (n > 0) {
        if (r->off == r->n && refill(r) == 0)
            return -1;
        size_t k = r->n - r->off < n ? r->n - r->off : n;
        memcpy(out, r->p + r->off, k);
        out += k;
        r->off += k;
        n -= k;
    }
    return 0;
}

/* A varint of at most MAX. */
static uint64_t
get_max(rbuf_t *r, uint64_t max)
{
    uint64_t v = get_u(r);
    if (v > max) {
        r->bad = 1;
        return 0;
    }
    return v;
}

static uint32_t
get_u32(rbuf_t *r)
{
    return (uint32_t)get_max(r, UINT32_MAX);
}

static void
get_proc(rbuf_t *b, run_t *r, qp_desc_proc_t *p)
{
    uint64_t head = get_max(b, (uint64_t)UINT32_MAX << 3 | 7);
    p->flags = (uint32_t)(head >> 3);
    p->name = r->name = unzz32(get_u32(b), r->name);
    p->entry = r->entry = unzz64(get_u(b), r->entry);
    if (head & 1)
        p->new_entry = r->new_entry = unzz64(get_u(b), r->new_entry);
    p->block = unzz32(get_u32(b), r->block);
    p->nblocks = get_u32(b);
    p->edge = unzz32(get_u32(b), r->edge);
    p->nedges = get_u32(b);
    r->block = p->block + p->nblocks;
    r->edge = p->edge + p->nedges;
    if (head & 2)
        p->reason = get_u32(b);
    if (head & 4)
        p->miss = get_u32(b);
}

static uint32_t
get_counter(rbuf_t *b, run_t *r)
{
    uint32_t c = unzz32(get_u32(b), r->counter);
    r->counter = c + 1;
    return c;
}

static void
get_block(rbuf_t *b, run_t *r, qp_desc_block_t *k)
{
    uint64_t head = get_max(b, (uint64_t)UINT32_MAX << 2 | 3);
    k->ninsns = (uint32_t)(head >> 2);
    k->start = unzz64(get_u(b), r->start);
    k->size = get_u32(b);
    r->start = k->start + k->size;
    if (head & 2) {
        k->new_start = unzz64(get_u(b), r->new_start);
        r->new_start = k->new_start + k->size;
    }
    k->counter = head & 1 ? get_counter(b, r) : QP_NOCOUNTER;
}

/* An edge end: 0 for X, else 1 + a delta from REF. */
static uint32_t
get_end(rbuf_t *b, uint32_t ref)
{
    uint64_t v = get_max(b, (uint64_t)UINT32_MAX + 1);
    return v == 0 ? QP_VIRT : unzz32(v - 1, ref);
}

static void
get_edge(rbuf_t *b, run_t *r, qp_desc_edge_t *e)
{
    uint64_t head = get_max(b, 0xffu << 2 | 3);
    e->kind = (uint8_t)(head >> 2);
    e->from = get_end(b, r->from);
    if (e->from != QP_VIRT)
        r->from = e->from;
    e->to = get_end(b, r->from);
    e->counter = head & 2 ? get_counter(b, r) : QP_NOCOUNTER;
    if (head & 1)
        e->ret_addr = r->ret_addr = unzz64(get_u(b), ret_base(r, e->to));
}

static void
get_call(rbuf_t *b, run_t *r, qp_desc_call_t *c)
{
    uint64_t head = get_max(b, 0xffu << 11 | 0x7ff);
    c->flags = (uint8_t)(head >> 11);
    c->kind = (uint8_t)(head >> 3);
    c->block = r->call_block = unzz32(get_u32(b), r->call_block);
    c->edge = head & 1 ? (r->call_edge = unzz32(get_u32(b), r->call_edge)) : QP_VIRT;
    if (head & 2)
        c->target = r->target = unzz64(get_u(b), r->target);
    if (head & 4) {
        uint64_t name = c->target != 0 ? callee_name(r, c->target) : UINT64_MAX;
        if (name == UINT64_MAX)
            b->bad = 1; /* no procedure there to take the name from */
        c->name = (uint32_t)name;
    } else
        c->name = r->call_name = unzz32(get_u32(b), r->call_name);
}

/* Allocate *P for N elements of SIZE (NULL for none). */
static int
alloc_part(void **p, uint32_t n, size_t size)
{
    *p = n ? calloc(n, size) : NULL;
    return n && *p == NULL ? QP_ENOMEM : 0;
}

/* The records of the body B into OUT (whose header has the counts), then its string
 * table: the body's last strtab_size bytes. */
static int
decode_body(rbuf_t *b, qp_desc_t *out, char *why, size_t whylen)
{
    const qp_desc_hdr_t *h = &out->hdr;
    if (alloc_part((void **)&out->procs, h->nprocs, sizeof(qp_desc_proc_t)) < 0
        || alloc_part((void **)&out->blocks, h->nblocks, sizeof(qp_desc_block_t)) < 0
        || alloc_part((void **)&out->edges, h->nedges, sizeof(qp_desc_edge_t)) < 0
        || alloc_part((void **)&out->calls, h->ncalls, sizeof(qp_desc_call_t)) < 0
        || alloc_part((void **)&out->strtab, h->strtab_size, 1) < 0) {
        qp_why(why, whylen, "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    run_t r;
    memset(&r, 0, sizeof(r));
    r.d = out;
    const char *part = NULL;
    uint32_t i = 0;
    for (i = 0; i < h->nprocs && !b->bad; i++)
        get_proc(b, &r, &out->procs[i]);
    part = b->bad ? "procedure" : NULL;
    if (part == NULL && index_entries(&r) < 0) {
        qp_why(why, whylen, "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    for (i = 0; part == NULL && i < h->nblocks && !b->bad; i++)
        get_block(b, &r, &out->blocks[i]);
    part = part ? part : b->bad ? "block" : NULL;
    for (i = 0; part == NULL && i < h->nedges && !b->bad; i++)
        get_edge(b, &r, &out->edges[i]);
    part = part ? part : b->bad ? "edge" : NULL;
    for (i = 0; part == NULL && i < h->ncalls && !b->bad; i++)
        get_call(b, &r, &out->calls[i]);
    part = part ? part : b->bad ? "call site" : NULL;
    free(r.entries);
    if (part != NULL) {
        qp_why(why, whylen, "description body: %s %u truncated or a value out of range", part,
               i - 1);
        return QP_EFORMAT;
    }
    /* What is left of the body is the string table, exactly. */
    uint64_t rest = (uint64_t)(b->n - b->off) + b->left;
    if (rest != h->strtab_size || get_bytes(b, (uint8_t *)out->strtab, h->strtab_size) < 0) {
        qp_why(why, whylen, "description body: %llu bytes after the records, the string "
               "table has %u", (unsigned long long)rest, h->strtab_size);
        return QP_EFORMAT;
    }
    return 0;
}

/* The most bytes a record can take (qp_format.h): a procedure, a block, an edge, a call. */
enum { MAX_PROC = 64, MAX_BLOCK = 40, MAX_EDGE = 32, MAX_CALL = 32 };

/* The header's sizes against each other and LEN bytes of LZMA2 stream: no body size that
 * its records could not fill, none that the stream could not give (far fewer than 65536
 * bytes per stream byte). */
static int
check_sizes(const qp_desc_hdr_t *h, size_t zlen, char *why, size_t whylen)
{
    uint64_t least = (uint64_t)h->nprocs + h->nblocks + h->nedges + h->ncalls
        + h->strtab_size;
    uint64_t most = (uint64_t)h->nprocs * MAX_PROC + (uint64_t)h->nblocks * MAX_BLOCK
        + (uint64_t)h->nedges * MAX_EDGE + (uint64_t)h->ncalls * MAX_CALL + h->strtab_size;
    if (h->body_size < least || h->body_size > most
        || h->body_size > (uint64_t)zlen * 65536 + 64) {
        qp_why(why, whylen, "description header: body of %u bytes does not fit its counts "
               "(%u procedures, %u blocks, %u edges, %u call sites, %u bytes of strings) or "
               "its %zu compressed bytes", h->body_size, h->nprocs, h->nblocks, h->nedges,
               h->ncalls, h->strtab_size, zlen);
        return QP_EFORMAT;
    }
    return 0;
}

static int
check_header(const uint8_t *buf, size_t len, qp_desc_hdr_t *h, char *why, size_t whylen)
{
    if (len < sizeof(*h)) {
        qp_why(why, whylen, "description truncated (%zu bytes, header needs %zu)", len,
               sizeof(*h));
        return QP_EFORMAT;
    }
    memcpy(h, buf, sizeof(*h));
    if (memcmp(h->magic, QP_DESC_MAGIC, sizeof(h->magic)) != 0) {
        qp_why(why, whylen, "not a qpt description (bad magic)");
        return QP_EFORMAT;
    }
    if (h->version != QP_FORMAT_VERSION) {
        qp_why(why, whylen, "description version %u, made by %s qpt: this qp reads version %u "
               "(rewrite the program again with this qpt-rewrite)", h->version,
               h->version < QP_FORMAT_VERSION ? "an older" : "a newer", QP_FORMAT_VERSION);
        return QP_EFORMAT;
    }
    return check_sizes(h, len - sizeof(*h), why, whylen);
}

/*
 * The end of B's stream, after the records were read (or refused): the rest inflated
 * and dropped, then whether the stream gave exactly the header's body_size bytes and
 * ended (a stream that fails is reported before anything read from it). *END is where
 * the stream ended in BUF.
 */
static int
finish_stream(rbuf_t *b, const qp_desc_hdr_t *h, size_t *end, char *why, size_t whylen)
{
    while (refill(b) > 0)
        ;
    lzma_ret lr = b->zret;
    int more = 0;
    if (lr == LZMA_OK && b->left == 0) {
        /* Every promised byte came: the stream must end here, with nothing more. */
        uint8_t one;
        b->z->next_out = &one;
        b->z->avail_out = 1;
        lr = lzma_code(b->z, LZMA_FINISH);
        more = b->z->avail_out == 0;
        if (lr == LZMA_OK && !more)
            lr = LZMA_BUF_ERROR; /* the input ended without the end of the stream */
    }
    if (lr != LZMA_STREAM_END || more || b->left != 0) {
        qp_why(why, whylen, "description corrupted or truncated (its body does not "
               "decompress to the %u bytes its header says: %s)", h->body_size,
               lr == LZMA_STREAM_END && !more ? "fewer"
               : lr == LZMA_MEM_ERROR ? "out of memory"
               : lr == LZMA_BUF_ERROR || more ? "more, or the stream ends early"
                                              : "bad stream");
        return lr == LZMA_MEM_ERROR ? QP_ENOMEM : QP_EFORMAT;
    }
    *end = sizeof(*h) + (size_t)b->z->total_in;
    return 0;
}

/*
 * TODO(#31): chromium's description (9.6 million blocks, 13.9 million edges) takes 2.5 s
 * of CPU to read (1.4 s of it LZMA) and 780 MB as structs, though only 16% of its
 * procedures ran. Reading it lazily needs a new version: the records of consecutive
 * procedures in chunks that are streams of their own, an index of them (first
 * procedure, block, edge and call site, the counters they use, where the stream is),
 * and per procedure what solving it with zero inputs gives, so that a report decodes
 * only the chunks with a counter that counted (version 5 still read whole).
 */
int
qp_desc_parse(const uint8_t *buf, size_t len, qp_desc_t *out, char *why, size_t whylen)
{
    if (buf == NULL || out == NULL)
        return QP_EINVAL;
    memset(out, 0, sizeof(*out));
    qp_desc_hdr_t h;
    QP_CHECK(check_header(buf, len, &h, why, whylen));
    lzma_options_lzma o;
    if (lzma_options(6, &o) < 0)
        return QP_EINVAL;
    o.dict_size = LZMA_DICT_MAX;
    lzma_filter f[2] = { { LZMA_FILTER_LZMA2, &o }, { LZMA_VLI_UNKNOWN, NULL } };
    lzma_stream z = LZMA_STREAM_INIT;
    size_t win = h.body_size < WINDOW ? h.body_size + 1 : WINDOW;
    rbuf_t b = { NULL, 0, 0, 0, &z, malloc(win), win, h.body_size, LZMA_OK };
    if (b.win == NULL || lzma_raw_decoder(&z, f) != LZMA_OK) {
        free(b.win);
        lzma_end(&z);
        qp_why(why, whylen, "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    z.next_in = buf + sizeof(h);
    z.avail_in = len - sizeof(h);
    /* The records are read as the stream inflates; a failure of the stream itself, stray
     * bytes or another id are said before what the records would say. */
    out->hdr = h;
    char rwhy[512] = "";
    int rrc = decode_body(&b, out, rwhy, sizeof(rwhy));
    size_t end = 0;
    int rc = finish_stream(&b, &h, &end, why, whylen);
    lzma_end(&z);
    free(b.win);
    /* Only zero padding (section alignment) may follow the stream. */
    for (size_t i = end; rc == 0 && i < len; i++)
        if (buf[i] != 0) {
            qp_why(why, whylen, "description has %zu stray bytes after its end", len - end);
            rc = QP_EFORMAT;
        }
    uint64_t id = 0;
    if (rc == 0 && (qp_desc_id(buf, end, &id), id != h.id)) {
        qp_why(why, whylen, "description corrupted (contents do not match id %016llx)",
               (unsigned long long)h.id);
        rc = QP_EFORMAT;
    }
    if (rc == 0 && rrc < 0) {
        qp_why(why, whylen, "%s", rwhy);
        rc = rrc;
    }
    if (rc == 0)
        rc = qp_desc_validate(out, why, whylen);
    if (rc < 0) {
        qp_desc_free(out);
        return rc;
    }
    out->strtab_cap = out->hdr.strtab_size;
    return 0;
}
