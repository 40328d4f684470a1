/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * include/qpt/qpt_report.h, block and address traces: report/'s trace reader, walks,
 * untraced counts and cache simulator behind opaque public names.
 */
#include <stdlib.h>

#include "include/qpt/qpt.h"
#include "include/qpt/qpt_report.h"
#include "report/qp_cachesim.h"
#include "report/qp_trace.h"

/* The public sinks are the report's, field for field, with the format's access kinds. */
_Static_assert((int)QPT_TR_LOAD == (int)QPT_TM_LOAD && (int)QPT_TR_STORE == (int)QPT_TM_STORE,
               "public access kinds are the format's");

struct qpt_tr_desc {
    qp_trace_desc_t d;
};

struct qpt_tr_file {
    qpt_trace_file_t h; /* the file's header */
    uint32_t *rec;      /* its records */
    size_t n;
    uint64_t *vals;     /* its address values */
    size_t nvals;
    uint64_t bias;      /* load bias of the run */
    uint64_t bytes;     /* the file's size */
};

struct qpt_tr_untraced {
    qp_trace_untraced_t u;
    const qp_trace_desc_t *d; /* what it counts against */
};

struct qpt_tr_cachesim {
    qp_cachesim_t s;
};

/*****************************************************************************
 * The description
 */

int
qpt_tr_desc_read(const char *program, qpt_tr_desc_t **out, char *why, size_t whylen)
{
    if (out == NULL || program == NULL)
        return QPT_EINVAL;
    *out = NULL;
    qpt_tr_desc_t *d = malloc(sizeof(*d));
    if (d == NULL)
        return QPT_ENOMEM;
    int rc = qp_trace_desc_read(program, &d->d, why, whylen);
    if (rc < 0) {
        free(d);
        return rc;
    }
    *out = d;
    return 0;
}

void
qpt_tr_desc_free(qpt_tr_desc_t *d)
{
    if (d == NULL)
        return;
    qp_trace_desc_free(&d->d);
    free(d);
}

void
qpt_tr_desc_info(const qpt_tr_desc_t *d, qpt_tr_desc_info_t *out)
{
    out->nprocs = d->d.hdr.nprocs;
    out->nblocks = d->d.hdr.nblocks;
    out->has_mem = d->d.mblocks != NULL;
    out->lists_untraced = d->d.outs != NULL;
    out->nuntraced = d->d.outs != NULL ? d->d.nouts : 0;
    out->left_in_place = d->d.outs != NULL ? qp_trace_left_in_place(&d->d) : 0;
}

uint64_t
qpt_tr_block_start(const qpt_tr_desc_t *d, uint32_t b)
{
    return b < d->d.hdr.nblocks ? d->d.blocks[b].start : 0;
}

uint64_t
qpt_tr_block_mem_end(const qpt_tr_desc_t *d, uint32_t b)
{
    return b < d->d.hdr.nblocks && d->d.mblocks != NULL ? d->d.mblocks[b].end : 0;
}

uint32_t
qpt_tr_block_insns(const qpt_tr_desc_t *d, uint32_t b, const uint8_t **lens)
{
    if (b >= d->d.hdr.nblocks) {
        *lens = NULL;
        return 0;
    }
    *lens = d->d.ilen + d->d.ifirst[b];
    return d->d.ifirst[b + 1] - d->d.ifirst[b];
}

const char *
qpt_tr_untraced_name(const qpt_tr_desc_t *d, uint32_t i)
{
    return d->d.outs != NULL && i < d->d.nouts ? d->d.out_names + d->d.outs[i].name : "";
}

int
qpt_tr_untraced_is_left(const qpt_tr_desc_t *d, uint32_t i)
{
    return d->d.outs != NULL && i < d->d.nouts && d->d.outs[i].kind == QPT_TO_LEFT;
}

/*****************************************************************************
 * Trace files and the walks
 */

int
qpt_tr_file_read(const char *path, qpt_tr_file_t **out, char *why, size_t whylen)
{
    if (out == NULL || path == NULL)
        return QPT_EINVAL;
    *out = NULL;
    qpt_tr_file_t *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return QPT_ENOMEM;
    int rc = qp_trace_file_read_vals(path, &f->h, &f->rec, &f->n, &f->vals, &f->nvals,
                                     &f->bias, &f->bytes, why, whylen);
    if (rc < 0) {
        free(f);
        return rc;
    }
    *out = f;
    return 0;
}

void
qpt_tr_file_free(qpt_tr_file_t *f)
{
    if (f == NULL)
        return;
    free(f->rec);
    free(f->vals);
    free(f);
}

void
qpt_tr_file_info(const qpt_tr_file_t *f, qpt_tr_file_info_t *out)
{
    out->tid = f->h.tid;
    out->bytes = f->bytes;
    out->nvals = f->nvals;
    out->bias = f->bias;
}

int
qpt_tr_file_matches(const qpt_tr_file_t *f, const qpt_tr_desc_t *d)
{
    return f->h.id == d->d.hdr.id;
}

static void
stats_out(const qp_trace_stats_t *in, qpt_tr_stats_t *out)
{
    out->records = in->records;
    out->blocks = in->blocks;
    out->marks = in->marks;
    out->complete = in->complete;
}

