/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Unit tests of the snippet compiler (arch_snip_emit): every operation and operand kind,
 * compiled into an executable page and run through tests/snip_harness.S, which loads
 * known values into every register and the flags and checks afterwards that the snippet
 * kept them all, and the red zone below the stack pointer. Values are checked against
 * the same computation in C; errors of arch_snip_check name the node.
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "arch/arch.h"

#define PAGE 0x10000
#define DATA 0x1800 /* where the words the snippets read and write live in the page */
#define KEYS 0x4000 /* a thread-slot table (ARCH_SNIP_THREADS keys) */
#define PER_THREAD 0x8000 /* a word per thread slot (ARCH_SNIP_THREADS + 1) */

void snip_run(uint64_t regs[18], void *code);

static uint8_t *page;

static void
setup(void)
{
    page = mmap(NULL, PAGE, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
                -1, 0);
    ck_assert_ptr_ne(page, MAP_FAILED);
}

static void
teardown(void)
{
    munmap(page, PAGE);
}

/* The address of data word K. */
static uint64_t
word(int k)
{
    return (uint64_t)(uintptr_t)(page + DATA + 8 * k);
}

static uint64_t *
wordp(int k)
{
    return (uint64_t *)(page + DATA + 8 * k);
}

/* A snippet under construction. */
typedef struct sn {
    arch_snip_t v[64];
    uint32_t n;
} sn_t;

static uint32_t
node(sn_t *s, uint8_t op, uint32_t a, uint32_t b, int64_t imm)
{
    ck_assert_uint_lt(s->n, 64);
    s->v[s->n] = (arch_snip_t) { .op = op, .size = 8, .a = a, .b = b, .c = ARCH_SNIP_NONE,
                                 .imm = imm };
    return s->n++;
}

static uint32_t
cnst(sn_t *s, int64_t v)
{
    return node(s, ARCH_SN_CONST, ARCH_SNIP_NONE, ARCH_SNIP_NONE, v);
}

static uint32_t
arg(sn_t *s, int i)
{
    return node(s, ARCH_SN_ARG, ARCH_SNIP_NONE, ARCH_SNIP_NONE, i);
}

static uint32_t
store(sn_t *s, int k, uint32_t v)
{
    return node(s, ARCH_SN_STORE, v, ARCH_SNIP_NONE, (int64_t)word(k));
}

/* The register values every run starts with (rsp's slot unused), and the flags. */
static void
init_regs(uint64_t r[18], uint64_t flags)
{
    for (int i = 0; i < 16; i++)
        r[i] = 0x1111111111111111ull * (uint64_t)(i + 1) + (uint64_t)i;
    r[16] = flags;
    r[17] = 0;
}

/* Compile S (root ROOT) for CTX at the page's start, append ret, run it with REGS
 * (initialised by the caller) and check that every register, the flags (when CTX says
 * they are live) and the red zone (when CTX says it is in use) were kept. Returns the
 * code's length. */
static int
run_ctx(const sn_t *s, uint32_t root, const arch_snip_ctx_t *ctx, uint64_t regs[18])
{
    uint64_t addr = (uint64_t)(uintptr_t)page;
    int n = arch_snip_emit(s->v, s->n, root, ctx, addr, page, DATA - 1);
    ck_assert_msg(n > 0, "arch_snip_emit: %d", n);
    ck_assert_int_eq(arch_snip_emit(s->v, s->n, root, ctx, addr, NULL, 0), n);
    page[n] = 0xc3;
    uint64_t before[18];
    memcpy(before, regs, sizeof(before));
    snip_run(regs, page);
    for (int i = 0; i < 16; i++)
        if (i != 4 && !(ctx->dead_regs & (1u << (i + 1))))
            ck_assert_msg(regs[i] == before[i], "register %d changed: %llx -> %llx", i,
                          (unsigned long long)before[i], (unsigned long long)regs[i]);
    if (ctx->live_flags)
        ck_assert_uint_eq(regs[16] & 0x8d5, before[16] & 0x8d5); /* CF PF AF ZF SF OF */
    if (!ctx->no_red_zone)
        ck_assert_uint_eq(regs[17], 0);
    return n;
}

static const arch_snip_ctx_t at_entry = { .where = ARCH_SNX_ENTRY, .no_red_zone = 1 };
static const arch_snip_ctx_t anywhere = { .live_flags = 0x3f };

/* Run at an entry with arguments A0..A2 in rdi, rsi, rdx. */
static int
run_args(const sn_t *s, uint32_t root, int64_t a0, int64_t a1, int64_t a2)
{
    uint64_t r[18];
    init_regs(r, 0x202);
    r[7] = (uint64_t)a0;
    r[6] = (uint64_t)a1;
    r[2] = (uint64_t)a2;
    return run_ctx(s, root, &at_entry, r);
}

/*****************************************************************************
 * Tests
 */

/* The benchmark snippet: if (arg1 > 10) counter++, at an entry: three
 * instructions, no register saved (flags are dead at an entry). */
START_TEST(test_snip_counter_if)
{
    sn_t s = { .n = 0 };
    uint32_t cmp = node(&s, ARCH_SN_GT, arg(&s, 0), cnst(&s, 10), 0);
    uint32_t inc = node(&s, ARCH_SN_ADD_TO, cnst(&s, 1), ARCH_SNIP_NONE, (int64_t)word(0));
    uint32_t root = node(&s, ARCH_SN_IF, cmp, inc, 0);
    *wordp(0) = 0;
    int64_t vals[] = { 5, 10, 11, -20, 1000 };
    int len = 0;
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
        len = run_args(&s, root, vals[i], 0, 0);
    ck_assert_uint_eq(*wordp(0), 2);
    ck_assert_int_le(len, 20);
}
END_TEST

/* Every binary operation, on arguments and constants, against C. */
START_TEST(test_snip_arith)
{
    static const int64_t pairs[][2] = {
        { 7, 3 }, { -7, 3 }, { 7, -3 }, { 0, 5 }, { 5, 0 }, { INT64_MIN, -1 },
        { INT64_MAX, 2 }, { -1, 63 }, { 123456789012345, 77 }, { 1, 64 },
    };
    static const uint8_t ops[] = { ARCH_SN_ADD, ARCH_SN_SUB, ARCH_SN_MUL, ARCH_SN_DIV,
                                   ARCH_SN_MOD, ARCH_SN_SHL, ARCH_SN_SHR, ARCH_SN_AND,
                                   ARCH_SN_OR,  ARCH_SN_XOR, ARCH_SN_EQ,  ARCH_SN_NE,
                                   ARCH_SN_LT,  ARCH_SN_LE,  ARCH_SN_GT,  ARCH_SN_GE };
    for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); p++)
        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
            for (int form = 0; form < 4; form++) {
                int64_t a = pairs[p][0], b = pairs[p][1];
                sn_t s = { .n = 0 };
                /* Operands: args, constants, loads, mixed. */
                uint32_t x = form == 0 ? arg(&s, 0) : form == 1 ? cnst(&s, a) : arg(&s, 1);
                uint32_t y = form == 0 ? arg(&s, 1)
                    : form == 2        ? node(&s, ARCH_SN_LOAD, ARCH_SNIP_NONE, ARCH_SNIP_NONE,
                                              (int64_t)word(5))
                                       : cnst(&s, b);
                *wordp(5) = (uint64_t)b;
                uint32_t root = store(&s, 1, node(&s, ops[o], x, y, 0));
                run_args(&s, root, a, form == 2 || form == 3 ? a : b, 0);
                uint64_t ua = (uint64_t)a, ub = (uint64_t)b, want = 0;
                switch (ops[o]) {
                case ARCH_SN_ADD: want = ua + ub; break;
                case ARCH_SN_SUB: want = ua - ub; break;
                case ARCH_SN_MUL: want = ua * ub; break;
                case ARCH_SN_DIV:
                    want = b == 0 ? 0 : b == -1 ? (uint64_t)0 - ua : (uint64_t)(a / b);
                    break;
                case ARCH_SN_MOD: want = b == 0 || b == -1 ? 0 : (uint64_t)(a % b); break;
                case ARCH_SN_SHL: want = ua << (ub & 63); break;
                case ARCH_SN_SHR: want = ua >> (ub & 63); break;
                case ARCH_SN_AND: want = ua & ub; break;
                case ARCH_SN_OR: want = ua | ub; break;
                case ARCH_SN_XOR: want = ua ^ ub; break;
                case ARCH_SN_EQ: want = a == b; break;
                case ARCH_SN_NE: want = a != b; break;
                case ARCH_SN_LT: want = a < b; break;
                case ARCH_SN_LE: want = a <= b; break;
                case ARCH_SN_GT: want = a > b; break;
                case ARCH_SN_GE: want = a >= b; break;
                }
                ck_assert_msg(*wordp(1) == want, "op %u form %d: %lld, %lld -> %llx, want %llx",
                              ops[o], form, (long long)a, (long long)b,
                              (unsigned long long)*wordp(1), (unsigned long long)want);
            }
}
END_TEST

