/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * loops: walk the CFG of one procedure - its loops, their headers, nesting and back
 * edges - then count how often each loop's header runs: a counter at the QPT_BLOCK
 * point of every header, in the program file (rewritten, run, its profile read) or in
 * the program started live.
 *
 *   loops PROC PROGRAM [ARGS...]       rewrite PROGRAM into PROGRAM.loops and run that
 *   loops -r PROC PROGRAM [ARGS...]    start PROGRAM live and count until it ends
 *
 * Build: cc loops.c $(pkg-config --cflags --libs qpt) -o loops
 */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <qpt/qpt.h>

#define MAXLOOPS 256

static uint64_t words;          /* one counter per loop */
static int counted[MAXLOOPS];   /* 0 when the header could not take a counter */

/* Print the loops of PROC: header block and address, depth, parent, size, back edges. */
static int
print_loops(qpt_space_t *s, uint32_t proc, qpt_cfg_t *cfg)
{
    if (qpt_proc_cfg(s, proc, cfg) < 0)
        return -1;
    printf("%s: %u blocks, %u edges, %u loops%s\n", qpt_proc_name(s, proc), cfg->nblocks,
           cfg->nedges, cfg->nloops,
           cfg->flags & QPT_CFG_IRREDUCIBLE ? " (and a cycle that is no natural loop)" : "");
    for (uint32_t l = 0; l < cfg->nloops && l < MAXLOOPS; l++) {
        qpt_loop_t lp;
        qpt_block_t head;
        if (qpt_loop(s, proc, l, &lp) < 0 || qpt_block(s, proc, lp.header, &head) < 0)
            return -1;
        printf("loop %u: header block %u at 0x%llx, depth %u, %u blocks, %u back edge%s", l,
               lp.header, (unsigned long long)head.start, lp.depth, lp.nblocks, lp.nback,
               lp.nback == 1 ? "" : "s");
        if (lp.parent != QPT_NONE)
            printf(", inside loop %u", lp.parent);
        for (uint32_t i = 0; i < lp.nback; i++) {
            qpt_edge_t e;
            qpt_block_t from;
            if (qpt_loop_back_edge(s, proc, l, i, &e) < 0 || qpt_block(s, proc, e.from, &from) < 0)
                return -1;
            printf("%s0x%llx", i == 0 ? " from " : ", ", (unsigned long long)from.start);
        }
        printf("\n");
    }
    return 0;
}

/* A counter at each loop header (the same calls for a file and a process). */
static int
instrument(qpt_space_t *s, uint32_t proc, const qpt_cfg_t *cfg)
{
    if (cfg->nloops == 0)
        return 0;
    if (qpt_alloc(s, 8 * cfg->nloops, &words) < 0)
        return -1;
    for (uint32_t l = 0; l < cfg->nloops && l < MAXLOOPS; l++) {
        qpt_loop_t lp;
        qpt_point_t pt;
        if (qpt_loop(s, proc, l, &lp) < 0 || qpt_block_point(s, proc, lp.header, &pt) < 0)
            return -1;
        qpt_snippet_t *sn = qpt_snippet_create();
        int rc = qpt_insert(s, &pt, sn, qpt_add_to(sn, words + 8 * l, qpt_const(sn, 1), 1), NULL);
        qpt_snippet_destroy(sn);
        if (rc == QPT_EUNSUPP) /* a live block too short for a jump: say so, go on */
            fprintf(stderr, "loops: loop %u not counted: %s\n", l, qpt_error(s));
        else if (rc < 0)
            return -1;
        counted[l] = rc == 0;
    }
    return 0;
}

static void
print_counts(const qpt_cfg_t *cfg, const uint64_t *counts)
{
    for (uint32_t l = 0; l < cfg->nloops && l < MAXLOOPS; l++)
        if (counted[l])
            printf("loop %u: header ran %llu times\n", l, (unsigned long long)counts[l]);
}

static int
fail(qpt_space_t *s, const char *what)
{
    fprintf(stderr, "loops: %s: %s\n", what, qpt_error(s));
    qpt_close(s);
    return 1;
}

int
main(int argc, char **argv)
{
    int live = argc > 1 && strcmp(argv[1], "-r") == 0;
    char why[512] = "", out[4096], profile[4200];
    qpt_space_t *s = NULL;
    qpt_cfg_t cfg;
    uint32_t proc;
    uint64_t counts[MAXLOOPS] = { 0 };

    if (argc < 3 + live) {
        fprintf(stderr, "usage: loops [-r] PROC PROGRAM [ARGS...]\n");
        return 2;
    }
    const char *name = argv[1 + live];
    char **prog = argv + 2 + live;
    int rc = live ? qpt_spawn(prog, &s, why, sizeof(why)) : qpt_open(prog[0], &s, why, sizeof(why));
    if (rc < 0) {
        fprintf(stderr, "loops: %s\n", why);
        return 1;
    }
    if (qpt_proc_find(s, name, &proc) < 0)
        return fail(s, name);
    if (print_loops(s, proc, &cfg) < 0 || instrument(s, proc, &cfg) < 0)
        return fail(s, "instrumenting");
    fflush(stdout);
    if (live) {
        int status;
        if (qpt_commit(s) < 0 || qpt_run(s) < 0)
            return fail(s, "running");
        while (qpt_ended(s, &status) == 0)
            nanosleep(&(struct timespec) { 0, 10000000 }, NULL);
        /* The words keep their last values after the process ended. */
        if (cfg.nloops > 0 && qpt_read_memory(s, words, counts, 8 * cfg.nloops) < 0)
            return fail(s, "reading");
    } else {
        snprintf(out, sizeof(out), "%s.loops", prog[0]);
        snprintf(profile, sizeof(profile), "%s.qp", out);
        if (qpt_write(s, out) < 0)
            return fail(s, "rewriting");
        unlink(profile);
        pid_t child = fork();
        if (child == 0) {
            execv(out, prog);
            _exit(127);
        }
        waitpid(child, NULL, 0);
        if (cfg.nloops > 0
            && qpt_profile_read(profile, words, counts, cfg.nloops, why, sizeof(why)) < 0) {
            fprintf(stderr, "loops: %s: %s\n", profile, why);
            qpt_close(s);
            return 1;
        }
    }
    print_counts(&cfg, counts);
    qpt_close(s);
    return 0;
}
