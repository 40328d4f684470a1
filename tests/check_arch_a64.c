/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Unit tests for the AArch64 decoder, relocation and emitters (arch/aarch64/, reached
 * through arch_isa_for_machine), and the ISA choice.
 *
 * Relocations are checked by their effect, not their bytes: a small evaluator of the
 * sequences relocation emits (b, bl, blr x16, b.cond, cbz, tbz, adr, adrp, add, ldr)
 * says where control goes, which register gets which address, and which address is
 * loaded into which register; the effect at the new place must equal the original's.
 * The evaluator is the test's own (it reads the encodings from the Arm ARM, not from
 * a64_emit.c). Execution under qemu is tests/a64.sh's part.
 *
 * With `--jtab ELF` it finds the switch tables before every `br` of an AArch64 file and
 * checks that each entry of a bounded one leads into its code (tests/a64.sh).
 * With `--xcheck LISTING` it instead cross-checks every instruction of an objdump -d
 * listing of an AArch64 program (binutils' disassembly as the oracle): kind, direct
 * target, pc-relative address, PAC/BTI, NZCV read/written, and relocates every
 * pc-relative one to three distances, checking the effect. Prints the numbers; exit 1 on
 * a mismatch (tests/a64.sh).
 */
#include <check.h>
#include <elf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/aarch64/a64_priv.h"
#include "arch/arch.h"

static const arch_isa_t *A64;

static void
setup(void)
{
    A64 = arch_isa_for_machine(ARCH_EM_AARCH64);
}

static void
le32(uint8_t *p, uint32_t w)
{
    p[0] = (uint8_t)w;
    p[1] = (uint8_t)(w >> 8);
    p[2] = (uint8_t)(w >> 16);
    p[3] = (uint8_t)(w >> 24);
}

static uint32_t
rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int64_t
sx(uint64_t v, unsigned bits)
{
    uint64_t m = 1ull << (bits - 1);
    v &= (1ull << bits) - 1;
    return (int64_t)((v ^ m) - m);
}

/*****************************************************************************
 * The evaluator: the effect of a short sequence
 */

enum { CTL_NONE, CTL_JMP, CTL_COND, CTL_CALL };
/* load classes: ldr w, ldr x, ldrsw, ldr s, ldr d, ldr q, prfm */
enum { LD_NONE, LD_W, LD_X, LD_SW, LD_S, LD_D, LD_Q, LD_PRFM };

typedef struct eff {
    int ctl;            /* CTL_* */
    uint64_t target;    /* where control goes (when the condition holds) */
    uint32_t cond_key;  /* CTL_COND: the branch word without its offset, sense normalised */
    int nval;           /* a register set to an address */
    unsigned vreg;
    uint64_t val;
    int ld;             /* LD_*: a load of ... */
    unsigned lreg;      /* ... into this register ... */
    uint64_t laddr;     /* ... from this address */
    int bad;            /* something the evaluator does not know, or an unbalanced spill */
    uint64_t end;       /* the address after the sequence */
} eff_t;

/* The literal load class of W (opc:V). */
static int
lit_class(uint32_t w)
{
    static const int gpr[4] = {LD_W, LD_X, LD_SW, LD_PRFM}, fp[4] = {LD_S, LD_D, LD_Q, 0};
    return (w >> 26 & 1) ? fp[w >> 30] : gpr[w >> 30];
}

/* The class and scale of an unsigned-offset load W, or LD_NONE. */
static int
uoff_class(uint32_t w, unsigned *scale)
{
    switch (w & 0xffc00000u) {
    case 0xb9400000u: *scale = 4; return LD_W;
    case 0xf9400000u: *scale = 8; return LD_X;
    case 0xb9800000u: *scale = 4; return LD_SW;
    case 0xbd400000u: *scale = 4; return LD_S;
    case 0xfd400000u: *scale = 8; return LD_D;
    case 0x3dc00000u: *scale = 16; return LD_Q;
    default: return LD_NONE;
    }
}

static uint32_t
cond_key(uint32_t w, int invert)
{
    if ((w & 0xff000000u) == 0x54000000u) /* b.cond */
        return (w & 0x1fu) ^ (invert ? 1u : 0u);
    if ((w & 0x7e000000u) == 0x34000000u) /* cbz */
        return (w & 0xff00001fu) ^ (invert ? 1u << 24 : 0u);
    return (w & 0xfff8001fu) ^ (invert ? 1u << 24 : 0u); /* tbz */
}

static uint64_t
cond_target(uint32_t w, uint64_t pc)
{
    if ((w & 0x7e000000u) == 0x36000000u)
        return pc + (uint64_t)(sx(w >> 5, 14) * 4);
    return pc + (uint64_t)(sx(w >> 5, 19) * 4);
}

static void
eval(const uint8_t *code, size_t n, uint64_t pc0, eff_t *e)
{
    uint64_t x[32] = {0};
    int known[32] = {0};
    int spill = 0, inverted = 0;
    uint32_t pending_key = 0;
    memset(e, 0, sizeof *e);
    e->end = pc0 + n;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t w = rd32(code + i);
        uint64_t pc = pc0 + i;
        unsigned rd = w & 31u, rn = (w >> 5) & 31u, scale;
        int cls;
        if ((w & 0x7c000000u) == 0x14000000u) { /* b, bl */
            uint64_t t = pc + (uint64_t)(sx(w, 26) * 4);
            if (w & 0x80000000u)
                e->ctl = CTL_CALL;
            else if (inverted) {
                e->ctl = CTL_COND;
                e->cond_key = pending_key;
            } else
                e->ctl = CTL_JMP;
            e->target = t;
        } else if ((w & 0xff000010u) == 0x54000000u || (w & 0x7c000000u) == 0x34000000u) {
            uint64_t t = cond_target(w, pc);
            if ((w & 0xff00000eu) == 0x5400000eu) { /* b.al, b.nv: always */
                e->ctl = CTL_JMP;
                e->target = t;
            } else if (t == e->end && i + 8 == n) { /* skips the b that follows */
                inverted = 1;
                pending_key = cond_key(w, 1);
            } else {
                e->ctl = CTL_COND;
                e->cond_key = cond_key(w, 0);
                e->target = t;
            }
        } else if ((w & 0x1f000000u) == 0x10000000u) { /* adr, adrp */
            int64_t imm = sx((uint64_t)((w >> 5) & 0x7ffff) << 2 | ((w >> 29) & 3), 21);
            x[rd] = (w & 0x80000000u) ? (pc & ~0xfffull) + (uint64_t)(imm * 4096)
                                      : pc + (uint64_t)imm;
            known[rd] = 1;
            e->nval = 1, e->vreg = rd, e->val = x[rd];
        } else if ((w & 0xffc00000u) == 0x91000000u) { /* add xd, xn, #imm */
            if (!known[rn])
                e->bad = 1;
            x[rd] = x[rn] + ((w >> 10) & 0xfff);
            known[rd] = 1;
            e->nval = 1, e->vreg = rd, e->val = x[rd];
        } else if ((cls = uoff_class(w, &scale)) != LD_NONE) {
            if (!known[rn])
                e->bad = 1;
            e->ld = cls, e->lreg = rd, e->laddr = x[rn] + ((w >> 10) & 0xfff) * scale;
            known[rd] = 0;
            if (e->nval && e->vreg == rd)
                e->nval = 0; /* the address was only the way to the load */
        } else if ((w & 0x3b000000u) == 0x18000000u) { /* literal load */
            e->ld = lit_class(w), e->lreg = rd, e->laddr = pc + (uint64_t)(sx(w >> 5, 19) * 4);
        } else if (w == 0xd63f0200u) { /* blr x16 */
            if (!known[16])
                e->bad = 1;
            e->ctl = CTL_CALL, e->target = x[16];
            e->nval = 0;
        } else if (w == 0xa9bf47f0u) {
            spill++;
        } else if (w == 0xa8c147f0u) {
            spill--;
            known[16] = known[17] = 0;
            if (e->nval && (e->vreg == 16 || e->vreg == 17))
                e->nval = 0;
        } else if (w == 0xd503201fu) {
            /* nop */
        } else {
            e->bad = 1;
        }
    }
    if (spill)
        e->bad = 1;
}

static int
eff_equal(const eff_t *a, const eff_t *b)
{
    if (a->bad || b->bad || a->ctl != b->ctl || a->nval != b->nval || a->ld != b->ld)
        return 0;
    if (a->ctl != CTL_NONE && a->target != b->target)
        return 0;
    if (a->ctl == CTL_COND && a->cond_key != b->cond_key)
        return 0;
    if (a->nval && (a->vreg != b->vreg || a->val != b->val))
        return 0;
    if (a->ld && (a->lreg != b->lreg || a->laddr != b->laddr))
        return 0;
    return 1;
}

