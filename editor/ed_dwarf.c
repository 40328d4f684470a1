/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * DWARF debug information for relocated code. The input's .debug_* sections name the old
 * addresses; this file makes new contents for the few sections that hold code addresses,
 * so that a debugger finds relocated code by file:line, by function and by PC.
 *
 * .debug_line: every line program is regenerated (ed_dwarf_line.c).
 *
 * .debug_info is patched in place, never resized: DW_AT_stmt_list of every unit (the
 * line units moved); DW_AT_low_pc and DW_AT_high_pc of subprograms, lexical blocks,
 * inlined subroutines and labels whose range is one run of moved code; DW_AT_entry_pc;
 * the return addresses of call sites; DW_AT_ranges (a new list, see die_ranges). The CU
 * DIE's low_pc/high_pc pair becomes low_pc + DW_AT_ranges through a new abbreviation
 * (see cu_ranges), so that the CU covers its new code as well: gdb looks for the CU of a
 * PC in the CU DIEs' ranges.
 *
 * .debug_abbrev gets the new CU abbreviations appended; .debug_rnglists (DWARF 5) or
 * .debug_ranges (DWARF 4) the new range lists, the section being created when absent.
 *
 * .debug_addr (DW_FORM_addrx, clang's DWARF 5): a unit whose DIEs need new addresses gets
 * a copy of its address table with new entries after the old ones, and its
 * DW_AT_addr_base names the copy. Old entries never change: location lists, the CU's
 * base address and expressions may share them.
 *
 * .debug_aranges is regenerated, each CU's tuples cut into kept and moved pieces;
 * .debug_macro headers name the line units' new offsets.
 *
 * What stays old (and is then simply not found at new PCs - never a wrong answer):
 * location lists (a variable shows as <optimized out> in moved code unless its location
 * is a single expression), low_pc/high_pc ranges that do not map to one contiguous run
 * of new code, DW_FORM_addrx addresses whose index field cannot hold a new entry's
 * index, and everything inside a DIE whose range stays old. They are counted (--verbose).
 * Units this reader does not handle - DWARF 2/3 and 64-bit DWARF units, split DWARF,
 * compressed sections - keep their bytes; when a line unit cannot be found from its CU,
 * .debug_line is left as it was.
 *
 * Formats: DWARF 4 and DWARF 5 (sections 6.1.2 aranges, 6.2 line tables, 7.5 unit
 * headers and forms, 7.25 range lists).
 */
#include "editor/ed_dwarf_priv.h"

static const char *const sec_names[S_N] = {
    ".debug_info",
    ".debug_types",
    ".debug_abbrev",
    ".debug_line",
    ".debug_aranges",
    ".debug_rnglists",
    ".debug_ranges",
    ".debug_macro",
    ".debug_addr",
};

static int
lref_add(dctx_t *c, int sec, size_t pos)
{
    QP_CHECK(grow((void **)&c->lrefs, &c->lrefs_cap, c->nlrefs, sizeof(lref_t)));
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

int
ed_dwarf_lkeep_has(const dctx_t *c, uint64_t off)
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

static int
on_piece(void *arg, uint64_t old, uint64_t olen, uint64_t new_, uint64_t nlen)
{
    pieces_t *p = arg;
    QP_CHECK(grow((void **)&p->v, &p->cap, p->n, sizeof(piece_t)));
    p->v[p->n++] = (piece_t) { old, olen, new_, nlen };
    return 0;
}

int
ed_dwarf_cut(dctx_t *c, uint64_t lo, uint64_t hi, pieces_t *p)
{
    p->n = 0;
    if (hi <= lo)
        return 0;
    return c->map->pieces(c->map->arg, lo, hi, on_piece, p);
}

/*****************************************************************************
 * Abbreviations and DIEs
 */

typedef struct aattr {
    uint64_t name; /* DW_AT_* */
    uint64_t form; /* DW_FORM_* */
    int64_t value; /* DW_FORM_implicit_const: the value */
} aattr_t;

typedef struct abbrev {
    uint64_t code;    /* abbreviation code */
    uint64_t tag;     /* DW_TAG_* */
    size_t first;     /* its first attribute in the table's attrs */
    size_t nattr;     /* how many */
    size_t pos;       /* offset of its entry in .debug_abbrev */
    uint8_t children; /* DW_CHILDREN_yes */
} abbrev_t;

typedef struct atable {
    uint64_t off;       /* offset of the table in .debug_abbrev (+1; 0: none read) */
    size_t end;         /* offset past its terminating 0 */
    abbrev_t *ab;       /* the abbreviations */
    size_t nab, ab_cap; /* their number, room */
    aattr_t *at;        /* their attributes */
    size_t nat, at_cap; /* their number, room */
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
    case DW_FORM_data1:
    case DW_FORM_ref1:
    case DW_FORM_flag:
    case DW_FORM_strx1:
    case DW_FORM_addrx1: rd_skip(r, 1); return 0;
    case DW_FORM_data2:
    case DW_FORM_ref2:
    case DW_FORM_strx2:
    case DW_FORM_addrx2: rd_skip(r, 2); return 0;
    case DW_FORM_strx3:
    case DW_FORM_addrx3: rd_skip(r, 3); return 0;
    case DW_FORM_data4:
    case DW_FORM_ref4:
    case DW_FORM_strx4:
    case DW_FORM_addrx4:
    case DW_FORM_ref_sup4:
    case DW_FORM_strp:
    case DW_FORM_ref_addr:
    case DW_FORM_sec_offset:
    case DW_FORM_strp_sup:
    case DW_FORM_line_strp:
    case DW_FORM_GNU_ref_alt:
    case DW_FORM_GNU_strp_alt: rd_skip(r, 4); return 0;
    case DW_FORM_data8:
    case DW_FORM_ref8:
    case DW_FORM_ref_sig8:
    case DW_FORM_ref_sup8:
    case DW_FORM_addr: rd_skip(r, 8); return 0;
    case DW_FORM_data16: rd_skip(r, 16); return 0;
    case DW_FORM_sdata: (void)rd_sleb(r); return 0;
    case DW_FORM_udata:
    case DW_FORM_ref_udata:
    case DW_FORM_strx:
    case DW_FORM_addrx:
    case DW_FORM_loclistx:
    case DW_FORM_rnglistx:
    case DW_FORM_GNU_addr_index:
    case DW_FORM_GNU_str_index: (void)rd_uleb(r); return 0;
    case DW_FORM_string:
        while (!r->err && rd_n(r, 1) != 0)
            ;
        return 0;
    case DW_FORM_block1: rd_skip(r, rd_n(r, 1)); return 0;
    case DW_FORM_block2: rd_skip(r, rd_n(r, 2)); return 0;
    case DW_FORM_block4: rd_skip(r, rd_n(r, 4)); return 0;
    case DW_FORM_block:
    case DW_FORM_exprloc: rd_skip(r, rd_uleb(r)); return 0;
    default: return -1;
    }
}

/* Where an attribute's value is. */
typedef struct aval {
    size_t pos;    /* offset of the value in the section (0: absent) */
    uint64_t form; /* its form */
} aval_t;

/* The attributes of one DIE this file cares about. */
typedef struct die {
    uint64_t tag;
    aval_t low, high, ranges, stmt, entry, ret, macros, addr_base, rnglists_base;
    int dwo;            /* names a split DWARF object (DW_AT_dwo_name, GNU too) */
    size_t code_pos;    /* offset of the DIE's abbreviation code */
    size_t code_len;    /* its length */
    const abbrev_t *ab; /* its abbreviation */
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
        /* A truncated number is no field to read or patch. */
        rd_t r = { d->in, d->in_len, pos, 0 };
        rd_uleb(&r);
        return r.err ? 0 : r.pos - pos;
    }
    default: return 0;
    }
}

