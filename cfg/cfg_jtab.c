/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Jump-table recognition. The instructions leading to an indirect jump are evaluated
 * symbolically, oldest first, over a tiny expression language: every register and every
 * tracked stack slot holds a node (a constant, an opaque value, a load from memory, a sum
 * or a scaled value). Opaque values are numbered, so two locations that hold the same
 * node hold the same run-time value; that is how the guarding compare is tied to the
 * table index even when the index travels through copies and stack slots (-O0). The
 * jump's target must then have one of the two shapes compilers emit:
 *
 *   absolute:  LOAD8(T + i * 8)
 *   relative:  B + SEXT(LOAD4(T + i * 4))
 *
 * The table is bounded by an unsigned compare of i (cmp or sub) followed by ja/jae (the
 * path falls through) or jbe/jb (the path takes the branch); every entry must then land
 * on code inside the procedure or nothing is accepted. Without a compare, an index that
 * is a zero-extended byte or halfword bounds the table when all its entries land; else
 * the entries are scanned while they land, a table of relative entries up to a word that
 * a dynamic relocation writes (bounded = 0: a guess; cfg_scanend.c stops it where the
 * procedure's next table starts).
 */
#include <stddef.h>

#include "base/qp_search.h"
#include "cfg/cfg_priv.h"

/* x86-64 numbering of the registers the stack-slot tracking needs (arch/arch.h). */
#ifndef ARCH_REG_SP
#define JT_REG_SP 5
#else
#define JT_REG_SP ARCH_REG_SP
#endif
#ifndef ARCH_REG_FP
#define JT_REG_FP 6
#else
#define JT_REG_FP ARCH_REG_FP
#endif

#define JT_MAX_INSNS 64    /* instructions evaluated before the jump, at most */
#define JT_MAX_NODES 1024  /* expression nodes per recognition */
#define JT_MAX_SLOTS 32    /* stack slots tracked */
#define JT_MAX_CMPS 16     /* compares remembered */
#define JT_MAX_TERMS 4     /* terms of a flattened sum */
#define JT_MAX_BOUND 65536 /* larger tables are absurd */
#define JT_MAX_SCAN 4096   /* entries read when no bound is known */

/*****************************************************************************
 * Expressions
 */

enum {
    JT_CONST = 0, /* v */
    JT_LEAF,      /* an unknown value, equal only to itself */
    JT_LOAD,      /* size bytes at address a, sign- or zero-extended */
    JT_ADD,       /* a + b */
    JT_MUL,       /* a * v */
    JT_ZEXT,      /* the low size bytes of a, zero-extended */
};

typedef struct jt_node {
    uint8_t kind; /* JT_* */
    uint8_t size; /* JT_LOAD, JT_ZEXT: width in bytes */
    uint8_t sign; /* JT_LOAD: sign-extended */
    uint32_t a;   /* JT_LOAD: address; JT_ADD, JT_MUL, JT_ZEXT: operand */
    uint32_t b;   /* JT_ADD: second operand; JT_LOAD: memory epoch of the read */
    int64_t v;    /* JT_CONST: value; JT_MUL: factor */
} jt_node_t;

typedef struct jt_slot {
    uint32_t base; /* node of the frame or stack pointer the slot is addressed from */
    int64_t disp;  /* offset from it */
    uint8_t size;  /* width of the value stored */
    uint32_t val;  /* node stored there */
    uint32_t age;  /* insertion stamp, for eviction */
} jt_slot_t;

typedef struct jt_cmp {
    size_t pos;   /* window position of the compare */
    uint32_t val; /* node compared */
    uint8_t size; /* width of the compare in bytes */
    uint64_t imm; /* compared against, as an unsigned value of the compare's width */
} jt_cmp_t;

typedef struct jt_state {
    jt_node_t nodes[JT_MAX_NODES]; /* expression pool */
    uint32_t nnodes;               /* nodes in use */
    int overflow;                  /* the pool ran out: give up */
    uint32_t reg[ARCH_NREGS];      /* node held by each register */
    jt_slot_t slots[JT_MAX_SLOTS]; /* stack slots with a known content */
    size_t nslots;                 /* slots in use */
    uint32_t stamp;                /* slot insertion counter */
    uint32_t epoch;                /* bumped by every write to non-stack memory */
    jt_cmp_t cmps[JT_MAX_CMPS];    /* compares against constants, oldest first */
    size_t ncmps;                  /* compares in use */
} jt_state_t;

static uint32_t
jt_new(jt_state_t *st, jt_node_t n)
{
    if (st->nnodes >= JT_MAX_NODES) {
        st->overflow = 1;
        return 0; /* node 0 is a leaf: harmless until the caller gives up */
    }
    st->nodes[st->nnodes] = n;
    return st->nnodes++;
}

static uint32_t
jt_leaf(jt_state_t *st)
{
    return jt_new(st, (jt_node_t) { .kind = JT_LEAF });
}

static uint32_t
jt_const(jt_state_t *st, int64_t v)
{
    return jt_new(st, (jt_node_t) { .kind = JT_CONST, .v = v });
}

static int
jt_is_const(const jt_state_t *st, uint32_t n)
{
    return st->nodes[n].kind == JT_CONST;
}

static uint32_t
jt_add(jt_state_t *st, uint32_t a, uint32_t b)
{
    if (jt_is_const(st, a) && jt_is_const(st, b))
        return jt_const(
            st, (int64_t)((uint64_t)st->nodes[a].v + (uint64_t)st->nodes[b].v));
    if (jt_is_const(st, a) && st->nodes[a].v == 0)
        return b;
    if (jt_is_const(st, b) && st->nodes[b].v == 0)
        return a;
    return jt_new(st, (jt_node_t) { .kind = JT_ADD, .a = a, .b = b });
}

static uint32_t
jt_mul(jt_state_t *st, uint32_t a, int64_t k)
{
    if (jt_is_const(st, a))
        return jt_const(st, (int64_t)((uint64_t)st->nodes[a].v * (uint64_t)k));
    if (k == 1)
        return a;
    return jt_new(st, (jt_node_t) { .kind = JT_MUL, .a = a, .v = k });
}

static uint32_t
jt_load_at(jt_state_t *st, uint32_t addr, uint8_t size, int sign, uint32_t epoch)
{
    return jt_new(st,
        (jt_node_t) { .kind = JT_LOAD,
            .a = addr,
            .b = epoch,
            .size = size,
            .sign = (uint8_t)(sign != 0) });
}

static uint32_t
jt_load(jt_state_t *st, uint32_t addr, uint8_t size, int sign)
{
    return jt_load_at(st, addr, size, sign, st->epoch);
}

static uint32_t
jt_zext(jt_state_t *st, uint32_t a, uint8_t size)
{
    return jt_new(st, (jt_node_t) { .kind = JT_ZEXT, .a = a, .size = size });
}

/*
 * The value N after keeping its low FROM bytes and extending them (SIGN or zero) to 64
 * bits. Constants, loads (little-endian: the low bytes are a narrower load from the same
 * address) and zero-extensions are exact. Sign-extending the low half of an opaque value
 * keeps the value's identity: `cmp $N,%edi; ja; movslq %edi,%rdi` indexes with what was
 * compared, as far as the unsigned bound goes. Anything else becomes a fresh opaque
 * value.
 */
static uint32_t
jt_extend(jt_state_t *st, uint32_t n, uint8_t from, int sign)
{
    const jt_node_t *x = &st->nodes[n];

    if (from >= 8)
        return n;
    switch (x->kind) {
    case JT_CONST: {
        uint64_t v = (uint64_t)x->v;
        unsigned bits = from * 8u;
        uint64_t mask = (1ull << bits) - 1;
        v &= mask;
        if (sign && (v >> (bits - 1)) & 1)
            v |= ~mask;
        return jt_const(st, (int64_t)v);
    }
    case JT_LOAD:
        if (x->size < from)
            /* Already extended from fewer bytes: zero stays zero, sign stays sign. */
            return !x->sign || sign ? n : jt_leaf(st);
        if (x->size == from && x->sign == (sign != 0))
            return n;
        return jt_load_at(st, x->a, from, sign, x->b);
    case JT_ZEXT:
        if (x->size < from || (x->size == from && !sign))
            return n;
        if (!sign)
            return jt_zext(st, x->a, from);
        return from == 4 ? n : jt_leaf(st);
    case JT_LEAF:
        if (!sign)
            return jt_zext(st, n, from);
        return from == 4 ? n : jt_leaf(st);
    default: return sign ? jt_leaf(st) : jt_zext(st, n, from);
    }
}

/* True when nodes A and B certainly hold the same value. */
static int
jt_same(const jt_state_t *st, uint32_t a, uint32_t b, int depth)
{
    const jt_node_t *x = &st->nodes[a], *y = &st->nodes[b];

    if (a == b)
        return 1;
    if (x->kind != y->kind || depth > 8)
        return 0;
    switch (x->kind) {
    case JT_CONST: return x->v == y->v;
    case JT_LOAD:
        return x->size == y->size && x->sign == y->sign && x->b == y->b
            && jt_same(st, x->a, y->a, depth + 1);
    case JT_ADD:
        return (jt_same(st, x->a, y->a, depth + 1) && jt_same(st, x->b, y->b, depth + 1))
            || (jt_same(st, x->a, y->b, depth + 1) && jt_same(st, x->b, y->a, depth + 1));
    case JT_MUL: return x->v == y->v && jt_same(st, x->a, y->a, depth + 1);
    case JT_ZEXT: return x->size == y->size && jt_same(st, x->a, y->a, depth + 1);
    default: return 0;
    }
}

/*****************************************************************************
 * Registers and stack slots
 */

static uint32_t
jt_reg(jt_state_t *st, uint8_t r)
{
    if (r == ARCH_REG_NONE || r >= ARCH_NREGS)
        return jt_leaf(st);
    return st->reg[r];
}

static void
jt_set_reg(jt_state_t *st, uint8_t r, uint32_t n)
{
    if (r != ARCH_REG_NONE && r < ARCH_NREGS)
        st->reg[r] = n;
}

static void
jt_clobber_all(jt_state_t *st)
{
    for (int r = 1; r < ARCH_NREGS; r++)
        st->reg[r] = jt_leaf(st);
    st->nslots = 0;
    st->epoch++;
}

/* True when the memory operand M names a stack slot: frame or stack pointer plus disp. */
static int
jt_is_slot(const arch_opnd_t *m)
{
    return m->kind == ARCH_OPND_MEM && m->seg == 0 && m->index == ARCH_REG_NONE
        && (m->base == JT_REG_SP || m->base == JT_REG_FP);
}

/* True when M is addressed from the frame or stack pointer. */
static int
jt_is_stack(const arch_opnd_t *m)
{
    return m->kind == ARCH_OPND_MEM && m->seg == 0
        && (m->base == JT_REG_SP || m->base == JT_REG_FP || m->index == JT_REG_SP
            || m->index == JT_REG_FP);
}

static void
jt_slot_remove(jt_state_t *st, size_t i)
{
    st->slots[i] = st->slots[--st->nslots];
}

/*
 * Drop what is known about the bytes of stack slot M: slots addressed from the same
 * pointer when they overlap, and every slot addressed from another pointer (frame vs
 * stack pointer), which may alias anything.
 */
static void
jt_slot_forget(jt_state_t *st, const arch_opnd_t *m)
{
    uint32_t base = st->reg[m->base];
    int64_t lo = m->disp, hi = m->disp + (m->size ? m->size : 8);

    for (size_t i = st->nslots; i-- > 0;) {
        const jt_slot_t *s = &st->slots[i];
        if (s->base != base || (s->disp < hi && lo < s->disp + s->size))
            jt_slot_remove(st, i);
    }
}

/*
 * A write of unknown content through M. A write to a stack slot forgets what overlaps it
 * (see jt_slot_forget); any other write may reach the stack through a copied pointer and
 * forgets every slot. Any write but a spill to the stack pointer's frame starts a new
 * memory epoch: loads before and after it are not known to read the same value.
 */
static void
jt_slot_kill(jt_state_t *st, const arch_opnd_t *m)
{
    if (!jt_is_slot(m) || m->base != JT_REG_SP)
        st->epoch++;
    if (jt_is_slot(m))
        jt_slot_forget(st, m);
    else
        st->nslots = 0;
}

/* Remember that slot M holds VAL (what overlaps it was forgotten by the caller). */
static void
jt_slot_insert(jt_state_t *st, const arch_opnd_t *m, uint32_t val)
{
    if (st->nslots == JT_MAX_SLOTS) {
        size_t old = 0;
        for (size_t i = 1; i < st->nslots; i++)
            if (st->slots[i].age < st->slots[old].age)
                old = i;
        jt_slot_remove(st, old);
    }
    st->slots[st->nslots++] = (jt_slot_t) {
        .base = st->reg[m->base],
        .disp = m->disp,
        .size = m->size ? m->size : 8,
        .val = val,
        .age = st->stamp++,
    };
}

/* A store of VAL to memory operand M. */
static void
jt_store(jt_state_t *st, const arch_opnd_t *m, uint32_t val)
{
    jt_slot_kill(st, m);
    if (jt_is_slot(m))
        jt_slot_insert(st, m, val);
}

/* The address M computes, or the constant address of a rip-relative operand. */
static uint32_t
jt_addr(jt_state_t *st, const arch_opnd_t *m)
{
    if (m->base == ARCH_REG_PC)
        return jt_const(st, m->disp);
    uint32_t n = jt_const(st, m->disp);
    if (m->base != ARCH_REG_NONE)
        n = jt_add(st, jt_reg(st, m->base), n);
    if (m->index != ARCH_REG_NONE)
        n = jt_add(st, n, jt_mul(st, jt_reg(st, m->index), m->scale ? m->scale : 1));
    return n;
}

/*
 * The value read from memory operand M, SIZE bytes extended by SIGN. A stack slot yields
 * what was stored there, or a fresh opaque value that later reads will share.
 */
static uint32_t
jt_read_mem(jt_state_t *st, const arch_opnd_t *m, uint8_t size, int sign)
{
    if (m->seg != 0)
        return jt_leaf(st);
    if (jt_is_slot(m)) {
        uint32_t base = st->reg[m->base];
        for (size_t i = 0; i < st->nslots; i++) {
            const jt_slot_t *s = &st->slots[i];
            /* Little-endian: a narrower read at the same offset reads the low bytes. */
            if (s->base == base && s->disp == m->disp && size <= s->size)
                return jt_extend(st, s->val, size, sign);
        }
        /* Name the unknown content, so that later reads share it. */
        for (size_t i = st->nslots; i-- > 0;)
            if (st->slots[i].base == base && st->slots[i].disp == m->disp)
                jt_slot_remove(st, i);
        uint32_t v = jt_leaf(st);
        arch_opnd_t w = *m;
        w.size = size;
        jt_slot_insert(st, &w, v);
        return v;
    }
    return jt_load(st, jt_addr(st, m), size, sign);
}

/* The value of operand O (memory is read zero-extended). */
static uint32_t
jt_value(jt_state_t *st, const arch_opnd_t *o)
{
    switch (o->kind) {
    case ARCH_OPND_REG: return jt_reg(st, o->reg);
    case ARCH_OPND_IMM: return jt_const(st, o->imm);
    case ARCH_OPND_MEM: return jt_read_mem(st, o, o->size, 0);
    default: return jt_leaf(st);
    }
}

/*****************************************************************************
 * Evaluation of one instruction
 */

static void
jt_note_cmp(jt_state_t *st, size_t pos, uint32_t val, uint32_t rhs, uint8_t size)
{
    if (!jt_is_const(st, rhs) || jt_is_const(st, val) || size == 0)
        return;
    uint64_t imm = (uint64_t)st->nodes[rhs].v;
    if (size < 8)
        imm &= (1ull << (size * 8)) - 1;
    if (st->ncmps == JT_MAX_CMPS) {
        memmove(&st->cmps[0], &st->cmps[1], (JT_MAX_CMPS - 1) * sizeof(st->cmps[0]));
        st->ncmps--;
    }
    st->cmps[st->ncmps++]
        = (jt_cmp_t) { .pos = pos, .val = val, .size = size, .imm = imm };
}

/* The new value of a register destination of size SIZE for an arithmetic result N. */
static uint32_t
jt_result(jt_state_t *st, uint32_t n, uint8_t size)
{
    if (size == 8)
        return n;
    if (size == 4 && jt_is_const(st, n))
        return jt_extend(st, n, 4, 0);
    return jt_leaf(st);
}

static void
jt_step(jt_state_t *st, const arch_insn_t *in, const arch_ops_t *o, size_t pos)
{
    const arch_opnd_t *d = &o->dst, *s = &o->src;
    uint32_t written = o->regs_written;
    uint8_t dreg = d->kind == ARCH_OPND_REG ? d->reg : ARCH_REG_NONE;
    uint32_t v = 0;
    int set = 0; /* v is the new value of dreg */

    if (in->kind == ARCH_KIND_CALL || in->kind == ARCH_KIND_CALL_IND
        || in->kind == ARCH_KIND_SYSCALL || o->op == ARCH_OP_CALL) {
        jt_clobber_all(st);
        return;
    }
    switch (o->op) {
    case ARCH_OP_MOV:
    case ARCH_OP_MOVSX:
    case ARCH_OP_MOVZX: {
        int sign = o->op == ARCH_OP_MOVSX;
        if (d->kind == ARCH_OPND_MEM) {
            /* A store: only the stack slots care. */
            if (o->op == ARCH_OP_MOV && s->kind != ARCH_OPND_MEM) {
                uint32_t x = jt_value(st, s);
                if (s->kind == ARCH_OPND_REG && d->size < 8)
                    x = jt_extend(st, x, d->size, 0);
                jt_store(st, d, x);
            } else {
                jt_slot_kill(st, d);
            }
            break;
        }
        if (dreg == ARCH_REG_NONE)
            break;
        if (d->size < 4) {
            v = jt_leaf(st); /* a partial write merges with the old value */
        } else if (s->kind == ARCH_OPND_MEM) {
            v = jt_read_mem(st, s, s->size, sign);
            if (d->size == 4 && sign && s->size < 4)
                v = jt_leaf(st); /* sign-extended to 32 bits, then zero-extended */
        } else if (s->kind == ARCH_OPND_REG) {
            v = jt_reg(st, s->reg);
            if (o->op == ARCH_OP_MOV)
                v = jt_extend(st, v, d->size, 0);
            else if (d->size == 8 || !sign)
                v = jt_extend(st, v, s->size, sign);
            else
                v = jt_leaf(st);
        } else if (s->kind == ARCH_OPND_IMM) {
            v = jt_extend(st, jt_const(st, s->imm), d->size, 0);
        } else {
            v = jt_leaf(st);
        }
        set = 1;
        break;
    }
    case ARCH_OP_LEA:
        if (dreg == ARCH_REG_NONE || s->kind != ARCH_OPND_MEM)
            break;
        v = jt_result(st, jt_addr(st, s), d->size);
        set = 1;
        break;
    case ARCH_OP_ADD:
    case ARCH_OP_SUB:
        if (o->op == ARCH_OP_SUB) {
            /* sub sets the flags exactly as cmp does (clang -O0 bounds with it). */
            uint32_t lhs = d->kind == ARCH_OPND_MEM ? jt_read_mem(st, d, d->size, 0)
                                                    : jt_reg(st, dreg);
            if (s->kind != ARCH_OPND_MEM)
                jt_note_cmp(st, pos, lhs, jt_value(st, s), d->size);
        }
        if (d->kind == ARCH_OPND_MEM) {
            jt_slot_kill(st, d);
            break;
        }
        if (dreg == ARCH_REG_NONE)
            break;
        set = 1;
        if (o->op == ARCH_OP_SUB && s->kind == ARCH_OPND_REG && s->reg == dreg) {
            v = jt_const(st, 0);
            break;
        }
        v = jt_value(st, s);
        if (o->op == ARCH_OP_SUB) {
            if (!jt_is_const(st, v)) {
                v = jt_leaf(st);
                break;
            }
            v = jt_const(st, (int64_t)(0 - (uint64_t)st->nodes[v].v));
        }
        v = jt_result(st, jt_add(st, jt_reg(st, dreg), v), d->size);
        break;
    case ARCH_OP_SHL:
        if (d->kind == ARCH_OPND_MEM) {
            jt_slot_kill(st, d);
            break;
        }
        if (dreg == ARCH_REG_NONE)
            break;
        if (s->kind == ARCH_OPND_IMM && s->imm >= 0 && s->imm < 32)
            v = jt_result(
                st, jt_mul(st, jt_reg(st, dreg), (int64_t)1 << s->imm), d->size);
        else
            v = jt_leaf(st);
        set = 1;
        break;
    case ARCH_OP_XOR:
    case ARCH_OP_AND:
        if (d->kind == ARCH_OPND_MEM) {
            jt_slot_kill(st, d);
            break;
        }
        if (dreg == ARCH_REG_NONE)
            break;
        if (o->op == ARCH_OP_XOR && s->kind == ARCH_OPND_REG && s->reg == dreg
            && d->size >= 4)
            v = jt_const(st, 0);
        else
            v = jt_leaf(st);
        set = 1;
        break;
    case ARCH_OP_CMP:
        if (d->kind == ARCH_OPND_REG || d->kind == ARCH_OPND_MEM)
            jt_note_cmp(st, pos, jt_value(st, d), jt_value(st, s), d->size);
        break;
    case ARCH_OP_TEST:
    case ARCH_OP_JMP:
    case ARCH_OP_JCC: break;
    default:
        /* ARCH_OP_OTHER: the destination and every register written are unknown. */
        if (d->kind == ARCH_OPND_MEM)
            jt_slot_kill(st, d);
        else if (in->flags & ARCH_F_READS_SP)
            st->nslots = 0; /* push, pop, enter, leave: writes the stack */
        if (in->kind != ARCH_KIND_NOP && in->kind != ARCH_KIND_ENDBR
            && d->kind == ARCH_OPND_NONE && written == 0)
            written = ~0u; /* no idea what it writes */
        break;
    }
    if (set) {
        jt_set_reg(st, dreg, v);
        if (dreg < 32)
            written &= ~(1u << dreg);
    }
    /* Everything else the instruction writes, implicit registers included. */
    for (int r = 1; r < ARCH_NREGS; r++)
        if (written & (1u << r))
            st->reg[r] = jt_leaf(st);
}

/*****************************************************************************
 * Shapes of the target
 */

/* A flattened sum: c + sum(coef[k] * node[k]). */
typedef struct jt_lin {
    int64_t c;                   /* the constant part */
    int nt;                      /* number of terms, -1 when too many */
    uint32_t node[JT_MAX_TERMS]; /* the terms' nodes */
    int64_t coef[JT_MAX_TERMS];  /* their factors */
} jt_lin_t;

static void
jt_lin_term(jt_lin_t *l, uint32_t n, int64_t k)
{
    if (l->nt < 0)
        return;
    for (int i = 0; i < l->nt; i++)
        if (l->node[i] == n) {
            l->coef[i] += k;
            return;
        }
    if (l->nt == JT_MAX_TERMS) {
        l->nt = -1;
        return;
    }
    l->node[l->nt] = n;
    l->coef[l->nt++] = k;
}

static void
jt_flatten(const jt_state_t *st, uint32_t n, int64_t k, jt_lin_t *l, int depth)
{
    const jt_node_t *x = &st->nodes[n];

    if (depth > 16) {
        l->nt = -1;
        return;
    }
    switch (x->kind) {
    case JT_CONST: l->c = (int64_t)((uint64_t)l->c + (uint64_t)x->v * (uint64_t)k); break;
    case JT_ADD:
        jt_flatten(st, x->a, k, l, depth + 1);
        jt_flatten(st, x->b, k, l, depth + 1);
        break;
    case JT_MUL:
        /* The index itself stays opaque: the compare refers to it as a whole. */
        jt_lin_term(l, x->a, (int64_t)((uint64_t)x->v * (uint64_t)k));
        break;
    default: jt_lin_term(l, n, k); break;
    }
}

/* Drop terms whose coefficient came to zero. */
static void
jt_lin_norm(jt_lin_t *l)
{
    int j = 0;
    for (int i = 0; i < l->nt; i++)
        if (l->coef[i] != 0) {
            l->node[j] = l->node[i];
            l->coef[j++] = l->coef[i];
        }
    if (l->nt >= 0)
        l->nt = j;
}

/*
 * Match the target node against the table shapes. On success fills T's addr, base,
 * entry_size and relative and returns the index node through *INDEX.
 */
static int
jt_shape(const jt_state_t *st, uint32_t target, cfg_table_t *t, uint32_t *index)
{
    jt_lin_t l = { 0 }, a = { 0 };
    const jt_node_t *ld;

    jt_flatten(st, target, 1, &l, 0);
    jt_lin_norm(&l);
    if (l.nt != 1 || l.coef[0] != 1)
        return 0;
    ld = &st->nodes[l.node[0]];
    if (ld->kind != JT_LOAD)
        return 0;
    if (ld->size == 8 && l.c == 0) {
        t->relative = 0;
        t->base = 0;
    } else if (ld->size == 4 && ld->sign) {
        t->relative = 1;
        t->base = (uint64_t)l.c;
    } else {
        return 0;
    }
    t->entry_size = ld->size;
    jt_flatten(st, ld->a, 1, &a, 0);
    jt_lin_norm(&a);
    if (a.nt != 1 || a.coef[0] != ld->size || st->nodes[a.node[0]].kind == JT_CONST)
        return 0;
    t->addr = (uint64_t)a.c;
    *index = a.node[0];
    return 1;
}

/*
 * True when compare CM bounds INDEX: both are the same value, up to zero-extensions of
 * either. A zero-extension narrower than the compare (cmp $9,%dl; ja; movzbl %dl,%edx) or
 * a compare of the full value is exact. The rest trusts the compiler: it emits
 * `cmp $9,%edi; ja; jmp *T(,%rdi,8)` or `cmp $9,%di; ja; mov %edi,%ecx; jmp *T(,%rcx,8)`
 * only when it knows the bits above the compare are clear (clang relies on callers
 * extending narrow arguments). Every entry is still checked to land on the procedure's
 * code.
 */
static int
jt_compares(const jt_state_t *st, const jt_cmp_t *cm, uint32_t index)
{
    uint32_t a = cm->val, b = index;

    if (st->nodes[a].kind == JT_ZEXT)
        a = st->nodes[a].a;
    if (st->nodes[b].kind == JT_ZEXT)
        b = st->nodes[b].a;
    return jt_same(st, a, b, 0);
}

/* True when ADDR is a window position after J: the out-of-range path comes back. */
static int
jt_rejoins(const cfg_insn_window_t *w, size_t j, uint64_t addr)
{
    for (size_t k = j + 1; k < w->n; k++)
        if (w->insns[k].addr == addr)
            return 1;
    return 0;
}

/*
 * The number of entries proven by a compare of INDEX followed by an unsigned
 * conditional jump that keeps the path to the table only for in-range values (the
 * smallest such bound), or 0.
 */
static uint64_t
jt_bound(const jt_state_t *st, const cfg_insn_window_t *w, const arch_ops_t *ops,
    size_t first, uint32_t index)
{
    uint64_t best = 0;

    for (size_t c = 0; c < st->ncmps; c++) {
        const jt_cmp_t *cm = &st->cmps[c];
        if (!jt_compares(st, cm, index))
            continue;
        for (size_t j = cm->pos + 1; j + 1 < w->n; j++) {
            const arch_insn_t *in = &w->insns[j];
            const arch_ops_t *o = &ops[j - first];
            if (in->kind == ARCH_KIND_JCC) {
                /* The path must go on with in-range values only, and the other
                 * (out-of-range) destination must not come back into the window. */
                uint64_t fall = in->addr + in->len, next = w->insns[j + 1].addr;
                uint64_t n = 0, out = 0;
                if (in->target == fall)
                    break;
                if ((o->cond == ARCH_COND_A || o->cond == ARCH_COND_AE) && next == fall) {
                    n = o->cond == ARCH_COND_A ? cm->imm + 1 : cm->imm;
                    out = in->target;
                } else if ((o->cond == ARCH_COND_BE || o->cond == ARCH_COND_B)
                    && next == in->target) {
                    n = o->cond == ARCH_COND_BE ? cm->imm + 1 : cm->imm;
                    out = fall;
                }
                if (n > 0 && !jt_rejoins(w, j, out) && (best == 0 || n < best))
                    best = n;
                break;
            }
            /* Only instructions that certainly leave the flags alone may intervene. */
            if (in->kind == ARCH_KIND_NOP || in->kind == ARCH_KIND_ENDBR)
                continue;
            if ((o->op == ARCH_OP_MOV || o->op == ARCH_OP_MOVSX || o->op == ARCH_OP_MOVZX
                    || o->op == ARCH_OP_LEA)
                && in->kind == ARCH_KIND_SEQ
                && (in->flags_written & ARCH_FLAGS_STATUS) == 0)
                continue;
            break;
        }
    }
    return best;
}

/*
 * The number of values INDEX can take when it is a zero-extended byte or halfword
 * (movzbl (%rsi),%eax; jmp *T(,%rax,8): an interpreter's computed goto), else 0.
 */
static uint64_t
jt_range(const jt_state_t *st, uint32_t index)
{
    const jt_node_t *x = &st->nodes[index];

    if ((x->kind == JT_ZEXT || (x->kind == JT_LOAD && !x->sign)) && x->size <= 2)
        return 1ull << (8 * x->size);
    return 0;
}

/*****************************************************************************
 * Entries
 */

static int
jt_read(const cfg_image_t *img, uint64_t addr, size_t n, uint64_t *out)
{
    size_t avail;
    const uint8_t *p = cfg_image_ptr(img, addr, &avail);
    uint64_t v = 0;

    if (p == NULL || avail < n)
        return 0;
    for (size_t i = n; i-- > 0;)
        v = (v << 8) | p[i];
    *out = v;
    return 1;
}

/* The value of a RELATIVE dynamic relocation at WHERE, or 0. */
static uint64_t
jt_reloc_at(const cfg_image_t *img, uint64_t where)
{
    const cfg_reloc_t *r = cfg_image_reloc_at(img, where);
    for (; r != NULL && r < img->relocs + img->nrelocs && r->where == where; r++)
        if (r->kind == CFG_RELOC_RELATIVE)
            return r->value;
    return 0;
}

uint64_t
cfg_jtab_entry(const cfg_image_t *img, const cfg_table_t *t, uint32_t i)
{
    uint64_t v;

    if (img == NULL || t == NULL || i >= t->nentries
        || (t->entry_size != 4 && t->entry_size != 8
            && !(t->relative && (t->entry_size == 1 || t->entry_size == 2))))
        return 0;
    uint64_t at = t->addr + (uint64_t)i * t->entry_size;
    if (!jt_read(img, at, t->entry_size, &v))
        return 0;
    if (t->relative) {
        /* base + (entry << shift): x86-64's are signed 4-byte offsets, AArch64's 1, 2
         * or 4 bytes, signed or not (zext), counting words (shift 2). */
        if (t->entry_size < 8 && !t->zext) {
            unsigned bits = 8u * t->entry_size;
            uint64_t m = 1ull << (bits - 1);
            v = (v ^ m) - m;
        }
        return t->base + (v << t->shift);
    }
    if (t->entry_size == 4)
        return v;
    if (v == 0)
        v = jt_reloc_at(img, at);
    return v;
}

static int
jt_good_target(const cfg_image_t *img, uint64_t a, uint64_t lo, uint64_t hi)
{
    return a >= lo && a < hi && cfg_image_is_code(img, a);
}

/*****************************************************************************
 * Recognition
 */

/* What one window instruction may write, for joins inside the window. */
typedef struct jt_pos {
    uint32_t wregs; /* registers it may write */
    uint8_t wmem;   /* it may write memory */
    uint8_t bad;    /* its operands could not be decoded */
} jt_pos_t;

static void
jt_pos_init(const arch_insn_t *in, const arch_ops_t *o, jt_pos_t *ps)
{
    int call = in->kind == ARCH_KIND_CALL || in->kind == ARCH_KIND_CALL_IND
        || in->kind == ARCH_KIND_SYSCALL || o->op == ARCH_OP_CALL;
    int unknown = o->op == ARCH_OP_OTHER && o->dst.kind == ARCH_OPND_NONE
        && o->regs_written == 0 && in->kind != ARCH_KIND_NOP
        && in->kind != ARCH_KIND_ENDBR;

    if (ps->bad || call || unknown) {
        ps->wregs = ~0u;
        ps->wmem = 1;
        return;
    }
    ps->wregs = o->regs_written;
    if (o->dst.kind == ARCH_OPND_REG && o->dst.reg < 32)
        ps->wregs |= 1u << o->dst.reg;
    ps->wmem
        = (o->dst.kind == ARCH_OPND_MEM && o->op != ARCH_OP_CMP && o->op != ARCH_OP_TEST)
        || (o->op == ARCH_OP_OTHER && (in->flags & ARCH_F_READS_SP));
}

/*
 * Decode the operands of window positions FIRST.. into OPS (OPS[0] for FIRST) and PS.
 * Returns the first position worth evaluating: the window is linear, so what precedes
 * an instruction that does not fall through (ret, jmp) is not on the path to the jump.
 * Returns SIZE_MAX when the jump itself cannot be decoded.
 */
static size_t
jt_decode(const cfg_image_t *img, const cfg_insn_window_t *w, size_t first,
    arch_ops_t *ops, jt_pos_t *ps)
{
    size_t avail, start = first;

    for (size_t i = first; i < w->n; i++) {
        const arch_insn_t *in = &w->insns[i];
        arch_ops_t *o = &ops[i - first];
        jt_pos_t *q = &ps[i - first];
        const uint8_t *p = cfg_image_ptr(img, in->addr, &avail);
        q->bad = p == NULL
            || arch_decode_ops(
                   p, avail < ARCH_MAX_INSN ? avail : ARCH_MAX_INSN, in->addr, o)
                < 0;
        if (q->bad) {
            if (i + 1 == w->n)
                return SIZE_MAX;
            memset(o, 0, sizeof(*o));
        }
        jt_pos_init(in, o, q);
        if (i + 1 < w->n
            && (in->kind == ARCH_KIND_JMP || in->kind == ARCH_KIND_JMP_IND
                || in->kind == ARCH_KIND_RET || in->kind == ARCH_KIND_HALT))
            start = i + 1;
    }
    return start;
}

/*
 * Before position K: account for the conditional jumps of the window that reach K other
 * than by falling through. A jump from J forward to K skips J+1..K-1: what those write is
 * unknown at K, and their compares do not guard K. A jump from J back to K (a loop inside
 * the window) makes what K..J write unknown at K; the evaluation then stands for any
 * iteration.
 */
static void
jt_join(jt_state_t *st, const cfg_insn_window_t *w, size_t first, size_t start,
    const jt_pos_t *ps, size_t k)
{
    for (size_t j = start; j + 1 < w->n; j++) {
        const arch_insn_t *in = &w->insns[j];
        if (in->kind != ARCH_KIND_JCC || in->target != w->insns[k].addr || j + 1 == k)
            continue;
        size_t lo = j < k ? j + 1 : k, hi = j < k ? k - 1 : j;
        uint32_t wregs = 0;
        int wmem = 0;
        for (size_t i = lo; i <= hi; i++) {
            wregs |= ps[i - first].wregs;
            wmem |= ps[i - first].wmem;
        }
        for (int r = 1; r < ARCH_NREGS; r++)
            if (wregs & (1u << r))
                st->reg[r] = jt_leaf(st);
        if (wmem) {
            st->nslots = 0;
            st->epoch++;
        }
        if (j < k) {
            size_t n = 0;
            for (size_t c = 0; c < st->ncmps; c++)
                if (st->cmps[c].pos < lo || st->cmps[c].pos > hi)
                    st->cmps[n++] = st->cmps[c];
            st->ncmps = n;
        }
    }
}

/*
 * Evaluate the window from position START up to (not including) the jump into ST; OPS
 * and PS hold positions FIRST.. (see jt_decode). Returns 0 when the expression pool ran
 * out.
 */
static int
jt_eval(const cfg_insn_window_t *w, size_t first, size_t start, const arch_ops_t *ops,
    const jt_pos_t *ps, jt_state_t *st)
{
    st->nnodes = 0;
    st->overflow = 0;
    st->nslots = 0;
    st->stamp = 0;
    st->epoch = 0;
    st->ncmps = 0;
    jt_leaf(st); /* node 0: a placeholder */
    for (int r = 0; r < ARCH_NREGS; r++)
        st->reg[r] = jt_leaf(st);
    for (size_t i = start; i < w->n; i++) {
        jt_join(st, w, first, start, ps, i);
        if (i + 1 == w->n)
            break;
        if (ps[i - first].bad)
            jt_clobber_all(st);
        else
            jt_step(st, &w->insns[i], &ops[i - first], i);
    }
    return !st->overflow;
}

/* True when entries [0, N) of R all land on code in [LO, HI). */
static int
jt_all_good(
    const cfg_image_t *img, const cfg_table_t *r, uint64_t n, uint64_t lo, uint64_t hi)
{
    for (uint32_t i = 0; i < n; i++)
        if (!jt_good_target(img, cfg_jtab_entry(img, r, i), lo, hi))
            return 0;
    return 1;
}

/*
 * At most MAX entries of SIZE bytes from ADDR, fewer when a dynamic relocation writes a
 * word among them: that word is a pointer (an address taken, another table of 8-byte
 * entries), no offset of a table of relative entries, which end before it.
 */
static uint64_t
jt_before_reloc(const cfg_image_t *img, uint64_t addr, uint8_t size, uint64_t max)
{
    size_t k = qp_lower_bound_u64(img->relocs, img->nrelocs, sizeof(*img->relocs),
                                  offsetof(cfg_reloc_t, where), addr);
    if (k < img->nrelocs && img->relocs[k].where - addr < max * size)
        return (img->relocs[k].where - addr) / size;
    return max;
}

/*
 * Count the entries of R (addr, base, entry_size, relative set): NBOUND when a compare
 * proved it (every entry must land on code in [LO, HI), or the table is rejected), else
 * NRANGE when the index's width limits it and every entry lands, else by scanning.
 * Returns 0 when the table is rejected.
 */
static int
jt_count(const cfg_image_t *img, uint64_t nbound, uint64_t nrange, uint64_t lo,
    uint64_t hi, cfg_table_t *r)
{
    size_t avail;

    if (cfg_image_ptr(img, r->addr, &avail) == NULL || nbound > JT_MAX_BOUND)
        return 0;
    uint64_t max = avail / r->entry_size;
    /* cfg_jtab_entry reads only below nentries: open the readable extent. */
    r->nentries = (uint32_t)(max < JT_MAX_BOUND ? max : JT_MAX_BOUND);
    r->bounded = 1;
    if (nbound > 0) {
        if (max < nbound || !jt_all_good(img, r, nbound, lo, hi))
            return 0;
        r->nentries = (uint32_t)nbound;
        return 1;
    }
    if (nrange > 0 && max >= nrange && jt_all_good(img, r, nrange, lo, hi)) {
        r->nentries = (uint32_t)nrange;
        return 1;
    }
    r->bounded = 0;
    if (r->relative)
        max = jt_before_reloc(img, r->addr, r->entry_size, max);
    uint32_t i = 0;
    while (i < max && i < JT_MAX_SCAN
        && jt_good_target(img, cfg_jtab_entry(img, r, i), lo, hi))
        i++;
    r->nentries = i;
    return i >= 2;
}

int
cfg_jtab_match(const cfg_image_t *img, const cfg_insn_window_t *w, uint64_t lo,
    uint64_t hi, cfg_table_t *t)
{
    jt_state_t st;
    arch_ops_t ops[JT_MAX_INSNS];
    jt_pos_t ps[JT_MAX_INSNS];
    uint32_t index = 0, target;
    cfg_table_t r = { 0 };

    if (img == NULL || w == NULL || t == NULL || w->insns == NULL || w->n == 0
        || lo >= hi)
        return 0;
    const arch_insn_t *jmp = &w->insns[w->n - 1];
    if (jmp->kind != ARCH_KIND_JMP_IND)
        return 0;
    size_t first = w->n > JT_MAX_INSNS ? w->n - JT_MAX_INSNS : 0;
    size_t start = jt_decode(img, w, first, ops, ps);
    if (start == SIZE_MAX || !jt_eval(w, first, start, ops, ps, &st))
        return 0;

    /* The jump's target, matched against the two shapes. */
    const arch_ops_t *jo = &ops[w->n - 1 - first];
    if (jo->op != ARCH_OP_JMP)
        return 0;
    if (jo->src.kind == ARCH_OPND_REG)
        target = jt_reg(&st, jo->src.reg);
    else if (jo->src.kind == ARCH_OPND_MEM && jo->src.seg == 0 && !jt_is_stack(&jo->src))
        target = jt_load(&st, jt_addr(&st, &jo->src), 8, 0);
    else
        return 0;
    if (st.overflow || !jt_shape(&st, target, &r, &index))
        return 0;

    r.jump = jmp->addr;
    if (!jt_count(
            img, jt_bound(&st, w, ops, first, index), jt_range(&st, index), lo, hi, &r))
        return 0;
    *t = r;
    return 1;
}
