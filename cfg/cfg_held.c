/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The code addresses a program holds, through which it may call or jump without a
 * branch naming the place: relocated words, functions of the dynamic symbol table,
 * rip-relative operands of instructions that are no branches (`lea label(%rip)`), and in
 * a program that is not position independent, instructions' immediates (`mov $f,%ecx`)
 * and aligned words of its data. The driver asks which entries are held (a procedure
 * whose entry is held may be called by unseen ways), the editor which bytes the program
 * may still reach after its procedure moved, and both which interior blocks are entered
 * that way (cfg_interior_entries).
 */
#include <stdlib.h>
#include <string.h>

#include "base/qp_sort.h"
#include "cfg/cfg.h"
#include "cfg/cfg_priv.h"

typedef struct held_vec {
    cfg_held_t *v;
    size_t n, cap;
} held_vec_t;

static int
push(const cfg_prog_t *prog, held_vec_t *h, uint64_t addr, uint64_t at, uint32_t src)
{
    if (addr == 0 || cfg_proc_at(prog, addr) == NULL)
        return 0;
    QP_CHECK(cfg_vec_grow((void **)&h->v, &h->cap, h->n + 1, sizeof(cfg_held_t)));
    h->v[h->n++] = (cfg_held_t) { addr, at, src };
    return 0;
}

/* An immediate of IN (decoded from its last 4 or 8 bytes, confirmed by its operands)
 * that is an address of code, or 0. */
static uint64_t
code_immediate(const cfg_prog_t *prog, const arch_insn_t *in)
{
    const cfg_image_t *img = prog->img;
    size_t avail;
    const uint8_t *p = cfg_image_ptr(img, in->addr, &avail);
    if (p == NULL || avail < in->len || in->len < 5)
        return 0;
    uint64_t v = 0;
    int32_t v32;
    memcpy(&v32, p + in->len - 4, 4);
    if (cfg_proc_at(prog, (uint64_t)(int64_t)v32) != NULL)
        v = (uint64_t)(int64_t)v32;
    else if (in->len >= 10) {
        memcpy(&v, p + in->len - 8, 8); /* movabs $imm64 */
        if (cfg_proc_at(prog, v) == NULL)
            v = 0;
    }
    if (v == 0)
        return 0;
    arch_ops_t ops;
    if (arch_decode_ops(p, in->len, in->addr, &ops) < 0)
        return 0;
    if ((ops.src.kind == ARCH_OPND_IMM && (uint64_t)ops.src.imm == v)
        || (ops.dst.kind == ARCH_OPND_IMM && (uint64_t)ops.dst.imm == v))
        return v;
    return 0;
}

static int
cmp_held(const void *a, const void *b)
{
    const cfg_held_t *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

/*
 * H[0..N) in cmp_held's order: a radix sort (base/qp_sort.h) of keys of the address
 * (less the lowest) and the index, then each run of one address by cmp_held (qsort's
 * comparisons of all of cc1's cost 0.27 G instructions, on the main thread).
 * Where the keys do not fit, or without their memory, qsort. The order is total: the
 * same answer either way.
 */
static void
sort_held(cfg_held_t *h, size_t n)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < n; i++) {
        lo = h[i].addr < lo ? h[i].addr : lo;
        hi = h[i].addr > hi ? h[i].addr : hi;
    }
    uint64_t *key = NULL;
    cfg_held_t *tmp = NULL;
    if (n > 1 && n <= UINT32_MAX && hi - lo <= UINT32_MAX) {
        key = malloc(n * sizeof(uint64_t));
        tmp = key != NULL ? malloc(n * sizeof(cfg_held_t)) : NULL;
    }
    if (tmp == NULL) {
        free(key);
        if (n > 1)
            qsort(h, n, sizeof(cfg_held_t), cmp_held);
        return;
    }
    for (size_t i = 0; i < n; i++)
        key[i] = (h[i].addr - lo) << 32 | i;
    qp_sort_u64(key, n);
    for (size_t i = 0; i < n; i++)
        tmp[i] = h[key[i] & UINT32_MAX];
    memcpy(h, tmp, n * sizeof(cfg_held_t));
    for (size_t i = 0, j; i < n; i = j) { /* (cc1: 78k runs, most of a few) */
        for (j = i + 1; j < n && h[j].addr == h[i].addr; j++)
            ;
        if (j - i > 16)
            qsort(h + i, j - i, sizeof(cfg_held_t), cmp_held);
        for (size_t k = i + 1; j - i <= 16 && k < j; k++) /* insertion */
            for (size_t m = k; m > i && cmp_held(&h[m - 1], &h[m]) > 0; m--) {
                cfg_held_t t = h[m];
                h[m] = h[m - 1];
                h[m - 1] = t;
            }
    }
    free(tmp);
    free(key);
}