/* Unsigned comparisons, arithmetic shifts, loads and stores of every size. */
START_TEST(test_snip_sizes_and_flags)
{
    sn_t s = { .n = 0 };
    uint32_t lt = node(&s, ARCH_SN_LT, arg(&s, 0), arg(&s, 1), 0);
    s.v[lt].flags = ARCH_SNF_UNSIGNED;
    uint32_t sar = node(&s, ARCH_SN_SHR, arg(&s, 0), cnst(&s, 4), 0);
    s.v[sar].flags = ARCH_SNF_SIGNED;
    uint32_t r = node(&s, ARCH_SN_SEQ, store(&s, 0, lt), store(&s, 1, sar), 0);
    run_args(&s, r, -1, 5, 0);
    ck_assert_uint_eq(*wordp(0), 0); /* 0xfff..f < 5 unsigned: no */
    ck_assert_uint_eq(*wordp(1), (uint64_t)-1);
    for (int size = 1; size <= 8; size *= 2) {
        sn_t t = { .n = 0 };
        uint32_t ld = node(&t, ARCH_SN_LOAD, ARCH_SNIP_NONE, ARCH_SNIP_NONE, (int64_t)word(2));
        t.v[ld].size = (uint8_t)size;
        uint32_t st = store(&t, 3, node(&t, ARCH_SN_ADD, ld, cnst(&t, 1), 0));
        t.v[st].size = (uint8_t)size;
        *wordp(2) = 0x8877665544332211ull;
        *wordp(3) = 0xffffffffffffffffull;
        uint64_t regs[18];
        init_regs(regs, 0x8d5 | 0x2);
        run_ctx(&t, st, &anywhere, regs); /* live flags, red zone in use */
        uint64_t mask = size == 8 ? ~0ull : (1ull << (8 * size)) - 1;
        ck_assert_uint_eq(*wordp(3) & mask, (0x8877665544332211ull + 1) & mask);
        ck_assert_uint_eq(*wordp(3) & ~mask, 0xffffffffffffffffull & ~mask);
    }
}
END_TEST

static int calls_of_side;
static int64_t
side(int64_t a)
{
    calls_of_side++;
    return a;
}

/* && and || evaluate their second operand only when it decides; ! and if/else. */
START_TEST(test_snip_logic)
{
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++)
            for (int op = 0; op < 2; op++) {
                sn_t s = { .n = 0 };
                uint32_t c = node(&s, ARCH_SN_CALL, ARCH_SNIP_NONE, ARCH_SNIP_NONE,
                                  (int64_t)(uintptr_t)side);
                s.v[c].nargs = 1;
                s.v[c].args[0] = arg(&s, 1);
                uint32_t l = node(&s, op ? ARCH_SN_LOR : ARCH_SN_LAND, arg(&s, 0), c, 0);
                uint32_t ifn = node(&s, ARCH_SN_IF, node(&s, ARCH_SN_NOT, l, 0, 0),
                                    store(&s, 0, cnst(&s, 100)), 0);
                s.v[ifn].c = store(&s, 0, cnst(&s, 200));
                uint32_t root = node(&s, ARCH_SN_SEQ, store(&s, 1, l), ifn, 0);
                calls_of_side = 0;
                run_args(&s, root, a, b, 0);
                int want = op ? (a || b) : (a && b);
                int evals = op ? !a : a; /* b decides only then, each time l is computed */
                ck_assert_uint_eq(*wordp(1), (uint64_t)want);
                ck_assert_uint_eq(*wordp(0), want ? 200 : 100);
                ck_assert_int_eq(calls_of_side, 2 * evals);
            }
}
END_TEST

int64_t snip_align_probe(void);
static int64_t
add3(int64_t a, int64_t b, int64_t c)
{
    return a + 2 * b + 3 * c;
}

/* A call of a C function with arguments from the program, a constant and a load, its
 * value stored; the callee finds the stack aligned to 16 (snip_align_probe returns
 * %rsp % 16 at its entry: 8 after a call from an aligned stack). */
START_TEST(test_snip_call)
{
    sn_t s = { .n = 0 };
    uint32_t c = node(&s, ARCH_SN_CALL, ARCH_SNIP_NONE, ARCH_SNIP_NONE,
                      (int64_t)(uintptr_t)add3);
    s.v[c].nargs = 3;
    s.v[c].args[0] = arg(&s, 2);
    s.v[c].args[1] = cnst(&s, 1000);
    s.v[c].args[2] = node(&s, ARCH_SN_LOAD, ARCH_SNIP_NONE, ARCH_SNIP_NONE, (int64_t)word(4));
    uint32_t al = node(&s, ARCH_SN_CALL, ARCH_SNIP_NONE, ARCH_SNIP_NONE,
                       (int64_t)(uintptr_t)snip_align_probe);
    uint32_t root = node(&s, ARCH_SN_SEQ, store(&s, 0, c), store(&s, 1, al), 0);
    *wordp(4) = 5;
    run_args(&s, root, 0, 0, 7);
    ck_assert_uint_eq(*wordp(0), 7 + 2000 + 15);
    ck_assert_uint_eq(*wordp(1), 8);
    /* Not at an entry: the red zone in use, the flags live. */
    sn_t t = { .n = 0 };
    uint32_t a2 = node(&t, ARCH_SN_CALL, ARCH_SNIP_NONE, ARCH_SNIP_NONE,
                       (int64_t)(uintptr_t)snip_align_probe);
    uint32_t r2 = store(&t, 2, a2);
    uint64_t regs[18];
    init_regs(regs, 0x8d5 | 0x2);
    run_ctx(&t, r2, &anywhere, regs);
    ck_assert_uint_eq(*wordp(2), 8);
}
END_TEST

/* Control-flow trace records (ARCH_SN_TRACE_REC): appended at %fs:ARCH_TRACE_CUR while
 * it is below %fs:ARCH_TRACE_LIM, else after a call of the refill (here a stub that moves
 * the buffer to a second one); registers, flags and the red zone kept. */
static uint64_t
fs_word(int off)
{
    uint64_t v;
    if (off == ARCH_TRACE_CUR)
        __asm__ volatile("mov %%fs:0x38, %0" : "=r"(v));
    else
        __asm__ volatile("mov %%fs:0x40, %0" : "=r"(v));
    return v;
}