int
qpt_tr_regen(const qpt_tr_desc_t *d, const qpt_tr_file_t *f, const qpt_tr_sink_t *sink,
             qpt_tr_stats_t *st)
{
    if (d == NULL || f == NULL || sink == NULL || st == NULL)
        return QPT_EINVAL;
    qp_trace_sink_t s = { sink->block, sink->mark, sink->arg, sink->signal };
    qp_trace_stats_t in = { 0 };
    int rc = qp_trace_regen(&d->d, f->rec, f->n, &s, &in);
    stats_out(&in, st);
    return rc;
}

int
qpt_tr_mem_regen(const qpt_tr_desc_t *d, const qpt_tr_file_t *f, const qpt_tr_mem_sink_t *msink,
                 qpt_tr_stats_t *st, uint64_t *nacc)
{
    if (d == NULL || f == NULL || msink == NULL || st == NULL || nacc == NULL)
        return QPT_EINVAL;
    qp_trace_mem_sink_t s = { msink->access, msink->mark, msink->arg };
    qp_trace_stats_t in = { 0 };
    int rc = qp_trace_mem_regen(&d->d, f->rec, f->n, f->vals, f->nvals, f->bias, &s, &in,
                                nacc);
    stats_out(&in, st);
    return rc;
}

/*****************************************************************************
 * What the traces do not cover
 */

int
qpt_tr_untraced_create(const qpt_tr_desc_t *d, qpt_tr_untraced_t **out)
{
    if (d == NULL || out == NULL)
        return QPT_EINVAL;
    *out = NULL;
    qpt_tr_untraced_t *u = malloc(sizeof(*u));
    if (u == NULL)
        return QPT_ENOMEM;
    int rc = qp_trace_untraced_init(&u->u, &d->d);
    if (rc < 0) {
        free(u);
        return rc;
    }
    u->d = &d->d;
    *out = u;
    return 0;
}

void
qpt_tr_untraced_destroy(qpt_tr_untraced_t *u)
{
    if (u == NULL)
        return;
    qp_trace_untraced_free(&u->u);
    free(u);
}

void
qpt_tr_untraced_reset(qpt_tr_untraced_t *u)
{
    qp_trace_untraced_reset(&u->u, u->d);
}

void
qpt_tr_untraced_block(qpt_tr_untraced_t *u, uint32_t block)
{
    qp_trace_untraced_block(&u->u, u->d, block);
}

void
qpt_tr_untraced_mark(qpt_tr_untraced_t *u, const char *what)
{
    qp_trace_untraced_mark(&u->u, what);
}

void
qpt_tr_untraced_end(qpt_tr_untraced_t *u)
{
    qp_trace_untraced_end(&u->u, u->d);
}

void
qpt_tr_untraced_add(qpt_tr_untraced_t *to, const qpt_tr_untraced_t *u)
{
    qp_trace_untraced_add(&to->u, &u->u, u->d);
}

int
qpt_tr_untraced_walk(const qpt_tr_file_t *f, qpt_tr_untraced_t *u)
{
    if (f == NULL || u == NULL)
        return QPT_EINVAL;
    return qp_trace_untraced_walk(u->d, f->rec, f->n, &u->u);
}

uint32_t
qpt_tr_untraced_top(const qpt_tr_untraced_t *u, uint32_t *top, uint32_t max, uint32_t *more,
                    uint64_t *pointers)
{
    return qp_trace_untraced_top(u->d, &u->u, top, max, more, pointers);
}

void
qpt_tr_untraced_counts(const qpt_tr_untraced_t *u, qpt_tr_untraced_counts_t *out)
{
    out->calls = u->u.calls;
    out->leaf = u->u.leaf;
    out->cuts = u->u.cuts;
}

uint64_t
qpt_tr_untraced_by(const qpt_tr_untraced_t *u, uint32_t i)
{
    return u->d->outs != NULL && i < u->d->nouts ? u->u.by[i] : 0;
}

/*****************************************************************************
 * The cache simulator
 */

int
qpt_tr_cache_spec_ok(const char *spec)
{
    qp_cache_t c;
    return spec != NULL && qp_cache_parse(spec, &c) == 0;
}

int
qpt_tr_cachesim_create(const char *l1, const char *ll, qpt_tr_cachesim_t **out)
{
    if (out == NULL || l1 == NULL || ll == NULL)
        return QPT_EINVAL;
    *out = NULL;
    qpt_tr_cachesim_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return QPT_ENOMEM;
    if (qp_cache_parse(l1, &s->s.l1) < 0 || qp_cache_parse(ll, &s->s.ll) < 0) {
        free(s);
        return QPT_EINVAL;
    }
    if (qp_cache_init(&s->s.l1) < 0 || qp_cache_init(&s->s.ll) < 0) {
        qpt_tr_cachesim_destroy(s);
        return QPT_ENOMEM;
    }
    *out = s;
    return 0;
}

void
qpt_tr_cachesim_destroy(qpt_tr_cachesim_t *s)
{
    if (s == NULL)
        return;
    qp_cache_free(&s->s.l1);
    qp_cache_free(&s->s.ll);
    free(s);
}

void
qpt_tr_cachesim_access(qpt_tr_cachesim_t *s, uint64_t addr, uint32_t size, int write)
{
    qp_cachesim_access(&s->s, addr, size, write);
}

void
qpt_tr_cachesim_counts(const qpt_tr_cachesim_t *s, qpt_tr_cache_counts_t *out)
{
    out->reads = s->s.reads;
    out->writes = s->s.writes;
    out->l1_read_misses = s->s.l1_read_misses;
    out->l1_write_misses = s->s.l1_write_misses;
    out->ll_read_misses = s->s.ll_read_misses;
    out->ll_write_misses = s->s.ll_write_misses;
}
