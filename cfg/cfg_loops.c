/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Dominators and natural loops of one procedure, in time linear in its blocks and edges
 * (up to the dominator iteration, which converges in a few passes on real code):
 *  1. an iterative depth-first search from the entry gives the reverse postorder and the
 *     retreating edges (to a block still on the DFS stack);
 *  2. Cooper, Harvey and Kennedy's "A Simple, Fast Dominance Algorithm" gives idom,
 *     working on reverse-postorder numbers;
 *  3. subtree sizes of the dominator tree give a preorder interval per block, so
 *     "v dominates u" is two comparisons: a retreating edge u->v is a back edge exactly
 *     when it holds, and the procedure is irreducible when it does not;
 *  4. natural loops are collected innermost first (headers by decreasing reverse
 *     postorder, as a header precedes the blocks it dominates) by a backward walk from
 *     the latches that collapses finished inner loops into their headers with a
 *     union-find, as in Havlak's loop nesting forest; each block is thus visited once per
 *     loop that has it as a direct member, and loop depth follows from the nesting tree.
 */
#include "cfg/cfg_priv.h"

/* Scratch arrays of one call, all indexed by reverse-postorder number unless noted. */
typedef struct lp_scratch {
    uint32_t *rpo_of;  /* local block -> reverse-postorder number, or CFG_NONE */
    uint32_t *order;   /* reverse-postorder number -> local block */
    uint32_t *stack;   /* DFS stack (local blocks), later the loop walk's worklist */
    uint32_t *cursor;  /* DFS: next successor to look at, per stack entry */
    uint8_t *state;    /* local block: 0 unseen, 1 on the DFS stack, 2 finished */
    uint32_t *pstart;  /* predecessors of block r: plist[pstart[r] .. pstart[r + 1]) */
    uint32_t *plist;   /* the predecessors, by reverse-postorder number */
    uint32_t *ret_u;   /* retreating edges ret_u[k] -> ret_v[k] (local blocks) */
    uint32_t *ret_v;   /* (see ret_u) */
    uint32_t *idom;    /* immediate dominator, CFG_NONE for the entry */
    uint32_t *tin;     /* preorder number in the dominator tree */
    uint32_t *tsize;   /* size of the dominator subtree */
    uint32_t *lstart;  /* latches of header r: llist[lstart[r] .. lstart[r + 1]) */
    uint32_t *llist;   /* the latches, by reverse-postorder number */
    uint32_t *uf;      /* union-find parent: collapsed loops point to their header */
    uint32_t *mark;    /* header whose walk reached the block last, or CFG_NONE */
    uint32_t *inner;   /* innermost loop header containing the block, or CFG_NONE */
    uint32_t *lparent; /* header of the loop enclosing header r's loop, or CFG_NONE */
    uint32_t *depth;   /* loop depth of header r's loop */
    uint8_t *head;     /* r is a loop header */
} lp_scratch_t;

static uint32_t
lp_find(uint32_t *uf, uint32_t x)
{
    while (uf[x] != x) {
        uf[x] = uf[uf[x]];
        x = uf[x];
    }
    return x;
}

static uint32_t
lp_intersect(const uint32_t *idom, uint32_t a, uint32_t b)
{
    while (a != b) {
        while (a > b)
            a = idom[a];
        while (b > a)
            b = idom[b];
    }
    return a;
}

/* Local index of an edge's destination inside P, or CFG_NONE when it leaves P. */
static uint32_t
lp_local(const cfg_proc_t *p, const cfg_edge_t *e)
{
    if (e->to == CFG_NONE || e->to < p->block || e->to - p->block >= p->nblocks)
        return CFG_NONE;
    return e->to - p->block;
}

/*****************************************************************************
 * Depth-first search and dominators
 */