static void
fs_set(uint64_t cur, uint64_t lim)
{
    __asm__ volatile("mov %0, %%fs:0x38\n\tmov %1, %%fs:0x40" : : "r"(cur), "r"(lim) : "memory");
}

START_TEST(test_snip_trace_rec)
{
    _Static_assert(ARCH_TRACE_CUR == 0x38 && ARCH_TRACE_LIM == 0x40, "the words tested");
    uint64_t old_cur = fs_word(ARCH_TRACE_CUR), old_lim = fs_word(ARCH_TRACE_LIM);
    uint32_t *buf1 = (uint32_t *)(page + DATA), *buf2 = (uint32_t *)(page + DATA + 64);
    /* The refill stub, after the snippet's code: push %rax; movabs $buf2,%rax;
     * mov %rax,%fs:0x38; lea 16(%rax),%rax; mov %rax,%fs:0x40; pop %rax; ret */
    uint8_t *stub = page + 0x1000;
    uint8_t code[] = { 0x50, 0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0,
                       0x64, 0x48, 0x89, 0x04, 0x25, 0x38, 0, 0, 0,
                       0x48, 0x8d, 0x40, 0x10,
                       0x64, 0x48, 0x89, 0x04, 0x25, 0x40, 0, 0, 0,
                       0x58, 0xc3 };
    uint64_t b2 = (uint64_t)(uintptr_t)buf2;
    memcpy(code + 3, &b2, 8);
    memcpy(stub, code, sizeof(code));
    sn_t s = { .n = 0 };
    uint32_t r = cnst(&s, (int64_t)(uintptr_t)stub);
    uint32_t root = node(&s, ARCH_SN_TRACE_REC, r, ARCH_SNIP_NONE, 0xabcd1234);
    memset(buf1, 0, 128);
    fs_set((uint64_t)(uintptr_t)buf1, (uint64_t)(uintptr_t)(buf1 + 2));
    for (int i = 0; i < 3; i++) {
        uint64_t regs[18];
        init_regs(regs, 0x8d5 | 0x2);
        run_ctx(&s, root, &anywhere, regs);
    }
    uint64_t cur = fs_word(ARCH_TRACE_CUR);
    fs_set(old_cur, old_lim);
    ck_assert_uint_eq(buf1[0], 0xabcd1234);
    ck_assert_uint_eq(buf1[1], 0xabcd1234);
    ck_assert_uint_eq(buf1[2], 0); /* the limit: the third went to the refilled buffer */
    ck_assert_uint_eq(buf2[0], 0xabcd1234);
    ck_assert_uint_eq(cur, (uint64_t)(uintptr_t)(buf2 + 1));
    /* The refill must be constant and in reach; the record 4 bytes. */
    sn_t t = { .n = 0 };
    uint32_t bad = node(&t, ARCH_SN_TRACE_REC, node(&t, ARCH_SN_SP, ARCH_SNIP_NONE,
                                                    ARCH_SNIP_NONE, 0), ARCH_SNIP_NONE, 1);
    ck_assert_int_eq(arch_snip_check(t.v, t.n, bad, &anywhere, NULL, 0), QP_EINVAL);
}
END_TEST

/* Address-trace values (ARCH_SN_TRACE_VAL): the record word, then the 8-byte value, 12
 * bytes at the cursor; the refill when the cursor is at the limit. */
START_TEST(test_snip_trace_val)
{
    uint64_t old_cur = fs_word(ARCH_TRACE_CUR), old_lim = fs_word(ARCH_TRACE_LIM);
    uint32_t *buf1 = (uint32_t *)(page + DATA), *buf2 = (uint32_t *)(page + DATA + 64);
    uint8_t *stub = page + 0x1000; /* as test_snip_trace_rec's */
    uint8_t code[] = { 0x50, 0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0,
                       0x64, 0x48, 0x89, 0x04, 0x25, 0x38, 0, 0, 0,
                       0x48, 0x8d, 0x40, 0x10,
                       0x64, 0x48, 0x89, 0x04, 0x25, 0x40, 0, 0, 0,
                       0x58, 0xc3 };
    uint64_t b2 = (uint64_t)(uintptr_t)buf2;
    memcpy(code + 3, &b2, 8);
    memcpy(stub, code, sizeof(code));
    sn_t s = { .n = 0 };
    uint32_t r = cnst(&s, (int64_t)(uintptr_t)stub);
    uint32_t v = cnst(&s, 0x1122334455667788);
    uint32_t root = node(&s, ARCH_SN_TRACE_VAL, r, v, 0xfffffff0);
    memset(buf1, 0, 128);
    fs_set((uint64_t)(uintptr_t)buf1, (uint64_t)(uintptr_t)(buf1 + 1));
    for (int i = 0; i < 2; i++) {
        uint64_t regs[18];
        init_regs(regs, 0x8d5 | 0x2);
        run_ctx(&s, root, &anywhere, regs);
    }
    uint64_t cur = fs_word(ARCH_TRACE_CUR);
    fs_set(old_cur, old_lim);
    ck_assert_uint_eq(buf1[0], 0xfffffff0);
    ck_assert_uint_eq(buf1[1], 0x55667788);
    ck_assert_uint_eq(buf1[2], 0x11223344);
    ck_assert_uint_eq(buf1[3], 0); /* past the limit: the second went to the refilled buffer */
    ck_assert_uint_eq(buf2[0], 0xfffffff0);
    ck_assert_uint_eq(buf2[1], 0x55667788);
    ck_assert_uint_eq(cur, (uint64_t)(uintptr_t)(buf2 + 3));
}
END_TEST

/* The chord tracer's 16-bit units (issue 31): a size-2 TRACE_REC reserves and writes 2
 * bytes, a size-2 TRACE_VAL 10 (its 2-byte marker, then the value); the limit as for
 * 4-byte records; an imm above 0xffff is refused. */
START_TEST(test_snip_trace_units)
{
    uint64_t old_cur = fs_word(ARCH_TRACE_CUR), old_lim = fs_word(ARCH_TRACE_LIM);
    uint16_t *buf1 = (uint16_t *)(page + DATA), *buf2 = (uint16_t *)(page + DATA + 64);
    uint8_t *stub = page + 0x1000; /* as test_snip_trace_rec's */
    uint8_t code[] = { 0x50, 0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0,
                       0x64, 0x48, 0x89, 0x04, 0x25, 0x38, 0, 0, 0,
                       0x48, 0x8d, 0x40, 0x10,
                       0x64, 0x48, 0x89, 0x04, 0x25, 0x40, 0, 0, 0,
                       0x58, 0xc3 };
    uint64_t b2 = (uint64_t)(uintptr_t)buf2;
    memcpy(code + 3, &b2, 8);
    memcpy(stub, code, sizeof(code));
    sn_t s = { .n = 0 };
    uint32_t r = cnst(&s, (int64_t)(uintptr_t)stub);
    uint32_t rec = node(&s, ARCH_SN_TRACE_REC, r, ARCH_SNIP_NONE, 0xbeef);
    s.v[rec].size = 2;
    uint32_t v = cnst(&s, 0x1122334455667788);
    uint32_t val = node(&s, ARCH_SN_TRACE_VAL, r, v, 0xfff2);
    s.v[val].size = 2;
    uint32_t root = node(&s, ARCH_SN_SEQ, rec, val, 0);
    memset(buf1, 0xee, 128);
    /* the limit at 14 bytes: the second record starts below it, its value not */
    fs_set((uint64_t)(uintptr_t)buf1, (uint64_t)(uintptr_t)(buf1 + 7));
    for (int i = 0; i < 2; i++) {
        uint64_t regs[18];
        init_regs(regs, 0x8d5 | 0x2);
        run_ctx(&s, root, &anywhere, regs);
    }
    uint64_t cur = fs_word(ARCH_TRACE_CUR);
    fs_set(old_cur, old_lim);
    static const uint16_t want[] = { 0xbeef, 0xfff2, 0x7788, 0x5566,
                                     0x3344, 0x1122, 0xbeef };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        ck_assert_uint_eq(buf1[i], want[i]);
    ck_assert_uint_eq(buf1[7], 0xeeee); /* the second value went to the refilled buffer */
    ck_assert_uint_eq(buf2[0], 0xfff2);
    ck_assert_uint_eq(buf2[1], 0x7788);
    ck_assert_uint_eq(buf2[4], 0x1122);
    ck_assert_uint_eq(cur, (uint64_t)(uintptr_t)(buf2 + 5));
    sn_t t = { .n = 0 };
    uint32_t big = node(&t, ARCH_SN_TRACE_REC, cnst(&t, (int64_t)(uintptr_t)stub),
                        ARCH_SNIP_NONE, 0x10000);
    t.v[big].size = 2;
    ck_assert_int_eq(arch_snip_check(t.v, t.n, big, &anywhere, NULL, 0), QP_EINVAL);
}
END_TEST

