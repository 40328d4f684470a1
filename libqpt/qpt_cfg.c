/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * libqpt: the CFG of a procedure as a mutator walks it - blocks, edges, dominators,
 * loops - read from the analysis cfg/ made when the space was opened. Public block
 * numbers are local to the procedure (block 0 its entry, as cfg/ orders them); edge ids
 * are cfg/'s global edge numbers, as QPT_EDGE points carry them. The loop forest is
 * cfg/'s too (cfg_loop_forest), computed the first time a procedure's loops are asked
 * for and kept with the space.
 */
#include "config.h"

#include <stdlib.h>

#include "libqpt/qpt_priv.h"

/* The procedure PROC of S whose CFG may be walked, or NULL with S's message set. */
static const cfg_proc_t *
walkable(qpt_space_t *s, uint32_t proc)
{
    if (s == NULL || s->prog == NULL)
        return NULL;
    if (proc >= s->prog->nprocs) {
        qpt_fail(s, QP_ENOTFOUND, "procedure %u: no such procedure", proc);
        return NULL;
    }
    const cfg_proc_t *p = &s->prog->procs[proc];
    if (p->flags & CFG_PROC_FRAGMENT) {
        uint32_t parent = p->parent;
        qpt_fail(s, QP_EUNSUPP, "%s: a cold fragment: its blocks are in the CFG of %s",
                 p->name, parent < s->prog->nprocs ? s->prog->procs[parent].name : "its parent");
        return NULL;
    }
    return p;
}

/* The error code walkable() left: S's message says which. */
static int
walk_rc(const qpt_space_t *s, uint32_t proc)
{
    if (s == NULL || s->prog == NULL)
        return QPT_EINVAL;
    return proc >= s->prog->nprocs ? QPT_ENOTFOUND : QPT_EUNSUPP;
}

/* P's loop forest, computed once per procedure; NULL with S's message set. */
static const cfg_loop_forest_t *
forest(qpt_space_t *s, uint32_t proc)
{
    if (s->forests == NULL && (s->forests = calloc(s->prog->nprocs, sizeof(*s->forests))) == NULL) {
        qpt_fail(s, QP_ENOMEM, "out of memory");
        return NULL;
    }
    if (s->forests[proc] == NULL) {
        int rc = cfg_loop_forest(s->prog, proc, &s->forests[proc]);
        if (rc < 0) {
            qpt_fail(s, rc, "%s: loops: %s", s->prog->procs[proc].name, qp_strerror(rc));
            return NULL;
        }
    }
    return s->forests[proc];
}

void
qpt_cfg_free(qpt_space_t *s)
{
    if (s->forests != NULL)
        for (uint32_t i = 0; i < s->prog->nprocs; i++)
            cfg_loop_forest_destroy(s->forests[i]);
    free(s->forests);
    s->forests = NULL;
}

/* The block of local index BLOCK in P, or NULL with S's message set. */
static const cfg_block_t *
block_of(qpt_space_t *s, const cfg_proc_t *p, uint32_t block)
{
    if (block >= p->nblocks) {
        qpt_fail(s, QP_ENOTFOUND, "%s: block %u: no such block (%u blocks)", p->name, block,
                 p->nblocks);
        return NULL;
    }
    return &s->prog->blocks[p->block + block];
}

/* P when snippets can go into it, else NULL with QPT_EUNSUPP's message set. */
static const cfg_proc_t *
instrumentable(qpt_space_t *s, uint32_t proc)
{
    const cfg_proc_t *p = walkable(s, proc);
    if (p == NULL)
        return NULL;
    const char *why = qpt_proc_refusal(s, proc);
    if (why != NULL) {
        qpt_fail(s, QP_EUNSUPP, "%s: %s", p->name, why);
        return NULL;
    }
    return p;
}

/* Block BLOCK of procedure PROC, whose CFG CHECK (walkable or instrumentable) allows:
 * 0 with *P and *B set, or the error code with S's message set. */
static int
proc_block(qpt_space_t *s, uint32_t proc, uint32_t block,
           const cfg_proc_t *(*check)(qpt_space_t *s, uint32_t proc), const cfg_proc_t **p,
           const cfg_block_t **b)
{
    if ((*p = check(s, proc)) == NULL)
        return walk_rc(s, proc);
    if ((*b = block_of(s, *p, block)) == NULL)
        return QPT_ENOTFOUND;
    return 0;
}

