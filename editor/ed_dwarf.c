/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * DWARF debug information for relocated code. The input's .debug_* sections name the old
 * addresses; this file makes new contents for the few sections that hold code addresses,
 * so that a debugger finds relocated code by file:line, by function and by PC:
 *
 *   .debug_line     every line program is regenerated: each row's address range goes
 *                   through the editor's map, rows of moved code become new sequences
 *                   (sorted by new address, one per contiguous run of new code), rows of
 *                   code left in place keep their old addresses. Headers (directory and
 *                   file tables) are copied byte for byte.
 *   .debug_info     patched in place, never resized: DW_AT_stmt_list of every unit (the
 *                   line units moved), DW_AT_low_pc/DW_AT_high_pc of subprograms, lexical
 *                   blocks, inlined subroutines and labels whose range is one run of moved
 *                   code, DW_AT_entry_pc, call sites' return addresses, and
 *                   DW_AT_ranges (a new list, see die_ranges). The CU DIE's
 *                   low_pc/high_pc pair becomes low_pc + DW_AT_ranges (a new abbreviation,
 *                   see cu_ranges) so that the CU covers its new code as well.
 *   .debug_abbrev   the new CU abbreviations are appended.
 *   .debug_rnglists / .debug_ranges   the CUs' new range lists are appended.
 *   .debug_addr     (DW_FORM_addrx, clang's DWARF 5) a unit whose DIEs need new
 *                   addresses gets a copy of its address table with new entries after
 *                   the old ones, and its DW_AT_addr_base names the copy; old entries
 *                   never change (location lists and the CU base address use them).
 *   .debug_aranges  regenerated: each CU's tuples cut into kept and moved pieces.
 *   .debug_macro    the .debug_line offset in macro unit headers follows the line units.
 *
 * What stays old (and is then simply not found at new PCs - never a wrong answer):
 * location lists (a variable shows as <optimized out> in moved code unless its location
 * is a single expression), DW_FORM_rnglistx ranges, and low_pc/high_pc ranges that do
 * not map to one contiguous run of new code. They are counted (--verbose).
 * Units this reader does not handle - DWARF 2/3 and 64-bit DWARF units, split DWARF,
 * compressed sections - keep their bytes; when a line unit cannot be found from its CU,
 * .debug_line is left as it was.
 *
 * Formats: DWARF 4 and DWARF 5 (sections 6.1.2 aranges, 6.2 line tables, 7.5 unit
 * headers and forms, 7.25 range lists).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arch/qp_err.h"
#include "editor/ed.h"

enum {
    DW_FORM_addr = 0x01, DW_FORM_block2 = 0x03, DW_FORM_block4 = 0x04,
    DW_FORM_data2 = 0x05, DW_FORM_data4 = 0x06, DW_FORM_data8 = 0x07,
    DW_FORM_string = 0x08, DW_FORM_block = 0x09, DW_FORM_block1 = 0x0a,
    DW_FORM_data1 = 0x0b, DW_FORM_flag = 0x0c, DW_FORM_sdata = 0x0d, DW_FORM_strp = 0x0e,
    DW_FORM_udata = 0x0f, DW_FORM_ref_addr = 0x10, DW_FORM_ref1 = 0x11,
    DW_FORM_ref2 = 0x12, DW_FORM_ref4 = 0x13, DW_FORM_ref8 = 0x14,
    DW_FORM_ref_udata = 0x15, DW_FORM_indirect = 0x16, DW_FORM_sec_offset = 0x17,
    DW_FORM_exprloc = 0x18, DW_FORM_flag_present = 0x19, DW_FORM_strx = 0x1a,
    DW_FORM_addrx = 0x1b, DW_FORM_ref_sup4 = 0x1c, DW_FORM_strp_sup = 0x1d,
    DW_FORM_data16 = 0x1e, DW_FORM_line_strp = 0x1f, DW_FORM_ref_sig8 = 0x20,
    DW_FORM_implicit_const = 0x21, DW_FORM_loclistx = 0x22, DW_FORM_rnglistx = 0x23,
    DW_FORM_ref_sup8 = 0x24, DW_FORM_strx1 = 0x25, DW_FORM_strx2 = 0x26,
    DW_FORM_strx3 = 0x27, DW_FORM_strx4 = 0x28, DW_FORM_addrx1 = 0x29,
    DW_FORM_addrx2 = 0x2a, DW_FORM_addrx3 = 0x2b, DW_FORM_addrx4 = 0x2c,
    DW_FORM_GNU_addr_index = 0x1f01, DW_FORM_GNU_str_index = 0x1f02,
    DW_FORM_GNU_ref_alt = 0x1f20, DW_FORM_GNU_strp_alt = 0x1f21,
};

enum {
    DW_TAG_label = 0x0a, DW_TAG_lexical_block = 0x0b, DW_TAG_compile_unit = 0x11,
    DW_TAG_inlined_subroutine = 0x1d, DW_TAG_subprogram = 0x2e,
    DW_TAG_call_site = 0x48, DW_TAG_GNU_call_site = 0x4109,
};

enum {
    DW_AT_low_pc = 0x11, DW_AT_high_pc = 0x12, DW_AT_stmt_list = 0x10,
    DW_AT_identifier_case = 0x42, DW_AT_entry_pc = 0x52, DW_AT_ranges = 0x55,
    DW_AT_addr_base = 0x73, DW_AT_dwo_name = 0x76, DW_AT_GNU_dwo_name = 0x2130,
    DW_AT_GNU_dwo_id = 0x2131, DW_AT_macros = 0x79, DW_AT_call_return_pc = 0x7d,
    DW_AT_GNU_macros = 0x2119,
};

enum {
    DW_UT_compile = 1, DW_UT_type = 2, DW_UT_partial = 3, DW_UT_skeleton = 4,
    DW_UT_split_compile = 5, DW_UT_split_type = 6,
};

enum {
    DW_LNS_copy = 1, DW_LNS_advance_pc = 2, DW_LNS_advance_line = 3, DW_LNS_set_file = 4,
    DW_LNS_set_column = 5, DW_LNS_negate_stmt = 6, DW_LNS_set_basic_block = 7,
    DW_LNS_const_add_pc = 8, DW_LNS_fixed_advance_pc = 9, DW_LNS_set_prologue_end = 10,
    DW_LNS_set_epilogue_begin = 11, DW_LNS_set_isa = 12,
    DW_LNE_end_sequence = 1, DW_LNE_set_address = 2, DW_LNE_set_discriminator = 4,
};

enum { DW_RLE_end_of_list = 0, DW_RLE_start_length = 7 };

/*****************************************************************************
 * Reading and writing bytes
 */

/* A bounded reader; any read past the end sets ERR and returns zeros. */
typedef struct rd {
    const uint8_t *p;   /* start of the data */
    size_t len;         /* its length */
    size_t pos;         /* current offset */
    int err;            /* a read ran past the end */
} rd_t;

static uint64_t
rd_n(rd_t *r, size_t n)
{
    uint64_t v = 0;
    if (r->err || n > r->len - r->pos) {
        r->err = 1;
        r->pos = r->len;
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)r->p[r->pos + i] << (8 * i);
    r->pos += n;
    return v;
}

static uint64_t
rd_uleb(rd_t *r)
{
    uint64_t v = 0;
    unsigned shift = 0;
    for (;;) {
        uint8_t b = (uint8_t)rd_n(r, 1);
        if (r->err)
            return 0;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80))
            return v;
    }
}

static int64_t
rd_sleb(rd_t *r)
{
    uint64_t v = 0;
    unsigned shift = 0;
    uint8_t b;
    do {
        b = (uint8_t)rd_n(r, 1);
        if (r->err)
            return 0;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40))
        v |= ~(uint64_t)0 << shift;
    return (int64_t)v;
}

static void
rd_skip(rd_t *r, uint64_t n)
{
    if (r->err || n > r->len - r->pos) {
        r->err = 1;
        r->pos = r->len;
        return;
    }
    r->pos += n;
}

/* A growable output buffer; ERR is set when memory runs out. */
typedef struct wb {
    uint8_t *p;         /* the bytes (malloc) */
    size_t len;         /* used */
    size_t cap;         /* allocated */
    int err;            /* out of memory */
} wb_t;

static void
wb_put(wb_t *w, const void *src, size_t n)
{
    if (w->err)
        return;
    if (n > w->cap - w->len) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap - w->len < n)
            cap *= 2;
        uint8_t *p = realloc(w->p, cap);
        if (p == NULL) {
            w->err = 1;
            return;
        }
        w->p = p;
        w->cap = cap;
    }
    memcpy(w->p + w->len, src, n);
    w->len += n;
}

static void
wb_n(wb_t *w, uint64_t v, size_t n)
{
    uint8_t b[8];
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    wb_put(w, b, n);
}

static void
wb_uleb(wb_t *w, uint64_t v)
{
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        if (v)
            b |= 0x80;
        wb_put(w, &b, 1);
    } while (v);
}

static void
wb_sleb(wb_t *w, int64_t v)
{
    for (;;) {
        uint8_t b = v & 0x7f;
        v >>= 7; /* arithmetic shift: gcc and clang on x86-64 */
        if ((v == 0 && !(b & 0x40)) || (v == -1 && (b & 0x40))) {
            wb_put(w, &b, 1);
            return;
        }
        b |= 0x80;
        wb_put(w, &b, 1);
    }
}