/* The return value where one exists; dead registers are used without being saved. */
START_TEST(test_snip_retval_dead)
{
    sn_t s = { .n = 0 };
    uint32_t root = store(&s, 0, node(&s, ARCH_SN_MUL, node(&s, ARCH_SN_RETVAL, ARCH_SNIP_NONE,
                                                          ARCH_SNIP_NONE, 0),
                                      cnst(&s, 3), 0));
    arch_snip_ctx_t ret = { .where = ARCH_SNX_RETURN, .live_flags = 0x3f };
    uint64_t regs[18];
    init_regs(regs, 0x2);
    regs[0] = 14;
    int saved = run_ctx(&s, root, &ret, regs);
    ck_assert_uint_eq(*wordp(0), 42);
    ret.dead_regs = 1u << (11 + 1); /* r11, the first temporary */
    init_regs(regs, 0x2);
    regs[0] = 14;
    int unsaved = run_ctx(&s, root, &ret, regs);
    ck_assert_int_lt(unsaved, saved); /* no push/pop of r11 */
    ck_assert_uint_eq(*wordp(0), 42);
}
END_TEST

/* The program's registers (ARCH_SN_REG): every one but rsp, read at once, with the
 * temporaries around them; the sum of two and a product, stored. */
START_TEST(test_snip_reg)
{
    for (int r = 1; r <= 16; r++) {
        if (r == 5)
            continue; /* rsp */
        sn_t s = { .n = 0 };
        uint32_t root = store(&s, 0, node(&s, ARCH_SN_ADD,
                                          node(&s, ARCH_SN_REG, ARCH_SNIP_NONE, ARCH_SNIP_NONE, r),
                                          node(&s, ARCH_SN_MUL,
                                               node(&s, ARCH_SN_REG, ARCH_SNIP_NONE, ARCH_SNIP_NONE, 4),
                                               cnst(&s, 3), 0), 0));
        uint64_t regs[18];
        init_regs(regs, 0x202);
        run_ctx(&s, root, &anywhere, regs);
        ck_assert_msg(*wordp(0) == regs[r - 1] + 3 * regs[3], "register %d", r);
    }
    sn_t bad = { .n = 0 };
    uint32_t sp = node(&bad, ARCH_SN_REG, ARCH_SNIP_NONE, ARCH_SNIP_NONE, 5);
    ck_assert_int_eq(arch_snip_check(bad.v, bad.n, store(&bad, 0, sp), &anywhere, NULL, 0),
                     QP_EINVAL);
}
END_TEST

/* Timers: start then stop adds an interval and leaves the depth at 0. */
START_TEST(test_snip_timer)
{
    sn_t s = { .n = 0 };
    uint32_t st = node(&s, ARCH_SN_TIMER_START, ARCH_SNIP_NONE, ARCH_SNIP_NONE, (int64_t)word(8));
    uint32_t sp = node(&s, ARCH_SN_TIMER_STOP, ARCH_SNIP_NONE, ARCH_SNIP_NONE, (int64_t)word(8));
    uint32_t root = node(&s, ARCH_SN_SEQ, st, sp, 0);
    memset(wordp(8), 0, 24);
    uint64_t regs[18];
    init_regs(regs, 0x8d5 | 0x2);
    run_ctx(&s, root, &anywhere, regs);
    ck_assert_uint_eq(*wordp(8), 0);  /* depth */
    ck_assert_uint_gt(*wordp(10), 0); /* total */
}
END_TEST

/* A length that does not depend on the address; rel32 reach enforced. */
START_TEST(test_snip_length_and_reach)
{
    sn_t s = { .n = 0 };
    uint32_t root = node(&s, ARCH_SN_ADD_TO, arg(&s, 0), ARCH_SNIP_NONE, 0x100000);
    int a = arch_snip_emit(s.v, s.n, root, &at_entry, 0x100, NULL, 0);
    int b = arch_snip_emit(s.v, s.n, root, &at_entry, 0x7fff0000, NULL, 0);
    ck_assert_int_gt(a, 0);
    ck_assert_int_eq(a, b);
    uint8_t buf[64];
    ck_assert_int_eq(arch_snip_emit(s.v, s.n, root, &at_entry, 0x300000000ull, buf, sizeof(buf)),
                     QP_ERANGE);
    ck_assert_int_eq(arch_snip_emit(s.v, s.n, root, &at_entry, 0x100, buf, 3), QP_ENOMEM);
}
END_TEST

/* What arch_snip_check refuses, with the node named. */
START_TEST(test_snip_check)
{
    char why[160];
    sn_t s = { .n = 0 };
    uint32_t a = arg(&s, 0);
    ck_assert_int_eq(arch_snip_check(s.v, s.n, a, &anywhere, why, sizeof(why)), QP_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "node 0: an argument"));
    uint32_t r = node(&s, ARCH_SN_RETVAL, ARCH_SNIP_NONE, ARCH_SNIP_NONE, 0);
    ck_assert_int_eq(arch_snip_check(s.v, s.n, r, &at_entry, why, sizeof(why)), QP_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "return value"));
    uint32_t bad = node(&s, ARCH_SN_ADD, a, ARCH_SNIP_NONE, 0);
    ck_assert_int_eq(arch_snip_check(s.v, s.n, bad, &at_entry, why, sizeof(why)), QP_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "missing"));
    uint32_t cyc = node(&s, ARCH_SN_NOT, s.n, 0, 0); /* refers to itself */
    ck_assert_int_eq(arch_snip_check(s.v, s.n, cyc, &at_entry, why, sizeof(why)), QP_EINVAL);
    uint32_t ld = node(&s, ARCH_SN_LOAD, ARCH_SNIP_NONE, ARCH_SNIP_NONE, 0);
    s.v[ld].size = 3;
    ck_assert_int_eq(arch_snip_check(s.v, s.n, ld, &at_entry, why, sizeof(why)), QP_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "3-byte"));
    ck_assert_int_eq(arch_snip_check(s.v, s.n, 99, &at_entry, why, sizeof(why)), QP_EINVAL);
    ck_assert_int_eq(arch_snip_emit(s.v, s.n, ld, &at_entry, 0, NULL, 0), QP_EINVAL);
}
END_TEST

static uint64_t
thread_pointer(void)
{
    uint64_t tp;
    __asm__ volatile("mov %%fs:0, %0" : "=r"(tp));
    return tp;
}

