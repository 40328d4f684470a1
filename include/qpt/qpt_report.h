/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QPT_QPT_REPORT_H
#define QPT_QPT_REPORT_H
/*
 * PURPOSE: reading what was measured, for tools that print it (qp, dyn, the metrics of
 * qpt-rewrite): the files they read and write the way qpt's own tools do (a regular file
 * only; an output written whole or not at all), and the calls of an earlier run of a
 * program from its profile; the block and address traces of --driver=trace programs;
 * pprof's profile.proto, encoded.
 * Conventions as in qpt.h: 0 (or a count, a descriptor) or a
 * negative QPT_E* code, one line in the caller's WHY buffer; the library never prints
 * and never reads the environment. Threads: qpt_profile_entry_calls and qpt_tr_desc_read
 * are safe from any thread (they read the program through libbfd under libqpt's lock,
 * as qpt_open); every other call is safe on distinct objects (qpt(3), THREAD SAFETY).
 */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*****************************************************************************
 * Files
 */

/*
 * PATH opened for reading, a regular file only: a FIFO, device or socket is refused
 * without blocking, and so is a folder (qpt_strerror names the code); WHY says why.
 * Returns the descriptor (O_CLOEXEC, blocking reads), which the caller closes, or a
 * negative code.
 */
int qpt_file_open_read(const char *path, char *why, size_t whylen);

/*
 * An output written atomically: a temporary file beside PATH, renamed over PATH by
 * qpt_out_commit, removed by qpt_out_abort; a reader never sees PATH half written and a
 * failure leaves PATH as it was. PATH must not be a folder, FIFO or device (refused,
 * never replaced). qpt_out_open gives the object and the descriptor to write to (*FD);
 * PATH must outlive the object. Returns 0 or a QPT_E* code with WHY.
 */
typedef struct qpt_out qpt_out_t;

int qpt_out_open(qpt_out_t **out /*OUT*/, const char *path, int *fd /*OUT*/, char *why,
                 size_t whylen);

/*
 * Sync the data to disk, close and rename the output over its path, and free O
 * (FD_CLOSED: the caller closed the descriptor itself, e.g. with fclose of a stream on
 * it; the temporary is then opened again to be synced). 0, or
 * QPT_EIO with WHY: the output is then removed (and O freed) as by qpt_out_abort.
 */
int qpt_out_commit(qpt_out_t *o, int fd_closed, char *why, size_t whylen);

/* Remove the output and free O (its descriptor closed unless FD_CLOSED). NULL is fine;
 * errno is kept. */
void qpt_out_abort(qpt_out_t *o, int fd_closed);

/* The temporary file O writes (valid until O is committed or aborted), for a tool's
 * signal handler that removes it; NULL for O NULL. */
const char *qpt_out_temp(const qpt_out_t *o);

/*****************************************************************************
 * The calls of an earlier run
 */

/* The calls of one procedure in a run. */
typedef struct qpt_entry_calls {
    uint64_t entry; /* its entry address, as the profiled program was linked */
    uint64_t calls; /* how often it was called */
} qpt_entry_calls_t;

/*
 * Read the profile PATH and the description of the program that wrote it (the executable
 * its header names), check one against the other, and give the calls of every measured
 * procedure whose count the counters determine: *OUT (malloc'd, the caller frees it)
 * gets *N of them in the description's order. 0, or a QPT_E* code with one line in WHY
 * (the reason; the caller names PATH); *OUT is then NULL.
 */
int qpt_profile_entry_calls(const char *path, qpt_entry_calls_t **out /*OUT*/,
                            size_t *n /*OUT*/, char *why, size_t whylen);

/*****************************************************************************
 * Block and address traces (qp trace)
 *
 * A program rewritten with --driver=trace or trace-naive carries a trace description;
 * each thread of its runs writes a trace file (PROGRAM.trace.TID). The walks regenerate
 * from one the blocks that ran, in order, or (--trace-mem) the data accesses, and say
 * where they could not follow exactly (marks). What the trace does not cover (calls of
 * code not traced) is counted per trace as it is walked (qpt_tr_untraced_t).
 */

