/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The original bytes of moved code in a rewritten program (`qp report --annotate`
 * without --original): a block whose first bytes the redirect to its copy overwrote, or
 * all of whose bytes new code placed in the old text overwrote, is rebuilt from its
 * relocated copy - the instructions are the same but for pc-relative fields (given their
 * original targets), branches the layout widened or shortened (re-encoded), branches
 * through taken-edge stubs (followed to their target) and counter code (skipped).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arch/arch.h"
#include "report/qp_report.h"

/* How many instructions decoding BUF (SIZE bytes at VMA) finds, or 0 if it overruns. */
static uint32_t
count_insns(const uint8_t *buf, size_t size, uint64_t vma)
{
    uint32_t n = 0;
    size_t k = 0;
    while (k < size) {
        arch_insn_t in;
        if (arch_decode(buf + k, size - k, vma + k, &in) != 0)
            return 0;
        k += in.len;
        n++;
    }
    return k == size ? n : 0;
}

#define RECOVER_WINDOW 256 /* how far after new_start the block's copy may start */

/*
 * The original address of NEW, an address in relocated code that a branch of a
 * relocated copy targets: the start of a block (where its edge code begins) or a
 * procedure's entry. 0 when unknown.
 */
static uint64_t
map_back(const qp_desc_t *desc, uint64_t new)
{
    for (uint32_t i = 0; i < desc->hdr.nblocks; i++)
        if (desc->blocks[i].new_start == new)
            return desc->blocks[i].start;
    for (uint32_t i = 0; i < desc->hdr.nprocs; i++)
        if (desc->procs[i].new_entry == new)
            return desc->procs[i].entry;
    return 0;
}

/*
 * The original bytes of one block whose first `head` bytes a redirect overwrote, as
 * they are being rebuilt from the block's relocated copy.
 */
typedef struct recovery {
    const qp_desc_t *desc;     /* for branch targets */
    const qp_desc_block_t *b;  /* the block */
    const uint8_t *buf;        /* its bytes in the file (the first `head` are the jump's) */
    size_t head;               /* bytes overwritten */
    uint8_t *out;              /* b->size bytes being rebuilt */
    size_t lost;               /* offset of an instruction whose bytes stay unknown, or
                                * SIZE_MAX */
    size_t lost_len;           /* its length */
    const cfg_image_t *img;    /* the rewritten program */
} recovery_t;

/* Is ADDR in the new code of IMG (a .qpt.text section)? */
static int
in_new_code(const cfg_image_t *img, uint64_t addr)
{
    for (size_t i = 0; i < img->nsections; i++)
        if (strcmp(img->sections[i].name, ".qpt.text") == 0 && addr >= img->sections[i].vma
            && addr - img->sections[i].vma < img->sections[i].size)
            return 1;
    return 0;
}

static void
mark_lost(recovery_t *r, size_t off, size_t len)
{
    if (r->lost == SIZE_MAX) {
        r->lost = off;
        r->lost_len = len;
    }
}

/*
 * Give the pc-relative field of instruction IN (copied from the relocated code at
 * COPY_VMA, now at offset OFF of the block) its value at the original address: a
 * rip-relative operand addresses the same data, a branch goes to the original of its
 * target. When that is impossible the instruction is marked lost.
 */
static uint64_t original_target(const recovery_t *r, uint64_t new);

static void
fix_pc_relative(recovery_t *r, const arch_insn_t *in, size_t off)
{
    if (in->rel_size == 0)
        return;
    uint64_t target = (in->flags & ARCH_F_BRANCH_REL) ? original_target(r, in->target)
                                                      : in->target;
    int64_t disp = (int64_t)(target - (r->b->start + off + in->len));
    if (target != 0 && in->rel_size == 4 && disp == (int32_t)disp) {
        int32_t d32 = (int32_t)disp;
        memcpy(r->out + off + in->rel_off, &d32, 4);
    } else if (target != 0 && in->rel_size == 1 && disp == (int8_t)disp) {
        r->out[off + in->rel_off] = (uint8_t)(int8_t)disp;
    } else {
        mark_lost(r, off, in->len);
    }
}

/* Bytes of A and B (LEN each) equal outside the pc-relative field of IN. */
static int
same_but_rel(const uint8_t *a, const uint8_t *b, const arch_insn_t *in)
{
    for (size_t i = 0; i < in->len; i++)
        if ((i < in->rel_off || i >= (size_t)in->rel_off + in->rel_size) && a[i] != b[i])
            return 0;
    return 1;
}

