/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Control-flow tracing, the second half (drv_trace.c plans): the snippet of each event
 * (a store at the thread's cursor, a refill call when the buffer is full; ENTER's
 * signal-frame records), the address tracing of --trace-mem, the probes placed in the
 * editor's plan, and the .qpt.trace section that describes it all.
 */
#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"
#include "driver/drv_trace_priv.h"
#include "patch/patch.h"
#include "base/qpt_trace_format.h"

/*****************************************************************************
 * The snippet of one event
 */

#define TREE_NODES 2   /* event_tree's */
#define ENTER_NODES 96 /* enter_tree's (at most) */

typedef struct tree {
    arch_snip_t *v;
    size_t n;
    int narrow; /* the chord tracer's 16-bit units (QPT_TRACE_FMAGIC3) */
} tree_t;

static uint32_t
nd(tree_t *t, uint8_t op, uint8_t size, uint32_t a, uint32_t b, uint32_t c, int64_t imm,
   uint8_t flags)
{
    t->v[t->n] = (arch_snip_t) { .op = op, .size = size, .flags = flags, .a = a, .b = b,
                                 .c = c, .imm = imm };
    return (uint32_t)t->n++;
}

#define SN ARCH_SNIP_NONE

_Static_assert(ARCH_TRACE_CUR == QPT_TRACE_TCB_CUR && ARCH_TRACE_LIM == QPT_TRACE_TCB_LIM
                   && ARCH_TRACE_SLACK == QPT_TRACE_SLACK,
               "the runtime and the snippets agree on the thread's words");

/* Record ID (ARCH_SN_TRACE_REC), REFILL when the buffer is full: a 32-bit word, or
 * (narrow) its 16-bit units as the trace file takes them, one unit below
 * QPT_TRACE_U16_LONG, else two in one store (drv_trace_place keeps ids below
 * QPT_TRACE_U16_MAXEVENTS), so that the runtime writes buffers out unconverted. */
static uint32_t
event_tree(tree_t *t, uint32_t id, uint64_t refill)
{
    uint32_t r = nd(t, ARCH_SN_CONST, 8, SN, SN, SN, (int64_t)refill, 0);
    if (t->narrow && id < QPT_TRACE_U16_LONG)
        return nd(t, ARCH_SN_TRACE_REC, 2, r, SN, SN, id, 0);
    if (t->narrow)
        return nd(t, ARCH_SN_TRACE_REC, 4, r, SN, SN, QPT_TRACE_U16_PACK(id), 0);
    return nd(t, ARCH_SN_TRACE_REC, 4, r, SN, SN, id, 0);
}

/* A value record: MARKER (QPT_TRACE_VAL ... QPT_TRACE_JUMP), then the 8-byte value V
 * (ARCH_SN_TRACE_VAL): a 32-bit marker word, or (narrow) its unit. */
static uint32_t
value_rec(tree_t *t, uint32_t marker, uint32_t v, uint64_t refill)
{
    uint32_t r = nd(t, ARCH_SN_CONST, 8, SN, SN, SN, (int64_t)refill, 0);
    if (t->narrow)
        return nd(t, ARCH_SN_TRACE_VAL, 2, r, v, SN,
                  QPT_TRACE_U16_VAL + (marker - QPT_TRACE_VAL), 0);
    return nd(t, ARCH_SN_TRACE_VAL, 4, r, v, SN, marker, 0);
}

/*
 * Signal handlers. The kernel enters a handler with its signal frame at %rsp (x86-64
 * rt_sigframe): the restorer's address (the return address), then the ucontext, whose
 * saved registers end with the interrupted rip at 176(%rsp); %rdx holds the ucontext's
 * address, %rsp + 8. glibc's restorer (__restore_rt) is `mov $15,%rax; syscall`.
 */
#define SIGFRAME_UC 8
#define SIGFRAME_RIP 176
#define RESTORER_HEAD 0x0f0000000fc0c748ull /* 48 c7 c0 0f 00 00 00 0f */
#define RESTORER_TAIL 0x05                  /* ... 05 */
#define REG_RDX 3                           /* ARCH_REG_* numbering */
#define REG_RSI 7
#define REG_RDI 8
#define SIGINFO_CODE 8                      /* siginfo_t.si_code */

