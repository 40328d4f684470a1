/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#include "config.h"

#include "cfg/cfg_priv.h"

/*****************************************************************************
 * Allocation and ownership
 */

cfg_image_t *
cfg_image_alloc(void)
{
    cfg_image_t *img = calloc(1, sizeof(*img));
    cfg_image_priv_t *priv = calloc(1, sizeof(*priv));
    if (img == NULL || priv == NULL) {
        free(img);
        free(priv);
        return NULL;
    }
    img->priv = priv;
    return img;
}

const char *
cfg_image_intern(cfg_image_t *img, const char *s)
{
    cfg_image_priv_t *priv = img->priv;
    char *d = cfg_strdup(s);
    if (d == NULL || CFG_VEC_PUSH(priv->strings, d) < 0) {
        free(d);
        return NULL;
    }
    return d;
}

/*****************************************************************************
 * Decoded instructions, kept (cfg_image_decode)
 */

/*
 * An instruction as arch_decode gave it, less its address (known from where it is kept)
 * and its target: that is the pc-relative field's value added to the next address, read
 * again from the bytes (an instruction whose target is not that is not kept). Eight
 * bytes: the analysis of a large program keeps tens of millions.
 */
typedef struct dc_insn {
    uint8_t len;           /* arch_insn_t.len */
    uint8_t kind;          /* arch_insn_t.kind */
    uint8_t rel_off;       /* arch_insn_t.rel_off */
    uint8_t rel_size;      /* arch_insn_t.rel_size */
    uint16_t flags;        /* arch_insn_t.flags */
    uint8_t flags_read;    /* arch_insn_t.flags_read */
    uint8_t flags_written; /* arch_insn_t.flags_written */
} dc_insn_t;

#define DC_CHUNK_BITS 16 /* instructions per chunk (512 KiB): chunks never move */
#define DC_CHUNK ((size_t)1 << DC_CHUNK_BITS)
#define DC_MAX_CHUNKS (((size_t)UINT32_MAX >> DC_CHUNK_BITS) + 1)

/*
 * The cache is shared by the threads of qp_parallel_for without a lock: an instruction
 * is written to a slot of its own (taken from an atomic counter) and then published by
 * storing its index in the section's per-byte table (release; readers acquire). Two
 * threads decoding the same bytes at once both decode; one publishes, the other's slot
 * stays unused. Whatever thread decoded it, the instruction is the same.
 */
typedef struct cfg_dcache {
    _Atomic(_Atomic uint32_t *) *at; /* per section: per byte, 1 + the index of the
                                      * instruction decoded there, or 0; NULL until used */
    _Atomic(dc_insn_t *) *chunks;    /* DC_MAX_CHUNKS chunk pointers, NULL until used */
    atomic_size_t n;                 /* slots taken */
    struct dc_frozen *frozen;        /* per section, once frozen (at and chunks freed) */
} cfg_dcache_t;

/*
 * A section's instructions once the cache is frozen (cfg_image_decode_freeze): read
 * only, in address order, found through a bitmap of the bytes where one starts and the
 * count of those before each 64-byte word of it. About 0.19 bytes a code byte besides the
 * instructions, where the per-byte index takes 4 (chromium: 0.9 GiB).
 */
typedef struct dc_frozen {
    uint64_t *starts;  /* bit B of word W: an instruction is kept at byte 64 W + B */
    uint32_t *rank;    /* per word: the instructions kept before it */
    dc_insn_t *insns;  /* the instructions kept, by address */
} dc_frozen_t;

/* A section whose instructions are not kept (not code, or no memory): its `at` entry. */
static _Atomic uint32_t dc_not_kept;

static void
dcache_free(cfg_image_priv_t *priv, size_t nsections)
{
    cfg_dcache_t *dc = atomic_exchange(&priv->dcache, NULL);
    if (dc == NULL)
        return;
    for (size_t i = 0; dc->frozen != NULL && i < nsections; i++) {
        free(dc->frozen[i].starts);
        free(dc->frozen[i].rank);
        free(dc->frozen[i].insns);
    }
    free(dc->frozen);
    for (size_t i = 0; dc->at != NULL && i < nsections; i++)
        if (dc->at[i] != &dc_not_kept)
            free((void *)dc->at[i]);
    for (size_t i = 0; dc->chunks != NULL && i < DC_MAX_CHUNKS; i++)
        free(dc->chunks[i]);
    free((void *)dc->at);
    free((void *)dc->chunks);
    free(dc);
}

