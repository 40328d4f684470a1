/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A live process's snippets committed (qpt_commit): whether a point can take one
 * (qpt_live_point_ok: patched in place, borrowing a neighbour's slot, or in a copy of its
 * procedure relocated whole), the insertions grouped by dyn point and their snippets
 * joined into one per point (in insertion order), and the commit itself: the old session
 * taken out and a new one installed in one stop; when the new set does not go in whole,
 * it is taken out again and the old one put back, so a commit is all or nothing. Also
 * qpt_set_active and qpt_free (memory no snippet uses any more). The process itself,
 * its memory and its events are qpt_live.c's.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dynamic/dyn.h"
#include "libqpt/qpt_priv.h"

/*****************************************************************************
 * Points checked, insertions joined per dyn point, the commit (qpt_commit)
 */

static int dyn_kind(uint32_t kind);
static int group_of(uint32_t kind);

/* Which dyn point insertion IN goes to: a group (group_of) at an address; an exit joined
 * with its entry (whole) goes to the entry's. */
static int
key_group(const qpt_ins_t *in)
{
    return in->reloc ? 3 : in->whole ? 0 : group_of(in->pt.kind);
}

static uint64_t
key_where(const qpt_space_t *s, const qpt_ins_t *in)
{
    return in->whole || in->reloc ? s->prog->procs[in->pt.proc].entry + s->bias : in->where;
}

/* Does a point of KIND go into a procedure's copy (relocated whole)? Its entries and
 * exits (one snippet list at the entry, one at every exit) and its calls (a list before
 * each: the call is then made with its original return address, so nothing runs after
 * it in the copy). */
static int
copy_takes(uint32_t kind)
{
    return kind == QPT_ENTRY || kind == QPT_EXIT || kind == QPT_CALL;
}

/*
 * The procedure of IN relocated whole (DYN_PT_PROC) instead of patched in place: why
 * not, or NULL with IN's reloc and patch range set. A procedure with a point the copy
 * does not take (copy_takes) stays in place.
 */
static const char *
reloc_ok(qpt_space_t *s, qpt_ins_t *ins)
{
    const qpt_point_t *pt = &ins->pt;
    const char *why = NULL;
    /* (A shared library's space follows its process's.) */
    if (!s->relocate && (s->parent == NULL || !s->parent->relocate))
        return "not asked for (qpt_set_relocate)";
    if (!copy_takes(pt->kind))
        return "only an entry, an exit or a call site goes into a procedure's copy";
    size_t n;
    const size_t *same = qpt_live_index_proc(s, pt->proc, &n);
    for (size_t k = 0; k < n; k++) {
        const qpt_ins_t *o = &s->ins[same[k]];
        if (!o->removed && !copy_takes(o->pt.kind))
            return "its procedure has points other than its entry, exits and calls (a "
                   "point after a call, a block, an edge or an instruction)";
    }
    uint64_t e = s->prog->procs[pt->proc].entry;
    if (dyn_session_check_point(s->check, DYN_PT_PROC, pt->proc, e, &ins->patch_lo,
                                &ins->patch_hi, &why)
        < 0)
        return why != NULL ? why : "its procedure cannot be relocated";
    ins->reloc = 1;
    ins->whole = 0;
    return NULL;
}

static int ins_uses(const qpt_ins_t *in, uint64_t lo, uint64_t hi);

/* qpt_live_index_overlap's test: insertion H (not removed, at another dyn point) patches
 * bytes of INS. */
static int
overlaps(const qpt_space_t *s, size_t h, void *arg)
{
    const qpt_ins_t *ins = arg, *o = &s->ins[h];
    if (o->removed || (key_where(s, o) == key_where(s, ins) && key_group(o) == key_group(ins)))
        return 0;
    return o->patch_lo < ins->patch_hi && ins->patch_lo < o->patch_hi;
}

