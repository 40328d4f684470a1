/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * qp: the report tool. Reads the profiles an instrumented program wrote and the
 * description (.qpt.desc) in the instrumented executable (of each module: a program and
 * the rewritten libraries it loaded write one profile each), and prints a flat profile,
 * per-block or per-edge counts, annotated disassembly, DOT graphs or an lcov tracefile;
 * or merges profiles. Option parsing, loading and messages only: the counts come from
 * report/qp_report.h. Errors are one line, `qp: PATH: why`; exit 0 ok, 1 bad input,
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

#include "report/qp_report.h"
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

/* Read every profile into PS (A->nfiles entries, zeroed by the caller). */
static int
read_profiles(const qp_args_t *a, qp_profile_t *ps)
{
    char why[512];
    for (int i = 0; i < a->nfiles; i++)
        if (qp_profile_read(a->files[i], &ps[i], why, sizeof(why)) < 0)
            return fail(a->files[i], why);
    return 0;
}

/*
 * One module of the report: a program or a shared library that was rewritten, and the
 * profiles it wrote. The inputs of each module are loaded as one program's are.
 */
typedef struct module {
    const char *exe;          /* the file: what its first profile names, or --exe */
    uint64_t id;              /* its first profile's description id */
    const char **files;       /* its profiles, in the order given */
    qp_profile_t **ps;        /* ... as read (not owned; their counters are freed once
                               * summed into prof) */
    int nfiles;               /* how many */
    const char *label;        /* the module column: the file name, or the path when
                               * two modules share a file name */
    cfg_image_t *img;         /* the file's image */
    qp_desc_t desc;           /* its description */
    qp_profile_t prof;        /* the sum of its profiles */
    qp_unwinder_t *unw;       /* for the exit dumps, or NULL */
    qp_report_t rep;          /* its report */
    qp_inputs_t in;           /* what the printers see */
} module_t;

/* Sum M's profiles into M->prof; with D, every profile must belong to it first. */
static int
merge_profiles(module_t *m, const qp_desc_t *d)
{
    char why[512];
    for (int i = 0; i < m->nfiles; i++) {
        if (d != NULL && qp_profile_check(m->ps[i], d, why, sizeof(why)) < 0)
            return fail(m->files[i], why);
        if (qp_profile_merge_take(&m->prof, m->ps[i], why, sizeof(why)) < 0)
            return fail(m->files[i], why);
        /* Only the sum is used from here (chromium's counters: 33 MB a copy). */
        free(m->ps[i]->counters);
        m->ps[i]->counters = NULL;
    }
    return 0;
}

static void
free_names(char **v, uint32_t n)
{
    for (uint32_t i = 0; v != NULL && i < n; i++)
        free(v[i]);
    free(v);
}

static void
free_modules(module_t *mods, int n)
{
    for (int i = 0; mods != NULL && i < n; i++) {
        module_t *m = &mods[i];
        free_names(m->in.plt_names, m->rep.nplt);
        qp_report_free(&m->rep);
        qp_unwinder_destroy(m->unw);
        qp_desc_free(&m->desc);
        cfg_image_destroy(m->img);
        qp_profile_free(&m->prof);
        free_names(m->in.names, m->desc.hdr.nprocs);
        free(m->files);
        free(m->ps);
    }
    free(mods);
}

/* A module with room for every profile of A. */
static int
module_init(const qp_args_t *a, module_t *m, const char *exe, uint64_t id)
{
    memset(m, 0, sizeof(*m));
    m->exe = exe;
    m->id = id;
    m->files = calloc((size_t)a->nfiles, sizeof(*m->files));
    m->ps = calloc((size_t)a->nfiles, sizeof(*m->ps));
    if (m->files == NULL || m->ps == NULL)
        return fail(a->files[0], qp_strerror(QP_ENOMEM));
    return 0;
}

/* The module profile P belongs to: the one whose file it names or whose description id
 * it has; all of them with --exe (or ALL), and the first when P names no file. */
