/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * PURPOSE: the call graph views of qp report (libqpt computes the graph: qpt_qp_calls):
 * --callers, --callees, --call-graph, and the callgrind export (--callgrind), which
 * callgrind_annotate and KCachegrind read.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tools/qp_tool.h"

/* Arc A of CG (zeroed when A is out of range: not reached). */
static qpt_qp_arc_t
arc_of(const qpt_qp_calls_t *cg, uint32_t a)
{
    qpt_qp_arc_t arc;
    if (qpt_qp_cg_arc(cg, a, &arc) < 0)
        memset(&arc, 0, sizeof(arc));
    return arc;
}

/* Procedure P in CG (zeroed when out of range). */
static qpt_qp_cg_proc_t
cg_proc(const qpt_qp_calls_t *cg, uint32_t p)
{
    qpt_qp_cg_proc_t cp;
    if (qpt_qp_cg_proc(cg, p, &cp) < 0)
        memset(&cp, 0, sizeof(cp));
    return cp;
}

/* The name of ARC's callee as printed. */
static const char *
callee_name(const qp_inputs_t *in, const qpt_qp_arc_t *a, char **owned)
{
    *owned = NULL;
    if (a->callee != QPT_QP_NONE)
        return qp_proc_name(in, a->callee);
    if (a->target == 0)
        return "(indirect calls: targets not told apart)";
    if (in->demangle && (*owned = qpt_demangle(a->name)) != NULL)
        return *owned;
    return a->name[0] ? a->name : "?";
}

/* "≈" and "+" markers of an inclusive count. */
static const char *
incl_marks(uint32_t flags)
{
    return (flags & QPT_QP_INCL_APPROX) && (flags & QPT_QP_INCL_LOWER) ? " ~+"
        : (flags & QPT_QP_INCL_APPROX)                                 ? " ~"
        : (flags & QPT_QP_INCL_LOWER)                                  ? " +"
                                                                       : "";
}

/* The share of CALLEE's inclusive count that COUNT of its calls stand for. */
static double
share_of(const qpt_qp_calls_t *cg, uint32_t callee, uint64_t count)
{
    if (callee == QPT_QP_NONE)
        return 0;
    qpt_qp_cg_proc_t c = cg_proc(cg, callee);
    if (!c.measured || c.ext <= 0)
        return 0;
    double s = (double)count / c.ext;
    return (s > 1 ? 1 : s) * c.incl;
}

static const char *const legend =
    "inclusive: instructions in the procedure and in what it called (measured code only);\n"
    "  ~ apportioned among callers by their calls (as gprof does), + a lower bound (calls\n"
    "  through pointers or into code that was not measured add nothing)\n";

