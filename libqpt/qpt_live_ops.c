/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A process's kind of space (qpt_live_ops): what qpt_space.c and qpt_process.c dispatch
 * to for a live process or one of its libraries. The work is qpt_live.c's and
 * qpt_events.c's; the few rules that differ from a file's are here.
 */
#include "config.h"

#include <stdlib.h>

#include "libqpt/qpt_priv.h"

/* A process is measured as it is loaded: no Go or GHC rule, nothing rewritten before. */
static const char *
live_image_refusal(qpt_space_t *s)
{
    return ed_image_unsupported(s->img);
}

static void
live_close(qpt_space_t *s, int kill)
{
    if (kill && s->parent == NULL && s->spawned)
        s->kill_on_close = 1;
    qpt_live_close(s);
}

/* Left unmeasured only where its code cannot be patched safely. */
static const char *
live_proc_refusal(const qpt_space_t *s, uint32_t proc)
{
    return s->prog->procs[proc].unsafe;
}

/* An edge's snippet goes at its destination block, when the edge is the only way in. */
static int
live_edge_place(qpt_space_t *s, const qpt_point_t *pt, const cfg_block_t *to, qpt_ins_t *ins)
{
    if (to->npred != 1 || to->start == s->prog->procs[pt->proc].entry)
        return qpt_fail(s, QP_EUNSUPP, "%s: the edge 0x%llx -> 0x%llx is not the only way "
                        "into its block: a live process can only patch its destination",
                        qpt_proc_name(s, pt->proc), (unsigned long long)pt->addr,
                        (unsigned long long)pt->to);
    ins->where = pt->to;
    return 0;
}

/* Live: a call that never returns ends the procedure there (a longjmp, an error
 * raised): an exit, its snippet before the call. */
static int
live_call_is_exit(const qpt_space_t *s, const cfg_block_t *b)
{
    return cfg_block_call_never_returns(s->prog, b);
}

/* A conditional tail call: the snippet runs on its taken side only; a call that never
 * returns: before it, no return value. */
static int
live_exit_other(qpt_space_t *s, const qpt_point_t *pt, const arch_insn_t *in,
                arch_snip_ctx_t *c)
{
    (void)s;
    (void)pt;
    (void)in;
    *c = (arch_snip_ctx_t) { 0, 0, ARCH_FLAGS_STATUS, 1 };
    return 0;
}

/* Whether the point fits the process's code (a patch, or its procedure relocated). */
static int
live_accept(qpt_space_t *s, qpt_ins_t *ins)
{
    const char *no;
    int rc = qpt_live_point_ok(s, ins, &no);
    if (rc == QP_EEXITED) {
        rc = qpt_live_gone(s, 0);
        return rc < 0 ? rc : qpt_fail(s, QP_EEXITED, "the process has exited");
    }
    if (rc < 0)
        return qpt_fail(s, rc == QP_EINVAL ? QP_EINVAL : QP_EUNSUPP, "%s at 0x%llx: %s",
                        qpt_proc_name(s, ins->pt.proc), (unsigned long long)ins->where, no);
    return 0;
}

static int
live_cycles(qpt_space_t *s, const qpt_ins_t *in, double *cycles)
{
    (void)s;
    QP_CHECK(arch_snip_cycles(in->nodes, in->n, in->root, &in->ctx, in->where, cycles));
    *cycles += 2; /* the jump to its trampoline and back */
    return 0;
}

/* Whether PROC's entry and exits would run in a copy of it (relocated whole): one
 * already is, a point does not fit in place, or two points' jumps overlap. */
