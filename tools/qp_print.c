/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * qp's text reports: the flat profile (gprof-like), CSV, per-block and per-edge counts,
 * and Graphviz DOT. Everything printed comes from the report (report/qp_report.h).
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tools/qp_tool.h"

const char *
qp_fmt_count(char *buf, uint64_t v, int known)
{
    if (!known)
        return "?";
    snprintf(buf, 24, "%" PRIu64, v);
    return buf;
}

const char *
qp_proc_name(const qp_inputs_t *in, uint32_t proc)
{
    if (in->names != NULL && in->names[proc] != NULL)
        return in->names[proc];
    return qp_desc_str(in->desc, in->desc->procs[proc].name);
}

const char *
qp_row_name(const qp_inputs_t *in, const qp_proc_result_t *res)
{
    if (res->proc != QP_VIRT)
        return qp_proc_name(in, res->proc);
    size_t k = (size_t)(res - in->rep->plt);
    if (in->plt_names != NULL && k < in->rep->nplt && in->plt_names[k] != NULL)
        return in->plt_names[k];
    return res->name;
}

static const char *
driver_name(uint32_t driver)
{
    return driver == QP_DRIVER_QP    ? "qp (edge counters)"
        : driver == QP_DRIVER_NAIVE ? "naive (block counters)"
                                    : "a libqpt mutator's words (no procedure described)";
}

/*****************************************************************************
 * Flat profile
 */

/* The markers after a procedure's name: a PLT stub counted from its callers, and what
 * may be wrong with its counts. */
static const char *
markers(const qp_proc_result_t *r, char *buf)
{
    char *p = buf;
    if (r->flags & QP_RES_PLT)
        *p++ = '^';
    if (r->flags & QP_RES_VIOLATION)
        *p++ = '!';
    if (r->flags & QP_RES_APPROX_ANY)
        *p++ = '~';
    if (r->flags & QP_RES_UNKNOWN)
        *p++ = '?';
    if (r->flags & QP_RES_SATURATED)
        *p++ = '+';
    *p = '\0';
    return buf;
}

/* Runs that ended inside main (killed by a signal, or ended from a thread or a library
 * without exit()): main shows fewer calls than runs. Into BUF, or NULL. */
static char *
ended_inside_main(const qp_inputs_t *in, char *buf, size_t len)
{
    uint32_t m = qp_desc_find_proc(in->desc, "main");
    const qp_report_t *r = in->rep;
    for (uint32_t k = 0; m != QP_VIRT && k < r->nprocs; k++) {
        const qp_proc_result_t *res = &r->procs[k];
        if (res->proc != m || !res->calls_known || res->calls >= in->prof->hdr.runs
            || in->prof->hdr.forks > 0)
            continue;
        uint64_t n = in->prof->hdr.runs - res->calls;
        snprintf(buf, len, "%" PRIu64 " run%s ended inside main without returning or calling "
                 "exit() (killed by a signal?): the procedures %s inside show too few calls "
                 "(main: %" PRIu64 " call%s in %" PRIu64 " run%s)", n, n == 1 ? "" : "s",
                 n == 1 ? "it was" : "they were", res->calls, res->calls == 1 ? "" : "s",
                 in->prof->hdr.runs, in->prof->hdr.runs == 1 ? "" : "s");
        return buf;
    }
    return NULL;
}

/*
 * Why the counts of the whole run may be too low, or NULL: plain increments raced
 * between threads or between a parent and a child forked where no hook moved it to
 * counters of its own, or processes ran without saving their counts.
 */
static const char *
run_approx(const qp_inputs_t *in, char *buf, size_t len)
{
    uint32_t df = in->desc->hdr.flags;
    const qp_profile_t *p = in->prof;
    if (!(df & QP_DESC_ATOMIC) && (df & QP_DESC_THREADS))
        snprintf(buf, len, "plain counters in a program that can start threads "
                           "(--no-atomic): counts are low wherever threads raced");
    else if (!(df & QP_DESC_ATOMIC) && (df & QP_DESC_FORK_UNSEEN))
        snprintf(buf, len, "a child forked in code left in place counts into its parent's "
                           "counters with plain increments: counts may be low where both ran");
    else if (p->hdr.unsaved > 0)
        snprintf(buf, len, "%" PRIu64 " process%s could not save %s counts (no free slot, or "
                           "the profile could not be reopened after fork): counts are low",
                 p->hdr.unsaved, p->hdr.unsaved == 1 ? "" : "es",
                 p->hdr.unsaved == 1 ? "its" : "their");
    else if (p->nrunning > 0)
        snprintf(buf, len, "the program is still running (pid %" PRIu64 "%s): these are the "
                 "counts so far, and the procedures it is inside (main, ...) show fewer calls "
                 "than they will", p->running_pid, p->nrunning > 1 ? " and others" : "");
    else if ((buf = ended_inside_main(in, buf, len)) == NULL)
        return NULL;
    return buf;
}

static int
ran(const qp_proc_result_t *r)
{
    return r->insns > 0 || (r->calls_known && r->calls > 0);
}

