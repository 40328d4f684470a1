/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A fuzz target for the reader: the input bytes are written to an in-memory file
 * (memfd_create) and opened by path (/proc/self/fd/N) with cfg_image_open_bfd, then
 * cfg_prog_build analyses them and both are destroyed. Any crash, hang, leak or
 * sanitizer report is a bug; error returns are fine.
 * Built with -DQP_LIBFUZZER and -fsanitize=fuzzer it is a libFuzzer target. Without it
 * (the `make check` build) main() runs the target once on each file named on the command
 * line, or on standard input when there is none, so AFL++ can drive it:
 * `afl-fuzz -i seeds -o out -- tests/fuzz_reader @@`. See doc/fuzzing.md.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cfg/cfg.h"

int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

/* Write all of BUF to FD; 0 on success. */
static int
write_all(int fd, const uint8_t* buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    char path[64];
    cfg_image_t* img = NULL;
    cfg_prog_t* prog = NULL;
    int fd = memfd_create("qp-fuzz-reader", MFD_CLOEXEC);

    if (fd < 0)
        return 0;
    if (write_all(fd, data, size) == 0) {
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        if (cfg_image_open_bfd(path, &img) == 0) {
            if (cfg_prog_build(img, NULL, &prog) == 0)
                cfg_prog_destroy(prog);
            cfg_image_destroy(img);
        }
    }
    close(fd);
    return 0;
}

#ifndef QP_LIBFUZZER

/* Read all of FP into a malloc'ed buffer; NULL on failure. */
static uint8_t*
read_all(FILE* fp, size_t* size /*OUT*/)
{
    size_t cap = 1 << 16, len = 0;
    uint8_t* buf = malloc(cap);

    while (buf != NULL) {
        len += fread(buf + len, 1, cap - len, fp);
        if (len < cap)
            break;
        uint8_t* bigger = realloc(buf, cap * 2);
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
run_file(const char* path)
{
    FILE* fp = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    uint8_t* buf;
    size_t size = 0;

    if (fp == NULL) {
        fprintf(stderr, "fuzz_reader: %s: %s\n", path, strerror(errno));
        return -1;
    }
    buf = read_all(fp, &size);
    if (fp != stdin)
        fclose(fp);
    if (buf == NULL) {
        fprintf(stderr, "fuzz_reader: %s: cannot read\n", path);
        return -1;
    }
    LLVMFuzzerTestOneInput(buf, size);
    free(buf);
    return 0;
}

int
main(int argc, char** argv)
{
    int unreadable = 0;

    if (argc < 2)
        return run_file("-") == 0 ? 0 : 2;
    for (int i = 1; i < argc; i++)
        unreadable += run_file(argv[i]) != 0;
    /* Unreadable inputs are reported but are not the reader's failure. */
    printf(
        "fuzz_reader: %d inputs run, %d unreadable\n", argc - 1 - unreadable, unreadable);
    return 0;
}

#endif
