/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Unwind tables for relocated code (ed_unwind.c): the LSDAs (.gcc_except_table) of the
 * FDEs that move, read and rewritten with their call sites through the map, shared
 * between FDEs that name the same LSDA for the same function start.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "editor/ed_unwind_priv.h"

/*****************************************************************************
 * LSDAs (.gcc_except_table)
 */

/* What the action chains of one LSDA use. */
typedef struct lsda_scan {
    const uint8_t *p;  /* the LSDA */
    size_t avail;      /* bytes readable from p */
    size_t act_base;   /* offset of the action table */
    size_t ttbase;     /* offset of TTBase (avail without a type table) */
    int has_tt;        /* there is a type table */
    size_t ext;        /* bytes of the action table used */
    uint64_t ntypes;   /* entries of the type table used */
    size_t spec_ext;   /* bytes of exception specification lists used after TTBase */
} lsda_scan_t;

/* Walk the action chain starting at ACTION (1 + offset); grow what SC records. */
static int
lsda_walk_actions(lsda_scan_t *sc, uint64_t action)
{
    uint64_t off = action - 1;
    for (int steps = 0;; steps++) {
        if (steps > MAX_ACTION_STEPS || off >= sc->ttbase - sc->act_base)
            return QP_EFORMAT;
        rd_t c = { sc->p, sc->ttbase, sc->act_base + (size_t)off, 0 };
        int64_t filter = rd_sleb(&c);
        size_t dpos = c.pos;
        int64_t disp = rd_sleb(&c);
        if (c.err || (filter != 0 && !sc->has_tt))
            return QP_EFORMAT;
        if (c.pos - sc->act_base > sc->ext)
            sc->ext = c.pos - sc->act_base;
        if (filter > 0) {
            if ((uint64_t)filter > sc->ntypes)
                sc->ntypes = (uint64_t)filter;
        } else if (filter < 0) {
            /* An exception specification: type indices from TTBase + (-filter - 1). */
            if (filter < -(int64_t)(sc->avail - sc->ttbase))
                return QP_EFORMAT;
            rd_t sp = { sc->p, sc->avail, sc->ttbase + (size_t)(-filter - 1), 0 };
            uint64_t idx;
            while ((idx = rd_uleb(&sp)) != 0 && !sp.err)
                if (idx > sc->ntypes)
                    sc->ntypes = idx;
            if (sp.err)
                return QP_EFORMAT;
            if (sp.pos - sc->ttbase > sc->spec_ext)
                sc->spec_ext = sp.pos - sc->ttbase;
        }
        if (disp == 0)
            return 0;
        int64_t next = (int64_t)(dpos - sc->act_base) + disp;
        if (next < 0)
            return QP_EFORMAT;
        off = (uint64_t)next;
    }
}

/* Read the header of the LSDA at ADDR for the function starting at FS. */
int
ed_uw_lsda_read_header(const cfg_image_t *img, uint64_t addr, uint64_t fs, lsda_hdr_t *h)
{
    memset(h, 0, sizeof(*h));
    h->p = cfg_image_ptr(img, addr, &h->avail);
    if (h->p == NULL)
        return QP_EFORMAT;
    rd_t c = { h->p, h->avail, 0, 0 };
    h->lpstart = fs;
    h->lpstart_enc = rd_u8(&c);
    if (h->lpstart_enc != DW_EH_PE_omit) {
        if (!ed_uw_pe_addressable(h->lpstart_enc) || (h->lpstart_enc & DW_EH_PE_indirect))
            return QP_EUNSUPP;
        uint64_t field = addr + c.pos;
        uint64_t raw = eh_rd_raw(&c, h->lpstart_enc);
        if (c.err)
            return QP_EFORMAT;
        if (eh_pe_value(h->lpstart_enc, raw, field, &h->lpstart) < 0)
            return QP_EUNSUPP;
    }
    h->ttype_enc = rd_u8(&c);
    h->ttbase = h->avail;
    if (h->ttype_enc != DW_EH_PE_omit) {
        if (!eh_pe_valid(h->ttype_enc))
            return QP_EUNSUPP;
        h->esize = eh_pe_size(h->ttype_enc);
        if (h->esize == 0)
            return QP_EUNSUPP; /* the table must be indexable */
        uint64_t off = rd_uleb(&c);
        if (c.err || off > h->avail - c.pos)
            return QP_EFORMAT;
        h->ttbase = c.pos + (size_t)off;
    }
    h->cs_enc = rd_u8(&c);
    if (!eh_pe_valid(h->cs_enc) || (h->cs_enc & 0x70) != DW_EH_PE_absptr)
        return QP_EUNSUPP;
    uint64_t cs_len = rd_uleb(&c);
    if (c.err || c.pos > h->ttbase || cs_len > h->ttbase - c.pos)
        return QP_EFORMAT;
    h->cs_pos = c.pos;
    h->cs_end = c.pos + (size_t)cs_len;
    return 0;
}

