/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * PURPOSE: the targets of indirect calls. Every indirect call site of a measured
 * procedure gets a table of QP_TARGET_WORDS counters (after every other counter) and a
 * snippet before the call that adds to it: the calls, the sum and the sum of squares of
 * the link-time target in one of QP_TARGET_BUCKETS buckets (qp_format.h). Plain sums
 * only: the runtime folds them and qp merges them like any counter, and qp gets the
 * target of each bucket that one target had to itself back from the two sums.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"

/* Where the target of the call at ADDR comes from, or -1 (a form not recorded). */
static int
call_operand(const cfg_prog_t *prog, uint64_t addr, arch_opnd_t *o)
{
    size_t avail;
    const uint8_t *p = cfg_image_ptr(prog->img, addr, &avail);
    arch_ops_t ops;
    if (p == NULL || arch_decode_ops(p, avail, addr, &ops) < 0 || ops.op != ARCH_OP_CALL)
        return -1;
    *o = ops.src;
    if (o->kind == ARCH_OPND_REG)
        return o->reg >= 1 && o->reg <= 16 && o->reg != ARCH_REG_SP ? 0 : -1;
    if (o->kind != ARCH_OPND_MEM || o->seg || o->size != 8)
        return -1;
    int base_ok = o->base == ARCH_REG_NONE || o->base == ARCH_REG_PC
        || (o->base >= 1 && o->base <= 16);
    int index_ok = o->index == ARCH_REG_NONE
        || (o->index >= 1 && o->index <= 16 && o->index != ARCH_REG_SP);
    return base_ok && index_ok && (o->base != ARCH_REG_PC || o->index == ARCH_REG_NONE) ? 0 : -1;
}


int
drv_indirect_tables(drv_result_t *res, const cfg_prog_t *prog)
{
    for (uint32_t k = 0; k < res->ncalls; k++) {
        qp_desc_call_t *c = &res->calls[k];
        if (c->kind != QP_CALL_INDIRECT)
            continue;
        const qp_desc_block_t *b = &res->blocks[c->block];
        uint64_t at = cfg_image_last_insn(prog->img, b->start, b->size, b->ninsns);
        arch_opnd_t o;
        if (at == 0 || call_operand(prog, at, &o) < 0)
            continue; /* its targets are not recorded: the report says so */
        drv_ind_site_t *v = realloc(res->ind, (res->nind + 1) * sizeof(*v));
        if (v == NULL)
            return QP_ENOMEM;
        res->ind = v;
        c->edge = res->ncounters;
        res->ind[res->nind++] = (drv_ind_site_t) { at, o, c->edge };
        res->ncounters += QP_TARGET_WORDS;
    }
    return 0;
}

/*****************************************************************************
 * The snippet of one site
 */

typedef struct tree {
    arch_snip_t *v;
    size_t n;
} tree_t;

static uint32_t
nd(tree_t *t, uint8_t op, uint32_t a, uint32_t b, int64_t imm, uint8_t flags)
{
    t->v[t->n] = (arch_snip_t) { .op = op, .size = 8, .flags = flags, .a = a, .b = b,
                                 .c = ARCH_SNIP_NONE, .imm = imm };
    return (uint32_t)t->n++;
}

#define NONE ARCH_SNIP_NONE
#define TREE_MAX 48 /* nodes of one site's snippet, at most */

/* The program's value of register R at the call (the stack pointer as the call sees it). */
static uint32_t
reg(tree_t *t, uint8_t r)
{
    return r == ARCH_REG_SP ? nd(t, ARCH_SN_SP, NONE, NONE, 0, 0) : nd(t, ARCH_SN_REG, NONE, NONE, r, 0);
}

/* The run-time target of the call (its operand O). */
static uint32_t
target(tree_t *t, const arch_opnd_t *o)
{
    if (o->kind == ARCH_OPND_REG)
        return reg(t, o->reg);
    if (o->base == ARCH_REG_PC) /* a word of the program (a GOT slot): rel32 reach */
        return nd(t, ARCH_SN_LOAD, NONE, NONE, o->disp, 0);
    uint32_t a = nd(t, ARCH_SN_CONST, NONE, NONE, o->disp, 0);
    if (o->base != ARCH_REG_NONE)
        a = nd(t, ARCH_SN_ADD, reg(t, o->base), a, 0, 0);
    if (o->index != ARCH_REG_NONE)
        a = nd(t, ARCH_SN_ADD, a,
               nd(t, ARCH_SN_MUL, reg(t, o->index), nd(t, ARCH_SN_CONST, NONE, NONE, o->scale, 0),
                  0, 0), 0, 0);
    return nd(t, ARCH_SN_LOAD_AT, a, NONE, 0, 0);
}

/*
 * key = T - bias (bias = ADDR(table) - table); word = ADDR(table) + 24 * ((key >> 4) % 4);
 * word[0] += 1; word[1] += key; word[2] += key * key.
 */
