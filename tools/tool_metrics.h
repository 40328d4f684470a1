/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_TOOL_METRICS_H
#define QP_TOOL_METRICS_H
/*
 * PURPOSE: what qpt-rewrite, qp and dyn share about metrics (qpt-metrics(5)): reading
 * the -e texts and --metrics files, and printing the metric x focus table as text, CSV
 * or JSON.
 */
#include <stdio.h>

#include "include/qpt/qpt_metrics.h"

enum { TM_TEXT, TM_CSV, TM_JSON };

/*
 * Parse the metrics of the -e TEXTS and --metrics FILES (in the order given: ORDER[i] is
 * 'e' or 'f' for ARGS[i]) into *SET. On an error the message (with the caret) is
 * printed, prefixed by PROG, and -1 is returned.
 */
int tool_metrics_parse(const char *prog, const char *const *args, const char *order, size_t n,
                       qm_set_t **set);

/* The table ROWS of SET into F, as KIND (TM_*). Returns 0, or -1 when writing failed. */
int tool_metrics_print(FILE *f, const qm_set_t *set, const qm_row_t *rows, size_t n, int kind);

/* What the metrics cost (COSTS[N]: overheads in percent), as text into F;
 * OVERALL: the figure since each went in, else the last interval's. Nothing when N is 0. */
int tool_metrics_print_costs(FILE *f, const qm_set_t *set, const qm_cost_t *costs, size_t n,
                             int overall);

/* S as a CSV field: quoted, with its quotes doubled, when it holds a comma, a quote or a
 * newline. */
void tool_csv_field(FILE *f, const char *s);

/* S as a JSON string (quotes, backslashes and control characters escaped). */
void tool_json_string(FILE *f, const char *s);

/* Notes of qm_insert on stderr, prefixed by the tool's name (ARG). */
void tool_metrics_note(void *arg, const char *note);

#endif
