/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The trampoline layer (patch/pt_tramp.c: what dyn writes into a live process) unit-
 * tested on an in-memory image: five small procedures assembled into this process's own
 * memory, analysed as an image of raw bytes (cfg_image_from_bytes), their points chosen
 * from the CFG, trampolines built next to them and jumped to, and the procedures called:
 * their results unchanged, the snippets' words exact. Kinds: an entry (argument summed),
 * an exit (return value summed), a call site (argument before, return value after), an
 * instruction where the flags are live (a snippet that clobbers them), a moved
 * rip-relative load; the shapes dyn needs beyond those (a call made with its original
 * return address, a block moved whole with an entry and an exit snippet, a short
 * indirect call moved with what follows it, a conditional tail call, an entry reached
 * through padding); the one flags rule; the refusals (too few bytes, out of reach, no
 * room); the bytes of a system call looked for in code (pt_syscall_pattern); and a
 * shared library's start that points its own PLT at the moved code (pt_got_fix_emit),
 * run on words of this process; instructions decoded once (pt_decode).
 */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "cfg/cfg.h"
#include "patch/patch.h"

#define PAGE 4096u

/* The mapping: code, trampolines, words. */
static uint8_t *map;
#define CODE (map)
#define TRAMP (map + PAGE)
#define WORDS ((volatile uint64_t *)(map + 2 * PAGE))

/* The procedures' offsets in CODE. */
enum { OFF_D = 0, OFF_F = 0x40, OFF_G = 0x50, OFF_H = 0x60, OFF_K = 0x80, OFF_M = 0xa0,
       OFF_N = 0xc0, OFF_T = 0xe0 };

static uint64_t
at(size_t off)
{
    return (uint64_t)(uintptr_t)(CODE + off);
}

static void
put(size_t *k, const uint8_t *b, size_t n)
{
    memcpy(CODE + *k, b, n);
    *k += n;
}

static void
put_rel32(size_t *k, uint8_t op, uint64_t target)
{
    uint8_t b[5] = { op };
    int32_t d = (int32_t)(target - (at(*k) + 5));
    memcpy(b + 1, &d, 4);
    put(k, b, 5);
}

/*
 * d: calls the others (so that the CFG finds them); f(x) = x + 5; g(x) = x + 7;
 * h(x) = f(x) through a call; k(a, b) = a < b (flags of a cmp live across an
 * instruction); m() = WORDS[6] through a rip-relative load.
 */
static void
assemble(void)
{
    size_t k = OFF_D;
    memset(CODE, 0xcc, PAGE);
    const size_t procs[] = { OFF_F, OFF_G, OFF_H, OFF_K, OFF_M };
    for (size_t i = 0; i < 5; i++)
        put_rel32(&k, 0xe8, at(procs[i]));
    put(&k, (const uint8_t[]) { 0xc3 }, 1);
    k = OFF_F; /* mov %rdi,%rax; add $5,%rax; ret */
    put(&k, (const uint8_t[]) { 0x48, 0x89, 0xf8, 0x48, 0x83, 0xc0, 0x05, 0xc3 }, 8);
    k = OFF_G; /* lea 7(%rdi),%rax; ret */
    put(&k, (const uint8_t[]) { 0x48, 0x8d, 0x47, 0x07, 0xc3 }, 5);
    k = OFF_H; /* sub $8,%rsp; call f; add $8,%rsp; ret */
    put(&k, (const uint8_t[]) { 0x48, 0x83, 0xec, 0x08 }, 4);
    put_rel32(&k, 0xe8, at(OFF_F));
    put(&k, (const uint8_t[]) { 0x48, 0x83, 0xc4, 0x08, 0xc3 }, 5);
    k = OFF_K; /* cmp %rsi,%rdi; mov $0,%eax; setl %al; ret */
    put(&k, (const uint8_t[]) { 0x48, 0x39, 0xf7, 0xb8, 0, 0, 0, 0, 0x0f, 0x9c, 0xc0, 0xc3 },
        12);
    k = OFF_M; /* mov WORDS[6](%rip),%rax; ret */
    uint8_t mov[7] = { 0x48, 0x8b, 0x05 };
    int32_t d = (int32_t)((uint64_t)(uintptr_t)&WORDS[6] - (at(k) + 7));
    memcpy(mov + 3, &d, 4);
    put(&k, mov, 7);
    put(&k, (const uint8_t[]) { 0xc3 }, 1);
    k = OFF_N; /* n(x, fn) = fn(x) + 1: mov %rsi,%rax; call *%rax; add $1,%rax; ret */
    put(&k, (const uint8_t[]) { 0x48, 0x89, 0xf0, 0xff, 0xd0, 0x48, 0x83, 0xc0, 0x01, 0xc3 },
        10);
    k = OFF_T; /* t(x) = x != 0 ? f(x) : 42: cmp $0,%rdi; jne f; mov $42,%eax; ret */
    put(&k, (const uint8_t[]) { 0x48, 0x83, 0xff, 0x00, 0x0f, 0x85 }, 6);
    int32_t dj = (int32_t)(at(OFF_F) - (at(k) + 4));
    memcpy(CODE + k, &dj, 4);
    k += 4;
    put(&k, (const uint8_t[]) { 0xb8, 42, 0, 0, 0, 0xc3 }, 6);
}

typedef uint64_t (*fn2_t)(uint64_t, uint64_t);

static uint64_t
call(size_t off, uint64_t a, uint64_t b)
{
    return ((fn2_t)(uintptr_t)(CODE + off))(a, b);
}

static cfg_image_t *img;
static cfg_prog_t *prog;
static size_t tramp_used;

static void
setup(void)
{
    map = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE | PROT_EXEC,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        map = NULL;
        return;
    }
    assemble();
    ck_assert_int_eq(cfg_image_from_bytes(CODE, PAGE, at(0), &img), 0);
    ck_assert_int_eq(cfg_prog_build(img, NULL, &prog), 0);
    tramp_used = 0;
}

static void
teardown(void)
{
    cfg_prog_destroy(prog);
    cfg_image_destroy(img);
    if (map != NULL)
        munmap(map, 3 * PAGE);
    prog = NULL;
    img = NULL;
}

/*
 * The point at ADDR from the CFG: the whole instructions of its block from ADDR that
 * cover a jump (PT_TRAMP_EXIT: those that end with the block's ret).
 */
static pt_tramp_t
point(uint32_t kind, uint64_t addr)
{
    const cfg_proc_t *p = cfg_proc_at(prog, addr);
    ck_assert_ptr_nonnull(p);
    uint32_t bi = cfg_block_at(prog, addr);
    ck_assert_uint_ne(bi, CFG_NONE);
    const cfg_block_t *b = &prog->blocks[bi];
    pt_tramp_t t = { .shape = kind, .addr = addr };
    arch_insn_t in;
    if (kind == PT_TRAMP_EXIT) {
        /* The tail of the block: back from its ret until 5 bytes are covered. */
        uint64_t starts[16];
        uint32_t n = 0;
        for (uint64_t a = b->start; a < b->end && n < 16; a += in.len) {
            ck_assert_int_eq(cfg_image_decode(img, a, 0, &in), 0);
            starts[n++] = a;
        }
        ck_assert_int_eq(in.kind, ARCH_KIND_RET);
        uint32_t first = n - 1;
        while (first > 0 && b->end - starts[first] < 5)
            first--;
        t.addr = starts[first];
        t.ninsns = n - first;
        t.len = (uint32_t)(b->end - starts[first]);
    } else {
        for (uint64_t a = addr; a < b->end && t.len < 5; a += in.len) {
            ck_assert_int_eq(cfg_image_decode(img, a, 0, &in), 0);
            t.len += in.len;
            t.ninsns++;
        }
    }
    t.orig = (const uint8_t *)(uintptr_t)t.addr; /* the bytes are this process's own */
    return t;
}

