/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Unit tests of what qp reads: the description format (round trip, truncation and
 * corruption at every byte, validation of re-hashed garbage), profiles (read, check,
 * merge, write, truncated and foreign files), flow reconstruction on hand-built graphs
 * and on random graphs against a known flow (qp's placement determines everything;
 * naive block counts; abandoned calls at exit; violations), exit back-traces on this
 * test's own stack, source lines, and CSV quoting.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dl_iterate_phdr */
#endif
#include <check.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <lzma.h>
#include <zstd.h>

#include "driver/driver.h"
#include "base/qp_desc.h"
#include "base/qp_desc_priv.h"
#include "report/qp_backtrace.h"
#include "report/qp_flow.h"
#include "report/qp_profile.h"
#include "report/qp_report.h"

#define X QP_VIRT

/*****************************************************************************
 * Building descriptions by hand
 */

/* An empty description of one measured procedure "f" with NBLOCKS blocks. */
static void
tg_init(qp_desc_t *d, uint32_t driver, uint32_t nblocks)
{
    memset(d, 0, sizeof(*d));
    d->hdr.driver = driver;
    uint32_t name;
    ck_assert_int_eq(qp_desc_add_string(d, "f", &name), 0);
    d->procs = calloc(1, sizeof(qp_desc_proc_t));
    d->blocks = calloc(nblocks ? nblocks : 1, sizeof(qp_desc_block_t));
    d->edges = calloc(256, sizeof(qp_desc_edge_t));
    ck_assert(d->procs && d->blocks && d->edges);
    d->hdr.nprocs = 1;
    d->hdr.nblocks = nblocks;
    d->procs[0] = (qp_desc_proc_t) { .name = name, .flags = QP_PROC_MEASURED,
                                     .entry = 0x1000, .nblocks = nblocks };
    for (uint32_t i = 0; i < nblocks; i++)
        d->blocks[i] = (qp_desc_block_t) { .start = 0x1000 + 16 * i, .size = 4 + i,
                                           .ninsns = 2 + i % 3, .counter = QP_NOCOUNTER };
}

static uint32_t
tg_edge(qp_desc_t *d, uint32_t from, uint32_t to, uint8_t kind)
{
    ck_assert_uint_lt(d->hdr.nedges, 256);
    uint32_t e = d->hdr.nedges++;
    d->edges[e] = (qp_desc_edge_t) { .from = from, .to = to, .counter = QP_NOCOUNTER,
                                     .kind = kind };
    d->procs[0].nedges = d->hdr.nedges;
    return e;
}

static void
tg_measure_edge(qp_desc_t *d, uint32_t e)
{
    d->edges[e].counter = d->hdr.ncounters++;
}

static void
tg_measure_block(qp_desc_t *d, uint32_t b)
{
    d->blocks[b].counter = d->hdr.ncounters++;
}

/* The counts of the measured edges and blocks (COUNTS: truth per edge / per block). */
static uint64_t *
tg_counters(const qp_desc_t *d, const uint64_t *edge_truth, const uint64_t *block_truth)
{
    uint64_t *c = calloc(d->hdr.ncounters + 1, sizeof(uint64_t));
    ck_assert_ptr_nonnull(c);
    for (uint32_t e = 0; e < d->hdr.nedges; e++)
        if (d->edges[e].counter != QP_NOCOUNTER)
            c[d->edges[e].counter] = edge_truth[e];
    for (uint32_t b = 0; b < d->hdr.nblocks; b++)
        if (d->blocks[b].counter != QP_NOCOUNTER)
            c[d->blocks[b].counter] = block_truth[b];
    return c;
}

/* A description with two procedures, strings, CALLRET return sites: for the formats. */
static void
sample_desc(qp_desc_t *d)
{
    tg_init(d, QP_DRIVER_QP, 4);
    tg_measure_edge(d, tg_edge(d, X, 0, QP_EDGE_ENTRY));
    uint32_t e = tg_edge(d, 0, 1, CFG_EDGE_CALLRET);
    d->edges[e].ret_addr = 0x1015;
    tg_edge(d, 1, 2, CFG_EDGE_TAKEN);
    tg_measure_edge(d, tg_edge(d, 1, 3, CFG_EDGE_FALL));
    tg_edge(d, 2, X, CFG_EDGE_RETURN);
    tg_edge(d, 3, X, CFG_EDGE_TAILCALL);
    d->procs[0].flags |= QP_PROC_EXIT_SITE;
    /* A second procedure, not measured, with a reason. */
    qp_desc_proc_t *p = realloc(d->procs, 2 * sizeof(*p));
    ck_assert_ptr_nonnull(p);
    d->procs = p;
    uint32_t name, why;
    ck_assert_int_eq(qp_desc_add_string(d, "g(int, char)", &name), 0);
    ck_assert_int_eq(qp_desc_add_string(d, "indirect jump with unknown targets", &why), 0);
    d->procs[1] = (qp_desc_proc_t) { .name = name, .entry = 0x2000, .block = 4, .edge = 6,
                                     .reason = why };
    d->hdr.nprocs = 2;
    d->hdr.counters_vaddr = 0x5000;
    d->hdr.flags = QP_DESC_PIE;
    /* Its call sites: a call ending block 0, the tail call of block 3 (edge 5). */
    uint32_t callee;
    ck_assert_int_eq(qp_desc_add_string(d, "callee", &callee), 0);
    d->calls = calloc(2, sizeof(qp_desc_call_t));
    ck_assert_ptr_nonnull(d->calls);
    d->calls[0] = (qp_desc_call_t) { .target = 0x3000, .block = 0, .edge = QP_VIRT,
                                     .name = callee, .kind = QP_CALL_DIRECT };
    d->calls[1] = (qp_desc_call_t) { .target = 0, .block = 3, .edge = 5,
                                     .kind = QP_CALL_TAIL_INDIRECT };
    d->hdr.ncalls = 2;
}

/*****************************************************************************
 * The description format
 */

START_TEST(test_qp_desc_round_trip)
{
    qp_desc_t d, back;
    sample_desc(&d);
    char why[256] = "";
    ck_assert_msg(qp_desc_validate(&d, why, sizeof(why)) == 0, "%s", why);
    uint8_t *buf, *buf2;
    size_t len, len2;
    ck_assert_int_eq(qp_desc_serialize(&d, &buf, &len), 0);
    /* Compact: smaller than the structs it holds (version 2 wrote those as they are). */
    ck_assert_uint_lt(len, 64 + 2 * 48 + 4 * 32 + 6 * 24 + 2 * 24 + d.hdr.strtab_size);
    ck_assert_int_eq(memcmp(buf, QP_DESC_MAGIC, 8), 0);
    ck_assert_uint_eq(((qp_desc_hdr_t *)buf)->version, QP_FORMAT_VERSION);
    /* Deterministic: the same description gives the same bytes and id. */
    ck_assert_int_eq(qp_desc_serialize(&d, &buf2, &len2), 0);
    ck_assert_uint_eq(len, len2);
    ck_assert_int_eq(memcmp(buf, buf2, len), 0);
    uint64_t id;
    ck_assert_int_eq(qp_desc_id(buf, len, &id), 0);
    ck_assert_uint_eq(id, ((qp_desc_hdr_t *)buf)->id);
    ck_assert_uint_ne(id, 0);

    ck_assert_msg(qp_desc_parse(buf, len, &back, why, sizeof(why)) == 0, "%s", why);
    ck_assert_uint_eq(back.hdr.id, id);
    ck_assert_uint_eq(back.hdr.nprocs, 2);
    ck_assert_uint_eq(back.hdr.counters_vaddr, 0x5000);
    ck_assert_int_eq(memcmp(back.procs, d.procs, 2 * sizeof(qp_desc_proc_t)), 0);
    ck_assert_int_eq(memcmp(back.blocks, d.blocks, 4 * sizeof(qp_desc_block_t)), 0);
    ck_assert_int_eq(memcmp(back.edges, d.edges, 6 * sizeof(qp_desc_edge_t)), 0);
    ck_assert_uint_eq(back.hdr.ncalls, 2);
    ck_assert_int_eq(memcmp(back.calls, d.calls, 2 * sizeof(qp_desc_call_t)), 0);
    ck_assert_str_eq(qp_desc_str(&back, back.procs[1].name), "g(int, char)");
    ck_assert_str_eq(qp_desc_str(&back, back.procs[1].reason),
                     "indirect jump with unknown targets");
    ck_assert_str_eq(qp_desc_str(&back, 1u << 30), "");
    ck_assert_uint_eq(qp_desc_entry_edge(&back, 0), 0);
    ck_assert_uint_eq(qp_desc_entry_edge(&back, 1), QP_VIRT);
    ck_assert_uint_eq(qp_desc_find_proc(&back, "g(int, char)"), 1);
    ck_assert_uint_eq(qp_desc_find_proc(&back, "nope"), QP_VIRT);

    /* Zero padding after the end (section alignment) is accepted, other bytes not. */
    uint8_t *padded = calloc(1, len + 8);
    memcpy(padded, buf, len);
    qp_desc_free(&back);
    ck_assert_int_eq(qp_desc_parse(padded, len + 8, &back, NULL, 0), 0);
    qp_desc_free(&back);
    padded[len + 3] = 1;
    ck_assert_int_eq(qp_desc_parse(padded, len + 8, &back, why, sizeof(why)), QP_EFORMAT);
    free(padded);
    free(buf);
    free(buf2);
    qp_desc_free(&d);
}
END_TEST

START_TEST(test_qp_desc_strings)
{
    qp_desc_t d = { 0 };
    uint32_t a, b, e;
    ck_assert_int_eq(qp_desc_add_string(&d, "", &e), 0);
    ck_assert_uint_eq(e, 0);
    ck_assert_int_eq(qp_desc_add_string(&d, "alpha", &a), 0);
    /* Growing the table many times keeps earlier strings. */
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(qp_desc_add_string(&d, "some longer procedure name", &b), 0);
    ck_assert_str_eq(qp_desc_str(&d, a), "alpha");
    ck_assert_str_eq(qp_desc_str(&d, b), "some longer procedure name");
    ck_assert_int_eq(qp_desc_add_string(NULL, "x", &a), QP_EINVAL);
    qp_desc_free(&d);
    qp_desc_free(NULL);
}
END_TEST

/* Versions 8 (LZMA2) and 9 (zstd, written since): each cut short is refused. */
START_TEST(test_qp_desc_truncated_at_every_length)
{
    qp_desc_t d, back;
    sample_desc(&d);
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(qp_desc_encode_version(&d, (uint32_t)_i, &buf, &len), 0);
    for (size_t n = 0; n < len; n++) {
        /* A copy of exactly N bytes, so that a read past them is caught by ASan. */
        uint8_t *cut = malloc(n ? n : 1);
        memcpy(cut, buf, n);
        char why[256] = "";
        ck_assert_int_eq(qp_desc_parse(cut, n, &back, why, sizeof(why)), QP_EFORMAT);
        ck_assert_msg(why[0] != '\0', "no reason at length %zu", n);
        ck_assert_ptr_null(back.procs);
        free(cut);
    }
    free(buf);
    qp_desc_free(&d);
}
END_TEST

/* Versions 8 and 9: any byte changed is refused. */
START_TEST(test_qp_desc_every_byte_changed)
{
    qp_desc_t d, back;
    sample_desc(&d);
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(qp_desc_encode_version(&d, (uint32_t)_i, &buf, &len), 0);
    /* FNV-1a steps are bijective: any one changed byte changes the hash. */
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit += 7) {
            buf[i] ^= (uint8_t)(1u << bit);
            char why[256] = "";
            ck_assert_msg(qp_desc_parse(buf, len, &back, why, sizeof(why)) == QP_EFORMAT,
                          "byte %zu bit %d accepted", i, bit);
            ck_assert(why[0] != '\0');
            buf[i] ^= (uint8_t)(1u << bit);
        }
    }
    ck_assert_int_eq(qp_desc_parse(buf, len, &back, NULL, 0), 0);
    qp_desc_free(&back);
    free(buf);
    qp_desc_free(&d);
}
END_TEST

/* Serialize D without validation (to make invalid descriptions with a correct id). */
static uint8_t *
raw_serialize(const qp_desc_t *d, size_t *len)
{
    uint8_t *b = NULL;
    ck_assert_int_eq(qp_desc_encode(d, &b, len), 0);
    return b;
}

/* Set the id of the serialized description B (N bytes) to what its bytes hash to. */
static void
rehash(uint8_t *b, size_t n)
{
    uint64_t id;
    ck_assert_int_eq(qp_desc_id(b, n, &id), 0);
    memcpy(b + offsetof(qp_desc_hdr_t, id), &id, 8);
}

/* A header whose counts no description of its size can hold is refused before anything
 * is allocated by them (version 7's call sites were not bounded: 34 GB asked for). */
START_TEST(test_qp_desc_header_counts_bounded)
{
    qp_desc_t d, back;
    sample_desc(&d);
    size_t len;
    uint8_t *buf = raw_serialize(&d, &len);
    const size_t fields[] = { offsetof(qp_desc_hdr_t, nprocs), offsetof(qp_desc_hdr_t, ncalls),
                              offsetof(qp_desc_hdr_t, strtab_size) };
    for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++) {
        uint8_t *b = malloc(len);
        ck_assert_ptr_nonnull(b);
        memcpy(b, buf, len);
        uint32_t huge = 0xfffffff0u;
        memcpy(b + fields[f], &huge, sizeof(huge));
        rehash(b, len);
        char why[256] = "";
        ck_assert_int_eq(qp_desc_parse(b, len, &back, why, sizeof(why)), QP_EFORMAT);
        ck_assert_msg(strstr(why, "does not fit its counts") != NULL, "field %zu: %s", f, why);
        free(b);
    }
    ck_assert_int_eq(qp_desc_parse(buf, len, &back, NULL, 0), 0);
    qp_desc_free(&back);
    free(buf);
    qp_desc_free(&d);
}
END_TEST

/* Each breaks one rule; the id is recomputed so that only validation can refuse it. */
static void
break_rule(qp_desc_t *d, int rule)
{
    switch (rule) {
    case 0: d->edges[2].from = 17; break;                    /* block out of range */
    case 1: d->edges[2].counter = d->hdr.ncounters; break;   /* counter out of range */
    case 2: d->blocks[1].counter = 99; break;
    case 3: d->procs[0].name = d->hdr.strtab_size; break;    /* string offset */
    case 4: d->strtab[d->hdr.strtab_size - 1] = 'x'; break;  /* unterminated strings */
    case 5: d->procs[0].block = UINT32_MAX - 1; break;       /* range overflow */
    case 6: d->procs[0].edge = 3; break;                     /* edges outside */
    case 7: d->edges[0].kind = CFG_EDGE_FALL; break;         /* no entry edge: X -> b */
    case 8: d->edges[4].kind = CFG_EDGE_FALL; break;         /* fall to X */
    case 9: d->edges[2].kind = 77; break;                    /* unknown kind */
    case 10: d->edges[0].to = 2; break;                      /* entry edge not to entry */
    case 11: d->hdr.driver = 9; break;
    case 12: d->procs[1].block = 2; d->procs[1].nblocks = 2; /* an edge into another's */
        d->procs[0].nblocks = 2; break;
    case 13: d->blocks[3].start = UINT64_MAX - 2; break;     /* extent wraps */
    case 14: d->blocks[3].ninsns = d->blocks[3].size + 1; break;
    case 15: d->edges[4].from = X; break;                    /* X -> X */
    case 16: d->calls[1].block = 2; break;                   /* tail call: not its edge's */
    case 17: d->calls[0].block = 4; break;                   /* block out of range */
    case 18: d->calls[0].kind = 9; break;
    case 19: d->calls[0].target = 0; break;                  /* direct without a target */
    case 20: d->calls[0].edge = 1; break;                    /* a call names no edge */
    case 21: d->calls[0].kind = QP_CALL_INDIRECT;            /* a target table past the */
        d->calls[0].target = 0;                              /* counters */
        d->calls[0].edge = 0;
        break;
    default: d->strtab[0] = 'a'; break;                      /* "" at offset 0 */
    }
}

START_TEST(test_qp_desc_validation_rules)
{
    for (int rule = 0; rule <= 22; rule++) {
        qp_desc_t d, back;
        sample_desc(&d);
        break_rule(&d, rule);
        char why[256] = "";
        ck_assert_msg(qp_desc_validate(&d, why, sizeof(why)) == QP_EFORMAT, "rule %d", rule);
        ck_assert(why[0] != '\0');
        uint8_t *buf, *raw;
        size_t len;
        ck_assert_int_eq(qp_desc_serialize(&d, &buf, &len), QP_EINVAL);
        raw = raw_serialize(&d, &len);
        ck_assert_msg(qp_desc_parse(raw, len, &back, why, sizeof(why)) == QP_EFORMAT,
                      "rule %d parsed", rule);
        free(raw);
        qp_desc_free(&d);
    }
}
END_TEST

/* A stream as qp_format.h documents it (version 6): raw LZMA2, lc 1, lp 0, pb 0, a
 * dictionary of the stream's N bytes (at least 4 KiB). doc_unpack: *USED gets the stream
 * bytes read. */
static lzma_filter *
doc_filters(lzma_options_lzma *o, size_t n)
{
    static lzma_filter f[2];
    ck_assert(!lzma_lzma_preset(o, 6));
    o->lc = 1;
    o->lp = 0;
    o->pb = 0;
    o->dict_size = n < LZMA_DICT_SIZE_MIN ? LZMA_DICT_SIZE_MIN : (uint32_t)n;
    f[0] = (lzma_filter) { LZMA_FILTER_LZMA2, o };
    f[1] = (lzma_filter) { LZMA_VLI_UNKNOWN, NULL };
    return f;
}

static size_t
doc_pack(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    lzma_options_lzma o;
    size_t pos = 0;
    return lzma_raw_buffer_encode(doc_filters(&o, n), NULL, in, n, out, &pos, cap) == LZMA_OK
        ? pos : 0;
}

static size_t
doc_unpack(const uint8_t *in, size_t n, uint8_t *out, size_t cap, size_t *used)
{
    lzma_options_lzma o;
    size_t ipos = 0, pos = 0;
    lzma_ret lr = lzma_raw_buffer_decode(doc_filters(&o, cap), NULL, in, &ipos, n, out, &pos,
                                         cap);
    *used = ipos;
    return lr == LZMA_OK ? pos : 0;
}

