/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Control-flow traces: the walk that regenerates every block from a trace file's
 * records (see qp_trace.h and driver/drv_trace.c; reading the description and the
 * files is report/qp_trace_read.c).
 *
 * The walk keeps a stack of frames: a traced procedure's activation (at a block, about
 * to enter it or to leave it) or code that is not traced (a call out, waiting for its
 * RETURNED; the bottom frame stands for whatever called the traced code first). Leaving
 * a block: the next record names one of its ways out (a CHORD from it, or the BLOCK of
 * one of its targets), else the tree edge is taken, which needs no record. Entering a
 * block: it is printed, its BLOCK record (if it makes one) is taken, and its call is
 * followed: a traced callee is pushed (its ENTER taken when it makes one), other code
 * is an outside frame in which ENTER records are callbacks. A record that fits none of
 * this is placed as well as it can be and marked: an ENTER in a traced frame ran
 * asynchronously (a signal handler) somewhere in the blocks since the last record; a
 * RETURNED of a frame further down is a second return (longjmp to a setjmp); the BLOCK
 * of a landing pad is an exception caught there; anything else restarts the walk.
 */
#include <stdlib.h>
#include <string.h>

#include "arch/arch.h"
#include "arch/qp_err.h"
#include "cfg/cfg.h"
#include "report/qp_trace.h"

#define NONE QPT_TRACE_NONE

/*****************************************************************************
 * The walk
 */

enum { F_PROC, F_OUT };
enum { S_ENTER, S_CALL, S_LEAVE }; /* S_CALL: printed, its call not made yet */

/* Where a signal handler's entry (a QPT_TRACE_SIGNAL record) interrupted the program. */
enum {
    SIG_INSN,    /* an instruction of a traced block (sig_block): exact */
    SIG_BEFORE,  /* the start of a traced block's slot (sig_block), before its snippets:
                  * the block did not start (a signal, not a fault): exact */
    SIG_PROBE,   /* the new code, but no instruction of a block: a probe, a stub */
    SIG_RUNTIME, /* the runtime (a record's buffer refill, a hook) */
    SIG_OUTSIDE, /* code that is not traced */
};

/* Is record R a signal record (three words: the kind, then the rip)? */
static int
is_sig(uint32_t r)
{
    return r == QPT_TRACE_SIGNAL || r == QPT_TRACE_FAULT;
}

/* Is record R one of three words (a signal record, a jump's target)? */
static int
is_triple(uint32_t r)
{
    return is_sig(r) || r == QPT_TRACE_JUMP;
}

typedef struct frame {
    uint8_t kind;      /* F_* */
    uint8_t state;     /* F_PROC: S_* */
    uint8_t consumed;  /* S_ENTER: its BLOCK record was taken already */
    uint8_t ret;       /* F_PROC: its caller's call records RETURNED after it returns */
    uint8_t async;     /* F_PROC: entered asynchronously: its caller's state is kept */
    uint8_t leaf;      /* async: the interrupted code had called a leaf since its last
                        * record (walk_t.leaf_at), which holds again when it returns */
    uint32_t want;     /* S_ENTER: 1 + the CHORD record entering the block takes (a chord
                        * recorded in the block, after a signal handler), or 0 */
    uint32_t proc;     /* F_PROC */
    uint32_t block;    /* F_PROC: the block; F_OUT: the call's block, or NONE */
} frame_t;

typedef struct walk {
    const qp_trace_desc_t *d;
    const uint32_t *rec;
    size_t n, i;
    const qp_trace_sink_t *sink;
    qp_trace_stats_t *st;
    frame_t *f;
    size_t nf, cap;
    int rc;
    int done;
    uint64_t silent;   /* blocks since the last record */
    size_t sig_at;     /* the record index of the signal record sig_* describe, or NONE */
    int sig_kind;      /* SIG_* */
    uint32_t sig_block;/* SIG_INSN: the block */
    uint64_t sig_insn; /* SIG_INSN: the instruction's link-time address */
    size_t leaf_at;    /* i + 1 when a block calling a leaf (code not traced, no record)
                        * was entered: untraced code ran since the last record */
    uint64_t resets;   /* reset() calls */
    const struct walk *parent; /* after_handler's copies: the walk they were made of */
    size_t sim_at;     /* ... the signal record whose handler they walk, else NONE */
    size_t run_at, run_end; /* a run of signal records of handlers in code not traced
                        * (with their handlers' records) from run_at: the first record
                        * after it (NONE: unknown), or run_at NONE */
    const uint64_t *starts; /* the blocks' starts, ascending (jump records' targets) */
    const uint32_t *start_block; /* ... and their blocks */
    size_t nstarts;
} walk_t;

#define SILENT_MAX 100000000ull /* blocks without a record: the trace cannot be right */

static int
push(walk_t *w, frame_t fr)
{
    if (w->nf == w->cap) {
        size_t nc = w->cap ? w->cap * 2 : 64;
        frame_t *v = realloc(w->f, nc * sizeof(*v));
        if (v == NULL)
            return w->rc = QP_ENOMEM;
        w->f = v;
        w->cap = nc;
    }
    w->f[w->nf++] = fr;
    return 0;
}

static frame_t
proc_frame(uint32_t proc, uint32_t block, int state, int ret)
{
    return (frame_t) { .kind = F_PROC, .state = (uint8_t)state, .ret = (uint8_t)ret,
                       .proc = proc, .block = block };
}

static frame_t
out_frame(uint32_t site)
{
    return (frame_t) { .kind = F_OUT, .block = site };
}

static void
mark(walk_t *w, const char *what, uint64_t addr)
{
    w->st->marks++;
    if (w->sink->mark && w->rc == 0) {
        int r = w->sink->mark(w->sink->arg, what, addr);
        if (r)
            w->rc = r;
    }
}

/* The next record (QPT_TRACE_END past the end of a complete trace), or NONE at the end
 * of one that was cut short. */
static uint32_t
peek(const walk_t *w)
{
    return w->i < w->n ? w->rec[w->i] : NONE;
}

static const qpt_trace_event_t *
event(const walk_t *w, uint32_t r)
{
    return r < w->d->hdr.nevents ? &w->d->events[r] : NULL;
}

/* Start again from nothing known (the bottom frame) and FR. */
static void
reset(walk_t *w, const char *what, uint64_t addr)
{
    mark(w, what, addr);
    w->resets++;
    w->nf = 0;
    push(w, out_frame(NONE));
}

