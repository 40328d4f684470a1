/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * PURPOSE: qp report --pprof: the profile as pprof reads it (profile.proto of
 * github.com/google/pprof, gzip-compressed). Every block that ran is a sample of one
 * location (its original address and source line) with two values: the instructions it
 * executed and how many times it ran. Functions carry their demangled and stored names,
 * source file and first line; the mapping the program's path and build-id. A PLT stub
 * counted from its callers (QPT_QP_STUBS) is one more sample, at its entry, of a
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

/* The function, location and sample of every block of procedure P (PR) that ran; *NLOC
 * counts the locations. 0 or -1. */
static int
proc_samples(qpt_pprof_t *pp, const qp_inputs_t *in, uint32_t p, const qpt_qp_proc_t *pr,
             uint64_t *nloc)
{
    qpt_qp_flow_t *fl;
    if (qpt_qp_flow(in->qp, p, &fl) < 0)
        return -1;
    for (uint32_t b = 0; b < pr->nblocks; b++) {
        qpt_qp_block_t blk;
        uint64_t count;
        int state;
        if (qpt_qp_flow_block(fl, b, &count, &state) < 0 || count == 0
            || qpt_qp_block(in->qp, p, b, &blk) < 0)
            continue;
        const char *bf;
        unsigned bl = 0;
        if (qpt_qp_line(in->qp, blk.start, &bf, &bl) != 0)
            bl = 0;
        uint64_t loc = (uint64_t)pr->block_base + b + 1;
        qpt_pprof_location(pp, loc, blk.start, p + 1, bl);
        ++*nloc;
        uint64_t vals[2] = { count * blk.ninsns, count };
        qpt_pprof_sample(pp, loc, vals, 2);
    }
    qpt_qp_flow_free(fl);
    return 0;
}

int
qp_print_pprof(FILE *f, const qp_inputs_t *in)
{
    qpt_qp_info_t info;
    qpt_pprof_t *pp = NULL;
    uint64_t lo, hi;
    int failed = qpt_qp_info(in->qp, &info) < 0 || qpt_qp_code_span(in->qp, &lo, &hi) < 0
        || qpt_pprof_create(&pp) < 0;
    if (failed)
        goto out;
    qpt_pprof_sample_type(pp, "instructions", "count");
    qpt_pprof_sample_type(pp, "executions", "count");

    /* The mapping: the program's code, its path and build-id. */
    qpt_pprof_mapping(pp, lo, hi, info.code_path, info.code_build_id);

    /* Functions (id = procedure index + 1), then a location and a sample per block that
     * ran (location id = block number + 1). */
    uint64_t nloc = 0;
    for (uint32_t p = 0; p < info.nprocs && !failed; p++) {
        qpt_qp_proc_t pr;
        if (qpt_qp_proc(in->qp, p, &pr) < 0) {
            failed = 1;
            break;
        }
        const char *file = NULL;
        unsigned fline = 0;
        if (qpt_qp_line(in->qp, pr.entry, &file, &fline) != 0)
            file = NULL;
        qpt_pprof_function(pp, p + 1, pr.name, pr.stored_name, file, fline);
        if (pr.measured && proc_samples(pp, in, p, &pr, &nloc) < 0)
            failed = 1;
    }
    /* PLT stubs counted from their callers: a function (id after the procedures') and a
     * location at the entry (id after the blocks') each, one sample: the instructions
     * and the calls. */
    for (uint32_t i = 0; i < info.nplt && !failed; i++) {
        qpt_qp_row_t s;
        if (qpt_qp_row(in->qp, QPT_QP_STUBS, i, &s) < 0)
            continue;
        uint64_t fid = (uint64_t)info.nprocs + i + 1;
        uint64_t lid = (uint64_t)info.nblocks + i + 1;
        qpt_pprof_function(pp, fid, s.name, s.stored_name, NULL, 0);
        if (s.calls == 0)
            continue;
        qpt_pprof_location(pp, lid, s.entry, fid, 0);
        nloc++;
        uint64_t vals[2] = { s.insns, s.calls };
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