/* The cache of IMG, made on first use; NULL without memory. */
static cfg_dcache_t *
dcache_get(const cfg_image_t *img)
{
    cfg_image_priv_t *priv = img->priv;
    cfg_dcache_t *dc = atomic_load_explicit(&priv->dcache, memory_order_acquire);
    if (dc != NULL)
        return dc;
    if ((dc = calloc(1, sizeof(*dc))) == NULL)
        return NULL;
    dc->at = calloc(img->nsections + 1, sizeof(*dc->at));
    dc->chunks = calloc(DC_MAX_CHUNKS, sizeof(*dc->chunks));
    atomic_init(&dc->n, 0);
    cfg_dcache_t *none = NULL;
    if (dc->at == NULL || dc->chunks == NULL
        || !atomic_compare_exchange_strong(&priv->dcache, &none, dc)) {
        free((void *)dc->at);
        free((void *)dc->chunks);
        free(dc);
        return none; /* another thread's (or NULL: no memory) */
    }
    return dc;
}

/* The per-byte index of section S, allocated on first use; NULL when S is not kept. */
static _Atomic uint32_t *
dcache_index(const cfg_image_t *img, cfg_dcache_t *dc, const cfg_section_t *s)
{
    size_t si = (size_t)(s - img->sections);
    _Atomic uint32_t *at = atomic_load_explicit(&dc->at[si], memory_order_acquire);
    if (at == NULL) {
        /* Only code is worth keeping; without the memory, decode every time. */
        if ((s->flags & CFG_SEC_CODE) && s->size < UINT32_MAX)
            at = calloc((size_t)s->size + 1, sizeof(uint32_t));
        if (at == NULL)
            at = &dc_not_kept;
        _Atomic uint32_t *none = NULL;
        if (!atomic_compare_exchange_strong(&dc->at[si], &none, at)) {
            if (at != &dc_not_kept)
                free((void *)at);
            at = none;
        }
    }
    return at == &dc_not_kept ? NULL : at;
}

/* Chunk K of the instructions, allocated on first use; NULL without memory. */
static dc_insn_t *
dcache_chunk(cfg_dcache_t *dc, size_t k)
{
    dc_insn_t *c = atomic_load_explicit(&dc->chunks[k], memory_order_acquire);
    if (c != NULL)
        return c;
    if ((c = malloc(DC_CHUNK * sizeof(dc_insn_t))) == NULL)
        return NULL;
    dc_insn_t *none = NULL;
    if (!atomic_compare_exchange_strong(&dc->chunks[k], &none, c)) {
        free(c);
        c = none;
    }
    return c;
}

/* The target of an instruction of LEN bytes at ADDR (bytes P) with its pc-relative field
 * at REL_OFF (REL_SIZE bytes; 0: none, and no target). */
static uint64_t
dc_target(const uint8_t *p, uint64_t addr, uint8_t len, uint8_t rel_off, uint8_t rel_size)
{
    int64_t v;
    switch (rel_size) {
    case 1: v = (int8_t)p[rel_off]; break;
    case 2: {
        int16_t x;
        memcpy(&x, p + rel_off, 2);
        v = x;
        break;
    }
    case 4: {
        int32_t x;
        memcpy(&x, p + rel_off, 4);
        v = x;
        break;
    }
    default: return 0;
    }
    return addr + len + (uint64_t)v;
}

/* The instruction C kept for ADDR (bytes P) into *OUT. */
static inline void
dc_get(const dc_insn_t *c, const uint8_t *p, uint64_t addr, arch_insn_t *out)
{
    uint64_t target = dc_target(p, addr, c->len, c->rel_off, c->rel_size);
    *out = (arch_insn_t) { addr, target, c->len, c->kind, c->rel_off, c->rel_size,
                           c->flags, c->flags_read, c->flags_written };
}

