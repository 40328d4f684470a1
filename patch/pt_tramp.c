/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Trampolines of points patched in place: every shape a file or a process needs, built
 * from the point's bytes and snippets alone (arch/'s relocator, snippet compiler and
 * jumps), so that tests/check_tramp runs them in its own memory.
 *
 *  PT_TRAMP_BEFORE:    snippet, moved code, jmp back.
 *  PT_TRAMP_CALL:      snippet, moved code ending with the call (its return address is
 *                      what follows), the after snippet, jmp back.
 *  PT_TRAMP_EXIT:      moved code but the ret, snippet, the ret (position-independent:
 *                      copied).
 *  PT_TRAMP_OWN:       code that leaves by its last instruction (a ret, a tail jump, a
 *                      call whose return address must stay the original one).
 *  PT_TRAMP_CALL_NEXT: a short call and what follows it, moved.
 */
#include <string.h>

#include "patch/patch.h"

#define JMP_LEN 5
/* The bytes of a point at most (the longest replaced run, with nops before it). */
#define ORIG_MAX 64

/* Relocate the first NINSNS instructions of ORIG (LEN bytes at ADDR) to AT + *K
 * (advancing *K); the bytes taken. */
static int
emit_moved(const uint8_t *orig, uint32_t len, uint64_t addr, uint32_t ninsns, uint64_t at,
    uint8_t *out, size_t cap, size_t *k)
{
    size_t off = 0;
    for (uint32_t i = 0; i < ninsns; i++) {
        arch_insn_t in;
        int n;
        if (off >= len)
            return QP_EINVAL;
        QP_CHECK(arch_decode(orig + off, len - off, addr + off, &in));
        QP_CHECK(n = arch_reloc_insn(
                     orig + off, &in, at + *k, in.target, 0, out + *k, cap - *k));
        *k += (size_t)n;
        off += in.len;
    }
    return (int)off;
}

static int
emit_snip(const pt_snip_t *sn, uint64_t at, uint8_t *out, size_t cap, size_t *k)
{
    if (sn == NULL || sn->nodes == NULL)
        return 0;
    int n = arch_snip_emit(
        sn->nodes, sn->n, sn->root, &sn->ctx, at + *k, out + *k, cap - *k);
    QP_CHECK(n);
    *k += (size_t)n;
    return 0;
}

int
pt_snip_size(const pt_snip_t *sn, uint64_t at)
{
    if (sn == NULL)
        return QP_EINVAL;
    if (sn->nodes == NULL)
        return 0;
    return arch_snip_emit(sn->nodes, sn->n, sn->root, &sn->ctx, at, NULL, 0);
}

/*****************************************************************************
 * The simple shapes: before, call, exit
 */

static int
emit_simple(const pt_tramp_t *t, uint64_t at, uint8_t *out, size_t cap, uint64_t *ret_at)
{
    /*
     * Fewer than 5 bytes replaced (a short entry reached through padding): nops before
     * them make the 5 that the trampoline moves, so that its jump back lands right after
     * them. The padding covered (spill) is not moved.
     */
    uint8_t buf[ORIG_MAX];
    uint32_t code = t->len - t->spill;
    uint32_t fill = code < JMP_LEN ? JMP_LEN - code : 0;
    if (t->len < t->spill || code + fill > sizeof(buf) || (fill && !t->padded))
        return QP_EINVAL;
    memset(buf, 0x90, fill);
    memcpy(buf + fill, t->orig, code);
    const uint8_t *orig = buf;
    uint64_t addr = t->addr - fill;
    uint32_t len = code + fill, ninsns = t->ninsns + fill;
    size_t k = 0;
    int n;

    if (ninsns == 0)
        return QP_EINVAL;
    if (t->shape == PT_TRAMP_EXIT) {
        QP_CHECK(n = emit_moved(orig, len, addr, ninsns - 1u, at, out, cap, &k));
        size_t off = (size_t)n;
        QP_CHECK(emit_snip(&t->before, at, out, cap, &k));
        if (off >= len || cap - k < len - off)
            return QP_EINVAL;
        memcpy(out + k, orig + off, len - off);
        k += len - off;
        return (int)k;
    }
    QP_CHECK(emit_snip(&t->before, at, out, cap, &k));
    QP_CHECK(n = emit_moved(orig, len, addr, ninsns, at, out, cap, &k));
    if ((uint32_t)n != len)
        return QP_EINVAL; /* the instructions do not cover the replaced bytes */
    if (ret_at != NULL)
        *ret_at = at + k;
    if (t->shape == PT_TRAMP_CALL)
        QP_CHECK(emit_snip(&t->after, at, out, cap, &k));
    QP_CHECK(n = arch_emit_jmp(at + k, addr + len, out + k, cap - k));
    k += (size_t)n;
    return (int)k;
}

