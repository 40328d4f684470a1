/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Reusing the old text (ed_opts_t.reuse_text)
 *
 * Once a procedure moved, its old bytes serve only as the redirects at its entries and
 * indirect targets: nothing runs or reads the rest. New code goes there, seen through a
 * second mapping of the old text's pages (qp_space_ops_t.alloc_over), so that every new
 * address still differs from every old one (unwind tables, symbols, descriptions and
 * reports tell old from new code by address). A procedure's new code stays in one piece
 * (one FDE, and its LSDA, describe one contiguous range), placed whole into the hole
 * with the least room that takes it, largest first (a taken-edge stub is a piece of its own); what fits
 * nowhere goes after the mirror, as without reuse. Branches
 * between pieces keep their long form: pieces are placed apart. Reused: the blocks of
 * moved procedures and the padding (nops, int3) between and around them in their
 * extents. Never reused: the bytes of code that stays, of procedures with a jump
 * translated at run time (a miss runs the old code) or an address the program holds that
 * is no redirect (keep_referenced: the old code runs there, as it did), jump tables,
 * bytes in no block that are not padding (maybe data: zeros too, dead code too), the
 * redirects, and the procedures into which code that stays runs other than at a
 * redirect (keep_reached: a fall-through, a jump, a call or its return, from a block
 * that stays or from unreached bytes that decode). That last rule is checked again once
 * the new code is placed (check_kept_exits): no way out of code that stays lands in
 * reused bytes, or the plan fails (QP_EBUG) rather than write a program that would run
 * into new code.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arch/arch.h"
#include "base/qp_sort.h"
#include "editor/ed_layout_priv.h"

/* Holes smaller than this are not worth a patch. */
#define MIN_HOLE 16
/* Reuse saving less than this is not worth a second segment (and the page-aligned
 * overflow after it: up to a page of padding in the file). */
#define REUSE_MIN 8192

