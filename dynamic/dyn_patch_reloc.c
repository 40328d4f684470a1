/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Live patching, procedures relocated whole (see dyn_patch.c): where a procedure's
 * exits do not fit in place, its copy is the trampoline and its return sites jump
 * into it; choosing timed procedures (in place or whole).
 */
#include "config.h"

#include "dynamic/dyn_patch_priv.h"

/*****************************************************************************
 * Procedures relocated whole: where a procedure's exits do not fit in place (too short,
 * shared, jumped into by other procedures), it runs as a copy with the snippets in it
 * (patch/'s pt_proc_emit), entered by the jump at its entry; each call in the copy
 * pushes its original return address, and a jump at each return site brings the callee
 * back into the copy. The original keeps every other byte: a thread already inside it,
 * or another procedure jumping into its middle, runs the original code, unmeasured.
 */

/* Is link address A the target of a branch from another procedure into the middle of
 * the procedure whose code holds it? (The targets, collected once.) */
static int
foreign_target(dyn_session_t *s, uint64_t a, int *err)
{
    const cfg_prog_t *prog = s->prog;
    *err = 0;
    if (!s->foreign_done) {
        size_t n = 0;
        s->foreign = malloc((prog->nedges + 1) * sizeof(*s->foreign));
        if (s->foreign == NULL) {
            *err = QP_ENOMEM;
            return 0;
        }
        for (uint32_t e = 0; e < prog->nedges; e++) {
            const cfg_edge_t *ed = &prog->edges[e];
            if (ed->target == 0)
                continue;
            const cfg_proc_t *to = cfg_proc_at(prog, ed->target);
            const cfg_proc_t *from = cfg_proc_at(prog, prog->blocks[ed->from].start);
            if (to != NULL && to != from && to->entry != ed->target)
                s->foreign[n++] = ed->target;
        }
        qsort(s->foreign, n, sizeof(*s->foreign), cfg_u64_cmp);
        s->nforeign = n;
        s->foreign_done = 1;
    }
    size_t i = cfg_u64_lower_bound(s->foreign, s->nforeign, a);
    return i < s->nforeign && s->foreign[i] == a;
}

