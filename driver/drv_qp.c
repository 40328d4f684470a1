/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * qp: optimal edge profiling (seed 004, section 2; Ball and Larus). In each procedure's
 * graph (blocks plus X, see drv_graph.c) take a maximum-weight spanning tree and put
 * counters only on the edges outside it: E - V + 1 counters, the minimum from which
 * every edge and block count follows by flow conservation. Edges that cannot carry a
 * counter (jump-table and other indirect edges into blocks with several ways in) and
 * the X -> entry edge (a counter there would need a stub of its own) weigh infinitely,
 * so the tree takes them first. Where those edges make cycles (an interpreter's handlers
 * each dispatching through one table of label addresses), no counters determine them
 * all: give_up_cycles leaves the counts of the edges on such cycles unknown (naive knows
 * none of them either) and the tree spans the rest, so every block count and every
 * other edge count still follows. Other weights estimate how often an edge runs times
 * what a counter there costs (a stub or a flags save cost more than an increment), so
 * that hot and expensive edges stay in the tree and go uncounted. With --weights, the
 * counts of an earlier run replace the estimate.
 *
 * When every call of the procedure is a direct call or tail call made in other measured
 * procedures (drv_run decides: QP_PROC_BY_CALLS), its entry edge's count is known from
 * theirs: the edge weighs nothing (the tree takes it last, only if nothing else joins X)
 * and never gets a counter, which saves one increment per call.
 *
 * The estimate (estimate_freq) propagates one call's flow through the graph with branch
 * probabilities, as compilers do: a loop's back edge is taken 3 times in 4, a loop exit
 * 1 in 5 (compilers say 9 in 10 and 1 in 10: too many rounds for these loops), a path
 * that can only end the process (abort, __chk_fail) almost never, a conditional
 * branch's fall-through twice as often as its forward jump (compilers lay the likelier
 * way out straight: lua's `if (l_unlikely(trap))` before every bytecode), other ways
 * out of a block alike; and where a block right after a call tests a register
 * (mostly the status the call returned) against zero, its zero way 3:1 on top (C's
 * convention: 0 for success or false; drv_graph_t.tests_status). Loop depth alone (10
 * per level) rates every edge of a loop the same: in an interpreter's dispatch loop it
 * then counts the loop head's edge to the dispatch (every instruction) besides each
 * handler's edge back (lua: 1.9 increments per bytecode instead of 1). Other published
 * branch heuristics (Ball and Larus's opcode, pointer, call, loop-header ones) were
 * measured and left out: doc/qp.md.
 */
#include <stdlib.h>
#include <string.h>

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

/* Relative odds of taking an edge, before normalising over its block's ways out. */
/* Loops run few times a visit (a search, a hash chain, a binary search): 3:1 and 1:4,
 * not the compilers' 9:1 and 1:9 (doc/qp.md: 2026-12-06, 0.1-0.15% fewer instructions
 * on bzip2 and speedtest1, lua the same). */
#define ODDS_BACK 3.0    /* a loop's back edge against staying in the body... */
#define ODDS_EXIT 0.25   /* ... a loop exit against staying in the loop */
#define ODDS_FALL 2.0    /* a conditional branch falling through against a forward jump */
#define ODDS_COLD 0.001  /* towards code that can only end the process */
#define ODDS_STATUS 3.0  /* a status a call returned: zero (success, false) against not */
#define FREQ_SWEEPS 400  /* propagation rounds at most (a loop converges 10% a round) */
#define FREQ_MAX 1e30
#define MAX_ROOTS 16     /* ways in from X solved one by one at most (else swept) */

/* Blocks from which every path ends the process (noreturn calls, ud2, hlt) into COLD;
 * OUT_OFF/OUT: each node's outgoing edges. */
static void
mark_cold(const drv_graph_t *g, const uint32_t *out_off, const uint32_t *out, uint8_t *cold)
{
    uint32_t X = g->nblocks;
    memset(cold, 0, X + 1);
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t i = X; i-- > 0;) {
            int all = !cold[i] && out_off[i + 1] > out_off[i];
            for (uint32_t k = out_off[i]; k < out_off[i + 1] && all; k++) {
                const drv_edge_t *ed = &g->edges[out[k]];
                all = ed->kind == CFG_EDGE_NORETURN || (ed->to != X && cold[ed->to]);
            }
            if (all)
                cold[i] = changed = 1;
        }
    }
}

/* Each node's edges as lists: for node v, IDX[OFF[v] .. OFF[v + 1]) (OFF: X + 2 entries,
 * zeroed). BY_TO: incoming edges, else outgoing. */
static void
edge_lists(const drv_graph_t *g, int by_to, uint32_t *off, uint32_t *idx)
{
    uint32_t X = g->nblocks;
    for (uint32_t e = 0; e < g->nedges; e++)
        off[(by_to ? g->edges[e].to : g->edges[e].from) + 1]++;
    for (uint32_t v = 0; v <= X; v++)
        off[v + 1] += off[v];
    for (uint32_t e = 0; e < g->nedges; e++)
        idx[off[by_to ? g->edges[e].to : g->edges[e].from]++] = e;
    for (uint32_t v = X + 1; v > 0; v--) /* each off[v] moved to off[v + 1]: back */
        off[v] = off[v - 1];
    off[0] = 0;
}

/* The odds of edge ED against its siblings (see the top of this file). */
static double
edge_odds(const drv_graph_t *g, const drv_edge_t *ed, const uint8_t *cold)
{
    uint32_t X = g->nblocks;
    const cfg_block_t *b = g->prog->blocks + g->first;
    if (ed->kind == CFG_EDGE_NORETURN || (ed->to != X && cold[ed->to]))
        return ODDS_COLD;
    unsigned df = b[ed->from].loop_depth, dt = ed->to == X ? 0 : b[ed->to].loop_depth;
    if (ed->to != X && b[ed->to].is_loop_head
        && cfg_block_dominates(g->prog, g->first + ed->to, g->first + ed->from))
        return ODDS_BACK;
    double odds = dt < df ? ODDS_EXIT : 1.0;
    /* A compiler lays the likelier way out as the fall-through, the other forward. */
    if (ed->kind == CFG_EDGE_FALL && g->last_kind[ed->from] == ARCH_KIND_JCC
        && g->last_target[ed->from] > b[ed->from].start)
        odds *= ODDS_FALL;
    /* C's convention: zero for success (or false), an error code otherwise. */
    uint8_t st = g->tests_status[ed->from];
    if (st != DRV_STATUS_NONE
        && (ed->kind != CFG_EDGE_FALL) == (st == DRV_STATUS_ZERO_TAKEN))
        odds *= ODDS_STATUS;
    return odds;
}

/*
 * The flow of one call from X through a reducible graph, solved loop by loop as Wu and
 * Larus do ("Static branch frequency and program profile analysis", 1994) instead of
 * swept until it settles: a depth-first search from X finds the back edges; the natural
 * loop of each header (the blocks that reach its back edges without passing it) must not
 * reach X, else the graph is irreducible. Innermost loop first, one unit of flow into
 * its header runs through the body in reverse postorder, inner headers multiplying what
 * enters them by their own factor; what comes back over the back edges is the header's
 * cyclic probability CP, and its factor is 1 / (1 - CP). Then one pass over the whole
 * graph in reverse postorder gives every node's flow: the fixed point the sweeps approach,
 * in time linear in the edges times the loop depth (cc1's placing took 1 s of sweeps).
 * PROB: each edge's probability; NODE (X + 1 zeroed entries) receives the flows. Returns
 * 0, 1 for an irreducible graph (NODE untouched), or QP_ENOMEM.
 */