static void
print_header(FILE *f, const qp_inputs_t *in)
{
    const qp_profile_t *p = in->prof;
    const qp_report_t *r = in->rep;
    fprintf(f, "Flat profile of %s\n", in->exe);
    fprintf(f, "profile: ");
    for (int i = 0; i < in->nprofiles; i++)
        fprintf(f, "%s%s", i ? ", " : "", in->profiles[i]);
    fprintf(f, " (%" PRIu64 " run%s", p->hdr.runs, p->hdr.runs == 1 ? "" : "s");
    if (p->hdr.forks)
        fprintf(f, ", %" PRIu64 " forked process%s", p->hdr.forks, p->hdr.forks == 1 ? "" : "es");
    fprintf(f, "); driver %s\n", driver_name(in->desc->hdr.driver));
    char abuf[256];
    if (run_approx(in, abuf, sizeof(abuf)) != NULL)
        fprintf(f, "warning: %s\n", abuf);
    fprintf(f, "total: %" PRIu64 " instructions executed in %" PRIu32
               " measured procedures", qp_report_insns(r), r->nprocs);
    if (r->nplt > 0)
        fprintf(f, " and %" PRIu32 " PLT stub%s", r->nplt, r->nplt == 1 ? "" : "s");
    fprintf(f, "; %" PRIu32 " procedures not measured", r->nunmeasured);
    if (r->calls_unmeasured > 0)
        fprintf(f, ", called %" PRIu64 " times from measured code (what they ran is not in "
                   "the total)", r->calls_unmeasured);
    fprintf(f, "\n\n");
}

/*
 * What the flat profile and the CSV list: the procedures of one module, or those of
 * several (a process report's rows) with a module column.
 */
typedef struct flat_view {
    const qp_inputs_t *mods;   /* the modules; mods[0] has the options */
    const char *const *labels; /* their names in the module column, or NULL: one module */
    uint32_t nmods;            /* how many */
    const qp_process_t *proc;  /* the rows of several modules, or NULL */
    uint32_t nrows;            /* measured procedures and PLT stubs */
    uint64_t total;            /* their instructions */
    int width;                 /* the module column's width */
} flat_view_t;

static void
view_one(flat_view_t *v, const qp_inputs_t *in)
{
    *v = (flat_view_t) { in, NULL, 1, NULL, in->rep->nprocs + in->rep->nplt,
                         qp_report_insns(in->rep), 0 };
}

static void
view_several(flat_view_t *v, const qp_modules_t *m)
{
    *v = (flat_view_t) { m->mods, m->labels, m->nmods, m->proc, m->proc->nrows,
                         m->proc->total_insns, (int)strlen("module") };
    for (uint32_t k = 0; k < m->nmods; k++)
        if ((int)strlen(m->labels[k]) > v->width)
            v->width = (int)strlen(m->labels[k]);
}

/* Row I of V, in flat-profile order, and *MOD the index of its module. */
static const qp_proc_result_t *
view_row(const flat_view_t *v, uint32_t i, uint32_t *mod)
{
    if (v->proc == NULL) {
        *mod = 0;
        return qp_report_row(v->mods[0].rep, i);
    }
    *mod = v->proc->rows[i].module;
    return v->proc->rows[i].res;
}

/* The module column (before the name) of a row of module MOD, or its heading. */
static void
print_module_col(FILE *f, const flat_view_t *v, uint32_t mod)
{
    if (v->labels != NULL)
        fprintf(f, "%-*s  ", v->width, mod == QP_VIRT ? "module" : v->labels[mod]);
}

/* Is RES within --min (its share of the instructions)? */
static int
above_min(const flat_view_t *v, const qp_proc_result_t *res)
{
    double pct = v->total ? 100.0 * (double)res->insns / (double)v->total : 0;
    return v->mods[0].min_pct <= 0 || pct >= v->mods[0].min_pct;
}

/* The line saying what --limit and --min left out of a table. */
static void
print_hidden(FILE *f, uint32_t n, uint64_t insns, uint64_t total)
{
    if (n > 0)
        fprintf(f, "%8.2f %20" PRIu64 " %16s  (%" PRIu32 " more procedure%s: --limit, --min)\n",
                total ? 100.0 * (double)insns / (double)total : 0, insns, "", n,
                n == 1 ? "" : "s");
}

static void
print_flat_table(FILE *f, const flat_view_t *v, uint32_t *nidle, uint32_t *nidle_plt)
{
    const qp_inputs_t *opt = &v->mods[0];
    char cbuf[24], mbuf[8];
    fprintf(f, "%8s %20s %16s  ", "% insns", "instructions", "calls");
    print_module_col(f, v, QP_VIRT);
    fprintf(f, "name\n");
    *nidle = *nidle_plt = 0;
    uint32_t shown = 0, hidden = 0, mod;
    uint64_t hidden_insns = 0;
    for (uint32_t i = 0; i < v->nrows; i++) {
        const qp_proc_result_t *res = view_row(v, i, &mod);
        if (!ran(res) && !opt->verbose && !(res->flags & QP_RES_VIOLATION)) {
            (*(res->flags & QP_RES_PLT ? nidle_plt : nidle))++;
            continue;
        }
        if ((opt->limit > 0 && shown >= opt->limit) || !above_min(v, res)) {
            hidden++;
            hidden_insns += res->insns;
            continue;
        }
        shown++;
        double pct = v->total ? 100.0 * (double)res->insns / (double)v->total : 0;
        fprintf(f, "%8.2f %20" PRIu64 " %16s  ", pct, res->insns,
                qp_fmt_count(cbuf, res->calls, res->calls_known));
        print_module_col(f, v, mod);
        fprintf(f, "%s%s%s\n", qp_row_name(&v->mods[mod], res),
                markers(res, mbuf)[0] ? " " : "", mbuf);
    }
    print_hidden(f, hidden, hidden_insns, v->total);
}

