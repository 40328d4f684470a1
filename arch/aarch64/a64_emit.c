/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * A64 relocation of one instruction and the emitters (see a64_priv.h for the sequences).
 * Every pc-relative form keeps addressing what it addressed at its old place: branches go
 * to the caller's NEW_TARGET, adr/adrp/literal loads to the same absolute address
 * (arch_insn_t.target), so a position-independent program stays position-independent:
 * only pc-relative sequences are emitted, never absolute addresses.
 */
#include <string.h>

#include "arch/aarch64/a64_priv.h"

#define A64_NOP 0xd503201fu
#define A64_SPILL 0xa9bf47f0u   /* stp x16, x17, [sp, #-16]! */
#define A64_UNSPILL 0xa8c147f0u /* ldp x16, x17, [sp], #16 */
#define A64_X16 16u

static void
put32(uint8_t *p, uint32_t w)
{
    p[0] = (uint8_t)w;
    p[1] = (uint8_t)(w >> 8);
    p[2] = (uint8_t)(w >> 16);
    p[3] = (uint8_t)(w >> 24);
}

/* Does the byte offset OFF fit a signed field of BITS bits counting words? */
static int
fits_words(int64_t off, unsigned bits)
{
    int64_t lim = (int64_t)1 << (bits + 1); /* bytes: 2^(bits-1) words * 4 */
    return off >= -lim && off < lim;
}

uint32_t
a64_enc_b(int link, int64_t off)
{
    return (link ? 0x94000000u : 0x14000000u) | ((uint32_t)(off >> 2) & 0x3ffffffu);
}

static uint32_t
enc_adr(int page, unsigned rd, int64_t imm)
{
    return (page ? 0x90000000u : 0x10000000u) | ((uint32_t)imm & 3u) << 29
           | ((uint32_t)(imm >> 2) & 0x7ffffu) << 5 | (rd & 31u);
}

uint32_t
a64_enc_adrp(unsigned rd, int64_t pages)
{
    return enc_adr(1, rd, pages);
}

uint32_t
a64_enc_add_imm(unsigned rd, unsigned rn, unsigned imm12)
{
    return 0x91000000u | (imm12 & 0xfffu) << 10 | (rn & 31u) << 5 | (rd & 31u);
}

/* The adrp page delta from code at ADDR to TARGET, or QP_ERANGE beyond +-4 GiB. */
static int
page_delta(uint64_t addr, uint64_t target, int64_t *pages /*OUT*/)
{
    int64_t d = (int64_t)(target >> 12) - (int64_t)(addr >> 12);
    if (d < -(1 << 20) || d >= (1 << 20))
        return QP_ERANGE;
    *pages = d;
    return 0;
}

/* A `b` (or `bl`) at ADDR to TARGET into OUT. */
static int
emit_b(int link, uint64_t addr, uint64_t target, uint8_t *out, size_t cap)
{
    if (!out || cap < 4 || addr % 4 || target % 4)
        return QP_EINVAL;
    int64_t off = (int64_t)(target - addr);
    if (!fits_words(off, 26))
        return QP_ERANGE;
    put32(out, a64_enc_b(link, off));
    return 4;
}

int
a64_emit_jmp(uint64_t addr, uint64_t target, uint8_t *out, size_t cap)
{
    return emit_b(0, addr, target, out, cap);
}

int
a64_emit_call(uint64_t addr, uint64_t target, uint8_t *out, size_t cap)
{
    return emit_b(1, addr, target, out, cap);
}

/*
 * A conditional branch W (b.cond, cbz/cbnz, tbz/tbnz; its offset field BITS wide at bit
 * 5) at ADDR to TARGET: in reach, W re-encoded; else the inverted branch over a `b`.
 */