static int held_scan(const cfg_prog_t *prog, cfg_held_t **out, size_t *n);

int
cfg_held_addrs_view(const cfg_prog_t *prog, const cfg_held_t **out, size_t *n)
{
    /* Computed once: the editor and the drivers ask several times, and the scan decodes
     * every instruction (chromium: seconds). */
    cfg_held_cache_t *c = prog != NULL ? cfg_prog_held_cache(prog) : NULL;
    if (c == NULL || out == NULL || n == NULL)
        return QP_EINVAL;
    if (!c->done) {
        QP_CHECK(held_scan(prog, &c->v, &c->n));
        c->done = 1;
    }
    *out = c->v;
    *n = c->n;
    return 0;
}

int
cfg_held_addrs(const cfg_prog_t *prog, cfg_held_t **out, size_t *n)
{
    if (prog == NULL || out == NULL || n == NULL)
        return QP_EINVAL;
    if (cfg_prog_held_cache(prog) == NULL)
        return held_scan(prog, out, n);
    const cfg_held_t *v;
    QP_CHECK(cfg_held_addrs_view(prog, &v, n));
    *out = malloc((*n + 1) * sizeof(cfg_held_t));
    if (*out == NULL)
        return QP_ENOMEM;
    if (*n > 0)
        memcpy(*out, v, *n * sizeof(cfg_held_t));
    return 0;
}

/* The held addresses: PROG's own (*OWNED: NULL), or, for a program without them, a
 * scan's (*OWNED: to free). */
static int
held_get(const cfg_prog_t *prog, const cfg_held_t **v, size_t *n, cfg_held_t **owned)
{
    *owned = NULL;
    if (cfg_prog_held_cache(prog) != NULL)
        return cfg_held_addrs_view(prog, v, n);
    QP_CHECK(held_scan(prog, owned, n));
    *v = *owned;
    return 0;
}

int
cfg_held_select(const cfg_prog_t *prog, cfg_held_keep_fn keep, uint64_t **out, size_t *n)
{
    const cfg_held_t *h;
    cfg_held_t *owned;
    size_t nh, k = 0;
    if (prog == NULL || keep == NULL || out == NULL || n == NULL)
        return QP_EINVAL;
    *out = NULL;
    *n = 0;
    QP_CHECK(held_get(prog, &h, &nh, &owned));
    uint64_t *v = malloc((nh + 1) * sizeof(uint64_t));
    if (v == NULL) {
        free(owned);
        return QP_ENOMEM;
    }
    for (size_t i = 0; i < nh; i++)
        if ((k == 0 || v[k - 1] != h[i].addr) && keep(prog, &h[i]))
            v[k++] = h[i].addr; /* sorted: cfg_held_addrs sorts by address */
    free(owned);
    *out = v;
    *n = k;
    return 0;
}

/* Blocks a span of held_scan's code scan holds; bytes a piece of its data scan reads. */
#define HELD_SPAN 4096
#define HELD_DATA_PIECE ((uint64_t)64 << 10)

/* A piece of a data section whose aligned words held_scan reads: [lo, hi). */
typedef struct held_piece {
    const cfg_section_t *s; /* the section */
    uint64_t lo, hi;        /* its words' addresses: 8-aligned from lo, ending by hi */
} held_piece_t;

typedef struct held_spans {
    const cfg_prog_t *prog; /* the program scanned */
    held_piece_t *pieces;   /* the data scan's pieces: items [0, npieces) */
    size_t npieces;         /* their number */
    held_vec_t *v;          /* per item: what its data words or blocks' code hold */
    size_t n;               /* items: the data pieces, then the code spans */
} held_spans_t;

/* The code addresses in the aligned words of piece P of a data section. */
static int
held_words(const cfg_prog_t *prog, const held_piece_t *p, held_vec_t *h)
{
    const cfg_section_t *s = p->s;
    int rc = 0;
    for (uint64_t a = p->lo; a + 8 <= p->hi && rc == 0; a += 8) {
        uint64_t w;
        memcpy(&w, s->bytes + (a - s->vma), 8);
        if (w < 0x1000)
            continue;
        /* "ant\0\0\0\0\0" is a word of eight bytes of text before it. */
        int text = a >= s->vma + 8;
        for (int k = 1; k <= 8 && text; k++)
            text = s->bytes[a - s->vma - k] >= 0x20 && s->bytes[a - s->vma - k] < 0x7f;
        rc = push(prog, h, w, a, text ? CFG_HELD_TEXTWORD : CFG_HELD_DATA);
    }
    return rc;
}

/* qp_task_fn: item K, a data piece's words or the addresses of code that the blocks of
 * a span hold. */
