/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Trampolines of code patched in place in a file (editor/ed_inplace.c): pure functions
 * from (what, where) to bytes, beside pt_tramp.c's shapes.
 *
 *   [lea -128(%rsp),%rsp; pushfq]      only where the flags are live
 *   incq COUNTER(%rip)                 (lock incq in atomic mode)
 *   [popfq; lea 128(%rsp),%rsp]
 *   the displaced instructions, relocated
 *   jmp POINT + LEN                    unless the last one does not fall through
 *
 * A displaced call is the last instruction (blocks end at calls): it becomes "push its
 * original return address; jmp target" (arch_emit_call_ret), so the callee returns to
 * the old code and no return address ever points into a trampoline: runtimes that find
 * functions by return address (Go, GHC), unwinders and debuggers see the program's own
 * frames. A trampoline holds no call and no frame: while it runs, the stack is the
 * program's, below the red zone only when the flags are saved. The point's bytes become
 * a jump to the trampoline, int3 over the rest (pt_inplace_patch).
 */
#include <string.h>

#include "patch/patch.h"

int
pt_inplace_emit(const pt_inplace_t *t, uint64_t at, uint8_t *out, size_t cap)
{
    if (t == NULL || out == NULL || t->orig == NULL || t->len == 0)
        return QP_EINVAL;
    size_t k = 0;
    int n;
    if (t->counter != 0) {
        if (t->save_flags) {
            QP_CHECK(n = arch_emit_flags_save(out + k, cap - k));
            k += (size_t)n;
        }
        QP_CHECK(n = arch_emit_counter_inc(at + k, t->counter, t->inc_mode, out + k, cap - k));
        k += (size_t)n;
        if (t->save_flags) {
            QP_CHECK(n = arch_emit_flags_restore(out + k, cap - k));
            k += (size_t)n;
        }
    }
    int falls = 1;
    for (uint32_t off = 0; off < t->len;) {
        arch_insn_t in;
        QP_CHECK(arch_decode(t->orig + off, t->len - off, t->addr + off, &in));
        int last = off + in.len == t->len;
        switch (in.kind) {
        case ARCH_KIND_CALL:
        case ARCH_KIND_CALL_IND:
            if (!last)
                return QP_EUNSUPP;
            QP_CHECK(n = arch_emit_call_ret(t->orig + off, &in, at + k, t->addr + t->len,
                                            out + k, cap - k));
            falls = 0; /* the callee returns to the old code itself */
            break;
        case ARCH_KIND_JMP:
        case ARCH_KIND_JMP_IND:
        case ARCH_KIND_RET:
        case ARCH_KIND_HALT:
        case ARCH_KIND_JCC:
            if (!last)
                return QP_EUNSUPP; /* control would leave the displaced bytes early */
            falls = in.kind == ARCH_KIND_JCC;
            /* fall through */
        default:
            QP_CHECK(n = arch_reloc_insn(t->orig + off, &in, at + k, in.target, 0, out + k,
                                         cap - k));
            break;
        }
        k += (size_t)n;
        off += in.len;
    }
    if (falls) {
        QP_CHECK(n = arch_emit_jmp(at + k, t->addr + t->len, out + k, cap - k));
        k += (size_t)n;
    }
    return (int)k;
}

int
pt_inplace_patch(
    const pt_inplace_t *t, uint64_t tramp, uint32_t span, uint8_t *out, size_t cap)
{
    if (t == NULL || out == NULL || span < 5 || span > cap)
        return QP_EINVAL;
    memset(out, 0xcc, span);
    QP_CHECK(arch_emit_jmp(t->addr, tramp, out, span));
    return (int)span;
}