/* The target FUNC names: a described procedure, or a callee known by name only. */
static int
find_target(const qp_inputs_t *in, const qpt_qp_calls_t *cg, const char *func,
            uint64_t *target, uint32_t *proc, const char **shown)
{
    *shown = func;
    *proc = qpt_qp_find(in->qp, func);
    qpt_qp_proc_t p;
    if (*proc != QPT_QP_NONE && qpt_qp_proc(in->qp, *proc, &p) == 0) {
        *target = p.entry;
        return 0;
    }
    /* A callee known by name only; a library function also by its PLT stub's name. */
    size_t len = strlen(func);
    uint32_t narcs = qpt_qp_cg_narcs(cg);
    for (int plt = 0; plt < 2; plt++)
        for (uint32_t a = 0; a < narcs; a++) {
            qpt_qp_arc_t arc = arc_of(cg, a);
            const char *n = arc.name;
            if (arc.target != 0
                && (plt ? strncmp(n, func, len) == 0 && strcmp(n + len, "@plt") == 0
                        : qpt_qp_name_matches(n, func))) {
                *target = arc.target;
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
    const qpt_qp_calls_t *cg = arg;
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    qpt_qp_arc_t x = arc_of(cg, i), y = arc_of(cg, j);
    if (x.count != y.count)
        return x.count > y.count ? -1 : 1;
    return (i > j) - (i < j);
}

/* Arcs ROWS[0..N) most calls first (then in graph order). */
static void
sort_by_count(const qpt_qp_calls_t *cg, uint32_t *rows, size_t n)
{
    qsort_r(rows, n, sizeof(uint32_t), cmp_count, (void *)cg);
}

int
qp_print_callers(FILE *f, const qp_inputs_t *in, const qpt_qp_calls_t *cg, const char *func)
{
    uint64_t target;
    uint32_t proc;
    const char *shown;
    if (find_target(in, cg, func, &target, &proc, &shown) != 0)
        return 1;
    char cbuf[24];
    const char *name = proc != QPT_QP_NONE ? qp_proc_name(in, proc) : shown;
    qpt_qp_cg_proc_t cp = cg_proc(cg, proc);
    int measured = proc != QPT_QP_NONE && cp.measured;
    uint64_t direct = 0;
    int known = 1;
    uint32_t narcs = qpt_qp_cg_narcs(cg);
    for (uint32_t a = 0; a < narcs; a++) {
        qpt_qp_arc_t arc = arc_of(cg, a);
        if (arc.target == target) {
            direct += arc.count;
            known &= arc.known;
        }
    }
    if (measured)
        fprintf(f, "Callers of %s: %" PRIu64 " calls\n", name, cp.calls);
    else
        fprintf(f, "Callers of %s (%s: its calls are those of the sites below)\n", name,
                proc != QPT_QP_NONE ? "not measured" : "outside the measured code");
    fprintf(f, "%16s %7s %6s  %s\n", "calls", "%", "sites", "caller");
    uint64_t total = measured ? cp.calls : direct;
    size_t idle = 0, n = 0;
    uint32_t *rows = malloc((narcs + 1) * sizeof(uint32_t));
    if (rows == NULL)
        return 1;
    for (uint32_t a = 0; a < narcs; a++)
        if (arc_of(cg, a).target == target)
            rows[n++] = a;
    sort_by_count(cg, rows, n);
    for (size_t i = 0; i < n; i++) {
        qpt_qp_arc_t arc = arc_of(cg, rows[i]);
        if (arc.count == 0 && arc.known && !in->verbose) {
            idle++;
            continue;
        }
        double pct = total ? 100.0 * (double)arc.count / (double)total : 0;
        fprintf(f, "%16s %7.2f %6u  %s%s%s\n", qp_fmt_count(cbuf, arc.count, arc.known), pct,
                arc.nsites, qp_proc_name(in, arc.caller), arc.tail ? " (tail calls)" : "",
                arc.through_pointer ? " (through a pointer)" : "");
    }
    if (measured && cp.calls > direct) {
        uint64_t rest = cp.calls - direct;
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
qp_print_callees(FILE *f, const qp_inputs_t *in, const qpt_qp_calls_t *cg, uint32_t proc)
{
    char cbuf[24];
    qpt_qp_cg_proc_t cp = cg_proc(cg, proc);
    fprintf(f, "Callees of %s: %" PRIu64 " calls, %" PRIu64 " instructions in it, %.0f%s "
            "inclusive\n", qp_proc_name(in, proc), cp.calls, cp.self, cp.incl,
            incl_marks(cp.flags));
    fprintf(f, "%16s %6s %20s  %s\n", "calls", "sites", "inclusive", "callee");
    size_t idle = 0, n = 0;
    uint32_t *rows = malloc((cp.narcs + 1) * sizeof(uint32_t));
    if (rows == NULL)
        return 1;
    for (uint32_t a = 0; a < cp.narcs; a++)
        rows[n++] = cp.first_arc + a;
    sort_by_count(cg, rows, n);
    for (size_t i = 0; i < n; i++) {
        qpt_qp_arc_t arc = arc_of(cg, rows[i]);
        if (arc.count == 0 && arc.known && !in->verbose) {
            idle++;
            continue;
        }
        char *owned;
        const char *name = callee_name(in, &arc, &owned);
        char ibuf[40] = "-";
        qpt_qp_cg_proc_t ce = cg_proc(cg, arc.callee);
        if (arc.callee == QPT_QP_NONE && arc.stub != QPT_QP_NONE)
            snprintf(ibuf, sizeof(ibuf), "%" PRIu64 "%s", arc.plt_insns,
                     incl_marks(arc.plt_lower ? QPT_QP_INCL_LOWER : 0));
        else if (arc.callee != QPT_QP_NONE && ce.measured) {
            if (ce.cycle != 0 && ce.cycle == cp.cycle)
                snprintf(ibuf, sizeof(ibuf), "(cycle %u)", cp.cycle);
            else
                snprintf(ibuf, sizeof(ibuf), "%.0f%s", share_of(cg, arc.callee, arc.count),
                         incl_marks(ce.flags
                                    | ((double)arc.count < ce.ext ? QPT_QP_INCL_APPROX : 0)));
        }
        fprintf(f, "%16s %6u %20s  %s%s%s%s\n", qp_fmt_count(cbuf, arc.count, arc.known),
                arc.nsites, ibuf, name, arc.tail ? " (tail calls)" : "",
                arc.through_pointer ? " (through a pointer)" : "",
                arc.callee == QPT_QP_NONE && arc.target != 0 ? " (outside the program)"
                : arc.callee != QPT_QP_NONE && !ce.measured  ? " (not measured)"
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
    const qpt_qp_calls_t *cg = arg;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    double ix = cg_proc(cg, x).incl, iy = cg_proc(cg, y).incl;
    if (ix != iy)
        return ix > iy ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Procedures that ran, by inclusive count (qsort_r: the order needs the graph). */
static uint32_t *
by_inclusive(const qp_inputs_t *in, const qpt_qp_calls_t *cg, uint32_t *n)
{
    qpt_qp_info_t info;
    uint32_t np = qpt_qp_info(in->qp, &info) == 0 ? info.nprocs : 0, k = 0;
    uint32_t *v = malloc((np + 1) * sizeof(uint32_t));
    if (v == NULL)
        return NULL;
    for (uint32_t i = 0; i < np; i++) {
        qpt_qp_cg_proc_t cp = cg_proc(cg, i);
        if (cp.measured && (cp.calls > 0 || cp.self > 0))
            v[k++] = i;
    }
    qsort_r(v, k, sizeof(uint32_t), cmp_incl, (void *)cg);
    *n = k;
    return v;
}

int
qp_print_callgraph(FILE *f, const qp_inputs_t *in, const qpt_qp_calls_t *cg)
{
    uint32_t n;
    uint32_t *v = by_inclusive(in, cg, &n);
    if (v == NULL)
        return 1;
    double total = (double)qp_total_insns(in);
    fprintf(f, "Call graph of %s\n", in->exe);
    fputs(legend, f);
    fprintf(f, "\n %% incl            inclusive                 self            calls  name\n");
    uint32_t shown = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t p = v[i];
        qpt_qp_cg_proc_t cp = cg_proc(cg, p);
        double pct = total > 0 ? 100.0 * cp.incl / total : 0;
        if ((in->limit > 0 && shown >= in->limit) || pct < in->min_pct)
            break;
        shown++;
        char cyc[32] = "";
        if (cp.cycle)
            snprintf(cyc, sizeof(cyc), " <cycle %u>", cp.cycle);
        fprintf(f, "%7.2f %20.0f%-3s %16" PRIu64 " %16" PRIu64 "  %s%s\n", pct, cp.incl,
                incl_marks(cp.flags), cp.self, cp.calls, qp_proc_name(in, p), cyc);
        /* Its callees that ran, most calls first. */
        uint32_t na = cp.narcs;
        uint32_t *rows = malloc((na + 1) * sizeof(uint32_t));
        if (rows == NULL) {
            free(v);
            return 1;
        }
        for (uint32_t a = 0; a < na; a++)
            rows[a] = cp.first_arc + a;
        sort_by_count(cg, rows, na);
        for (uint32_t k = 0; k < na; k++) {
            qpt_qp_arc_t arc = arc_of(cg, rows[k]);
            if (arc.count == 0)
                continue;
            char *owned;
            const char *name = callee_name(in, &arc, &owned);
            fprintf(f, "%7s %20s    %16s %16" PRIu64 "    -> %s\n", "", "", "", arc.count, name);
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
    return file != NULL && qpt_qp_line(in->qp, addr, &f, &line) == 0 && f == file ? line : 0;
}

int
qp_print_callgrind(FILE *f, const qp_inputs_t *in, const qpt_qp_calls_t *cg)
{
    qpt_qp_info_t info;
    if (qpt_qp_info(in->qp, &info) < 0)
        return 1;
    fprintf(f, "# callgrind format\nversion: 1\ncreator: qp (%s) %s\n", PACKAGE_NAME,
            PACKAGE_VERSION);
    fprintf(f, "cmd: %s\npositions: instr line\nevents: Ir\nsummary: %" PRIu64 "\n\n", in->exe,
            info.total_insns);
    cg_name(f, "ob", in->exe);
    for (uint32_t p = 0; p < info.nprocs; p++) {
        qpt_qp_cg_proc_t cp = cg_proc(cg, p);
        if (!cp.measured || (cp.calls == 0 && cp.self == 0))
            continue;
        qpt_qp_flow_t *fl;
        qpt_qp_proc_t pr;
        if (qpt_qp_proc(in->qp, p, &pr) < 0 || qpt_qp_flow(in->qp, p, &fl) < 0)
            return 1;
        /* The source file of its entry (lines elsewhere, inlined code, are left 0). */
        const char *file = NULL;
        unsigned line;
        if (qpt_qp_line(in->qp, pr.entry, &file, &line) != 0)
            file = NULL;
        cg_name(f, "fl", file != NULL ? file : "???");
        /* Demangled unless --mangled, as callgrind writes them: callgrind_annotate
         * prints names as it reads them. */
        cg_name(f, "fn", pr.name);
        for (uint32_t b = 0; b < pr.nblocks; b++) {
            qpt_qp_block_t blk;
            uint64_t count;
            int state;
            if (qpt_qp_block(in->qp, p, b, &blk) < 0 || qpt_qp_flow_block(fl, b, &count, &state) < 0)
                continue;
            uint64_t cost = count * blk.ninsns;
            if (cost > 0)
                fprintf(f, "0x%" PRIx64 " %u %" PRIu64 "\n", blk.start,
                        line_in(in, blk.start, file), cost);
        }
        qpt_qp_flow_free(fl);
        for (uint32_t a = cp.first_arc; a < cp.first_arc + cp.narcs; a++) {
            qpt_qp_arc_t arc = arc_of(cg, a);
            if (arc.count == 0 || arc.target == 0)
                continue;
            const char *callee = arc.callee != QPT_QP_NONE ? qp_proc_name(in, arc.callee) : arc.name;
            qpt_qp_row_t stub;
            if (arc.callee == QPT_QP_NONE && arc.stub != QPT_QP_NONE
                && qpt_qp_row(in->qp, QPT_QP_STUBS, arc.stub, &stub) == 0) {
                /* The stub's own entry below (fn=, in no source file). */
                cg_name(f, "cfi", "???");
                callee = stub.name;
            }
            cg_name(f, "cfn", callee[0] ? callee : "?");
            fprintf(f, "calls=%" PRIu64 " 0x%" PRIx64 "\n", arc.count, arc.target);
            /* A call inside a cycle (recursion) costs nothing more: the cycle's count is
             * already the caller's, and callgrind_annotate adds call costs to it. */
            int within = arc.callee != QPT_QP_NONE && cp.cycle != 0
                && cg_proc(cg, arc.callee).cycle == cp.cycle;
            double cost = arc.callee == QPT_QP_NONE ? (double)arc.plt_insns
                                                   : share_of(cg, arc.callee, arc.count);
            fprintf(f, "0x%" PRIx64 " %u %.0f\n", arc.site, line_in(in, arc.site, file),
                    within ? 0.0 : cost);
        }
    }
    /* PLT stubs, counted from their callers: their own instructions, at their entry. */
    for (uint32_t i = 0; i < info.nplt; i++) {
        qpt_qp_row_t s;
        if (qpt_qp_row(in->qp, QPT_QP_STUBS, i, &s) < 0 || s.insns == 0)
            continue;
        cg_name(f, "fl", "???");
        cg_name(f, "fn", s.name);
        fprintf(f, "0x%" PRIx64 " 0 %" PRIu64 "\n", s.entry, s.insns);
    }
    fprintf(f, "\ntotals: %" PRIu64 "\n", info.total_insns);
    return 0;
}

/*****************************************************************************
 * BOLT's profile (.fdata, the format llvm-bolt -instrument writes): one line per edge and
 * per call, "1 FROM_FN FROM_OFF 1 TO_FN TO_OFF 0 COUNT", offsets in hex from the
 * function's entry. An edge goes from its block's last instruction to the target block
 * (fall-throughs too); a call from the call instruction to the callee at offset 0.
 */

/* The last instruction of block B of PROC, from the original program when given
 * (--original), else from the rewritten one; *MISSED counts the blocks neither gives. */
static uint64_t
last_insn_of(const qp_inputs_t *in, uint32_t proc, uint32_t b, size_t *missed)
{
    uint64_t a = qpt_qp_block_last_insn(in->qp, proc, b);
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
    qpt_qp_proc_t p;
    uint64_t entry = proc != QPT_QP_NONE && qpt_qp_proc(in->qp, proc, &p) == 0 ? p.new_entry : 0;
    size_t n = strlen(name);
    if (n > 4 && strcmp(name + n - 4, "@plt") == 0) {
        snprintf(out, cap, "%.*s@PLT", (int)(n - 4), name);
        return;
    }
    const char *sym;
    int global;
    if (entry == 0 || qpt_qp_symbol_at(in->qp, entry, &sym, &global) != 0 || global
        || strcmp(sym, name) != 0) {
        snprintf(out, cap, "%s", name);
        return;
    }
    snprintf(out, cap, "%s/%u", name, qpt_qp_local_rank(in->qp, entry, name));
}

int
qp_print_bolt(FILE *f, const qp_inputs_t *in, const qpt_qp_calls_t *cg)
{
    qpt_qp_info_t info;
    if (qpt_qp_info(in->qp, &info) < 0)
        return 1;
    size_t missed = 0;
    for (uint32_t p = 0; p < info.nprocs; p++) {
        qpt_qp_cg_proc_t cp = cg_proc(cg, p);
        qpt_qp_proc_t pr;
        if (!cp.measured || cp.calls == 0 || qpt_qp_proc(in->qp, p, &pr) < 0)
            continue;
        qpt_qp_flow_t *fl;
        if (qpt_qp_flow(in->qp, p, &fl) < 0)
            return 1;
        char name[1024], callee[1024];
        bolt_name(in, pr.stored_name, p, name, sizeof(name));
        uint8_t *keep = malloc(pr.nedges + 1);
        if (keep == NULL || qpt_qp_branch_edges(in->qp, p, keep) < 0) {
            free(keep);
            qpt_qp_flow_free(fl);
            return 1;
        }
        for (uint32_t k = 0; k < pr.nedges; k++) {
            qpt_qp_edge_t e;
            qpt_qp_block_t to;
            uint64_t count;
            int state;
            if (!keep[k] || qpt_qp_flow_edge(fl, k, &count, &state) < 0 || count == 0
                || state == QPT_QP_COUNT_UNKNOWN || qpt_qp_edge(in->qp, p, k, &e) < 0)
                continue;
            uint64_t from = last_insn_of(in, p, e.from, &missed);
            if (from == 0 || qpt_qp_block(in->qp, p, e.to, &to) < 0)
                continue;
            fprintf(f, "1 %s %" PRIx64 " 1 %s %" PRIx64 " 0 %" PRIu64 "\n", name, from - pr.entry,
                    name, to.start - pr.entry, count);
        }
        free(keep);
        /* Calls and tail calls, per site (a tail call's edge leaves the procedure). */
        uint32_t nsites = qpt_qp_nsites(in->qp, p);
        for (uint32_t c = 0; c < nsites; c++) {
            qpt_qp_site_t site;
            if (qpt_qp_site(in->qp, p, c, &site) < 0 || site.target == 0 || site.name[0] == '\0')
                continue;
            uint32_t callee_proc = QPT_QP_NONE;
            for (uint32_t a = cp.first_arc; a < cp.first_arc + cp.narcs && callee_proc == QPT_QP_NONE; a++) {
                qpt_qp_arc_t arc = arc_of(cg, a);
                if (arc.target == site.target)
                    callee_proc = arc.callee;
            }
            bolt_name(in, site.name, callee_proc, callee, sizeof(callee));
            uint64_t n = 0;
            int state;
            if (site.edge != QPT_QP_NONE)
                qpt_qp_flow_edge(fl, site.edge, &n, &state);
            else
                qpt_qp_flow_block(fl, site.block, &n, &state);
            uint64_t from = last_insn_of(in, p, site.block, &missed);
            if (from != 0 && n > 0)
                fprintf(f, "1 %s %" PRIx64 " 1 %s 0 0 %" PRIu64 "\n", name, from - pr.entry,
                        callee, n);
        }
        qpt_qp_flow_free(fl);
    }
    if (missed > 0)
        fprintf(stderr, "qp: %s: %zu branch or call sites left out: the rewriter jumped over "
                "their first bytes; give the original program with --original=FILE\n",
                in->exe, missed);
    return 0;
}
