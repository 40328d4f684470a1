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
#include "arch/x86_64/x86_snip_priv.h"

/* The argument registers of the SysV ABI, in order. */
const uint8_t snip_arg_regs[ARCH_SNIP_MAXARGS] = { RDI, RSI, RDX, RCX, R8, R9 };

/*****************************************************************************
 * Statements
 */

void
snip_store(gen_t *g, const arch_snip_t *s)
{
    int t = snip_eval(g, s->a);
    static const uint8_t mov8[] = { 0x88 }, mov[] = { 0x89 };
    if (s->size == 2)
        snip_put8(g, 0x66);
    if (s->size == 1) {
        snip_rex(g, 0, t, 0); /* a REX makes sil/dil/r8b... addressable */
        snip_put(g, mov8, 1);
        snip_put8(g, (uint8_t)(0x05 | ((t & 7) << 3)));
        int64_t d = (int64_t)((uint64_t)s->imm - (g->addr + g->len + 4));
        if (!snip_fits32(d))
            snip_fail(g, QP_ERANGE);
        snip_put32(g, (uint32_t)d);
    } else
        snip_op_rip(g, s->size == 8, mov, 1, t, (uint64_t)s->imm, 0);
    snip_free_temp(g, t);
}

/* OPC (W: 64-bit) with REG and the word at %fs:OFF. */
static void
fs_op(gen_t *g, int w, uint8_t opc, int reg, int32_t off)
{
    snip_put8(g, 0x64);
    if (w || (reg & 8))
        snip_rex(g, w, reg, 0);
    snip_put8(g, opc);
    snip_put8(g, (uint8_t)(0x04 | ((reg & 7) << 3)));
    snip_put8(g, 0x25);
    snip_put32(g, (uint32_t)off);
}

static void
add_to(gen_t *g, const arch_snip_t *s)
{
    const arch_snip_t *v = &g->nodes[s->a];
    int lock = (s->flags & ARCH_SNF_ATOMIC) != 0;
    if (v->op == ARCH_SN_CONST && v->imm == 1) {
        static const uint8_t inc[] = { 0xff }; /* [lock] incq m64 */
        if (lock)
            snip_put8(g, 0xf0);
        snip_op_rip(g, 1, inc, 1, 0, (uint64_t)s->imm, 0);
    } else if (v->op == ARCH_SN_CONST && snip_fits32(v->imm)) {
        static const uint8_t add[] = { 0x81 }; /* [lock] addq $imm32, m64 */
        if (lock)
            snip_put8(g, 0xf0);
        snip_op_rip(g, 1, add, 1, 0, (uint64_t)s->imm, 4);
        snip_put32(g, (uint32_t)v->imm);
    } else {
        int t = snip_eval(g, s->a);
        static const uint8_t add[] = { 0x01 }; /* [lock] add m64, r64 */
        if (lock)
            snip_put8(g, 0xf0);
        snip_op_rip(g, 1, add, 1, t, (uint64_t)s->imm, 0);
        snip_free_temp(g, t);
    }
}

/*
 * ARCH_SN_ADD_CPU: the add to this CPU's word as a restartable sequence (the kernel's
 * include/uapi/linux/rseq.h; librseq's rseq_addv). R is the rseq area at %fs:OFF,
 * STRIDE = 8 << K, v the value (a register, or a constant in the instruction), one
 * temporary t:
 *   retry:  lea    desc(%rip),%t
 *           mov    %t,%fs:OFF+8          rseq_cs = desc
 *   start:  mov    %fs:OFF+4,%t32        cpu_id
 *           test   %t32,%t32
 *           js     unreg                 not registered (-1, -2)
 *           shl    $K+3,%t
 *           add    base(%rip),%t         the word of CPU 0's address, kept beside desc
 *           incq   0(%t)                 the commit (or add $imm / add v)
 *   commit: movq   $0,%fs:OFF+8          rseq_cs = 0: nothing points here any more
 *           jmp    done
 *           ud1    0x53053053(%rip),%edi the signature: the 4 bytes before abort
 *   abort:  jmp    retry                 preempted, migrated or signalled in [start,
 *   unreg:  lock incq BASE(%rip)         commit): the kernel cleared rseq_cs and
 *           jmp    commit                came here
 *   desc:   version 0, flags 0, start, commit - start, abort (32 bytes)
 *   base:   BASE (8 bytes)
 *   done:
 * The commit addresses its word through one register, no index: a base + index
 * operand makes a core that forwards a store to the next load of the same word without
 * latency (Intel's since Ice Lake) take the slow path, and back-to-back hits of one
 * counter then wait for each other (+1.5 ns a hit measured on a Sapphire Rapids; the
 * register is the only one the sequence takes, so an entry saves one). Everything
 * after the first jmp done is cold (the cost model skips it); the lengths do not depend
 * on where the code runs.
 */