static int
cmp_span(const void *a, const void *b)
{
    const cfg_span_t *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* Sort the spans V[0 .. N) of a procedure's blocks, which come entry block first, the
 * rest in address order (cfg_build): the first moves into place (a qsort of each of
 * cc1's 39k procedures cost 0.57 G instructions); any other order is sorted. */
static void
sort_block_spans(cfg_span_t *v, size_t n)
{
    size_t i = 1;
    while (i + 1 < n && cmp_span(&v[i], &v[i + 1]) <= 0)
        i++;
    if (i + 1 < n) {
        qsort(v, n, sizeof(cfg_span_t), cmp_span);
        return;
    }
    cfg_span_t first = v[0];
    size_t k = 0;
    for (; k + 1 < n && cmp_span(&v[k + 1], &first) < 0; k++)
        v[k] = v[k + 1];
    v[k] = first;
}

/* Append [START, END) to *V, extending the last span when they touch. */
static int
push_span(cfg_span_t **v, size_t *n, size_t *cap, uint64_t start, uint64_t end)
{
    if (end <= start)
        return 0;
    if (*n > 0 && (*v)[*n - 1].end == start) {
        (*v)[*n - 1].end = end;
        return 0;
    }
    QP_CHECK(cfg_vec_grow((void **)v, cap, *n + 1, sizeof(cfg_span_t)));
    (*v)[(*n)++] = (cfg_span_t) { start, end };
    return 0;
}

/* Sort and merge overlapping or touching spans in place; returns the new count. */
static size_t
merge_spans(cfg_span_t *v, size_t n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof(cfg_span_t), cmp_span);
    size_t u = 0;
    for (size_t i = 1; i < n; i++) {
        if (v[i].start <= v[u].end) {
            if (v[i].end > v[u].end)
                v[u].end = v[i].end;
        } else
            v[++u] = v[i];
    }
    return u + 1;
}

/* Does procedure PI move (its fragments with their parent)? */
static int
proc_moves(const ed_plan_t *plan, uint32_t pi)
{
    const cfg_proc_t *p = &plan->prog->procs[pi];
    if (plan->reason[pi] != NULL)
        return 0;
    return !(p->flags & CFG_PROC_FRAGMENT)
        || (p->parent != CFG_NONE && plan->reason[p->parent] == NULL);
}

/* The executable segment holding most of the moved code (by chunk), or NULL. */
static const cfg_segment_t *
reuse_segment(const ed_plan_t *plan)
{
    const cfg_image_t *img = plan->prog->img;
    const cfg_segment_t *best = NULL;
    uint64_t best_n = 0;
    for (size_t g = 0; g < img->nsegments; g++) {
        const cfg_segment_t *sg = &img->segments[g];
        if (sg->type != 1 /* PT_LOAD */ || !(sg->flags & CFG_SEG_X) || sg->filesz == 0
            || sg->offset < sg->vaddr % 4096)
            continue;
        uint64_t n = 0;
        for (size_t c = 0; c < plan->nchunks; c++) {
            uint64_t a = slot_old(plan, &plan->lay[plan->chunk[c]]);
            n += plan->chunk[c + 1] > plan->chunk[c] && a >= sg->vaddr
                && a < sg->vaddr + sg->filesz;
        }
        if (n > best_n) {
            best = sg;
            best_n = n;
        }
    }
    return best;
}

/* The spans no new code may take: code that stays (extents and blocks), procedures
 * that keep their bytes (KEEP), redirects, jump tables, section ends (as empty cuts). */
static int
taken_spans(const ed_plan_t *plan, const edl_pads_t *all, const uint8_t *keep,
            cfg_span_t **v, size_t *n)
{
    const cfg_prog_t *prog = plan->prog;
    size_t cap = 0;
    int rc = 0;
    /* Pads are where held addresses may point; so is the rest of a procedure that
     * keeps its bytes. */
    for (uint32_t pi = 0; pi < prog->nprocs && rc == 0; pi++) {
        const cfg_proc_t *p = &prog->procs[pi];
        uint32_t owner = (p->flags & CFG_PROC_FRAGMENT) ? p->parent : pi;
        if (proc_moves(plan, pi) && owner != CFG_NONE && !keep[owner]) {
            if (p->flags & CFG_PROC_FRAGMENT)
                continue;
            for (size_t k = all->off[pi]; k < all->off[pi + 1] && rc == 0; k++)
                rc = push_span(v, n, &cap, all->v[k], all->v[k] + PAD_LEN(plan));
            continue;
        }
        rc = push_span(v, n, &cap, p->start, p->end);
        for (uint32_t k = 0; k < p->nblocks && rc == 0; k++) {
            const cfg_block_t *b = &prog->blocks[p->block + k];
            rc = push_span(v, n, &cap, b->start, b->end);
        }
    }
    for (uint32_t t = 0; t < prog->ntables && rc == 0; t++) {
        const cfg_table_t *tb = &prog->tables[t];
        rc = push_span(v, n, &cap, tb->addr, tb->addr + (uint64_t)tb->nentries * tb->entry_size);
    }
    /* Bytes in no block that are neither padding nor dead code: maybe data. */
    for (uint32_t k = 0; k < prog->nunreached && rc == 0; k++)
        rc = push_span(v, n, &cap, prog->unreached[k].start, prog->unreached[k].end);
    return rc;
}

/* Are the bytes [S, E) padding: int3 and nop instructions only (no zeros: they may end
 * a table of data)? */
static int
all_padding(const cfg_image_t *img, uint64_t s, uint64_t e)
{
    size_t avail;
    const uint8_t *p = cfg_image_ptr(img, s, &avail);
    if (p == NULL || avail < e - s)
        return 0;
    for (uint64_t off = 0; off < e - s;) {
        arch_insn_t in;
        if (p[off] == 0xcc)
            off++;
        else if (arch_decode(p + off, e - s - off, s + off, &in) == 0 && in.kind == ARCH_KIND_NOP)
            off += in.len;
        else
            return 0;
    }
    return 1;
}

/* The bytes of moved procedures (but those in KEEP), within [LO, HI): their blocks and
 * the padding between them and around them in their extents. */
static int
given_spans(const ed_plan_t *plan, const uint8_t *keep, uint64_t lo, uint64_t hi,
            cfg_span_t **v, size_t *n)
{
    const cfg_prog_t *prog = plan->prog;
    size_t cap = 0, bcap = 0;
    cfg_span_t *bl = NULL;
    int rc = 0;
    for (uint32_t pi = 0; pi < prog->nprocs && rc == 0; pi++) {
        const cfg_proc_t *p = &prog->procs[pi];
        uint32_t owner = (p->flags & CFG_PROC_FRAGMENT) ? p->parent : pi;
        if (!proc_moves(plan, pi) || owner == CFG_NONE || keep[owner] || p->nblocks == 0)
            continue;
        if (p->nblocks > bcap) {
            cfg_span_t *nb = realloc(bl, p->nblocks * sizeof(cfg_span_t));
            if (nb == NULL) {
                rc = QP_ENOMEM;
                break;
            }
            bl = nb;
            bcap = p->nblocks;
        }
        for (uint32_t k = 0; k < p->nblocks; k++)
            bl[k] = (cfg_span_t) { prog->blocks[p->block + k].start, prog->blocks[p->block + k].end };
        sort_block_spans(bl, p->nblocks);
        uint64_t at = p->start < bl[0].start ? p->start : bl[0].start;
        for (uint32_t k = 0; k <= p->nblocks && rc == 0; k++) {
            uint64_t gap_end = k < p->nblocks ? bl[k].start : p->end;
            if (gap_end > at && all_padding(prog->img, at, gap_end)) {
                uint64_t s = at < lo ? lo : at, e = gap_end > hi ? hi : gap_end;
                rc = push_span(v, n, &cap, s, e);
            }
            if (k == p->nblocks || rc < 0)
                break;
            uint64_t s = bl[k].start < lo ? lo : bl[k].start, e = bl[k].end > hi ? hi : bl[k].end;
            rc = push_span(v, n, &cap, s, e);
            if (bl[k].end > at)
                at = bl[k].end;
        }
    }
    free(bl);
    return rc;
}

/* The redirects of one procedure, kept while the held addresses (sorted) stay in it:
 * read from every procedure's (ALL, made once on the pool by edl_plan_reuse), or
 * collected for it (ALL NULL, or a fragment, which ALL has none of). cc1: 34,000
 * procedures' collected again on the main thread cost 0.16 G instructions. */
typedef struct pads_memo {
    uint32_t owner;          /* whose, or CFG_NONE */
    const uint64_t *p;       /* its redirects, n of them */
    size_t n;
    uint64_t *v;             /* ... when collected here (freed by pads_memo_done) */
    const edl_pads_t *all;   /* every procedure's redirects, or NULL */
} pads_memo_t;

static void
pads_memo_done(pads_memo_t *m)
{
    free(m->v);
    m->v = NULL;
}

/* Is ADDR a redirect of moved procedure OWNER (an entry or an indirect target)? */
static int
is_pad(const ed_plan_t *plan, uint32_t owner, uint64_t addr, pads_memo_t *m)
{
    uint32_t nind;
    if (m->owner != owner) {
        pads_memo_done(m);
        m->owner = CFG_NONE;
        if (m->all != NULL && !(plan->prog->procs[owner].flags & CFG_PROC_FRAGMENT)) {
            m->p = m->all->v + m->all->off[owner];
            m->n = m->all->off[owner + 1] - m->all->off[owner];
        } else if (edl_collect_pads(plan, owner, &m->v, &m->n, &nind) < 0)
            return -1;
        else
            m->p = m->v;
        m->owner = owner;
    }
    return cfg_u64_contains(m->p, m->n, addr);
}

/*
 * Procedures whose code the program may reach at an address that is no redirect keep
 * their bytes (KEEP): such an address runs the old code, as it did before, rather than
 * new code of another procedure. The addresses the program holds (cfg_held_addrs_view); of
 * the immediates and aligned data words of a program that is not position independent,
 * only those that are a block's address (not every number that falls into the text),
 * and of the words, those outside jump tables and not at the end of a string
 * (CFG_HELD_TEXTWORD).
 */
static int
keep_referenced(const ed_plan_t *plan, const edl_pads_t *all, uint8_t *keep)
{
    const cfg_prog_t *prog = plan->prog;
    const cfg_held_t *held = NULL; /* lent: read, not copied */
    size_t nheld = 0;
    pads_memo_t pads = { CFG_NONE, NULL, 0, NULL, all };
    int rc = cfg_held_addrs_view(prog, &held, &nheld);
    /* A jump table's entries are the cases: redirects, or rewritten with the table. */
    cfg_span_t *tab = rc == 0 ? malloc((prog->ntables + 1) * sizeof(cfg_span_t)) : NULL;
    if (rc == 0 && tab == NULL)
        rc = QP_ENOMEM;
    for (uint32_t t = 0; rc == 0 && t < prog->ntables; t++)
        tab[t] = (cfg_span_t) { prog->tables[t].addr, prog->tables[t].addr
                                + (uint64_t)prog->tables[t].nentries * prog->tables[t].entry_size };
    size_t ntab = rc == 0 ? merge_spans(tab, prog->ntables) : 0;
    for (size_t i = 0; i < nheld && rc == 0; i++) {
        uint64_t a = held[i].addr, at = held[i].at;
        if (held[i].src == CFG_HELD_TEXTWORD)
            continue;
        if (held[i].src == CFG_HELD_DATA) {
            size_t lo = 0, hi = ntab; /* the first table ending after the word */
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (tab[mid].end <= at)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo < ntab && tab[lo].start <= at)
                continue;
        }
        /* A number that falls into the text is no pointer unless a block starts there
         * (cc1 has `mov $0x1380000,%eax`). */
        if (held[i].src == CFG_HELD_DATA || held[i].src == CFG_HELD_IMM) {
            uint32_t bi = cfg_block_at(prog, a);
            if (bi == CFG_NONE || prog->blocks[bi].start != a)
                continue;
        }
        uint32_t o = edl_owner_at(prog, a);
        if (o == CFG_NONE || keep[o] || plan->reason[o] != NULL)
            continue;
        int r = is_pad(plan, o, a, &pads);
        if (r < 0)
            rc = QP_ENOMEM;
        else if (!r)
            keep[o] = 1;
    }
    free(tab);
    pads_memo_done(&pads);
    return rc;
}

