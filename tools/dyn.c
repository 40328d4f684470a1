/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * dyn: live instrumentation of a running process (dyn attach PID) or of a program started
 * stopped at its first instruction (dyn run -- COMMAND). Entry counters (with --time also
 * timers at entry and exits, with --calls-from counters at call sites) are patched in,
 * sampled while the process runs, and taken out again; the process is left running.
 * Every session runs on metrics/'s live session engine (qm_live_run, on libqpt): -e's
 * metrics, and the options as metrics: --count P is `count calls(P)`, --time P
 * `time wall(P) shared`, --calls-from F `count calls(*) per call site from(F)`
 * (MODULE:GLOB patterns too, '*:malloc'). This file parses options, turns signals
 * into the sessions' stop flag and maps failures to exit statuses; dyn_session.c runs
 * -e's sessions, dyn_count.c the options', dyn_report.c prints what they report
 * (tools/dyn_priv.h: what they share).
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "include/qpt/qpt.h"
#include "include/qpt/qpt_rewrite.h"
#include "tools/tool.h"
#include "tools/tool_metrics.h"
#include "tools/dyn_search.h"
#include "tools/dyn_priv.h"

const char *dyn_prog_name = "dyn";
const char *dyn_what = "procedures";
volatile sig_atomic_t dyn_stop_flag;
int dyn_out_closed;
dyn_trace_out_t dyn_trace;

static void
usage(FILE *f)
{
    fprintf(f,
        "Usage: %s attach PID [OPTIONS]\n"
        "       %s attach PID,PID... | --children PID  -e METRIC...|--commands [OPTIONS]\n"
        "       %s run [OPTIONS] -- COMMAND [ARGS...]\n"
        "       %s clean PID\n"
        "\n"
        "Count calls of procedures of a live process (and time them, or count their\n"
        "call sites): patch counters in, watch them, take them out and leave the\n"
        "process running.\n"
        "\n"
        "Options:\n"
        "  -c, --count=PATTERN    count calls of procedures matching the shell glob\n"
        "                         PATTERN (repeatable); MODULE:GLOB names those of\n"
        "                         the shared libraries matching MODULE, e.g.\n"
        "                         'libc.so.6:malloc', '*:malloc' (every library, also\n"
        "                         those loaded later; also with --time, --calls-from)\n"
        "  -a, --all              every procedure that can be patched safely\n"
        "  -i, --interval=SEC     print a live table every SEC seconds (rates, totals)\n"
        "      --histogram        at the end, print the calls over time of the most "
        "called\n"
        "                         points (32 buckets whose width doubles as needed)\n"
        "  -d, --duration=SEC     end the session after SEC seconds (fractions allowed;\n"
        "                         default: until Ctrl-C or the process ends)\n"
        "      --trace=FILE.json  also write the calls over time as a Chrome trace\n"
        "                         (Perfetto, chrome://tracing): a counter per\n"
        "                         procedure, sampled every --interval (default 0.1 s)\n"
        "      --zeros            the final table lists the rows never called too\n"
        "                         (default: one line counts them)\n"
        "      --debug-dir=DIRS   where a stripped program's separate debug file is\n"
        "                         looked for (colon-separated; default /usr/lib/debug)\n"
        "  -o, --output=FILE.csv  also write the final counts as CSV\n"
        "                         (name,calls,wall_ns; wall_ns empty when not timed)\n"
        "      --follow-exec      taken, changes nothing: after an exec the new\n"
        "                         program is always instrumented again; earlier\n"
        "                         programs' rows are named PROG[N]:NAME; forked\n"
        "                         children add to the same rows (their dlopen/exec\n"
        "                         not followed)\n"
        "      --no-atomic        plain counter increments in one word: calls made by\n"
        "                         threads at the same moment may be lost (default:\n"
        "                         per-CPU increments (rseq), exact and as cheap; locked\n"
        "                         ones where the process has no rseq)\n"
        "  -t, --time=PATTERN     also the wall time inside procedures matching PATTERN\n"
        "                         (from the outermost call to its return: nested and\n"
        "                         recursive calls count once; wall time only, not\n"
        "                         CPU time; repeatable)\n"
        "  -f, --calls-from=FUNC  count the calls made at each call site inside the\n"
        "                         procedures matching FUNC (FUNC+0xOFF->callee;\n"
        "                         repeatable)\n"
        "  -e, --metric=METRIC    measure METRIC (qpt-metrics(5)) instead, e.g.\n"
        "                         'count calls(lua_*) inside(luaV_execute)'; repeatable;\n"
        "                         a library's procedures: 'count calls(libc.so.6:malloc)'\n"
        "      --metrics=FILE     the metrics defined in FILE (repeatable); with -e or\n"
        "                         --metrics, -o writes metric,focus,kind,value,measured\n"
        "      --commands         steer metrics while attached: read commands from\n"
        "                         standard input (add METRIC, remove NAME|#N, list,\n"
        "                         show, help, quit; its end is quit); -e is optional\n"
        "                         (--count, --all, --time: taken as their metrics)\n"
        "      --aggregate        the sum, min, max and mean of per-thread metrics over\n"
        "                         the threads, after the table\n"
        "      --max-overhead=PCT keep the time the metrics add under PCT%% of the\n"
        "                         program's own: one predicted above it is not inserted,\n"
        "                         the costliest goes when the observed total exceeds it\n"
        "  -v, --verbose          list every procedure not patched and why\n"
        "  -h, --help             print this help and exit\n"
        "  -V, --version          print the version and exit\n"
        "\n"
        "Several processes (a parallel job's ranks): PID,PID,... or --children PID (the\n"
        "processes PID started, e.g. mpirun's) with metrics (--count, --all and --time\n"
        "as their metrics too): each process measured at\n"
        "once, its table (named by its rank when its launcher set one), then the sum,\n"
        "min, max and mean over them; --interval shows them together, --commands steers\n"
        "them all at once, --histogram sums their histograms.\n"
        "\n"
        "`dyn clean PID` takes out what a dyn that was killed (SIGKILL) left in PID.\n"
        "`dyn search attach PID` / `dyn search run -- CMD` finds the bottlenecks by itself\n"
        "(see dyn search --help).\n"
        "\n"
        "Ctrl-C (SIGINT), SIGTERM or SIGHUP ends the session cleanly, at any moment. "
        "Exit\n"
        "status: 0 success (dyn run: the program's status when it ended during the\n"
        "session), 1 failure (also: standard output was closed), 2 usage error.\n",
        dyn_prog_name, dyn_prog_name, dyn_prog_name, dyn_prog_name);
}

