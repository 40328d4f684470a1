/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Exit back-traces: unwinding a saved stack with the executable's CFI. libdw finds the
 * FDE for a pc and gives the CFA and register rules as small DWARF expressions; this
 * file evaluates them against the dump (registers of the first frame, bytes of the saved
 * stack) and never touches memory that is not in the dump. The only elfutils user of
 * report/ (and of the library folders).
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cfg/cfg.h"
#include "base/qp_sort.h"
#include "report/qp_backtrace.h"

#define NREGS 32 /* DWARF registers tracked, at most (AArch64: x0..x30, sp) */
#define EXPR_STACK 16

/* The machine's DWARF register numbering, as far as a walk needs it. */
typedef struct bt_abi {
    int nregs;        /* registers 0..nregs-1 are tracked */
    int sp;           /* the stack pointer; the caller's is the CFA */
    int ra;           /* the return address column */
    uint64_t ra_mask; /* the bits of a return address that are its address (AArch64:
                       * a pac-ret signature in the top bits stripped) */
} bt_abi_t;

static const bt_abi_t abi_x86_64 = { 17, 7, 16, ~0ull };
static const bt_abi_t abi_aarch64 = { 32, 31, 30, 0x0000ffffffffffffull };

typedef struct exec_range {
    uint64_t start, end; /* [start, end) of an executable PT_LOAD, link time */
} exec_range_t;

struct qp_unwinder {
    int fd;             /* the open executable */
    Elf *elf;           /* libelf handle (libdw reads the CFI through it) */
    const void *map;    /* its mapping, known to cfg_mapped_at (cfg_mapped_add_file) */
    Dwarf_CFI *cfi;     /* .eh_frame, through PT_GNU_EH_FRAME when present */
    exec_range_t *code; /* executable segments: a pc elsewhere is not ours */
    size_t ncode;
    const bt_abi_t *abi; /* the executable's machine's (x86-64 or AArch64) */
};

/* The state of one frame during a walk. */
typedef struct frame_regs {
    uint64_t v[NREGS]; /* values */
    uint32_t known;    /* bit r: v[r] is known */
} frame_regs_t;

/* What a walk reads memory from. */
typedef struct saved_stack {
    uint64_t base; /* runtime address of bytes[0] (regs[7] at the dump) */
    const uint8_t *bytes;
    uint64_t len;
} saved_stack_t;

/*****************************************************************************
 * The unwinder
 */

static int
collect_code_ranges(qp_unwinder_t *u)
{
    size_t n;
    if (elf_getphdrnum(u->elf, &n) != 0)
        return QP_EFORMAT;
    u->code = calloc(n ? n : 1, sizeof(exec_range_t));
    if (u->code == NULL)
        return QP_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(u->elf, (int)i, &ph) == NULL)
            return QP_EFORMAT;
        if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
            u->code[u->ncode++] = (exec_range_t) { ph.p_vaddr, ph.p_vaddr + ph.p_memsz };
    }
    return 0;
}

static int
in_code(const qp_unwinder_t *u, uint64_t addr)
{
    for (size_t i = 0; i < u->ncode; i++)
        if (addr >= u->code[i].start && addr < u->code[i].end)
            return 1;
    return 0;
}

void
qp_unwinder_destroy(qp_unwinder_t *u)
{
    if (u == NULL)
        return;
    if (u->cfi != NULL)
        dwarf_cfi_end(u->cfi);
    cfg_mapped_remove(u->map);
    if (u->elf != NULL)
        elf_end(u->elf);
    if (u->fd >= 0)
        close(u->fd);
    free(u->code);
    free(u);
}

/* The walk's view of ELF's machine, or NULL. */
static const bt_abi_t *
machine_abi(Elf *elf)
{
    const Elf64_Ehdr *eh = elf64_getehdr(elf);
    if (eh == NULL)
        return NULL;
    return eh->e_machine == EM_X86_64 ? &abi_x86_64
        : eh->e_machine == EM_AARCH64 ? &abi_aarch64 : NULL;
}

