/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The replay driver of the fuzz targets (tests/fuzz.h): runs LLVMFuzzerTestOneInput once
 * on each file named on the command line, or on standard input when there is none. Not
 * linked into libFuzzer builds, which bring their own main; tests/fuzz_util.c holds the
 * helpers both builds use.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz.h"

/* Read all of FP into a malloc'ed buffer; NULL on failure. */
static uint8_t *
read_all(FILE *fp, size_t *size /*OUT*/)
{
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap);

    while (buf != NULL) {
        len += fread(buf + len, 1, cap - len, fp);
        if (len < cap)
            break;
        uint8_t *bigger = realloc(buf, cap * 2);
        if (bigger == NULL) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    if (buf != NULL && ferror(fp)) {
        free(buf);
        buf = NULL;
    }
    *size = len;
    return buf;
}

/* Run the target on one file ("-" is standard input); 0 when it could be read. */
static int
run_file(const char *prog, const char *path)
{
    FILE *fp = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    uint8_t *buf;
    size_t size = 0;

    if (fp == NULL) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
        return -1;
    }
    buf = read_all(fp, &size);
    if (fp != stdin)
        fclose(fp);
    if (buf == NULL) {
        fprintf(stderr, "%s: %s: cannot read\n", prog, path);
        return -1;
    }
    LLVMFuzzerTestOneInput(buf, size);
    free(buf);
    return 0;
}

int
main(int argc, char **argv)
{
    const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    int unreadable = 0;

    if (argc < 2)
        return run_file(prog, "-") == 0 ? 0 : 2;
    for (int i = 1; i < argc; i++)
        unreadable += run_file(prog, argv[i]) != 0;
    /* Unreadable inputs are reported but are not the target's failure. */
    printf("%s: %d inputs run, %d unreadable\n", prog, argc - 1 - unreadable, unreadable);
    return 0;
}
