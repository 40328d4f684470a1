/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_BACKTRACE_H
#define QP_BACKTRACE_H
/*
 * PURPOSE: exit back-traces (seed 004, Section 3.10). A profile's exit dumps hold the
 * registers and the stack of a thread that called exit(); unwinding them with the
 * executable's .eh_frame gives the return addresses of the frames that never returned,
 * and each one that is a relocated call site (a CFG_EDGE_CALLRET edge's ret_addr) is one
 * execution of that call block that left its procedure for good ("abandoned"), which
 * flow reconstruction needs (qp_flow.h). qp_backtrace.c is the only file of report/ that
 * uses elfutils (libdw for the CFI, libelf to hand it the file); nothing is printed.
 * Lifetimes: an unwinder owns its open file until qp_unwinder_destroy.
 */
#include <stddef.h>
#include <stdint.h>

#include "report/qp_profile.h"

typedef struct qp_unwinder qp_unwinder_t; /* the CFI of one executable */

/*
 * Open the executable PATH (the instrumented one, whose .eh_frame covers the relocated
 * code) for unwinding. Returns 0, QP_EINVAL, QP_ENOMEM, QP_EIO (errno kept) or
 * QP_EFORMAT (not ELF, or no usable .eh_frame), with one line in WHY (may be NULL).
 */
int
qp_unwinder_create(
    const char *path, qp_unwinder_t **out /*OUT*/, char *why, size_t whylen);

/* Close U. NULL is fine. */
void
qp_unwinder_destroy(qp_unwinder_t *u);

/* Why a walk stopped (qp_backtrace_walk's return value when not negative). */
enum {
    QP_BT_END = 0, /* the outermost frame: return address undefined (or 0) */
    QP_BT_NOCFI,   /* a pc without CFI (code outside the executable's FDEs) */
    QP_BT_OUTSIDE, /* a read outside the saved stack, or a pc outside the file */
    QP_BT_LIMIT,   /* 10000 frames */
    QP_BT_BADEXPR, /* a CFI expression this unwinder does not evaluate */
    QP_BT_FOREIGN, /* a return address outside the executable (a shared library's
                    * code, such as libc calling main): its frames cannot be
                    * unwound, and the walk ends there as if complete */
};

/* The maximum number of frames one walk follows. */
#define QP_BT_MAX_FRAMES 10000

/*
 * Unwind DUMP: starting at dump->hdr.pc in the frame that called exit (its CFA rule is
 * the one at pc itself), call FN(ARG, RA) with the link-time return address RA (runtime
 * minus dump->hdr.bias) of every caller frame, innermost first, until one of the QP_BT_*
 * conditions; a non-zero return from FN stops the walk and is returned. Registers come
 * from dump->hdr.regs for the first frame, memory from the saved stack only.
 * Returns a QP_BT_* reason (>= 0), FN's value, or QP_EINVAL.
 */
int
qp_backtrace_walk(qp_unwinder_t *u, const qp_dump_t *dump,
    int (*fn)(void *arg, uint64_t ra), void *arg);

typedef struct qp_backtrace_stats {
    uint64_t dumps;      /* dumps walked */
    uint64_t frames;     /* return addresses found */
    uint64_t matched;    /* ... that are relocated call sites (abandoned += 1) */
    uint64_t execs;      /* dumps taken before an exec, counted at its call block
                          * (abandoned += 1) */
    uint64_t incomplete; /* walks that stopped early (QP_BT_NOCFI, OUTSIDE, LIMIT,
                          * BADEXPR): frames above may have been missed */
} qp_backtrace_stats_t;

/*
 * For every complete dump of P, add 1 to ABANDONED[b] (an array of D->hdr.nblocks
 * counts, which the caller zeroes) for each return address that is the ret_addr of a
 * CFG_EDGE_CALLRET edge of D from block b, and for a dump before an exec, to its exec
 * call block's. LEFT (D->hdr.nprocs flags the caller zeroes, or NULL): set to 1 for
 * each procedure holding a block added to (the only writer knows them: readers need
 * not scan every block's count). U may be NULL when P has no dumps. ST may be NULL.
 * Returns 0, QP_EINVAL or QP_ENOMEM.
 */
int
qp_backtrace_abandoned(qp_unwinder_t *u, const qp_desc_t *d, const qp_profile_t *p,
    uint64_t *abandoned, uint8_t *left /*OUT*/, qp_backtrace_stats_t *st /*OUT*/);

#endif
