/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Neighbour slots for live points (issue 29). A procedure too short for a jump, with no
 * padding within a 2-byte jump's reach and none of its own code to spare (`xor %eax,%eax;
 * ret` between two procedures, as cold code is laid out), takes a jmp rel8 to a 5-byte
 * jump in a slot of a neighbour's original code, the neighbour relocated whole (its
 * original idle), as Dyninst and e9patch borrow a neighbour's bytes and as dyn's
 * selections do (dynamic/dyn_patch.c, with_neighbour). Here points come one by one: the
 * borrowing insertion names its lender (qpt_ins_t.lender); the lender's own entries and
 * exits, before or after, go into its copy; the commit adds the lender, then the
 * borrower, which takes the slot (qpt_live.c, add_pairs). A lender lends one slot, and
 * only when it takes no point but its entry and exits (those made in place before move
 * into its copy: a copy measures what they did). A 1-byte procedure (a lone ret) borrows
 * so too, through a punned jump (dynamic/dyn_patch.c, pun_site): its entry block moved
 * whole, its lender the procedure right after it.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "dynamic/dyn.h"
#include "libqpt/qpt_priv.h"

/* Does S relocate procedures whole (qpt_set_relocate; a library's space follows its
 * process's)? */
static int
relocates(const qpt_space_t *s)
{
    return s->relocate || (s->parent != NULL && s->parent->relocate);
}

size_t
qpt_live_lender(const qpt_space_t *s, uint32_t proc)
{
    if (s->lent == NULL || proc >= s->prog->nprocs || !s->lent[proc])
        return 0;
    for (size_t i = 0; i < s->nins; i++)
        if (!s->ins[i].removed && s->ins[i].lender == proc + 1)
            return i + 1;
    return 0;
}

/*
 * dyn_session_check_borrow's LEND: may procedure J be relocated whole to lend a slot to
 * the procedure ARG points at? When its points are its entry and exits only, every exit
 * with the same snippet (its copy runs one list before each), and it borrows or lends
 * none already.
 */
static int
may_lend(void *arg, uint32_t j)
{
    const qpt_space_t *s = ((void **)arg)[0];
    uint32_t borrower = *(const uint32_t *)((void **)arg)[1];
    const qpt_ins_t *x = NULL;
    if (j == borrower || qpt_live_lender(s, j) != 0)
        return 0;
    for (size_t i = 0; i < s->nins; i++) {
        const qpt_ins_t *o = &s->ins[i];
        if (o->removed || o->pt.proc != j)
            continue;
        if (o->lender != 0 || (o->pt.kind != QPT_ENTRY && o->pt.kind != QPT_EXIT))
            return 0;
        if (o->pt.kind != QPT_EXIT)
            continue;
        if (x == NULL)
            x = o;
        else if (o->n != x->n || o->root != x->root
                 || memcmp(o->nodes, x->nodes, o->n * sizeof(arch_snip_t)) != 0)
            return 0;
    }
    return 1;
}

/* Lender N's points, made in place before it lent, into its copy. (Also when INS is
 * only asked about, qpt_proc_runs_as_copy: N then runs as a copy for nothing, which
 * measures the same.) */
static int
into_copy(qpt_space_t *s, uint32_t n)
{
    uint64_t lo = 0, hi = 0;
    const char *why;
    int have = 0;
    for (size_t i = 0; i < s->nins; i++) {
        qpt_ins_t *o = &s->ins[i];
        if (o->removed || o->pt.proc != n || o->reloc)
            continue;
        if (!have) {
            QP_CHECK(dyn_session_check_point(s->check, DYN_PT_PROC, n, s->prog->procs[n].entry,
                                             &lo, &hi, &why));
            have = 1;
        }
        o->reloc = 1;
        o->whole = 0;
        o->patch_lo = lo;
        o->patch_hi = hi;
        QP_CHECK(qpt_live_index_moved(s, i));
    }
    return 0;
}

int
qpt_live_lender_point(qpt_space_t *s, qpt_ins_t *ins, const char **why)
{
    uint32_t p = ins->pt.proc;
    if (ins->pt.kind != QPT_ENTRY && ins->pt.kind != QPT_EXIT) {
        *why = "its procedure runs as a copy (relocated whole, it lends a slot of its "
               "original code to a neighbour's jump): only its entry and exits take snippets";
        return QP_EUNSUPP;
    }
    int rc = dyn_session_check_point(s->check, DYN_PT_PROC, p, s->prog->procs[p].entry,
                                     &ins->patch_lo, &ins->patch_hi, why);
    if (rc < 0)
        return rc;
    ins->reloc = 1;
    ins->whole = 0;
    return 0;
}

/* Has procedure PROC points other than its entry and exits (a copy holds only those)? */
static int
other_points(const qpt_space_t *s, uint32_t proc)
{
    for (size_t i = 0; i < s->nins; i++) {
        const qpt_ins_t *o = &s->ins[i];
        if (!o->removed && o->pt.proc == proc && o->pt.kind != QPT_ENTRY
            && o->pt.kind != QPT_EXIT)
            return 1;
    }
    return 0;
}

int
qpt_live_borrow(qpt_space_t *s, qpt_ins_t *ins)
{
    const qpt_point_t *pt = &ins->pt;
    if (s->check == NULL || pt->proc >= s->prog->nprocs || !relocates(s)
        || (pt->kind != QPT_ENTRY && pt->kind != QPT_EXIT))
        return QP_EUNSUPP;
    const cfg_proc_t *pr = &s->prog->procs[pt->proc];
    int in_entry = cfg_block_at(s->prog, pt->addr - s->bias) == pr->block;
    /* Its procedure borrows already: the same point (its entry block moved whole) or
     * nothing (one slot per borrower). */
    for (size_t i = 0; i < s->nins; i++) {
        const qpt_ins_t *o = &s->ins[i];
        if (o->removed || o->pt.proc != pt->proc || o->lender == 0)
            continue;
        if (!o->whole || !in_entry)
            return QP_EUNSUPP;
        ins->whole = 1;
        ins->reloc = 0;
        ins->lender = o->lender;
        ins->slot_for = o->slot_for;
        ins->patch_lo = o->patch_lo;
        ins->patch_hi = o->patch_hi;
        return 0;
    }
    /* In place where it can: its entry block moved whole (an exit there joins it
     * later), an entry's short jump; else the procedure relocated whole, entered through
     * the slot. */
    int kinds[3], nk = 0;
    if (in_entry)
        kinds[nk++] = DYN_PT_WHOLE;
    if (pt->kind == QPT_ENTRY)
        kinds[nk++] = DYN_PT_ENTRY;
    if (!other_points(s, pt->proc))
        kinds[nk++] = DYN_PT_PROC;
    uint32_t borrower = pt->proc;
    void *arg[2] = { s, &borrower };
    for (int k = 0; k < nk; k++) {
        uint32_t lender;
        uint64_t lo, hi, near;
        const char *why = NULL;
        int rc = dyn_session_check_borrow(s->check, kinds[k], pt->proc, pr->entry, may_lend,
                                          arg, &lender, &near, &lo, &hi, &why);
        if (rc == QP_EUNSUPP)
            continue;
        if (rc < 0)
            return rc;
        if (s->lent == NULL && (s->lent = calloc(s->prog->nprocs + 1, 1)) == NULL)
            return QP_ENOMEM;
        QP_CHECK(into_copy(s, lender));
        s->lent[lender] = 1;
        ins->whole = kinds[k] == DYN_PT_WHOLE;
        ins->reloc = kinds[k] == DYN_PT_PROC;
        ins->lender = lender + 1;
        ins->slot_for = near;
        ins->patch_lo = lo;
        ins->patch_hi = hi;
        return 0;
    }
    return QP_EUNSUPP;
}