/* A program's trace description (opaque). */
typedef struct qpt_tr_desc qpt_tr_desc_t;

/* Read the trace description of PROGRAM. 0, or a QPT_E* code with one line in WHY. */
int qpt_tr_desc_read(const char *program, qpt_tr_desc_t **out /*OUT*/, char *why,
                     size_t whylen);
void qpt_tr_desc_free(qpt_tr_desc_t *d);

typedef struct qpt_tr_desc_info {
    uint32_t nprocs;        /* procedures traced */
    uint32_t nblocks;       /* their blocks */
    int has_mem;            /* rewritten with --trace-mem: the address walk works */
    int lists_untraced;     /* the description lists the code not traced (0: written
                             * by an older qpt-rewrite; nuntraced is then 0) */
    uint32_t nuntraced;     /* entries of that list (PLT stubs, GOT calls, procedures
                             * left in place) */
    uint32_t left_in_place; /* procedures the rewrite left in place (not traced) */
} qpt_tr_desc_info_t;

void qpt_tr_desc_info(const qpt_tr_desc_t *d, qpt_tr_desc_info_t *out /*OUT*/);

/* Block B's start (link-time address), and the end of its traced code (has_mem only,
 * else 0). */
uint64_t qpt_tr_block_start(const qpt_tr_desc_t *d, uint32_t b);
uint64_t qpt_tr_block_mem_end(const qpt_tr_desc_t *d, uint32_t b);

/* Block B's instructions: how many, and *LENS their lengths in order (D's storage). */
uint32_t qpt_tr_block_insns(const qpt_tr_desc_t *d, uint32_t b, const uint8_t **lens /*OUT*/);

/* Entry I (< nuntraced) of the list of code not traced: its name (D's storage), and
 * whether it is a procedure left in place. */
const char *qpt_tr_untraced_name(const qpt_tr_desc_t *d, uint32_t i);
int qpt_tr_untraced_is_left(const qpt_tr_desc_t *d, uint32_t i);

/* One thread's trace file, read whole (opaque). */
typedef struct qpt_tr_file qpt_tr_file_t;

/* Read the trace file PATH (its records and, with --trace-mem, its address values).
 * 0, or a QPT_E* code with one line in WHY (which names PATH). */
int qpt_tr_file_read(const char *path, qpt_tr_file_t **out /*OUT*/, char *why,
                     size_t whylen);
void qpt_tr_file_free(qpt_tr_file_t *f);

typedef struct qpt_tr_file_info {
    uint64_t tid;    /* the thread that wrote it */
    uint64_t bytes;  /* the file's size */
    uint64_t nvals;  /* address values it holds */
    uint64_t bias;   /* the program's load bias in that run */
} qpt_tr_file_info_t;

void qpt_tr_file_info(const qpt_tr_file_t *f, qpt_tr_file_info_t *out /*OUT*/);

/* Is F a trace of the program (and the rewrite of it) that D describes? */
int qpt_tr_file_matches(const qpt_tr_file_t *f, const qpt_tr_desc_t *d);

/* What a walk tells. Each callback returns non-zero to stop the walk. */
typedef struct qpt_tr_sink {
    /* Block BLOCK (its start address ADDR) ran. */
    int (*block)(void *arg, uint32_t block, uint64_t addr);
    /* The walk could not follow exactly here: WHAT says why ("cut: ..." where the
     * trace was cut); ADDR a block's start or 0. */
    int (*mark)(void *arg, const char *what, uint64_t addr);
    void *arg;
    /* When not NULL: a signal handler placed exactly starts; it interrupted the
     * instruction at INSN (link-time address; 0: code not traced). */
    int (*signal)(void *arg, uint64_t insn);
} qpt_tr_sink_t;

/* Access kinds of qpt_tr_mem_sink_t.access (both bits: a modify). */
enum { QPT_TR_LOAD = 1, QPT_TR_STORE = 2 };

