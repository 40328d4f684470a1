/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Blocks that could be counted from an induction variable of a loop around them
 * (doc/qp.md, "Counting loops from their induction variables"): a natural loop with no
 * call in it, whose only write to a 64-bit register r is one block's `add $k,r`,
 * `sub $k,r` or `lea k(r),r`. Each visit of the loop then changes r by k times the runs
 * of that block, so `sub %r,ctr` on the loop's ways in and `add %r,ctr` on its ways out
 * count the block. Found and checked here; priced and chosen by qp's tree (drv_qp.c:
 * qpt-rewrite --iv-loops, steps of +1 and -1 only; -v --weights prices every step),
 * emitted by drv_run.c.
 */
#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"

/* One instruction's register writes and, when it steps a register by a constant, which
 * and by how much (STEP 0 otherwise). Returns -1 when it cannot be read. */
static int
insn_writes(const cfg_prog_t *prog, const arch_insn_t *in, uint32_t *written, uint8_t *reg,
            int64_t *step)
{
    arch_ops_t ops;
    if (drv_insn_ops(prog, in, &ops) < 0)
        return -1;
    *written = ops.regs_written;
    *reg = ARCH_REG_NONE;
    *step = 0;
    const arch_opnd_t *d = &ops.dst, *s = &ops.src;
    if (d->kind != ARCH_OPND_REG || d->size != 8 || d->reg == ARCH_REG_SP)
        return 0;
    if ((ops.op == ARCH_OP_ADD || ops.op == ARCH_OP_SUB) && s->kind == ARCH_OPND_IMM)
        *step = ops.op == ARCH_OP_ADD ? s->imm : -s->imm;
    else if (ops.op == ARCH_OP_LEA && s->kind == ARCH_OPND_MEM && s->base == d->reg
             && s->index == ARCH_REG_NONE && s->seg == 0)
        *step = s->disp;
    if (*step != 0)
        *reg = d->reg;
    return 0;
}

/* Loop L of F in G: its candidate (block, register, step) into *OUT, 1; or 0 when it
 * has none. MEMBER: scratch of G's blocks. */
static int
loop_candidate(const drv_graph_t *g, const cfg_loop_forest_t *f, uint32_t l, uint8_t *member,
               drv_iv_loop_t *out)
{
    const cfg_prog_t *prog = g->prog;
    uint32_t nb = g->nblocks, writes[ARCH_NREGS] = { 0 }, at[ARCH_NREGS];
    int64_t steps[ARCH_NREGS] = { 0 };
    for (uint32_t i = 0; i < nb; i++)
        member[i] = (uint8_t)cfg_loop_contains(f, l, i);
    for (uint32_t i = 0; i < nb; i++) {
        if (!member[i])
            continue;
        const cfg_block_t *b = &prog->blocks[g->first + i];
        for (uint64_t a = b->start; a < b->end;) {
            arch_insn_t in;
            uint32_t w;
            uint8_t reg;
            int64_t step;
            if (cfg_image_decode(prog->img, a, 0, &in) < 0
                || in.kind == ARCH_KIND_CALL || in.kind == ARCH_KIND_CALL_IND
                || insn_writes(prog, &in, &w, &reg, &step) < 0)
                return 0; /* a call may write any register, or leave the loop for good */
            for (uint8_t r = 1; r < ARCH_NREGS; r++)
                if (w & (1u << r)) {
                    writes[r]++;
                    at[r] = i;
                    steps[r] = r == reg ? step : 0;
                }
            a += in.len;
        }
    }
    /* Every way in and out must take code that runs as often as it: not a table's edge,
     * not one from X (a counter for it would go inside the loop's first block). */
    for (uint32_t e = 0; e < g->nedges; e++) {
        const drv_edge_t *ed = &g->edges[e];
        int from_in = ed->from < nb && member[ed->from], to_in = ed->to < nb && member[ed->to];
        if (from_in != to_in && (ed->place == DRV_PLACE_NONE || ed->from == nb))
            return 0;
    }
    for (uint8_t r = 1; r < ARCH_NREGS; r++)
        if (writes[r] == 1 && steps[r] != 0) {
            *out = (drv_iv_loop_t) { .block = at[r], .loop = l, .reg = r, .step = steps[r] };
            return 1;
        }
    return 0;
}

