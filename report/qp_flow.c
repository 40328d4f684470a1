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

#include "base/qp_pool.h"
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
    const qp_desc_edge_t *edges = qp_desc_proc_edges(s->d, s->f->proc);
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

/* The measured counts, the abandoned flow, the calls of a procedure counted by its
 * calls (ENTRIES), and the initial worklist. */
static void
seed(flow_solver_t *s, const uint64_t *counters, const uint64_t *abandoned,
    const qp_flow_entries_t *entries)
{
    uint32_t proc = s->f->proc;
    if ((s->p->flags & QP_PROC_BY_CALLS) && entries != NULL && proc < entries->nprocs
        && entries->known[proc]) {
        uint32_t e = qp_desc_entry_edge(s->d, proc);
        if (e != QP_VIRT)
            set_edge(s, e - s->p->edge, entries->count[proc], QP_FLOW_SOLVED);
    }
    const qp_desc_edge_t *edges = qp_desc_proc_edges(s->d, proc);
    const qp_desc_block_t *blocks = qp_desc_proc_blocks(s->d, proc);
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
    const qp_desc_block_t *blocks = qp_desc_proc_blocks(s->d, f->proc);
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
    return qp_flow_solve_in(d, proc, counters, ncounters, abandoned, NULL, out);
}

/* Whether a block of PROC has abandoned flow in ABANDONED as ENTRIES knows it: 1, 0
 * (its blocks' counts need not be read), or -1 when not known. */
static int
left_known(const uint64_t *abandoned, const qp_flow_entries_t *entries, uint32_t proc)
{
    if (abandoned == NULL)
        return 0;
    if (entries == NULL || entries->left == NULL || entries->left_for != abandoned
        || proc >= entries->nprocs)
        return -1;
    return entries->left[proc] != 0;
}

/* Are PROC's inputs all zero (qp_flow_zero_known)? */
static int
inputs_zero(const qp_desc_t *d, uint32_t proc, const uint64_t *counters,
    const uint64_t *abandoned, const qp_flow_entries_t *entries)
{
    const qp_desc_proc_t *p = &d->procs[proc];
    if ((p->flags & QP_PROC_BY_CALLS) && entries != NULL && proc < entries->nprocs
        && entries->known[proc] && entries->count[proc] != 0)
        return 0;
    int left = left_known(abandoned, entries, proc);
    if (left == 1)
        return 0;
    if (left == 0)
        abandoned = NULL; /* none in its blocks */
    if (!qp_desc_loaded(d, proc)) {
        /* Not decoded (a lazy description): zero when no counter of its chunk counted
         * (else it is decoded to be solved). */
        if (!qp_desc_chunk_zero(d, proc, counters))
            return 0;
        for (uint32_t b = 0; abandoned != NULL && b < p->nblocks; b++)
            if (abandoned[p->block + b] != 0)
                return 0;
        return 1;
    }
    const qp_desc_block_t *blocks = qp_desc_proc_blocks(d, proc);
    for (uint32_t b = 0; b < p->nblocks; b++)
        if ((blocks[b].counter != QP_NOCOUNTER && counters[blocks[b].counter] != 0)
            || (abandoned != NULL && abandoned[p->block + b] != 0))
            return 0;
    const qp_desc_edge_t *edges = qp_desc_proc_edges(d, proc);
    for (uint32_t e = 0; e < p->nedges; e++)
        if (edges[e].counter != QP_NOCOUNTER && counters[edges[e].counter] != 0)
            return 0;
    return 1;
}

/* ENTRIES' kept solution of PROC (inputs all zero) taken from D's summary, which the
 * writer solved as qp_flow_solve_in does (qp_flow_zero_summaries): 1, or 0 when D has
 * none. A procedure counted by its calls: the summary for its entry count as ENTRIES
 * knows it. */