static void
put_n(uint8_t *p, uint64_t v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t
get_n(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Make room for element N of *V (SIZE bytes each). */
static int
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
    const char *name;       /* ".debug_line" */
    const uint8_t *in;      /* input bytes, NULL when absent */
    size_t in_len;          /* their number */
    wb_t out;               /* new contents (out.p != NULL once made) */
} dsec_t;

enum {
    S_INFO, S_TYPES, S_ABBREV, S_LINE, S_ARANGES, S_RNGLISTS, S_RANGES, S_MACRO, S_ADDR, S_N
};

static const char *const sec_names[S_N] = {
    ".debug_info", ".debug_types", ".debug_abbrev", ".debug_line", ".debug_aranges",
    ".debug_rnglists", ".debug_ranges", ".debug_macro", ".debug_addr",
};

/* A line unit: where it was and where it goes. */
typedef struct lunit {
    uint64_t old_off;       /* offset in the input's .debug_line */
    uint64_t new_off;       /* offset in the new one */
} lunit_t;

/* A patch of .debug_line offsets to make once the new layout is known. */
typedef struct lref {
    int sec;                /* S_INFO, S_TYPES or S_MACRO */
    size_t pos;             /* where the 4-byte offset is */
} lref_t;

/* A new range of a CU: old code kept, or new code. */
typedef struct crange {
    uint64_t lo, hi;        /* [lo, hi) */
} crange_t;

typedef struct dctx {
    const ed_dwarf_map_t *map;  /* the editor's map */
    ed_dwarf_out_t *out;        /* figures and results */
    dsec_t s[S_N];              /* the sections */
    lunit_t *lunits;            /* line units, by old offset */
    size_t nlunits;
    lref_t *lrefs;              /* references to line units */
    size_t nlrefs, lrefs_cap;
    int line_unsafe;            /* a unit's line table could not be found: keep .debug_line */
    uint64_t *lkeep;            /* line units to keep as they are (split DWARF units) */
    size_t nlkeep, lkeep_cap;
    uint64_t *ukeep;            /* .debug_info units kept as they are: their aranges too */
    size_t nukeep, ukeep_cap;
    crange_t *cr;               /* scratch: the pieces of one range */
    size_t ncr, cr_cap;
    size_t rng_hdr;             /* offset of the new .debug_rnglists contribution */
    int drop_padding;           /* cr_add: leave out the kept part of a moved range */
    unsigned version;           /* the current unit's DWARF version */
    uint64_t cu_base;           /* its base address (the CU's low_pc) */
    int have_cu_base;           /* ... when it has one */
    /* The current unit's address table (DW_FORM_addrx). */
    int have_addr_base;         /* it was found */
    uint64_t addr_base;         /* offset of its first entry in .debug_addr */
    uint64_t addr_count;        /* its entries */
    size_t addr_base_pos;       /* where the unit DIE's DW_AT_addr_base value is */
    uint64_t *naddr;            /* new entries, after the old ones in the unit's copy */
    size_t nnaddr, naddr_cap;
    uint32_t *nhash;            /* index+1 into naddr by address: open addressing */
    size_t nhash_cap;           /* a power of 2, at least twice naddr_cap */
} dctx_t;

static int
lref_add(dctx_t *c, int sec, size_t pos)
{
    if (c->nlrefs == c->lrefs_cap) {
        size_t cap = c->lrefs_cap ? 2 * c->lrefs_cap : 64;
        lref_t *v = realloc(c->lrefs, cap * sizeof(*v));
        if (v == NULL)
            return QP_ENOMEM;
        c->lrefs = v;
        c->lrefs_cap = cap;
    }
    c->lrefs[c->nlrefs++] = (lref_t) { sec, pos };
    return 0;
}

static int
lkeep_add(dctx_t *c, uint64_t off)
{
    QP_CHECK(grow((void **)&c->lkeep, &c->lkeep_cap, c->nlkeep, sizeof(uint64_t)));
    c->lkeep[c->nlkeep++] = off;
    return 0;
}

static int
ukeep_add(dctx_t *c, int sec, uint64_t off)
{
    if (sec != S_INFO)
        return 0;
    QP_CHECK(grow((void **)&c->ukeep, &c->ukeep_cap, c->nukeep, sizeof(uint64_t)));
    c->ukeep[c->nukeep++] = off;
    return 0;
}

static int
lkeep_has(const dctx_t *c, uint64_t off)
{
    for (size_t i = 0; i < c->nlkeep; i++)
        if (c->lkeep[i] == off)
            return 1;
    return 0;
}

/* Make section S's new contents a copy of its input (once). */
static int
sec_copy(dctx_t *c, int s)
{
    dsec_t *d = &c->s[s];
    if (d->out.p != NULL)
        return 0;
    d->out.p = malloc(d->in_len + 64); /* non-NULL even for a new, empty section */
    if (d->out.p == NULL)
        return QP_ENOMEM;
    d->out.cap = d->in_len + 64;
    if (d->in_len > 0)
        memcpy(d->out.p, d->in, d->in_len);
    d->out.len = d->in_len;
    return 0;
}

/*****************************************************************************
 * Cutting ranges through the map
 */

typedef struct piece {
    uint64_t old;           /* old start */
    uint64_t olen;          /* old length */
    uint64_t new_;          /* new start, 0: kept */
    uint64_t nlen;          /* new length */
} piece_t;

typedef struct pieces {
    piece_t *v;
    size_t n, cap;
} pieces_t;

static int
on_piece(void *arg, uint64_t old, uint64_t olen, uint64_t new_, uint64_t nlen)
{
    pieces_t *p = arg;
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 16;
        piece_t *v = realloc(p->v, cap * sizeof(*v));
        if (v == NULL)
            return QP_ENOMEM;
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n++] = (piece_t) { old, olen, new_, nlen };
    return 0;
}

/* The pieces of [LO, HI) into P (emptied first). */
static int
cut(dctx_t *c, uint64_t lo, uint64_t hi, pieces_t *p)
{
    p->n = 0;
    if (hi <= lo)
        return 0;
    return c->map->pieces(c->map->arg, lo, hi, on_piece, p);
}

/*****************************************************************************
 * Line tables
 */

enum {
    ROW_STMT = 1, ROW_BB = 2, ROW_PROLOGUE = 4, ROW_EPILOGUE = 8, ROW_END = 16,
};

typedef struct lrow {
    uint64_t addr;          /* address register */
    uint64_t file;          /* file register */
    int64_t line;           /* line register */
    uint64_t col;           /* column register */
    uint64_t isa;           /* isa register */
    uint64_t disc;          /* discriminator register */
    uint32_t flags;         /* ROW_* */
} lrow_t;

/* A row placed in the new table: a piece of an old row. */
typedef struct prow {
    uint64_t addr;          /* its address (new, or old when kept) */
    uint64_t end;           /* the end of its piece */
    size_t row;             /* the old row */
    size_t seq;             /* kept rows: the old sequence; moved rows: order of creation */
} prow_t;

/* A line unit's header, as far as the program needs it. */
typedef struct lhdr {
    size_t start;           /* offset of the unit */
    size_t end;             /* offset past it */
    size_t prog;            /* offset of the program */
    unsigned version;
    uint8_t min_inst;       /* minimum_instruction_length */
    uint8_t default_stmt;   /* default_is_stmt */
    int8_t line_base;
    uint8_t line_range;
    uint8_t opcode_base;
    const uint8_t *std_len; /* standard_opcode_lengths (opcode_base - 1 of them) */
} lhdr_t;

typedef struct lbuf {
    lrow_t *rows;
    size_t nrows, rows_cap;
    prow_t *kept;           /* rows of code left in place, in table order */
    size_t nkept, kept_cap;
    prow_t *moved;          /* rows of moved code, sorted by new address at the end */
    size_t nmoved, moved_cap;
    pieces_t pc;            /* scratch */
} lbuf_t;


/* Parse the header of the unit at OFF. 1: a unit this file can rewrite; 0: keep its
 * bytes (h->end is set when its length is known, else 0); negative: an error. */
static int
line_header(const dsec_t *d, size_t off, lhdr_t *h)
{
    rd_t r = { d->in, d->in_len, off, 0 };
    memset(h, 0, sizeof(*h));
    h->start = off;
    uint64_t len = rd_n(&r, 4);
    if (r.err || len >= 0xfffffff0u || len > r.len - r.pos)
        return 0; /* 64-bit DWARF or truncated */
    h->end = r.pos + len;
    r.len = h->end;
    h->version = (unsigned)rd_n(&r, 2);
    if (h->version < 2 || h->version > 5)
        return 0;
    if (h->version >= 5) {
        uint8_t asz = (uint8_t)rd_n(&r, 1);
        uint8_t ssz = (uint8_t)rd_n(&r, 1);
        if (asz != 8 || ssz != 0)
            return 0;
    }
    uint64_t hlen = rd_n(&r, 4);
    size_t hstart = r.pos;
    h->min_inst = (uint8_t)rd_n(&r, 1);
    uint8_t max_ops = h->version >= 4 ? (uint8_t)rd_n(&r, 1) : 1;
    h->default_stmt = (uint8_t)rd_n(&r, 1);
    h->line_base = (int8_t)rd_n(&r, 1);
    h->line_range = (uint8_t)rd_n(&r, 1);
    h->opcode_base = (uint8_t)rd_n(&r, 1);
    h->std_len = r.p + r.pos;
    rd_skip(&r, h->opcode_base ? h->opcode_base - 1u : 0);
    if (r.err || hlen > h->end - hstart || r.pos > hstart + hlen)
        return 0;
    h->prog = hstart + hlen;
    /* x86: one byte per instruction unit, no VLIW bundles. */
    if (h->min_inst != 1 || max_ops != 1 || h->line_range == 0 || h->opcode_base == 0)
        return 0;
    return 1;
}

