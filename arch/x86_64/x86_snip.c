/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * arch/arch.h's snippet compiler for x86-64: a snippet tree becomes code that keeps the
 * program's state. Every value lives in a scratch register taken from a pool (the
 * registers the point says are dead first); the registers the code uses are saved and
 * restored around it, the flags too when they are live there, after stepping over the
 * red zone. Comparisons feeding a branch compile to cmp + jcc, with arguments, return
 * values, 8-byte loads and 32-bit constants used in place, so `if (arg1 > 10)
 * counter++` at an entry is three instructions. Everything is rel32 or absolute, so the
 * length does not depend on the address: the editor sizes a snippet once and places it.
 * The code is generated twice: the first pass finds the registers to save.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "arch/arch.h"

/* Hardware register numbers (ARCH_REG_* is one more). */
enum { RAX, RCX, RDX, RBX, RSP, RBP, RSI, RDI, R8, R9, R10, R11, R12, R13, R14, R15 };

/* The argument registers of the SysV ABI, in order. */
static const uint8_t arg_regs[ARCH_SNIP_MAXARGS] = { RDI, RSI, RDX, RCX, R8, R9 };

/* Caller-saved registers: a call of the program's code may change them. */
#define CALLER_SAVED                                                                     \
    ((1u << RAX) | (1u << RCX) | (1u << RDX) | (1u << RSI) | (1u << RDI) | (1u << R8)     \
        | (1u << R9) | (1u << R10) | (1u << R11))

/* Temporaries, in the order they are taken (dead ones first, see pick_temp). */
static const uint8_t temp_order[]
    = { R11, R10, R9, R8, RAX, RCX, RDX, RSI, RDI, RBX, R12, R13, R14, R15, RBP };

/* Bytes reserved for the vector state around a call (XSAVE of x87, SSE, AVX, AVX-512:
 * at most 2,696 bytes), 64-byte aligned. */
#define XSAVE_AREA 3072
#define XSAVE_MASK 0xffu

/* Condition codes (the low nibble of jcc and setcc). */
enum { CC_B = 2, CC_AE = 3, CC_E = 4, CC_NE = 5, CC_BE = 6, CC_A = 7, CC_L = 12, CC_GE = 13,
       CC_LE = 14, CC_G = 15 };

#define MAX_LABELS 128
#define MAX_FIXUPS 256

typedef struct gen {
    uint8_t *out;              /* NULL: only count */
    size_t cap, len;           /* the buffer, and bytes emitted */
    uint64_t addr;             /* where the code runs */
    int err;                   /* the first error (QP_*) */
    const arch_snip_t *nodes;  /* the snippet */
    size_t n;
    const arch_snip_ctx_t *ctx;
    uint32_t reserved;         /* hardware registers never taken as temporaries */
    uint32_t busy;             /* temporaries holding a value now */
    uint32_t used;             /* temporaries used at all */
    int64_t label[MAX_LABELS]; /* bound positions, -1 while unbound */
    int nlabels;
    int32_t sp_off;            /* bytes the snippet has pushed below the program's %rsp */
    int nslot;                 /* thread slots looked up once, at the start (hoisted) */
    int64_t slot_tab[4];       /* ... of these tables */
    int slot_reg[4];           /* ... kept in these temporaries throughout */
    struct {
        size_t at;             /* where the rel32 field is */
        int label;
    } fix[MAX_FIXUPS];
    int nfix;
} gen_t;

/*****************************************************************************
 * Emitting bytes
 */

static void
put(gen_t *g, const void *b, size_t n)
{
    if (g->out != NULL) {
        if (g->len + n > g->cap) {
            if (g->err == 0)
                g->err = QP_ENOMEM;
        } else
            memcpy(g->out + g->len, b, n);
    }
    g->len += n;
}

static void
put8(gen_t *g, uint8_t b)
{
    put(g, &b, 1);
}

static void
put16(gen_t *g, uint16_t v)
{
    uint8_t b[2] = { (uint8_t)v, (uint8_t)(v >> 8) };
    put(g, b, 2);
}

static void
put32(gen_t *g, uint32_t v)
{
    uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
    put(g, b, 4);
}

static void
fail(gen_t *g, int rc)
{
    if (g->err == 0)
        g->err = rc;
}

/* REX with W, and R/X/B from the high bits of REG and RM. */
static void
rex(gen_t *g, int w, int reg, int rm)
{
    put8(g, (uint8_t)(0x40 | (w ? 8 : 0) | ((reg & 8) ? 4 : 0) | ((rm & 8) ? 1 : 0)));
}

/* OPC (1 or 2 bytes) with a register-register ModRM: REG, RM. 64-bit. */
static void
op_rr(gen_t *g, const uint8_t *opc, size_t nopc, int reg, int rm)
{
    rex(g, 1, reg, rm);
    put(g, opc, nopc);
    put8(g, (uint8_t)(0xc0 | ((reg & 7) << 3) | (rm & 7)));
}

/*
 * OPC with a rip-relative operand at ADDR (REG: the ModRM reg field); TAIL more bytes
 * (an immediate) follow the displacement, which counts from their end. W: REX.W.
 */
static void
op_rip(gen_t *g, int w, const uint8_t *opc, size_t nopc, int reg, uint64_t addr, size_t tail)
{
    if (w || (reg & 8))
        rex(g, w, reg, 0);
    put(g, opc, nopc);
    put8(g, (uint8_t)(0x05 | ((reg & 7) << 3)));
    int64_t d = (int64_t)(addr - (g->addr + g->len + 4 + tail));
    if (d < INT32_MIN || d > INT32_MAX)
        fail(g, QP_ERANGE);
    put32(g, (uint32_t)d);
}

/* OPC with [rsp + DISP32] (REG: the ModRM reg field). 64-bit. */
static void
op_rsp(gen_t *g, const uint8_t *opc, size_t nopc, int reg, int32_t disp)
{
    rex(g, 1, reg, RSP);
    put(g, opc, nopc);
    put8(g, (uint8_t)(0x84 | ((reg & 7) << 3)));
    put8(g, 0x24);
    put32(g, (uint32_t)disp);
}

/* [REG2 + DISP32] with REG (ModRM reg field), 64-bit; REG2 is not rsp or r12. */
static void
op_base(gen_t *g, const uint8_t *opc, size_t nopc, int reg, int base, int32_t disp)
{
    rex(g, 1, reg, base);
    put(g, opc, nopc);
    put8(g, (uint8_t)(0x80 | ((reg & 7) << 3) | (base & 7)));
    put32(g, (uint32_t)disp);
}

/*
 * OPC with the operand [BASE + INDEX * 8] ([BASE] when INDEX < 0), REG in the ModRM reg
 * field; a REX prefix always (W: REX.W), so byte registers are sil/dil/r8b....
 */
static void
op_ind(gen_t *g, int w, const uint8_t *opc, size_t nopc, int reg, int base, int index)
{
    int x = index >= 0 ? index : RSP; /* SIB index 100: none */
    put8(g, (uint8_t)(0x40 | (w ? 8 : 0) | ((reg & 8) ? 4 : 0) | ((x & 8) ? 2 : 0)
                      | ((base & 8) ? 1 : 0)));
    put(g, opc, nopc);
    put8(g, (uint8_t)(0x44 | ((reg & 7) << 3))); /* mod 01 (disp8), SIB */
    put8(g, (uint8_t)((index >= 0 ? 0xc0 : 0) | ((x & 7) << 3) | (base & 7)));
    put8(g, 0);
}