/* Number the blocks reachable from the entry; returns how many there are. */
static uint32_t
lp_dfs(const cfg_prog_t *prog, const cfg_proc_t *p, lp_scratch_t *s, uint32_t *nret)
{
    const cfg_block_t *blocks = prog->blocks + p->block;
    uint32_t sp = 0, npost = 0, n = p->nblocks;

    *nret = 0;
    s->state[0] = 1;
    s->stack[sp] = 0;
    s->cursor[sp++] = 0;
    while (sp > 0) {
        uint32_t u = s->stack[sp - 1];
        const cfg_block_t *b = &blocks[u];
        if (s->cursor[sp - 1] < b->nsucc) {
            uint32_t v = lp_local(p, &prog->edges[b->succ + s->cursor[sp - 1]++]);
            if (v == CFG_NONE)
                continue;
            if (s->state[v] == 0) {
                s->state[v] = 1;
                s->stack[sp] = v;
                s->cursor[sp++] = 0;
            } else if (s->state[v] == 1) {
                s->ret_u[*nret] = u;
                s->ret_v[(*nret)++] = v;
            }
            continue;
        }
        sp--;
        s->state[u] = 2;
        s->order[npost++] = u; /* postorder for now */
    }
    /* Reverse in place: order[] becomes the reverse postorder. */
    for (uint32_t i = 0, j = npost - 1; i < j; i++, j--) {
        uint32_t x = s->order[i];
        s->order[i] = s->order[j];
        s->order[j] = x;
    }
    for (uint32_t i = 0; i < n; i++)
        s->rpo_of[i] = CFG_NONE;
    for (uint32_t i = 0; i < npost; i++)
        s->rpo_of[s->order[i]] = i;
    return npost;
}

/* Predecessor lists between reachable blocks, in reverse-postorder numbers. */
static void
lp_preds(const cfg_prog_t *prog, const cfg_proc_t *p, lp_scratch_t *s, uint32_t nr)
{
    const cfg_block_t *blocks = prog->blocks + p->block;

    memset(s->pstart, 0, (nr + 1) * sizeof(uint32_t));
    for (uint32_t r = 0; r < nr; r++) {
        const cfg_block_t *b = &blocks[s->order[r]];
        for (uint32_t k = 0; k < b->nsucc; k++) {
            uint32_t v = lp_local(p, &prog->edges[b->succ + k]);
            if (v != CFG_NONE)
                s->pstart[s->rpo_of[v] + 1]++;
        }
    }
    for (uint32_t r = 0; r < nr; r++)
        s->pstart[r + 1] += s->pstart[r];
    /* Fill using tsize[] as the per-block cursor. */
    memcpy(s->tsize, s->pstart, nr * sizeof(uint32_t));
    for (uint32_t r = 0; r < nr; r++) {
        const cfg_block_t *b = &blocks[s->order[r]];
        for (uint32_t k = 0; k < b->nsucc; k++) {
            uint32_t v = lp_local(p, &prog->edges[b->succ + k]);
            if (v != CFG_NONE)
                s->plist[s->tsize[s->rpo_of[v]]++] = r;
        }
    }
}

static void
lp_dominators(lp_scratch_t *s, uint32_t nr)
{
    int changed = 1;

    s->idom[0] = 0;
    for (uint32_t r = 1; r < nr; r++)
        s->idom[r] = CFG_NONE;
    while (changed) {
        changed = 0;
        for (uint32_t r = 1; r < nr; r++) {
            uint32_t d = CFG_NONE;
            for (uint32_t k = s->pstart[r]; k < s->pstart[r + 1]; k++) {
                uint32_t q = s->plist[k];
                if (s->idom[q] == CFG_NONE)
                    continue;
                d = d == CFG_NONE ? q : lp_intersect(s->idom, q, d);
            }
            if (d != s->idom[r]) {
                s->idom[r] = d;
                changed = 1;
            }
        }
    }
    /* Preorder intervals of the dominator tree: an idom precedes its blocks in RPO. */
    for (uint32_t r = 0; r < nr; r++)
        s->tsize[r] = 1;
    for (uint32_t r = nr; r-- > 1;)
        s->tsize[s->idom[r]] += s->tsize[r];
    /* mark[] serves as each block's next free preorder number for its children. */
    s->tin[0] = 0;
    s->mark[0] = 1;
    for (uint32_t r = 1; r < nr; r++) {
        uint32_t d = s->idom[r];
        s->tin[r] = s->mark[d];
        s->mark[d] += s->tsize[r];
        s->mark[r] = s->tin[r] + 1;
    }
    s->idom[0] = CFG_NONE;
}

