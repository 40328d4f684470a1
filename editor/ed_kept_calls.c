/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Direct calls and jumps of AArch64 code left in place, retargeted to the new entries
 * (issue 34). A procedure that stays (a switch whose table base the analysis cannot
 * follow: sqlite's VM) calls moved procedures through the redirects at their old
 * entries, one `b` more per call. Its `bl` and `b` to a moved procedure's entry go
 * straight to where that redirect jumps instead (the entry's slot, its snippets for
 * calls included, so counts stay the same); the return address stays the caller's own.
 * Only where it is sure to be code and an instruction: procedures that stay with
 * nothing against patching them but the missing in-place patcher (vouched for, not
 * data, not copied by the program, readable unwind tables: ed_select.c's
 * edl_unfit_a64), in blocks their entry reaches through known edges (not bytes swept
 * after a jump of unknown targets), and only a `bl` or `b` whose new target is in its
 * reach (the 4-byte form). The redirects stay for everything else.
 */
#include <stdlib.h>
#include <string.h>

#include "editor/ed_layout_priv.h"

/* The blocks of procedure P that its entry reaches through known edges: 1 in SEEN
 * (indexed from p->block). 0 or QP_ENOMEM. */
static int
reached_blocks(const cfg_prog_t *prog, const cfg_proc_t *p, uint8_t *seen)
{
    uint32_t *stack = malloc((p->nblocks + 1) * sizeof(uint32_t)), n = 0;
    if (stack == NULL)
        return QP_ENOMEM;
    stack[n++] = p->block;
    seen[0] = 1;
    while (n > 0) {
        const cfg_block_t *bl = &prog->blocks[stack[--n]];
        for (uint32_t e = 0; e < bl->nsucc; e++) {
            uint32_t to = cfg_block_succ(prog, bl, e)->to;
            if (to == CFG_NONE || to < p->block || to >= p->block + p->nblocks
                || seen[to - p->block])
                continue;
            seen[to - p->block] = 1;
            stack[n++] = to;
        }
    }
    free(stack);
    return 0;
}

/* The new address a direct branch of code that stays to TARGET should take: a moved
 * procedure's entry slot (where its redirect jumps), else 0. */
static uint64_t
new_entry(const ed_plan_t *plan, uint64_t target)
{
    uint32_t o = edl_owner_at(plan->prog, target);
    if (o == CFG_NONE || plan->reason[o] != NULL || plan->prog->procs[o].entry != target)
        return 0;
    return edl_slot_new(plan, target);
}

int
edl_retarget_kept_calls(ed_plan_t *plan, const qp_space_ops_t *ops, void *space)
{
    const cfg_prog_t *prog = plan->prog;
    if (plan->isa->elf_machine != ARCH_EM_AARCH64 || plan->unfit == NULL)
        return 0;
    for (uint32_t pi = 0; pi < prog->nprocs; pi++) {
        const cfg_proc_t *p = &prog->procs[pi];
        if (plan->reason[pi] == NULL || plan->unfit[pi] != edl_unfit_a64 || p->nblocks == 0)
            continue;
        uint8_t *seen = calloc(p->nblocks, 1);
        if (seen == NULL)
            return QP_ENOMEM;
        int rc = reached_blocks(prog, p, seen);
        for (uint32_t b = 0; b < p->nblocks && rc == 0; b++) {
            const cfg_block_t *bl = &prog->blocks[p->block + b];
            for (uint64_t a = bl->start; seen[b] && a + 4 <= bl->end && rc == 0; a += 4) {
                size_t avail;
                const uint8_t *bytes = cfg_image_ptr(prog->img, a, &avail);
                arch_insn_t in;
                if (bytes == NULL || plan->isa->decode(bytes, avail, a, &in) < 0
                    || (in.kind != ARCH_KIND_CALL && in.kind != ARCH_KIND_JMP))
                    continue;
                uint64_t to = new_entry(plan, in.target);
                uint8_t out[ARCH_MAX_RELOC];
                if (to == 0
                    || plan->isa->reloc_insn(bytes, &in, a, to, 0, out, sizeof(out)) != 4)
                    continue; /* (out of reach: a veneer would not fit) */
                rc = ops->write(space, a, out, 4);
                plan->stats.nkept_branches++;
            }
        }
        free(seen);
        QP_CHECK(rc);
    }
    return 0;
}
