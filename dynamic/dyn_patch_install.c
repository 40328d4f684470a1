/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Live patching, installing (see dyn_patch.c): what the process proves (nobody is
 * inside the bytes), counter memory, the trampolines built through patch/, and
 * writing the patches while every thread is stopped.
 */
#include "config.h"

#include "dynamic/dyn_patch_priv.h"

/*****************************************************************************
 * What the process proves: nobody is inside the bytes, and they are the file's
 */

/* True when a word of the sorted W lies in [LO, HI). */
static int
any_in(const uint64_t *w, size_t n, uint64_t lo, uint64_t hi)
{
    size_t i = cfg_u64_lower_bound(w, n, lo);
    return i < n && w[i] < hi;
}

/*****************************************************************************
 * Counters
 */

static int
counters_alloc(dyn_session_t *s, size_t n)
{
    size_t rows = (n * 8 * ROW_WORDS + 63) & ~(size_t)63;
    size_t size = (rows + 4095) & ~(size_t)4095;

    s->ctr_size = size;
    return dyn_space_map_near_avoid(s->p, s->code, s->code + s->code_size, size,
                                    ED_PROT_R | ED_PROT_W, -1, s->avoid, s->navoid, &s->ctr);
}

/*****************************************************************************
 * Installing
 */

/*
 * A point's trampoline is built by patch/'s pt_tramp_emit (see there the shapes) from
 * its bytes and snippets: the snippet is the point's own, or the row's counter and
 * timer, compiled by the snippet compiler, which saves the flags where they may be live
 * (at a ret they are dead by the ABI, unless the procedure is not known to be called by
 * it).
 */
/* What holds where a snippet of PT runs (AFTER: after its call). */
static arch_snip_ctx_t
snip_ctx(const point_t *pt, int after)
{
    uint8_t flags = pt->save_flags ? ARCH_FLAGS_STATUS : 0;
    switch (pt->kind) {
    /* After: an entry moved whole, before its ret (or its tail jump: no return value
     * there, and the flags saved, as they may be live for a jump into other code). */
    case PT_ENTRY:
        if (after && pt->by_jump)
            return pt_point_ctx(PT_POINT_INSN, ARCH_FLAGS_STATUS);
        return pt_point_ctx(after ? PT_POINT_EXIT : PT_POINT_ENTRY, flags);
    /* Before a call and after it returned the flags are dead (the callee clobbers them). */
    case PT_CALL: return pt_point_ctx(after ? PT_POINT_AFTER_CALL : PT_POINT_CALL, 0);
    case PT_EXIT: /* a tail call (or a call that never returns): no return value, the
                   * flags saved (as above); before a short ret block's ret (rlen) it is a
                   * return again */
        return (pt->tail || pt->noret) && !pt->rlen ? pt_point_ctx(PT_POINT_INSN, ARCH_FLAGS_STATUS)
                                     : pt_point_ctx(PT_POINT_EXIT, flags);
    default: return pt_point_ctx(PT_POINT_BLOCK, ARCH_FLAGS_STATUS); /* a block */
    }
}

/* The counter (a locked add) and timer start of a row's entry as a snippet, at WORDS. */
void
dynp_count_snip(int timed, uint64_t words, arch_snip_t v[COUNT_NODES], dyn_snippet_t *sn)
{
    v[0] = (arch_snip_t) { .op = ARCH_SN_CONST, .imm = 1, .a = ARCH_SNIP_NONE,
        .b = ARCH_SNIP_NONE, .c = ARCH_SNIP_NONE };
    v[1] = (arch_snip_t) { .op = ARCH_SN_ADD_TO, .a = 0, .b = ARCH_SNIP_NONE,
        .c = ARCH_SNIP_NONE, .imm = (int64_t)words, .flags = ARCH_SNF_ATOMIC };
    v[2] = (arch_snip_t) { .op = ARCH_SN_TIMER_START, .a = ARCH_SNIP_NONE,
        .b = ARCH_SNIP_NONE, .c = ARCH_SNIP_NONE, .imm = (int64_t)(words + 8) };
    v[3] = (arch_snip_t) { .op = ARCH_SN_SEQ, .a = 1, .b = 2, .c = ARCH_SNIP_NONE };
    *sn = (dyn_snippet_t) { v, COUNT_NODES, timed ? 3 : 1 };
}

