/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * include/qpt/qpt_report.h, pprof profiles: the protobuf wire format of profile.proto
 * (varints and length-delimited fields, base/qp_bytes.h's writer and LEB128) and its
 * string table. Messages are encoded as they are given; the string table goes last.
 */
#include <stdlib.h>
#include <string.h>

#include "base/qp_bytes.h"
#include "base/qp_search.h"
#include "include/qpt/qpt.h"
#include "include/qpt/qpt_report.h"

/*****************************************************************************
 * The string table: index 0 is "", one index per distinct string
 */

typedef struct strtab {
    char **v;       /* by index (copies) */
    uint32_t n;     /* strings */
    uint32_t cap;   /* room in v */
    uint32_t *slot; /* hash: index + 1, 0 empty */
    uint32_t nslot; /* a power of 2, at least twice n */
    int oom;        /* memory ran out: later strings are index 0 */
} strtab_t;

/* Double the hash (or make its first 1,024 slots). 0 or -1. */
static int
strtab_grow(strtab_t *t)
{
    uint32_t ns = t->nslot ? 2 * t->nslot : 1024;
    uint32_t *sl = calloc(ns, sizeof(uint32_t));
    if (sl == NULL)
        return -1;
    for (uint32_t i = 0; i < t->n; i++) {
        uint32_t k = (uint32_t)(qp_str_hash(t->v[i]) & (ns - 1));
        while (sl[k])
            k = (k + 1) & (ns - 1);
        sl[k] = i + 1;
    }
    free(t->slot);
    t->slot = sl;
    t->nslot = ns;
    return 0;
}

static uint32_t
intern(strtab_t *t, const char *s)
{
    if (t->oom || (2 * (t->n + 1) > t->nslot && strtab_grow(t) < 0)) {
        t->oom = 1;
        return 0;
    }
    uint32_t k = (uint32_t)(qp_str_hash(s) & (t->nslot - 1));
    for (; t->slot[k]; k = (k + 1) & (t->nslot - 1))
        if (strcmp(t->v[t->slot[k] - 1], s) == 0)
            return t->slot[k] - 1;
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? 2 * t->cap : 1024;
        char **v = realloc(t->v, cap * sizeof(*v));
        if (v == NULL) {
            t->oom = 1;
            return 0;
        }
        t->v = v;
        t->cap = cap;
    }
    if ((t->v[t->n] = strdup(s)) == NULL) {
        t->oom = 1;
        return 0;
    }
    t->slot[k] = ++t->n;
    return t->n - 1;
}

/*****************************************************************************
 * The wire format
 */

struct qpt_pprof {
    wb_t prof;   /* the Profile message so far */
    wb_t tmp;    /* the message being built */
    wb_t sub;    /* a message inside it (a Line, a sample's packed values) */
    strtab_t st; /* its strings */
    int done;    /* qpt_pprof_bytes wrote the string table */
};

/* profile.proto's Profile fields. */
enum {
    P_SAMPLE_TYPE = 1, P_SAMPLE = 2, P_MAPPING = 3, P_LOCATION = 4, P_FUNCTION = 5,
    P_STRING_TABLE = 6, P_COMMENT = 13, P_DEFAULT_SAMPLE_TYPE = 14,
};

/* Field FIELD as a varint (wire type 0); zero values are left out, as proto3 does. */
static void
f_int(wb_t *w, unsigned field, uint64_t v)
{
    if (v == 0)
        return;
    wb_uleb(w, (uint64_t)field << 3);
    wb_uleb(w, v);
}

/* Field FIELD holding N bytes at B (wire type 2). */
static void
f_bytes(wb_t *w, unsigned field, const void *b, size_t n)
{
    wb_uleb(w, (uint64_t)field << 3 | 2);
    wb_uleb(w, n);
    wb_put(w, b, n);
}

/* The message SUB as field FIELD of W; SUB is emptied for the next one. */
static void
f_msg(wb_t *w, unsigned field, wb_t *sub)
{
    if (sub->err)
        w->err = 1;
    f_bytes(w, field, sub->p, sub->len);
    sub->len = 0;
}

int
qpt_pprof_create(qpt_pprof_t **out)
{
    if (out == NULL)
        return QPT_EINVAL;
    qpt_pprof_t *pp = calloc(1, sizeof(*pp));
    if (pp != NULL)
        intern(&pp->st, "");
    if (pp == NULL || pp->st.oom) {
        qpt_pprof_destroy(pp);
        *out = NULL;
        return QPT_ENOMEM;
    }
    *out = pp;
    return 0;
}