/* A way out of code that stays, from the instruction or block at FROM to TO. */
typedef int (*exit_fn_t)(ed_plan_t *plan, uint64_t from, uint64_t to, void *arg);

/* The ways out of the blocks of procedure PI (its fragments' blocks are its own): their
 * edges that leave for another address (tail calls, the fall-through past its end,
 * calls that never return) and their direct calls. */
static int
block_exits(ed_plan_t *plan, uint32_t pi, exit_fn_t fn, void *arg)
{
    const cfg_prog_t *prog = plan->prog;
    const cfg_proc_t *p = &prog->procs[pi];
    for (uint32_t b = p->block; b < p->block + p->nblocks; b++) {
        const cfg_block_t *bl = &prog->blocks[b];
        if (bl->call_target != 0)
            QP_CHECK(fn(plan, bl->start, bl->call_target, arg));
        for (uint32_t e = 0; e < bl->nsucc; e++) {
            const cfg_edge_t *ed = cfg_block_succ(prog, bl, e);
            uint64_t to = ed->to != CFG_NONE ? prog->blocks[ed->to].start : ed->target;
            if (ed->kind != CFG_EDGE_RETURN && to != 0 && (ed->to == CFG_NONE
                    || prog->blocks[ed->to].proc != bl->proc))
                QP_CHECK(fn(plan, bl->start, to, arg));
        }
    }
    return 0;
}

