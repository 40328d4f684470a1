/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_BASE_EHFRAME_H
#define QP_BASE_EHFRAME_H
/*
 * PURPOSE: the one reader of .eh_frame records (the LSB "Exception Frames" format):
 * their framing, a CIE's fields and an FDE's, as they are in the section. What a reader
 * makes of them is its own: cfg/ names procedures by the FDEs' ranges, editor/ rewrites
 * the records and refuses what it cannot copy faithfully. Header-only, on
 * base/qp_bytes.h, base/qp_eh.h and elfutils' <dwarf.h>.
 *
 * Offsets are section offsets; SEC[0, SIZE) is the section, loaded at VMA.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/qp_bytes.h"
#include "base/qp_eh.h"

/* A record: [off, end), its length field at OFF, its CIE id or CIE pointer at BODY. */
typedef struct eh_rec {
    size_t off;
    size_t body;
    size_t end;
    int is_cie;        /* the id field is 0 */
    uint32_t cie_ptr;  /* an FDE's: the distance from BODY back to its CIE */
} eh_rec_t;

/* The record at OFF: 1 read into *R, 0 at the terminator or the end of the section, -1
 * when its length runs past the end (or is too short to hold the id). */
static inline int
eh_rec_read(const uint8_t *sec, size_t size, size_t off, eh_rec_t *r)
{
    if (off > size || size - off < 4)
        return 0;
    rd_t c = { sec, size, off, 0 };
    uint64_t len = rd_n(&c, 4);
    if (len == 0)
        return 0;
    if (len == 0xffffffff)
        len = rd_n(&c, 8);
    if (c.err || len < 4 || len > size - c.pos)
        return -1;
    r->off = off;
    r->body = c.pos;
    r->end = c.pos + (size_t)len;
    r->cie_ptr = (uint32_t)rd_n(&c, 4);
    r->is_cie = r->cie_ptr == 0;
    return 1;
}

/* A CIE's fields. */
typedef struct eh_cie {
    uint8_t version;
    const char *aug;      /* the augmentation string, an old GCC's "eh" left out */
    int eh_data;          /* "eh": the 8-byte pointer to EH data that follows was read */
    uint8_t addr_size;    /* version 4: address and segment selector sizes; else 8, 0 */
    uint8_t seg_size;
    uint64_t code_align;
    int64_t data_align;
    uint64_t ra_column;
    int has_z;            /* 'z': FDEs carry augmentation data */
    uint8_t fde_enc;      /* 'R': FDEs' pc_begin (pc_range in its format); absptr without */
    int seen_r;
    uint8_t lsda_enc;     /* 'L': FDEs' LSDA pointer, or omit */
    uint8_t pers_enc;     /* 'P': the personality pointer, or omit */
    size_t pers_pos;      /* ... its field (0: none) */
    uint64_t pers_raw;    /* ... its raw value */
    int signal;           /* 'S': signal frames */
    int unknown;          /* a letter (or a 'P' encoding) not understood: the
                           * augmentation after it was not read (ENCODINGS may be
                           * incomplete) */
    size_t insn_pos;      /* the initial instructions [insn_pos, insn_end) */
    size_t insn_end;
} eh_cie_t;

/* Parse CIE record R (eh_rec_read). 0, or -1 when it is malformed (a field past its end,
 * no augmentation string, a 'z' length past its end). Any version is read as versions
 * 1, 3 and 4 are laid out; the caller judges VERSION. */
static inline int
eh_cie_parse(const uint8_t *sec, const eh_rec_t *r, eh_cie_t *ci)
{
    memset(ci, 0, sizeof(*ci));
    ci->fde_enc = DW_EH_PE_absptr;
    ci->lsda_enc = DW_EH_PE_omit;
    ci->pers_enc = DW_EH_PE_omit;
    ci->addr_size = 8;
    rd_t c = { sec, r->end, r->body + 4, 0 };
    ci->version = rd_u8(&c);
    const uint8_t *nul = !c.err && c.pos < c.len ? memchr(sec + c.pos, 0, c.len - c.pos) : NULL;
    if (nul == NULL)
        return -1;
    ci->aug = (const char *)sec + c.pos;
    c.pos = (size_t)(nul - sec) + 1;
    if (ci->aug[0] == 'e' && ci->aug[1] == 'h') {
        rd_n(&c, 8);
        ci->aug += 2;
        ci->eh_data = 1;
    }
    if (ci->version >= 4) {
        ci->addr_size = rd_u8(&c);
        ci->seg_size = rd_u8(&c);
    }
    ci->code_align = rd_uleb(&c);
    ci->data_align = rd_sleb(&c);
    ci->ra_column = ci->version == 1 ? rd_u8(&c) : rd_uleb(&c);
    if (c.err)
        return -1;
    ci->insn_pos = c.pos;
    ci->insn_end = r->end;
    if (ci->aug[0] != 'z')
        return 0;
    ci->has_z = 1;
    uint64_t alen = rd_uleb(&c);
    if (c.err || alen > c.len - c.pos)
        return -1;
    size_t aend = c.pos + (size_t)alen;
    rd_t a = { sec, aend, c.pos, 0 };
    for (const char *p = ci->aug + 1; *p && !a.err && !ci->unknown; p++) {
        switch (*p) {
        case 'L': ci->lsda_enc = rd_u8(&a); break;
        case 'R':
            ci->fde_enc = rd_u8(&a);
            ci->seen_r = 1;
            break;
        case 'P':
            ci->pers_enc = rd_u8(&a);
            ci->pers_pos = a.pos;
            if (!eh_pe_valid(ci->pers_enc)) {
                ci->unknown = 1; /* the field's size is unknown: what follows is lost */
                break;
            }
            ci->pers_raw = eh_rd_raw(&a, ci->pers_enc);
            break;
        case 'S': ci->signal = 1; break;
        case 'B':
        case 'G': break; /* AArch64 BTI and MTE: no data */
        default: ci->unknown = 1; break;
        }
    }
    if (a.err)
        return -1;
    ci->insn_pos = aend; /* the length is authoritative */
    return 0;
}

/* An FDE's fields. */
typedef struct eh_fde {
    size_t begin_pos;     /* the pc_begin field */
    uint64_t begin_raw;   /* ... raw, in the CIE's fde_enc */
    uint64_t range;       /* pc_range */
    size_t aug_pos;       /* augmentation data [aug_pos, aug_end), empty without 'z' */
    size_t aug_end;
    size_t insn_pos;      /* the CFA program [insn_pos, insn_end) */
    size_t insn_end;
} eh_fde_t;

/* Parse FDE record R of CIE CI. 0, or -1 when malformed. */
static inline int
eh_fde_parse(const uint8_t *sec, const eh_rec_t *r, const eh_cie_t *ci, eh_fde_t *f)
{
    memset(f, 0, sizeof(*f));
    rd_t c = { sec, r->end, r->body + 4, 0 };
    f->begin_pos = c.pos;
    f->begin_raw = eh_rd_raw(&c, ci->fde_enc);
    f->range = eh_rd_raw(&c, ci->fde_enc & 0x0f);
    if (c.err)
        return -1;
    f->aug_pos = f->aug_end = c.pos;
    if (ci->has_z) {
        uint64_t alen = rd_uleb(&c);
        if (c.err || alen > c.len - c.pos)
            return -1;
        f->aug_pos = c.pos;
        f->aug_end = c.pos + (size_t)alen;
    }
    f->insn_pos = f->aug_end;
    f->insn_end = r->end;
    return 0;
}

#endif
