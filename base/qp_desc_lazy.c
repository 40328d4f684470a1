/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The description (see qp_desc.c), version 6 and later: the index read first, and the
 * chunks decoded and validated when a caller asks for a procedure, block or call.
 */
#include "base/qp_desc_priv.h"

/*****************************************************************************
 * Version 6: the index, and the chunks decoded when asked for
 */

/* Where a record of a chunk starts in its inflated records (OFF), and the running
 * values its decoding starts from (run_t's): one procedure's records decode alone from
 * its first block's and its first edge's. */
typedef struct rec_mark {
    uint32_t off, counter, from;
    uint64_t start, new_start, ret_addr;
} rec_mark_t;

/* A procedure of a chunk that may be asked for later (classify_procs): its records'
 * bytes (its blocks', then its edges') at AT in its chunk's later bytes, and where
 * their decoding starts. */
typedef struct later_proc {
    uint32_t proc;
    uint32_t at, nbbytes, nebytes;
    rec_mark_t b, e;
} later_proc_t;

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
    later_proc_t *later; /* its procedures that may be asked for later (classify_procs),
                          * their bytes after them (one block), or NULL */
    uint32_t nlaterp;    /* how many */
    uint32_t nlater;     /* of them, not released yet (qp_desc_release): LATER goes with
                          * the last one */
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
    uint64_t *exec_next;         /* per call site in memory (all of a version 6, a version 7's
                                  * key sites; exec calls only): put_exec_next's */
    uint32_t *exec_tie;
    /* The chunk last decoded aside: its procedures are looked at, and those that
     * counted copied into the arrays, so that the pages of those that did not are
     * never touched (chromium: 44,000 of 670,000 procedures counted). */
    desc_chunk_t *scratch;
    qp_desc_block_t *sblocks;
    qp_desc_edge_t *sedges;
    uint32_t sbcap, secap;
    uint8_t *sraw;               /* the scratch chunk's records inflated */
    rec_mark_t *bmarks, *emarks; /* per record of the scratch arrays, and one past */
    char why[512];               /* why the last chunk refused */
    void (*release)(void *);     /* qp_desc_set_release's, or NULL */
    void *release_arg;
    uint64_t since_release;      /* compressed bytes inflated since it was last called */
    /* Per procedure decoded on its own (load_proc), or NULL: its blocks (malloc'd), its
     * edges right after them, until qp_desc_release. Copies into the arrays touched a
     * page of each for every procedure: chromium's 107,000 spread over 242 MB of them. */
    qp_desc_block_t **pblocks;
    uint8_t *later;              /* per procedure: one of its chunk's later */
    /* Per procedure, qp_desc_first_call (chromium's reports asked it 2 million times,
     * each a search through 3 million call sites). */
    uint32_t *first_call;
    uint32_t nprocs;             /* the description's */
    uint32_t hint;               /* the chunk chunk_of_proc found last */
    desc_stream_t z;             /* the chunks' decoder (its memory kept between chunks;
                                  * all zero: DESC_STREAM_INIT) */
};

void
desc_lazy_free(struct qp_desc_lazy *lz)
{
    if (lz != NULL) {
        for (uint32_t k = 0; lz->chunks != NULL && k < lz->nchunks; k++)
            free(lz->chunks[k].later);
        free(lz->sraw);
        free(lz->bmarks);
        free(lz->emarks);
        free(lz->chunks);
        free(lz->proc_state);
        free(lz->exec_next);
        free(lz->exec_tie);
        free(lz->sblocks);
        free(lz->sedges);
        for (uint32_t i = 0; lz->pblocks != NULL && i < lz->nprocs; i++)
            free(lz->pblocks[i]);
        free(lz->pblocks);
        free(lz->later);
        free(lz->first_call);
        desc_unpack_end(&lz->z);
    }
    free(lz);
}

/* One zero-input summary (put_zero) into *Z; NEDGES: its procedure's. */
static void
get_zero(rbuf_t *b, qp_desc_zero_t *z, uint32_t nedges)
{
    uint64_t v = desc_get_max(b, ((uint64_t)UINT32_MAX << 3 | 7) + 1);
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
    c->nprocs = desc_get_u32(b);
    c->nblocks = desc_get_u32(b);
    c->nedges = desc_get_u32(b);
    c->clo = desc_get_u32(b);
    c->cn = desc_get_u32(b);
    c->zsize = desc_get_u32(b);
    c->rawsize = desc_get_u32(b);
    c->ns_lo = desc_unzz64(desc_get_u(b), prev ? prev->ns_lo : 0);
    c->ns_hi = desc_unzz64(desc_get_u(b), c->ns_lo);
    c->nra = (uint32_t)desc_get_max(b, RA_PARTS);
    uint64_t p = prev != NULL && prev->nra ? prev->ra_lo[0] : 0;
    for (uint32_t j = 0; j < c->nra; j++) {
        c->ra_lo[j] = desc_unzz64(desc_get_u(b), p);
        c->ra_hi[j] = desc_unzz64(desc_get_u(b), c->ra_lo[j]);
        p = c->ra_hi[j];
    }
    if (v7) {
        c->ncalls = desc_get_u32(b);
        c->callbytes = desc_get_u32(b);
    }
}