/* Build T's trampoline in TRAMP (from the procedure's bytes, still in place), then
 * write the jump over them. */
static void
install(pt_tramp_t *t, uint64_t *ret_at)
{
    uint8_t *tr = TRAMP + tramp_used;
    int n = pt_tramp_emit(t, (uint64_t)(uintptr_t)tr, tr, PAGE - tramp_used, ret_at);
    ck_assert_int_gt(n, 0);
    tramp_used += ((size_t)n + 15) & ~(size_t)15;
    uint8_t jmp[8];
    ck_assert_int_eq(pt_tramp_patch(t->addr, (uint64_t)(uintptr_t)tr, jmp, sizeof(jmp)), 5);
    memcpy((uint8_t *)(uintptr_t)t->addr, jmp, 5);
}

/* A snippet node with no operands but those given. */
#define NODE(...) ((arch_snip_t) { .a = ARCH_SNIP_NONE, .b = ARCH_SNIP_NONE, \
                                   .c = ARCH_SNIP_NONE, __VA_ARGS__ })

/* WORDS[W] += VALUE (a leaf), where WHERE holds and LIVE_FLAGS are live. */
static pt_snip_t
add_to(arch_snip_t v[2], int w, arch_snip_t value, uint32_t where, uint8_t live_flags)
{
    v[0] = value;
    v[1] = NODE(.op = ARCH_SN_ADD_TO, .imm = (int64_t)(uintptr_t)&WORDS[w]);
    v[1].a = 0;
    return (pt_snip_t) { v, 2, 1, { where, 0, live_flags, live_flags ? 0 : 1 } };
}

START_TEST(test_tramp_kinds)
{
    if (map == NULL) {
        fprintf(stderr, "test_tramp_kinds: no RWX mapping, skipped\n");
        return;
    }
    ck_assert_ptr_nonnull(cfg_proc_at(prog, at(OFF_F)));
    ck_assert_ptr_nonnull(cfg_proc_at(prog, at(OFF_M)));
    WORDS[6] = 1234;
    /* Natively first. */
    ck_assert_uint_eq(call(OFF_F, 10, 0), 15);
    ck_assert_uint_eq(call(OFF_H, 1, 0), 6);
    ck_assert_uint_eq(call(OFF_K, 1, 2), 1);
    ck_assert_uint_eq(call(OFF_M, 0, 0), 1234);

    arch_snip_t ve[2], vx[2], vc[2], va[2], vk[2], vm[2];
    /* f's entry: WORDS[0] += argument 0 (two instructions moved). */
    pt_tramp_t e = point(PT_TRAMP_BEFORE, at(OFF_F));
    ck_assert_uint_eq(e.ninsns, 2);
    e.before = add_to(ve, 0, NODE(.op = ARCH_SN_ARG, .imm = 0), ARCH_SNX_ENTRY, 0);
    install(&e, NULL);
    /* g's exit: WORDS[1] += the return value (the lea and the ret). */
    pt_tramp_t x = point(PT_TRAMP_EXIT, at(OFF_G));
    ck_assert_uint_eq(x.ninsns, 2);
    x.before = add_to(vx, 1, NODE(.op = ARCH_SN_RETVAL), ARCH_SNX_RETURN, 0);
    install(&x, NULL);
    /* h's call of f: WORDS[2] += its argument, WORDS[3] += what it returned. */
    pt_tramp_t c = point(PT_TRAMP_CALL, at(OFF_H + 4));
    ck_assert_uint_eq(c.ninsns, 1);
    c.before = add_to(vc, 2, NODE(.op = ARCH_SN_ARG, .imm = 0), ARCH_SNX_CALL, 0);
    c.after = add_to(va, 3, NODE(.op = ARCH_SN_RETVAL), ARCH_SNX_AFTER_CALL, 0);
    uint64_t ret_at = 0;
    install(&c, &ret_at);
    ck_assert_uint_gt(ret_at, (uint64_t)(uintptr_t)TRAMP);
    /* k's mov between its cmp and setl: flags live; WORDS[4] += 1 (an add: clobbers). */
    pt_tramp_t kk = point(PT_TRAMP_BEFORE, at(OFF_K + 3));
    kk.before = add_to(vk, 4, NODE(.op = ARCH_SN_CONST, .imm = 1), 0, ARCH_FLAGS_STATUS);
    install(&kk, NULL);
    /* m's entry: the rip-relative load moved; WORDS[5] += 1. */
    pt_tramp_t m = point(PT_TRAMP_BEFORE, at(OFF_M));
    m.before = add_to(vm, 5, NODE(.op = ARCH_SN_CONST, .imm = 1), ARCH_SNX_ENTRY, 0);
    install(&m, NULL);

    uint64_t sum = 0;
    for (uint64_t i = 0; i < 50; i++) {
        ck_assert_uint_eq(call(OFF_F, i, 0), i + 5);
        ck_assert_uint_eq(call(OFF_G, i, 0), i + 7);
        ck_assert_uint_eq(call(OFF_H, i, 0), i + 5);
        ck_assert_uint_eq(call(OFF_K, i, 25), i < 25);
        ck_assert_uint_eq(call(OFF_K, 25, i), 25 < i);
        ck_assert_uint_eq(call(OFF_M, 0, 0), 1234);
        sum += i;
    }
    ck_assert_uint_eq(WORDS[0], 2 * sum);         /* f, called directly and by h */
    ck_assert_uint_eq(WORDS[1], sum + 7 * 50);    /* g's return values */
    ck_assert_uint_eq(WORDS[2], sum);             /* h's arguments to f */
    ck_assert_uint_eq(WORDS[3], sum + 5 * 50);    /* f's returns to h */
    ck_assert_uint_eq(WORDS[4], 100);
    ck_assert_uint_eq(WORDS[5], 50);
}
END_TEST

/* A point at OFF of LEN bytes, NINSNS instructions, of SHAPE (built by hand). */
static pt_tramp_t
raw(uint32_t shape, size_t off, uint32_t len, uint32_t ninsns)
{
    return (pt_tramp_t) { .shape = shape, .addr = at(off), .orig = CODE + off, .len = len,
                          .ninsns = ninsns };
}

