/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Live patching, the points of callers that choose them one by one (libqpt; see
 * dyn_patch.c): neighbour slots, and what a call site takes (dynp_check_call).
 */
#include "config.h"

#include "dynamic/dyn_patch_priv.h"

/*****************************************************************************
 * Neighbour slots for callers that choose points one by one (libqpt)
 */

int
dyn_session_check_borrow(const dyn_session_t *s, int kind, uint32_t proc, uint64_t addr,
    int (*lend)(void *arg, uint32_t proc), void *arg, uint32_t *lender /*OUT*/,
    uint64_t *near /*OUT*/, uint64_t *lo /*OUT*/, uint64_t *hi /*OUT*/,
    const char **why /*OUT*/)
{
    static const char *unused;
    dyn_session_t *w = (dyn_session_t *)s;
    uint32_t nb[8];
    const char *names[8];

    if (why == NULL)
        why = &unused;
    *why = NULL;
    if (s == NULL || lend == NULL || lender == NULL || near == NULL || proc >= s->prog->nprocs
        || (kind != DYN_PT_ENTRY && kind != DYN_PT_WHOLE && kind != DYN_PT_PROC))
        return QP_EINVAL;
    uint64_t e = s->prog->procs[proc].entry;
    *why = "no neighbour to borrow bytes from";
    if (addr != e || dynp_has_shadow_stack(w) || s->nb_depth > 0 || s->nb_want != 0)
        return QP_EUNSUPP;
    /* Relocated whole, the short jump that wants a slot may be a return site's: the
     * first one its copy could not find a slot for. */
    uint64_t at = e;
    if (kind == DYN_PT_PROC) {
        const char *w0;
        w->nb_need = 0;
        int rc
            = dynp_reloc_point(w, 0, proc, addr, NULL, NULL, NULL, NULL, NULL, NULL, &w0);
        if (rc == 0 || w->nb_need == 0) {
            w->nb_need = 0;
            return rc < 0 && rc != QP_EUNSUPP ? rc : QP_EUNSUPP;
        }
        at = w->nb_need;
        w->nb_need = 0;
    }
    size_t n = dynp_neighbours(w, proc, at, nb, names, 8);
    w->nb_pun = kind == DYN_PT_WHOLE && dynp_pun_site(s, at);
    for (size_t k = 0; k < n; k++) {
        if (!lend(arg, nb[k]))
            continue;
        size_t c0 = w->ncand, r0 = w->nrows, p0 = w->npads;
        uint32_t row;
        int err = 0, rc = QP_EUNSUPP;
        const char *wy;
        /* The neighbour as it would go in (with its exits' snippets: exits 1), keeping
         * a slot within the short jump's reach; then the point, which takes it. */
        w->nb_want = at;
        w->nb_slot = 0;
        w->nb_depth++;
        wy = dynp_check_reloc(w, nb[k], names[k], 0, 1, &row, &err);
        w->nb_depth--;
        w->nb_want = 0;
        if (err == 0 && wy == NULL && w->nb_slot != 0) {
            point_t pt;
            uint64_t l = 0, h = 0;
            if (kind == DYN_PT_PROC)
                rc = dynp_reloc_point(
                    w, 0, proc, addr, NULL, NULL, NULL, NULL, &l, &h, &wy);
            else if ((rc = dynp_check_point(w, kind, proc, addr, &pt, &wy)) == 0) {
                l = pt.entry;
                h = pt.entry + pt.len;
            }
            if (rc == 0 && w->nb_slot != 0)
                rc = QP_EUNSUPP; /* (the slot not taken: not what it wanted) */
            if (rc == 0) {
                *lender = nb[k];
                *near = at;
                if (lo != NULL)
                    *lo = l;
                if (hi != NULL)
                    *hi = h;
            }
        }
        w->nb_slot = 0;
        w->ncand = c0;
        w->nrows = r0;
        w->npads = p0;
        if (err < 0 || rc == 0 || rc != QP_EUNSUPP)
            w->nb_pun = 0;
        if (err < 0)
            return err;
        if (rc == 0) {
            *why = NULL;
            return 0;
        }
        if (rc != QP_EUNSUPP)
            return rc;
    }
    w->nb_pun = 0;
    return QP_EUNSUPP;
}

int
dyn_session_want_slot(dyn_session_t *s, uint64_t near)
{
    if (s == NULL || s->installed)
        return QP_EINVAL;
    s->nb_want = near;
    s->nb_slot = 0;
    s->nb_pun = near != 0 && dynp_pun_site(s, near);
    return 0;
}

int
dyn_session_slot_kept(dyn_session_t *s)
{
    if (s == NULL)
        return QP_EINVAL;
    s->nb_want = 0;
    return s->nb_slot != 0;
}