void
qpt_pprof_destroy(qpt_pprof_t *pp)
{
    if (pp == NULL)
        return;
    free(pp->prof.p);
    free(pp->tmp.p);
    free(pp->sub.p);
    for (uint32_t i = 0; i < pp->st.n; i++)
        free(pp->st.v[i]);
    free(pp->st.v);
    free(pp->st.slot);
    free(pp);
}

/* Can PP take another message? */
static int
open_for_more(const qpt_pprof_t *pp)
{
    return pp != NULL && !pp->done;
}

void
qpt_pprof_sample_type(qpt_pprof_t *pp, const char *type, const char *unit)
{
    if (!open_for_more(pp) || type == NULL || unit == NULL)
        return;
    f_int(&pp->tmp, 1, intern(&pp->st, type));
    f_int(&pp->tmp, 2, intern(&pp->st, unit));
    f_msg(&pp->prof, P_SAMPLE_TYPE, &pp->tmp);
}

void
qpt_pprof_mapping(qpt_pprof_t *pp, uint64_t lo, uint64_t hi, const char *path,
                  const char *build_id)
{
    if (!open_for_more(pp) || path == NULL || build_id == NULL)
        return;
    wb_t *t = &pp->tmp;
    f_int(t, 1, 1);
    f_int(t, 2, lo);
    f_int(t, 3, hi);
    f_int(t, 5, intern(&pp->st, path));
    f_int(t, 6, intern(&pp->st, build_id));
    f_int(t, 7, 1); /* has_functions */
    f_int(t, 8, 1); /* has_filenames */
    f_int(t, 9, 1); /* has_line_numbers */
    f_msg(&pp->prof, P_MAPPING, t);
}

void
qpt_pprof_function(qpt_pprof_t *pp, uint64_t id, const char *name, const char *system_name,
                   const char *file, uint64_t line)
{
    if (!open_for_more(pp) || name == NULL || system_name == NULL)
        return;
    wb_t *t = &pp->tmp;
    f_int(t, 1, id);
    f_int(t, 2, intern(&pp->st, name));
    f_int(t, 3, intern(&pp->st, system_name));
    f_int(t, 4, file != NULL ? intern(&pp->st, file) : 0);
    f_int(t, 5, line);
    f_msg(&pp->prof, P_FUNCTION, t);
}

void
qpt_pprof_location(qpt_pprof_t *pp, uint64_t id, uint64_t addr, uint64_t func_id,
                   uint64_t line)
{
    if (!open_for_more(pp))
        return;
    f_int(&pp->sub, 1, func_id);
    f_int(&pp->sub, 2, line);
    f_int(&pp->tmp, 1, id);
    f_int(&pp->tmp, 2, 1); /* mapping_id */
    f_int(&pp->tmp, 3, addr);
    f_msg(&pp->tmp, 4, &pp->sub);
    f_msg(&pp->prof, P_LOCATION, &pp->tmp);
}

void
qpt_pprof_sample(qpt_pprof_t *pp, uint64_t loc_id, const uint64_t *values, size_t n)
{
    if (!open_for_more(pp) || (values == NULL && n > 0))
        return;
    f_int(&pp->tmp, 1, loc_id);
    for (size_t i = 0; i < n; i++)
        wb_uleb(&pp->sub, values[i]);
    f_msg(&pp->tmp, 2, &pp->sub); /* packed repeated int64 */
    f_msg(&pp->prof, P_SAMPLE, &pp->tmp);
}

void
qpt_pprof_comment(qpt_pprof_t *pp, const char *text)
{
    if (!open_for_more(pp) || text == NULL)
        return;
    /* Written even when its index is 0 (the empty string): a repeated field. */
    wb_uleb(&pp->prof, (uint64_t)P_COMMENT << 3);
    wb_uleb(&pp->prof, intern(&pp->st, text));
}

void
qpt_pprof_default_sample_type(qpt_pprof_t *pp, const char *type)
{
    if (!open_for_more(pp) || type == NULL)
        return;
    f_int(&pp->prof, P_DEFAULT_SAMPLE_TYPE, intern(&pp->st, type));
}

int
qpt_pprof_bytes(qpt_pprof_t *pp, const uint8_t **bytes, size_t *len)
{
    if (pp == NULL || bytes == NULL || len == NULL)
        return QPT_EINVAL;
    if (!pp->done) {
        for (uint32_t i = 0; i < pp->st.n; i++)
            f_bytes(&pp->prof, P_STRING_TABLE, pp->st.v[i], strlen(pp->st.v[i]));
        pp->done = 1;
    }
    if (pp->prof.err || pp->tmp.err || pp->sub.err || pp->st.oom) {
        *bytes = NULL;
        *len = 0;
        return QPT_ENOMEM;
    }
    *bytes = pp->prof.p;
    *len = pp->prof.len;
    return 0;
}
