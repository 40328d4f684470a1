/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Unwind tables for relocated code (ed_unwind.c): the old .eh_frame read into records,
 * CIEs and FDEs (through base/qp_ehframe.h, the one .eh_frame parser), and checked
 * against .eh_frame_hdr and the code: an FDE the tables disagree on is never rewritten.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "editor/ed_unwind_priv.h"

/*****************************************************************************
 * Reading .eh_frame: record framing, CIEs, FDEs
 */

/* Split the section into records; QP_EFORMAT when a length runs past the end. */
int
ed_uw_split_records(ctx_t *cx)
{
    size_t cap = 0, off = 0;
    int align8 = 1, align4 = 1, got;
    eh_rec_t er;
    while ((got = eh_rec_read(cx->sec, cx->secsize, off, &er)) == 1) {
        rec_t *recs = ed_uw_grow(cx->recs, &cap, cx->nrecs, sizeof(*recs));
        if (recs == NULL)
            return QP_ENOMEM;
        cx->recs = recs;
        rec_t *r = &cx->recs[cx->nrecs++];
        r->off = er.off;
        r->body = er.body;
        r->end = er.end;
        r->is_cie = er.is_cie;
        r->cie_ptr = er.cie_ptr;
        r->idx = 0;
        align8 &= (r->end - r->off) % 8 == 0;
        align4 &= (r->end - r->off) % 4 == 0;
        off = r->end;
    }
    if (got < 0)
        return QP_EFORMAT;
    cx->rec_align = align8 ? 8 : align4 ? 4 : 1;
    return 0;
}

/* The record R as base/qp_ehframe.h reads it. */
static eh_rec_t
eh_rec(const rec_t *r)
{
    return (eh_rec_t) { r->off, r->body, r->end, r->is_cie, r->cie_ptr };
}

/* Parse the CIE of record R. Problems are recorded in it (err, fde_ok), not returned:
 * what the rewrite cannot copy faithfully is QP_EUNSUPP (its FDEs' code stays). */
static void
parse_cie(ctx_t *cx, const rec_t *r, cie_t *ci)
{
    memset(ci, 0, sizeof(*ci));
    ci->off = r->off;
    ci->size = r->end - r->off;
    ci->fde_enc = DW_EH_PE_absptr;
    ci->lsda_enc = DW_EH_PE_omit;
    ci->pers_enc = DW_EH_PE_omit;
    ci->new_off = SIZE_MAX;
    eh_rec_t er = eh_rec(r);
    eh_cie_t e;
    int bad = eh_cie_parse(cx->sec, &er, &e) < 0;
    if (e.version != 1 && e.version != 3 && e.version != 4) {
        ci->err = QP_EUNSUPP;
        return;
    }
    if (e.addr_size != 8 || e.seg_size != 0) { /* version 4's address, segment size */
        ci->err = QP_EUNSUPP;
        return;
    }
    if (bad || e.code_align == 0) {
        ci->err = QP_EFORMAT;
        return;
    }
    ci->code_align = e.code_align;
    ci->has_z = (uint8_t)e.has_z;
    ci->fde_enc = e.fde_enc;
    ci->lsda_enc = e.lsda_enc;
    ci->pers_enc = e.pers_enc;
    if (e.pers_pos != 0) {
        ci->pers_off = e.pers_pos - r->off;
        if (ed_uw_pe_addressable(ci->pers_enc))
            eh_pe_value(ci->pers_enc, e.pers_raw, cx->vma + e.pers_pos, &ci->pers);
    }
    if (!e.has_z && e.aug[0] != 0) {
        /* Without 'z' an unknown augmentation hides the layout of the FDEs. */
        ci->err = QP_EUNSUPP;
        return;
    }
    /*
     * FDEs start with pc_begin and pc_range whatever the augmentation, so their range
     * is known once the encoding is: when 'R' was read or there is none.
     */
    ci->fde_ok = ed_uw_pe_addressable(ci->fde_enc) && !(ci->fde_enc & DW_EH_PE_indirect)
                 && (e.seen_r || strchr(e.aug, 'R') == NULL);
    if (e.unknown) {
        /* An augmentation we cannot copy faithfully: such FDEs cannot move. */
        ci->err = QP_EUNSUPP;
        return;
    }
    if (!ci->fde_ok) {
        ci->err = QP_EUNSUPP;
        return;
    }
    if (ci->lsda_enc != DW_EH_PE_omit
        && (!ed_uw_pe_addressable(ci->lsda_enc) || eh_pe_size(ci->lsda_enc) <= 0
            || (ci->lsda_enc & DW_EH_PE_indirect))) {
        ci->err = QP_EUNSUPP;
        return;
    }
    /* A pc-relative personality is patched in place: its size must not depend on it. */
    if (ci->pers_enc != DW_EH_PE_omit && (ci->pers_enc & 0x70) == DW_EH_PE_pcrel
        && eh_pe_size(ci->pers_enc) <= 0) {
        ci->err = QP_EUNSUPP;
        return;
    }
    /* Initial instructions: copied verbatim, so they must hold no location. */
    ci->err = ed_uw_cfa_copy(cx, ci, e.insn_pos, r->end, NULL, NULL, NULL);
}

