/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QPT_QPT_H
#define QPT_QPT_H
/*
 * PURPOSE: libqpt, the instrumentation core of qpt as a C library. A mutator opens an
 * address space - an executable file to rewrite, or a running process - finds
 * procedures and points in it (entries, exits, call sites, blocks), builds snippets
 * (small programs: constants, arguments, return values, memory, arithmetic,
 * comparisons, conditionals, counters, timers, calls of the program's procedures),
 * inserts them at points, and then writes the instrumented executable or lets the
 * process run with them. The same calls instrument a file and a live process.
 *
 * Conventions: every function that can fail returns 0 or a negative QPT_E* code and
 * leaves a one-line message for qpt_error(); the library never prints, exits, installs
 * signal handlers or reads the environment. Objects are opaque; each *_create/open/
 * attach has its *_destroy/close. A snippet may be inserted at several points and freed
 * once inserted (the space keeps what it needs).
 * Addresses are those of the space: link-time addresses for a file, run-time
 * addresses for a process (a PIE's load bias included).
 */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The version of this header; qpt_version() gives the library's, which may be newer
 * (a program built against 0.2 runs on any libqpt.so.0 of 0.2 or later: qpt(3), VERSIONS).
 */
#define QPT_VERSION_MAJOR 0
#define QPT_VERSION_MINOR 7
#define QPT_VERSION_PATCH 0
#define QPT_VERSION_STRING "0.7.0"

/* The version of the libqpt that runs ("0.7.0"); a static string. */
const char *qpt_version(void);

/*
 * Errors: every call that fails returns one of these (never another negative value),
 * and qpt_error() has its one-line message.
 */
enum {
    QPT_OK = 0,
    QPT_EINVAL = -1,   /* an invalid argument or snippet */
    QPT_ENOMEM = -2,   /* out of memory */
    QPT_EIO = -3,      /* a system call failed (see the message) */
    QPT_ENOTELF = -4,  /* not an ELF executable or library: a directory, a device, an
                        * object file, a core dump, or not ELF at all */
    QPT_EARCH = -5,    /* not x86-64 */
    QPT_ESHARED = -6,  /* a shared library, not an executable */
    QPT_EFORMAT = -7,  /* a malformed file (or bytes that do not decode) */
    QPT_ERANGE = -9,   /* out of range (rel32 reach, too complex) */
    QPT_ENOTFOUND = -10, /* no such procedure, point or symbol */
    QPT_EUNSUPP = -11, /* valid, but not supported here (see the message) */
    QPT_EBUG = -16,    /* an invariant of qpt's failed: nothing was written (a bug) */
    QPT_EEXITED = -17, /* the live process has exited (qpt_alive), or the image of a
                        * library's space is gone (unloaded, or the process ran execve) */
};

/* The text of a QPT_E* code. */
const char *qpt_strerror(int rc);

/*****************************************************************************
 * Address spaces
 */

typedef struct qpt_space qpt_space_t;

/*
 * Open the executable PATH for rewriting (nothing is written until qpt_write). On
 * failure *OUT is NULL and WHY (WHYLEN bytes, may be NULL) says why.
 */
int qpt_open(const char *path, qpt_space_t **out /*OUT*/, char *why, size_t whylen);

/*
 * Attach to the running process PID: every thread is stopped while this returns, and
 * stays stopped until qpt_run. Needs ptrace permission. On failure WHY says why.
 */
int qpt_attach(int pid, qpt_space_t **out /*OUT*/, char *why, size_t whylen);

/* Start ARGV[0] (found in PATH) with ARGV, stopped before any of its code ran. */
int qpt_spawn(char *const argv[], qpt_space_t **out /*OUT*/, char *why, size_t whylen);

/* The processes whose parent is PID (a launcher's: mpirun's ranks), from /proc, into
 * *PIDS (malloc'ed: the caller frees it) and *N. QPT_ENOTFOUND when it has none,
 * QPT_EIO, QPT_ENOMEM, QPT_EINVAL; QPT_EUNSUPP in a build without live processes. */
int qpt_children(int pid, int **pids /*OUT*/, size_t *n /*OUT*/);

/* What qpt_clean found in a process and took out. */
typedef struct qpt_clean_report {
    unsigned regions;  /* trampoline memories found */
    unsigned jumps;    /* jumps into them put back to the file's bytes */
    unsigned moved;    /* threads moved out of trampolines */
    unsigned unmapped; /* mappings unmapped (trampolines and counters) */
    unsigned kept;     /* trampoline memories left mapped (a thread may still return
                        * there, or a library's code could not be compared) */
    unsigned busy;     /* trampoline memories of a mutator still running: left alone */
    unsigned breaks;   /* breakpoints on the loader's r_brk put back */
    unsigned stub;     /* system-call stubs put back to the file's bytes */
    unsigned fds;      /* descriptors of a killed dyn's memfds closed (it died between
                        * their opening and closing in the process) */
    uint64_t foreign_brk; /* the loader's r_brk jumps here, to code that is not a
                        * trampoline of dyn's: left alone (0: no such jump) */
    unsigned tracer_fds; /* descriptors named like a killed dyn's memfds, left open: the
                        * process is a dyn or traces another (a running mutator: they
                        * are its own) */
    unsigned mapped_fds; /* ... the process maps them itself (a mutator's own, whose
                        * target is gone; or a killed dyn's, which then stays open) */
} qpt_clean_report_t;

/*
 * What a killed mutator (or dyn) left in process PID, taken out (`dyn clean PID`):
 * attach, put every jump into its trampoline memory back to the file's bytes (the
 * executable's and the libraries'), let the threads inside run out, unmap what no
 * thread can return to, detach. 0 with *OUT filled, or a QPT_E* code with one line in
 * WHY ("PID: what: reason").
 */
int qpt_clean(int pid, qpt_clean_report_t *out /*OUT*/, char *why, size_t whylen);

/*
 * Close S. A process: every snippet is taken out first (restoring its code), then it is
 * let run, detached. A file: nothing is written. NULL is fine.
 * A mutator that exits (exit(), a return from main) without closing its processes has
 * them closed so by an atexit handler, unless qpt_keep_on_exit(s, 1) said to leave the
 * snippets in. One killed by a signal leaves them in: the process goes on running them
 * unharmed, and `dyn clean PID` takes them out. Either way every call on a process must
 * come from the thread that attached it (ptrace's rule), the exit included.
 */
void qpt_close(qpt_space_t *s);

/*
 * The children that were let go stopped (SIGSTOP) because the dynamic loader's int3
 * (qpt_watch_unguarded) could not be taken out of their copy, forked while a watched
 * process was being stopped for good: by qpt_close (which cannot say them), or by a
 * qpt_watch that stops following (qpt_watch(S, 0); or, to start again, a library mask on
 * a process not run yet), whose error, QPT_EIO, names the first: that one is not on the
 * list (each child is told once). Up to MAX of their pids into PIDS,
 * oldest first, taken from the list (call again for more): their number, 0 when there is
 * none. Their user runs `dyn clean PID`, then kill -CONT PID, for each. (Those left so
 * while the process is watched come as QPT_EV_FORK with child_counted -1 instead.)
 */
size_t qpt_children_left_stopped(int *pids /*OUT*/, size_t max);