static int
cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The natural loop of header H into LOOP (*NL nodes, H first): the reached nodes that
 * reach one of its back edges without passing H, marked TAG in MARK. Returns 1 when the
 * walk reaches ROOT (H does not dominate the loop: an irreducible graph), else 0. */
static int
natural_loop(const drv_graph_t *g, const uint32_t *in_off, const uint32_t *in,
             const uint8_t *back, const uint8_t *reached, uint32_t root, uint32_t h,
             uint32_t tag, uint32_t *mark, uint32_t *loop, uint32_t *nl)
{
    uint32_t k = 0;
    loop[k++] = h;
    mark[h] = tag;
    for (uint32_t j = in_off[h]; j < in_off[h + 1]; j++) {
        uint32_t u = g->edges[in[j]].from;
        if (back[in[j]] && mark[u] != tag) {
            mark[u] = tag;
            loop[k++] = u;
        }
    }
    for (uint32_t q = 1; q < k; q++)
        for (uint32_t j = in_off[loop[q]]; j < in_off[loop[q] + 1]; j++) {
            uint32_t u = g->edges[in[j]].from;
            if (u == root && u != h)
                return 1;
            if (reached[u] && mark[u] != tag) {
                mark[u] = tag;
                loop[k++] = u;
            }
        }
    *nl = k;
    return 0;
}

static int
solve_loops(const drv_graph_t *g, const uint32_t *in_off, const uint32_t *in,
            const uint32_t *out_off, const uint32_t *out, const double *prob, uint32_t root,
            double weight, double *node)
{
    uint32_t X = g->nblocks, n = g->nedges;
    const size_t m = (size_t)X + 1, w = sizeof(uint64_t), h = sizeof(uint32_t);
    uint64_t *heads, *sorted;            /* loop size << 32 | header */
    double *factor, *f;                  /* 1 / (1 - CP) of solved headers */
    uint32_t *rpo, *rank, *stack, *next; /* reached nodes, reverse postorder; node -> its
                                          * place in rpo; DFS: next out-edge to try */
    uint32_t *loop, *mark;
    uint8_t *state, *is_head, *back;     /* 0 new, 1 on the stack, 2 done; per edge: a
                                          * back edge */
    void **parts[] = { (void **)&heads, (void **)&sorted, (void **)&factor, (void **)&f,
                       (void **)&rpo, (void **)&rank, (void **)&stack, (void **)&next,
                       (void **)&loop, (void **)&mark, (void **)&state, (void **)&is_head,
                       (void **)&back };
    const size_t sizes[] = { m * w, m * w, m * sizeof(double), m * sizeof(double), m * h,
                             m * h, m * h, m * h, m * h, m * h, m, m, (size_t)n + 1 };
    void *all = drv_carve(parts, sizes, sizeof(sizes) / sizeof(sizes[0]));
    int rc = 0;
    if (all == NULL) {
        rc = QP_ENOMEM;
        goto out;
    }
    /* Depth-first from ROOT, exits (edges to X) left out: back edges reach the stack. */
    uint32_t sp = 0, first = X + 1, nheads = 0;
    stack[sp++] = root;
    state[root] = 1;
    next[root] = out_off[root];
    while (sp > 0) {
        uint32_t v = stack[sp - 1];
        if (next[v] == out_off[v + 1]) {
            state[v] = 2;
            rpo[--first] = v;
            sp--;
            continue;
        }
        uint32_t e = out[next[v]++], w = g->edges[e].to;
        if (w == X)
            continue;
        if (state[w] == 1) {
            back[e] = 1;
        } else if (state[w] == 0) {
            state[w] = 1;
            next[w] = out_off[w];
            stack[sp++] = w;
        }
    }
    for (uint32_t k = first; k <= X; k++) {
        rank[rpo[k]] = k;
        factor[rpo[k]] = 1;
    }
    /* Each header once, with its loop's size: inner loops are strictly smaller. */
    for (uint32_t e = 0; e < n; e++) {
        uint32_t h = g->edges[e].to, nl;
        if (!back[e] || is_head[h])
            continue;
        is_head[h] = 1;
        if (natural_loop(g, in_off, in, back, state, root, h, h + 1, mark, loop, &nl)) {
            rc = 1;
            goto out;
        }
        heads[nheads++] = (uint64_t)nl << 32 | h;
    }
    qsort(heads, nheads, sizeof(uint64_t), cmp_u64);
    for (uint32_t i = 0; i < nheads; i++) {
        uint32_t h = (uint32_t)heads[i], nl, tag = X + 2 + i;
        natural_loop(g, in_off, in, back, state, root, h, tag, mark, loop, &nl);
        for (uint32_t q = 0; q < nl; q++)
            sorted[q] = (uint64_t)rank[loop[q]] << 32 | loop[q];
        qsort(sorted, nl, sizeof(uint64_t), cmp_u64); /* the header comes first */
        double cp = 0;
        for (uint32_t q = 0; q < nl; q++) {
            uint32_t v = (uint32_t)sorted[q];
            double fv = 0;
            if (v == h) {
                fv = 1;
            } else {
                for (uint32_t j = in_off[v]; j < in_off[v + 1]; j++)
                    if (!back[in[j]] && mark[g->edges[in[j]].from] == tag)
                        fv += f[g->edges[in[j]].from] * prob[in[j]];
                fv *= factor[v];
            }
            f[v] = fv < FREQ_MAX ? fv : FREQ_MAX;
        }
        for (uint32_t j = in_off[h]; j < in_off[h + 1]; j++)
            if (back[in[j]])
                cp += f[g->edges[in[j]].from] * prob[in[j]];
        factor[h] = cp < 1 - 1e-12 ? 1 / (1 - cp) : FREQ_MAX;
    }
    /* The whole graph: one unit from ROOT in reverse postorder, WEIGHT of it into NODE. */
    for (uint32_t k = first; k <= X; k++) {
        uint32_t v = rpo[k];
        double fv = v == root ? 1 : 0;
        for (uint32_t j = in_off[v]; j < in_off[v + 1] && v != root; j++)
            if (!back[in[j]] && state[g->edges[in[j]].from] == 2)
                fv += prob[in[j]] * f[g->edges[in[j]].from];
        fv *= factor[v];
        f[v] = fv < FREQ_MAX ? fv : FREQ_MAX;
        node[v] += weight * f[v];
        if (node[v] > FREQ_MAX)
            node[v] = FREQ_MAX;
    }
out:
    free(all);
    return rc;
}

/*
 * The flow of an irreducible graph G (or of one with many roots) into NODE (X + 1
 * entries): swept block by block in address order, each block the sum of its in-edges
 * (IN_OFF, IN: edge_lists') times their probabilities PROB, until it settles. The
 * in-edges' sources and probabilities are read from arrays of their own, in the order
 * of IN (the same sums, term by term, as through the edges: a sweep was most of the
 * estimate's 3.3 G instructions on cc1). Returns 0 or QP_ENOMEM.
 */
