/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * arch/arch.h for x86-64: relocation of one instruction and the emitters. The few forms
 * written here are hand-encoded; what is known about the instruction comes from
 * arch_insn_t (length, kind, target, offset and size of the pc-relative field) plus the
 * opcode bytes just before a branch offset. No decoder library is used.
 *
 * Prefixes of direct branches. Only the prefixes that change what a relocated direct
 * branch does are kept:
 *  - f2 (bnd) on jmp, jcc and call is kept: with MPX enabled and BNDPRESERVE clear it
 *    decides whether the bound registers survive the branch.
 *  - 67 (address size) on loop/loopcc/jrcxz is kept: it selects %ecx instead of %rcx.
 *  - everything else is dropped: branch hints (2e/3e), segment overrides, 66 (ignored
 *    by near branches in 64-bit mode on Intel, as the decoder assumes), f3 and REX.
 * Indirect branches (including their notrack 3e and bnd f2 prefixes) and ret are copied
 * verbatim like any other instruction.
 */
#include <assert.h>
#include <string.h>

#include "arch/arch.h"

/*****************************************************************************
 * Encoding helpers
 */

/* Write V little-endian in 4 bytes at P. */
static void
x86_put32(uint8_t* p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* The displacement from the end of an instruction (NEXT) to TARGET, modulo 2^64. */
static int64_t
x86_disp(uint64_t next, uint64_t target)
{
    return (int64_t)(target - next);
}

static int
x86_fits8(int64_t d)
{
    return d >= INT8_MIN && d <= INT8_MAX;
}

static int
x86_fits32(int64_t d)
{
    return d >= INT32_MIN && d <= INT32_MAX;
}

/*
 * Write OPC (N bytes) followed by the 32-bit distance from ADDR + N + 4 to TARGET: the
 * shape of jmp, call, jcc and xbegin rel32 and of incq disp32(%rip). Returns N + 4,
 * QP_ERANGE or QP_EINVAL.
 */
static int
x86_put_rel32(const uint8_t* opc, size_t n, uint64_t addr, uint64_t target,
    uint8_t* out /*OUT*/, size_t cap)
{
    int64_t d = x86_disp(addr + n + 4, target);

    assert(n <= 4);
    if (out == NULL || cap < n + 4)
        return QP_EINVAL;
    if (!x86_fits32(d))
        return QP_ERANGE;
    memcpy(out, opc, n);
    x86_put32(out + n, (uint32_t)d);
    return (int)(n + 4);
}

/* True for the legacy prefix bytes (groups 1 to 4). */
static int
x86_is_legacy_prefix(uint8_t b)
{
    switch (b) {
    case 0xf0:
    case 0xf2:
    case 0xf3:
    case 0x26:
    case 0x2e:
    case 0x36:
    case 0x3e:
    case 0x64:
    case 0x65:
    case 0x66:
    case 0x67: return 1;
    default: return 0;
    }
}

/*****************************************************************************
 * Relocation of direct branches
 */

/* The direct-branch forms arch_reloc_insn re-encodes. */
typedef enum x86_br_form {
    X86_BR_JMP, /* eb rel8, e9 rel32 */
    X86_BR_JCC, /* 70+cc rel8, 0f 80+cc rel32 */
    X86_BR_CALL, /* e8 rel32 */
    X86_BR_LOOP, /* e0 loopne, e1 loope, e2 loop, e3 jrcxz/jecxz: rel8 only */
    X86_BR_XBEGIN, /* c7 f8 rel32 */
} x86_br_form_t;

/* A direct branch taken apart: what to re-encode and the prefixes to keep. */
typedef struct x86_branch {
    uint8_t form; /* x86_br_form_t */
    uint8_t op; /* JCC: the condition code (0..15); LOOP: the opcode (e0..e3) */
    uint8_t bnd; /* an f2 (bnd) prefix is in effect (JMP, JCC, CALL) */
    uint8_t addr32; /* a 67 prefix is present (LOOP: count in %ecx) */
} x86_branch_t;

/*
 * Take apart the direct branch IN decoded from BUF. The opcode ends where the branch
 * offset starts (IN->rel_off); the bytes before it are prefixes. Returns 0, QP_EINVAL
 * when IN does not describe a branch in BUF, QP_EUNSUPP for a form not handled (xbegin
 * with a 66 prefix, whose abort address is truncated to 16 bits).
 */
static int
x86_branch_parse(const uint8_t* buf, const arch_insn_t* in, x86_branch_t* br /*OUT*/)
{
    size_t o, start, i;
    uint8_t b, rep = 0;

    memset(br, 0, sizeof(*br));
    if (in->rel_off == 0)
        return QP_EINVAL;
    o = (size_t)in->rel_off - 1;
    b = buf[o];
    start = o;
    if (b == 0xeb || b == 0xe9) {
        br->form = X86_BR_JMP;
        if (in->kind != ARCH_KIND_JMP || in->rel_size != (b == 0xeb ? 1 : 4))
            return QP_EINVAL;
    } else if (b == 0xe8) {
        br->form = X86_BR_CALL;
        if (in->kind != ARCH_KIND_CALL || in->rel_size != 4)
            return QP_EINVAL;
    } else if (b >= 0x70 && b <= 0x7f) {
        br->form = X86_BR_JCC;
        br->op = b & 0xf;
        if (in->kind != ARCH_KIND_JCC || in->rel_size != 1)
            return QP_EINVAL;
    } else if (b >= 0x80 && b <= 0x8f && o >= 1 && buf[o - 1] == 0x0f) {
        br->form = X86_BR_JCC;
        br->op = b & 0xf;
        start = o - 1;
        if (in->kind != ARCH_KIND_JCC || in->rel_size != 4)
            return QP_EINVAL;
    } else if (b >= 0xe0 && b <= 0xe3) {
        br->form = X86_BR_LOOP;
        br->op = b;
        if (in->kind != ARCH_KIND_JCC || in->rel_size != 1)
            return QP_EINVAL;
    } else if (b == 0xf8 && o >= 1 && buf[o - 1] == 0xc7) {
        br->form = X86_BR_XBEGIN;
        start = o - 1;
        if (in->kind != ARCH_KIND_JCC)
            return QP_EINVAL;
        if (in->rel_size != 4)
            return QP_EUNSUPP;
    } else {
        return QP_EINVAL;
    }

    for (i = 0; i < start; i++) {
        b = buf[i];
        if (b == 0xf2 || b == 0xf3)
            rep = b; /* the last of group 1 is the one in effect */
        else if (b == 0x67)
            br->addr32 = 1;
        else if (!x86_is_legacy_prefix(b) && (b & 0xf0) != 0x40)
            return QP_EINVAL;
    }
    br->bnd = rep == 0xf2 && br->form != X86_BR_LOOP && br->form != X86_BR_XBEGIN;
    return 0;
}

/*
 * Encode BR at ADDR going to TARGET (see arch_reloc_insn for the forms). Returns the
 * byte count, QP_ERANGE or QP_EINVAL (CAP too small).
 */
static int
x86_branch_encode(const x86_branch_t* br, uint64_t addr, uint64_t target, int short_ok,
    uint8_t* out /*OUT*/, size_t cap)
{
    uint8_t opc[3];
    size_t p = 0; /* prefix bytes */
    int64_t d;

    if (br->bnd)
        opc[p++] = 0xf2;
    switch (br->form) {
    case X86_BR_JMP:
    case X86_BR_JCC:
        d = x86_disp(addr + p + 2, target);
        if (short_ok && x86_fits8(d)) {
            if (cap < p + 2)
                return QP_EINVAL;
            memcpy(out, opc, p);
            out[p] = br->form == X86_BR_JMP ? 0xeb : (uint8_t)(0x70 | br->op);
            out[p + 1] = (uint8_t)d;
            return (int)(p + 2);
        }
        if (br->form == X86_BR_JMP) {
            opc[p++] = 0xe9;
        } else {
            opc[p++] = 0x0f;
            opc[p++] = (uint8_t)(0x80 | br->op);
        }
        return x86_put_rel32(opc, p, addr, target, out, cap);
    case X86_BR_CALL:
        opc[p++] = 0xe8;
        return x86_put_rel32(opc, p, addr, target, out, cap);
    case X86_BR_XBEGIN:
        opc[0] = 0xc7;
        opc[1] = 0xf8;
        return x86_put_rel32(opc, 2, addr, target, out, cap);
    case X86_BR_LOOP:
        p = br->addr32;
        d = x86_disp(addr + p + 2, target);
        if (short_ok && x86_fits8(d)) {
            if (cap < p + 2)
                return QP_EINVAL;
            if (p)
                out[0] = 0x67;
            out[p] = br->op;
            out[p + 1] = (uint8_t)d;
            return (int)(p + 2);
        }
        /*
         * `<op> +2; jmp8 +5; jmp32 TARGET`: taken, the loop instruction skips the short
         * jump and lands on the long one; not taken, the short jump skips the long one.
         * %rcx and the flags see exactly what the original did.
         */
        if (cap < p + 9)
            return QP_EINVAL;
        d = x86_disp(addr + p + 9, target);
        if (!x86_fits32(d))
            return QP_ERANGE;
        if (p)
            out[0] = 0x67;
        out[p] = br->op;
        out[p + 1] = 2;
        out[p + 2] = 0xeb;
        out[p + 3] = 5;
        out[p + 4] = 0xe9;
        x86_put32(out + p + 5, (uint32_t)d);
        return (int)(p + 9);
    default: assert(0); return QP_EINVAL;
    }
}

/*****************************************************************************
 * Relocation of rip-relative operands, and the entry point
 */

/*
 * Copy IN (from BUF) to OUT with its disp32 recomputed so that, at NEW_ADDR, the operand
 * still addresses IN->target. With a 67 prefix the address is eip-relative: computed in
 * 64 bits and truncated to 32, so any target below 4 GiB is reachable.
 */
static int
x86_reloc_riprel(
    const uint8_t* buf, const arch_insn_t* in, uint64_t new_addr, uint8_t* out /*OUT*/)
{
    uint64_t next = new_addr + in->len;
    int addr32 = 0;
    int64_t d;
    size_t i;

    /* Legacy prefixes come first, before REX, VEX or EVEX. */
    for (i = 0; i < in->rel_off && x86_is_legacy_prefix(buf[i]); i++)
        addr32 |= buf[i] == 0x67;
    if (addr32) {
        if (in->target > UINT32_MAX)
            return QP_ERANGE;
        d = (int32_t)(uint32_t)(in->target - next);
    } else {
        d = x86_disp(next, in->target);
        if (!x86_fits32(d))
            return QP_ERANGE;
    }
    memcpy(out, buf, in->len);
    x86_put32(out + in->rel_off, (uint32_t)d);
    return in->len;
}

int
arch_reloc_insn(const uint8_t* buf, const arch_insn_t* in, uint64_t new_addr,
    uint64_t new_target, int short_ok, uint8_t* out /*OUT*/, size_t cap)
{
    x86_branch_t br;

    if (buf == NULL || in == NULL || out == NULL || in->len == 0
        || in->len > ARCH_MAX_INSN || (size_t)in->rel_off + in->rel_size > in->len)
        return QP_EINVAL;

    if (in->flags & ARCH_F_BRANCH_REL) {
        if (in->kind != ARCH_KIND_JMP && in->kind != ARCH_KIND_JCC
            && in->kind != ARCH_KIND_CALL)
            return QP_EUNSUPP; /* a pc-relative operand of some other kind */
        QP_CHECK(x86_branch_parse(buf, in, &br));
        return x86_branch_encode(&br, new_addr, new_target, short_ok, out, cap);
    }
    if (cap < in->len)
        return QP_EINVAL;
    if (in->flags & ARCH_F_RIPREL) {
        if (in->rel_size != 4 || in->rel_off == 0)
            return QP_EINVAL;
        return x86_reloc_riprel(buf, in, new_addr, out);
    }
    memcpy(out, buf, in->len);
    return in->len;
}

/*****************************************************************************
 * Emitters
 */

int
arch_emit_jmp(uint64_t addr, uint64_t target, uint8_t* out /*OUT*/, size_t cap)
{
    static const uint8_t opc[] = { 0xe9 };

    return x86_put_rel32(opc, sizeof(opc), addr, target, out, cap);
}

int
arch_emit_call(uint64_t addr, uint64_t target, uint8_t* out /*OUT*/, size_t cap)
{
    static const uint8_t opc[] = { 0xe8 };

    return x86_put_rel32(opc, sizeof(opc), addr, target, out, cap);
}

int
arch_emit_store_ret64(uint64_t value, uint8_t* out /*OUT*/, size_t cap)
{
    static const uint8_t push_r11[] = { 0x41, 0x53 };
    static const uint8_t movabs_r11[] = { 0x49, 0xbb };
    static const uint8_t store[] = { 0x4c, 0x89, 0x5c, 0x24, 0x08 }; /* mov %r11,8(%rsp) */
    static const uint8_t pop_r11[] = { 0x41, 0x5b };

    if (out == NULL || cap < 19)
        return QP_EINVAL;
    memcpy(out, push_r11, 2);
    memcpy(out + 2, movabs_r11, 2);
    memcpy(out + 4, &value, 8);
    memcpy(out + 12, store, 5);
    memcpy(out + 17, pop_r11, 2);
    return 19;
}

int
arch_emit_call_ret(const uint8_t *buf, const arch_insn_t *in, uint64_t addr, uint64_t ret,
                   uint8_t *out /*OUT*/, size_t cap)
{
    static const uint8_t below[] = { 0x48, 0x8d, 0x64, 0x24, 0xf8, 0x50 }; /* lea; push */
    static const uint8_t store[] = { 0x48, 0x89, 0x44, 0x24, 0x08, 0x58 }; /* mov; pop */
    if (buf == NULL || in == NULL || out == NULL || cap < 19 + 5
        || (in->kind != ARCH_KIND_CALL && in->kind != ARCH_KIND_CALL_IND))
        return QP_EINVAL;
    memcpy(out, below, sizeof(below));
    out[6] = 0x48; /* lea RET(%rip),%rax */
    out[7] = 0x8d;
    out[8] = 0x05;
    int64_t d = (int64_t)ret - (int64_t)(addr + 13);
    if (d < INT32_MIN || d > INT32_MAX)
        return QP_ERANGE;
    x86_put32(out + 9, (uint32_t)(int32_t)d);
    memcpy(out + 13, store, sizeof(store));
    if (in->kind == ARCH_KIND_CALL) {
        int n = arch_emit_jmp(addr + 19, in->target, out + 19, cap - 19);
        return n < 0 ? n : 19 + n;
    }
    /* call *OP is FF /2: the same bytes with /4 are jmp *OP. */
    arch_ops_t ops;
    if (arch_decode_ops(buf, in->len, in->addr, &ops) < 0)
        return QP_EUNSUPP;
    if (ops.src.kind == ARCH_OPND_MEM
        && (ops.src.base == ARCH_REG_SP || ops.src.index == ARCH_REG_SP))
        return QP_EUNSUPP;
    if (ops.src.kind == ARCH_OPND_REG && ops.src.reg == ARCH_REG_SP)
        return QP_EUNSUPP;
    size_t k = 0;
    while (k < in->len && (buf[k] == 0xf0 || buf[k] == 0xf2 || buf[k] == 0xf3 || buf[k] == 0x2e
                           || buf[k] == 0x36 || buf[k] == 0x3e || buf[k] == 0x26
                           || buf[k] == 0x64 || buf[k] == 0x65 || buf[k] == 0x66
                           || buf[k] == 0x67))
        k++;
    if (k < in->len && (buf[k] & 0xf0) == 0x40)
        k++;
    if (k + 1 >= in->len || buf[k] != 0xff || ((buf[k + 1] >> 3) & 7) != 2
        || cap - 19 < in->len)
        return QP_EUNSUPP;
    uint8_t *j = out + 19;
    memcpy(j, buf, in->len);
    j[k + 1] = (uint8_t)((j[k + 1] & ~0x38) | (4 << 3));
    if (in->flags & ARCH_F_RIPREL) {
        if (in->rel_size != 4)
            return QP_EUNSUPP;
        int64_t r = (int64_t)in->target - (int64_t)(addr + 19 + in->len);
        if (r < INT32_MIN || r > INT32_MAX)
            return QP_ERANGE;
        x86_put32(j + in->rel_off, (uint32_t)(int32_t)r);
    }
    return 19 + in->len;
}

int
arch_emit_jcc(uint64_t addr, int cond, uint64_t target, uint8_t* out /*OUT*/, size_t cap)
{
    /* The x86 condition code of each arch_cond_t, indexed by the enum value. */
    static const uint8_t cc[] = {
        [ARCH_COND_A] = 0x7,
        [ARCH_COND_AE] = 0x3,
        [ARCH_COND_B] = 0x2,
        [ARCH_COND_BE] = 0x6,
        [ARCH_COND_E] = 0x4,
        [ARCH_COND_NE] = 0x5,
        [ARCH_COND_G] = 0xf,
        [ARCH_COND_GE] = 0xd,
        [ARCH_COND_L] = 0xc,
        [ARCH_COND_LE] = 0xe,
    };
    uint8_t opc[2];

    if (cond <= ARCH_COND_NONE || cond >= ARCH_COND_OTHER)
        return QP_EINVAL;
    opc[0] = 0x0f;
    opc[1] = (uint8_t)(0x80 | cc[cond]);
    return x86_put_rel32(opc, sizeof(opc), addr, target, out, cap);
}

/* [prefix] OPCODE with REX and MODRM on disp32(%rip) = COUNTER, the prefix as MODE says
 * (none, lock, or the switchable ds). */
static int
x86_counter_rmw(uint64_t addr, uint64_t counter, int mode, uint8_t rex, uint8_t opcode,
    uint8_t modrm, uint8_t* out /*OUT*/, size_t cap)
{
    uint8_t opc[] = { ARCH_INC_LOCK_BYTE, rex, opcode, modrm };
    size_t skip = 0;

    if (mode == ARCH_INC_PLAIN)
        skip = 1;
    else if (mode == ARCH_INC_SWITCH)
        opc[0] = ARCH_INC_PLAIN_BYTE;
    else if (mode != ARCH_INC_ATOMIC)
        return QP_EINVAL;
    return x86_put_rel32(opc + skip, sizeof(opc) - skip, addr, counter, out, cap);
}

int
arch_emit_counter_inc(
    uint64_t addr, uint64_t counter, int mode, uint8_t* out /*OUT*/, size_t cap)
{
    /* [prefix] incq disp32(%rip): REX.W ff /0, ModRM 05. */
    return x86_counter_rmw(addr, counter, mode, 0x48, 0xff, 0x05, out, cap);
}

int
arch_emit_counter_add_reg(uint64_t addr, uint64_t counter, int mode, uint8_t reg, int subtract,
    uint8_t* out /*OUT*/, size_t cap)
{
    /* [prefix] add|sub %r64,disp32(%rip): REX.W(+R) 01|29 /r, ModRM 00 r 101. */
    unsigned hw = (unsigned)reg - 1; /* arch/'s 1..16 are rax..r15 in encoding order */

    if (reg == ARCH_REG_NONE || reg >= ARCH_NREGS || reg == ARCH_REG_SP)
        return QP_EINVAL;
    return x86_counter_rmw(addr, counter, mode, (uint8_t)(0x48 | (hw >= 8 ? 0x04 : 0)),
                           subtract ? 0x29 : 0x01, (uint8_t)(0x05 | (hw & 7) << 3), out, cap);
}

int
arch_emit_call_protected(uint64_t addr, uint64_t target, uint8_t* out /*OUT*/, size_t cap)
{
    /* lea -0x80(%rsp),%rsp; call rel32; lea 0x80(%rsp),%rsp: 5 + 5 + 8 bytes. */
    static const uint8_t below[] = { 0x48, 0x8d, 0x64, 0x24, 0x80 };
    static const uint8_t above[] = { 0x48, 0x8d, 0xa4, 0x24, 0x80, 0x00, 0x00, 0x00 };
    int n;

    if (out == NULL || cap < sizeof(below) + 5 + sizeof(above))
        return QP_EINVAL;
    memcpy(out, below, sizeof(below));
    n = arch_emit_call(addr + sizeof(below), target, out + sizeof(below), 5);
    if (n < 0)
        return n;
    memcpy(out + sizeof(below) + 5, above, sizeof(above));
    return (int)(sizeof(below) + 5 + sizeof(above));
}

int
arch_emit_flags_save(uint8_t* out /*OUT*/, size_t cap)
{
    /* lea -0x80(%rsp),%rsp; pushfq. lea leaves the flags alone, unlike sub. */
    static const uint8_t seq[] = { 0x48, 0x8d, 0x64, 0x24, 0x80, 0x9c };

    if (out == NULL || cap < sizeof(seq))
        return QP_EINVAL;
    memcpy(out, seq, sizeof(seq));
    return (int)sizeof(seq);
}

int
arch_emit_flags_restore(uint8_t* out /*OUT*/, size_t cap)
{
    /* popfq; lea 0x80(%rsp),%rsp (disp32: +128 does not fit a disp8). */
    static const uint8_t seq[] = { 0x9d, 0x48, 0x8d, 0xa4, 0x24, 0x80, 0x00, 0x00, 0x00 };

    if (out == NULL || cap < sizeof(seq))
        return QP_EINVAL;
    memcpy(out, seq, sizeof(seq));
    return (int)sizeof(seq);
}

int
arch_emit_nops(size_t len, uint8_t* out /*OUT*/, size_t cap)
{
    /* Intel's recommended multi-byte nops (SDM vol. 2B, NOP), by length 1..9. */
    static const uint8_t nops[9][9] = {
        { 0x90 },
        { 0x66, 0x90 },
        { 0x0f, 0x1f, 0x00 },
        { 0x0f, 0x1f, 0x40, 0x00 },
        { 0x0f, 0x1f, 0x44, 0x00, 0x00 },
        { 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00 },
        { 0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00 },
        { 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00 },
        { 0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00 },
    };
    size_t done = 0, n;

    if ((out == NULL && len != 0) || cap < len || len > INT32_MAX)
        return QP_EINVAL;
    while (done < len) {
        n = len - done < 9 ? len - done : 9;
        memcpy(out + done, nops[n - 1], n);
        done += n;
    }
    return (int)len;
}

int
arch_emit_trap(uint8_t* out /*OUT*/, size_t cap)
{
    if (out == NULL || cap < 2)
        return QP_EINVAL;
    out[0] = 0x0f; /* ud2 */
    out[1] = 0x0b;
    return 2;
}

/*
 * Patch the rel32 of an instruction ending at OUT + END (its 4 last bytes) so that it
 * addresses TARGET from code at ADDR (OUT's runtime address). 0 or QP_ERANGE.
 */
static int
x86_fix_rel32(uint8_t* out, uint64_t addr, size_t end, uint64_t target)
{
    int64_t d = x86_disp(addr + end, target);

    if (!x86_fits32(d))
        return QP_ERANGE;
    x86_put32(out + end - 4, (uint32_t)d);
    return 0;
}

/*
 * The disp32 at OUT + POS of an instruction that ends at OUT + END (an immediate may
 * follow the displacement), so that it addresses TARGET from code at ADDR. 0 or
 * QP_ERANGE.
 */
static int
x86_fix_disp_at(uint8_t* out, uint64_t addr, size_t pos, size_t end, uint64_t target)
{
    int64_t d = x86_disp(addr + end, target);

    if (!x86_fits32(d))
        return QP_ERANGE;
    x86_put32(out + pos, (uint32_t)d);
    return 0;
}

int
arch_emit_timer_start(uint64_t addr, uint64_t depth, uint64_t start, uint8_t* out /*OUT*/,
    size_t cap)
{
    /*
     * START is written before DEPTH leaves 0, so that a sampler reading the words from
     * outside (dyn, while the process runs) never sees an active timer with a stale
     * START. Two threads entering at once may both write START: the later value stays
     * (the union of their intervals loses the few cycles between them).
     */
    static const uint8_t seq[] = {
        0x48, 0x8d, 0x64, 0x24, 0x80,             /*  0 lea -0x80(%rsp),%rsp */
        0x50, 0x52,                               /*  5 push %rax; push %rdx */
        0x48, 0x83, 0x3d, 0, 0, 0, 0, 0x00,       /*  7 cmpq $0,DEPTH(%rip) */
        0x75, 0x10,                               /* 15 jne 33 (running already) */
        0x0f, 0x31,                               /* 17 rdtsc */
        0x48, 0xc1, 0xe2, 0x20,                   /* 19 shl $32,%rdx */
        0x48, 0x09, 0xd0,                         /* 23 or %rdx,%rax */
        0x48, 0x89, 0x05, 0, 0, 0, 0,             /* 26 mov %rax,START(%rip) */
        0xf0, 0x48, 0x83, 0x05, 0, 0, 0, 0, 0x01, /* 33 lock addq $1,DEPTH(%rip) */
        0x5a, 0x58,                               /* 42 pop %rdx; pop %rax */
        0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0,    /* 44 lea 0x80(%rsp),%rsp */
    };
    int rc;

    if (out == NULL || cap < sizeof(seq))
        return QP_EINVAL;
    memcpy(out, seq, sizeof(seq));
    if ((rc = x86_fix_disp_at(out, addr, 10, 15, depth)) < 0
        || (rc = x86_fix_rel32(out, addr, 33, start)) < 0
        || (rc = x86_fix_disp_at(out, addr, 37, 42, depth)) < 0)
        return rc;
    return (int)sizeof(seq);
}

int
arch_emit_timer_stop(uint64_t addr, uint64_t depth, uint64_t start, uint64_t total,
    uint8_t* out /*OUT*/, size_t cap)
{
    static const uint8_t seq[] = {
        0x48, 0x8d, 0x64, 0x24, 0x80,             /*  0 lea -0x80(%rsp),%rsp */
        0x50, 0x52,                               /*  5 push %rax; push %rdx */
        0x48, 0x8b, 0x05, 0, 0, 0, 0,             /*  7 mov DEPTH(%rip),%rax */
        0x48, 0x85, 0xc0,                         /* 14 test %rax,%rax */
        0x7e, 0x22,                               /* 17 jle 53 (no matching start) */
        0xf0, 0x48, 0xff, 0x0d, 0, 0, 0, 0,       /* 19 lock decq DEPTH(%rip) */
        0x75, 0x18,                               /* 27 jne 53 (still inside) */
        0x0f, 0x31,                               /* 29 rdtsc */
        0x48, 0xc1, 0xe2, 0x20,                   /* 31 shl $32,%rdx */
        0x48, 0x09, 0xd0,                         /* 35 or %rdx,%rax */
        0x48, 0x2b, 0x05, 0, 0, 0, 0,             /* 38 sub START(%rip),%rax */
        0xf0, 0x48, 0x01, 0x05, 0, 0, 0, 0,       /* 45 lock add %rax,TOTAL(%rip) */
        0x5a, 0x58,                               /* 53 pop %rdx; pop %rax */
        0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0,    /* 55 lea 0x80(%rsp),%rsp */
    };
    int rc;

    if (out == NULL || cap < sizeof(seq))
        return QP_EINVAL;
    memcpy(out, seq, sizeof(seq));
    if ((rc = x86_fix_rel32(out, addr, 14, depth)) < 0
        || (rc = x86_fix_rel32(out, addr, 27, depth)) < 0
        || (rc = x86_fix_rel32(out, addr, 45, start)) < 0
        || (rc = x86_fix_rel32(out, addr, 53, total)) < 0)
        return rc;
    return (int)sizeof(seq);
}

int
arch_emit_syscall_nr(long nr, uint8_t *out /*OUT*/, size_t cap)
{
    if (out == NULL || cap < 7 || nr < 0 || nr > 0x7fffffffL)
        return QP_EINVAL;
    uint32_t imm = (uint32_t)nr;
    out[0] = 0xb8; /* mov $imm32,%eax */
    memcpy(out + 1, &imm, 4);
    out[5] = 0x0f; /* syscall */
    out[6] = 0x05;
    return 7;
}

/*****************************************************************************
 * Indirect jumps translated at run time
 */

/*
 * `push OPND` (the operand of an indirect jump, from arch_decode_ops) at ADDR, in code
 * that has moved %rsp down by SP_ADJ first: a %rsp base gets SP_ADJ more displacement,
 * a rip-relative operand a displacement for ADDR. Memory operands always take the disp32
 * form (the length does not depend on ADDR). Returns the length, QP_EUNSUPP (a segment
 * override, %rsp itself as the target) or QP_ERANGE.
 */
static int
x86_push_operand(const arch_opnd_t *o, uint64_t addr, int32_t sp_adj, uint8_t *out)
{
    if (o->kind == ARCH_OPND_REG) {
        if (o->reg == ARCH_REG_NONE || o->reg >= ARCH_NREGS || o->reg == ARCH_REG_SP
            || o->size != 8)
            return QP_EUNSUPP;
        int r = o->reg - 1, n = 0;
        if (r >= 8)
            out[n++] = 0x41; /* REX.B */
        out[n++] = (uint8_t)(0x50 + (r & 7));
        return n;
    }
    if (o->kind != ARCH_OPND_MEM || o->seg != 0 || o->size != 8)
        return QP_EUNSUPP;
    int n = 0;
    if (o->base == ARCH_REG_PC) {
        if (o->index != ARCH_REG_NONE)
            return QP_EUNSUPP;
        out[n++] = 0xff;
        out[n++] = 0x35; /* mod 00, reg 6 (push), rm 101: rip + disp32 */
        int64_t d = (int64_t)((uint64_t)o->disp - (addr + 6));
        if (!x86_fits32(d))
            return QP_ERANGE;
        x86_put32(out + n, (uint32_t)d);
        return n + 4;
    }
    if ((o->base != ARCH_REG_NONE && o->base >= ARCH_NREGS)
        || (o->index != ARCH_REG_NONE && (o->index >= ARCH_NREGS || o->index == ARCH_REG_SP)))
        return QP_EUNSUPP;
    int64_t disp = o->disp + (o->base == ARCH_REG_SP ? sp_adj : 0);
    if (!x86_fits32(disp))
        return QP_ERANGE;
    int b = o->base != ARCH_REG_NONE ? o->base - 1 : 5;  /* no base: SIB base 101, mod 00 */
    int x = o->index != ARCH_REG_NONE ? o->index - 1 : 4; /* no index: SIB index 100 */
    int ss = o->scale == 8 ? 3 : o->scale == 4 ? 2 : o->scale == 2 ? 1 : 0;
    uint8_t rex = (uint8_t)(0x40 | (x >= 8 ? 0x02 : 0) | (b >= 8 && o->base != ARCH_REG_NONE ? 0x01 : 0));
    if (rex != 0x40)
        out[n++] = rex;
    out[n++] = 0xff;
    out[n++] = o->base != ARCH_REG_NONE ? 0xb4 : 0x34; /* mod 10 (or 00: no base), reg 6, rm 100 */
    out[n++] = (uint8_t)((ss << 6) | ((x & 7) << 3) | (b & 7));
    x86_put32(out + n, (uint32_t)disp);
    return n + 4;
}

int
arch_emit_jmp_xlate(const uint8_t *buf, const arch_insn_t *in, uint64_t addr, uint64_t stub,
    int32_t miss, uint8_t *out /*OUT*/, size_t cap)
{
    static const uint8_t below[] = { 0x48, 0x8d, 0x64, 0x24, 0x80 }; /* lea -0x80(%rsp),%rsp */
    arch_ops_t ops;
    uint8_t push[16];
    if (buf == NULL || in == NULL || out == NULL || in->kind != ARCH_KIND_JMP_IND)
        return QP_EINVAL;
    if (arch_decode_ops(buf, in->len, in->addr, &ops) < 0 || ops.op != ARCH_OP_JMP)
        return QP_EUNSUPP;
    int n = x86_push_operand(&ops.src, addr + sizeof(below), 128, push);
    if (n < 0)
        return n;
    if (cap < sizeof(below) + (size_t)n + 10)
        return QP_EINVAL;
    memcpy(out, below, sizeof(below));
    memcpy(out + sizeof(below), push, (size_t)n);
    uint8_t *p = out + sizeof(below) + n;
    p[0] = 0x68; /* push $MISS (sign-extended) */
    x86_put32(p + 1, (uint32_t)miss);
    uint64_t at = addr + sizeof(below) + (uint64_t)n + 5;
    int j = arch_emit_jmp(at, stub, p + 5, 5);
    return j < 0 ? j : (int)sizeof(below) + n + 10;
}

/*
 * The translation stubs' lookup, shared by arch_emit_xlate_stub and ..._out: [%rsp] =
 * the site's miss counter (from the table, or 0), [%rsp + 8] = the jump's target T, then
 * the 128 bytes skipped (arch_emit_jmp_xlate). The target to go to replaces the
 * counter's slot. The flags are kept with lahf/seto and sahf (popfq is slow); the
 * registers the lookup uses are saved. rax: T, then a slot's key, then the new target;
 * rsi: the table; r8: the load bias; ecx: the key (T - lo + 1); rdx: the slot; rdi: the
 * mask. Open addressing, linear probing, a multiplicative hash (arch.h). Offsets are the
 * stubs' (the pieces are laid out alike up to the hit's store).
 */
static const uint8_t xlate_save[] = {
    0x50,                                     /*   0 push %rax */
    0x9f,                                     /*   1 lahf */
    0x0f, 0x90, 0xc0,                         /*   2 seto %al */
    0x50,                                     /*   5 push %rax */
    0x51,                                     /*   6 push %rcx */
    0x52,                                     /*   7 push %rdx */
    0x56,                                     /*   8 push %rsi */
    0x57,                                     /*   9 push %rdi */
    0x41, 0x50,                               /*  10 push %r8 */
    0x48, 0x8b, 0x44, 0x24, 0x40,             /*  12 mov 0x40(%rsp),%rax */
    0x48, 0x8d, 0x35, 0, 0, 0, 0,             /*  17 lea TABLE(%rip),%rsi */
    0x49, 0x89, 0xf0,                         /*  24 mov %rsi,%r8 */
    0x4c, 0x2b, 0x06,                         /*  27 sub (%rsi),%r8 */
    0x4c, 0x29, 0xc0,                         /*  30 sub %r8,%rax */
    0x48, 0x2b, 0x46, 0x10,                   /*  33 sub 0x10(%rsi),%rax */
    0x48, 0x3b, 0x46, 0x18,                   /*  37 cmp 0x18(%rsi),%rax */
};                                            /*  41 jae OUT_OF_SPAN (the stub's) */
static const uint8_t xlate_probe[] = {
    0x8b, 0x4e, 0x28,                         /*  43 mov 0x28(%rsi),%ecx */
    0x69, 0xd0, 0xb1, 0x79, 0x37, 0x9e,       /*  46 imul $0x9e3779b1,%eax,%edx */
    0xd3, 0xea,                               /*  52 shr %cl,%edx */
    0x48, 0x8b, 0x7e, 0x08,                   /*  54 mov 0x8(%rsi),%rdi */
    0x8d, 0x48, 0x01,                         /*  58 lea 0x1(%rax),%ecx */
    0x48, 0x21, 0xfa,                         /*  61 and %rdi,%rdx */
    0x8b, 0x44, 0xd6, 0x30,                   /*  64 mov 0x30(%rsi,%rdx,8),%eax */
    0x39, 0xc8,                               /*  68 cmp %ecx,%eax */
    0x74, 0x09,                               /*  70 je 81 (hit) */
    0x85, 0xc0,                               /*  72 test %eax,%eax */
};                                            /*  74 je NOT_FOUND (the stub's) */
static const uint8_t xlate_hit[] = {
    0x48, 0xff, 0xc2,                         /*  76 inc %rdx */
    0xeb, 0xec,                               /*  79 jmp 61 */
    0x48, 0x63, 0x44, 0xd6, 0x34,             /*  81 movslq 0x34(%rsi,%rdx,8),%rax */
    0x48, 0x03, 0x46, 0x10,                   /*  86 add 0x10(%rsi),%rax */
    0x4c, 0x01, 0xc0,                         /*  90 add %r8,%rax */
    0x48, 0x89, 0x44, 0x24, 0x38,             /*  93 mov %rax,0x38(%rsp) */
};                                            /*  98 */
static const uint8_t xlate_restore[] = {
    0x41, 0x58,                               /* pop %r8 */
    0x5f,                                     /* pop %rdi */
    0x5e,                                     /* pop %rsi */
    0x5a,                                     /* pop %rdx */
    0x59,                                     /* pop %rcx */
    0x58,                                     /* pop %rax */
    0x04, 0x7f,                               /* add $0x7f,%al */
    0x9e,                                     /* sahf */
    0x58,                                     /* pop %rax */
};

_Static_assert(sizeof(xlate_save) + 2 + sizeof(xlate_probe) + 2 + sizeof(xlate_hit) == 98,
               "the lookup up to the hit's store, as the offsets say");

/* BYTES at OUT + *N. */
static void
put_bytes(uint8_t *out, size_t *n, const uint8_t *bytes, size_t len)
{
    memcpy(out + *n, bytes, len);
    *n += len;
}

/* The lookup up to the hit's store (98 bytes), its two misses (out of the span, not
 * found) jumping to MISS_SPAN and MISS_SLOT (offsets in the stub); TABLE's lea fixed. */
static int
put_lookup(uint8_t *out, uint64_t addr, uint64_t table, size_t miss_span, size_t miss_slot)
{
    size_t n = 0;
    put_bytes(out, &n, xlate_save, sizeof(xlate_save));
    out[n] = 0x73; /* jae rel8 */
    out[n + 1] = (uint8_t)(miss_span - (n + 2));
    n += 2;
    put_bytes(out, &n, xlate_probe, sizeof(xlate_probe));
    out[n] = 0x74; /* je rel8 */
    out[n + 1] = (uint8_t)(miss_slot - (n + 2));
    n += 2;
    put_bytes(out, &n, xlate_hit, sizeof(xlate_hit));
    int rc = x86_fix_rel32(out, addr, 24, table);
    return rc < 0 ? rc : (int)n;
}

int
arch_emit_xlate_stub(uint64_t addr, uint64_t table, uint8_t *out /*OUT*/, size_t cap)
{
    /* A miss in the span counts in the site's counter (its address in the miss slot,
     * relative to the table) and goes to T; one out of the span goes to T. The target
     * replaces the counter's slot, which `ret $136` pops. */
    static const uint8_t count_miss[] = {
        0xeb, 0x1b,                               /*  98 jmp 127 (restore) */
        0x48, 0x8b, 0x44, 0x24, 0x38,             /* 100 mov 0x38(%rsp),%rax */
        0x48, 0x85, 0xc0,                         /* 105 test %rax,%rax */
        0x74, 0x07,                               /* 108 je 117 */
        0x48, 0x01, 0xf0,                         /* 110 add %rsi,%rax */
        0xf0, 0x48, 0xff, 0x00,                   /* 113 lock incq (%rax) */
        0x48, 0x8b, 0x44, 0x24, 0x40,             /* 117 mov 0x40(%rsp),%rax */
        0x48, 0x89, 0x44, 0x24, 0x38,             /* 122 mov %rax,0x38(%rsp) */
    };                                            /* 127 restore, 138 ret $0x88 */
    static const uint8_t ret136[] = { 0xc2, 0x88, 0x00 };
    if (out == NULL || cap < ARCH_XLATE_STUB_LEN)
        return QP_EINVAL;
    int rc = put_lookup(out, addr, table, 117, 100);
    if (rc < 0)
        return rc;
    size_t n = (size_t)rc;
    put_bytes(out, &n, count_miss, sizeof(count_miss));
    put_bytes(out, &n, xlate_restore, sizeof(xlate_restore));
    put_bytes(out, &n, ret136, sizeof(ret136));
    return n == ARCH_XLATE_STUB_LEN ? (int)n : QP_EBUG;
}

int
arch_emit_xlate_stub_out(uint64_t addr, uint64_t table, uint64_t miss, uint8_t *out /*OUT*/,
    size_t cap)
{
    /* arch_emit_xlate_stub's lookup, but every miss, in the span or not, goes to MISS
     * with T left on the stack: the miss slot gets MISS and a plain ret pops it, so
     * [%rsp] = T, then the 128 bytes skipped. */
    static const uint8_t ret136[] = { 0xc2, 0x88, 0x00 };          /* 109 ret $0x88 */
    static const uint8_t to_miss[] = {
        0x48, 0x8d, 0x05, 0, 0, 0, 0,             /* 112 lea MISS(%rip),%rax */
        0x48, 0x89, 0x44, 0x24, 0x38,             /* 119 mov %rax,0x38(%rsp) */
    };                                            /* 124 restore, 135 ret (to MISS) */
    static const uint8_t ret[] = { 0xc3 };
    if (out == NULL || cap < ARCH_XLATE_STUB_OUT_LEN)
        return QP_EINVAL;
    int rc = put_lookup(out, addr, table, 112, 112);
    if (rc < 0)
        return rc;
    size_t n = (size_t)rc;
    put_bytes(out, &n, xlate_restore, sizeof(xlate_restore));
    put_bytes(out, &n, ret136, sizeof(ret136));
    put_bytes(out, &n, to_miss, sizeof(to_miss));
    put_bytes(out, &n, xlate_restore, sizeof(xlate_restore));
    put_bytes(out, &n, ret, sizeof(ret));
    if (n != ARCH_XLATE_STUB_OUT_LEN)
        return QP_EBUG;
    rc = x86_fix_rel32(out, addr, 119, miss);
    return rc < 0 ? rc : (int)n;
}

int
arch_emit_xlate_go(uint8_t *out /*OUT*/, size_t cap)
{
    if (out == NULL || cap < 3)
        return QP_EINVAL;
    out[0] = 0xc2; /* ret $0x80: to T, and the 128 bytes skipped */
    out[1] = 0x80;
    out[2] = 0x00;
    return 3;
}

/*****************************************************************************
 * A shared library's start that points its own PLT at the moved code
 */

int
arch_emit_got_fix(uint8_t *out /*OUT*/, size_t cap)
{
    /* %r9 = the header, %r8 = the load bias, %r10 = the pages were made writable,
     * %r11 = the entry, %rcx = entries left. mprotect (10) keeps all but %rax, %rcx
     * and %r11. */
    static const uint8_t code[] = {
        0xf3, 0x0f, 0x1e, 0xfa,                   /*   0 endbr64 */
        0x57, 0x56, 0x52,                         /*   4 push %rdi; push %rsi; push %rdx */
        0x4c, 0x8d, 0x0d, 0x9a, 0x00, 0x00, 0x00, /*   7 lea hdr(%rip),%r9 (0xa8) */
        0x4d, 0x89, 0xc8,                         /*   e mov %r9,%r8 */
        0x4d, 0x2b, 0x01,                         /*  11 sub (%r9),%r8: the bias */
        0x45, 0x31, 0xd2,                         /*  14 xor %r10d,%r10d */
        0x49, 0x8b, 0x79, 0x10,                   /*  17 mov 0x10(%r9),%rdi: relro_lo */
        0x49, 0x8b, 0x71, 0x18,                   /*  1b mov 0x18(%r9),%rsi: relro_hi */
        0x48, 0x81, 0xe7, 0x00, 0xf0, 0xff, 0xff, /*  1f and $-4096,%rdi */
        0x48, 0x81, 0xe6, 0x00, 0xf0, 0xff, 0xff, /*  26 and $-4096,%rsi */
        0x48, 0x39, 0xf7,                         /*  2d cmp %rsi,%rdi */
        0x73, 0x1d,                               /*  30 jae 4f (no whole page) */
        0x48, 0x29, 0xfe,                         /*  32 sub %rdi,%rsi */
        0x4c, 0x01, 0xc7,                         /*  35 add %r8,%rdi */
        0xba, 0x03, 0x00, 0x00, 0x00,             /*  38 mov $3,%edx: PROT_READ|WRITE */
        0xb8, 0x0a, 0x00, 0x00, 0x00,             /*  3d mov $10,%eax: mprotect */
        0x0f, 0x05,                               /*  42 syscall */
        0x48, 0x85, 0xc0,                         /*  44 test %rax,%rax */
        0x75, 0x49,                               /*  47 jne 92 (failed: write nothing) */
        0x41, 0xba, 0x01, 0x00, 0x00, 0x00,       /*  49 mov $1,%r10d */
        0x49, 0x8b, 0x49, 0x08,                   /*  4f mov 0x8(%r9),%rcx: count */
        0x4d, 0x8d, 0x59, 0x28,                   /*  53 lea 0x28(%r9),%r11: entry 0 */
        0x48, 0x85, 0xc9,                         /*  57 test %rcx,%rcx */
        0x74, 0x25,                               /*  5a je 81 */
        0x49, 0x8b, 0x13,                         /*  5c mov (%r11),%rdx: slot */
        0x4c, 0x01, 0xc2,                         /*  5f add %r8,%rdx */
        0x49, 0x8b, 0x43, 0x08,                   /*  62 mov 0x8(%r11),%rax: old */
        0x4c, 0x01, 0xc0,                         /*  66 add %r8,%rax */
        0x48, 0x39, 0x02,                         /*  69 cmp %rax,(%rdx) */
        0x75, 0x0a,                               /*  6c jne 78 (interposed, or lazy) */
        0x49, 0x8b, 0x43, 0x10,                   /*  6e mov 0x10(%r11),%rax: new */
        0x4c, 0x01, 0xc0,                         /*  72 add %r8,%rax */
        0x48, 0x89, 0x02,                         /*  75 mov %rax,(%rdx) */
        0x49, 0x83, 0xc3, 0x18,                   /*  78 add $24,%r11 */
        0x48, 0xff, 0xc9,                         /*  7c dec %rcx */
        0xeb, 0xd6,                               /*  7f jmp 57 */
        0x45, 0x85, 0xd2,                         /*  81 test %r10d,%r10d */
        0x74, 0x0c,                               /*  84 je 92 */
        0xba, 0x01, 0x00, 0x00, 0x00,             /*  86 mov $1,%edx: PROT_READ */
        0xb8, 0x0a, 0x00, 0x00, 0x00,             /*  8b mov $10,%eax */
        0x0f, 0x05,                               /*  90 syscall (%rdi, %rsi kept) */
        0x49, 0x8b, 0x41, 0x20,                   /*  92 mov 0x20(%r9),%rax: next */
        0x5a, 0x5e, 0x5f,                         /*  96 pop %rdx; pop %rsi; pop %rdi */
        0x48, 0x85, 0xc0,                         /*  99 test %rax,%rax */
        0x74, 0x05,                               /*  9c je a3 */
        0x4c, 0x01, 0xc0,                         /*  9e add %r8,%rax */
        0xff, 0xe0,                               /*  a1 jmp *%rax */
        0xc3,                                     /*  a3 ret */
        0xcc, 0xcc, 0xcc, 0xcc,                   /*  a4 int3 x4; a8: the header */
    };
    if (out == NULL || cap < sizeof(code))
        return QP_EINVAL;
    memcpy(out, code, sizeof(code));
    return (int)sizeof(code);
}