static uint32_t
thread_slot_addr(sn_t *s)
{
    /* PER_THREAD + slot * 8 (the base computed from the code's address) */
    uint32_t slot = node(s, ARCH_SN_THREAD_SLOT, ARCH_SNIP_NONE, ARCH_SNIP_NONE,
                         (int64_t)(uintptr_t)(page + KEYS));
    return node(s, ARCH_SN_ADD,
                node(s, ARCH_SN_ADDR, ARCH_SNIP_NONE, ARCH_SNIP_NONE,
                     (int64_t)(uintptr_t)(page + PER_THREAD)),
                node(s, ARCH_SN_MUL, slot, cnst(s, 8), 0), 0);
}

#define THREAD_RUNS 2000
static void *
run_code(void *arg)
{
    void (*code)(void) = (void (*)(void))arg;
    for (int i = 0; i < THREAD_RUNS; i++)
        code();
    return NULL;
}

/* Per-thread slots: a thread finds its own slot again (keyed by its thread pointer), 8
 * threads at once take 8 different slots, each counting only its own runs. */
/* Keys by value: each value its own slot (exact counts for 0..299, and for spread
 * values), the one equal to the xor constant and a full table go to the overflow slot;
 * registers, flags and red zone kept. */
START_TEST(test_snip_key_slot)
{
    uint64_t *keys = (uint64_t *)(page + KEYS), *ctr = (uint64_t *)(page + PER_THREAD);
    memset(keys, 0, 8 * ARCH_SNIP_THREADS);
    memset(ctr, 0, 8 * (ARCH_SNIP_THREADS + 1));
    sn_t s = { .n = 0 };
    uint32_t slot = node(&s, ARCH_SN_KEY_SLOT, arg(&s, 0), ARCH_SNIP_NONE,
                         (int64_t)(uintptr_t)keys);
    uint32_t at = node(&s, ARCH_SN_SHL, slot, cnst(&s, 3), 0);
    uint32_t addr = node(&s, ARCH_SN_ADD, at, cnst(&s, (int64_t)(uintptr_t)ctr), 0);
    uint32_t root = node(&s, ARCH_SN_ADD_AT, addr, cnst(&s, 1), 0);
    /* Values 0..299, value v counted v % 7 + 1 times; and 200 addresses 64 bytes apart. */
    uint64_t want = 0;
    for (int v = 0; v < 300; v++)
        for (int k = 0; k <= v % 7; k++, want++)
            run_args(&s, root, v, 0, 0);
    for (int v = 0; v < 200; v++, want++)
        run_args(&s, root, (int64_t)(0x7f0000001000ull + 64ull * (uint64_t)v), 0, 0);
    int used = 0;
    uint64_t total = 0;
    for (int k = 0; k < ARCH_SNIP_THREADS; k++) {
        if (keys[k] == 0) {
            ck_assert_uint_eq(ctr[k], 0);
            continue;
        }
        used++;
        uint64_t v = keys[k] ^ ARCH_SNIP_KEY_XOR;
        if (v < 300)
            ck_assert_uint_eq(ctr[k], v % 7 + 1);
        else
            ck_assert_uint_eq(ctr[k], 1);
        total += ctr[k];
    }
    ck_assert_int_eq(used, 500);
    ck_assert_uint_eq(total, want);
    ck_assert_uint_eq(ctr[ARCH_SNIP_THREADS], 0);
    /* The value that would be kept as 0: the overflow slot, the table untouched. */
    run_args(&s, root, (int64_t)ARCH_SNIP_KEY_XOR, 0, 0);
    ck_assert_uint_eq(ctr[ARCH_SNIP_THREADS], 1);
    /* A full table: the overflow slot. */
    for (int v = 300; used < ARCH_SNIP_THREADS; v++, used++)
        run_args(&s, root, v, 0, 0);
    run_args(&s, root, 99999, 0, 0);
    ck_assert_uint_eq(ctr[ARCH_SNIP_THREADS], 2);
    /* Anywhere (flags live, red zone in use): kept. */
    uint64_t regs[18];
    init_regs(regs, 0x8d5 | 0x2);
    sn_t u = { .n = 0 };
    uint32_t k2 = node(&u, ARCH_SN_KEY_SLOT, cnst(&u, 5), ARCH_SNIP_NONE,
                       (int64_t)(uintptr_t)keys);
    run_ctx(&u, store(&u, 0, k2), &anywhere, regs);
    ck_assert_uint_lt(*wordp(0), ARCH_SNIP_THREADS);
    ck_assert_uint_eq(keys[*wordp(0)] ^ ARCH_SNIP_KEY_XOR, 5);
}
END_TEST

START_TEST(test_snip_thread_slot)
{
    memset(page + KEYS, 0, 8 * ARCH_SNIP_THREADS);
    memset(page + PER_THREAD, 0, 8 * (ARCH_SNIP_THREADS + 1));
    sn_t s = { .n = 0 };
    uint32_t slot = node(&s, ARCH_SN_THREAD_SLOT, ARCH_SNIP_NONE, ARCH_SNIP_NONE,
                         (int64_t)(uintptr_t)(page + KEYS));
    uint32_t root = store(&s, 0, slot);
    uint64_t regs[18];
    init_regs(regs, 0x8d5 | 0x2);
    run_ctx(&s, root, &anywhere, regs);
    uint64_t mine = *wordp(0);
    ck_assert_uint_lt(mine, ARCH_SNIP_THREADS);
    ck_assert_uint_eq(((uint64_t *)(page + KEYS))[mine], thread_pointer());
    /* The generated probe and arch_snip_thread_hash (which libqpt uses to fill a
     * thread's block from outside) agree: an empty table's first probe is the hash. */
    ck_assert_uint_eq(mine, arch_snip_thread_hash(thread_pointer()));
    init_regs(regs, 0x2);
    run_ctx(&s, root, &anywhere, regs);
    ck_assert_uint_eq(*wordp(0), mine);
    /* That slot taken by another key: the probe goes on linearly, to the next one. */
    memset(page + KEYS, 0, 8 * ARCH_SNIP_THREADS);
    ((uint64_t *)(page + KEYS))[mine] = 0x1234000;
    init_regs(regs, 0x2);
    run_ctx(&s, root, &anywhere, regs);
    ck_assert_uint_eq(*wordp(0), (mine + 1) % ARCH_SNIP_THREADS);

    /* 8 threads, each adding 1 to its own word THREAD_RUNS times. */
    memset(page + KEYS, 0, 8 * ARCH_SNIP_THREADS);
    sn_t t = { .n = 0 };
    uint32_t add = node(&t, ARCH_SN_ADD_AT, thread_slot_addr(&t), cnst(&t, 1), 0);
    uint64_t addr = (uint64_t)(uintptr_t)page;
    int n = arch_snip_emit(t.v, t.n, add, &anywhere, addr, page, DATA - 1);
    ck_assert_int_gt(n, 0);
    page[n] = 0xc3;
    pthread_t th[8];
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, run_code, page), 0);
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    int used = 0;
    uint64_t total = 0;
    for (int k = 0; k < ARCH_SNIP_THREADS; k++) {
        uint64_t key = ((uint64_t *)(page + KEYS))[k], w = ((uint64_t *)(page + PER_THREAD))[k];
        if (key != 0) {
            used++;
            ck_assert_uint_eq(w, THREAD_RUNS);
        } else
            ck_assert_uint_eq(w, 0);
        total += w;
    }
    ck_assert_int_eq(used, 8);
    ck_assert_uint_eq(total, 8 * THREAD_RUNS);
    ck_assert_uint_eq(((uint64_t *)(page + PER_THREAD))[ARCH_SNIP_THREADS], 0);

    /* A full table: the overflow slot, ARCH_SNIP_THREADS. */
    memset(page + KEYS, 0xee, 8 * ARCH_SNIP_THREADS);
    init_regs(regs, 0x2);
    run_ctx(&s, root, &anywhere, regs);
    ck_assert_uint_eq(*wordp(0), ARCH_SNIP_THREADS);
}
END_TEST

