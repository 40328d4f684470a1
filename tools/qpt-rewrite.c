/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * qpt-rewrite: the exec editor's command line. Parses options, calls the library, prints
 * one clear line on failure (`qpt-rewrite: INPUT: why`) and exits non-zero.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cfg/cfg.h"
#include "driver/driver.h"
#include "editor/ed.h"
#include "editor/elfw.h"
#include "report/qp_report.h"
#include "tools/tool.h"
#include "tools/tool_metrics.h"

enum { EXIT_INPUT = 1, EXIT_USAGE = 2 };
enum { DUMP_NONE, DUMP_SUMMARY, DUMP_TEXT, DUMP_DOT };

static const char *prog_name = "qpt-rewrite";

static void
usage(FILE *f)
{
    fprintf(f,
            "Usage: %s [OPTIONS] INPUT -o OUTPUT\n"
            "       %s --with-libs [OPTIONS] PROGRAM -o FOLDER\n"
            "       %s --dump-cfg[=summary|text|dot] [--proc NAME] INPUT\n"
            "\n"
            "Rewrite an x86-64 Linux executable or shared library to measure what it does.\n"
            "\n"
            "Options:\n"
            "  -o, --output=FILE      write the rewritten executable to FILE\n"
            "      --driver=NAME      measurement: qp (edge profiling, default), naive, none;\n"
            "                         trace (control-flow trace, qp trace), trace-naive\n"
            "      --trace-mem        trace, trace-naive: also the program's load and store\n"
            "                         addresses (qp trace mem)\n"
            "      --atomic           counters with locked increments (the default when\n"
            "                         the program can start threads)\n"
            "      --no-atomic        plain increments even then (faster; counts may be\n"
            "                         lost when threads race, and the report says so)\n"
            "      --weights=PROFILE  qp: place counters by the edge counts of an earlier\n"
            "                         profile of this program (default: loop depth)\n"
            "      --call-targets     qp: also record the targets of indirect calls, so that\n"
            "                         the call graph names who calls through pointers\n"
            "                         (about 30 instructions per indirect call)\n"
            "      --dump-cfg[=KIND]  print the control-flow analysis instead of rewriting:\n"
            "                         summary (default), text (every block and edge),\n"
            "                         dot (Graphviz, needs --proc)\n"
            "      --proc=NAME        the procedure for --dump-cfg=dot\n"
            "  -e, --metric=METRIC    measure METRIC instead (qpt-metrics(5)), e.g.\n"
            "                         'count calls(lua_*) inside(luaV_execute)';\n"
            "                         repeatable; the run's values: qp metrics OUTPUT.qp\n"
            "      --metrics=FILE     the metrics defined in FILE (repeatable)\n"
            "      --predict=PROFILE  with metrics: print each one's predicted cost over a\n"
            "                         run like the one PROFILE measured (the qp profile of\n"
            "                         an earlier qp rewrite of INPUT)\n"
            "      --with-libs        INPUT is a program, OUTPUT a folder: rewrite the\n"
            "                         program and every library it loads (not the dynamic\n"
            "                         linker) into OUTPUT; OUTPUT/PROGRAM loads them from\n"
            "                         there; each writes its own profile (NAME.qp)\n"
            "      --force            with --with-libs: write into a folder that holds\n"
            "                         other files\n"
            "      --debug-dir=DIRS   where a stripped INPUT's separate debug file is looked\n"
            "                         for (by build-id or .gnu_debuglink; colon-separated;\n"
            "                         default /usr/lib/debug)\n"
            "      --threads=N        analyse on N threads (default: the CPUs online, at\n"
            "                         most 8; 1: no threads); the output is the same\n"
            "      --keep-old-text    keep the old code's bytes: new code goes only into\n"
            "                         new segments (a larger output; by default it also\n"
            "                         fills the dead bytes of moved code, except when\n"
            "                         tracing, whose regenerator decodes the old code)\n"
            "  -v, --verbose          say more (every unsafe procedure and why)\n"
            "  -h, --help             print this help and exit\n"
            "  -V, --version          print the version and exit\n"
            "\n"
            "Exit status: 0 success, 1 the input could not be handled, 2 usage error.\n",
            prog_name, prog_name, prog_name);
}

/* Progress on a terminal: the phase of a long rewrite, overwritten in place. */
static int show_progress;
static int call_targets; /* --call-targets */
static int trace_mem;    /* --trace-mem */
static int with_libs;    /* --with-libs: outputs look for libraries beside them first */
static int analysis_pass; /* passes of the analysis seen (the percentage restarts) */
static unsigned nthreads; /* --threads, or 0: the CPUs online (at most 8) */
static int keep_old_text; /* --keep-old-text */
static const char *all_in_place; /* every procedure stays in place (Go; QPT_LEAVE_ALL) */

/* cfg_opts_t.on_progress: "analysing... 45%" (and the pass, after the first). */
static void
analysis_progress(void *arg, size_t done, size_t total)
{
    (void)arg;
    if (!show_progress || total == 0)
        return;
    if (done == 0)
        analysis_pass++;
    if (analysis_pass > 1)
        fprintf(stderr, "\r%s: analysing (pass %d)... %zu%%\033[K", prog_name, analysis_pass,
                100 * done / total);
    else
        fprintf(stderr, "\r%s: analysing... %zu%%\033[K", prog_name, 100 * done / total);
    fflush(stderr);
}

/* drv_run_progress's callback: "placing counters... 45%". */
static void
placing_progress(void *arg, size_t done, size_t total)
{
    (void)arg;
    if (!show_progress || total == 0)
        return;
    fprintf(stderr, "\r%s: placing counters... %zu%%\033[K", prog_name, 100 * done / total);
    fflush(stderr);
}

/* ed_opts_t.on_progress: "relocating... 45%", then "writing..." for the rest. */
static void
relocation_progress(void *arg, size_t done, size_t total)
{
    (void)arg;
    if (!show_progress || total == 0)
        return;
    if (done < total)
        fprintf(stderr, "\r%s: relocating... %zu%%\033[K", prog_name, 100 * done / total);
    else
        fprintf(stderr, "\r%s: writing...\033[K", prog_name);
    fflush(stderr);
}