typedef struct qpt_tr_mem_sink {
    /* The instruction at INSN (link-time address) accessed SIZE bytes at ADDR (run-time
     * address); ACCESS is QPT_TR_LOAD, QPT_TR_STORE or both. */
    int (*access)(void *arg, unsigned access, uint64_t addr, uint32_t size, uint64_t insn);
    /* As qpt_tr_sink_t's (also: an access not traced, values that ran out). */
    int (*mark)(void *arg, const char *what, uint64_t addr);
    void *arg;
} qpt_tr_mem_sink_t;

typedef struct qpt_tr_stats {
    uint64_t records; /* records read (events and markers) */
    uint64_t blocks;  /* blocks regenerated */
    uint64_t marks;   /* places where the walk said it could not follow */
    int complete;     /* the trace ends with its end marker */
} qpt_tr_stats_t;

/*
 * Walk F (a trace of D) block by block into SINK, or (qpt_tr_mem_regen, has_mem) access
 * by access into MSINK (*NACC: the accesses given). 0, QPT_EINVAL when a record names no
 * event of D, or what a callback's non-zero return gives back.
 */
int qpt_tr_regen(const qpt_tr_desc_t *d, const qpt_tr_file_t *f, const qpt_tr_sink_t *sink,
                 qpt_tr_stats_t *st /*OUT*/);
int qpt_tr_mem_regen(const qpt_tr_desc_t *d, const qpt_tr_file_t *f,
                     const qpt_tr_mem_sink_t *msink, qpt_tr_stats_t *st /*OUT*/,
                     uint64_t *nacc /*OUT*/);

/*
 * What the traces of D do not cover, counted as they are walked: _block with every block
 * a walk gives, _mark with every mark, _end at the end of a trace (a trace that ended in
 * a call through a pointer); or _walk, the same over a whole file without a sink (for
 * the address walk, which gives no blocks). _reset zeroes it for the next trace; _add
 * adds U into TO. _top: the entries of D's list most called (at most MAX into TOP, most
 * first; *MORE: how many more were called; *POINTERS: calls through pointers, no entry);
 * returns how many were written. Not thread-safe on one object.
 */
typedef struct qpt_tr_untraced qpt_tr_untraced_t;

typedef struct qpt_tr_untraced_counts {
    uint64_t calls; /* calls of code not traced */
    uint64_t leaf;  /* calls of C library functions that never call back */
    uint64_t cuts;  /* "cut:" marks */
} qpt_tr_untraced_counts_t;

int qpt_tr_untraced_create(const qpt_tr_desc_t *d, qpt_tr_untraced_t **out /*OUT*/);
void qpt_tr_untraced_destroy(qpt_tr_untraced_t *u);
void qpt_tr_untraced_reset(qpt_tr_untraced_t *u);
void qpt_tr_untraced_block(qpt_tr_untraced_t *u, uint32_t block);
void qpt_tr_untraced_mark(qpt_tr_untraced_t *u, const char *what);
void qpt_tr_untraced_end(qpt_tr_untraced_t *u);
void qpt_tr_untraced_add(qpt_tr_untraced_t *to, const qpt_tr_untraced_t *u);
int qpt_tr_untraced_walk(const qpt_tr_file_t *f, qpt_tr_untraced_t *u);
uint32_t qpt_tr_untraced_top(const qpt_tr_untraced_t *u, uint32_t *top /*OUT*/, uint32_t max,
                             uint32_t *more /*OUT*/, uint64_t *pointers /*OUT*/);
void qpt_tr_untraced_counts(const qpt_tr_untraced_t *u, qpt_tr_untraced_counts_t *out /*OUT*/);
/* The calls of entry I of D's list of code not traced. */
uint64_t qpt_tr_untraced_by(const qpt_tr_untraced_t *u, uint32_t i);