static int
lp_dominates(const lp_scratch_t *s, uint32_t a, uint32_t b)
{
    return s->tin[a] <= s->tin[b] && s->tin[b] < s->tin[a] + s->tsize[a];
}

/*****************************************************************************
 * Natural loops
 */

/* Collect the loop of header H: every block reaching a latch without passing H. */
static void
lp_loop_body(lp_scratch_t *s, uint32_t h)
{
    uint32_t sp = 0;

    for (uint32_t k = s->lstart[h]; k < s->lstart[h + 1]; k++) {
        uint32_t y = lp_find(s->uf, s->llist[k]);
        if (y != h && s->mark[y] != h) {
            s->mark[y] = h;
            s->stack[sp++] = y;
        }
    }
    while (sp > 0) {
        uint32_t y = s->stack[--sp];
        if (s->head[y])
            s->lparent[y] = h; /* a finished inner loop, collapsed into its header */
        else
            s->inner[y] = h;
        s->uf[y] = h;
        for (uint32_t k = s->pstart[y]; k < s->pstart[y + 1]; k++) {
            uint32_t z = lp_find(s->uf, s->plist[k]);
            if (z != h && s->mark[z] != h) {
                s->mark[z] = h;
                s->stack[sp++] = z;
            }
        }
    }
}

/* Returns the number of loops; sets *irreducible. */
static uint32_t
lp_loops(lp_scratch_t *s, uint32_t nr, uint32_t nret, int *irreducible)
{
    uint32_t nloops = 0;

    *irreducible = 0;
    memset(s->lstart, 0, (nr + 1) * sizeof(uint32_t));
    memset(s->head, 0, nr);
    for (uint32_t k = 0; k < nret; k++) {
        uint32_t u = s->rpo_of[s->ret_u[k]], v = s->rpo_of[s->ret_v[k]];
        if (lp_dominates(s, v, u))
            s->lstart[v + 1]++;
        else
            *irreducible = 1;
    }
    for (uint32_t r = 0; r < nr; r++)
        s->lstart[r + 1] += s->lstart[r];
    /* Fill using depth[] as the per-header cursor (depths come last). */
    memcpy(s->depth, s->lstart, nr * sizeof(uint32_t));
    for (uint32_t k = 0; k < nret; k++) {
        uint32_t u = s->rpo_of[s->ret_u[k]], v = s->rpo_of[s->ret_v[k]];
        if (lp_dominates(s, v, u))
            s->llist[s->depth[v]++] = u;
    }

    for (uint32_t r = 0; r < nr; r++) {
        s->uf[r] = r;
        s->mark[r] = CFG_NONE;
        s->inner[r] = CFG_NONE;
        s->lparent[r] = CFG_NONE;
        if (s->lstart[r + 1] > s->lstart[r]) {
            s->head[r] = 1;
            nloops++;
        }
    }
    /* Innermost first: in reverse postorder, a header precedes those it encloses. */
    for (uint32_t r = nr; r-- > 0;)
        if (s->head[r]) {
            lp_loop_body(s, r);
            s->inner[r] = r;
        }
    for (uint32_t r = 0; r < nr; r++)
        if (s->head[r])
            s->depth[r] = s->lparent[r] == CFG_NONE ? 1 : s->depth[s->lparent[r]] + 1;
    return nloops;
}

/*****************************************************************************
 * Running the analysis on one procedure
 */

/* The scratch of one run, with its allocation and what it found. */
typedef struct lp_run {
    lp_scratch_t s;
    uint32_t *mem;    /* the one allocation behind s */
    uint32_t nr;      /* blocks reachable from the entry */
    uint32_t nret;    /* retreating edges */
    uint32_t nloops;  /* natural loops */
    int irreducible;  /* a retreating edge is not a back edge */
} lp_run_t;

