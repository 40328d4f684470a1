/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * One procedure's graph for the drivers: its blocks plus the virtual node X, which is
 * both EXIT (every edge that leaves the procedure goes to X: returns, tail calls, calls
 * that never return, ud2) and ENTRY (X -> entry block, one traversal per call; X -> each
 * other block entered from outside, such as exception landing pads). With that, flow is
 * conserved at every node, and the counts of all edges follow from the counts on the
 * edges outside a spanning tree (seed 004, section 2).
 *
 * For every edge it also decides where a counter for it would go (seed Figure 5):
 *  - in the source block when the edge is that block's only way out (after the call when
 *    the edge is a call's return: it then counts returns, not calls - exit() below
 *    makes the two differ);
 *  - else in the destination block when the edge is its only way in;
 *  - else, for a conditional branch, after it (not taken) or in a stub on its taken path:
 *    the critical edge is split;
 *  - else nowhere (jump-table and other indirect edges): the spanning tree must keep it.
 * Inside a block the increment goes where the arithmetic flags it changes are dead
 * (backward liveness over the procedure), else it saves and restores them.
 */
#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"
#include "patch/patch.h"

/* The flags `inc` changes (it leaves CF alone). */
#define INC_FLAGS (ARCH_FLAGS_STATUS & ~ARCH_FLAG_CF)

/* The instructions of a procedure's blocks, decoded once: block i has v[off[i]..off[i+1]). */
typedef struct insns {
    arch_insn_t *v;
    uint32_t *off;
} insns_t;

static int
decode_proc(const cfg_prog_t *prog, uint32_t first, uint32_t nb, insns_t *l)
{
    /* Room for the blocks' instructions as the analysis counted them: one allocation
     * (chromium: the malloc family was 40% of the graphs' time); grown if short. */
    size_t n = 0, cap = 0;
    for (uint32_t i = 0; i < nb; i++)
        cap += prog->blocks[first + i].ninsns;
    l->v = cap != 0 ? malloc(cap * sizeof(arch_insn_t)) : NULL;
    if ((l->off = malloc((nb + 1) * sizeof(uint32_t))) == NULL || (cap != 0 && l->v == NULL))
        return QP_ENOMEM;
    for (uint32_t i = 0; i < nb; i++) {
        const cfg_block_t *b = &prog->blocks[first + i];
        l->off[i] = (uint32_t)n;
        for (uint64_t a = b->start; a < b->end;) {
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 64;
                arch_insn_t *v = realloc(l->v, nc * sizeof(arch_insn_t));
                if (v == NULL)
                    return QP_ENOMEM;
                l->v = v;
                cap = nc;
            }
            if (cfg_image_decode(prog->img, a, 0, &l->v[n]) < 0)
                return QP_EDECODE;
            a += l->v[n++].len;
        }
        if (n == l->off[i])
            return QP_EDECODE; /* an empty block */
    }
    l->off[nb] = (uint32_t)n;
    return 0;
}

/* Block I's instructions as a list view. */
typedef struct insn_list {
    const arch_insn_t *v;
    size_t n;
} insn_list_t;

static insn_list_t
block_insns(const insns_t *l, uint32_t i)
{
    return (insn_list_t) { l->v + l->off[i], l->off[i + 1] - l->off[i] };
}

/* Flags live before instruction IN given LIVE after it, under G's ABI. */
static uint8_t
live_before(const drv_graph_t *g, const arch_insn_t *in, uint8_t live)
{
    return pt_flags_live_before(in, live, g->abi_flags_unsure ? PT_ABI_FLAGS_KEPT : PT_ABI_SYSV);
}

/*
 * Flags live where an edge leaves the procedure. Returns and calls: none (the ABI leaves
 * them undefined). A jump to another procedure's entry is a call too; but a jump into the
 * middle of other code (a cold fragment analysed as a procedure of its own, an interior
 * entry) may go to a conditional branch that tests flags set here: all live.
 */
static uint8_t
leave_live(const drv_graph_t *g, const cfg_prog_t *prog, const cfg_edge_t *ed)
{
    if (g->abi_flags_unsure)
        return ARCH_FLAGS_STATUS;
    if (ed->kind != CFG_EDGE_TAILCALL && ed->kind != CFG_EDGE_UNRESOLVED)
        return 0;
    if (ed->kind == CFG_EDGE_TAILCALL && ed->target != 0) {
        const cfg_proc_t *p = cfg_proc_at(prog, ed->target);
        if (p != NULL && p->entry == ed->target && !(p->flags & CFG_PROC_FRAGMENT))
            return 0;
    }
    return ARCH_FLAGS_STATUS;
}

