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
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dwarf.h> /* elfutils: the DWARF constants */

#include "arch/qp_err.h"
#include "base/qp_bytes.h"
#include "base/qp_eh.h"
#include "base/qp_ehframe.h"
#include "editor/ed.h"

/* The .eh_frame_hdr encodings we write (the ones libgcc's binary search requires). */
#define HDR_PTR_ENC (DW_EH_PE_pcrel | DW_EH_PE_sdata4)
#define HDR_COUNT_ENC DW_EH_PE_udata4
#define HDR_TABLE_ENC (DW_EH_PE_datarel | DW_EH_PE_sdata4)

/* Bounds on loops over input that could be cyclic or absurdly long. */
#define MAX_ACTION_STEPS 4096
#define MAX_SCAN (1u << 20) /* map() calls per FDE spent looking across holes */

/*****************************************************************************
 * Byte buffers: a growable output with a sticky out-of-memory flag, and a bounded reader
 */

/* Zero bytes until the absolute address BASE + b->len is a multiple of ALIGN. */
static void
wb_align(wb_t *b, uint64_t base, unsigned align)
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
static int
pe_addressable(uint8_t enc)
{
    return eh_pe_valid(enc)
           && ((enc & 0x70) == DW_EH_PE_absptr || (enc & 0x70) == DW_EH_PE_pcrel);
}

/* Write RAW in the format of ENC; QP_ERANGE when it does not fit. */
static int
wr_fmt(wb_t *b, uint8_t enc, uint64_t raw)
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
static int
wr_ptr(wb_t *b, uint8_t enc, uint64_t val, uint64_t field)
{
    uint64_t raw = val;
    if (val != 0 && (enc & 0x70) == DW_EH_PE_pcrel) {
        raw = val - field;
        if (raw == 0) /* would read back as null */
            return QP_ERANGE;
    } else if (val != 0 && (enc & 0x70) != DW_EH_PE_absptr) {
        return QP_EUNSUPP;
    }
    return wr_fmt(b, enc, raw);
}

/*****************************************************************************
 * The parsed .eh_frame
 */

typedef struct rec {
    size_t off;   /* offset of the record (its length field) in .eh_frame */
    size_t body;  /* offset of the CIE id / CIE pointer field */
    size_t end;   /* offset after the record */
    int is_cie;   /* CIE id 0 */
    uint32_t cie_ptr; /* an FDE's: the distance back from BODY to its CIE */
    uint32_t idx; /* index into cies[] or fdes[] */
} rec_t;

typedef struct cie {
    size_t off;          /* record offset in .eh_frame */
    size_t size;         /* bytes of the record, length field included */
    uint64_t code_align; /* code alignment factor */
    uint8_t fde_enc;     /* encoding of FDE pc_begin (R), pc_range uses its format */
    uint8_t lsda_enc;    /* encoding of the FDE's LSDA pointer (L), or omit */
    uint8_t pers_enc;    /* encoding of the personality pointer (P), or omit */
    uint8_t has_z;       /* 'z': FDEs carry augmentation data */
    size_t pers_off;     /* offset of the personality field inside the record */
    uint64_t pers;       /* its absolute value, when it is absolute or pc-relative */
    int fde_ok;          /* FDE locations can be decoded (enough for the hdr) */
    int err;             /* 0, or why FDEs of this CIE cannot be rewritten */
    size_t new_off;      /* offset of the copy in the blob, SIZE_MAX before one is made */
} cie_t;

typedef struct fde {
    size_t off;          /* record offset in .eh_frame */
    uint32_t cie;        /* index into cies[] */
    uint64_t pc_begin;   /* first code address covered */
    uint64_t pc_range;   /* bytes covered */
    size_t aug_pos;      /* augmentation data [aug_pos, aug_end), empty without 'z' */
    size_t aug_end;
    size_t insn_pos;     /* the CFA program [insn_pos, insn_end) */
    size_t insn_end;
    uint64_t lsda;       /* old LSDA address, 0 for none */
    size_t lsda_size;    /* bytes of the LSDA pointer field (first in the augmentation) */
    int err;             /* 0, or why the record cannot be decoded at all */
    int lsda_err;        /* 0, or why its LSDA pointer cannot be read (it cannot move) */
    uint64_t hdr_loc;    /* its start by the .eh_frame_hdr table, 0 when not there */
    uint64_t code_lo;    /* where its code starts for the unwinder: hdr_loc, else
                          * pc_begin; 0 when neither is known */
    uint64_t next;       /* the start of the next FDE in address order (or its section's
                          * end): where its code ends for the unwinder when its own range
                          * cannot be trusted */
    uint8_t defect;      /* DEF_*: an inconsistency; never rewritten, its code stays */
    uint8_t kept;        /* build(): the old FDE stays in the search table */
    uint64_t def_at;     /* the address the defect is about */
} fde_t;

