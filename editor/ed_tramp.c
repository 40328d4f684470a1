/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Trampolines of points patched in place: what dyn writes into a live process, built
 * here from the point's bytes and snippets alone (arch/'s relocator, snippet compiler and
 * jumps), so that tests/check_tramp runs them in its own memory.
 *
 *  ED_TRAMP_BEFORE: snippet, moved code, jmp back.
 *  ED_TRAMP_CALL:   snippet, moved code ending with the call (its return address is what
 *                   follows), the after snippet, jmp back.
 *  ED_TRAMP_EXIT:   moved code but the ret, snippet, the ret (position-independent: copied).
 */
#include <string.h>

#include "editor/ed.h"

/* Relocate the first NINSNS instructions of T to AT + *K (advancing *K); the bytes taken. */
static int
emit_moved(const ed_tramp_t *t, uint32_t ninsns, uint64_t at, uint8_t *out, size_t cap,
           size_t *k)
{
    size_t off = 0;
    for (uint32_t i = 0; i < ninsns; i++) {
        arch_insn_t in;
        int n;
        if (off >= t->len)
            return QP_EINVAL;
        QP_CHECK(arch_decode(t->orig + off, t->len - off, t->addr + off, &in));
        QP_CHECK(n = arch_reloc_insn(t->orig + off, &in, at + *k, in.target, 0, out + *k,
                                     cap - *k));
        *k += (size_t)n;
        off += in.len;
    }
    return (int)off;
}

static int
emit_snip(const ed_tramp_snip_t *sn, uint64_t at, uint8_t *out, size_t cap, size_t *k)
{
    if (sn->nodes == NULL)
        return 0;
    int n = arch_snip_emit(sn->nodes, sn->n, sn->root, &sn->ctx, at + *k, out + *k, cap - *k);
    QP_CHECK(n);
    *k += (size_t)n;
    return 0;
}

int
ed_tramp_emit(const ed_tramp_t *t, uint64_t at, uint8_t *out, size_t cap, uint64_t *ret_at)
{
    size_t k = 0;
    int n;
    if (t == NULL || out == NULL || t->orig == NULL || t->len < 5 || t->ninsns == 0
        || t->kind > ED_TRAMP_EXIT)
        return QP_EINVAL;
    if (t->kind == ED_TRAMP_EXIT) {
        QP_CHECK(n = emit_moved(t, t->ninsns - 1u, at, out, cap, &k));
        size_t off = (size_t)n;
        QP_CHECK(emit_snip(&t->before, at, out, cap, &k));
        if (off >= t->len || cap - k < t->len - off)
            return QP_EINVAL;
        memcpy(out + k, t->orig + off, t->len - off);
        k += t->len - off;
        return (int)k;
    }
    QP_CHECK(emit_snip(&t->before, at, out, cap, &k));
    QP_CHECK(n = emit_moved(t, t->ninsns, at, out, cap, &k));
    if ((uint32_t)n != t->len)
        return QP_EINVAL; /* the instructions do not cover the replaced bytes */
    if (ret_at != NULL)
        *ret_at = at + k;
    if (t->kind == ED_TRAMP_CALL)
        QP_CHECK(emit_snip(&t->after, at, out, cap, &k));
    QP_CHECK(n = arch_emit_jmp(at + k, t->addr + t->len, out + k, cap - k));
    k += (size_t)n;
    return (int)k;
}

int
ed_tramp_patch(const ed_tramp_t *t, uint64_t tramp, uint8_t *out, size_t cap)
{
    if (t == NULL || out == NULL || t->len < 5)
        return QP_EINVAL;
    return arch_emit_jmp(t->addr, tramp, out, cap);
}
