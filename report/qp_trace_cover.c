/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * What a regenerated trace does not cover (report/qp_trace.h, qp_trace_untraced_t): the
 * calls of code that is not traced, counted from the regenerated blocks with the
 * description, and the cuts. qp trace prints them (tools/qp_trace.c).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "arch/qp_err.h"
#include "report/qp_trace.h"

int
qp_trace_untraced_init(qp_trace_untraced_t *u, const qp_trace_desc_t *d)
{
    if (u == NULL || d == NULL)
        return QP_EINVAL;
    memset(u, 0, sizeof(*u));
    u->by = calloc((size_t)d->nouts + 1, sizeof(uint64_t));
    return u->by == NULL ? QP_ENOMEM : 0;
}

void
qp_trace_untraced_free(qp_trace_untraced_t *u)
{
    if (u == NULL)
        return;
    free(u->by);
    u->by = NULL;
}

void
qp_trace_untraced_reset(qp_trace_untraced_t *u, const qp_trace_desc_t *d)
{
    uint64_t *by = u->by;
    memset(u, 0, sizeof(*u));
    u->by = by;
    memset(by, 0, (size_t)d->nouts * sizeof(uint64_t));
}

/* A call of code not traced: CALLEE, D's entry of it, or QPT_TRACE_NONE. */
static void
untraced_call(qp_trace_untraced_t *u, const qp_trace_desc_t *d, uint32_t callee)
{
    u->calls++;
    if (callee < d->nouts)
        u->by[callee]++;
}

void
qp_trace_untraced_block(qp_trace_untraced_t *u, const qp_trace_desc_t *d, uint32_t block)
{
    const qpt_trace_block_t *b = &d->blocks[block];
    /* A call through a pointer went to traced code when a procedure's entry follows
     * (the callee's ENTER; an untraced callee calling back at once counts as traced). */
    if (u->ptr && d->procs[b->proc].block != block)
        untraced_call(u, d, u->ptr_callee);
    u->ptr = b->call == QPT_TC_OUTSIDE && (b->flags & QPT_TB_CALLPTR);
    u->ptr_callee = b->callee;
    if (b->call == QPT_TC_OUTSIDE && !(b->flags & QPT_TB_CALLPTR))
        untraced_call(u, d, b->callee);
    if (b->flags & QPT_TB_LEAFCALL) {
        u->leaf++;
        if (b->callee < d->nouts)
            u->by[b->callee]++;
    }
}

void
qp_trace_untraced_mark(qp_trace_untraced_t *u, const char *what)
{
    u->cuts += strncmp(what, "cut:", 4) == 0;
}

void
qp_trace_untraced_end(qp_trace_untraced_t *u, const qp_trace_desc_t *d)
{
    if (u->ptr) /* the trace ended in a call through a pointer */
        untraced_call(u, d, u->ptr_callee);
    u->ptr = 0;
}

void
qp_trace_untraced_add(qp_trace_untraced_t *to, const qp_trace_untraced_t *u,
                      const qp_trace_desc_t *d)
{
    to->calls += u->calls;
    to->leaf += u->leaf;
    to->cuts += u->cuts;
    for (uint32_t i = 0; i < d->nouts; i++)
        to->by[i] += u->by[i];
}

static int
count_block(void *arg, uint32_t block, uint64_t addr)
{
    (void)addr;
    qp_trace_untraced_t *u = arg;
    qp_trace_untraced_block(u, u->desc, block);
    return 0;
}

static int
skip_mark(void *arg, const char *what, uint64_t addr)
{
    (void)arg;
    (void)what;
    (void)addr;
    return 0;
}

int
qp_trace_untraced_walk(const qp_trace_desc_t *d, const uint32_t *rec, size_t n,
                       qp_trace_untraced_t *u)
{
    if (d == NULL || u == NULL || (rec == NULL && n > 0))
        return QP_EINVAL;
    qp_trace_stats_t st;
    u->desc = d;
    qp_trace_sink_t s = { count_block, skip_mark, u, NULL };
    int rc = qp_trace_regen(d, rec, n, &s, &st);
    u->desc = NULL;
    return rc;
}

uint32_t
qp_trace_untraced_top(const qp_trace_desc_t *d, const qp_trace_untraced_t *u, uint32_t *top,
                      uint32_t max, uint32_t *more, uint64_t *pointers)
{
    const uint64_t *by = u->by;
    uint64_t named = 0;
    uint32_t k = 0;
    *more = 0;
    for (uint32_t i = 0; i < d->nouts; i++) {
        if (by[i] == 0)
            continue;
        named += by[i];
        if (max == 0 || (k == max && by[i] <= by[top[max - 1]])) {
            (*more)++;
            continue;
        }
        if (k == max)
            (*more)++; /* the last kept drops out */
        else
            k++;
        uint32_t j = k - 1; /* insertion, most called first */
        while (j > 0 && by[top[j - 1]] < by[i]) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = i;
    }
    *pointers = u->calls + u->leaf > named ? u->calls + u->leaf - named : 0;
    return k;
}

uint32_t
qp_trace_left_in_place(const qp_trace_desc_t *d)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < d->nouts; i++)
        n += d->outs[i].kind == QPT_TO_LEFT;
    return n;
}