/* SN and what holds where it runs at PT (AFTER: after its call). */
static pt_snip_t
tramp_snip(const point_t *pt, const dyn_snippet_t *sn, int after)
{
    return (pt_snip_t) { sn->nodes, sn->n, sn->root, snip_ctx(pt, after) };
}

/*
 * The copy of PT's procedure (relocated whole) at AT into OUT (CAP bytes), with PRE at
 * its entry and POST (may be NULL) before each ret and each jump that leaves it: its
 * length, or QP_E*; PT's map of it set.
 */
static int
emit_reloc(const dyn_session_t *s, point_t *pt, uint64_t at, const dyn_snippet_t *pre,
    const dyn_snippet_t *post, uint8_t *out, size_t cap)
{
    uint32_t parts[64];
    int nparts = dynp_parts_of((dyn_session_t *)s, pt->proc, parts, 64), n;
    pt_run_t *runs;
    uint8_t fl = pt->save_flags ? ARCH_FLAGS_STATUS : 0;

    QP_CHECK(nparts);
    QP_CHECK(n = dynp_proc_runs(s, parts, nparts, &runs));
    pt_proc_t p = { runs, (size_t)n, s->prog->procs[pt->proc].entry + s->bias,
        tramp_snip(pt, pre, 0), { 0 }, { 0 }, NULL, 0, NULL, 0, NULL, 0, NULL, 0, NULL, 0,
        s->decoded };
    uint64_t *exits = NULL;
    pt_site_t *sites = NULL;
    if ((n = dynp_proc_block_ends(s, parts, nparts, &p)) < 0) {
        free(runs);
        return n;
    }
    n = QP_ENOMEM;
    if (pt->exits != NULL) {
        /* Only the exits the caller put its snippet at (link addresses, sorted). */
        if ((exits = malloc((pt->nexits + 1) * sizeof(*exits))) == NULL)
            goto out;
        for (size_t k = 0; k < pt->nexits; k++)
            exits[k] = pt->exits[k] + s->bias;
        p.exits = exits;
        p.nexits = pt->nexits;
    }
    if (pt->nsites > 0) {
        /* Before a call the flags are dead (the callee clobbers them), as in place. */
        if ((sites = malloc(pt->nsites * sizeof(*sites))) == NULL)
            goto out;
        for (size_t k = 0; k < pt->nsites; k++) {
            const dyn_snippet_t *sn = &pt->sites[k].snip;
            sites[k] = (pt_site_t) { pt->sites[k].addr + s->bias,
                { sn->nodes, sn->n, sn->root, pt_point_ctx(PT_POINT_CALL, 0) } };
        }
        p.sites = sites;
        p.nsites = pt->nsites;
    }
    if (post != NULL) {
        /* At a ret the flags are dead where the ABI holds (as a timed exit's); before a
         * jump that leaves, they are saved (they may be live for its target). */
        p.ret = (pt_snip_t) { post->nodes, post->n, post->root, pt_point_ctx(PT_POINT_EXIT, fl) };
        p.leave = (pt_snip_t) { post->nodes, post->n, post->root,
            pt_point_ctx(PT_POINT_INSN, ARCH_FLAGS_STATUS) };
    }
    free(pt->map);
    pt->nmap = 0;
    size_t mapcap = pt_proc_mapcap(&p);
    if ((pt->map = malloc((mapcap + 1) * sizeof(*pt->map))) != NULL)
        n = pt_proc_emit(&p, at, out, cap, pt->map, mapcap, &pt->nmap);
out:
    free(sites);
    free(runs);
    free(exits);
    dynp_proc_block_ends_free(&p);
    return n;
}