/* Run the line program of H into B->rows. 1: done; 0: something this file cannot
 * regenerate (the unit keeps its bytes); negative: error. */
static int
line_rows(const dsec_t *d, const lhdr_t *h, lbuf_t *b)
{
    rd_t r = { d->in, h->end, h->prog, 0 };
    lrow_t st;
    b->nrows = 0;
    memset(&st, 0, sizeof(st));
    st.file = 1;
    st.line = 1;
    st.flags = h->default_stmt ? ROW_STMT : 0;
    while (r.pos < r.len) {
        uint8_t op = (uint8_t)rd_n(&r, 1);
        int emit = 0;
        if (op >= h->opcode_base) {
            unsigned adj = op - h->opcode_base;
            st.addr += adj / h->line_range;
            st.line += h->line_base + (int)(adj % h->line_range);
            emit = 1;
        } else if (op == 0) {
            uint64_t len = rd_uleb(&r);
            if (r.err || len == 0 || len > r.len - r.pos)
                return 0;
            size_t next = r.pos + len;
            uint8_t sub = (uint8_t)rd_n(&r, 1);
            if (sub == DW_LNE_end_sequence) {
                st.flags |= ROW_END;
                emit = 1;
            } else if (sub == DW_LNE_set_address) {
                if (len != 9)
                    return 0;
                st.addr = rd_n(&r, 8);
            } else if (sub == DW_LNE_set_discriminator) {
                st.disc = rd_uleb(&r);
            } else {
                return 0; /* DW_LNE_define_file, vendor opcodes: not regenerated */
            }
            if (r.pos != next)
                return 0;
        } else {
            switch (op) {
            case DW_LNS_copy: emit = 1; break;
            case DW_LNS_advance_pc: st.addr += rd_uleb(&r); break;
            case DW_LNS_advance_line: st.line += rd_sleb(&r); break;
            case DW_LNS_set_file: st.file = rd_uleb(&r); break;
            case DW_LNS_set_column: st.col = rd_uleb(&r); break;
            case DW_LNS_negate_stmt: st.flags ^= ROW_STMT; break;
            case DW_LNS_set_basic_block: st.flags |= ROW_BB; break;
            case DW_LNS_const_add_pc: st.addr += (255u - h->opcode_base) / h->line_range; break;
            case DW_LNS_fixed_advance_pc: st.addr += rd_n(&r, 2); break;
            case DW_LNS_set_prologue_end: st.flags |= ROW_PROLOGUE; break;
            case DW_LNS_set_epilogue_begin: st.flags |= ROW_EPILOGUE; break;
            case DW_LNS_set_isa: st.isa = rd_uleb(&r); break;
            default: return 0; /* an opcode of a later version: not regenerated */
            }
            /* Opcodes 10-12 only exist from version 3 on (opcode_base 13); an
             * opcode_base of 10 makes them special opcodes, handled above. */
        }
        if (r.err)
            return 0;
        if (emit) {
            QP_CHECK(grow((void **)&b->rows, &b->rows_cap, b->nrows, sizeof(lrow_t)));
            b->rows[b->nrows++] = st;
            st.flags &= ~(ROW_BB | ROW_PROLOGUE | ROW_EPILOGUE);
            st.disc = 0;
            if (st.flags & ROW_END) {
                memset(&st, 0, sizeof(st));
                st.file = 1;
                st.line = 1;
                st.flags = h->default_stmt ? ROW_STMT : 0;
            }
        }
    }
    /* A program must end its last sequence. */
    if (b->nrows > 0 && !(b->rows[b->nrows - 1].flags & ROW_END))
        return 0;
    return 1;
}

static int
add_prow(prow_t **v, size_t *n, size_t *cap, prow_t p)
{
    QP_CHECK(grow((void **)v, cap, *n, sizeof(prow_t)));
    (*v)[(*n)++] = p;
    return 0;
}

/* Cut every row of B into kept and moved pieces. 1: done, 0: rows this file does not
 * rewrite (addresses going backwards within a sequence). */
static int
line_place(dctx_t *c, lbuf_t *b)
{
    size_t seq = 0, order = 0;
    b->nkept = b->nmoved = 0;
    for (size_t i = 0; i < b->nrows; i++) {
        const lrow_t *row = &b->rows[i];
        if (row->flags & ROW_END) {
            seq++;
            continue;
        }
        uint64_t lo = row->addr, hi = b->rows[i + 1].addr; /* the last row is an end */
        if (hi < lo)
            return 0;
        if (hi == lo) {
            uint64_t m = c->map->map(c->map->arg, lo);
            if (m != 0)
                QP_CHECK(add_prow(&b->moved, &b->nmoved, &b->moved_cap,
                                  (prow_t) { m, m, i, order++ }));
            else
                QP_CHECK(add_prow(&b->kept, &b->nkept, &b->kept_cap,
                                  (prow_t) { lo, lo, i, seq }));
            continue;
        }
        QP_CHECK(cut(c, lo, hi, &b->pc));
        /* A row whose code moved in part: what stayed is the padding after a procedure
         * (no code there), which must not keep the line at an old address. */
        int any_moved = 0;
        for (size_t k = 0; k < b->pc.n; k++)
            any_moved |= b->pc.v[k].new_ != 0;
        for (size_t k = 0; k < b->pc.n; k++) {
            const piece_t *p = &b->pc.v[k];
            if (p->new_ == 0 && any_moved)
                continue;
            if (p->new_ != 0)
                QP_CHECK(add_prow(&b->moved, &b->nmoved, &b->moved_cap,
                                  (prow_t) { p->new_, p->new_ + p->nlen, i, order++ }));
            else
                QP_CHECK(add_prow(&b->kept, &b->nkept, &b->kept_cap,
                                  (prow_t) { p->old, p->old + p->olen, i, seq }));
        }
    }
    return 1;
}