int
qp_unwinder_create(const char *path, qp_unwinder_t **out, char *why, size_t whylen)
{
    if (path == NULL || out == NULL)
        return QP_EINVAL;
    *out = NULL;
    qp_unwinder_t *u = calloc(1, sizeof(*u));
    if (u == NULL)
        return QP_ENOMEM;
    u->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    if (u->fd < 0) {
        int saved = errno;
        qp_why(why, whylen, "%s", strerror(saved));
        qp_unwinder_destroy(u);
        errno = saved;
        return QP_EIO;
    }
    elf_version(EV_CURRENT);
    u->elf = elf_begin(u->fd, ELF_C_READ_MMAP, NULL);
    size_t len = 0;
    const char *raw = u->elf != NULL ? elf_rawfile(u->elf, &len) : NULL; /* (sets LEN first) */
    u->map = cfg_mapped_add_file(raw, len, path);
    int rc = 0;
    if (u->elf == NULL || elf_kind(u->elf) != ELF_K_ELF) {
        qp_why(why, whylen, "not an ELF file");
        rc = QP_EFORMAT;
    } else if ((rc = collect_code_ranges(u)) < 0) {
        qp_why(why, whylen, "cannot read the program headers");
    } else if ((u->abi = machine_abi(u->elf)) == NULL) {
        qp_why(why, whylen, "exit dumps are unwound on x86-64 and AArch64 only");
        rc = QP_EARCH;
    } else if ((u->cfi = dwarf_getcfi_elf(u->elf)) == NULL) {
        qp_why(why, whylen, "no usable .eh_frame to unwind exit dumps");
        rc = QP_EFORMAT;
    }
    if (rc < 0) {
        qp_unwinder_destroy(u);
        return rc;
    }
    *out = u;
    return 0;
}

/*****************************************************************************
 * DWARF expressions of CFI rules
 */

static int
read_stack(const saved_stack_t *st, uint64_t addr, uint64_t *val)
{
    if (addr < st->base || addr - st->base > st->len || st->len - (addr - st->base) < 8)
        return QP_BT_OUTSIDE;
    memcpy(val, st->bytes + (addr - st->base), 8);
    return 0;
}

/* The value of register R of frame REGS, or QP_BT_BADEXPR when unknown. */
static int
reg_value(const frame_regs_t *regs, uint64_t r, uint64_t *val)
{
    /* (r >= the ABI's nregs: never known, as caller_reg and the dump fill only those) */
    if (r >= NREGS || !(regs->known & (1u << r)))
        return QP_BT_BADEXPR;
    *val = regs->v[r];
    return 0;
}

static int
is_binary_op(uint8_t atom)
{
    switch (atom) {
    case DW_OP_plus:
    case DW_OP_minus:
    case DW_OP_mul:
    case DW_OP_and:
    case DW_OP_or:
    case DW_OP_xor:
    case DW_OP_shl:
    case DW_OP_shr:
    case DW_OP_ge:
    case DW_OP_gt:
    case DW_OP_le:
    case DW_OP_lt:
    case DW_OP_eq:
    case DW_OP_ne: return 1;
    default: return 0;
    }
}

/* A op B for an operator of is_binary_op (comparisons are signed, as DWARF says). */
static uint64_t
binary_op(uint8_t atom, uint64_t a, uint64_t b)
{
    switch (atom) {
    case DW_OP_plus: return a + b;
    case DW_OP_minus: return a - b;
    case DW_OP_mul: return a * b;
    case DW_OP_and: return a & b;
    case DW_OP_or: return a | b;
    case DW_OP_xor: return a ^ b;
    case DW_OP_shl: return b < 64 ? a << b : 0;
    case DW_OP_shr: return b < 64 ? a >> b : 0;
    case DW_OP_ge: return (int64_t)a >= (int64_t)b;
    case DW_OP_gt: return (int64_t)a > (int64_t)b;
    case DW_OP_le: return (int64_t)a <= (int64_t)b;
    case DW_OP_lt: return (int64_t)a < (int64_t)b;
    case DW_OP_eq: return a == b;
    default: return a != b; /* DW_OP_ne */
    }
}