static int
reloc_cond(uint32_t w, unsigned bits, uint64_t addr, uint64_t target, uint8_t *out,
           size_t cap)
{
    uint32_t field = ((1u << bits) - 1) << 5;
    int64_t off = (int64_t)(target - addr);
    if (fits_words(off, bits)) {
        put32(out, (w & ~field) | ((uint32_t)(off >> 2) << 5 & field));
        return 4;
    }
    if (cap < 8)
        return QP_EINVAL;
    uint32_t inv = a64_form(w) == A64_FORM_BCOND ? w ^ 1u : w ^ (1u << 24);
    int64_t back = (int64_t)(target - (addr + 4));
    if (!fits_words(back, 26))
        return QP_ERANGE;
    put32(out, (inv & ~field) | (2u << 5)); /* skip the b: +8 */
    put32(out + 4, a64_enc_b(0, back));
    return 8;
}

/* The unsigned-offset load with the literal load W's destination and size, from RN. */
static uint32_t
ldr_uoff(uint32_t w, unsigned rt, unsigned rn, unsigned off, unsigned *size /*OUT*/)
{
    unsigned opc = w >> 30, v = (w >> 26) & 1;
    static const uint32_t gpr[3] = {0xb9400000u, 0xf9400000u, 0xb9800000u}; /* w x sw */
    static const uint32_t fp[3] = {0xbd400000u, 0xfd400000u, 0x3dc00000u};  /* s d q */
    static const unsigned gsize[3] = {4, 8, 4}, fsize[3] = {4, 8, 16};
    *size = v ? fsize[opc] : gsize[opc];
    uint32_t base = v ? fp[opc] : gpr[opc];
    return base | (off / *size) << 10 | (rn & 31u) << 5 | (rt & 31u);
}

/* A literal load W (ldr, ldrsw, prfm) at ADDR of the literal at LIT. */
static int
reloc_literal(uint32_t w, uint64_t addr, uint64_t lit, uint8_t *out, size_t cap)
{
    int64_t off = (int64_t)(lit - addr);
    if (fits_words(off, 19)) {
        put32(out, (w & ~(0x7ffffu << 5)) | ((uint32_t)(off >> 2) & 0x7ffffu) << 5);
        return 4;
    }
    unsigned opc = w >> 30, v = (w >> 26) & 1, rt = w & 31u, lo = (unsigned)(lit & 0xfff);
    if (opc == 3 && !v) { /* prfm: a hint, dropped when out of reach */
        put32(out, A64_NOP);
        return 4;
    }
    int64_t pages;
    unsigned size;
    if (!v && rt != 31) { /* load into a GPR: that register is the base */
        uint32_t ld = ldr_uoff(w, rt, rt, lo, &size);
        QP_CHECK(page_delta(addr, lit, &pages));
        if (lo % size == 0) {
            put32(out, a64_enc_adrp(rt, pages));
            put32(out + 4, ld);
            return 8;
        }
        if (cap < 12)
            return QP_EINVAL;
        put32(out, a64_enc_adrp(rt, pages));
        put32(out + 4, a64_enc_add_imm(rt, rt, lo));
        put32(out + 8, ldr_uoff(w, rt, rt, 0, &size));
        return 12;
    }
    /* SIMD&FP or xzr destination: through x16, spilled */
    if (cap < 20)
        return QP_EINVAL;
    QP_CHECK(page_delta(addr + 4, lit, &pages));
    put32(out, A64_SPILL);
    put32(out + 4, a64_enc_adrp(A64_X16, pages));
    put32(out + 8, a64_enc_add_imm(A64_X16, A64_X16, lo));
    put32(out + 12, ldr_uoff(w, rt, A64_X16, 0, &size));
    put32(out + 16, A64_UNSPILL);
    return 20;
}

