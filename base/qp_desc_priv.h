/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * What the parts of qp_desc.c share (base/ only): the writer's and the reader's
 * state, the varint and zigzag helpers, and the helpers one part calls in another.
 * The parts: qp_desc.c (names, validation, the id, procedures by entry),
 * qp_desc_write.c (key call sites, chunk plan, encoding), qp_desc_read.c (the reader,
 * the header checks, version 8's index parts, version 5's body), qp_desc_lazy.c
 * (version 6 and later: the index, chunks decoded when asked for).
 * Each helper is described where it is defined; the helpers are listed by file.
 */
#ifndef QP_DESC_PRIV_H
#define QP_DESC_PRIV_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <lzma.h>
#include <string.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "base/qp_bytes.h"
#include "base/qp_edge.h"
#include "base/qp_desc.h"

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
    uint32_t *callee_out; /* decoding key sites: where desc_get_call puts the callee */
} run_t;

/* Intervals of return addresses a chunk's plan keeps (chunk_plan_t, the index). */
enum { RA_PARTS = 4 };

/*
 * The compression (qp_format.h): raw LZMA2 with lc 1, lp 0, pb 0 (varints are bytes with
 * no alignment), preset 6's match finder or, when the records pass LZMA_SMALL in all,
 * preset 1's (preset 6 takes 0.3 s a MB, preset 1 0.04 s), and a dictionary as large as
 * the stream's bytes (at least LZMA's 4 KiB, at most 8 MiB): the decoder, told the
 * stream's size, allocates no more.
 */
#define LZMA_SMALL (2u << 20)
#define LZMA_DICT_MAX (8u << 20)

/* Version 9's zstd frames (qp_format.h): the most window a frame may ask of the reader
 * (8 MiB, as LZMA_DICT_MAX; the writer's pieces are far smaller), and the levels: the
 * first when the pieces take at most LZMA_SMALL in all (where version 8 took preset 6),
 * else the second (preset 1). Measured (2026-12-06, doc/measurements.md): bash's
 * description at 3, 9, 12, 19: 351, 336, 334, 327 KB (LZMA 307 KB), 0.01 to 0.14 s;
 * chromium's at 1, 3, 6, 9: 76.3, 74.6, 71.6, 70.8 MB (LZMA 67.6 MB) for 3.1, 3.6, 4.7,
 * 8.1 s of CPU (LZMA 17.0 s): past 6, twice the time for 1% less. */
#define ZSTD_WINDOW_LOG 23
#define ZSTD_LEVEL_SMALL 19
#define ZSTD_LEVEL_BIG 6

/*
 * A compressed piece being inflated: a raw LZMA2 stream (versions 5 to 8) or a zstd frame
 * (version 9), with lzma_stream's fields and statuses whichever it is (desc_unpack:
 * LZMA_OK while it runs, LZMA_STREAM_END once it ended, LZMA_BUF_ERROR when its input
 * ended inside it, LZMA_DATA_ERROR, LZMA_MEM_ERROR). desc_unpack_init starts the next
 * piece of the same kind, keeping the decoder's memory.
 */
typedef struct desc_stream {
    const uint8_t *next_in;
    size_t avail_in;
    uint64_t total_in; /* the piece's bytes read */
    uint8_t *next_out;
    size_t avail_out;
    uint32_t version;  /* the description's */
    lzma_stream lz;    /* versions 5 to 8 */
    ZSTD_DCtx *zs;     /* version 9 (or NULL until the first piece) */
    int ended;         /* version 9: the frame ended */
} desc_stream_t;

#define DESC_STREAM_INIT { NULL, 0, 0, NULL, 0, 0, LZMA_STREAM_INIT, NULL, 0 }

/* A part of version 8's index (qp_format.h): RAW bytes decompressed from the Z bytes of
 * its stream at ZOFF in the description. */
typedef struct desc_part {
    uint32_t raw;
    uint32_t z;
    size_t zoff;
} desc_part_t;

/*
 * The body being read, inflated a window at a time (a whole body held at once cost
 * chromium's qp 150 MB more at its peak); `bad` once a varint ran past the end or out
 * of range. Without a stream (Z NULL), P holds the whole body. Version 8's index is
 * read across its parts' streams, one after another, as one body.
 */