/* Evaluation context: the frame's registers, its CFA (when known), the stack. */
typedef struct expr_ctx {
    const bt_abi_t *abi;
    const frame_regs_t *regs;
    const saved_stack_t *stack;
    uint64_t cfa;
    int cfa_known;
} expr_ctx_t;

/* One operator that pushes a value, or QP_BT_BADEXPR. */
static int
push_op(const expr_ctx_t *c, const Dwarf_Op *op, uint64_t *val)
{
    uint8_t a = op->atom;
    if (a >= DW_OP_lit0 && a <= DW_OP_lit31) {
        *val = a - DW_OP_lit0;
        return 0;
    }
    if (a >= DW_OP_breg0 && a <= DW_OP_breg31) {
        if (reg_value(c->regs, a - DW_OP_breg0, val))
            return QP_BT_BADEXPR;
        *val += op->number;
        return 0;
    }
    switch (a) {
    case DW_OP_bregx:
        if (reg_value(c->regs, op->number, val))
            return QP_BT_BADEXPR;
        *val += op->number2;
        return 0;
    case DW_OP_const1u:
    case DW_OP_const2u:
    case DW_OP_const4u:
    case DW_OP_const8u:
    case DW_OP_const1s:
    case DW_OP_const2s:
    case DW_OP_const4s:
    case DW_OP_const8s:
    case DW_OP_constu:
    case DW_OP_consts: *val = op->number; return 0;
    case DW_OP_call_frame_cfa:
        if (!c->cfa_known)
            return QP_BT_BADEXPR;
        *val = c->cfa;
        return 0;
    default: return QP_BT_BADEXPR;
    }
}

/*
 * Evaluate OPS (N operators). *IS_VALUE tells whether the result is a value
 * (DW_OP_stack_value, or a DW_OP_regN location: the register's content) or a memory
 * address. Returns 0 or a QP_BT_* reason.
 */
static int
eval_expr(
    const expr_ctx_t *c, const Dwarf_Op *ops, size_t n, uint64_t *result, int *is_value)
{
    uint64_t st[EXPR_STACK];
    size_t sp = 0;
    *is_value = 0;
    if (n == 1
        && (ops[0].atom == DW_OP_regx
            || (ops[0].atom >= DW_OP_reg0 && ops[0].atom <= DW_OP_reg31))) {
        *is_value = 1;
        uint64_t r = ops[0].atom == DW_OP_regx ? ops[0].number
                                               : (uint64_t)(ops[0].atom - DW_OP_reg0);
        return reg_value(c->regs, r, result) ? QP_BT_BADEXPR : 0;
    }
    for (size_t i = 0; i < n; i++) {
        const Dwarf_Op *op = &ops[i];
        uint8_t a = op->atom;
        if (a == DW_OP_stack_value) {
            if (i != n - 1)
                return QP_BT_BADEXPR;
            *is_value = 1;
        } else if (a == DW_OP_plus_uconst) {
            if (sp < 1)
                return QP_BT_BADEXPR;
            st[sp - 1] += op->number;
        } else if (a == DW_OP_deref) {
            if (sp < 1)
                return QP_BT_BADEXPR;
            if (read_stack(c->stack, st[sp - 1], &st[sp - 1]))
                return QP_BT_OUTSIDE;
        } else if (a == DW_OP_dup) {
            if (sp < 1 || sp == EXPR_STACK)
                return QP_BT_BADEXPR;
            st[sp] = st[sp - 1];
            sp++;
        } else if (is_binary_op(a)) {
            if (sp < 2)
                return QP_BT_BADEXPR;
            st[sp - 2] = binary_op(a, st[sp - 2], st[sp - 1]);
            sp--;
        } else {
            if (sp == EXPR_STACK || push_op(c, op, &st[sp]) != 0)
                return QP_BT_BADEXPR;
            sp++;
        }
    }
    if (sp < 1)
        return QP_BT_BADEXPR;
    *result = st[sp - 1];
    return 0;
}