static uint32_t
site_tree(tree_t *t, const drv_ind_site_t *s, uint64_t table, uint8_t atomic)
{
    uint32_t bias = nd(t, ARCH_SN_SUB, nd(t, ARCH_SN_ADDR, NONE, NONE, (int64_t)table, 0),
                       nd(t, ARCH_SN_CONST, NONE, NONE, (int64_t)table, 0), 0, 0);
    uint32_t key = nd(t, ARCH_SN_SUB, target(t, &s->opnd), bias, 0, 0);
    uint32_t bucket = nd(t, ARCH_SN_AND,
                         nd(t, ARCH_SN_SHR, key, nd(t, ARCH_SN_CONST, NONE, NONE, 4, 0), 0, 0),
                         nd(t, ARCH_SN_CONST, NONE, NONE, QP_TARGET_BUCKETS - 1, 0), 0, 0);
    uint32_t word = nd(t, ARCH_SN_ADD, nd(t, ARCH_SN_ADDR, NONE, NONE, (int64_t)table, 0),
                       nd(t, ARCH_SN_MUL, bucket, nd(t, ARCH_SN_CONST, NONE, NONE, 24, 0), 0, 0),
                       0, 0);
    uint32_t calls = nd(t, ARCH_SN_ADD_AT, word, nd(t, ARCH_SN_CONST, NONE, NONE, 1, 0), 0, atomic);
    uint32_t sum = nd(t, ARCH_SN_ADD_AT,
                      nd(t, ARCH_SN_ADD, word, nd(t, ARCH_SN_CONST, NONE, NONE, 8, 0), 0, 0), key,
                      0, atomic);
    uint32_t sq = nd(t, ARCH_SN_ADD_AT,
                     nd(t, ARCH_SN_ADD, word, nd(t, ARCH_SN_CONST, NONE, NONE, 16, 0), 0, 0),
                     nd(t, ARCH_SN_MUL, key, key, 0, 0), 0, atomic);
    return nd(t, ARCH_SN_SEQ, calls, nd(t, ARCH_SN_SEQ, sum, sq, 0, 0), 0, 0);
}

static int
cmp_pair(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The miss counters of the jumps translated at run time, by site, for PLAN. */
static int
place_xlate(const drv_result_t *res, ed_plan_t *plan, uint64_t counters)
{
    size_t n = res->nxlate;
    uint64_t *v = malloc((2 * n + 1) * sizeof(uint64_t));
    if (v == NULL)
        return QP_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        v[2 * i] = res->xlate_site[i];
        v[2 * i + 1] = counters + 8ull * res->xlate_miss[i];
    }
    qsort(v, n, 2 * sizeof(uint64_t), cmp_pair);
    size_t u = 0; /* one counter per site (a block may end a procedure and a fragment) */
    for (size_t i = 0; i < n; i++)
        if (u == 0 || v[2 * (u - 1)] != v[2 * i]) {
            v[2 * u] = v[2 * i];
            v[2 * u + 1] = v[2 * i + 1];
            u++;
        }
    uint64_t *sites = malloc((u + 1) * sizeof(uint64_t)), *ctrs = malloc((u + 1) * sizeof(uint64_t));
    int rc = sites != NULL && ctrs != NULL ? 0 : QP_ENOMEM;
    for (size_t i = 0; rc == 0 && i < u; i++) {
        sites[i] = v[2 * i];
        ctrs[i] = v[2 * i + 1];
    }
    if (rc == 0)
        rc = ed_plan_set_xlate_miss(plan, sites, ctrs, u);
    free(sites);
    free(ctrs);
    free(v);
    return rc;
}

int
drv_indirect_place(drv_result_t *res, ed_plan_t *plan, uint64_t counters)
{
    QP_CHECK(place_xlate(res, plan, counters));
    if (res->nind == 0)
        return 0;
    free(res->ind_nodes);
    free(res->ind_snips);
    res->ind_nodes = calloc(res->nind * TREE_MAX, sizeof(arch_snip_t));
    res->ind_snips = calloc(res->nind, sizeof(ed_snippet_t));
    if (res->ind_nodes == NULL || res->ind_snips == NULL)
        return QP_ENOMEM;
    /* Before a call the flags are dead (nothing after it may read them) and so is the
     * red zone (the call writes below the stack pointer). */
    const arch_snip_ctx_t ctx = { .where = ARCH_SNX_CALL, .no_red_zone = 1 };
    /* Plain adds, threads or not: a lost update can only leave a bucket's sums
     * disagreeing (its calls then stay unattributed) or short (the rest of the site's
     * calls, known exactly from its block, stay unattributed): never a wrong target. */
    uint8_t atomic = 0;
    for (size_t i = 0; i < res->nind; i++) {
        tree_t t = { res->ind_nodes + i * TREE_MAX, 0 };
        uint32_t root = site_tree(&t, &res->ind[i], counters + 8ull * res->ind[i].table, atomic);
        res->ind_snips[i] = (ed_snippet_t) { t.v, t.n, root, ctx };
        size_t cap = res->probes_cap;
        ed_probe_t *p = res->probes;
        if (res->nprobes == cap) {
            cap = cap ? 2 * cap : 64;
            if ((p = realloc(res->probes, cap * sizeof(*p))) == NULL)
                return QP_ENOMEM;
            res->probes = p;
            res->probes_cap = cap;
        }
        res->probes[res->nprobes++] = (ed_probe_t) { .addr = res->ind[i].addr,
                                                      .at = ED_AT_BEFORE,
                                                      .what = ED_SNIP_CODE,
                                                      .counter = (uint32_t)i };
    }
    QP_CHECK(ed_plan_set_snippets(plan, res->ind_snips, res->nind));
    return ed_plan_set_probes(plan, res->probes, res->nprobes);
}