static int
held_span(void *arg, unsigned worker, size_t k)
{
    (void)worker;
    held_spans_t *sp = arg;
    const cfg_prog_t *prog = sp->prog;
    const cfg_image_t *img = prog->img;
    const arch_isa_t *isa = cfg_image_isa(img);
    const int pie = (img->flags & CFG_IMG_PIE) != 0;
    held_vec_t *h = &sp->v[k];
    if (k < sp->npieces)
        return held_words(prog, &sp->pieces[k], h);
    uint32_t lo = (uint32_t)((k - sp->npieces) * HELD_SPAN);
    uint32_t hi = prog->nblocks - lo > HELD_SPAN ? lo + HELD_SPAN : prog->nblocks;
    int rc = 0;
    for (uint32_t b = lo; b < hi && rc == 0; b++) {
        const cfg_block_t *bl = &prog->blocks[b];
        if (bl->gap_entry)
            rc = push(prog, h, bl->start, bl->start, CFG_HELD_GAP);
        for (uint64_t a = bl->start; a < bl->end && rc == 0;) {
            arch_insn_t in;
            if (cfg_image_decode(img, a, 0, &in) < 0)
                break;
            a += in.len;
            if (in.kind == ARCH_KIND_JMP || in.kind == ARCH_KIND_JCC
                || in.kind == ARCH_KIND_CALL || in.kind == ARCH_KIND_JMP_IND
                || in.kind == ARCH_KIND_CALL_IND)
                continue;
            if (isa->code_ref != NULL) { /* adrp + add, adr (AArch64) */
                size_t avail;
                const uint8_t *p = cfg_image_ptr(img, in.addr, &avail);
                uint64_t ref;
                if ((in.flags & ARCH_F_RIPREL) && p != NULL
                    && isa->code_ref(p, avail, in.addr, &ref) == ARCH_REF_ADDR)
                    rc = push(prog, h, ref, in.addr, CFG_HELD_RIPREL);
                continue;
            }
            if ((in.flags & ARCH_F_RIPREL) && in.target != 0)
                rc = push(prog, h, in.target, in.addr, CFG_HELD_RIPREL);
            if (!pie && rc == 0) { /* movq $label, tab(%rip) has both */
                uint64_t v = code_immediate(prog, &in);
                if (v != 0)
                    rc = push(prog, h, v, in.addr, CFG_HELD_IMM);
            }
        }
    }
    return rc;
}

/* Into SP->pieces: the pieces of the data sections whose aligned words a program that
 * is not position independent may hold code addresses in. */
static int
held_pieces(const cfg_image_t *img, held_spans_t *sp)
{
    for (int fill = 0; fill < 2; fill++) {
        size_t k = 0;
        for (size_t i = 0; i < img->nsections; i++) {
            const cfg_section_t *s = &img->sections[i];
            if ((s->flags & CFG_SEC_CODE) || s->bytes == NULL || !(s->flags & CFG_SEC_ALLOC)
                || strncmp(s->name, ".eh_frame", 9) == 0)
                continue;
            for (uint64_t a = (s->vma + 7) & ~(uint64_t)7; a + 8 <= s->vma + s->size;
                 a += HELD_DATA_PIECE, k++) {
                uint64_t end = s->vma + s->size - a > HELD_DATA_PIECE ? a + HELD_DATA_PIECE
                                                                      : s->vma + s->size;
                if (fill)
                    sp->pieces[k] = (held_piece_t) { s, a, end };
            }
        }
        if (!fill && (sp->pieces = malloc((k + 1) * sizeof(held_piece_t))) == NULL)
            return QP_ENOMEM;
        sp->npieces = k;
    }
    return 0;
}