/*
 * Try COPY (AVAIL bytes at COPY_VMA) as the block's relocated copy. Its instructions but
 * the last have the original lengths and bytes (pc-relative fields aside): the
 * overwritten bytes are taken from it, and the intact ones must agree with it. The last
 * instruction may differ (a branch re-encoded, counter code before a call that leaves):
 * its original bytes are used when intact, the copy's when it has the same length.
 */
static int is_snippet(const uint8_t *p, size_t n);

/*
 * The original address of a branch target NEW of the relocated code: a block's or a
 * procedure's; through a taken-edge stub (counter code, then a jmp to where the branch
 * went); or NEW itself when it is not new code (a PLT stub). 0 when unknown.
 */
static uint64_t
original_target(const recovery_t *r, uint64_t new)
{
    for (int steps = 0; steps < 16; steps++) {
        if (!in_new_code(r->img, new))
            return new;
        uint64_t old = map_back(r->desc, new);
        size_t avail;
        const uint8_t *q = cfg_image_ptr(r->img, new, &avail);
        arch_insn_t s;
        if (old != 0 || q == NULL || arch_decode(q, avail, new, &s) != 0)
            return old;
        if (s.kind == ARCH_KIND_JMP)
            new = s.target;
        else if (is_snippet(q, avail))
            new += s.len;
        else
            return 0;
    }
    return 0;
}

/*
 * The direct jmp or jcc IN (its bytes at P in the copy) in the form of LEN bytes (2:
 * rel8, 5 or 6: rel32) at offset OFF of the block, to the original of its target: the
 * relocated code widens short branches that no longer reach and shortens others. 0, or
 * -1 when it is no such branch or the target does not fit.
 */
static int
reencode_branch(recovery_t *r, const arch_insn_t *in, const uint8_t *p, size_t off, size_t len)
{
    if ((in->kind != ARCH_KIND_JMP && in->kind != ARCH_KIND_JCC) || in->target == 0)
        return -1;
    uint64_t target = original_target(r, in->target);
    if (target == 0)
        return -1;
    int cc = p[0] >= 0x70 && p[0] <= 0x7f ? p[0] & 0xf
        : p[0] == 0x0f && p[1] >= 0x80 && p[1] <= 0x8f ? p[1] & 0xf : -1;
    if ((in->kind == ARCH_KIND_JCC) != (cc >= 0))
        return -1;
    int64_t disp = (int64_t)(target - (r->b->start + off + len));
    uint8_t *o = r->out + off;
    if (len == 2 && disp == (int8_t)disp) {
        o[0] = cc >= 0 ? (uint8_t)(0x70 | cc) : 0xeb;
        o[1] = (uint8_t)(int8_t)disp;
        return 0;
    }
    size_t head = cc >= 0 ? 2 : 1;
    if (len != head + 4 || disp != (int32_t)disp)
        return -1;
    if (cc >= 0) {
        o[0] = 0x0f;
        o[1] = (uint8_t)(0x80 | cc);
    } else
        o[0] = 0xe9;
    int32_t d32 = (int32_t)disp;
    memcpy(o + head, &d32, 4);
    return 0;
}

static int
try_copy(recovery_t *r, const uint8_t *copy, size_t avail, uint64_t copy_vma)
{
    size_t size = r->b->size, off = 0;
    memcpy(r->out, r->buf, size);
    r->lost = SIZE_MAX;
    for (uint32_t k = 0; k < r->b->ninsns; k++) {
        arch_insn_t in;
        if (off >= size || off >= avail
            || arch_decode(copy + off, avail - off, copy_vma + off, &in) != 0)
            return 0;
        int last = k == r->b->ninsns - 1;
        if (!last || off + in.len == size) {
            if (off + in.len > size || !same_but_rel(copy + off + 0, r->out + off, &in)) {
                /* Only overwritten bytes may differ: copy them, then compare. */
                size_t n = off + in.len <= size ? in.len : size - off;
                for (size_t i = 0; i < n; i++)
                    if (off + i < r->head)
                        r->out[off + i] = copy[off + i];
                if (off + in.len > size || !same_but_rel(copy + off, r->out + off, &in))
                    return 0;
            }
            if (off < r->head)
                fix_pc_relative(r, &in, off);
            off += in.len;
        } else if (off >= r->head) {
            off = size; /* a last instruction left intact */
        } else {
            /* Counter code before the last instruction (a call or return that leaves
             * the procedure's counted paths): the instruction follows it in the copy. */
            size_t c = off;
            arch_insn_t ci = in;
            while (is_snippet(copy + c, avail - c)) {
                size_t next = c + ci.len;
                if (next >= avail
                    || arch_decode(copy + next, avail - next, copy_vma + next, &ci) != 0)
                    break;
                c = next;
            }
            if (c != off && off + ci.len == size && !is_snippet(copy + c, avail - c)) {
                memcpy(r->out + off, copy + c, ci.len);
                fix_pc_relative(r, &ci, off);
            } else if (!is_snippet(copy + c, avail - c)
                       && reencode_branch(r, &ci, copy + c, off, size - off) == 0) {
                /* a branch the layout gave the other length */
            } else
                mark_lost(r, off, size - off); /* overwritten and re-encoded: unknown */
            off = size;
        }
    }
    /* The rebuilt bytes must decode into exactly the block's instructions. */
    return off == size && (r->lost != SIZE_MAX || count_insns(r->out, size, r->b->start)
                                                      == r->b->ninsns);
}

