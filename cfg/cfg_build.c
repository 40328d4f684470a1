/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * CFG construction. Each procedure is traversed from its entry (recursive descent, never
 * a linear sweep: bytes no path reaches are data or padding, seed 3.4); jump tables are
 * resolved as they are met; blocks end at branches, calls and branch targets. Then a
 * fixpoint finds procedures that never return, their call sites lose the fall-through
 * edge, and unreached code between procedures becomes new procedures (seed 3.6).
 */
#include <stdarg.h>
#include <stdio.h>

#include "cfg/cfg_priv.h"

/* The end of a phase of cfg_prog_build, for the caller's on_phase (development). */
static void
dbg_phase(const cfg_builder_t *b, const char *what)
{
    if (b->opts.on_phase != NULL)
        b->opts.on_phase(b->opts.cb_arg, what, b->procs.n);
}
#define DBG_PHASE(s) dbg_phase(b, s)

/* Traversal marks, one byte per byte of a procedure's extent. */
enum {
    M_START = 1,     /* an instruction starts here */
    M_INSIDE = 2,    /* inside an instruction, not its first byte */
    M_LEADER = 4,    /* a block starts here */
    M_LEN_SHIFT = 3, /* bits 3..6 of a start byte: the instruction's length */
    M_END = 0x80,    /* the instruction ends its block (branch, call, return, trap) */
};
#define M_LEN(m) (((m) >> M_LEN_SHIFT) & 15)

/* The longest backward window handed to the jump-table recogniser. */
#define JT_WINDOW 24

/*
 * What one worker of a round of builds (cfg_parallel_for) needs to itself: the traversal
 * scratch, and what it found that concerns other procedures, handed to the builder in
 * worker order once the round is over (scratch_flush). Nothing else is written during a
 * round but the procedure being built.
 */
typedef struct cfg_scratch {
    uint8_t *map;                 /* a byte per byte of extent (M_* marks) */
    size_t mapcap;                /* its size */
    cfg_u64_vec_t work;           /* traversal worklist */
    cfg_u64_vec_t new_entries;    /* call/jump targets found (for b->new_entries) */
    CFG_VEC(uint32_t) new_srcs;   /* their CFG_SRC_* bits */
    CFG_VEC(uint32_t) known;      /* pairs: index of a known procedure, CFG_SRC_* bit */
    cfg_str_vec_t strings;        /* reasons made up (for b->strings) */
} cfg_scratch_t;

typedef struct trav {
    cfg_builder_t *b;
    cfg_scratch_t *sc;        /* this worker's scratch and findings */
    cfg_bproc_t *bp;
    uint32_t self;            /* index of bp in b->procs */
    cfg_u64_vec_t pending;    /* indirect jumps not yet looked at */
    CFG_VEC(arch_insn_t) last;/* per local block: its last instruction */
    CFG_VEC(uint32_t) labels; /* computed-goto targets: local blocks (see form_edges) */
    cfg_u64_vec_t ptr_jumps;  /* jumps through a loaded pointer: tail calls */
    int labels_done;          /* labels computed */
    CFG_VEC(struct hoist_proof) proofs; /* tables whose hoisted base is to be proven */
    const cfg_u64_vec_t *no_far; /* jumps whose far `lea`s did not hold: not tried again */
    unsigned unresolved;      /* indirect jumps whose targets stay unknown */
    cfg_u64_vec_t gap_entries;/* code of its own bytes swept because of them */
} trav_t;

/* A table matched with a base register loaded far before its jump (an `lea` the
 * procedure has among many), to be proven once the procedure is traversed: no way into
 * the jump passes another write of the register after the lea (verify_hoisted). */
typedef struct hoist_proof {
    uint64_t jump, lea;
    uint8_t reg;
} hoist_proof_t;

/* More possible targets than this for one computed jump: leave it unresolved (the
 * editor translates it at run time) rather than bloat the graph. */
#define CFG_MAX_INDIRECT 1024

/*****************************************************************************
 * Small helpers
 */

/* Mark BP unsafe for the reason FMT..., kept in STRINGS. */
static int
set_unsafe(cfg_str_vec_t *strings, cfg_bproc_t *bp, const char *fmt, ...)
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
static int64_t
slot(const cfg_bproc_t *bp, uint64_t addr)
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
static uint64_t
range_end(const cfg_bproc_t *bp, uint64_t addr)
{
    for (size_t i = 0; i < bp->ranges.n; i++)
        if (addr >= bp->ranges.v[i].start && addr < bp->ranges.v[i].end)
            return bp->ranges.v[i].end;
    return addr;
}

/* Decode at ADDR, reading no further than LIMIT (rebuilds find it decoded already). */
static int
decode_at(cfg_builder_t *b, uint64_t addr, uint64_t limit, arch_insn_t *in)
{
    return cfg_image_decode(b->img, addr, limit, in);
}


static int
callee_noreturn(const cfg_builder_t *b, uint64_t target)
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

static int
indirect_call_noreturn(const cfg_image_t *img, const arch_insn_t *in)
{
    return (in->flags & ARCH_F_MEM_IND) && (in->flags & ARCH_F_RIPREL)
        && slot_noreturn(img, in->target);
}