/* Is ADDR, in a block, not where one of the block's instructions starts? */
static int
inside_insn(const cfg_prog_t *prog, uint64_t addr)
{
    uint32_t bi = cfg_block_at(prog, addr);
    if (bi == CFG_NONE)
        return 0;
    const cfg_block_t *bl = &prog->blocks[bi];
    size_t avail;
    const uint8_t *p = cfg_image_ptr(prog->img, bl->start, &avail);
    uint64_t at = bl->start;
    arch_insn_t in;
    while (p != NULL && at < addr && at - bl->start < avail
           && arch_decode(p + (at - bl->start), avail - (at - bl->start), at, &in) == 0)
        at += in.len;
    return at != addr;
}

/*
 * The ways out of unreached bytes SP, decoded from their start: direct branches, and
 * the fall-through past their end. Bytes that do not decode, or whose branches land
 * inside an instruction of a block, are data (a string in .text decodes too): no way
 * out. Returns the number of ways out in *N, handed to FN when FN is not NULL.
 */
static int
unreached_walk(ed_plan_t *plan, cfg_span_t sp, exit_fn_t fn, void *arg, size_t *n)
{
    size_t avail;
    const uint8_t *p = cfg_image_ptr(plan->prog->img, sp.start, &avail);
    *n = 0;
    if (p == NULL || sp.end <= sp.start)
        return 0;
    uint64_t len = sp.end - sp.start < avail ? sp.end - sp.start : avail, off = 0;
    arch_insn_t in = { 0 };
    while (off < len) {
        if (arch_decode(p + off, len - off, sp.start + off, &in) < 0)
            return 0;
        if (in.kind == ARCH_KIND_JMP || in.kind == ARCH_KIND_JCC || in.kind == ARCH_KIND_CALL) {
            if (fn == NULL && inside_insn(plan->prog, in.target))
                return 0;
            if (fn != NULL)
                QP_CHECK(fn(plan, sp.start + off, in.target, arg));
            (*n)++;
        }
        off += in.len;
    }
    int falls = in.kind != ARCH_KIND_JMP && in.kind != ARCH_KIND_JMP_IND
        && in.kind != ARCH_KIND_RET && in.kind != ARCH_KIND_HALT;
    if (!falls || len != sp.end - sp.start)
        return 0;
    if (fn == NULL && inside_insn(plan->prog, sp.end))
        return 0;
    (*n)++;
    return fn != NULL ? fn(plan, in.addr, sp.end, arg) : 0;
}

static int
unreached_exits(ed_plan_t *plan, cfg_span_t sp, exit_fn_t fn, void *arg)
{
    size_t n;
    QP_CHECK(unreached_walk(plan, sp, NULL, NULL, &n));
    return n > 0 ? unreached_walk(plan, sp, fn, arg, &n) : 0;
}

/* Does the code of procedure PI stay where it is, old bytes and all? (KEEP may be NULL:
 * no procedure keeps its bytes.) */
static int
code_stays(const ed_plan_t *plan, const uint8_t *keep, uint32_t pi)
{
    const cfg_proc_t *p = &plan->prog->procs[pi];
    uint32_t owner = (p->flags & CFG_PROC_FRAGMENT) ? p->parent : pi;
    return !proc_moves(plan, pi) || owner == CFG_NONE || (keep != NULL && keep[owner]);
}

enum { KEPT_BLOCKS = 1, KEPT_UNREACHED = 2 };

/* The ways out of code that stays (with KEEP) to FN: WHAT, the blocks of procedures
 * (KEPT_BLOCKS), the unreached bytes (KEPT_UNREACHED), or both. */