static void
add_cpu(gen_t *g, const arch_snip_t *s)
{
    const arch_snip_t *v = &g->nodes[s->a];
    int32_t off = (int32_t)g->nodes[s->b].imm;
    uint64_t stride = (uint64_t)g->nodes[s->c].imm;
    int k = 3, imm = v->op == ARCH_SN_CONST && snip_fits32(v->imm);
    while ((1ull << k) < stride)
        k++;
    int val = imm ? -1 : snip_eval(g, s->a);
    int t = snip_pick_temp(g);
    int retry = snip_new_label(g), start = snip_new_label(g), commit = snip_new_label(g);
    int abort_ = snip_new_label(g), unreg = snip_new_label(g), desc = snip_new_label(g);
    int base = snip_new_label(g), done = snip_new_label(g);
    static const uint8_t inc[] = { 0xff }, addi[] = { 0x81 }, addr_[] = { 0x01 };
    static const uint8_t sig[] = { 0x0f, 0xb9, 0x3d, 0x53, 0x30, 0x05, 0x53 };

    snip_bind(g, retry);
    snip_rex(g, 1, t, 0);
    snip_put8(g, 0x8d);
    snip_put8(g, (uint8_t)(0x05 | ((t & 7) << 3)));
    snip_rel32_to(g, desc);
    fs_op(g, 1, 0x89, t, off + 8);
    snip_bind(g, start);
    fs_op(g, 0, 0x8b, t, off + 4);
    if (t & 8)
        snip_put8(g, 0x45);
    snip_put8(g, 0x85);
    snip_put8(g, (uint8_t)(0xc0 | ((t & 7) << 3) | (t & 7)));
    snip_jump_to(g, CC_S, unreg);
    snip_rex(g, 1, 0, t); /* shl $k,%t */
    snip_put8(g, 0xc1);
    snip_put8(g, (uint8_t)(0xe0 | (t & 7)));
    snip_put8(g, (uint8_t)k);
    snip_rex(g, 1, t, 0); /* add base(%rip),%t */
    snip_put8(g, 0x03);
    snip_put8(g, (uint8_t)(0x05 | ((t & 7) << 3)));
    snip_rel32_to(g, base);
    if (imm && v->imm == 1)
        snip_op_ind(g, 1, inc, 1, 0, t, -1);
    else if (imm) {
        snip_op_ind(g, 1, addi, 1, 0, t, -1);
        snip_put32(g, (uint32_t)v->imm);
    } else
        snip_op_ind(g, 1, addr_, 1, val, t, -1);
    snip_bind(g, commit);
    snip_put8(g, 0x64); /* movq $0,%fs:OFF+8 */
    snip_put8(g, 0x48);
    snip_put8(g, 0xc7);
    snip_put8(g, 0x04);
    snip_put8(g, 0x25);
    snip_put32(g, (uint32_t)(off + 8));
    snip_put32(g, 0);
    snip_jump_to(g, -1, done);
    size_t cold = g->len;
    snip_put(g, sig, sizeof(sig));
    snip_bind(g, abort_);
    snip_jump_to(g, -1, retry);
    snip_bind(g, unreg);
    snip_put8(g, 0xf0);
    if (imm && v->imm == 1)
        snip_op_rip(g, 1, inc, 1, 0, (uint64_t)s->imm, 0);
    else if (imm) {
        snip_op_rip(g, 1, addi, 1, 0, (uint64_t)s->imm, 4);
        snip_put32(g, (uint32_t)v->imm);
    } else
        snip_op_rip(g, 1, addr_, 1, val, (uint64_t)s->imm, 0);
    snip_jump_to(g, -1, commit);
    snip_bind(g, desc);
    uint64_t at = g->addr + (uint64_t)g->label[start];
    uint64_t d[5] = { 0, at, (uint64_t)(g->label[commit] - g->label[start]),
        g->addr + (uint64_t)g->label[abort_], (uint64_t)s->imm };
    snip_put(g, d, 32); /* (little-endian: version and flags are the first 0) */
    snip_bind(g, base);
    snip_put(g, &d[4], 8);
    snip_bind(g, done);
    if (g->ncold < 4) {
        g->cold[g->ncold][0] = cold;
        g->cold[g->ncold++][1] = g->len;
    }
    snip_free_temp(g, t);
    if (val >= 0)
        snip_free_temp(g, val);
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
        snip_fail(g, k);
    else
        snip_put(g, buf, (size_t)k);
}

