/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The snippet compiler (see x86_snip.c), expressions: operands, arithmetic,
 * comparisons and branches, calls into the program, thread and key slots, and
 * safe loads.
 */
#include "arch/x86_64/x86_snip_priv.h"

/*****************************************************************************
 * Operands and expressions
 */

enum { OP_REG, OP_TEMP, OP_IMM, OP_MEM };

typedef struct opnd {
    int kind;
    int reg;        /* REG, TEMP */
    int64_t imm;    /* IMM: fits in 32 bits signed; MEM: the address */
} opnd_t;

int
snip_fits32(int64_t v)
{
    return v >= INT32_MIN && v <= INT32_MAX;
}

/* Node I as an operand: in place when it can be (a register of the program, a 32-bit
 * constant, an 8-byte load), else in a temporary. */
static opnd_t
operand(gen_t *g, uint32_t i)
{
    const arch_snip_t *s = &g->nodes[i];
    switch (s->op) {
    case ARCH_SN_CONST:
        if (snip_fits32(s->imm))
            return (opnd_t) { OP_IMM, 0, s->imm };
        break;
    case ARCH_SN_ARG: return (opnd_t) { OP_REG, snip_arg_regs[s->imm], 0 };
    case ARCH_SN_REG: return (opnd_t) { OP_REG, (int)s->imm - 1, 0 };
    case ARCH_SN_RETVAL: return (opnd_t) { OP_REG, RAX, 0 };
    case ARCH_SN_LOAD:
        if (s->size == 8)
            return (opnd_t) { OP_MEM, 0, s->imm };
        break;
    default: break;
    }
    return (opnd_t) { OP_TEMP, snip_eval(g, i), 0 };
}

static void
release(gen_t *g, const opnd_t *o)
{
    if (o->kind == OP_TEMP)
        snip_free_temp(g, o->reg);
}

/* Move operand O into a temporary (itself when it is one). */
static int
to_temp(gen_t *g, const opnd_t *o)
{
    static const uint8_t load[] = { 0x8b };
    if (o->kind == OP_TEMP)
        return o->reg;
    int t = snip_pick_temp(g);
    if (o->kind == OP_REG)
        snip_mov_rr(g, t, o->reg);
    else if (o->kind == OP_IMM)
        snip_mov_ri(g, t, o->imm);
    else
        snip_op_rip(g, 1, load, 1, t, (uint64_t)o->imm, 0);
    return t;
}

/*
 * The ALU operation EXT (0 add, 1 or, 4 and, 5 sub, 6 xor, 7 cmp) on the 64-bit register
 * DST (or, for cmp only, memory) and operand SRC.
 */
static void
alu(gen_t *g, int ext, const opnd_t *dst, const opnd_t *src)
{
    /* op r64, r/m64: 03 add, 0b or, 23 and, 2b sub, 33 xor, 3b cmp */
    const uint8_t rm_form = (uint8_t)(0x03 | (ext << 3));
    if (dst->kind == OP_MEM) { /* cmp only: cmp m64, imm32 / cmp m64, r64 */
        if (src->kind == OP_IMM) {
            static const uint8_t opc[] = { 0x81 };
            snip_op_rip(g, 1, opc, 1, ext, (uint64_t)dst->imm, 4);
            snip_put32(g, (uint32_t)src->imm);
        } else {
            const uint8_t opc = (uint8_t)(0x01 | (ext << 3)); /* op r/m64, r64 */
            snip_op_rip(g, 1, &opc, 1, src->reg, (uint64_t)dst->imm, 0);
        }
        return;
    }
    if (src->kind == OP_IMM) {
        snip_rex(g, 1, 0, dst->reg);
        snip_put8(g, 0x81);
        snip_put8(g, (uint8_t)(0xc0 | (ext << 3) | (dst->reg & 7)));
        snip_put32(g, (uint32_t)src->imm);
    } else if (src->kind == OP_MEM)
        snip_op_rip(g, 1, &rm_form, 1, dst->reg, (uint64_t)src->imm, 0);
    else
        snip_op_rr(g, &rm_form, 1, dst->reg, src->reg);
}