/* Decode the FDE of record R (its CIE already parsed). */
static void
parse_fde(ctx_t *cx, const rec_t *r, fde_t *f)
{
    const cie_t *ci = &cx->cies[f->cie];
    f->off = r->off;
    if (!ci->fde_ok) {
        f->err = ci->err ? ci->err : QP_EUNSUPP;
        return;
    }
    eh_rec_t er = eh_rec(r);
    eh_cie_t e = { .fde_enc = ci->fde_enc, .has_z = ci->has_z };
    eh_fde_t ef;
    int rc = eh_fde_parse(cx->sec, &er, &e, &ef);
    f->pc_range = ef.range;
    /* aug_pos is past pc_begin and pc_range once both were read. */
    if (ef.aug_pos == 0
        || eh_pe_value(ci->fde_enc, ef.begin_raw, cx->vma + ef.begin_pos, &f->pc_begin) < 0
        || f->pc_begin + f->pc_range < f->pc_begin) {
        f->err = QP_EFORMAT;
        return;
    }
    f->aug_pos = ef.aug_pos;
    f->aug_end = ef.aug_end;
    if (rc < 0) { /* its augmentation data's length runs past the record */
        f->err = QP_EFORMAT;
        return;
    }
    if (ci->has_z) {
        if (ci->lsda_enc != DW_EH_PE_omit && !ed_uw_pe_addressable(ci->lsda_enc)) {
            f->lsda_err = QP_EUNSUPP;
        } else if (ci->lsda_enc != DW_EH_PE_omit) {
            rd_t a = { cx->sec, f->aug_end, f->aug_pos, 0 };
            uint64_t lraw = eh_rd_raw(&a, ci->lsda_enc);
            f->lsda_size = a.pos - f->aug_pos;
            if (a.err || eh_pe_value(ci->lsda_enc, lraw, cx->vma + f->aug_pos, &f->lsda) < 0)
                f->lsda_err = QP_EFORMAT;
        }
    }
    f->insn_pos = ef.insn_pos;
    f->insn_end = ef.insn_end;
}

/* The record at section offset OFF, or NULL. */
const rec_t *
ed_uw_rec_at(const ctx_t *cx, size_t off)
{
    size_t lo = 0, hi = cx->nrecs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cx->recs[mid].off < off)
            lo = mid + 1;
        else if (cx->recs[mid].off > off)
            hi = mid;
        else
            return &cx->recs[mid];
    }
    return NULL;
}

/* Parse every CIE and FDE. QP_EFORMAT when an FDE's CIE pointer is not a CIE. */
int
ed_uw_parse_all(ctx_t *cx)
{
    size_t nc = 0, nf = 0;
    for (size_t i = 0; i < cx->nrecs; i++) {
        if (cx->recs[i].is_cie)
            nc++;
        else
            nf++;
    }
    cx->cies = calloc(nc ? nc : 1, sizeof(*cx->cies));
    cx->fdes = calloc(nf ? nf : 1, sizeof(*cx->fdes));
    if (cx->cies == NULL || cx->fdes == NULL)
        return QP_ENOMEM;
    for (size_t i = 0; i < cx->nrecs; i++) {
        rec_t *r = &cx->recs[i];
        if (!r->is_cie)
            continue;
        r->idx = (uint32_t)cx->ncies;
        parse_cie(cx, r, &cx->cies[cx->ncies++]);
    }
    for (size_t i = 0; i < cx->nrecs; i++) {
        rec_t *r = &cx->recs[i];
        if (r->is_cie)
            continue;
        uint32_t delta = r->cie_ptr;
        const rec_t *cr = delta <= r->body ? ed_uw_rec_at(cx, r->body - delta) : NULL;
        if (cr == NULL || !cr->is_cie)
            return QP_EFORMAT;
        r->idx = (uint32_t)cx->nfdes;
        fde_t *f = &cx->fdes[cx->nfdes++];
        f->cie = cr->idx;
        parse_fde(cx, r, f);
    }
    return 0;
}

/*****************************************************************************
 * Consistency of .eh_frame_hdr, .eh_frame and the code
 */

static int in_code(const ctx_t *cx, uint64_t x);

