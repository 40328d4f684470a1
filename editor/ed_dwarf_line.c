/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Line programs for relocated code (the .debug_line half of ed_dwarf.c). Each unit's
 * program is run into rows; every old sequence is written again as it was (the old code
 * is still in the file, and qp's profiles name blocks by their old addresses), and each
 * row's address range is cut through the editor's map: the pieces of moved code are
 * sorted by new address and added as one sequence per contiguous run of new code, so a
 * line has a location in the old code and one in the new (gdb breaks at both). The header (directory and file tables) is
 * copied byte for byte; only unit_length changes. Formats: DWARF 2 to 5, section 6.2.
 */
#include "editor/ed_dwarf_priv.h"

/*****************************************************************************
 * Line tables
 */

enum {
    ROW_STMT = 1,
    ROW_BB = 2,
    ROW_PROLOGUE = 4,
    ROW_EPILOGUE = 8,
    ROW_END = 16,
};

typedef struct lrow {
    uint64_t addr;  /* address register */
    uint64_t file;  /* file register */
    int64_t line;   /* line register */
    uint64_t col;   /* column register */
    uint64_t isa;   /* isa register */
    uint64_t disc;  /* discriminator register */
    uint32_t flags; /* ROW_* */
} lrow_t;

/* A row placed in the new table: a piece of an old row. */
typedef struct prow {
    uint64_t addr; /* its address (new, or old when kept) */
    uint64_t end;  /* the end of its piece */
    size_t row;    /* the old row */
    size_t seq;    /* kept rows: the old sequence; moved rows: order of creation */
} prow_t;

/* A line unit's header, as far as the program needs it. */
typedef struct lhdr {
    size_t start; /* offset of the unit */
    size_t end;   /* offset past it */
    size_t prog;  /* offset of the program */
    unsigned version;
    uint8_t min_inst;     /* minimum_instruction_length */
    uint8_t default_stmt; /* default_is_stmt */
    int8_t line_base;
    uint8_t line_range;
    uint8_t opcode_base;
    const uint8_t *std_len; /* standard_opcode_lengths (opcode_base - 1 of them) */
} lhdr_t;

typedef struct lbuf {
    lrow_t *rows;
    size_t nrows, rows_cap;   /* their number, room */
    prow_t *kept;             /* rows of code left in place, in table order */
    size_t nkept, kept_cap;   /* their number, room */
    prow_t *moved;            /* rows of moved code, sorted by new address at the end */
    size_t nmoved, moved_cap; /* their number, room */
    pieces_t pc;              /* scratch */
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
    /* x86-64: one byte per instruction unit; AArch64: four. No VLIW bundles. */
    if (h->min_inst == 0 || max_ops != 1 || h->line_range == 0 || h->opcode_base == 0)
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
            st.addr += (uint64_t)(adj / h->line_range) * h->min_inst;
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
            case DW_LNS_advance_pc: st.addr += rd_uleb(&r) * h->min_inst; break;
            case DW_LNS_advance_line: st.line += rd_sleb(&r); break;
            case DW_LNS_set_file: st.file = rd_uleb(&r); break;
            case DW_LNS_set_column: st.col = rd_uleb(&r); break;
            case DW_LNS_negate_stmt: st.flags ^= ROW_STMT; break;
            case DW_LNS_set_basic_block: st.flags |= ROW_BB; break;
            case DW_LNS_const_add_pc:
                st.addr += (uint64_t)((255u - h->opcode_base) / h->line_range) * h->min_inst;
                break;
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
        /* Every old row stays: the old code is still there (the translation table; only
         * its entries hold redirect jumps), and profiles name blocks by old address. */
        QP_CHECK(add_prow(&b->kept, &b->nkept, &b->kept_cap, (prow_t) { lo, hi, i, seq }));
        if (hi == lo) {
            uint64_t m = c->map->map(c->map->arg, lo);
            if (m != 0)
                QP_CHECK(add_prow(
                    &b->moved, &b->nmoved, &b->moved_cap, (prow_t) { m, m, i, order++ }));
            continue;
        }
        QP_CHECK(ed_dwarf_cut(c, lo, hi, &b->pc));
        for (size_t k = 0; k < b->pc.n; k++) {
            const piece_t *p = &b->pc.v[k];
            if (p->new_ != 0)
                QP_CHECK(add_prow(&b->moved, &b->nmoved, &b->moved_cap,
                    (prow_t) { p->new_, p->new_ + p->nlen, i, order++ }));
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
    lrow_t st;     /* registers as the consumer sees them */
    int open;      /* inside a sequence */
    uint32_t nseq; /* sequences written */
} lgen_t;

static void
gen_reset(lgen_t *g)
{
    memset(&g->st, 0, sizeof(g->st));
    g->st.file = 1;
    g->st.line = 1;
    g->st.flags = g->h->default_stmt ? ROW_STMT : 0;
}

/* Advance the address by DA bytes: in minimum_instruction_length units, the rest (a
 * row in the middle of an instruction) as a fixed advance in bytes. */
static void
gen_advance(lgen_t *g, uint64_t da)
{
    uint64_t units = da / g->h->min_inst, rest = da % g->h->min_inst;
    if (units != 0) {
        wb_n(g->w, DW_LNS_advance_pc, 1);
        wb_uleb(g->w, units);
    }
    if (rest != 0) {
        wb_n(g->w, DW_LNS_fixed_advance_pc, 1);
        wb_n(g->w, rest, 2);
    }
}

static void
gen_end(lgen_t *g, uint64_t end)
{
    if (!g->open)
        return;
    if (end > g->st.addr)
        gen_advance(g, end - g->st.addr);
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
        wb_n(w, 0, 1);
        wb_uleb(w, 1 + uleb_size(r->disc));
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
    if (dl >= h->line_base && dl < h->line_base + h->line_range && da < 256
        && da % h->min_inst == 0)
        op = (uint64_t)(dl - h->line_base) + (uint64_t)h->line_range * (da / h->min_inst)
            + h->opcode_base;
    if (op <= 255) {
        wb_n(w, op, 1);
    } else {
        if (da != 0)
            gen_advance(g, da);
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
    /* The old sequences, as they were. */
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

int
ed_dwarf_line_rewrite(dctx_t *c)
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
        if (ok == 1 && ed_dwarf_lkeep_has(c, off))
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
        le_put(w->p + start, w->len - start - 4, 4);
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

int64_t
ed_dwarf_line_new_off(const dctx_t *c, uint64_t off)
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
