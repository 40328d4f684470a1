/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * arch/arch.h for x86-64 (64-bit mode), on Zydis 4. This is the only file that includes
 * Zydis: everything Zydis reports is converted to arch_* types here.
 *
 * Two speeds. arch_decode() runs on every instruction of a program (millions), so it
 * decodes without operands and derives what it needs from Zydis' raw encoding facts
 * (raw.imm[].is_relative/offset, raw.disp.offset, raw.modrm). Only the rare instruction
 * that may name the stack pointer in a register field is decoded a second time with
 * operands. arch_decode_ops() always decodes operands; analyses call it on few
 * instructions.
 */
#include <stdatomic.h>
#include <Zydis/Zydis.h>
#include <string.h>

#include "arch/arch.h"

/*****************************************************************************
 * The decoder
 */

/*
 * One decoder for the whole process, set up on first use. ZydisDecoderInit only stores
 * constants, so running it twice (even from two threads) leaves the same state. The
 * defaults are kept: Intel branch semantics (a 0x66 prefix does not shorten a near
 * branch in 64-bit mode, as on Intel CPUs and in what compilers emit), MPX and CET
 * opcodes enabled (so `bnd jmp`, `endbr64` decode as such), KNC off. x86_decode_fast
 * reads the forms it knows as these settings do: change them there too.
 */
static ZydisDecoder x86_decoder;
static atomic_int x86_decoder_ready;

static const ZydisDecoder*
x86_decoder_get(void)
{
    if (!atomic_load_explicit(&x86_decoder_ready, memory_order_acquire)) {
        ZydisDecoderInit(&x86_decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
        atomic_store_explicit(&x86_decoder_ready, 1, memory_order_release);
    }
    return &x86_decoder;
}

/*****************************************************************************
 * Registers
 */

/* Segment values for arch_opnd_t.seg. */
#define X86_SEG_FS 1
#define X86_SEG_GS 2

static const char* const x86_reg_names[ARCH_NREGS] = { "none", "rax", "rcx", "rdx", "rbx",
    "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15" };

/*
 * The ISA-neutral number of a Zydis register: the 64-bit general-purpose family
 * (al, ah, ax, eax, rax all give 1), ARCH_REG_PC for rip/eip, ARCH_REG_NONE otherwise
 * (vector, mask, segment, control registers, flags).
 */
static uint8_t
x86_reg_map(ZydisRegister r)
{
    ZydisRegister full;

    if (r == ZYDIS_REGISTER_NONE)
        return ARCH_REG_NONE;
    if (r == ZYDIS_REGISTER_RIP || r == ZYDIS_REGISTER_EIP)
        return ARCH_REG_PC;
    full = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);
    if (full >= ZYDIS_REGISTER_RAX && full <= ZYDIS_REGISTER_R15)
        return (uint8_t)(full - ZYDIS_REGISTER_RAX + 1);
    return ARCH_REG_NONE;
}

const char*
arch_reg_name(int reg)
{
    if (reg >= 0 && reg < ARCH_NREGS)
        return x86_reg_names[reg];
    if (reg == ARCH_REG_PC)
        return "rip";
    return "?";
}

/*****************************************************************************
 * Fast decoding: length, kind, targets, pc-relative fields, flags
 */

/* Zydis' RFLAGS bits to ARCH_FLAG_* bits. */
static uint8_t
x86_flags_map(ZydisAccessedFlagsMask m)
{
    uint8_t f = 0;

    if (m & ZYDIS_CPUFLAG_CF)
        f |= ARCH_FLAG_CF;
    if (m & ZYDIS_CPUFLAG_PF)
        f |= ARCH_FLAG_PF;
    if (m & ZYDIS_CPUFLAG_AF)
        f |= ARCH_FLAG_AF;
    if (m & ZYDIS_CPUFLAG_ZF)
        f |= ARCH_FLAG_ZF;
    if (m & ZYDIS_CPUFLAG_SF)
        f |= ARCH_FLAG_SF;
    if (m & ZYDIS_CPUFLAG_OF)
        f |= ARCH_FLAG_OF;
    if (m & ZYDIS_CPUFLAG_DF)
        f |= ARCH_FLAG_DF;
    return f;
}

/*
 * True when Zydis' "modified" flags are only written on some executions, so that
 * flags_written (must-writes only) has to be empty:
 * - shifts and rotates by %cl, or by an immediate that masks to 0, leave RFLAGS alone
 *   when the count is 0;
 * - rep/repe/repne cmps and scas do nothing when %rcx is 0.
 */
static int
x86_flags_conditional(const ZydisDecodedInstruction* zi)
{
    uint64_t count;

    switch (zi->mnemonic) {
    case ZYDIS_MNEMONIC_SHL:
    case ZYDIS_MNEMONIC_SHR:
    case ZYDIS_MNEMONIC_SAR:
    case ZYDIS_MNEMONIC_ROL:
    case ZYDIS_MNEMONIC_ROR:
    case ZYDIS_MNEMONIC_RCL:
    case ZYDIS_MNEMONIC_RCR:
    case ZYDIS_MNEMONIC_SHLD:
    case ZYDIS_MNEMONIC_SHRD:
        if (zi->raw.imm[0].size == 0) {
            /* d0/d1 shift by one; d2/d3 and 0f a5/ad shift by %cl. */
            return !(zi->opcode_map == ZYDIS_OPCODE_MAP_DEFAULT
                && (zi->opcode == 0xd0 || zi->opcode == 0xd1));
        }
        count = zi->raw.imm[0].value.u & (zi->operand_width == 64 ? 0x3f : 0x1f);
        return count == 0;
    case ZYDIS_MNEMONIC_CMPSB:
    case ZYDIS_MNEMONIC_CMPSW:
    case ZYDIS_MNEMONIC_CMPSD: /* also the SSE compare: the category tells them apart */
    case ZYDIS_MNEMONIC_CMPSQ:
    case ZYDIS_MNEMONIC_SCASB:
    case ZYDIS_MNEMONIC_SCASW:
    case ZYDIS_MNEMONIC_SCASD:
    case ZYDIS_MNEMONIC_SCASQ:
        return zi->meta.category == ZYDIS_CATEGORY_STRINGOP
            && (zi->attributes
                & (ZYDIS_ATTRIB_HAS_REP | ZYDIS_ATTRIB_HAS_REPE
                    | ZYDIS_ATTRIB_HAS_REPNE));
    default: return 0;
    }
}

/*
 * True for instructions user code cannot run (#GP or #UD at CPL 3 under Linux). Zydis'
 * IS_PRIVILEGED attribute covers most ring-0 instructions but not lgdt; port I/O and
 * cli/sti depend on IOPL, which is 0 for Linux processes; VMX instructions need VMX
 * root or a hypervisor.
 */