static int
cmp_prow(const void *a, const void *b)
{
    const prow_t *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The state of the program being written. */
typedef struct lgen {
    const lhdr_t *h;
    wb_t *w;
    lrow_t st;              /* registers as the consumer sees them */
    int open;               /* inside a sequence */
    uint32_t nseq;          /* sequences written */
} lgen_t;

static void
gen_reset(lgen_t *g)
{
    memset(&g->st, 0, sizeof(g->st));
    g->st.file = 1;
    g->st.line = 1;
    g->st.flags = g->h->default_stmt ? ROW_STMT : 0;
}

static void
gen_end(lgen_t *g, uint64_t end)
{
    if (!g->open)
        return;
    if (end > g->st.addr) {
        wb_n(g->w, DW_LNS_advance_pc, 1);
        wb_uleb(g->w, end - g->st.addr);
    }
    wb_n(g->w, 0, 1);
    wb_uleb(g->w, 1);
    wb_n(g->w, DW_LNE_end_sequence, 1);
    g->open = 0;
    g->nseq++;
}

/* Write row R at address ADDR (never below the previous row of the sequence). */
static void
gen_row(lgen_t *g, const lrow_t *r, uint64_t addr)
{
    const lhdr_t *h = g->h;
    wb_t *w = g->w;
    if (!g->open) {
        gen_reset(g);
        wb_n(w, 0, 1);
        wb_uleb(w, 9);
        wb_n(w, DW_LNE_set_address, 1);
        wb_n(w, addr, 8);
        g->st.addr = addr;
        g->open = 1;
    }
    if (r->file != g->st.file) {
        wb_n(w, DW_LNS_set_file, 1);
        wb_uleb(w, r->file);
    }
    if (r->col != g->st.col) {
        wb_n(w, DW_LNS_set_column, 1);
        wb_uleb(w, r->col);
    }
    if ((r->flags ^ g->st.flags) & ROW_STMT)
        wb_n(w, DW_LNS_negate_stmt, 1);
    if (r->isa != g->st.isa && h->opcode_base > DW_LNS_set_isa) {
        wb_n(w, DW_LNS_set_isa, 1);
        wb_uleb(w, r->isa);
    }
    if (r->disc != 0) {
        size_t n = 1;
        for (uint64_t v = r->disc >> 7; v; v >>= 7)
            n++;
        wb_n(w, 0, 1);
        wb_uleb(w, 1 + n);
        wb_n(w, DW_LNE_set_discriminator, 1);
        wb_uleb(w, r->disc);
    }
    if (r->flags & ROW_BB)
        wb_n(w, DW_LNS_set_basic_block, 1);
    if ((r->flags & ROW_PROLOGUE) && h->opcode_base > DW_LNS_set_prologue_end)
        wb_n(w, DW_LNS_set_prologue_end, 1);
    if ((r->flags & ROW_EPILOGUE) && h->opcode_base > DW_LNS_set_epilogue_begin)
        wb_n(w, DW_LNS_set_epilogue_begin, 1);
    uint64_t da = addr - g->st.addr;
    int64_t dl = r->line - g->st.line;
    uint64_t op = 256;
    if (dl >= h->line_base && dl < h->line_base + h->line_range && da < 256)
        op = (uint64_t)(dl - h->line_base) + (uint64_t)h->line_range * da + h->opcode_base;
    if (op <= 255) {
        wb_n(w, op, 1);
    } else {
        if (da != 0) {
            wb_n(w, DW_LNS_advance_pc, 1);
            wb_uleb(w, da);
        }
        if (dl != 0) {
            wb_n(w, DW_LNS_advance_line, 1);
            wb_sleb(w, dl);
        }
        wb_n(w, DW_LNS_copy, 1);
    }
    g->st.addr = addr;
    g->st.line = r->line;
    g->st.file = r->file;
    g->st.col = r->col;
    g->st.isa = r->isa;
    g->st.flags = (g->st.flags & ~ROW_STMT) | (r->flags & ROW_STMT);
}

/* Write the new program of the unit H from B's pieces. */
static void
line_generate(const lhdr_t *h, lbuf_t *b, wb_t *w, uint32_t *nseq)
{
    lgen_t g = { .h = h, .w = w };
    /* Code left in place: its old sequences, split where moved code was taken out. */
    uint64_t end = 0;
    size_t seq = 0;
    for (size_t i = 0; i < b->nkept; i++) {
        const prow_t *p = &b->kept[i];
        if (g.open && (p->seq != seq || p->addr != end))
            gen_end(&g, end);
        gen_row(&g, &b->rows[p->row], p->addr);
        seq = p->seq;
        end = p->end;
    }
    gen_end(&g, end);
    /* Moved code: by new address, one sequence per contiguous run. */
    qsort(b->moved, b->nmoved, sizeof(prow_t), cmp_prow);
    end = 0;
    for (size_t i = 0; i < b->nmoved; i++) {
        const prow_t *p = &b->moved[i];
        if (g.open && p->addr > end)
            gen_end(&g, end);
        int fresh = !g.open;
        gen_row(&g, &b->rows[p->row], p->addr);
        if (fresh || p->end > end)
            end = p->end;
    }
    gen_end(&g, end);
    *nseq = g.nseq;
}

static int
cmp_lunit(const void *a, const void *b)
{
    const lunit_t *x = a, *y = b;
    return x->old_off < y->old_off ? -1 : x->old_off > y->old_off;
}

/* Regenerate .debug_line: every unit, in order; units that cannot be rewritten or whose
 * code did not move keep their bytes. */
static int
line_rewrite(dctx_t *c)
{
    dsec_t *d = &c->s[S_LINE];
    lbuf_t b;
    int rc = 0;
    size_t off = 0;
    wb_t *w = &d->out;
    memset(&b, 0, sizeof(b));
    while (off < d->in_len && rc == 0) {
        lhdr_t h;
        int ok = line_header(d, off, &h);
        if (ok == 0 && h.end == 0) {
            /* Unknown length: the rest of the section is copied as it is. */
            wb_put(w, d->in + off, d->in_len - off);
            c->out->nline_units_kept++;
            break;
        }
        lunit_t *lu = realloc(c->lunits, (c->nlunits + 1) * sizeof(*lu));
        if (lu == NULL) {
            rc = QP_ENOMEM;
            break;
        }
        c->lunits = lu;
        c->lunits[c->nlunits++] = (lunit_t) { off, w->len };
        if (ok == 1 && lkeep_has(c, off))
            ok = 0;
        if (ok == 1 && (rc = line_rows(d, &h, &b)) < 0)
            break;
        ok = rc;
        if (ok == 1 && (rc = line_place(c, &b)) < 0)
            break;
        ok = ok == 1 ? rc : 0;
        rc = 0;
        if (ok != 1 || b.nmoved == 0) {
            if (ok != 1)
                c->out->nline_units_kept++;
            else
                c->out->nline_rows_kept += b.nkept;
            wb_put(w, d->in + off, h.end - off);
            off = h.end;
            continue;
        }
        size_t start = w->len;
        wb_n(w, 0, 4); /* unit_length, below */
        wb_put(w, d->in + off + 4, h.prog - off - 4);
        uint32_t nseq = 0;
        line_generate(&h, &b, w, &nseq);
        if (w->err)
            break;
        if (w->len - start - 4 >= 0xfffffff0u) {
            rc = QP_ERANGE;
            break;
        }
        put_n(w->p + start, w->len - start - 4, 4);
        c->out->nline_rows_moved += b.nmoved;
        c->out->nline_rows_kept += b.nkept;
        c->out->nline_seqs += nseq;
        c->out->nline_units_moved++;
        off = h.end;
    }
    free(b.rows);
    free(b.kept);
    free(b.moved);
    free(b.pc.v);
    if (rc == 0 && w->err)
        rc = QP_ENOMEM;
    if (rc == 0 && c->nlunits > 1)
        qsort(c->lunits, c->nlunits, sizeof(lunit_t), cmp_lunit);
    return rc;
}

/* The new offset of the line unit at old offset OFF, or -1 when no unit starts there. */
static int64_t
line_new_off(const dctx_t *c, uint64_t off)
{
    size_t lo = 0, hi = c->nlunits;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->lunits[mid].old_off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < c->nlunits && c->lunits[lo].old_off == off)
        return (int64_t)c->lunits[lo].new_off;
    return -1;
}

/*****************************************************************************
 * Abbreviations and DIEs
 */

typedef struct aattr {
    uint64_t name;          /* DW_AT_* */
    uint64_t form;          /* DW_FORM_* */
    int64_t value;          /* DW_FORM_implicit_const: the value */
} aattr_t;

typedef struct abbrev {
    uint64_t code;          /* abbreviation code */
    uint64_t tag;           /* DW_TAG_* */
    size_t first;           /* its first attribute in the table's attrs */
    size_t nattr;           /* how many */
    size_t pos;             /* offset of its entry in .debug_abbrev */
    uint8_t children;       /* DW_CHILDREN_yes */
} abbrev_t;

typedef struct atable {
    uint64_t off;           /* offset of the table in .debug_abbrev (+1; 0: none read) */
    size_t end;             /* offset past its terminating 0 */
    abbrev_t *ab;
    size_t nab, ab_cap;
    aattr_t *at;
    size_t nat, at_cap;
} atable_t;

/* Read the abbreviation table at OFF into T. 0 or QP_EFORMAT / QP_ENOMEM. */
static int
abbrev_read(const dsec_t *d, uint64_t off, atable_t *t)
{
    if (t->off == off + 1)
        return 0;
    t->off = 0;
    t->nab = t->nat = 0;
    if (off >= d->in_len)
        return QP_EFORMAT;
    rd_t r = { d->in, d->in_len, off, 0 };
    for (;;) {
        size_t pos = r.pos;
        uint64_t code = rd_uleb(&r);
        if (r.err)
            return QP_EFORMAT;
        if (code == 0)
            break;
        QP_CHECK(grow((void **)&t->ab, &t->ab_cap, t->nab, sizeof(abbrev_t)));
        abbrev_t *a = &t->ab[t->nab++];
        a->code = code;
        a->pos = pos;
        a->tag = rd_uleb(&r);
        a->children = (uint8_t)rd_n(&r, 1);
        a->first = t->nat;
        for (;;) {
            uint64_t name = rd_uleb(&r), form = rd_uleb(&r);
            if (r.err)
                return QP_EFORMAT;
            if (name == 0 && form == 0)
                break;
            int64_t value = 0;
            if (form == DW_FORM_implicit_const)
                value = rd_sleb(&r); /* the value lives here, not in the DIE */
            QP_CHECK(grow((void **)&t->at, &t->at_cap, t->nat, sizeof(aattr_t)));
            t->at[t->nat++] = (aattr_t) { name, form, value };
        }
        a->nattr = t->nat - a->first;
    }
    t->end = r.pos;
    t->off = off + 1;
    return 0;
}

static const abbrev_t *
abbrev_find(const atable_t *t, uint64_t code)
{
    /* Codes are usually 1, 2, 3, ... in order. */
    if (code >= 1 && code <= t->nab && t->ab[code - 1].code == code)
        return &t->ab[code - 1];
    for (size_t i = 0; i < t->nab; i++)
        if (t->ab[i].code == code)
            return &t->ab[i];
    return NULL;
}

/* Skip the value of FORM at R (32-bit DWARF, 8-byte addresses). 0, or -1 for a form this
 * reader does not know. */
static int
form_skip(rd_t *r, uint64_t form)
{
    switch (form) {
    case DW_FORM_flag_present:
    case DW_FORM_implicit_const: return 0;
    case DW_FORM_data1: case DW_FORM_ref1: case DW_FORM_flag: case DW_FORM_strx1:
    case DW_FORM_addrx1: rd_skip(r, 1); return 0;
    case DW_FORM_data2: case DW_FORM_ref2: case DW_FORM_strx2: case DW_FORM_addrx2:
        rd_skip(r, 2); return 0;
    case DW_FORM_strx3: case DW_FORM_addrx3: rd_skip(r, 3); return 0;
    case DW_FORM_data4: case DW_FORM_ref4: case DW_FORM_strx4: case DW_FORM_addrx4:
    case DW_FORM_ref_sup4: case DW_FORM_strp: case DW_FORM_ref_addr:
    case DW_FORM_sec_offset: case DW_FORM_strp_sup: case DW_FORM_line_strp:
    case DW_FORM_GNU_ref_alt: case DW_FORM_GNU_strp_alt: rd_skip(r, 4); return 0;
    case DW_FORM_data8: case DW_FORM_ref8: case DW_FORM_ref_sig8: case DW_FORM_ref_sup8:
    case DW_FORM_addr: rd_skip(r, 8); return 0;
    case DW_FORM_data16: rd_skip(r, 16); return 0;
    case DW_FORM_sdata: (void)rd_sleb(r); return 0;
    case DW_FORM_udata: case DW_FORM_ref_udata: case DW_FORM_strx: case DW_FORM_addrx:
    case DW_FORM_loclistx: case DW_FORM_rnglistx: case DW_FORM_GNU_addr_index:
    case DW_FORM_GNU_str_index: (void)rd_uleb(r); return 0;
    case DW_FORM_string:
        while (!r->err && rd_n(r, 1) != 0)
            ;
        return 0;
    case DW_FORM_block1: rd_skip(r, rd_n(r, 1)); return 0;
    case DW_FORM_block2: rd_skip(r, rd_n(r, 2)); return 0;
    case DW_FORM_block4: rd_skip(r, rd_n(r, 4)); return 0;
    case DW_FORM_block: case DW_FORM_exprloc: rd_skip(r, rd_uleb(r)); return 0;
    default: return -1;
    }
}

