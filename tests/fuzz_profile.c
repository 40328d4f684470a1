/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A fuzz target for what qp does with a profile, the file every run of an instrumented
 * program writes (and anyone may hand to qp): read it with validation (slots, journals,
 * dumps), check it against a description made to fit it, build the report (flow
 * reconstruction, saturation), merge it with itself, write the merge and read it back -
 * the counts read back must equal the merged ones. Any crash, hang, leak, sanitizer
 * report or mismatch is a bug; refusals are fine.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/qp_desc.h"
#include "report/qp_report.h"
#include "tests/fuzz.h"

#define X QP_VIRT

/* A description of one measured procedure with a loop, a call and a tail call, whose
 * first edges carry the profile's counters (the others have none). */
static int
fit_desc(qp_desc_t *d, const qp_profile_t *p)
{
    static const struct { uint32_t from, to; uint8_t kind; } e[] = {
        { X, 0, QP_EDGE_ENTRY }, { 0, 1, 0 /* fall */ },  { 1, 2, 1 /* taken */ },
        { 1, 3, 0 },             { 2, 4, 2 /* jump */ },  { 3, 4, 0 },
        { 4, 1, 1 },             { 4, 5, 0 },             { 5, 6, 5 /* callret */ },
        { 6, 7, 0 },             { 7, X, 6 /* return */ }, { 6, X, 7 /* tailcall */ },
    };
    const uint32_t nb = 8, ne = sizeof(e) / sizeof(e[0]);
    memset(d, 0, sizeof(*d));
    d->hdr.driver = QP_DRIVER_QP;
    d->hdr.ncounters = (uint32_t)p->hdr.ncounters;
    d->hdr.id = p->hdr.id;
    uint32_t name;
    if (qp_desc_add_string(d, "f", &name) < 0)
        return -1;
    d->procs = calloc(1, sizeof(qp_desc_proc_t));
    d->blocks = calloc(nb, sizeof(qp_desc_block_t));
    d->edges = calloc(ne, sizeof(qp_desc_edge_t));
    if (!d->procs || !d->blocks || !d->edges)
        return -1;
    d->hdr.nprocs = 1;
    d->hdr.nblocks = nb;
    d->hdr.nedges = ne;
    d->procs[0] = (qp_desc_proc_t) { .name = name, .flags = QP_PROC_MEASURED, .entry = 0x1000,
                                     .nblocks = nb, .nedges = ne };
    for (uint32_t i = 0; i < nb; i++)
        d->blocks[i] = (qp_desc_block_t) { .start = 0x1000 + 16 * i, .size = 4,
                                           .ninsns = 1 + i, .counter = QP_NOCOUNTER };
    for (uint32_t i = 0; i < ne; i++)
        d->edges[i] = (qp_desc_edge_t) { .from = e[i].from, .to = e[i].to, .kind = e[i].kind,
                                         .counter = i < d->hdr.ncounters ? i : QP_NOCOUNTER };
    return qp_desc_validate(d, NULL, 0) == 0 ? 0 : -1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64], out[96], why[512];
    const char *dir = fuzz_scratch_dir();
    int fd = dir ? fuzz_memfd(data, size, path, sizeof(path)) : -1;
    if (fd < 0)
        return 0;
    qp_profile_t p, m, back;
    qp_desc_t d;
    memset(&m, 0, sizeof(m));
    memset(&d, 0, sizeof(d));
    if (qp_profile_read(path, &p, why, sizeof(why)) != 0) {
        close(fd);
        return 0;
    }
    if (p.hdr.ncounters <= 4096 && fit_desc(&d, &p) == 0
        && qp_profile_check(&p, &d, why, sizeof(why)) == 0) {
        qp_report_t rep;
        if (qp_report_build(&d, &p, NULL, &rep) == 0)
            qp_report_free(&rep);
    }
    snprintf(out, sizeof(out), "%s/merged.qp", dir);
    if (qp_profile_merge(&m, &p, why, sizeof(why)) == 0
        && qp_profile_merge(&m, &p, why, sizeof(why)) == 0
        && qp_profile_write(out, &m, why, sizeof(why)) == 0) {
        if (qp_profile_read(out, &back, why, sizeof(why)) != 0
            || back.hdr.ncounters != m.hdr.ncounters
            || memcmp(back.counters, m.counters, m.hdr.ncounters * 8) != 0
            || back.saturated != m.saturated)
            abort(); /* a merge must read back as it was written */
        qp_profile_free(&back);
        unlink(out);
    }
    qp_desc_free(&d);
    qp_profile_free(&m);
    qp_profile_free(&p);
    close(fd);
    return 0;
}