typedef struct rbuf {
    const uint8_t *p;
    size_t n, off;
    int bad;
    desc_stream_t *z; /* the body's stream, or NULL */
    uint8_t *win;     /* the window it inflates into (WINSIZE bytes) */
    size_t winsize;   /* WINDOW, or less for a smaller body */
    uint64_t left;    /* body bytes (header's body_size) not inflated yet */
    lzma_ret zret;    /* the stream's last status (LZMA_OK while it runs) */
    /* Version 8 and 9's index: PARTS[part] is the stream inflating (LEFT its bytes), LATER the
     * bytes of the parts after it; BUF the description. Version 5 to 7: NPARTS 0. */
    const desc_part_t *parts;
    uint32_t nparts, part;
    uint64_t later;
    const uint8_t *buf;
} rbuf_t;

enum { WINDOW = 1u << 20 };

/* A reader of the N plain bytes at P (no stream). */
static inline rbuf_t
desc_plain_rbuf(const uint8_t *p, size_t n)
{
    rbuf_t r;
    memset(&r, 0, sizeof(r));
    r.p = p;
    r.n = n;
    r.zret = LZMA_OK;
    return r;
}

/* The most bytes a record can take (qp_format.h): a procedure, a block, an edge, a call. */
enum { MAX_PROC = 64, MAX_BLOCK = 40, MAX_EDGE = 32, MAX_CALL = 32 };

/*
 * The compact body (since version 3, qp_format.h): LEB128 varints, zigzag deltas (a
 * difference taken as signed, small magnitudes to small numbers): X as a delta from
 * PREV, and back. Inline: a chunk's records decode millions of them.
 */
static inline uint64_t
desc_zz64(uint64_t x, uint64_t prev)
{
    uint64_t u = x - prev;
    return (u << 1) ^ (0 - (u >> 63));
}

static inline uint64_t
desc_zz32(uint32_t x, uint32_t prev)
{
    uint32_t u = x - prev;
    return (uint32_t)((u << 1) ^ (0u - (u >> 31)));
}

static inline uint64_t
desc_unzz64(uint64_t z, uint64_t prev)
{
    return prev + ((z >> 1) ^ (0 - (z & 1)));
}

static inline uint32_t
desc_unzz32(uint64_t z, uint32_t prev)
{
    return prev + (uint32_t)((z >> 1) ^ (0 - (z & 1)));
}

/*
 * The next varint of R (desc_get_u), one of at most MAX (desc_get_max: larger is bad),
 * or of 32 bits: inline for the one- and two-byte numbers that most fields are, the
 * rest (longer ones, a window's end, the stream's) in desc_get_u_slow.
 */
uint64_t
desc_get_u_slow(rbuf_t *r);

