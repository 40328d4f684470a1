/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * `dyn search`: option parsing and printing for the automated bottleneck search.
 */
#include "config.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/qpt/qpt_metrics.h"
#include "tools/dyn_search.h"
#include "tools/tool.h"
#include "tools/tool_metrics.h"

static volatile int stop_flag;

static void
on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: dyn search [OPTIONS] attach PID[,PID...]\n"
            "       dyn search [OPTIONS] run -- COMMAND [ARGS...]\n"
            "Find a running program's bottlenecks by itself (Paradyn's W3 search): test\n"
            "hypotheses (CPU-bound, sync-waiting, IO-waiting, syscall-blocked) program-wide,\n"
            "refine those above the threshold (threads; procedures -> callees; locks ->\n"
            "lock objects; I/O -> callers), take refuted metrics out.\n"
            "  --threshold PCT     a hypothesis holds above PCT%% of wall time (20)\n"
            "  --step SECS         how long each test measures (0.5)\n"
            "  --max-overhead PCT  keep the metrics' cost under PCT%% (the cost model)\n"
            "  --duration SECS     end the search after SECS\n"
            "  --from PROCS        procedures (comma-separated) the CPU search refines\n"
            "                      from (main)\n"
            "  --interval SECS     progress: each conclusion, and a line every SECS\n"
            "  --repeat            search again from the roots after each round, until\n"
            "                      --duration or the end (the when axis)\n"
            "  --json              the tree and the bottlenecks as JSON\n");
}

static void
print_node(void *arg, const qm_search_node_t *nd, double t, size_t n, size_t tested,
           size_t ntrue)
{
    (void)arg;
    if (nd == NULL)
        fprintf(stderr, "dyn search: %.1f s: %zu nodes, %zu tested, %zu true\n", t, n, tested,
                ntrue);
    else
        fprintf(stderr, "dyn search: %.1f s: %s %s: %.1f%% -> %s\n", t,
                qm_search_hyp_name(nd->hyp), nd->focus, 100 * nd->value,
                qm_search_state_name(nd->state));
}

static void
print_tree(const qm_search_report_t *r, long parent, int depth)
{
    for (size_t i = 0; i < r->n; i++) {
        const qm_search_node_t *nd = &r->nodes[i];
        if (nd->parent != parent)
            continue;
        /* The untested roots of hypotheses never called are noise: left out. */
        if (parent < 0 && nd->state == QM_NODE_FALSE && nd->value == 0
            && nd->hyp != QM_HYP_CPU)
            continue;
        if (parent < 0 && (i == 0 || r->nodes[i - 1].round != nd->round) && r->nodes[r->n - 1].round > 0)
            printf("round %d (from %.1f s):\n", nd->round + 1, nd->t_start);
        printf("%*s%-15s %-44s %7.1f%% %5.0f%%  %-12s %5.1f-%.1f s", 2 * depth, "",
               qm_search_hyp_name(nd->hyp), nd->focus, 100 * nd->value, 100 * nd->threshold,
               qm_search_state_name(nd->state), nd->t_start, nd->t_end);
        if (nd->why[0])
            printf("  (%s)", nd->why);
        printf("\n");
        print_tree(r, (long)i, depth + 1);
    }
}

static void
print_json(const qm_search_report_t *r)
{
    printf("{\"pid\":%d,\"secs\":%.3f,\"metrics_added\":%u,\"metrics_removed\":%u,"
           "\"stopped_ms\":%.1f,\"tree\":[",
           r->pid, r->secs, r->added, r->removed, r->stopped_ms);
    for (size_t i = 0; i < r->n; i++) {
        const qm_search_node_t *nd = &r->nodes[i];
        printf("%s\n{\"id\":%zu,\"parent\":%ld,\"hypothesis\":", i ? "," : "", i, nd->parent);
        tool_json_string(stdout, qm_search_hyp_name(nd->hyp));
        printf(",\"focus\":");
        tool_json_string(stdout, nd->focus);
        printf(",\"metric\":");
        tool_json_string(stdout, nd->metric);
        printf(",\"value\":%.4f,\"threshold\":%.4f,\"state\":", nd->value, nd->threshold);
        tool_json_string(stdout, qm_search_state_name(nd->state));
        printf(",\"round\":%d,\"tested_from\":%.3f,\"tested_to\":%.3f", nd->round, nd->t_start,
               nd->t_end);
        if (nd->why[0]) {
            printf(",\"why\":");
            tool_json_string(stdout, nd->why);
        }
        printf("}");
    }
    printf("],\n\"bottlenecks\":[");
    for (size_t k = 0; k < r->nranked; k++)
        printf("%s%zu", k ? "," : "", r->ranked[k]);
    printf("]}\n");
}

