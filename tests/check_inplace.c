/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Trampolines of code patched in place in a file (patch/pt_inplace.c), unit-tested
 * in this process's memory: small procedures assembled into a mapping, a point of each
 * patched with a jump to its trampoline (pt_inplace_emit), the procedures called: their
 * results unchanged, the counters exact. Shapes: a displaced direct call (the callee
 * sees its original return address), an indirect call, a conditional branch last, the
 * flags live at the point, and the refusal of a call whose operand uses %rsp; the bytes
 * written over a point (pt_inplace_patch).
 */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "editor/ed.h"
#include "patch/patch.h"

#define PAGE 4096u

static uint8_t *map;
#define CODE (map)
#define TRAMP (map + PAGE)
#define WORDS ((volatile uint64_t *)(map + 2 * PAGE))

/* Offsets of the procedures in CODE. */
enum { OFF_F = 0, OFF_R = 0x10, OFF_H = 0x20, OFF_H2 = 0x40, OFF_K = 0x60, OFF_J = 0x80,
       OFF_I = 0xa0, OFF_S = 0xc0 };

static uint64_t
at(size_t off)
{
    return (uint64_t)(uintptr_t)(CODE + off);
}

static void
put(size_t off, const uint8_t *b, size_t n)
{
    memcpy(CODE + off, b, n);
}

static void
put_call(size_t off, size_t to)
{
    uint8_t b[5] = { 0xe8 };
    int32_t d = (int32_t)(at(to) - (at(off) + 5));
    memcpy(b + 1, &d, 4);
    put(off, b, 5);
}

/* Patch LEN bytes at OFF with a jump to a trampoline at TRAMP + TOFF counting into
 * WORDS[W]. Returns pt_inplace_emit's result. */
static int
patch(size_t off, uint32_t len, size_t toff, int w, int save_flags)
{
    uint8_t orig[32];
    memcpy(orig, CODE + off, len);
    pt_inplace_t t = { .addr = at(off), .orig = orig, .len = len,
                        .counter = (uint64_t)(uintptr_t)&WORDS[w],
                        .inc_mode = ARCH_INC_PLAIN, .save_flags = save_flags };
    int n = pt_inplace_emit(&t, (uint64_t)(uintptr_t)(TRAMP + toff), TRAMP + toff, 256);
    if (n < 0)
        return n;
    ck_assert_int_eq(
        pt_inplace_patch(&t, (uint64_t)(uintptr_t)(TRAMP + toff), len, CODE + off, len),
        (int)len);
    return n;
}

static void
setup(void)
{
    map = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
               -1, 0);
    ck_assert_ptr_ne(map, MAP_FAILED);
    memset(map, 0xcc, 2 * PAGE);
    memset(map + 2 * PAGE, 0, PAGE);
    static const uint8_t f[] = { 0x8d, 0x47, 0x05, 0xc3 };             /* lea 5(%rdi),%eax; ret */
    static const uint8_t r[] = { 0x48, 0x8b, 0x04, 0x24, 0xc3 };       /* mov (%rsp),%rax; ret */
    static const uint8_t inc_ret[] = { 0x83, 0xc0, 0x01, 0xc3 };       /* add $1,%eax; ret */
    static const uint8_t k[] = { 0x39, 0xf7, 0x0f, 0x9c, 0xc0, 0x0f, 0xb6, 0xc0, 0xc3 };
                                                   /* cmp %esi,%edi; setl %al; movzbl; ret */
    static const uint8_t j[] = { 0x83, 0xff, 0x00, 0x75, 0x03, 0x31, 0xc0, 0xc3,
                                 0xb8, 0x07, 0x00, 0x00, 0x00, 0xc3 };
                                   /* cmp $0,%edi; jne +3; xor %eax,%eax; ret; mov $7; ret */
    static const uint8_t i[] = { 0x48, 0x89, 0xf8, 0xff, 0xd6, 0xc3 }; /* mov; call *%rsi; ret */
    static const uint8_t s[] = { 0xff, 0x54, 0x24, 0x08, 0x90, 0xc3 }; /* call *8(%rsp); nop */
    put(OFF_F, f, sizeof(f));
    put(OFF_R, r, sizeof(r));
    put_call(OFF_H, OFF_F); /* h(x) = f(x) + 1 */
    put(OFF_H + 5, inc_ret, sizeof(inc_ret));
    put_call(OFF_H2, OFF_R); /* h2() = its call's return address */
    put(OFF_H2 + 5, (const uint8_t[]) { 0xc3 }, 1);
    put(OFF_K, k, sizeof(k));
    put(OFF_J, j, sizeof(j));
    put(OFF_I, i, sizeof(i));
    put(OFF_S, s, sizeof(s));
}

static void
teardown(void)
{
    munmap(map, 3 * PAGE);
}

