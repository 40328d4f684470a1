/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_FORMAT_H
#define QP_FORMAT_H
/*
 * PURPOSE: the two on-disk formats of edge profiling, shared by qpt-rewrite (writes the
 * description), the runtime carried in the instrumented program (writes the profile) and
 * qp (reads both). doc/qp.md ("The files") explains them in prose.
 *
 *  - The description: section `.qpt.desc` of the instrumented file, a non-allocated
 *    section (in no PT_LOAD: the running program never maps it; qp reads it from the
 *    file, the runtime only needs its id, which it gets from its own parameters). For
 *    every measured procedure: its blocks and edges, with the virtual node X that stands
 *    for both EXIT and ENTRY, and which counter measures which edge (qp) or block (naive).
 *    Its 64-bit id is a hash of its bytes. On disk it is compact (version 5, below): a
 *    fixed header, then an LZMA2 stream of LEB128 varints and deltas, a few bytes per block
 *    and edge; in memory (base/qp_desc.h) it is the fixed-size structs below.
 *  - The profile: `a.inst.qp` (or $QP_PROFILE), a 4096-byte header, the counters
 *    (mapped MAP_SHARED by the runtime, so they survive a crash; one slot of counters
 *    per process), and a few exit dumps (the stack at exit() called below main, so qp
 *    can restore flow conservation).
 *
 * All integers are little-endian, structs have natural alignment and explicit padding
 * (x86-64 layout), and every size below is fixed by _Static_assert.
 */
#include <stdint.h>

/*****************************************************************************
 * The description (.qpt.desc): the header as on disk, the records as in memory
 */

#define QP_DESC_MAGIC "QPTDESC1" /* 8 bytes, no NUL */
#define QP_DESC_SECTION ".qpt.desc"
#define QP_FORMAT_VERSION 9 /* 2: the call sites (qp_desc_call_t); 3: compact (below), the
                             * section no longer loaded; 4: QP_PROC_BY_CALLS; 5: LZMA2, not
                             * zlib; 6: an index and chunks read when needed (below); 7: only
                             * the key call sites in the index, the others in the chunks;
                             * 8: the index in parts compressed apart (in parallel); 9: zstd,
                             * not LZMA2. qp reads 5 to 9 and refuses other versions. */
#define QP_FORMAT_V5 5
#define QP_FORMAT_V6 6
#define QP_FORMAT_V7 7
#define QP_FORMAT_V8 8
#define QP_FORMAT_V9 9