/* Where an attribute's value is. */
typedef struct aval {
    size_t pos;             /* offset of the value in the section (0: absent) */
    uint64_t form;          /* its form */
} aval_t;

/* The attributes of one DIE this file cares about. */
typedef struct die {
    uint64_t tag;
    aval_t low, high, ranges, stmt, entry, ret, macros, addr_base;
    int dwo;                /* names a split DWARF object (DW_AT_dwo_name, GNU too) */
    size_t code_pos;        /* offset of the DIE's abbreviation code */
    size_t code_len;        /* its length */
    const abbrev_t *ab;     /* its abbreviation */
} die_t;

/* Fixed-size constant forms that can be patched in place: their size, else 0. */
static size_t
const_size(uint64_t form)
{
    switch (form) {
    case DW_FORM_data1: return 1;
    case DW_FORM_data2: return 2;
    case DW_FORM_data4: return 4;
    case DW_FORM_data8: return 8;
    default: return 0;
    }
}

/*****************************************************************************
 * Patching DIEs in place
 */

/* The size of an address-index form's value at POS (ULEB: its byte count), else 0. */
static size_t
addrx_size(const dsec_t *d, uint64_t form, size_t pos)
{
    switch (form) {
    case DW_FORM_addrx1: return 1;
    case DW_FORM_addrx2: return 2;
    case DW_FORM_addrx3: return 3;
    case DW_FORM_addrx4: return 4;
    case DW_FORM_addrx: {
        size_t n = 1;
        while (pos + n - 1 < d->in_len && (d->in[pos + n - 1] & 0x80) && n < 9)
            n++;
        return n;
    }
    default: return 0;
    }
}

/* The address an attribute names. 1: read; 0: a form or an index this file cannot read. */
static int
addr_get(dctx_t *c, int sec, const aval_t *v, uint64_t *val)
{
    const dsec_t *d = &c->s[sec];
    if (v->form == DW_FORM_addr) {
        *val = get_n(d->out.p + v->pos, 8);
        return 1;
    }
    size_t n = addrx_size(d, v->form, v->pos);
    if (n == 0 || !c->have_addr_base)
        return 0;
    uint64_t idx;
    if (v->form == DW_FORM_addrx) {
        rd_t r = { d->in, d->in_len, v->pos, 0 };
        idx = rd_uleb(&r);
    } else {
        idx = get_n(d->in + v->pos, n);
    }
    if (idx >= c->addr_count)
        return 0;
    *val = get_n(c->s[S_ADDR].in + c->addr_base + 8 * idx, 8);
    return 1;
}

/*
 * Make an attribute name VAL. DW_FORM_addr is written in place. An address index gets a
 * new entry at the end of a copy of the unit's address table (unit_end writes it): the
 * old entries keep their values, since location lists, the CU's base address and
 * expressions may share them. 1: done; 0: the new index does not fit the field.
 */
static int
addr_put(dctx_t *c, int sec, const aval_t *v, uint64_t val)
{
    dsec_t *d = &c->s[sec];
    if (v->form == DW_FORM_addr) {
        put_n(d->out.p + v->pos, val, 8);
        return 1;
    }
    size_t n = addrx_size(d, v->form, v->pos);
    if (n == 0 || !c->have_addr_base || c->addr_base_pos == 0)
        return 0;
    if (2 * (c->nnaddr + 1) > c->nhash_cap) {
        /* Grow the hash of new entries (and rebuild it from naddr). */
        size_t cap = c->nhash_cap ? 2 * c->nhash_cap : 256;
        uint32_t *h = calloc(cap, sizeof(uint32_t));
        if (h == NULL)
            return 0;
        free(c->nhash);
        c->nhash = h;
        c->nhash_cap = cap;
        for (size_t i = 0; i < c->nnaddr; i++) {
            size_t j = (c->naddr[i] * 0x9e3779b97f4a7c15ull >> 20) & (cap - 1);
            while (h[j] != 0)
                j = (j + 1) & (cap - 1);
            h[j] = (uint32_t)i + 1;
        }
    }
    size_t j = (val * 0x9e3779b97f4a7c15ull >> 20) & (c->nhash_cap - 1);
    while (c->nhash[j] != 0 && c->naddr[c->nhash[j] - 1] != val)
        j = (j + 1) & (c->nhash_cap - 1);
    size_t k = c->nhash[j] != 0 ? c->nhash[j] - 1 : c->nnaddr;
    uint64_t idx = c->addr_count + k;
    unsigned bits = v->form == DW_FORM_addrx ? 7 * (unsigned)n : 8 * (unsigned)n;
    if (bits < 64 && idx >> bits != 0)
        return 0;
    if (k == c->nnaddr) {
        if (grow((void **)&c->naddr, &c->naddr_cap, c->nnaddr, sizeof(uint64_t)) < 0)
            return 0;
        c->naddr[c->nnaddr++] = val;
        c->nhash[j] = (uint32_t)c->nnaddr;
    }
    if (v->form == DW_FORM_addrx) {
        /* The same number of bytes: a padded ULEB128 reads the same. */
        for (size_t i = 0; i < n; i++)
            d->out.p[v->pos + i] = (uint8_t)(((idx >> (7 * i)) & 0x7f) | (i + 1 < n ? 0x80 : 0));
    } else {
        put_n(d->out.p + v->pos, idx, n);
    }
    return 1;
}

/* Map one address attribute in place with FN. */
static void
patch_addr(dctx_t *c, int sec, const aval_t *v, ed_map_fn fn)
{
    uint64_t old;
    if (v->pos == 0)
        return;
    if (!addr_get(c, sec, v, &old)) {
        c->out->ndie_addrx++;
        return;
    }
    uint64_t m = fn(c->map->arg, old);
    if (m == 0)
        return;
    if (addr_put(c, sec, v, m))
        c->out->ndie_moved++;
    else
        c->out->ndie_stale++;
}

/* The old range [*LO, *HI) of a DIE with low_pc and high_pc. 1: read; 0: forms this file
 * does not patch (counted when the code may have moved). */
static int
die_range(dctx_t *c, int sec, const die_t *e, uint64_t *lo, uint64_t *hi)
{
    const uint8_t *b = c->s[sec].out.p;
    if (!addr_get(c, sec, &e->low, lo)) {
        c->out->ndie_addrx++;
        return 0;
    }
    if (e->high.form == DW_FORM_addr)
        *hi = get_n(b + e->high.pos, 8);
    else if (const_size(e->high.form))
        *hi = *lo + get_n(b + e->high.pos, const_size(e->high.form));
    else
        return 0;
    return *hi > *lo;
}

static int cr_read_list(dctx_t *c, unsigned version, uint64_t off, uint64_t base,
                        int have_base, pieces_t *pc, int *moved);
static int cr_write_list(dctx_t *c, unsigned version, uint64_t *off);

/*
 * A DIE with DW_AT_ranges (a function with a cold part, inlined code in several pieces):
 * a new list with each range cut into pieces, in the old order (gdb takes the first
 * range's start as the entry of a block without DW_AT_entry_pc), appended to the ranges
 * section; the offset is patched in place. DW_FORM_rnglistx stays old.
 */
static int
die_ranges(dctx_t *c, int sec, const die_t *e, pieces_t *pc)
{
    if (e->ranges.form != DW_FORM_sec_offset) {
        c->out->ndie_ranges++;
        return 0;
    }
    int moved = 0;
    c->ncr = 0;
    c->drop_padding = 1;
    uint64_t off = get_n(c->s[sec].out.p + e->ranges.pos, 4);
    int ok = cr_read_list(c, c->version, off, c->cu_base, c->have_cu_base, pc, &moved);
    c->drop_padding = 0;
    QP_CHECK(ok);
    if (!ok) {
        c->out->ndie_ranges++;
        return 0;
    }
    if (!moved)
        return 0;
    QP_CHECK(cr_write_list(c, c->version, &off));
    put_n(c->s[sec].out.p + e->ranges.pos, off, 4);
    c->out->ndie_moved++;
    return 0;
}

/* A DIE of code: map low_pc/high_pc when the range is one run of new code, and the
 * entry and return addresses it names. */
