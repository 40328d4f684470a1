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
 * libqpt encodes the protobuf (qpt_pprof_*, include/qpt/qpt_report.h); zlib does the
 * gzip here (Debian's zlib1g-dev).
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "include/qpt/qpt_report.h"
#include "report/qp_flow.h"
#include "tools/qp_tool.h"

/* gzip the N bytes at B to F. 0 or -1. */
static int
write_gzip(FILE *f, const uint8_t *b, size_t n)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    uint8_t out[65536];
    z.next_in = (Bytef *)(uintptr_t)b;
    z.avail_in = (uInt)n;
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
    qpt_pprof_t *pp;
    int failed = qpt_pprof_create(&pp) < 0;
    if (failed)
        goto out;
    qpt_pprof_sample_type(pp, "instructions", "count");
    qpt_pprof_sample_type(pp, "executions", "count");

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
    qpt_pprof_mapping(pp, lo == UINT64_MAX ? 0 : lo, hi, img->path, bid);

    /* Functions (id = procedure index + 1), then a location and a sample per block that
     * ran (location id = block index + 1). */
    uint64_t nloc = 0;
    for (uint32_t p = 0; p < d->hdr.nprocs; p++) {
        const qp_desc_proc_t *pr = &d->procs[p];
        const char *file = NULL;
        unsigned fline = 0;
        if (cfg_image_line(in->img, pr->entry, &file, &fline) != 0)
            file = NULL;
        qpt_pprof_function(pp, p + 1, qp_proc_name(in, p), qp_desc_str(d, pr->name), file,
                           fline);
        if (!(pr->flags & QP_PROC_MEASURED))
            continue;
        qp_flow_t fl;
        if (qp_report_flow(in->rep, p, &fl) < 0) {
            failed = 1;
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
            qpt_pprof_location(pp, pr->block + b + 1, blk->start, p + 1, bl);
            nloc++;
            uint64_t vals[2] = { fl.block_count[b] * blk->ninsns, fl.block_count[b] };
            qpt_pprof_sample(pp, pr->block + b + 1, vals, 2);
        }
        qp_flow_free(&fl);
    }
    /* PLT stubs counted from their callers: a function (id after the procedures') and a
     * location at the entry (id after the blocks') each, one sample: the instructions
     * and the calls. */
    for (uint32_t i = 0; i < in->rep->nplt && !failed; i++) {
        const qp_proc_result_t *s = &in->rep->plt[i];
        uint64_t fid = (uint64_t)d->hdr.nprocs + i + 1;
        uint64_t lid = (uint64_t)d->hdr.nblocks + i + 1;
        qpt_pprof_function(pp, fid, qp_row_name(in, s), s->name, NULL, 0);
        if (s->calls == 0)
            continue;
        qpt_pprof_location(pp, lid, s->entry, fid, 0);
        nloc++;
        uint64_t vals[2] = { s->insns, s->calls };
        qpt_pprof_sample(pp, lid, vals, 2);
    }
    char comment[256];
    snprintf(comment, sizeof(comment),
             "qp (%s) %s: exact counts of %s, %" PRIu64 " blocks and PLT stubs that ran",
             PACKAGE_NAME, PACKAGE_VERSION, in->exe, nloc);
    qpt_pprof_comment(pp, comment);
    qpt_pprof_default_sample_type(pp, "instructions");
    const uint8_t *bytes;
    size_t len;
    failed = failed || qpt_pprof_bytes(pp, &bytes, &len) < 0 || write_gzip(f, bytes, len) < 0;
out:
    if (failed)
        fprintf(stderr, "qp: %s: cannot write the pprof profile (out of memory or a write "
                        "error)\n", in->exe);
    qpt_pprof_destroy(pp);
    return failed ? 1 : 0;
}