/* The condition code of comparison node S, true when the comparison holds. */
static int
cond_of(const arch_snip_t *s)
{
    int u = (s->flags & ARCH_SNF_UNSIGNED) != 0;
    switch (s->op) {
    case ARCH_SN_EQ: return CC_E;
    case ARCH_SN_NE: return CC_NE;
    case ARCH_SN_LT: return u ? CC_B : CC_L;
    case ARCH_SN_LE: return u ? CC_BE : CC_LE;
    case ARCH_SN_GT: return u ? CC_A : CC_G;
    default: return u ? CC_AE : CC_GE;
    }
}

static int
is_compare(const arch_snip_t *s)
{
    return s->op >= ARCH_SN_EQ && s->op <= ARCH_SN_GE;
}

/* Compare the operands of comparison node I (cmp a, b); returns its condition code. */
static int
compare(gen_t *g, uint32_t i)
{
    const arch_snip_t *s = &g->nodes[i];
    opnd_t l = operand(g, s->a);
    opnd_t r = operand(g, s->b);
    if (l.kind == OP_IMM || (l.kind == OP_MEM && r.kind == OP_MEM)) {
        int t = to_temp(g, &l);
        l = (opnd_t) { OP_TEMP, t, 0 };
    }
    alu(g, 7, &l, &r);
    release(g, &l);
    release(g, &r);
    return cond_of(s);
}

/* Jump to LABEL when the value of node I is true (SENSE 1) or false (SENSE 0). */
void
snip_branch(gen_t *g, uint32_t i, int sense, int label)
{
    const arch_snip_t *s = &g->nodes[i];
    if (is_compare(s)) {
        int cc = compare(g, i);
        snip_jump_to(g, sense ? cc : cc ^ 1, label);
    } else if (s->op == ARCH_SN_NOT)
        snip_branch(g, s->a, !sense, label);
    else if (s->op == ARCH_SN_LAND || s->op == ARCH_SN_LOR) {
        int both = s->op == ARCH_SN_LAND; /* AND needs both true, OR both false */
        if (sense != both) {              /* either operand alone decides */
            snip_branch(g, s->a, sense, label);
            snip_branch(g, s->b, sense, label);
        } else {
            int skip = snip_new_label(g);
            snip_branch(g, s->a, !sense, skip);
            snip_branch(g, s->b, sense, label);
            snip_bind(g, skip);
        }
    } else if (s->op == ARCH_SN_CONST) {
        if ((s->imm != 0) == sense)
            snip_jump_to(g, -1, label);
    } else {
        int t = snip_eval(g, i);
        static const uint8_t test[] = { 0x85 };
        snip_op_rr(g, test, 1, t, t);
        snip_free_temp(g, t);
        snip_jump_to(g, sense ? CC_NE : CC_E, label);
    }
}

/* A shift of temporary T by the value of node B. */
static void
shift(gen_t *g, const arch_snip_t *s, int t)
{
    int ext = s->op == ARCH_SN_SHL ? 4 : (s->flags & ARCH_SNF_SIGNED) ? 7 : 5;
    const arch_snip_t *b = &g->nodes[s->b];
    if (b->op == ARCH_SN_CONST) {
        snip_rex(g, 1, 0, t);
        snip_put8(g, 0xc1);
        snip_put8(g, (uint8_t)(0xc0 | (ext << 3) | (t & 7)));
        snip_put8(g, (uint8_t)(b->imm & 63));
        return;
    }
    /* The count goes in %cl: rcx is never a temporary in such a snippet. */
    int c = snip_eval(g, s->b);
    snip_push_reg(g, RCX);
    snip_mov_rr(g, RCX, c);
    snip_rex(g, 1, 0, t);
    snip_put8(g, 0xd3);
    snip_put8(g, (uint8_t)(0xc0 | (ext << 3) | (t & 7)));
    snip_pop_reg(g, RCX);
    snip_free_temp(g, c);
}