static uint32_t
edge_kind(uint8_t k)
{
    switch (k) {
    case CFG_EDGE_FALL: return QPT_EDGE_FALL;
    case CFG_EDGE_TAKEN: return QPT_EDGE_TAKEN;
    case CFG_EDGE_JUMP: return QPT_EDGE_JUMP;
    case CFG_EDGE_TABLE: return QPT_EDGE_TABLE;
    case CFG_EDGE_INDIRECT: return QPT_EDGE_INDIRECT;
    case CFG_EDGE_CALLRET: return QPT_EDGE_CALL_FALL;
    case CFG_EDGE_RETURN: return QPT_EDGE_RETURN;
    case CFG_EDGE_TAILCALL: return QPT_EDGE_TAILCALL;
    case CFG_EDGE_NORETURN: return QPT_EDGE_NORETURN;
    default: return QPT_EDGE_UNKNOWN;
    }
}

/* Edge ID of P as the public record (its back-edge flag from the dominator tree). */
static void
edge_out(const qpt_space_t *s, const cfg_proc_t *p, uint32_t id, qpt_edge_t *out)
{
    const cfg_prog_t *prog = s->prog;
    const cfg_edge_t *e = &prog->edges[id];
    int inside = e->to != CFG_NONE && e->to >= p->block && e->to - p->block < p->nblocks;
    *out = (qpt_edge_t) { 0 };
    out->kind = edge_kind(e->kind);
    out->from = e->from - p->block;
    out->to = inside ? e->to - p->block : QPT_NONE;
    out->id = id;
    if (inside)
        out->target = prog->blocks[e->to].start + s->bias;
    else if (e->target != 0)
        out->target = e->target + s->bias;
    /* A back edge: to a block that dominates its source (its header). */
    if (inside && prog->blocks[e->to].is_loop_head && cfg_block_dominates(prog, e->to, e->from))
        out->flags |= QPT_BACK_EDGE;
}

/*****************************************************************************
 * Procedures and blocks
 */

int
qpt_proc_cfg(qpt_space_t *s, uint32_t proc, qpt_cfg_t *out)
{
    if (out == NULL)
        return QPT_EINVAL;
    const cfg_proc_t *p = walkable(s, proc);
    if (p == NULL)
        return walk_rc(s, proc);
    *out = (qpt_cfg_t) { 0 };
    out->nblocks = p->nblocks;
    out->nloops = p->nloops;
    for (uint32_t k = 0; k < p->nblocks; k++)
        out->nedges += s->prog->blocks[p->block + k].nsucc;
    if (p->flags & CFG_PROC_IRREDUCIBLE)
        out->flags |= QPT_CFG_IRREDUCIBLE;
    if (p->nind_unresolved > 0)
        out->flags |= QPT_CFG_UNRESOLVED;
    return 0;
}

int
qpt_block(qpt_space_t *s, uint32_t proc, uint32_t block, qpt_block_t *out)
{
    const cfg_proc_t *p;
    const cfg_block_t *b;
    if (out == NULL)
        return QPT_EINVAL;
    QP_CHECK(proc_block(s, proc, block, walkable, &p, &b));
    const cfg_loop_forest_t *f = forest(s, proc);
    if (f == NULL)
        return QPT_ENOMEM;
    *out = (qpt_block_t) { 0 };
    out->start = b->start + s->bias;
    out->end = b->end + s->bias;
    out->ninsns = b->ninsns;
    out->nsucc = b->nsucc;
    out->npred = b->npred;
    out->idom = b->idom == CFG_NONE ? QPT_NONE : b->idom - p->block;
    out->loop = f->inner[block] == CFG_NONE ? QPT_NONE : f->inner[block];
    out->depth = b->loop_depth;
    if (!f->reachable[block])
        out->flags |= QPT_UNREACHABLE;
    if (b->is_loop_head)
        out->flags |= QPT_LOOP_HEADER;
    if (b->gap_entry)
        out->flags |= QPT_GAP_ENTRY;
    return 0;
}

int
qpt_block_at(qpt_space_t *s, uint64_t addr, uint32_t *proc, uint32_t *block)
{
    if (s == NULL || s->prog == NULL)
        return QPT_EINVAL;
    uint32_t b = cfg_block_at(s->prog, addr - s->bias);
    if (b == CFG_NONE)
        return qpt_fail(s, QP_ENOTFOUND, "0x%llx: in no block", (unsigned long long)addr);
    const cfg_block_t *bl = &s->prog->blocks[b];
    if (proc != NULL)
        *proc = bl->proc;
    if (block != NULL)
        *block = b - s->prog->procs[bl->proc].block;
    return 0;
}

