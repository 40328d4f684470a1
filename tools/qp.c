/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * qp: the report tool. Reads the profiles an instrumented program wrote and the
 * description (.qpt.desc) in the instrumented executable (of each module: a program and
 * the rewritten libraries it loaded write one profile each), and prints a flat profile,
 * per-block or per-edge counts, annotated disassembly, DOT graphs or an lcov tracefile;
 * or merges profiles. Option parsing, loading and messages only: the counts come from
 * libqpt (include/qpt/qpt_qp.h). Errors are one line, `qp: PATH: why`; exit 0 ok, 1 bad input,
 * 2 usage.
 */
#include "config.h"

#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "include/qpt/qpt_qp.h"
#include "tools/qp_tool.h"
#include "tools/tool.h"

enum { EXIT_INPUT = 1, EXIT_USAGE = 2 };

/* What `qp report` prints. */
enum {
    OUT_FLAT, OUT_CSV, OUT_BLOCKS, OUT_EDGES, OUT_ANNOTATE, OUT_DOT, OUT_LCOV,
    OUT_PPROF,
    OUT_CALLERS, OUT_CALLEES, OUT_CALLGRAPH, OUT_CALLGRIND, OUT_BOLT,
};

typedef struct qp_args {
    int cmd_merge;          /* qp merge */
    int out;                /* OUT_* */
    const char *func;       /* procedure for --blocks/--edges/--annotate/--dot, or NULL */
    int func_pending;       /* --blocks/--edges given without =FUNC: maybe the next word */
    const char *exe;        /* --exe */
    const char *original;   /* --original */
    const char *output;     /* -o */
    int verbose;
    uint32_t limit;         /* --limit */
    double min_pct;         /* --min */
    int mangled;            /* --mangled */
    char **files;           /* the profiles */
    int nfiles;
} qp_args_t;

/*****************************************************************************
 * Progress on a terminal: the phase of a long report, overwritten in place
 */

static int show_progress; /* stderr is a terminal */

static void
progress(const char *phase)
{
    if (!show_progress)
        return;
    if (phase != NULL)
        fprintf(stderr, "\rqp: %s...\033[K", phase);
    else
        fprintf(stderr, "\r\033[K");
    fflush(stderr);
    tool_signal_progress(phase != NULL); /* the SIGBUS line erases only a progress line */
}

static void
usage(FILE *f)
{
    fprintf(f,
            "Usage: qp report [OPTIONS] PROFILE...\n"
            "       qp merge -o OUTPUT PROFILE...\n"
            "       qp metrics [OPTIONS] PROFILE...   (qp metrics --help)\n"
            "\n"
            "Report the counts that a program rewritten by qpt-rewrite (--driver=qp or naive)\n"
            "wrote to its profile (a.inst.qp). Several profiles of one executable are summed;\n"
            "those of several modules (a program and the libraries it loaded, each rewritten)\n"
            "give one flat profile of them all, and FUNC may be given as MODULE:FUNC.\n"
            "\n"
            "Report options (default: a flat profile of procedures):\n"
            "      --exe=FILE         the instrumented executable (default: the one the\n"
            "                         profile names)\n"
            "      --csv              name,calls,instructions lines, in flat-profile order\n"
            "                         (module,name,... for several modules)\n"
            "      --blocks[=FUNC]    per-block counts of FUNC (default: every procedure that ran)\n"
            "      --edges[=FUNC]     per-edge counts, measured or reconstructed, and any\n"
            "                         violation of flow conservation\n"
            "      --annotate=FUNC    disassembly of FUNC with the count of every instruction\n"
            "      --original=FILE    with --annotate, --bolt, --pprof: the original,\n"
            "                         uninstrumented executable (its code and build-id)\n"
            "      --dot=FUNC         Graphviz DOT of FUNC's control-flow graph with counts\n"
            "      --lcov             an lcov tracefile from the DWARF line information\n"
            "      --callers=FUNC     who called FUNC how often (per caller; calls through\n"
            "                         pointers or from unmeasured code in one line)\n"
            "      --callees=FUNC     what FUNC called how often, with inclusive counts\n"
            "      --call-graph       every procedure by inclusive instructions (itself and\n"
            "                         what it called), with its callees\n"
            "      --callgrind        the profile in callgrind's format (callgrind_annotate,\n"
            "                         KCachegrind)\n"
            "      --bolt             the edge and call counts as BOLT's .fdata (llvm-bolt\n"
            "                         -data=FILE lays the program out by them)\n"
            "      --pprof            the profile as pprof's gzip'd profile.proto (needs -o\n"
            "                         FILE or a redirected standard output)\n"
            "  -o, --output=FILE      write to FILE instead of standard output\n"
            "  -v, --verbose          list procedures not measured, and those that never ran\n"
            "      --limit=N          the flat profile's tables: the first N rows only\n"
            "      --min=PCT          ... only the procedures with PCT%% of the instructions\n"
            "                         or more (what is left out is summed in one line);\n"
            "                         with --dot: blocks run less than PCT%% as often as\n"
            "                         the hottest collapse into one node\n"
            "      --mangled          print C++/Rust names as stored (default: demangled;\n"
            "                         FUNC may be given either way, with or without the\n"
            "                         parameters)\n"
            "  -h, --help             print this help and exit\n"
            "  -V, --version          print the version and exit\n"
            "\n"
            "Exit status: 0 success, 1 an input could not be used, 2 usage error.\n");
}

