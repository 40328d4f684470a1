/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Unit tests for the x86-64 relocation of one instruction and the emitters
 * (arch_reloc_insn, arch_emit_*). Round trips: decode a table of instructions, relocate
 * each to near and far addresses with near and far new targets, decode the output again
 * and compare. Emitted sequences are decoded and checked byte for byte. Two execution
 * tests run relocated and emitted code in an RWX page (skipped when the kernel refuses
 * one).
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arch/arch.h"

/* A byte string literal and its length, for the tables. */
#define B(s) (const uint8_t*)(s), (sizeof(s) - 1)

/* Where the table instructions are decoded: a PIE-like address, far from 0. */
#define OLD 0x555555555000ull

#define GIB 0x40000000ll

/*
 * Table rows are checked in a loop inside one test: each failing row is reported on
 * stderr and the test fails once at the end (as in check_arch.c).
 */
static int row_failures;
static int row_count;

#define EXPECT(cond, ...)                                                                \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                              \
            fprintf(stderr, __VA_ARGS__);                                                \
            fputc('\n', stderr);                                                         \
            row_failures++;                                                              \
            return;                                                                      \
        }                                                                                \
    } while (0)

#define ROWS_BEGIN()                                                                     \
    do {                                                                                 \
        row_failures = 0;                                                                \
        row_count = 0;                                                                   \
    } while (0)

#define ROWS_END()                                                                       \
    ck_assert_msg(row_failures == 0, "%d of %d checks failed (see stderr)",              \
        row_failures, row_count)

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/*****************************************************************************
 * Reading branch encodings back (the test's own, independent of x86_emit.c)
 */

enum {
    PFX_F2 = 1 << 0, /* bnd (or repne) */
    PFX_67 = 1 << 1, /* address size */
    PFX_2E = 1 << 2, /* cs / branch-not-taken hint */
    PFX_3E = 1 << 3, /* ds / branch-taken hint / notrack */
    PFX_66 = 1 << 4, /* operand size */
    PFX_REX = 1 << 5,
    PFX_OTHER = 1 << 6,
};

/* Where the opcode of the direct branch IN starts in B. */
static size_t
br_opcode_start(const uint8_t* b, const arch_insn_t* in)
{
    uint8_t op = b[in->rel_off - 1];

    if ((op >= 0x80 && op <= 0x8f) || op == 0xf8)
        return (size_t)in->rel_off - 2; /* 0f 8x, c7 f8 */
    return (size_t)in->rel_off - 1;
}

/* The set of PFX_* prefixes in front of the opcode of the direct branch IN. */
static int
br_prefixes(const uint8_t* b, const arch_insn_t* in)
{
    size_t i, n = br_opcode_start(b, in);
    int m = 0;

    for (i = 0; i < n; i++)
        switch (b[i]) {
        case 0xf2: m |= PFX_F2; break;
        case 0x67: m |= PFX_67; break;
        case 0x2e: m |= PFX_2E; break;
        case 0x3e: m |= PFX_3E; break;
        case 0x66: m |= PFX_66; break;
        default: m |= (b[i] & 0xf0) == 0x40 ? PFX_REX : PFX_OTHER; break;
        }
    return m;
}

/*
 * What the direct branch IN in B does, independent of its size: 0x70 + cc for jcc (rel8
 * or rel32), 0xe9 for jmp (rel8 or rel32), 0xe8 call, 0xe0..0xe3 loop, loopcc, jrcxz,
 * 0xc7f8 xbegin.
 */
static int
br_identity(const uint8_t* b, const arch_insn_t* in)
{
    uint8_t op = b[in->rel_off - 1];

    if (op >= 0x80 && op <= 0x8f)
        return 0x70 | (op & 0xf);
    if (op == 0xeb)
        return 0xe9;
    if (op == 0xf8)
        return 0xc7f8;
    return op;
}

static int
is_loop_op(int identity)
{
    return identity >= 0xe0 && identity <= 0xe3;
}

/* True when the legacy prefixes of the instruction at B include 67 (address size). */
static int
has_addr32(const uint8_t* b)
{
    static const uint8_t legacy[]
        = { 0xf0, 0xf2, 0xf3, 0x26, 0x2e, 0x36, 0x3e, 0x64, 0x65, 0x66, 0x67 };
    size_t i;

    for (i = 0; i < ARCH_MAX_INSN && memchr(legacy, b[i], sizeof(legacy)) != NULL; i++)
        if (b[i] == 0x67)
            return 1;
    return 0;
}

/* The rel32 reach, as a predicate on a 64-bit distance. */
static int
fits32(int64_t d)
{
    return d >= INT32_MIN && d <= INT32_MAX;
}

/*****************************************************************************
 * Relocation round trip: the table
 */

typedef struct reloc_case {
    const char* name; /* what the bytes are */
    const uint8_t* bytes; /* the instruction */
    size_t n; /* its length */
    uint8_t kind; /* expected arch_kind_t */
} reloc_case_t;