/*
 * Relocate the instruction word W from OLD to NEW (branches to the old target + TDELTA)
 * and compare effects. Returns 1 on equal, 0 on a difference, -1 when relocation said
 * QP_ERANGE (then ERANGE_OK tells whether that was allowed).
 */
static int
reloc_check(uint32_t w, uint64_t old, uint64_t new_addr, int64_t tdelta, char *why,
            size_t whylen)
{
    uint8_t in[4], out[ARCH_MAX_RELOC];
    arch_insn_t insn;
    le32(in, w);
    if (A64->decode(in, 4, old, &insn) < 0) {
        snprintf(why, whylen, "%08x does not decode", w);
        return 0;
    }
    uint64_t nt = insn.target + (uint64_t)tdelta;
    int n = A64->reloc_insn(in, &insn, new_addr, nt, 1, out, sizeof out);
    if (n == QP_ERANGE)
        return -1;
    if (n < 0) {
        snprintf(why, whylen, "%08x: reloc error %d", w, n);
        return 0;
    }
    /* The editor reserves reloc_max_len bytes before it knows where the code goes: never
     * less than any relocation gives (but the far bl's 12-byte veneer, refused there). */
    int max = A64->reloc_max_len(in, &insn);
    if (n > max && !(a64_form(w) == A64_FORM_BL && n == 12)) {
        snprintf(why, whylen, "%08x at %#" PRIx64 " -> %#" PRIx64 ": %d bytes, above "
                 "reloc_max_len's %d", w, old, new_addr, n, max);
        return 0;
    }
    eff_t e0, e1;
    eval(in, 4, old, &e0);
    if (insn.flags & ARCH_F_BRANCH_REL)
        e0.target = nt;
    if (e0.ld == LD_PRFM)
        e0.ld = LD_NONE; /* a prefetch may vanish */
    eval(out, (size_t)n, new_addr, &e1);
    if (e1.ld == LD_PRFM)
        e1.ld = LD_NONE;
    if (!eff_equal(&e0, &e1)) {
        snprintf(why, whylen,
                 "%08x at %#" PRIx64 " -> %#" PRIx64 " (%d bytes): ctl %d/%d target %#" PRIx64
                 "/%#" PRIx64 " val %d/%d %#" PRIx64 "/%#" PRIx64 " ld %d/%d %#" PRIx64
                 "/%#" PRIx64 " bad %d/%d",
                 w, old, new_addr, n, e0.ctl, e1.ctl, e0.target, e1.target, e0.nval, e1.nval,
                 e0.val, e1.val, e0.ld, e1.ld, e0.laddr, e1.laddr, e0.bad, e1.bad);
        return 0;
    }
    return 1;
}

/*****************************************************************************
 * Tests
 */

#define OLD 0x400000ull
#define NOTGT INT64_MIN

/* Every form, as the cross assembler encodes it at address 0 + the row's offset. */
static const struct row {
    uint32_t w;
    uint32_t at;       /* offset from OLD */
    int kind;
    int64_t target;    /* offset from OLD, or NOTGT */
    uint16_t flags;    /* expected ARCH_F_* among BRANCH_REL RIPREL PAC_* PRIV */
    uint8_t fr, fw;    /* flags read, written (NZCV as arch.h bits) */
} rows[] = {
    {0x14000040, 0x00, ARCH_KIND_JMP, 0x100, ARCH_F_BRANCH_REL, 0, 0},
    {0x97fffbff, 0x04, ARCH_KIND_CALL, -0x1000, ARCH_F_BRANCH_REL, 0, 0},
    {0x54fffda1, 0x0c, ARCH_KIND_JCC, -0x40, ARCH_F_BRANCH_REL, ARCH_FLAG_ZF, 0},
    {0x540001c0, 0x08, ARCH_KIND_JCC, 0x40, ARCH_F_BRANCH_REL, ARCH_FLAG_ZF, 0},
    {0x54ffffce, 0x10, ARCH_KIND_JMP, 0x8, ARCH_F_BRANCH_REL, 0, 0},
    {0xb4000363, 0x14, ARCH_KIND_JCC, 0x80, ARCH_F_BRANCH_REL, 0, 0},
    {0x35fffb45, 0x18, ARCH_KIND_JCC, -0x80, ARCH_F_BRANCH_REL, 0, 0},
    {0xb6080f27, 0x1c, ARCH_KIND_JCC, 0x200, ARCH_F_BRANCH_REL, 0, 0},
    {0x371fef02, 0x20, ARCH_KIND_JCC, -0x200, ARCH_F_BRANCH_REL, 0, 0},
    {0x10009089, 0x24, ARCH_KIND_SEQ, 0x1234, ARCH_F_RIPREL, 0, 0},
    {0xf000090a, 0x123, ARCH_KIND_SEQ, 0x123000, ARCH_F_RIPREL, 0, 0},
    {0x58001eab, 0x2c, ARCH_KIND_SEQ, 0x400, ARCH_F_RIPREL, 0, 0},
    {0x18001eac, 0x30, ARCH_KIND_SEQ, 0x404, ARCH_F_RIPREL, 0, 0},
    {0x98001ead, 0x34, ARCH_KIND_SEQ, 0x408, ARCH_F_RIPREL, 0, 0},
    {0xd8001ea0, 0x38, ARCH_KIND_SEQ, 0x40c, ARCH_F_RIPREL, 0, 0},
    {0x1c001ea1, 0x3c, ARCH_KIND_SEQ, 0x410, ARCH_F_RIPREL, 0, 0},
    {0x5c001ec2, 0x40, ARCH_KIND_SEQ, 0x418, ARCH_F_RIPREL, 0, 0},
    {0x9c001ee3, 0x44, ARCH_KIND_SEQ, 0x420, ARCH_F_RIPREL, 0, 0},
    {0xd61f0020, 0, ARCH_KIND_JMP_IND, NOTGT, 0, 0, 0},
    {0xd63f0040, 0, ARCH_KIND_CALL_IND, NOTGT, 0, 0, 0},
    {0xd65f03c0, 0, ARCH_KIND_RET, NOTGT, 0, 0, 0},
    {0xd65f0060, 0, ARCH_KIND_RET, NOTGT, 0, 0, 0},
    {0xd71f0885, 0, ARCH_KIND_JMP_IND, NOTGT, ARCH_F_PAC_AUTH, 0, 0},
    {0xd63f08df, 0, ARCH_KIND_CALL_IND, NOTGT, ARCH_F_PAC_AUTH, 0, 0},
    {0xd65f0bff, 0, ARCH_KIND_RET, NOTGT, ARCH_F_PAC_AUTH, 0, 0},
    {0xd65f0fff, 0, ARCH_KIND_RET, NOTGT, ARCH_F_PAC_AUTH, 0, 0},
    {0xd503245f, 0, ARCH_KIND_ENDBR, NOTGT, 0, 0, 0},
    {0xd503249f, 0, ARCH_KIND_ENDBR, NOTGT, 0, 0, 0},
    {0xd503233f, 0, ARCH_KIND_SEQ, NOTGT, ARCH_F_PAC_SIGN, 0, 0},
    {0xd50323bf, 0, ARCH_KIND_SEQ, NOTGT, ARCH_F_PAC_AUTH, 0, 0},
    {0xd503237f, 0, ARCH_KIND_SEQ, NOTGT, ARCH_F_PAC_SIGN, 0, 0},
    {0xd503201f, 0, ARCH_KIND_NOP, NOTGT, 0, 0, 0},
    {0xd4000001, 0, ARCH_KIND_SYSCALL, NOTGT, 0, 0, 0},
    {0xd4207d00, 0, ARCH_KIND_HALT, NOTGT, 0, 0, 0},
    {0x00000001, 0, ARCH_KIND_HALT, NOTGT, 0, 0, 0},
    {0xf1000c1f, 0, ARCH_KIND_SEQ, NOTGT, 0, 0, 0x39},
    {0x9a82b020, 0, ARCH_KIND_SEQ, NOTGT, 0, ARCH_FLAG_SF | ARCH_FLAG_OF, 0},
    {0xab020020, 0, ARCH_KIND_SEQ, NOTGT, 0, 0, 0x39},
    {0x1e612000, 0, ARCH_KIND_SEQ, NOTGT, 0, 0, 0x39},
    {0xfa411000, 0, ARCH_KIND_SEQ, NOTGT, 0, 0x39, 0x39},
    {0x9a020020, 0, ARCH_KIND_SEQ, NOTGT, 0, ARCH_FLAG_CF, 0},
    {0xd53b4203, 0, ARCH_KIND_SEQ, NOTGT, 0, 0x39, 0},
    {0xd51b4204, 0, ARCH_KIND_SEQ, NOTGT, 0, 0, 0x39},
    {0x1e62cc20, 0, ARCH_KIND_SEQ, NOTGT, 0, ARCH_FLAG_SF | ARCH_FLAG_OF | ARCH_FLAG_ZF, 0},
    {0xaa0103e0, 0, ARCH_KIND_SEQ, NOTGT, 0, 0, 0},
    {0x7200001f, 0, ARCH_KIND_SEQ, NOTGT, 0, 0, 0x39},
    {0xea220020, 0, ARCH_KIND_SEQ, NOTGT, 0, 0, 0x39},
};

