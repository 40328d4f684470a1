/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A fuzz target for the description parser (base/qp_desc.c). The input bytes are
 * parsed twice: as a .qpt.desc section, as qp finds it in an instrumented file (anyone
 * may hand qp a file), and as a header followed by the decompressed body, which the
 * target compresses and signs with its id (else a mutation would rarely get past the
 * LZMA2 stream and the id to the record decoder and the validation). parse must refuse or
 * accept without a crash, hang, leak or sanitizer report; what it accepts must
 * serialize again into bytes that parse to the same description and be safe to solve
 * per procedure.
 */
#include "config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <lzma.h>

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
    if (qp_desc_parse(data, size, &d, why, sizeof(why)) != 0)
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

/* DATA as a header and a decompressed body (version 7: the index; the chunks it names
 * are missing, so mutations reach the index's decoder and checks): compressed
 * (qp_format.h: raw LZMA2, lc 1, lp 0, pb 0, preset 0's dictionary: no match reaches
 * further back than the decoder's, the body's size), its size and id made right. */
static void
parse_inflated(const uint8_t *data, size_t size)
{
    const size_t hs = sizeof(qp_desc_hdr_t);
    if (size < hs || size - hs > UINT32_MAX)
        return;
    size_t cap = 2 * (size - hs) + 4096, zlen = 0;
    uint8_t *b = malloc(hs + cap);
    if (b == NULL)
        return;
    qp_desc_hdr_t h;
    memcpy(&h, data, hs);
    memcpy(h.magic, QP_DESC_MAGIC, sizeof(h.magic));
    h.version = QP_FORMAT_VERSION;
    h.body_size = (uint32_t)(size - hs);
    lzma_options_lzma o;
    if (lzma_lzma_preset(&o, 0))
        abort();
    o.lc = 1;
    o.lp = 0;
    o.pb = 0;
    lzma_filter f[2] = { { LZMA_FILTER_LZMA2, &o }, { LZMA_VLI_UNKNOWN, NULL } };
    if (lzma_raw_buffer_encode(f, NULL, data + hs, size - hs, b + hs, &zlen, cap) == LZMA_OK) {
        memcpy(b, &h, hs);
        qp_desc_id(b, hs + zlen, &h.id);
        memcpy(b + offsetof(qp_desc_hdr_t, id), &h.id, sizeof(h.id));
        parse_one(b, hs + zlen);
    }
    free(b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    parse_one(data, size);
    parse_inflated(data, size);
    return 0;
}