/* Keep IN, decoded at byte OFF (bytes P) of the section whose index is AT. */
static void
dcache_put(cfg_dcache_t *dc, _Atomic uint32_t *at, uint64_t off, const uint8_t *p,
           const arch_insn_t *in)
{
    if (in->rel_off + in->rel_size > in->len
        || dc_target(p, in->addr, in->len, in->rel_off, in->rel_size) != in->target)
        return; /* (a 32-bit address wrapped, say: decoded each time) */
    size_t k = atomic_fetch_add_explicit(&dc->n, 1, memory_order_relaxed);
    if (k >= UINT32_MAX - 1)
        return;
    dc_insn_t *c = dcache_chunk(dc, k >> DC_CHUNK_BITS);
    if (c == NULL)
        return;
    c[k & (DC_CHUNK - 1)] = (dc_insn_t) {
        in->len, in->kind, in->rel_off, in->rel_size, in->flags, in->flags_read,
        in->flags_written,
    };
    uint32_t none = 0;
    atomic_compare_exchange_strong_explicit(&at[off], &none, (uint32_t)k + 1,
                                            memory_order_release, memory_order_relaxed);
}

/* The index of the section this thread used last (decoding goes in address order); it
 * may be another image's: it is only a guess, checked against the address. */
static _Thread_local size_t dc_last;

/* cfg_image_decode for an ISA other than the host's: not kept (the cache stores a
 * target as x86's displacement field, where AArch64's is a bit field); decoding a
 * fixed-length instruction is cheap. */
static int
decode_other(const cfg_image_t *img, uint64_t addr, uint64_t limit, arch_insn_t *out)
{
    const cfg_section_t *s = cfg_image_section_at(img, addr);
    if (s == NULL || s->bytes == NULL || addr % cfg_image_isa(img)->insn_align != 0)
        return QP_EDECODE; /* no instruction starts off its alignment */
    uint64_t off = addr - s->vma;
    size_t avail = (size_t)(s->size - off);
    if (limit > addr && avail > limit - addr)
        avail = (size_t)(limit - addr);
    return cfg_image_isa(img)->decode(s->bytes + off, avail, addr, out);
}

/* The bits of W below BIT, counted in line (x86-64's baseline has no popcnt: the
 * compiler's builtin would be a call). */
static inline uint32_t
bits_below(uint64_t w, uint64_t bit)
{
    uint64_t x = w & (bit - 1);
    x -= (x >> 1) & 0x5555555555555555ull;
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (uint32_t)((x * 0x0101010101010101ull) >> 56);
}

/* Does the frozen section F keep an instruction at byte OFF? */
static inline int
frozen_has(const dc_frozen_t *f, uint64_t off)
{
    return f->starts != NULL && (f->starts[off >> 6] >> (off & 63) & 1) != 0;
}

/* The frozen section F's instruction at byte OFF, or NULL when none is kept there. */
static const dc_insn_t *
frozen_at(const dc_frozen_t *f, uint64_t off)
{
    if (!frozen_has(f, off))
        return NULL;
    uint64_t w = f->starts[off >> 6], bit = (uint64_t)1 << (off & 63);
    return &f->insns[f->rank[off >> 6] + bits_below(w, bit)];
}

/* cfg_image_decode once frozen: the kept instruction, or decoded anew (not kept). */
static int
frozen_decode(const dc_frozen_t *f, const cfg_section_t *s, uint64_t off, size_t avail,
              uint64_t addr, arch_insn_t *out)
{
    const dc_insn_t *c = frozen_at(f, off);
    if (c != NULL && c->len <= avail) {
        dc_get(c, s->bytes + off, addr, out);
        return 0;
    }
    return arch_decode(s->bytes + off, avail, addr, out);
}

