/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Unit tests for arch/ (x86-64): tables of {bytes, address, expected length, kind,
 * target, pc-relative field, flags}, operand semantics of the jump-table idioms, padding,
 * and round trips (re-derive targets from the bytes; move an instruction to another
 * address by rewriting its pc-relative field and decode it again).
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/arch.h"

/* A byte string literal and its length, for the tables. */
#define B(s) (const uint8_t*)(s), (sizeof(s) - 1)

#define ADDR 0x401000u

/*
 * Table rows are checked in a loop inside one test: each failing row is reported on
 * stderr and the test fails once at the end. (One process per row would be clearer in
 * the Check log but costs a fork per row, which is slow under ASan.)
 */
static int row_failures;

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

/* Run ROW on every element of TABLE, then fail if any row did. */
#define CHECK_ROWS(row, table)                                                           \
    do {                                                                                 \
        size_t row_i_;                                                                   \
        row_failures = 0;                                                                \
        for (row_i_ = 0; row_i_ < sizeof(table) / sizeof((table)[0]); row_i_++)          \
            row(&(table)[row_i_]);                                                       \
        ck_assert_msg(row_failures == 0, "%d of %zu rows failed (see stderr)",           \
            row_failures, sizeof(table) / sizeof((table)[0]));                           \
    } while (0)

/*****************************************************************************
 * Decoding: length, kind, target, pc-relative field, flags
 */

typedef struct decode_case {
    const char* name; /* what the bytes are */
    const uint8_t* bytes; /* the instruction */
    size_t n; /* bytes available */
    uint64_t addr; /* where it runs */
    uint8_t len; /* expected length */
    uint8_t kind; /* expected arch_kind_t */
    uint64_t target; /* expected target (0 when none) */
    uint8_t rel_off; /* expected pc-relative field */
    uint8_t rel_size;
    uint16_t flags; /* expected ARCH_F_* (exact) */
} decode_case_t;

enum {
    BR = ARCH_F_BRANCH_REL,
    RIP = ARCH_F_RIPREL,
    MEM = ARCH_F_MEM_IND,
    SP = ARCH_F_READS_SP,
    PRIV = ARCH_F_PRIV,
    LOCK = ARCH_F_LOCK,
};