/*****************************************************************************
 * Code that leaves by its last instruction
 */

/*
 * The end of emit_own for a tail before a short return block (t->rbytes), from K on:
 * the tail's last instruction IN (at OFF; CODE bytes in all) then the block's
 * instructions with POST before their ret, where the tail goes to it: after a plain
 * instruction or a jcc elsewhere (it falls into it), instead of a jmp to it, or on the
 * taken side of a jcc to it (not taken: jmp back).
 */
static int
emit_via_ret(const pt_tramp_t *t, const arch_insn_t *in, size_t off, size_t code,
    const pt_snip_t *post, uint64_t at, uint8_t *out, size_t cap, size_t k)
{
    size_t roff = 0;
    int n, m;

    if (in->kind == ARCH_KIND_JCC && in->target == t->raddr) {
        QP_CHECK(n = arch_reloc_insn(t->orig + off, in, at + k, at + k + 6 + JMP_LEN, 0,
                     out + k, cap - k));
        QP_CHECK(m = arch_reloc_insn(t->orig + off, in, at + k, at + k + n + JMP_LEN, 0,
                     out + k, cap - k));
        if (m != n)
            return QP_EINVAL;
        k += (size_t)n;
        QP_CHECK(n = arch_emit_jmp(at + k, t->addr + code, out + k, cap - k));
        k += (size_t)n;
    } else if (in->kind != ARCH_KIND_JMP) {
        QP_CHECK(n = arch_reloc_insn(
                     t->orig + off, in, at + k, in->target, 0, out + k, cap - k));
        k += (size_t)n;
    }
    for (uint32_t i = 0; i < t->rninsns; i++) {
        arch_insn_t r;
        QP_CHECK(arch_decode(t->rbytes + roff, t->rlen - roff, t->raddr + roff, &r));
        if (i + 1 == t->rninsns)
            QP_CHECK(emit_snip(post, at, out, cap, &k));
        QP_CHECK(n = arch_reloc_insn(
                     t->rbytes + roff, &r, at + k, r.target, 0, out + k, cap - k));
        k += (size_t)n;
        roff += r.len;
    }
    return roff == t->rlen ? (int)k : QP_EINVAL;
}

/*
 * PT_TRAMP_OWN: the before snippet, every instruction of T but the last relocated, then
 * the after snippet and either (call_ret) a call of the original return address's stub
 * and a jmp to the callee, or the last instruction (a ret, or a tail jump) relocated.
 */
