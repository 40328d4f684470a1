/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
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

void
cfg_image_destroy(cfg_image_t *img)
{
    if (img == NULL)
        return;
    cfg_image_priv_t *priv = img->priv;
    if (priv != NULL) {
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

static int
cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int
cfg_image_finish(cfg_image_t *img)
{
    cfg_image_priv_t *priv = img->priv;
    size_t n = 0;
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
        qsort(img->init_funcs, img->ninit_funcs, sizeof(uint64_t), cmp_u64);
    return 0;
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

/* memmem() is a GNU extension; this is all it takes here. */
static int
bytes_contain(const uint8_t *hay, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; k <= n && i <= n - k; i++)
        if (hay[i] == (uint8_t)needle[0] && memcmp(hay + i, needle, k) == 0)
            return 1;
    return 0;
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
            && bytes_contain(s->bytes, s->size, "unknown RTS option: %s"))
            return CFG_RUNTIME_GHC;
    }
    return CFG_RUNTIME_C;
}