/* Counter code the rewriter puts before a block's copy (arch_emit_* of arch.h). */
static int
is_snippet(const uint8_t *p, size_t n)
{
    static const uint8_t inc[] = { 0x48, 0xff, 0x05 }, lock_inc[] = { 0xf0, 0x48, 0xff, 0x05 };
    static const uint8_t lea_down[] = { 0x48, 0x8d, 0x64, 0x24, 0x80 };
    static const uint8_t lea_up[] = { 0x48, 0x8d, 0xa4, 0x24, 0x80, 0x00, 0x00, 0x00 };
    return (n >= 3 && memcmp(p, inc, 3) == 0) || (n >= 4 && memcmp(p, lock_inc, 4) == 0)
        || (n >= 5 && memcmp(p, lea_down, 5) == 0) || (n >= 8 && memcmp(p, lea_up, 8) == 0)
        || p[0] == 0x9c || p[0] == 0x9d; /* pushfq, popfq */
}

/*
 * Rebuild the original bytes of the block from its relocated copy at new_start: past
 * the counter code (following its jumps), where the copy should start; else at every
 * instruction boundary seen on the way, nearest first. Returns 1 when one fits.
 */
static int
recover_original(const cfg_image_t *img, recovery_t *r)
{
    size_t avail;
    uint64_t at = r->b->new_start;
    const uint8_t *p = at ? cfg_image_ptr(img, at, &avail) : NULL;
    uint64_t cand[64];
    size_t ncand = 0;
    for (size_t steps = 0; p != NULL && steps < RECOVER_WINDOW && ncand < 64; steps++) {
        cand[ncand++] = at;
        arch_insn_t in;
        if (arch_decode(p, avail, at, &in) != 0)
            break;
        if (in.kind == ARCH_KIND_JMP && in.target > at && in.target - at < RECOVER_WINDOW)
            at = in.target; /* the jump from counter code to the copy */
        else if (is_snippet(p, avail))
            at += in.len;
        else
            break;
        p = cfg_image_ptr(img, at, &avail);
    }
    while (ncand > 0) {
        at = cand[--ncand];
        if ((p = cfg_image_ptr(img, at, &avail)) != NULL && try_copy(r, p, avail, at))
            return 1;
    }
    return 0;
}

int
qp_original_block(const cfg_image_t *img, const qp_desc_t *desc, const qp_desc_block_t *b,
                  const uint8_t *buf, size_t head, uint8_t *out, size_t *lost,
                  size_t *lost_len)
{
    recovery_t r = { desc, b, buf, head, out, SIZE_MAX, 0, img };
    if (!recover_original(img, &r))
        return 0;
    *lost = r.lost;
    *lost_len = r.lost_len;
    return 1;
}

#define REDIRECT_LEN 5 /* jmp rel32 */

/*
 * True when the bytes at BUF (N readable) hold the jump qpt-rewrite writes over the
 * start of a moved block: a jmp rel32 into a section of its own (.qpt.*).
 */
static int
is_redirect(const cfg_image_t *img, const uint8_t *buf, size_t n, uint64_t vma)
{
    if (n < REDIRECT_LEN || buf[0] != 0xe9)
        return 0;
    int32_t rel;
    memcpy(&rel, buf + 1, 4);
    uint64_t target = vma + REDIRECT_LEN + (uint64_t)(int64_t)rel;
    const cfg_section_t *s = cfg_image_section_at(img, target);
    return s != NULL && strncmp(s->name, ".qpt", 4) == 0;
}

size_t
qp_overwritten(const cfg_image_t *img, const qp_desc_block_t *b, const uint8_t *buf,
               size_t avail, uint64_t *over_end)
{
    if (is_redirect(img, buf, avail, b->start))
        *over_end = b->start + REDIRECT_LEN;
    size_t head = 0;
    if (*over_end > b->start)
        head = *over_end - b->start < b->size ? *over_end - b->start : b->size;
    if (b->new_start != 0 && qp_old_text_reused(img))
        head = b->size; /* new code went over it: all rebuilt from the copy */
    return head;
}