int
a64_reloc_insn(const uint8_t *buf, const arch_insn_t *in, uint64_t new_addr,
               uint64_t new_target, int short_ok, uint8_t *out, size_t cap)
{
    (void)short_ok;
    if (!buf || !in || !out || cap < 8 || in->len != 4 || new_addr % 4)
        return QP_EINVAL;
    uint32_t w = a64_word(buf);
    a64_form_t form = a64_form(w);
    if ((in->flags & ARCH_F_BRANCH_REL) && new_target % 4)
        return QP_EINVAL;
    switch (form) {
    case A64_FORM_OTHER:
        memcpy(out, buf, 4);
        return 4;
    case A64_FORM_B:
        return emit_b(0, new_addr, new_target, out, cap);
    case A64_FORM_BL: {
        int rc = emit_b(1, new_addr, new_target, out, cap);
        if (rc != QP_ERANGE)
            return rc;
        int64_t pages; /* the AAPCS64 veneer: x16 is free at a call */
        QP_CHECK(page_delta(new_addr, new_target, &pages));
        if (cap < 12)
            return QP_EINVAL;
        put32(out, a64_enc_adrp(A64_X16, pages));
        put32(out + 4, a64_enc_add_imm(A64_X16, A64_X16, (unsigned)(new_target & 0xfff)));
        put32(out + 8, 0xd63f0200u); /* blr x16 */
        return 12;
    }
    case A64_FORM_BCOND:
        if ((w & 0xf) >= 14) /* b.al, b.nv: always taken */
            return emit_b(0, new_addr, new_target, out, cap);
        return reloc_cond(w, 19, new_addr, new_target, out, cap);
    case A64_FORM_CBZ:
        return reloc_cond(w, 19, new_addr, new_target, out, cap);
    case A64_FORM_TBZ:
        return reloc_cond(w, 14, new_addr, new_target, out, cap);
    case A64_FORM_ADR: {
        unsigned rd = w & 31u;
        int64_t off = (int64_t)(in->target - new_addr);
        if (rd == 31) { /* adr xzr: nothing */
            put32(out, A64_NOP);
            return 4;
        }
        if (off >= -(1 << 20) && off < (1 << 20)) {
            put32(out, enc_adr(0, rd, off));
            return 4;
        }
        int64_t pages;
        QP_CHECK(page_delta(new_addr, in->target, &pages));
        put32(out, a64_enc_adrp(rd, pages));
        put32(out + 4, a64_enc_add_imm(rd, rd, (unsigned)(in->target & 0xfff)));
        return 8;
    }
    case A64_FORM_ADRP: {
        int64_t pages;
        QP_CHECK(page_delta(new_addr, in->target, &pages));
        put32(out, a64_enc_adrp(w & 31u, pages));
        return 4;
    }
    case A64_FORM_LDR_LIT:
        return reloc_literal(w, new_addr, in->target, out, cap);
    }
    return QP_EINVAL;
}

int
a64_reloc_max_len(const uint8_t *buf, const arch_insn_t *in)
{
    if (!buf || !in || in->len != 4)
        return QP_EINVAL;
    uint32_t w = a64_word(buf);
    switch (a64_form(w)) {
    case A64_FORM_BCOND:
        return (w & 0xf) >= 14 ? 4 : 8; /* b.al/b.nv become a `b` */
    case A64_FORM_CBZ:
    case A64_FORM_TBZ:
        return 8;
    case A64_FORM_ADR:
        return (w & 31u) == 31 ? 4 : 8;
    case A64_FORM_LDR_LIT: {
        /* The long form's length depends on the literal's alignment and the
         * destination, not on the distance: relocate it 16 MiB away. */
        uint8_t scratch[A64_MAX_RELOC];
        return a64_reloc_insn(buf, in, (in->addr + (1u << 24)) & ~(uint64_t)3, 0, 0, scratch,
                              sizeof(scratch));
    }
    default:
        return 4; /* b, bl (within +-128 MiB), adrp (+-4 GiB), the rest: copied */
    }
}

/* Write the words W[0..N) to OUT (CAP bytes); their byte count or QP_EINVAL. */
static int
put_words(const uint32_t *w, size_t n, uint8_t *out, size_t cap)
{
    if (!out || cap < 4 * n)
        return QP_EINVAL;
    for (size_t i = 0; i < n; i++)
        put32(out + 4 * i, w[i]);
    return (int)(4 * n);
}

