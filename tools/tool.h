/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_TOOL_H
#define QP_TOOL_H
/*
 * PURPOSE: what the command-line tools share: printing of CFG dumps, heap settings, the
 * environment variables they read for the library (which never reads the environment).
 * tools/ only parses options and prints; every analysis lives in the library folders.
 */
#include <stdio.h>

#include "cfg/cfg.h"
#include "report/qp_profile.h"

/* The summary of --dump-cfg (includes the `coverage: NN.NN% of text bytes` line). */
void tool_dump_summary(FILE *f, const cfg_prog_t *prog, int verbose);

/* Every procedure with its blocks and edges (--dump-cfg=text). */
void tool_dump_text(FILE *f, const cfg_prog_t *prog);

/* The bytes of code sections no block covers and that are not padding. */
void tool_dump_unreached(FILE *f, const cfg_prog_t *prog);

/* Graphviz DOT of one procedure (--dump-cfg=dot --proc NAME). */
void tool_dump_dot(FILE *f, const cfg_prog_t *prog, const cfg_proc_t *p);

/*
 * Keep freed memory in the heap and back it by transparent huge pages: analysing a large
 * program allocates and frees a lot, and page faults were a third of the time. Call
 * first thing in main; only speed changes.
 */
void tool_heap_setup(void);

/*
 * QP_DEBUG set in the environment (tool_env.c): hook O's callbacks so that
 * cfg_prog_build's phases are printed on stderr with their times
 * (`qp-debug: 0.123 s discovered (42 procedures)`), for development. Else O is left as
 * it is.
 */
void tool_cfg_debug(cfg_opts_t *o);

/* A list of names in one buffer. */
typedef struct tool_names {
    const char **v; /* the names (pointers into buf) */
    size_t n;       /* how many */
    char *buf;      /* holds them */
} tool_names_t;

/*
 * QPT_LEAVE=name,name,... or QPT_LEAVE=@FILE (one name a line) into *OUT, for
 * ed_opts_t.leave (a testing aid: those procedures stay in place). No names when it is
 * not set, or when FILE cannot be read. Returns 0, or -1 when out of memory. Free with
 * tool_names_free.
 */
int tool_leave_names(tool_names_t *out /*OUT*/);
void tool_names_free(tool_names_t *names);

/*
 * Can the output PATH be written, checked before a long piece of work so that it fails at
 * once? An existing file that is writable, or a new one in a folder that is; with
 * VIA_RENAME (written to a temporary file beside it, then renamed) the folder must be
 * writable in any case, and PATH must not be a folder. 1, or 0 with errno set.
 */
int tool_writable(const char *path, int via_rename);

/*
 * Files (tool_file.c), through report/'s checked access. tool_fopen_read: PATH for
 * reading, a regular file only (a FIFO is refused, never waited on); NULL with WHY.
 * tool_out_open: -o PATH (NULL: standard output) written to a temporary file beside it;
 * tool_out_close renames it over PATH when OK and every write succeeded, else removes
 * it, PATH left as it was. Both print "PROG: PATH: why" and return -1 on failure.
 */
FILE *tool_fopen_read(const char *path, char *why, size_t whylen);

typedef struct tool_out {
    FILE *f;          /* where to print */
    const char *name; /* PATH, or "standard output" */
    qp_out_t o;
} tool_out_t;

int tool_out_open(tool_out_t *t /*OUT*/, const char *prog, const char *path);
int tool_out_close(tool_out_t *t, const char *prog, int ok);

/*
 * The one-line message of a bad command line, after getopt_long (called with opterr 0
 * and an option string starting with ':') returned C ('?': an unknown option; ':': a
 * missing argument): "PROG: unknown option '--bogus' (try --help)". Returns 2, the
 * tools' usage-error status.
 */
int tool_option_error(const char *prog, char *const *argv, int c);

#endif