/*
 * Inconsistencies between .eh_frame_hdr, .eh_frame and the code that a program can carry
 * and still run (libgcc searches the table, takes the start of the code from there, and
 * only ever asks about return addresses). The code of such an FDE stays in place and its
 * old FDE stays in the search table under the table's start (ed_unwind_fdes says why).
 */
enum {
    DEF_NONE,
    DEF_UNREAD,     /* named by the table, but the record cannot be decoded */
    DEF_HDR_NONE,   /* the table does not name it */
    DEF_HDR_START,  /* the table gives another start (def_at) */
    DEF_HDR_TWICE,  /* the table names it twice */
    DEF_HDR_DROP,   /* a table entry for it is out of order or in no code (def_at) */
    DEF_SECTION,    /* its range is not inside one executable section */
    DEF_OVERLAP,    /* its range overlaps the next FDE's code (at def_at) */
};

/* One call-site record of an LSDA, as read. */
typedef struct cs_rec {
    uint64_t start;  /* relative to the function start */
    uint64_t len;    /* bytes */
    uint64_t lp;     /* landing pad relative to LPStart, 0 for none */
    uint64_t action; /* 1 + offset into the action table, 0 for none */
} cs_rec_t;

/* A rewritten LSDA before it is placed: everything except what depends on its address. */
typedef struct lsda {
    uint64_t old_addr;      /* the old LSDA (cache key with old_fs) */
    uint64_t old_fs;        /* pc_begin of the FDE it was rewritten for */
    uint8_t lpstart_enc;    /* LPStart encoding, omit when landing pads are fs-relative */
    uint8_t ttype_enc;      /* type table encoding, omit without a type table */
    uint8_t cs_enc;         /* call-site encoding */
    uint64_t new_lpstart;   /* the new LPStart when lpstart_enc is not omit */
    wb_t cs;              /* the new call-site table, encoded */
    const uint8_t *actions; /* the action table, verbatim (points into the image) */
    size_t actions_len;
    const uint8_t *types;   /* the old type table (entry 1 is the last one) */
    uint64_t types_addr;    /* its old address */
    size_t ntypes;          /* entries */
    int esize;              /* bytes per entry */
    const uint8_t *spec;    /* exception specification lists following TTBase, verbatim */
    size_t spec_len;
    unsigned tt_align;      /* alignment of the type table, as in the original */
    uint64_t new_addr;      /* address of the copy, once placed */
} lsda_t;

/* An LSDA pointer in a new FDE, written once the LSDAs are placed. */
typedef struct patch {
    size_t at;     /* offset of the field in the blob */
    uint8_t enc;   /* its encoding (fixed size) */
    size_t lsda;   /* index into lsdas */
} patch_t;

/* An entry of the new .eh_frame_hdr search table. */
typedef struct hdr_ent {
    uint64_t loc;  /* initial location */
    uint64_t fde;  /* address of the FDE */
} hdr_ent_t;

/* The new code range of a moved FDE. */
typedef struct span {
    uint64_t lo, hi;         /* new range */
    uint64_t old_lo, old_hi; /* the old FDE's */
} span_t;