/* Read the call-site record at CS of an LSDA whose function has RANGE bytes. */
int
ed_uw_lsda_read_cs(const lsda_hdr_t *h, rd_t *cs, uint64_t range, cs_rec_t *r)
{
    r->start = eh_rd_raw(cs, h->cs_enc);
    r->len = eh_rd_raw(cs, h->cs_enc);
    r->lp = eh_rd_raw(cs, h->cs_enc);
    r->action = rd_uleb(cs);
    if (cs->err || r->start > range || r->len > range - r->start)
        return QP_EFORMAT;
    return 0;
}

/* A call-site record mapped to the new code, before it is encoded. */
typedef struct cs_new {
    uint64_t start, end; /* the new range */
    uint64_t lp;         /* the new landing pad (absolute), 0 for none */
    uint64_t action;
} cs_new_t;

/*
 * Read the LSDA of F (at f->lsda) and rewrite its call-site table for the new code
 * described by FM into *L. QP_EFORMAT for a malformed table, QP_EUNSUPP for encodings
 * this file does not handle, QP_ERANGE when a landing pad was not relocated or a new
 * offset does not fit the call-site encoding.
 */
static int
lsda_rewrite(ctx_t *cx, const fde_t *f, fmap_t *fm, lsda_t *l)
{
    memset(l, 0, sizeof(*l));
    l->old_addr = f->lsda;
    l->old_fs = f->pc_begin;
    lsda_hdr_t h;
    int hrc = ed_uw_lsda_read_header(cx->img, f->lsda, f->pc_begin, &h);
    if (hrc < 0) {
        cx->why = "has an LSDA whose header cannot be read";
        return hrc;
    }
    l->lpstart_enc = h.lpstart_enc;
    l->ttype_enc = h.ttype_enc;
    l->cs_enc = h.cs_enc;
    l->esize = h.esize;
    if (h.lpstart_enc != DW_EH_PE_omit) {
        uint64_t m = h.lpstart ? cx->map(cx->arg, h.lpstart) : 0;
        l->new_lpstart = m ? m : h.lpstart;
    }
    const uint8_t *p = h.p;
    size_t ttbase = h.ttbase, act_base = h.cs_end;
    rd_t cs = { p, h.cs_end, h.cs_pos, 0 };
    lsda_scan_t sc = { p, h.avail, act_base, ttbase, 0, 0, 0, 0 };
    sc.has_tt = h.ttype_enc != DW_EH_PE_omit;
    /* Pass 1: every record mapped, and the lowest new landing pad. */
    cs_new_t *recs = NULL;
    size_t nrecs = 0, cap = 0;
    uint64_t prev_end = fm->new_lo, min_lp = UINT64_MAX;
    int rc = 0;
    while (rc == 0 && cs.pos < cs.len) {
        cs_rec_t r;
        if ((rc = ed_uw_lsda_read_cs(&h, &cs, f->pc_range, &r)) < 0) {
            cx->why = "has an LSDA call-site record truncated or outside its code";
            break;
        }
        if (r.action != 0 && (rc = lsda_walk_actions(&sc, r.action)) < 0) {
            cx->why = "has an LSDA action chain that is malformed";
            break;
        }
        ed_uw_note_loc(cx, f->pc_begin + r.start, ED_LOC_CS_START);
        ed_uw_note_loc(cx, f->pc_begin + r.start + r.len, ED_LOC_CS_END);
        uint64_t ns = ed_uw_loc_map(fm, f->pc_begin + r.start);
        uint64_t ne = ed_uw_end_map(fm, f->pc_begin + r.start + r.len);
        if (ns < prev_end || ne < ns) {
            rc = QP_ERANGE; /* the table must stay sorted */
            cx->why = "has LSDA call sites out of order or overlapping";
            break;
        }
        prev_end = ne;
        uint64_t m = 0;
        if (r.lp != 0) {
            /* A landing pad must be a relocated instruction itself, not the next one
             * after padding: only the unwinder goes there. */
            uint64_t old = h.lpstart + r.lp;
            m = cx->map_insn ? cx->map_insn(cx->arg, old) : cx->map(cx->arg, old);
            if (m == 0) {
                rc = QP_ERANGE; /* the landing pad was not relocated */
                break;
            }
            min_lp = m < min_lp ? m : min_lp;
        }
        cs_new_t *v = ed_uw_grow(recs, &cap, nrecs, sizeof(*recs));
        if (v == NULL) {
            rc = QP_ENOMEM;
            break;
        }
        recs = v;
        recs[nrecs++] = (cs_new_t) { ns, ne, m, r.action };
    }
    /*
     * Landing pads are offsets from LPStart (the function start when omitted), and 0
     * means "no landing pad". gcc puts a nop before a landing pad that would begin a cold
     * fragment; the nop is no instruction of the CFG and does not move, so the pad may
     * now begin the new range. Then LPStart is given explicitly, one byte below the
     * lowest pad, so that every pad keeps a positive offset.
     */
    uint64_t base = l->lpstart_enc == DW_EH_PE_omit ? fm->new_lo : l->new_lpstart;
    if (rc == 0 && min_lp != UINT64_MAX && min_lp <= base) {
        l->lpstart_enc = DW_EH_PE_pcrel | DW_EH_PE_sdata4;
        l->new_lpstart = base = min_lp - 1;
    }
    /* Pass 2: the new table. */
    for (size_t i = 0; rc == 0 && i < nrecs; i++) {
        const cs_new_t *r = &recs[i];
        rc = ed_uw_wr_fmt(&l->cs, l->cs_enc, r->start - fm->new_lo);
        if (rc == 0)
            rc = ed_uw_wr_fmt(&l->cs, l->cs_enc, r->end - r->start);
        if (rc == 0)
            rc = ed_uw_wr_fmt(&l->cs, l->cs_enc, r->lp ? r->lp - base : 0);
        wb_uleb(&l->cs, r->action);
    }
    free(recs);
    if (rc < 0)
        return rc;
    if (l->cs.err)
        return QP_ENOMEM;
    l->actions = p + act_base;
    l->actions_len = sc.ext;
    if (l->ttype_enc != DW_EH_PE_omit) {
        if (sc.ntypes > (ttbase - act_base - sc.ext) / (size_t)l->esize) {
            cx->why = "has an LSDA type table that overlaps its actions";
            return QP_EFORMAT;
        }
        l->ntypes = (size_t)sc.ntypes;
        size_t tstart = ttbase - l->ntypes * (size_t)l->esize;
        l->types = p + tstart;
        l->types_addr = f->lsda + tstart;
        l->spec = p + ttbase;
        l->spec_len = sc.spec_ext;
        uint64_t tt = f->lsda + ttbase;
        l->tt_align = (l->esize == 8 && tt % 8 == 0) ? 8 : tt % 4 == 0 ? 4 : 1;
    }
    return 0;
}

