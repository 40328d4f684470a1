/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Live patching, timers (see dyn_patch.c): a timed procedure is patched at its entry
 * and at every exit (the tail of each block ending in ret, tail jumps, calls that
 * never return), all or nothing.
 */
#include "config.h"

#include "dynamic/dyn_patch_priv.h"

/*****************************************************************************
 * Timers: the entry and every exit (the tail of each block ending in ret)
 */

static int
frag_cmp(const void *a, const void *b, void *prog)
{
    const cfg_proc_t *procs = ((const cfg_prog_t *)prog)->procs;
    uint32_t x = procs[*(const uint32_t *)a].parent,
             y = procs[*(const uint32_t *)b].parent;
    return x < y ? -1 : x > y;
}

/*
 * The procedures whose blocks make up procedure I: I itself, then its cold fragments.
 * Into OUT (CAP entries); their number, or QP_ENOMEM.
 */
int
dynp_parts_of(dyn_session_t *s, uint32_t i, uint32_t *out, size_t cap)
{
    const cfg_prog_t *prog = s->prog;
    size_t n = 0, lo = 0, hi;

    if (s->frags == NULL) {
        s->frags = malloc((prog->nprocs + 1) * sizeof(*s->frags));
        if (s->frags == NULL)
            return QP_ENOMEM;
        for (uint32_t j = 0; j < prog->nprocs; j++)
            if ((prog->procs[j].flags & CFG_PROC_FRAGMENT)
                && prog->procs[j].parent != CFG_NONE)
                s->frags[s->nfrags++] = j;
        qsort_r(s->frags, s->nfrags, sizeof(*s->frags), frag_cmp, (void *)prog);
    }
    out[n++] = i;
    hi = s->nfrags;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (prog->procs[s->frags[mid]].parent < i)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < s->nfrags && prog->procs[s->frags[lo]].parent == i; lo++) {
        if (n == cap)
            return QP_ERANGE;
        out[n++] = s->frags[lo];
    }
    return (int)n;
}

/*
 * The exit point of block B of the procedure entered at link address OWN, ending in a
 * ret or (a tail call) a jmp: the shortest tail of whole instructions of at least 5
 * bytes, or with WHOLE (the block is the procedure's entry block) all of them. A block
 * shorter than 5 bytes is completed with the padding after it (spill), or else is left
 * to a 2-byte jump through padding: *WANT_PAD (the caller finds it, dynp_find_pad). Why
 * not, or NULL with *PT filled.
 */
const char *
dynp_check_exit(const dyn_session_t *s, const cfg_block_t *b, uint64_t own, int whole,
    point_t *pt /*OUT*/, int *want_pad /*OUT*/)
{
    return dynp_check_tail(s, b, own, whole, 0, pt, want_pad);
}

/* dynp_check_exit, and with PLAIN a block that ends in a plain instruction (falling into
 * a return block). */