static int
sweep_freq(const drv_graph_t *g, const uint32_t *in_off, const uint32_t *in,
           const double *prob, double *node)
{
    uint32_t X = g->nblocks, m = in_off[X];
    uint32_t *src = malloc((m + 1) * sizeof(uint32_t));
    double *p = malloc((m + 1) * sizeof(double));
    if (src == NULL || p == NULL) {
        free(src);
        free(p);
        return QP_ENOMEM;
    }
    for (uint32_t k = 0; k < m; k++) {
        src[k] = g->edges[in[k]].from;
        p[k] = prob[in[k]];
    }
    memset(node, 0, X * sizeof(double));
    node[X] = 1.0; /* the way in from X: prob * 1.0 is prob, as before */
    for (int sweep = 0; sweep < FREQ_SWEEPS; sweep++) {
        double moved = 0; /* the largest relative change of this round */
        for (uint32_t v = 0; v < X; v++) {
            double f = 0;
            for (uint32_t k = in_off[v]; k < in_off[v + 1]; k++)
                f += p[k] * node[src[k]];
            if (f > FREQ_MAX)
                f = FREQ_MAX;
            double d = (f > node[v] ? f - node[v] : node[v] - f) / (f > 1 ? f : 1);
            if (d > moved)
                moved = d;
            node[v] = f;
        }
        if (moved < 1e-6)
            break;
    }
    node[X] = 0;
    free(src);
    free(p);
    return 0;
}

/*
 * Estimated traversals of each edge per call into FREQ (NEDGES of them): the flow of one
 * call from X (and a little from other roots) propagated with edge_odds' probabilities:
 * solved loop by loop (solve_loops), or, in an irreducible graph, swept block by block in
 * address order until it settles. Returns 0 or QP_ENOMEM.
 */
static int
estimate_freq(const drv_graph_t *g, double *freq)
{
    uint32_t n = g->nedges, X = g->nblocks;
    double *prob, *node;
    uint32_t *in_off, *out_off, *in, *out;
    uint8_t *cold;
    void **parts[] = { (void **)&prob, (void **)&node, (void **)&in_off, (void **)&out_off,
                       (void **)&in, (void **)&out, (void **)&cold };
    const size_t sizes[] = { ((size_t)n + 1) * sizeof(double), ((size_t)X + 1) * sizeof(double),
                             ((size_t)X + 2) * sizeof(uint32_t), ((size_t)X + 2) * sizeof(uint32_t),
                             ((size_t)n + 1) * sizeof(uint32_t), ((size_t)n + 1) * sizeof(uint32_t),
                             (size_t)X + 1 };
    void *all = drv_carve(parts, sizes, sizeof(sizes) / sizeof(sizes[0]));
    int rc = 0;
    if (all == NULL) {
        rc = QP_ENOMEM;
        goto out;
    }
    edge_lists(g, 1, in_off, in);
    edge_lists(g, 0, out_off, out);
    mark_cold(g, out_off, out, cold);
    for (uint32_t v = 0; v <= X; v++) {
        double sum = 0;
        for (uint32_t k = out_off[v]; k < out_off[v + 1]; k++) {
            const drv_edge_t *ed = &g->edges[out[k]];
            prob[out[k]] = v == X ? (ed->kind == QP_EDGE_ENTRY ? 1.0 : 0.1)
                                  : edge_odds(g, ed, cold);
            sum += prob[out[k]];
        }
        for (uint32_t k = out_off[v]; k < out_off[v + 1] && v != X; k++)
            prob[out[k]] /= sum;
    }
    /* Flow is linear: each root's share solved on its own, summed. */
    rc = out_off[X + 1] - out_off[X] <= MAX_ROOTS ? 0 : 1;
    for (uint32_t k = out_off[X]; k < out_off[X + 1] && rc == 0; k++) {
        const drv_edge_t *ed = &g->edges[out[k]];
        if (ed->to != X && prob[out[k]] > 0)
            rc = solve_loops(g, in_off, in, out_off, out, prob, ed->to, prob[out[k]], node);
    }
    if (rc < 0)
        goto out;
    if (rc > 0 && (rc = sweep_freq(g, in_off, in, prob, node)) < 0)
        goto out;
    rc = 0;
    for (uint32_t e = 0; e < n; e++) {
        const drv_edge_t *ed = &g->edges[e];
        freq[e] = prob[e] * (ed->from == X ? 1.0 : node[ed->from]);
    }
out:
    free(all);
    return rc;
}

/*
 * Does a counter on E jump back (a taken-edge stub) to the target? Not when it falls
 * into it: with CHOSEN, when qp chose so; else when it may (the tree is taken as if
 * every such stub could, and choose_falls then gives each block's place to its most
 * frequent chord).
 */
static int
jumps_back(const drv_edge_t *e, int chosen)
{
    return e->place == DRV_PLACE_TAKEN
        && (chosen ? !(e->fall_in & DRV_FALL_CHOSEN) : !(e->fall_in & DRV_FALL_MAY));
}

/* What a counter on E costs, in instructions run per traversal (CHOSEN: jumps_back's). */
static double
counter_cost(const drv_edge_t *e, int chosen)
{
    double cost = 1.0;
    if (jumps_back(e, chosen))
        cost += 1.0; /* the stub's jump back */
    if (e->save_flags)
        cost += 4.0; /* lea, pushf ... popf, lea */
    return cost;
}

/* A block counter's cost (SAVE: it saves the flags). */
static double
block_cost(int save)
{
    return save ? 5.0 : 1.0;
}

/* The measured count of edge E, or -1 when the profile lacks it. */
static int64_t
measured_count(const drv_graph_t *g, const drv_edge_t *e)
{
    const cfg_block_t *b = g->prog->blocks + g->first;
    uint32_t X = g->nblocks;
    return drv_weights_get(g->weights, e->from == X ? 0 : b[e->from].start,
                           e->to == X ? 0 : b[e->to].start, e->kind);
}

/* Each block's measured count into RUNS (NBLOCKS of them), -1 when the profile lacks
 * it (an older profile: then the sum of its in-edges' measured counts, if all are). */
static void
measured_blocks(const drv_graph_t *g, int64_t *runs)
{
    uint32_t X = g->nblocks;
    for (uint32_t i = 0; i < X; i++)
        runs[i] = 0;
    for (uint32_t e = 0; e < g->nedges; e++) {
        const drv_edge_t *ed = &g->edges[e];
        int64_t c = measured_count(g, ed);
        if (ed->to != X)
            runs[ed->to] = c < 0 || runs[ed->to] < 0 ? -1 : runs[ed->to] + c;
    }
    for (uint32_t i = 0; i < X; i++) {
        uint64_t at = g->prog->blocks[g->first + i].start;
        int64_t c = drv_weights_get(g->weights, at, at, QP_EDGE_BLOCK);
        if (c >= 0)
            runs[i] = c;
    }
}

/*
 * How often E runs: measured (--weights) or ESTIMATE. A measured count gets a fraction of
 * the estimate, to order edges that ran as often; the fractions of all the chords sum to
 * less than one instruction (costs <= 6, each edge in at most two weights), so the tree
 * stays the cheapest for the measured counts.
 */
