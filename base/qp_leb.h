/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_BASE_LEB_H
#define QP_BASE_LEB_H
/*
 * PURPOSE: LEB128, the one decoder and encoder pair of the project (DWARF, .eh_frame,
 * our own formats, protobuf varints). Freestanding and header-only: the compiler's
 * <stdint.h> and <stddef.h> only, so that the runtime, which has no C library, decodes
 * with the same code as base/qp_bytes.h's bounded reader and qp_desc.c's streaming one.
 * A decoder is fed one byte at a time (leb_step), since each reader gets its bytes its
 * own way (a bounded buffer, a decompressed stream, the inferior's own memory).
 */
#include <stddef.h>
#include <stdint.h>

/* Byte B of an LEB128 number that starts at bit *SHIFT: its 7 bits into *V (bits past
 * the 64th are dropped, see leb_fits) and *SHIFT advanced. 1 when more bytes follow. */
static inline int
leb_step(uint64_t *v, unsigned *shift, uint8_t b)
{
    if (*shift < 64)
        *v |= (uint64_t)(b & 0x7f) << *shift;
    *shift += 7;
    return (b & 0x80) != 0;
}

/* Do the 7 bits of byte B at bit SHIFT of an unsigned number fit in 64 bits? */
static inline int
leb_fits(unsigned shift, uint8_t b)
{
    unsigned bits = b & 0x7fu;
    return shift + 7 <= 64 || (shift < 64 ? bits >> (64 - shift) == 0 : bits == 0);
}

/* The signed value of the number V whose last byte B ended at bit SHIFT (leb_step's). */
static inline int64_t
sleb_extend(uint64_t v, unsigned shift, uint8_t b)
{
    if (shift < 64 && (b & 0x40))
        v |= ~(uint64_t)0 << shift;
    return (int64_t)v;
}

/* The ULEB128 of V into DST, padded with continuation bytes to at least WIDTH bytes
 * (a padded number reads the same); the bytes written (at most max(10, WIDTH)). */
static inline size_t
uleb_encode(uint8_t *dst, uint64_t v, size_t width)
{
    size_t n = 0;
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        if (v != 0 || n + 1 < width)
            byte |= 0x80;
        dst[n++] = byte;
    } while (v != 0 || n < width);
    return n;
}

/* The SLEB128 of V into DST (at most 10 bytes); the bytes written. */
static inline size_t
sleb_encode(uint8_t *dst, int64_t v)
{
    size_t n = 0;
    for (;;) {
        uint8_t byte = (uint8_t)((uint64_t)v & 0x7f);
        v = (int64_t)((uint64_t)v >> 7) | (v < 0 ? (int64_t)(~(UINT64_MAX >> 7)) : 0);
        if ((v == 0 && !(byte & 0x40)) || (v == -1 && (byte & 0x40))) {
            dst[n++] = byte;
            return n;
        }
        dst[n++] = byte | 0x80;
    }
}

/* Bytes of V's shortest ULEB128. */
static inline size_t
uleb_size(uint64_t v)
{
    size_t n = 1;
    while (v >>= 7)
        n++;
    return n;
}

#endif