int
drv_iv_find(const drv_graph_t *g, cfg_loop_forest_t **forest, drv_iv_loop_t **out,
            uint32_t *n)
{
    *forest = NULL;
    *out = NULL;
    *n = 0;
    if (g->prog->procs[g->proc].nloops == 0)
        return 0;
    cfg_loop_forest_t *f = NULL;
    int rc = cfg_loop_forest(g->prog, g->proc, &f);
    if (rc < 0)
        return rc;
    uint8_t *member = malloc(g->nblocks + 1);
    drv_iv_loop_t *v = calloc(f->nloops + 1, sizeof(*v));
    if (member == NULL || v == NULL) {
        free(member);
        free(v);
        cfg_loop_forest_destroy(f);
        return QP_ENOMEM;
    }
    for (uint32_t l = 0; l < f->nloops; l++)
        *n += (uint32_t)loop_candidate(g, f, l, member, &v[*n]);
    free(member);
    *forest = f;
    *out = v;
    return 0;
}

int
drv_iv_edge_crosses(const drv_graph_t *g, const cfg_loop_forest_t *f, const drv_iv_loop_t *iv,
                    uint32_t e)
{
    const drv_edge_t *ed = &g->edges[e];
    uint32_t nb = g->nblocks;
    int from_in = ed->from < nb && cfg_loop_contains(f, iv->loop, ed->from);
    int to_in = ed->to < nb && cfg_loop_contains(f, iv->loop, ed->to);
    return from_in != to_in;
}

/* Does any instruction of block BI (local) in [LO, HI) write register REG? 1, 0, or -1
 * when one cannot be read. */
static int
writes_between(const drv_graph_t *g, uint32_t bi, uint64_t lo, uint64_t hi, uint8_t reg)
{
    const cfg_block_t *b = &g->prog->blocks[g->first + bi];
    for (uint64_t a = b->start; a < b->end && a < hi;) {
        arch_insn_t in;
        uint32_t w;
        uint8_t r;
        int64_t step;
        if (cfg_image_decode(g->prog->img, a, 0, &in) < 0
            || insn_writes(g->prog, &in, &w, &r, &step) < 0)
            return -1;
        if (a >= lo && (w & (1u << reg)))
            return 1;
        a += in.len;
    }
    return 0;
}

int
drv_iv_spots_ok(const drv_graph_t *g, const cfg_loop_forest_t *f, const drv_iv_loop_t *iv)
{
    uint32_t nb = g->nblocks;
    for (uint32_t e = 0; e < g->nedges; e++) {
        if (!drv_iv_edge_crosses(g, f, iv, e))
            continue;
        const drv_edge_t *ed = &g->edges[e];
        if (ed->place == DRV_PLACE_TAKEN)
            continue; /* a stub on the edge itself */
        if (ed->place != DRV_PLACE_BEFORE && ed->place != DRV_PLACE_AFTER)
            return 0;
        /* The instruction at the spot, and the point just before or after it. */
        arch_insn_t in;
        if (cfg_image_decode(g->prog->img, ed->at, 0, &in) < 0)
            return 0;
        uint64_t point = ed->place == DRV_PLACE_BEFORE ? ed->at : ed->at + in.len;
        const cfg_block_t *b = g->prog->blocks + g->first;
        if (ed->from < nb && ed->at >= b[ed->from].start && ed->at < b[ed->from].end) {
            /* In the source: nothing after the point may write the register. */
            if (writes_between(g, ed->from, point, UINT64_MAX, iv->reg) != 0)
                return 0;
        } else if (ed->to < nb && ed->at >= b[ed->to].start && ed->at < b[ed->to].end) {
            /* In the target: nothing before the point may. */
            if (writes_between(g, ed->to, 0, point, iv->reg) != 0)
                return 0;
        } else {
            return 0;
        }
    }
    return 1;
}

void
drv_iv_plan_free(drv_iv_plan_t *p)
{
    if (p == NULL)
        return;
    cfg_loop_forest_destroy(p->forest);
    free(p->v);
    free(p->cand);
    free(p);
}

int
drv_iv_save_flags(const drv_graph_t *g, uint32_t e)
{
    const drv_edge_t *ed = &g->edges[e];
    const cfg_block_t *b = g->prog->blocks + g->first;
    uint32_t nb = g->nblocks, bi = ed->from < nb && ed->at >= b[ed->from].start
        && ed->at < b[ed->from].end ? ed->from : ed->to;
    uint8_t live = 0xff;
    if (ed->place == DRV_PLACE_TAKEN)
        live = ed->to < nb ? g->live_in[ed->to] : 0xff;
    else if (bi < nb && ed->place == DRV_PLACE_BEFORE)
        live = drv_graph_live_at(g, bi, ed->at);
    else if (bi < nb && ed->place == DRV_PLACE_AFTER) {
        arch_insn_t in;
        if (cfg_image_decode(g->prog->img, ed->at, 0, &in) == 0) {
            uint64_t next = ed->at + in.len;
            live = next < b[bi].end ? drv_graph_live_at(g, bi, next)
                : bi == ed->from && ed->to < nb ? g->live_in[ed->to] : 0xff;
        }
    }
    return live == 0xff || (live & ARCH_FLAGS_STATUS) != 0;
}
