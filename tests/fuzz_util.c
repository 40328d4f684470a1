/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/* Helpers of the fuzz targets (tests/fuzz.h), linked into every build of them. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/fuzz.h"

int
fuzz_memfd(const uint8_t *data, size_t size, char *path, size_t cap)
{
    int fd = memfd_create("qp-fuzz", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    while (size > 0) {
        ssize_t n = write(fd, data, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            close(fd);
            return -1;
        }
        data += n;
        size -= (size_t)n;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

static char scratch[64];

static void
remove_scratch(void)
{
    char cmd[96];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", scratch);
    if (system(cmd) != 0)
        fprintf(stderr, "fuzz: could not remove %s\n", scratch);
}

const char *
fuzz_scratch_dir(void)
{
    if (scratch[0] == '\0') {
        snprintf(scratch, sizeof(scratch), "/tmp/qp-fuzz-XXXXXX");
        if (mkdtemp(scratch) == NULL) {
            scratch[0] = '\0';
            return NULL;
        }
        atexit(remove_scratch);
    }
    return scratch;
}