/* T = T / value of node B (or %, MOD): through rax and rdx, never temporaries here. */
static void
divide(gen_t *g, const arch_snip_t *s, int t)
{
    static const uint8_t test[] = { 0x85 }, cmp_m1[] = { 0x83 }, cqo[] = { 0x48, 0x99 };
    int d = snip_eval(g, s->b);
    int zero = snip_new_label(g), minus1 = snip_new_label(g), done = snip_new_label(g);
    snip_op_rr(g, test, 1, d, d);
    snip_jump_to(g, CC_E, zero);
    snip_rex(g, 1, 0, d); /* cmp d, -1: INT64_MIN / -1 would trap */
    snip_put(g, cmp_m1, 1);
    snip_put8(g, (uint8_t)(0xf8 | (d & 7)));
    snip_put8(g, 0xff);
    snip_jump_to(g, CC_E, minus1);
    snip_push_reg(g, RAX);
    snip_push_reg(g, RDX);
    snip_mov_rr(g, RAX, t);
    snip_put(g, cqo, 2);
    snip_rex(g, 1, 0, d); /* idiv d */
    snip_put8(g, 0xf7);
    snip_put8(g, (uint8_t)(0xf8 | (d & 7)));
    snip_mov_rr(g, t, s->op == ARCH_SN_DIV ? RAX : RDX);
    snip_pop_reg(g, RDX);
    snip_pop_reg(g, RAX);
    snip_jump_to(g, -1, done);
    snip_bind(g, minus1);
    if (s->op == ARCH_SN_DIV) { /* neg t */
        snip_rex(g, 1, 0, t);
        snip_put8(g, 0xf7);
        snip_put8(g, (uint8_t)(0xd8 | (t & 7)));
        snip_jump_to(g, -1, done);
    }
    snip_bind(g, zero);
    snip_mov_ri(g, t, 0);
    snip_bind(g, done);
    snip_free_temp(g, d);
}

/*
 * A call of the program's procedure at S->imm: the caller-saved registers and the
 * vector state are kept, the stack is aligned to 16; the return value goes to temporary
 * T (when T >= 0).
 */
void
snip_call(gen_t *g, const arch_snip_t *s, int t)
{
    static const uint8_t load[] = { 0x8b }, store[] = { 0x89 };
    int n = s->nargs;
    snip_adjust_rsp(g, -8); /* the slot for the return value */
    for (int r = 0; r < 16; r++)
        if (CALLER_SAVED & (1u << r))
            snip_push_reg(g, r);
    for (int k = 0; k < n; k++) { /* argument values, pushed in order */
        int v = snip_eval(g, s->args[k]);
        snip_push_reg(g, v);
        snip_free_temp(g, v);
    }
    snip_push_reg(g, RBX); /* rbx remembers where the stack was */
    int32_t sp_off = g->sp_off;
    snip_mov_rr(g, RBX, RSP);
    snip_rex(g, 1, 0, RSP); /* and rsp, -64 */
    snip_put8(g, 0x83);
    snip_put8(g, 0xe4);
    snip_put8(g, 0xc0);
    snip_adjust_rsp(g, -XSAVE_AREA);
    for (int k = 0; k < 8; k++) { /* XRSTOR wants a clean XSAVE header (bytes 512-575) */
        static const uint8_t movq_imm[] = { 0xc7 };
        snip_op_rsp(g, movq_imm, 1, 0, 512 + 8 * k);
        snip_put32(g, 0);
    }
    snip_mov_ri(g, RAX, XSAVE_MASK);
    snip_mov_ri(g, RDX, 0);
    snip_put(g, "\x48\x0f\xae\x24\x24", 5); /* xsave64 (%rsp) */
    for (int k = 0; k < n; k++) /* argument k is at rbx + 8 + 8 * (n - 1 - k) */
        snip_op_base(g, load, 1, snip_arg_regs[k], RBX, 8 + 8 * (n - 1 - k));
    /* The callee from the code's own address when it is in reach (right in a PIE whose
     * addresses are link-time ones), else absolute: 10 bytes either way. */
    int64_t d = (int64_t)((uint64_t)s->imm - (g->addr + g->len + 7));
    if (snip_fits32(d)) {
        snip_put(g, "\x4c\x8d\x1d", 3); /* lea disp32(%rip), %r11 */
        snip_put32(g, (uint32_t)d);
        snip_put(g, "\x0f\x1f\x00", 3); /* nopl (%rax) */
    } else {
        snip_put(g, "\x49\xbb", 2); /* movabs $imm, %r11 */
        snip_put32(g, (uint32_t)s->imm);
        snip_put32(g, (uint32_t)((uint64_t)s->imm >> 32));
    }
    snip_put(g, "\x41\xff\xd3", 3); /* call *%r11 */
    snip_op_base(g, store, 1, RAX, RBX, 8 + 8 * n + 8 * 9); /* the return value slot */
    snip_mov_ri(g, RAX, XSAVE_MASK);
    snip_mov_ri(g, RDX, 0);
    snip_put(g, "\x48\x0f\xae\x2c\x24", 5); /* xrstor64 (%rsp) */
    snip_mov_rr(g, RSP, RBX);
    g->sp_off = sp_off;
    snip_pop_reg(g, RBX);
    snip_adjust_rsp(g, 8 * n);
    for (int r = 15; r >= 0; r--)
        if (CALLER_SAVED & (1u << r))
            snip_pop_reg(g, r);
    if (t >= 0)
        snip_pop_reg(g, t);
    else
        snip_adjust_rsp(g, 8);
}

