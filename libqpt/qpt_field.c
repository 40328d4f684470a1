/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Arguments' fields by their DWARF types (qpt_arg_field): cfg/cfg_dwtype.c finds the
 * offsets; this file names the procedure and builds the reads.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "libqpt/qpt_priv.h"

int
qpt_arg_field(const qpt_space_t *s, uint32_t proc, int arg, const char *path,
              qpt_field_t *out, char *why, size_t whylen)
{
    if (s == NULL || s->prog == NULL || proc >= qpt_nprocs(s) || path == NULL || out == NULL
        || arg < 0 || arg > 5) {
        if (why != NULL && whylen > 0)
            snprintf(why, whylen, "invalid argument");
        return QPT_EINVAL;
    }
    const cfg_proc_t *p = &s->prog->procs[proc];
    cfg_field_t f;
    int rc = cfg_arg_field(s->img, p->entry, p->name, arg, path, &f, why, whylen);
    if (rc < 0)
        return rc;
    _Static_assert(QPT_FIELD_MAX == CFG_FIELD_MAX, "one field path limit");
    memset(out, 0, sizeof(*out));
    out->nloads = f.nloads;
    out->is_signed = f.is_signed;
    for (int i = 0; i < f.nloads; i++) {
        out->offset[i] = f.offset[i];
        out->size[i] = f.size[i];
    }
    return 0;
}

qpt_expr_t
qpt_field_value(qpt_snippet_t *sn, qpt_expr_t base, const qpt_field_t *f)
{
    if (f == NULL || f->nloads < 1 || f->nloads > QPT_FIELD_MAX)
        return QPT_NONE;
    qpt_expr_t v = base;
    for (int i = 0; i < f->nloads; i++) {
        qpt_expr_t at = f->offset[i] != 0 ? qpt_op(sn, QPT_ADD, v, qpt_const(sn, f->offset[i])) : v;
        v = qpt_load_safe(sn, at, f->size[i]);
    }
    int last = f->size[f->nloads - 1];
    if (f->is_signed && last < 8) {
        /* zero-extended to signed: (v ^ m) - m with m the sign bit */
        int64_t m = (int64_t)1 << (8 * last - 1);
        v = qpt_op(sn, QPT_SUB, qpt_op(sn, QPT_XOR, v, qpt_const(sn, m)), qpt_const(sn, m));
    }
    return v;
}