static uint32_t
sp_plus(tree_t *t, int64_t off)
{
    uint32_t sp = nd(t, ARCH_SN_SP, 8, SN, SN, SN, 0, 0);
    return off == 0 ? sp : nd(t, ARCH_SN_ADD, 8, sp, nd(t, ARCH_SN_CONST, 8, SN, SN, SN, off, 0), SN, 0, 0);
}

/* The 8-byte word at %rsp + OFF (the return address at 0). */
static uint32_t
stack_word(tree_t *t, int64_t off)
{
    return nd(t, ARCH_SN_LOAD_AT, 8, sp_plus(t, off), SN, SN, 0, 0);
}

static uint32_t
konst(tree_t *t, int64_t v)
{
    return nd(t, ARCH_SN_CONST, 8, SN, SN, SN, v, 0);
}

/* Is the signal (%rdi, siginfo at %rsi) a fault of the instruction at the saved rip: a
 * SIGSEGV, SIGBUS, SIGILL or SIGFPE that the kernel sent (si_code > 0)? */
static uint32_t
is_fault(tree_t *t)
{
    static const int sigs[] = { 11 /* SEGV */, 7 /* BUS */, 4 /* ILL */, 8 /* FPE */ };
    uint32_t any = SN;
    for (size_t k = 0; k < sizeof(sigs) / sizeof(sigs[0]); k++) {
        uint32_t is = nd(t, ARCH_SN_EQ, 8, nd(t, ARCH_SN_REG, 8, SN, SN, SN, REG_RDI, 0),
                         konst(t, sigs[k]), SN, 0, 0);
        any = any == SN ? is : nd(t, ARCH_SN_LOR, 8, any, is, SN, 0, 0);
    }
    uint32_t at = nd(t, ARCH_SN_ADD, 8, nd(t, ARCH_SN_REG, 8, SN, SN, SN, REG_RSI, 0),
                     konst(t, SIGINFO_CODE), SN, 0, 0);
    uint32_t code = nd(t, ARCH_SN_LOAD_AT, 4, at, SN, SN, 0, 0);
    /* si_code is an int: positive as an unsigned 32-bit value below 2^31 */
    uint32_t pos = nd(t, ARCH_SN_LAND, 8, nd(t, ARCH_SN_NE, 8, code, konst(t, 0), SN, 0, 0),
                      nd(t, ARCH_SN_LT, 8, code, konst(t, 0x80000000ll), SN, 0, 0), SN, 0, 0);
    return nd(t, ARCH_SN_LAND, 8, any, pos, SN, 0, 0);
}

/*
 * The ENTER record of a procedure entry, preceded by a QPT_TRACE_SIGNAL (or FAULT) record
 * of the interrupted rip when the entry finds a signal frame: %rdx == %rsp + 8 first
 * (registers only: nothing is read unless it holds), then the restorer at the return
 * address (a code address on every call): glibc's 9 bytes, or the program's own
 * restorer's address (RESTORER, a static program's; 0: none). Flags and the red zone
 * are free at an entry.
 */
