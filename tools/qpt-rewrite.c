/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * qpt-rewrite: the exec editor's command line. Parses options, calls the library, prints
 * one clear line on failure (`qpt-rewrite: INPUT: why`) and exits non-zero.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfg/cfg.h"
#include "editor/ed.h"
#include "editor/elfw.h"
#include "tools/tool.h"

enum { EXIT_INPUT = 1, EXIT_USAGE = 2 };
enum { DUMP_NONE, DUMP_SUMMARY, DUMP_TEXT, DUMP_DOT };

static const char *prog_name = "qpt-rewrite";

static void
usage(FILE *f)
{
    fprintf(f,
            "Usage: %s [OPTIONS] INPUT -o OUTPUT\n"
            "       %s --dump-cfg[=summary|text|dot] [--proc NAME] INPUT\n"
            "\n"
            "Rewrite an x86-64 Linux executable to measure what it does.\n"
            "\n"
            "Options:\n"
            "  -o, --output=FILE      write the rewritten executable to FILE\n"
            "      --driver=NAME      measurement: qp (edge profiling, default), naive, none\n"
            "      --dump-cfg[=KIND]  print the control-flow analysis instead of rewriting:\n"
            "                         summary (default), text (every block and edge),\n"
            "                         dot (Graphviz, needs --proc)\n"
            "      --proc=NAME        the procedure for --dump-cfg=dot\n"
            "  -v, --verbose          say more (every unsafe procedure and why)\n"
            "  -h, --help             print this help and exit\n"
            "  -V, --version          print the version and exit\n"
            "\n"
            "Exit status: 0 success, 1 the input could not be handled, 2 usage error.\n",
            prog_name, prog_name);
}

static int
fail_input(const char *input, int rc)
{
    const char *why = qp_strerror(rc);
    if (rc == QP_EIO && errno != 0)
        why = strerror(errno);
    fprintf(stderr, "%s: %s: %s\n", prog_name, input, why);
    return EXIT_INPUT;
}

/* The rewrite proper: plan, relocate, write. Prints the summary line on success. */
static int
rewrite(const cfg_prog_t *prog, const char *input, const char *output, const char *driver,
        int verbose)
{
    if (strcmp(driver, "none") != 0) {
        fprintf(stderr, "%s: %s: --driver=%s is not implemented yet (use --driver=none)\n",
                prog_name, input, driver);
        return EXIT_INPUT;
    }
    ed_plan_t *plan = NULL;
    ed_opts_t eo = { 0 };
    eo.stretch = getenv("QPT_STRETCH") != NULL; /* testing aid, see README */
    int rc = ed_plan_create(prog, &eo, &plan);
    if (rc < 0)
        return fail_input(input, rc);
    if (verbose)
        for (uint32_t i = 0; i < prog->nprocs; i++) {
            const char *why = ed_plan_left_reason(plan, i);
            if (why != NULL && !(prog->procs[i].flags & CFG_PROC_FRAGMENT))
                fprintf(stderr, "%s: left in place: %s at 0x%llx: %s\n", prog_name,
                        prog->procs[i].name, (unsigned long long)prog->procs[i].entry, why);
        }
    char err[512] = "";
    elfw_rewrite_stats_t st;
    rc = elfw_rewrite(prog, plan, input, output, &st, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "%s: %s: %s\n", prog_name, input, err[0] ? err : qp_strerror(rc));
        ed_plan_destroy(plan);
        return EXIT_INPUT;
    }
    const ed_stats_t *es = ed_plan_stats(plan);
    fprintf(stderr,
            "%s: %s: %u procedures relocated, %u left in place; %llu bytes of code relocated "
            "into %llu; %u redirects (%u for indirect-jump targets); output %llu bytes "
            "(%.2fx input)\n",
            prog_name, output, es->nmoved, es->nleft, (unsigned long long)es->bytes_old,
            (unsigned long long)es->bytes_new, es->npads, es->nind_pads,
            (unsigned long long)st.output_size,
            st.input_size ? (double)st.output_size / (double)st.input_size : 0.0);
    ed_plan_destroy(plan);
    return 0;
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
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    const char *output = NULL, *driver = "qp", *proc = NULL;
    int dump = DUMP_NONE, verbose = 0, c;
    while ((c = getopt_long(argc, argv, "o:vhV", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': output = optarg; break;
        case 'd': driver = optarg; break;
        case 'p': proc = optarg; break;
        case 'v': verbose = 1; break;
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
        default: usage(stderr); return EXIT_USAGE;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "%s: %s (try --help)\n", prog_name,
                optind >= argc ? "missing INPUT" : "more than one INPUT");
        return EXIT_USAGE;
    }
    const char *input = argv[optind];
    if (strcmp(driver, "qp") != 0 && strcmp(driver, "naive") != 0 && strcmp(driver, "none") != 0) {
        fprintf(stderr, "%s: --driver: unknown driver '%s' (qp, naive, none)\n", prog_name, driver);
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

    cfg_image_t *img = NULL;
    errno = 0;
    int rc = cfg_image_open_bfd(input, &img);
    if (rc < 0)
        return fail_input(input, rc);
    cfg_prog_t *prog = NULL;
    rc = cfg_prog_build(img, NULL, &prog);
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
        if (p == NULL) {
            fprintf(stderr, "%s: %s: no procedure named '%s'\n", prog_name, input, proc);
            status = EXIT_INPUT;
        } else
            tool_dump_dot(stdout, prog, p);
        break;
    }
    default: status = rewrite(prog, input, output, driver, verbose); break;
    }
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "%s: writing the output failed: %s\n", prog_name, strerror(errno));
        return EXIT_INPUT;
    }
    return status;
}
