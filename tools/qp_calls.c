/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * PURPOSE: the call graph views of qp report (report/qp_callgraph.c computes them):
 * --callers, --callees, --call-graph, and the callgrind export (--callgrind), which
 * callgrind_annotate and KCachegrind read.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report/qp_callgraph.h"
#include "report/qp_flow.h"
#include "tools/qp_tool.h"

/* The name of ARC's callee as printed. */
static const char *
callee_name(const qp_inputs_t *in, const qp_cg_arc_t *a, char **owned)
{
    *owned = NULL;
    if (a->callee != QP_VIRT)
        return qp_proc_name(in, a->callee);
    if (a->target == 0)
        return "(indirect calls: targets not told apart)";
    if (in->names != NULL && (*owned = cfg_demangle(a->name)) != NULL)
        return *owned;
    return a->name[0] ? a->name : "?";
}

/* "≈" and "+" markers of an inclusive count. */
static const char *
incl_marks(uint8_t flags)
{
    return (flags & QP_CG_APPROX) && (flags & QP_CG_LOWER) ? " ~+"
        : (flags & QP_CG_APPROX)                           ? " ~"
        : (flags & QP_CG_LOWER)                            ? " +"
                                                           : "";
}

/* The share of CALLEE's inclusive count that COUNT of its calls stand for. */
static double
share_of(const qp_callgraph_t *cg, uint32_t callee, uint64_t count)
{
    if (callee == QP_VIRT || !cg->measured[callee] || cg->ext[callee] <= 0)
        return 0;
    double s = (double)count / cg->ext[callee];
    return (s > 1 ? 1 : s) * cg->incl[callee];
}

static const char *const legend =
    "inclusive: instructions in the procedure and in what it called (measured code only);\n"
    "  ~ apportioned among callers by their calls (as gprof does), + a lower bound (calls\n"
    "  through pointers or into code that was not measured add nothing)\n";

/* The target FUNC names: a described procedure, or a callee known by name only. */
static int
find_target(const qp_inputs_t *in, const qp_callgraph_t *cg, const char *func,
            uint64_t *target, uint32_t *proc, const char **shown)
{
    *shown = func;
    *proc = qp_desc_find_proc(in->desc, func);
    if (*proc == QP_VIRT)
        *proc = qp_find_in_module(in, func);
    if (*proc != QP_VIRT) {
        *target = in->desc->procs[*proc].entry;
        return 0;
    }
    /* A callee known by name only; a library function also by its PLT stub's name. */
    size_t len = strlen(func);
    for (int plt = 0; plt < 2; plt++)
        for (size_t a = 0; a < cg->narcs; a++) {
            const char *n = cg->arcs[a].name;
            if (cg->arcs[a].target != 0
                && (plt ? strncmp(n, func, len) == 0 && strcmp(n + len, "@plt") == 0
                        : qp_name_matches(n, func))) {
                *target = cg->arcs[a].target;
                *shown = n;
                return 0;
            }
        }
    fprintf(stderr, "qp: %s: no procedure named '%s'\n", in->exe, func);
    return 1;
}

static int
cmp_count(const void *a, const void *b, void *arg)
{
    const qp_callgraph_t *cg = arg;
    const qp_cg_arc_t *x = &cg->arcs[*(const uint32_t *)a], *y = &cg->arcs[*(const uint32_t *)b];
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return (*(const uint32_t *)a > *(const uint32_t *)b) - (*(const uint32_t *)a < *(const uint32_t *)b);
}

/* Arcs ROWS[0..N) most calls first (then in graph order). */
static void
sort_by_count(const qp_callgraph_t *cg, uint32_t *rows, size_t n)
{
    qsort_r(rows, n, sizeof(uint32_t), cmp_count, (void *)cg);
}