static double
edge_freq(const drv_graph_t *g, const drv_edge_t *e, double estimate, int measured)
{
    int64_t c = measured && g->weights != NULL ? measured_count(g, e) : -1;
    if (c >= 0)
        return (double)c
            + estimate / (1.0 + estimate) / (12.0 * (g->nedges + g->nblocks + 1));
    return estimate;
}

/* Sort edge indices by weight, heaviest first; ties: blocks' own edges first (a counter
 * then goes on the edge, as without them), then by index (deterministic output). */
static _Thread_local const double *sort_w; /* (trees are built on several threads) */
static _Thread_local uint32_t sort_nedges;

static int
cmp_heavy(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (sort_w[x] != sort_w[y])
        return sort_w[x] > sort_w[y] ? -1 : 1;
    if ((x >= sort_nedges) != (y >= sort_nedges))
        return x >= sort_nedges ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Weight W as a key whose ascending order is cmp_heavy's, heaviest first: the IEEE bits
 * made to compare as unsigned (W not a NaN), inverted; -0 as 0 (they tie there). */
static uint64_t
heavy_key(double w)
{
    if (w == 0)
        w = 0;
    uint64_t b;
    memcpy(&b, &w, sizeof(b));
    b = (b >> 63) ? ~b : b | (uint64_t)1 << 63;
    return ~b;
}

/* Runs sorted by insertion, then merged. */
#define HEAVY_RUN 16

/*
 * ORDER[0 .. N + NB): the edges of weights W (N edges, then the NB blocks' own) in
 * cmp_heavy's order, by a stable merge sort of the blocks' own edges then the edges,
 * each in index order, on keys compared inline: qsort's calls of cmp_heavy cost cc1's
 * trees 1.17 G instructions. Returns 0, or -1 (ORDER unsorted) without the memory or
 * when a weight is a NaN, which orders as qsort's own steps happen to compare it.
 */
static int
sort_heavy(uint32_t *order, uint32_t n, uint32_t nb, const double *w)
{
    uint32_t all = n + nb;
    uint64_t *key = malloc((all + 1) * sizeof(uint64_t));
    uint32_t *tmp = malloc((all + 1) * sizeof(uint32_t));
    int rc = key != NULL && tmp != NULL ? 0 : -1;
    for (uint32_t i = 0; rc == 0 && i < all; i++) {
        if (w[i] != w[i])
            rc = -1;
        key[i] = heavy_key(w[i]);
    }
    if (rc < 0) {
        free(key);
        free(tmp);
        return rc;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < nb; i++)
        order[k++] = n + i;
    for (uint32_t e = 0; e < n; e++)
        order[k++] = e;
    for (uint32_t lo = 0; lo < all; lo += HEAVY_RUN) {
        uint32_t hi = lo + HEAVY_RUN < all ? lo + HEAVY_RUN : all;
        for (uint32_t i = lo + 1; i < hi; i++) {
            uint32_t x = order[i], j = i;
            for (; j > lo && key[order[j - 1]] > key[x]; j--)
                order[j] = order[j - 1];
            order[j] = x;
        }
    }
    uint32_t *from = order, *to = tmp;
    for (uint32_t width = HEAVY_RUN; width < all; width *= 2) {
        for (uint32_t lo = 0; lo < all; lo += 2 * width) {
            uint32_t mid = lo + width < all ? lo + width : all;
            uint32_t hi = mid + width < all ? mid + width : all;
            uint32_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi)
                to[o++] = key[from[b]] < key[from[a]] ? from[b++] : from[a++];
            while (a < mid)
                to[o++] = from[a++];
            while (b < hi)
                to[o++] = from[b++];
        }
        uint32_t *t = from;
        from = to;
        to = t;
    }
    if (from != order)
        memcpy(order, from, all * sizeof(uint32_t));
    free(key);
    free(tmp);
    return 0;
}

/*
 * The spanning tree is taken over the graph with each block split in two, its way in and
 * its way out, joined by the block's own edge (index NEDGES + block): a counter on that
 * one is a block counter, which costs an increment where an edge counter may need a stub
 * and a jump (a one-block loop's back edge). The report's flow solver takes a measured
 * block count as the sum of its in-edges and of its out-edges, so any spanning tree of
 * the split graph still determines every count.
 */
static uint32_t
node_out(const drv_graph_t *g, uint32_t v) /* its way in is node V itself */
{
    return v == g->nblocks ? v : g->nblocks + 1 + v;
}

/* Does edge ED need no counter (its count known from the callers)? */
static int
is_free(const drv_graph_t *g, const drv_edge_t *ed)
{
    return ed->kind == QP_EDGE_ENTRY && g->entry_by_calls;
}

uint64_t
drv_cost_insns(const drv_cost_t *c)
{
    return c->incs + c->flags + c->back_jumps + c->over_jumps;
}

void
drv_cost_add(drv_cost_t *sum, const drv_cost_t *c)
{
    sum->incs += c->incs;
    sum->flags += c->flags;
    sum->back_jumps += c->back_jumps;
    sum->over_jumps += c->over_jumps;
}

/* Add what one counter that runs C times costs to *COST: an increment, the flags saved
 * (SAVE) and the stub's jump back (BACK), as counter_cost prices them. */
static void
add_counter_runs(drv_cost_t *cost, uint64_t c, int save, int back)
{
    cost->incs += c;
    cost->flags += save ? 4 * c : 0;
    cost->back_jumps += back ? c : 0;
}

/*
 * Add what the counters on the chords (IN_TREE[e] == 0; NEDGES + block for a block's
 * own edge) cost over the profiled run to COST (--weights), counting those whose runs
 * the profile lacks in *UNKNOWN; FALLIN: per block, the edge falling into it
 * (choose_falls), whose jmp over a stub (DRV_FALL_JUMP) the counters add.
 */
static void
add_weighted_cost(const drv_graph_t *g, const uint8_t *in_tree, const int64_t *runs,
                  const uint32_t *fallin, const double *iv, drv_cost_t *cost,
                  uint32_t *unknown)
{
    uint32_t n = g->nedges, X = g->nblocks;
    for (uint32_t e = 0; e < n; e++) {
        const drv_edge_t *ed = &g->edges[e];
        if (in_tree[e] || is_free(g, ed))
            continue; /* no counter */
        int64_t c = measured_count(g, ed);
        if (c >= 0)
            add_counter_runs(cost, (uint64_t)c, ed->save_flags, jumps_back(ed, 1));
        else
            (*unknown)++;
        if ((ed->fall_in & DRV_FALL_CHOSEN) && (ed->fall_in & DRV_FALL_JUMP)) {
            int64_t j = measured_count(g, &g->edges[fallin[ed->to]]);
            if (j >= 0)
                cost->over_jumps += (uint64_t)j;
            else
                (*unknown)++;
        }
    }
    for (uint32_t i = 0; i < X; i++) {
        if (in_tree[n + i])
            continue;
        if (iv != NULL && iv[i] >= 0)
            cost->incs += (uint64_t)iv[i]; /* (its price: instructions of every kind) */
        else if (runs[i] >= 0)
            add_counter_runs(cost, (uint64_t)runs[i], g->block_save[i], 0);
        else
            (*unknown)++;
    }
}