static int
die_patch(dctx_t *c, int sec, const die_t *e, pieces_t *pc)
{
    uint8_t *b = c->s[sec].out.p;
    uint64_t lo, hi;
    if (e->tag == DW_TAG_GNU_call_site) {
        patch_addr(c, sec, &e->low, c->map->map_return); /* its low_pc is the return pc */
    } else if (e->low.pos != 0 && e->high.pos == 0) {
        patch_addr(c, sec, &e->low, c->map->map); /* labels */
    } else if (e->low.pos != 0 && die_range(c, sec, e, &lo, &hi)) {
        QP_CHECK(cut(c, lo, hi, pc));
        int moved = 0;
        for (size_t i = 0; i < pc->n; i++)
            moved |= pc->v[i].new_ != 0;
        if (moved && pc->n == 1) {
            const piece_t *p = &pc->v[0];
            size_t n = const_size(e->high.form);
            if ((n != 0 && n < 8 && p->nlen >> (8 * n) != 0)
                || !addr_put(c, sec, &e->low, p->new_)) {
                c->out->ndie_stale++; /* the new length or index does not fit the form */
            } else {
                if (e->high.form == DW_FORM_addr)
                    put_n(b + e->high.pos, p->new_ + p->nlen, 8);
                else
                    put_n(b + e->high.pos, p->nlen, n);
                c->out->ndie_moved++;
            }
        } else if (moved) {
            c->out->ndie_stale++; /* partly moved, or split in the new code */
        }
    }
    if (e->entry.pos != 0)
        patch_addr(c, sec, &e->entry, c->map->map); /* constant forms: offsets, kept */
    if (e->ret.pos != 0)
        patch_addr(c, sec, &e->ret, c->map->map_return);
    if (e->ranges.pos != 0)
        QP_CHECK(die_ranges(c, sec, e, pc));
    return 0;
}

/* The end of a unit: its copy of the address table with the new entries, if any. */
static int
addr_unit_end(dctx_t *c, int sec)
{
    if (c->nnaddr == 0)
        return 0;
    QP_CHECK(sec_copy(c, S_ADDR));
    wb_t *w = &c->s[S_ADDR].out;
    uint64_t n = c->addr_count + c->nnaddr;
    wb_n(w, 4 + 8 * n, 4);
    wb_n(w, 5, 2);
    wb_n(w, 8, 1);
    wb_n(w, 0, 1);
    size_t base = w->len;
    wb_put(w, c->s[S_ADDR].in + c->addr_base, 8 * c->addr_count);
    for (size_t i = 0; i < c->nnaddr; i++)
        wb_n(w, c->naddr[i], 8);
    if (w->err)
        return QP_ENOMEM;
    if (w->len > UINT32_MAX)
        return QP_ERANGE;
    put_n(c->s[sec].out.p + c->addr_base_pos, base, 4);
    c->out->naddr_added += (uint32_t)c->nnaddr;
    c->nnaddr = 0;
    if (c->nhash != NULL)
        memset(c->nhash, 0, c->nhash_cap * sizeof(uint32_t));
    return 0;
}

/* The unit DIE's DW_AT_addr_base: where its address table is. */
static void
addr_unit_start(dctx_t *c, int sec, const aval_t *v)
{
    c->have_addr_base = 0;
    c->addr_base_pos = 0;
    if (c->nnaddr != 0 && c->nhash != NULL)
        memset(c->nhash, 0, c->nhash_cap * sizeof(uint32_t));
    c->nnaddr = 0;
    const dsec_t *a = &c->s[S_ADDR];
    if (v->pos == 0 || v->form != DW_FORM_sec_offset || a->in == NULL)
        return;
    uint64_t base = get_n(c->s[sec].in + v->pos, 4);
    /* The contribution's header is just before the first entry. */
    if (base < 8 || base > a->in_len)
        return;
    uint64_t len = get_n(a->in + base - 8, 4);
    if (get_n(a->in + base - 4, 2) != 5 || a->in[base - 2] != 8 || a->in[base - 1] != 0
        || len < 4 || (len - 4) % 8 != 0 || len - 4 > a->in_len - base)
        return;
    c->addr_base = base;
    c->addr_count = (len - 4) / 8;
    c->have_addr_base = 1;
    c->addr_base_pos = v->pos;
}

/*****************************************************************************
 * Compilation unit ranges: the CU must cover its new code, or a debugger looking for the
 * CU of a new PC (gdb: the CU DIE's low_pc/high_pc or DW_AT_ranges) finds none.
 */

static int
cmp_crange(const void *a, const void *b)
{
    const crange_t *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return x->hi < y->hi ? -1 : x->hi > y->hi;
}

/* Add old range [LO, HI) to c->cr cut into pieces: the kept parts, then the new code. */
static int
cr_add(dctx_t *c, uint64_t lo, uint64_t hi, pieces_t *pc, int *moved)
{
    QP_CHECK(cut(c, lo, hi, pc));
    int any = 0;
    for (size_t i = 0; i < pc->n && c->drop_padding; i++)
        any |= pc->v[i].new_ != 0;
    for (size_t i = 0; i < pc->n; i++) {
        const piece_t *p = &pc->v[i];
        crange_t r = p->new_ ? (crange_t) { p->new_, p->new_ + p->nlen }
                             : (crange_t) { p->old, p->old + p->olen };
        if (r.hi <= r.lo || (any && p->new_ == 0))
            continue; /* the padding after a moved procedure (see line_place) */
        *moved |= p->new_ != 0;
        QP_CHECK(grow((void **)&c->cr, &c->cr_cap, c->ncr, sizeof(crange_t)));
        c->cr[c->ncr++] = r;
    }
    return 0;
}

/* Sort and merge c->cr. */
static void
cr_merge(dctx_t *c)
{
    size_t n = 0;
    qsort(c->cr, c->ncr, sizeof(crange_t), cmp_crange);
    for (size_t i = 0; i < c->ncr; i++) {
        if (n > 0 && c->cr[i].lo <= c->cr[n - 1].hi) {
            if (c->cr[i].hi > c->cr[n - 1].hi)
                c->cr[n - 1].hi = c->cr[i].hi;
            continue;
        }
        c->cr[n++] = c->cr[i];
    }
    c->ncr = n;
}

/* Read the range list at OFF (version VERSION, base address BASE) into c->cr, cut.
 * 1: read; 0: a list this file does not rewrite. */
static int
cr_read_list(dctx_t *c, unsigned version, uint64_t off, uint64_t base, int have_base,
             pieces_t *pc, int *moved)
{
    const dsec_t *d = &c->s[version >= 5 ? S_RNGLISTS : S_RANGES];
    rd_t r = { d->in, d->in_len, off, 0 };
    if (d->in == NULL || off >= d->in_len)
        return 0;
    for (;;) {
        uint64_t lo, hi;
        if (version < 5) {
            lo = rd_n(&r, 8);
            hi = rd_n(&r, 8);
            if (r.err)
                return 0;
            if (lo == 0 && hi == 0)
                return 1;
            if (lo == UINT64_MAX) {
                base = hi;
                have_base = 1;
                continue;
            }
            if (!have_base)
                return 0;
            lo += base;
            hi += base;
        } else {
            uint8_t k = (uint8_t)rd_n(&r, 1);
            if (k == 0)
                return r.err ? 0 : 1;
            if (k == 4) { /* DW_RLE_offset_pair */
                lo = rd_uleb(&r);
                hi = rd_uleb(&r);
                if (!have_base)
                    return 0;
                lo += base;
                hi += base;
            } else if (k == 5) { /* DW_RLE_base_address */
                base = rd_n(&r, 8);
                have_base = 1;
                continue;
            } else if (k == 6) { /* DW_RLE_start_end */
                lo = rd_n(&r, 8);
                hi = rd_n(&r, 8);
            } else if (k == DW_RLE_start_length) {
                lo = rd_n(&r, 8);
                hi = lo + rd_uleb(&r);
            } else {
                return 0; /* indexed forms through .debug_addr */
            }
            if (r.err)
                return 0;
        }
        if (hi > lo)
            QP_CHECK(cr_add(c, lo, hi, pc, moved));
    }
}

/* Append c->cr as a new list to the ranges section of VERSION; *OFF gets its offset. */
static int
cr_write_list(dctx_t *c, unsigned version, uint64_t *off)
{
    int s = version >= 5 ? S_RNGLISTS : S_RANGES;
    QP_CHECK(sec_copy(c, s));
    wb_t *w = &c->s[s].out;
    if (version >= 5 && c->out->nrnglists_added == 0) {
        /* One new contribution for all new lists: its header says the address size. */
        c->rng_hdr = w->len;
        wb_n(w, 0, 4);
        wb_n(w, 5, 2);
        wb_n(w, 8, 1);
        wb_n(w, 0, 1);
        wb_n(w, 0, 4);
    }
    *off = w->len;
    if (version >= 5) {
        for (size_t i = 0; i < c->ncr; i++) {
            wb_n(w, DW_RLE_start_length, 1);
            wb_n(w, c->cr[i].lo, 8);
            wb_uleb(w, c->cr[i].hi - c->cr[i].lo);
        }
        wb_n(w, DW_RLE_end_of_list, 1);
        if (!w->err)
            put_n(w->p + c->rng_hdr, w->len - c->rng_hdr - 4, 4);
    } else {
        wb_n(w, UINT64_MAX, 8); /* base address 0: the pairs are absolute */
        wb_n(w, 0, 8);
        for (size_t i = 0; i < c->ncr; i++) {
            wb_n(w, c->cr[i].lo, 8);
            wb_n(w, c->cr[i].hi, 8);
        }
        wb_n(w, 0, 8);
        wb_n(w, 0, 8);
    }
    if (w->err)
        return QP_ENOMEM;
    if (*off > UINT32_MAX || w->len > UINT32_MAX)
        return QP_ERANGE;
    c->out->nrnglists_added++;
    return 0;
}

