/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Unwind tables for relocated code. Reads the image's .eh_frame completely (CIEs, FDEs,
 * CFA programs) and the LSDAs its FDEs name (.gcc_except_table), and writes one blob:
 *
 *   [copies of CIEs, new FDEs, 4-byte zero] [new LSDAs, 4-aligned] [new .eh_frame_hdr]
 *
 * A new FDE describes the relocated copy of a procedure: every code location of the old
 * FDE (pc_begin, pc_range, DW_CFA_advance_loc*, DW_CFA_set_loc) and of its LSDA
 * (call-site start, length, landing pad) goes through the editor's map. Everything else
 * is copied byte for byte; pointers that are pc-relative are re-encoded for their new
 * field so that they still reach the same absolute address (personality slots, type_info
 * references). The new .eh_frame_hdr's search table lists the old FDEs of code that did
 * not move and the new FDEs, so libgcc finds either through PT_GNU_EH_FRAME.
 *
 * Which view counts: libgcc finds an FDE through the .eh_frame_hdr search table
 * (PT_GNU_EH_FRAME), takes the start of its code from the table's entry and only the
 * length from the FDE, and only ever looks up return addresses; gdb, and a program that
 * registers its frames with libgcc, read .eh_frame's own pc_begin. So a program whose
 * tables disagree with each other or with the code can run, and a rewrite must not pick
 * one view: such an FDE is never rewritten, the code the unwinder may take it for stays
 * in place (ed_unwind_fdes says why, ed_layout.c leaves the procedures), and its old
 * table entries are copied as they were.
 *
 * Formats: LSB "Exception Frames" (.eh_frame, pointer encodings), DWARF 4 section 6.4
 * (CFA instructions), and the Itanium C++ ABI LSDA as read by libgcc's
 * unwind-c.c/eh_personality.cc (landing pads relative to LPStart, call sites relative to
 * the function start, the type table indexed backwards from TTBase, exception
 * specification lists after TTBase).
 *
 * Files: this one (mapping code locations, CFA programs, new FDEs, the new
 * .eh_frame_hdr, the whole build and its entry points), ed_unwind_read.c (reading and
 * checking the old tables), ed_unwind_lsda.c (the LSDAs); ed_unwind_priv.h holds the
 * parsed .eh_frame and the state of one build they share.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "editor/ed_unwind_priv.h"

/*****************************************************************************
 * Byte buffers: a growable output with a sticky out-of-memory flag, and a bounded reader
 */

/* Zero bytes until the absolute address BASE + b->len is a multiple of ALIGN. */
void
ed_uw_wb_align(wb_t *b, uint64_t base, unsigned align)
{
    while ((base + b->len) % align != 0)
        wb_u8(b, 0);
}

/* Skip a block: a ULEB128 length and that many bytes. */
static void
rd_block(rd_t *c)
{
    rd_skip(c, rd_uleb(c));
}

/*****************************************************************************
 * Pointer encodings (DW_EH_PE_*)
 */

/* An encoding whose value we can compute and write: absolute or pc-relative. */
int
ed_uw_pe_addressable(uint8_t enc)
{
    return eh_pe_valid(enc)
           && ((enc & 0x70) == DW_EH_PE_absptr || (enc & 0x70) == DW_EH_PE_pcrel);
}

/* Write RAW in the format of ENC; QP_ERANGE when it does not fit. */
int
ed_uw_wr_fmt(wb_t *b, uint8_t enc, uint64_t raw)
{
    int64_t s = (int64_t)raw;
    switch (enc & 0x0f) {
    case DW_EH_PE_absptr:
    case DW_EH_PE_udata8:
    case DW_EH_PE_sdata8: wb_n(b, raw, 8); return 0;
    case DW_EH_PE_uleb128: wb_uleb(b, raw); return 0;
    case DW_EH_PE_sleb128: wb_sleb(b, s); return 0;
    case DW_EH_PE_udata2:
        if (raw > UINT16_MAX)
            return QP_ERANGE;
        wb_n(b, raw, 2);
        return 0;
    case DW_EH_PE_sdata2:
        if (s < INT16_MIN || s > INT16_MAX)
            return QP_ERANGE;
        wb_n(b, raw, 2);
        return 0;
    case DW_EH_PE_udata4:
        if (raw > UINT32_MAX)
            return QP_ERANGE;
        wb_n(b, raw, 4);
        return 0;
    case DW_EH_PE_sdata4:
        if (s < INT32_MIN || s > INT32_MAX)
            return QP_ERANGE;
        wb_n(b, raw, 4);
        return 0;
    default: return QP_EUNSUPP;
    }
}

/* Write the address VAL in encoding ENC for a field that will live at FIELD. */
int
ed_uw_wr_ptr(wb_t *b, uint8_t enc, uint64_t val, uint64_t field)
{
    uint64_t raw = val;
    if (val != 0 && (enc & 0x70) == DW_EH_PE_pcrel) {
        raw = val - field;
        if (raw == 0) /* would read back as null */
            return QP_ERANGE;
    } else if (val != 0 && (enc & 0x70) != DW_EH_PE_absptr) {
        return QP_EUNSUPP;
    }
    return ed_uw_wr_fmt(b, enc, raw);
}

/*****************************************************************************
 * The parsed .eh_frame (its types are in ed_unwind_priv.h)
 */

/*
 * Make room for element N of the array V of *CAP elements of SIZE bytes: V itself, a
 * larger copy (*CAP updated), or NULL when out of memory (V is then still valid).
 */
void *
ed_uw_grow(void *v, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return v;
    size_t c = *cap ? *cap * 2 : 64;
    if (c > SIZE_MAX / size)
        return NULL;
    void *p = realloc(v, c * size);
    if (p != NULL)
        *cap = c;
    return p;
}

/*****************************************************************************
 * Mapping code locations of one procedure
 */