/* Weights of the NEDGES edges and then of the blocks' own edges into W, from the
 * estimated edge frequencies FREQ_E, and the measured counts (--weights) where RUNS, the
 * measured block counts, is not NULL. FALLIN: scratch of NBLOCKS (per block, the edge
 * falling into it). */
static void
split_weights(const drv_graph_t *g, const double *freq_e, const int64_t *runs, double *w,
              uint32_t *fallin)
{
    uint32_t n = g->nedges, X = g->nblocks;
    /*
     * main's ways out get counters, whatever they cost (once a run): then a run killed
     * inside main leaves main's calls, which follow from them, below the runs, and the
     * report says how many runs ended there. With an edge out of main in the tree, the
     * calls would follow from a counter inside it and count the killed run as returned.
     */
    int is_main = strcmp(g->prog->procs[g->proc].name, "main") == 0;
    for (uint32_t i = 0; i < X; i++) {
        w[n + i] = 0;
        fallin[i] = UINT32_MAX;
    }
    for (uint32_t e = 0; e < n; e++) {
        const drv_edge_t *ed = &g->edges[e];
        if (ed->kind == CFG_EDGE_FALL && ed->from != X && ed->to != X)
            fallin[ed->to] = e;
    }
    for (uint32_t e = 0; e < n; e++) {
        const drv_edge_t *ed = &g->edges[e];
        double f = edge_freq(g, ed, freq_e[e], runs != NULL);
        if (ed->to != X)
            w[n + ed->to] += f;
        if (ed->kind == QP_EDGE_ENTRY && g->entry_by_calls)
            w[e] = -INF; /* known from the callers: free */
        else if (ed->to == X && ed->place != DRV_PLACE_NONE && is_main)
            w[e] = -1; /* a counter (below) */
        else
            w[e] = ed->place == DRV_PLACE_NONE || ed->kind == QP_EDGE_ENTRY
                ? INF : f * counter_cost(ed, 0);
        /* A stub falling into a block that another block falls into: that block's jmp
         * over it, or the stub's jmp back, whichever runs less. */
        if (w[e] < INF && (ed->fall_in & DRV_FALL_JUMP)) {
            uint32_t fe = fallin[ed->to];
            double jf = fe == UINT32_MAX ? f : edge_freq(g, &g->edges[fe], freq_e[fe], runs != NULL);
            w[e] += jf < f ? jf : f;
        }
    }
    for (uint32_t i = 0; i < X; i++) {
        /* Where in-edges' counts are unknown (their estimates stand in), the measured
         * block count: with all of them known, their sum is that count already. */
        if (runs != NULL && (double)runs[i] > w[n + i])
            w[n + i] = (double)runs[i];
        w[n + i] *= block_cost(g->block_save[i]);
    }
}

/* Does edge E need a counter that it cannot have (jump-table and other indirect edges
 * into blocks with several ways in)? */
static int
is_uncountable(const drv_graph_t *g, uint32_t e)
{
    return g->edges[e].place == DRV_PLACE_NONE && !is_free(g, &g->edges[e]);
}

/* The ends of edge E in the split graph (NEDGES + block: that block's own edge). */
static void
split_ends(const drv_graph_t *g, uint32_t e, uint32_t *from, uint32_t *to)
{
    uint32_t n = g->nedges;
    if (e < n) {
        *from = node_out(g, g->edges[e].from);
        *to = g->edges[e].to;
    } else {
        *from = e - n;
        *to = node_out(g, e - n);
    }
}

/* Reset PARENT (NODES of them) to single nodes, but for those in GROUND: one node. */
static void
uf_ground(uint32_t *parent, uint32_t nodes, const uint8_t *ground)
{
    uint32_t root = nodes;
    for (uint32_t v = 0; v < nodes; v++) {
        parent[v] = v;
        if (ground[v] && root == nodes)
            root = v;
        else if (ground[v])
            parent[v] = root;
    }
}

/*
 * Uncountable edges on cycles of uncountable edges (several dispatch blocks sharing one
 * table's targets, as an interpreter's computed gotos): no counters elsewhere determine
 * their counts (of a dispatch block's ways out, only their sum follows), so they cannot
 * all be in the tree, and none can be a chord. GIVEN_UP[e] = 1 for each: an edge closing
 * a cycle of uncountable edges in which the ends of the edges given up so far (GROUND[v]
 * = 1) count as one node, until none does. Flow conservation is then not used at the
 * GROUND nodes: merged into one, they are where the spanning tree of the rest hangs, and
 * every other count (every block's, every other edge's) still follows from the chords.
 * The nodes of the split graph: PARENT and GROUND have 2 * NBLOCKS + 1.
 */
static void
give_up_cycles(const drv_graph_t *g, uint32_t *parent, uint8_t *ground, uint8_t *given_up)
{
    uint32_t nodes = 2 * g->nblocks + 1;
    for (int changed = 1; changed;) {
        changed = 0;
        uf_ground(parent, nodes, ground);
        for (uint32_t e = 0; e < g->nedges; e++) {
            if (!is_uncountable(g, e) || given_up[e])
                continue;
            uint32_t from, to;
            split_ends(g, e, &from, &to);
            uint32_t a = uf_find(parent, from), b = uf_find(parent, to);
            if (a != b)
                parent[a] = b;
            else
                given_up[e] = ground[from] = ground[to] = changed = 1;
        }
    }
}

/* The spanning tree of G's split graph into IN_TREE (1: in the tree, 2: given up, no
 * counter and its count unknown), from the estimated edge frequencies FREQ and, unless
 * RUNS (the measured block counts) is NULL, the measured counts (--weights); IV, unless
 * NULL: per block, what counting it from an induction variable would cost (-1: it
 * cannot be), where that is less. W, FALLIN, ORDER, PARENT: scratch of qp_place's sizes;
 * GROUND: zeroed scratch. */
static void
build_tree(drv_graph_t *g, const double *freq, const int64_t *runs, const double *iv,
           double *w, uint32_t *fallin, uint32_t *order,
           uint32_t *parent, uint8_t *in_tree, uint8_t *ground)
{
    uint32_t n = g->nedges, nb = g->nblocks, all = n + nb, nodes = 2 * nb + 1;
    split_weights(g, freq, runs, w, fallin);
    for (uint32_t i = 0; iv != NULL && i < nb; i++)
        if (iv[i] >= 0 && iv[i] < w[n + i])
            w[n + i] = iv[i];
    give_up_cycles(g, parent, ground, in_tree);
    for (uint32_t e = 0; e < n; e++)
        in_tree[e] *= 2;
    if (sort_heavy(order, n, nb, w) < 0) {
        for (uint32_t e = 0; e < all; e++)
            order[e] = e;
        sort_w = w;
        sort_nedges = n;
        qsort(order, all, sizeof(uint32_t), cmp_heavy);
    }
    uf_ground(parent, nodes, ground);
    for (uint32_t k = 0; k < all; k++) {
        uint32_t e = order[k], from, to;
        if (in_tree[e] == 2)
            continue;
        split_ends(g, e, &from, &to);
        uint32_t a = uf_find(parent, from), b = uf_find(parent, to);
        if (a != b) {
            parent[a] = b;
            in_tree[e] = 1;
        }
    }
}