START_TEST(test_decode_forms)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const struct row *r = &rows[i];
        uint8_t b[4];
        arch_insn_t in;
        le32(b, r->w);
        uint64_t at = OLD + r->at; /* adrp's row: the page of the pc counts, not the pc */
        int rc = A64->decode(b, 4, at, &in);
        uint16_t fmask = ARCH_F_BRANCH_REL | ARCH_F_RIPREL | ARCH_F_PAC_SIGN | ARCH_F_PAC_AUTH
                         | ARCH_F_PRIV;
        uint64_t want = r->target == NOTGT ? 0 : OLD + (uint64_t)r->target;
        if (rc != 0 || in.len != 4 || in.kind != r->kind || (in.flags & fmask) != r->flags
            || in.target != want || in.flags_read != r->fr || in.flags_written != r->fw) {
            fprintf(stderr,
                    "row %zu %08x: rc %d kind %d/%d target %#" PRIx64 "/%#" PRIx64
                    " flags %#x/%#x read %#x/%#x written %#x/%#x\n",
                    i, r->w, rc, in.kind, r->kind, in.target, want, in.flags & fmask, r->flags,
                    in.flags_read, r->fr, in.flags_written, r->fw);
            bad++;
        }
    }
    ck_assert_int_eq(bad, 0);
}
END_TEST

START_TEST(test_decode_errors)
{
    uint8_t b[4] = {0};
    arch_insn_t in;
    ck_assert_int_eq(A64->decode(b, 3, 0, &in), QP_EDECODE);
    ck_assert_int_eq(A64->decode(NULL, 4, 0, &in), QP_EINVAL);
    le32(b, 0x00010000); /* reserved group, not udf */
    ck_assert_int_eq(A64->decode(b, 4, 0, &in), QP_EDECODE);
    le32(b, 0xd61f0021); /* br with a nonzero op4 */
    ck_assert_int_eq(A64->decode(b, 4, 0, &in), QP_EDECODE);
    le32(b, 0xd69f03e0); /* eret: privileged */
    ck_assert_int_eq(A64->decode(b, 4, 0, &in), 0);
    ck_assert(in.flags & ARCH_F_PRIV);
    uint8_t pad[8];
    le32(pad, 0xd503201f);
    le32(pad + 4, 0);
    ck_assert(A64->is_padding(pad, 8));
    ck_assert(!A64->is_padding(pad, 6));
    le32(pad + 4, 0xd65f03c0);
    ck_assert(!A64->is_padding(pad, 8));
}
END_TEST

/* Each pc-relative row relocated near, to the edges of each reach, and far. */
START_TEST(test_reloc_effects)
{
    static const int64_t deltas[] = {
        0, 4, -4, 0x1000, 0x7ffc, 0x8000, -0x8004, 0xffffc, 0x100000, -0x100004,
        0x123456 * 4, 0x7fffffc, 0x8000000, -0x8000004, 0x40000000, 0x7ffff000ll,
        -0x7ffff000ll, 0x100000000ll,
    };
    int bad = 0, checked = 0, erange = 0;
    char why[256];
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        uint32_t w = rows[i].w;
        if (a64_form(w) == A64_FORM_OTHER)
            continue;
        for (size_t d = 0; d < sizeof deltas / sizeof deltas[0]; d++) {
            uint64_t old = 0x10000000ull + rows[i].at * 4;
            /* targets fixed (the code moved, what it reaches did not) and moved along */
            for (int along = 0; along < 2; along++) {
                int rc = reloc_check(w, old, old + (uint64_t)deltas[d],
                                     along ? deltas[d] : 0, why, sizeof why);
                checked++;
                if (rc == -1) {
                    /* allowed only for b beyond 128 MiB and adrp beyond 4 GiB */
                    erange++; /* only b (+-128 MiB) and adrp (+-4 GiB) may not reach */
                    if (deltas[d] < 0x7ff0000 && deltas[d] > -0x7ff0000) {
                        fprintf(stderr, "%08x delta %" PRId64 ": unexpected ERANGE\n", w,
                                deltas[d]);
                        bad++;
                    }
                } else if (rc == 0) {
                    fprintf(stderr, "%s\n", why);
                    bad++;
                }
            }
        }
    }
    fprintf(stderr, "reloc: %d checked, %d out of reach\n", checked, erange);
    ck_assert_int_eq(bad, 0);
}
END_TEST

/* Far relocations take the documented shapes. */
START_TEST(test_reloc_shapes)
{
    uint8_t in[4], out[ARCH_MAX_RELOC];
    arch_insn_t insn;
    le32(in, 0xb4000363); /* cbz x3, +0x80 */
    ck_assert_int_eq(A64->decode(in, 4, OLD, &insn), 0);
    ck_assert_int_eq(A64->reloc_insn(in, &insn, OLD + 0x200000, OLD + 0x80, 1, out, sizeof out), 8);
    ck_assert_uint_eq(rd32(out), 0xb5000043); /* cbnz x3, +8 */
    le32(in, 0x14000040);                     /* b: no register for a veneer */
    ck_assert_int_eq(A64->decode(in, 4, OLD, &insn), 0);
    ck_assert_int_eq(A64->reloc_insn(in, &insn, OLD + 0x10000000, OLD, 1, out, sizeof out),
                     QP_ERANGE);
    le32(in, 0x97fffbff); /* bl: the x16 veneer */
    ck_assert_int_eq(A64->decode(in, 4, OLD, &insn), 0);
    ck_assert_int_eq(A64->reloc_insn(in, &insn, OLD + 0x10000000, OLD, 1, out, sizeof out), 12);
    ck_assert_uint_eq(rd32(out + 8), 0xd63f0200);
    le32(in, 0x9c001ee3); /* ldr q3, literal: through a spilled x16 */
    ck_assert_int_eq(A64->decode(in, 4, OLD, &insn), 0);
    ck_assert_int_eq(A64->reloc_insn(in, &insn, OLD + 0x10000000, 0, 1, out, sizeof out), 20);
    ck_assert_uint_eq(rd32(out), 0xa9bf47f0);
    le32(in, 0xd8001ea0); /* prfm literal: dropped far away */
    ck_assert_int_eq(A64->decode(in, 4, OLD, &insn), 0);
    ck_assert_int_eq(A64->reloc_insn(in, &insn, OLD + 0x10000000, 0, 1, out, sizeof out), 4);
    ck_assert_uint_eq(rd32(out), 0xd503201f);
    le32(in, 0xd503233f); /* paciasp: copied */
    ck_assert_int_eq(A64->decode(in, 4, OLD, &insn), 0);
    ck_assert_int_eq(A64->reloc_insn(in, &insn, OLD + 0x10000000, 0, 1, out, sizeof out), 4);
    ck_assert_uint_eq(rd32(out), 0xd503233f);
}
END_TEST

