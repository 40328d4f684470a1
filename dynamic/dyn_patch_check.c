/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Live patching, what the file proves for one point (see dyn_patch.c): the replaced
 * bytes are whole instructions of one block, no branch lands inside them, and the
 * padding, spills and short jumps a point takes are free; adding checked points.
 */
#include "config.h"

#include "dynamic/dyn_patch_priv.h"

/*****************************************************************************
 * What the file proves: the replaced bytes are one block's, no branch lands inside
 */

/* Does a procedure start in [LO, HI) (link addresses)? */
int
dynp_proc_entry_in(const cfg_prog_t *prog, uint64_t lo, uint64_t hi)
{
    size_t a = 0, b = prog->nprocs;
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (prog->procs[mid].entry < lo)
            a = mid + 1;
        else
            b = mid;
    }
    return a < prog->nprocs && prog->procs[a].entry < hi;
}

/* Is [A, A + N) (link addresses) clear of the padding other points took (s->pads)? */
int
dynp_pad_free(const dyn_session_t *s, uint64_t a, size_t n)
{
    for (size_t k = 0; k < s->npads; k++)
        if (a < s->pads[k] + JMP_LEN && s->pads[k] < a + n)
            return 0;
    return 1;
}

/* Take the 5 bytes of padding at link address A. */
int
dynp_pad_take(dyn_session_t *s, uint64_t a)
{
    if (s->npads == s->cappads) {
        size_t cap = s->cappads ? 2 * s->cappads : 16;
        uint64_t *n = realloc(s->pads, cap * sizeof(*n));
        if (n == NULL)
            return QP_ENOMEM;
        s->pads = n;
        s->cappads = cap;
    }
    s->pads[s->npads++] = a;
    return 0;
}

/*
 * N bytes of padding right after the block that ends at link address END with a ret or
 * a jmp (so nothing falls into them): in no block, no procedure's entry, nops or int3
 * from END on, and not taken by another point. A jump may cover them.
 */
int
dynp_spill_ok(const dyn_session_t *s, uint64_t end, size_t n)
{
    const cfg_prog_t *prog = s->prog;
    const uint8_t *bytes;
    size_t avail, x;

    for (x = 0; x < n; x++)
        if (cfg_block_at(prog, end + x) != CFG_NONE)
            return 0;
    if (dynp_proc_entry_in(prog, end, end + n) || !dynp_pad_free(s, end, n))
        return 0;
    if ((bytes = cfg_image_ptr(prog->img, end, &avail)) == NULL || avail < n)
        return 0;
    for (x = 0; x < n;) {
        arch_insn_t in;
        if (bytes[x] == 0xcc) {
            x++;
            continue;
        }
        if (arch_decode(bytes + x, avail - x, end + x, &in) < 0
            || in.kind != ARCH_KIND_NOP)
            return 0;
        x += in.len;
    }
    return 1;
}

/*
 * Does the process run with a shadow stack (x86 CET: /proc/PID/status says shstk)? A
 * call emulated by push and jmp would not be on it, and its ret would fault.
 */
int
dynp_has_shadow_stack(const dyn_session_t *s)
{
    char path[64], line[256];
    FILE *f;
    int on = 0;

    if (s->shstk >= 0)
        return s->shstk;
    snprintf(path, sizeof(path), "/proc/%d/status", dyn_proc_pid(s->p));
    if ((f = fopen(path, "r")) == NULL)
        return 1; /* not known: assume the worst */
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, "x86_Thread_features:", 20) == 0
            && strstr(line, "shstk") != NULL)
            on = 1;
    fclose(f);
    ((dyn_session_t *)s)->shstk = on; /* a cache, not state */
    return on;
}

/* At an ABI entry (called, or named as a function) the flags are dead. */
uint8_t
dynp_entry_save_flags(const cfg_proc_t *pr)
{
    int abi = (pr->sources
                  & (CFG_SRC_SYMBOL | CFG_SRC_EH_FRAME | CFG_SRC_CALL | CFG_SRC_ENTRY
                      | CFG_SRC_INIT | CFG_SRC_PLT))
        != 0;
    return pt_flags_at_entry(abi) != 0;
}

/*
 * The whole instructions at procedure I's entry, NEED bytes of them at least, that a jump
 * replaces: why not, or NULL with PT's proc, entry, len, ninsns, orig, save_flags, spill
 * and call_ret. An entry block that ends (ret, jmp) before NEED bytes is completed with
 * the padding after it (spill). A direct call may be the last instruction: the
 * trampoline pushes its return address, which is then the end of the replaced bytes (so
 * a callee returns right after the jump, into the original code, whether the jump is
 * in or not). FLAGS: ENTRY_FIRST_ONLY (an indirect jump with unknown targets might land
 * anywhere in the procedure, but not inside an instruction): the bytes must be one
 * instruction; ENTRY_COPY (the jump into a procedure's copy, which makes every call, an
 * indirect one too, with its original return address): an indirect call may be the last
 * instruction as well.
 */