/* Check P's blocks and edges against PROG; the number of its edges into *M. */
static int
lp_check(const cfg_prog_t *prog, const cfg_proc_t *p, size_t *m)
{
    if (prog == NULL || p == NULL || p->block > prog->nblocks
        || p->nblocks > prog->nblocks - p->block)
        return QP_EINVAL;
    *m = 0;
    for (uint32_t i = 0; i < p->nblocks; i++) {
        const cfg_block_t *b = &prog->blocks[p->block + i];
        if (b->succ > prog->nedges || b->nsucc > prog->nedges - b->succ)
            return QP_EINVAL;
        *m += b->nsucc;
    }
    return 0;
}

/* Depth-first search, dominators and loops of P (at least one block) into R; free
 * R->mem after. */
static int
lp_run(const cfg_prog_t *prog, const cfg_proc_t *p, size_t m, lp_run_t *r)
{
    lp_scratch_t *s = &r->s;
    uint32_t n = p->nblocks;

    /* One allocation: 14 arrays of N + 1 words, 4 of M + 1 words, 2 of N + 1 bytes. */
    size_t nw = (size_t)n + 1, mw = m + 1;
    uint32_t *w = malloc((14 * nw + 4 * mw) * sizeof(uint32_t) + 2 * nw);
    if (w == NULL)
        return QP_ENOMEM;
    r->mem = w;
    uint32_t *q = w;
    s->rpo_of = q, q += nw;
    s->order = q, q += nw;
    s->stack = q, q += nw;
    s->cursor = q, q += nw;
    s->pstart = q, q += nw;
    s->idom = q, q += nw;
    s->tin = q, q += nw;
    s->tsize = q, q += nw;
    s->lstart = q, q += nw;
    s->uf = q, q += nw;
    s->mark = q, q += nw;
    s->inner = q, q += nw;
    s->lparent = q, q += nw;
    s->depth = q, q += nw;
    s->plist = q, q += mw;
    s->ret_u = q, q += mw;
    s->ret_v = q, q += mw;
    s->llist = q, q += mw;
    s->state = (uint8_t *)q;
    s->head = s->state + nw;
    memset(s->state, 0, nw);

    r->nr = lp_dfs(prog, p, s, &r->nret);
    lp_preds(prog, p, s, r->nr);
    lp_dominators(s, r->nr);
    r->nloops = lp_loops(s, r->nr, r->nret, &r->irreducible);
    return 0;
}

/*****************************************************************************
 * Entry points
 */

int
cfg_loops_proc(cfg_prog_t *prog, cfg_proc_t *p)
{
    lp_run_t r;
    size_t m;

    QP_CHECK(lp_check(prog, p, &m));
    cfg_block_t *blocks = prog->blocks + p->block;
    for (uint32_t i = 0; i < p->nblocks; i++) {
        blocks[i].idom = CFG_NONE;
        blocks[i].loop_depth = 0;
        blocks[i].is_loop_head = 0;
    }
    p->nloops = 0;
    p->flags &= ~(uint32_t)CFG_PROC_IRREDUCIBLE;
    if (p->nblocks == 0)
        return 0;
    QP_CHECK(lp_run(prog, p, m, &r));
    p->nloops = r.nloops;
    if (r.irreducible)
        p->flags |= CFG_PROC_IRREDUCIBLE;

    const lp_scratch_t *s = &r.s;
    for (uint32_t k = 0; k < r.nr; k++) {
        cfg_block_t *b = &blocks[s->order[k]];
        uint32_t in = s->inner[k];
        if (s->idom[k] != CFG_NONE)
            b->idom = p->block + s->order[s->idom[k]];
        b->is_loop_head = s->head[k];
        if (in != CFG_NONE)
            b->loop_depth = s->depth[in] > UINT16_MAX ? UINT16_MAX : (uint16_t)s->depth[in];
    }
    free(r.mem);
    return 0;
}

/*
 * The forest from a finished run: loops numbered by their header's reverse-postorder
 * number (an enclosing loop's header precedes the headers it contains, so a parent's
 * number is below its children's); back edges found anew from the edges, as the
 * retreating-edge list names blocks, not edges (two edges may join the same pair).
 */