/*****************************************************************************
 * Walking
 */

/* The caller's value of register R under frame FR's rules; unknown is not an error. */
static int
caller_reg(Dwarf_Frame *fr, const expr_ctx_t *c, int r, frame_regs_t *next)
{
    Dwarf_Op mem[3], *ops = NULL;
    size_t n = 0;
    if (dwarf_frame_register(fr, r, mem, &ops, &n) != 0)
        return QP_BT_BADEXPR;
    if (n == 0) {
        /* ops == NULL: same value as in this frame; else undefined (call-clobbered). */
        if (ops == NULL && (c->regs->known & (1u << r))) {
            next->v[r] = c->regs->v[r];
            next->known |= 1u << r;
        }
        return 0;
    }
    uint64_t val;
    int is_value;
    int rc = eval_expr(c, ops, n, &val, &is_value);
    if (rc == 0 && !is_value)
        rc = read_stack(c->stack, val, &val);
    if (rc != 0) /* only the return address must be known: others become unknown */
        return r == c->abi->ra ? rc : 0;
    next->v[r] = val;
    next->known |= 1u << r;
    return 0;
}

/*
 * One step: the caller's registers from frame REGS at link-time LOOKUP (the pc, or the
 * return address - 1 after a call). *SIGNAL tells whether this frame is a signal frame.
 */
static int
step(qp_unwinder_t *u, uint64_t lookup, const frame_regs_t *regs,
    const saved_stack_t *stack, frame_regs_t *next, int *signal)
{
    Dwarf_Frame *fr = NULL;
    if (dwarf_cfi_addrframe(u->cfi, lookup, &fr) != 0)
        return QP_BT_NOCFI;
    const bt_abi_t *abi = u->abi;
    expr_ctx_t c = { abi, regs, stack, 0, 0 };
    Dwarf_Op *ops = NULL;
    size_t n = 0;
    int is_value, rc = QP_BT_BADEXPR;
    bool sig = false;
    int ra_reg = dwarf_frame_info(fr, NULL, NULL, &sig);
    *signal = sig;
    if (ra_reg == abi->ra && dwarf_frame_cfa(fr, &ops, &n) == 0 && n > 0)
        rc = eval_expr(&c, ops, n, &c.cfa, &is_value);
    memset(next, 0, sizeof(*next));
    if (rc == 0) {
        c.cfa_known = 1;
        for (int r = 0; r < abi->nregs && rc == 0; r++)
            rc = caller_reg(fr, &c, r, next);
    }
    free(fr);
    if (rc != 0)
        return rc;
    /* Both psABIs: the caller's stack pointer is the CFA. */
    next->v[abi->sp] = c.cfa;
    next->known |= 1u << abi->sp;
    next->v[abi->ra] &= abi->ra_mask;
    return 0;
}