/* The shapes a process needs beyond before/call/exit, each run in this process. */
START_TEST(test_tramp_own_shapes)
{
    if (map == NULL)
        return;
    arch_snip_t v1[2], v2[2], v3[2], v4[2], v5[2], v6[2], v7[2];
    /* h's entry: `sub $8,%rsp; call f` moved, the call made with its original return
     * address (call_ret): f returns into h itself. The after snippet runs before the
     * call (as at a call that never returns, an exit). */
    pt_tramp_t h = raw(PT_TRAMP_OWN, OFF_H, 9, 2);
    h.call_ret = 1;
    h.before = add_to(v1, 0, NODE(.op = ARCH_SN_ARG, .imm = 0), ARCH_SNX_ENTRY, 0);
    h.after = add_to(v7, 7, NODE(.op = ARCH_SN_ARG, .imm = 0), ARCH_SNX_CALL, 0);
    install(&h, NULL);
    /* g moved whole: the entry's snippet, the lea, the exit's snippet, the ret. */
    pt_tramp_t g = raw(PT_TRAMP_OWN, OFF_G, 5, 2);
    g.before = add_to(v2, 1, NODE(.op = ARCH_SN_CONST, .imm = 1), ARCH_SNX_ENTRY, 0);
    g.after = add_to(v3, 2, NODE(.op = ARCH_SN_RETVAL), ARCH_SNX_RETURN, 0);
    install(&g, NULL);
    /* n's `call *%rax` (2 bytes) moved with the add after it (call_len). */
    pt_tramp_t n = raw(PT_TRAMP_CALL_NEXT, OFF_N + 3, 6, 2);
    n.call_len = 2;
    n.before = add_to(v4, 3, NODE(.op = ARCH_SN_CONST, .imm = 1), 0, ARCH_FLAGS_STATUS);
    uint64_t ret_at = 0;
    install(&n, &ret_at);
    ck_assert_uint_gt(ret_at, (uint64_t)(uintptr_t)TRAMP);
    /* t's conditional tail call (tail 2): the snippet only when it is taken. */
    pt_tramp_t t = raw(PT_TRAMP_OWN, OFF_T, 10, 2);
    t.tail = 2;
    t.before = add_to(v5, 4, NODE(.op = ARCH_SN_CONST, .imm = 1), ARCH_SNX_ENTRY, 0);
    t.after = add_to(v6, 5, NODE(.op = ARCH_SN_CONST, .imm = 1), 0, ARCH_FLAGS_STATUS);
    install(&t, NULL);

    uint64_t sum = 0, nz = 0;
    for (uint64_t i = 0; i < 40; i++) {
        ck_assert_uint_eq(call(OFF_H, i, 0), i + 5);
        ck_assert_uint_eq(call(OFF_G, i, 0), i + 7);
        ck_assert_uint_eq(call(OFF_N, i, at(OFF_F)), i + 6);
        ck_assert_uint_eq(call(OFF_T, i % 3, 0), i % 3 ? i % 3 + 5 : 42);
        sum += i;
        nz += i % 3 != 0;
    }
    ck_assert_uint_eq(WORDS[0], sum);
    ck_assert_uint_eq(WORDS[1], 40);
    ck_assert_uint_eq(WORDS[2], sum + 7 * 40);
    ck_assert_uint_eq(WORDS[3], 40);
    ck_assert_uint_eq(WORDS[4], 40);
    ck_assert_uint_eq(WORDS[5], nz);
    ck_assert_uint_eq(WORDS[7], sum);
}
END_TEST

/* An entry of fewer than 5 bytes reached through padding: a jmp rel8 at g to a jmp in
 * the padding after it, the trampoline moving g's 4-byte lea (nops make up the 5). */
START_TEST(test_tramp_padded)
{
    if (map == NULL)
        return;
    arch_snip_t v[2];
    pt_tramp_t g = raw(PT_TRAMP_BEFORE, OFF_G, 4, 1);
    g.before = add_to(v, 0, NODE(.op = ARCH_SN_CONST, .imm = 1), ARCH_SNX_ENTRY, 0);
    uint8_t out[256];
    ck_assert_int_eq(pt_tramp_emit(&g, (uint64_t)(uintptr_t)TRAMP, out, sizeof(out), NULL),
                     QP_EINVAL); /* not padded: the bytes do not hold a jump */
    g.padded = 1;
    uint8_t *tr = TRAMP;
    int n = pt_tramp_emit(&g, (uint64_t)(uintptr_t)tr, tr, PAGE, NULL);
    ck_assert_int_gt(n, 0);
    uint64_t pad = at(OFF_G + 8);
    ck_assert_int_eq(pt_tramp_patch(pad, (uint64_t)(uintptr_t)tr, CODE + OFF_G + 8, 5), 5);
    CODE[OFF_G] = 0xeb;
    CODE[OFF_G + 1] = (uint8_t)(pad - (at(OFF_G) + 2));
    for (uint64_t i = 0; i < 30; i++)
        ck_assert_uint_eq(call(OFF_G, i, 0), i + 7);
    ck_assert_uint_eq(WORDS[0], 30);
}
END_TEST

/* The flags rule: what each instruction reads and writes; a call and a ret end
 * liveness; the context of each point kind. */
START_TEST(test_flags_rule)
{
    if (map == NULL)
        return;
    /* cmp %rsi,%rdi; mov $0,%eax; setl %al; ret (k) */
    arch_insn_t v[4];
    uint64_t a = at(OFF_K);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(arch_decode(CODE + (a - at(0)), 16, a, &v[i]), 0);
        a += v[i].len;
    }
    uint8_t live[4];
    pt_flags_live_in(v, 4, ARCH_FLAGS_STATUS, live);
    ck_assert_uint_eq(live[0], 0);    /* cmp writes them all */
    ck_assert_uint_ne(live[1], 0);    /* setl reads SF and OF */
    ck_assert_uint_ne(live[2], 0);
    ck_assert_uint_eq(live[3], 0);    /* a ret: dead by the ABI */
    ck_assert(pt_flags_must_save(live[1], ARCH_FLAGS_STATUS));
    ck_assert(!pt_flags_must_save(live[0], ARCH_FLAGS_STATUS));
    /* A call: the callee may change every flag. */
    arch_insn_t c;
    ck_assert_int_eq(arch_decode(CODE + OFF_D, 16, at(OFF_D), &c), 0);
    ck_assert_uint_eq(pt_flags_live_before(&c, ARCH_FLAGS_STATUS, PT_ABI_SYSV), 0);
    ck_assert_uint_eq(pt_flags_at_entry(1), 0);
    ck_assert_uint_eq(pt_flags_at_entry(0), ARCH_FLAGS_STATUS);
    arch_snip_ctx_t x = pt_point_ctx(PT_POINT_ENTRY, 0);
    ck_assert_uint_eq(x.where, ARCH_SNX_ENTRY);
    ck_assert_uint_eq(x.no_red_zone, 1);
    x = pt_point_ctx(PT_POINT_ENTRY, ARCH_FLAGS_STATUS); /* not called by the ABI */
    ck_assert_uint_eq(x.no_red_zone, 0);
    x = pt_point_ctx(PT_POINT_AFTER_CALL, 0);
    ck_assert_uint_eq(x.where, ARCH_SNX_AFTER_CALL);
    x = pt_point_ctx(PT_POINT_BLOCK, ARCH_FLAGS_STATUS);
    ck_assert_uint_eq(x.where, 0);
    ck_assert_uint_eq(x.live_flags, ARCH_FLAGS_STATUS);
}
END_TEST

START_TEST(test_tramp_refusals)
{
    if (map == NULL)
        return;
    arch_snip_t v[2];
    pt_tramp_t e = point(PT_TRAMP_BEFORE, at(OFF_F));
    e.before = add_to(v, 0, NODE(.op = ARCH_SN_CONST, .imm = 1), ARCH_SNX_ENTRY, 0);
    uint8_t out[512];
    uint64_t here = (uint64_t)(uintptr_t)TRAMP;
    /* The bytes do not hold a jump; the instructions do not cover them. */
    pt_tramp_t shrt = e;
    shrt.len = 4;
    ck_assert_int_eq(pt_tramp_emit(&shrt, here, out, sizeof(out), NULL), QP_EINVAL);
    ck_assert_int_eq(pt_tramp_patch(shrt.addr, here, out, 4), QP_EINVAL);
    pt_tramp_t one = e;
    one.ninsns = 1;
    ck_assert_int_eq(pt_tramp_emit(&one, here, out, sizeof(out), NULL), QP_EINVAL);
    /* No room. */
    ck_assert_int_lt(pt_tramp_emit(&e, here, out, 8, NULL), 0);
    /* Out of reach: a trampoline 8 GiB away cannot jump back, nor reach the words. */
    ck_assert_int_eq(pt_tramp_emit(&e, here + (8ull << 30), out, sizeof(out), NULL),
                     QP_ERANGE);
    ck_assert_int_eq(pt_tramp_patch(e.addr, here + (8ull << 30), out, sizeof(out)), QP_ERANGE);
    /* And nothing was written over the procedure. */
    ck_assert_uint_eq(call(OFF_F, 1, 0), 6);
}
END_TEST

