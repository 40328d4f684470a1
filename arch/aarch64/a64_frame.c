/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * What an A64 instruction does with the stack frame (arch_isa_t.sp_access), for cfg/'s
 * proof that a frame slot holds one value (a switch table's address spilled by the
 * compiler: sqlite's VM). Conservative: whatever is not understood is ARCH_SP_UNKNOWN,
 * and the proof then fails.
 *
 * The frame pointer x29 is not followed: a store through it, an address formed from it
 * or a copy of it is ARCH_SP_UNKNOWN (loads through it and writes of it are harmless).
 * Storing x29 as data is allowed in a pair with x30 only (the frame record, which holds
 * the caller's x29); calls pass the frame implicitly (callees' frame records), which
 * only unwinders read.
 */
#include <string.h>

#include "arch/aarch64/a64_priv.h"

#define A64_SP 31 /* sp as a base or an add/sub immediate operand; else xzr */
#define A64_FP 29

/* Sign-extend the low BITS of V. */
static int64_t
sext(uint32_t v, unsigned bits)
{
    return (int64_t)((uint64_t)v << (64 - bits)) >> (64 - bits);
}

/*
 * A load or store through [xN + offset] (no register offset): its kind into the fields.
 * Returns 1 when W is one of the forms below (unsigned-offset, unscaled, pre- or
 * post-index, unprivileged, pair), else 0.
 */
static int
ldst_imm(uint32_t w, int *store, int *wback, int64_t *off, unsigned *bytes)
{
    unsigned size = w >> 30, v = (w >> 26) & 1u, opc = (w >> 22) & 3u;
    if ((w & 0x3a000000u) == 0x28000000u) { /* ldp/stp/ldnp/stnp, GPR or SIMD&FP */
        unsigned mode = (w >> 23) & 3u, l = (w >> 22) & 1u;
        unsigned reg = v ? 4u << size : (size == 2 ? 8u : 4u);
        if (size == 3 || (!v && size == 1 && !l))
            return 0; /* unallocated, stgp (tags) */
        *store = !l;
        *wback = mode == 1 || mode == 3;
        *off = mode == 1 ? 0 : sext((w >> 15) & 0x7fu, 7) * reg;
        *bytes = 2 * reg;
        return 1;
    }
    unsigned scale = v && (opc & 2u) ? 16u : 1u << size;
    int st = opc == 0 || (v && opc == 2);
    if (v && (opc & 2u) && size != 0)
        return 0;                           /* unallocated */
    if ((w & 0x3b000000u) == 0x39000000u) { /* unsigned offset */
        *store = st;
        *wback = 0;
        *off = (int64_t)((w >> 10) & 0xfffu) * scale;
        *bytes = scale;
        return 1;
    }
    if ((w & 0x3b200000u) == 0x38000000u) { /* imm9: unscaled, post, unprivileged, pre */
        unsigned idx = (w >> 10) & 3u;
        *store = st;
        *wback = idx == 1 || idx == 3;
        *off = idx == 1 ? 0 : sext((w >> 12) & 0x1ffu, 9);
        *bytes = scale;
        return 1;
    }
    return 0;
}

/* The frame record's store: stp x29, x30, [sp, ...] (any addressing mode). */
static int
is_frame_record(uint32_t w)
{
    return (w & 0xfe400000u) == 0xa8000000u && (w & 31u) == A64_FP
        && ((w >> 10) & 31u) == 30;
}

/* The general registers an instruction that is no load or store may read, as fields:
 * Rn (bits 5-9), Rm (16-20) and Ra (10-14) where its class has them. Conservative. */
static int
reads_reg(uint32_t w, unsigned r)
{
    unsigned rn = (w >> 5) & 31u, rm = (w >> 16) & 31u, ra = (w >> 10) & 31u;
    if ((w & 0x1c000000u) == 0x10000000u) { /* data processing, immediate */
        unsigned op0 = (w >> 23) & 7u;
        if (op0 <= 1 || op0 == 5)
            return 0; /* adr/adrp, movz/movn/movk: no register read */
        return rn == r || (op0 == 7 && rm == r);
    }
    if ((w & 0x0e000000u) == 0x0a000000u) /* data processing, register */
        return rn == r || rm == r || ra == r;
    if ((w & 0x0e000000u) == 0x0e000000u) /* SIMD&FP: a GPR source is in Rn */
        return rn == r;
    return 0; /* branches (a jump to, or a test of, x29 reveals nothing), system */
}

int
a64_sp_access(const uint8_t *buf, size_t len, uint64_t addr, arch_sp_access_t *out)
{
    (void)addr;
    if (!buf || !out || len < 4)
        return QP_EINVAL;
    memset(out, 0, sizeof *out);
    uint32_t w = a64_word(buf);
    unsigned rd = w & 31u, rn = (w >> 5) & 31u;

    if ((w & 0x0a000000u) == 0x08000000u) { /* loads and stores */
        if ((w & 0x3b000000u) == 0x18000000u)
            return 0; /* literal: pc-relative */
        int store, wback;
        int64_t off;
        unsigned bytes;
        int known = ldst_imm(w, &store, &wback, &off, &bytes);
        unsigned rt2 = (w >> 10) & 31u;
        int pair = (w & 0x3a000000u) == 0x28000000u;
        /* register offset, exclusives, atomics, structures: only a load is understood */
        int reg_load = (w & 0x3b200c00u) == 0x38200800u && ((w >> 22) & 3u) != 0;
        if (((known && store) || (!known && !reg_load))
            && (rd == A64_FP || (pair && rt2 == A64_FP)) && !((w >> 26) & 1u)
            && !is_frame_record(w))
            out->flags |= ARCH_SP_UNKNOWN; /* the frame pointer's value stored */
        if (rn != A64_SP && rn != A64_FP)
            return 0;
        if (!known) {
            if (!reg_load)
                out->flags |= ARCH_SP_UNKNOWN;
            return 0;
        }
        if (rn == A64_FP) {
            if (store || wback)
                out->flags |= ARCH_SP_UNKNOWN;
            return 0;
        }
        if (wback)
            out->flags |= ARCH_SP_WRITES_SP;
        if (store) {
            out->flags |= ARCH_SP_STORE;
            out->lo = off;
            out->hi = off + bytes;
        }
        return 0;
    }

    if ((w & 0x1f000000u) == 0x11000000u) { /* add/sub (immediate), and with tags */
        int s = (w >> 29) & 1u, tags = (w >> 23) & 1u;
        int64_t imm = (int64_t)((w >> 10) & 0xfffu) << (((w >> 22) & 1u) ? 12 : 0);
        if ((w >> 30) & 1u)
            imm = -imm;
        if (!s && rd == A64_SP)
            out->flags |= ARCH_SP_WRITES_SP;
        else if (s && rd == 31)
            return 0; /* cmp/cmn: flags only */
        else if (tags && (rn == A64_SP || rn == A64_FP))
            out->flags |= ARCH_SP_UNKNOWN;
        else if (rn == A64_SP && rd != A64_FP) {
            out->flags |= ARCH_SP_ADDR;
            out->lo = imm;
        } else if (rn == A64_FP && rd != A64_FP)
            out->flags |= ARCH_SP_UNKNOWN; /* an address from the frame pointer */
        return 0;
    }
    if ((w & 0x1f200000u) == 0x0b200000u) { /* add/sub (extended register) */
        int s = (w >> 29) & 1u;
        if (!s && rd == A64_SP)
            out->flags |= ARCH_SP_WRITES_SP;
        if ((rn == A64_SP || rn == A64_FP || ((w >> 16) & 31u) == A64_FP)
            && !(s && rd == 31))
            out->flags |= ARCH_SP_UNKNOWN;
        return 0;
    }
    if ((w & 0x1f800000u) == 0x12000000u) { /* logical (immediate): Rd may be sp */
        if (((w >> 29) & 3u) != 3 && rd == A64_SP)
            out->flags |= ARCH_SP_WRITES_SP;
        if (rn == A64_FP && !(((w >> 29) & 3u) == 3 && rd == 31))
            out->flags |= ARCH_SP_UNKNOWN;
        return 0;
    }
    if ((w & 0x1e000000u) == 0x04000000u) { /* SVE: addvl sp, st1d [sp, #k, mul vl]... */
        if (rd == A64_SP || rn == A64_SP || ((w >> 16) & 31u) == A64_SP || rn == A64_FP
            || ((w >> 16) & 31u) == A64_FP)
            out->flags |= ARCH_SP_UNKNOWN; /* (or z31/p-registers: refused alike) */
        return 0;
    }
    if (reads_reg(w, A64_FP))
        out->flags |= ARCH_SP_UNKNOWN; /* a copy or a function of the frame pointer */
    return 0;
}