int
qp_backtrace_walk(
    qp_unwinder_t *u, const qp_dump_t *dump, int (*fn)(void *arg, uint64_t ra), void *arg)
{
    if (u == NULL || dump == NULL || fn == NULL
        || (dump->hdr.stack_len && dump->stack == NULL))
        return QP_EINVAL;
    const qp_dump_hdr_t *h = &dump->hdr;
    const bt_abi_t *abi = u->abi;
    saved_stack_t stack = { h->regs[7], dump->stack, h->stack_len };
    frame_regs_t regs = { { 0 }, 0 };
    if (abi == &abi_aarch64) {
        /* The AArch64 runtime's slots (base/qp_format.h): x19..x24, x29, sp,
         * x25..x28, x30; the rest (call-clobbered at a call of exit) unknown. */
        static const int8_t dwarf_of[17] = { 19, 20, 21, 22, 23, 24, 29, 31, 25, 26,
                                             27, 28, -1, -1, -1, 30, -1 };
        for (int k = 0; k < 17; k++)
            if (dwarf_of[k] >= 0) {
                regs.v[dwarf_of[k]] = h->regs[k];
                regs.known |= 1u << dwarf_of[k];
            }
    } else {
        memcpy(regs.v, h->regs, sizeof(h->regs));
        regs.known = (1u << 17) - 1;
    }
    uint64_t pc = h->pc;
    int exact = 1; /* the first pc is where exit is called, not a return address */
    for (int frame = 0; frame < QP_BT_MAX_FRAMES; frame++) {
        uint64_t lt = pc - h->bias;
        if (!in_code(u, lt))
            return frame == 0 ? QP_BT_OUTSIDE : QP_BT_FOREIGN;
        frame_regs_t next;
        int signal;
        int rc = step(u, exact ? lt : lt - 1, &regs, &stack, &next, &signal);
        if (rc != 0)
            return rc;
        if (!(next.known & (1u << abi->ra)) || next.v[abi->ra] == 0)
            return QP_BT_END;
        /* Callers' frames lie above: a CFA that does not grow is a corrupt stack. */
        if (next.v[abi->sp] <= regs.v[abi->sp])
            return QP_BT_OUTSIDE;
        pc = next.v[abi->ra];
        /* A signal frame's "return address" is the interrupted pc, not a call site. */
        if (!signal && (rc = fn(arg, pc - h->bias)) != 0)
            return rc;
        exact = signal;
        regs = next;
    }
    return QP_BT_LIMIT;
}

/*****************************************************************************
 * Abandoned call blocks
 */

/*
 * The return addresses found in the dumps, collected first (the walks need nothing
 * else), so that one pass over the description's edges finds their call blocks: no
 * table of every call site or moved block, which on a big program (chromium: 9.6 million
 * blocks) cost hundreds of megabytes and two sorts.
 */
typedef struct ret_site {
    uint64_t ret_addr; /* link-time address a call pushes */
    uint32_t block; /* the call block with the lowest index that pushes it, or QP_VIRT */
} ret_site_t;

static int
cmp_ret_site(const void *a, const void *b)
{
    const ret_site_t *x = a, *y = b;
    return x->ret_addr < y->ret_addr ? -1 : x->ret_addr > y->ret_addr;
}

typedef struct abandon_ctx {
    uint64_t *ras; /* every return address walked, in order */
    size_t nras, cap;
    int nomem; /* growing ras failed */
} abandon_ctx_t;

static int
on_return_address(void *arg, uint64_t ra)
{
    abandon_ctx_t *c = arg;
    if (c->nras == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 256;
        uint64_t *v = realloc(c->ras, cap * sizeof(*v));
        if (v == NULL) {
            c->nomem = 1;
            return 1; /* ends the walk */
        }
        c->ras = v;
        c->cap = cap;
    }
    c->ras[c->nras++] = ra;
    return 0;
}

/* The site of SITES (N, sorted, distinct) whose return address is RA, or NULL. */
static ret_site_t *
site_at(ret_site_t *sites, size_t n, uint64_t ra)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sites[mid].ret_addr < ra)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && sites[lo].ret_addr == ra ? &sites[lo] : NULL;
}

/*
 * LEFT[p] = 1 for each procedure p of D that holds one of BLOCKS (N, sorted here;
 * QP_VIRT ones are none): what the writer of the abandoned counts knows of where it
 * wrote, so that no reader scans every block's count for it (chromium: 13.6 million).
 * LEFT may be NULL.
 */
static void
mark_left(const qp_desc_t *d, uint32_t *blocks, size_t n, uint8_t *left)
{
    if (left == NULL || n == 0)
        return;
    qp_sort_u32(blocks, n);
    for (uint32_t i = 0; i < d->hdr.nprocs; i++) {
        const qp_desc_proc_t *p = &d->procs[i];
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (blocks[mid] < p->block)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < n && blocks[lo] - p->block < p->nblocks)
            left[i] = 1;
    }
}

/* Each frame of C (its return address) whose call block a call site names: one more
 * abandoned execution of that block. */