int
qp_print_callers(FILE *f, const qp_inputs_t *in, const qp_callgraph_t *cg, const char *func)
{
    uint64_t target;
    uint32_t proc;
    const char *shown;
    if (find_target(in, cg, func, &target, &proc, &shown) != 0)
        return 1;
    char cbuf[24];
    const char *name = proc != QP_VIRT ? qp_proc_name(in, proc) : shown;
    int measured = proc != QP_VIRT && cg->measured[proc];
    uint64_t direct = 0;
    int known = 1;
    for (size_t a = 0; a < cg->narcs; a++)
        if (cg->arcs[a].target == target) {
            direct += cg->arcs[a].count;
            known &= cg->arcs[a].known;
        }
    if (measured)
        fprintf(f, "Callers of %s: %" PRIu64 " calls\n", name, cg->calls[proc]);
    else
        fprintf(f, "Callers of %s (%s: its calls are those of the sites below)\n", name,
                proc != QP_VIRT ? "not measured" : "outside the measured code");
    fprintf(f, "%16s %7s %6s  %s\n", "calls", "%", "sites", "caller");
    uint64_t total = measured ? cg->calls[proc] : direct;
    size_t idle = 0, n = 0;
    uint32_t *rows = malloc((cg->narcs + 1) * sizeof(uint32_t));
    if (rows == NULL)
        return 1;
    for (size_t a = 0; a < cg->narcs; a++)
        if (cg->arcs[a].target == target)
            rows[n++] = (uint32_t)a;
    sort_by_count(cg, rows, n);
    for (size_t i = 0; i < n; i++) {
        const qp_cg_arc_t *arc = &cg->arcs[rows[i]];
        if (arc->count == 0 && arc->known && !in->verbose) {
            idle++;
            continue;
        }
        double pct = total ? 100.0 * (double)arc->count / (double)total : 0;
        fprintf(f, "%16s %7.2f %6u  %s%s%s\n", qp_fmt_count(cbuf, arc->count, arc->known), pct,
                arc->nsites, qp_proc_name(in, arc->caller), arc->tail ? " (tail calls)" : "",
                arc->through_pointer ? " (through a pointer)" : "");
    }
    if (measured && cg->calls[proc] > direct) {
        uint64_t rest = cg->calls[proc] - direct;
        fprintf(f, "%16" PRIu64 " %7.2f %6s  (through pointers, or from code not measured)\n",
                rest, 100.0 * (double)rest / (double)total, "");
    }
    free(rows);
    if (idle > 0)
        fprintf(f, "%16s %7s %6s  (%zu more caller%s with call sites that did not run: -v)\n",
                "0", "", "", idle, idle == 1 ? "" : "s");
    if (!known)
        fprintf(f, "(a call count marked ? is not determined by the counters)\n");
    return 0;
}

int
qp_print_callees(FILE *f, const qp_inputs_t *in, const qp_callgraph_t *cg, uint32_t proc)
{
    char cbuf[24];
    fprintf(f, "Callees of %s: %" PRIu64 " calls, %" PRIu64 " instructions in it, %.0f%s "
            "inclusive\n", qp_proc_name(in, proc), cg->calls[proc], cg->self[proc],
            cg->incl[proc], incl_marks(cg->flags[proc]));
    fprintf(f, "%16s %6s %20s  %s\n", "calls", "sites", "inclusive", "callee");
    size_t idle = 0, n = 0;
    uint32_t *rows = malloc((cg->arc_first[proc + 1] - cg->arc_first[proc] + 1) * sizeof(uint32_t));
    if (rows == NULL)
        return 1;
    for (uint32_t a = cg->arc_first[proc]; a < cg->arc_first[proc + 1]; a++)
        rows[n++] = a;
    sort_by_count(cg, rows, n);
    for (size_t i = 0; i < n; i++) {
        const qp_cg_arc_t *arc = &cg->arcs[rows[i]];
        if (arc->count == 0 && arc->known && !in->verbose) {
            idle++;
            continue;
        }
        char *owned;
        const char *name = callee_name(in, arc, &owned);
        char ibuf[40] = "-";
        if (arc->callee == QP_VIRT && qp_report_plt_at(in->rep, arc->target) != NULL)
            snprintf(ibuf, sizeof(ibuf), "%" PRIu64 "%s", arc->plt_insns,
                     incl_marks(arc->plt_lower ? QP_CG_LOWER : 0));
        else if (arc->callee != QP_VIRT && cg->measured[arc->callee]) {
            if (cg->cycle[arc->callee] != 0 && cg->cycle[arc->callee] == cg->cycle[proc])
                snprintf(ibuf, sizeof(ibuf), "(cycle %u)", cg->cycle[proc]);
            else
                snprintf(ibuf, sizeof(ibuf), "%.0f%s", share_of(cg, arc->callee, arc->count),
                         incl_marks(cg->flags[arc->callee]
                                    | ((double)arc->count < cg->ext[arc->callee] ? QP_CG_APPROX
                                                                                : 0)));
        }
        fprintf(f, "%16s %6u %20s  %s%s%s%s\n", qp_fmt_count(cbuf, arc->count, arc->known),
                arc->nsites, ibuf, name, arc->tail ? " (tail calls)" : "",
                arc->through_pointer ? " (through a pointer)" : "",
                arc->callee == QP_VIRT && arc->target != 0 ? " (outside the program)"
                : arc->callee != QP_VIRT && !cg->measured[arc->callee] ? " (not measured)"
                                                                        : "");
        free(owned);
    }
    free(rows);
    if (idle > 0)
        fprintf(f, "%16s %6s %20s  (%zu more callee%s whose call sites did not run: -v)\n", "0",
                "", "", idle, idle == 1 ? "" : "s");
    fputs(legend, f);
    return 0;
}

