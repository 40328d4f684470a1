/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Does a procedure start as a compiled function starts (cfg_proc_starts_like_function)?
 * The editor asks it of bytes that decode as code but that nothing vouches for (no
 * symbol, FDE or direct call): data in .text must not be overwritten by an entry
 * redirect. The ISA's parts are its table's (frame_entry, looks_like_data, is_padding).
 */
#include "cfg/cfg.h"
#include "cfg/cfg_priv.h"

/* Does block B end in a call to a function that never returns (__stack_chk_fail, a
 * CHECK's failure)? Not merely a call whose return site is another procedure's, which
 * cfg_block_call_never_returns counts as well: that procedure may be the one after B. */
static int
calls_noreturn(const cfg_prog_t *prog, const cfg_block_t *b)
{
    unsigned kinds = cfg_block_call_edge_kinds(prog, b);
    return (kinds & (1u << CFG_EDGE_NORETURN))
        && !(kinds & (1u << CFG_EDGE_CALLRET | 1u << CFG_EDGE_TAILCALL));
}

/*
 * Is P's entry on a 16-byte boundary after padding (cfg_padding_len: zeros, int3, nops
 * and the trap instructions that end a function's last block, chromium's CHECKs' `int3;
 * ud2; ud1` of which the analysis decodes the int3 only; at most 64 bytes) that begins
 * where other decoded code ends, or right after code that does not fall through (a call
 * that never returns included)?
 * Then *TRAP_FILL tells whether the padding ends in a one-byte trap (int3: the fill lld
 * puts between input sections in code, as between the functions of -ffunction-sections;
 * an assembler fills an alignment inside a section with nops), and *AT, *AVAIL give P's
 * bytes.
 */
static int
padded_start(const cfg_prog_t *prog, const cfg_proc_t *p, int *trap_fill, const uint8_t **at,
             size_t *avail)
{
    const arch_isa_t *isa = cfg_image_isa(prog->img);
    if (p->entry % 16 != 0)
        return 0;
    size_t n;
    const uint32_t *by = cfg_blocks_by_addr(prog, &n);
    size_t lo = cfg_blocks_from(prog, p->entry); /* after the last block below the entry */
    if (lo == 0)
        return 0;
    const cfg_block_t *before = &prog->blocks[by[lo - 1]];
    uint64_t end = before->end;
    const uint8_t *pad = end <= p->entry ? cfg_image_ptr(prog->img, end, avail) : NULL;
    size_t len = (size_t)(p->entry - end);
    if (pad == NULL || len > 64 || *avail <= len)
        return 0;
    if (len == 0 && before->last_kind != ARCH_KIND_RET && before->last_kind != ARCH_KIND_JMP
        && before->last_kind != ARCH_KIND_JMP_IND && before->last_kind != ARCH_KIND_HALT
        && !calls_noreturn(prog, before))
        return 0; /* no padding, and the code before may run on into it */
    arch_insn_t last;
    *trap_fill = len > 0 && isa->decode(pad + len - 1, 1, 0, &last) == 0
        && last.kind == ARCH_KIND_HALT;
    *at = pad + len;
    *avail -= len;
    return cfg_padding_len(isa, pad, len, end) == len;
}

/* Does P decode as a function's code, entered by no jump (a piece of a function split
 * into a section of its own, as clang's -fsplit-machine-functions does, is): no
 * instruction that data would decode to first (arch_looks_like_data), and a return or
 * a jump that leaves it? */
static int
ends_as_code(const cfg_prog_t *prog, const cfg_proc_t *p, const uint8_t *at, size_t avail)
{
    if (cfg_image_isa(prog->img)->looks_like_data(at, avail) || p->unsafe != NULL
        || (p->sources & CFG_SRC_TAILCALL))
        return 0;
    for (uint32_t b = p->block; b < p->block + p->nblocks; b++) {
        uint8_t k = prog->blocks[b].last_kind;
        if (k == ARCH_KIND_RET || k == ARCH_KIND_JMP || k == ARCH_KIND_JMP_IND)
            return 1;
    }
    return 0;
}

/*
 * After padded_start's padding, either
 *  - setting up its frame (arch_frame_entry: `push %rbp; mov %rsp,%rbp`): only a
 *    function's first block sets up its frame, and a linker pads between functions'
 *    sections: this is a function's start, no piece of one, even where a jump lands (a
 *    piece cut off there does not set up a frame); chromium builds with frame pointers;
 *  - or, without a frame (a leaf, or a frame shrink-wrapped past an early exit), after
 *    lld's int3 fill between input sections, decoding as a function's code, no jump's
 *    target (ends_as_code): a section's start, and with -ffunction-sections a section of
 *    compiled code holds one function. Data kept in code comes from assembler files,
 *    inside their own sections, after an alignment's nops or right after code (chromium
 *    156: BoringSSL's strings follow a ret; no section of it starts with data). The limit:
 *    an assembler file whose section starts with a table that decodes as such code
 *    would be taken for a function.
 */
int
cfg_proc_starts_like_function(const cfg_prog_t *prog, const cfg_proc_t *p)
{
    const arch_isa_t *isa;
    const uint8_t *at;
    size_t avail;
    int trap_fill;
    if (prog == NULL || p == NULL)
        return 0;
    isa = cfg_image_isa(prog->img);
    if (isa->frame_entry == NULL || isa->looks_like_data == NULL
        || !padded_start(prog, p, &trap_fill, &at, &avail))
        return 0;
    return isa->frame_entry(at, avail) || (trap_fill && ends_as_code(prog, p, at, avail));
}