static int
abandon_frames(const qp_desc_t *d, const abandon_ctx_t *c, uint64_t *abandoned,
    uint8_t *left, qp_backtrace_stats_t *st)
{
    ret_site_t *sites = malloc((c->nras ? c->nras : 1) * sizeof(*sites));
    if (sites == NULL)
        return QP_ENOMEM;
    for (size_t i = 0; i < c->nras; i++)
        sites[i] = (ret_site_t) { c->ras[i], QP_VIRT };
    qsort(sites, c->nras, sizeof(*sites), cmp_ret_site);
    size_t n = 0;
    for (size_t i = 0; i < c->nras; i++)
        if (n == 0 || sites[n - 1].ret_addr != sites[i].ret_addr)
            sites[n++] = sites[i];
    /* A lazy description: the chunks whose edges may return there (the others hold
     * no such edge), then the edges decoded. */
    uint64_t *ras = malloc((n ? n : 1) * sizeof(uint64_t));
    int rc = ras == NULL ? QP_ENOMEM : 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        ras[i] = sites[i].ret_addr;
    if (rc == 0)
        rc = qp_desc_need_ret(d, ras, n);
    free(ras);
    if (rc < 0) {
        free(sites);
        return rc;
    }
    uint32_t b0, nb, e0, ne;
    for (uint32_t k = 0; n > 0 && qp_desc_decoded(d, k, &b0, &nb, &e0, &ne); k++)
        for (uint32_t i = e0; i < e0 + ne; i++) {
            const qp_desc_edge_t *e = &d->edges[i];
            ret_site_t *s;
            if (e->kind == CFG_EDGE_CALLRET && e->ret_addr != 0
                && (s = site_at(sites, n, e->ret_addr)) != NULL
                && (s->block == QP_VIRT || e->from < s->block))
                s->block = e->from;
        }
    st->frames += c->nras;
    for (size_t i = 0; i < c->nras; i++) {
        const ret_site_t *s = site_at(sites, n, c->ras[i]);
        if (s != NULL && s->block != QP_VIRT) {
            abandoned[s->block]++;
            st->matched++;
        }
    }
    /* Every site is a frame's: those with a block were counted above. */
    uint32_t *blocks = left != NULL ? malloc((n ? n : 1) * sizeof(uint32_t)) : NULL;
    rc = left != NULL && blocks == NULL ? QP_ENOMEM : 0;
    for (size_t i = 0; blocks != NULL && i < n; i++)
        blocks[i] = sites[i].block;
    if (blocks != NULL)
        mark_left(d, blocks, n, left);
    free(blocks);
    free(sites);
    return rc;
}

/*
 * A lazy description: the block the loop of abandon_exec_blocks finds for a dump at PC,
 * from what the description keeps of each exec call site, in *AT when it can be an exec
 * call's block (QP_VIRT otherwise). E, the exec call block highest at or below PC, is
 * found unless a block starts above it and at or below PC; else the last block at E's
 * address is.
 */
static int
exec_block_lazy(const qp_desc_t *d, const uint32_t *execs, size_t nexecs, uint64_t pc,
                uint32_t *at)
{
    uint64_t e = 0;
    uint32_t eb = QP_VIRT, ecall = 0;
    *at = QP_VIRT;
    const qp_desc_keys_t *keys = d->keys; /* abandon_exec_blocks made them */
    for (size_t x = 0; x < nexecs; x++) {
        uint32_t i = execs[x];
        const qp_desc_call_t *c = &keys->calls[i];
        QP_CHECK(qp_desc_need_block(d, c->block));
        uint64_t ns = d->blocks[c->block].new_start;
        if (ns != 0 && ns <= pc && (ns > e || (ns == e && c->block > eb))) {
            e = ns;
            eb = c->block;
            ecall = i;
        }
    }
    if (eb == QP_VIRT)
        return 0;
    uint64_t next;
    uint32_t tie;
    QP_CHECK(qp_desc_exec_next(d, keys->index[ecall], &next, &tie));
    if (next == 0 || next > pc)
        *at = tie;
    return 0;
}