/* Edge I out of (IN: into) BLOCK of PROC, for qpt_block_succ and qpt_block_pred. */
static int
block_edge(qpt_space_t *s, uint32_t proc, uint32_t block, uint32_t i, int in, qpt_edge_t *out)
{
    if (out == NULL)
        return QPT_EINVAL;
    const cfg_proc_t *p = walkable(s, proc);
    if (p == NULL)
        return walk_rc(s, proc);
    const cfg_block_t *b = block_of(s, p, block);
    if (b == NULL)
        return QPT_ENOTFOUND;
    uint32_t n = in ? b->npred : b->nsucc;
    if (i >= n)
        return qpt_fail(s, QP_ENOTFOUND, "%s: block %u has %u edges %s, not %u", p->name,
                        block, n, in ? "in" : "out", i + 1);
    edge_out(s, p, in ? s->prog->preds[b->pred + i] : b->succ + i, out);
    return 0;
}

int
qpt_block_succ(qpt_space_t *s, uint32_t proc, uint32_t block, uint32_t i, qpt_edge_t *out)
{
    return block_edge(s, proc, block, i, 0, out);
}

int
qpt_block_pred(qpt_space_t *s, uint32_t proc, uint32_t block, uint32_t i, qpt_edge_t *out)
{
    return block_edge(s, proc, block, i, 1, out);
}

int
qpt_dominates(qpt_space_t *s, uint32_t proc, uint32_t a, uint32_t b)
{
    const cfg_proc_t *p = walkable(s, proc);
    if (p == NULL)
        return walk_rc(s, proc);
    if (block_of(s, p, a) == NULL || block_of(s, p, b) == NULL)
        return QPT_ENOTFOUND;
    const cfg_loop_forest_t *f = forest(s, proc);
    if (f == NULL)
        return QPT_ENOMEM;
    if (!f->reachable[a] || !f->reachable[b])
        return 0;
    return cfg_block_dominates(s->prog, p->block + a, p->block + b);
}

/*****************************************************************************
 * Loops
 */

/* Loop LOOP of PROC's forest, *P its procedure; NULL with S's message set and *RC. */
static const cfg_loop_t *
loop_of(qpt_space_t *s, uint32_t proc, uint32_t loop, const cfg_loop_forest_t **fp,
        const cfg_proc_t **pp, int *rc)
{
    const cfg_proc_t *p = walkable(s, proc);
    if (p == NULL) {
        *rc = walk_rc(s, proc);
        return NULL;
    }
    const cfg_loop_forest_t *f = forest(s, proc);
    if (f == NULL) {
        *rc = QPT_ENOMEM;
        return NULL;
    }
    if (loop >= f->nloops) {
        *rc = qpt_fail(s, QP_ENOTFOUND, "%s: loop %u: no such loop (%u loops)", p->name, loop,
                       f->nloops);
        return NULL;
    }
    *fp = f;
    *pp = p;
    return &f->loops[loop];
}

int
qpt_loop(qpt_space_t *s, uint32_t proc, uint32_t loop, qpt_loop_t *out)
{
    const cfg_loop_forest_t *f;
    const cfg_proc_t *p;
    int rc;
    if (out == NULL)
        return QPT_EINVAL;
    const cfg_loop_t *l = loop_of(s, proc, loop, &f, &p, &rc);
    if (l == NULL)
        return rc;
    *out = (qpt_loop_t) { 0 };
    out->header = l->header - p->block;
    out->parent = l->parent == CFG_NONE ? QPT_NONE : l->parent;
    out->depth = l->depth;
    out->nblocks = l->nblocks;
    out->nback = l->nback;
    return 0;
}

int
qpt_loop_contains(qpt_space_t *s, uint32_t proc, uint32_t loop, uint32_t block)
{
    const cfg_loop_forest_t *f;
    const cfg_proc_t *p;
    int rc;
    if (loop_of(s, proc, loop, &f, &p, &rc) == NULL)
        return rc;
    if (block_of(s, p, block) == NULL)
        return QPT_ENOTFOUND;
    return cfg_loop_contains(f, loop, block);
}

int
qpt_loop_blocks(qpt_space_t *s, uint32_t proc, uint32_t loop, uint32_t *out, size_t cap,
                size_t *n)
{
    const cfg_loop_forest_t *f;
    const cfg_proc_t *p;
    int rc;
    if (n == NULL || (cap > 0 && out == NULL))
        return QPT_EINVAL;
    *n = 0;
    if (loop_of(s, proc, loop, &f, &p, &rc) == NULL)
        return rc;
    for (uint32_t b = 0; b < p->nblocks; b++)
        if (cfg_loop_contains(f, loop, b)) {
            if (*n < cap)
                out[*n] = b;
            (*n)++;
        }
    return 0;
}