/* Entry IDX of the unit's (old) address table. 1: read; 0: no such entry. */
static int
addr_index(const dctx_t *c, uint64_t idx, uint64_t *val)
{
    if (!c->have_addr_base || idx >= c->addr_count)
        return 0;
    *val = le_get(c->s[S_ADDR].in + c->addr_base + 8 * idx, 8);
    return 1;
}

/* The address an attribute names. 1: read; 0: a form or index this file cannot read. */
static int
addr_get(dctx_t *c, int sec, const aval_t *v, uint64_t *val)
{
    const dsec_t *d = &c->s[sec];
    if (v->form == DW_FORM_addr) {
        *val = le_get(d->out.p + v->pos, 8);
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
        idx = le_get(d->in + v->pos, n);
    }
    if (idx >= c->addr_count)
        return 0;
    *val = le_get(c->s[S_ADDR].in + c->addr_base + 8 * idx, 8);
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
        le_put(d->out.p + v->pos, val, 8);
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
        uleb_encode(d->out.p + v->pos, idx, n);
    } else {
        le_put(d->out.p + v->pos, idx, n);
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
        *hi = le_get(b + e->high.pos, 8);
    else if (const_size(e->high.form))
        *hi = *lo + le_get(b + e->high.pos, const_size(e->high.form));
    else
        return 0;
    return *hi > *lo;
}