static void
print_text(const qm_search_report_t *r)
{
    if (r->n == 0)
        return;
    printf("search tree (hypothesis, focus, value, threshold, outcome, when tested):\n");
    print_tree(r, -1, 0);
    printf("\nbottlenecks, ranked:\n");
    for (size_t k = 0; k < r->nranked; k++) {
        const qm_search_node_t *nd = &r->nodes[r->ranked[k]];
        printf("%2zu. %-15s %-44s %6.1f%% of wall time", k + 1, qm_search_hyp_name(nd->hyp),
               nd->focus, 100 * nd->value);
        if (r->nodes[r->n - 1].round > 0)
            printf("  round %d, %.1f-%.1f s", nd->round + 1, nd->t_start, nd->t_end);
        printf("\n");
    }
    if (r->nranked == 0)
        printf("   none above the threshold\n");
}

/* Several processes: the foci of procedures, callers and objects that hold in some,
 * compared: one whose value is 1.5 times the mean of the others' is an imbalance (the
 * rank that computes longest, while the others wait for it). */
static void
print_compare(const qm_search_report_t *reps, const long *ranks, size_t n, int json)
{
    int first = 1;
    if (!json)
        printf("\nacross the %zu processes (value in each; imbalance: one 1.5x the others' "
               "mean):\n", n);
    for (size_t i = 0; i < n; i++)
        for (size_t a = 0; a < reps[i].n; a++) {
            const qm_search_node_t *x = &reps[i].nodes[a];
            if (x->state != QM_NODE_TRUE || x->focus_kind == QM_FOCUS_THREAD
                || x->depth == 0 || x->round > 0)
                continue;
            /* Once per focus: at its first process. */
            int dup = 0;
            for (size_t j = 0; j <= i && !dup; j++)
                for (size_t b = 0; b < reps[j].n && !dup; b++) {
                    const qm_search_node_t *y = &reps[j].nodes[b];
                    if ((j < i || b < a) && y->state == QM_NODE_TRUE && y->hyp == x->hyp
                        && y->round == 0 && strcmp(y->focus, x->focus) == 0)
                        dup = 1;
                }
            if (dup)
                continue;
            double v[256] = { 0 }, sum = 0, max = -1;
            size_t top = 0, m = n < 256 ? n : 256;
            for (size_t j = 0; j < m; j++) {
                for (size_t b = 0; b < reps[j].n; b++) {
                    const qm_search_node_t *y = &reps[j].nodes[b];
                    if (y->hyp == x->hyp && y->round == 0 && strcmp(y->focus, x->focus) == 0
                        && (y->state == QM_NODE_TRUE || y->state == QM_NODE_FALSE))
                        v[j] = y->value;
                }
                sum += v[j];
                if (v[j] > max)
                    max = v[j], top = j;
            }
            double others = m > 1 ? (sum - max) / (double)(m - 1) : 0;
            int imbalance = m > 1 && max >= 1.5 * others;
            if (json) {
                printf("%s{\"hypothesis\":", first ? "" : ",");
                tool_json_string(stdout, qm_search_hyp_name(x->hyp));
                printf(",\"focus\":");
                tool_json_string(stdout, x->focus);
                printf(",\"values\":[");
                for (size_t j = 0; j < m; j++)
                    printf("%s%.4f", j ? "," : "", v[j]);
                printf("],\"top_pid\":%d,\"top_rank\":%ld,\"imbalance\":%s}", reps[top].pid,
                       ranks[top], imbalance ? "true" : "false");
            } else {
                printf("  %-15s %-36s", qm_search_hyp_name(x->hyp), x->focus);
                for (size_t j = 0; j < m; j++)
                    printf(" %6.1f%%", 100 * v[j]);
                if (imbalance) {
                    printf("  imbalance: pid %d", reps[top].pid);
                    if (ranks[top] >= 0)
                        printf(" (rank %ld)", ranks[top]);
                    printf(" %.1fx the others", others > 0 ? max / others : 0.0);
                }
                printf("\n");
            }
            first = 0;
        }
}

static int
parse_num(const char *opt, const char *arg, double *out)
{
    char *end;
    *out = strtod(arg, &end);
    if (end == arg || (*end != '\0' && strcmp(end, "%") != 0) || !(*out > 0)) {
        fprintf(stderr, "dyn search: %s: not a positive number: '%s'\n", opt, arg);
        return -1;
    }
    return 0;
}