/*
 * How many more children were let go so whose pid could not be kept (no memory): on no
 * list, they are only counted; the count since the last call (which resets it). Their
 * user finds them among the process's children in state T (ps -o pid,ppid,stat), and
 * does as above for each.
 */
size_t qpt_children_left_stopped_unnamed(void);

/* Close S, a process started by qpt_spawn, ending it (SIGKILL) instead of letting it run:
 * a program that cannot be measured is not run. Any other space: as qpt_close. */
void qpt_kill(qpt_space_t *s);

/* A process: whether the mutator's exit without qpt_close leaves the snippets in (1) or
 * takes them out (0, the default). */
int qpt_keep_on_exit(qpt_space_t *s, int keep);

/*
 * A shared library of the live process of S: the one mapped in it whose base name
 * matches MODULE (a shell pattern: "libc.so.6", "libfoo*"), as a space of its own: its
 * procedures, points, symbols, memory (qpt_alloc: near its code) and insertions, at
 * run-time addresses. It shares S's process and belongs to S: qpt_commit(S) commits
 * it too (not once unloaded or gone with an exec), qpt_read_memory(S) reads its
 * variables (an unloaded library's too: see qpt_alloc), qpt_close(S) closes it (closing
 * it alone takes its snippets out; its variables that another space's snippets use stay
 * mapped, S's from then on, and an unloaded one's stay S's to read); stop
 * and run the process through S. The same MODULE (or the same library) again gives the
 * same space. A process started by qpt_spawn that
 * has not run yet is first let run to its entry point (the dynamic loader then has
 * mapped and initialised its libraries; what they did meanwhile is not seen). Otherwise
 * the process may run meanwhile (the library's file is read and analysed then: libc takes
 * about 0.1 s); it must stay loaded. QPT_ENOTFOUND when no library loaded matches (WHY lists those loaded;
 * one loaded later by dlopen is not there yet), QPT_EINVAL when several do, QPT_EUNSUPP
 * for a file.
 */
int qpt_library(qpt_space_t *s, const char *module, qpt_space_t **out /*OUT*/, char *why,
                size_t whylen);

/* 1 for a live process, 0 for a file. */
int qpt_is_live(const qpt_space_t *s);

/* The process id of a live space (0 for a file). */
int qpt_pid(const qpt_space_t *s);

/* The message of the last failure on S ("" when none). */
const char *qpt_error(const qpt_space_t *s);

/*****************************************************************************
 * Procedures and points
 */

/* Procedures of the executable (cold fragments are part of their parent). */
uint32_t qpt_nprocs(const qpt_space_t *s);
const char *qpt_proc_name(const qpt_space_t *s, uint32_t proc);
/* Does the shell pattern PATTERN name procedure PROC: its name, or its demangled name
 * with or without the parameters ("ns::f*" matches _ZN2ns1fEi), as NAME or as
 * MODULE:NAME (MODULE a pattern for its source file, qpt_proc_module, by path or last
 * component)? */
int qpt_proc_match(const qpt_space_t *s, uint32_t proc, const char *pattern);
/* The ':' that separates MODULE from NAME in a pattern MODULE:NAME (one ':', C++'s '::'
 * being part of a name), or NULL when PATTERN names no module. */
const char *qpt_module_sep(const char *pattern);
/* The demangled (C++, Rust, D) form of NAME with its parameters, malloc'ed (the caller
 * frees it); NULL when NAME is not a mangled name (or out of memory). */
char *qpt_demangle(const char *name);
/* The module of PROC: the source file its code comes from (DWARF), or NULL when the
 * program has no line information for it. Owned by S. */
const char *qpt_proc_module(const qpt_space_t *s, uint32_t proc);
uint64_t qpt_proc_entry(const qpt_space_t *s, uint32_t proc);

/* The first procedure named NAME into *PROC; QPT_ENOTFOUND. */
int qpt_proc_find(const qpt_space_t *s, const char *name, uint32_t *proc /*OUT*/);

/* NULL when snippets can go into PROC, else why not (static text). */
const char *qpt_proc_refusal(const qpt_space_t *s, uint32_t proc);

typedef enum qpt_point_kind {
    QPT_ENTRY = 1,     /* the procedure is entered (calls only, not loops back to it) */
    QPT_EXIT,          /* it returns (before each ret; the return value is there) */
    QPT_CALL,          /* before one of its call instructions (the arguments are set) */
    QPT_AFTER_CALL,    /* after that call returned (its return value is there) */
    QPT_BLOCK,         /* one of its basic blocks starts */
    QPT_EDGE,          /* control goes from one of its blocks to another (a branch taken
                        * or not, a jump, a fall-through, a return to after a call) */
    QPT_INSN,          /* before one of its instructions (see qpt_line_points) */
} qpt_point_kind_t;

typedef struct qpt_point {
    uint32_t kind;     /* qpt_point_kind_t */
    uint32_t proc;     /* the procedure */
    uint64_t addr;     /* the instruction (entry, ret, call, first of the block; an
                        * edge's source block) */
    uint64_t to;       /* QPT_EDGE: the first instruction of its destination block */
    uint32_t edge;     /* QPT_EDGE: which edge (the analysis's number) */
    uint32_t reserved;
} qpt_point_t;

/*
 * The points of KIND in PROC: up to CAP of them into OUT (may be NULL with CAP 0); the
 * number of points, which may exceed CAP, into *N. In a process a point needs room for
 * a 5-byte jump, which qpt_insert checks (with the reason when there is none); an edge
 * there is patched at its destination block, so only an edge that is the one way into
 * its block can be instrumented live. In a file every edge but those of jump tables and
 * indirect jumps can (a taken branch is sent through a stub). QPT_EUNSUPP when PROC
 * cannot be instrumented (qpt_proc_refusal).
 */
int qpt_points(qpt_space_t *s, uint32_t proc, uint32_t kind, qpt_point_t *out /*OUT*/,
               size_t cap, size_t *n /*OUT*/);

/*
 * QPT_INSN points at the source line LINE of FILE (a path, or its last components:
 * "util.c", "src/util.c"), from the program's DWARF line table: the first instruction of
 * each run of instructions of that line, in procedures that can take snippets; up to
 * CAP into OUT, their number into *N. QPT_ENOTFOUND when no instruction has that line
 * (or the program has no line table).
 */
int qpt_line_points(qpt_space_t *s, const char *file, unsigned line, qpt_point_t *out /*OUT*/,
                    size_t cap, size_t *n /*OUT*/);

/*
 * The QPT_INSN point of the instruction at ADDR (before it runs) into *OUT: QPT_ENOTFOUND
 * when ADDR is not the start of an instruction of a procedure, QPT_EUNSUPP when that
 * procedure cannot take snippets.
 */
int qpt_insn_point(qpt_space_t *s, uint64_t addr, qpt_point_t *out /*OUT*/);

/*
 * The point where snippets run right after the instruction of the QPT_INSN point INSN:
 * before the next instruction when it is in the same block, the fall-through QPT_EDGE
 * when the instruction ends its block, the QPT_AFTER_CALL point of a call. QPT_EUNSUPP
 * for a jump, a branch, a return or a call that does not return (no one place follows:
 * use QPT_EDGE points), or an instruction that ends its procedure.
 */
int qpt_point_after(qpt_space_t *s, const qpt_point_t *insn, qpt_point_t *out /*OUT*/);