static int
kept_exits(ed_plan_t *plan, const uint8_t *keep, int what, exit_fn_t fn, void *arg)
{
    const cfg_prog_t *prog = plan->prog;
    for (uint32_t pi = 0; (what & KEPT_BLOCKS) && pi < prog->nprocs; pi++)
        if (code_stays(plan, keep, pi))
            QP_CHECK(block_exits(plan, pi, fn, arg));
    for (uint32_t k = 0; (what & KEPT_UNREACHED) && k < prog->nunreached; k++)
        QP_CHECK(unreached_exits(plan, prog->unreached[k], fn, arg));
    return 0;
}

typedef struct reach_ctx {
    uint8_t *keep;
    pads_memo_t pads;
    uint32_t *work; /* owners kept since their exits were looked at */
    size_t nwork, cap;
} reach_ctx_t;

static int
on_exit_keep(ed_plan_t *plan, uint64_t from, uint64_t to, void *arg)
{
    (void)from;
    reach_ctx_t *c = arg;
    uint32_t o = edl_owner_at(plan->prog, to);
    if (o == CFG_NONE || code_stays(plan, c->keep, o))
        return 0;
    int r = is_pad(plan, o, to, &c->pads);
    if (r != 0)
        return r < 0 ? QP_ENOMEM : 0;
    QP_CHECK(cfg_vec_grow((void **)&c->work, &c->cap, c->nwork + 1, sizeof(uint32_t)));
    c->work[c->nwork++] = o;
    c->keep[o] = 1;
    if (plan->stats.nkept_reached++ == 0)
        plan->stats.kept_reached = to;
    return 0;
}

/*
 * Procedures into which code that stays runs, other than at a redirect, keep their
 * bytes (KEEP): there the old code runs, as it did (unmeasured), never new code placed
 * over it. A procedure kept so is code that stays in its turn.
 */
static int
keep_reached(ed_plan_t *plan, const edl_pads_t *all, uint8_t *keep)
{
    reach_ctx_t c = { keep, { CFG_NONE, NULL, 0, NULL, all }, NULL, 0, 0 };
    int rc = kept_exits(plan, keep, KEPT_BLOCKS | KEPT_UNREACHED, on_exit_keep, &c);
    while (rc == 0 && c.nwork > 0)
        rc = block_exits(plan, c.work[--c.nwork], on_exit_keep, &c);
    pads_memo_done(&c.pads);
    free(c.work);
    return rc;
}

/* Is TO inside a redirect of moved procedure OWNER, not at its start (0 or 1), or -1? */
static int
inside_pad(const ed_plan_t *plan, uint32_t owner, uint64_t to, pads_memo_t *m)
{
    if (is_pad(plan, owner, to, m) < 0)
        return -1;
    for (size_t k = 0; k < m->n; k++)
        if (to > m->p[k] && to < m->p[k] + PAD_LEN(plan)
            && !cfg_u64_contains(plan->dropped, plan->ndropped, m->p[k]))
            return 1;
    return 0;
}

/* Is TO in bytes that new code took: the part of a hole that new code took, or inside
 * a redirect? */
typedef struct check_ctx {
    pads_memo_t pads;
    int redirects; /* into a redirect: 0 not looked at, 1 a failure, 2 counted */
} check_ctx_t;

static int
on_exit_check(ed_plan_t *plan, uint64_t from, uint64_t to, void *arg)
{
    check_ctx_t *c = arg;
    uint32_t o = edl_owner_at(plan->prog, to);
    int r = c->redirects && o != CFG_NONE && plan->reason[o] == NULL
        ? inside_pad(plan, o, to, &c->pads) : 0;
    if (r < 0)
        return QP_ENOMEM;
    if (r > 0 && c->redirects == 2) {
        if (plan->stats.nunreached_into_pad++ == 0) {
            plan->stats.unreached_into_pad_from = from;
            plan->stats.unreached_into_pad_to = to;
        }
        return 0;
    }
    if (r > 0)
        goto bad;
    if (to < plan->mirror || plan->mirror == 0)
        return 0;
    uint64_t rel = to - plan->mirror;
    size_t lo = 0, hi = plan->nholes; /* the first hole ending after REL */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (plan->holes[3 * mid + 1] <= rel)
            lo = mid + 1;
        else
            hi = mid;
    }
    const uint64_t *h = lo < plan->nholes ? &plan->holes[3 * lo] : NULL;
    if (h == NULL || rel < h[0] || rel >= h[0] + h[2])
        return 0;
bad:
    plan->stats.bad_exit_from = from;
    plan->stats.bad_exit_to = to;
    return QP_EBUG;
}

/*
 * The invariant, on the placed code: no way out of code left in place lands in bytes
 * that new code or a redirect took, nor one out of unreached bytes or of the procedures
 * that keep their bytes (KEEP, or NULL: no reuse) in reused bytes. QP_EBUG, with the
 * first in the stats. Unreached bytes that jump into the middle of a redirect are
 * counted (stats.nunreached_into_pad): nothing known runs them (a switch's cases the
 * CFG did not find, or dead code), and they did so without reuse as well. (The old copy
 * of a procedure that keeps its bytes runs only where the program holds an address
 * inside it, which qpt-rewrite reports; its jumps into the middle of a redirect are as
 * they were without reuse.)
 */