/* Version 7's key sites (B, R's running values) into OUT->keys; B->bad when they do not
 * read. QP_ENOMEM, else 0. */
static int
get_keys(rbuf_t *b, run_t *r, qp_desc_t *out)
{
    uint32_t n = (uint32_t)desc_get_max(b, out->hdr.ncalls);
    qp_desc_keys_t *k = calloc(1, sizeof(*k));
    if (k == NULL)
        return QP_ENOMEM;
    out->keys = k;
    if (b->bad)
        return 0;
    if (desc_alloc_whole((void **)&k->calls, n, sizeof(qp_desc_call_t)) < 0
        || desc_alloc_whole((void **)&k->index, n, sizeof(uint32_t)) < 0
        || desc_alloc_whole((void **)&k->callee, n, sizeof(uint32_t)) < 0)
        return QP_ENOMEM;
    uint64_t next = 0; /* the lowest index the next key site may have */
    for (uint32_t i = 0; i < n && !b->bad; i++) {
        uint64_t at = next + desc_get_u32(b);
        if (at >= out->hdr.ncalls) {
            b->bad = 1;
            break;
        }
        k->index[i] = (uint32_t)at;
        r->callee_out = &k->callee[i];
        desc_get_call(b, r, &k->calls[i]);
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
    int v7 = h->version >= QP_FORMAT_V7;
    uint32_t nc = (uint32_t)desc_get_max(b, h->nprocs ? h->nprocs : 1);
    if (b->bad || nc == 0) {
        qp_why(why, whylen, "description index: bad number of chunks");
        return QP_EFORMAT;
    }
    if (desc_alloc_whole((void **)&out->procs, h->nprocs, sizeof(qp_desc_proc_t)) < 0
        || desc_alloc_whole((void **)&out->zero, h->nprocs, sizeof(qp_desc_zero_t)) < 0
        || desc_alloc_part((void **)&out->zero_entry, h->nprocs, sizeof(qp_desc_zero_t))
            < 0
        || (!v7
            && desc_alloc_part((void **)&out->calls, h->ncalls, sizeof(qp_desc_call_t))
                < 0)
        || desc_alloc_part((void **)&out->strtab, h->strtab_size, 1) < 0
        || desc_alloc_part((void **)&lz->chunks, nc, sizeof(desc_chunk_t)) < 0
        || desc_alloc_part((void **)&lz->proc_state, h->nprocs, 1) < 0
        || desc_alloc_part((void **)&lz->pblocks, h->nprocs, sizeof(qp_desc_block_t *))
            < 0
        || desc_alloc_part((void **)&lz->later, h->nprocs, 1) < 0) {
        qp_why(why, whylen, "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    lz->nchunks = nc;
    lz->nprocs = h->nprocs;
    run_t r;
    const char *part = desc_get_procs(b, &r, out);
    uint32_t i = 0;
    for (i = 0; part == NULL && i < h->nprocs && !b->bad; i++) {
        get_zero(b, &out->zero[i], out->procs[i].nedges);
        if (out->procs[i].flags & QP_PROC_BY_CALLS)
            get_zero(b, &out->zero_entry[i], out->procs[i].nedges);
    }
    part = part ? part : b->bad ? "zero-input summary" : NULL;
    if (part == NULL && desc_index_entries(&r) < 0) {
        qp_why(why, whylen, "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    if (part == NULL && v7 && get_keys(b, &r, out) < 0) {
        qp_why(why, whylen, "%s", qp_strerror(QP_ENOMEM));
        desc_entries_done(&r, NULL);
        return QP_ENOMEM;
    }
    for (i = 0; part == NULL && !v7 && i < h->ncalls && !b->bad; i++)
        desc_get_call(b, &r, &out->calls[i]);
    part = part ? part : b->bad ? "call site" : NULL;
    /* The exec sites, among every site (version 6) or the key sites (version 7). */
    const qp_desc_call_t *sites = !v7 ? out->calls : out->keys ? out->keys->calls : NULL;
    uint32_t nsites = !v7 ? h->ncalls : out->keys ? out->keys->n : 0;
    /* By the site's place among SITES: a version 7's key sites were read from its bytes,
     * where the header's count of all call sites costs nothing to state. */
    if (part == NULL
        && (desc_alloc_part((void **)&lz->exec_next, nsites, sizeof(uint64_t)) < 0
            || desc_alloc_part((void **)&lz->exec_tie, nsites, sizeof(uint32_t)) < 0)) {
        qp_why(why, whylen, "%s", qp_strerror(QP_ENOMEM));
        desc_entries_done(&r, NULL);
        return QP_ENOMEM;
    }
    for (i = 0; part == NULL && i < nsites && !b->bad; i++) {
        if (!(sites[i].flags & QP_CALLF_EXEC))
            continue;
        lz->exec_next[i] = desc_get_u(b);
        uint32_t tie = desc_get_u32(b);
        lz->exec_tie[i] = sites[i].block + tie;
        if (lz->exec_tie[i] < sites[i].block)
            b->bad = 1; /* wrapped */
    }
    part = part ? part : b->bad ? "exec call site" : NULL;
    for (i = 0; part == NULL && i < nc && !b->bad; i++)
        get_chunk(b, i ? &lz->chunks[i - 1] : NULL, &lz->chunks[i], v7);
    part = part ? part : b->bad ? "chunk" : NULL;
    desc_entries_done(&r, part == NULL ? out : NULL);
    if (part != NULL) {
        qp_why(why, whylen, "description index: %s %u truncated or a value out of range",
               part, i - 1);
        return QP_EFORMAT;
    }
    return desc_get_strtab(b, h, out, "index", why, whylen);
}

/* The chunks against the header and each other: they share out the procedures, blocks
 * and edges in order; each procedure's blocks and edges in its chunk; the counters of
 * each inside the profile's; streams of sane sizes inside the N bytes from the first. */
static int
validate_chunks(const qp_desc_t *d, const struct qp_desc_lazy *lz, size_t n, char *why,
                size_t whylen)
{
    const qp_desc_hdr_t *h = &d->hdr;
    int v7 = h->version >= QP_FORMAT_V7;
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
    QP_CHECK(desc_validate_strtab(d, why, whylen));
    for (uint32_t i = 0; i < h->nprocs; i++) {
        QP_CHECK(desc_validate_proc_head(d, i, why, whylen));
        if ((d->procs[i].flags & QP_PROC_MEASURED) && d->procs[i].nblocks == 0) {
            qp_why(why, whylen, "measured procedure %u (%s): no blocks", i,
                   d->strtab + d->procs[i].name);
            return QP_EFORMAT;
        }
    }
    if (h->version < QP_FORMAT_V7) {
        QP_CHECK(desc_validate_calls(d, 0, why, whylen));
        return validate_chunks(d, lz, n, why, whylen);
    }
    /* Version 7: the key sites, each one what makes a key site. */
    const qp_desc_keys_t *k = d->keys;
    QP_CHECK(desc_validate_sites(d, k->calls, k->index, k->n, 0, why, whylen));
    for (uint32_t j = 0; j < k->n; j++) {
        uint32_t p = k->callee[j];
        if (d->by_entry == NULL
            || !desc_is_key_site(
                &k->calls[j], p, p != QP_VIRT ? d->by_entry->kind[p] : 0)) {
            qp_why(why, whylen, "call site %u: not a key site, in the index", k->index[j]);
            return QP_EFORMAT;
        }
    }
    return validate_chunks(d, lz, n, why, whylen);
}

/* Does chunk C hold procedure PROC? */
static int
chunk_holds(const desc_chunk_t *c, uint32_t proc)
{
    return c->proc <= proc && proc - c->proc < c->nprocs;
}

/* The chunk of procedure PROC in LZ. The report asks by procedure index, mostly the
 * chunk it asked last or the next one: those first (a search through chromium's 13,000
 * chunks for each of 1.3 million questions was 4% of the report's instructions). */
static desc_chunk_t *
chunk_of_proc(struct qp_desc_lazy *lz, uint32_t proc)
{
    uint32_t h = lz->hint;
    if (h < lz->nchunks && chunk_holds(&lz->chunks[h], proc))
        return &lz->chunks[h];
    if (h + 1 < lz->nchunks && chunk_holds(&lz->chunks[h + 1], proc)) {
        lz->hint = h + 1;
        return &lz->chunks[h + 1];
    }
    uint32_t lo = 0, hi = lz->nchunks;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (chunk_holds(&lz->chunks[mid], proc)) {
            lz->hint = mid;
            return &lz->chunks[mid];
        }
        if (lz->chunks[mid].proc <= proc)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

uint32_t
desc_lazy_first_call(const qp_desc_t *d, uint32_t proc)
{
    /* Version 7 holds no call site but the key sites (qp_desc_keys) until need_all. */
    return d->lazy->first_call != NULL ? d->lazy->first_call[proc] : d->hdr.ncalls;
}

/* LZ's first_call of D (its call sites checked in block order): one sweep while the
 * procedures' blocks go up, a search where they do not. */
static int
index_first_calls(const qp_desc_t *d, struct qp_desc_lazy *lz)
{
    QP_CHECK(desc_alloc_part((void **)&lz->first_call, d->hdr.nprocs, sizeof(uint32_t)));
    uint32_t k = 0, prev = 0;
    for (uint32_t i = 0; i < d->hdr.nprocs; i++) {
        uint32_t b = d->procs[i].block;
        if (b < prev)
            k = desc_first_call_at(d, b);
        while (k < d->hdr.ncalls && d->calls[k].block < b)
            k++;
        lz->first_call[i] = k;
        prev = b;
    }
    return 0;
}

static int inflate_chunk(struct qp_desc_lazy *lz, const desc_chunk_t *c, int calls,
                         uint8_t **out);
static int
parse_chunk(const qp_desc_t *d, struct qp_desc_lazy *lz, const desc_chunk_t *c,
    const uint8_t *raw, qp_desc_block_t *blocks, qp_desc_edge_t *edges, rec_mark_t *bmarks,
    rec_mark_t *emarks);

/* Chunk C's records decoded into BLOCKS and EDGES (its nblocks and nedges, the first at
 * index 0); LZ->why says why not. */
static int
decode_chunk(const qp_desc_t *d, struct qp_desc_lazy *lz, const desc_chunk_t *c,
             qp_desc_block_t *blocks, qp_desc_edge_t *edges)
{
    uint8_t *raw = NULL;
    int rc = inflate_chunk(lz, c, 0, &raw);
    if (rc == 0)
        rc = parse_chunk(d, lz, c, raw, blocks, edges, NULL, NULL);
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
    desc_stream_t *z = &lz->z;
    *out = NULL;
    if (raw == NULL || desc_unpack_init(z, c->rawsize, z->version) < 0) {
        free(raw);
        qp_why(why, whylen, "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    /* Exactly rawsize bytes, then the stream's end, exactly at its last byte. */
    z->next_in = lz->buf + c->zoff;
    z->avail_in = c->zsize;
    z->next_out = raw;
    z->avail_out = want;
    lzma_ret lr = want > 0 ? desc_unpack(z) : LZMA_OK;
    size_t got = want - z->avail_out;
    uint8_t one;
    if (lr == LZMA_OK && got == c->rawsize) {
        z->next_out = &one;
        z->avail_out = 1;
        lr = desc_unpack(z);
        got += 1 - z->avail_out;
    }
    int stream_ok = want < c->rawsize ? lr == LZMA_OK && got == want /* the rest not read */
                                      : lr == LZMA_STREAM_END && got == c->rawsize
                                          && z->avail_in == 0;
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
 * nedges, the first at index 0), with where each starts into BMARKS and EMARKS (one
 * more each; may be NULL); LZ->why says why not. */
static int
parse_chunk(const qp_desc_t *d, struct qp_desc_lazy *lz, const desc_chunk_t *c,
            const uint8_t *raw, qp_desc_block_t *blocks, qp_desc_edge_t *edges,
            rec_mark_t *bmarks, rec_mark_t *emarks)
{
    char *why = lz->why;
    size_t whylen = sizeof(lz->why);
    uint32_t k = (uint32_t)(c - lz->chunks);
    /* Version 7: its call sites follow (callbytes, 0 before), inflated by need_all only
     * (load_calls). */
    rbuf_t b = desc_plain_rbuf(raw, c->rawsize - c->callbytes);
    run_t r;
    memset(&r, 0, sizeof(r));
    r.d = d;
    r.windowed = 1;
    r.win = blocks;
    r.win0 = c->block;
    r.nwin = c->nblocks;
    for (uint32_t i = 0; i <= c->nblocks && !b.bad; i++) {
        if (bmarks != NULL)
            bmarks[i] = (rec_mark_t) { (uint32_t)b.off, r.counter, 0, r.start, r.new_start, 0 };
        if (i < c->nblocks)
            desc_get_block(&b, &r, &blocks[i]);
    }
    for (uint32_t i = 0; i <= c->nedges && !b.bad; i++) {
        if (emarks != NULL)
            emarks[i] = (rec_mark_t) { (uint32_t)b.off, r.counter, r.from, 0, 0, r.ret_addr };
        if (i < c->nedges)
            desc_get_edge(&b, &r, &edges[i]);
    }
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
    if (d->hdr.version >= QP_FORMAT_V7) {
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
        QP_CHECK(desc_validate_block_at(d, i, e, why, whylen));
        if ((e->counter != QP_NOCOUNTER && e->counter - c->clo >= c->cn)
            || (e->new_start != 0 && (e->new_start < c->ns_lo || e->new_start > c->ns_hi))) {
            qp_why(why, whylen, "block %u: counter or new address outside its chunk's", i);
            return QP_EFORMAT;
        }
    }
    for (uint32_t i = e0; i < e0 + ne; i++) {
        const qp_desc_edge_t *e = &edges[i - e0];
        QP_CHECK(desc_validate_edge_at(d, i, e, why, whylen));
        if ((e->counter != QP_NOCOUNTER && e->counter - c->clo >= c->cn)
            || (e->ret_addr != 0 && !in_ra(c, e->ret_addr))) {
            qp_why(why, whylen, "edge %u: counter or return address outside its chunk's", i);
            return QP_EFORMAT;
        }
    }
    for (uint32_t i = p0; i < p0 + np; i++)
        QP_CHECK(desc_validate_proc_at(
            d, i, &edges[d->procs[i].nedges ? d->procs[i].edge - e0 : 0], why, whylen));
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
    /* The marks have one more record than the chunk (its end), so they exist even for
     * a chunk without blocks or edges: classify_procs reads them. */
    if (lz->bmarks == NULL || c->nblocks > lz->sbcap) {
        free(lz->sblocks);
        free(lz->bmarks);
        lz->sblocks = malloc((c->nblocks + 1) * sizeof(qp_desc_block_t));
        lz->bmarks = malloc((c->nblocks + 1) * sizeof(rec_mark_t));
        lz->sbcap = lz->sblocks != NULL && lz->bmarks != NULL ? c->nblocks : 0;
    }
    if (lz->emarks == NULL || c->nedges > lz->secap) {
        free(lz->sedges);
        free(lz->emarks);
        lz->sedges = malloc((c->nedges + 1) * sizeof(qp_desc_edge_t));
        lz->emarks = malloc((c->nedges + 1) * sizeof(rec_mark_t));
        lz->secap = lz->sedges != NULL && lz->emarks != NULL ? c->nedges : 0;
    }
    if (lz->bmarks == NULL || lz->emarks == NULL || c->nblocks > lz->sbcap
        || c->nedges > lz->secap) {
        qp_why(lz->why, sizeof(lz->why), "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    /* (The decoder writes every field of a record, absent ones 0: nothing to clear.) */
    /* Its records inflated (kept until the next chunk: classify_procs copies some). */
    free(lz->sraw);
    lz->sraw = NULL;
    QP_CHECK(inflate_chunk(lz, c, 0, &lz->sraw));
    QP_CHECK(parse_chunk(d, lz, c, lz->sraw, lz->sblocks, lz->sedges, lz->bmarks,
                         lz->emarks));
    lz->scratch = c;
    return 0;
}

static int need_chunk(const qp_desc_t *d, desc_chunk_t *c);

/* PROC's entry in C's later procedures, or NULL. */
static const later_proc_t *
later_of(const desc_chunk_t *c, uint32_t proc)
{
    for (uint32_t i = 0; c->later != NULL && i < c->nlaterp; i++)
        if (c->later[i].proc == proc)
            return &c->later[i];
    return NULL;
}

/* Later procedure LP of chunk C decoded alone into BLOCKS and EDGES (zeroed, its
 * nblocks and nedges), as parse_chunk decodes them with the chunk's (its edges name
 * its own blocks: a description whose edges do not is refused either way). */
static int
decode_later(const qp_desc_t *d, struct qp_desc_lazy *lz, const desc_chunk_t *c,
             const later_proc_t *lp, qp_desc_block_t *blocks, qp_desc_edge_t *edges)
{
    const qp_desc_proc_t *p = &d->procs[lp->proc];
    const uint8_t *bytes = (const uint8_t *)(c->later + c->nlaterp) + lp->at;
    rbuf_t b = desc_plain_rbuf(bytes, lp->nbbytes);
    rbuf_t e = desc_plain_rbuf(bytes + lp->nbbytes, lp->nebytes);
    run_t r;
    memset(&r, 0, sizeof(r));
    r.d = d;
    r.windowed = 1;
    r.win = blocks;
    r.win0 = p->block;
    r.nwin = p->nblocks;
    r.counter = lp->b.counter;
    r.start = lp->b.start;
    r.new_start = lp->b.new_start;
    for (uint32_t i = 0; i < p->nblocks && !b.bad; i++)
        desc_get_block(&b, &r, &blocks[i]);
    r.counter = lp->e.counter;
    r.from = lp->e.from;
    r.ret_addr = lp->e.ret_addr;
    for (uint32_t i = 0; i < p->nedges && !e.bad; i++)
        desc_get_edge(&e, &r, &edges[i]);
    if (b.bad || b.off != b.n || e.bad || e.off != e.n) {
        qp_why(lz->why, sizeof(lz->why), "description chunk %u: %s",
               (uint32_t)(c - lz->chunks), "a record truncated or a value out of range");
        return QP_EFORMAT;
    }
    return 0;
}

/* Procedure PROC of chunk C copied from the scratch arrays into D's (or decoded alone,
 * one of C's later procedures), and checked. */
static int
load_proc(const qp_desc_t *d, struct qp_desc_lazy *lz, desc_chunk_t *c, uint32_t proc)
{
    const later_proc_t *lp = later_of(c, proc);
    if (lp == NULL)
        QP_CHECK(decode_aside(d, lz, c));
    const qp_desc_proc_t *p = &d->procs[proc];
    /* A tail call of its blocks whose edge another procedure of the chunk lists (not a
     * valid description, but checked as qp_desc_validate does): the whole chunk. */
    uint32_t ncalls;
    const qp_desc_call_t *calls = calls_in_memory(d, &ncalls);
    for (uint32_t i = d->hdr.version >= QP_FORMAT_V7 ? d->keys->first[proc]
                                                     : qp_desc_first_call(d, proc);
         i < ncalls && calls[i].block - p->block < p->nblocks; i++)
        if (qp_call_is_tail(&calls[i]) && calls[i].edge - p->edge >= p->nedges)
            return need_chunk(d, c);
    /* The index put its blocks and edges inside the chunk's (validate_chunks). Copied
     * side by side (not into the arrays: see pblocks). */
    size_t bbytes = p->nblocks * sizeof(qp_desc_block_t);
    size_t nbytes = bbytes + p->nedges * sizeof(qp_desc_edge_t);
    qp_desc_block_t *blocks = lp != NULL ? calloc(1, nbytes ? nbytes : 1)
                                         : malloc(nbytes ? nbytes : 1);
    if (blocks == NULL) {
        qp_why(lz->why, sizeof(lz->why), "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    qp_desc_edge_t *edges = (qp_desc_edge_t *)((uint8_t *)blocks + bbytes);
    int rc = 0;
    if (lp != NULL)
        rc = decode_later(d, lz, c, lp, blocks, edges);
    if (lp == NULL && p->nblocks)
        memcpy(blocks, &lz->sblocks[p->block - c->block], bbytes);
    if (lp == NULL && p->nedges)
        memcpy(edges, &lz->sedges[p->edge - c->edge], p->nedges * sizeof(qp_desc_edge_t));
    if (rc == 0)
        rc = validate_decoded(d, lz, c, p->nblocks ? p->block : 0, p->nblocks,
                              p->nedges ? p->edge : 0, p->nedges, proc, 1, blocks, edges);
    if (rc < 0) {
        free(blocks);
        return rc;
    }
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
    /* Those that counted are solved: copied now, while the chunk is at hand (the report
     * solves them next, by index). Those counted by their calls are solved once their
     * callers are, which may be much later: their records are kept as they are in the
     * chunk, with where their decoding starts (later_proc_t), a few hundred bytes
     * each, where copying them decoded held chromium's 53,000 that counted nothing
     * (75 MB, of which a tenth was called) and keeping their chunks' records 40 MB,
     * and inflating the chunk again took 50 us each time. */
    uint32_t later = 0;
    size_t bytes = 0;
    for (uint32_t q = c->proc; q < c->proc + c->nprocs; q++) {
        const qp_desc_proc_t *p = &d->procs[q];
        int by_calls = (p->flags & (QP_PROC_BY_CALLS | QP_PROC_MEASURED))
            == (QP_PROC_BY_CALLS | QP_PROC_MEASURED);
        if (lz->proc_state[q] == PROC_COUNTED && !by_calls)
            (void)load_proc(d, lz, c, q); /* a failure is said when it is needed */
        else if ((lz->proc_state[q] == PROC_ZERO || lz->proc_state[q] == PROC_COUNTED)
                 && by_calls && c->later == NULL) {
            lz->later[q] = 1;
            later++;
            uint32_t b0 = p->block - c->block, e0 = p->nedges ? p->edge - c->edge : 0;
            bytes += lz->bmarks[b0 + p->nblocks].off - lz->bmarks[b0].off
                + lz->emarks[e0 + p->nedges].off - lz->emarks[e0].off;
        }
    }
    /* Out of memory: they decode with their chunk when asked for. */
    if (later > 0
        && (c->later = malloc(later * sizeof(later_proc_t) + bytes + 1)) != NULL) {
        uint8_t *at = (uint8_t *)(c->later + later);
        size_t off = 0;
        for (uint32_t q = c->proc; q < c->proc + c->nprocs; q++) {
            if (!lz->later[q])
                continue;
            const qp_desc_proc_t *p = &d->procs[q];
            uint32_t b0 = p->block - c->block, e0 = p->nedges ? p->edge - c->edge : 0;
            const rec_mark_t *bm = &lz->bmarks[b0], *em = &lz->emarks[e0];
            later_proc_t *lp = &c->later[c->nlaterp++];
            *lp = (later_proc_t) { q, (uint32_t)off, bm[p->nblocks].off - bm->off,
                                   em[p->nedges].off - em->off, *bm, *em };
            memcpy(at + off, lz->sraw + bm->off, lp->nbbytes);
            memcpy(at + off + lp->nbbytes, lz->sraw + em->off, lp->nebytes);
            off += lp->nbbytes + lp->nebytes;
        }
        c->nlater = later;
    } else if (later > 0)
        for (uint32_t q = c->proc; q < c->proc + c->nprocs; q++)
            if (lz->later[q]) {
                lz->later[q] = 0;
                if (lz->proc_state[q] == PROC_COUNTED)
                    (void)load_proc(d, lz, c, q);
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

void
qp_desc_release(const qp_desc_t *d, uint32_t proc)
{
    if (d == NULL || d->lazy == NULL || proc >= d->hdr.nprocs)
        return;
    struct qp_desc_lazy *lz = d->lazy;
    const qp_desc_block_t *blocks = lz->pblocks[proc];
    if (blocks != NULL) {
        /* What classify_procs would say of it again (decoded when asked for). */
        const qp_desc_proc_t *p = &d->procs[proc];
        const qp_desc_edge_t *edges = (const qp_desc_edge_t *)(blocks + p->nblocks);
        const uint64_t *counters = lz->zero_for;
        int counted = 0;
        for (uint32_t i = 0; counters != NULL && i < p->nblocks && !counted; i++)
            counted = blocks[i].counter != QP_NOCOUNTER && counters[blocks[i].counter] != 0;
        for (uint32_t i = 0; counters != NULL && i < p->nedges && !counted; i++)
            counted = edges[i].counter != QP_NOCOUNTER && counters[edges[i].counter] != 0;
        lz->proc_state[proc] = counters == NULL ? PROC_UNKNOWN
            : counted                          ? PROC_COUNTED
                                               : PROC_ZERO;
        free(lz->pblocks[proc]);
        lz->pblocks[proc] = NULL;
    }
    if (lz->later[proc]) {
        lz->later[proc] = 0;
        desc_chunk_t *c = chunk_of_proc(lz, proc);
        if (c != NULL && c->nlater > 0 && --c->nlater == 0) {
            free(c->later);
            c->later = NULL;
            c->nlaterp = 0;
        }
    }
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
    if (d->lazy == NULL || d->hdr.version < QP_FORMAT_V7)
        return &d->calls[call];
    const qp_desc_keys_t *k = d->keys;
    uint32_t at = desc_first_key_from(k, call);
    return at < k->n && k->index[at] == call ? &k->calls[at] : NULL;
}

int
qp_desc_exec_next(const qp_desc_t *d, uint32_t call, uint64_t *next, uint32_t *tie)
{
    const qp_desc_call_t *c
        = d != NULL && call < d->hdr.ncalls ? call_in_memory(d, call) : NULL;
    if (c == NULL || !(c->flags & QP_CALLF_EXEC))
        return QP_EINVAL;
    if (d->lazy != NULL) { /* (by the site's place among those in memory) */
        size_t at = d->hdr.version < QP_FORMAT_V7 ? call : (size_t)(c - d->keys->calls);
        *next = d->lazy->exec_next[at];
        *tie = d->lazy->exec_tie[at];
    } else
        desc_exec_next(d, d->calls[call].block, next, tie);
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
        && desc_alloc_part((void **)&d->calls, d->hdr.ncalls, sizeof(qp_desc_call_t))
            < 0) {
        qp_why(lz->why, sizeof(lz->why), "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    uint8_t *raw = NULL;
    QP_CHECK(inflate_chunk(lz, c, 1, &raw));
    rbuf_t b = desc_plain_rbuf(raw, c->rawsize);
    b.off = c->rawsize - c->callbytes;
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
            desc_get_call(&b, &r, &d->calls[i]);
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
        if (rc == 0 && d->hdr.version >= QP_FORMAT_V7)
            rc = load_calls(d, d->lazy, &d->lazy->chunks[k]);
        if (rc < 0) {
            qp_why(why, whylen, "%s", d->lazy->why);
            return rc;
        }
    }
    /* Version 7: every call site is in the array now; the map gets each one's procedure,
     * and the key sites must be exactly those that the sites make. */
    if (d->hdr.version >= QP_FORMAT_V7) {
        qp_entry_map_free(d->by_entry);
        int rc = qp_entry_map_build(d, 1, d->by_entry);
        qp_desc_keys_t *k = NULL;
        if (rc == 0)
            rc = desc_keys_from_calls(d, &k);
        if (rc < 0) {
            qp_why(why, whylen, "%s", qp_strerror(rc));
            return rc;
        }
        int same = k->n == d->keys->n
            && (k->n == 0 /* no arrays to compare: memcmp of NULL is undefined */
                || (memcmp(k->index, d->keys->index, k->n * sizeof(uint32_t)) == 0
                    && memcmp(k->calls, d->keys->calls, k->n * sizeof(qp_desc_call_t)) == 0));
        desc_keys_free(k);
        if (!same) {
            qp_why(why, whylen, "description index: its key call sites are not those of "
                   "its call sites");
            return QP_EFORMAT;
        }
    }
    /* Everything is in the arrays now: nothing refers to the bytes any more. */
    desc_lazy_free(d->lazy);
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
    /* Version 8 and 9: the index's parts, read one after another as one body. */
    desc_part_t *parts = NULL, whole = { h->body_size, 0, sizeof(*h) };
    uint32_t nparts = 0;
    if (h->version >= QP_FORMAT_V8)
        QP_CHECK(desc_get_parts(buf, len, h, &parts, &nparts, why, whylen));
    const desc_part_t *first = parts != NULL ? &parts[0] : &whole;
    struct qp_desc_lazy *lz = calloc(1, sizeof(*lz));
    desc_stream_t z = DESC_STREAM_INIT;
    size_t win = h->body_size < WINDOW ? h->body_size + 1 : WINDOW;
    rbuf_t b = { NULL, 0, 0, 0, &z, malloc(win), win, first->raw, LZMA_OK, parts, nparts,
        0, (uint64_t)h->body_size - first->raw, buf };
    if (lz == NULL || b.win == NULL || desc_unpack_init(&z, first->raw, h->version) < 0) {
        free(lz);
        free(b.win);
        free(parts);
        desc_unpack_end(&z);
        qp_why(why, whylen, "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    lz->buf = buf;
    out->lazy = lz;
    z.next_in = buf + first->zoff;
    z.avail_in = parts != NULL ? first->z : len - first->zoff;
    char rwhy[512] = "";
    int rrc = decode_index(&b, out, lz, rwhy, sizeof(rwhy));
    size_t iend = 0;
    int rc = desc_finish_stream(&b, h, &iend, why, whylen);
    desc_unpack_end(&z);
    lz->z.version = h->version; /* the chunks' kind of stream */
    free(b.win);
    free(parts);
    *end = iend;
    if (rc == 0 && rrc == 0) {
        /* The chunks follow the index, back to back. */
        for (uint32_t k = 0; k < lz->nchunks; k++)
            lz->chunks[k].zoff += iend;
        rrc = validate_index(out, lz, len - iend, rwhy, sizeof(rwhy));
        if (rrc == 0
            && (h->version >= QP_FORMAT_V7 ? desc_keys_index_procs(out, out->keys)
                                           : index_first_calls(out, lz))
                < 0) {
            qp_why(rwhy, sizeof(rwhy), "%s", qp_strerror(QP_ENOMEM));
            rrc = QP_ENOMEM;
        }
        /* The arrays the chunks fill, once their sizes are known to fit the bytes: their
         * memory is touched (resident) only where a chunk is decoded. */
        if (rrc == 0
            && (desc_alloc_part(
                    (void **)&out->blocks, h->nblocks, sizeof(qp_desc_block_t))
                    < 0
                || desc_alloc_part(
                       (void **)&out->edges, h->nedges, sizeof(qp_desc_edge_t))
                    < 0)) {
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
qp_desc_parse_lazy(
    const uint8_t *buf, size_t len, qp_desc_t *out, char *why, size_t whylen)
{
    if (buf == NULL || out == NULL)
        return QP_EINVAL;
    memset(out, 0, sizeof(*out));
    qp_desc_hdr_t h;
    QP_CHECK(desc_check_header(buf, len, &h, why, whylen));
    out->hdr = h;
    size_t end = 0;
    char swhy[512] = "";
    int rc = h.version == QP_FORMAT_V5
        ? desc_parse_v5(buf, len, &h, out, &end, swhy, sizeof(swhy))
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
