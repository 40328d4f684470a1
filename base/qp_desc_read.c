/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The description (see qp_desc.c), reading untrusted bytes: the buffered varint
 * reader, the record decoders, the header checks of every version read (5 to 9), the
 * streams' decoders (LZMA2, zstd), version 8 and 9's index parts and version 5's body.
 */
#include "base/qp_huge.h"
#include "base/qp_desc_priv.h"

/*****************************************************************************
 * Parsing
 */

/* After every byte R->left promised came: whether R's stream ends there, with nothing
 * more (LZMA_STREAM_END), else why not (LZMA_BUF_ERROR: more bytes, or the input ended
 * inside the stream). */
static lzma_ret
stream_ends(rbuf_t *r)
{
    uint8_t one;
    r->z->next_out = &one;
    r->z->avail_out = 1;
    lzma_ret lr = desc_unpack(r->z);
    if (lr == LZMA_STREAM_END && r->z->avail_out == 0)
        return LZMA_BUF_ERROR;
    return lr == LZMA_OK ? LZMA_BUF_ERROR : lr;
}

/* Version 8 and 9: R's part inflated whole, on to the next one's stream, once the part's
 * stream ended where its size says (else R->zret says why not). */
static void
next_part(rbuf_t *r)
{
    const desc_part_t *p = &r->parts[r->part];
    r->zret = stream_ends(r);
    if (r->zret == LZMA_STREAM_END && r->z->total_in != p->z)
        r->zret = LZMA_DATA_ERROR; /* bytes of the part left unread */
    if (r->zret != LZMA_STREAM_END)
        return;
    p++;
    r->part++;
    r->later -= p->raw;
    r->left = p->raw;
    r->zret = desc_unpack_init(r->z, p->raw, r->z->version) < 0 ? LZMA_MEM_ERROR : LZMA_OK;
    r->z->next_in = r->buf + p->zoff;
    r->z->avail_in = p->z;
}

/* Inflate the next window of R's stream (at most the LEFT bytes the header promises).
 * Returns the bytes now in R->p, 0 at the end or on a stream error (R->zret). */