static int
emit_own(const pt_tramp_t *t, uint64_t at, uint8_t *out, size_t cap)
{
    const pt_snip_t *post = &t->after;
    size_t k = 0, off = 0, code;
    arch_insn_t in;
    int n;

    if (t->ninsns == 0 || t->len < t->spill)
        return QP_EINVAL;
    code = (size_t)t->len - t->spill;
    QP_CHECK(emit_snip(&t->before, at, out, cap, &k));
    for (uint32_t i = 0; i < t->ninsns; i++) {
        if (off >= code)
            return QP_EINVAL;
        QP_CHECK(arch_decode(t->orig + off, code - off, t->addr + off, &in));
        if (i + 1 == t->ninsns)
            break;
        QP_CHECK(n = arch_reloc_insn(
                     t->orig + off, &in, at + k, in.target, 0, out + k, cap - k));
        k += (size_t)n;
        off += in.len;
    }
    if (off + in.len != code)
        return QP_EINVAL; /* the instructions do not cover the replaced bytes */
    if (t->call_ret) {
        /*
         * `call T; int3; T: <return address := the original one>; jmp callee`: a real
         * call keeps the return stack buffer balanced (a push and a jmp cost three
         * mispredicted returns up the chain, one here), and the callee returns into the
         * original code. (The int3 is never run: it keeps T away from the call's end.)
         */
        if (in.kind != ARCH_KIND_CALL)
            return QP_EINVAL;
        /* (A call that never returns to the procedure ends it: POST, an exit's.) */
        QP_CHECK(emit_snip(post, at, out, cap, &k));
        if (cap - k < JMP_LEN + 1)
            return QP_EINVAL;
        QP_CHECK(n = arch_emit_call(at + k, at + k + JMP_LEN + 1, out + k, cap - k));
        k += (size_t)n;
        out[k++] = 0xcc;
        QP_CHECK(n = arch_emit_store_ret64(t->addr + code, out + k, cap - k));
        k += (size_t)n;
        QP_CHECK(n = arch_emit_jmp(at + k, in.target, out + k, cap - k));
        return (int)(k + (size_t)n);
    }
    if (t->rbytes != NULL && t->rlen)
        return emit_via_ret(t, &in, off, code, post, at, out, cap, k);
    if (t->tail >= 2) {
        /* jcc TAKEN; (3: POST, the code after it being another procedure's;) jmp back
         * (2: not taken, the procedure goes on); TAKEN: POST, jmp. */
        int m, sl = 0;
        if (t->tail == 3 && post->nodes != NULL)
            QP_CHECK(sl = pt_snip_size(post, at));
        QP_CHECK(n = arch_reloc_insn(t->orig + off, &in, at + k,
                     at + k + 6 + (uint64_t)sl + JMP_LEN, 0, out + k, cap - k));
        QP_CHECK(m = arch_reloc_insn(t->orig + off, &in, at + k,
                     at + k + (uint64_t)n + (uint64_t)sl + JMP_LEN, 0, out + k, cap - k));
        if (m != n)
            return QP_EINVAL;
        k += (size_t)n;
        if (sl > 0) {
            size_t k0 = k;
            QP_CHECK(emit_snip(post, at, out, cap, &k));
            if (k - k0 != (size_t)sl)
                return QP_EINVAL;
        }
        QP_CHECK(n = arch_emit_jmp(at + k, t->addr + code, out + k, cap - k));
        k += (size_t)n;
    }
    QP_CHECK(emit_snip(post, at, out, cap, &k));
    if (t->tail >= 2)
        QP_CHECK(n = arch_emit_jmp(at + k, in.target, out + k, cap - k));
    else
        QP_CHECK(n = arch_reloc_insn(
                     t->orig + off, &in, at + k, in.target, 0, out + k, cap - k));
    return (int)(k + (size_t)n);
}

/*
 * PT_TRAMP_CALL_NEXT: the before snippet, the call (its return address, *RET_AT, is what
 * follows it here), the instructions after it relocated, a jmp back.
 */
static int
emit_call_next(
    const pt_tramp_t *t, uint64_t at, uint8_t *out, size_t cap, uint64_t *ret_at)
{
    size_t k = 0, off = 0;
    int n;

    QP_CHECK(emit_snip(&t->before, at, out, cap, &k));
    for (uint32_t i = 0; i < t->ninsns; i++) {
        arch_insn_t in;
        if (off >= t->len)
            return QP_EINVAL;
        QP_CHECK(arch_decode(t->orig + off, t->len - off, t->addr + off, &in));
        QP_CHECK(n = arch_reloc_insn(
                     t->orig + off, &in, at + k, in.target, 0, out + k, cap - k));
        k += (size_t)n;
        off += in.len;
        if (off == t->call_len && ret_at != NULL)
            *ret_at = at + k;
    }
    if (off != t->len)
        return QP_EINVAL;
    QP_CHECK(n = arch_emit_jmp(at + k, t->addr + t->len, out + k, cap - k));
    return (int)(k + (size_t)n);
}

int
pt_tramp_emit(
    const pt_tramp_t *t, uint64_t at, uint8_t *out, size_t cap, uint64_t *ret_at)
{
    if (t == NULL || out == NULL || t->orig == NULL || t->len == 0 || t->ninsns == 0)
        return QP_EINVAL;
    switch (t->shape) {
    case PT_TRAMP_BEFORE:
    case PT_TRAMP_CALL:
    case PT_TRAMP_EXIT: return emit_simple(t, at, out, cap, ret_at);
    case PT_TRAMP_OWN: return emit_own(t, at, out, cap);
    case PT_TRAMP_CALL_NEXT: return emit_call_next(t, at, out, cap, ret_at);
    default: return QP_EINVAL;
    }
}

int
pt_tramp_patch(uint64_t addr, uint64_t tramp, uint8_t *out, size_t cap)
{
    if (out == NULL || cap < JMP_LEN)
        return QP_EINVAL;
    return arch_emit_jmp(addr, tramp, out, cap);
}

int
pt_syscall_pattern(long nr, uint8_t *out, size_t cap)
{
    return arch_emit_syscall_nr(nr, out, cap);
}
