/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The snippet compiler (see x86_snip.c), its code buffer: emitting bytes and
 * instructions, forward labels (rel32), and the pool of temporaries.
 */
#include "arch/x86_64/x86_snip_priv.h"

/* Temporaries, in the order they are taken (dead ones first, see snip_pick_temp). */
static const uint8_t temp_order[]
    = { R11, R10, R9, R8, RAX, RCX, RDX, RSI, RDI, RBX, R12, R13, R14, R15, RBP };

/*****************************************************************************
 * Emitting bytes
 */

void
snip_put(gen_t *g, const void *b, size_t n)
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

void
snip_put8(gen_t *g, uint8_t b)
{
    snip_put(g, &b, 1);
}

void
snip_put16(gen_t *g, uint16_t v)
{
    uint8_t b[2] = { (uint8_t)v, (uint8_t)(v >> 8) };
    snip_put(g, b, 2);
}

void
snip_put32(gen_t *g, uint32_t v)
{
    uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
    snip_put(g, b, 4);
}

void
snip_fail(gen_t *g, int rc)
{
    if (g->err == 0)
        g->err = rc;
}

/* REX with W, and R/X/B from the high bits of REG and RM. */
void
snip_rex(gen_t *g, int w, int reg, int rm)
{
    snip_put8(
        g, (uint8_t)(0x40 | (w ? 8 : 0) | ((reg & 8) ? 4 : 0) | ((rm & 8) ? 1 : 0)));
}

/* OPC (1 or 2 bytes) with a register-register ModRM: REG, RM. 64-bit. */
void
snip_op_rr(gen_t *g, const uint8_t *opc, size_t nopc, int reg, int rm)
{
    snip_rex(g, 1, reg, rm);
    snip_put(g, opc, nopc);
    snip_put8(g, (uint8_t)(0xc0 | ((reg & 7) << 3) | (rm & 7)));
}

/*
 * OPC with a rip-relative operand at ADDR (REG: the ModRM reg field); TAIL more bytes
 * (an immediate) follow the displacement, which counts from their end. W: REX.W.
 */
void
snip_op_rip(
    gen_t *g, int w, const uint8_t *opc, size_t nopc, int reg, uint64_t addr, size_t tail)
{
    if (w || (reg & 8))
        snip_rex(g, w, reg, 0);
    snip_put(g, opc, nopc);
    snip_put8(g, (uint8_t)(0x05 | ((reg & 7) << 3)));
    int64_t d = (int64_t)(addr - (g->addr + g->len + 4 + tail));
    if (d < INT32_MIN || d > INT32_MAX)
        snip_fail(g, QP_ERANGE);
    snip_put32(g, (uint32_t)d);
}

/* OPC with [rsp + DISP32] (REG: the ModRM reg field). 64-bit. */
void
snip_op_rsp(gen_t *g, const uint8_t *opc, size_t nopc, int reg, int32_t disp)
{
    snip_rex(g, 1, reg, RSP);
    snip_put(g, opc, nopc);
    snip_put8(g, (uint8_t)(0x84 | ((reg & 7) << 3)));
    snip_put8(g, 0x24);
    snip_put32(g, (uint32_t)disp);
}

/* [REG2 + DISP32] with REG (ModRM reg field), 64-bit; REG2 is not rsp or r12. */
void
snip_op_base(gen_t *g, const uint8_t *opc, size_t nopc, int reg, int base, int32_t disp)
{
    snip_rex(g, 1, reg, base);
    snip_put(g, opc, nopc);
    snip_put8(g, (uint8_t)(0x80 | ((reg & 7) << 3) | (base & 7)));
    snip_put32(g, (uint32_t)disp);
}

/*
 * OPC with the operand [BASE + INDEX * 8] ([BASE] when INDEX < 0), REG in the ModRM reg
 * field; a REX prefix always (W: REX.W), so byte registers are sil/dil/r8b....
 */
