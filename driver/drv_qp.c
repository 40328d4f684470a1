/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * qp: optimal edge profiling (seed 004, section 2; Ball and Larus). In each procedure's
 * graph (blocks plus X, see drv_graph.c) take a maximum-weight spanning tree and put
 * counters only on the edges outside it: E - V + 1 counters, the minimum from which
 * every edge and block count follows by flow conservation. Edges that cannot carry a
 * counter (jump-table and other indirect edges into blocks with several ways in) and
 * the X -> entry edge (a counter there would need a stub of its own) weigh infinitely,
 * so the tree takes them first. Other weights estimate how often an edge runs (10 per
 * loop level, the static heuristic of the seed) times what a counter there costs (a
 * stub or a flags save cost more than an increment), so that hot and expensive edges
 * stay in the tree and go uncounted. With --weights, the counts of an earlier run replace
 * the estimate.
 */
#include <stdlib.h>

#include "driver/driver.h"

#define INF 1e300

static uint32_t
uf_find(uint32_t *parent, uint32_t x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

static double
edge_weight(const drv_graph_t *g, const drv_edge_t *e)
{
    if (e->place == DRV_PLACE_NONE || e->kind == QP_EDGE_ENTRY)
        return INF;
    const cfg_block_t *b = g->prog->blocks + g->first;
    uint32_t X = g->nblocks;
    unsigned df = e->from == X ? 0 : b[e->from].loop_depth;
    unsigned dt = e->to == X ? 0 : b[e->to].loop_depth;
    unsigned d = df < dt ? df : dt;
    double freq = 1;
    int64_t c = -1;
    if (g->weights != NULL)
        c = drv_weights_get(g->weights, e->from == X ? 0 : b[e->from].start,
                            e->to == X ? 0 : b[e->to].start, e->kind);
    if (c >= 0)
        freq = (double)c + 1; /* measured: never-run edges still weigh a little */
    else
        for (unsigned i = 0; i < d && i < 30; i++)
            freq *= 10;
    double cost = 1.0;
    if (e->place == DRV_PLACE_TAKEN)
        cost += 1.0; /* the stub's extra jump */
    if (e->save_flags)
        cost += 3.0; /* pushf/popf */
    return freq * cost;
}

/* Sort edge indices by weight, heaviest first; ties by index (deterministic output). */
static const double *sort_w;

static int
cmp_heavy(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (sort_w[x] != sort_w[y])
        return sort_w[x] > sort_w[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

static int
qp_place(drv_graph_t *g, drv_result_t *res, const char **why)
{
    uint32_t n = g->nedges, nodes = g->nblocks + 1;
    double *w = malloc((n + 1) * sizeof(double));
    uint32_t *order = malloc((n + 1) * sizeof(uint32_t));
    uint32_t *parent = malloc(nodes * sizeof(uint32_t));
    uint8_t *in_tree = calloc(n + 1, 1);
    int rc = 0;
    (void)why; /* qp measures every procedure it gets: per block when it must */
    if (w == NULL || order == NULL || parent == NULL || in_tree == NULL) {
        rc = QP_ENOMEM;
        goto out;
    }
    for (uint32_t e = 0; e < n; e++) {
        w[e] = edge_weight(g, &g->edges[e]);
        order[e] = e;
    }
    sort_w = w;
    qsort(order, n, sizeof(uint32_t), cmp_heavy);
    for (uint32_t v = 0; v < nodes; v++)
        parent[v] = v;
    for (uint32_t k = 0; k < n; k++) {
        const drv_edge_t *e = &g->edges[order[k]];
        uint32_t a = uf_find(parent, e->from), b = uf_find(parent, e->to);
        if (a != b) {
            parent[a] = b;
            in_tree[order[k]] = 1;
        }
    }
    for (uint32_t e = 0; e < n; e++)
        if (!in_tree[e] && g->edges[e].place == DRV_PLACE_NONE) {
            /* Edges that cannot carry a counter form a cycle (several dispatch blocks
             * sharing one jump table's targets): count this procedure's blocks instead,
             * which gives every block count and the calls; the report says which edge
             * counts stay unknown. */
            for (uint32_t i = 0; i < g->nblocks; i++)
                g->block_counter[i] = drv_alloc_counter(res);
            res->nblock_counted++;
            goto out;
        }
    for (uint32_t e = 0; e < n; e++)
        if (!in_tree[e])
            g->edges[e].counter = drv_alloc_counter(res);
out:
    free(w);
    free(order);
    free(parent);
    free(in_tree);
    return rc;
}

const drv_ops_t drv_qp_ops = { "qp", QP_DRIVER_QP, qp_place };
