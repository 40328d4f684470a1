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
    uint8_t live_in;      /* live: in the process now */
    void *live;           /* live: the session's record of it */
} qpt_ins_t;

struct qpt_space {
    int live;                /* a process */
    cfg_image_t *img;        /* the executable */
    cfg_prog_t *prog;        /* its procedures */
    uint64_t bias;           /* run-time minus link-time addresses (live PIEs) */
    char *path;              /* the executable's path (file mode: the input) */
    ed_plan_t *plan;         /* file mode: which procedures move */
    qpt_ins_t *ins;          /* insertions, by handle */
    size_t nins, capins;
    int64_t first, last;     /* the orders of qpt_insert_first and qpt_insert so far */
    uint64_t vars;           /* file mode: bytes of qpt_alloc'ed words */
    void *proc;              /* live mode: the process (dyn_proc_t) */
    void *sess;              /* live mode: its session (dyn_session_t) */
    void *check;             /* live mode: a session never installed, to check points */
    int inactive;            /* live mode: qpt_set_active(s, 0) took the snippets out */
    int relocate;            /* live mode: qpt_set_relocate(s, 1): points that do not fit
                              * in place go into a copy of their procedure */
    int keep_on_exit;        /* live mode: a mutator's exit leaves the snippets in */
    struct qpt_space *next_live; /* live mode: the spaces restored at exit */
    int at_exec;             /* live mode: started by qpt_spawn, not run yet */
    int spawned;             /* live mode: started by qpt_spawn */
    uint64_t written_id;     /* file mode: the description id of the last qpt_write */
    int kill_on_close;       /* live mode: qpt_kill: the process ended, not let run */
    struct qpt_space *parent; /* a library's space (qpt_library): the executable's */
    struct qpt_space *libs;  /* the executable's: its library spaces, a list */
    struct qpt_space *next_lib;
    char *lib_name;          /* a library's space: its base name ("libc.so.6") */
    uint64_t lib_lo;         /* ... and the lowest address of its mappings */
    void *lvars;             /* live mode: the memory qpt_alloc mapped (vars_t) */
    size_t nlvars;
    cfg_loop_forest_t **forests; /* per procedure: its loops, once asked for (qpt_cfg.c) */
    const char *all_in_place; /* file mode: why every procedure stays in place (Go, GHC) */
    /* The life of a live process (issue 32: qpt_alive, events, named variables). */
    int exited;              /* live: the process has ended (qpt_live_gone) */
    int exit_status;         /* ... its wait status, -1 when unknown */
    int stale;               /* a library's space whose image is gone: unloaded, or the
                              * process ran execve (its calls fail with QPT_EEXITED) */
    struct qpt_watch *watch; /* live: qpt_watch's state (qpt_events.c), or NULL */
    struct qpt_named *named; /* qpt_alloc_named's names */
    size_t nnamed;
    char err[512];           /* the last failure */
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
/* Whether every qpt_alloc'ed memory of S (and its libraries) is shared with the process's
 * copies (a fork's child adds to it), and dyn's sessions: the child's patches taken out
 * of CHILD (a dyn_proc_t) when not. */
int qpt_live_fork_child(qpt_space_t *s, void *child);

/* Set S's message (printf-style) and return RC. */
int qpt_fail(qpt_space_t *s, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* RC as one of the public QPT_E* codes (the core has a few more). */
int qpt_public_rc(int rc);

/* The context, probe place and flags of a point (shared by both modes). */
int qpt_point_setup(qpt_space_t *s, const qpt_point_t *pt, qpt_ins_t *ins);

/* Free what the CFG calls keep (qpt_cfg.c). */
void qpt_cfg_free(qpt_space_t *s);

/* Live mode (qpt_live.c; stubs that refuse without dynamic/). */
int qpt_live_attach(qpt_space_t *s, int pid, char *why, size_t whylen);
int qpt_live_spawn(qpt_space_t *s, char *const argv[], char *why, size_t whylen);
void qpt_live_close(qpt_space_t *s);
int qpt_live_alloc(qpt_space_t *s, size_t bytes, uint64_t *addr);
int qpt_live_read(qpt_space_t *s, uint64_t addr, void *buf, size_t len);
int qpt_live_write(qpt_space_t *s, uint64_t addr, const void *buf, size_t len);
int qpt_live_commit(qpt_space_t *s);
int qpt_live_point_ok(qpt_space_t *s, qpt_ins_t *ins, const char **why);
int qpt_live_stacks(qpt_space_t *s, qpt_stack_fn fn, void *arg);
int qpt_live_thread_block(qpt_space_t *s, uint64_t var, size_t bytes, uint64_t tp,
                          uint64_t *addr);
int qpt_live_free(qpt_space_t *s, uint64_t addr);
int qpt_live_set_active(qpt_space_t *s, int on);
int qpt_live_keep_on_exit(qpt_space_t *s, int keep);

#endif