static void
progress(const char *phase)
{
    if (!show_progress)
        return;
    if (phase != NULL)
        fprintf(stderr, "\r%s: %s...\033[K", prog_name, phase);
    else
        fprintf(stderr, "\r\033[K");
    fflush(stderr);
}

/*
 * The temporary output, removed when SIGINT, SIGTERM or SIGHUP ends the rewrite (a cc1
 * rewrite leaves 150 MB otherwise). The handler uses only unlink and raise.
 */
static char tmp_path[PATH_MAX];
static volatile sig_atomic_t tmp_live;

static void
on_tmp(void *arg, const char *tmp)
{
    (void)arg;
    tmp_live = 0;
    if (tmp != NULL && strlen(tmp) < sizeof(tmp_path)) {
        memcpy(tmp_path, tmp, strlen(tmp) + 1);
        tmp_live = 1;
    }
}

static void
on_signal(int sig)
{
    if (tmp_live)
        unlink(tmp_path);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void
remove_tmp_on_signals(void)
{
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        /* Keep an ignored signal ignored (nohup). */
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        sigaction(sigs[i], &sa, NULL);
    }
}

static int
fail_input(const char *input, int rc)
{
    progress(NULL);
    const char *why = qp_strerror(rc);
    if (rc == QP_EIO && errno != 0)
        why = strerror(errno);
    fprintf(stderr, "%s: %s: %s\n", prog_name, input, why);
    return EXIT_INPUT;
}

/* One line about code that runs its old copy, unmeasured: WHAT (a format taking a count
 * and a plural ending), the first address FIRST. */
static void
note_old_copies(const char *output, uint64_t first, const char *what, unsigned n,
                const char *plural)
{
    fprintf(stderr, "%s: %s: ", prog_name, output);
    fprintf(stderr, what, n, plural);
    fprintf(stderr, " (the first 0x%llx): code entered there runs its old copy, unmeasured\n",
            (unsigned long long)first);
}

/* elfw_instr_t.describe over a driver's result. */
/* elfw_instr_t.placed: the snippets that record indirect calls' targets. */
static int
place_indirect(void *arg, const struct ed_plan *plan, uint64_t counters)
{
    return drv_indirect_place(arg, (ed_plan_t *)plan, counters);
}

static int
describe(void *arg, const ed_plan_t *plan, uint64_t counters, uint8_t **desc, size_t *len,
         uint64_t *id)
{
    return drv_describe(arg, plan, counters, desc, len, id);
}

/*****************************************************************************
 * Control-flow tracing (--driver=trace, --driver=trace-naive): the driver's result and
 * the events (drv_trace.c) for the elfw_instr_t callbacks.
 */
typedef struct trace_ctx {
    drv_result_t *res;
    drv_trace_t *tr;
} trace_ctx_t;

static int
trace_placed(void *arg, const struct ed_plan *plan, uint64_t counters)
{
    trace_ctx_t *c = arg;
    QP_CHECK(drv_indirect_place(c->res, (ed_plan_t *)plan, counters));
    return drv_trace_place(c->tr, c->res, (ed_plan_t *)plan, elfw_trace_refill(plan));
}

static int
trace_describe(void *arg, const ed_plan_t *plan, uint64_t counters, uint8_t **desc,
               size_t *len, uint64_t *id)
{
    trace_ctx_t *c = arg;
    QP_CHECK(drv_describe(c->res, plan, counters, desc, len, id));
    drv_trace_set_id(c->tr, *id);
    uint64_t rt_size = 0, rt = elfw_runtime(plan, &rt_size);
    return drv_trace_set_layout(c->tr, plan, rt, rt_size);
}

static int
trace_section(void *arg, const char **name, uint8_t **bytes, size_t *len)
{
    trace_ctx_t *c = arg;
    *name = ".qpt.trace";
    return drv_trace_section(c->tr, bytes, len);
}

/*
 * The edge counts of the profile PATH (read through report/) into W, for the driver.
 * Returns 0 or QP_E* with one line in WHY.
 */
static int
load_weights(const char *path, drv_weights_t *w, char *why, size_t whylen)
{
    qp_edge_count_t *v = NULL;
    size_t n = 0;
    int rc = qp_edge_counts_read(path, &v, &n, why, whylen);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = drv_weights_add(w, v[i].from, v[i].to, v[i].count, v[i].kind);
    free(v);
    if (rc == 0) {
        drv_weights_sort(w);
        return 0;
    }
    if (n > 0) /* the counts were read: drv_weights_add failed */
        snprintf(why, whylen, "%s: %s", path, qp_strerror(rc));
    drv_weights_free(w);
    return rc;
}

static int
cmp_ip_why(const void *a, const void *b)
{
    const drv_ip_why_t *x = a, *y = b;
    return x->bytes != y->bytes ? (x->bytes < y->bytes ? 1 : -1)
                                : (x->nprocs < y->nprocs) - (x->nprocs > y->nprocs);
}

/*
 * The summary of in-place measurement: procedures left in place measured where they
 * are, and a table of what stayed unmeasured and why (procedures, then blocks of the
 * measured ones), with the bytes of code that runs unmeasured.
 */