/* Enter procedure Q's entry block in a new frame (ENTERED: its ENTER was taken; else a
 * procedure that makes one waits for it, block NONE). */
static void
enter_proc(walk_t *w, uint32_t q, int ret, int async, int entered)
{
    const qpt_trace_proc_t *p = &w->d->procs[q];
    frame_t fr = proc_frame(q, p->block, S_ENTER, ret);
    fr.async = (uint8_t)async;
    if (p->enter_event != NONE && !entered)
        fr.block = NONE;
    push(w, fr);
}

/* The top frame goes on in procedure Q's entry, as a tail call (ENTERED: its ENTER was
 * taken). */
static void
jump_to_proc(walk_t *w, uint32_t q, int entered)
{
    frame_t top = w->f[--w->nf];
    enter_proc(w, q, top.ret, top.async, entered);
    w->f[w->nf - 1].leaf = top.leaf;
}

/* The top frame goes on in block B of another procedure (CONSUMED: its BLOCK record was
 * taken). */
static void
jump_to_block(walk_t *w, uint32_t b, int consumed)
{
    frame_t top = w->f[--w->nf];
    frame_t fr = proc_frame(w->d->blocks[b].proc, b, S_ENTER, top.ret);
    fr.async = top.async;
    fr.leaf = top.leaf;
    fr.consumed = (uint8_t)consumed;
    push(w, fr);
}

/* Back from the top frame to its caller. */
static void
return_from(walk_t *w)
{
    frame_t top = w->f[--w->nf];
    if (top.async) /* the handler's leaf calls were not the interrupted code's */
        w->leaf_at = top.leaf ? w->i + 1 : 0;
    if (w->nf == 0) {
        push(w, out_frame(NONE));
        return;
    }
    frame_t *c = &w->f[w->nf - 1];
    if (c->kind != F_PROC || top.async)
        return; /* a callback returned into code not traced; a handler returned */
    if (top.ret) {
        const qpt_trace_block_t *b = &w->d->blocks[c->block];
        if (peek(w) == b->ret_event) {
            w->i++;
            w->silent = 0;
        } else {
            reset(w, "cut: a call's return record is missing", b->start);
            return;
        }
    }
    c->state = S_LEAVE;
}

static void take_signal(walk_t *w, int marked);

/*
 * The traced block a jump record's target TO (link-time) enters, or NONE (code not
 * traced): a traced procedure's entry (moved code: the jump's translation, or the
 * redirect at its old entry, goes to its new code), or a block that records BLOCK (which
 * says so itself; any other address inside moved code runs its old, untraced copy).
 */
static uint32_t
jump_target(const walk_t *w, uint64_t to)
{
    size_t k = cfg_u64_lower_bound(w->starts, w->nstarts, to);
    if (k == w->nstarts || w->starts[k] != to)
        return NONE;
    uint32_t b = w->start_block[k];
    const qpt_trace_block_t *x = &w->d->blocks[b];
    return w->d->procs[x->proc].block == b || (x->flags & QPT_TB_BLOCKEV) ? b : NONE;
}

/* A QPT_TRACE_EMPTY slot the walk meets: its record is not known. */
#define LOST_RECORD                                                                      \
    "cut: a record lost (its slot was written out before the record: a signal handler "  \
    "filled the buffer)"

/* Handle a record that the walk did not expect at this point. */
static void
unexpected(walk_t *w, uint32_t r)
{
    const qp_trace_desc_t *d = w->d;
    if (r == NONE) {
        /* The end of a complete trace: the process ended in the call or the code the
         * walk got to. */
        if (!w->st->complete)
            mark(w, "cut: the trace ends here without its end record (killed, _exit, or "
                    "a thread that was still running)", 0);
        w->done = 1;
        return;
    }
    if (r == QPT_TRACE_LOST) {
        w->i++;
        reset(w, "cut: events of another thread may follow (a thread control block "
                 "reused unseen)", 0);
        return;
    }
    if (r == QPT_TRACE_EMPTY) {
        w->i++;
        reset(w, LOST_RECORD, 0);
        return;
    }
    if (is_sig(r)) { /* a record is needed here: the handler ran before */
        take_signal(w, 1);
        return;
    }
    if (r == QPT_TRACE_JUMP) { /* a jump the walk is not at: on from its target */
        uint64_t to = w->i + 2 < w->n ? w->rec[w->i + 1] | (uint64_t)w->rec[w->i + 2] << 32 : 0;
        w->i += 3;
        w->silent = 0;
        uint32_t tb = jump_target(w, to);
        reset(w, "cut: a jump taken from where the walk is not", to);
        if (tb != NONE)
            push(w, proc_frame(d->blocks[tb].proc, tb, S_ENTER, 0));
        return;
    }
    const qpt_trace_event_t *e = event(w, r);
    if (e == NULL) {
        w->rc = QP_EINVAL;
        return;
    }
    w->i++;
    w->silent = 0;
    switch (e->kind) {
    case QPT_TV_ENTER:
        mark(w, "async: the next activation ran somewhere in the blocks since the last "
                "record (a signal handler?)", d->procs[e->a].entry);
        enter_proc(w, e->a, 0, 1, 1);
        return;
    case QPT_TV_RETURNED: {
        const qpt_trace_block_t *b = &d->blocks[e->a];
        for (size_t k = w->nf; k-- > 0;)
            if (w->f[k].kind == F_PROC && w->f[k].proc == b->proc) {
                w->nf = k + 1;
                w->f[k].block = e->a;
                w->f[k].state = S_LEAVE;
                mark(w, (b->flags & QPT_TB_SETJMP)
                            ? "longjmp: frames abandoned; the call returns again"
                            : "cut: frames abandoned; a call further down returns",
                     b->start);
                return;
            }
        reset(w, "cut: the return of a call whose frame is unknown", b->start);
        push(w, proc_frame(b->proc, e->a, S_LEAVE, 0));
        return;
    }
    case QPT_TV_BLOCK: {
        const qpt_trace_block_t *b = &d->blocks[e->a];
        if (b->flags & QPT_TB_ROOT)
            for (size_t k = w->nf; k-- > 0;)
                if (w->f[k].kind == F_PROC && w->f[k].proc == b->proc) {
                    w->nf = k + 1;
                    w->f[k].block = e->a;
                    w->f[k].state = S_ENTER;
                    w->f[k].consumed = 1;
                    mark(w, "exception: frames unwound to a landing pad", b->start);
                    return;
                }
        reset(w, "cut: a block entered from where the walk is not", b->start);
        frame_t fr = proc_frame(b->proc, e->a, S_ENTER, 0);
        fr.consumed = 1;
        push(w, fr);
        return;
    }
    default: {
        const qpt_trace_edge_t *x = &d->edges[e->a];
        const qpt_trace_block_t *b = &d->blocks[x->from];
        reset(w, "cut: an edge taken from where the walk is not", b->start);
        push(w, proc_frame(b->proc, x->from, S_LEAVE, 0));
        w->i--; /* the frame takes it */
        return;
    }
    }
}