START_TEST(test_qp_desc_random_rehashed_garbage)
{
    /* Random changes to the header and the decompressed index (version 7: the chunks
     * after it stay as they were), compressed again with a correct id: the decoder and
     * validation alone must keep parse safe. */
    qp_desc_t d;
    sample_desc(&d);
    size_t len;
    uint8_t *good = NULL; /* version 7: one stream of index (version 8: fuzz_desc) */
    ck_assert_int_eq(qp_desc_encode_version(&d, QP_FORMAT_V7, &good, &len), 0);
    qp_desc_hdr_t h;
    memcpy(&h, good, sizeof(h));
    size_t n = 64 + h.body_size;
    uint8_t *plain = malloc(n);
    memcpy(plain, good, 64);
    size_t used = 0;
    ck_assert_uint_eq(doc_unpack(good + 64, len - 64, plain + 64, h.body_size, &used),
                      h.body_size);
    const uint8_t *chunks = good + 64 + used;
    size_t nchunks = len - 64 - used;
    srand(7);
    int accepted = 0;
    for (int iter = 0; iter < 20000; iter++) {
        uint8_t *raw = malloc(n);
        memcpy(raw, plain, n);
        int nflips = 1 + rand() % 4;
        for (int k = 0; k < nflips; k++)
            raw[24 + (size_t)rand() % (n - 24)] = (uint8_t)rand();
        size_t cap = 2 * (n - 64) + 4096;
        uint8_t *b = malloc(64 + cap + nchunks);
        memcpy(b, raw, 64);
        size_t zlen = doc_pack(raw + 64, n - 64, b + 64, cap);
        ck_assert_uint_gt(zlen, 0);
        memcpy(b + 64 + zlen, chunks, nchunks);
        zlen += nchunks;
        rehash(b, 64 + zlen);
        qp_desc_t back;
        if (qp_desc_parse(b, 64 + zlen, &back, NULL, 0) == 0) {
            /* Whatever was accepted must be safe to solve. */
            accepted++;
            uint64_t counters[64] = { 0 };
            for (uint32_t p = 0; p < back.hdr.nprocs; p++) {
                qp_flow_t f;
                if (back.hdr.ncounters <= 64
                    && qp_flow_solve(&back, p, counters, back.hdr.ncounters, NULL, &f) == 0)
                    qp_flow_free(&f);
            }
            qp_desc_free(&back);
        }
        free(b);
        free(raw);
    }
    ck_assert_int_gt(accepted, 0); /* some changes are valid descriptions */
    free(plain);
    free(good);
    qp_desc_free(&d);
}
END_TEST

/* Versions 5 to 8 (the rewriters before) are still read, 9 is written: each one gives
 * back the same description whole, and the same key call sites read lazily (versions
 * 7 to 9 keep only those, the other sites in the chunks); so versions 8 (LZMA2) and 9
 * (zstd) of one description decode to the same records. many_desc's sites call a
 * procedure that counts its own entry (not key sites); every third one here calls none (a
 * key site). */
static void many_desc(qp_desc_t *d, uint32_t np);

START_TEST(test_qp_desc_formats_5_to_9)
{
    qp_desc_t d;
    many_desc(&d, 3000);
    for (uint32_t i = 0; i < d.hdr.ncalls; i += 3) /* no procedure's entry: key sites */
        d.calls[i].target = 0x7700000 + i;
    for (uint32_t i = 9; i < d.hdr.ncalls; i += 9) /* execs among them, not the first */
        d.calls[i].flags |= QP_CALLF_EXEC;
    char why[256] = "";
    ck_assert_msg(qp_desc_validate(&d, why, sizeof(why)) == 0, "%s", why);
    const qp_desc_keys_t *want = qp_desc_keys(&d);
    ck_assert_ptr_nonnull(want);
    ck_assert(want->n > 0 && want->n < d.hdr.ncalls);
    uint32_t versions[] = { QP_FORMAT_V5, QP_FORMAT_V6, QP_FORMAT_V7, QP_FORMAT_V8,
        QP_FORMAT_V9 };
    ck_assert_uint_eq(QP_FORMAT_VERSION, QP_FORMAT_V9);
    for (int v = 0; v < 5; v++) {
        uint8_t *buf;
        size_t len;
        ck_assert_int_eq(qp_desc_encode_version(&d, versions[v], &buf, &len), 0);
        ck_assert_uint_eq(((qp_desc_hdr_t *)buf)->version, versions[v]);
        qp_desc_t back, lazy;
        ck_assert_msg(qp_desc_parse(buf, len, &back, why, sizeof(why)) == 0, "v%u: %s",
                      versions[v], why);
        ck_assert_int_eq(memcmp(back.procs, d.procs, d.hdr.nprocs * sizeof(*d.procs)), 0);
        ck_assert_int_eq(memcmp(back.blocks, d.blocks, d.hdr.nblocks * sizeof(*d.blocks)), 0);
        ck_assert_int_eq(memcmp(back.edges, d.edges, d.hdr.nedges * sizeof(*d.edges)), 0);
        ck_assert_int_eq(memcmp(back.calls, d.calls, d.hdr.ncalls * sizeof(*d.calls)), 0);
        ck_assert_int_eq(memcmp(back.strtab, d.strtab, d.hdr.strtab_size), 0);
        ck_assert_msg(qp_desc_parse_lazy(buf, len, &lazy, why, sizeof(why)) == 0, "v%u: %s",
                      versions[v], why);
        const qp_desc_keys_t *k = qp_desc_keys(&lazy);
        ck_assert_ptr_nonnull(k);
        ck_assert_uint_eq(k->n, want->n);
        ck_assert_int_eq(memcmp(k->index, want->index, k->n * sizeof(uint32_t)), 0);
        ck_assert_int_eq(memcmp(k->callee, want->callee, k->n * sizeof(uint32_t)), 0);
        ck_assert_int_eq(memcmp(k->calls, want->calls, k->n * sizeof(qp_desc_call_t)), 0);
        ck_assert_int_eq(memcmp(k->first, want->first, d.hdr.nprocs * sizeof(uint32_t)), 0);
        /* An exec site's next block, read lazily, is the whole read's. */
        for (uint32_t i = 9; i < d.hdr.ncalls; i += 9) {
            uint64_t n1 = 1, n2 = 2;
            uint32_t t1 = 1, t2 = 2;
            ck_assert_int_eq(qp_desc_exec_next(&back, i, &n1, &t1), 0);
            ck_assert_int_eq(qp_desc_exec_next(&lazy, i, &n2, &t2), 0);
            ck_assert_msg(n1 == n2 && t1 == t2, "v%u site %u", versions[v], i);
        }
        /* Read whole after all: every site (version 7: from the chunks too). */
        ck_assert_msg(qp_desc_need_all(&lazy, why, sizeof(why)) == 0, "%s", why);
        ck_assert_int_eq(memcmp(lazy.calls, d.calls, d.hdr.ncalls * sizeof(*d.calls)), 0);
        qp_desc_free(&back);
        qp_desc_free(&lazy);
        free(buf);
    }
    qp_desc_free(&d);
}
END_TEST

/* The chunks compressed on several threads (qp_desc_serialize_threads) give the bytes
 * of one thread, which read back whole. */
START_TEST(test_qp_desc_threads_same_bytes)
{
    qp_desc_t d;
    many_desc(&d, 3000);
    uint8_t *one;
    size_t len1;
    ck_assert_int_eq(qp_desc_serialize(&d, &one, &len1), 0);
    for (unsigned t = 0; t <= 4; t++) {
        uint8_t *buf;
        size_t len;
        ck_assert_int_eq(qp_desc_serialize_threads(&d, t, &buf, &len), 0);
        ck_assert_uint_eq(len, len1);
        ck_assert_msg(memcmp(buf, one, len) == 0, "%u threads: other bytes", t);
        free(buf);
    }
    qp_desc_t back;
    char why[256] = "";
    ck_assert_msg(qp_desc_parse(one, len1, &back, why, sizeof(why)) == 0, "%s", why);
    ck_assert_int_eq(memcmp(back.edges, d.edges, d.hdr.nedges * sizeof(*d.edges)), 0);
    qp_desc_free(&back);
    free(one);
    qp_desc_free(&d);
}
END_TEST

/* Version 8's parts' table (qp_format.h) of the description BUF: NPARTS, each part's
 * sizes into RAW and Z (at most MAX), and where the streams start (*AT). */
static uint32_t
index_parts(const uint8_t *buf, uint32_t *raw, uint32_t *z, uint32_t max, size_t *at)
{
    const uint8_t *p = buf + sizeof(qp_desc_hdr_t);
    uint64_t v[2 * 64 + 1];
    uint32_t nv = 0;
    for (uint32_t want = 1; nv < want; nv++) {
        unsigned shift = 0;
        v[nv] = 0;
        do
            v[nv] |= (uint64_t)(*p & 0x7f) << shift, shift += 7;
        while (*p++ & 0x80);
        if (nv == 0) {
            ck_assert_uint_le(v[0], max);
            want = 1 + 2 * (uint32_t)v[0];
        }
    }
    for (uint32_t i = 0; i < v[0]; i++) {
        raw[i] = (uint32_t)v[1 + 2 * i];
        z[i] = (uint32_t)v[2 + 2 * i];
    }
    *at = (size_t)(p - buf);
    return (uint32_t)v[0];
}

/* The stream at IN (at most N bytes) decompressed whole into OUT (CAP bytes), as the
 * writer of VERSION packs each part (8: raw LZMA2, lc 1, lp 0, pb 0, a dictionary of its
 * size; 9: one zstd frame that gives its size): its bytes; *USED, the stream's. */
static size_t
unpack_part(uint32_t version, const uint8_t *in, size_t n, uint8_t *out, size_t cap,
    size_t *used)
{
    if (version >= QP_FORMAT_V9) {
        ck_assert_uint_eq(ZSTD_getFrameContentSize(in, n), cap);
        *used = ZSTD_findFrameCompressedSize(in, n);
        ck_assert(!ZSTD_isError(*used));
        size_t got = ZSTD_decompress(out, cap, in, *used);
        ck_assert(!ZSTD_isError(got));
        return got;
    }
    lzma_options_lzma o;
    ck_assert(!lzma_lzma_preset(&o, 6));
    o.lc = 1;
    o.lp = 0;
    o.pb = 0;
    o.dict_size = cap < LZMA_DICT_SIZE_MIN ? LZMA_DICT_SIZE_MIN : (uint32_t)cap;
    lzma_filter f[2] = { { LZMA_FILTER_LZMA2, &o }, { LZMA_VLI_UNKNOWN, NULL } };
    size_t in_pos = 0, got = 0;
    ck_assert_int_eq(
        lzma_raw_buffer_decode(f, NULL, in, &in_pos, n, out, &got, cap), LZMA_OK);
    *used = in_pos;
    return got;
}

/* Version 8 and 9's index is cut into parts compressed apart on the pool (its head and
 * strings of more than 256 KiB: several parts each), the bytes the same on 1 and 3
 * threads; the parts decompressed one after another are version 7's index, byte for
 * byte, and it reads back. Fails when a part's stream depends on the thread that packed
 * it, or the parts do not join into the index version 7 holds in one stream. */
START_TEST(test_qp_desc_index_parts)
{
    qp_desc_t d;
    many_desc(&d, 4000);
    enum { NAME = 700000 }; /* the strings, at the index's end: three parts */
    char *s = malloc(NAME + 1);
    ck_assert_ptr_nonnull(s);
    uint32_t x = 1;
    for (size_t i = 0; i < NAME; i++) {
        x = x * 1103515245u + 12345u;
        s[i] = (char)((x >> 16) % 255 + 1);
    }
    s[NAME] = '\0';
    ck_assert_int_eq(qp_desc_add_string(&d, s, &d.procs[1].name), 0);
    free(s);
    uint8_t *v7, *one = NULL;
    size_t len7, len1 = 0;
    ck_assert_int_eq(qp_desc_encode_version(&d, QP_FORMAT_V7, &v7, &len7), 0);
    const qp_desc_hdr_t *h7 = (const qp_desc_hdr_t *)v7;
    uint32_t body = h7->body_size;
    /* Version 9's chunks' table (a part between the head's and the strings') gives its
     * zstd frames' sizes, not LZMA2's: only its head and strings are version 7's. */
    uint32_t strtab = d.hdr.strtab_size, nstr = (strtab + (256u << 10) - 1) / (256u << 10);
    uint8_t *want = malloc(body), *got = malloc(2 * (size_t)body);
    ck_assert(want != NULL && got != NULL);
    size_t used = 0;
    ck_assert_uint_eq(unpack_part(QP_FORMAT_V7, v7 + sizeof(*h7), len7 - sizeof(*h7), want,
                          body, &used),
        body);
    uint32_t version = (uint32_t)_i;
    for (unsigned t = 1; t <= 3; t += 2) {
        uint8_t *buf;
        size_t len;
        ck_assert_int_eq(qp_desc_encode_threads(&d, version, t, &buf, &len), 0);
        const qp_desc_hdr_t *h = (const qp_desc_hdr_t *)buf;
        ck_assert_uint_eq(h->version, version);
        if (version == QP_FORMAT_V8)
            ck_assert_uint_eq(h->body_size, body);
        uint32_t raw[64], z[64];
        size_t at = 0, off = 0, head = 0;
        uint32_t n = index_parts(buf, raw, z, 64, &at);
        ck_assert_uint_ge(n, 5); /* the head's, the table's, three of strings */
        for (uint32_t i = 0; i < n; i++) {
            ck_assert_uint_le(off + raw[i], 2 * (size_t)body);
            if (i < n - nstr - 1)
                head += raw[i];
            ck_assert_uint_eq(
                unpack_part(version, buf + at, z[i], got + off, raw[i], &used), raw[i]);
            ck_assert_uint_eq(used, z[i]);
            at += z[i];
            off += raw[i];
        }
        ck_assert_uint_eq(off, h->body_size);
        ck_assert_msg(memcmp(got, want, head) == 0
                && memcmp(got + off - strtab, want + body - strtab, strtab) == 0
                && (version > QP_FORMAT_V8 || memcmp(got, want, body) == 0),
            "%u threads: another index", t);
        if (one == NULL) {
            one = buf;
            len1 = len;
        } else {
            ck_assert_uint_eq(len, len1);
            ck_assert_msg(memcmp(buf, one, len) == 0, "%u threads: other bytes", t);
            free(buf);
        }
    }
    qp_desc_t back;
    char why[256] = "";
    ck_assert_msg(qp_desc_parse(one, len1, &back, why, sizeof(why)) == 0, "%s", why);
    ck_assert_uint_eq(back.hdr.strtab_size, d.hdr.strtab_size);
    ck_assert_int_eq(memcmp(back.strtab, d.strtab, d.hdr.strtab_size), 0);
    ck_assert_int_eq(memcmp(back.procs, d.procs, d.hdr.nprocs * sizeof(*d.procs)), 0);
    qp_desc_free(&back);
    free(one);
    free(got);
    free(want);
    free(v7);
    qp_desc_free(&d);
}
END_TEST

/* sample_desc as main's qpt-rewrite wrote it before version 8 (version 7, e5a84da): a
 * description in an instrumented file of then, which this qp must still read. */
static const uint8_t sample_v7[] = { 0x51, 0x50, 0x54, 0x44, 0x45, 0x53, 0x43, 0x31, 0x07,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xcb, 0x8b, 0x76, 0x35, 0xe6, 0x2b, 0xba,
    0xf9, 0x00, 0x50, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x02,
    0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00,
    0x00, 0x02, 0x00, 0x00, 0x00, 0x3a, 0x00, 0x00, 0x00, 0x65, 0x00, 0x00, 0x00, 0xe0,
    0x00, 0x64, 0x00, 0x5d, 0x01, 0x00, 0x00, 0x93, 0x99, 0xac, 0x69, 0x70, 0x4c, 0x21,
    0x25, 0x4d, 0x81, 0x9f, 0x47, 0xac, 0xea, 0xfd, 0xa2, 0x11, 0xe3, 0x7e, 0x4c, 0x87,
    0x33, 0x5c, 0x45, 0x0a, 0x1b, 0xb0, 0x20, 0x06, 0x8e, 0xae, 0x6d, 0xeb, 0x11, 0x6c,
    0x64, 0x35, 0xd2, 0xe7, 0x48, 0xdc, 0xd4, 0x9f, 0xb2, 0x0f, 0x80, 0xca, 0x41, 0x32,
    0xfd, 0xd1, 0xbf, 0x2e, 0x32, 0xbf, 0xb0, 0x68, 0x1e, 0xbe, 0xe7, 0x68, 0x14, 0x8b,
    0xe5, 0x65, 0x67, 0xaf, 0x7b, 0xf1, 0x7d, 0xfa, 0xd5, 0x49, 0x0c, 0xc3, 0x81, 0x3a,
    0xbf, 0xb6, 0xf9, 0x4e, 0xb8, 0x58, 0xdd, 0x1c, 0x55, 0x02, 0x1a, 0xe2, 0xe3, 0x46,
    0x00, 0x00, 0x01, 0x00, 0x27, 0x08, 0x80, 0x40, 0x04, 0x0c, 0x18, 0x05, 0x10, 0x16,
    0x06, 0x08, 0x14, 0x07, 0x82, 0x01, 0x00, 0x01, 0x00, 0x15, 0x01, 0x03, 0xaa, 0x40,
    0x04, 0x03, 0x03, 0x02, 0x01, 0x05, 0x00, 0x18, 0x03, 0x00, 0x1c, 0x03, 0x00, 0x21,
    0x06, 0x0a, 0x00, 0x00 };

/* The old file reads back whole and lazily as the description it was made from, and the
 * version 7 writer (kept for tests) still makes its bytes. Fails when the reader takes a
 * version 7 index for version 8's parts, or the writer's version 7 changed. */
START_TEST(test_qp_desc_reads_version_7_file)
{
    qp_desc_t d, back, lazy;
    sample_desc(&d);
    char why[256] = "";
    ck_assert_uint_eq(((const qp_desc_hdr_t *)sample_v7)->version, QP_FORMAT_V7);
    ck_assert_msg(
        qp_desc_parse(sample_v7, sizeof(sample_v7), &back, why, sizeof(why)) == 0, "%s",
        why);
    ck_assert_int_eq(memcmp(back.procs, d.procs, d.hdr.nprocs * sizeof(*d.procs)), 0);
    ck_assert_int_eq(memcmp(back.blocks, d.blocks, d.hdr.nblocks * sizeof(*d.blocks)), 0);
    ck_assert_int_eq(memcmp(back.edges, d.edges, d.hdr.nedges * sizeof(*d.edges)), 0);
    ck_assert_int_eq(memcmp(back.calls, d.calls, d.hdr.ncalls * sizeof(*d.calls)), 0);
    ck_assert_int_eq(memcmp(back.strtab, d.strtab, d.hdr.strtab_size), 0);
    ck_assert_msg(
        qp_desc_parse_lazy(sample_v7, sizeof(sample_v7), &lazy, why, sizeof(why)) == 0,
        "%s", why);
    ck_assert_msg(qp_desc_need_all(&lazy, why, sizeof(why)) == 0, "%s", why);
    ck_assert_int_eq(memcmp(lazy.calls, d.calls, d.hdr.ncalls * sizeof(*d.calls)), 0);
    uint8_t *again;
    size_t len;
    ck_assert_int_eq(qp_desc_encode_version(&d, QP_FORMAT_V7, &again, &len), 0);
    ck_assert_uint_eq(len, sizeof(sample_v7));
    ck_assert_int_eq(memcmp(again, sample_v7, len), 0);
    free(again);
    qp_desc_free(&lazy);
    qp_desc_free(&back);
    qp_desc_free(&d);
}
END_TEST

/* Version 8 and 9's parts' table is checked against the index's size and the bytes: no
 * parts, a part's sizes changed either way, each refused (the id made right). Fails when
 * a table that does not fit is read past, or a part's unread bytes are taken. */