static int
cmp_calls(const void *a, const void *b, void *arg)
{
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b, mod;
    uint64_t x = view_row(arg, i, &mod)->calls, y = view_row(arg, j, &mod)->calls;
    if (x != y)
        return x > y ? -1 : 1;
    return i < j ? -1 : i > j; /* then the flat-profile order */
}

/* The procedures with a known, non-zero call count, most called first. */
static void
print_by_calls(FILE *f, const flat_view_t *v)
{
    uint32_t *rows = malloc((v->nrows ? v->nrows : 1) * sizeof(*rows)), mod;
    if (rows == NULL)
        return;
    size_t n = 0;
    for (uint32_t i = 0; i < v->nrows; i++) {
        const qp_proc_result_t *res = view_row(v, i, &mod);
        if (res->calls_known && res->calls > 0 && above_min(v, res))
            rows[n++] = i;
    }
    qsort_r(rows, n, sizeof(*rows), cmp_calls, (void *)v);
    uint32_t limit = v->mods[0].limit;
    size_t shown = limit > 0 && limit < n ? limit : n;
    fprintf(f, "\nBy calls:\n%16s %20s  ", "calls", "instructions/call");
    print_module_col(f, v, QP_VIRT);
    fprintf(f, "name\n");
    for (size_t i = 0; i < shown; i++) {
        const qp_proc_result_t *res = view_row(v, rows[i], &mod);
        fprintf(f, "%16" PRIu64 " %20.1f  ", res->calls,
                (double)res->insns / (double)res->calls);
        print_module_col(f, v, mod);
        fprintf(f, "%s\n", qp_row_name(&v->mods[mod], res));
    }
    if (shown < n)
        fprintf(f, "%16s %20s  (%zu more procedure%s: --limit)\n", "", "", n - shown,
                n - shown == 1 ? "" : "s");
    free(rows);
}

/* What may be wrong with the counts of V's modules, summed for the footnotes. */
typedef struct flat_notes {
    uint32_t nviolating, napprox, nunknown, nsaturated; /* procedures (qp_report_t), and
                                                         * PLT stubs for the last two */
    uint64_t ndropped, incomplete;                      /* exits (profile, back-traces) */
    uint64_t forks;                                     /* forked children (the most of
                                                         * any module's profile) */
    int saturated;                                      /* a sum of profiles saturated */
    uint32_t nplt, nlazy, ncaller;                      /* PLT stubs: all, bound lazily,
                                                         * called from approximate code */
    uint32_t nlib_leave; /* a library reported alone: its procedures that other modules'
                          * throws or longjmps may leave, unmarked (it cannot see them) */
} flat_notes_t;

static void
sum_notes(const flat_view_t *v, flat_notes_t *n)
{
    memset(n, 0, sizeof(*n));
    for (uint32_t k = 0; k < v->nmods; k++) {
        const qp_report_t *r = v->mods[k].rep;
        const qp_profile_t *p = v->mods[k].prof;
        n->nviolating += r->nviolating;
        n->napprox += r->napprox;
        n->nunknown += r->nunknown;
        n->nsaturated += r->nsaturated;
        n->ndropped += p->ndropped;
        n->forks = p->hdr.forks > n->forks ? p->hdr.forks : n->forks;
        n->incomplete += r->bt.incomplete;
        n->saturated |= p->saturated;
        n->nplt += r->nplt;
        for (uint32_t i = 0; i < r->nplt; i++) {
            uint32_t fl = r->plt[i].flags;
            n->nlazy += (fl & QP_RES_APPROX_LAZY) != 0;
            n->ncaller += (fl & QP_RES_APPROX_CALLER) != 0;
            n->nunknown += (fl & QP_RES_UNKNOWN) != 0;
            n->nsaturated += (fl & QP_RES_SATURATED) != 0;
        }
    }
    if (v->nmods == 1 && (v->mods[0].img->flags & CFG_IMG_SHLIB))
        n->nlib_leave = qp_report_unseen_leaving(v->mods[0].rep);
}

