/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * qpt-rewrite -e/--metrics: a mutator on libqpt's public API (qpt_open, the metrics'
 * snippets, qpt_write - the same engine as the drivers), the layout for qp metrics next
 * to the output, and --predict's costs.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/qpt/qpt.h"
#include "include/qpt/qpt_report.h"
#include "tools/tool.h"
#include "tools/tool_metrics.h"

enum { EXIT_INPUT = 1, EXIT_USAGE = 2 };

/* The calls of each procedure in an earlier qp profile: entry address -> calls, sorted. */
typedef struct calls_table {
    qpt_entry_calls_t *v;
    size_t n;
} calls_table_t;

static int
cmp_entry(const void *a, const void *b)
{
    const qpt_entry_calls_t *x = a, *y = b;
    return x->entry < y->entry ? -1 : x->entry > y->entry;
}

static uint64_t
calls_at(void *arg, uint64_t entry)
{
    const calls_table_t *t = arg;
    qpt_entry_calls_t key = { entry, 0 }, *e = bsearch(&key, t->v, t->n, sizeof(key), cmp_entry);
    return e ? e->calls : 0;
}

/* --predict PROFILE: each metric's cost over a run like the one PROFILE measured. */
static int
predict(const char *prog_name, qm_set_t *set, qpt_space_t *s, const char *profile)
{
    char why[2048];
    calls_table_t t = { NULL, 0 };
    why[0] = '\0';
    int rc = qpt_profile_entry_calls(profile, &t.v, &t.n, why, sizeof(why));
    if (rc < 0) {
        fprintf(stderr, "%s: --predict: %s\n", prog_name, why[0] ? why : qpt_strerror(rc));
        return -1;
    }
    qsort(t.v, t.n, sizeof(qpt_entry_calls_t), cmp_entry);
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
 * The rewrite with metrics (-e, --metrics): through libqpt's public API; the metrics'
 * layout goes into OUTPUT (a note of its description) for qp metrics.
 */
static int
metrics_rewrite(const char *prog_name, qm_set_t *set, const char *input, const char *output,
                const char *profile, void (*progress)(const char *phase))
{
    char why[2048];
    qpt_space_t *s = NULL;
    if (progress != NULL)
        progress("analysing");
    int rc = qpt_open(input, &s, why, sizeof(why));
    if (progress != NULL)
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
    if (qm_layout_attach(set, s, why, sizeof(why)) < 0) {
        fprintf(stderr, "%s: %s\n", prog_name, why);
        qpt_close(s);
        return EXIT_INPUT;
    }
    if (profile != NULL && predict(prog_name, set, s, profile) < 0) {
        qpt_close(s);
        return EXIT_INPUT;
    }
    if (progress != NULL)
        progress("relocating and writing");
    qpt_on_temp_file(s, tool_signal_temp, NULL); /* removed if a signal ends the rewrite */
    rc = qpt_write(s, output);
    if (progress != NULL)
        progress(NULL);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", prog_name, qpt_error(s));
        qpt_close(s);
        return EXIT_INPUT;
    }
    qpt_close(s);
    fprintf(stderr, "%s: %s: %zu metric%s; after a run: qp metrics %s.qp\n", prog_name, output,
            qm_count(set), qm_count(set) == 1 ? "" : "s", output);
    return 0;
}

int
tool_rewrite_metrics(const char *prog, const char *const *args, const char *order, size_t n,
                     const char *input, const char *output, const char *profile,
                     void (*progress)(const char *phase))
{
    qm_set_t *set = NULL;
    if (tool_metrics_parse(prog, args, order, n, &set) < 0)
        return EXIT_USAGE;
    int st = metrics_rewrite(prog, set, input, output, profile, progress);
    qm_free(set);
    return st;
}