int
a64_emit_counter_inc(uint64_t addr, uint64_t counter, int mode, uint8_t *out, size_t cap)
{
    if (addr % 4 || counter % 8)
        return QP_EINVAL;
    int64_t pages;
    unsigned lo = (unsigned)(counter & 0xfff);
    if (mode == ARCH_INC_PLAIN) {
        QP_CHECK(page_delta(addr + 4, counter, &pages));
        const uint32_t w[] = {
            A64_SPILL,
            a64_enc_adrp(16, pages),
            0xf9400000u | (lo / 8) << 10 | 16u << 5 | 17u, /* ldr x17, [x16, #lo] */
            0x91000631u,                                    /* add x17, x17, #1 */
            0xf9000000u | (lo / 8) << 10 | 16u << 5 | 17u, /* str x17, [x16, #lo] */
            A64_UNSPILL,
        };
        return put_words(w, sizeof w / sizeof w[0], out, cap);
    }
    if (mode == ARCH_INC_ATOMIC) {
        QP_CHECK(page_delta(addr + 8, counter, &pages));
        const uint32_t w[] = {
            0xa9be47f0u,               /* stp x16, x17, [sp, #-32]! */
            0xf9000befu,               /* str x15, [sp, #16] */
            a64_enc_adrp(16, pages),
            a64_enc_add_imm(16, 16, lo),
            0xc85f7e11u,               /* 1: ldxr x17, [x16] */
            0x91000631u,               /* add x17, x17, #1 */
            0xc80f7e11u,               /* stxr w15, x17, [x16] */
            0x35000000u | 0x7fffdu << 5 | 15u, /* cbnz w15, 1b */
            0xf9400befu,               /* ldr x15, [sp, #16] */
            0xa8c247f0u,               /* ldp x16, x17, [sp], #32 */
        };
        return put_words(w, sizeof w / sizeof w[0], out, cap);
    }
    if (mode == ARCH_INC_SWITCH)
        return QP_EUNSUPP;
    return QP_EINVAL;
}

/* The lowest registers of the mask DEAD (bit n: xn), at most N of them, into R; how
 * many. x18 (the platform register of some ABIs) and x29..x31 are never taken. */
static unsigned
pick_dead(uint32_t dead, unsigned n, unsigned *r)
{
    unsigned k = 0;
    for (unsigned x = 0; x < 29 && k < n; x++)
        if (x != 18 && (dead >> x & 1u))
            r[k++] = x;
    return k;
}

int
a64_emit_counter_inc_at(uint64_t addr, uint64_t counter, int mode,
                        const arch_snip_ctx_t *ctx, uint8_t *out, size_t cap)
{
    if (addr % 4 || counter % 8)
        return QP_EINVAL;
    unsigned r[3];
    unsigned nd = pick_dead(ctx != NULL ? ctx->dead_regs : 0, 3, r);
    unsigned lo = (unsigned)(counter & 0xfff);
    int64_t pages;
    /* None of these sequences writes NZCV (add, not adds; cbnz only reads a register):
     * CTX's live_flags never costs an mrs/msr here. */
    if (mode == ARCH_INC_PLAIN && nd >= 2) {
        QP_CHECK(page_delta(addr, counter, &pages));
        const uint32_t w[] = {
            a64_enc_adrp(r[0], pages),
            0xf9400000u | (lo / 8) << 10 | r[0] << 5 | r[1], /* ldr v, [a, #lo] */
            0x91000400u | r[1] << 5 | r[1],                   /* add v, v, #1 */
            0xf9000000u | (lo / 8) << 10 | r[0] << 5 | r[1], /* str v, [a, #lo] */
        };
        return put_words(w, 4, out, cap);
    }
    if (mode == ARCH_INC_ATOMIC && nd >= 3) {
        QP_CHECK(page_delta(addr, counter, &pages));
        const uint32_t w[] = {
            a64_enc_adrp(r[0], pages),
            a64_enc_add_imm(r[0], r[0], lo),
            0xc85f7c00u | r[0] << 5 | r[1],             /* 1: ldxr v, [a] */
            0x91000400u | r[1] << 5 | r[1],             /* add v, v, #1 */
            0xc8007c00u | r[2] << 16 | r[0] << 5 | r[1], /* stxr ws, v, [a] */
            0x35000000u | 0x7fffdu << 5 | r[2],         /* cbnz ws, 1b */
        };
        return put_words(w, 6, out, cap);
    }
    if (mode == ARCH_INC_ATOMIC_LSE) {
        unsigned a = nd >= 2 ? r[0] : 16, v = nd >= 2 ? r[1] : 17;
        size_t k = nd >= 2 ? 0 : 1;
        QP_CHECK(page_delta(addr + 4 * k, counter, &pages));
        uint32_t w[6] = {A64_SPILL};
        w[k] = a64_enc_adrp(a, pages);
        w[k + 1] = a64_enc_add_imm(a, a, lo);
        w[k + 2] = 0xd2800020u | v;                 /* mov v, #1 */
        w[k + 3] = 0xf820001fu | v << 16 | a << 5;  /* stadd v, [a] (ldadd v, xzr) */
        w[k + 4] = A64_UNSPILL;
        return put_words(w, nd >= 2 ? 4 : 6, out, cap);
    }
    return a64_emit_counter_inc(addr, counter, mode, out, cap);
}