static void
print_footnotes(FILE *f, const flat_view_t *v)
{
    flat_notes_t n;
    sum_notes(v, &n);
    int any = n.nviolating || n.napprox || n.nunknown || n.ndropped || n.incomplete
        || n.saturated || n.nsaturated || n.nplt || n.nlib_leave || n.forks;
    if (!any)
        return;
    fprintf(f, "\n");
    if (n.nplt)
        fprintf(f, "^  PLT stubs: counted from the calls that measured code made to "
                   "them, each running the stub's instructions to its first jump (calls "
                   "from code not measured are not seen)\n");
    if (n.nviolating)
        fprintf(f, "!  flow conservation (Kirchhoff) fails in %" PRIu32 " procedure(s): their "
                   "counts are inconsistent (qp report --edges=NAME shows where)\n",
                n.nviolating);
    if (n.napprox)
        fprintf(f, "~  has exception landing pads, calls setjmp or vfork, may be left by a longjmp or an "
                   "exception (it calls, directly or through other procedures, one that "
                   "longjmps or throws), or has indirect jumps whose targets are a guess: if "
                   "control left it that way, its counts may be approximate\n");
    if (n.nlazy)
        fprintf(f, "~  on a PLT stub: its module binds symbols lazily (no BIND_NOW), so "
                   "each symbol's first call also ran the rest of its PLT entry and the "
                   "dynamic linker's resolver, not counted: low by a few instructions per "
                   "symbol (exact when run with LD_BIND_NOW=1)\n");
    if (n.ncaller)
        fprintf(f, "~  on a PLT stub: a procedure that calls it has approximate or "
                   "inconsistent counts, and so may the stub\n");
    if (n.nlib_leave)
        fprintf(f, "note: a library alone: a throw or longjmp of another module (a callback "
                   "that threw) through its %" PRIu32 " procedure(s) that call other modules "
                   "is not seen here: report it with the program's profile (qp report "
                   "PROG.qp LIB.qp) to have their counts marked when one happened\n",
                n.nlib_leave);
    if (n.nunknown)
        fprintf(f, "?  some counts are not determined by the measured ones: shown as ?, and "
                   "instructions count only the known blocks\n");
    if (n.ndropped)
        fprintf(f, "note: %" PRIu64 " exit(s) left no usable stack dump (more than %u exits, "
                   "or a dump cut short): the counts of procedures active at those exits may "
                   "be approximate\n",
                n.ndropped, QP_PROF_MAX_DUMPS);
    if (n.incomplete)
        fprintf(f, "note: %" PRIu64 " exit back-trace(s) could not be followed to the "
                   "outermost frame: counts of the procedures above may be approximate\n",
                n.incomplete);
    if (n.forks)
        fprintf(f, "note: %" PRIu64 " forked process%s counted from where fork returned: each "
                   "counts once more the procedures it inherited active at the fork and then "
                   "ran in (one call each, and their blocks from the entry to the fork), "
                   "as flow conservation makes them; gcov counts the one entry (qp(1), "
                   "FORKED PROCESSES)\n",
                n.forks, n.forks == 1 ? "" : "es");
    if (n.nsaturated)
        fprintf(f, "+  a counter reached 2^64-1, the most it holds (or the profile is "
                   "damaged): its counts are lower bounds\n");
    else if (n.saturated)
        fprintf(f, "note: a count reached 2^64-1 while summing profiles and was kept there\n");
}

static void
print_unmeasured(FILE *f, const flat_view_t *v)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < v->nmods; k++)
        n += v->mods[k].rep->nunmeasured;
    if (n == 0)
        return;
    if (!v->mods[0].verbose) {
        fprintf(f, "\n%" PRIu32 " procedures not measured (--verbose lists them with the "
                   "reason)\n",
                n);
        return;
    }
    for (uint32_t k = 0; k < v->nmods; k++) {
        const qp_inputs_t *in = &v->mods[k];
        const qp_report_t *r = in->rep;
        if (r->nunmeasured == 0)
            continue;
        if (v->labels == NULL)
            fprintf(f, "\nNot measured:\n");
        else
            fprintf(f, "\nNot measured in %s:\n", v->labels[k]);
        for (uint32_t i = 0; i < r->nunmeasured; i++) {
            const qp_desc_proc_t *p = &in->desc->procs[r->unmeasured[i]];
            const char *why = qp_desc_str(in->desc, p->reason);
            fprintf(f, "  %s at 0x%" PRIx64 ": %s", qp_proc_name(in, r->unmeasured[i]),
                    p->entry, why[0] ? why : "no reason given");
            if (r->unmeasured_calls != NULL && r->unmeasured_calls[i] > 0)
                fprintf(f, " (called %" PRIu64 " times from measured code)",
                        r->unmeasured_calls[i]);
            fprintf(f, "\n");
        }
    }
}

/* The flat profile after its header. */
static void
print_flat_body(FILE *f, const flat_view_t *v)
{
    uint32_t nidle, nidle_plt;
    print_flat_table(f, v, &nidle, &nidle_plt);
    if (nidle || nidle_plt) {
        fprintf(f, "%8s %20s %16s  (", "", "", "");
        if (nidle)
            fprintf(f, "%" PRIu32 " more measured procedures%s", nidle,
                    nidle_plt ? " and " : "");
        if (nidle_plt)
            fprintf(f, "%" PRIu32 "%s PLT stub%s", nidle_plt, nidle ? "" : " more",
                    nidle_plt == 1 ? "" : "s");
        fprintf(f, " never ran; --verbose lists them)\n");
    }
    print_by_calls(f, v);
    print_footnotes(f, v);
    print_unmeasured(f, v);
}

void
qp_print_flat(FILE *f, const qp_inputs_t *in)
{
    flat_view_t v;
    view_one(&v, in);
    print_header(f, in);
    print_flat_body(f, &v);
}

/*****************************************************************************
 * Flat profile of several modules
 */

static int
is_library(const qp_inputs_t *in)
{
    return (in->img->flags & CFG_IMG_SHLIB) != 0;
}