/* Does the syscall at SC never return: rt_sigreturn (15), exit (60), exit_group (231)? */
static int
syscall_noreturn(const cfg_image_t *img, const arch_insn_t *prev, const arch_insn_t *sc)
{
    long nr = cfg_syscall_nr(img, prev, sc);
    return nr == 15 || nr == 60 || nr == 231;
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
    int64_t s = slot(t->bp, addr);
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
static uint64_t
lock_skip_target(cfg_builder_t *b, uint64_t next, uint64_t target)
{
    const uint8_t *p = cfg_image_ptr(b->img, target - 1, NULL);
    arch_insn_t locked, bare;
    if (target != next + 1 || p == NULL || *p != 0xf0 || decode_at(b, target - 1, target + 15, &locked) < 0
        || !(locked.flags & ARCH_F_LOCK) || locked.kind != ARCH_KIND_SEQ
        || decode_at(b, target, target + 15, &bare) < 0
        || bare.len + 1 != locked.len)
        return target;
    return target - 1;
}

/* Branch to TARGET (the branch's next instruction is at NEXT): inside, a new leader;
 * outside, a possible new procedure. */
static int
branch_to(trav_t *t, uint64_t next, uint64_t target)
{
    if (slot(t->bp, target) >= 0)
        target = lock_skip_target(t->b, next, target);
    if (slot(t->bp, target) >= 0)
        return push_work(t, target);
    if (!cfg_image_is_code(t->b->img, target))
        return set_unsafe(&t->sc->strings, t->bp, "branch to non-code address 0x%llx",
                          (unsigned long long)target);
    return note_external(t, target, CFG_SRC_TAILCALL);
}

/* Decode linearly from ADDR until control leaves the straight line. */
static int
trace_from(trav_t *t, uint64_t addr)
{
    cfg_builder_t *b = t->b;
    cfg_bproc_t *bp = t->bp;
    uint8_t *map = t->sc->map;
    arch_insn_t prev = { 0 };
    for (;;) {
        int64_t s = slot(bp, addr);
        if (s < 0)
            return 0; /* fell off: block formation reports it */
        if (map[s] & M_START)
            return 0;
        if (map[s] & M_INSIDE) {
            /* glibc skips the lock prefix when single-threaded: je 1f; lock; 1: op. */
            const uint8_t *pb = cfg_image_ptr(b->img, addr - 1, NULL);
            if (s > 0 && (map[s - 1] & M_START) && pb != NULL && *pb == 0xf0)
                return set_unsafe(&t->sc->strings, bp, "jump over a lock prefix at 0x%llx",
                                  (unsigned long long)addr - 1);
            return set_unsafe(&t->sc->strings, bp, "jump into the middle of an instruction at 0x%llx",
                              (unsigned long long)addr);
        }
        uint64_t lim = range_end(bp, addr);
        arch_insn_t in;
        if (decode_at(b, addr, lim, &in) < 0)
            return set_unsafe(&t->sc->strings, bp, "invalid instruction at 0x%llx", (unsigned long long)addr);
        for (uint8_t k = 1; k < in.len; k++)
            if (map[s + k] & (M_START | M_INSIDE)) {
                const uint8_t *pb = cfg_image_ptr(b->img, addr, NULL);
                if (k == 1 && pb != NULL && *pb == 0xf0)
                    return set_unsafe(&t->sc->strings, bp, "jump over a lock prefix at 0x%llx",
                                      (unsigned long long)addr);
                return set_unsafe(&t->sc->strings, bp, "overlapping instructions at 0x%llx",
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
            QP_CHECK(set_unsafe(&t->sc->strings, bp, "privileged instruction at 0x%llx",
                                (unsigned long long)addr));
        uint64_t next = addr + in.len;
        /* lea main(%rip),%rdi: a code address taken by code names a procedure. */
        if ((in.flags & ARCH_F_RIPREL) && in.kind != ARCH_KIND_JMP_IND
            && in.kind != ARCH_KIND_CALL_IND && slot(bp, in.target) < 0
            && cfg_image_is_code(b->img, in.target))
            QP_CHECK(note_external(t, in.target, CFG_SRC_ADDR));
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
            if (callee_noreturn(b, in.target))
                return 0;
            return push_work(t, next);
        case ARCH_KIND_CALL_IND:
            if (indirect_call_noreturn(b->img, &in))
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
    uint64_t lim = range_end(t->bp, j);
    if (decode_at(b, cur, lim, &tmp[n]) < 0)
        return 0;
    n++;
    while (n < JT_WINDOW) {
        int found = 0;
        for (uint64_t back = 1; back <= ARCH_MAX_INSN && back <= cur; back++) {
            int64_t s = slot(t->bp, cur - back);
            if (s < 0)
                break;
            if (!(t->sc->map[s] & M_START))
                continue;
            arch_insn_t in;
            if (decode_at(b, cur - back, lim, &in) == 0 && in.len == back
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
        if (slot(bp, cfg_jtab_entry(b->img, t, i)) < 0) {
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

/*
 * A table whose base register was loaded far from the jump (clang hoists
 * `lea T(%rip),%rbx` out of an interpreter loop): try each rip-relative `lea` of the
 * procedure into a register, pointing at read-only data, in front of the window. Only a
 * table bounded by a compare, with every entry on code of the procedure, is accepted.
 */
/* Collect up to CAP distinct rip-relative `lea`s of read-only data in the procedure's
 * decoded code (the candidates for a hoisted table base). */
static size_t
collect_leas(trav_t *t, arch_insn_t *out, size_t cap)
{
    cfg_builder_t *b = t->b;
    const cfg_bproc_t *bp = t->bp;
    size_t n = 0;
    uint64_t base = 0;
    for (size_t r = 0; r < bp->ranges.n && n < cap; r++) {
        const cfg_range_t *rg = &bp->ranges.v[r];
        for (uint64_t a = rg->start; a < rg->end && n < cap; a++) {
            uint8_t m = t->sc->map[base + (a - rg->start)];
            if (!(m & M_START))
                continue;
            arch_insn_t in;
            if (decode_at(b, a, rg->end, &in) < 0 || !(in.flags & ARCH_F_RIPREL)
                || in.kind != ARCH_KIND_SEQ)
                continue;
            const cfg_section_t *sec = cfg_image_section_at(b->img, in.target);
            if (sec == NULL || (sec->flags & (CFG_SEC_CODE | CFG_SEC_WRITE)))
                continue;
            size_t avail;
            const uint8_t *p = cfg_image_ptr(b->img, a, &avail);
            arch_ops_t ops;
            if (p == NULL || arch_decode_ops(p, avail, a, &ops) < 0 || ops.op != ARCH_OP_LEA
                || ops.dst.kind != ARCH_OPND_REG)
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

static size_t padding_len(const uint8_t *p, size_t n, uint64_t addr);

/*
 * Does [A, END) hold code up to a jump, a return or END: every instruction valid,
 * none privileged, none reaching past END? Then a jump may well go there.
 */
static int
looks_like_code(trav_t *t, uint64_t a, uint64_t end)
{
    while (a < end) {
        arch_insn_t in;
        if (decode_at(t->b, a, end, &in) < 0 || (in.flags & ARCH_F_PRIV) || a + in.len > end)
            return 0;
        if (in.kind == ARCH_KIND_JMP || in.kind == ARCH_KIND_JMP_IND || in.kind == ARCH_KIND_RET)
            return 1;
        a += in.len;
    }
    return 1;
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
                a += padding_len(p, n, a);
                int seen = 0; /* once traced its bytes are marked: never, but never loop */
                for (size_t k = 0; k < t->gap_entries.n && !seen; k++)
                    seen = t->gap_entries.v[k] == a;
                if (a < end && !seen && looks_like_code(t, a, end)) {
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

static int
traverse(trav_t *t)
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
                return 0;
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
        if (slot(bp, b->landing_pads.v[k]) >= 0)
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
    while (rc == 0 && proven && q.n > 0) {
        uint64_t a = q.v[--q.n];
        int after = (a >> 63) != 0; /* the instruction at A wrote the register: its ways on */
        a &= ~(1ull << 63);
        int64_t s = slot(bp, a);
        if (s < 0 || !(t->sc->map[s] & M_START))
            continue; /* out of the procedure (a tail call), or not code */
        if (!after) {
            if (seen[s] || a == pf->lea)
                continue;
            if (a == pf->jump) {
                proven = 0;
                break;
            }
            seen[s] = 1;
        }
        arch_insn_t in;
        if (decode_at(b, a, range_end(bp, a), &in) < 0) {
            proven = 0;
            break;
        }
        uint64_t next = a + in.len;
        switch (in.kind) {
        case ARCH_KIND_RET:
        case ARCH_KIND_HALT: break;
        case ARCH_KIND_JMP: rc = CFG_VEC_PUSH(q, in.target); break;
        case ARCH_KIND_JCC:
            rc = CFG_VEC_PUSH(q, in.target);
            rc = rc ? rc : CFG_VEC_PUSH(q, next);
            break;
        case ARCH_KIND_JMP_IND: {
            const cfg_table_t *tab = NULL;
            for (size_t k = 0; k < bp->tables.n && tab == NULL; k++)
                if (bp->tables.v[k].jump == a)
                    tab = &bp->tables.v[k];
            if (tab != NULL) {
                for (uint32_t i = 0; rc == 0 && i < tab->nentries; i++)
                    rc = CFG_VEC_PUSH(q, cfg_jtab_entry(b->img, tab, i));
                break;
            }
            int tail = 0;
            for (size_t k = 0; k < t->ptr_jumps.n && !tail; k++)
                tail = t->ptr_jumps.v[k] == a;
            if (!tail)
                proven = 0; /* it may go anywhere */
            break;
        }
        default: rc = CFG_VEC_PUSH(q, next); break; /* calls keep the register */
        }
    }
    free(seen);
    CFG_VEC_FREE(q);
    return rc < 0 ? rc : proven;
}

/* Prove the hoisted table bases resolve_pending took: 0, or 1 when one does not hold
 * (its jump added to NO_FAR: the procedure is built again without that table, whose
 * jump stays unresolved as before), or QP_ENOMEM. */
static int
verify_hoisted(trav_t *t, cfg_u64_vec_t *no_far)
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
    return 0;
}

/*****************************************************************************
 * Blocks and edges
 */

static uint32_t
local_block_at(const cfg_bproc_t *bp, uint64_t addr)
{
    size_t lo = 0, hi = bp->blocks.n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const cfg_block_t *bl = &bp->blocks.v[mid];
        if (addr < bl->start)
            hi = mid;
        else if (addr >= bl->end)
            lo = mid + 1;
        else
            return (uint32_t)mid;
    }
    return CFG_NONE;
}

static int
form_blocks(trav_t *t)
{
    cfg_builder_t *b = t->b;
    cfg_bproc_t *bp = t->bp;
    const uint8_t *map = t->sc->map;
    uint64_t base = 0;
    for (size_t r = 0; r < bp->ranges.n; r++) {
        const cfg_range_t *rg = &bp->ranges.v[r];
        uint64_t len = rg->end - rg->start;
        int open = 0;
        for (uint64_t off = 0; off < len;) {
            uint8_t m = map[base + off];
            if (!(m & M_START)) {
                open = 0;
                off++;
                continue;
            }
            uint64_t a = rg->start + off;
            if (M_LEN(m) == 0) {
                if (b->opts.on_note != NULL) {
                    char line[160];
                    snprintf(line, sizeof(line), "zero length at 0x%llx m=%x range %llx-%llx",
                             (unsigned long long)a, m, (unsigned long long)rg->start,
                             (unsigned long long)rg->end);
                    b->opts.on_note(b->opts.cb_arg, line);
                }
                return QP_EDECODE;
            }
            if (!open || (m & M_LEADER)) {
                cfg_block_t bl;
                memset(&bl, 0, sizeof(bl));
                bl.start = a;
                bl.proc = t->self;
                bl.idom = CFG_NONE;
                bl.last_kind = ARCH_KIND_SEQ;
                arch_insn_t none;
                memset(&none, 0, sizeof(none));
                QP_CHECK(CFG_VEC_PUSH(bp->blocks, bl));
                QP_CHECK(CFG_VEC_PUSH(t->last, none));
                open = 1;
            }
            cfg_block_t *cur = &bp->blocks.v[bp->blocks.n - 1];
            cur->end = a + M_LEN(m);
            cur->ninsns++;
            if (m & M_END) {
                /* Only a block's last instruction is decoded again: its edges. */
                arch_insn_t *in = &t->last.v[bp->blocks.n - 1];
                if (decode_at(b, a, rg->end, in) < 0)
                    return QP_EDECODE; /* decoded fine during traversal: cannot happen */
                if (in->kind == ARCH_KIND_SYSCALL) /* one that never returns */
                    in->kind = ARCH_KIND_HALT;
                cur->last_kind = in->kind;
                open = 0;
            }
            off += M_LEN(m);
        }
        base += len;
    }
    /* Fragments may lie below the main part: keep blocks in address order. */
    if (bp->ranges.n > 1 && bp->blocks.n > 1) {
        size_t n = bp->blocks.n;
        cfg_block_t *bl = bp->blocks.v;
        arch_insn_t *ls = t->last.v;
        for (size_t i = 1; i < n; i++) { /* insertion sort: ranges are few, runs sorted */
            cfg_block_t kb = bl[i];
            arch_insn_t ki = ls[i];
            size_t k = i;
            for (; k > 0 && bl[k - 1].start > kb.start; k--) {
                bl[k] = bl[k - 1];
                ls[k] = ls[k - 1];
            }
            bl[k] = kb;
            ls[k] = ki;
        }
    }
    return 0;
}

static int
add_edge(cfg_bproc_t *bp, uint32_t from, uint32_t to, uint64_t target, uint8_t kind)
{
    cfg_edge_t e = { from, to, target, kind };
    QP_CHECK(CFG_VEC_PUSH(bp->edges, e));
    bp->blocks.v[from].nsucc++;
    return 0;
}

static size_t padding_len(const uint8_t *p, size_t n, uint64_t addr);

/* Control continues at NEXT after block I (fall-through or return site). */
static int
edge_to_next(trav_t *t, uint32_t i, uint64_t next, uint8_t kind)
{
    cfg_bproc_t *bp = t->bp;
    int64_t s = slot(bp, next);
    if (s >= 0 && (t->sc->map[s] & M_START)) {
        uint32_t to = local_block_at(bp, next);
        return add_edge(bp, i, to, 0, kind);
    }
    /* Falling through alignment nops into the next procedure is a tail call to it. */
    size_t avail;
    const uint8_t *p = cfg_image_ptr(t->b->img, next, &avail);
    uint64_t after = next + (p ? padding_len(p, avail < 32 ? avail : 32, next) : 0);
    /*
     * Nothing of this procedure after a call: the compiler knew the call never returns
     * here (an error report that longjmps at this level, while the callee returns at
     * others). When the next procedure starts after it, the return is kept where the
     * original code sends it, as a tail call to that procedure: the procedure stays
     * measurable whatever the callee does. Otherwise the call cannot return.
     */
    if (kind == CFG_EDGE_CALLRET && cfg_proc_by_entry(t->b, after) == CFG_NONE)
        return add_edge(bp, i, CFG_NONE, bp->blocks.v[i].call_target, CFG_EDGE_NORETURN);
    if (cfg_proc_by_entry(t->b, after) != CFG_NONE)
        return add_edge(bp, i, CFG_NONE, after, CFG_EDGE_TAILCALL);
    QP_CHECK(set_unsafe(&t->sc->strings, bp, "runs past the end of its code at 0x%llx",
                        (unsigned long long)next));
    return add_edge(bp, i, CFG_NONE, next, CFG_EDGE_UNRESOLVED);
}

static int
edge_to_target(trav_t *t, uint32_t i, uint64_t target, uint8_t kind)
{
    cfg_bproc_t *bp = t->bp;
    if (slot(bp, target) >= 0) {
        target = lock_skip_target(t->b, bp->blocks.v[i].end, target);
        uint32_t to = local_block_at(bp, target);
        if (to != CFG_NONE && bp->blocks.v[to].start == target)
            return add_edge(bp, i, to, 0, kind);
        /* Only when traversal stopped early (unsafe procedure). */
        return add_edge(bp, i, CFG_NONE, target, CFG_EDGE_UNRESOLVED);
    }
    return add_edge(bp, i, CFG_NONE, target, CFG_EDGE_TAILCALL);
}

static const cfg_table_t *
table_for(const cfg_bproc_t *bp, uint64_t jump)
{
    for (size_t i = 0; i < bp->tables.n; i++)
        if (bp->tables.v[i].jump == jump)
            return &bp->tables.v[i];
    return NULL;
}

/*
 * Possible targets of a computed jump in this procedure: blocks whose address the program
 * holds as data, except the entry and the targets of the switch tables already recovered
 * (in non-PIE files those tables are exactly such words). Only tables whose bound a
 * compare proves are switches: a table found by scanning may be the computed-goto table
 * itself, read by one dispatch that was taken for a jump table, and its labels are the
 * targets of the other dispatches.
 */
static int
computed_goto_labels(trav_t *t)
{
    const cfg_builder_t *b = t->b;
    const cfg_bproc_t *bp = t->bp;
    cfg_u64_vec_t tabt = { 0 };
    int rc = 0;
    for (size_t k = 0; k < bp->tables.n && rc == 0; k++)
        for (uint32_t e = 0; bp->tables.v[k].bounded && e < bp->tables.v[k].nentries && rc == 0;
             e++)
            rc = CFG_VEC_PUSH(tabt, cfg_jtab_entry(b->img, &bp->tables.v[k], e));
    if (rc == 0 && tabt.n)
        qsort(tabt.v, tabt.n, sizeof(uint64_t), cfg_u64_cmp);
    for (uint32_t k = 0; k < bp->blocks.n && rc == 0; k++) {
        uint64_t st = bp->blocks.v[k].start;
        if (st != bp->p.entry && cfg_u64_contains(b->addr_taken.v, b->addr_taken.n, st)
            && !cfg_u64_contains(tabt.v, tabt.n, st))
            rc = CFG_VEC_PUSH(t->labels, k);
    }
    CFG_VEC_FREE(tabt);
    return rc;
}

static int
form_edges(trav_t *t)
{
    cfg_builder_t *b = t->b;
    cfg_bproc_t *bp = t->bp;
    for (uint32_t i = 0; i < bp->blocks.n; i++) {
        cfg_block_t *bl = &bp->blocks.v[i];
        const arch_insn_t *in = &t->last.v[i];
        bl->succ = (uint32_t)bp->edges.n;
        bl->nsucc = 0;
        switch (in->kind) {
        case ARCH_KIND_JCC:
            QP_CHECK(edge_to_target(t, i, in->target, CFG_EDGE_TAKEN));
            QP_CHECK(edge_to_next(t, i, bl->end, CFG_EDGE_FALL));
            break;
        case ARCH_KIND_JMP: QP_CHECK(edge_to_target(t, i, in->target, CFG_EDGE_JUMP)); break;
        case ARCH_KIND_CALL:
            if (in->target == bl->end) {
                QP_CHECK(edge_to_next(t, i, bl->end, CFG_EDGE_FALL));
                break;
            }
            bl->call_target = in->target;
            if (callee_noreturn(b, in->target))
                QP_CHECK(add_edge(bp, i, CFG_NONE, in->target, CFG_EDGE_NORETURN));
            else
                QP_CHECK(edge_to_next(t, i, bl->end, CFG_EDGE_CALLRET));
            break;
        case ARCH_KIND_CALL_IND:
            if (indirect_call_noreturn(b->img, in))
                QP_CHECK(add_edge(bp, i, CFG_NONE, 0, CFG_EDGE_NORETURN));
            else
                QP_CHECK(edge_to_next(t, i, bl->end, CFG_EDGE_CALLRET));
            break;
        case ARCH_KIND_RET: QP_CHECK(add_edge(bp, i, CFG_NONE, 0, CFG_EDGE_RETURN)); break;
        case ARCH_KIND_HALT: QP_CHECK(add_edge(bp, i, CFG_NONE, 0, CFG_EDGE_NORETURN)); break;
        case ARCH_KIND_JMP_IND: {
            const cfg_table_t *tab = table_for(bp, in->addr);
            if (tab != NULL) {
                /* One edge per distinct target, in table order. */
                uint32_t first = (uint32_t)bp->edges.n;
                for (uint32_t k = 0; k < tab->nentries; k++) {
                    uint64_t tg = cfg_jtab_entry(b->img, tab, k);
                    int dup = 0;
                    for (uint32_t e = first; e < bp->edges.n && !dup; e++)
                        dup = bp->edges.v[e].target == tg;
                    if (dup)
                        continue;
                    uint32_t to = local_block_at(bp, tg);
                    QP_CHECK(add_edge(bp, i, to, tg, CFG_EDGE_TABLE));
                }
                break;
            }
            int ptr = 0;
            for (size_t k = 0; k < t->ptr_jumps.n && !ptr; k++)
                ptr = t->ptr_jumps.v[k] == in->addr;
            if (((in->flags & ARCH_F_MEM_IND) && (in->flags & ARCH_F_RIPREL)) || ptr) {
                QP_CHECK(add_edge(bp, i, CFG_NONE, 0, CFG_EDGE_TAILCALL));
                break;
            }
            if (!t->labels_done) {
                QP_CHECK(computed_goto_labels(t));
                t->labels_done = 1;
            }
            if (t->labels.n > 0 && t->labels.n <= CFG_MAX_INDIRECT) {
                /* A computed goto: every address-taken label inside may be the target. */
                for (size_t k = 0; k < t->labels.n; k++)
                    QP_CHECK(add_edge(bp, i, t->labels.v[k], bp->blocks.v[t->labels.v[k]].start,
                                      CFG_EDGE_INDIRECT));
                break;
            }
            bp->p.nind_unresolved++;
            QP_CHECK(add_edge(bp, i, CFG_NONE, 0, CFG_EDGE_UNRESOLVED));
            break;
        }
        default: QP_CHECK(edge_to_next(t, i, bl->end, CFG_EDGE_FALL)); break;
        }
    }
    return 0;
}


/*
 * Note BP's "never returns" edges that are calls of a procedure's entry in
 * bp->noret_sites, for rebuild_stale_noreturn_callers (which would otherwise look at
 * every edge of their procedures each round), and count its tail calls (bp->ntail).
 * Called whenever BP's edges change.
 */
int
cfg_note_noret_sites(cfg_bproc_t *bp)
{
    bp->noret_sites.n = 0;
    bp->ntail = 0;
    for (size_t e = 0; e < bp->edges.n; e++) {
        const cfg_edge_t *ed = &bp->edges.v[e];
        const cfg_block_t *bl = &bp->blocks.v[ed->from];
        bp->ntail += ed->kind == CFG_EDGE_TAILCALL && ed->target != 0;
        if (ed->kind == CFG_EDGE_NORETURN && ed->target != 0 && bl->call_target == ed->target)
            QP_CHECK(CFG_VEC_PUSH(bp->noret_sites, ((cfg_noret_site_t) { ed->target, bl->end })));
    }
    return 0;
}

/* Was BP found only in a gap (perhaps jumped to by code that is no better)? */
static int
gap_only(const cfg_bproc_t *bp)
{
    return (bp->p.sources & CFG_SRC_GAP) && !(bp->p.sources & ~(CFG_SRC_GAP | CFG_SRC_TAILCALL));
}

/* Note procedure I, just built, for the noreturn analysis: its calls may go elsewhere
 * now (build_proc set nr_dirty). */
static void
note_built(cfg_builder_t *b, uint32_t i)
{
    cfg_bproc_t *bp = cfg_discover_proc(b, i);
    if (CFG_VEC_PUSH(b->nr_dirty, bp->p.entry) < 0)
        b->nr_dirty_lost = 1;
}

/* Give back the room past the N elements (of ELEM bytes) of a list, when there is some. */
static void
vec_trim(void **v, size_t *cap, size_t n, size_t elem)
{
    if (n == 0 || n == *cap)
        return;
    void *nv = realloc(*v, n * elem);
    if (nv != NULL) {
        *v = nv;
        *cap = n;
    }
}

/* (Re)build the CFG of procedure I with the scratch SC (see cfg_scratch_t). */
static int
build_proc(cfg_builder_t *b, cfg_scratch_t *sc, uint32_t i)
{
    cfg_bproc_t *bp = cfg_discover_proc(b, i);
    bp->blocks.n = bp->edges.n = bp->tables.n = 0;
    bp->p.unsafe = NULL;
    bp->p.nind_unresolved = 0;
    uint64_t total = 0;
    for (size_t r = 0; r < bp->ranges.n; r++)
        total += bp->ranges.v[r].end - bp->ranges.v[r].start;
    if (total > sc->mapcap) {
        free(sc->map);
        sc->map = malloc(total);
        if (sc->map == NULL) {
            sc->mapcap = 0;
            return QP_ENOMEM;
        }
        sc->mapcap = total;
    }
    trav_t t;
    cfg_u64_vec_t no_far = { 0 };
    size_t n_entries = sc->new_entries.n, n_srcs = sc->new_srcs.n, n_known = sc->known.n,
           n_strings = sc->strings.n;
    int rc;
    for (;;) {
        memset(sc->map, 0, total);
        memset(&t, 0, sizeof(t));
        t.b = b;
        t.sc = sc;
        t.bp = bp;
        t.self = i;
        t.no_far = &no_far;
        sc->work.n = 0;
        rc = traverse(&t);
        if (rc == 0)
            rc = verify_hoisted(&t, &no_far);
        if (rc != 1)
            break;
        /* A hoisted table base that does not hold: again without it, from scratch. */
        CFG_VEC_FREE(t.pending);
        CFG_VEC_FREE(t.last);
        CFG_VEC_FREE(t.labels);
        CFG_VEC_FREE(t.ptr_jumps);
        CFG_VEC_FREE(t.proofs);
        CFG_VEC_FREE(t.gap_entries);
        sc->new_entries.n = n_entries;
        sc->new_srcs.n = n_srcs;
        sc->known.n = n_known;
        while (sc->strings.n > n_strings)
            free(sc->strings.v[--sc->strings.n]);
        bp->blocks.n = bp->edges.n = bp->tables.n = 0;
        bp->p.unsafe = NULL;
        bp->p.nind_unresolved = 0;
    }
    CFG_VEC_FREE(no_far);
    if (rc == 0)
        rc = form_blocks(&t);
    for (size_t k = 0; rc == 0 && k < t.gap_entries.n; k++) {
        uint32_t gb = local_block_at(bp, t.gap_entries.v[k]);
        if (gb != CFG_NONE && bp->blocks.v[gb].start == t.gap_entries.v[k])
            bp->blocks.v[gb].gap_entry = 1;
    }
    if (rc == 0) {
        bp = cfg_discover_proc(b, i); /* no procedure is added here, but be explicit */
        rc = form_edges(&t);
    }
    bp->entry_block = local_block_at(bp, bp->p.entry);
    if (bp->p.unsafe != NULL && gap_only(bp))
        atomic_store_explicit(&b->unsafe_built, 1, memory_order_relaxed);
    bp->blocks_ver = cfg_blocks_changed(b);
    bp->built = 1;
    bp->nr_dirty = 1;
    if (cfg_note_noret_sites(bp) < 0)
        rc = QP_ENOMEM;
    /* Blocks and edges are the analysis's largest lists, and most procedures small:
     * kept at their size, not at the next power of two. */
    vec_trim((void **)&bp->blocks.v, &bp->blocks.cap, bp->blocks.n, sizeof(*bp->blocks.v));
    vec_trim((void **)&bp->edges.v, &bp->edges.cap, bp->edges.n, sizeof(*bp->edges.v));
    CFG_VEC_FREE(t.pending);
    CFG_VEC_FREE(t.last);
    CFG_VEC_FREE(t.labels);
    CFG_VEC_FREE(t.ptr_jumps);
    CFG_VEC_FREE(t.proofs);
    CFG_VEC_FREE(t.gap_entries);
    return rc == QP_EDECODE ? 0 : rc;
}

/* Hand what the builds with SC found to the builder, and empty SC's lists. */
static int
scratch_flush(cfg_builder_t *b, cfg_scratch_t *sc)
{
    for (size_t k = 0; k < sc->new_entries.n; k++) {
        QP_CHECK(CFG_VEC_PUSH(b->new_entries, sc->new_entries.v[k]));
        QP_CHECK(CFG_VEC_PUSH(b->new_srcs, sc->new_srcs.v[k]));
    }
    for (size_t k = 0; k + 1 < sc->known.n; k += 2)
        cfg_discover_proc(b, sc->known.v[k])->p.sources |= sc->known.v[k + 1];
    for (size_t k = 0; k < sc->strings.n; k++) {
        int rc = CFG_VEC_PUSH(b->strings, sc->strings.v[k]);
        if (rc < 0) {
            for (; k < sc->strings.n; k++)
                free(sc->strings.v[k]); /* the procedures' reasons are lost: ENOMEM */
            sc->strings.n = 0;
            return rc;
        }
    }
    sc->new_entries.n = sc->new_srcs.n = sc->known.n = sc->strings.n = 0;
    return 0;
}

static void
scratch_free(cfg_scratch_t *sc)
{
    free(sc->map);
    CFG_VEC_FREE(sc->work);
    CFG_VEC_FREE(sc->new_entries);
    CFG_VEC_FREE(sc->new_srcs);
    CFG_VEC_FREE(sc->known);
    for (size_t k = 0; k < sc->strings.n; k++)
        free(sc->strings.v[k]);
    CFG_VEC_FREE(sc->strings);
}

/* A round of builds: the procedures TODO, each built by one of the workers. */
typedef struct round_ctx {
    cfg_builder_t *b;
    const uint32_t *todo;     /* procedure indices */
    size_t n;                 /* how many */
    size_t step;              /* progress is told every STEP procedures */
    size_t told;              /* progress told last at */
} round_ctx_t;

static int
round_task(void *arg, unsigned worker, size_t k)
{
    round_ctx_t *r = arg;
    return build_proc(r->b, &r->b->scratch[worker], r->todo[k]);
}

static void
round_progress(void *arg, size_t done)
{
    round_ctx_t *r = arg;
    if (r->b->opts.on_progress != NULL && done >= r->told + r->step) {
        r->told = done;
        r->b->opts.on_progress(r->b->opts.cb_arg, done, r->n);
    }
}

/*
 * Build the procedures TODO (N indices). Procedures are independent once discovered: a
 * build writes only its own procedure and its worker's scratch, so the round runs on
 * b->nscratch threads, and the findings are handed over in worker order.
 */
static int
build_round(cfg_builder_t *b, const uint32_t *todo, size_t n)
{
    round_ctx_t r = { b, todo, n, n / 128 + 1, 0 };
    if (b->opts.on_progress != NULL)
        b->opts.on_progress(b->opts.cb_arg, 0, n);
    unsigned nt = n >= 64 ? b->nscratch : 1;
    if (nt > 1)
        cfg_discover_freeze(b, 1);
    int rc = cfg_parallel_for(nt, n, 16, round_task, &r, round_progress);
    if (nt > 1)
        cfg_discover_freeze(b, 0);
    for (size_t k = 0; k < n; k++)
        note_built(b, todo[k]);
    for (unsigned w = 0; w < nt; w++) {
        int frc = scratch_flush(b, &b->scratch[w]);
        if (rc == 0)
            rc = frc;
    }
    return rc;
}

/*****************************************************************************
 * Ranges of procedures with cold fragments
 */

static uint64_t
ranges_hash(const cfg_bproc_t *bp)
{
    uint64_t h = bp->ranges.n;
    for (size_t r = 0; r < bp->ranges.n; r++)
        h = (h * 0x100000001b3ull) ^ bp->ranges.v[r].start ^ (bp->ranges.v[r].end << 1);
    return h;
}

/* ranges_hash of the one range [START, END). */
static uint64_t
range_hash1(uint64_t start, uint64_t end)
{
    return 0x100000001b3ull ^ start ^ (end << 1);
}

typedef CFG_VEC(uint32_t) idx_vec_t;

static int
cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Sort V and drop repeats. */
static void
idx_sort_unique(idx_vec_t *v)
{
    if (v->n > 1)
        qsort(v->v, v->n, sizeof(uint32_t), cmp_u32);
    size_t k = 0;
    for (size_t i = 0; i < v->n; i++)
        if (k == 0 || v->v[k - 1] != v->v[i])
            v->v[k++] = v->v[i];
    v->n = k;
}

/* Where X is in the sorted V, or -1. */
static ptrdiff_t
idx_find(const idx_vec_t *v, uint32_t x)
{
    size_t lo = 0, hi = v->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v->v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < v->n && v->v[lo] == x ? (ptrdiff_t)lo : -1;
}

/* Push the indices of the procedures whose entries are in E (those still there). */
static int
idx_push_entries(const cfg_builder_t *b, idx_vec_t *v, const cfg_u64_vec_t *e)
{
    for (size_t k = 0; k < e->n; k++) {
        uint32_t i = cfg_proc_by_entry(b, e->v[k]);
        if (i != CFG_NONE)
            QP_CHECK(CFG_VEC_PUSH(*v, i));
    }
    return 0;
}

/*
 * The procedures assign_ranges must look at, in *LOOK (sorted): the fragments (*FRAG,
 * sorted, their parents in *PARENT: CFG_NONE when gone, and then no longer fragments),
 * the parents (*PARENTS, sorted), the procedures that had fragments when it last ran,
 * and those marked not built since (among them every one whose extent changed, and the
 * new ones). Any other is neither a fragment nor a parent and has the one range it had.
 */
static int
ranges_to_look_at(cfg_builder_t *b, idx_vec_t *look, idx_vec_t *frag, idx_vec_t *parent,
                  idx_vec_t *parents)
{
    size_t n = b->procs.n;
    if (b->unbuilt_lost) {
        for (size_t i = 0; i < n; i++) {
            QP_CHECK(CFG_VEC_PUSH(*look, (uint32_t)i));
            if (b->procs.v[i].p.flags & CFG_PROC_FRAGMENT)
                QP_CHECK(CFG_VEC_PUSH(*frag, (uint32_t)i));
        }
    } else {
        QP_CHECK(idx_push_entries(b, frag, &b->frags));
        idx_sort_unique(frag);
        size_t k = 0;
        for (size_t j = 0; j < frag->n; j++)
            if (b->procs.v[frag->v[j]].p.flags & CFG_PROC_FRAGMENT)
                frag->v[k++] = frag->v[j];
        frag->n = k;
        QP_CHECK(idx_push_entries(b, look, &b->unbuilt));
        QP_CHECK(idx_push_entries(b, look, &b->parents));
        for (size_t j = 0; j < frag->n; j++)
            QP_CHECK(CFG_VEC_PUSH(*look, frag->v[j]));
    }
    b->frags.n = 0;
    for (size_t j = 0; j < frag->n; j++) {
        cfg_bproc_t *f = &b->procs.v[frag->v[j]];
        uint32_t pi = cfg_proc_by_entry(b, f->parent_entry);
        QP_CHECK(CFG_VEC_PUSH(*parent, pi));
        if (pi == CFG_NONE) {
            f->p.flags &= ~(uint32_t)CFG_PROC_FRAGMENT;
            cfg_mark_nr_dirty(b, f);
            b->gen++;
        } else {
            QP_CHECK(CFG_VEC_PUSH(*parents, pi));
            QP_CHECK(CFG_VEC_PUSH(b->frags, f->p.entry));
        }
    }
    idx_sort_unique(parents);
    b->parents.n = 0;
    for (size_t j = 0; j < parents->n; j++) {
        QP_CHECK(CFG_VEC_PUSH(b->parents, b->procs.v[parents->v[j]].p.entry));
        if (!b->unbuilt_lost)
            QP_CHECK(CFG_VEC_PUSH(*look, parents->v[j]));
    }
    idx_sort_unique(look);
    return 0;
}

/* Is procedure I a parent, or a fragment (with a parent), as ranges_to_look_at found? */
static int
is_parent_of(const idx_vec_t *parents, uint32_t i)
{
    return idx_find(parents, i) >= 0;
}

static int
is_fragment_of(const idx_vec_t *frag, const idx_vec_t *parent, uint32_t i)
{
    ptrdiff_t j = idx_find(frag, i);
    return j >= 0 && parent->v[j] != CFG_NONE;
}

/*
 * Every procedure's ranges: its main extent, then its tied fragments' extents. A
 * procedure whose ranges changed is built again. Each keeps the hash of its ranges
 * (ranges_h), so that one with a single, unchanged range is not touched; only those
 * that may have changed are looked at (ranges_to_look_at).
 */
static int
assign_ranges(cfg_builder_t *b)
{
    size_t n = b->procs.n;
    /* Nothing it looks at changed since it last ran (procedures, extents, fragments
     * all bump b->gen): it would change nothing. */
    if (b->ranges_done && b->ranges_gen == b->gen && b->ranges_n == n)
        return 0;
    idx_vec_t look = { 0 }, frag = { 0 }, parent = { 0 }, parents = { 0 };
    int rc = ranges_to_look_at(b, &look, &frag, &parent, &parents);
    /* A procedure that is neither a fragment nor a parent is done here, in one look. */
    for (size_t j = 0; j < look.n && rc == 0; j++) {
        uint32_t i = look.v[j];
        cfg_bproc_t *bp = &b->procs.v[i];
        int is_parent = is_parent_of(&parents, i);
        uint64_t h1 = range_hash1(bp->p.start, bp->p.end);
        if (!is_parent && h1 == bp->ranges_h)
            continue; /* the one range it has already */
        bp->ranges.n = 0;
        rc = CFG_VEC_PUSH(bp->ranges, ((cfg_range_t) { bp->p.start, bp->p.end }));
        if (!is_parent && !is_fragment_of(&frag, &parent, i)) {
            cfg_mark_unbuilt(b, bp);
            bp->ranges_h = h1;
        }
    }
    for (size_t j = 0; j < frag.n && rc == 0; j++) {
        if (parent.v[j] == CFG_NONE)
            continue;
        cfg_bproc_t *f = &b->procs.v[frag.v[j]];
        rc = CFG_VEC_PUSH(b->procs.v[parent.v[j]].ranges, ((cfg_range_t) { f->p.start, f->p.end }));
        if (f->blocks.n > 0)
            f->blocks_ver = cfg_blocks_changed(b);
        f->blocks.n = f->edges.n = f->noret_sites.n = f->ntail = 0; /* a fragment has no
                                                                     * blocks of its own */
        f->entry_block = CFG_NONE;
    }
    for (size_t j = 0; j < look.n && rc == 0; j++) {
        uint32_t i = look.v[j];
        int is_parent = is_parent_of(&parents, i);
        if (!is_parent && !is_fragment_of(&frag, &parent, i))
            continue;
        cfg_bproc_t *bp = &b->procs.v[i];
        uint64_t h = is_parent ? ranges_hash(bp) : range_hash1(bp->p.start, bp->p.end);
        if (bp->p.flags & CFG_PROC_FRAGMENT)
            bp->built = 1;
        else if (h != bp->ranges_h)
            cfg_mark_unbuilt(b, bp);
        bp->ranges_h = h;
    }
    CFG_VEC_FREE(look);
    CFG_VEC_FREE(frag);
    CFG_VEC_FREE(parent);
    CFG_VEC_FREE(parents);
    b->ranges_done = rc == 0;
    b->ranges_gen = b->gen;
    b->ranges_n = n;
    return rc;
}

/*****************************************************************************
 * Gaps: code no procedure reaches
 */

typedef struct span {
    uint64_t start, end;
} span_t;

/* Length of the padding at P (at most N bytes): nops, zero bytes and traps (hlt, ud2,
 * int3), which compilers put after calls that never return. */
static size_t
padding_len(const uint8_t *p, size_t n, uint64_t addr)
{
    size_t off = 0;
    while (off < n) {
        if (p[off] == 0x00 || p[off] == 0xcc) {
            off++;
            continue;
        }
        arch_insn_t in;
        if (arch_decode(p + off, n - off, addr + off, &in) < 0
            || (in.kind != ARCH_KIND_NOP && in.kind != ARCH_KIND_HALT))
            break;
        off += in.len;
    }
    return off;
}

typedef CFG_VEC(span_t) span_vec_t;

/*
 * Push the blocks of BP that start in [LO, HI) (blocks are in address order), adjacent
 * ones as one span: the gaps between them are the same. Those of one procedure's extent
 * lie in one section (for_each_gap must not see a span across sections). The spans are
 * kept in HOLDER (BP, or a fragment of it) for the next sweep, which takes them as they
 * are if BP's blocks did not change since.
 */
static int
push_spans_in(cfg_bproc_t *holder, const cfg_bproc_t *bp, uint64_t lo, uint64_t hi,
              span_vec_t *v)
{
    if (bp->blocks_ver != holder->covered_ver || lo != holder->covered_lo
        || hi != holder->covered_hi) {
        size_t a = 0, z = bp->blocks.n;
        while (a < z) {
            size_t mid = (a + z) / 2;
            if (bp->blocks.v[mid].start < lo)
                a = mid + 1;
            else
                z = mid;
        }
        /* Kept at their exact size: most procedures have one run. */
        size_t nruns = 0;
        for (size_t k = a; k < bp->blocks.n && bp->blocks.v[k].start < hi; k++)
            nruns += k == a || bp->blocks.v[k - 1].end != bp->blocks.v[k].start;
        if (nruns != holder->covered.cap) {
            cfg_range_t *r = realloc(holder->covered.v, (nruns ? nruns : 1) * sizeof(*r));
            if (r == NULL)
                return QP_ENOMEM;
            holder->covered.v = r;
            holder->covered.cap = nruns;
        }
        holder->covered.n = 0;
        for (; a < bp->blocks.n && bp->blocks.v[a].start < hi; a++) {
            const cfg_block_t *bl = &bp->blocks.v[a];
            cfg_range_t *last = holder->covered.n ? &holder->covered.v[holder->covered.n - 1] : NULL;
            if (last != NULL && last->end == bl->start)
                last->end = bl->end;
            else
                holder->covered.v[holder->covered.n++] = (cfg_range_t) { bl->start, bl->end };
        }
        holder->covered_ver = bp->blocks_ver;
        holder->covered_lo = lo;
        holder->covered_hi = hi;
    }
    for (size_t k = 0; k < holder->covered.n; k++)
        QP_CHECK(CFG_VEC_PUSH(*v, ((span_t) { holder->covered.v[k].start, holder->covered.v[k].end })));
    return 0;
}

/* Every block as a span, in address order without sorting: procedures are in address
 * order with disjoint extents; a fragment's blocks are its parent's, within its extent. */
static int
collect_spans(cfg_builder_t *b, span_vec_t *v)
{
    v->n = 0;
    for (size_t i = 0; i < b->procs.n; i++) {
        cfg_bproc_t *bp = &b->procs.v[i];
        if (bp->p.flags & CFG_PROC_FRAGMENT) {
            uint32_t pi = cfg_proc_by_entry(b, bp->parent_entry);
            if (pi != CFG_NONE)
                QP_CHECK(push_spans_in(bp, &b->procs.v[pi], bp->p.start, bp->p.end, v));
        } else
            QP_CHECK(push_spans_in(bp, bp, bp->p.start, bp->p.end, v));
    }
    return 0;
}

/* Walk the uncovered parts of code sections; FN gets each gap. */
static int
for_each_gap(cfg_builder_t *b, const span_vec_t *v,
             int (*fn)(cfg_builder_t *b, uint64_t start, uint64_t end, void *arg), void *arg)
{
    const cfg_image_t *img = b->img;
    size_t k = 0;
    for (size_t i = 0; i < img->nsections; i++) {
        const cfg_section_t *s = &img->sections[i];
        if (!(s->flags & CFG_SEC_CODE) || s->bytes == NULL || !(s->flags & CFG_SEC_ALLOC))
            continue;
        uint64_t cur = s->vma, end = s->vma + s->size;
        while (k < v->n && v->v[k].end <= cur)
            k++;
        for (; k < v->n && v->v[k].start < end; k++) {
            if (v->v[k].start > cur)
                QP_CHECK(fn(b, cur, v->v[k].start, arg));
            if (v->v[k].end > cur)
                cur = v->v[k].end;
        }
        if (cur < end)
            QP_CHECK(fn(b, cur, end, arg));
    }
    return 0;
}

typedef struct gap_ctx {
    cfg_u64_vec_t rejected;   /* gap starts that proved not to be code, sorted */
    const span_vec_t *pad;    /* gaps that were all padding in the last sweep, sorted */
    span_vec_t pad_now;       /* ... and in this one, in the order met */
    size_t pad_at;            /* where the last look in `pad` ended */
} gap_ctx_t;

/* Was [START, END) a gap of nothing but padding in the last sweep (G->pad)? Gaps come
 * in address order (within a section): the search goes on from where the last ended. */
static int
gap_was_padding(gap_ctx_t *g, uint64_t start, uint64_t end)
{
    const span_t *v = g->pad->v;
    size_t n = g->pad->n, lo = g->pad_at, hi;
    if (lo > n || (lo > 0 && v[lo - 1].start >= start))
        lo = 0; /* (an earlier address: another section) */
    /* v[lo - 1].start < start: the first start >= START is in [lo, hi). */
    for (size_t step = 1;; step *= 2) {
        hi = lo + step;
        if (hi >= n) {
            hi = n;
            break;
        }
        if (v[hi - 1].start >= start)
            break;
        lo = hi;
    }
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (g->pad->v[mid].start < start)
            lo = mid + 1;
        else
            hi = mid;
    }
    g->pad_at = lo;
    return lo < g->pad->n && g->pad->v[lo].start == start && g->pad->v[lo].end == end;
}

static int
spans_sorted(const span_vec_t *v)
{
    for (size_t i = 1; i < v->n; i++)
        if (v->v[i - 1].start > v->v[i].start)
            return 0;
    return 1;
}

static int
cmp_span(const void *a, const void *b)
{
    const span_t *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int
on_gap_new_proc(cfg_builder_t *b, uint64_t start, uint64_t end, void *arg)
{
    gap_ctx_t *g = arg;
    size_t avail;
    const uint8_t *p = cfg_image_ptr(b->img, start, &avail);
    if (p == NULL)
        return 0;
    /* Most gaps are padding between procedures, and the same from sweep to sweep: the
     * bytes are decoded once. */
    if (gap_was_padding(g, start, end))
        return CFG_VEC_PUSH(g->pad_now, ((span_t) { start, end }));
    size_t n = (size_t)(end - start) < avail ? (size_t)(end - start) : avail;
    size_t pad = padding_len(p, n, start);
    if (pad >= n)
        return CFG_VEC_PUSH(g->pad_now, ((span_t) { start, end }));
    uint64_t a = start + pad;
    if (cfg_u64_contains(g->rejected.v, g->rejected.n, a))
        return 0;
    /* Sweep the gap: a procedure at its first code, then at the first code after what
     * that procedure reaches, and so on (seed 3.6: hidden procedures). */
    while (a < end) {
        if (cfg_proc_by_entry(b, a) != CFG_NONE)
            return 0;
        if (cfg_u64_contains(g->rejected.v, g->rejected.n, a))
            return 0;
        /* Unreached bytes inside a symbol's or FDE's range belong to that procedure. */
        uint32_t in = cfg_discover_find(b, a);
        if (in != CFG_NONE && cfg_discover_proc(b, in)->hint_end > a)
            return 0;
        QP_CHECK(CFG_VEC_PUSH(b->new_entries, a));
        QP_CHECK(CFG_VEC_PUSH(b->new_srcs, (uint32_t)CFG_SRC_GAP));
        QP_CHECK(cfg_discover_add_new(b));
        uint32_t pi = cfg_proc_by_entry(b, a);
        if (pi == CFG_NONE)
            return 0;
        cfg_bproc_t *bp = cfg_discover_proc(b, pi);
        /* Bounded by the gap: what lies beyond is known code already. */
        bp->limit_end = end;
        bp->p.end = cfg_discover_end(b, pi);
        if (bp->p.end > end)
            bp->p.end = end;
        bp->ranges.n = 0;
        QP_CHECK(CFG_VEC_PUSH(bp->ranges, ((cfg_range_t) { bp->p.start, bp->p.end })));
        bp->ranges_h = ranges_hash(bp);
        QP_CHECK(build_proc(b, &b->scratch[0], pi));
        note_built(b, pi);
        QP_CHECK(scratch_flush(b, &b->scratch[0]));
        bp = cfg_discover_proc(b, pi);
        if (bp->p.unsafe != NULL)
            return 0; /* not code: reject_bad_gap_procs drops it */
        uint64_t reach = a;
        for (size_t k = 0; k < bp->blocks.n; k++)
            if (bp->blocks.v[k].end > reach && bp->blocks.v[k].start < end)
                reach = bp->blocks.v[k].end;
        if (reach <= a || reach >= end)
            return 0;
        p = cfg_image_ptr(b->img, reach, &avail);
        if (p == NULL)
            return 0;
        n = (size_t)(end - reach) < avail ? (size_t)(end - reach) : avail;
        a = reach + padding_len(p, n, reach);
    }
    return 0;
}

typedef struct stat_ctx {
    cfg_stats_t *st;
    const cfg_prog_t *prog;   /* for the block before a gap */
    CFG_VEC(cfg_span_t) unreached;
} stat_ctx_t;

static int
on_gap_stats(cfg_builder_t *b, uint64_t start, uint64_t end, void *arg)
{
    stat_ctx_t *c = arg;
    size_t avail;
    const uint8_t *p = cfg_image_ptr(b->img, start, &avail);
    size_t n = (size_t)(end - start);
    size_t pad = 0;
    /* Padding may sit anywhere in the gap; count every padding run. */
    while (p != NULL && pad < n) {
        size_t run = padding_len(p + pad, n - pad, start + pad);
        if (run == 0)
            break;
        pad += run;
    }
    if (p != NULL && pad == n) {
        c->st->padding_bytes += n;
        return 0;
    }
    /* Dead code: the rest of a procedure after a call that never returns (an epilogue
     * the compiler could not remove), decoded linearly up to a return or jump. */
    if (p != NULL && pad == 0 && c->prog != NULL) {
        uint32_t bi = cfg_block_at(c->prog, start - 1);
        const cfg_block_t *bl = bi == CFG_NONE ? NULL : &c->prog->blocks[bi];
        int after_noreturn = 0;
        for (uint32_t e = 0; bl != NULL && bl->end == start && e < bl->nsucc; e++)
            after_noreturn |= cfg_block_succ(c->prog, bl, e)->kind == CFG_EDGE_NORETURN
                && bl->last_kind == ARCH_KIND_CALL;
        size_t dead = 0;
        while (after_noreturn && dead < n) {
            arch_insn_t in;
            if (arch_decode(p + dead, n - dead, start + dead, &in) < 0)
                break;
            dead += in.len;
            if (in.kind == ARCH_KIND_RET || in.kind == ARCH_KIND_JMP || in.kind == ARCH_KIND_HALT)
                break;
        }
        if (dead > 0 && dead <= n) {
            c->st->dead_bytes += dead;
            if (dead == n)
                return 0;
            return on_gap_stats(b, start + dead, end, arg);
        }
    }
    /* Trailing padding before the next procedure. */
    size_t tail = 0;
    while (p != NULL && tail < n && (p[n - 1 - tail] == 0xcc || p[n - 1 - tail] == 0x00
                                     || p[n - 1 - tail] == 0x90))
        tail++;
    c->st->padding_bytes += pad + tail;
    c->st->data_bytes += n - pad - tail;
    return CFG_VEC_PUSH(c->unreached, ((cfg_span_t) { start + pad, end - tail }));
}

/* Drop procedures found in gaps that turned out not to be code. */
static int
reject_bad_gap_procs(cfg_builder_t *b, cfg_u64_vec_t *rejected)
{
    size_t k = 0;
    int dropped = 0;
    /* Only builds make procedures unsafe, and sources are only ever added: none is
     * to be dropped unless a build made one found only in a gap unsafe. */
    if (!atomic_exchange_explicit(&b->unsafe_built, 0, memory_order_relaxed))
        return 0;
    for (size_t i = 0; i < b->procs.n; i++) {
        cfg_bproc_t *bp = &b->procs.v[i];
        /* Found only in a gap (perhaps jumped to by code that is no better): data. */
        if (gap_only(bp) && bp->p.unsafe != NULL) {
            QP_CHECK(CFG_VEC_PUSH(*rejected, bp->p.entry));
            cfg_bproc_free(bp);
            dropped = 1;
            continue;
        }
        if (k != i)
            b->procs.v[k] = *bp;
        k++;
    }
    b->procs.n = k;
    if (dropped)
        cfg_discover_extents(b);
    return dropped;
}

/*****************************************************************************
 * Flattening into the program
 */

typedef struct prog_priv {
    CFG_VEC(char *) strings; /* names and reasons made up by the builder */
    uint32_t *by_addr;       /* block indices sorted by start address */
    cfg_held_cache_t held;   /* cfg_held_addrs, once asked */
} prog_priv_t;

cfg_held_cache_t *
cfg_prog_held_cache(const cfg_prog_t *prog)
{
    prog_priv_t *pp = prog->priv;
    return pp != NULL ? &pp->held : NULL;
}

/* Block X before block Y by address (then by index: the order is total). */
static int
block_before(const cfg_prog_t *prog, uint32_t x, uint32_t y)
{
    uint64_t sx = prog->blocks[x].start, sy = prog->blocks[y].start;
    return sx < sy || (sx == sy && x < y);
}

/*
 * Sort the N block indices V by address. They come as runs in address order, one per
 * procedure, nearly all in order one after the other (a procedure's cold fragments
 * break the order): runs are merged, pairwise, until one is left. TMP holds N.
 */
static void
sort_block_runs(const cfg_prog_t *prog, uint32_t *v, uint32_t *tmp, size_t n)
{
    CFG_VEC(size_t) runs = { 0 }; /* run starts, then n */
    for (size_t i = 0; i < n; i++)
        if ((i == 0 || !block_before(prog, v[i - 1], v[i])) && CFG_VEC_PUSH(runs, i) < 0)
            goto fallback;
    if (CFG_VEC_PUSH(runs, n) < 0)
        goto fallback;
    uint32_t *from = v, *to = tmp;
    while (runs.n > 2) {
        size_t r = 0, k = 0;
        for (; r + 2 < runs.n; r += 2) {
            size_t a = runs.v[r], am = runs.v[r + 1], bm = runs.v[r + 2], o = a, c = am;
            while (a < am && c < bm)
                to[o++] = block_before(prog, from[c], from[a]) ? from[c++] : from[a++];
            while (a < am)
                to[o++] = from[a++];
            while (c < bm)
                to[o++] = from[c++];
            runs.v[k++] = runs.v[r];
        }
        if (r + 1 < runs.n) { /* an odd run out: copied as it is */
            memcpy(to + runs.v[r], from + runs.v[r], (runs.v[r + 1] - runs.v[r]) * sizeof(*v));
            runs.v[k++] = runs.v[r];
        }
        runs.v[k++] = n;
        runs.n = k;
        uint32_t *t = from;
        from = to;
        to = t;
    }
    if (from != v)
        memcpy(v, from, n * sizeof(*v));
    CFG_VEC_FREE(runs);
    return;
fallback:
    /* Without memory for the runs: one element at a time (insertion). */
    CFG_VEC_FREE(runs);
    for (size_t i = 1; i < n; i++) {
        uint32_t x = v[i];
        size_t k = i;
        for (; k > 0 && block_before(prog, x, v[k - 1]); k--)
            v[k] = v[k - 1];
        v[k] = x;
    }
}

static int
flatten(cfg_builder_t *b, cfg_prog_t *prog)
{
    size_t nb = 0, ne = 0, nt = 0;
    for (size_t i = 0; i < b->procs.n; i++) {
        nb += b->procs.v[i].blocks.n;
        ne += b->procs.v[i].edges.n;
        nt += b->procs.v[i].tables.n;
    }
    prog->procs = calloc(b->procs.n + 1, sizeof(cfg_proc_t));
    prog->blocks = calloc(nb + 1, sizeof(cfg_block_t));
    prog->edges = calloc(ne + 1, sizeof(cfg_edge_t));
    prog->preds = calloc(ne + 1, sizeof(uint32_t));
    prog->tables = calloc(nt + 1, sizeof(cfg_table_t));
    if (!prog->procs || !prog->blocks || !prog->edges || !prog->preds || !prog->tables)
        return QP_ENOMEM;
    uint32_t *local_to_global = malloc((nb + 1) * sizeof(uint32_t));
    prog_priv_t *pp = prog->priv;
    pp->by_addr = malloc((nb + 1) * sizeof(uint32_t));
    if (local_to_global == NULL || pp->by_addr == NULL) {
        free(local_to_global);
        return QP_ENOMEM;
    }
    size_t nsorted = 0;
    for (size_t i = 0; i < b->procs.n; i++) {
        cfg_bproc_t *bp = &b->procs.v[i];
        cfg_proc_t *p = &prog->procs[prog->nprocs++];
        *p = bp->p;
        p->block = prog->nblocks;
        p->nblocks = (uint32_t)bp->blocks.n;
        p->ntables = (uint32_t)bp->tables.n;
        if (p->flags & CFG_PROC_FRAGMENT)
            p->parent = cfg_proc_by_entry(b, bp->parent_entry);
        /* Entry block first, the rest in address order; edges follow their block. */
        uint32_t g = prog->nblocks;
        if (bp->entry_block >= bp->blocks.n)
            bp->entry_block = CFG_NONE;
        if (bp->entry_block != CFG_NONE)
            local_to_global[bp->entry_block] = g++;
        for (uint32_t k = 0; k < bp->blocks.n; k++)
            if (k != bp->entry_block)
                local_to_global[k] = g++;
        for (uint32_t n = 0; n < bp->blocks.n; n++) {
            uint32_t k = n;
            if (bp->entry_block != CFG_NONE)
                k = n == 0 ? bp->entry_block : (n <= bp->entry_block ? n - 1 : n);
            cfg_block_t bl = bp->blocks.v[k];
            bl.proc = (uint32_t)i;
            uint32_t first = prog->nedges;
            for (uint32_t e = 0; e < bl.nsucc; e++) {
                cfg_edge_t ed = bp->edges.v[bl.succ + e];
                ed.from = local_to_global[k];
                ed.to = ed.to == CFG_NONE ? CFG_NONE : local_to_global[ed.to];
                prog->edges[prog->nedges++] = ed;
            }
            bl.succ = first;
            prog->blocks[local_to_global[k]] = bl;
        }
        prog->nblocks = g;
        for (uint32_t k = 0; k < bp->blocks.n; k++) /* local blocks are in address order */
            pp->by_addr[nsorted++] = local_to_global[k];
        for (size_t k = 0; k < bp->tables.n; k++)
            prog->tables[prog->ntables++] = bp->tables.v[k];
        /* The builder's copy is no longer needed. */
        CFG_VEC_FREE(bp->blocks);
        CFG_VEC_FREE(bp->edges);
    }
    /* Predecessors: counting sort of edge indices by destination. */
    for (uint32_t e = 0; e < prog->nedges; e++)
        if (prog->edges[e].to != CFG_NONE)
            prog->blocks[prog->edges[e].to].npred++;
    uint32_t acc = 0;
    for (uint32_t k = 0; k < prog->nblocks; k++) {
        prog->blocks[k].pred = acc;
        acc += prog->blocks[k].npred;
        prog->blocks[k].npred = 0;
    }
    for (uint32_t e = 0; e < prog->nedges; e++) {
        uint32_t to = prog->edges[e].to;
        if (to != CFG_NONE)
            prog->preds[prog->blocks[to].pred + prog->blocks[to].npred++] = e;
    }
    /* Block lookup by address (local_to_global is scratch enough). */
    sort_block_runs(prog, pp->by_addr, local_to_global, prog->nblocks);
    free(local_to_global);
    return 0;
}

/*****************************************************************************
 * Statistics and final marks
 */

/*
 * Other procedures that jump into a procedure's interior (hand-written assembly such as
 * glibc's mempcpy jumping into memcpy) give it extra entries: they start blocks, and
 * traversal starts there too. Direct jumps are retargeted through the global old-to-new
 * map, so such entries need no redirect in the old text. Returns how many were new.
 */
static int
collect_interior_entries(cfg_builder_t *b)
{
    int added = 0;
    for (size_t i = 0; i < b->procs.n; i++) {
        const cfg_bproc_t *bp = &b->procs.v[i];
        for (size_t e = 0; bp->ntail > 0 && e < bp->edges.n; e++) {
            const cfg_edge_t *ed = &bp->edges.v[e];
            if (ed->kind != CFG_EDGE_TAILCALL || ed->target == 0)
                continue;
            uint32_t ti = cfg_discover_find(b, ed->target);
            if (ti == CFG_NONE || b->procs.v[ti].p.entry == ed->target)
                continue;
            if (b->procs.v[ti].p.flags & CFG_PROC_FRAGMENT)
                ti = cfg_proc_by_entry(b, b->procs.v[ti].parent_entry);
            if (ti == CFG_NONE || ti == i)
                continue;
            cfg_bproc_t *tp = &b->procs.v[ti];
            int known = 0;
            for (size_t k = 0; k < tp->extra_entries.n && !known; k++)
                known = tp->extra_entries.v[k] == ed->target;
            if (known)
                continue;
            QP_CHECK(CFG_VEC_PUSH(tp->extra_entries, ed->target));
            tp->p.flags |= CFG_PROC_MULTI_ENTRY;
            cfg_mark_unbuilt(b, tp);
            if (tp->p.flags & CFG_PROC_FRAGMENT)
                b->ranges_done = 0; /* assign_ranges marks it built (it has no blocks) */
            added++;
        }
    }
    return added;
}

/* An extra entry that does not start a block (it lies inside an instruction) is unsafe. */
static int
check_extra_entries(cfg_builder_t *b)
{
    for (size_t i = 0; i < b->procs.n; i++) {
        cfg_bproc_t *bp = &b->procs.v[i];
        for (size_t k = 0; k < bp->extra_entries.n; k++) {
            uint64_t a = bp->extra_entries.v[k];
            uint32_t bl = local_block_at(bp, a);
            if (bl == CFG_NONE || bp->blocks.v[bl].start != a)
                QP_CHECK(set_unsafe(&b->strings, bp, "entered at 0x%llx, not an instruction boundary",
                                    (unsigned long long)a));
        }
    }
    return 0;
}

static int
compute_stats(cfg_builder_t *b, cfg_prog_t *prog)
{
    cfg_stats_t *st = &prog->stats;
    const cfg_image_t *img = b->img;
    for (size_t i = 0; i < img->nsections; i++)
        if ((img->sections[i].flags & CFG_SEC_CODE) && img->sections[i].bytes
            && (img->sections[i].flags & CFG_SEC_ALLOC))
            st->text_bytes += img->sections[i].size;
    for (uint32_t k = 0; k < prog->nblocks; k++) {
        st->block_bytes += prog->blocks[k].end - prog->blocks[k].start;
        st->ninsns += prog->blocks[k].ninsns;
        if (prog->blocks[k].last_kind == ARCH_KIND_JMP_IND) {
            const cfg_edge_t *e = &prog->edges[prog->blocks[k].succ];
            if (prog->blocks[k].nsucc == 0)
                continue;
            if (e->kind == CFG_EDGE_TAILCALL)
                st->nind_tailcalls++;
            else {
                st->nind_jumps++;
                if (e->kind != CFG_EDGE_UNRESOLVED)
                    st->nind_resolved++;
            }
        }
    }
    for (uint32_t i = 0; i < prog->nprocs; i++) {
        const cfg_proc_t *p = &prog->procs[i];
        if (p->unsafe != NULL)
            st->nunsafe++;
        for (int s = 0; s < CFG_NSRC; s++)
            if (p->sources & (1u << s))
                st->nprocs_by_src[s]++;
    }
    /* The blocks as spans, adjacent ones of a section as one (the gaps are the same). */
    span_vec_t v = { 0 };
    const prog_priv_t *pp = prog->priv;
    const cfg_section_t *sec = NULL; /* the section of the last span's start */
    int rc = 0;
    for (uint32_t k = 0; k < prog->nblocks && rc == 0; k++) {
        const cfg_block_t *bl = &prog->blocks[pp->by_addr[k]];
        span_t *last = v.n > 0 ? &v.v[v.n - 1] : NULL;
        if (last != NULL && last->end == bl->start && sec != NULL && bl->start > sec->vma
            && bl->start < sec->vma + sec->size) {
            last->end = bl->end;
            continue;
        }
        sec = cfg_image_section_at(b->img, bl->start);
        rc = CFG_VEC_PUSH(v, ((span_t) { bl->start, bl->end }));
    }
    stat_ctx_t c = { st, prog, { 0 } };
    if (rc == 0)
        rc = for_each_gap(b, &v, on_gap_stats, &c);
    CFG_VEC_FREE(v);
    prog->unreached = c.unreached.v;
    prog->nunreached = (uint32_t)c.unreached.n;
    return rc;
}

/*****************************************************************************
 * The driver loop
 */

static void
builder_free(cfg_builder_t *b)
{
    for (size_t i = 0; i < b->procs.n; i++) {
        cfg_bproc_free(&b->procs.v[i]);
    }
    CFG_VEC_FREE(b->procs);
    CFG_VEC_FREE(b->addr_taken);
    CFG_VEC_FREE(b->new_entries);
    CFG_VEC_FREE(b->new_srcs);
    CFG_VEC_FREE(b->rejected);
    CFG_VEC_FREE(b->landing_pads);
    CFG_VEC_FREE(b->unbuilt);
    CFG_VEC_FREE(b->frags);
    CFG_VEC_FREE(b->parents);
    CFG_VEC_FREE(b->nr_dirty);
    cfg_nr_deps_free(b->nr);
    b->nr = NULL;
    for (size_t i = 0; i < b->strings.n; i++)
        free(b->strings.v[i]);
    CFG_VEC_FREE(b->strings);
    for (unsigned w = 0; b->scratch != NULL && w < b->nscratch; w++)
        scratch_free(&b->scratch[w]);
    free(b->scratch);
}

/* Is ED the way on after a call that ends its procedure (a tail call into the next)? */
static int
after_call(const cfg_bproc_t *bp, const cfg_edge_t *ed)
{
    uint8_t k = bp->blocks.v[ed->from].last_kind;
    return k == ARCH_KIND_CALL || k == ARCH_KIND_CALL_IND;
}

/* Does procedure BP's CFG, as built, have a block at ADDR? */
static int
has_block_at(const cfg_bproc_t *bp, uint64_t addr)
{
    for (size_t k = 0; k < bp->blocks.n; k++)
        if (bp->blocks.v[k].start == addr)
            return 1;
    return 0;
}

/*
 * Stripped binaries have no "foo.cold" names: a nameless procedure that is never called
 * nor address-taken, that is entered only by jumps from one procedure P, and that
 * jumps back into P or never returns, is P's cold fragment. P is no fragment itself, nor
 * becoming one this round: a fragment's fragment is not built with the blocks of the
 * root. A tie holds only while P's CFG, built with the fragment, reaches the fragment's
 * start: a start that P does not reach is reached some other way (a pointer in data,
 * which a program that is not position independent holds without a relocation), and it
 * is a procedure; left tied, its head would stay in place, unreached, while the rest
 * moved with P. Such a procedure is never tied again. UNTIE_ONLY: undo ties that do not
 * hold, tie nothing. Returns the number tied or untied.
 */
static int
tie_nameless_fragments(cfg_builder_t *b, int untie_only)
{
    const uint32_t not_fragment = CFG_SRC_SYMBOL | CFG_SRC_CALL | CFG_SRC_ENTRY | CFG_SRC_INIT
        | CFG_SRC_PLT | CFG_SRC_ADDR | CFG_SRC_SECTION;
    size_t n = b->procs.n;
    int changed = 0;
    for (size_t i = 0; i < n; i++) {
        cfg_bproc_t *fp = &b->procs.v[i];
        if (!fp->tied_nameless)
            continue;
        uint32_t pi = cfg_proc_by_entry(b, fp->parent_entry);
        const cfg_bproc_t *pp = pi != CFG_NONE ? cfg_discover_proc(b, pi) : NULL;
        fp->never_tie |= pp != NULL && pp->built && !(pp->p.flags & CFG_PROC_FRAGMENT)
            && !has_block_at(pp, fp->p.entry);
        if ((fp->p.sources & not_fragment) || fp->never_tie || pp == NULL
            || (pp->p.flags & CFG_PROC_FRAGMENT)) {
            fp->p.flags &= ~(uint32_t)CFG_PROC_FRAGMENT;
            fp->tied_nameless = 0;
            if (pi != CFG_NONE && pi < b->procs.n)
                cfg_mark_unbuilt(b, &b->procs.v[pi]); /* without the fragment's blocks */
            cfg_mark_unbuilt(b, fp);
            cfg_mark_nr_dirty(b, fp);
            b->gen++;
            changed++;
        }
    }
    if (untie_only) {
        if (changed)
            QP_CHECK(cfg_list_fragments(b));
        return changed;
    }
    uint32_t *from = malloc((n + 1) * sizeof(uint32_t)); /* sole jumping proc, or NONE */
    uint8_t *many = calloc(n + 1, 1);                    /* jumped to from several */
    uint32_t *cand = malloc((n + 1) * sizeof(uint32_t)); /* the parent to tie to, or NONE */
    if (from == NULL || many == NULL || cand == NULL) {
        free(from);
        free(many);
        free(cand);
        return QP_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        from[i] = CFG_NONE;
    for (size_t i = 0; i < n; i++) {
        const cfg_bproc_t *bp = &b->procs.v[i];
        for (size_t e = 0; bp->ntail > 0 && e < bp->edges.n; e++) {
            const cfg_edge_t *ed = &bp->edges.v[e];
            /* (A call's way on into the next procedure is no jump to a fragment.) */
            if (ed->kind != CFG_EDGE_TAILCALL || ed->target == 0 || after_call(bp, ed))
                continue;
            uint32_t ti = cfg_discover_find(b, ed->target);
            if (ti == CFG_NONE || ti == i)
                continue;
            /* Jumps between pieces of one FDE range do not count. */
            const cfg_bproc_t *tp = &b->procs.v[ti];
            uint32_t head = ti;
            while (head > 0 && (tp->p.sources & CFG_SRC_GAP) && !(tp->p.sources & CFG_SRC_EH_FRAME))
                tp = &b->procs.v[--head];
            uint64_t hend = tp->hint_end ? tp->hint_end : tp->p.end;
            if (ed->target >= hend) {
                head = ti;
                tp = &b->procs.v[ti];
                hend = tp->hint_end ? tp->hint_end : tp->p.end;
            }
            if (bp->p.entry >= tp->p.entry && bp->p.entry < hend)
                continue;
            if (from[head] == CFG_NONE)
                from[head] = (uint32_t)i;
            else if (from[head] != i)
                many[head] = 1;
        }
    }
    for (size_t f = 0; f < n; f++) {
        cfg_bproc_t *fp = &b->procs.v[f];
        cand[f] = CFG_NONE;
        if (from[f] == CFG_NONE || many[f] || (fp->p.sources & not_fragment) || fp->never_tie
            || (fp->p.flags & CFG_PROC_FRAGMENT) || !(fp->p.sources & CFG_SRC_EH_FRAME))
            continue;
        const cfg_bproc_t *pp = &b->procs.v[from[f]];
        if (pp->p.flags & CFG_PROC_FRAGMENT)
            continue;
        /* Does the fragment jump back into P, or never return? */
        int back = 0, returns = 0;
        uint64_t fend = fp->hint_end ? fp->hint_end : fp->p.end;
        for (size_t k = f; k < n && b->procs.v[k].p.entry < fend; k++)
            for (size_t e = 0; e < b->procs.v[k].edges.n; e++) {
                const cfg_edge_t *ed = &b->procs.v[k].edges.v[e];
                returns |= ed->kind == CFG_EDGE_RETURN;
                back |= ed->kind == CFG_EDGE_TAILCALL && ed->target >= pp->p.start
                    && ed->target < pp->p.end && !after_call(&b->procs.v[k], ed);
            }
        if (!back && returns)
            continue;
        cand[f] = from[f];
    }
    int tied = 0;
    for (size_t f = 0; f < n; f++) {
        /* (Of two that only jump to each other, the first is tied: the cold part comes
         * first in GNU ld's layout, and a wrong guess does not hold.) */
        if (cand[f] == CFG_NONE || (cand[cand[f]] != CFG_NONE && !(cand[cand[f]] == f && f < cand[f])))
            continue;
        cfg_bproc_t *fp = &b->procs.v[f];
        const cfg_bproc_t *pp = &b->procs.v[cand[f]];
        fp->p.flags |= CFG_PROC_FRAGMENT;
        fp->parent_entry = pp->p.entry;
        fp->tied_nameless = 1;
        cfg_mark_nr_dirty(b, fp);
        b->gen++;
        tied++;
    }
    free(from);
    free(many);
    free(cand);
    QP_CHECK(cfg_list_fragments(b));
    if (!tied)
        return changed;
    /* Gap procedures inside a tied fragment's FDE range are part of it. */
    size_t k = 0;
    uint64_t cut_end = 0;
    for (size_t i = 0; i < b->procs.n; i++) {
        cfg_bproc_t *bp = &b->procs.v[i];
        if (bp->p.flags & CFG_PROC_FRAGMENT)
            cut_end = bp->hint_end ? bp->hint_end : bp->p.end;
        else if (bp->p.sources == CFG_SRC_GAP && bp->p.entry < cut_end) {
            cfg_bproc_free(bp);
            continue;
        }
        b->procs.v[k++] = *bp;
    }
    b->procs.n = k;
    cfg_discover_extents(b);
    return tied + changed;
}


/*
 * Build every procedure that is not current, then find procedures that never return and
 * code in gaps, until nothing changes. Work is only redone where something changed.
 */
/*
 * Would a call of BP that returns to NEXT get anything but a "never returns" edge, were
 * BP built again with its callee returning? Yes when NEXT is in BP's ranges (the code
 * there is traversed) or a procedure starts after the padding there (a tail call to it,
 * see edge_to_next). No: the call ends the procedure's code and nothing follows, and
 * building it again would give the same edge (the compiler knew the call never returns
 * there).
 */
static int
return_site_used(const cfg_builder_t *b, const cfg_bproc_t *bp, uint64_t next)
{
    if (slot(bp, next) >= 0)
        return 1;
    size_t avail;
    const uint8_t *p = cfg_image_ptr(b->img, next, &avail);
    uint64_t after = next + (p ? padding_len(p, avail < 32 ? avail : 32, next) : 0);
    return cfg_proc_by_entry(b, after) != CFG_NONE;
}

/*
 * Mark BP to be built again when one of its "never returns" calls goes to a callee
 * that may return (see rebuild_stale_noreturn_callers); 1 when marked. NORET: the
 * entries of the procedures that never return (sorted), most callees: one look there
 * instead of a search of the procedures.
 */
static size_t
rebuild_if_stale(cfg_builder_t *b, cfg_bproc_t *bp, const cfg_u64_vec_t *noret)
{
    for (size_t s = 0; s < bp->noret_sites.n; s++) {
        const cfg_noret_site_t *ns = &bp->noret_sites.v[s];
        if (cfg_u64_contains(noret->v, noret->n, ns->callee))
            continue; /* never returns still */
        uint32_t c = cfg_proc_by_entry(b, ns->callee);
        if (c != CFG_NONE && !(b->procs.v[c].p.flags & CFG_PROC_NORETURN)
            && return_site_used(b, bp, ns->ret)) {
            cfg_mark_unbuilt(b, bp);
            if (bp->p.flags & CFG_PROC_FRAGMENT)
                b->ranges_done = 0; /* see assign_ranges */
            return 1;
        }
    }
    return 0;
}

/*
 * Procedures with a "never returns" call to a callee that the last fixpoint says may
 * return: marked to be built again. Their call then gets its return edge (or a tail call
 * into the next procedure, when nothing follows it). NORET: the entries of the procedures
 * that never return (noreturn_and_prune), sorted. Returns how many.
 */
static size_t
rebuild_stale_noreturn_callers(cfg_builder_t *b, const cfg_u64_vec_t *noret)
{
    size_t n = 0;
    for (size_t i = 0; i < b->procs.n; i++)
        n += rebuild_if_stale(b, &b->procs.v[i], noret);
    return n;
}

/* *TO = FROM's values, sorted. */
static int
sorted_copy(const cfg_u64_vec_t *from, cfg_u64_vec_t *to)
{
    to->n = 0;
    for (size_t i = 0; i < from->n; i++)
        QP_CHECK(CFG_VEC_PUSH(*to, from->v[i]));
    if (to->n > 1)
        qsort(to->v, to->n, sizeof(uint64_t), cfg_u64_cmp);
    return 0;
}

/*
 * What a stale round (see build_all) may change: every procedure's flags and "may
 * return", and what it builds again. A round that changes none of it leaves the state
 * as it found it, so the rounds after it would do the same again, to no effect.
 */
typedef struct stale_snap {
    size_t n;                 /* b->procs.n */
    CFG_VEC(uint32_t) flags;  /* per procedure: p.flags */
    CFG_VEC(uint8_t) mayret;  /* per procedure: may_return */
    CFG_VEC(uint8_t) bytes;   /* the procedures to be built again: their blocks, edges */
} stale_snap_t;

static int
snap_push(stale_snap_t *sn, const void *p, size_t len)
{
    QP_CHECK(cfg_vec_grow((void **)&sn->bytes.v, &sn->bytes.cap, sn->bytes.n + len, 1));
    memcpy(sn->bytes.v + sn->bytes.n, p, len);
    sn->bytes.n += len;
    return 0;
}

/* Append what can change of procedure I (one to be built again). */
static int
snap_proc(const cfg_builder_t *b, size_t i, stale_snap_t *sn)
{
    const cfg_bproc_t *bp = &b->procs.v[i];
    size_t u = bp->p.unsafe ? strlen(bp->p.unsafe) + 1 : 0;
    size_t head[4] = { i, bp->blocks.n, bp->edges.n, u };
    QP_CHECK(snap_push(sn, head, sizeof(head)));
    QP_CHECK(snap_push(sn, bp->blocks.v, bp->blocks.n * sizeof(cfg_block_t)));
    QP_CHECK(snap_push(sn, bp->edges.v, bp->edges.n * sizeof(cfg_edge_t)));
    QP_CHECK(snap_push(sn, &bp->entry_block, sizeof(bp->entry_block)));
    QP_CHECK(snap_push(sn, &bp->p.nind_unresolved, sizeof(bp->p.nind_unresolved)));
    if (u > 0)
        QP_CHECK(snap_push(sn, bp->p.unsafe, u));
    return 0;
}

/* Take SN of B, whose procedures to be built again are marked. */
static int
snap_take(const cfg_builder_t *b, stale_snap_t *sn)
{
    sn->n = b->procs.n;
    sn->flags.n = sn->mayret.n = sn->bytes.n = 0;
    for (size_t i = 0; i < b->procs.n; i++) {
        QP_CHECK(CFG_VEC_PUSH(sn->flags, b->procs.v[i].p.flags));
        QP_CHECK(CFG_VEC_PUSH(sn->mayret, b->procs.v[i].may_return));
        if (!b->procs.v[i].built)
            QP_CHECK(snap_proc(b, i, sn));
    }
    return 0;
}

/*
 * Is B as SN found it (the procedures SN marked now built again)? 1 yes, 0 no (or not
 * sure: padding bytes may differ), QP_ENOMEM.
 */
static int
snap_same(const cfg_builder_t *b, const stale_snap_t *sn)
{
    if (b->procs.n != sn->n)
        return 0;
    for (size_t i = 0; i < sn->n; i++)
        if (b->procs.v[i].p.flags != sn->flags.v[i] || b->procs.v[i].may_return != sn->mayret.v[i])
            return 0;
    /* The same procedures, as they are now. */
    stale_snap_t now = { 0 };
    size_t at = 0;
    int rc = 0, same = 1;
    while (at < sn->bytes.n && rc == 0 && same) {
        size_t head[4];
        memcpy(head, sn->bytes.v + at, sizeof(head));
        now.bytes.n = 0;
        rc = snap_proc(b, head[0], &now);
        size_t len = now.bytes.n;
        same = rc == 0 && at + len <= sn->bytes.n && memcmp(now.bytes.v, sn->bytes.v + at, len) == 0;
        at += len;
    }
    CFG_VEC_FREE(now.bytes);
    return rc < 0 ? rc : same;
}

/*
 * The procedures not built, in *TODO (in order): those marked since the last round
 * (b->unbuilt, emptied), or every procedure looked at when one could not be noted.
 */
static int
unbuilt_procs(cfg_builder_t *b, idx_vec_t *todo)
{
    todo->n = 0;
    if (b->unbuilt_lost) {
        for (size_t i = 0; i < b->procs.n; i++)
            if (!b->procs.v[i].built)
                QP_CHECK(CFG_VEC_PUSH(*todo, (uint32_t)i));
    } else {
        QP_CHECK(idx_push_entries(b, todo, &b->unbuilt));
        idx_sort_unique(todo);
        size_t k = 0;
        for (size_t j = 0; j < todo->n; j++)
            if (!b->procs.v[todo->v[j]].built)
                todo->v[k++] = todo->v[j];
        todo->n = k;
    }
    b->unbuilt.n = 0;
    b->unbuilt_lost = 0;
    return 0;
}

static int
build_all(cfg_builder_t *b)
{
    span_vec_t spans = { 0 }, pad_gaps = { 0 };
    cfg_u64_vec_t noret = { 0 }; /* procedures that never return (noreturn_and_prune) */
    idx_vec_t todo = { 0 };
    int rc = 0, gap_rounds = 0, stale_rounds = 0, in_stale = 0;
    stale_snap_t snap = { 0 };
    size_t built = 0;
    for (int round = 0; round < 64; round++) {
        DBG_PHASE("round");
        if ((rc = assign_ranges(b)) < 0)
            break;
        if ((rc = unbuilt_procs(b, &todo)) < 0)
            break;
        if (rc == 0 && todo.n > 0)
            rc = build_round(b, todo.v, todo.n);
        built += todo.n;
        if (rc < 0)
            break;
        if ((rc = cfg_discover_add_new(b)) < 0)
            break;
        if (rc > 0)
            continue; /* new call targets: extents changed */
        if ((rc = reject_bad_gap_procs(b, &b->rejected)) < 0)
            break;
        if (rc > 0)
            continue;
        rc = 0;
        if (built == 0)
            break; /* nothing changed since the last fixpoint and gap scan */
        DBG_PHASE("built");
        if ((rc = cfg_nr_noreturn_and_prune(b, &noret)) < 0)
            break;
        rc = 0;
        built = 0;
        DBG_PHASE("noreturn");
        /* A stale round that changed nothing: the next ones would repeat it (they are
         * counted as if they ran). */
        if (in_stale && (rc = snap_same(b, &snap)) != 0) {
            if (rc < 0)
                break;
            round += 4 - stale_rounds;
            stale_rounds = 4;
            if (round >= 64)
                break; /* where the rounds would have stopped */
        }
        rc = in_stale = 0;
        /* Callers built while a callee seemed never to return, which returns after all:
         * built again, the code after the call now traversed (a few times at most). */
        if (stale_rounds < 4 && rebuild_stale_noreturn_callers(b, &noret) > 0) {
            stale_rounds++;
            built = 1;
            if (stale_rounds < 4) {
                if ((rc = snap_take(b, &snap)) < 0)
                    break;
                in_stale = 1;
            }
            continue;
        }
        if (b->opts.no_gap_procs || ++gap_rounds > 6)
            break;
        gap_ctx_t g = { { 0 }, &pad_gaps, { 0 }, 0 };
        size_t before = b->procs.n;
        if ((rc = collect_spans(b, &spans)) < 0 || (rc = sorted_copy(&b->rejected, &g.rejected)) < 0
            || (rc = cfg_discover_sweep_begin(b)) < 0) {
            CFG_VEC_FREE(g.rejected);
            break;
        }
        rc = for_each_gap(b, &spans, on_gap_new_proc, &g);
        int merged = cfg_discover_sweep_end(b);
        CFG_VEC_FREE(g.rejected);
        CFG_VEC_FREE(pad_gaps);
        pad_gaps = g.pad_now;
        if (!spans_sorted(&pad_gaps)) /* (met in address order but for the sections') */
            qsort(pad_gaps.v, pad_gaps.n, sizeof(span_t), cmp_span);
        if (rc >= 0)
            rc = merged;
        if (rc < 0)
            break;
        DBG_PHASE("gaps");
        if ((rc = cfg_discover_add_new(b)) < 0)
            break;
        if (rc == 0 && b->procs.n == before)
            break;
        built = 1; /* gap procedures were built: redo the fixpoint */
        rc = 0;
    }
    CFG_VEC_FREE(spans);
    CFG_VEC_FREE(pad_gaps);
    CFG_VEC_FREE(noret);
    CFG_VEC_FREE(todo);
    CFG_VEC_FREE(snap.flags);
    CFG_VEC_FREE(snap.mayret);
    CFG_VEC_FREE(snap.bytes);
    return rc < 0 ? rc : 0;
}

/*
 * A last consistency check: a call edge marked "never returns" must go to a procedure
 * that the final analysis still says never returns. Rounds of discovery can revise a
 * callee (its cold fragment and the return in it tied on later), and the code after such
 * a call was then never traversed: moving the caller would let the call return into
 * whatever follows it in the new layout. Such callers are unsafe, so they stay in place
 * (seen in Debian's python3.11, built with hot/cold splitting).
 */
static int
check_noreturn_calls(cfg_prog_t *prog)
{
    /* The calls that matter: "never returns" edges to a procedure's entry (what else
     * there is does not change below). */
    CFG_VEC(uint32_t) calls = { 0 };
    for (uint32_t k = 0; k < prog->nblocks; k++) {
        const cfg_block_t *bl = &prog->blocks[k];
        if (bl->last_kind != ARCH_KIND_CALL || bl->call_target == 0 || bl->nsucc == 0)
            continue;
        int noret = 0;
        for (uint32_t e = 0; e < bl->nsucc; e++)
            noret |= prog->edges[bl->succ + e].kind == CFG_EDGE_NORETURN;
        const cfg_proc_t *callee = noret ? cfg_proc_at(prog, bl->call_target) : NULL;
        if (callee != NULL && callee->entry == bl->call_target)
            QP_CHECK(CFG_VEC_PUSH(calls, k));
    }
    /* To a fixpoint: a caller found this way may itself be marked "never returns" on the
     * strength of that call, so its own callers' edges are suspect too. */
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t c = 0; c < calls.n; c++) {
            const cfg_block_t *bl = &prog->blocks[calls.v[c]];
            const cfg_proc_t *callee = cfg_proc_at(prog, bl->call_target);
            if (callee->flags & CFG_PROC_NORETURN)
                continue;
            cfg_proc_t *caller = &prog->procs[bl->proc];
            if ((caller->flags & CFG_PROC_FRAGMENT) && caller->parent != CFG_NONE)
                caller = &prog->procs[caller->parent];
            if (caller->unsafe == NULL)
                caller->unsafe = "a call assumed never to return goes to a procedure that "
                                 "returns";
            if (caller->flags & CFG_PROC_NORETURN) {
                caller->flags &= ~(uint32_t)CFG_PROC_NORETURN; /* it may return after all */
                changed = 1;
            }
        }
    }
    CFG_VEC_FREE(calls);
    return 0;
}

/* Loops of procedure K: each procedure's blocks are its own. */
static int
loops_task(void *arg, unsigned worker, size_t k)
{
    cfg_prog_t *prog = arg;
    (void)worker;
    return cfg_loops_proc(prog, &prog->procs[k]);
}

int
cfg_prog_build(const cfg_image_t *img, const cfg_opts_t *opts, cfg_prog_t **out)
{
    if (img == NULL || out == NULL)
        return QP_EINVAL;
    cfg_builder_t b;
    memset(&b, 0, sizeof(b));
    cfg_find_index_t find = { 0 };
    b.find = &find;
    b.img = img;
    if (opts != NULL)
        b.opts = *opts;
    b.nscratch = b.opts.threads > CFG_MAX_THREADS ? CFG_MAX_THREADS
                 : b.opts.threads > 1                ? b.opts.threads
                                                     : 1;
    b.scratch = calloc(b.nscratch, sizeof(cfg_scratch_t));
    cfg_prog_t *prog = calloc(1, sizeof(*prog));
    prog_priv_t *pp = calloc(1, sizeof(*pp));
    if (prog == NULL || pp == NULL || b.scratch == NULL) {
        free(prog);
        free(pp);
        free(b.scratch);
        return QP_ENOMEM;
    }
    prog->img = img;
    prog->priv = pp;
    dbg_phase(&b, "start");
    int rc = cfg_discover(&b);
    dbg_phase(&b, "discovered");
    if (rc == 0)
        rc = build_all(&b);
    for (int round = 0; rc == 0 && round < 8; round++) {
        int tied = tie_nameless_fragments(&b, 0);
        int entries = tied < 0 ? tied : collect_interior_entries(&b);
        rc = entries < 0 ? entries : 0;
        if (rc < 0 || tied + entries == 0)
            break;
        rc = build_all(&b);
    }
    /* The last round's ties must hold too. */
    for (int round = 0; rc == 0 && round < 8; round++) {
        int untied = tie_nameless_fragments(&b, 1);
        if (untied <= 0) {
            rc = untied;
            break;
        }
        rc = build_all(&b);
    }
    if (rc == 0) {
        rc = check_extra_entries(&b);
        dbg_phase(&b, "converged");
        /* What the noreturn analysis kept is no longer needed: its memory serves the
         * program's arrays. */
        cfg_nr_deps_free(b.nr);
        b.nr = NULL;
        if (rc == 0)
            rc = flatten(&b, prog);
    }
    dbg_phase(&b, "flattened");
    if (rc == 0)
        rc = check_noreturn_calls(prog);
    if (rc == 0)
        rc = cfg_parallel_for(b.nscratch, prog->nprocs, 64, loops_task, prog, NULL);
    dbg_phase(&b, "loops");
    if (rc == 0)
        rc = compute_stats(&b, prog);
    dbg_phase(&b, "stats");
    /* The program keeps the builder's strings (names and reasons). */
    pp->strings.v = b.strings.v;
    pp->strings.n = b.strings.n;
    pp->strings.cap = b.strings.cap;
    b.strings.v = NULL;
    b.strings.n = b.strings.cap = 0;
    builder_free(&b);
    free(find.v);
    if (rc < 0) {
        cfg_prog_destroy(prog);
        return rc;
    }
    *out = prog;
    return 0;
}

void
cfg_prog_destroy(cfg_prog_t *prog)
{
    if (prog == NULL)
        return;
    prog_priv_t *pp = prog->priv;
    if (pp != NULL) {
        for (size_t i = 0; i < pp->strings.n; i++)
            free(pp->strings.v[i]);
        CFG_VEC_FREE(pp->strings);
        free(pp->by_addr);
        free(pp->held.v);
        free(pp);
    }
    free(prog->procs);
    free(prog->blocks);
    free(prog->edges);
    free(prog->preds);
    free(prog->tables);
    free(prog->unreached);
    free(prog);
}

/*****************************************************************************
 * Lookups
 */

uint32_t
cfg_block_at(const cfg_prog_t *prog, uint64_t addr)
{
    if (prog == NULL)
        return CFG_NONE;
    const prog_priv_t *pp = prog->priv;
    size_t lo = 0, hi = prog->nblocks;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const cfg_block_t *bl = &prog->blocks[pp->by_addr[mid]];
        if (addr < bl->start)
            hi = mid;
        else if (addr >= bl->end)
            lo = mid + 1;
        else
            return pp->by_addr[mid];
    }
    return CFG_NONE;
}

int
cfg_block_dominates(const cfg_prog_t *prog, uint32_t a, uint32_t b)
{
    for (uint32_t k = 0; b != CFG_NONE && k < 1u << 20; k++) {
        if (b == a)
            return 1;
        b = prog->blocks[b].idom;
    }
    return 0;
}

const uint32_t *
cfg_blocks_by_addr(const cfg_prog_t *prog, size_t *n)
{
    *n = 0;
    if (prog == NULL)
        return NULL;
    const prog_priv_t *pp = prog->priv;
    *n = prog->nblocks;
    return pp->by_addr;
}

const cfg_proc_t *
cfg_proc_at(const cfg_prog_t *prog, uint64_t addr)
{
    uint32_t k = cfg_block_at(prog, addr);
    return k == CFG_NONE ? NULL : &prog->procs[prog->blocks[k].proc];
}

const cfg_proc_t *
cfg_proc_by_name(const cfg_prog_t *prog, const char *name)
{
    if (prog == NULL || name == NULL)
        return NULL;
    for (uint32_t i = 0; i < prog->nprocs; i++)
        if (strcmp(prog->procs[i].name, name) == 0)
            return &prog->procs[i];
    return NULL;
}