static void
push_reg(gen_t *g, int r)
{
    g->sp_off += 8;
    if (r & 8)
        put8(g, 0x41);
    put8(g, (uint8_t)(0x50 | (r & 7)));
}

static void
pop_reg(gen_t *g, int r)
{
    g->sp_off -= 8;
    if (r & 8)
        put8(g, 0x41);
    put8(g, (uint8_t)(0x58 | (r & 7)));
}

/* mov DST, SRC */
static void
mov_rr(gen_t *g, int dst, int src)
{
    static const uint8_t opc[] = { 0x89 };
    if (dst != src)
        op_rr(g, opc, 1, src, dst);
}

/* mov R, IMM: 32-bit (zero-extended) when it fits unsigned, sign-extended imm32, or 64. */
static void
mov_ri(gen_t *g, int r, int64_t imm)
{
    if (imm >= 0 && imm <= (int64_t)UINT32_MAX) {
        if (r & 8)
            put8(g, 0x41);
        put8(g, (uint8_t)(0xb8 | (r & 7)));
        put32(g, (uint32_t)imm);
    } else if (imm >= INT32_MIN && imm <= INT32_MAX) {
        rex(g, 1, 0, r);
        put8(g, 0xc7);
        put8(g, (uint8_t)(0xc0 | (r & 7)));
        put32(g, (uint32_t)imm);
    } else {
        rex(g, 1, 0, r);
        put8(g, (uint8_t)(0xb8 | (r & 7)));
        put32(g, (uint32_t)imm);
        put32(g, (uint32_t)((uint64_t)imm >> 32));
    }
}

/* lea rsp, [rsp + D] (8 bytes, flags kept). */
static void
adjust_rsp(gen_t *g, int32_t d)
{
    static const uint8_t opc[] = { 0x8d };
    op_rsp(g, opc, 1, RSP, d);
    g->sp_off -= d;
}

/*****************************************************************************
 * Labels (forward jumps only, rel32)
 */

static int
new_label(gen_t *g)
{
    if (g->nlabels == MAX_LABELS) {
        fail(g, QP_ERANGE);
        return 0;
    }
    g->label[g->nlabels] = -1;
    return g->nlabels++;
}

static void
jump_to(gen_t *g, int cc, int label)
{
    if (cc < 0)
        put8(g, 0xe9);
    else {
        put8(g, 0x0f);
        put8(g, (uint8_t)(0x80 | cc));
    }
    if (g->label[label] >= 0) { /* bound already: a backward jump */
        put32(g, (uint32_t)(g->label[label] - (int64_t)(g->len + 4)));
        return;
    }
    if (g->nfix == MAX_FIXUPS) {
        fail(g, QP_ERANGE);
        return;
    }
    g->fix[g->nfix].at = g->len;
    g->fix[g->nfix++].label = label;
    put32(g, 0);
}

static void
bind(gen_t *g, int label)
{
    g->label[label] = (int64_t)g->len;
    for (int i = 0; i < g->nfix; i++)
        if (g->fix[i].label == label && g->out != NULL && g->fix[i].at + 4 <= g->cap) {
            uint32_t d = (uint32_t)(g->len - (g->fix[i].at + 4));
            memcpy(g->out + g->fix[i].at, &d, 4);
        }
}

/*****************************************************************************
 * Temporaries
 */

static int
pick_temp(gen_t *g)
{
    uint32_t dead = 0;
    for (int i = 0; i < 16; i++)
        if (g->ctx->dead_regs & (1u << (i + 1)))
            dead |= 1u << i;
    for (int pass = 0; pass < 2; pass++)
        for (size_t k = 0; k < sizeof(temp_order); k++) {
            int r = temp_order[k];
            uint32_t bit = 1u << r;
            if ((g->busy | g->reserved) & bit)
                continue;
            if (pass == 0 && !(dead & bit))
                continue;
            g->busy |= bit;
            g->used |= bit;
            return r;
        }
    fail(g, QP_ERANGE); /* more values at once than registers */
    return R11;
}

static void
free_temp(gen_t *g, int r)
{
    g->busy &= ~(1u << r);
}

/*****************************************************************************
 * Operands and expressions
 */

enum { OP_REG, OP_TEMP, OP_IMM, OP_MEM };

typedef struct opnd {
    int kind;
    int reg;        /* REG, TEMP */
    int64_t imm;    /* IMM: fits in 32 bits signed; MEM: the address */
} opnd_t;

static int eval(gen_t *g, uint32_t i);
static void stmt(gen_t *g, uint32_t i);

static int
fits32(int64_t v)
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
        if (fits32(s->imm))
            return (opnd_t) { OP_IMM, 0, s->imm };
        break;
    case ARCH_SN_ARG: return (opnd_t) { OP_REG, arg_regs[s->imm], 0 };
    case ARCH_SN_REG: return (opnd_t) { OP_REG, (int)s->imm - 1, 0 };
    case ARCH_SN_RETVAL: return (opnd_t) { OP_REG, RAX, 0 };
    case ARCH_SN_LOAD:
        if (s->size == 8)
            return (opnd_t) { OP_MEM, 0, s->imm };
        break;
    default: break;
    }
    return (opnd_t) { OP_TEMP, eval(g, i), 0 };
}

static void
release(gen_t *g, const opnd_t *o)
{
    if (o->kind == OP_TEMP)
        free_temp(g, o->reg);
}

/* Move operand O into a temporary (itself when it is one). */
static int
to_temp(gen_t *g, const opnd_t *o)
{
    static const uint8_t load[] = { 0x8b };
    if (o->kind == OP_TEMP)
        return o->reg;
    int t = pick_temp(g);
    if (o->kind == OP_REG)
        mov_rr(g, t, o->reg);
    else if (o->kind == OP_IMM)
        mov_ri(g, t, o->imm);
    else
        op_rip(g, 1, load, 1, t, (uint64_t)o->imm, 0);
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
            op_rip(g, 1, opc, 1, ext, (uint64_t)dst->imm, 4);
            put32(g, (uint32_t)src->imm);
        } else {
            const uint8_t opc = (uint8_t)(0x01 | (ext << 3)); /* op r/m64, r64 */
            op_rip(g, 1, &opc, 1, src->reg, (uint64_t)dst->imm, 0);
        }
        return;
    }
    if (src->kind == OP_IMM) {
        rex(g, 1, 0, dst->reg);
        put8(g, 0x81);
        put8(g, (uint8_t)(0xc0 | (ext << 3) | (dst->reg & 7)));
        put32(g, (uint32_t)src->imm);
    } else if (src->kind == OP_MEM)
        op_rip(g, 1, &rm_form, 1, dst->reg, (uint64_t)src->imm, 0);
    else
        op_rr(g, &rm_form, 1, dst->reg, src->reg);
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
static void
branch(gen_t *g, uint32_t i, int sense, int label)
{
    const arch_snip_t *s = &g->nodes[i];
    if (is_compare(s)) {
        int cc = compare(g, i);
        jump_to(g, sense ? cc : cc ^ 1, label);
    } else if (s->op == ARCH_SN_NOT)
        branch(g, s->a, !sense, label);
    else if (s->op == ARCH_SN_LAND || s->op == ARCH_SN_LOR) {
        int both = s->op == ARCH_SN_LAND; /* AND needs both true, OR both false */
        if (sense != both) {              /* either operand alone decides */
            branch(g, s->a, sense, label);
            branch(g, s->b, sense, label);
        } else {
            int skip = new_label(g);
            branch(g, s->a, !sense, skip);
            branch(g, s->b, sense, label);
            bind(g, skip);
        }
    } else if (s->op == ARCH_SN_CONST) {
        if ((s->imm != 0) == sense)
            jump_to(g, -1, label);
    } else {
        int t = eval(g, i);
        static const uint8_t test[] = { 0x85 };
        op_rr(g, test, 1, t, t);
        free_temp(g, t);
        jump_to(g, sense ? CC_NE : CC_E, label);
    }
}