typedef struct ctx {
    const cfg_image_t *img;
    ed_map_fn map;          /* old to new address */
    ed_map_fn map_end;      /* optional: new end of the instruction ending at an addr */
    ed_map_fn map_insn;  /* optional: new address of the instruction at an addr, or 0 */
    ed_pieces_fn pieces; /* optional: the moved runs of an old range */
    void *arg;
    uint64_t at;            /* address of the blob */
    uint64_t hdr_at;        /* address of the .eh_frame_hdr, or 0: right after the rest */
    const uint8_t *sec;     /* .eh_frame contents */
    size_t secsize;
    uint64_t vma;           /* .eh_frame address */
    unsigned rec_align;     /* every record of the old .eh_frame is a multiple of this */
    rec_t *recs;
    size_t nrecs;
    cie_t *cies;
    size_t ncies;
    fde_t *fdes;
    size_t nfdes;
    wb_t blob;            /* the output */
    lsda_t *lsdas;          /* rewritten LSDAs in creation order */
    size_t nlsdas, caplsdas;
    size_t *lsda_hash;      /* open addressing: 1 + index into lsdas, 0 empty */
    size_t hash_cap;        /* a power of two */
    patch_t *patches;
    size_t npatches, cappatches;
    hdr_ent_t *ents;
    size_t nents, capents;
    span_t *spans; /* new ranges of the moved FDEs */
    size_t nspans, capspans;
    uint32_t flags;         /* ED_UNWIND_* */
    uint32_t nfde_moved;
    uint32_t nfde_failed;
    uint32_t nfde_old;      /* FDEs only the old .eh_frame has */
    uint32_t nold_refs;     /* search table entries into the old .eh_frame */
    int have_hdr;           /* the old .eh_frame_hdr has a table libgcc searches */
    int has_code;           /* the image has code sections (else bare tables: tests) */
    hdr_ent_t *old_ents;    /* its entries, as read */
    uint8_t *old_keep;      /* ... 1 for those copied into the new table (in order and
                             * in code) */
    size_t nold_ents;
    ed_code_loc_t *locs;    /* ed_unwind_fdes: code locations of the FDE being tried */
    size_t nlocs, caplocs;
    int collect;            /* record locations into locs */
    int locs_oom;           /* ... and one could not be recorded */
    const char *why;        /* NULL, or what is wrong with the last FDE rewritten */
} ctx_t;

/*
 * Make room for element N of the array V of *CAP elements of SIZE bytes: V itself, a
 * larger copy (*CAP updated), or NULL when out of memory (V is then still valid).
 */
static void *
grow(void *v, size_t *cap, size_t n, size_t size)
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
static void
note_loc(ctx_t *cx, uint64_t x, uint32_t kind)
{
    if (!cx->collect)
        return;
    ed_code_loc_t *v = grow(cx->locs, &cx->caplocs, cx->nlocs, sizeof(*v));
    if (v == NULL) {
        cx->locs_oom = 1;
        return;
    }
    cx->locs = v;
    cx->locs[cx->nlocs++] = (ed_code_loc_t) { x, kind };
}