static uint32_t
enter_tree(tree_t *t, uint32_t id, uint64_t refill, uint64_t restorer)
{
    uint32_t rdx = nd(t, ARCH_SN_REG, 8, SN, SN, SN, REG_RDX, 0);
    uint32_t is_uc = nd(t, ARCH_SN_EQ, 8, rdx, sp_plus(t, SIGFRAME_UC), SN, 0, 0);
    uint32_t head = nd(t, ARCH_SN_LOAD_AT, 8, stack_word(t, 0), SN, SN, 0, 0);
    uint32_t is_head = nd(t, ARCH_SN_EQ, 8, head,
                          nd(t, ARCH_SN_CONST, 8, SN, SN, SN, (int64_t)RESTORER_HEAD, 0), SN, 0, 0);
    uint32_t at_tail = nd(t, ARCH_SN_ADD, 8, stack_word(t, 0),
                          nd(t, ARCH_SN_CONST, 8, SN, SN, SN, 8, 0), SN, 0, 0);
    uint32_t tail = nd(t, ARCH_SN_LOAD_AT, 1, at_tail, SN, SN, 0, 0);
    uint32_t is_tail = nd(t, ARCH_SN_EQ, 8, tail,
                          nd(t, ARCH_SN_CONST, 8, SN, SN, SN, RESTORER_TAIL, 0), SN, 0, 0);
    uint32_t is_restorer = nd(t, ARCH_SN_LAND, 8, is_head, is_tail, SN, 0, 0);
    if (restorer != 0) {
        uint32_t own = nd(t, ARCH_SN_EQ, 8, stack_word(t, 0),
                          nd(t, ARCH_SN_ADDR, 8, SN, SN, SN, (int64_t)restorer, 0), SN, 0, 0);
        is_restorer = nd(t, ARCH_SN_LOR, 8, own, is_restorer, SN, 0, 0);
    }
    uint32_t is_frame = nd(t, ARCH_SN_LAND, 8, is_uc, is_restorer, SN, 0, 0);
    uint32_t sig = value_rec(t, QPT_TRACE_SIGNAL, stack_word(t, SIGFRAME_RIP), refill);
    uint32_t fault = value_rec(t, QPT_TRACE_FAULT, stack_word(t, SIGFRAME_RIP), refill);
    uint32_t which = nd(t, ARCH_SN_IF, 0, is_fault(t), fault, sig, 0, 0);
    uint32_t cond = nd(t, ARCH_SN_IF, 0, is_frame, which, SN, 0, 0);
    return nd(t, ARCH_SN_SEQ, 0, cond, event_tree(t, id, refill), SN, 0, 0);
}

/*****************************************************************************
 * Address tracing (--trace-mem; seed 004, section 2: record only what an address slice
 * cannot recompute). A rip-relative or absolute access is known statically and records
 * nothing. Any other access records, in a probe before its instruction, the value of its
 * address registers (base + index * scale, plus %fs's base), unless an earlier access of
 * the same block used the same registers and nothing wrote them in between (the
 * simplest slice: the regenerator adds the displacement to that value). A string
 * instruction records rsi and rdi (as it uses them) and with rep rcx first. What cannot be
 * described (arch_decode_mem's UNTRACED) is described as such and marked by the walk.
 */

typedef struct mem_point {
    uint64_t addr;     /* the instruction */
    uint32_t ref, nrefs;
    uint8_t save;      /* flags live */
} mem_point_t;

#define MEM_NODES 64 /* a point's snippet: at most 4 values of at most 10 nodes, and SEQs */

/* Values access R records itself (0 when it reuses another's or needs none). */
static unsigned
mref_values(const qpt_trace_mref_t *r)
{
    if (r->kind == QPT_TM_EA)
        return r->from == QPT_TRACE_MNEW;
    if (r->kind == QPT_TM_STRING)
        return (r->rep != 0) + (r->access != 0) + (r->access2 != 0);
    return 0;
}

/* Flags live before each of the block's N instructions (INSNS), conservatively live at
 * its end (patch/'s one rule). */
static void
flags_live(const arch_insn_t *insns, uint32_t n, uint8_t *live)
{
    pt_flags_live_in(insns, n, ARCH_FLAGS_STATUS, live);
}

typedef struct avail {
    uint8_t base, index, scale, seg;
    uint16_t ref; /* the access (of its block) that records the value */
} avail_t;