/* A shift of temporary T by the value of node B. */
static void
shift(gen_t *g, const arch_snip_t *s, int t)
{
    int ext = s->op == ARCH_SN_SHL ? 4 : (s->flags & ARCH_SNF_SIGNED) ? 7 : 5;
    const arch_snip_t *b = &g->nodes[s->b];
    if (b->op == ARCH_SN_CONST) {
        rex(g, 1, 0, t);
        put8(g, 0xc1);
        put8(g, (uint8_t)(0xc0 | (ext << 3) | (t & 7)));
        put8(g, (uint8_t)(b->imm & 63));
        return;
    }
    /* The count goes in %cl: rcx is never a temporary in such a snippet. */
    int c = eval(g, s->b);
    push_reg(g, RCX);
    mov_rr(g, RCX, c);
    rex(g, 1, 0, t);
    put8(g, 0xd3);
    put8(g, (uint8_t)(0xc0 | (ext << 3) | (t & 7)));
    pop_reg(g, RCX);
    free_temp(g, c);
}

/* T = T / value of node B (or %, MOD): through rax and rdx, never temporaries here. */
static void
divide(gen_t *g, const arch_snip_t *s, int t)
{
    static const uint8_t test[] = { 0x85 }, cmp_m1[] = { 0x83 }, cqo[] = { 0x48, 0x99 };
    int d = eval(g, s->b);
    int zero = new_label(g), minus1 = new_label(g), done = new_label(g);
    op_rr(g, test, 1, d, d);
    jump_to(g, CC_E, zero);
    rex(g, 1, 0, d); /* cmp d, -1: INT64_MIN / -1 would trap */
    put(g, cmp_m1, 1);
    put8(g, (uint8_t)(0xf8 | (d & 7)));
    put8(g, 0xff);
    jump_to(g, CC_E, minus1);
    push_reg(g, RAX);
    push_reg(g, RDX);
    mov_rr(g, RAX, t);
    put(g, cqo, 2);
    rex(g, 1, 0, d); /* idiv d */
    put8(g, 0xf7);
    put8(g, (uint8_t)(0xf8 | (d & 7)));
    mov_rr(g, t, s->op == ARCH_SN_DIV ? RAX : RDX);
    pop_reg(g, RDX);
    pop_reg(g, RAX);
    jump_to(g, -1, done);
    bind(g, minus1);
    if (s->op == ARCH_SN_DIV) { /* neg t */
        rex(g, 1, 0, t);
        put8(g, 0xf7);
        put8(g, (uint8_t)(0xd8 | (t & 7)));
        jump_to(g, -1, done);
    }
    bind(g, zero);
    mov_ri(g, t, 0);
    bind(g, done);
    free_temp(g, d);
}

/*
 * A call of the program's procedure at S->imm: the caller-saved registers and the
 * vector state are kept, the stack is aligned to 16; the return value goes to temporary
 * T (when T >= 0).
 */
static void
call(gen_t *g, const arch_snip_t *s, int t)
{
    static const uint8_t load[] = { 0x8b }, store[] = { 0x89 };
    int n = s->nargs;
    adjust_rsp(g, -8); /* the slot for the return value */
    for (int r = 0; r < 16; r++)
        if (CALLER_SAVED & (1u << r))
            push_reg(g, r);
    for (int k = 0; k < n; k++) { /* argument values, pushed in order */
        int v = eval(g, s->args[k]);
        push_reg(g, v);
        free_temp(g, v);
    }
    push_reg(g, RBX); /* rbx remembers where the stack was */
    int32_t sp_off = g->sp_off;
    mov_rr(g, RBX, RSP);
    rex(g, 1, 0, RSP); /* and rsp, -64 */
    put8(g, 0x83);
    put8(g, 0xe4);
    put8(g, 0xc0);
    adjust_rsp(g, -XSAVE_AREA);
    for (int k = 0; k < 8; k++) { /* XRSTOR wants a clean XSAVE header (bytes 512-575) */
        static const uint8_t movq_imm[] = { 0xc7 };
        op_rsp(g, movq_imm, 1, 0, 512 + 8 * k);
        put32(g, 0);
    }
    mov_ri(g, RAX, XSAVE_MASK);
    mov_ri(g, RDX, 0);
    put(g, "\x48\x0f\xae\x24\x24", 5); /* xsave64 (%rsp) */
    for (int k = 0; k < n; k++) /* argument k is at rbx + 8 + 8 * (n - 1 - k) */
        op_base(g, load, 1, arg_regs[k], RBX, 8 + 8 * (n - 1 - k));
    /* The callee from the code's own address when it is in reach (right in a PIE whose
     * addresses are link-time ones), else absolute: 10 bytes either way. */
    int64_t d = (int64_t)((uint64_t)s->imm - (g->addr + g->len + 7));
    if (fits32(d)) {
        put(g, "\x4c\x8d\x1d", 3); /* lea disp32(%rip), %r11 */
        put32(g, (uint32_t)d);
        put(g, "\x0f\x1f\x00", 3); /* nopl (%rax) */
    } else {
        put(g, "\x49\xbb", 2); /* movabs $imm, %r11 */
        put32(g, (uint32_t)s->imm);
        put32(g, (uint32_t)((uint64_t)s->imm >> 32));
    }
    put(g, "\x41\xff\xd3", 3); /* call *%r11 */
    op_base(g, store, 1, RAX, RBX, 8 + 8 * n + 8 * 9); /* the return value slot */
    mov_ri(g, RAX, XSAVE_MASK);
    mov_ri(g, RDX, 0);
    put(g, "\x48\x0f\xae\x2c\x24", 5); /* xrstor64 (%rsp) */
    mov_rr(g, RSP, RBX);
    g->sp_off = sp_off;
    pop_reg(g, RBX);
    adjust_rsp(g, 8 * n);
    for (int r = 15; r >= 0; r--)
        if (CALLER_SAVED & (1u << r))
            pop_reg(g, r);
    if (t >= 0)
        pop_reg(g, t);
    else
        adjust_rsp(g, 8);
}

/* The 64-bit ALU operation EXT (0 add, 4 and, 6 xor) of register R with IMM32. */
static void
alu_ri(gen_t *g, int ext, int r, int32_t imm)
{
    rex(g, 1, 0, r);
    put8(g, 0x81);
    put8(g, (uint8_t)(0xc0 | (ext << 3) | (r & 7)));
    put32(g, (uint32_t)imm);
}

