/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * PURPOSE: malloc settings for the tools that analyse whole programs (qpt-rewrite, dyn).
 */
#include "config.h"

#include <limits.h>
#include <malloc.h>

#include "tools/tool.h"

/*
 * Analysing a large program (cc1: 20 MB of code) allocates close to a gigabyte in vectors
 * that grow and are freed again. With glibc's defaults every large block is a fresh
 * mapping, faulted in 4 KiB at a time and unmapped when freed: a quarter of a million
 * page faults, a third of the run time. Keep every block in the heap and never give the
 * heap back. Transparent huge pages are not asked for (MADV_HUGEPAGE on a reserve, as
 * before): on the 2-core virtual machine of our measurements a 2 MiB fault cost far
 * more than its 512 small ones (cc1's qp rewrite: 7.7 s of system time against 0.6 s,
 * for 0.3-0.7 s less user time; doc/measurements.md). Only speed changes: no output
 * depends on where blocks land.
 */
void
tool_heap_setup(void)
{
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
    mallopt(M_TOP_PAD, 64 << 20);
}
