/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Building one procedure (cfg_build.c runs the rounds): its traversal from its entries
 * (recursive descent, jump tables resolved as they are met, a jump of unknown targets
 * sweeping its own unreached bytes); cfg_blocks.c then forms its blocks and edges.
 */
#include <stdarg.h>
#include <stdio.h>

#include "cfg/cfg_trav_priv.h"

/* The longest backward window handed to the jump-table recogniser. */
#define JT_WINDOW 24


/*****************************************************************************
 * Small helpers
 */

/* Mark BP unsafe for the reason FMT..., kept in STRINGS. */
int
cfg_set_unsafe(cfg_str_vec_t *strings, cfg_bproc_t *bp, const char *fmt, ...)
{
    if (bp->p.unsafe != NULL)
        return 0; /* the first reason is the one reported */
    char buf[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    char *d = cfg_strdup(buf);
    if (d == NULL || CFG_VEC_PUSH(*strings, d) < 0) {
        free(d);
        return QP_ENOMEM;
    }
    bp->p.unsafe = d;
    return 0;
}

/* Offset of ADDR in the traversal map, or -1 when outside the procedure's ranges. */
int64_t
cfg_slot(const cfg_bproc_t *bp, uint64_t addr)
{
    uint64_t base = 0;
    for (size_t i = 0; i < bp->ranges.n; i++) {
        const cfg_range_t *r = &bp->ranges.v[i];
        if (addr >= r->start && addr < r->end)
            return (int64_t)(base + (addr - r->start));
        base += r->end - r->start;
    }
    return -1;
}

/* End of the range holding ADDR (which must be inside one). */
uint64_t
cfg_range_end(const cfg_bproc_t *bp, uint64_t addr)
{
    for (size_t i = 0; i < bp->ranges.n; i++)
        if (addr >= bp->ranges.v[i].start && addr < bp->ranges.v[i].end)
            return bp->ranges.v[i].end;
    return addr;
}

/* Decode at ADDR, reading no further than LIMIT (rebuilds find it decoded already). */
int
cfg_decode_at(cfg_builder_t *b, uint64_t addr, uint64_t limit, arch_insn_t *in)
{
    return cfg_image_decode(b->img, addr, limit, in);
}


int
cfg_callee_noreturn(const cfg_builder_t *b, uint64_t target)
{
    uint32_t i = cfg_proc_by_entry(b, target);
    return i != CFG_NONE && (cfg_discover_proc(b, i)->p.flags & CFG_PROC_NORETURN);
}

/* Does the memory slot at SLOT (a GOT entry) hold a function that never returns? */
static int
slot_noreturn(const cfg_image_t *img, uint64_t slot_addr)
{
    size_t lo = 0, hi = img->nrelocs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (img->relocs[mid].where < slot_addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < img->nrelocs && img->relocs[lo].where == slot_addr
        && cfg_name_is_noreturn(img->relocs[lo].sym);
}

int
cfg_indirect_call_noreturn(const cfg_image_t *img, const arch_insn_t *in)
{
    return (in->flags & ARCH_F_MEM_IND) && (in->flags & ARCH_F_RIPREL)
        && slot_noreturn(img, in->target);
}

/* Does the syscall at SC never return: exit, exit_group, rt_sigreturn (x86-64: 60, 231,
 * 15; AArch64: 93, 94, 139)? */
static int
syscall_noreturn(const cfg_image_t *img, const arch_insn_t *prev, const arch_insn_t *sc)
{
    long nr = cfg_syscall_nr(img, prev, sc);
    const long *no = cfg_image_isa(img)->sys_noreturn;
    return nr >= 0 && (nr == no[0] || nr == no[1] || nr == no[2]);
}

/* Remember TARGET (outside this procedure) as a possible new procedure entry. */
static int
note_external(trav_t *t, uint64_t target, uint32_t src)
{
    cfg_builder_t *b = t->b;
    if (!cfg_image_is_code(b->img, target))
        return 0;
    uint32_t i = cfg_discover_find(b, target);
    if (i != CFG_NONE && cfg_discover_proc(b, i)->p.entry == target) {
        /* A known entry: how it is used is noted after the round (another worker may
         * be building it). */
        if (cfg_discover_proc(b, i)->p.sources & src)
            return 0;
        QP_CHECK(CFG_VEC_PUSH(t->sc->known, i));
        return CFG_VEC_PUSH(t->sc->known, src);
    }
    if (i != CFG_NONE && src != CFG_SRC_CALL)
        return 0; /* a jump into another procedure's interior */
    QP_CHECK(CFG_VEC_PUSH(t->sc->new_entries, target));
    return CFG_VEC_PUSH(t->sc->new_srcs, src);
}

/*****************************************************************************
 * Traversal
 */

static int
push_work(trav_t *t, uint64_t addr)
{
    int64_t s = cfg_slot(t->bp, addr);
    if (s < 0)
        return 0;
    t->sc->map[s] |= M_LEADER;
    if (t->sc->map[s] & M_START)
        return 0;
    return CFG_VEC_PUSH(t->sc->work, addr);
}

/*
 * glibc skips the lock prefix when single-threaded: `je 1f; lock; 1: op`. A branch (whose
 * next instruction is at NEXT) to TARGET just after the lock prefix byte at NEXT is taken
 * as a branch to the locked instruction:
 * the same operation, atomic on that path too (the rewriter makes the jump go there),
 * so the instruction is one instruction of one block however it is reached. Else TARGET.
 */
uint64_t
cfg_lock_skip_target(cfg_builder_t *b, uint64_t next, uint64_t target)
{
    const uint8_t *p = cfg_image_ptr(b->img, target - 1, NULL);
    arch_insn_t locked, bare;
    if (target != next + 1 || p == NULL || *p != 0xf0
        || cfg_decode_at(b, target - 1, target + 15, &locked) < 0
        || !(locked.flags & ARCH_F_LOCK) || locked.kind != ARCH_KIND_SEQ
        || cfg_decode_at(b, target, target + 15, &bare) < 0
        || bare.len + 1 != locked.len)
        return target;
    return target - 1;
}

/* Branch to TARGET (the branch's next instruction is at NEXT): inside, a new leader;
 * outside, a possible new procedure. */
static int
branch_to(trav_t *t, uint64_t next, uint64_t target)
{
    if (cfg_slot(t->bp, target) >= 0)
        target = cfg_lock_skip_target(t->b, next, target);
    if (cfg_slot(t->bp, target) >= 0)
        return push_work(t, target);
    if (!cfg_image_is_code(t->b->img, target))
        return cfg_set_unsafe(&t->sc->strings, t->bp, "branch to non-code address 0x%llx",
                          (unsigned long long)target);
    return note_external(t, target, CFG_SRC_TAILCALL);
}

/* Does OP (an operand) address memory through register R? */
static int
mem_through(const arch_opnd_t *op, uint8_t r)
{
    return op->kind == ARCH_OPND_MEM && (op->base == r || op->index == r);
}

/*
 * Is the register R, just written by the instruction ending at A, used to address
 * memory within the next few instructions of its block? 1 or 0.
 */
static int
reg_addresses_soon(trav_t *t, uint64_t a, uint8_t r)
{
    for (int k = 0; k < 6; k++) {
        size_t avail;
        const uint8_t *p = cfg_image_ptr(t->b->img, a, &avail);
        arch_insn_t next;
        arch_ops_t o;
        if (p == NULL || cfg_decode_at(t->b, a, a + avail, &next) < 0
            || arch_decode_ops(p, avail, a, &o) < 0)
            return 0;
        if (mem_through(&o.src, r) || mem_through(&o.dst, r))
            return 1;
        if ((o.dst.kind == ARCH_OPND_REG && o.dst.reg == r) || next.kind != ARCH_KIND_SEQ)
            return 0; /* overwritten, or the block ends */
        a += next.len;
    }
    return 0;
}

/*
 * IN (rip-relative, into the procedure's own bytes) reads or writes them - or is a lea
 * whose register addresses memory within the next few instructions (`lea tab(%rip),%rax;
 * movslq (%rax,%rdi,4),%rdx`): those bytes are data; note where, for sweep_own_gaps. A
 * lea whose register is only jumped through (an interpreter's handler base) is not.
 */
static int
note_data_ref(trav_t *t, const arch_insn_t *in)
{
    size_t avail;
    const uint8_t *p = cfg_image_ptr(t->b->img, in->addr, &avail);
    arch_ops_t ops;
    if (p == NULL || arch_decode_ops(p, avail, in->addr, &ops) < 0 || ops.op != ARCH_OP_LEA
        || ops.dst.kind != ARCH_OPND_REG
        || reg_addresses_soon(t, in->addr + in->len, ops.dst.reg))
        return CFG_VEC_PUSH(t->data_refs, in->target);
    return 0;
}

/*
 * The address IN forms, for an ISA whose code builds addresses over several instructions
 * (AArch64: adrp + add, adrp + ldr; isa->code_ref): a code address taken (outside the
 * procedure) names a procedure, as x86-64's `lea main(%rip)` does; memory read in its own
 * bytes (a literal pool) is data, never swept for code.
 */
static int
note_code_ref(trav_t *t, const arch_insn_t *in)
{
    const cfg_image_t *img = t->b->img;
    size_t avail;
    const uint8_t *p = cfg_image_ptr(img, in->addr, &avail);
    uint64_t lim = cfg_range_end(t->bp, in->addr), ref;
    if (p == NULL || !(in->flags & ARCH_F_RIPREL))
        return 0;
    if (lim > in->addr && avail > lim - in->addr)
        avail = (size_t)(lim - in->addr);
    int kind = cfg_image_isa(img)->code_ref(p, avail, in->addr, &ref);
    if (kind == ARCH_REF_ADDR && ref % cfg_image_isa(img)->insn_align != 0)
        return 0; /* not code: a string or a table among the instructions */
    if (kind == ARCH_REF_ADDR && cfg_slot(t->bp, ref) < 0 && cfg_image_is_code(img, ref))
        return note_external(t, ref, CFG_SRC_ADDR);
    if (kind == ARCH_REF_ADDR && cfg_slot(t->bp, ref) >= 0)
        return CFG_VEC_PUSH(t->own_addrs, ref);
    if (kind == ARCH_REF_MEM && cfg_slot(t->bp, ref) >= 0)
        return CFG_VEC_PUSH(t->data_refs, ref);
    return 0;
}

static int
trace_from(trav_t *t, uint64_t addr)
{
    cfg_builder_t *b = t->b;
    cfg_bproc_t *bp = t->bp;
    uint8_t *map = t->sc->map;
    arch_insn_t prev = { 0 };
    for (;;) {
        int64_t s = cfg_slot(bp, addr);
        if (s < 0)
            return 0; /* fell off: block formation reports it */
        if (map[s] & M_START)
            return 0;
        if (map[s] & M_INSIDE) {
            /* glibc skips the lock prefix when single-threaded: je 1f; lock; 1: op. */
            const uint8_t *pb = cfg_image_ptr(b->img, addr - 1, NULL);
            if (s > 0 && (map[s - 1] & M_START) && pb != NULL && *pb == 0xf0)
                return cfg_set_unsafe(&t->sc->strings, bp, "jump over a lock prefix at 0x%llx",
                                  (unsigned long long)addr - 1);
            return cfg_set_unsafe(&t->sc->strings, bp, "jump into the middle of an instruction at 0x%llx",
                              (unsigned long long)addr);
        }
        uint64_t lim = cfg_range_end(bp, addr);
        arch_insn_t in;
        if (cfg_decode_at(b, addr, lim, &in) < 0) {
            /* Cut by the end of its range, where other code starts: that code's entry
             * lies inside an instruction this code runs (cfg_build.c's
             * check_entries_inside_insns keeps it where it is). */
            arch_insn_t whole;
            if (cfg_decode_at(b, addr, 0, &whole) == 0 && addr + whole.len > lim) {
                bp->runs_into = lim;
                return cfg_set_unsafe(&t->sc->strings, bp,
                    "an instruction at 0x%llx runs past its code's end into 0x%llx",
                    (unsigned long long)addr, (unsigned long long)lim);
            }
            return cfg_set_unsafe(&t->sc->strings, bp, "invalid instruction at 0x%llx", (unsigned long long)addr);
        }
        for (uint8_t k = 1; k < in.len; k++)
            if (map[s + k] & (M_START | M_INSIDE)) {
                const uint8_t *pb = cfg_image_ptr(b->img, addr, NULL);
                if (k == 1 && pb != NULL && *pb == 0xf0)
                    return cfg_set_unsafe(&t->sc->strings, bp, "jump over a lock prefix at 0x%llx",
                                      (unsigned long long)addr);
                return cfg_set_unsafe(&t->sc->strings, bp, "overlapping instructions at 0x%llx",
                                  (unsigned long long)addr);
            }
        map[s] |= M_START | (uint8_t)(in.len << M_LEN_SHIFT);
        for (uint8_t k = 1; k < in.len; k++)
            map[s + k] |= M_INSIDE;
        switch (in.kind) {
        case ARCH_KIND_CALL:
            if (in.target == addr + in.len)
                break;
            /* fall through */
        case ARCH_KIND_JCC:
        case ARCH_KIND_JMP:
        case ARCH_KIND_CALL_IND:
        case ARCH_KIND_JMP_IND:
        case ARCH_KIND_RET:
        case ARCH_KIND_HALT: map[s] |= M_END; break;
        case ARCH_KIND_SYSCALL:
            if (syscall_noreturn(b->img, &prev, &in))
                map[s] |= M_END;
            break;
        default: break;
        }
        if ((in.flags & ARCH_F_PRIV) && in.kind != ARCH_KIND_HALT)
            QP_CHECK(cfg_set_unsafe(&t->sc->strings, bp, "privileged instruction at 0x%llx",
                                (unsigned long long)addr));
        uint64_t next = addr + in.len;
        if (cfg_image_isa(b->img)->code_ref != NULL)
            QP_CHECK(note_code_ref(t, &in));
        /* lea main(%rip),%rdi: a code address taken by code names a procedure. */
        else if ((in.flags & ARCH_F_RIPREL) && in.kind != ARCH_KIND_JMP_IND
            && in.kind != ARCH_KIND_CALL_IND && cfg_slot(bp, in.target) < 0
            && cfg_image_is_code(b->img, in.target))
            QP_CHECK(note_external(t, in.target, CFG_SRC_ADDR));
        /* Its own bytes read as data (not a lea's address): never swept for code. */
        if (cfg_image_isa(b->img)->code_ref == NULL
            && (in.flags & ARCH_F_RIPREL) && in.kind != ARCH_KIND_JMP_IND
            && in.kind != ARCH_KIND_CALL_IND && cfg_slot(bp, in.target) >= 0)
            QP_CHECK(note_data_ref(t, &in));
        switch (in.kind) {
        case ARCH_KIND_JCC:
            QP_CHECK(branch_to(t, next, in.target));
            QP_CHECK(push_work(t, next));
            return 0;
        case ARCH_KIND_JMP:
            return branch_to(t, next, in.target);
        case ARCH_KIND_CALL:
            if (in.target == next) /* call next; pop: reads the pc, not a call */
                break;
            /* A call to a non-code address is a call to an undefined weak function
             * (address 0 in static binaries), guarded at run time: it stays a call. */
            if (cfg_image_is_code(b->img, in.target))
                QP_CHECK(note_external(t, in.target, CFG_SRC_CALL));
            if (cfg_callee_noreturn(b, in.target))
                return 0;
            return push_work(t, next);
        case ARCH_KIND_CALL_IND:
            if (cfg_indirect_call_noreturn(b->img, &in))
                return 0;
            return push_work(t, next);
        case ARCH_KIND_JMP_IND:
            return CFG_VEC_PUSH(t->pending, addr);
        case ARCH_KIND_RET:
        case ARCH_KIND_HALT:
            return 0;
        case ARCH_KIND_SYSCALL:
            if (syscall_noreturn(b->img, &prev, &in))
                return 0;
            break;
        default:
            break;
        }
        prev = in;
        addr = next;
    }
}

/* The instructions linearly before the jump at J (J last), for the table recogniser;
 * PATH: not through an instruction that does not fall through (a jmp, ret, ud2: the
 * code after it is reached by other ways only). */
static size_t
jump_window(trav_t *t, uint64_t j, arch_insn_t *w, int path)
{
    cfg_builder_t *b = t->b;
    arch_insn_t tmp[JT_WINDOW];
    size_t n = 0;
    uint64_t cur = j;
    uint64_t lim = cfg_range_end(t->bp, j);
    if (cfg_decode_at(b, cur, lim, &tmp[n]) < 0)
        return 0;
    n++;
    while (n < JT_WINDOW) {
        int found = 0;
        for (uint64_t back = 1; back <= ARCH_MAX_INSN && back <= cur; back++) {
            int64_t s = cfg_slot(t->bp, cur - back);
            if (s < 0)
                break;
            if (!(t->sc->map[s] & M_START))
                continue;
            arch_insn_t in;
            if (cfg_decode_at(b, cur - back, lim, &in) == 0 && in.len == back
                && (!path || (in.kind != ARCH_KIND_JMP && in.kind != ARCH_KIND_JMP_IND
                              && in.kind != ARCH_KIND_RET && in.kind != ARCH_KIND_HALT))) {
                tmp[n++] = in;
                cur -= back;
                found = 1;
            }
            break;
        }
        if (!found)
            break;
    }
    for (size_t i = 0; i < n; i++)
        w[i] = tmp[n - 1 - i];
    return n;
}

/* Internal code addresses held as data: possible targets of computed jumps. */
static int
push_addr_taken_labels(trav_t *t)
{
    const cfg_builder_t *b = t->b;
    for (size_t r = 0; r < t->bp->ranges.n; r++) {
        const cfg_range_t *rg = &t->bp->ranges.v[r];
        size_t lo = cfg_u64_lower_bound(b->addr_taken.v, b->addr_taken.n, rg->start);
        for (; lo < b->addr_taken.n && b->addr_taken.v[lo] < rg->end; lo++)
            if (b->addr_taken.v[lo] != t->bp->p.entry)
                QP_CHECK(push_work(t, b->addr_taken.v[lo]));
    }
    return 0;
}

static int
has_addr_taken_labels(const cfg_builder_t *b, const cfg_bproc_t *bp)
{
    for (size_t r = 0; r < bp->ranges.n; r++) {
        size_t lo = cfg_u64_lower_bound(b->addr_taken.v, b->addr_taken.n, bp->ranges.v[r].start);
        for (; lo < b->addr_taken.n && b->addr_taken.v[lo] < bp->ranges.v[r].end; lo++)
            if (b->addr_taken.v[lo] != bp->p.entry)
                return 1;
    }
    return 0;
}

/* Do all entries of T land in BP's ranges? A scanned (unbounded) table is cut at its
 * first entry outside; a bounded one is refused. */
static int
table_in_ranges(const cfg_builder_t *b, const cfg_bproc_t *bp, cfg_table_t *t)
{
    if (bp->ranges.n == 1)
        return 1; /* the recogniser checked [lo, hi) already */
    for (uint32_t i = 0; i < t->nentries; i++)
        if (cfg_slot(bp, cfg_jtab_entry(b->img, t, i)) < 0) {
            if (t->bounded || i < 2)
                return 0;
            t->nentries = i;
            return 1;
        }
    return 1;
}

/*
 * Does the jump at the end of W go through a pointer loaded from memory without an index
 * (`mov 0x20(%rax),%rax; jmp *%rax`, `jmp *0x18(%rdx)`, a GOT slot) or a constant? In a
 * procedure without
 * address-taken labels that is a tail call through a function pointer (a vtable, a
 * callback), not a jump inside the procedure.
 */
static int
jumps_through_pointer(const cfg_image_t *img, const arch_insn_t *w, size_t n)
{
    arch_ops_t ops;
    size_t avail;
    const uint8_t *p = cfg_image_ptr(img, w[n - 1].addr, &avail);
    if (p == NULL || arch_decode_ops(p, avail, w[n - 1].addr, &ops) < 0)
        return 0;
    const arch_opnd_t *o = &ops.src;
    if (o->kind == ARCH_OPND_MEM)
        return o->index == ARCH_REG_NONE && o->base != ARCH_REG_PC && !o->seg;
    if (o->kind != ARCH_OPND_REG)
        return 0;
    uint8_t reg = o->reg;
    for (size_t i = n - 1; i-- > 0;) {
        p = cfg_image_ptr(img, w[i].addr, &avail);
        if (p == NULL || arch_decode_ops(p, avail, w[i].addr, &ops) < 0)
            return 0;
        if (!(ops.regs_written & (1u << reg)))
            continue;
        if (ops.op != ARCH_OP_MOV || ops.dst.kind != ARCH_OPND_REG || ops.dst.reg != reg)
            return 0;
        /* A constant (a weak function's address, 0 if absent) or one memory slot (a
         * struct field, a GOT entry): not an index into a table of this procedure. */
        if (ops.src.kind == ARCH_OPND_IMM)
            return 1;
        return ops.dst.size == 8 && ops.src.kind == ARCH_OPND_MEM
            && ops.src.index == ARCH_REG_NONE && !ops.src.seg;
    }
    return 0;
}

int
cfg_rodata_lea(trav_t *t, uint64_t a, uint64_t end, arch_insn_t *in /*OUT*/, uint8_t *reg /*OUT*/)
{
    cfg_builder_t *b = t->b;
    if (cfg_decode_at(b, a, end, in) < 0 || !(in->flags & ARCH_F_RIPREL)
        || in->kind != ARCH_KIND_SEQ)
        return 0;
    const cfg_section_t *sec = cfg_image_section_at(b->img, in->target);
    if (sec == NULL || (sec->flags & (CFG_SEC_CODE | CFG_SEC_WRITE)))
        return 0;
    size_t avail;
    const uint8_t *p = cfg_image_ptr(b->img, a, &avail);
    arch_ops_t ops;
    if (p == NULL || arch_decode_ops(p, avail, a, &ops) < 0 || ops.op != ARCH_OP_LEA
        || ops.dst.kind != ARCH_OPND_REG)
        return 0;
    *reg = ops.dst.reg;
    return 1;
}

/* Collect up to CAP distinct rip-relative `lea`s of read-only data in the procedure's
 * decoded code (the candidates for a hoisted table base). */
static size_t
collect_leas(trav_t *t, arch_insn_t *out, size_t cap)
{
    const cfg_bproc_t *bp = t->bp;
    size_t n = 0;
    uint64_t base = 0;
    for (size_t r = 0; r < bp->ranges.n && n < cap; r++) {
        const cfg_range_t *rg = &bp->ranges.v[r];
        for (uint64_t a = rg->start; a < rg->end && n < cap; a++) {
            arch_insn_t in;
            uint8_t reg;
            if (!(t->sc->map[base + (a - rg->start)] & M_START)
                || !cfg_rodata_lea(t, a, rg->end, &in, &reg))
                continue;
            int seen = 0;
            for (size_t k = 0; k < n && !seen; k++)
                seen = out[k].target == in.target;
            if (!seen)
                out[n++] = in;
        }
        base += rg->end - rg->start;
    }
    return n;
}

/*
 * A table whose base register was loaded far from the jump (clang hoists
 * `lea T(%rip),%rbx` out of an interpreter loop): try each rip-relative `lea` of the
 * procedure into a register, pointing at read-only data, in front of the window. Only a
 * table bounded by a compare, with every entry on code of the procedure, is accepted.
 */
static int
match_hoisted_base(trav_t *t, const arch_insn_t *leas, size_t nleas, const arch_insn_t *w,
                   size_t n, uint64_t lo, uint64_t hi, cfg_table_t *tab, size_t *which)
{
    arch_insn_t w2[JT_WINDOW + 1];
    /* Calls keep the base (callee-saved) register: start after the last one. */
    size_t from = 0;
    for (size_t k = 0; k + 1 < n; k++)
        if (w[k].kind == ARCH_KIND_CALL || w[k].kind == ARCH_KIND_CALL_IND)
            from = k + 1;
    for (size_t c = 0; c < nleas; c++) {
        w2[0] = leas[c];
        memcpy(w2 + 1, w + from, (n - from) * sizeof(arch_insn_t));
        cfg_insn_window_t win = { w2, n - from + 1 };
        if (cfg_jtab_match(t->b->img, &win, lo, hi, tab) && tab->bounded
            && table_in_ranges(t->b, t->bp, tab)) {
            if (which != NULL)
                *which = c;
            return 1;
        }
    }
    return 0;
}

/* Callee-saved registers (ARCH_REG_* numbering: rbx, rbp, r12-r15), which calls keep. */
static int
callee_saved(uint8_t r)
{
    return r == 4 || r == 6 || (r >= 13 && r <= 16);
}

#define HOIST_MAX 64 /* `lea`s tried when the first 8 were not the table's */

/* The register the `lea` IN writes, or ARCH_REG_NONE. */
static uint8_t
lea_dst(trav_t *t, const arch_insn_t *in)
{
    size_t avail;
    const uint8_t *p = cfg_image_ptr(t->b->img, in->addr, &avail);
    arch_ops_t ops;
    return p != NULL && arch_decode_ops(p, avail, in->addr, &ops) == 0 && ops.op == ARCH_OP_LEA
        ? ops.dst.reg : ARCH_REG_NONE;
}


/* The procedure's rip-relative `lea`s of read-only data into callee-saved registers
 * (a base kept across calls), after the first SKIP of collect_leas' (at most CAP; their
 * destinations in REGS). The first 8 are matched without a proof, as before; the proof
 * would reject 12 of gdb's, mostly because another jump of the procedure is not
 * resolved (it may go anywhere): whether any of them is wrong is not known. */
static size_t
collect_far_leas(trav_t *t, size_t skip, arch_insn_t *out, uint8_t *regs, size_t cap)
{
    arch_insn_t all[8 + HOIST_MAX];
    size_t n = collect_leas(t, all, skip + cap < 8 + HOIST_MAX ? skip + cap : 8 + HOIST_MAX), k = 0;
    for (size_t i = skip; i < n && k < cap; i++) {
        uint8_t r = lea_dst(t, &all[i]);
        if (!callee_saved(r))
            continue;
        regs[k] = r;
        out[k++] = all[i];
    }
    return k;
}

/* A table for jump J with a base among the `lea`s CANDS (their registers REGS) in front of
 * window W[0..N), proven after the traversal (a hoist_proof_t): 1, 0, or QP_ENOMEM. */
static int
match_proven(trav_t *t, uint64_t j, const arch_insn_t *cands, const uint8_t *regs, size_t ncands,
             const arch_insn_t *w, size_t n, uint64_t lo, uint64_t hi, cfg_table_t *tab)
{
    size_t c;
    if (!match_hoisted_base(t, cands, ncands, w, n, lo, hi, tab, &c) || regs[c] == ARCH_REG_NONE)
        return 0;
    QP_CHECK(CFG_VEC_PUSH(t->proofs, ((hoist_proof_t) { j, cands[c].addr, regs[c] })));
    return 1;
}

/*
 * The indirect jump at J, for an ISA that has no operand decoder for cfg_jtab.c but
 * recognises its own switch tables and pointer jumps (AArch64: isa->jump_table,
 * isa->ptr_jump), given the procedure's code up to the jump. A table is taken only
 * with a proven bound and every entry on the procedure's code.
 */
static int
resolve_other(trav_t *t, uint64_t j, int *labels_pushed)
{
    cfg_builder_t *b = t->b;
    cfg_bproc_t *bp = t->bp;
    const arch_isa_t *isa = cfg_image_isa(b->img);
    uint64_t from = j;
    for (size_t r = 0; r < bp->ranges.n; r++)
        if (j >= bp->ranges.v[r].start && j < bp->ranges.v[r].end)
            from = j - bp->ranges.v[r].start > 256 ? j - 256 : bp->ranges.v[r].start;
    size_t avail;
    const uint8_t *p = cfg_image_ptr(b->img, from, &avail);
    arch_insn_t jmp;
    if (p == NULL || cfg_decode_at(b, j, 0, &jmp) < 0 || avail < j - from + jmp.len) {
        t->unresolved++;
        return 0;
    }
    size_t len = (size_t)(j - from) + jmp.len;
    arch_jtab_t jt;
    slot_proof_t pf;
    int in_slot = 0;
    if (isa->jump_table != NULL && isa->jump_table(p, len, from, &jt) == 0 && jt.count > 0
        && (jt.slot_load == 0 || (in_slot = cfg_slot_find(t, j, &jt, &pf)) == 1)) {
        cfg_table_t tab = { .jump = j, .addr = jt.table, .base = jt.base,
                            .nentries = jt.count, .entry_size = jt.entry_size,
                            .relative = 1, .bounded = 1, .shift = jt.shift,
                            .zext = !jt.is_signed, .anchor = jt.anchor };
        int ok = 1;
        for (uint32_t i = 0; i < tab.nentries && ok; i++) {
            uint64_t e = cfg_jtab_entry(b->img, &tab, i);
            ok = e % isa->insn_align == 0 && cfg_slot(bp, e) >= 0
                 && cfg_image_is_code(b->img, e);
        }
        if (ok) {
            QP_CHECK(CFG_VEC_PUSH(bp->tables, tab));
            if (in_slot)
                QP_CHECK(CFG_VEC_PUSH(t->slot_proofs, pf));
            for (uint32_t i = 0; i < tab.nentries; i++)
                QP_CHECK(push_work(t, cfg_jtab_entry(b->img, &tab, i)));
            return 0;
        }
    }
    if (has_addr_taken_labels(b, bp)) {
        if (!*labels_pushed)
            QP_CHECK(push_addr_taken_labels(t));
        *labels_pushed = 1;
    } else if (isa->ptr_jump != NULL && isa->ptr_jump(p, len, from))
        QP_CHECK(CFG_VEC_PUSH(t->ptr_jumps, j));
    else
        t->unresolved++;
    return 0;
}

static int
resolve_pending(trav_t *t)
{
    cfg_builder_t *b = t->b;
    cfg_bproc_t *bp = t->bp;
    int labels_pushed = 0;
    arch_insn_t leas[8], far[HOIST_MAX];
    uint8_t lea_regs[8], far_regs[HOIST_MAX];
    long nleas = -1, nfar = -1; /* collected at the first jump that needs them */
    while (t->pending.n > 0) {
        uint64_t j = t->pending.v[--t->pending.n];
        if (cfg_image_isa(b->img)->decode_ops == NULL) {
            QP_CHECK(resolve_other(t, j, &labels_pushed));
            continue;
        }
        arch_insn_t w[JT_WINDOW];
        size_t n = jump_window(t, j, w, 0);
        if (n == 0)
            continue;
        const arch_insn_t *jmp = &w[n - 1];
        if ((jmp->flags & ARCH_F_MEM_IND) && (jmp->flags & ARCH_F_RIPREL))
            continue; /* through one memory slot (GOT, PLT): a tail call */
        cfg_insn_window_t win = { w, n };
        cfg_table_t tab;
        /* Entries may land in the main part or in a cold fragment (gcc puts rare
         * cases in foo.cold): match within the hull of the ranges, then check. */
        uint64_t lo = bp->ranges.v[0].start, hi = bp->ranges.v[0].end;
        for (size_t r = 1; r < bp->ranges.n; r++) {
            lo = bp->ranges.v[r].start < lo ? bp->ranges.v[r].start : lo;
            hi = bp->ranges.v[r].end > hi ? bp->ranges.v[r].end : hi;
        }
        int found = cfg_jtab_match(b->img, &win, lo, hi, &tab) && table_in_ranges(b, bp, &tab);
        if (!found && nleas < 0) {
            nleas = (long)collect_leas(t, leas, sizeof(leas) / sizeof(leas[0]));
            for (long k = 0; k < nleas; k++)
                lea_regs[k] = lea_dst(t, &leas[k]);
        }
        if (!found && nleas == 8 && nfar < 0)
            nfar = (long)collect_far_leas(t, 8, far, far_regs, HOIST_MAX);
        if (!found)
            found = match_hoisted_base(t, leas, (size_t)nleas, w, n, lo, hi, &tab, NULL);
        int far_ok = 1;
        for (size_t k = 0; t->no_far != NULL && k < t->no_far->n && far_ok; k++)
            far_ok = t->no_far->v[k] != j;
        /* More `lea`s (proven after the traversal), then, when the linear window ran
         * through a jmp into code that is not this path (lua5.4: `jbe; jmp` before the
         * switch's block, reached by a jg), the path's window alone with any `lea`. */
        arch_insn_t wp[JT_WINDOW];
        size_t np = !found && far_ok ? jump_window(t, j, wp, 1) : 0;
        if (!found && far_ok && nfar > 0)
            QP_CHECK(found = match_proven(t, j, far, far_regs, (size_t)nfar, w, n, lo, hi, &tab));
        if (!found && np > 0 && np < n) {
            cfg_insn_window_t winp = { wp, np };
            found = cfg_jtab_match(b->img, &winp, lo, hi, &tab) && table_in_ranges(b, bp, &tab);
            if (!found)
                QP_CHECK(found = match_proven(t, j, leas, lea_regs, (size_t)nleas, wp, np, lo, hi, &tab));
            if (!found && nfar > 0)
                QP_CHECK(found = match_proven(t, j, far, far_regs, (size_t)nfar, wp, np, lo, hi, &tab));
        }
        if (found)
            found = cfg_scan_cut(t, &tab);
        if (found) {
            QP_CHECK(CFG_VEC_PUSH(bp->tables, tab));
            for (uint32_t i = 0; i < tab.nentries; i++)
                QP_CHECK(push_work(t, cfg_jtab_entry(b->img, &tab, i)));
        } else if (has_addr_taken_labels(b, bp)) {
            if (!labels_pushed)
                QP_CHECK(push_addr_taken_labels(t));
            labels_pushed = 1;
        } else if (jumps_through_pointer(b->img, w, n)) {
            QP_CHECK(CFG_VEC_PUSH(t->ptr_jumps, j));
        } else
            t->unresolved++;
    }
    return 0;
}

/*
 * Does [A, END) hold code up to a jump or a return (or up to END, unless JUMP_NEEDED):
 * every instruction valid, none privileged, none reaching past END? Then a jump may
 * well go there.
 */
static int
looks_like_code(trav_t *t, uint64_t a, uint64_t end, int jump_needed)
{
    while (a < end) {
        arch_insn_t in;
        if (cfg_decode_at(t->b, a, end, &in) < 0 || (in.flags & ARCH_F_PRIV)
            || a + in.len > end)
            return 0;
        if (in.kind == ARCH_KIND_JMP || in.kind == ARCH_KIND_JMP_IND || in.kind == ARCH_KIND_RET)
            return 1;
        a += in.len;
    }
    return !jump_needed;
}

/*
 * A jump of unknown targets may go anywhere in its procedure's bytes (an interpreter
 * whose handlers sit at fixed strides: `jmp *(base + 32 * op)`). The bytes of the
 * procedure's ranges no known way reaches are swept: after the padding, each run that
 * looks like code is traced from its first instruction, a gap entry. Data left alone.
 * *PUSHED: an entry was found (the traversal goes on, and the sweep again after it).
 */
static int
sweep_own_gaps(trav_t *t, int *pushed)
{
    const cfg_bproc_t *bp = t->bp;
    const uint8_t *map = t->sc->map;
    uint64_t base = 0;
    *pushed = 0;
    for (size_t r = 0; r < bp->ranges.n; r++) {
        const cfg_range_t *rg = &bp->ranges.v[r];
        uint64_t len = rg->end - rg->start;
        for (uint64_t off = 0; off < len;) {
            if (map[base + off] & (M_START | M_INSIDE)) {
                off++;
                continue;
            }
            uint64_t e = off;
            while (e < len && !(map[base + e] & (M_START | M_INSIDE)))
                e++;
            uint64_t a = rg->start + off, end = rg->start + e;
            size_t avail;
            const uint8_t *p = cfg_image_ptr(t->b->img, a, &avail);
            if (p != NULL) {
                size_t n = (size_t)(end - a) < avail ? (size_t)(end - a) : avail;
                a += cfg_padding_len(cfg_image_isa(t->b->img), p, n, a);
                int seen = 0; /* once traced its bytes are marked: never, but never loop */
                for (size_t k = 0; k < t->gap_entries.n && !seen; k++)
                    seen = t->gap_entries.v[k] == a;
                /* Bytes the procedure reads are its data (a table in .text): code may
                 * come before them in the run, none from them on. */
                uint64_t lim = end;
                for (size_t k = 0; k < t->data_refs.n && !seen; k++) {
                    uint64_t d = t->data_refs.v[k];
                    if (d >= rg->start + off && d <= a)
                        seen = 1;
                    else if (d > a && d < lim)
                        lim = d;
                }
                if (a < lim && !seen && looks_like_code(t, a, lim, lim < end)) {
                    QP_CHECK(CFG_VEC_PUSH(t->gap_entries, a));
                    *pushed = 1;
                    return push_work(t, a); /* traced first: it may reach what follows */
                }
            }
            off = e;
        }
        base += len;
    }
    return 0;
}

/*
 * The addresses of its own bytes that the procedure's code forms and its flow does not
 * reach (glibc's AArch64 _start passes `__wrap_main`, inside its symbol's size, after
 * the call that never returns): entries of procedures of their own, as a call into the
 * interior would make them.
 */
static int
own_addr_entries(trav_t *t)
{
    for (size_t k = 0; k < t->own_addrs.n; k++) {
        int64_t s = cfg_slot(t->bp, t->own_addrs.v[k]);
        if (s < 0 || (t->sc->map[s] & (M_START | M_INSIDE))
            || !cfg_image_is_code(t->b->img, t->own_addrs.v[k]))
            continue;
        QP_CHECK(CFG_VEC_PUSH(t->sc->new_entries, t->own_addrs.v[k]));
        QP_CHECK(CFG_VEC_PUSH(t->sc->new_srcs, (uint32_t)CFG_SRC_ADDR));
    }
    t->own_addrs.n = 0;
    return 0;
}

int
cfg_traverse(trav_t *t)
{
    cfg_builder_t *b = t->b;
    QP_CHECK(push_work(t, t->bp->p.entry));
    for (size_t k = 0; k < t->bp->extra_entries.n; k++)
        QP_CHECK(push_work(t, t->bp->extra_entries.v[k]));
    /* Exception landing pads in the procedure's ranges: the unwinder jumps there. */
    const cfg_u64_vec_t *lp = &b->landing_pads;
    for (size_t r = 0; r < t->bp->ranges.n; r++) {
        size_t lo = cfg_u64_lower_bound(lp->v, lp->n, t->bp->ranges.v[r].start);
        for (; lo < lp->n && lp->v[lo] < t->bp->ranges.v[r].end; lo++)
            QP_CHECK(push_work(t, lp->v[lo]));
    }
    for (;;) {
        while (t->sc->work.n > 0) {
            uint64_t a = t->sc->work.v[--t->sc->work.n];
            QP_CHECK(trace_from(t, a));
        }
        if (t->pending.n == 0) {
            int pushed = 0;
            if (t->unresolved > 0)
                QP_CHECK(sweep_own_gaps(t, &pushed));
            if (!pushed)
                return own_addr_entries(t);
            continue;
        }
        QP_CHECK(resolve_pending(t));
    }
}

/*
 * Proving a hoisted table base (the tables resolve_pending matched with one of the
 * procedure's many `lea`s): from every place where the base register may hold another
 * value - the procedure's entries (the caller's value), right after each other write of
 * it (pop, mov, xor...; any call, for a register calls need not keep) - no way through
 * the traversed code reaches the jump without passing the `lea`. Ways go through calls, both ways of
 * a branch, the tables' entries; a jump whose targets are not known (other than a tail
 * call through a pointer) makes the proof fail. 1 proven, 0 not, or QP_ENOMEM.
 */
static int
hoist_holds(trav_t *t, const hoist_proof_t *pf)
{
    cfg_builder_t *b = t->b;
    const cfg_bproc_t *bp = t->bp;
    size_t total = 0;
    for (size_t r = 0; r < bp->ranges.n; r++)
        total += bp->ranges.v[r].end - bp->ranges.v[r].start;
    uint8_t *seen = calloc(total + 1, 1);
    cfg_u64_vec_t q = { 0 };
    int rc = seen ? 0 : QP_ENOMEM, proven = 1;
    rc = rc ? rc : CFG_VEC_PUSH(q, bp->p.entry);
    for (size_t k = 0; rc == 0 && k < bp->extra_entries.n; k++)
        rc = CFG_VEC_PUSH(q, bp->extra_entries.v[k]);
    for (size_t k = 0; rc == 0 && k < b->landing_pads.n; k++)
        if (cfg_slot(bp, b->landing_pads.v[k]) >= 0)
            rc = CFG_VEC_PUSH(q, b->landing_pads.v[k]);
    /* Each other write of the register: the next instruction holds another value. The
     * queue's entries from here on are "after A" (marked by the high bit). */
    uint64_t base = 0;
    for (size_t r = 0; rc == 0 && r < bp->ranges.n; r++) {
        const cfg_range_t *rg = &bp->ranges.v[r];
        for (uint64_t off = 0; rc == 0 && off < rg->end - rg->start; off++) {
            uint8_t m = t->sc->map[base + off];
            uint64_t a = rg->start + off;
            if (!(m & M_START) || a == pf->lea)
                continue;
            size_t avail;
            const uint8_t *p = cfg_image_ptr(b->img, a, &avail);
            arch_ops_t ops;
            if (p == NULL || arch_decode_ops(p, avail, a, &ops) < 0)
                proven = 0; /* decoded during the traversal: cannot happen */
            else if ((ops.regs_written & (1u << pf->reg))
                     || (ops.op == ARCH_OP_CALL && !callee_saved(pf->reg)))
                rc = CFG_VEC_PUSH(q, a | (1ull << 63)); /* a call clobbers a scratch one */
        }
        base += rg->end - rg->start;
    }
    if (rc == 0 && proven)
        rc = cfg_ways_pass(t, &q, seen, pf->lea, pf->jump);
    else
        rc = rc < 0 ? rc : 0;
    free(seen);
    CFG_VEC_FREE(q);
    return rc;
}

/*
 * The walk of both proofs (hoist_holds, cfg_slot_holds): from the places in Q (one with
 * the high bit set: the ways on from the instruction there, not the instruction), every
 * way through T's traversed code must meet DEF before USE. Ways go through calls (they
 * come back), both ways of a branch, the tables' entries; a jump whose targets are not
 * known (other than a tail call through a pointer) fails the proof, and so does code
 * that cannot be decoded. SEEN: a byte per byte of the procedure's ranges, zeroed.
 * 1 proven, 0 not, or QP_ENOMEM; Q is used up.
 */
int
cfg_ways_pass(trav_t *t, cfg_u64_vec_t *q, uint8_t *seen, uint64_t def, uint64_t use)
{
    cfg_builder_t *b = t->b;
    const cfg_bproc_t *bp = t->bp;
    int rc = 0;
    while (rc == 0 && q->n > 0) {
        uint64_t a = q->v[--q->n];
        int after = (a >> 63) != 0;
        a &= ~(1ull << 63);
        int64_t s = cfg_slot(bp, a);
        if (s < 0 || !(t->sc->map[s] & M_START))
            continue; /* out of the procedure (a tail call), or not code */
        if (!after) {
            if (seen[s] || a == def)
                continue;
            if (a == use)
                return 0;
            seen[s] = 1;
        }
        arch_insn_t in;
        if (cfg_decode_at(b, a, cfg_range_end(bp, a), &in) < 0)
            return 0;
        uint64_t next = a + in.len;
        switch (in.kind) {
        case ARCH_KIND_RET:
        case ARCH_KIND_HALT: break;
        case ARCH_KIND_JMP: rc = CFG_VEC_PUSH(*q, in.target); break;
        case ARCH_KIND_JCC:
            rc = CFG_VEC_PUSH(*q, in.target);
            rc = rc ? rc : CFG_VEC_PUSH(*q, next);
            break;
        case ARCH_KIND_JMP_IND: {
            const cfg_table_t *tab = NULL;
            for (size_t k = 0; k < bp->tables.n && tab == NULL; k++)
                if (bp->tables.v[k].jump == a)
                    tab = &bp->tables.v[k];
            if (tab != NULL) {
                for (uint32_t i = 0; rc == 0 && i < tab->nentries; i++)
                    rc = CFG_VEC_PUSH(*q, cfg_jtab_entry(b->img, tab, i));
                break;
            }
            int tail = 0;
            for (size_t k = 0; k < t->ptr_jumps.n && !tail; k++)
                tail = t->ptr_jumps.v[k] == a;
            if (!tail)
                return 0; /* it may go anywhere */
            break;
        }
        default: rc = CFG_VEC_PUSH(*q, next); break; /* calls come back */
        }
    }
    return rc < 0 ? rc : 1;
}

/* Prove the hoisted table bases resolve_pending took: 0, or 1 when one does not hold
 * (its jump added to NO_FAR: the procedure is built again without that table, whose
 * jump stays unresolved as before), or QP_ENOMEM. */
int
cfg_verify_hoisted(trav_t *t, cfg_u64_vec_t *no_far)
{
    for (size_t k = 0; k < t->proofs.n; k++) {
        const hoist_proof_t *pf = &t->proofs.v[k];
        int ok = hoist_holds(t, pf);
        if (ok < 0)
            return ok;
        if (!ok) {
            QP_CHECK(CFG_VEC_PUSH(*no_far, pf->jump));
            return 1;
        }
    }
    for (size_t k = 0; k < t->slot_proofs.n; k++) {
        const slot_proof_t *pf = &t->slot_proofs.v[k];
        int ok = cfg_slot_holds(t, pf);
        if (ok < 0)
            return ok;
        if (!ok) {
            QP_CHECK(CFG_VEC_PUSH(*no_far, pf->jump));
            return 1;
        }
    }
    return 0;
}