/* Write L at the end of the blob (which lies at address AT); sets l->new_addr. */
int
ed_uw_lsda_write(wb_t *b, uint64_t at, lsda_t *l)
{
    ed_uw_wb_align(b, at, 4);
    size_t start = b->len;
    l->new_addr = at + start;
    wb_u8(b, l->lpstart_enc);
    if (l->lpstart_enc != DW_EH_PE_omit)
        QP_CHECK(ed_uw_wr_ptr(b, l->lpstart_enc, l->new_lpstart, at + b->len));
    wb_u8(b, l->ttype_enc);
    /* The bytes from the call-site encoding to the end of the action table. */
    size_t tail = 1 + uleb_size(l->cs.len) + l->cs.len + l->actions_len;
    if (l->ttype_enc != DW_EH_PE_omit) {
        /*
         * The TType base offset counts from after itself to the end of the type table,
         * whose start is aligned: its size and the padding depend on each other. The
         * width only grows (a ULEB128 may be padded), so this ends.
         */
        size_t width = 1;
        uint64_t off;
        for (;;) {
            uint64_t after = at + b->len + width;
            uint64_t tstart = after + tail;
            uint64_t pad = (l->tt_align - tstart % l->tt_align) % l->tt_align;
            off = tail + pad + (uint64_t)l->ntypes * (uint64_t)l->esize;
            if (uleb_size(off) <= width)
                break;
            width = uleb_size(off);
        }
        wb_uleb_pad(b, off, width);
    }
    wb_u8(b, l->cs_enc);
    wb_uleb(b, l->cs.len);
    wb_put(b, l->cs.p, l->cs.len);
    wb_put(b, l->actions, l->actions_len);
    if (l->ttype_enc != DW_EH_PE_omit) {
        ed_uw_wb_align(b, at, l->tt_align);
        for (size_t j = 0; j < l->ntypes; j++) {
            const uint8_t *e = l->types + j * (size_t)l->esize;
            uint64_t old_field = l->types_addr + j * (uint64_t)l->esize;
            if ((l->ttype_enc & 0x70) != DW_EH_PE_pcrel) {
                wb_put(b, e, (size_t)l->esize); /* absolute or base-relative: unchanged */
                continue;
            }
            rd_t c = { e, (size_t)l->esize, 0, 0 };
            uint64_t raw = eh_rd_raw(&c, l->ttype_enc), target;
            if (eh_pe_value(l->ttype_enc, raw, old_field, &target) < 0)
                return QP_EUNSUPP;
            QP_CHECK(ed_uw_wr_ptr(b, l->ttype_enc, target, at + b->len));
        }
        wb_put(b, l->spec, l->spec_len);
    }
    return b->err ? QP_ENOMEM : 0;
}