int
dyn_session_add_lender(dyn_session_t *s, uint32_t proc, const char *name,
    uint32_t *row /*OUT*/, const char **why /*OUT*/)
{
    static const char *unused;
    uint32_t r;
    int err = 0;

    if (why == NULL)
        why = &unused;
    *why = NULL;
    if (s == NULL || s->installed || proc >= s->prog->nprocs)
        return QP_EINVAL;
    *why = dynp_check_reloc(s, proc, name, 0, 1, &r, &err);
    QP_CHECK(err);
    if (*why != NULL)
        return QP_EUNSUPP;
    if (row != NULL)
        *row = r;
    return 0;
}

/*****************************************************************************
 * Call sites: what a counter before a call takes in place
 */

/* The call sites of procedure I (chosen by NAME): rows and candidates, or refusals. */
/* Does the program carry C++-style exception tables (.gcc_except_table)? */
int
dynp_has_except_table(const cfg_image_t *img)
{
    for (size_t i = 0; i < img->nsections; i++)
        if (strcmp(img->sections[i].name, ".gcc_except_table") == 0)
            return 1;
    return 0;
}

/*
 * PT, a call shorter than the jump at the end of block BL, with the instructions that
 * follow it moved along (whole ones, up to the 5 bytes of the jump): only when its
 * return site is reached from the call alone (so nothing but the callee's return lands
 * there, and a thread inside the callee, whose return address would be inside the jump,
 * makes install refuse the point) and they are plain instructions. Why not, or NULL with
 * PT's len, ninsns, orig and call_len set.
 */
static const char *
call_with_next(const dyn_session_t *s, const cfg_block_t *bl, point_t *pt)
{
    const cfg_prog_t *prog = s->prog;
    uint32_t r = cfg_block_at(prog, bl->end);
    const cfg_block_t *rb;
    const uint8_t *bytes;
    size_t avail, len = pt->len;

    if (r == CFG_NONE || (rb = &prog->blocks[r])->start != bl->end || rb->npred != 1
        || rb->proc != bl->proc)
        return "the call is shorter than the 5-byte jump, with no padding within reach "
               "and its return site reached from elsewhere";
    if (dynp_proc_entry_in(prog, bl->end, bl->end + JMP_LEN))
        return "another procedure starts after the call";
    if ((bytes = cfg_image_ptr(prog->img, bl->end, &avail)) == NULL)
        return "no bytes in the file";
    while (len < JMP_LEN) {
        arch_insn_t in;
        size_t off = len - pt->len;
        if (bl->end + off >= rb->end
            || arch_decode(bytes + off, avail - off, pt->entry + len, &in) < 0
            || bl->end + off + in.len > rb->end
            || (in.kind != ARCH_KIND_SEQ && in.kind != ARCH_KIND_NOP)
            || (in.flags & ARCH_F_PRIV) || len + in.len > sizeof(pt->orig))
            return "the call is shorter than the 5-byte jump, with no padding within "
                   "reach nor plain instructions after it";
        memcpy(pt->orig + len, bytes + off, in.len);
        len += in.len;
        pt->ninsns++;
    }
    pt->call_len = pt->len;
    pt->len = (uint8_t)len;
    return NULL;
}

/* Does a callee of this name keep its return address beyond the stack (setjmp and
 * its kin, which a call made from a trampoline would confuse)? */
static int
keeps_return(const char *callee)
{
    return callee != NULL
        && (strstr(callee, "setjmp") != NULL || strstr(callee, "vfork") != NULL
            || strstr(callee, "getcontext") != NULL || strstr(callee, "savectx") != NULL);
}

const char *
dynp_check_call(dyn_session_t *s, const cfg_block_t *bl, const arch_insn_t *in,
    const uint8_t *bytes, const char *callee, point_t *pt)
{
    uint64_t a = in->addr;

    if (dynp_has_except_table(s->prog->img))
        return "the program has exception tables: an exception thrown through the call "
               "would find no unwind information for its return address in the "
               "trampoline";
    if (in->kind == ARCH_KIND_CALL && in->target == a + in->len)
        return "a call to the next instruction reads its own return address";
    if (keeps_return(callee))
        return "the callee keeps its return address beyond the stack";
    memset(pt, 0, sizeof(*pt));
    pt->kind = PT_CALL;
    pt->proc = bl->proc;
    pt->entry = a + s->bias;
    pt->len = in->len;
    pt->ninsns = 1;
    memcpy(pt->orig, bytes, in->len);
    /* Shorter than the jump (`call *%rax`): a jmp rel8 inside the call, to a jump in
     * padding (the call is one instruction: nothing lands inside it), or else the jump
     * covers the first instructions of its return site too. */
    const char *why;
    if (in->len < JMP_LEN && (why = dynp_find_pad(s, a, pt)) != NULL
        && (why = call_with_next(s, bl, pt)) != NULL)
        return why;
    return NULL;
}