/* The procedure a QPT_CALL or QPT_AFTER_CALL point calls directly (0 when through a
 * register or memory, or not a call point). */
uint64_t qpt_point_callee(const qpt_space_t *s, const qpt_point_t *pt);

/* A QPT_EXIT point: 0 for a return, 1 for a tail call (a jump out of the procedure),
 * with the entry of the procedure it jumps to in *CALLEE (may be NULL) when that is an
 * unconditional direct jump to a procedure's entry, else 0; QPT_EINVAL for another
 * point. */
int qpt_exit_tail(const qpt_space_t *s, const qpt_point_t *pt, uint64_t *callee /*OUT*/);

/* 1 when snippets at PROC's entry and exits would run in a copy of it (a live procedure
 * relocated whole, qpt_set_relocate: its exits then take one snippet list, the same at
 * each), 0 when each point is patched where it is (always in a file); QPT_EINVAL. */
int qpt_proc_runs_as_copy(qpt_space_t *s, uint32_t proc);

/*****************************************************************************
 * Control-flow graphs: blocks, edges, dominators and loops of a procedure
 *
 * The analysis's CFG of a procedure, as a mutator walks it (a file and a process give
 * the same one, at their own addresses). Blocks are numbered 0 to nblocks - 1: block 0
 * is the entry block, the others follow in address order, and QPT_BLOCK point K of
 * qpt_points is block K's. Loops are the natural loops (a back edge to a header that
 * dominates its source), numbered so that an enclosing loop comes before the loops it
 * contains. The walk reads the analysis only: it works on procedures qpt_proc_refusal
 * refuses too; qpt_block_point and qpt_edge_point give the points to insert at.
 */

typedef struct qpt_cfg {
    uint32_t nblocks;     /* basic blocks; block 0 is the entry block */
    uint32_t nedges;      /* edges out of them, those that leave the procedure included */
    uint32_t nloops;      /* natural loops */
    uint32_t flags;       /* QPT_CFG_* */
    uint32_t reserved[4];
} qpt_cfg_t;

enum {
    QPT_CFG_IRREDUCIBLE = 1u << 0, /* a cycle entered at more than one block: no natural
                                    * loop, so not among the loops */
    QPT_CFG_UNRESOLVED = 1u << 1,  /* an indirect jump whose targets are unknown (its
                                    * block has a QPT_EDGE_UNKNOWN edge): the CFG may lack
                                    * edges, and qpt_proc_refusal says why */
};

typedef struct qpt_block {
    uint64_t start;       /* address of its first instruction */
    uint64_t end;         /* address after its last instruction */
    uint32_t ninsns;      /* instructions */
    uint32_t nsucc;       /* edges out (qpt_block_succ) */
    uint32_t npred;       /* edges in (qpt_block_pred) */
    uint32_t idom;        /* immediate dominator; QPT_NONE for block 0 and unreachable
                           * blocks */
    uint32_t loop;        /* innermost loop holding it (qpt_loop), QPT_NONE for none */
    uint32_t depth;       /* loops holding it (0: none) */
    uint32_t flags;       /* QPT_UNREACHABLE, QPT_LOOP_HEADER, QPT_GAP_ENTRY */
    uint32_t reserved[3];
} qpt_block_t;

enum {
    QPT_UNREACHABLE = 1u << 0, /* no path from the entry block reaches it (code reached
                                * only from outside: another procedure's jump, a held
                                * address) */
    QPT_LOOP_HEADER = 1u << 1, /* the header of a loop */
    QPT_GAP_ENTRY = 1u << 2,   /* code no known edge reaches, found in the procedure's
                                * own bytes because a jump of it has unknown targets
                                * (an interpreter's handlers): that jump may enter here */
};

typedef enum qpt_edge_kind {
    QPT_EDGE_FALL = 1,  /* falls through into the next block */
    QPT_EDGE_TAKEN,     /* a conditional branch taken */
    QPT_EDGE_JUMP,      /* a direct jump within the procedure */
    QPT_EDGE_TABLE,     /* one target of a jump table */
    QPT_EDGE_INDIRECT,  /* a known target of another indirect jump (an address-taken label) */
    QPT_EDGE_CALL_FALL, /* from a block that ends in a call to the block after the call
                         * (the callee returns) */
    QPT_EDGE_RETURN,    /* leaves the procedure: a return */
    QPT_EDGE_TAILCALL,  /* leaves: a jump to another procedure */
    QPT_EDGE_NORETURN,  /* leaves: a call that never returns, hlt, ud2 */
    QPT_EDGE_UNKNOWN,   /* leaves: an indirect jump whose targets are unknown */
} qpt_edge_kind_t;

typedef struct qpt_edge {
    uint32_t kind;        /* qpt_edge_kind_t */
    uint32_t from;        /* source block */
    uint32_t to;          /* destination block, QPT_NONE when the edge leaves */
    uint32_t id;          /* the analysis's number of the edge (qpt_point_t.edge) */
    uint64_t target;      /* where it goes: the destination's start, or outside for a
                           * tail call or a table entry; 0 when unknown (a return) */
    uint32_t flags;       /* QPT_BACK_EDGE */
    uint32_t reserved;
} qpt_edge_t;

enum {
    QPT_BACK_EDGE = 1u << 0, /* a loop's back edge: to its header, from a member */
};

typedef struct qpt_loop {
    uint32_t header;      /* the header block (it dominates every member) */
    uint32_t parent;      /* the loop enclosing it, QPT_NONE for an outermost one */
    uint32_t depth;       /* 1 for an outermost loop, its parent's + 1 inside */
    uint32_t nblocks;     /* member blocks, the header and nested loops' included */
    uint32_t nback;       /* back edges (qpt_loop_back_edge) */
    uint32_t reserved[3];
} qpt_loop_t;

/*
 * The size of PROC's CFG into *OUT. QPT_ENOTFOUND for no such procedure, QPT_EUNSUPP for
 * a cold fragment (its blocks are its parent's).
 */
int qpt_proc_cfg(qpt_space_t *s, uint32_t proc, qpt_cfg_t *out /*OUT*/);

/* Block BLOCK of PROC into *OUT (addresses of the space); QPT_ENOTFOUND. */
int qpt_block(qpt_space_t *s, uint32_t proc, uint32_t block, qpt_block_t *out /*OUT*/);

/* The procedure and block holding the instruction at ADDR (a cold fragment's code is
 * its parent's); QPT_ENOTFOUND when no block holds it. PROC or BLOCK may be NULL. */
int qpt_block_at(qpt_space_t *s, uint64_t addr, uint32_t *proc /*OUT*/,
                 uint32_t *block /*OUT*/);

/* Edge I (0 .. nsucc - 1) out of BLOCK, or (0 .. npred - 1) into it, into *OUT. */
int qpt_block_succ(qpt_space_t *s, uint32_t proc, uint32_t block, uint32_t i,
                   qpt_edge_t *out /*OUT*/);
int qpt_block_pred(qpt_space_t *s, uint32_t proc, uint32_t block, uint32_t i,
                   qpt_edge_t *out /*OUT*/);

/* 1 when block A dominates block B of PROC (every path from the entry to B passes A; a
 * block dominates itself; an unreachable B: no), 0 when not, < 0 on a bad argument. */