/*
 * Safe loads (ARCH_SN_LOAD_SAFE): every size from mapped memory; 0, and no fault, from
 * NULL, an unmapped page, a PROT_NONE page (a guard page) and a word that runs off the
 * end of a mapping; registers and flags kept (run_ctx), the value usable in arithmetic.
 */
START_TEST(test_snip_load_safe)
{
    uint8_t *two = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(two, MAP_FAILED);
    memset(two, 0xab, 4096);
    ck_assert_int_eq(munmap(two + 4096, 4096), 0); /* the second page: unmapped */
    uint8_t *guard = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(guard, MAP_FAILED);
    static const struct {
        int which, size;   /* 0: word 2, 1: NULL, 2: unmapped, 3: guard, 4: last 4 bytes */
        uint64_t want;
    } cases[] = {
        { 0, 1, 0x11 }, { 0, 2, 0x2211 }, { 0, 4, 0x44332211 }, { 0, 8, 0x8877665544332211ull },
        { 1, 8, 0 }, { 2, 8, 0 }, { 3, 4, 0 }, { 4, 8, 0 }, { 4, 4, 0xabababab },
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        uint64_t at = cases[k].which == 0   ? word(2)
                      : cases[k].which == 1 ? 0
                      : cases[k].which == 2 ? (uint64_t)(uintptr_t)(two + 4096 + 64)
                      : cases[k].which == 3 ? (uint64_t)(uintptr_t)guard
                                            : (uint64_t)(uintptr_t)(two + 4092);
        sn_t t = { .n = 0 };
        uint32_t ld = node(&t, ARCH_SN_LOAD_SAFE, cnst(&t, (int64_t)at), ARCH_SNIP_NONE, 0);
        t.v[ld].size = (uint8_t)cases[k].size;
        /* word 3 = arg1 + load - arg1: the temporaries around the calls kept */
        uint32_t root = store(&t, 3, node(&t, ARCH_SN_SUB, node(&t, ARCH_SN_ADD, arg(&t, 0), ld, 0),
                                           arg(&t, 0), 0));
        *wordp(2) = 0x8877665544332211ull;
        *wordp(3) = 0x5a5a;
        run_args(&t, root, 1000, 0, 0);
        ck_assert_msg(*wordp(3) == cases[k].want, "case %zu: %llx", k, (unsigned long long)*wordp(3));
        /* ... and where flags are live (a block) */
        uint64_t regs[18];
        init_regs(regs, 0x8d5 | 0x2);
        *wordp(3) = 0x5a5a;
        sn_t u = { .n = 0 };
        uint32_t l2 = node(&u, ARCH_SN_LOAD_SAFE, cnst(&u, (int64_t)at), ARCH_SNIP_NONE, 0);
        u.v[l2].size = (uint8_t)cases[k].size;
        run_ctx(&u, store(&u, 3, l2), &anywhere, regs);
        ck_assert_uint_eq(*wordp(3), cases[k].want);
    }
    munmap(two, 4096);
    munmap(guard, 4096);
}
END_TEST

/* Loads, stores and adds at computed addresses, every size; the thread's CPU time. */
START_TEST(test_snip_at_and_cpu)
{
    for (int size = 1; size <= 8; size *= 2) {
        sn_t t = { .n = 0 };
        uint32_t ld = node(&t, ARCH_SN_LOAD_AT, cnst(&t, (int64_t)word(2)), ARCH_SNIP_NONE, 0);
        t.v[ld].size = (uint8_t)size;
        uint32_t st = node(&t, ARCH_SN_STORE_AT, cnst(&t, (int64_t)word(3)),
                           node(&t, ARCH_SN_ADD, ld, cnst(&t, 1), 0), 0);
        t.v[st].size = (uint8_t)size;
        uint32_t ad = node(&t, ARCH_SN_ADD_AT, cnst(&t, (int64_t)word(4)), arg(&t, 0), 0);
        t.v[ad].flags = size == 8 ? ARCH_SNF_ATOMIC : 0;
        uint32_t root = node(&t, ARCH_SN_SEQ, st, ad, 0);
        *wordp(2) = 0x8877665544332211ull;
        *wordp(3) = 0xffffffffffffffffull;
        *wordp(4) = 100;
        run_args(&t, root, 23, 0, 0);
        uint64_t mask = size == 8 ? ~0ull : (1ull << (8 * size)) - 1;
        ck_assert_uint_eq(*wordp(3) & mask, (0x8877665544332211ull + 1) & mask);
        ck_assert_uint_eq(*wordp(3) & ~mask, 0xffffffffffffffffull & ~mask);
        ck_assert_uint_eq(*wordp(4), 123);
    }
    sn_t c = { .n = 0 };
    uint32_t root = store(&c, 0, node(&c, ARCH_SN_THREAD_CPU, ARCH_SNIP_NONE, ARCH_SNIP_NONE, 0));
    uint64_t regs[18];
    init_regs(regs, 0x8d5 | 0x2);
    run_ctx(&c, root, &anywhere, regs);
    uint64_t t0 = *wordp(0);
    struct timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    volatile uint64_t spin = 0;
    do {
        for (int i = 0; i < 100000; i++)
            spin += (uint64_t)i;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000000000ll + (b.tv_nsec - a.tv_nsec) < 20000000);
    init_regs(regs, 0x2);
    run_ctx(&c, root, &anywhere, regs);
    uint64_t d = *wordp(0) - t0;
    ck_assert_msg(d >= 20000000 && d < 1000000000, "CPU time %llu ns", (unsigned long long)d);
}
END_TEST

/* The program's stack pointer is the same whatever the snippet pushed before reading it
 * (red zone skipped, flags saved, registers saved, a call's set-up), near our own stack;
 * the cycle counter advances. */
START_TEST(test_snip_sp_cycles)
{
    uint64_t seen[4];
    for (int form = 0; form < 4; form++) {
        sn_t s = { .n = 0 };
        uint32_t sp = node(&s, ARCH_SN_SP, ARCH_SNIP_NONE, ARCH_SNIP_NONE, 0);
        uint32_t root = store(&s, 0, sp);
        if (form >= 2) { /* a timer's system call first: pushes around it */
            uint32_t cpu = store(&s, 1, node(&s, ARCH_SN_THREAD_CPU, ARCH_SNIP_NONE,
                                             ARCH_SNIP_NONE, 0));
            root = node(&s, ARCH_SN_SEQ, cpu, root, 0);
        }
        if (form == 3) { /* and a call of a C function with the SP as its argument */
            uint32_t c = node(&s, ARCH_SN_CALL, ARCH_SNIP_NONE, ARCH_SNIP_NONE,
                              (int64_t)(uintptr_t)side);
            s.v[c].nargs = 1;
            s.v[c].args[0] = node(&s, ARCH_SN_SP, ARCH_SNIP_NONE, ARCH_SNIP_NONE, 0);
            root = node(&s, ARCH_SN_SEQ, root, store(&s, 2, c), 0);
        }
        uint64_t regs[18];
        init_regs(regs, 0x8d5 | 0x2);
        arch_snip_ctx_t ctx = form == 0 ? at_entry : anywhere;
        if (form == 0)
            run_args(&s, root, 0, 0, 0);
        else
            run_ctx(&s, root, &ctx, regs);
        seen[form] = *wordp(0);
        if (form == 3)
            ck_assert_uint_eq(*wordp(2), seen[form]);
    }
    for (int form = 1; form < 4; form++)
        ck_assert_uint_eq(seen[form], seen[0]);
    uint64_t here = (uint64_t)(uintptr_t)&seen;
    ck_assert_uint_lt(seen[0] > here ? seen[0] - here : here - seen[0], 65536);
    sn_t c = { .n = 0 };
    uint32_t a = store(&c, 5, node(&c, ARCH_SN_CYCLES, ARCH_SNIP_NONE, ARCH_SNIP_NONE, 0));
    uint64_t regs[18];
    init_regs(regs, 0x8d5 | 0x2);
    run_ctx(&c, a, &anywhere, regs);
    uint64_t t0 = *wordp(5);
    init_regs(regs, 0x2);
    run_ctx(&c, a, &anywhere, regs);
    ck_assert_uint_gt(*wordp(5), t0);
}
END_TEST