/* The 64-bit ALU operation EXT (0 add, 4 and, 6 xor) of register R with IMM32. */
static void
alu_ri(gen_t *g, int ext, int r, int32_t imm)
{
    snip_rex(g, 1, 0, r);
    snip_put8(g, 0x81);
    snip_put8(g, (uint8_t)(0xc0 | (ext << 3) | (r & 7)));
    snip_put32(g, (uint32_t)imm);
}

/* shr R, N */
static void
shr_ri(gen_t *g, int r, int n)
{
    snip_rex(g, 1, 0, r);
    snip_put8(g, 0xc1);
    snip_put8(g, (uint8_t)(0xe8 | (r & 7)));
    snip_put8(g, (uint8_t)n);
}

/*
 * The index of KEY (a temporary, freed; never 0) in the key table at TABLE, its hash
 * in T (a temporary): linear probing from T; a free key (0) is taken with lock cmpxchg
 * (rax holds the expected 0: it is reserved, and kept here). ARCH_SNIP_THREADS when the
 * table is full. Returns T.
 */
static int
probe_slot(gen_t *g, int64_t table, int key, int t)
{
    static const uint8_t cmp_rm[] = { 0x3b }, cmp0[] = { 0x83 }, cmpxchg[] = { 0x0f, 0xb1 },
                         lea[] = { 0x8d };
    int tab = snip_pick_temp(g), left = snip_pick_temp(g);
    int loop = snip_new_label(g), next = snip_new_label(g), found = snip_new_label(g);
    alu_ri(g, 4, t, ARCH_SNIP_THREADS - 1);
    snip_op_rip(g, 1, lea, 1, tab, (uint64_t)table, 0);
    snip_mov_ri(g, left, ARCH_SNIP_THREADS);
    snip_bind(g, loop);
    snip_op_ind(g, 1, cmp_rm, 1, key, tab, t); /* cmp key, [tab + t*8] */
    snip_jump_to(g, CC_E, found);
    snip_op_ind(g, 1, cmp0, 1, 7, tab, t); /* cmpq $0, [tab + t*8] */
    snip_put8(g, 0);
    snip_jump_to(g, CC_NE, next);
    snip_op_rr(g, (const uint8_t[]) { 0x31 }, 1, RAX, RAX);
    snip_put8(g, 0xf0);
    snip_op_ind(g, 1, cmpxchg, 2, key, tab, t); /* lock cmpxchg [tab + t*8], key */
    snip_jump_to(g, CC_E, found);
    snip_jump_to(g, -1, loop); /* taken meanwhile: look at it again */
    snip_bind(g, next);
    snip_rex(g, 1, 0, t); /* inc t */
    snip_put8(g, 0xff);
    snip_put8(g, (uint8_t)(0xc0 | (t & 7)));
    alu_ri(g, 4, t, ARCH_SNIP_THREADS - 1);
    snip_rex(g, 1, 0, left); /* dec left */
    snip_put8(g, 0xff);
    snip_put8(g, (uint8_t)(0xc8 | (left & 7)));
    snip_jump_to(g, CC_NE, loop);
    snip_mov_ri(g, t, ARCH_SNIP_THREADS); /* full */
    snip_bind(g, found);
    snip_free_temp(g, key);
    snip_free_temp(g, tab);
    snip_free_temp(g, left);
    return t;
}

