/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_QPT_PRIV_H
#define QP_QPT_PRIV_H
/*
 * PURPOSE: the inside of libqpt's public face (include/qpt/qpt.h): what a space holds
 * and what its file and live halves share. libqpt/ turns the public calls into the
 * core's: cfg/ for procedures and points, arch/'s snippets, editor/ (plan, probes, ELF
 * writer) for files, dynamic/ for processes. No other folder includes this header.
 */
#include <stddef.h>
#include <stdint.h>

#include "arch/arch.h"
#include "cfg/cfg.h"
#include "editor/ed.h"
#include "include/qpt/qpt.h"

/* File mode: qpt_alloc'ed words get addresses from here until the rewrite places them
 * (placeholders: the snippet nodes that use them are translated at qpt_write). */
#define QPT_VAR_BASE 0x7ff000000000ull

struct qpt_snippet {
    arch_snip_t *v;   /* the nodes */
    uint32_t n, cap;
    int bad;          /* a builder failed: the snippet is refused */
};

/* One insertion: a copy of the snippet, where it goes, and what it became. */
typedef struct qpt_ins {
    qpt_point_t pt;
    arch_snip_t *nodes;   /* copied at qpt_insert */
    uint32_t n, root;
    arch_snip_ctx_t ctx;  /* what holds at the point */
    uint64_t where;       /* the instruction the probe or patch names (space address) */
    int64_t order;        /* runs before insertions of larger order at its place */
    uint64_t patch_lo, patch_hi; /* live: the bytes its point's jump replaces */
    uint8_t at;           /* ed_at_t */
    uint8_t entry;        /* ED_PROBE_ENTRY */
    uint8_t save_flags;   /* flags may be live there */
    uint8_t removed;      /* qpt_remove'd */
    uint8_t whole;        /* live: its point is its procedure's entry block moved whole
                           * (DYN_PT_WHOLE): a QPT_EXIT at the ret or tail call that ends
                           * it, or a QPT_ENTRY too short for a jump of its own */
    uint8_t reloc;        /* live: its procedure relocated whole (DYN_PT_PROC): a QPT_ENTRY
                           * or QPT_EXIT whose point does not fit in place, or another of
                           * the same procedure (one copy holds them all) */
    uint32_t lender;      /* live: its point's short jump goes to a slot in the original
                           * code of procedure lender - 1, relocated whole for it
                           * (qpt_live_borrow.c); 0: none */
    uint64_t slot_for;    /* ... the link address of that short jump (its entry's, or a
                           * return site's in its procedure's copy) */
} qpt_ins_t;

/*****************************************************************************
 * Space kinds: what a file and a process do differently, one table each
 *
 * qpt_space.c checks a call's arguments and dispatches through S->ops; the kinds'
 * entries do the work or refuse with the message a caller of that kind should read.
 * A library of a live process (qpt_library) is a live space too.
 */