static void
print_in_place(const cfg_prog_t *prog, const char *output, drv_result_t *res,
               const ed_stats_t *es)
{
    if (es->nleft == 0)
        return;
    uint64_t total = 0, procs_bytes = 0, blocks_bytes = 0;
    uint32_t nprocs = 0, nblocks = 0;
    for (uint32_t i = 0; i < prog->nblocks; i++)
        total += prog->blocks[i].end - prog->blocks[i].start;
    for (size_t i = 0; i < res->nip_why; i++) {
        procs_bytes += res->ip_why[i].bytes;
        nprocs += res->ip_why[i].nprocs;
    }
    for (int r = 1; r < ED_IP_NREASONS; r++) {
        blocks_bytes += res->ip_block_why_bytes[r];
        nblocks += res->nip_block_why[r];
    }
    uint32_t nsaves = 0;
    for (size_t i = 0; i < res->nprobes; i++)
        nsaves += (res->probes[i].flags & ED_PROBE_INPLACE) && res->probes[i].save_flags;
    fprintf(stderr,
            "%s: %s: in place: %u procedures measured where they are (%u blocks, %llu "
            "bytes of code, counted through %u jumps to %llu bytes of trampolines, %u "
            "saving the flags; %u procedures partly); unmeasured: %u procedures and %u "
            "blocks, %llu of %llu bytes of code (%.2f%%)\n",
            prog_name, output, res->ninplace, res->nip_points,
            (unsigned long long)res->ip_bytes, es->ninplace,
            (unsigned long long)es->bytes_inplace, nsaves, res->ninplace_partial, nprocs,
            nblocks,
            (unsigned long long)(procs_bytes + blocks_bytes), (unsigned long long)total,
            total ? 100.0 * (double)(procs_bytes + blocks_bytes) / (double)total : 0.0);
    if (res->nip_why > 1)
        qsort(res->ip_why, res->nip_why, sizeof(drv_ip_why_t), cmp_ip_why);
    for (size_t i = 0; i < res->nip_why && i < 12; i++)
        fprintf(stderr, "%s: %s:   unmeasured %8u procedures %10llu bytes: %.*s\n",
                prog_name, output, res->ip_why[i].nprocs,
                (unsigned long long)res->ip_why[i].bytes, (int)res->ip_why[i].keylen,
                res->ip_why[i].why);
    if (res->nip_why > 12) {
        uint32_t n = 0;
        uint64_t b = 0;
        for (size_t i = 12; i < res->nip_why; i++) {
            n += res->ip_why[i].nprocs;
            b += res->ip_why[i].bytes;
        }
        fprintf(stderr, "%s: %s:   unmeasured %8u procedures %10llu bytes: %zu other reasons\n",
                prog_name, output, n, (unsigned long long)b, res->nip_why - 12);
    }
    for (int r = 1; r < ED_IP_NREASONS; r++)
        if (res->nip_block_why[r] > 0)
            fprintf(stderr, "%s: %s:   unmeasured %8u blocks     %10llu bytes: %s\n",
                    prog_name, output, res->nip_block_why[r],
                    (unsigned long long)res->ip_block_why_bytes[r], ed_inplace_why(r));
}

/* Rewrites made again, at most, when an FDE of moved code cannot be rewritten. */
#define MAX_RETRIES 16