uint8_t
drv_graph_live_at(const drv_graph_t *g, uint32_t bi, uint64_t at)
{
    const cfg_block_t *b = &g->prog->blocks[g->first + bi];
    arch_insn_t v[64];
    size_t n = 0;
    for (uint64_t a = at; a < b->end; a += v[n++].len)
        if (n == sizeof(v) / sizeof(v[0]) || cfg_image_decode(g->prog->img, a, b->end, &v[n]) < 0)
            return 0xff;
    uint8_t live = g->live_out[bi];
    while (n-- > 0)
        live = live_before(g, &v[n], live);
    return live;
}

int
drv_graph_save_at(const drv_graph_t *g, uint32_t bi, uint64_t at)
{
    uint8_t live = drv_graph_live_at(g, bi, at);
    return live == 0xff || pt_flags_must_save(live, g->clobbers);
}

/* Flags live after block B's last instruction, from its successors' live_in. */
static uint8_t
block_live_out(const drv_graph_t *g, uint32_t bi)
{
    const cfg_prog_t *prog = g->prog;
    const cfg_block_t *b = &prog->blocks[g->first + bi];
    uint8_t live = 0;
    for (uint32_t e = 0; e < b->nsucc; e++) {
        const cfg_edge_t *ed = cfg_block_succ(prog, b, e);
        if (ed->to != CFG_NONE && ed->to >= g->first && ed->to < g->first + g->nblocks)
            live |= g->live_in[ed->to - g->first];
        else
            live |= leave_live(g, prog, ed);
    }
    return live;
}

static int
push_edge(drv_graph_t *g, size_t *cap, drv_edge_t e)
{
    if (g->nedges == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        drv_edge_t *v = realloc(g->edges, nc * sizeof(drv_edge_t));
        if (v == NULL)
            return QP_ENOMEM;
        g->edges = v;
        *cap = nc;
    }
    g->edges[g->nedges++] = e;
    return 0;
}

/*
 * The first position in block BI (forward from its start) where the flags are dead, as
 * the instruction to put the snippet before; with none, the first instruction and
 * *SAVE = 1. L holds the block's instructions.
 */
static uint64_t
dead_spot_forward(const drv_graph_t *g, uint32_t bi, const insn_list_t *l, uint8_t *save)
{
    /* live[i] = flags live before instruction i, computed backwards. */
    uint8_t live = g->live_out[bi];
    uint8_t before[256];
    size_t n = l->n < 256 ? l->n : 256;
    for (size_t i = l->n; i-- > 0;) {
        live = live_before(g, &l->v[i], live);
        if (i < n)
            before[i] = live;
    }
    for (size_t i = 0; i < n; i++)
        if (!pt_flags_must_save(before[i], g->clobbers)) {
            *save = 0;
            return l->v[i].addr;
        }
    *save = 1;
    return l->v[0].addr;
}

/*
 * Where a counter for an edge whose source block BI has no other way out goes: after the
 * last instruction when it falls through (flags as at the block's end), else the last
 * dead spot scanning backwards from the last instruction.
 */
static void
spot_in_source(const drv_graph_t *g, uint32_t bi, const insn_list_t *l, drv_edge_t *e)
{
    const arch_insn_t *last = &l->v[l->n - 1];
    uint8_t live = g->live_out[bi];
    if (e->kind == CFG_EDGE_CALLRET) {
        /* Count returns, after the call: the callee left the flags undefined. */
        e->place = DRV_PLACE_AFTER;
        e->at = last->addr;
        e->save_flags = pt_flags_must_save(live, g->clobbers);
        return;
    }
    /* After the last instruction only when the edge is its fall-through: a system call
     * that ends the process (exit_group) leaves by a noreturn edge and never gets there. */
    int falls = e->kind == CFG_EDGE_FALL
        && (last->kind == ARCH_KIND_SEQ || last->kind == ARCH_KIND_NOP
            || last->kind == ARCH_KIND_ENDBR || last->kind == ARCH_KIND_SYSCALL);
    if (falls && !pt_flags_must_save(live, g->clobbers)) {
        e->place = DRV_PLACE_AFTER;
        e->at = last->addr;
        e->save_flags = 0;
        return;
    }
    for (size_t i = l->n; i-- > 0;) {
        live = live_before(g, &l->v[i], live);
        if (!pt_flags_must_save(live, g->clobbers)) {
            e->place = DRV_PLACE_BEFORE;
            e->at = l->v[i].addr;
            e->save_flags = 0;
            return;
        }
    }
    e->place = DRV_PLACE_BEFORE;
    e->at = last->addr;
    e->save_flags = 1;
}