static int
cmp_incl(const void *a, const void *b, void *arg)
{
    const qp_callgraph_t *cg = arg;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (cg->incl[x] != cg->incl[y])
        return cg->incl[x] > cg->incl[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Procedures that ran, by inclusive count (qsort_r: the order needs the graph). */
static uint32_t *
by_inclusive(const qp_callgraph_t *cg, uint32_t *n)
{
    uint32_t np = cg->desc->hdr.nprocs, k = 0;
    uint32_t *v = malloc((np + 1) * sizeof(uint32_t));
    if (v == NULL)
        return NULL;
    for (uint32_t i = 0; i < np; i++)
        if (cg->measured[i] && (cg->calls[i] > 0 || cg->self[i] > 0))
            v[k++] = i;
    qsort_r(v, k, sizeof(uint32_t), cmp_incl, (void *)cg);
    *n = k;
    return v;
}

int
qp_print_callgraph(FILE *f, const qp_inputs_t *in, const qp_callgraph_t *cg)
{
    uint32_t n;
    uint32_t *v = by_inclusive(cg, &n);
    if (v == NULL)
        return 1;
    double total = (double)qp_report_insns(in->rep);
    fprintf(f, "Call graph of %s\n", in->exe);
    fputs(legend, f);
    fprintf(f, "\n %% incl            inclusive                 self            calls  name\n");
    uint32_t shown = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t p = v[i];
        double pct = total > 0 ? 100.0 * cg->incl[p] / total : 0;
        if ((in->limit > 0 && shown >= in->limit) || pct < in->min_pct)
            break;
        shown++;
        char cyc[32] = "";
        if (cg->cycle[p])
            snprintf(cyc, sizeof(cyc), " <cycle %u>", cg->cycle[p]);
        fprintf(f, "%7.2f %20.0f%-3s %16" PRIu64 " %16" PRIu64 "  %s%s\n", pct, cg->incl[p],
                incl_marks(cg->flags[p]), cg->self[p], cg->calls[p], qp_proc_name(in, p), cyc);
        /* Its callees that ran, most calls first. */
        uint32_t na = cg->arc_first[p + 1] - cg->arc_first[p];
        uint32_t *rows = malloc((na + 1) * sizeof(uint32_t));
        if (rows == NULL) {
            free(v);
            return 1;
        }
        for (uint32_t a = 0; a < na; a++)
            rows[a] = cg->arc_first[p] + a;
        sort_by_count(cg, rows, na);
        for (uint32_t k = 0; k < na; k++) {
            const qp_cg_arc_t *arc = &cg->arcs[rows[k]];
            if (arc->count == 0)
                continue;
            char *owned;
            const char *name = callee_name(in, arc, &owned);
            fprintf(f, "%7s %20s    %16s %16" PRIu64 "    -> %s\n", "", "", "", arc->count, name);
            free(owned);
        }
        free(rows);
    }
    if (shown < n)
        fprintf(f, "(%u more procedure%s: --limit, --min)\n", n - shown, n - shown == 1 ? "" : "s");
    free(v);
    return 0;
}

/*****************************************************************************
 * callgrind format (valgrind's docs/cl-format): positions are instruction addresses,
 * the event is Ir (instructions executed); a call's cost line is its inclusive count.
 */

static void
cg_name(FILE *f, const char *key, const char *name)
{
    fprintf(f, "%s=", key);
    for (const char *s = name; *s; s++)
        fputc(*s == '\n' ? ' ' : *s, f);
    fputc('\n', f);
}

/* The line of ADDR when it is in FILE (callgrind's fl=), else 0. */
static unsigned
line_in(const qp_inputs_t *in, uint64_t addr, const char *file)
{
    const char *f;
    unsigned line;
    return file != NULL && cfg_image_line(in->img, addr, &f, &line) == 0 && f == file ? line : 0;
}

int
qp_print_callgrind(FILE *f, const qp_inputs_t *in, const qp_callgraph_t *cg)
{
    const qp_desc_t *d = in->desc;
    fprintf(f, "# callgrind format\nversion: 1\ncreator: qp (%s) %s\n", PACKAGE_NAME,
            PACKAGE_VERSION);
    fprintf(f, "cmd: %s\npositions: instr line\nevents: Ir\nsummary: %" PRIu64 "\n\n", in->exe,
            qp_report_insns(in->rep));
    cg_name(f, "ob", in->exe);
    for (uint32_t p = 0; p < d->hdr.nprocs; p++) {
        if (!cg->measured[p] || (cg->calls[p] == 0 && cg->self[p] == 0))
            continue;
        qp_flow_t fl;
        if (qp_report_flow(in->rep, p, &fl) < 0)
            return 1;
        const qp_desc_proc_t *pr = &d->procs[p];
        /* The source file of its entry (lines elsewhere, inlined code, are left 0). */
        const char *file = NULL;
        unsigned line;
        if (cfg_image_line(in->img, pr->entry, &file, &line) != 0)
            file = NULL;
        cg_name(f, "fl", file != NULL ? file : "???");
        /* Demangled unless --mangled, as callgrind writes them: callgrind_annotate
         * prints names as it reads them. */
        cg_name(f, "fn", qp_proc_name(in, p));
        for (uint32_t b = 0; b < pr->nblocks; b++) {
            const qp_desc_block_t *blk = &d->blocks[pr->block + b];
            uint64_t cost = fl.block_count[b] * blk->ninsns;
            if (cost > 0)
                fprintf(f, "0x%" PRIx64 " %u %" PRIu64 "\n", blk->start,
                        line_in(in, blk->start, file), cost);
        }
        qp_flow_free(&fl);
        for (uint32_t a = cg->arc_first[p]; a < cg->arc_first[p + 1]; a++) {
            const qp_cg_arc_t *arc = &cg->arcs[a];
            if (arc->count == 0 || arc->target == 0)
                continue;
            const char *callee = arc->callee != QP_VIRT ? qp_proc_name(in, arc->callee) : arc->name;
            const qp_proc_result_t *stub
                = arc->callee == QP_VIRT ? qp_report_plt_at(in->rep, arc->target) : NULL;
            if (stub != NULL) {
                /* The stub's own entry below (fn=, in no source file). */
                cg_name(f, "cfi", "???");
                callee = qp_row_name(in, stub);
            }
            cg_name(f, "cfn", callee[0] ? callee : "?");
            fprintf(f, "calls=%" PRIu64 " 0x%" PRIx64 "\n", arc->count, arc->target);
            /* A call inside a cycle (recursion) costs nothing more: the cycle's count is
             * already the caller's, and callgrind_annotate adds call costs to it. */
            int within = arc->callee != QP_VIRT && cg->cycle[p] != 0
                && cg->cycle[arc->callee] == cg->cycle[p];
            double cost = arc->callee == QP_VIRT ? (double)arc->plt_insns
                                                  : share_of(cg, arc->callee, arc->count);
            fprintf(f, "0x%" PRIx64 " %u %.0f\n", arc->site, line_in(in, arc->site, file),
                    within ? 0.0 : cost);
        }
    }
    /* PLT stubs, counted from their callers: their own instructions, at their entry. */
    for (uint32_t i = 0; i < in->rep->nplt; i++) {
        const qp_proc_result_t *s = &in->rep->plt[i];
        if (s->insns == 0)
            continue;
        cg_name(f, "fl", "???");
        cg_name(f, "fn", qp_row_name(in, s));
        fprintf(f, "0x%" PRIx64 " 0 %" PRIu64 "\n", s->entry, s->insns);
    }
    fprintf(f, "\ntotals: %" PRIu64 "\n", qp_report_insns(in->rep));
    return 0;
}

/*****************************************************************************
 * BOLT's profile (.fdata, the format llvm-bolt -instrument writes): one line per edge and
 * per call, "1 FROM_FN FROM_OFF 1 TO_FN TO_OFF 0 COUNT", offsets in hex from the
 * function's entry. An edge goes from its block's last instruction to the target block
 * (fall-throughs too); a call from the call instruction to the callee at offset 0.
 */

/* The last instruction of block B, from the original program when given (--original),
 * else from the rewritten one; *MISSED counts the blocks neither gives. */
static uint64_t
last_insn_of(const qp_inputs_t *in, const qp_desc_block_t *b, size_t *missed)
{
    uint64_t a = in->original != NULL
        ? cfg_image_last_insn(in->original, b->start, b->size, b->ninsns) : 0;
    if (a == 0)
        a = cfg_image_last_insn(in->img, b->start, b->size, b->ninsns);
    *missed += a == 0;
    return a;
}

/*
 * The name BOLT gives the function at ENTRY called NAME: a local symbol gets "/N" (the
 * Nth local of that name, by address here: BOLT counts in symbol-table order, the same
 * for the usual unique names), a PLT stub "@PLT".
 */
static void
bolt_name(const qp_inputs_t *in, const char *name, uint32_t proc, char *out, size_t cap)
{
    /* The rewritten program's symbols name the relocated code. */
    uint64_t entry = proc != QP_VIRT ? in->desc->procs[proc].new_entry : 0;
    size_t n = strlen(name);
    if (n > 4 && strcmp(name + n - 4, "@plt") == 0) {
        snprintf(out, cap, "%.*s@PLT", (int)(n - 4), name);
        return;
    }
    const cfg_symbol_t *s = entry != 0 ? cfg_image_symbol_at(in->img, entry) : NULL;
    if (s == NULL || s->global || strcmp(s->name, name) != 0) {
        snprintf(out, cap, "%s", name);
        return;
    }
    unsigned nth = 1;
    for (size_t i = 0; i < in->img->nsymbols && in->img->symbols[i].addr < entry; i++)
        if (!in->img->symbols[i].global && strcmp(in->img->symbols[i].name, name) == 0)
            nth++;
    snprintf(out, cap, "%s/%u", name, nth);
}

int
qp_print_bolt(FILE *f, const qp_inputs_t *in, const qp_callgraph_t *cg)
{
    const qp_desc_t *d = in->desc;
    size_t missed = 0;
    for (uint32_t p = 0; p < d->hdr.nprocs; p++) {
        const qp_desc_proc_t *pr = &d->procs[p];
        if (!cg->measured[p] || cg->calls[p] == 0)
            continue;
        qp_flow_t fl;
        if (qp_report_flow(in->rep, p, &fl) < 0)
            return 1;
        char name[1024], callee[1024];
        bolt_name(in, qp_desc_str(d, pr->name), p, name, sizeof(name));
        uint8_t *keep = malloc(pr->nedges + 1);
        if (keep == NULL || qp_report_branch_edges(d, p, keep) < 0) {
            free(keep);
            qp_flow_free(&fl);
            return 1;
        }
        for (uint32_t k = 0; k < pr->nedges; k++) {
            const qp_desc_edge_t *e = &d->edges[pr->edge + k];
            if (!keep[k] || fl.edge_count[k] == 0 || fl.edge_state[k] == QP_FLOW_UNKNOWN)
                continue;
            uint64_t from = last_insn_of(in, &d->blocks[e->from], &missed);
            if (from == 0)
                continue;
            fprintf(f, "1 %s %" PRIx64 " 1 %s %" PRIx64 " 0 %" PRIu64 "\n", name, from - pr->entry,
                    name, d->blocks[e->to].start - pr->entry, fl.edge_count[k]);
        }
        free(keep);
        /* Calls and tail calls, per site (a tail call's edge leaves the procedure). */
        for (size_t c = qp_desc_first_call(d, p); c < d->hdr.ncalls && d->calls[c].block - pr->block < pr->nblocks; c++) {
            const qp_desc_call_t *site = &d->calls[c];
            if (site->target == 0 || qp_desc_str(d, site->name)[0] == '\0')
                continue;
            uint32_t cp = QP_VIRT;
            for (uint32_t a = cg->arc_first[p]; a < cg->arc_first[p + 1] && cp == QP_VIRT; a++)
                if (cg->arcs[a].target == site->target)
                    cp = cg->arcs[a].callee;
            bolt_name(in, qp_desc_str(d, site->name), cp, callee, sizeof(callee));
            uint64_t n = qp_call_is_tail(site) ? fl.edge_count[site->edge - pr->edge]
                                               : fl.block_count[site->block - pr->block];
            uint64_t from = last_insn_of(in, &d->blocks[site->block], &missed);
            if (from != 0 && n > 0)
                fprintf(f, "1 %s %" PRIx64 " 1 %s 0 0 %" PRIu64 "\n", name, from - pr->entry,
                        callee, n);
        }
        qp_flow_free(&fl);
    }
    if (missed > 0)
        fprintf(stderr, "qp: %s: %zu branch or call sites left out: the rewriter jumped over "
                "their first bytes; give the original program with --original=FILE\n",
                in->exe, missed);
    return 0;
}