START_TEST(test_qp_desc_index_parts_checked)
{
    qp_desc_t d, back;
    sample_desc(&d);
    size_t len;
    uint8_t *good = NULL;
    ck_assert_int_eq(qp_desc_encode_version(&d, (uint32_t)_i, &good, &len), 0);
    uint32_t raw[64], z[64];
    size_t at = 0;
    ck_assert_uint_eq(index_parts(good, raw, z, 64, &at), 3); /* head, table, strings */
    ck_assert(raw[0] < 127 && z[0] < 127 && at == sizeof(qp_desc_hdr_t) + 7);
    struct {
        size_t off;
        int delta; /* added at OFF, taken from OFF + 2 (a next part's field) if MOVE */
        int move;
        const char *why;
    } bad[] = {
        { 64, -3, 0, "parts' table" }, /* no parts */
        { 64, +1, 0, "parts' table" }, /* a fourth part: the first stream's bytes */
        { 65, +1, 0, "parts' table" }, /* more bytes than the index's */
        { 65, -1, 1, "corrupted or truncated" }, /* the head's stream gives more */
        { 66, -1, 1, "corrupted or truncated" }, /* its stream cut short */
        { 66, +1, 1, "corrupted or truncated" }, /* a byte of it left unread */
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        uint8_t *b = malloc(len);
        ck_assert_ptr_nonnull(b);
        memcpy(b, good, len);
        b[bad[k].off] = (uint8_t)(b[bad[k].off] + bad[k].delta);
        if (bad[k].move)
            b[bad[k].off + 2] = (uint8_t)(b[bad[k].off + 2] - bad[k].delta);
        rehash(b, len);
        char why[256] = "";
        ck_assert_msg(qp_desc_parse(b, len, &back, why, sizeof(why)) == QP_EFORMAT,
            "change %zu read", k);
        ck_assert_msg(strstr(why, bad[k].why) != NULL, "change %zu: %s", k, why);
        free(b);
    }
    /* Version 9: a part that is not a zstd frame (its magic number changed, the frame
     * intact) is refused as the stream it is not. */
    if (_i == QP_FORMAT_V9) {
        uint8_t *b = malloc(len);
        ck_assert_ptr_nonnull(b);
        memcpy(b, good, len);
        ck_assert_uint_eq(b[at] | b[at + 1] << 8 | b[at + 2] << 16 | (uint32_t)b[at + 3] << 24,
            ZSTD_MAGICNUMBER);
        b[at] ^= 1;
        rehash(b, len);
        char why[256] = "";
        ck_assert_int_eq(qp_desc_parse(b, len, &back, why, sizeof(why)), QP_EFORMAT);
        ck_assert_msg(strstr(why, "bad stream") != NULL, "%s", why);
        free(b);
    }
    ck_assert_int_eq(qp_desc_parse(good, len, &back, NULL, 0), 0);
    qp_desc_free(&back);
    free(good);
    qp_desc_free(&d);
}
END_TEST

/* A parts' table of many 1-byte parts the file cannot hold (each stream takes 5 bytes at
 * least) is refused before any memory is taken for it: the reader took 16 bytes a part
 * (8 times the file) first. Under an address-space limit of the test's own size and the
 * file's, the refusal is the table's, not "out of memory". */
START_TEST(test_qp_desc_parts_table_costs_nothing)
{
    qp_desc_t d, back;
    sample_desc(&d);
    size_t good_len;
    uint8_t *good = raw_serialize(&d, &good_len);
    size_t len = 8u << 20;
    uint8_t *b = calloc(1, len);
    ck_assert_ptr_nonnull(b);
    memcpy(b, good, sizeof(qp_desc_hdr_t));
    qp_desc_hdr_t h;
    memcpy(&h, b, sizeof(h));
    uint32_t n = (uint32_t)((len - sizeof(h) - 5) / 2);
    h.body_size = n; /* the counts let it hold that much: a big string table */
    h.strtab_size = n - (h.nprocs + h.nblocks + h.nedges + h.ncalls);
    memcpy(b, &h, sizeof(h));
    size_t at = sizeof(h);
    for (uint32_t v = n; ; v >>= 7) { /* the count, a LEB128 varint */
        b[at++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        if (v < 0x80)
            break;
    }
    while (at + 2 <= len) {
        b[at++] = 1;
        b[at++] = 1;
    }
    rehash(b, len);
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fscanf(f, "%ld", &pages), 1);
    fclose(f);
    struct rlimit rl = { .rlim_cur = (rlim_t)pages * 4096 + (24u << 20),
        .rlim_max = RLIM_INFINITY };
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &rl), 0);
    char why[256] = "";
    ck_assert_int_eq(qp_desc_parse(b, len, &back, why, sizeof(why)), QP_EFORMAT);
    ck_assert_msg(strstr(why, "parts' table") != NULL, "%s", why);
    free(b);
    free(good);
    qp_desc_free(&d);
}
END_TEST

START_TEST(test_qp_desc_versions_and_sizes)
{
    qp_desc_t d, back;
    sample_desc(&d);
    size_t len;
    uint8_t *b = raw_serialize(&d, &len);
    char why[512] = "";
    /* A description of version 2 or 3 (or any other) is refused, saying what to do:
     * version 3 had no QP_PROC_BY_CALLS, an older qp would leave those calls unknown. */
    uint32_t v = 2;
    memcpy(b + 8, &v, 4);
    rehash(b, len);
    ck_assert_int_eq(qp_desc_parse(b, len, &back, why, sizeof(why)), QP_EFORMAT);
    ck_assert_msg(strstr(why, "version 2, made by an older qpt") != NULL
                  && strstr(why, "rewrite the program again") != NULL, "%s", why);
    v = 4; /* zlib */
    memcpy(b + 8, &v, 4);
    rehash(b, len);
    ck_assert_int_eq(qp_desc_parse(b, len, &back, why, sizeof(why)), QP_EFORMAT);
    ck_assert_msg(strstr(why, "version 4, made by an older qpt") != NULL, "%s", why);
    v = QP_FORMAT_VERSION + 1;
    memcpy(b + 8, &v, 4);
    rehash(b, len);
    ck_assert_int_eq(qp_desc_parse(b, len, &back, why, sizeof(why)), QP_EFORMAT);
    ck_assert_msg(
        strstr(why, "newer") != NULL && strstr(why, "reads versions 5 to 9") != NULL,
        "%s", why);
    v = QP_FORMAT_VERSION;
    memcpy(b + 8, &v, 4);
    /* Counts its few bytes could not hold are refused before anything is allocated. */
    uint32_t big = UINT32_MAX;
    memcpy(b + offsetof(qp_desc_hdr_t, nblocks), &big, 4);
    rehash(b, len);
    ck_assert_int_eq(qp_desc_parse(b, len, &back, why, sizeof(why)), QP_EFORMAT);
    ck_assert_msg(strstr(why, "does not fit its counts") != NULL, "%s", why);
    memcpy(b + offsetof(qp_desc_hdr_t, nblocks), &d.hdr.nblocks, 4);
    memcpy(b + offsetof(qp_desc_hdr_t, body_size), &big, 4);
    rehash(b, len);
    ck_assert_int_eq(qp_desc_parse(b, len, &back, why, sizeof(why)), QP_EFORMAT);
    free(b);
    qp_desc_free(&d);
}
END_TEST

/* A description of NP measured procedures of 3 blocks and 5 edges (2 counters, a call
 * ending the first block, a return site), enough for several chunks; zero-input
 * summaries filled as the rewriter fills them. */
static void
many_desc(qp_desc_t *d, uint32_t np)
{
    memset(d, 0, sizeof(*d));
    d->hdr.driver = QP_DRIVER_QP;
    d->hdr.nprocs = np;
    d->hdr.nblocks = 3 * np;
    d->hdr.nedges = 5 * np;
    d->hdr.ncounters = 2 * np;
    d->hdr.ncalls = np;
    d->procs = calloc(np, sizeof(*d->procs));
    d->blocks = calloc(3 * np, sizeof(*d->blocks));
    d->edges = calloc(5 * np, sizeof(*d->edges));
    d->calls = calloc(np, sizeof(*d->calls));
    ck_assert(d->procs && d->blocks && d->edges && d->calls);
    uint32_t name;
    ck_assert_int_eq(qp_desc_add_string(d, "f", &name), 0);
    for (uint32_t p = 0; p < np; p++) {
        uint64_t entry = 0x10000 + 0x100 * (uint64_t)p, moved = 0x900000 + 0x100 * (uint64_t)p;
        /* Every third procedure measured in place: its return site in the old text. */
        uint64_t ret = p % 3 == 0 ? entry + 0x10 : moved + 0x10;
        d->procs[p] = (qp_desc_proc_t) { .name = name, .flags = QP_PROC_MEASURED,
            .entry = entry, .new_entry = moved, .block = 3 * p, .nblocks = 3,
            .edge = 5 * p, .nedges = 5 };
        for (uint32_t i = 0; i < 3; i++)
            d->blocks[3 * p + i] = (qp_desc_block_t) { .start = entry + 0x10 * i,
                .new_start = moved + 0x10 * i, .size = 0x10, .ninsns = 4,
                .counter = QP_NOCOUNTER };
        qp_desc_edge_t *e = &d->edges[5 * p];
        e[0] = (qp_desc_edge_t) { .from = X, .to = 3 * p, .counter = 2 * p, .kind = QP_EDGE_ENTRY };
        e[1] = (qp_desc_edge_t) { .from = 3 * p, .to = 3 * p + 1, .counter = QP_NOCOUNTER,
                                  .kind = CFG_EDGE_CALLRET, .ret_addr = ret };
        e[2] = (qp_desc_edge_t) { .from = 3 * p, .to = 3 * p + 2, .counter = 2 * p + 1,
                                  .kind = CFG_EDGE_TAKEN };
        e[3] = (qp_desc_edge_t) { .from = 3 * p + 1, .to = X, .counter = QP_NOCOUNTER,
                                  .kind = CFG_EDGE_RETURN };
        e[4] = (qp_desc_edge_t) { .from = 3 * p + 2, .to = X, .counter = QP_NOCOUNTER,
                                  .kind = CFG_EDGE_RETURN };
        d->calls[p] = (qp_desc_call_t) { .target = 0x10000, .block = 3 * p, .edge = QP_VIRT,
                                         .name = name, .kind = QP_CALL_DIRECT };
    }
    ck_assert_int_eq(qp_desc_validate(d, NULL, 0), 0);
    ck_assert_int_eq(qp_flow_zero_summaries(d, 1), 0);
}

START_TEST(test_qp_zero_summaries_threads)
{
    /* The summaries solved on 3 threads are those of 1 (procedures counted by their
     * calls among them: two summaries each). */
    qp_desc_t d;
    enum { NP = 600 };
    many_desc(&d, NP);
    for (uint32_t p = 0; p < NP; p += 7)
        d.procs[p].flags |= QP_PROC_BY_CALLS;
    ck_assert_int_eq(qp_flow_zero_summaries(&d, 1), 0);
    qp_desc_zero_t *z1 = d.zero, *e1 = d.zero_entry;
    d.zero = d.zero_entry = NULL;
    ck_assert_int_eq(qp_flow_zero_summaries(&d, 3), 0);
    ck_assert_mem_eq(z1, d.zero, NP * sizeof(qp_desc_zero_t));
    ck_assert_mem_eq(e1, d.zero_entry, NP * sizeof(qp_desc_zero_t));
    for (uint32_t p = 0; p < NP; p++)
        ck_assert(d.zero[p].given);
    free(z1);
    free(e1);
    qp_desc_free(&d);
}
END_TEST

START_TEST(test_qp_desc_lazy_later)
{
    /* A procedure counted by its calls, called from later procedures: kept aside when
     * its chunk is decoded (its records alone), solved once its callers are, decoded
     * alone then: the report of the description read whole. Whether it counted
     * nothing itself or its taken edge counted. */
    qp_desc_t d, full, lazy;
    enum { NP = 600 };
    many_desc(&d, NP);
    d.procs[0].flags |= QP_PROC_BY_CALLS;
    d.edges[0].counter = QP_NOCOUNTER; /* its entry: counted by its calls */
    d.calls[0].target = 0x10100;       /* procedure 0 calls 1; every other one calls 0 */
    ck_assert_int_eq(qp_desc_validate(&d, NULL, 0), 0);
    ck_assert_int_eq(qp_flow_zero_summaries(&d, 1), 0);
    uint8_t *buf;
    size_t len;
    char why[256] = "";
    ck_assert_int_eq(qp_desc_serialize(&d, &buf, &len), 0);
    ck_assert_msg(qp_desc_parse(buf, len, &full, why, sizeof(why)) == 0, "%s", why);
    for (int taken = 0; taken < 2; taken++) {
        ck_assert_msg(qp_desc_parse_lazy(buf, len, &lazy, why, sizeof(why)) == 0, "%s",
                      why);
        uint64_t counters[2 * NP] = { 0 };
        counters[1] = 2 * taken; /* procedure 0's taken edge */
        counters[2 * 1] = 3;   /* procedure 1 (procedure 0's chunk) ran 3 times */
        counters[2 * 300] = 5; /* procedure 300 5 times: procedure 0 was called 8 times */
        qp_profile_t prof;
        memset(&prof, 0, sizeof(prof));
        prof.hdr.ncounters = 2 * NP;
        prof.counters = counters;
        qp_report_t rl, rf;
        ck_assert_int_eq(qp_report_build(&lazy, &prof, NULL, &rl), 0);
        ck_assert_int_eq(qp_report_build(&full, &prof, NULL, &rf), 0);
        ck_assert_uint_eq(rl.nprocs, rf.nprocs);
        ck_assert_mem_eq(rl.procs, rf.procs, rf.nprocs * sizeof(qp_proc_result_t));
        const qp_proc_result_t *r0 = NULL;
        for (uint32_t k = 0; k < rl.nprocs; k++)
            if (rl.procs[k].proc == 0)
                r0 = &rl.procs[k];
        ck_assert_ptr_nonnull(r0);
        ck_assert(r0->calls_known);
        ck_assert_uint_eq(r0->calls, 8);
        ck_assert(!qp_desc_loaded(&lazy, 0)); /* released */
        /* Asked for again: decoded with its chunk, the same records. */
        ck_assert_int_eq(qp_desc_need(&lazy, 0), 0);
        ck_assert_mem_eq(qp_desc_proc_blocks(&lazy, 0), full.blocks,
                         3 * sizeof(qp_desc_block_t));
        ck_assert_mem_eq(qp_desc_proc_edges(&lazy, 0), full.edges,
                         5 * sizeof(qp_desc_edge_t));
        qp_report_free(&rl);
        qp_report_free(&rf);
        qp_desc_free(&lazy);
        /* Kept aside, step by step: procedure 0 classified with its chunk but not
         * decoded; asked for once another chunk was decoded since (the scratch moved)
         * and the description's bytes are gone, it decodes from the records kept for it
         * alone, as the description read whole has them; released, they go with it. */
        uint8_t *copy = malloc(len);
        ck_assert_ptr_nonnull(copy);
        memcpy(copy, buf, len);
        ck_assert_msg(qp_desc_parse_lazy(copy, len, &lazy, why, sizeof(why)) == 0, "%s",
                      why);
        ck_assert_int_eq(qp_desc_chunk_zero(&lazy, 0, counters), !taken);
        ck_assert(!qp_desc_loaded(&lazy, 0));
        ck_assert_int_eq(qp_desc_chunk_zero(&lazy, 300, counters), 0);
        memset(copy, 0xa5, len);
        ck_assert_msg(qp_desc_need(&lazy, 0) == 0, "%s", qp_desc_error(&lazy));
        ck_assert(qp_desc_loaded(&lazy, 0));
        ck_assert_mem_eq(qp_desc_proc_blocks(&lazy, 0), full.blocks,
                         3 * sizeof(qp_desc_block_t));
        ck_assert_mem_eq(qp_desc_proc_edges(&lazy, 0), full.edges,
                         5 * sizeof(qp_desc_edge_t));
        qp_desc_release(&lazy, 0);
        ck_assert(!qp_desc_loaded(&lazy, 0));
        ck_assert_int_eq(qp_desc_need(&lazy, 0), QP_EFORMAT); /* its chunk, bytes gone */
        qp_desc_free(&lazy);
        free(copy);
    }
    qp_desc_free(&full);
    qp_desc_free(&d);
    free(buf);
}
END_TEST

START_TEST(test_qp_desc_entry_map)
{
    /* Procedures by entry: the lowest index at an entry, shared entries said; each call
     * site's target procedure, the same in a parsed description and in one built from a
     * writer's (tests/check_qp: the report falls back to searches where entries are
     * shared). */
    qp_desc_t d;
    many_desc(&d, 40);
    d.procs[7].entry = d.procs[5].entry; /* 5 and 7 share an entry */
    d.calls[3].target = d.procs[5].entry;
    d.calls[4].target = 0x1234567;       /* no procedure there */
    d.calls[4].name = 0;
    qp_entry_map_t m;
    ck_assert_int_eq(qp_entry_map_build(&d, 1, &m), 0);
    int shared = 0;
    ck_assert_uint_eq(qp_entry_map_find(&d, &m, d.procs[5].entry, &shared), 5);
    ck_assert(shared);
    ck_assert_uint_eq(qp_entry_map_find(&d, &m, d.procs[6].entry, &shared), 6);
    ck_assert(!shared);
    ck_assert_uint_eq(qp_entry_map_find(&d, &m, 0x1234567, NULL), QP_VIRT);
    uint8_t kind;
    ck_assert_uint_eq(qp_entry_map_callee(&m, 3, &kind), 5);
    ck_assert(kind & QP_EMAP_SHARED);
    ck_assert_uint_eq(qp_entry_map_callee(&m, 4, &kind), QP_VIRT);
    uint8_t *buf;
    size_t len;
    char why[256] = "";
    qp_desc_t p;
    ck_assert_int_eq(qp_desc_serialize(&d, &buf, &len), 0);
    ck_assert_msg(qp_desc_parse_lazy(buf, len, &p, why, sizeof(why)) == 0, "%s", why);
    ck_assert_ptr_nonnull(p.by_entry);
    /* Version 7 read lazily: the key sites have their procedure (the others are not in
     * memory); site 3 calls a shared entry, a key site. */
    ck_assert_ptr_nonnull(p.keys);
    int seen3 = 0;
    for (uint32_t k = 0; k < p.keys->n; k++) {
        ck_assert_uint_eq(p.keys->callee[k], m.call_proc[p.keys->index[k]]);
        seen3 |= p.keys->index[k] == 3;
    }
    ck_assert(seen3);
    qp_desc_free(&p);
    free(buf);
    /* Version 6: every site's. */
    ck_assert_int_eq(qp_desc_encode_version(&d, QP_FORMAT_V6, &buf, &len), 0);
    ck_assert_msg(qp_desc_parse_lazy(buf, len, &p, why, sizeof(why)) == 0, "%s", why);
    ck_assert_ptr_nonnull(p.by_entry);
    for (uint32_t k = 0; k < d.hdr.ncalls; k++)
        ck_assert_uint_eq(p.by_entry->call_proc[k], m.call_proc[k]);
    qp_entry_map_free(&m);
    qp_desc_free(&p);
    free(buf);
    qp_desc_free(&d);
}
END_TEST