int qpt_dominates(qpt_space_t *s, uint32_t proc, uint32_t a, uint32_t b);

/* Loop LOOP (0 .. nloops - 1) of PROC into *OUT. */
int qpt_loop(qpt_space_t *s, uint32_t proc, uint32_t loop, qpt_loop_t *out /*OUT*/);

/* 1 when BLOCK is a member of LOOP (of a loop nested in it too), 0 when not, < 0 on a
 * bad argument. */
int qpt_loop_contains(qpt_space_t *s, uint32_t proc, uint32_t loop, uint32_t block);

/* The member blocks of LOOP, ascending: up to CAP into OUT, their number into *N. */
int qpt_loop_blocks(qpt_space_t *s, uint32_t proc, uint32_t loop, uint32_t *out /*OUT*/,
                    size_t cap, size_t *n /*OUT*/);

/* Back edge I (0 .. nback - 1) of LOOP into *OUT. */
int qpt_loop_back_edge(qpt_space_t *s, uint32_t proc, uint32_t loop, uint32_t i,
                       qpt_edge_t *out /*OUT*/);

/* The QPT_BLOCK point of BLOCK, and the QPT_EDGE point of edge E (from qpt_block_succ,
 * qpt_block_pred or qpt_loop_back_edge), as qpt_points gives them, into *OUT: for
 * qpt_insert. QPT_EUNSUPP when PROC cannot take snippets (qpt_proc_refusal) and for an
 * edge that leaves the procedure (use its QPT_EXIT point). */
int qpt_block_point(qpt_space_t *s, uint32_t proc, uint32_t block, qpt_point_t *out /*OUT*/);
int qpt_edge_point(qpt_space_t *s, uint32_t proc, const qpt_edge_t *e, qpt_point_t *out /*OUT*/);

/*****************************************************************************
 * Variables: memory for snippets
 */

/*
 * BYTES (a multiple of 8) of zero-filled memory near the code, for counters and other
 * words snippets use; its address into *ADDR. A file: the words are a new zero-filled
 * region of the program whose contents are saved to its profile like qp's counters
 * (PROGRAM.qp, one slot per process, summed when read: see qpt_profile_read). A
 * process: memory mapped into it, readable at any time with qpt_read_memory. An
 * address given is never given again while S (the process's top space) is open, not
 * even after the memory left the process (an execve, its library's dlclose): a snippet
 * that still uses such an address is refused (QPT_EINVAL), and a reloaded library gets
 * variables of its own (nor are the trampolines and counters of later commits mapped
 * there; the loader guard's pages, made again after an execve, do not look). The
 * last values of an unloaded library's variables stay readable through that library's
 * space and through the program's space, also once the library's space is closed: our
 * copy, whatever the process itself may have mapped at that address since (memory the
 * process could not share with us left with its values: reading it fails, QPT_EINVAL).
 */
int qpt_alloc(qpt_space_t *s, size_t bytes, uint64_t *addr /*OUT*/);

/*
 * Per-thread variables: BYTES (a multiple of 8, at most 65,536) for each thread, in
 * memory from qpt_alloc laid out as QPT_MAX_THREADS keys of 8 bytes at VAR (a thread's
 * key is its thread pointer, %fs:0, set the first time one of its snippets uses the
 * variable; 0: free), then QPT_MAX_THREADS + 1 copies of BYTES from
 * VAR + 8 * QPT_MAX_THREADS, the copy of key K at index K; threads beyond
 * QPT_MAX_THREADS alive at once share the last copy. qpt_thread_var gives a snippet the
 * address of the calling thread's copy. Keys are not freed when threads end (a new
 * thread may reuse an old thread pointer, and its copy).
 */
#define QPT_MAX_THREADS 1024
#define QPT_PER_THREAD_SIZE(bytes) (8 * QPT_MAX_THREADS + (QPT_MAX_THREADS + 1) * (bytes))
int qpt_alloc_per_thread(qpt_space_t *s, size_t bytes, uint64_t *var /*OUT*/);

/*
 * Per-CPU variables (a process on x86-64 whose threads glibc registered with rseq(2),
 * glibc 2.35 and later): BYTES (a multiple of 8) for each possible CPU, in memory from
 * qpt_alloc: VAR->ncpu copies from VAR->addr, VAR->stride bytes apart (BYTES rounded up
 * to a power of 2, at least 64: no two CPUs share a cache line). qpt_add_to_cpu adds to
 * the calling thread's CPU's copy without a locked instruction, exact under threads;
 * the variable's value is the sum of its copies. The process must be stopped (its
 * threads' rseq areas are read). QPT_EUNSUPP with the reason in qpt_error when the
 * space cannot have them (a file; rseq not registered: glibc before 2.35, a static
 * program, GLIBC_TUNABLES=glibc.pthread.rseq=0; more than QPT_MAX_CPUS CPUs; more than
 * 64 MiB): use qpt_add_to's locked add instead.
 */
#define QPT_MAX_CPUS 1024
typedef struct qpt_cpu_var {
    uint64_t addr;       /* CPU 0's copy */
    uint64_t stride;     /* bytes from one CPU's copy to the next */
    uint32_t ncpu;       /* copies: the possible CPUs */
    int32_t rseq_offset; /* the rseq area's offset from a thread's pointer (%fs:0) */
} qpt_cpu_var_t;
int qpt_alloc_per_cpu(qpt_space_t *s, size_t bytes, qpt_cpu_var_t *var /*OUT*/);

/*
 * A process: unmap memory qpt_alloc gave at ADDR. Refused while an insertion that is in
 * the process, or not removed, reads or writes it (remove it and commit first). A file:
 * QPT_EUNSUPP.
 */
int qpt_free(qpt_space_t *s, uint64_t addr);

/*
 * The address (in the space: run-time in a process) and size (0 if unknown) of the
 * program's symbol NAME - a variable or a procedure - from its symbol tables; size may be
 * NULL. QPT_ENOTFOUND (a stripped program has only its dynamic symbols); QPT_EUNSUPP for
 * a thread-local variable (see qpt_tls_offset).
 */
int qpt_symbol(const qpt_space_t *s, const char *name, uint64_t *addr /*OUT*/,
               uint64_t *size /*OUT*/);

/*
 * A thread-local variable NAME of the executable: its offset from the thread pointer
 * (negative: x86-64 puts the executable's block just below it), for qpt_tls_addr.
 * QPT_ENOTFOUND. Variables of shared libraries are not reachable this way.
 */
int qpt_tls_offset(const qpt_space_t *s, const char *name, int64_t *off /*OUT*/);

/* Read LEN bytes at ADDR of a live process (it may be running). */
/* The name of the program's symbol (a variable or a procedure) that holds ADDR (in the
 * space), *OFF (may be NULL) its offset in it; NULL when none does. Owned by S. */
const char *qpt_symbol_at(const qpt_space_t *s, uint64_t addr, uint64_t *off /*OUT*/);

int qpt_read_memory(qpt_space_t *s, uint64_t addr, void *buf, size_t len);

/* Write LEN bytes at ADDR of a stopped live process (its data, or memory from qpt_alloc). */
int qpt_write_memory(qpt_space_t *s, uint64_t addr, const void *buf, size_t len);

/*****************************************************************************
 * Snippets
 */