/* Is the instruction at P (N bytes) a record's reservation, xadd %r,%fs:CUR
 * (runtime: 64 REX.W 0f c1 modrm(r, disp32) 25 disp32)? */
static int
is_reserve(const uint8_t *p, size_t n)
{
    return n == 10 && p[0] == 0x64 && (p[1] & 0xf8) == 0x48 && p[2] == 0x0f && p[3] == 0xc1
        && (p[4] & 0xc7) == 0x04 && p[5] == 0x25 && p[6] == QPT_TRACE_TCB_CUR && p[7] == 0
        && p[8] == 0 && p[9] == 0;
}

/* Do D's snippets write 16-bit units (QPT_TRACE_FMAGIC3: a version-5 chord tracer)? */
static int
units_written(const qp_trace_desc_t *d)
{
    return d->hdr.version >= 5 && d->hdr.kind == QPT_TRACE_CHORDS;
}

/* Is the instruction at P (N bytes) a record's write, movl $ID,0(%r) (arch trace_rec:
 * [REX.B] c7 modrm(mod 1, reg 0) [SIB 24] 00 imm32), or where D's snippets write units,
 * movw $ID,0(%r) (66 first, imm16; a long event's two units by movl)? The record in
 * *ID (NONE: a value record's marker). */
static int
is_record_write(const qp_trace_desc_t *d, const uint8_t *p, size_t n, uint32_t *id)
{
    int w16 = n > 0 && p[0] == 0x66;
    size_t i = w16 ? 1 : 0;
    if (n > i && (p[i] & 0xf8) == 0x40) /* REX without W */
        i++;
    if (n < i + 3 || p[i] != 0xc7 || (p[i + 1] & 0xf8) != 0x40)
        return 0;
    size_t j = i + 2;
    if ((p[i + 1] & 7) == 4 && p[j++] != 0x24)
        return 0;
    if (n != j + (w16 ? 3 : 5) || p[j] != 0 || (w16 && !units_written(d)))
        return 0;
    if (w16) {
        uint32_t u = (uint32_t)p[j + 1] | (uint32_t)p[j + 2] << 8;
        *id = u < QPT_TRACE_U16_LONG ? u : NONE;
        return 1;
    }
    *id = (uint32_t)p[j + 1] | (uint32_t)p[j + 2] << 8 | (uint32_t)p[j + 3] << 16
        | (uint32_t)p[j + 4] << 24;
    if (units_written(d)) { /* QPT_TRACE_U16_PACK */
        uint32_t lo = *id & 0xffff;
        *id = lo >= QPT_TRACE_U16_LONG && lo < QPT_TRACE_U16_REPEAT
            ? (lo - QPT_TRACE_U16_LONG) << 16 | *id >> 16 : NONE;
    }
    return 1;
}

/*
 * The record that the snippet a signal interrupted at RIP (a link-time address) had
 * reserved its slot for and not yet written: the first record write in the few
 * instructions from RIP (the limit's cmp, jb, the refill's call and jmp, the write),
 * or NONE.
 */
static uint32_t
interrupted_record(const qp_trace_desc_t *d, uint64_t rip)
{
    if (d->ntext == NULL || rip - d->nhdr.base >= d->nhdr.size)
        return NONE;
    uint64_t a = rip - d->nhdr.base;
    for (int k = 0; k < 5 && a < d->nhdr.size; k++) {
        arch_insn_t in;
        uint32_t id;
        if (arch_decode(d->ntext + a, d->nhdr.size - a, d->nhdr.base + a, &in) < 0 || in.len == 0)
            return NONE;
        if (is_record_write(d, d->ntext + a, in.len, &id))
            return id < d->hdr.nevents ? id : NONE;
        a += in.len;
    }
    return NONE;
}

/*
 * Is the new code address RIP (link-time) in a record's snippet after its reservation
 * (xadd) and before its write (ARCH_SN_TRACE_REC: cmp %fs:LIM; jb 2f; call refill; jmp
 * 1b; 2: movl $id)? WIN_CHECK at the cmp or jb (the slot may lie past the limit: then
 * the refill runs and the record is reserved again, after a handler's records),
 * WIN_AGAIN at the call or jmp (it will be), WIN_WRITE at the movl (it lies before
 * them); 0 otherwise. *START: the reservation's start (label 1), *ID: the record.
 */
enum { WIN_CHECK = 1, WIN_AGAIN, WIN_WRITE };

static int
record_window(const qp_trace_desc_t *d, uint64_t rip, uint64_t *start, uint32_t *id)
{
    if (d->ntext == NULL || rip - d->nhdr.base >= d->nhdr.size)
        return 0;
    uint64_t a = rip - d->nhdr.base;
    arch_insn_t in, prev = { 0 };
    int first = -1;
    for (int n = 0; n < 5 && a < d->nhdr.size; n++) { /* cmp jb call jmp movl at most */
        if (arch_decode(d->ntext + a, d->nhdr.size - a, d->nhdr.base + a, &in) < 0 || in.len == 0)
            return 0;
        if (is_record_write(d, d->ntext + a, in.len, id)) {
            if (n == 0)
                return *id < d->hdr.nevents ? WIN_WRITE : 0;
            if (prev.kind != ARCH_KIND_JMP || prev.target >= prev.addr || *id >= d->hdr.nevents)
                return 0;
            *start = prev.target;
            return first == ARCH_KIND_CALL || first == ARCH_KIND_JMP ? WIN_AGAIN : WIN_CHECK;
        }
        if (first < 0)
            first = in.kind;
        prev = in;
        a += in.len;
    }
    return 0;
}

/*
 * A signal at OFF in the snippets before block B's first instruction X (the records of
 * its way in: BLOCK, ENTER, a chord): before every record's reservation, the block is
 * next (SIG_BEFORE); after all of them, their records came before the handler's and
 * the block started (SIG_INSN); between them, or the code unknown: SIG_PROBE.
 */