const char *
dynp_entry_insns(
    const dyn_session_t *s, uint32_t i, size_t need, int flags, point_t *pt /*OUT*/)
{
    int first_only = flags & ENTRY_FIRST_ONLY;
    const cfg_prog_t *prog = s->prog;
    const cfg_proc_t *pr = &prog->procs[i];
    const cfg_block_t *b = &prog->blocks[pr->block];
    const uint8_t *bytes;
    size_t avail, len = 0;
    int last = -1;

    if (dynp_proc_entry_in(prog, pr->entry + 1, pr->entry + need))
        return "another procedure starts within 5 bytes of its entry";
    bytes = cfg_image_ptr(prog->img, pr->entry, &avail);
    if (bytes == NULL)
        return "no bytes in the file";
    memset(pt, 0, sizeof(*pt));
    pt->proc = i;
    pt->entry = pr->entry + s->bias;
    while (len < need) {
        arch_insn_t in;
        if (pt->call_ret)
            return "a call ends within the bytes the jump replaces (its callee would "
                   "return into the jump)";
        if (pr->entry + len >= b->end) {
            /* The block ended: a ret or a jmp may be followed by padding to cover. */
            if ((last != ARCH_KIND_RET && last != ARCH_KIND_JMP
                    && last != ARCH_KIND_JMP_IND)
                || need > sizeof(pt->orig) || avail < need
                || !dynp_spill_ok(s, pr->entry + len, need - len))
                return "its entry block is shorter than the 5-byte jump";
            pt->spill = (uint8_t)(need - len);
            len = need;
            break;
        }
        if (arch_decode(bytes + len, avail - len, pt->entry + len, &in) < 0)
            return "an instruction at its entry does not decode";
        if (pr->entry + len + in.len > b->end)
            return "its entry block is shorter than the 5-byte jump";
        if (in.flags & ARCH_F_PRIV)
            return "a privileged instruction at its entry";
        switch (in.kind) {
        case ARCH_KIND_SEQ:
        case ARCH_KIND_NOP:
        case ARCH_KIND_ENDBR:
        case ARCH_KIND_JMP:
        case ARCH_KIND_JCC:
        case ARCH_KIND_JMP_IND:
        case ARCH_KIND_RET: break;
        case ARCH_KIND_CALL:
            if (dynp_has_shadow_stack(s))
                return "a call in its first 5 bytes (the process has a shadow stack)";
            pt->call_ret = 1;
            break;
        case ARCH_KIND_CALL_IND:
            if (!(flags & ENTRY_COPY))
                return "an indirect call in its first 5 bytes (the return address would "
                       "be in the trampoline)";
            if (dynp_has_shadow_stack(s))
                return "a call in its first 5 bytes (the process has a shadow stack)";
            pt->call_ret = 1;
            break;
        case ARCH_KIND_SYSCALL: return "a system call in its first 5 bytes";
        default: return "an instruction in its first 5 bytes cannot be moved";
        }
        if ((in.kind == ARCH_KIND_JMP || in.kind == ARCH_KIND_JCC)
            && in.target >= pt->entry && in.target < pt->entry + len + in.len)
            return "a branch in its first bytes targets them";
        len += in.len;
        last = in.kind;
        pt->ninsns++;
    }
    if (first_only && pt->ninsns > 1)
        return "an indirect jump with unknown targets might land in its first bytes";
    if (len > sizeof(pt->orig))
        return "its first instructions are too long";
    pt->len = (uint8_t)len;
    memcpy(pt->orig, bytes, len);
    pt->save_flags = dynp_entry_save_flags(pr);
    return NULL;
}

/*
 * Why procedure I's entry cannot have a jump whatever its instructions, or NULL;
 * *FIRST_ONLY: only a jump within its first instruction is safe (see dynp_entry_insns).
 */
const char *
dynp_entry_ok(const dyn_session_t *s, uint32_t i, int *first_only /*OUT*/)
{
    return dynp_entry_ok_loop(s, i, 0, first_only);
}

/* dynp_entry_ok, and with LOOP_OK a branch of the procedure back to its entry allowed (in
 * a copy it goes to the entry's copy, after the entry's snippet: a loop, not a call). */
const char *
dynp_entry_ok_loop(
    const dyn_session_t *s, uint32_t i, int loop_ok, int *first_only /*OUT*/)
{
    const cfg_prog_t *prog = s->prog;
    const cfg_proc_t *pr = &prog->procs[i];
    const cfg_block_t *b;

    *first_only = pr->nind_unresolved > 0;
    if (pr->flags & CFG_PROC_FRAGMENT)
        return "a cold fragment of another procedure, not an entry";
    if (pr->unsafe != NULL)
        return "the analysis could not prove its code safe";
    if (pr->nblocks == 0)
        return "no code";
    b = &prog->blocks[pr->block];
    if (b->start != pr->entry)
        return "its entry does not start a block";
    if (b->npred > 0 && !loop_ok)
        return "a branch inside the procedure goes back to its entry";
    return NULL;
}

/*
 * In a Go program, why point PT cannot go in (patch/pt_go.c: an instruction that may
 * fault among those it moves - its replaced bytes but the spill, a short return block
 * run in its trampoline), or NULL.
 */
const char *
dynp_go_refusal(const dyn_session_t *s, const point_t *pt)
{
    const arch_isa_t *isa = cfg_image_isa(s->prog->img);
    if (!s->go)
        return NULL;
    if (pt_go_faults_in(isa, pt->orig, (size_t)(pt->len - pt->spill), pt->entry)
        || (pt->rlen > 0 && pt_go_faults_in(isa, pt->rbytes, pt->rlen, pt->raddr)))
        return pt_go_fault_why;
    return NULL;
}

