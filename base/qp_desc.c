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
#include "base/qp_edge.h"
#include "base/qp_desc.h"

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
    const qp_desc_edge_t *edges = qp_desc_proc_edges(d, proc);
    for (uint32_t i = 0; i < p->nedges; i++)
        if (edges[i].kind == QP_EDGE_ENTRY)
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

static void lazy_free(struct qp_desc_lazy *lz);

static void
keys_free(qp_desc_keys_t *k)
{
    if (k != NULL) {
        free(k->calls);
        free(k->index);
        free(k->callee);
        free(k->first);
    }
    free(k);
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
    free(d->zero);
    free(d->zero_entry);
    lazy_free(d->lazy);
    qp_entry_map_free(d->by_entry);
    free(d->by_entry);
    keys_free(d->keys);
    memset(d, 0, sizeof(*d));
}

static uint32_t lazy_first_call(const qp_desc_t *d, uint32_t proc);

/* The first call site at or after block FIRST. */
static uint32_t
first_call_at(const qp_desc_t *d, uint32_t first)
{
    uint32_t lo = 0, hi = d->hdr.ncalls;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (d->calls[mid].block < first)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

uint32_t
qp_desc_first_call(const qp_desc_t *d, uint32_t proc)
{
    return d->lazy != NULL ? lazy_first_call(d, proc) : first_call_at(d, d->procs[proc].block);
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

/* Block I of D, whose record is B (in D's array, or a lazy description's copy). */
static int
validate_block_at(const qp_desc_t *d, uint32_t i, const qp_desc_block_t *b, char *why,
                  size_t whylen)
{
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
    return 0;
}

static int
validate_blocks(const qp_desc_t *d, char *why, size_t whylen)
{
    for (uint32_t i = 0; i < d->hdr.nblocks; i++)
        QP_CHECK(validate_block_at(d, i, &d->blocks[i], why, whylen));
    return 0;
}

static int
kind_ok(uint8_t kind)
{
    return kind < CFG_NEDGE_KINDS || kind == QP_EDGE_ENTRY || kind == QP_EDGE_ROOT;
}

/* One edge on its own (edge I, record E): kind, which ends may be X, counter, block
 * indices. */
static int
validate_edge_at(const qp_desc_t *d, uint32_t i, const qp_desc_edge_t *e, char *why,
                 size_t whylen)
{
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

/* What procedure I says of itself: strings, ranges, miss counter. */
static int
validate_proc_head(const qp_desc_t *d, uint32_t i, char *why, size_t whylen)
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
    return 0;
}

/* Procedure I of D, whose edges' records start at EDGES. */
static int
validate_proc_at(const qp_desc_t *d, uint32_t i, const qp_desc_edge_t *edges, char *why,
                 size_t whylen)
{
    const qp_desc_proc_t *p = &d->procs[i];
    QP_CHECK(validate_proc_head(d, i, why, whylen));
    uint32_t nentry = 0;
    for (uint32_t k = 0; k < p->nedges; k++) {
        const qp_desc_edge_t *e = &edges[k];
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

/* The call sites: in block order, kinds known, ends inside the arrays. EDGES: the edges
 * are there to check that a tail call's edge leaves its block (else only its index is
 * checked, and the chunk's loading checks the rest). */
static int
validate_sites(const qp_desc_t *d, const qp_desc_call_t *calls, const uint32_t *index,
               uint32_t n, int edges, char *why, size_t whylen)
{
    for (uint32_t j = 0; j < n; j++) {
        const qp_desc_call_t *c = &calls[j];
        uint32_t i = index != NULL ? index[j] : j;
        int tail = c->kind == QP_CALL_TAIL || c->kind == QP_CALL_TAIL_INDIRECT;
        const char *bad = NULL;
        if (c->kind < QP_CALL_DIRECT || c->kind > QP_CALL_TAIL_INDIRECT)
            bad = "unknown kind";
        else if (c->block >= d->hdr.nblocks || (j > 0 && c->block < calls[j - 1].block))
            bad = "block out of range or out of order";
        else if (tail ? c->edge >= d->hdr.nedges || (edges && d->edges[c->edge].from != c->block)
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

/* Every rule of the call sites (EDGES: also against the edges, when present). */
static int
validate_calls(const qp_desc_t *d, int edges, char *why, size_t whylen)
{
    return validate_sites(d, d->calls, NULL, d->hdr.ncalls, edges, why, whylen);
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
        QP_CHECK(validate_edge_at(d, i, &d->edges[i], why, whylen));
    for (uint32_t i = 0; i < h->nprocs; i++)
        QP_CHECK(validate_proc_at(d, i, &d->edges[d->procs[i].edge], why, whylen));
    QP_CHECK(validate_calls(d, 1, why, whylen));
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

/*****************************************************************************
 * Procedures by entry
 */

static uint32_t
entry_hash(uint64_t entry, uint32_t mask)
{
    return (uint32_t)((entry * 0x9e3779b97f4a7c15ull) >> 32) & mask;
}

int
qp_entry_map_build(const qp_desc_t *d, int calls, qp_entry_map_t *m)
{
    uint32_t n = d->hdr.nprocs;
    uint64_t cap = 64;
    while (cap < 2 * (uint64_t)n) /* at most half full */
        cap *= 2;
    memset(m, 0, sizeof(*m));
    m->mask = (uint32_t)(cap - 1);
    m->slot = malloc(cap * sizeof(uint32_t));
    m->kind = calloc(n + 1, 1);
    if (m->slot == NULL || m->kind == NULL) {
        qp_entry_map_free(m);
        return QP_ENOMEM;
    }
    memset(m->slot, 0xff, cap * sizeof(uint32_t)); /* QP_VIRT */
    for (uint32_t i = 0; i < n; i++) { /* in index order: the first one stays */
        uint64_t e = d->procs[i].entry;
        uint32_t h = entry_hash(e, m->mask);
        while (m->slot[h] != QP_VIRT && d->procs[m->slot[h]].entry != e)
            h = (h + 1) & m->mask;
        if (m->slot[h] == QP_VIRT)
            m->slot[h] = i;
        else
            m->kind[m->slot[h]] |= QP_EMAP_SHARED;
        uint32_t f = d->procs[i].flags;
        m->kind[i] |= (f & QP_PROC_MEASURED ? QP_EMAP_MEASURED : 0)
            | (f & QP_PROC_BY_CALLS ? QP_EMAP_BY_CALLS : 0);
    }
    return calls ? qp_entry_map_calls(d, m) : 0;
}

int
qp_entry_map_calls(const qp_desc_t *d, qp_entry_map_t *m)
{
    free(m->call_proc);
    m->call_proc = malloc(((size_t)d->hdr.ncalls + 1) * sizeof(uint32_t));
    if (m->call_proc == NULL)
        return QP_ENOMEM;
    for (uint32_t k = 0; k < d->hdr.ncalls; k++)
        m->call_proc[k] = qp_entry_map_find(d, m, d->calls[k].target, NULL);
    return 0;
}

void
qp_entry_map_free(qp_entry_map_t *m)
{
    if (m == NULL)
        return;
    free(m->slot);
    free(m->kind);
    free(m->call_proc);
    memset(m, 0, sizeof(*m));
}

uint32_t
qp_entry_map_find(const qp_desc_t *d, const qp_entry_map_t *m, uint64_t entry, int *shared)
{
    uint32_t h = entry_hash(entry, m->mask);
    while (m->slot[h] != QP_VIRT && d->procs[m->slot[h]].entry != entry)
        h = (h + 1) & m->mask;
    uint32_t p = m->slot[h];
    if (shared != NULL)
        *shared = p != QP_VIRT && (m->kind[p] & QP_EMAP_SHARED);
    return p;
}

int
qp_desc_entry_map(const qp_desc_t *d, qp_entry_map_t *local, const qp_entry_map_t **out)
{
    memset(local, 0, sizeof(*local));
    if (d->by_entry != NULL) {
        *out = d->by_entry;
        return 0;
    }
    *out = local;
    return qp_entry_map_build(d, 1, local);
}

/*****************************************************************************
 * Key call sites
 */

/* Is call site C, whose target is the entry of procedure CALLEE (QP_VIRT: none) of
 * QP_EMAP_* KIND, a key site (qp_desc_keys_t)? */
static int
is_key_site(const qp_desc_call_t *c, uint32_t callee, uint8_t kind)
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
static int
keys_index_procs(const qp_desc_t *d, qp_desc_keys_t *k)
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
static int
keys_from_calls(const qp_desc_t *d, qp_desc_keys_t **out)
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
            if (!is_key_site(&d->calls[i], callee, kind))
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
        rc = keys_index_procs(d, k);
    qp_entry_map_free(&local);
    if (rc < 0) {
        keys_free(k);
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
        if (keys_from_calls(d, &k) < 0)
            return NULL;
        ((qp_desc_t *)d)->keys = k;
    }
    return d->keys;
}

/*
 * The running values the deltas are taken from (qp_format.h names them), and what both
 * directions look up: D's blocks (decoded before the edges) and its procedures by entry
 * (decoded before the calls).
 */
typedef struct run {
    uint32_t name, block, edge, counter, from, call_block, call_edge, call_name;
    uint64_t entry, new_entry, start, new_start, ret_addr, target;
    const qp_desc_t *d;
    qp_entry_map_t *entries; /* D's procedures by entry */
    uint32_t ncalls_read;    /* decoding: call sites read, their call_proc in ENTRIES */
    /* Version 6: the blocks a chunk's edges may name (blocks [win0, win0 + nwin), at
     * WIN): an edge to another block is taken as to a block that did not move. */
    const qp_desc_block_t *win;
    uint32_t win0, nwin;
    int windowed;
    int plain_names; /* version 7's chunks: every call site gives its callee's name */
    uint32_t *callee_out; /* decoding key sites: where get_call puts the callee */
} run_t;

/* R's index of D's procedures by entry (once they are known): D's own when it has one. */
static int
index_entries(run_t *r)
{
    r->entries = calloc(1, sizeof(qp_entry_map_t));
    if (r->entries == NULL || qp_entry_map_build(r->d, 0, r->entries) < 0) {
        free(r->entries);
        r->entries = NULL;
        return QP_ENOMEM;
    }
    /* Filled by get_call as it looks the callees up. */
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
static void
entries_done(run_t *r, qp_desc_t *keep)
{
    if (keep != NULL && r->entries != NULL && keep->hdr.version == QP_FORMAT_VERSION
        && keep->lazy != NULL) {
        /* Version 7: no call site's procedure (the key sites have theirs), the kinds. */
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
static uint64_t
ret_base(const run_t *r, uint32_t to)
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
    int callees = !r->plain_names && c->target != 0 && callee_name(r, c->target) == c->name;
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

/*
 * Version 6's chunks (qp_format.h): consecutive procedures with the blocks and edges
 * they use, each chunk a stream of its own, so that a reader decodes only those of the
 * procedures that ran. A chunk's counters lie in [clo, clo + cn).
 */
enum { RA_PARTS = 4 };

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
 * its end. Contents that do not cut that way (or are not valid) make one chunk.
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
        ok = range_ok(d->procs[i].block, d->procs[i].nblocks, d->hdr.nblocks)
            && range_ok(d->procs[i].edge, d->procs[i].nedges, d->hdr.nedges);
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
            c[i].ncalls = (i + 1 < k ? first_call_at(d, c[i + 1].block) : d->hdr.ncalls)
                - c[i].call;
        }
    for (uint32_t i = 0; i < k; i++)
        chunk_ranges(d, &c[i]);
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
static void
exec_next(const qp_desc_t *d, uint32_t block, uint64_t *next, uint32_t *tie)
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
        exec_next(d, calls[i].block, &next, &tie);
        wb_uleb(w, next);
        wb_uleb(w, tie - calls[i].block);
    }
}

/* The records of chunk C (its blocks, then its edges; version 7, KEYS not NULL: then its
 * call sites that are not among KEYS), each chunk's deltas from 0. *CALLBYTES: the
 * bytes of its call sites. */
static void
encode_chunk(const qp_desc_t *d, const chunk_plan_t *c, const qp_desc_keys_t *keys, wb_t *w,
             size_t *callbytes)
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
        uint32_t k = 0; /* the first key site at or after the chunk's first call site */
        while (k < keys->n && keys->index[k] < c->call)
            k++;
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
 * but the chunks' records. RAW[k], Z[k] and CB[k]: chunk k's bytes before and after
 * compression, and of its call sites. */
static int
encode_index(const qp_desc_t *d, const qp_desc_keys_t *keys, const chunk_plan_t *c,
             uint32_t nc, const size_t *raw, const size_t *z, const size_t *cb, wb_t *w)
{
    run_t r;
    memset(&r, 0, sizeof(r));
    r.d = d;
    if (index_entries(&r) < 0)
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
    for (uint32_t k = 0; k < nc; k++) {
        const chunk_plan_t *p = k ? &c[k - 1] : NULL;
        wb_uleb(w, c[k].nprocs);
        wb_uleb(w, c[k].nblocks);
        wb_uleb(w, c[k].nedges);
        wb_uleb(w, c[k].clo);
        wb_uleb(w, c[k].cn);
        wb_uleb(w, z[k]);
        wb_uleb(w, raw[k]);
        wb_uleb(w, zz64(c[k].ns_lo, p ? p->ns_lo : 0));
        wb_uleb(w, zz64(c[k].ns_hi, c[k].ns_lo));
        wb_uleb(w, c[k].nra);
        uint64_t prev = p != NULL && p->nra ? p->ra_lo[0] : 0;
        for (uint32_t j = 0; j < c[k].nra; j++) {
            wb_uleb(w, zz64(c[k].ra_lo[j], prev));
            wb_uleb(w, zz64(c[k].ra_hi[j], c[k].ra_lo[j]));
            prev = c[k].ra_hi[j];
        }
        if (keys != NULL) {
            wb_uleb(w, c[k].ncalls);
            wb_uleb(w, cb[k]);
        }
    }
    wb_put(w, d->strtab, d->hdr.strtab_size);
    entries_done(&r, NULL);
    if (w->err)
        return QP_ENOMEM;
    return w->len > UINT32_MAX ? QP_ERANGE : 0;
}

/*
 * The compression (qp_format.h): raw LZMA2 with lc 1, lp 0, pb 0 (varints are bytes with
 * no alignment), preset 6's match finder or, when the records pass LZMA_SMALL in all,
 * preset 1's (preset 6 takes 0.3 s a MB, preset 1 0.04 s), and a dictionary as large as
 * the stream's bytes (at least LZMA's 4 KiB, at most 8 MiB): the decoder, told the
 * stream's size, allocates no more.
 */
#define LZMA_SMALL (2u << 20)
#define LZMA_DICT_MAX (8u << 20)

static uint32_t
dict_for(uint64_t n)
{
    return n < LZMA_DICT_SIZE_MIN ? LZMA_DICT_SIZE_MIN : n > LZMA_DICT_MAX ? LZMA_DICT_MAX : (uint32_t)n;
}

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

/* Append the raw LZMA2 stream of IN (N bytes) to W; *ZLEN gets its size. */
static int
pack(const uint8_t *in, size_t n, uint32_t preset, wb_t *w, size_t *zlen)
{
    lzma_options_lzma o;
    QP_CHECK(lzma_options(preset, &o));
    o.dict_size = dict_for(n);
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

/* D's chunks: their records into RAWS (chunk k's RAW[k] bytes from the previous ones',
 * CB[k] of them call sites), then compressed into Z (ZLEN[k] bytes each). */
static int
pack_chunks(const qp_desc_t *d, const qp_desc_keys_t *keys, const chunk_plan_t *c, uint32_t nc,
            size_t *raw, size_t *cb, size_t *zlen, wb_t *z)
{
    wb_t raws = { 0 };
    for (uint32_t k = 0; k < nc; k++) {
        size_t before = raws.len;
        encode_chunk(d, &c[k], keys, &raws, &cb[k]);
        raw[k] = raws.len - before;
    }
    int rc = raws.err ? QP_ENOMEM : 0;
    uint32_t preset = raws.len <= LZMA_SMALL ? 6 : 1;
    size_t off = 0;
    for (uint32_t k = 0; k < nc && rc == 0; k++) {
        rc = pack(raws.p + off, raw[k], preset, z, &zlen[k]);
        off += raw[k];
    }
    free(raws.p);
    return rc;
}

/* Version 5 (qp_format.h): one stream of every record. */
static int
encode_v5(const qp_desc_t *d, wb_t *out)
{
    wb_t body = { 0 };
    run_t r;
    memset(&r, 0, sizeof(r));
    r.d = d;
    if (index_entries(&r) < 0)
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
    entries_done(&r, NULL);
    qp_desc_hdr_t h = d->hdr;
    memcpy(h.magic, QP_DESC_MAGIC, sizeof(h.magic));
    h.version = QP_FORMAT_V5;
    h.body_size = (uint32_t)body.len;
    h.id = 0;
    wb_put(out, &h, sizeof(h));
    int rc = body.err || out->err ? QP_ENOMEM : body.len > UINT32_MAX ? QP_ERANGE : 0;
    /* Version 5's dictionary is always 8 MiB (unpack_init). */
    lzma_options_lzma o;
    if (rc == 0)
        rc = lzma_options(body.len <= LZMA_SMALL ? 6 : 1, &o);
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
    if (d == NULL || buf == NULL || len == NULL
        || (version != QP_FORMAT_V5 && version != QP_FORMAT_V6 && version != QP_FORMAT_VERSION))
        return QP_EINVAL;
    if (version == QP_FORMAT_V5) {
        wb_t out = { 0 };
        int rc = encode_v5(d, &out);
        if (rc < 0) {
            free(out.p);
            return rc;
        }
        uint64_t id;
        qp_desc_id(out.p, out.len, &id);
        memcpy(out.p + offsetof(qp_desc_hdr_t, id), &id, sizeof(id));
        *buf = out.p;
        *len = out.len;
        return 0;
    }
    chunk_plan_t *c = NULL;
    uint32_t nc = 0;
    QP_CHECK(plan_chunks(d, &c, &nc));
    qp_desc_keys_t *keys = NULL; /* version 7: the key sites go in the index */
    size_t *raw = calloc(nc, sizeof(size_t)), *zlen = calloc(nc, sizeof(size_t));
    size_t *cb = calloc(nc, sizeof(size_t));
    wb_t chunks = { 0 }, index = { 0 }, out = { 0 };
    int rc = raw == NULL || zlen == NULL || cb == NULL ? QP_ENOMEM : 0;
    if (rc == 0 && version == QP_FORMAT_VERSION)
        rc = keys_from_calls(d, &keys);
    if (rc == 0)
        rc = pack_chunks(d, keys, c, nc, raw, cb, zlen, &chunks);
    if (rc == 0)
        rc = encode_index(d, keys, c, nc, raw, zlen, cb, &index);
    keys_free(keys);
    free(cb);
    qp_desc_hdr_t h = d->hdr;
    memcpy(h.magic, QP_DESC_MAGIC, sizeof(h.magic));
    h.version = version;
    h.body_size = (uint32_t)index.len;
    h.id = 0;
    wb_put(&out, &h, sizeof(h));
    size_t zindex = 0;
    if (rc == 0 && out.err)
        rc = QP_ENOMEM;
    if (rc == 0)
        rc = pack(index.p, index.len, index.len + chunks.len <= LZMA_SMALL ? 6 : 1, &out,
                  &zindex);
    if (rc == 0)
        wb_put(&out, chunks.p, chunks.len);
    if (rc == 0 && out.err)
        rc = QP_ENOMEM;
    free(c);
    free(raw);
    free(zlen);
    free(chunks.p);
    free(index.p);
    if (rc < 0) {
        free(out.p);
        return rc;
    }
    qp_desc_id(out.p, out.len, &h.id);
    memcpy(out.p + offsetof(qp_desc_hdr_t, id), &h.id, sizeof(h.id));
    uint8_t *shrunk = realloc(out.p, out.len);
    *buf = shrunk != NULL ? shrunk : out.p;
    *len = out.len;
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
    unsigned shift = 0;
    while (shift < 64) {
        if (r->off == r->n && refill(r) == 0)
            break;
        uint8_t b = r->p[r->off++];
        if (!leb_fits(shift, b))
            break; /* more than 64 bits */
        if (!leb_step(&v, &shift, b))
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
    /* Version 7's chunks name every callee: no map there. */
    uint32_t callee = c->target != 0 && r->entries != NULL
        ? qp_entry_map_find(r->d, r->entries, c->target, NULL)
        : QP_VIRT;
    if (r->callee_out != NULL)
        *r->callee_out = callee;
    else if (r->entries != NULL && r->ncalls_read < r->d->hdr.ncalls)
        r->entries->call_proc[r->ncalls_read++] = callee;
    if (head & 4) {
        if (callee == QP_VIRT)
            b->bad = 1; /* no procedure there to take the name from */
        c->name = callee != QP_VIRT ? r->d->procs[callee].name : UINT32_MAX;
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
    entries_done(&r, part == NULL ? out : NULL);
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

/* The most bytes of a zero-input summary (two per procedure) and of a chunk's entry. */
enum { MAX_ZERO = 10, MAX_CHUNK = 200 };

/* Version 6: the index's size (body_size) against the counts and the LEN bytes after the
 * header, as check_sizes does for version 5's body. */
static int
check_index_size(const qp_desc_hdr_t *h, size_t zlen, char *why, size_t whylen)
{
    /* Version 7's index holds some of the call sites (at least their count). */
    int v7 = h->version == QP_FORMAT_VERSION;
    uint64_t least = 1 + (uint64_t)h->nprocs * 2 + (v7 ? 1 : h->ncalls) + h->strtab_size;
    uint64_t most = 10 + (uint64_t)h->nprocs * (MAX_PROC + 2 * MAX_ZERO + MAX_CHUNK + 20)
        + MAX_CHUNK + 20 + (uint64_t)h->ncalls * (MAX_CALL + 16 + 5) + h->strtab_size;
    /* The chunks' records take a byte or more each, LZMA2 gives under 65536 a byte. */
    if (h->body_size < least || h->body_size > most
        || h->body_size + (uint64_t)h->nblocks + h->nedges > (uint64_t)zlen * 65536 + 64) {
        qp_why(why, whylen, "description header: index of %u bytes does not fit its counts "
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
    if (h->version != QP_FORMAT_VERSION && h->version != QP_FORMAT_V6
        && h->version != QP_FORMAT_V5) {
        qp_why(why, whylen, "description version %u, made by %s qpt: this qp reads versions "
               "%u to %u (rewrite the program again with this qpt-rewrite)", h->version,
               h->version < QP_FORMAT_VERSION ? "an older" : "a newer", QP_FORMAT_V5,
               QP_FORMAT_VERSION);
        return QP_EFORMAT;
    }
    if (h->version != QP_FORMAT_V5)
        return check_index_size(h, len - sizeof(*h), why, whylen);
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

/* A raw LZMA2 decoder for a stream of N bytes (qp_format.h: its dictionary). */
static int
unpack_init(lzma_stream *z, uint64_t n, uint32_t version)
{
    lzma_options_lzma o;
    QP_CHECK(lzma_options(6, &o));
    o.dict_size = version == QP_FORMAT_V5 ? LZMA_DICT_MAX : dict_for(n);
    lzma_filter f[2] = { { LZMA_FILTER_LZMA2, &o }, { LZMA_VLI_UNKNOWN, NULL } };
    return lzma_raw_decoder(z, f) == LZMA_OK ? 0 : QP_ENOMEM;
}

/*
 * Version 5: the body of BUF (LEN bytes, header H checked) decoded whole into OUT.
 * *END: where its stream ended. A failure of the stream itself, stray bytes or another
 * id are said before what the records would say.
 */
static int
parse_v5(const uint8_t *buf, size_t len, const qp_desc_hdr_t *h, qp_desc_t *out,
         size_t *end, char *why, size_t whylen)
{
    lzma_stream z = LZMA_STREAM_INIT;
    size_t win = h->body_size < WINDOW ? h->body_size + 1 : WINDOW;
    rbuf_t b = { NULL, 0, 0, 0, &z, malloc(win), win, h->body_size, LZMA_OK };
    if (b.win == NULL || unpack_init(&z, h->body_size, h->version) < 0) {
        free(b.win);
        lzma_end(&z);
        qp_why(why, whylen, "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    z.next_in = buf + sizeof(*h);
    z.avail_in = len - sizeof(*h);
    char rwhy[512] = "";
    int rrc = decode_body(&b, out, rwhy, sizeof(rwhy));
    int rc = finish_stream(&b, h, end, why, whylen);
    lzma_end(&z);
    free(b.win);
    if (rc == 0 && rrc < 0) {
        qp_why(why, whylen, "%s", rwhy);
        rc = rrc;
    }
    return rc;
}

/*****************************************************************************
 * Version 6: the index, and the chunks decoded when asked for
 */

/* A chunk as the index gives it, where its stream is, and whether it was decoded. */
typedef struct desc_chunk {
    uint32_t proc, nprocs, block, nblocks, edge, nedges, clo, cn;
    uint64_t ns_lo, ns_hi, ra_lo[RA_PARTS], ra_hi[RA_PARTS]; /* chunk_plan_t's */
    uint32_t nra;
    uint32_t call, ncalls, callbytes; /* version 7: its call sites [call, call + ncalls),
                                       * the last callbytes bytes of its records those
                                       * that are not key sites */
    size_t zoff;        /* its stream: BUF + zoff, zsize bytes */
    uint32_t zsize, rawsize;
    uint8_t state;      /* CHUNK_* */
    uint8_t zero;       /* ZERO_*: its counters in the profile last asked about */
    uint8_t *raw;       /* its records inflated (rawsize bytes), kept when procedures
                         * of it may be asked for later (classify_procs), or NULL */
} desc_chunk_t;

enum { CHUNK_PACKED, CHUNK_LOADED, CHUNK_BAD };
enum { ZERO_UNKNOWN, ZERO_ALL, ZERO_NOT };

/* What is known of a procedure of a chunk not decoded into the arrays. */
enum { PROC_UNKNOWN, PROC_ZERO, PROC_COUNTED, PROC_IN };

struct qp_desc_lazy {
    const uint8_t *buf;          /* the description's bytes (not owned) */
    desc_chunk_t *chunks;
    uint32_t nchunks;
    const uint64_t *zero_for;    /* the counters desc_chunk_t.zero and PROC_ZERO,
                                  * PROC_COUNTED are about */
    uint8_t *proc_state;         /* per procedure: PROC_* */
    uint64_t *exec_next;         /* per call site (exec calls only): put_exec_next's */
    uint32_t *exec_tie;
    /* The chunk last decoded aside: its procedures are looked at, and those that
     * counted copied into the arrays, so that the pages of those that did not are
     * never touched (chromium: 44,000 of 670,000 procedures counted). */
    desc_chunk_t *scratch;
    qp_desc_block_t *sblocks;
    qp_desc_edge_t *sedges;
    uint32_t sbcap, secap;
    uint8_t *sraw;               /* the scratch chunk's records inflated (srawcap) */
    uint32_t srawcap;
    char why[512];               /* why the last chunk refused */
    void (*release)(void *);     /* qp_desc_set_release's, or NULL */
    void *release_arg;
    uint64_t since_release;      /* compressed bytes inflated since it was last called */
    /* Per procedure decoded on its own (load_proc), or NULL: where its blocks are, in
     * the slabs, its edges right after them. Copies into the arrays touched a page of each for every
     * procedure: chromium's 107,000 spread over 242 MB of them, 166 MB here. */
    qp_desc_block_t **pblocks;
    struct proc_slab *slabs;     /* newest first */
    /* Per procedure, qp_desc_first_call (chromium's reports asked it 2 million times,
     * each a search through 3 million call sites). */
    uint32_t *first_call;
};

/* Storage of the procedures decoded on their own, a slab at a time. */
struct proc_slab {
    struct proc_slab *next;
    size_t used, cap;            /* bytes of data */
    uint64_t data[];
};

enum { SLAB_BYTES = 1u << 20 };

/* N bytes (a multiple of 8) from LZ's slabs, or NULL. */
static void *
slab_alloc(struct qp_desc_lazy *lz, size_t n)
{
    struct proc_slab *s = lz->slabs;
    if (s == NULL || s->cap - s->used < n) {
        size_t cap = n > SLAB_BYTES ? n : SLAB_BYTES;
        if ((s = malloc(sizeof(*s) + cap)) == NULL)
            return NULL;
        s->used = 0;
        s->cap = cap;
        s->next = lz->slabs;
        lz->slabs = s;
    }
    void *p = (uint8_t *)s->data + s->used;
    s->used += n;
    return p;
}

static void
lazy_free(struct qp_desc_lazy *lz)
{
    if (lz != NULL) {
        for (uint32_t k = 0; lz->chunks != NULL && k < lz->nchunks; k++)
            free(lz->chunks[k].raw);
        free(lz->sraw);
        free(lz->chunks);
        free(lz->proc_state);
        free(lz->exec_next);
        free(lz->exec_tie);
        free(lz->sblocks);
        free(lz->sedges);
        free(lz->pblocks);
        free(lz->first_call);
        for (struct proc_slab *s = lz->slabs, *next; s != NULL; s = next) {
            next = s->next;
            free(s);
        }
    }
    free(lz);
}

/* One zero-input summary (put_zero) into *Z; NEDGES: its procedure's. */
static void
get_zero(rbuf_t *b, qp_desc_zero_t *z, uint32_t nedges)
{
    uint64_t v = get_max(b, ((uint64_t)UINT32_MAX << 3 | 7) + 1);
    memset(z, 0, sizeof(*z));
    if (v == 0)
        return;
    v--;
    z->given = 1;
    z->nunknown_edges = (uint32_t)(v >> 3);
    z->calls_known = (v >> 2) & 1;
    z->insns_exact = (v >> 1) & 1;
    z->all_known = v & 1;
    if (z->nunknown_edges > nedges)
        b->bad = 1;
}

/* One chunk's entry of the index into C, after the chunk before it (PREV, or NULL). */
static void
get_chunk(rbuf_t *b, const desc_chunk_t *prev, desc_chunk_t *c, int v7)
{
    memset(c, 0, sizeof(*c));
    if (prev != NULL) {
        c->proc = prev->proc + prev->nprocs;
        c->block = prev->block + prev->nblocks;
        c->edge = prev->edge + prev->nedges;
        c->call = prev->call + prev->ncalls;
        c->zoff = prev->zoff + prev->zsize;
    }
    c->nprocs = get_u32(b);
    c->nblocks = get_u32(b);
    c->nedges = get_u32(b);
    c->clo = get_u32(b);
    c->cn = get_u32(b);
    c->zsize = get_u32(b);
    c->rawsize = get_u32(b);
    c->ns_lo = unzz64(get_u(b), prev ? prev->ns_lo : 0);
    c->ns_hi = unzz64(get_u(b), c->ns_lo);
    c->nra = (uint32_t)get_max(b, RA_PARTS);
    uint64_t p = prev != NULL && prev->nra ? prev->ra_lo[0] : 0;
    for (uint32_t j = 0; j < c->nra; j++) {
        c->ra_lo[j] = unzz64(get_u(b), p);
        c->ra_hi[j] = unzz64(get_u(b), c->ra_lo[j]);
        p = c->ra_hi[j];
    }
    if (v7) {
        c->ncalls = get_u32(b);
        c->callbytes = get_u32(b);
    }
}

/* Version 7's key sites (B, R's running values) into OUT->keys; B->bad when they do not
 * read. QP_ENOMEM, else 0. */
static int
get_keys(rbuf_t *b, run_t *r, qp_desc_t *out)
{
    uint32_t n = (uint32_t)get_max(b, out->hdr.ncalls);
    qp_desc_keys_t *k = calloc(1, sizeof(*k));
    if (k == NULL)
        return QP_ENOMEM;
    out->keys = k;
    if (b->bad)
        return 0;
    if (alloc_part((void **)&k->calls, n, sizeof(qp_desc_call_t)) < 0
        || alloc_part((void **)&k->index, n, sizeof(uint32_t)) < 0
        || alloc_part((void **)&k->callee, n, sizeof(uint32_t)) < 0)
        return QP_ENOMEM;
    uint64_t next = 0; /* the lowest index the next key site may have */
    for (uint32_t i = 0; i < n && !b->bad; i++) {
        uint64_t at = next + get_u32(b);
        if (at >= out->hdr.ncalls) {
            b->bad = 1;
            break;
        }
        k->index[i] = (uint32_t)at;
        r->callee_out = &k->callee[i];
        get_call(b, r, &k->calls[i]);
        r->callee_out = NULL;
        next = at + 1;
        k->n = i + 1;
    }
    return 0;
}

/* The index of a version 6 description (B) into OUT and LZ: procedures, their zero-input
 * summaries, call sites, chunks, strings. Version 7: the key call sites. */
static int
decode_index(rbuf_t *b, qp_desc_t *out, struct qp_desc_lazy *lz, char *why, size_t whylen)
{
    const qp_desc_hdr_t *h = &out->hdr;
    int v7 = h->version == QP_FORMAT_VERSION;
    uint32_t nc = (uint32_t)get_max(b, h->nprocs ? h->nprocs : 1);
    if (b->bad || nc == 0) {
        qp_why(why, whylen, "description index: bad number of chunks");
        return QP_EFORMAT;
    }
    if (alloc_part((void **)&out->procs, h->nprocs, sizeof(qp_desc_proc_t)) < 0
        || alloc_part((void **)&out->zero, h->nprocs, sizeof(qp_desc_zero_t)) < 0
        || alloc_part((void **)&out->zero_entry, h->nprocs, sizeof(qp_desc_zero_t)) < 0
        || (!v7 && alloc_part((void **)&out->calls, h->ncalls, sizeof(qp_desc_call_t)) < 0)
        || alloc_part((void **)&out->strtab, h->strtab_size, 1) < 0
        || alloc_part((void **)&lz->chunks, nc, sizeof(desc_chunk_t)) < 0
        || alloc_part((void **)&lz->proc_state, h->nprocs, 1) < 0
        || alloc_part((void **)&lz->pblocks, h->nprocs, sizeof(qp_desc_block_t *)) < 0
        || alloc_part((void **)&lz->exec_next, h->ncalls, sizeof(uint64_t)) < 0
        || alloc_part((void **)&lz->exec_tie, h->ncalls, sizeof(uint32_t)) < 0) {
        qp_why(why, whylen, "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    lz->nchunks = nc;
    run_t r;
    memset(&r, 0, sizeof(r));
    r.d = out;
    const char *part = NULL;
    uint32_t i = 0;
    for (i = 0; i < h->nprocs && !b->bad; i++)
        get_proc(b, &r, &out->procs[i]);
    part = b->bad ? "procedure" : NULL;
    for (i = 0; part == NULL && i < h->nprocs && !b->bad; i++) {
        get_zero(b, &out->zero[i], out->procs[i].nedges);
        if (out->procs[i].flags & QP_PROC_BY_CALLS)
            get_zero(b, &out->zero_entry[i], out->procs[i].nedges);
    }
    part = part ? part : b->bad ? "zero-input summary" : NULL;
    if (part == NULL && index_entries(&r) < 0) {
        qp_why(why, whylen, "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    if (part == NULL && v7 && get_keys(b, &r, out) < 0) {
        qp_why(why, whylen, "%s", qp_strerror(QP_ENOMEM));
        entries_done(&r, NULL);
        return QP_ENOMEM;
    }
    for (i = 0; part == NULL && !v7 && i < h->ncalls && !b->bad; i++)
        get_call(b, &r, &out->calls[i]);
    part = part ? part : b->bad ? "call site" : NULL;
    /* The exec sites, among every site (version 6) or the key sites (version 7). */
    const qp_desc_call_t *sites = !v7 ? out->calls : out->keys ? out->keys->calls : NULL;
    uint32_t nsites = !v7 ? h->ncalls : out->keys ? out->keys->n : 0;
    for (i = 0; part == NULL && i < nsites && !b->bad; i++) {
        if (!(sites[i].flags & QP_CALLF_EXEC))
            continue;
        uint32_t at = v7 ? out->keys->index[i] : i;
        lz->exec_next[at] = get_u(b);
        uint32_t tie = get_u32(b);
        lz->exec_tie[at] = sites[i].block + tie;
        if (lz->exec_tie[at] < sites[i].block)
            b->bad = 1; /* wrapped */
    }
    part = part ? part : b->bad ? "exec call site" : NULL;
    for (i = 0; part == NULL && i < nc && !b->bad; i++)
        get_chunk(b, i ? &lz->chunks[i - 1] : NULL, &lz->chunks[i], v7);
    part = part ? part : b->bad ? "chunk" : NULL;
    entries_done(&r, part == NULL ? out : NULL);
    if (part != NULL) {
        qp_why(why, whylen, "description index: %s %u truncated or a value out of range",
               part, i - 1);
        return QP_EFORMAT;
    }
    uint64_t rest = (uint64_t)(b->n - b->off) + b->left;
    if (rest != h->strtab_size || get_bytes(b, (uint8_t *)out->strtab, h->strtab_size) < 0) {
        qp_why(why, whylen, "description index: %llu bytes after the records, the string "
               "table has %u", (unsigned long long)rest, h->strtab_size);
        return QP_EFORMAT;
    }
    return 0;
}

/* The chunks against the header and each other: they share out the procedures, blocks
 * and edges in order; each procedure's blocks and edges in its chunk; the counters of
 * each inside the profile's; streams of sane sizes inside the N bytes from the first. */
static int
validate_chunks(const qp_desc_t *d, const struct qp_desc_lazy *lz, size_t n, char *why,
                size_t whylen)
{
    const qp_desc_hdr_t *h = &d->hdr;
    int v7 = h->version == QP_FORMAT_VERSION;
    const qp_desc_keys_t *keys = d->keys;
    uint64_t np = 0, nb = 0, ne = 0, nz = 0, ns = 0;
    uint32_t key = 0; /* the first key site of the chunk */
    for (uint32_t k = 0; k < lz->nchunks; k++) {
        const desc_chunk_t *c = &lz->chunks[k];
        np += c->nprocs;
        nb += c->nblocks;
        ne += c->nedges;
        nz += c->zsize;
        ns += c->ncalls;
        const char *bad = NULL;
        uint32_t nkeys = 0; /* its key sites: in its blocks, fewer than its sites */
        while (v7 && key + nkeys < keys->n && keys->index[key + nkeys] - c->call < c->ncalls
               && keys->index[key + nkeys] >= c->call) {
            if (keys->calls[key + nkeys].block - c->block >= c->nblocks)
                bad = "a key call site outside its blocks";
            nkeys++;
        }
        key += nkeys;
        if (np > h->nprocs || nb > h->nblocks || ne > h->nedges || nz > n || ns > h->ncalls)
            bad = "more procedures, blocks, edges, call sites or bytes than the description has";
        else if (v7 && (c->callbytes > c->rawsize || c->callbytes < c->ncalls - nkeys
                        || c->callbytes > (uint64_t)(c->ncalls - nkeys) * MAX_CALL))
            bad = "call sites' bytes do not fit them";
        else if (c->nprocs == 0 && h->nprocs > 0)
            bad = "no procedure";
        else if (c->clo > h->ncounters || c->cn > h->ncounters - c->clo)
            bad = "counters out of range";
        else if (c->zsize == 0 || c->rawsize - c->callbytes < (uint64_t)c->nblocks + c->nedges
                 || c->rawsize - c->callbytes
                     > (uint64_t)c->nblocks * MAX_BLOCK + (uint64_t)c->nedges * MAX_EDGE
                 || c->rawsize > (uint64_t)c->zsize * 65536 + 64)
            bad = "stream size does not fit its records";
        for (uint32_t i = 0; bad == NULL && i < c->nprocs; i++) {
            const qp_desc_proc_t *p = &d->procs[c->proc + i];
            if ((p->nblocks && (p->block < c->block || p->block - c->block > c->nblocks
                                || p->nblocks > c->nblocks - (p->block - c->block)))
                || (p->nedges && (p->edge < c->edge || p->edge - c->edge > c->nedges
                                  || p->nedges > c->nedges - (p->edge - c->edge))))
                bad = "a procedure's blocks or edges outside it";
        }
        if (bad != NULL) {
            qp_why(why, whylen, "description chunk %u: %s", k, bad);
            return QP_EFORMAT;
        }
    }
    if (v7 && (ns != h->ncalls || key != keys->n)) {
        qp_why(why, whylen, "description chunks: %llu call sites, the header says %u (or key "
               "sites outside them)", (unsigned long long)ns, h->ncalls);
        return QP_EFORMAT;
    }
    if (np != h->nprocs || nb != h->nblocks || ne != h->nedges) {
        qp_why(why, whylen, "description chunks: %llu procedures, %llu blocks, %llu edges, "
               "the header says %u, %u, %u", (unsigned long long)np, (unsigned long long)nb,
               (unsigned long long)ne, h->nprocs, h->nblocks, h->nedges);
        return QP_EFORMAT;
    }
    return 0;
}

/* What the index alone can be checked for (qp_desc_validate's rules on everything but
 * the blocks and edges, which each chunk's loading checks). */
static int
validate_index(const qp_desc_t *d, const struct qp_desc_lazy *lz, size_t n, char *why,
               size_t whylen)
{
    const qp_desc_hdr_t *h = &d->hdr;
    if (h->driver != QP_DRIVER_QP && h->driver != QP_DRIVER_NAIVE && h->driver != QP_DRIVER_LIB) {
        qp_why(why, whylen, "unknown driver kind %u", h->driver);
        return QP_EFORMAT;
    }
    QP_CHECK(validate_strtab(d, why, whylen));
    for (uint32_t i = 0; i < h->nprocs; i++) {
        QP_CHECK(validate_proc_head(d, i, why, whylen));
        if ((d->procs[i].flags & QP_PROC_MEASURED) && d->procs[i].nblocks == 0) {
            qp_why(why, whylen, "measured procedure %u (%s): no blocks", i,
                   d->strtab + d->procs[i].name);
            return QP_EFORMAT;
        }
    }
    if (h->version != QP_FORMAT_VERSION) {
        QP_CHECK(validate_calls(d, 0, why, whylen));
        return validate_chunks(d, lz, n, why, whylen);
    }
    /* Version 7: the key sites, each one what makes a key site. */
    const qp_desc_keys_t *k = d->keys;
    QP_CHECK(validate_sites(d, k->calls, k->index, k->n, 0, why, whylen));
    for (uint32_t j = 0; j < k->n; j++) {
        uint32_t p = k->callee[j];
        if (d->by_entry == NULL
            || !is_key_site(&k->calls[j], p, p != QP_VIRT ? d->by_entry->kind[p] : 0)) {
            qp_why(why, whylen, "call site %u: not a key site, in the index", k->index[j]);
            return QP_EFORMAT;
        }
    }
    return validate_chunks(d, lz, n, why, whylen);
}

/* The chunk of procedure PROC in LZ. */
static desc_chunk_t *
chunk_of_proc(const struct qp_desc_lazy *lz, uint32_t proc)
{
    uint32_t lo = 0, hi = lz->nchunks;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (lz->chunks[mid].proc <= proc && proc - lz->chunks[mid].proc < lz->chunks[mid].nprocs)
            return &lz->chunks[mid];
        if (lz->chunks[mid].proc <= proc)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static uint32_t
lazy_first_call(const qp_desc_t *d, uint32_t proc)
{
    /* Version 7 holds no call site but the key sites (qp_desc_keys) until need_all. */
    return d->lazy->first_call != NULL ? d->lazy->first_call[proc] : d->hdr.ncalls;
}

/* LZ's first_call of D (its call sites checked in block order): one sweep while the
 * procedures' blocks go up, a search where they do not. */
static int
index_first_calls(const qp_desc_t *d, struct qp_desc_lazy *lz)
{
    QP_CHECK(alloc_part((void **)&lz->first_call, d->hdr.nprocs, sizeof(uint32_t)));
    uint32_t k = 0, prev = 0;
    for (uint32_t i = 0; i < d->hdr.nprocs; i++) {
        uint32_t b = d->procs[i].block;
        if (b < prev)
            k = first_call_at(d, b);
        while (k < d->hdr.ncalls && d->calls[k].block < b)
            k++;
        lz->first_call[i] = k;
        prev = b;
    }
    return 0;
}

static int inflate_chunk(struct qp_desc_lazy *lz, const desc_chunk_t *c, int calls,
                         uint8_t **out);
static int parse_chunk(const qp_desc_t *d, struct qp_desc_lazy *lz, const desc_chunk_t *c,
                       const uint8_t *raw, qp_desc_block_t *blocks, qp_desc_edge_t *edges);

/* Chunk C's records decoded into BLOCKS and EDGES (its nblocks and nedges, the first at
 * index 0); LZ->why says why not. */
static int
decode_chunk(const qp_desc_t *d, struct qp_desc_lazy *lz, const desc_chunk_t *c,
             qp_desc_block_t *blocks, qp_desc_edge_t *edges)
{
    uint8_t *raw = NULL;
    int rc = inflate_chunk(lz, c, 0, &raw);
    if (rc == 0)
        rc = parse_chunk(d, lz, c, raw, blocks, edges);
    free(raw);
    return rc;
}

/* The compressed bytes inflated between two calls of qp_desc_set_release's function: a
 * chunk's fault maps a large folio of the file, not its 2 KB (chromium: 4 MB between
 * calls left 40 MB of the description resident, 256 KB 27 MB, 16 KB 2 MB, at no CPU
 * time measured). */
#define RELEASE_BYTES (16u << 10)

void
qp_desc_set_release(qp_desc_t *d, void (*fn)(void *arg), void *arg)
{
    if (d != NULL && d->lazy != NULL) {
        d->lazy->release = fn;
        d->lazy->release_arg = arg;
    }
}

/* Chunk C's stream inflated into *RAW (malloc'd, c->rawsize bytes); LZ->why says why
 * not. */
static int
inflate_chunk(struct qp_desc_lazy *lz, const desc_chunk_t *c, int calls, uint8_t **out)
{
    char *why = lz->why;
    size_t whylen = sizeof(lz->why);
    uint32_t k = (uint32_t)(c - lz->chunks);
    /* Without CALLS, the bytes before its call sites only (version 7): the stream is
     * not inflated further (its id was checked over every byte). */
    uint32_t want = calls ? c->rawsize : c->rawsize - c->callbytes;
    uint8_t *raw = malloc(want ? want : 1);
    lzma_stream z = LZMA_STREAM_INIT;
    *out = NULL;
    if (raw == NULL || unpack_init(&z, c->rawsize, QP_FORMAT_VERSION) < 0) {
        free(raw);
        lzma_end(&z);
        qp_why(why, whylen, "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    /* Exactly rawsize bytes, then the stream's end, exactly at its last byte. */
    z.next_in = lz->buf + c->zoff;
    z.avail_in = c->zsize;
    z.next_out = raw;
    z.avail_out = want;
    lzma_ret lr = want > 0 ? lzma_code(&z, LZMA_FINISH) : LZMA_OK;
    size_t got = want - z.avail_out;
    uint8_t one;
    if (lr == LZMA_OK && got == c->rawsize) {
        z.next_out = &one;
        z.avail_out = 1;
        lr = lzma_code(&z, LZMA_FINISH);
        got += 1 - z.avail_out;
    }
    int stream_ok = want < c->rawsize ? lr == LZMA_OK && got == want /* the rest not read */
                                      : lr == LZMA_STREAM_END && got == c->rawsize
                                          && z.avail_in == 0;
    lzma_end(&z);
    lz->since_release += c->zsize;
    if (lz->release != NULL && lz->since_release >= RELEASE_BYTES) {
        lz->since_release = 0;
        lz->release(lz->release_arg);
    }
    if (!stream_ok) {
        free(raw);
        qp_why(why, whylen, "description chunk %u corrupted (its stream does not give the "
               "%u bytes its entry says)", k, c->rawsize);
        return lr == LZMA_MEM_ERROR ? QP_ENOMEM : QP_EFORMAT;
    }
    *out = raw;
    return 0;
}

/* Chunk C's records RAW (inflated) decoded into BLOCKS and EDGES (its nblocks and
 * nedges, the first at index 0); LZ->why says why not. */
static int
parse_chunk(const qp_desc_t *d, struct qp_desc_lazy *lz, const desc_chunk_t *c,
            const uint8_t *raw, qp_desc_block_t *blocks, qp_desc_edge_t *edges)
{
    char *why = lz->why;
    size_t whylen = sizeof(lz->why);
    uint32_t k = (uint32_t)(c - lz->chunks);
    /* Version 7: its call sites follow (callbytes, 0 before), inflated by need_all only
     * (load_calls). */
    rbuf_t b = { raw, c->rawsize - c->callbytes, 0, 0, NULL, NULL, 0, 0, LZMA_OK };
    run_t r;
    memset(&r, 0, sizeof(r));
    r.d = d;
    r.windowed = 1;
    r.win = blocks;
    r.win0 = c->block;
    r.nwin = c->nblocks;
    for (uint32_t i = 0; i < c->nblocks && !b.bad; i++)
        get_block(&b, &r, &blocks[i]);
    for (uint32_t i = 0; i < c->nedges && !b.bad; i++)
        get_edge(&b, &r, &edges[i]);
    if (b.bad || b.off != b.n) {
        qp_why(why, whylen, "description chunk %u: %s", k,
               b.bad ? "a record truncated or a value out of range" : "bytes after its records");
        return QP_EFORMAT;
    }
    return 0;
}

/* Is return address RA in one of C's intervals? */
static int
in_ra(const desc_chunk_t *c, uint64_t ra)
{
    for (uint32_t j = 0; j < c->nra; j++)
        if (ra >= c->ra_lo[j] && ra <= c->ra_hi[j])
            return 1;
    return 0;
}

/* The call sites of lazy description D in memory (*N of them, in block order): every
 * one (version 6) or its key sites (version 7). */
static const qp_desc_call_t *
calls_in_memory(const qp_desc_t *d, uint32_t *n)
{
    if (d->hdr.version == QP_FORMAT_VERSION) {
        *n = d->keys->n;
        return d->keys->calls;
    }
    *n = d->hdr.ncalls;
    return d->calls;
}

/* Blocks [B0, B0 + NB) and edges [E0, E0 + NE) of D, decoded from chunk C (their records
 * at BLOCKS and EDGES), checked as qp_desc_validate checks them and against what the
 * index says of C (qp reads only the chunks it names); then procedures [P0, P0 + NP)
 * (whose edges are among them) and the tail calls of the blocks. */
static int
validate_decoded(const qp_desc_t *d, struct qp_desc_lazy *lz, const desc_chunk_t *c,
                 uint32_t b0, uint32_t nb, uint32_t e0, uint32_t ne, uint32_t p0, uint32_t np,
                 const qp_desc_block_t *blocks, const qp_desc_edge_t *edges)
{
    char *why = lz->why;
    size_t whylen = sizeof(lz->why);
    for (uint32_t i = b0; i < b0 + nb; i++) {
        const qp_desc_block_t *e = &blocks[i - b0];
        QP_CHECK(validate_block_at(d, i, e, why, whylen));
        if ((e->counter != QP_NOCOUNTER && e->counter - c->clo >= c->cn)
            || (e->new_start != 0 && (e->new_start < c->ns_lo || e->new_start > c->ns_hi))) {
            qp_why(why, whylen, "block %u: counter or new address outside its chunk's", i);
            return QP_EFORMAT;
        }
    }
    for (uint32_t i = e0; i < e0 + ne; i++) {
        const qp_desc_edge_t *e = &edges[i - e0];
        QP_CHECK(validate_edge_at(d, i, e, why, whylen));
        if ((e->counter != QP_NOCOUNTER && e->counter - c->clo >= c->cn)
            || (e->ret_addr != 0 && !in_ra(c, e->ret_addr))) {
            qp_why(why, whylen, "edge %u: counter or return address outside its chunk's", i);
            return QP_EFORMAT;
        }
    }
    for (uint32_t i = p0; i < p0 + np; i++)
        QP_CHECK(validate_proc_at(d, i, &edges[d->procs[i].nedges ? d->procs[i].edge - e0 : 0],
                                  why, whylen));
    /* The tail calls of the blocks (in block order: from the first at or after them),
     * among the call sites in memory (version 7: the key sites; the others are checked
     * with every site, by qp_desc_need_all, and read by nothing before). */
    uint32_t ncalls;
    const qp_desc_call_t *calls = calls_in_memory(d, &ncalls);
    uint32_t lo = 0, hi = ncalls;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (calls[mid].block < b0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (uint32_t i = lo; i < ncalls && calls[i].block - b0 < nb; i++) {
        const qp_desc_call_t *s = &calls[i];
        if (qp_call_is_tail(s) && (s->edge - c->edge >= c->nedges || s->edge - e0 >= ne
                                   || edges[s->edge - e0].from != s->block)) {
            qp_why(why, whylen, "call site %u (block %u, kind %u): edge does not fit the kind",
                   i, s->block, s->kind);
            return QP_EFORMAT;
        }
    }
    return 0;
}

/* Chunk C's records decoded into D's arrays and checked. */
static int
load_chunk(const qp_desc_t *d, struct qp_desc_lazy *lz, desc_chunk_t *c)
{
    QP_CHECK(decode_chunk(d, lz, c, &d->blocks[c->block], &d->edges[c->edge]));
    return validate_decoded(d, lz, c, c->block, c->nblocks, c->edge, c->nedges, c->proc,
                            c->nprocs, &d->blocks[c->block], &d->edges[c->edge]);
}

/* Chunk C decoded aside (LZ's scratch arrays), unless it is there. */
static int
decode_aside(const qp_desc_t *d, struct qp_desc_lazy *lz, desc_chunk_t *c)
{
    if (lz->scratch == c)
        return 0;
    lz->scratch = NULL;
    if (c->nblocks > lz->sbcap) {
        free(lz->sblocks);
        lz->sblocks = malloc(c->nblocks * sizeof(qp_desc_block_t));
        lz->sbcap = lz->sblocks != NULL ? c->nblocks : 0;
    }
    if (c->nedges > lz->secap) {
        free(lz->sedges);
        lz->sedges = malloc(c->nedges * sizeof(qp_desc_edge_t));
        lz->secap = lz->sedges != NULL ? c->nedges : 0;
    }
    if (c->nblocks > lz->sbcap || c->nedges > lz->secap) {
        qp_why(lz->why, sizeof(lz->why), "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    /* The decoder leaves absent fields (new_start, ret_addr, padding) as they are. */
    memset(lz->sblocks, 0, c->nblocks * sizeof(qp_desc_block_t));
    memset(lz->sedges, 0, c->nedges * sizeof(qp_desc_edge_t));
    /* Its records inflated: kept from an earlier look, else now (and kept aside until
     * the next chunk, in case classify_procs keeps them). */
    if (c->raw == NULL) {
        free(lz->sraw);
        lz->sraw = NULL;
        QP_CHECK(inflate_chunk(lz, c, 0, &lz->sraw));
    }
    QP_CHECK(parse_chunk(d, lz, c, c->raw != NULL ? c->raw : lz->sraw, lz->sblocks,
                         lz->sedges));
    lz->scratch = c;
    return 0;
}

static int need_chunk(const qp_desc_t *d, desc_chunk_t *c);

/* Procedure PROC of chunk C copied from the scratch arrays into D's, and checked. */
static int
load_proc(const qp_desc_t *d, struct qp_desc_lazy *lz, desc_chunk_t *c, uint32_t proc)
{
    QP_CHECK(decode_aside(d, lz, c));
    const qp_desc_proc_t *p = &d->procs[proc];
    /* A tail call of its blocks whose edge another procedure of the chunk lists (not a
     * valid description, but checked as qp_desc_validate does): the whole chunk. */
    uint32_t ncalls;
    const qp_desc_call_t *calls = calls_in_memory(d, &ncalls);
    for (uint32_t i = d->hdr.version == QP_FORMAT_VERSION ? d->keys->first[proc]
                                                         : qp_desc_first_call(d, proc);
         i < ncalls && calls[i].block - p->block < p->nblocks; i++)
        if (qp_call_is_tail(&calls[i]) && calls[i].edge - p->edge >= p->nedges)
            return need_chunk(d, c);
    /* The index put its blocks and edges inside the chunk's (validate_chunks). Copied
     * side by side into the slabs (not into the arrays: see pblocks). */
    size_t bbytes = p->nblocks * sizeof(qp_desc_block_t);
    qp_desc_block_t *blocks = slab_alloc(lz, bbytes + p->nedges * sizeof(qp_desc_edge_t));
    if (blocks == NULL) {
        qp_why(lz->why, sizeof(lz->why), "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    qp_desc_edge_t *edges = (qp_desc_edge_t *)((uint8_t *)blocks + bbytes);
    if (p->nblocks)
        memcpy(blocks, &lz->sblocks[p->block - c->block], bbytes);
    if (p->nedges)
        memcpy(edges, &lz->sedges[p->edge - c->edge], p->nedges * sizeof(qp_desc_edge_t));
    QP_CHECK(validate_decoded(d, lz, c, p->nblocks ? p->block : 0, p->nblocks,
                              p->nedges ? p->edge : 0, p->nedges, proc, 1, blocks, edges));
    lz->pblocks[proc] = blocks;
    lz->proc_state[proc] = PROC_IN;
    return 0;
}

/* Whether procedure PROC of chunk C counted nothing in COUNTERS, by its own counters in
 * the scratch arrays: PROC_ZERO or PROC_COUNTED for every procedure of C. */
static void
classify_procs(const qp_desc_t *d, struct qp_desc_lazy *lz, desc_chunk_t *c,
               const uint64_t *counters)
{
    for (uint32_t q = c->proc; q < c->proc + c->nprocs; q++) {
        if (lz->proc_state[q] == PROC_IN)
            continue;
        const qp_desc_proc_t *p = &d->procs[q];
        int counted = 0;
        /* A counter outside the chunk's range counts as counted: decoding it then says
         * what is wrong. */
        for (uint32_t i = 0; i < p->nblocks && !counted; i++) {
            uint32_t k = lz->sblocks[p->block - c->block + i].counter;
            counted = k != QP_NOCOUNTER && (k - c->clo >= c->cn || counters[k] != 0);
        }
        for (uint32_t i = 0; i < p->nedges && !counted; i++) {
            uint32_t k = lz->sedges[p->edge - c->edge + i].counter;
            counted = k != QP_NOCOUNTER && (k - c->clo >= c->cn || counters[k] != 0);
        }
        lz->proc_state[q] = counted ? PROC_COUNTED : PROC_ZERO;
    }
    /* Those that counted are solved: copied now, while the chunk is at hand. Those
     * counted by their calls are solved when they were called, which is known later
     * (they come in the order of their callers): the chunk's records are kept inflated
     * for them, a few KB, where copying them all held chromium's 53,000 (75 MB) of which
     * a tenth was called (and inflating the chunk again took 50 us each time). */
    int later = 0;
    for (uint32_t q = c->proc; q < c->proc + c->nprocs; q++) {
        if (lz->proc_state[q] == PROC_COUNTED)
            (void)load_proc(d, lz, c, q); /* a failure is said when it is needed */
        else if (lz->proc_state[q] == PROC_ZERO && (d->procs[q].flags & QP_PROC_BY_CALLS))
            later = 1;
    }
    if (later && c->raw == NULL && lz->scratch == c && lz->sraw != NULL) {
        c->raw = lz->sraw; /* version 7: without its call sites (inflate_chunk) */
        lz->sraw = NULL;
    }
}

/* Decode chunk C of D unless it was. */
static int
need_chunk(const qp_desc_t *d, desc_chunk_t *c)
{
    if (c->state == CHUNK_PACKED) {
        int rc = load_chunk(d, d->lazy, c);
        c->state = rc == 0 ? CHUNK_LOADED : CHUNK_BAD;
        if (rc < 0)
            return rc;
    }
    return c->state == CHUNK_LOADED ? 0 : QP_EFORMAT;
}

int
qp_desc_need(const qp_desc_t *d, uint32_t proc)
{
    if (d == NULL || proc >= d->hdr.nprocs)
        return QP_EINVAL;
    if (d->lazy == NULL)
        return 0;
    struct qp_desc_lazy *lz = d->lazy;
    desc_chunk_t *c = chunk_of_proc(lz, proc);
    if (c == NULL)
        return QP_EINVAL;
    if (c->state == CHUNK_LOADED || lz->proc_state[proc] == PROC_IN)
        return 0;
    if (c->state == CHUNK_BAD)
        return QP_EFORMAT;
    return load_proc(d, lz, c, proc);
}

int
qp_desc_loaded(const qp_desc_t *d, uint32_t proc)
{
    if (d == NULL || d->lazy == NULL)
        return 1;
    const desc_chunk_t *c = chunk_of_proc(d->lazy, proc);
    return c != NULL && (c->state == CHUNK_LOADED || d->lazy->proc_state[proc] == PROC_IN);
}

const qp_desc_block_t *
qp_desc_proc_blocks(const qp_desc_t *d, uint32_t proc)
{
    if (d->lazy != NULL && d->lazy->pblocks[proc] != NULL)
        return d->lazy->pblocks[proc];
    return d->blocks != NULL ? &d->blocks[d->procs[proc].block] : NULL;
}

const qp_desc_edge_t *
qp_desc_proc_edges(const qp_desc_t *d, uint32_t proc)
{
    if (d->lazy != NULL && d->lazy->pblocks[proc] != NULL) /* its edges follow its blocks */
        return (const qp_desc_edge_t *)(d->lazy->pblocks[proc] + d->procs[proc].nblocks);
    return d->edges != NULL ? &d->edges[d->procs[proc].edge] : NULL;
}

int
qp_desc_need_block(const qp_desc_t *d, uint32_t block)
{
    if (d == NULL || block >= d->hdr.nblocks)
        return QP_EINVAL;
    if (d->lazy == NULL)
        return 0;
    const struct qp_desc_lazy *lz = d->lazy;
    uint32_t lo = 0, hi = lz->nchunks;
    while (lo < hi) { /* the last chunk starting at or before BLOCK: it holds it */
        uint32_t mid = lo + (hi - lo) / 2;
        if (lz->chunks[mid].block <= block)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == 0 ? QP_EINVAL : need_chunk(d, &lz->chunks[lo - 1]);
}

/* Call site CALL of D as far as it is in memory (a lazy version 7: the key sites only),
 * or NULL. */
static const qp_desc_call_t *
call_in_memory(const qp_desc_t *d, uint32_t call)
{
    if (d->lazy == NULL || d->hdr.version != QP_FORMAT_VERSION)
        return &d->calls[call];
    const qp_desc_keys_t *k = d->keys;
    uint32_t lo = 0, hi = k->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (k->index[mid] < call)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < k->n && k->index[lo] == call ? &k->calls[lo] : NULL;
}

int
qp_desc_exec_next(const qp_desc_t *d, uint32_t call, uint64_t *next, uint32_t *tie)
{
    const qp_desc_call_t *c = d != NULL && call < d->hdr.ncalls ? call_in_memory(d, call) : NULL;
    if (c == NULL || !(c->flags & QP_CALLF_EXEC))
        return QP_EINVAL;
    if (d->lazy != NULL) {
        *next = d->lazy->exec_next[call];
        *tie = d->lazy->exec_tie[call];
    } else
        exec_next(d, d->calls[call].block, next, tie);
    return 0;
}

int
qp_desc_need_ret(const qp_desc_t *d, const uint64_t *ras, size_t n)
{
    for (uint32_t k = 0; d != NULL && d->lazy != NULL && k < d->lazy->nchunks; k++) {
        desc_chunk_t *c = &d->lazy->chunks[k];
        int hit = 0;
        for (uint32_t j = 0; j < c->nra && !hit; j++) {
            size_t lo = 0, hi = n; /* the first of RAS at or above the interval's lowest */
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (ras[mid] < c->ra_lo[j])
                    lo = mid + 1;
                else
                    hi = mid;
            }
            hit = lo < n && ras[lo] <= c->ra_hi[j];
        }
        if (hit)
            QP_CHECK(need_chunk(d, c));
    }
    return 0;
}

int
qp_desc_decoded(const qp_desc_t *d, uint32_t k, uint32_t *block, uint32_t *nblocks,
                uint32_t *edge, uint32_t *nedges)
{
    if (d == NULL || k >= (d->lazy != NULL ? d->lazy->nchunks : 1))
        return 0;
    if (d->lazy == NULL) {
        *block = *edge = 0;
        *nblocks = d->hdr.nblocks;
        *nedges = d->hdr.nedges;
        return 1;
    }
    const desc_chunk_t *c = &d->lazy->chunks[k];
    int in = c->state == CHUNK_LOADED;
    *block = c->block;
    *nblocks = in ? c->nblocks : 0;
    *edge = c->edge;
    *nedges = in ? c->nedges : 0;
    return 1;
}

int
qp_desc_chunk_zero(const qp_desc_t *d, uint32_t proc, const uint64_t *counters)
{
    if (d == NULL || d->lazy == NULL || counters == NULL)
        return 0;
    struct qp_desc_lazy *lz = d->lazy;
    desc_chunk_t *c = chunk_of_proc(lz, proc);
    if (c == NULL || c->state != CHUNK_PACKED || lz->proc_state[proc] == PROC_IN)
        return 0;
    if (lz->zero_for != counters) {
        for (uint32_t k = 0; k < lz->nchunks; k++)
            lz->chunks[k].zero = ZERO_UNKNOWN;
        for (uint32_t i = 0; i < d->hdr.nprocs; i++)
            if (lz->proc_state[i] != PROC_IN)
                lz->proc_state[i] = PROC_UNKNOWN;
        lz->zero_for = counters;
    }
    if (c->zero == ZERO_UNKNOWN) {
        c->zero = ZERO_ALL;
        for (uint32_t i = 0; i < c->cn && c->zero == ZERO_ALL; i++)
            if (counters[c->clo + i] != 0)
                c->zero = ZERO_NOT;
    }
    if (c->zero == ZERO_ALL)
        return 1;
    /* Its chunk counted somewhere: PROC's own counters, the chunk decoded aside (a
     * failure is said when PROC is decoded for solving). */
    if (lz->proc_state[proc] == PROC_UNKNOWN) {
        if (decode_aside(d, lz, c) < 0)
            return 0;
        classify_procs(d, lz, c, counters);
    }
    return lz->proc_state[proc] == PROC_ZERO;
}

const char *
qp_desc_error(const qp_desc_t *d)
{
    return d != NULL && d->lazy != NULL ? d->lazy->why : "";
}

/*
 * Version 7: chunk C's call sites into D's array, its records that are not key sites
 * (after its blocks and edges) merged in order with the key sites of its range. A chunk
 * inflated again: need_all reads each once more, for the printers of the call graph.
 */
static int
load_calls(qp_desc_t *d, struct qp_desc_lazy *lz, const desc_chunk_t *c)
{
    if (d->calls == NULL && d->hdr.ncalls > 0
        && alloc_part((void **)&d->calls, d->hdr.ncalls, sizeof(qp_desc_call_t)) < 0) {
        qp_why(lz->why, sizeof(lz->why), "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    uint8_t *raw = NULL;
    QP_CHECK(inflate_chunk(lz, c, 1, &raw));
    rbuf_t b = { raw, c->rawsize, c->rawsize - c->callbytes, 0, NULL, NULL, 0, 0, LZMA_OK };
    run_t r;
    memset(&r, 0, sizeof(r));
    r.d = d;
    r.plain_names = 1;
    const qp_desc_keys_t *keys = d->keys;
    uint32_t lo = 0, hi = keys->n; /* the first key site in the chunk's range */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (keys->index[mid] < c->call)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (uint32_t i = c->call; i < c->call + c->ncalls && !b.bad; i++) {
        if (lo < keys->n && keys->index[lo] == i)
            d->calls[i] = keys->calls[lo++];
        else
            get_call(&b, &r, &d->calls[i]);
    }
    int ok = !b.bad && b.off == b.n;
    free(raw);
    if (!ok) {
        qp_why(lz->why, sizeof(lz->why), "description chunk %u: %s",
               (uint32_t)(c - lz->chunks), "a call site truncated or a value out of range");
        return QP_EFORMAT;
    }
    return 0;
}

int
qp_desc_need_all(qp_desc_t *d, char *why, size_t whylen)
{
    if (d == NULL)
        return QP_EINVAL;
    if (d->lazy == NULL)
        return 0;
    for (uint32_t k = 0; k < d->lazy->nchunks; k++) {
        int rc = need_chunk(d, &d->lazy->chunks[k]);
        if (rc == 0 && d->hdr.version == QP_FORMAT_VERSION)
            rc = load_calls(d, d->lazy, &d->lazy->chunks[k]);
        if (rc < 0) {
            qp_why(why, whylen, "%s", d->lazy->why);
            return rc;
        }
    }
    /* Version 7: every call site is in the array now; the map gets each one's procedure,
     * and the key sites must be exactly those that the sites make. */
    if (d->hdr.version == QP_FORMAT_VERSION) {
        qp_entry_map_free(d->by_entry);
        int rc = qp_entry_map_build(d, 1, d->by_entry);
        qp_desc_keys_t *k = NULL;
        if (rc == 0)
            rc = keys_from_calls(d, &k);
        if (rc < 0) {
            qp_why(why, whylen, "%s", qp_strerror(rc));
            return rc;
        }
        int same = k->n == d->keys->n
            && memcmp(k->index, d->keys->index, k->n * sizeof(uint32_t)) == 0
            && memcmp(k->calls, d->keys->calls, k->n * sizeof(qp_desc_call_t)) == 0;
        keys_free(k);
        if (!same) {
            qp_why(why, whylen, "description index: its key call sites are not those of "
                   "its call sites");
            return QP_EFORMAT;
        }
    }
    /* Everything is in the arrays now: nothing refers to the bytes any more. */
    lazy_free(d->lazy);
    d->lazy = NULL;
    return 0;
}

/*
 * Version 6: the index of BUF decoded and checked into OUT, the chunks located. *END:
 * where the last chunk ends.
 */
static int
parse_v6(const uint8_t *buf, size_t len, const qp_desc_hdr_t *h, qp_desc_t *out,
         size_t *end, char *why, size_t whylen)
{
    struct qp_desc_lazy *lz = calloc(1, sizeof(*lz));
    lzma_stream z = LZMA_STREAM_INIT;
    size_t win = h->body_size < WINDOW ? h->body_size + 1 : WINDOW;
    rbuf_t b = { NULL, 0, 0, 0, &z, malloc(win), win, h->body_size, LZMA_OK };
    if (lz == NULL || b.win == NULL || unpack_init(&z, h->body_size, h->version) < 0) {
        free(lz);
        free(b.win);
        lzma_end(&z);
        qp_why(why, whylen, "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    lz->buf = buf;
    out->lazy = lz;
    z.next_in = buf + sizeof(*h);
    z.avail_in = len - sizeof(*h);
    char rwhy[512] = "";
    int rrc = decode_index(&b, out, lz, rwhy, sizeof(rwhy));
    size_t iend = 0;
    int rc = finish_stream(&b, h, &iend, why, whylen);
    lzma_end(&z);
    free(b.win);
    *end = iend;
    if (rc == 0 && rrc == 0) {
        /* The chunks follow the index, back to back. */
        for (uint32_t k = 0; k < lz->nchunks; k++)
            lz->chunks[k].zoff += iend;
        rrc = validate_index(out, lz, len - iend, rwhy, sizeof(rwhy));
        if (rrc == 0
            && (h->version == QP_FORMAT_VERSION ? keys_index_procs(out, out->keys)
                                                : index_first_calls(out, lz)) < 0) {
            qp_why(rwhy, sizeof(rwhy), "%s", qp_strerror(QP_ENOMEM));
            rrc = QP_ENOMEM;
        }
        /* The arrays the chunks fill, once their sizes are known to fit the bytes: their
         * memory is touched (resident) only where a chunk is decoded. */
        if (rrc == 0
            && (alloc_part((void **)&out->blocks, h->nblocks, sizeof(qp_desc_block_t)) < 0
                || alloc_part((void **)&out->edges, h->nedges, sizeof(qp_desc_edge_t)) < 0)) {
            qp_why(rwhy, sizeof(rwhy), "%s", qp_strerror(QP_ENOMEM));
            rrc = QP_ENOMEM;
        }
        if (rrc == 0) {
            const desc_chunk_t *last = &lz->chunks[lz->nchunks - 1];
            *end = last->zoff + last->zsize;
        }
    }
    if (rrc < 0)
        *end = 0; /* where the chunks end is not known: no id to check */
    if (rc == 0 && rrc < 0) {
        qp_why(why, whylen, "%s", rwhy);
        rc = rrc;
    }
    return rc;
}

/* The checks after the body: only zero padding after END, the id over [0, END). */
static int
check_tail(const uint8_t *buf, size_t len, size_t end, uint64_t want, char *why,
           size_t whylen)
{
    for (size_t i = end; i < len; i++)
        if (buf[i] != 0) {
            qp_why(why, whylen, "description has %zu stray bytes after its end", len - end);
            return QP_EFORMAT;
        }
    uint64_t id = 0;
    if (qp_desc_id(buf, end, &id), id != want) {
        qp_why(why, whylen, "description corrupted (contents do not match id %016llx)",
               (unsigned long long)want);
        return QP_EFORMAT;
    }
    return 0;
}

/*
 * Version 6 is read in two steps: the index here, the chunks when asked for. The id
 * covers every byte, so a corrupted chunk is found here too; a chunk's records are
 * checked when it is decoded.
 */
int
qp_desc_parse_lazy(const uint8_t *buf, size_t len, qp_desc_t *out, char *why, size_t whylen)
{
    if (buf == NULL || out == NULL)
        return QP_EINVAL;
    memset(out, 0, sizeof(*out));
    qp_desc_hdr_t h;
    QP_CHECK(check_header(buf, len, &h, why, whylen));
    out->hdr = h;
    size_t end = 0;
    char swhy[512] = "";
    int rc = h.version == QP_FORMAT_V5 ? parse_v5(buf, len, &h, out, &end, swhy, sizeof(swhy))
                                       : parse_v6(buf, len, &h, out, &end, swhy, sizeof(swhy));
    /* A stream that failed is said first, then stray bytes and the id, then records. */
    int stream_failed = rc < 0 && end == 0;
    if (stream_failed)
        qp_why(why, whylen, "%s", swhy);
    else if (end > 0 && check_tail(buf, len, end, h.id, why, whylen) < 0)
        rc = QP_EFORMAT;
    else if (rc < 0)
        qp_why(why, whylen, "%s", swhy);
    if (rc == 0 && h.version == QP_FORMAT_V5)
        rc = qp_desc_validate(out, why, whylen);
    if (rc < 0) {
        qp_desc_free(out);
        return rc;
    }
    out->strtab_cap = out->hdr.strtab_size;
    return 0;
}

int
qp_desc_peek(const uint8_t *buf, size_t len, qp_desc_hdr_t *h)
{
    if (buf == NULL || h == NULL || len < sizeof(*h)
        || memcmp(buf, QP_DESC_MAGIC, sizeof(h->magic)) != 0)
        return QP_EFORMAT;
    memcpy(h, buf, sizeof(*h));
    return 0;
}

int
qp_desc_parse(const uint8_t *buf, size_t len, qp_desc_t *out, char *why, size_t whylen)
{
    QP_CHECK(qp_desc_parse_lazy(buf, len, out, why, whylen));
    int v6 = out->lazy != NULL;
    int rc = qp_desc_need_all(out, why, whylen);
    if (rc == 0 && v6)
        rc = qp_desc_validate(out, why, whylen); /* the rules across chunks too */
    if (rc < 0)
        qp_desc_free(out);
    return rc;
}