static int
module_of(const qp_args_t *a, const module_t *mods, int nmods, const qp_profile_t *p, int all)
{
    if (a->exe != NULL || all || p->hdr.exe[0] == '\0')
        return nmods > 0 ? 0 : -1;
    for (int k = 0; k < nmods; k++)
        if (mods[k].id == p->hdr.id || strcmp(mods[k].exe, p->hdr.exe) == 0)
            return k;
    return -1;
}

/*
 * Sort the profiles PS into modules *MODS (*NMODS of them, in the order first named;
 * ALL: one module). Profiles of one file and another rewrite of it fall into one
 * module, which refuses them later (as with --exe).
 */
static int
group_profiles(const qp_args_t *a, qp_profile_t *ps, int all, module_t **mods,
               int *nmods)
{
    *nmods = 0;
    *mods = calloc((size_t)a->nfiles, sizeof(module_t));
    if (*mods == NULL)
        return fail(a->files[0], qp_strerror(QP_ENOMEM));
    if (a->exe == NULL && !all && ps[0].hdr.exe[0] == '\0')
        return fail(a->files[0], "the profile does not name its executable: use --exe");
    for (int i = 0; i < a->nfiles; i++) {
        int k = module_of(a, *mods, *nmods, &ps[i], all);
        if (k < 0) {
            k = (*nmods)++;
            int st = module_init(a, &(*mods)[k], a->exe ? a->exe : ps[i].hdr.exe, ps[i].hdr.id);
            if (st != 0)
                return st;
        }
        module_t *m = &(*mods)[k];
        m->files[m->nfiles] = a->files[i];
        m->ps[m->nfiles++] = &ps[i];
    }
    return 0;
}

static void
free_profiles(qp_profile_t *ps, int n)
{
    for (int i = 0; ps != NULL && i < n; i++)
        qp_profile_free(&ps[i]);
    free(ps);
}

/* The description in the executable's .qpt.desc section. LAZY: its procedures' blocks
 * and edges decoded only when a report solves them (the image keeps the bytes). */
static int
load_desc(const char *exe, const cfg_image_t *img, qp_desc_t *d, int lazy)
{
    char why[512];
    const cfg_section_t *s = cfg_image_section_named(img, QP_DESC_SECTION);
    if (s == NULL)
        return fail(exe, "no .qpt.desc section: not rewritten by qpt-rewrite --driver=qp or "
                         "--driver=naive");
    if ((lazy ? qp_desc_parse_lazy : qp_desc_parse)(s->bytes, s->size, d, why, sizeof(why)) < 0)
        return fail(exe, why);
    return 0;
}

static int
open_image(const char *path, cfg_image_t **img)
{
    errno = 0;
    /* Any ISA the analysis reads (AArch64 too): the report reads, never rewrites. */
    int rc = cfg_image_open_bfd_analysis(path, img, NULL, 0);
    if (rc < 0)
        return fail(path, rc == QP_EIO && errno ? strerror(errno) : qp_strerror(rc));
    return 0;
}

/*****************************************************************************
 * Commands
 */

static int
cmd_merge(const qp_args_t *a)
{
    module_t *mods = NULL;
    int nmods = 0;
    qp_profile_t *ps = calloc((size_t)a->nfiles, sizeof(qp_profile_t));
    if (ps == NULL)
        return fail(a->output, qp_strerror(QP_ENOMEM));
    int st = read_profiles(a, ps);
    if (st == 0)
        st = group_profiles(a, ps, 1, &mods, &nmods);
    if (st == 0)
        st = merge_profiles(&mods[0], NULL);
    char why[512];
    if (st == 0 && qp_profile_write(a->output, &mods[0].prof, why, sizeof(why)) < 0)
        st = fail(a->output, why);
    free_modules(mods, nmods);
    free_profiles(ps, a->nfiles);
    return st;
}

static int
cmp_by_name(const void *a, const void *b, void *arg)
{
    const qp_inputs_t *in = arg;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    int c = strcmp(qp_proc_name(in, x), qp_proc_name(in, y));
    return c != 0 ? c : (x > y) - (x < y);
}