START_TEST(test_qp_desc_lazy)
{
    /* Version 6 read lazily: a procedure is decoded when asked for (its chunk's other
     * procedures are not), one that counted nothing is known without it, and the
     * report (every procedure's result) is the one of the description read whole. */
    qp_desc_t d, full, lazy;
    enum { NP = 600 };
    many_desc(&d, NP);
    uint8_t *buf;
    size_t len;
    char why[256] = "";
    ck_assert_int_eq(qp_desc_serialize(&d, &buf, &len), 0);
    ck_assert_msg(qp_desc_parse(buf, len, &full, why, sizeof(why)) == 0, "%s", why);
    ck_assert_msg(qp_desc_parse_lazy(buf, len, &lazy, why, sizeof(why)) == 0, "%s", why);
    ck_assert_ptr_nonnull(lazy.lazy);
    ck_assert(lazy.zero[7].given && lazy.zero[7].all_known && lazy.zero[7].calls_known);
    uint64_t counters[2 * NP] = { 0 };
    counters[2 * 300] = 5; /* procedure 300 ran 5 times, 2 of them by its taken edge */
    counters[2 * 300 + 1] = 2;
    ck_assert(!qp_desc_loaded(&lazy, 0) && qp_desc_chunk_zero(&lazy, 0, counters));
    ck_assert(!qp_desc_chunk_zero(&lazy, 300, counters)); /* its own counters counted */
    ck_assert(qp_desc_chunk_zero(&lazy, 301, counters));  /* its chunk's did, not its own */
    ck_assert_int_eq(qp_desc_need(&lazy, 300), 0);
    ck_assert(qp_desc_loaded(&lazy, 300) && !qp_desc_loaded(&lazy, 301));
    /* Its records where qp_desc_proc_blocks/_edges say (not in the arrays: a procedure
     * decoded on its own keeps them aside). */
    ck_assert_mem_eq(qp_desc_proc_blocks(&lazy, 300), &full.blocks[900],
                     3 * sizeof(qp_desc_block_t));
    ck_assert_mem_eq(qp_desc_proc_edges(&lazy, 300), &full.edges[1500],
                     5 * sizeof(qp_desc_edge_t));
    ck_assert_ptr_eq(qp_desc_proc_blocks(&full, 300), &full.blocks[900]);
    /* Released, its copy goes; asked for again, it is decoded again. */
    qp_desc_release(&lazy, 300);
    ck_assert(!qp_desc_loaded(&lazy, 300));
    ck_assert(!qp_desc_chunk_zero(&lazy, 300, counters)); /* still known to have counted */
    ck_assert_int_eq(qp_desc_need(&lazy, 300), 0);
    ck_assert_mem_eq(qp_desc_proc_edges(&lazy, 300), &full.edges[1500],
                     5 * sizeof(qp_desc_edge_t));
    qp_desc_release(&full, 300); /* nothing: read whole */
    ck_assert_ptr_eq(qp_desc_proc_blocks(&full, 300), &full.blocks[900]);
    /* An exit dump's return address decodes the chunk that may hold it, whole. */
    uint64_t ra = full.edges[5 * 451 + 1].ret_addr;
    ck_assert_int_eq(qp_desc_need_ret(&lazy, &ra, 1), 0);
    ck_assert(qp_desc_loaded(&lazy, 451) && qp_desc_loaded(&lazy, 450));
    ck_assert(!qp_desc_loaded(&lazy, 10));
    /* The report of the lazy description: the same results. */
    qp_profile_t prof;
    memset(&prof, 0, sizeof(prof));
    prof.hdr.ncounters = 2 * NP;
    prof.counters = counters;
    qp_report_t rl, rf;
    ck_assert_int_eq(qp_report_build(&lazy, &prof, NULL, &rl), 0);
    ck_assert_int_eq(qp_report_build(&full, &prof, NULL, &rf), 0);
    ck_assert_uint_eq(rl.total_insns, 5 * 4 + 3 * 4 + 2 * 4);
    ck_assert_uint_eq(rl.nprocs, rf.nprocs);
    ck_assert_mem_eq(rl.procs, rf.procs, rf.nprocs * sizeof(qp_proc_result_t));
    ck_assert(!qp_desc_loaded(&lazy, 10)); /* never decoded: it did not run */
    /* Solved once, each procedure's copy is released (the report keeps its results and
     * key sites' counts); the chunks decoded whole stay. */
    ck_assert(!qp_desc_loaded(&lazy, 300) && qp_desc_loaded(&lazy, 451));
    qp_report_free(&rl);
    qp_report_free(&rf);
    /* Everything decoded: the arrays of the description read whole. */
    ck_assert_int_eq(qp_desc_need_all(&lazy, why, sizeof(why)), 0);
    ck_assert_ptr_null(lazy.lazy);
    ck_assert_mem_eq(lazy.blocks, full.blocks, full.hdr.nblocks * sizeof(qp_desc_block_t));
    ck_assert_mem_eq(lazy.edges, full.edges, full.hdr.nedges * sizeof(qp_desc_edge_t));
    qp_desc_free(&lazy);
    qp_desc_free(&full);
    qp_desc_free(&d);
    free(buf);
}
END_TEST

START_TEST(test_qp_desc_callee_names)
{
    /* A direct call names its callee's procedure (the name is not stored again) or
     * another string (stored); both come back as they were. */
    qp_desc_t d, back;
    sample_desc(&d);
    d.calls[0].target = d.procs[1].entry;
    d.calls[0].name = d.procs[1].name;
    qp_desc_call_t *c = realloc(d.calls, 3 * sizeof(*c));
    ck_assert_ptr_nonnull(c);
    d.calls = c;
    d.calls[2] = d.calls[1];
    d.calls[1] = (qp_desc_call_t) { .target = d.procs[1].entry, .block = 1, .edge = QP_VIRT,
                                    .name = d.procs[0].name, .kind = QP_CALL_DIRECT };
    d.hdr.ncalls = 3;
    uint8_t *buf;
    size_t len;
    char why[256] = "";
    ck_assert_int_eq(qp_desc_serialize(&d, &buf, &len), 0);
    ck_assert_msg(qp_desc_parse(buf, len, &back, why, sizeof(why)) == 0, "%s", why);
    ck_assert_int_eq(memcmp(back.calls, d.calls, 3 * sizeof(qp_desc_call_t)), 0);
    ck_assert_str_eq(qp_desc_str(&back, back.calls[0].name), "g(int, char)");
    qp_desc_free(&back);
    free(buf);
    qp_desc_free(&d);
}
END_TEST

START_TEST(test_qp_desc_extreme_values)
{
    /* Deltas wrap: values at the ends of their ranges round-trip exactly. */
    qp_desc_t d, back;
    sample_desc(&d);
    d.hdr.ncounters = UINT32_MAX - 1;
    d.hdr.counters_vaddr = UINT64_MAX;
    d.procs[0].entry = UINT64_MAX - 64;
    d.procs[0].new_entry = 1;
    d.procs[1].entry = 0;
    d.procs[1].new_entry = UINT64_MAX;
    d.procs[0].miss = UINT32_MAX - 1;
    d.procs[0].flags |= QP_PROC_XLATE | QP_PROC_LEAVE_EH;
    d.blocks[0].start = UINT64_MAX - 64;
    d.blocks[0].new_start = UINT64_MAX;
    d.blocks[1].start = 0;
    d.blocks[1].new_start = 1;
    d.blocks[2].counter = UINT32_MAX - 2;
    d.blocks[3].counter = 0;
    d.blocks[3].size = UINT32_MAX;
    d.blocks[3].ninsns = UINT32_MAX;
    d.edges[1].ret_addr = UINT64_MAX;
    d.edges[2].counter = UINT32_MAX - 2;
    d.calls[0].target = UINT64_MAX;
    d.calls[0].flags = QP_CALLF_LONGJMP | QP_CALLF_THROW | QP_CALLF_EXEC;
    char why[256] = "";
    ck_assert_msg(qp_desc_validate(&d, why, sizeof(why)) == 0, "%s", why);
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(qp_desc_serialize(&d, &buf, &len), 0);
    ck_assert_msg(qp_desc_parse(buf, len, &back, why, sizeof(why)) == 0, "%s", why);
    ck_assert_int_eq(memcmp(back.procs, d.procs, 2 * sizeof(qp_desc_proc_t)), 0);
    ck_assert_int_eq(memcmp(back.blocks, d.blocks, 4 * sizeof(qp_desc_block_t)), 0);
    ck_assert_int_eq(memcmp(back.edges, d.edges, 6 * sizeof(qp_desc_edge_t)), 0);
    ck_assert_int_eq(memcmp(back.calls, d.calls, 2 * sizeof(qp_desc_call_t)), 0);
    ck_assert_uint_eq(back.hdr.ncounters, UINT32_MAX - 1);
    qp_desc_free(&back);
    free(buf);
    qp_desc_free(&d);
}
END_TEST

START_TEST(test_qp_desc_bad_args)
{
    qp_desc_t d;
    uint8_t *buf;
    size_t len;
    uint64_t id;
    ck_assert_int_eq(qp_desc_parse(NULL, 0, &d, NULL, 0), QP_EINVAL);
    ck_assert_int_eq(qp_desc_serialize(NULL, &buf, &len), QP_EINVAL);
    ck_assert_int_eq(qp_desc_id((const uint8_t *)"short", 5, &id), QP_EINVAL);
    ck_assert_int_eq(qp_desc_validate(NULL, NULL, 0), QP_EINVAL);
    ck_assert_str_eq(qp_edge_kind_name(QP_EDGE_ENTRY), "entry");
    ck_assert_str_eq(qp_edge_kind_name(CFG_EDGE_CALLRET), "callret");
    ck_assert_str_eq(qp_edge_kind_name(200), "?");
}
END_TEST

/*****************************************************************************
 * Flow reconstruction
 */

static qp_flow_t
solve(const qp_desc_t *d, const uint64_t *counters, const uint64_t *abandoned)
{
    qp_flow_t f;
    ck_assert_int_eq(qp_flow_solve(d, 0, counters, d->hdr.ncounters, abandoned, &f), 0);
    return f;
}

/*
 *   X -> A -> B <-> C,  B -> D -> X: a loop, counters on the non-tree edges only (C->B,
 *   B->D: E - V + 1 = 6 - 5 + 1 = 2).
 */
START_TEST(test_qp_flow_loop_qp_counters)
{
    qp_desc_t d;
    tg_init(&d, QP_DRIVER_QP, 4);
    tg_edge(&d, X, 0, QP_EDGE_ENTRY);
    tg_edge(&d, 0, 1, CFG_EDGE_FALL);
    tg_edge(&d, 1, 2, CFG_EDGE_TAKEN);
    uint32_t back = tg_edge(&d, 2, 1, CFG_EDGE_JUMP);
    uint32_t out = tg_edge(&d, 1, 3, CFG_EDGE_FALL);
    tg_edge(&d, 3, X, CFG_EDGE_RETURN);
    tg_measure_edge(&d, back);
    tg_measure_edge(&d, out);
    const uint64_t truth[] = { 3, 3, 30, 30, 3, 3 };
    uint64_t *c = tg_counters(&d, truth, NULL);
    qp_flow_t f = solve(&d, c, NULL);
    for (uint32_t e = 0; e < 6; e++) {
        ck_assert_uint_eq(f.edge_count[e], truth[e]);
        ck_assert_int_eq(f.edge_state[e], e == back || e == out ? QP_FLOW_MEASURED
                                                                : QP_FLOW_SOLVED);
    }
    const uint64_t blocks[] = { 3, 33, 30, 3 };
    for (uint32_t b = 0; b < 4; b++)
        ck_assert_uint_eq(f.block_count[b], blocks[b]);
    ck_assert(f.calls_known);
    ck_assert_uint_eq(f.calls, 3);
    ck_assert(f.insns_exact);
    ck_assert_uint_eq(f.insns, 3 * 2 + 33 * 3 + 30 * 4 + 3 * 2);
    ck_assert_uint_eq(f.nviolations, 0);
    ck_assert_uint_eq(f.nunknown_edges, 0);
    qp_flow_free(&f);
    free(c);
    qp_desc_free(&d);
}
END_TEST

/* A loop back to the entry block: the entry block's count is not the calls. */
START_TEST(test_qp_flow_calls_are_entry_edge)
{
    qp_desc_t d;
    tg_init(&d, QP_DRIVER_QP, 2);
    tg_edge(&d, X, 0, QP_EDGE_ENTRY);
    uint32_t loop = tg_edge(&d, 0, 0, CFG_EDGE_TAKEN); /* self loop on the entry */
    uint32_t exit = tg_edge(&d, 0, 1, CFG_EDGE_FALL);
    tg_edge(&d, 1, X, CFG_EDGE_RETURN);
    tg_measure_edge(&d, loop);
    tg_measure_edge(&d, exit);
    const uint64_t truth[] = { 2, 40, 2, 2 };
    uint64_t *c = tg_counters(&d, truth, NULL);
    qp_flow_t f = solve(&d, c, NULL);
    ck_assert_uint_eq(f.block_count[0], 42);
    ck_assert_uint_eq(f.calls, 2);
    ck_assert_uint_eq(f.nviolations, 0);
    qp_flow_free(&f);
    free(c);
    qp_desc_free(&d);
}
END_TEST

/* X -> A, A -> B | C, B -> D, C -> D, D -> X. */
static void
diamond(qp_desc_t *d, uint32_t driver)
{
    tg_init(d, driver, 4);
    tg_edge(d, X, 0, QP_EDGE_ENTRY);     /* 0 */
    tg_edge(d, 0, 1, CFG_EDGE_TAKEN);    /* 1 */
    tg_edge(d, 0, 2, CFG_EDGE_FALL);     /* 2 */
    tg_edge(d, 1, 3, CFG_EDGE_JUMP);     /* 3 */
    tg_edge(d, 2, 3, CFG_EDGE_FALL);     /* 4 */
    tg_edge(d, 3, X, CFG_EDGE_RETURN);   /* 5 */
}

START_TEST(test_qp_flow_diamond)
{
    qp_desc_t d;
    diamond(&d, QP_DRIVER_QP);
    tg_measure_edge(&d, 0);
    tg_measure_edge(&d, 1);
    const uint64_t truth[] = { 10, 7, 3, 7, 3, 10 };
    uint64_t *c = tg_counters(&d, truth, NULL);
    qp_flow_t f = solve(&d, c, NULL);
    for (uint32_t e = 0; e < 6; e++)
        ck_assert_uint_eq(f.edge_count[e], truth[e]);
    ck_assert_uint_eq(f.block_count[3], 10);
    ck_assert_uint_eq(f.nviolations, 0);
    qp_flow_free(&f);
    free(c);
    qp_desc_free(&d);
}
END_TEST

START_TEST(test_qp_flow_naive_blocks)
{
    qp_desc_t d;
    diamond(&d, QP_DRIVER_NAIVE);
    for (uint32_t b = 0; b < 4; b++)
        tg_measure_block(&d, b);
    const uint64_t blocks[] = { 10, 7, 3, 10 };
    uint64_t *c = tg_counters(&d, NULL, blocks);
    qp_flow_t f = solve(&d, c, NULL);
    const uint64_t truth[] = { 10, 7, 3, 7, 3, 10 };
    for (uint32_t e = 0; e < 6; e++) {
        ck_assert_uint_eq(f.edge_count[e], truth[e]);
        ck_assert_int_eq(f.edge_state[e], QP_FLOW_SOLVED);
    }
    for (uint32_t b = 0; b < 4; b++)
        ck_assert_int_eq(f.block_state[b], QP_FLOW_MEASURED);
    ck_assert_uint_eq(f.calls, 10);
    ck_assert_uint_eq(f.nviolations, 0);
    qp_flow_free(&f);
    free(c);
    qp_desc_free(&d);
}
END_TEST

/* Naive counts cannot split two parallel edges: they stay unknown, never guessed. */
START_TEST(test_qp_flow_naive_leaves_unknown)
{
    qp_desc_t d;
    tg_init(&d, QP_DRIVER_NAIVE, 2);
    tg_edge(&d, X, 0, QP_EDGE_ENTRY);
    tg_edge(&d, 0, 1, CFG_EDGE_TAKEN);
    tg_edge(&d, 0, 1, CFG_EDGE_FALL);
    tg_edge(&d, 1, X, CFG_EDGE_RETURN);
    tg_measure_block(&d, 0);
    tg_measure_block(&d, 1);
    const uint64_t blocks[] = { 5, 5 };
    uint64_t *c = tg_counters(&d, NULL, blocks);
    qp_flow_t f = solve(&d, c, NULL);
    ck_assert_int_eq(f.edge_state[1], QP_FLOW_UNKNOWN);
    ck_assert_int_eq(f.edge_state[2], QP_FLOW_UNKNOWN);
    ck_assert_uint_eq(f.nunknown_edges, 2);
    ck_assert(f.calls_known);
    ck_assert_uint_eq(f.calls, 5);
    ck_assert(f.insns_exact);
    ck_assert_uint_eq(f.nviolations, 0);
    ck_assert_str_eq(qp_flow_state_name(QP_FLOW_UNKNOWN), "unknown");
    qp_flow_free(&f);
    free(c);
    qp_desc_free(&d);
}
END_TEST

/*
 * main: X -> A (entry), A -> B (callret: the call returned), B -> X (return). The
 * program exited inside the call once: the return never happened, and the back-trace
 * says block A was abandoned once. Only the return is measured (E - V + 1 = 1).
 */
START_TEST(test_qp_flow_abandoned_at_exit)
{
    qp_desc_t d;
    tg_init(&d, QP_DRIVER_QP, 2);
    tg_edge(&d, X, 0, QP_EDGE_ENTRY);
    tg_edge(&d, 0, 1, CFG_EDGE_CALLRET);
    tg_measure_edge(&d, tg_edge(&d, 1, X, CFG_EDGE_RETURN));
    const uint64_t truth[] = { 1, 0, 0 };
    uint64_t *c = tg_counters(&d, truth, NULL);
    /* Without the back-trace, main seems never called. */
    qp_flow_t f = solve(&d, c, NULL);
    ck_assert_uint_eq(f.calls, 0);
    qp_flow_free(&f);
    const uint64_t abandoned[] = { 1, 0 };
    f = solve(&d, c, abandoned);
    ck_assert_uint_eq(f.calls, 1);
    ck_assert_uint_eq(f.block_count[0], 1);
    ck_assert_uint_eq(f.block_count[1], 0);
    ck_assert_uint_eq(f.nviolations, 0);
    qp_flow_free(&f);
    free(c);
    qp_desc_free(&d);
}
END_TEST

START_TEST(test_qp_flow_violation_unbalanced)
{
    /* Naive counts A = 10, B = 7 on a chain X -> A -> B -> X: impossible. */
    qp_desc_t d;
    tg_init(&d, QP_DRIVER_NAIVE, 2);
    tg_edge(&d, X, 0, QP_EDGE_ENTRY);
    tg_edge(&d, 0, 1, CFG_EDGE_FALL);
    tg_edge(&d, 1, X, CFG_EDGE_RETURN);
    tg_measure_block(&d, 0);
    tg_measure_block(&d, 1);
    const uint64_t blocks[] = { 10, 7 };
    uint64_t *c = tg_counters(&d, NULL, blocks);
    qp_flow_t f = solve(&d, c, NULL);
    ck_assert_uint_gt(f.nviolations, 0);
    /* Where it shows depends on the solving order; the count of A does not match. */
    int unbalanced = 0;
    for (size_t i = 0; i < f.nviolations; i++)
        unbalanced |= f.violations[i].kind == QP_FLOW_V_UNBALANCED;
    ck_assert(unbalanced);
    qp_flow_free(&f);
    free(c);
    qp_desc_free(&d);
}
END_TEST

