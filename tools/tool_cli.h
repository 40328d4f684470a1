/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_TOOL_CLI_H
#define QP_TOOL_CLI_H
/*
 * PURPOSE: the command-line helpers of the tools that need no library internals: heap
 * settings, option errors, output checks, the environment variables read for the library
 * (which never reads the environment). System headers only (tests/check-includes.sh), so
 * that a tool on the public API (qpt-rewrite.c) includes this and include/qpt/ only.
 */
#include <stddef.h>

/*
 * Keep freed memory in the heap and back it by transparent huge pages: analysing a large
 * program allocates and frees a lot, and page faults were a third of the time. Call
 * first thing in main; only speed changes.
 */
void tool_heap_setup(void);
/* Give the whole free pages of the heap back to the system (the end of a phase that
 * freed much). Only memory changes. */
void tool_heap_release(void);

/*
 * The one-line message of a bad command line, after getopt_long (called with opterr 0
 * and an option string starting with ':') returned C ('?': an unknown option; ':': a
 * missing argument): "PROG: unknown option '--bogus' (try --help)". Returns 2, the
 * tools' usage-error status.
 */
int tool_option_error(const char *prog, char *const *argv, int c);

/*
 * Can the output PATH be written, checked before a long piece of work so that it fails at
 * once? An existing file that is writable, or a new one in a folder that is; with
 * VIA_RENAME (written to a temporary file beside it, then renamed) the folder must be
 * writable in any case, and PATH must not be a folder. 1, or 0 with errno set.
 */
int tool_writable(const char *path, int via_rename);

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
 * QP_DEBUG (development aid): tool_debug_on says whether it is set; tool_debug_phase and
 * tool_debug_note print the analysis' phases with their times and its notes on stderr
 * (`qp-debug: 0.123 s discovered (42 procedures)`). tool_phase_end is the phase hook
 * without QP_DEBUG: the heap's free pages go back (tool_heap_release); tool_debug_phase
 * does that too, before it prints.
 */
int tool_debug_on(void);
/*
 * QPT_TEST_STOP_AT=PHASE (a test hook, harmless otherwise): the process stops itself
 * (SIGSTOP) at the end of that phase (a QP_DEBUG phase name, or "temporary output" once
 * qpt-rewrite's temporary output exists), so that a test can change the input at a
 * known point and continue it (SIGCONT). tool_phase_end calls it.
 */
void tool_test_stop(const char *phase);
void tool_phase_end(void *arg, const char *phase, size_t nprocs);
void tool_debug_phase(void *arg, const char *phase, size_t nprocs);
void tool_debug_note(void *arg, const char *line);

/*
 * qpt-rewrite -e/--metrics (tools/rewrite_metrics.c): the metrics of the -e TEXTS and
 * --metrics FILES (ARGS, ORDER[i] 'e' or 'f', N of them) measured in a rewrite of INPUT
 * into OUTPUT, with their layout; with PROFILE, each one's predicted cost.
 * PROGRESS (may be NULL) shows the phases. Messages on stderr after PROG; an exit status.
 */
int tool_rewrite_metrics(const char *prog, const char *const *args, const char *order,
                         size_t n, const char *input, const char *output, const char *profile,
                         void (*progress)(const char *phase));

#endif