/* The demangled name of every procedure that has one (NULL entries: the stored name);
 * NULL when out of memory (the stored names are printed then). */
static char **
demangled_names(const qp_desc_t *desc)
{
    char **v = calloc(desc->hdr.nprocs + 1, sizeof(char *));
    for (uint32_t i = 0; v != NULL && i < desc->hdr.nprocs; i++)
        v[i] = cfg_demangle(qp_desc_str(desc, desc->procs[i].name));
    return v;
}

/* The PLT stubs' names demangled ("std::ostream::put(char)@plt"), NULL where they are
 * not mangled (or on ENOMEM). */
static char **
demangled_plt_names(const qp_report_t *r)
{
    char **v = calloc(r->nplt + 1, sizeof(char *));
    for (uint32_t i = 0; v != NULL && i < r->nplt; i++) {
        const char *name = r->plt[i].name, *at = strrchr(name, '@');
        char *base = strndup(name, at != NULL ? (size_t)(at - name) : strlen(name));
        char *dm = base != NULL ? cfg_demangle(base) : NULL;
        if (dm != NULL) {
            size_t len = strlen(dm) + (at != NULL ? strlen(at) : 0) + 1;
            if ((v[i] = malloc(len)) != NULL)
                snprintf(v[i], len, "%s%s", dm, at != NULL ? at : "");
        }
        free(dm);
        free(base);
    }
    return v;
}

/* Procedures that share a name (static functions of several files) are printed as
 * "name [file.c]" (their source file, DWARF), so that rows can be told apart. */
static void
qualify_duplicates(qp_inputs_t *in)
{
    uint32_t n = in->desc->hdr.nprocs;
    if (in->names == NULL && (in->names = calloc(n + 1, sizeof(char *))) == NULL)
        return;
    uint32_t *order = malloc((n + 1) * sizeof(uint32_t));
    if (order == NULL)
        return;
    for (uint32_t i = 0; i < n; i++)
        order[i] = i;
    qsort_r(order, n, sizeof(uint32_t), cmp_by_name, in);
    for (uint32_t i = 0; i < n;) {
        uint32_t j = i + 1;
        while (j < n && strcmp(qp_proc_name(in, order[i]), qp_proc_name(in, order[j])) == 0)
            j++;
        for (uint32_t k = i; j - i > 1 && k < j; k++) {
            const char *file = qp_proc_module(in, order[k]), *base = file ? strrchr(file, '/') : NULL;
            if (file == NULL)
                continue;
            const char *name = qp_proc_name(in, order[k]);
            size_t len = strlen(name) + strlen(base ? base + 1 : file) + 4;
            char *q = malloc(len);
            if (q == NULL)
                continue;
            snprintf(q, len, "%s [%s]", name, base ? base + 1 : file);
            free(in->names[order[k]]);
            in->names[order[k]] = q;
        }
        i = j;
    }
    free(order);
}