static int
cr_read_list(dctx_t *c, unsigned version, uint64_t off, uint64_t base, int have_base,
    pieces_t *pc, int *moved);
static int
cr_write_list(dctx_t *c, unsigned version, uint64_t *off);
static int
ranges_read(dctx_t *c, int sec, const aval_t *v, uint64_t base, int have_base,
    pieces_t *pc, int *moved, uint64_t *idx, uint64_t *off);
static int
ranges_write(dctx_t *c, int sec, const aval_t *v, uint64_t idx);

/*
 * A DIE with DW_AT_ranges (a function with a cold part, inlined code in several pieces):
 * a new list with each range cut into pieces, in the old order (gdb takes the first
 * range's start as the entry of a block without DW_AT_entry_pc), appended to the ranges
 * section (DW_FORM_sec_offset), or to its unit's copied table (DW_FORM_rnglistx).
 */
static int
die_ranges(dctx_t *c, int sec, const die_t *e, pieces_t *pc)
{
    int moved = 0;
    uint64_t idx, off;
    c->ncr = 0;
    c->drop_padding = 1;
    int ok = ranges_read(
        c, sec, &e->ranges, c->cu_base, c->have_cu_base, pc, &moved, &idx, &off);
    c->drop_padding = 0;
    QP_CHECK(ok);
    if (!ok) {
        c->out->ndie_ranges++;
        return 0;
    }
    if (!moved)
        return 0;
    QP_CHECK(ranges_write(c, sec, &e->ranges, idx));
    c->out->ndie_moved++;
    return 0;
}

/* A DIE of code: map low_pc/high_pc when the range is one run of new code, and the
 * entry and return addresses it names. 1 when its range stays old, 0 or QP_E*. */