int
edl_check_kept_exits(ed_plan_t *plan, const edl_pads_t *all, const uint8_t *keep)
{
    check_ctx_t c = { { CFG_NONE, NULL, 0, NULL, all }, 1 };
    plan->stats.nunreached_into_pad = 0;
    int rc = kept_exits(plan, NULL, KEPT_BLOCKS, on_exit_check, &c);
    c.redirects = 2;
    if (rc == 0)
        rc = kept_exits(plan, NULL, KEPT_UNREACHED, on_exit_check, &c);
    c.redirects = 0;
    if (rc == 0 && keep != NULL && plan->mirror != 0)
        rc = kept_exits(plan, keep, KEPT_BLOCKS | KEPT_UNREACHED, on_exit_check, &c);
    pads_memo_done(&c.pads);
    return rc;
}

/*
 * plan->holes: the free bytes of the segment SG's old text (given minus taken, split
 * at section boundaries), layout-relative to plan->mirror, its first page. ALL: every
 * procedure's redirects.
 */
static int
find_holes(ed_plan_t *plan, const cfg_segment_t *sg, const edl_pads_t *all, uint8_t *keep)
{
    const cfg_prog_t *prog = plan->prog;
    cfg_span_t *give = NULL, *take = NULL;
    size_t ngive = 0, ntake = 0;
    uint64_t *cut = NULL;
    size_t ncut = 0;
    int rc = 0;
    for (size_t i = 0; i < plan->nslots && rc == 0; i++)
        if (plan->lay[i].flags & SLOT_XLATE) {
            const ed_seg_t *g = edl_seg_at(plan, slot_old(plan, &plan->lay[i]), NULL);
            if (g != NULL)
                keep[g->owner] = 1;
        }
    /* A scanned table cut where other data starts may be wrong: an index past the cut
     * reads an entry that is no redirect, and must run the old code (cfg_scanend.c). */
    for (uint32_t t = 0; t < prog->ntables; t++)
        if (prog->tables[t].cut) {
            uint32_t o = edl_owner_at(prog, prog->tables[t].jump);
            if (o != CFG_NONE)
                keep[o] = 1;
        }
    if (rc == 0)
        rc = keep_referenced(plan, all, keep);
    if (rc == 0)
        rc = keep_reached(plan, all, keep);
    /* The mirror starts at the segment's page, or the next one when that holds the
     * file's first bytes: the ELF header and program headers that the output file
     * changes must not be written twice (the mirror shows the input's bytes). */
    uint64_t mirror = sg->vaddr & ~(uint64_t)4095;
    if (sg->offset == sg->vaddr - mirror)
        mirror += 4096;
    uint64_t lo = sg->vaddr > mirror ? sg->vaddr : mirror, hi = sg->vaddr + sg->filesz;
    if (rc == 0 && lo < hi)
        rc = given_spans(plan, keep, lo, hi, &give, &ngive);
    if (rc == 0)
        rc = taken_spans(plan, all, keep, &take, &ntake);
    if (rc == 0 && (cut = malloc((2 * prog->img->nsections + 1) * sizeof(uint64_t))) == NULL)
        rc = QP_ENOMEM;
    for (size_t i = 0; rc == 0 && i < prog->img->nsections; i++)
        if (prog->img->sections[i].flags & CFG_SEC_ALLOC) {
            cut[ncut++] = prog->img->sections[i].vma;
            cut[ncut++] = prog->img->sections[i].vma + prog->img->sections[i].size;
        }
    size_t cap = 0;
    if (rc == 0) {
        ngive = merge_spans(give, ngive);
        ntake = merge_spans(take, ntake);
        qsort(cut, ncut, sizeof(uint64_t), cfg_u64_cmp);
        plan->mirror = mirror;
        plan->mirror_len = hi > mirror ? hi - mirror : 0;
    }
    /* give minus take, cut at section boundaries */
    size_t t = 0, c = 0;
    for (size_t i = 0; i < ngive && rc == 0; i++) {
        uint64_t s = give[i].start;
        while (s < give[i].end && rc == 0) {
            while (t < ntake && take[t].end <= s)
                t++;
            uint64_t e = give[i].end;
            if (t < ntake && take[t].start <= s) {
                s = take[t].end;
                continue;
            }
            if (t < ntake && take[t].start < e)
                e = take[t].start;
            while (c < ncut && cut[c] <= s)
                c++;
            if (c < ncut && cut[c] < e)
                e = cut[c];
            if (e - s >= MIN_HOLE) {
                if (3 * plan->nholes + 3 > cap) {
                    size_t nc = cap ? cap * 2 : 3 * 1024;
                    uint64_t *nh = realloc(plan->holes, nc * sizeof(uint64_t));
                    if (nh == NULL) {
                        rc = QP_ENOMEM;
                        break;
                    }
                    plan->holes = nh;
                    cap = nc;
                }
                uint64_t *h = &plan->holes[plan->nholes * 3];
                h[0] = s - plan->mirror;
                h[1] = e - plan->mirror;
                h[2] = 0;
                plan->nholes++;
                plan->stats.bytes_holes += e - s;
            }
            s = e;
        }
    }
    free(give);
    free(take);
    free(cut);
    return rc;
}