static int
stored_zero(const qp_desc_t *d, uint32_t proc, const qp_flow_entries_t *entries)
{
    const qp_desc_zero_t *z = d->zero;
    if (d->procs[proc].flags & QP_PROC_BY_CALLS)
        z = entries->known[proc] ? d->zero_entry : d->zero;
    if (z == NULL || !z[proc].given)
        return 0;
    z += proc;
    entries->zero[proc] = (qp_flow_zero_t) { z->nunknown_edges, 1, z->calls_known,
                                             z->insns_exact, z->all_known };
    return 1;
}

int
qp_flow_zero_known(const qp_desc_t *d, uint32_t proc, const uint64_t *counters,
    const uint64_t *abandoned, const qp_flow_entries_t *entries, qp_flow_zero_t *out)
{
    if (d == NULL || entries == NULL || entries->zero == NULL || proc >= entries->nprocs
        || proc >= d->hdr.nprocs || !inputs_zero(d, proc, counters, abandoned, entries)
        || (!entries->zero[proc].done && !stored_zero(d, proc, entries)))
        return 0;
    *out = entries->zero[proc];
    return 1;
}

/* What F, a solution with zero inputs, says is known. */
static qp_flow_zero_t
zero_summary(const qp_flow_t *f)
{
    uint8_t all = f->nunknown_edges == 0;
    for (uint32_t b = 0; b < f->nblocks && all; b++)
        all = f->block_state[b] == QP_FLOW_MEASURED
            || f->block_state[b] == QP_FLOW_SOLVED;
    for (uint32_t e = 0; e < f->nedges && all; e++)
        all = f->edge_state[e] == QP_FLOW_MEASURED || f->edge_state[e] == QP_FLOW_SOLVED;
    return (qp_flow_zero_t) { f->nunknown_edges, 1, (uint8_t)f->calls_known,
                              (uint8_t)f->insns_exact, all };
}

/* PROC of D solved with zero counters (ENTRIES: how its entry count is known) into *Z. */
static int
summarize_one(qp_desc_t *d, uint32_t proc, const uint64_t *zeros,
    const qp_flow_entries_t *entries, qp_desc_zero_t *z)
{
    qp_flow_t f;
    int rc = qp_flow_solve_in(d, proc, zeros, d->hdr.ncounters, NULL, entries, &f);
    if (rc == QP_ENOMEM)
        return rc;
    if (rc == 0) {
        qp_flow_zero_t s = zero_summary(&f);
        *z = (qp_desc_zero_t) { s.nunknown_edges, 1, s.calls_known, s.insns_exact,
                                s.all_known };
        qp_flow_free(&f);
    }
    return 0;
}

/* The state qp_flow_zero_summaries' items share (read only but for their own
 * procedure's summaries). */
typedef struct summaries_job {
    qp_desc_t *d;
    const uint64_t *zeros;            /* the counters, all 0 */
    const qp_flow_entries_t *entries; /* every entry count known to be 0 */
} summaries_job_t;

/* qp_task_fn: procedure K's summaries (a procedure's solution reads the description
 * alone, and writes its own entries of d->zero and d->zero_entry). */
static int
summarize_task(void *arg, unsigned worker, size_t k)
{
    (void)worker;
    const summaries_job_t *j = arg;
    uint32_t i = (uint32_t)k, flags = j->d->procs[i].flags;
    if (!(flags & QP_PROC_MEASURED))
        return 0;
    int rc = summarize_one(j->d, i, j->zeros, NULL, &j->d->zero[i]);
    if (rc == 0 && (flags & QP_PROC_BY_CALLS))
        rc = summarize_one(j->d, i, j->zeros, j->entries, &j->d->zero_entry[i]);
    return rc;
}