/*
 * Which taken-edge counters of the tree IN_TREE fall into their target block
 * (DRV_FALL_CHOSEN, ED_PROBE_FALL_IN): of the chords that may, the most frequent into
 * each block (then the lowest index; FREQ: the estimate, MEASURED: the counts of
 * --weights first), and where the block before falls into the target (DRV_FALL_JUMP)
 * only when that edge runs less often than the chord (it then jumps over the stub). The
 * others keep their jmp back. BEST, FALLIN: scratch of NBLOCKS; FALLIN keeps, per block,
 * the edge falling into it (UINT32_MAX: none).
 */
static void
choose_falls(drv_graph_t *g, const uint8_t *in_tree, const double *freq, int measured,
             uint32_t *best, uint32_t *fallin)
{
    uint32_t n = g->nedges, X = g->nblocks;
    for (uint32_t i = 0; i < X; i++)
        best[i] = fallin[i] = UINT32_MAX;
    for (uint32_t e = 0; e < n; e++) {
        drv_edge_t *ed = &g->edges[e];
        if (ed->kind == CFG_EDGE_FALL && ed->from != X && ed->to != X)
            fallin[ed->to] = e;
        if (ed->fall_in == 0)
            continue;
        ed->fall_in &= (uint8_t)~DRV_FALL_CHOSEN;
        if (in_tree[e] || is_free(g, ed))
            continue;
        uint32_t *b = &best[ed->to];
        if (*b == UINT32_MAX
            || edge_freq(g, ed, freq[e], measured) > edge_freq(g, &g->edges[*b], freq[*b], measured))
            *b = e;
    }
    for (uint32_t i = 0; i < X; i++) {
        if (best[i] == UINT32_MAX)
            continue;
        drv_edge_t *ed = &g->edges[best[i]];
        if (ed->fall_in & DRV_FALL_JUMP) {
            uint32_t f = fallin[i];
            if (f == UINT32_MAX || g->edges[f].from == ed->from
                || edge_freq(g, &g->edges[f], freq[f], measured)
                       >= edge_freq(g, ed, freq[best[i]], measured))
                continue;
        }
        ed->fall_in |= DRV_FALL_CHOSEN;
    }
}


/* Must G be counted per block for the tree IN_TREE (see qp_place)? */
static int
uses_block_counters(const drv_graph_t *g, const uint8_t *in_tree)
{
    uint32_t n = g->nedges, nb = g->nblocks;
    int per_block = 0, gave_up = 0, xlated = 0;
    for (uint32_t e = 0; e < n; e++) {
        gave_up |= in_tree[e] == 2;
        xlated |= g->edges[e].kind == CFG_EDGE_UNRESOLVED && g->edges[e].from != nb;
        /* Not expected: give_up_cycles left the other uncountable edges a forest,
         * and the tree takes them first. */
        per_block |= !in_tree[e] && is_uncountable(g, e);
    }
    /* A jump translated at run time may land inside the procedure (its miss counter
     * says so) where no edge goes: then flow is not conserved at X or at the block it
     * lands in, which the given-up edges' ends would need. */
    per_block |= gave_up && xlated;
    return per_block;
}

/*
 * The counters of the tree IN_TREE (PER_BLOCK: one per block instead), numbered in RES:
 * the one part of placing that must run in procedure order.
 */
static void
alloc_counters(drv_graph_t *g, const uint8_t *in_tree, int per_block, drv_result_t *res)
{
    uint32_t n = g->nedges, nb = g->nblocks, all = n + nb;
    if (per_block) {
        for (uint32_t i = 0; i < nb; i++)
            g->block_counter[i] = drv_alloc_counter(res);
        res->nblock_counted++;
        return;
    }
    for (uint32_t e = 0; e < all; e++)
        if (!in_tree[e] && !(e < n && is_free(g, &g->edges[e]))) {
            if (e < n)
                g->edges[e].counter = drv_alloc_counter(res);
            else
                g->block_counter[e - n] = drv_alloc_counter(res);
        }
}

static int build_tree_iv(drv_graph_t *g, const double *freq, const int64_t *runs, double *w,
                         uint32_t *fallin, uint32_t *order, uint32_t *parent, uint8_t *in_tree,
                         uint8_t *ground);

/*
 * Without --weights, the tree depends on G alone: built by qp_prepare on any thread into
 * G->tree (and G->tree_per_block), as qp_place would build it. Returns 0 or QP_E*.
 */
static int
prepare_tree(drv_graph_t *g)
{
    uint32_t n = g->nedges, nb = g->nblocks, all = n + nb, nodes = 2 * nb + 1;
    double *w;
    uint32_t *order, *parent, *best;
    uint8_t *ground;
    void **parts[] = { (void **)&w, (void **)&order, (void **)&parent, (void **)&best,
                       (void **)&ground };
    const size_t sizes[] = { ((size_t)all + 1) * sizeof(double), ((size_t)all + 1) * sizeof(uint32_t),
                             (size_t)nodes * sizeof(uint32_t), (2 * (size_t)nb + 1) * sizeof(uint32_t),
                             nodes };
    void *scratch = drv_carve(parts, sizes, sizeof(sizes) / sizeof(sizes[0]));
    uint8_t *in_tree = calloc(all + 1, 1); /* (kept: G->tree) */
    int rc = 0;
    if (scratch == NULL || in_tree == NULL) {
        rc = QP_ENOMEM;
        goto out;
    }
    uint32_t *fallin = best + nb;
    if ((rc = build_tree_iv(g, g->freq, NULL, w, fallin, order, parent, in_tree, ground)) < 0)
        goto out;
    g->tree_per_block = (uint8_t)uses_block_counters(g, in_tree);
    if (g->tree_per_block) {
        memset(in_tree, 1, n);
        memset(in_tree + n, 0, nb);
        drv_iv_plan_free(g->iv); /* (every block its own increment) */
        g->iv = NULL;
    }
    choose_falls(g, in_tree, g->freq, 0, best, fallin);
    g->tree = in_tree;
    in_tree = NULL;
out:
    free(scratch);
    free(in_tree);
    return rc;
}

/* Keep procedure PROC among the DRV_GAPS largest gaps GAPS (*NGAPS of them) between
 * what its counters add over the profiled run placed one way (STATIC_INSNS: without
 * --weights) and another (WEIGHTED_INSNS). Called in procedure order: ties keep the
 * earlier procedure first. */
static void
note_gap(drv_gap_t *gaps, uint32_t *ngaps, uint32_t proc, uint64_t static_insns,
         uint64_t weighted_insns)
{
    if (static_insns <= weighted_insns)
        return;
    uint64_t gap = static_insns - weighted_insns;
    uint32_t k = *ngaps;
    while (k > 0 && gaps[k - 1].static_insns - gaps[k - 1].weighted_insns < gap)
        k--;
    if (k == DRV_GAPS)
        return;
    uint32_t last = *ngaps < DRV_GAPS ? (*ngaps)++ : DRV_GAPS - 1;
    memmove(&gaps[k + 1], &gaps[k], (last - k) * sizeof(drv_gap_t));
    gaps[k] = (drv_gap_t) { proc, static_insns, weighted_insns };
}

/* What the induction-variable candidates of G would cost in the tree (qp --weights). */
typedef struct iv_projection {
    drv_cost_t weighted;   /* the weights' tree: what its counters add over the run */
    drv_cost_t placed;     /* the static estimate's tree: the same */
    uint32_t found;        /* candidates */
    uint32_t used;         /* blocks the weights' tree counts so */
    uint8_t have_weighted, have_placed; /* (else the procedure is counted per block) */
} iv_projection_t;

