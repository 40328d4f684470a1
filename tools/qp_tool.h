/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_TOOL_H_
#define QP_TOOL_H_
/*
 * PURPOSE: the printers of the qp report tool (tools/qp.c parses options and loads the
 * inputs): flat profile, CSV, per-block and per-edge counts, Graphviz DOT, annotated
 * disassembly, lcov. Each prints what libqpt's report gives (include/qpt/qpt_qp.h, by
 * index); no analysis here.
 */
#include <stdio.h>

#include "include/qpt/qpt.h"
#include "include/qpt/qpt_qp.h"

/* What the printers need to know about the inputs. */
typedef struct qp_inputs {
    const qpt_qp_t *qp;           /* the module: its report, by index */
    const char *exe;              /* the instrumented executable */
    const char *const *profiles;  /* the profile files given */
    int nprofiles;
    int verbose;                  /* --verbose */
    uint32_t limit;               /* --limit: rows of each table at most (0: all) */
    double min_pct;               /* --min: rows of at least this % of the instructions */
    int demangle;                 /* names known only as a callee's or a symbol's are
                                   * demangled (the procedures were named: qpt_qp_name) */
} qp_inputs_t;

/* Several modules of a process: a program and the libraries it loaded, each with its
 * own inputs, and one report over them (qpt_qp_process). */
typedef struct qp_modules {
    const qp_inputs_t *mods;      /* per module, in the report's order (programs first) */
    const char *const *labels;    /* per module: its name in the module column */
    uint32_t nmods;               /* how many */
    const qpt_qp_process_t *proc; /* the process report over mods[k].qp */
} qp_modules_t;

/* The flat profile, the call counts, the footnotes and notes (qp report). */
void qp_print_flat(FILE *f, const qp_inputs_t *in);

/* ... of several modules: a table of the modules, then the procedures of them all with
 * a module column. */
void qp_print_flat_modules(FILE *f, const qp_modules_t *m);

/* name,calls,instructions lines in the flat-profile order (qp report --csv). */
void qp_print_csv(FILE *f, const qp_inputs_t *in);

/* module,name,calls,instructions lines over several modules, likewise. */
void qp_print_csv_modules(FILE *f, const qp_modules_t *m);

/* Per-block counts of PROC, or of every procedure that ran when PROC is QP_VIRT. */
int qp_print_blocks(FILE *f, const qp_inputs_t *in, uint32_t proc);

/* Per-edge counts and Kirchhoff violations, likewise. */
int qp_print_edges(FILE *f, const qp_inputs_t *in, uint32_t proc);

/* Graphviz DOT of PROC's CFG with counts. */
int qp_print_dot(FILE *f, const qp_inputs_t *in, uint32_t proc);

/* A disassembly of PROC's blocks at their original addresses with their counts. */
int qp_print_annotate(FILE *f, const qp_inputs_t *in, uint32_t proc);

/* An lcov tracefile from the DWARF line information of the executable. */
int qp_print_lcov(FILE *f, const qp_inputs_t *in);

/* The call graph views (qp_calls.c): callers of the procedure FUNC names (also one known
 * only as a callee: a PLT stub), callees of PROC, every procedure by inclusive count,
 * and the callgrind format. 0, or 1 after a message. */
int qp_print_callers(FILE *f, const qp_inputs_t *in, const qpt_qp_calls_t *cg, const char *func);
int qp_print_callees(FILE *f, const qp_inputs_t *in, const qpt_qp_calls_t *cg, uint32_t proc);
int qp_print_callgraph(FILE *f, const qp_inputs_t *in, const qpt_qp_calls_t *cg);
int qp_print_callgrind(FILE *f, const qp_inputs_t *in, const qpt_qp_calls_t *cg);
int qp_print_bolt(FILE *f, const qp_inputs_t *in, const qpt_qp_calls_t *cg);

/* The profile as pprof's gzip'd profile.proto (qp_pprof.c). 0, or 1 after a message. */
int qp_print_pprof(FILE *f, const qp_inputs_t *in);

/* qp metrics (qp_metrics.c): ARGV[1] is "metrics". Returns the exit status. */
int qp_metrics_main(int argc, char **argv);

/* qp trace (qp_trace.c): block traces of --driver=trace and trace-naive programs. */
int qp_trace_main(int argc, char **argv);

/* The name of procedure PROC as printed. */
const char *qp_proc_name(const qp_inputs_t *in, uint32_t proc);

/* The instructions of IN's module (its rows and PLT stubs). */
uint64_t qp_total_insns(const qp_inputs_t *in);

/* "calls" or "?" when unknown, into BUF (at least 24 bytes). */
const char *qp_fmt_count(char *buf, uint64_t v, int known);

#endif