static int
held_scan(const cfg_prog_t *prog, cfg_held_t **out, size_t *n)
{
    const cfg_image_t *img = prog->img;
    const int pie = (img->flags & CFG_IMG_PIE) != 0;
    held_vec_t h = { NULL, 0, 0 };
    int rc = 0;
    for (size_t i = 0; i < img->nrelocs && rc == 0; i++)
        rc = push(prog, &h, img->relocs[i].value, img->relocs[i].where, CFG_HELD_RELOC);
    /* A library may call them (a C++ template instantiation that libstdc++'s own calls
     * bind to). */
    for (size_t i = 0; i < img->nsymbols && rc == 0; i++) {
        const cfg_symbol_t *sy = &img->symbols[i];
        if (sy->src == CFG_SYMSRC_DYNSYM && sy->kind == CFG_SYM_FUNC)
            rc = push(prog, &h, sy->addr, 0, CFG_HELD_DYNSYM);
    }
    /* The data's words and the code's references, a piece of words or a span of blocks
     * at a time on the analysis' threads; the items' findings are joined in order, then
     * sorted (cmp_held's order is total). */
    held_spans_t sp = { prog, NULL, 0, NULL, 0 };
    if (rc == 0 && !pie)
        rc = held_pieces(img, &sp);
    if (rc == 0) {
        sp.n = sp.npieces + (prog->nblocks + HELD_SPAN - 1) / HELD_SPAN;
        sp.v = calloc(sp.n + 1, sizeof(held_vec_t));
        rc = sp.v == NULL ? QP_ENOMEM : 0;
    }
    unsigned threads = cfg_prog_held_cache(prog) != NULL ? cfg_prog_held_cache(prog)->threads : 1;
    if (rc == 0)
        rc = qp_parallel_for(threads, sp.n, 1, held_span, &sp, NULL);
    /* Joined into one array sized once, each item's findings freed as soon as they are
     * copied: a non-PIE program's data words (cc1's pointer tables) are not held twice,
     * nor in an array grown by doubling. */
    size_t total = h.n;
    for (size_t k = 0; k < sp.n && rc == 0; k++)
        total += sp.v[k].n;
    if (rc == 0) {
        cfg_held_t *nv = realloc(h.v, (total + 1) * sizeof(cfg_held_t));
        if (nv == NULL) {
            rc = QP_ENOMEM;
        } else {
            h.v = nv;
            h.cap = total + 1;
        }
    }
    for (size_t k = 0; sp.v != NULL && k < sp.n; k++) {
        if (rc == 0 && sp.v[k].n > 0) {
            memcpy(h.v + h.n, sp.v[k].v, sp.v[k].n * sizeof(cfg_held_t));
            h.n += sp.v[k].n;
        }
        free(sp.v[k].v);
        sp.v[k].v = NULL;
    }
    free(sp.v);
    free(sp.pieces);
    if (rc < 0) {
        free(h.v);
        return rc;
    }
    sort_held(h.v, h.n);
    *out = h.v;
    *n = h.n;
    return 0;
}

int
cfg_block_indirect_target(const cfg_prog_t *prog, uint32_t bi)
{
    const cfg_block_t *t = &prog->blocks[bi];
    for (uint32_t k = 0; k < t->npred; k++) {
        const cfg_edge_t *ed = &prog->edges[prog->preds[t->pred + k]];
        if (ed->kind == CFG_EDGE_TABLE || ed->kind == CFG_EDGE_INDIRECT)
            return 1;
    }
    return 0;
}

static int interior_scan(const cfg_prog_t *prog, uint64_t **out, size_t *n);

int
cfg_interior_entries(const cfg_prog_t *prog, const uint64_t **out, size_t *n)
{
    /* Computed once: the plan, the in-place editor and the driver each ask. */
    cfg_held_cache_t *c = prog != NULL ? cfg_prog_held_cache(prog) : NULL;
    if (c == NULL || out == NULL || n == NULL)
        return QP_EINVAL;
    if (!c->xt_done) {
        QP_CHECK(interior_scan(prog, &c->xt, &c->nxt));
        c->xt_done = 1;
    }
    *out = c->xt;
    *n = c->nxt;
    return 0;
}

static int
interior_scan(const cfg_prog_t *prog, uint64_t **out, size_t *n)
{
    size_t k = 0, cap = 0;
    uint64_t *v = NULL;
    int rc = 0;
    for (uint32_t e = 0; e < prog->nedges && rc == 0; e++)
        if (prog->edges[e].kind == CFG_EDGE_TAILCALL && prog->edges[e].target != 0) {
            rc = cfg_vec_grow((void **)&v, &cap, k + 1, sizeof(uint64_t));
            if (rc == 0)
                v[k++] = prog->edges[e].target;
        }
    const cfg_held_t *h = NULL;
    size_t nh = 0;
    if (rc == 0)
        rc = cfg_held_addrs_view(prog, &h, &nh);
    for (size_t i = 0; i < nh && rc == 0; i++) {
        if (h[i].src == CFG_HELD_DYNSYM || h[i].src == CFG_HELD_TEXTWORD)
            continue;
        uint32_t bi = cfg_block_at(prog, h[i].addr);
        if (bi == CFG_NONE || prog->blocks[bi].start != h[i].addr
            || h[i].addr == prog->procs[prog->blocks[bi].proc].entry
            || cfg_block_indirect_target(prog, bi))
            continue;
        rc = cfg_vec_grow((void **)&v, &cap, k + 1, sizeof(uint64_t));
        if (rc == 0)
            v[k++] = h[i].addr;
    }
    if (rc < 0) {
        free(v);
        return rc;
    }
    if (k > 1)
        qsort(v, k, sizeof(uint64_t), cfg_u64_cmp);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (u == 0 || v[u - 1] != v[i])
            v[u++] = v[i];
    *out = v;
    *n = u;
    return 0;
}