void
snip_op_ind(
    gen_t *g, int w, const uint8_t *opc, size_t nopc, int reg, int base, int index)
{
    int x = index >= 0 ? index : RSP; /* SIB index 100: none */
    snip_put8(g, (uint8_t)(0x40 | (w ? 8 : 0) | ((reg & 8) ? 4 : 0) | ((x & 8) ? 2 : 0)
                      | ((base & 8) ? 1 : 0)));
    snip_put(g, opc, nopc);
    snip_put8(g, (uint8_t)(0x44 | ((reg & 7) << 3))); /* mod 01 (disp8), SIB */
    snip_put8(g, (uint8_t)((index >= 0 ? 0xc0 : 0) | ((x & 7) << 3) | (base & 7)));
    snip_put8(g, 0);
}

void
snip_push_reg(gen_t *g, int r)
{
    g->sp_off += 8;
    if (r & 8)
        snip_put8(g, 0x41);
    snip_put8(g, (uint8_t)(0x50 | (r & 7)));
}

void
snip_pop_reg(gen_t *g, int r)
{
    g->sp_off -= 8;
    if (r & 8)
        snip_put8(g, 0x41);
    snip_put8(g, (uint8_t)(0x58 | (r & 7)));
}

/* mov DST, SRC */
void
snip_mov_rr(gen_t *g, int dst, int src)
{
    static const uint8_t opc[] = { 0x89 };
    if (dst != src)
        snip_op_rr(g, opc, 1, src, dst);
}

/* mov R, IMM: 32-bit (zero-extended) when it fits unsigned, sign-extended imm32, or 64. */
void
snip_mov_ri(gen_t *g, int r, int64_t imm)
{
    if (imm >= 0 && imm <= (int64_t)UINT32_MAX) {
        if (r & 8)
            snip_put8(g, 0x41);
        snip_put8(g, (uint8_t)(0xb8 | (r & 7)));
        snip_put32(g, (uint32_t)imm);
    } else if (imm >= INT32_MIN && imm <= INT32_MAX) {
        snip_rex(g, 1, 0, r);
        snip_put8(g, 0xc7);
        snip_put8(g, (uint8_t)(0xc0 | (r & 7)));
        snip_put32(g, (uint32_t)imm);
    } else {
        snip_rex(g, 1, 0, r);
        snip_put8(g, (uint8_t)(0xb8 | (r & 7)));
        snip_put32(g, (uint32_t)imm);
        snip_put32(g, (uint32_t)((uint64_t)imm >> 32));
    }
}

/* lea rsp, [rsp + D] (8 bytes, flags kept). */
void
snip_adjust_rsp(gen_t *g, int32_t d)
{
    static const uint8_t opc[] = { 0x8d };
    snip_op_rsp(g, opc, 1, RSP, d);
    g->sp_off -= d;
}

/*****************************************************************************
 * Labels (forward jumps only, rel32)
 */

int
snip_new_label(gen_t *g)
{
    if (g->nlabels == MAX_LABELS) {
        snip_fail(g, QP_ERANGE);
        return 0;
    }
    g->label[g->nlabels] = -1;
    return g->nlabels++;
}

void
snip_jump_to(gen_t *g, int cc, int label)
{
    if (cc < 0)
        snip_put8(g, 0xe9);
    else {
        snip_put8(g, 0x0f);
        snip_put8(g, (uint8_t)(0x80 | cc));
    }
    snip_rel32_to(g, label);
}

/* A rel32 field at the cursor that reaches LABEL (from its own end: the field must
 * end its instruction), filled when LABEL is bound. */
void
snip_rel32_to(gen_t *g, int label)
{
    if (g->label[label] >= 0) { /* bound already: a backward jump */
        snip_put32(g, (uint32_t)(g->label[label] - (int64_t)(g->len + 4)));
        return;
    }
    if (g->nfix == MAX_FIXUPS) {
        snip_fail(g, QP_ERANGE);
        return;
    }
    g->fix[g->nfix].at = g->len;
    g->fix[g->nfix++].label = label;
    snip_put32(g, 0);
}

void
snip_bind(gen_t *g, int label)
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

int
snip_pick_temp(gen_t *g)
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
    snip_fail(g, QP_ERANGE); /* more values at once than registers */
    return R11;
}

void
snip_free_temp(gen_t *g, int r)
{
    g->busy &= ~(1u << r);
}
