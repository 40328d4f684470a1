/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * arch_decode for A64: control-flow kind, direct targets, the pc-relative forms, pointer
 * authentication, and the NZCV flags read and written. Hand-written from the Arm ARM's
 * encoding tables (DDI 0487, C4.1); no decoder library. Instructions outside the families
 * below decode as ARCH_KIND_SEQ without checking that they are allocated encodings
 * (a linear sweep over data is not this decoder's job: cfg/ follows control flow), except
 * the reserved group (op0 = 0000), which is QP_EDECODE unless it is `udf`.
 *
 * Register fields: x0..x30 are 0..30; 31 is sp or xzr depending on the instruction.
 */
#include <string.h>

#include "arch/aarch64/a64_priv.h"

/* NZCV as arch.h's flag bits. */
#define A64_N ARCH_FLAG_SF
#define A64_Z ARCH_FLAG_ZF
#define A64_C ARCH_FLAG_CF
#define A64_V ARCH_FLAG_OF
#define A64_NZCV (A64_N | A64_Z | A64_C | A64_V)

uint32_t
a64_word(const uint8_t *buf)
{
    return (uint32_t)buf[0] | (uint32_t)buf[1] << 8 | (uint32_t)buf[2] << 16
           | (uint32_t)buf[3] << 24;
}

/* Sign-extend the low BITS bits of V. */
static int64_t
sext(uint64_t v, unsigned bits)
{
    uint64_t m = 1ull << (bits - 1);
    v &= (1ull << bits) - 1;
    return (int64_t)((v ^ m) - m);
}

a64_form_t
a64_form(uint32_t w)
{
    if ((w & 0x7c000000) == 0x14000000)
        return (w & 0x80000000) ? A64_FORM_BL : A64_FORM_B;
    if ((w & 0xff000000) == 0x54000000)
        return A64_FORM_BCOND; /* b.cond (bit 4 = 0) and bc.cond (bit 4 = 1) */
    if ((w & 0x7e000000) == 0x34000000)
        return A64_FORM_CBZ;
    if ((w & 0x7e000000) == 0x36000000)
        return A64_FORM_TBZ;
    if ((w & 0x1f000000) == 0x10000000)
        return (w & 0x80000000) ? A64_FORM_ADRP : A64_FORM_ADR;
    if ((w & 0x3b000000) == 0x18000000 && (w & 0xc4000000) != 0xc4000000)
        return A64_FORM_LDR_LIT; /* opc 11 with V=1 is unallocated */
    return A64_FORM_OTHER;
}

/* The NZCV bits condition COND (0..15) reads. */
static uint8_t
cond_flags(unsigned cond)
{
    static const uint8_t by_pair[8] = {
        A64_Z,                 /* eq ne */
        A64_C,                 /* cs cc */
        A64_N,                 /* mi pl */
        A64_V,                 /* vs vc */
        A64_C | A64_Z,         /* hi ls */
        A64_N | A64_V,         /* ge lt */
        A64_N | A64_V | A64_Z, /* gt le */
        0,                     /* al nv */
    };
    return by_pair[(cond >> 1) & 7];
}

/* Unconditional branch (register): br, blr, ret and their authenticating forms. */
static int
decode_branch_reg(uint32_t w, arch_insn_t *out)
{
    unsigned opc = (w >> 21) & 0xf, op2 = (w >> 16) & 0x1f, op3 = (w >> 10) & 0x3f;
    unsigned rn = (w >> 5) & 0x1f, op4 = w & 0x1f;
    if (op2 != 0x1f)
        return QP_EDECODE;
    int pac;
    switch (opc) {
    case 0: /* br, braaz, brabz */
    case 1: /* blr, blraaz, blrabz */
    case 2: /* ret, retaa, retab */
        if (op3 == 0 && op4 == 0)
            pac = 0;
        else if ((op3 == 2 || op3 == 3) && op4 == 0x1f && (opc != 2 || rn == 0x1f))
            pac = 1;
        else
            return QP_EDECODE;
        break;
    case 8: /* braa, brab */
    case 9: /* blraa, blrab */
        if (op3 != 2 && op3 != 3)
            return QP_EDECODE;
        pac = 1;
        break;
    case 4: /* eret, eretaa/ab */
    case 5: /* drps */
        out->flags |= ARCH_F_PRIV;
        out->kind = ARCH_KIND_HALT;
        return 0;
    default:
        return QP_EDECODE;
    }
    opc &= 7;
    out->kind = opc == 0 ? ARCH_KIND_JMP_IND : opc == 1 ? ARCH_KIND_CALL_IND : ARCH_KIND_RET;
    if (pac)
        out->flags |= ARCH_F_PAC_AUTH;
    if (opc == 2)
        out->flags |= ARCH_F_READS_SP * pac; /* retaa/ab use sp as the modifier */
    return 0;
}

/* The hint space (nop, bti, pac*, aut*): every unallocated hint is a nop. */
static void
decode_hint(uint32_t w, arch_insn_t *out)
{
    unsigned h = (w >> 5) & 0x7f; /* CRm:op2 */
    out->kind = ARCH_KIND_SEQ;
    switch (h) {
    case 0x00:
        out->kind = ARCH_KIND_NOP;
        break;
    case 0x08: case 0x0a:           /* pacia1716, pacib1716 */
    case 0x18: case 0x1a:           /* paciaz, pacibz */
        out->flags |= ARCH_F_PAC_SIGN;
        break;
    case 0x19: case 0x1b:           /* paciasp, pacibsp */
        out->flags |= ARCH_F_PAC_SIGN | ARCH_F_READS_SP;
        break;
    case 0x0c: case 0x0e:           /* autia1716, autib1716 */
    case 0x1c: case 0x1e:           /* autiaz, autibz */
        out->flags |= ARCH_F_PAC_AUTH;
        break;
    case 0x1d: case 0x1f:           /* autiasp, autibsp */
        out->flags |= ARCH_F_PAC_AUTH | ARCH_F_READS_SP;
        break;
    case 0x20: case 0x22: case 0x24: case 0x26: /* bti, bti c, bti j, bti jc */
        out->kind = ARCH_KIND_ENDBR;
        break;
    default:
        break;
    }
}

/* NZCV read and must-written by the data-processing and FP instructions that touch it. */
static void
decode_nzcv(uint32_t w, arch_insn_t *out)
{
    if ((w & 0x1f000000) == 0x11000000 && (w & 0x20000000)) /* adds/subs imm, cmp, cmn */
        out->flags_written = A64_NZCV;
    else if ((w & 0x1f000000) == 0x0b000000 && (w & 0x20000000)) /* adds/subs reg/ext */
        out->flags_written = A64_NZCV;
    else if ((w & 0x7f800000) == 0x72000000) /* ands imm, tst */
        out->flags_written = A64_NZCV;
    else if ((w & 0x7f000000) == 0x6a000000) /* ands/bics shifted register */
        out->flags_written = A64_NZCV;
    else if ((w & 0x1fe0fc00) == 0x1a000000) { /* adc, adcs, sbc, sbcs */
        out->flags_read = A64_C;
        if (w & 0x20000000)
            out->flags_written = A64_NZCV;
    } else if ((w & 0x3fe00410) == 0x3a400000) { /* ccmn, ccmp (register, immediate) */
        out->flags_read = A64_NZCV; /* its condition, and the flags it may keep */
        out->flags_written = A64_NZCV;
    } else if ((w & 0x1fe00000) == 0x1a800000) /* csel, csinc, csinv, csneg (cset...) */
        out->flags_read = cond_flags((w >> 12) & 0xf);
    else if ((w & 0xff200c00) == 0x1e200c00) /* fcsel */
        out->flags_read = cond_flags((w >> 12) & 0xf);
    else if ((w & 0xff200c00) == 0x1e200400) { /* fccmp, fccmpe */
        out->flags_read = A64_NZCV;
        out->flags_written = A64_NZCV;
    } else if ((w & 0xff20fc07) == 0x1e202000) /* fcmp, fcmpe (also against #0.0) */
        out->flags_written = A64_NZCV;
    else if ((w & 0xffffffe0) == 0xd53b4200) /* mrs xt, nzcv */
        out->flags_read = A64_NZCV;
    else if ((w & 0xffffffe0) == 0xd51b4200) /* msr nzcv, xt */
        out->flags_written = A64_NZCV;
    else if (w == 0xd500401f) /* cfinv */
        out->flags_read = A64_C;
    else if (w == 0xd500403f || w == 0xd500405f) /* xaflag, axflag */
        out->flags_read = A64_NZCV;
}

/* Does W use register 31 as sp (loads and stores, add/sub immediate or extended)? */
static int
uses_sp(uint32_t w)
{
    unsigned rn = (w >> 5) & 0x1f, rd = w & 0x1f;
    if ((w & 0x0a000000) == 0x08000000) /* loads and stores: base register */
        return rn == 31 && (w & 0x3b000000) != 0x18000000;
    if ((w & 0x1f000000) == 0x11000000) /* add/sub immediate */
        return rn == 31 || (rd == 31 && !(w & 0x20000000));
    if ((w & 0x1f200000) == 0x0b200000) /* add/sub extended register */
        return rn == 31 || (rd == 31 && !(w & 0x20000000));
    return 0;
}

int
a64_decode(const uint8_t *buf, size_t len, uint64_t addr, arch_insn_t *out)
{
    if (!buf || !out)
        return QP_EINVAL;
    memset(out, 0, sizeof *out);
    if (len < 4)
        return QP_EDECODE;
    uint32_t w = a64_word(buf);
    out->addr = addr;
    out->len = 4;
    out->kind = ARCH_KIND_SEQ;

    switch (a64_form(w)) {
    case A64_FORM_B:
    case A64_FORM_BL:
        out->kind = (w & 0x80000000) ? ARCH_KIND_CALL : ARCH_KIND_JMP;
        out->target = addr + (uint64_t)(sext(w, 26) * 4);
        out->flags = ARCH_F_BRANCH_REL;
        out->rel_size = 4; /* the field is a bit field of the whole word */
        return 0;
    case A64_FORM_BCOND: {
        unsigned cond = w & 0xf;
        out->kind = cond >= 14 ? ARCH_KIND_JMP : ARCH_KIND_JCC; /* al and nv: always */
        out->target = addr + (uint64_t)(sext(w >> 5, 19) * 4);
        out->flags = ARCH_F_BRANCH_REL;
        out->flags_read = cond_flags(cond);
        out->rel_size = 4;
        return 0;
    }
    case A64_FORM_CBZ:
        out->kind = ARCH_KIND_JCC;
        out->target = addr + (uint64_t)(sext(w >> 5, 19) * 4);
        out->flags = ARCH_F_BRANCH_REL;
        out->rel_size = 4;
        return 0;
    case A64_FORM_TBZ:
        out->kind = ARCH_KIND_JCC;
        out->target = addr + (uint64_t)(sext(w >> 5, 14) * 4);
        out->flags = ARCH_F_BRANCH_REL;
        out->rel_size = 4;
        return 0;
    case A64_FORM_ADR:
    case A64_FORM_ADRP: {
        int64_t imm = sext((uint64_t)((w >> 5) & 0x7ffff) << 2 | ((w >> 29) & 3), 21);
        if (w & 0x80000000)
            out->target = (addr & ~0xfffull) + (uint64_t)(imm * 4096);
        else
            out->target = addr + (uint64_t)imm;
        out->flags = ARCH_F_RIPREL;
        out->rel_size = 4;
        return 0;
    }
    case A64_FORM_LDR_LIT:
        out->target = addr + (uint64_t)(sext(w >> 5, 19) * 4);
        out->flags = ARCH_F_RIPREL;
        out->rel_size = 4;
        return 0;
    case A64_FORM_OTHER:
        break;
    }

    if ((w & 0xfe000000) == 0xd6000000) /* unconditional branch (register) */
        return decode_branch_reg(w, out);
    if ((w & 0xff000000) == 0xd4000000) { /* exception generation */
        unsigned opc = (w >> 21) & 7, ll = w & 3, op2 = (w >> 2) & 7;
        if (op2 != 0)
            return QP_EDECODE;
        if (opc == 0 && ll == 1)
            out->kind = ARCH_KIND_SYSCALL; /* svc */
        else if (opc == 0 && ll >= 2) {    /* hvc, smc */
            out->kind = ARCH_KIND_HALT;
            out->flags = ARCH_F_PRIV;
        } else if ((opc == 1 || opc == 2) && ll == 0)
            out->kind = ARCH_KIND_HALT; /* brk, hlt */
        else if (opc == 5 && ll >= 1) {  /* dcps1..3 */
            out->kind = ARCH_KIND_HALT;
            out->flags = ARCH_F_PRIV;
        } else
            return QP_EDECODE;
        return 0;
    }
    if ((w & 0xfffff01f) == 0xd503201f) { /* hints */
        decode_hint(w, out);
        return 0;
    }
    if ((w & 0x1e000000) == 0x00000000) { /* reserved group (op0 = 0000) */
        if ((w & 0xffff0000) == 0) {        /* udf #imm16 */
            out->kind = ARCH_KIND_HALT;
            return 0;
        }
        if (!(w & 0x80000000))
            return QP_EDECODE;
        /* op0 = 0000 with bit 31 set is SME: an ordinary instruction here */
    }
    decode_nzcv(w, out);
    if (uses_sp(w))
        out->flags |= ARCH_F_READS_SP;
    /* ldxr, ldaxr, ldxp, ldaxp (load/store exclusive, o2 = 0, L = 1; not ldar, cas) */
    if ((w & 0x3fc00000) == 0x08400000)
        out->flags |= ARCH_F_EXCL_LOAD;
    return 0;
}

int
a64_is_padding(const uint8_t *buf, size_t len)
{
    if (!buf || len == 0 || len % 4 != 0)
        return 0;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t w = a64_word(buf + i);
        if (w != 0xd503201f && w != 0)
            return 0;
    }
    return 1;
}