/* Record the old code location X of KIND (ED_LOC_*) when ed_unwind_fdes asks for them. */
void
ed_uw_note_loc(ctx_t *cx, uint64_t x, uint32_t kind)
{
    if (!cx->collect)
        return;
    ed_code_loc_t *v = ed_uw_grow(cx->locs, &cx->caplocs, cx->nlocs, sizeof(*v));
    if (v == NULL) {
        cx->locs_oom = 1;
        return;
    }
    cx->locs = v;
    cx->locs[cx->nlocs++] = (ed_code_loc_t) { x, kind };
}


/* map() for scans across holes: 0 (and an error) once the FDE's budget is spent. */
static uint64_t
scan_map(fmap_t *fm, uint64_t x)
{
    if (fm->budget == 0) {
        fm->err = QP_ERANGE;
        return 0;
    }
    fm->budget--;
    return fm->cx->map(fm->cx->arg, x);
}

/*
 * Where the state that holds from old location X on begins in the new code. A location
 * map() does not know (code of the procedure that was not relocated) takes the mapping
 * of the next location inside the procedure that has one, or the new end: the rule then
 * takes effect where the relocated code resumes, and the relocated instructions before
 * the hole keep the rules they had. Locations outside the range clamp to its ends.
 */
uint64_t
ed_uw_loc_map(fmap_t *fm, uint64_t x)
{
    if (x <= fm->old_lo)
        return fm->new_lo;
    if (x >= fm->old_hi)
        return fm->new_hi;
    if (fm->identity)
        return x;
    if (x >= fm->hole_lo && x < fm->hole_hi)
        return fm->hole_to;
    uint64_t v = fm->cx->map(fm->cx->arg, x);
    if (v != 0)
        return v;
    uint64_t y = x + 1;
    for (; y < fm->old_hi && !fm->err; y++)
        if ((v = scan_map(fm, y)) != 0)
            break;
    if (v == 0)
        v = fm->new_hi;
    fm->hole_lo = x;
    fm->hole_hi = y;
    fm->hole_to = v;
    return v;
}

/* Where the code ending at old address X ends in the new code (call-site range ends). */
uint64_t
ed_uw_end_map(fmap_t *fm, uint64_t x)
{
    if (x >= fm->old_hi)
        return fm->new_hi;
    if (fm->cx->map_end != NULL && x > fm->old_lo && !fm->identity) {
        uint64_t v = fm->cx->map_end(fm->cx->arg, x);
        if (v != 0)
            return v;
    }
    return ed_uw_loc_map(fm, x);
}

/*
 * Set up FM for F, whose code starts at NEW_LO now and, when NEW_HI is not 0, ends at
 * NEW_HI (else the end is found through the map).
 */
static void
fmap_init(fmap_t *fm, ctx_t *cx, const fde_t *f, uint64_t new_lo, uint64_t new_hi)
{
    memset(fm, 0, sizeof(*fm));
    fm->cx = cx;
    fm->old_lo = f->pc_begin;
    fm->old_hi = f->pc_begin + f->pc_range;
    fm->new_lo = new_lo;
    fm->new_hi = new_lo;
    fm->budget = MAX_SCAN;
    if (f->pc_range == 0)
        return;
    if (new_hi > new_lo) {
        fm->new_hi = new_hi;
        return;
    }
    uint64_t v = 0;
    if (cx->map_end != NULL)
        v = cx->map_end(cx->arg, fm->old_hi);
    if (v == 0)
        v = cx->map(cx->arg, fm->old_hi);
    if (v > new_lo) {
        fm->new_hi = v; /* the editor maps the end of a procedure to its new end */
        return;
    }
    /*
     * No (usable) mapping of the end: end one byte after the largest mapped location,
     * which is the slot of the last relocated instruction. That covers the start of
     * that instruction only; the editor is meant to map every FDE end.
     */
    for (uint64_t y = fm->old_hi; y-- > fm->old_lo && !fm->err;) {
        uint64_t w = scan_map(fm, y);
        if (w != 0) {
            fm->new_hi = w >= new_lo ? w + 1 : new_lo + 1;
            return;
        }
    }
    fm->new_hi = new_lo + 1;
}

/*****************************************************************************
 * CFA programs
 */

/* Append the smallest advance of DELTA bytes (a multiple of CODE_ALIGN) to OUT. */
static int
emit_advance(wb_t *out, uint64_t delta, uint64_t code_align)
{
    if (delta % code_align != 0)
        return QP_ERANGE;
    uint64_t f = delta / code_align;
    if (f < 0x40) {
        wb_u8(out, (uint8_t)(DW_CFA_advance_loc | f));
    } else if (f <= UINT8_MAX) {
        wb_u8(out, DW_CFA_advance_loc1);
        wb_n(out, f, 1);
    } else if (f <= UINT16_MAX) {
        wb_u8(out, DW_CFA_advance_loc2);
        wb_n(out, f, 2);
    } else if (f <= UINT32_MAX) {
        wb_u8(out, DW_CFA_advance_loc4);
        wb_n(out, f, 4);
    } else {
        return QP_ERANGE;
    }
    return 0;
}

/*
 * Copy the CFA program [POS, END) of .eh_frame to OUT with every location mapped through
 * FM: each advance or set_loc becomes the smallest advance from the previous
 * new location, zero advances vanish, every other instruction is copied byte for byte.
 * *KEEP gets the length of OUT without trailing DW_CFA_nop instructions. With FM NULL
 * (a CIE's initial instructions) the program is only checked and may hold no location.
 * QP_EFORMAT for an unknown opcode or truncated operands, QP_ERANGE when the mapped
 * locations go backwards.
 */