/* "Flat profile of main.inst and 2 libraries": the programs by name. */
static void
print_title(FILE *f, const qp_modules_t *m)
{
    uint32_t nlibs = 0, nprogs = 0;
    fprintf(f, "Flat profile of ");
    for (uint32_t k = 0; k < m->nmods; k++) {
        if (is_library(&m->mods[k])) {
            nlibs++;
            continue;
        }
        fprintf(f, "%s%s", nprogs++ ? ", " : "", m->labels[k]);
    }
    if (nlibs > 0)
        fprintf(f, "%s%" PRIu32 " librar%s", nprogs ? " and " : "", nlibs,
                nlibs == 1 ? "y" : "ies");
    fprintf(f, "\n");
}

/* The profiles read, the driver (or each module's), and what may make counts low. */
static void
print_inputs(FILE *f, const qp_modules_t *m)
{
    int same_driver = 1, same_runs = 1;
    const qp_inputs_t *first = &m->mods[0];
    fprintf(f, "profiles: ");
    for (uint32_t k = 0; k < m->nmods; k++) {
        const qp_inputs_t *in = &m->mods[k];
        for (int i = 0; i < in->nprofiles; i++)
            fprintf(f, "%s%s", k || i ? ", " : "", in->profiles[i]);
        same_driver &= in->desc->hdr.driver == first->desc->hdr.driver;
        same_runs &= in->prof->hdr.runs == first->prof->hdr.runs;
    }
    if (same_driver)
        fprintf(f, "; driver %s", driver_name(first->desc->hdr.driver));
    for (uint32_t k = 0; !same_driver && k < m->nmods; k++)
        fprintf(f, "%s%s %s", k ? ", " : "; drivers: ", m->labels[k],
                driver_name(m->mods[k].desc->hdr.driver));
    fprintf(f, "\n");
    char abuf[256];
    for (uint32_t k = 0; k < m->nmods; k++)
        if (run_approx(&m->mods[k], abuf, sizeof(abuf)) != NULL)
            fprintf(f, "warning: %s: %s\n", m->labels[k], abuf);
    if (!same_runs)
        fprintf(f, "warning: the modules' profiles count different runs (below): a "
                   "library's profile also holds the runs of every other program that "
                   "loaded that file, and one loaded by dlopen only the runs that loaded it\n");
}

/* Per module: its share of the instructions, runs, procedures measured and not. */
static void
print_module_table(FILE *f, const qp_modules_t *m, const flat_view_t *v)
{
    const qp_process_t *pr = m->proc;
    uint32_t nmeasured = 0;
    fprintf(f, "\n%8s %20s %8s %10s %13s  %-*s  %s\n", "% insns", "instructions", "runs",
            "measured", "not measured", v->width, "module", "file");
    for (uint32_t i = 0; i < m->nmods; i++) {
        uint32_t k = pr->by_insns[i];
        const qp_inputs_t *in = &m->mods[k];
        const qp_report_t *r = in->rep;
        uint64_t insns = qp_report_insns(r);
        nmeasured += r->nprocs;
        fprintf(f, "%8.2f %20" PRIu64 " %8" PRIu64 " %10" PRIu32 " %13" PRIu32 "  %-*s  %s\n",
                pr->total_insns ? 100.0 * (double)insns / (double)pr->total_insns : 0,
                insns, in->prof->hdr.runs, r->nprocs, r->nunmeasured, v->width,
                m->labels[k], in->exe);
    }
    fprintf(f, "total: %" PRIu64 " instructions executed in %" PRIu32
               " measured procedures", pr->total_insns, nmeasured);
    if (pr->nplt > 0)
        fprintf(f, " and %" PRIu32 " PLT stub%s", pr->nplt, pr->nplt == 1 ? "" : "s");
    uint64_t ucalls = 0;
    for (uint32_t k = 0; k < m->nmods; k++)
        ucalls += m->mods[k].rep->calls_unmeasured;
    fprintf(f, " of %" PRIu32 " modules; %" PRIu32 " procedures not measured", m->nmods,
            pr->nunmeasured);
    if (ucalls > 0)
        fprintf(f, ", called %" PRIu64 " times from measured code", ucalls);
    fprintf(f, "\n");
    fprintf(f, "not in the total: code outside these %" PRIu32 " modules (the dynamic "
               "loader, the vDSO, libraries not rewritten), the procedures they did not "
               "measure, and what those ran in the modules' PLT stubs\n\n",
            m->nmods);
}

void
qp_print_flat_modules(FILE *f, const qp_modules_t *m)
{
    flat_view_t v;
    view_several(&v, m);
    print_title(f, m);
    print_inputs(f, m);
    print_module_table(f, m, &v);
    print_flat_body(f, &v);
}

/*****************************************************************************
 * CSV
 */

/* S as one CSV field; 0, or -1 when out of memory. */
static int
print_csv_field(FILE *f, const char *s)
{
    size_t n = qp_csv_field(s, NULL, 0);
    char *field = malloc(n + 1);
    if (field == NULL)
        return -1;
    qp_csv_field(s, field, n + 1);
    fputs(field, f);
    free(field);
    return 0;
}