/* Each candidate's price into PRICE (per block, -1: none; the cheapest of a block's
 * candidates, WHICH (unless NULL) the candidate's index): a counter on every way into and
 * out of its loop, run as often as the profile says (MEASURED, -1 when it lacks one of
 * them) or as estimated (FREQ). */
static void
iv_prices(const drv_graph_t *g, const cfg_loop_forest_t *f, const drv_iv_loop_t *iv,
          uint32_t niv, const double *freq, int measured, double *price, uint32_t *which)
{
    for (uint32_t i = 0; i < g->nblocks; i++) {
        price[i] = -1;
        if (which != NULL)
            which[i] = UINT32_MAX;
    }
    for (uint32_t k = 0; k < niv; k++) {
        double p = 0;
        for (uint32_t e = 0; e < g->nedges && p >= 0; e++) {
            if (!drv_iv_edge_crosses(g, f, &iv[k], e))
                continue;
            int64_t c = measured ? measured_count(g, &g->edges[e]) : 0;
            double runs = measured ? (double)c : freq[e];
            p = c < 0 ? -1 : p + runs * counter_cost(&g->edges[e], 0);
        }
        if (p >= 0 && (price[iv[k].block] < 0 || p < price[iv[k].block])) {
            price[iv[k].block] = p;
            if (which != NULL)
                which[iv[k].block] = k;
        }
    }
}

/* Does the tree IN_TREE (weights W, as build_tree left them) count block I of G from an
 * induction variable, at price PRICE[I]? Its own edge is a chord weighing that price. */
static int
iv_chosen(const drv_graph_t *g, const uint8_t *in_tree, const double *w, const double *price,
          uint32_t i)
{
    return price[i] >= 0 && w[g->nedges + i] == price[i] && !in_tree[g->nedges + i];
}

/* Per block of G, what its count from an induction variable costs over the profiled run
 * where G->iv counts it so, else -1 (for add_weighted_cost); NULL: no memory. */
static double *
iv_used_prices(const drv_graph_t *g)
{
    double *price = malloc((g->nblocks + 1) * sizeof(double));
    if (price == NULL)
        return NULL;
    iv_prices(g, g->iv->forest, g->iv->v, g->iv->n, NULL, 1, price, NULL);
    for (uint32_t i = 0; i < g->nblocks; i++)
        if (g->iv->cand[i] == UINT32_MAX)
            price[i] = -1;
    return price;
}

/*
 * G's tree (build_tree's, with its arguments) where G counts loops from their induction
 * variables (drv_graph_t.iv_loops, an ISA with emit_counter_add_reg_at): each candidate
 * that can be (drv_iv_find's; for now a step of +1 or -1, so that the counter counts the
 * block itself, which the description states as for any block counter; every spot
 * holding the register's value: drv_iv_spots_ok) priced from the measured counts (RUNS
 * not NULL) or the estimate, and the blocks the tree then counts so into G->iv (NULL:
 * none). 0 or QP_ENOMEM.
 */
static int
build_tree_iv(drv_graph_t *g, const double *freq, const int64_t *runs, double *w,
              uint32_t *fallin, uint32_t *order, uint32_t *parent, uint8_t *in_tree,
              uint8_t *ground)
{
    drv_iv_plan_free(g->iv);
    g->iv = NULL;
    if (!g->iv_loops || cfg_image_isa(g->prog->img)->emit_counter_add_reg_at == NULL) {
        build_tree(g, freq, runs, NULL, w, fallin, order, parent, in_tree, ground);
        return 0;
    }
    uint32_t nb = g->nblocks, kept = 0, used = 0;
    drv_iv_plan_t *p = calloc(1, sizeof(*p));
    double *price = malloc((nb + 1) * sizeof(double));
    int rc = p == NULL || price == NULL ? QP_ENOMEM : drv_iv_find(g, &p->forest, &p->v, &p->n);
    if (rc == 0 && (p->cand = malloc((nb + 1) * sizeof(uint32_t))) == NULL)
        rc = QP_ENOMEM;
    for (uint32_t k = 0; rc == 0 && k < p->n; k++)
        if ((p->v[k].step == 1 || p->v[k].step == -1) && drv_iv_spots_ok(g, p->forest, &p->v[k]))
            p->v[kept++] = p->v[k];
    if (rc == 0) {
        p->n = kept;
        iv_prices(g, p->forest, p->v, p->n, freq, runs != NULL, price, p->cand);
    }
    build_tree(g, freq, runs, rc == 0 && kept > 0 ? price : NULL, w, fallin, order, parent,
               in_tree, ground);
    for (uint32_t i = 0; rc == 0 && i < nb; i++) {
        if (iv_chosen(g, in_tree, w, price, i))
            used++;
        else
            p->cand[i] = UINT32_MAX;
    }
    if (rc == 0 && used > 0)
        g->iv = p;
    else
        drv_iv_plan_free(p);
    free(price);
    return rc;
}

/*
 * The tree of G with blocks counted from induction variables where their price TREE_PRICE
 * is below the block's own weight (RUNS, the measured counts, or NULL: the estimate's),
 * and what its counters add over the profiled run (block counts RUNS_M; such a block at
 * COST_PRICE) into *COST; *USED: the blocks counted so. Returns 0, or -1 when G is then
 * counted per block. Scratch as build_tree's; USE: of G's blocks.
 */
static int
iv_tree_cost(drv_graph_t *g, const double *freq, const int64_t *runs, const int64_t *runs_m,
             const double *tree_price, const double *cost_price, double *w, uint32_t *fallin,
             uint32_t *order, uint32_t *parent, uint8_t *in_tree, uint8_t *ground,
             uint32_t *best, double *use, drv_cost_t *cost, uint32_t *used)
{
    uint32_t n = g->nedges, nb = g->nblocks, all = n + nb;
    memset(in_tree, 0, all + 1);
    memset(ground, 0, 2 * (size_t)nb + 1);
    build_tree(g, freq, runs, tree_price, w, fallin, order, parent, in_tree, ground);
    if (uses_block_counters(g, in_tree))
        return -1;
    choose_falls(g, in_tree, freq, runs != NULL, best, fallin);
    *used = 0;
    for (uint32_t i = 0; i < nb; i++) {
        int chosen = iv_chosen(g, in_tree, w, tree_price, i);
        use[i] = chosen ? cost_price[i] : -1;
        *used += (uint32_t)chosen;
    }
    uint32_t unknown = 0;
    *cost = (drv_cost_t) { 0 };
    add_weighted_cost(g, in_tree, runs_m, fallin, use, cost, &unknown);
    return 0;
}

/*
 * qp --weights: what G's counters would add over the profiled run (RUNS: the measured
 * block counts) with blocks counted from induction variables where that costs less
 * (drv_ivloop.c), in the weights' tree and in the static estimate's, into *P (nothing
 * when G has no candidate). Scratch as build_tree's.
 */
