/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The table of supported ISAs (arch_isa_t) and the choice of one from an ELF machine
 * number. x86-64's entry points at the free functions of arch/arch.h; AArch64's at
 * arch/aarch64/.
 */
#include <stdio.h>

#include "arch/aarch64/a64_priv.h"
#include "arch/arch.h"

/* x86-64's counter at a point: `incq`, or `add|sub %REG` (REG not ARCH_REG_NONE), write
 * the flags, so they are saved where live. */
static int
x86_counter_at(uint64_t addr, uint64_t counter, int mode, uint8_t reg, int subtract,
               const arch_snip_ctx_t *ctx, uint8_t *out, size_t cap)
{
    int save = ctx != NULL && ctx->live_flags != 0, n = 0, k;
    if (out == NULL)
        return QP_EINVAL;
    if (save) {
        QP_CHECK(k = arch_emit_flags_save(out, cap));
        n += k;
    }
    QP_CHECK(k = reg == ARCH_REG_NONE
                 ? arch_emit_counter_inc(addr + (uint64_t)n, counter, mode, out + n,
                                         cap - (size_t)n)
                 : arch_emit_counter_add_reg(addr + (uint64_t)n, counter, mode, reg,
                                             subtract, out + n, cap - (size_t)n));
    n += k;
    if (save) {
        QP_CHECK(k = arch_emit_flags_restore(out + n, cap - (size_t)n));
        n += k;
    }
    return n;
}

static int
x86_counter_inc_at(uint64_t addr, uint64_t counter, int mode, const arch_snip_ctx_t *ctx,
                   uint8_t *out, size_t cap)
{
    return x86_counter_at(addr, counter, mode, ARCH_REG_NONE, 0, ctx, out, cap);
}

static int
x86_counter_add_reg_at(uint64_t addr, uint64_t counter, int mode, uint8_t reg, int subtract,
                       const arch_snip_ctx_t *ctx, uint8_t *out, size_t cap)
{
    return reg == ARCH_REG_NONE ? QP_EINVAL
                                : x86_counter_at(addr, counter, mode, reg, subtract, ctx, out, cap);
}

/* x86-64's bound: the rel32 form of a direct branch at the same address (its length
 * does not depend on where it goes); everything else keeps its length. */
static int
x86_reloc_max_len(const uint8_t *buf, const arch_insn_t *in)
{
    uint8_t scratch[ARCH_MAX_RELOC];
    int direct = in->kind == ARCH_KIND_JMP || in->kind == ARCH_KIND_JCC
        || in->kind == ARCH_KIND_CALL;
    return arch_reloc_insn(buf, in, in->addr, direct ? in->addr + 0x10000000 : 0, 0, scratch,
                           sizeof(scratch));
}

static const arch_isa_t isa_x86_64 = {
    .name = "x86-64",
    .elf_machine = ARCH_EM_X86_64,
    .insn_align = 1,
    .max_insn = 15,
    .jmp_len = 5,
    .has_red_zone = 1,
    .jmp_reach_log2 = 31,
    .decode = arch_decode,
    .is_padding = arch_is_padding,
    .frame_entry = arch_frame_entry,
    .looks_like_data = arch_looks_like_data,
    .reloc_insn = arch_reloc_insn,
    .emit_jmp = arch_emit_jmp,
    .emit_call = arch_emit_call,
    .emit_counter_inc = arch_emit_counter_inc,
    .emit_flags_save = arch_emit_flags_save,
    .emit_flags_restore = arch_emit_flags_restore,
    .emit_nops = arch_emit_nops,
    .emit_trap = arch_emit_trap,
    .emit_counter_inc_at = x86_counter_inc_at,
    .emit_counter_add_reg_at = x86_counter_add_reg_at,
    .emit_call_protected = arch_emit_call_protected,
    .decode_ops = arch_decode_ops,
    .plt_slot = arch_plt_slot,
    .sys_noreturn = { 60, 231, 15 },
    .reloc_max_len = x86_reloc_max_len,
    .emit_jmp_xlate = arch_emit_jmp_xlate,
    .emit_xlate_stub = arch_emit_xlate_stub,
    .emit_got_fix = arch_emit_got_fix,
    .go_may_fault = arch_go_may_fault,
};

static const arch_isa_t isa_aarch64 = {
    .name = "AArch64",
    .elf_machine = ARCH_EM_AARCH64,
    .insn_align = 4,
    .max_insn = 4,
    .jmp_len = 4,
    .has_red_zone = 0,
    .jmp_reach_log2 = 27,
    .decode = a64_decode,
    .is_padding = a64_is_padding,
    .reloc_insn = a64_reloc_insn,
    .emit_jmp = a64_emit_jmp,
    .emit_call = a64_emit_call,
    .emit_counter_inc = a64_emit_counter_inc,
    .emit_flags_save = a64_emit_flags_save,
    .emit_flags_restore = a64_emit_flags_restore,
    .emit_nops = a64_emit_nops,
    .emit_trap = a64_emit_trap,
    .emit_counter_inc_at = a64_emit_counter_inc_at,
    .emit_call_protected = a64_emit_call_protected,
    .jump_table = a64_jump_table,
    .code_ref = a64_code_ref,
    .ptr_jump = a64_ptr_jump,
    .plt_slot = a64_plt_slot,
    .syscall_nr = a64_syscall_nr,
    .sys_noreturn = { 93, 94, 139 },
    .reloc_max_len = a64_reloc_max_len,
    .sp_access = a64_sp_access,
    .slot_store = a64_slot_store,
    .emit_got_fix = a64_emit_got_fix,
};

const arch_isa_t *
arch_isa_for_machine(unsigned machine)
{
    switch (machine) {
    case ARCH_EM_X86_64:
        return &isa_x86_64;
    case ARCH_EM_AARCH64:
        return &isa_aarch64;
    default:
        return NULL;
    }
}

/* A name for the machines one is likely to meet, for the refusal. */
static const char *
machine_name(unsigned machine)
{
    switch (machine) {
    case 2: return "SPARC";
    case 3: return "i386";
    case 8: return "MIPS";
    case 20: return "PowerPC";
    case 21: return "PowerPC64";
    case 22: return "S/390";
    case 40: return "32-bit ARM";
    case 43: return "SPARC V9";
    case 50: return "IA-64";
    case 243: return "RISC-V";
    case 258: return "LoongArch";
    default: return "unknown";
    }
}

const arch_isa_t *
arch_isa_select(unsigned machine, char *why, size_t whylen)
{
    const arch_isa_t *isa = arch_isa_for_machine(machine);
    if (!isa && why && whylen)
        snprintf(why, whylen, "ELF machine %u (%s) is not supported", machine,
                 machine_name(machine));
    return isa;
}

const arch_isa_t *
arch_isa_host(void)
{
    return &isa_x86_64;
}