typedef struct qpt_snippet qpt_snippet_t;
typedef uint32_t qpt_expr_t; /* a node of a snippet */
#define QPT_NONE UINT32_MAX

/* Operations of qpt_op: integers of 64 bits; comparisons give 1 or 0. */
typedef enum qpt_op {
    QPT_ADD = 1, QPT_SUB, QPT_MUL, QPT_DIV, QPT_MOD, /* signed; x / 0 and x % 0 are 0 */
    QPT_SHL, QPT_SHR,                                /* by b & 63; SHR logical */
    QPT_AND, QPT_OR, QPT_XOR,
    QPT_EQ, QPT_NE, QPT_LT, QPT_LE, QPT_GT, QPT_GE,  /* signed */
    QPT_ULT, QPT_ULE, QPT_UGT, QPT_UGE,              /* unsigned */
    QPT_LAND, QPT_LOR,                               /* b only when it decides */
} qpt_op_t;

qpt_snippet_t *qpt_snippet_create(void);
void qpt_snippet_destroy(qpt_snippet_t *sn);

/*
 * The builders return the new node, or QPT_NONE when an operand is QPT_NONE or memory
 * ran out; a snippet holding such a node is refused by qpt_insert.
 */
qpt_expr_t qpt_const(qpt_snippet_t *sn, int64_t v);
qpt_expr_t qpt_arg(qpt_snippet_t *sn, int i);             /* argument i (0..5): QPT_ENTRY,
                                                           * QPT_CALL */
qpt_expr_t qpt_retval(qpt_snippet_t *sn);                 /* QPT_EXIT, QPT_AFTER_CALL */
qpt_expr_t qpt_load(qpt_snippet_t *sn, uint64_t addr, int size); /* 1, 2, 4, 8 bytes */
qpt_expr_t qpt_op(qpt_snippet_t *sn, qpt_op_t op, qpt_expr_t a, qpt_expr_t b);
qpt_expr_t qpt_not(qpt_snippet_t *sn, qpt_expr_t a);
qpt_expr_t qpt_if(qpt_snippet_t *sn, qpt_expr_t cond, qpt_expr_t then, qpt_expr_t els);
qpt_expr_t qpt_seq(qpt_snippet_t *sn, qpt_expr_t a, qpt_expr_t b);
qpt_expr_t qpt_store(qpt_snippet_t *sn, uint64_t addr, int size, qpt_expr_t v);
qpt_expr_t qpt_add_to(qpt_snippet_t *sn, uint64_t addr, qpt_expr_t v, int atomic);
/* The word at byte OFF of the calling thread's CPU's copy of VAR (qpt_alloc_per_cpu)
 * += V: a restartable sequence, a few plain instructions (no lock). */
qpt_expr_t qpt_add_to_cpu(qpt_snippet_t *sn, const qpt_cpu_var_t *var, uint64_t off,
                          qpt_expr_t v);
/* A wall-clock timer: 3 words at TIMER (depth, start, total cycles of the TSC); nested
 * starts count once. */
qpt_expr_t qpt_timer_start(qpt_snippet_t *sn, uint64_t timer);
qpt_expr_t qpt_timer_stop(qpt_snippet_t *sn, uint64_t timer);
/* The address ADDR (of qpt_alloc'ed memory or of the program), as a value: computed
 * from the code's own address, so right in a position-independent program. */
qpt_expr_t qpt_addr(qpt_snippet_t *sn, uint64_t addr);
/* Memory at a computed address (ADDR a node): load, store (1, 2, 4, 8 bytes), add. */
qpt_expr_t qpt_load_at(qpt_snippet_t *sn, qpt_expr_t addr, int size);
qpt_expr_t qpt_store_at(qpt_snippet_t *sn, qpt_expr_t addr, int size, qpt_expr_t v);
qpt_expr_t qpt_add_at(qpt_snippet_t *sn, qpt_expr_t addr, qpt_expr_t v, int atomic);
/* The address of the calling thread's copy of the per-thread variable VAR of BYTES
 * (qpt_alloc_per_thread): a hash of its thread pointer and a probe, a few ns. */
qpt_expr_t qpt_thread_var(qpt_snippet_t *sn, uint64_t var, size_t bytes);
/* The address of KEY's copy (KEY a value: an argument, a lock's address...) of the
 * variable VAR of BYTES laid out as a per-thread one (qpt_alloc_per_thread), the keys
 * being values: key K of the table holds value ^ QPT_KEY_XOR (0: free); the value equal
 * to QPT_KEY_XOR and values beyond QPT_MAX_THREADS share the last copy. */
#define QPT_KEY_XOR 0x9e3779b97f4a7c15ull
qpt_expr_t qpt_key_var(qpt_snippet_t *sn, uint64_t var, size_t bytes, qpt_expr_t key);
/* The address of the calling thread's copy of the executable's thread-local variable at
 * OFF (qpt_tls_offset). */
qpt_expr_t qpt_tls_addr(qpt_snippet_t *sn, int64_t off);
/* The program's stack pointer at the point (at an entry and before a ret: the address
 * of the return address; deeper calls have smaller ones). */
qpt_expr_t qpt_sp(qpt_snippet_t *sn);
/* The time-stamp counter (rdtsc; cycles of a constant rate). */
qpt_expr_t qpt_cycles(qpt_snippet_t *sn);
/* The calling thread's CPU time in ns: clock_gettime(CLOCK_THREAD_CPUTIME_ID), a system
 * call (about 0.1-0.5 us; see README for the measured cost). */
qpt_expr_t qpt_thread_cpu_ns(qpt_snippet_t *sn);
/* A per-thread CPU timer: VAR from qpt_alloc_per_thread(s, 24, &var), 3 words a thread
 * (depth, start, total ns); nested starts count once, a stop without a start is ignored. */
qpt_expr_t qpt_cpu_timer_start(qpt_snippet_t *sn, uint64_t var);
qpt_expr_t qpt_cpu_timer_stop(qpt_snippet_t *sn, uint64_t var);
/* A call of the program's code at FN with NARGS (<= 6) arguments; its value. */
qpt_expr_t qpt_call(qpt_snippet_t *sn, uint64_t fn, const qpt_expr_t *args, int nargs);

/*****************************************************************************
 * Insertion
 */

typedef uint32_t qpt_handle_t;

/*
 * Insert the snippet rooted at ROOT of SN at point PT; *H (may be NULL) names the
 * insertion for qpt_remove. The snippet is checked against the point (an argument at an
 * exit is refused, with the node named by qpt_error). A file: takes effect at qpt_write.
 * A process: at the next qpt_commit (which may refuse a point: a thread inside the bytes
 * a jump would replace, a branch into them).
 */
int qpt_insert(qpt_space_t *s, const qpt_point_t *pt, const qpt_snippet_t *sn,
               qpt_expr_t root, qpt_handle_t *h /*OUT*/);

/* As qpt_insert, but the snippet runs before those already at the point (qpt_insert
 * appends: insertions at one point run in the order they were made). */
int qpt_insert_first(qpt_space_t *s, const qpt_point_t *pt, const qpt_snippet_t *sn,
                     qpt_expr_t root, qpt_handle_t *h /*OUT*/);

/* The point of insertion H. */
int qpt_insertion_point(const qpt_space_t *s, qpt_handle_t h, qpt_point_t *pt /*OUT*/);

