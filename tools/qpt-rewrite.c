/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * qpt-rewrite: the exec editor's command line, on libqpt's public API only
 * (include/qpt/qpt_rewrite.h runs the whole pipeline). Parses options, shows progress,
 * prints what the rewrite says, and one clear line on failure (`qpt-rewrite: INPUT: why`)
 * with a non-zero exit status.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/qpt/qpt.h"
#include "include/qpt/qpt_rewrite.h"
#include "tools/tool_cli.h"

enum { EXIT_INPUT = 1, EXIT_USAGE = 2 };
enum { DUMP_NONE, DUMP_SUMMARY = QPT_DUMP_SUMMARY, DUMP_TEXT = QPT_DUMP_TEXT,
       DUMP_DOT = QPT_DUMP_DOT };

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
            "      --iv-loops         qp (experimental): count a loop stepped by one register\n"
            "                         from that register where it costs less (doc/qp.md)\n"
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
            "      --sysroot=DIR      with --with-libs: look for the libraries under DIR\n"
            "                         first, as qemu-user's -L (a program of another\n"
            "                         machine: /usr/aarch64-linux-gnu; default: the\n"
            "                         environment's QEMU_LD_PREFIX)\n"
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

/* Options kept for make_rewrite. */
static int call_targets;  /* --call-targets */
static int iv_loops;      /* --iv-loops */
static int trace_mem;     /* --trace-mem */
static int with_libs;     /* --with-libs */
static unsigned nthreads; /* --threads, or 0: the CPUs online (at most 8) */
static int keep_old_text; /* --keep-old-text */
static const char *sysroot; /* --sysroot, or QEMU_LD_PREFIX, or NULL */

/*****************************************************************************
 * Progress on a terminal: the phase of a long rewrite, overwritten in place
 */
static int show_progress;
static int analysis_pass; /* passes of the analysis seen (the percentage restarts) */

/* qpt_rewrite_on_progress: "analysing (pass 2)... 45%", "writing...". */
static void
on_progress(void *arg, const char *phase, size_t done, size_t total)
{
    (void)arg;
    if (!show_progress)
        return;
    if (phase == NULL)
        fprintf(stderr, "\r\033[K");
    else if (total == 0)
        fprintf(stderr, "\r%s: %s...\033[K", prog_name, phase);
    else if (strcmp(phase, "analysing") == 0 && (analysis_pass += done == 0) > 1)
        fprintf(stderr, "\r%s: analysing (pass %d)... %zu%%\033[K", prog_name, analysis_pass,
                100 * done / total);
    else
        fprintf(stderr, "\r%s: %s... %zu%%\033[K", prog_name, phase, 100 * done / total);
    fflush(stderr);
}

static void
progress(const char *phase)
{
    on_progress(NULL, phase, 0, 0);
}

/* qpt_rewrite_on_message: each line of the summary, after the tool's name. */
static void
on_message(void *arg, const char *line)
{
    (void)arg;
    fprintf(stderr, "%s: %s\n", prog_name, line);
}

/* qpt_rewrite_dump_cfg's text, on standard output. */
static void
on_text(void *arg, const char *text)
{
    (void)arg;
    fputs(text, stdout);
}

/* Signals from now on: the input truncated while it is rewritten (SIGBUS), SIGINT,
 * SIGTERM, SIGHUP; each removes the temporary output (a cc1 rewrite leaves 150 MB
 * otherwise), which on_temp_file hooks tell tool_signal.c. */
static void
remove_tmp_on_signals(void)
{
    tool_signal_setup(prog_name, "input changed while it was rewritten");
    tool_signal_progress(show_progress);
}

/*
 * The rewrite object for the options given: the driver and its settings, the testing
 * aids the environment names (see qpt-rewrite(1)), the hooks. NULL with a message when
 * out of memory.
 */
