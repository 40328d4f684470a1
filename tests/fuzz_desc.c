/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A fuzz target for the description parser (base/qp_desc.c). The input bytes are
 * parsed three ways: as a .qpt.desc section, as qp finds it in an instrumented file (anyone
 * may hand qp a file), and twice as a header followed by the decompressed body, which the
 * target compresses (as version 7, and as versions 8 and 9 in two parts) and signs with its id (else a mutation would rarely get past the
 * LZMA2 stream or zstd frame and the id to the record decoder and the validation). parse must refuse or
 * accept without a crash, hang, leak or sanitizer report; what it accepts must
 * serialize again into bytes that parse to the same description and be safe to solve
 * per procedure.
 */
#include "config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <lzma.h>
#include <zstd.h>

#include "base/qp_desc.h"
#include "report/qp_flow.h"
#include "tests/fuzz.h"

/* Abort unless A and B hold the same records and strings. */
static void
same_desc(const qp_desc_t *a, const qp_desc_t *b)
{
    const qp_desc_hdr_t *x = &a->hdr, *y = &b->hdr;
    if (x->driver != y->driver || x->flags != y->flags || x->ncounters != y->ncounters
        || x->counters_vaddr != y->counters_vaddr || x->nprocs != y->nprocs
        || x->nblocks != y->nblocks || x->nedges != y->nedges || x->ncalls != y->ncalls
        || x->strtab_size != y->strtab_size
        || (x->nprocs && memcmp(a->procs, b->procs, x->nprocs * sizeof(*a->procs)))
        || (x->nblocks && memcmp(a->blocks, b->blocks, x->nblocks * sizeof(*a->blocks)))
        || (x->nedges && memcmp(a->edges, b->edges, x->nedges * sizeof(*a->edges)))
        || (x->ncalls && memcmp(a->calls, b->calls, x->ncalls * sizeof(*a->calls)))
        || memcmp(a->strtab, b->strtab, x->strtab_size))
        abort(); /* a description must survive serialize + parse */
}

/* Parse DATA; what is accepted must round-trip and solve. */
static void
parse_one(const uint8_t *data, size_t size)
{
    qp_desc_t d, back;
    char why[512];
    int rc = qp_desc_parse(data, size, &d, why, sizeof(why));
    if (rc == QP_ENOMEM && size < (1u << 20))
        abort(); /* counts a small input states must not cost memory before its bytes
                  * hold them (run under a limit: tests/qp-cli.sh) */
    if (rc != 0)
        return;
    uint8_t *buf = NULL;
    size_t len = 0;
    if (qp_desc_serialize(&d, &buf, &len) != 0)
        abort(); /* it parsed, so it is valid */
    if (qp_desc_parse(buf, len, &back, why, sizeof(why)) != 0)
        abort();
    same_desc(&d, &back);
    /* Solving needs the counters; a small table of zero counts will do. */
    if (d.hdr.ncounters <= 4096) {
        uint64_t *counts = calloc(d.hdr.ncounters + 1, sizeof(uint64_t));
        for (uint32_t p = 0; counts != NULL && p < d.hdr.nprocs && p < 64; p++) {
            qp_flow_t f;
            if (qp_flow_solve(&d, p, counts, d.hdr.ncounters, NULL, &f) == 0)
                qp_flow_free(&f);
        }
        free(counts);
    }
    free(buf);
    qp_desc_free(&back);
    qp_desc_free(&d);
}

/* N bytes at IN as VERSION packs them at OUT (CAP bytes): its bytes, 0 when it did not
 * fit. Before 9, a raw LZMA2 stream (qp_format.h: lc 1, lp 0, pb 0, preset 0's
 * dictionary: no match reaches further back than the decoder's, the body's size); 9, a
 * zstd frame of level 1. */
static size_t
pack_raw(uint32_t version, const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    if (version >= QP_FORMAT_V9) {
        size_t z = ZSTD_compress(out, cap, in, n, 1);
        return ZSTD_isError(z) ? 0 : z;
    }
    lzma_options_lzma o;
    if (lzma_lzma_preset(&o, 0))
        abort();
    o.lc = 1;
    o.lp = 0;
    o.pb = 0;
    lzma_filter f[2] = { { LZMA_FILTER_LZMA2, &o }, { LZMA_VLI_UNKNOWN, NULL } };
    size_t z = 0;
    return lzma_raw_buffer_encode(f, NULL, in, n, out, &z, cap) == LZMA_OK ? z : 0;
}

/* A varint V at P: its bytes. */
static size_t
put_uleb(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    do {
        p[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return n;
}

/* DATA as a header and a decompressed body (VERSION 7 or later: the index; the chunks it
 * names are missing, so mutations reach the index's decoder and checks): compressed,
 * version 8 and 9's in two parts cut at the middle (each a stream of its own, the parts' table
 * before them), its size and id made right. */
static void
parse_inflated(const uint8_t *data, size_t size, uint32_t version)
{
    const size_t hs = sizeof(qp_desc_hdr_t);
    if (size < hs || size - hs > UINT32_MAX)
        return;
    size_t n = size - hs, cut = version >= 8 && n >= 2 ? n / 2 : n;
    size_t cap = 2 * n + 8192, at = hs + 64;
    uint8_t *b = malloc(at + cap);
    if (b == NULL)
        return;
    qp_desc_hdr_t h;
    memcpy(&h, data, hs);
    memcpy(h.magic, QP_DESC_MAGIC, sizeof(h.magic));
    h.version = version;
    h.body_size = (uint32_t)n;
    size_t z1 = pack_raw(version, data + hs, cut, b + at, cap), z2 = 0;
    if (z1 > 0 && cut < n)
        z2 = pack_raw(version, data + hs + cut, n - cut, b + at + z1, cap - z1);
    if (z1 > 0 && (cut == n || z2 > 0)) {
        size_t t
            = hs; /* version 8: the parts' table between the header and the streams */
        if (cut < n) {
            t += put_uleb(b + t, 2);
            t += put_uleb(b + t, cut);
            t += put_uleb(b + t, z1);
            t += put_uleb(b + t, n - cut);
            t += put_uleb(b + t, z2);
        }
        memmove(b + t, b + at, z1 + z2);
        memcpy(b, &h, hs);
        qp_desc_id(b, t + z1 + z2, &h.id);
        memcpy(b + offsetof(qp_desc_hdr_t, id), &h.id, sizeof(h.id));
        parse_one(b, t + z1 + z2);
    }
    free(b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    parse_one(data, size);
    parse_inflated(data, size, 7);
    parse_inflated(data, size, QP_FORMAT_V8);
    parse_inflated(data, size, QP_FORMAT_V9);
    return 0;
}
