/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * PURPOSE: qp report --pprof: the profile as pprof reads it (profile.proto of
 * github.com/google/pprof, gzip-compressed). Every block that ran is a sample of one
 * location (its original address and source line) with two values: the instructions it
 * executed and how many times it ran. Functions carry their demangled and stored names,
 * source file and first line; the mapping the program's path and build-id. A PLT stub
 * counted from its callers (qp_report_count_plt) is one more sample, at its entry, of a
 * function named as the stub. No stacks: a
 * qp profile counts, it does not sample call paths (pprof's "cum" equals "flat").
 * The protobuf encoding is written here (varints and length-delimited fields); zlib does
 * the gzip (Debian's zlib1g-dev).
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "report/qp_flow.h"
#include "tools/qp_tool.h"

/*****************************************************************************
 * A growing byte buffer and the protobuf wire format
 */

typedef struct pbuf {
    uint8_t *b;
    size_t n, cap;
    int oom;
} pbuf_t;

static void
put(pbuf_t *p, const void *src, size_t n)
{
    if (p->oom)
        return;
    if (p->n + n > p->cap) {
        size_t cap = p->cap ? p->cap : 4096;
        while (cap < p->n + n)
            cap *= 2;
        uint8_t *v = realloc(p->b, cap);
        if (v == NULL) {
            p->oom = 1;
            return;
        }
        p->b = v;
        p->cap = cap;
    }
    memcpy(p->b + p->n, src, n);
    p->n += n;
}

static void
varint(pbuf_t *p, uint64_t v)
{
    uint8_t b[10];
    size_t n = 0;
    do {
        b[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    put(p, b, n);
}

/* Field FIELD as a varint (wire type 0); zero values are left out, as proto3 does. */
static void
f_int(pbuf_t *p, unsigned field, uint64_t v)
{
    if (v == 0)
        return;
    varint(p, (uint64_t)field << 3);
    varint(p, v);
}

/* Field FIELD holding the bytes of SUB (wire type 2). */
static void
f_bytes(pbuf_t *p, unsigned field, const void *b, size_t n)
{
    varint(p, (uint64_t)field << 3 | 2);
    varint(p, n);
    put(p, b, n);
}

static void
f_msg(pbuf_t *p, unsigned field, pbuf_t *sub)
{
    if (sub->oom)
        p->oom = 1;
    f_bytes(p, field, sub->b, sub->n);
    sub->n = 0;
}

/*****************************************************************************
 * The string table: index 0 is "", one index per distinct string
 */

typedef struct strtab {
    const char **v;  /* by index */
    uint32_t n, cap;
    uint32_t *slot;  /* hash: index + 1, 0 empty */
    uint32_t nslot;
    int oom;
} strtab_t;

static uint64_t
hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static uint32_t
intern(strtab_t *t, const char *s)
{
    if (t->oom)
        return 0;
    if (2 * (t->n + 1) > t->nslot) {
        uint32_t ns = t->nslot ? 2 * t->nslot : 1024;
        uint32_t *sl = calloc(ns, sizeof(uint32_t));
        if (sl == NULL) {
            t->oom = 1;
            return 0;
        }
        for (uint32_t i = 0; i < t->n; i++) {
            uint32_t k = (uint32_t)(hash(t->v[i]) & (ns - 1));
            while (sl[k])
                k = (k + 1) & (ns - 1);
            sl[k] = i + 1;
        }
        free(t->slot);
        t->slot = sl;
        t->nslot = ns;
    }
    uint32_t k = (uint32_t)(hash(s) & (t->nslot - 1));
    for (; t->slot[k]; k = (k + 1) & (t->nslot - 1))
        if (strcmp(t->v[t->slot[k] - 1], s) == 0)
            return t->slot[k] - 1;
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? 2 * t->cap : 1024;
        const char **v = realloc(t->v, cap * sizeof(*v));
        if (v == NULL) {
            t->oom = 1;
            return 0;
        }
        t->v = v;
        t->cap = cap;
    }
    t->v[t->n] = s;
    t->slot[k] = ++t->n;
    return t->n - 1;
}

/*****************************************************************************
 * The profile
 */

/* profile.proto field numbers. */
enum {
    P_SAMPLE_TYPE = 1, P_SAMPLE = 2, P_MAPPING = 3, P_LOCATION = 4, P_FUNCTION = 5,
    P_STRING_TABLE = 6, P_COMMENT = 13, P_DEFAULT_SAMPLE_TYPE = 14,
};

static void
value_type(pbuf_t *p, pbuf_t *tmp, strtab_t *st, const char *type, const char *unit)
{
    f_int(tmp, 1, intern(st, type));
    f_int(tmp, 2, intern(st, unit));
    f_msg(p, P_SAMPLE_TYPE, tmp);
}

/* gzip P's bytes to F. 0 or -1. */
static int
write_gzip(FILE *f, const pbuf_t *p)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    uint8_t out[65536];
    z.next_in = p->b;
    z.avail_in = (uInt)p->n;
    int rc;
    do {
        z.next_out = out;
        z.avail_out = sizeof(out);
        rc = deflate(&z, Z_FINISH);
        if (rc == Z_STREAM_ERROR || fwrite(out, 1, sizeof(out) - z.avail_out, f)
                                        != sizeof(out) - z.avail_out) {
            deflateEnd(&z);
            return -1;
        }
    } while (rc != Z_STREAM_END);
    deflateEnd(&z);
    return 0;
}

int
qp_print_pprof(FILE *f, const qp_inputs_t *in)
{
    const qp_desc_t *d = in->desc;
    pbuf_t prof = { 0 }, tmp = { 0 }, line = { 0 };
    strtab_t st = { 0 };
    intern(&st, "");
    value_type(&prof, &tmp, &st, "instructions", "count");
    value_type(&prof, &tmp, &st, "executions", "count");

    /* The mapping: the program's code, its path and build-id. */
    const cfg_image_t *img = in->original != NULL ? in->original : in->img;
    char bid[2 * sizeof(img->build_id) + 1] = "";
    for (size_t i = 0; i < img->build_id_len; i++)
        snprintf(bid + 2 * i, 3, "%02x", img->build_id[i]);
    uint64_t lo = UINT64_MAX, hi = 0;
    for (uint32_t b = 0; b < d->hdr.nblocks; b++) {
        if (d->blocks[b].start < lo)
            lo = d->blocks[b].start;
        if (d->blocks[b].start + d->blocks[b].size > hi)
            hi = d->blocks[b].start + d->blocks[b].size;
    }
    for (uint32_t i = 0; i < in->rep->nplt; i++) {
        uint64_t e = in->rep->plt[i].entry;
        lo = e < lo ? e : lo;
        hi = e + 1 > hi ? e + 1 : hi;
    }
    f_int(&tmp, 1, 1);
    f_int(&tmp, 2, lo == UINT64_MAX ? 0 : lo);
    f_int(&tmp, 3, hi);
    f_int(&tmp, 5, intern(&st, img->path));
    f_int(&tmp, 6, intern(&st, bid));
    f_int(&tmp, 7, 1);
    f_int(&tmp, 8, 1);
    f_int(&tmp, 9, 1);
    f_msg(&prof, P_MAPPING, &tmp);

    /* Functions (id = procedure index + 1), then a location and a sample per block that
     * ran (location id = block index + 1). */
    uint64_t nloc = 0;
    for (uint32_t p = 0; p < d->hdr.nprocs; p++) {
        const qp_desc_proc_t *pr = &d->procs[p];
        const char *file = NULL;
        unsigned fline = 0;
        if (cfg_image_line(in->img, pr->entry, &file, &fline) != 0)
            file = NULL;
        f_int(&tmp, 1, p + 1);
        f_int(&tmp, 2, intern(&st, qp_proc_name(in, p)));
        f_int(&tmp, 3, intern(&st, qp_desc_str(d, pr->name)));
        f_int(&tmp, 4, file != NULL ? intern(&st, file) : 0);
        f_int(&tmp, 5, fline);
        f_msg(&prof, P_FUNCTION, &tmp);
        if (!(pr->flags & QP_PROC_MEASURED))
            continue;
        qp_flow_t fl;
        if (qp_report_flow(in->rep, p, &fl) < 0) {
            prof.oom = 1;
            break;
        }
        for (uint32_t b = 0; b < pr->nblocks; b++) {
            const qp_desc_block_t *blk = &d->blocks[pr->block + b];
            if (fl.block_count[b] == 0)
                continue;
            const char *bf;
            unsigned bl = 0;
            if (cfg_image_line(in->img, blk->start, &bf, &bl) != 0)
                bl = 0;
            f_int(&line, 1, p + 1);
            f_int(&line, 2, bl);
            f_int(&tmp, 1, pr->block + b + 1);
            f_int(&tmp, 2, 1);
            f_int(&tmp, 3, blk->start);
            f_msg(&tmp, 4, &line);
            f_msg(&prof, P_LOCATION, &tmp);
            nloc++;
            f_int(&tmp, 1, pr->block + b + 1);
            pbuf_t vals = { 0 };
            varint(&vals, fl.block_count[b] * blk->ninsns);
            varint(&vals, fl.block_count[b]);
            if (vals.oom)
                tmp.oom = 1;
            f_bytes(&tmp, 2, vals.b, vals.n); /* packed repeated int64 */
            free(vals.b);
            f_msg(&prof, P_SAMPLE, &tmp);
        }
        qp_flow_free(&fl);
    }
    /* PLT stubs counted from their callers: a function (id after the procedures') and a
     * location at the entry (id after the blocks') each, one sample: the instructions
     * and the calls. */
    for (uint32_t i = 0; i < in->rep->nplt && !prof.oom; i++) {
        const qp_proc_result_t *s = &in->rep->plt[i];
        uint64_t fid = (uint64_t)d->hdr.nprocs + i + 1;
        uint64_t lid = (uint64_t)d->hdr.nblocks + i + 1;
        f_int(&tmp, 1, fid);
        f_int(&tmp, 2, intern(&st, qp_row_name(in, s)));
        f_int(&tmp, 3, intern(&st, s->name));
        f_msg(&prof, P_FUNCTION, &tmp);
        if (s->calls == 0)
            continue;
        f_int(&line, 1, fid);
        f_int(&tmp, 1, lid);
        f_int(&tmp, 2, 1);
        f_int(&tmp, 3, s->entry);
        f_msg(&tmp, 4, &line);
        f_msg(&prof, P_LOCATION, &tmp);
        nloc++;
        f_int(&tmp, 1, lid);
        pbuf_t vals = { 0 };
        varint(&vals, s->insns);
        varint(&vals, s->calls);
        if (vals.oom)
            tmp.oom = 1;
        f_bytes(&tmp, 2, vals.b, vals.n);
        free(vals.b);
        f_msg(&prof, P_SAMPLE, &tmp);
    }
    char comment[256];
    snprintf(comment, sizeof(comment),
             "qp (%s) %s: exact counts of %s, %" PRIu64 " blocks and PLT stubs that ran",
             PACKAGE_NAME, PACKAGE_VERSION, in->exe, nloc);
    varint(&prof, (uint64_t)P_COMMENT << 3);
    varint(&prof, intern(&st, comment));
    f_int(&prof, P_DEFAULT_SAMPLE_TYPE, intern(&st, "instructions"));
    for (uint32_t i = 0; i < st.n; i++)
        f_bytes(&prof, P_STRING_TABLE, st.v[i], strlen(st.v[i]));
    int rc = prof.oom || tmp.oom || line.oom || st.oom ? -1 : write_gzip(f, &prof);
    if (rc < 0)
        fprintf(stderr, "qp: %s: cannot write the pprof profile (out of memory or a write "
                        "error)\n", in->exe);
    free(prof.b);
    free(tmp.b);
    free(line.b);
    free(st.v);
    free(st.slot);
    return rc < 0 ? 1 : 0;
}
