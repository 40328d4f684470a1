/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/* The descriptors a Check test's process has open (tests/check_cfg.c,
 * tests/check_qpt_life.c: what a release or an unload lets go of). */
#ifndef QPT_TESTS_CHECK_FDS_H
#define QPT_TESTS_CHECK_FDS_H

#include <check.h>
#include <dirent.h>

static inline int
open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    ck_assert_ptr_nonnull(d);
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n - 3; /* ".", ".." and the directory's own */
}

#endif