int
qpt_live_point_ok(qpt_space_t *s, qpt_ins_t *ins, const char **why)
{
    const qpt_point_t *pt = &ins->pt;
    /* (/proc is asked only while it runs: not once per insertion into a stopped one) */
    if (qpt_live_gone(s, !dyn_proc_is_stopped(s->proc)) < 0) {
        *why = "the process has exited";
        return QP_EEXITED;
    }
    /* Memory gone from the process, of any of its spaces (an unloaded library's too):
     * its address is no longer ours (another mapping may be there). */
    const qpt_space_t *top = s->parent != NULL ? s->parent : s;
    for (const qpt_space_t *x = top; x != NULL; x = x == top ? top->libs : x->next_lib)
        for (size_t i = 0; i < x->nlvars; i++) {
            const qpt_live_vars_t *vv = &x->lvars[i];
            if (vv->gone && ins_uses(ins, vv->remote, vv->remote + vv->len)) {
                *why = "it uses memory qpt_alloc gave that left the process (gone with an "
                       "execve, or with its library's dlclose)";
                return QP_EINVAL;
            }
        }
    if (pt->kind == QPT_EXIT) { /* a ret, a tail call (a jmp at a block's end), or a call
                                 * that never returns (dyn checks which) */
        arch_insn_t in;
        uint64_t a = pt->addr - s->bias;
        size_t avail;
        const uint8_t *b = cfg_image_ptr(s->img, a, &avail);
        if (b == NULL || arch_decode(b, avail, a, &in) < 0
            || (in.kind != ARCH_KIND_RET && in.kind != ARCH_KIND_JMP
                && in.kind != ARCH_KIND_JMP_IND && in.kind != ARCH_KIND_JCC
                && in.kind != ARCH_KIND_CALL)) {
            *why = "not a ret or a tail call";
            return QP_EUNSUPP;
        }
    }
    /* What the file says of the point, as the commit will see it. */
    if (s->check == NULL) {
        dyn_session_t *c = NULL;
        QP_CHECK(dyn_session_create(s->proc, s->prog, s->bias, &c));
        s->check = c;
        dyn_session_keep_decoded(c, qpt_live_decoded(s));
    }
    ins->whole = 0;
    ins->reloc = 0;
    /* The others by procedure and by page: what follows looks at those only. */
    QP_CHECK(qpt_live_index_sync(s));
    ins->lender = 0;
    /* A procedure already relocated whole takes its other entries, exits and calls in
     * its copy; no other point. */
    size_t nsame;
    const size_t *same = qpt_live_index_proc(s, pt->proc, &nsame);
    for (size_t k = 0; k < nsame; k++) {
        const qpt_ins_t *o = &s->ins[same[k]];
        if (o->removed || !o->reloc)
            continue;
        if (!copy_takes(pt->kind)) {
            *why = "its procedure runs as a copy (relocated whole): only its entry, "
                   "exits and calls take snippets";
            return QP_EUNSUPP;
        }
        ins->reloc = 1;
        ins->patch_lo = o->patch_lo;
        ins->patch_hi = o->patch_hi;
        return 0;
    }
    /* One that lends a slot to a neighbour's jump runs as its copy too. */
    if (qpt_live_lender(s, pt->proc) != 0)
        return qpt_live_lender_point(s, ins, why);
    if (pt->kind == QPT_EXIT && pt->proc < s->prog->nprocs
        && cfg_block_at(s->prog, pt->addr - s->bias) == s->prog->procs[pt->proc].block) {
        /* The ret (or tail call) of the entry block: the block moved whole with the
         * entry's point (a procedure too short for a jump at its entry and one at its
         * exit: a lone ret, a PLT-like `jmp *`). */
        const char *w2 = NULL;
        ins->whole = dyn_session_check_point(s->check, DYN_PT_WHOLE, pt->proc,
                                             s->prog->procs[pt->proc].entry, &ins->patch_lo,
                                             &ins->patch_hi, &w2)
            == 0;
    }
    if (!ins->whole) {
        int rc = dyn_session_check_point(s->check, dyn_kind(pt->kind), pt->proc,
                                         ins->where - s->bias, &ins->patch_lo, &ins->patch_hi,
                                         why);
        /* An entry too short for its own jump (another procedure right after it): its
         * block moved whole when it ends the procedure (through padding). */
        const char *w2 = NULL;
        if (rc == QP_EUNSUPP && pt->kind == QPT_ENTRY
            && dyn_session_check_point(s->check, DYN_PT_WHOLE, pt->proc,
                                       ins->where - s->bias, &ins->patch_lo, &ins->patch_hi,
                                       &w2)
                == 0) {
            ins->whole = 1;
            rc = 0;
        }
        /* Where it does not fit in place: its procedure relocated whole. */
        if (rc == QP_EUNSUPP && reloc_ok(s, ins) == NULL)
            return 0;
        /* Nor relocated alone: through a slot in a neighbour's code (relocated whole,
         * as above: its other points go into its copy). */
        if (rc == QP_EUNSUPP && qpt_live_borrow(s, ins) == 0) {
            if (ins->reloc)
                return 0;
            rc = 0;
        }
        QP_CHECK(rc);
    }
    /* Another point's jump over the same bytes (one point shares its jump): the first
     * such insertion, among those patching the same pages. */
    size_t i = qpt_live_index_overlap(s, ins->patch_lo, ins->patch_hi, overlaps, ins);
    if (i != SIZE_MAX) {
        const qpt_ins_t *o = &s->ins[i];
        /* Too short for both its entry and its exit: relocated whole. */
        if (!o->reloc && o->pt.proc == ins->pt.proc && reloc_ok(s, ins) == NULL)
            return 0;
        *why = "its bytes overlap those of another point with a snippet (a procedure "
               "too short for both its entry and its exit?)";
        return QP_EUNSUPP;
    }
    return 0;
}