/*
 * The estimated cost of one run of insertion H, in cycles, into *CYCLES: a model of its
 * compiled code (plain instructions a tenth of a cycle, for they overlap the program's;
 * locked ones, popf, rdtsc, calls and system calls their latency), plus in a process the
 * jumps to its trampoline and back. A procedure it calls is not counted. For a cost
 * before inserting: insert, estimate, and remove before the commit or the write.
 */
int qpt_cost_cycles(qpt_space_t *s, qpt_handle_t h, double *cycles /*OUT*/);

/* Take insertion H out (at qpt_write or the next qpt_commit). */
int qpt_remove(qpt_space_t *s, qpt_handle_t h);

/*
 * A process: make the insertions and removals since the last commit effective, in one
 * stop, all or nothing (the process must be stopped: after attach, spawn, qpt_stop).
 */
int qpt_commit(qpt_space_t *s);

/*
 * After qpt_commit(S) failed because one insertion's point could not be installed in
 * the process (no room for its jump, its padding taken by other points): that space (S
 * or one of its libraries' spaces) into *WHERE and the insertion into *H, so that a
 * mutator can take it out and commit the rest again. QPT_ENOTFOUND when the failure
 * was not a point's (or for a file).
 */
int qpt_commit_refused(const qpt_space_t *s, qpt_space_t **where /*OUT*/, qpt_handle_t *h /*OUT*/);

/*
 * A process: take every snippet out (ON 0), or put them all back in (ON 1), in one stop;
 * the insertions are kept, and commits while inactive only check them. A file:
 * QPT_EUNSUPP.
 */
int qpt_set_active(qpt_space_t *s, int on);

/* A file: write the instrumented program to OUTPUT (a temporary file, renamed). */
int qpt_write(qpt_space_t *s, const char *output);

/*
 * A file: FN(ARG, PATH) once qpt_write's temporary output exists, and FN(ARG, NULL) once
 * it is renamed or removed (PATH stays valid until then), so that a tool's signal
 * handler can remove it when a signal ends the process. FN NULL: none (the default).
 * Called on the thread of qpt_write. A process: ignored.
 */
void qpt_on_temp_file(qpt_space_t *s, void (*fn)(void *arg, const char *path), void *arg);

/*****************************************************************************
 * Live processes
 */

/* Let the stopped process run; stop it again (every thread). */
int qpt_run(qpt_space_t *s);
int qpt_stop(qpt_space_t *s);

/* 1 and its wait status once the process has ended (-1: unknown, for a process that was
 * attached and not watched: its parent got it), 0 while it runs (see qpt_alive). */
int qpt_ended(qpt_space_t *s, int *status /*OUT*/);

/*
 * Run system call NR with ARGS (6) in the stopped process, on one of its threads, whose
 * state is restored afterwards; its raw result (-errno on failure) into *RET.
 */
int qpt_syscall(qpt_space_t *s, long nr, const uint64_t args[6], int64_t *ret /*OUT*/);

/*
 * Call the program's procedure at FN once, now, with NARGS (<= 6) integer arguments, in
 * the stopped process on one of its threads (the others stay stopped); its return value
 * into *RET. The thread's registers and vector state are restored afterwards, and the
 * snippets inserted in the procedure run as for any call. The process must have started:
 * right after qpt_spawn (its libraries are not loaded yet) the call is refused with
 * QPT_EINVAL until it has been let run (qpt_run) and stopped again. The procedure must
 * not wait for another thread. If the mutator dies during the call, the thread finishes
 * it and goes on where it was.
 */
int qpt_call_now(qpt_space_t *s, uint64_t fn, const uint64_t *args, int nargs,
                 uint64_t *ret /*OUT*/);

/*****************************************************************************
 * Profiles of rewritten programs
 */

/*
 * The words of qpt_alloc'ed memory as the runs of a rewritten program left them in its
 * profile (PROGRAM.qp, or $QP_PROFILE when it ran with one): NWORDS words from ADDR
 * (as qpt_alloc gave it) into OUT, each summed over every process that ran.
 */
int qpt_profile_read(const char *profile, uint64_t addr, uint64_t *out /*OUT*/,
                     size_t nwords, char *why, size_t whylen);

/*
 * The id of a rewrite (a hash of what was inserted where): of the program the last
 * qpt_write of file S wrote (0 before one, or for a process), and the one a profile
 * carries (of the program that wrote it). A profile whose id is not the rewrite's is
 * another program's: its words mean something else.
 */
uint64_t qpt_written_id(const qpt_space_t *s);
int qpt_profile_id(const char *profile, uint64_t *id /*OUT*/, char *why, size_t whylen);

/*
 * Notes: text that a rewritten program carries for whoever reads its profiles (a tool's
 * layout of its variables, say). qpt_note_set: at the next qpt_write of file S, the
 * program carries TEXT (at most 64 MiB) under NAME (1 to 64 letters, digits, '.', '_'
 * or '-'; a second note of that name replaces the first) in its description, which its
 * id covers. QPT_EUNSUPP for a process.
 * qpt_note_read: the note NAME of the rewritten PROGRAM (malloc'ed into *TEXT: free it)
 * and the rewrite's id (ID may be NULL). qpt_profile_note: that of the program that
 * wrote PROFILE (which must be the rewrite its id names). QPT_ENOTFOUND when there is
 * no such note, QPT_EFORMAT, QPT_EIO; one line in WHY.
 */
int qpt_note_set(qpt_space_t *s, const char *name, const char *text);
int qpt_note_read(const char *program, const char *name, char **text /*OUT*/,
                  uint64_t *id /*OUT*/, char *why, size_t whylen);
int qpt_profile_note(const char *profile, const char *name, char **text /*OUT*/, char *why,
                     size_t whylen);


/*****************************************************************************
 * Time histograms of live series (seed 001, section 2.2): a fixed number of buckets per
 * series; when time runs past the last bucket, neighbouring buckets are merged in pairs
 * and the width doubles, so a session of any length fits in the same memory.
 */

typedef struct qpt_hist qpt_hist_t;

/* NSERIES series of NBUCKETS (even, >= 2) buckets of WIDTH seconds from time T0 into *H.
 * QPT_EINVAL or QPT_ENOMEM. */
int qpt_hist_create(size_t nseries, size_t nbuckets, double width, double t0,
                    qpt_hist_t **h /*OUT*/);

/* A sample at time T (the same clock as T0, increasing): TOTALS[s] is series s's running
 * total; what it added since the previous sample goes into T's bucket. */
void qpt_hist_add(qpt_hist_t *h, double t, const uint64_t *totals);

/* At least NSERIES series (a live session's new rows); the new ones start empty, and
 * TOTALS of later samples must have that many. QPT_EINVAL, QPT_ENOMEM (H unchanged). */
int qpt_hist_grow(qpt_hist_t *h, size_t nseries);

/* What SERIES added in BUCKET (0 out of range); the buckets used so far; their width. */
uint64_t qpt_hist_get(const qpt_hist_t *h, size_t series, size_t bucket);
size_t qpt_hist_used(const qpt_hist_t *h);
double qpt_hist_width(const qpt_hist_t *h);

void qpt_hist_destroy(qpt_hist_t *h);

/*****************************************************************************
 * Timers read while running (seed 001, section 3.3): what a reader outside the process
 * needs to add the running part of an active per-thread CPU timer.
 */