static size_t
refill(rbuf_t *r)
{
    if (r->z != NULL && r->left == 0 && r->zret == LZMA_OK && r->part + 1 < r->nparts)
        next_part(r);
    if (r->z == NULL || r->left == 0 || r->zret != LZMA_OK)
        return 0;
    size_t want = r->left < r->winsize ? (size_t)r->left : r->winsize;
    r->z->next_out = r->win;
    r->z->avail_out = want;
    while (r->z->avail_out > 0 && r->zret == LZMA_OK) {
        r->zret = desc_unpack(r->z);
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

uint64_t
desc_get_u_slow(rbuf_t *r)
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

/* The body bytes of R not read yet. */
uint64_t
desc_rest(const rbuf_t *r)
{
    return (uint64_t)(r->n - r->off) + r->left + r->later;
}

/* Copy the next N body bytes of R into OUT; 0, or -1 when fewer are left. */
int
desc_get_bytes(rbuf_t *r, uint8_t *out, size_t n)
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

const char *
desc_get_procs(rbuf_t *b, run_t *r, qp_desc_t *out)
{
    memset(r, 0, sizeof(*r));
    r->d = out;
    for (uint32_t i = 0; i < out->hdr.nprocs && !b->bad; i++)
        desc_get_proc(b, r, &out->procs[i]);
    return b->bad ? "procedure" : NULL;
}

void
desc_get_proc(rbuf_t *b, run_t *r, qp_desc_proc_t *p)
{
    uint64_t head = desc_get_max(b, (uint64_t)UINT32_MAX << 3 | 7);
    p->flags = (uint32_t)(head >> 3);
    p->name = r->name = desc_unzz32(desc_get_u32(b), r->name);
    p->entry = r->entry = desc_unzz64(desc_get_u(b), r->entry);
    if (head & 1)
        p->new_entry = r->new_entry = desc_unzz64(desc_get_u(b), r->new_entry);
    p->block = desc_unzz32(desc_get_u32(b), r->block);
    p->nblocks = desc_get_u32(b);
    p->edge = desc_unzz32(desc_get_u32(b), r->edge);
    p->nedges = desc_get_u32(b);
    r->block = p->block + p->nblocks;
    r->edge = p->edge + p->nedges;
    if (head & 2)
        p->reason = desc_get_u32(b);
    if (head & 4)
        p->miss = desc_get_u32(b);
}

static uint32_t
get_counter(rbuf_t *b, run_t *r)
{
    uint32_t c = desc_unzz32(desc_get_u32(b), r->counter);
    r->counter = c + 1;
    return c;
}

void
desc_get_block(rbuf_t *b, run_t *r, qp_desc_block_t *k)
{
    uint64_t head = desc_get_max(b, (uint64_t)UINT32_MAX << 2 | 3);
    k->ninsns = (uint32_t)(head >> 2);
    k->start = desc_unzz64(desc_get_u(b), r->start);
    k->size = desc_get_u32(b);
    r->start = k->start + k->size;
    k->new_start = 0;
    if (head & 2) {
        k->new_start = desc_unzz64(desc_get_u(b), r->new_start);
        r->new_start = k->new_start + k->size;
    }
    k->counter = head & 1 ? get_counter(b, r) : QP_NOCOUNTER;
    k->pad = 0;
}

/* An edge end: 0 for X, else 1 + a delta from REF. */
static uint32_t
get_end(rbuf_t *b, uint32_t ref)
{
    uint64_t v = desc_get_max(b, (uint64_t)UINT32_MAX + 1);
    return v == 0 ? QP_VIRT : desc_unzz32(v - 1, ref);
}

void
desc_get_edge(rbuf_t *b, run_t *r, qp_desc_edge_t *e)
{
    uint64_t head = desc_get_max(b, 0xffu << 2 | 3);
    e->kind = (uint8_t)(head >> 2);
    e->from = get_end(b, r->from);
    if (e->from != QP_VIRT)
        r->from = e->from;
    e->to = get_end(b, r->from);
    e->counter = head & 2 ? get_counter(b, r) : QP_NOCOUNTER;
    memset(e->pad, 0, sizeof(e->pad));
    e->ret_addr = 0;
    if (head & 1)
        e->ret_addr = r->ret_addr = desc_unzz64(desc_get_u(b), desc_ret_base(r, e->to));
}

void
desc_get_call(rbuf_t *b, run_t *r, qp_desc_call_t *c)
{
    uint64_t head = desc_get_max(b, 0xffu << 11 | 0x7ff);
    c->flags = (uint8_t)(head >> 11);
    c->kind = (uint8_t)(head >> 3);
    c->block = r->call_block = desc_unzz32(desc_get_u32(b), r->call_block);
    c->edge = head & 1 ? (r->call_edge = desc_unzz32(desc_get_u32(b), r->call_edge))
                       : QP_VIRT;
    if (head & 2)
        c->target = r->target = desc_unzz64(desc_get_u(b), r->target);
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
        c->name = r->call_name = desc_unzz32(desc_get_u32(b), r->call_name);
}

/* Allocate *P for N elements of SIZE (NULL for none). */
int
desc_alloc_part(void **p, uint32_t n, size_t size)
{
    *p = n ? calloc(n, size) : NULL;
    return n && *p == NULL ? QP_ENOMEM : 0;
}

int
desc_alloc_whole(void **p, uint32_t n, size_t size)
{
    *p = n ? qp_calloc_whole(n, size) : NULL;
    return n && *p == NULL ? QP_ENOMEM : 0;
}

/* The records of the body B into OUT (whose header has the counts), then its string
 * table: the body's last strtab_size bytes. */
static int
decode_body(rbuf_t *b, qp_desc_t *out, char *why, size_t whylen)
{
    const qp_desc_hdr_t *h = &out->hdr;
    if (desc_alloc_whole((void **)&out->procs, h->nprocs, sizeof(qp_desc_proc_t)) < 0
        || desc_alloc_whole((void **)&out->blocks, h->nblocks, sizeof(qp_desc_block_t)) < 0
        || desc_alloc_whole((void **)&out->edges, h->nedges, sizeof(qp_desc_edge_t)) < 0
        || desc_alloc_whole((void **)&out->calls, h->ncalls, sizeof(qp_desc_call_t)) < 0
        || desc_alloc_part((void **)&out->strtab, h->strtab_size, 1) < 0) {
        qp_why(why, whylen, "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    run_t r;
    const char *part = desc_get_procs(b, &r, out);
    uint32_t i = 0;
    if (part == NULL && desc_index_entries(&r) < 0) {
        qp_why(why, whylen, "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    for (i = 0; part == NULL && i < h->nblocks && !b->bad; i++)
        desc_get_block(b, &r, &out->blocks[i]);
    part = part ? part : b->bad ? "block" : NULL;
    for (i = 0; part == NULL && i < h->nedges && !b->bad; i++)
        desc_get_edge(b, &r, &out->edges[i]);
    part = part ? part : b->bad ? "edge" : NULL;
    for (i = 0; part == NULL && i < h->ncalls && !b->bad; i++)
        desc_get_call(b, &r, &out->calls[i]);
    part = part ? part : b->bad ? "call site" : NULL;
    desc_entries_done(&r, part == NULL ? out : NULL);
    if (part != NULL) {
        qp_why(why, whylen, "description body: %s %u truncated or a value out of range", part,
               i - 1);
        return QP_EFORMAT;
    }
    return desc_get_strtab(b, h, out, "body", why, whylen);
}

/* What is left of B is the string table, exactly: read into OUT's; WHAT names the
 * stream in the error ("body", "index"). */
int
desc_get_strtab(rbuf_t *b, const qp_desc_hdr_t *h, qp_desc_t *out, const char *what,
                char *why, size_t whylen)
{
    uint64_t rest = desc_rest(b);
    if (rest != h->strtab_size
        || desc_get_bytes(b, (uint8_t *)out->strtab, h->strtab_size) < 0) {
        qp_why(why, whylen, "description %s: %llu bytes after the records, the string "
               "table has %u", what, (unsigned long long)rest, h->strtab_size);
        return QP_EFORMAT;
    }
    return 0;
}

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
    int v7 = h->version >= QP_FORMAT_V7;
    uint64_t least = 1 + (uint64_t)h->nprocs * 2 + (v7 ? 1 : h->ncalls) + h->strtab_size;
    uint64_t most = 10 + (uint64_t)h->nprocs * (MAX_PROC + 2 * MAX_ZERO + MAX_CHUNK + 20)
        + MAX_CHUNK + 20 + (uint64_t)h->ncalls * (MAX_CALL + 16 + 5) + h->strtab_size;
    /* The chunks' records take a byte or more each, LZMA2 gives under 65536 a byte (zstd
     * under 32768: 128 KiB from a 4-byte RLE block);
     * version 7's call sites are records of the chunks (the reader allocates by their
     * count before it reads them: a changed count asked for 34 GB). */
    uint64_t records = (uint64_t)h->nblocks + h->nedges + (v7 ? h->ncalls : 0);
    if (h->body_size < least || h->body_size > most
        || h->body_size + records > (uint64_t)zlen * 65536 + 64) {
        qp_why(why, whylen, "description header: index of %u bytes does not fit its counts "
               "(%u procedures, %u blocks, %u edges, %u call sites, %u bytes of strings) or "
               "its %zu compressed bytes", h->body_size, h->nprocs, h->nblocks, h->nedges,
               h->ncalls, h->strtab_size, zlen);
        return QP_EFORMAT;
    }
    return 0;
}

int
desc_check_header(
    const uint8_t *buf, size_t len, qp_desc_hdr_t *h, char *why, size_t whylen)
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
    if (h->version < QP_FORMAT_V5 || h->version > QP_FORMAT_VERSION) {
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
int
desc_finish_stream(
    rbuf_t *b, const qp_desc_hdr_t *h, size_t *end, char *why, size_t whylen)
{
    while (refill(b) > 0)
        ;
    lzma_ret lr = b->zret;
    int early = lr == LZMA_STREAM_END; /* a stream ended before its bytes came */
    if (lr == LZMA_OK && b->left == 0 && b->later == 0) {
        /* Every promised byte came: the stream must end here, with nothing more. */
        lr = stream_ends(b);
        if (lr == LZMA_STREAM_END && b->nparts > 0
            && b->z->total_in != b->parts[b->part].z)
            lr = LZMA_DATA_ERROR; /* bytes of the last part left unread */
    }
    if (lr != LZMA_STREAM_END || early || b->left != 0 || b->later != 0) {
        qp_why(why, whylen,
            "description corrupted or truncated (its body does not "
            "decompress to the %u bytes its header says: %s)",
            h->body_size,
            early                      ? "fewer"
                : lr == LZMA_MEM_ERROR ? "out of memory"
                : lr == LZMA_BUF_ERROR ? "more, or the stream ends early"
                                       : "bad stream");
        return lr == LZMA_MEM_ERROR ? QP_ENOMEM : QP_EFORMAT;
    }
    *end = (b->nparts > 0 ? b->parts[b->part].zoff : sizeof(*h)) + (size_t)b->z->total_in;
    return 0;
}

/*
 * Version 8 and 9's parts' table after the header H of BUF (LEN bytes), read into P (N entries)
 * or, P NULL, only checked: every part of at least a byte each way, their bytes body_size
 * in all, their streams inside BUF. 0 when it holds, else 1.
 */
static int
parts_read(const uint8_t *buf, size_t len, const qp_desc_hdr_t *h, desc_part_t *p,
    uint64_t *n)
{
    rbuf_t b = desc_plain_rbuf(buf + sizeof(*h), len - sizeof(*h));
    uint64_t raw = 0, zoff;
    *n = desc_get_max(&b, h->body_size);
    /* A part takes two bytes of the table and five of its stream at least (an LZMA2
     * chunk's control byte and size, a byte, the end mark; a zstd frame's magic number
     * alone takes four, its block header three): no count BUF cannot hold. */
    if (b.bad || *n == 0 || *n > (len - sizeof(*h)) / 7)
        return 1;
    for (uint64_t i = 0; i < *n && !b.bad; i++) {
        uint32_t r = (uint32_t)desc_get_max(&b, h->body_size - raw);
        uint32_t z = desc_get_u32(&b);
        raw += r;
        if (r == 0 || z == 0)
            b.bad = 1;
        else if (p != NULL)
            p[i] = (desc_part_t) { .raw = r, .z = z };
    }
    zoff = sizeof(*h) + b.off;
    if (b.bad || raw != h->body_size)
        return 1;
    /* The streams' offsets: known only once the table's end is (their sizes are read
     * again from the table when P is NULL). */
    rbuf_t again = desc_plain_rbuf(buf + sizeof(*h), len - sizeof(*h));
    (void)desc_get_max(&again, h->body_size);
    for (uint64_t i = 0; i < *n; i++) {
        (void)desc_get_u32(&again);
        uint32_t z = desc_get_u32(&again);
        if (p != NULL)
            p[i].zoff = (size_t)zoff;
        zoff += z;
        if (zoff > len)
            return 1;
    }
    return 0;
}

/*
 * Version 8 and 9: the parts' table after the header H of BUF (LEN bytes) into *PARTS
 * (malloc'd, *NPARTS of them), checked first (parts_read) so that a table the file
 * does not hold costs no memory.
 */
int
desc_get_parts(const uint8_t *buf, size_t len, const qp_desc_hdr_t *h,
    desc_part_t **parts, uint32_t *nparts, char *why, size_t whylen)
{
    desc_part_t *p = NULL;
    uint64_t n;
    if (parts_read(buf, len, h, NULL, &n) != 0) {
        qp_why(why, whylen,
            "description index: its parts' table is truncated or does not "
            "fit the %u bytes of the index or the %zu of the description",
            h->body_size, len);
        return QP_EFORMAT;
    }
    if ((p = calloc(n, sizeof(*p))) == NULL) {
        qp_why(why, whylen, "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    (void)parts_read(buf, len, h, p, &n);
    *parts = p;
    *nparts = (uint32_t)n;
    return 0;
}

/* Z ready for the next piece, of N bytes decompressed, of a description of VERSION
 * (qp_format.h: raw LZMA2 with the dictionary of its size, or a zstd frame). */
int
desc_unpack_init(desc_stream_t *z, uint64_t n, uint32_t version)
{
    z->version = version;
    z->total_in = 0;
    z->ended = 0;
    if (version < QP_FORMAT_V9) {
        lzma_options_lzma o;
        QP_CHECK(desc_lzma_options(6, &o));
        o.dict_size = version == QP_FORMAT_V5 ? LZMA_DICT_MAX : desc_dict_for(n);
        lzma_filter f[2] = { { LZMA_FILTER_LZMA2, &o }, { LZMA_VLI_UNKNOWN, NULL } };
        return lzma_raw_decoder(&z->lz, f) == LZMA_OK ? 0 : QP_ENOMEM;
    }
    if (z->zs == NULL) {
        if ((z->zs = ZSTD_createDCtx()) == NULL
            || ZSTD_isError(ZSTD_DCtx_setParameter(z->zs, ZSTD_d_windowLogMax,
                ZSTD_WINDOW_LOG)))
            return QP_ENOMEM;
    }
    return ZSTD_isError(ZSTD_DCtx_reset(z->zs, ZSTD_reset_session_only)) ? QP_ENOMEM : 0;
}

/* Version 9: Z's frame inflated as lzma_code does with LZMA_FINISH: until its output is
 * full, its input used up or the frame's end. A piece is one frame with its size (no
 * skippable frame, nothing after it: that is left unread). */
static lzma_ret
unpack_zstd(desc_stream_t *z)
{
    if (z->ended)
        return LZMA_STREAM_END;
    rd_t magic = { z->next_in, z->avail_in, 0, 0 };
    if (z->total_in == 0 && z->avail_in >= 4 && rd_n(&magic, 4) != ZSTD_MAGICNUMBER)
        return LZMA_DATA_ERROR; /* no skippable or legacy frame */
    for (int moved = 0;; moved = 1) {
        ZSTD_inBuffer in = { z->next_in, z->avail_in, 0 };
        ZSTD_outBuffer out = { z->next_out, z->avail_out, 0 };
        size_t r = ZSTD_decompressStream(z->zs, &out, &in);
        z->next_in += in.pos;
        z->avail_in -= in.pos;
        z->total_in += in.pos;
        z->next_out += out.pos;
        z->avail_out -= out.pos;
        if (ZSTD_isError(r))
            return ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation ? LZMA_MEM_ERROR
                                                                        : LZMA_DATA_ERROR;
        if (r == 0) {
            z->ended = 1;
            return LZMA_STREAM_END;
        }
        if (in.pos == 0 && out.pos == 0)
            return moved ? LZMA_OK : LZMA_BUF_ERROR; /* no progress: more input needed */
        if (z->avail_out == 0)
            return LZMA_OK;
    }
}

/* Inflate Z's piece into its output (lzma_code with LZMA_FINISH, whatever the kind). */
lzma_ret
desc_unpack(desc_stream_t *z)
{
    if (z->version >= QP_FORMAT_V9)
        return unpack_zstd(z);
    z->lz.next_in = z->next_in;
    z->lz.avail_in = z->avail_in;
    z->lz.next_out = z->next_out;
    z->lz.avail_out = z->avail_out;
    lzma_ret lr = lzma_code(&z->lz, LZMA_FINISH);
    z->next_in = z->lz.next_in;
    z->avail_in = z->lz.avail_in;
    z->next_out = z->lz.next_out;
    z->avail_out = z->lz.avail_out;
    z->total_in = z->lz.total_in;
    return lr;
}

void
desc_unpack_end(desc_stream_t *z)
{
    lzma_end(&z->lz);
    ZSTD_freeDCtx(z->zs);
    z->zs = NULL;
}

/*
 * Version 5: the body of BUF (LEN bytes, header H checked) decoded whole into OUT.
 * *END: where its stream ended. A failure of the stream itself, stray bytes or another
 * id are said before what the records would say.
 */
int
desc_parse_v5(const uint8_t *buf, size_t len, const qp_desc_hdr_t *h, qp_desc_t *out,
         size_t *end, char *why, size_t whylen)
{
    desc_stream_t z = DESC_STREAM_INIT;
    size_t win = h->body_size < WINDOW ? h->body_size + 1 : WINDOW;
    rbuf_t b = { NULL, 0, 0, 0, &z, malloc(win), win, h->body_size, LZMA_OK, NULL, 0, 0,
        0, NULL };
    if (b.win == NULL || desc_unpack_init(&z, h->body_size, h->version) < 0) {
        free(b.win);
        desc_unpack_end(&z);
        qp_why(why, whylen, "%s", qp_strerror(QP_ENOMEM));
        return QP_ENOMEM;
    }
    z.next_in = buf + sizeof(*h);
    z.avail_in = len - sizeof(*h);
    char rwhy[512] = "";
    int rrc = decode_body(&b, out, rwhy, sizeof(rwhy));
    int rc = desc_finish_stream(&b, h, end, why, whylen);
    desc_unpack_end(&z);
    free(b.win);
    if (rc == 0 && rrc < 0) {
        qp_why(why, whylen, "%s", rwhy);
        rc = rrc;
    }
    return rc;
}
