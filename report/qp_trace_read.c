/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Control-flow traces, reading: a program's trace description (the `.qpt.trace`
 * section, every index checked) and its trace files, in either encoding (32-bit words,
 * or the chord tracer's 16-bit units, turned back into words), as qp_trace.h says. The
 * walk that regenerates the blocks from them is report/qp_trace.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch/qp_err.h"
#include "cfg/cfg.h"
#include "report/qp_profile.h"
#include "report/qp_trace.h"

#define NONE QPT_TRACE_NONE

static int
fail(char *why, size_t whylen, int rc, const char *path, const char *what)
{
    snprintf(why, whylen, "%s: %s", path, what);
    return rc;
}

static size_t
rounded(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* Is every index of D in range? */
static int
desc_valid(const qp_trace_desc_t *d)
{
    const qpt_trace_hdr_t *h = &d->hdr;
    for (uint32_t k = 0; k < h->nprocs; k++) {
        const qpt_trace_proc_t *p = &d->procs[k];
        if (p->nblocks == 0 || p->block >= h->nblocks || p->nblocks > h->nblocks - p->block
            || (p->enter_event != NONE && p->enter_event >= h->nevents))
            return 0;
    }
    for (uint32_t b = 0; b < h->nblocks; b++) {
        const qpt_trace_block_t *x = &d->blocks[b];
        if (x->proc >= h->nprocs || x->edge > h->nedges || x->nedges > h->nedges - x->edge
            || (x->tree != NONE && (x->tree < x->edge || x->tree >= x->edge + x->nedges))
            || x->call > QPT_TC_OUTSIDE
            || ((x->call == QPT_TC_DIRECT || x->call == QPT_TC_DIRECT_RET) && x->callee >= h->nprocs)
            || ((x->call == QPT_TC_OUTSIDE || (x->flags & QPT_TB_LEAFCALL)) && x->callee != NONE
                && x->callee >= d->nouts)
            || (x->block_event != NONE && x->block_event >= h->nevents)
            || (x->ret_event != NONE && x->ret_event >= h->nevents))
            return 0;
    }
    for (uint32_t e = 0; e < h->nedges; e++) {
        const qpt_trace_edge_t *x = &d->edges[e];
        if (x->from >= h->nblocks || x->kind > QPT_TE_TAIL_INTO
            || ((x->kind == QPT_TE_BLOCK || x->kind == QPT_TE_TAIL_INTO) && x->to >= h->nblocks)
            || (x->kind == QPT_TE_TAIL && x->to >= h->nprocs)
            || (x->event != NONE && x->event >= h->nevents))
            return 0;
    }
    for (uint32_t v = 0; v < h->nevents; v++) {
        const qpt_trace_event_t *x = &d->events[v];
        uint32_t lim = x->kind == QPT_TV_CHORD ? h->nedges
            : x->kind == QPT_TV_ENTER           ? h->nprocs
                                                : h->nblocks;
        if (x->kind > QPT_TV_RETURNED || x->a >= lim)
            return 0;
    }
    return 1;
}

/* The instruction part of D's description at *OFF (of N bytes); *OFF goes past it. */
static int
ins_part(qp_trace_desc_t *d, size_t *off, size_t n)
{
    qpt_trace_ins_hdr_t ih;
    if (*off > n || n - *off < sizeof(ih))
        return QP_EFORMAT;
    memcpy(&ih, d->mem + *off, sizeof(ih));
    if (memcmp(ih.magic, QPT_TRACE_IMAGIC, 8) != 0 || ih.nblocks != d->hdr.nblocks)
        return QP_EFORMAT;
    size_t o = *off + rounded(sizeof(ih));
    size_t nf = ((size_t)ih.nblocks + 1) * sizeof(uint32_t);
    if (o > n || nf > n - o || rounded(nf) > n - o || ih.ninsns > n - o - rounded(nf))
        return QP_EFORMAT;
    const uint32_t *first = (const uint32_t *)(d->mem + o);
    const uint8_t *len = d->mem + o + rounded(nf);
    if (first[0] != 0 || first[ih.nblocks] != ih.ninsns)
        return QP_EFORMAT;
    for (uint32_t b = 0; b < ih.nblocks; b++)
        if (first[b + 1] < first[b])
            return QP_EFORMAT;
    for (uint32_t i = 0; i < ih.ninsns; i++)
        if (len[i] == 0 || len[i] > 15)
            return QP_EFORMAT;
    d->ifirst = first;
    d->ilen = len;
    *off = o + rounded(nf) + rounded(ih.ninsns);
    return 0;
}

static const qp_trace_desc_t *sort_desc; /* cmp_slot's (qsort has no argument) */

static int
cmp_slot(const void *a, const void *b)
{
    uint32_t x = sort_desc->inew[*(const uint32_t *)a].slot;
    uint32_t y = sort_desc->inew[*(const uint32_t *)b].slot;
    return x < y ? -1 : x > y;
}

/* The new code part of D's description at *OFF (of N bytes); *OFF goes past it. */
static int
new_part(qp_trace_desc_t *d, size_t *off, size_t n)
{
    qpt_trace_new_hdr_t nh;
    uint32_t ninsns = d->ifirst[d->hdr.nblocks];
    if (*off > n || n - *off < sizeof(nh))
        return QP_EFORMAT;
    memcpy(&nh, d->mem + *off, sizeof(nh));
    size_t o = *off + rounded(sizeof(nh)), ns = (size_t)ninsns * sizeof(qpt_trace_new_t);
    if (memcmp(nh.magic, QPT_TRACE_NMAGIC, 8) != 0 || nh.ninsns != ninsns || o > n || ns > n - o)
        return QP_EFORMAT;
    d->nhdr = nh;
    d->inew = (const qpt_trace_new_t *)(d->mem + o);
    *off = o + rounded(ns);
    d->norder = malloc(((size_t)ninsns + 1) * sizeof(uint32_t));
    d->iblock = malloc(((size_t)ninsns + 1) * sizeof(uint32_t));
    if (d->norder == NULL || d->iblock == NULL)
        return QP_ENOMEM;
    for (uint32_t b = 0; b < d->hdr.nblocks; b++)
        for (uint32_t i = d->ifirst[b]; i < d->ifirst[b + 1]; i++) {
            const qpt_trace_new_t *x = &d->inew[i];
            d->iblock[i] = b;
            if (x->slot == QPT_TRACE_NEW_NONE)
                continue;
            /* A slot past the new code (a damaged description) would read past ntext. */
            if ((uint64_t)x->slot + x->pre + x->len + x->post > nh.size)
                return QP_EFORMAT;
            d->norder[d->nnorder++] = i;
        }
    sort_desc = d;
    qsort(d->norder, d->nnorder, sizeof(uint32_t), cmp_slot);
    return 0;
}

/* The new code's bytes of the program PATH (where a signal came in a snippet); none when
 * they cannot be read (the walk then marks such places). */
static void
read_new_text(qp_trace_desc_t *d, const char *path)
{
    cfg_image_t *img = NULL;
    size_t avail = 0;
    if (d->nhdr.size == 0 || d->nhdr.size > SIZE_MAX || cfg_image_open_bfd(path, &img) < 0)
        return;
    const uint8_t *p = cfg_image_ptr(img, d->nhdr.base, &avail);
    if (p != NULL && avail >= d->nhdr.size && (d->ntext = malloc(d->nhdr.size)) != NULL)
        memcpy(d->ntext, p, d->nhdr.size);
    cfg_image_destroy(img);
}

/* Does the part at OFF (of N bytes) of D's description start with MAGIC? */
static int
part_is(const qp_trace_desc_t *d, size_t off, size_t n, const char *magic)
{
    return off <= n && n - off >= 8 && memcmp(d->mem + off, magic, 8) == 0;
}

/* The list of code that is not traced at *OFF (of N bytes); *OFF goes past it. */
static int
out_part(qp_trace_desc_t *d, size_t *off, size_t n)
{
    qpt_trace_out_hdr_t oh;
    if (*off > n || n - *off < sizeof(oh))
        return QP_EFORMAT;
    memcpy(&oh, d->mem + *off, sizeof(oh));
    size_t o = *off + rounded(sizeof(oh));
    size_t no = (size_t)oh.nouts * sizeof(qpt_trace_out_t);
    if (memcmp(oh.magic, QPT_TRACE_OMAGIC, 8) != 0 || o > n || no > n - o
        || rounded(no) > n - o || oh.nbytes > n - o - rounded(no))
        return QP_EFORMAT;
    const qpt_trace_out_t *v = (const qpt_trace_out_t *)(d->mem + o);
    const char *names = (const char *)(d->mem + o + rounded(no));
    if (oh.nouts > 0 && (oh.nbytes == 0 || names[oh.nbytes - 1] != '\0'))
        return QP_EFORMAT;
    for (uint32_t i = 0; i < oh.nouts; i++)
        if (v[i].name >= oh.nbytes || v[i].kind > QPT_TO_GOT)
            return QP_EFORMAT;
    d->outs = v;
    d->nouts = oh.nouts;
    d->out_names = names;
    *off = o + rounded(no) + rounded(oh.nbytes);
    return 0;
}

/* The address-tracing part (--trace-mem) of D's description at *OFFP (of N bytes);
 * *OFFP goes past it. */
static int
mem_part(qp_trace_desc_t *d, size_t *offp, size_t n)
{
    size_t off = *offp;
    qpt_trace_mem_hdr_t mh;
    if (n - off < sizeof(mh))
        return QP_EFORMAT;
    memcpy(&mh, d->mem + off, sizeof(mh));
    if (memcmp(mh.magic, QPT_TRACE_MMAGIC, 8) != 0 || mh.nblocks != d->hdr.nblocks)
        return QP_EFORMAT;
    off += rounded(sizeof(mh));
    size_t nb = (size_t)mh.nblocks * sizeof(qpt_trace_mblock_t);
    size_t nr = (size_t)mh.nrefs * sizeof(qpt_trace_mref_t);
    if (off > n || nb > n - off || rounded(nb) > n - off || nr > n - off - rounded(nb))
        return QP_EFORMAT;
    const qpt_trace_mblock_t *mb = (const qpt_trace_mblock_t *)(d->mem + off);
    const qpt_trace_mref_t *mr = (const qpt_trace_mref_t *)(d->mem + off + rounded(nb));
    for (uint32_t b = 0; b < mh.nblocks; b++) {
        if (mb[b].ref > mh.nrefs || mb[b].nrefs > mh.nrefs - mb[b].ref)
            return QP_EFORMAT;
        for (uint32_t k = 0; k < mb[b].nrefs; k++) {
            const qpt_trace_mref_t *r = &mr[mb[b].ref + k];
            if (r->kind > QPT_TM_UNTRACED
                || (r->kind == QPT_TM_EA && r->from != QPT_TRACE_MNEW && r->from >= k))
                return QP_EFORMAT;
        }
    }
    d->mblocks = mb;
    d->mrefs = mr;
    d->nmrefs = mh.nrefs;
    *offp = off + rounded(nb) + rounded(nr);
    return 0;
}

int
qp_trace_desc_read(const char *path, qp_trace_desc_t *d, char *why, size_t whylen)
{
    memset(d, 0, sizeof(*d));
    cfg_image_t *img = NULL;
    int rc = cfg_image_open_bfd(path, &img);
    if (rc < 0)
        return fail(why, whylen, rc, path, qp_strerror(rc));
    const cfg_section_t *sec = cfg_image_section_named(img, ".qpt.trace");
    size_t n = sec != NULL ? sec->size : 0;
    if (sec == NULL) {
        cfg_image_destroy(img);
        return fail(why, whylen, QP_EFORMAT, path,
                    "no trace description (.qpt.trace): not rewritten with --driver=trace or trace-naive");
    }
    if (n < sizeof(qpt_trace_hdr_t)) {
        cfg_image_destroy(img);
        return fail(why, whylen, QP_EFORMAT, path, "trace description too short");
    }
    d->mem = malloc(n);
    if (d->mem == NULL) {
        cfg_image_destroy(img);
        return fail(why, whylen, QP_ENOMEM, path, "out of memory");
    }
    memcpy(d->mem, sec->bytes, n);
    cfg_image_destroy(img);
    memcpy(&d->hdr, d->mem, sizeof(d->hdr));
    const qpt_trace_hdr_t *h = &d->hdr;
    if (memcmp(h->magic, QPT_TRACE_MAGIC, 8) != 0 || h->kind > QPT_TRACE_CHORDS) {
        qp_trace_desc_free(d);
        return fail(why, whylen, QP_EFORMAT, path, "malformed trace description");
    }
    if (h->version < QPT_TRACE_VERSION_MIN || h->version > QPT_TRACE_VERSION) {
        snprintf(why, whylen,
                 "%s: trace description of version %u; this qp reads versions %u to %u "
                 "only: rewrite the program again", path, h->version,
                 QPT_TRACE_VERSION_MIN, QPT_TRACE_VERSION);
        qp_trace_desc_free(d);
        return QP_EFORMAT;
    }
    size_t need[4] = { (size_t)h->nprocs * sizeof(qpt_trace_proc_t),
                       (size_t)h->nblocks * sizeof(qpt_trace_block_t),
                       (size_t)h->nedges * sizeof(qpt_trace_edge_t),
                       (size_t)h->nevents * sizeof(qpt_trace_event_t) };
    size_t off = rounded(sizeof(*h));
    const void *part[4];
    for (int i = 0; i < 4; i++) {
        if (off > n || need[i] > n - off) {
            qp_trace_desc_free(d);
            return fail(why, whylen, QP_EFORMAT, path, "trace description truncated");
        }
        part[i] = d->mem + off;
        off += rounded(need[i]);
    }
    d->procs = part[0];
    d->blocks = part[1];
    d->edges = part[2];
    d->events = part[3];
    if (ins_part(d, &off, n) < 0) {
        qp_trace_desc_free(d);
        return fail(why, whylen, QP_EFORMAT, path, "malformed instruction part");
    }
    if ((rc = new_part(d, &off, n)) < 0) {
        qp_trace_desc_free(d);
        return fail(why, whylen, rc, path, rc == QP_ENOMEM ? "out of memory" : "malformed new code part");
    }
    if (part_is(d, off, n, QPT_TRACE_MMAGIC) && mem_part(d, &off, n) < 0) {
        qp_trace_desc_free(d);
        return fail(why, whylen, QP_EFORMAT, path, "malformed address-trace description");
    }
    if (off < n && out_part(d, &off, n) < 0) {
        qp_trace_desc_free(d);
        return fail(why, whylen, QP_EFORMAT, path, "malformed list of the code not traced");
    }
    if (!desc_valid(d)) {
        qp_trace_desc_free(d);
        return fail(why, whylen, QP_EFORMAT, path, "trace description with an index out of range");
    }
    read_new_text(d, path);
    return 0;
}

void
qp_trace_desc_free(qp_trace_desc_t *d)
{
    free(d->mem);
    free(d->norder);
    free(d->iblock);
    free(d->ntext);
    memset(d, 0, sizeof(*d));
}

int
qp_trace_file_read(const char *path, qpt_trace_file_t *hdr, uint32_t **rec, size_t *n,
                   uint64_t *bytes, char *why, size_t whylen)
{
    return qp_trace_file_read_vals(path, hdr, rec, n, NULL, NULL, NULL, bytes, why, whylen);
}

/* Append X to the value array *V (K used, *CAP). */
static int
push_val(uint64_t **v, size_t *k, size_t *cap, uint64_t x)
{
    if (*k == *cap) {
        size_t nc = *cap ? *cap * 2 : 1 << 16;
        uint64_t *nv = realloc(*v, nc * sizeof(uint64_t));
        if (nv == NULL)
            return QP_ENOMEM;
        *v = nv;
        *cap = nc;
    }
    (*v)[(*k)++] = x;
    return 0;
}

/* Append X TIMES to the records *V (*K used, *CAP). */
static int
push_rec(uint32_t **v, size_t *k, size_t *cap, uint32_t x, uint64_t times)
{
    while (times > 0) {
        if (*k == *cap) {
            uint32_t *nv = *cap < (SIZE_MAX / 8) ? realloc(*v, 2 * *cap * sizeof(uint32_t)) : NULL;
            if (nv == NULL)
                return QP_ENOMEM;
            *v = nv;
            *cap *= 2;
        }
        size_t m = *cap - *k < times ? *cap - *k : (size_t)times;
        for (size_t j = 0; j < m; j++)
            (*v)[(*k)++] = x;
        times -= m;
    }
    return 0;
}

/*
 * The words of a trace file after its header, from either encoding (the 16-bit units of
 * a QPT_TRACE_FMAGIC16 file turned back into the words they stand for).
 */
typedef struct word_src {
    FILE *f;
    int narrow;          /* 16-bit units */
    uint64_t bytes;      /* read so far */
    int cut;             /* the file ends inside a unit or a word's units */
    int bad;             /* a unit that stands for nothing */
    uint16_t u[4096];    /* narrow: units read, not yet decoded */
    size_t nu, iu;
} word_src_t;

/* The next unit of S in *U: 1, or 0 at the end of the file. */
static int
next_unit(word_src_t *s, uint16_t *u)
{
    if (s->iu == s->nu) {
        uint8_t raw[sizeof(s->u)];
        size_t got = fread(raw, 1, sizeof(raw), s->f);
        s->bytes += got;
        if (got % 2 != 0) {
            s->cut = 1; /* an odd byte: only at the very end (fread reads all it can) */
            got--;
        }
        for (size_t i = 0; i < got / 2; i++)
            s->u[i] = (uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8);
        s->nu = got / 2;
        s->iu = 0;
        if (s->nu == 0)
            return 0;
    }
    *u = s->u[s->iu++];
    return 1;
}

/* Up to MAX (>= 3) words of S into W; how many (0: the end, or S cut or bad). A value
 * record's marker comes with its two value words. */
static size_t
next_words(word_src_t *s, uint32_t *w, size_t max)
{
    if (!s->narrow) {
        uint8_t raw[4096 * 4];
        size_t cap = max < 4096 ? max : 4096;
        size_t got = fread(raw, 1, cap * 4, s->f);
        s->bytes += got;
        if (got % 4 != 0)
            s->cut = 1;
        for (size_t i = 0; i < got / 4; i++)
            memcpy(&w[i], raw + 4 * i, 4);
        return got / 4;
    }
    size_t k = 0;
    uint16_t u, part[4];
    while (k + 3 <= max && !s->bad && next_unit(s, &u)) {
        int more = u >= QPT_TRACE_U16_LONG && u < QPT_TRACE_U16_REPEAT ? 1
                 : u == QPT_TRACE_U16_RAW ? 2
                 : u >= QPT_TRACE_U16_VAL && u <= QPT_TRACE_U16_VAL + (QPT_TRACE_JUMP - QPT_TRACE_VAL)
                 ? 4 : 0;
        for (int j = 0; j < more; j++)
            if (!next_unit(s, &part[j])) {
                s->cut = 1;
                return k;
            }
        if (u < QPT_TRACE_U16_LONG)
            w[k++] = u;
        else if (u < QPT_TRACE_U16_REPEAT)
            w[k++] = (uint32_t)(u - QPT_TRACE_U16_LONG) << 16 | part[0];
        else if (u < QPT_TRACE_U16_RAW)
            w[k++] = QPT_TRACE_REPEAT + (u - QPT_TRACE_U16_REPEAT) + 1;
        else if (u == QPT_TRACE_U16_RAW)
            w[k++] = (uint32_t)part[1] << 16 | part[0];
        else if (more == 4) {
            w[k++] = QPT_TRACE_VAL + (u - QPT_TRACE_U16_VAL);
            w[k++] = (uint32_t)part[1] << 16 | part[0];
            w[k++] = (uint32_t)part[3] << 16 | part[2];
        } else if (u == QPT_TRACE_U16_EMPTY)
            w[k++] = QPT_TRACE_EMPTY;
        else if (u == QPT_TRACE_U16_LOST)
            w[k++] = QPT_TRACE_LOST;
        else if (u == QPT_TRACE_U16_END)
            w[k++] = QPT_TRACE_END;
        else
            s->bad = 1;
    }
    return k;
}

int
qp_trace_file_read_vals(const char *path, qpt_trace_file_t *hdr, uint32_t **rec, size_t *n,
                        uint64_t **vals, size_t *nvals, uint64_t *bias, uint64_t *bytes,
                        char *why, size_t whylen)
{
    uint64_t *vv = NULL, part = 0, lbias = 0;
    size_t nv = 0, vcap = 0, after_sig = SIZE_MAX;
    int pending = 0; /* words of a value record still to read */
    uint32_t vkind = 0; /* its kind */
    char msg[256] = "";
    int fd = qp_file_open_read(path, msg, sizeof(msg)); /* a FIFO is refused, not waited on */
    if (fd < 0)
        return fail(why, whylen, fd, path, msg);
    FILE *f = fdopen(fd, "rb");
    if (f == NULL) {
        close(fd);
        return fail(why, whylen, QP_EIO, path, strerror(errno));
    }
    int narrow = 0;
    if (fread(hdr, sizeof(*hdr), 1, f) == 1)
        narrow = memcmp(hdr->magic, QPT_TRACE_FMAGIC16, 8) == 0
            || memcmp(hdr->magic, QPT_TRACE_FMAGIC3, 8) == 0;
    if (!narrow && memcmp(hdr->magic, QPT_TRACE_FMAGIC, 8) != 0) {
        fclose(f);
        return fail(why, whylen, QP_EFORMAT, path, "not a qpt trace file");
    }
    word_src_t *src = calloc(1, sizeof(*src));
    size_t k = 0, cap = 1 << 16;
    uint32_t *v = malloc(cap * sizeof(uint32_t)), chunk[4096];
    int rc = v && src ? 0 : QP_ENOMEM;
    if (src != NULL) {
        src->f = f;
        src->narrow = narrow; /* both encodings of units read alike */
    }
    const char *bad = "a repeat count with no record before it (or right after a signal record)";
    size_t got;
    while (rc == 0 && (got = next_words(src, chunk, 4096)) > 0) {
        for (size_t i = 0; rc == 0 && i < got; i++) {
            uint32_t x = chunk[i];
            uint64_t times = 1;
            if (pending > 0) { /* a value record's words, low first */
                part |= (uint64_t)x << (pending == 2 ? 0 : 32);
                if (--pending > 0)
                    continue;
                if (vkind == QPT_TRACE_BIAS)
                    lbias = part;
                else if (vkind == QPT_TRACE_VAL && vals != NULL)
                    rc = push_val(&vv, &nv, &vcap, part);
                if (vkind != QPT_TRACE_SIGNAL && vkind != QPT_TRACE_FAULT
                    && vkind != QPT_TRACE_JUMP)
                    continue;
                /* In the records: the marker, then the rip as a link-time address. */
                part -= lbias;
                uint32_t w3[3] = { vkind, (uint32_t)part, (uint32_t)(part >> 32) };
                for (int j = 0; rc == 0 && j < 3; j++)
                    rc = push_rec(&v, &k, &cap, w3[j], 1);
                after_sig = k;
                continue;
            }
            if (x == QPT_TRACE_VAL || x == QPT_TRACE_BIAS || x == QPT_TRACE_SIGNAL
                || x == QPT_TRACE_FAULT || x == QPT_TRACE_JUMP) {
                pending = 2;
                part = 0;
                vkind = x;
                continue;
            }
            if (x >= QPT_TRACE_REPEAT && x < QPT_TRACE_VAL) { /* a run: the last again */
                if (k == 0 || k == after_sig) {
                    rc = QP_EFORMAT;
                    break;
                }
                times = x - QPT_TRACE_REPEAT;
                x = v[k - 1];
            }
            if (rc == 0)
                rc = push_rec(&v, &k, &cap, x, times);
        }
    }
    if (bias != NULL)
        *bias = lbias;
    int err = ferror(f);
    uint64_t total = sizeof(*hdr) + (src ? src->bytes : 0);
    if (rc == 0 && !err && src->bad) {
        rc = QP_EFORMAT;
        bad = "a 16-bit unit that stands for no record";
    }
    if (rc == 0 && !err && src->cut) {
        rc = QP_EFORMAT;
        bad = src->narrow ? "the file ends in the middle of a record (cut short)"
                         : "the file ends in the middle of a record (cut short: its size after "
                           "the header is no multiple of 4 bytes)";
    }
    fclose(f);
    free(src);
    if (rc == 0 && err)
        rc = QP_EIO;
    if (rc == 0 && pending > 0) {
        rc = QP_EFORMAT;
        bad = "a value or signal record cut short at the end of the file";
    }
    if (rc < 0) {
        free(v);
        free(vv);
        return fail(why, whylen, rc, path,
                    rc == QP_ENOMEM ? "out of memory" : rc == QP_EIO ? "read error" : bad);
    }
    *rec = v;
    *n = k;
    if (vals != NULL) {
        *vals = vv;
        *nvals = nv;
    }
    if (bytes != NULL)
        *bytes = total;
    return 0;
}
