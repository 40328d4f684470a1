/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * AArch64 switch tables as gcc emits them, recognised backwards from the `br`:
 *
 *     cmp   wI, #N              ; the bound (count N + 1) ...
 *     b.hi  default             ; ... or b.ls over the out-of-range path
 *     adrp  xT, table           ; the table (possibly hoisted out of the block)
 *     add   xT, xT, :lo12:table
 *     ldrb  wE, [xT, wI, uxtw]  ; ldrh ... uxtw #1 / ldr w ... uxtw #2: the entry
 *     adr   xB, base            ; the anchor the entries are relative to
 *     add   xD, xB, wE, sxtb #2 ; sxth / sxtw: target = base + (signed entry << 2)
 *     br    xD
 *
 * The scan is linear and backwards over the instructions the caller gives (normally the
 * procedure's code up to the `br`), stopping at the first instruction that may write a
 * register it still needs in another way than the pattern says: a miss, never a wrong
 * table. A zero-extending add (uxtb/uxth/uxtw) gives unsigned entries. Clang's form is
 * the same with `ldrb w11, [x9, x8]` and `add x10, x10, x11, lsl #2` (unsigned entries),
 * and a `mov w8, w8` (zero-extension) between the bound check and the load.
 *
 * A table whose address the compiler spilled (sqlite's VM: `ldr xT, [sp, #16]` before
 * each dispatch, stored once on entry) is returned with TABLE 0 and SLOT_LOAD/SLOT set:
 * cfg/cfg_slot.c proves what the slot holds with a64_slot_store and a64_sp_access.
 */
#include <string.h>

#include "arch/aarch64/a64_priv.h"

#define A64_SCAN_MAX 64 /* instructions looked at before the br */

/* May W write general register R (0..30)? Conservative: any Rd/Rt field equal to R, a
 * load pair's second register, a writeback base, an exclusive's status, a call. */
int
a64_may_write(uint32_t w, unsigned r)
{
    if ((w & 0xfc000000u) == 0x94000000u)
        return 1; /* bl: the callee may change anything caller-saved */
    if ((w & 0xfffffc1fu) == 0xd63f0000u)
        return 1; /* blr */
    a64_form_t f = a64_form(w);
    if (f == A64_FORM_B || f == A64_FORM_BCOND || f == A64_FORM_CBZ || f == A64_FORM_TBZ)
        return 0; /* their low bits are a condition or a register read */
    if ((w & 0x0a000000u) == 0x08000000u) { /* loads and stores */
        unsigned rn = (w >> 5) & 31u, rt2 = (w >> 10) & 31u;
        int pair = (w & 0x3a000000u) == 0x28000000u;
        int wb = pair ? ((w >> 23) & 3u) == 1 || ((w >> 23) & 3u) == 3
                      : (w & 0x3b200400u) == 0x38000400u; /* pre/post-index */
        if (wb && rn == r)
            return 1;
        if (pair && rt2 == r)
            return 1;
        if ((w & 0x3f000000u) == 0x08000000u && ((w >> 16) & 31u) == r)
            return 1; /* exclusives: the status register */
    }
    return (w & 31u) == r;
}

/* Scanning back from index *I (exclusive) down to STOP, the instruction that may write
 * R: its word, with *I its index; *I = -1 when there is none. */
static uint32_t
writer_of(const uint8_t *buf, long *i, long stop, unsigned r)
{
    for (long k = *i - 1; k >= stop; k--) {
        uint32_t w = a64_word(buf + 4 * k);
        if (a64_may_write(w, r)) {
            *i = k;
            return w;
        }
    }
    *i = -1;
    return 0;
}

/* Is W `mov wR, wR` (clang's zero-extension of the index: the value is unchanged)? */
static int
is_zext(uint32_t w, unsigned r)
{
    return w == (0x2a0003e0u | r << 16 | r);
}

/* Does nothing in [FROM, TO) change register R's value (a zero-extension aside)? */
static int
index_kept(const uint8_t *buf, long from, long to, unsigned r)
{
    for (long k = from; k < to; k++) {
        uint32_t w = a64_word(buf + 4 * k);
        if (a64_may_write(w, r) && !is_zext(w, r))
            return 0;
    }
    return 1;
}

/* Does register field R appear anywhere in W (Rd/Rt, Rn, Ra/Rt2, Rm)? Conservative: a
 * read or a write of xR, or an immediate that happens to look like it. */
static int
mentions(uint32_t w, unsigned r)
{
    return (w & 31u) == r || ((w >> 5) & 31u) == r || ((w >> 10) & 31u) == r
           || ((w >> 16) & 31u) == r;
}

/*
 * May the `adr xB` at index ADR (the add at ADD, the br at BR) form another base? Only
 * the compiler's own sequence, whole: the add right before the br and nothing between
 * the adr and the add that names xB. Then xB is read by the add alone: clang's
 * `adr x10; ldrb w11, [x9, x8]; add x10, x10, x11, lsl #2; br x10` overwrites it, and
 * gcc's `adr x0, .Lrtx; add x2, x0, w2, sxtb #2; br x2` (casesi_dispatch) writes it as a
 * scratch register of the pattern, dead after the br.
 */
static int
anchor_movable(const uint8_t *buf, long adr, long add, long br, unsigned rb, unsigned rd)
{
    if (add != br - 1 || (rb != rd && adr != add - 1))
        return 0;
    for (long k = adr + 1; k < add; k++)
        if (mentions(a64_word(buf + 4 * k), rb))
            return 0;
    return 1;
}

int
a64_jump_table(const uint8_t *buf, size_t len, uint64_t addr, arch_jtab_t *out)
{
    if (!buf || !out || len < 4 || len % 4)
        return QP_EINVAL;
    memset(out, 0, sizeof *out);
    long n = (long)(len / 4), i = n - 1;
    long stop = n - 1 - A64_SCAN_MAX > 0 ? n - 1 - A64_SCAN_MAX : 0;
    uint32_t w = a64_word(buf + 4 * i);
    if ((w & 0xfffffc1fu) != 0xd61f0000u)
        return QP_ENOTFOUND; /* not a plain br */
    unsigned rd = (w >> 5) & 31u;

    /* add xD, xB, wE, {s,u}xt{b,h,w} #shift */
    w = writer_of(buf, &i, stop, rd);
    if (i < 0 || (w & 31u) != rd)
        return QP_ENOTFOUND;
    unsigned rb = (w >> 5) & 31u, re = (w >> 16) & 31u, opt, ext_size;
    if ((w & 0xffe00000u) == 0x8b200000u) { /* gcc: add xD, xB, wE, sxtb #s */
        opt = (w >> 13) & 7u;
        out->shift = (uint8_t)((w >> 10) & 7u);
        ext_size = 1u << (opt & 3u); /* b h w x */
    } else if ((w & 0xffe00000u) == 0x8b000000u && ((w >> 10) & 63u) <= 4) {
        opt = 3; /* clang: add xD, xB, xE, lsl #s (a zero-extended entry) */
        out->shift = (uint8_t)((w >> 10) & 63u);
        ext_size = 8;
    } else
        return QP_ENOTFOUND;
    long add_at = i;
    out->is_signed = opt >= 4;

    /* adr xB, base */
    long j = add_at;
    w = writer_of(buf, &j, stop, rb);
    if (j < 0 || (w & 0x9f000000u) != 0x10000000u)
        return QP_ENOTFOUND;
    arch_insn_t in;
    QP_CHECK(a64_decode(buf + 4 * j, 4, addr + 4 * (uint64_t)j, &in));
    out->base = in.target;
    if (anchor_movable(buf, j, add_at, n - 1, rb, rd))
        out->anchor = addr + 4 * (uint64_t)j;

    /* ldrb/ldrh/ldr wE, [xT, wI, uxtw #s] (register offset, 32-bit destination) */
    j = add_at;
    w = writer_of(buf, &j, stop, re);
    if (j < 0 || (w & 0x3fe00c00u) != 0x38600800u || (w & 31u) != re)
        return QP_ENOTFOUND;
    unsigned size = 1u << (w >> 30), iopt = (w >> 13) & 7u;
    if (size > 4 || (iopt != 2 && iopt != 3 && iopt != 6)) /* index: uxtw, lsl, sxtw */
        return QP_ENOTFOUND;
    if (out->is_signed ? ext_size != size : ext_size < size)
        return QP_ENOTFOUND; /* sxtb after ldrb, sxth after ldrh, sxtw after ldr w */
    out->entry_size = (uint8_t)size;
    unsigned rt = (w >> 5) & 31u, ri = (w >> 16) & 31u;
    long ld_at = j;

    /* the table: add xT, xT, #lo12 after adrp xT, page; or ldr xT, [sp, #slot] (the
     * address spilled: the caller proves what the slot holds) */
    w = writer_of(buf, &j, stop, rt);
    if (j >= 0 && (w & 0xffc003e0u) == 0xf94003e0u && (w & 31u) == rt) {
        out->slot_load = addr + 4 * (uint64_t)j;
        out->slot = (int64_t)((w >> 10) & 0xfffu) * 8;
    } else {
        if (j < 0 || (w & 0xffc00000u) != 0x91000000u || ((w >> 5) & 31u) != rt)
            return QP_ENOTFOUND;
        uint64_t lo = (w >> 10) & 0xfffu;
        w = writer_of(buf, &j, stop, rt);
        if (j < 0 || (w & 0x9f000000u) != 0x90000000u)
            return QP_ENOTFOUND;
        QP_CHECK(a64_decode(buf + 4 * j, 4, addr + 4 * (uint64_t)j, &in));
        out->table = in.target + lo;
    }

    /* the bound: cmp wI, #N; b.hi/b.ls, and no write of wI from there to the load; or
     * clang's cmp wX, #N ... mov wI, wX (a copy, zero-extended) with wX kept up to the
     * copy and wI after it */
    int barrier = 0;
    unsigned idx = ri;  /* the register compared */
    long copy_at = -1;  /* the copy's index, if any */
    for (long k = ld_at - 2; k >= stop && k >= ld_at - 16; k--) {
        uint32_t c = a64_word(buf + 4 * k), b = a64_word(buf + 4 * (k + 1));
        int is_cmp = (c & 0x7f80001fu) == 0x7100001fu && !(c & 0x00400000u)
                     && ((c >> 5) & 31u) == idx;
        if (is_cmp) {
            unsigned cond = b & 0xfu;
            /* b.hi default falls into the table's code; b.ls jumps to it (gcc puts the
             * default case right after the branch): the index must be kept from there */
            long from = k + 2;
            if (cond == 9) {
                int64_t off = ((int64_t)(int32_t)(b << 8) >> 13) * 4; /* imm19, in bytes */
                from = k + 1 + off / 4;
                if (off <= 0 || from > ld_at)
                    from = -1;
            }
            int kept = copy_at < 0 ? index_kept(buf, from, ld_at, ri)
                                   : from <= copy_at && index_kept(buf, from, copy_at, idx)
                                         && index_kept(buf, copy_at + 1, ld_at, ri);
            if ((b & 0xff000010u) == 0x54000000u && (cond == 8 || cond == 9) && from >= 0
                && kept)
                out->count = (uint32_t)((c >> 10) & 0xfffu) + 1;
            break;
        }
        unsigned x = (c >> 16) & 31u;
        if (copy_at < 0 && !barrier && c == (0x2a0003e0u | x << 16 | idx) && x != idx
            && x != 31) {
            idx = x; /* mov wI, wX: the bound is wX's */
            copy_at = k;
            continue;
        }
        /* Past a ret or an unconditional branch (going back), the code is another
         * path's (gcc's default case between the bound check and the table): its writes
         * do not reach the load; a b.ls to the table is checked from its target. */
        arch_insn_t ci;
        if (a64_decode(buf + 4 * k, 4, addr + 4 * (uint64_t)k, &ci) == 0
            && (ci.kind == ARCH_KIND_RET || ci.kind == ARCH_KIND_JMP
                || ci.kind == ARCH_KIND_JMP_IND)) {
            barrier = 1;
            continue;
        }
        if (a64_may_write(c, ri) && !is_zext(c, ri) && !barrier)
            break;
    }
    return 0;
}

int
a64_slot_store(const uint8_t *buf, size_t len, uint64_t addr, int64_t slot,
    uint64_t *value, uint64_t *first)
{
    if (!buf || !value || !first || len < 4 || len % 4)
        return QP_EINVAL;
    long n = (long)(len / 4), i = n - 1;
    long stop = n - 1 - A64_SCAN_MAX > 0 ? n - 1 - A64_SCAN_MAX : 0;
    uint32_t w = a64_word(buf + 4 * i);
    /* str xV, [sp, #slot] (64-bit, unsigned offset) */
    if ((w & 0xffc003e0u) != 0xf90003e0u || (int64_t)((w >> 10) & 0xfffu) * 8 != slot
        || (w & 31u) == 31)
        return QP_ENOTFOUND;
    unsigned rv = w & 31u;
    /* adr xV, value; or adrp xV, page then add xV, xV, #lo12 */
    w = writer_of(buf, &i, stop, rv);
    arch_insn_t in;
    if (i >= 0 && (w & 0x9f000000u) == 0x10000000u) {
        QP_CHECK(a64_decode(buf + 4 * i, 4, addr + 4 * (uint64_t)i, &in));
        *value = in.target;
        *first = addr + 4 * (uint64_t)i;
        return 0;
    }
    if (i < 0 || (w & 0xffc00000u) != 0x91000000u || ((w >> 5) & 31u) != rv
        || (w & 31u) != rv)
        return QP_ENOTFOUND;
    uint64_t lo = (w >> 10) & 0xfffu;
    w = writer_of(buf, &i, stop, rv);
    if (i < 0 || (w & 0x9f000000u) != 0x90000000u)
        return QP_ENOTFOUND;
    QP_CHECK(a64_decode(buf + 4 * i, 4, addr + 4 * (uint64_t)i, &in));
    *value = in.target + lo;
    *first = addr + 4 * (uint64_t)i;
    return 0;
}