static int
x86_is_priv(const ZydisDecodedInstruction* zi)
{
    if (zi->attributes & ZYDIS_ATTRIB_IS_PRIVILEGED)
        return 1;
    switch (zi->meta.category) {
    case ZYDIS_CATEGORY_IO:
    case ZYDIS_CATEGORY_IOSTRINGOP:
    case ZYDIS_CATEGORY_VTX:
    case ZYDIS_CATEGORY_SYSRET: return 1;
    default: break;
    }
    switch (zi->mnemonic) {
    case ZYDIS_MNEMONIC_LGDT:
    case ZYDIS_MNEMONIC_LIDT:
    case ZYDIS_MNEMONIC_CLI:
    case ZYDIS_MNEMONIC_STI:
    case ZYDIS_MNEMONIC_HLT: return 1;
    default: return 0;
    }
}

/* The control-flow class of a decoded instruction (before targets are known). */
static arch_kind_t
x86_kind(const ZydisDecodedInstruction* zi)
{
    switch (zi->meta.category) {
    case ZYDIS_CATEGORY_UNCOND_BR:
        /*
         * xabort only transfers (to the xbegin fallback, already an edge of xbegin)
         * inside a transaction; outside it is a nop.
         */
        if (zi->mnemonic == ZYDIS_MNEMONIC_XABORT)
            return ARCH_KIND_SEQ;
        return ARCH_KIND_JMP; /* refined by the caller: relative or not */
    case ZYDIS_CATEGORY_COND_BR:
        /*
         * jcc, loop*, jrcxz/jecxz, and xbegin: its relative operand is the abort
         * handler, which only xbegin reaches, so it is a conditional edge too.
         */
        return ARCH_KIND_JCC;
    case ZYDIS_CATEGORY_CALL: return ARCH_KIND_CALL;
    case ZYDIS_CATEGORY_RET: /* ret, ret imm16, lret, iret* */
    case ZYDIS_CATEGORY_SYSRET: /* sysret, sysexit, rsm: leave, never fall through */
        return ARCH_KIND_RET;
    case ZYDIS_CATEGORY_SYSCALL: /* syscall, sysenter */ return ARCH_KIND_SYSCALL;
    case ZYDIS_CATEGORY_INTERRUPT: /* int3 traps for good; int n, int1 come back */
        return zi->mnemonic == ZYDIS_MNEMONIC_INT3 ? ARCH_KIND_HALT : ARCH_KIND_SYSCALL;
    case ZYDIS_CATEGORY_NOP: /* 90, 66 90, rex.W 90 */
    case ZYDIS_CATEGORY_WIDENOP: /* 0f 1f /0 and the other reserved-nop opcodes */
        return ARCH_KIND_NOP;
    default: break;
    }
    switch (zi->mnemonic) {
    case ZYDIS_MNEMONIC_HLT:
    case ZYDIS_MNEMONIC_UD0:
    case ZYDIS_MNEMONIC_UD1:
    case ZYDIS_MNEMONIC_UD2: return ARCH_KIND_HALT;
    case ZYDIS_MNEMONIC_ENDBR64:
    case ZYDIS_MNEMONIC_ENDBR32: return ARCH_KIND_ENDBR;
    default: return ARCH_KIND_SEQ;
    }
}

/* Instructions that always move or use %rsp implicitly. */
static int
x86_uses_sp_implicitly(ZydisMnemonic m)
{
    switch (m) {
    case ZYDIS_MNEMONIC_PUSH:
    case ZYDIS_MNEMONIC_POP:
    case ZYDIS_MNEMONIC_PUSHF:
    case ZYDIS_MNEMONIC_PUSHFD:
    case ZYDIS_MNEMONIC_PUSHFQ:
    case ZYDIS_MNEMONIC_POPF:
    case ZYDIS_MNEMONIC_POPFD:
    case ZYDIS_MNEMONIC_POPFQ:
    case ZYDIS_MNEMONIC_CALL:
    case ZYDIS_MNEMONIC_RET:
    case ZYDIS_MNEMONIC_ENTER:
    case ZYDIS_MNEMONIC_LEAVE:
    case ZYDIS_MNEMONIC_IRET:
    case ZYDIS_MNEMONIC_IRETD:
    case ZYDIS_MNEMONIC_IRETQ: return 1;
    default: return 0;
    }
}

/*
 * A cheap over-approximation of "an operand is %rsp (or %esp, %sp, %spl)": some register
 * field of the encoding holds 4 (the low bits of rsp's number; REX/VEX extension bits are
 * ignored, so r12 passes too). Only instructions that pass are decoded with operands.
 */
static int
x86_may_name_sp(const ZydisDecodedInstruction* zi)
{
    if (zi->attributes & ZYDIS_ATTRIB_HAS_MODRM) {
        if (zi->raw.modrm.reg == 4)
            return 1;
        if (zi->raw.modrm.rm == 4) {
            if (zi->raw.modrm.mod == 3)
                return 1;
            /* A SIB byte follows; an index of 4 is "none" or r12, never rsp. */
            if (zi->raw.sib.base == 4)
                return 1;
        }
    }
    if (zi->opcode_map == ZYDIS_OPCODE_MAP_DEFAULT && (zi->opcode & 7) == 4
        && ((zi->opcode >= 0x90 && zi->opcode <= 0x97) /* xchg r, rax */
            || (zi->opcode >= 0xb0 && zi->opcode <= 0xbf))) /* mov $imm, r */
        return 1;
    if (zi->opcode_map == ZYDIS_OPCODE_MAP_0F && zi->opcode == 0xcc) /* bswap */
        return 1;
    /* BMI/TBM name a general-purpose register in VEX/XOP.vvvv. */
    switch (zi->meta.category) {
    case ZYDIS_CATEGORY_BMI1:
    case ZYDIS_CATEGORY_BMI2:
    case ZYDIS_CATEGORY_TBM: return 1;
    default: return 0;
    }
}

/* The exact test behind x86_may_name_sp: decode the operands and look for rsp. */
static int
x86_names_sp(const ZydisDecoderContext* ctx, const ZydisDecodedInstruction* zi)
{
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    const uint8_t sp = x86_reg_map(ZYDIS_REGISTER_RSP);
    uint8_t i;

    /* The common case, an (%rsp) address without REX.B, needs no operands. */
    if (zi->encoding == ZYDIS_INSTRUCTION_ENCODING_LEGACY && zi->raw.modrm.mod != 3
        && zi->raw.modrm.rm == 4 && zi->raw.sib.base == 4
        && !((zi->attributes & ZYDIS_ATTRIB_HAS_REX) && zi->raw.rex.B))
        return 1;
    if (ZYAN_FAILED(ZydisDecoderDecodeOperands(
            x86_decoder_get(), ctx, zi, ops, zi->operand_count)))
        return 1; /* cannot tell: say yes */
    for (i = 0; i < zi->operand_count; i++) {
        if (ops[i].type == ZYDIS_OPERAND_TYPE_REGISTER
            && x86_reg_map(ops[i].reg.value) == sp)
            return 1;
        if (ops[i].type == ZYDIS_OPERAND_TYPE_MEMORY
            && (x86_reg_map(ops[i].mem.base) == sp
                || x86_reg_map(ops[i].mem.index) == sp))
            return 1;
    }
    return 0;
}

