/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * qp's text reports: the flat profile (gprof-like), CSV, per-block and per-edge counts,
 * and Graphviz DOT. Everything printed comes from libqpt's report (include/qpt/qpt_qp.h).
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
    qpt_qp_proc_t p;
    return qpt_qp_proc(in->qp, proc, &p) == 0 ? p.name : "?";
}

/* What the report says of IN's whole run. */
static qpt_qp_info_t
info_of(const qp_inputs_t *in)
{
    qpt_qp_info_t i;
    if (qpt_qp_info(in->qp, &i) < 0)
        memset(&i, 0, sizeof(i));
    return i;
}

uint64_t
qp_total_insns(const qp_inputs_t *in)
{
    return info_of(in).total_insns;
}

static const char *
driver_name(uint32_t driver)
{
    return driver == QPT_QP_DRIVER_EDGES    ? "qp (edge counters)"
        : driver == QPT_QP_DRIVER_BLOCKS ? "naive (block counters)"
                                         : "a libqpt mutator's words (no procedure described)";
}

/*****************************************************************************
 * Flat profile
 */

/* The markers after a procedure's name: a PLT stub counted from its callers, and what
 * may be wrong with its counts. */
static const char *
markers(const qpt_qp_row_t *r, char *buf)
{
    char *p = buf;
    if (r->flags & QPT_QP_PLT)
        *p++ = '^';
    if (r->flags & QPT_QP_VIOLATION)
        *p++ = '!';
    if (r->flags & QPT_QP_APPROX)
        *p++ = '~';
    if (r->flags & QPT_QP_UNKNOWN)
        *p++ = '?';
    if (r->flags & QPT_QP_SATURATED)
        *p++ = '+';
    *p = '\0';
    return buf;
}

/* Runs that ended inside main (killed by a signal, or ended from a thread or a library
 * without exit()): main shows fewer calls than runs. Into BUF, or NULL. */