/* The accesses of instruction IN (bytes BUF) of block B (its accesses from BREF on). */
static int
mem_insn(drv_trace_t *t, const uint8_t *buf, size_t avail_bytes, const arch_insn_t *in,
         uint32_t bref, avail_t *av, int *nav, unsigned *nvals)
{
    arch_mref_t r[ARCH_MAX_MREFS];
    int n = 0;
    QP_CHECK(arch_decode_mem(buf, avail_bytes, in->addr, r, &n));
    for (int k = 0; k < n; k++) {
        QP_CHECK(cfg_vec_grow((void **)&t->mrefs, &t->mrefs_cap, t->nmrefs + 1, sizeof(qpt_trace_mref_t)));
        QP_CHECK(cfg_vec_grow((void **)&t->marefs, &t->marefs_cap, t->nmrefs + 1, sizeof(arch_mref_t)));
        qpt_trace_mref_t m = { .insn = in->addr, .disp = r[k].disp, .access = r[k].access,
                               .access2 = r[k].access2, .rep = r[k].rep, .size = r[k].size,
                               .from = QPT_TRACE_MNEW };
        m.kind = r[k].kind == ARCH_MREF_EA       ? QPT_TM_EA
            : r[k].kind == ARCH_MREF_STATIC      ? QPT_TM_STATIC
            : r[k].kind == ARCH_MREF_STRING      ? QPT_TM_STRING
                                                 : QPT_TM_UNTRACED;
        uint16_t local = (uint16_t)(t->nmrefs - bref);
        if (m.kind == QPT_TM_EA) {
            for (int j = 0; j < *nav; j++)
                if (av[j].base == r[k].base && av[j].index == r[k].index
                    && av[j].scale == r[k].scale && av[j].seg == r[k].seg)
                    m.from = av[j].ref;
            if (m.from == QPT_TRACE_MNEW && *nav < 64 && local < QPT_TRACE_MNEW)
                av[(*nav)++] = (avail_t) { r[k].base, r[k].index, r[k].scale, r[k].seg, local };
        }
        *nvals += mref_values(&m);
        t->marefs[t->nmrefs] = r[k];
        t->mrefs[t->nmrefs++] = m;
    }
    /* What the instruction writes is no longer what those values hold. */
    arch_ops_t ops;
    uint32_t written = ~0u;
    if (n > 0 || *nav > 0) {
        if (arch_decode_ops(buf, avail_bytes, in->addr, &ops) == 0)
            written = ops.regs_written;
        for (int j = 0; j < *nav;)
            if ((written >> av[j].base & 1) || (written >> av[j].index & 1))
                av[j] = av[--*nav];
            else
                j++;
    }
    return 0;
}

int
drv_trace_plan_mem(drv_trace_t *t, const cfg_prog_t *prog, uint32_t *nrefs, uint32_t *nvals)
{
    t->mem = 1;
    free(t->mblocks);
    t->mblocks = calloc(t->nblocks + 1, sizeof(qpt_trace_mblock_t));
    if (t->mblocks == NULL)
        return QP_ENOMEM;
    uint32_t vals = 0;
    for (uint32_t b = 0; b < t->nblocks; b++) {
        uint32_t cb = cfg_block_at(prog, t->blocks[b].start);
        if (cb == CFG_NONE)
            return QP_EINVAL;
        const cfg_block_t *c = &prog->blocks[cb];
        t->mblocks[b] = (qpt_trace_mblock_t) { t->nmrefs, 0, c->end };
        arch_insn_t *insns = calloc(c->ninsns + 1, sizeof(arch_insn_t));
        uint8_t *live = calloc(c->ninsns + 1, 1);
        int rc = insns && live ? 0 : QP_ENOMEM;
        uint32_t ni = 0;
        for (uint64_t a = c->start; rc == 0 && a < c->end && ni < c->ninsns; ni++) {
            size_t avail_bytes = 0;
            const uint8_t *p = cfg_image_ptr(prog->img, a, &avail_bytes);
            rc = p == NULL ? QP_EINVAL : arch_decode(p, avail_bytes, a, &insns[ni]);
            a += insns[ni].len;
        }
        if (rc == 0)
            flags_live(insns, ni, live);
        avail_t av[64];
        int nav = 0;
        for (uint32_t i = 0; rc == 0 && i < ni; i++) {
            size_t avail_bytes = 0;
            const uint8_t *p = cfg_image_ptr(prog->img, insns[i].addr, &avail_bytes);
            uint32_t first = t->nmrefs;
            unsigned v = 0;
            rc = mem_insn(t, p, avail_bytes, &insns[i], t->mblocks[b].ref, av, &nav, &v);
            if (rc == 0 && v > 0) {
                rc = cfg_vec_grow((void **)&t->mpts, &t->mpts_cap, t->nmpts + 1, sizeof(mem_point_t));
                if (rc == 0)
                    t->mpts[t->nmpts++] = (mem_point_t) { insns[i].addr, first,
                                                          t->nmrefs - first, live[i] != 0 };
                vals += v;
            }
        }
        free(insns);
        free(live);
        QP_CHECK(rc);
        t->mblocks[b].nrefs = t->nmrefs - t->mblocks[b].ref;
    }
    if (nrefs != NULL)
        *nrefs = t->nmrefs;
    if (nvals != NULL)
        *nvals = vals;
    return 0;
}