/* The calling thread's kernel id (a gettid system call): it names the thread in
 * /proc/PID/task/, where a reader outside the process finds its CPU time so far. */
qpt_expr_t qpt_thread_id(qpt_snippet_t *sn);

/*****************************************************************************
 * Live procedures relocated whole
 */

/*
 * Live mode: with ON, an entry or exit insertion whose point does not fit in place
 * (too short, shared bytes, other code jumping into the procedure) puts its procedure's
 * entry and exits into one copy of the procedure instead of being refused (dyn(1),
 * "Procedures relocated whole"); 0 (the default): refused, as before. Applies to the
 * insertions made after it, in S and in its shared libraries' spaces (qpt_library).
 * QPT_EINVAL; QPT_EUNSUPP for a file.
 */
int qpt_set_relocate(qpt_space_t *s, int on);

/*****************************************************************************
 * Memory reads that cannot fault (the metric language's *E, E[I], loadN(E))
 */

/* The SIZE-byte (1, 2, 4, 8) value at the computed address ADDR, zero-extended, read by
 * the kernel for the program (process_vm_readv of its own process): 0 where any of it
 * cannot be read (unmapped, a guard page), never a fault. Two system calls each time:
 * about 2 us. A process whose seccomp filter forbids those calls is killed by it. */
qpt_expr_t qpt_load_safe(qpt_snippet_t *sn, qpt_expr_t addr, int size);

/*****************************************************************************
 * The life of a live process: its end, events (threads, fork, exec, libraries),
 * named variables, cycles to nanoseconds
 */

/*
 * 1 while the process of S (or of the library space S) is there, 0 once it has ended
 * (gone, or a zombie), also when it was killed while stopped; QPT_EUNSUPP for a file.
 * Once it has ended every live call on S fails with QPT_EEXITED and qpt_error says "the
 * process N has exited (status C)" (or "killed by signal K"; "status unknown" when it
 * was attached and not watched: its wait status went to its parent); qpt_read_memory
 * of qpt_alloc'ed memory still gives its last values, and qpt_ended its status.
 */
int qpt_alive(qpt_space_t *s);

/* Events of a watched process (qpt_watch), one at a time from qpt_next_event. */
typedef enum qpt_event_kind {
    QPT_EV_THREAD_START = 1, /* a thread started (TID) */
    QPT_EV_THREAD_EXIT,      /* a thread other than the first ended (TID, STATUS), also
                              * when the whole process ends */
    QPT_EV_FORK,             /* the process forked (TID: the child's pid), see below */
    QPT_EV_EXEC,             /* the process ran execve (NAME: the new program's path):
                              * S is now the new program, see below */
    QPT_EV_LIBRARY_LOAD,     /* a shared library was mapped (NAME: its base name, as
                              * qpt_library takes it; BASE), its initialisers not run */
    QPT_EV_LIBRARY_UNLOAD,   /* ... unmapped (dlclose): its space's calls now fail */
    QPT_EV_EXIT,             /* the process ended (STATUS); always reported, last */
} qpt_event_kind_t;
#define QPT_EV_BIT(kind) (1u << (kind))
#define QPT_EV_ALL 0xfeu     /* every kind above */

typedef struct qpt_event {
    uint32_t kind;       /* qpt_event_kind_t */
    int tid;             /* THREAD_*: the thread id; FORK: the child's pid; else the
                          * process's pid */
    int status;          /* THREAD_EXIT, EXIT: the wait status (WIFEXITED...); -1 when
                          * unknown */
    int child_counted;   /* FORK: 1 when the child runs the parent's snippets, which add
                          * to the same qpt_alloc'ed memory; 0 when they were taken out
                          * of it (that memory was private: the child's counts would
                          * be lost); -1 when it was let go stopped (SIGSTOP) because
                          * the loader's int3 (qpt_watch_unguarded) could not be taken
                          * out of its copy: its user runs `dyn clean TID`, then
                          * kill -CONT TID (reported even without QPT_EV_FORK in the
                          * mask) */
    uint64_t base;       /* LIBRARY_*: the lowest address of its mappings */
    char name[512];      /* LIBRARY_*: the library's base name; EXEC: the new program */
} qpt_event_t;

/*
 * Watch the process of S for the events in MASK (QPT_EV_BIT(kind)s, or QPT_EV_ALL; 0
 * stops watching): from now on its threads stay traced while it runs (qpt_run keeps
 * them), so that starts of threads, forks, execs and the dynamic loader's changes are
 * seen. S must be stopped; a process qpt_spawn started is first let run to its entry
 * point when MASK has library events (as qpt_library does). While S is watched its
 * events wait for qpt_next_event or qpt_wait: a thread that starts waits in its
 * creation until the mutator next calls one of them, so a watched process should be
 * waited on. A forked child is always let go (detached): with the parent's snippets when
 * they count into memory it shares, else with them taken out (child_counted says which);
 * qpt_attach(ev.tid) instruments it on its own. An exec always makes S the new program
 * (its procedures, points and symbols, at its own addresses, run to its entry point:
 * its libraries are loaded): the old insertions are gone (their handles removed), the
 * old qpt_alloc'ed memory keeps its last values for qpt_read_memory but no new
 * snippet may use it, and library spaces of the old program fail with QPT_EEXITED.
 * QPT_EINVAL for a library's space (watch its process through S).
 */
int qpt_watch(qpt_space_t *s, unsigned mask);

/*
 * 1 when the watch of S (its process's, for a library's space) put the dynamic loader's
 * breakpoint in as a plain int3 instead of the guarded jump (dyn(1), "Following"): its
 * r_brk has no room for the jump, or the process could not make the shared page. That
 * int3 outlives a mutator killed by SIGKILL: the process then dies (SIGTRAP) at its next
 * dlopen or dlclose unless `dyn clean PID` runs first, so a mutator tells its user.
 * 2 when it is the guarded jump but the process refused MADV_WIPEONFORK (a kernel before
 * 4.14): a forked child is then told from the process by its pid alone, so one that is
 * process 1 of a new pid namespace, forked by a process 1 of its own, would wait in the
 * breakpoint until the mutator ends (also worth telling).
 * 0 otherwise (the guarded jump, which a killed mutator leaves harmless; no breakpoint;
 * a file); QPT_EINVAL for NULL. Ask after qpt_watch and after each QPT_EV_EXEC (the new
 * program gets its own breakpoint).
 */
int qpt_watch_unguarded(const qpt_space_t *s);

/*
 * The next event of the watched process of S into *EV: 1 with an event, 0 when none
 * came within TIMEOUT_MS milliseconds (-1: wait until one does; 0: only what already
 * happened). A stopped process is let run first (qpt_run). Every event but
 * QPT_EV_EXIT is returned with the process stopped (or ended: events seen before its
 * end still come, and then calls fail with QPT_EEXITED): the mutator may then insert,
 * commit (into a library just loaded too: qpt_library(s, ev.name, ...)), read memory
 * or call, and lets it go on with qpt_run (or the next qpt_next_event). After
 * QPT_EV_EXIT, QPT_EEXITED.
 */
int qpt_next_event(qpt_space_t *s, qpt_event_t *ev /*OUT*/, int timeout_ms);