int
a64_emit_call_protected(uint64_t addr, uint64_t target, uint8_t *out, size_t cap)
{
    if (!out || cap < 12)
        return QP_EINVAL;
    int rc = emit_b(1, addr + 4, target, out + 4, cap - 4);
    if (rc < 0)
        return rc;
    put32(out, 0xa9bf7bfdu);     /* stp x29, x30, [sp, #-16]! */
    put32(out + 8, 0xa8c17bfdu); /* ldp x29, x30, [sp], #16 */
    return 12;
}

int
a64_emit_flags_save(uint8_t *out, size_t cap)
{
    static const uint32_t w[] = {
        0xd10043ffu, /* sub sp, sp, #16 (sub, not subs: the flags stay) */
        0xf90003f0u, /* str x16, [sp] */
        0xd53b4210u, /* mrs x16, nzcv */
        0xf90007f0u, /* str x16, [sp, #8] */
        0xf94003f0u, /* ldr x16, [sp] */
    };
    return put_words(w, 5, out, cap);
}

int
a64_emit_flags_restore(uint8_t *out, size_t cap)
{
    static const uint32_t w[] = {
        0xf90003f0u, /* str x16, [sp] */
        0xf94007f0u, /* ldr x16, [sp, #8] */
        0xd51b4210u, /* msr nzcv, x16 */
        0xf94003f0u, /* ldr x16, [sp] */
        0x910043ffu, /* add sp, sp, #16 */
    };
    return put_words(w, 5, out, cap);
}

int
a64_emit_nops(size_t len, uint8_t *out, size_t cap)
{
    if (!out || len % 4 || len > cap || len > 1u << 30)
        return QP_EINVAL;
    for (size_t i = 0; i < len; i += 4)
        put32(out + i, A64_NOP);
    return (int)len;
}

int
a64_emit_trap(uint8_t *out, size_t cap)
{
    static const uint32_t udf = 0x0000deadu; /* udf #0xdead: SIGILL */
    return put_words(&udf, 1, out, cap);
}

/*****************************************************************************
 * A shared library's start that points its own PLT at the moved code
 */