static const decode_case_t decode_cases[] = {
    /* Direct jumps, short and near. */
    { "jmp rel8", B("\xeb\x10"), ADDR, 2, ARCH_KIND_JMP, ADDR + 0x12, 1, 1, BR },
    { "jmp rel8 back", B("\xeb\xfe"), ADDR, 2, ARCH_KIND_JMP, ADDR, 1, 1, BR },
    { "jmp rel32", B("\xe9\x00\x01\x00\x00"), ADDR, 5, ARCH_KIND_JMP, ADDR + 0x105, 1, 4,
        BR },
    { "jmp rel32 back", B("\xe9\xfb\xef\xff\xff"), ADDR, 5, ARCH_KIND_JMP, ADDR - 0x1000,
        1, 4, BR },
    { "bnd jmp rel32", B("\xf2\xe9\x00\x00\x00\x00"), ADDR, 6, ARCH_KIND_JMP, ADDR + 6, 2,
        4, BR },
    /* Conditional jumps. */
    { "je rel8", B("\x74\xfe"), ADDR, 2, ARCH_KIND_JCC, ADDR, 1, 1, BR },
    { "ja rel8", B("\x77\x10"), ADDR, 2, ARCH_KIND_JCC, ADDR + 0x12, 1, 1, BR },
    { "je rel32", B("\x0f\x84\x10\x00\x00\x00"), ADDR, 6, ARCH_KIND_JCC, ADDR + 0x16, 2,
        4, BR },
    { "jg rel32 back", B("\x0f\x8f\x00\xff\xff\xff"), ADDR, 6, ARCH_KIND_JCC,
        ADDR + 6 - 0x100, 2, 4, BR },
    { "loop", B("\xe2\xfe"), ADDR, 2, ARCH_KIND_JCC, ADDR, 1, 1, BR },
    { "loope", B("\xe1\x05"), ADDR, 2, ARCH_KIND_JCC, ADDR + 7, 1, 1, BR },
    { "loopne", B("\xe0\x05"), ADDR, 2, ARCH_KIND_JCC, ADDR + 7, 1, 1, BR },
    { "jrcxz", B("\xe3\x05"), ADDR, 2, ARCH_KIND_JCC, ADDR + 7, 1, 1, BR },
    { "jecxz", B("\x67\xe3\x05"), ADDR, 3, ARCH_KIND_JCC, ADDR + 8, 2, 1, BR },
    { "xbegin", B("\xc7\xf8\x10\x00\x00\x00"), ADDR, 6, ARCH_KIND_JCC, ADDR + 0x16, 2, 4,
        BR },
    /* Calls. */
    { "call rel32", B("\xe8\xfb\xff\xff\xff"), ADDR, 5, ARCH_KIND_CALL, ADDR, 1, 4,
        BR | SP },
    { "call next", B("\xe8\x00\x00\x00\x00"), ADDR, 5, ARCH_KIND_CALL, ADDR + 5, 1, 4,
        BR | SP },
    { "call *%rax", B("\xff\xd0"), ADDR, 2, ARCH_KIND_CALL_IND, 0, 0, 0, SP },
    { "call *8(%rax)", B("\xff\x50\x08"), ADDR, 3, ARCH_KIND_CALL_IND, 0, 0, 0,
        SP | MEM },
    { "call *0x10(%rip)", B("\xff\x15\x10\x00\x00\x00"), ADDR, 6, ARCH_KIND_CALL_IND,
        ADDR + 0x16, 2, 4, SP | MEM | RIP },
    { "lcall *(%rax)", B("\xff\x18"), ADDR, 2, ARCH_KIND_CALL_IND, 0, 0, 0, SP | MEM },
    /* Indirect jumps. */
    { "jmp *%rax", B("\xff\xe0"), ADDR, 2, ARCH_KIND_JMP_IND, 0, 0, 0, 0 },
    { "jmp *%r11", B("\x41\xff\xe3"), ADDR, 3, ARCH_KIND_JMP_IND, 0, 0, 0, 0 },
    { "notrack jmp *%rax", B("\x3e\xff\xe0"), ADDR, 3, ARCH_KIND_JMP_IND, 0, 0, 0, 0 },
    { "jmp *0x10(%rip)", B("\xff\x25\x10\x00\x00\x00"), ADDR, 6, ARCH_KIND_JMP_IND,
        ADDR + 0x16, 2, 4, MEM | RIP },
    { "bnd jmp *0x10(%rip)", B("\xf2\xff\x25\x10\x00\x00\x00"), ADDR, 7,
        ARCH_KIND_JMP_IND, ADDR + 0x17, 3, 4, MEM | RIP },
    { "jmp *table(,%rax,8)", B("\xff\x24\xc5\x00\x20\x40\x00"), ADDR, 7,
        ARCH_KIND_JMP_IND, 0, 0, 0, MEM },
    { "notrack jmp *(%rdx,%rax,8)", B("\x3e\xff\x24\xc2"), ADDR, 4, ARCH_KIND_JMP_IND, 0,
        0, 0, MEM },
    { "ljmp *(%rax)", B("\xff\x28"), ADDR, 2, ARCH_KIND_JMP_IND, 0, 0, 0, MEM },
    /* Returns. */
    { "ret", B("\xc3"), ADDR, 1, ARCH_KIND_RET, 0, 0, 0, SP },
    { "ret $8", B("\xc2\x08\x00"), ADDR, 3, ARCH_KIND_RET, 0, 0, 0, SP },
    { "bnd ret", B("\xf2\xc3"), ADDR, 2, ARCH_KIND_RET, 0, 0, 0, SP },
    { "repz ret", B("\xf3\xc3"), ADDR, 2, ARCH_KIND_RET, 0, 0, 0, SP },
    { "lret", B("\xcb"), ADDR, 1, ARCH_KIND_RET, 0, 0, 0, SP },
    { "iretq", B("\x48\xcf"), ADDR, 2, ARCH_KIND_RET, 0, 0, 0, SP },
    /* System calls and interrupts that come back. */
    { "syscall", B("\x0f\x05"), ADDR, 2, ARCH_KIND_SYSCALL, 0, 0, 0, 0 },
    { "sysenter", B("\x0f\x34"), ADDR, 2, ARCH_KIND_SYSCALL, 0, 0, 0, 0 },
    { "int $0x80", B("\xcd\x80"), ADDR, 2, ARCH_KIND_SYSCALL, 0, 0, 0, 0 },
    { "int1", B("\xf1"), ADDR, 1, ARCH_KIND_SYSCALL, 0, 0, 0, 0 },
    /* No fall-through. */
    { "hlt", B("\xf4"), ADDR, 1, ARCH_KIND_HALT, 0, 0, 0, PRIV },
    { "ud2", B("\x0f\x0b"), ADDR, 2, ARCH_KIND_HALT, 0, 0, 0, 0 },
    { "int3", B("\xcc"), ADDR, 1, ARCH_KIND_HALT, 0, 0, 0, 0 },
    { "ud0", B("\x0f\xff\x00"), ADDR, 3, ARCH_KIND_HALT, 0, 0, 0, 0 },
    { "ud1", B("\x0f\xb9\x00"), ADDR, 3, ARCH_KIND_HALT, 0, 0, 0, 0 },
    /* Landing pads. */
    { "endbr64", B("\xf3\x0f\x1e\xfa"), ADDR, 4, ARCH_KIND_ENDBR, 0, 0, 0, 0 },
    { "endbr32", B("\xf3\x0f\x1e\xfb"), ADDR, 4, ARCH_KIND_ENDBR, 0, 0, 0, 0 },
    /* Nops of every length the assemblers emit. */
    { "nop", B("\x90"), ADDR, 1, ARCH_KIND_NOP, 0, 0, 0, 0 },
    { "xchg %ax,%ax", B("\x66\x90"), ADDR, 2, ARCH_KIND_NOP, 0, 0, 0, 0 },
    { "nopl (%rax)", B("\x0f\x1f\x00"), ADDR, 3, ARCH_KIND_NOP, 0, 0, 0, 0 },
    { "nopl 0(%rax)", B("\x0f\x1f\x40\x00"), ADDR, 4, ARCH_KIND_NOP, 0, 0, 0, 0 },
    { "nopl 0(%rax,%rax)", B("\x0f\x1f\x44\x00\x00"), ADDR, 5, ARCH_KIND_NOP, 0, 0, 0,
        0 },
    { "nopw 0(%rax,%rax)", B("\x66\x0f\x1f\x44\x00\x00"), ADDR, 6, ARCH_KIND_NOP, 0, 0, 0,
        0 },
    { "nopl 0L(%rax)", B("\x0f\x1f\x80\x00\x00\x00\x00"), ADDR, 7, ARCH_KIND_NOP, 0, 0, 0,
        0 },
    { "nopl 0L(%rax,%rax)", B("\x0f\x1f\x84\x00\x00\x00\x00\x00"), ADDR, 8, ARCH_KIND_NOP,
        0, 0, 0, 0 },
    { "nopw 0L(%rax,%rax)", B("\x66\x0f\x1f\x84\x00\x00\x00\x00\x00"), ADDR, 9,
        ARCH_KIND_NOP, 0, 0, 0, 0 },
    { "data16 cs nopw", B("\x66\x2e\x0f\x1f\x84\x00\x00\x00\x00\x00"), ADDR, 10,
        ARCH_KIND_NOP, 0, 0, 0, 0 },
    { "data16 data16 cs nopw", B("\x66\x66\x2e\x0f\x1f\x84\x00\x00\x00\x00\x00"), ADDR,
        11, ARCH_KIND_NOP, 0, 0, 0, 0 },
    { "15-byte nop", B("\x66\x66\x66\x66\x66\x66\x2e\x0f\x1f\x84\x00\x00\x00\x00\x00"),
        ADDR, 15, ARCH_KIND_NOP, 0, 0, 0, 0 },
    /* Ordinary instructions. */
    { "push %rbp", B("\x55"), ADDR, 1, ARCH_KIND_SEQ, 0, 0, 0, SP },
    { "push %r12", B("\x41\x54"), ADDR, 2, ARCH_KIND_SEQ, 0, 0, 0, SP },
    { "mov %rsp,%rbp", B("\x48\x89\xe5"), ADDR, 3, ARCH_KIND_SEQ, 0, 0, 0, SP },
    { "sub $8,%rsp", B("\x48\x83\xec\x08"), ADDR, 4, ARCH_KIND_SEQ, 0, 0, 0, SP },
    { "mov 8(%rsp),%rax", B("\x48\x8b\x44\x24\x08"), ADDR, 5, ARCH_KIND_SEQ, 0, 0, 0,
        SP },
    { "vmovd %esp,%xmm0", B("\xc5\xf9\x6e\xc4"), ADDR, 4, ARCH_KIND_SEQ, 0, 0, 0, SP },
    { "mov $1,%spl", B("\x40\xb4\x01"), ADDR, 3, ARCH_KIND_SEQ, 0, 0, 0, SP },
    { "mov $1,%ah", B("\xb4\x01"), ADDR, 2, ARCH_KIND_SEQ, 0, 0, 0, 0 },
    { "leave", B("\xc9"), ADDR, 1, ARCH_KIND_SEQ, 0, 0, 0, SP },
    { "mov %rax,%r12", B("\x49\x89\xc4"), ADDR, 3, ARCH_KIND_SEQ, 0, 0, 0, 0 },
    { "mov %r12,%rax", B("\x4c\x89\xe0"), ADDR, 3, ARCH_KIND_SEQ, 0, 0, 0, 0 },
    { "mov (%r12),%rax", B("\x49\x8b\x04\x24"), ADDR, 4, ARCH_KIND_SEQ, 0, 0, 0, 0 },
    /* 64-bit mov and lea, which arch_decode reads without Zydis: %rsp named by reg, by
     * a register rm, by a SIB base (never by an index of 4, none; r12 with REX). */
    { "lea (%rsp),%rdi", B("\x48\x8d\x3c\x24"), ADDR, 4, ARCH_KIND_SEQ, 0, 0, 0, SP },
    { "lea 8(%r12),%rsp", B("\x49\x8d\x64\x24\x08"), ADDR, 5, ARCH_KIND_SEQ, 0, 0, 0, SP },
    { "mov %r12,(%rsp)", B("\x4c\x89\x24\x24"), ADDR, 4, ARCH_KIND_SEQ, 0, 0, 0, SP },
    { "mov %rax,%rsp", B("\x48\x89\xc4"), ADDR, 3, ARCH_KIND_SEQ, 0, 0, 0, SP },
    { "mov 8(,%r12,1),%rax", B("\x4a\x8b\x04\x25\x08\x00\x00\x00"), ADDR, 8,
        ARCH_KIND_SEQ, 0, 0, 0, 0 },
    { "mov 8(%rax,%rbx,4),%rcx", B("\x48\x8b\x4c\x98\x08"), ADDR, 5, ARCH_KIND_SEQ, 0, 0,
        0, 0 },
    { "mov %esp,%eax", B("\x89\xe0"), ADDR, 2, ARCH_KIND_SEQ, 0, 0, 0, SP },
    { "mov 0x10(%rip),%eax", B("\x8b\x05\x10\x00\x00\x00"), ADDR, 6, ARCH_KIND_SEQ,
        ADDR + 0x16, 2, 4, RIP },
    { "lea 4(%rdi),%ecx", B("\x8d\x4f\x04"), ADDR, 3, ARCH_KIND_SEQ, 0, 0, 0, 0 },
    { "mov $1,%esp", B("\xbc\x01\x00\x00\x00"), ADDR, 5, ARCH_KIND_SEQ, 0, 0, 0, SP },
    { "mov $1,%r12d", B("\x41\xbc\x01\x00\x00\x00"), ADDR, 6, ARCH_KIND_SEQ, 0, 0, 0, 0 },
    { "movaps %xmm0,%xmm4", B("\x0f\x28\xe0"), ADDR, 3, ARCH_KIND_SEQ, 0, 0, 0, 0 },
    { "lock cmpxchg", B("\xf0\x48\x0f\xb1\x0a"), ADDR, 5, ARCH_KIND_SEQ, 0, 0, 0, LOCK },
    { "movabs $imm64,%rax", B("\x48\xb8\x88\x77\x66\x55\x44\x33\x22\x11"), ADDR, 10,
        ARCH_KIND_SEQ, 0, 0, 0, 0 },
    /* Rip-relative data references. */
    { "mov 0x10(%rip),%rax", B("\x48\x8b\x05\x10\x00\x00\x00"), ADDR, 7, ARCH_KIND_SEQ,
        ADDR + 0x17, 3, 4, RIP },
    { "mov -0x10(%rip),%rax", B("\x48\x8b\x05\xf0\xff\xff\xff"), ADDR, 7, ARCH_KIND_SEQ,
        ADDR + 7 - 0x10, 3, 4, RIP },
    { "lea 0x1234(%rip),%rdx", B("\x48\x8d\x15\x34\x12\x00\x00"), ADDR, 7, ARCH_KIND_SEQ,
        ADDR + 7 + 0x1234, 3, 4, RIP },
    { "cmp 0x10(%rip),%rax", B("\x48\x3b\x05\x10\x00\x00\x00"), ADDR, 7, ARCH_KIND_SEQ,
        ADDR + 0x17, 3, 4, RIP },
    { "cmpl $7,0x10(%rip)", B("\x83\x3d\x10\x00\x00\x00\x07"), ADDR, 7, ARCH_KIND_SEQ,
        ADDR + 0x17, 2, 4, RIP },
    { "movq $42,0x10(%rip)", B("\x48\xc7\x05\x10\x00\x00\x00\x2a\x00\x00\x00"), ADDR, 11,
        ARCH_KIND_SEQ, ADDR + 11 + 0x10, 3, 4, RIP },
    { "movw $42,0x10(%rip)", B("\x66\xc7\x05\x10\x00\x00\x00\x2a\x00"), ADDR, 9,
        ARCH_KIND_SEQ, ADDR + 9 + 0x10, 3, 4, RIP },
    { "mov %fs:0x10(%rip),%rax", B("\x64\x48\x8b\x05\x10\x00\x00\x00"), ADDR, 8,
        ARCH_KIND_SEQ, ADDR + 8 + 0x10, 4, 4, RIP },
    { "lock incl 0x10(%rip)", B("\xf0\xff\x05\x10\x00\x00\x00"), ADDR, 7, ARCH_KIND_SEQ,
        ADDR + 0x17, 3, 4, RIP | LOCK },
    { "vmovups 0x10(%rip),%xmm0 (VEX)", B("\xc5\xf8\x10\x05\x10\x00\x00\x00"), ADDR, 8,
        ARCH_KIND_SEQ, ADDR + 8 + 0x10, 4, 4, RIP },
    { "vmovups 0x10(%rip),%zmm0 (EVEX)", B("\x62\xf1\x7c\x48\x10\x05\x10\x00\x00\x00"),
        ADDR, 10, ARCH_KIND_SEQ, ADDR + 10 + 0x10, 6, 4, RIP },
    { "vmovdqu64 (%rip),%zmm0 (EVEX.W)", B("\x62\xf1\xfe\x48\x6f\x05\x00\x00\x00\x00"),
        ADDR, 10, ARCH_KIND_SEQ, ADDR + 10, 6, 4, RIP },
    { "vpcmpd $1,0x10(%rip),%zmm0,%k0 (EVEX+imm8)",
        B("\x62\xf3\x7d\x48\x1f\x05\x10\x00\x00\x00\x01"), ADDR, 11, ARCH_KIND_SEQ,
        ADDR + 11 + 0x10, 6, 4, RIP },
    { "mov 0(%eip),%eax wraps at 4 GiB", B("\x67\x8b\x05\x00\x00\x00\x00"),
        0x1fffffffcull, 7, ARCH_KIND_SEQ, 0x3, 3, 4, RIP },
    /* Not user code. */
    { "lgdt (%rax)", B("\x0f\x01\x10"), ADDR, 3, ARCH_KIND_SEQ, 0, 0, 0, PRIV },
    { "mov %rax,%cr3", B("\x0f\x22\xd8"), ADDR, 3, ARCH_KIND_SEQ, 0, 0, 0, PRIV },
    { "in (%dx),%al", B("\xec"), ADDR, 1, ARCH_KIND_SEQ, 0, 0, 0, PRIV },
    { "out %al,$0x80", B("\xe6\x80"), ADDR, 2, ARCH_KIND_SEQ, 0, 0, 0, PRIV },
    { "cli", B("\xfa"), ADDR, 1, ARCH_KIND_SEQ, 0, 0, 0, PRIV },
    { "wrmsr", B("\x0f\x30"), ADDR, 2, ARCH_KIND_SEQ, 0, 0, 0, PRIV },
    { "rdtsc is user code", B("\x0f\x31"), ADDR, 2, ARCH_KIND_SEQ, 0, 0, 0, 0 },
    /* Decoding uses only the instruction's own bytes, whatever follows. */
    { "ret then garbage", B("\xc3\x06\x06\x06"), ADDR, 1, ARCH_KIND_RET, 0, 0, 0, SP },
};

