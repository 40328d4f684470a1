/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The description (.qpt.desc): serialization for the rewriter, parsing and validation of
 * untrusted bytes for qp. In memory the records are the qp_format.h structs; on disk
 * (version 5) a fixed header and an LZMA2 stream of varints and deltas (qp_format.h): the
 * encoder is total (any struct contents round-trip), the decoder bounds-checks every
 * value and then validates the result.
 */
#include "base/qp_desc_priv.h"

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

void
desc_keys_free(qp_desc_keys_t *k)
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
    desc_lazy_free(d->lazy);
    qp_entry_map_free(d->by_entry);
    free(d->by_entry);
    desc_keys_free(d->keys);
    memset(d, 0, sizeof(*d));
}

/* The first call site at or after block FIRST. */
uint32_t
desc_first_call_at(const qp_desc_t *d, uint32_t first)
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
    return d->lazy != NULL ? desc_lazy_first_call(d, proc)
                           : desc_first_call_at(d, d->procs[proc].block);
}

/*****************************************************************************
 * Validation
 */

/* True when [first, first + n) lies inside an array of TOTAL elements. */
int
desc_range_ok(uint32_t first, uint32_t n, uint32_t total)
{
    return first <= total && n <= total - first;
}

static int
counter_ok(const qp_desc_t *d, uint32_t counter)
{
    return counter == QP_NOCOUNTER || counter < d->hdr.ncounters;
}

int
desc_validate_strtab(const qp_desc_t *d, char *why, size_t whylen)
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
int
desc_validate_block_at(
    const qp_desc_t *d, uint32_t i, const qp_desc_block_t *b, char *why, size_t whylen)
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
        QP_CHECK(desc_validate_block_at(d, i, &d->blocks[i], why, whylen));
    return 0;
}

static int
kind_ok(uint8_t kind)
{
    return kind < CFG_NEDGE_KINDS || kind == QP_EDGE_ENTRY || kind == QP_EDGE_ROOT;
}

/* One edge on its own (edge I, record E): kind, which ends may be X, counter, block
 * indices. */
int
desc_validate_edge_at(const qp_desc_t *d, uint32_t i, const qp_desc_edge_t *e, char *why,
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
int
desc_validate_proc_head(const qp_desc_t *d, uint32_t i, char *why, size_t whylen)
{
    const qp_desc_proc_t *p = &d->procs[i];
    uint32_t nstr = d->hdr.strtab_size;
    if (p->name >= nstr || p->reason >= nstr) {
        qp_why(why, whylen, "procedure %u: string offset out of range", i);
        return QP_EFORMAT;
    }
    if (!desc_range_ok(p->block, p->nblocks, d->hdr.nblocks)
        || !desc_range_ok(p->edge, p->nedges, d->hdr.nedges)) {
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
int
desc_validate_proc_at(
    const qp_desc_t *d, uint32_t i, const qp_desc_edge_t *edges, char *why, size_t whylen)
{
    const qp_desc_proc_t *p = &d->procs[i];
    QP_CHECK(desc_validate_proc_head(d, i, why, whylen));
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
int
desc_validate_sites(const qp_desc_t *d, const qp_desc_call_t *calls,
    const uint32_t *index, uint32_t n, int edges, char *why, size_t whylen)
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
int
desc_validate_calls(const qp_desc_t *d, int edges, char *why, size_t whylen)
{
    return desc_validate_sites(d, d->calls, NULL, d->hdr.ncalls, edges, why, whylen);
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
    QP_CHECK(desc_validate_strtab(d, why, whylen));
    QP_CHECK(validate_blocks(d, why, whylen));
    for (uint32_t i = 0; i < h->nedges; i++)
        QP_CHECK(desc_validate_edge_at(d, i, &d->edges[i], why, whylen));
    for (uint32_t i = 0; i < h->nprocs; i++)
        QP_CHECK(desc_validate_proc_at(d, i, &d->edges[d->procs[i].edge], why, whylen));
    QP_CHECK(desc_validate_calls(d, 1, why, whylen));
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
qp_entry_map_find(
    const qp_desc_t *d, const qp_entry_map_t *m, uint64_t entry, int *shared)
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