/* The rewrite proper: plan, measure, relocate, write. Prints the summary line on success. */
static int
rewrite(const cfg_prog_t *prog, const char *input, const char *output, const char *driver,
        int atomic, const char *weights, int verbose)
{
    ed_plan_t *plan = NULL;
    ed_opts_t eo = { 0 };
    eo.stretch = getenv("QPT_STRETCH") != NULL; /* testing aid, see README */
    eo.keep_tables = getenv("QPT_KEEP_TABLES") != NULL; /* testing aid, see README */
    eo.on_progress = relocation_progress;
    const drv_ops_t *drv = strcmp(driver, "none") == 0 ? NULL : drv_find(driver);
    drv_result_t res;
    memset(&res, 0, sizeof(res));
    elfw_instr_t instr = { 0 };
    drv_weights_t w = { 0 };
    drv_inc_t inc = { 0 };
    const int tracing = drv == &drv_trace_ops || drv == &drv_trace_naive_ops;
    trace_ctx_t tctx = { &res, NULL };
    eo.reuse_text = !tracing && !keep_old_text;
    eo.all_in_place = all_in_place;
    if (all_in_place != NULL && cfg_image_runtime(prog->img) == CFG_RUNTIME_GO && atomic < 0)
        atomic = 1; /* its threads start from raw clone system calls: no hook sees them */
    uint32_t ntraced = 0, nmrefs = 0, nmvals = 0;
    int rc;
    if (weights != NULL) {
        char why[600];
        rc = load_weights(weights, &w, why, sizeof(why));
        progress(NULL);
        if (rc < 0) {
            fprintf(stderr, "%s: --weights %s: %s\n", prog_name, weights, why);
            return EXIT_INPUT;
        }
        double match = drv_weights_match(&w, prog);
        if (match < 0.95) {
            fprintf(stderr, "%s: --weights %s: a profile of another program (%.0f%% of its "
                    "edges are edges of %s)\n", prog_name, weights, 100 * match, input);
            drv_weights_free(&w);
            return EXIT_INPUT;
        }
    }
    tool_names_t leave; /* QPT_LEAVE: testing aid, see README */
    if (tool_leave_names(&leave) < 0) {
        drv_weights_free(&w);
        return fail_input(input, QP_ENOMEM);
    }
    eo.leave = leave.v;
    eo.nleave = leave.n;
    /*
     * An FDE of moved code whose tables cannot be rewritten for the new layout (which
     * the plan could not foresee) fails the rewrite with its range: then plan, measure
     * and rewrite again with that code in place.
     */
    ed_fde_fail_t stay[MAX_RETRIES];
    char err[512] = "";
    elfw_rewrite_stats_t st;
    for (size_t nstay = 0;;) {
        eo.stay = stay;
        eo.nstay = nstay;
        rc = ed_plan_create(prog, &eo, &plan);
        if (rc < 0) {
            drv_weights_free(&w);
            tool_names_free(&leave);
            return fail_input(input, rc);
        }
        if (drv != NULL) {
            progress("placing counters");
            rc = drv_run_progress(drv, prog, plan, weights ? &w : NULL, &res, placing_progress,
                                  NULL);
            if (rc == 0 && call_targets && !tracing)
                rc = drv_indirect_tables(&res, prog);
            drv_trace_free(tctx.tr);
            tctx.tr = NULL;
            if (rc == 0 && tracing)
                rc = drv_trace_plan(prog, &res, drv == &drv_trace_naive_ops, weights ? &w : NULL,
                                    &tctx.tr, &ntraced);
            if (rc == 0 && tracing && trace_mem)
                rc = drv_trace_plan_mem(tctx.tr, prog, &nmrefs, &nmvals);
            if (rc < 0 || (rc = ed_plan_set_probes(plan, res.probes, res.nprobes)) < 0) {
                ed_plan_destroy(plan);
                drv_result_free(&res);
                drv_trace_free(tctx.tr);
                tctx.tr = NULL;
                drv_weights_free(&w);
                tool_names_free(&leave);
                return fail_input(input, rc);
            }
            drv_choose_inc(prog, &res, atomic, &inc);
            ed_plan_set_inc_mode(plan, inc.mode);
            res.pie = (prog->img->flags & CFG_IMG_PIE) != 0;
            instr = (elfw_instr_t) { .ncounters = res.ncounters,
                                     .lock_at_start = inc.lock_at_start,
                                     .describe = describe, .arg = &res,
                                     .placed = place_indirect, .placed_arg = &res,
                                     .watcher = inc.watcher };
            if (tracing) {
                instr.describe = trace_describe;
                instr.arg = &tctx;
                instr.placed = trace_placed;
                instr.placed_arg = &tctx;
                instr.trace = drv_trace_unit(tctx.tr);
                instr.section = trace_section;
                instr.section_arg = &tctx;
            }
        }
        err[0] = '\0';
        progress("relocating and writing");
        static const elfw_tmp_hook_t hook = { on_tmp, NULL };
        const elfw_rewrite_opts_t wo = { &hook, with_libs };
        rc = elfw_rewrite(
            prog, plan, drv ? &instr : NULL, input, output, &wo, &st, err, sizeof(err));
        progress(NULL);
        int again = 0; /* the same FDE twice: the plan could not keep it in place */
        for (size_t i = 0; i < nstay; i++)
            again |= stay[i].lo == st.unwind_fail.lo && stay[i].hi == st.unwind_fail.hi;
        if (rc >= 0 || st.unwind_fail.lo == 0 || again || nstay == MAX_RETRIES)
            break;
        stay[nstay++] = st.unwind_fail;
        ed_plan_destroy(plan);
        drv_result_free(&res);
        drv_trace_free(tctx.tr);
        tctx.tr = NULL;
        memset(&res, 0, sizeof(res));
    }
    drv_weights_free(&w);
    tool_names_free(&leave);
    if (rc == QP_EBUG && plan != NULL && ed_plan_stats(plan)->bad_exit_to != 0)
        snprintf(err, sizeof(err),
                 "code left in place at 0x%llx would run into new code placed at 0x%llx: %s",
                 (unsigned long long)ed_plan_stats(plan)->bad_exit_from,
                 (unsigned long long)ed_plan_stats(plan)->bad_exit_to, qp_strerror(rc));
    if (rc < 0) {
        fprintf(stderr, "%s: %s: %s\n", prog_name, input, err[0] ? err : qp_strerror(rc));
        ed_plan_destroy(plan);
        drv_result_free(&res);
        drv_trace_free(tctx.tr);
        tctx.tr = NULL;
        return EXIT_INPUT;
    }
    if (st.setid_dropped)
        fprintf(stderr,
                "%s: %s: written without the set-user-ID/set-group-ID bits of %s (an "
                "instrumented program is not the audited one; chmod deliberately)\n",
                prog_name, output, input);
    if (st.phdr_far)
        fprintf(stderr,
                "%s: %s: note: the program headers moved past a large .bss, where only "
                "Linux 5.18 and later find them: older kernels and valgrind will not run "
                "it correctly\n",
                prog_name, output);
    if (verbose) {
        for (uint32_t i = 0; i < prog->nprocs; i++) {
            const char *why = ed_plan_left_reason(plan, i);
            if (why != NULL && !(prog->procs[i].flags & CFG_PROC_FRAGMENT))
                fprintf(stderr, "%s: left in place: %s at 0x%llx: %s\n", prog_name,
                    prog->procs[i].name, (unsigned long long)prog->procs[i].entry, why);
        }
        for (uint32_t i = 0; drv != NULL && i < res.nprocs; i++)
            if (res.procs[i].reason != 0
                && strncmp(res.strtab + res.procs[i].reason, "not measured", 12) == 0)
                fprintf(stderr, "%s: %s: %s\n", prog_name, res.strtab + res.procs[i].name,
                    res.strtab + res.procs[i].reason);
    }
    const ed_stats_t *es = ed_plan_stats(plan);
    fprintf(stderr,
            "%s: %s: %u procedures relocated, %u left in place; %llu bytes of code relocated "
            "into %llu; %u redirects (%u for indirect-jump targets), %u jump tables "
            "retargeted, %u jumps of unknown targets translated at run time; output %llu "
            "bytes (%.2fx input)\n",
            prog_name, output, es->nmoved, es->nleft, (unsigned long long)es->bytes_old,
            (unsigned long long)es->bytes_new, es->npads, es->nind_pads, es->ntables,
            es->nxlate, (unsigned long long)st.output_size,
            st.input_size ? (double)st.output_size / (double)st.input_size : 0.0);
    if (drv != NULL)
        print_in_place(prog, output, &res, es);
    if (es->nheld_inside > 0)
        note_old_copies(output, es->held_inside, "the program holds %u address%s inside "
                        "blocks of moved code, not at a block's start", es->nheld_inside,
                        es->nheld_inside == 1 ? "" : "es");
    if (es->nkept_reached > 0)
        note_old_copies(output, es->kept_reached, "code left in place runs into %u moved "
                        "procedure%s other than at a redirect (their old bytes stay)",
                        es->nkept_reached, es->nkept_reached == 1 ? "" : "s");
    if (es->nunreached_into_pad > 0)
        fprintf(stderr,
                "%s: %s: note: %u jump%s out of bytes that no known path reaches land inside "
                "a redirect (the first from 0x%llx to 0x%llx): should that code ever run, "
                "it would fail there\n",
                prog_name, output, es->nunreached_into_pad,
                es->nunreached_into_pad == 1 ? "" : "s",
                (unsigned long long)es->unreached_into_pad_from,
                (unsigned long long)es->unreached_into_pad_to);
    if (verbose && es->bytes_holes > 0)
        fprintf(stderr,
                "%s: %s: old text reused: %llu bytes of new code in %llu free bytes of moved "
                "code (%.0f%%), %llu in new segments\n",
                prog_name, output, (unsigned long long)es->bytes_reused,
                (unsigned long long)es->bytes_holes,
                100.0 * (double)es->bytes_reused / (double)es->bytes_holes,
                (unsigned long long)(es->bytes_new - es->bytes_reused));
    if (verbose) {
        const ed_dwarf_out_t *d = &st.dwarf;
        fprintf(stderr,
                "%s: %s: debug info: %llu line rows remapped, %llu kept, %u sequences in %u "
                "line programs (%u programs kept as they were%s); %u DIE addresses remapped, "
                "%u left old (range split, too small, or inside one left old), %u unreadable, "
                "%u DW_AT_ranges not read; %u new .debug_addr entries, %u new range lists; "
                "%u CU ranges extended (%u not); %u aranges sets rewritten; %u units not "
                "handled, %u in part; %u compressed sections\n",
                prog_name, output, (unsigned long long)d->nline_rows_moved,
                (unsigned long long)d->nline_rows_kept, d->nline_seqs, d->nline_units_moved,
                d->nline_units_kept, d->line_kept ? ", and the whole .debug_line" : "",
                d->ndie_moved, d->ndie_stale, d->ndie_addrx, d->ndie_ranges, d->naddr_added,
                d->nrnglists_added, d->ncu_moved, d->ncu_stale, d->naranges_moved,
                d->nunits_skipped, d->nunits_partial, d->ncompressed);
    }
    if (drv != NULL) {
        fprintf(stderr,
                "%s: %s: driver %s: %u procedures measured (%u per block, %u counted by their "
                "call sites), %u not; %u "
                "counters for %u edges (%.1f%% with the flags saved), %u taken-edge stubs, "
                "%u exit hooks, %u fork hooks\n",
                prog_name, output, drv->name, res.nmeasured, res.nblock_counted,
                res.nby_calls, res.nunmeasured, res.ncounters, res.nedges_total,
                es->nprobes ? 100.0 * es->nflag_saves / (double)es->nprobes : 0.0, es->nstubs,
                res.nexit_hooks, res.nfork_hooks);
        static const char *const mode[] = { "plain increments", "locked increments",
                                            "switchable increments" };
        if (tracing) {
            size_t npoints = 0;
            uint32_t nevents = 0;
            drv_trace_stats(tctx.tr, &npoints, &nevents);
            fprintf(stderr, "%s: %s: trace: %u procedures traced (%u not); %zu record "
                    "points, %u events described in .qpt.trace; each thread writes "
                    "%s.trace.TID (qp trace blocks)\n", prog_name, output, ntraced,
                    res.nmeasured - ntraced, npoints, nevents, output);
            if (trace_mem)
                fprintf(stderr, "%s: %s: trace-mem: %u data accesses described, %u values "
                        "recorded per run of their instructions (qp trace mem)\n", prog_name,
                        output, nmrefs, nmvals);
        } else {
            fprintf(stderr, "%s: %s: counters: %s (%s); %u thread hooks\n", prog_name, output,
                    mode[inc.mode], inc.why, res.nthread_hooks);
            if (weights != NULL)
                fprintf(stderr,
                        "%s: %s: --weights: over the profiled run the counters add %llu "
                        "instructions (%llu increments), the least of any spanning tree "
                        "for its counts%s\n",
                        prog_name, output, (unsigned long long)res.weighted_insns,
                        (unsigned long long)res.weighted_incs,
                        res.weighted_unknown ? " (some counters on edges it lacks)" : "");
        }
        if (res.nfork_unseen > 0 && verbose)
            fprintf(stderr, "%s: %s: %u call%s or system call%s that may fork are in code "
                    "left in place: a child forked there counts into its parent's counters\n",
                    prog_name, output, res.nfork_unseen, res.nfork_unseen == 1 ? "" : "s",
                    res.nfork_unseen == 1 ? "" : "s");
    }
    ed_plan_destroy(plan);
    drv_result_free(&res);
        drv_trace_free(tctx.tr);
        tctx.tr = NULL;
    return 0;
}