/* The procedure FUNC names, or an error line. */
static int
find_func(const qp_inputs_t *in, const char *func, uint32_t *proc)
{
    *proc = QP_VIRT;
    if (func == NULL)
        return 0;
    *proc = qp_desc_find_proc(in->desc, func);
    if (*proc == QP_VIRT) {
        *proc = qp_find_in_module(in, func);
        if (*proc != QP_VIRT)
            return 0;
    }
    char why[600];
    if (*proc == QP_VIRT) {
        snprintf(why, sizeof(why), "no procedure named '%s'", func);
        return fail(in->exe, why);
    }
    const qp_desc_proc_t *p = &in->desc->procs[*proc];
    /* Static functions of several files may share a name: the file must say which. */
    for (uint32_t i = 0; i < in->desc->hdr.nprocs; i++)
        if (i != *proc && (in->desc->procs[i].flags & QP_PROC_MEASURED)
            && (p->flags & QP_PROC_MEASURED)
            && strcmp(qp_desc_str(in->desc, in->desc->procs[i].name),
                      qp_desc_str(in->desc, p->name)) == 0) {
            snprintf(why, sizeof(why), "'%s' names several procedures (%s, %s, ...): give "
                     "the source file as FILE:NAME", func, qp_proc_name(in, *proc),
                     qp_proc_name(in, i));
            return fail(in->exe, why);
        }
    if (strcmp(qp_desc_str(in->desc, p->name), func) != 0) {
        /* Matched without the parameters: overloads make that ambiguous. */
        uint32_t other = QP_VIRT;
        for (uint32_t i = 0; i < in->desc->hdr.nprocs && other == QP_VIRT; i++)
            if (i != *proc && (in->desc->procs[i].flags & QP_PROC_MEASURED)
                && qp_name_matches(qp_desc_str(in->desc, in->desc->procs[i].name), func))
                other = i;
        if (other != QP_VIRT) {
            char *a = cfg_demangle(qp_desc_str(in->desc, p->name));
            char *b = cfg_demangle(qp_desc_str(in->desc, in->desc->procs[other].name));
            snprintf(why, sizeof(why), "'%s' names several procedures (%s, %s, ...): give "
                     "the parameters, or the source file as FILE:NAME", func, a ? a : "?",
                     b ? b : "?");
            free(a);
            free(b);
            return fail(in->exe, why);
        }
    }
    if (!(p->flags & QP_PROC_MEASURED)) {
        snprintf(why, sizeof(why), "procedure '%s' was not measured: %s", func,
                 qp_desc_str(in->desc, p->reason));
        return fail(in->exe, why);
    }
    return 0;
}