/* shr R, N */
static void
shr_ri(gen_t *g, int r, int n)
{
    rex(g, 1, 0, r);
    put8(g, 0xc1);
    put8(g, (uint8_t)(0xe8 | (r & 7)));
    put8(g, (uint8_t)n);
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
    int tab = pick_temp(g), left = pick_temp(g);
    int loop = new_label(g), next = new_label(g), found = new_label(g);
    alu_ri(g, 4, t, ARCH_SNIP_THREADS - 1);
    op_rip(g, 1, lea, 1, tab, (uint64_t)table, 0);
    mov_ri(g, left, ARCH_SNIP_THREADS);
    bind(g, loop);
    op_ind(g, 1, cmp_rm, 1, key, tab, t); /* cmp key, [tab + t*8] */
    jump_to(g, CC_E, found);
    op_ind(g, 1, cmp0, 1, 7, tab, t); /* cmpq $0, [tab + t*8] */
    put8(g, 0);
    jump_to(g, CC_NE, next);
    op_rr(g, (const uint8_t[]) { 0x31 }, 1, RAX, RAX);
    put8(g, 0xf0);
    op_ind(g, 1, cmpxchg, 2, key, tab, t); /* lock cmpxchg [tab + t*8], key */
    jump_to(g, CC_E, found);
    jump_to(g, -1, loop); /* taken meanwhile: look at it again */
    bind(g, next);
    rex(g, 1, 0, t); /* inc t */
    put8(g, 0xff);
    put8(g, (uint8_t)(0xc0 | (t & 7)));
    alu_ri(g, 4, t, ARCH_SNIP_THREADS - 1);
    rex(g, 1, 0, left); /* dec left */
    put8(g, 0xff);
    put8(g, (uint8_t)(0xc8 | (left & 7)));
    jump_to(g, CC_NE, loop);
    mov_ri(g, t, ARCH_SNIP_THREADS); /* full */
    bind(g, found);
    free_temp(g, key);
    free_temp(g, tab);
    free_temp(g, left);
    return t;
}

/* T = (T * imm32) ^ (that >> 16): a hash's mixing step. */
static void
mix(gen_t *g, int t, int spare)
{
    static const uint8_t imul[] = { 0x69 }, xor_rr[] = { 0x31 };
    rex(g, 1, t, t);
    put(g, imul, 1);
    put8(g, (uint8_t)(0xc0 | ((t & 7) << 3) | (t & 7)));
    put32(g, 0x045d9f3bu);
    mov_rr(g, spare, t);
    shr_ri(g, spare, 16);
    op_rr(g, xor_rr, 1, spare, t);
}

/*
 * The calling thread's index in the key table at S->imm (see ARCH_SN_THREAD_SLOT): the
 * thread pointer hashed (its page number), then probe_slot.
 */
static int
thread_slot(gen_t *g, const arch_snip_t *s)
{
    int t = pick_temp(g), key = pick_temp(g), spare = pick_temp(g);
    push_reg(g, RAX);
    /* key = %fs:0 */
    put8(g, 0x64);
    rex(g, 1, key, 0);
    put8(g, 0x8b);
    put8(g, (uint8_t)(0x04 | ((key & 7) << 3)));
    put8(g, 0x25);
    put32(g, 0);
    mov_rr(g, t, key);
    shr_ri(g, t, 12);
    mix(g, t, spare);
    free_temp(g, spare);
    probe_slot(g, s->imm, key, t);
    pop_reg(g, RAX);
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
    int key = eval(g, s->a), t = pick_temp(g), spare = pick_temp(g);
    int full = new_label(g), done = new_label(g);
    push_reg(g, RAX);
    mov_ri(g, spare, (int64_t)ARCH_SNIP_KEY_XOR);
    op_rr(g, xor_rr, 1, spare, key);
    op_rr(g, test_rr, 1, key, key);
    jump_to(g, CC_E, full);
    mov_rr(g, t, key); /* t = mix(key ^ key >> 29) */
    mov_rr(g, spare, key);
    shr_ri(g, spare, 29);
    op_rr(g, xor_rr, 1, spare, t);
    mix(g, t, spare);
    free_temp(g, spare);
    probe_slot(g, s->imm, key, t);
    jump_to(g, -1, done);
    bind(g, full); /* (the temporaries are free here as on the other path) */
    mov_ri(g, t, ARCH_SNIP_THREADS);
    bind(g, done);
    pop_reg(g, RAX);
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
    int t = pick_temp(g);
    for (int k = 0; k < 5; k++)
        push_reg(g, kept[k]);
    adjust_rsp(g, -16);
    mov_ri(g, RAX, 228); /* SYS_clock_gettime */
    mov_ri(g, RDI, 3);   /* CLOCK_THREAD_CPUTIME_ID */
    mov_rr(g, RSI, RSP);
    put8(g, 0x0f);
    put8(g, 0x05);
    op_rsp(g, load, 1, t, 0); /* t = tv_sec * 1e9 + tv_nsec */
    rex(g, 1, t, t);
    put(g, imul, 1);
    put8(g, (uint8_t)(0xc0 | ((t & 7) << 3) | (t & 7)));
    put32(g, 1000000000u);
    op_rsp(g, add, 1, t, 8);
    adjust_rsp(g, 16);
    for (int k = 4; k >= 0; k--)
        pop_reg(g, kept[k]);
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
    int t = pick_temp(g);
    for (int k = 0; k < 3; k++)
        push_reg(g, kept[k]);
    mov_ri(g, RAX, 186); /* SYS_gettid */
    put8(g, 0x0f);
    put8(g, 0x05);
    mov_rr(g, t, RAX);
    for (int k = 2; k >= 0; k--)
        pop_reg(g, kept[k]);
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
    int a = eval(g, s->a);
    adjust_rsp(g, -48);
    op_rsp(g, store, 1, a, 24); /* remote.iov_base = a */
    free_temp(g, a);
    for (int k = 0; k < NKEPT; k++)
        push_reg(g, kept[k]);
    mov_ri(g, RAX, 0);
    op_rsp(g, store, 1, RAX, PUSHED + 0);       /* word = 0 */
    mov_ri(g, RAX, s->size);
    op_rsp(g, store, 1, RAX, PUSHED + 16);      /* local.iov_len */
    op_rsp(g, store, 1, RAX, PUSHED + 32);      /* remote.iov_len */
    op_rsp(g, lea, 1, RAX, PUSHED + 0);
    op_rsp(g, store, 1, RAX, PUSHED + 8);       /* local.iov_base = &word */
    mov_ri(g, RAX, 39);                         /* SYS_getpid */
    put8(g, 0x0f);
    put8(g, 0x05);
    mov_rr(g, RDI, RAX);
    op_rsp(g, lea, 1, RSI, PUSHED + 8);         /* local iovec */
    mov_ri(g, RDX, 1);
    op_rsp(g, lea, 1, R10, PUSHED + 24);        /* remote iovec */
    mov_ri(g, R8, 1);
    mov_ri(g, R9, 0);
    mov_ri(g, RAX, 310);                        /* SYS_process_vm_readv */
    put8(g, 0x0f);
    put8(g, 0x05);
    /* A short read or an error: the word is 0. */
    int done = new_label(g);
    mov_ri(g, RCX, s->size);
    op_rr(g, cmp_rr, 1, RCX, RAX);
    jump_to(g, CC_E, done);
    mov_ri(g, RAX, 0);
    op_rsp(g, store, 1, RAX, PUSHED + 0);
    bind(g, done);
    for (int k = NKEPT - 1; k >= 0; k--)
        pop_reg(g, kept[k]);
    int t = pick_temp(g);
    op_rsp(g, load, 1, t, 0);
    adjust_rsp(g, 48);
    return t;
}

