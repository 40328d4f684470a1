/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Entry counters, timers and call-site counters in a live process (see emit_tramp for
 * the three kinds of trampoline; a timed procedure is patched at its entry and at every
 * exit, all or nothing). Each patched procedure entry gets a 5-byte jump to
 * its trampoline: `lock incq counter(%rip)` (flags saved around it only where the ABI
 * does not say they are dead), the original instructions it replaced, relocated, and a
 * jump back (built by patch/'s pt_tramp_emit). A point is patched only when the CFG proves that no
 * branch lands inside the replaced bytes and no thread is inside them (pcs, and return
 * addresses found near the top of each stack for signal frames). Removal writes back
 * every original byte; the trampoline memory is unmapped unless a thread may still be
 * in it. A row's own counter and timer words (run where a point has no snippet of its
 * own before it) are anonymous memory near the code.
 */
#include "config.h"

#include "dynamic/dyn_patch_priv.h"

/* Bytes written at PT's first replaced byte: a jmp rel32, or a jmp rel8 to its pad (its
 * opcode alone for a pun), or a jmp rel32 after a kept first byte. */
size_t
dynp_patch_len(const point_t *pt)
{
    return pt->pun ? 1 : pt->keep_first ? JMP_LEN + 1 : pt->pad ? SHORT_LEN : JMP_LEN;
}

/* Would PT's jump cross a page boundary (install refuses it: it could not be written in
 * one piece)? Known at selection, so that another way is tried. */
int
dynp_crosses_page(const point_t *pt)
{
    return (pt->entry & 4095) > 4096 - dynp_patch_len(pt);
}

int
dynp_refuse_name(dyn_session_t *s, const char *name, const char *why)
{
    if (s->nref == s->capref) {
        size_t cap = s->capref ? 2 * s->capref : 16;
        refusal_t *n = realloc(s->ref, cap * sizeof(*n));
        if (n == NULL)
            return QP_ENOMEM;
        s->ref = n;
        s->capref = cap;
    }
    s->ref[s->nref].name = name;
    s->ref[s->nref].row = UINT32_MAX;
    s->ref[s->nref++].why = why;
    return 0;
}

/* A new row; its index in *ROW. */
int
dynp_add_row(dyn_session_t *s, const char *name, uint32_t proc, int timed, uint32_t *row)
{
    if (s->nrows == s->caprows) {
        size_t cap = s->caprows ? 2 * s->caprows : 64;
        row_t *n = realloc(s->rows, cap * sizeof(*n));
        if (n == NULL)
            return QP_ENOMEM;
        s->rows = n;
        s->caprows = cap;
    }
    s->rows[s->nrows].name = name;
    s->rows[s->nrows].proc = proc;
    s->rows[s->nrows].timed = (uint8_t)(timed != 0);
    s->rows[s->nrows].bad = 0;
    s->rows[s->nrows].why = NULL;
    *row = (uint32_t)s->nrows++;
    return 0;
}

int
dynp_add_cand(dyn_session_t *s, const point_t *pt)
{
    if (pt->spill)
        QP_CHECK(dynp_pad_take(s, pt->entry - s->bias + pt->len - pt->spill));
    if (s->ncand == s->capcand) {
        size_t cap = s->capcand ? 2 * s->capcand : 64;
        point_t *n = realloc(s->cand, cap * sizeof(*n));
        if (n == NULL)
            return QP_ENOMEM;
        s->cand = n;
        s->capcand = cap;
    }
    s->cand[s->ncand++] = *pt;
    return 0;
}

/* "NAME+0xOFF->CALLEE" as a string owned by the session, or NULL. */
const char *
dynp_site_name(
    dyn_session_t *s, const char *name, char sign, uint64_t off, const char *callee)
{
    size_t need = strlen(name) + strlen(callee) + 24;
    char *c;
    if (s->nstrs == s->capstrs) {
        size_t cap = s->capstrs ? 2 * s->capstrs : 16;
        char **n = realloc(s->strs, cap * sizeof(*n));
        if (n == NULL)
            return NULL;
        s->strs = n;
        s->capstrs = cap;
    }
    if ((c = malloc(need)) == NULL)
        return NULL;
    snprintf(c, need, "%s%c0x%llx->%s", name, sign, (unsigned long long)off, callee);
    s->strs[s->nstrs++] = c;
    return c;
}