/* Bytes enough for the copy of PT's procedure (relocated whole) with its snippets; 0
 * when it cannot be known (emitting then says what is wrong). */
static size_t
reloc_size(const dyn_session_t *s, const point_t *pt)
{
    /* As tried, with a counter and a timer; room for snippets of its own and for
     * encodings that differ where it goes (an emit that does not fit refuses it). */
    const dyn_snippet_t *sn[2] = { &pt->before, &pt->after };
    size_t extra = 0;
    for (int a = 0; a < 2; a++)
        if (sn[a]->nodes != NULL) {
            pt_snip_t ps = { sn[a]->nodes, sn[a]->n, sn[a]->root, snip_ctx(pt, a) };
            int n = pt_snip_size(&ps, pt->entry);
            extra += n > 0 ? (size_t)n : 4096;
        }
    (void)s;
    size_t sites = 0;
    for (size_t k = 0; k < pt->nsites; k++) {
        const dyn_snippet_t *sn = &pt->sites[k].snip;
        pt_snip_t ps = { sn->nodes, sn->n, sn->root, pt_point_ctx(PT_POINT_CALL, 0) };
        int n = pt_snip_size(&ps, pt->entry);
        sites += n > 0 ? (size_t)n : 4096;
    }
    return pt->rsize + pt->rsize / 4 + 256 + extra * (pt->rsize / 8 + 1) + sites;
}

/* The trampoline of PT (counting or timing for its row at WORDS) at AT into OUT: its
 * length or QP_E*. */
static int
emit_tramp(const dyn_session_t *s, point_t *pt, uint64_t at, uint64_t words, uint8_t *out,
    size_t cap)
{
    arch_snip_t cv[COUNT_NODES], stop = { .op = ARCH_SN_TIMER_STOP, .a = ARCH_SNIP_NONE,
        .b = ARCH_SNIP_NONE, .c = ARCH_SNIP_NONE, .imm = (int64_t)(words + 8) };
    dyn_snippet_t count, st = { &stop, 1, 0 };
    pt_tramp_t t = { .addr = pt->entry, .orig = pt->orig, .len = pt->len,
        .ninsns = pt->ninsns, .spill = pt->spill };

    /* Every snippet goes through the snippet compiler, the counters' and timers' too. */
    dynp_count_snip(s->rows[pt->row].timed, words, cv, &count);
    const dyn_snippet_t none = { NULL, 0, 0 };
    const dyn_snippet_t *pre = pt->before.nodes ? &pt->before : &count;
    /* A copy for its call sites only: nothing at its entry. */
    if (pt->reloc && pt->before.nodes == NULL && pt->nsites > 0)
        pre = &none;
    if (pt->reloc)
        return emit_reloc(s, pt, at, pre,
            pt->after.nodes != NULL ? &pt->after : s->rows[pt->row].timed ? &st : NULL, out,
            cap);
    if (pt->call_len) {
        t.shape = PT_TRAMP_CALL_NEXT;
        t.spill = 0;
        t.call_len = pt->call_len;
        t.before = tramp_snip(pt, pre, 0);
        return pt_tramp_emit(&t, at, out, cap, &pt->ret_at);
    }
    if (pt->call_ret || pt->whole || pt->tail || pt->rlen) {
        /* A timer stop runs where a ret's would: the flags are dead at an ABI exit. */
        uint8_t fl = pt->save_flags ? ARCH_FLAGS_STATUS : 0;
        t.shape = PT_TRAMP_OWN;
        t.call_ret = pt->call_ret;
        t.tail = pt->tail;
        if (pt->kind != PT_EXIT)
            t.before = tramp_snip(pt, pre, 0);
        if (pt->whole && pt->after.nodes != NULL)
            t.after = tramp_snip(pt, &pt->after, 1); /* the point's own, before the ret */
        else if (pt->kind == PT_EXIT && pt->before.nodes != NULL)
            t.after = tramp_snip(pt, &pt->before, 0); /* the point's own, on the way out */
        else if (pt->kind == PT_EXIT || pt->whole)
            t.after = (pt_snip_t) { &stop, 1, 0, { 0, 0, fl, !fl } };
        if (pt->noret)
            t.after.ctx = snip_ctx(pt, 0); /* before a call: not an ABI return */
        if (pt->rlen) {
            t.rbytes = pt->rbytes;
            t.rlen = pt->rlen;
            t.rninsns = pt->rninsns;
            t.raddr = pt->raddr;
        }
        return pt_tramp_emit(&t, at, out, cap, NULL);
    }
    /* A short entry reached through padding (pt->pad) replaces fewer than 5 bytes. */
    t.shape = pt->kind == PT_EXIT ? PT_TRAMP_EXIT
        : pt->after.nodes != NULL ? PT_TRAMP_CALL
                                  : PT_TRAMP_BEFORE;
    t.padded = 1;
    t.before = tramp_snip(pt, pt->before.nodes ? &pt->before : pt->kind == PT_EXIT ? &st : pre, 0);
    t.after = tramp_snip(pt, &pt->after, 1);
    return pt_tramp_emit(&t, at, out, cap, &pt->ret_at);
}