static const reloc_case_t reloc_cases[] = {
    /* Direct jumps. */
    { "jmp8 fwd", B("\xeb\x10"), ARCH_KIND_JMP },
    { "jmp8 back", B("\xeb\xf0"), ARCH_KIND_JMP },
    { "jmp8 self", B("\xeb\xfe"), ARCH_KIND_JMP },
    { "jmp32", B("\xe9\x00\x01\x00\x00"), ARCH_KIND_JMP },
    { "jmp32 back", B("\xe9\x00\xff\xff\xff"), ARCH_KIND_JMP },
    { "bnd jmp32", B("\xf2\xe9\x00\x01\x00\x00"), ARCH_KIND_JMP },
    { "bnd jmp8", B("\xf2\xeb\x10"), ARCH_KIND_JMP },
    { "66 jmp32", B("\x66\xe9\x00\x01\x00\x00"), ARCH_KIND_JMP },
    { "rex.w jmp32", B("\x48\xe9\x00\x01\x00\x00"), ARCH_KIND_JMP },
    /* Conditional jumps, short and near, with hints. */
    { "jo8", B("\x70\x10"), ARCH_KIND_JCC },
    { "jb8", B("\x72\x10"), ARCH_KIND_JCC },
    { "je8", B("\x74\x10"), ARCH_KIND_JCC },
    { "jp8", B("\x7a\x10"), ARCH_KIND_JCC },
    { "jg8 back", B("\x7f\xf0"), ARCH_KIND_JCC },
    { "jo32", B("\x0f\x80\x00\x01\x00\x00"), ARCH_KIND_JCC },
    { "je32", B("\x0f\x84\x00\x01\x00\x00"), ARCH_KIND_JCC },
    { "jl32 back", B("\x0f\x8c\x00\xff\xff\xff"), ARCH_KIND_JCC },
    { "jle32", B("\x0f\x8e\x00\x01\x00\x00"), ARCH_KIND_JCC },
    { "ds je8 (hint)", B("\x3e\x74\x10"), ARCH_KIND_JCC },
    { "cs jne32 (hint)", B("\x2e\x0f\x85\x00\x01\x00\x00"), ARCH_KIND_JCC },
    { "bnd je32", B("\xf2\x0f\x84\x00\x01\x00\x00"), ARCH_KIND_JCC },
    { "bnd jne8", B("\xf2\x75\x10"), ARCH_KIND_JCC },
    { "66 je32", B("\x66\x0f\x84\x00\x01\x00\x00"), ARCH_KIND_JCC },
    /* Calls. */
    { "call", B("\xe8\x00\x01\x00\x00"), ARCH_KIND_CALL },
    { "call back", B("\xe8\xf0\xff\xff\xff"), ARCH_KIND_CALL },
    { "call next", B("\xe8\x00\x00\x00\x00"), ARCH_KIND_CALL },
    { "bnd call", B("\xf2\xe8\x00\x01\x00\x00"), ARCH_KIND_CALL },
    /* Loops and count-register jumps: rel8 only. */
    { "loop", B("\xe2\xf0"), ARCH_KIND_JCC },
    { "loope", B("\xe1\x10"), ARCH_KIND_JCC },
    { "loopne", B("\xe0\x10"), ARCH_KIND_JCC },
    { "jrcxz", B("\xe3\x10"), ARCH_KIND_JCC },
    { "jecxz", B("\x67\xe3\x10"), ARCH_KIND_JCC },
    { "loopl (addr32)", B("\x67\xe2\xf0"), ARCH_KIND_JCC },
    /* Transactional begin: rel32 to the abort handler. */
    { "xbegin", B("\xc7\xf8\x00\x01\x00\x00"), ARCH_KIND_JCC },
    { "xbegin back", B("\xc7\xf8\x00\xff\xff\xff"), ARCH_KIND_JCC },
    /* Rip-relative operands. */
    { "mov rax,[rip+x]", B("\x48\x8b\x05\x00\x10\x00\x00"), ARCH_KIND_SEQ },
    { "mov r8,[rip+x]", B("\x4c\x8b\x05\x00\x10\x00\x00"), ARCH_KIND_SEQ },
    { "lea rdi,[rip-x]", B("\x48\x8d\x3d\x00\xff\xff\xff"), ARCH_KIND_SEQ },
    { "cmp qword [rip+x],7", B("\x48\x83\x3d\x00\x10\x00\x00\x07"), ARCH_KIND_SEQ },
    { "cmp dword [rip+x],imm32", B("\x81\x3d\x00\x10\x00\x00\x78\x56\x34\x12"),
        ARCH_KIND_SEQ },
    { "movq $imm32,[rip+x]", B("\x48\xc7\x05\x00\x10\x00\x00\x78\x56\x34\x12"),
        ARCH_KIND_SEQ },
    { "movw $imm16,[rip+x]", B("\x66\xc7\x05\x00\x10\x00\x00\x34\x12"), ARCH_KIND_SEQ },
    { "movb $imm8,[rip+x]", B("\xc6\x05\x00\x10\x00\x00\x5a"), ARCH_KIND_SEQ },
    { "test byte [rip+x],1", B("\xf6\x05\x00\x10\x00\x00\x01"), ARCH_KIND_SEQ },
    { "lock add qword [rip+x],1", B("\xf0\x48\x83\x05\x00\x10\x00\x00\x01"),
        ARCH_KIND_SEQ },
    { "fs mov eax,[rip+x]", B("\x64\x8b\x05\x00\x10\x00\x00"), ARCH_KIND_SEQ },
    { "movsd xmm0,[rip+x]", B("\xf2\x0f\x10\x05\x00\x10\x00\x00"), ARCH_KIND_SEQ },
    { "vmovdqu ymm1,[rip+x]", B("\xc5\xfe\x6f\x0d\x00\x10\x00\x00"), ARCH_KIND_SEQ },
    { "vpshufd xmm0,[rip+x],0x1b", B("\xc5\xf9\x70\x05\x00\x10\x00\x00\x1b"),
        ARCH_KIND_SEQ },
    { "vmovups zmm0,[rip+x]", B("\x62\xf1\x7c\x48\x10\x05\x00\x10\x00\x00"),
        ARCH_KIND_SEQ },
    { "vpshufd zmm0,[rip+x],0x1b", B("\x62\xf1\x7d\x48\x70\x05\x00\x10\x00\x00\x1b"),
        ARCH_KIND_SEQ },
    { "eip-relative mov eax,[eip+x]", B("\x67\x8b\x05\x00\x10\x00\x00"), ARCH_KIND_SEQ },
    /* Indirect branches through rip-relative memory. */
    { "jmp *x(%rip)", B("\xff\x25\x00\x10\x00\x00"), ARCH_KIND_JMP_IND },
    { "call *x(%rip)", B("\xff\x15\x00\x10\x00\x00"), ARCH_KIND_CALL_IND },
    { "notrack jmp *x(%rip)", B("\x3e\xff\x25\x00\x10\x00\x00"), ARCH_KIND_JMP_IND },
    { "bnd jmp *x(%rip)", B("\xf2\xff\x25\x00\x10\x00\x00"), ARCH_KIND_JMP_IND },
    /* Copied verbatim. */
    { "push rbp", B("\x55"), ARCH_KIND_SEQ },
    { "pop rbp", B("\x5d"), ARCH_KIND_SEQ },
    { "push r12", B("\x41\x54"), ARCH_KIND_SEQ },
    { "ret", B("\xc3"), ARCH_KIND_RET },
    { "ret $8", B("\xc2\x08\x00"), ARCH_KIND_RET },
    { "bnd ret", B("\xf2\xc3"), ARCH_KIND_RET },
    { "jmp *%rax", B("\xff\xe0"), ARCH_KIND_JMP_IND },
    { "notrack jmp *%rax", B("\x3e\xff\xe0"), ARCH_KIND_JMP_IND },
    { "call *%rax", B("\xff\xd0"), ARCH_KIND_CALL_IND },
    { "call *(%rax,%rbx,8)", B("\xff\x14\xd8"), ARCH_KIND_CALL_IND },
    { "jmp *0x10(%rax)", B("\xff\x60\x10"), ARCH_KIND_JMP_IND },
    { "mov rax,[abs32] (no rip)", B("\x48\x8b\x04\x25\x00\x10\x00\x00"), ARCH_KIND_SEQ },
    { "mov rax,[rsp+8]", B("\x48\x8b\x44\x24\x08"), ARCH_KIND_SEQ },
    { "movabs rax,imm64", B("\x48\xb8\x88\x77\x66\x55\x44\x33\x22\x11"), ARCH_KIND_SEQ },
    { "endbr64", B("\xf3\x0f\x1e\xfa"), ARCH_KIND_ENDBR },
    { "syscall", B("\x0f\x05"), ARCH_KIND_SYSCALL },
    { "nopl 0(%rax,%rax)", B("\x0f\x1f\x44\x00\x00"), ARCH_KIND_NOP },
    { "ud2", B("\x0f\x0b"), ARCH_KIND_HALT },
    { "xabort", B("\xc6\xf8\x01"), ARCH_KIND_SEQ },
};

/* Where the relocated copy goes, relative to OLD. */
static const int64_t new_addr_moves[]
    = { 0, 0x80, -0x80, 0x12345, GIB, -GIB, 3 * GIB, -3 * GIB };

/* The new branch target, relative to the new address (0: the original target). */
static const int64_t new_target_moves[]
    = { 0, 0x10, -0x20, 0x7f, -0x7e, 0x1000, -0x1000, GIB, -GIB, 3 * GIB, -3 * GIB };

/*
 * Check a relocated direct branch (OUT, RC bytes at NEW_ADDR) against the original IN
 * (bytes B): it goes to NEW_TARGET, keeps its condition and meaningful prefixes, and has
 * the shortest length allowed.
 */
static void
check_branch(const reloc_case_t* c, const arch_insn_t* in, const uint8_t* out, int rc,
    uint64_t new_addr, uint64_t new_target, int short_ok)
{
    const int id = br_identity(c->bytes, in);
    const int pin = br_prefixes(c->bytes, in);
    const int keep = is_loop_op(id) ? (pin & PFX_67) : id == 0xc7f8 ? 0 : (pin & PFX_F2);
    const int p = keep ? 1 : 0;
    int64_t d8 = (int64_t)(new_target - (new_addr + (uint64_t)p + 2));
    int can_short = short_ok && d8 >= -128 && d8 <= 127 && id != 0xe8 && id != 0xc7f8;
    int long_len = id == 0xe9 ? 5
        : id == 0xe8          ? 5
        : id == 0xc7f8        ? 6
        : is_loop_op(id)      ? 9
                              : 6;
    arch_insn_t o1, o2, o3;

    EXPECT(rc == (can_short ? 2 : long_len) + p,
        "%s: at %+lld to %+lld short_ok %d: %d bytes", c->name,
        (long long)(new_addr - OLD), (long long)(new_target - new_addr), short_ok, rc);
    EXPECT(arch_decode(out, (size_t)rc, new_addr, &o1) == 0, "%s: decode", c->name);
    EXPECT(o1.kind == c->kind && (o1.flags & ARCH_F_BRANCH_REL), "%s: kind %d", c->name,
        o1.kind);
    EXPECT(br_identity(out, &o1) == id, "%s: became %#x", c->name, br_identity(out, &o1));
    EXPECT(br_prefixes(out, &o1) == keep, "%s: prefixes %#x, want %#x", c->name,
        br_prefixes(out, &o1), keep);
    if (!is_loop_op(id) || can_short) {
        EXPECT(o1.len == rc, "%s: one instruction expected", c->name);
        EXPECT(o1.target == new_target, "%s: target %#llx, want %#llx", c->name,
            (unsigned long long)o1.target, (unsigned long long)new_target);
        return;
    }
    /* `op +2; jmp8 +5; jmp32 target`: taken goes to target, not taken to the end. */
    EXPECT(o1.len == p + 2 && o1.target == new_addr + (uint64_t)p + 4, "%s: loop part",
        c->name);
    EXPECT(arch_decode(out + o1.len, (size_t)rc - o1.len, new_addr + o1.len, &o2) == 0
            && o2.kind == ARCH_KIND_JMP && o2.len == 2
            && o2.target == new_addr + (uint64_t)rc,
        "%s: jmp8 part", c->name);
    EXPECT(
        arch_decode(out + o1.len + 2, (size_t)rc - o1.len - 2, new_addr + o1.len + 2, &o3)
                == 0
            && o3.kind == ARCH_KIND_JMP && o3.len == 5 && o3.target == new_target
            && o1.len + 2 + 5 == rc,
        "%s: jmp32 part: target %#llx, want %#llx", c->name,
        (unsigned long long)o3.target, (unsigned long long)new_target);
}