const char *
dynp_check_tail(const dyn_session_t *s, const cfg_block_t *b, uint64_t own, int whole,
    int plain, point_t *pt /*OUT*/, int *want_pad /*OUT*/)
{
    const cfg_prog_t *prog = s->prog;
    uint64_t starts[8];
    size_t avail, n = 0, len, blen = b->end - b->start;
    const uint8_t *bytes = cfg_image_ptr(prog->img, b->start, &avail);
    uint64_t a = b->start, from;
    size_t j;
    int last = -1;

    *want_pad = 0;
    if (bytes == NULL || avail < blen)
        return "a return block has no bytes in the file";
    while (a < b->end) {
        arch_insn_t in;
        if (arch_decode(bytes + (a - b->start), b->end - a, a, &in) < 0)
            return "an instruction of a return block does not decode";
        starts[n++ % 8] = a;
        a += in.len;
        last = in.kind;
    }
    if (a != b->end)
        return "a return block does not end on an instruction";
    /* The last start at least 5 bytes before the end (at most 8 instructions back). */
    from = b->start;
    for (j = 1; !whole && j <= 8 && j <= n; j++)
        if (b->end - starts[(n - j) % 8] >= JMP_LEN) {
            from = starts[(n - j) % 8];
            break;
        }
    if (!whole && j > 8)
        return "a return block has no short tail to move";
    len = b->end - from;
    if (len > sizeof(pt->orig))
        return whole ? "its entry block is too long to move whole"
                     : "the instructions before a ret are too long";
    memset(pt, 0, sizeof(*pt));
    for (a = from; a < b->end;) {
        arch_insn_t in;
        arch_decode(bytes + (a - b->start), b->end - a, a, &in);
        if (in.flags & ARCH_F_PRIV)
            return "a privileged instruction before a ret";
        if (in.kind != ARCH_KIND_SEQ && in.kind != ARCH_KIND_NOP
            && in.kind != ARCH_KIND_ENDBR
            && !((in.kind == ARCH_KIND_RET || in.kind == ARCH_KIND_JMP
                     || in.kind == ARCH_KIND_JMP_IND || in.kind == ARCH_KIND_JCC)
                && a + in.len == b->end))
            return "an instruction before a ret cannot be moved";
        if (plain && a + in.len == b->end && in.kind == ARCH_KIND_RET)
            return "an instruction before a ret cannot be moved";
        a += in.len;
        pt->ninsns++;
    }
    /* Another procedure's entry inside the tail (overlapping code). */
    if (dynp_proc_entry_in(prog, from + 1, b->end)
        || (from != own && dynp_proc_entry_in(prog, from, from + 1)))
        return "another procedure starts inside the tail of a return block";
    if (len < JMP_LEN) {
        size_t more = JMP_LEN - len;
        if (!plain && avail >= blen + more && dynp_spill_ok(s, b->end, more)) {
            memcpy(pt->orig + len, bytes + blen, more);
            pt->spill = (uint8_t)more;
        } else if (len >= SHORT_LEN || (whole && s->nb_pun && s->nb_slot != 0))
            *want_pad = 1; /* (1 byte: the pun of a lender's slot, whole_entry) */
        else
            return "a block ending in ret is shorter than the 5-byte jump, with no "
                   "padding after it";
    }
    pt->kind = PT_EXIT;
    pt->tail = last == ARCH_KIND_JCC                         ? 2
        : last == ARCH_KIND_JMP || last == ARCH_KIND_JMP_IND ? 1
                                                             : 0;
    pt->entry = from + s->bias;
    pt->len = (uint8_t)(len + pt->spill);
    memcpy(pt->orig, bytes + (from - b->start), len);
    return NULL;
}

/* Does block B end in a tail call that always leaves (a jmp whose edges are all tail
 * calls)? */
int
dynp_is_tail_block(const cfg_prog_t *prog, const cfg_block_t *b)
{
    if ((b->last_kind != ARCH_KIND_JMP && b->last_kind != ARCH_KIND_JMP_IND)
        || b->nsucc == 0)
        return 0;
    for (uint32_t e = 0; e < b->nsucc; e++)
        if (cfg_block_succ(prog, b, e)->kind != CFG_EDGE_TAILCALL)
            return 0;
    return 1;
}

/* Does block B end in a conditional tail call: 2 for a jcc whose taken edge leaves for
 * another procedure and which falls through otherwise, 3 when both sides leave (the
 * next procedure's code follows); else 0? */
int
dynp_is_cond_tail_block(const cfg_prog_t *prog, const cfg_block_t *b)
{
    unsigned tails = 0;

    if (b->last_kind != ARCH_KIND_JCC)
        return 0;
    for (uint32_t e = 0; e < b->nsucc; e++) {
        uint8_t kind = cfg_block_succ(prog, b, e)->kind;
        if (kind == CFG_EDGE_TAILCALL)
            tails++;
        else if (kind != CFG_EDGE_FALL)
            return 0;
    }
    return tails == 1 ? 2 : tails == 2 && b->nsucc == 2 ? 3 : 0;
}

/* Does block B end in the indirect jump of a jump table of proven bounds (its every
 * edge one of the table's)? */
int
dynp_is_table_block(const cfg_prog_t *prog, const cfg_block_t *b)
{
    if (b->last_kind != ARCH_KIND_JMP_IND || b->nsucc == 0)
        return 0;
    for (uint32_t e = 0; e < b->nsucc; e++)
        if (cfg_block_succ(prog, b, e)->kind != CFG_EDGE_TABLE)
            return 0;
    return 1;
}

/*
 * Does block BL of the procedure of PARTS end in an indirect jump that its copy
 * translates at run time (pt_proc_t's unknown): one of unknown targets, or of a table
 * not all of whose targets are the procedure's own code? (A table whose every target is
 * is relocated as it is, with jumps into the copy at its targets: dynp_is_table_block.)
 */
