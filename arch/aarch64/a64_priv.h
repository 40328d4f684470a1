/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_A64_PRIV_H
#define QP_A64_PRIV_H
/*
 * PURPOSE: AArch64 (A64, little-endian) behind arch/arch.h's ISA table (arch_isa_t):
 * decoding of what the analyses and the editor need, relocation of each pc-relative form,
 * and the emitters. Instructions are 4 bytes, 4-aligned. Like the rest of arch/ it knows
 * nothing of ELF, files or processes and never allocates. Other folders reach it only
 * through arch_isa_for_machine(); tests may include this header.
 *
 * Register convention of the emitted code: x16 and x17 (IP0/IP1) are the scratch
 * registers; they are spilled to a 16-byte slot below sp (`stp x16, x17, [sp, #-16]!`),
 * which keeps sp 16-aligned. AAPCS64 on Linux has no red zone, so nothing below sp is
 * live. The only place x16 is clobbered without a spill is a far `bl` (the AAPCS64
 * veneer rule: x16/x17 may be changed by any call).
 */
#include <stddef.h>
#include <stdint.h>

#include "arch/arch.h"

/* The form of an instruction as far as relocation cares (a64_form). */
typedef enum a64_form {
    A64_FORM_OTHER = 0, /* position-independent: copied */
    A64_FORM_B,         /* b imm26 */
    A64_FORM_BL,        /* bl imm26 */
    A64_FORM_BCOND,     /* b.cond / bc.cond imm19 */
    A64_FORM_CBZ,       /* cbz / cbnz imm19 */
    A64_FORM_TBZ,       /* tbz / tbnz imm14 */
    A64_FORM_ADR,       /* adr imm21 */
    A64_FORM_ADRP,      /* adrp imm21 pages */
    A64_FORM_LDR_LIT,   /* ldr/ldrsw/prfm literal imm19 (GPR or SIMD&FP) */
} a64_form_t;

/* The form of the instruction word W. */
a64_form_t a64_form(uint32_t w);

/* The instruction word at BUF (little-endian). */
uint32_t a64_word(const uint8_t *buf);

/* arch_decode for A64 (the same contract). */
int a64_decode(const uint8_t *buf, size_t len, uint64_t addr, arch_insn_t *out /*OUT*/);

/* arch_is_padding for A64: nops, udf #0 (zero words). */
int a64_is_padding(const uint8_t *buf, size_t len);

/*
 * arch_reloc_insn for A64. SHORT_OK is ignored (every form has one size). Forms whose
 * reach no longer covers the target become longer sequences:
 *   b.cond/cbz/cbnz/tbz/tbnz -> the inverted branch over a `b` (8 bytes);
 *   bl beyond +-128 MiB -> adrp x16; add x16; blr x16 (12 bytes, +-4 GiB; x16 is free at
 *     a call by AAPCS64; the callee must be a valid BLR target under BTI);
 *   adr beyond +-1 MiB -> adrp; add (8 bytes);
 *   ldr/ldrsw literal beyond +-1 MiB -> adrp Rt; ldr Rt, [Rt, #lo12] (8 bytes) or adrp;
 *     add; ldr (12) when the literal is not aligned to its size; SIMD&FP and xzr
 *     destinations load through x16, spilled (20 bytes);
 *   prfm literal beyond +-1 MiB -> nop (a hint).
 * b beyond +-128 MiB and adrp beyond +-4 GiB are QP_ERANGE (no free register there).
 * Writes at most A64_MAX_RELOC bytes.
 */
#define A64_MAX_RELOC 20
int a64_reloc_insn(const uint8_t *buf, const arch_insn_t *in, uint64_t new_addr,
                   uint64_t new_target, int short_ok, uint8_t *out /*OUT*/, size_t cap);

/*
 * arch_isa_t.reloc_max_len for A64: the length a64_reloc_insn gives IN when its target
 * (branches) or its data (adr, ldr literal) is out of the short form's reach: 8 for
 * b.cond, cbz/cbnz, tbz/tbnz and adr, the literal's long form (8, 12 or 20), 4 for the
 * rest. A `bl` assumes +-128 MiB (its 12-byte veneer is not reserved: the editor then
 * fails with QP_ERANGE rather than emit another length).
 */
int a64_reloc_max_len(const uint8_t *buf, const arch_insn_t *in);

/* b / bl at ADDR to TARGET (4 bytes; QP_ERANGE beyond +-128 MiB, QP_EINVAL unaligned). */
int a64_emit_jmp(uint64_t addr, uint64_t target, uint8_t *out /*OUT*/, size_t cap);
int a64_emit_call(uint64_t addr, uint64_t target, uint8_t *out /*OUT*/, size_t cap);

/*
 * Add one to the 8-byte counter at COUNTER (8-aligned, within +-4 GiB of ADDR), keeping
 * every register, sp and NZCV (nothing here sets flags: no MRS/MSR is needed):
 *   ARCH_INC_PLAIN:  stp x16,x17,[sp,#-16]!; adrp x16; ldr x17,[x16,#lo]; add x17,x17,#1;
 *                    str x17,[x16,#lo]; ldp x16,x17,[sp],#16            (24 bytes)
 *   ARCH_INC_ATOMIC: an ldxr/stxr loop with x15 as the status register (44 bytes)
 *   ARCH_INC_SWITCH: QP_EUNSUPP (the x86 prefix-byte patch has no A64 equivalent).
 */