static int
point_cmp(const void *a, const void *b)
{
    const point_t *x = a, *y = b;
    return x->entry < y->entry ? -1 : x->entry > y->entry;
}

/* The candidate whose replaced bytes hold PC after their first, or NULL (cand sorted). */
static const point_t *
cand_inside(const dyn_session_t *s, uint64_t pc)
{
    size_t lo = 0, hi = s->ncand;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->cand[mid].entry < pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* s->cand[lo - 1] is the last entry below PC. */
    if (lo > 0 && pc < s->cand[lo - 1].entry + s->cand[lo - 1].len)
        return &s->cand[lo - 1];
    return NULL;
}

/*
 * A thread stopped inside the bytes a jump would replace is single-stepped until it is
 * out of them (a few instructions); one that cannot be is left, and its point refused.
 */
static void
step_threads_out(dyn_session_t *s)
{
    dyn_thread_info_t *ti;
    size_t nt = 0;

    if (dyn_proc_threads(s->p, NULL, 0, &nt) < 0 || nt == 0)
        return;
    ti = calloc(nt, sizeof(*ti));
    if (ti == NULL || dyn_proc_threads(s->p, ti, nt, &nt) < 0) {
        free(ti);
        return;
    }
    for (size_t i = 0; i < nt; i++) {
        const point_t *pt;
        for (int k = 0; k < 4 && (pt = cand_inside(s, ti[i].pc)) != NULL; k++) {
            size_t n1 = 0;
            if (dyn_proc_leave(
                    s->p, ti[i].tid, pt->entry + 1, pt->entry + pt->len, LEAVE_TRIES)
                < 0)
                break;
            /* Where every thread is now (same order): it may be in another's bytes. */
            if (dyn_proc_threads(s->p, ti, nt, &n1) < 0 || n1 != nt)
                break;
        }
    }
    free(ti);
}

/*
 * The header of the trampoline memory (what dyn clean needs to take it out): into CODE
 * (the image of the whole memory, written later), or straight into the process.
 */
static int
write_header(const dyn_session_t *s, uint8_t *code)
{
    dyn_tramp_hdr_t h;

    memset(&h, 0, sizeof(h));
    memcpy(h.magic, DYN_TRAMP_MAGIC, sizeof(h.magic));
    h.size = s->code_size;
    h.ctr = s->ctr;
    h.ctr_size = s->ctr_size;
    h.flags = s->has_calls ? DYN_HDR_CALLS : 0;
    h.dyn_pid = (uint32_t)getpid();
    if (code != NULL) {
        memcpy(code, &h, sizeof(h));
        return 0;
    }
    return dyn_proc_write(s->p, s->code, &h, sizeof(h));
}