/* The dyn point kind of a public point (QPT_AFTER_CALL shares its call's point). */
static int
dyn_kind(uint32_t kind)
{
    switch (kind) {
    case QPT_ENTRY: return DYN_PT_ENTRY;
    case QPT_EXIT: return DYN_PT_EXIT;
    case QPT_BLOCK:
    case QPT_EDGE: return DYN_PT_BLOCK; /* at its destination, its one way in */
    case QPT_INSN: return DYN_PT_INSN;
    default: return DYN_PT_CALL;
    }
}

/*
 * Which insertions at one address share one dyn point (one trampoline): the points
 * before an instruction (an entry, a block's start, an edge at its destination, an
 * instruction) are one, their snippets joined in the order they were made; a call with
 * what runs after it another; an exit a third.
 */
static int
group_of(uint32_t kind)
{
    switch (kind) {
    case QPT_ENTRY:
    case QPT_BLOCK:
    case QPT_EDGE:
    case QPT_INSN: return 0;
    case QPT_EXIT: return 2;
    default: return 1;
    }
}

/*
 * The dyn point of group 0 of insertions at one address with the kinds in MASK
 * (1u << qpt_point_kind_t): an entry moved whole with its ret when an exit joined it;
 * an entry when one is there (its block is entered only by calls, or the entry is
 * refused: the other points there run exactly when it does); else a block's start,
 * else an instruction.
 */
static int
group_kind(uint32_t mask)
{
    if (mask & (1u << QPT_EXIT))
        return DYN_PT_WHOLE;
    if (mask & (1u << QPT_ENTRY))
        return DYN_PT_ENTRY;
    if (mask & ((1u << QPT_BLOCK) | (1u << QPT_EDGE)))
        return DYN_PT_BLOCK;
    return DYN_PT_INSN;
}

/*
 * Join the snippets of the insertions I[0..N) (same dyn point, same side) into one:
 * their nodes, renumbered, under a chain of SEQ nodes. NULL with *ROOT unset when none.
 */
static arch_snip_t *
join(const qpt_space_t *s, const size_t *ix, size_t n, size_t *nnodes, uint32_t *root)
{
    size_t total = 0;
    for (size_t k = 0; k < n; k++)
        total += s->ins[ix[k]].n + 1;
    arch_snip_t *v = malloc((total + 1) * sizeof(arch_snip_t));
    if (v == NULL)
        return NULL;
    uint32_t m = 0, prev = ARCH_SNIP_NONE;
    for (size_t k = 0; k < n; k++) {
        const qpt_ins_t *in = &s->ins[ix[k]];
        uint32_t base = m;
        for (uint32_t j = 0; j < in->n; j++) {
            arch_snip_t c = in->nodes[j];
            if (c.a != ARCH_SNIP_NONE)
                c.a += base;
            if (c.b != ARCH_SNIP_NONE)
                c.b += base;
            if (c.c != ARCH_SNIP_NONE)
                c.c += base;
            for (int a = 0; a < c.nargs; a++)
                c.args[a] += base;
            v[m++] = c;
        }
        uint32_t r = base + in->root;
        if (prev != ARCH_SNIP_NONE) {
            v[m] = (arch_snip_t) { .op = ARCH_SN_SEQ, .a = prev, .b = r, .c = ARCH_SNIP_NONE };
            r = m++;
        }
        prev = r;
    }
    *nnodes = m;
    *root = prev;
    return v;
}