/*
 * Is the block at START entered from outside the procedure's own edges: a landing pad
 * or code reached only through the translation table (no predecessors), or the target
 * of a jump from another procedure (XT: those targets, sorted)?
 */
static int
is_extra_root(const cfg_block_t *b, const uint64_t *xt, size_t nxt)
{
    return b->npred == 0 || cfg_u64_contains(xt, nxt, b->start);
}

#define TRY(e)                                                                           \
    do {                                                                                 \
        if ((rc = (e)) < 0)                                                              \
            goto out;                                                                    \
    } while (0)

static drv_edge_t
mk_edge(uint32_t from, uint32_t to, uint32_t cfg_edge, uint8_t kind)
{
    return (drv_edge_t) { .from = from, .to = to, .cfg_edge = cfg_edge,
                          .counter = QP_NOCOUNTER, .kind = kind };
}

/* Where a counter for edge ED would go (see the top of this file). */
static void
place_edge(drv_graph_t *g, const insns_t *l, drv_edge_t *ed)
{
    const cfg_prog_t *prog = g->prog;
    uint32_t X = g->nblocks;
    if (ed->from != X && g->outdeg[ed->from] == 1) {
        insn_list_t b = block_insns(l, ed->from);
        spot_in_source(g, ed->from, &b, ed);
        return;
    }
    if (ed->to != X && g->indeg[ed->to] == 1) {
        ed->place = DRV_PLACE_BEFORE;
        ed->at = g->block_at[ed->to];
        ed->save_flags = g->block_save[ed->to];
        return;
    }
    if (ed->from == X || ed->cfg_edge == CFG_NONE)
        return; /* DRV_PLACE_NONE */
    insn_list_t bl = block_insns(l, ed->from);
    const arch_insn_t *last = &bl.v[bl.n - 1];
    if (last->kind != ARCH_KIND_JCC)
        return;
    const cfg_block_t *b = &prog->blocks[g->first + ed->from];
    /* Edges that leave (a conditional tail call, a conditional call of a noreturn
     * function such as __chk_fail) are told apart by their target. */
    uint64_t target = prog->edges[ed->cfg_edge].target;
    int leaves = ed->to == X && target != 0;
    int taken = ed->kind == CFG_EDGE_TAKEN || (leaves && target == last->target);
    int fall = ed->kind == CFG_EDGE_FALL
        || (leaves && target != last->target && target >= b->end); /* maybe past padding */
    if (taken == fall)
        return; /* cannot tell which way it goes: no counter */
    uint8_t live = ed->to == X ? leave_live(g, prog, &prog->edges[ed->cfg_edge]) : g->live_in[ed->to];
    ed->place = taken ? DRV_PLACE_TAKEN : DRV_PLACE_AFTER;
    int ff = taken && ed->to != X ? ed_block_fall_free(prog, g->proc, g->first + ed->to) : 0;
    ed->fall_in = ff == 1 ? DRV_FALL_MAY : ff == 2 ? DRV_FALL_MAY | DRV_FALL_JUMP : 0;
    ed->at = last->addr;
    ed->save_flags = pt_flags_must_save(live, g->clobbers);
}

/* Append ADDR to *V (room for every instruction of the procedure, N). */
static int
push_site(uint64_t **v, uint32_t *k, uint32_t n, uint64_t addr)
{
    if (*v == NULL && (*v = malloc((size_t)n * sizeof(uint64_t))) == NULL)
        return QP_ENOMEM;
    (*v)[(*k)++] = addr;
    return 0;
}

