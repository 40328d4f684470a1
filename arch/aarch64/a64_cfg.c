/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * What cfg/ asks about A64 code besides decoding (arch_isa_t's cfg block): the address an
 * adrp forms with the add or load after it, where a PLT stub jumps through, whether a `br`
 * goes through a pointer loaded from one memory slot, and a system call's number.
 * Each answer is a pattern over a few instruction words; no match is "don't know", never
 * a guess.
 */
#include "arch/aarch64/a64_priv.h"

#define A64_SCAN_AHEAD 8 /* instructions looked at after an adrp for its add or load */
#define A64_SCAN_BACK 16 /* instructions looked at before a br for its register's load */

/* The byte scale of the unsigned 12-bit offset of the load/store W (LDR/STR immediate,
 * unsigned offset: GPR 1..8, SIMD&FP 1..16). */
static unsigned
ldst_scale(uint32_t w)
{
    unsigned size = w >> 30;
    if ((w & 0x04000000u) && (w & 0x00800000u) && size == 0)
        return 16; /* q register */
    return 1u << size;
}

int
a64_code_ref(const uint8_t *buf, size_t len, uint64_t addr, uint64_t *out)
{
    arch_insn_t in;
    if (!buf || !out || len < 4 || a64_decode(buf, len, addr, &in) < 0)
        return 0;
    uint32_t w = a64_word(buf);
    switch (a64_form(w)) {
    case A64_FORM_ADR:
        *out = in.target;
        return ARCH_REF_ADDR;
    case A64_FORM_LDR_LIT:
        *out = in.target;
        return ARCH_REF_MEM;
    case A64_FORM_ADRP:
        break;
    default:
        return 0;
    }
    unsigned rd = w & 31u;
    for (size_t k = 1; k <= A64_SCAN_AHEAD && 4 * k + 4 <= len; k++) {
        uint32_t u = a64_word(buf + 4 * k);
        arch_insn_t n;
        if (a64_decode(buf + 4 * k, 4, addr + 4 * k, &n) < 0
            || (n.kind != ARCH_KIND_SEQ && n.kind != ARCH_KIND_NOP))
            return 0; /* the block ends: the use may be on another path */
        if ((u & 0xffc00000u) == 0x91000000u && ((u >> 5) & 31u) == rd) {
            *out = in.target + ((u >> 10) & 0xfffu); /* add xE, xD, #:lo12: */
            return ARCH_REF_ADDR;
        }
        if ((u & 0x3b000000u) == 0x39000000u && ((u >> 5) & 31u) == rd) {
            *out = in.target + ((u >> 10) & 0xfffu) * ldst_scale(u); /* ldr/str [xD, #lo] */
            return ARCH_REF_MEM;
        }
        if (a64_may_write(u, rd))
            return 0;
    }
    return 0;
}

int
a64_ptr_jump(const uint8_t *buf, size_t len, uint64_t addr)
{
    arch_insn_t in;
    if (!buf || len < 4 || len % 4)
        return 0;
    size_t n = len / 4;
    uint32_t w = a64_word(buf + 4 * (n - 1));
    if (a64_decode(buf + 4 * (n - 1), 4, addr + 4 * (n - 1), &in) < 0
        || in.kind != ARCH_KIND_JMP_IND)
        return 0;
    unsigned r = (w >> 5) & 31u;
    for (size_t k = n - 1; k-- > 0 && k + A64_SCAN_BACK >= n - 1;) {
        uint32_t u = a64_word(buf + 4 * k);
        if (!a64_may_write(u, r))
            continue;
        if ((u & 31u) != r)
            return 0;
        if ((u & 0xffe0ffe0u) == 0xaa0003e0u) { /* mov xR, xS */
            /* gcc's indirect sibling call: the pointer copied into x16 or x17 (IP0/IP1,
             * the registers `bti c` admits a `br` through), never a switch's target */
            if (r == 16 || r == 17)
                return 1;
            r = (u >> 16) & 31u; /* follow xS */
            continue;
        }
        /* ldr xR, [xN, #imm] / ldur / pre- and post-index / literal: one memory slot (a
         * GOT entry, a struct field, a vtable), not an index into a table */
        return (u & 0xffc00000u) == 0xf9400000u    /* ldr xR, [xN, #imm] */
               || (u & 0xffe00000u) == 0xf8400000u /* ldur, ldtr, pre/post-index */
               || (u & 0xff000000u) == 0x58000000u; /* ldr xR, literal */
    }
    return 0;
}

int
a64_plt_slot(const uint8_t *buf, size_t len, uint64_t addr, uint64_t *slot)
{
    if (!buf || !slot || len % 4)
        return 0;
    size_t i = 0;
    if (len >= 4 && a64_word(buf) == 0xd503245fu)
        i = 1; /* bti c */
    if (len < 4 * (i + 4))
        return 0;
    uint32_t adrp = a64_word(buf + 4 * i), ldr = a64_word(buf + 4 * i + 4);
    uint32_t add = a64_word(buf + 4 * i + 8), br = a64_word(buf + 4 * i + 12);
    if ((adrp & 0x9f00001fu) != 0x90000010u          /* adrp x16, page */
        || (ldr & 0xffc003ffu) != 0xf9400211u        /* ldr x17, [x16, #lo] */
        || (add & 0xffc003ffu) != 0x91000210u        /* add x16, x16, #lo */
        || br != 0xd61f0220u)                        /* br x17 */
        return 0;
    arch_insn_t in;
    if (a64_decode(buf + 4 * i, 4, addr + 4 * i, &in) < 0)
        return 0;
    uint64_t lo = ((ldr >> 10) & 0xfffu) * 8;
    if (lo != ((add >> 10) & 0xfffu))
        return 0;
    *slot = in.target + lo;
    return (int)(4 * (i + 4));
}

long
a64_syscall_nr(const uint8_t *prev, size_t len)
{
    if (!prev || len < 4)
        return -1;
    uint32_t w = a64_word(prev);
    if ((w & 0x7fe0001fu) == 0x52800008u) /* movz w8/x8, #imm16 */
        return (long)((w >> 5) & 0xffffu);
    return -1;
}