static int
live_runs_as_copy(qpt_space_t *s, uint32_t proc)
{
    for (size_t i = 0; i < s->nins; i++)
        if (!s->ins[i].removed && s->ins[i].pt.proc == proc && s->ins[i].reloc)
            return 1;
    size_t nx = 0;
    if (qpt_points(s, proc, QPT_EXIT, NULL, 0, &nx) < 0)
        return 1;
    qpt_point_t *pts = malloc((nx + 1) * sizeof(qpt_point_t));
    if (pts == NULL)
        return QP_ENOMEM;
    size_t n = 0;
    int copy = qpt_points(s, proc, QPT_ENTRY, pts, 1, &n) < 0 || n != 1
               || qpt_points(s, proc, QPT_EXIT, pts + 1, nx, &n) < 0;
    qpt_ins_t *ins = calloc(nx + 1, sizeof(qpt_ins_t));
    if (ins == NULL) {
        free(pts);
        return QP_ENOMEM;
    }
    for (size_t i = 0; !copy && i < nx + 1; i++) {
        const char *why;
        ins[i].pt = pts[i];
        copy = qpt_point_setup(s, &pts[i], &ins[i]) < 0 || qpt_live_point_ok(s, &ins[i], &why) < 0
               || ins[i].reloc;
        /* Two of them over the same bytes: the procedure is relocated whole too. */
        for (size_t j = 0; !copy && j < i; j++)
            copy = !ins[i].whole && !ins[j].whole && ins[i].where != ins[j].where
                   && ins[i].patch_lo < ins[j].patch_hi && ins[j].patch_lo < ins[i].patch_hi;
    }
    free(ins);
    free(pts);
    return copy;
}

static int
live_set_active(qpt_space_t *s, int on)
{
    return qpt_public_rc(qpt_live_set_active(s, on));
}

static int
live_set_relocate(qpt_space_t *s, int on)
{
    s->relocate = on != 0;
    return 0;
}

static int
live_commit(qpt_space_t *s)
{
    for (qpt_space_t *l = s->libs; l != NULL; l = l->next_lib)
        l->refused = 0; /* (qpt_commit_refused: this commit's only) */
    int rc = qpt_live_commit(s);
    /* Its libraries' spaces (qpt_library) with it; not those unloaded or gone with an
     * exec (stale: nothing of theirs is in the process any more). */
    for (qpt_space_t *l = s->libs; rc == 0 && l != NULL; l = l->next_lib)
        if (!l->stale && (rc = qpt_live_commit(l)) < 0)
            qpt_fail(s, rc, "%s: %s", l->lib_name, l->err);
    return qpt_public_rc(rc);
}

static int
live_write_file(qpt_space_t *s, const char *output)
{
    (void)output;
    return qpt_fail(s, QP_EUNSUPP, "a process takes its snippets at qpt_commit");
}

const qpt_space_ops_t qpt_live_ops = {
    .kind = "process",
    .live = 1,
    .image_refusal = live_image_refusal,
    .close = live_close,
    .proc_refusal = live_proc_refusal,
    .edge_place = live_edge_place,
    .call_is_exit = live_call_is_exit,
    .exit_other = live_exit_other,
    .accept = live_accept,
    .cycles = live_cycles,
    .alloc = qpt_live_alloc,
    .free = qpt_live_free,
    .set_active = live_set_active,
    .set_relocate = live_set_relocate,
    .keep_on_exit = qpt_live_keep_on_exit,
    .read = qpt_live_read,
    .write = qpt_live_write,
    .commit = live_commit,
    .write_file = live_write_file,
    .alive = qpt_live_alive,
    .library = qpt_live_library,
    .run = qpt_live_run,
    .stop = qpt_live_stop,
    .ended = qpt_live_ended,
    .syscall = qpt_live_syscall,
    .call_now = qpt_live_call_now,
    .pid = qpt_live_pid,
    .runs_as_copy = live_runs_as_copy,
    .thread_stacks = qpt_live_stacks,
    .thread_block = qpt_live_thread_block,
    .cpu_slots = qpt_live_cpu_slots,
    .watch = qpt_live_watch,
    .next_event = qpt_live_next_event,
    .set_callback = qpt_live_set_callback,
    .wait = qpt_live_wait,
};