/* The call graph views: the graph built once here. */
static int
print_calls(FILE *f, const qp_args_t *a, const qp_inputs_t *in)
{
    qp_callgraph_t cg;
    if (qp_callgraph_build(in->rep, &cg) < 0)
        return fail(in->exe, qp_strerror(QP_ENOMEM));
    uint32_t proc = QP_VIRT;
    int st = a->out == OUT_CALLEES ? find_func(in, a->func, &proc) : 0;
    if (st == 0) {
        switch (a->out) {
        case OUT_CALLERS: st = qp_print_callers(f, in, &cg, a->func); break;
        case OUT_CALLEES: st = qp_print_callees(f, in, &cg, proc); break;
        case OUT_CALLGRAPH: st = qp_print_callgraph(f, in, &cg); break;
        case OUT_BOLT: st = qp_print_bolt(f, in, &cg); break;
        default: st = qp_print_callgrind(f, in, &cg); break;
        }
    }
    qp_callgraph_free(&cg);
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
            return fail(a->output, mods[k].img->flags & CFG_IMG_SHLIB
                                       ? "is a library read: not overwritten"
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

/* The pages of image IMG (a cfg_image_t) read so far dropped: qp_desc_set_release's. */
static void
release_image(void *img)
{
    cfg_image_release_pages(img);
}

/* M's profiles against the id and counters in its description's header (the first
 * one refused as merge_profiles refuses it); 0 when the header is not there (load_desc
 * then says why). */
static int
check_ids(module_t *m)
{
    const cfg_section_t *s = cfg_image_section_named(m->img, QP_DESC_SECTION);
    qp_desc_t head = { 0 };
    if (s == NULL || qp_desc_peek(s->bytes, s->size, &head.hdr) < 0)
        return 0;
    char why[512];
    for (int i = 0; i < m->nfiles; i++)
        if (qp_profile_check(m->ps[i], &head, why, sizeof(why)) < 0)
            return fail(m->files[i], why);
    return 0;
}

/* Load module M: its file, its description, its profiles summed and checked, its
 * report. */
static int
load_module(const qp_args_t *a, module_t *m)
{
    if (a->exe == NULL && access(m->exe, F_OK) != 0) {
        /* The profile names where the program ran; it may have moved since. */
        progress(NULL);
        fprintf(stderr, "qp: %s: %s (the executable %s names; use --exe)\n", m->exe,
                strerror(errno), m->files[0]);
        return EXIT_INPUT;
    }
    progress("opening the executable");
    int st = open_image(m->exe, &m->img);
    progress("reading the description");
    /* The flat profile (and --csv) needs the blocks and edges of the procedures that
     * ran, and of those whose summary the description does not give; every other
     * output reads them all. */
    int lazy = a->out == OUT_FLAT || a->out == OUT_CSV;
    /* These two read no relative relocation (the stubs' GOT slots have symbols), nor
     * again what opening the file and checking the description read once. */
    if (st == 0 && lazy)
        cfg_image_drop_relative_relocs(m->img);
    /* A profile of another executable is refused before the description is read (its
     * id is in the header): chromium's took 900 MB to refuse. */
    if (st == 0)
        st = check_ids(m);
    if (st == 0)
        st = load_desc(m->exe, m->img, &m->desc, lazy);
    if (st == 0 && lazy) {
        cfg_image_release_pages(m->img);
        qp_desc_set_release(&m->desc, release_image, m->img);
    }
    progress("summing the profiles");
    if (st == 0)
        st = merge_profiles(m, &m->desc);
    /* Without unwind tables the dumps stay unused; the report says so. */
    if (st == 0 && m->prof.ndumps > 0 && qp_unwinder_create(m->exe, &m->unw, NULL, 0) < 0)
        m->unw = NULL;
    progress("solving the counts");
    int rc = 0;
    if (st == 0 && (rc = qp_report_build(&m->desc, &m->prof, m->unw, &m->rep)) < 0)
        st = fail(m->exe, rc == QP_EFORMAT && *qp_desc_error(&m->desc) ? qp_desc_error(&m->desc) : qp_strerror(rc));
    progress("counting PLT stubs");
    /* PLT stubs, counted from the calls of measured code (the file keeps them). */
    if (st == 0 && (rc = qp_report_count_plt(&m->rep, m->img)) < 0)
        st = fail(m->exe, rc == QP_EFORMAT && *qp_desc_error(&m->desc) ? qp_desc_error(&m->desc) : qp_strerror(rc));
    return st;
}

/* What the printers see of the loaded module M (ORIG: --original, or NULL). */
static void
module_inputs(const qp_args_t *a, module_t *m, const cfg_image_t *orig)
{
    m->in = (qp_inputs_t) { m->exe, m->files, m->nfiles, m->img, orig, &m->desc, &m->prof,
                            &m->rep, a->verbose, a->limit, a->min_pct, NULL, NULL };
    /* C++, Rust and D names demangled, unless --mangled (callgrind's files too, as
     * callgrind writes them); lcov keeps them as stored (genhtml --demangle-cpp does it,
     * as for gcov's), BOLT needs its symbols. */
    int demangle = !a->mangled && a->out != OUT_LCOV && a->out != OUT_BOLT;
    if (demangle) {
        m->in.names = demangled_names(&m->desc);
        m->in.plt_names = demangled_plt_names(&m->rep);
    }
    if (a->out != OUT_LCOV && a->out != OUT_CALLGRIND && a->out != OUT_BOLT
        && a->out != OUT_CSV)
        qualify_duplicates(&m->in);
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
check_several(const qp_args_t *a, module_t *mods, int n)
{
    static const char *const opt[] = {
        [OUT_BLOCKS] = "--blocks without =FUNC", [OUT_EDGES] = "--edges without =FUNC",
        [OUT_LCOV] = "--lcov", [OUT_PPROF] = "--pprof", [OUT_CALLGRAPH] = "--call-graph",
        [OUT_CALLGRIND] = "--callgrind", [OUT_BOLT] = "--bolt",
    };
    set_labels(mods, n);
    if (a->out == OUT_FLAT || a->out == OUT_CSV || a->func != NULL)
        return 0;
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
    return qp_desc_find_proc(in->desc, func) != QP_VIRT || qp_find_in_module(in, func) != QP_VIRT;
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
        return fail(func, qp_strerror(QP_ENOMEM));
    int nsel = 0;
    const char *sep = cfg_module_sep(func);
    for (int i = 0; i < n; i++) {
        sel[i] = sep != NULL && cfg_module_match(func, (size_t)(sep - func), mods[i].exe);
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
            if (((mods[k].img->flags & CFG_IMG_SHLIB) != 0) == lib)
                order[at++] = &mods[k];
}

/* The flat profile or the CSV over the N modules MODS. */
static int
print_several(const qp_args_t *a, const module_t *mods, int n)
{
    const module_t **order = malloc((size_t)n * sizeof(*order));
    qp_inputs_t *ins = malloc((size_t)n * sizeof(*ins));
    const char **labels = malloc((size_t)n * sizeof(*labels));
    const qp_report_t **reps = malloc((size_t)n * sizeof(*reps));
    qp_process_t pr = { 0 };
    int st = order && ins && labels && reps ? 0 : fail(mods[0].exe, qp_strerror(QP_ENOMEM));
    if (st == 0) {
        report_order(mods, n, order);
        for (int k = 0; k < n; k++) {
            ins[k] = order[k]->in;
            labels[k] = order[k]->label;
            reps[k] = &order[k]->rep;
        }
        if (qp_process_build(reps, (uint32_t)n, &pr) < 0)
            st = fail(mods[0].exe, qp_strerror(QP_ENOMEM));
    }
    tool_out_t t;
    if (st == 0 && (st = output_open(a, mods, n, &t)) == 0) {
        qp_modules_t qm = { ins, labels, (uint32_t)n, &pr };
        if (a->out == OUT_CSV)
            qp_print_csv_modules(t.f, &qm);
        else
            qp_print_flat_modules(t.f, &qm);
        st = output_close(&t, 0);
    }
    qp_process_free(&pr);
    free(order);
    free(ins);
    free(labels);
    free(reps);
    return st;
}

/* The report over several modules: a flat profile or CSV over them all, or what FUNC
 * names in one of them. */
static int
report_several(const qp_args_t *a, module_t *mods, int n)
{
    /* What one module saw of a throw or a longjmp holds for every module's frames. */
    qp_report_t **reps = malloc((size_t)n * sizeof(*reps));
    if (reps == NULL)
        return fail(mods[0].exe, qp_strerror(QP_ENOMEM));
    for (int k = 0; k < n; k++)
        reps[k] = &mods[k].rep;
    qp_report_mark_leaving_all(reps, (size_t)n);
    free(reps);
    if (a->func == NULL)
        return print_several(a, mods, n);
    int k;
    qp_args_t one = *a;
    int st = select_module(mods, n, a->func, &k, &one.func);
    return st != 0 ? st : report_module(&one, mods, n, &mods[k]);
}

static int
cmd_report(const qp_args_t *a)
{
    module_t *mods = NULL;
    int nmods = 0;
    cfg_image_t *orig = NULL;
    qp_profile_t *ps = calloc((size_t)a->nfiles, sizeof(qp_profile_t));
    if (ps == NULL)
        return fail(a->files[0], qp_strerror(QP_ENOMEM));
    /* Loading chromium's profile takes seconds: say which phase runs (not with -v,
     * whose lines go to stderr too). */
    show_progress = isatty(STDERR_FILENO) && !a->verbose;
    progress("reading the profiles");
    int st = read_profiles(a, ps);
    if (st == 0)
        st = group_profiles(a, ps, 0, &mods, &nmods);
    if (st == 0 && nmods > 1)
        st = check_several(a, mods, nmods);
    for (int k = 0; st == 0 && k < nmods; k++)
        st = load_module(a, &mods[k]);
    if (st == 0 && a->original)
        st = open_image(a->original, &orig);
    progress("naming the procedures");
    for (int k = 0; st == 0 && k < nmods; k++)
        module_inputs(a, &mods[k], orig);
    progress(NULL); /* the report may go to the terminal too */
    if (st == 0)
        st = nmods == 1 ? report_module(a, mods, 1, &mods[0]) : report_several(a, mods, nmods);
    free_modules(mods, nmods);
    cfg_image_destroy(orig);
    free_profiles(ps, a->nfiles);
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
