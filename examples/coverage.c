/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * coverage: which basic blocks of a program ran. Every block of every procedure that
 * can be instrumented stores 1 into a word of its own; the rewritten program runs with
 * the given arguments (as often as the shell runs it: the profile accumulates), and the
 * report lists, per procedure that ran, the blocks covered, then the total.
 *
 *   coverage PROGRAM [ARGS...]
 *
 * Build: cc coverage.c $(pkg-config --cflags --libs qpt) -o coverage
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <qpt/qpt.h>

int
main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: coverage PROGRAM [ARGS...]\n");
        return 2;
    }
    char why[512] = "", out[4096], profile[4200];
    qpt_space_t *s = NULL;
    if (qpt_open(argv[1], &s, why, sizeof(why)) < 0) {
        fprintf(stderr, "coverage: %s\n", why);
        return 1;
    }
    /* Count the blocks first: one word each. */
    uint32_t np = qpt_nprocs(s);
    size_t *first = calloc(np + 1, sizeof(size_t)), total = 0, n;
    for (uint32_t p = 0; p < np; p++) {
        first[p] = total;
        if (qpt_proc_refusal(s, p) == NULL && qpt_points(s, p, QPT_BLOCK, NULL, 0, &n) == 0)
            total += n;
    }
    first[np] = total;
    uint64_t words;
    if (total == 0 || qpt_alloc(s, 8 * total, &words) < 0) {
        fprintf(stderr, "coverage: %s: nothing to measure %s\n", argv[1], qpt_error(s));
        return 1;
    }
    qpt_point_t *pts = malloc(total * sizeof(qpt_point_t));
    for (uint32_t p = 0; p < np; p++) {
        size_t k = first[p + 1] - first[p];
        if (k == 0 || qpt_points(s, p, QPT_BLOCK, pts, k, &n) < 0)
            continue;
        for (size_t b = 0; b < k; b++) {
            qpt_snippet_t *sn = qpt_snippet_create();
            qpt_expr_t e = qpt_store(sn, words + 8 * (first[p] + b), 8, qpt_const(sn, 1));
            if (qpt_insert(s, &pts[b], sn, e, NULL) < 0)
                fprintf(stderr, "coverage: %s\n", qpt_error(s));
            qpt_snippet_destroy(sn);
        }
    }
    snprintf(out, sizeof(out), "%s.coverage", argv[1]);
    snprintf(profile, sizeof(profile), "%s.qp", out);
    if (qpt_write(s, out) < 0) {
        fprintf(stderr, "coverage: %s\n", qpt_error(s));
        return 1;
    }
    unlink(profile);
    pid_t child = fork();
    if (child == 0) {
        execv(out, argv + 1);
        _exit(127);
    }
    waitpid(child, NULL, 0);
    uint64_t *ran = malloc(8 * total);
    if (qpt_profile_read(profile, words, ran, total, why, sizeof(why)) < 0) {
        fprintf(stderr, "coverage: %s\n", why);
        return 1;
    }
    size_t covered = 0;
    for (uint32_t p = 0; p < np; p++) {
        size_t k = first[p + 1] - first[p], c = 0;
        for (size_t b = 0; b < k; b++)
            c += ran[first[p] + b] != 0;
        covered += c;
        if (c > 0)
            printf("%5zu/%-5zu %s\n", c, k, qpt_proc_name(s, p));
    }
    printf("%zu of %zu blocks covered (%.1f%%)\n", covered, total,
           100.0 * (double)covered / (double)total);
    free(first);
    free(pts);
    free(ran);
    qpt_close(s);
    return 0;
}