START_TEST(test_qp_flow_violation_negative)
{
    /* 10 calls but 12 through one arm of the diamond: the other arm would be -2. */
    qp_desc_t d;
    diamond(&d, QP_DRIVER_QP);
    tg_measure_edge(&d, 0);
    tg_measure_edge(&d, 1);
    const uint64_t truth[] = { 10, 12, 0, 0, 0, 0 };
    uint64_t *c = tg_counters(&d, truth, NULL);
    qp_flow_t f = solve(&d, c, NULL);
    ck_assert_uint_gt(f.nviolations, 0);
    ck_assert_int_eq(f.violations[0].kind, QP_FLOW_V_NEGATIVE);
    ck_assert_uint_eq(f.violations[0].edge, 2);
    ck_assert_int_eq(f.edge_state[2], QP_FLOW_CLAMPED);
    ck_assert_uint_eq(f.edge_count[2], 0);
    qp_flow_free(&f);
    free(c);
    qp_desc_free(&d);
}
END_TEST

START_TEST(test_qp_flow_huge_counts)
{
    /* Counts near 2^64: sums are exact, a result over 2^64 - 1 is a violation. */
    qp_desc_t d;
    diamond(&d, QP_DRIVER_QP);
    tg_measure_edge(&d, 1);
    tg_measure_edge(&d, 2);
    const uint64_t truth[] = { 0, UINT64_MAX, 1, 0, 0, 0 };
    uint64_t *c = tg_counters(&d, truth, NULL);
    qp_flow_t f = solve(&d, c, NULL);
    ck_assert_uint_gt(f.nviolations, 0);
    ck_assert_int_eq(f.violations[0].kind, QP_FLOW_V_OVERFLOW);
    qp_flow_free(&f);
    free(c);
    qp_desc_free(&d);
}
END_TEST

START_TEST(test_qp_flow_bad_args)
{
    qp_desc_t d;
    sample_desc(&d);
    qp_flow_t f;
    uint64_t c[8] = { 0 };
    ck_assert_int_eq(qp_flow_solve(&d, 1, c, d.hdr.ncounters, NULL, &f), QP_EINVAL);
    ck_assert_int_eq(qp_flow_solve(&d, 0, c, d.hdr.ncounters + 1, NULL, &f), QP_EINVAL);
    ck_assert_int_eq(qp_flow_solve(&d, 5, c, d.hdr.ncounters, NULL, &f), QP_EINVAL);
    ck_assert_int_eq(qp_flow_solve(NULL, 0, c, 0, NULL, &f), QP_EINVAL);
    qp_flow_free(NULL);
    qp_desc_free(&d);
}
END_TEST

/* Union-find over nodes 0..n (n = X) for the random spanning trees. */
static uint32_t
uf_find(uint32_t *parent, uint32_t v)
{
    while (parent[v] != v)
        v = parent[v] = parent[parent[v]];
    return v;
}

/*
 * Random procedures: blocks with random edges (every block reachable from the entry
 * and reaching X), a flow made of random walks X -> ... -> X (so Kirchhoff holds), a
 * random spanning tree of the undirected graph (X included), counters on every other
 * edge. Reconstruction must give back every count, with no violation.
 */
START_TEST(test_qp_flow_random_vs_truth)
{
    srand(1000 + (unsigned)_i);
    uint32_t nb = 2 + (uint32_t)rand() % 30;
    qp_desc_t d;
    tg_init(&d, QP_DRIVER_QP, nb);
    tg_edge(&d, X, 0, QP_EDGE_ENTRY);
    for (uint32_t b = 0; b + 1 < nb; b++) /* a chain keeps everything reachable */
        tg_edge(&d, b, b + 1, CFG_EDGE_FALL);
    tg_edge(&d, nb - 1, X, CFG_EDGE_RETURN);
    uint32_t extra = (uint32_t)rand() % (2 * nb);
    for (uint32_t k = 0; k < extra && d.hdr.nedges < 250; k++) {
        uint32_t a = (uint32_t)rand() % nb, b = (uint32_t)rand() % nb;
        if (rand() % 5 == 0)
            tg_edge(&d, a, X, CFG_EDGE_RETURN);
        else
            tg_edge(&d, a, b, CFG_EDGE_TAKEN);
    }
    if (rand() % 3 == 0 && nb > 2)
        tg_edge(&d, X, 1 + (uint32_t)rand() % (nb - 1), QP_EDGE_ROOT);
    uint32_t ne = d.hdr.nedges;
    /* The flow: walks from X until an edge back to X (each step prefers leaving). */
    uint64_t *truth = calloc(ne, sizeof(uint64_t));
    uint32_t nwalks = 1 + (uint32_t)rand() % 20;
    for (uint32_t w = 0; w < nwalks; w++) {
        uint32_t at = X;
        for (int steps = 0; steps < 10000; steps++) {
            uint32_t cand[256], nc = 0;
            for (uint32_t e = 0; e < ne; e++)
                if (d.edges[e].from == at)
                    cand[nc++] = e;
            /* Past 200 steps follow the chain to the end: every walk terminates. */
            uint32_t e = cand[(uint32_t)rand() % nc];
            if (steps > 200 && at != X)
                e = at + 1; /* edge at+1 is the chain edge at -> at+1 (or last -> X) */
            truth[e]++;
            at = d.edges[e].to;
            if (at == X)
                break;
        }
        ck_assert_uint_eq(at, X);
    }
    uint32_t *parent = malloc((nb + 1) * sizeof(uint32_t));
    for (uint32_t v = 0; v <= nb; v++)
        parent[v] = v;
    /* Edges in random order; an edge closing a cycle gets a counter. */
    uint32_t *order = malloc(ne * sizeof(uint32_t));
    for (uint32_t e = 0; e < ne; e++)
        order[e] = e;
    for (uint32_t e = ne - 1; e > 0; e--) {
        uint32_t k = (uint32_t)rand() % (e + 1), t = order[e];
        order[e] = order[k];
        order[k] = t;
    }
    for (uint32_t i = 0; i < ne; i++) {
        const qp_desc_edge_t *ed = &d.edges[order[i]];
        uint32_t a = ed->from == X ? nb : ed->from, b = ed->to == X ? nb : ed->to;
        uint32_t ra = uf_find(parent, a), rb = uf_find(parent, b);
        if (ra == rb)
            tg_measure_edge(&d, order[i]);
        else
            parent[ra] = rb;
    }
    uint64_t *c = tg_counters(&d, truth, NULL);
    qp_flow_t f = solve(&d, c, NULL);
    for (uint32_t e = 0; e < ne; e++)
        ck_assert_msg(f.edge_count[e] == truth[e] && f.edge_state[e] != QP_FLOW_UNKNOWN,
                      "edge %u: %llu, truth %llu", e, (unsigned long long)f.edge_count[e],
                      (unsigned long long)truth[e]);
    ck_assert_uint_eq(f.nviolations, 0);
    ck_assert_uint_eq(f.calls, truth[0]);
    qp_flow_free(&f);
    free(c);
    free(order);
    free(parent);
    free(truth);
    qp_desc_free(&d);
}
END_TEST

/*****************************************************************************
 * Profiles
 */

static char tmpdir[64];

static void
make_tmpdir(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/check_qp.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void
remove_tmpdir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static const char *
tmp_path(const char *name)
{
    static char path[4][128];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof(path[k]), "%s/%s", tmpdir, name);
    return path[k];
}

