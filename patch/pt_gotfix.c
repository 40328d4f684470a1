/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A rewritten shared library's start that points its own PLT at the moved code: the
 * ISA's fixed code (arch_emit_got_fix), then the header it reads and the table of
 * (GOT slot, old entry, new entry), all link-time addresses that the code rebases.
 *
 *   code        arch_emit_got_fix: position independent, a multiple of 8 bytes
 *   header      arch_got_fix_hdr_t: self, count, relro_lo, relro_hi, next
 *   entries     arch_got_fix_entry_t[count], by slot
 */
#include <stdlib.h>
#include <string.h>

#include "patch/patch.h"

/* The code's length, or 0 when the ISA has none. */
static size_t
code_len(const arch_isa_t *isa)
{
    uint8_t code[512];
    int rc = isa != NULL && isa->emit_got_fix != NULL
        ? isa->emit_got_fix(code, sizeof(code))
        : -1;
    return rc > 0 ? (size_t)rc : 0;
}

size_t
pt_got_fix_size(const arch_isa_t *isa, size_t n)
{
    size_t c = code_len(isa);
    return c == 0 ? 0 : c + sizeof(arch_got_fix_hdr_t) + n * sizeof(arch_got_fix_entry_t);
}

static int
by_slot(const void *a, const void *b)
{
    const arch_got_fix_entry_t *x = a, *y = b;
    return x->slot < y->slot ? -1 : x->slot > y->slot;
}

int
pt_got_fix_emit(const arch_isa_t *isa, uint64_t addr, const arch_got_fix_entry_t *e,
    size_t n, uint64_t relro_lo, uint64_t relro_hi, uint64_t next, uint8_t *out,
    size_t cap)
{
    if (isa == NULL || out == NULL || (e == NULL && n > 0))
        return QP_EINVAL;
    size_t size = pt_got_fix_size(isa, n);
    if (size == 0)
        return QP_EUNSUPP;
    if (cap < size || size > INT32_MAX)
        return QP_EINVAL;
    int c = isa->emit_got_fix(out, cap);
    if (c < 0)
        return c;
    if (c % 8 != 0)
        return QP_EBUG; /* the header must be aligned */
    arch_got_fix_hdr_t h = { addr + (uint64_t)c, n, relro_lo, relro_hi, next };
    memcpy(out + c, &h, sizeof(h));
    arch_got_fix_entry_t *t = malloc(n > 0 ? n * sizeof(*t) : 1);
    if (t == NULL)
        return QP_ENOMEM;
    memcpy(t, e, n * sizeof(*e));
    qsort(t, n, sizeof(*t), by_slot);
    memcpy(out + c + sizeof(h), t, n * sizeof(*t));
    free(t);
    return (int)size;
}