int
dyn_tramp_forget_counters(dyn_proc_t *p, uint64_t code)
{
    static const uint64_t zero[2];

    return dyn_proc_write(p, code + offsetof(dyn_tramp_hdr_t, ctr), zero, sizeof(zero));
}

/*
 * Emit the trampolines of every point of a good row into CODE (packed), filling
 * pt->tramp. A point that cannot be emitted makes its row bad; then 1 (emit again).
 */
static int
emit_all(dyn_session_t *s, uint8_t *code, int *again)
{
    uint64_t at = HDR_LEN;

    *again = 0;
    for (size_t i = 0; i < s->npts; i++) {
        point_t *pt = &s->pts[i];
        int n;
        if (s->rows[pt->row].bad || pt->kind == PT_RSITE)
            continue;
        n = emit_tramp(s, pt, s->code + at, s->ctr + 8 * ROW_WORDS * pt->row, code + at,
            s->code_size - at);
        if (n < 0) {
            QP_CHECK(dynp_row_bad(s, pt->row,
                pt->kind == PT_EXIT ? "the code before a ret cannot be relocated"
                                    : "its instructions cannot be relocated to the "
                                      "trampoline"));
            if (!pt->reloc) {
                *again = 1;
                return 0;
            }
            /* (A copy: not emitted again from the start, its bytes are left unused.) */
            continue;
        }
        pt->tramp = s->code + at;
        at += (uint64_t)n;
    }
    s->code_used = at;
    /* Return sites: into their procedure's copy (the relocated point of their row). */
    for (size_t i = 0; i < s->npts; i++) {
        point_t *pt = &s->pts[i];
        if (s->rows[pt->row].bad || pt->kind != PT_RSITE)
            continue;
        /* Its procedure's entry point (s->pts sorted by address). */
        uint64_t e = s->prog->procs[pt->proc].entry + s->bias;
        size_t lo = 0, hi = s->npts;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (s->pts[mid].entry < e)
                lo = mid + 1;
            else
                hi = mid;
        }
        pt->tramp = 0;
        for (; lo < s->npts && s->pts[lo].entry == e && pt->tramp == 0; lo++)
            if (s->pts[lo].reloc && s->pts[lo].row == pt->row && s->pts[lo].map != NULL)
                pt->tramp = pt_proc_at(s->pts[lo].map, s->pts[lo].nmap, pt->entry);
        if (pt->tramp == 0) {
            QP_CHECK(dynp_row_bad(
                s, pt->row, "a call's return site has no place in the copy"));
            *again = 1;
            return 0;
        }
    }
    return 0;
}

/*
 * PT's original bytes back into P: the entry's, then the padding's (CHECK: only what
 * still holds our patch; someone else may have changed it since). 0, or QP_EIO.
 */
int
dynp_unpatch(dyn_proc_t *p, const point_t *pt, int check)
{
    uint8_t mem[JMP_LEN + 1]; /* (dynp_patch_len: at most a jump after a kept byte) */
    size_t n = dynp_patch_len(pt);
    int rc = 0;

    if (!check || dyn_proc_read(p, pt->entry, mem, n) < 0 || memcmp(mem, pt->patch, n) == 0)
        if (dyn_proc_write(p, pt->entry, pt->orig, n) < 0)
            rc = QP_EIO;
    if (pt->pad != 0
        && (!check || dyn_proc_read(p, pt->pad, mem, JMP_LEN) < 0
            || memcmp(mem, pt->pad_patch, JMP_LEN) == 0)
        && dyn_proc_write(p, pt->pad, pt->pad_orig, JMP_LEN) < 0)
        rc = QP_EIO;
    return rc;
}

/*
 * Is the original code of the procedure of PT (a return site whose jump covers the next
 * instructions) idle: no word of W (NW, sorted: pcs, return addresses and signal frames
 * near the top of each stack) inside it but its entry and its return sites (s->cand
 * sorted), which lead into the copy?
 */