static int
die_patch(dctx_t *c, int sec, const die_t *e, pieces_t *pc)
{
    int stale = 0;
    uint8_t *b = c->s[sec].out.p;
    uint64_t lo, hi;
    if (e->tag == DW_TAG_GNU_call_site) {
        patch_addr(c, sec, &e->low, c->map->map_return); /* its low_pc is the return pc */
    } else if (e->low.pos != 0 && e->high.pos == 0) {
        patch_addr(c, sec, &e->low, c->map->map); /* labels */
    } else if (e->low.pos != 0 && die_range(c, sec, e, &lo, &hi)) {
        QP_CHECK(ed_dwarf_cut(c, lo, hi, pc));
        int moved = 0;
        for (size_t i = 0; i < pc->n; i++)
            moved |= pc->v[i].new_ != 0;
        if (moved && pc->n == 1) {
            const piece_t *p = &pc->v[0];
            size_t n = const_size(e->high.form);
            if ((n != 0 && n < 8 && p->nlen >> (8 * n) != 0)
                || !addr_put(c, sec, &e->low, p->new_)) {
                c->out->ndie_stale++; /* the new length or index does not fit the form */
                stale = 1;
            } else {
                if (e->high.form == DW_FORM_addr)
                    le_put(b + e->high.pos, p->new_ + p->nlen, 8);
                else
                    le_put(b + e->high.pos, p->nlen, n);
                c->out->ndie_moved++;
            }
        } else if (moved) {
            c->out->ndie_stale++; /* partly moved, or split in the new code */
            stale = 1;
        }
    }
    if (e->entry.pos != 0)
        patch_addr(c, sec, &e->entry, c->map->map); /* constant forms: offsets, kept */
    if (e->ret.pos != 0)
        patch_addr(c, sec, &e->ret, c->map->map_return);
    if (e->ranges.pos != 0)
        QP_CHECK(die_ranges(c, sec, e, pc));
    return stale;
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
    le_put(c->s[sec].out.p + c->addr_base_pos, base, 4);
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
    uint64_t base = le_get(c->s[sec].in + v->pos, 4);
    /* The contribution's header is just before the first entry. */
    if (base < 8 || base > a->in_len)
        return;
    uint64_t len = le_get(a->in + base - 8, 4);
    if (le_get(a->in + base - 4, 2) != 5 || a->in[base - 2] != 8 || a->in[base - 1] != 0
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
    QP_CHECK(ed_dwarf_cut(c, lo, hi, pc));
    if (c->keep_old && hi > lo) {
        /* A CU keeps its old range too: its DIEs that stay old must lie inside it. */
        QP_CHECK(grow((void **)&c->cr, &c->cr_cap, c->ncr, sizeof(crange_t)));
        c->cr[c->ncr++] = (crange_t) { lo, hi };
    }
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
            } else if (k == 1) { /* DW_RLE_base_addressx */
                if (!addr_index(c, rd_uleb(&r), &base))
                    return 0;
                have_base = 1;
                continue;
            } else if (k == 2 || k == 3) { /* DW_RLE_startx_endx, DW_RLE_startx_length */
                if (!addr_index(c, rd_uleb(&r), &lo))
                    return 0;
                if (k == 2) {
                    if (!addr_index(c, rd_uleb(&r), &hi))
                        return 0;
                } else {
                    hi = lo + rd_uleb(&r);
                }
            } else {
                return 0;
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
    if (version >= 5 && (c->rng_end == 0 || c->rng_end != w->len)) {
        /* A new contribution for the new lists that follow: its header says the
         * address size. A copied unit contribution (rl_unit_end) closes it. */
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
            le_put(w->p + c->rng_hdr, w->len - c->rng_hdr - 4, 4);
        c->rng_end = w->len;
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
 * DW_FORM_rnglistx (clang): a list is named by an index into the offset table at the
 * unit's DW_AT_rnglists_base. A unit whose lists change gets a copy of its whole
 * contribution at the end of .debug_rnglists, with the new lists after the old ones and
 * the changed table entries pointing at them; its DW_AT_rnglists_base names the copy.
 */

/* The unit DIE's DW_AT_rnglists_base: where its offset table is. */
static void
rl_unit_start(dctx_t *c, int sec, const aval_t *v)
{
    const dsec_t *d = &c->s[S_RNGLISTS];
    c->rl_have = 0;
    c->rl_nidx = 0;
    c->rl_new.len = 0;
    if (v->pos == 0 || v->form != DW_FORM_sec_offset || d->in == NULL)
        return;
    uint64_t base = le_get(c->s[sec].in + v->pos, 4);
    if (base < 12 || base > d->in_len)
        return;
    uint64_t hdr = base - 12, len = le_get(d->in + hdr, 4);
    uint64_t count = le_get(d->in + base - 4, 4);
    if (len >= 0xfffffff0u || len < 8 || len > d->in_len - hdr - 4
        || le_get(d->in + hdr + 4, 2) != 5 || d->in[hdr + 6] != 8 || d->in[hdr + 7] != 0
        || count > (len - 8) / 4)
        return;
    c->rl_have = 1;
    c->rl_base = base;
    c->rl_count = count;
    c->rl_end = hdr + 4 + len;
    c->rl_pos = v->pos;
}

/* The offset of list IDX of the unit, or 0 (never a list's offset) when there is none. */
static uint64_t
rl_offset(const dctx_t *c, uint64_t idx)
{
    if (!c->rl_have || idx >= c->rl_count)
        return 0;
    uint64_t off = c->rl_base + le_get(c->s[S_RNGLISTS].in + c->rl_base + 4 * idx, 4);
    return off < c->rl_end ? off : 0;
}

/* Give list IDX of the unit the ranges of c->cr (written at the unit's end). */
static int
rl_set(dctx_t *c, uint64_t idx)
{
    wb_t *w = &c->rl_new;
    QP_CHECK(grow((void **)&c->rl_idx, &c->rl_idx_cap, c->rl_nidx, sizeof(rlidx_t)));
    c->rl_idx[c->rl_nidx++] = (rlidx_t) { idx, w->len };
    for (size_t i = 0; i < c->ncr; i++) {
        wb_n(w, DW_RLE_start_length, 1);
        wb_n(w, c->cr[i].lo, 8);
        wb_uleb(w, c->cr[i].hi - c->cr[i].lo);
    }
    wb_n(w, DW_RLE_end_of_list, 1);
    if (w->err)
        return QP_ENOMEM;
    c->out->nrnglists_added++;
    return 0;
}

/* The end of a unit: its copied contribution with the new lists, if any. */
static int
rl_unit_end(dctx_t *c, int sec)
{
    if (!c->rl_have || c->rl_nidx == 0)
        return 0;
    QP_CHECK(sec_copy(c, S_RNGLISTS));
    wb_t *w = &c->s[S_RNGLISTS].out;
    const uint8_t *in = c->s[S_RNGLISTS].in;
    uint64_t hdr = c->rl_base - 12, old_len = c->rl_end - hdr - 4;
    size_t at = w->len;
    wb_put(w, in + hdr, c->rl_end - hdr);
    wb_put(w, c->rl_new.p, c->rl_new.len);
    if (w->err)
        return QP_ENOMEM;
    if (w->len > UINT32_MAX || old_len + c->rl_new.len >= 0xfffffff0u)
        return QP_ERANGE;
    le_put(w->p + at, old_len + c->rl_new.len, 4);
    uint64_t nbase = at + 12;
    for (size_t i = 0; i < c->rl_nidx; i++)
        le_put(w->p + nbase + 4 * c->rl_idx[i].idx,
            (c->rl_end - c->rl_base) + c->rl_idx[i].off, 4);
    le_put(c->s[sec].out.p + c->rl_pos, nbase, 4);
    c->rl_nidx = 0;
    c->rl_new.len = 0;
    return 0;
}

/*
 * Read the list that the DW_AT_ranges value V names into c->cr, cut (BASE: the base
 * address). 1: read, *IDX is the list's index (DW_FORM_rnglistx) or UINT64_MAX
 * (DW_FORM_sec_offset: *OFF is its offset); 0: a list this file does not rewrite.
 */
static int
ranges_read(dctx_t *c, int sec, const aval_t *v, uint64_t base, int have_base,
    pieces_t *pc, int *moved, uint64_t *idx, uint64_t *off)
{
    const dsec_t *d = &c->s[sec];
    *idx = UINT64_MAX;
    if (v->form == DW_FORM_sec_offset) {
        *off = le_get(d->out.p + v->pos, 4);
    } else if (v->form == DW_FORM_rnglistx && c->version >= 5) {
        rd_t r = { d->in, d->in_len, v->pos, 0 };
        *idx = rd_uleb(&r);
        if (r.err || (*off = rl_offset(c, *idx)) == 0)
            return 0;
    } else {
        return 0;
    }
    return cr_read_list(c, c->version, *off, base, have_base, pc, moved);
}

/* Write c->cr as the new list of the DW_AT_ranges value V (see ranges_read). */
static int
ranges_write(dctx_t *c, int sec, const aval_t *v, uint64_t idx)
{
    if (idx != UINT64_MAX)
        return rl_set(c, idx);
    uint64_t off;
    QP_CHECK(cr_write_list(c, c->version, &off));
    le_put(c->s[sec].out.p + v->pos, off, 4);
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

/* cu_ranges' work; c->keep_old is set. */
static int
cu_ranges_1(dctx_t *c, int sec, unsigned version, size_t abbrev_pos, const atable_t *t,
    const die_t *e, pieces_t *pc)
{
    uint8_t *b = c->s[sec].out.p;
    int moved = 0;
    c->ncr = 0;
    uint64_t base = 0;
    int have_base = e->low.pos != 0 && addr_get(c, sec, &e->low, &base);
    if (e->ranges.pos != 0) {
        uint64_t idx, off;
        int ok = ranges_read(c, sec, &e->ranges, base, have_base, pc, &moved, &idx, &off);
        if (ok < 0)
            return ok;
        if (!ok) {
            c->out->ncu_stale++;
            return 0;
        }
        if (!moved)
            return 0;
        cr_merge(c);
        QP_CHECK(ranges_write(c, sec, &e->ranges, idx));
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
    le_put(b + e->high.pos, list, 4);
    if (hsize == 8)
        le_put(b + e->high.pos + 4, 0, 4); /* DW_ID_case_sensitive */
    le_put(b + abbrev_pos, abbrev, 4);
    c->out->ncu_moved++;
    return 0;
}

/* Make the CU DIE E of a unit (version VERSION, header's abbrev offset at ABBREV_POS)
 * cover its new code, and still its old code (DIEs whose addresses stay old). */
static int
cu_ranges(dctx_t *c, int sec, unsigned version, size_t abbrev_pos, const atable_t *t,
    const die_t *e, pieces_t *pc)
{
    c->keep_old = 1;
    int rc = cu_ranges_1(c, sec, version, abbrev_pos, t, e, pc);
    c->keep_old = 0;
    return rc;
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
        c->out
            ->nunits_skipped++; /* 64-bit DWARF or truncated: nothing after it is read */
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
    int depth = 0, first = 1, old_below = -1;
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
            if (depth <= old_below)
                old_below = -1;
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
            case DW_AT_macros:
            case DW_AT_GNU_macros: e.macros = v; break;
            case DW_AT_addr_base: e.addr_base = v; break;
            case DW_AT_rnglists_base: e.rnglists_base = v; break;
            case DW_AT_dwo_name:
            case DW_AT_GNU_dwo_name:
            case DW_AT_GNU_dwo_id: e.dwo = 1; break;
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
                QP_CHECK(lkeep_add(c, le_get(d->in + e.stmt.pos, 4)));
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
                QP_CHECK(macro_ref(c, le_get(d->in + e.macros.pos, 4)));
            addr_unit_start(c, sec, &e.addr_base);
            rl_unit_start(c, sec, &e.rnglists_base);
            c->version = version;
            c->have_cu_base = e.low.pos != 0 && addr_get(c, sec, &e.low, &c->cu_base);
            if (sec == S_INFO
                && (e.tag == DW_TAG_compile_unit || e.tag == DW_TAG_partial_unit)) {
                uint32_t stale = c->out->ncu_stale;
                QP_CHECK(cu_ranges(c, sec, version, abbrev_pos, t, &e, pc));
                if (c->out->ncu_stale != stale)
                    QP_CHECK(ukeep_add(c, sec, off)); /* its aranges stay old as well */
            }
            first = 0;
        } else if (old_below >= 0 && depth > old_below) {
            /* Inside a DIE whose range stayed old: so does everything in it (a
             * debugger, and DWARF, expect a child's range inside its parent's). */
            if (e.low.pos != 0 || e.ranges.pos != 0)
                c->out->ndie_stale++;
        } else if (e.low.pos != 0 || e.entry.pos != 0 || e.ret.pos != 0
            || e.ranges.pos != 0) {
            int rc = die_patch(c, sec, &e, pc);
            QP_CHECK(rc);
            if (rc == 1 && a->children)
                old_below = depth;
        }
        if (a->children)
            depth++;
    }
    if (!first) {
        QP_CHECK(addr_unit_end(c, sec));
        QP_CHECK(rl_unit_end(c, sec));
    }
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
        le_put(w->p + start, w->len - start - 4, 4);
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
        rc = ed_dwarf_line_rewrite(c);
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
        if (ed_dwarf_line_new_off(c, le_get(c->s[f->sec].in + f->pos, 4)) < 0)
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
        int64_t n = ed_dwarf_line_new_off(c, le_get(c->s[f->sec].in + f->pos, 4));
        if (n > UINT32_MAX)
            return QP_ERANGE;
        le_put(c->s[f->sec].out.p + f->pos, (uint64_t)n, 4);
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
    free(c.rl_idx);
    free(c.rl_new.p);
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
