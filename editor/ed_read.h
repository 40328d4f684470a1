/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_ED_READ_H
#define QP_ED_READ_H
/*
 * PURPOSE: the bounded little-endian reader the editor's parsers of unwind tables
 * (ed_unwind.c) and of DWARF (ed_dwarf*.c) share.
 */
#include <stddef.h>
#include <stdint.h>

/* A bounded reader of P[0, LEN) at POS; a read past LEN sets ERR and returns zeros. */
typedef struct rd {
    const uint8_t *p; /* start of the data */
    size_t len;       /* the limit: no byte at or after it is read */
    size_t pos;       /* current offset */
    int err;          /* a read ran past the limit */
} rd_t;

/* N (at most 8) bytes, little-endian. */
static inline uint64_t
rd_n(rd_t *r, size_t n)
{
    uint64_t v = 0;
    if (r->err || r->pos > r->len || n > r->len - r->pos) {
        r->err = 1;
        r->pos = r->len;
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)r->p[r->pos + i] << (8 * i);
    r->pos += n;
    return v;
}

static inline uint64_t
rd_uleb(rd_t *r)
{
    uint64_t v = 0;
    unsigned shift = 0;
    for (;;) {
        uint8_t b = (uint8_t)rd_n(r, 1);
        if (r->err)
            return 0;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80))
            return v;
    }
}

static inline int64_t
rd_sleb(rd_t *r)
{
    uint64_t v = 0;
    unsigned shift = 0;
    uint8_t b;
    do {
        b = (uint8_t)rd_n(r, 1);
        if (r->err)
            return 0;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40))
        v |= ~(uint64_t)0 << shift;
    return (int64_t)v;
}

/* Skip N bytes. */
static inline void
rd_skip(rd_t *r, uint64_t n)
{
    if (r->err || r->pos > r->len || n > r->len - r->pos) {
        r->err = 1;
        r->pos = r->len;
        return;
    }
    r->pos += n;
}

#endif