/*
 * Version 5 on disk: qp_desc_hdr_t (64 bytes, as below), then the body: a raw LZMA2
 * stream (liblzma's lzma_raw_buffer_decode with LZMA2, lc 1, lp 0, pb 0 and a
 * dictionary of 8 MiB; no .xz container) of exactly hdr.body_size bytes once
 * decompressed; only zero bytes may follow the stream. The id (qp_desc_id) hashes the
 * header and the stream. The decompressed body is a sequence of unsigned LEB128 varints, the records in this order:
 *   nprocs procedures, nblocks blocks, nedges edges, ncalls call sites (each record
 *   below), then the string table (strtab_size raw bytes).
 * Deltas: "d(x, p)" is x - p wrapped to the field's width (32 or 64 bits) as a signed
 * number, zigzag-coded (0, -1, 1, -2 ... -> 0, 1, 2, 3 ...). Each running value p
 * starts at 0 and follows the records of its kind. Fields absent from a record (flag
 * bit clear) take the value in brackets.
 *   procedure: head = flags << 3 | has_miss << 2 | has_reason << 1 | has_new_entry;
 *     d(name, previous name); d(entry, previous entry); [0] d(new_entry, previous
 *     new_entry present); d(block, previous block + nblocks); nblocks;
 *     d(edge, previous edge + nedges); nedges; [0] reason; [0] miss.
 *   block: head = ninsns << 2 | has_new_start << 1 | has_counter;
 *     d(start, previous start + size); size; [0] d(new_start, previous new_start
 *     present + its size); [QP_NOCOUNTER] d(counter, C) where C is the last counter
 *     present in a block or edge, plus one.
 *   edge: head = kind << 2 | has_counter << 1 | has_ret_addr;
 *     from: 0 for X, else 1 + d(from, F) where F is the last `from` that was not X;
 *     to: 0 for X, else 1 + d(to, from, or F when from is X);
 *     [QP_NOCOUNTER] d(counter, C); [0] d(ret_addr, R) where R is the new_start of
 *     block `to` when it is a block that moved, else the previous ret_addr present.
 *   call site: head = flags << 11 | kind << 3 | callee_named << 2 | has_target << 1
 *     | has_edge; d(block, previous block); [QP_VIRT] d(edge, previous edge present);
 *     [0] d(target, previous target present); then, unless callee_named (the name is
 *     that of the first procedure, in array order, whose entry is the target: one must
 *     be), d(name, previous name given).
 * Every value must fit its field; the decoded description then passes every rule of
 * qp_desc_validate (base/qp_desc.h).
 *
 * Version 6 (written since; version 5 is still read) splits the records so that qp can
 * decode only the procedures that ran (chromium: 44,000 of 670,000): qp_desc_hdr_t, then
 * the index, a raw LZMA2 stream (as above, but its dictionary is the stream's size: at
 * least 4 KiB, at most 8 MiB) of exactly hdr.body_size bytes once decompressed, then the
 * chunks' streams back to back (each with the dictionary of its size), then only zero
 * bytes. The id hashes the header and every stream. The index, in varints:
 *   nchunks (1 .. max(nprocs, 1));
 *   nprocs procedures (as above);
 *   per procedure its zero-input summary (qp_desc_zero_t: what solving it with every
 *     counter 0 and nothing abandoned gives), one varint, 0 when not given, else 1 +
 *     (nunknown_edges << 3 | calls_known << 2 | insns_exact << 1 | all_known); a
 *     procedure with QP_PROC_BY_CALLS has a second, for its entry count known to be 0
 *     (the first is for it unknown);
 *   ncalls call sites (as above);
 *   per call site with QP_CALLF_EXEC, in order: the lowest new_start of any block above
 *     its block's (0: none), and the highest index of a block with its block's new_start
 *     less its block's index (what finding the block of an exec's dump needs);
 *   per chunk: nprocs, nblocks, nedges (the chunks share out the procedures, blocks and
 *     edges in order, each procedure's blocks and edges inside its chunk's), clo, cn
 *     (every counter of its blocks and edges is in [clo, clo + cn)), the bytes of its
 *     stream, and of its records decompressed, then d(ns_lo, previous ns_lo), d(ns_hi,
 *     ns_lo), d(ra_lo, previous ra_lo), d(ra_hi, ra_lo) (64-bit): every new_start of its
 *     blocks and ret_addr of its edges that is not 0 lies in [ns_lo, ns_hi] and
 *     [ra_lo, ra_hi] (0, 0 when there is none);
 *   the string table (strtab_size raw bytes).
 * A chunk's stream holds its blocks then its edges (as above, every running value
 * starting again at 0).
 *
 * Version 7 (written since; 5 and 6 are still read) is version 6 but for the call
 * sites: the index holds only the key sites (qp_desc_keys_t in base/qp_desc.h: those
 * with flags, and the direct and tail calls whose target is not the entry of exactly
 * one measured procedure that counts its own entry), the chunks the others, so that a
 * flat profile reads no call site of code that did not run (chromium: 720,000 key sites
 * of 3.1 million). In the index, in place of version 6's ncalls call sites and its exec
 * call sites:
 *   nkeys; per key site: its index among all the call sites less the previous key
 *     site's index plus one (the first: its index), then the site as above (the
 *     running values follow the key sites);
 *   per key site with QP_CALLF_EXEC, in order, version 6's two values;
 * and each chunk's entry ends with two more values: ncalls, the call sites (key or not)
 * of its blocks (the chunks share out the call sites in order), and the bytes of its
 * records that are call sites. A chunk's stream holds its blocks, its edges, then its
 * call sites that are not key sites, in order (running values from 0; their head's
 * callee_named bit is never set: every one gives its name). A tail call's edge is in the chunk of its block. qp reports a
 * procedure whose chunk's counters are all 0 from its summary, without its chunk. Addresses mostly follow one another, so most
 * varints are one byte: about 4 bytes a block or an edge before compression; with
 * everything else (procedures, call sites, strings) 1.4 bytes per block and edge after
 * it (cc1: 4.5 MB for 1.3 million blocks and 2 million edges; zlib, version 4, 4.8 MB;
 * version 2 took 105 MB).
 * Version 8 (written since; 5 to 7 are still read) is version 7 but for how the index is
 * stored: in parts, each a stream of its own (as above: raw LZMA2, the dictionary of its
 * size), so that the writer compresses them on several threads beside the chunks (one
 * stream was the description's last serial step: cc1, 0.2 s). After qp_desc_hdr_t, the
 * parts' table in plain varints (not compressed): nparts (1 .. body_size), then per part
 * its bytes decompressed (at least 1) and compressed (at least 1); then the parts'
 * streams back to back, then the chunks' streams as in version 7, then only zero bytes.
 * The parts' decompressed bytes, one after another, are version 7's index, body_size in
 * all; where they are cut is the writer's choice (a varint may straddle two parts): it
 * cuts the index's head (procedures to the exec sites) and its strings into parts of
 * at most 256 KiB, the chunks' table (known only once the chunks are compressed) a part
 * of its own; every part and chunk takes preset 6 when the index's head, its strings and
 * the chunks' records are at most 2 MiB in all, else preset 1.
 * Version 9 (written since; 5 to 8 are still read) is version 8 but for the compression:
 * every index part and every chunk is one zstd frame (RFC 8878; its magic number first,
 * no skippable frame, no dictionary) in place of a raw LZMA2 stream, the frame's header
 * giving its decompressed size (zstd checks the bytes against it), which must be the
 * size the parts' or the chunks' table says (the reader yields exactly that many); the
 * frame's window is at most 8 MiB (window log 23), it has no checksum (the id covers
 * every byte), and nothing follows the frame inside its piece's bytes. The writer takes
 * level ZSTD_LEVEL_SMALL where version 8 takes preset 6, else ZSTD_LEVEL_BIG
 * (base/qp_desc_priv.h; why zstd and these levels: doc/measurements.md, 2026-12-06).
 */