typedef struct qpt_space_ops {
    const char *kind;        /* "file" or "process" */
    int live;                /* what qpt_is_live answers */
    /* Why S's image (just read) cannot be measured in this kind of space, or NULL. */
    const char *(*image_refusal)(qpt_space_t *s);
    /* Free what the kind holds; KILL: qpt_kill (a process started by qpt_spawn ends). */
    void (*close)(qpt_space_t *s, int kill);
    /* Why procedure PROC takes no snippet, or NULL (not a fragment: checked before). */
    const char *(*proc_refusal)(const qpt_space_t *s, uint32_t proc);
    /* Where the snippet of edge point PT goes: INS->where (and ->at); TO its
     * destination block. 0, or a failure with S's message set. */
    int (*edge_place)(qpt_space_t *s, const qpt_point_t *pt, const cfg_block_t *to,
                      qpt_ins_t *ins);
    /* Whether block B's last instruction, a call, is an exit of its procedure. */
    int (*call_is_exit)(const qpt_space_t *s, const cfg_block_t *b);
    /* The context of an exit at IN, a conditional tail call (jcc) or a call (one that
     * call_is_exit said never returns), or a refusal. */
    int (*exit_other)(qpt_space_t *s, const qpt_point_t *pt, const arch_insn_t *in,
                      arch_snip_ctx_t *c /*OUT*/);
    /* Whether the checked insertion INS can go in (0), or a failure with the message. */
    int (*accept)(qpt_space_t *s, qpt_ins_t *ins);
    /* The cycles the code of insertion IN costs where it runs. */
    int (*cycles)(qpt_space_t *s, const qpt_ins_t *in, double *cycles /*OUT*/);
    /* The public calls of the same names (arguments checked by qpt_space.c). */
    int (*alloc)(qpt_space_t *s, size_t bytes, uint64_t *addr);
    int (*free)(qpt_space_t *s, uint64_t addr);
    int (*set_active)(qpt_space_t *s, int on);
    int (*set_relocate)(qpt_space_t *s, int on);
    int (*keep_on_exit)(qpt_space_t *s, int keep);
    int (*read)(qpt_space_t *s, uint64_t addr, void *buf, size_t len);
    int (*write)(qpt_space_t *s, uint64_t addr, const void *buf, size_t len);
    int (*commit)(qpt_space_t *s);
    int (*write_file)(qpt_space_t *s, const char *output);
    /* A process's life (qpt_live.c, qpt_events.c); a file refuses each. */
    int (*alive)(qpt_space_t *s);
    int (*library)(qpt_space_t *s, const char *module, qpt_space_t **out, char *why,
                   size_t whylen);
    int (*run)(qpt_space_t *s);
    int (*stop)(qpt_space_t *s);
    int (*ended)(qpt_space_t *s, int *status);
    int (*syscall)(qpt_space_t *s, long nr, const uint64_t args[6], int64_t *ret);
    int (*call_now)(qpt_space_t *s, uint64_t fn, const uint64_t *args, int nargs,
                    uint64_t *ret);
    int (*pid)(const qpt_space_t *s);
    int (*runs_as_copy)(qpt_space_t *s, uint32_t proc); /* qpt_proc_runs_as_copy */
    int (*thread_stacks)(qpt_space_t *s, qpt_stack_fn fn, void *arg);
    int (*thread_block)(qpt_space_t *s, uint64_t var, size_t bytes, uint64_t thread_ptr,
                        uint64_t *addr);
    /* Per-CPU words: the rseq area's offset from the thread pointer and the possible
     * CPUs, or QP_EUNSUPP with the reason (NULL: a file's, never). */
    int (*cpu_slots)(qpt_space_t *s, int32_t *rseq_offset, unsigned *ncpu);
    int (*watch)(qpt_space_t *s, unsigned mask);
    int (*next_event)(qpt_space_t *s, qpt_event_t *ev, int timeout_ms);
    int (*set_callback)(qpt_space_t *s, uint32_t kind, qpt_event_fn fn, void *arg);
    int (*wait)(qpt_space_t *s, int timeout_ms);
} qpt_space_ops_t;

/* A file (qpt_open; qpt_file.c). */
extern const qpt_space_ops_t qpt_file_ops;
/* A process or one of its libraries (qpt_attach, qpt_spawn, qpt_library; qpt_live.c,
 * or qpt_live_none.c without dynamic/, where no such space outlives its creation). */
extern const qpt_space_ops_t qpt_live_ops;

/* The types of a process's state, defined by qpt_live.c and dynamic/. */
struct dyn_proc;
struct dyn_session;
struct dyn_site;
struct qpt_live_set;
struct qpt_live_vars;

