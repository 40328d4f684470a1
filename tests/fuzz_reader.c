/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A fuzz target for the reader: the input bytes are written to an in-memory file
 * (memfd_create) and opened by path (/proc/self/fd/N) with cfg_image_open_bfd, then
 * cfg_prog_build analyses them and both are destroyed. Any crash, hang, leak or
 * sanitizer report is a bug; error returns are fine.
 * Linked with -fsanitize=fuzzer it is a libFuzzer target; linked with tests/fuzz_main.c
 * (the `make check` build) it runs once on each file named on the command line, so
 * AFL++ can drive it: `afl-fuzz -i seeds -o out -- tests/fuzz_reader @@`. See
 * doc/fuzzing.md.
 */
#include "config.h"

#include <stdint.h>
#include <unistd.h>

#include "cfg/cfg.h"

#include "tests/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    char path[64];
    cfg_image_t* img = NULL;
    cfg_prog_t* prog = NULL;
    int fd = fuzz_memfd(data, size, path, sizeof path);

    if (fd < 0)
        return 0;
    if (cfg_image_open_bfd(path, &img) == 0) {
        if (cfg_prog_build(img, NULL, &prog) == 0)
            cfg_prog_destroy(prog);
        cfg_image_destroy(img);
    }
    close(fd);
    return 0;
}