/*
 * Mark in KEEP the entries of a longest strictly increasing run of the locations of V (N
 * entries, in table order): what libgcc's binary search finds as the table says.
 */
static int
hdr_in_order(const hdr_ent_t *v, size_t n, uint8_t *keep)
{
    size_t *tail = malloc((n ? n : 1) * sizeof(size_t));
    size_t *prev = malloc((n ? n : 1) * sizeof(size_t));
    if (tail == NULL || prev == NULL) {
        free(tail);
        free(prev);
        return QP_ENOMEM;
    }
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        size_t lo = 0, hi = len;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (v[tail[mid]].loc < v[i].loc)
                lo = mid + 1;
            else
                hi = mid;
        }
        prev[i] = lo > 0 ? tail[lo - 1] : SIZE_MAX;
        tail[lo] = i;
        len += lo == len;
    }
    for (size_t i = len > 0 ? tail[len - 1] : SIZE_MAX; i != SIZE_MAX; i = prev[i])
        keep[i] = 1;
    free(tail);
    free(prev);
    return 0;
}

/*
 * Read the search table of the image's .eh_frame_hdr into cx->old_ents and give each FDE
 * it names its start there. Only a table libgcc searches counts (datarel sdata4 pairs
 * after an absolute count; without one libgcc reads .eh_frame itself and the FDEs' own
 * starts hold). QP_EFORMAT when the table runs past its section.
 */
int
ed_uw_hdr_read(ctx_t *cx)
{
    const cfg_section_t *h = NULL;
    for (size_t i = 0; i < cx->img->nsections && h == NULL; i++)
        if (cx->img->sections[i].name != NULL && cx->img->sections[i].bytes != NULL
            && strcmp(cx->img->sections[i].name, ".eh_frame_hdr") == 0)
            h = &cx->img->sections[i];
    if (h == NULL || h->size < 4 || h->size > SIZE_MAX / 2)
        return 0;
    rd_t c = { h->bytes, (size_t)h->size, 0, 0 };
    uint8_t version = rd_u8(&c), ptr_enc = rd_u8(&c), cnt_enc = rd_u8(&c);
    uint8_t tab_enc = rd_u8(&c);
    if (version != 1 || tab_enc != HDR_TABLE_ENC || !eh_pe_valid(ptr_enc)
        || !eh_pe_valid(cnt_enc) || (cnt_enc & 0x70) != DW_EH_PE_absptr)
        return 0;
    eh_rd_raw(&c, ptr_enc);
    uint64_t n = eh_rd_raw(&c, cnt_enc);
    if (c.err || n > (c.len - c.pos) / 8)
        return QP_EFORMAT;
    cx->old_ents = calloc(n ? (size_t)n : 1, sizeof(*cx->old_ents));
    cx->old_keep = calloc(n ? (size_t)n : 1, 1);
    if (cx->old_ents == NULL || cx->old_keep == NULL)
        return QP_ENOMEM;
    cx->have_hdr = 1;
    cx->nold_ents = (size_t)n;
    for (size_t i = 0; i < n; i++) {
        hdr_ent_t *e = &cx->old_ents[i];
        e->loc = h->vma + (uint64_t)(int64_t)(int32_t)rd_n(&c, 4);
        e->fde = h->vma + (uint64_t)(int64_t)(int32_t)rd_n(&c, 4);
    }
    /*
     * libgcc's binary search needs the table sorted. An entry out of order (not in a
     * longest sorted run), or whose start is in no code (a PIE's base may wrap it below
     * the others), describes no code for sure: it is not copied, its FDE has a defect.
     */
    QP_CHECK(hdr_in_order(cx->old_ents, cx->nold_ents, cx->old_keep));
    for (size_t i = 0; i < n; i++) {
        hdr_ent_t *e = &cx->old_ents[i];
        cx->old_keep[i] &= in_code(cx, e->loc);
        const rec_t *r = e->fde >= cx->vma && e->fde - cx->vma < cx->secsize
                             ? ed_uw_rec_at(cx, (size_t)(e->fde - cx->vma)) : NULL;
        if (r == NULL || r->is_cie)
            continue; /* names no FDE: copied as it is (ed_unwind_fdes says so) */
        fde_t *f = &cx->fdes[r->idx];
        if (!cx->old_keep[i]) {
            f->defect = DEF_HDR_DROP;
            f->def_at = e->loc;
        } else if (f->hdr_loc != 0) {
            f->defect = DEF_HDR_TWICE;
        } else {
            f->hdr_loc = e->loc;
        }
    }
    return 0;
}