/* Insertions by dyn point (kind, address), then in the order they run there. */
static int
ins_cmp(const void *x, const void *y, void *arg)
{
    const qpt_space_t *s = arg;
    size_t i = *(const size_t *)x, j = *(const size_t *)y;
    const qpt_ins_t *a = &s->ins[i], *b = &s->ins[j];
    int ka = key_group(a), kb = key_group(b);
    uint64_t wa = key_where(s, a), wb = key_where(s, b);
    if (ka != kb)
        return ka < kb ? -1 : 1;
    if (wa != wb)
        return wa < wb ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

static int
exit_cmp(const void *x, const void *y, void *arg)
{
    const qpt_space_t *s = arg;
    const qpt_ins_t *a = &s->ins[*(const size_t *)x], *b = &s->ins[*(const size_t *)y];
    if (a->where != b->where)
        return a->where < b->where ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

/* Do insertions A and B hold the same snippet? */
static int
same_snippet(const qpt_ins_t *a, const qpt_ins_t *b)
{
    return a->n == b->n && a->root == b->root
        && memcmp(a->nodes, b->nodes, a->n * sizeof(arch_snip_t)) == 0;
}

/*
 * The insertions of a procedure relocated whole (IX: *NI of them, JX: *NJ, in order; a
 * QPT_AFTER_CALL never goes there): its entries' stay in IX; its exits' go to JX, those
 * of one exit only, every exit having the same ones (the copy runs one list before each
 * of its exits), and their addresses (link, sorted, malloc'd) to *EXITS, *NEXITS. 0, or
 * QP_EUNSUPP (exits with different snippets), QP_ENOMEM.
 */
static int
reloc_exits(qpt_space_t *s, size_t *ix, size_t *ni, size_t *jx, size_t *nj, uint64_t **exits,
    size_t *nexits)
{
    size_t n = 0, m = 0;
    /* Exits from IX (where build put entries and exits alike) to JX. */
    for (size_t k = 0; k < *ni; k++)
        if (s->ins[ix[k]].pt.kind == QPT_EXIT)
            jx[(*nj)++] = ix[k];
        else
            ix[n++] = ix[k];
    *ni = n;
    *exits = NULL;
    *nexits = 0;
    if (*nj == 0)
        return 0;
    qsort_r(jx, *nj, sizeof(size_t), exit_cmp, s);
    uint64_t *v = malloc(*nj * sizeof(uint64_t));
    if (v == NULL)
        return QP_ENOMEM;
    /* The first exit's list, and every other exit's the same. */
    size_t first = 0;
    while (first < *nj && s->ins[jx[first]].where == s->ins[jx[0]].where)
        first++;
    for (size_t k = 0; k < *nj;) {
        size_t e = k;
        while (e < *nj && s->ins[jx[e]].where == s->ins[jx[k]].where)
            e++;
        int same = e - k == first;
        for (size_t q = 0; same && q < first; q++)
            same = same_snippet(&s->ins[jx[k + q]], &s->ins[jx[q]]);
        if (!same) {
            free(v);
            return qpt_fail(s, QP_EUNSUPP,
                            "%s: its exits have different snippets, and it runs as one copy "
                            "(relocated whole: its points do not fit in place)",
                            qpt_proc_name(s, s->ins[jx[0]].pt.proc));
        }
        v[m++] = s->ins[jx[k]].where - s->bias;
        k = e;
    }
    *nj = first;
    *exits = v;
    *nexits = m;
    return 0;
}

/*
 * The call points of a procedure relocated whole, out of IX (*NI, in order; its
 * entries' stay there): those at one call joined, as a list of sites sorted by address
 * into *SITES (malloc'd, with L), *NSITES; their joined snippets kept in L. 0, or
 * QP_ENOMEM.
 */
static int
reloc_sites(qpt_space_t *s, qpt_live_set_t *l, size_t *ix, size_t *ni, dyn_site_t **sites,
            size_t *nsites)
{
    size_t n = 0, m = 0, *kx = malloc((*ni + 1) * sizeof(size_t));
    if (kx == NULL)
        return QP_ENOMEM;
    for (size_t k = 0; k < *ni; k++)
        if (s->ins[ix[k]].pt.kind == QPT_CALL)
            kx[m++] = ix[k];
        else
            ix[n++] = ix[k];
    *ni = n;
    *sites = NULL;
    *nsites = 0;
    if (m == 0) {
        free(kx);
        return 0;
    }
    qsort_r(kx, m, sizeof(size_t), exit_cmp, s); /* by address, then order */
    dyn_site_t *v = calloc(m, sizeof(dyn_site_t));
    if (v == NULL) {
        free(kx);
        return QP_ENOMEM;
    }
    l->sites[l->nsites++] = v;
    for (size_t k = 0; k < m;) {
        size_t e = k, nn;
        uint32_t root;
        while (e < m && s->ins[kx[e]].where == s->ins[kx[k]].where)
            e++;
        arch_snip_t *j = join(s, kx + k, e - k, &nn, &root);
        if (j == NULL) {
            free(kx);
            return QP_ENOMEM;
        }
        l->joined[l->njoined++] = j;
        v[(*nsites)++] = (dyn_site_t) { s->ins[kx[k]].where - s->bias, { j, nn, root } };
        k = e;
    }
    *sites = v;
    free(kx);
    return 0;
}

static int note_row(qpt_live_set_t *l, uint32_t row, size_t i);

/*
 * The dyn point of the insertions at the place of ORDER[O] (the first not done there):
 * every insertion at the same dyn point, before (IX) and after a call (JX), joined and
 * added to L's session; DONE marks them. 0, or < 0 with S's message (and s->refused).
 */
static int
add_group(qpt_space_t *s, qpt_live_set_t *l, const size_t *order, size_t o, uint8_t *done, size_t *ix,
          size_t *jx)
{
    size_t i = order[o];
    const qpt_ins_t *a = &s->ins[i];
    size_t ni = 0, nj = 0;
    int group = key_group(a), rc = 0;
    uint64_t where = key_where(s, a);
    uint32_t mask = 0;
    for (size_t q = o; q < s->nins; q++) {
        size_t k = order[q];
        const qpt_ins_t *b = &s->ins[k];
        if (key_where(s, b) != where || key_group(b) != group)
            break;
        if (b->removed || done[k])
            continue;
        done[k] = 1;
        mask |= 1u << b->pt.kind | (b->whole ? 1u << QPT_EXIT : 0);
        if (b->pt.kind == QPT_AFTER_CALL || (b->whole && b->pt.kind == QPT_EXIT))
            jx[nj++] = k;
        else
            ix[ni++] = k;
        l->in[k] = 1;
    }
    int kind = group == 0 ? group_kind(mask) : group == 3 ? DYN_PT_PROC : dyn_kind(a->pt.kind);
    dyn_snippet_t before = { 0 }, after = { 0 };
    size_t nn;
    uint32_t root;
    uint64_t *exits = NULL;
    size_t nexits = 0;
    dyn_site_t *sites = NULL;
    size_t nsites = 0;
    if (group == 3 && (rc = reloc_exits(s, ix, &ni, jx, &nj, &exits, &nexits)) < 0)
        return rc;
    if (exits != NULL)
        l->exits[l->nexits++] = exits;
    if (group == 3 && (rc = reloc_sites(s, l, ix, &ni, &sites, &nsites)) < 0)
        return rc;
    if (ni > 0) {
        arch_snip_t *v = join(s, ix, ni, &nn, &root);
        if (v == NULL)
            return QP_ENOMEM;
        l->joined[l->njoined++] = v;
        before = (dyn_snippet_t) { v, nn, root };
    }
    if (nj > 0) {
        arch_snip_t *v = join(s, jx, nj, &nn, &root);
        if (v == NULL)
            return QP_ENOMEM;
        l->joined[l->njoined++] = v;
        after = (dyn_snippet_t) { v, nn, root };
    }
    const char *why = NULL;
    uint32_t row;
    rc = dyn_session_add_point(l->sess, kind, a->pt.proc, where - s->bias, ni ? &before : NULL,
                               nj ? &after : NULL, qpt_proc_name(s, a->pt.proc), &row, &why);
    if (rc == 0 && exits != NULL)
        rc = dyn_session_set_exits(l->sess, row, exits, nexits);
    if (rc == 0 && sites != NULL)
        rc = dyn_session_set_sites(l->sess, row, sites, nsites);
    if (rc == 0)
        rc = note_row(l, row, i);
    if (rc < 0) {
        s->refused = rc == QP_EUNSUPP ? (qpt_handle_t)(i + 1) : 0;
        qpt_fail(s, rc, "%s at 0x%llx: %s (nothing changed)", qpt_proc_name(s, a->pt.proc),
                 (unsigned long long)a->where, why ? why : qp_strerror(rc));
    }
    return rc;
}

/* Row ROW of L's session names insertion I at its point, unless one does already (which
 * insertion a refusal at install names: qpt_commit_refused). */
static int
note_row(qpt_live_set_t *l, uint32_t row, size_t i)
{
    if (row >= l->nrows) {
        size_t n = 2 * (size_t)row + 16, *v = realloc(l->row_ins, n * sizeof(size_t));
        if (v == NULL)
            return QP_ENOMEM;
        memset(v + l->nrows, 0, (n - l->nrows) * sizeof(size_t));
        l->row_ins = v;
        l->nrows = n;
    }
    if (l->row_ins[row] == 0)
        l->row_ins[row] = i + 1;
    return 0;
}

/*
 * The procedures that borrow a slot in a neighbour's code (qpt_live_borrow.c), each
 * added with its lender: the lender first (its own point, or a copy with no snippet of
 * ours when it has none), keeping the slot, then the borrower's points, the first of
 * which takes it. PAIR: per procedure, 1 for those of a pair (build left them out).
 */
static int
add_pairs(qpt_space_t *s, qpt_live_set_t *l, const size_t *order, uint8_t *done, size_t *ix,
          size_t *jx, uint8_t *pair)
{
    for (size_t i = 0; i < s->nins; i++) {
        const qpt_ins_t *b = &s->ins[i];
        if (b->removed || b->lender == 0 || pair[b->pt.proc] != 1)
            continue;
        uint32_t p = b->pt.proc, n = b->lender - 1;
        pair[p] = 2;
        QP_CHECK(dyn_session_want_slot(l->sess, b->slot_for));
        size_t own = 0;
        int rc = 0;
        for (size_t o = 0; rc == 0 && o < s->nins; o++)
            if (s->ins[order[o]].pt.proc == n && !s->ins[order[o]].removed) {
                own = 1;
                if (!done[order[o]])
                    rc = add_group(s, l, order, o, done, ix, jx);
            }
        if (rc == 0 && !own) {
            const char *why = NULL;
            uint32_t row;
            rc = dyn_session_add_lender(l->sess, n, qpt_proc_name(s, n), &row, &why);
            if (rc == 0)
                rc = note_row(l, row, i);
            else
                qpt_fail(s, rc, "%s: its neighbour %s cannot lend it a slot: %s (nothing "
                         "changed)", qpt_proc_name(s, p), qpt_proc_name(s, n),
                         why ? why : qp_strerror(rc));
        }
        if (rc == 0 && dyn_session_slot_kept(l->sess) != 1)
            rc = qpt_fail(s, QP_EUNSUPP, "%s: its neighbour %s kept no slot for its jump "
                          "(nothing changed)", qpt_proc_name(s, p), qpt_proc_name(s, n));
        for (size_t o = 0; rc == 0 && o < s->nins; o++)
            if (s->ins[order[o]].pt.proc == p && !s->ins[order[o]].removed
                && !done[order[o]])
                rc = add_group(s, l, order, o, done, ix, jx);
        dyn_session_want_slot(l->sess, 0);
        if (rc < 0) {
            if (rc == QP_EUNSUPP && s->refused == 0)
                s->refused = (qpt_handle_t)(i + 1);
            return rc;
        }
    }
    return 0;
}

/* A session with the current insertions (not installed yet); *L on success. */
static int
build(qpt_space_t *s, qpt_live_set_t **out)
{
    qpt_live_set_t *l = calloc(1, sizeof(*l));
    size_t *ix = malloc((s->nins + 1) * sizeof(size_t));
    size_t *jx = malloc((s->nins + 1) * sizeof(size_t));
    uint8_t *done = calloc(s->nins + 1, 1);
    uint8_t *pair = calloc(s->prog->nprocs + 1, 1);
    int rc = l && ix && jx && done && pair ? 0 : QP_ENOMEM;
    if (rc == 0) {
        l->joined = calloc(3 * s->nins + 1, sizeof(arch_snip_t *));
        l->exits = calloc(s->nins + 1, sizeof(uint64_t *));
        l->sites = calloc(s->nins + 1, sizeof(dyn_site_t *));
        l->in = calloc(s->nins + 1, 1);
        l->nin = s->nins;
        if (l->joined == NULL || l->in == NULL || l->exits == NULL || l->sites == NULL)
            rc = QP_ENOMEM;
    }
    /* One copy holds every entry, exit and call point of a procedure relocated whole. */
    if (rc == 0)
        rc = qpt_live_index_sync(s);
    for (size_t i = 0; rc == 0 && i < s->nins; i++) {
        if (s->ins[i].removed || !s->ins[i].reloc)
            continue;
        size_t n;
        const size_t *same = qpt_live_index_proc(s, s->ins[i].pt.proc, &n);
        for (size_t k = 0; k < n; k++) {
            qpt_ins_t *o = &s->ins[same[k]];
            if (!o->removed && copy_takes(o->pt.kind))
                o->reloc = 1;
        }
    }
    /* A borrower and its lender go in together, after the others (add_pairs). */
    for (size_t i = 0; rc == 0 && i < s->nins; i++)
        if (!s->ins[i].removed && s->ins[i].lender != 0) {
            pair[s->ins[i].pt.proc] = 1;
            pair[s->ins[i].lender - 1] = 3;
        }
    if (rc == 0)
        rc = dyn_session_create(s->proc, s->prog, s->bias, &l->sess);
    if (rc == 0)
        dyn_session_keep_decoded(l->sess, qpt_live_decoded(s));
    /* The insertions by dyn point, in the order they were made at each. */
    size_t *order = rc == 0 ? malloc((s->nins + 1) * sizeof(size_t)) : NULL;
    if (rc == 0 && order == NULL)
        rc = QP_ENOMEM;
    for (size_t i = 0; rc == 0 && i < s->nins; i++)
        order[i] = i;
    if (rc == 0)
        qsort_r(order, s->nins, sizeof(size_t), ins_cmp, s);
    for (size_t o = 0; rc == 0 && o < s->nins; o++) {
        size_t i = order[o];
        if (s->ins[i].removed || done[i] || pair[s->ins[i].pt.proc] != 0)
            continue;
        rc = add_group(s, l, order, o, done, ix, jx);
    }
    if (rc == 0)
        rc = add_pairs(s, l, order, done, ix, jx, pair);
    free(order);
    free(ix);
    free(jx);
    free(done);
    free(pair);
    if (rc < 0) {
        qpt_live_set_free(l);
        return rc;
    }
    *out = l;
    return 0;
}

/* Install L; 0 only when every one of its points went in. */
static int
install_all(qpt_space_t *s, qpt_live_set_t *l)
{
    uint64_t *gone;
    size_t ngone;
    QP_CHECK(qpt_live_gone_ranges(s->parent != NULL ? s->parent : s, &gone, &ngone));
    int rc = dyn_session_set_avoid(l->sess, gone, ngone);
    free(gone);
    QP_CHECK(rc);
    errno = 0;
    dyn_session_set_all_or_nothing(l->sess, 1);
    rc = dyn_session_install(l->sess);
    if (rc < 0 && rc == QP_EIO && errno == ESRCH && qpt_live_gone(s, 1) < 0)
        return QP_EEXITED;
    if (rc < 0)
        return qpt_fail(s, rc, "installing: %s (nothing changed)",
                        rc == QP_EIO && errno == ESRCH ? "the process ended"
                        : rc == QP_EIO && errno        ? strerror(errno)
                                                       : qp_strerror(rc));
    size_t nref = dyn_session_nrefused(l->sess);
    if (nref > 0) {
        const char *why = NULL;
        const char *name = dyn_session_refusal(l->sess, 0, &why);
        /* The insertion at the refused row's point (qpt_commit_refused). */
        uint32_t row = dyn_session_refusal_row(l->sess, 0);
        if (row < l->nrows && l->row_ins[row] != 0)
            s->refused = (qpt_handle_t)l->row_ins[row];
        dyn_session_remove(l->sess, NULL);
        return qpt_fail(s, QP_EUNSUPP, "%s: %s (%zu point%s refused: nothing changed)",
                        name ? name : "?", why ? why : "refused", nref, nref == 1 ? "" : "s");
    }
    return 0;
}

int
qpt_live_commit(qpt_space_t *s)
{
    QP_CHECK(qpt_live_gone(s, 0));
    if (!dyn_proc_is_stopped(s->proc))
        return qpt_live_must_be_stopped(s);
    qpt_live_set_t *old = s->sess, *next = NULL;
    s->refused = 0;
    int rc = build(s, &next);
    if (rc < 0)
        return rc;
    if (s->inactive) { /* checked; installed by qpt_set_active(s, 1) */
        qpt_live_set_free(next);
        return 0;
    }
    if (old != NULL && old->sess != NULL)
        dyn_session_remove(old->sess, NULL);
    rc = install_all(s, next);
    if (rc == 0) {
        /* A callee still running returns into the old session's call-site trampoline:
         * on to the new one's snippets after that call (a timer started stops). */
        if (old != NULL && old->sess != NULL)
            dyn_session_reroute_returns(old->sess, next->sess);
        qpt_live_set_free(old);
        s->sess = next;
        return 0;
    }
    qpt_live_set_free(next);
    /* Put the old set back, as it was (a new session over the same points). */
    if (old != NULL) {
        char saved[sizeof(s->err)];
        memcpy(saved, s->err, sizeof(saved));
        dyn_session_destroy(old->sess);
        old->sess = NULL;
        qpt_live_set_t *again = NULL;
        uint8_t *was = old->in;
        size_t nwas = old->nin;
        /* Rebuild from the insertions that were in: mark the others removed meanwhile. */
        uint8_t *keep = malloc(s->nins + 1);
        if (keep != NULL) {
            for (size_t i = 0; i < s->nins; i++) {
                keep[i] = s->ins[i].removed;
                s->ins[i].removed = !(i < nwas && was[i]);
            }
            if (build(s, &again) == 0 && install_all(s, again) == 0) {
                qpt_live_set_free(old);
                s->sess = again;
                old = NULL;
            } else
                qpt_live_set_free(again);
            for (size_t i = 0; i < s->nins; i++)
                s->ins[i].removed = keep[i];
            free(keep);
        }
        if (old != NULL) {
            qpt_live_set_free(old);
            s->sess = NULL;
        }
        memcpy(s->err, saved, sizeof(saved));
    }
    return rc;
}

int
qpt_live_set_active(qpt_space_t *s, int on)
{
    QP_CHECK(qpt_live_gone(s, 0));
    if (!dyn_proc_is_stopped(s->proc))
        return qpt_live_must_be_stopped(s);
    if (on) {
        if (!s->inactive)
            return 0;
        s->inactive = 0;
        int rc = qpt_live_commit(s);
        if (rc < 0)
            s->inactive = 1;
        return rc;
    }
    if (s->inactive)
        return 0;
    qpt_live_set_t *l = s->sess;
    if (l != NULL && l->sess != NULL) {
        int rc = dyn_session_remove(l->sess, NULL);
        if (rc < 0)
            return qpt_fail(s, rc, "taking the snippets out: %s",
                            rc == QP_EIO ? strerror(errno) : qp_strerror(rc));
    }
    qpt_live_set_free(l);
    s->sess = NULL;
    s->inactive = 1;
    return 0;
}

/* Whether a snippet of insertion I reads or writes memory in [LO, HI). */
static int
ins_uses(const qpt_ins_t *in, uint64_t lo, uint64_t hi)
{
    for (uint32_t k = 0; k < in->n; k++) {
        const arch_snip_t *e = &in->nodes[k];
        if (arch_snip_imm_is_addr(e->op) && (uint64_t)e->imm + 24 > lo && (uint64_t)e->imm < hi)
            return 1;
    }
    return 0;
}

int
qpt_live_uses(const qpt_space_t *s, uint64_t lo, uint64_t hi, size_t *k /*OUT*/)
{
    const qpt_live_set_t *l = s->sess;
    for (*k = 0; *k < s->nins; (*k)++) {
        int in = l != NULL && *k < l->nin && l->in[*k];
        if ((in || !s->ins[*k].removed) && ins_uses(&s->ins[*k], lo, hi))
            return in ? 1 : 2;
    }
    return 0;
}

int
qpt_live_free(qpt_space_t *s, uint64_t addr)
{
    qpt_live_vars_t *v = s->lvars;
    size_t i = 0;
    while (i < s->nlvars && v[i].remote != addr)
        i++;
    if (i == s->nlvars)
        return qpt_fail(s, QP_EINVAL, "0x%llx: not an address qpt_alloc gave",
                        (unsigned long long)addr);
    if (!dyn_proc_is_stopped(s->proc))
        return qpt_live_must_be_stopped(s);
    /* An insertion of any space of the process may use it (a library's snippet a
     * variable of the program's, or the reverse; a closed library's variables are the
     * program's space's now): unmapped under it, the process would fault. */
    size_t k;
    int use = 0;
    const qpt_space_t *top = s->parent != NULL ? s->parent : s, *x;
    for (x = top; x != NULL && use == 0; x = x == top ? top->libs : x->next_lib)
        if ((use = qpt_live_uses(x, addr, addr + v[i].len, &k)) != 0)
            break;
    if (use != 0)
        return qpt_fail(s, QP_EINVAL, "0x%llx: insertion %zu%s uses it (%s): remove it and "
                        "commit first", (unsigned long long)addr, k,
                        x != s ? " of another space" : "",
                        use == 1 ? "in the process" : "to be committed");
    /* (memory gone with an execve or a dlclose is no longer the process's to unmap) */
    int rc = v[i].gone ? 0 : dyn_space_free(s->proc, v[i].remote, v[i].len);
    if (rc < 0)
        return qpt_fail(s, rc, "unmapping: %s", rc == QP_EIO ? strerror(errno) : qp_strerror(rc));
    if (v[i].local != NULL)
        munmap(v[i].local, v[i].len);
    if (v[i].fd >= 0)
        close(v[i].fd);
    v[i] = v[--s->nlvars];
    return 0;
}