int
qpt_loop_back_edge(qpt_space_t *s, uint32_t proc, uint32_t loop, uint32_t i, qpt_edge_t *out)
{
    const cfg_loop_forest_t *f;
    const cfg_proc_t *p;
    int rc;
    if (out == NULL)
        return QPT_EINVAL;
    const cfg_loop_t *l = loop_of(s, proc, loop, &f, &p, &rc);
    if (l == NULL)
        return rc;
    if (i >= l->nback)
        return qpt_fail(s, QP_ENOTFOUND, "%s: loop %u has %u back edges, not %u", p->name,
                        loop, l->nback, i + 1);
    edge_out(s, p, f->back_edges[l->back + i], out);
    return 0;
}

/*****************************************************************************
 * From the CFG to points
 */

int
qpt_block_point(qpt_space_t *s, uint32_t proc, uint32_t block, qpt_point_t *out)
{
    const cfg_proc_t *p;
    const cfg_block_t *b;
    if (out == NULL)
        return QPT_EINVAL;
    QP_CHECK(proc_block(s, proc, block, instrumentable, &p, &b));
    *out = (qpt_point_t) { QPT_BLOCK, proc, b->start + s->bias, 0, 0, 0 };
    return 0;
}

int
qpt_edge_point(qpt_space_t *s, uint32_t proc, const qpt_edge_t *e, qpt_point_t *out)
{
    if (e == NULL || out == NULL)
        return QPT_EINVAL;
    const cfg_proc_t *p = instrumentable(s, proc);
    if (p == NULL)
        return walk_rc(s, proc);
    const cfg_prog_t *prog = s->prog;
    /* The edge is named by its id; the rest of *E must agree (it came from this space). */
    if (e->id >= prog->nedges || e->from >= p->nblocks
        || prog->edges[e->id].from != p->block + e->from)
        return qpt_fail(s, QP_ENOTFOUND, "%s: edge %u: not an edge out of block %u", p->name,
                        e->id, e->from);
    const cfg_edge_t *ed = &prog->edges[e->id];
    if (ed->to == CFG_NONE || ed->to < p->block || ed->to - p->block >= p->nblocks)
        return qpt_fail(s, QP_EUNSUPP, "%s: edge %u leaves the procedure (use its QPT_EXIT "
                        "point)", p->name, e->id);
    *out = (qpt_point_t) { QPT_EDGE, proc, prog->blocks[ed->from].start + s->bias,
                           prog->blocks[ed->to].start + s->bias, e->id, 0 };
    return 0;
}

/*****************************************************************************
 * Exits that are tail calls
 */

int
qpt_exit_tail(const qpt_space_t *s, const qpt_point_t *pt, uint64_t *callee)
{
    if (s == NULL || s->prog == NULL || pt == NULL || pt->kind != QPT_EXIT)
        return QP_EINVAL;
    if (callee != NULL)
        *callee = 0;
    arch_insn_t in;
    if (cfg_image_decode(s->prog->img, pt->addr - s->bias, 0, &in) < 0)
        return QP_EINVAL;
    if (in.kind == ARCH_KIND_RET)
        return 0;
    if (in.kind != ARCH_KIND_JMP && in.kind != ARCH_KIND_JMP_IND && in.kind != ARCH_KIND_JCC)
        return QP_EINVAL;
    /* Only an unconditional direct jump to a procedure's entry names its callee: a
     * conditional one may leave on either side (__memcpy_chk's shape). */
    const cfg_proc_t *q = in.kind == ARCH_KIND_JMP ? cfg_proc_at(s->prog, in.target) : NULL;
    if (callee != NULL && q != NULL && q->entry == in.target && !(q->flags & CFG_PROC_FRAGMENT))
        *callee = in.target + s->bias;
    return 1;
}

/*
 * Would snippets at PROC's entry and exits run in a copy of the procedure (a live
 * procedure relocated whole, whose exits all take one snippet list)? Asked before
 * giving its exits different snippets. A file: never.
 */
int
qpt_proc_runs_as_copy(qpt_space_t *s, uint32_t proc)
{
    if (s == NULL || s->prog == NULL || proc >= s->prog->nprocs)
        return QP_EINVAL;
    return s->ops->runs_as_copy(s, proc);
}

int
qpt_thread_stacks(qpt_space_t *s, qpt_stack_fn fn, void *arg)
{
    if (s == NULL || fn == NULL)
        return QP_EINVAL;
    return s->ops->thread_stacks(s, fn, arg);
}

int
qpt_thread_block(qpt_space_t *s, uint64_t var, size_t bytes, uint64_t thread_ptr,
                 uint64_t *addr)
{
    if (s == NULL || addr == NULL || bytes == 0)
        return QP_EINVAL;
    return s->ops->thread_block(s, var, bytes, thread_ptr, addr);
}