static int
project_iv(drv_graph_t *g, const double *freq, const int64_t *runs, double *w,
           uint32_t *fallin, uint32_t *order, uint32_t *parent, uint8_t *in_tree,
           uint8_t *ground, uint32_t *best, iv_projection_t *p)
{
    cfg_loop_forest_t *f = NULL;
    drv_iv_loop_t *iv = NULL;
    uint32_t niv = 0, nb = g->nblocks, unused;
    int rc = drv_iv_find(g, &f, &iv, &niv);
    double *price = rc == 0 && niv > 0 ? malloc(3 * ((size_t)nb + 1) * sizeof(double)) : NULL;
    if (rc < 0 || niv == 0 || price == NULL) {
        rc = rc < 0 ? rc : niv > 0 ? QP_ENOMEM : 0;
        goto out;
    }
    double *estimated = price + nb + 1, *use = estimated + nb + 1;
    p->found = niv;
    iv_prices(g, f, iv, niv, freq, 1, price, NULL);
    iv_prices(g, f, iv, niv, freq, 0, estimated, NULL);
    p->have_weighted = iv_tree_cost(g, freq, runs, runs, price, price, w, fallin, order,
                                    parent, in_tree, ground, best, use, &p->weighted,
                                    &p->used) == 0;
    p->have_placed = iv_tree_cost(g, freq, NULL, runs, estimated, price, w, fallin, order,
                                  parent, in_tree, ground, best, use, &p->placed,
                                  &unused) == 0;
out:
    free(price);
    free(iv);
    cfg_loop_forest_destroy(f);
    return rc;
}

static int
qp_place(drv_graph_t *g, drv_result_t *res, const char **why)
{
    if (g->tree != NULL) { /* made by qp_prepare */
        alloc_counters(g, g->tree, g->tree_per_block, res);
        return 0;
    }
    uint32_t n = g->nedges, nb = g->nblocks, all = n + nb, nodes = 2 * nb + 1;
    double *w = malloc((all + 1) * sizeof(double));
    double *freq = g->freq != NULL ? g->freq : malloc((n + 1) * sizeof(double));
    int estimated = g->freq != NULL; /* by qp_prepare, ahead */
    g->freq = NULL; /* freed here */
    uint32_t *order = malloc((all + 1) * sizeof(uint32_t));
    uint32_t *parent = malloc(nodes * sizeof(uint32_t));
    uint8_t *in_tree = calloc(all + 1, 1); /* 2: given up (no counter, unknown) */
    uint8_t *ground = calloc(nodes, 1);
    int64_t *runs = g->weights != NULL ? malloc((nb + 1) * sizeof(int64_t)) : NULL;
    uint32_t *best = malloc((2 * nb + 1) * sizeof(uint32_t)), *fallin = best + nb;
    int rc = 0, static_added = 0;
    iv_projection_t iv = { 0 };
    (void)why; /* qp measures every procedure it gets */
    if (!w || !freq || !order || !parent || !in_tree || !ground || !best
        || (g->weights != NULL && runs == NULL)) {
        rc = QP_ENOMEM;
        goto out;
    }
    if (!estimated && (rc = estimate_freq(g, freq)) < 0)
        goto out;
    drv_cost_t static_cost = { 0 };
    if (runs != NULL) {
        measured_blocks(g, runs);
        /* First the tree without --weights, to say what it would cost over that run. */
        build_tree(g, freq, NULL, NULL, w, fallin, order, parent, in_tree, ground);
        choose_falls(g, in_tree, freq, 0, best, fallin);
        if (!uses_block_counters(g, in_tree)) {
            uint32_t unknown = 0;
            add_weighted_cost(g, in_tree, runs, fallin, NULL, &static_cost, &unknown);
            drv_cost_add(&res->weighted_static, &static_cost);
            static_added = 1;
        }
        memset(in_tree, 0, all + 1);
        memset(ground, 0, nodes);
        /* Then the tree with loops counted from induction variables, priced only. */
        if ((rc = project_iv(g, freq, runs, w, fallin, order, parent, in_tree, ground, best,
                             &iv)) < 0)
            goto out;
        if (static_added)
            drv_cost_add(&res->placed_iv, iv.have_placed ? &iv.placed : &static_cost);
        memset(in_tree, 0, all + 1);
        memset(ground, 0, nodes);
    }
    if ((rc = build_tree_iv(g, freq, runs, w, fallin, order, parent, in_tree, ground)) < 0)
        goto out;
    int per_block = uses_block_counters(g, in_tree);
    if (per_block) {
        /* Count this procedure's blocks instead: that gives every block count and
         * the calls; the report says which edge counts stay unknown. */
        memset(in_tree, 1, n);
        memset(in_tree + n, 0, nb);
        drv_iv_plan_free(g->iv);
        g->iv = NULL;
        choose_falls(g, in_tree, freq, 0, best, fallin); /* none */
        if (g->weights != NULL) {
            drv_cost_t cost = { 0 };
            add_weighted_cost(g, in_tree, runs, fallin, NULL, &cost, &res->weighted_unknown);
            drv_cost_add(&res->weighted, &cost);
            drv_cost_add(&res->weighted_iv, &cost);
            if (!static_added) { /* per block either way */
                drv_cost_add(&res->weighted_static, &cost);
                drv_cost_add(&res->placed_iv, &cost);
            }
        }
        alloc_counters(g, in_tree, 1, res);
        goto out;
    }
    choose_falls(g, in_tree, freq, runs != NULL, best, fallin);
    if (g->weights != NULL) {
        drv_cost_t cost = { 0 };
        double *use = g->iv != NULL ? iv_used_prices(g) : NULL;
        if (g->iv != NULL && use == NULL) {
            rc = QP_ENOMEM;
            goto out;
        }
        add_weighted_cost(g, in_tree, runs, fallin, use, &cost, &res->weighted_unknown);
        free(use);
        drv_cost_add(&res->weighted, &cost);
        if (static_added)
            note_gap(res->gaps, &res->ngaps, g->proc, drv_cost_insns(&static_cost),
                     drv_cost_insns(&cost));
        if (iv.have_weighted && drv_cost_insns(&iv.weighted) < drv_cost_insns(&cost)) {
            drv_cost_add(&res->weighted_iv, &iv.weighted);
            res->niv_used += iv.used;
            note_gap(res->iv_gaps, &res->niv_gaps, g->proc, drv_cost_insns(&cost),
                     drv_cost_insns(&iv.weighted));
        } else
            drv_cost_add(&res->weighted_iv, &cost);
        res->niv_found += iv.found;
    }
    alloc_counters(g, in_tree, 0, res);
out:
    free(w);
    free(freq);
    free(order);
    free(parent);
    free(in_tree);
    free(ground);
    free(runs);
    free(best);
    return rc;
}

/* drv_ops_t.prepare: the frequency estimate, which depends on the graph alone. */
static int
qp_prepare(drv_graph_t *g)
{
    free(g->freq);
    if ((g->freq = malloc((g->nedges + 1) * sizeof(double))) == NULL)
        return QP_ENOMEM;
    int rc = estimate_freq(g, g->freq);
    if (rc == 0 && g->weights == NULL) /* (with them, placing adds to RES in between) */
        rc = prepare_tree(g);
    if (rc < 0) {
        free(g->freq);
        g->freq = NULL;
    }
    return rc;
}

const drv_ops_t drv_qp_ops = { "qp", QP_DRIVER_QP, qp_place, 0, qp_prepare };