/* A block or counter index that does not exist: the virtual node X, or "no counter". */
#define QP_VIRT UINT32_MAX
#define QP_NOCOUNTER UINT32_MAX

enum qp_driver_kind {
    QP_DRIVER_QP = 1,    /* counters on the edges outside a maximum spanning tree */
    QP_DRIVER_NAIVE = 2, /* a counter in every block */
    QP_DRIVER_LIB = 3,   /* a libqpt mutator's words (no procedure described; the string
                          * table holds "libqpt:HASH" of what was inserted where, then
                          * "libqpt-var OFFSET BYTES NAME" per named variable and
                          * "libqpt-note NAME\nTEXT" per note, such as the metrics'
                          * layout of qpt-rewrite -e: libqpt/qpt_note.c) */
};

enum {
    QP_DESC_ATOMIC = 1u << 0, /* counters are incremented with lock prefixes */
    QP_DESC_PIE = 1u << 1,    /* the executable is position independent */
    QP_DESC_THREADS = 1u << 2, /* the program can start threads (pthread_create, ...):
                                * plain counters there may lose counts */
    QP_DESC_FORK_UNSEEN = 1u << 3, /* a call or system call that may fork is in code that
                                    * was not relocated: a child forked there counts into
                                    * its parent's slot (plain counters may lose counts) */
};

