/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A mutator on the public headers only, for tests/rewrite-engine.sh:
 *   rewrite_prog engine DRIVER INPUT OUTPUT   qpt_rewrite_run with DRIVER (as qpt-rewrite)
 *   rewrite_prog write INPUT OUTPUT           qpt_open + qpt_write, nothing inserted
 * The engine's lines go to stderr after "qpt-rewrite: ", as the tool prints them, so that
 * the test compares them too; the summary's counts go to stdout.
 */
#include <stdio.h>
#include <string.h>

#include <qpt/qpt.h>
#include <qpt/qpt_rewrite.h>

static void
on_message(void *arg, const char *line)
{
    (void)arg;
    fprintf(stderr, "qpt-rewrite: %s\n", line);
}

static int
engine(const char *driver, const char *input, const char *output)
{
    qpt_rewrite_t *r = NULL;
    if (qpt_rewrite_create(&r) < 0 || qpt_rewrite_set_driver(r, driver) < 0
        || qpt_rewrite_set(r, QPT_RW_THREADS, 2) < 0) {
        fprintf(stderr, "rewrite_prog: %s\n", r ? qpt_rewrite_error(r) : "no memory");
        qpt_rewrite_destroy(r);
        return 1;
    }
    qpt_rewrite_on_message(r, on_message, NULL);
    int rc = qpt_rewrite_run(r, input, output);
    qpt_rewrite_summary_t s;
    if (rc < 0)
        fprintf(stderr, "qpt-rewrite: %s\n", qpt_rewrite_error(r));
    else if (qpt_rewrite_summary(r, &s) == 0)
        printf("relocated %u left %u measured %u counters %u retries %u\n", s.relocated,
               s.left, s.measured, s.counters, s.retries);
    qpt_rewrite_destroy(r);
    return rc < 0;
}

static int
write_plain(const char *input, const char *output)
{
    char why[512];
    qpt_space_t *s = NULL;
    if (qpt_open(input, &s, why, sizeof(why)) < 0) {
        fprintf(stderr, "rewrite_prog: %s\n", why);
        return 1;
    }
    int rc = qpt_write(s, output);
    if (rc < 0)
        fprintf(stderr, "rewrite_prog: %s\n", qpt_error(s));
    qpt_close(s);
    return rc < 0;
}

int
main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "engine") == 0)
        return engine(argv[2], argv[3], argv[4]);
    if (argc == 4 && strcmp(argv[1], "write") == 0)
        return write_plain(argv[2], argv[3]);
    fprintf(stderr, "usage: rewrite_prog engine DRIVER INPUT OUTPUT | write INPUT OUTPUT\n");
    return 2;
}