/* The calls of each procedure in an earlier qp profile: entry address -> calls, sorted. */
typedef struct entry_calls {
    uint64_t entry, calls;
} entry_calls_t;

typedef struct calls_table {
    entry_calls_t *v;
    size_t n;
} calls_table_t;

static int
cmp_entry(const void *a, const void *b)
{
    const entry_calls_t *x = a, *y = b;
    return x->entry < y->entry ? -1 : x->entry > y->entry;
}

static uint64_t
calls_at(void *arg, uint64_t entry)
{
    const calls_table_t *t = arg;
    entry_calls_t key = { entry, 0 }, *e = bsearch(&key, t->v, t->n, sizeof(key), cmp_entry);
    return e ? e->calls : 0;
}

/* --predict PROFILE: each metric's cost over a run like the one PROFILE measured. */
static int
predict(qm_set_t *set, qpt_space_t *s, const char *profile)
{
    char why[2048];
    qp_edge_count_t *v = NULL;
    size_t n = 0;
    if (qp_edge_counts_read(profile, &v, &n, why, sizeof(why)) < 0) {
        fprintf(stderr, "%s: --predict: %s\n", prog_name, why);
        return -1;
    }
    calls_table_t t = { calloc(n + 1, sizeof(entry_calls_t)), 0 };
    for (size_t i = 0; t.v != NULL && i < n; i++)
        if (v[i].kind == QP_EDGE_ENTRY)
            t.v[t.n++] = (entry_calls_t) { v[i].to, v[i].count };
    free(v);
    if (t.v == NULL)
        return -1;
    qsort(t.v, t.n, sizeof(entry_calls_t), cmp_entry);
    double cpn = qm_cycles_per_ns();
    for (size_t i = 0; i < qm_count(set); i++) {
        double ns;
        uint64_t calls;
        size_t called;
        if (qm_metric_predict(set, i, s, calls_at, &t, cpn, &ns, &calls, &called) < 0)
            continue;
        if (called == 0)
            fprintf(stderr, "%s: predicted cost of '%s': none of its procedures was called "
                    "in %s (a profile of this program?)\n", prog_name, qm_name(set, i), profile);
        else
            fprintf(stderr, "%s: predicted cost of '%s': +%.3f ms a run like %s's (%llu calls "
                    "of its procedures, %.1f ns each)\n", prog_name, qm_name(set, i), ns / 1e6,
                    profile, (unsigned long long)calls, ns / (double)calls);
    }
    free(t.v);
    return 0;
}