static int
in_snippets(const qp_trace_desc_t *d, const qpt_trace_new_t *x, uint64_t off, int fault)
{
    if (d->ntext == NULL)
        return SIG_PROBE;
    unsigned before = 0, after = 0;
    int at_insn = 0;
    uint64_t a = x->slot, end = (uint64_t)x->slot + x->pre;
    while (a < end) {
        arch_insn_t in;
        if (arch_decode(d->ntext + a, d->nhdr.size - a, d->nhdr.base + a, &in) < 0 || in.len == 0)
            return SIG_PROBE;
        at_insn |= a == off;
        if (is_reserve(d->ntext + a, in.len))
            *(a < off ? &before : &after) += 1;
        a += in.len;
    }
    if (a != end || !at_insn)
        return SIG_PROBE;
    if (before == 0 && !fault)
        return SIG_BEFORE;
    return before > 0 && after == 0 ? SIG_INSN : SIG_PROBE;
}

/* Where the new code address RIP is (SIG_*; FAULT: the instruction there began), the
 * block in *BLOCK and the instruction's link-time address in *INSN. */
static int
rip_place(const qp_trace_desc_t *d, uint64_t rip, int fault, uint32_t *block, uint64_t *insn)
{
    const qpt_trace_new_hdr_t *h = &d->nhdr;
    if (rip - h->rt < h->rt_size)
        return SIG_RUNTIME;
    if (rip - h->base >= h->size)
        return SIG_OUTSIDE;
    uint64_t off = rip - h->base;
    size_t lo = 0, hi = d->nnorder;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->inew[d->norder[mid]].slot <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return SIG_PROBE;
    uint32_t i = d->norder[lo - 1], b = d->iblock[i];
    const qpt_trace_new_t *x = &d->inew[i];
    /* Past its slot: a taken-edge stub, padding. In the snippets after it (a hook after
     * a system call, a chord after a branch): the block ran, its way out was not taken
     * or its record not consumed yet (else the walk is past it) - unless it is a call:
     * the RETURNED after it comes after the callee ran. */
    uint64_t after = (uint64_t)x->slot + x->pre + x->len;
    if (off >= after + x->post)
        return SIG_PROBE;
    if (off >= after && i + 1 == d->ifirst[b + 1]
        && (d->blocks[b].call != QPT_TC_NONE || (d->blocks[b].flags & QPT_TB_LEAFCALL)))
        return SIG_PROBE;
    /* In the snippets before it: in the middle of the block (a value record, a record
     * that the way out names) the block ran; before its first instruction, its own
     * records (BLOCK, ENTER, a chord of the way in) may have been written or not, except
     * at their start (a signal comes between two instructions: the block is next). */
    *block = b;
    *insn = d->blocks[b].start;
    if (i == d->ifirst[b] && off == x->slot && !fault)
        return SIG_BEFORE;
    if (off < (uint64_t)x->slot + x->pre && i == d->ifirst[b])
        return in_snippets(d, x, off, fault);
    for (uint32_t k = d->ifirst[b]; k < i; k++)
        *insn += d->ilen[k];
    return SIG_INSN;
}

static size_t after_handler(walk_t *w, size_t at);

/* The rip of the signal record at AT. */
static uint64_t
sig_rip(const walk_t *w, size_t at)
{
    return w->rec[at + 1] | (uint64_t)w->rec[at + 2] << 32;
}

/* The place of the signal record at index AT (SIG_*; -1: cut short), its block and
 * instruction as rip_place's. A signal in a record's refill path (its record comes
 * after the handler's) is placed as one before the reservation. At the check (cmp,
 * jb) the record came first unless the slot lay past the limit: taken as first (telling
 * the two by the record before the handler misplaced more than it placed). */
static int
signal_kind_at(walk_t *w, size_t at, uint32_t *block, uint64_t *insn)
{
    if (at + 2 >= w->n)
        return -1;
    uint64_t rip = sig_rip(w, at), start;
    uint32_t id;
    int win = record_window(w->d, rip, &start, &id);
    if (win == WIN_AGAIN)
        rip = start;
    return rip_place(w->d, rip, w->rec[at] == QPT_TRACE_FAULT, block, insn);
}

/* The place of the signal record at the walk's position (SIG_*; -1: cut short). */
static int
signal_kind(walk_t *w)
{
    if (w->sig_at != w->i) {
        w->sig_at = w->i;
        w->sig_kind = signal_kind_at(w, w->i, &w->sig_block, &w->sig_insn);
    }
    return w->sig_kind;
}

/*
 * The signal record at the walk's position: its handler (the ENTER after it) runs here,
 * in a frame of its own after which the walk goes on where it is. MARKED: the place is
 * not known to be exact.
 */
static void
take_signal(walk_t *w, int marked)
{
    const qp_trace_desc_t *d = w->d;
    int kind = signal_kind(w);
    if (kind < 0) {
        w->rc = QP_EINVAL;
        return;
    }
    int leaf = w->leaf_at == w->i + 1;
    w->i += 3;
    w->silent = 0;
    const qpt_trace_event_t *e = event(w, peek(w));
    if (e == NULL || e->kind != QPT_TV_ENTER) {
        reset(w, "cut: a signal record without its handler's entry", 0);
        return;
    }
    w->i++;
    if (marked && (kind == SIG_INSN || kind == SIG_BEFORE))
        mark(w, "async: a signal handler interrupted the instruction at the address given, "
                "which the walk did not reach before a record; it ran somewhere in the "
                "blocks since the last record", w->sig_insn);
    else if (marked && kind == SIG_OUTSIDE)
        mark(w, "async: a signal handler interrupted code not traced (a library function "
                "called without a record) somewhere in the blocks since the last record",
             d->procs[e->a].entry);
    else if (marked)
        mark(w, "async: a signal handler interrupted the tracing code (a record being "
                "written) somewhere in the blocks since the last record", d->procs[e->a].entry);
    else if (w->sink->signal != NULL && w->rc == 0)
        w->rc = w->sink->signal(w->sink->arg, kind == SIG_INSN || kind == SIG_BEFORE ? w->sig_insn : 0);
    enter_proc(w, e->a, 0, 1, 1);
    w->f[w->nf - 1].leaf = (uint8_t)leaf;
}

static void step(walk_t *w);
static int enter_can_follow(const qp_trace_desc_t *d, uint32_t b);
static uint32_t way_before(const qp_trace_desc_t *d, const qpt_trace_block_t *b, uint32_t u);

/*
 * The index of the first record after the handler of the signal record at AT, or NONE
 * (the handler does not return, or its records do not fit): a walk of the handler
 * alone, on a copy of the walk that prints nothing.
 */
