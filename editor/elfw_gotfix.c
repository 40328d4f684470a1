/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A rewritten shared library's calls of its own exported functions: they go through its
 * PLT and a JUMP_SLOT word that the dynamic linker fills with the exported address, the
 * OLD entry (the dynamic symbol keeps it: pointers compare equal), so each call also runs
 * the redirect there. The library gets a start (patch/pt_gotfix.c) that, once the words
 * are bound, puts the new entry into each word that holds its old one: the same code
 * runs, one jump fewer. Only JUMP_SLOT words, which only the PLT reads: GLOB_DAT words
 * are addresses the program may compare. A word that holds anything else (a definition
 * that interposed, LD_PRELOAD's or another library's) is left alone. Only libraries
 * bound at load (BIND_NOW): bound lazily, a word holds the old entry only after its first
 * call, long after the library's start.
 */
#include <stdlib.h>
#include <string.h>

#include "editor/elfw.h"
#include "patch/patch.h"

#define PT_GNU_RELRO_ 0x6474e552u

/* The target of the redirect written at OLD, or 0 when there is none. */
static uint64_t
redirect_at(ed_image_t *im, const cfg_image_t *img, ed_plan_t *plan, uint64_t old)
{
    const arch_isa_t *isa = cfg_image_isa(img);
    uint64_t to = ed_plan_map(plan, old);
    uint8_t b[16];
    arch_insn_t in;
    if (to == 0 || to == old || isa->jmp_len > sizeof(b)
        || ed_image_ops.read(im, old, b, isa->jmp_len) < 0
        || isa->decode(b, isa->jmp_len, old, &in) < 0)
        return 0;
    return in.kind == ARCH_KIND_JMP && in.target == to ? to : 0;
}

/* Is the word at WHERE in a writable PT_LOAD (where the start may write it: RELRO's
 * pages made writable again, the rest writable all along)? A text relocation's word
 * (DT_TEXTREL) is not. */
static int
in_writable_load(const cfg_image_t *img, uint64_t where)
{
    for (size_t i = 0; i < img->nsegments; i++) {
        const cfg_segment_t *g = &img->segments[i];
        if (g->type == 1 /* PT_LOAD */ && (g->flags & CFG_SEG_W) && where >= g->vaddr
            && where - g->vaddr < g->memsz && g->memsz - (where - g->vaddr) >= 8)
            return 1;
    }
    return 0;
}

/* PT_GNU_RELRO's extent in *LO, *HI (0 and 0 when there is none). */
static void
relro_of(const cfg_image_t *img, uint64_t *lo, uint64_t *hi)
{
    *lo = *hi = 0;
    for (size_t i = 0; i < img->nsegments; i++)
        if (img->segments[i].type == PT_GNU_RELRO_) {
            *lo = img->segments[i].vaddr;
            *hi = *lo + img->segments[i].memsz;
        }
}

/* Write the dynamic section's entry at AT (a DT_INIT or a spare DT_NULL) as DT_INIT =
 * START. */
static int
write_init(ed_image_t *im, uint64_t at, uint64_t start)
{
    const uint64_t d[2] = { 12 /* DT_INIT */, start };
    return ed_image_ops.write(im, at, d, sizeof(d));
}

int
elfw_set_init(ed_image_t *im, const cfg_image_t *img, uint64_t start)
{
    return img->dyninit.init_at != 0 ? write_init(im, img->dyninit.init_at, start)
                                     : QP_EUNSUPP;
}

/*
 * The dynamic entry the start takes, into *AT, and where it goes on to, into *NEXT: the
 * DT_INIT entry as it is now (naming the runtime's start, or the library's own), or,
 * for a library without one, a spare DT_NULL (the first, when another follows it: the
 * section stays terminated), the one the reader found or, when the search path took
 * that one, the next.
 * 0, or QP_ENOTFOUND when there is no spare left.
 */