/* In a Go program, why the procedure of PARTS (NPARTS, from dynp_parts_of) cannot run as
 * a copy (an instruction of its blocks that may fault would fault in the copy), or NULL. */
const char *
dynp_go_proc_refusal(const dyn_session_t *s, const uint32_t *parts, int nparts)
{
    const cfg_prog_t *prog = s->prog;
    int k;
    uint32_t b;
    if (!s->go)
        return NULL;
    FOR_BLOCKS(prog, parts, nparts, k, b) {
        const cfg_block_t *bl = &prog->blocks[b];
        size_t avail;
        const uint8_t *bytes = cfg_image_ptr(prog->img, bl->start, &avail);
        if (bytes == NULL || avail < bl->end - bl->start
            || pt_go_faults_in(cfg_image_isa(prog->img), bytes, bl->end - bl->start,
                bl->start))
            return pt_go_fault_why;
    }
    return NULL;
}

/* Why procedure I cannot get an entry counter, or NULL; fills *PT. */
const char *
dynp_check_proc(const dyn_session_t *s, uint32_t i, point_t *pt /*OUT*/)
{
    int first_only;
    const char *why = dynp_entry_ok(s, i, &first_only);
    return why != NULL ? why : dynp_entry_insns(s, i, JMP_LEN, first_only, pt);
}

/*
 * Padding no procedure owns at link address A: the 5 bytes from A are in a gap between
 * blocks (cfg_block_at), and the gap's bytes up to them decode as nops or int3 (the
 * alignment between procedures). B0 is the lowest address the gap is looked for from.
 */
static int
is_padding(const cfg_prog_t *prog, uint64_t a, uint64_t b0)
{
    uint64_t g = a, x;
    size_t avail;
    const uint8_t *bytes;

    for (x = a; x < a + JMP_LEN; x++)
        if (cfg_block_at(prog, x) != CFG_NONE)
            return 0;
    while (g > b0 && cfg_block_at(prog, g - 1) == CFG_NONE)
        g--;
    if (g == b0)
        return 0; /* the gap's start is not known: not proven padding */
    if ((bytes = cfg_image_ptr(prog->img, g, &avail)) == NULL || avail < a + JMP_LEN - g)
        return 0;
    for (x = g; x < a + JMP_LEN;) {
        arch_insn_t in;
        if (bytes[x - g] == 0xcc) {
            x++;
            continue;
        }
        if (arch_decode(bytes + (x - g), avail - (x - g), x, &in) < 0
            || in.kind != ARCH_KIND_NOP)
            return 0;
        x += in.len;
    }
    return 1;
}

/*
 * A 5-byte jump in padding within reach of a 2-byte jmp rel8 at link address E, for PT
 * (whose bytes are filled): why not, or NULL with PT's pad and pad_orig set and the
 * padding taken.
 */
const char *
dynp_find_pad(dyn_session_t *s, uint64_t e, point_t *pt)
{
    const cfg_prog_t *prog = s->prog;
    uint64_t from = e + SHORT_LEN - 128, to = e + SHORT_LEN + 127;
    uint64_t b0 = from > 256 ? from - 256 : 0;

    if (((e + s->bias) & 4095) > 4096 - SHORT_LEN)
        return "its first 2 bytes cross a page boundary";
    if (s->nb_slot != 0) {
        /* A slot in a neighbour's original code, taken already (dynp_with_neighbour). */
        uint64_t a = s->nb_slot;
        s->nb_slot = 0;
        if (a >= from && a <= to && !(a < e + pt->len && e < a + JMP_LEN)) {
            pt->pad = a + s->bias;
            memcpy(pt->pad_orig, s->nb_orig, JMP_LEN);
            return NULL;
        }
    }
    for (uint64_t a = from; a <= to; a++) {
        size_t k;
        if (((a + s->bias) & 4095) > 4096 - JMP_LEN)
            continue;
        /* Not the point's own bytes (a spill is padding too). */
        if (a < e + pt->len && e < a + JMP_LEN)
            continue;
        if (!dynp_pad_free(s, a, JMP_LEN) || !is_padding(prog, a, b0))
            continue;
        const uint8_t *bytes = cfg_image_ptr(prog->img, a, &k);
        if (dynp_pad_take(s, a) < 0)
            return "out of memory";
        pt->pad = a + s->bias;
        memcpy(pt->pad_orig, bytes, JMP_LEN);
        return NULL;
    }
    return "no padding within reach of a 2-byte jump for a 5-byte one";
}

/*
 * Procedure I's entry, too short for a 5-byte jump, with a 2-byte jmp rel8 to a 5-byte
 * jump in padding within its reach: why not, or NULL with *PT filled and the padding
 * taken.
 */
const char *
dynp_check_short(dyn_session_t *s, uint32_t i, int first_only, point_t *pt /*OUT*/)
{
    const char *why;

    if ((why = dynp_entry_insns(s, i, SHORT_LEN, first_only, pt)) != NULL)
        return why;
    return dynp_find_pad(s, s->prog->procs[i].entry, pt);
}

/*
 * The first 5 bytes of whole instructions from ADDR, in block B, for a jump: why not, or
 * NULL with PT's entry, len, ninsns and orig filled.
 */