/*
 * The rewrite with metrics (-e, --metrics): through libqpt's public API, the metrics'
 * layout next to OUTPUT (OUTPUT.qpm) for qp metrics.
 */
static int
metrics_rewrite(qm_set_t *set, const char *input, const char *output, const char *profile)
{
    char why[2048], layout[4200];
    qpt_space_t *s = NULL;
    if (snprintf(layout, sizeof(layout), "%s.qpm", output) >= (int)sizeof(layout)) {
        fprintf(stderr, "%s: %s: name too long\n", prog_name, output);
        return EXIT_USAGE;
    }
    progress("analysing");
    int rc = qpt_open(input, &s, why, sizeof(why));
    progress(NULL);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", prog_name, why);
        return EXIT_INPUT;
    }
    if ((rc = qm_insert(set, s, tool_metrics_note, (void *)prog_name, why, sizeof(why))) < 0) {
        fprintf(stderr, "%s: %s\n", prog_name, why);
        qpt_close(s);
        return rc == QPT_EINVAL || rc == QPT_ENOTFOUND ? EXIT_USAGE : EXIT_INPUT;
    }
    if (profile != NULL && predict(set, s, profile) < 0) {
        qpt_close(s);
        return EXIT_INPUT;
    }
    progress("relocating and writing");
    rc = qpt_write(s, output);
    progress(NULL);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", prog_name, qpt_error(s));
        qpt_close(s);
        return EXIT_INPUT;
    }
    uint64_t id = qpt_written_id(s); /* its profiles carry it: matched by qp metrics */
    qpt_close(s);
    if (qm_layout_save(set, id, layout, why, sizeof(why)) < 0) {
        fprintf(stderr, "%s: %s\n", prog_name, why);
        unlink(output); /* no program whose values could not be read */
        return EXIT_INPUT;
    }
    fprintf(stderr, "%s: %s: %zu metric%s; after a run: qp metrics %s.qp\n", prog_name, output,
            qm_count(set), qm_count(set) == 1 ? "" : "s", output);
    return 0;
}

/* Analyse INPUT, then dump its analysis (DUMP) or rewrite it to OUTPUT. An exit status. */
static int
rewrite_file(const char *input, const char *output, int dump, const char *proc,
    const char *driver, int atomic, const char *weights, int verbose)
{
    cfg_image_t *img = NULL;
    char why[320];
    errno = 0;
    int rc = cfg_image_open_bfd_why(input, &img, why, sizeof(why));
    if (rc < 0 && why[0] != '\0') {
        fprintf(stderr, "%s: %s: %s\n", prog_name, input, why);
        return EXIT_INPUT;
    }
    if (rc < 0)
        return fail_input(input, rc);
    const char *unsupported = NULL;
    all_in_place = getenv("QPT_LEAVE_ALL") != NULL /* testing aid, see README */
        ? "named by QPT_LEAVE_ALL" : NULL;
    if (cfg_image_runtime(img) == CFG_RUNTIME_GO)
        all_in_place = "a Go program: its runtime finds functions by return address through "
                       ".gopclntab, so every procedure stays in place";
    else if (cfg_image_runtime(img) == CFG_RUNTIME_GHC)
        all_in_place = "a GHC program: its info tables sit right before the code they "
                       "describe, so every procedure stays in place";
    else if (dump == DUMP_NONE)
        unsupported = ed_image_unsupported(img);
    if (dump == DUMP_NONE && unsupported == NULL)
        unsupported = ed_image_rewritten(img);
    if (unsupported != NULL) {
        fprintf(stderr, "%s: %s: %s\n", prog_name, input, unsupported);
        cfg_image_destroy(img);
        return EXIT_INPUT;
    }
    cfg_prog_t *prog = NULL;
    progress("analysing");
    cfg_opts_t co = { 0 };
    tool_cfg_debug(&co); /* QP_DEBUG: development aid, see qpt-rewrite(1) */
    co.on_progress = analysis_progress;
    co.threads = nthreads;
    rc = cfg_prog_build(img, &co, &prog);
    if (dump != DUMP_NONE || rc < 0)
        progress(NULL);
    if (rc < 0) {
        cfg_image_destroy(img);
        return fail_input(input, rc);
    }
    int status = 0;
    switch (dump) {
    case DUMP_SUMMARY: tool_dump_summary(stdout, prog, verbose); break;
    case DUMP_TEXT: tool_dump_text(stdout, prog); break;
    case DUMP_DOT: {
        const cfg_proc_t *p = cfg_proc_by_name(prog, proc);
        /* Else a demangled name, with or without its parameters (the first that fits). */
        for (uint32_t i = 0; p == NULL && i < prog->nprocs; i++)
            if (cfg_name_match(proc, prog->procs[i].name, 0))
                p = &prog->procs[i];
        if (p == NULL) {
            fprintf(stderr, "%s: %s: no procedure named '%s'\n", prog_name, input, proc);
            status = EXIT_INPUT;
        } else
            tool_dump_dot(stdout, prog, p);
        break;
    }
    default: status = rewrite(prog, input, output, driver, atomic, weights, verbose); break;
    }
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "%s: writing the output failed: %s\n", prog_name, strerror(errno));
        return EXIT_INPUT;
    }
    return status;
}

/* Is library D (of a program whose dynamic linker is INTERP, LOADER its real path) one
 * --with-libs writes as DIR/NAME? 0: the dynamic linker; -1: named by a path, or not found
 * (said in a line when SAY). */
static int
lib_written(const elfw_dep_t *d, const char *interp, const char *loader, int say)
{
    char *real = d->path != NULL ? realpath(d->path, NULL) : NULL;
    int is_loader = (loader != NULL && real != NULL && strcmp(loader, real) == 0)
        || (interp != NULL && strrchr(interp, '/') != NULL
            && strcmp(d->name, strrchr(interp, '/') + 1) == 0);
    free(real);
    if (is_loader)
        return 0; /* the dynamic linker: it runs before any runtime could */
    if (strchr(d->name, '/') != NULL || strcmp(d->name, "..") == 0
        || strcmp(d->name, ".") == 0 || d->name[0] == '\0') {
        /* Loaded by its path, not searched for: a copy in DIR would not be the one
         * loaded (and such a name must never choose where a file is written). */
        if (say)
            fprintf(stderr, "%s: %s: named by a path: left as it is\n", prog_name, d->name);
        return -1;
    }
    if (d->path == NULL) {
        if (say)
            fprintf(stderr, "%s: %s: not found; the program will not find it either\n",
                prog_name, d->name);
        return -1;
    }
    return 1;
}