START_TEST(test_emitters)
{
    uint8_t out[64];
    arch_insn_t in;
    ck_assert_int_eq(A64->emit_jmp(OLD, OLD + 0x100, out, sizeof out), 4);
    ck_assert_int_eq(A64->decode(out, 4, OLD, &in), 0);
    ck_assert_int_eq(in.kind, ARCH_KIND_JMP);
    ck_assert_uint_eq(in.target, OLD + 0x100);
    ck_assert_int_eq(A64->emit_call(OLD, OLD - 0x7fffffc, out, sizeof out), 4);
    ck_assert_int_eq(A64->decode(out, 4, OLD + 0, &in), 0);
    ck_assert_int_eq(in.kind, ARCH_KIND_CALL);
    ck_assert_uint_eq(in.target, OLD - 0x7fffffc);
    ck_assert_int_eq(A64->emit_jmp(OLD, OLD + 0x8000000, out, sizeof out), QP_ERANGE);
    ck_assert_int_eq(A64->emit_jmp(OLD, OLD + 2, out, sizeof out), QP_EINVAL);

    /* the counter: spill, adrp, ldr, add, str, unspill; nothing touches NZCV */
    uint64_t ctr = OLD + 0x123458;
    int n = A64->emit_counter_inc(OLD, ctr, ARCH_INC_PLAIN, out, sizeof out);
    ck_assert_int_eq(n, 24);
    ck_assert_uint_eq(rd32(out), 0xa9bf47f0);
    ck_assert_uint_eq(rd32(out + 20), 0xa8c147f0);
    for (int i = 0; i < n; i += 4) {
        ck_assert_int_eq(A64->decode(out + i, 4, OLD + (uint64_t)i, &in), 0);
        ck_assert_int_eq(in.flags_written, 0);
        ck_assert_int_eq(in.kind, ARCH_KIND_SEQ);
    }
    ck_assert_int_eq(A64->decode(out + 4, 4, OLD + 4, &in), 0);
    ck_assert_uint_eq(in.target, ctr & ~0xfffull);
    ck_assert_uint_eq((rd32(out + 8) >> 10 & 0xfff) * 8, ctr & 0xfff);
    ck_assert_int_eq(A64->emit_counter_inc(OLD, ctr, ARCH_INC_ATOMIC, out, sizeof out), 40);
    ck_assert_int_eq(A64->emit_counter_inc(OLD, ctr, ARCH_INC_SWITCH, out, sizeof out),
                     QP_EUNSUPP);
    ck_assert_int_eq(A64->emit_counter_inc(OLD, ctr + 4, ARCH_INC_PLAIN, out, sizeof out),
                     QP_EINVAL);
    ck_assert_int_eq(A64->emit_counter_inc(OLD, ctr + (5ull << 32), ARCH_INC_PLAIN, out,
                                           sizeof out), QP_ERANGE);
    ck_assert_int_eq(A64->emit_flags_save(out, sizeof out), 20);
    ck_assert_int_eq(A64->decode(out + 8, 4, 0, &in), 0);
    ck_assert_int_eq(in.flags_read, ARCH_FLAG_SF | ARCH_FLAG_ZF | ARCH_FLAG_CF | ARCH_FLAG_OF);
    ck_assert_int_eq(A64->emit_flags_restore(out, sizeof out), 20);
    ck_assert_int_eq(A64->decode(out + 8, 4, 0, &in), 0);
    ck_assert_int_eq(in.flags_written, ARCH_FLAG_SF | ARCH_FLAG_ZF | ARCH_FLAG_CF | ARCH_FLAG_OF);
    ck_assert_int_eq(A64->emit_nops(12, out, sizeof out), 12);
    ck_assert(A64->is_padding(out, 12));
    ck_assert_int_eq(A64->emit_nops(6, out, sizeof out), QP_EINVAL);
    ck_assert_int_eq(A64->emit_trap(out, sizeof out), 4);
    ck_assert_int_eq(A64->decode(out, 4, 0, &in), 0);
    ck_assert_int_eq(in.kind, ARCH_KIND_HALT);
}
END_TEST

/* The words of the NW-word sequence at OUT equal WANT (NULL entries: not compared). */
static void
expect_words(const uint8_t *out, const uint32_t *want, int nw)
{
    for (int i = 0; i < nw; i++)
        if (want[i] != 0)
            ck_assert_msg(rd32(out + 4 * i) == want[i], "word %d: %#x, want %#x", i,
                          rd32(out + 4 * i), want[i]);
}

/* The counting drivers' pieces: increments with dead registers, LSE, hook calls. */
START_TEST(test_counter_inc_at)
{
    uint8_t out[64], ref[64];
    arch_insn_t in;
    uint64_t ctr = OLD + 0x123458; /* page offset 0x458 */
    arch_snip_ctx_t ctx = {0};

    /* plain, x3 and x9 dead: adrp x3; ldr x9, [x3, #0x458]; add; str: no spill */
    ctx.dead_regs = 1u << 3 | 1u << 9;
    ck_assert_int_eq(A64->emit_counter_inc_at(OLD, ctr, ARCH_INC_PLAIN, &ctx, out, sizeof out),
                     16);
    ck_assert_int_eq(A64->decode(out, 4, OLD, &in), 0);
    ck_assert_uint_eq(in.target, ctr & ~0xfffull);
    ck_assert_uint_eq(rd32(out) & 31u, 3);
    expect_words(out + 4, (const uint32_t[]){0xf9422c69, 0x91000529, 0xf9022c69}, 3);
    for (int i = 0; i < 16; i += 4) {
        ck_assert_int_eq(A64->decode(out + i, 4, OLD + (uint64_t)i, &in), 0);
        ck_assert_int_eq(in.flags_written, 0);
    }
    /* live NZCV costs nothing: no increment writes it */
    ctx.live_flags = ARCH_FLAGS_STATUS;
    ck_assert_int_eq(A64->emit_counter_inc_at(OLD, ctr, ARCH_INC_PLAIN, &ctx, out, sizeof out),
                     16);

    /* one dead register, or only x18/x29/x30, or nothing known: the spilled sequence */
    int n = A64->emit_counter_inc(OLD, ctr, ARCH_INC_PLAIN, ref, sizeof ref);
    ck_assert_int_eq(n, 24);
    const uint32_t few[] = {1u << 3, 1u << 18 | 1u << 29 | 1u << 30, 0};
    for (size_t i = 0; i < sizeof few / sizeof few[0]; i++) {
        ctx.dead_regs = few[i];
        memset(out, 0, sizeof out);
        ck_assert_int_eq(
            A64->emit_counter_inc_at(OLD, ctr, ARCH_INC_PLAIN, &ctx, out, sizeof out), 24);
        ck_assert(memcmp(out, ref, 24) == 0);
    }
    ck_assert_int_eq(A64->emit_counter_inc_at(OLD, ctr, ARCH_INC_PLAIN, NULL, out, sizeof out),
                     24);

    /* atomic, x10..x12 dead: ldxr x11, [x10]; add; stxr w12; cbnz w12 back to the ldxr */
    ctx.dead_regs = 7u << 10;
    ck_assert_int_eq(A64->emit_counter_inc_at(OLD, ctr, ARCH_INC_ATOMIC, &ctx, out, sizeof out),
                     24);
    expect_words(out + 8, (const uint32_t[]){0xc85f7d4b, 0x9100056b, 0xc80c7d4b, 0x35ffffac},
                 4);
    ck_assert_uint_eq(rd32(out + 4), a64_enc_add_imm(10, 10, 0x458));
    ctx.dead_regs = 3u << 10; /* two are not enough: spilled */
    ck_assert_int_eq(A64->emit_counter_inc_at(OLD, ctr, ARCH_INC_ATOMIC, &ctx, out, sizeof out),
                     40);

    /* LSE: spilled x16/x17 and stadd x17, [x16]; or stadd x1, [x0] with x0, x1 dead */
    ck_assert_int_eq(A64->emit_counter_inc_at(OLD, ctr, ARCH_INC_ATOMIC_LSE, NULL, out,
                                              sizeof out), 24);
    expect_words(out, (const uint32_t[]){0xa9bf47f0, 0, 0, 0xd2800031, 0xf831021f, 0xa8c147f0},
                 6);
    ck_assert_int_eq(A64->decode(out + 4, 4, OLD + 4, &in), 0);
    ck_assert_uint_eq(in.target, ctr & ~0xfffull);
    ctx.dead_regs = 3u;
    ck_assert_int_eq(A64->emit_counter_inc_at(OLD, ctr, ARCH_INC_ATOMIC_LSE, &ctx, out,
                                              sizeof out), 16);
    expect_words(out + 8, (const uint32_t[]){0xd2800021, 0xf821001f}, 2);
    ck_assert_int_eq(A64->emit_counter_inc_at(OLD, ctr + (5ull << 32), ARCH_INC_ATOMIC_LSE,
                                              &ctx, out, sizeof out), QP_ERANGE);
    ck_assert_int_eq(A64->emit_counter_inc_at(OLD, ctr, ARCH_INC_SWITCH, &ctx, out, sizeof out),
                     QP_EUNSUPP);
    ck_assert_int_eq(A64->emit_counter_inc_at(OLD, ctr, 9, &ctx, out, sizeof out), QP_EINVAL);
    ck_assert_int_eq(A64->emit_counter_inc_at(OLD, ctr, ARCH_INC_PLAIN, &ctx, out, 12),
                     QP_EINVAL);

    /* a hook call: stp x29, x30; bl; ldp; the return address is ADDR + 8 (the bl at
     * ADDR + 4 reaches ADDR + 4 + 128 MiB - 4, no further) */
    ck_assert_int_eq(A64->emit_call_protected(OLD, OLD - 0x1000, out, sizeof out), 12);
    expect_words(out, (const uint32_t[]){0xa9bf7bfd, 0, 0xa8c17bfd}, 3);
    ck_assert_int_eq(A64->decode(out + 4, 4, OLD + 4, &in), 0);
    ck_assert_int_eq(in.kind, ARCH_KIND_CALL);
    ck_assert_uint_eq(in.target, OLD - 0x1000);
    ck_assert_int_eq(A64->emit_call_protected(OLD, OLD + 0x8000004, out, sizeof out), QP_ERANGE);
    ck_assert_int_eq(A64->emit_call_protected(OLD, OLD + 0x100, out, 8), QP_EINVAL);
}
END_TEST