/* Relocate row C (decoded as IN) to NEW_ADDR with NEW_TARGET and check the result. */
static void
check_reloc(const reloc_case_t* c, const arch_insn_t* in, uint64_t new_addr,
    uint64_t new_target, int short_ok)
{
    uint8_t out[ARCH_MAX_RELOC + 8];
    arch_insn_t o;
    int rc;
    size_t i;

    row_count++;
    memset(out, 0xcc, sizeof(out));
    rc = arch_reloc_insn(
        c->bytes, in, new_addr, new_target, short_ok, out, ARCH_MAX_RELOC);
    EXPECT(rc == QP_ERANGE || (rc > 0 && rc <= ARCH_MAX_RELOC), "%s: rc %d", c->name, rc);
    EXPECT(out[ARCH_MAX_RELOC] == 0xcc, "%s: wrote past CAP", c->name);

    if (in->flags & ARCH_F_BRANCH_REL) {
        /* Every target here is either within 1 GiB of the branch or 3 GiB away. */
        int far = !fits32((int64_t)(new_target - new_addr));

        EXPECT((rc == QP_ERANGE) == far, "%s: at %+lld to %+lld: rc %d", c->name,
            (long long)(new_addr - OLD), (long long)(new_target - new_addr), rc);
        if (rc > 0)
            check_branch(c, in, out, rc, new_addr, new_target, short_ok);
        return;
    }
    if (in->flags & ARCH_F_RIPREL) {
        int64_t d = (int64_t)(in->target - (new_addr + in->len));
        int eip = has_addr32(c->bytes); /* truncated to 32 bits: always reachable */

        EXPECT((rc == QP_ERANGE) == (!eip && !fits32(d)), "%s: at %+lld: rc %d", c->name,
            (long long)(new_addr - OLD), rc);
        if (rc < 0)
            return;
        EXPECT(rc == in->len, "%s: length %d, want %d", c->name, rc, in->len);
        EXPECT(arch_decode(out, (size_t)rc, new_addr, &o) == 0, "%s: decode", c->name);
        EXPECT(o.kind == in->kind && o.flags == in->flags && o.len == in->len
                && o.rel_off == in->rel_off && o.rel_size == 4,
            "%s: decodes differently", c->name);
        EXPECT(o.target == in->target, "%s: at %+lld: addresses %#llx, want %#llx",
            c->name, (long long)(new_addr - OLD), (unsigned long long)o.target,
            (unsigned long long)in->target);
        for (i = 0; i < in->len; i++)
            if (i < in->rel_off || i >= in->rel_off + 4u)
                EXPECT(out[i] == c->bytes[i], "%s: byte %zu changed", c->name, i);
        return;
    }
    EXPECT(rc == in->len && memcmp(out, c->bytes, in->len) == 0,
        "%s: not copied verbatim", c->name);
    EXPECT(arch_decode(out, (size_t)rc, new_addr, &o) == 0 && o.kind == in->kind,
        "%s: decode", c->name);
}

START_TEST(test_emit_reloc_roundtrip)
{
    size_t r, a, t;
    int s;

    ROWS_BEGIN();
    for (r = 0; r < NELEM(reloc_cases); r++) {
        const reloc_case_t* c = &reloc_cases[r];
        arch_insn_t in;

        row_count++;
        if (arch_decode(c->bytes, c->n, OLD, &in) != 0 || in.len != c->n
            || in.kind != c->kind) {
            fprintf(stderr, "%s: table row does not decode as described\n", c->name);
            row_failures++;
            continue;
        }
        for (a = 0; a < NELEM(new_addr_moves); a++) {
            uint64_t new_addr = OLD + (uint64_t)new_addr_moves[a];

            for (t = 0; t < NELEM(new_target_moves); t++) {
                uint64_t new_target = new_target_moves[t] == 0
                    ? in.target
                    : new_addr + (uint64_t)new_target_moves[t];

                if (!(in.flags & ARCH_F_BRANCH_REL) && t > 0)
                    break; /* the new target only matters for branches */
                for (s = 0; s <= 1; s++)
                    check_reloc(c, &in, new_addr, new_target, s);
            }
        }
    }
    ROWS_END();
}
END_TEST

/*
 * The edges of rel8 and rel32 reach, for jmp, jcc, bnd jmp and loop: the distance is
 * counted from the end of the instruction that is actually emitted.
 */
START_TEST(test_emit_reloc_reach_edges)
{
    static const struct {
        const char* name;
        const uint8_t* bytes;
        size_t n;
        int short_len; /* with the target in rel8 reach */
        int long_len; /* otherwise */
    } cases[] = {
        { "jmp8", B("\xeb\x00"), 2, 5 },
        { "je32", B("\x0f\x84\x00\x00\x00\x00"), 2, 6 },
        { "bnd jmp32", B("\xf2\xe9\x00\x00\x00\x00"), 3, 6 },
        { "loop", B("\xe2\x00"), 2, 9 },
        { "jecxz", B("\x67\xe3\x00"), 3, 10 },
    };
    const uint64_t at = 0x700000001000ull;
    uint8_t out[ARCH_MAX_RELOC];
    arch_insn_t in, o;
    size_t i;
    int rc;

    for (i = 0; i < NELEM(cases); i++) {
        uint64_t s_end = at + (uint64_t)cases[i].short_len;
        uint64_t l_end = at + (uint64_t)cases[i].long_len;

        ck_assert_int_eq(arch_decode(cases[i].bytes, cases[i].n, OLD, &in), 0);
        /* rel8: -128 and +127 fit, -129 and +128 do not. */
        ck_assert_int_eq(
            arch_reloc_insn(cases[i].bytes, &in, at, s_end + 127, 1, out, sizeof(out)),
            cases[i].short_len);
        ck_assert_int_eq(
            arch_reloc_insn(cases[i].bytes, &in, at, s_end - 128, 1, out, sizeof(out)),
            cases[i].short_len);
        ck_assert_int_eq(arch_decode(out, sizeof(out), at, &o), 0);
        ck_assert_uint_eq(o.target, s_end - 128);
        ck_assert_int_eq(
            arch_reloc_insn(cases[i].bytes, &in, at, s_end + 128, 1, out, sizeof(out)),
            cases[i].long_len);
        ck_assert_int_eq(
            arch_reloc_insn(cases[i].bytes, &in, at, s_end - 129, 1, out, sizeof(out)),
            cases[i].long_len);
        /* Without SHORT_OK the long form, even to a near target. */
        ck_assert_int_eq(
            arch_reloc_insn(cases[i].bytes, &in, at, s_end, 0, out, sizeof(out)),
            cases[i].long_len);
        /* rel32: INT32_MAX and INT32_MIN fit, one more does not. */
        rc = arch_reloc_insn(
            cases[i].bytes, &in, at, l_end + INT32_MAX, 1, out, sizeof(out));
        ck_assert_int_eq(rc, cases[i].long_len);
        /* The loops end in a jmp32, the others are one instruction. */
        if (rc >= 9)
            ck_assert_int_eq(arch_decode(out + rc - 5, 5, l_end - 5, &o), 0);
        else
            ck_assert_int_eq(arch_decode(out, (size_t)rc, at, &o), 0);
        ck_assert_uint_eq(o.target, l_end + INT32_MAX);
        ck_assert_int_eq(arch_reloc_insn(cases[i].bytes, &in, at,
                             l_end + (uint64_t)INT32_MIN, 1, out, sizeof(out)),
            cases[i].long_len);
        ck_assert_int_eq(arch_reloc_insn(cases[i].bytes, &in, at,
                             l_end + (uint64_t)INT32_MAX + 1, 1, out, sizeof(out)),
            QP_ERANGE);
        ck_assert_int_eq(arch_reloc_insn(cases[i].bytes, &in, at,
                             l_end + (uint64_t)INT32_MIN - 1, 1, out, sizeof(out)),
            QP_ERANGE);
    }
}
END_TEST

/* The disp32 of a rip-relative operand at the edges of its reach. */
START_TEST(test_emit_reloc_riprel_edges)
{
    /* cmpq $7, x(%rip): the disp is followed by an immediate. */
    const uint8_t b[] = { 0x48, 0x83, 0x3d, 0x00, 0x10, 0x00, 0x00, 0x07 };
    uint8_t out[ARCH_MAX_RELOC];
    arch_insn_t in, o;

    ck_assert_int_eq(arch_decode(b, sizeof(b), OLD, &in), 0);
    ck_assert_int_eq(in.rel_off, 3);
    ck_assert_int_eq(
        arch_reloc_insn(b, &in, in.target - INT32_MAX - 8, 0, 1, out, sizeof(out)), 8);
    ck_assert_int_eq(arch_decode(out, sizeof(b), in.target - INT32_MAX - 8, &o), 0);
    ck_assert_uint_eq(o.target, in.target);
    ck_assert_int_eq(out[7], 0x07);
    ck_assert_int_eq(
        arch_reloc_insn(b, &in, in.target - INT32_MAX - 9, 0, 1, out, sizeof(out)),
        QP_ERANGE);
    ck_assert_int_eq(
        arch_reloc_insn(b, &in, in.target + 0x80000000ull - 8, 0, 1, out, sizeof(out)),
        8);
    ck_assert_int_eq(
        arch_reloc_insn(b, &in, in.target + 0x80000000ull - 7, 0, 1, out, sizeof(out)),
        QP_ERANGE);
}
END_TEST