static uint32_t
log2_scale(uint8_t s)
{
    return s == 8 ? 3 : s == 4 ? 2 : s == 2 ? 1 : 0;
}

/* BASE + INDEX * SCALE (registers, ARCH_REG_NONE when absent) as the program has them
 * at the point, or SN when both are absent. */
static uint32_t
base_index(tree_t *tr, uint8_t base, uint8_t index, uint8_t scale)
{
    uint32_t v = SN;
    if (base == ARCH_REG_SP)
        v = nd(tr, ARCH_SN_SP, 8, SN, SN, SN, 0, 0);
    else if (base != ARCH_REG_NONE)
        v = nd(tr, ARCH_SN_REG, 8, SN, SN, SN, base, 0);
    if (index != ARCH_REG_NONE) {
        uint32_t x = nd(tr, ARCH_SN_REG, 8, SN, SN, SN, index, 0);
        if (scale > 1)
            x = nd(tr, ARCH_SN_SHL, 8, x, nd(tr, ARCH_SN_CONST, 8, SN, SN, SN, log2_scale(scale), 0),
                   SN, 0, 0);
        v = v == SN ? x : nd(tr, ARCH_SN_ADD, 8, v, x, SN, 0, 0);
    }
    return v;
}

/* The value access R records: base + index * scale (+ %fs's base). */
static uint32_t
mem_value(tree_t *tr, const arch_mref_t *r)
{
    uint32_t v = base_index(tr, r->base, r->index, r->scale);
    if (r->seg) {
        uint32_t f = nd(tr, ARCH_SN_THREAD_PTR, 8, SN, SN, SN, 0, 0);
        v = v == SN ? f : nd(tr, ARCH_SN_ADD, 8, v, f, SN, 0, 0);
    }
    return v == SN ? nd(tr, ARCH_SN_CONST, 8, SN, SN, SN, 0, 0) : v;
}

static uint32_t
val_rec(tree_t *tr, uint32_t v, uint64_t refill, uint32_t seq)
{
    uint32_t rec = value_rec(tr, QPT_TRACE_VAL, v, refill);
    return seq == SN ? rec : nd(tr, ARCH_SN_SEQ, 0, seq, rec, SN, 0, 0);
}

/* The snippet of mem point P. */
static uint32_t
mem_tree(const drv_trace_t *t, tree_t *tr, const mem_point_t *p, uint64_t refill)
{
    uint32_t seq = SN;
    for (uint32_t k = p->ref; k < p->ref + p->nrefs; k++) {
        const qpt_trace_mref_t *m = &t->mrefs[k];
        if (m->kind == QPT_TM_EA && m->from == QPT_TRACE_MNEW)
            seq = val_rec(tr, mem_value(tr, &t->marefs[k]), refill, seq);
        if (m->kind != QPT_TM_STRING)
            continue;
        if (m->rep)
            seq = val_rec(tr, nd(tr, ARCH_SN_REG, 8, SN, SN, SN, 2 /* rcx */, 0), refill, seq);
        if (m->access)
            seq = val_rec(tr, nd(tr, ARCH_SN_REG, 8, SN, SN, SN, 7 /* rsi */, 0), refill, seq);
        if (m->access2)
            seq = val_rec(tr, nd(tr, ARCH_SN_REG, 8, SN, SN, SN, 8 /* rdi */, 0), refill, seq);
    }
    return seq;
}

#define JUMP_NODES 16 /* a jump point's snippet */

/* The snippet of jump point P: its target (the register, or the word its memory operand
 * addresses) as a QPT_TRACE_JUMP value record. */