static size_t
lsda_hash_slot(const ctx_t *cx, uint64_t addr, uint64_t fs)
{
    uint64_t h = (addr * 0x9e3779b97f4a7c15ull) ^ (fs * 0xc2b2ae3d27d4eb4full);
    return (size_t)(h >> 17) & (cx->hash_cap - 1);
}

/* The index of the LSDA rewritten for (ADDR, FS), or SIZE_MAX. */
static size_t
lsda_find(const ctx_t *cx, uint64_t addr, uint64_t fs)
{
    for (size_t s = lsda_hash_slot(cx, addr, fs);; s = (s + 1) & (cx->hash_cap - 1)) {
        size_t v = cx->lsda_hash[s];
        if (v == 0)
            return SIZE_MAX;
        const lsda_t *l = &cx->lsdas[v - 1];
        if (l->old_addr == addr && l->old_fs == fs)
            return v - 1;
    }
}

static void
lsda_hash_set(ctx_t *cx, uint64_t addr, uint64_t fs, size_t v)
{
    size_t s = lsda_hash_slot(cx, addr, fs);
    while (cx->lsda_hash[s] != 0 && cx->lsda_hash[s] != v)
        s = (s + 1) & (cx->hash_cap - 1);
    cx->lsda_hash[s] = v;
}

/* Remove the hash entry pointing at index V (the last LSDA, being rolled back). */
void
ed_uw_lsda_hash_del(ctx_t *cx, uint64_t addr, uint64_t fs)
{
    /* Rebuild the probe chain: delete, then re-insert the cluster that follows. */
    size_t s = lsda_hash_slot(cx, addr, fs);
    while (cx->lsda_hash[s] != 0) {
        const lsda_t *l = &cx->lsdas[cx->lsda_hash[s] - 1];
        if (l->old_addr == addr && l->old_fs == fs)
            break;
        s = (s + 1) & (cx->hash_cap - 1);
    }
    cx->lsda_hash[s] = 0;
    for (s = (s + 1) & (cx->hash_cap - 1); cx->lsda_hash[s] != 0;
         s = (s + 1) & (cx->hash_cap - 1)) {
        size_t v = cx->lsda_hash[s];
        cx->lsda_hash[s] = 0;
        lsda_hash_set(cx, cx->lsdas[v - 1].old_addr, cx->lsdas[v - 1].old_fs, v);
    }
}

/*
 * The LSDA for F rewritten for FM: the one made before for the same old LSDA and function
 * start, or a new one. *IDX gets its index in cx->lsdas.
 */
int
ed_uw_lsda_for(ctx_t *cx, const fde_t *f, fmap_t *fm, size_t *idx)
{
    *idx = lsda_find(cx, f->lsda, f->pc_begin);
    if (*idx != SIZE_MAX)
        return 0;
    lsda_t *ls = ed_uw_grow(cx->lsdas, &cx->caplsdas, cx->nlsdas, sizeof(*ls));
    if (ls == NULL)
        return QP_ENOMEM;
    cx->lsdas = ls;
    lsda_t *l = &cx->lsdas[cx->nlsdas];
    int rc = lsda_rewrite(cx, f, fm, l);
    if (rc < 0) {
        free(l->cs.p);
        return rc;
    }
    *idx = cx->nlsdas++;
    lsda_hash_set(cx, f->lsda, f->pc_begin, *idx + 1);
    return 0;
}