typedef struct fmap {
    ctx_t *cx;
    uint64_t old_lo, old_hi;   /* the old FDE range */
    uint64_t new_lo, new_hi;   /* the new one */
    uint64_t hole_lo, hole_hi; /* last hole found: no address in it is mapped ... */
    uint64_t hole_to;          /* ... and it maps to this (the next mapped location) */
    uint32_t budget;           /* map() calls left for scanning across holes */
    int err;                   /* QP_ERANGE once the budget ran out */
    int identity;              /* the code stays: every location maps to itself */
} fmap_t;

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
static uint64_t
loc_map(fmap_t *fm, uint64_t x)
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
static uint64_t
end_map(fmap_t *fm, uint64_t x)
{
    if (x >= fm->old_hi)
        return fm->new_hi;
    if (fm->cx->map_end != NULL && x > fm->old_lo && !fm->identity) {
        uint64_t v = fm->cx->map_end(fm->cx->arg, x);
        if (v != 0)
            return v;
    }
    return loc_map(fm, x);
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
static int
cfa_copy(ctx_t *cx, const cie_t *ci, size_t pos, size_t end, fmap_t *fm, wb_t *out,
         size_t *keep)
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
        note_loc(cx, target, ED_LOC_CFA);
        uint64_t nl = loc_map(fm, target);
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
 * Reading .eh_frame: record framing, CIEs, FDEs
 */

/* Split the section into records; QP_EFORMAT when a length runs past the end. */
static int
split_records(ctx_t *cx)
{
    size_t cap = 0, off = 0;
    int align8 = 1, align4 = 1, got;
    eh_rec_t er;
    while ((got = eh_rec_read(cx->sec, cx->secsize, off, &er)) == 1) {
        rec_t *recs = grow(cx->recs, &cap, cx->nrecs, sizeof(*recs));
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
        if (pe_addressable(ci->pers_enc))
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
    ci->fde_ok = pe_addressable(ci->fde_enc) && !(ci->fde_enc & DW_EH_PE_indirect)
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
        && (!pe_addressable(ci->lsda_enc) || eh_pe_size(ci->lsda_enc) <= 0
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
    ci->err = cfa_copy(cx, ci, e.insn_pos, r->end, NULL, NULL, NULL);
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
        if (ci->lsda_enc != DW_EH_PE_omit && !pe_addressable(ci->lsda_enc)) {
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
static const rec_t *
rec_at(const ctx_t *cx, size_t off)
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
static int
parse_all(ctx_t *cx)
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
        const rec_t *cr = delta <= r->body ? rec_at(cx, r->body - delta) : NULL;
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
static int
hdr_read(ctx_t *cx)
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
                             ? rec_at(cx, (size_t)(e->fde - cx->vma)) : NULL;
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
static int
check_fdes(ctx_t *cx)
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
static void
defect_str(const ctx_t *cx, const fde_t *f, char *buf, size_t size, uint64_t *lo,
    uint64_t *hi)
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

/* The header of an LSDA, and where its tables are. */
typedef struct lsda_hdr {
    const uint8_t *p;      /* the LSDA */
    size_t avail;          /* bytes readable from p */
    uint8_t lpstart_enc;   /* LPStart encoding, omit when landing pads are fs-relative */
    uint8_t ttype_enc;     /* type table encoding, or omit */
    uint8_t cs_enc;        /* call-site encoding */
    uint64_t lpstart;      /* LPStart: as given, else the function start */
    size_t ttbase;         /* offset of TTBase (avail without a type table) */
    int esize;             /* bytes per type table entry */
    size_t cs_pos, cs_end; /* the call-site table; the action table follows */
} lsda_hdr_t;

/* Read the header of the LSDA at ADDR for the function starting at FS. */
static int
lsda_read_header(const cfg_image_t *img, uint64_t addr, uint64_t fs, lsda_hdr_t *h)
{
    memset(h, 0, sizeof(*h));
    h->p = cfg_image_ptr(img, addr, &h->avail);
    if (h->p == NULL)
        return QP_EFORMAT;
    rd_t c = { h->p, h->avail, 0, 0 };
    h->lpstart = fs;
    h->lpstart_enc = rd_u8(&c);
    if (h->lpstart_enc != DW_EH_PE_omit) {
        if (!pe_addressable(h->lpstart_enc) || (h->lpstart_enc & DW_EH_PE_indirect))
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
static int
lsda_read_cs(const lsda_hdr_t *h, rd_t *cs, uint64_t range, cs_rec_t *r)
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
    int hrc = lsda_read_header(cx->img, f->lsda, f->pc_begin, &h);
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
        if ((rc = lsda_read_cs(&h, &cs, f->pc_range, &r)) < 0) {
            cx->why = "has an LSDA call-site record truncated or outside its code";
            break;
        }
        if (r.action != 0 && (rc = lsda_walk_actions(&sc, r.action)) < 0) {
            cx->why = "has an LSDA action chain that is malformed";
            break;
        }
        note_loc(cx, f->pc_begin + r.start, ED_LOC_CS_START);
        note_loc(cx, f->pc_begin + r.start + r.len, ED_LOC_CS_END);
        uint64_t ns = loc_map(fm, f->pc_begin + r.start);
        uint64_t ne = end_map(fm, f->pc_begin + r.start + r.len);
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
        cs_new_t *v = grow(recs, &cap, nrecs, sizeof(*recs));
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
        rc = wr_fmt(&l->cs, l->cs_enc, r->start - fm->new_lo);
        if (rc == 0)
            rc = wr_fmt(&l->cs, l->cs_enc, r->end - r->start);
        if (rc == 0)
            rc = wr_fmt(&l->cs, l->cs_enc, r->lp ? r->lp - base : 0);
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
static int
lsda_write(wb_t *b, uint64_t at, lsda_t *l)
{
    wb_align(b, at, 4);
    size_t start = b->len;
    l->new_addr = at + start;
    wb_u8(b, l->lpstart_enc);
    if (l->lpstart_enc != DW_EH_PE_omit)
        QP_CHECK(wr_ptr(b, l->lpstart_enc, l->new_lpstart, at + b->len));
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
        wb_align(b, at, l->tt_align);
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
            QP_CHECK(wr_ptr(b, l->ttype_enc, target, at + b->len));
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
static void
lsda_hash_del(ctx_t *cx, uint64_t addr, uint64_t fs)
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
static int
lsda_for(ctx_t *cx, const fde_t *f, fmap_t *fm, size_t *idx)
{
    *idx = lsda_find(cx, f->lsda, f->pc_begin);
    if (*idx != SIZE_MAX)
        return 0;
    lsda_t *ls = grow(cx->lsdas, &cx->caplsdas, cx->nlsdas, sizeof(*ls));
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
        int rc = wr_ptr(&t, ci->pers_enc, ci->pers, cx->at + off + ci->pers_off);
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
    hdr_ent_t *ents = grow(cx->ents, &cx->capents, cx->nents, sizeof(*ents));
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
    int rc = cfa_copy(cx, ci, f->insn_pos, f->insn_end, &fm, &prog, &keep);
    if (rc == QP_EFORMAT)
        cx->why = "has a CFA program that is malformed (an unknown opcode, truncated, or "
                  "going backwards)";
    if (rc == 0 && prog.err)
        rc = QP_ENOMEM;
    prog.len = keep;
    size_t lsda_idx = SIZE_MAX, nlsdas = cx->nlsdas;
    if (rc == 0 && f->lsda != 0 && !identity)
        rc = lsda_for(cx, f, &fm, &lsda_idx);
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
        rc = wr_ptr(b, ci->fde_enc, new_lo, cx->at + b->len);
    }
    if (rc == 0)
        rc = wr_fmt(b, ci->fde_enc & 0x0f, fm.new_hi - new_lo);
    if (rc == 0 && ci->has_z) {
        /* The LSDA pointer (if any) first, then the rest of the augmentation verbatim. */
        size_t alen = f->aug_end - f->aug_pos;
        wb_uleb(b, alen);
        if (ci->lsda_enc != DW_EH_PE_omit && identity) {
            size_t at = b->len;
            rc = wr_ptr(b, ci->lsda_enc, f->lsda, cx->at + at); /* the old LSDA */
            if (rc == 0 && b->len - at != f->lsda_size)
                rc = QP_ERANGE;
        } else if (ci->lsda_enc != DW_EH_PE_omit) {
            if (lsda_idx != SIZE_MAX) {
                patch_t *pt = grow(cx->patches, &cx->cappatches, cx->npatches,
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
            lsda_hash_del(cx, l->old_addr, l->old_fs);
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
    wb_align(b, cx->at, 4);
    *hdr_off = b->len;
    uint64_t hdr = cx->hdr_at != 0 ? cx->hdr_at : cx->at + b->len;
    wb_u8(b, 1);
    wb_u8(b, HDR_PTR_ENC);
    wb_u8(b, HDR_COUNT_ENC);
    wb_u8(b, HDR_TABLE_ENC);
    QP_CHECK(wr_ptr(b, HDR_PTR_ENC, cx->at, hdr + (b->len - *hdr_off)));
    wb_n(b, n, 4);
    for (size_t i = 0; i < n; i++) {
        QP_CHECK(wr_fmt(b, HDR_TABLE_ENC, cx->ents[i].loc - hdr));
        QP_CHECK(wr_fmt(b, HDR_TABLE_ENC, cx->ents[i].fde - hdr));
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
    span_t *v = grow(cx->spans, &cx->capspans, cx->nspans, sizeof(*v));
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
            defect_str(cx, f, why, sizeof(why), &old_lo, &old_hi);
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
                             ? rec_at(cx, (size_t)(e->fde - cx->vma)) : NULL;
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
        QP_CHECK(lsda_write(&cx->blob, cx->at, &cx->lsdas[i]));
    for (size_t i = 0; i < cx->npatches; i++) {
        const patch_t *pt = &cx->patches[i];
        wb_t t = { 0 };
        int rc = wr_ptr(&t, pt->enc, cx->lsdas[pt->lsda].new_addr, cx->at + pt->at);
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
    QP_CHECK(split_records(cx));
    QP_CHECK(parse_all(cx));
    QP_CHECK(hdr_read(cx));
    return check_fdes(cx);
}

static void
ctx_close(ctx_t *cx)
{
    for (size_t i = 0; i < cx->nlsdas; i++)
        free(cx->lsdas[i].cs.p);
    free(cx->lsdas);
    free(cx->lsda_hash);
    free(cx->patches);
    free(cx->ents);
    free(cx->old_ents);
    free(cx->old_keep);
    free(cx->locs);
    free(cx->spans);
    free(cx->recs);
    free(cx->cies);
    free(cx->fdes);
    free(cx->blob.p);
}

int
ed_unwind_build_ex(const cfg_image_t *img, const ed_unwind_map_t *m, uint64_t at,
    uint32_t flags, ed_unwind_out_t *out)
{
    return ed_unwind_build_at(img, m, at, 0, flags, out);
}

int
ed_unwind_build_at(const cfg_image_t *img, const ed_unwind_map_t *m, uint64_t at,
    uint64_t hdr_at, uint32_t flags, ed_unwind_out_t *out)
{
    if (img == NULL || m == NULL || m->map == NULL || out == NULL
        || (flags & ~(uint32_t)(ED_UNWIND_ALL | ED_UNWIND_STRICT)) || hdr_at % 4 != 0)
        return QP_EINVAL;
    memset(out, 0, sizeof(*out));
    ctx_t cx;
    int rc = ctx_open(&cx, img);
    if (rc == 0) {
        cx.map = m->map;
        cx.map_end = m->map_end;
        cx.map_insn = m->map_insn;
        cx.pieces = m->pieces;
        cx.arg = m->arg;
        cx.at = at;
        cx.hdr_at = hdr_at;
        cx.flags = flags;
        rc = build(&cx, out);
        if (rc < 0) {
            uint64_t lo = out->fail_lo, hi = out->fail_hi;
            memset(out, 0, sizeof(*out));
            out->fail_lo = lo; /* which FDE, for the caller's message */
            out->fail_hi = hi;
        }
    }
    ctx_close(&cx);
    return rc < 0 ? rc : 0;
}

int
ed_unwind_build(const cfg_image_t *img, ed_map_fn map, void *arg, uint64_t at,
                ed_unwind_out_t *out)
{
    ed_unwind_map_t m = { map, NULL, NULL, NULL, arg };
    return ed_unwind_build_ex(img, &m, at, 0, out);
}

int
ed_unwind_landing_pads(const cfg_image_t *img,
                       int (*fn)(void *arg, uint64_t func, uint64_t pad), void *arg)
{
    if (img == NULL || fn == NULL)
        return QP_EINVAL;
    ctx_t cx;
    int rc = ctx_open(&cx, img), bad = 0;
    for (size_t i = 0; rc == 0 && i < cx.nfdes; i++) {
        const fde_t *f = &cx.fdes[i];
        if (f->err < 0 || f->lsda_err < 0) {
            bad = 1;
            continue;
        }
        if (f->pc_begin == 0 || f->lsda == 0)
            continue;
        lsda_hdr_t h;
        if (lsda_read_header(img, f->lsda, f->pc_begin, &h) < 0) {
            bad = 1;
            continue;
        }
        rd_t cs = { h.p, h.cs_end, h.cs_pos, 0 };
        while (rc == 0 && cs.pos < cs.len) {
            cs_rec_t r;
            if (lsda_read_cs(&h, &cs, f->pc_range, &r) < 0) {
                bad = 1;
                break;
            }
            if (r.lp != 0)
                rc = fn(arg, f->pc_begin, h.lpstart + r.lp);
        }
    }
    ctx_close(&cx);
    if (rc < 0)
        return rc;
    return bad ? QP_EFORMAT : 0;
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
    if (lsda_read_header(cx->img, f->lsda, f->pc_begin, &h) < 0)
        return 0; /* reported through the rewrite's error */
    rd_t cs = { h.p, h.cs_end, h.cs_pos, 0 };
    while (cs.pos < cs.len) {
        cs_rec_t r;
        if (lsda_read_cs(&h, &cs, f->pc_range, &r) < 0)
            break;
        if (r.lp == 0)
            continue;
        uint64_t *v = grow(*pads, cap, *n, sizeof(**pads));
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
    if (img == NULL || fn == NULL)
        return QP_EINVAL;
    ctx_t cx;
    int rc = ctx_open(&cx, img);
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
            defect_str(&cx, f, why, sizeof(why), &info.lo, &info.hi);
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
                             ? rec_at(&cx, (size_t)(e->fde - cx.vma)) : NULL;
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
    ctx_close(&cx);
    return rc < 0 ? rc : 0;
}
