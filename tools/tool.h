/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_TOOL_H
#define QP_TOOL_H
/*
 * PURPOSE: what the command-line tools share on the public headers (the helpers that
 * need none are in tool_cli.h, included here).
 * tools/ only parses options and prints; every analysis lives in the library folders.
 */
#include <stdio.h>

#include "include/qpt/qpt.h"
#include "include/qpt/qpt_report.h"
#include "tools/tool_cli.h"

/*
 * Files (tool_file.c), through libqpt's checked access (qpt_report.h). tool_fopen_read: PATH for
 * reading, a regular file only (a FIFO is refused, never waited on); NULL with WHY.
 * tool_out_open: -o PATH (NULL: standard output) written to a temporary file beside it;
 * tool_out_close renames it over PATH when OK and every write succeeded, else removes
 * it, PATH left as it was. Both print "PROG: PATH: why" and return -1 on failure.
 */
FILE *tool_fopen_read(const char *path, char *why, size_t whylen);

typedef struct tool_out {
    FILE *f;          /* where to print */
    const char *name; /* PATH, or "standard output" */
    qpt_out_t *o;     /* the output being written, NULL on standard output */
} tool_out_t;

int tool_out_open(tool_out_t *t /*OUT*/, const char *prog, const char *path);
int tool_out_close(tool_out_t *t, const char *prog, int ok);


#endif
