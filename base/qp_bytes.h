/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_BASE_BYTES_H
#define QP_BASE_BYTES_H
/*
 * PURPOSE: the one bounded little-endian reader and growable writer of bytes, with
 * LEB128 (base/qp_leb.h's), that the parsers and writers of binary formats share
 * (.eh_frame in cfg/ and editor/, DWARF, our own files). Header-only: below every folder,
 * it includes nothing of the project but base/qp_leb.h.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/qp_leb.h"

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

static inline uint8_t
rd_u8(rd_t *r)
{
    return (uint8_t)rd_n(r, 1);
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
        if (!leb_step(&v, &shift, b))
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
    } while (leb_step(&v, &shift, b));
    return sleb_extend(v, shift, b);
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

/* V as N (at most 8) bytes, little-endian, at P. */
static inline void
le_put(uint8_t *p, uint64_t v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* The little-endian number of N (at most 8) bytes at P. */
static inline uint64_t
le_get(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* A growable output buffer; ERR is set when memory runs out (the contents are then
 * incomplete and every later write is dropped). */
typedef struct wb {
    uint8_t *p; /* the bytes (malloc) */
    size_t len; /* used */
    size_t cap; /* allocated */
    int err;    /* out of memory */
} wb_t;

/* N bytes of SRC, or N zero bytes when SRC is NULL. */
static inline void
wb_put(wb_t *w, const void *src, size_t n)
{
    if (w->err || n == 0)
        return;
    if (n > w->cap - w->len) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap - w->len < n) {
            if (cap > SIZE_MAX / 2) {
                w->err = 1;
                return;
            }
            cap *= 2;
        }
        uint8_t *p = realloc(w->p, cap);
        if (p == NULL) {
            w->err = 1;
            return;
        }
        w->p = p;
        w->cap = cap;
    }
    if (src != NULL)
        memcpy(w->p + w->len, src, n);
    else
        memset(w->p + w->len, 0, n);
    w->len += n;
}

static inline void
wb_u8(wb_t *w, uint8_t v)
{
    wb_put(w, &v, 1);
}

/* V as N (at most 8) bytes, little-endian. */
static inline void
wb_n(wb_t *w, uint64_t v, size_t n)
{
    uint8_t b[8];
    for (size_t i = 0; i < n && i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    wb_put(w, b, n < 8 ? n : 8);
}

/* ULEB128 of V, padded to at least WIDTH bytes (0: the shortest form). */
static inline void
wb_uleb_pad(wb_t *w, uint64_t v, size_t width)
{
    uint8_t b[16];
    if (width > sizeof b) {
        w->err = 1;
        return;
    }
    wb_put(w, b, uleb_encode(b, v, width));
}

static inline void
wb_uleb(wb_t *w, uint64_t v)
{
    wb_uleb_pad(w, v, 0);
}

static inline void
wb_sleb(wb_t *w, int64_t v)
{
    uint8_t b[10];
    wb_put(w, b, sleb_encode(b, v));
}

#endif