/*
 * Knights Corner (KNC, Xeon Phi coprocessor) instructions: MVEX encodings and the
 * VEX-encoded mask branches jkzd/jknzd. Zydis decodes them even with its KNC mode off,
 * but no CPU that runs x86-64 Linux programs does (they raise #UD), so they are refused
 * like any other invalid bytes.
 */
static int
x86_is_knc(const ZydisDecodedInstruction* zi)
{
    if (zi->encoding == ZYDIS_INSTRUCTION_ENCODING_MVEX)
        return 1;
    switch (zi->meta.isa_ext) {
    case ZYDIS_ISA_EXT_KNC:
    case ZYDIS_ISA_EXT_KNCE:
    case ZYDIS_ISA_EXT_KNCV: return 1;
    default: break;
    }
    switch (zi->meta.isa_set) {
    case ZYDIS_ISA_SET_KNCE:
    case ZYDIS_ISA_SET_KNCJKBR:
    case ZYDIS_ISA_SET_KNCSTREAM:
    case ZYDIS_ISA_SET_KNCV:
    case ZYDIS_ISA_SET_KNC_MISC:
    case ZYDIS_ISA_SET_KNC_PF_HINT: return 1;
    default: return 0;
    }
}

/* True when the instruction's ModRM names a rip-relative (or eip-relative) memory
 * operand. */
static int
x86_is_riprel(const ZydisDecodedInstruction* zi)
{
    /*
     * In 64-bit mode mod=00 rm=101 is [rip+disp32] with no SIB byte, in every encoding
     * (legacy, VEX, EVEX: EVEX compresses only disp8, never this disp32). Instructions
     * that ignore mod (mov to/from control registers) have no displacement, hence the
     * size test.
     */
    return (zi->attributes & ZYDIS_ATTRIB_HAS_MODRM) && zi->raw.modrm.mod == 0
        && zi->raw.modrm.rm == 5 && zi->raw.disp.size == 32;
}

/* Address arithmetic at the instruction's address size (67 prefix: 32 bits). */
static uint64_t
x86_wrap(const ZydisDecodedInstruction* zi, uint64_t a)
{
    return zi->address_width == 32 ? (uint32_t)a : a;
}

/*
 * The length of the padding nop at BUF (LEN bytes readable) in one of the forms
 * assemblers and linkers emit, or 0: `90`, `66 90`, and `0f 1f /0` at (%rax),
 * disp8(%rax), disp32(%rax) or with the SIB byte of (%rax,%rax,1), after any 66
 * prefixes and at most one cs (2e), up to 15 bytes. Zydis decodes each of them as
 * NOP or WIDENOP of that length, with no operand naming %rsp, no flags read or written
 * and no pc-relative field: all arch_decode derives from it (every form, with 0-13
 * prefixes and each length cut short, gave Zydis' result byte for byte;
 * tests/check_arch's test_decode_padding_nops holds them). Gap sweeps and padding checks
 * decode tens of thousands of them, at a twentieth of Zydis' cost.
 */
static size_t
x86_padding_nop_len(const uint8_t *buf, size_t len)
{
    size_t i = 0, n;
    while (i < len && i < 14 && buf[i] == 0x66)
        i++;
    if (i < len && buf[i] == 0x90)
        return i <= 1 ? i + 1 : 0; /* (66 66 90: left to Zydis) */
    if (i < len && buf[i] == 0x2e)
        i++;
    if (i + 3 > len || buf[i] != 0x0f || buf[i + 1] != 0x1f)
        return 0;
    switch (buf[i + 2]) {
    case 0x00: n = i + 3; break;
    case 0x40: n = i + 4; break;
    case 0x80: n = i + 7; break;
    case 0x44: n = i + 5; break;
    case 0x84: n = i + 8; break;
    default: return 0;
    }
    if ((buf[i + 2] & 0x07) == 0x04 && (i + 4 > len || buf[i + 3] != 0x00))
        return 0;
    return n <= len && n <= ARCH_MAX_INSN ? n : 0;
}

/* The flags each condition code (the low nibble of jcc's opcode) tests. */
static const uint8_t x86_jcc_tested[16] = {
    ARCH_FLAG_OF, ARCH_FLAG_OF, ARCH_FLAG_CF, ARCH_FLAG_CF, /* o no b ae */
    ARCH_FLAG_ZF, ARCH_FLAG_ZF, ARCH_FLAG_CF | ARCH_FLAG_ZF,
    ARCH_FLAG_CF | ARCH_FLAG_ZF,                              /* e ne be a */
    ARCH_FLAG_SF, ARCH_FLAG_SF, ARCH_FLAG_PF, ARCH_FLAG_PF,   /* s ns p np */
    ARCH_FLAG_SF | ARCH_FLAG_OF, ARCH_FLAG_SF | ARCH_FLAG_OF, /* l ge */
    ARCH_FLAG_ZF | ARCH_FLAG_SF | ARCH_FLAG_OF,
    ARCH_FLAG_ZF | ARCH_FLAG_SF | ARCH_FLAG_OF, /* le g */
};

/* A branch of LEN bytes at ADDR whose REL_SIZE-byte offset ends it, into *OUT. */
static void
x86_fast_branch(const uint8_t *buf, size_t len, size_t rel_size, uint64_t addr,
    uint8_t kind, arch_insn_t *out)
{
    int64_t v;
    if (rel_size == 1)
        v = (int8_t)buf[len - 1];
    else
        v = (int32_t)((uint32_t)buf[len - 4] | (uint32_t)buf[len - 3] << 8
            | (uint32_t)buf[len - 2] << 16 | (uint32_t)buf[len - 1] << 24);
    out->len = (uint8_t)len;
    out->kind = kind;
    out->flags = ARCH_F_BRANCH_REL;
    out->rel_off = (uint8_t)(len - rel_size);
    out->rel_size = (uint8_t)rel_size;
    out->target = addr + len + (uint64_t)v;
}

/*
 * An instruction with a ModRM byte, its opcode at BUF[AT] (after the prefix REX, or 0)
 * and IMM bytes of immediate after its address, into *OUT as a SEQ: 1, or 0 when too few
 * bytes. It names %rsp when a register field is 4 with its REX bit clear (REG_IS_REG: the
 * reg field names a register; rm of a register; a SIB base; a SIB index of 4 is none), as
 * x86_names_sp finds from Zydis' operands (%esp is of %rsp's family).
 */