int a64_emit_counter_inc(uint64_t addr, uint64_t counter, int mode, uint8_t *out /*OUT*/,
                         size_t cap);

/*
 * arch_isa_t.emit_counter_inc_at for A64: the increment of a64_emit_counter_inc, or
 * ARCH_INC_ATOMIC_LSE, with no spill where CTX (NULL: nothing known) names enough dead
 * registers (dead_regs bit n: xn; x18 and x29..x30 are never used):
 *   ARCH_INC_PLAIN, 2 dead:  adrp a; ldr v,[a,#lo]; add v,v,#1; str v,[a,#lo]  (16 bytes)
 *   ARCH_INC_ATOMIC, 3 dead: adrp a; add a; ldxr/add/stxr ws/cbnz ws           (24 bytes)
 *   ARCH_INC_ATOMIC_LSE:     adrp a; add a; mov v,#1; stadd v,[a] (ARMv8.1 LSE), 16 bytes
 *                            with 2 dead, else 24 with x16/x17 spilled
 *   otherwise:               a64_emit_counter_inc's spilled sequences (24, 40 bytes).
 * None writes NZCV, so CTX's live_flags never adds an mrs/msr.
 */
int a64_emit_counter_inc_at(uint64_t addr, uint64_t counter, int mode,
                            const arch_snip_ctx_t *ctx, uint8_t *out /*OUT*/, size_t cap);

/*
 * arch_isa_t.emit_call_protected for A64: a call of a runtime hook (runtime/qprt.h; it
 * keeps every register and NZCV) at ADDR: `stp x29, x30, [sp, #-16]!; bl TARGET;
 * ldp x29, x30, [sp], #16`, 12 bytes (no red zone on AArch64 Linux: sp moves freely;
 * the return address is ADDR + 8). QP_ERANGE beyond +-128 MiB.
 */
int a64_emit_call_protected(uint64_t addr, uint64_t target, uint8_t *out /*OUT*/, size_t cap);

/*
 * Save NZCV in a 16-byte slot pushed below sp, and pop it back (`mrs`/`msr nzcv` through
 * x16, which both keep): 20 bytes each. Use only where liveness says NZCV is live.
 */
int a64_emit_flags_save(uint8_t *out /*OUT*/, size_t cap);
int a64_emit_flags_restore(uint8_t *out /*OUT*/, size_t cap);

/* arch_isa_t.jump_table for A64 (a64_jtab.c): gcc's and clang's switch tables. */
int a64_jump_table(const uint8_t *buf, size_t len, uint64_t addr, arch_jtab_t *out /*OUT*/);

/* arch_isa_t.slot_store for A64 (a64_jtab.c): `str xV, [sp, #SLOT]` after `adr xV` or
 * `adrp xV; add xV, xV, #lo12`, nothing else writing xV between them. */
int
a64_slot_store(const uint8_t *buf, size_t len, uint64_t addr, int64_t slot,
    uint64_t *value /*OUT*/, uint64_t *first /*OUT*/);

/* arch_isa_t.sp_access for A64 (a64_frame.c). */
int
a64_sp_access(
    const uint8_t *buf, size_t len, uint64_t addr, arch_sp_access_t *out /*OUT*/);

/* LEN bytes (a multiple of 4) of nops; a trap (udf #0xdead). */
int a64_emit_nops(size_t len, uint8_t *out /*OUT*/, size_t cap);
int a64_emit_trap(uint8_t *out /*OUT*/, size_t cap);
int a64_emit_got_fix(uint8_t *out /*OUT*/, size_t cap);

/* Encoders used by the emitters and the tests (no range checks beyond the field's). */
uint32_t a64_enc_b(int link, int64_t off);           /* off: bytes, multiple of 4 */
uint32_t a64_enc_adrp(unsigned rd, int64_t pages);
uint32_t a64_enc_add_imm(unsigned rd, unsigned rn, unsigned imm12);

/*****************************************************************************
 * cfg/'s questions about A64 code (a64_cfg.c; arch_isa_t's cfg block)
 */

/* May W write general register R (0..30)? Conservative: any Rd/Rt field equal to R, a
 * load pair's second register, a writeback base, an exclusive's status, a call. */
int a64_may_write(uint32_t w, unsigned r);

/* arch_isa_t.code_ref: adr (ARCH_REF_ADDR), ldr literal (ARCH_REF_MEM), or adrp with the
 * `add xE, xD, #:lo12:` (ADDR) or `ldr/str [xD, #:lo12:]` (MEM) that uses its register
 * within the next 8 instructions of the same block. */
int a64_code_ref(const uint8_t *buf, size_t len, uint64_t addr, uint64_t *out /*OUT*/);

/* arch_isa_t.ptr_jump: the `br xR` that ends BUF loads xR from one memory slot
 * (ldr xR, [xN, #imm] / ldur / pre- or post-index / literal) within 16 instructions,
 * through register copies; or xR is x16/x17 copied from another register (gcc's
 * indirect sibling call). */
int a64_ptr_jump(const uint8_t *buf, size_t len, uint64_t addr);

/* arch_isa_t.plt_slot: `[bti c] adrp x16; ldr x17, [x16, #lo]; add x16, x16, #lo;
 * br x17` (ld's PLT entry). */
int a64_plt_slot(const uint8_t *buf, size_t len, uint64_t addr, uint64_t *slot /*OUT*/);

/* arch_isa_t.syscall_nr: `mov w8, #N` (movz w8/x8). */
long a64_syscall_nr(const uint8_t *prev, size_t len);

#endif
