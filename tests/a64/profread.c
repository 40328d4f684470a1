/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Reads a profile with qp's own reader (report/qp_profile.c) and prints what tests/a64.sh
 * compares with the "expect" lines of tests/a64/rt_harness.c: the header's counts, every
 * counter (the base counters and every slot summed), and the one kept exit dump with the
 * AArch64 assignment of its registers (base/qp_format.h). Exit 1 when it cannot be read.
 */
#include <stdio.h>
#include <string.h>

#include "report/qp_profile.h"

int
main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: a64_profread PROFILE\n");
        return 2;
    }
    qp_profile_t p;
    char why[256];
    if (qp_profile_read(argv[1], &p, why, sizeof why) != 0) {
        fprintf(stderr, "a64_profread: %s: %s\n", argv[1], why);
        return 1;
    }
    printf("runs %llu\n", (unsigned long long)p.hdr.runs);
    printf("forks %llu\n", (unsigned long long)p.hdr.forks);
    printf("ndumps %llu\n", (unsigned long long)p.hdr.ndumps);
    printf("cancelled %llu\n", (unsigned long long)p.hdr.cancelled);
    printf("kept_dumps %zu\n", p.ndumps);
    printf("unsaved %llu\n", (unsigned long long)p.hdr.unsaved);
    printf("flags %#x\n", p.hdr.flags);
    printf("id %#llx\n", (unsigned long long)p.hdr.id);
    printf("exe %s\n", p.hdr.exe);
    for (uint64_t c = 0; c < p.hdr.ncounters; c++)
        printf("counter%llu %llu\n", (unsigned long long)c,
               (unsigned long long)p.counters[c]);
    for (size_t i = 0; i < p.ndumps; i++) {
        const qp_dump_hdr_t *d = &p.dumps[i].hdr;
        printf("dump_bias %#llx\n", (unsigned long long)d->bias);
        printf("dump_pc %#llx\n", (unsigned long long)d->pc);
        printf("dump_sp %#llx\n", (unsigned long long)d->regs[7]);
        printf("dump_x29 %#llx\n", (unsigned long long)d->regs[6]);
        printf("dump_x30 %#llx\n", (unsigned long long)d->regs[15]);
        printf("dump_tid %llu\n", (unsigned long long)d->tid);
        if (d->stack_len >= 8) {
            uint64_t w;
            memcpy(&w, p.dumps[i].stack, 8);
            printf("dump_stack0 %#llx\n", (unsigned long long)w);
        }
    }
    qp_profile_free(&p);
    return 0;
}