int
cfg_image_decode(const cfg_image_t *img, uint64_t addr, uint64_t limit, arch_insn_t *out)
{
    if (img == NULL || out == NULL)
        return QP_EINVAL;
    if (cfg_image_isa(img) != arch_isa_host())
        return decode_other(img, addr, limit, out);
    cfg_dcache_t *dc = dcache_get(img);
    const cfg_section_t *s = dc_last < img->nsections ? &img->sections[dc_last] : NULL;
    if (s == NULL || addr < s->vma || addr - s->vma >= s->size) {
        s = cfg_image_section_at(img, addr);
        if (s == NULL)
            return QP_EDECODE;
        dc_last = (size_t)(s - img->sections);
    }
    uint64_t off = addr - s->vma;
    size_t avail = (size_t)(s->size - off);
    if (limit > addr && avail > limit - addr)
        avail = (size_t)(limit - addr);
    if (dc != NULL && dc->frozen != NULL)
        return frozen_decode(&dc->frozen[s - img->sections], s, off, avail, addr, out);
    _Atomic uint32_t *at = dc != NULL ? dcache_index(img, dc, s) : NULL;
    uint32_t idx = at != NULL ? atomic_load_explicit(&at[off], memory_order_acquire) : 0;
    if (idx != 0) {
        size_t k = idx - 1;
        const dc_insn_t *c = &atomic_load_explicit(&dc->chunks[k >> DC_CHUNK_BITS],
                                                   memory_order_relaxed)[k & (DC_CHUNK - 1)];
        /* Decoding reads the instruction's bytes and no more: the same result, unless
         * the limit cuts it short (then decode, and fail, as arch_decode does). */
        if (c->len <= avail) {
            dc_get(c, s->bytes + off, addr, out);
            return 0;
        }
    }
    int rc = arch_decode(s->bytes + off, avail, addr, out);
    if (rc == 0 && at != NULL && idx == 0)
        dcache_put(dc, at, off, s->bytes + off, out);
    return rc;
}

/*****************************************************************************
 * The cache frozen: what the analysis decoded, kept in less memory
 */

/*
 * A section is frozen in pieces of FREEZE_PIECE bytes (whole 64-byte words of the
 * bitmap, so that a piece writes its own words only), on the pool: first each piece's
 * bitmap and count, then, from the counts' prefix sums, its ranks and instructions.
 */
#define FREEZE_PIECE ((uint64_t)64 << 12)
_Static_assert(FREEZE_PIECE % 64 == 0, "a piece must hold whole words of the bitmap");

typedef struct freeze_ctx {
    const cfg_dcache_t *dc;
    const _Atomic uint32_t *at; /* the section's per-byte index */
    uint64_t size;              /* the section's bytes */
    dc_frozen_t *f;             /* what is made */
    uint32_t *count;            /* per piece: its instructions (first pass), then those
                                 * before it (second pass) */
} freeze_ctx_t;

/* The section's bytes [*LO, *HI) of piece K. */
static void
freeze_piece(const freeze_ctx_t *c, size_t k, uint64_t *lo, uint64_t *hi)
{
    *lo = (uint64_t)k * FREEZE_PIECE;
    *hi = c->size - *lo > FREEZE_PIECE ? *lo + FREEZE_PIECE : c->size;
}

/* Piece K's bitmap of instruction starts, and how many there are. */
static int
freeze_mark_task(void *arg, unsigned worker, size_t k)
{
    freeze_ctx_t *c = arg;
    (void)worker;
    uint64_t lo, hi;
    freeze_piece(c, k, &lo, &hi);
    uint32_t n = 0;
    for (uint64_t off = lo; off < hi; off++)
        if (atomic_load_explicit(&c->at[off], memory_order_relaxed) != 0) {
            c->f->starts[off >> 6] |= (uint64_t)1 << (off & 63);
            n++;
        }
    c->count[k] = n;
    return 0;
}

/* Piece K's words' ranks and its instructions, in address order. */
static int
freeze_fill_task(void *arg, unsigned worker, size_t k)
{
    freeze_ctx_t *c = arg;
    (void)worker;
    uint64_t lo, hi;
    freeze_piece(c, k, &lo, &hi);
    uint32_t r = c->count[k];
    for (uint64_t w = lo >> 6; w < (hi + 63) >> 6; w++) {
        c->f->rank[w] = r;
        for (uint64_t m = c->f->starts[w]; m != 0; m &= m - 1) {
            uint64_t off = (w << 6) + (uint64_t)__builtin_ctzll(m);
            size_t x = atomic_load_explicit(&c->at[off], memory_order_relaxed) - 1;
            c->f->insns[r++] = atomic_load_explicit(&c->dc->chunks[x >> DC_CHUNK_BITS],
                                                    memory_order_relaxed)[x & (DC_CHUNK - 1)];
        }
    }
    return 0;
}

