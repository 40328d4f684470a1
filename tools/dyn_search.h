/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_DYN_SEARCH_H
#define QP_DYN_SEARCH_H
/*
 * PURPOSE: `dyn search`: the options and the printing of the automated bottleneck search
 * (metrics/qm_search.c does the search).
 */

/* `dyn search attach PID [OPTIONS]` / `dyn search [OPTIONS] run -- CMD` (ARGV[0] is
 * "search"); the exit status. */
int dyn_search_main(int argc, char **argv);

#endif