/* x86-64's entries for the same pieces are the functions it always used. */
START_TEST(test_counter_inc_at_x86)
{
    const arch_isa_t *x86 = arch_isa_for_machine(ARCH_EM_X86_64);
    uint8_t out[64], ref[64];
    uint64_t ctr = 0x601000;
    arch_snip_ctx_t ctx = {0};
    ck_assert_int_eq(x86->emit_counter_inc_at(0x401000, ctr, ARCH_INC_PLAIN, &ctx, out,
                                              sizeof out), 7);
    ck_assert_int_eq(arch_emit_counter_inc(0x401000, ctr, ARCH_INC_PLAIN, ref, sizeof ref), 7);
    ck_assert(memcmp(out, ref, 7) == 0);
    /* live flags: saved around the incq, as editor/ed_layout.c does */
    ctx.live_flags = ARCH_FLAGS_STATUS;
    int s = arch_emit_flags_save(ref, sizeof ref);
    ck_assert_int_gt(s, 0);
    int k = arch_emit_counter_inc(0x401000 + (uint64_t)s, ctr, ARCH_INC_ATOMIC, ref + s,
                                  sizeof ref - (size_t)s);
    int r = arch_emit_flags_restore(ref + s + k, sizeof ref - (size_t)(s + k));
    ck_assert_int_eq(x86->emit_counter_inc_at(0x401000, ctr, ARCH_INC_ATOMIC, &ctx, out,
                                              sizeof out), s + k + r);
    ck_assert(memcmp(out, ref, (size_t)(s + k + r)) == 0);
    ck_assert_int_eq(x86->emit_counter_inc_at(0x401000, ctr, ARCH_INC_ATOMIC_LSE, NULL, out,
                                              sizeof out), QP_EINVAL);
    ck_assert_int_eq(x86->emit_call_protected(0x401000, 0x402000, out, sizeof out), 18);
    ck_assert_int_eq(arch_emit_call_protected(0x401000, 0x402000, ref, sizeof ref), 18);
    ck_assert(memcmp(out, ref, 18) == 0);
}
END_TEST

/* gcc's switch in Debian's arm64 ls (coreutils 9.1, at 0x5cb0) */
START_TEST(test_jump_table)
{
    uint32_t words[] = {
        0x5100c102, /* sub w2, w8, #0x30 */
        0x12001c47, /* and w7, w2, #0xff */
        0x710120ff, /* cmp w7, #0x48 */
        0x54fffae8, /* b.hi */
        0x7101205f, /* cmp w2, #0x48 */
        0x54fffaa8, /* b.hi */
        0x900000a4, /* adrp x4, 0x19000 */
        0x911b0084, /* add x4, x4, #0x6c0 */
        0x38624884, /* ldrb w4, [x4, w2, uxtw] */
        0x10000062, /* adr x2, 0x5ce0 */
        0x8b248844, /* add x4, x2, w4, sxtb #2 */
        0xd61f0080, /* br x4 */
    };
    uint8_t b[sizeof words];
    for (size_t i = 0; i < sizeof words / 4; i++)
        le32(b + 4 * i, words[i]);
    arch_jtab_t jt;
    ck_assert_int_eq(A64->jump_table(b, sizeof b, 0x5cb0, &jt), 0);
    ck_assert_uint_eq(jt.table, 0x196c0);
    ck_assert_uint_eq(jt.base, 0x5ce0);
    ck_assert_uint_eq(jt.count, 0x49);
    ck_assert_uint_eq(jt.entry_size, 1);
    ck_assert_uint_eq(jt.is_signed, 1);
    ck_assert_uint_eq(jt.shift, 2);
    ck_assert_uint_eq(jt.anchor, 0x5cd4); /* adr; add; br whole: the base may move */
    /* something between the adr and the add: the adr stays where it points */
    le32(b + 4 * 8, 0x10000062); /* adr x2, ... */
    le32(b + 4 * 9, 0x38624884); /* ldrb w4, [x4, w2, uxtw]: reads x2 */
    ck_assert_int_eq(A64->jump_table(b, sizeof b, 0x5cb0, &jt), 0);
    ck_assert_uint_eq(jt.anchor, 0);
    le32(b + 4 * 8, 0x38624884);
    le32(b + 4 * 9, 0x10000062);
    /* the index changed between the bound check and the load: bound unknown */
    le32(b + 4 * 7, 0x911b0042); /* add x2, x2, #0x6c0 ... */
    le32(b + 4 * 6, 0x900000a2);
    ck_assert_int_eq(A64->jump_table(b, sizeof b, 0x5cb0, &jt), QP_ENOTFOUND); /* and x4 unset */
    le32(b + 4 * 6, 0x900000a4);
    le32(b + 4 * 7, 0x911b00a4); /* add x4, x5, #0x6c0: not the adrp's register */
    ck_assert_int_eq(A64->jump_table(b, sizeof b, 0x5cb0, &jt), QP_ENOTFOUND);
    le32(b + 4 * 7, 0x911b0084);
    le32(b + 4 * 3, 0x54fffae8);
    le32(b + 4 * 5, 0x54fffaa0); /* b.eq instead of b.hi: no bound */
    ck_assert_int_eq(A64->jump_table(b, sizeof b, 0x5cb0, &jt), 0);
    ck_assert_uint_eq(jt.count, 0);
    ck_assert_int_eq(A64->jump_table(b, 8, 0x5cb0, &jt), QP_ENOTFOUND);
    ck_assert_ptr_null(arch_isa_host()->jump_table);
}
END_TEST

/* gcc 12 -O2's dense16 (tests/progs/switch_dense.c): the bound check branches to the
 * table with b.ls, and the default case (which writes the index register) and its ret
 * lie in between. The old scan stopped at that write: no bound, the switch unresolved. */
START_TEST(test_jump_table_bls)
{
    uint32_t words[] = {
        0x71003c1f, /* 7d0 cmp w0, #0xf */
        0x54000069, /* 7d4 b.ls 7e0 */
        0x2a0103e0, /* 7d8 mov w0, w1 (the default case) */
        0xd65f03c0, /* 7dc ret */
        0x90000002, /* 7e0 adrp x2, 0x400000 */
        0x9123c042, /* 7e4 add x2, x2, #0x8f0 */
        0x38604842, /* 7e8 ldrb w2, [x2, w0, uxtw] */
        0x10000060, /* 7ec adr x0, 7f8 */
        0x8b228802, /* 7f0 add x2, x0, w2, sxtb #2 */
        0xd61f0040, /* 7f4 br x2 */
    };
    uint8_t b[sizeof words];
    for (size_t i = 0; i < sizeof words / 4; i++)
        le32(b + 4 * i, words[i]);
    arch_jtab_t jt;
    ck_assert_int_eq(A64->jump_table(b, sizeof b, 0x4007d0, &jt), 0);
    ck_assert_uint_eq(jt.table, 0x4008f0);
    ck_assert_uint_eq(jt.base, 0x4007f8);
    ck_assert_uint_eq(jt.count, 16);
    ck_assert_uint_eq(jt.anchor, 0x4007ec);
    /* the index written on the way from the b.ls target to the load: no bound */
    le32(b + 4 * 5, 0x9123c000); /* add x0, x0, #0x8f0 (writes x0, the index) */
    ck_assert_int_eq(A64->jump_table(b, sizeof b, 0x4007d0, &jt), QP_ENOTFOUND);
    le32(b + 4 * 5, 0x9123c042);
    /* b.hi to the table falls into the default case: its write counts, no bound */
    le32(b + 4 * 1, 0x54000068); /* b.hi 7e0 */
    ck_assert_int_eq(A64->jump_table(b, sizeof b, 0x4007d0, &jt), 0);
    ck_assert_uint_eq(jt.count, 0);
}
END_TEST

/* clang 14 -O2's big() of tests/a64/swtab.c: the index compared is copied to another
 * register (mov w8, w0) before the load; halfword entries from an adr, unsigned */