/* The instructions kept in the per-byte index AT of a section of SIZE bytes, into F, on
 * NTHREADS threads. */
static int
freeze_section(const cfg_dcache_t *dc, const _Atomic uint32_t *at, uint64_t size,
               unsigned nthreads, dc_frozen_t *f)
{
    size_t nwords = (size_t)(size >> 6) + 1;
    size_t npieces = (size_t)((size + FREEZE_PIECE - 1) / FREEZE_PIECE);
    freeze_ctx_t c = { dc, at, size, f, malloc((npieces + 1) * sizeof(uint32_t)) };
    f->starts = calloc(nwords, sizeof(uint64_t));
    f->rank = malloc(nwords * sizeof(uint32_t));
    int rc = c.count == NULL || f->starts == NULL || f->rank == NULL ? QP_ENOMEM : 0;
    if (rc == 0)
        rc = qp_parallel_for(nthreads, npieces, 1, freeze_mark_task, &c, NULL);
    uint32_t n = 0;
    for (size_t k = 0; rc == 0 && k < npieces; k++) {
        uint32_t in = c.count[k];
        c.count[k] = n;
        n += in;
    }
    /* Sized exactly: at most one instruction a byte, and no more than the cache took. */
    if (rc == 0 && (f->insns = malloc(((size_t)n + 1) * sizeof(dc_insn_t))) == NULL)
        rc = QP_ENOMEM;
    if (rc == 0)
        rc = qp_parallel_for(nthreads, npieces, 1, freeze_fill_task, &c, NULL);
    if (rc == 0 && (size & 63) == 0)
        f->rank[size >> 6] = n; /* (the word past the end: never tested) */
    free(c.count);
    return rc;
}

void
cfg_image_decode_freeze(const cfg_image_t *img, unsigned nthreads)
{
    if (img == NULL)
        return;
    cfg_image_priv_t *priv = img->priv;
    cfg_dcache_t *dc = atomic_load_explicit(&priv->dcache, memory_order_acquire);
    if (dc == NULL || dc->frozen != NULL)
        return;
    dc_frozen_t *fz = calloc(img->nsections + 1, sizeof(*fz));
    if (fz == NULL)
        return; /* the cache stays as it is */
    for (size_t i = 0; i < img->nsections; i++) {
        const _Atomic uint32_t *at = dc->at[i];
        if (at == NULL || at == &dc_not_kept)
            continue;
        if (freeze_section(dc, at, img->sections[i].size, nthreads, &fz[i]) < 0) {
            /* Without the memory: the section's instructions are decoded each time. */
            free(fz[i].starts);
            free(fz[i].rank);
            free(fz[i].insns);
            memset(&fz[i], 0, sizeof(fz[i]));
        }
        free((void *)dc->at[i]);
        dc->at[i] = NULL;
    }
    for (size_t i = 0; i < DC_MAX_CHUNKS; i++) {
        free(dc->chunks[i]);
        dc->chunks[i] = NULL;
    }
    dc->frozen = fz;
}

int
cfg_image_decode_kept(const cfg_image_t *img, uint64_t addr)
{
    const cfg_image_priv_t *priv = img->priv;
    const cfg_dcache_t *dc = atomic_load_explicit(&priv->dcache, memory_order_acquire);
    const cfg_section_t *s = cfg_image_section_at(img, addr);
    if (dc == NULL || s == NULL)
        return 0;
    size_t i = (size_t)(s - img->sections);
    uint64_t off = addr - s->vma;
    if (dc->frozen != NULL) /* (not frozen_at: the decode keeps it inlined) */
        return frozen_has(&dc->frozen[i], off);
    const _Atomic uint32_t *at = atomic_load_explicit(&dc->at[i], memory_order_acquire);
    return at != NULL && at != &dc_not_kept
        && atomic_load_explicit(&at[off], memory_order_acquire) != 0;
}

void
cfg_image_decode_done(const cfg_image_t *img)
{
    if (img != NULL)
        dcache_free(img->priv, img->nsections);
}