static int
lp_forest_fill(const cfg_prog_t *prog, const cfg_proc_t *p, const lp_run_t *r,
               cfg_loop_forest_t *f)
{
    const lp_scratch_t *s = &r->s;
    uint32_t n = p->nblocks, nr = r->nr;
    uint32_t *loop_of = malloc(((size_t)nr + 1) * sizeof(uint32_t)); /* header rpo -> loop */
    if (loop_of == NULL)
        return QP_ENOMEM;
    f->nloops = 0;
    for (uint32_t k = 0; k < nr; k++) {
        loop_of[k] = CFG_NONE;
        if (s->head[k]) {
            cfg_loop_t *l = &f->loops[f->nloops];
            l->header = p->block + s->order[k];
            l->parent = s->lparent[k] == CFG_NONE ? CFG_NONE : loop_of[s->lparent[k]];
            l->depth = s->depth[k];
            l->nblocks = 0;
            l->nback = 0;
            loop_of[k] = f->nloops++;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t k = s->rpo_of[i];
        f->reachable[i] = k != CFG_NONE;
        f->inner[i] = k == CFG_NONE || s->inner[k] == CFG_NONE ? CFG_NONE
                                                                : loop_of[s->inner[k]];
        for (uint32_t l = f->inner[i]; l != CFG_NONE; l = f->loops[l].parent)
            f->loops[l].nblocks++;
    }
    /* Back edges, grouped by loop: count, place, fill. */
    uint32_t nback = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < n; i++) {
            const cfg_block_t *b = &prog->blocks[p->block + i];
            uint32_t u = s->rpo_of[i];
            for (uint32_t e = 0; u != CFG_NONE && e < b->nsucc; e++) {
                uint32_t v = lp_local(p, &prog->edges[b->succ + e]);
                if (v == CFG_NONE || !lp_dominates(s, s->rpo_of[v], u))
                    continue;
                cfg_loop_t *l = &f->loops[loop_of[s->rpo_of[v]]];
                if (pass == 0)
                    l->nback++;
                else
                    f->back_edges[l->back + l->nback++] = b->succ + e;
            }
        }
        if (pass == 0)
            for (uint32_t l = 0; l < f->nloops; l++) {
                f->loops[l].back = nback;
                nback += f->loops[l].nback;
                f->loops[l].nback = 0;
            }
    }
    f->nback_edges = nback;
    free(loop_of);
    return 0;
}

int
cfg_loop_forest(const cfg_prog_t *prog, uint32_t proc, cfg_loop_forest_t **out)
{
    lp_run_t r = { 0 };
    size_t m;

    if (out == NULL || prog == NULL || proc >= prog->nprocs)
        return QP_EINVAL;
    *out = NULL;
    const cfg_proc_t *p = &prog->procs[proc];
    QP_CHECK(lp_check(prog, p, &m));
    cfg_loop_forest_t *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return QP_ENOMEM;
    size_t n = (size_t)p->nblocks + 1;
    f->proc = proc;
    f->nblocks = p->nblocks;
    f->inner = malloc(n * sizeof(uint32_t));
    f->reachable = calloc(n, 1);
    f->loops = malloc(n * sizeof(cfg_loop_t));
    f->back_edges = malloc((m + 1) * sizeof(uint32_t));
    int rc = f->inner && f->reachable && f->loops && f->back_edges ? 0 : QP_ENOMEM;
    if (rc == 0 && p->nblocks > 0 && (rc = lp_run(prog, p, m, &r)) == 0) {
        f->irreducible = r.irreducible;
        rc = lp_forest_fill(prog, p, &r, f);
    }
    free(r.mem);
    if (rc < 0) {
        cfg_loop_forest_destroy(f);
        return rc;
    }
    *out = f;
    return 0;
}

void
cfg_loop_forest_destroy(cfg_loop_forest_t *f)
{
    if (f == NULL)
        return;
    free(f->inner);
    free(f->reachable);
    free(f->loops);
    free(f->back_edges);
    free(f);
}

int
cfg_loop_contains(const cfg_loop_forest_t *f, uint32_t loop, uint32_t local)
{
    if (f == NULL || loop >= f->nloops || local >= f->nblocks)
        return 0;
    for (uint32_t l = f->inner[local]; l != CFG_NONE && l >= loop; l = f->loops[l].parent)
        if (l == loop)
            return 1;
    return 0;
}