static uint32_t
jump_tree(tree_t *tr, const jump_point_t *p, uint64_t refill)
{
    const arch_opnd_t *o = &p->op;
    uint32_t v;
    if (o->kind == ARCH_OPND_REG)
        v = nd(tr, ARCH_SN_REG, 8, SN, SN, SN, o->reg, 0);
    else {
        uint32_t ea;
        if (o->base == ARCH_REG_PC) /* the displacement is the (link-time) address */
            ea = nd(tr, ARCH_SN_ADDR, 8, SN, SN, SN, o->disp, 0);
        else {
            ea = base_index(tr, o->base, o->index, o->scale);
            uint32_t d = nd(tr, ARCH_SN_CONST, 8, SN, SN, SN, o->disp, 0);
            ea = ea == SN ? d : nd(tr, ARCH_SN_ADD, 8, ea, d, SN, 0, 0);
        }
        v = nd(tr, ARCH_SN_LOAD_AT, 8, ea, SN, SN, 0, 0);
    }
    return value_rec(tr, QPT_TRACE_JUMP, v, refill);
}

int
drv_trace_place(drv_trace_t *t, drv_result_t *res, ed_plan_t *plan, uint64_t refill)
{
    free(t->nodes);
    free(t->snips);
    t->nodes = NULL;
    t->snips = NULL;
    if (!t->naive && t->nevents > QPT_TRACE_U16_MAXEVENTS)
        return QP_ERANGE; /* more events than 16-bit units can name */
    size_t nentries = 0, next = 0;
    for (size_t i = 0; i < t->npts; i++)
        nentries += t->pts[i].entry;
    size_t ev_nodes = t->npts * TREE_NODES + nentries * (ENTER_NODES - TREE_NODES);
    t->nodes = calloc(ev_nodes + t->nmpts * MEM_NODES + t->njpts * JUMP_NODES + 1,
                      sizeof(arch_snip_t));
    t->snips = calloc(t->npts + t->nmpts + t->njpts + 1, sizeof(ed_snippet_t));
    if (t->nodes == NULL || t->snips == NULL)
        return QP_ENOMEM;
    for (size_t i = 0; i < t->npts; i++) {
        const trace_point_t *p = &t->pts[i];
        tree_t tr = { t->nodes + next, 0, !t->naive };
        uint32_t root = p->entry ? enter_tree(&tr, p->event, refill, t->restorer)
                                 : event_tree(&tr, p->event, refill);
        if (tr.n > (p->entry ? ENTER_NODES : TREE_NODES))
            return QP_EINVAL; /* (cannot happen: the trees' sizes are fixed) */
        next += p->entry ? ENTER_NODES : TREE_NODES;
        arch_snip_ctx_t ctx = { 0 };
        if (p->entry) {
            ctx.where = ARCH_SNX_ENTRY;
            ctx.no_red_zone = 1;
        }
        /* No register is taken for dead, even r11 at an entry or after a call: gcc's
         * interprocedural register allocation (-fipa-ra) keeps values in scratch
         * registers across calls of local functions that leave them alone. The record's
         * temporary is saved and restored (2 instructions). */
        t->snips[i] = (ed_snippet_t) { tr.v, tr.n, root, ctx };
        QP_CHECK(cfg_vec_grow((void **)&res->probes, &res->probes_cap, res->nprobes + 1,
            sizeof(ed_probe_t)));
        res->probes[res->nprobes++] = (ed_probe_t) {
            .addr = p->addr, .at = p->at, .what = ED_SNIP_CODE, .save_flags = p->save,
            .flags = p->entry ? ED_PROBE_ENTRY : 0, .counter = (uint32_t)i,
        };
    }
    for (size_t i = 0; i < t->nmpts; i++) {
        const mem_point_t *p = &t->mpts[i];
        tree_t tr = { t->nodes + ev_nodes + i * MEM_NODES, 0, !t->naive };
        uint32_t root = mem_tree(t, &tr, p, refill);
        arch_snip_ctx_t ctx = { 0 };
        t->snips[t->npts + i] = (ed_snippet_t) { tr.v, tr.n, root, ctx };
        QP_CHECK(cfg_vec_grow((void **)&res->probes, &res->probes_cap, res->nprobes + 1, sizeof(ed_probe_t)));
        res->probes[res->nprobes++] = (ed_probe_t) {
            .addr = p->addr, .at = ED_AT_BEFORE, .what = ED_SNIP_CODE, .save_flags = p->save,
            .counter = (uint32_t)(t->npts + i),
        };
    }
    /* After the mem points: a jump's target follows the values of its own access. The
     * flags are saved: they may be live where it goes. */
    for (size_t i = 0; i < t->njpts; i++) {
        const jump_point_t *p = &t->jpts[i];
        size_t s = t->npts + t->nmpts + i;
        tree_t tr = { t->nodes + ev_nodes + t->nmpts * MEM_NODES + i * JUMP_NODES, 0,
                      !t->naive };
        uint32_t root = jump_tree(&tr, p, refill);
        if (tr.n > JUMP_NODES)
            return QP_EINVAL; /* (cannot happen: at most 11 nodes) */
        arch_snip_ctx_t ctx = { 0 };
        t->snips[s] = (ed_snippet_t) { tr.v, tr.n, root, ctx };
        QP_CHECK(cfg_vec_grow((void **)&res->probes, &res->probes_cap, res->nprobes + 1, sizeof(ed_probe_t)));
        res->probes[res->nprobes++] = (ed_probe_t) {
            .addr = p->addr, .at = ED_AT_BEFORE, .what = ED_SNIP_CODE, .save_flags = 1,
            .counter = (uint32_t)s,
        };
    }
    QP_CHECK(ed_plan_set_snippets(plan, t->snips, t->npts + t->nmpts + t->njpts));
    return ed_plan_set_probes(plan, res->probes, res->nprobes);
}