static const char *
check_head(const dyn_session_t *s, const cfg_block_t *b, uint64_t addr, point_t *pt)
{
    const cfg_prog_t *prog = s->prog;
    size_t avail, len = 0;
    const uint8_t *bytes = cfg_image_ptr(prog->img, addr, &avail);
    uint32_t i = (uint32_t)(cfg_proc_at(prog, addr) - prog->procs);

    if (bytes == NULL)
        return "no bytes in the file";
    /* The first procedure entered after ADDR (procs are sorted by entry). */
    uint32_t lo = 0, hi = prog->nprocs;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (prog->procs[mid].entry <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < prog->nprocs && lo != i && prog->procs[lo].entry < addr + JMP_LEN)
        return "another procedure starts within 5 bytes";
    pt->entry = addr + s->bias;
    pt->ninsns = 0;
    while (len < JMP_LEN) {
        arch_insn_t in;
        if (arch_decode(bytes + len, avail - len, pt->entry + len, &in) < 0)
            return "an instruction does not decode";
        if (addr + len + in.len > b->end)
            return "its block is shorter than the 5-byte jump";
        if (in.flags & ARCH_F_PRIV)
            return "a privileged instruction in the bytes to patch";
        if (in.kind == ARCH_KIND_CALL_IND)
            return "an indirect call in the bytes to patch (its return address would be "
                   "in the trampoline)";
        /* A direct call ends the block: the trampoline makes it with its original
         * return address (call_ret), so nothing returns into the trampoline. */
        if (in.kind == ARCH_KIND_CALL && dynp_has_shadow_stack(s))
            return "a call in the bytes to patch (the process has a shadow stack)";
        if (in.kind == ARCH_KIND_SYSCALL)
            return "a system call in the bytes to patch";
        if (in.kind == ARCH_KIND_HALT)
            return "a trap in the bytes to patch";
        if ((in.kind == ARCH_KIND_JMP || in.kind == ARCH_KIND_JCC)
            && in.target > pt->entry && in.target < pt->entry + len + in.len)
            return "a branch in the bytes to patch targets them";
        len += in.len;
        pt->ninsns++;
        pt->call_ret = in.kind == ARCH_KIND_CALL;
    }
    if (len > sizeof(pt->orig))
        return "the instructions to move are too long";
    pt->len = (uint8_t)len;
    memcpy(pt->orig, bytes, len);
    return NULL;
}

/*
 * The entry of procedure I with its entry block moved whole (DYN_PT_WHOLE: it ends in
 * the procedure's ret, which the trampoline runs after the exit's snippet): why not, or
 * NULL with *PT filled (as dynp_timed_entry's whole entries: the padding after the block
 * covered by the jump, or a short jump to a jump in padding, which it takes).
 */
static const char *
whole_entry(const dyn_session_t *s, uint32_t i, point_t *pt /*OUT*/)
{
    const cfg_proc_t *pr = &s->prog->procs[i];
    const cfg_block_t *eb = &s->prog->blocks[pr->block];
    const char *why;
    int first_only, want_pad, both;

    if ((why = dynp_entry_ok(s, i, &first_only)) != NULL)
        return why;
    both = dynp_is_cond_tail_block(s->prog, eb) == 3;
    if (eb->last_kind != ARCH_KIND_RET && !dynp_is_tail_block(s->prog, eb) && !both)
        return "its entry block does not end in a ret or a tail call";
    if (eb->end - eb->start > sizeof(pt->orig))
        return "its entry block is too long to move whole";
    if ((why = dynp_check_exit(s, eb, pr->entry, 1, pt, &want_pad)) != NULL)
        return why;
    /* (dynp_entry_ok: only a first instruction may move when an indirect jump of unknown
     * targets might land after it.) */
    if (first_only && pt->ninsns > 1)
        return "an indirect jump with unknown targets might land in its entry block";
    if (want_pad && (why = dynp_find_pad((dyn_session_t *)s, pr->entry, pt)) != NULL)
        return why;
    if (pt->len < SHORT_LEN) {
        /* A lone ret: its jmp rel8's displacement is its neighbour's first byte, which
         * must lead to the slot it lent (dynp_pun_site, slot_at). */
        size_t avail;
        const uint8_t *nx = cfg_image_ptr(s->prog->img, pr->entry + 1, &avail);
        if (!s->nb_pun || nx == NULL || avail < 1 || pt->pad == 0
            || pt->pad != pr->entry + s->bias + SHORT_LEN + (uint64_t)(int64_t)(int8_t)nx[0])
            return "a 1-byte procedure whose neighbour lends no slot where its first byte "
                   "points";
        pt->pun = 1;
    }
    pt->by_jump = eb->last_kind != ARCH_KIND_RET;
    pt->whole = 1;
    pt->tail = both ? 3 : 0;
    pt->save_flags = dynp_entry_save_flags(pr);
    return NULL;
}

/* What the file says of the point of KIND at ADDR in PROC: 0 with *PT filled, or
 * QP_EUNSUPP with *WHY. */
