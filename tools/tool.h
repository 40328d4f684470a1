/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_TOOL_H
#define QP_TOOL_H
/*
 * PURPOSE: what the command-line tools share on the library's inner layers (the helpers
 * that need none are in tool_cli.h, included here).
 * tools/ only parses options and prints; every analysis lives in the library folders.
 */
#include <stdio.h>

#include "cfg/cfg.h"
#include "report/qp_profile.h"
#include "tools/tool_cli.h"

/*
 * QP_DEBUG set in the environment (tool_env.c): hook O's callbacks so that
 * cfg_prog_build's phases are printed on stderr with their times
 * (`qp-debug: 0.123 s discovered (42 procedures)`), for development. Else O is left as
 * it is.
 */
void tool_cfg_debug(cfg_opts_t *o);

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


#endif