#define HANDLER_STEPS (1u << 20) /* a handler walked longer: its end is not looked for */

static size_t
after_handler(walk_t *w, size_t at)
{
    for (const walk_t *p = w; p != NULL; p = p->parent)
        if (p->sim_at == at) /* asked again while walking it: not known */
            return NONE;
    static const qp_trace_sink_t quiet = { NULL, NULL, NULL, NULL };
    qp_trace_stats_t st = *w->st;
    walk_t c = *w;
    c.sink = &quiet;
    c.st = &st;
    c.i = at;
    c.sig_at = NONE;
    c.parent = w;
    c.sim_at = at;
    c.cap = w->nf + 8;
    c.f = malloc(c.cap * sizeof(frame_t));
    if (c.f == NULL)
        return NONE;
    memcpy(c.f, w->f, w->nf * sizeof(frame_t));
    size_t base = c.nf, to = NONE;
    take_signal(&c, 1);
    for (uint64_t steps = 0; c.rc == 0 && !c.done && c.nf > base && steps < HANDLER_STEPS; steps++)
        step(&c);
    if (c.rc == 0 && !c.done && c.nf == base && c.resets == w->resets)
        to = c.i;
    free(c.f);
    return to;
}

/* Does record R name the way out of the block the frame F leaves (a chord of it, or an
 * ENTER that cannot come on its silent way)? */
static int
names_way_out(const walk_t *w, const frame_t *f, uint32_t r)
{
    const qpt_trace_block_t *b = &w->d->blocks[f->block];
    const qpt_trace_event_t *e = event(w, r);
    if (f->state != S_LEAVE || b->nedges < 2 || e == NULL)
        return 0;
    if (e->kind == QPT_TV_CHORD)
        return w->d->edges[e->a].from == f->block;
    return e->kind == QPT_TV_ENTER && !enter_can_follow(w->d, f->block);
}

/* Is the walk, at frame F, exactly where a handler that interrupted the program at a
 * place of KIND (SIG_*) in block SB ran? */
static int
exact_here(const walk_t *w, const frame_t *f, int kind, uint32_t sb)
{
    const qpt_trace_block_t *b = f->block != NONE ? &w->d->blocks[f->block] : NULL;
    /* The block printed, its call not made; or a block without a call, its way out
     * not taken (a handler placed before this one left the walk there). */
    if (kind == SIG_INSN)
        return f->block == sb
            && (f->state == S_CALL
                || (f->state == S_LEAVE && b->call == QPT_TC_NONE
                    && !(b->flags & QPT_TB_LEAFCALL)));
    if (kind == SIG_BEFORE) /* about to enter it, none of its records taken */
        return f->state == S_ENTER && !f->consumed
            && (f->block == sb || (f->block == NONE && w->d->procs[f->proc].block == sb));
    return 0;
}

/* The first record after the run of handlers in code not traced from the walk's
 * position (kept while the walk is in it), or NONE. */
static size_t
outside_run_end(walk_t *w)
{
    if (w->run_at != NONE && w->run_at <= w->i && w->i < w->run_end)
        return w->run_end;
    size_t j = w->i;
    uint32_t sb;
    uint64_t si;
    do
        j = after_handler(w, j);
    while (j != NONE && j < w->n && is_sig(w->rec[j])
           && signal_kind_at(w, j, &sb, &si) == SIG_OUTSIDE);
    w->run_at = w->i;
    w->run_end = j;
    return j;
}

/*
 * Does the walk stand where the signal record at the walk's position says its handler
 * ran? 1: exactly there; 2: perhaps earlier, marked.
 *
 * A handler that interrupted code not traced, after a call of a C library leaf (it
 * records nothing) since the last record, ran in that leaf, in a later one, or in the
 * next call of code not traced (where the walk waits in an outside frame: there,
 * marked). It ran here, before the way on, when what comes after it (and after the
 * handlers in a row of the same kind) needs the walk here: a record of this block's
 * way out (a second pass here would need a record in between: no cycle is silent), or
 * a signal record whose handler ran here.
 */
static int
signal_here(walk_t *w, const frame_t *f)
{
    if (!is_sig(peek(w)) || f->kind != F_PROC)
        return 0;
    int kind = signal_kind(w);
    if (kind != SIG_OUTSIDE)
        return exact_here(w, f, kind, w->sig_block);
    if (f->block == NONE || w->leaf_at != w->i + 1)
        return 0;
    size_t j = outside_run_end(w);
    if (j == NONE || j >= w->n)
        return 0;
    if (!is_sig(w->rec[j]))
        return names_way_out(w, f, w->rec[j]) ? 2 : 0;
    uint32_t sb = NONE;
    uint64_t si;
    int next = signal_kind_at(w, j, &sb, &si);
    /* a handler before block SB started, which a way out of this one enters with its
     * chord in SB (leave_block takes it then) */
    if (next == SIG_BEFORE && f->state == S_LEAVE
        && way_before(w->d, &w->d->blocks[f->block], sb) != NONE)
        return 2;
    return exact_here(w, f, next, sb) ? 2 : 0;
}

/* Leaving block B with a signal record next whose handler ran before block U started
 * (SIG_BEFORE): the way into U when it records its chord in U (then unwritten, and U's
 * only way in: the program took it), else NONE. */
static uint32_t
way_before(const qp_trace_desc_t *d, const qpt_trace_block_t *b, uint32_t u)
{
    if (!(d->blocks[u].flags & QPT_TB_CHORD_IN))
        return NONE;
    for (uint32_t k = b->edge; k < b->edge + b->nedges; k++)
        if (k != b->tree && d->edges[k].kind == QPT_TE_BLOCK && d->edges[k].to == u
            && d->edges[k].event != NONE)
            return k;
    return NONE;
}

