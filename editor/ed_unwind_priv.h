/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_ED_UNWIND_PRIV_H
#define QP_ED_UNWIND_PRIV_H
/*
 * PURPOSE: what the files of the unwind-table rewrite share (ed_unwind.c: mapping,
 * CFA programs, new FDEs, the new .eh_frame_hdr, the whole build; ed_unwind_read.c:
 * reading and checking the old tables; ed_unwind_lsda.c: the LSDAs): the parsed
 * .eh_frame and the state of one build. Only those files include this header.
 */
#include <stdint.h>

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

/* The map of one FDE's code locations (ed_unwind.c's Mapping code locations). */
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

/* ed_unwind.c: growable arrays, pointer encodings, mapping code locations, CFA programs
 * (each commented at its definition). */
void *ed_uw_grow(void *v, size_t *cap, size_t n, size_t size);
int ed_uw_pe_addressable(uint8_t enc);
int ed_uw_wr_fmt(wb_t *b, uint8_t enc, uint64_t raw);
int ed_uw_wr_ptr(wb_t *b, uint8_t enc, uint64_t val, uint64_t field);
void ed_uw_wb_align(wb_t *b, uint64_t base, unsigned align);
void ed_uw_note_loc(ctx_t *cx, uint64_t x, uint32_t kind);
uint64_t ed_uw_loc_map(fmap_t *fm, uint64_t x);
uint64_t ed_uw_end_map(fmap_t *fm, uint64_t x);
int ed_uw_cfa_copy(ctx_t *cx, const cie_t *ci, size_t pos, size_t end, fmap_t *fm,
                   wb_t *out, size_t *keep);

/* ed_unwind_read.c: the old .eh_frame and .eh_frame_hdr read and checked. */
int ed_uw_split_records(ctx_t *cx);
int ed_uw_parse_all(ctx_t *cx);
const rec_t *ed_uw_rec_at(const ctx_t *cx, size_t off);
int ed_uw_hdr_read(ctx_t *cx);
int ed_uw_check_fdes(ctx_t *cx);
void ed_uw_defect_str(const ctx_t *cx, const fde_t *f, char *buf, size_t size,
                      uint64_t *lo, uint64_t *hi);

/* ed_unwind_lsda.c: LSDAs read, rewritten, shared and written. */
int ed_uw_lsda_read_header(const cfg_image_t *img, uint64_t addr, uint64_t fs,
                           lsda_hdr_t *h);
int ed_uw_lsda_read_cs(const lsda_hdr_t *h, rd_t *cs, uint64_t range, cs_rec_t *r);
int ed_uw_lsda_write(wb_t *b, uint64_t at, lsda_t *l);
void ed_uw_lsda_hash_del(ctx_t *cx, uint64_t addr, uint64_t fs);
int ed_uw_lsda_for(ctx_t *cx, const fde_t *f, fmap_t *fm, size_t *idx);

#endif