/* The value of node I in a new temporary. */
static int
eval(gen_t *g, uint32_t i)
{
    static const uint8_t imul[] = { 0x0f, 0xaf };
    const arch_snip_t *s = &g->nodes[i];
    switch (s->op) {
    case ARCH_SN_CONST: {
        int t = pick_temp(g);
        mov_ri(g, t, s->imm);
        return t;
    }
    case ARCH_SN_ARG:
    case ARCH_SN_RETVAL:
    case ARCH_SN_REG: {
        int t = pick_temp(g);
        mov_rr(g, t, s->op == ARCH_SN_ARG ? arg_regs[s->imm]
                   : s->op == ARCH_SN_REG ? (int)s->imm - 1 : RAX);
        return t;
    }
    case ARCH_SN_LOAD: {
        int t = pick_temp(g);
        static const uint8_t l8[] = { 0x8b }, l4[] = { 0x8b }, l2[] = { 0x0f, 0xb7 },
                             l1[] = { 0x0f, 0xb6 };
        if (s->size == 8)
            op_rip(g, 1, l8, 1, t, (uint64_t)s->imm, 0);
        else if (s->size == 4)
            op_rip(g, 0, l4, 1, t, (uint64_t)s->imm, 0);
        else
            op_rip(g, 1, s->size == 2 ? l2 : l1, 2, t, (uint64_t)s->imm, 0);
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
            rex(g, 1, t, t);
            put8(g, 0x69);
            put8(g, (uint8_t)(0xc0 | ((t & 7) << 3) | (t & 7)));
            put32(g, (uint32_t)r.imm);
        } else if (r.kind == OP_MEM)
            op_rip(g, 1, imul, 2, t, (uint64_t)r.imm, 0);
        else
            op_rr(g, imul, 2, t, r.reg);
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
        int t = pick_temp(g);
        call(g, s, t);
        return t;
    }
    case ARCH_SN_LOAD_AT: {
        int t = eval(g, s->a);
        static const uint8_t l8[] = { 0x8b }, l2[] = { 0x0f, 0xb7 }, l1[] = { 0x0f, 0xb6 };
        if (s->size == 8 || s->size == 4)
            op_ind(g, s->size == 8, l8, 1, t, t, -1);
        else
            op_ind(g, 1, s->size == 2 ? l2 : l1, 2, t, t, -1);
        return t;
    }
    case ARCH_SN_KEY_SLOT: return key_slot(g, s);
    case ARCH_SN_THREAD_SLOT:
        for (int k = 0; k < g->nslot; k++)
            if (g->slot_tab[k] == s->imm) {
                int t = pick_temp(g);
                mov_rr(g, t, g->slot_reg[k]);
                return t;
            }
        return thread_slot(g, s);
    case ARCH_SN_SP: {
        static const uint8_t lea[] = { 0x8d };
        int t = pick_temp(g);
        op_rsp(g, lea, 1, t, g->sp_off);
        return t;
    }
    case ARCH_SN_CYCLES: {
        /* rdtsc writes edx:eax: both kept around it (reserved when the snippet has one) */
        static const uint8_t shl32[] = { 0xc1 }, or_rr[] = { 0x09 };
        int t = pick_temp(g);
        push_reg(g, RAX);
        push_reg(g, RDX);
        put8(g, 0x0f);
        put8(g, 0x31);
        rex(g, 1, 0, RDX); /* shl $32, %rdx */
        put(g, shl32, 1);
        put8(g, (uint8_t)(0xe0 | (RDX & 7)));
        put8(g, 32);
        op_rr(g, or_rr, 1, RDX, RAX); /* or %rdx, %rax */
        mov_rr(g, t, RAX);
        pop_reg(g, RDX);
        pop_reg(g, RAX);
        return t;
    }
    case ARCH_SN_THREAD_PTR: {
        int t = pick_temp(g);
        put8(g, 0x64); /* mov %fs:0, t */
        rex(g, 1, t, 0);
        put8(g, 0x8b);
        put8(g, (uint8_t)(0x04 | ((t & 7) << 3)));
        put8(g, 0x25);
        put32(g, 0);
        return t;
    }
    case ARCH_SN_ADDR: {
        static const uint8_t lea[] = { 0x8d };
        int t = pick_temp(g);
        op_rip(g, 1, lea, 1, t, (uint64_t)s->imm, 0);
        return t;
    }
    case ARCH_SN_THREAD_CPU: return thread_cpu(g);
    case ARCH_SN_THREAD_ID: return thread_id(g);
    case ARCH_SN_LOAD_SAFE: return load_safe(g, s);
    default: break;
    }
    /* Truth values (comparisons, !, &&, ||) and statements. */
    int t = pick_temp(g);
    if (is_compare(s) || s->op == ARCH_SN_NOT || s->op == ARCH_SN_LAND
        || s->op == ARCH_SN_LOR) {
        int no = new_label(g), done = new_label(g);
        branch(g, i, 0, no);
        mov_ri(g, t, 1);
        jump_to(g, -1, done);
        bind(g, no);
        mov_ri(g, t, 0);
        bind(g, done);
    } else {
        stmt(g, i);
        mov_ri(g, t, 0);
    }
    return t;
}

/*****************************************************************************
 * Statements
 */

static void
store(gen_t *g, const arch_snip_t *s)
{
    int t = eval(g, s->a);
    static const uint8_t mov8[] = { 0x88 }, mov[] = { 0x89 };
    if (s->size == 2)
        put8(g, 0x66);
    if (s->size == 1) {
        rex(g, 0, t, 0); /* a REX makes sil/dil/r8b... addressable */
        put(g, mov8, 1);
        put8(g, (uint8_t)(0x05 | ((t & 7) << 3)));
        int64_t d = (int64_t)((uint64_t)s->imm - (g->addr + g->len + 4));
        if (!fits32(d))
            fail(g, QP_ERANGE);
        put32(g, (uint32_t)d);
    } else
        op_rip(g, s->size == 8, mov, 1, t, (uint64_t)s->imm, 0);
    free_temp(g, t);
}

static void
add_to(gen_t *g, const arch_snip_t *s)
{
    const arch_snip_t *v = &g->nodes[s->a];
    int lock = (s->flags & ARCH_SNF_ATOMIC) != 0;
    if (v->op == ARCH_SN_CONST && v->imm == 1) {
        static const uint8_t inc[] = { 0xff }; /* [lock] incq m64 */
        if (lock)
            put8(g, 0xf0);
        op_rip(g, 1, inc, 1, 0, (uint64_t)s->imm, 0);
    } else if (v->op == ARCH_SN_CONST && fits32(v->imm)) {
        static const uint8_t add[] = { 0x81 }; /* [lock] addq $imm32, m64 */
        if (lock)
            put8(g, 0xf0);
        op_rip(g, 1, add, 1, 0, (uint64_t)s->imm, 4);
        put32(g, (uint32_t)v->imm);
    } else {
        int t = eval(g, s->a);
        static const uint8_t add[] = { 0x01 }; /* [lock] add m64, r64 */
        if (lock)
            put8(g, 0xf0);
        op_rip(g, 1, add, 1, t, (uint64_t)s->imm, 0);
        free_temp(g, t);
    }
}