/* Is X in a code section (always, in an image of bare tables)? */
static int
in_code(const ctx_t *cx, uint64_t x)
{
    const cfg_section_t *s = cfg_image_section_at(cx->img, x);
    return !cx->has_code || (s != NULL && (s->flags & CFG_SEC_CODE));
}

/* Where the unwinder takes F's code to start: the table's start when it names F. */
static uint64_t
fde_start(const fde_t *f)
{
    return f->hdr_loc != 0 ? f->hdr_loc : f->err < 0 ? 0 : f->pc_begin;
}

static int
cmp_start(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b; /* pairs: start, index */
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] > y[1]) - (x[1] < y[1]);
}

/*
 * Find the defects of every FDE (DEF_*): its start and the table's, its range inside one
 * executable section and clear of the next FDE's code; set f->next.
 */
int
ed_uw_check_fdes(ctx_t *cx)
{
    uint64_t *v = calloc(2 * cx->nfdes + 2, sizeof(uint64_t));
    if (v == NULL)
        return QP_ENOMEM;
    /* An image of bare tables without code (unit tests) is not checked against code
     * sections, nor for overlaps. */
    int has_code = cx->has_code;
    size_t n = 0;
    for (size_t i = 0; i < cx->nfdes; i++) {
        fde_t *f = &cx->fdes[i];
        uint64_t start = f->code_lo = fde_start(f);
        if (start == 0)
            continue; /* discarded by the linker, or not readable and not in the table */
        v[2 * n] = start;
        v[2 * n++ + 1] = i;
        if (f->defect != DEF_NONE)
            continue;
        const cfg_section_t *s = cfg_image_section_at(cx->img, f->pc_begin);
        if (f->err < 0)
            f->defect = DEF_UNREAD;
        else if (cx->have_hdr && f->hdr_loc == 0 && f->pc_range > 0)
            f->defect = DEF_HDR_NONE;
        else if (cx->have_hdr && f->hdr_loc != 0 && f->hdr_loc != f->pc_begin)
            f->defect = DEF_HDR_START;
        else if (s == NULL ? has_code
                           : !(s->flags & CFG_SEC_CODE)
                                 || f->pc_range > s->vma + s->size - f->pc_begin)
            f->defect = DEF_SECTION;
        f->def_at = f->hdr_loc;
    }
    if (n > 1)
        qsort(v, n, 2 * sizeof(uint64_t), cmp_start);
    for (size_t k = 0; k < n; k++) {
        fde_t *f = &cx->fdes[v[2 * k + 1]];
        const cfg_section_t *s = cfg_image_section_at(cx->img, v[2 * k]);
        uint64_t end = s != NULL ? s->vma + s->size : v[2 * k] + 1;
        f->next = k + 1 < n && v[2 * k + 2] < end ? v[2 * k + 2] : end;
        if (has_code && f->defect == DEF_NONE && f->pc_range > 0 && k + 1 < n
            && f->pc_range > v[2 * k + 2] - v[2 * k]) {
            f->defect = DEF_OVERLAP;
            f->def_at = v[2 * k + 2];
        }
    }
    free(v);
    return 0;
}

/*
 * Describe the defect of F into BUF and set [*LO, *HI) to the code the unwinder may take
 * it for: from the lower of its two starts to the next FDE's start.
 */
void
ed_uw_defect_str(const ctx_t *cx, const fde_t *f, char *buf, size_t size,
                 uint64_t *lo, uint64_t *hi)
{
    unsigned long long a = f->def_at, pb = f->pc_begin, pe = f->pc_begin + f->pc_range;
    uint64_t start = f->code_lo;
    *lo = f->err == 0 && f->pc_begin != 0 && f->pc_begin < start ? f->pc_begin : start;
    *hi = f->next > *lo ? f->next : *lo + 1;
    switch (f->defect) {
    case DEF_UNREAD: snprintf(buf, size, "cannot be read"); break;
    case DEF_HDR_NONE: snprintf(buf, size, "is not in .eh_frame_hdr's table"); break;
    case DEF_HDR_START:
        snprintf(buf, size, "starts at 0x%llx, .eh_frame_hdr says 0x%llx", pb, a);
        break;
    case DEF_HDR_TWICE: snprintf(buf, size, "is named twice in .eh_frame_hdr"); break;
    case DEF_HDR_DROP:
        snprintf(buf, size, "has an .eh_frame_hdr entry at 0x%llx %s: not copied", a,
            in_code(cx, a) ? "out of order" : "in no code");
        break;
    case DEF_SECTION:
        snprintf(buf, size, "range 0x%llx-0x%llx is not inside one code section", pb, pe);
        break;
    default:
        snprintf(buf, size, "range 0x%llx-0x%llx overlaps the FDE at 0x%llx", pb, pe, a);
        break;
    }
}