/* T = (T * imm32) ^ (that >> 16): a hash's mixing step. */
static void
mix(gen_t *g, int t, int spare)
{
    static const uint8_t imul[] = { 0x69 }, xor_rr[] = { 0x31 };
    snip_rex(g, 1, t, t);
    snip_put(g, imul, 1);
    snip_put8(g, (uint8_t)(0xc0 | ((t & 7) << 3) | (t & 7)));
    snip_put32(g, 0x045d9f3bu);
    snip_mov_rr(g, spare, t);
    shr_ri(g, spare, 16);
    snip_op_rr(g, xor_rr, 1, spare, t);
}

/*
 * The calling thread's index in the key table at S->imm (see ARCH_SN_THREAD_SLOT): the
 * thread pointer hashed (its page number), then probe_slot.
 */
int
snip_thread_slot(gen_t *g, const arch_snip_t *s)
{
    int t = snip_pick_temp(g), key = snip_pick_temp(g), spare = snip_pick_temp(g);
    snip_push_reg(g, RAX);
    /* key = %fs:0 */
    snip_put8(g, 0x64);
    snip_rex(g, 1, key, 0);
    snip_put8(g, 0x8b);
    snip_put8(g, (uint8_t)(0x04 | ((key & 7) << 3)));
    snip_put8(g, 0x25);
    snip_put32(g, 0);
    snip_mov_rr(g, t, key);
    shr_ri(g, t, 12);
    mix(g, t, spare);
    snip_free_temp(g, spare);
    probe_slot(g, s->imm, key, t);
    snip_pop_reg(g, RAX);
    return t;
}

/*
 * The index of the value of S->a in the key table at S->imm (ARCH_SN_KEY_SLOT): kept
 * as value ^ ARCH_SNIP_KEY_XOR (0 marks a free key, so the value equal to that constant
 * goes to the overflow index, ARCH_SNIP_THREADS), hashed over all its bits.
 */
static int
key_slot(gen_t *g, const arch_snip_t *s)
{
    static const uint8_t xor_rr[] = { 0x31 }, test_rr[] = { 0x85 };
    int key = snip_eval(g, s->a), t = snip_pick_temp(g), spare = snip_pick_temp(g);
    int full = snip_new_label(g), done = snip_new_label(g);
    snip_push_reg(g, RAX);
    snip_mov_ri(g, spare, (int64_t)ARCH_SNIP_KEY_XOR);
    snip_op_rr(g, xor_rr, 1, spare, key);
    snip_op_rr(g, test_rr, 1, key, key);
    snip_jump_to(g, CC_E, full);
    snip_mov_rr(g, t, key); /* t = mix(key ^ key >> 29) */
    snip_mov_rr(g, spare, key);
    shr_ri(g, spare, 29);
    snip_op_rr(g, xor_rr, 1, spare, t);
    mix(g, t, spare);
    snip_free_temp(g, spare);
    probe_slot(g, s->imm, key, t);
    snip_jump_to(g, -1, done);
    snip_bind(g, full); /* (the temporaries are free here as on the other path) */
    snip_mov_ri(g, t, ARCH_SNIP_THREADS);
    snip_bind(g, done);
    snip_pop_reg(g, RAX);
    return t;
}

/*
 * The calling thread's CPU time in ns: clock_gettime(CLOCK_THREAD_CPUTIME_ID) into 16
 * bytes of stack. rax, rcx, r11, rdi and rsi (which the system call takes or changes)
 * are reserved and kept.
 */