static qpt_rewrite_t *
make_rewrite(const char *driver, int atomic, const char *weights, int verbose)
{
    qpt_rewrite_t *r = NULL;
    tool_names_t leave; /* QPT_LEAVE: testing aid */
    if (qpt_rewrite_create(&r) < 0 || tool_leave_names(&leave) < 0) {
        fprintf(stderr, "%s: %s\n", prog_name, qpt_strerror(QPT_ENOMEM));
        qpt_rewrite_destroy(r);
        return NULL;
    }
    int rc = qpt_rewrite_set_driver(r, driver);
    rc |= qpt_rewrite_set(r, QPT_RW_ATOMIC, atomic);
    rc |= qpt_rewrite_set_weights(r, weights);
    rc |= qpt_rewrite_set(r, QPT_RW_CALL_TARGETS, call_targets);
    rc |= qpt_rewrite_set(r, QPT_RW_IV_LOOPS, iv_loops);
    rc |= qpt_rewrite_set(r, QPT_RW_TRACE_MEM, trace_mem);
    rc |= qpt_rewrite_set(r, QPT_RW_THREADS, nthreads);
    rc |= qpt_rewrite_set(r, QPT_RW_KEEP_OLD_TEXT, keep_old_text);
    rc |= qpt_rewrite_set(r, QPT_RW_VERBOSE, verbose);
    rc |= qpt_rewrite_set(r, QPT_RW_STRETCH, getenv("QPT_STRETCH") != NULL);
    rc |= qpt_rewrite_set(r, QPT_RW_KEEP_TABLES, getenv("QPT_KEEP_TABLES") != NULL);
    rc |= qpt_rewrite_set_leave(r, leave.v, leave.n);
    rc |= qpt_rewrite_set_sysroot(r, sysroot);
    if (getenv("QPT_LEAVE_ALL") != NULL)
        rc |= qpt_rewrite_set_leave_all(r, "named by QPT_LEAVE_ALL");
    tool_names_free(&leave);
    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", prog_name, qpt_strerror(QPT_ENOMEM));
        qpt_rewrite_destroy(r);
        return NULL;
    }
    qpt_rewrite_on_progress(r, on_progress, NULL);
    qpt_rewrite_on_message(r, on_message, NULL);
    qpt_rewrite_on_temp_file(r, tool_signal_temp, NULL);
    if (tool_debug_on()) /* QP_DEBUG: development aid, see qpt-rewrite(1) */
        qpt_rewrite_on_debug(r, tool_debug_phase, tool_debug_note, NULL);
    else /* the heap's free pages go back at the end of each phase */
        qpt_rewrite_on_debug(r, tool_phase_end, NULL, NULL);
    return r;
}

/* Dump INPUT's analysis (DUMP) or rewrite it to OUTPUT (a folder WITH_LIBS). */
static int
run(const char *input, const char *output, int dump, const char *proc, const char *driver,
    int atomic, const char *weights, int verbose, int force)
{
    qpt_rewrite_t *r = make_rewrite(driver, atomic, weights, verbose);
    if (r == NULL)
        return EXIT_INPUT;
    int rc;
    if (dump != DUMP_NONE)
        rc = qpt_rewrite_dump_cfg(r, input, dump, proc, on_text, NULL);
    else if (with_libs)
        rc = qpt_rewrite_with_libs(r, input, output, force);
    else
        rc = qpt_rewrite_run(r, input, output);
    if (rc < 0)
        fprintf(stderr, "%s: %s\n", prog_name, qpt_rewrite_error(r));
    qpt_rewrite_destroy(r);
    if (dump != DUMP_NONE && rc == 0 && (fflush(stdout) != 0 || ferror(stdout))) {
        fprintf(stderr, "%s: writing the output failed: %s\n", prog_name, strerror(errno));
        return EXIT_INPUT;
    }
    return rc == 0 ? 0 : with_libs && rc == QPT_EINVAL ? EXIT_USAGE : EXIT_INPUT;
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
        { "iv-loops", no_argument, NULL, 'I' },
        { "trace-mem", no_argument, NULL, 'm' },
        { "with-libs", no_argument, NULL, 'L' },
        { "force", no_argument, NULL, 'F' },
        { "sysroot", required_argument, NULL, 'S' },
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
    if (margs == NULL || morder == NULL) {
        fprintf(stderr, "%s: -: %s\n", prog_name, qpt_strerror(QPT_ENOMEM));
        return EXIT_INPUT;
    }
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
        case 'I': iv_loops = 1; break;
        case 'm': trace_mem = 1; break;
        case 'L': with_libs = 1; break;
        case 'F': force = 1; break;
        case 'S': sysroot = optarg; break;
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
            if (qpt_set_debug_dirs(optarg) < 0) {
                fprintf(stderr, "%s: -: %s\n", prog_name, qpt_strerror(QPT_ENOMEM));
                return EXIT_INPUT;
            }
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
    if ((force || sysroot != NULL) && !with_libs) {
        fprintf(stderr, "%s: %s applies to --with-libs\n", prog_name,
                force ? "--force" : "--sysroot");
        return EXIT_USAGE;
    }
    /* The folder qemu-user's -L would use for the program, unless told otherwise. */
    if (with_libs && sysroot == NULL)
        sysroot = getenv("QEMU_LD_PREFIX");
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
        show_progress = isatty(STDERR_FILENO) && !verbose;
        remove_tmp_on_signals();
        int st = tool_rewrite_metrics(prog_name, margs, morder, nm, input, output, profile,
                                      progress);
        free(margs);
        free(morder);
        return st;
    }
    free(margs);
    free(morder);
    show_progress = dump == DUMP_NONE && isatty(STDERR_FILENO) && !verbose;
    remove_tmp_on_signals();
    return run(input, output, dump, proc, driver, atomic, weights, verbose, force);
}