/*
 * A procedure relocated whole (pt_proc_emit, dyn's shape for a procedure whose points
 * do not fit): p(x) = x > 100 ? g(x) (a conditional tail call) : x == 0 ? 0 (a short
 * return block) : sum of f(i) for i = x..1 (a loop around a call). The copy is entered
 * by a jump at p's entry and back from f's return site; p's results unchanged, the
 * entry, ret and leave snippets exact, and the callee sees p's original return address.
 */
enum { OFF_P = 0x100, P_LOOP = 0x119, P_RET_SITE = 0x121, P_END = 0x132 };

static void
assemble_p(void)
{
    size_t k = OFF_P;
    put(&k, (const uint8_t[]) { 0x48, 0x81, 0xff, 100, 0, 0, 0 }, 7); /* cmp $100,%rdi */
    put(&k, (const uint8_t[]) { 0x0f, 0x87 }, 2);                     /* ja g */
    int32_t dj = (int32_t)(at(OFF_G) - (at(k) + 4));
    memcpy(CODE + k, &dj, 4);
    k += 4;
    put(&k, (const uint8_t[]) { 0x48, 0x85, 0xff, 0x74, 0x1d, /* test; je Z */
                                0x53, 0x55, 0x48, 0x89, 0xfb, 0x31, 0xed }, /* push; push; mov; xor */
        12);
    ck_assert_uint_eq(k, P_LOOP);
    put(&k, (const uint8_t[]) { 0x48, 0x89, 0xdf }, 3); /* L: mov %rbx,%rdi */
    put_rel32(&k, 0xe8, at(OFF_F));                      /* call f */
    ck_assert_uint_eq(k, P_RET_SITE);
    put(&k, (const uint8_t[]) { 0x48, 0x01, 0xc5, 0x48, 0xff, 0xcb, 0x75, 0xf0, /* add; dec; jne L */
                                0x48, 0x89, 0xe8, 0x5d, 0x5b, 0xc3,             /* mov; pops; ret */
                                0x31, 0xc0, 0xc3 },                             /* Z: xor; ret */
        17);
    ck_assert_uint_eq(k, P_END);
}

static uint64_t
p_truth(uint64_t x)
{
    return x > 100 ? x + 7 : x * (x + 1) / 2 + 5 * x;
}

START_TEST(test_reloc_whole)
{
    assemble_p();
    arch_snip_t ve[2], vr[2], vl[2];
    pt_run_t run = { at(OFF_P), CODE + OFF_P, P_END - OFF_P };
    pt_proc_t p = { &run, 1, at(OFF_P),
        add_to(ve, 10, NODE(.op = ARCH_SN_CONST, .imm = 1), ARCH_SNX_ENTRY, 0),
        add_to(vr, 11, NODE(.op = ARCH_SN_CONST, .imm = 1), ARCH_SNX_RETURN, 0),
        add_to(vl, 12, NODE(.op = ARCH_SN_CONST, .imm = 1), 0, ARCH_FLAGS_STATUS), NULL, 0,
        NULL, 0, NULL, 0, NULL, 0, NULL, 0, NULL };
    pt_map_t m[64];
    size_t nm = 0;
    ck_assert_uint_ge(sizeof(m) / sizeof(m[0]), pt_proc_mapcap(&p) / 4);
    uint8_t *tr = TRAMP;
    int n = pt_proc_emit(&p, (uint64_t)(uintptr_t)tr, tr, PAGE, m, 64, &nm);
    ck_assert_int_gt(n, 0);
    ck_assert_uint_le((size_t)n, pt_proc_size(&p, 64));
    ck_assert_uint_eq(nm, 19);
    /* Every instruction has its copy, nothing inside one. */
    ck_assert_uint_ne(pt_proc_at(m, nm, at(P_LOOP)), 0);
    ck_assert_uint_eq(pt_proc_at(m, nm, at(P_LOOP) + 1), 0);
    uint64_t rs = pt_proc_at(m, nm, at(P_RET_SITE));
    ck_assert_uint_ne(rs, 0);
    /* The entry's jump and the return site's, as dyn writes them. */
    uint8_t jmp[8];
    ck_assert_int_eq(pt_tramp_patch(at(OFF_P), (uint64_t)(uintptr_t)tr, jmp, 8), 5);
    memcpy(CODE + OFF_P, jmp, 5);
    ck_assert_int_eq(pt_tramp_patch(at(P_RET_SITE), rs, jmp, 8), 5);
    memcpy(CODE + P_RET_SITE, jmp, 5);
    const uint64_t xs[] = { 0, 1, 3, 100, 101, 250, 7 };
    uint64_t rets = 0, leaves = 0;
    for (size_t i = 0; i < sizeof(xs) / sizeof(xs[0]); i++) {
        ck_assert_uint_eq(call(OFF_P, xs[i], 0), p_truth(xs[i]));
        rets += xs[i] <= 100;
        leaves += xs[i] > 100;
    }
    ck_assert_uint_eq(WORDS[10], sizeof(xs) / sizeof(xs[0]));
    ck_assert_uint_eq(WORDS[11], rets);
    ck_assert_uint_eq(WORDS[12], leaves);
}
END_TEST

/*
 * Call sites in a copy: the counter before p's `call f` runs once per call (the copy
 * makes the call with its original return address, whose jump leads back into the
 * copy); a site that is not a call of the runs is refused (QP_EINVAL), never dropped.
 */
START_TEST(test_reloc_sites)
{
    assemble_p();
    arch_snip_t ve[2], vc[2];
    pt_run_t run = { at(OFF_P), CODE + OFF_P, P_END - OFF_P };
    pt_snip_t count = add_to(vc, 13, NODE(.op = ARCH_SN_CONST, .imm = 1), ARCH_SNX_CALL, 0);
    count.ctx = pt_point_ctx(PT_POINT_CALL, 0);
    pt_site_t site = { at(P_RET_SITE - 5), count };
    pt_proc_t p = { &run, 1, at(OFF_P),
        add_to(ve, 10, NODE(.op = ARCH_SN_CONST, .imm = 1), ARCH_SNX_ENTRY, 0), { 0 }, { 0 },
        NULL, 0, NULL, 0, NULL, 0, NULL, 0, &site, 1, NULL };
    pt_map_t m[64];
    size_t nm = 0;
    uint8_t *tr = TRAMP;
    int n = pt_proc_emit(&p, (uint64_t)(uintptr_t)tr, tr, PAGE, m, 64, &nm);
    ck_assert_int_gt(n, 0);
    ck_assert_uint_le((size_t)n, pt_proc_size(&p, 64));
    uint8_t jmp[8];
    ck_assert_int_eq(pt_tramp_patch(at(OFF_P), (uint64_t)(uintptr_t)tr, jmp, 8), 5);
    memcpy(CODE + OFF_P, jmp, 5);
    ck_assert_int_eq(pt_tramp_patch(at(P_RET_SITE), pt_proc_at(m, nm, at(P_RET_SITE)), jmp, 8), 5);
    memcpy(CODE + P_RET_SITE, jmp, 5);
    const uint64_t xs[] = { 0, 1, 3, 100, 101, 7 };
    uint64_t calls = 0;
    for (size_t i = 0; i < sizeof(xs) / sizeof(xs[0]); i++) {
        ck_assert_uint_eq(call(OFF_P, xs[i], 0), p_truth(xs[i]));
        calls += xs[i] <= 100 ? xs[i] : 0; /* f once per step of the loop */
    }
    ck_assert_uint_eq(WORDS[10], sizeof(xs) / sizeof(xs[0]));
    ck_assert_uint_eq(WORDS[13], calls);
    /* Not a call (the loop's first instruction): refused. */
    site.addr = at(P_LOOP);
    ck_assert_int_eq(pt_proc_emit(&p, (uint64_t)(uintptr_t)tr, tr, PAGE, m, 64, &nm), QP_EINVAL);
}
END_TEST