int
drv_trace_unit(const drv_trace_t *t)
{
    return t->naive ? 4 : 2;
}

void
drv_trace_set_id(drv_trace_t *t, uint64_t id)
{
    t->id = id;
}

int
drv_trace_set_layout(drv_trace_t *t, const ed_plan_t *plan, uint64_t rt, uint64_t rt_size)
{
    t->rt = rt;
    t->rt_size = rt_size;
    free(t->inew);
    t->inew = calloc((size_t)t->ninsns + 1, sizeof(qpt_trace_new_t));
    if (t->inew == NULL)
        return QP_ENOMEM;
    t->new_base = ed_plan_text(plan, &t->new_size);
    for (uint32_t b = 0; b < t->nblocks; b++) {
        uint64_t a = t->blocks[b].start;
        for (uint32_t i = t->ifirst[b]; i < t->ifirst[b + 1]; a += t->ilen[i], i++) {
            uint64_t after = 0, slot = ed_plan_map_insn((void *)plan, a);
            uint64_t at = ed_plan_insn_new(plan, a, &after);
            uint64_t end = ed_plan_map_end((void *)plan, a + t->ilen[i]);
            qpt_trace_new_t *x = &t->inew[i];
            x->slot = QPT_TRACE_NEW_NONE;
            if (slot < t->new_base || at < slot || after < at || end < after
                || slot - t->new_base >= UINT32_MAX || at - slot > UINT16_MAX
                || after - at > UINT16_MAX || end - after > UINT16_MAX)
                continue; /* not moved, or out of the format's reach: not known */
            x->slot = (uint32_t)(slot - t->new_base);
            x->pre = (uint16_t)(at - slot);
            x->len = (uint16_t)(after - at);
            x->post = (uint16_t)(end - after);
        }
    }
    return 0;
}

/* Append N bytes of P to *BUF (8-byte aligned pieces). */
static void
put(uint8_t *buf, size_t *off, const void *p, size_t n)
{
    memcpy(buf + *off, p, n);
    *off += (n + 7) & ~(size_t)7;
}

