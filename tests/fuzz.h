/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_TESTS_FUZZ_H
#define QP_TESTS_FUZZ_H
/*
 * PURPOSE: what the fuzz targets (tests/fuzz_*.c) share. Each defines
 * LLVMFuzzerTestOneInput; linked with -fsanitize=fuzzer it is a libFuzzer target, linked
 * with tests/fuzz_main.c it runs once on each file named on its command line (the
 * `make check` replay, and AFL++'s `@@`). See doc/fuzzing.md.
 */
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * An in-memory file (memfd) holding DATA, named by PATH (/proc/self/fd/N, CAP bytes):
 * returns its descriptor (the caller closes it) or -1.
 */
int fuzz_memfd(const uint8_t *data, size_t size, char *path, size_t cap);

/* A scratch directory of this process (created once, removed at exit), or NULL. */
const char *fuzz_scratch_dir(void);

#endif
