/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The static editor's address space: the input's loaded image (read through cfg/), new
 * regions placed after its last segment, and patches over its existing bytes. elfw.c
 * turns regions and patches into the output file; dynamic/ implements the same ops over
 * a live process.
 */
#include <stdlib.h>
#include <string.h>

#include "editor/ed.h"

#define PAGE 4096u
#define REACH 0x7fff0000ull /* rel32 reach, with a margin */

struct ed_image {
    const cfg_image_t *img;   /* the input */
    ed_region_t *regions;     /* allocated regions, in address order */
    size_t nregions;
    ed_patch_t *patches;      /* writes over existing bytes */
    size_t npatches, cappatches;
    int sorted;               /* patches sorted and merged */
    uint64_t next;            /* where the next region may start */
    uint64_t file_end;        /* where elfw will put the next region's file bytes, as
                               * far as the image can tell (a guess: a wrong one costs
                               * padding in the file, nothing else) */
};

static uint64_t
page_up(uint64_t x)
{
    return (x + PAGE - 1) & ~(uint64_t)(PAGE - 1);
}

int
ed_image_create(const cfg_image_t *img, ed_image_t **out)
{
    if (img == NULL || out == NULL)
        return QP_EINVAL;
    ed_image_t *im = calloc(1, sizeof(*im));
    if (im == NULL)
        return QP_ENOMEM;
    im->img = img;
    uint64_t end = 0;
    for (size_t i = 0; i < img->nsegments; i++)
        if (img->segments[i].type == 1 /* PT_LOAD */
            && img->segments[i].vaddr + img->segments[i].memsz > end)
            end = img->segments[i].vaddr + img->segments[i].memsz;
    /* A guard page between the program's last segment (often .bss, which the program may
     * extend with brk) and the new code. */
    im->next = page_up(end) + PAGE;
    im->file_end = img->file_size;
    *out = im;
    return 0;
}

void
ed_image_set_file_end(ed_image_t *im, uint64_t off)
{
    if (im != NULL && im->nregions == 0)
        im->file_end = off;
}

void
ed_image_destroy(ed_image_t *im)
{
    if (im == NULL)
        return;
    for (size_t i = 0; i < im->nregions; i++)
        free(im->regions[i].bytes);
    for (size_t i = 0; i < im->npatches; i++)
        free(im->patches[i].bytes);
    free(im->regions);
    free(im->patches);
    free(im);
}

static ed_region_t *
region_at(const ed_image_t *im, uint64_t addr, size_t len)
{
    for (size_t i = 0; i < im->nregions; i++) {
        ed_region_t *r = &im->regions[i];
        if (addr >= r->vaddr && len <= r->size && addr - r->vaddr <= r->size - len)
            return r;
    }
    return NULL;
}

static int
image_read(void *self, uint64_t addr, void *buf, size_t len)
{
    ed_image_t *im = self;
    ed_region_t *r = region_at(im, addr, len);
    if (r != NULL && r->mirror != 0)
        addr = r->mirror + (addr - r->vaddr);
    else if (r != NULL) {
        memcpy(buf, r->bytes + (addr - r->vaddr), len);
        return 0;
    }
    size_t avail;
    const uint8_t *p = cfg_image_ptr(im->img, addr, &avail);
    if (p == NULL || avail < len)
        return QP_ERANGE;
    memcpy(buf, p, len);
    /* Later patches win. */
    for (size_t i = 0; i < im->npatches; i++) {
        const ed_patch_t *pt = &im->patches[i];
        if (pt->vaddr >= addr + len || pt->vaddr + pt->len <= addr)
            continue;
        for (uint64_t k = 0; k < pt->len; k++)
            if (pt->vaddr + k >= addr && pt->vaddr + k < addr + len)
                ((uint8_t *)buf)[pt->vaddr + k - addr] = pt->bytes[k];
    }
    return 0;
}