int
dynp_check_point(const dyn_session_t *s, int kind, uint32_t proc, uint64_t addr,
    point_t *out, const char **why)
{
    point_t pt;
    const cfg_prog_t *prog;
    const cfg_proc_t *pr;
    uint32_t b;

    *why = NULL;
    if (kind < DYN_PT_ENTRY || kind > DYN_PT_PROC)
        return QP_EINVAL;
    prog = s->prog;
    if (proc >= prog->nprocs)
        return QP_EINVAL;
    pr = &prog->procs[proc];
    memset(&pt, 0, sizeof(pt));
    if (pr->unsafe != NULL)
        *why = "the analysis could not prove its code safe";
    else if (pr->nind_unresolved > 0 && kind != DYN_PT_ENTRY && kind != DYN_PT_WHOLE)
        *why = "an indirect jump with unknown targets might land in the bytes to patch";
    else if ((b = cfg_block_at(prog, addr)) == CFG_NONE)
        *why = "not an instruction of the procedure";
    else if (kind == DYN_PT_ENTRY) {
        int first_only;
        *why = dynp_check_proc(s, proc, &pt);
        /* Too short for the jump: a short one through padding, as --count does. */
        if (*why != NULL && dynp_entry_ok(s, proc, &first_only) == NULL
            && dynp_check_short((dyn_session_t *)s, proc, first_only, &pt) == NULL)
            *why = NULL;
        if (*why == NULL && addr != pr->entry)
            *why = "not the procedure's entry";
    } else if (kind == DYN_PT_WHOLE) {
        *why = whole_entry(s, proc, &pt);
        if (*why == NULL && addr != pr->entry)
            *why = "not the procedure's entry";
    } else if (kind == DYN_PT_BLOCK) {
        if (prog->blocks[b].start != addr)
            *why = "not the start of a block";
        else
            *why = check_head(s, &prog->blocks[b], addr, &pt);
        pt.save_flags = 1;
    } else if (kind == DYN_PT_INSN) {
        /* An instruction boundary of the block, decoding from its start. */
        uint64_t a = prog->blocks[b].start;
        while (a < addr) {
            arch_insn_t in;
            if (cfg_image_decode(prog->img, a, 0, &in) < 0)
                break;
            a += in.len;
        }
        if (a != addr)
            *why = "not an instruction of the procedure";
        else
            *why = check_head(s, &prog->blocks[b], addr, &pt);
        pt.save_flags = 1;
    } else if (kind == DYN_PT_EXIT) {
        /* A ret, or a tail call (a jmp, or a jcc whose taken side leaves: its snippet
         * runs on the way out only, 3 when both sides leave). */
        const cfg_block_t *bl = &prog->blocks[b];
        int ctail = dynp_is_cond_tail_block(prog, bl);
        if (cfg_block_call_never_returns(prog, bl))
            *why = dynp_check_noret(s, bl, &pt); /* a call that never returns */
        else if (bl->last_kind != ARCH_KIND_RET && !dynp_is_tail_block(prog, bl)
            && !ctail)
            *why = "not a block ending in ret or a tail call";
        else {
            int want_pad;
            *why = dynp_check_exit(s, bl, pr->entry, 0, &pt, &want_pad);
            /* Too short: a jmp rel8 to a jump in padding (as --time's exits). */
            if (*why == NULL && want_pad)
                *why = dynp_find_pad((dyn_session_t *)s, bl->start, &pt);
            if (*why == NULL && ctail == 3)
                pt.tail = 3;
        }
        if (*why == NULL) {
            arch_insn_t in;
            size_t avail;
            const uint8_t *bytes = cfg_image_ptr(prog->img, addr, &avail);
            if (bytes == NULL || arch_decode(bytes, avail, addr, &in) < 0
                || addr + in.len != bl->end)
                *why = "not the ret or the tail call of its block";
        }
    } else { /* a call (a short one through padding or with what follows it) */
        const cfg_block_t *bl = &prog->blocks[b];
        arch_insn_t in;
        size_t avail;
        const uint8_t *bytes = cfg_image_ptr(prog->img, addr, &avail);
        if (bytes == NULL || arch_decode(bytes, avail, addr, &in) < 0
            || (in.kind != ARCH_KIND_CALL && in.kind != ARCH_KIND_CALL_IND)
            || addr + in.len != bl->end)
            *why = "not a call";
        else {
            const cfg_proc_t *c = in.kind == ARCH_KIND_CALL ? cfg_proc_at(prog, in.target)
                                                            : NULL;
            *why = dynp_check_call((dyn_session_t *)s, bl, &in, bytes,
                c != NULL && c->entry == in.target ? c->name : NULL, &pt);
        }
    }
    if (*why == NULL && (pt.entry & 4095) > 4096 - JMP_LEN)
        *why = "its first 5 bytes cross a page boundary (the jump could not be written in "
               "one piece)";
    if (*why == NULL)
        *why = dynp_go_refusal(s, &pt);
    if (*why != NULL)
        return QP_EUNSUPP;
    pt.kind = (uint8_t)(kind == DYN_PT_WHOLE ? PT_ENTRY : kind);
    pt.proc = proc;
    *out = pt;
    return 0;
}

/*
 * Has row ROW a candidate at runtime address AT already (its candidates are the last
 * ones added)? A second jump there would overlap the first and be refused at install:
 * known at selection instead, so that the copy is tried.
 */
int
dynp_cand_at(const dyn_session_t *s, uint32_t row, uint64_t at)
{
    for (size_t c = s->ncand; c > 0 && s->cand[c - 1].row == row; c--)
        if (s->cand[c - 1].entry == at)
            return 1;
    return 0;
}