static int
reloc_idle(dyn_session_t *s, const point_t *pt, const uint64_t *w, size_t nw)
{
    const cfg_prog_t *prog = s->prog;
    uint32_t parts[64];
    int nparts = dynp_parts_of(s, pt->proc, parts, 64);

    if (nparts < 0)
        return 0;
    for (int k = 0; k < nparts; k++) {
        const cfg_proc_t *p = &prog->procs[parts[k]];
        if (p->nblocks == 0)
            continue;
        uint64_t lo = prog->blocks[p->block].start + s->bias,
                 hi = prog->blocks[p->block + p->nblocks - 1].end + s->bias;
        for (size_t i = cfg_u64_lower_bound(w, nw, lo); i < nw && w[i] < hi; i++) {
            if (w[i] == prog->procs[pt->proc].entry + s->bias)
                continue;
            size_t lo2 = 0, hi2 = s->ncand;
            while (lo2 < hi2) {
                size_t mid = lo2 + (hi2 - lo2) / 2;
                if (s->cand[mid].entry < w[i])
                    lo2 = mid + 1;
                else
                    hi2 = mid;
            }
            if (lo2 < s->ncand && s->cand[lo2].entry == w[i]
                && s->cand[lo2].kind == PT_RSITE && s->cand[lo2].row == pt->row)
                continue;
            return 0;
        }
    }
    return 1;
}

/* Reads of process memory in windows (points are checked in address order: one read
 * per window instead of one per point). */
#define RD_WINDOW 65536
typedef struct rd_cache {
    uint64_t lo, hi; /* what buf holds */
    uint8_t *buf;    /* RD_WINDOW bytes, or NULL: read directly */
} rd_cache_t;

static int
read_cached(dyn_proc_t *p, rd_cache_t *c, uint64_t addr, void *out, size_t len)
{
    if (c->buf != NULL && (addr < c->lo || addr + len > c->hi)) {
        /* A window from ADDR, shorter where the mapping ends (a failed read). */
        c->lo = c->hi = addr;
        for (size_t n = RD_WINDOW; n >= 4096 && c->hi == c->lo; n /= 2)
            if (dyn_proc_read(p, addr, c->buf, n) == 0)
                c->hi = addr + n;
    }
    if (c->buf == NULL || addr < c->lo || addr + len > c->hi)
        return dyn_proc_read(p, addr, out, len);
    memcpy(out, c->buf + (addr - c->lo), len);
    return 0;
}

/* Refuse the rows of points (V, N) whose slot is in the code of a neighbour whose row
 * was refused (dep1): the slot's bytes would run as its original. */
static int
deps_bad(dyn_session_t *s, const point_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].dep1 != 0 && s->rows[v[i].dep1 - 1].bad && !s->rows[v[i].row].bad)
            QP_CHECK(dynp_row_bad(s, v[i].row,
                "the neighbour whose code its short jump goes through was refused"));
    return 0;
}