static void
on_signal(int sig)
{
    (void)sig;
    dyn_stop_flag = 1;
}

static int
parse_secs(const char *arg, const char *opt, double *out)
{
    char *end;
    double v = strtod(arg, &end);
    if (end == arg || *end != '\0' || !(v > 0) || v > 1e9) {
        fprintf(stderr, "%s: %s: not a positive number of seconds: '%s'\n", dyn_prog_name,
            opt, arg);
        return -1;
    }
    *out = v;
    return 0;
}

/*
 * SIGINT, SIGTERM and SIGHUP only set dyn_stop_flag: a session is never cut in the middle
 * of an install or a removal (nothing in dynamic/ is left half done by a signal), it ends
 * at the next check. SIGPIPE is ignored: a closed standard output is seen as EPIPE and
 * ends the session like a signal (dyn_out_closed).
 */
static void
catch_signals(void)
{
    struct sigaction sa;

    /* A library truncated while dyn reads it (through a mapping) cannot end the session
     * cleanly from a signal handler: one line that says what is left, and exit 1. */
    tool_signal_on_bus(dyn_prog_name, "changed while it was read: dyn ended, and what it "
                                      "put in the process stays until 'dyn clean PID'");

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal; /* no SA_RESTART: sleeps end early */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* ARG as a process id into *PID, or a usage message (for COMMAND) and -1. */
static int
parse_pid(const char *cmd, const char *arg, int *pid)
{
    char *end;
    long v;

    if (arg == NULL) {
        fprintf(stderr, "%s: %s: missing PID\n", dyn_prog_name, cmd);
        return -1;
    }
    v = strtol(arg, &end, 10);
    if (end == arg || *end != '\0' || v <= 0 || v > INT32_MAX) {
        fprintf(stderr, "%s: %s: not a process id: '%s'\n", dyn_prog_name, cmd, arg);
        return -1;
    }
    *pid = (int)v;
    return 0;
}

/* PID or PID,PID,... into O->pids. */
static int
parse_pids(const char *arg, dyn_opts_t *o)
{
    if (arg == NULL) {
        fprintf(stderr, "%s: attach: missing PID\n", dyn_prog_name);
        return -1;
    }
    size_t n = 1;
    for (const char *c = arg; *c; c++)
        n += *c == ',';
    if ((o->pids = calloc(n, sizeof(int))) == NULL)
        return -1;
    char *copy = strdup(arg), *save = NULL;
    if (copy == NULL)
        return -1;
    int rc = 0;
    for (char *t = strtok_r(copy, ",", &save); t != NULL && rc == 0; t = strtok_r(NULL, ",", &save))
        rc = parse_pid("attach", t, &o->pids[o->npids++]);
    if (rc == 0 && o->npids != n) {
        fprintf(
            stderr, "%s: attach: not a list of process ids: '%s'\n", dyn_prog_name, arg);
        rc = -1;
    }
    free(copy);
    return rc;
}

/* --children: O->pids becomes the processes whose parent is O->pids[0]. */
static int
children_of(dyn_opts_t *o)
{
    int parent = o->pids[0], *v = NULL;
    size_t n = 0;
    int rc = qpt_children(parent, &v, &n);
    if (rc < 0) {
        fprintf(stderr, "%s: --children: %s\n", dyn_prog_name,
                rc == QPT_ENOTFOUND ? "the process has no children" : qpt_strerror(rc));
        return -1;
    }
    free(o->pids);
    o->pids = v;
    o->npids = n;
    return 0;
}

/* The one line of dyn clean: what was found and taken out. */
static void
print_clean(int pid, const qpt_clean_report_t *r)
{
    /* A stub a killed dyn left in the slack after the code ends whichever line is last.
     */
    char fds[96] = "";
    if (r->fds > 0)
        snprintf(fds, sizeof(fds), "; %u descriptor%s it left open closed", r->fds,
            r->fds == 1 ? "" : "s");
    char extra[192];
    snprintf(extra, sizeof(extra), "%s%s",
        r->stub > 0 ? "; the bytes under its system-call stub put back" : "", fds);
    const char *stub = extra;

    if (r->foreign_brk != 0)
        fprintf(stderr,
            "%s: %d: the loader's r_brk jumps to 0x%llx, which is not a trampoline of "
            "dyn's: left alone\n",
            dyn_prog_name, pid, (unsigned long long)r->foreign_brk);
    if (r->busy > 0)
        fprintf(stderr,
            "%s: %d: %u trampoline memor%s of a dyn still running left alone\n",
            dyn_prog_name, pid, r->busy, r->busy == 1 ? "y" : "ies");
    if (r->tracer_fds > 0)
        fprintf(stderr,
            "%s: %d: a dyn or a tracer (a running mutator): its %u descriptor%s named like "
            "a killed dyn's memfds left open (its own)\n",
            dyn_prog_name, pid, r->tracer_fds, r->tracer_fds == 1 ? "" : "s");
    if (r->mapped_fds > 0)
        fprintf(stderr,
            "%s: %d: %u descriptor%s named like a killed dyn's memfds, mapped by the process "
            "itself, left open (a mutator's own)\n",
            dyn_prog_name, pid, r->mapped_fds, r->mapped_fds == 1 ? "" : "s");
    if (r->regions == 0 && r->breaks > 0) {
        printf("%s: %d: the loader's breakpoint (libraries loaded later) put back%s\n",
            dyn_prog_name, pid, stub);
        return;
    }
    /* With trampolines too, one line still: the breakpoint goes after the stub's part. */
    char both[320];
    snprintf(both, sizeof(both), "%s%s", stub,
        r->breaks > 0 ? "; the loader's breakpoint (libraries loaded later) put back" : "");
    stub = both;
    if (r->regions == 0) {
        if (r->stub > 0)
            printf("%s: %d: the bytes under a killed dyn's system-call stub put back%s "
                   "(nothing else of dyn's found)\n",
                dyn_prog_name, pid, fds);
        else if (r->fds > 0)
            printf("%s: %d: %u descriptor%s a killed dyn left open closed (nothing else "
                   "of dyn's found)\n",
                dyn_prog_name, pid, r->fds, r->fds == 1 ? "" : "s");
        else
            printf("%s: %d: nothing of dyn's found\n", dyn_prog_name, pid);
        return;
    }
    if (r->jumps + r->moved + r->unmapped == 0) {
        printf("%s: %d: nothing to take out (%u trampoline memor%s stay%s mapped: "
               "call-site code, or a thread may still return there)%s\n",
            dyn_prog_name, pid, r->kept, r->kept == 1 ? "y" : "ies",
            r->kept == 1 ? "s" : "", stub);
        return;
    }
    printf("%s: %d: %u jump%s put back, %u thread%s moved out, %u mapping%s unmapped",
        dyn_prog_name, pid, r->jumps, r->jumps == 1 ? "" : "s", r->moved,
        r->moved == 1 ? "" : "s", r->unmapped, r->unmapped == 1 ? "" : "s");
    if (r->kept > 0)
        printf(", %u trampoline memor%s left mapped (call sites, or a thread may still "
               "return there)",
            r->kept, r->kept == 1 ? "y" : "ies");
    printf("%s\n", stub);
}

/* dyn clean PID: take out what a killed dyn left. */
static int
clean_main(int argc, char **argv)
{
    qpt_clean_report_t r;
    char why[512];
    int pid;

    if (parse_pid("clean", argc >= 2 ? argv[1] : NULL, &pid) < 0)
        return DYN_EXIT_USAGE;
    if (argc > 2) {
        fprintf(stderr, "%s: clean: unexpected argument '%s'\n", dyn_prog_name, argv[2]);
        return DYN_EXIT_USAGE;
    }
    catch_signals();
    if (qpt_clean(pid, &r, why, sizeof(why)) < 0) {
        fprintf(stderr, "%s: %s\n", dyn_prog_name, why);
        return DYN_EXIT_FAIL;
    }
    print_clean(pid, &r);
    return fflush(stdout) == 0 ? 0 : DYN_EXIT_FAIL;
}

int
main(int argc, char **argv)
{
    static const struct option lopts[] = {
        { "count", required_argument, NULL, 'c' },
        { "all", no_argument, NULL, 'a' },
        { "zeros", no_argument, NULL, 'Z' },
        { "debug-dir", required_argument, NULL, 'B' },
        { "trace", required_argument, NULL, 'T' },
        { "interval", required_argument, NULL, 'i' },
        { "duration", required_argument, NULL, 'd' },
        { "output", required_argument, NULL, 'o' },
        { "time", required_argument, NULL, 't' },
        { "calls-from", required_argument, NULL, 'f' },
        { "no-atomic", no_argument, NULL, 'N' },
        { "follow-exec", no_argument, NULL, 'X' },
        { "verbose", no_argument, NULL, 'v' },
        { "histogram", no_argument, NULL, 'H' },
        { "metric", required_argument, NULL, 'e' },
        { "metrics", required_argument, NULL, 'M' },
        { "commands", no_argument, NULL, 'C' },
        { "children", no_argument, NULL, 'K' },
        { "aggregate", no_argument, NULL, 'G' },
        { "max-overhead", required_argument, NULL, 'O' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    double t_started
        = dyn_now_s(); /* attach time counts from here (analysis included) */
    tool_heap_setup();
    dyn_opts_t o = { 0 };
    const char *cmd;
    int opt, ret, pid = 0, run;

    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
        printf("dyn (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
        return 0;
    }
    if (argc < 2) {
        usage(stderr);
        return DYN_EXIT_USAGE;
    }
    if (strcmp(argv[1], "attach") != 0 && strcmp(argv[1], "run") != 0
        && strcmp(argv[1], "clean") != 0 && strcmp(argv[1], "search") != 0) {
        if (argv[1][0] == '-')
            fprintf(stderr, "dyn: unknown option '%s' (try --help)\n", argv[1]);
        else
            fprintf(stderr, "dyn: unknown command '%s' (attach, run, search or clean; try --help)\n",
                    argv[1]);
        return DYN_EXIT_USAGE;
    }
    if (strcmp(argv[1], "clean") == 0)
        return clean_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "search") == 0)
        return dyn_search_main(argc - 1, argv + 1);
    cmd = argv[1];
    run = strcmp(cmd, "run") == 0;
    o.count = calloc((size_t)argc, sizeof(*o.count));
    o.time = calloc((size_t)argc, sizeof(*o.time));
    o.calls = calloc((size_t)argc, sizeof(*o.calls));
    o.margs = calloc((size_t)argc, sizeof(*o.margs));
    o.morder = calloc((size_t)argc, 1);
    if (o.count == NULL || o.time == NULL || o.calls == NULL || o.margs == NULL
        || o.morder == NULL)
        return DYN_EXIT_FAIL;
    argv++;
    argc--;
    if (!run) {
        /* attach PID, attach PID,PID,..., and --children before or after PID. */
        if (argc >= 2 && strcmp(argv[1], "--children") == 0) {
            o.children = 1;
            argv++;
            argc--;
        }
        if (parse_pids(argc >= 2 ? argv[1] : NULL, &o) < 0)
            return DYN_EXIT_USAGE;
        pid = o.pids[0];
        argv++;
        argc--;
    }
    opterr = 0; /* tool_option_error says it in one line */
    while ((opt = getopt_long(argc, argv, "+:c:at:f:i:d:o:vhVe:", lopts, NULL)) != -1) {
        switch (opt) {
        case 'e':
        case 'M':
            o.margs[o.nm] = optarg;
            o.morder[o.nm++] = opt == 'e' ? 'e' : 'f';
            break;
        case 'C': o.commands = 1; break;
        case 'K': o.children = 1; break;
        case 'G': o.aggregate = 1; break;
        case 'O': {
            char *end;
            o.max_overhead = strtod(optarg, &end);
            if (end == optarg || (*end != '\0' && strcmp(end, "%") != 0) || !(o.max_overhead > 0)
                || o.max_overhead > 1000) {
                fprintf(stderr, "%s: --max-overhead: '%s' is not a percentage above 0\n",
                        dyn_prog_name, optarg);
                return DYN_EXIT_USAGE;
            }
            break;
        }
        case 'c': o.count[o.ncount++] = optarg; break;
        case 'a': o.all = 1; break;
        case 'Z': o.zeros = 1; break;
        case 'B':
            if (qpt_set_debug_dirs(optarg) < 0) {
                fprintf(stderr, "%s: %s\n", dyn_prog_name, qpt_strerror(QPT_ENOMEM));
                return DYN_EXIT_FAIL;
            }
            break;
        case 'T': o.trace = optarg; break;
        case 'i':
            if (parse_secs(optarg, "--interval", &o.interval) < 0)
                return DYN_EXIT_USAGE;
            break;
        case 'd':
            if (parse_secs(optarg, "--duration", &o.duration) < 0)
                return DYN_EXIT_USAGE;
            break;
        case 'o': o.csv = optarg; break;
        case 'v': o.verbose = 1; break;
        case 'H': o.histogram = 1; break;
        case 'N': o.no_atomic = 1; break;
        case 'X': o.follow_exec = 1; break;
        case 't': o.time[o.ntime++] = optarg; break;
        case 'f':
            o.calls[o.ncalls++] = optarg;
            dyn_what = "points";
            break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("dyn (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION); return 0;
        default: return tool_option_error("dyn", argv, opt);
        }
    }
    /* --count, --all and --time with several processes or --commands: the metrics they
     * are (count calls(P), time wall(P) shared), in the metrics' sessions and tables. */
    char **texts = calloc((size_t)argc + 1, sizeof(char *));
    size_t ntexts = 0;
    if (texts == NULL)
        return DYN_EXIT_FAIL;
    if ((((o.npids > 1 || o.children) && !run) || o.commands) && !o.no_atomic) {
        size_t nt = o.ntime, nf = nt + o.ncalls, nc = nf + o.ncount;
        for (size_t i = 0; i < nc + (size_t)o.all; i++) {
            char kind = i < nt ? 'w' : i < nf ? 'f' : i < nc ? 'c' : 'a';
            const char *pat = i < nt ? o.time[i] : i < nf ? o.calls[i - nt]
                              : i < nc ? o.count[i - nf] : "*";
            char text[4200];
            dyn_option_metric(kind, pat, text, sizeof(text));
            if ((texts[ntexts] = strdup(text)) == NULL)
                return DYN_EXIT_FAIL;
            o.margs[o.nm] = texts[ntexts++];
            o.morder[o.nm++] = 'e';
        }
        o.ntime = o.ncount = o.ncalls = 0;
        o.all = 0;
    }
    if (o.max_overhead > 0 && o.nm == 0 && !o.commands) {
        fprintf(stderr, "%s: --max-overhead applies to metrics (-e, --metrics, --commands)\n",
                dyn_prog_name);
        return DYN_EXIT_USAGE;
    }
    if ((o.children || o.npids > 1) && !run) {
        if (o.children && o.npids > 1) {
            fprintf(
                stderr, "%s: --children takes one PID (the launcher)\n", dyn_prog_name);
            return DYN_EXIT_USAGE;
        }
        if (o.nm == 0 && !o.commands) {
            fprintf(stderr, "%s: several processes are measured with metrics (-e, "
                    "--metrics, --commands)\n", dyn_prog_name);
            return DYN_EXIT_USAGE;
        }
        if (o.children && children_of(&o) < 0)
            return DYN_EXIT_FAIL;
    }
    /* (--follow-exec is welcome with metrics: their session always follows.) */
    int counting = o.ncount || o.all || o.ntime || o.ncalls || o.no_atomic;
    if (o.commands && counting) {
        fprintf(stderr, "%s: --commands steers metrics: not with --count, --all, --time, "
                "--calls-from or --no-atomic\n", dyn_prog_name);
        return DYN_EXIT_USAGE;
    }
    if (o.nm > 0 && counting) {
        fprintf(stderr, "%s: -e/--metrics measure the metrics only: not with --count, --all, "
                "--time, --calls-from or --no-atomic\n", dyn_prog_name);
        return DYN_EXIT_USAGE;
    }
    if (o.nm == 0 && !o.commands && o.ncount == 0 && !o.all && o.ntime == 0 && o.ncalls == 0) {
        fprintf(stderr,
            "%s: say what to measure: --count PATTERN, --time PATTERN, --calls-from "
            "FUNC, --all, or -e METRIC\n",
            dyn_prog_name);
        return DYN_EXIT_USAGE;
    }
    if (run && optind >= argc) {
        fprintf(stderr, "%s: run: missing COMMAND (after --)\n", dyn_prog_name);
        return DYN_EXIT_USAGE;
    }
    if (!run && optind < argc) {
        fprintf(stderr, "%s: attach: unexpected argument '%s'\n", dyn_prog_name,
            argv[optind]);
        return DYN_EXIT_USAGE;
    }

    /* A CSV that cannot be written must fail now, not after the whole session. */
    tool_out_t t;
    if (o.csv != NULL && tool_out_open(&t, dyn_prog_name, o.csv) < 0)
        return DYN_EXIT_FAIL;
    if (o.csv != NULL)
        tool_out_close(&t, dyn_prog_name, 0); /* a trial: nothing written */
    if (o.trace != NULL) {
        if (o.nm > 0 || o.commands || o.npids > 1 || o.children) {
            fprintf(stderr, "%s: --trace records --count, --all, --time or --calls-from "
                    "sessions of one process\n", dyn_prog_name);
            return DYN_EXIT_USAGE;
        }
        dyn_trace.path = o.trace;
        dyn_trace.tables = o.interval > 0;
        if (o.interval <= 0)
            o.interval = 0.1;
        /* Written beside FILE and renamed when complete: a dyn killed on the way leaves
         * FILE.tmpXXXXXX, never a FILE cut short; a FIFO or device is refused. */
        if (tool_out_open(&dyn_trace.out, dyn_prog_name, o.trace) < 0)
            return DYN_EXIT_FAIL;
        dyn_trace.f = dyn_trace.out.f;
        fprintf(dyn_trace.f,
            "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"creator\":\"dyn (%s) %s\"},"
            "\"traceEvents\":[",
            PACKAGE_NAME, PACKAGE_VERSION);
    }

    catch_signals();
    if (o.npids > 1 || o.children)
        ret = dyn_many_session(&o);
    else if (o.nm > 0 || o.commands)
        ret = dyn_metrics_session(&o, pid, run ? argv + optind : NULL);
    else
        ret = dyn_count_session(&o, pid, run ? argv + optind : NULL, t_started);
    if (dyn_trace.f != NULL) {
        fprintf(dyn_trace.f, "\n]}\n");
        if (tool_out_close(&dyn_trace.out, dyn_prog_name, 1) < 0) {
            ret = DYN_EXIT_FAIL;
        } else {
            fprintf(stderr,
                "%s: %s: %zu counter events (Chrome trace: Perfetto, "
                "chrome://tracing)\n",
                dyn_prog_name, dyn_trace.path, dyn_trace.nevents);
        }
        free(dyn_trace.last);
        free(dyn_trace.wall);
    }
    for (size_t i = 0; i < ntexts; i++)
        free(texts[i]);
    free(texts);
    free(o.margs);
    free(o.morder);
    free(o.count);
    free(o.time);
    free(o.calls);
    return ret;
}