int
dynp_xlate_block(
    const dyn_session_t *s, const uint32_t *parts, int nparts, const cfg_block_t *bl)
{
    const cfg_prog_t *prog = s->prog;
    int table = 0, out = 0;
    if (bl->last_kind != ARCH_KIND_JMP_IND)
        return 0;
    for (uint32_t e = 0; e < bl->nsucc; e++) {
        const cfg_edge_t *ed = cfg_block_succ(prog, bl, e);
        if (ed->kind == CFG_EDGE_UNRESOLVED || ed->kind == CFG_EDGE_INDIRECT)
            return 1;
        if (ed->kind == CFG_EDGE_TABLE) {
            table = 1;
            out |= ed->to == CFG_NONE
                || dynp_part_block_index(prog, parts, nparts, ed->to) == SIZE_MAX;
        }
    }
    return table && (out || !dynp_is_table_block(prog, bl));
}

/* The last instructions of the blocks of the procedure of PARTS that WHICH says yes to
 * (NULL: dynp_xlate_block): their runtime addresses, sorted, into *OUT (malloc'd, NULL
 * for none); their number, or QP_ENOMEM. */
static int
block_ends(const dyn_session_t *s, const uint32_t *parts, int nparts,
    int (*which)(const cfg_prog_t *, const cfg_block_t *), uint64_t **out)
{
    const cfg_prog_t *prog = s->prog;
    size_t n = 0, cap = 0;
    uint64_t *v = NULL;
    uint32_t b;
    int k;

    *out = NULL;
    FOR_BLOCKS(prog, parts, nparts, k, b)
    {
        const cfg_block_t *bl = &prog->blocks[b];
        arch_insn_t in;
        uint64_t a = bl->start;
        if (which != NULL ? !which(prog, bl) : !dynp_xlate_block(s, parts, nparts, bl))
            continue;
        while (a < bl->end && cfg_image_decode(prog->img, a, 0, &in) >= 0
            && a + in.len < bl->end)
            a += in.len;
        if (a >= bl->end)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            uint64_t *w = realloc(v, cap * sizeof(*w));
            if (w == NULL) {
                free(v);
                return QP_ENOMEM;
            }
            v = w;
        }
        v[n++] = a + s->bias;
    }
    if (n > 1)
        qsort(v, n, sizeof(*v), cfg_u64_cmp);
    *out = v;
    return (int)n;
}

/*
 * The three lists of block ends of the procedure of PARTS that its copy treats apart
 * (calls that never return, jumps of tables inside it, jumps translated at run time)
 * into P's noret, inner and unknown: 0, or QP_ENOMEM (then none is set). Freed with
 * dynp_proc_block_ends_free.
 */
int
dynp_proc_block_ends(const dyn_session_t *s, const uint32_t *parts, int nparts,
    pt_proc_t *p /*OUT*/)
{
    uint64_t *noret = NULL, *inner = NULL, *unknown = NULL;
    int nnr = block_ends(s, parts, nparts, cfg_block_call_never_returns, &noret);
    int nin = nnr < 0 ? nnr : block_ends(s, parts, nparts, dynp_is_table_block, &inner);
    int nun = nin < 0 ? nin : block_ends(s, parts, nparts, NULL, &unknown);
    if (nnr < 0 || nin < 0 || nun < 0) {
        free(noret);
        free(inner);
        return QP_ENOMEM;
    }
    p->noret = noret;
    p->nnoret = (size_t)nnr;
    p->inner = inner;
    p->ninner = (size_t)nin;
    p->unknown = unknown;
    p->nunknown = (size_t)nun;
    return 0;
}

/* Frees the lists dynp_proc_block_ends set in P. */
void
dynp_proc_block_ends_free(pt_proc_t *p)
{
    free((void *)p->noret);
    free((void *)p->inner);
    free((void *)p->unknown);
    p->noret = p->inner = p->unknown = NULL;
    p->nnoret = p->ninner = p->nunknown = 0;
}

/*
 * Why the call to TARGET that ends block B, a C++ throw (__cxa_throw, __cxa_rethrow),
 * is no exit: its procedure catches exceptions (a catch clause calls __cxa_begin_catch),
 * so the throw may land in its own handler and the activation go on. NULL otherwise.
 */
