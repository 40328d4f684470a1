/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_DESC_H
#define QP_DESC_H
/*
 * PURPOSE: the description (.qpt.desc, qp_format.h) in memory: what a driver measured
 * where. Drivers build it and serialize it for the rewriter; readers (report/, for qp)
 * parse it with full validation. This is the format both sides share, so it is in
 * base/, below both (driver/ writes it, report/ reads it; neither includes the other).
 * The input of parse is untrusted: every index, size and string is checked before use,
 * and a failure comes with one line saying why. No printing, no exit, no ELF here: the
 * caller finds the section bytes (cfg/) and prints (tools/).
 * Lifetimes: a qp_desc_t owns its arrays until qp_desc_free. Integers are little-endian:
 * this code runs on x86-64 hosts only.
 */
#include <stddef.h>
#include <stdint.h>

#include "arch/qp_err.h"
#include "base/qp_format.h"

/*
 * Write one line (printf FMT) into WHY (WHYLEN bytes); nothing when WHY is NULL or
 * WHYLEN is 0. The convention of every reader of the formats (here and in report/).
 */
void qp_why(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*****************************************************************************
 * The description
 */

/*
 * What solving a procedure with zero inputs gives (no counter counted, nothing
 * abandoned; for a QP_PROC_BY_CALLS procedure, its entry count unknown or known to be 0):
 * every count 0, and which of them are known. Version 6 keeps it per procedure, so that
 * qp reports a procedure that did not run without decoding its blocks and edges.
 */
typedef struct qp_desc_zero {
    uint32_t nunknown_edges; /* edges whose count stays unknown */
    uint8_t given;           /* 0: not known (the reader solves the procedure itself) */
    uint8_t calls_known;     /* its entry count is known */
    uint8_t insns_exact;     /* every block count is known */
    uint8_t all_known;       /* every edge and block count is known */
} qp_desc_zero_t;

struct qp_desc_lazy; /* the chunks of a version 6 description not decoded yet */

/*
 * The call sites that a report's passes over the whole program look at (qp_desc_keys):
 * every site with QP_CALLF_* flags, and every direct call or tail call whose target is
 * not the entry of exactly one measured procedure counted in itself (not
 * QP_PROC_BY_CALLS): the calls that procedures counted by their calls get, those of
 * PLT stubs and of procedures not measured, exec, longjmp and throw sites. The other
 * sites (indirect calls, calls of measured procedures that count their own entry) matter
 * only to the call graph's printers, which decode every site (qp_desc_need_all).
 * Version 7 stores these in its index and the others in the chunks, so that a flat
 * profile never holds chromium's 3 million call sites (74 MB) in memory.
 */
typedef struct qp_desc_keys {
    uint32_t n;            /* key sites, in call-site (block) order */
    qp_desc_call_t *calls; /* their records */
    uint32_t *index;       /* each one's index among the description's call sites */
    uint32_t *callee;      /* the first procedure whose entry is its target, or QP_VIRT */
    uint32_t *first;       /* per procedure: its first key site (its sites run while
                            * calls[i].block is in its blocks) */
} qp_desc_keys_t;

/*
 * A description's procedures by entry address: a hash table of the lowest index of a
 * procedure at each entry, and per call site the procedure its target is the entry of
 * (a search through chromium's 670,000 entries for each of its 3 million call sites, in
 * each of the report's passes over them, cost more than the rest of the report).
 */
typedef struct qp_entry_map {
    uint32_t *slot;      /* mask + 1 of them: a procedure index, QP_VIRT when empty; NULL
                          * once dropped (qp_entry_map_find is then not available) */
    uint32_t mask;
    uint8_t *kind;       /* per procedure: QP_EMAP_* */
    uint32_t *call_proc; /* per call site: qp_entry_map_find of its target */
} qp_entry_map_t;

enum {
    QP_EMAP_SHARED = 1,   /* another procedure has its entry */
    QP_EMAP_MEASURED = 2, /* QP_PROC_MEASURED */
    QP_EMAP_BY_CALLS = 4, /* QP_PROC_BY_CALLS */
};

/*
 * A description in memory: the header and the four parts, with the on-disk structs.
 * The counts are hdr.nprocs, hdr.nblocks, hdr.nedges and hdr.strtab_size. The arrays are
 * malloc'd and freed by qp_desc_free(); a writer may fill them itself (with malloc) or
 * grow the string table with qp_desc_add_string().
 */
typedef struct qp_desc {
    qp_desc_hdr_t hdr;        /* counts, driver, flags, counters_vaddr; magic, version,
                               * body_size and id are set by qp_desc_serialize and
                               * checked by parse */
    qp_desc_proc_t *procs;    /* hdr.nprocs */
    qp_desc_block_t *blocks;  /* hdr.nblocks */
    qp_desc_edge_t *edges;    /* hdr.nedges */
    qp_desc_call_t *calls;    /* hdr.ncalls */
    char *strtab;             /* hdr.strtab_size bytes; offset 0 is "" */
    size_t strtab_cap;        /* bytes allocated for strtab (qp_desc_add_string) */
    /* Per procedure, or NULL: its solution with zero inputs (for a procedure counted by
     * its calls: with its entry count unknown), and for procedures counted by their
     * calls the same with the entry count known to be 0. A writer may fill them
     * (qp_desc_summarize_fn); qp_desc_free frees them. */
    qp_desc_zero_t *zero;
    qp_desc_zero_t *zero_entry;
    /* Read lazily (qp_desc_parse_lazy): the chunks not decoded yet; NULL when every
     * block, edge and call site is in the arrays. */
    struct qp_desc_lazy *lazy;
    /* Its procedures by entry, when parsed (qp_desc_parse, _lazy); NULL when a writer
     * made it (qp_desc_entry_map builds one then). */
    qp_entry_map_t *by_entry;
    /* Its key call sites (qp_desc_keys), once asked for or read (version 7); NULL
     * before. */
    qp_desc_keys_t *keys;
} qp_desc_t;

/* Fill D->zero and D->zero_entry (D is valid) on up to THREADS threads; 0 or
 * QP_ENOMEM. A writer that can solve flow (report/qp_flow.h) passes one to the driver
 * so that the description carries the summaries. */
typedef int (*qp_desc_summarize_fn)(qp_desc_t *d, unsigned threads);

/*
 * Append the NUL-terminated string S to D's string table (creating the table, with ""
 * at offset 0, on first use) and store its offset in *OFF. The empty string is always
 * offset 0. Returns 0, QP_EINVAL (NULL argument), QP_ERANGE (table over 4 GiB) or
 * QP_ENOMEM. D->strtab may move: earlier pointers into it become invalid.
 */
int qp_desc_add_string(qp_desc_t *d, const char *s, uint32_t *off /*OUT*/);

/* Build *M over D's procedures and call sites (D's procedures and call sites stay as
 * they are while M is used; CALLS 0: not the call sites yet, call_proc NULL); 0 or
 * QP_ENOMEM. Free with qp_entry_map_free. */
int qp_entry_map_build(const qp_desc_t *d, int calls, qp_entry_map_t *m /*OUT*/);
void qp_entry_map_free(qp_entry_map_t *m);

/* M's call_proc for D's call sites (M built with its table); 0 or QP_ENOMEM. */
int qp_entry_map_calls(const qp_desc_t *d, qp_entry_map_t *m);

/* The lowest index of a procedure of D whose entry is ENTRY, or QP_VIRT; *SHARED (may be
 * NULL): another procedure has that entry too. M must have its table. */
uint32_t qp_entry_map_find(const qp_desc_t *d, const qp_entry_map_t *m, uint64_t entry,
                           int *shared);

/* The procedure M says call site CALL's target is the entry of (QP_VIRT: none; the
 * target of an indirect call is 0), and its QP_EMAP_* in *KIND. */
static inline uint32_t
qp_entry_map_callee(const qp_entry_map_t *m, uint32_t call, uint8_t *kind)
{
    uint32_t p = m->call_proc[call];
    *kind = p != UINT32_MAX ? m->kind[p] : 0;
    return p;
}

/* D's map (D->by_entry), or one built into LOCAL (then *OUT is LOCAL: free it with
 * qp_entry_map_free; LOCAL is emptied either way). 0 or QP_ENOMEM. */
int qp_desc_entry_map(const qp_desc_t *d, qp_entry_map_t *local, const qp_entry_map_t **out);

/*
 * D's key call sites (qp_desc_keys_t), made from its call sites on first use when its
 * version does not store them (D is const for its readers: they fill in behind them, as
 * a lazy description's arrays do); NULL when out of memory. Not thread-safe.
 */
const qp_desc_keys_t *qp_desc_keys(const qp_desc_t *d);

/* Is C a tail call (its count is its edge's; a call's is its block's)? */
static inline int
qp_call_is_tail(const qp_desc_call_t *c)
{
    return c->kind == QP_CALL_TAIL || c->kind == QP_CALL_TAIL_INDIRECT;
}

/* The index of the first call site of procedure PROC in D->calls (D->hdr.ncalls when it
 * has none; its sites run while calls[i].block is in its blocks). */
uint32_t qp_desc_first_call(const qp_desc_t *d, uint32_t proc);

/*
 * Check every rule of the format on D (magic and version are not looked at): driver
 * kind, string offsets inside the table and a NUL-terminated table, every procedure's
 * blocks and edges inside the arrays, edge ends inside their procedure's blocks (or X),
 * edge kinds, X only at the ends that allow it, exactly one QP_EDGE_ENTRY edge (X ->
 * entry block) per measured procedure, counters < ncounters or QP_NOCOUNTER, block
 * address ranges without overflow. Returns 0 or QP_EFORMAT with one line in WHY
 * (WHYLEN bytes; WHY may be NULL).
 */
int qp_desc_validate(const qp_desc_t *d, char *why, size_t whylen);

/*
 * The on-disk bytes of D (QP_FORMAT_VERSION, qp_format.h): the header (magic, version,
 * body_size and id filled in here, other fields from D->hdr), then the LZMA2 streams of
 * its index (procedures, key call sites, chunk table, strings) and chunks (blocks,
 * edges, the other call sites). D is validated first (QP_EINVAL when it breaks a rule:
 * call qp_desc_validate to learn which). On success *BUF (malloc'd, the caller frees it)
 * holds *LEN bytes and ((qp_desc_hdr_t *)*BUF)->id is the id the runtime must write into
 * its profiles. QP_ENOMEM on failure, QP_ERANGE when the body would pass 4 GiB.
 */
int qp_desc_serialize(const qp_desc_t *d, uint8_t **buf /*OUT*/, size_t *len /*OUT*/);

/* qp_desc_serialize with the chunks (versions 6 to 8; 8: the index's parts too)
 * compressed on up to THREADS threads (qp_pool.h; 0 or 1: on the caller's alone): the
 * bytes are the same for any THREADS. */
int qp_desc_serialize_threads(const qp_desc_t *d, unsigned threads, uint8_t **buf /*OUT*/,
                              size_t *len /*OUT*/);

/* qp_desc_serialize without the validation: any contents of D's arrays encode (tests
 * make invalid descriptions with a correct id this way, which parse must refuse). */
int qp_desc_encode(const qp_desc_t *d, uint8_t **buf /*OUT*/, size_t *len /*OUT*/);

/* qp_desc_encode in format VERSION: QP_FORMAT_VERSION, or the older QP_FORMAT_V7,
 * QP_FORMAT_V6 or QP_FORMAT_V5 that qp still reads (tests make them this way);
 * QP_EINVAL for another. */
int qp_desc_encode_version(const qp_desc_t *d, uint32_t version, uint8_t **buf /*OUT*/,
                           size_t *len /*OUT*/);

/* qp_desc_encode_version on up to THREADS threads, as qp_desc_serialize_threads. */
int qp_desc_encode_threads(const qp_desc_t *d, uint32_t version, unsigned threads,
                           uint8_t **buf /*OUT*/, size_t *len /*OUT*/);

/*
 * The id of a serialized description BUF (LEN bytes, at least the header; LEN ends the
 * LZMA2 stream): FNV-1a 64 over the header bytes before `id` (magic, version, driver),
 * then the header bytes after it, then every byte after the header up to LEN. Deterministic; any single
 * changed byte changes it. Returns 0 or QP_EINVAL.
 */
int qp_desc_id(const uint8_t *buf, size_t len, uint64_t *id /*OUT*/);

/*
 * Parse the untrusted bytes BUF (LEN bytes, a .qpt.desc section) into *OUT: magic,
 * version (another one is refused, saying that the program must be rewritten again),
 * the header's sizes against each other and LEN (no allocation its bytes could not
 * fill), the stream (it must inflate to exactly body_size bytes; only zero bytes may
 * follow it), the id (a corrupted description does not hash to its id), every record's
 * values against their fields, then qp_desc_validate. *OUT owns copies of everything
 * (BUF may go away). Returns 0, QP_EINVAL, QP_ENOMEM or QP_EFORMAT with one line in WHY
 * (WHYLEN bytes; WHY may be NULL). On failure *OUT is empty (qp_desc_free is still fine).
 */
int qp_desc_parse(const uint8_t *buf, size_t len, qp_desc_t *out /*OUT*/, char *why,
                  size_t whylen);

/* The header of the description BUF (LEN bytes) into *H when its magic is there: its id
 * and counts before anything is read (untrusted: parse checks them). QP_EFORMAT when
 * not a description. */
int qp_desc_peek(const uint8_t *buf, size_t len, qp_desc_hdr_t *h /*OUT*/);

/*
 * Like qp_desc_parse, but a version 6 description's blocks and edges stay compressed in
 * BUF until asked for (qp_desc_need): only the header, the procedures, their zero-input
 * summaries, the call sites, the chunk table and the strings are read and checked now
 * (the id over every byte as well). BUF must then outlive *OUT. Other versions are read
 * whole. The block and edge arrays are allocated at their full size but their memory is
 * only touched (and resident) for the chunks decoded whole (qp_desc_need_block,
 * qp_desc_need_ret, qp_desc_need_all); a procedure decoded on its own (qp_desc_need)
 * keeps its records aside (qp_desc_proc_blocks). Both versions also get D->by_entry.
 */
int qp_desc_parse_lazy(const uint8_t *buf, size_t len, qp_desc_t *out /*OUT*/, char *why,
                       size_t whylen);

/*
 * Make procedure PROC's blocks and edges present (qp_desc_proc_blocks): decode and
 * check its chunk when it was not yet (D is const for its readers: the arrays fill in
 * behind them). Returns 0, QP_ENOMEM or QP_EFORMAT (the chunk is corrupt:
 * qp_desc_error says why). Not thread-safe: one thread reads a lazy description.
 */
int qp_desc_need(const qp_desc_t *d, uint32_t proc);

/* The same for block BLOCK's chunk. */
int qp_desc_need_block(const qp_desc_t *d, uint32_t block);

/*
 * For exec call site CALL of D: *NEXT, the lowest new address of a moved block above
 * its block's (0: none), and *TIE, the highest index of a block at its block's new
 * address (its block's own when no other), without decoding (version 6 keeps them).
 */
int qp_desc_exec_next(const qp_desc_t *d, uint32_t call, uint64_t *next /*OUT*/,
                      uint32_t *tie /*OUT*/);

/* Decode every chunk of D with an edge whose return address may be one of RAS (N,
 * sorted). */
int qp_desc_need_ret(const qp_desc_t *d, const uint64_t *ras, size_t n);

/*
 * The decoded blocks and edges of D, a range at a time: K from 0 up while it returns 1,
 * [*BLOCK, *BLOCK + *NBLOCKS) and [*EDGE, *EDGE + *NEDGES) (empty for a chunk not
 * decoded), in index order. D not lazy: one range, everything.
 */
int qp_desc_decoded(const qp_desc_t *d, uint32_t k, uint32_t *block /*OUT*/,
                    uint32_t *nblocks /*OUT*/, uint32_t *edge /*OUT*/, uint32_t *nedges /*OUT*/);

/* Every chunk of D decoded (qp_desc_need on all): then D is as qp_desc_parse gives it. */
int qp_desc_need_all(qp_desc_t *d, char *why, size_t whylen);

/*
 * A reader done with procedure PROC of lazy description D: the copy of its blocks and
 * edges that qp_desc_need made is freed (pointers from qp_desc_proc_blocks and
 * qp_desc_proc_edges become invalid; asked for again, it is decoded again), and so is
 * its chunk's inflated records once every procedure they were kept for was released.
 * Nothing for a procedure whose chunk was decoded into the arrays, or D not lazy.
 * chromium's flat profile held 100 MB of copies without it.
 */
void qp_desc_release(const qp_desc_t *d, uint32_t proc);

/* Are PROC's blocks and edges present (qp_desc_proc_blocks)? */
int qp_desc_loaded(const qp_desc_t *d, uint32_t proc);

/*
 * Where procedure PROC's blocks (its nblocks, from its entry block) and edges (its
 * nedges) are once present (qp_desc_need, or D not lazy): in D's arrays, or for a lazy
 * description a copy of their own (a procedure decoded on its own is not copied into
 * the arrays: touching their pages for procedures spread over them cost more memory
 * than the records). Read a procedure's records through these.
 */
const qp_desc_block_t *qp_desc_proc_blocks(const qp_desc_t *d, uint32_t proc);
const qp_desc_edge_t *qp_desc_proc_edges(const qp_desc_t *d, uint32_t proc);

/*
 * For a procedure whose chunk is not decoded: is every counter its chunk's blocks and
 * edges may use 0 in COUNTERS (the profile's, D->hdr.ncounters of them)? Then PROC
 * counted nothing, without decoding it. 0 when PROC's chunk is decoded (look at its
 * counters) or when one of them counted.
 */
int qp_desc_chunk_zero(const qp_desc_t *d, uint32_t proc, const uint64_t *counters);

/*
 * FN(ARG) called by lazy description D after every few MB of its chunks' streams read
 * (chromium's flat profile reads 40 MB of them, each once or twice): a caller that
 * mapped the description's bytes from a file may drop the pages read (they come back
 * from the file when read again), which would otherwise stay resident to the end.
 * Nothing for a description read whole.
 */
void qp_desc_set_release(qp_desc_t *d, void (*fn)(void *arg), void *arg);

/* Why the last qp_desc_need on D failed ("" when none did). */
const char *qp_desc_error(const qp_desc_t *d);

/* Free D's arrays and zero it. NULL is fine. */
void qp_desc_free(qp_desc_t *d);

/* The string at offset OFF of D's table ("" when OFF is out of range). */
const char *qp_desc_str(const qp_desc_t *d, uint32_t off);

/*
 * The global index of procedure PROC's QP_EDGE_ENTRY edge (its calls), or QP_VIRT when
 * it has none (procedures not measured).
 */
uint32_t qp_desc_entry_edge(const qp_desc_t *d, uint32_t proc);

/* A name for an edge kind: cfg's ("fall", "callret", ...), "entry", "root", or "?". */
const char *qp_edge_kind_name(uint8_t kind);

/* True when an edge of KIND leaves its procedure (to X): return, tailcall, ... */
int qp_edge_kind_leaves(uint8_t kind);

#endif
