/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_ED_DWARF_PRIV_H
#define QP_ED_DWARF_PRIV_H
/*
 * PURPOSE: what the two halves of the DWARF rewriter share: ed_dwarf.c (DIEs, ranges,
 * aranges, the entry point) and ed_dwarf_line.c (line programs): the state of one
 * ed_dwarf_build call, and the cutting of old ranges into pieces through the editor's
 * map. Only editor/ed_dwarf*.c include it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <dwarf.h> /* elfutils: the DWARF constants */

#include "arch/qp_err.h"
#include "base/qp_bytes.h"
#include "editor/ed.h"


/* Make room for element N of *V (SIZE bytes each). */
static inline int
grow(void **v, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? 2 * *cap : 256;
    void *p = realloc(*v, nc * size);
    if (p == NULL)
        return QP_ENOMEM;
    *v = p;
    *cap = nc;
    return 0;
}

/*****************************************************************************
 * State of one build
 */

/* A section of the input and, once changed, its new contents. */
typedef struct dsec {
    const char *name;  /* ".debug_line" */
    const uint8_t *in; /* input bytes, NULL when absent */
    size_t in_len;     /* their number */
    wb_t out;          /* new contents (out.p != NULL once made) */
} dsec_t;

enum {
    S_INFO,
    S_TYPES,
    S_ABBREV,
    S_LINE,
    S_ARANGES,
    S_RNGLISTS,
    S_RANGES,
    S_MACRO,
    S_ADDR,
    S_N
};

/* A line unit: where it was and where it goes. */
typedef struct lunit {
    uint64_t old_off; /* offset in the input's .debug_line */
    uint64_t new_off; /* offset in the new one */
} lunit_t;

/* A patch of .debug_line offsets to make once the new layout is known. */
typedef struct lref {
    int sec;    /* S_INFO, S_TYPES or S_MACRO */
    size_t pos; /* where the 4-byte offset is */
} lref_t;

/* A new range of a CU: old code kept, or new code. */
typedef struct crange {
    uint64_t lo, hi; /* [lo, hi) */
} crange_t;

/* A changed entry of a unit's range list offset table. */
typedef struct rlidx {
    uint64_t idx; /* the entry */
    uint64_t off; /* its new list, in the unit's new lists */
} rlidx_t;

typedef struct dctx {
    const ed_dwarf_map_t *map; /* the editor's map */
    ed_dwarf_out_t *out;       /* figures and results */
    dsec_t s[S_N];             /* the sections */
    lunit_t *lunits;           /* line units, by old offset */
    size_t nlunits;            /* their number */
    lref_t *lrefs;             /* references to line units */
    size_t nlrefs, lrefs_cap;  /* their number, room */
    int line_unsafe; /* a unit's line table could not be found: keep .debug_line */
    uint64_t *lkeep; /* line units to keep as they are (split DWARF units) */
    size_t nlkeep, lkeep_cap; /* their number, room */
    uint64_t *ukeep;          /* .debug_info units kept as they are: their aranges too */
    size_t nukeep, ukeep_cap; /* their number, room */
    crange_t *cr;             /* scratch: the pieces of one range */
    size_t ncr, cr_cap;       /* their number, room */
    size_t rng_hdr;           /* offset of the new .debug_rnglists contribution */
    int drop_padding;         /* cr_add: leave out the kept part of a moved range */
    int keep_old;             /* cr_add: keep the old range as well (CUs) */
    unsigned version;         /* the current unit's DWARF version */
    uint64_t cu_base;         /* its base address (the CU's low_pc) */
    int have_cu_base;         /* ... when it has one */
    /* The current unit's address table (DW_FORM_addrx). */
    int have_addr_base;       /* it was found */
    uint64_t addr_base;       /* offset of its first entry in .debug_addr */
    uint64_t addr_count;      /* its entries */
    size_t addr_base_pos;     /* where the unit DIE's DW_AT_addr_base value is */
    uint64_t *naddr;          /* new entries, after the old ones in the unit's copy */
    size_t nnaddr, naddr_cap; /* their number, room */
    uint32_t *nhash;          /* index+1 into naddr by address: open addressing */
    size_t nhash_cap;         /* a power of 2, at least twice naddr_cap */
    /* The current unit's range list table (DW_FORM_rnglistx). */
    int rl_have;                /* it was found */
    uint64_t rl_base;           /* offset of its offset table in .debug_rnglists */
    uint64_t rl_count;          /* entries of the offset table */
    uint64_t rl_end;            /* the end of its contribution */
    size_t rl_pos;              /* where the unit DIE's DW_AT_rnglists_base value is */
    wb_t rl_new;                /* its new lists */
    rlidx_t *rl_idx;            /* the table entries that name them */
    size_t rl_nidx, rl_idx_cap; /* their number, room */
    size_t rng_end;             /* end of the open new .debug_rnglists contribution */
} dctx_t;

/*****************************************************************************
 * Cutting ranges through the map
 */

typedef struct piece {
    uint64_t old;  /* old start */
    uint64_t olen; /* old length */
    uint64_t new_; /* new start, 0: kept */
    uint64_t nlen; /* new length */
} piece_t;

typedef struct pieces {
    piece_t *v;    /* the pieces */
    size_t n, cap; /* their number, room */
} pieces_t;

/* The pieces of [LO, HI) into P (emptied first). */
int
ed_dwarf_cut(dctx_t *c, uint64_t lo, uint64_t hi, pieces_t *p);

/* Whether the line unit at OFF must keep its bytes (its CU is not handled). */
int
ed_dwarf_lkeep_has(const dctx_t *c, uint64_t off);

/*
 * Regenerate .debug_line into c->s[S_LINE].out: every unit, in order; units that cannot
 * be rewritten, that must be kept, or whose code did not move keep their bytes. Fills
 * c->lunits (sorted by old offset). 0 or QP_ENOMEM / QP_ERANGE.
 */
int
ed_dwarf_line_rewrite(dctx_t *c);

/* The new offset of the line unit at old offset OFF, or -1 when no unit starts there. */
int64_t
ed_dwarf_line_new_off(const dctx_t *c, uint64_t off);

#endif