static const char *
throws_to_itself(const dyn_session_t *s, const cfg_block_t *b, uint64_t target)
{
    const cfg_prog_t *prog = s->prog;
    const cfg_proc_t *c = cfg_proc_at(prog, target), *own = &prog->procs[b->proc];
    uint32_t parts[64], bb;
    int k, nparts;

    if (c == NULL || c->entry != target || c->name == NULL
        || (strstr(c->name, "__cxa_throw") == NULL && strstr(c->name, "__cxa_rethrow") == NULL))
        return NULL;
    nparts = dynp_parts_of((dyn_session_t *)s,
        (own->flags & CFG_PROC_FRAGMENT) && own->parent != CFG_NONE ? own->parent : b->proc,
        parts, 64);
    if (nparts < 0)
        return "too many cold fragments";
    FOR_BLOCKS(prog, parts, nparts, k, bb)
    if (dynp_catches(s, &prog->blocks[bb]) != NULL)
        return "it throws an exception it may catch itself (a timer stopped at the throw "
               "would miss the handler)";
    return NULL;
}

/*
 * The exit point of block B that ends in a call that never returns
 * (cfg_block_call_never_returns): the call alone, its snippet before it, the call made from the trampoline with its
 * original return address (so unwinding, and a callee that returns after all, see the
 * code they would without dyn). Why not, or NULL with *PT filled (kind PT_EXIT).
 */
const char *
dynp_check_noret(const dyn_session_t *s, const cfg_block_t *b, point_t *pt /*OUT*/)
{
    const cfg_prog_t *prog = s->prog;
    const char *refused = "a call that never returns cannot take its exit's jump (an "
                          "indirect one, or a call to the next instruction)";
    arch_insn_t in;
    uint64_t a = b->start;
    size_t avail;
    const uint8_t *bytes;
    const char *why;

    memset(&in, 0, sizeof(in));
    while (a < b->end && cfg_image_decode(prog->img, a, 0, &in) >= 0 && a + in.len < b->end)
        a += in.len;
    if (a >= b->end || a + in.len != b->end || (bytes = cfg_image_ptr(prog->img, a, &avail)) == NULL
        || avail < in.len)
        return refused;
    /* (An indirect call would push a return address in the trampoline.) */
    if (in.kind != ARCH_KIND_CALL || in.len < JMP_LEN || in.len > sizeof(pt->orig)
        || in.target == a + in.len || dynp_proc_entry_in(prog, a + 1, a + in.len))
        return refused;
    if (dynp_has_shadow_stack(s))
        return "a call that never returns would be made with its original return address "
               "(the process has a shadow stack)";
    if ((why = throws_to_itself(s, b, in.target)) != NULL)
        return why;
    if (((a + s->bias) & 4095) > 4096 - JMP_LEN)
        return "a call that never returns crosses a page boundary (the jump could not be "
               "written in one piece)";
    memset(pt, 0, sizeof(*pt));
    pt->kind = PT_EXIT;
    pt->entry = a + s->bias;
    pt->len = (uint8_t)in.len;
    pt->ninsns = 1;
    pt->call_ret = 1;
    pt->noret = 1;
    memcpy(pt->orig, bytes, in.len);
    return NULL;
}

/*
 * The entry of timed procedure I: its entry block moved whole when it ends the
 * procedure (ret, tail call: the timer starts and stops in one trampoline), else its
 * first instructions (a short jump through padding when they are too few). Why not, or
 * NULL with *PT filled (kind PT_ENTRY).
 */
const char *
dynp_timed_entry(dyn_session_t *s, uint32_t i, point_t *pt /*OUT*/)
{
    const cfg_prog_t *prog = s->prog;
    const cfg_proc_t *pr = &prog->procs[i];
    const cfg_block_t *eb;
    const char *why;
    int first_only, want_pad, both;

    if ((why = dynp_entry_ok(s, i, &first_only)) != NULL)
        return why;
    eb = &prog->blocks[pr->block];
    both = dynp_is_cond_tail_block(prog, eb) == 3;
    if ((eb->last_kind == ARCH_KIND_RET || dynp_is_tail_block(prog, eb) || both)
        && eb->end - eb->start <= sizeof(pt->orig)) {
        if ((why = dynp_check_exit(s, eb, pr->entry, 1, pt, &want_pad)) != NULL)
            return why;
        if (want_pad && (why = dynp_find_pad(s, pr->entry, pt)) != NULL)
            return why;
        pt->whole = 1;
        pt->tail = both ? 3 : 0;
        pt->save_flags = dynp_entry_save_flags(pr);
    } else if ((why = dynp_entry_insns(s, i, JMP_LEN, first_only, pt)) != NULL
        && dynp_check_short(s, i, first_only, pt) != NULL)
        return why;
    pt->kind = PT_ENTRY;
    pt->proc = i;
    return NULL;
}