/*
 * Callbacks, the Dyninst way: FN(S, EV, ARG) is called for each event of KIND from
 * qpt_wait, with the process stopped (FN NULL: no callback, and KIND no longer
 * watched). Setting one watches KIND (qpt_watch's rules: S stopped the first time).
 * FN may call every libqpt function on S but qpt_close, qpt_kill, qpt_wait and
 * qpt_next_event (insert
 * into a library just loaded, read memory, qpt_call_now...); the process goes on when it
 * returns (unless FN already let it run with qpt_run).
 */
typedef void (*qpt_event_fn)(qpt_space_t *s, const qpt_event_t *ev, void *arg);
int qpt_set_callback(qpt_space_t *s, uint32_t kind, qpt_event_fn fn, void *arg);

/*
 * Let the watched process of S run and call the callbacks of its events for TIMEOUT_MS
 * milliseconds (-1: until it ends): 1 once it ended (after QPT_EV_EXIT's callback), 0
 * when the time ran out (it runs on), or a QPT_E* code.
 */
int qpt_wait(qpt_space_t *s, int timeout_ms);

/*
 * As qpt_alloc, and the memory gets NAME (unique in S; 1 to 200 bytes, the first not a
 * space): a rewritten
 * program records the names of its variables, so that a later program reads them from
 * the profile by name (qpt_profile_read_named) without knowing the address; in a
 * process qpt_var_named finds it again.
 */
int qpt_alloc_named(qpt_space_t *s, const char *name, size_t bytes, uint64_t *addr /*OUT*/);

/* The address and size (may be NULL) of the memory named NAME in S; QPT_ENOTFOUND. */
int qpt_var_named(const qpt_space_t *s, const char *name, uint64_t *addr /*OUT*/,
                  size_t *bytes /*OUT*/);

/*
 * From a profile of a rewritten program: the address (as qpt_alloc_named gave it, for
 * qpt_profile_read) and size in bytes (either may be NULL) of its memory named NAME,
 * found in the program the profile names (which must be the rewrite that wrote it).
 * QPT_ENOTFOUND (WHY lists the names there are), QPT_EFORMAT, QPT_EIO.
 */
int qpt_profile_var(const char *profile, const char *name, uint64_t *addr /*OUT*/,
                    size_t *bytes /*OUT*/, char *why, size_t whylen);

/* qpt_profile_read of the first NWORDS words of the memory named NAME (QPT_ERANGE when
 * it has fewer). */
int qpt_profile_read_named(const char *profile, const char *name, uint64_t *out /*OUT*/,
                           size_t nwords, char *why, size_t whylen);

/*
 * The rate of the time-stamp counter that qpt_cycles and the wall-clock timers read,
 * in cycles per nanosecond (the same for every process of the machine), and CYCLES of
 * it in nanoseconds. Calibrated against CLOCK_MONOTONIC once, at the first call
 * (which takes 20 ms); then a multiplication.
 */
double qpt_cycles_per_ns(void);
uint64_t qpt_cycles_to_ns(uint64_t cycles);

/*****************************************************************************
 * Arguments' fields by their DWARF types
 */

/* How to read a field of an argument: v = the argument, then for each i < nloads,
 * v = SIZE[i] bytes at v + OFFSET[i] (zero-extended; IS_SIGNED: the last is a signed
 * integer, which qpt_field_value sign-extends). */
#define QPT_FIELD_MAX 8
typedef struct qpt_field {
    int nloads;
    int64_t offset[QPT_FIELD_MAX];
    int size[QPT_FIELD_MAX];
    int is_signed;
} qpt_field_t;

/*
 * The field PATH of argument ARG (0..5) of PROC, from the program's DWARF debug
 * information (or its separate debug file): PATH is "->len", "->hdr.len",
 * "->next->len" ('->' through a pointer, '.' into a member). QPT_ENOTFOUND with one
 * line in WHY when it cannot be known for sure: no debug information, a compiler's copy
 * of the procedure (f.isra.0), an argument not in its integer register, no such member,
 * a bit-field, an array or struct. Thread-safe for different spaces.
 */
int qpt_arg_field(const qpt_space_t *s, uint32_t proc, int arg, const char *path,
                  qpt_field_t *out /*OUT*/, char *why, size_t whylen);

/* The value of field F of BASE (an argument node): safe reads (qpt_load_safe, 0 where
 * memory cannot be read), sign-extended when F is signed. */
qpt_expr_t qpt_field_value(qpt_snippet_t *sn, qpt_expr_t base, const qpt_field_t *f);

/*****************************************************************************
 * Threads' call stacks and per-thread blocks, from outside a stopped process
 */

/* One thread's stack for qpt_thread_stacks: PCS innermost first, the thread's pc and
 * then each return address less 1 (inside the call, so inside the caller). Return 0 to
 * go on. */
typedef int (*qpt_stack_fn)(void *arg, int tid, uint64_t thread_ptr, const uint64_t *pcs,
                            size_t n);

/*
 * The call stack of every thread of the stopped process of S, unwound with the modules'
 * call frame information (at most 1024 frames; a stack whose unwinding stops early, in
 * code without CFI or in a trampoline, gives the frames found so far): FN for each
 * thread, with its id and thread pointer. QPT_EUNSUPP for a file, QPT_EINVAL when the
 * process runs.
 */
int qpt_thread_stacks(qpt_space_t *s, qpt_stack_fn fn, void *arg);

/*
 * The address of the block of the per-thread variable VAR (qpt_alloc_per_thread, BYTES
 * a block) that the thread with thread pointer THREAD_PTR uses, in the stopped process
 * of S: the block its snippets will find, taken for it now when it has none yet.
 * QPT_ERANGE when every block is taken (its snippets share the overflow block).
 */
int qpt_thread_block(qpt_space_t *s, uint64_t var, size_t bytes, uint64_t thread_ptr,
                     uint64_t *addr /*OUT*/);

/*****************************************************************************
 * Shared libraries by name (issue 30: dyn --count on the one live session engine)
 */

/*
 * Does MODULE (a shell pattern) name the library whose file's base name is NAME? As the
 * file is named, or as ldd and DT_NEEDED name it, without the file's trailing version
 * numbers ("libsqlite3.so.0" names libsqlite3.so.0.8.6). qpt_library chooses with it.
 * 1 or 0. Thread-safe.
 */
int qpt_module_matches(const char *module, const char *name);

/* The base name of the file of a library's space (qpt_library: "libc.so.6"), NULL for a
 * program's space. Valid while S is. */
const char *qpt_library_name(const qpt_space_t *s);

/*
 * The threads that analyse the program (and libraries) of each space opened from now
 * on (qpt_open, qpt_attach, qpt_spawn, qpt_library): 0 or 1 the caller's alone, at most
 * 16; the analysis is the same for any number, only sooner ready (dyn uses the CPUs, up
 * to 8). QPT_EINVAL above 16. Call before opening spaces, not while one is being opened.
 */
int qpt_set_analysis_threads(unsigned n);

/*
 * The name by which procedure PROC matches PATTERN (as qpt_proc_match takes it): its own,
 * or another function symbol at its entry (an alias: "malloc" for __libc_malloc); NULL
 * when none does. Valid while S is. Thread-safe (S only read).
 */
const char *qpt_proc_match_name(const qpt_space_t *s, uint32_t proc, const char *pattern);

#ifdef __cplusplus
}
#endif
#endif