int
ed_uw_cfa_copy(ctx_t *cx, const cie_t *ci, size_t pos, size_t end, fmap_t *fm,
               wb_t *out, size_t *keep)
{
    rd_t c = { cx->sec, end, pos, 0 };
    uint64_t old_loc = fm ? fm->old_lo : 0, new_loc = fm ? fm->new_lo : 0;
    size_t start_n = out ? out->len : 0;
    if (keep)
        *keep = start_n;
    while (c.pos < c.len) {
        size_t start = c.pos;
        uint8_t op = rd_u8(&c);
        uint64_t delta = 0, target = 0;
        int loc = 0; /* 1: advance by delta, 2: set to target */
        switch (op & 0xc0) {
        case DW_CFA_advance_loc:
            delta = op & 0x3f;
            loc = 1;
            break;
        case DW_CFA_offset: rd_uleb(&c); break;
        case DW_CFA_restore: break;
        default:
            switch (op) {
            case DW_CFA_nop:
            case DW_CFA_remember_state:
            case DW_CFA_restore_state:
            case DW_CFA_GNU_window_save: break;
            case DW_CFA_set_loc: {
                uint64_t field = cx->vma + c.pos;
                uint64_t raw = eh_rd_raw(&c, ci->fde_enc);
                if (!c.err && eh_pe_value(ci->fde_enc, raw, field, &target) < 0)
                    return QP_EUNSUPP;
                loc = 2;
                break;
            }
            case DW_CFA_advance_loc1: delta = rd_n(&c, 1); loc = 1; break;
            case DW_CFA_advance_loc2: delta = rd_n(&c, 2); loc = 1; break;
            case DW_CFA_advance_loc4: delta = rd_n(&c, 4); loc = 1; break;
            case DW_CFA_MIPS_advance_loc8: delta = rd_n(&c, 8); loc = 1; break;
            case DW_CFA_offset_extended:
            case DW_CFA_register:
            case DW_CFA_def_cfa:
            case DW_CFA_val_offset:
            case DW_CFA_GNU_negative_offset_extended:
                rd_uleb(&c);
                rd_uleb(&c);
                break;
            case DW_CFA_restore_extended:
            case DW_CFA_undefined:
            case DW_CFA_same_value:
            case DW_CFA_def_cfa_register:
            case DW_CFA_def_cfa_offset:
            case DW_CFA_GNU_args_size: rd_uleb(&c); break;
            case DW_CFA_def_cfa_expression: rd_block(&c); break;
            case DW_CFA_expression:
            case DW_CFA_val_expression:
                rd_uleb(&c);
                rd_block(&c);
                break;
            case DW_CFA_offset_extended_sf:
            case DW_CFA_def_cfa_sf:
            case DW_CFA_val_offset_sf:
                rd_uleb(&c);
                rd_sleb(&c);
                break;
            case DW_CFA_def_cfa_offset_sf: rd_sleb(&c); break;
            default: return QP_EFORMAT;
            }
        }
        if (c.err)
            return QP_EFORMAT;
        if (!loc) {
            if (out != NULL) {
                wb_put(out, cx->sec + start, c.pos - start);
                if (op != DW_CFA_nop && keep)
                    *keep = out->len;
            }
            continue;
        }
        if (fm == NULL)
            return QP_EUNSUPP; /* a location in a CIE */
        if (loc == 1) {
            uint64_t step;
            if (__builtin_mul_overflow(delta, ci->code_align, &step)
                || __builtin_add_overflow(old_loc, step, &target))
                return QP_EFORMAT;
        } else if (target < old_loc) {
            return QP_EFORMAT; /* DW_CFA_set_loc may not go backwards */
        }
        old_loc = target;
        ed_uw_note_loc(cx, target, ED_LOC_CFA);
        uint64_t nl = ed_uw_loc_map(fm, target);
        if (nl < new_loc)
            return QP_ERANGE; /* the map reorders code inside the procedure */
        if (nl > new_loc) {
            QP_CHECK(emit_advance(out, nl - new_loc, ci->code_align));
            new_loc = nl;
            if (keep)
                *keep = out->len;
        }
    }
    return 0;
}

/*****************************************************************************
 * New FDEs
 */

/* Copy CIE CI into the blob unless done, re-encoding a pc-relative personality. */
static int
cie_copy(ctx_t *cx, cie_t *ci)
{
    if (ci->new_off != SIZE_MAX)
        return 0;
    size_t off = cx->blob.len;
    wb_put(&cx->blob, cx->sec + ci->off, ci->size);
    if (cx->blob.err)
        return QP_ENOMEM;
    if (ci->pers_enc != DW_EH_PE_omit && (ci->pers_enc & 0x70) == DW_EH_PE_pcrel) {
        wb_t t = { 0 };
        int rc = ed_uw_wr_ptr(&t, ci->pers_enc, ci->pers, cx->at + off + ci->pers_off);
        if (rc == 0 && t.err)
            rc = QP_ENOMEM;
        if (rc == 0)
            memcpy(cx->blob.p + off + ci->pers_off, t.p, t.len); /* same fixed size */
        free(t.p);
        if (rc < 0) {
            cx->blob.len = off;
            return rc;
        }
    }
    ci->new_off = off;
    return 0;
}

static int
add_ent(ctx_t *cx, uint64_t loc, uint64_t fde)
{
    hdr_ent_t *ents = ed_uw_grow(cx->ents, &cx->capents, cx->nents, sizeof(*ents));
    if (ents == NULL)
        return QP_ENOMEM;
    cx->ents = ents;
    cx->ents[cx->nents++] = (hdr_ent_t) { loc, fde };
    return 0;
}

/*
 * Write the new FDE for F, whose code is [NEW_LO, NEW_HI) now (NEW_HI 0: found through
 * the map), with its CIE copy and its LSDA (rewritten now, placed later). With IDENTITY
 * the code did not move (NEW_LO is pc_begin): the copy keeps every location and points at
 * the old LSDA. On failure nothing is left behind.
 */