struct qpt_space {
    const qpt_space_ops_t *ops; /* its kind: qpt_file_ops or qpt_live_ops */
    cfg_image_t *img;        /* the executable */
    cfg_prog_t *prog;        /* its procedures */
    uint64_t bias;           /* run-time minus link-time addresses (live PIEs) */
    char *path;              /* the executable's path (file mode: the input) */
    qpt_ins_t *ins;          /* insertions, by handle */
    size_t nins, capins;
    int64_t first, last;     /* the orders of qpt_insert_first and qpt_insert so far */
    struct qpt_named *named; /* qpt_alloc_named's names */
    size_t nnamed;
    char **notes;            /* qpt_note_set's: QPT_NOTE_TAG NAME "\n" TEXT each */
    size_t nnotes;
    cfg_loop_forest_t **forests; /* per procedure: its loops, once asked for (qpt_cfg.c) */
    char err[512];           /* the last failure */
    /* A file's own state (qpt_file_ops only). */
    ed_plan_t *plan;         /* which procedures move */
    uint64_t vars;           /* bytes of qpt_alloc'ed words */
    uint64_t written_id;     /* the description id of the last qpt_write */
    const char *all_in_place; /* why every procedure stays in place (Go, GHC) */
    void (*temp_fn)(void *, const char *); /* qpt_on_temp_file's, or NULL */
    void *temp_arg;          /* its argument */
    /* A process's own state (qpt_live_ops only: qpt_live.c, qpt_events.c). */
    struct dyn_proc *proc;   /* the process */
    struct qpt_live_set *sess; /* the committed set of snippets, or NULL */
    struct dyn_session *check; /* a session never installed, to check points */
    struct pt_decoded *decoded; /* what its sessions decoded of procedures relocated
                                 * whole (dyn_session_keep_decoded), or NULL */
    struct qpt_live_index *index; /* the insertions by procedure and page (qpt_live_index.c) */
    uint8_t *lent;           /* live: per procedure of the check session's, 1 once a
                              * point borrowed a slot of its code (qpt_live_borrow.c: a
                              * superset, so that most procedures are known to lend none
                              * without a look at every insertion); freed with check */
    int inactive;            /* qpt_set_active(s, 0) took the snippets out */
    int relocate;            /* qpt_set_relocate(s, 1): points that do not fit in place
                              * go into a copy of their procedure */
    int keep_on_exit;        /* a mutator's exit leaves the snippets in */
    struct qpt_space *next_live; /* the spaces restored at exit */
    int at_exec;             /* started by qpt_spawn, not run yet */
    int spawned;             /* started by qpt_spawn */
    int kill_on_close;       /* qpt_kill: the process ended, not let run */
    struct qpt_space *parent; /* a library's space (qpt_library): the executable's */
    struct qpt_space *libs;  /* the executable's: its library spaces, a list */
    struct qpt_space *next_lib;
    char *lib_name;          /* a library's space: its base name ("libc.so.6") */
    uint64_t lib_lo;         /* ... and the lowest address of its mappings */
    struct qpt_live_vars *lvars; /* the memory qpt_alloc mapped */
    size_t nlvars;
    /* The life of a live process (issue 32: qpt_alive, events, named variables). */
    int exited;              /* the process has ended (qpt_live_gone) */
    int exit_status;         /* ... its wait status, -1 when unknown */
    qpt_handle_t refused;    /* live: 1 + the insertion whose point the last failed commit
                              * could not install (qpt_commit_refused), or 0 */
    int stale;               /* a library's space whose image is gone: unloaded, or the
                              * process ran execve (its calls fail with QPT_EEXITED) */
    struct qpt_watch *watch; /* qpt_watch's state (qpt_events.c), or NULL */
};

/* A name of qpt_alloc_named. */
typedef struct qpt_named {
    char *name;
    uint64_t addr;           /* as qpt_alloc gave it */
    size_t bytes;
} qpt_named_t;

/* The string a rewrite's description holds for each named variable: the prefix, then
 * "OFFSET BYTES NAME" (OFFSET from the first variable, decimal). */
#define QPT_NAMED_TAG "libqpt-var "

/* The string a rewrite's description holds for each note (qpt_note.c): the prefix, then
 * "NAME\nTEXT". */
#define QPT_NOTE_TAG "libqpt-note "

struct qp_desc;
struct qp_profile;
/* qpt_note.c: the notes of S as strings of D (the description qpt_write writes); free them. */
int qpt_notes_describe(const qpt_space_t *s, struct qp_desc *d);
void qpt_notes_free(qpt_space_t *s);

/* qpt_file.c: the description of the rewritten PROGRAM; that of the program that wrote
 * profile P (read from PROFILE), checked against P. 0 or QP_E* with one line in WHY. */
int qpt_program_desc(const char *program, struct qp_desc *d, char *why, size_t whylen);
int qpt_profile_desc(const char *profile, const struct qp_profile *p, struct qp_desc *d,
                     char *why, size_t whylen);

/*
 * Live mode: 0 while the process of S is there; QPT_EEXITED with the message once it
 * has ended (or S is a library space whose image is gone). PROBE: ask the system (else
 * only what is already known: cheap, for calls that do not touch the process).
 */