/*
 * The ret block of an exit of procedure PROC at link address ADDR when it is too short
 * for a jump and the blocks that lead to it may be patched instead (dynp_exits_before, as
 * --time's exits); NULL otherwise.
 */
static const cfg_block_t *
short_ret_block(const dyn_session_t *s, uint32_t proc, uint64_t addr)
{
    const cfg_prog_t *prog = s->prog;
    const cfg_proc_t *pr = &prog->procs[proc];
    uint32_t b = cfg_block_at(prog, addr);
    if (pr->unsafe != NULL || pr->nind_unresolved > 0 || b == CFG_NONE)
        return NULL;
    const cfg_block_t *bl = &prog->blocks[b];
    if (bl->last_kind != ARCH_KIND_RET || bl->end - bl->start >= JMP_LEN
        || addr + 1 != bl->end)
        return NULL;
    return bl;
}

/*
 * An exit at short ret block R of procedure PROC: the blocks that lead to it patched,
 * their trampolines running R's bytes with SNIP (may be NULL) before its ret. Candidates
 * added for ROW (NAME); *LO, *HI: the run-time bytes of them all and of R. Why not (the
 * session as it was), or NULL; *ERR: QP_ENOMEM.
 */
static const char *
exit_via_preds(dyn_session_t *s, uint32_t proc, const cfg_block_t *r, uint32_t row,
    const char *name, const dyn_snippet_t *snip, uint64_t *lo, uint64_t *hi, int *err)
{
    point_t none;
    unsigned n = 0;
    size_t c0 = s->ncand, p0 = s->npads;

    memset(&none, 0, sizeof(none));
    none.save_flags = dynp_entry_save_flags(&s->prog->procs[proc]);
    const char *why = dynp_exits_before(s, proc, r, row, name, &none, &n, err);
    if (why != NULL || *err < 0 || n == 0) {
        s->ncand = c0;
        s->npads = p0;
        return why != NULL ? why : "a return block is too short for a jump and cannot move";
    }
    *lo = r->start + s->bias;
    *hi = r->end + s->bias;
    for (size_t k = c0; k < s->ncand; k++) {
        point_t *pt = &s->cand[k];
        if (snip != NULL)
            pt->before = *snip;
        *lo = pt->entry < *lo ? pt->entry : *lo;
        *hi = pt->entry + pt->len > *hi ? pt->entry + pt->len : *hi;
    }
    return NULL;
}

/* A DYN_PT_PROC point of procedure PROC at ADDR (its entry): as dyn_session_add_point
 * (with ROW, BEFORE, AFTER, NAME) or, ADD 0, only whether it would go in (the session as
 * it was; *LO, *HI: its entry's bytes). */
int
dynp_reloc_point(dyn_session_t *s, int add, uint32_t proc, uint64_t addr,
    const dyn_snippet_t *before, const dyn_snippet_t *after, const char *name,
    uint32_t *row, uint64_t *lo, uint64_t *hi, const char **why)
{
    size_t c0 = s->ncand, r0 = s->nrows, p0 = s->npads;
    uint32_t r;
    int err = 0;

    if (proc >= s->prog->nprocs)
        return QP_EINVAL;
    if (addr != s->prog->procs[proc].entry) {
        *why = "not the procedure's entry";
        return QP_EUNSUPP;
    }
    *why = dynp_check_reloc(s, proc, name, 0, 1, &r, &err);
    QP_CHECK(err);
    if (*why != NULL)
        return QP_EUNSUPP;
    point_t *pt = &s->cand[c0]; /* the entry's */
    if (lo != NULL)
        *lo = pt->entry;
    if (hi != NULL)
        *hi = pt->entry + pt->len;
    if (!add) {
        s->ncand = c0;
        s->nrows = r0;
        s->npads = p0;
        return 0;
    }
    if (before != NULL)
        pt->before = *before;
    if (after != NULL)
        pt->after = *after;
    if (row != NULL)
        *row = r;
    return 0;
}

int
dyn_session_check_point(const dyn_session_t *s, int kind, uint32_t proc, uint64_t addr,
    uint64_t *lo, uint64_t *hi, const char **why)
{
    static const char *unused;
    point_t pt;

    if (why == NULL)
        why = &unused;
    *why = NULL;
    if (s == NULL)
        return QP_EINVAL;
    if (kind == DYN_PT_PROC)
        return dynp_reloc_point(
            (dyn_session_t *)s, 0, proc, addr, NULL, NULL, NULL, NULL, lo, hi, why);
    /* A point through padding takes it: given back, nothing is added here. */
    size_t npads = s->npads;
    int rc = dynp_check_point(s, kind, proc, addr, &pt, why);
    ((dyn_session_t *)s)->npads = npads;
    const cfg_block_t *r;
    if (rc == QP_EUNSUPP && kind == DYN_PT_EXIT && proc < s->prog->nprocs
        && (r = short_ret_block(s, proc, addr)) != NULL) {
        /* Through the blocks before it: every bytes they replace in [*LO, *HI). */
        dyn_session_t *w = (dyn_session_t *)s;
        size_t c0 = w->ncand;
        uint64_t l, h;
        int err = 0;
        const char *w2 = exit_via_preds(w, proc, r, 0, NULL, NULL, &l, &h, &err);
        w->ncand = c0;
        w->npads = npads;
        QP_CHECK(err);
        if (w2 == NULL) {
            *why = NULL;
            if (lo != NULL)
                *lo = l;
            if (hi != NULL)
                *hi = h;
            return 0;
        }
    }
    QP_CHECK(rc);
    if (lo != NULL)
        *lo = pt.entry;
    if (hi != NULL)
        *hi = pt.entry + pt.len;
    return 0;
}