static void
timer(gen_t *g, const arch_snip_t *s)
{
    uint8_t buf[96];
    uint64_t at = g->addr + g->len;
    uint64_t w = (uint64_t)s->imm;
    int k = s->op == ARCH_SN_TIMER_START
        ? arch_emit_timer_start(at, w, w + 8, buf, sizeof(buf))
        : arch_emit_timer_stop(at, w, w + 8, w + 16, buf, sizeof(buf));
    if (k < 0)
        fail(g, k);
    else
        put(g, buf, (size_t)k);
}

/* OPC (64-bit) with REG and the word at %fs:OFF. */
static void
fs_op(gen_t *g, uint8_t opc, int reg, int32_t off)
{
    put8(g, 0x64);
    rex(g, 1, reg, 0);
    put8(g, opc);
    put8(g, (uint8_t)(0x04 | ((reg & 7) << 3)));
    put8(g, 0x25);
    put32(g, (uint32_t)off);
}

/* OPC REG, DISP8(BASE) (W: 64-bit), REX only when needed; SIB when BASE is %rsp. */
static void
op_disp8(gen_t *g, int w, uint8_t opc, int reg, int base, int8_t disp)
{
    if (w || (reg & 8) || (base & 8))
        rex(g, w, reg, base);
    put8(g, opc);
    put8(g, (uint8_t)(0x40 | ((reg & 7) << 3) | (base & 7)));
    if ((base & 7) == RSP)
        put8(g, 0x24);
    put8(g, (uint8_t)disp);
}


/*
 * t = N bytes reserved at the cursor for a record, the cursor moved past them in one
 * instruction (xadd), so that a signal handler's records, whenever it runs, go before
 * or after them and the cursor is never set back. A slot at or past the limit (or no
 * buffer yet: cursor and limit 0) stays empty - the refill (node R) writes the buffer up
 * to the first slot at or past its limit - and the reservation is made again.
 *   retry: mov $N,%t32; xadd t,%fs:CUR; cmp %fs:LIM,t; jb ok; call R; jmp retry
 *   ok:
 */
static void
trace_reserve(gen_t *g, const arch_snip_t *r, int t, int n)
{
    int retry = new_label(g), ok = new_label(g);
    bind(g, retry);
    if (t & 8)
        put8(g, 0x41);
    put8(g, (uint8_t)(0xb8 | (t & 7))); /* mov $n, %t32 */
    put32(g, (uint32_t)n);
    put8(g, 0x64); /* xadd t, %fs:CUR */
    rex(g, 1, t, 0);
    put8(g, 0x0f);
    put8(g, 0xc1);
    put8(g, (uint8_t)(0x04 | ((t & 7) << 3)));
    put8(g, 0x25);
    put32(g, (uint32_t)ARCH_TRACE_CUR);
    fs_op(g, 0x3b, t, ARCH_TRACE_LIM);
    jump_to(g, CC_B, ok);
    int64_t d = (int64_t)((uint64_t)r->imm - (g->addr + g->len + 5));
    if (!fits32(d))
        fail(g, QP_ERANGE);
    put8(g, 0xe8);
    put32(g, (uint32_t)d);
    jump_to(g, -1, retry);
    bind(g, ok);
}

/* movw $IMM,0(t) (a 2-byte record: W 2) or movl $IMM,0(t). */
static void
trace_store(gen_t *g, int t, int w, uint32_t imm)
{
    if (w == 2)
        put8(g, 0x66);
    op_disp8(g, 0, 0xc7, 0, t, 0);
    if (w == 2)
        put16(g, (uint16_t)imm);
    else
        put32(g, imm);
}

/* ARCH_SN_TRACE_REC: 4 bytes reserved; movl $imm,(t) (size 2: 2 bytes; movw). */
static void
trace_rec(gen_t *g, const arch_snip_t *s)
{
    int t = pick_temp(g), w = s->size == 2 ? 2 : 4;
    trace_reserve(g, &g->nodes[s->a], t, w);
    trace_store(g, t, w, (uint32_t)s->imm);
    free_temp(g, t);
}

/* ARCH_SN_TRACE_VAL: v = value; 12 bytes reserved; movl $imm,(t); mov v,4(t) (size 2:
 * 10 bytes; movw $imm,(t); mov v,2(t)). */
static void
trace_val(gen_t *g, const arch_snip_t *s)
{
    int v = eval(g, s->b);
    int t = pick_temp(g), w = s->size == 2 ? 2 : 4;
    trace_reserve(g, &g->nodes[s->a], t, w + 8);
    trace_store(g, t, w, (uint32_t)s->imm);
    op_disp8(g, 1, 0x89, v, t, (int8_t)w); /* mov v, w(t) */
    free_temp(g, t);
    free_temp(g, v);
}

static void
stmt(gen_t *g, uint32_t i)
{
    const arch_snip_t *s = &g->nodes[i];
    switch (s->op) {
    case ARCH_SN_SEQ:
        stmt(g, s->a);
        stmt(g, s->b);
        return;
    case ARCH_SN_IF: {
        int no = new_label(g), done = new_label(g);
        branch(g, s->a, 0, no);
        stmt(g, s->b);
        if (s->c != ARCH_SNIP_NONE)
            jump_to(g, -1, done);
        bind(g, no);
        if (s->c != ARCH_SNIP_NONE)
            stmt(g, s->c);
        bind(g, done);
        return;
    }
    case ARCH_SN_STORE: store(g, s); return;
    case ARCH_SN_ADD_TO: add_to(g, s); return;
    case ARCH_SN_TIMER_START:
    case ARCH_SN_TIMER_STOP: timer(g, s); return;
    case ARCH_SN_CALL: call(g, s, -1); return;
    case ARCH_SN_TRACE_REC: trace_rec(g, s); return;
    case ARCH_SN_TRACE_VAL: trace_val(g, s); return;
    case ARCH_SN_NOPS: return;
    case ARCH_SN_STORE_AT: {
        static const uint8_t mov8[] = { 0x88 }, mov[] = { 0x89 };
        int a = eval(g, s->a), v = eval(g, s->b);
        if (s->size == 2)
            put8(g, 0x66);
        op_ind(g, s->size == 8, s->size == 1 ? mov8 : mov, 1, v, a, -1);
        free_temp(g, v);
        free_temp(g, a);
        return;
    }
    case ARCH_SN_ADD_AT: {
        static const uint8_t add[] = { 0x01 };
        int a = eval(g, s->a), v = eval(g, s->b);
        if (s->flags & ARCH_SNF_ATOMIC)
            put8(g, 0xf0);
        op_ind(g, 1, add, 1, v, a, -1);
        free_temp(g, v);
        free_temp(g, a);
        return;
    }
    default: free_temp(g, eval(g, i)); return;
    }
}

/*****************************************************************************
 * Checking
 */