typedef struct qp_desc_hdr {
    char magic[8];           /* QP_DESC_MAGIC */
    uint32_t version;        /* QP_FORMAT_VERSION */
    uint32_t driver;         /* enum qp_driver_kind */
    uint64_t id;             /* qp_desc_id() of the rest: a profile names it */
    uint64_t counters_vaddr; /* link-time address of counter 0 */
    uint32_t ncounters;      /* 8-byte counters */
    uint32_t flags;          /* QP_DESC_* */
    uint32_t nprocs;         /* the body's procedures (qp_desc_proc_t in memory) */
    uint32_t nblocks;        /* ... blocks (qp_desc_block_t) */
    uint32_t nedges;         /* ... edges (qp_desc_edge_t) */
    uint32_t ncalls;         /* ... call sites (qp_desc_call_t) */
    uint32_t strtab_size;    /* then the string table: NUL-terminated names, offset 0 is "" */
    uint32_t body_size;      /* bytes of the decompressed body (set by qp_desc_serialize) */
} qp_desc_hdr_t;
_Static_assert(sizeof(qp_desc_hdr_t) == 64, "qp_desc_hdr_t layout");

enum {
    QP_PROC_MEASURED = 1u << 0,   /* counters placed: counts are known */
    QP_PROC_APPROX_EH = 1u << 1,  /* has exception landing pads: a throw through it leaves
                                   * flow unbalanced, counts may be approximate */
    QP_PROC_APPROX_JMP = 1u << 2, /* calls setjmp/longjmp-like functions: likewise */
    QP_PROC_EXIT_SITE = 1u << 3,  /* calls exit()-like functions (hooked for back-traces) */
    QP_PROC_LEAVE_JMP = 1u << 5,  /* may be left by a longjmp: it calls, through other
                                   * procedures, one that longjmps (qp marks its counts
                                   * approximate when a longjmp call site ran) */
    QP_PROC_LEAVE_EH = 1u << 6,   /* ... by an exception thrown below it, likewise */
    QP_PROC_APPROX_IND = 1u << 4, /* has indirect jumps whose targets are a guess (the
                                   * address-taken labels): if one goes elsewhere, flow
                                   * leaves unseen and counts may be approximate */
    QP_PROC_XLATE = 1u << 7,      /* has indirect jumps of unknown targets, translated at
                                   * run time and counted as leaving it (tail calls):
                                   * approximate when its miss counter (qp_desc_proc_t.miss)
                                   * is not 0: one went into the middle of code */
    QP_PROC_BY_CALLS = 1u << 8,   /* its calls are counted where they are made: nothing in
                                   * it counts its entry edge, whose count is the sum of
                                   * its call sites (the direct calls and tail calls that
                                   * name its entry in other measured procedures, each
                                   * solved first; the rewriter guarantees they are its
                                   * only ways in and that the dependencies are acyclic) */
    QP_PROC_APPROX_RESUME = 1u << 9, /* in a Go program whose function names could not be
                                   * read (runtime.morestack unknown): a stack growth in a
                                   * prologue, which the runtime resumes at the return
                                   * address to jump back to the entry, may count as one
                                   * more call, and so may a goroutine resumed after
                                   * runtime.mcall (Gosched, parking) */
};

typedef struct qp_desc_proc {
    uint32_t name;       /* string table offset */
    uint32_t flags;      /* QP_PROC_* */
    uint64_t entry;      /* original entry address (link time) */
    uint64_t new_entry;  /* its address in the instrumented program, 0 if left in place */
    uint32_t block;      /* blocks [block, block + nblocks); `block` is the entry block */
    uint32_t nblocks;
    uint32_t edge;       /* edges [edge, edge + nedges), those of this procedure */
    uint32_t nedges;
    uint32_t reason;     /* string table offset: why not measured ("" when measured) */
    uint32_t miss;       /* QP_PROC_XLATE: 1 + the counter its translated jumps add to when
                          * they go to no procedure entry; else 0 */
} qp_desc_proc_t;
_Static_assert(sizeof(qp_desc_proc_t) == 48, "qp_desc_proc_t layout");