/*
 * --with-libs: PROGRAM and every library it loads at start, rewritten into the folder
 * DIR (created if need be; one holding other files only with --force): DIR/PROGRAM and
 * DIR/NAME for each library, as DT_NEEDED names it. Each output looks in its own folder
 * first ($ORIGIN in DT_RPATH, or DT_RUNPATH when it had one), so DIR/PROGRAM runs with the
 * rewritten libraries. A library that cannot be rewritten is named and left out (the
 * program loads the original); the dynamic linker is never rewritten.
 */
static int
rewrite_with_libs(const char *input, const char *dir, const char *driver, int atomic,
    int verbose, int force)
{
    elfw_dep_t *deps = NULL;
    size_t n = 0;
    char *interp = NULL, why[512];
    if (elfw_deps(input, &deps, &n, &interp, why, sizeof(why)) < 0) {
        fprintf(stderr, "%s: %s: %s\n", prog_name, input, why);
        return EXIT_INPUT;
    }
    struct stat st;
    int made = 0; /* the folder is ours: removed again if the program cannot be written */
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) {
            fprintf(stderr, "%s: %s: not a folder (--with-libs writes a folder)\n",
                prog_name, dir);
            elfw_deps_free(deps, n);
            free(interp);
            return EXIT_USAGE;
        }
        DIR *d = opendir(dir);
        struct dirent *e;
        int others = 0;
        while (d != NULL && (e = readdir(d)) != NULL)
            others |= strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
        if (d != NULL)
            closedir(d);
        if (others && !force) {
            fprintf(stderr, "%s: %s: the folder holds other files (--force writes into it)\n",
                prog_name, dir);
            elfw_deps_free(deps, n);
            free(interp);
            return EXIT_USAGE;
        }
    } else if (mkdir(dir, 0777) < 0) {
        fprintf(stderr, "%s: %s: cannot create the folder: %s\n", prog_name, dir,
            strerror(errno));
        elfw_deps_free(deps, n);
        free(interp);
        return EXIT_INPUT;
    } else
        made = 1;
    const char *base = strrchr(input, '/') ? strrchr(input, '/') + 1 : input;
    char out[PATH_MAX];
    int status = EXIT_INPUT;
    char *loader = interp != NULL ? realpath(interp, NULL) : NULL;
    /* DIR/NAME is what the program loads (DIR comes first in its search path): a folder,
     * FIFO or device there would be loaded instead of any library, and fail. */
    for (size_t i = 0; i < n; i++) {
        struct stat ls;
        if (lib_written(&deps[i], interp, loader, 0) == 1
            && snprintf(out, sizeof(out), "%s/%s", dir, deps[i].name) < (int)sizeof(out)
            && stat(out, &ls) == 0 && !S_ISREG(ls.st_mode)) {
            fprintf(stderr, "%s: %s: exists and is not a regular file: the program would load "
                    "it instead of %s (remove it)\n", prog_name, out, deps[i].name);
            free(loader);
            elfw_deps_free(deps, n);
            free(interp);
            return EXIT_INPUT;
        }
    }
    if (snprintf(out, sizeof(out), "%s/%s", dir, base) < (int)sizeof(out))
        status = rewrite_file(input, out, DUMP_NONE, NULL, driver, atomic, NULL, verbose);
    size_t done = 0, libs = 0;
    for (size_t i = 0; status == 0 && i < n; i++) {
        int w = lib_written(&deps[i], interp, loader, 1);
        libs += w != 0;
        if (w < 1)
            continue;
        if (snprintf(out, sizeof(out), "%s/%s", dir, deps[i].name) >= (int)sizeof(out)
            || rewrite_file(deps[i].path, out, DUMP_NONE, NULL, driver, atomic, NULL, verbose)
                != 0) {
            /* An earlier run's DIR/NAME would be loaded instead of the original. */
            int stale = unlink(out) == 0;
            fprintf(stderr, "%s: %s: left as it is%s: the program loads the original %s\n",
                prog_name, deps[i].name, stale ? " (the earlier copy in the folder removed)" : "",
                deps[i].path);
        } else
            done++;
    }
    if (status != 0 && made)
        rmdir(dir); /* nothing written: leave nothing behind */
    if (status == 0)
        fprintf(stderr, "%s: %s: %s and %zu of %zu libraries rewritten; run %s/%s%s%s\n",
            prog_name, dir, base, done, libs, dir, base,
            interp ? " (the dynamic linker " : "", interp ? "is not rewritten)" : "");
    free(loader);
    free(interp);
    elfw_deps_free(deps, n);
    return status;
}