/* Bad arguments, too little room, and the forms that are refused. */
START_TEST(test_emit_reloc_rejects)
{
    const uint8_t mov[] = { 0x48, 0x8b, 0x05, 0x00, 0x10, 0x00, 0x00 };
    const uint8_t loop[] = { 0xe2, 0x10 };
    const uint8_t xbegin16[] = { 0x66, 0xc7, 0xf8, 0x10, 0x00 };
    const uint8_t ret[] = { 0xc3 };
    uint8_t out[ARCH_MAX_RELOC];
    arch_insn_t in, bad;

    ck_assert_int_eq(arch_decode(mov, sizeof(mov), OLD, &in), 0);
    ck_assert_int_eq(arch_reloc_insn(NULL, &in, OLD, 0, 1, out, sizeof(out)), QP_EINVAL);
    ck_assert_int_eq(arch_reloc_insn(mov, NULL, OLD, 0, 1, out, sizeof(out)), QP_EINVAL);
    ck_assert_int_eq(arch_reloc_insn(mov, &in, OLD, 0, 1, NULL, sizeof(out)), QP_EINVAL);
    ck_assert_int_eq(arch_reloc_insn(mov, &in, OLD, 0, 1, out, 6), QP_EINVAL);
    ck_assert_int_eq(arch_reloc_insn(mov, &in, OLD, 0, 1, out, 7), 7);
    bad = in;
    bad.len = 0;
    ck_assert_int_eq(arch_reloc_insn(mov, &bad, OLD, 0, 1, out, sizeof(out)), QP_EINVAL);
    bad = in;
    bad.rel_off = 5;
    ck_assert_int_eq(arch_reloc_insn(mov, &bad, OLD, 0, 1, out, sizeof(out)), QP_EINVAL);

    /* The loop expansion needs 9 bytes; the short form 2. */
    ck_assert_int_eq(arch_decode(loop, sizeof(loop), OLD, &in), 0);
    ck_assert_int_eq(arch_reloc_insn(loop, &in, OLD, OLD + 0x1000, 1, out, 8), QP_EINVAL);
    ck_assert_int_eq(arch_reloc_insn(loop, &in, OLD, OLD + 0x1000, 1, out, 9), 9);
    ck_assert_int_eq(arch_reloc_insn(loop, &in, OLD, OLD + 0x10, 1, out, 1), QP_EINVAL);
    ck_assert_int_eq(arch_reloc_insn(loop, &in, OLD, OLD + 0x10, 1, out, 2), 2);
    /* An arch_insn_t that does not describe the bytes. */
    ck_assert_int_eq(
        arch_reloc_insn(mov, &in, OLD, OLD + 0x10, 1, out, sizeof(out)), QP_EINVAL);

    /* xbegin with a 66 prefix: rel16 and a 16-bit abort address. */
    ck_assert_int_eq(arch_decode(xbegin16, sizeof(xbegin16), OLD, &in), 0);
    ck_assert_int_eq(
        arch_reloc_insn(xbegin16, &in, OLD, in.target, 1, out, sizeof(out)), QP_EUNSUPP);

    ck_assert_int_eq(arch_decode(ret, sizeof(ret), OLD, &in), 0);
    ck_assert_int_eq(arch_reloc_insn(ret, &in, OLD, 0, 1, out, 0), QP_EINVAL);
    ck_assert_int_eq(arch_reloc_insn(ret, &in, OLD, 0, 1, out, 1), 1);
}
END_TEST

/*
 * Random bytes: whatever decodes relocates (or is out of range) and decodes again to the
 * same thing at the new address.
 */
START_TEST(test_emit_reloc_random_bytes)
{
    uint64_t seed = 0x2545f4914f6cdd1dull;
    uint8_t buf[ARCH_MAX_INSN], out[ARCH_MAX_RELOC];
    int i, ok = 0;
    size_t j;

    for (i = 0; i < 100000; i++) {
        const uint64_t new_addr = OLD + 0x10000000u + (uint64_t)(i % 64);
        uint64_t new_target;
        arch_insn_t in, o;
        int rc;

        for (j = 0; j < sizeof(buf); j++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            buf[j] = (uint8_t)(seed >> 56);
        }
        if (arch_decode(buf, sizeof(buf), OLD, &in) != 0)
            continue;
        new_target = new_addr + (seed >> 40) % 0x400 - 0x200;
        rc = arch_reloc_insn(
            buf, &in, new_addr, new_target, (int)(seed & 1), out, sizeof(out));
        if ((in.flags & ARCH_F_RIPREL) && !has_addr32(buf)
            && !fits32((int64_t)(in.target - (new_addr + in.len)))) {
            ck_assert_int_eq(rc, QP_ERANGE);
            continue;
        }
        if (in.flags & ARCH_F_RIPREL)
            ck_assert_int_eq(rc, in.len);
        if (rc == QP_EUNSUPP) /* 66 xbegin only */
            continue;
        ck_assert_int_gt(rc, 0);
        ck_assert_int_eq(arch_decode(out, (size_t)rc, new_addr, &o), 0);
        ck_assert_int_eq(o.kind, in.kind);
        if (in.flags & ARCH_F_BRANCH_REL) {
            if (o.len == rc)
                ck_assert_uint_eq(o.target, new_target);
        } else {
            ck_assert_int_eq(o.len, in.len);
            ck_assert_int_eq(o.flags, in.flags);
            ck_assert_uint_eq(o.target, in.target);
        }
        ok++;
    }
    ck_assert(ok > 1000);
}
END_TEST

/*****************************************************************************
 * Emitters
 */

START_TEST(test_emit_jmp_call)
{
    const uint64_t at = 0x401000, far = at + 3 * (uint64_t)GIB;
    const int64_t moves[]
        = { 5, 0, -0x1000, 0x12345678, -GIB, INT32_MAX + 5ll, INT32_MIN + 5ll };
    uint8_t out[16];
    arch_insn_t o;
    size_t i;

    for (i = 0; i < NELEM(moves); i++) {
        uint64_t t = at + (uint64_t)moves[i];

        ck_assert_int_eq(arch_emit_jmp(at, t, out, sizeof(out)), 5);
        ck_assert_int_eq(out[0], 0xe9);
        ck_assert_int_eq(arch_decode(out, 5, at, &o), 0);
        ck_assert_int_eq(o.kind, ARCH_KIND_JMP);
        ck_assert_int_eq(o.len, 5);
        ck_assert_uint_eq(o.target, t);

        ck_assert_int_eq(arch_emit_call(at, t, out, sizeof(out)), 5);
        ck_assert_int_eq(out[0], 0xe8);
        ck_assert_int_eq(arch_decode(out, 5, at, &o), 0);
        ck_assert_int_eq(o.kind, ARCH_KIND_CALL);
        ck_assert_uint_eq(o.target, t);
    }
    ck_assert_int_eq(arch_emit_jmp(at, far, out, sizeof(out)), QP_ERANGE);
    ck_assert_int_eq(arch_emit_call(at, far, out, sizeof(out)), QP_ERANGE);
    ck_assert_int_eq(arch_emit_jmp(far, at, out, sizeof(out)), QP_ERANGE);
    ck_assert_int_eq(
        arch_emit_jmp(at, at + INT32_MAX + 6ull, out, sizeof(out)), QP_ERANGE);
    ck_assert_int_eq(arch_emit_jmp(at, at, out, 4), QP_EINVAL);
    ck_assert_int_eq(arch_emit_call(at, at, NULL, 5), QP_EINVAL);
}
END_TEST

START_TEST(test_emit_jcc_conds)
{
    static const struct {
        int cond;
        uint8_t cc;
    } conds[] = {
        { ARCH_COND_A, 0x7 },
        { ARCH_COND_AE, 0x3 },
        { ARCH_COND_B, 0x2 },
        { ARCH_COND_BE, 0x6 },
        { ARCH_COND_E, 0x4 },
        { ARCH_COND_NE, 0x5 },
        { ARCH_COND_G, 0xf },
        { ARCH_COND_GE, 0xd },
        { ARCH_COND_L, 0xc },
        { ARCH_COND_LE, 0xe },
    };
    const uint64_t at = 0x401000, t = 0x400800;
    uint8_t out[16];
    arch_insn_t o;
    arch_ops_t ops;
    size_t i;

    for (i = 0; i < NELEM(conds); i++) {
        ck_assert_int_eq(arch_emit_jcc(at, conds[i].cond, t, out, sizeof(out)), 6);
        ck_assert_int_eq(out[0], 0x0f);
        ck_assert_int_eq(out[1], 0x80 | conds[i].cc);
        ck_assert_int_eq(arch_decode(out, 6, at, &o), 0);
        ck_assert_int_eq(o.kind, ARCH_KIND_JCC);
        ck_assert_int_eq(o.len, 6);
        ck_assert_uint_eq(o.target, t);
        ck_assert_int_eq(arch_decode_ops(out, 6, at, &ops), 0);
        ck_assert_int_eq(ops.op, ARCH_OP_JCC);
        ck_assert_int_eq(ops.cond, conds[i].cond);
    }
    ck_assert_int_eq(arch_emit_jcc(at, ARCH_COND_NONE, t, out, sizeof(out)), QP_EINVAL);
    ck_assert_int_eq(arch_emit_jcc(at, ARCH_COND_OTHER, t, out, sizeof(out)), QP_EINVAL);
    ck_assert_int_eq(arch_emit_jcc(at, -1, t, out, sizeof(out)), QP_EINVAL);
    ck_assert_int_eq(arch_emit_jcc(at, 99, t, out, sizeof(out)), QP_EINVAL);
    ck_assert_int_eq(arch_emit_jcc(at, ARCH_COND_E, t, out, 5), QP_EINVAL);
    ck_assert_int_eq(
        arch_emit_jcc(at, ARCH_COND_E, at + 3 * (uint64_t)GIB, out, sizeof(out)),
        QP_ERANGE);
}
END_TEST

