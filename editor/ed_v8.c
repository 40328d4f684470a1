/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Leave V8's embedded builtins in place: find the "embedded blob" of a program that
 * carries the V8 JavaScript engine (chromium, node, electron apps...).
 *
 * V8 compiles its builtins when it is built and links them into .text as one block of
 * code, the embedded code blob (src/snapshot/embedded/embedded-file-writer.cc writes it
 * as an assembly file of raw bytes). At run time V8 treats that block as data: it finds
 * a builtin's entry as blob start + offset, decides whether a pc (a return address in a
 * stack walk, a pc in a signal handler) is a builtin's by testing start <= pc < start +
 * code size and finds which one by its offset, then reads the builtin's safepoint and
 * handler tables by the same offset; and it computes return points inside builtins
 * (the interpreter's, the deoptimizer's) as blob start + offset. A builtin that runs
 * elsewhere (relocated code, with a redirect at its old entry only) leaves return
 * addresses V8 does not recognise, and those computed return points land in its old
 * bytes. Measured on chromium 156 (bisection with QPT_LEAVE): relocating one CEntry
 * builtin alone (the code through which builtins call C++) crashes the renderer, and so
 * does JSEntry alone (C++'s way into JavaScript: its return point is V8's entry frame,
 * its exception handler is reached at blob start + offset, never by a jump), while
 * relocating all 1,366 procedures of the blob that make no call runs; node 20 rewritten
 * without this rule dies of SIGSEGV at its first script. So the whole blob stays.
 *
 * It stays unmeasured too: V8 may run a copy of it. With short builtin calls (a 64-bit
 * machine with enough memory) V8 wants its builtins within rel32 reach of its JIT code;
 * when its code range lies out of reach of the file's blob it remaps the blob into that
 * range (MaybeRemapEmbeddedBuiltinsIntoCodeRange), and a jump to a trampoline written
 * into the blob then lands elsewhere. Measured: node 20 (not PIE: blob at 0x18c4000,
 * code range near 0x7fffd0000000) maps the blob a second time near its code range, and
 * with the builtins patched in place dies of SIGSEGV in its first script at the
 * remapped copy's jump; a chromium 156 renderer (PIE) reserves its code range within
 * reach and runs the file's bytes, but nothing in the file says which V8 will do.
 *
 * Its bounds come from V8's own description of it, the embedded data blob (read-only
 * data; src/snapshot/embedded/embedded-data.h): three 8-byte hashes, then a layout
 * table with one record per builtin whose first two 32-bit fields are the offset and
 * the length of the builtin's instructions from the start of the code blob. Builtins
 * follow one another: each offset is the previous one plus its length plus at least one
 * byte, rounded up to the code alignment (PadAndAlignCode: 32 or 64 bytes on x86-64),
 * and the bytes in between are int3. The record size depends on the V8 version (12
 * bytes in chromium 156, 28 or 32 in older ones): every size from 12 to 32 bytes is
 * tried. The code blob is where those gaps of int3 fall, at every one of the table's
 * (thousands of) offsets, from an aligned address of an executable section. The layout
 * table is a chain of at least ED_V8_MIN_BUILTINS records; the code must match all of
 * them, at one address only.
 */
#include <stdint.h>
#include <string.h>

#include "editor/ed.h"

/* V8 has had over 1,000 builtins since 2018 (2,532 in chromium 156). */
#define ED_V8_MIN_BUILTINS 256

/* A builtin's instructions are shorter than this (the longest in chromium 156: 80 KB). */
#define ED_V8_MAX_BUILTIN (1u << 22)

typedef struct v8_table {
    const uint8_t *rec; /* the first record (offset 0) */
    uint32_t recsize;   /* bytes per record */
    uint32_t align;     /* code alignment */
    uint32_t n;         /* records in the chain */
    uint64_t size;      /* code blob size: the end of the last padded builtin */
} v8_table_t;

static uint32_t
rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* PadAndAlignCode: LEN bytes of instructions, at least one int3, rounded up to ALIGN. */
static uint64_t
padded(uint32_t len, uint32_t align)
{
    return ((uint64_t)len + 1 + align - 1) / align * align;
}