/*
 * A call that never returns into the procedure ends it in a copy: the leave snippet runs
 * before it, whether its return address is outside the runs or the call is listed in
 * noret; the callee returns to the original code (here h's `add; ret`), as it would
 * uninstrumented.
 */
START_TEST(test_reloc_noret)
{
    arch_snip_t vr[2], vl[2];
    /* h's `sub $8,%rsp; call f` alone: the call's return address is not in the runs. */
    pt_run_t run = { at(OFF_H), CODE + OFF_H, 9 };
    pt_proc_t p = { &run, 1, at(OFF_H), { 0 },
        add_to(vr, 8, NODE(.op = ARCH_SN_CONST, .imm = 1), ARCH_SNX_RETURN, 0),
        add_to(vl, 9, NODE(.op = ARCH_SN_CONST, .imm = 1), 0, ARCH_FLAGS_STATUS), NULL, 0,
        NULL, 0, NULL, 0, NULL, 0, NULL, 0, NULL };
    pt_map_t m[16];
    size_t nm = 0;
    uint8_t *tr = TRAMP;
    int n = pt_proc_emit(&p, (uint64_t)(uintptr_t)tr, tr, PAGE, m, 16, &nm);
    ck_assert_int_gt(n, 0);
    ck_assert_uint_le((size_t)n, pt_proc_size(&p, 64));
    for (uint64_t i = 0; i < 10; i++)
        ck_assert_uint_eq(call(PAGE, i, 0), i + 5);
    ck_assert_uint_eq(WORDS[9], 10);
    /* All of h, its call an ordinary one: no leave snippet (nor a ret's: f returns to
     * the original, whose return-site jump is not written here). */
    run.len = 14;
    ck_assert_int_gt(n = pt_proc_emit(&p, (uint64_t)(uintptr_t)tr, tr, PAGE, m, 16, &nm), 0);
    for (uint64_t i = 0; i < 10; i++)
        ck_assert_uint_eq(call(PAGE, i, 0), i + 5);
    ck_assert_uint_eq(WORDS[9], 10);
    /* ... and listed as never returning: the leave snippet before it. */
    const uint64_t noret[] = { at(OFF_H + 4) };
    p.noret = noret;
    p.nnoret = 1;
    ck_assert_int_gt(n = pt_proc_emit(&p, (uint64_t)(uintptr_t)tr, tr, PAGE, m, 16, &nm), 0);
    ck_assert_uint_le((size_t)n, pt_proc_size(&p, 64));
    for (uint64_t i = 0; i < 10; i++)
        ck_assert_uint_eq(call(PAGE, i, 0), i + 5);
    ck_assert_uint_eq(WORDS[9], 20);
    ck_assert_uint_eq(WORDS[8], 0);
}
END_TEST

/*
 * A jump table's indirect jump in a copy (inner): relocated as it is, to the target the
 * data gives (in the original, where dyn writes a jump into the copy), with no leave
 * snippet; an indirect jump not listed is taken as leaving (its snippet runs).
 */
START_TEST(test_reloc_table_jump)
{
    /* lea L(%rip),%rax; jmp *%rax; L: mov %rdi,%rax; ret */
    size_t k = 0x140;
    put(&k, (const uint8_t[]) { 0x48, 0x8d, 0x05, 2, 0, 0, 0, 0xff, 0xe0, 0x48, 0x89, 0xf8,
                                0xc3 },
        13);
    arch_snip_t vl[2];
    pt_run_t run = { at(0x140), CODE + 0x140, 13 };
    pt_proc_t p = { &run, 1, at(0x140), { 0 }, { 0 },
        add_to(vl, 9, NODE(.op = ARCH_SN_CONST, .imm = 1), 0, ARCH_FLAGS_STATUS), NULL, 0,
        NULL, 0, NULL, 0, NULL, 0, NULL, 0, NULL };
    pt_map_t m[16];
    size_t nm = 0;
    uint8_t *tr = TRAMP;
    ck_assert_int_gt(pt_proc_emit(&p, (uint64_t)(uintptr_t)tr, tr, PAGE, m, 16, &nm), 0);
    for (uint64_t i = 0; i < 10; i++)
        ck_assert_uint_eq(call(PAGE, i, 0), i);
    ck_assert_uint_eq(WORDS[9], 10);
    const uint64_t inner[] = { at(0x147) };
    p.inner = inner;
    p.ninner = 1;
    ck_assert_int_gt(pt_proc_emit(&p, (uint64_t)(uintptr_t)tr, tr, PAGE, m, 16, &nm), 0);
    for (uint64_t i = 0; i < 10; i++)
        ck_assert_uint_eq(call(PAGE, i, 0), i);
    ck_assert_uint_eq(WORDS[9], 10);
}
END_TEST

/*
 * Indirect jumps of unknown targets in a copy (pt_proc_t's unknown), translated at run
 * time: q(x, t1, t2) = `mov %rdi,%rax; xchg %rsi,%rdx; jmp *%rdx`, then L1: `add
 * $1,%rax; ret` and L2: `add $2,%rax; ret`. A target that is q's own instruction runs its
 * copy (the original is overwritten with int3 once the copy is made: a jump into it
 * would trap), the xchg too, inside the entry's first 5 bytes (t1 = entry + 3: it swaps
 * back and goes to t2); any other target (o(x) = x + 100, outside) runs the leave
 * snippet and goes there; an exit the caller did not choose goes there without it. The
 * flags are kept across the translation (a cmp before the jump, a setb after it).
 */
enum { OFF_Q = 0x180, Q_JMP = 0x186, Q_L1 = 0x188, Q_L2 = 0x18d, Q_END = 0x192, OFF_O = 0x1c0,
       OFF_S = 0x1d0 };

typedef uint64_t (*fn3_t)(uint64_t, uint64_t, uint64_t);