int
qp_flow_zero_summaries(qp_desc_t *d, unsigned threads)
{
    uint32_t n = d->hdr.nprocs;
    free(d->zero);
    free(d->zero_entry);
    d->zero = calloc(n + 1, sizeof(qp_desc_zero_t));
    d->zero_entry = calloc(n + 1, sizeof(qp_desc_zero_t));
    /* The counters, all 0; and every entry count known to be 0. */
    uint64_t *zeros = calloc((size_t)d->hdr.ncounters + 1, sizeof(uint64_t));
    uint64_t *count = calloc(n + 1, sizeof(uint64_t));
    uint8_t *known = malloc(n + 1);
    int rc = d->zero && d->zero_entry && zeros && count && known ? 0 : QP_ENOMEM;
    if (known != NULL)
        memset(known, 1, n + 1);
    qp_flow_entries_t entries = { n, count, known, NULL, NULL, NULL };
    summaries_job_t job = { d, zeros, &entries };
    if (rc == 0)
        rc = qp_parallel_for(threads, n, 64, summarize_task, &job, NULL);
    free(zeros);
    free(count);
    free(known);
    if (rc < 0) {
        free(d->zero);
        free(d->zero_entry);
        d->zero = d->zero_entry = NULL;
    }
    return rc;
}

/* Keep F, the solution of PROC, in ENTRIES' cache when its inputs were all zero. */
static void
keep_zero(const qp_desc_t *d, uint32_t proc, const uint64_t *counters,
    const uint64_t *abandoned, const qp_flow_entries_t *entries, const qp_flow_t *f)
{
    if (entries == NULL || entries->zero == NULL || proc >= entries->nprocs
        || entries->zero[proc].done
        || !inputs_zero(d, proc, counters, abandoned, entries))
        return;
    /* Zero inputs solve to zero counts: no violation, nothing clamped (asserted here). */
    assert(f->nviolations == 0 && f->calls == 0 && f->insns == 0);
    entries->zero[proc] = zero_summary(f);
}

