/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * One report over several modules of a process (a program and the libraries it loaded,
 * each with its own profile and report): the modules' measured procedures and counted
 * PLT stubs in one flat-profile order, and the modules' totals summed.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "report/qp_report.h"

void
qp_process_free(qp_process_t *p)
{
    if (p == NULL)
        return;
    free(p->by_insns);
    free(p->rows);
    memset(p, 0, sizeof(*p));
}

static uint32_t
add_sat32(uint32_t a, uint32_t b)
{
    uint32_t t;
    return __builtin_add_overflow(a, b, &t) ? UINT32_MAX : t;
}

static int
cmp_rows(const void *a, const void *b, void *arg)
{
    const qp_process_t *p = arg;
    const qp_process_row_t *x = a, *y = b;
    if (x->res->insns != y->res->insns)
        return x->res->insns > y->res->insns ? -1 : 1;
    if (x->res->calls != y->res->calls)
        return x->res->calls > y->res->calls ? -1 : 1;
    int c = strcmp(qp_report_name(p->reps[x->module], x->res),
        qp_report_name(p->reps[y->module], y->res));
    if (c != 0)
        return c;
    if (x->module != y->module)
        return x->module < y->module ? -1 : 1;
    if (x->res->proc != y->res->proc)
        return x->res->proc < y->res->proc ? -1 : 1;
    /* Two stubs of one module: by entry, as their stubs[] is. */
    return x->res->stub < y->res->stub ? -1 : x->res->stub > y->res->stub;
}

static int
cmp_modules(const void *a, const void *b, void *arg)
{
    const qp_process_t *p = arg;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    uint64_t ix = qp_report_insns(p->reps[x]), iy = qp_report_insns(p->reps[y]);
    if (ix != iy)
        return ix > iy ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* The sums over the modules, and every module's rows. */
static void
collect(qp_process_t *p)
{
    for (uint32_t m = 0; m < p->nmodules; m++) {
        const qp_report_t *r = p->reps[m];
        uint64_t t, insns = qp_report_insns(r);
        p->total_insns
            = __builtin_add_overflow(p->total_insns, insns, &t) ? UINT64_MAX : t;
        p->nplt = add_sat32(p->nplt, r->nplt);
        p->nunmeasured = add_sat32(p->nunmeasured, r->nunmeasured);
        p->nviolating = add_sat32(p->nviolating, r->nviolating);
        p->napprox = add_sat32(p->napprox, r->napprox);
        p->nunknown = add_sat32(p->nunknown, r->nunknown);
        p->nsaturated = add_sat32(p->nsaturated, r->nsaturated);
        p->by_insns[m] = m;
        for (uint32_t k = 0; k < r->nprocs; k++)
            p->rows[p->nrows++] = (qp_process_row_t) { m, &r->procs[k] };
        for (uint32_t k = 0; k < r->nplt; k++)
            p->rows[p->nrows++] = (qp_process_row_t) { m, &r->plt[k] };
    }
}

int
qp_process_build(const qp_report_t *const *reps, uint32_t n, qp_process_t *out)
{
    if (out != NULL)
        memset(out, 0, sizeof(*out));
    if (reps == NULL || out == NULL)
        return QP_EINVAL;
    size_t nrows = 0;
    for (uint32_t m = 0; m < n; m++) {
        if (reps[m] == NULL || reps[m]->desc == NULL)
            return QP_EINVAL;
        nrows += (size_t)reps[m]->nprocs + reps[m]->nplt;
    }
    if (nrows > UINT32_MAX)
        return QP_EINVAL;
    out->reps = reps;
    out->nmodules = n;
    out->by_insns = malloc((n + 1) * sizeof(uint32_t));
    out->rows = malloc((nrows + 1) * sizeof(qp_process_row_t));
    if (out->by_insns == NULL || out->rows == NULL) {
        qp_process_free(out);
        return QP_ENOMEM;
    }
    collect(out);
    qsort_r(out->rows, out->nrows, sizeof(qp_process_row_t), cmp_rows, out);
    qsort_r(out->by_insns, n, sizeof(uint32_t), cmp_modules, out);
    return 0;
}
