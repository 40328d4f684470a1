/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QPT_QPT_QP_H
#define QPT_QPT_QP_H
/*
 * PURPOSE: what qp report prints, read through handles (issue 30: the report tool on the
 * public API). A set (qpt_qp_set_t) holds the profiles given, sorted by the module that
 * wrote them (a program, or a library it loaded); a module (qpt_qp_t) is an executable
 * and its profiles summed, loaded into a report: every measured procedure's calls and
 * instructions, per-block and per-edge counts by flow conservation (qpt_qp_flow_t), the
 * call graph (qpt_qp_calls_t), per-line counts for lcov (qpt_qp_lines_t), and one view
 * of several modules (qpt_qp_process_t). Everything is reached by index: procedures
 * 0 .. nprocs - 1 of the description, their blocks and edges by local index, rows,
 * arcs, lines; an index out of range is QPT_EINVAL, never a crash. Small value structs
 * (caller's storage) carry what one index says; the strings in them belong to the
 * module (or its set) and stay valid until it is freed.
 * Conventions as in qpt.h: 0 or a negative QPT_E* code, one line in the caller's WHY
 * buffer; the library never prints and never reads the environment. Threads: one thread
 * at a time per set (its modules decode parts of their descriptions on demand); distinct
 * sets are independent (executables are read through libbfd under libqpt's lock, as
 * qpt_open).
 */
#include <stddef.h>
#include <stdint.h>

/* With qpt_demangle and qpt_module_sep of <qpt/qpt.h>. */

