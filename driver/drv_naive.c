/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * naive: a counter in every basic block (the pixie-style baseline the seed compares qp
 * against). Block counts are measured; edge counts follow where flow conservation
 * determines them, and the report says which it cannot.
 */
#include "driver/driver.h"

static int
naive_place(drv_graph_t *g, drv_result_t *res, const char **why)
{
    (void)why;
    for (uint32_t i = 0; i < g->nblocks; i++)
        g->block_counter[i] = drv_alloc_counter(res);
    return 0;
}

const drv_ops_t drv_naive_ops = { "naive", QP_DRIVER_NAIVE, naive_place, 0, NULL };