static int
fde_rewrite(ctx_t *cx, const fde_t *f, uint64_t new_lo, uint64_t new_hi, int identity)
{
    cie_t *ci = &cx->cies[f->cie];
    if (ci->err < 0)
        return ci->err;
    if (f->err < 0)
        return f->err;
    if (f->lsda_err < 0)
        return f->lsda_err;
    if (f->defect != DEF_NONE)
        return QP_EFORMAT; /* its code stays, described by the old FDE */
    /* Moved code changes every distance: only a code alignment of 1, or the ISA's
     * instruction alignment (AArch64: 4; every new distance is a multiple of it, which
     * emit_advance checks), expresses them. */
    if (!identity && ci->code_align != 1 && ci->code_align != cfg_image_isa(cx->img)->insn_align)
        return QP_EUNSUPP;
    /* The range must lie in the code section it starts in (when the image has it). */
    const cfg_section_t *s = cfg_image_section_at(cx->img, f->pc_begin);
    if (s != NULL && f->pc_range > s->vma + s->size - f->pc_begin)
        return QP_EFORMAT;
    fmap_t fm;
    if (identity) {
        memset(&fm, 0, sizeof(fm));
        fm.cx = cx;
        fm.identity = 1;
        fm.old_lo = fm.new_lo = f->pc_begin;
        fm.old_hi = fm.new_hi = f->pc_begin + f->pc_range;
    } else {
        fmap_init(&fm, cx, f, new_lo, new_hi);
    }

    /* The parts that do not depend on where the FDE goes: the program and the LSDA. */
    wb_t prog = { 0 };
    size_t keep = 0;
    int rc = ed_uw_cfa_copy(cx, ci, f->insn_pos, f->insn_end, &fm, &prog, &keep);
    if (rc == QP_EFORMAT)
        cx->why = "has a CFA program that is malformed (an unknown opcode, truncated, or "
                  "going backwards)";
    if (rc == 0 && prog.err)
        rc = QP_ENOMEM;
    prog.len = keep;
    size_t lsda_idx = SIZE_MAX, nlsdas = cx->nlsdas;
    if (rc == 0 && f->lsda != 0 && !identity)
        rc = ed_uw_lsda_for(cx, f, &fm, &lsda_idx);
    if (rc == 0 && fm.err < 0)
        rc = fm.err;

    /* The record: CIE copy (first use), then the FDE. */
    size_t save = cx->blob.len, npatches = cx->npatches;
    size_t cie_saved = ci->new_off;
    if (rc == 0)
        rc = cie_copy(cx, ci);
    wb_t *b = &cx->blob;
    size_t rec = b->len;
    if (rc == 0) {
        wb_n(b, 0, 4); /* length, patched below */
        wb_n(b, rec + 4 - ci->new_off, 4);
        rc = ed_uw_wr_ptr(b, ci->fde_enc, new_lo, cx->at + b->len);
    }
    if (rc == 0)
        rc = ed_uw_wr_fmt(b, ci->fde_enc & 0x0f, fm.new_hi - new_lo);
    if (rc == 0 && ci->has_z) {
        /* The LSDA pointer (if any) first, then the rest of the augmentation verbatim. */
        size_t alen = f->aug_end - f->aug_pos;
        wb_uleb(b, alen);
        if (ci->lsda_enc != DW_EH_PE_omit && identity) {
            size_t at = b->len;
            rc = ed_uw_wr_ptr(b, ci->lsda_enc, f->lsda, cx->at + at); /* the old LSDA */
            if (rc == 0 && b->len - at != f->lsda_size)
                rc = QP_ERANGE;
        } else if (ci->lsda_enc != DW_EH_PE_omit) {
            if (lsda_idx != SIZE_MAX) {
                patch_t *pt = ed_uw_grow(cx->patches, &cx->cappatches, cx->npatches,
                                         sizeof(*pt));
                if (pt == NULL) {
                    rc = QP_ENOMEM;
                } else {
                    cx->patches = pt;
                    pt[cx->npatches++] = (patch_t) { b->len, ci->lsda_enc, lsda_idx };
                }
            }
            wb_put(b, NULL, f->lsda_size); /* a null pointer, or the placeholder */
        }
        wb_put(b, cx->sec + f->aug_pos + f->lsda_size, alen - f->lsda_size);
    }
    if (rc == 0) {
        wb_put(b, prog.p, prog.len);
        while ((b->len - rec) % cx->rec_align != 0)
            wb_u8(b, DW_CFA_nop);
        if (b->len - rec - 4 > UINT32_MAX)
            rc = QP_ERANGE;
        else if (!b->err)
            for (int i = 0; i < 4; i++)
                b->p[rec + i] = (uint8_t)((b->len - rec - 4) >> (8 * i));
    }
    if (rc == 0 && b->err)
        rc = QP_ENOMEM;
    if (rc == 0)
        rc = add_ent(cx, new_lo, cx->at + rec);
    free(prog.p);
    if (rc < 0) {
        cx->blob.len = save;
        ci->new_off = cie_saved;
        cx->npatches = npatches;
        if (cx->nlsdas > nlsdas) {
            lsda_t *l = &cx->lsdas[--cx->nlsdas];
            ed_uw_lsda_hash_del(cx, l->old_addr, l->old_fs);
            free(l->cs.p);
        }
    }
    return rc;
}

/*****************************************************************************
 * .eh_frame_hdr
 */

static int
cmp_ent(const void *a, const void *b)
{
    const hdr_ent_t *x = a, *y = b;
    if (x->loc != y->loc)
        return x->loc < y->loc ? -1 : 1;
    return x->fde < y->fde ? -1 : x->fde > y->fde;
}