static int
x86_fast_modrm(const uint8_t *buf, size_t len, uint64_t addr, uint8_t rex, size_t at,
    int reg_is_reg, size_t imm, arch_insn_t *out)
{
    uint8_t modrm = buf[at + 1];
    uint8_t mod = modrm >> 6, reg = (modrm >> 3) & 7, rm = modrm & 7;
    size_t n = at + 2;
    int sp = reg_is_reg && reg == 4 && !(rex & 4);
    if (mod == 3) {
        sp |= rm == 4 && !(rex & 1);
    } else {
        uint8_t base = rm;
        if (rm == 4) {
            if (len <= n)
                return 0;
            base = buf[n] & 7;
            sp |= base == 4 && !(rex & 1);
            n++;
        }
        if (mod == 1)
            n += 1;
        else if (mod == 2 || base == 5)
            n += 4;
    }
    n += imm;
    if (n > len)
        return 0;
    out->len = (uint8_t)n;
    out->kind = ARCH_KIND_SEQ;
    if (mod == 0 && rm == 5) {
        const uint8_t *d = buf + at + 2;
        int32_t v = (int32_t)((uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16
            | (uint32_t)d[3] << 24);
        out->flags = ARCH_F_RIPREL;
        out->rel_off = (uint8_t)(at + 2);
        out->rel_size = 4;
        out->target = addr + n + (uint64_t)(int64_t)v;
    }
    if (sp)
        out->flags |= ARCH_F_READS_SP;
    return 1;
}

/* The status flags and, or, xor and test write (AF is left undefined: not written). */
#define X86_LOGIC_FLAGS (ARCH_FLAGS_STATUS & ~ARCH_FLAG_AF)

/*
 * What the 32- or 64-bit ALU instruction with opcode OP (ModRM byte MODRM) between a
 * register and a register or memory writes (add, sub, cmp: every status flag; or, and,
 * xor, test: all but AF), or -1 when it is none of those (adc and sbb also read CF).
 */
static int
x86_fast_alu_flags(uint8_t op, uint8_t modrm)
{
    switch (op) {
    case 0x01:
    case 0x03:
    case 0x29:
    case 0x2b:
    case 0x39:
    case 0x3b: return ARCH_FLAGS_STATUS;
    case 0x09:
    case 0x0b:
    case 0x21:
    case 0x23:
    case 0x31:
    case 0x33:
    case 0x85: return X86_LOGIC_FLAGS;
    case 0x83: /* op $imm8, r/m: the reg field says which */
        switch ((modrm >> 3) & 7) {
        case 0:
        case 5:
        case 7: return ARCH_FLAGS_STATUS; /* add sub cmp */
        case 1:
        case 4:
        case 6: return X86_LOGIC_FLAGS; /* or and xor */
        default: return -1;             /* adc sbb */
        }
    default: return -1;
    }
}

/*
 * mov, lea (89, 8b, 8d) and the ALU instructions above, after a REX prefix or none (REX
 * 0), their opcode at BUF[AT], into *OUT: 1, or 0 when Zydis is to decode (another
 * opcode, too few bytes, lea of a register).
 */
static int
x86_fast_rm(const uint8_t *buf, size_t len, uint64_t addr, uint8_t rex, size_t at,
    arch_insn_t *out)
{
    if (len < at + 2)
        return 0;
    uint8_t op = buf[at], modrm = buf[at + 1];
    if (op == 0x89 || op == 0x8b || (op == 0x8d && modrm >> 6 != 3))
        return x86_fast_modrm(buf, len, addr, rex, at, 1, 0, out);
    int w = x86_fast_alu_flags(op, modrm);
    if (w < 0 || !x86_fast_modrm(buf, len, addr, rex, at, op != 0x83, op == 0x83, out))
        return 0;
    out->flags_written = (uint8_t)w;
    return 1;
}

/* mov $imm32 to a 32-bit register (b8+r, after REX.B 41 or not; AT: the opcode's index)
 * into *OUT: 1, or 0 when too few bytes. %esp names %rsp's family. */
static int
x86_fast_mov_imm(const uint8_t *buf, size_t len, size_t at, arch_insn_t *out)
{
    if (len < at + 5)
        return 0;
    out->len = (uint8_t)(at + 5);
    out->kind = ARCH_KIND_SEQ;
    if (at == 0 && (buf[0] & 7) == 4)
        out->flags = ARCH_F_READS_SP;
    return 1;
}

/*
 * arch_decode without Zydis for the most common instructions with no prefix but REX:
 * call rel32, jmp rel8/rel32, jcc rel8/rel32, ret, push and pop of a register, 64-bit
 * and 32-bit mov, lea, add, sub, cmp, and, or, xor and test between a register and a
 * register or memory (83: with an 8-bit immediate), mov $imm32 to a 32-bit register
 * (four fifths of a compiled program's instructions). 1 when *OUT (addr set, the
 * rest zero) was filled, 0 when Zydis is to decode. Every field is what Zydis' decoding
 * gives (each of these encodings, at every offset of five programs' code too, compared
 * field by field when written); the padding nops are x86_padding_nop_len's.
 */
static int
x86_decode_fast(const uint8_t *buf, size_t len, uint64_t addr, arch_insn_t *out)
{
    size_t n;
    if (len == 0)
        return 0;
    uint8_t c = buf[0];
    switch (c) {
    case 0xe8:
        if (len < 5)
            return 0;
        x86_fast_branch(buf, 5, 4, addr, ARCH_KIND_CALL, out);
        out->flags |= ARCH_F_READS_SP;
        return 1;
    case 0xe9:
        if (len < 5)
            return 0;
        x86_fast_branch(buf, 5, 4, addr, ARCH_KIND_JMP, out);
        return 1;
    case 0xeb:
        if (len < 2)
            return 0;
        x86_fast_branch(buf, 2, 1, addr, ARCH_KIND_JMP, out);
        return 1;
    case 0xc3:
        out->len = 1;
        out->kind = ARCH_KIND_RET;
        out->flags = ARCH_F_READS_SP;
        return 1;
    case 0x0f:
        if (len >= 6 && (buf[1] & 0xf0) == 0x80) {
            x86_fast_branch(buf, 6, 4, addr, ARCH_KIND_JCC, out);
            out->flags_read = x86_jcc_tested[buf[1] & 0x0f];
            return 1;
        }
        break;
    case 0x41:
        if (len >= 2 && (buf[1] & 0xf0) == 0x50) {
            out->len = 2;
            out->kind = ARCH_KIND_SEQ;
            out->flags = ARCH_F_READS_SP;
            return 1;
        }
        if (len >= 2 && (buf[1] & 0xf8) == 0xb8)
            return x86_fast_mov_imm(buf, len, 1, out);
        return x86_fast_rm(buf, len, addr, c, 1, out);
    default:
        if ((c & 0xf0) == 0x40)
            return x86_fast_rm(buf, len, addr, c, 1, out);
        if ((c & 0xf8) == 0xb8)
            return x86_fast_mov_imm(buf, len, 0, out);
        if (x86_fast_rm(buf, len, addr, 0, 0, out))
            return 1;
        if ((c & 0xf0) == 0x70) {
            if (len < 2)
                return 0;
            x86_fast_branch(buf, 2, 1, addr, ARCH_KIND_JCC, out);
            out->flags_read = x86_jcc_tested[c & 0x0f];
            return 1;
        }
        if ((c & 0xf0) == 0x50) {
            out->len = 1;
            out->kind = ARCH_KIND_SEQ;
            out->flags = ARCH_F_READS_SP;
            return 1;
        }
        break;
    }
    if ((n = x86_padding_nop_len(buf, len)) == 0)
        return 0;
    out->len = (uint8_t)n;
    out->kind = ARCH_KIND_NOP;
    return 1;
}

/* arch_decode through Zydis (the instructions above aside). */
static int
x86_decode_zydis(const uint8_t *buf, size_t len, uint64_t addr, arch_insn_t *out /*OUT*/)
{
    ZydisDecoderContext ctx;
    ZydisDecodedInstruction zi;
    uint64_t next;
    int i;

    if (ZYAN_FAILED(ZydisDecoderDecodeInstruction(x86_decoder_get(), &ctx, buf, len, &zi))
        || x86_is_knc(&zi))
        return QP_EDECODE;

    out->addr = addr;
    out->len = zi.length;
    out->kind = (uint8_t)x86_kind(&zi);
    next = addr + zi.length;

    for (i = 0; i < 2; i++) {
        if (zi.raw.imm[i].size != 0 && zi.raw.imm[i].is_relative) {
            out->flags |= ARCH_F_BRANCH_REL;
            out->rel_off = zi.raw.imm[i].offset;
            out->rel_size = zi.raw.imm[i].size / 8;
            out->target = next + (uint64_t)zi.raw.imm[i].value.s;
            break;
        }
    }
    if (x86_is_riprel(&zi)) {
        out->flags |= ARCH_F_RIPREL;
        out->rel_off = zi.raw.disp.offset;
        out->rel_size = zi.raw.disp.size / 8;
        out->target = x86_wrap(&zi, next + (uint64_t)zi.raw.disp.value);
    }

    /* Direct transfers have a relative operand; far and r/m forms are indirect. */
    switch (out->kind) {
    case ARCH_KIND_JMP:
    case ARCH_KIND_CALL:
        if (!(out->flags & ARCH_F_BRANCH_REL)
            || zi.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR) {
            out->kind
                = out->kind == ARCH_KIND_JMP ? ARCH_KIND_JMP_IND : ARCH_KIND_CALL_IND;
            if ((zi.attributes & ZYDIS_ATTRIB_HAS_MODRM) && zi.raw.modrm.mod != 3)
                out->flags |= ARCH_F_MEM_IND;
        }
        break;
    case ARCH_KIND_JCC:
        if (!(out->flags & ARCH_F_BRANCH_REL))
            out->kind = ARCH_KIND_SEQ; /* no such encoding in 64-bit mode; be safe */
        break;
    default: break;
    }

    if (zi.attributes & ZYDIS_ATTRIB_HAS_LOCK)
        out->flags |= ARCH_F_LOCK;
    if (x86_is_priv(&zi))
        out->flags |= ARCH_F_PRIV;
    if (x86_uses_sp_implicitly(zi.mnemonic)
        || (x86_may_name_sp(&zi) && x86_names_sp(&ctx, &zi)))
        out->flags |= ARCH_F_READS_SP;

    if (zi.cpu_flags != NULL) {
        out->flags_read = x86_flags_map(zi.cpu_flags->tested);
        /*
         * A system call or software interrupt returns with the caller's RFLAGS (sysret
         * reloads them from r11, iret from the stack), so for the program it writes none.
         */
        if (out->kind != ARCH_KIND_SYSCALL && !x86_flags_conditional(&zi))
            out->flags_written = x86_flags_map(
                zi.cpu_flags->modified | zi.cpu_flags->set_0 | zi.cpu_flags->set_1);
    }
    return 0;
}

int
arch_decode(const uint8_t *buf, size_t len, uint64_t addr, arch_insn_t *out /*OUT*/)
{
    if (buf == NULL || out == NULL)
        return QP_EINVAL;
    memset(out, 0, sizeof(*out));
    out->addr = addr;
    if (x86_decode_fast(buf, len, addr, out))
        return 0;
    memset(out, 0, sizeof(*out)); /* nothing a form given up on may have set */
    return x86_decode_zydis(buf, len, addr, out);
}

int
arch_decode_full(const uint8_t *buf, size_t len, uint64_t addr, arch_insn_t *out /*OUT*/)
{
    if (buf == NULL || out == NULL)
        return QP_EINVAL;
    memset(out, 0, sizeof(*out));
    return x86_decode_zydis(buf, len, addr, out);
}

/*****************************************************************************
 * Padding and function starts
 */

int
arch_is_padding(const uint8_t* buf, size_t len)
{
    arch_insn_t in;
    size_t i = 0;

    if (len == 0)
        return 1;
    if (buf == NULL)
        return 0;
    while (i < len) {
        if (buf[i] == 0xcc || buf[i] == 0x00) {
            i++;
            continue;
        }
        /* Decoding stops at LEN, so a nop must fit exactly in what is left. */
        if (arch_decode(buf + i, len - i, 0, &in) < 0 || in.kind != ARCH_KIND_NOP)
            return 0;
        i += in.len;
    }
    return 1;
}

int
arch_frame_entry(const uint8_t *buf, size_t len)
{
    static const uint8_t endbr64[] = { 0xf3, 0x0f, 0x1e, 0xfa };
    /* push %rbp, then mov %rsp,%rbp in either encoding (89 /r or 8b /r) */
    static const uint8_t frame[2][4] = { { 0x55, 0x48, 0x89, 0xe5 }, { 0x55, 0x48, 0x8b, 0xec } };
    if (buf == NULL)
        return 0;
    if (len >= 8 && memcmp(buf, endbr64, 4) == 0) {
        buf += 4;
        len -= 4;
    }
    return len >= 4 && (memcmp(buf, frame[0], 4) == 0 || memcmp(buf, frame[1], 4) == 0);
}

int
arch_looks_like_data(const uint8_t *buf, size_t len)
{
    return buf == NULL || len < 2 || (buf[0] == 0 && buf[1] == 0);
}

/*****************************************************************************
 * Operand semantics
 */

static const struct {
    ZydisMnemonic mnemonic;
    uint8_t cond;
} x86_jcc_conds[] = {
    { ZYDIS_MNEMONIC_JNBE, ARCH_COND_A },
    { ZYDIS_MNEMONIC_JNB, ARCH_COND_AE },
    { ZYDIS_MNEMONIC_JB, ARCH_COND_B },
    { ZYDIS_MNEMONIC_JBE, ARCH_COND_BE },
    { ZYDIS_MNEMONIC_JZ, ARCH_COND_E },
    { ZYDIS_MNEMONIC_JNZ, ARCH_COND_NE },
    { ZYDIS_MNEMONIC_JNLE, ARCH_COND_G },
    { ZYDIS_MNEMONIC_JNL, ARCH_COND_GE },
    { ZYDIS_MNEMONIC_JL, ARCH_COND_L },
    { ZYDIS_MNEMONIC_JLE, ARCH_COND_LE },
};

/*
 * Convert one Zydis operand. Returns 1 when it is something the simple ops can carry
 * (a general-purpose register, memory with general-purpose or rip addressing, an
 * immediate), 0 otherwise (vector, mask, segment or control register: kind REG with
 * reg NONE; far pointers: kind NONE).
 */
static int
x86_opnd(const ZydisDecodedInstruction* zi, const ZydisDecodedOperand* zo, uint64_t addr,
    arch_opnd_t* o /*OUT*/)
{
    uint64_t next = addr + zi->length;

    memset(o, 0, sizeof(*o));
    o->size = (uint8_t)(zo->size / 8);
    switch (zo->type) {
    case ZYDIS_OPERAND_TYPE_REGISTER:
        o->kind = ARCH_OPND_REG;
        o->reg = x86_reg_map(zo->reg.value);
        return o->reg != ARCH_REG_NONE;
    case ZYDIS_OPERAND_TYPE_MEMORY:
        o->kind = ARCH_OPND_MEM;
        o->base = x86_reg_map(zo->mem.base);
        o->index = x86_reg_map(zo->mem.index);
        o->scale = zo->mem.scale ? zo->mem.scale : 1;
        o->disp = zo->mem.disp.has_displacement ? zo->mem.disp.value : 0;
        if (zo->mem.segment == ZYDIS_REGISTER_FS)
            o->seg = X86_SEG_FS;
        else if (zo->mem.segment == ZYDIS_REGISTER_GS)
            o->seg = X86_SEG_GS;
        if (o->base == ARCH_REG_PC) {
            o->disp = (int64_t)x86_wrap(zi, next + (uint64_t)o->disp);
            o->index = ARCH_REG_NONE;
            o->scale = 1;
        }
        /* A vector index (VSIB) has no neutral number. */
        return zo->mem.index == ZYDIS_REGISTER_NONE || o->index != ARCH_REG_NONE;
    case ZYDIS_OPERAND_TYPE_IMMEDIATE:
        o->kind = ARCH_OPND_IMM;
        if (zo->imm.is_relative)
            o->imm = (int64_t)(next + zo->imm.value.u);
        else
            o->imm = zo->imm.is_signed ? zo->imm.value.s : (int64_t)zo->imm.value.u;
        return 1;
    default: return 0;
    }
}

/* The first explicit operand whose content the instruction writes, or -1. */
static int
x86_first_written(const ZydisDecodedInstruction* zi, const ZydisDecodedOperand* ops)
{
    int i;

    for (i = 0; i < zi->operand_count; i++)
        if (ops[i].visibility == ZYDIS_OPERAND_VISIBILITY_EXPLICIT
            && (ops[i].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE))
            return i;
    /* mul, cqo, cpuid...: fall back to an implicitly written general-purpose register. */
    for (i = 0; i < zi->operand_count; i++)
        if (ops[i].type == ZYDIS_OPERAND_TYPE_REGISTER
            && (ops[i].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE)
            && x86_reg_map(ops[i].reg.value) != ARCH_REG_NONE
            && x86_reg_map(ops[i].reg.value) != ARCH_REG_PC)
            return i;
    return -1;
}

/* Register bit sets (bit N = arch register N) of every operand, explicit or implicit. */
static void
x86_reg_sets(const ZydisDecodedInstruction* zi, const ZydisDecodedOperand* ops,
    arch_ops_t* out /*OUT*/)
{
    uint8_t r;
    int i;

    for (i = 0; i < zi->operand_count; i++) {
        const ZydisDecodedOperand* zo = &ops[i];

        if (zo->type == ZYDIS_OPERAND_TYPE_REGISTER) {
            r = x86_reg_map(zo->reg.value);
            if (r == ARCH_REG_NONE || r >= ARCH_NREGS)
                continue;
            if (zo->actions & ZYDIS_OPERAND_ACTION_MASK_READ)
                out->regs_read |= 1u << r;
            if (zo->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE)
                out->regs_written |= 1u << r;
        } else if (zo->type == ZYDIS_OPERAND_TYPE_MEMORY) {
            r = x86_reg_map(zo->mem.base);
            if (r != ARCH_REG_NONE && r < ARCH_NREGS)
                out->regs_read |= 1u << r;
            r = x86_reg_map(zo->mem.index);
            if (r != ARCH_REG_NONE && r < ARCH_NREGS)
                out->regs_read |= 1u << r;
        }
    }
}

int
arch_decode_ops(const uint8_t* buf, size_t len, uint64_t addr, arch_ops_t* out /*OUT*/)
{
    ZydisDecodedInstruction zi;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    int simple = 0; /* both operands are plain (GPR/mem/imm) */
    int w;
    size_t i;

    if (buf == NULL || out == NULL)
        return QP_EINVAL;
    memset(out, 0, sizeof(*out));
    if (ZYAN_FAILED(ZydisDecoderDecodeFull(x86_decoder_get(), buf, len, &zi, ops))
        || x86_is_knc(&zi))
        return QP_EDECODE;
    x86_reg_sets(&zi, ops, out);

    /* Zydis lists explicit operands first, in Intel order (destination first). */
    if (zi.operand_count >= 2)
        simple = x86_opnd(&zi, &ops[0], addr, &out->dst)
            & x86_opnd(&zi, &ops[1], addr, &out->src);
    switch (zi.mnemonic) {
    case ZYDIS_MNEMONIC_MOV: out->op = ARCH_OP_MOV; break;
    case ZYDIS_MNEMONIC_MOVSX:
    case ZYDIS_MNEMONIC_MOVSXD:
    case ZYDIS_MNEMONIC_CBW: /* ax = sext(al); hidden operands: dst, then src */
    case ZYDIS_MNEMONIC_CWDE: /* eax = sext(ax) */
    case ZYDIS_MNEMONIC_CDQE: /* rax = sext(eax) */ out->op = ARCH_OP_MOVSX; break;
    case ZYDIS_MNEMONIC_MOVZX: out->op = ARCH_OP_MOVZX; break;
    case ZYDIS_MNEMONIC_LEA: out->op = ARCH_OP_LEA; break;
    case ZYDIS_MNEMONIC_ADD: out->op = ARCH_OP_ADD; break;
    case ZYDIS_MNEMONIC_SUB: out->op = ARCH_OP_SUB; break;
    case ZYDIS_MNEMONIC_AND: out->op = ARCH_OP_AND; break;
    case ZYDIS_MNEMONIC_SHL: /* sal decodes as shl; d1 /4 has an implicit $1 operand */
        if (ops[1].type == ZYDIS_OPERAND_TYPE_IMMEDIATE)
            out->op = ARCH_OP_SHL;
        break;
    case ZYDIS_MNEMONIC_CMP: out->op = ARCH_OP_CMP; break;
    case ZYDIS_MNEMONIC_TEST: out->op = ARCH_OP_TEST; break;
    case ZYDIS_MNEMONIC_XOR: out->op = ARCH_OP_XOR; break;
    case ZYDIS_MNEMONIC_JMP:
    case ZYDIS_MNEMONIC_CALL:
        /* Far transfers (segment:offset) are left as OTHER: no neutral meaning. */
        if (zi.meta.branch_type != ZYDIS_BRANCH_TYPE_FAR) {
            out->op = zi.mnemonic == ZYDIS_MNEMONIC_JMP ? ARCH_OP_JMP : ARCH_OP_CALL;
            memset(&out->dst, 0, sizeof(out->dst));
            x86_opnd(&zi, &ops[0], addr, &out->src);
            return 0;
        }
        break;
    default:
        if (zi.meta.category == ZYDIS_CATEGORY_COND_BR) {
            out->op = ARCH_OP_JCC;
            out->cond = ARCH_COND_OTHER; /* jo, js, jp, loop, jrcxz, xbegin, ... */
            for (i = 0; i < sizeof(x86_jcc_conds) / sizeof(x86_jcc_conds[0]); i++)
                if (x86_jcc_conds[i].mnemonic == zi.mnemonic)
                    out->cond = x86_jcc_conds[i].cond;
            memset(&out->dst, 0, sizeof(out->dst));
            x86_opnd(&zi, &ops[0], addr, &out->src);
            return 0;
        }
        break;
    }
    if (out->op != ARCH_OP_OTHER && simple)
        return 0;

    /* Anything else: say which operand is clobbered, nothing more. */
    out->op = ARCH_OP_OTHER;
    memset(&out->src, 0, sizeof(out->src));
    memset(&out->dst, 0, sizeof(out->dst));
    w = x86_first_written(&zi, ops);
    if (w >= 0)
        x86_opnd(&zi, &ops[w], addr, &out->dst);
    return 0;
}

/*****************************************************************************
 * Memory accesses (address tracing)
 */

static int
x86_mref_add(arch_mref_t* out, int* n, arch_mref_t r)
{
    if (*n >= ARCH_MAX_MREFS)
        return 0;
    out[(*n)++] = r;
    return 1;
}

/* The access at [base + disp] (a stack slot, leave's rbp), SIZE bytes. */
static arch_mref_t
x86_mref_at(uint8_t base, int64_t disp, uint8_t access, uint16_t size)
{
    arch_mref_t r;
    memset(&r, 0, sizeof(r));
    r.kind = ARCH_MREF_EA;
    r.access = access;
    r.base = base;
    r.scale = 1;
    r.size = size;
    r.disp = disp;
    return r;
}

static arch_mref_t
x86_mref_untraced(void)
{
    arch_mref_t r;
    memset(&r, 0, sizeof(r));
    r.kind = ARCH_MREF_UNTRACED;
    return r;
}

/* An explicit memory operand ZO as an access. */
static arch_mref_t
x86_mref_opnd(const ZydisDecodedInstruction* zi, const ZydisDecodedOperand* zo, uint64_t addr)
{
    arch_opnd_t o;
    arch_mref_t r;
    int plain = x86_opnd(zi, zo, addr, &o);
    memset(&r, 0, sizeof(r));
    r.access = (uint8_t)(((zo->actions & ZYDIS_OPERAND_ACTION_MASK_READ) ? ARCH_MEM_LOAD : 0)
        | ((zo->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) ? ARCH_MEM_STORE : 0));
    r.size = (uint16_t)(zo->size / 8);
    if (!plain || zo->mem.type != ZYDIS_MEMOP_TYPE_MEM || zo->mem.segment == ZYDIS_REGISTER_GS
        || r.size == 0 || r.size > 64 || (zo->size % 8) != 0)
        return x86_mref_untraced();
    r.base = o.base;
    r.index = o.index;
    r.scale = o.scale;
    r.seg = o.seg;
    r.disp = o.disp;
    if (o.base == ARCH_REG_PC || (o.base == ARCH_REG_NONE && o.index == ARCH_REG_NONE && !o.seg)) {
        r.kind = ARCH_MREF_STATIC;
        r.base = ARCH_REG_NONE;
        r.index = ARCH_REG_NONE;
        r.disp = o.base == ARCH_REG_PC ? o.disp : (int64_t)(uint64_t)zo->mem.disp.value;
    } else
        r.kind = ARCH_MREF_EA;
    return r;
}

/* A string instruction: its accesses at rsi and rdi. */
static arch_mref_t
x86_mref_string(const ZydisDecodedInstruction* zi, const ZydisDecodedOperand* ops)
{
    arch_mref_t r;
    memset(&r, 0, sizeof(r));
    r.kind = ARCH_MREF_STRING;
    for (int i = 0; i < zi->operand_count; i++) {
        const ZydisDecodedOperand* zo = &ops[i];
        if (zo->type != ZYDIS_OPERAND_TYPE_MEMORY)
            continue;
        uint8_t a = (uint8_t)(((zo->actions & ZYDIS_OPERAND_ACTION_MASK_READ) ? ARCH_MEM_LOAD : 0)
            | ((zo->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) ? ARCH_MEM_STORE : 0));
        uint8_t b = x86_reg_map(zo->mem.base);
        if (b == 7 /* rsi */)
            r.access = a;
        else if (b == 8 /* rdi */ && zo->mem.segment != ZYDIS_REGISTER_NONE
                 && zo->mem.segment != ZYDIS_REGISTER_ES && zo->mem.segment != ZYDIS_REGISTER_DS)
            return x86_mref_untraced();
        else if (b == 8)
            r.access2 = a;
        else
            return x86_mref_untraced();
        r.size = (uint16_t)(zo->size / 8);
    }
    if (zi->attributes & (ZYDIS_ATTRIB_HAS_REPE | ZYDIS_ATTRIB_HAS_REPNE))
        return x86_mref_untraced(); /* how many times depends on the data */
    r.rep = (zi->attributes & ZYDIS_ATTRIB_HAS_REP) != 0;
    if (r.size == 0 || zi->address_width != 64)
        return x86_mref_untraced();
    return r;
}

/* Instructions whose memory operand is not one plain access. */
static int
x86_mem_odd(ZydisMnemonic m)
{
    switch (m) {
    case ZYDIS_MNEMONIC_ENTER:
    case ZYDIS_MNEMONIC_XSAVE:
    case ZYDIS_MNEMONIC_XSAVE64:
    case ZYDIS_MNEMONIC_XSAVEC:
    case ZYDIS_MNEMONIC_XSAVEC64:
    case ZYDIS_MNEMONIC_XSAVEOPT:
    case ZYDIS_MNEMONIC_XSAVEOPT64:
    case ZYDIS_MNEMONIC_XRSTOR:
    case ZYDIS_MNEMONIC_XRSTOR64:
    case ZYDIS_MNEMONIC_FXSAVE:
    case ZYDIS_MNEMONIC_FXSAVE64:
    case ZYDIS_MNEMONIC_FXRSTOR:
    case ZYDIS_MNEMONIC_FXRSTOR64:
    case ZYDIS_MNEMONIC_FLDENV:
    case ZYDIS_MNEMONIC_FNSTENV:
    case ZYDIS_MNEMONIC_FRSTOR:
    case ZYDIS_MNEMONIC_FNSAVE:
    case ZYDIS_MNEMONIC_XLAT:
    case ZYDIS_MNEMONIC_MASKMOVQ:
    case ZYDIS_MNEMONIC_MASKMOVDQU:
    case ZYDIS_MNEMONIC_VMASKMOVDQU:
    case ZYDIS_MNEMONIC_VMASKMOVPS:
    case ZYDIS_MNEMONIC_VMASKMOVPD:
    case ZYDIS_MNEMONIC_VPMASKMOVD:
    case ZYDIS_MNEMONIC_VPMASKMOVQ:
    case ZYDIS_MNEMONIC_CLFLUSH:
    case ZYDIS_MNEMONIC_CLFLUSHOPT:
    case ZYDIS_MNEMONIC_CLWB: return 1;
    default: return 0;
    }
}

static int
x86_no_access(ZydisMnemonic m)
{
    switch (m) {
    case ZYDIS_MNEMONIC_LEA:
    case ZYDIS_MNEMONIC_NOP:
    case ZYDIS_MNEMONIC_PREFETCH:
    case ZYDIS_MNEMONIC_PREFETCHNTA:
    case ZYDIS_MNEMONIC_PREFETCHT0:
    case ZYDIS_MNEMONIC_PREFETCHT1:
    case ZYDIS_MNEMONIC_PREFETCHT2:
    case ZYDIS_MNEMONIC_PREFETCHW:
    case ZYDIS_MNEMONIC_PREFETCHWT1: return 1;
    default: return 0;
    }
}

int
arch_decode_mem(const uint8_t* buf, size_t len, uint64_t addr, arch_mref_t* out /*OUT*/,
    int* n /*OUT*/)
{
    ZydisDecodedInstruction zi;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    const ZydisDecodedOperand* mem = NULL; /* the explicit memory operand */
    int hidden_mem = 0;

    if (buf == NULL || out == NULL || n == NULL)
        return QP_EINVAL;
    *n = 0;
    if (ZYAN_FAILED(ZydisDecoderDecodeFull(x86_decoder_get(), buf, len, &zi, ops))
        || x86_is_knc(&zi))
        return QP_EDECODE;
    if (x86_no_access(zi.mnemonic))
        return 0;
    for (int i = 0; i < zi.operand_count; i++) {
        if (ops[i].type != ZYDIS_OPERAND_TYPE_MEMORY || ops[i].mem.type == ZYDIS_MEMOP_TYPE_AGEN)
            continue;
        if (ops[i].visibility == ZYDIS_OPERAND_VISIBILITY_EXPLICIT && mem == NULL)
            mem = &ops[i];
        else
            hidden_mem = 1;
    }
    if (mem == NULL && !hidden_mem)
        return 0;
    if (x86_mem_odd(zi.mnemonic) || zi.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR) {
        x86_mref_add(out, n, x86_mref_untraced());
        return 0;
    }
    if (zi.meta.category == ZYDIS_CATEGORY_STRINGOP) {
        x86_mref_add(out, n, x86_mref_string(&zi, ops));
        return 0;
    }
    uint16_t w = zi.operand_width ? (uint16_t)(zi.operand_width / 8) : 8;
    switch (zi.mnemonic) {
    case ZYDIS_MNEMONIC_PUSH:  /* the pushed value is loaded first (valgrind's order) */
    case ZYDIS_MNEMONIC_PUSHF:
    case ZYDIS_MNEMONIC_PUSHFQ:
        if (mem != NULL)
            x86_mref_add(out, n, x86_mref_opnd(&zi, mem, addr));
        x86_mref_add(out, n, x86_mref_at(ARCH_REG_SP, -(int64_t)w, ARCH_MEM_STORE, w));
        return 0;
    case ZYDIS_MNEMONIC_CALL:
        if (mem != NULL)
            x86_mref_add(out, n, x86_mref_opnd(&zi, mem, addr));
        x86_mref_add(out, n, x86_mref_at(ARCH_REG_SP, -8, ARCH_MEM_STORE, 8));
        return 0;
    case ZYDIS_MNEMONIC_POP:
    case ZYDIS_MNEMONIC_POPF:
    case ZYDIS_MNEMONIC_POPFQ:
        x86_mref_add(out, n, x86_mref_at(ARCH_REG_SP, 0, ARCH_MEM_LOAD, w));
        if (mem != NULL) /* its address would be computed with rsp already popped */
            x86_mref_add(out, n, x86_mref_untraced());
        return 0;
    case ZYDIS_MNEMONIC_RET:
        x86_mref_add(out, n, x86_mref_at(ARCH_REG_SP, 0, ARCH_MEM_LOAD, 8));
        return 0;
    case ZYDIS_MNEMONIC_LEAVE:
        x86_mref_add(out, n, x86_mref_at(6 /* rbp */, 0, ARCH_MEM_LOAD, 8));
        return 0;
    case ZYDIS_MNEMONIC_BT:
    case ZYDIS_MNEMONIC_BTS:
    case ZYDIS_MNEMONIC_BTR:
    case ZYDIS_MNEMONIC_BTC:
        if (mem != NULL && zi.operand_count > 1 && ops[1].type == ZYDIS_OPERAND_TYPE_REGISTER) {
            x86_mref_add(out, n, x86_mref_untraced()); /* the bit offset moves the address */
            return 0;
        }
        break;
    default: break;
    }
    if (hidden_mem) {
        x86_mref_add(out, n, x86_mref_untraced());
        return 0;
    }
    x86_mref_add(out, n, x86_mref_opnd(&zi, mem, addr));
    return 0;
}

/*****************************************************************************
 * Faults that Go's runtime turns into panics (arch_isa_t.go_may_fault)
 */

/* Go's ABIInternal keeps the running goroutine in r14 (arch numbering: 15); every
 * prologue compares %rsp with its stack bound, 0x10(%r14), which never faults. */
#define X86_GO_REG_G 15

/* May the operand ZO, if it accesses memory, fault on a bad address in a Go program? */
static int
x86_go_opnd_may_fault(const ZydisDecodedOperand* zo)
{
    if (zo->type != ZYDIS_OPERAND_TYPE_MEMORY || zo->mem.type == ZYDIS_MEMOP_TYPE_AGEN)
        return 0;
    if (zo->mem.segment == ZYDIS_REGISTER_FS || zo->mem.segment == ZYDIS_REGISTER_GS)
        return 0; /* thread-local */
    if (zo->mem.type != ZYDIS_MEMOP_TYPE_MEM)
        return 1; /* a vector index (gathers, scatters), MPX's bound tables */
    uint8_t b = x86_reg_map(zo->mem.base);
    return b != ARCH_REG_SP && b != ARCH_REG_PC && b != X86_GO_REG_G;
}

int
arch_go_may_fault(const uint8_t* buf, size_t len, uint64_t addr)
{
    ZydisDecodedInstruction zi;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];

    (void)addr;
    if (buf == NULL || ZYAN_FAILED(ZydisDecoderDecodeFull(x86_decoder_get(), buf, len, &zi, ops))
        || x86_is_knc(&zi))
        return 1;
    if (x86_no_access(zi.mnemonic))
        return 0; /* lea, nop and prefetches touch no memory */
    /* Every operand, the hidden ones too (a string instruction's rsi and rdi, push's
     * and call's stack) and any place (a 3-operand AVX instruction's memory source). */
    for (int i = 0; i < zi.operand_count; i++)
        if (x86_go_opnd_may_fault(&ops[i]))
            return 1;
    return 0;
}