typedef struct qp_desc_block {
    uint64_t start;      /* original address of the first instruction */
    uint64_t new_start;  /* address of its relocated copy, 0 when not moved */
    uint32_t size;       /* bytes (original) */
    uint32_t ninsns;     /* instructions */
    uint32_t counter;    /* naive: the counter of this block; QP_NOCOUNTER otherwise */
    uint32_t pad;
} qp_desc_block_t;
_Static_assert(sizeof(qp_desc_block_t) == 32, "qp_desc_block_t layout");

/* Edge kinds: cfg_edge_kind_t values (0..9), plus the virtual ones. */
enum {
    QP_EDGE_ENTRY = 32, /* X -> entry block: one per call of the procedure */
    QP_EDGE_ROOT = 33,  /* X -> another block entered from outside (landing pad, interior
                         * entry from another procedure) */
    QP_EDGE_BLOCK = 34, /* never in a description: in lists of counts (--weights), a
                         * block's own count, from = to = its start */
};

typedef struct qp_desc_edge {
    uint32_t from;       /* block index (global), or QP_VIRT */
    uint32_t to;         /* block index (global), or QP_VIRT for edges that leave */
    uint32_t counter;    /* the counter measuring it, or QP_NOCOUNTER (reconstructed) */
    uint8_t kind;        /* cfg_edge_kind_t or QP_EDGE_* */
    uint8_t pad[3];
    uint64_t ret_addr;   /* CFG_EDGE_CALLRET: link-time address of the relocated return
                          * site (what a call here pushes), to match exit back-traces;
                          * else 0 */
} qp_desc_edge_t;
_Static_assert(sizeof(qp_desc_edge_t) == 24, "qp_desc_edge_t layout");

/*
 * The targets of an indirect call (qp_desc_call_t.edge names its table): QP_TARGET_BUCKETS
 * buckets of three counters, chosen by the link-time target T (its run-time address less
 * the load bias) as (T >> 4) % QP_TARGET_BUCKETS: the calls, the sum of T, the sum of
 * T * T (mod 2^64). Every word is a plain sum, so the counts of several processes and
 * runs add up like any counter. A bucket whose calls all went to one target T gives T
 * back (sum = calls * T and sum of squares = calls * T * T); one that several targets
 * shared does not, and its calls stay unattributed.
 */
#define QP_TARGET_BUCKETS 4u
#define QP_TARGET_WORDS (3u * QP_TARGET_BUCKETS)

/* What a direct callee does (qp_desc_call_t.flags). */
enum {
    QP_CALLF_LONGJMP = 1u << 0, /* leaves frames behind: longjmp and the like */
    QP_CALLF_THROW = 1u << 1,   /* throws (or resumes unwinding) */
    QP_CALLF_EXEC = 1u << 2,    /* replaces the program unless it fails: an exec function */
};

/* Call site kinds. */
enum {
    QP_CALL_DIRECT = 1,   /* call to a known address: made as often as its block runs */
    QP_CALL_INDIRECT = 2, /* call through a register or memory: callee unknown */
    QP_CALL_TAIL = 3,     /* jump to another procedure's entry: made as often as its
                           * TAILCALL edge is taken */
    QP_CALL_TAIL_INDIRECT = 4, /* indirect jump that leaves the procedure */
};

/*
 * A call site of a measured procedure, in the order of its blocks: the call graph. Its
 * count is that of block `block` (calls) or of edge `edge` (tail calls), both known from
 * the counters and flow conservation.
 */
typedef struct qp_desc_call {
    uint64_t target;     /* the callee's entry (link time), 0 when indirect */
    uint32_t block;      /* the block (global index) the call or jump ends */
    uint32_t edge;       /* tail calls: the TAILCALL edge (global index); an indirect call:
                          * its target table (QP_TARGET_WORDS counters from this index),
                          * or QP_VIRT; else QP_VIRT */
    uint32_t name;       /* string table: the callee's name ("" when unknown) */
    uint8_t kind;        /* QP_CALL_* */
    uint8_t flags;       /* QP_CALLF_*: what the callee does, known by its name */
    uint8_t pad[2];
} qp_desc_call_t;
_Static_assert(sizeof(qp_desc_call_t) == 24, "qp_desc_call_t layout");