int
dyn_session_install(dyn_session_t *s)
{

    uint64_t *w = NULL, lo = UINT64_MAX, hi = 0, maxend = 0;
    size_t nw = 0, k = 0;
    uint8_t *code = NULL;
    int rc, again;

    if (s == NULL || s->installed || !dyn_proc_is_stopped(s->p))
        return QP_EINVAL;
    if (s->ncand > 1) /* (cand is NULL when empty: qsort wants an array) */
        qsort(s->cand, s->ncand, sizeof(*s->cand), point_cmp);
    step_threads_out(s);
    QP_CHECK(dyn_proc_words(s->p, STACK_SCAN, &w, &nw));
    s->pts = calloc(s->ncand ? s->ncand : 1, sizeof(*s->pts));
    if (s->pts == NULL) {
        free(w);
        return QP_ENOMEM;
    }
    /* A row goes in whole or not at all (a timer needs its entry and every exit). */
    rd_cache_t rd = { 0, 0, malloc(RD_WINDOW) };
    for (size_t i = 0; i < s->ncand; i++) {
        point_t *pt = &s->cand[i];
        uint8_t mem[32];
        const char *why = NULL;
        if (pt->entry < maxend)
            why = "its bytes overlap another point's";
        else if ((pt->entry & 4095) > 4096 - dynp_patch_len(pt))
            why = "its first 5 bytes cross a page boundary (the jump could not be "
                  "written "
                  "in one piece)";
        else if (any_in(w, nw, pt->entry + 1, pt->entry + pt->len))
            why = "a thread is inside the bytes to patch (pc or signal frame): try again";
        else if (pt->wide && !reloc_idle(s, pt, w, nw))
            why = "a thread is inside its code (pc or signal frame), where a return site's "
                  "jump covers the next instructions: try again";
        else if (read_cached(s->p, &rd, pt->entry, mem, pt->len) < 0) {
            if (errno == ESRCH) { /* the process ended: nothing to install into */
                free(w);
                free(rd.buf);
                return QP_EIO;
            }
            why = "its code cannot be read";
        } else if (memcmp(mem, pt->orig, pt->len) != 0)
            why = "its code in memory differs from the file (patched already?)";
        else if (pt->pad != 0
            && (dyn_proc_read(s->p, pt->pad, mem, JMP_LEN) < 0
                || memcmp(mem, pt->pad_orig, JMP_LEN) != 0))
            why = "the padding its short jump goes through differs from the file";
        if (pt->entry + pt->len > maxend)
            maxend = pt->entry + pt->len;
        if (why != NULL && (rc = dynp_row_bad(s, pt->row, why)) < 0) {
            free(w);
            free(rd.buf);
            return rc;
        }
    }
    free(w);
    free(rd.buf);
    if ((rc = deps_bad(s, s->cand, s->ncand)) < 0)
        return rc;
    /* A caller that takes a refusal for a failure: nothing written (it would only be
     * taken out again, the process stopped meanwhile). */
    if (s->all_or_nothing && s->nref > 0)
        return 0;
    for (size_t i = 0; i < s->ncand; i++) {
        point_t *pt = &s->cand[i];
        if (s->rows[pt->row].bad)
            continue;
        s->pts[k++] = *pt;
        lo = pt->entry < lo ? pt->entry : lo;
        hi = pt->entry + pt->len > hi ? pt->entry + pt->len : hi;
        if (pt->pad != 0) {
            lo = pt->pad < lo ? pt->pad : lo;
            hi = pt->pad + JMP_LEN > hi ? pt->pad + JMP_LEN : hi;
        }
    }
    s->npts = k;
    if (k == 0) {
        s->installed = 1;
        return 0;
    }
    /* Room: a trampoline's moved code and jumps, and its snippets as they compile. */
    {
        uint64_t need = HDR_LEN + k * TRAMP_MAX;
        for (size_t i = 0; i < k; i++) {
            const point_t *pt = &s->pts[i];
            if (pt->reloc)
                need += reloc_size(s, pt); /* the copy */
            for (int a = 0; a < 2; a++) {
                const dyn_snippet_t *sn = a ? &pt->after : &pt->before;
                arch_snip_ctx_t c = snip_ctx(pt, a);
                /* Sized where the trampolines will be (near the point: the variables
                 * are in rel32 reach from there, not from 0); a length that cannot be
                 * known is given room anyway (emitting then says what is wrong). */
                pt_snip_t ps = { sn->nodes, sn->n, sn->root, c };
                int n = pt_snip_size(&ps, pt->entry);
                need += n > 0 ? (uint64_t)n : sn->nodes ? 4096 : 0;
            }
        }
        s->code_size = (need + 4095) & ~(uint64_t)4095;
    }
    rc = dyn_space_map_near_avoid(s->p, lo, hi, s->code_size, ED_PROT_R | ED_PROT_X, -1,
                                  s->avoid, s->navoid, &s->code);
    if (rc < 0)
        return rc;
    /* Marked at once: dyn clean finds it by this header if dyn dies from here on. */
    if ((rc = write_header(s, NULL)) < 0)
        goto fail;
    if ((rc = counters_alloc(s, s->nrows)) < 0)
        goto fail;
    code = calloc(1, s->code_size);
    if (code == NULL) {
        rc = QP_ENOMEM;
        goto fail;
    }
    /* Trampolines, packed; a row with a point that cannot be relocated is refused. */
    do {
        if ((rc = emit_all(s, code, &again)) < 0 || (rc = deps_bad(s, s->pts, s->npts)) < 0)
            goto fail;
    } while (again);
    k = 0;
    for (size_t i = 0; i < s->npts; i++)
        if (!s->rows[s->pts[i].row].bad)
            s->pts[k++] = s->pts[i];
    s->npts = k;
    for (size_t i = 0; i < s->npts; i++)
        s->has_calls |= s->pts[i].kind == PT_CALL;
    if ((rc = write_header(s, code)) < 0
        || (rc = dyn_proc_write(s->p, s->code, code, s->code_used)) < 0)
        goto fail;
    /*
     * The patches, last: until here the process is unchanged but for new memory. Only
     * the 5 bytes of the jump are written (the rest of the replaced bytes is never run
     * once it is in), in one write within one page, so that a dyn killed at any moment
     * leaves each point either as it was or with its whole jump.
     */
    for (size_t i = 0; i < s->npts; i++) {
        point_t *pt = &s->pts[i];
        if (pt->pad != 0) {
            /* The jump in the padding first, then the entry's jmp rel8 to it. */
            if ((rc = pt_tramp_patch(pt->pad, pt->tramp, pt->pad_patch, sizeof(pt->pad_patch)))
                    < 0
                || (rc = dyn_proc_write(s->p, pt->pad, pt->pad_patch, JMP_LEN)) < 0) {
                s->npts = i;
                goto undo;
            }
            memcpy(pt->patch, pt->orig, pt->len);
            pt->patch[0] = 0xeb;
            if (!pt->pun) /* (a pun's displacement is its neighbour's first byte) */
                pt->patch[1] = (uint8_t)(int8_t)(int64_t)(pt->pad - (pt->entry + SHORT_LEN));
            rc = dyn_proc_write(s->p, pt->entry, pt->patch, dynp_patch_len(pt));
        } else if (pt->keep_first) {
            /* The first byte kept: it prefixes the jump (a REX prefix on jmp rel32). */
            pt->patch[0] = pt->orig[0];
            if ((rc = pt_tramp_patch(pt->entry + 1, pt->tramp, pt->patch + 1,
                     sizeof(pt->patch) - 1)) >= 0)
                rc = dyn_proc_write(s->p, pt->entry, pt->patch, JMP_LEN + 1);
        } else {
            if ((rc = pt_tramp_patch(pt->entry, pt->tramp, pt->patch, sizeof(pt->patch))) >= 0)
                rc = dyn_proc_write(s->p, pt->entry, pt->patch, JMP_LEN);
        }
        if (rc < 0) {
            /* Take back what is in: every patch before this one (and its padding). */
            if (pt->pad != 0)
                dyn_proc_write(s->p, pt->pad, pt->pad_orig, JMP_LEN);
            s->npts = i;
            goto undo;
        }
    }
    free(code);
    s->installed = 1;
    return 0;
undo:
    for (size_t i = 0; i < s->npts; i++)
        dynp_unpatch(s->p, &s->pts[i], 0);
fail : {
    int saved = errno;
    free(code);
    if (s->ctr != 0)
        dyn_space_free(s->p, s->ctr, s->ctr_size);
    dyn_space_free(s->p, s->code, s->code_size);
    s->code = s->ctr = 0;
    s->npts = 0;
    s->has_calls = 0;
    errno = saved;
}
    return rc;
}