/* The calling thread's kernel id (what a reader outside names it by), every register
 * kept around the system call (run_ctx checks them). */
START_TEST(test_snip_thread_id)
{
    sn_t c = { .n = 0 };
    uint32_t root = store(&c, 6, node(&c, ARCH_SN_THREAD_ID, ARCH_SNIP_NONE, ARCH_SNIP_NONE, 0));
    uint64_t regs[18];
    init_regs(regs, 0x8d5 | 0x2);
    *wordp(6) = 0;
    run_ctx(&c, root, &anywhere, regs);
    ck_assert_uint_eq(*wordp(6), (uint64_t)syscall(SYS_gettid));
}
END_TEST

/*****************************************************************************
 * Per-CPU adds (ARCH_SN_ADD_CPU): restartable sequences on glibc's rseq area
 */

#define CPU_WORDS 0xa000 /* CPU_STRIDE bytes a CPU (2 pages: up to 512 CPUs) */
#define CPU_STRIDE 64
#define CPU_RUNS 200000

/* The per-CPU add of VALUE (a node of S) to the word at CPU_WORDS, with rseq area at
 * OFF from the thread pointer. */
static uint32_t
add_cpu(sn_t *s, uint32_t value, int64_t off)
{
    uint32_t n = node(s, ARCH_SN_ADD_CPU, value, cnst(s, off),
                      (int64_t)(uintptr_t)(page + CPU_WORDS));
    s->v[n].c = cnst(s, CPU_STRIDE);
    return n;
}

/* The sum of the CPUs' words, which are cleared. */
static uint64_t
cpu_sum(void)
{
    uint64_t t = 0;
    for (int k = 0; CPU_WORDS + k * CPU_STRIDE < PAGE; k++) {
        uint64_t *w = (uint64_t *)(page + CPU_WORDS + k * CPU_STRIDE);
        t += *w;
        *w = 0;
    }
    return t;
}

/* The rseq_cs word of the calling thread's rseq area. */
static uint64_t
rseq_cs_now(void)
{
    return *(volatile uint64_t *)(thread_pointer() + (uint64_t)__rseq_offset + 8);
}

static void *
run_cpu_code(void *arg)
{
    void (*code)(void) = (void (*)(void))arg;
    for (int i = 0; i < CPU_RUNS; i++) {
        code();
        if (i % 1000 == 0)
            sched_yield(); /* migrate, and be preempted inside */
    }
    return rseq_cs_now() == 0 ? arg : NULL;
}

/* A thread-local area that looks like an rseq area nobody registered. */
static __thread struct {
    uint32_t cpu_id_start, cpu_id;
    uint64_t rseq_cs;
} fake_rseq;

/*
 * Per-CPU adds: a constant 1, another constant and a register value each add once to
 * the words of the CPUs (the registers, the flags and the red zone kept; rseq_cs cleared
 * after); 4 threads adding CPU_RUNS times each, yielding to migrate, lose nothing; a
 * thread whose area is not registered adds to CPU 0's word (locked); the cost model
 * skips the restart path and the descriptor; a stride that is no power of 2 is refused.
 */
START_TEST(test_snip_add_cpu)
{
    if (__rseq_size == 0) {
        fprintf(stderr, "check_snip: rseq not registered (old kernel or GLIBC_TUNABLES): "
                        "per-CPU adds only checked when unregistered\n");
    }
    int64_t off = __rseq_offset;
    uint64_t regs[18];
    cpu_sum();
    for (int form = 0; form < 3; form++) {
        sn_t s = { .n = 0 };
        uint32_t v = form == 0 ? cnst(&s, 1) : form == 1 ? cnst(&s, 5) : arg(&s, 0);
        uint32_t root = add_cpu(&s, v, off);
        if (form == 2)
            run_args(&s, root, 7, 0, 0);
        else {
            init_regs(regs, 0x8d5 | 0x2);
            run_ctx(&s, root, &anywhere, regs);
        }
        ck_assert_uint_eq(cpu_sum(), form == 0 ? 1 : form == 1 ? 5 : 7);
        if (__rseq_size > 0)
            ck_assert_uint_eq(rseq_cs_now(), 0);
    }
    /* Threads. */
    sn_t t = { .n = 0 };
    uint32_t root = add_cpu(&t, cnst(&t, 1), off);
    uint64_t addr = (uint64_t)(uintptr_t)page;
    int n = arch_snip_emit(t.v, t.n, root, &anywhere, addr, page, DATA - 1);
    ck_assert_int_gt(n, 0);
    page[n] = 0xc3;
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, run_cpu_code, page), 0);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        ck_assert_ptr_eq(r, page);
    }
    ck_assert_uint_eq(cpu_sum(), 4 * CPU_RUNS);
    /* Not registered: CPU 0's word, and the area's rseq_cs left 0. */
    fake_rseq.cpu_id = (uint32_t)-2; /* RSEQ_CPU_ID_REGISTRATION_FAILED */
    fake_rseq.rseq_cs = 1;
    sn_t f = { .n = 0 };
    int64_t foff = (int64_t)((uint64_t)(uintptr_t)&fake_rseq - thread_pointer());
    init_regs(regs, 0x8d5 | 0x2);
    run_ctx(&f, add_cpu(&f, cnst(&f, 3), foff), &anywhere, regs);
    ck_assert_uint_eq(*(uint64_t *)(page + CPU_WORDS), 3);
    ck_assert_uint_eq(cpu_sum(), 3);
    ck_assert_uint_eq(fake_rseq.rseq_cs, 0);
    /* The cost model: below a locked add's. */
    double cpu_cycles, lock_cycles;
    sn_t l = { .n = 0 };
    uint32_t lroot
        = node(&l, ARCH_SN_ADD_TO, cnst(&l, 1), ARCH_SNIP_NONE, (int64_t)word(0));
    l.v[lroot].flags = ARCH_SNF_ATOMIC;
    ck_assert_int_eq(arch_snip_cycles(t.v, t.n, add_cpu(&t, cnst(&t, 1), off), &at_entry,
                                      addr, &cpu_cycles), 0);
    ck_assert_int_eq(arch_snip_cycles(l.v, l.n, lroot, &at_entry, addr, &lock_cycles), 0);
    ck_assert_msg(cpu_cycles < lock_cycles, "%g cycles, locked %g", cpu_cycles,
                  lock_cycles);
    /* A stride that is no power of 2. */
    char why[200];
    t.v[t.v[root].c].imm = 48;
    ck_assert_int_eq(arch_snip_check(t.v, t.n, root, &anywhere, why, sizeof(why)),
                     QP_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "power of 2"));
}
END_TEST

/*
 * The path of a hit through CODE (N bytes at ADDR): every instruction from the first
 * on, conditional jumps not taken, jmps followed, until the code's end; their number,
 * the pushes among them, and whether a memory operand of a read-modify-write (ff /0,
 * 81 /0, 01: inc, add) has an index register (SIB index not 100, or REX.X).
 */