void
dyn_session_set_all_or_nothing(dyn_session_t *s, int on)
{
    if (s != NULL)
        s->all_or_nothing = on != 0;
}

int
dyn_session_set_avoid(dyn_session_t *s, const uint64_t *avoid, size_t n)
{
    if (s == NULL || (avoid == NULL && n > 0))
        return QP_EINVAL;
    uint64_t *a = NULL;
    if (n > 0 && (a = malloc(2 * n * sizeof(*a))) == NULL)
        return QP_ENOMEM;
    if (n > 0)
        memcpy(a, avoid, 2 * n * sizeof(*a));
    free(s->avoid);
    s->avoid = a;
    s->navoid = n;
    return 0;
}

int
dyn_session_add_point(dyn_session_t *s, int kind, uint32_t proc, uint64_t addr,
    const dyn_snippet_t *before, const dyn_snippet_t *after, const char *name,
    uint32_t *row, const char **why)
{
    static const char *unused;
    point_t pt;

    if (why == NULL)
        why = &unused;
    *why = NULL;
    if (s == NULL || s->installed || (before == NULL && after == NULL && kind != DYN_PT_PROC)
        || (after != NULL && kind != DYN_PT_CALL && kind != DYN_PT_WHOLE
            && kind != DYN_PT_PROC))
        return QP_EINVAL;
    if (kind == DYN_PT_PROC)
        return dynp_reloc_point(
            s, 1, proc, addr, before, after, name, row, NULL, NULL, why);
    int rc = dynp_check_point(s, kind, proc, addr, &pt, why);
    const cfg_block_t *r;
    if (rc == QP_EUNSUPP && kind == DYN_PT_EXIT && before != NULL
        && proc < s->prog->nprocs && (r = short_ret_block(s, proc, addr)) != NULL) {
        /* A ret block too short for its jump: the blocks before it instead. */
        size_t r0 = s->nrows;
        uint32_t nrow;
        uint64_t l, h;
        int err = 0;
        QP_CHECK(dynp_add_row(s, name, proc, 0, &nrow));
        if (exit_via_preds(s, proc, r, nrow, name, before, &l, &h, &err) == NULL && err == 0) {
            *why = NULL;
            if (row != NULL)
                *row = nrow;
            return 0;
        }
        s->nrows = r0;
        QP_CHECK(err);
    }
    QP_CHECK(rc);
    if (pt.call_len && after != NULL) {
        /* (Its trampoline moves the call with what follows: no place after the call.) */
        *why = "a call shorter than the 5-byte jump, moved with the instructions after it, "
               "takes no snippet after it";
        return QP_EUNSUPP;
    }
    pt.name = name;
    if (before != NULL)
        pt.before = *before;
    if (after != NULL)
        pt.after = *after;
    QP_CHECK(dynp_add_row(s, name, proc, 0, &pt.row));
    QP_CHECK(dynp_add_cand(s, &pt));
    if (row != NULL)
        *row = pt.row;
    return 0;
}

int
dyn_session_set_sites(dyn_session_t *s, uint32_t row, const dyn_site_t *sites, size_t n)
{
    if (s == NULL || s->installed || (n > 0 && sites == NULL))
        return QP_EINVAL;
    for (size_t i = 0; i < s->ncand; i++)
        if (s->cand[i].row == row && s->cand[i].reloc) {
            s->cand[i].sites = sites;
            s->cand[i].nsites = n;
            return 0;
        }
    return QP_ENOTFOUND;
}

int
dyn_session_set_exits(dyn_session_t *s, uint32_t row, const uint64_t *exits, size_t n)
{
    if (s == NULL || s->installed)
        return QP_EINVAL;
    for (size_t i = 0; i < s->ncand; i++)
        if (s->cand[i].row == row && s->cand[i].reloc) {
            s->cand[i].exits = exits;
            s->cand[i].nexits = n;
            return 0;
        }
    return QP_ENOTFOUND;
}

/* Procedure I's entry counter in place: why not, or NULL with
 * its row and point added. *ERR: QP_ENOMEM. */
static const char *
count_in_place(dyn_session_t *s, uint32_t i, const char *name, int *err)
{
    point_t pt;
    int first_only;
    const char *why = dynp_check_proc(s, i, &pt);
    /* Too short for the jump: a short one through padding, if there is some. */
    if (why != NULL && dynp_entry_ok(s, i, &first_only) == NULL
        && dynp_check_short(s, i, first_only, &pt) == NULL)
        why = NULL;
    if (why == NULL)
        why = dynp_go_refusal(s, &pt);
    *err = 0;
    if (why != NULL)
        return why;
    pt.name = name;
    pt.kind = PT_ENTRY;
    if ((*err = dynp_add_row(s, name, i, 0, &pt.row)) == 0)
        *err = dynp_add_cand(s, &pt);
    return NULL;
}