START_TEST(test_reloc_unknown_jump)
{
    size_t k = OFF_Q;
    put(&k, (const uint8_t[]) { 0x48, 0x89, 0xf8, 0x48, 0x87, 0xf2, /* mov; xchg %rsi,%rdx */
                                0xff, 0xe2,                         /* jmp *%rdx */
                                0x48, 0x83, 0xc0, 0x01, 0xc3,       /* L1: add $1,%rax; ret */
                                0x48, 0x83, 0xc0, 0x02, 0xc3 },     /* L2: add $2,%rax; ret */
        18);
    ck_assert_uint_eq(k, Q_END);
    k = OFF_O; /* o: lea 100(%rdi),%rax; ret */
    put(&k, (const uint8_t[]) { 0x48, 0x8d, 0x47, 0x64, 0xc3 }, 5);
    /* s: cmp %rdi,%rsi (CF: rsi < rdi), then jmp *%rdx to `setb %al; movzbl %al,%eax;
     * ret` right after it: the flags go through the jump. */
    k = OFF_S;
    put(&k, (const uint8_t[]) { 0x48, 0x39, 0xfe, 0xff, 0xe2, 0x0f, 0x92, 0xc0, 0x0f, 0xb6,
                                0xc0, 0xc3 },
        12);
    arch_snip_t ve[2], vr[2], vl[2];
    uint8_t qbytes[Q_END - OFF_Q]; /* (the run's bytes: the original is overwritten) */
    memcpy(qbytes, CODE + OFF_Q, sizeof(qbytes));
    pt_run_t run = { at(OFF_Q), qbytes, Q_END - OFF_Q };
    const uint64_t unknown[] = { at(Q_JMP) };
    pt_proc_t p = { &run, 1, at(OFF_Q),
        add_to(ve, 10, NODE(.op = ARCH_SN_CONST, .imm = 1), ARCH_SNX_ENTRY, 0),
        add_to(vr, 11, NODE(.op = ARCH_SN_CONST, .imm = 1), ARCH_SNX_RETURN, 0),
        add_to(vl, 12, NODE(.op = ARCH_SN_CONST, .imm = 1), 0, ARCH_FLAGS_STATUS), NULL, 0,
        NULL, 0, NULL, 0, unknown, 1, NULL, 0, NULL };
    pt_map_t m[32];
    size_t nm = 0;
    uint8_t *tr = TRAMP;
    fn3_t q = (fn3_t)(uintptr_t)tr;
    int n = pt_proc_emit(&p, (uint64_t)(uintptr_t)tr, tr, PAGE, m, 32, &nm);
    ck_assert_int_gt(n, 0);
    ck_assert_uint_le((size_t)n, pt_proc_size(&p, 64));
    ck_assert_uint_eq(nm, 7);
    memset(CODE + OFF_Q, 0xcc, Q_END - OFF_Q); /* nothing may run the original now */
    for (uint64_t i = 0; i < 10; i++) {
        ck_assert_uint_eq(q(i, at(Q_L1), 0), i + 1);
        ck_assert_uint_eq(q(i, at(Q_L2), 0), i + 2);
        ck_assert_uint_eq(q(i, at(OFF_O), 0), i + 100);
        ck_assert_uint_eq(q(i, at(OFF_Q + 3), at(Q_L2)), i + 2);
    }
    ck_assert_uint_eq(WORDS[10], 40);
    ck_assert_uint_eq(WORDS[11], 30);
    ck_assert_uint_eq(WORDS[12], 10);
    /* Only the chosen exits get their snippet; leaving through a translated jump (no
     * list can name it) gets it whenever some exit does, and not when none does. */
    const uint64_t exits[] = { at(Q_L1 + 4) };
    p.exits = exits;
    p.nexits = 1;
    ck_assert_int_gt(pt_proc_emit(&p, (uint64_t)(uintptr_t)tr, tr, PAGE, m, 32, &nm), 0);
    ck_assert_uint_eq(q(1, at(OFF_O), 0), 101);
    ck_assert_uint_eq(q(1, at(Q_L1), 0), 2);
    ck_assert_uint_eq(q(1, at(Q_L2), 0), 3);
    ck_assert_uint_eq(WORDS[12], 11);
    ck_assert_uint_eq(WORDS[11], 31);
    p.nexits = 0;
    ck_assert_int_gt(pt_proc_emit(&p, (uint64_t)(uintptr_t)tr, tr, PAGE, m, 32, &nm), 0);
    ck_assert_uint_eq(q(1, at(OFF_O), 0), 101);
    ck_assert_uint_eq(q(1, at(Q_L1), 0), 2);
    ck_assert_uint_eq(WORDS[12], 11);
    ck_assert_uint_eq(WORDS[11], 31);
    /* The flags through the translation: s relocated, its jump translated. */
    pt_run_t rs = { at(OFF_S), CODE + OFF_S, 12 };
    const uint64_t sj[] = { at(OFF_S + 3) };
    pt_proc_t ps = { &rs, 1, at(OFF_S), { 0 }, { 0 }, { 0 }, NULL, 0, NULL, 0, NULL, 0, sj, 1, NULL, 0, NULL };
    ck_assert_int_gt(pt_proc_emit(&ps, (uint64_t)(uintptr_t)tr, tr, PAGE, m, 32, &nm), 0);
    for (uint64_t i = 0; i < 6; i++)
        ck_assert_uint_eq(q(3, i, at(OFF_S + 5)), i < 3);
}
END_TEST

/* IN and arch_decode's OUT are the same instruction. */
static void
same_insn(const arch_insn_t *in, const arch_insn_t *out)
{
    ck_assert_uint_eq(in->addr, out->addr);
    ck_assert_uint_eq(in->target, out->target);
    ck_assert_uint_eq(in->len, out->len);
    ck_assert_uint_eq(in->kind, out->kind);
    ck_assert_uint_eq(in->rel_off, out->rel_off);
    ck_assert_uint_eq(in->rel_size, out->rel_size);
    ck_assert_uint_eq(in->flags, out->flags);
    ck_assert_uint_eq(in->flags_read, out->flags_read);
    ck_assert_uint_eq(in->flags_written, out->flags_written);
}

/*
 * Instructions decoded once (pt_decoded_t): what arch_decode gives, kept and given again
 * (pt_decoded_hits) for the same bytes at the same address only - other bytes at an
 * address kept before (a buffer reused), the same bytes elsewhere, too few bytes are
 * decoded anew; and a copy emitted with them is the one emitted without, the second
 * time every instruction of it from what was kept.
 */