/*
 * Dumps taken before an exec that succeeded: the frame each was taken in is abandoned at
 * the exec's call block, which has a return edge (an exec may fail and return), unlike
 * exit's. The block holding the dump's pc (the hook before the call: the moved block
 * starting last at or before it, the one of highest index among equal starts) gets it.
 * One pass over the blocks for every dump of P (a lazy description: exec_block_lazy);
 * ST->execs counts those found.
 */
static int
abandon_exec_blocks(const qp_desc_t *d, const qp_profile_t *p, uint64_t *abandoned,
                    uint8_t *left, qp_backtrace_stats_t *st)
{
    size_t n = p->ndumps;
    uint64_t *best = calloc(n, sizeof(uint64_t));
    uint32_t *at = malloc(n * sizeof(uint32_t));
    if (best == NULL || at == NULL) {
        free(best);
        free(at);
        return QP_ENOMEM;
    }
    for (size_t k = 0; k < n; k++)
        at[k] = QP_VIRT;
    /* The exec call sites (key sites: qp_desc_keys), found once (chromium: 3 million
     * sites, a dump per process); EXECS holds their indices among the key sites. */
    size_t nexecs = 0;
    const qp_desc_keys_t *keys = qp_desc_keys(d);
    uint32_t *execs = keys != NULL ? malloc(((size_t)keys->n + 1) * sizeof(uint32_t)) : NULL;
    if (execs == NULL) {
        free(best);
        free(at);
        return QP_ENOMEM;
    }
    for (uint32_t i = 0; i < keys->n; i++)
        if (keys->calls[i].flags & QP_CALLF_EXEC)
            execs[nexecs++] = i;
    int rc = 0;
    for (size_t k = 0; d->lazy != NULL && k < n && rc == 0; k++)
        rc = exec_block_lazy(d, execs, nexecs, p->dumps[k].hdr.pc - p->dumps[k].hdr.bias,
                             &at[k]);
    for (uint32_t i = 0; d->lazy == NULL && i < d->hdr.nblocks; i++) {
        uint64_t ns = d->blocks[i].new_start;
        for (size_t k = 0; ns != 0 && k < n; k++)
            if (ns <= p->dumps[k].hdr.pc - p->dumps[k].hdr.bias
                && (at[k] == QP_VIRT || ns >= best[k])) {
                best[k] = ns;
                at[k] = i;
            }
    }
    for (size_t k = 0; rc == 0 && k < n; k++) {
        size_t x = 0;
        while (at[k] != QP_VIRT && x < nexecs && keys->calls[execs[x]].block != at[k])
            x++;
        if (at[k] != QP_VIRT && x < nexecs) {
            abandoned[at[k]]++;
            st->execs++;
        } else {
            at[k] = QP_VIRT; /* not an exec call's block: nothing abandoned there */
        }
    }
    if (rc == 0)
        mark_left(d, at, n, left);
    free(execs);
    free(best);
    free(at);
    return rc;
}

int
qp_backtrace_abandoned(qp_unwinder_t *u, const qp_desc_t *d, const qp_profile_t *p,
    uint64_t *abandoned, uint8_t *left, qp_backtrace_stats_t *st)
{
    qp_backtrace_stats_t local;
    if (st == NULL)
        st = &local;
    memset(st, 0, sizeof(*st));
    if (d == NULL || p == NULL || (d->hdr.nblocks && abandoned == NULL)
        || (p->ndumps && u == NULL))
        return QP_EINVAL;
    if (p->ndumps == 0)
        return 0;
    QP_CHECK(abandon_exec_blocks(d, p, abandoned, left, st));
    abandon_ctx_t c = { NULL, 0, 0, 0 };
    for (size_t i = 0; i < p->ndumps && !c.nomem; i++) {
        int why = qp_backtrace_walk(u, &p->dumps[i], on_return_address, &c);
        st->dumps++;
        st->incomplete += why != QP_BT_END && why != QP_BT_FOREIGN;
    }
    int rc = c.nomem ? QP_ENOMEM : abandon_frames(d, &c, abandoned, left, st);
    free(c.ras);
    return rc;
}