/* Append the new .eh_frame_hdr to the blob; *HDR_OFF gets its offset. */
static int
hdr_write(ctx_t *cx, size_t *hdr_off)
{
    if (cx->nents > 1)
        qsort(cx->ents, cx->nents, sizeof(*cx->ents), cmp_ent);
    size_t n = 0;
    for (size_t i = 0; i < cx->nents; i++) /* one FDE per initial location */
        if (n == 0 || cx->ents[i].loc != cx->ents[n - 1].loc)
            cx->ents[n++] = cx->ents[i];
    if (n > UINT32_MAX)
        return QP_ERANGE;
    wb_t *b = &cx->blob;
    ed_uw_wb_align(b, cx->at, 4);
    *hdr_off = b->len;
    uint64_t hdr = cx->hdr_at != 0 ? cx->hdr_at : cx->at + b->len;
    wb_u8(b, 1);
    wb_u8(b, HDR_PTR_ENC);
    wb_u8(b, HDR_COUNT_ENC);
    wb_u8(b, HDR_TABLE_ENC);
    QP_CHECK(ed_uw_wr_ptr(b, HDR_PTR_ENC, cx->at, hdr + (b->len - *hdr_off)));
    wb_n(b, n, 4);
    for (size_t i = 0; i < n; i++) {
        QP_CHECK(ed_uw_wr_fmt(b, HDR_TABLE_ENC, cx->ents[i].loc - hdr));
        QP_CHECK(ed_uw_wr_fmt(b, HDR_TABLE_ENC, cx->ents[i].fde - hdr));
    }
    return b->err ? QP_ENOMEM : 0;
}

/*****************************************************************************
 * The whole build
 */

/* Accumulates the moved runs of an old range (an ed_piece_fn). */
typedef struct span_acc {
    uint64_t lo, hi; /* the new code so far */
    int n;           /* moved runs seen */
    int split;       /* a run did not continue the previous one */
} span_acc_t;

static int
span_piece(void *arg, uint64_t old, uint64_t olen, uint64_t new_, uint64_t nlen)
{
    span_acc_t *a = arg;
    (void)old;
    (void)olen;
    if (new_ == 0)
        return 0; /* bytes that stay (padding, with the plan's rules) */
    if (a->n > 0 && new_ != a->hi)
        a->split = 1;
    if (a->n == 0)
        a->lo = new_;
    a->hi = new_ + nlen;
    a->n++;
    return 0;
}

/*
 * Where the code of F went: 1 when none of it moved, 0 with [*LO, *HI) its new code (*HI
 * 0: unknown, found through the map), QP_ERANGE when its moved instructions are not one
 * contiguous run of new code (one FDE could not describe them without other code).
 * With pieces the new range is exactly that of the moved instructions, whatever bytes
 * that stay (padding, a nop before a landing pad) begin or end the old range.
 */
static int
moved_span(ctx_t *cx, uint64_t old_lo, uint64_t old_hi, uint64_t *lo, uint64_t *hi)
{
    *lo = *hi = 0;
    if (cx->pieces == NULL) {
        *lo = cx->map(cx->arg, old_lo);
        return *lo ? 0 : 1;
    }
    span_acc_t a = { 0, 0, 0, 0 };
    QP_CHECK(cx->pieces(cx->arg, old_lo, old_hi, span_piece, &a));
    if (a.n == 0)
        return 1;
    if (a.split)
        return QP_ERANGE;
    *lo = a.lo;
    *hi = a.hi;
    return 0;
}

/* Remember the new range of a moved FDE F (for the overlap check). */
static int
add_span(ctx_t *cx, uint64_t lo, uint64_t hi, const fde_t *f)
{
    span_t *v = ed_uw_grow(cx->spans, &cx->capspans, cx->nspans, sizeof(*v));
    if (v == NULL)
        return QP_ENOMEM;
    cx->spans = v;
    cx->spans[cx->nspans++] = (span_t) { lo, hi, f->pc_begin, f->pc_begin + f->pc_range };
    return 0;
}