static int
arity(const arch_snip_t *s, int *nb, int *nc)
{
    *nb = 0;
    *nc = 0;
    switch (s->op) {
    case ARCH_SN_CONST:
    case ARCH_SN_ARG:
    case ARCH_SN_RETVAL:
    case ARCH_SN_REG:
    case ARCH_SN_LOAD:
    case ARCH_SN_TIMER_START:
    case ARCH_SN_TIMER_STOP:
    case ARCH_SN_CALL:
    case ARCH_SN_NOPS:
    case ARCH_SN_THREAD_SLOT:
    case ARCH_SN_THREAD_CPU:
    case ARCH_SN_THREAD_ID:
    case ARCH_SN_ADDR:
    case ARCH_SN_THREAD_PTR:
    case ARCH_SN_SP:
    case ARCH_SN_CYCLES: return 0;
    case ARCH_SN_NOT:
    case ARCH_SN_STORE:
    case ARCH_SN_ADD_TO:
    case ARCH_SN_KEY_SLOT:
    case ARCH_SN_TRACE_REC:
    case ARCH_SN_LOAD_SAFE:
    case ARCH_SN_LOAD_AT: return 1;
    case ARCH_SN_STORE_AT:
    case ARCH_SN_TRACE_VAL:
    case ARCH_SN_ADD_AT: *nb = 1; return 1;
    case ARCH_SN_IF: *nb = 1; *nc = 1; return 1; /* c optional */
    default:
        if (s->op >= ARCH_SN_ADD && s->op <= ARCH_SN_SEQ) {
            *nb = 1;
            return 1;
        }
        return -1;
    }
}

int
arch_snip_imm_is_addr(uint8_t op)
{
    switch (op) {
    case ARCH_SN_LOAD:
    case ARCH_SN_STORE:
    case ARCH_SN_ADD_TO:
    case ARCH_SN_TIMER_START:
    case ARCH_SN_TIMER_STOP:
    case ARCH_SN_THREAD_SLOT:
    case ARCH_SN_KEY_SLOT:
    case ARCH_SN_ADDR: return 1;
    default: return 0;
    }
}

static int
check_node(const arch_snip_t *nodes, size_t n, uint32_t i, const arch_snip_ctx_t *ctx,
           int depth, char *why, size_t whylen)
{
#define BAD(...)                                                                         \
    do {                                                                                 \
        if (why != NULL && whylen > 0)                                                   \
            snprintf(why, whylen, __VA_ARGS__);                                          \
        return QP_EINVAL;                                                                \
    } while (0)
    if (i >= n)
        BAD("node index %u out of range (%zu nodes)", i, n);
    if (depth > 64)
        BAD("node %u: the snippet is deeper than 64 (or has a cycle)", i);
    const arch_snip_t *s = &nodes[i];
    int nb, nc, na = arity(s, &nb, &nc);
    if (na < 0)
        BAD("node %u: unknown operation %u", i, s->op);
    if (s->op == ARCH_SN_REG && (s->imm < 1 || s->imm > 16 || s->imm - 1 == RSP))
        BAD("node %u: register %lld (1 to 16, not the stack pointer)", i, (long long)s->imm);
    if (s->op == ARCH_SN_ARG && (s->imm < 0 || s->imm >= ARCH_SNIP_MAXARGS))
        BAD("node %u: argument %lld (0 to 5)", i, (long long)s->imm);
    if (s->op == ARCH_SN_ARG && !(ctx->where & (ARCH_SNX_ENTRY | ARCH_SNX_CALL)))
        BAD("node %u: an argument where there is none (only at an entry or a call)", i);
    if (s->op == ARCH_SN_RETVAL && !(ctx->where & (ARCH_SNX_RETURN | ARCH_SNX_AFTER_CALL)))
        BAD("node %u: a return value where there is none (only at a return or after a "
            "call)", i);
    if ((s->op == ARCH_SN_LOAD || s->op == ARCH_SN_STORE || s->op == ARCH_SN_LOAD_AT
         || s->op == ARCH_SN_STORE_AT || s->op == ARCH_SN_LOAD_SAFE)
        && s->size != 1 && s->size != 2 && s->size != 4 && s->size != 8)
        BAD("node %u: a %u-byte access (1, 2, 4 or 8)", i, s->size);
    if ((s->op == ARCH_SN_TRACE_REC || s->op == ARCH_SN_TRACE_VAL)
        && (s->a >= n || nodes[s->a].op != ARCH_SN_CONST))
        BAD("node %u: a trace record's refill must be a constant address", i);
    if ((s->op == ARCH_SN_TRACE_REC || s->op == ARCH_SN_TRACE_VAL)
        && (s->imm < 0 || s->imm > (s->size == 2 ? 0xffff : UINT32_MAX)))
        BAD("node %u: a trace record is %d bytes", i, s->size == 2 ? 2 : 4);
    if (s->op == ARCH_SN_CALL && s->nargs > ARCH_SNIP_MAXARGS)
        BAD("node %u: a call with %u arguments (at most 6)", i, s->nargs);
    uint32_t ops[3 + ARCH_SNIP_MAXARGS];
    int k = 0;
    if (na)
        ops[k++] = s->a;
    if (nb)
        ops[k++] = s->b;
    if (nc && s->c != ARCH_SNIP_NONE)
        ops[k++] = s->c;
    for (int j = 0; s->op == ARCH_SN_CALL && j < s->nargs; j++)
        ops[k++] = s->args[j];
    for (int j = 0; j < k; j++) {
        if (ops[j] == ARCH_SNIP_NONE)
            BAD("node %u: an operand is missing", i);
        QP_CHECK(check_node(nodes, n, ops[j], ctx, depth + 1, why, whylen));
    }
    return 0;
#undef BAD
}

int
arch_snip_check(const arch_snip_t *nodes, size_t n, uint32_t root,
                const arch_snip_ctx_t *ctx, char *why, size_t whylen)
{
    static const arch_snip_ctx_t none = { 0 };
    if (why != NULL && whylen > 0)
        why[0] = '\0';
    if (nodes == NULL)
        return QP_EINVAL;
    return check_node(nodes, n, root, ctx ? ctx : &none, 0, why, whylen);
}

/*****************************************************************************
 * Compiling
 */

/* Registers a snippet must never take as temporaries: the program's values it reads
 * (arguments, the return value) and those its operations need for themselves. */
static uint32_t
reserved_regs(const arch_snip_t *nodes, size_t n)
{
    uint32_t r = 1u << RSP;
    for (size_t i = 0; i < n; i++) {
        const arch_snip_t *s = &nodes[i];
        if (s->op == ARCH_SN_ARG)
            r |= 1u << arg_regs[s->imm];
        if (s->op == ARCH_SN_REG && s->imm >= 1 && s->imm <= 16)
            r |= 1u << (s->imm - 1);
        if (s->op == ARCH_SN_RETVAL || s->op == ARCH_SN_DIV || s->op == ARCH_SN_MOD)
            r |= 1u << RAX;
        if (s->op == ARCH_SN_DIV || s->op == ARCH_SN_MOD)
            r |= 1u << RDX;
        if ((s->op == ARCH_SN_SHL || s->op == ARCH_SN_SHR) && s->b < n
            && nodes[s->b].op != ARCH_SN_CONST)
            r |= 1u << RCX;
        if (s->op == ARCH_SN_THREAD_SLOT || s->op == ARCH_SN_KEY_SLOT)
            r |= 1u << RAX;
        if (s->op == ARCH_SN_CYCLES)
            r |= (1u << RAX) | (1u << RDX);
        if (s->op == ARCH_SN_THREAD_ID)
            r |= (1u << RAX) | (1u << RCX) | (1u << R11);
        if (s->op == ARCH_SN_THREAD_CPU)
            r |= (1u << RAX) | (1u << RCX) | (1u << R11) | (1u << RDI) | (1u << RSI);
    }
    return r;
}

