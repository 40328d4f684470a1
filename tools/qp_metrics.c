/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * qp metrics PROFILE...: the metric x focus table of a program rewritten with
 * `qpt-rewrite -e/--metrics` (qpt-metrics(5)), from its profile and the layout that
 * the program carries (its note "metrics"); with several profiles (a job's processes), each
 * one's rows and the aggregates over them.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/qp_tool.h"
#include "tools/tool.h"
#include "tools/tool_metrics.h"

enum { EXIT_INPUT = 1, EXIT_USAGE = 2 };

static void
metrics_usage(FILE *f)
{
    fprintf(f,
            "Usage: qp metrics [OPTIONS] PROFILE...\n"
            "\n"
            "Print the metrics (qpt-metrics(5)) that a program rewritten with\n"
            "qpt-rewrite -e or --metrics measured: one row per metric and focus.\n"
            "With several profiles (the processes of a job, e.g. QP_PROFILE=prog.%%r.qp\n"
            "for a profile per MPI rank), each row is named by its profile, and the sum,\n"
            "min, max and mean over the processes follow.\n"
            "\n"
            "Options:\n"
            "      --layout=FILE      the metrics' layout: the rewritten program, or the\n"
            "                         .qpm file an older qpt-rewrite wrote beside it\n"
            "                         (default: the program that wrote the first PROFILE)\n"
            "      --csv              metric,focus,kind,value,measured lines (timers in ns)\n"
            "      --json             a JSON array of the rows\n"
            "      --aggregate        with one profile: the sum, min, max and mean of each\n"
            "                         per-thread metric over the threads\n"
            "  -o, --output=FILE      write to FILE instead of standard output\n"
            "  -h, --help             print this help and exit\n"
            "\n"
            "Exit status: 0 success, 1 an input could not be used, 2 usage error.\n");
}

static char read_why[512]; /* why the profile could not be read */

static int
read_profile(void *arg, uint64_t addr, uint64_t *w, size_t n)
{
    return qpt_profile_read(arg, addr, w, n, read_why, sizeof(read_why));
}

int
qp_metrics_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "layout", required_argument, NULL, 'l' },
        { "csv", no_argument, NULL, 'c' },
        { "json", no_argument, NULL, 'j' },
        { "aggregate", no_argument, NULL, 'a' },
        { "output", required_argument, NULL, 'o' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *layout = NULL, *output = NULL;
    int kind = TM_TEXT, c, aggregate = 0;
    optind = 2;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'l': layout = optarg; break;
        case 'c': kind = TM_CSV; break;
        case 'j': kind = TM_JSON; break;
        case 'a': aggregate = 1; break;
        case 'o': output = optarg; break;
        case 'h': metrics_usage(stdout); return 0;
        case ':':
            fprintf(stderr, "qp: metrics: missing argument to '%s' (try --help)\n", argv[optind - 1]);
            return EXIT_USAGE;
        default:
            fprintf(stderr, "qp: metrics: unknown option '%s' (try --help)\n", argv[optind - 1]);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "qp: metrics: missing PROFILE (try --help)\n");
        return EXIT_USAGE;
    }
    size_t np = (size_t)(argc - optind);
    const char *profile = argv[optind];
    char why[1024];
    qm_set_t *set = NULL;
    int lrc;
    if (layout != NULL) {
        FILE *lf = tool_fopen_read(layout, why, sizeof(why)); /* a FIFO is refused */
        if (lf == NULL) {
            fprintf(stderr, "qp: %s: %s\n", layout, why);
            return EXIT_INPUT;
        }
        fclose(lf);
        lrc = qm_layout_load(layout, &set, why, sizeof(why));
    } else if ((lrc = qm_layout_of_profile(profile, &set, why, sizeof(why))) == QPT_ENOTFOUND)
        snprintf(why, sizeof(why), "%s: the profile of a rewrite without metrics (qpt-rewrite "
                 "-e or --metrics; its counts: qp report %s)", profile, profile);
    if (lrc < 0) {
        fprintf(stderr, "qp: %s\n", why);
        return EXIT_INPUT;
    }
    /* Each profile's table; with several (the processes of a job, a profile each:
     * QP_PROFILE=prog.%r.qp), rows named by their profile, then the aggregates. */
    qm_row_t **per = calloc(np, sizeof(qm_row_t *)), *rows = NULL;
    size_t *nper = calloc(np, sizeof(size_t)), n = 0;
    double cpn = qm_cycles_per_ns();
    int rc = per && nper ? 0 : -1;
    for (size_t j = 0; rc == 0 && j < np; j++) {
        /* The profile of another rewrite holds other words: its values would be wrong. */
        const char *pf = argv[optind + (int)j];
        uint64_t id;
        if (qm_layout_id(set) != 0 && qpt_profile_id(pf, &id, why, sizeof(why)) == 0
            && id != qm_layout_id(set)) {
            fprintf(stderr, "qp: %s: the profile of another rewrite than %s (id %016llx, "
                    "the layout's %016llx)\n", pf, layout ? layout : profile,
                    (unsigned long long)id, (unsigned long long)qm_layout_id(set));
            rc = -1;
            break;
        }
        read_why[0] = '\0';
        if (qm_results(set, read_profile, argv[optind + (int)j], cpn, &per[j], &nper[j], why,
                       sizeof(why)) < 0) {
            fprintf(stderr, "qp: %s: %s\n", argv[optind + (int)j], read_why[0] ? read_why : why);
            rc = -1;
        }
    }
    qm_row_t *agg = NULL;
    size_t nagg = 0;
    if (rc == 0 && (np > 1 || aggregate) && qm_aggregate(set, per, nper, np, &agg, &nagg) < 0)
        rc = -1;
    if (rc == 0) {
        size_t total = nagg;
        for (size_t j = 0; j < np; j++)
            total += nper[j];
        if ((rows = calloc(total + 1, sizeof(qm_row_t))) == NULL)
            rc = -1;
        for (size_t j = 0; rc == 0 && j < np; j++)
            for (size_t i = 0; i < nper[j]; i++) {
                qm_row_t r = per[j][i];
                if (np > 1) {
                    const char *base = strrchr(argv[optind + (int)j], '/');
                    base = base ? base + 1 : argv[optind + (int)j];
                    snprintf(r.focus, sizeof(r.focus), "%.60s: %.90s", base, per[j][i].focus);
                }
                rows[n++] = r;
            }
        for (size_t i = 0; rc == 0 && i < nagg; i++)
            rows[n++] = agg[i];
    }
    for (size_t j = 0; per != NULL && j < np; j++)
        free(per[j]);
    free(per);
    free(nper);
    free(agg);
    if (rc < 0) {
        free(rows);
        qm_free(set);
        return EXIT_INPUT;
    }
    tool_out_t t;
    if (tool_out_open(&t, "qp", output) < 0) {
        free(rows);
        qm_free(set);
        return EXIT_INPUT;
    }
    int bad = tool_metrics_print(t.f, set, rows, n, kind) < 0;
    if (bad)
        fprintf(stderr, "qp: %s: writing failed\n", t.name);
    bad |= tool_out_close(&t, "qp", !bad) < 0;
    free(rows);
    qm_free(set);
    return bad ? EXIT_INPUT : 0;
}