static void
decode_row(const decode_case_t* c)
{
    arch_insn_t in;
    int rc = arch_decode(c->bytes, c->n, c->addr, &in);

    EXPECT(rc == 0, "%s: rc %d", c->name, rc);
    EXPECT(in.addr == c->addr, "%s: addr", c->name);
    EXPECT(in.len == c->len, "%s: len %u, want %u", c->name, in.len, c->len);
    EXPECT(in.kind == c->kind, "%s: kind %u, want %u", c->name, in.kind, c->kind);
    EXPECT(in.target == c->target, "%s: target %#llx, want %#llx", c->name,
        (unsigned long long)in.target, (unsigned long long)c->target);
    EXPECT(in.rel_off == c->rel_off && in.rel_size == c->rel_size,
        "%s: rel %u/%u, want %u/%u", c->name, in.rel_off, in.rel_size, c->rel_off,
        c->rel_size);
    EXPECT(in.flags == c->flags, "%s: flags %#x, want %#x", c->name, in.flags, c->flags);
}

START_TEST(test_arch_decode_table) { CHECK_ROWS(decode_row, decode_cases); }
END_TEST

/* Bytes that are not one whole valid instruction. */
typedef struct bad_case {
    const char* name;
    const uint8_t* bytes;
    size_t n;
} bad_case_t;

static const bad_case_t bad_cases[] = {
    { "empty", B("") },
    { "truncated call rel32", B("\xe8\x00\x00") },
    { "truncated jcc rel32", B("\x0f\x84\x00\x00\x00") },
    { "lone REX prefix", B("\x48") },
    { "lone 0f escape", B("\x0f") },
    { "truncated rip-relative mov", B("\x48\x8b\x05\x10\x00\x00") },
    { "truncated imm after disp", B("\x48\xc7\x05\x10\x00\x00\x00\x2a\x00\x00") },
    { "truncated EVEX", B("\x62\xf1\x7c\x48\x10\x05\x10\x00") },
    { "push %es (invalid in 64-bit mode)", B("\x06") },
    { "pusha (invalid in 64-bit mode)", B("\x60") },
    { "lea of a register", B("\x48\x8d\xc0") },
    { "into (invalid in 64-bit mode)", B("\xce") },
    { "far jmp ptr16:32 (invalid in 64-bit mode)", B("\xea\x00\x00\x00\x00\x00\x00") },
    { "lock nop", B("\xf0\x90") },
    { "undefined 0f 04", B("\x0f\x04\x00\x00") },
    { "16 bytes long",
        B("\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x90") },
};

static void
bad_row(const bad_case_t* c)
{
    arch_insn_t in;
    arch_ops_t ops;
    uint8_t* copy = malloc(c->n + 1); /* exact size, so ASan sees a read past the end */

    EXPECT(copy != NULL, "out of memory");
    memcpy(copy, c->bytes, c->n);
    EXPECT(arch_decode(copy, c->n, ADDR, &in) == QP_EDECODE, "%s: decoded", c->name);
    EXPECT(arch_decode_ops(copy, c->n, ADDR, &ops) == QP_EDECODE, "%s: ops decoded",
        c->name);
    free(copy);
}

START_TEST(test_arch_decode_rejects) { CHECK_ROWS(bad_row, bad_cases); }
END_TEST

START_TEST(test_arch_decode_null_args)
{
    const uint8_t ret[] = { 0xc3 };
    arch_insn_t in;
    arch_ops_t ops;

    ck_assert_int_eq(arch_decode(NULL, 1, ADDR, &in), QP_EINVAL);
    ck_assert_int_eq(arch_decode(ret, 1, ADDR, NULL), QP_EINVAL);
    ck_assert_int_eq(arch_decode_ops(NULL, 1, ADDR, &ops), QP_EINVAL);
    ck_assert_int_eq(arch_decode_ops(ret, 1, ADDR, NULL), QP_EINVAL);
}
END_TEST

/* Truncating any multi-byte instruction of the table by one byte must fail, not read on.
 */
static void
truncated_row(const decode_case_t* c)
{
    uint8_t* copy;
    arch_insn_t in;
    int rc;

    if (c->len < 2 || c->len > c->n)
        return;
    /* An exact-size heap copy, so ASan catches a read past the end. */
    copy = malloc(c->len - 1u);
    EXPECT(copy != NULL, "out of memory");
    memcpy(copy, c->bytes, c->len - 1u);
    rc = arch_decode(copy, c->len - 1u, c->addr, &in);
    free(copy);
    EXPECT(rc == QP_EDECODE, "%s: cut to %u bytes: rc %d", c->name, c->len - 1u, rc);
}

START_TEST(test_arch_decode_truncated_table) { CHECK_ROWS(truncated_row, decode_cases); }
END_TEST

/*
 * What arch_decode reads without Zydis (x86_decode_fast) against Zydis' own reading
 * (arch_decode_full; 0x3f below: no REX prefix): every field the same, at every length.
 */
/* Forms same_as_zydis saw decode whole: a comparison of failures alone proves nothing. */
static unsigned long same_as_zydis_valid;

static int
same_as_zydis(const uint8_t* b, size_t n)
{
    /* Every field, and at every length the bytes are cut to (a form cut short is no
     * instruction for either). */
    for (size_t k = 1; k <= n; k++) {
        arch_insn_t f, z;
        int rf = arch_decode(b, k, ADDR, &f), rz = arch_decode_full(b, k, ADDR, &z);
        if (rf != rz || (rf == 0 && memcmp(&f, &z, sizeof(f)) != 0))
            return 0;
        same_as_zydis_valid += rf == 0 && k == n;
    }
    return 1;
}

START_TEST(test_decode_fast_as_zydis)
{
    uint8_t b[16];
    int bad = 0;
    /* Branches, ret, push and pop, mov $imm32: every opcode, a few offsets. */
    static const uint8_t ones[] = { 0xe8, 0xe9, 0xeb, 0xc3 };
    for (int v = 0; v < 4; v++) {
        uint8_t x = (uint8_t)(v * 0x55 + 3);
        for (size_t i = 0; i < sizeof(ones); i++) {
            b[0] = ones[i];
            memset(b + 1, x, 6);
            bad += !same_as_zydis(b, 7);
        }
        for (int c = 0; c < 16; c++) {
            b[0] = (uint8_t)(0x70 + c);
            b[1] = x;
            bad += !same_as_zydis(b, 2);
            b[0] = 0x0f;
            b[1] = (uint8_t)(0x80 + c);
            memset(b + 2, x, 4);
            bad += !same_as_zydis(b, 6);
            b[0] = (uint8_t)(0x50 + c);
            bad += !same_as_zydis(b, 1);
            b[0] = 0x41;
            b[1] = (uint8_t)(0x50 + c);
            bad += !same_as_zydis(b, 2);
            b[0] = (uint8_t)(0xb0 + c);
            memset(b + 1, x, 4);
            bad += !same_as_zydis(b, 5);
            b[0] = 0x41;
            b[1] = (uint8_t)(0xb0 + c);
            memset(b + 2, x, 4);
            bad += !same_as_zydis(b, 6);
        }
    }
    /* mov, lea and the ALU forms: every REX or none, opcode, ModRM and SIB byte (adc,
     * sbb, op $imm32 and xchg too: the fast path leaves them to Zydis). */
    static const uint8_t ops[] = { 0x89, 0x8b, 0x8d, 0x01, 0x03, 0x29, 0x2b, 0x39, 0x3b, 0x09,
        0x0b, 0x21, 0x23, 0x31, 0x33, 0x85, 0x83, 0x11, 0x19, 0x81, 0x87 };
    for (int rex = 0x3f; rex <= 0x4f; rex++)
        for (size_t o = 0; o < sizeof(ops); o++)
            for (int modrm = 0; modrm < 256; modrm++)
                for (int sib = 0; sib < 256; sib++) {
                    size_t k = 0;
                    if (rex != 0x3f)
                        b[k++] = (uint8_t)rex;
                    b[k++] = ops[o];
                    b[k++] = (uint8_t)modrm;
                    b[k++] = (uint8_t)sib;
                    memset(b + k, 0x81, 4);
                    bad += !same_as_zydis(b, k + 4);
                    if ((modrm & 7) != 4 || (modrm >> 6) == 3)
                        break; /* no SIB byte: one is enough */
                }
    ck_assert_int_eq(bad, 0);
    ck_assert_msg(same_as_zydis_valid > 1000000, "only %lu forms decoded", same_as_zydis_valid);
}
END_TEST

/*
 * The padding nops arch_decode reads without Zydis (x86_decode.c, x86_padding_nop_len):
 * 0-13 0x66 prefixes, a cs prefix or not, each ModRM form with nonzero displacement
 * bytes; each decodes as Zydis decodes it (a nop of its length, nothing else set), and
 * one byte short it does not decode. What Zydis gave for every such form, checked when
 * the fast path was written, is what this holds.
 */