/* Mark row R refused (once, with WHY). */
int
dynp_row_bad(dyn_session_t *s, uint32_t r, const char *why)
{
    if (s->rows[r].bad)
        return 0;
    s->rows[r].bad = 1;
    s->rows[r].why = why;
    QP_CHECK(dynp_refuse_name(s, s->rows[r].name, why));
    s->ref[s->nref - 1].row = r;
    return 0;
}

int
dyn_session_create(
    dyn_proc_t *p, const cfg_prog_t *prog, uint64_t bias, dyn_session_t **out /*OUT*/)
{
    dyn_session_t *s;

    if (p == NULL || prog == NULL || out == NULL)
        return QP_EINVAL;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return QP_ENOMEM;
    s->chosen = calloc(prog->nprocs ? prog->nprocs : 1, 1);
    if (s->chosen == NULL) {
        free(s);
        return QP_ENOMEM;
    }
    s->p = p;
    s->prog = prog;
    s->bias = bias;
    s->shstk = -1;
    s->go = cfg_image_runtime(prog->img) == CFG_RUNTIME_GO;
    *out = s;
    return 0;
}

void
dyn_session_keep_decoded(dyn_session_t *s, pt_decoded_t *d)
{
    if (s != NULL)
        s->decoded = d;
}

pt_decoded_t *
dyn_decoded_new(void)
{
    return pt_decoded_new();
}

void
dyn_decoded_free(pt_decoded_t *d)
{
    pt_decoded_free(d);
}

/*****************************************************************************
 * Removing
 */

/* Every instruction of the installed copies, copy to original, sorted (malloc'd: free
 * it); NULL when there is none or no memory. */
static dyn_pc_map_t *
copies_map(const dyn_session_t *s, size_t *n)
{
    size_t total = 0, k = 0;
    for (size_t i = 0; i < s->npts; i++)
        total += s->pts[i].map != NULL ? s->pts[i].nmap : 0;
    dyn_pc_map_t *v = total ? malloc(total * sizeof(*v)) : NULL;
    if (v == NULL)
        return NULL;
    for (size_t i = 0; i < s->npts; i++)
        for (size_t j = 0; s->pts[i].map != NULL && j < s->pts[i].nmap; j++)
            v[k++] = (dyn_pc_map_t) { s->pts[i].map[j].copy, s->pts[i].map[j].orig };
    dyn_pc_map_sort(v, k);
    *n = k;
    return v;
}

/*
 * Threads parked on the jump in padding of a short entry of the points of the round
 * (EXITS: the exits', else the others') moved to where it leads, before its bytes go
 * back: one left there would run the padding's original bytes (another procedure's code,
 * or nops into it), not its procedure. 0, QP_ENOMEM, or QP_EIO (QP_EINVAL: P not
 * stopped); on an error a thread may still stand on such a jump.
 */
static int
move_off_pads(dyn_session_t *s, int exits)
{
    dyn_pc_map_t *v = NULL;
    size_t k = 0;
    int rc;

    for (size_t i = 0; i < s->npts; i++) {
        const point_t *pt = &s->pts[i];
        int32_t rel;
        uint8_t mem[JMP_LEN];
        if (pt->pad == 0 || (pt->kind == PT_EXIT) != exits || pt->pad_patch[0] != 0xe9
            || dyn_proc_read(s->p, pt->pad, mem, JMP_LEN) < 0
            || memcmp(mem, pt->pad_patch, JMP_LEN) != 0)
            continue;
        if (k % 16 == 0) {
            dyn_pc_map_t *n = realloc(v, (k + 16) * sizeof(*v));
            if (n == NULL) {
                free(v);
                return QP_ENOMEM;
            }
            v = n;
        }
        memcpy(&rel, pt->pad_patch + 1, 4);
        v[k++] = (dyn_pc_map_t) { pt->pad, pt->pad + JMP_LEN + (uint64_t)(int64_t)rel };
    }
    dyn_pc_map_sort(v, k);
    rc = dyn_proc_move_pcs(s->p, v, k, NULL);
    free(v);
    return rc;
}