static void
print_csv(FILE *f, const flat_view_t *v)
{
    uint8_t *whole = calloc(v->nmods, 1);
    if (whole == NULL)
        return;
    char abuf[256];
    for (uint32_t k = 0; k < v->nmods; k++)
        whole[k] = run_approx(&v->mods[k], abuf, sizeof(abuf)) != NULL;
    fprintf(f, "%sname,calls,instructions,flags\n", v->labels != NULL ? "module," : "");
    for (uint32_t i = 0, mod; i < v->nrows; i++) {
        const qp_proc_result_t *res = view_row(v, i, &mod);
        if ((v->labels != NULL && (print_csv_field(f, v->labels[mod]) < 0 || fputc(',', f) < 0))
            || print_csv_field(f, qp_row_name(&v->mods[mod], res)) < 0)
            break;
        char mbuf[8];
        markers(res, mbuf);
        /* An undetermined or saturated call count is an empty field: never a guess. */
        if (res->calls_known && !(res->flags & QP_RES_SATURATED))
            fprintf(f, ",%" PRIu64 ",%" PRIu64 ",%s%s\n", res->calls, res->insns, mbuf,
                    whole[mod] ? "*" : "");
        else
            fprintf(f, ",,%" PRIu64 ",%s%s\n", res->insns, mbuf, whole[mod] ? "*" : "");
    }
    free(whole);
}

void
qp_print_csv(FILE *f, const qp_inputs_t *in)
{
    flat_view_t v;
    view_one(&v, in);
    print_csv(f, &v);
}

void
qp_print_csv_modules(FILE *f, const qp_modules_t *m)
{
    flat_view_t v;
    view_several(&v, m);
    print_csv(f, &v);
}

/*****************************************************************************
 * Blocks, edges
 */

static void
print_proc_title(FILE *f, const qp_inputs_t *in, const qp_flow_t *fl)
{
    const qp_desc_proc_t *p = &in->desc->procs[fl->proc];
    char cbuf[24];
    fprintf(f, "%s at 0x%" PRIx64 ": %s call%s, %" PRIu64 " instructions%s\n",
            qp_proc_name(in, fl->proc), p->entry, qp_fmt_count(cbuf, fl->calls, fl->calls_known),
            fl->calls_known && fl->calls == 1 ? "" : "s", fl->insns,
            fl->insns_exact ? "" : " (known blocks only)");
}

static void
print_blocks_of(FILE *f, const qp_inputs_t *in, const qp_flow_t *fl)
{
    const qp_desc_proc_t *p = &in->desc->procs[fl->proc];
    char cbuf[24], ibuf[24];
    print_proc_title(f, in, fl);
    fprintf(f, "  %18s %16s %6s %20s\n", "address", "count", "insns", "instructions");
    for (uint32_t b = 0; b < fl->nblocks; b++) {
        const qp_desc_block_t *blk = &in->desc->blocks[p->block + b];
        int known = fl->block_state[b] != QP_FLOW_UNKNOWN;
        uint64_t ab = in->rep->abandoned[p->block + b];
        uint64_t insns;
        if (__builtin_mul_overflow(fl->block_count[b], (uint64_t)blk->ninsns, &insns))
            insns = UINT64_MAX;
        fprintf(f, "  %#18" PRIx64 " %16s %6" PRIu32 " %20s", blk->start,
                qp_fmt_count(cbuf, fl->block_count[b], known), blk->ninsns,
                qp_fmt_count(ibuf, insns, known));
        if (ab)
            fprintf(f, "  (%" PRIu64 " left at exit)", ab);
        fprintf(f, "\n");
    }
}

/* A block end of an edge: its address, or X. */
static const char *
end_name(const qp_inputs_t *in, uint32_t block, char *buf)
{
    if (block == QP_VIRT)
        return "X";
    snprintf(buf, 24, "%#" PRIx64, in->desc->blocks[block].start);
    return buf;
}

static void
print_violations(FILE *f, const qp_inputs_t *in, const qp_flow_t *fl)
{
    char buf[24];
    for (size_t i = 0; i < fl->nviolations; i++) {
        const qp_flow_violation_t *v = &fl->violations[i];
        const char *at = v->block == QP_VIRT ? "X (entry/exit)" : end_name(in, v->block, buf);
        if (v->kind == QP_FLOW_V_NEGATIVE)
            fprintf(f, "  VIOLATION at %s: conservation needs a negative count on edge %" PRIu32
                       " (count %" PRIu64 ", known in %" PRIu64 ", known out %" PRIu64 ")\n",
                    at, v->edge - in->desc->procs[fl->proc].edge, v->count, v->in, v->out);
        else if (v->kind == QP_FLOW_V_OVERFLOW)
            fprintf(f, "  VIOLATION at %s: a count does not fit in 64 bits\n", at);
        else
            fprintf(f, "  VIOLATION at %s: count %" PRIu64 ", flow in %" PRIu64
                       ", flow out (with abandoned) %" PRIu64 "\n",
                    at, v->count, v->in, v->out);
    }
}

static void
print_edges_of(FILE *f, const qp_inputs_t *in, const qp_flow_t *fl)
{
    const qp_desc_proc_t *p = &in->desc->procs[fl->proc];
    char a[24], b[24], cbuf[24];
    print_proc_title(f, in, fl);
    fprintf(f, "  %5s %18s %18s %-10s %16s  %s\n", "edge", "from", "to", "kind", "count", "how");
    for (uint32_t e = 0; e < fl->nedges; e++) {
        const qp_desc_edge_t *ed = &in->desc->edges[p->edge + e];
        uint8_t st = fl->edge_state[e];
        fprintf(f, "  %5" PRIu32 " %18s %18s %-10s %16s  %s\n", e, end_name(in, ed->from, a),
                end_name(in, ed->to, b), qp_edge_kind_name(ed->kind),
                qp_fmt_count(cbuf, fl->edge_count[e], st != QP_FLOW_UNKNOWN),
                qp_flow_state_name(st));
    }
    for (uint32_t k = 0; k < fl->nblocks; k++)
        if (in->rep->abandoned[p->block + k])
            fprintf(f, "  %5s %18s %18s %-10s %16" PRIu64 "  from exit back-traces\n", "",
                    end_name(in, p->block + k, a), "X", "abandoned",
                    in->rep->abandoned[p->block + k]);
    print_violations(f, in, fl);
}