/* One pass over the body of the snippet (g->used: the temporaries it took). */
static int
body(gen_t *g, uint32_t root)
{
    /* A thread's slot in a table is looked up once, before anything else (so on every
     * path), and kept in a register: per-thread snippets use it several times. */
    for (size_t i = 0; i < g->n; i++) {
        const arch_snip_t *s = &g->nodes[i];
        int known = 0;
        if (s->op != ARCH_SN_THREAD_SLOT)
            continue;
        for (int k = 0; k < g->nslot; k++)
            known |= g->slot_tab[k] == s->imm;
        if (known || g->nslot == 4)
            continue;
        g->slot_reg[g->nslot] = thread_slot(g, s);
        g->slot_tab[g->nslot++] = s->imm;
    }
    stmt(g, root);
    for (int k = 0; k < g->nslot; k++)
        free_temp(g, g->slot_reg[k]);
    return g->err;
}

int
arch_snip_emit(const arch_snip_t *nodes, size_t n, uint32_t root, const arch_snip_ctx_t *ctx,
               uint64_t addr, uint8_t *out, size_t cap)
{
    static const arch_snip_ctx_t none = { 0 };
    if (ctx == NULL)
        ctx = &none;
    QP_CHECK(arch_snip_check(nodes, n, root, ctx, NULL, 0));
    gen_t g;
    memset(&g, 0, sizeof(g));
    g.nodes = nodes;
    g.n = n;
    g.ctx = ctx;
    g.reserved = reserved_regs(nodes, n);
    /* First pass: which temporaries does it take? */
    g.addr = addr;
    QP_CHECK(body(&g, root));
    uint32_t save = 0;
    for (int r = 0; r < 16; r++)
        if ((g.used & (1u << r)) && !(ctx->dead_regs & (1u << (r + 1))))
            save |= 1u << r;
    int red = !ctx->no_red_zone, flags = ctx->live_flags != 0 && g.len > 0;
    /* Second pass, for real, after the prologue. */
    uint32_t used = g.used;
    memset(&g, 0, sizeof(g));
    g.nodes = nodes;
    g.n = n;
    g.ctx = ctx;
    g.reserved = reserved_regs(nodes, n);
    g.out = out;
    g.cap = out ? cap : 0;
    g.addr = addr;
    if (red)
        adjust_rsp(&g, -128);
    if (flags) {
        put8(&g, 0x9c); /* pushfq */
        g.sp_off += 8;
    }
    for (int r = 0; r < 16; r++)
        if (save & (1u << r))
            push_reg(&g, r);
    QP_CHECK(body(&g, root));
    if (g.used != used)
        return QP_EINVAL; /* the two passes must agree */
    for (int r = 15; r >= 0; r--)
        if (save & (1u << r))
            pop_reg(&g, r);
    if (flags)
        put8(&g, 0x9d); /* popfq */
    if (red)
        adjust_rsp(&g, 128);
    if (g.err)
        return g.err;
    return (int)g.len;
}

/*
 * The cost model (see arch.h): cycles of the time-stamp counter. Plain instructions
 * overlap with the program's own, and many of a snippet's are on paths not taken (a
 * thread's slot found at the first probe): a tenth of a cycle each, every one emitted -
 * calibrated on make bench (`if (arg1 > 10) counter++`, a per-thread counter, `inside(main)`:
 * 0.15-2.7 ns modelled for 0-1.5 ns measured) and on lua (a metric on 45M calls: +126 ms
 * modelled, +70 ms measured): an upper bound for cheap snippets. What serialises or leaves the core costs its latency,
 * measured here once, back to back (a locked add, pushf + popf, rdtsc, a CPU-time system
 * call); a locked add among the program's instructions was measured at about 0.6 of its
 * back-to-back latency (a counter of 30M calls, make bench), the others at all of it.
 */
typedef struct latency {
    double lock, popf, rdtsc, syscall;
} latency_t;

static uint64_t
tsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}

static void
measure(latency_t *l)
{
    enum { N = 20000, NSYS = 200 };
    static volatile uint64_t word;
    uint64_t t0 = tsc();
    for (int i = 0; i < N; i++)
        __asm__ volatile("lock addq $1, %0" : "+m"(word));
    uint64_t t1 = tsc();
    for (int i = 0; i < N; i++)
        __asm__ volatile("pushfq; popfq" ::: "memory", "cc");
    uint64_t t2 = tsc();
    for (int i = 0; i < N; i++) {
        uint32_t a, d;
        __asm__ volatile("rdtsc" : "=a"(a), "=d"(d));
    }
    uint64_t t3 = tsc();
    struct timespec ts;
    for (int i = 0; i < NSYS; i++)
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    uint64_t t4 = tsc();
    l->lock = 0.6 * (double)(t1 - t0) / N;
    l->popf = (double)(t2 - t1) / N;
    l->rdtsc = (double)(t3 - t2) / N;
    l->syscall = (double)(t4 - t3) / NSYS;
}

int
arch_snip_cycles(const arch_snip_t *nodes, size_t n, uint32_t root, const arch_snip_ctx_t *ctx,
                 uint64_t addr, double *cycles)
{
    static latency_t lat; /* measured at the first call (a race measures twice: harmless) */
    static volatile int measured;
    if (cycles == NULL)
        return QP_EINVAL;
    if (!measured) {
        latency_t l;
        measure(&l);
        lat = l;
        measured = 1;
    }
    uint8_t buf[16384]; /* a longer snippet is refused (QP_ENOMEM) */
    int len = arch_snip_emit(nodes, n, root, ctx, addr, buf, sizeof(buf)), rc = len;
    double c = 0;
    for (int k = 0; rc >= 0 && k < len;) {
        arch_insn_t in;
        if ((rc = arch_decode(buf + k, (size_t)(len - k), addr + (uint64_t)k, &in)) < 0)
            break;
        const uint8_t *b = buf + k;
        int gettid = k >= 5 && memcmp(b - 5, "\xb8\xba\x00\x00\x00", 5) == 0;
        c += 0.1;
        if (b[0] == 0xf0 && !(b[1] == 0x0f && b[2] == 0xb1) && !(b[2] == 0x0f && b[3] == 0xb1))
            c += lat.lock; /* not cmpxchg: a thread's slot taken, once a thread */
        else if (b[0] == 0x9d)
            c += lat.popf;
        else if (b[0] == 0x0f && b[1] == 0x31)
            c += lat.rdtsc;
        else if (b[0] == 0x0f && b[1] == 0x05 && !gettid)
            c += lat.syscall; /* (gettid: kept once a thread by the CPU timers) */
        else if (in.kind == ARCH_KIND_CALL || in.kind == ARCH_KIND_CALL_IND)
            c += 5;
        k += in.len;
    }
    if (rc < 0)
        return rc;
    *cycles = c;
    return 0;
}