int
main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "output", required_argument, NULL, 'o' },
        { "driver", required_argument, NULL, 'd' },
        { "dump-cfg", optional_argument, NULL, 'D' },
        { "proc", required_argument, NULL, 'p' },
        { "verbose", no_argument, NULL, 'v' },
        { "atomic", no_argument, NULL, 'a' },
        { "no-atomic", no_argument, NULL, 'A' },
        { "weights", required_argument, NULL, 'w' },
        { "predict", required_argument, NULL, 'P' },
        { "metric", required_argument, NULL, 'e' },
        { "metrics", required_argument, NULL, 'M' },
        { "debug-dir", required_argument, NULL, 'g' },
        { "call-targets", no_argument, NULL, 'T' },
        { "trace-mem", no_argument, NULL, 'm' },
        { "with-libs", no_argument, NULL, 'L' },
        { "force", no_argument, NULL, 'F' },
        { "threads", required_argument, NULL, 'j' },
        { "keep-old-text", no_argument, NULL, 'K' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    const char *output = NULL, *driver = "qp", *proc = NULL, *weights = NULL, *profile = NULL;
    int dump = DUMP_NONE, verbose = 0, atomic = -1, c; /* atomic -1: decide */
    int driver_given = 0, force = 0;
    const char **margs = calloc((size_t)argc + 1, sizeof(char *));
    char *morder = calloc((size_t)argc + 1, 1);
    size_t nm = 0;
    if (margs == NULL || morder == NULL)
        return fail_input("-", QP_ENOMEM);
    tool_heap_setup();
    opterr = 0; /* tool_option_error says it in one line */
    while ((c = getopt_long(argc, argv, ":o:vhVe:", longopts, NULL)) != -1) {
        switch (c) {
        case 'e':
        case 'M':
            margs[nm] = optarg;
            morder[nm++] = c == 'e' ? 'e' : 'f';
            break;
        case 'o': output = optarg; break;
        case 'd': driver = optarg; driver_given = 1; break;
        case 'p': proc = optarg; break;
        case 'v': verbose = 1; break;
        case 'a': atomic = 1; break;
        case 'A': atomic = 0; break;
        case 'w': weights = optarg; break;
        case 'P': profile = optarg; break;
        case 'T': call_targets = 1; break;
        case 'm': trace_mem = 1; break;
        case 'L': with_libs = 1; break;
        case 'F': force = 1; break;
        case 'K': keep_old_text = 1; break;
        case 'j': {
            char *end;
            unsigned long v = strtoul(optarg, &end, 10);
            if (end == optarg || *end != '\0' || v < 1 || v > 16 || optarg[0] == '-') {
                fprintf(stderr, "%s: --threads: '%s' is not a number from 1 to 16\n",
                        prog_name, optarg);
                return EXIT_USAGE;
            }
            nthreads = (unsigned)v;
            break;
        }
        case 'g':
            if (cfg_set_debug_dirs(optarg) < 0)
                return fail_input("-", QP_ENOMEM);
            break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("qpt-rewrite (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION); return 0;
        case 'D':
            if (optarg == NULL || strcmp(optarg, "summary") == 0)
                dump = DUMP_SUMMARY;
            else if (strcmp(optarg, "text") == 0)
                dump = DUMP_TEXT;
            else if (strcmp(optarg, "dot") == 0)
                dump = DUMP_DOT;
            else {
                fprintf(stderr, "%s: --dump-cfg: unknown kind '%s' (summary, text, dot)\n",
                        prog_name, optarg);
                return EXIT_USAGE;
            }
            break;
        default: return tool_option_error(prog_name, argv, c);
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "%s: %s (try --help)\n", prog_name,
                optind >= argc ? "missing INPUT" : "more than one INPUT");
        return EXIT_USAGE;
    }
    const char *input = argv[optind];
    if (nthreads == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        nthreads = cpus < 1 ? 1 : cpus > 8 ? 8 : (unsigned)cpus;
    }
    if (strcmp(driver, "qp") != 0 && strcmp(driver, "naive") != 0 && strcmp(driver, "none") != 0
        && strcmp(driver, "trace") != 0 && strcmp(driver, "trace-naive") != 0) {
        fprintf(stderr, "%s: --driver: unknown driver '%s' (qp, naive, trace, trace-naive, none)\n",
                prog_name, driver);
        return EXIT_USAGE;
    }
    if (trace_mem && strcmp(driver, "trace") != 0 && strcmp(driver, "trace-naive") != 0) {
        fprintf(stderr, "%s: --trace-mem needs --driver=trace or --driver=trace-naive\n",
                prog_name);
        return EXIT_USAGE;
    }
    if (dump == DUMP_DOT && proc == NULL) {
        fprintf(stderr, "%s: --dump-cfg=dot needs --proc NAME\n", prog_name);
        return EXIT_USAGE;
    }
    if (dump == DUMP_NONE && output == NULL) {
        fprintf(stderr, "%s: missing -o OUTPUT (try --help)\n", prog_name);
        return EXIT_USAGE;
    }
    if (with_libs && (dump != DUMP_NONE || nm > 0 || weights != NULL)) {
        fprintf(stderr, "%s: --with-libs: not with %s\n", prog_name,
            dump != DUMP_NONE ? "--dump-cfg" : nm > 0 ? "-e/--metrics" : "--weights");
        return EXIT_USAGE;
    }
    if (force && !with_libs) {
        fprintf(stderr, "%s: --force applies to --with-libs\n", prog_name);
        return EXIT_USAGE;
    }
    if (profile != NULL && nm == 0) {
        fprintf(stderr, "%s: --predict applies to metrics (-e, --metrics)\n", prog_name);
        return EXIT_USAGE;
    }
    /* An output that cannot be written fails now, not after a minute of analysis (the
     * output is written beside it and renamed: its folder must take a new file). */
    if (dump == DUMP_NONE && output != NULL && !with_libs && !tool_writable(output, 1)) {
        fprintf(stderr, "%s: %s: cannot write %s: %s\n", prog_name, input, output,
                strerror(errno));
        return EXIT_INPUT;
    }
    if (nm > 0) {
        /* Metrics replace the edge profile: one or the other in a rewrite. */
        if (dump != DUMP_NONE || driver_given || weights != NULL || atomic != -1) {
            fprintf(stderr, "%s: -e/--metrics measure the metrics only: not with %s\n",
                    prog_name, dump != DUMP_NONE ? "--dump-cfg" : driver_given ? "--driver"
                    : weights != NULL ? "--weights" : "--atomic/--no-atomic");
            return EXIT_USAGE;
        }
        qm_set_t *set = NULL;
        if (tool_metrics_parse(prog_name, margs, morder, nm, &set) < 0)
            return EXIT_USAGE;
        remove_tmp_on_signals();
        show_progress = isatty(STDERR_FILENO) && !verbose;
        int st = metrics_rewrite(set, input, output, profile);
        qm_free(set);
        free(margs);
        free(morder);
        return st;
    }
    free(margs);
    free(morder);
    remove_tmp_on_signals();
    show_progress = dump == DUMP_NONE && isatty(STDERR_FILENO) && !verbose;
    if (with_libs)
        return rewrite_with_libs(input, output, driver, atomic, verbose, force);
    return rewrite_file(input, output, dump, proc, driver, atomic, weights, verbose);
}