/* Print one procedure or (PROC == QP_VIRT) every measured one that ran. */
static int
for_procs(FILE *f, const qp_inputs_t *in, uint32_t proc,
          void (*print)(FILE *, const qp_inputs_t *, const qp_flow_t *))
{
    int first = 1;
    for (uint32_t i = 0; i < in->rep->nprocs; i++) {
        const qp_proc_result_t *res = &in->rep->procs[i];
        if (proc != QP_VIRT ? res->proc != proc : !(ran(res) || in->verbose))
            continue;
        qp_flow_t fl;
        if (qp_report_flow(in->rep, res->proc, &fl) < 0) {
            fprintf(stderr, "qp: %s: %s\n", in->exe, qp_strerror(QP_ENOMEM));
            return 1;
        }
        if (!first)
            fprintf(f, "\n");
        first = 0;
        print(f, in, &fl);
        qp_flow_free(&fl);
    }
    return 0;
}

int
qp_print_blocks(FILE *f, const qp_inputs_t *in, uint32_t proc)
{
    return for_procs(f, in, proc, print_blocks_of);
}

int
qp_print_edges(FILE *f, const qp_inputs_t *in, uint32_t proc)
{
    return for_procs(f, in, proc, print_edges_of);
}

/*****************************************************************************
 * DOT
 */

/* NAME inside a DOT double-quoted string. */
static void
dot_string(FILE *f, const char *name)
{
    for (const char *p = name; *p; p++) {
        if (*p == '"' || *p == '\\')
            fputc('\\', f);
        fputc(*p, f);
    }
}

/* Graphviz colour of heat H (0..1): white through yellow to red. */
static void
heat_color(char *buf, size_t n, double h)
{
    if (h < 0)
        h = 0;
    if (h > 1)
        h = 1;
    snprintf(buf, n, "%.3f %.3f 1.000", 0.17 * (1 - h), 0.15 + 0.85 * h);
}

/* Cold blocks (--min) are one node, COLD; the edges between them are dropped and the
 * others summed per pair of nodes. */
#define DOT_COLD UINT32_MAX - 1

typedef struct dot_edge {
    uint32_t from, to; /* block (local), QP_VIRT (ENTRY or EXIT) or DOT_COLD */
    uint64_t count;
    uint8_t state, kind, merged;
} dot_edge_t;

static void
dot_node(FILE *f, uint32_t b, int from)
{
    if (b == QP_VIRT)
        fprintf(f, from ? "ENTRY" : "EXIT");
    else if (b == DOT_COLD)
        fprintf(f, "COLD");
    else
        fprintf(f, "b%" PRIu32, b);
}