/*
 * A piece to place (a chunk, or nchunks + a stub: its index I, of SIZE bytes) as the
 * key that orders pieces largest first, then by index: (UINT32_MAX - SIZE) << 32 | I
 * (sizes of the layout are 32-bit: edl_layout refuses more), sorted by qp_sort_u64
 * (qsort's comparisons of 335k pieces cost cc1 0.29 G instructions, on the main thread).
 */
static uint64_t
piece_key(uint64_t size, size_t i)
{
    assert(size <= UINT32_MAX && i < UINT32_MAX);
    return (uint64_t)(UINT32_MAX - (uint32_t)size) << 32 | (uint32_t)i;
}

/* The layout-relative end of chunk C in the contiguous layout (pass 1). */
static uint64_t
chunk_end(const ed_plan_t *plan, size_t c)
{
    if (c + 1 < plan->nchunks)
        return slot_new(plan, &plan->lay[plan->chunk[c + 1]]);
    const ed_slot_t *last = &plan->lay[plan->nslots - 1];
    return slot_new(plan, last) + slot_size(plan, last);
}

/*
 * Holes by room, for best fit: a count per room value in a tree (the smallest room at
 * least N is found in log time) and, per value, a stack of the holes with that room.
 */
typedef struct rooms {
    uint32_t *count; /* 2 * width nodes: leaves width + room */
    uint32_t *head;  /* per room value: a hole with it, or NO_ROOM */
    uint32_t *next;  /* per hole: the next hole of the same room */
    size_t width;    /* a power of two above the largest room */
} rooms_t;

#define NO_ROOM UINT32_MAX

static void
rooms_add(rooms_t *r, uint32_t hole, uint64_t room)
{
    r->next[hole] = r->head[room];
    r->head[room] = hole;
    for (size_t i = r->width + room; i >= 1; i /= 2)
        r->count[i]++;
}

/* Take a hole of the smallest room at least N (its room in *ROOM), or NO_ROOM. */
static uint32_t
rooms_take(rooms_t *r, uint64_t n, uint64_t *room)
{
    if (n >= r->width)
        return NO_ROOM;
    size_t i = r->width + n;
    if (r->count[i] == 0) {
        while (i > 1 && ((i & 1) || r->count[i + 1] == 0))
            i /= 2;
        if (i == 1)
            return NO_ROOM;
        i++;
        while (i < r->width)
            i = r->count[2 * i] ? 2 * i : 2 * i + 1;
    }
    *room = i - r->width;
    uint32_t hole = r->head[*room];
    r->head[*room] = r->next[hole];
    for (; i >= 1; i /= 2)
        r->count[i]--;
    return hole;
}

/*
 * Best fit, largest first: every chunk and stub gets the hole with the least room that
 * takes it (large holes stay free for large procedures), or NO_HOLE. Sizes are those of
 * the long-branch layout: upper bounds.
 */