/*
 * Exits for return block R of procedure I (row ROW, chosen by NAME, entry point ENTRY)
 * when R is too short for a jump of its own (a lone `ret` between two blocks): a point
 * on each block that leads to it instead (falling into it, or a jmp or a jcc to it),
 * whose trampoline runs R's instructions, the timer stop before the ret, where the
 * block would go to R. All of them or none: why not, or NULL with the candidates added
 * and counted in *NEXIT. *ERR: QP_ENOMEM.
 */
const char *
dynp_exits_before(dyn_session_t *s, uint32_t i, const cfg_block_t *r, uint32_t row,
    const char *name, const point_t *entry, unsigned *nexit, int *err)
{
    const cfg_prog_t *prog = s->prog;
    const uint64_t own = prog->procs[i].entry;
    size_t avail, rlen = r->end - r->start, ncand0 = s->ncand, off = 0;
    const uint8_t *bytes = cfg_image_ptr(prog->img, r->start, &avail);
    uint8_t rninsns = 0;

    *err = 0;
    if (bytes == NULL || avail < rlen || rlen > sizeof(entry->rbytes) || r->npred == 0)
        return "a return block is too short for a jump and cannot move";
    while (off < rlen) {
        arch_insn_t in;
        if (arch_decode(bytes + off, rlen - off, r->start + off, &in) < 0
            || (in.flags & ARCH_F_PRIV)
            || (off + in.len == rlen
                    ? in.kind != ARCH_KIND_RET
                    : in.kind != ARCH_KIND_SEQ && in.kind != ARCH_KIND_NOP))
            return "a return block is too short for a jump and cannot move";
        off += in.len;
        rninsns++;
    }
    for (uint32_t k = 0; k < r->npred; k++) {
        const cfg_edge_t *e = &prog->edges[prog->preds[r->pred + k]];
        const cfg_block_t *b = &prog->blocks[e->from];
        const char *why;
        int want_pad;
        point_t ex;
        if (prog->procs[b->proc].entry != own && prog->procs[b->proc].parent != i)
            why = "a return block is reached from another procedure's code";
        else if (e->kind == CFG_EDGE_FALL && b->last_kind != ARCH_KIND_SEQ
            && b->last_kind != ARCH_KIND_NOP && b->last_kind != ARCH_KIND_JCC)
            why = "a short return block follows a call";
        else if (e->kind != CFG_EDGE_FALL && e->kind != CFG_EDGE_JUMP
            && e->kind != CFG_EDGE_TAKEN)
            why = "a short return block is reached by a jump table or an indirect jump";
        else if (e->kind == CFG_EDGE_FALL && b->end != r->start)
            why = "a return block's fall-through predecessor does not end at it";
        else
            why = dynp_check_tail(s, b, own, 0, e->kind == CFG_EDGE_FALL, &ex, &want_pad);
        if (why == NULL && want_pad)
            why = dynp_find_pad(s, b->start, &ex);
        if (why == NULL && dynp_crosses_page(&ex))
            why = "the jump before a short ret would cross a page boundary";
        if (why == NULL && dynp_cand_at(s, row, ex.entry))
            why = "a block leads to two short return blocks (or one both ways)";
        if (why == NULL && ex.entry < entry->entry + entry->len
            && entry->entry < ex.entry + ex.len)
            why = "its entry and a block before a short ret share the bytes to patch";
        if (why == NULL) {
            ex.rlen = (uint8_t)rlen;
            memcpy(ex.rbytes, bytes, rlen);
            ex.raddr = r->start + s->bias;
            why = dynp_go_refusal(s, &ex);
        }
        if (why != NULL) {
            s->ncand = ncand0;
            return why;
        }
        ex.proc = i;
        ex.row = row;
        ex.name = name;
        ex.save_flags = entry->save_flags;
        ex.rlen = (uint8_t)rlen;
        ex.rninsns = rninsns;
        ex.raddr = r->start + s->bias;
        memcpy(ex.rbytes, bytes, rlen);
        if ((*err = dynp_add_cand(s, &ex)) < 0)
            return NULL;
        (*nexit)++;
    }
    return NULL;
}