static char *
ended_inside_main(const qp_inputs_t *in, char *buf, size_t len)
{
    uint32_t m = qpt_qp_find(in->qp, "main");
    qpt_qp_info_t info = info_of(in);
    qpt_qp_row_t row, *res = &row;
    for (uint32_t k = 0; m != QPT_QP_NONE && k < info.nmeasured; k++) {
        if (qpt_qp_row(in->qp, QPT_QP_PROCS, k, res) < 0 || res->proc != m
            || !res->calls_known || res->calls >= info.runs || info.forks > 0)
            continue;
        uint64_t n = info.runs - res->calls;
        snprintf(buf, len, "%" PRIu64 " run%s ended inside main without returning or calling "
                 "exit() (killed by a signal?): the procedures %s inside show too few calls "
                 "(main: %" PRIu64 " call%s in %" PRIu64 " run%s)", n, n == 1 ? "" : "s",
                 n == 1 ? "it was" : "they were", res->calls, res->calls == 1 ? "" : "s",
                 info.runs, info.runs == 1 ? "" : "s");
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
    qpt_qp_info_t p = info_of(in);
    if (!p.atomic && p.threads)
        snprintf(buf, len, "plain counters in a program that can start threads "
                           "(--no-atomic): counts are low wherever threads raced");
    else if (!p.atomic && p.fork_unseen)
        snprintf(buf, len, "a child forked in code left in place counts into its parent's "
                           "counters with plain increments: counts may be low where both ran");
    else if (p.unsaved > 0)
        snprintf(buf, len, "%" PRIu64 " process%s could not save %s counts (no free slot, or "
                           "the profile could not be reopened after fork): counts are low",
                 p.unsaved, p.unsaved == 1 ? "" : "es", p.unsaved == 1 ? "its" : "their");
    else if (p.nrunning > 0)
        snprintf(buf, len, "the program is still running (pid %" PRIu64 "%s): these are the "
                 "counts so far, and the procedures it is inside (main, ...) show fewer calls "
                 "than they will", p.running_pid, p.nrunning > 1 ? " and others" : "");
    else if ((buf = ended_inside_main(in, buf, len)) == NULL)
        return NULL;
    return buf;
}

static int
ran(const qpt_qp_row_t *r)
{
    return r->insns > 0 || (r->calls_known && r->calls > 0);
}

static void
print_header(FILE *f, const qp_inputs_t *in)
{
    qpt_qp_info_t r = info_of(in);
    fprintf(f, "Flat profile of %s\n", in->exe);
    fprintf(f, "profile: ");
    for (int i = 0; i < in->nprofiles; i++)
        fprintf(f, "%s%s", i ? ", " : "", in->profiles[i]);
    fprintf(f, " (%" PRIu64 " run%s", r.runs, r.runs == 1 ? "" : "s");
    if (r.forks)
        fprintf(f, ", %" PRIu64 " forked process%s", r.forks, r.forks == 1 ? "" : "es");
    fprintf(f, "); driver %s\n", driver_name(r.driver));
    char abuf[256];
    if (run_approx(in, abuf, sizeof(abuf)) != NULL)
        fprintf(f, "warning: %s\n", abuf);
    if (r.napprox_resume > 0)
        fprintf(f, "warning: " QPT_GO_NAMES_UNREAD ": a stack growth may count as a call, "
                   "every count is marked approximate (~, below)\n");
    fprintf(f, "total: %" PRIu64 " instructions executed in %" PRIu32
               " measured procedures", r.total_insns, r.nmeasured);
    if (r.nplt > 0)
        fprintf(f, " and %" PRIu32 " PLT stub%s", r.nplt, r.nplt == 1 ? "" : "s");
    fprintf(f, "; %" PRIu32 " procedures not measured", r.nunmeasured);
    if (r.calls_unmeasured > 0)
        fprintf(f, ", called %" PRIu64 " times from measured code (what they ran is not in "
                   "the total)", r.calls_unmeasured);
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
    const qpt_qp_process_t *proc; /* the rows of several modules, or NULL */
    uint32_t nrows;            /* measured procedures and PLT stubs */
    uint64_t total;            /* their instructions */
    int width;                 /* the module column's width */
} flat_view_t;

static void
view_one(flat_view_t *v, const qp_inputs_t *in)
{
    qpt_qp_info_t i = info_of(in);
    *v = (flat_view_t) { in, NULL, 1, NULL, i.nmeasured + i.nplt, i.total_insns, 0 };
}

static void
view_several(flat_view_t *v, const qp_modules_t *m)
{
    qpt_qp_process_info_t pi;
    qpt_qp_process_info(m->proc, &pi);
    *v = (flat_view_t) { m->mods, m->labels, m->nmods, m->proc, pi.nrows, pi.total_insns,
                         (int)strlen("module") };
    for (uint32_t k = 0; k < m->nmods; k++)
        if ((int)strlen(m->labels[k]) > v->width)
            v->width = (int)strlen(m->labels[k]);
}

/* Row I of V, in flat-profile order, into *ROW (returned), and *MOD the index of its
 * module. */
static const qpt_qp_row_t *
view_row(const flat_view_t *v, uint32_t i, uint32_t *mod, qpt_qp_row_t *row)
{
    int rc;
    if (v->proc == NULL) {
        *mod = 0;
        rc = qpt_qp_row(v->mods[0].qp, QPT_QP_FLAT, i, row);
    } else {
        rc = qpt_qp_process_row(v->proc, i, mod, row);
    }
    if (rc < 0)
        memset(row, 0, sizeof(*row)); /* not reached: I < nrows */
    return row;
}

/* The module column (before the name) of a row of module MOD, or its heading. */
static void
print_module_col(FILE *f, const flat_view_t *v, uint32_t mod)
{
    if (v->labels != NULL)
        fprintf(f, "%-*s  ", v->width, mod == QPT_QP_NONE ? "module" : v->labels[mod]);
}

/* Is RES within --min (its share of the instructions)? */
static int
above_min(const flat_view_t *v, const qpt_qp_row_t *res)
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
    print_module_col(f, v, QPT_QP_NONE);
    fprintf(f, "name\n");
    *nidle = *nidle_plt = 0;
    uint32_t shown = 0, hidden = 0, mod;
    uint64_t hidden_insns = 0;
    qpt_qp_row_t row;
    for (uint32_t i = 0; i < v->nrows; i++) {
        const qpt_qp_row_t *res = view_row(v, i, &mod, &row);
        if (!ran(res) && !opt->verbose && !(res->flags & QPT_QP_VIOLATION)) {
            (*(res->flags & QPT_QP_PLT ? nidle_plt : nidle))++;
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
        fprintf(f, "%s%s%s\n", res->name,
                markers(res, mbuf)[0] ? " " : "", mbuf);
    }
    print_hidden(f, hidden, hidden_insns, v->total);
}

/* A row of the calls table: its calls (the sort key) and its index in the view. */
typedef struct by_calls {
    uint64_t calls; /* the row's calls */
    uint32_t row;   /* its index in flat-profile order */
} by_calls_t;

static int
cmp_calls(const void *a, const void *b)
{
    const by_calls_t *x = a, *y = b;
    if (x->calls != y->calls)
        return x->calls > y->calls ? -1 : 1;
    return x->row < y->row ? -1 : x->row > y->row; /* then the flat-profile order */
}

/* The procedures with a known, non-zero call count, most called first. */
static void
print_by_calls(FILE *f, const flat_view_t *v)
{
    by_calls_t *rows = malloc((v->nrows ? v->nrows : 1) * sizeof(*rows));
    uint32_t mod;
    if (rows == NULL)
        return;
    size_t n = 0;
    qpt_qp_row_t row;
    for (uint32_t i = 0; i < v->nrows; i++) {
        const qpt_qp_row_t *res = view_row(v, i, &mod, &row);
        if (res->calls_known && res->calls > 0 && above_min(v, res))
            rows[n++] = (by_calls_t) { res->calls, i };
    }
    qsort(rows, n, sizeof(*rows), cmp_calls);
    uint32_t limit = v->mods[0].limit;
    size_t shown = limit > 0 && limit < n ? limit : n;
    fprintf(f, "\nBy calls:\n%16s %20s  ", "calls", "instructions/call");
    print_module_col(f, v, QPT_QP_NONE);
    fprintf(f, "name\n");
    for (size_t i = 0; i < shown; i++) {
        const qpt_qp_row_t *res = view_row(v, rows[i].row, &mod, &row);
        fprintf(f, "%16" PRIu64 " %20.1f  ", res->calls,
                (double)res->insns / (double)res->calls);
        print_module_col(f, v, mod);
        fprintf(f, "%s\n", res->name);
    }
    if (shown < n)
        fprintf(f, "%16s %20s  (%zu more procedure%s: --limit)\n", "", "", n - shown,
                n - shown == 1 ? "" : "s");
    free(rows);
}

/* What may be wrong with the counts of V's modules, summed for the footnotes. */
typedef struct flat_notes {
    uint32_t nviolating, napprox, nunknown, nsaturated; /* procedures (qpt_qp_info_t), and
                                                         * PLT stubs for the last two */
    uint32_t napprox_resume;                            /* ... approximate in a Go program
                                                         * whose names were not read */
    uint32_t napprox_other;                             /* ... approximate for another
                                                         * reason (the general note) */
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
        qpt_qp_info_t r = info_of(&v->mods[k]);
        n->nviolating += r.nviolating;
        n->napprox += r.napprox;
        n->napprox_resume += r.napprox_resume;
        n->napprox_other += r.napprox_other;
        n->nunknown += r.nunknown;
        n->nsaturated += r.nsaturated;
        n->ndropped += r.ndropped;
        n->forks = r.forks > n->forks ? r.forks : n->forks;
        n->incomplete += r.incomplete;
        n->saturated |= r.saturated;
        n->nplt += r.nplt;
        for (uint32_t i = 0; i < r.nplt; i++) {
            qpt_qp_row_t stub;
            if (qpt_qp_row(v->mods[k].qp, QPT_QP_STUBS, i, &stub) < 0)
                continue;
            n->nlazy += (stub.flags & QPT_QP_APPROX_LAZY) != 0;
            n->ncaller += (stub.flags & QPT_QP_APPROX_CALLER) != 0;
            n->nunknown += (stub.flags & QPT_QP_UNKNOWN) != 0;
            n->nsaturated += (stub.flags & QPT_QP_SATURATED) != 0;
        }
    }
    if (v->nmods == 1 && info_of(&v->mods[0]).is_library)
        n->nlib_leave = qpt_qp_unseen_leaving(v->mods[0].qp);
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
    if (n.napprox_resume)
        fprintf(f, "~  in " QPT_GO_NAMES_UNREAD ": runtime.morestack is not known, so a stack growth in a procedure's "
                   "prologue (the goroutine resumed there jumps back to the entry) may "
                   "count as one more call of it, and a goroutine resumed after "
                   "runtime.mcall (Gosched, parking) likewise: every count of its %" PRIu32
                   " procedure(s) may be approximate\n",
                n.napprox_resume);
    if (n.napprox_other)
        fprintf(f, "~  has exception landing pads, calls setjmp or vfork, may be left by a longjmp or an "
                   "exception (it calls, directly or through other procedures, one that "
                   "longjmps or throws; in a Go program that panicked, any procedure), or has indirect jumps whose targets are a guess: if "
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
                n.ndropped, QPT_QP_MAX_DUMPS);
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
        n += info_of(&v->mods[k]).nunmeasured;
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
        uint32_t nun = info_of(in).nunmeasured;
        if (nun == 0)
            continue;
        if (v->labels == NULL)
            fprintf(f, "\nNot measured:\n");
        else
            fprintf(f, "\nNot measured in %s:\n", v->labels[k]);
        for (uint32_t i = 0; i < nun; i++) {
            uint32_t proc;
            uint64_t calls;
            qpt_qp_proc_t p;
            if (qpt_qp_unmeasured(in->qp, i, &proc, &calls) < 0
                || qpt_qp_proc(in->qp, proc, &p) < 0)
                continue;
            fprintf(f, "  %s at 0x%" PRIx64 ": %s", p.name, p.entry,
                    p.reason[0] ? p.reason : "no reason given");
            if (calls > 0)
                fprintf(f, " (called %" PRIu64 " times from measured code)", calls);
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
    return info_of(in).is_library;
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
        same_driver &= info_of(in).driver == info_of(first).driver;
        same_runs &= info_of(in).runs == info_of(first).runs;
    }
    if (same_driver)
        fprintf(f, "; driver %s", driver_name(info_of(first).driver));
    for (uint32_t k = 0; !same_driver && k < m->nmods; k++)
        fprintf(f, "%s%s %s", k ? ", " : "; drivers: ", m->labels[k],
                driver_name(info_of(&m->mods[k]).driver));
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
    qpt_qp_process_info_t pr;
    qpt_qp_process_info(m->proc, &pr);
    uint32_t nmeasured = 0;
    fprintf(f, "\n%8s %20s %8s %10s %13s  %-*s  %s\n", "% insns", "instructions", "runs",
            "measured", "not measured", v->width, "module", "file");
    for (uint32_t i = 0; i < m->nmods; i++) {
        uint32_t k = qpt_qp_process_by_insns(m->proc, i);
        const qp_inputs_t *in = &m->mods[k];
        qpt_qp_info_t r = info_of(in);
        uint64_t insns = r.total_insns;
        nmeasured += r.nmeasured;
        fprintf(f, "%8.2f %20" PRIu64 " %8" PRIu64 " %10" PRIu32 " %13" PRIu32 "  %-*s  %s\n",
                pr.total_insns ? 100.0 * (double)insns / (double)pr.total_insns : 0,
                insns, r.runs, r.nmeasured, r.nunmeasured, v->width,
                m->labels[k], in->exe);
    }
    fprintf(f, "total: %" PRIu64 " instructions executed in %" PRIu32
               " measured procedures", pr.total_insns, nmeasured);
    if (pr.nplt > 0)
        fprintf(f, " and %" PRIu32 " PLT stub%s", pr.nplt, pr.nplt == 1 ? "" : "s");
    uint64_t ucalls = 0;
    for (uint32_t k = 0; k < m->nmods; k++)
        ucalls += info_of(&m->mods[k]).calls_unmeasured;
    fprintf(f, " of %" PRIu32 " modules; %" PRIu32 " procedures not measured", m->nmods,
            pr.nunmeasured);
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
    size_t n = qpt_qp_csv_field(s, NULL, 0);
    char *field = malloc(n + 1);
    if (field == NULL)
        return -1;
    qpt_qp_csv_field(s, field, n + 1);
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
    qpt_qp_row_t row;
    for (uint32_t i = 0, mod; i < v->nrows; i++) {
        const qpt_qp_row_t *res = view_row(v, i, &mod, &row);
        if ((v->labels != NULL && (print_csv_field(f, v->labels[mod]) < 0 || fputc(',', f) < 0))
            || print_csv_field(f, res->name) < 0)
            break;
        char mbuf[8];
        markers(res, mbuf);
        /* An undetermined or saturated call count is an empty field: never a guess. */
        if (res->calls_known && !(res->flags & QPT_QP_SATURATED))
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
print_proc_title(FILE *f, const qp_inputs_t *in, const qpt_qp_flow_info_t *fl)
{
    qpt_qp_proc_t p;
    qpt_qp_proc(in->qp, fl->proc, &p);
    char cbuf[24];
    fprintf(f, "%s at 0x%" PRIx64 ": %s call%s, %" PRIu64 " instructions%s\n",
            p.name, p.entry, qp_fmt_count(cbuf, fl->calls, fl->calls_known),
            fl->calls_known && fl->calls == 1 ? "" : "s", fl->insns,
            fl->insns_exact ? "" : " (known blocks only)");
}

static void
print_blocks_of(FILE *f, const qp_inputs_t *in, const qpt_qp_flow_t *flow)
{
    qpt_qp_flow_info_t fl;
    qpt_qp_flow_info(flow, &fl);
    char cbuf[24], ibuf[24];
    print_proc_title(f, in, &fl);
    fprintf(f, "  %18s %16s %6s %20s\n", "address", "count", "insns", "instructions");
    for (uint32_t b = 0; b < fl.nblocks; b++) {
        qpt_qp_block_t blk;
        uint64_t count;
        int state;
        if (qpt_qp_block(in->qp, fl.proc, b, &blk) < 0
            || qpt_qp_flow_block(flow, b, &count, &state) < 0)
            continue;
        int known = state != QPT_QP_COUNT_UNKNOWN;
        uint64_t insns;
        if (__builtin_mul_overflow(count, (uint64_t)blk.ninsns, &insns))
            insns = UINT64_MAX;
        fprintf(f, "  %#18" PRIx64 " %16s %6" PRIu32 " %20s", blk.start,
                qp_fmt_count(cbuf, count, known), blk.ninsns, qp_fmt_count(ibuf, insns, known));
        if (blk.abandoned)
            fprintf(f, "  (%" PRIu64 " left at exit)", blk.abandoned);
        fprintf(f, "\n");
    }
}

/* A block end of an edge of PROC: its address, or X. */
static const char *
end_name(const qp_inputs_t *in, uint32_t proc, uint32_t block, char *buf)
{
    qpt_qp_block_t blk;
    if (block == QPT_QP_NONE)
        return "X";
    snprintf(buf, 24, "%#" PRIx64, qpt_qp_block(in->qp, proc, block, &blk) == 0 ? blk.start : 0);
    return buf;
}

static void
print_violations(FILE *f, const qp_inputs_t *in, const qpt_qp_flow_t *flow)
{
    qpt_qp_flow_info_t fl;
    qpt_qp_flow_info(flow, &fl);
    char buf[24];
    for (uint32_t i = 0; i < fl.nviolations; i++) {
        qpt_qp_violation_t v;
        if (qpt_qp_flow_violation(flow, i, &v) < 0)
            continue;
        const char *at = v.block == QPT_QP_NONE ? "X (entry/exit)"
                                                 : end_name(in, fl.proc, v.block, buf);
        if (v.kind == QPT_QP_V_NEGATIVE)
            fprintf(f, "  VIOLATION at %s: conservation needs a negative count on edge %" PRIu32
                       " (count %" PRIu64 ", known in %" PRIu64 ", known out %" PRIu64 ")\n",
                    at, v.edge, v.count, v.in, v.out);
        else if (v.kind == QPT_QP_V_OVERFLOW)
            fprintf(f, "  VIOLATION at %s: a count does not fit in 64 bits\n", at);
        else
            fprintf(f, "  VIOLATION at %s: count %" PRIu64 ", flow in %" PRIu64
                       ", flow out (with abandoned) %" PRIu64 "\n",
                    at, v.count, v.in, v.out);
    }
}

static void
print_edges_of(FILE *f, const qp_inputs_t *in, const qpt_qp_flow_t *flow)
{
    qpt_qp_flow_info_t fl;
    qpt_qp_flow_info(flow, &fl);
    char a[24], b[24], cbuf[24];
    print_proc_title(f, in, &fl);
    fprintf(f, "  %5s %18s %18s %-10s %16s  %s\n", "edge", "from", "to", "kind", "count", "how");
    for (uint32_t e = 0; e < fl.nedges; e++) {
        qpt_qp_edge_t ed;
        uint64_t count;
        int st;
        if (qpt_qp_edge(in->qp, fl.proc, e, &ed) < 0
            || qpt_qp_flow_edge(flow, e, &count, &st) < 0)
            continue;
        fprintf(f, "  %5" PRIu32 " %18s %18s %-10s %16s  %s\n", e,
                end_name(in, fl.proc, ed.from, a), end_name(in, fl.proc, ed.to, b), ed.kind,
                qp_fmt_count(cbuf, count, st != QPT_QP_COUNT_UNKNOWN),
                qpt_qp_count_state_name(st));
    }
    for (uint32_t k = 0; k < fl.nblocks; k++) {
        qpt_qp_block_t blk;
        if (qpt_qp_block(in->qp, fl.proc, k, &blk) == 0 && blk.abandoned)
            fprintf(f, "  %5s %18s %18s %-10s %16" PRIu64 "  from exit back-traces\n", "",
                    end_name(in, fl.proc, k, a), "X", "abandoned", blk.abandoned);
    }
    print_violations(f, in, flow);
}

/* Print one procedure or (PROC == QPT_QP_NONE) every measured one that ran. */
static int
for_procs(FILE *f, const qp_inputs_t *in, uint32_t proc,
          void (*print)(FILE *, const qp_inputs_t *, const qpt_qp_flow_t *))
{
    int first = 1;
    qpt_qp_row_t res;
    for (uint32_t i = 0; qpt_qp_row(in->qp, QPT_QP_PROCS, i, &res) == 0; i++) {
        if (proc != QPT_QP_NONE ? res.proc != proc : !(ran(&res) || in->verbose))
            continue;
        qpt_qp_flow_t *fl;
        if (qpt_qp_flow(in->qp, res.proc, &fl) < 0) {
            fprintf(stderr, "qp: %s: %s\n", in->exe, qpt_strerror(QPT_ENOMEM));
            return 1;
        }
        if (!first)
            fprintf(f, "\n");
        first = 0;
        print(f, in, fl);
        qpt_qp_flow_free(fl);
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
    uint32_t from, to; /* block (local), QPT_QP_NONE (ENTRY or EXIT) or DOT_COLD */
    uint64_t count;
    int state;         /* QPT_QP_COUNT_* */
    const char *kind;  /* the edge's kind (one edge) */
    uint8_t merged;    /* several edges to or from COLD */
} dot_edge_t;

static void
dot_node(FILE *f, uint32_t b, int from)
{
    if (b == QPT_QP_NONE)
        fprintf(f, from ? "ENTRY" : "EXIT");
    else if (b == DOT_COLD)
        fprintf(f, "COLD");
    else
        fprintf(f, "b%" PRIu32, b);
}

/* The block counts of FLOW's procedure (0 where unknown), and their states. */
typedef struct dot_blocks {
    qpt_qp_block_t *blk;  /* per block */
    uint64_t *count;      /* per block */
    int *state;           /* per block */
} dot_blocks_t;

static int
dot_blocks(const qp_inputs_t *in, uint32_t proc, const qpt_qp_flow_t *flow, uint32_t n,
           dot_blocks_t *d)
{
    d->blk = malloc((n + 1) * sizeof(*d->blk));
    d->count = malloc((n + 1) * sizeof(*d->count));
    d->state = malloc((n + 1) * sizeof(*d->state));
    if (d->blk == NULL || d->count == NULL || d->state == NULL)
        return -1;
    for (uint32_t b = 0; b < n; b++)
        if (qpt_qp_block(in->qp, proc, b, &d->blk[b]) < 0
            || qpt_qp_flow_block(flow, b, &d->count[b], &d->state[b]) < 0)
            return -1;
    return 0;
}

static void
dot_blocks_free(dot_blocks_t *d)
{
    free(d->blk);
    free(d->count);
    free(d->state);
}

int
qp_print_dot(FILE *f, const qp_inputs_t *in, uint32_t proc)
{
    qpt_qp_flow_t *flow = NULL;
    qpt_qp_flow_info_t fl;
    qpt_qp_proc_t p;
    dot_blocks_t bl = { NULL, NULL, NULL };
    int ok = qpt_qp_proc(in->qp, proc, &p) == 0;
    dot_edge_t *de = ok ? malloc((p.nedges + p.nblocks + 1) * sizeof(*de)) : NULL;
    uint8_t *cold = ok ? calloc(p.nblocks + 1, 1) : NULL;
    if (de == NULL || cold == NULL || qpt_qp_flow(in->qp, proc, &flow) < 0
        || dot_blocks(in, proc, flow, p.nblocks, &bl) < 0) {
        free(de);
        free(cold);
        dot_blocks_free(&bl);
        qpt_qp_flow_free(flow);
        fprintf(stderr, "qp: %s: %s\n", in->exe, qpt_strerror(QPT_ENOMEM));
        return 1;
    }
    qpt_qp_flow_info(flow, &fl);
    uint64_t bmax = 0, emax = 0, cold_insns = 0;
    uint32_t ncold = 0;
    for (uint32_t b = 0; b < fl.nblocks; b++)
        if (bl.count[b] > bmax)
            bmax = bl.count[b];
    /* --min PCT: blocks run less than PCT% as often as the hottest are cold. */
    for (uint32_t b = 0; in->min_pct > 0 && b < fl.nblocks; b++)
        if ((double)bl.count[b] < in->min_pct / 100.0 * (double)bmax) {
            cold[b] = 1;
            ncold++;
            cold_insns += bl.count[b] * bl.blk[b].ninsns;
        }
    size_t n = 0;
    for (uint32_t e = 0; e < fl.nedges; e++) {
        qpt_qp_edge_t ed;
        uint64_t count;
        int state;
        if (qpt_qp_edge(in->qp, proc, e, &ed) < 0 || qpt_qp_flow_edge(flow, e, &count, &state) < 0)
            continue;
        uint32_t from = ed.from, to = ed.to;
        if (from != QPT_QP_NONE && cold[from])
            from = DOT_COLD;
        if (to != QPT_QP_NONE && cold[to])
            to = DOT_COLD;
        if (from == DOT_COLD && to == DOT_COLD)
            continue;
        size_t k = 0;
        if (from == DOT_COLD || to == DOT_COLD)
            for (k = 0; k < n && !(de[k].from == from && de[k].to == to); k++)
                ;
        if (k < n && (from == DOT_COLD || to == DOT_COLD)) {
            de[k].count += count;
            de[k].merged = 1;
            if (state == QPT_QP_COUNT_UNKNOWN)
                de[k].state = QPT_QP_COUNT_UNKNOWN;
        } else {
            de[n++] = (dot_edge_t) { from, to, count, state, ed.kind, 0 };
        }
    }
    for (size_t k = 0; k < n; k++)
        if (de[k].count > emax)
            emax = de[k].count;

    char cbuf[24], col[40];
    fprintf(f, "digraph \"");
    dot_string(f, p.name);
    fprintf(f, "\" {\n  node [shape=box, fontname=\"monospace\", style=filled];\n");
    fprintf(f, "  ENTRY [shape=oval, fillcolor=white];\n  EXIT [shape=oval, fillcolor=white];\n");
    /* Blocks coloured by how often they ran (white: never, red: the hottest); the label
     * says the count and the share of the procedure's instructions. */
    for (uint32_t b = 0; b < fl.nblocks; b++) {
        if (cold[b])
            continue;
        double share = fl.insns ? 100.0 * (double)(bl.count[b] * bl.blk[b].ninsns)
                                      / (double)fl.insns : 0;
        heat_color(col, sizeof(col), bmax ? (double)bl.count[b] / (double)bmax : 0);
        fprintf(f, "  b%" PRIu32 " [label=\"%#" PRIx64 "\\n%s (%.1f%%)\", fillcolor=\"%s\"];\n",
                b, bl.blk[b].start,
                qp_fmt_count(cbuf, bl.count[b], bl.state[b] != QPT_QP_COUNT_UNKNOWN), share, col);
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
        if (in->min_pct > 0 && e->count == 0 && e->state != QPT_QP_COUNT_UNKNOWN)
            continue; /* --min: the paths that ran only */
        double h = emax ? (double)e->count / (double)emax : 0;
        heat_color(col, sizeof(col), h);
        fprintf(f, "  ");
        dot_node(f, e->from, 1);
        fprintf(f, " -> ");
        dot_node(f, e->to, 0);
        if (e->merged)
            fprintf(f, " [label=\"%s\"",
                    qp_fmt_count(cbuf, e->count, e->state != QPT_QP_COUNT_UNKNOWN));
        else
            fprintf(f, " [label=\"%s %s%s\"", e->kind,
                    qp_fmt_count(cbuf, e->count, e->state != QPT_QP_COUNT_UNKNOWN),
                    e->state == QPT_QP_COUNT_MEASURED ? "*" : "");
        fprintf(f, ", penwidth=%.1f, color=\"%s\"%s];\n", 1 + 5 * h,
                e->state == QPT_QP_COUNT_CLAMPED ? "0.000 1.000 1.000" : h > 0 ? col : "grey",
                e->state == QPT_QP_COUNT_UNKNOWN ? ", style=dotted" : "");
    }
    for (uint32_t b = 0; b < fl.nblocks; b++)
        if (bl.blk[b].abandoned) {
            fprintf(f, "  ");
            dot_node(f, cold[b] ? DOT_COLD : b, 1);
            fprintf(f, " -> EXIT [label=\"left at exit %" PRIu64 "\", style=dashed];\n",
                    bl.blk[b].abandoned);
        }
    fprintf(f, "}\n");
    qpt_qp_flow_free(flow);
    dot_blocks_free(&bl);
    free(de);
    free(cold);
    return 0;
}