/* The top frame enters its block. */
static void
enter_block(walk_t *w, frame_t *f)
{
    const qp_trace_desc_t *d = w->d;
    if (f->block == NONE) { /* still waiting for its ENTER */
        uint32_t want = d->procs[f->proc].enter_event, r = peek(w);
        if (r == want) {
            w->i++;
            w->silent = 0;
            f->block = d->procs[f->proc].block;
        } else
            unexpected(w, r);
        return;
    }
    const qpt_trace_block_t *b = &d->blocks[f->block];
    if (f->want) { /* the chord of the way in, after a handler */
        uint32_t r = peek(w);
        if (r != f->want - 1) {
            unexpected(w, r);
            return;
        }
        f->want = 0;
        w->i++;
        w->silent = 0;
    }
    if ((b->flags & QPT_TB_BLOCKEV) && !f->consumed) {
        uint32_t r = peek(w);
        if (r != b->block_event) {
            unexpected(w, r);
            return;
        }
        w->i++;
        w->silent = 0;
    }
    f->consumed = 0;
    w->st->blocks++;
    if (++w->silent > SILENT_MAX) {
        reset(w, "cut: too many blocks without a record", b->start);
        w->done = 1;
        return;
    }
    if (w->sink->block) {
        int r = w->sink->block(w->sink->arg, f->block, b->start);
        if (r) {
            w->rc = r;
            return;
        }
    }
    if (b->flags & QPT_TB_LEAFCALL)
        w->leaf_at = w->i + 1;
    f->state = S_CALL;
}

/* The top frame, its block printed, makes the block's call. */
static void
call_block(walk_t *w, frame_t *f)
{
    const qpt_trace_block_t *b = &w->d->blocks[f->block];
    f->state = S_LEAVE;
    uint32_t site = f->block;
    switch (b->call) {
    case QPT_TC_DIRECT:
    case QPT_TC_DIRECT_RET:
        enter_proc(w, b->callee, b->call == QPT_TC_DIRECT_RET, 0, 0);
        break;
    case QPT_TC_OUTSIDE:
        push(w, out_frame(site));
        break;
    default: break;
    }
}

/*
 * Can an ENTER come next on the silent way from block B (its tree edges, without a
 * record)? Only once that way reaches a call or leaves the procedure (a callee, or the
 * code it returns to, may enter traced code); not when it first reaches a block that
 * needs a record of its own: then an ENTER now ran asynchronously (a signal handler).
 */
static int
enter_can_follow(const qp_trace_desc_t *d, uint32_t b)
{
    uint32_t n = d->procs[d->blocks[b].proc].nblocks;
    for (uint32_t steps = 0; steps <= n; steps++) {
        const qpt_trace_block_t *x = &d->blocks[b];
        if (x->tree == NONE)
            return 0;
        const qpt_trace_edge_t *e = &d->edges[x->tree];
        if (e->kind != QPT_TE_BLOCK)
            return 1;
        b = e->to;
        if (d->blocks[b].flags & QPT_TB_BLOCKEV)
            return 0;
        if (d->blocks[b].call != QPT_TC_NONE)
            return 1;
    }
    return 0;
}

/* The top frame leaves its block. */
static void
leave_block(walk_t *w, frame_t *f)
{
    const qp_trace_desc_t *d = w->d;
    const qpt_trace_block_t *b = &d->blocks[f->block];
    uint32_t chosen = b->tree;
    int consumed = 0;
    if (b->nedges > 1 || b->tree == NONE) {
        uint32_t r = peek(w);
        const qpt_trace_event_t *e = event(w, r);
        if (e != NULL && e->kind == QPT_TV_ENTER && !enter_can_follow(d, f->block)) {
            unexpected(w, r); /* a handler ran here, before the way out was taken */
            return;
        }
        /* A handler that interrupted a probe: its record may be this way out's. */
        int kind = is_sig(r) ? signal_kind(w) : -1;
        if (kind == SIG_PROBE || kind == SIG_RUNTIME) {
            unexpected(w, r);
            return;
        }
        uint32_t before = kind == SIG_BEFORE ? way_before(d, b, w->sig_block) : NONE;
        if (before != NONE) {
            f->block = d->edges[before].to;
            f->state = S_ENTER;
            f->consumed = 0;
            f->want = d->edges[before].event + 1;
            return;
        }
        if (e != NULL && e->kind == QPT_TV_CHORD && d->edges[e->a].from == f->block) {
            chosen = e->a;
            w->i++;
            w->silent = 0;
        } else if (e != NULL && e->kind == QPT_TV_BLOCK && b->tree == NONE) {
            /* no silent way out: the BLOCK record of a target names the way */
            for (uint32_t k = b->edge; k < b->edge + b->nedges; k++)
                if (d->edges[k].kind == QPT_TE_BLOCK && d->edges[k].to == e->a
                    && d->edges[k].event == NONE) {
                    chosen = k;
                    consumed = 1;
                    w->i++;
                    w->silent = 0;
                    break;
                }
        }
        if (chosen == NONE) {
            unexpected(w, r);
            return;
        }
    }
    const qpt_trace_edge_t *x = &d->edges[chosen];
    switch (x->kind) {
    case QPT_TE_BLOCK:
        f->block = x->to;
        f->state = S_ENTER;
        f->consumed = (uint8_t)consumed;
        return;
    case QPT_TE_RETURN:
        if (f->ret && is_sig(peek(w))) { /* before the RETURNED it needs */
            unexpected(w, peek(w));
            return;
        }
        return_from(w);
        return;
    case QPT_TE_TAIL:
        jump_to_proc(w, x->to, 0);
        return;
    case QPT_TE_TAIL_INTO:
        jump_to_block(w, x->to, 0);
        return;
    case QPT_TE_OUT: {
        /* A jump of unknown target: the next record says where it went when it went to
         * traced code (a block that records BLOCK: a computed goto, a jump into another
         * procedure; an entry that records ENTER: a tail call through a pointer). */
        uint32_t r = peek(w);
        int known_out = 0; /* the jump's record said: to code not traced */
        if (r == QPT_TRACE_JUMP && (b->flags & QPT_TB_JUMPVAL) && w->i + 2 < w->n) {
            uint64_t to = w->rec[w->i + 1] | (uint64_t)w->rec[w->i + 2] << 32;
            uint32_t tb = jump_target(w, to);
            w->i += 3;
            w->silent = 0;
            if (tb != NONE && d->procs[d->blocks[tb].proc].block == tb)
                jump_to_proc(w, d->blocks[tb].proc, 0); /* an entry: as a tail call */
            else if (tb != NONE)
                jump_to_block(w, tb, 0);
            if (tb != NONE)
                return;
            known_out = 1;
            r = peek(w);
        }
        const qpt_trace_event_t *e = known_out ? NULL : event(w, r);
        if (e != NULL && e->kind == QPT_TV_BLOCK) {
            w->i++;
            w->silent = 0;
            jump_to_block(w, e->a, 1);
            return;
        }
        /* An ENTER: the jump's target, or traced code that code not traced there calls
         * (and may call more of before it returns). When the caller's call records
         * RETURNED, both come to the same: callbacks of that call until its RETURNED
         * (below). Else (no caller waiting, a handler) the target. */
        int caller_waits = w->f[w->nf - 1].ret && w->nf > 1 && w->f[w->nf - 2].kind == F_PROC;
        if (e != NULL && e->kind == QPT_TV_ENTER && !caller_waits) {
            w->i++;
            w->silent = 0;
            jump_to_proc(w, e->a, 1);
            return;
        }
        frame_t top = w->f[--w->nf];
        if (top.async) /* a handler's tail jump out of traced code */
            w->leaf_at = top.leaf ? w->i + 1 : 0;
        if (top.ret && w->nf > 0 && w->f[w->nf - 1].kind == F_PROC) {
            push(w, out_frame(w->f[w->nf - 1].block));
            return;
        }
        if (w->nf == 0)
            push(w, out_frame(NONE));
        else if (w->f[w->nf - 1].kind == F_PROC && !top.async)
            reset(w, "cut: a tail jump out of traced code, returning to a caller that "
                     "does not expect it", b->start);
        return;
    }
    default:
        reset(w, "cut: a call that does not return returned", b->start);
        return;
    }
}