void
cfg_image_destroy(cfg_image_t *img)
{
    if (img == NULL)
        return;
    cfg_image_priv_t *priv = img->priv;
    if (priv != NULL) {
        dcache_free(priv, img->nsections);
        cfg_dwtypes_free(priv->dwtypes);
        if (priv->close != NULL)
            priv->close(priv);
        for (size_t i = 0; i < priv->strings.n; i++)
            free(priv->strings.v[i]);
        CFG_VEC_FREE(priv->strings);
        free(priv->bytes);
        free(priv->sec_order);
        free(priv);
    }
    free(img->sections);
    free(img->segments);
    free(img->symbols);
    free(img->variables);
    free(img->relocs);
    free(img->init_funcs);
    free(img);
}

int
cfg_image_from_bytes(const uint8_t *b, size_t n, uint64_t vma, cfg_image_t **out)
{
    if (b == NULL || out == NULL || n == 0)
        return QP_EINVAL;
    cfg_image_t *img = cfg_image_alloc();
    if (img == NULL)
        return QP_ENOMEM;
    cfg_image_priv_t *priv = img->priv;
    priv->bytes = malloc(n);
    img->sections = calloc(1, sizeof(*img->sections));
    if (priv->bytes == NULL || img->sections == NULL) {
        cfg_image_destroy(img);
        return QP_ENOMEM;
    }
    memcpy(priv->bytes, b, n);
    img->path = "<bytes>";
    img->entry = vma;
    img->nsections = 1;
    img->sections[0] = (cfg_section_t) {
        .name = ".text", .vma = vma, .size = n, .bytes = priv->bytes,
        .flags = CFG_SEC_ALLOC | CFG_SEC_LOAD | CFG_SEC_CODE,
    };
    int rc = cfg_image_finish(img);
    if (rc < 0) {
        cfg_image_destroy(img);
        return rc;
    }
    *out = img;
    return 0;
}

/*****************************************************************************
 * Lookup tables
 */

static const cfg_image_t *sort_img; /* qsort has no context argument */

static int
cmp_sec_vma(const void *a, const void *b)
{
    const cfg_section_t *x = &sort_img->sections[*(const uint64_t *)a];
    const cfg_section_t *y = &sort_img->sections[*(const uint64_t *)b];
    return x->vma < y->vma ? -1 : x->vma > y->vma;
}

static int
sym_rank(const cfg_symbol_t *s)
{
    /* Lower is preferred as a procedure's name: global functions from .symtab first. */
    int r = s->src * 4;
    if (s->kind != CFG_SYM_FUNC && s->kind != CFG_SYM_IFUNC)
        r += 2;
    if (!s->global)
        r += 1;
    return r;
}

static int
cmp_sym(const void *a, const void *b)
{
    const cfg_symbol_t *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    int rx = sym_rank(x), ry = sym_rank(y);
    if (rx != ry)
        return rx - ry;
    return strcmp(x->name, y->name); /* deterministic order */
}

static int
cmp_reloc(const void *a, const void *b)
{
    const cfg_reloc_t *x = a, *y = b;
    return x->where < y->where ? -1 : x->where > y->where;
}

int
cfg_image_finish(cfg_image_t *img)
{
    cfg_image_priv_t *priv = img->priv;
    size_t n = 0;
    dcache_free(priv, img->nsections); /* the sections may have changed */
    free(priv->sec_order);
    priv->sec_order = malloc((img->nsections + 1) * sizeof(uint64_t));
    if (priv->sec_order == NULL)
        return QP_ENOMEM;
    for (size_t i = 0; i < img->nsections; i++)
        if ((img->sections[i].flags & (CFG_SEC_ALLOC | CFG_SEC_LOAD))
                == (CFG_SEC_ALLOC | CFG_SEC_LOAD)
            && img->sections[i].size > 0 && img->sections[i].bytes != NULL)
            priv->sec_order[n++] = i;
    sort_img = img;
    qsort(priv->sec_order, n, sizeof(uint64_t), cmp_sec_vma);
    priv->nsec_order = n;
    if (img->nsymbols)
        qsort(img->symbols, img->nsymbols, sizeof(*img->symbols), cmp_sym);
    if (img->nrelocs)
        qsort(img->relocs, img->nrelocs, sizeof(*img->relocs), cmp_reloc);
    if (img->ninit_funcs)
        qsort(img->init_funcs, img->ninit_funcs, sizeof(uint64_t), cfg_u64_cmp);
    return 0;
}