static inline uint64_t
desc_get_u(rbuf_t *r)
{
    if (r->n - r->off >= 2) {
        const uint8_t *p = r->p + r->off;
        if (p[0] < 0x80) {
            r->off++;
            return p[0];
        }
        if (p[1] < 0x80) {
            r->off += 2;
            return (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
        }
    }
    return desc_get_u_slow(r);
}

static inline uint64_t
desc_get_max(rbuf_t *r, uint64_t max)
{
    uint64_t v = desc_get_u(r);
    if (v > max) {
        r->bad = 1;
        return 0;
    }
    return v;
}

static inline uint32_t
desc_get_u32(rbuf_t *r)
{
    return (uint32_t)desc_get_max(r, UINT32_MAX);
}

/* The place among KEYS' sites (their call site indices ascending) of the first at or
 * after call site CALL, or KEYS->n: a binary search (the writer's count from 0 for each
 * chunk grew with chunks times key sites: chromium, 8.9 s of the description's CPU). */
static inline uint32_t
desc_first_key_from(const qp_desc_keys_t *keys, uint32_t call)
{
    uint32_t lo = 0, hi = keys->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (keys->index[mid] < call)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* qp_desc.c */
void
desc_keys_free(qp_desc_keys_t *k);
uint32_t
desc_first_call_at(const qp_desc_t *d, uint32_t first);
int
desc_range_ok(uint32_t first, uint32_t n, uint32_t total);
int
desc_validate_strtab(const qp_desc_t *d, char *why, size_t whylen);
int
desc_validate_block_at(
    const qp_desc_t *d, uint32_t i, const qp_desc_block_t *b, char *why, size_t whylen);
int
desc_validate_edge_at(
    const qp_desc_t *d, uint32_t i, const qp_desc_edge_t *e, char *why, size_t whylen);
int
desc_validate_proc_head(const qp_desc_t *d, uint32_t i, char *why, size_t whylen);
int
desc_validate_proc_at(const qp_desc_t *d, uint32_t i, const qp_desc_edge_t *edges,
    char *why, size_t whylen);
int
desc_validate_sites(const qp_desc_t *d, const qp_desc_call_t *calls,
    const uint32_t *index, uint32_t n, int edges, char *why, size_t whylen);
int
desc_validate_calls(const qp_desc_t *d, int edges, char *why, size_t whylen);

/* qp_desc_write.c */
int
desc_is_key_site(const qp_desc_call_t *c, uint32_t callee, uint8_t kind);
int
desc_keys_index_procs(const qp_desc_t *d, qp_desc_keys_t *k);
int
desc_keys_from_calls(const qp_desc_t *d, qp_desc_keys_t **out);
int
desc_index_entries(run_t *r);
void
desc_entries_done(run_t *r, qp_desc_t *keep);
uint64_t
desc_ret_base(const run_t *r, uint32_t to);
void
desc_exec_next(const qp_desc_t *d, uint32_t block, uint64_t *next, uint32_t *tie);
uint32_t
desc_dict_for(uint64_t n);
int
desc_lzma_options(uint32_t preset, lzma_options_lzma *o);

/* qp_desc_read.c */
int
desc_get_bytes(rbuf_t *r, uint8_t *out, size_t n);
int
desc_get_strtab(rbuf_t *b, const qp_desc_hdr_t *h, qp_desc_t *out, const char *what,
                char *why, size_t whylen);
void
desc_get_proc(rbuf_t *b, run_t *r, qp_desc_proc_t *p);
/* Every procedure of OUT (its header's nprocs) read from B, with R cleared for OUT first
 * (the run of their fields): NULL, or "procedure" when B went bad. */
const char *
desc_get_procs(rbuf_t *b, run_t *r, qp_desc_t *out);
void
desc_get_block(rbuf_t *b, run_t *r, qp_desc_block_t *k);
void
desc_get_edge(rbuf_t *b, run_t *r, qp_desc_edge_t *e);
void
desc_get_call(rbuf_t *b, run_t *r, qp_desc_call_t *c);
int
desc_alloc_part(void **p, uint32_t n, size_t size);
/* desc_alloc_part for an array the reader writes whole (qp_huge.h). */
int
desc_alloc_whole(void **p, uint32_t n, size_t size);
int
desc_check_header(
    const uint8_t *buf, size_t len, qp_desc_hdr_t *h, char *why, size_t whylen);
int
desc_finish_stream(
    rbuf_t *b, const qp_desc_hdr_t *h, size_t *end, char *why, size_t whylen);
int
desc_unpack_init(desc_stream_t *z, uint64_t n, uint32_t version);
lzma_ret
desc_unpack(desc_stream_t *z);
void
desc_unpack_end(desc_stream_t *z);
uint64_t
desc_rest(const rbuf_t *r);
int
desc_get_parts(const uint8_t *buf, size_t len, const qp_desc_hdr_t *h,
    desc_part_t **parts, uint32_t *nparts, char *why, size_t whylen);
int
desc_parse_v5(const uint8_t *buf, size_t len, const qp_desc_hdr_t *h, qp_desc_t *out,
    size_t *end, char *why, size_t whylen);

/* qp_desc_lazy.c */
void
desc_lazy_free(struct qp_desc_lazy *lz);
uint32_t
desc_lazy_first_call(const qp_desc_t *d, uint32_t proc);

#endif
