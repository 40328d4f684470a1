/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The description (.qpt.desc): serialization for the rewriter, parsing and validation of
 * untrusted bytes for qp. The on-disk layout is the in-memory layout of the qp_format.h
 * structs on x86-64 (little-endian, natural alignment), so both directions are copies
 * plus checks.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Byte offsets of the parts in the serialized form; 64-bit sums cannot overflow. */
typedef struct desc_layout {
    uint64_t procs, blocks, edges, calls, strtab, total;
} desc_layout_t;

static desc_layout_t
layout_of(const qp_desc_hdr_t *h)
{
    desc_layout_t l;
    l.procs = sizeof(qp_desc_hdr_t);
    l.blocks = l.procs + (uint64_t)h->nprocs * sizeof(qp_desc_proc_t);
    l.edges = l.blocks + (uint64_t)h->nblocks * sizeof(qp_desc_block_t);
    l.calls = l.edges + (uint64_t)h->nedges * sizeof(qp_desc_edge_t);
    l.strtab = l.calls + (uint64_t)h->ncalls * sizeof(qp_desc_call_t);
    l.total = l.strtab + h->strtab_size;
    return l;
}

int
qp_desc_serialize(const qp_desc_t *d, uint8_t **buf, size_t *len)
{
    if (d == NULL || buf == NULL || len == NULL)
        return QP_EINVAL;
    if (qp_desc_validate(d, NULL, 0) < 0)
        return QP_EINVAL;
    desc_layout_t l = layout_of(&d->hdr);
    if (l.total > SIZE_MAX)
        return QP_ENOMEM;
    uint8_t *b = malloc(l.total);
    if (b == NULL)
        return QP_ENOMEM;
    qp_desc_hdr_t h = d->hdr;
    memcpy(h.magic, QP_DESC_MAGIC, sizeof(h.magic));
    h.version = QP_FORMAT_VERSION;
    h.id = 0;
    memcpy(b, &h, sizeof(h));
    if (d->hdr.nprocs)
        memcpy(b + l.procs, d->procs, l.blocks - l.procs);
    if (d->hdr.nblocks)
        memcpy(b + l.blocks, d->blocks, l.edges - l.blocks);
    if (d->hdr.nedges)
        memcpy(b + l.edges, d->edges, l.calls - l.edges);
    if (d->hdr.ncalls)
        memcpy(b + l.calls, d->calls, l.strtab - l.calls);
    memcpy(b + l.strtab, d->strtab, d->hdr.strtab_size);
    qp_desc_id(b, l.total, &h.id);
    memcpy(b + offsetof(qp_desc_hdr_t, id), &h.id, sizeof(h.id));
    *buf = b;
    *len = l.total;
    return 0;
}

/*****************************************************************************
 * Parsing
 */

/* A malloc'd copy of N bytes at P (NULL for N == 0 is not an error: *OUT stays NULL). */
static int
copy_part(const uint8_t *p, uint64_t n, void **out)
{
    *out = NULL;
    if (n == 0)
        return 0;
    *out = malloc(n);
    if (*out == NULL)
        return QP_ENOMEM;
    memcpy(*out, p, n);
    return 0;
}

static int
check_header(const uint8_t *buf, size_t len, desc_layout_t *l, char *why, size_t whylen)
{
    qp_desc_hdr_t h;
    if (len < sizeof(h)) {
        qp_why(why, whylen, "description truncated (%zu bytes, header needs %zu)", len,
               sizeof(h));
        return QP_EFORMAT;
    }
    memcpy(&h, buf, sizeof(h));
    if (memcmp(h.magic, QP_DESC_MAGIC, sizeof(h.magic)) != 0) {
        qp_why(why, whylen, "not a qpt description (bad magic)");
        return QP_EFORMAT;
    }
    if (h.version != QP_FORMAT_VERSION) {
        qp_why(why, whylen, "description format version %u, this qp reads version %u "
               "(rewrite the program again with this qpt-rewrite)", h.version, QP_FORMAT_VERSION);
        return QP_EFORMAT;
    }
    *l = layout_of(&h);
    if (l->total > len) {
        qp_why(why, whylen, "description truncated (%zu bytes, its header needs %llu)", len,
               (unsigned long long)l->total);
        return QP_EFORMAT;
    }
    /* Only zero padding (section alignment) may follow the string table. */
    for (size_t i = l->total; i < len; i++)
        if (buf[i] != 0) {
            qp_why(why, whylen, "description has %zu stray bytes after its end",
                   len - (size_t)l->total);
            return QP_EFORMAT;
        }
    uint64_t id;
    qp_desc_id(buf, l->total, &id);
    if (id != h.id) {
        qp_why(why, whylen, "description corrupted (contents do not match id %016llx)",
               (unsigned long long)h.id);
        return QP_EFORMAT;
    }
    return 0;
}

int
qp_desc_parse(const uint8_t *buf, size_t len, qp_desc_t *out, char *why, size_t whylen)
{
    if (buf == NULL || out == NULL)
        return QP_EINVAL;
    memset(out, 0, sizeof(*out));
    desc_layout_t l;
    QP_CHECK(check_header(buf, len, &l, why, whylen));
    memcpy(&out->hdr, buf, sizeof(out->hdr));
    int rc = copy_part(buf + l.procs, l.blocks - l.procs, (void **)&out->procs);
    if (rc == 0)
        rc = copy_part(buf + l.blocks, l.edges - l.blocks, (void **)&out->blocks);
    if (rc == 0)
        rc = copy_part(buf + l.edges, l.calls - l.edges, (void **)&out->edges);
    if (rc == 0)
        rc = copy_part(buf + l.calls, l.strtab - l.calls, (void **)&out->calls);
    if (rc == 0)
        rc = copy_part(buf + l.strtab, l.total - l.strtab, (void **)&out->strtab);
    if (rc < 0)
        qp_why(why, whylen, "%s", qp_strerror(rc));
    else
        rc = qp_desc_validate(out, why, whylen);
    if (rc < 0) {
        qp_desc_free(out);
        return rc;
    }
    out->strtab_cap = out->hdr.strtab_size;
    return 0;
}