int
drv_site_kind(const cfg_prog_t *prog, const arch_insn_t *prev, const arch_insn_t *in,
              const drv_prog_info_t *info)
{
    if (in->kind == ARCH_KIND_SYSCALL)
        return drv_syscall_may_fork(cfg_syscall_nr(prog->img, prev, in)) ? DRV_SITE_FORK : 0;
    if (in->kind != ARCH_KIND_CALL && in->kind != ARCH_KIND_CALL_IND)
        return 0;
    int direct = in->kind == ARCH_KIND_CALL && in->target != 0;
    const char *name = cfg_callee_name(prog, in);
    int kind = 0;
    if ((direct && cfg_u64_contains(info->forkers, info->nforkers, in->target))
        || drv_is_fork_name(name))
        kind |= DRV_SITE_FORK;
    if ((direct && cfg_u64_contains(info->starters, info->nstarters, in->target))
        || drv_is_thread_name(name))
        kind |= DRV_SITE_THREAD;
    return kind;
}

/* The calls and system calls of L after which a forked child may run, and the calls
 * before which the program may start a thread. */
static int
find_sites(drv_graph_t *g, const insns_t *l, const drv_prog_info_t *info)
{
    uint32_t n = l->off[g->nblocks];
    for (uint32_t i = 0; i < g->nblocks; i++)
        for (uint32_t k = l->off[i]; k < l->off[i + 1]; k++) {
            const arch_insn_t *in = &l->v[k];
            int kind = drv_site_kind(g->prog, k > l->off[i] ? &l->v[k - 1] : NULL, in, info);
            if (kind & DRV_SITE_FORK)
                QP_CHECK(push_site(&g->fork_after, &g->nfork_after, n, in->addr));
            if (kind & DRV_SITE_THREAD)
                QP_CHECK(push_site(&g->thread_before, &g->nthread_before, n, in->addr));
        }
    return 0;
}

/* Does a counter increment of PROG's ISA write the flags (x86-64's `incq`), or keep
 * them (AArch64's: no NZCV save, whatever is live)? Asked of the ISA's emitter: the
 * increment grows where the flags are live only when it must save them. */
static int
inc_writes_flags(const cfg_prog_t *prog)
{
    const arch_isa_t *isa = cfg_image_isa(prog->img);
    uint8_t buf[128];
    arch_snip_ctx_t dead = { 0 }, live = { 0 };
    live.live_flags = ARCH_FLAGS_STATUS;
    return isa->emit_counter_inc_at(0x1000, 0x2000, ARCH_INC_PLAIN, &live, buf, sizeof(buf))
        != isa->emit_counter_inc_at(0x1000, 0x2000, ARCH_INC_PLAIN, &dead, buf, sizeof(buf));
}

int
drv_insn_ops(const cfg_prog_t *prog, const arch_insn_t *i, arch_ops_t *ops)
{
    const arch_isa_t *isa = cfg_image_isa(prog->img);
    size_t avail;
    const uint8_t *p = cfg_image_ptr(prog->img, i->addr, &avail);
    if (isa->decode_ops == NULL || p == NULL)
        return -1;
    return isa->decode_ops(p, avail < i->len ? avail : i->len, i->addr, ops) < 0 ? -1 : 0;
}

/*
 * DRV_STATUS_*: does block B (entered from a call's return) begin by testing a register
 * of at most 32 bits against zero and end in a branch on equality? Read with two operand
 * decodes (the test, the branch), for blocks of that shape only. Any register: mostly
 * the status the call returned (%eax), sometimes a variable kept across the call in a
 * callee-saved one (python3.11: 104 of 4,931 such blocks), rated alike.
 */