/*****************************************************************************
 * The profile (a.inst.qp)
 *
 * Every process that runs the instrumented program counts into a slot of its own, so
 * that plain (unlocked) increments never race between processes: two runs at once, and
 * a forked child (which the runtime moves to a new slot right after fork returns). The
 * slots are pages of the file mapped MAP_SHARED, so counts survive a crash or SIGKILL.
 * The count of a counter is the sum of the base counters and of that counter in every
 * slot. When a process starts it folds the slots of processes that are gone into the
 * base counters and frees them, so the file holds as many slots as processes ever ran
 * at once. Folds happen under flock(LOCK_EX) on the file, taken only if it can be had
 * within a moment (its holder may be stopped); a fold keeps a journal in its slot record
 * so that a folder killed half-way loses and doubles nothing. A claim needs no lock: a
 * compare-and-swap of a free slot's state and pad (one 64-bit word) to owned, pad 1 (being
 * claimed: no folder touches it) until its owner is written, then pad 0. The runtime
 * creates a profile with its header written before the file appears at its name, and
 * never fills a file it finds there.
 *
 * Layout (every offset a multiple of 4096):
 *   0              the header (qp_prof_hdr_t), padded to 4096
 *   4096           the base counters: ncounters 8-byte counts, padded to 4096 (cbytes)
 *   dumps_off      QP_PROF_MAX_DUMPS exit dumps of QP_PROF_DUMP_SIZE bytes
 *   slots_off      the slot table: nslots qp_prof_slot_t, padded to 4096
 *   slotc_off      the counters of slot k at slotc_off + k * cbytes (the file grows to
 *                  the highest slot used)
 */

#define QP_PROF_MAGIC "QPTPROF1"
#define QP_PROF_VERSION 2             /* profile layout (the description's is QP_FORMAT_VERSION) */
#define QP_PROF_HDR_SIZE 4096u        /* base counters start at this file offset */
#define QP_PROF_MAX_DUMPS 16u         /* exit dumps kept; later ones are only counted */
#define QP_PROF_DUMP_STACK 65536u     /* bytes of stack in one dump */
#define QP_PROF_DUMP_SIZE (4096u + QP_PROF_DUMP_STACK) /* header page + stack */
#define QP_PROF_MAX_SLOTS 4096u       /* processes counting at once; more run unsaved */

enum {
    QP_PROF_SATURATED = 1u << 0, /* a count reached 2^64 - 1 while folding or merging:
                                  * counters equal to UINT64_MAX are lower bounds */
    QP_PROF_LOCKED = 1u << 1,    /* a process made its switchable increments atomic (it
                                  * was about to start a thread) */
    QP_PROF_RACY = 1u << 2,      /* a process could not: threads may have raced on plain
                                  * increments, counts may be low */
};

typedef struct qp_prof_hdr {
    char magic[8];       /* QP_PROF_MAGIC */
    uint32_t version;    /* QP_PROF_VERSION */
    uint32_t flags;      /* QP_PROF_* (set with atomic or) */
    uint64_t id;         /* the description id of the instrumented program */
    uint64_t ncounters;  /* base counters at offset QP_PROF_HDR_SIZE */
    uint64_t dumps_off;  /* file offset of dump 0: QP_PROF_HDR_SIZE + cbytes; dump i at
                          * dumps_off + i * QP_PROF_DUMP_SIZE */
    uint64_t runs;       /* processes that started with this profile (atomic add) */
    uint64_t ndumps;     /* exit dumps taken (atomic add; > QP_PROF_MAX_DUMPS: the extra
                          * ones were dropped and their back-traces are unknown) */
    uint64_t slots_off;  /* file offset of the slot table: dumps_off + the dumps */
    uint64_t nslots;     /* its entries: QP_PROF_MAX_SLOTS */
    uint64_t slotc_off;  /* file offset of slot 0's counters */
    uint64_t forks;      /* forked children that counted in a slot of their own */
    uint64_t unsaved;    /* processes whose counts could not be saved (no free slot,
                          * the file could not be reopened or grown): counts are low */
    uint64_t cancelled;  /* exit dumps taken before an exec that failed (atomic add): not
                          * exits after all; their dumps are marked valid == 2 */
    uint64_t reserved[3];
    char exe[1024];      /* the instrumented executable (/proc/self/exe of the first run) */
} qp_prof_hdr_t;
_Static_assert(sizeof(qp_prof_hdr_t) == 1152, "qp_prof_hdr_t layout");