/*
 * A CU DIE with low_pc and high_pc gets DW_AT_ranges instead of high_pc: a new copy of
 * its abbreviation table, appended to .debug_abbrev, where the CU's abbreviation has
 * (DW_AT_ranges, DW_FORM_sec_offset) in high_pc's place - and when high_pc took 8 bytes,
 * (DW_AT_identifier_case, DW_FORM_data4) with DW_ID_case_sensitive (0, what C means
 * anyway) after it to fill the other 4, so that no DIE moves. low_pc stays: it is the
 * base address of the CU's location lists.
 */
static int
cu_new_abbrev(dctx_t *c, const atable_t *t, const die_t *e, int filler, uint64_t *off)
{
    const dsec_t *in = &c->s[S_ABBREV];
    QP_CHECK(sec_copy(c, S_ABBREV));
    wb_t *w = &c->s[S_ABBREV].out;
    *off = w->len;
    for (size_t i = 0; i < t->nab; i++) {
        const abbrev_t *a = &t->ab[i];
        size_t end = i + 1 < t->nab ? t->ab[i + 1].pos : t->end - 1;
        if (a != e->ab) {
            wb_put(w, in->in + a->pos, end - a->pos);
            continue;
        }
        wb_uleb(w, a->code);
        wb_uleb(w, a->tag);
        wb_n(w, a->children, 1);
        for (size_t k = 0; k < a->nattr; k++) {
            const aattr_t *at = &t->at[a->first + k];
            if (at->name == DW_AT_high_pc) {
                wb_uleb(w, DW_AT_ranges);
                wb_uleb(w, DW_FORM_sec_offset);
                if (filler) {
                    wb_uleb(w, DW_AT_identifier_case);
                    wb_uleb(w, DW_FORM_data4);
                }
                continue;
            }
            wb_uleb(w, at->name);
            wb_uleb(w, at->form);
            if (at->form == DW_FORM_implicit_const)
                wb_sleb(w, at->value);
        }
        wb_n(w, 0, 2);
    }
    wb_n(w, 0, 1);
    if (w->err)
        return QP_ENOMEM;
    return w->len > UINT32_MAX ? QP_ERANGE : 0;
}

/* Make the CU DIE E of a unit (version VERSION, header's abbrev offset at ABBREV_POS)
 * cover its new code. */
static int
cu_ranges(dctx_t *c, int sec, unsigned version, size_t abbrev_pos, const atable_t *t,
          const die_t *e, pieces_t *pc)
{
    uint8_t *b = c->s[sec].out.p;
    int moved = 0;
    c->ncr = 0;
    uint64_t base = 0;
    int have_base = e->low.pos != 0 && addr_get(c, sec, &e->low, &base);
    if (e->ranges.pos != 0) {
        if (e->ranges.form != DW_FORM_sec_offset) {
            c->out->ncu_stale++;
            return 0;
        }
        uint64_t off = get_n(b + e->ranges.pos, 4);
        int ok = cr_read_list(c, version, off, base, have_base, pc, &moved);
        if (ok < 0)
            return ok;
        if (!ok) {
            c->out->ncu_stale++;
            return 0;
        }
        if (!moved)
            return 0;
        cr_merge(c);
        QP_CHECK(cr_write_list(c, version, &off));
        b = c->s[sec].out.p;
        put_n(b + e->ranges.pos, off, 4);
        c->out->ncu_moved++;
        return 0;
    }
    if (e->low.pos == 0 || e->high.pos == 0)
        return 0; /* a CU without code */
    uint64_t lo, hi;
    if (!have_base || !die_range(c, sec, e, &lo, &hi))
        return 0;
    QP_CHECK(cr_add(c, lo, hi, pc, &moved));
    if (!moved)
        return 0;
    size_t hsize = e->high.form == DW_FORM_addr ? 8 : const_size(e->high.form);
    int has_case = 0;
    for (size_t k = 0; k < e->ab->nattr; k++)
        has_case |= t->at[e->ab->first + k].name == DW_AT_identifier_case;
    if ((hsize != 4 && hsize != 8) || (hsize == 8 && has_case)) {
        c->out->ncu_stale++;
        return 0;
    }
    cr_merge(c);
    uint64_t list, abbrev;
    QP_CHECK(cr_write_list(c, version, &list));
    QP_CHECK(cu_new_abbrev(c, t, e, hsize == 8, &abbrev));
    b = c->s[sec].out.p;
    put_n(b + e->high.pos, list, 4);
    if (hsize == 8)
        put_n(b + e->high.pos + 4, 0, 4); /* DW_ID_case_sensitive */
    put_n(b + abbrev_pos, abbrev, 4);
    c->out->ncu_moved++;
    return 0;
}

/*****************************************************************************
 * Units of .debug_info and .debug_types
 */

/* A .debug_macro unit at OFF: its header may name the unit's line table. */
static int
macro_ref(dctx_t *c, uint64_t off)
{
    const dsec_t *d = &c->s[S_MACRO];
    if (d->in == NULL || off > d->in_len || d->in_len - off < 3) {
        c->line_unsafe = 1;
        return 0;
    }
    uint8_t flags = d->in[off + 2];
    if (!(flags & 2))
        return 0;
    if ((flags & 1) || d->in_len - off < 7) {
        c->line_unsafe = 1; /* 64-bit offsets */
        return 0;
    }
    return lref_add(c, S_MACRO, off + 3);
}

/* Walk the unit at OFF of section SEC; *NEXT gets the offset of the next unit (0: none
 * can be found). Units this file does not handle are counted and keep their bytes. */
static int
unit_walk(dctx_t *c, int sec, size_t off, atable_t *t, pieces_t *pc, size_t *next)
{
    const dsec_t *d = &c->s[sec];
    rd_t r = { d->in, d->in_len, off, 0 };
    *next = 0;
    uint64_t len = rd_n(&r, 4);
    if (r.err || len >= 0xfffffff0u || len > r.len - r.pos) {
        c->out->nunits_skipped++; /* 64-bit DWARF or truncated: nothing after it is read */
        c->line_unsafe = 1;
        return ukeep_add(c, sec, off);
    }
    size_t end = r.pos + len;
    *next = end;
    r.len = end;
    unsigned version = (unsigned)rd_n(&r, 2);
    uint8_t ut = DW_UT_compile;
    uint64_t aoff = 0;
    size_t abbrev_pos = 0;
    uint8_t asz = 0;
    if (version == 5) {
        ut = (uint8_t)rd_n(&r, 1);
        asz = (uint8_t)rd_n(&r, 1);
        abbrev_pos = r.pos;
        aoff = rd_n(&r, 4);
        if (ut == DW_UT_type || ut == DW_UT_split_type)
            rd_skip(&r, 12);
        else if (ut == DW_UT_skeleton || ut == DW_UT_split_compile)
            rd_skip(&r, 8);
    } else if (version == 4) {
        abbrev_pos = r.pos;
        aoff = rd_n(&r, 4);
        asz = (uint8_t)rd_n(&r, 1);
        if (sec == S_TYPES)
            rd_skip(&r, 12);
    }
    if (r.err || (version != 4 && version != 5) || asz != 8 || ut == DW_UT_split_compile
        || ut == DW_UT_split_type || abbrev_read(&c->s[S_ABBREV], aoff, t) < 0) {
        /* DWARF 2/3, other address sizes: the unit keeps its bytes. If it names a line
         * table, that table must not move. */
        c->out->nunits_skipped++;
        c->line_unsafe = 1;
        return ukeep_add(c, sec, off);
    }
    int depth = 0, first = 1;
    while (r.pos < end) {
        die_t e;
        memset(&e, 0, sizeof(e));
        e.code_pos = r.pos;
        uint64_t code = rd_uleb(&r);
        e.code_len = r.pos - e.code_pos;
        if (r.err)
            break;
        if (code == 0) {
            if (--depth < 0 && !first)
                break; /* padding after the CU's children */
            continue;
        }
        const abbrev_t *a = abbrev_find(t, code);
        if (a == NULL)
            break;
        e.ab = a;
        e.tag = a->tag;
        for (size_t k = 0; k < a->nattr && !r.err; k++) {
            uint64_t form = t->at[a->first + k].form, name = t->at[a->first + k].name;
            while (form == DW_FORM_indirect && !r.err)
                form = rd_uleb(&r);
            aval_t v = { r.pos, form };
            if (form_skip(&r, form) < 0) {
                r.err = 1;
                break;
            }
            switch (name) {
            case DW_AT_low_pc: e.low = v; break;
            case DW_AT_high_pc: e.high = v; break;
            case DW_AT_ranges: e.ranges = v; break;
            case DW_AT_stmt_list: e.stmt = v; break;
            case DW_AT_entry_pc: e.entry = v; break;
            case DW_AT_call_return_pc: e.ret = v; break;
            case DW_AT_macros: case DW_AT_GNU_macros: e.macros = v; break;
            case DW_AT_addr_base: e.addr_base = v; break;
            case DW_AT_dwo_name: case DW_AT_GNU_dwo_name: case DW_AT_GNU_dwo_id: e.dwo = 1; break;
            default: break;
            }
        }
        if (r.err)
            break;
        if (first && (ut == DW_UT_skeleton || e.dwo)) {
            /* Split DWARF: the DIEs are in a .dwo file, with addresses in this file's
             * .debug_addr. The unit keeps everything, its line table included. */
            c->out->nunits_skipped++;
            if (e.stmt.pos != 0 && e.stmt.form != DW_FORM_sec_offset
                && e.stmt.form != DW_FORM_data4)
                c->line_unsafe = 1;
            else if (e.stmt.pos != 0)
                QP_CHECK(lkeep_add(c, get_n(d->in + e.stmt.pos, 4)));
            return ukeep_add(c, sec, off);
        }
        if (first) {
            /* The unit DIE: its line table and macros, then its ranges. */
            if (e.stmt.pos != 0) {
                if (e.stmt.form != DW_FORM_sec_offset && e.stmt.form != DW_FORM_data4)
                    c->line_unsafe = 1;
                else
                    QP_CHECK(lref_add(c, sec, e.stmt.pos));
            }
            if (e.macros.pos != 0 && e.macros.form == DW_FORM_sec_offset)
                QP_CHECK(macro_ref(c, get_n(d->in + e.macros.pos, 4)));
            addr_unit_start(c, sec, &e.addr_base);
            c->version = version;
            c->have_cu_base = e.low.pos != 0 && addr_get(c, sec, &e.low, &c->cu_base);
            if (sec == S_INFO && (e.tag == DW_TAG_compile_unit || e.tag == 0x3c))
                QP_CHECK(cu_ranges(c, sec, version, abbrev_pos, t, &e, pc));
            first = 0;
        } else if (e.low.pos != 0 || e.entry.pos != 0 || e.ret.pos != 0
                   || e.ranges.pos != 0) {
            QP_CHECK(die_patch(c, sec, &e, pc));
        }
        if (a->children)
            depth++;
    }
    if (!first)
        QP_CHECK(addr_unit_end(c, sec));
    if (first) {
        c->out->nunits_skipped++;
        c->line_unsafe = 1;
        QP_CHECK(ukeep_add(c, sec, off));
    } else if (r.err || (r.pos < end && depth >= 0)) {
        c->out->nunits_partial++; /* the DIEs before the unknown one were done */
    }
    return 0;
}