int
a64_emit_got_fix(uint8_t *out, size_t cap)
{
    /* x5-x7 = the arguments, x9 = the header, x10 = the load bias, x15 = the page size
     * (AT_PAGESZ after envp's NULL, else 4096), x3/x4 = the pages and their length,
     * x14 = they were made writable, x11 = entries left, x12 = the entry. mprotect (226)
     * returns in x0 and keeps the rest. */
    static const uint32_t code[] = {
        0xd503245f, /*  0 bti c */
        0xaa0003e5, /*  4 mov x5, x0 */
        0xaa0103e6, /*  8 mov x6, x1 */
        0xaa0203e7, /*  c mov x7, x2 */
        0x10000749, /* 10 adr x9, hdr (0xf8) */
        0xf940012a, /* 14 ldr x10, [x9] */
        0xcb0a012a, /* 18 sub x10, x9, x10: the bias */
        0xd282000f, /* 1c mov x15, #4096 */
        0xaa0203eb, /* 20 mov x11, x2: envp */
        0xb400010b, /* 24 cbz x11, 44 */
        0xf840856c, /* 28 ldr x12, [x11], #8 */
        0xb5ffffec, /* 2c cbnz x12, 28: past envp's NULL, the auxiliary vector */
        0xa8c1356c, /* 30 ldp x12, x13, [x11], #16 */
        0xb400008c, /* 34 cbz x12, 44: AT_NULL */
        0xf100199f, /* 38 cmp x12, #6: AT_PAGESZ */
        0x54ffffa1, /* 3c b.ne 30 */
        0xaa0d03ef, /* 40 mov x15, x13 */
        0xcb0f03ef, /* 44 neg x15, x15 */
        0xa9411123, /* 48 ldp x3, x4, [x9, #16]: relro_lo, relro_hi */
        0x8a0f0063, /* 4c and x3, x3, x15 */
        0x8a0f0084, /* 50 and x4, x4, x15 */
        0xd280000e, /* 54 mov x14, #0 */
        0xeb04007f, /* 58 cmp x3, x4 */
        0x54000142, /* 5c b.hs 84 (no whole page) */
        0xcb030084, /* 60 sub x4, x4, x3 */
        0x8b0a0063, /* 64 add x3, x3, x10 */
        0xaa0303e0, /* 68 mov x0, x3 */
        0xaa0403e1, /* 6c mov x1, x4 */
        0xd2800062, /* 70 mov x2, #3: PROT_READ|WRITE */
        0xd2801c48, /* 74 mov x8, #226: mprotect */
        0xd4000001, /* 78 svc #0 */
        0xb50002e0, /* 7c cbnz x0, d8 (failed: write nothing) */
        0xd280002e, /* 80 mov x14, #1 */
        0xf940052b, /* 84 ldr x11, [x9, #8]: count */
        0x9100a12c, /* 88 add x12, x9, #40: entry 0 */
        0xb40001ab, /* 8c cbz x11, c0 */
        0xa9403d8d, /* 90 ldp x13, x15, [x12]: slot, old */
        0x8b0a01ad, /* 94 add x13, x13, x10 */
        0x8b0a01ef, /* 98 add x15, x15, x10 */
        0xf94001b0, /* 9c ldr x16, [x13] */
        0xeb0f021f, /* a0 cmp x16, x15 */
        0x54000081, /* a4 b.ne b4 (interposed, or lazy) */
        0xf9400990, /* a8 ldr x16, [x12, #16]: new */
        0x8b0a0210, /* ac add x16, x16, x10 */
        0xf90001b0, /* b0 str x16, [x13] */
        0x9100618c, /* b4 add x12, x12, #24 */
        0xd100056b, /* b8 sub x11, x11, #1 */
        0x17fffff4, /* bc b 8c */
        0xb40000ce, /* c0 cbz x14, d8 */
        0xaa0303e0, /* c4 mov x0, x3 */
        0xaa0403e1, /* c8 mov x1, x4 */
        0xd2800022, /* cc mov x2, #1: PROT_READ */
        0xd2801c48, /* d0 mov x8, #226 */
        0xd4000001, /* d4 svc #0 */
        0xf9401130, /* d8 ldr x16, [x9, #32]: next */
        0xaa0503e0, /* dc mov x0, x5 */
        0xaa0603e1, /* e0 mov x1, x6 */
        0xaa0703e2, /* e4 mov x2, x7 */
        0xb4000070, /* e8 cbz x16, f4 */
        0x8b0a0210, /* ec add x16, x16, x10 */
        0xd61f0200, /* f0 br x16 (a start lands on bti c: br x16 may) */
        0xd65f03c0, /* f4 ret; f8: the header */
    };
    return put_words(code, sizeof(code) / sizeof(code[0]), out, cap);
}