/* dyn search attach PID,PID,...: a search each, then the comparison. */
static int
search_many(const qm_search_opts_t *o, const int *pids, size_t n, int json)
{
    qm_search_report_t reps[256];
    long ranks[256];
    int rcs[256], bad = 0;
    char why[1024] = "";
    if (qm_search_run_many(o, pids, n, reps, ranks, rcs, why, sizeof(why)) < 0) {
        fprintf(stderr, "dyn search: %s\n", why);
        return 1;
    }
    if (json)
        printf("{\"processes\":[");
    for (size_t i = 0; i < n; i++) {
        if (rcs[i] < 0) {
            fprintf(stderr, "dyn search: %d: the search failed (%s)\n", pids[i],
                    qpt_strerror(rcs[i]));
            bad = 1;
        }
        if (json) {
            printf("%s{\"rank\":%ld,\"search\":", i ? "," : "", ranks[i]);
            print_json(&reps[i]);
            printf("}");
        } else {
            printf("%sprocess %d", i ? "\n" : "", pids[i]);
            if (ranks[i] >= 0)
                printf(" (rank %ld)", ranks[i]);
            printf(":\n");
            print_text(&reps[i]);
        }
    }
    if (json)
        printf("],\"compare\":[");
    print_compare(reps, ranks, n, json);
    if (json)
        printf("]}\n");
    for (size_t i = 0; i < n; i++)
        qm_search_report_free(&reps[i]);
    return bad;
}

int
dyn_search_main(int argc, char **argv)
{
    static const struct option lopts[] = {
        { "threshold", required_argument, NULL, 'T' },
        { "step", required_argument, NULL, 's' },
        { "max-overhead", required_argument, NULL, 'O' },
        { "duration", required_argument, NULL, 'd' },
        { "from", required_argument, NULL, 'f' },
        { "interval", required_argument, NULL, 'i' },
        { "json", no_argument, NULL, 'j' },
        { "repeat", no_argument, NULL, 'r' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    qm_search_opts_t o = { 0 };
    int opt, json = 0;
    double v;
    opterr = 0; /* tool_option_error says it in one line */
    while ((opt = getopt_long(argc, argv, "+:hi:d:", lopts, NULL)) != -1) {
        switch (opt) {
        case 'T':
            if (parse_num("--threshold", optarg, &v) < 0)
                return 2;
            o.threshold = v / 100;
            break;
        case 's':
            if (parse_num("--step", optarg, &o.step) < 0)
                return 2;
            break;
        case 'O':
            if (parse_num("--max-overhead", optarg, &o.max_overhead) < 0)
                return 2;
            break;
        case 'd':
            if (parse_num("--duration", optarg, &o.duration) < 0)
                return 2;
            break;
        case 'i':
            if (parse_num("--interval", optarg, &o.interval) < 0)
                return 2;
            break;
        case 'f': o.roots = optarg; break;
        case 'j': json = 1; break;
        case 'r': o.repeat = 1; break;
        case 'h': usage(stdout); return 0;
        default: return tool_option_error("dyn search", argv, opt);
        }
    }
    int pids[256];
    size_t npids = 0;
    if (optind < argc && strcmp(argv[optind], "attach") == 0 && optind + 1 < argc) {
        /* PID, or PID,PID,... (a parallel job's ranks: a search in each). */
        for (char *t = argv[optind + 1], *end;; t = end + 1) {
            long pid = strtol(t, &end, 10);
            if (end == t || (*end != '\0' && *end != ',') || pid <= 0 || npids == 256) {
                fprintf(stderr, "dyn search: attach: not a process id (or list): '%s'\n",
                        argv[optind + 1]);
                return 2;
            }
            pids[npids++] = (int)pid;
            if (*end == '\0')
                break;
        }
        o.pid = pids[0];
    } else if (optind < argc && strcmp(argv[optind], "run") == 0) {
        int k = optind + 1;
        if (k < argc && strcmp(argv[k], "--") == 0)
            k++;
        if (k >= argc) {
            usage(stderr);
            return 2;
        }
        o.argv = argv + k;
    } else {
        usage(stderr);
        return 2;
    }
    o.note = tool_metrics_note;
    o.note_arg = (void *)"dyn search";
    o.on_node = print_node;
    if (o.interval <= 0)
        o.on_node = NULL;
    o.stop = &stop_flag;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    char why[2048] = "";
    if (npids > 1)
        return search_many(&o, pids, npids, json);
    qm_search_report_t rep;
    int rc = qm_search_run(&o, &rep, why, sizeof(why));
    if (rc < 0)
        fprintf(stderr, "dyn search: %s\n", why[0] ? why : qpt_strerror(rc));
    if (json)
        print_json(&rep);
    else
        print_text(&rep);
    fprintf(stderr, "dyn search: %.1f s, %u metrics inserted, %u taken out, the process "
            "stopped %.0f ms for them%s\n", rep.secs, rep.added, rep.removed, rep.stopped_ms,
            rep.ended ? ", the process ended" : "");
    qm_search_report_free(&rep);
    return rc < 0 ? 1 : 0;
}