/* An outside frame: callbacks, its return, or the end. */
static void
outside(walk_t *w, frame_t *f)
{
    uint32_t r = peek(w);
    if (r == NONE) {
        unexpected(w, r);
        return;
    }
    if (is_sig(r)) {
        /* Exact when the handler interrupted code not traced and none ran silently
         * since the last record (a leaf call): this code. */
        take_signal(w, signal_kind(w) != SIG_OUTSIDE || w->leaf_at == w->i + 1);
        return;
    }
    const qpt_trace_event_t *e = event(w, r);
    if (e != NULL && e->kind == QPT_TV_ENTER) {
        w->i++;
        w->silent = 0;
        enter_proc(w, e->a, 0, 0, 1);
        return;
    }
    if (e != NULL && e->kind == QPT_TV_RETURNED && f->block == e->a) {
        w->i++;
        w->silent = 0;
        w->nf--;
        if (w->nf == 0)
            push(w, out_frame(NONE));
        else if (w->f[w->nf - 1].kind == F_PROC)
            w->f[w->nf - 1].state = S_LEAVE;
        return;
    }
    unexpected(w, r);
}

/* The naive trace: every record is a block. */
static int
regen_naive(walk_t *w)
{
    for (; w->i < w->n && w->rc == 0; w->i++) {
        uint32_t r = w->rec[w->i];
        if (r == QPT_TRACE_LOST) {
            mark(w, "cut: events of another thread may follow (a thread control block "
                    "reused unseen)", 0);
            continue;
        }
        if (r == QPT_TRACE_EMPTY) {
            mark(w, LOST_RECORD, 0);
            continue;
        }
        const qpt_trace_event_t *e = event(w, r);
        if (e == NULL || e->kind != QPT_TV_BLOCK)
            return QP_EINVAL;
        w->st->blocks++;
        if (w->sink->block && (w->rc = w->sink->block(w->sink->arg, e->a, w->d->blocks[e->a].start)))
            break;
    }
    if (w->rc == 0 && !w->st->complete)
        mark(w, "cut: the trace ends here without its end record (killed, _exit, or a "
                "thread that was still running)", 0);
    return w->rc;
}

/* One step of the walk. */
static void
step(walk_t *w)
{
    frame_t *f = &w->f[w->nf - 1];
    if (w->i >= w->n && !w->st->complete) {
        /* Cut short: how far the program got after its last record is unknown. */
        unexpected(w, NONE);
        w->done = 1;
        return;
    }
    int here = signal_here(w, f);
    if (here)
        take_signal(w, here == 2);
    else if (f->kind == F_OUT)
        outside(w, f);
    else if (f->state == S_ENTER)
        enter_block(w, f);
    else if (f->state == S_CALL)
        call_block(w, f);
    else
        leave_block(w, f);
}

static int
walk(walk_t *w)
{
    if (w->d->hdr.kind == QPT_TRACE_NAIVE)
        return regen_naive(w);
    push(w, out_frame(NONE));
    while (w->rc == 0 && !w->done)
        step(w);
    return w->rc;
}

typedef struct start_block {
    uint64_t start;
    uint32_t block;
} start_block_t;

static int
cmp_start_block(const void *a, const void *b)
{
    const start_block_t *x = a, *y = b;
    return x->start != y->start ? (x->start < y->start ? -1 : 1) : (x->block > y->block) - (x->block < y->block);
}

/* The blocks of D by start address: *STARTS ascending, *BLOCKS theirs (malloc'ed). */
static int
blocks_by_start(const qp_trace_desc_t *d, uint64_t **starts, uint32_t **blocks)
{
    uint32_t n = d->hdr.nblocks;
    *starts = malloc(((size_t)n + 1) * sizeof(uint64_t));
    *blocks = malloc(((size_t)n + 1) * sizeof(uint32_t));
    start_block_t *v = malloc(((size_t)n + 1) * sizeof(start_block_t));
    if (*starts == NULL || *blocks == NULL || v == NULL) {
        free(v);
        return QP_ENOMEM;
    }
    for (uint32_t b = 0; b < n; b++)
        v[b] = (start_block_t) { d->blocks[b].start, b };
    qsort(v, n, sizeof(start_block_t), cmp_start_block);
    for (uint32_t k = 0; k < n; k++) {
        (*starts)[k] = v[k].start;
        (*blocks)[k] = v[k].block;
    }
    free(v);
    return 0;
}