static int
thread_cpu(gen_t *g)
{
    static const uint8_t load[] = { 0x8b }, add[] = { 0x03 }, imul[] = { 0x69 };
    static const int kept[] = { RAX, RCX, R11, RDI, RSI };
    int t = snip_pick_temp(g);
    for (int k = 0; k < 5; k++)
        snip_push_reg(g, kept[k]);
    snip_adjust_rsp(g, -16);
    snip_mov_ri(g, RAX, 228); /* SYS_clock_gettime */
    snip_mov_ri(g, RDI, 3);   /* CLOCK_THREAD_CPUTIME_ID */
    snip_mov_rr(g, RSI, RSP);
    snip_put8(g, 0x0f);
    snip_put8(g, 0x05);
    snip_op_rsp(g, load, 1, t, 0); /* t = tv_sec * 1e9 + tv_nsec */
    snip_rex(g, 1, t, t);
    snip_put(g, imul, 1);
    snip_put8(g, (uint8_t)(0xc0 | ((t & 7) << 3) | (t & 7)));
    snip_put32(g, 1000000000u);
    snip_op_rsp(g, add, 1, t, 8);
    snip_adjust_rsp(g, 16);
    for (int k = 4; k >= 0; k--)
        snip_pop_reg(g, kept[k]);
    return t;
}

/*
 * The calling thread's kernel id: gettid. rax, rcx and r11 (which the system call takes
 * or changes) are reserved and kept.
 */
static int
thread_id(gen_t *g)
{
    static const int kept[] = { RAX, RCX, R11 };
    int t = snip_pick_temp(g);
    for (int k = 0; k < 3; k++)
        snip_push_reg(g, kept[k]);
    snip_mov_ri(g, RAX, 186); /* SYS_gettid */
    snip_put8(g, 0x0f);
    snip_put8(g, 0x05);
    snip_mov_rr(g, t, RAX);
    for (int k = 2; k >= 0; k--)
        snip_pop_reg(g, kept[k]);
    return t;
}

/*
 * ARCH_SN_LOAD_SAFE: the kernel reads the SIZE bytes at the address for us, into a zeroed
 * word on the stack, with process_vm_readv(getpid(), {word, SIZE}, 1, {addr, SIZE}, 1, 0):
 * an address it cannot read gives -EFAULT (or a short read), never a signal; the word is
 * then 0. Every register a system call takes or changes is pushed around the calls and
 * the value is loaded after they are popped, so nothing is reserved.
 * Stack (48 bytes under the pushes): [0] the word, [8] local iovec, [24] remote iovec.
 */
static int
load_safe(gen_t *g, const arch_snip_t *s)
{
    static const uint8_t store[] = { 0x89 }, load[] = { 0x8b }, lea[] = { 0x8d },
                         cmp_rr[] = { 0x39 };
    static const int kept[] = { RAX, RCX, RDX, RSI, RDI, R8, R9, R10, R11 };
    enum { NKEPT = sizeof(kept) / sizeof(kept[0]), PUSHED = 8 * NKEPT };
    int a = snip_eval(g, s->a);
    snip_adjust_rsp(g, -48);
    snip_op_rsp(g, store, 1, a, 24); /* remote.iov_base = a */
    snip_free_temp(g, a);
    for (int k = 0; k < NKEPT; k++)
        snip_push_reg(g, kept[k]);
    snip_mov_ri(g, RAX, 0);
    snip_op_rsp(g, store, 1, RAX, PUSHED + 0);       /* word = 0 */
    snip_mov_ri(g, RAX, s->size);
    snip_op_rsp(g, store, 1, RAX, PUSHED + 16);      /* local.iov_len */
    snip_op_rsp(g, store, 1, RAX, PUSHED + 32);      /* remote.iov_len */
    snip_op_rsp(g, lea, 1, RAX, PUSHED + 0);
    snip_op_rsp(g, store, 1, RAX, PUSHED + 8);       /* local.iov_base = &word */
    snip_mov_ri(g, RAX, 39);                         /* SYS_getpid */
    snip_put8(g, 0x0f);
    snip_put8(g, 0x05);
    snip_mov_rr(g, RDI, RAX);
    snip_op_rsp(g, lea, 1, RSI, PUSHED + 8);         /* local iovec */
    snip_mov_ri(g, RDX, 1);
    snip_op_rsp(g, lea, 1, R10, PUSHED + 24);        /* remote iovec */
    snip_mov_ri(g, R8, 1);
    snip_mov_ri(g, R9, 0);
    snip_mov_ri(g, RAX, 310);                        /* SYS_process_vm_readv */
    snip_put8(g, 0x0f);
    snip_put8(g, 0x05);
    /* A short read or an error: the word is 0. */
    int done = snip_new_label(g);
    snip_mov_ri(g, RCX, s->size);
    snip_op_rr(g, cmp_rr, 1, RCX, RAX);
    snip_jump_to(g, CC_E, done);
    snip_mov_ri(g, RAX, 0);
    snip_op_rsp(g, store, 1, RAX, PUSHED + 0);
    snip_bind(g, done);
    for (int k = NKEPT - 1; k >= 0; k--)
        snip_pop_reg(g, kept[k]);
    int t = snip_pick_temp(g);
    snip_op_rsp(g, load, 1, t, 0);
    snip_adjust_rsp(g, 48);
    return t;
}

