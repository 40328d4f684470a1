/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_QPRT_H
#define QP_QPRT_H
/*
 * PURPOSE: the contract between the rewriter and the runtime it puts into an instrumented
 * program. The runtime (qprt.c, qprt_entry.S) is freestanding code linked into one flat,
 * position-independent blob (qprt.ld) that the rewriter copies into a new executable
 * region; its first bytes are this parameter block, which the rewriter fills in. The
 * runtime runs before the program's own entry point (it becomes e_entry), maps the
 * counters onto the profile file and continues at the original entry. In a shared
 * library it runs as the library's DT_INIT instead, and goes on to the original one.
 */
#include <stdint.h>

#define QPRT_MAGIC "QPRTPAR1"
#define QPRT_START_OFF 256u /* blob offset of the entry code (the new e_entry) */
#define QPRT_HOOK_OFF 384u  /* blob offset of the exit hook (called by exit snippets) */
#define QPRT_FORK_OFF 512u  /* blob offset of the fork hook (called after fork sites) */
#define QPRT_THREAD_OFF 640u /* blob offset of the thread hook (called before thread starts) */
#define QPRT_EXEC_OFF 768u  /* blob offset of the exec hook (called after an exec returned:
                             * it failed, and the dump taken before it is cancelled) */
#define QPRT_TRACE_OFF 1024u /* blob offset of the trace buffer refill (called by trace
                              * snippets as a SysV function, no arguments) */
#define QPRT_LIBINIT_OFF 896u /* blob offset of a shared library's start: its DT_INIT,
                               * called as init(argc, argv, envp) by the dynamic linker */

enum {
    QPRT_F_SWITCH = 1u << 0,     /* the counters are ARCH_INC_SWITCH increments, listed in
                                  * the lock-site table */
    QPRT_F_LOCK_AT_START = 1u << 1, /* make them atomic before the program runs (it may
                                  * start threads where no thread hook sees it) */
    QPRT_F_LIBRARY = 1u << 2,    /* a shared library: started from DT_INIT, its profile
                                  * named after the library's file, counts made before the
                                  * start (IFUNC resolvers, early callers) kept */
    QPRT_F_LOCK_UNWATCHED = 1u << 3, /* make them atomic at the start unless a watcher
                                  * (below) is in the process and no thread started yet */
    QPRT_F_WATCHER = 1u << 4,    /* this module's hooks see every thread start and fork of
                                  * the process (a libc: pthread_create's entry and the
                                  * fork system calls are hooked): they act for every
                                  * module of the process (runtime/qprt.c, registry) */
    QPRT_F_TRACE = 1u << 5,      /* control-flow tracing: per-thread trace buffers and
                                  * files (base/qpt_trace_format.h) */
    QPRT_F_TRACE16 = 1u << 6,    /* ... files in 16-bit units (QPT_TRACE_FMAGIC16) */
};
#define QPRT_STATE_SIZE 4096u /* the runtime's writable page, just before counter 0 */

typedef struct qprt_params {
    char magic[8];          /* QPRT_MAGIC */
    uint64_t self;          /* link-time address of this block (the blob's start) */
    uint64_t entry;         /* link-time address to continue at: the original entry */
    uint64_t state;         /* link-time address of the writable state page */
    uint64_t counters;      /* link-time address of counter 0 (page aligned) */
    uint64_t counters_size; /* bytes reserved for the counters (a page multiple) */
    uint64_t ncounters;     /* counters used */
    uint64_t id;            /* the description's id (qp_format.h) */
    uint64_t flags;         /* QPRT_F_* */
    uint64_t text;          /* link-time address of the relocated code */
    uint64_t text_size;     /* its size */
    uint64_t locks;         /* link-time address of the lock-site table: the offsets from
                             * `text` of each switchable increment, ascending, as LEB128
                             * differences (the first from 0): 1-2 bytes a site */
    uint64_t nlocks;        /* its entries */
    uint8_t plain_byte;     /* ARCH_INC_PLAIN_BYTE: what a site holds until switched */
    uint8_t lock_byte;      /* ARCH_INC_LOCK_BYTE: what makes it atomic */
    uint8_t pad[6];
    uint64_t init;          /* QPRT_F_LIBRARY: link-time address of the library's own
                             * DT_INIT, run after the runtime's start, or 0 */
} qprt_params_t;

#ifndef QPRT_FREESTANDING
#include <stddef.h>
/* The runtime, linked into one blob at build time (runtime/qprt_blob.c, generated). */
extern const unsigned char qprt_blob[];
extern const size_t qprt_blob_size;
/* The same without tracing (QPRT_F_TRACE unsupported: its refill entry traps), 3 KB
 * smaller: what the counting drivers carry. */
extern const unsigned char qprt_blob_plain[];
extern const size_t qprt_blob_plain_size;
/* The AArch64 runtime (runtime/qprt_entry_a64.S, no tracing): the same offsets and
 * parameter block. Its size is 0 when configure found no aarch64-linux-gnu-gcc. */
extern const unsigned char qprt_blob_a64[];
extern const size_t qprt_blob_a64_size;
#endif

#endif
