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
 * heap back. Transparent huge pages are not asked for, neither for the heap nor for the
 * image's relocations (cfg's CFG_OPEN_HUGE_PAGES, which only qp's report gives): on the
 * 2-core virtual machine of our measurements a 2 MiB fault cost far more than its 512
 * small ones (cc1's qp rewrite: 7.7 s of system time against 0.6 s, for 0.3-0.7 s less
 * user time; doc/measurements.md). Only speed changes: no output depends on where blocks
 * land.
 */
void
tool_heap_setup(void)
{
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
    mallopt(M_TOP_PAD, 64 << 20);
}

/*
 * Kept in the heap, freed blocks stay resident: the analysis frees its per-procedure
 * CFGs once the program's arrays hold them, the driver the worst case it reserved, the
 * writer the decoded instructions, and the holes they leave are too small or too
 * scattered for the next phase's large arrays (the plan's slots), which go on top of
 * them. Called at the end of each phase: the whole pages of free blocks go back to the
 * system (malloc_trim), and what reuses them later faults them in again (cc1's qp
 * rewrite: peak 780 -> 640 MB; doc/measurements.md).
 */
void
tool_heap_release(void)
{
    malloc_trim(0);
}