START_TEST(test_decode_padding_nops)
{
    static const struct {
        uint8_t modrm;
        size_t tail; /* bytes after the ModRM byte */
    } forms[] = { { 0x00, 0 }, { 0x40, 1 }, { 0x80, 4 }, { 0x44, 2 }, { 0x84, 5 } };
    for (size_t np = 0; np <= 13; np++) {
        for (int cs = 0; cs <= 1; cs++) {
            for (size_t f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
                uint8_t b[32];
                size_t k = 0;
                for (size_t i = 0; i < np; i++)
                    b[k++] = 0x66;
                if (cs)
                    b[k++] = 0x2e;
                b[k++] = 0x0f;
                b[k++] = 0x1f;
                b[k++] = forms[f].modrm;
                for (size_t i = 0; i < forms[f].tail; i++)
                    b[k++] = (forms[f].modrm & 7) == 4 && i == 0 ? 0x00 : (uint8_t)(0x11 * (i + 1));
                arch_insn_t in;
                ck_assert_msg(same_as_zydis(b, k), "nop of %zu bytes: not as Zydis reads it", k);
                if (k > ARCH_MAX_INSN) {
                    ck_assert_int_eq(arch_decode(b, k, ADDR, &in), QP_EDECODE);
                    continue;
                }
                ck_assert_int_eq(arch_decode(b, k, ADDR, &in), 0);
                ck_assert_uint_eq(in.addr, ADDR);
                ck_assert_uint_eq(in.len, k);
                ck_assert_uint_eq(in.kind, ARCH_KIND_NOP);
                ck_assert_uint_eq(in.target, 0);
                ck_assert_uint_eq(in.rel_off, 0);
                ck_assert_uint_eq(in.rel_size, 0);
                ck_assert_uint_eq(in.flags, 0);
                ck_assert_uint_eq(in.flags_read, 0);
                ck_assert_uint_eq(in.flags_written, 0);
                ck_assert_int_eq(arch_decode(b, k - 1, ADDR, &in), QP_EDECODE);
            }
        }
    }
    /* 90 and 66 90 (xchg %ax,%ax); a SIB other than (%rax,%rax,1) is Zydis' to decode. */
    arch_insn_t in;
    ck_assert_int_eq(arch_decode((const uint8_t *)"\x66\x90", 2, ADDR, &in), 0);
    ck_assert_uint_eq(in.len, 2);
    ck_assert_uint_eq(in.kind, ARCH_KIND_NOP);
    ck_assert_int_eq(arch_decode((const uint8_t *)"\x0f\x1f\x44\x24\x08", 5, ADDR, &in), 0);
    ck_assert_uint_eq(in.len, 5);
    ck_assert_uint_eq(in.kind, ARCH_KIND_NOP);
}
END_TEST

/*****************************************************************************
 * Status flags
 */

typedef struct flags_case {
    const char* name;
    const uint8_t* bytes;
    size_t n;
    uint8_t read; /* expected flags_read */
    uint8_t written; /* expected flags_written */
} flags_case_t;

#define CF ARCH_FLAG_CF
#define PF ARCH_FLAG_PF
#define AF ARCH_FLAG_AF
#define ZF ARCH_FLAG_ZF
#define SF ARCH_FLAG_SF
#define OF ARCH_FLAG_OF
#define DF ARCH_FLAG_DF
#define ST ARCH_FLAGS_STATUS

static const flags_case_t flags_cases[] = {
    { "cmp %rcx,%rax", B("\x48\x39\xc8"), 0, ST },
    { "add %rdx,%rax", B("\x48\x01\xd0"), 0, ST },
    { "adc %rcx,%rax", B("\x48\x11\xc8"), CF, ST },
    { "inc %eax (keeps CF)", B("\xff\xc0"), 0, PF | AF | ZF | SF | OF },
    { "xor %eax,%eax (AF undefined)", B("\x31\xc0"), 0, ST & ~AF },
    { "lea (%rax,%rcx),%rax", B("\x48\x8d\x04\x08"), 0, 0 },
    { "mov %rcx,%rax", B("\x48\x89\xc8"), 0, 0 },
    { "je", B("\x74\x00"), ZF, 0 },
    { "ja", B("\x77\x00"), CF | ZF, 0 },
    { "jl", B("\x7c\x00"), SF | OF, 0 },
    { "jle", B("\x7e\x00"), ZF | SF | OF, 0 },
    { "cmove", B("\x0f\x44\xc1"), ZF, 0 },
    { "setb", B("\x0f\x92\xc0"), CF, 0 },
    { "shl $5,%eax", B("\xc1\xe0\x05"), 0, CF | PF | ZF | SF },
    { "shl %eax (by one)", B("\xd1\xe0"), 0, CF | PF | ZF | SF },
    { "shl %cl,%eax (count may be 0)", B("\xd3\xe0"), 0, 0 },
    { "shl $0,%eax", B("\xc1\xe0\x00"), 0, 0 },
    { "shl $32,%eax (masks to 0)", B("\xc1\xe0\x20"), 0, 0 },
    { "shl $32,%rax", B("\x48\xc1\xe0\x20"), 0, CF | PF | ZF | SF },
    { "shld %cl", B("\x0f\xa5\xc0"), 0, 0 },
    { "rol %cl,%eax", B("\xd3\xc0"), 0, 0 },
    { "imul %rax,%rax", B("\x48\x0f\xaf\xc0"), 0, CF | OF },
    { "cmpsb", B("\xa6"), DF, ST },
    { "repe cmpsb (rcx may be 0)", B("\xf3\xa6"), ZF | DF, 0 },
    { "repne scasb", B("\xf2\xae"), ZF | DF, 0 },
    { "rep movsb", B("\xf3\xa4"), DF, 0 },
    { "clc", B("\xf8"), 0, CF },
    { "stc", B("\xf9"), 0, CF },
    { "cld", B("\xfc"), 0, DF },
    { "pushfq", B("\x9c"), ST | DF, 0 },
    { "popfq", B("\x9d"), 0, ST | DF },
    { "syscall (flags come back)", B("\x0f\x05"), 0, 0 },
    { "int $0x80", B("\xcd\x80"), 0, 0 },
    { "call", B("\xe8\x00\x00\x00\x00"), 0, 0 },
};

static void
flags_row(const flags_case_t* c)
{
    arch_insn_t in;

    EXPECT(arch_decode(c->bytes, c->n, ADDR, &in) == 0, "%s: rc", c->name);
    EXPECT(in.flags_read == c->read, "%s: read %#x, want %#x", c->name, in.flags_read,
        c->read);
    EXPECT(in.flags_written == c->written, "%s: written %#x, want %#x", c->name,
        in.flags_written, c->written);
}

START_TEST(test_arch_decode_flags) { CHECK_ROWS(flags_row, flags_cases); }
END_TEST

/*****************************************************************************
 * Round trips
 */

/* The signed little-endian field of SIZE bytes at P. */
static int64_t
field_get(const uint8_t* p, unsigned size)
{
    uint64_t v = 0;
    unsigned i;

    for (i = 0; i < size; i++)
        v |= (uint64_t)p[i] << (8 * i);
    if (size < 8 && (v >> (8 * size - 1)) & 1)
        v |= ~(uint64_t)0 << (8 * size);
    return (int64_t)v;
}

/* Store V in SIZE bytes at P; 0 when it does not fit. */
static int
field_put(uint8_t* p, unsigned size, int64_t v)
{
    int64_t lim = (int64_t)1 << (8 * size - 1);
    unsigned i;

    if (v < -lim || v >= lim)
        return 0;
    for (i = 0; i < size; i++)
        p[i] = (uint8_t)((uint64_t)v >> (8 * i));
    return 1;
}

/*
 * For every pc-relative table entry: the field at rel_off/rel_size, added to the end of
 * the instruction, gives the target; moved to another address with the field rewritten,
 * the instruction decodes to the same length, kind, field and target.
 */
static void
roundtrip_row(const decode_case_t* c)
{
    static const int64_t moves[] = { 0x40, -0x40, 0x10000, -0x123456, 0x7fff0000 };
    uint8_t copy[ARCH_MAX_INSN];
    arch_insn_t in, in2;
    uint64_t mask;
    size_t k;

    EXPECT(arch_decode(c->bytes, c->n, c->addr, &in) == 0, "%s: rc", c->name);
    if (!(in.flags & (ARCH_F_BRANCH_REL | ARCH_F_RIPREL)))
        return;
    EXPECT(in.rel_size == 1 || in.rel_size == 2 || in.rel_size == 4, "%s: rel_size",
        c->name);
    EXPECT(in.rel_off > 0 && in.rel_off + in.rel_size <= in.len, "%s: rel_off", c->name);
    mask = (c->bytes[0] == 0x67) ? 0xffffffffu : ~(uint64_t)0; /* eip-relative */
    EXPECT(((in.addr + in.len + (uint64_t)field_get(c->bytes + in.rel_off, in.rel_size))
               & mask)
            == in.target,
        "%s: field does not give the target", c->name);

    for (k = 0; k < sizeof(moves) / sizeof(moves[0]); k++) {
        uint64_t addr2 = c->addr + (uint64_t)moves[k];
        int64_t v = (int64_t)(in.target - (addr2 + in.len));

        memcpy(copy, c->bytes, in.len);
        if (mask != ~(uint64_t)0 || !field_put(copy + in.rel_off, in.rel_size, v))
            continue; /* out of reach for this field size */
        EXPECT(arch_decode(copy, in.len, addr2, &in2) == 0, "%s: moved: rc", c->name);
        EXPECT(in2.len == in.len && in2.kind == in.kind && in2.flags == in.flags
                && in2.rel_off == in.rel_off && in2.rel_size == in.rel_size,
            "%s: moved by %lld decodes differently", c->name, (long long)moves[k]);
        EXPECT(in2.target == in.target, "%s: moved by %lld: target %#llx, want %#llx",
            c->name, (long long)moves[k], (unsigned long long)in2.target,
            (unsigned long long)in.target);
    }
}

START_TEST(test_arch_decode_roundtrip) { CHECK_ROWS(roundtrip_row, decode_cases); }
END_TEST

/*
 * Random bytes: decoding never fails other than with QP_EDECODE, never claims more bytes
 * than it was given, and what it returns is self-consistent.
 */
START_TEST(test_arch_decode_random_bytes)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    uint8_t buf[32];
    int i, ok = 0;
    size_t j, n;

    for (i = 0; i < 200000; i++) {
        arch_insn_t in;
        arch_ops_t ops;
        int rc, rc2;

        for (j = 0; j < sizeof(buf); j++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            buf[j] = (uint8_t)(seed >> 56);
        }
        n = 1 + (size_t)(seed >> 20) % ARCH_MAX_INSN;
        rc = arch_decode(buf, n, ADDR, &in);
        ck_assert(rc == 0 || rc == QP_EDECODE);
        if (rc < 0)
            continue;
        ok++;
        ck_assert(in.len >= 1 && in.len <= n);
        ck_assert(in.kind <= ARCH_KIND_NOP);
        ck_assert(in.rel_off + in.rel_size <= in.len);
        ck_assert(!((in.flags & ARCH_F_BRANCH_REL) && (in.flags & ARCH_F_RIPREL)));
        if (in.kind == ARCH_KIND_JMP || in.kind == ARCH_KIND_JCC
            || in.kind == ARCH_KIND_CALL)
            ck_assert(in.flags & ARCH_F_BRANCH_REL);
        if (in.flags & ARCH_F_MEM_IND)
            ck_assert(in.kind == ARCH_KIND_JMP_IND || in.kind == ARCH_KIND_CALL_IND);
        rc2 = arch_decode_ops(buf, n, ADDR, &ops);
        ck_assert_int_eq(rc2, 0);
        ck_assert(ops.op <= ARCH_OP_CALL);
    }
    ck_assert(ok > 1000);
}
END_TEST