int
qp_print_dot(FILE *f, const qp_inputs_t *in, uint32_t proc)
{
    qp_flow_t fl;
    const qp_desc_proc_t *p = &in->desc->procs[proc];
    dot_edge_t *de = malloc((p->nedges + p->nblocks + 1) * sizeof(*de));
    uint8_t *cold = calloc(p->nblocks + 1, 1);
    if (de == NULL || cold == NULL || qp_report_flow(in->rep, proc, &fl) < 0) {
        free(de);
        free(cold);
        fprintf(stderr, "qp: %s: %s\n", in->exe, qp_strerror(QP_ENOMEM));
        return 1;
    }
    uint64_t bmax = 0, emax = 0, cold_insns = 0;
    uint32_t ncold = 0;
    for (uint32_t b = 0; b < fl.nblocks; b++)
        if (fl.block_count[b] > bmax)
            bmax = fl.block_count[b];
    /* --min PCT: blocks run less than PCT% as often as the hottest are cold. */
    for (uint32_t b = 0; in->min_pct > 0 && b < fl.nblocks; b++)
        if ((double)fl.block_count[b] < in->min_pct / 100.0 * (double)bmax) {
            cold[b] = 1;
            ncold++;
            cold_insns += fl.block_count[b] * in->desc->blocks[p->block + b].ninsns;
        }
    size_t n = 0;
    for (uint32_t e = 0; e < fl.nedges; e++) {
        const qp_desc_edge_t *ed = &in->desc->edges[p->edge + e];
        uint32_t from = ed->from == QP_VIRT ? QP_VIRT : ed->from - p->block;
        uint32_t to = ed->to == QP_VIRT ? QP_VIRT : ed->to - p->block;
        if (from != QP_VIRT && cold[from])
            from = DOT_COLD;
        if (to != QP_VIRT && cold[to])
            to = DOT_COLD;
        if (from == DOT_COLD && to == DOT_COLD)
            continue;
        size_t k = 0;
        if (from == DOT_COLD || to == DOT_COLD)
            for (k = 0; k < n && !(de[k].from == from && de[k].to == to); k++)
                ;
        if (k < n && (from == DOT_COLD || to == DOT_COLD)) {
            de[k].count += fl.edge_count[e];
            de[k].merged = 1;
            if (fl.edge_state[e] == QP_FLOW_UNKNOWN)
                de[k].state = QP_FLOW_UNKNOWN;
        } else {
            de[n++] = (dot_edge_t) { from, to, fl.edge_count[e], fl.edge_state[e], ed->kind, 0 };
        }
    }
    for (size_t k = 0; k < n; k++)
        if (de[k].count > emax)
            emax = de[k].count;

    char cbuf[24], col[40];
    fprintf(f, "digraph \"");
    dot_string(f, qp_proc_name(in, proc));
    fprintf(f, "\" {\n  node [shape=box, fontname=\"monospace\", style=filled];\n");
    fprintf(f, "  ENTRY [shape=oval, fillcolor=white];\n  EXIT [shape=oval, fillcolor=white];\n");
    /* Blocks coloured by how often they ran (white: never, red: the hottest); the label
     * says the count and the share of the procedure's instructions. */
    for (uint32_t b = 0; b < fl.nblocks; b++) {
        if (cold[b])
            continue;
        const qp_desc_block_t *blk = &in->desc->blocks[p->block + b];
        double share = fl.insns ? 100.0 * (double)(fl.block_count[b] * blk->ninsns)
                                      / (double)fl.insns : 0;
        heat_color(col, sizeof(col), bmax ? (double)fl.block_count[b] / (double)bmax : 0);
        fprintf(f, "  b%" PRIu32 " [label=\"%#" PRIx64 "\\n%s (%.1f%%)\", fillcolor=\"%s\"];\n",
                b, blk->start,
                qp_fmt_count(cbuf, fl.block_count[b], fl.block_state[b] != QP_FLOW_UNKNOWN),
                share, col);
    }
    if (ncold > 0)
        fprintf(f, "  COLD [shape=folder, fillcolor=lightgrey, label=\"%" PRIu32 " blocks run "
                   "less than %g%% as often as the hottest\\n%" PRIu64 " instructions (%.1f%%)\"];\n",
                ncold, in->min_pct, cold_insns,
                fl.insns ? 100.0 * (double)cold_insns / (double)fl.insns : 0);
    /* Edges: width and colour by count; unknown ones dotted, inconsistent ones red; a
     * measured count (a counter) is marked with '*'. */
    for (size_t k = 0; k < n; k++) {
        const dot_edge_t *e = &de[k];
        if (in->min_pct > 0 && e->count == 0 && e->state != QP_FLOW_UNKNOWN)
            continue; /* --min: the paths that ran only */
        double h = emax ? (double)e->count / (double)emax : 0;
        heat_color(col, sizeof(col), h);
        fprintf(f, "  ");
        dot_node(f, e->from, 1);
        fprintf(f, " -> ");
        dot_node(f, e->to, 0);
        if (e->merged)
            fprintf(f, " [label=\"%s\"", qp_fmt_count(cbuf, e->count, e->state != QP_FLOW_UNKNOWN));
        else
            fprintf(f, " [label=\"%s %s%s\"", qp_edge_kind_name(e->kind),
                    qp_fmt_count(cbuf, e->count, e->state != QP_FLOW_UNKNOWN),
                    e->state == QP_FLOW_MEASURED ? "*" : "");
        fprintf(f, ", penwidth=%.1f, color=\"%s\"%s];\n", 1 + 5 * h,
                e->state == QP_FLOW_CLAMPED ? "0.000 1.000 1.000" : h > 0 ? col : "grey",
                e->state == QP_FLOW_UNKNOWN ? ", style=dotted" : "");
    }
    for (uint32_t b = 0; b < fl.nblocks; b++)
        if (in->rep->abandoned[p->block + b]) {
            fprintf(f, "  ");
            dot_node(f, cold[b] ? DOT_COLD : b, 1);
            fprintf(f, " -> EXIT [label=\"left at exit %" PRIu64 "\", style=dashed];\n",
                    in->rep->abandoned[p->block + b]);
        }
    fprintf(f, "}\n");
    qp_flow_free(&fl);
    free(de);
    free(cold);
    return 0;
}

/*****************************************************************************
 * Names with their source file (FILE:NAME)
 */

/* The source file (DWARF) of procedure PROC's entry, or NULL. */
const char *
qp_proc_module(const qp_inputs_t *in, uint32_t proc)
{
    const char *file;
    unsigned line;
    return cfg_image_line(in->img, in->desc->procs[proc].entry, &file, &line) == 0 ? file : NULL;
}

uint32_t
qp_find_in_module(const qp_inputs_t *in, const char *func)
{
    const char *sep = cfg_module_sep(func);
    if (sep == NULL)
        return QP_VIRT;
    uint32_t found = QP_VIRT;
    for (uint32_t i = 0; i < in->desc->hdr.nprocs; i++) {
        if (!qp_name_matches(qp_desc_str(in->desc, in->desc->procs[i].name), sep + 1)
            || !cfg_module_match(func, (size_t)(sep - func), qp_proc_module(in, i)))
            continue;
        if (in->desc->procs[i].flags & QP_PROC_MEASURED)
            return i;
        if (found == QP_VIRT)
            found = i;
    }
    return found;
}