START_TEST(test_jump_table_clang_copy)
{
    uint32_t words[] = {
        0x71004c1f, /* 4007ec cmp w0, #0x13 */
        0x54002108, /* 4007f0 b.hi 400c10 */
        0xb00002e9, /* 4007f4 adrp x9, 45d000 */
        0x2a0003e8, /* 4007f8 mov w8, w0 */
        0x9128a129, /* 4007fc add x9, x9, #0xa28 */
        0x1000008a, /* 400800 adr x10, 400810 */
        0x7868792b, /* 400804 ldrh w11, [x9, x8, lsl #1] */
        0x8b0b094a, /* 400808 add x10, x10, x11, lsl #2 */
        0xd61f0140, /* 40080c br x10 */
    };
    uint8_t b[sizeof words];
    for (size_t i = 0; i < sizeof words / 4; i++)
        le32(b + 4 * i, words[i]);
    arch_jtab_t jt;
    ck_assert_int_eq(A64->jump_table(b, sizeof b, 0x4007ec, &jt), 0);
    ck_assert_uint_eq(jt.table, 0x45da28);
    ck_assert_uint_eq(jt.base, 0x400810);
    ck_assert_uint_eq(jt.count, 20);
    ck_assert_uint_eq(jt.entry_size, 2);
    ck_assert_uint_eq(jt.is_signed, 0);
    ck_assert_uint_eq(jt.anchor, 0x400800); /* adr x10 ... add x10, x10: overwritten */
    /* a copy of another register: the compare bounds nothing loaded */
    le32(b + 4 * 3, 0x2a0103e8); /* mov w8, w1 */
    ck_assert_int_eq(A64->jump_table(b, sizeof b, 0x4007ec, &jt), 0);
    ck_assert_uint_eq(jt.count, 0);
    /* w0 changed after the compare, before the copy: no bound */
    le32(b + 4 * 3, 0x2a0003e8);
    le32(b + 4 * 2, 0x11000400); /* add w0, w0, #1 instead of the adrp */
    le32(b + 4 * 4, 0x9128a129);
    ck_assert_int_ne(A64->jump_table(b, sizeof b, 0x4007ec, &jt) == 0 && jt.count != 0, 1);
}
END_TEST

/* A table whose address is spilled to the stack: the jump's recogniser stops at the
 * slot's load; sp_access describes each instruction's use of the frame; slot_store
 * finds the address stored (sqlite3VdbeExec of Debian's libsqlite3.so.0.8.6). */
START_TEST(test_jump_table_slot)
{
    uint32_t words[] = {
        0x7102d77f, /* e4690 cmp w27, #0xb5 */
        0x54000c68, /* e4694 b.hi e4820 */
        0xf9400be0, /* e4698 ldr x0, [sp, #16] */
        0x787b5800, /* e469c ldrh w0, [x0, w27, uxtw #1] */
        0x10000061, /* e46a0 adr x1, e46ac */
        0x8b20a820, /* e46a4 add x0, x1, w0, sxth #2 */
        0xd61f0000, /* e46a8 br x0 */
    };
    uint8_t b[sizeof words];
    for (size_t i = 0; i < sizeof words / 4; i++)
        le32(b + 4 * i, words[i]);
    arch_jtab_t jt;
    ck_assert_int_eq(A64->jump_table(b, sizeof b, 0xe4690, &jt), 0);
    ck_assert_uint_eq(jt.table, 0);
    ck_assert_uint_eq(jt.slot_load, 0xe4698);
    ck_assert_int_eq(jt.slot, 16);
    ck_assert_uint_eq(jt.count, 0xb6);
    ck_assert_uint_eq(jt.base, 0xe46ac);
    ck_assert_uint_eq(jt.anchor, 0xe46a0);

    uint32_t store[] = {
        0xb0000200, /* e4654 adrp x0, 125000 */
        0xb94032a8, /* e4658 ldr w8, [x21, #48] */
        0x91396000, /* e465c add x0, x0, #0xe58 */
        0xf9000be0, /* e4660 str x0, [sp, #16] */
    };
    uint8_t sb[sizeof store];
    for (size_t i = 0; i < sizeof store / 4; i++)
        le32(sb + 4 * i, store[i]);
    uint64_t value, first;
    ck_assert_int_eq(A64->slot_store(sb, sizeof sb, 0xe4654, 16, &value, &first), 0);
    ck_assert_uint_eq(value, 0x125e58);
    ck_assert_uint_eq(first, 0xe4654);
    ck_assert_int_eq(A64->slot_store(sb, sizeof sb, 0xe4654, 24, &value, &first), QP_ENOTFOUND);
    le32(sb + 4, 0xb94032a0); /* ldr w0, [x21, #48]: x0 written between */
    ck_assert_int_eq(A64->slot_store(sb, sizeof sb, 0xe4654, 16, &value, &first), QP_ENOTFOUND);

    static const struct {
        uint32_t w;
        unsigned flags;
        int64_t lo, hi;
    } acc[] = {
        { 0xf9000be0, ARCH_SP_STORE, 16, 24 },                     /* str x0, [sp, #16] */
        { 0xf9400be0, 0, 0, 0 },                                   /* ldr x0, [sp, #16] */
        { 0xa9010fe2, ARCH_SP_STORE, 16, 32 },                     /* stp x2, x3, [sp, #16] */
        { 0xb80143e3, ARCH_SP_STORE, 20, 24 },                     /* stur w3, [sp, #20] */
        { 0x3d8007e0, ARCH_SP_STORE, 16, 32 },                     /* str q0, [sp, #16] */
        { 0xa9bf7bfd, ARCH_SP_STORE | ARCH_SP_WRITES_SP, -16, 0 }, /* stp x29, x30, [sp, #-16]! */
        { 0xa8c17bfd, ARCH_SP_WRITES_SP, 0, 0 },                   /* ldp x29, x30, [sp], #16 */
        { 0xd10603ff, ARCH_SP_WRITES_SP, 0, 0 },                   /* sub sp, sp, #0x180 */
        { 0xcb2063ff, ARCH_SP_WRITES_SP | ARCH_SP_UNKNOWN, 0, 0 }, /* sub sp, sp, x0 */
        { 0x910003bf, ARCH_SP_WRITES_SP, 0, 0 },                   /* mov sp, x29 */
        { 0x910263e1, ARCH_SP_ADDR, 0x98, 0 },                     /* add x1, sp, #0x98 */
        { 0x910003e3, ARCH_SP_ADDR, 0, 0 },                        /* mov x3, sp */
        { 0x910443fd, 0, 0, 0 },                                   /* add x29, sp, #0x110 */
        { 0xd10003a3, ARCH_SP_UNKNOWN, 0, 0 },                     /* sub x3, x29, #0 */
        { 0xaa1d03e0, ARCH_SP_UNKNOWN, 0, 0 },                     /* mov x0, x29 */
        { 0xf81f83a0, ARCH_SP_UNKNOWN, 0, 0 },                     /* stur x0, [x29, #-8] */
        { 0xf85f83a0, 0, 0, 0 },                                   /* ldur x0, [x29, #-8] */
        { 0xf8216be0, ARCH_SP_UNKNOWN, 0, 0 },                     /* str x0, [sp, x1] */
        { 0xeb1f03ff, 0, 0, 0 },                                   /* cmp xzr, xzr: no sp */
        { 0x043f57ff, ARCH_SP_UNKNOWN, 0, 0 },                     /* addvl sp, sp, #-1 (SVE) */
        { 0x94000010, 0, 0, 0 },                                   /* bl */
    };
    for (size_t i = 0; i < sizeof acc / sizeof acc[0]; i++) {
        uint8_t w[4];
        arch_sp_access_t a;
        le32(w, acc[i].w);
        ck_assert_int_eq(A64->sp_access(w, 4, 0x1000, &a), 0);
        ck_assert_msg(a.flags == acc[i].flags, "%08x: flags %x, want %x", acc[i].w, a.flags,
                      acc[i].flags);
        if (a.flags & (ARCH_SP_STORE | ARCH_SP_ADDR))
            ck_assert_msg(a.lo == acc[i].lo && (!(a.flags & ARCH_SP_STORE) || a.hi == acc[i].hi),
                          "%08x: [%lld, %lld)", acc[i].w, (long long)a.lo, (long long)a.hi);
    }
}
END_TEST