START_TEST(test_decoded_once)
{
    pt_decoded_t *d = pt_decoded_new();
    ck_assert_ptr_nonnull(d);
    uint8_t buf[16] = { 0x48, 0x8b, 0x05, 0x10, 0, 0, 0 }; /* mov 0x10(%rip),%rax */
    arch_insn_t in, out;
    ck_assert_uint_eq(pt_decoded_hits(NULL), 0);
    for (int k = 0; k < 2; k++) { /* decoded, then kept */
        ck_assert_int_eq(pt_decode(d, buf, sizeof(buf), 0x400000, &in), 0);
        ck_assert_int_eq(arch_decode(buf, sizeof(buf), 0x400000, &out), 0);
        same_insn(&in, &out);
        ck_assert_uint_eq(in.target, 0x400017);
        ck_assert_uint_eq(pt_decoded_hits(d), (size_t)k);
    }
    ck_assert_int_eq(pt_decode(d, buf, sizeof(buf), 0x500000, &in), 0);
    ck_assert_uint_eq(in.target, 0x500017);
    ck_assert_uint_eq(pt_decoded_hits(d), 1); /* another address: decoded */
    ck_assert_int_eq(pt_decode(d, buf, 3, 0x400000, &in), QP_EDECODE);
    ck_assert_uint_eq(pt_decoded_hits(d), 1); /* too few bytes: decoded (and refused) */
    /* Other bytes in the same buffer at the same address: call .+0x20 */
    const uint8_t call[] = { 0xe8, 0x20, 0, 0, 0 };
    memcpy(buf, call, sizeof(call));
    ck_assert_int_eq(pt_decode(d, buf, sizeof(buf), 0x400000, &in), 0);
    ck_assert_int_eq(arch_decode(buf, sizeof(buf), 0x400000, &out), 0);
    same_insn(&in, &out);
    ck_assert_uint_eq(in.kind, ARCH_KIND_CALL);
    ck_assert_uint_eq(in.target, 0x400025);
    ck_assert_uint_eq(pt_decoded_hits(d), 1);
    ck_assert_int_eq(pt_decode(d, buf, sizeof(buf), 0x400000, &in), 0); /* now kept */
    ck_assert_uint_eq(in.kind, ARCH_KIND_CALL);
    ck_assert_uint_eq(pt_decoded_hits(d), 2);
    /* Many addresses (the set grows), each as arch_decode says, each kept. */
    for (uint64_t a = 0x600000; a < 0x600000 + 5000; a++)
        ck_assert_int_eq(pt_decode(d, buf, sizeof(buf), a, &in), 0);
    ck_assert_uint_eq(pt_decoded_hits(d), 2);
    for (uint64_t a = 0x600000; a < 0x600000 + 5000; a += 7) {
        ck_assert_int_eq(pt_decode(d, buf, sizeof(buf), a, &in), 0);
        ck_assert_int_eq(arch_decode(buf, sizeof(buf), a, &out), 0);
        same_insn(&in, &out);
    }
    ck_assert_uint_eq(pt_decoded_hits(d), 2 + (5000 + 6) / 7);
    /* A copy emitted with the set (twice: decoded, then kept) and without. */
    assemble_p();
    arch_snip_t ve[2];
    pt_run_t run = { at(OFF_P), CODE + OFF_P, P_END - OFF_P };
    pt_proc_t p = { &run, 1, at(OFF_P),
        add_to(ve, 10, NODE(.op = ARCH_SN_CONST, .imm = 1), ARCH_SNX_ENTRY, 0), { 0 }, { 0 },
        NULL, 0, NULL, 0, NULL, 0, NULL, 0, NULL, 0, NULL };
    uint8_t plain[PAGE / 2], kept[PAGE / 2];
    pt_map_t m1[64], m2[64];
    size_t n1, n2;
    size_t cap = pt_proc_size(&p, 64);
    uint64_t at_tr = (uint64_t)(uintptr_t)TRAMP;
    int len = pt_proc_emit(&p, at_tr, plain, sizeof(plain), m1, 64, &n1);
    ck_assert_int_gt(len, 0);
    p.decoded = d;
    size_t ninsns = 0; /* P's instructions */
    for (uint64_t a = 0; a < run.len; a += out.len, ninsns++)
        ck_assert_int_eq(arch_decode(run.bytes + a, run.len - a, run.addr + a, &out), 0);
    for (int k = 0; k < 2; k++) {
        size_t before = pt_decoded_hits(d);
        ck_assert_uint_eq(pt_proc_size(&p, 64), cap);
        memset(kept, 0, sizeof(kept));
        ck_assert_int_eq(pt_proc_emit(&p, at_tr, kept, sizeof(kept), m2, 64, &n2), len);
        ck_assert_mem_eq(kept, plain, (size_t)len);
        ck_assert_uint_eq(n2, n1);
        ck_assert_mem_eq(m2, m1, n1 * sizeof(m1[0]));
        /* The second time, sizing and emitting each take every instruction of P from
         * what was kept. */
        if (k == 1)
            ck_assert_uint_ge(pt_decoded_hits(d) - before, 2 * ninsns);
    }
    pt_decoded_free(d);
    pt_decoded_free(NULL);
}
END_TEST

/* What cannot run in a copy is refused, not relocated wrong. */
START_TEST(test_reloc_refusals)
{
    uint8_t out[512];
    pt_map_t m[16];
    size_t nm;
    /* call 1f; 1: pop %rax; ret - reads its own return address */
    const uint8_t self[] = { 0xe8, 0, 0, 0, 0, 0x58, 0xc3 };
    pt_run_t r1 = { 0x400000, self, sizeof(self) };
    pt_proc_t p = { &r1, 1, 0x400000, { 0 }, { 0 }, { 0 }, NULL, 0, NULL, 0, NULL, 0, NULL, 0, NULL, 0, NULL };
    ck_assert_int_eq(pt_proc_emit(&p, 0x500000, out, sizeof(out), m, 16, &nm), QP_EUNSUPP);
    /* jmp into the middle of its own instruction */
    const uint8_t mid[] = { 0x48, 0x89, 0xf8, 0xeb, 0xfc, 0xc3 };
    pt_run_t r2 = { 0x400000, mid, sizeof(mid) };
    p.runs = &r2;
    ck_assert_int_eq(pt_proc_emit(&p, 0x500000, out, sizeof(out), m, 16, &nm), QP_EUNSUPP);
    /* an entry outside its code, and no room */
    p.entry = 0x300000;
    ck_assert_int_eq(pt_proc_emit(&p, 0x500000, out, sizeof(out), m, 16, &nm), QP_EINVAL);
    const uint8_t ok[] = { 0x48, 0x89, 0xf8, 0xc3 };
    pt_run_t r3 = { 0x400000, ok, sizeof(ok) };
    p.runs = &r3;
    p.entry = 0x400000;
    ck_assert_int_gt(pt_proc_emit(&p, 0x500000, out, sizeof(out), m, 16, &nm), 0);
    ck_assert_int_lt(pt_proc_emit(&p, 0x500000, out, 3, m, 16, &nm), 0);
    ck_assert_int_eq(pt_proc_emit(&p, 0x500000, out, sizeof(out), m, 1, &nm), QP_ERANGE);
}
END_TEST


/* Go's rule (pt_go.c): main.deref's bytes from tests/inplace/truth.go (Go 1.19). */
START_TEST(test_go_faults_in)
{
    static const uint8_t prologue[] = { 0x49, 0x3b, 0x66, 0x10, 0x76, 0x61 }; /* cmp
                                       * 0x10(%r14),%rsp; jbe */
    static const uint8_t nil[] = { 0x31, 0xc9, 0x48, 0x8b, 0x01 }; /* xor %ecx,%ecx;
                                                                   * mov (%rcx),%rax */
    static const uint8_t epilogue[] = { 0x48, 0x8b, 0x6c, 0x24, 0x08, 0x48, 0x83, 0xc4,
                                        0x10, 0xc3 }; /* mov 0x8(%rsp),%rbp; add; ret */
    const arch_isa_t *x86 = arch_isa_host();
    ck_assert_int_eq(pt_go_faults_in(x86, prologue, sizeof(prologue), 0x483160), 0);
    ck_assert_int_eq(pt_go_faults_in(x86, epilogue, sizeof(epilogue), 0x4831ab), 0);
    ck_assert_int_eq(pt_go_faults_in(x86, nil, sizeof(nil), 0x4831a6), 1);
    ck_assert_int_eq(pt_go_may_fault(x86, nil, sizeof(nil), 0x4831a6), 0); /* the xor */
    ck_assert_int_eq(pt_go_may_fault(x86, nil + 2, 3, 0x4831a8), 1);
    /* An ISA without the test: every instruction may fault. */
    ck_assert_int_eq(pt_go_faults_in(arch_isa_for_machine(ARCH_EM_AARCH64), prologue, 4, 0), 1);
    ck_assert_int_eq(pt_go_faults_in(NULL, prologue, sizeof(prologue), 0), 1);
    ck_assert(strstr(pt_go_fault_why, "Go") != NULL);
}
END_TEST