/* How many files in the temporary folder have ".tmp" in their name. */
static int
count_tmp_files(void)
{
    DIR *d = opendir(tmpdir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strstr(e->d_name, ".tmp") != NULL;
    closedir(d);
    return n;
}

/* A profile in memory: NCOUNTERS counters i * MUL, NDUMPS complete dumps. */
static void
make_profile(qp_profile_t *p, uint64_t id, uint64_t ncounters, uint64_t mul, size_t ndumps)
{
    memset(p, 0, sizeof(*p));
    memcpy(p->hdr.magic, QP_PROF_MAGIC, 8);
    p->hdr.version = QP_PROF_VERSION;
    p->hdr.id = id;
    p->hdr.ncounters = ncounters;
    p->hdr.runs = 1;
    p->hdr.ndumps = ndumps;
    snprintf(p->hdr.exe, sizeof(p->hdr.exe), "/nowhere/a.inst");
    p->counters = calloc(ncounters + 1, 8);
    for (uint64_t i = 0; i < ncounters; i++)
        p->counters[i] = i * mul;
    p->dumps = calloc(ndumps + 1, sizeof(qp_dump_t));
    for (size_t i = 0; i < ndumps; i++) {
        p->dumps[i].hdr.valid = 1;
        p->dumps[i].hdr.pc = 0x1000 + i;
        p->dumps[i].hdr.stack_len = 64;
        p->dumps[i].stack = calloc(1, 64);
        p->dumps[i].stack[0] = (uint8_t)i;
    }
    p->ndumps = ndumps;
    p->nfiles = 1;
}

START_TEST(test_qp_profile_write_read)
{
    make_tmpdir();
    qp_profile_t p, back;
    make_profile(&p, 0x1234, 1000, 3, 2);
    char why[256] = "";
    ck_assert_msg(qp_profile_write(tmp_path("a.qp"), &p, why, sizeof(why)) == 0, "%s", why);
    ck_assert_msg(qp_profile_read(tmp_path("a.qp"), &back, why, sizeof(why)) == 0, "%s", why);
    ck_assert_uint_eq(back.hdr.id, 0x1234);
    ck_assert_uint_eq(back.hdr.ncounters, 1000);
    ck_assert_uint_eq(back.hdr.dumps_off, 4096 + 8192);
    ck_assert_int_eq(memcmp(back.counters, p.counters, 8000), 0);
    ck_assert_uint_eq(back.ndumps, 2);
    ck_assert_uint_eq(back.ndropped, 0);
    ck_assert_uint_eq(back.dumps[1].hdr.pc, 0x1001);
    ck_assert_uint_eq(back.dumps[1].stack[0], 1);
    ck_assert_str_eq(back.hdr.exe, "/nowhere/a.inst");
    /* The mode a new file gets under the umask (the temporary it is renamed from is not
     * mkstemp's 0600), and no temporary left beside it. */
    mode_t old_mask = umask(027);
    ck_assert_msg(qp_profile_write(tmp_path("m.qp"), &p, why, sizeof(why)) == 0, "%s", why);
    umask(old_mask);
    struct stat st;
    ck_assert_int_eq(stat(tmp_path("m.qp"), &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0640);
    ck_assert_int_eq(count_tmp_files(), 0);
    qp_profile_free(&back);
    qp_profile_free(&p);
    remove_tmpdir();
}
END_TEST

static void
write_file(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

static uint8_t *
read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*n);
    ck_assert_uint_eq(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

START_TEST(test_qp_profile_bad_files)
{
    make_tmpdir();
    qp_profile_t p, back;
    make_profile(&p, 0x99, 600, 1, 1);
    ck_assert_int_eq(qp_profile_write(tmp_path("good.qp"), &p, NULL, 0), 0);
    size_t n;
    uint8_t *good = read_file(tmp_path("good.qp"), &n);
    char why[256];
    /* Missing, a directory, empty, too short, garbage. */
    ck_assert_int_eq(qp_profile_read(tmp_path("missing.qp"), &back, why, sizeof(why)), QP_EIO);
    ck_assert_str_eq(why, "No such file or directory");
    ck_assert_int_eq(qp_profile_read(tmpdir, &back, why, sizeof(why)), QP_EDIR);
    write_file(tmp_path("empty.qp"), "", 0);
    ck_assert_int_eq(qp_profile_read(tmp_path("empty.qp"), &back, why, sizeof(why)), QP_EFORMAT);
    char garbage[8192];
    memset(garbage, 'z', sizeof(garbage));
    write_file(tmp_path("garbage.qp"), garbage, sizeof(garbage));
    ck_assert_int_eq(qp_profile_read(tmp_path("garbage.qp"), &back, why, sizeof(why)), QP_EFORMAT);
    ck_assert_str_eq(why, "not a qp profile (bad magic)");
    /* Wrong version (1: before process slots). */
    uint8_t *b = malloc(n);
    memcpy(b, good, n);
    b[8] = 1;
    write_file(tmp_path("v1.qp"), b, n);
    ck_assert_int_eq(qp_profile_read(tmp_path("v1.qp"), &back, why, sizeof(why)), QP_EFORMAT);
    ck_assert_ptr_nonnull(strstr(why, "version 1"));
    /* Cut anywhere before the slot table ends: refused (a runtime reserves it all). */
    ck_assert_uint_eq(n, 4096 + 8192 + QP_PROF_MAX_DUMPS * QP_PROF_DUMP_SIZE
                             + QP_PROF_TABLE_SIZE);
    for (size_t cut = 0; cut < n; cut += cut < 16384 ? 97 : 40961) {
        write_file(tmp_path("cut.qp"), good, cut);
        ck_assert_int_eq(qp_profile_read(tmp_path("cut.qp"), &back, why, sizeof(why)),
                         QP_EFORMAT);
    }
    /* A dump not marked valid (the process died while writing it) is dropped. */
    memcpy(b, good, n);
    b[4096 + 8192] = 0;
    write_file(tmp_path("invalid.qp"), b, n);
    ck_assert_int_eq(qp_profile_read(tmp_path("invalid.qp"), &back, why, sizeof(why)), 0);
    ck_assert_uint_eq(back.ndropped, 1);
    qp_profile_free(&back);
    /* dumps_off not where the format says, an exe name without NUL. */
    memcpy(b, good, n);
    b[32] += 8;
    write_file(tmp_path("off.qp"), b, n);
    ck_assert_int_eq(qp_profile_read(tmp_path("off.qp"), &back, why, sizeof(why)), QP_EFORMAT);
    memcpy(b, good, n);
    memset(b + offsetof(qp_prof_hdr_t, exe), 'a', 1024);
    write_file(tmp_path("exe.qp"), b, n);
    ck_assert_int_eq(qp_profile_read(tmp_path("exe.qp"), &back, why, sizeof(why)), QP_EFORMAT);
    /* A huge counter count in a small file is refused before allocating. */
    memcpy(b, good, n);
    uint64_t big = UINT64_MAX / 4;
    memcpy(b + 24, &big, 8);
    write_file(tmp_path("big.qp"), b, n);
    ck_assert_int_eq(qp_profile_read(tmp_path("big.qp"), &back, why, sizeof(why)), QP_EFORMAT);
    free(b);
    free(good);
    qp_profile_free(&p);
    remove_tmpdir();
}
END_TEST

START_TEST(test_qp_profile_check)
{
    qp_desc_t d;
    sample_desc(&d);
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(qp_desc_serialize(&d, &buf, &len), 0);
    qp_desc_t back;
    ck_assert_int_eq(qp_desc_parse(buf, len, &back, NULL, 0), 0);
    qp_profile_t p;
    make_profile(&p, back.hdr.id, back.hdr.ncounters, 1, 0);
    char why[512];
    ck_assert_int_eq(qp_profile_check(&p, &back, why, sizeof(why)), 0);
    p.hdr.id ^= 1;
    ck_assert_int_eq(qp_profile_check(&p, &back, why, sizeof(why)), QP_EFORMAT);
    ck_assert_ptr_nonnull(strstr(why, "belongs to another executable or another rewrite"));
    p.hdr.id ^= 1;
    p.hdr.ncounters++;
    ck_assert_int_eq(qp_profile_check(&p, &back, why, sizeof(why)), QP_EFORMAT);
    ck_assert_ptr_nonnull(strstr(why, "counters"));
    qp_profile_free(&p);
    qp_desc_free(&back);
    qp_desc_free(&d);
    free(buf);
}
END_TEST

START_TEST(test_qp_profile_merge)
{
    make_tmpdir();
    qp_profile_t a, b, m = { 0 };
    make_profile(&a, 7, 10, 1, 10);
    make_profile(&b, 7, 10, 2, 10);
    a.counters[9] = UINT64_MAX - 5; /* saturates */
    b.hdr.ndumps = 20;              /* 10 kept, 10 dropped */
    b.ndropped = 10;
    char why[256];
    ck_assert_int_eq(qp_profile_merge(&m, &a, why, sizeof(why)), 0);
    ck_assert_int_eq(qp_profile_merge(&m, &b, why, sizeof(why)), 0);
    ck_assert_uint_eq(m.counters[3], 3 + 6);
    ck_assert_uint_eq(m.counters[9], UINT64_MAX);
    ck_assert(m.saturated);
    ck_assert_uint_eq(m.hdr.runs, 2);
    ck_assert_uint_eq(m.hdr.ndumps, 30);
    ck_assert_uint_eq(m.ndumps, 20);
    ck_assert_uint_eq(m.ndropped, 10);
    ck_assert_uint_eq(m.nfiles, 2);
    ck_assert_uint_eq(m.dumps[12].stack[0], 2);
    /* Another id: refused, M unchanged. */
    qp_profile_t c;
    make_profile(&c, 8, 10, 1, 0);
    ck_assert_int_eq(qp_profile_merge(&m, &c, why, sizeof(why)), QP_EFORMAT);
    ck_assert_ptr_nonnull(strstr(why, "another executable"));
    ck_assert_uint_eq(m.counters[3], 9);
    /* Written, only 16 dumps fit: the others read back as dropped. */
    ck_assert_int_eq(qp_profile_write(tmp_path("m.qp"), &m, why, sizeof(why)), 0);
    qp_profile_t back;
    ck_assert_int_eq(qp_profile_read(tmp_path("m.qp"), &back, why, sizeof(why)), 0);
    ck_assert_uint_eq(back.ndumps, QP_PROF_MAX_DUMPS);
    ck_assert_uint_eq(back.ndropped, 30 - QP_PROF_MAX_DUMPS);
    ck_assert_uint_eq(back.counters[3], 9);
    /* The saturation survives the file (it used to be dropped silently). */
    ck_assert_uint_eq(back.counters[9], UINT64_MAX);
    ck_assert(back.saturated);
    ck_assert(back.hdr.flags & QP_PROF_SATURATED);
    qp_profile_free(&back);
    qp_profile_free(&a);
    qp_profile_free(&b);
    qp_profile_free(&c);
    qp_profile_free(&m);
    remove_tmpdir();
}
END_TEST

/* The bytes of a profile file of id ID with NCOUNTERS counters (counter i = i), P's. */
static uint8_t *
profile_bytes(uint64_t id, uint32_t ncounters, qp_profile_t *p, size_t *n)
{
    make_profile(p, id, ncounters, 1, 0);
    char why[256] = "";
    ck_assert_int_eq(qp_profile_write(tmp_path("s.qp"), p, why, sizeof(why)), 0);
    return read_file(tmp_path("s.qp"), n);
}

/* A slot's counters added to the base counters saturate at 2^64 - 1, two at a time
 * and the odd one after them alike, and say so; a sum of exactly 2^64 - 1 is no
 * saturation. */
START_TEST(test_qp_profile_slots_saturate)
{
    make_tmpdir();
    qp_profile_t p, back;
    char why[256] = "";
    size_t n;
    uint8_t *good = profile_bytes(0x78, 7, &p, &n);
    uint64_t cbytes = QP_PROF_CBYTES(7);
    const qp_prof_hdr_t *h = (const qp_prof_hdr_t *)good;
    for (int over = 0; over < 3; over++) {
        uint8_t *b = calloc(1, n + cbytes);
        memcpy(b, good, n);
        qp_prof_slot_t *tab = (qp_prof_slot_t *)(b + h->slots_off);
        uint64_t *s0 = (uint64_t *)(b + h->slotc_off);
        tab[0].state = QP_SLOT_OWNED;
        tab[0].pid = 1;
        s0[3] = UINT64_MAX - 3;              /* 3 + that: 2^64 - 1, no saturation */
        s0[1] = over == 1 ? UINT64_MAX : 5;  /* in a pair */
        s0[6] = over == 2 ? UINT64_MAX - 5 : 5; /* the last one, alone */
        write_file(tmp_path("sat.qp"), b, n + cbytes);
        ck_assert_msg(qp_profile_read(tmp_path("sat.qp"), &back, why, sizeof(why)) == 0, "%s",
                      why);
        ck_assert_uint_eq(back.counters[0], 0);
        ck_assert_uint_eq(back.counters[3], UINT64_MAX);
        ck_assert_uint_eq(back.counters[1], over == 1 ? UINT64_MAX : 6);
        ck_assert_uint_eq(back.counters[6], over == 2 ? UINT64_MAX : 11);
        ck_assert_uint_eq(back.counters[5], 5);
        ck_assert_int_eq(back.saturated != 0, over != 0);
        qp_profile_free(&back);
        free(b);
    }
    free(good);
    qp_profile_free(&p);
    remove_tmpdir();
}
END_TEST

/*
 * Process slots: a count is the base counter plus that counter in every slot in use;
 * a fold killed half-way (a FOLDING slot with its journal set) counts once, whether the
 * base counter had been updated or not.
 */
START_TEST(test_qp_profile_slots)
{
    make_tmpdir();
    qp_profile_t p, back;
    char why[256] = "";
    size_t n;
    uint8_t *good = profile_bytes(0x77, 600, &p, &n);
    uint64_t cbytes = QP_PROF_CBYTES(600);
    const qp_prof_hdr_t *h = (const qp_prof_hdr_t *)good;
    ck_assert_uint_eq(n, h->slotc_off);
    for (int base_done = 0; base_done < 2; base_done++) {
        size_t m = n + 3 * cbytes;
        uint8_t *b = calloc(1, m);
        memcpy(b, good, n);
        qp_prof_slot_t *tab = (qp_prof_slot_t *)(b + h->slots_off);
        uint64_t *base = (uint64_t *)(b + QP_PROF_HDR_SIZE);
        uint64_t *s0 = (uint64_t *)(b + h->slotc_off);
        uint64_t *s2 = (uint64_t *)(b + h->slotc_off + 2 * cbytes);
        /* Slot 0: a process counting (2 in every counter). Slot 1: free. */
        tab[0].state = QP_SLOT_OWNED;
        tab[0].pid = 1;
        for (int i = 0; i < 600; i++)
            s0[i] = 2;
        /* Slot 2: a fold of counter 5 (value 7) cut short; counter 6 not folded yet. */
        tab[2].state = QP_SLOT_FOLDING;
        tab[2].jour_valid = 1;
        tab[2].jour_index = 5;
        tab[2].jour_base = 5;
        tab[2].jour_value = 7;
        s2[5] = 7;
        s2[6] = 1;
        if (base_done)
            base[5] = 12;
        write_file(tmp_path("slots.qp"), b, m);
        ck_assert_msg(qp_profile_read(tmp_path("slots.qp"), &back, why, sizeof(why)) == 0, "%s",
                      why);
        ck_assert_uint_eq(back.counters[0], 0 + 2);
        ck_assert_uint_eq(back.counters[5], 5 + 7 + 2);
        ck_assert_uint_eq(back.counters[6], 6 + 1 + 2);
        ck_assert_uint_eq(back.counters[599], 599 + 2);
        ck_assert_uint_eq(back.nslots_used, 2);
        qp_profile_free(&back);
        /* A slot in use whose counters are past the end of the file: refused. */
        write_file(tmp_path("short.qp"), b, m - cbytes);
        ck_assert_int_eq(qp_profile_read(tmp_path("short.qp"), &back, why, sizeof(why)),
                         QP_EFORMAT);
        ck_assert_ptr_nonnull(strstr(why, "slot 2"));
        /* A journal naming a counter that does not exist: refused. */
        tab[2].jour_index = 600;
        write_file(tmp_path("jour.qp"), b, m);
        ck_assert_int_eq(qp_profile_read(tmp_path("jour.qp"), &back, why, sizeof(why)),
                         QP_EFORMAT);
        free(b);
    }
    /* Merged and written: one file with every count in the base counters. */
    ck_assert_int_eq(qp_profile_read(tmp_path("slots.qp"), &back, why, sizeof(why)), 0);
    ck_assert_int_eq(qp_profile_write(tmp_path("w.qp"), &back, why, sizeof(why)), 0);
    qp_profile_free(&back);
    ck_assert_int_eq(qp_profile_read(tmp_path("w.qp"), &back, why, sizeof(why)), 0);
    ck_assert_uint_eq(back.counters[5], 14);
    ck_assert_uint_eq(back.nslots_used, 0);
    qp_profile_free(&back);
    free(good);
    qp_profile_free(&p);
    remove_tmpdir();
}
END_TEST

/*
 * A profile read in two steps (qp report reads the counters on another thread): every
 * check of the file in the first, with qp_profile_read's words; the second fails only
 * on a file cut short meanwhile, and leaves the profile empty.
 */
START_TEST(test_qp_profile_open_fill)
{
    make_tmpdir();
    qp_profile_t p, back, one;
    make_profile(&p, 0x78, 600, 3, 1);
    char why[256] = "";
    ck_assert_int_eq(qp_profile_write(tmp_path("s.qp"), &p, why, sizeof(why)), 0);
    size_t n;
    uint8_t *b = read_file(tmp_path("s.qp"), &n);
    const qp_prof_hdr_t *h = (const qp_prof_hdr_t *)b;
    /* Slot 0 in use, its counters past the end of the file: refused by the first step. */
    qp_prof_slot_t *tab = (qp_prof_slot_t *)(b + h->slots_off);
    tab[0].state = QP_SLOT_OWNED;
    write_file(tmp_path("short.qp"), b, n);
    qp_profile_pending_t *pd;
    ck_assert_int_eq(qp_profile_open(tmp_path("short.qp"), &back, &pd, why, sizeof(why)),
                     QP_EFORMAT);
    ck_assert_ptr_null(pd);
    ck_assert_str_eq(why, "profile truncated (the counters of slot 0)");
    ck_assert_int_eq(qp_profile_read(tmp_path("short.qp"), &one, why, sizeof(why)), QP_EFORMAT);
    ck_assert_str_eq(why, "profile truncated (the counters of slot 0)");
    /* Both steps: what qp_profile_read gives. */
    ck_assert_int_eq(qp_profile_open(tmp_path("s.qp"), &back, &pd, why, sizeof(why)), 0);
    ck_assert_uint_eq(back.hdr.id, 0x78);
    ck_assert_ptr_null(back.counters);
    ck_assert_int_eq(qp_profile_fill(pd, &back, why, sizeof(why)), 0);
    ck_assert_int_eq(qp_profile_read(tmp_path("s.qp"), &one, why, sizeof(why)), 0);
    ck_assert_int_eq(memcmp(back.counters, one.counters, 600 * 8), 0);
    ck_assert_uint_eq(back.ndumps, one.ndumps);
    ck_assert_uint_eq(back.nfiles, 1);
    qp_profile_free(&back);
    qp_profile_free(&one);
    /* Cut short between the two: the second says so. */
    ck_assert_int_eq(qp_profile_open(tmp_path("s.qp"), &back, &pd, why, sizeof(why)), 0);
    ck_assert_int_eq(truncate(tmp_path("s.qp"), QP_PROF_HDR_SIZE + 100), 0);
    ck_assert_int_eq(qp_profile_fill(pd, &back, why, sizeof(why)), QP_EFORMAT);
    ck_assert_str_eq(why, "profile truncated while reading its counters");
    ck_assert_ptr_null(back.counters);
    /* Opened, never filled: closed. */
    ck_assert_int_eq(qp_profile_write(tmp_path("s.qp"), &p, why, sizeof(why)), 0);
    ck_assert_int_eq(qp_profile_open(tmp_path("s.qp"), &back, &pd, why, sizeof(why)), 0);
    qp_profile_close(pd);
    qp_profile_close(NULL);
    free(b);
    qp_profile_free(&p);
    remove_tmpdir();
}
END_TEST

/*****************************************************************************
 * Exit back-traces on this process's own stack
 */

static qp_dump_t self_dump;
static uint64_t ra_in_level2, ra_in_level1;
static volatile int sink;

static int
first_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    *(uint64_t *)arg = info->dlpi_addr;
    return 1; /* the main program is the first object: stop */
}

/* The load bias of this program (0 unless PIE). */
static uint64_t
load_bias(void)
{
    uint64_t bias = 0;
    dl_iterate_phdr(first_object, &bias);
    return bias;
}

/* The end of the mapping that holds ADDR (the stack), from /proc/self/maps. */
static uint64_t
mapping_end(uint64_t addr)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    uint64_t end = addr;
    while (f != NULL && fgets(line, sizeof(line), f)) {
        unsigned long long lo, hi;
        if (sscanf(line, "%llx-%llx", &lo, &hi) == 2 && addr >= lo && addr < hi)
            end = hi;
    }
    if (f != NULL)
        fclose(f);
    return end;
}

/* Copy stack bytes byte by byte: the live stack has sanitizer redzones. */
__attribute__((no_sanitize_address)) static void
copy_stack(uint8_t *to, uint64_t from, uint64_t n)
{
    const volatile uint8_t *p = (const volatile uint8_t *)(uintptr_t)from;
    for (uint64_t i = 0; i < n; i++)
        to[i] = p[i];
}

/* Take a dump as the runtime does: registers, pc, the stack from rsp upwards. */
__attribute__((noinline)) static void
capture(void)
{
    uint64_t r[8];
    __asm__ volatile("leaq 1f(%%rip), %%rax\n\t"
                     "movq %%rax, 0(%0)\n\t"
                     "movq %%rsp, 8(%0)\n\t"
                     "movq %%rbp, 16(%0)\n\t"
                     "movq %%rbx, 24(%0)\n\t"
                     "movq %%r12, 32(%0)\n\t"
                     "movq %%r13, 40(%0)\n\t"
                     "movq %%r14, 48(%0)\n\t"
                     "movq %%r15, 56(%0)\n\t"
                     "1:\n\t"
                     :
                     : "r"(r)
                     : "rax", "memory");
    qp_dump_hdr_t *h = &self_dump.hdr;
    memset(h, 0, sizeof(*h));
    h->valid = 1;
    h->bias = load_bias();
    h->pc = r[0];
    h->regs[16] = r[0];
    h->regs[7] = r[1];
    h->regs[6] = r[2];
    h->regs[3] = r[3];
    for (int k = 0; k < 4; k++)
        h->regs[12 + k] = r[4 + k];
    uint64_t avail = mapping_end(r[1]) - r[1];
    h->stack_len = avail < QP_PROF_DUMP_STACK ? avail : QP_PROF_DUMP_STACK;
    self_dump.stack = malloc(h->stack_len);
    copy_stack(self_dump.stack, r[1], h->stack_len);
    ra_in_level2 = (uint64_t)(uintptr_t)__builtin_return_address(0);
}

__attribute__((noinline)) static void
level2(void)
{
    capture();
    ra_in_level1 = (uint64_t)(uintptr_t)__builtin_return_address(0);
    sink++; /* no tail call */
}

__attribute__((noinline)) static void
level1(void)
{
    level2();
    sink++;
}

typedef struct ra_list {
    uint64_t ra[64];
    int n;
} ra_list_t;

static int
collect_ra(void *arg, uint64_t ra)
{
    ra_list_t *l = arg;
    if (l->n < 64)
        l->ra[l->n++] = ra;
    return 0;
}

START_TEST(test_qp_backtrace_self)
{
    level1();
    qp_unwinder_t *u;
    char why[256] = "";
    ck_assert_msg(qp_unwinder_create("/proc/self/exe", &u, why, sizeof(why)) == 0, "%s", why);
    ra_list_t l = { { 0 }, 0 };
    int stop = qp_backtrace_walk(u, &self_dump, collect_ra, &l);
    ck_assert_int_ge(stop, 0);
    uint64_t bias = self_dump.hdr.bias;
    ck_assert_int_ge(l.n, 3);
    ck_assert_uint_eq(l.ra[0], ra_in_level2 - bias);
    ck_assert_uint_eq(l.ra[1], ra_in_level1 - bias);

    /* Matching against CFG_EDGE_CALLRET return sites: one abandoned per frame found. */
    qp_desc_t d;
    tg_init(&d, QP_DRIVER_QP, 3);
    tg_edge(&d, X, 0, QP_EDGE_ENTRY);
    uint32_t e1 = tg_edge(&d, 0, 1, CFG_EDGE_CALLRET);
    uint32_t e2 = tg_edge(&d, 1, 2, CFG_EDGE_CALLRET);
    tg_edge(&d, 2, X, CFG_EDGE_RETURN);
    d.edges[e1].ret_addr = l.ra[1];
    d.edges[e2].ret_addr = l.ra[0];
    qp_profile_t p = { 0 };
    p.dumps = &self_dump;
    p.ndumps = 1;
    /* Blocks 0 and 1 in procedure 1, block 2 in procedure 0, none in procedure 2: the
     * procedures with abandoned flow are in LEFT (the report reads no other's counts). */
    d.procs = realloc(d.procs, 3 * sizeof(qp_desc_proc_t));
    ck_assert_ptr_nonnull(d.procs);
    d.procs[1] = d.procs[0];
    d.procs[1].nblocks = 2;
    d.procs[1].nedges = 0;
    d.procs[0].block = 2;
    d.procs[0].nblocks = 1;
    d.procs[2] = d.procs[0];
    d.procs[2].nblocks = 0;
    d.hdr.nprocs = 3;
    uint64_t abandoned[3] = { 0 };
    uint8_t left[3] = { 0 };
    qp_backtrace_stats_t st;
    ck_assert_int_eq(qp_backtrace_abandoned(u, &d, &p, abandoned, left, &st), 0);
    ck_assert_uint_eq(abandoned[0], 1);
    ck_assert_uint_eq(abandoned[1], 1);
    ck_assert_uint_eq(abandoned[2], 0);
    ck_assert_uint_eq(left[0], 0);
    ck_assert_uint_eq(left[1], 1);
    ck_assert_uint_eq(left[2], 0);
    ck_assert_uint_eq(st.matched, 2);
    ck_assert_uint_eq(st.dumps, 1);

    /* A cut stack, garbage stacks, a pc outside the program: clean stops. */
    qp_dump_t cut = self_dump;
    cut.hdr.stack_len = 8;
    l.n = 0;
    ck_assert_int_gt(qp_backtrace_walk(u, &cut, collect_ra, &l), QP_BT_END);
    uint8_t *junk = malloc(self_dump.hdr.stack_len);
    srand(3);
    for (int iter = 0; iter < 200; iter++) {
        for (uint64_t k = 0; k < self_dump.hdr.stack_len; k++)
            junk[k] = (k % 8 < 4 || rand() % 2) ? self_dump.stack[k] : (uint8_t)rand();
        cut = self_dump;
        cut.stack = junk;
        l.n = 0;
        ck_assert_int_ge(qp_backtrace_walk(u, &cut, collect_ra, &l), 0);
    }
    free(junk);
    cut = self_dump;
    cut.hdr.pc = 0x10;
    ck_assert_int_eq(qp_backtrace_walk(u, &cut, collect_ra, &l), QP_BT_OUTSIDE);
    qp_desc_free(&d);
    qp_unwinder_destroy(u);
    free(self_dump.stack);
}
END_TEST

START_TEST(test_qp_backtrace_bad_files)
{
    qp_unwinder_t *u;
    char why[256];
    ck_assert_int_eq(qp_unwinder_create("/nonexistent/x", &u, why, sizeof(why)), QP_EIO);
    ck_assert_int_eq(qp_unwinder_create("/proc/self/maps", &u, why, sizeof(why)), QP_EFORMAT);
    ck_assert_int_eq(qp_unwinder_create(NULL, &u, why, sizeof(why)), QP_EINVAL);
    qp_unwinder_destroy(NULL);
}
END_TEST

/*****************************************************************************
 * Source lines, CSV
 */

static int line_marker(void) { return __LINE__; } /* keep on one line */

START_TEST(test_qp_image_line)
{
    cfg_image_t *img;
    ck_assert_int_eq(cfg_image_open_bfd("/proc/self/exe", &img), 0);
    uint64_t addr = (uint64_t)(uintptr_t)&line_marker - load_bias();
    const char *file, *file2;
    unsigned line;
    int rc = cfg_image_line(img, addr, &file, &line);
    if (rc == QP_ENOTFOUND) {
        /* Built without -g: nothing to check beyond the clean failure. */
        cfg_image_destroy(img);
        return;
    }
    ck_assert_int_eq(rc, 0);
    ck_assert_ptr_nonnull(strstr(file, "check_qp.c"));
    ck_assert_uint_eq(line, (unsigned)line_marker());
    /* Cached and interned: the same pointer the second time. */
    ck_assert_int_eq(cfg_image_line(img, addr, &file2, &line), 0);
    ck_assert_ptr_eq(file, file2);
    /* The declaration line, from DW_AT_decl_line: the same line here. */
    ck_assert_int_eq(cfg_image_func_line(img, "line_marker", addr, &file2, &line), 0);
    ck_assert_ptr_eq(file, file2);
    ck_assert_uint_eq(line, (unsigned)line_marker());
    ck_assert_int_eq(cfg_image_func_line(img, "no_such_function", addr, &file2, &line),
                     QP_ENOTFOUND);
    ck_assert_int_eq(cfg_image_line(img, 0, &file, &line), QP_ENOTFOUND);
    cfg_image_destroy(img);
    /* An image from bytes has no lines. */
    static const uint8_t ret = 0xc3;
    ck_assert_int_eq(cfg_image_from_bytes(&ret, 1, 0x1000, &img), 0);
    ck_assert_int_eq(cfg_image_line(img, 0x1000, &file, &line), QP_ENOTFOUND);
    cfg_image_destroy(img);
}
END_TEST

START_TEST(test_qp_csv_field)
{
    char buf[64];
    ck_assert_uint_eq(qp_csv_field("main", buf, sizeof(buf)), 4);
    ck_assert_str_eq(buf, "main");
    qp_csv_field("f(int, char)", buf, sizeof(buf));
    ck_assert_str_eq(buf, "\"f(int, char)\"");
    qp_csv_field("a\"b", buf, sizeof(buf));
    ck_assert_str_eq(buf, "\"a\"\"b\"");
    qp_csv_field("two\nlines", buf, sizeof(buf));
    ck_assert_str_eq(buf, "\"two\nlines\"");
    qp_csv_field("std::map<int, std::pair<int, int> >::find", buf, sizeof(buf));
    ck_assert_str_eq(buf, "\"std::map<int, std::pair<int, int> >::find\"");
    qp_csv_field("", buf, sizeof(buf));
    ck_assert_str_eq(buf, "");
    /* Like snprintf: the full length, a truncated NUL-terminated copy. */
    char small[5];
    ck_assert_uint_eq(qp_csv_field("a,bcdefg", small, sizeof(small)), 10);
    ck_assert_str_eq(small, "\"a,b");
    ck_assert_uint_eq(qp_csv_field("a,b", NULL, 0), 5);
}
END_TEST

/*****************************************************************************
 * The report
 */

START_TEST(test_qp_report_order)
{
    /* Three procedures: order by instructions, then calls, then name. */
    qp_desc_t d;
    diamond(&d, QP_DRIVER_QP);
    tg_measure_edge(&d, 0);
    tg_measure_edge(&d, 1);
    qp_desc_proc_t *p = realloc(d.procs, 3 * sizeof(*p));
    d.procs = p;
    uint32_t n1, n2;
    qp_desc_add_string(&d, "b_same", &n1);
    qp_desc_add_string(&d, "a_same", &n2);
    d.procs[1] = d.procs[0];
    d.procs[1].name = n1;
    d.procs[2] = d.procs[0];
    d.procs[2].name = n2;
    d.procs[2].flags = 0;
    d.hdr.nprocs = 3;
    qp_profile_t prof;
    make_profile(&prof, 1, d.hdr.ncounters, 0, 0);
    prof.counters[0] = 10;
    prof.counters[1] = 4;
    qp_report_t r;
    ck_assert_int_eq(qp_report_build(&d, &prof, NULL, &r), 0);
    ck_assert_uint_eq(r.nprocs, 2);
    ck_assert_uint_eq(r.nunmeasured, 1);
    ck_assert_uint_eq(r.unmeasured[0], 2);
    /* Same counts: by name, "b_same" (1) before "f" (0). */
    ck_assert_uint_eq(r.procs[0].proc, 1);
    ck_assert_uint_eq(r.procs[1].proc, 0);
    ck_assert_uint_eq(r.procs[0].calls, 10);
    ck_assert_uint_eq(r.total_insns, 2 * r.procs[0].insns);
    ck_assert_uint_eq(r.nviolating, 0);
    qp_report_free(&r);
    qp_profile_free(&prof);
    qp_desc_free(&d);
}
END_TEST

/*
 * Procedures counted by their calls (QP_PROC_BY_CALLS): A (counted itself) calls B at the
 * end of block 0 and tail-calls it from block 1; B calls C; D calls itself. Truth: A
 * called 5 times, its tail call taken twice: B and C are called 7 times. D's calls
 * cannot be ordered (it waits for itself): unknown, never guessed.
 */
static void
by_calls_desc(qp_desc_t *d)
{
    memset(d, 0, sizeof(*d));
    d->hdr.driver = QP_DRIVER_QP;
    d->procs = calloc(4, sizeof(qp_desc_proc_t));
    d->blocks = calloc(8, sizeof(qp_desc_block_t));
    d->edges = calloc(16, sizeof(qp_desc_edge_t));
    d->calls = calloc(4, sizeof(qp_desc_call_t));
    ck_assert(d->procs && d->blocks && d->edges && d->calls);
    const char *names[] = { "A", "B", "C", "D" };
    /* proc: first block, blocks, first edge, edges, entry */
    const uint32_t shape[4][4] = { { 0, 3, 0, 5 }, { 3, 2, 5, 3 }, { 5, 1, 8, 2 }, { 6, 2, 10, 3 } };
    for (uint32_t i = 0; i < 4; i++) {
        uint32_t name;
        ck_assert_int_eq(qp_desc_add_string(d, names[i], &name), 0);
        d->procs[i] = (qp_desc_proc_t) { .name = name,
            .flags = QP_PROC_MEASURED | (i > 0 ? QP_PROC_BY_CALLS : 0),
            .entry = 0x1000 * (i + 1), .block = shape[i][0], .nblocks = shape[i][1],
            .edge = shape[i][2], .nedges = shape[i][3] };
    }
    for (uint32_t b = 0; b < 8; b++)
        d->blocks[b] = (qp_desc_block_t) { .start = 0x1000 * (b < 3 ? 1 : b < 5 ? 2 : b < 6 ? 3 : 4) + 16 * b,
                                           .size = 4, .ninsns = 2, .counter = QP_NOCOUNTER };
    const qp_desc_edge_t edges[] = {
        { X, 0, 0, QP_EDGE_ENTRY, { 0 }, 0 },            /* A: 0, counted */
        { 0, 1, QP_NOCOUNTER, CFG_EDGE_CALLRET, { 0 }, 0 },
        { 1, X, QP_NOCOUNTER, CFG_EDGE_TAILCALL, { 0 }, 0 }, /* 2: tail call of B */
        { 1, 2, 1, CFG_EDGE_FALL, { 0 }, 0 },             /* 3: counted */
        { 2, X, QP_NOCOUNTER, CFG_EDGE_RETURN, { 0 }, 0 },
        { X, 3, QP_NOCOUNTER, QP_EDGE_ENTRY, { 0 }, 0 },   /* B: no counter at all */
        { 3, 4, QP_NOCOUNTER, CFG_EDGE_CALLRET, { 0 }, 0 },
        { 4, X, QP_NOCOUNTER, CFG_EDGE_RETURN, { 0 }, 0 },
        { X, 5, QP_NOCOUNTER, QP_EDGE_ENTRY, { 0 }, 0 },   /* C */
        { 5, X, QP_NOCOUNTER, CFG_EDGE_RETURN, { 0 }, 0 },
        { X, 6, QP_NOCOUNTER, QP_EDGE_ENTRY, { 0 }, 0 },   /* D */
        { 6, 7, QP_NOCOUNTER, CFG_EDGE_CALLRET, { 0 }, 0 },
        { 7, X, QP_NOCOUNTER, CFG_EDGE_RETURN, { 0 }, 0 },
    };
    memcpy(d->edges, edges, sizeof(edges));
    d->hdr.nprocs = 4;
    d->hdr.nblocks = 8;
    d->hdr.nedges = 13;
    d->hdr.ncounters = 2;
    d->calls[0] = (qp_desc_call_t) { .target = 0x2000, .block = 0, .edge = X, .kind = QP_CALL_DIRECT };
    d->calls[1] = (qp_desc_call_t) { .target = 0x2000, .block = 1, .edge = 2, .kind = QP_CALL_TAIL };
    d->calls[2] = (qp_desc_call_t) { .target = 0x3000, .block = 3, .edge = X, .kind = QP_CALL_DIRECT };
    d->calls[3] = (qp_desc_call_t) { .target = 0x4000, .block = 6, .edge = X, .kind = QP_CALL_DIRECT };
    d->hdr.ncalls = 4;
}

START_TEST(test_qp_flow_by_calls)
{
    qp_desc_t d;
    by_calls_desc(&d);
    /* The description format keeps the flag (version 4). */
    uint8_t *buf = NULL;
    size_t len = 0;
    ck_assert_int_eq(qp_desc_serialize(&d, &buf, &len), 0);
    qp_desc_t back;
    char why[200] = "";
    ck_assert_msg(qp_desc_parse(buf, len, &back, why, sizeof(why)) == 0, "%s", why);
    for (uint32_t i = 0; i < 4; i++)
        ck_assert_uint_eq(back.procs[i].flags, d.procs[i].flags);
    qp_desc_free(&back);
    free(buf);

    const uint64_t counters[] = { 5, 3 };
    qp_flow_entries_t en;
    ck_assert_int_eq(qp_flow_entries(&d, counters, 2, NULL, &en), 0);
    ck_assert(!en.known[0]);
    ck_assert(en.known[1] && en.count[1] == 7);
    ck_assert(en.known[2] && en.count[2] == 7);
    ck_assert(!en.known[3]);
    qp_flow_t f;
    ck_assert_int_eq(qp_flow_solve_in(&d, 1, counters, 2, NULL, &en, &f), 0);
    ck_assert(f.calls_known && f.calls == 7 && f.insns_exact && f.nviolations == 0);
    ck_assert_uint_eq(f.insns, 2 * 7 * 2);
    qp_flow_free(&f);
    /* Without the callers' counts: unknown. */
    ck_assert_int_eq(qp_flow_solve(&d, 2, counters, 2, NULL, &f), 0);
    ck_assert(!f.calls_known && !f.insns_exact);
    qp_flow_free(&f);
    qp_flow_entries_free(&en);

    /* The report solves the callers first. */
    qp_profile_t prof;
    make_profile(&prof, 1, 2, 0, 0);
    prof.counters[0] = 5;
    prof.counters[1] = 3;
    qp_report_t r;
    ck_assert_int_eq(qp_report_build(&d, &prof, NULL, &r), 0);
    /* Every key site calls a procedure counted by its calls: no count is kept for the
     * PLT stubs (qp_report_site_kept). */
    ck_assert_uint_eq(qp_desc_keys(&d)->n, 4);
    ck_assert_uint_eq(r.site_first[d.hdr.nprocs], 0);
    for (uint32_t k = 0; k < r.nprocs; k++) {
        const qp_proc_result_t *res = &r.procs[k];
        uint64_t want[] = { 5, 7, 7, 0 };
        if (res->proc == 3) {
            ck_assert(res->flags & QP_RES_UNKNOWN);
        } else {
            ck_assert_uint_eq(res->calls, want[res->proc]);
            ck_assert(!(res->flags & QP_RES_UNKNOWN));
        }
    }
    qp_report_free(&r);
    qp_profile_free(&prof);
    qp_desc_free(&d);
}
END_TEST

/*
 * The walk told which procedures have abandoned flow (LEFT: only A) reads the abandoned
 * counts of A's blocks alone, and so do the solves with its entries: those of B, C and D
 * lie in a page that cannot be read (chromium's 109 MB array, read whole, was all
 * resident: on this machine's kernel a fresh page read is). The counts are those of the
 * walk without abandoned flow. Fails on the old code (it read every block's count).
 */
START_TEST(test_qp_flow_entries_left_reads_its_blocks)
{
    qp_desc_t d;
    by_calls_desc(&d);
    const uint64_t counters[] = { 5, 3 };
    long page = sysconf(_SC_PAGESIZE);
    uint8_t *map = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert(map != MAP_FAILED);
    ck_assert_int_eq(mprotect(map + page, (size_t)page, PROT_NONE), 0);
    uint64_t *abandoned = (uint64_t *)(map + page) - 3; /* A's blocks 0 to 2 readable */
    const uint8_t left[] = { 1, 0, 0, 0 };
    qp_flow_entries_t en, plain;
    ck_assert_int_eq(qp_flow_entries_visit(&d, counters, 2, abandoned, left, NULL, NULL, &en),
                     0);
    ck_assert_int_eq(qp_flow_entries(&d, counters, 2, NULL, &plain), 0);
    for (uint32_t i = 0; i < 4; i++) {
        ck_assert_uint_eq(en.known[i], plain.known[i]);
        ck_assert_uint_eq(en.count[i], plain.count[i]);
        qp_flow_t f, g;
        ck_assert_int_eq(qp_flow_solve_in(&d, i, counters, 2, abandoned, &en, &f), 0);
        ck_assert_int_eq(qp_flow_solve_in(&d, i, counters, 2, NULL, &plain, &g), 0);
        ck_assert_uint_eq(f.calls, g.calls);
        ck_assert_uint_eq(f.insns, g.insns);
        ck_assert_uint_eq(f.nunknown_edges, g.nunknown_edges);
        qp_flow_free(&f);
        qp_flow_free(&g);
    }
    qp_flow_entries_free(&en);
    qp_flow_entries_free(&plain);
    munmap(map, 2 * (size_t)page);
    qp_desc_free(&d);
}
END_TEST

/*
 * A procedure whose inputs are all zero is solved once and its summary kept: the summary
 * must be what solving it again gives (B and C known to be 0, D's calls unknown), a
 * procedure that ran has none, and the report's results are those of fresh solutions.
 */
START_TEST(test_qp_flow_zero_summary)
{
    qp_desc_t d;
    by_calls_desc(&d);
    for (int ran = 0; ran < 2; ran++) {
        const uint64_t counters[] = { ran ? 5 : 0, ran ? 3 : 0 };
        qp_flow_entries_t en;
        ck_assert_int_eq(qp_flow_entries(&d, counters, 2, NULL, &en), 0);
        qp_flow_entries_t plain = en; /* the same counts without the cache */
        plain.zero = NULL;
        for (uint32_t p = 0; p < 4; p++) {
            qp_flow_t f, again;
            qp_flow_zero_t z;
            ck_assert_int_eq(qp_flow_solve_in(&d, p, counters, 2, NULL, &plain, &f), 0);
            ck_assert(!qp_flow_zero_known(&d, p, counters, NULL, &plain, &z));
            ck_assert_int_eq(qp_flow_solve_in(&d, p, counters, 2, NULL, &en, &again), 0);
            qp_flow_free(&again);
            int zero = !ran || p == 3; /* D's inputs are zero in both runs */
            ck_assert_int_eq(qp_flow_zero_known(&d, p, counters, NULL, &en, &z), zero);
            if (zero) {
                ck_assert_uint_eq(z.calls_known, f.calls_known);
                ck_assert_uint_eq(z.insns_exact, f.insns_exact);
                ck_assert_uint_eq(z.nunknown_edges, f.nunknown_edges);
                ck_assert_uint_eq(z.all_known, p != 3);
                ck_assert(f.calls == 0 && f.insns == 0 && f.nviolations == 0);
            }
            qp_flow_free(&f);
        }
        /* The report (which uses the summaries) gives what fresh solutions give. */
        qp_profile_t prof;
        make_profile(&prof, 1, 2, 0, 0);
        prof.counters[0] = counters[0];
        prof.counters[1] = counters[1];
        qp_report_t r;
        ck_assert_int_eq(qp_report_build(&d, &prof, NULL, &r), 0);
        for (uint32_t k = 0; k < r.nprocs; k++) {
            const qp_proc_result_t *res = &r.procs[k];
            qp_flow_t f;
            ck_assert_int_eq(
                qp_flow_solve_in(&d, res->proc, counters, 2, NULL, &plain, &f), 0);
            ck_assert_uint_eq(res->calls, f.calls);
            ck_assert_uint_eq(res->calls_known, f.calls_known);
            ck_assert_uint_eq(res->insns, f.insns);
            ck_assert_uint_eq(res->insns_exact, f.insns_exact);
            ck_assert_uint_eq(res->nunknown_edges, f.nunknown_edges);
            ck_assert_uint_eq(res->nviolations, f.nviolations);
            qp_flow_free(&f);
        }
        qp_report_free(&r);
        qp_profile_free(&prof);
        qp_flow_entries_free(&en);
    }
    qp_desc_free(&d);
}
END_TEST

/* A report of procedure "f" (a diamond) entered CALLS times, LEFT of them to the left. */
static void
one_proc_report(qp_desc_t *d, qp_profile_t *prof, qp_report_t *r, uint64_t calls,
                uint64_t left)
{
    diamond(d, QP_DRIVER_QP);
    tg_measure_edge(d, 0);
    tg_measure_edge(d, 1);
    make_profile(prof, 1, d->hdr.ncounters, 0, 0);
    prof->counters[0] = calls;
    prof->counters[1] = left;
    ck_assert_int_eq(qp_report_build(d, prof, NULL, r), 0);
}

START_TEST(test_qp_process_order)
{
    /* Three modules of one procedure "f" each: the rows by instructions across the
     * modules (equal rows by module), the modules by instructions, the totals summed. */
    qp_desc_t d[3];
    qp_profile_t prof[3];
    qp_report_t r[3];
    one_proc_report(&d[0], &prof[0], &r[0], 10, 4);
    one_proc_report(&d[1], &prof[1], &r[1], 30, 4);
    one_proc_report(&d[2], &prof[2], &r[2], 10, 4);
    const qp_report_t *reps[3] = { &r[0], &r[1], &r[2] };
    qp_process_t p;
    ck_assert_int_eq(qp_process_build(reps, 3, &p), 0);
    ck_assert_uint_eq(p.nrows, 3);
    ck_assert_uint_eq(p.rows[0].module, 1);
    ck_assert_uint_eq(p.rows[1].module, 0);
    ck_assert_uint_eq(p.rows[2].module, 2);
    ck_assert_ptr_eq(p.rows[0].res, &r[1].procs[0]);
    ck_assert_uint_eq(p.by_insns[0], 1);
    ck_assert_uint_eq(p.by_insns[1], 0);
    ck_assert_uint_eq(p.by_insns[2], 2);
    ck_assert_uint_eq(p.total_insns, r[0].total_insns + r[1].total_insns + r[2].total_insns);
    ck_assert_uint_eq(p.nunmeasured, 0);
    qp_process_free(&p);
    ck_assert_ptr_null(p.rows);
    ck_assert_int_eq(qp_process_build(NULL, 3, &p), QP_EINVAL);
    for (int i = 0; i < 3; i++) {
        qp_report_free(&r[i]);
        qp_profile_free(&prof[i]);
        qp_desc_free(&d[i]);
    }
}
END_TEST

/*****************************************************************************
 * PLT stubs counted from their callers
 */

/*
 * A PLT at 0x2000 as ld writes it: PLT0, two lazy entries (jmp *GOT; push; jmp PLT0) and
 * a .plt.sec entry (endbr64; bnd jmp *GOT).
 */
static const uint8_t plt_bytes[] = {
    0xff, 0x35, 0xe2, 0x0f, 0x00, 0x00, 0xff, 0x25, 0xe4, 0x0f, 0x00, 0x00, 0x0f, 0x1f, 0x40, 0x00,
    0xff, 0x25, 0xe2, 0x0f, 0x00, 0x00, 0x68, 0x00, 0x00, 0x00, 0x00, 0xe9, 0xe0, 0xff, 0xff, 0xff,
    0xff, 0x25, 0xda, 0x0f, 0x00, 0x00, 0x68, 0x01, 0x00, 0x00, 0x00, 0xe9, 0xd0, 0xff, 0xff, 0xff,
    0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0xd5, 0x0f, 0x00, 0x00, 0x0f, 0x1f, 0x44, 0x00, 0x00,
};

/*
 * The diamond "f" entered 10 times (7 to the left), with call sites: block 1 (7 runs) and
 * block 2 (3 runs) call puts@plt (0x2010), block 3 (10 runs) calls an unnamed stub
 * (0x2020), the .plt.sec stub abs@plt (0x2030), and f itself (0x1000, described: no
 * stub).
 */
static void
plt_report(qp_desc_t *d, qp_profile_t *prof, qp_report_t *r)
{
    diamond(d, QP_DRIVER_QP);
    tg_measure_edge(d, 0);
    tg_measure_edge(d, 1);
    uint32_t puts_name, abs_name;
    ck_assert_int_eq(qp_desc_add_string(d, "puts@plt", &puts_name), 0);
    ck_assert_int_eq(qp_desc_add_string(d, "abs@plt", &abs_name), 0);
    d->calls = calloc(5, sizeof(qp_desc_call_t));
    ck_assert_ptr_nonnull(d->calls);
    d->calls[0] = (qp_desc_call_t) { .target = 0x2010, .block = 1, .edge = QP_VIRT,
                                     .name = puts_name, .kind = QP_CALL_DIRECT };
    d->calls[1] = (qp_desc_call_t) { .target = 0x2010, .block = 2, .edge = QP_VIRT,
                                     .kind = QP_CALL_DIRECT };
    d->calls[2] = (qp_desc_call_t) { .target = 0x2020, .block = 3, .edge = QP_VIRT,
                                     .kind = QP_CALL_DIRECT };
    d->calls[3] = (qp_desc_call_t) { .target = 0x2030, .block = 3, .edge = QP_VIRT,
                                     .name = abs_name, .kind = QP_CALL_DIRECT };
    d->calls[4] = (qp_desc_call_t) { .target = 0x1000, .block = 3, .edge = QP_VIRT,
                                     .kind = QP_CALL_DIRECT };
    d->hdr.ncalls = 5;
    make_profile(prof, 1, d->hdr.ncounters, 0, 0);
    prof->counters[0] = 10;
    prof->counters[1] = 7;
    ck_assert_int_eq(qp_report_build(d, prof, NULL, r), 0);
}

START_TEST(test_qp_report_plt)
{
    qp_desc_t d;
    qp_profile_t prof;
    qp_report_t r;
    plt_report(&d, &prof, &r);
    cfg_image_t *img;
    ck_assert_int_eq(cfg_image_from_bytes(plt_bytes, sizeof(plt_bytes), 0x2000, &img), 0);
    /* The counts of the sites that call no measured procedure are kept: f's 4 (its call
     * of itself is no key site). */
    ck_assert_uint_eq(r.site_first[0], 0);
    ck_assert_uint_eq(r.site_first[d.hdr.nprocs], 4);
    /* Code in .text is no PLT. */
    ck_assert_int_eq(qp_report_count_plt(&r, img), 0);
    ck_assert_uint_eq(r.nplt, 0);
    ck_assert_uint_eq(r.plt_insns, 0);
    img->sections[0].name = ".plt";
    for (int again = 0; again < 2; again++) {
        ck_assert_int_eq(qp_report_count_plt(&r, img), 0);
        ck_assert_uint_eq(r.nplt, 3);
        ck_assert_uint_eq(r.plt_lazy, 0); /* no dynamic section */
        const qp_proc_result_t *s = qp_report_plt_at(&r, 0x2010);
        ck_assert_ptr_nonnull(s);
        ck_assert_str_eq(qp_report_stub(&r, s)->name, "puts@plt");
        ck_assert_uint_eq(qp_report_stub(&r, s)->entry, 0x2010);
        ck_assert_ptr_eq(s, &r.plt[s->stub]);
        ck_assert_uint_eq(s->proc, QP_VIRT);
        ck_assert_uint_eq(s->calls, 10); /* 7 + 3: both sites */
        ck_assert_uint_eq(qp_report_stub(&r, s)->per_call, 1);
        ck_assert_uint_eq(s->insns, 10);
        ck_assert_uint_eq(s->flags, QP_RES_PLT);
        ck_assert(s->calls_known && s->insns_exact);
        s = qp_report_plt_at(&r, 0x2020);
        ck_assert_ptr_nonnull(s);
        ck_assert_str_eq(qp_report_stub(&r, s)->name, "sub_2020");
        ck_assert_uint_eq(s->calls, 10);
        s = qp_report_plt_at(&r, 0x2030);
        ck_assert_ptr_nonnull(s);
        ck_assert_str_eq(qp_report_stub(&r, s)->name, "abs@plt");
        ck_assert_uint_eq(qp_report_stub(&r, s)->per_call, 2); /* endbr64; bnd jmp */
        ck_assert_uint_eq(s->insns, 20);
        ck_assert_ptr_null(qp_report_plt_at(&r, 0x1000));
        ck_assert_uint_eq(r.plt_insns, 40);
        ck_assert_uint_eq(qp_report_insns(&r), r.total_insns + 40);
        /* Flat order: f (73), abs@plt (20), then puts@plt before sub_2020 by name. */
        ck_assert_uint_eq(r.total_insns, 73);
        ck_assert_ptr_eq(qp_report_row(&r, 0), &r.procs[0]);
        ck_assert_ptr_null(qp_report_stub(&r, &r.procs[0]));
        ck_assert_str_eq(qp_report_name(&r, qp_report_row(&r, 1)), "abs@plt");
        ck_assert_str_eq(qp_report_name(&r, qp_report_row(&r, 2)), "puts@plt");
        ck_assert_str_eq(qp_report_name(&r, qp_report_row(&r, 3)), "sub_2020");
    }
    /* A process: the stubs are rows, their instructions in the total. */
    qp_desc_t d2;
    qp_profile_t prof2;
    qp_report_t r2;
    one_proc_report(&d2, &prof2, &r2, 30, 4);
    const qp_report_t *reps[2] = { &r, &r2 };
    qp_process_t p;
    ck_assert_int_eq(qp_process_build(reps, 2, &p), 0);
    ck_assert_uint_eq(p.nrows, 5);
    ck_assert_uint_eq(p.nplt, 3);
    ck_assert_uint_eq(p.total_insns, r.total_insns + 40 + r2.total_insns);
    ck_assert_uint_eq(p.by_insns[0], 1); /* 30 calls of f beat 10 and the stubs */
    ck_assert_ptr_eq(p.rows[2].res, qp_report_plt_at(&r, 0x2030));
    qp_process_free(&p);
    ck_assert_int_eq(qp_report_count_plt(&r, NULL), QP_EINVAL);
    ck_assert_int_eq(qp_report_count_plt(NULL, img), QP_EINVAL);
    cfg_image_destroy(img);
    qp_report_free(&r);
    ck_assert_ptr_null(r.plt);
    qp_report_free(&r2);
    qp_profile_free(&prof);
    qp_profile_free(&prof2);
    qp_desc_free(&d);
    qp_desc_free(&d2);
}
END_TEST

/*****************************************************************************
 * --weights: report/ reads the edge counts, the driver takes them
 */

START_TEST(test_qp_edge_counts_bad_files)
{
    make_tmpdir();
    qp_profile_t p;
    make_profile(&p, 0x99, 600, 1, 1);
    ck_assert_int_eq(qp_profile_write(tmp_path("w.qp"), &p, NULL, 0), 0);
    qp_edge_count_t *v = (qp_edge_count_t *)1;
    size_t n = 7;
    char why[512];
    ck_assert_int_eq(
        qp_edge_counts_read(tmp_path("missing.qp"), &v, &n, why, sizeof(why)), QP_EIO);
    ck_assert_ptr_null(v);
    ck_assert_uint_eq(n, 0);
    /* The program that wrote it is gone: the line names the profile and the program. */
    ck_assert_int_lt(qp_edge_counts_read(tmp_path("w.qp"), &v, &n, why, sizeof(why)), 0);
    ck_assert_msg(strstr(why, tmp_path("w.qp")) && strstr(why, "cannot read the program"),
        "%s", why);
    ck_assert_ptr_null(v);
    ck_assert_int_eq(qp_edge_counts_read(NULL, &v, &n, why, sizeof(why)), QP_EINVAL);
    qp_profile_free(&p);
}
END_TEST

/* drv_carve: every array zeroed, 8-aligned, of its size and apart from the others
 * (the graphs' per-block arrays of different element sizes, an empty one among them). */
START_TEST(test_drv_carve)
{
    uint64_t *a;
    uint32_t *b;
    uint8_t *c, *e;
    double *d;
    void **parts[] = { (void **)&a, (void **)&c, (void **)&b, (void **)&e, (void **)&d };
    const size_t sizes[] = { 3 * sizeof(uint64_t), 5, 7 * sizeof(uint32_t), 0,
                             2 * sizeof(double) };
    uint8_t *all = drv_carve(parts, sizes, 5);
    ck_assert_ptr_nonnull(all);
    ck_assert_ptr_eq(a, all);
    uint8_t *p[] = { (uint8_t *)a, c, (uint8_t *)b, e, (uint8_t *)d };
    for (int k = 0; k < 5; k++) {
        ck_assert_uint_eq((uintptr_t)p[k] % 8, 0);
        for (size_t i = 0; i < sizes[k]; i++)
            ck_assert_uint_eq(p[k][i], 0);
        if (k > 0) /* after the one before, in order */
            ck_assert(p[k] >= p[k - 1] + sizes[k - 1]);
    }
    memset(a, 0xff, sizes[0]);
    memset(c, 0xff, sizes[1]);
    memset(b, 0xff, sizes[2]);
    memset(d, 0xff, sizes[4]); /* (valgrind: within the allocation) */
    ck_assert_uint_eq(c[0], 0xff);
    free(all);
}
END_TEST

START_TEST(test_drv_weights_add_get)
{
    drv_weights_t w = { 0 };
    /* Out of order, more than the first allocation. */
    for (uint64_t i = 3000; i > 0; i--)
        ck_assert_int_eq(drv_weights_add(&w, 0x1000 + i, 0x2000 + i, i * 10, 1), 0);
    ck_assert_int_eq(drv_weights_add(&w, 0, 0x1001, 77, QP_EDGE_ENTRY), 0);
    ck_assert_int_eq(drv_weights_add(NULL, 0, 0, 0, 0), QP_EINVAL);
    drv_weights_sort(&w);
    ck_assert_uint_eq(w.n, 3001);
    ck_assert_int_eq(drv_weights_get(&w, 0x1001, 0x2001, 1), 10);
    ck_assert_int_eq(drv_weights_get(&w, 0x1000 + 3000, 0x2000 + 3000, 1), 30000);
    ck_assert_int_eq(drv_weights_get(&w, 0, 0x1001, QP_EDGE_ENTRY), 77);
    ck_assert_int_eq(drv_weights_get(&w, 0x1001, 0x2001, 2), -1); /* another kind */
    ck_assert_int_eq(drv_weights_get(&w, 0x1001, 0x2002, 1), -1);
    drv_weights_free(&w);
    ck_assert_ptr_null(w.v);
    ck_assert_uint_eq(w.n, 0);
}
END_TEST

/* drv_entered finds what cfg_proc_entered_at finds, at every procedure's entry, every
 * block's start and the byte after, every edge's target, and 0: this test's own code. */
START_TEST(test_drv_entries)
{
    cfg_image_t *img;
    cfg_prog_t *prog;
    ck_assert_int_eq(cfg_image_open_bfd("/proc/self/exe", &img), 0);
    ck_assert_int_eq(cfg_prog_build(img, NULL, &prog), 0);
    drv_entries_t m;
    ck_assert_int_eq(drv_entries_build(prog, &m), 0);
    size_t n = 0, found = 0;
    uint64_t *a = malloc((2 * (size_t)prog->nblocks + prog->nprocs + prog->nedges + 1)
                         * sizeof(uint64_t));
    ck_assert_ptr_nonnull(a);
    a[n++] = 0;
    for (uint32_t i = 0; i < prog->nprocs; i++)
        a[n++] = prog->procs[i].entry;
    for (uint32_t i = 0; i < prog->nblocks; i++) {
        a[n++] = prog->blocks[i].start;
        a[n++] = prog->blocks[i].start + 1;
    }
    for (uint32_t i = 0; i < prog->nedges; i++)
        a[n++] = prog->edges[i].target;
    for (size_t k = 0; k < n; k++) {
        const cfg_proc_t *p = cfg_proc_entered_at(prog, a[k]);
        uint32_t want = p != NULL ? (uint32_t)(p - prog->procs) : CFG_NONE;
        ck_assert_msg(drv_entered(&m, a[k]) == want, "0x%llx: %u, not %u",
                      (unsigned long long)a[k], drv_entered(&m, a[k]), want);
        found += want != CFG_NONE;
    }
    ck_assert_uint_gt(found, prog->nprocs / 2);
    free(a);
    drv_entries_free(&m);
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
}
END_TEST

/*
 * The names of fork-like and thread-starting functions (drv_is_fork_name,
 * drv_is_thread_name): a whole name or, for threads, a prefix, up to an "@"; most names
 * are ruled out by their first two characters before any length is measured, never one
 * of these (one- and two-character names, a prefix's own first characters, an "@" early).
 */
START_TEST(test_qp_drv_names)
{
    static const struct {
        const char *name;
        int fork, thread;
    } c[] = {
        { "fork", 1, 0 }, { "fork@plt", 1, 0 }, { "fork@@GLIBC_2.2.5", 1, 0 },
        { "forks", 0, 0 }, { "for", 0, 0 }, { "f", 0, 0 }, { "", 0, 0 }, { "@plt", 0, 0 },
        { "_Fork", 1, 0 }, { "_Forkx", 0, 0 }, { "_F", 0, 0 }, { "_", 0, 0 },
        { "__libc_fork@GLIBC_PRIVATE", 1, 0 }, { "syscall", 1, 0 }, { "daemon", 1, 0 },
        { "pthread_create@GLIBC_2.34", 0, 1 }, { "pthread_create2", 0, 0 },
        { "__clone3", 0, 1 }, { "__clone", 0, 1 }, { "__clone4", 0, 0 }, { "__", 0, 0 },
        { "GOMP_parallel_start", 0, 1 }, { "GOMP_parallel", 0, 1 }, { "GOMP_paralle", 0, 0 },
        { "G", 0, 0 }, { "GO@plt", 0, 0 },
        { "_ZNSt6thread15_M_start_threadESt10unique_ptrINS_6_StateESt14default_deleteIS1_EEPFvvE",
          0, 1 },
        { "_ZNSt6thread@plt", 0, 1 }, { "_ZNSt6threa", 0, 0 }, { "_ZNSt6threa@plt", 0, 0 },
        { "g_thread_new", 0, 1 }, { "g_thread_ne", 0, 0 }, { "__kmpc_fork_call", 0, 1 },
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        ck_assert_msg(drv_is_fork_name(c[i].name) == c[i].fork, "fork: %s", c[i].name);
        ck_assert_msg(drv_is_thread_name(c[i].name) == c[i].thread, "thread: %s", c[i].name);
    }
    ck_assert(!drv_is_fork_name(NULL) && !drv_is_thread_name(NULL));
}
END_TEST

static Suite *
qp_suite(void)
{
    Suite *s = suite_create("qp");
    TCase *tc = tcase_create("desc");
    tcase_add_test(tc, test_qp_desc_round_trip);
    tcase_add_test(tc, test_qp_desc_strings);
    tcase_add_loop_test(tc, test_qp_desc_truncated_at_every_length, QP_FORMAT_V8, QP_FORMAT_V9 + 1);
    tcase_add_loop_test(tc, test_qp_desc_every_byte_changed, QP_FORMAT_V8, QP_FORMAT_V9 + 1);
    tcase_add_test(tc, test_qp_desc_header_counts_bounded);
    tcase_add_test(tc, test_qp_desc_validation_rules);
    tcase_add_test(tc, test_qp_desc_random_rehashed_garbage);
    tcase_add_test(tc, test_qp_desc_versions_and_sizes);
    tcase_add_test(tc, test_qp_desc_formats_5_to_9);
    tcase_add_test(tc, test_qp_desc_threads_same_bytes);
    tcase_add_loop_test(tc, test_qp_desc_index_parts, QP_FORMAT_V8, QP_FORMAT_V9 + 1);
    tcase_add_loop_test(tc, test_qp_desc_index_parts_checked, QP_FORMAT_V8, QP_FORMAT_V9 + 1);
    tcase_add_test(tc, test_qp_desc_parts_table_costs_nothing);
    tcase_add_test(tc, test_qp_desc_reads_version_7_file);
    tcase_add_test(tc, test_drv_entries);
    tcase_add_test(tc, test_qp_desc_lazy);
    tcase_add_test(tc, test_qp_zero_summaries_threads);
    tcase_add_test(tc, test_qp_desc_lazy_later);
    tcase_add_test(tc, test_qp_desc_entry_map);
    tcase_add_test(tc, test_qp_desc_extreme_values);
    tcase_add_test(tc, test_qp_desc_callee_names);
    tcase_add_test(tc, test_qp_desc_bad_args);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);

    tc = tcase_create("flow");
    tcase_add_test(tc, test_qp_flow_loop_qp_counters);
    tcase_add_test(tc, test_qp_flow_calls_are_entry_edge);
    tcase_add_test(tc, test_qp_flow_diamond);
    tcase_add_test(tc, test_qp_flow_naive_blocks);
    tcase_add_test(tc, test_qp_flow_naive_leaves_unknown);
    tcase_add_test(tc, test_qp_flow_abandoned_at_exit);
    tcase_add_test(tc, test_qp_flow_violation_unbalanced);
    tcase_add_test(tc, test_qp_flow_violation_negative);
    tcase_add_test(tc, test_qp_flow_huge_counts);
    tcase_add_test(tc, test_qp_flow_bad_args);
    tcase_add_loop_test(tc, test_qp_flow_random_vs_truth, 0, 300);
    suite_add_tcase(s, tc);

    tc = tcase_create("profile");
    tcase_add_test(tc, test_qp_profile_write_read);
    tcase_add_test(tc, test_qp_profile_bad_files);
    tcase_add_test(tc, test_qp_profile_check);
    tcase_add_test(tc, test_qp_profile_merge);
    tcase_add_test(tc, test_qp_profile_slots);
    tcase_add_test(tc, test_qp_profile_slots_saturate);
    tcase_add_test(tc, test_qp_profile_open_fill);
    suite_add_tcase(s, tc);

    tc = tcase_create("backtrace");
    tcase_add_test(tc, test_qp_backtrace_self);
    tcase_add_test(tc, test_qp_backtrace_bad_files);
    suite_add_tcase(s, tc);

    tc = tcase_create("weights");
    tcase_add_test(tc, test_qp_edge_counts_bad_files);
    tcase_add_test(tc, test_drv_weights_add_get);
    tcase_add_test(tc, test_drv_carve);
    suite_add_tcase(s, tc);

    tc = tcase_create("report");
    tcase_add_test(tc, test_qp_image_line);
    tcase_add_test(tc, test_qp_csv_field);
    tcase_add_test(tc, test_qp_report_order);
    tcase_add_test(tc, test_qp_flow_by_calls);
    tcase_add_test(tc, test_qp_flow_entries_left_reads_its_blocks);
    tcase_add_test(tc, test_qp_flow_zero_summary);
    tcase_add_test(tc, test_qp_process_order);
    tcase_add_test(tc, test_qp_report_plt);
    tcase_add_test(tc, test_qp_drv_names);
    suite_add_tcase(s, tc);
    return s;
}

/*
 * BFD 2.40 does not free the .debug_rnglists it reads for line lookups (fixed in 2.41):
 * not ours, so LeakSanitizer is told (this hook is unused without sanitizers).
 */
const char *__lsan_default_suppressions(void);
const char *
__lsan_default_suppressions(void)
{
    return "leak:libbfd\n";
}

const char *__lsan_default_options(void);
const char *
__lsan_default_options(void)
{
    return "print_suppressions=0";
}

int
main(void)
{
    SRunner *sr = srunner_create(qp_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