int
dyn_session_remove(dyn_session_t *s, int *leaked /*OUT*/)
{
    dyn_thread_info_t *ti = NULL;
    uint64_t *w = NULL;
    size_t nt = 0, nw = 0;
    int rc = 0, keep = 0;

    if (leaked != NULL)
        *leaked = 0;
    if (s == NULL || !dyn_proc_is_stopped(s->p))
        return QP_EINVAL;
    if (!s->installed || s->code == 0) {
        s->installed = 0;
        return 0;
    }
    /*
     * Two rounds: every point but the exits back first, and the threads inside a
     * trampoline let out (no calls, no loops there; inside the copy of a procedure,
     * loops there, moved to the same instruction of the original); then the exits, and
     * out again. A thread let out runs a moment on its own: one that left an entry's
     * trampoline after its timer started may run to its procedure's return meanwhile,
     * and must find the exit's stop there (else the timer never stops).
     */
    dyn_pc_map_t *pcs = NULL;
    size_t npcs = 0;
    for (int round = 0; round < 2; round++) {
        /*
         * Threads not moved off the padding jumps (no memory, or a ptrace error) may
         * stand on one: the points with padding stay in, and the trampolines they lead
         * to stay mapped, as when a thread cannot leave.
         */
        int err = move_off_pads(s, round == 1), pads_stay = err < 0;
        if (pads_stay) {
            keep = 1;
            if (rc == 0)
                rc = err;
        }
        for (size_t i = 0; i < s->npts; i++)
            if ((s->pts[i].kind == PT_EXIT) == (round == 1)
                && !(pads_stay && s->pts[i].pad != 0)
                && dynp_unpatch(s->p, &s->pts[i], 1) < 0 && rc == 0)
                rc = QP_EIO;
        nt = 0;
        if (dyn_proc_threads(s->p, NULL, 0, &nt) < 0) {
            keep = 1;
            continue;
        }
        if (nt == 0)
            continue;
        free(ti);
        if ((ti = calloc(nt, sizeof(*ti))) == NULL || dyn_proc_threads(s->p, ti, nt, &nt) < 0) {
            keep = 1;
            continue;
        }
        /*
         * A thread that cannot leave in the first round is tried again in the second,
         * and only that one keeps the code: one in an exit's trampoline whose tail loops
         * back to its own patched block (a leaf loop falling into a short ret) goes round
         * through that patch until the exits are back.
         */
        for (size_t i = 0; i < nt; i++) {
            if (ti[i].pc < s->code || ti[i].pc >= s->code + s->code_size)
                continue;
            if (pcs == NULL && (pcs = copies_map(s, &npcs)) == NULL)
                npcs = 0;
            if (dyn_proc_leave_map(s->p, ti[i].tid, s->code, s->code + s->code_size, pcs,
                    npcs, round == 0 ? LEAVE_TRIES / 10 : LEAVE_TRIES)
                    < 0
                && round == 1)
                keep = 1;
        }
    }
    free(pcs);
    free(ti);
    ti = NULL;
    /*
     * A signal frame or return address pointing into the trampolines keeps them; the
     * return address of a moved call only needs its jmp back (kept anyway), not the
     * counters.
     */
    if (!keep && dyn_proc_words(s->p, STACK_SCAN, &w, &nw) == 0) {
        size_t i = cfg_u64_lower_bound(w, nw, s->code);
        for (; i < nw && w[i] < s->code + s->code_size && !keep; i++) {
            keep = 1;
            for (size_t k = 0; k < s->npts && keep; k++)
                if (s->pts[k].kind == PT_CALL && s->pts[k].ret_at == w[i])
                    keep = 0;
        }
    } else {
        keep = 1;
    }
    free(w);
    /*
     * Call-site trampolines: a callee still running (on any stack, also one not scanned:
     * a coroutine's, or an address saved in a jmp_buf) returns into its jmp back to the
     * restored code, so that code stays mapped. Nothing there reads the counters.
     */
    if (dyn_session_reroute_returns(s, NULL) < 0 && rc == 0)
        rc = QP_EIO;
    if (!keep && !s->has_calls)
        dyn_space_free(s->p, s->code, s->code_size);
    if (!keep && dyn_space_free(s->p, s->ctr, s->ctr_size) == 0 && s->has_calls)
        dyn_tramp_forget_counters(s->p, s->code);
    if (leaked != NULL)
        *leaked = keep ? 1 : s->has_calls ? 2 : 0;
    s->installed = 0;
    return rc;
}