static int
pack_pieces(ed_plan_t *plan)
{
    size_t np = plan->nchunks + plan->nstubs;
    uint64_t maxroom = 0;
    for (size_t h = 0; h < plan->nholes; h++)
        if (plan->holes[3 * h + 1] - plan->holes[3 * h] > maxroom)
            maxroom = plan->holes[3 * h + 1] - plan->holes[3 * h];
    rooms_t r = { NULL, NULL, NULL, 1 };
    while (r.width <= maxroom)
        r.width *= 2;
    uint64_t *pc = malloc((np + 1) * sizeof(uint64_t));
    plan->chunk_at = malloc((plan->nchunks + 1) * sizeof(uint64_t));
    plan->stub_at = malloc((plan->nstubs + 1) * sizeof(uint64_t));
    r.count = calloc(2 * r.width, sizeof(uint32_t));
    r.head = malloc(r.width * sizeof(uint32_t));
    r.next = malloc((plan->nholes + 1) * sizeof(uint32_t));
    int rc = 0;
    if (pc == NULL || plan->chunk_at == NULL || plan->stub_at == NULL || r.count == NULL
        || r.head == NULL || r.next == NULL || plan->nholes >= NO_ROOM || np >= UINT32_MAX) {
        rc = QP_ENOMEM;
        goto out;
    }
    memset(r.head, 0xff, r.width * sizeof(uint32_t));
    for (size_t c = 0; c < plan->nchunks; c++) {
        plan->chunk_at[c] = NO_HOLE;
        uint64_t start = slot_new(plan, &plan->lay[plan->chunk[c]]);
        pc[c] = piece_key(chunk_end(plan, c) - start, c);
    }
    for (size_t k = 0; k < plan->nstubs; k++) {
        plan->stub_at[k] = NO_HOLE;
        /* A stub falling into its target goes with the target's chunk (size 0: no hole). */
        uint64_t size = plan->stubs[k].before == NO_STUB ? plan->stubs[k].len : 0;
        pc[plan->nchunks + k] = piece_key(size, plan->nchunks + k);
    }
    qp_sort_u64_tied(pc, np, 32); /* (the indices ascend) */
    /* Pushed from the last hole down: holes of one room are taken by address. */
    for (size_t h = plan->nholes; h-- > 0;)
        rooms_add(&r, (uint32_t)h, plan->holes[3 * h + 1] - plan->holes[3 * h]);
    for (size_t i = 0; i < np; i++) {
        uint64_t size = UINT32_MAX - (pc[i] >> 32), room;
        uint32_t idx = (uint32_t)pc[i];
        uint32_t h = size == 0 ? NO_ROOM : rooms_take(&r, size, &room);
        if (h == NO_ROOM)
            continue;
        uint64_t *hole = &plan->holes[3 * h];
        uint64_t at = hole[0] + hole[2];
        hole[2] += size;
        if (room > size)
            rooms_add(&r, h, room - size);
        if (idx < plan->nchunks)
            plan->chunk_at[idx] = at;
        else
            plan->stub_at[idx - plan->nchunks] = at;
        plan->stats.bytes_reused += size;
    }
out:
    free(pc);
    free(r.count);
    free(r.head);
    free(r.next);
    return rc;
}

/* The chunk of slot I (a binary search over the chunks' first slots). */
size_t
edl_chunk_of(const ed_plan_t *plan, size_t i)
{
    size_t lo = 0, hi = plan->nchunks;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (plan->chunk[mid] <= i)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/*
 * Decide where the new code goes in the old text: plan->mirror, holes, chunk_at and
 * stub_at, from the long-branch layout. No reuse (mirror 0) when no piece finds a hole.
 */
int
edl_plan_reuse(ed_plan_t *plan)
{
    const cfg_segment_t *sg = reuse_segment(plan);
    if (sg == NULL || plan->nslots == 0 || (sg->vaddr & ~(uint64_t)4095) == 0)
        return 0; /* mirror 0 means no reuse */
    uint8_t *keep = calloc(plan->prog->nprocs + 1, 1);
    edl_pads_t all; /* (a function of the program and the plan's tables: made once) */
    int rc = keep != NULL ? edl_pads_all(plan, &all) : QP_ENOMEM;
    if (rc == 0) {
        rc = find_holes(plan, sg, &all, keep);
        if (rc == 0 && plan->nholes > 0)
            rc = pack_pieces(plan);
        if (rc == 0)
            rc = edl_check_kept_exits(plan, &all, keep);
        edl_pads_free(&all);
    }
    free(keep);
    QP_CHECK(rc);
    if (plan->stats.bytes_reused < REUSE_MIN) {
        plan->mirror = 0; /* not worth a segment and the padding before what follows */
        plan->mirror_len = 0;
        plan->nholes = 0;
        plan->stats.bytes_reused = 0;
        plan->stats.bytes_holes = 0;
        return 0;
    }
    plan->overflow = (plan->mirror_len + 4095) & ~(uint64_t)4095;
    return 0;
}

/* As assign, with the chunks and stubs that found a hole there, the rest from the
 * overflow; returns the size from layout-relative 0 (the mirror's first byte). */
uint64_t
edl_assign_reuse(ed_plan_t *plan)
{
    uint64_t at = plan->overflow;
    for (size_t c = 0; c < plan->nchunks; c++) {
        uint64_t a = plan->chunk_at[c] != NO_HOLE ? plan->chunk_at[c] : at;
        for (size_t i = plan->chunk[c]; i < plan->chunk[c + 1]; i++) {
            a += slot_lead(&plan->lay[i]);
            plan->lay[i].new_ = (uint32_t)a; /* (edl_layout refuses past 32 bits) */
            a += slot_size(plan, &plan->lay[i]);
        }
        if (plan->chunk_at[c] == NO_HOLE)
            at = a;
    }
    for (size_t i = 0; i < plan->nstubs; i++) {
        if (plan->stubs[i].before != NO_STUB)
            continue; /* edl_place_fall_stubs */
        if (plan->stub_at[i] != NO_HOLE) {
            plan->stubs[i].new_ = plan->stub_at[i];
            continue;
        }
        plan->stubs[i].new_ = at;
        at += plan->stubs[i].len;
    }
    if (plan->nxlate > 0) {
        plan->xlate = at;
        at = edl_xlate_table_at(plan) + edl_xlate_table_size(plan->prog);
    }
    edl_place_fall_stubs(plan);
    return at;
}