static uint8_t
status_test(const cfg_prog_t *prog, const insn_list_t *b)
{
    const arch_insn_t *t = &b->v[0], *jcc = &b->v[b->n - 1];
    /* Cheap filters before the decodes: a branch on ZF alone (equal or not), a short
     * instruction setting it (test %eax,%eax: 2 bytes; cmp $0,%eax: 3). */
    if (b->n < 2 || jcc->kind != ARCH_KIND_JCC || jcc->flags_read != ARCH_FLAG_ZF
        || !(t->flags_written & ARCH_FLAG_ZF) || t->len > 3)
        return DRV_STATUS_NONE;
    for (size_t k = 1; k + 1 < b->n; k++)
        if (b->v[k].flags_written != 0)
            return DRV_STATUS_NONE; /* the branch tests something else */
    arch_ops_t test, br;
    if (drv_insn_ops(prog, t, &test) < 0)
        return DRV_STATUS_NONE;
    int self_test = test.op == ARCH_OP_TEST && test.dst.kind == ARCH_OPND_REG
        && test.src.kind == ARCH_OPND_REG && test.dst.reg == test.src.reg;
    int cmp_zero = test.op == ARCH_OP_CMP && test.dst.kind == ARCH_OPND_REG
        && test.src.kind == ARCH_OPND_IMM && test.src.imm == 0;
    if (!(self_test || cmp_zero) || test.dst.size > 4)
        return DRV_STATUS_NONE; /* a 64-bit value is more likely a pointer */
    if (drv_insn_ops(prog, jcc, &br) < 0)
        return DRV_STATUS_NONE;
    return br.cond == ARCH_COND_E    ? DRV_STATUS_ZERO_TAKEN
        : br.cond == ARCH_COND_NE ? DRV_STATUS_ZERO_FALLS
                                  : DRV_STATUS_NONE;
}