enum {
    QP_SLOT_FREE = 0,    /* unused, or folded: its counters are zero */
    QP_SLOT_OWNED = 1,   /* a process counts into it (or did, and was not folded yet) */
    QP_SLOT_FOLDING = 2, /* being added to the base counters (or the folder died) */
};

/*
 * A slot record. A process is gone when kill(pid, 0) says so or /proc/PID/stat has
 * another start time; slots of another pid namespace are never folded. The journal
 * makes a fold idempotent: before counter `jour_index` (value `jour_value`) is added
 * to the base counter (then `jour_base`), all three are written and `jour_valid` set;
 * whoever finds it set completes base = jour_base + jour_value, slot counter = 0.
 */
typedef struct qp_prof_slot {
    uint32_t state;      /* QP_SLOT_* */
    uint32_t pad;        /* 1: being claimed (owned; pid, start, pidns not written yet) */
    uint64_t pid;        /* the owner */
    uint64_t start;      /* its start time (clock ticks after boot, /proc), 0 unknown */
    uint64_t pidns;      /* inode of its pid namespace, 0 unknown */
    uint64_t jour_valid; /* the journal below is to be completed */
    uint64_t jour_index;
    uint64_t jour_base;
    uint64_t jour_value;
} qp_prof_slot_t;
_Static_assert(sizeof(qp_prof_slot_t) == 64, "qp_prof_slot_t layout");

/* Bytes of N counters in a profile (base or one slot): a page multiple. */
#define QP_PROF_CBYTES(n) ((((uint64_t)(n)) * 8 + 4095) & ~(uint64_t)4095)
/* Bytes of the slot table. */
#define QP_PROF_TABLE_SIZE ((((uint64_t)QP_PROF_MAX_SLOTS * 64) + 4095) & ~(uint64_t)4095)

/*
 * An exit dump: taken before a call (or jump) to exit(), _exit(), _Exit() or
 * quick_exit(). The frames on the stack then never return, so the call blocks that
 * called them have one more execution than their return edges; qp unwinds the dump with
 * the executable's .eh_frame and, for each return address of a relocated call site
 * (qp_desc_edge_t.ret_addr) found, counts one abandoned execution of that call block
 * (flow from the block to X).
 */
typedef struct qp_dump_hdr {
    uint64_t valid;      /* 1 when the dump is complete; 2: cancelled (it was taken before
                          * an exec that failed: no exit) */
    uint64_t bias;       /* runtime address - link-time address (PIE load bias) */
    uint64_t pc;         /* runtime address where unwinding starts: in the frame of the
                          * procedure calling exit, with the CFA rule of that call */
    uint64_t regs[17];   /* DWARF x86-64 numbering 0..16: rax rdx rcx rbx rsi rdi rbp rsp
                          * r8..r15, return address column 16 = pc; regs[7] = rsp as the
                          * call to exit sees it (the address of stack[0]).
                          * An AArch64 program's runtime (runtime/qprt_isa.h) fills
                          * regs[0..5] x19..x24, regs[6] x29, regs[7] sp, regs[8..11]
                          * x25..x28, regs[15] x30, regs[16] pc; the others are 0 */
    uint64_t stack_len;  /* bytes of stack saved (from regs[7] upwards), <= DUMP_STACK */
    uint64_t tid;        /* thread that called exit */
} qp_dump_hdr_t;
_Static_assert(sizeof(qp_dump_hdr_t) == 176, "qp_dump_hdr_t layout");
/* The stack bytes follow at offset 4096 of the dump. */

#endif
