/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Instructions decoded once for callers that go over the same code many times: a live
 * session sizes and emits the copy of a procedure relocated whole at each insertion's
 * check and again at the commit (python3.11 --all: 271k decodes of the same few
 * procedures, 0.3 G instructions, in the stop). An entry is keyed by the address the
 * instruction was decoded at and keeps the instruction's bytes: it is used only for the
 * same bytes at the same address, for which arch_decode gives the same result (it reads
 * the instruction's own bytes and nothing after them), whatever memory they are read
 * from.
 */
#include <stdlib.h>
#include <string.h>

#include "patch/patch.h"

typedef struct dec_entry {
    arch_insn_t in;               /* as arch_decode gave it; len 0: an empty slot */
    uint8_t bytes[ARCH_MAX_INSN]; /* its bytes */
} dec_entry_t;

struct pt_decoded {
    dec_entry_t *slots; /* open addressing by address */
    size_t cap;         /* slots: a power of two, or 0 */
    size_t n;           /* slots used */
    size_t hits;        /* decodes answered from a slot */
};

/* More slots than this are not taken (64 MiB): past it, decoded each time. */
#define DEC_MAX_SLOTS ((size_t)1 << 20)

pt_decoded_t *
pt_decoded_new(void)
{
    return calloc(1, sizeof(pt_decoded_t));
}

void
pt_decoded_free(pt_decoded_t *d)
{
    if (d == NULL)
        return;
    free(d->slots);
    free(d);
}

static size_t
dec_hash(uint64_t addr, size_t cap)
{
    return (size_t)((addr * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
}

/* The slot of ADDR in D: its entry, or the empty slot where it would go. */
static dec_entry_t *
dec_slot(const pt_decoded_t *d, uint64_t addr)
{
    for (size_t h = dec_hash(addr, d->cap);; h = (h + 1) & (d->cap - 1))
        if (d->slots[h].in.len == 0 || d->slots[h].in.addr == addr)
            return &d->slots[h];
}

/* Twice the slots (or the first 1024); 0, or -1 when D cannot grow. */
static int
dec_grow(pt_decoded_t *d)
{
    size_t cap = d->cap ? 2 * d->cap : 1024;
    if (cap > DEC_MAX_SLOTS)
        return -1;
    dec_entry_t *old = d->slots, *v = calloc(cap, sizeof(*v));
    if (v == NULL)
        return -1;
    size_t ocap = d->cap;
    d->slots = v;
    d->cap = cap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].in.len != 0)
            *dec_slot(d, old[i].in.addr) = old[i];
    free(old);
    return 0;
}

int
pt_decode(
    pt_decoded_t *d, const uint8_t *buf, size_t len, uint64_t addr, arch_insn_t *out)
{
    if (d == NULL || buf == NULL || out == NULL)
        return arch_decode(buf, len, addr, out);
    dec_entry_t *e = d->cap ? dec_slot(d, addr) : NULL;
    if (e != NULL && e->in.len != 0 && e->in.len <= len
        && memcmp(e->bytes, buf, e->in.len) == 0) {
        *out = e->in;
        d->hits++;
        return 0;
    }
    int rc = arch_decode(buf, len, addr, out);
    if (rc < 0 || out->len == 0 || out->len > ARCH_MAX_INSN)
        return rc;
    if (e != NULL && e->in.len != 0) {
        /* Other bytes at that address: this one kept instead. */
        e->in = *out;
        memcpy(e->bytes, buf, out->len);
        return 0;
    }
    if (2 * (d->n + 1) > d->cap && dec_grow(d) < 0)
        return 0; /* full: not kept */
    e = dec_slot(d, addr);
    e->in = *out;
    memcpy(e->bytes, buf, out->len);
    d->n++;
    return 0;
}

size_t
pt_decoded_hits(const pt_decoded_t *d)
{
    return d != NULL ? d->hits : 0;
}