/* The number of chained layout records at P (AVAIL bytes), and the blob's size. */
static uint32_t
chain_length(const uint8_t *p, size_t avail, uint32_t recsize, uint32_t align,
             uint64_t *size /*OUT*/)
{
    uint64_t off = 0;
    uint32_t n = 0;
    for (size_t k = 0; k + 8 <= avail; k += recsize, n++) {
        uint32_t o = rd32(p + k), len = rd32(p + k + 4);
        if (o != off || len == 0 || len > ED_V8_MAX_BUILTIN)
            break;
        off = o + padded(len, align);
    }
    *size = off;
    return n;
}

/* The longest layout table in the read-only data of IMG; 0 when none is long enough. */
static int
find_table(const cfg_image_t *img, v8_table_t *t /*OUT*/)
{
    memset(t, 0, sizeof(*t));
    for (size_t s = 0; s < img->nsections; s++) {
        const cfg_section_t *sec = &img->sections[s];
        if ((sec->flags & (CFG_SEC_ALLOC | CFG_SEC_LOAD)) != (CFG_SEC_ALLOC | CFG_SEC_LOAD)
            || (sec->flags & (CFG_SEC_CODE | CFG_SEC_COMPRESSED)) || sec->bytes == NULL)
            continue;
        const uint8_t *b = sec->bytes;
        for (size_t i = 0; i + 16 <= sec->size; i += 4) {
            if (rd32(b + i) != 0)
                continue;
            uint32_t len0 = rd32(b + i + 4);
            if (len0 == 0 || len0 > ED_V8_MAX_BUILTIN)
                continue;
            for (uint32_t rs = 12; rs <= 32; rs += 4)
                for (uint32_t al = 32; al <= 64; al *= 2) {
                    if (i + rs + 4 > sec->size || rd32(b + i + rs) != padded(len0, al))
                        continue;
                    uint64_t size;
                    uint32_t n = chain_length(b + i, sec->size - i, rs, al, &size);
                    if (n >= ED_V8_MIN_BUILTINS && n > t->n)
                        *t = (v8_table_t){ b + i, rs, al, n, size };
                }
        }
    }
    return t->n > 0;
}

/* Are the gaps between the builtins of T int3 when the code blob starts at P? */
static int
gaps_are_traps(const v8_table_t *t, const uint8_t *p)
{
    for (uint32_t i = 0; i < t->n; i++) {
        const uint8_t *r = t->rec + (size_t)i * t->recsize;
        uint64_t from = (uint64_t)rd32(r) + rd32(r + 4);
        uint64_t to = rd32(r) + padded(rd32(r + 4), t->align);
        for (uint64_t k = from; k < to; k++)
            if (p[k] != 0xcc)
                return 0;
    }
    return 1;
}

int
ed_v8_builtins(const cfg_image_t *img, uint64_t *lo /*OUT*/, uint64_t *hi /*OUT*/)
{
    if (img == NULL || lo == NULL || hi == NULL)
        return QP_EINVAL;
    *lo = *hi = 0;
    v8_table_t t;
    if (!find_table(img, &t))
        return 0;
    int found = 0;
    for (size_t s = 0; s < img->nsections; s++) {
        const cfg_section_t *sec = &img->sections[s];
        if (!(sec->flags & CFG_SEC_CODE) || !(sec->flags & CFG_SEC_LOAD) || sec->bytes == NULL
            || sec->size < t.size)
            continue;
        uint64_t first = (sec->vma + t.align - 1) / t.align * t.align;
        for (uint64_t a = first; a + t.size <= sec->vma + sec->size; a += t.align) {
            if (!gaps_are_traps(&t, sec->bytes + (a - sec->vma)))
                continue;
            if (found++) /* two candidates: do not guess */
                return 0;
            *lo = a;
            *hi = a + t.size;
        }
    }
    if (found != 1)
        *lo = *hi = 0;
    return found == 1;
}