START_TEST(test_inplace_call_keeps_return_address)
{
    ck_assert_int_gt(patch(OFF_H, 5, 0, 0, 0), 0);
    ck_assert_int_gt(patch(OFF_H2, 5, 0x80, 1, 0), 0);
    int (*h)(int) = (int (*)(int))(uintptr_t)at(OFF_H);
    uint64_t (*h2)(void) = (uint64_t (*)(void))(uintptr_t)at(OFF_H2);
    ck_assert_int_eq(h(3), 9);
    ck_assert_int_eq(h(10), 16);
    ck_assert_uint_eq(WORDS[0], 2);
    /* The callee sees the old return address, not one in the trampoline. */
    ck_assert_uint_eq(h2(), at(OFF_H2 + 5));
    ck_assert_uint_eq(WORDS[1], 1);
}
END_TEST

START_TEST(test_inplace_flags_live)
{
    /* setl reads the flags cmp set: the counter's increment must not change them. */
    ck_assert_int_gt(patch(OFF_K + 2, 6, 0, 2, 1), 0);
    int (*k)(int, int) = (int (*)(int, int))(uintptr_t)at(OFF_K);
    ck_assert_int_eq(k(1, 2), 1);
    ck_assert_int_eq(k(2, 1), 0);
    ck_assert_int_eq(k(-5, -5), 0);
    ck_assert_uint_eq(WORDS[2], 3);
}
END_TEST

START_TEST(test_inplace_branch_last)
{
    ck_assert_int_gt(patch(OFF_J, 5, 0, 3, 0), 0);
    int (*j)(int) = (int (*)(int))(uintptr_t)at(OFF_J);
    ck_assert_int_eq(j(0), 0);
    ck_assert_int_eq(j(1), 7);
    ck_assert_int_eq(j(-1), 7);
    ck_assert_uint_eq(WORDS[3], 3);
}
END_TEST

START_TEST(test_inplace_indirect_call)
{
    ck_assert_int_gt(patch(OFF_I, 5, 0, 4, 0), 0);
    int (*i)(int, int (*)(int)) = (int (*)(int, int (*)(int)))(uintptr_t)at(OFF_I);
    int (*f)(int) = (int (*)(int))(uintptr_t)at(OFF_F);
    ck_assert_int_eq(i(4, f), 9);
    ck_assert_uint_eq(WORDS[4], 1);
}
END_TEST

START_TEST(test_inplace_refuses_rsp_operand)
{
    uint8_t out[256];
    pt_inplace_t t = { .addr = at(OFF_S), .orig = CODE + OFF_S, .len = 4,
                        .counter = (uint64_t)(uintptr_t)&WORDS[5] };
    ck_assert_int_eq(pt_inplace_emit(&t, (uint64_t)(uintptr_t)TRAMP, out, sizeof(out)),
                     QP_EUNSUPP);
    /* A call that is not the last displaced instruction cannot be moved either. */
    t.addr = at(OFF_H);
    t.orig = CODE + OFF_H;
    t.len = 8;
    ck_assert_int_eq(pt_inplace_emit(&t, (uint64_t)(uintptr_t)TRAMP, out, sizeof(out)),
                     QP_EUNSUPP);
}
END_TEST

/* The bytes over a point: the jump, int3 over the rest of the span; refused when the span
 * cannot hold the jump or the output cannot hold the span, or the trampoline is out of
 * reach. */
START_TEST(test_inplace_patch_bytes)
{
    uint8_t out[16];
    pt_inplace_t t = { .addr = 0x401000, .orig = CODE + OFF_F, .len = 4 };
    ck_assert_int_eq(pt_inplace_patch(&t, 0x402000, 7, out, sizeof(out)), 7);
    static const uint8_t want[] = { 0xe9, 0xfb, 0x0f, 0x00, 0x00, 0xcc, 0xcc };
    ck_assert_mem_eq(out, want, sizeof(want));
    ck_assert_int_eq(pt_inplace_patch(&t, 0x402000, 4, out, sizeof(out)), QP_EINVAL);
    ck_assert_int_eq(pt_inplace_patch(&t, 0x402000, 17, out, sizeof(out)), QP_EINVAL);
    ck_assert_int_eq(pt_inplace_patch(NULL, 0x402000, 5, out, sizeof(out)), QP_EINVAL);
    ck_assert_int_eq(
        pt_inplace_patch(&t, 0x401000 + (8ull << 30), 5, out, sizeof(out)), QP_ERANGE);
}
END_TEST

static Suite *
inplace_suite(void)
{
    Suite *s = suite_create("inplace");
    TCase *tc = tcase_create("tramp");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_inplace_call_keeps_return_address);
    tcase_add_test(tc, test_inplace_flags_live);
    tcase_add_test(tc, test_inplace_branch_last);
    tcase_add_test(tc, test_inplace_indirect_call);
    tcase_add_test(tc, test_inplace_refuses_rsp_operand);
    tcase_add_test(tc, test_inplace_patch_bytes);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(inplace_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