#ifdef __cplusplus
extern "C" {
#endif

/* "None" for an index: X (the virtual ENTRY/EXIT node) as an edge end, a PLT stub's
 * procedure, a procedure not found. */
#define QPT_QP_NONE UINT32_MAX

/* Exit dumps a profile keeps (later exits are only counted: qpt_qp_info_t.ndropped). */
#define QPT_QP_MAX_DUMPS 16u

typedef struct qpt_qp_set qpt_qp_set_t;
typedef struct qpt_qp qpt_qp_t;

/*****************************************************************************
 * Reading, loading, naming
 */

/* qpt_qp_set_read's FLAGS. */
enum {
    QPT_QP_ONE = 1u << 0,        /* every profile into one module (qp merge) */
    QPT_QP_BACKGROUND = 1u << 1, /* the counters read on another thread meanwhile */
};

/*
 * Read the profiles FILES[0 .. NFILES - 1] and sort them into modules: by the executable
 * each names (or the description id it has), in the order first named; all into one
 * module of the file EXE when EXE is not NULL, or of the first profile's file with
 * QPT_QP_ONE. A profile that names no executable needs EXE (or QPT_QP_ONE). *OUT: free
 * with qpt_qp_set_free. 0, or a QPT_E* code with WHY ("PATH: why", PATH the file at
 * fault).
 *
 * With QPT_QP_BACKGROUND, each profile's header and layout are read and checked before
 * this returns, and its counters and dumps (chromium's: 0.4 s of reading) are read on
 * another thread while the caller goes on (qpt_qp_load opens the executable and reads
 * its description meanwhile, and waits for them before summing; FILES must stay valid
 * until then). That read can still fail (an I/O error, a file cut short meanwhile):
 * qpt_qp_set_wait says so, and qpt_qp_load's failure is then the read's.
 */
int qpt_qp_set_read(const char *const *files, int nfiles, const char *exe, unsigned flags,
                    qpt_qp_set_t **out /*OUT*/, char *why, size_t whylen);

/*
 * Wait for the counters qpt_qp_set_read reads with QPT_QP_BACKGROUND (at once without):
 * 0, or the QPT_E* code with WHY that qpt_qp_set_read would have returned had it read
 * them itself. A caller refusing something before qpt_qp_load tells this failure
 * first, as it comes first without QPT_QP_BACKGROUND.
 */
int qpt_qp_set_wait(qpt_qp_set_t *s, char *why, size_t whylen);

/* Free S, its modules and what they gave. NULL is fine. */
void qpt_qp_set_free(qpt_qp_set_t *s);

/* How many modules S has, and module K of them (NULL when K is out of range). */
uint32_t qpt_qp_set_count(const qpt_qp_set_t *s);
qpt_qp_t *qpt_qp_set_module(const qpt_qp_set_t *s, uint32_t k);

/*
 * Open PATH, the original (uninstrumented) executable, for every module of S: the
 * listing and BOLT's branch sites read its code, pprof's mapping names it. 0, or a
 * QPT_E* code with WHY ("PATH: why").
 */
int qpt_qp_set_original(qpt_qp_set_t *s, const char *path, char *why, size_t whylen);

/*
 * Sum the profiles of S's first module (read with QPT_QP_ONE) without a description and write
 * the sum to OUTPUT (qp merge): written whole or not at all. 0, or a QPT_E* code with
 * WHY ("PATH: why").
 */
int qpt_qp_set_merge(qpt_qp_set_t *s, const char *output, char *why, size_t whylen);

/* The executable of M (the file its first profile names, or EXE), and its profiles: *N
 * paths in the order given (the caller's strings). */
const char *qpt_qp_exe(const qpt_qp_t *m);
const char *const *qpt_qp_files(const qpt_qp_t *m, uint32_t *n /*OUT*/);

/* qpt_qp_load's FLAGS. */
enum {
    QPT_QP_LAZY = 1u << 0, /* decode a procedure's blocks and edges only when asked
                            * for: a flat profile of a big program reads few of them.
                            * Such a module has no call sites (qpt_qp_nsites 0), call
                            * graph nor lines (QPT_EINVAL): they need every part. */
};

/*
 * Load module M: open its executable, check each profile against the description in it
 * (a profile of another executable or another rewrite is refused before the description
 * is read), sum them, unwind their exit dumps, reconstruct every count, and count the
 * PLT stubs from their callers. PROGRESS (may be NULL) is told each phase ("opening the
 * executable", ...) with ARG. 0, or a QPT_E* code with WHY ("PATH: why").
 */
int qpt_qp_load(qpt_qp_t *m, unsigned flags, void (*progress)(void *arg, const char *phase),
                void *arg, char *why, size_t whylen);

/* qpt_qp_name's FLAGS. */
enum {
    QPT_QP_DEMANGLE = 1u << 0, /* C++, Rust and D names demangled (PLT stubs' too) */
    QPT_QP_QUALIFY = 1u << 1,  /* procedures sharing a name get " [file.c]" (their entry's
                                * source file) */
};

/* The names M's accessors give as printed (.name; .stored_name stays as stored). Out of
 * memory, the stored names are given. Call once, after qpt_qp_load. */
void qpt_qp_name(qpt_qp_t *m, unsigned flags);

/*****************************************************************************
 * A module
 */

/* What measured the program (qpt_qp_info_t.driver). */
enum {
    QPT_QP_DRIVER_EDGES = 1,  /* --driver=qp: counters on the edges outside a spanning tree */
    QPT_QP_DRIVER_BLOCKS = 2, /* --driver=naive: a counter in every block */
    QPT_QP_DRIVER_OTHER = 3,  /* a libqpt mutator's words (no procedure described) */
};

typedef struct qpt_qp_info {
    const char *exe;           /* qpt_qp_exe */
    const char *code_path;     /* the file whose code is shown: the original (qpt_qp_set_
                                * original) when given, else the executable */
    const char *code_build_id; /* that file's build-id in hex ("" when none) */
    int is_library;            /* a shared library, not a program */
    uint32_t driver;           /* QPT_QP_DRIVER_* */
    int atomic;                /* counters incremented atomically */
    int threads;               /* the program can start threads */
    int fork_unseen;           /* a fork may happen in code left in place */
    uint32_t nprocs;           /* procedures described (measured or not) */
    uint32_t nblocks;          /* their blocks (numbers 0 .. nblocks - 1: block_base) */
    uint64_t runs;             /* runs summed into the profiles */
    uint64_t forks;            /* forked processes among them */
    uint64_t unsaved;          /* processes that could not save their counts */
    uint32_t nrunning;         /* processes still running when read */
    uint64_t running_pid;      /* one of them */
    uint64_t ndropped;         /* exits that left no usable stack dump */
    int saturated;             /* a count reached 2^64 - 1 while summing profiles */
    uint64_t incomplete;       /* exit back-traces not followed to the outermost frame */
    uint32_t nmeasured;        /* measured procedures (rows QPT_QP_PROCS) */
    uint32_t nplt;             /* PLT stubs counted (rows QPT_QP_STUBS) */
    uint32_t nunmeasured;      /* procedures not measured (qpt_qp_unmeasured) */
    uint64_t calls_unmeasured; /* calls measured code made to them */
    uint64_t total_insns;      /* instructions of every row (saturated) */
    uint32_t nviolating;       /* measured procedures whose flow is inconsistent */
    uint32_t napprox;          /* ... whose counts may be approximate */
    uint32_t nunknown;         /* ... with counts not determined */
    uint32_t nsaturated;       /* ... with a counter at 2^64 - 1 */
    uint32_t napprox_resume;   /* approximate ones for QPT_QP_APPROX_RESUME */
    uint32_t napprox_other;    /* approximate ones for another reason (exceptions,
                                * longjmp, guessed jump targets), RESUME or not */
} qpt_qp_info_t;

/* What M's report says of the whole run (M loaded). 0 or QPT_EINVAL. */
int qpt_qp_info(const qpt_qp_t *m, qpt_qp_info_t *out /*OUT*/);

/* A library's report read alone: how many of its procedures a throw or longjmp in
 * another module (a callback that threw) may leave, unseen and unmarked. */
uint32_t qpt_qp_unseen_leaving(const qpt_qp_t *m);

/* What any module saw of a throw or a longjmp marks the procedures of every one of
 * MODS[0 .. N - 1] it may leave (a report of several modules of one process). */
void qpt_qp_mark_leaving_all(qpt_qp_t *const *mods, uint32_t n);

/*****************************************************************************
 * Rows: the counts of measured procedures and PLT stubs
 */

/* Row flags (qpt_qp_row_t.flags): why a count may not be exact. */
enum {
    QPT_QP_PLT = 1u << 0,           /* a PLT stub, counted from its callers */
    QPT_QP_VIOLATION = 1u << 1,     /* flow conservation fails in it */
    QPT_QP_APPROX = 1u << 2,        /* may be approximate (any reason below, or
                                     * exceptions, longjmp, guessed jump targets) */
    QPT_QP_UNKNOWN = 1u << 3,       /* some counts are not determined */
    QPT_QP_SATURATED = 1u << 4,     /* a counter reached 2^64 - 1: lower bounds */
    QPT_QP_APPROX_LAZY = 1u << 5,   /* a stub bound lazily: each symbol's first call ran
                                     * more than is counted */
    QPT_QP_APPROX_CALLER = 1u << 6, /* a stub called from approximate code */
    QPT_QP_APPROX_RESUME = 1u << 7, /* in a Go program whose function names could not be
                                     * read: a stack growth may count as a call */
};

/* Why a Go program's counts are all marked approximate (QPT_QP_APPROX_RESUME): the one
 * phrase qpt-rewrite's note and qp report's warning and footnote say it with. */
#define QPT_GO_NAMES_UNREAD                                                             \
    "a Go program whose function names could not be read (no symbol table, and a "     \
    ".gopclntab older than Go 1.16, missing or damaged)"

/* Which rows (qpt_qp_row's KIND). */
enum {
    QPT_QP_FLAT = 0,  /* procedures and stubs in flat-profile order: instructions, then
                       * calls, descending, then name (nmeasured + nplt) */
    QPT_QP_PROCS = 1, /* the measured procedures alone, in that order (nmeasured) */
    QPT_QP_STUBS = 2, /* the PLT stubs, by entry (nplt) */
};

typedef struct qpt_qp_row {
    uint32_t proc;           /* procedure index, QPT_QP_NONE for a PLT stub */
    uint32_t stub;           /* a stub's index among QPT_QP_STUBS, else QPT_QP_NONE */
    uint32_t flags;          /* QPT_QP_PLT, ... */
    uint64_t calls;          /* times called, when calls_known */
    uint64_t insns;          /* instructions executed (known blocks only) */
    int calls_known;         /* the call count is determined */
    int insns_exact;         /* every block count is determined */
    uint64_t entry;          /* a stub's address (link time); else 0 */
    const char *name;        /* as printed (qpt_qp_name) */
    const char *stored_name; /* as stored ("puts@plt" for a stub) */
} qpt_qp_row_t;

/* Row I of KIND (QPT_QP_FLAT, ...). 0, or QPT_EINVAL (I out of range, bad KIND). */
int qpt_qp_row(const qpt_qp_t *m, int kind, uint32_t i, qpt_qp_row_t *out /*OUT*/);

/* Procedure I (< nunmeasured) not measured, by address: *PROC, and *CALLS the calls
 * measured code made to it. 0 or QPT_EINVAL. */
int qpt_qp_unmeasured(const qpt_qp_t *m, uint32_t i, uint32_t *proc /*OUT*/,
                      uint64_t *calls /*OUT*/);

/*****************************************************************************
 * Procedures, blocks, edges, call sites (as described)
 */

typedef struct qpt_qp_proc {
    const char *name;        /* as printed */
    const char *stored_name; /* as stored (mangled) */
    uint64_t entry;          /* its entry, original address */
    uint64_t new_entry;      /* where the rewrite put it (symbols name it there) */
    int measured;            /* its counts were measured */
    const char *reason;      /* not measured: why ("" when the rewrite said nothing) */
    uint32_t nblocks;        /* its blocks: local indices 0 .. nblocks - 1 */
    uint32_t nedges;         /* its edges, likewise */
    uint32_t block_base;     /* its first block's number in the program (block numbers
                              * are unique: block_base + local index) */
} qpt_qp_proc_t;

/* Procedure PROC (< nprocs). 0 or QPT_EINVAL. */
int qpt_qp_proc(const qpt_qp_t *m, uint32_t proc, qpt_qp_proc_t *out /*OUT*/);

/*
 * The procedure FUNC names: its stored or demangled name (with or without the
 * parameters), or FILE:NAME (FILE a shell pattern for its entry's source file); the
 * measured one first. QPT_QP_NONE when none.
 */
uint32_t qpt_qp_find(const qpt_qp_t *m, const char *func);

/*
 * qpt_qp_find for a report of one procedure: 0 and *PROC, or QPT_ENOTFOUND (no such
 * procedure), QPT_ERANGE (the name is ambiguous: static functions of several files, or
 * overloads) or QPT_EUNSUPP (not measured), each with one line in WHY (without the
 * executable's name).
 */
int qpt_qp_find_measured(const qpt_qp_t *m, const char *func, uint32_t *proc /*OUT*/,
                         char *why, size_t whylen);

/* Does NAME name the procedure whose stored name is STORED: equal to it, to its demangled
 * form, or to that form without the parameter list? 1 or 0. */
int qpt_qp_name_matches(const char *stored, const char *name);

/* Do the N first bytes of PATTERN (a shell pattern) name FILE, by its path or by its last
 * component? 1 or 0 (FILE NULL: 0). */
int qpt_qp_path_matches(const char *pattern, size_t n, const char *file);

typedef struct qpt_qp_block {
    uint64_t start;     /* original address */
    uint64_t size;      /* bytes */
    uint32_t ninsns;    /* instructions */
    uint64_t abandoned; /* executions left for good at exits (exit back-traces) */
} qpt_qp_block_t;

/* Block B (local) of procedure PROC. 0, QPT_EINVAL, or QPT_EFORMAT when its part of a
 * lazily read description does not decode. */
int qpt_qp_block(const qpt_qp_t *m, uint32_t proc, uint32_t b, qpt_qp_block_t *out /*OUT*/);

typedef struct qpt_qp_edge {
    uint32_t from;    /* local block, QPT_QP_NONE for X (entry) */
    uint32_t to;      /* local block, QPT_QP_NONE for X (exit) */
    const char *kind; /* "fall", "jump", "entry", "return", ... */
} qpt_qp_edge_t;

/* Edge E (local) of procedure PROC. 0, QPT_EINVAL or QPT_EFORMAT. */
int qpt_qp_edge(const qpt_qp_t *m, uint32_t proc, uint32_t e, qpt_qp_edge_t *out /*OUT*/);

/*
 * Which edges of PROC a branch profile has (BOLT's CFG: jumps, conditional jumps both
 * ways, jump tables, and a fall-through into a block something else enters): KEEP gets
 * one byte per edge (1: kept). 0, QPT_EINVAL or QPT_ENOMEM.
 */
int qpt_qp_branch_edges(const qpt_qp_t *m, uint32_t proc, uint8_t *keep /*OUT*/);

typedef struct qpt_qp_site {
    uint32_t block;   /* the calling block (local) */
    uint32_t edge;    /* a tail call: its edge (local; its count is the calls); else
                       * QPT_QP_NONE (the block's count is) */
    uint64_t target;  /* the callee's entry, 0 for a call through a pointer */
    const char *name; /* the callee's name as stored ("" when unknown) */
} qpt_qp_site_t;

/* How many call sites PROC has, and site I of them (in block order). */
uint32_t qpt_qp_nsites(const qpt_qp_t *m, uint32_t proc);
int qpt_qp_site(const qpt_qp_t *m, uint32_t proc, uint32_t i, qpt_qp_site_t *out /*OUT*/);

/*****************************************************************************
 * Counts of one procedure (flow conservation)
 */

typedef struct qpt_qp_flow qpt_qp_flow_t;

/* How a count is known. */
enum {
    QPT_QP_COUNT_UNKNOWN = 0, /* not determined by the measured counts */
    QPT_QP_COUNT_MEASURED,    /* read from a counter */
    QPT_QP_COUNT_SOLVED,      /* reconstructed by flow conservation */
    QPT_QP_COUNT_CLAMPED,     /* conservation asked for a negative count: set to 0 */
};

/* A short name of a QPT_QP_COUNT_* state ("measured", "reconstructed", ...). */
const char *qpt_qp_count_state_name(int state);

/* Every count of measured procedure PROC. 0, QPT_EINVAL (not measured) or QPT_ENOMEM;
 * free *OUT with qpt_qp_flow_free (before M). */
int qpt_qp_flow(const qpt_qp_t *m, uint32_t proc, qpt_qp_flow_t **out /*OUT*/);
void qpt_qp_flow_free(qpt_qp_flow_t *f);

typedef struct qpt_qp_flow_info {
    uint32_t proc;        /* the procedure */
    uint32_t nblocks;     /* its blocks */
    uint32_t nedges;      /* its edges */
    uint64_t calls;       /* times called, when calls_known */
    int calls_known;      /* the call count is determined */
    uint64_t insns;       /* instructions of the known blocks (saturated) */
    int insns_exact;      /* every block count known */
    uint32_t nviolations; /* places where conservation fails */
} qpt_qp_flow_info_t;

void qpt_qp_flow_info(const qpt_qp_flow_t *f, qpt_qp_flow_info_t *out /*OUT*/);

/* Block B's (edge E's) count (0 when unknown) and its QPT_QP_COUNT_* state. 0 or
 * QPT_EINVAL. */
int qpt_qp_flow_block(const qpt_qp_flow_t *f, uint32_t b, uint64_t *count /*OUT*/,
                      int *state /*OUT*/);
int qpt_qp_flow_edge(const qpt_qp_flow_t *f, uint32_t e, uint64_t *count /*OUT*/,
                     int *state /*OUT*/);

/* What went wrong at a node. */
enum {
    QPT_QP_V_NEGATIVE = 1, /* solving an edge gave a negative count */
    QPT_QP_V_UNBALANCED,   /* flow in != the count or != flow out + abandoned */
    QPT_QP_V_OVERFLOW,     /* a count does not fit in 64 bits */
};

typedef struct qpt_qp_violation {
    int kind;       /* QPT_QP_V_* */
    uint32_t block; /* local block, QPT_QP_NONE for X */
    uint32_t edge;  /* NEGATIVE: the edge (local), else QPT_QP_NONE */
    uint64_t count; /* the node's count */
    uint64_t in;    /* known flow in */
    uint64_t out;   /* known flow out (with abandoned) */
} qpt_qp_violation_t;

/* Violation I (< nviolations), in the order found. 0 or QPT_EINVAL. */
int qpt_qp_flow_violation(const qpt_qp_flow_t *f, uint32_t i, qpt_qp_violation_t *out /*OUT*/);

/*****************************************************************************
 * The call graph
 *
 * Who called whom how often, from the call sites and the counts of their blocks, with
 * inclusive instructions derived as gprof derives inclusive time (a callee's shared
 * among its callers by their calls; recursion as cycles).
 */

typedef struct qpt_qp_calls qpt_qp_calls_t;

/* The call graph of M (not loaded QPT_QP_LAZY). 0, QPT_EINVAL or QPT_ENOMEM; free with
 * qpt_qp_calls_free (before M). */
int qpt_qp_calls(const qpt_qp_t *m, qpt_qp_calls_t **out /*OUT*/);
void qpt_qp_calls_free(qpt_qp_calls_t *cg);

/* Inclusive-count flags (qpt_qp_cg_proc_t.flags). */
enum {
    QPT_QP_INCL_APPROX = 1u << 0, /* apportioned by call counts */
    QPT_QP_INCL_LOWER = 1u << 1,  /* calls into unknown or unmeasured code add nothing */
    QPT_QP_INCL_CYCLE = 1u << 2,  /* part of a cycle: the cycle's count */
};

typedef struct qpt_qp_cg_proc {
    int measured;       /* its counts are known */
    uint64_t calls;     /* times entered */
    uint64_t self;      /* instructions in it */
    double incl;        /* inclusive instructions */
    double ext;         /* calls into its cycle from outside (its calls when in none) */
    uint32_t flags;     /* QPT_QP_INCL_* */
    uint32_t cycle;     /* its cycle (1 ..), 0 when none */
    uint32_t first_arc; /* its arcs: first_arc .. first_arc + narcs - 1 */
    uint32_t narcs;     /* how many */
} qpt_qp_cg_proc_t;

/* Procedure PROC in the graph. 0 or QPT_EINVAL. */
int qpt_qp_cg_proc(const qpt_qp_calls_t *cg, uint32_t proc, qpt_qp_cg_proc_t *out /*OUT*/);

/* An arc: every call site of a caller to one callee (or one site through a pointer). */
typedef struct qpt_qp_arc {
    uint32_t caller;     /* procedure */
    uint32_t callee;     /* procedure, QPT_QP_NONE when not described or unknown */
    uint64_t target;     /* the callee's entry, 0 for calls through a pointer */
    uint64_t site;       /* the first site's address */
    const char *name;    /* the callee's name as stored ("" when unknown) */
    uint64_t count;      /* calls made */
    uint32_t nsites;     /* sites merged */
    int known;           /* every site's count is known */
    int tail;            /* tail calls (jumps) only */
    int through_pointer; /* some calls were through a pointer */
    uint32_t stub;       /* the PLT stub counted at target (QPT_QP_STUBS), else
                          * QPT_QP_NONE */
    uint64_t plt_insns;  /* calls to that stub: the instructions they ran in it */
    int plt_lower;       /* plt_insns is a lower bound */
} qpt_qp_arc_t;

/* How many arcs, and arc A. 0 or QPT_EINVAL. */
uint32_t qpt_qp_cg_narcs(const qpt_qp_calls_t *cg);
int qpt_qp_cg_arc(const qpt_qp_calls_t *cg, uint32_t a, qpt_qp_arc_t *out /*OUT*/);

/*****************************************************************************
 * Source lines (lcov)
 */

typedef struct qpt_qp_lines qpt_qp_lines_t;

/*
 * Every source line of the measured code with the largest count of the blocks that have
 * an instruction on it (as gcov counts), the outcomes of branches, and the procedures
 * with their first line, each sorted by file name then line. Blocks whose count is not
 * determined are left out. File names are one pointer per name. M not loaded
 * QPT_QP_LAZY. 0, QPT_EINVAL or QPT_ENOMEM; free with qpt_qp_lines_free.
 */
int qpt_qp_lines(const qpt_qp_t *m, qpt_qp_lines_t **out /*OUT*/);
void qpt_qp_lines_free(qpt_qp_lines_t *l);

typedef struct qpt_qp_lines_info {
    uint32_t nlines;    /* source lines with a count */
    uint32_t nbranches; /* branch outcomes */
    uint32_t nfns;      /* procedures with a first line */
} qpt_qp_lines_info_t;

void qpt_qp_lines_info(const qpt_qp_lines_t *l, qpt_qp_lines_info_t *out /*OUT*/);

typedef struct qpt_qp_line_count {
    const char *file; /* source file */
    unsigned line;    /* line */
    uint64_t count;   /* line: its count; function: its calls; branch: times taken */
    uint32_t proc;    /* function: the procedure; else QPT_QP_NONE */
    uint32_t block;   /* branch: the branching block's number in the program */
    uint32_t branch;  /* branch: the outcome, 0, 1, ... */
    int executed;     /* branch: the block ran */
} qpt_qp_line_count_t;

/* Entry I of the lines, the branches, the functions. 0 or QPT_EINVAL. */
int qpt_qp_lines_line(const qpt_qp_lines_t *l, uint32_t i, qpt_qp_line_count_t *out /*OUT*/);
int qpt_qp_lines_branch(const qpt_qp_lines_t *l, uint32_t i, qpt_qp_line_count_t *out /*OUT*/);
int qpt_qp_lines_fn(const qpt_qp_lines_t *l, uint32_t i, qpt_qp_line_count_t *out /*OUT*/);

/*****************************************************************************
 * The executable's code, symbols and lines
 */

/* The source FILE and LINE of ADDR (DWARF; one pointer per file name). 0, or
 * QPT_ENOTFOUND. */
int qpt_qp_line(const qpt_qp_t *m, uint64_t addr, const char **file /*OUT*/,
                unsigned *line /*OUT*/);

/* The symbol at ADDR in the executable: *NAME and *GLOBAL. 0 or QPT_ENOTFOUND. */
int qpt_qp_symbol_at(const qpt_qp_t *m, uint64_t addr, const char **name /*OUT*/,
                     int *global /*OUT*/);

/* How many local symbols named NAME lie below ADDR, plus 1 (BOLT's "/N" of a local). */
unsigned qpt_qp_local_rank(const qpt_qp_t *m, uint64_t addr, const char *name);

/* The section holding ADDR: *NAME, *VMA, *CODE (holds code). 0 or QPT_ENOTFOUND. */
int qpt_qp_section_at(const qpt_qp_t *m, uint64_t addr, const char **name /*OUT*/,
                      uint64_t *vma /*OUT*/, int *code /*OUT*/);

/* The span [*LO, *HI) of the described code and of the PLT stubs counted (0, 0 when
 * none). 0, QPT_EINVAL or QPT_EFORMAT. */
int qpt_qp_code_span(const qpt_qp_t *m, uint64_t *lo /*OUT*/, uint64_t *hi /*OUT*/);

/* The bytes of a block as a listing reads them (qpt_qp_block_code). */
typedef struct qpt_qp_code {
    const uint8_t *bytes; /* at the block's start, in the file read; NULL: not there */
    size_t avail;         /* readable from there */
    size_t head;          /* of them, overwritten by the rewrite (a redirect, or new
                           * code placed in the old text); 0 with the original */
    const char *path;     /* the file read */
} qpt_qp_code_t;

/*
 * Block B of PROC's bytes: the original's (qpt_qp_set_original), else the executable's,
 * whose first bytes the rewrite may have overwritten. Blocks in address order:
 * *OVER_END (0 at first) carries where the last redirect ended to the next block.
 * 0, QPT_EINVAL or QPT_EFORMAT.
 */
int qpt_qp_block_code(const qpt_qp_t *m, uint32_t proc, uint32_t b, uint64_t *over_end,
                      qpt_qp_code_t *out /*OUT*/);

/*
 * The original bytes of that block (its size into OUT), rebuilt from its relocated copy
 * when C's head was overwritten: 1, with *LOST the offset of an instruction whose bytes
 * stay unknown (SIZE_MAX: none) and *LOST_LEN its length; 0 when no copy fits (or bad
 * arguments).
 */
int qpt_qp_block_original(const qpt_qp_t *m, uint32_t proc, uint32_t b,
                          const qpt_qp_code_t *c, uint8_t *out /*OUT*/, size_t *lost /*OUT*/,
                          size_t *lost_len /*OUT*/);

/* The address of block B of PROC's last instruction, from the original when given, else
 * the executable; 0 when neither decodes it (its first bytes overwritten). */
uint64_t qpt_qp_block_last_insn(const qpt_qp_t *m, uint32_t proc, uint32_t b);

/*****************************************************************************
 * Several modules of a process
 */

typedef struct qpt_qp_process qpt_qp_process_t;

/* One report over MODS[0 .. N - 1] (loaded; they, and MODS, outlive it). 0, QPT_EINVAL
 * or QPT_ENOMEM; free with qpt_qp_process_free. */
int qpt_qp_process(qpt_qp_t *const *mods, uint32_t n, qpt_qp_process_t **out /*OUT*/);
void qpt_qp_process_free(qpt_qp_process_t *p);

typedef struct qpt_qp_process_info {
    uint32_t nrows;       /* rows of every module, flat-profile order */
    uint64_t total_insns; /* their instructions (saturated) */
    uint32_t nplt;        /* PLT stubs of every module */
    uint32_t nunmeasured; /* procedures not measured, of every module */
} qpt_qp_process_info_t;

void qpt_qp_process_info(const qpt_qp_process_t *p, qpt_qp_process_info_t *out /*OUT*/);

/* Row I (flat-profile order over the modules): *MODULE its module's index in MODS, OUT
 * as qpt_qp_row gives it. 0 or QPT_EINVAL. */
int qpt_qp_process_row(const qpt_qp_process_t *p, uint32_t i, uint32_t *module /*OUT*/,
                       qpt_qp_row_t *out /*OUT*/);

/* The module I-th by instructions, most first (QPT_QP_NONE when I is out of range). */
uint32_t qpt_qp_process_by_insns(const qpt_qp_process_t *p, uint32_t i);

/*****************************************************************************
 * Formatting
 */

/* S as one CSV field (RFC 4180): quoted when it holds a comma, a quote, CR or LF. At most
 * OUTLEN bytes into OUT; returns the whole field's length, as snprintf. */
size_t qpt_qp_csv_field(const char *s, char *out, size_t outlen);

#ifdef __cplusplus
}
#endif

#endif