/*
 * A two-level LRU data cache (as cachegrind's D1 and LL) fed with an address walk. A
 * cache is "SIZE:WAYS:LINE" (SIZE with k, m or g; LINE and SIZE/(WAYS*LINE) powers of 2).
 */
typedef struct qpt_tr_cachesim qpt_tr_cachesim_t;

typedef struct qpt_tr_cache_counts {
    uint64_t reads, writes;                     /* references (a modify is a read) */
    uint64_t l1_read_misses, l1_write_misses;   /* first level */
    uint64_t ll_read_misses, ll_write_misses;   /* last level */
} qpt_tr_cache_counts_t;

/* Is SPEC a valid cache? */
int qpt_tr_cache_spec_ok(const char *spec);
/* A simulator of the caches L1 and LL (specs). QPT_EINVAL for a bad spec, QPT_ENOMEM. */
int qpt_tr_cachesim_create(const char *l1, const char *ll, qpt_tr_cachesim_t **out /*OUT*/);
void qpt_tr_cachesim_destroy(qpt_tr_cachesim_t *s);
void qpt_tr_cachesim_access(qpt_tr_cachesim_t *s, uint64_t addr, uint32_t size, int write);
void qpt_tr_cachesim_counts(const qpt_tr_cachesim_t *s, qpt_tr_cache_counts_t *out /*OUT*/);

/*****************************************************************************
 * pprof profiles (issue 30: the protobuf encoding out of tools/)
 *
 * A profile as pprof reads it: the messages of profile.proto (github.com/google/pprof),
 * encoded in the order they are given, the string table last; the caller compresses
 * the bytes with gzip, as pprof expects them. Strings are interned (index 0 is "") and
 * copied. Each call after a failure to allocate does nothing; qpt_pprof_bytes then says
 * QPT_ENOMEM. Not thread-safe on one object; distinct objects are independent.
 */
typedef struct qpt_pprof qpt_pprof_t;

/* An empty profile. 0 or QPT_ENOMEM (*OUT is then NULL). */
int qpt_pprof_create(qpt_pprof_t **out /*OUT*/);
void qpt_pprof_destroy(qpt_pprof_t *pp);

/* A sample type (ValueType): the TYPE of each sample's value at this position, in UNIT. */
void qpt_pprof_sample_type(qpt_pprof_t *pp, const char *type, const char *unit);

/* The mapping (id 1) of the code [LO, HI) of the file PATH with BUILD_ID (hex, may be
 * ""), whose functions, file names and line numbers the profile gives. */
void qpt_pprof_mapping(qpt_pprof_t *pp, uint64_t lo, uint64_t hi, const char *path,
                       const char *build_id);

/* Function ID: NAME as shown, SYSTEM_NAME as stored (mangled), its source FILE (NULL:
 * not known) and first LINE (0: not known). */
void qpt_pprof_function(qpt_pprof_t *pp, uint64_t id, const char *name,
                        const char *system_name, const char *file, uint64_t line);

/* Location ID at ADDR in the mapping: in function FUNC_ID, at source LINE (0: none). */
void qpt_pprof_location(qpt_pprof_t *pp, uint64_t id, uint64_t addr, uint64_t func_id,
                        uint64_t line);

/* A sample of location LOC_ID with its N values, one per sample type. */
void qpt_pprof_sample(qpt_pprof_t *pp, uint64_t loc_id, const uint64_t *values, size_t n);

/* A comment, and the sample type pprof shows by default. */
void qpt_pprof_comment(qpt_pprof_t *pp, const char *text);
void qpt_pprof_default_sample_type(qpt_pprof_t *pp, const char *type);

/*
 * End the profile (the string table) and give its encoded bytes: *BYTES (PP's storage,
 * valid until qpt_pprof_destroy) and *LEN. No call may add to PP after it. 0, or
 * QPT_ENOMEM when memory ran out on the way.
 */
int qpt_pprof_bytes(qpt_pprof_t *pp, const uint8_t **bytes /*OUT*/, size_t *len /*OUT*/);

#ifdef __cplusplus
}
#endif

#endif