/* Does PT's trampoline run snippets after its call (the return address it pushes,
 * ret_at, leads into them)? */
static int
runs_after_call(const point_t *pt)
{
    return pt->kind == PT_CALL && pt->after.nodes != NULL && !pt->call_len && !pt->reloc
           && pt->ret_at != 0 && pt->tramp != 0;
}

int
dyn_session_reroute_returns(dyn_session_t *s, const dyn_session_t *next)
{
    if (s == NULL || !dyn_proc_is_stopped(s->p))
        return QP_EINVAL;
    int rc = 0;
    for (size_t i = 0; i < s->npts; i++) {
        const point_t *pt = &s->pts[i];
        if (!runs_after_call(pt))
            continue;
        uint64_t to = pt->entry + pt->len - pt->spill; /* after the call, in place */
        for (size_t k = 0; next != NULL && next->installed && k < next->npts; k++)
            if (runs_after_call(&next->pts[k]) && next->pts[k].entry == pt->entry)
                to = next->pts[k].ret_at;
        uint8_t jmp[JMP_LEN];
        if (pt_tramp_patch(pt->ret_at, to, jmp, sizeof(jmp)) < 0
            || dyn_proc_write(s->p, pt->ret_at, jmp, JMP_LEN) < 0)
            rc = QP_EIO;
    }
    return rc;
}

int
dyn_session_drop(dyn_session_t *s, int gone_all)
{
    dyn_thread_info_t *ti = NULL;
    size_t nt = 0;
    int keep = 0;

    if (s == NULL || (!gone_all && !dyn_proc_is_stopped(s->p)))
        return QP_EINVAL;
    if (!s->installed || s->code == 0) {
        s->installed = 0;
        return 0;
    }
    if (gone_all) {
        s->installed = 0;
        return 0;
    }
    /* The module is gone: nothing jumps here any more but a thread already inside. */
    if (dyn_proc_threads(s->p, NULL, 0, &nt) == 0 && nt > 0
        && (ti = calloc(nt, sizeof(*ti))) != NULL
        && dyn_proc_threads(s->p, ti, nt, &nt) == 0) {
        for (size_t i = 0; i < nt; i++)
            keep |= ti[i].pc >= s->code && ti[i].pc < s->code + s->code_size;
    } else {
        keep = 1;
    }
    free(ti);
    if (!keep) {
        dyn_space_free(s->p, s->code, s->code_size);
        dyn_space_free(s->p, s->ctr, s->ctr_size);
    }
    s->installed = 0;
    return keep;
}

int
dyn_session_unpatch_copy(const dyn_session_t *s, dyn_proc_t *child)
{
    int rc = 0;

    if (s == NULL || child == NULL || !dyn_proc_is_stopped(child))
        return QP_EINVAL;
    if (!s->installed)
        return 0;
    for (size_t i = 0; i < s->npts; i++)
        if (dynp_unpatch(child, &s->pts[i], 1) < 0 && rc == 0)
            rc = QP_EIO;
    return rc;
}

size_t
dyn_session_nrefused(const dyn_session_t *s)
{
    return s ? s->nref : 0;
}

const char *
dyn_session_refusal(const dyn_session_t *s, size_t i, const char **why /*OUT*/)
{
    if (s == NULL || i >= s->nref)
        return NULL;
    if (why != NULL)
        *why = s->ref[i].why;
    return s->ref[i].name;
}

uint32_t
dyn_session_refusal_row(const dyn_session_t *s, size_t i)
{
    return s != NULL && i < s->nref ? s->ref[i].row : UINT32_MAX;
}

void
dyn_session_destroy(dyn_session_t *s)
{
    if (s == NULL)
        return;
    free(s->rows);
    free(s->frags);
    free(s->pads);
    for (size_t i = 0; i < s->nstrs; i++)
        free(s->strs[i]);
    free(s->strs);
    for (size_t i = 0; s->pts != NULL && i < s->npts; i++)
        free(s->pts[i].map);
    free(s->pts);
    free(s->foreign);
    free(s->avoid);
    free(s->cand);
    free(s->ref);
    free(s->chosen);
    free(s);
}
