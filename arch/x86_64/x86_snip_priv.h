/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * What the parts of the x86-64 snippet compiler share (arch/ only): the generator's
 * state (gen_t), register numbers and condition codes, and the helpers one part
 * calls in another. The parts: x86_snip.c (statements, checking, compiling),
 * x86_snip_gen.c (emitting bytes, labels, temporaries), x86_snip_expr.c (operands
 * and expressions).
 * Each helper is described where it is defined; the helpers are listed by file.
 */
#ifndef QP_X86_SNIP_PRIV_H
#define QP_X86_SNIP_PRIV_H

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "arch/arch.h"

/* Hardware register numbers (ARCH_REG_* is one more). */
enum { RAX, RCX, RDX, RBX, RSP, RBP, RSI, RDI, R8, R9, R10, R11, R12, R13, R14, R15 };

/* Caller-saved registers: a call of the program's code may change them. */
#define CALLER_SAVED                                                                     \
    ((1u << RAX) | (1u << RCX) | (1u << RDX) | (1u << RSI) | (1u << RDI) | (1u << R8)     \
        | (1u << R9) | (1u << R10) | (1u << R11))

/* Bytes reserved for the vector state around a call (XSAVE of x87, SSE, AVX, AVX-512:
 * at most 2,696 bytes), 64-byte aligned. */
#define XSAVE_AREA 3072
#define XSAVE_MASK 0xffu

/* Condition codes (the low nibble of jcc and setcc). */
enum { CC_B = 2, CC_AE = 3, CC_E = 4, CC_NE = 5, CC_BE = 6, CC_A = 7, CC_S = 8, CC_L = 12,
       CC_GE = 13, CC_LE = 14, CC_G = 15 };

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
    size_t cold[4][2];         /* [from, to) of code not run in the common case and of
                                * data (ARCH_SN_ADD_CPU): not in the cost model */
    int ncold;
    struct {
        size_t at;             /* where the rel32 field is */
        int label;
    } fix[MAX_FIXUPS];
    int nfix;
} gen_t;

/* x86_snip.c */
void
snip_store(gen_t *g, const arch_snip_t *s);
void
snip_stmt(gen_t *g, uint32_t i);

/* The argument registers of the SysV ABI, in order (x86_snip.c). */
extern const uint8_t snip_arg_regs[ARCH_SNIP_MAXARGS];

/* x86_snip_gen.c */
void
snip_put(gen_t *g, const void *b, size_t n);
void
snip_put8(gen_t *g, uint8_t b);
void
snip_put16(gen_t *g, uint16_t v);
void
snip_put32(gen_t *g, uint32_t v);
void
snip_fail(gen_t *g, int rc);
void
snip_rex(gen_t *g, int w, int reg, int rm);
void
snip_op_rr(gen_t *g, const uint8_t *opc, size_t nopc, int reg, int rm);
void
snip_op_rip(gen_t *g, int w, const uint8_t *opc, size_t nopc, int reg, uint64_t addr,
    size_t tail);
void
snip_op_rsp(gen_t *g, const uint8_t *opc, size_t nopc, int reg, int32_t disp);
void
snip_op_base(gen_t *g, const uint8_t *opc, size_t nopc, int reg, int base, int32_t disp);
void
snip_op_ind(
    gen_t *g, int w, const uint8_t *opc, size_t nopc, int reg, int base, int index);
void
snip_push_reg(gen_t *g, int r);
void
snip_pop_reg(gen_t *g, int r);
void
snip_mov_rr(gen_t *g, int dst, int src);
void
snip_mov_ri(gen_t *g, int r, int64_t imm);
void
snip_adjust_rsp(gen_t *g, int32_t d);
int
snip_new_label(gen_t *g);
void
snip_jump_to(gen_t *g, int cc, int label);
void
snip_rel32_to(gen_t *g, int label);
void
snip_bind(gen_t *g, int label);
int
snip_pick_temp(gen_t *g);
void
snip_free_temp(gen_t *g, int r);

/* x86_snip_expr.c */
int
snip_fits32(int64_t v);
void
snip_branch(gen_t *g, uint32_t i, int sense, int label);
void
snip_call(gen_t *g, const arch_snip_t *s, int t);
int
snip_thread_slot(gen_t *g, const arch_snip_t *s);
int
snip_eval(gen_t *g, uint32_t i);

#endif