int
drv_trace_section(const drv_trace_t *t, uint8_t **buf, size_t *len)
{
    qpt_trace_hdr_t h;
    memset(&h, 0, sizeof(h));
    memcpy(h.magic, QPT_TRACE_MAGIC, 8);
    h.version = QPT_TRACE_VERSION;
    h.kind = t->naive ? QPT_TRACE_NAIVE : QPT_TRACE_CHORDS;
    h.id = t->id;
    h.nprocs = t->nprocs;
    h.nblocks = t->nblocks;
    h.nedges = t->nedges;
    h.nevents = t->nevents;
    size_t n = sizeof(h) + 8 + (size_t)t->nprocs * sizeof(qpt_trace_proc_t) + 8
        + (size_t)t->nblocks * sizeof(qpt_trace_block_t) + 8
        + (size_t)t->nedges * sizeof(qpt_trace_edge_t) + 8
        + (size_t)t->nevents * sizeof(qpt_trace_event_t) + 8;
    qpt_trace_ins_hdr_t ih;
    memset(&ih, 0, sizeof(ih));
    memcpy(ih.magic, QPT_TRACE_IMAGIC, 8);
    ih.nblocks = t->nblocks;
    ih.ninsns = t->ninsns;
    n += sizeof(ih) + 8 + ((size_t)t->nblocks + 1) * sizeof(uint32_t) + 8 + t->ninsns + 8;
    qpt_trace_new_hdr_t nh;
    memset(&nh, 0, sizeof(nh));
    memcpy(nh.magic, QPT_TRACE_NMAGIC, 8);
    nh.ninsns = t->ninsns;
    nh.base = t->new_base;
    nh.size = t->new_size;
    nh.rt = t->rt;
    nh.rt_size = t->rt_size;
    n += sizeof(nh) + 8 + (size_t)t->ninsns * sizeof(qpt_trace_new_t) + 8;
    qpt_trace_mem_hdr_t mh;
    memset(&mh, 0, sizeof(mh));
    if (t->mem) {
        memcpy(mh.magic, QPT_TRACE_MMAGIC, 8);
        mh.nblocks = t->nblocks;
        mh.nrefs = t->nmrefs;
        n += sizeof(mh) + 8 + (size_t)t->nblocks * sizeof(qpt_trace_mblock_t) + 8
            + (size_t)t->nmrefs * sizeof(qpt_trace_mref_t) + 8;
    }
    qpt_trace_out_hdr_t oh;
    memset(&oh, 0, sizeof(oh));
    memcpy(oh.magic, QPT_TRACE_OMAGIC, 8);
    oh.nouts = t->nouts;
    oh.nbytes = (uint32_t)t->out_nbytes;
    n += sizeof(oh) + 8 + (size_t)t->nouts * sizeof(qpt_trace_out_t) + 8 + t->out_nbytes + 8;
    uint8_t *b = calloc(1, n);
    if (b == NULL)
        return QP_ENOMEM;
    size_t off = 0;
    put(b, &off, &h, sizeof(h));
    put(b, &off, t->procs, (size_t)t->nprocs * sizeof(qpt_trace_proc_t));
    put(b, &off, t->blocks, (size_t)t->nblocks * sizeof(qpt_trace_block_t));
    put(b, &off, t->edges, (size_t)t->nedges * sizeof(qpt_trace_edge_t));
    put(b, &off, t->events, (size_t)t->nevents * sizeof(qpt_trace_event_t));
    put(b, &off, &ih, sizeof(ih));
    put(b, &off, t->ifirst, ((size_t)t->nblocks + 1) * sizeof(uint32_t));
    put(b, &off, t->ilen, t->ninsns);
    put(b, &off, &nh, sizeof(nh));
    if (t->inew != NULL)
        put(b, &off, t->inew, (size_t)t->ninsns * sizeof(qpt_trace_new_t));
    else { /* no layout given: nothing is known */
        for (uint32_t i = 0; i < t->ninsns; i++) {
            qpt_trace_new_t x = { .slot = QPT_TRACE_NEW_NONE };
            memcpy(b + off + (size_t)i * sizeof(x), &x, sizeof(x));
        }
        off += ((size_t)t->ninsns * sizeof(qpt_trace_new_t) + 7) & ~(size_t)7;
    }
    if (t->mem) {
        put(b, &off, &mh, sizeof(mh));
        put(b, &off, t->mblocks, (size_t)t->nblocks * sizeof(qpt_trace_mblock_t));
        put(b, &off, t->mrefs, (size_t)t->nmrefs * sizeof(qpt_trace_mref_t));
    }
    put(b, &off, &oh, sizeof(oh));
    put(b, &off, t->outs, (size_t)t->nouts * sizeof(qpt_trace_out_t));
    put(b, &off, t->out_names, t->out_nbytes);
    *buf = b;
    *len = off;
    return 0;
}

void
drv_trace_stats(const drv_trace_t *t, size_t *npoints, uint32_t *nevents)
{
    *npoints = t->npts + t->njpts;
    *nevents = t->nevents;
}