/* arch_isa_t's cfg block for A64: adrp + add/ldr, PLT stubs, pointer jumps, svc numbers */
START_TEST(test_cfg_questions)
{
    uint8_t b[64];
    uint64_t ref = 0;
    /* adrp x0, 0x41f000; nop; add x0, x0, #0x6b4 (at 0x41e000) */
    le32(b, 0xb0000000);
    le32(b + 4, 0xd503201f);
    le32(b + 8, 0x911ad000);
    ck_assert_int_eq(A64->code_ref(b, 12, 0x41e000, &ref), ARCH_REF_ADDR);
    ck_assert_uint_eq(ref, 0x41f6b4);
    ck_assert_int_eq(A64->code_ref(b, 8, 0x41e000, &ref), 0); /* the add not in BUF */
    le32(b + 8, 0xf9435800); /* ldr x0, [x0, #0x6b0]: memory at page + 0x6b0 */
    ck_assert_int_eq(A64->code_ref(b, 12, 0x41e000, &ref), ARCH_REF_MEM);
    ck_assert_uint_eq(ref, 0x41f6b0);
    le32(b + 4, 0xd2800000); /* mov x0, #0 between: x0 is no more the page */
    ck_assert_int_eq(A64->code_ref(b, 12, 0x41e000, &ref), 0);
    le32(b + 4, 0x14000002); /* b: the block ends before the use */
    ck_assert_int_eq(A64->code_ref(b, 12, 0x41e000, &ref), 0);
    le32(b, 0x10000060); /* adr x0, +12 */
    ck_assert_int_eq(A64->code_ref(b, 4, 0x1000, &ref), ARCH_REF_ADDR);
    ck_assert_uint_eq(ref, 0x100c);
    le32(b, 0x58000081); /* ldr x1, literal +16 */
    ck_assert_int_eq(A64->code_ref(b, 4, 0x1000, &ref), ARCH_REF_MEM);
    ck_assert_uint_eq(ref, 0x1010);

    /* ld's PLT entry, with and without bti c: the GOT slot */
    uint32_t plt[] = { 0xd503245f, 0xd0000170, 0xf940b611, 0x9105a210, 0xd61f0220 };
    for (size_t i = 0; i < 5; i++)
        le32(b + 4 * i, plt[i]);
    uint64_t slot = 0;
    ck_assert_int_eq(A64->plt_slot(b + 4, 16, 0x402f30, &slot), 16);
    ck_assert_uint_eq(slot, 0x430168);
    ck_assert_int_eq(A64->plt_slot(b, 20, 0x402f2c, &slot), 20);
    ck_assert_uint_eq(slot, 0x430168);
    le32(b + 16, 0xd61f0200); /* br x16: not a PLT stub */
    ck_assert_int_eq(A64->plt_slot(b, 20, 0x402f2c, &slot), 0);
    /* x86-64's stub: [endbr64] [bnd] jmp *disp32(%rip) */
    const uint8_t x86[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0x10, 0x00, 0x00, 0x00 };
    ck_assert_int_eq(arch_isa_host()->plt_slot(x86, sizeof(x86), 0x1000, &slot), 11);
    ck_assert_uint_eq(slot, 0x1000 + 11 + 0x10);
    ck_assert_int_eq(arch_isa_host()->plt_slot(x86 + 5, 6, 0x1005, &slot), 6);
    ck_assert_uint_eq(slot, 0x1005 + 6 + 0x10);
    ck_assert_int_eq(arch_isa_host()->plt_slot(x86, sizeof(x86) - 1, 0x1000, &slot), 0);

    /* br through a loaded pointer, through x16 copied from a register, through a table */
    uint32_t pj[] = { 0xf9400a60, 0xaa0003f0, 0xd503201f, 0xd61f0200 };
    for (size_t i = 0; i < 4; i++)
        le32(b + 4 * i, pj[i]); /* ldr x0, [x19, #16]; mov x16, x0; nop; br x16 */
    ck_assert_int_eq(A64->ptr_jump(b, 16, 0x1000), 1);
    le32(b + 4, 0xaa0003e1);    /* mov x1, x0 ... br x1 */
    le32(b + 12, 0xd61f0020);
    ck_assert_int_eq(A64->ptr_jump(b, 16, 0x1000), 1); /* followed to the load */
    le32(b, 0xf8607a60);        /* ldr x0, [x19, x0, lsl #3]: a table of pointers */
    ck_assert_int_eq(A64->ptr_jump(b, 16, 0x1000), 0);
    le32(b + 12, 0xd63f0020);   /* blr x1: no jump */
    ck_assert_int_eq(A64->ptr_jump(b, 16, 0x1000), 0);

    le32(b, 0x52800ba8); /* mov w8, #93 (exit) */
    ck_assert_int_eq(A64->syscall_nr(b, 4), 93);
    ck_assert_int_eq(A64->sys_noreturn[0], 93);
    le32(b, 0x52800ba9); /* mov w9, #93 */
    ck_assert_int_eq(A64->syscall_nr(b, 4), -1);
    ck_assert_int_eq(arch_isa_host()->sys_noreturn[0], 60);
}
END_TEST

START_TEST(test_isa_select)
{
    char why[128] = "";
    ck_assert_ptr_eq(arch_isa_select(ARCH_EM_AARCH64, why, sizeof why), A64);
    ck_assert_str_eq(A64->name, "AArch64");
    ck_assert_ptr_eq(arch_isa_select(ARCH_EM_X86_64, why, sizeof why), arch_isa_host());
    ck_assert_ptr_null(arch_isa_select(40, why, sizeof why));
    ck_assert_str_eq(why, "ELF machine 40 (32-bit ARM) is not supported");
    ck_assert(strchr(why, '\n') == NULL);
    ck_assert_ptr_null(arch_isa_for_machine(0));
}
END_TEST

/*****************************************************************************
 * --xcheck: an objdump -d listing as the oracle
 */

static int
starts(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

static int
in_list(const char *m, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(m, *list) == 0)
            return 1;
    return 0;
}

static const char *const nzcv_writers[] = {
    "adds", "subs", "cmp", "cmn", "ands", "tst", "bics", "adcs", "sbcs", "negs", "ngcs",
    "ccmp", "ccmn", "fcmp", "fcmpe", "fccmp", "fccmpe", "msr", NULL};
static const char *const nzcv_readers[] = {
    "csel", "csinc", "csinv", "csneg", "cset", "csetm", "cinc", "cinv", "cneg", "fcsel",
    "adc", "adcs", "sbc", "sbcs", "ngc", "ngcs", "ccmp", "ccmn", "fccmp", "fccmpe", "mrs",
    "cfinv", "axflag", "xaflag", NULL};

/* The kind objdump's mnemonic M implies, or -1 for "not a control transfer". */
static int
kind_of(const char *m, const char *ops)
{
    if (strcmp(m, "b") == 0 || strcmp(m, "b.al") == 0 || strcmp(m, "b.nv") == 0)
        return ARCH_KIND_JMP;
    if (strcmp(m, "bl") == 0)
        return ARCH_KIND_CALL;
    if (starts(m, "b.") || starts(m, "bc.") || !strcmp(m, "cbz") || !strcmp(m, "cbnz")
        || !strcmp(m, "tbz") || !strcmp(m, "tbnz"))
        return ARCH_KIND_JCC;
    if (!strcmp(m, "brk") || !strcmp(m, "hlt") || !strcmp(m, "udf"))
        return ARCH_KIND_HALT;
    if (starts(m, "br"))
        return ARCH_KIND_JMP_IND;
    if (starts(m, "blr"))
        return ARCH_KIND_CALL_IND;
    if (starts(m, "ret"))
        return ARCH_KIND_RET;
    if (!strcmp(m, "svc"))
        return ARCH_KIND_SYSCALL;
    if (!strcmp(m, "nop"))
        return ARCH_KIND_NOP;
    if (!strcmp(m, "bti"))
        return ARCH_KIND_ENDBR;
    (void)ops;
    return ARCH_KIND_SEQ;
}

/* The first hexadecimal address among OPS after the comma count SKIP (objdump's
 * "x0, 4a1000 <sym>"), or 0 when none. */
static int
op_addr(const char *ops, uint64_t *a)
{
    const char *lt = strchr(ops, '<');
    if (!lt)
        return 0;
    const char *p = lt;
    while (p > ops && p[-1] == ' ')
        p--;
    while (p > ops && strchr("0123456789abcdef", p[-1]))
        p--;
    return sscanf(p, "%" SCNx64, a) == 1;
}