uint64_t
cfg_image_last_insn(const cfg_image_t *img, uint64_t start, uint64_t size, uint32_t ninsns)
{
    uint64_t a = start, end = start + size, last = 0;
    uint32_t n = 0;
    while (a < end) {
        arch_insn_t in;
        if (cfg_image_decode(img, a, end, &in) < 0)
            return 0;
        last = a;
        a += in.len;
        n++;
    }
    return a == end && (ninsns == 0 || n == ninsns) ? last : 0;
}

const cfg_symbol_t *
cfg_image_symbol_at(const cfg_image_t *img, uint64_t addr)
{
    size_t lo = 0, hi = img->nsymbols;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (img->symbols[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < img->nsymbols && img->symbols[lo].addr == addr ? &img->symbols[lo] : NULL;
}

const cfg_section_t *
cfg_image_section_named(const cfg_image_t *img, const char *name)
{
    for (size_t i = 0; img != NULL && i < img->nsections; i++)
        if (img->sections[i].bytes != NULL && strcmp(img->sections[i].name, name) == 0)
            return &img->sections[i];
    return NULL;
}

const cfg_section_t *
cfg_image_section_at(const cfg_image_t *img, uint64_t addr)
{
    if (img == NULL)
        return NULL;
    const cfg_image_priv_t *priv = img->priv;
    size_t lo = 0, hi = priv->nsec_order;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const cfg_section_t *s = &img->sections[priv->sec_order[mid]];
        if (addr < s->vma)
            hi = mid;
        else if (addr - s->vma >= s->size)
            lo = mid + 1;
        else
            return s;
    }
    return NULL;
}

const uint8_t *
cfg_image_ptr(const cfg_image_t *img, uint64_t addr, size_t *avail)
{
    const cfg_section_t *s = cfg_image_section_at(img, addr);
    if (s == NULL) {
        if (avail)
            *avail = 0;
        return NULL;
    }
    if (avail)
        *avail = s->size - (addr - s->vma);
    return s->bytes + (addr - s->vma);
}

int
cfg_image_is_code(const cfg_image_t *img, uint64_t addr)
{
    const cfg_section_t *s = cfg_image_section_at(img, addr);
    return s != NULL && (s->flags & CFG_SEC_CODE);
}

/*
 * A message of the GHC RTS's option parser, linked into every GHC program. It is kept
 * reversed here so that qpt's own programs, which carry this file, do not contain it and
 * are not taken for GHC programs themselves.
 */
#define GHC_RTS_MSG_REVERSED "s% :noitpo STR nwonknu"

static int
has_ghc_rts_msg(const cfg_section_t *s)
{
    char msg[sizeof(GHC_RTS_MSG_REVERSED)];
    size_t n = sizeof(msg) - 1;
    for (size_t i = 0; i < n; i++)
        msg[i] = GHC_RTS_MSG_REVERSED[n - 1 - i];
    return memmem(s->bytes, s->size, msg, n) != NULL;
}

cfg_runtime_t
cfg_image_runtime(const cfg_image_t *img)
{
    for (size_t i = 0; i < img->nsections; i++) {
        const char *n = img->sections[i].name;
        if (strcmp(n, ".gopclntab") == 0 || strcmp(n, ".go.buildinfo") == 0
            || strcmp(n, ".note.go.buildid") == 0)
            return CFG_RUNTIME_GO;
    }
    for (size_t i = 0; i < img->nsymbols; i++)
        if (strcmp(img->symbols[i].name, "hs_main") == 0
            || strcmp(img->symbols[i].name, "stg_returnToStackTop") == 0)
            return CFG_RUNTIME_GHC;
    /* Stripped GHC programs: the RTS's option parser is always linked in. */
    for (size_t i = 0; i < img->nsections; i++) {
        const cfg_section_t *s = &img->sections[i];
        if (s->bytes != NULL && !(s->flags & (CFG_SEC_CODE | CFG_SEC_WRITE))
            && strncmp(s->name, ".rodata", 7) == 0
            && has_ghc_rts_msg(s))
            return CFG_RUNTIME_GHC;
    }
    return CFG_RUNTIME_C;
}