static int
hit_path(const uint8_t *code, int n, uint64_t addr, int *pushes, int *indexed)
{
    int k = 0, count = 0;
    *pushes = *indexed = 0;
    while (k >= 0 && k < n && count < 100) {
        arch_insn_t in;
        ck_assert_int_eq(
            arch_decode(code + k, (size_t)(n - k), addr + (uint64_t)k, &in), 0);
        const uint8_t *b = code + k;
        int p = 0, rex = 0;
        if (b[p] == 0xf0 || b[p] == 0x64)
            p++;
        if ((b[p] & 0xf0) == 0x40)
            rex = b[p++];
        if ((b[p] & 0xf8) == 0x50 && in.len == p + 1)
            ++*pushes;
        if ((b[p] == 0xff || b[p] == 0x81 || b[p] == 0x01) && (b[p + 1] & 0xc0) != 0xc0
            && (b[p + 1] & 7) == 4 && (((b[p + 2] >> 3) & 7) != 4 || (rex & 2)))
            *indexed = 1;
        count++;
        k = in.kind == ARCH_KIND_JMP ? (int)(in.target - addr) : k + in.len;
    }
    return count;
}

/*
 * A per-CPU add's hit at an entry, where no register is known dead: one register saved,
 * 12 instructions with the push and pop, and the add to the CPU's word through one
 * register without an index (a base + index operand defeats the zero-latency store
 * forwarding of recent cores: back-to-back hits of one counter cost 1.5 ns more).
 */
START_TEST(test_snip_add_cpu_hit_path)
{
    sn_t t = { .n = 0 };
    uint32_t root = add_cpu(&t, cnst(&t, 1), 0x930);
    uint64_t addr = (uint64_t)(uintptr_t)page;
    int n = arch_snip_emit(t.v, t.n, root, &at_entry, addr, page, DATA - 1), pushes, ix;
    ck_assert_int_gt(n, 0);
    int count = hit_path(page, n, addr, &pushes, &ix);
    ck_assert_int_eq(pushes, 1);
    ck_assert_int_eq(ix, 0);
    ck_assert_int_le(count, 12);
    /* A value in a register: the same shape. */
    sn_t a = { .n = 0 };
    root = add_cpu(&a, arg(&a, 0), 0x930);
    n = arch_snip_emit(a.v, a.n, root, &at_entry, addr, page, DATA - 1);
    ck_assert_int_gt(n, 0);
    hit_path(page, n, addr, &pushes, &ix);
    ck_assert_int_eq(ix, 0);
}
END_TEST

/* Where the signals of test_snip_add_cpu_abort found the looping thread. */
static uint64_t cs_start, cs_commit, cs_abort;
static volatile long sig_aborted, sig_inside, sig_seen;
static volatile int cpu_loop_done;

static void
on_sigusr1(int sig, siginfo_t *si, void *ctx)
{
    (void)sig;
    (void)si;
    uint64_t rip = (uint64_t)((ucontext_t *)ctx)->uc_mcontext.gregs[REG_RIP];
    sig_seen++;
    sig_aborted += rip == cs_abort;
    sig_inside += rip >= cs_start && rip < cs_commit;
}

static volatile long loop_runs;

static void *
loop_cpu_code(void *arg)
{
    void (*code)(void) = (void (*)(void))arg;
    long k = 0;
    while (!cpu_loop_done) {
        code();
        k++;
    }
    loop_runs = k;
    return NULL;
}

/*
 * The restart path of a per-CPU add taken for real: a thread runs it in a loop while
 * signals interrupt it; a signal that comes inside the sequence makes the kernel move
 * the thread to the abort handler (which a wrong descriptor or signature would answer
 * with SIGSEGV), so the handler never sees the thread inside it, sees it at the abort
 * address at times, and the count is exact.
 */
START_TEST(test_snip_add_cpu_abort)
{
    if (__rseq_size == 0)
        return; /* (no restarts without rseq) */
    sn_t t = { .n = 0 };
    uint32_t root = add_cpu(&t, cnst(&t, 1), __rseq_offset);
    uint64_t addr = (uint64_t)(uintptr_t)page;
    int n = arch_snip_emit(t.v, t.n, root, &anywhere, addr, page, DATA - 1);
    ck_assert_int_gt(n, 0);
    page[n] = 0xc3;
    /* The descriptor: the 32 bytes whose last word is the abort address, which follows
     * the signature (a ud1 whose displacement it is). */
    static const uint8_t ud1[] = { 0x0f, 0xb9, 0x3d };
    uint8_t *at = memmem(page, (size_t)n, ud1, sizeof(ud1));
    ck_assert_ptr_nonnull(at);
    cs_abort = (uint64_t)(uintptr_t)(at + 7);
    uint8_t *d = memmem(page, (size_t)n, &cs_abort, 8);
    ck_assert_ptr_nonnull(d);
    uint64_t w[4];
    memcpy(w, d - 24, sizeof(w));
    ck_assert_uint_eq(w[0], 0); /* version, flags */
    cs_start = w[1];
    cs_commit = w[1] + w[2];
    ck_assert(cs_start > addr && cs_commit < cs_abort);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_sigusr1;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    ck_assert_int_eq(sigaction(SIGUSR1, &sa, NULL), 0);
    cpu_sum();
    cpu_loop_done = 0;
    sig_aborted = sig_inside = sig_seen = 0;
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, loop_cpu_code, page), 0);
    /* Until 20 signals came inside, for at most 20 s (on a loaded machine the looping
     * thread may run seldom; the test case's timeout is above that). */
    time_t t0 = time(NULL);
    while (sig_aborted < 20 && time(NULL) - t0 < 20)
        pthread_kill(th, SIGUSR1);
    cpu_loop_done = 1;
    pthread_join(th, NULL);
    signal(SIGUSR1, SIG_DFL);
    ck_assert_uint_eq(cpu_sum(), (uint64_t)loop_runs);
    ck_assert_int_eq(sig_inside, 0);
    ck_assert_msg(sig_aborted > 0, "no signal of %ld came inside the sequence", sig_seen);
}
END_TEST

static Suite *
snip_suite(void)
{
    Suite *s = suite_create("snip");
    TCase *tc = tcase_create("snip");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60); /* test_snip_add_cpu_abort may take 20 s under load */
    tcase_add_test(tc, test_snip_counter_if);
    tcase_add_test(tc, test_snip_arith);
    tcase_add_test(tc, test_snip_sizes_and_flags);
    tcase_add_test(tc, test_snip_logic);
    tcase_add_test(tc, test_snip_call);
    tcase_add_test(tc, test_snip_retval_dead);
    tcase_add_test(tc, test_snip_reg);
    tcase_add_test(tc, test_snip_timer);
    tcase_add_test(tc, test_snip_length_and_reach);
    tcase_add_test(tc, test_snip_check);
    tcase_add_test(tc, test_snip_thread_slot);
    tcase_add_test(tc, test_snip_key_slot);
    tcase_add_test(tc, test_snip_at_and_cpu);
    tcase_add_test(tc, test_snip_load_safe);
    tcase_add_test(tc, test_snip_sp_cycles);
    tcase_add_test(tc, test_snip_thread_id);
    tcase_add_test(tc, test_snip_trace_rec);
    tcase_add_test(tc, test_snip_trace_val);
    tcase_add_test(tc, test_snip_trace_units);
    tcase_add_test(tc, test_snip_add_cpu);
    tcase_add_test(tc, test_snip_add_cpu_abort);
    tcase_add_test(tc, test_snip_add_cpu_hit_path);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(snip_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