int qpt_live_gone(qpt_space_t *s, int probe);
/* After an execve (S stopped at the new image's entry): S becomes the new program. */
int qpt_live_new_image(qpt_space_t *s, char *why, size_t whylen);
/* A library space whose module was unmapped: its session dropped, its calls refused. */
void qpt_live_lib_gone(qpt_space_t *l, int gone_all, const char *why);
/* Live mode: the events' state (qpt_events.c), freed with the space. */
void qpt_watch_free(qpt_space_t *s);
/* Stop following the process of S (stopped), every child that leaves stopped put on the
 * list of qpt_children_left_stopped (qpt_close: no error can say them). */
void qpt_live_unfollow(qpt_space_t *s);
/* Whether every qpt_alloc'ed memory of S (and its libraries) is shared with the process's
 * copies (a fork's child adds to it), and dyn's sessions: the child's patches taken out
 * of CHILD (a dyn_proc_t) when not. */
int qpt_live_fork_child(qpt_space_t *s, struct dyn_proc *child);

/* Set S's message (printf-style) and return RC. */
int qpt_fail(qpt_space_t *s, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* RC as one of the public QPT_E* codes (the core has a few more). */
int qpt_public_rc(int rc);

/* The context, probe place and flags of a point (shared by both modes). */
int qpt_point_setup(qpt_space_t *s, const qpt_point_t *pt, qpt_ins_t *ins);

/* Free what the CFG calls keep (qpt_cfg.c). */
void qpt_cfg_free(qpt_space_t *s);

/* Live mode (qpt_live.c; qpt_live_none.c refuses attach and spawn without dynamic/). */
int qpt_live_attach(qpt_space_t *s, int pid, char *why, size_t whylen);
int qpt_live_spawn(qpt_space_t *s, char *const argv[], char *why, size_t whylen);
void qpt_live_close(qpt_space_t *s);
/* S's set of decoded instructions for its sessions (made on first use; NULL without
 * memory: they decode each time), freed with S. */
struct pt_decoded *qpt_live_decoded(qpt_space_t *s);
int qpt_live_alloc(qpt_space_t *s, size_t bytes, uint64_t *addr);
int qpt_live_read(qpt_space_t *s, uint64_t addr, void *buf, size_t len);
int qpt_live_write(qpt_space_t *s, uint64_t addr, const void *buf, size_t len);
int qpt_live_commit(qpt_space_t *s);
int qpt_live_point_ok(qpt_space_t *s, qpt_ins_t *ins, const char **why);

/*
 * The insertions of a live space by procedure and by page (qpt_live_index.c), so that
 * checking one against the others is not a scan of all. Handles only: whether one is
 * removed or relocated is read from S->ins by the caller.
 */
typedef struct qpt_live_index qpt_live_index_t;
/* Brings S->index up to date with handles [0, S->nins): 0 or QP_ENOMEM. */
int qpt_live_index_sync(qpt_space_t *s);
/* Frees S->index (NULL after). */
void qpt_live_index_free(qpt_space_t *s);
/* Insertion H's patch range changed (a lender's points into its copy): found by it too. */
int qpt_live_index_moved(qpt_space_t *s, size_t h);
/* The handles of procedure PROC's insertions, ascending (*N of them; NULL when none),
 * valid until the next sync. */
const size_t *qpt_live_index_proc(const qpt_space_t *s, uint32_t proc, size_t *n /*OUT*/);
/* The lowest handle whose patch range shares a page with [LO, HI) (an empty range: the
 * page of LO) and for which FN says 1; SIZE_MAX when none. */
size_t qpt_live_index_overlap(const qpt_space_t *s, uint64_t lo, uint64_t hi,
                              int (*fn)(const qpt_space_t *s, size_t h, void *arg),
                              void *arg);
/* Neighbour slots (qpt_live_borrow.c): a point too short for a jump, with no padding in
 * reach, through a slot in a neighbour relocated whole. qpt_live_borrow: 0 with INS's
 * lender and point set, else < 0 (INS as it was). qpt_live_lender: 1 + the insertion
 * whose point borrows from PROC, or 0. qpt_live_lender_point: INS, of PROC that lends,
 * into its copy (0), or QP_EUNSUPP with *WHY. */
int qpt_live_borrow(qpt_space_t *s, qpt_ins_t *ins);
size_t qpt_live_lender(const qpt_space_t *s, uint32_t proc);
int qpt_live_lender_point(qpt_space_t *s, qpt_ins_t *ins, const char **why);
int qpt_live_stacks(qpt_space_t *s, qpt_stack_fn fn, void *arg);
int qpt_live_cpu_slots(qpt_space_t *s, int32_t *rseq_offset, unsigned *ncpu);
int qpt_live_thread_block(qpt_space_t *s, uint64_t var, size_t bytes, uint64_t tp,
                          uint64_t *addr);
int qpt_live_free(qpt_space_t *s, uint64_t addr);
/* Whether an insertion of S that is in the process (1) or not removed (2) reads or
 * writes memory in [LO, HI): the first one's index in *K; 0 when none does. */
int qpt_live_uses(const qpt_space_t *s, uint64_t lo, uint64_t hi, size_t *k /*OUT*/);
/*
 * qpt_live.c: the ranges of the gone variables of the process of TOP (any space of it:
 * unloaded libraries' included, closed ones too: qpt_live_close hands them to TOP),
 * pairs (address, length) into *OUT (freed by the caller), *N of them: neither a new
 * variable nor dyn's trampolines and counters are ever mapped there (the loader guard's
 * pages and map_shared's scratch page are made without them), so an address
 * qpt_alloc gave stays unique in the session (a snippet or a reader that still holds it
 * never meets other memory there). 0, or QP_ENOMEM.
 */
int qpt_live_gone_ranges(const qpt_space_t *top, uint64_t **out, size_t *n);
int qpt_live_set_active(qpt_space_t *s, int on);
int qpt_live_keep_on_exit(qpt_space_t *s, int keep);
/* The public calls of a process's life, for a live space (arguments checked by
 * qpt_process.c): qpt_live.c and qpt_events.c. */
int qpt_live_alive(qpt_space_t *s);
int qpt_live_library(qpt_space_t *s, const char *module, qpt_space_t **out, char *why,
                     size_t whylen);
int qpt_live_run(qpt_space_t *s);
int qpt_live_stop(qpt_space_t *s);
int qpt_live_ended(qpt_space_t *s, int *status);
int qpt_live_syscall(qpt_space_t *s, long nr, const uint64_t args[6], int64_t *ret);
int qpt_live_call_now(qpt_space_t *s, uint64_t fn, const uint64_t *args, int nargs,
                      uint64_t *ret);
int qpt_live_pid(const qpt_space_t *s);
int qpt_live_watch(qpt_space_t *s, unsigned mask);
int qpt_live_next_event(qpt_space_t *s, qpt_event_t *ev, int timeout_ms);
int qpt_live_set_callback(qpt_space_t *s, uint32_t kind, qpt_event_fn fn, void *arg);
int qpt_live_wait(qpt_space_t *s, int timeout_ms);

/* qpt_live.c and qpt_live_commit.c (built with dynamic/ only): a process's state. */

/* Variables: memory shared between the process and us (a memfd of ours it maps), so
 * they are read without stopping it, and keep their last values after it ended. */
typedef struct qpt_live_vars {
    uint64_t remote;         /* address in the process */
    size_t len;
    void *local;             /* our mapping */
    int fd;                  /* our memfd */
    int gone;                /* its mapping in the process went with an execve, or with
                              * its library (a dlclose: qpt_live_lib_gone unmaps it): its
                              * last values stay readable here, no new snippet may use it */
} qpt_live_vars_t;

/* What a committed set holds: one dyn point per distinct (kind, address). */
typedef struct qpt_live_set {
    struct dyn_session *sess; /* installed, or NULL */
    arch_snip_t **joined;    /* the joined snippets it uses (freed with it) */
    size_t njoined;
    uint64_t **exits;        /* the exit lists of its procedures relocated whole (freed
                              * with it) */
    size_t nexits;
    struct dyn_site **sites; /* the call sites of its procedures relocated whole (freed
                              * with it) */
    size_t nsites;
    uint8_t *in;             /* per insertion: in this set */
    size_t nin;
    size_t *row_ins;         /* per dyn row: an insertion at its point (+1), 0: none */
    size_t nrows;
} qpt_live_set_t;

/* Free L (a set and its dyn session), NULL or not. */
void qpt_live_set_free(qpt_live_set_t *l);
/* S must be stopped for this call: QPT_EEXITED when it cannot be, for it has ended. */
int qpt_live_must_be_stopped(qpt_space_t *s);

#endif