/* add|sub %REG,COUNTER(%rip), every register but %rsp, every mode: the instruction
 * meant, nothing else (a loop counted from its induction variable, doc/qp.md). */
START_TEST(test_emit_counter_add_reg)
{
    const uint64_t at = 0x555555556000ull, ctr = at - GIB;
    const arch_isa_t *isa = arch_isa_host();
    uint8_t out[32];
    arch_ops_t ops;
    arch_insn_t o;

    for (uint8_t reg = 1; reg < ARCH_NREGS; reg++)
        for (int mode = ARCH_INC_PLAIN; mode <= ARCH_INC_SWITCH; mode++)
            for (int sub = 0; sub <= 1; sub++) {
                const int n = mode == ARCH_INC_PLAIN ? 7 : 8;
                int got = arch_emit_counter_add_reg(at, ctr, mode, reg, sub, out, sizeof(out));
                if (reg == ARCH_REG_SP) {
                    ck_assert_int_eq(got, QP_EINVAL);
                    continue;
                }
                ck_assert_int_eq(got, n);
                if (mode != ARCH_INC_PLAIN)
                    ck_assert_int_eq(out[0], mode == ARCH_INC_SWITCH ? ARCH_INC_PLAIN_BYTE
                                                                    : ARCH_INC_LOCK_BYTE);
                ck_assert_int_eq(arch_decode(out, (size_t)n, at, &o), 0);
                ck_assert_int_eq(o.len, n);
                ck_assert_int_eq(o.kind, ARCH_KIND_SEQ);
                ck_assert_int_eq(!!(o.flags & ARCH_F_LOCK), mode == ARCH_INC_ATOMIC);
                ck_assert_uint_eq(o.target, ctr);
                ck_assert_int_eq(arch_decode_ops(out, (size_t)n, at, &ops), 0);
                ck_assert_int_eq(ops.op, sub ? ARCH_OP_SUB : ARCH_OP_ADD);
                ck_assert_int_eq(ops.dst.kind, ARCH_OPND_MEM);
                ck_assert_int_eq(ops.dst.base, ARCH_REG_PC);
                ck_assert_int_eq(ops.dst.size, 8);
                ck_assert_uint_eq((uint64_t)ops.dst.disp, ctr);
                ck_assert_int_eq(ops.src.kind, ARCH_OPND_REG);
                ck_assert_int_eq(ops.src.reg, reg);
                ck_assert_int_eq(ops.src.size, 8);
                ck_assert_uint_eq(ops.regs_written, 0);
                /* At a point where the flags are live: saved around it. */
                arch_snip_ctx_t ctx = { .live_flags = ARCH_FLAGS_STATUS };
                uint8_t scratch[16];
                int save = arch_emit_flags_save(scratch, sizeof(scratch));
                int restore = arch_emit_flags_restore(scratch, sizeof(scratch));
                got = isa->emit_counter_add_reg_at(at, ctr, mode, reg, sub, &ctx, out,
                                                   sizeof(out));
                ck_assert_int_eq(got, save + n + restore);
                ck_assert_int_eq(arch_decode_ops(out + save, (size_t)n, at + (uint64_t)save,
                                                 &ops), 0);
                ck_assert_int_eq(ops.src.reg, reg);
                ck_assert_uint_eq((uint64_t)ops.dst.disp, ctr);
            }
    ck_assert_int_eq(arch_emit_counter_add_reg(at, ctr, 0, ARCH_REG_NONE, 0, out, 16), QP_EINVAL);
    ck_assert_int_eq(arch_emit_counter_add_reg(at, ctr, 0, ARCH_NREGS, 0, out, 16), QP_EINVAL);
    ck_assert_int_eq(arch_emit_counter_add_reg(at, ctr, 3, 1, 0, out, 16), QP_EINVAL);
    ck_assert_int_eq(arch_emit_counter_add_reg(at, ctr, 1, 1, 0, out, 7), QP_EINVAL);
    ck_assert_int_eq(arch_emit_counter_add_reg(at, at + 3 * (uint64_t)GIB, 0, 1, 1, out, 16),
                     QP_ERANGE);
    ck_assert_int_eq(isa->emit_counter_add_reg_at(at, ctr, 0, ARCH_REG_NONE, 0, NULL, out, 16),
                     QP_EINVAL);
}
END_TEST

START_TEST(test_emit_counter_inc)
{
    const uint64_t at = 0x555555556000ull;
    const uint64_t counters[] = { at + 0x1000, at - 0x1000, at + GIB, at - GIB };
    const uint8_t lock_incq[] = { 0xf0, 0x48, 0xff, 0x05 }; /* then disp32 */
    uint8_t out[16];
    arch_insn_t o;
    size_t i;
    int atomic;

    for (i = 0; i < NELEM(counters); i++)
        for (atomic = 0; atomic <= 1; atomic++) {
            const int n = atomic ? 8 : 7;
            uint32_t d;

            ck_assert_int_eq(
                arch_emit_counter_inc(at, counters[i], atomic, out, sizeof(out)), n);
            ck_assert_mem_eq(out, &lock_incq[atomic ? 0 : 1], (size_t)n - 4);
            d = (uint32_t)(counters[i] - (at + (uint64_t)n));
            ck_assert_int_eq(out[n - 4], d & 0xff);
            ck_assert_int_eq(out[n - 1], d >> 24);
            ck_assert_int_eq(arch_decode(out, (size_t)n, at, &o), 0);
            ck_assert_int_eq(o.len, n);
            ck_assert_int_eq(o.kind, ARCH_KIND_SEQ);
            ck_assert(o.flags & ARCH_F_RIPREL);
            ck_assert_int_eq(!!(o.flags & ARCH_F_LOCK), atomic);
            ck_assert_uint_eq(o.target, counters[i]);
            /* inc writes every status flag but CF. */
            ck_assert_int_eq(o.flags_written, ARCH_FLAGS_STATUS & ~ARCH_FLAG_CF);
        }
    ck_assert_int_eq(
        arch_emit_counter_inc(at, at + 3 * (uint64_t)GIB, 0, out, sizeof(out)),
        QP_ERANGE);
    ck_assert_int_eq(
        arch_emit_counter_inc(at, at - 3 * (uint64_t)GIB, 1, out, sizeof(out)),
        QP_ERANGE);
    ck_assert_int_eq(arch_emit_counter_inc(at, at, 0, out, 6), QP_EINVAL);
    ck_assert_int_eq(arch_emit_counter_inc(at, at, 1, out, 7), QP_EINVAL);
    ck_assert_int_eq(arch_emit_counter_inc(at, at, 1, NULL, 8), QP_EINVAL);
    ck_assert_int_eq(arch_emit_counter_inc(at, at, 3, out, sizeof(out)), QP_EINVAL);
}
END_TEST

/*
 * The switchable increment: 8 bytes, plain until its first byte is rewritten, then the
 * locked form byte for byte; both decode as one increment of the same counter.
 */
START_TEST(test_emit_counter_switch)
{
    const uint64_t at = 0x555555556000ull, counter = at + 0x2000;
    uint8_t sw[16], locked[16];
    arch_insn_t o;

    ck_assert_int_eq(arch_emit_counter_inc(at, counter, ARCH_INC_SWITCH, sw, sizeof(sw)), 8);
    ck_assert_int_eq(arch_emit_counter_inc(at, counter, ARCH_INC_ATOMIC, locked, sizeof(locked)),
                     8);
    ck_assert_int_eq(sw[0], ARCH_INC_PLAIN_BYTE);
    ck_assert_mem_eq(sw + 1, locked + 1, 7);
    ck_assert_int_eq(arch_decode(sw, 8, at, &o), 0);
    ck_assert_int_eq(o.len, 8);
    ck_assert_int_eq(o.kind, ARCH_KIND_SEQ);
    ck_assert(!(o.flags & ARCH_F_LOCK));
    ck_assert_uint_eq(o.target, counter);
    ck_assert_int_eq(o.flags_written, ARCH_FLAGS_STATUS & ~ARCH_FLAG_CF);
    sw[0] = ARCH_INC_LOCK_BYTE;
    ck_assert_mem_eq(sw, locked, 8);
    ck_assert_int_eq(arch_decode(sw, 8, at, &o), 0);
    ck_assert(o.flags & ARCH_F_LOCK);
    ck_assert_uint_eq(o.target, counter);
}
END_TEST