int
qp_trace_regen(const qp_trace_desc_t *d, const uint32_t *rec, size_t n,
               const qp_trace_sink_t *sink, qp_trace_stats_t *st)
{
    memset(st, 0, sizeof(*st));
    st->records = n;
    st->complete = n > 0 && rec[n - 1] == QPT_TRACE_END;
    /* End records inside a trace (another thread's exit flushed this one) say nothing
     * about the way taken: the walk sees none of them. */
    uint32_t *v = malloc((n + 1) * sizeof(uint32_t));
    if (v == NULL)
        return QP_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (rec[i] == QPT_TRACE_EMPTY && i + 3 < n && is_sig(rec[i + 1])) {
            /* A record interrupted after its reservation by a handler that filled the
             * buffer: the snippet at the handler's rip says which it was. */
            uint32_t id = interrupted_record(d, rec[i + 2] | (uint64_t)rec[i + 3] << 32);
            if (id != NONE) {
                /* Where snippets write units, a long event's slot was two EMPTY units
                 * (this one the second, unless the first was written out alone). */
                if (units_written(d) && id >= QPT_TRACE_U16_LONG && k > 0 && i > 0
                    && rec[i - 1] == QPT_TRACE_EMPTY && v[k - 1] == QPT_TRACE_EMPTY)
                    k--;
                v[k++] = id;
                continue;
            }
        }
        if (is_triple(rec[i]) && i + 2 < n) { /* its address's words as they are */
            v[k++] = rec[i++];
            v[k++] = rec[i++];
            st->records -= 2;
        }
        if (rec[i] != QPT_TRACE_END)
            v[k++] = rec[i];
    }
    uint64_t *starts = NULL;
    uint32_t *start_block = NULL;
    if (blocks_by_start(d, &starts, &start_block) < 0) {
        free(starts);
        free(start_block);
        free(v);
        return QP_ENOMEM;
    }
    walk_t w = { .d = d, .rec = v, .n = k, .sink = sink, .st = st, .sig_at = NONE,
                 .run_at = NONE, .sim_at = NONE, .starts = starts, .start_block = start_block,
                 .nstarts = d->hdr.nblocks };
    int rc = walk(&w);
    free(w.f);
    free(v);
    free(starts);
    free(start_block);
    return rc;
}

/*****************************************************************************
 * Address traces (--trace-mem): each regenerated block's accesses, their addresses
 * from the value records in order.
 */

typedef struct mem_walk {
    const qp_trace_desc_t *d;
    const uint64_t *vals;
    size_t nvals, next;
    uint64_t bias;
    const qp_trace_mem_sink_t *sink;
    uint64_t nacc;
    int ran_out;
    int signalled; /* the walk placed or marked a signal handler, or marked a longjmp */
    uint64_t v[256]; /* the current block's values, by access (EA), for `from` */
} mem_walk_t;

/* Values that do not match the blocks after a signal handler ran or a longjmp: a block
 * was left in the middle (a faulting access whose handler jumped away), its remaining
 * accesses' values never recorded, so the values from there on went to the wrong
 * accesses. */
#define SIGNALLED_END                                                                    \
    "cut: the address values do not match the blocks: a block was left in the middle "  \
    "(a faulting access, a longjmp out of a signal handler) after a signal handler or "  \
    "a longjmp above; the addresses after it may be wrong"

/* The next value, or 0 with RAN_OUT set (marked once). */
static int
next_val(mem_walk_t *m, uint64_t insn, uint64_t *x)
{
    if (m->next < m->nvals) {
        *x = m->vals[m->next++];
        return 0;
    }
    *x = 0;
    if (!m->ran_out) {
        m->ran_out = 1;
        if (m->sink->mark != NULL)
            return m->sink->mark(m->sink->arg, m->signalled ? SIGNALLED_END : "cut: the address values end here", insn);
    }
    return 0;
}

static int
mem_string(mem_walk_t *m, const qpt_trace_mref_t *r)
{
    uint64_t count = 1, si = 0, di = 0;
    if (r->rep)
        QP_CHECK(next_val(m, r->insn, &count));
    if (r->access)
        QP_CHECK(next_val(m, r->insn, &si));
    if (r->access2)
        QP_CHECK(next_val(m, r->insn, &di));
    if (m->ran_out)
        return 0;
    for (uint64_t i = 0; i < count; i++) {
        if (r->access) {
            QP_CHECK(m->sink->access(m->sink->arg, r->access, si + i * r->size, r->size, r->insn));
            m->nacc++;
        }
        if (r->access2) {
            QP_CHECK(m->sink->access(m->sink->arg, r->access2, di + i * r->size, r->size, r->insn));
            m->nacc++;
        }
    }
    return 0;
}

static int
mem_block(void *arg, uint32_t block, uint64_t addr)
{
    (void)addr;
    mem_walk_t *m = arg;
    const qpt_trace_mblock_t *b = &m->d->mblocks[block];
    for (uint32_t k = 0; k < b->nrefs; k++) {
        const qpt_trace_mref_t *r = &m->d->mrefs[b->ref + k];
        uint64_t a = 0;
        switch (r->kind) {
        case QPT_TM_STATIC: a = (uint64_t)r->disp + m->bias; break;
        case QPT_TM_EA:
            if (r->from == QPT_TRACE_MNEW) {
                QP_CHECK(next_val(m, r->insn, &a));
                if (k < 256)
                    m->v[k] = a;
            } else
                a = r->from < 256 ? m->v[r->from] : 0;
            a += (uint64_t)r->disp;
            break;
        case QPT_TM_STRING: QP_CHECK(mem_string(m, r)); continue;
        default:
            if (m->sink->mark != NULL)
                QP_CHECK(m->sink->mark(m->sink->arg, "untraced: an access whose address is not recorded", r->insn));
            continue;
        }
        if (m->ran_out)
            return 0;
        QP_CHECK(m->sink->access(m->sink->arg, r->access, a, r->size, r->insn));
        m->nacc++;
    }
    return 0;
}

static int
mem_mark(void *arg, const char *what, uint64_t addr)
{
    mem_walk_t *m = arg;
    if (strncmp(what, "async", 5) == 0 || strncmp(what, "longjmp", 7) == 0)
        m->signalled = 1;
    return m->sink->mark != NULL ? m->sink->mark(m->sink->arg, what, addr) : 0;
}

/* A signal handler placed exactly: its values come between those of the interrupted
 * block (which the walk gave all at once). */
static int
mem_signal(void *arg, uint64_t insn)
{
    (void)insn;
    ((mem_walk_t *)arg)->signalled = 1;
    return 0;
}

int
qp_trace_mem_regen(const qp_trace_desc_t *d, const uint32_t *rec, size_t n,
                   const uint64_t *vals, size_t nvals, uint64_t bias,
                   const qp_trace_mem_sink_t *sink, qp_trace_stats_t *st, uint64_t *nacc)
{
    if (d->mblocks == NULL)
        return QP_EINVAL;
    mem_walk_t m = { .d = d, .vals = vals, .nvals = nvals, .bias = bias, .sink = sink };
    qp_trace_sink_t s = { mem_block, mem_mark, &m, mem_signal };
    int rc = qp_trace_regen(d, rec, n, &s, st);
    if (rc == 0 && m.next < m.nvals && !m.ran_out && sink->mark != NULL)
        rc = sink->mark(sink->arg, m.signalled ? SIGNALLED_END
                                    : "cut: address values left over (their blocks were not regenerated)", 0);
    if (nacc != NULL)
        *nacc = m.nacc;
    return rc;
}