int
drv_graph_build(const cfg_prog_t *prog, uint32_t proc, const drv_prog_info_t *info,
                drv_graph_t *g)
{
    const uint64_t *xt = info->xt;
    size_t nxt = info->nxt;
    memset(g, 0, sizeof(*g));
    const cfg_proc_t *p = &prog->procs[proc];
    g->prog = prog;
    g->proc = proc;
    g->clobbers = info->clobbers ? info->clobbers : inc_writes_flags(prog) ? INC_FLAGS : 0;
    g->abi_flags_unsure = info->abi_flags_unsure;
    g->first = p->block;
    g->nblocks = p->nblocks;
    uint32_t nb = p->nblocks, X = nb;
    insns_t l = { 0 };
    int rc = 0;
    /* The per-block arrays (nb + 1 elements each) in one allocation, held by g->last
     * (drv_graph_free); the edges with room for the blocks' successors, a virtual edge
     * for a block without any, and the entry's (more only for other roots). */
    size_t m = (size_t)nb + 1, ecap = 1;
    for (uint32_t i = 0; i < nb; i++) {
        uint32_t ns = prog->blocks[g->first + i].nsucc;
        ecap += ns != 0 ? ns : 1;
    }
    void **parts[] = { (void **)&g->last, (void **)&g->last_target, (void **)&g->block_at,
                       (void **)&g->indeg, (void **)&g->outdeg, (void **)&g->block_counter,
                       (void **)&g->callee, (void **)&g->last_kind,
                       (void **)&g->tests_status, (void **)&g->live_in, (void **)&g->live_out,
                       (void **)&g->block_save };
    const size_t w = m * sizeof(uint64_t), h = m * sizeof(uint32_t);
    const size_t sizes[] = { w, w, w, h, h, h, h, m, m, m, m, m };
    g->edges = malloc(ecap * sizeof(drv_edge_t));
    if (drv_carve(parts, sizes, sizeof(sizes) / sizeof(sizes[0])) == NULL || g->edges == NULL) {
        free(g->last);
        free(g->edges);
        memset(g, 0, sizeof(*g));
        return QP_ENOMEM;
    }
    if (nb == 0) {
        rc = DRV_NOT_MEASURED;
        g->why = "no blocks";
        goto out;
    }
    for (uint32_t i = 0; i < nb; i++)
        g->block_counter[i] = QP_NOCOUNTER;
    TRY(decode_proc(prog, g->first, nb, &l));
    /* A counter between a load-exclusive and its store-exclusive would clear the
     * monitor (its own ldxr, or any store on real cores): the store would fail every
     * time. Such procedures are not measured (TODO(#34): keep the counters out of the
     * monitor's extent instead). */
    for (size_t k = 0; k < l.off[nb]; k++)
        if (l.v[k].flags & ARCH_F_EXCL_LOAD) {
            rc = DRV_NOT_MEASURED;
            g->why = "a load-exclusive (ldxr/stxr sequence): a counter inside it would "
                     "clear the exclusive monitor";
            goto out;
        }
    TRY(find_sites(g, &l, info));

    /* Edges: X -> entry, X -> other roots, then each block's own. */
    TRY(push_edge(g, &ecap, mk_edge(X, 0, CFG_NONE, QP_EDGE_ENTRY)));
    for (uint32_t i = 1; i < nb; i++)
        if (is_extra_root(&prog->blocks[g->first + i], xt, nxt))
            TRY(push_edge(g, &ecap, mk_edge(X, i, CFG_NONE, QP_EDGE_ROOT)));
    for (uint32_t i = 0; i < nb; i++) {
        const cfg_block_t *b = &prog->blocks[g->first + i];
        uint32_t n0 = g->nedges;
        for (uint32_t k = 0; k < b->nsucc; k++) {
            const cfg_edge_t *ed = cfg_block_succ(prog, b, k);
            uint32_t to = X;
            if (ed->to != CFG_NONE) {
                if (ed->to < g->first || ed->to >= g->first + nb) {
                    rc = DRV_NOT_MEASURED;
                    g->why = "an edge into another procedure's blocks";
                    goto out;
                }
                to = ed->to - g->first;
            }
            /* Table entries to the same block are one edge for counting purposes. */
            int dup = 0;
            if (ed->kind == CFG_EDGE_TABLE || ed->kind == CFG_EDGE_INDIRECT)
                for (uint32_t j = n0; j < g->nedges && !dup; j++)
                    dup = g->edges[j].to == to && g->edges[j].kind == ed->kind;
            if (!dup)
                TRY(push_edge(g, &ecap, mk_edge(i, to, b->succ + k, ed->kind)));
        }
        if (g->nedges == n0) /* no successor at all (hlt, ud2): it leaves */
            TRY(push_edge(g, &ecap, mk_edge(i, X, CFG_NONE, CFG_EDGE_NORETURN)));
    }
    for (uint32_t e = 0; e < g->nedges; e++) {
        g->outdeg[g->edges[e].from]++;
        g->indeg[g->edges[e].to]++;
    }

    /* Last instructions, then flags liveness to a fixpoint (blocks in reverse order). */
    for (uint32_t i = 0; i < nb; i++) {
        const arch_insn_t *last = &l.v[l.off[i + 1] - 1];
        g->last[i] = last->addr;
        g->last_kind[i] = last->kind;
        if (last->kind == ARCH_KIND_JMP || last->kind == ARCH_KIND_JCC
            || last->kind == ARCH_KIND_CALL)
            g->last_target[i] = last->target;
    }
    for (uint32_t e = 0; e < g->nedges; e++) { /* the statuses calls return */
        uint32_t to = g->edges[e].to;
        if (g->edges[e].kind == CFG_EDGE_CALLRET && to != X
            && g->last_kind[to] == ARCH_KIND_JCC) {
            insn_list_t b = block_insns(&l, to);
            g->tests_status[to] = status_test(prog, &b);
        }
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t i = nb; i-- > 0;) {
            uint8_t live = block_live_out(g, i);
            g->live_out[i] = live;
            for (uint32_t k = l.off[i + 1]; k-- > l.off[i];)
                live = live_before(g, &l.v[k], live);
            if (live != g->live_in[i]) {
                g->live_in[i] = live;
                changed = 1;
            }
        }
    }

    /* Where each block's counter (naive) and each edge's counter would go. */
    for (uint32_t i = 0; i < nb; i++) {
        insn_list_t b = block_insns(&l, i);
        g->block_at[i] = dead_spot_forward(g, i, &b, &g->block_save[i]);
    }
    for (uint32_t e = 0; e < g->nedges; e++)
        place_edge(g, &l, &g->edges[e]);
out:
    free(l.v);
    free(l.off);
    if (rc != 0) {
        const char *why = g->why;
        drv_graph_free(g);
        g->why = why;
    }
    return rc;
}

void
drv_graph_free(drv_graph_t *g)
{
    free(g->edges);
    free(g->last); /* (and every per-block array: one allocation) */
    free(g->fork_after);
    free(g->thread_before);
    free(g->freq);
    free(g->tree);
    drv_iv_plan_free(g->iv);
    memset(g, 0, sizeof(*g));
}

/* cfg_held_select: the entry of a procedure. */
static int
held_entry(const cfg_prog_t *prog, const cfg_held_t *h)
{
    const cfg_proc_t *p = cfg_proc_at(prog, h->addr);
    return p != NULL && p->entry == h->addr;
}

int
drv_addr_taken(const cfg_prog_t *prog, uint64_t **out, size_t *n)
{
    return cfg_held_select(prog, held_entry, out, n);
}