static int
image_write(void *self, uint64_t addr, const void *buf, size_t len)
{
    ed_image_t *im = self;
    ed_region_t *r = region_at(im, addr, len);
    if (r != NULL && r->mirror != 0)
        addr = r->mirror + (addr - r->vaddr); /* a patch of the bytes it shows */
    else if (r != NULL) {
        memcpy(r->bytes + (addr - r->vaddr), buf, len);
        return 0;
    }
    size_t avail;
    if (cfg_image_ptr(im->img, addr, &avail) == NULL || avail < len)
        return QP_ERANGE; /* only loaded bytes of the input can be patched */
    if (im->npatches == im->cappatches) {
        size_t cap = im->cappatches ? im->cappatches * 2 : 64;
        ed_patch_t *v = realloc(im->patches, cap * sizeof(ed_patch_t));
        if (v == NULL)
            return QP_ENOMEM;
        im->patches = v;
        im->cappatches = cap;
    }
    uint8_t *copy = malloc(len ? len : 1);
    if (copy == NULL)
        return QP_ENOMEM;
    memcpy(copy, buf, len);
    im->patches[im->npatches++] = (ed_patch_t) { addr, len, copy };
    im->sorted = 0;
    return 0;
}

/*
 * A new region of LEN bytes near [LO, HI) with contents BYTES (owned from then on), or
 * zero-filled ones when BYTES is NULL, or - MIRROR not 0 - the input's bytes there. It
 * starts on a page of its own, at the page offset its bytes will have in the file
 * (elfw puts them one after the other after the input's, each at an offset congruent to
 * its address), so that the file needs no padding before them, ALIGN-aligned (a power
 * of two up to the page size). A writable zero-filled region is taken to have no
 * file bytes (the counters: elfw_rewrite.c writes them as NOBITS).
 */
static int
region_add(ed_image_t *im, uint64_t lo, uint64_t hi, size_t len, uint32_t prot, uint8_t *bytes,
           uint64_t mirror, uint64_t align, uint64_t *out)
{
    if ((prot & ED_PROT_W) && (prot & ED_PROT_X))
        return QP_EINVAL; /* never writable and executable at once */
    uint64_t at = page_up(im->next);
    int file_bytes = mirror == 0 && !(bytes == NULL && (prot & ED_PROT_W));
    uint64_t off = (im->file_end + align - 1) & ~(align - 1);
    if (file_bytes)
        at += off & (PAGE - 1);
    if (at + len - lo > REACH || (hi > at && hi - at > REACH))
        return QP_ERANGE;
    ed_region_t *v = realloc(im->regions, (im->nregions + 1) * sizeof(ed_region_t));
    if (v == NULL)
        return QP_ENOMEM;
    im->regions = v;
    if (mirror == 0 && bytes == NULL && (bytes = calloc(1, len ? len : 1)) == NULL)
        return QP_ENOMEM;
    im->regions[im->nregions++] = (ed_region_t) { at, len, prot, bytes, mirror };
    im->next = at + len;
    if (file_bytes)
        im->file_end = off + len;
    *out = at;
    return 0;
}

static int
image_alloc_near(void *self, uint64_t lo, uint64_t hi, size_t len, uint32_t prot, uint64_t *out)
{
    return region_add(self, lo, hi, len, prot, NULL, 0, 16, out);
}

int
ed_image_alloc_aligned(ed_image_t *im, uint64_t lo, uint64_t hi, size_t len, uint32_t prot,
                       uint64_t align, uint64_t *out)
{
    if (im == NULL || out == NULL || align == 0 || align > PAGE || (align & (align - 1)))
        return QP_EINVAL;
    return region_add(im, lo, hi, len, prot, NULL, 0, align, out);
}

/* The input's file bytes at OLD (a page of a PT_LOAD's, loaded from the file) mirrored at
 * a new address, then EXTRA new bytes from *SKIP bytes into the next page. */