static int
usage_error(const char *msg, const char *arg)
{
    if (arg != NULL)
        fprintf(stderr, "qp: %s '%s' (try --help)\n", msg, arg);
    else
        fprintf(stderr, "qp: %s (try --help)\n", msg);
    return EXIT_USAGE;
}

static int
fail(const char *path, const char *why)
{
    progress(NULL);
    fprintf(stderr, "qp: %s: %s\n", path, why);
    return EXIT_INPUT;
}

/* A failure of libqpt's whose WHY names the file ("PATH: why"). */
static int
fail_why(const char *why)
{
    progress(NULL);
    fprintf(stderr, "qp: %s\n", why);
    return EXIT_INPUT;
}

/*****************************************************************************
 * Options
 */

static int
set_out(qp_args_t *a, int out, const char *func)
{
    if (a->out != OUT_FLAT && a->out != out)
        return usage_error("only one of --csv, --blocks, --edges, --annotate, --dot, --lcov, "
                           "--callers, --callees, --call-graph, --callgrind, --bolt, --pprof", NULL);
    a->out = out;
    a->func = func;
    a->func_pending = (out == OUT_BLOCKS || out == OUT_EDGES) && func == NULL;
    return 0;
}

static int
is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static int
parse_args(int argc, char **argv, qp_args_t *a)
{
    static const struct option longopts[] = {
        { "exe", required_argument, NULL, 'e' },
        { "csv", no_argument, NULL, 'c' },
        { "blocks", optional_argument, NULL, 'b' },
        { "edges", optional_argument, NULL, 'g' },
        { "annotate", required_argument, NULL, 'a' },
        { "original", required_argument, NULL, 'O' },
        { "dot", required_argument, NULL, 'd' },
        { "lcov", no_argument, NULL, 'l' },
        { "callers", required_argument, NULL, 'C' },
        { "callees", required_argument, NULL, 'E' },
        { "call-graph", no_argument, NULL, 'G' },
        { "callgrind", no_argument, NULL, 'K' },
        { "bolt", no_argument, NULL, 'B' },
        { "pprof", no_argument, NULL, 'P' },
        { "output", required_argument, NULL, 'o' },
        { "verbose", no_argument, NULL, 'v' },
        { "limit", required_argument, NULL, 'L' },
        { "min", required_argument, NULL, 'm' },
        { "mangled", no_argument, NULL, 'M' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    memset(a, 0, sizeof(*a));
    if (argc >= 2 && strcmp(argv[1], "merge") == 0)
        a->cmd_merge = 1;
    else if (argc < 2 || strcmp(argv[1], "report") != 0) {
        /* Only --help and --version work without a command. */
        if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
            usage(stdout);
            return -1;
        }
        if (argc >= 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
            printf("qp (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
            return -1;
        }
        return argc < 2 ? usage_error("missing command (report, merge, metrics or trace)", NULL)
                        : usage_error("unknown command", argv[1]);
    }
    int c, rc = 0;
    optind = 2;
    opterr = 0; /* our own one-line messages */
    while (rc == 0 && (c = getopt_long(argc, argv, ":o:vhV", longopts, NULL)) != -1) {
        switch (c) {
        case 'e': a->exe = optarg; break;
        case 'c': rc = set_out(a, OUT_CSV, NULL); break;
        case 'b': rc = set_out(a, OUT_BLOCKS, optarg); break;
        case 'g': rc = set_out(a, OUT_EDGES, optarg); break;
        case 'a': rc = set_out(a, OUT_ANNOTATE, optarg); break;
        case 'd': rc = set_out(a, OUT_DOT, optarg); break;
        case 'l': rc = set_out(a, OUT_LCOV, NULL); break;
        case 'C': rc = set_out(a, OUT_CALLERS, optarg); break;
        case 'E': rc = set_out(a, OUT_CALLEES, optarg); break;
        case 'G': rc = set_out(a, OUT_CALLGRAPH, NULL); break;
        case 'K': rc = set_out(a, OUT_CALLGRIND, NULL); break;
        case 'B': rc = set_out(a, OUT_BOLT, NULL); break;
        case 'P': rc = set_out(a, OUT_PPROF, NULL); break;
        case 'O': a->original = optarg; break;
        case 'o': a->output = optarg; break;
        case 'v': a->verbose = 1; break;
        case 'L': {
            char *end;
            unsigned long v = strtoul(optarg, &end, 10);
            if (end == optarg || *end != '\0' || v > UINT32_MAX || optarg[0] == '-')
                return usage_error("--limit: not a number of rows", optarg);
            a->limit = (uint32_t)v;
            break;
        }
        case 'm': {
            char *end;
            double v = strtod(optarg, &end);
            if (end == optarg || (*end != '\0' && strcmp(end, "%") != 0) || !(v >= 0) || v > 100)
                return usage_error("--min: not a percentage", optarg);
            a->min_pct = v;
            break;
        }
        case 'M': a->mangled = 1; break;
        case 'h': usage(stdout); return -1;
        case 'V': printf("qp (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION); return -1;
        case ':': return usage_error("missing argument to", argv[optind - 1]);
        default: return usage_error("unknown option", argv[optind - 1]);
        }
    }
    if (rc != 0)
        return rc;
    a->files = argv + optind;
    a->nfiles = argc - optind;
    /* `--blocks FUNC PROFILE`: a first word that is no file, followed by profiles. */
    if (a->func_pending && a->nfiles >= 2 && !is_file(a->files[0])) {
        a->func = a->files[0];
        a->files++;
        a->nfiles--;
    }
    if (a->nfiles == 0)
        return usage_error("missing PROFILE", NULL);
    if (a->cmd_merge && (a->output == NULL || a->out != OUT_FLAT || a->exe || a->original))
        return usage_error(a->output == NULL ? "merge needs -o OUTPUT"
                                             : "merge takes only -o OUTPUT and profiles",
                           NULL);
    if (a->out == OUT_PPROF && a->output == NULL && isatty(STDOUT_FILENO))
        return usage_error("--pprof writes binary data: give -o FILE", NULL);
    if (a->original && a->out != OUT_ANNOTATE && a->out != OUT_BOLT && a->out != OUT_PPROF)
        return usage_error("--original goes with --annotate, --bolt or --pprof", NULL);
    return 0;
}

/*****************************************************************************
 * Loading
 */

/*
 * One module of the report: a program or a shared library that was rewritten, and the
 * profiles it wrote (libqpt's module, loaded as one program's are).
 */
typedef struct module {
    qpt_qp_t *qp;             /* the module */
    const char *exe;          /* its file: what its first profile names, or --exe */
    const char *label;        /* the module column: the file name, or the path when
                               * two modules share a file name */
    int is_library;           /* a shared library (once loaded) */
    qp_inputs_t in;           /* what the printers see */
} module_t;

/* Before a refusal of qp's own while the counters of the profiles S read are still
 * read on another thread (QPT_QP_BACKGROUND): that read's failure, said instead (it came
 * first when they were read at once); 0 when it read them. */
static int
read_failed(qpt_qp_set_t *s)
{
    char why[1024];
    return qpt_qp_set_wait(s, why, sizeof(why)) < 0 ? fail_why(why) : 0;
}

/* The modules of S, each with its file. */
static int
modules_of(qpt_qp_set_t *s, module_t **mods, int *nmods, const char *first)
{
    *nmods = (int)qpt_qp_set_count(s);
    *mods = calloc((size_t)*nmods + 1, sizeof(module_t));
    if (*mods == NULL)
        return read_failed(s) ? EXIT_INPUT : fail(first, qpt_strerror(QPT_ENOMEM));
    for (int k = 0; k < *nmods; k++) {
        (*mods)[k].qp = qpt_qp_set_module(s, (uint32_t)k);
        (*mods)[k].exe = qpt_qp_exe((*mods)[k].qp);
    }
    return 0;
}

/*****************************************************************************
 * Commands
 */

static int
cmd_merge(const qp_args_t *a)
{
    char why[1024];
    qpt_qp_set_t *s;
    if (qpt_qp_set_read((const char *const *)a->files, a->nfiles, NULL, QPT_QP_ONE, &s, why,
                        sizeof(why)) < 0)
        return fail_why(why);
    int st = qpt_qp_set_merge(s, a->output, why, sizeof(why)) < 0 ? fail_why(why) : 0;
    qpt_qp_set_free(s);
    return st;
}

/* The procedure FUNC names, or an error line. */
static int
find_func(const qp_inputs_t *in, const char *func, uint32_t *proc)
{
    *proc = QPT_QP_NONE;
    if (func == NULL)
        return 0;
    char why[1024];
    return qpt_qp_find_measured(in->qp, func, proc, why, sizeof(why)) < 0 ? fail(in->exe, why)
                                                                          : 0;
}

/* The call graph views: the graph built once here. */
static int
print_calls(FILE *f, const qp_args_t *a, const qp_inputs_t *in)
{
    qpt_qp_calls_t *cg;
    if (qpt_qp_calls(in->qp, &cg) < 0)
        return fail(in->exe, qpt_strerror(QPT_ENOMEM));
    uint32_t proc = QPT_QP_NONE;
    int st = a->out == OUT_CALLEES ? find_func(in, a->func, &proc) : 0;
    if (st == 0) {
        switch (a->out) {
        case OUT_CALLERS: st = qp_print_callers(f, in, cg, a->func); break;
        case OUT_CALLEES: st = qp_print_callees(f, in, cg, proc); break;
        case OUT_CALLGRAPH: st = qp_print_callgraph(f, in, cg); break;
        case OUT_BOLT: st = qp_print_bolt(f, in, cg); break;
        default: st = qp_print_callgrind(f, in, cg); break;
        }
    }
    qpt_qp_calls_free(cg);
    return st;
}

static int
print_report(FILE *f, const qp_args_t *a, const qp_inputs_t *in)
{
    if (a->out >= OUT_CALLERS)
        return print_calls(f, a, in);
    uint32_t proc;
    int st = find_func(in, a->func, &proc);
    if (st != 0)
        return st;
    switch (a->out) {
    case OUT_CSV: qp_print_csv(f, in); return 0;
    case OUT_BLOCKS: return qp_print_blocks(f, in, proc);
    case OUT_EDGES: return qp_print_edges(f, in, proc);
    case OUT_ANNOTATE: return qp_print_annotate(f, in, proc);
    case OUT_DOT: return qp_print_dot(f, in, proc);
    case OUT_LCOV: return qp_print_lcov(f, in);
    case OUT_PPROF: return qp_print_pprof(f, in);
    default: qp_print_flat(f, in); return 0;
    }
}

/* Is OUTPUT, if it exists, the same file as PATH? */
static int
same_file(const char *output, const char *path)
{
    struct stat o, p;
    return stat(output, &o) == 0 && stat(path, &p) == 0 && o.st_dev == p.st_dev
        && o.st_ino == p.st_ino;
}

/* Open -o FILE (written beside it, renamed when complete), or standard output, as T. -o
 * never replaces an input (a profile, or the file of one of the NMODS modules MODS). */
static int
output_open(const qp_args_t *a, const module_t *mods, int nmods, tool_out_t *t)
{
    for (int k = 0; a->output != NULL && k < nmods; k++)
        if (same_file(a->output, mods[k].exe))
            return fail(a->output, mods[k].is_library ? "is a library read: not overwritten"
                                                      : "is the executable: not overwritten");
    for (int i = 0; a->output != NULL && i < a->nfiles; i++)
        if (same_file(a->output, a->files[i]))
            return fail(a->output, "is a profile read: not overwritten");
    return tool_out_open(t, "qp", a->output) < 0 ? EXIT_INPUT : 0;
}

/* Close what output_open opened, ST being the printer's status: a failed write is an
 * error, and a failed report leaves -o FILE as it was. */
static int
output_close(tool_out_t *t, int st)
{
    if (tool_out_close(t, "qp", st == 0) < 0 && st == 0)
        st = EXIT_INPUT;
    return st;
}

/* The phases of loading (libqpt's, and reading the profiles), on the terminal; the test
 * hook QPT_TEST_STOP_AT stops as one starts. The heap's free pages go back then: the
 * walk over chromium's procedures left 53 MB of them, under the report's peak. */
static void
load_progress(void *arg, const char *phase)
{
    (void)arg;
    progress(phase);
    tool_heap_release();
    tool_test_stop(phase);
}

/* Load module M: its file, its description, its profiles summed and checked, its
 * report. */
static int
load_module(const qp_args_t *a, qpt_qp_set_t *set, module_t *m)
{
    uint32_t nfiles;
    const char *const *files = qpt_qp_files(m->qp, &nfiles);
    if (a->exe == NULL && access(m->exe, F_OK) != 0) {
        /* The profile names where the program ran; it may have moved since. */
        int saved = errno;
        if (read_failed(set))
            return EXIT_INPUT;
        errno = saved;
        progress(NULL);
        fprintf(stderr, "qp: %s: %s (the executable %s names; use --exe)\n", m->exe,
                strerror(errno), files[0]);
        return EXIT_INPUT;
    }
    /* The flat profile (and --csv) needs the blocks and edges of the procedures that
     * ran, and of those whose summary the description does not give; every other
     * output reads them all. */
    int lazy = a->out == OUT_FLAT || a->out == OUT_CSV;
    char why[1024];
    if (qpt_qp_load(m->qp, lazy ? QPT_QP_LAZY : 0, load_progress, NULL, why, sizeof(why)) < 0)
        return fail_why(why);
    qpt_qp_info_t info;
    qpt_qp_info(m->qp, &info);
    m->is_library = info.is_library;
    return 0;
}

/* What the printers see of the loaded module M. */
static void
module_inputs(const qp_args_t *a, module_t *m)
{
    uint32_t nfiles;
    const char *const *files = qpt_qp_files(m->qp, &nfiles);
    /* C++, Rust and D names demangled, unless --mangled (callgrind's files too, as
     * callgrind writes them); lcov keeps them as stored (genhtml --demangle-cpp does it,
     * as for gcov's), BOLT needs its symbols. */
    int demangle = !a->mangled && a->out != OUT_LCOV && a->out != OUT_BOLT;
    int qualify = a->out != OUT_LCOV && a->out != OUT_CALLGRIND && a->out != OUT_BOLT
        && a->out != OUT_CSV;
    qpt_qp_name(m->qp, (demangle ? QPT_QP_DEMANGLE : 0) | (qualify ? QPT_QP_QUALIFY : 0));
    /* Names known only as a callee's or a symbol's are demangled whenever the
     * procedures were named (as qp has always printed them). */
    m->in = (qp_inputs_t) { m->qp, m->exe, files, (int)nfiles, a->verbose, a->limit,
                            a->min_pct, demangle || qualify };
}

/* Print the report of module M, one of the NMODS modules MODS. */
static int
report_module(const qp_args_t *a, const module_t *mods, int nmods, const module_t *m)
{
    tool_out_t t;
    int st = output_open(a, mods, nmods, &t);
    return st != 0 ? st : output_close(&t, print_report(t.f, a, &m->in));
}

/*****************************************************************************
 * Several modules: a program and the libraries it loaded
 */

/* Each module's label: its file name, or its path when another module has that name. */
static void
set_labels(module_t *mods, int n)
{
    for (int k = 0; k < n; k++) {
        const char *slash = strrchr(mods[k].exe, '/');
        mods[k].label = slash != NULL ? slash + 1 : mods[k].exe;
    }
    for (int k = 0; k < n; k++)
        for (int j = 0; j < n; j++)
            if (j != k && strcmp(mods[j].label, mods[k].label) == 0)
                mods[k].label = mods[k].exe;
}

/* The labels of MODS (those of SEL when not NULL) as "a, b, c" in BUF. */
static const char *
list_labels(const module_t *mods, int n, const uint8_t *sel, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int k = 0; k < n && at < len; k++)
        if (sel == NULL || sel[k])
            at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? ", " : "", mods[k].label);
    return buf;
}

/* The outputs that show one module: refused (2) without FUNC to choose it. */
static int
check_several(const qp_args_t *a, qpt_qp_set_t *set, module_t *mods, int n)
{
    static const char *const opt[] = {
        [OUT_BLOCKS] = "--blocks without =FUNC", [OUT_EDGES] = "--edges without =FUNC",
        [OUT_LCOV] = "--lcov", [OUT_PPROF] = "--pprof", [OUT_CALLGRAPH] = "--call-graph",
        [OUT_CALLGRIND] = "--callgrind", [OUT_BOLT] = "--bolt",
    };
    set_labels(mods, n);
    if (a->out == OUT_FLAT || a->out == OUT_CSV || a->func != NULL)
        return 0;
    if (read_failed(set))
        return EXIT_INPUT;
    char buf[512];
    progress(NULL);
    fprintf(stderr, "qp: %s takes the profiles of one module; these are of %d (%s)%s\n",
            opt[a->out], n, list_labels(mods, n, NULL, buf, sizeof(buf)),
            a->out == OUT_BLOCKS || a->out == OUT_EDGES ? ": give =MODULE:FUNC" : "");
    return EXIT_USAGE;
}

static int
has_proc(const qp_inputs_t *in, const char *func)
{
    return qpt_qp_find(in->qp, func) != QPT_QP_NONE;
}

/*
 * The module *K whose procedure FUNC names, and *REST the name within it: MODULE:NAME
 * (MODULE a shell pattern for the module's path or file name), or a NAME (or a source
 * FILE:NAME) that one module only has. Where the pattern names several modules, the
 * one that has NAME.
 */
static int
select_module(const module_t *mods, int n, const char *func, int *k, const char **rest)
{
    uint8_t *sel = calloc((size_t)n, 1);
    if (sel == NULL)
        return fail(func, qpt_strerror(QPT_ENOMEM));
    int nsel = 0;
    const char *sep = qpt_module_sep(func);
    for (int i = 0; i < n; i++) {
        sel[i] = sep != NULL && qpt_qp_path_matches(func, (size_t)(sep - func), mods[i].exe);
        nsel += sel[i];
    }
    int by_pattern = nsel > 0;
    *rest = by_pattern ? sep + 1 : func;
    if (nsel != 1) {
        nsel = 0;
        for (int i = 0; i < n; i++) {
            sel[i] = (!by_pattern || sel[i]) && has_proc(&mods[i].in, *rest);
            nsel += sel[i];
        }
    }
    for (*k = 0; *k < n - 1 && !sel[*k]; ++*k)
        ;
    char list[512], why[1024];
    if (nsel != 1)
        snprintf(why, sizeof(why), nsel == 0 ? "no such procedure in %s"
                                             : "is in several modules (%s): give MODULE:NAME",
                 list_labels(mods, n, nsel ? sel : NULL, list, sizeof(list)));
    free(sel);
    return nsel == 1 ? 0 : fail(func, why);
}

/* The modules in the order of the report: the programs first, then the libraries. */
static void
report_order(const module_t *mods, int n, const module_t **order)
{
    int at = 0;
    for (int lib = 0; lib < 2; lib++)
        for (int k = 0; k < n; k++)
            if (mods[k].is_library == lib)
                order[at++] = &mods[k];
}

/* The flat profile or the CSV over the N modules MODS. */
static int
print_several(const qp_args_t *a, const module_t *mods, int n)
{
    const module_t **order = malloc((size_t)n * sizeof(*order));
    qp_inputs_t *ins = malloc((size_t)n * sizeof(*ins));
    const char **labels = malloc((size_t)n * sizeof(*labels));
    qpt_qp_t **qps = malloc((size_t)n * sizeof(*qps));
    qpt_qp_process_t *pr = NULL;
    int st = order && ins && labels && qps ? 0 : fail(mods[0].exe, qpt_strerror(QPT_ENOMEM));
    if (st == 0) {
        report_order(mods, n, order);
        for (int k = 0; k < n; k++) {
            ins[k] = order[k]->in;
            labels[k] = order[k]->label;
            qps[k] = order[k]->qp;
        }
        if (qpt_qp_process(qps, (uint32_t)n, &pr) < 0)
            st = fail(mods[0].exe, qpt_strerror(QPT_ENOMEM));
    }
    tool_out_t t;
    if (st == 0 && (st = output_open(a, mods, n, &t)) == 0) {
        qp_modules_t qm = { ins, labels, (uint32_t)n, pr };
        if (a->out == OUT_CSV)
            qp_print_csv_modules(t.f, &qm);
        else
            qp_print_flat_modules(t.f, &qm);
        st = output_close(&t, 0);
    }
    qpt_qp_process_free(pr);
    free(order);
    free(ins);
    free(labels);
    free(qps);
    return st;
}

/* The report over several modules: a flat profile or CSV over them all, or what FUNC
 * names in one of them. */
static int
report_several(const qp_args_t *a, module_t *mods, int n)
{
    /* What one module saw of a throw or a longjmp holds for every module's frames. */
    qpt_qp_t **qps = malloc((size_t)n * sizeof(*qps));
    if (qps == NULL)
        return fail(mods[0].exe, qpt_strerror(QPT_ENOMEM));
    for (int k = 0; k < n; k++)
        qps[k] = mods[k].qp;
    qpt_qp_mark_leaving_all(qps, (uint32_t)n);
    free(qps);
    if (a->func == NULL)
        return print_several(a, mods, n);
    int k = 0;
    qp_args_t one = *a;
    int st = select_module(mods, n, a->func, &k, &one.func);
    return st != 0 ? st : report_module(&one, mods, n, &mods[k]);
}

static int
cmd_report(const qp_args_t *a)
{
    module_t *mods = NULL;
    int nmods = 0;
    qpt_qp_set_t *set = NULL;
    char why[1024];
    /* Loading chromium's profile takes seconds: say which phase runs (not with -v,
     * whose lines go to stderr too). */
    show_progress = isatty(STDERR_FILENO) && !a->verbose;
    load_progress(NULL, "reading the profiles");
    int st = 0;
    /* The counters are read (0.4 s of chromium's) while the executable is opened and its
     * description read. */
    if (qpt_qp_set_read((const char *const *)a->files, a->nfiles, a->exe, QPT_QP_BACKGROUND,
                        &set, why, sizeof(why)) < 0)
        st = fail_why(why);
    if (st == 0)
        st = modules_of(set, &mods, &nmods, a->files[0]);
    if (st == 0 && nmods > 1)
        st = check_several(a, set, mods, nmods);
    for (int k = 0; st == 0 && k < nmods; k++)
        st = load_module(a, set, &mods[k]);
    if (st == 0 && a->original && qpt_qp_set_original(set, a->original, why, sizeof(why)) < 0)
        st = fail_why(why);
    progress("naming the procedures");
    for (int k = 0; st == 0 && k < nmods; k++)
        module_inputs(a, &mods[k]);
    progress(NULL); /* the report may go to the terminal too */
    if (st == 0)
        st = nmods == 1 ? report_module(a, mods, 1, &mods[0]) : report_several(a, mods, nmods);
    free(mods);
    qpt_qp_set_free(set);
    return st;
}

/*
 * BFD 2.40 does not free the .debug_rnglists it reads for line lookups (fixed in 2.41):
 * not ours, so LeakSanitizer is told (this hook is unused without sanitizers).
 */
const char *__lsan_default_suppressions(void);
const char *
__lsan_default_suppressions(void)
{
    return "leak:libbfd\n";
}

const char *__lsan_default_options(void);
const char *
__lsan_default_options(void)
{
    return "print_suppressions=0";
}

int
main(int argc, char **argv)
{
    /* The executables (their descriptions, code and lines) are read through mappings: one
     * truncated meanwhile ends qp in one line (the profiles are read, not mapped). */
    tool_signal_setup("qp", "changed while it was read");
    if (argc >= 2 && strcmp(argv[1], "metrics") == 0)
        return qp_metrics_main(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "trace") == 0)
        return qp_trace_main(argc, argv);
    qp_args_t a;
    int rc = parse_args(argc, argv, &a);
    if (rc < 0)
        return 0; /* --help or --version */
    if (rc != 0)
        return rc;
    return a.cmd_merge ? cmd_merge(&a) : cmd_report(&a);
}
