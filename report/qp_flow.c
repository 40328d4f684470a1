/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Flow reconstruction (seed 004, Section 2; Ball and Larus, "Optimally profiling and
 * tracing programs"). The graph of one procedure: its blocks, the virtual node X for
 * EXIT and ENTRY, its description edges, and per block an "abandoned" count of known
 * extra flow from the block to X (calls that never returned because the program
 * exited below them). At every node, flow in = flow out:
 *
 *     block b:  sum(in-edges) = count(b) = sum(out-edges) + abandoned(b)
 *     X:        sum(leaving edges) + sum(abandoned) = sum(entry and root edges)
 *
 * A worklist peels the graph: a node whose in-edges (or out-edges) are all known gets its
 * count; a node whose count is known and that has exactly one unknown in-edge (or
 * out-edge) solves it. When the unknown edges form a spanning forest (qp's placement)
 * this determines everything; otherwise what is left is reported unknown. Sums are kept
 * in 128 bits: a procedure has fewer than 2^32 edges of at most 2^64 - 1 each, so they
 * never overflow, and a negative or too large solution is detected, not wrapped.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "report/qp_flow.h"

typedef unsigned __int128 u128;
typedef __int128 s128;

/* The solver's view of one node. */
typedef struct flow_node {
    u128 in_sum;          /* sum of the known in-edges */
    u128 out_sum;         /* sum of the known out-edges */
    u128 extra_in;        /* X: every abandoned count; blocks: 0 */
    u128 extra_out;       /* blocks: abandoned; X: 0 */
    u128 count;           /* executions of the node, when known */
    uint32_t unknown_in;  /* in-edges not known yet */
    uint32_t unknown_out; /* out-edges not known yet */
    uint32_t in_first;    /* its in-edges: in_list[in_first .. in_first + nin) */
    uint32_t nin;
    uint32_t out_first; /* its out-edges: out_list[out_first .. out_first + nout) */
    uint32_t nout;
    uint8_t count_known;
    uint8_t queued;
    uint8_t violated; /* a violation was reported here already */
} flow_node_t;

typedef struct flow_solver {
    const qp_desc_t *d;
    const qp_desc_proc_t *p;
    qp_flow_t *f;    /* results */
    uint32_t nnodes; /* blocks + X */
    flow_node_t *nodes;
    uint32_t *src, *dst; /* local node of each edge's ends */
    uint32_t *in_list;   /* edge indices grouped by destination node */
    uint32_t *out_list;  /* edge indices grouped by source node */
    uint32_t *work;      /* worklist (a stack of nodes) */
    uint32_t nwork;
    size_t viol_cap;
} flow_solver_t;

const char *
qp_flow_state_name(uint8_t state)
{
    switch (state) {
    case QP_FLOW_MEASURED: return "measured";
    case QP_FLOW_SOLVED: return "reconstructed";
    case QP_FLOW_CLAMPED: return "inconsistent";
    default: return "unknown";
    }
}

void
qp_flow_free(qp_flow_t *f)
{
    if (f == NULL)
        return;
    free(f->edge_count);
    free(f->edge_state);
    free(f->block_count);
    free(f->block_state);
    free(f->violations);
    memset(f, 0, sizeof(*f));
}

static uint64_t
saturate(u128 v)
{
    return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

static int
add_violation(flow_solver_t *s, uint8_t kind, uint32_t node, uint32_t edge, u128 count,
    u128 in, u128 out)
{
    qp_flow_t *f = s->f;
    if (f->nviolations == s->viol_cap) {
        size_t cap = s->viol_cap ? 2 * s->viol_cap : 8;
        qp_flow_violation_t *v = realloc(f->violations, cap * sizeof(*v));
        if (v == NULL)
            return QP_ENOMEM;
        f->violations = v;
        s->viol_cap = cap;
    }
    s->nodes[node].violated = 1;
    qp_flow_violation_t *v = &f->violations[f->nviolations++];
    v->kind = kind;
    v->block = node == s->p->nblocks ? QP_VIRT : s->p->block + node;
    v->edge = edge == QP_VIRT ? QP_VIRT : s->p->edge + edge;
    v->count = saturate(count);
    v->in = saturate(in);
    v->out = saturate(out);
    return 0;
}

static void
push(flow_solver_t *s, uint32_t node)
{
    if (!s->nodes[node].queued) {
        s->nodes[node].queued = 1;
        s->work[s->nwork++] = node;
    }
}

/* The local node of a global block index or X. */
static uint32_t
local_node(const qp_desc_proc_t *p, uint32_t block)
{
    return block == QP_VIRT ? p->nblocks : block - p->block;
}

/*****************************************************************************
 * Setting up the graph
 */

static int
alloc_solver(flow_solver_t *s)
{
    qp_flow_t *f = s->f;
    uint32_t ne = f->nedges, nb = f->nblocks;
    size_t ne1 = ne ? ne : 1;
    s->nnodes = nb + 1;
    s->nodes = calloc(s->nnodes, sizeof(flow_node_t));
    s->src = malloc(ne1 * sizeof(uint32_t));
    s->dst = malloc(ne1 * sizeof(uint32_t));
    s->in_list = malloc(ne1 * sizeof(uint32_t));
    s->out_list = malloc(ne1 * sizeof(uint32_t));
    s->work = malloc(s->nnodes * sizeof(uint32_t));
    f->edge_count = calloc(ne1, sizeof(uint64_t));
    f->edge_state = calloc(ne1, 1);
    f->block_count = calloc(nb ? nb : 1, sizeof(uint64_t));
    f->block_state = calloc(nb ? nb : 1, 1);
    if (!s->nodes || !s->src || !s->dst || !s->in_list || !s->out_list || !s->work
        || !f->edge_count || !f->edge_state || !f->block_count || !f->block_state)
        return QP_ENOMEM;
    return 0;
}

static void
free_solver(flow_solver_t *s)
{
    free(s->nodes);
    free(s->src);
    free(s->dst);
    free(s->in_list);
    free(s->out_list);
    free(s->work);
}

/* Group the edges by source and by destination node (counting sort). */
static void
build_adjacency(flow_solver_t *s)
{
    const qp_desc_edge_t *edges = &s->d->edges[s->p->edge];
    uint32_t ne = s->f->nedges;
    for (uint32_t e = 0; e < ne; e++) {
        s->src[e] = local_node(s->p, edges[e].from);
        s->dst[e] = local_node(s->p, edges[e].to);
        s->nodes[s->src[e]].nout++;
        s->nodes[s->dst[e]].nin++;
    }
    uint32_t in_at = 0, out_at = 0;
    for (uint32_t v = 0; v < s->nnodes; v++) {
        flow_node_t *n = &s->nodes[v];
        n->in_first = in_at;
        n->out_first = out_at;
        in_at += n->nin;
        out_at += n->nout;
        n->unknown_in = n->nin;
        n->unknown_out = n->nout;
        n->nin = n->nout = 0; /* refilled below */
    }
    for (uint32_t e = 0; e < ne; e++) {
        flow_node_t *a = &s->nodes[s->src[e]], *b = &s->nodes[s->dst[e]];
        s->out_list[a->out_first + a->nout++] = e;
        s->in_list[b->in_first + b->nin++] = e;
    }
}

/* A known count for edge E: update both ends and queue them. */
static void
set_edge(flow_solver_t *s, uint32_t e, uint64_t count, uint8_t state)
{
    s->f->edge_count[e] = count;
    s->f->edge_state[e] = state;
    flow_node_t *a = &s->nodes[s->src[e]], *b = &s->nodes[s->dst[e]];
    a->out_sum += count;
    a->unknown_out--;
    b->in_sum += count;
    b->unknown_in--;
    push(s, s->src[e]);
    push(s, s->dst[e]);
}

static void
set_node_count(flow_solver_t *s, uint32_t v, u128 count, uint8_t state)
{
    flow_node_t *n = &s->nodes[v];
    n->count = count;
    n->count_known = 1;
    if (v < s->f->nblocks) {
        s->f->block_count[v] = saturate(count);
        s->f->block_state[v] = state;
    }
}

/* The measured counts, the abandoned flow, and the initial worklist. */
static void
seed(flow_solver_t *s, const uint64_t *counters, const uint64_t *abandoned)
{
    const qp_desc_edge_t *edges = &s->d->edges[s->p->edge];
    const qp_desc_block_t *blocks = &s->d->blocks[s->p->block];
    uint32_t nb = s->f->nblocks;
    for (uint32_t b = 0; b < nb; b++) {
        if (abandoned != NULL) {
            s->nodes[b].extra_out = abandoned[s->p->block + b];
            s->nodes[nb].extra_in += abandoned[s->p->block + b];
        }
        if (blocks[b].counter != QP_NOCOUNTER)
            set_node_count(s, b, counters[blocks[b].counter], QP_FLOW_MEASURED);
    }
    for (uint32_t e = 0; e < s->f->nedges; e++)
        if (edges[e].counter != QP_NOCOUNTER)
            set_edge(s, e, counters[edges[e].counter], QP_FLOW_MEASURED);
    for (uint32_t v = 0; v < s->nnodes; v++)
        push(s, v);
}

/*****************************************************************************
 * Solving
 */

/* The one unknown edge among LIST[first .. first + n). */
static uint32_t
find_unknown(const flow_solver_t *s, const uint32_t *list, uint32_t first, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (s->f->edge_state[list[first + i]] == QP_FLOW_UNKNOWN)
            return list[first + i];
    assert(!"the caller counted one unknown edge");
    return 0;
}

/* Edge E must carry COUNT - KNOWN; a negative result is a violation, clamped to 0. */
static int
solve_edge(flow_solver_t *s, uint32_t v, uint32_t e, u128 count, u128 known)
{
    flow_node_t *n = &s->nodes[v];
    if (count < known) {
        set_edge(s, e, 0, QP_FLOW_CLAMPED);
        return add_violation(s, QP_FLOW_V_NEGATIVE, v, e, count, n->in_sum + n->extra_in,
            n->out_sum + n->extra_out);
    }
    u128 val = count - known;
    if (val > UINT64_MAX) {
        set_edge(s, e, UINT64_MAX, QP_FLOW_CLAMPED);
        return add_violation(s, QP_FLOW_V_OVERFLOW, v, e, count, n->in_sum, n->out_sum);
    }
    set_edge(s, e, (uint64_t)val, QP_FLOW_SOLVED);
    return 0;
}

static int
visit(flow_solver_t *s, uint32_t v)
{
    flow_node_t *n = &s->nodes[v];
    if (!n->count_known && n->unknown_in == 0)
        set_node_count(s, v, n->in_sum + n->extra_in, QP_FLOW_SOLVED);
    else if (!n->count_known && n->unknown_out == 0)
        set_node_count(s, v, n->out_sum + n->extra_out, QP_FLOW_SOLVED);
    if (!n->count_known)
        return 0;
    if (n->unknown_in == 1) {
        uint32_t e = find_unknown(s, s->in_list, n->in_first, n->nin);
        QP_CHECK(solve_edge(s, v, e, n->count, n->in_sum + n->extra_in));
    }
    /* Solving the in-edge may have been a self-loop that also was the out-edge. */
    if (n->unknown_out == 1) {
        uint32_t e = find_unknown(s, s->out_list, n->out_first, n->nout);
        QP_CHECK(solve_edge(s, v, e, n->count, n->out_sum + n->extra_out));
    }
    return 0;
}

/* Kirchhoff at every node whose counts over-determine it. */
static int
check_balance(flow_solver_t *s)
{
    for (uint32_t v = 0; v < s->nnodes; v++) {
        flow_node_t *n = &s->nodes[v];
        if (!n->count_known)
            continue;
        u128 in = n->in_sum + n->extra_in, out = n->out_sum + n->extra_out;
        /* Unknown edges can only add flow: known sums above the count are wrong too. */
        int bad = n->unknown_in == 0 ? in != n->count : in > n->count;
        bad |= n->unknown_out == 0 ? out != n->count : out > n->count;
        if (bad && !n->violated)
            QP_CHECK(
                add_violation(s, QP_FLOW_V_UNBALANCED, v, QP_VIRT, n->count, in, out));
    }
    return 0;
}

/* Calls, instructions and unknown edges, from the solved counts. */
static void
summarize(flow_solver_t *s)
{
    qp_flow_t *f = s->f;
    const qp_desc_block_t *blocks = &s->d->blocks[s->p->block];
    uint32_t entry = qp_desc_entry_edge(s->d, f->proc);
    if (entry != QP_VIRT) {
        uint8_t st = f->edge_state[entry - s->p->edge];
        f->calls_known = st == QP_FLOW_MEASURED || st == QP_FLOW_SOLVED;
        f->calls = f->edge_count[entry - s->p->edge];
    }
    u128 insns = 0;
    f->insns_exact = 1;
    for (uint32_t b = 0; b < f->nblocks; b++) {
        if (f->block_state[b] == QP_FLOW_UNKNOWN)
            f->insns_exact = 0;
        insns += (u128)f->block_count[b] * blocks[b].ninsns;
    }
    if (insns > UINT64_MAX)
        f->insns_exact = 0;
    f->insns = saturate(insns);
    for (uint32_t e = 0; e < f->nedges; e++)
        f->nunknown_edges += f->edge_state[e] == QP_FLOW_UNKNOWN;
}

int
qp_flow_solve(const qp_desc_t *d, uint32_t proc, const uint64_t *counters,
    size_t ncounters, const uint64_t *abandoned, qp_flow_t *out)
{
    if (out != NULL)
        memset(out, 0, sizeof(*out));
    if (d == NULL || out == NULL || proc >= d->hdr.nprocs
        || !(d->procs[proc].flags & QP_PROC_MEASURED) || ncounters != d->hdr.ncounters
        || (ncounters && counters == NULL))
        return QP_EINVAL;
    flow_solver_t s = { 0 };
    s.d = d;
    s.p = &d->procs[proc];
    s.f = out;
    out->proc = proc;
    out->nedges = s.p->nedges;
    out->nblocks = s.p->nblocks;
    int rc = alloc_solver(&s);
    if (rc == 0) {
        build_adjacency(&s);
        seed(&s, counters, abandoned);
        while (rc == 0 && s.nwork > 0) {
            uint32_t v = s.work[--s.nwork];
            s.nodes[v].queued = 0;
            rc = visit(&s, v);
        }
    }
    if (rc == 0)
        rc = check_balance(&s);
    if (rc == 0)
        summarize(&s);
    free_solver(&s);
    if (rc < 0)
        qp_flow_free(out);
    return rc;
}