static int
init_entry(ed_image_t *im, const cfg_image_t *img, uint64_t *at, uint64_t *next)
{
    uint64_t lo = 0, hi = 0; /* PT_DYNAMIC's extent */
    for (size_t i = 0; i < img->nsegments; i++)
        if (img->segments[i].type == 2 /* PT_DYNAMIC */ && hi == 0) {
            lo = img->segments[i].vaddr;
            hi = lo + img->segments[i].memsz;
        }
    *next = 0;
    for (*at = img->dyninit.init_at; *at >= lo && *at + 32 <= hi; *at += 16) {
        uint64_t d[4];
        QP_CHECK(ed_image_ops.read(im, *at, d, sizeof(d)));
        if (d[0] == 12 /* DT_INIT */) {
            *next = d[1];
            return 0;
        }
        if (d[0] == 0) /* the end: the dynamic linker reads no further */
            return d[2] == 0 && img->dyninit.init == 0 ? 0 : QP_ENOTFOUND;
    }
    return QP_ENOTFOUND;
}

int
elfw_got_fix(ed_image_t *im, const cfg_image_t *img, ed_plan_t *plan, uint64_t lo,
    uint64_t hi, uint64_t *at, uint32_t *n, const char **why)
{
    *at = 0;
    *n = 0;
    *why = NULL;
    if (!(img->flags & CFG_IMG_SHLIB))
        return 0;
    if (img->flags & CFG_IMG_LAZY) {
        *why = "it binds lazily (no BIND_NOW: a word holds the old entry only after its "
               "first call)";
        return 0;
    }
    if (img->dyninit.init_at == 0) {
        *why = "it has no DT_INIT and no spare dynamic entry to start from";
        return 0;
    }
    uint64_t init_at, next;
    int rc = init_entry(im, img, &init_at, &next);
    if (rc == QP_ENOTFOUND) {
        *why = "it has no DT_INIT and no spare dynamic entry left to start from";
        return 0;
    }
    QP_CHECK(rc);
    const arch_isa_t *isa = cfg_image_isa(img);
    if (pt_got_fix_size(isa, 0) == 0) {
        *why = "no such start for this instruction set";
        return 0;
    }
    arch_got_fix_entry_t *e = NULL;
    size_t ne = 0;
    for (size_t i = 0; i < img->nrelocs; i++) {
        const cfg_reloc_t *r = &img->relocs[i];
        /* value: the symbol's value when it is defined here (0 when undefined). */
        uint64_t to = r->kind == CFG_RELOC_JUMP_SLOT && r->value != 0
                && in_writable_load(img, r->where)
            ? redirect_at(im, img, plan, r->value)
            : 0;
        if (to == 0)
            continue;
        if (ne % 64 == 0) {
            arch_got_fix_entry_t *g = realloc(e, (ne + 64) * sizeof(*e));
            if (g == NULL) {
                free(e);
                return QP_ENOMEM;
            }
            e = g;
        }
        e[ne++] = (arch_got_fix_entry_t) { r->where, r->value, to };
    }
    if (ne == 0) {
        free(e);
        *why = "no call through its PLT goes to a moved procedure of its own";
        return 0;
    }
    size_t size = pt_got_fix_size(isa, ne);
    uint64_t rlo, rhi;
    relro_of(img, &rlo, &rhi);
    uint8_t *bytes = malloc(size);
    rc = bytes != NULL ? 0 : QP_ENOMEM;
    if (rc == 0)
        rc = ed_image_alloc_aligned(im, lo, hi, size, ED_PROT_R | ED_PROT_X, 16, at);
    if (rc == 0)
        rc = pt_got_fix_emit(isa, *at, e, ne, rlo, rhi, next, bytes, size);
    if (rc >= 0)
        rc = ed_image_ops.write(im, *at, bytes, size);
    if (rc == 0)
        rc = write_init(im, init_at, *at);
    free(bytes);
    free(e);
    if (rc == 0)
        *n = (uint32_t)ne;
    return rc;
}