/*****************************************************************************
 * .debug_aranges
 */

/* Regenerate .debug_aranges: each set's tuples cut into kept and moved pieces. */
static int
aranges_rewrite(dctx_t *c, pieces_t *pc)
{
    const dsec_t *d = &c->s[S_ARANGES];
    wb_t *w = &c->s[S_ARANGES].out;
    size_t off = 0;
    while (off < d->in_len) {
        rd_t r = { d->in, d->in_len, off, 0 };
        uint64_t len = rd_n(&r, 4);
        if (r.err || len >= 0xfffffff0u || len > r.len - r.pos) {
            wb_put(w, d->in + off, d->in_len - off); /* the rest as it is */
            c->out->naranges_kept++;
            break;
        }
        size_t end = r.pos + len;
        r.len = end;
        unsigned version = (unsigned)rd_n(&r, 2);
        uint64_t info = rd_n(&r, 4);
        uint8_t asz = (uint8_t)rd_n(&r, 1), ssz = (uint8_t)rd_n(&r, 1);
        r.pos = off + 16; /* tuples start at a multiple of 16 */
        int moved = 0, keep = 0;
        c->ncr = 0;
        for (size_t i = 0; i < c->nukeep; i++)
            keep |= c->ukeep[i] == info; /* its unit kept its old ranges too */
        if (version == 2 && asz == 8 && ssz == 0 && !r.err && !keep) {
            for (;;) {
                uint64_t lo = rd_n(&r, 8), n = rd_n(&r, 8);
                if (r.err || (lo == 0 && n == 0))
                    break;
                if (n != 0)
                    QP_CHECK(cr_add(c, lo, lo + n, pc, &moved));
            }
        }
        if (r.err || !moved) {
            if (r.err)
                c->out->naranges_kept++;
            wb_put(w, d->in + off, end - off);
            off = end;
            continue;
        }
        cr_merge(c);
        size_t start = w->len;
        wb_n(w, 0, 4);
        wb_n(w, 2, 2);
        wb_n(w, info, 4);
        wb_n(w, 8, 1);
        wb_n(w, 0, 1);
        wb_n(w, 0, 4);
        for (size_t i = 0; i < c->ncr; i++) {
            wb_n(w, c->cr[i].lo, 8);
            wb_n(w, c->cr[i].hi - c->cr[i].lo, 8);
        }
        wb_n(w, 0, 8);
        wb_n(w, 0, 8);
        if (w->err)
            return QP_ENOMEM;
        put_n(w->p + start, w->len - start - 4, 4);
        c->out->naranges_moved++;
        off = end;
    }
    return w->err ? QP_ENOMEM : 0;
}

/*****************************************************************************
 * Public
 */

static int
build(dctx_t *c, const cfg_image_t *img)
{
    for (size_t i = 0; i < img->nsections; i++) {
        const cfg_section_t *s = &img->sections[i];
        for (int k = 0; k < S_N; k++) {
            if (strcmp(s->name, sec_names[k]) != 0 || (s->flags & CFG_SEC_ALLOC))
                continue;
            if (s->flags & CFG_SEC_COMPRESSED) {
                c->out->ncompressed++;
                return 0; /* nothing is read, nothing changes */
            }
            if (s->bytes != NULL && c->s[k].in == NULL) {
                c->s[k].in = s->bytes;
                c->s[k].in_len = s->size;
            }
        }
    }
    if (c->s[S_INFO].in == NULL || c->s[S_ABBREV].in == NULL)
        return 0;
    pieces_t pc = { 0 };
    atable_t t;
    memset(&t, 0, sizeof(t));
    int rc = 0;
    rc = sec_copy(c, S_INFO);
    if (rc == 0 && c->s[S_TYPES].in != NULL)
        rc = sec_copy(c, S_TYPES);
    for (int sec = S_INFO; sec <= S_TYPES && rc == 0; sec++) {
        size_t off = 0, next;
        while (rc == 0 && c->s[sec].in != NULL && off < c->s[sec].in_len) {
            rc = unit_walk(c, sec, off, &t, &pc, &next);
            if (next == 0)
                break;
            off = next;
        }
    }
    /* After the units: they say which line tables must stay as they are. */
    if (rc == 0 && c->s[S_LINE].in != NULL)
        rc = line_rewrite(c);
    if (rc == 0 && c->s[S_ARANGES].in != NULL)
        rc = aranges_rewrite(c, &pc);
    free(pc.v);
    free(t.ab);
    free(t.at);
    QP_CHECK(rc);
    /* The line units' new offsets, or .debug_line as it was. */
    int moved = c->s[S_LINE].out.p != NULL && c->s[S_LINE].out.len != c->s[S_LINE].in_len;
    for (size_t i = 0; i < c->nlunits && !moved; i++)
        moved = c->lunits[i].old_off != c->lunits[i].new_off;
    for (size_t i = 0; i < c->nlrefs && moved && !c->line_unsafe; i++) {
        const lref_t *f = &c->lrefs[i];
        if (line_new_off(c, get_n(c->s[f->sec].in + f->pos, 4)) < 0)
            c->line_unsafe = 1;
    }
    if (c->line_unsafe && c->s[S_LINE].out.p != NULL) {
        free(c->s[S_LINE].out.p);
        memset(&c->s[S_LINE].out, 0, sizeof(wb_t));
        c->out->nline_rows_moved = 0;
        c->out->nline_units_moved = 0;
        c->out->nline_seqs = 0;
        c->out->line_kept = 1;
        return 0;
    }
    for (size_t i = 0; i < c->nlrefs && moved; i++) {
        const lref_t *f = &c->lrefs[i];
        QP_CHECK(sec_copy(c, f->sec));
        int64_t n = line_new_off(c, get_n(c->s[f->sec].in + f->pos, 4));
        if (n > UINT32_MAX)
            return QP_ERANGE;
        put_n(c->s[f->sec].out.p + f->pos, (uint64_t)n, 4);
    }
    return 0;
}

int
ed_dwarf_build(const cfg_image_t *img, const ed_dwarf_map_t *map, ed_dwarf_out_t *out)
{
    if (img == NULL || map == NULL || map->map == NULL || map->map_return == NULL
        || map->pieces == NULL || out == NULL)
        return QP_EINVAL;
    memset(out, 0, sizeof(*out));
    dctx_t c;
    memset(&c, 0, sizeof(c));
    c.map = map;
    c.out = out;
    for (int k = 0; k < S_N; k++)
        c.s[k].name = sec_names[k];
    int rc = build(&c, img);
    for (int k = 0; k < S_N; k++) {
        dsec_t *d = &c.s[k];
        if (rc == 0 && d->out.p != NULL
            && (d->out.len != d->in_len || memcmp(d->out.p, d->in, d->in_len) != 0)) {
            out->secs[out->nsecs++] = (ed_dwarf_sec_t) { d->name, d->out.p, d->out.len };
            continue;
        }
        free(d->out.p);
    }
    free(c.lunits);
    free(c.lrefs);
    free(c.cr);
    free(c.naddr);
    free(c.nhash);
    free(c.lkeep);
    free(c.ukeep);
    if (rc < 0)
        ed_dwarf_out_free(out);
    return rc;
}

void
ed_dwarf_out_free(ed_dwarf_out_t *out)
{
    if (out == NULL)
        return;
    for (size_t i = 0; i < out->nsecs; i++)
        free(out->secs[i].data);
    out->nsecs = 0;
}
