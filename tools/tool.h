/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_TOOL_H
#define QP_TOOL_H
/*
 * PURPOSE: what the command-line tools share: printing of CFG dumps, heap settings. tools/ only parses
 * options and prints; every analysis lives in the library folders.
 */
#include <stdio.h>

#include "cfg/cfg.h"

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

#endif