/* The value of node I in a new temporary. */
int
snip_eval(gen_t *g, uint32_t i)
{
    static const uint8_t imul[] = { 0x0f, 0xaf };
    const arch_snip_t *s = &g->nodes[i];
    switch (s->op) {
    case ARCH_SN_CONST: {
        int t = snip_pick_temp(g);
        snip_mov_ri(g, t, s->imm);
        return t;
    }
    case ARCH_SN_ARG:
    case ARCH_SN_RETVAL:
    case ARCH_SN_REG: {
        int t = snip_pick_temp(g);
        snip_mov_rr(g, t, s->op == ARCH_SN_ARG ? snip_arg_regs[s->imm]
                   : s->op == ARCH_SN_REG ? (int)s->imm - 1 : RAX);
        return t;
    }
    case ARCH_SN_LOAD: {
        int t = snip_pick_temp(g);
        static const uint8_t l8[] = { 0x8b }, l4[] = { 0x8b }, l2[] = { 0x0f, 0xb7 },
                             l1[] = { 0x0f, 0xb6 };
        if (s->size == 8)
            snip_op_rip(g, 1, l8, 1, t, (uint64_t)s->imm, 0);
        else if (s->size == 4)
            snip_op_rip(g, 0, l4, 1, t, (uint64_t)s->imm, 0);
        else
            snip_op_rip(g, 1, s->size == 2 ? l2 : l1, 2, t, (uint64_t)s->imm, 0);
        return t;
    }
    case ARCH_SN_ADD:
    case ARCH_SN_SUB:
    case ARCH_SN_AND:
    case ARCH_SN_OR:
    case ARCH_SN_XOR: {
        static const int ext[] = { [ARCH_SN_ADD] = 0, [ARCH_SN_SUB] = 5, [ARCH_SN_AND] = 4,
                                   [ARCH_SN_OR] = 1, [ARCH_SN_XOR] = 6 };
        opnd_t l = operand(g, s->a);
        int t = to_temp(g, &l);
        opnd_t d = { OP_TEMP, t, 0 }, r = operand(g, s->b);
        alu(g, ext[s->op], &d, &r);
        release(g, &r);
        return t;
    }
    case ARCH_SN_MUL: {
        opnd_t l = operand(g, s->a);
        int t = to_temp(g, &l);
        opnd_t r = operand(g, s->b);
        if (r.kind == OP_IMM) {
            snip_rex(g, 1, t, t);
            snip_put8(g, 0x69);
            snip_put8(g, (uint8_t)(0xc0 | ((t & 7) << 3) | (t & 7)));
            snip_put32(g, (uint32_t)r.imm);
        } else if (r.kind == OP_MEM)
            snip_op_rip(g, 1, imul, 2, t, (uint64_t)r.imm, 0);
        else
            snip_op_rr(g, imul, 2, t, r.reg);
        release(g, &r);
        return t;
    }
    case ARCH_SN_DIV:
    case ARCH_SN_MOD:
    case ARCH_SN_SHL:
    case ARCH_SN_SHR: {
        opnd_t l = operand(g, s->a);
        int t = to_temp(g, &l);
        if (s->op == ARCH_SN_DIV || s->op == ARCH_SN_MOD)
            divide(g, s, t);
        else
            shift(g, s, t);
        return t;
    }
    case ARCH_SN_CALL: {
        int t = snip_pick_temp(g);
        snip_call(g, s, t);
        return t;
    }
    case ARCH_SN_LOAD_AT: {
        int t = snip_eval(g, s->a);
        static const uint8_t l8[] = { 0x8b }, l2[] = { 0x0f, 0xb7 }, l1[] = { 0x0f, 0xb6 };
        if (s->size == 8 || s->size == 4)
            snip_op_ind(g, s->size == 8, l8, 1, t, t, -1);
        else
            snip_op_ind(g, 1, s->size == 2 ? l2 : l1, 2, t, t, -1);
        return t;
    }
    case ARCH_SN_KEY_SLOT: return key_slot(g, s);
    case ARCH_SN_THREAD_SLOT:
        for (int k = 0; k < g->nslot; k++)
            if (g->slot_tab[k] == s->imm) {
                int t = snip_pick_temp(g);
                snip_mov_rr(g, t, g->slot_reg[k]);
                return t;
            }
        return snip_thread_slot(g, s);
    case ARCH_SN_SP: {
        static const uint8_t lea[] = { 0x8d };
        int t = snip_pick_temp(g);
        snip_op_rsp(g, lea, 1, t, g->sp_off);
        return t;
    }
    case ARCH_SN_CYCLES: {
        /* rdtsc writes edx:eax: both kept around it (reserved when the snippet has one) */
        static const uint8_t shl32[] = { 0xc1 }, or_rr[] = { 0x09 };
        int t = snip_pick_temp(g);
        snip_push_reg(g, RAX);
        snip_push_reg(g, RDX);
        snip_put8(g, 0x0f);
        snip_put8(g, 0x31);
        snip_rex(g, 1, 0, RDX); /* shl $32, %rdx */
        snip_put(g, shl32, 1);
        snip_put8(g, (uint8_t)(0xe0 | (RDX & 7)));
        snip_put8(g, 32);
        snip_op_rr(g, or_rr, 1, RDX, RAX); /* or %rdx, %rax */
        snip_mov_rr(g, t, RAX);
        snip_pop_reg(g, RDX);
        snip_pop_reg(g, RAX);
        return t;
    }
    case ARCH_SN_THREAD_PTR: {
        int t = snip_pick_temp(g);
        snip_put8(g, 0x64); /* mov %fs:0, t */
        snip_rex(g, 1, t, 0);
        snip_put8(g, 0x8b);
        snip_put8(g, (uint8_t)(0x04 | ((t & 7) << 3)));
        snip_put8(g, 0x25);
        snip_put32(g, 0);
        return t;
    }
    case ARCH_SN_ADDR: {
        static const uint8_t lea[] = { 0x8d };
        int t = snip_pick_temp(g);
        snip_op_rip(g, 1, lea, 1, t, (uint64_t)s->imm, 0);
        return t;
    }
    case ARCH_SN_THREAD_CPU: return thread_cpu(g);
    case ARCH_SN_THREAD_ID: return thread_id(g);
    case ARCH_SN_LOAD_SAFE: return load_safe(g, s);
    default: break;
    }
    /* Truth values (comparisons, !, &&, ||) and statements. */
    int t = snip_pick_temp(g);
    if (is_compare(s) || s->op == ARCH_SN_NOT || s->op == ARCH_SN_LAND
        || s->op == ARCH_SN_LOR) {
        int no = snip_new_label(g), done = snip_new_label(g);
        snip_branch(g, i, 0, no);
        snip_mov_ri(g, t, 1);
        snip_jump_to(g, -1, done);
        snip_bind(g, no);
        snip_mov_ri(g, t, 0);
        snip_bind(g, done);
    } else {
        snip_stmt(g, i);
        snip_mov_ri(g, t, 0);
    }
    return t;
}