static int
cmp_span(const void *a, const void *b)
{
    const span_t *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/*
 * New FDEs must not overlap: the search table finds the last FDE that starts at or below
 * a pc, so code inside two FDEs would be described by whichever starts later.
 */
static int
check_spans(ctx_t *cx, ed_unwind_out_t *out)
{
    if (cx->nspans > 1)
        qsort(cx->spans, cx->nspans, sizeof(*cx->spans), cmp_span);
    for (size_t i = 1; i < cx->nspans; i++)
        if (cx->spans[i].lo < cx->spans[i - 1].hi) {
            out->fail_lo = cx->spans[i].old_lo;
            out->fail_hi = cx->spans[i].old_hi;
            return QP_ERANGE;
        }
    return 0;
}

static int
build(ctx_t *cx, ed_unwind_out_t *out)
{
    cx->hash_cap = 64;
    while (cx->hash_cap < 2 * cx->nfdes + 2)
        cx->hash_cap *= 2;
    cx->lsda_hash = calloc(cx->hash_cap, sizeof(*cx->lsda_hash));
    if (cx->lsda_hash == NULL)
        return QP_ENOMEM;

    /*
     * New FDEs in the order of the old ones. The others stay in the search table where
     * they are, or with ED_UNWIND_ALL are copied too (the old code is still there).
     */
    for (size_t i = 0; i < cx->nfdes; i++) {
        fde_t *f = &cx->fdes[i];
        if (f->err < 0) {
            cx->nfde_failed++; /* where it is: where the table has it, if anywhere */
            cx->nfde_old++;
            f->kept = 1;
            continue;
        }
        if (f->pc_begin == 0 && f->hdr_loc == 0)
            continue; /* discarded by the linker */
        uint64_t new_lo = 0, new_hi = 0, old_lo = f->pc_begin;
        uint64_t old_hi = f->pc_begin + f->pc_range;
        if (f->defect != DEF_NONE) {
            /* The code the unwinder may take it for must not have moved. */
            char why[160];
            ed_uw_defect_str(cx, f, why, sizeof(why), &old_lo, &old_hi);
        }
        int rc = moved_span(cx, old_lo, old_hi, &new_lo, &new_hi);
        if (rc == 0)
            rc = fde_rewrite(cx, f, new_lo, new_hi, 0);
        if (rc == QP_ENOMEM)
            return rc;
        if (rc == 0) {
            cx->nfde_moved++;
            QP_CHECK(add_span(cx, new_lo, new_hi, f));
            continue;
        }
        if (rc < 0 && (cx->flags & ED_UNWIND_STRICT)) {
            /* Its code moved and the new code would have no unwind entry. */
            out->fail_lo = old_lo;
            out->fail_hi = old_hi;
            return rc;
        }
        if (rc < 0)
            cx->nfde_failed++;
        /* The old FDE still describes the old copy of the code. */
        rc = (cx->flags & ED_UNWIND_ALL) ? fde_rewrite(cx, f, f->pc_begin, 0, 1) : 1;
        if (rc == QP_ENOMEM)
            return rc;
        if (rc != 0) {
            if (!cx->have_hdr) {
                QP_CHECK(add_ent(cx, f->pc_begin, cx->vma + f->off));
                cx->nold_refs++;
            }
            f->kept = 1;
            cx->nfde_old++;
        }
    }
    /*
     * The old table's entries of the FDEs kept, and those that name no FDE, as they were:
     * the unwinder finds the old code as before, whatever .eh_frame says.
     */
    for (size_t i = 0; i < cx->nold_ents; i++) {
        const hdr_ent_t *e = &cx->old_ents[i];
        const rec_t *r = e->fde >= cx->vma && e->fde - cx->vma < cx->secsize
                             ? ed_uw_rec_at(cx, (size_t)(e->fde - cx->vma)) : NULL;
        if (cx->old_keep[i] && (r == NULL || r->is_cie || cx->fdes[r->idx].kept)) {
            QP_CHECK(add_ent(cx, e->loc, e->fde));
            cx->nold_refs++;
        }
    }
    if (cx->flags & ED_UNWIND_STRICT)
        QP_CHECK(check_spans(cx, out));
    wb_n(&cx->blob, 0, 4); /* the terminator */
    size_t eh_size = cx->blob.len;

    /* LSDAs, then the pointers to them. */
    for (size_t i = 0; i < cx->nlsdas; i++)
        QP_CHECK(ed_uw_lsda_write(&cx->blob, cx->at, &cx->lsdas[i]));
    for (size_t i = 0; i < cx->npatches; i++) {
        const patch_t *pt = &cx->patches[i];
        wb_t t = { 0 };
        int rc = ed_uw_wr_ptr(&t, pt->enc, cx->lsdas[pt->lsda].new_addr, cx->at + pt->at);
        if (rc == 0 && t.err)
            rc = QP_ENOMEM;
        if (rc == 0)
            memcpy(cx->blob.p + pt->at, t.p, t.len); /* fixed size, checked at parse */
        free(t.p);
        QP_CHECK(rc);
    }

    size_t hdr_off = 0;
    QP_CHECK(hdr_write(cx, &hdr_off));
    if (cx->blob.err)
        return QP_ENOMEM;
    out->data = cx->blob.p;
    out->size = cx->blob.len;
    out->eh_frame = cx->at;
    out->eh_frame_size = eh_size;
    out->hdr = cx->hdr_at != 0 ? cx->hdr_at : cx->at + hdr_off;
    out->hdr_off = hdr_off;
    out->hdr_size = cx->blob.len - hdr_off;
    out->nfde_moved = cx->nfde_moved;
    out->nlsda_moved = (uint32_t)cx->nlsdas;
    out->nfde_failed = cx->nfde_failed;
    out->nfde_old = cx->nfde_old;
    out->nold_refs = cx->nold_refs;
    cx->blob.p = NULL;
    return 0;
}

/* Find IMG's .eh_frame and parse it into CX. 1 when there is none. */
static int
ctx_open(ctx_t *cx, const cfg_image_t *img)
{
    memset(cx, 0, sizeof(*cx));
    cx->img = img;
    const cfg_section_t *eh = NULL;
    for (size_t i = 0; i < img->nsections; i++)
        if (img->sections[i].name != NULL && img->sections[i].bytes != NULL
            && strcmp(img->sections[i].name, ".eh_frame") == 0) {
            eh = &img->sections[i];
            break;
        }
    if (eh == NULL || eh->size == 0)
        return 1;
    if (eh->size > SIZE_MAX / 2)
        return QP_EFORMAT;
    cx->sec = eh->bytes;
    cx->secsize = (size_t)eh->size;
    cx->vma = eh->vma;
    for (size_t i = 0; i < img->nsections; i++)
        cx->has_code |= (img->sections[i].flags & CFG_SEC_CODE) != 0;
    QP_CHECK(ed_uw_split_records(cx));
    QP_CHECK(ed_uw_parse_all(cx));
    QP_CHECK(ed_uw_hdr_read(cx));
    return ed_uw_check_fdes(cx);
}

static void ctx_clear_build(ctx_t *cx);

/* Everything of CX freed: what its build made (ctx_clear_build), then what was read. */
static void
ctx_close(ctx_t *cx)
{
    ctx_clear_build(cx);
    free(cx->old_ents);
    free(cx->old_keep);
    free(cx->recs);
    free(cx->cies);
    free(cx->fdes);
}

int
ed_unwind_build_ex(const cfg_image_t *img, const ed_unwind_map_t *m, uint64_t at,
    uint32_t flags, ed_unwind_out_t *out)
{
    return ed_unwind_build_at(img, m, at, 0, flags, out);
}

/* The old tables read and checked (ctx_open's CX, or RC: 1 without .eh_frame, else why
 * they could not be), for builds one after another. */
struct ed_unwind_old {
    ctx_t cx;
    int rc;
};

int
ed_unwind_old_read(const cfg_image_t *img, ed_unwind_old_t **out)
{
    if (img == NULL || out == NULL)
        return QP_EINVAL;
    ed_unwind_old_t *o = malloc(sizeof(*o));
    if (o == NULL)
        return QP_ENOMEM;
    o->rc = ctx_open(&o->cx, img);
    *out = o;
    return 0;
}

void
ed_unwind_old_free(ed_unwind_old_t *o)
{
    if (o == NULL)
        return;
    ctx_close(&o->cx);
    free(o);
}

/* What a build of CX made cleared, what was read kept: the next build starts as the
 * first did (build() marks the FDEs it keeps and places the CIEs). */
static void
ctx_clear_build(ctx_t *cx)
{
    for (size_t i = 0; i < cx->nlsdas; i++)
        free(cx->lsdas[i].cs.p);
    free(cx->lsdas);
    free(cx->lsda_hash);
    free(cx->patches);
    free(cx->ents);
    free(cx->locs);
    free(cx->spans);
    free(cx->blob.p);
    cx->lsdas = NULL;
    cx->nlsdas = cx->caplsdas = 0;
    cx->lsda_hash = NULL;
    cx->hash_cap = 0;
    cx->patches = NULL;
    cx->npatches = cx->cappatches = 0;
    cx->ents = NULL;
    cx->nents = cx->capents = 0;
    cx->locs = NULL;
    cx->nlocs = cx->caplocs = 0;
    cx->spans = NULL;
    cx->nspans = cx->capspans = 0;
    memset(&cx->blob, 0, sizeof(cx->blob));
    cx->nfde_moved = cx->nfde_failed = cx->nfde_old = cx->nold_refs = 0;
    cx->collect = cx->locs_oom = 0;
    cx->why = NULL;
    for (size_t i = 0; i < cx->nfdes; i++)
        cx->fdes[i].kept = 0;
    for (size_t i = 0; i < cx->ncies; i++)
        cx->cies[i].new_off = SIZE_MAX;
}

int
ed_unwind_build_old(ed_unwind_old_t *o, const ed_unwind_map_t *m, uint64_t at,
    uint64_t hdr_at, uint32_t flags, ed_unwind_out_t *out)
{
    if (o == NULL || m == NULL || m->map == NULL || out == NULL
        || (flags & ~(uint32_t)(ED_UNWIND_ALL | ED_UNWIND_STRICT)) || hdr_at % 4 != 0)
        return QP_EINVAL;
    memset(out, 0, sizeof(*out));
    if (o->rc != 0)
        return o->rc < 0 ? o->rc : 0;
    ctx_t *cx = &o->cx;
    ctx_clear_build(cx);
    cx->map = m->map;
    cx->map_end = m->map_end;
    cx->map_insn = m->map_insn;
    cx->pieces = m->pieces;
    cx->arg = m->arg;
    cx->at = at;
    cx->hdr_at = hdr_at;
    cx->flags = flags;
    int rc = build(cx, out);
    if (rc < 0) {
        uint64_t lo = out->fail_lo, hi = out->fail_hi;
        memset(out, 0, sizeof(*out));
        out->fail_lo = lo; /* which FDE, for the caller's message */
        out->fail_hi = hi;
    }
    return rc < 0 ? rc : 0;
}

int
ed_unwind_build_at(const cfg_image_t *img, const ed_unwind_map_t *m, uint64_t at,
    uint64_t hdr_at, uint32_t flags, ed_unwind_out_t *out)
{
    if (img == NULL || m == NULL || m->map == NULL || out == NULL
        || (flags & ~(uint32_t)(ED_UNWIND_ALL | ED_UNWIND_STRICT)) || hdr_at % 4 != 0)
        return QP_EINVAL;
    ed_unwind_old_t *o = NULL;
    int rc = ed_unwind_old_read(img, &o);
    if (rc == 0)
        rc = ed_unwind_build_old(o, m, at, hdr_at, flags, out);
    ed_unwind_old_free(o);
    return rc;
}

int
ed_unwind_build(const cfg_image_t *img, ed_map_fn map, void *arg, uint64_t at,
                ed_unwind_out_t *out)
{
    ed_unwind_map_t m = { map, NULL, NULL, NULL, arg };
    return ed_unwind_build_ex(img, &m, at, 0, out);
}

/* ed_unwind_landing_pads' calls of FN over CX's FDEs, read (ctx_open); its answer but
 * QP_EINVAL. */
static int
ctx_landing_pads(const ctx_t *cx, int (*fn)(void *arg, uint64_t func, uint64_t pad),
                 void *arg)
{
    int rc = 0, bad = 0;
    for (size_t i = 0; rc == 0 && i < cx->nfdes; i++) {
        const fde_t *f = &cx->fdes[i];
        if (f->err < 0 || f->lsda_err < 0) {
            bad = 1;
            continue;
        }
        if (f->pc_begin == 0 || f->lsda == 0)
            continue;
        lsda_hdr_t h;
        if (ed_uw_lsda_read_header(cx->img, f->lsda, f->pc_begin, &h) < 0) {
            bad = 1;
            continue;
        }
        rd_t cs = { h.p, h.cs_end, h.cs_pos, 0 };
        while (rc == 0 && cs.pos < cs.len) {
            cs_rec_t r;
            if (ed_uw_lsda_read_cs(&h, &cs, f->pc_range, &r) < 0) {
                bad = 1;
                break;
            }
            if (r.lp != 0)
                rc = fn(arg, f->pc_begin, h.lpstart + r.lp);
        }
    }
    if (rc < 0)
        return rc;
    return bad ? QP_EFORMAT : 0;
}

int
ed_unwind_landing_pads(const cfg_image_t *img,
                       int (*fn)(void *arg, uint64_t func, uint64_t pad), void *arg)
{
    if (img == NULL || fn == NULL)
        return QP_EINVAL;
    ctx_t cx;
    int rc = ctx_open(&cx, img);
    if (rc == 0)
        rc = ctx_landing_pads(&cx, fn, arg);
    ctx_close(&cx);
    return rc < 0 ? rc : 0;
}

static uint64_t
ident_map(void *arg, uint64_t old)
{
    (void)arg;
    return old;
}

/* The landing pads of F's LSDA into *PADS (*CAP allocated); *N gets their number. */
static int
fde_pads(const ctx_t *cx, const fde_t *f, uint64_t **pads, size_t *n, size_t *cap)
{
    *n = 0;
    if (f->lsda == 0 || f->lsda_err < 0)
        return 0;
    lsda_hdr_t h;
    if (ed_uw_lsda_read_header(cx->img, f->lsda, f->pc_begin, &h) < 0)
        return 0; /* reported through the rewrite's error */
    rd_t cs = { h.p, h.cs_end, h.cs_pos, 0 };
    while (cs.pos < cs.len) {
        cs_rec_t r;
        if (ed_uw_lsda_read_cs(&h, &cs, f->pc_range, &r) < 0)
            break;
        if (r.lp == 0)
            continue;
        uint64_t *v = ed_uw_grow(*pads, cap, *n, sizeof(**pads));
        if (v == NULL)
            return QP_ENOMEM;
        *pads = v;
        (*pads)[(*n)++] = h.lpstart + r.lp;
    }
    return 0;
}

int
ed_unwind_fdes(
    const cfg_image_t *img, int (*fn)(void *arg, const ed_fde_info_t *info), void *arg)
{
    int pads_rc;
    return ed_unwind_fdes_pads(img, fn, arg, NULL, NULL, &pads_rc);
}

int
ed_unwind_fdes_pads(const cfg_image_t *img,
    int (*fn)(void *arg, const ed_fde_info_t *info), void *arg,
    int (*pad)(void *arg, uint64_t func, uint64_t pad), void *pad_arg, int *pads_rc)
{
    if (pads_rc != NULL)
        *pads_rc = 1;
    if (img == NULL || fn == NULL || pads_rc == NULL)
        return QP_EINVAL;
    ctx_t cx;
    int rc = ctx_open(&cx, img);
    if (rc != 0 && pad != NULL)
        *pads_rc = rc < 0 ? rc : 0; /* ed_unwind_landing_pads' answer: none read */
    if (rc == 1) {
        ctx_close(&cx);
        return 0; /* no .eh_frame */
    }
    /* Every FDE rewritten for its own code, as if it had moved as a whole (the blob at
     * the old section's address, so that pc-relative fields reach as they did). */
    cx.map = ident_map;
    cx.map_end = ident_map;
    cx.map_insn = ident_map;
    cx.at = cx.vma;
    cx.hash_cap = 64;
    while (rc == 0 && cx.hash_cap < 2 * cx.nfdes + 2)
        cx.hash_cap *= 2;
    if (rc == 0 && (cx.lsda_hash = calloc(cx.hash_cap, sizeof(*cx.lsda_hash))) == NULL)
        rc = QP_ENOMEM;
    uint64_t *pads = NULL;
    size_t npads = 0, cap = 0;
    for (size_t i = 0; rc == 0 && i < cx.nfdes; i++) {
        const fde_t *f = &cx.fdes[i];
        if (f->code_lo == 0)
            continue; /* no range to speak of */
        cx.nlocs = 0;
        cx.collect = 1;
        cx.why = NULL;
        int err = fde_rewrite(&cx, f, f->pc_begin, 0, 0);
        cx.collect = 0;
        npads = 0;
        if (err == QP_ENOMEM || cx.locs_oom
            || (f->err == 0 && (rc = fde_pads(&cx, f, &pads, &npads, &cap)) < 0)) {
            rc = QP_ENOMEM;
            break;
        }
        ed_fde_info_t info = { f->pc_begin, f->pc_begin + f->pc_range, err < 0 ? err : 0,
            pads, npads, NULL, cx.locs, cx.nlocs };
        char why[160];
        if (f->defect != DEF_NONE) {
            ed_uw_defect_str(&cx, f, why, sizeof(why), &info.lo, &info.hi);
            info.defect = why;
            info.err = QP_EFORMAT;
        } else if (err < 0 && err != QP_EUNSUPP) {
            info.defect = cx.why; /* or NULL: the error alone says it */
        }
        rc = fn(arg, &info);
    }
    /* Table entries that name no FDE: the code there must keep the table's view. */
    for (size_t i = 0; rc == 0 && i < cx.nold_ents; i++) {
        const hdr_ent_t *e = &cx.old_ents[i];
        const rec_t *r = e->fde >= cx.vma && e->fde - cx.vma < cx.secsize
                             ? ed_uw_rec_at(&cx, (size_t)(e->fde - cx.vma)) : NULL;
        if ((r != NULL && !r->is_cie) || !cx.old_keep[i])
            continue; /* an FDE's, or one that describes no code (not copied) */
        uint64_t next = i + 1 < cx.nold_ents && cx.old_ents[i + 1].loc > e->loc
                            ? cx.old_ents[i + 1].loc : e->loc + 1;
        char why[96];
        snprintf(why, sizeof(why), "has an .eh_frame_hdr entry naming no FDE (0x%llx)",
            (unsigned long long)e->fde);
        ed_fde_info_t info = { e->loc, next, QP_EFORMAT, NULL, 0, why, NULL, 0 };
        rc = fn(arg, &info);
    }
    free(pads);
    if (rc == 0 && pad != NULL)
        *pads_rc = ctx_landing_pads(&cx, pad, pad_arg);
    ctx_close(&cx);
    return rc < 0 ? rc : 0;
}