/* OPC REG, DISP8(BASE) (W: 64-bit), REX only when needed; SIB when BASE is %rsp. */
static void
op_disp8(gen_t *g, int w, uint8_t opc, int reg, int base, int8_t disp)
{
    if (w || (reg & 8) || (base & 8))
        snip_rex(g, w, reg, base);
    snip_put8(g, opc);
    snip_put8(g, (uint8_t)(0x40 | ((reg & 7) << 3) | (base & 7)));
    if ((base & 7) == RSP)
        snip_put8(g, 0x24);
    snip_put8(g, (uint8_t)disp);
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
    int retry = snip_new_label(g), ok = snip_new_label(g);
    snip_bind(g, retry);
    if (t & 8)
        snip_put8(g, 0x41);
    snip_put8(g, (uint8_t)(0xb8 | (t & 7))); /* mov $n, %t32 */
    snip_put32(g, (uint32_t)n);
    snip_put8(g, 0x64); /* xadd t, %fs:CUR */
    snip_rex(g, 1, t, 0);
    snip_put8(g, 0x0f);
    snip_put8(g, 0xc1);
    snip_put8(g, (uint8_t)(0x04 | ((t & 7) << 3)));
    snip_put8(g, 0x25);
    snip_put32(g, (uint32_t)ARCH_TRACE_CUR);
    fs_op(g, 1, 0x3b, t, ARCH_TRACE_LIM);
    snip_jump_to(g, CC_B, ok);
    int64_t d = (int64_t)((uint64_t)r->imm - (g->addr + g->len + 5));
    if (!snip_fits32(d))
        snip_fail(g, QP_ERANGE);
    snip_put8(g, 0xe8);
    snip_put32(g, (uint32_t)d);
    snip_jump_to(g, -1, retry);
    snip_bind(g, ok);
}

/* movw $IMM,0(t) (a 2-byte record: W 2) or movl $IMM,0(t). */
static void
trace_store(gen_t *g, int t, int w, uint32_t imm)
{
    if (w == 2)
        snip_put8(g, 0x66);
    op_disp8(g, 0, 0xc7, 0, t, 0);
    if (w == 2)
        snip_put16(g, (uint16_t)imm);
    else
        snip_put32(g, imm);
}

/* ARCH_SN_TRACE_REC: 4 bytes reserved; movl $imm,(t) (size 2: 2 bytes; movw). */
static void
trace_rec(gen_t *g, const arch_snip_t *s)
{
    int t = snip_pick_temp(g), w = s->size == 2 ? 2 : 4;
    trace_reserve(g, &g->nodes[s->a], t, w);
    trace_store(g, t, w, (uint32_t)s->imm);
    snip_free_temp(g, t);
}

/* ARCH_SN_TRACE_VAL: v = value; 12 bytes reserved; movl $imm,(t); mov v,4(t) (size 2:
 * 10 bytes; movw $imm,(t); mov v,2(t)). */
static void
trace_val(gen_t *g, const arch_snip_t *s)
{
    int v = snip_eval(g, s->b);
    int t = snip_pick_temp(g), w = s->size == 2 ? 2 : 4;
    trace_reserve(g, &g->nodes[s->a], t, w + 8);
    trace_store(g, t, w, (uint32_t)s->imm);
    op_disp8(g, 1, 0x89, v, t, (int8_t)w); /* mov v, w(t) */
    snip_free_temp(g, t);
    snip_free_temp(g, v);
}