/*
 * Flags save and restore: the exact bytes, and what they decode to. The pair moves %rsp
 * down by 128 (past the red zone) before pushfq and back up after popfq, with lea so the
 * flags are not touched.
 */
START_TEST(test_emit_flags_save_restore)
{
    const uint8_t save[] = { 0x48, 0x8d, 0x64, 0x24, 0x80, 0x9c };
    const uint8_t restore[] = { 0x9d, 0x48, 0x8d, 0xa4, 0x24, 0x80, 0x00, 0x00, 0x00 };
    const int sp = 5; /* rsp in ARCH_REG numbering */
    uint8_t out[16];
    arch_insn_t o;
    arch_ops_t ops;

    ck_assert_int_eq(arch_emit_flags_save(out, sizeof(out)), (int)sizeof(save));
    ck_assert_mem_eq(out, save, sizeof(save));
    ck_assert_int_eq(arch_decode_ops(out, sizeof(save), 0x1000, &ops), 0);
    ck_assert_int_eq(ops.op, ARCH_OP_LEA);
    ck_assert_int_eq(ops.dst.reg, sp);
    ck_assert_int_eq(ops.src.base, sp);
    ck_assert_int_eq(ops.src.index, ARCH_REG_NONE);
    ck_assert_int_eq(ops.src.disp, -128);
    ck_assert_int_eq(arch_decode(out, sizeof(save), 0x1000, &o), 0);
    ck_assert_int_eq(o.len, 5);
    ck_assert_int_eq(o.flags_written, 0);
    ck_assert_int_eq(arch_decode(out + 5, 1, 0x1005, &o), 0);
    ck_assert(o.flags & ARCH_F_READS_SP);
    ck_assert_int_eq(o.flags_read & ARCH_FLAGS_STATUS, ARCH_FLAGS_STATUS); /* pushfq */

    ck_assert_int_eq(arch_emit_flags_restore(out, sizeof(out)), (int)sizeof(restore));
    ck_assert_mem_eq(out, restore, sizeof(restore));
    ck_assert_int_eq(arch_decode(out, sizeof(restore), 0x1000, &o), 0);
    ck_assert_int_eq(o.len, 1);
    ck_assert(o.flags & ARCH_F_READS_SP);
    ck_assert_int_eq(arch_decode_ops(out + 1, sizeof(restore) - 1, 0x1001, &ops), 0);
    ck_assert_int_eq(ops.op, ARCH_OP_LEA);
    ck_assert_int_eq(ops.dst.reg, sp);
    ck_assert_int_eq(ops.src.base, sp);
    ck_assert_int_eq(ops.src.disp, 128);
    ck_assert_int_eq(arch_decode(out + 1, sizeof(restore) - 1, 0x1001, &o), 0);
    ck_assert_int_eq(o.len, 8);
    ck_assert_int_eq(o.flags_written, 0);

    ck_assert_int_eq(arch_emit_flags_save(out, sizeof(save) - 1), QP_EINVAL);
    ck_assert_int_eq(arch_emit_flags_restore(out, sizeof(restore) - 1), QP_EINVAL);
    ck_assert_int_eq(arch_emit_flags_save(NULL, 16), QP_EINVAL);
    ck_assert_int_eq(arch_emit_flags_restore(NULL, 16), QP_EINVAL);
}
END_TEST

START_TEST(test_emit_nops)
{
    static const char* const intel[9] = {
        "\x90",
        "\x66\x90",
        "\x0f\x1f\x00",
        "\x0f\x1f\x40\x00",
        "\x0f\x1f\x44\x00\x00",
        "\x66\x0f\x1f\x44\x00\x00",
        "\x0f\x1f\x80\x00\x00\x00\x00",
        "\x0f\x1f\x84\x00\x00\x00\x00\x00",
        "\x66\x0f\x1f\x84\x00\x00\x00\x00\x00",
    };
    uint8_t out[80];
    arch_insn_t o;
    size_t len, i;

    for (len = 1; len <= 9; len++) {
        ck_assert_int_eq(arch_emit_nops(len, out, len), (int)len);
        ck_assert_mem_eq(out, intel[len - 1], len);
    }
    for (len = 0; len <= 64; len++) {
        memset(out, 0xcc, sizeof(out));
        ck_assert_int_eq(arch_emit_nops(len, out, sizeof(out)), (int)len);
        ck_assert_int_eq(out[len], 0xcc);
        ck_assert(arch_is_padding(out, len));
        for (i = 0; i < len; i += o.len) {
            ck_assert_int_eq(arch_decode(out + i, len - i, 0x1000 + i, &o), 0);
            ck_assert_int_eq(o.kind, ARCH_KIND_NOP);
            ck_assert_int_le(o.len, 9);
            ck_assert(o.len == 9 || i + o.len == len); /* the fewest instructions */
        }
    }
    ck_assert_int_eq(arch_emit_nops(0, NULL, 0), 0);
    ck_assert_int_eq(arch_emit_nops(10, out, 9), QP_EINVAL);
    ck_assert_int_eq(arch_emit_nops(1, NULL, 1), QP_EINVAL);
}
END_TEST

START_TEST(test_emit_trap)
{
    uint8_t out[4];
    arch_insn_t o;

    ck_assert_int_eq(arch_emit_trap(out, sizeof(out)), 2);
    ck_assert_mem_eq(out, "\x0f\x0b", 2);
    ck_assert_int_eq(arch_decode(out, 2, 0x1000, &o), 0);
    ck_assert_int_eq(o.kind, ARCH_KIND_HALT);
    ck_assert_int_eq(arch_emit_trap(out, 1), QP_EINVAL);
    ck_assert_int_eq(arch_emit_trap(NULL, 2), QP_EINVAL);
}
END_TEST

/*****************************************************************************
 * Execution: relocated and emitted code really runs
 */

/*
 * A small function, uint64_t f(uint64_t n), assembled into .rodata: a jrcxz, a loop whose
 * body has a short and a near jcc, a short and a near jmp, rip-relative loads and
 * compares (one with an immediate after the displacement), a rip-relative store of an
 * immediate, a call, and jecxz (which must keep its 67 prefix: %rcx is 1 << 32 there).
 * Its constants and scratch word follow the code and stay at the original place when the
 * code is relocated.
 */
__asm__(".pushsection .rodata\n"
        ".balign 16\n"
        ".globl check_emit_fn\n"
        ".hidden check_emit_fn\n"
        "check_emit_fn:\n"
        "    push %rbx\n"
        "    xor %eax, %eax\n"
        "    mov %rdi, %rcx\n"
        "    jrcxz .Lce_done\n"
        ".Lce_top:\n"
        "    add .Lce_k(%rip), %rax\n"
        "    cmpq $7, .Lce_k2(%rip)\n"
        "    jne .Lce_bad\n"
        "    test $1, %cl\n"
        "    {disp32} jz .Lce_even\n"
        "    add $100, %rax\n"
        "    jmp .Lce_next\n"
        ".Lce_even:\n"
        "    add $10000, %rax\n"
        "    {disp32} jmp .Lce_next\n"
        ".Lce_next:\n"
        "    loop .Lce_top\n"
        ".Lce_done:\n"
        "    movl $0x12345678, .Lce_scratch(%rip)\n"
        "    call .Lce_helper\n"
        "    lea .Lce_k(%rip), %rdx\n"
        "    add (%rdx), %rax\n"
        "    pop %rbx\n"
        "    ret\n"
        ".Lce_bad:\n"
        "    mov $-1, %rax\n"
        "    pop %rbx\n"
        "    ret\n"
        ".Lce_helper:\n"
        "    movabs $0x100000000, %rcx\n"
        "    jecxz .Lce_ecx0\n"
        "    mov $-2, %rax\n"
        "    ret\n"
        ".Lce_ecx0:\n"
        "    mov .Lce_scratch(%rip), %ebx\n"
        "    add %rbx, %rax\n"
        "    ret\n"
        ".globl check_emit_fn_end\n"
        ".hidden check_emit_fn_end\n"
        "check_emit_fn_end:\n"
        ".balign 8\n"
        ".Lce_k: .quad 3\n"
        ".Lce_k2: .quad 7\n"
        ".Lce_scratch: .quad 0\n"
        ".globl check_emit_blob_end\n"
        ".hidden check_emit_blob_end\n"
        "check_emit_blob_end:\n"
        ".popsection\n");

extern const uint8_t check_emit_fn[], check_emit_fn_end[], check_emit_blob_end[];

typedef uint64_t (*fn1_t)(uint64_t);

/* What check_emit_fn computes. */
static uint64_t
fn_expected(uint64_t n)
{
    uint64_t r = 0, c;

    for (c = n; c > 0; c--)
        r += 3 + ((c & 1) ? 100 : 10000);
    return r + 0x12345678 + 3;
}