int
qp_flow_solve_in(const qp_desc_t *d, uint32_t proc, const uint64_t *counters,
    size_t ncounters, const uint64_t *abandoned, const qp_flow_entries_t *entries,
    qp_flow_t *out)
{
    if (out != NULL)
        memset(out, 0, sizeof(*out));
    if (d == NULL || out == NULL || proc >= d->hdr.nprocs
        || !(d->procs[proc].flags & QP_PROC_MEASURED) || ncounters != d->hdr.ncounters
        || (ncounters && counters == NULL))
        return QP_EINVAL;
    int rc = qp_desc_need(d, proc); /* its blocks and edges decoded (lazy) */
    if (rc < 0)
        return rc;
    flow_solver_t s = { 0 };
    s.d = d;
    s.p = &d->procs[proc];
    s.f = out;
    out->proc = proc;
    out->nedges = s.p->nedges;
    out->nblocks = s.p->nblocks;
    rc = alloc_solver(&s);
    if (rc == 0) {
        build_adjacency(&s);
        /* Nothing abandoned in its blocks: their counts (zeros) are not read. */
        seed(&s, counters, left_known(abandoned, entries, proc) == 0 ? NULL : abandoned,
             entries);
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
    if (rc == 0)
        keep_zero(d, proc, counters, abandoned, entries, out);
    if (rc < 0)
        qp_flow_free(out);
    return rc;
}

/*****************************************************************************
 * The calls of procedures counted by their calls
 */

int
qp_flow_entry_cmp(const void *a, const void *b)
{
    const qp_flow_entry_ref_t *x = a, *y = b;
    if (x->entry != y->entry)
        return x->entry < y->entry ? -1 : 1;
    return x->proc < y->proc ? -1 : x->proc > y->proc;
}

void
qp_flow_entries_free(qp_flow_entries_t *e)
{
    if (e == NULL)
        return;
    free(e->count);
    free(e->known);
    free(e->zero);
    memset(e, 0, sizeof(*e));
}

/* The state shared by the steps of qp_flow_entries. */
typedef struct entries_ctx {
    const qp_desc_t *d;
    const uint64_t *counters;
    size_t ncounters;
    const uint64_t *abandoned;
    qp_flow_entries_t *out;
    qp_flow_entry_ref_t *refs; /* the procedures counted by their calls, by entry */
    uint32_t nrefs;
    const qp_entry_map_t *map; /* every procedure by entry */
    const qp_desc_keys_t *keys; /* the call sites looked at */
    uint32_t *pending; /* per procedure counted by its calls: its call sites not handed
                        * down yet */
    uint8_t *bad;      /* per procedure: a site's count is unknown, or the sum overflowed */
    uint32_t walk;     /* the procedures below it were walked past (entries_run) */
    uint32_t *queue;   /* those walked past whose callers are done since: a heap, lowest
                        * index first (the order of the description's chunks, which a
                        * lazy one decodes) */
    uint32_t nqueue;
    qp_flow_visit_fn visit; /* qp_flow_entries_visit's, or NULL */
    void *visit_arg;
    uint8_t *visited;  /* with VISIT: per procedure, handed to it */
} entries_ctx_t;

/* The queue's heap: PROC added, and the lowest procedure taken. */
static void
queue_push(entries_ctx_t *c, uint32_t proc)
{
    uint32_t i = c->nqueue++;
    while (i > 0 && c->queue[(i - 1) / 2] > proc) {
        c->queue[i] = c->queue[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    c->queue[i] = proc;
}

static uint32_t
queue_pop(entries_ctx_t *c)
{
    uint32_t top = c->queue[0], last = c->queue[--c->nqueue], i = 0;
    for (;;) {
        uint32_t k = 2 * i + 1;
        if (k >= c->nqueue)
            break;
        if (k + 1 < c->nqueue && c->queue[k + 1] < c->queue[k])
            k++;
        if (c->queue[k] >= last)
            break;
        c->queue[i] = c->queue[k];
        i = k;
    }
    if (c->nqueue > 0)
        c->queue[i] = last;
    return top;
}

/* The procedure counted by its calls whose entry is ADDR, or QP_VIRT. */
static uint32_t
by_calls_at(const entries_ctx_t *c, uint64_t addr)
{
    uint32_t lo = 0, hi = c->nrefs;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (c->refs[mid].entry < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < c->nrefs && c->refs[lo].entry == addr ? c->refs[lo].proc : QP_VIRT;
}

/* The procedure counted by its calls that key site K (of D's qp_desc_keys) calls, or
 * QP_VIRT. Every site that calls one is a key site. */
static uint32_t
site_callee(const entries_ctx_t *c, uint32_t k)
{
    const qp_desc_call_t *call = &c->keys->calls[k];
    if (call->kind != QP_CALL_DIRECT && call->kind != QP_CALL_TAIL)
        return QP_VIRT;
    /* Most targets are the entry of one procedure: the map says which; a search among
     * those counted by their calls only where several procedures share the entry. */
    uint32_t p = c->keys->callee[k];
    if (p == QP_VIRT)
        return QP_VIRT;
    uint8_t kind = c->map->kind[p];
    if (kind & QP_EMAP_SHARED)
        return by_calls_at(c, call->target);
    uint8_t want = QP_EMAP_MEASURED | QP_EMAP_BY_CALLS;
    return (kind & want) == want ? p : QP_VIRT;
}

/* What hand_down does with the counts of PROC's sites: adds them to their callees and
 * counts them done there (HAND_PENDING), or leaves them (HAND_NONE: a caller in a
 * cycle, solved last). */
enum { HAND_NONE, HAND_PENDING };

/*
 * Solve procedure PROC (measured; if counted by its calls, its count is final), hand it
 * to the visitor, and add the counts of its sites to their callees as HOW says.
 */
static int
hand_down(entries_ctx_t *c, uint32_t proc, int how)
{
    const qp_desc_t *d = c->d;
    const qp_desc_proc_t *p = &d->procs[proc];
    qp_flow_t f;
    qp_flow_zero_t z;
    /* Known to count 0 everywhere: nothing to add, nothing unknown. */
    int zero_known = qp_flow_zero_known(d, proc, c->counters, c->abandoned, c->out, &z);
    int zero = zero_known && z.all_known;
    if (zero)
        memset(&f, 0, sizeof(f));
    else
        QP_CHECK(qp_flow_solve_in(
            d, proc, c->counters, c->ncounters, c->abandoned, c->out, &f));
    if (c->visit != NULL) {
        c->visited[proc] = 1;
        int rc = c->visit(c->visit_arg, proc, zero ? NULL : &f, zero_known ? &z : NULL);
        if (rc < 0) {
            qp_flow_free(&f);
            return rc;
        }
    }
    const qp_desc_keys_t *keys = c->keys;
    for (uint32_t k = keys->first[proc]; how != HAND_NONE && k < keys->n
         && keys->calls[k].block - p->block < p->nblocks; k++) {
        uint32_t callee = site_callee(c, k);
        if (callee == QP_VIRT)
            continue;
        const qp_desc_call_t *call = &keys->calls[k];
        int tail = qp_call_is_tail(call);
        uint32_t i = tail ? call->edge - p->edge : call->block - p->block;
        int inside = i < (tail ? p->nedges : p->nblocks); /* else a bad description */
        uint8_t st = !inside ? QP_FLOW_UNKNOWN
            : zero           ? QP_FLOW_SOLVED
            : tail           ? f.edge_state[i]
                             : f.block_state[i];
        uint64_t n = !inside || zero ? 0 : tail ? f.edge_count[i] : f.block_count[i];
        if ((st != QP_FLOW_MEASURED && st != QP_FLOW_SOLVED)
            || __builtin_add_overflow(c->out->count[callee], n, &c->out->count[callee]))
            c->bad[callee] = 1;
        /* The last one: walked past already, it waits in the queue. */
        if (--c->pending[callee] == 0 && callee < c->walk)
            queue_push(c, callee);
    }
    qp_flow_free(&f);
    return 0;
}

/* How many sites of measured callers each procedure counted by its calls waits for. */
static void
count_pending(entries_ctx_t *c)
{
    const qp_desc_t *d = c->d;
    for (uint32_t pi = 0; pi < d->hdr.nprocs; pi++) {
        const qp_desc_proc_t *p = &d->procs[pi];
        if (!(p->flags & QP_PROC_MEASURED))
            continue;
        for (uint32_t k = c->keys->first[pi];
             k < c->keys->n && c->keys->calls[k].block - p->block < p->nblocks; k++) {
            uint32_t callee = site_callee(c, k);
            if (callee != QP_VIRT)
                c->pending[callee]++;
        }
    }
}

/* Is P measured and counted by its calls (a procedure of the refs and the queue)? */
static int
measured_by_calls(const qp_desc_proc_t *p)
{
    return (p->flags & (QP_PROC_MEASURED | QP_PROC_BY_CALLS))
        == (QP_PROC_MEASURED | QP_PROC_BY_CALLS);
}

static int
entries_run(entries_ctx_t *c)
{
    const qp_desc_t *d = c->d;
    uint32_t n = d->hdr.nprocs;
    for (uint32_t pi = 0; pi < n; pi++)
        if (measured_by_calls(&d->procs[pi]))
            c->refs[c->nrefs++] = (qp_flow_entry_ref_t) { d->procs[pi].entry, pi };
    if (c->nrefs == 0 && c->visit == NULL)
        return 0;
    qsort(c->refs, c->nrefs, sizeof(qp_flow_entry_ref_t), qp_flow_entry_cmp);
    count_pending(c);
    /* The procedures by index: each one whose counts need nobody's (with a visitor,
     * each; else those that call one counted by its calls), and each one counted by
     * its calls whose callers are done (its count final). Those whose callers come
     * later wait for the last one, then in the queue, callers first: a lazy
     * description's chunk is at hand for most procedures when they are solved. */
    for (uint32_t pi = 0; pi < n; pi++) {
        const qp_desc_proc_t *p = &d->procs[pi];
        c->walk = pi + 1;
        if (!(p->flags & QP_PROC_MEASURED))
            continue;
        if (p->flags & QP_PROC_BY_CALLS) {
            if (c->pending[pi] == 0) {
                c->out->known[pi] = !c->bad[pi];
                QP_CHECK(hand_down(c, pi, HAND_PENDING));
            }
            continue;
        }
        uint32_t k = c->keys->first[pi];
        int calls_one = c->visit != NULL;
        for (; k < c->keys->n && c->keys->calls[k].block - p->block < p->nblocks && !calls_one;
             k++)
            calls_one = site_callee(c, k) != QP_VIRT;
        if (calls_one)
            QP_CHECK(hand_down(c, pi, HAND_PENDING));
    }
    while (c->nqueue > 0) {
        uint32_t pi = queue_pop(c);
        c->out->known[pi] = !c->bad[pi];
        QP_CHECK(hand_down(c, pi, HAND_PENDING));
    }
    /* Those whose callers form a cycle (a bad description) stay unknown. */
    for (uint32_t pi = 0; c->visit != NULL && pi < n; pi++)
        if ((d->procs[pi].flags & QP_PROC_MEASURED) && !c->visited[pi])
            QP_CHECK(hand_down(c, pi, HAND_NONE));
    return 0;
}

int
qp_flow_entries(const qp_desc_t *d, const uint64_t *counters, size_t ncounters,
    const uint64_t *abandoned, qp_flow_entries_t *out)
{
    return qp_flow_entries_visit(d, counters, ncounters, abandoned, NULL, NULL, NULL, out);
}

int
qp_flow_entries_visit(const qp_desc_t *d, const uint64_t *counters, size_t ncounters,
    const uint64_t *abandoned, const uint8_t *left, qp_flow_visit_fn visit, void *arg,
    qp_flow_entries_t *out)
{
    if (out != NULL)
        memset(out, 0, sizeof(*out));
    if (d == NULL || out == NULL || ncounters != d->hdr.ncounters || (ncounters && counters == NULL))
        return QP_EINVAL;
    uint32_t n = d->hdr.nprocs;
    entries_ctx_t c = { .d = d, .counters = counters, .ncounters = ncounters,
                        .abandoned = abandoned, .out = out, .visit = visit, .visit_arg = arg };
    qp_entry_map_t local;
    if ((c.keys = qp_desc_keys(d)) == NULL || qp_desc_entry_map(d, &local, &c.map) < 0)
        return QP_ENOMEM;
    /* Which procedures have abandoned flow, as the writer of ABANDONED told (LEFT:
     * qp_backtrace_abandoned); without it, each procedure's blocks are read where asked. */
    if (abandoned != NULL && left != NULL) {
        out->left = left;
        out->left_for = abandoned;
    }
    out->nprocs = n;
    out->count = calloc(n + 1, sizeof(uint64_t));
    out->known = calloc(n + 1, 1);
    out->zero = calloc(n + 1, sizeof(qp_flow_zero_t));
    /* The refs and the queue hold procedures counted by their calls alone (chromium:
     * those of all 667,000 procedures were 13 MB at the report's peak). */
    uint32_t nby = 0;
    for (uint32_t pi = 0; pi < n; pi++)
        nby += measured_by_calls(&d->procs[pi]);
    c.refs = malloc((nby + 1) * sizeof(qp_flow_entry_ref_t));
    c.pending = calloc(n + 1, sizeof(uint32_t));
    c.bad = calloc(n + 1, 1);
    c.queue = malloc((nby + 1) * sizeof(uint32_t));
    c.visited = visit != NULL ? calloc(n + 1, 1) : NULL;
    int rc = !out->count || !out->known || !out->zero || !c.refs || !c.pending || !c.bad
            || !c.queue || (visit != NULL && !c.visited)
        ? QP_ENOMEM
        : entries_run(&c);
    free(c.visited);
    free(c.refs);
    free(c.pending);
    free(c.bad);
    free(c.queue);
    qp_entry_map_free(&local);
    if (rc < 0)
        qp_flow_entries_free(out);
    return rc;
}