/*
 * Neighbours whose original code may lend a slot to a short jump at link address NEAR of
 * procedure I: the procedures whose code lies within the jump's reach, nearest first (a
 * cold fragment's parent) that are not chosen yet; into OUT (CAP), with their names.
 * Their number.
 */
size_t
dynp_neighbours(const dyn_session_t *s, uint32_t i, uint64_t near, uint32_t *out,
    const char **names, size_t cap)
{
    const cfg_prog_t *prog = s->prog;
    size_t n = 0;
    for (uint64_t d = 0; d < 128 && n < cap; d++) {
        for (int side = 0; side < 2 && n < cap; side++) {
            uint64_t a = side ? near + SHORT_LEN + d : near + SHORT_LEN - 1 - d;
            const cfg_proc_t *q = cfg_proc_at(prog, a);
            if (q == NULL || q == &prog->procs[i])
                continue;
            uint32_t j = (uint32_t)(q - prog->procs);
            size_t k;
            for (k = 0; k < n && out[k] != j; k++)
                ;
            if (k < n || (s->chosen[j] & 1) || (q->flags & CFG_PROC_FRAGMENT))
                continue;
            names[n] = q->name;
            out[n++] = j;
        }
    }
    return n;
}

/*
 * Neighbour J (chosen by NAME) relocated whole (TIMED), with a slot in its original code
 * for a short jump at link address NEAR: 1 with the slot in s->nb_slot and *ROW its row
 * (its candidates added), 0 when not (the session as it was), or QP_ENOMEM.
 */
static int
lend_slot(dyn_session_t *s, uint32_t j, const char *name, uint64_t near, int timed,
    uint32_t *row)
{
    size_t c0 = s->ncand, r0 = s->nrows, p0 = s->npads;
    int err = 0;
    s->nb_want = near;
    s->nb_slot = 0;
    s->nb_depth++; /* (the neighbour borrows from no other) */
    const char *why = dynp_check_reloc(s, j, name, timed, timed, row, &err);
    s->nb_depth--;
    s->nb_want = 0;
    if (err < 0)
        return err;
    if (why == NULL && s->nb_slot != 0)
        return 1;
    s->nb_slot = 0;
    s->ncand = c0;
    s->nrows = r0;
    s->npads = p0;
    return 0;
}

/*
 * A slot for PT's short jump at link address NEAR (in procedure I, relocated whole) in
 * the original code of a neighbour: not here (a caller that chooses its points one by
 * one asks for the pair itself, dyn_session_check_borrow): the first NEAR that wanted
 * one is kept for it (s->nb_need, outside a lender's own check), and the answer is why
 * not.
 */
const char *
dynp_borrow_slot(dyn_session_t *s, uint32_t i, uint64_t near, int timed, point_t *pt,
    uint32_t *dep, uint32_t *lent, int *err)
{
    (void)i, (void)timed, (void)pt, (void)dep, (void)lent;
    *err = 0;
    if (s->nb_depth == 0 && s->nb_need == 0)
        s->nb_need = near;
    return "no neighbour to borrow bytes from";
}

/*
 * Procedure I (chosen by NAME) too short for a jump at its entry, with no padding within
 * a short jump's reach and none of its own code to borrow (`xor %eax,%eax; ret` between
 * two procedures, as cold code is laid out): its jmp rel8 goes to a slot in the original
 * code of a neighbour relocated whole, as Dyninst and e9patch borrow a neighbour's bytes.
 * The neighbour is one the selection measures anyway, not chosen yet (dynp_neighbours);
 * it runs as its copy (measured there, TIMED as I is), its original idle and reached by
 * nothing but its entry's and return sites' jumps, so the slot's bytes never run; I goes
 * in only if it does (dep1). Why not (the session as it was), or NULL with both added.
 * *ERR: QP_ENOMEM.
 */
const char *
dynp_with_neighbour(dyn_session_t *s, uint32_t i, const char *name, int timed, int *err)
{
    uint32_t nb[8], row;
    const char *names[8];

    *err = 0;
    if (dynp_has_shadow_stack(s) || s->nb_depth > 0)
        return "no neighbour to borrow bytes from";
    size_t n = dynp_neighbours(s, i, s->prog->procs[i].entry, nb, names, 8);
    for (size_t k = 0; k < n; k++) {
        size_t c0 = s->ncand, r0 = s->nrows, p0 = s->npads;
        int rc = lend_slot(s, nb[k], names[k], s->prog->procs[i].entry, timed, &row);
        if (rc < 0) {
            *err = rc;
            return NULL;
        }
        if (rc == 0)
            continue;
        /* I as it would go in, its dynp_find_pad taking the slot. */
        size_t c1 = s->ncand;
        const char *why
            = timed ? dynp_check_timed(s, i, name, err) : count_in_place(s, i, name, err);
        if (*err < 0)
            return NULL;
        if (why == NULL && s->nb_slot == 0 && s->ncand > c1) {
            for (size_t c = c1; c < s->ncand; c++)
                if (s->cand[c].dep1 == 0)
                    s->cand[c].dep1 = row + 1;
            s->chosen[nb[k]] |= 1;
            return NULL;
        }
        s->nb_slot = 0;
        s->ncand = c0;
        s->nrows = r0;
        s->npads = p0;
    }
    return "no neighbour to borrow bytes from";
}
