/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The functions of a Go program from its .gopclntab: the runtime's own table of every
 * function's entry and name (it maps return addresses to functions for tracebacks,
 * stack growth and the GC), which strip leaves in place. A stripped Go program (as
 * Debian ships them) has no other names; the analysis needs some of them
 * (cfg_name_is_resumed: runtime.morestack, runtime.mcall), and reports read better.
 *
 * The layouts (Go's runtime/symtab.go, pcHeader and _func; little-endian, 8-byte
 * words): Go 1.18 and 1.19 (magic 0xfffffff0) and 1.20 on (0xfffffff1): the header
 * holds nfunc at 8, textStart at 24, funcnameOffset at 32 and pclnOffset at 64; the
 * function table at pclnOffset holds nfunc pairs of 32-bit (entry - textStart,
 * offset of the _func from the table) and the end's offset, and a _func starts with
 * that entry offset and
 * the 32-bit offset of its name in the name table. Go 1.16 and 1.17 (0xfffffffa):
 * no textStart (nfunc at 8, funcnameOffset at 24, pclnOffset at 56), and the table's
 * pairs and a _func's entry are 8-byte words holding the address itself. Older tables
 * and anything inconsistent give no function.
 *
 * Where the table is: Go's own linker gives it a section (.gopclntab, or a PIE's
 * .data.rel.ro.gopclntab); linked externally (cgo), a PIE's is runtime.pclntab inside
 * .data.rel.ro (cfg_gopcln_find). A PIE's textStart word has an R_X86_64_RELATIVE
 * relocation whose addend is runtime.text, not always .text's start (C code comes
 * first when linked externally); GNU ld and Go's linker also write the address in
 * the word, lld leaves it 0 (cfg_gopcln_text_loaded).
 */
#include <string.h>

#include "cfg/cfg_priv.h"

#define GOPCLN_118 0xfffffff0u /* Go 1.18, 1.19 */
#define GOPCLN_120 0xfffffff1u /* Go 1.20 and later */
#define GOPCLN_116 0xfffffffau /* Go 1.16, 1.17 */

/* The little-endian word of W bytes (4 or 8) at OFF in TAB[0..LEN), or 0 with *OK = 0. */
static uint64_t
word(const uint8_t *tab, size_t len, uint64_t off, unsigned w, int *ok)
{
    if (off > len || len - off < w) {
        *ok = 0;
        return 0;
    }
    uint64_t v = 0;
    for (unsigned i = w; i-- > 0;)
        v = v << 8 | tab[off + i];
    return v;
}

/* Does TAB[0..LEN) start with a header of a layout read here (Go 1.16 on, 8-byte words)? */
static int
is_header(const uint8_t *tab, size_t len)
{
    int ok = 1;
    uint32_t magic = (uint32_t)word(tab, len, 0, 4, &ok);
    return ok && len >= 72 /* shorter than any header */
        && (magic == GOPCLN_118 || magic == GOPCLN_120 || magic == GOPCLN_116) && tab[4] == 0
        && tab[5] == 0 && tab[7] == 8;
}

int
cfg_gopcln_funcs(const uint8_t *tab, size_t len, uint64_t text, cfg_gopcln_fn_t fn,
                 void *arg)
{
    if (tab == NULL || fn == NULL)
        return QP_EINVAL;
    if (!is_header(tab, len))
        return 0; /* not a table we read: no names */
    int ok = 1;
    int old = word(tab, len, 0, 4, &ok) == GOPCLN_116;
    uint64_t nfunc = word(tab, len, 8, 8, &ok);
    uint64_t start = old ? 0 : word(tab, len, 24, 8, &ok);
    uint64_t names = word(tab, len, old ? 24 : 32, 8, &ok);
    uint64_t ftab = word(tab, len, old ? 56 : 64, 8, &ok);
    unsigned w = old ? 8 : 4; /* a table pair's halves */
    if (!ok || ftab > len || nfunc >= (len - ftab) / (2 * w) || names >= len)
        return 0;
    if (!old && start == 0)
        start = text; /* (left to a relocation) */
    if (!old && start == 0)
        return 0; /* where the entries count from is unknown: no name rather than wrong ones */
    /* Checked whole first: an inconsistent table gives no name at all. */
    for (int give = 0; give < 2; give++)
        for (uint64_t i = 0; i < nfunc; i++) {
            uint64_t entry = word(tab, len, ftab + 2 * w * i, w, &ok);
            uint64_t func = ftab + word(tab, len, ftab + 2 * w * i + w, w, &ok);
            uint64_t fentry = word(tab, len, func, w, &ok);
            uint64_t nameoff = word(tab, len, func + w, 4, &ok);
            if (!ok || fentry != entry || nameoff >= len - names
                || memchr(tab + names + nameoff, 0, len - names - nameoff) == NULL)
                return 0;
            /* Its end: the next function's entry, or the table's end address. */
            uint64_t end = word(tab, len, ftab + 2 * w * (i + 1), w, &ok);
            if (!ok || end < entry)
                return 0;
            if (give)
                QP_CHECK(fn(arg, old ? entry : start + entry, old ? end : start + end,
                            (const char *)tab + names + nameoff));
        }
    return 0;
}

size_t
cfg_gopcln_find(const uint8_t *buf, size_t len, size_t from)
{
    if (buf == NULL)
        return len;
    for (size_t off = (from + 7) & ~(size_t)7; off < len; off += 8)
        if (is_header(buf + off, len - off))
            return off;
    return len;
}

uint64_t
cfg_gopcln_text_loaded(const cfg_image_t *img, uint64_t vma)
{
    /* (A linear search: the relocations are sorted by cfg_image_finish, after the
     * names are read.) */
    for (size_t i = 0; img != NULL && i < img->nrelocs; i++)
        if (img->relocs[i].where == vma + 24 && img->relocs[i].kind == CFG_RELOC_RELATIVE)
            return img->relocs[i].value;
    return 0;
}