void
snip_stmt(gen_t *g, uint32_t i)
{
    const arch_snip_t *s = &g->nodes[i];
    switch (s->op) {
    case ARCH_SN_SEQ:
        snip_stmt(g, s->a);
        snip_stmt(g, s->b);
        return;
    case ARCH_SN_IF: {
        int no = snip_new_label(g), done = snip_new_label(g);
        snip_branch(g, s->a, 0, no);
        snip_stmt(g, s->b);
        if (s->c != ARCH_SNIP_NONE)
            snip_jump_to(g, -1, done);
        snip_bind(g, no);
        if (s->c != ARCH_SNIP_NONE)
            snip_stmt(g, s->c);
        snip_bind(g, done);
        return;
    }
    case ARCH_SN_STORE: snip_store(g, s); return;
    case ARCH_SN_ADD_TO: add_to(g, s); return;
    case ARCH_SN_ADD_CPU: add_cpu(g, s); return;
    case ARCH_SN_TIMER_START:
    case ARCH_SN_TIMER_STOP: timer(g, s); return;
    case ARCH_SN_CALL: snip_call(g, s, -1); return;
    case ARCH_SN_TRACE_REC: trace_rec(g, s); return;
    case ARCH_SN_TRACE_VAL: trace_val(g, s); return;
    case ARCH_SN_NOPS: return;
    case ARCH_SN_STORE_AT: {
        static const uint8_t mov8[] = { 0x88 }, mov[] = { 0x89 };
        int a = snip_eval(g, s->a), v = snip_eval(g, s->b);
        if (s->size == 2)
            snip_put8(g, 0x66);
        snip_op_ind(g, s->size == 8, s->size == 1 ? mov8 : mov, 1, v, a, -1);
        snip_free_temp(g, v);
        snip_free_temp(g, a);
        return;
    }
    case ARCH_SN_ADD_AT: {
        static const uint8_t add[] = { 0x01 };
        int a = snip_eval(g, s->a), v = snip_eval(g, s->b);
        if (s->flags & ARCH_SNF_ATOMIC)
            snip_put8(g, 0xf0);
        snip_op_ind(g, 1, add, 1, v, a, -1);
        snip_free_temp(g, v);
        snip_free_temp(g, a);
        return;
    }
    default: snip_free_temp(g, snip_eval(g, i)); return;
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
    case ARCH_SN_ADD_CPU: *nb = 1; *nc = 1; return 1;
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
    case ARCH_SN_ADD_CPU:
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
    if (s->op == ARCH_SN_ADD_CPU
        && (s->b >= n || nodes[s->b].op != ARCH_SN_CONST || s->c >= n
            || nodes[s->c].op != ARCH_SN_CONST))
        BAD("node %u: a per-CPU add's rseq offset and stride must be constants", i);
    if (s->op == ARCH_SN_ADD_CPU
        && (nodes[s->b].imm < INT32_MIN || nodes[s->b].imm > INT32_MAX - 8))
        BAD("node %u: an rseq offset of %lld", i, (long long)nodes[s->b].imm);
    if (s->op == ARCH_SN_ADD_CPU
        && (nodes[s->c].imm < 8 || nodes[s->c].imm > ARCH_SNIP_CPU_STRIDE_MAX
            || (nodes[s->c].imm & (nodes[s->c].imm - 1)) != 0))
        BAD("node %u: a per-CPU stride of %lld (a power of 2, 8 to %u)", i,
            (long long)nodes[s->c].imm, ARCH_SNIP_CPU_STRIDE_MAX);
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
            r |= 1u << snip_arg_regs[s->imm];
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
        g->slot_reg[g->nslot] = snip_thread_slot(g, s);
        g->slot_tab[g->nslot++] = s->imm;
    }
    snip_stmt(g, root);
    for (int k = 0; k < g->nslot; k++)
        snip_free_temp(g, g->slot_reg[k]);
    return g->err;
}

/* arch_snip_emit, and the cold ranges of the code into COLD (may be NULL). */
static int
emit(const arch_snip_t *nodes, size_t n, uint32_t root, const arch_snip_ctx_t *ctx,
    uint64_t addr, uint8_t *out, size_t cap, gen_t *cold)
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
        snip_adjust_rsp(&g, -128);
    if (flags) {
        snip_put8(&g, 0x9c); /* pushfq */
        g.sp_off += 8;
    }
    for (int r = 0; r < 16; r++)
        if (save & (1u << r))
            snip_push_reg(&g, r);
    QP_CHECK(body(&g, root));
    if (g.used != used)
        return QP_EINVAL; /* the two passes must agree */
    for (int r = 15; r >= 0; r--)
        if (save & (1u << r))
            snip_pop_reg(&g, r);
    if (flags)
        snip_put8(&g, 0x9d); /* popfq */
    if (red)
        snip_adjust_rsp(&g, 128);
    if (g.err)
        return g.err;
    if (cold != NULL)
        *cold = g;
    return (int)g.len;
}

int
arch_snip_emit(const arch_snip_t *nodes, size_t n, uint32_t root,
    const arch_snip_ctx_t *ctx, uint64_t addr, uint8_t *out, size_t cap)
{
    return emit(nodes, n, root, ctx, addr, out, cap, NULL);
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
arch_snip_cycles(const arch_snip_t *nodes, size_t n, uint32_t root,
    const arch_snip_ctx_t *ctx, uint64_t addr, double *cycles)
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
    gen_t g;
    int len = emit(nodes, n, root, ctx, addr, buf, sizeof(buf), &g), rc = len;
    double c = 0;
    for (int k = 0; rc >= 0 && k < len;) {
        arch_insn_t in;
        int skip = 0;
        for (int j = 0; j < g.ncold && !skip; j++)
            if ((size_t)k == g.cold[j][0])
                skip = (int)(g.cold[j][1] - g.cold[j][0]);
        if (skip) { /* code run only when aborted, and data */
            k += skip;
            continue;
        }
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