#define PAGE 4096u

/* An RWX mapping of LEN bytes near HINT (or anywhere), or NULL when refused. */
static uint8_t*
map_rwx(void* hint, size_t len)
{
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
    void* p = MAP_FAILED;

    if (hint != NULL)
        p = mmap(hint, len, PROT_READ | PROT_WRITE | PROT_EXEC,
            MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED)
        p = mmap(NULL, len, PROT_READ | PROT_WRITE | PROT_EXEC,
            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : (uint8_t*)p;
}

static fn1_t
as_fn1(const uint8_t* p)
{
    return (fn1_t)(uintptr_t)p;
}

#define MAX_FN_INSNS 64

/*
 * A miniature editor: relocate the code [OLD_ADDR, OLD_ADDR + N) (bytes CODE) to
 * NEW_ADDR, writing DST. Branch targets inside the code follow their instruction; other
 * targets and rip-relative data stay where they are. With SHORT_OK, branch sizes are
 * relaxed from the long forms until they no longer change. Returns the size or a
 * negative QP_E* code.
 */
static int
reloc_code(const uint8_t* code, size_t n, uint64_t old_addr, uint64_t new_addr,
    int short_ok, uint8_t* dst /*OUT*/, size_t cap)
{
    arch_insn_t ins[MAX_FN_INSNS];
    uint64_t pos[MAX_FN_INSNS + 1]; /* new address of each instruction, and the end */
    size_t off[MAX_FN_INSNS + 1]; /* old offset of each instruction, and N */
    uint8_t tmp[ARCH_MAX_RELOC];
    size_t k = 0, i, j, o = 0;
    int rc, pass, changed = 1;

    while (o < n) {
        if (k == MAX_FN_INSNS)
            return QP_EUNSUPP;
        QP_CHECK(arch_decode(code + o, n - o, old_addr + o, &ins[k]));
        off[k++] = o;
        o += ins[k - 1].len;
    }
    off[k] = n;
    /* Pass 0 sizes every branch long (target-independent); later passes relax. */
    for (pass = 0; changed && pass < 16; pass++) {
        uint64_t a = new_addr;

        changed = 0;
        for (i = 0; i < k; i++) {
            uint64_t t = ins[i].target;

            if (ins[i].flags & ARCH_F_BRANCH_REL)
                for (j = 0; j <= k; j++)
                    if (old_addr + off[j] == ins[i].target)
                        t = pass == 0 ? a : pos[j];
            rc = arch_reloc_insn(
                code + off[i], &ins[i], a, t, pass > 0 && short_ok, tmp, sizeof(tmp));
            QP_CHECK(rc);
            if (pass == 0 || pos[i] != a)
                changed = 1;
            pos[i] = a;
            a += (uint64_t)rc;
        }
        if (pos[k] != a)
            changed = 1;
        pos[k] = a;
    }
    if ((size_t)(pos[k] - new_addr) > cap)
        return QP_EINVAL;
    for (i = 0; i < k; i++) {
        uint64_t t = ins[i].target;

        if (ins[i].flags & ARCH_F_BRANCH_REL)
            for (j = 0; j <= k; j++)
                if (old_addr + off[j] == ins[i].target)
                    t = pos[j];
        rc = arch_reloc_insn(code + off[i], &ins[i], pos[i], t, short_ok,
            dst + (pos[i] - new_addr), cap - (pos[i] - new_addr));
        QP_CHECK(rc);
        if (pos[i] + (uint64_t)rc != pos[i + 1])
            return QP_EINVAL; /* the layout did not converge */
    }
    return (int)(pos[k] - new_addr);
}

START_TEST(test_emit_exec_relocated_fn)
{
    const size_t code_len = (size_t)(check_emit_fn_end - check_emit_fn);
    const size_t blob_len = (size_t)(check_emit_blob_end - check_emit_fn);
    static const uint64_t ns[] = { 0, 1, 2, 5, 10, 33 };
    uint8_t *a, *b;
    size_t i;
    int short_ok, rc;

    a = map_rwx(NULL, PAGE);
    if (a == NULL) {
        fprintf(stderr, "test_emit_exec_relocated_fn: no RWX mapping, skipped\n");
        return;
    }
    /* 512 MiB away: out of every rel8 reach, in rel32 reach of the data. */
    b = map_rwx(a + 0x20000000, PAGE);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_le(blob_len, PAGE);
    memcpy(a, check_emit_fn, blob_len);

    for (i = 0; i < NELEM(ns); i++)
        ck_assert_uint_eq(as_fn1(a)(ns[i]), fn_expected(ns[i]));
    for (short_ok = 0; short_ok <= 1; short_ok++) {
        memset(b, 0xcc, PAGE);
        rc = reloc_code(a, code_len, (uint64_t)(uintptr_t)a, (uint64_t)(uintptr_t)b,
            short_ok, b, PAGE);
        if (rc == QP_ERANGE) {
            fprintf(
                stderr, "test_emit_exec_relocated_fn: pages too far apart, skipped\n");
            break;
        }
        ck_assert_int_gt(rc, 0);
        /* The long forms grow the code (loop, jrcxz, jecxz, short jcc and jmp). */
        if (!short_ok)
            ck_assert_uint_gt((size_t)rc, code_len);
        for (i = 0; i < NELEM(ns); i++) {
            ck_assert_uint_eq(as_fn1(b)(ns[i]), fn_expected(ns[i]));
            ck_assert_uint_eq(as_fn1(a)(ns[i]), fn_expected(ns[i]));
        }
    }
    munmap(b, PAGE);
    munmap(a, PAGE);
}
END_TEST

typedef uint64_t (*fn3_t)(uint64_t, uint64_t, uint64_t*);

static fn3_t
as_fn3(const uint8_t* p)
{
    return (fn3_t)(uintptr_t)p;
}

/* Append LEN bytes to the code being built at *P. */
static void
put(uint8_t** p, const char* bytes, size_t len)
{
    memcpy(*p, bytes, len);
    *p += len;
}

#define PUT(p, s) put(p, s, sizeof(s) - 1)

/* The status flags pushfq reports: CF PF AF ZF SF OF. */
#define RFLAGS_STATUS 0x8d5u

static volatile uint64_t global_counter;

/*
 * Emitted code runs: f(a, b, out) compares a with b, saves the flags, clobbers them (xor,
 * two counter increments), restores them and returns them; it also reports a red-zone
 * word and %rsp before and after. The flags must equal those of a plain `cmp`.
 */
START_TEST(test_emit_exec_counter_flags)
{
    static const uint64_t pairs[][2] = { { 1, 2 }, { 2, 1 }, { 5, 5 },
        { 0x8000000000000000ull, 1 }, { 0, 0xffffffffffffffffull } };
    uint8_t *page, *p, *ref, *fn;
    uint64_t counter_addr, at, out[3];
    volatile uint64_t* counter;
    size_t i;
    int rc;

    page = map_rwx(NULL, PAGE);
    if (page == NULL) {
        fprintf(stderr, "test_emit_exec_counter_flags: no RWX mapping, skipped\n");
        return;
    }
    counter = (volatile uint64_t*)(page + 0xf00);
    counter_addr = (uint64_t)(uintptr_t)counter;

    /* The reference: cmp %rsi,%rdi; pushfq; pop %rax; ret. */
    ref = page;
    memcpy(ref, "\x48\x39\xf7\x9c\x58\xc3", 6);

    fn = p = page + 0x100;
    PUT(&p, "\x48\x39\xf7"); /* cmp %rsi,%rdi */
    PUT(&p, "\x48\x89\x7c\x24\xf8"); /* mov %rdi,-0x8(%rsp): in the red zone */
    PUT(&p, "\x49\x89\xe0"); /* mov %rsp,%r8 */
    rc = arch_emit_flags_save(p, 16);
    ck_assert_int_gt(rc, 0);
    p += rc;
    PUT(&p, "\x31\xc0"); /* xor %eax,%eax: ZF=1, CF=0 */
    at = (uint64_t)(uintptr_t)p;
    rc = arch_emit_counter_inc(at, counter_addr, 0, p, 16);
    ck_assert_int_eq(rc, 7);
    p += rc;
    at = (uint64_t)(uintptr_t)p;
    rc = arch_emit_counter_inc(at, counter_addr, 1, p, 16);
    ck_assert_int_eq(rc, 8);
    p += rc;
    at = (uint64_t)(uintptr_t)p;
    rc = arch_emit_counter_inc(at, counter_addr, ARCH_INC_SWITCH, p, 16);
    ck_assert_int_eq(rc, 8);
    p += rc;
    rc = arch_emit_flags_restore(p, 16);
    ck_assert_int_gt(rc, 0);
    p += rc;
    PUT(&p, "\x4c\x8b\x4c\x24\xf8"); /* mov -0x8(%rsp),%r9 */
    PUT(&p, "\x49\x89\xe2"); /* mov %rsp,%r10 */
    PUT(&p, "\x9c\x58"); /* pushfq; pop %rax */
    PUT(&p, "\x4c\x89\x0a"); /* mov %r9,(%rdx) */
    PUT(&p, "\x4c\x89\x52\x08"); /* mov %r10,0x8(%rdx) */
    PUT(&p, "\x4c\x89\x42\x10"); /* mov %r8,0x10(%rdx) */
    PUT(&p, "\xc3"); /* ret */

    *counter = 0;
    for (i = 0; i < NELEM(pairs); i++) {
        uint64_t want = as_fn3(ref)(pairs[i][0], pairs[i][1], NULL) & RFLAGS_STATUS;
        uint64_t got = as_fn3(fn)(pairs[i][0], pairs[i][1], out) & RFLAGS_STATUS;

        ck_assert_uint_eq(got, want);
        ck_assert_uint_eq(out[0], pairs[i][0]); /* the red zone survived */
        ck_assert_uint_eq(out[1], out[2]); /* %rsp is back */
    }
    ck_assert_uint_eq(*counter, 3 * NELEM(pairs));

    /* A counter in the program's data: emitted when in reach, QP_ERANGE otherwise. */
    at = (uint64_t)(uintptr_t)(page + 0x200);
    rc = arch_emit_counter_inc(
        at, (uint64_t)(uintptr_t)&global_counter, 1, page + 0x200, 16);
    if (rc == QP_ERANGE) {
        ck_assert(!fits32((int64_t)((uint64_t)(uintptr_t)&global_counter - (at + 8))));
    } else {
        ck_assert_int_eq(rc, 8);
        page[0x208] = 0xc3; /* ret */
        global_counter = 41;
        as_fn1(page + 0x200)(0);
        ck_assert_uint_eq(global_counter, 42);
    }
    munmap(page, PAGE);
}
END_TEST

/*
 * A call whose return address is then replaced (dyn's call at an entry): `call T; int3;
 * T: arch_emit_store_ret64(BACK); jmp F` returns from F to BACK, %r11 kept.
 */
START_TEST(test_emit_exec_store_ret)
{
    uint8_t *page, *p, *fn, *target, *back;
    uint64_t out = 0, got;
    int rc;

    page = map_rwx(NULL, PAGE);
    if (page == NULL) {
        fprintf(stderr, "test_emit_exec_store_ret: no RWX mapping, skipped\n");
        return;
    }
    target = page + 0x200;
    memcpy(target, "\x48\x8d\x47\x01\xc3", 5); /* lea 1(%rdi),%rax; ret */
    back = page + 0x300;
    memcpy(back, "\x4c\x89\x1e\xc3", 4); /* mov %r11,(%rsi); ret */
    fn = p = page;
    PUT(&p, "\x49\xc7\xc3\x34\x12\x00\x00"); /* mov $0x1234,%r11 */
    rc = arch_emit_call((uint64_t)(uintptr_t)p, (uint64_t)(uintptr_t)p + 6, p, 16);
    ck_assert_int_eq(rc, 5);
    p += rc;
    *p++ = 0xcc;
    rc = arch_emit_store_ret64((uint64_t)(uintptr_t)back, p, 14);
    ck_assert_int_eq(rc, QP_EINVAL);
    rc = arch_emit_store_ret64((uint64_t)(uintptr_t)back, p, 32);
    ck_assert_int_eq(rc, 19);
    p += rc;
    rc = arch_emit_jmp((uint64_t)(uintptr_t)p, (uint64_t)(uintptr_t)target, p, 16);
    ck_assert_int_eq(rc, 5);
    got = as_fn3(fn)(41, (uint64_t)(uintptr_t)&out, NULL);
    ck_assert_uint_eq(got, 42);
    ck_assert_uint_eq(out, 0x1234);
    munmap(page, PAGE);
}
END_TEST

/*
 * Timers: the bytes decode as whole instructions with rip-relative operands on the three
 * words; run, nested starts and stops add one interval, an unmatched stop is ignored, and
 * %rax, %rdx and the red zone survive.
 */
START_TEST(test_emit_exec_timer)
{
    uint8_t *page, *p, *fn, *lone;
    volatile uint64_t *w;
    uint64_t depth, start, total, at, out[2];
    int rc, k;

    page = map_rwx(NULL, PAGE);
    if (page == NULL) {
        fprintf(stderr, "test_emit_exec_timer: no RWX mapping, skipped\n");
        return;
    }
    w = (volatile uint64_t*)(page + 0xf00);
    depth = (uint64_t)(uintptr_t)&w[0];
    start = (uint64_t)(uintptr_t)&w[1];
    total = (uint64_t)(uintptr_t)&w[2];

    /* Out of reach and too small. */
    ck_assert_int_eq(arch_emit_timer_start(depth + 3 * (uint64_t)GIB, depth, start, page,
                         PAGE),
        QP_ERANGE);
    ck_assert_int_eq(arch_emit_timer_stop(0, depth, start, total, page, PAGE), QP_ERANGE);
    ck_assert_int_eq(arch_emit_timer_start(depth, depth, start, page, 51), QP_EINVAL);
    ck_assert_int_eq(arch_emit_timer_stop(depth, depth, start, total, page, 62), QP_EINVAL);

    fn = p = page;
    PUT(&p, "\x48\x89\xf8"); /* mov %rdi,%rax */
    PUT(&p, "\x48\x89\x7c\x24\xf8"); /* mov %rdi,-0x8(%rsp): in the red zone */
    for (k = 0; k < 4; k++) {
        at = (uint64_t)(uintptr_t)p;
        if (k < 2)
            rc = arch_emit_timer_start(at, depth, start, p, 64);
        else
            rc = arch_emit_timer_stop(at, depth, start, total, p, 64);
        ck_assert_int_eq(rc, k < 2 ? 52 : 63);
        /* Whole instructions, and the first rip-relative one addresses DEPTH. */
        for (int off = 0; off < rc;) {
            arch_insn_t o;
            ck_assert_int_eq(arch_decode(p + off, (size_t)(rc - off), at + (uint64_t)off, &o), 0);
            if (o.flags & ARCH_F_RIPREL)
                ck_assert(o.target == depth || o.target == start || o.target == total);
            off += o.len;
            ck_assert_int_le(off, rc);
        }
        p += rc;
    }
    PUT(&p, "\x4c\x8b\x4c\x24\xf8"); /* mov -0x8(%rsp),%r9 */
    PUT(&p, "\x4c\x89\x0a"); /* mov %r9,(%rdx): %rdx must have survived */
    PUT(&p, "\x48\x89\x42\x08"); /* mov %rax,0x8(%rdx) */
    PUT(&p, "\xc3"); /* ret */

    lone = p;
    at = (uint64_t)(uintptr_t)p;
    rc = arch_emit_timer_stop(at, depth, start, total, p, 64);
    ck_assert_int_eq(rc, 63);
    p += rc;
    PUT(&p, "\xc3");

    w[0] = w[1] = w[2] = 0;
    as_fn3(fn)(12345, 0, out);
    ck_assert_uint_eq(out[0], 12345);
    ck_assert_uint_eq(out[1], 12345);
    ck_assert_uint_eq(w[0], 0);
    ck_assert_uint_ne(w[1], 0);
    ck_assert_uint_gt(w[2], 0);
    ck_assert_uint_lt(w[2], 1000000000ull); /* one short interval, not start's value */
    total = w[2];
    as_fn1(lone)(0); /* unmatched: ignored */
    ck_assert_uint_eq(w[0], 0);
    ck_assert_uint_eq(w[2], total);
    as_fn3(fn)(7, 0, out);
    ck_assert_uint_gt(w[2], total);
    ck_assert_uint_eq(w[0], 0);
    munmap(page, PAGE);
}
END_TEST

/*****************************************************************************
 * The suite
 */

static Suite*
emit_suite(void)
{
    Suite* s = suite_create("emit");
    TCase* tc;

    tc = tcase_create("reloc");
    tcase_add_test(tc, test_emit_reloc_roundtrip);
    tcase_add_test(tc, test_emit_reloc_reach_edges);
    tcase_add_test(tc, test_emit_reloc_riprel_edges);
    tcase_add_test(tc, test_emit_reloc_rejects);
    tcase_add_test(tc, test_emit_reloc_random_bytes);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);

    tc = tcase_create("emitters");
    tcase_add_test(tc, test_emit_jmp_call);
    tcase_add_test(tc, test_emit_jcc_conds);
    tcase_add_test(tc, test_emit_counter_inc);
    tcase_add_test(tc, test_emit_counter_add_reg);
    tcase_add_test(tc, test_emit_counter_switch);
    tcase_add_test(tc, test_emit_flags_save_restore);
    tcase_add_test(tc, test_emit_nops);
    tcase_add_test(tc, test_emit_trap);
    suite_add_tcase(s, tc);

    tc = tcase_create("exec");
    tcase_add_test(tc, test_emit_exec_relocated_fn);
    tcase_add_test(tc, test_emit_exec_counter_flags);
    tcase_add_test(tc, test_emit_exec_timer);
    tcase_add_test(tc, test_emit_exec_store_ret);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner* sr = srunner_create(emit_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