/* The bytes of a system call looked for in code no CFG reaches: clone3 (435) is
 * `mov $435,%eax; syscall`; a number out of range or too little room is refused. */
START_TEST(test_syscall_pattern)
{
    uint8_t out[16];
    static const uint8_t clone3[] = { 0xb8, 0xb3, 0x01, 0x00, 0x00, 0x0f, 0x05 };
    ck_assert_int_eq(pt_syscall_pattern(435, out, sizeof(out)), 7);
    ck_assert_mem_eq(out, clone3, sizeof(clone3));
    ck_assert_int_eq(pt_syscall_pattern(435, out, 6), QP_EINVAL);
    ck_assert_int_eq(pt_syscall_pattern(-1, out, sizeof(out)), QP_EINVAL);
}
END_TEST

/*****************************************************************************
 * A library's start that points its own PLT at the moved code (pt_got_fix_emit), run
 * here: the "GOT" is two pages of this process, the first read-only as RELRO leaves it
 */

static long next_argc;
static char **next_argv, **next_envp;

/* The start it goes on to: records its arguments. */
static void
next_init(long argc, char **argv, char **envp)
{
    next_argc = argc;
    next_argv = argv;
    next_envp = envp;
}

/* The permissions /proc/self/maps gives the page at P ("r--p", ...), into PERM. */
static void
perms_of(const void *p, char perm[5])
{
    FILE *f = fopen("/proc/self/maps", "r");
    unsigned long lo, hi;
    char line[512], pm[5];
    strcpy(perm, "?");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, pm) == 3 && (uintptr_t)p >= lo
            && (uintptr_t)p < hi)
            strcpy(perm, pm);
    if (f != NULL)
        fclose(f);
}

START_TEST(test_got_fix)
{
    ck_assert_ptr_nonnull(map);
    uint8_t *got = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                        -1, 0);
    ck_assert_ptr_ne(got, MAP_FAILED);
    uint64_t *ro = (uint64_t *)(void *)got, *rw = (uint64_t *)(void *)(got + PAGE);
    ro[1] = 0x1000;  /* the old entry: becomes the new one */
    ro[2] = 0x7777;  /* interposed: left alone */
    rw[3] = 0x3000;  /* outside RELRO's whole pages: written without mprotect */
    ck_assert_int_eq(mprotect(got, PAGE, PROT_READ), 0);
    const arch_got_fix_entry_t e[] = {
        { (uint64_t)(uintptr_t)&rw[3], 0x3000, 0x3300 },
        { (uint64_t)(uintptr_t)&ro[1], 0x1000, 0x1100 },
        { (uint64_t)(uintptr_t)&ro[2], 0x2000, 0x2200 },
    };
    const arch_isa_t *isa = arch_isa_host();
    size_t size = pt_got_fix_size(isa, 3);
    ck_assert_uint_gt(size, 0);
    ck_assert_uint_le(size, PAGE);
    /* At its own address: the bias is 0. RELRO ends inside the second page, whose
     * rest the dynamic linker leaves writable (it protects whole pages only). */
    uint64_t here = (uint64_t)(uintptr_t)TRAMP;
    ck_assert_int_eq(pt_got_fix_emit(isa, here, e, 3, (uint64_t)(uintptr_t)got + 8,
                                     (uint64_t)(uintptr_t)got + PAGE + 64,
                                     (uint64_t)(uintptr_t)next_init, TRAMP, PAGE),
                     (int)size);
    /* The header, then the entries by slot. */
    arch_got_fix_hdr_t h;
    size_t code = size - sizeof(h) - 3 * sizeof(e[0]);
    memcpy(&h, TRAMP + code, sizeof(h));
    ck_assert_uint_eq(h.self, here + code);
    ck_assert_uint_eq(h.count, 3);
    arch_got_fix_entry_t t[3];
    memcpy(t, TRAMP + code + sizeof(h), sizeof(t));
    ck_assert(t[0].slot < t[1].slot && t[1].slot < t[2].slot);
    char *argv[] = { "prog", NULL }, *envp[] = { "A=1", NULL };
    void (*start)(long, char **, char **);
    memcpy(&start, &(void *) { TRAMP }, sizeof(start));
    start(1, argv, envp);
    ck_assert_int_eq(next_argc, 1);
    ck_assert_ptr_eq(next_argv, argv);
    ck_assert_ptr_eq(next_envp, envp);
    ck_assert_uint_eq(ro[1], 0x1100);
    ck_assert_uint_eq(ro[2], 0x7777);
    ck_assert_uint_eq(rw[3], 0x3300);
    char perm[5];
    perms_of(got, perm);
    ck_assert_str_eq(perm, "r--p"); /* read-only again */
    perms_of(got + PAGE, perm);
    ck_assert_str_eq(perm, "rw-p");
    /* mprotect fails (no page there): nothing is written, and it still goes on. */
    ck_assert_int_eq(munmap(got, PAGE), 0);
    rw[3] = 0x3000;
    next_argc = 0;
    ck_assert_int_eq(pt_got_fix_emit(isa, here, e, 1, (uint64_t)(uintptr_t)got,
                                     (uint64_t)(uintptr_t)got + PAGE,
                                     (uint64_t)(uintptr_t)next_init, TRAMP, PAGE),
                     (int)pt_got_fix_size(isa, 1));
    start(2, argv, envp);
    ck_assert_int_eq(next_argc, 2);
    ck_assert_uint_eq(rw[3], 0x3000);
    munmap(got + PAGE, PAGE);
    /* AArch64's: the same header after its code. */
    const arch_isa_t *a64 = arch_isa_for_machine(ARCH_EM_AARCH64);
    size = pt_got_fix_size(a64, 1);
    uint8_t buf[512];
    ck_assert_int_eq(pt_got_fix_emit(a64, 0x10000, e, 1, 0, 0, 0x20000, buf, sizeof(buf)),
                     (int)size);
    code = size - sizeof(h) - sizeof(e[0]);
    memcpy(&h, buf + code, sizeof(h));
    ck_assert_uint_eq(code % 8, 0);
    ck_assert_uint_eq(h.self, 0x10000 + code);
    ck_assert_uint_eq(h.next, 0x20000);
    ck_assert_int_eq(pt_got_fix_emit(a64, 0x10000, e, 1, 0, 0, 0, buf, size - 1), QP_EINVAL);
}
END_TEST

static Suite *
tramp_suite(void)
{
    Suite *s = suite_create("tramp");
    TCase *tc = tcase_create("tramp");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_tramp_kinds);
    tcase_add_test(tc, test_tramp_refusals);
    tcase_add_test(tc, test_tramp_own_shapes);
    tcase_add_test(tc, test_reloc_noret);
    tcase_add_test(tc, test_reloc_table_jump);
    tcase_add_test(tc, test_tramp_padded);
    tcase_add_test(tc, test_flags_rule);
    tcase_add_test(tc, test_reloc_whole);
    tcase_add_test(tc, test_decoded_once);
    tcase_add_test(tc, test_reloc_sites);
    tcase_add_test(tc, test_reloc_refusals);
    tcase_add_test(tc, test_reloc_unknown_jump);
    tcase_add_test(tc, test_syscall_pattern);
    tcase_add_test(tc, test_go_faults_in);
    tcase_add_test(tc, test_got_fix);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(tramp_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