static int
xcheck(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        return 2;
    }
    char line[1024];
    long n = 0, bad = 0, relocs = 0, reloc_bad = 0, reloc_erange = 0, undef = 0;
    long by_kind[16] = {0}, pcrel = 0, pac = 0, fl_r = 0, fl_w = 0;
    while (fgets(line, sizeof line, f)) {
        uint64_t addr;
        unsigned w;
        char m[64] = "", ops[512] = "";
        /* "  4001f0:\td2800000 \tmov\tx0, #0x0" */
        if (sscanf(line, " %" SCNx64 ":\t%8x \t%63s\t%511[^\n]", &addr, &w, m, ops) < 3)
            continue;
        if (strlen(line) < 20 || strchr(line, ':') - line > 20)
            continue;
        char *cmt = strstr(ops, "//");
        if (cmt)
            *cmt = 0;
        uint8_t b[4];
        arch_insn_t in;
        le32(b, w);
        n++;
        int rc = A64->decode(b, 4, addr, &in);
        if (!strcmp(m, ".inst") || !strcmp(m, "udf")) {
            undef++;
            if (rc == 0 && in.kind != ARCH_KIND_HALT) {
                fprintf(stderr, "%" PRIx64 ": %08x %s: decodes as kind %d\n", addr, w, m, in.kind);
                bad++;
            }
            continue;
        }
        int kind = kind_of(m, ops);
        int isbr = kind == ARCH_KIND_JMP || kind == ARCH_KIND_JCC || kind == ARCH_KIND_CALL;
        uint64_t want = 0;
        int has_addr = op_addr(ops, &want) && !strchr(ops, '[');
        int lit = (!strcmp(m, "ldr") || !strcmp(m, "ldrsw") || !strcmp(m, "prfm")) && has_addr;
        int riprel = !strcmp(m, "adr") || !strcmp(m, "adrp") || lit;
        const char *err = NULL;
        if (rc != 0)
            err = "does not decode";
        else if (in.kind != kind)
            err = "kind";
        else if ((isbr || riprel) && (!has_addr || in.target != want))
            err = "target";
        else if (!!(in.flags & ARCH_F_RIPREL) != riprel)
            err = "pc-relative flag";
        else if (!!(in.flags & ARCH_F_BRANCH_REL) != isbr)
            err = "branch flag";
        else if (in.flags_written && !in_list(m, nzcv_writers))
            err = "claims an NZCV write";
        else if (in_list(m, nzcv_readers) && !in.flags_read
                 && !(!strcmp(m, "mrs") && !strstr(ops, "nzcv")))
            err = "misses an NZCV read";
        else if (in.flags_read && !in_list(m, nzcv_readers) && kind != ARCH_KIND_JCC)
            err = "claims an NZCV read";
        else if ((starts(m, "pacia") || starts(m, "pacib")) != !!(in.flags & ARCH_F_PAC_SIGN))
            err = "PAC sign";
        else if ((starts(m, "auti") || starts(m, "retaa") || starts(m, "retab")
                  || !strcmp(m, "braa") || !strcmp(m, "brab") || starts(m, "braaz")
                  || starts(m, "brabz") || starts(m, "blraa") || starts(m, "blrab"))
                 != !!(in.flags & ARCH_F_PAC_AUTH))
            err = "PAC auth";
        if (err) {
            fprintf(stderr, "%" PRIx64 ": %08x %s %s: %s (kind %d, target %#" PRIx64 ")\n",
                    addr, w, m, ops, err, in.kind, in.target);
            bad++;
            continue;
        }
        by_kind[in.kind & 15]++;
        pac += !!(in.flags & (ARCH_F_PAC_SIGN | ARCH_F_PAC_AUTH));
        fl_r += !!in.flags_read;
        fl_w += !!in.flags_written;
        if (a64_form(w) == A64_FORM_OTHER)
            continue;
        pcrel++;
        /* relocate: 64 KiB, 64 MiB and 2 GiB away, the targets fixed */
        static const int64_t dist[] = {0x10000, 0x4000000, 0x80000000ll};
        for (int d = 0; d < 3; d++) {
            char why[256];
            int r = reloc_check(w, addr, addr + (uint64_t)dist[d], 0, why, sizeof why);
            relocs++;
            if (r == -1)
                reloc_erange++;
            else if (r == 0) {
                fprintf(stderr, "reloc: %s\n", why);
                reloc_bad++;
            }
        }
    }
    fclose(f);
    printf("xcheck %s: %ld instructions, %ld mismatches, %ld undefined (.inst/udf); "
           "b %ld, bl %ld, cond %ld, br %ld, blr %ld, ret %ld, svc %ld, bti %ld, nop %ld, "
           "pac %ld, nzcv read %ld written %ld, pc-relative %ld; relocations %ld, %ld wrong, "
           "%ld out of reach\n",
           path, n, bad, undef, by_kind[ARCH_KIND_JMP], by_kind[ARCH_KIND_CALL],
           by_kind[ARCH_KIND_JCC], by_kind[ARCH_KIND_JMP_IND], by_kind[ARCH_KIND_CALL_IND],
           by_kind[ARCH_KIND_RET], by_kind[ARCH_KIND_SYSCALL], by_kind[ARCH_KIND_ENDBR],
           by_kind[ARCH_KIND_NOP], pac, fl_r, fl_w, pcrel, relocs, reloc_bad, reloc_erange);
    return (bad || reloc_bad || n == 0) ? 1 : 0;
}

/*****************************************************************************
 * --jtab: switch tables of a real AArch64 ELF file (arch_isa_t.jump_table)
 */

/* The file's bytes at virtual address VA (LEN bytes), or NULL. */
static const uint8_t *
at_va(const uint8_t *f, size_t fsize, uint64_t va, size_t len)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f;
    for (unsigned k = 0; k < eh->e_phnum; k++) {
        const Elf64_Phdr *ph = (const Elf64_Phdr *)(f + eh->e_phoff) + k;
        if (ph->p_type == PT_LOAD && va >= ph->p_vaddr && va + len <= ph->p_vaddr + ph->p_filesz
            && ph->p_offset + (va - ph->p_vaddr) + len <= fsize)
            return f + ph->p_offset + (va - ph->p_vaddr);
    }
    return NULL;
}

/*
 * Every `br` of every executable section: is it a switch table, and when the bound is
 * known, does every entry lead to a 4-aligned address in the same section within 1 MiB
 * of the br (a wrong shift, sign or base does not)? Prints the numbers; 1 on a bad table.
 */
static int
jtab_check(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        perror(path);
        return 2;
    }
    static uint8_t f[64 << 20];
    size_t fsize = fread(f, 1, sizeof f, fp);
    fclose(fp);
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f;
    if (fsize < sizeof *eh || memcmp(f, ELFMAG, SELFMAG) || eh->e_machine != EM_AARCH64) {
        fprintf(stderr, "%s: not an AArch64 ELF file\n", path);
        return 2;
    }
    long brs = 0, found = 0, bounded = 0, entries = 0, bad = 0;
    for (unsigned s = 0; s < eh->e_shnum; s++) {
        const Elf64_Shdr *sh = (const Elf64_Shdr *)(f + eh->e_shoff) + s;
        if (sh->sh_type != SHT_PROGBITS || !(sh->sh_flags & SHF_EXECINSTR)
            || sh->sh_offset + sh->sh_size > fsize)
            continue;
        const uint8_t *code = f + sh->sh_offset;
        for (uint64_t off = 0; off + 4 <= sh->sh_size; off += 4) {
            if ((rd32(code + off) & 0xfffffc1fu) != 0xd61f0000u)
                continue;
            brs++;
            uint64_t from = off > 256 ? off - 256 : 0;
            arch_jtab_t jt;
            if (A64->jump_table(code + from, off + 4 - from, sh->sh_addr + from, &jt) != 0)
                continue;
            found++;
            if (jt.count == 0)
                continue;
            bounded++;
            uint64_t br = sh->sh_addr + off;
            const uint8_t *t = at_va(f, fsize, jt.table, (size_t)jt.count * jt.entry_size);
            if (!t) {
                fprintf(stderr, "%#" PRIx64 ": table %#" PRIx64 " not in the file\n", br, jt.table);
                bad++;
                continue;
            }
            for (uint32_t k = 0; k < jt.count; k++) {
                uint64_t e = 0;
                memcpy(&e, t + (size_t)k * jt.entry_size, jt.entry_size);
                int64_t v = jt.is_signed ? sx(e, 8 * jt.entry_size) : (int64_t)e;
                uint64_t target = jt.base + (uint64_t)(v * (1 << jt.shift));
                entries++;
                if (target % 4 || target < sh->sh_addr || target >= sh->sh_addr + sh->sh_size
                    || target + 0x100000 < br || target > br + 0x100000) {
                    fprintf(stderr, "%#" PRIx64 ": entry %u -> %#" PRIx64 " (table %#" PRIx64
                            " base %#" PRIx64 " size %u shift %u signed %u)\n", br, k, target,
                            jt.table, jt.base, jt.entry_size, jt.shift, jt.is_signed);
                    bad++;
                    break;
                }
            }
        }
    }
    printf("jtab %s: %ld br, %ld switch tables (%ld with a proven bound, %ld entries), %ld bad\n",
           path, brs, found, bounded, entries, bad);
    return bad ? 1 : 0;
}

static Suite *
a64_suite(void)
{
    Suite *s = suite_create("arch_a64");
    TCase *tc = tcase_create("a64");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_decode_forms);
    tcase_add_test(tc, test_decode_errors);
    tcase_add_test(tc, test_reloc_effects);
    tcase_add_test(tc, test_reloc_shapes);
    tcase_add_test(tc, test_emitters);
    tcase_add_test(tc, test_counter_inc_at);
    tcase_add_test(tc, test_counter_inc_at_x86);
    tcase_add_test(tc, test_jump_table);
    tcase_add_test(tc, test_jump_table_bls);
    tcase_add_test(tc, test_jump_table_clang_copy);
    tcase_add_test(tc, test_jump_table_slot);
    tcase_add_test(tc, test_cfg_questions);
    tcase_add_test(tc, test_isa_select);
    suite_add_tcase(s, tc);
    return s;
}

int
main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--xcheck") == 0) {
        setup();
        return xcheck(argv[2]);
    }
    if (argc == 3 && strcmp(argv[1], "--jtab") == 0) {
        setup();
        return jtab_check(argv[2]);
    }
    SRunner *sr = srunner_create(a64_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