static int
image_alloc_over(void *self, uint64_t lo, uint64_t hi, uint64_t old, size_t len, size_t extra,
                 uint32_t prot, uint64_t *out, size_t *skip)
{
    ed_image_t *im = self;
    if (old == 0 || old % PAGE != 0 || len == 0)
        return QP_EINVAL;
    int in_file = 0;
    for (size_t i = 0; i < im->img->nsegments && !in_file; i++) {
        const cfg_segment_t *g = &im->img->segments[i];
        uint64_t first = g->vaddr - g->vaddr % PAGE; /* its first page */
        in_file = g->type == 1 /* PT_LOAD */ && old >= first && g->offset >= g->vaddr - first
            && old + len <= g->vaddr + g->filesz;
    }
    if (!in_file)
        return QP_EINVAL; /* only a loaded segment's file bytes can be mapped again */
    if (page_up(im->next) + page_up(len) + PAGE + extra - lo > REACH)
        return QP_ERANGE;
    QP_CHECK(region_add(im, lo, hi, len, prot, NULL, old, PAGE, out));
    uint64_t more;
    *skip = 0;
    if (extra > 0) {
        QP_CHECK(region_add(im, lo, hi, extra, prot, NULL, 0, 64, &more));
        if (more < *out + page_up(len) || more - (*out + page_up(len)) >= PAGE)
            return QP_ERANGE;
        *skip = (size_t)(more - (*out + page_up(len)));
    }
    return 0;
}

int
ed_image_alloc_bytes(ed_image_t *im, uint64_t lo, uint64_t hi, uint8_t *bytes, size_t len,
                     uint32_t prot, uint64_t *out)
{
    if (im == NULL || bytes == NULL || out == NULL)
        return QP_EINVAL;
    return region_add(im, lo, hi, len, prot, bytes, 0, 16, out);
}

static uint8_t *
image_bytes(void *self, uint64_t addr, size_t len)
{
    ed_region_t *r = region_at(self, addr, len);
    return r != NULL && r->mirror == 0 ? r->bytes + (addr - r->vaddr) : NULL;
}

const qp_space_ops_t ed_image_ops = {
    .read = image_read,
    .write = image_write,
    .alloc_near = image_alloc_near,
    .alloc_over = image_alloc_over,
    .bytes = image_bytes,
};

const ed_region_t *
ed_image_regions(const ed_image_t *im, size_t *n)
{
    *n = im->nregions;
    return im->regions;
}

static int
cmp_patch(const void *a, const void *b)
{
    const ed_patch_t *x = a, *y = b;
    return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

const ed_patch_t *
ed_image_patches(ed_image_t *im, size_t *n)
{
    if (!im->sorted && im->npatches > 1) {
        /* Stable order for equal addresses is not needed: overlapping writes are not
         * produced by the editor (each redirect has its own 5 bytes). */
        qsort(im->patches, im->npatches, sizeof(ed_patch_t), cmp_patch);
    }
    im->sorted = 1;
    *n = im->npatches;
    return im->patches;
}

const char *
ed_image_unsupported(const cfg_image_t *img)
{
    switch (cfg_image_runtime(img)) {
    case CFG_RUNTIME_GO:
        return "a Go program: its runtime finds functions by return address through "
               ".gopclntab, which qpt does not rewrite (not supported)";
    case CFG_RUNTIME_GHC:
        return "a GHC (Haskell) program: its info tables sit right before the code they "
               "describe, so that code cannot move (not supported)";
    case CFG_RUNTIME_C: break;
    }
    return NULL;
}

const char *
ed_image_rewritten(const cfg_image_t *img)
{
    for (size_t i = 0; i < img->nsections; i++)
        if (strncmp(img->sections[i].name, ".qpt.", 5) == 0)
            return "already rewritten by qpt-rewrite (it has a .qpt.* section): rewrite "
                   "the original program instead";
    return NULL;
}