/*****************************************************************************
 * Operand semantics
 */

START_TEST(test_arch_ops_movslq_table_load)
{
    /* movslq (%rdx,%rax,4),%rax */
    const uint8_t b[] = { 0x48, 0x63, 0x04, 0x82 };
    arch_ops_t o;

    ck_assert_int_eq(arch_decode_ops(b, sizeof(b), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_MOVSX);
    ck_assert_int_eq(o.dst.kind, ARCH_OPND_REG);
    ck_assert_int_eq(o.dst.reg, 1);
    ck_assert_int_eq(o.dst.size, 8);
    ck_assert_int_eq(o.src.kind, ARCH_OPND_MEM);
    ck_assert_int_eq(o.src.size, 4);
    ck_assert_int_eq(o.src.base, 3);
    ck_assert_int_eq(o.src.index, 1);
    ck_assert_int_eq(o.src.scale, 4);
    ck_assert_int_eq(o.src.disp, 0);
    ck_assert_int_eq(o.src.seg, 0);
    ck_assert_uint_eq(o.regs_written, 1u << 1);
    ck_assert_uint_eq(o.regs_read, (1u << 1) | (1u << 3));
}
END_TEST

START_TEST(test_arch_ops_lea_riprel)
{
    /* lea 0x1234(%rip),%rdx */
    const uint8_t b[] = { 0x48, 0x8d, 0x15, 0x34, 0x12, 0x00, 0x00 };
    arch_ops_t o;

    ck_assert_int_eq(arch_decode_ops(b, sizeof(b), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_LEA);
    ck_assert_int_eq(o.dst.kind, ARCH_OPND_REG);
    ck_assert_int_eq(o.dst.reg, 3);
    ck_assert_int_eq(o.dst.size, 8);
    ck_assert_int_eq(o.src.kind, ARCH_OPND_MEM);
    ck_assert_int_eq(o.src.base, ARCH_REG_PC);
    ck_assert_int_eq(o.src.index, ARCH_REG_NONE);
    ck_assert_int_eq(o.src.disp, ADDR + 7 + 0x1234);
}
END_TEST

START_TEST(test_arch_ops_add)
{
    /* add %rdx,%rax */
    const uint8_t b[] = { 0x48, 0x01, 0xd0 };
    arch_ops_t o;

    ck_assert_int_eq(arch_decode_ops(b, sizeof(b), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_ADD);
    ck_assert_int_eq(o.dst.kind, ARCH_OPND_REG);
    ck_assert_int_eq(o.dst.reg, 1);
    ck_assert_int_eq(o.src.kind, ARCH_OPND_REG);
    ck_assert_int_eq(o.src.reg, 3);
    ck_assert_int_eq(o.src.size, 8);
}
END_TEST

START_TEST(test_arch_ops_cmp_ja)
{
    /* cmp $0x7,%eax; ja +0x10 */
    const uint8_t cmp[] = { 0x83, 0xf8, 0x07 };
    const uint8_t ja[] = { 0x77, 0x10 };
    const uint8_t ja32[] = { 0x0f, 0x87, 0x00, 0x01, 0x00, 0x00 };
    arch_ops_t o;

    ck_assert_int_eq(arch_decode_ops(cmp, sizeof(cmp), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_CMP);
    ck_assert_int_eq(o.dst.kind, ARCH_OPND_REG);
    ck_assert_int_eq(o.dst.reg, 1);
    ck_assert_int_eq(o.dst.size, 4);
    ck_assert_int_eq(o.src.kind, ARCH_OPND_IMM);
    ck_assert_int_eq(o.src.imm, 7);

    ck_assert_int_eq(arch_decode_ops(ja, sizeof(ja), ADDR + 3, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_JCC);
    ck_assert_int_eq(o.cond, ARCH_COND_A);
    ck_assert_int_eq(o.src.kind, ARCH_OPND_IMM);
    ck_assert_int_eq(o.src.imm, ADDR + 3 + 2 + 0x10);
    ck_assert_int_eq(o.dst.kind, ARCH_OPND_NONE);

    ck_assert_int_eq(arch_decode_ops(ja32, sizeof(ja32), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_JCC);
    ck_assert_int_eq(o.cond, ARCH_COND_A);
    ck_assert_int_eq(o.src.imm, ADDR + 6 + 0x100);
}
END_TEST

START_TEST(test_arch_ops_jcc_conds)
{
    static const struct {
        uint8_t opcode;
        uint8_t cond;
    } conds[] = {
        { 0x77, ARCH_COND_A },
        { 0x73, ARCH_COND_AE },
        { 0x72, ARCH_COND_B },
        { 0x76, ARCH_COND_BE },
        { 0x74, ARCH_COND_E },
        { 0x75, ARCH_COND_NE },
        { 0x7f, ARCH_COND_G },
        { 0x7d, ARCH_COND_GE },
        { 0x7c, ARCH_COND_L },
        { 0x7e, ARCH_COND_LE },
        { 0x70, ARCH_COND_OTHER },
        { 0x78, ARCH_COND_OTHER },
        { 0x7a, ARCH_COND_OTHER },
        { 0xe2, ARCH_COND_OTHER },
        { 0xe3, ARCH_COND_OTHER },
    };
    size_t i;

    for (i = 0; i < sizeof(conds) / sizeof(conds[0]); i++) {
        const uint8_t b[] = { conds[i].opcode, 0xfe };
        arch_ops_t o;

        ck_assert_int_eq(arch_decode_ops(b, sizeof(b), ADDR, &o), 0);
        ck_assert_int_eq(o.op, ARCH_OP_JCC);
        ck_assert_msg(
            o.cond == conds[i].cond, "opcode %#x: cond %u", conds[i].opcode, o.cond);
        ck_assert_int_eq(o.src.imm, ADDR);
    }
}
END_TEST

START_TEST(test_arch_ops_jmp_table)
{
    /* jmp *0x402000(,%rax,8) */
    const uint8_t b[] = { 0xff, 0x24, 0xc5, 0x00, 0x20, 0x40, 0x00 };
    arch_ops_t o;

    ck_assert_int_eq(arch_decode_ops(b, sizeof(b), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_JMP);
    ck_assert_int_eq(o.dst.kind, ARCH_OPND_NONE);
    ck_assert_int_eq(o.src.kind, ARCH_OPND_MEM);
    ck_assert_int_eq(o.src.base, ARCH_REG_NONE);
    ck_assert_int_eq(o.src.index, 1);
    ck_assert_int_eq(o.src.scale, 8);
    ck_assert_int_eq(o.src.disp, 0x402000);
    ck_assert_int_eq(o.src.size, 8);
}
END_TEST

START_TEST(test_arch_ops_jmp_forms)
{
    const uint8_t reg[] = { 0xff, 0xe0 }; /* jmp *%rax */
    const uint8_t notrack[] = { 0x3e, 0xff, 0xe2 }; /* notrack jmp *%rdx */
    const uint8_t rip[] = { 0xff, 0x25, 0x10, 0x00, 0x00, 0x00 }; /* jmp *0x10(%rip) */
    const uint8_t direct[] = { 0xe9, 0x00, 0x01, 0x00, 0x00 }; /* jmp +0x100 */
    const uint8_t call[] = { 0xe8, 0xfb, 0xff, 0xff, 0xff }; /* call self */
    const uint8_t callr[] = { 0x41, 0xff, 0xd3 }; /* call *%r11 */
    arch_ops_t o;

    ck_assert_int_eq(arch_decode_ops(reg, sizeof(reg), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_JMP);
    ck_assert_int_eq(o.src.kind, ARCH_OPND_REG);
    ck_assert_int_eq(o.src.reg, 1);

    ck_assert_int_eq(arch_decode_ops(notrack, sizeof(notrack), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_JMP);
    ck_assert_int_eq(o.src.kind, ARCH_OPND_REG);
    ck_assert_int_eq(o.src.reg, 3);

    ck_assert_int_eq(arch_decode_ops(rip, sizeof(rip), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_JMP);
    ck_assert_int_eq(o.src.kind, ARCH_OPND_MEM);
    ck_assert_int_eq(o.src.base, ARCH_REG_PC);
    ck_assert_int_eq(o.src.disp, ADDR + 0x16);

    ck_assert_int_eq(arch_decode_ops(direct, sizeof(direct), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_JMP);
    ck_assert_int_eq(o.src.kind, ARCH_OPND_IMM);
    ck_assert_int_eq(o.src.imm, ADDR + 0x105);

    ck_assert_int_eq(arch_decode_ops(call, sizeof(call), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_CALL);
    ck_assert_int_eq(o.src.kind, ARCH_OPND_IMM);
    ck_assert_int_eq(o.src.imm, ADDR);

    ck_assert_int_eq(arch_decode_ops(callr, sizeof(callr), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_CALL);
    ck_assert_int_eq(o.src.kind, ARCH_OPND_REG);
    ck_assert_int_eq(o.src.reg, 12);
}
END_TEST

START_TEST(test_arch_ops_mov_table_load)
{
    /* mov (%rdx,%rax,4),%eax */
    const uint8_t b[] = { 0x8b, 0x04, 0x82 };
    arch_ops_t o;

    ck_assert_int_eq(arch_decode_ops(b, sizeof(b), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_MOV);
    ck_assert_int_eq(o.dst.kind, ARCH_OPND_REG);
    ck_assert_int_eq(o.dst.reg, 1);
    ck_assert_int_eq(o.dst.size, 4);
    ck_assert_int_eq(o.src.kind, ARCH_OPND_MEM);
    ck_assert_int_eq(o.src.base, 3);
    ck_assert_int_eq(o.src.index, 1);
    ck_assert_int_eq(o.src.scale, 4);
    ck_assert_int_eq(o.src.size, 4);
}
END_TEST

START_TEST(test_arch_ops_sign_extensions)
{
    const uint8_t cdqe[] = { 0x48, 0x98 };
    const uint8_t cwde[] = { 0x98 };
    const uint8_t movsbl[] = { 0x0f, 0xbe, 0xc1 }; /* movsbl %cl,%eax */
    const uint8_t movslq[] = { 0x48, 0x63, 0xc2 }; /* movslq %edx,%rax */
    const uint8_t movzbl[] = { 0x0f, 0xb6, 0x04, 0x07 }; /* movzbl (%rdi,%rax),%eax */
    arch_ops_t o;

    ck_assert_int_eq(arch_decode_ops(cdqe, sizeof(cdqe), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_MOVSX);
    ck_assert_int_eq(o.dst.kind, ARCH_OPND_REG);
    ck_assert_int_eq(o.dst.reg, 1);
    ck_assert_int_eq(o.dst.size, 8);
    ck_assert_int_eq(o.src.kind, ARCH_OPND_REG);
    ck_assert_int_eq(o.src.reg, 1);
    ck_assert_int_eq(o.src.size, 4);

    ck_assert_int_eq(arch_decode_ops(cwde, sizeof(cwde), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_MOVSX);
    ck_assert_int_eq(o.dst.size, 4);
    ck_assert_int_eq(o.src.size, 2);

    ck_assert_int_eq(arch_decode_ops(movsbl, sizeof(movsbl), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_MOVSX);
    ck_assert_int_eq(o.dst.reg, 1);
    ck_assert_int_eq(o.dst.size, 4);
    ck_assert_int_eq(o.src.reg, 2);
    ck_assert_int_eq(o.src.size, 1);

    ck_assert_int_eq(arch_decode_ops(movslq, sizeof(movslq), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_MOVSX);
    ck_assert_int_eq(o.src.reg, 3);
    ck_assert_int_eq(o.src.size, 4);

    ck_assert_int_eq(arch_decode_ops(movzbl, sizeof(movzbl), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_MOVZX);
    ck_assert_int_eq(o.src.kind, ARCH_OPND_MEM);
    ck_assert_int_eq(o.src.size, 1);
    ck_assert_int_eq(o.src.base, 8);
    ck_assert_int_eq(o.src.index, 1);
}
END_TEST

START_TEST(test_arch_ops_alu)
{
    const uint8_t shl[] = { 0x48, 0xc1, 0xe0, 0x03 }; /* shl $3,%rax */
    const uint8_t shl1[] = { 0xd1, 0xe2 }; /* shl %edx */
    const uint8_t shlcl[] = { 0xd3, 0xe0 }; /* shl %cl,%eax */
    const uint8_t andq[] = { 0x48, 0x83, 0xe0, 0xf0 }; /* and $-16,%rax */
    const uint8_t sub[] = { 0x48, 0x29, 0xd0 }; /* sub %rdx,%rax */
    const uint8_t xorl[] = { 0x31, 0xc0 }; /* xor %eax,%eax */
    const uint8_t test[] = { 0x85, 0xc9 }; /* test %ecx,%ecx */
    const uint8_t cmpm[] = { 0x48, 0x3b, 0x47, 0x08 }; /* cmp 8(%rdi),%rax */
    arch_ops_t o;

    ck_assert_int_eq(arch_decode_ops(shl, sizeof(shl), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_SHL);
    ck_assert_int_eq(o.dst.reg, 1);
    ck_assert_int_eq(o.src.kind, ARCH_OPND_IMM);
    ck_assert_int_eq(o.src.imm, 3);

    ck_assert_int_eq(arch_decode_ops(shl1, sizeof(shl1), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_SHL);
    ck_assert_int_eq(o.dst.reg, 3);
    ck_assert_int_eq(o.src.imm, 1);

    ck_assert_int_eq(arch_decode_ops(shlcl, sizeof(shlcl), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_OTHER);
    ck_assert_int_eq(o.dst.kind, ARCH_OPND_REG);
    ck_assert_int_eq(o.dst.reg, 1);

    ck_assert_int_eq(arch_decode_ops(andq, sizeof(andq), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_AND);
    ck_assert_int_eq(o.src.imm, -16);

    ck_assert_int_eq(arch_decode_ops(sub, sizeof(sub), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_SUB);
    ck_assert_int_eq(o.src.reg, 3);

    ck_assert_int_eq(arch_decode_ops(xorl, sizeof(xorl), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_XOR);
    ck_assert_int_eq(o.dst.reg, 1);
    ck_assert_int_eq(o.src.reg, 1);

    ck_assert_int_eq(arch_decode_ops(test, sizeof(test), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_TEST);
    ck_assert_int_eq(o.dst.reg, 2);

    ck_assert_int_eq(arch_decode_ops(cmpm, sizeof(cmpm), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_CMP);
    ck_assert_int_eq(o.dst.reg, 1);
    ck_assert_int_eq(o.src.kind, ARCH_OPND_MEM);
    ck_assert_int_eq(o.src.base, 8);
    ck_assert_int_eq(o.src.disp, 8);
}
END_TEST

START_TEST(test_arch_ops_mov_forms)
{
    const uint8_t fs[] = { 0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00 };
    const uint8_t store[] = { 0x48, 0x89, 0x44, 0x24, 0x08 }; /* mov %rax,8(%rsp) */
    const uint8_t imm64[]
        = { 0x48, 0xb8, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11 };
    const uint8_t immneg[]
        = { 0x48, 0xc7, 0xc0, 0xff, 0xff, 0xff, 0xff }; /* mov $-1,%rax */
    const uint8_t r15[] = { 0x4d, 0x89, 0xc7 }; /* mov %r8,%r15 */
    const uint8_t seg[] = { 0x8c, 0xd8 }; /* mov %ds,%eax */
    arch_ops_t o;

    ck_assert_int_eq(arch_decode_ops(fs, sizeof(fs), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_MOV);
    ck_assert_int_eq(o.src.kind, ARCH_OPND_MEM);
    ck_assert_int_ne(o.src.seg, 0);
    ck_assert_int_eq(o.src.base, ARCH_REG_NONE);
    ck_assert_int_eq(o.src.disp, 0x28);

    ck_assert_int_eq(arch_decode_ops(store, sizeof(store), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_MOV);
    ck_assert_int_eq(o.dst.kind, ARCH_OPND_MEM);
    ck_assert_int_eq(o.dst.base, 5);
    ck_assert_int_eq(o.dst.disp, 8);
    ck_assert_int_eq(o.dst.size, 8);
    ck_assert_int_eq(o.dst.seg, 0);
    ck_assert_int_eq(o.src.reg, 1);

    ck_assert_int_eq(arch_decode_ops(imm64, sizeof(imm64), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_MOV);
    ck_assert_int_eq(o.src.kind, ARCH_OPND_IMM);
    ck_assert(o.src.imm == 0x1122334455667788ll);

    ck_assert_int_eq(arch_decode_ops(immneg, sizeof(immneg), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_MOV);
    ck_assert_int_eq(o.src.imm, -1);

    ck_assert_int_eq(arch_decode_ops(r15, sizeof(r15), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_MOV);
    ck_assert_int_eq(o.dst.reg, 16);
    ck_assert_int_eq(o.src.reg, 9);

    /* A segment register is outside the neutral set: only the clobber is told. */
    ck_assert_int_eq(arch_decode_ops(seg, sizeof(seg), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_OTHER);
    ck_assert_int_eq(o.dst.kind, ARCH_OPND_REG);
    ck_assert_int_eq(o.dst.reg, 1);
}
END_TEST

START_TEST(test_arch_ops_other_clobbers)
{
    const uint8_t mul[] = { 0xf7, 0xe3 }; /* mul %ebx: rdx:rax */
    const uint8_t cpuid[] = { 0x0f, 0xa2 };
    const uint8_t pop[] = { 0x41, 0x5c }; /* pop %r12 */
    const uint8_t movd[] = { 0x66, 0x0f, 0x7e, 0xc0 }; /* movd %xmm0,%eax */
    const uint8_t vec[] = { 0xc5, 0xf8, 0x28, 0xc1 }; /* vmovaps %xmm1,%xmm0 */
    const uint8_t ret[] = { 0xc3 };
    const uint8_t syscall[] = { 0x0f, 0x05 };
    arch_ops_t o;

    ck_assert_int_eq(arch_decode_ops(mul, sizeof(mul), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_OTHER);
    ck_assert_int_eq(o.dst.kind, ARCH_OPND_REG);
    ck_assert(o.dst.reg == 1 || o.dst.reg == 3);
    ck_assert_uint_eq(o.regs_written, (1u << 1) | (1u << 3));

    ck_assert_int_eq(arch_decode_ops(cpuid, sizeof(cpuid), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_OTHER);
    ck_assert_uint_eq(o.regs_written, 0x1eu);

    ck_assert_int_eq(arch_decode_ops(pop, sizeof(pop), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_OTHER);
    ck_assert_int_eq(o.dst.kind, ARCH_OPND_REG);
    ck_assert_int_eq(o.dst.reg, 13);
    ck_assert_uint_eq(o.regs_written, (1u << 13) | (1u << 5));

    ck_assert_int_eq(arch_decode_ops(movd, sizeof(movd), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_OTHER);
    ck_assert_int_eq(o.dst.kind, ARCH_OPND_REG);
    ck_assert_int_eq(o.dst.reg, 1);
    ck_assert_int_eq(o.dst.size, 4);

    /* A vector destination: clobbered, but not a neutral register. */
    ck_assert_int_eq(arch_decode_ops(vec, sizeof(vec), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_OTHER);
    ck_assert_int_eq(o.dst.kind, ARCH_OPND_REG);
    ck_assert_int_eq(o.dst.reg, ARCH_REG_NONE);
    ck_assert_uint_eq(o.regs_written, 0);

    ck_assert_int_eq(arch_decode_ops(ret, sizeof(ret), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_OTHER);
    ck_assert_int_eq(o.src.kind, ARCH_OPND_NONE);

    ck_assert_int_eq(arch_decode_ops(syscall, sizeof(syscall), ADDR, &o), 0);
    ck_assert_int_eq(o.op, ARCH_OP_OTHER);
    ck_assert(o.regs_written & (1u << 2)); /* rcx */
    ck_assert(o.regs_written & (1u << 12)); /* r11 */
}
END_TEST

/* arch_decode and arch_decode_ops agree on the direct targets. */
static void
ops_target_row(const decode_case_t* c)
{
    arch_insn_t in;
    arch_ops_t o;

    EXPECT(arch_decode(c->bytes, c->n, c->addr, &in) == 0, "%s: rc", c->name);
    EXPECT(arch_decode_ops(c->bytes, c->n, c->addr, &o) == 0, "%s: ops rc", c->name);
    if (in.kind == ARCH_KIND_JMP || in.kind == ARCH_KIND_CALL
        || in.kind == ARCH_KIND_JCC) {
        EXPECT(o.op == ARCH_OP_JMP || o.op == ARCH_OP_CALL || o.op == ARCH_OP_JCC,
            "%s: op %u", c->name, o.op);
        EXPECT(o.src.kind == ARCH_OPND_IMM && (uint64_t)o.src.imm == in.target,
            "%s: ops target %#llx", c->name, (unsigned long long)o.src.imm);
    }
}

START_TEST(test_arch_ops_target_matches_decode)
{
    CHECK_ROWS(ops_target_row, decode_cases);
}
END_TEST

/*****************************************************************************
 * Padding and register names
 */

typedef struct pad_case {
    const char* name;
    const uint8_t* bytes;
    size_t n;
    int padding; /* expected arch_is_padding */
} pad_case_t;

static const pad_case_t pad_cases[] = {
    { "nothing", B(""), 1 },
    { "nop", B("\x90"), 1 },
    { "int3s", B("\xcc\xcc\xcc\xcc"), 1 },
    { "zeros", B("\x00\x00\x00"), 1 },
    { "xchg %ax,%ax", B("\x66\x90"), 1 },
    { "data16 cs nopw", B("\x66\x2e\x0f\x1f\x84\x00\x00\x00\x00\x00"), 1 },
    { "gcc 16-byte padding",
        B("\x66\x66\x2e\x0f\x1f\x84\x00\x00\x00\x00\x00\x0f\x1f\x40\x00"), 1 },
    { "nops, int3 and zeros", B("\x90\xcc\x0f\x1f\x00\x00\x66\x90\x00\xcc"), 1 },
    { "15-byte nop", B("\x66\x66\x66\x66\x66\x66\x2e\x0f\x1f\x84\x00\x00\x00\x00\x00"),
        1 },
    { "nop cut short", B("\x0f\x1f\x44\x00"), 0 },
    { "nops then ret", B("\x90\x90\xc3"), 0 },
    { "ret", B("\xc3"), 0 },
    { "mov %rsp,%rbp", B("\x48\x89\xe5"), 0 },
    { "endbr64", B("\xf3\x0f\x1e\xfa"), 0 },
    { "jmp +0", B("\xeb\x00"), 0 },
    { "pause", B("\xf3\x90"), 0 },
    { "xchg %eax,%eax (zero-extends)", B("\x87\xc0"), 0 },
    { "invalid byte", B("\x90\x06"), 0 },
};

static void
pad_row(const pad_case_t* c)
{
    EXPECT(!!arch_is_padding(c->bytes, c->n) == c->padding, "%s: padding is %d", c->name,
        !c->padding);
}

START_TEST(test_arch_is_padding_table) { CHECK_ROWS(pad_row, pad_cases); }
END_TEST

START_TEST(test_arch_is_padding_null)
{
    ck_assert(arch_is_padding(NULL, 0));
    ck_assert(!arch_is_padding(NULL, 4));
}
END_TEST

/* arch_frame_entry: the start of a function that keeps a frame pointer. */
static const pad_case_t frame_cases[] = {
    { "push %rbp; mov %rsp,%rbp", B("\x55\x48\x89\xe5\x5d\xc3"), 1 },
    { "the other mov encoding", B("\x55\x48\x8b\xec"), 1 },
    { "after endbr64", B("\xf3\x0f\x1e\xfa\x55\x48\x89\xe5"), 1 },
    { "cut short", B("\x55\x48\x89"), 0 },
    { "push %rbp alone", B("\x55\x41\x57\x41\x56"), 0 },
    { "mov %rsp,%rbp first", B("\x48\x89\xe5\x55"), 0 },
    { "endbr64 then no frame", B("\xf3\x0f\x1e\xfa\x48\x89\xf8\xc3"), 0 },
    { "int3 then a frame", B("\xcc\x55\x48\x89\xe5"), 0 },
};

static void
frame_row(const pad_case_t* c)
{
    EXPECT(!!arch_frame_entry(c->bytes, c->n) == c->padding, "%s: frame entry is %d",
        c->name, !c->padding);
}

START_TEST(test_arch_frame_entry_table) { CHECK_ROWS(frame_row, frame_cases); }
END_TEST

START_TEST(test_arch_frame_entry_null) { ck_assert(!arch_frame_entry(NULL, 8)); }
END_TEST

/* arch_looks_like_data: bytes that begin as data rather than a function's code. */
static const pad_case_t data_cases[] = {
    { "two zero bytes (add %al,(%rax))", B("\x00\x00\x48\x89\xe5"), 1 },
    { "one byte", B("\xc3"), 1 },
    { "nothing", B(""), 1 },
    { "ret", B("\xc3\xcc"), 0 },
    { "zero then code", B("\x00\xc3"), 0 },
    { "code then zeros", B("\x31\xc0\x00\x00"), 0 },
    { "a frame", B("\x55\x48\x89\xe5"), 0 },
};

static void
data_row(const pad_case_t* c)
{
    EXPECT(!!arch_looks_like_data(c->bytes, c->n) == c->padding, "%s: data is %d",
        c->name, !c->padding);
}

START_TEST(test_arch_looks_like_data_table)
{
    CHECK_ROWS(data_row, data_cases);
    ck_assert(arch_looks_like_data(NULL, 8));
    ck_assert(arch_isa_host()->looks_like_data == arch_looks_like_data);
}
END_TEST

START_TEST(test_arch_reg_name)
{
    ck_assert_str_eq(arch_reg_name(ARCH_REG_NONE), "none");
    ck_assert_str_eq(arch_reg_name(1), "rax");
    ck_assert_str_eq(arch_reg_name(5), "rsp");
    ck_assert_str_eq(arch_reg_name(8), "rdi");
    ck_assert_str_eq(arch_reg_name(9), "r8");
    ck_assert_str_eq(arch_reg_name(16), "r15");
    ck_assert_str_eq(arch_reg_name(ARCH_REG_PC), "rip");
    ck_assert_ptr_nonnull(arch_reg_name(-1));
    ck_assert_ptr_nonnull(arch_reg_name(ARCH_NREGS));
    ck_assert_ptr_nonnull(arch_reg_name(1000));
}
END_TEST

/*
 * arch_go_may_fault (patch/pt_go.c's rule for Go): every operand, explicit or hidden, in
 * any place. The first five "may fault" cases are ones the two operands of
 * arch_decode_ops did not show: a memory source in third place (3-operand AVX, as in
 * Go's assembly), an instruction decode_ops gives no source for, a hidden operand.
 */
typedef struct go_case {
    const char* name;
    uint8_t b[16];
    size_t n;
    int faults;
} go_case_t;

START_TEST(test_arch_go_may_fault)
{
    static const go_case_t cases[] = {
        { "vpcmpeqb (%rsi),%ymm1,%ymm2", { 0xc5, 0xf5, 0x74, 0x16 }, 4, 1 },
        { "vpaddd 0x20(%rax),%xmm1,%xmm0", { 0xc5, 0xf1, 0xfe, 0x40, 0x20 }, 5, 1 },
        { "movups (%rax),%xmm0", { 0x0f, 0x10, 0x00 }, 3, 1 },
        { "push (%rax)", { 0xff, 0x30 }, 2, 1 },
        { "rep movsq", { 0xf3, 0x48, 0xa5 }, 3, 1 },
        { "mov (%rcx),%rax", { 0x48, 0x8b, 0x01 }, 3, 1 },
        { "mov %rax,0x8(%rdx)", { 0x48, 0x89, 0x42, 0x08 }, 4, 1 },
        { "call *0x8(%rax)", { 0xff, 0x50, 0x08 }, 3, 1 },
        { "mov 0x0,%eax (absolute)", { 0x8b, 0x04, 0x25, 0, 0, 0, 0 }, 7, 1 },
        { "(not an instruction)", { 0x06 }, 1, 1 },
        { "cmp 0x10(%r14),%rsp (the goroutine)", { 0x49, 0x3b, 0x66, 0x10 }, 4, 0 },
        { "mov %rbp,0x8(%rsp)", { 0x48, 0x89, 0x6c, 0x24, 0x08 }, 5, 0 },
        { "mov 0x10(%rip),%rax", { 0x48, 0x8b, 0x05, 0x10, 0, 0, 0 }, 7, 0 },
        { "mov %fs:0xfffffffffffffff8,%r14", { 0x64, 0x4c, 0x8b, 0x34, 0x25, 0xf8, 0xff, 0xff, 0xff }, 9, 0 },
        { "vmovdqu %ymm0,0x20(%rsp)", { 0xc5, 0xfe, 0x7f, 0x44, 0x24, 0x20 }, 6, 0 },
        { "push %rbp", { 0x55 }, 1, 0 },
        { "call rel32", { 0xe8, 0, 0, 0, 0 }, 5, 0 },
        { "ret", { 0xc3 }, 1, 0 },
        { "lea 0x8(%rax),%rbx", { 0x48, 0x8d, 0x58, 0x08 }, 4, 0 },
        { "nopw 0(%rax,%rax)", { 0x66, 0x0f, 0x1f, 0x44, 0, 0 }, 6, 0 },
        { "prefetcht0 (%rax)", { 0x0f, 0x18, 0x08 }, 3, 0 },
        { "xor %ecx,%ecx", { 0x31, 0xc9 }, 2, 0 },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const go_case_t* c = &cases[i];
        ck_assert_msg(arch_go_may_fault(c->b, c->n, ADDR) == c->faults, "%s: %d, want %d",
            c->name, arch_go_may_fault(c->b, c->n, ADDR), c->faults);
        ck_assert_msg(arch_isa_host()->go_may_fault(c->b, c->n, ADDR) == c->faults,
            "%s: the ISA table's answer differs", c->name);
    }
    /* The first: arch_decode_ops shows no memory operand (the old rule's view). */
    arch_ops_t ops;
    ck_assert_int_eq(arch_decode_ops(cases[0].b, cases[0].n, ADDR, &ops), 0);
    ck_assert(ops.dst.kind != ARCH_OPND_MEM && ops.src.kind != ARCH_OPND_MEM);
    /* AArch64 has no test yet: patch/ takes every instruction as one that may fault. */
    ck_assert_ptr_null(arch_isa_for_machine(ARCH_EM_AARCH64)->go_may_fault);
}
END_TEST

/*****************************************************************************
 * The suite
 */

/* Address tracing: arch_decode_mem's accesses for the shapes drv_trace.c records. */
typedef struct mem_case {
    const char* name;
    uint8_t b[16];
    size_t n;
    int nrefs;
    uint8_t kind, access, base, index, scale, seg;
    uint16_t size;
    int64_t disp;
} mem_case_t;

START_TEST(test_arch_decode_mem_table)
{
    static const mem_case_t cases[] = {
        { "mov (%rax),%rbx", { 0x48, 0x8b, 0x18 }, 3, 1, ARCH_MREF_EA, ARCH_MEM_LOAD, 1, 0, 1, 0, 8, 0 },
        { "mov %ecx,0x10(%rbx,%rsi,4)", { 0x89, 0x4c, 0xb3, 0x10 }, 4, 1, ARCH_MREF_EA, ARCH_MEM_STORE, 4, 7, 4, 0, 4, 0x10 },
        { "add %eax,(%rdx)", { 0x01, 0x02 }, 2, 1, ARCH_MREF_EA, ARCH_MEM_LOAD | ARCH_MEM_STORE, 3, 0, 1, 0, 4, 0 },
        { "mov 0x10(%rip),%rax", { 0x48, 0x8b, 0x05, 0x10, 0, 0, 0 }, 7, 1, ARCH_MREF_STATIC, ARCH_MEM_LOAD, 0, 0, 0, 0, 8, ADDR + 7 + 0x10 },
        { "mov %fs:0x28,%rax", { 0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0 }, 9, 1, ARCH_MREF_EA, ARCH_MEM_LOAD, 0, 0, 1, 1, 8, 0x28 },
        { "push %rbp", { 0x55 }, 1, 1, ARCH_MREF_EA, ARCH_MEM_STORE, ARCH_REG_SP, 0, 1, 0, 8, -8 },
        { "pop %rbp", { 0x5d }, 1, 1, ARCH_MREF_EA, ARCH_MEM_LOAD, ARCH_REG_SP, 0, 1, 0, 8, 0 },
        { "ret", { 0xc3 }, 1, 1, ARCH_MREF_EA, ARCH_MEM_LOAD, ARCH_REG_SP, 0, 1, 0, 8, 0 },
        { "leave", { 0xc9 }, 1, 1, ARCH_MREF_EA, ARCH_MEM_LOAD, 6, 0, 1, 0, 8, 0 },
        { "call rel32", { 0xe8, 0, 0, 0, 0 }, 5, 1, ARCH_MREF_EA, ARCH_MEM_STORE, ARCH_REG_SP, 0, 1, 0, 8, -8 },
        { "rep movsb", { 0xf3, 0xa4 }, 2, 1, ARCH_MREF_STRING, ARCH_MEM_LOAD, 0, 0, 0, 0, 1, 0 },
        { "repe cmpsb", { 0xf3, 0xa6 }, 2, 1, ARCH_MREF_UNTRACED, 0, 0, 0, 0, 0, 0, 0 },
        { "lea 8(%rax),%rbx", { 0x48, 0x8d, 0x58, 0x08 }, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
        { "nopw 0(%rax,%rax)", { 0x66, 0x0f, 0x1f, 0x44, 0, 0 }, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
        { "movdqa (%rsi),%xmm0", { 0x66, 0x0f, 0x6f, 0x06 }, 4, 1, ARCH_MREF_EA, ARCH_MEM_LOAD, 7, 0, 1, 0, 16, 0 },
        { "mov %eax,%ebx", { 0x89, 0xc3 }, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const mem_case_t* c = &cases[i];
        arch_mref_t r[ARCH_MAX_MREFS];
        int n = -1;
        ck_assert_msg(arch_decode_mem(c->b, c->n, ADDR, r, &n) == 0, "%s: not decoded", c->name);
        ck_assert_msg(n == c->nrefs, "%s: %d accesses, want %d", c->name, n, c->nrefs);
        if (n == 0)
            continue;
        ck_assert_msg(r[0].kind == c->kind, "%s: kind %u", c->name, r[0].kind);
        if (c->kind == ARCH_MREF_UNTRACED)
            continue;
        ck_assert_msg(r[0].access == c->access && r[0].size == c->size, "%s: access %u size %u",
            c->name, r[0].access, r[0].size);
        if (c->kind == ARCH_MREF_STRING) {
            ck_assert_msg(r[0].rep && r[0].access2 == ARCH_MEM_STORE, "%s: rep %u access2 %u",
                c->name, r[0].rep, r[0].access2);
            continue;
        }
        ck_assert_msg(r[0].disp == c->disp, "%s: disp %lld", c->name, (long long)r[0].disp);
        if (c->kind == ARCH_MREF_EA)
            ck_assert_msg(r[0].base == c->base && r[0].index == c->index && r[0].scale == c->scale
                    && (r[0].seg != 0) == (c->seg != 0),
                "%s: base %u index %u scale %u seg %u", c->name, r[0].base, r[0].index,
                r[0].scale, r[0].seg);
    }
    /* push (%rax): the load, then the stack store */
    static const uint8_t pushm[] = { 0xff, 0x30 };
    arch_mref_t r[ARCH_MAX_MREFS];
    int n = 0;
    ck_assert_int_eq(arch_decode_mem(pushm, sizeof(pushm), ADDR, r, &n), 0);
    ck_assert_int_eq(n, 2);
    ck_assert(r[0].access == ARCH_MEM_LOAD && r[0].base == 1);
    ck_assert(r[1].access == ARCH_MEM_STORE && r[1].base == ARCH_REG_SP && r[1].disp == -8);
    ck_assert_int_eq(arch_decode_mem(NULL, 1, ADDR, r, &n), QP_EINVAL);
}
END_TEST

START_TEST(test_arch_plt_layout)
{
    /* The PLT layouts as BFD's synthetic symbols read them (arch/x86_64/x86_plt.c) */
    uint8_t b[64] = { 0 };
    static const uint8_t plt0[] = { 0xff, 0x35, 2, 0, 0, 0, 0xff, 0x25, 4, 0, 0, 0 };
    static const uint8_t lazy1[] = { 0xff, 0x25, 8, 0, 0, 0, 0x68, 0, 0, 0, 0, 0xe9 };
    static const uint8_t ibt1[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x68, 0, 0, 0, 0, 0xe9 };
    arch_plt_layout_t cur, l;
    memcpy(b, plt0, sizeof(plt0));
    memcpy(b + 16, lazy1, sizeof(lazy1));
    arch_plt_layout_init(&cur);
    ck_assert_int_eq(arch_plt_layout(b, 32, 1, &cur, &l), 1); /* lazy .plt */
    ck_assert(l.entry_size == 16 && l.jmp_end == 6 && l.skip_first && !l.none);
    memcpy(b + 16, ibt1, sizeof(ibt1)); /* lazy halves: the stubs are in .plt.sec */
    ck_assert_int_eq(arch_plt_layout(b, 32, 1, &cur, &l), 1);
    ck_assert(l.none);
    ck_assert_int_eq(arch_plt_layout(b, 16, 1, &cur, &l), 0); /* no room for PLT0 + 1 */
    ck_assert_int_eq(arch_plt_layout(b + 16, 16, 0, &cur, &l), 0); /* lazy half */
    /* .plt.got: jmp *slot(%rip); xchg %ax,%ax */
    memcpy(b, lazy1, 6);
    ck_assert_int_eq(arch_plt_layout(b, 8, 0, &cur, &l), 1);
    ck_assert(l.entry_size == 8 && l.jmp_end == 6 && !l.skip_first && !l.none);
    /* .plt.sec: endbr64; jmp *slot(%rip); nopw: becomes the non-lazy form after it */
    static const uint8_t sec[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0xff, 0x25, 1, 0, 0, 0 };
    memcpy(b, sec, sizeof(sec));
    ck_assert_int_eq(arch_plt_layout(b, 15, 0, &cur, &l), 0); /* shorter than one entry */
    ck_assert_int_eq(arch_plt_layout(b, 16, 0, &cur, &l), 1);
    ck_assert(l.entry_size == 16 && l.jmp_end == 10);
    ck_assert(cur.entry_size == 16 && cur.jmp_end == 10);
}
END_TEST

static Suite*
arch_suite(void)
{
    Suite* s = suite_create("arch");
    TCase* tc;

    tc = tcase_create("decode");
    tcase_add_test(tc, test_arch_decode_table);
    tcase_add_test(tc, test_arch_decode_rejects);
    tcase_add_test(tc, test_arch_decode_truncated_table);
    tcase_add_test(tc, test_decode_padding_nops);
    tcase_add_test(tc, test_decode_fast_as_zydis);
    tcase_add_test(tc, test_arch_decode_null_args);
    tcase_add_test(tc, test_arch_decode_random_bytes);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);

    tc = tcase_create("flags");
    tcase_add_test(tc, test_arch_decode_flags);
    suite_add_tcase(s, tc);

    tc = tcase_create("roundtrip");
    tcase_add_test(tc, test_arch_decode_roundtrip);
    suite_add_tcase(s, tc);

    tc = tcase_create("ops");
    tcase_add_test(tc, test_arch_ops_movslq_table_load);
    tcase_add_test(tc, test_arch_ops_lea_riprel);
    tcase_add_test(tc, test_arch_ops_add);
    tcase_add_test(tc, test_arch_ops_cmp_ja);
    tcase_add_test(tc, test_arch_ops_jcc_conds);
    tcase_add_test(tc, test_arch_ops_jmp_table);
    tcase_add_test(tc, test_arch_ops_jmp_forms);
    tcase_add_test(tc, test_arch_ops_mov_table_load);
    tcase_add_test(tc, test_arch_ops_sign_extensions);
    tcase_add_test(tc, test_arch_ops_alu);
    tcase_add_test(tc, test_arch_ops_mov_forms);
    tcase_add_test(tc, test_arch_ops_other_clobbers);
    tcase_add_test(tc, test_arch_ops_target_matches_decode);
    suite_add_tcase(s, tc);

    tc = tcase_create("padding");
    tcase_add_test(tc, test_arch_is_padding_table);
    tcase_add_test(tc, test_arch_is_padding_null);
    tcase_add_test(tc, test_arch_frame_entry_table);
    tcase_add_test(tc, test_arch_frame_entry_null);
    tcase_add_test(tc, test_arch_looks_like_data_table);
    suite_add_tcase(s, tc);

    tc = tcase_create("mem");
    tcase_add_test(tc, test_arch_decode_mem_table);
    tcase_add_test(tc, test_arch_go_may_fault);
    suite_add_tcase(s, tc);

    tc = tcase_create("names");
    tcase_add_test(tc, test_arch_reg_name);
    tcase_add_test(tc, test_arch_plt_layout);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner* sr = srunner_create(arch_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