static int
run_cmp(const void *a, const void *b)
{
    const pt_run_t *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/*
 * Procedure I's code as runs for pt_proc_emit: its blocks and its cold fragments' (PARTS,
 * NPARTS), by address, those back to back joined. Into *OUT (malloc'd); their number, or
 * QP_E*.
 */
int
dynp_proc_runs(const dyn_session_t *s, const uint32_t *parts, int nparts, pt_run_t **out)
{
    const cfg_prog_t *prog = s->prog;
    size_t n = 0, cap = 0;
    uint32_t b;
    int k;
    pt_run_t *v;

    FOR_BLOCKS(prog, parts, nparts, k, b)
    cap++;
    if ((v = malloc((cap + 1) * sizeof(*v))) == NULL)
        return QP_ENOMEM;
    FOR_BLOCKS(prog, parts, nparts, k, b)
    {
        const cfg_block_t *bl = &prog->blocks[b];
        size_t avail;
        const uint8_t *bytes = cfg_image_ptr(prog->img, bl->start, &avail);
        if (bytes == NULL || avail < bl->end - bl->start) {
            free(v);
            return QP_EINVAL;
        }
        v[n++] = (pt_run_t) { bl->start + s->bias, bytes, (uint32_t)(bl->end - bl->start) };
    }
    qsort(v, n, sizeof(*v), run_cmp);
    size_t m = 0;
    for (size_t r = 0; r < n; r++) {
        if (m > 0 && v[m - 1].addr + v[m - 1].len == v[r].addr
            && v[m - 1].bytes + v[m - 1].len == v[r].bytes)
            v[m - 1].len += v[r].len;
        else if (m > 0 && v[m - 1].addr + v[m - 1].len > v[r].addr) {
            free(v); /* overlapping blocks: not one reading of the bytes */
            return QP_EINVAL;
        } else
            v[m++] = v[r];
    }
    *out = v;
    return (int)m;
}

/* The blocks of PARTS as one index range per part, for a visited set. */
size_t
dynp_part_block_index(
    const cfg_prog_t *prog, const uint32_t *parts, int nparts, uint32_t b)
{
    size_t base = 0;
    for (int k = 0; k < nparts; k++) {
        const cfg_proc_t *p = &prog->procs[parts[k]];
        if (b >= p->block && b < p->block + p->nblocks)
            return base + (b - p->block);
        base += p->nblocks;
    }
    return SIZE_MAX;
}

/*
 * The return site X (link address) of a call in procedure I (its parts PARTS, NPARTS)
 * for a jump into the copy: why not, or NULL; *WIDE: the jump covers more than X's
 * block (the blocks after it, of the procedure, or padding). XS (NXS, sorted): every
 * return site of the procedure, none of which may be under the jump but X.
 */
static const char *
rsite_ok(const dyn_session_t *s, uint32_t i, const uint32_t *parts, int nparts,
    uint64_t x, const uint64_t *xs, size_t nxs, int *wide)
{
    const cfg_prog_t *prog = s->prog;
    uint32_t b = cfg_block_at(prog, x);
    uint64_t a;

    *wide = 0;
    if (b == CFG_NONE || prog->blocks[b].start != x)
        return "a call's return site does not start a block";
    if (dynp_proc_entry_in(prog, x + 1, x + JMP_LEN) || !dynp_pad_free(s, x, JMP_LEN))
        return "a call's return site shares its bytes with another procedure";
    if (((x + s->bias) & 4095) > 4096 - JMP_LEN)
        return "a call's return site crosses a page boundary";
    size_t j = cfg_u64_lower_bound(xs, nxs, x + 1);
    if (j < nxs && xs[j] < x + JMP_LEN)
        return "two return sites within 5 bytes";
    for (a = prog->blocks[b].end; a < x + JMP_LEN;) {
        uint32_t c = cfg_block_at(prog, a);
        *wide = 1;
        if (c == CFG_NONE) /* padding after a ret or a jmp, the rest of it */
            return dynp_spill_ok(s, a, x + JMP_LEN - a)
                ? NULL
                : "a call's return site is too short for a jump into the copy";
        const cfg_block_t *cb = &prog->blocks[c];
        int mine = 0;
        for (int k = 0; k < nparts; k++)
            mine |= cb->proc == parts[k];
        if (cb->start != a || !mine || c == prog->procs[i].block)
            return "a call's return site is too short for a jump into the copy";
        a = cb->end;
    }
    return NULL;
}

/*
 * Whether the copy of the procedure of PT (PARTS, NPARTS) can be made (emitted once
 * where the procedure is, with a counter and a timer): why not, or NULL with PT->rsize
 * its length. *ERR: QP_ENOMEM.
 */
static const char *
reloc_trial(const dyn_session_t *s, const uint32_t *parts, int nparts, point_t *pt,
    int *err)
{
    pt_run_t *runs;
    int n = dynp_proc_runs(s, parts, nparts, &runs);
    if (n < 0) {
        *err = n == QP_ENOMEM ? n : 0;
        return "its blocks overlap (not one reading of its bytes)";
    }
    uint64_t e = s->prog->procs[pt->proc].entry + s->bias;
    arch_snip_t cv[COUNT_NODES], stop = { .op = ARCH_SN_TIMER_STOP, .a = ARCH_SNIP_NONE,
        .b = ARCH_SNIP_NONE, .c = ARCH_SNIP_NONE, .imm = (int64_t)e };
    dyn_snippet_t count;
    dynp_count_snip(1, e, cv, &count);
    pt_proc_t p = { runs, (size_t)n, e,
        { count.nodes, count.n, count.root, pt_point_ctx(PT_POINT_ENTRY, ARCH_FLAGS_STATUS) },
        { &stop, 1, 0, pt_point_ctx(PT_POINT_EXIT, ARCH_FLAGS_STATUS) },
        { &stop, 1, 0, pt_point_ctx(PT_POINT_INSN, ARCH_FLAGS_STATUS) }, NULL, 0, NULL, 0,
        NULL, 0, NULL, 0, NULL, 0, s->decoded };
    if (dynp_proc_block_ends(s, parts, nparts, &p) < 0) {
        free(runs);
        *err = QP_ENOMEM;
        return "out of memory";
    }
    size_t cap = pt_proc_size(&p, 256), mapcap = pt_proc_mapcap(&p), nmap;
    uint8_t *out = malloc(cap + 1);
    pt_map_t *map = malloc((mapcap + 1) * sizeof(*map));
    const char *why = NULL;
    if (out == NULL || map == NULL)
        *err = QP_ENOMEM;
    else if ((n = pt_proc_emit(&p, p.entry, out, cap, map, mapcap, &nmap)) < 0)
        why = n == QP_EUNSUPP ? "an instruction cannot run in a copy (a call to the next "
                                "one or into its middle, a branch into an instruction, an "
                                "indirect jump whose operand cannot be translated)"
                              : "its instructions cannot be relocated to the trampoline";
    else
        pt->rsize = (uint32_t)n;
    free(out);
    free(map);
    free(runs);
    dynp_proc_block_ends_free(&p);
    return why;
}

/* Why the call that ends block BL makes its procedure catch exceptions (a C++ catch
 * clause calls __cxa_begin_catch), or NULL. */
const char *
dynp_catches(const dyn_session_t *s, const cfg_block_t *bl)
{
    arch_insn_t in;
    uint64_t a = bl->start;
    while (a < bl->end && cfg_image_decode(s->prog->img, a, 0, &in) >= 0 && a + in.len < bl->end)
        a += in.len;
    if (a >= bl->end || in.kind != ARCH_KIND_CALL)
        return NULL;
    const cfg_proc_t *c = cfg_proc_at(s->prog, in.target);
    return c != NULL && c->name != NULL && strstr(c->name, "__cxa_begin_catch") != NULL
        ? "it catches exceptions (the handler would go on in the original code, past the "
          "copy's exits)"
        : NULL;
}

/* Is link address A in a block of PARTS (none of those other procedures reach, SEEN)? */
static int
own_byte(const dyn_session_t *s, const uint32_t *parts, int nparts, const uint8_t *seen,
    uint64_t a)
{
    uint32_t b = cfg_block_at(s->prog, a);
    if (b == CFG_NONE)
        return 0;
    size_t x = dynp_part_block_index(s->prog, parts, nparts, b);
    return x != SIZE_MAX && (seen == NULL || !seen[x]);
}

/*
 * The return site X of a call in the procedure of PARTS for a jmp rel8 (to a slot,
 * find_slot): its 2 bytes in its own blocks, on instruction boundaries, no other return
 * site (XS, NXS) or procedure entry under them, not across a page.
 */
static int
short_rsite_ok(const dyn_session_t *s, const uint32_t *parts, int nparts, uint64_t x,
    const uint64_t *xs, size_t nxs)
{
    const cfg_prog_t *prog = s->prog;
    uint32_t b = cfg_block_at(prog, x), c = cfg_block_at(prog, x + 1);
    size_t j = cfg_u64_lower_bound(xs, nxs, x + 1);
    if (b == CFG_NONE || prog->blocks[b].start != x || !own_byte(s, parts, nparts, NULL, x)
        || !own_byte(s, parts, nparts, NULL, x + 1)
        || (c != b && prog->blocks[c].start != x + 1))
        return 0;
    if (j < nxs && xs[j] == x + 1)
        return 0;
    return !dynp_proc_entry_in(prog, x + 1, x + SHORT_LEN)
        && dynp_pad_free(s, x, SHORT_LEN) && ((x + s->bias) & 4095) <= 4096 - SHORT_LEN;
}

/*
 * The slot a lender kept (dyn_session_want_slot, s->nb_slot) for PT's jmp rel8 at link
 * address NEAR, when in its reach: 1 with PT's pad and pad_orig set (the slot given),
 * else 0.
 */
static int
kept_slot(dyn_session_t *s, uint64_t near, point_t *pt)
{
    uint64_t a = s->nb_slot;
    if (a == 0 || a < near + SHORT_LEN - 128 || a > near + SHORT_LEN + 127)
        return 0;
    s->nb_slot = 0;
    pt->pad = a + s->bias;
    memcpy(pt->pad_orig, s->nb_orig, JMP_LEN);
    return 1;
}

/*
 * Is link address A a 1-byte procedure (a lone ret) with another procedure right after
 * it, whose first byte is a REX prefix (0x40-0x4f)? Its jmp rel8 opcode alone then
 * leads, through that byte as the displacement, to A + 2 + (int8_t)byte, in the
 * neighbour's code: a slot there when the neighbour is relocated whole with its first
 * byte kept as its entry jump's prefix (e9patch's punned jumps).
 */
int
dynp_pun_site(const dyn_session_t *s, uint64_t a)
{
    const cfg_prog_t *prog = s->prog;
    const cfg_proc_t *p = cfg_proc_at(prog, a), *q = cfg_proc_at(prog, a + 1);
    uint32_t b = cfg_block_at(prog, a);
    size_t avail;
    const uint8_t *nx = cfg_image_ptr(prog->img, a + 1, &avail);
    return p != NULL && p->entry == a && b != CFG_NONE && prog->blocks[b].end == a + 1
        && prog->blocks[b].last_kind == ARCH_KIND_RET && q != NULL && q->entry == a + 1
        && nx != NULL && avail > 0 && nx[0] >= 0x40 && nx[0] <= 0x4f;
}

/*
 * The return site X of a call in the procedure of PARTS on a page's last byte (even a
 * jmp rel8 would cross: it could not be written in one piece): its byte alone as a jmp
 * rel8 opcode, the next byte (its own code, kept as it is) the displacement, to a slot
 * of its own original code there (slot_at; e9patch's punned jumps). Whether X fits.
 */
static int
pun_rsite_ok(const dyn_session_t *s, const uint32_t *parts, int nparts, uint64_t x,
    const uint64_t *xs, size_t nxs)
{
    const cfg_prog_t *prog = s->prog;
    uint32_t b = cfg_block_at(prog, x);
    size_t j = cfg_u64_lower_bound(xs, nxs, x + 1);
    return ((x + s->bias) & 4095) == 4095 && b != CFG_NONE && prog->blocks[b].start == x
        && own_byte(s, parts, nparts, NULL, x) && own_byte(s, parts, nparts, NULL, x + 1)
        && !(j < nxs && xs[j] == x + 1) && !dynp_proc_entry_in(prog, x + 1, x + SHORT_LEN)
        && dynp_pad_free(s, x, SHORT_LEN);
}

/* A slot at exactly link address A (as find_slot, for a punned jump): why not, or NULL
 * with PT's pad and pad_orig set and the slot taken. */
static const char *
slot_at(dyn_session_t *s, const uint32_t *parts, int nparts, const uint8_t *seen,
    const uint64_t *rng, size_t nrng, uint64_t a, point_t *pt)
{
    int ok = ((a + s->bias) & 4095) <= 4096 - JMP_LEN && dynp_pad_free(s, a, JMP_LEN);
    for (uint64_t x = a; ok && x < a + JMP_LEN; x++)
        ok = own_byte(s, parts, nparts, seen, x);
    for (size_t r = 0; ok && r + 1 < nrng; r += 2)
        ok = a + JMP_LEN <= rng[r] || rng[r + 1] <= a;
    size_t avail;
    const uint8_t *bytes = ok ? cfg_image_ptr(s->prog->img, a, &avail) : NULL;
    if (bytes == NULL || avail < JMP_LEN || dynp_pad_take(s, a) < 0)
        return "no slot where a punned jump leads (the byte after it its displacement)";
    pt->pad = a + s->bias;
    memcpy(pt->pad_orig, bytes, JMP_LEN);
    return NULL;
}

/*
 * A slot for the 5-byte jump of PT's jmp rel8 at link address NEAR: 5 bytes of the
 * procedure's own original code (PARTS; none SEEN: no other procedure runs them) within
 * the jmp's reach, clear of the bytes its jumps take (RNG: NRNG / 2 ranges [lo, hi)) and
 * of other slots and padding taken. Nothing runs there once the copy is in and the
 * original is idle (checked at install: PT's wide). Why not, or NULL with PT's pad and
 * pad_orig set and the slot taken.
 */
static const char *
find_slot(dyn_session_t *s, const uint32_t *parts, int nparts, const uint8_t *seen,
    const uint64_t *rng, size_t nrng, uint64_t near, point_t *pt)
{
    uint64_t from = near + SHORT_LEN - 128, to = near + SHORT_LEN + 127;
    for (uint64_t a = from; a <= to; a++) {
        int ok = ((a + s->bias) & 4095) <= 4096 - JMP_LEN && dynp_pad_free(s, a, JMP_LEN);
        for (uint64_t x = a; ok && x < a + JMP_LEN; x++)
            ok = own_byte(s, parts, nparts, seen, x);
        for (size_t r = 0; ok && r + 1 < nrng; r += 2)
            ok = a + JMP_LEN <= rng[r] || rng[r + 1] <= a;
        if (!ok)
            continue;
        size_t avail;
        const uint8_t *bytes = cfg_image_ptr(s->prog->img, a, &avail);
        if (bytes == NULL || avail < JMP_LEN || dynp_pad_take(s, a) < 0)
            continue;
        pt->pad = a + s->bias;
        memcpy(pt->pad_orig, bytes, JMP_LEN);
        return NULL;
    }
    return "a return site or its entry is too short for a jump, with no room within a "
           "short jump's reach";
}

/*
 * Procedure I relocated whole (a row added for NAME, TIMED: a timer's, else the
 * caller's snippets; *ROW): its entry jump, then a jump at the return site of each
 * call. Why not (the session as it was), or NULL with the candidates added, the entry's
 * first. *ERR: QP_ENOMEM.
 */
const char *
dynp_check_reloc(dyn_session_t *s, uint32_t i, const char *name, int timed, int exits,
    uint32_t *rowp, int *err)
{
    const cfg_prog_t *prog = s->prog;
    const cfg_proc_t *pr = &prog->procs[i];
    size_t ncand0 = s->ncand, nrows0 = s->nrows, npads0 = s->npads, nblk = 0, nxs = 0;
    uint32_t parts[64], b, row;
    int k, nparts, first_only;
    const char *why;
    point_t pt;
    uint8_t *seen = NULL, *how = NULL;
    uint32_t *todo = NULL, lent[8];
    uint64_t *xs = NULL, *rng = NULL;
    int nlent = 0;

    *err = 0;
    if ((nparts = dynp_parts_of(s, i, parts, 64)) < 0) {
        *err = nparts == QP_ERANGE ? 0 : nparts;
        return "too many cold fragments";
    }
    if ((why = dynp_entry_ok_loop(s, i, 1, &first_only)) != NULL)
        return why;
    if (dynp_has_shadow_stack(s))
        return "its calls would be made with their original return address (the process "
               "has a shadow stack)";
    if ((why = dynp_go_proc_refusal(s, parts, nparts)) != NULL)
        return why;

    int entry_slot = 0;
    /* Lending to a 1-byte procedure right before it: its first byte kept, as the
     * prefix of its jump and that procedure's displacement (dynp_pun_site). */
    int keep = s->nb_want != 0 && s->nb_pun;
    if (keep && (pr->entry != s->nb_want + 1 || ((pr->entry + s->bias) & 4095) > 4096 - JMP_LEN - 1
                    || dynp_entry_insns(s, i, JMP_LEN + 1, ENTRY_COPY, &pt) != NULL))
        return "its entry cannot keep its first byte before its jump";
    const char *cross = keep ? NULL
        : ((pr->entry + s->bias) & 4095) > 4096 - JMP_LEN
        ? "its first 5 bytes cross a page boundary (the jump could not be written in one "
          "piece)"
        : NULL;
    if (!keep
        && (cross != NULL
            || (why = dynp_entry_insns(s, i, JMP_LEN, ENTRY_COPY, &pt)) != NULL)) {
        /* Too short, or across a page: a jmp rel8 to a jump in padding, or else in its
         * own original code (a slot, found once the bytes its other jumps take are
         * known). */
        if (dynp_entry_insns(s, i, SHORT_LEN, ENTRY_COPY, &pt) != NULL)
            return why != NULL ? why : cross;
        if (((pr->entry + s->bias) & 4095) > 4096 - SHORT_LEN)
            return cross;
        entry_slot = dynp_find_pad(s, pr->entry, &pt) != NULL;
        why = NULL;
    }
    pt.kind = PT_ENTRY;
    pt.proc = i;
    pt.name = name;
    pt.reloc = 1;
    pt.keep_first = (uint8_t)keep;
    pt.call_ret = 0;
    pt.save_flags = dynp_entry_save_flags(pr);
    size_t nsucc = 0;
    for (k = 0; k < nparts; k++)
        nblk += prog->procs[parts[k]].nblocks;
    FOR_BLOCKS(prog, parts, nparts, k, b)
    nsucc += prog->blocks[b].nsucc;
    seen = calloc(nblk + 1, 1);
    todo = malloc((nblk + 1) * sizeof(*todo));
    xs = malloc((nblk + nsucc + 1) * sizeof(*xs));
    if (seen == NULL || todo == NULL || xs == NULL) {
        *err = QP_ENOMEM;
        goto out;
    }
    /* What the copy cannot keep inside: tables and jumps of unknown targets, calls
     * into other procedures' code. The return sites; the blocks other procedures jump
     * into (the start of a search of what they run of the original). */
    size_t ntodo = 0;
    int nxlate = 0;
    FOR_BLOCKS(prog, parts, nparts, k, b)
    {
        const cfg_block_t *bl = &prog->blocks[b];
        /* An indirect jump the copy translates at run time (pt_proc_emit): its targets,
         * known or not, are the copy's own code or leave it (the leave snippet first). */
        int xlate = dynp_xlate_block(s, parts, nparts, bl);
        nxlate += xlate;
        for (uint32_t e = 0; e < bl->nsucc && why == NULL; e++) {
            const cfg_edge_t *ed = cfg_block_succ(prog, bl, e);
            if (xlate
                && (ed->kind == CFG_EDGE_TABLE || ed->kind == CFG_EDGE_INDIRECT
                    || ed->kind == CFG_EDGE_UNRESOLVED))
                continue;
            if (ed->kind == CFG_EDGE_TABLE && dynp_is_table_block(prog, bl)
                && ed->to != CFG_NONE
                && dynp_part_block_index(prog, parts, nparts, ed->to) != SIZE_MAX)
                /* A jump table of proven bounds into its own code: each target gets a
                 * jump into the copy, as a return site does (the copy's jump reads the
                 * table, which stays as it is, and lands there). */
                xs[nxs++] = prog->blocks[ed->to].start;
            else if (ed->kind == CFG_EDGE_TABLE || ed->kind == CFG_EDGE_INDIRECT)
                why = "a jump table (its targets would run the original code)";
            else if (ed->kind == CFG_EDGE_UNRESOLVED)
                why = "an indirect jump with unknown targets may leave it";
            else if (ed->kind == CFG_EDGE_TAILCALL
                && (bl->last_kind == ARCH_KIND_CALL || bl->last_kind == ARCH_KIND_CALL_IND)
                && !cfg_block_call_never_returns(prog, bl))
                /* (Else it never returns: the copy's leave snippet runs before it.) */
                why = "a call returns into another procedure's code (its callee is assumed "
                      "never to return)";
            else if (ed->kind == CFG_EDGE_CALLRET && ed->to != CFG_NONE)
                xs[nxs++] = prog->blocks[ed->to].start;
        }
        /* An exception it catches goes on in the original code (its landing pad), past
         * the copy: a ret there would miss its exit's snippet. (A cleanup ends in
         * _Unwind_Resume: no ret runs there, in place or in a copy.) */
        if (why == NULL && exits && bl->last_kind == ARCH_KIND_CALL)
            why = dynp_catches(s, bl);
        if (why != NULL)
            goto out;
        if (b != pr->block && foreign_target(s, bl->start, err)) {
            seen[dynp_part_block_index(prog, parts, nparts, b)] = 1;
            todo[ntodo++] = b;
        }
        if (*err < 0)
            goto out;
    }
    qsort(xs, nxs, sizeof(*xs), cfg_u64_cmp);
    /*
     * The code other procedures run in the original: a call there would return into the
     * copy (through its return site's jump), and a jump under their feet would take
     * them there: either stops the timer it never started.
     */
    while (ntodo > 0 && why == NULL) {
        const cfg_block_t *bl = &prog->blocks[todo[--ntodo]];
        size_t j = cfg_u64_lower_bound(xs, nxs, bl->start > JMP_LEN ? bl->start - JMP_LEN + 1 : 0);
        if (bl->last_kind == ARCH_KIND_CALL || bl->last_kind == ARCH_KIND_CALL_IND)
            why = "other procedures jump into its middle and reach one of its calls";
        else if (j < nxs && xs[j] < bl->end)
            why = "other procedures jump into its middle and reach a return site";
        for (uint32_t e = 0; e < bl->nsucc; e++) {
            const cfg_edge_t *ed = cfg_block_succ(prog, bl, e);
            size_t x;
            if (ed->to == CFG_NONE
                || (x = dynp_part_block_index(prog, parts, nparts, ed->to)) == SIZE_MAX
                || seen[x])
                continue;
            seen[x] = 1;
            todo[ntodo++] = ed->to;
        }
    }
    if (why != NULL)
        goto out;
    /* Each return site: a jump into the copy (covering the blocks after it when the
     * original is idle), else a jmp rel8 to a jump in a slot of its own code. */
    if ((how = calloc(nxs + 1, 1)) == NULL
        || (rng = malloc((2 * nxs + 2) * sizeof(*rng))) == NULL) {
        *err = QP_ENOMEM;
        goto out;
    }
    size_t nrng = 0;
    rng[nrng++] = pr->entry;
    rng[nrng++] = pr->entry + (keep ? JMP_LEN + 1 : pt.pad || entry_slot ? SHORT_LEN : JMP_LEN);
    for (size_t j = 0; j < nxs && why == NULL; j++) {
        int wide;
        if (j > 0 && xs[j] == xs[j - 1])
            continue;
        why = rsite_ok(s, i, parts, nparts, xs[j], xs, nxs, &wide);
        /* A wide jump reaches past its block, maybe into padding: never into bytes
         * another point's jump took (each would break the other, and restoring one
         * would leave the other's bytes). */
        if (why == NULL && wide && !dynp_pad_free(s, xs[j], JMP_LEN))
            why = "a return site's jump would cover padding another jump takes";
        how[j] = why == NULL ? (uint8_t)(1 + wide) : 3;
        if (why != NULL && short_rsite_ok(s, parts, nparts, xs[j], xs, nxs))
            why = NULL;
        else if (why != NULL && pun_rsite_ok(s, parts, nparts, xs[j], xs, nxs)) {
            why = NULL;
            how[j] = 4;
        }
        /* (A pun's next byte is its displacement: no slot over it either.) */
        rng[nrng++] = xs[j];
        rng[nrng++] = xs[j] + (how[j] >= 3 ? SHORT_LEN : JMP_LEN);
    }
    if (why != NULL)
        goto out;
    if (entry_slot) {
        if ((why = find_slot(s, parts, nparts, seen, rng, nrng, pr->entry, &pt)) != NULL
            && (why = dynp_borrow_slot(
                    s, i, pr->entry, timed, &pt, &pt.dep1, &lent[nlent], err))
                == NULL
            && *err == 0) {
            pt.dep1++;
            nlent++;
        }
        if (why != NULL || *err < 0)
            goto out;
        pt.wide = 1;
    }
    if (s->nb_want != 0) {
        /* A slot for a neighbour's short entry too (dynp_with_neighbour). */
        point_t nb;
        memset(&nb, 0, sizeof(nb));
        if (keep) {
            size_t avail;
            const uint8_t *b0 = cfg_image_ptr(prog->img, pr->entry, &avail);
            why = b0 == NULL ? "no bytes in the file"
                             : slot_at(s, parts, nparts, seen, rng, nrng,
                                   pr->entry + 1 + (uint64_t)(int64_t)(int8_t)b0[0], &nb);
        } else
            why = find_slot(s, parts, nparts, seen, rng, nrng, s->nb_want, &nb);
        if (why != NULL)
            goto out;
        s->nb_slot = nb.pad - s->bias;
        memcpy(s->nb_orig, nb.pad_orig, JMP_LEN);
        pt.wide = 1;
    }
    /* A thread left in the original could take a jump of unknown target into the middle
     * of a patched jump: the original must be idle when the copy goes in (as for a
     * slot). */
    if (nxlate > 0 || pr->nind_unresolved > 0)
        pt.wide = 1;
    if ((*err = dynp_add_row(s, name, i, timed, &row)) < 0)
        goto out;
    if (rowp != NULL)
        *rowp = row;
    pt.row = row;
    if ((*err = dynp_add_cand(s, &pt)) < 0)
        goto out;
    for (size_t j = 0; j < nxs && why == NULL; j++) {
        size_t avail;
        const uint8_t *bytes = cfg_image_ptr(prog->img, xs[j], &avail);
        point_t rs;
        if (how[j] == 0)
            continue;
        if (bytes == NULL || avail < JMP_LEN) {
            why = "no bytes in the file";
            break;
        }
        memset(&rs, 0, sizeof(rs));
        rs.kind = PT_RSITE;
        rs.proc = i;
        rs.row = row;
        rs.name = name;
        rs.entry = xs[j] + s->bias;
        rs.len = how[j] == 4 ? 1 : how[j] == 3 ? SHORT_LEN : JMP_LEN;
        rs.wide = how[j] >= 2;
        rs.pun = how[j] == 4;
        memcpy(rs.orig, bytes, rs.len);
        if (how[j] == 4
            && (why = slot_at(s, parts, nparts, seen, rng, nrng,
                    xs[j] + SHORT_LEN + (uint64_t)(int64_t)(int8_t)bytes[1], &rs))
                != NULL)
            break;
        if (how[j] == 3
            && (why = find_slot(s, parts, nparts, seen, rng, nrng, xs[j], &rs)) != NULL
            && kept_slot(s, xs[j], &rs))
            why = NULL; /* (a lender's, dyn_session_want_slot) */
        else if (how[j] == 3 && why != NULL) {
            /* None of its own: one in a neighbour's code (at most 8 neighbours). */
            if (nlent == 8
                || (why = dynp_borrow_slot(
                        s, i, xs[j], timed, &rs, &rs.dep1, &lent[nlent], err))
                    != NULL
                || *err < 0)
                break;
            rs.dep1++;
            nlent++;
        }
        if (how[j] == 2
            && (*err = dynp_pad_take(s, xs[j])) < 0) /* its 5 bytes: see above */
            goto out;
        if ((*err = dynp_add_cand(s, &rs)) < 0)
            goto out;
    }
    if (why == NULL)
        why = reloc_trial(s, parts, nparts, &pt, err);
out:
    free(seen);
    free(todo);
    free(xs);
    free(how);
    free(rng);
    if (why != NULL || *err < 0) {
        s->ncand = ncand0;
        s->nrows = nrows0;
        s->npads = npads0;
    } else
        for (int k2 = 0; k2 < nlent; k2++)
            s->chosen[lent[k2]] |= 1; /* (measured as the copies that lend the slots) */
    return why;
}

/* Why procedure I cannot be timed in place, or NULL with its entry and exit candidates
 * added. */
static const char *
check_timed_inplace(dyn_session_t *s, uint32_t i, const char *name, int *err /*OUT*/)
{
    const cfg_prog_t *prog = s->prog;
    const cfg_proc_t *pr = &prog->procs[i];
    size_t ncand0 = s->ncand, nrows0 = s->nrows;
    const char *why;
    uint32_t b, row, parts[64];
    int k, nparts, want_pad;
    unsigned nexit = 0;
    point_t pt, ex;

    *err = 0;
    if ((nparts = dynp_parts_of(s, i, parts, 64)) < 0) {
        *err = nparts == QP_ERANGE ? 0 : nparts;
        return "too many cold fragments";
    }
    if ((why = dynp_timed_entry(s, i, &pt)) != NULL)
        return why;
    if (dynp_crosses_page(&pt))
        return "its first 5 bytes cross a page boundary (the jump could not be written in "
               "one piece)";
    if (pr->flags & CFG_PROC_MULTI_ENTRY)
        return "other procedures jump into its middle (its time would be wrong)";
    pt.name = name;
    if ((*err = dynp_add_row(s, name, i, 1, &row)) < 0)
        return NULL;
    pt.row = row;
    if ((*err = dynp_add_cand(s, &pt)) < 0)
        return NULL;
    nexit += pt.whole;
    FOR_BLOCKS(prog, parts, nparts, k, b)
    {
        const cfg_block_t *bl = &prog->blocks[b];
        int tail = dynp_is_tail_block(prog, bl) ? 1 : dynp_is_cond_tail_block(prog, bl);
        int noret = cfg_block_call_never_returns(prog, bl);
        for (uint32_t e = 0; e < bl->nsucc; e++) {
            const cfg_edge_t *ed = cfg_block_succ(prog, bl, e);
            if (ed->kind == CFG_EDGE_TAILCALL && !tail && !noret)
                why = bl->last_kind == ARCH_KIND_CALL
                        || bl->last_kind == ARCH_KIND_CALL_IND
                    ? "a call returns into another procedure's code (its callee is "
                      "assumed never to return)"
                    : "a tail call leaves it other than by a jmp or a jcc at a block's "
                      "end";
            else if (ed->kind == CFG_EDGE_UNRESOLVED)
                why = "an indirect jump with unknown targets may leave it";
            else if (ed->to == CFG_NONE && ed->kind != CFG_EDGE_RETURN
                && ed->kind != CFG_EDGE_NORETURN && ed->kind != CFG_EDGE_TAILCALL)
                why = "control leaves it other than by a ret";
        }
        if (why == NULL && noret) {
            /* A call that never returns: the timer stops before it. */
            if ((why = dynp_check_noret(s, bl, &ex)) == NULL) {
                ex.proc = i;
                ex.row = row;
                ex.name = name;
                if (ex.entry < pt.entry + pt.len && pt.entry < ex.entry + ex.len)
                    why = "its entry and a call that never returns share the bytes to patch";
                else if (dynp_cand_at(s, row, ex.entry))
                    why = "a call that never returns and another exit share the bytes to "
                          "patch";
                else if ((*err = dynp_add_cand(s, &ex)) < 0)
                    return NULL;
                nexit++;
            }
        }
        if (why == NULL && (bl->last_kind == ARCH_KIND_RET || tail)
            && !(pt.whole && b == pr->block)) {
            why = dynp_check_exit(s, bl, pr->entry, 0, &ex, &want_pad);
            if (why == NULL && want_pad)
                why = dynp_find_pad(s, bl->start, &ex);
            if (why != NULL && !tail && bl->end - bl->start < JMP_LEN) {
                /* Too short, no padding: patch the blocks that lead to it instead. */
                const char *w2 = dynp_exits_before(s, i, bl, row, name, &pt, &nexit, err);
                if (*err < 0)
                    return NULL;
                if (w2 == NULL) {
                    why = NULL;
                    continue;
                }
                if (bl->end - bl->start < SHORT_LEN)
                    why = w2; /* (a lone ret: what stopped the way round it) */
            }
            if (why == NULL) {
                ex.tail = tail == 3 ? 3 : ex.tail;
                ex.proc = i;
                ex.row = row;
                ex.name = name;
                ex.save_flags = pt.save_flags;
                if (ex.entry < pt.entry + pt.len && pt.entry < ex.entry + ex.len)
                    why = "its entry and a ret share the bytes to patch (too short)";
                else if (dynp_crosses_page(&ex))
                    why = "the jump before a ret would cross a page boundary";
                else if (dynp_cand_at(s, row, ex.entry))
                    why = "a ret and another exit share the bytes to patch";
                else if ((*err = dynp_add_cand(s, &ex)) < 0)
                    return NULL;
                nexit++;
            }
        }
        if (why != NULL)
            goto done;
    }
done:
    if (why == NULL && nexit == 0)
        why = "it has no ret (never returns)";
    if (why != NULL) {
        s->ncand = ncand0;
        s->nrows = nrows0;
    }
    return why;
}

/*
 * Why procedure I cannot be timed, or NULL with its candidates added: in place where its
 * exits fit (the cheapest), else relocated whole. The reason given is the in-place one
 * unless that was its being jumped into, which the copy takes care of.
 */
const char *
dynp_check_timed(dyn_session_t *s, uint32_t i, const char *name, int *err /*OUT*/)
{
    const char *why = check_timed_inplace(s, i, name, err), *w2;
    if (why == NULL || *err < 0)
        return why;
    w2 = dynp_check_reloc(s, i, name, 1, 1, NULL, err);
    if (w2 == NULL || *err < 0)
        return w2;
    return s->prog->procs[i].flags & CFG_PROC_MULTI_ENTRY ? w2 : why;
}
