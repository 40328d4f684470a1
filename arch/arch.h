/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_ARCH_H
#define QP_ARCH_H
/*
 * PURPOSE: the architecture-neutral view of one machine instruction that cfg/, driver/,
 * editor/ and dynamic/ work with. The ISA is chosen at link time: arch/x86_64/ implements
 * these functions for x86-64 (on Zydis); a second ISA implements the same header.
 * Code is always named by a (local buffer, runtime address) pair. arch/ uses libc only and
 * never knows about ELF, files or processes. Nothing here allocates: the caller owns every
 * struct.
 */
#include <stddef.h>
#include <stdint.h>

#include "arch/qp_err.h"

/* The longest instruction of any supported ISA, in bytes (AArch64: always 4). */
#define ARCH_MAX_INSN 15

/* What an instruction does to control flow. */
typedef enum arch_kind {
    ARCH_KIND_SEQ = 0,  /* falls through to the next instruction */
    ARCH_KIND_JMP,      /* direct unconditional jump (target valid) */
    ARCH_KIND_JCC,      /* direct conditional jump incl. loop/jrcxz (target valid) */
    ARCH_KIND_CALL,     /* direct call (target valid) */
    ARCH_KIND_JMP_IND,  /* indirect jump through a register or memory */
    ARCH_KIND_CALL_IND, /* indirect call through a register or memory */
    ARCH_KIND_RET,      /* return (incl. ret imm16) */
    ARCH_KIND_SYSCALL,  /* syscall/sysenter/int N: falls through */
    ARCH_KIND_HALT,     /* hlt, ud2, int3, ud0/ud1: never falls through */
    ARCH_KIND_ENDBR,    /* endbr64/endbr32: a landing pad, falls through */
    ARCH_KIND_NOP,      /* nop of any form (padding candidate): falls through */
} arch_kind_t;

/* Instruction flags (arch_insn_t.flags). */
enum {
    ARCH_F_RIPREL = 1u << 0,  /* has a pc-relative memory operand (rel_* names the disp) */
    ARCH_F_BRANCH_REL = 1u << 1, /* has a pc-relative branch offset (rel_* names it) */
    ARCH_F_MEM_IND = 1u << 2, /* JMP_IND/CALL_IND reads its target from memory */
    ARCH_F_LOCK = 1u << 3,    /* lock prefix */
    ARCH_F_PRIV = 1u << 4,    /* privileged instruction (invalid in user code) */
    ARCH_F_READS_SP = 1u << 5, /* reads or writes the stack pointer (push/pop/call/ret/rsp op) */
    ARCH_F_EXCL_LOAD = 1u << 13, /* AArch64: a load-exclusive (ldxr, ldaxr, ldxp,
                                 * ldaxp) opens a monitor that a store-exclusive
                                 * closes: a memory access between them may clear it,
                                 * so no snippet may run there */
    /* AArch64 pointer authentication (high bits, to stay clear of new x86 flags): */
    ARCH_F_PAC_SIGN = 1u << 14, /* signs the return address (paciasp, pacibsp, pacia1716,
                                 * ...); paciasp/pacibsp are also implicit `bti c` pads */
    ARCH_F_PAC_AUTH = 1u << 15, /* authenticates a signed pointer (autiasp, retaa, braa,
                                 * ...): code between a sign and its authenticate must
                                 * keep the same sp and never move the return address */
};

/* Status flags, as a bit set (arch_insn_t.flags_read / flags_written). AArch64's NZCV
 * map onto SF (N), ZF (Z), CF (C) and OF (V). */
enum {
    ARCH_FLAG_CF = 1u << 0,
    ARCH_FLAG_PF = 1u << 1,
    ARCH_FLAG_AF = 1u << 2,
    ARCH_FLAG_ZF = 1u << 3,
    ARCH_FLAG_SF = 1u << 4,
    ARCH_FLAG_OF = 1u << 5,
    ARCH_FLAG_DF = 1u << 6,
    ARCH_FLAGS_STATUS = 0x3f, /* CF PF AF ZF SF OF */
};

/* One decoded instruction: a small value type, caller-allocated. */
typedef struct arch_insn {
    uint64_t addr;          /* runtime address the instruction was decoded at */
    uint64_t target;        /* JMP/JCC/CALL: branch target; RIPREL: address of the memory operand */
    uint8_t len;            /* length in bytes, 1..ARCH_MAX_INSN */
    uint8_t kind;           /* arch_kind_t */
    uint8_t rel_off;        /* offset of the pc-relative field (branch offset or disp), or 0 */
    uint8_t rel_size;       /* size in bytes of that field (1, 2 or 4), or 0 if none */
    uint16_t flags;         /* ARCH_F_* */
    uint8_t flags_read;     /* ARCH_FLAG_* the instruction reads (conservative) */
    uint8_t flags_written;  /* ARCH_FLAG_* it always writes (only must-writes count) */
} arch_insn_t;

/*
 * Decode the instruction at BUF (at most LEN readable bytes) that runs at address ADDR.
 * Fills *OUT. Returns 0, or QP_EDECODE when the bytes are not a valid user-mode
 * instruction (including a truncated one), QP_EINVAL on NULL arguments.
 * Fast path: no operand details are computed (see arch_decode_ops).
 */
int arch_decode(const uint8_t *buf, size_t len, uint64_t addr, arch_insn_t *out /*OUT*/);
/* arch_decode by the full decoder alone (x86-64: Zydis), without the table-driven reading
 * of the commonest forms that arch_decode tries first: what that reading must agree with
 * (tests/check_arch.c). */
int arch_decode_full(const uint8_t *buf, size_t len, uint64_t addr, arch_insn_t *out /*OUT*/);

/*
 * Operand-level semantics for the few data-flow shapes that jump-table and address-taken
 * analysis in cfg/ need. Registers are numbered ISA-neutrally: ARCH_REG_NONE, ARCH_REG_PC
 * (rip), ARCH_REG_SP, and 1..ARCH_NREGS-1 for the general-purpose registers, always the full
 * (64-bit) register; the access width is in `size`.
 */
#define ARCH_REG_NONE 0
#define ARCH_REG_PC 0xfe
#define ARCH_REG_SP 5 /* x86-64: rsp */
#define ARCH_NREGS 17 /* x86-64: 1..16 = rax rcx rdx rbx rsp rbp rsi rdi r8..r15 */
#define ARCH_REG_SYSNR 1 /* the system call number (x86-64: rax) */
#define ARCH_REG_SYSARG0 8 /* a system call's first argument (x86-64: rdi) */

typedef enum arch_op {
    ARCH_OP_OTHER = 0, /* anything not listed: its dst is clobbered if dst.kind != NONE */
    ARCH_OP_MOV,       /* dst = src (zero-extends a 32-bit register write, as x86 does) */
    ARCH_OP_MOVSX,     /* dst = sign-extend(src), src size in src.size (movsxd, cdqe, movsx) */
    ARCH_OP_MOVZX,     /* dst = zero-extend(src) */
    ARCH_OP_LEA,       /* dst = effective address of src (a MEM operand) */
    ARCH_OP_ADD,       /* dst = dst + src */
    ARCH_OP_SUB,       /* dst = dst - src */
    ARCH_OP_AND,       /* dst = dst & src */
    ARCH_OP_SHL,       /* dst = dst << src (src is IMM) */
    ARCH_OP_CMP,       /* flags = dst - src */
    ARCH_OP_TEST,      /* flags = dst & src */
    ARCH_OP_XOR,       /* dst = dst ^ src (xor r,r is zero) */
    ARCH_OP_JMP,       /* jmp: src is the target operand (REG, MEM or IMM for direct) */
    ARCH_OP_JCC,       /* conditional jump: cond holds the condition */
    ARCH_OP_CALL,      /* call: src is the target operand */
} arch_op_t;

typedef enum arch_opnd_kind {
    ARCH_OPND_NONE = 0,
    ARCH_OPND_REG,
    ARCH_OPND_MEM,
    ARCH_OPND_IMM,
} arch_opnd_kind_t;

/* Condition codes for ARCH_OP_JCC, named after x86 but meaningful for any flags ISA. */
typedef enum arch_cond {
    ARCH_COND_NONE = 0,
    ARCH_COND_A,  /* unsigned > */
    ARCH_COND_AE, /* unsigned >= */
    ARCH_COND_B,  /* unsigned < */
    ARCH_COND_BE, /* unsigned <= */
    ARCH_COND_E,
    ARCH_COND_NE,
    ARCH_COND_G,
    ARCH_COND_GE,
    ARCH_COND_L,
    ARCH_COND_LE,
    ARCH_COND_OTHER,
} arch_cond_t;

typedef struct arch_opnd {
    uint8_t kind;   /* arch_opnd_kind_t */
    uint8_t size;   /* access width in bytes (1, 2, 4, 8); for MEM the width of the load */
    uint8_t reg;    /* REG: the register */
    uint8_t base;   /* MEM: base register (ARCH_REG_PC for rip-relative; the disp is then final) */
    uint8_t index;  /* MEM: index register or ARCH_REG_NONE */
    uint8_t scale;  /* MEM: 1, 2, 4 or 8 */
    uint8_t seg;    /* MEM: nonzero when a segment override (fs/gs) applies */
    int64_t disp;   /* MEM: displacement; rip-relative: the absolute address instead */
    int64_t imm;    /* IMM: the value, sign-extended; direct branches: the target */
} arch_opnd_t;

typedef struct arch_ops {
    uint8_t op;          /* arch_op_t */
    uint8_t cond;        /* arch_cond_t, for ARCH_OP_JCC */
    arch_opnd_t dst;     /* destination (first) operand, or NONE */
    arch_opnd_t src;     /* source (second) operand, or NONE */
    uint32_t regs_read;    /* bit 1u << reg per register read, incl. address registers */
    uint32_t regs_written; /* bit 1u << reg per register written, incl. implicit ones */
} arch_ops_t;

/*
 * Decode the operand semantics of the instruction at BUF/ADDR into *OUT.
 * Slower than arch_decode; meant for the few instructions an analysis looks at.
 * Returns 0, QP_EDECODE or QP_EINVAL.
 */
int arch_decode_ops(const uint8_t *buf, size_t len, uint64_t addr, arch_ops_t *out /*OUT*/);

/*
 * True when the LEN bytes at BUF are padding an assembler or linker may put between
 * procedures (nops of any length, int3, zero bytes). Never fails.
 */
int arch_is_padding(const uint8_t *buf, size_t len);

/*
 * True when the LEN bytes at BUF begin as a compiled function that keeps a frame pointer
 * begins: `push %rbp; mov %rsp,%rbp`, after an `endbr64` or not. Only a function's first
 * block sets up its frame; bytes of data seldom read so. Never fails.
 */
int arch_frame_entry(const uint8_t *buf, size_t len);

/*
 * True when the LEN bytes at BUF begin as data more likely than as code: fewer than two
 * bytes, or two zero bytes (`add %al,(%rax)`, which no compiler emits first). Bytes
 * that decode as code without a branch reaching them are taken for a function only when
 * this is false (cfg_proc_starts_like_function). Never fails.
 */
int arch_looks_like_data(const uint8_t *buf, size_t len);

/*
 * x86-64's PLT stub at BUF (LEN bytes readable, code at ADDR): `[endbr64] [bnd] jmp
 * *disp32(%rip)`. Returns the length up to the jump's end, with the GOT slot it jumps
 * through in *SLOT; 0 when BUF is no such stub (arch_isa_t.plt_slot).
 */
int arch_plt_slot(const uint8_t *buf, size_t len, uint64_t addr, uint64_t *slot /*OUT*/);

/* How the entries of an x86-64 PLT section are laid out (arch_plt_layout). */
typedef struct arch_plt_layout {
    uint8_t form;       /* which non-lazy form (an index of arch/'s own table) */
    uint8_t entry_size; /* bytes per entry */
    uint8_t jmp_end;    /* where each entry's `jmp *disp32(%rip)` ends: its slot is the
                         * entry's address + jmp_end + the disp32 just before */
    uint8_t skip_first; /* the first entry is a lazy PLT's PLT0, no stub */
    uint8_t none;       /* a lazy PLT whose stubs are in a second PLT (.plt.sec): no stubs */
} arch_plt_layout_t;

/*
 * The layout of the x86-64 PLT section whose LEN bytes are at BUF, recognised as BFD's
 * synthetic symbols (objdump's "NAME@plt") do, from its first entries only: a lazy PLT
 * (PLT0 `push GOT+8; [bnd] jmp *GOT+16`) when MAY_BE_LAZY (the section is .plt), else a
 * non-lazy one in the form *CUR (8-byte `jmp; nop` entries at first), else one of the
 * IBT and BND forms (16-byte `endbr64; jmp; nop`, 8-byte `bnd jmp; nop`, 16-byte
 * `endbr64; bnd jmp; nop`), which then becomes *CUR for the sections after it (BFD
 * reads .plt, .plt.got, .plt.sec, .plt.bnd in this order). 1 and *OUT, or 0 (no PLT).
 * Call arch_plt_layout_init for *CUR first.
 */
void arch_plt_layout_init(arch_plt_layout_t *cur /*OUT*/);
int arch_plt_layout(const uint8_t *buf, size_t len, int may_be_lazy, arch_plt_layout_t *cur,
                    arch_plt_layout_t *out /*OUT*/);

/*
 * The data memory accesses of one instruction, in the order it makes them (address
 * tracing, driver/drv_trace.c). Instruction fetches, lea, nop and prefetches make none.
 */
enum { ARCH_MEM_LOAD = 1, ARCH_MEM_STORE = 2 }; /* both: read and written (a modify) */

typedef enum arch_mref_kind {
    ARCH_MREF_EA = 0,  /* at seg + base + index * scale + disp (base ARCH_REG_SP: rsp as the
                        * instruction finds it; seg nonzero: %fs's base) */
    ARCH_MREF_STATIC,  /* at the address disp (rip-relative or absolute): known statically */
    ARCH_MREF_STRING,  /* a string instruction: at rsi (access, unless 0) then at rdi
                        * (access2, unless 0), size bytes each; rep: rcx times, rsi and rdi
                        * stepping by size (the direction flag clear) */
    ARCH_MREF_UNTRACED,/* an access whose addresses this cannot describe (gather/scatter,
                        * repe/repne cmps/scas, xsave, bt with a register offset, gs, ...) */
} arch_mref_kind_t;

typedef struct arch_mref {
    uint8_t kind;      /* arch_mref_kind_t */
    uint8_t access;    /* ARCH_MEM_* (STRING: at rsi) */
    uint8_t access2;   /* STRING: at rdi */
    uint8_t rep;       /* STRING: a rep prefix */
    uint8_t base, index, scale, seg; /* EA */
    uint16_t size;     /* bytes */
    uint16_t pad;
    uint32_t pad2;
    int64_t disp;      /* EA: displacement; STATIC: the address */
} arch_mref_t;

#define ARCH_MAX_MREFS 4

/* Decode the accesses of the instruction at BUF/ADDR into OUT[0..*N). 0, QP_EDECODE or
 * QP_EINVAL. */
int arch_decode_mem(const uint8_t *buf, size_t len, uint64_t addr, arch_mref_t *out /*OUT*/,
                    int *n /*OUT*/);

/*
 * May the instruction at BUF (code at ADDR) fault on a bad address (a nil pointer) in a
 * program of Go's runtime, which turns such a fault into a panic by the faulting pc: does
 * any of its operands, explicit or hidden, access memory other than through the stack
 * pointer, pc-relative, through a segment (thread-local) or through the register Go keeps
 * the running goroutine in (x86-64: r14)? 1 or 0; 1 when it does not decode.
 * (arch_isa_t.go_may_fault; patch/pt_go.c holds the rule that uses it.)
 */
int arch_go_may_fault(const uint8_t *buf, size_t len, uint64_t addr);

/* A short printable name for a register number ("rax"), for messages and tests. */
const char *arch_reg_name(int reg);

/*****************************************************************************
 * Relocation of one instruction, and emitters. Pure functions of (what, where) to bytes:
 * the static editor and the live-process mode use the same ones.
 */

/* The longest sequence arch_reloc_insn may produce for one instruction. */
#define ARCH_MAX_RELOC 32

/*
 * Re-encode the instruction IN (decoded from BUF with arch_decode, originally at IN->addr)
 * so that it runs at NEW_ADDR:
 *  - direct JMP/JCC/CALL go to NEW_TARGET (the caller maps the old target); with
 *    SHORT_OK the 2-byte rel8 form is used when NEW_TARGET is in reach, else rel32.
 *    loop/loopcc/jrcxz/jecxz (rel8 only) become `jcc8 +2; jmp8 +5; jmp32 NEW_TARGET` when
 *    the target is out of rel8 reach.
 *  - a rip-relative memory operand keeps addressing the same absolute address
 *    (IN->target): its disp32 is recomputed;
 *  - everything else is copied unchanged.
 * Writes the bytes to OUT (CAP bytes available) and returns their number, QP_ERANGE when a
 * displacement does not fit in 32 bits, QP_EINVAL on bad arguments. Never allocates.
 */
int arch_reloc_insn(const uint8_t *buf, const arch_insn_t *in, uint64_t new_addr,
                    uint64_t new_target, int short_ok, uint8_t *out /*OUT*/, size_t cap);

/* jmp rel32 at ADDR to TARGET (5 bytes). Returns 5 or QP_ERANGE/QP_EINVAL. */
int arch_emit_jmp(uint64_t addr, uint64_t target, uint8_t *out /*OUT*/, size_t cap);

/*
 * The usual encoding of "system call number NR" as compilers and libc write it (x86-64:
 * `mov $NR,%eax; syscall`, 7 bytes), to look for in code that no CFG reaches. Returns
 * its length, or QP_EINVAL (NR out of range, CAP too small).
 */
int arch_emit_syscall_nr(long nr, uint8_t *out /*OUT*/, size_t cap);

/* call rel32 at ADDR to TARGET (5 bytes). */
int arch_emit_call(uint64_t addr, uint64_t target, uint8_t *out /*OUT*/, size_t cap);

/*
 * Write the 8-byte VALUE over the word at the top of the stack (a return address) in one
 * 8-byte store (a ret that reads it soon gets it forwarded; two 4-byte stores cost
 * ~10 ns more), keeping every register and the flags: `push %r11; movabs $VALUE,%r11;
 * mov %r11,8(%rsp); pop %r11` (19 bytes). Returns 19 or QP_EINVAL.
 */
int arch_emit_store_ret64(uint64_t value, uint8_t *out /*OUT*/, size_t cap);

/*
 * The call IN (decoded from BUF; direct or indirect) made from ADDR so that it pushes RET
 * as its return address, not an address after ADDR: `lea -8(%rsp),%rsp; push %rax;
 * lea RET(%rip),%rax; mov %rax,8(%rsp); pop %rax` (19 bytes), then `jmp TARGET` or the
 * call's own operand as `jmp *OP` (a rip-relative one re-addressed). Code patched in
 * place calls from a trampoline this way: no return address ever points into new code.
 * Keeps every register and the flags; writes only the 16 bytes below %rsp (the callee
 * owns them anyway). Returns the length, QP_EUNSUPP when the operand uses %rsp (it would
 * see the pushed word), QP_ERANGE, QP_EINVAL.
 */
int arch_emit_call_ret(const uint8_t *buf, const arch_insn_t *in, uint64_t addr, uint64_t ret,
                       uint8_t *out /*OUT*/, size_t cap);

/* jcc rel32 with condition COND (arch_cond_t or ARCH_COND_OTHER not allowed) at ADDR. */
int arch_emit_jcc(uint64_t addr, int cond, uint64_t target, uint8_t *out /*OUT*/, size_t cap);

/* Counter increments (arch_emit_counter_inc). */
enum {
    ARCH_INC_PLAIN = 0,  /* exact in one thread at a time */
    ARCH_INC_ATOMIC = 1, /* exact whatever runs at once (a locked read-modify-write) */
    ARCH_INC_SWITCH = 2, /* plain, and made atomic in place by writing ARCH_INC_LOCK_BYTE
                          * over its first byte (which is ARCH_INC_PLAIN_BYTE) */
    ARCH_INC_ATOMIC_LSE = 3, /* AArch64 only: one stadd (ARMv8.1 LSE atomics); on a CPU
                          * without them it traps (SIGILL). x86-64: QP_EINVAL */
};
#define ARCH_INC_PLAIN_BYTE 0x3e /* x86-64: a ds prefix, which 64-bit mode ignores */
#define ARCH_INC_LOCK_BYTE 0xf0  /* x86-64: the lock prefix */

/*
 * Add one to the 8-byte counter at absolute address COUNTER, from code at ADDR, as MODE
 * (ARCH_INC_*) says: `incq COUNTER(%rip)` (7 bytes), `lock incq` (8 bytes), or
 * `ds incq` (8 bytes, the switchable form). Changes the arithmetic flags: use only
 * where they are dead (see arch_emit_flags_save).
 */
int arch_emit_counter_inc(uint64_t addr, uint64_t counter, int mode, uint8_t *out /*OUT*/,
                          size_t cap);

/*
 * Add the 64-bit register REG (1..16 but ARCH_REG_SP) to the counter at COUNTER, or
 * subtract it (SUBTRACT), from code at ADDR, as MODE says: `add|sub %REG,COUNTER(%rip)`
 * (7 bytes), with `lock` or the switchable `ds` first (8 bytes). A loop counted from its
 * induction variable (doc/qp.md): subtracted on the ways in, added on the ways out.
 * Changes the arithmetic flags, as arch_emit_counter_inc.
 */
int arch_emit_counter_add_reg(uint64_t addr, uint64_t counter, int mode, uint8_t reg,
                              int subtract, uint8_t *out /*OUT*/, size_t cap);

/*
 * Call TARGET from ADDR in code whose red zone may be live (a leaf procedure): skip the
 * 128 bytes below %rsp first and restore %rsp after (`lea` leaves the flags alone).
 * TARGET must preserve every register and the flags. 18 bytes; the call's return address
 * is ADDR + 10.
 */
int arch_emit_call_protected(uint64_t addr, uint64_t target, uint8_t *out /*OUT*/, size_t cap);

/*
 * Save / restore the arithmetic flags around code that changes them, without touching the
 * red zone (128 bytes below %rsp): `lea -128(%rsp),%rsp; pushfq` and `popfq;
 * lea 128(%rsp),%rsp`. Return the byte count.
 */
int arch_emit_flags_save(uint8_t *out /*OUT*/, size_t cap);
int arch_emit_flags_restore(uint8_t *out /*OUT*/, size_t cap);

/*
 * Interval timers for the live-process mode (wall time inside a procedure, nested and
 * recursive calls counted once). DEPTH, START and TOTAL are absolute addresses of
 * 8-byte words within rel32 reach of the code at ADDR.
 * arch_emit_timer_start: when DEPTH is 0, START = the cycle counter (rdtsc); then
 * DEPTH += 1 (locked). 52 bytes.
 * arch_emit_timer_stop: when DEPTH > 0, DEPTH -= 1 (locked), and when it reaches 0,
 * TOTAL += cycle counter - START (locked). An exit without a matching start (DEPTH 0:
 * the call began before the timers went in) is ignored. 63 bytes.
 * A reader in another process may take TOTAL + (now - START) while DEPTH > 0 as the
 * time so far: START is written before DEPTH leaves 0. Between a stop's decrement and
 * its add the value reads low for a moment (never high): readers keep the larger.
 * Both keep every register and the red zone (128 bytes below %rsp) but change the
 * arithmetic flags: use only where they are dead (see arch_emit_flags_save). Return the
 * byte count, QP_ERANGE when a word is out of rel32 reach, QP_EINVAL.
 */
int arch_emit_timer_start(uint64_t addr, uint64_t depth, uint64_t start, uint8_t *out /*OUT*/,
                          size_t cap);
int arch_emit_timer_stop(uint64_t addr, uint64_t depth, uint64_t start, uint64_t total,
                         uint8_t *out /*OUT*/, size_t cap);

/*****************************************************************************
 * Snippets: small programs run at a point of the program (the drivers' and tools'
 * vocabulary). A snippet is a tree of nodes in a caller-owned array; every value is a
 * 64-bit integer; statements have the value 0. arch_snip_emit compiles one to code that
 * keeps every register, the flags where they are live and the red zone.
 */

typedef enum arch_snip_op {
    ARCH_SN_CONST = 1, /* imm */
    ARCH_SN_ARG,       /* argument imm (0..5) of the procedure being entered (ARCH_SNX_ENTRY)
                        * or of the call about to be made (ARCH_SNX_CALL) */
    ARCH_SN_RETVAL,    /* the integer return value (ARCH_SNX_RETURN, ARCH_SNX_AFTER_CALL) */
    ARCH_SN_LOAD,      /* the SIZE-byte (1, 2, 4, 8) value at address imm, zero-extended */
    /* a OP b */
    ARCH_SN_ADD, ARCH_SN_SUB, ARCH_SN_MUL,
    ARCH_SN_DIV,       /* signed; a / 0 is 0 */
    ARCH_SN_MOD,       /* signed remainder; a % 0 is 0 */
    ARCH_SN_SHL, ARCH_SN_SHR, /* by b & 63; SHR is logical (ARCH_SNF_SIGNED: arithmetic) */
    ARCH_SN_AND, ARCH_SN_OR, ARCH_SN_XOR,
    ARCH_SN_EQ, ARCH_SN_NE, ARCH_SN_LT, ARCH_SN_LE, ARCH_SN_GT, ARCH_SN_GE, /* 1 or 0;
                        * signed unless ARCH_SNF_UNSIGNED */
    ARCH_SN_LAND, ARCH_SN_LOR, /* 1 or 0; b is evaluated only when it decides */
    ARCH_SN_NOT,       /* !a: 1 or 0 */
    /* statements */
    ARCH_SN_SEQ,       /* a, then b */
    ARCH_SN_IF,        /* if a then b, else c (c may be ARCH_SNIP_NONE) */
    ARCH_SN_STORE,     /* the SIZE-byte word at address imm = a */
    ARCH_SN_ADD_TO,    /* the 8-byte word at address imm += a (ARCH_SNF_ATOMIC: locked) */
    ARCH_SN_TIMER_START, /* the timer at imm (3 words: depth, start, total; as
                          * arch_emit_timer_start) starts, unless it runs already */
    ARCH_SN_TIMER_STOP,  /* the timer at imm stops (arch_emit_timer_stop) */
    /* a call */
    ARCH_SN_CALL,      /* the procedure at address imm with arguments args[0..nargs-1]
                        * (SysV ABI: stack aligned to 16, every caller-saved register and
                        * the vector state kept); value: its return value */
    ARCH_SN_NOPS,      /* nothing (value 0) */
    ARCH_SN_THREAD_SLOT, /* the calling thread's index in the table of ARCH_SNIP_THREADS
                          * 8-byte keys at imm: its key is the thread pointer (%fs:0,
                          * never 0), taken on first use (0: free); ARCH_SNIP_THREADS when
                          * the table is full */
    ARCH_SN_LOAD_AT,   /* the SIZE-byte value at address a, zero-extended */
    ARCH_SN_STORE_AT,  /* the SIZE-byte word at address a = b */
    ARCH_SN_ADD_AT,    /* the 8-byte word at address a += b (ARCH_SNF_ATOMIC: locked) */
    ARCH_SN_THREAD_CPU, /* the calling thread's CPU time in ns (a clock_gettime system
                         * call, CLOCK_THREAD_CPUTIME_ID) */
    ARCH_SN_ADDR,      /* the address imm, computed from the code's own (rel32 reach):
                        * right in a position-independent program */
    ARCH_SN_THREAD_PTR, /* the calling thread's pointer (%fs:0: its TCB, below which the
                         * executable's thread-local variables lie) */
    ARCH_SN_SP,        /* the program's stack pointer at the point (at an entry and before
                        * a ret: the address of the return address) */
    ARCH_SN_CYCLES,    /* the time-stamp counter (rdtsc) */
    ARCH_SN_KEY_SLOT,  /* the index of the value of a in the table of ARCH_SNIP_THREADS
                        * 8-byte keys at imm (as THREAD_SLOT; a key is kept as value ^
                        * ARCH_SNIP_KEY_XOR, 0 marking a free one): ARCH_SNIP_THREADS when
                        * the table is full or the value is ARCH_SNIP_KEY_XOR itself */
    ARCH_SN_REG,       /* the program's value of general-purpose register imm (ARCH_REG_*
                        * numbering, 1..16, not the stack pointer: ARCH_SN_SP) */
    ARCH_SN_TRACE_REC, /* append the 4-byte record imm (size 2: 2 bytes) to the calling
                        * thread's trace buffer, whose cursor and limit are the words
                        * at %fs:ARCH_TRACE_CUR and ARCH_TRACE_LIM: the slot is reserved
                        * and the cursor moved in one instruction (a signal handler's
                        * records go before or after it); a slot at or past the limit
                        * stays empty,
                        * the procedure at the address that node a (a CONST) holds is
                        * called, which keeps every register and the flags and makes room
                        * (the buffer is written up to the first slot at or past its
                        * limit), and the slot reserved again (control-flow tracing,
                        * driver/drv_trace.c) */
    ARCH_SN_TRACE_VAL, /* append the 4-byte record imm (size 2: 2 bytes), then the
                        * 8-byte value of node b, to the trace buffer (12 bytes, or 10;
                        * the limit leaves room), as TRACE_REC (node a: the refill) */
    ARCH_SN_THREAD_ID, /* the calling thread's kernel id (a gettid system call): what
                        * names it in /proc/PID/task for a reader outside the process */
    ARCH_SN_LOAD_SAFE, /* the SIZE-byte (1, 2, 4, 8) value at address a, zero-extended, read
                        * by the kernel (process_vm_readv of the own process): 0 where any
                        * of it cannot be read, never a fault. Two system calls. */
    ARCH_SN_ADD_CPU,   /* the 8-byte word at address imm + cpu * stride += a, cpu the
                        * calling thread's CPU: a restartable sequence (rseq(2)), exact
                        * under threads without a locked instruction. Node b (a CONST)
                        * is the thread's struct rseq's offset from its thread pointer
                        * (glibc's __rseq_offset), node c (a CONST) the stride, a power
                        * of 2 from 8 to ARCH_SNIP_CPU_STRIDE_MAX. A thread whose rseq
                        * area is not registered (cpu_id negative) adds to CPU 0's word
                        * with a locked add. The thread's rseq_cs is cleared after the
                        * add, so no thread keeps pointing at the code once it left it.
                        * The thread must have registered ARCH_RSEQ_SIG. */
} arch_snip_op_t;

#define ARCH_RSEQ_SIG 0x53053053u      /* x86-64: glibc's (and librseq's) RSEQ_SIG */
#define ARCH_SNIP_CPU_STRIDE_MAX (1u << 20) /* ARCH_SN_ADD_CPU's largest stride */

#define ARCH_TRACE_CUR 0x38 /* x86-64: glibc's tcbhead_t.unused_vgetcpu_cache[0] */
#define ARCH_TRACE_LIM 0x40 /* ... [1] */
#define ARCH_TRACE_SLACK 16 /* bytes a buffer has past its limit */

#define ARCH_SNIP_NONE UINT32_MAX /* no operand */
#define ARCH_SNIP_MAXARGS 6
#define ARCH_SNIP_THREADS 1024 /* keys of an ARCH_SN_THREAD_SLOT table (a power of 2) */

/* Where ARCH_SN_THREAD_SLOT's probe starts for the thread pointer TP: (TP >> 12) mixed,
 * modulo ARCH_SNIP_THREADS (the probe then goes on linearly). The generated code and a
 * mutator that fills a thread's block from outside (libqpt) must agree. */
static inline uint64_t
arch_snip_thread_hash(uint64_t tp)
{
    uint64_t t = (tp >> 12) * 0x045d9f3bull;
    t ^= t >> 16;
    return t & (ARCH_SNIP_THREADS - 1);
}
#define ARCH_SNIP_KEY_XOR 0x9e3779b97f4a7c15ull /* ARCH_SN_KEY_SLOT: value ^ this is kept */

enum {
    ARCH_SNF_UNSIGNED = 1u << 0, /* comparisons: unsigned */
    ARCH_SNF_SIGNED = 1u << 1,   /* SHR: arithmetic */
    ARCH_SNF_ATOMIC = 1u << 2,   /* ADD_TO: a locked add */
};

typedef struct arch_snip {
    uint8_t op;        /* arch_snip_op_t */
    uint8_t size;      /* LOAD, STORE: bytes (1, 2, 4, 8) */
    uint8_t flags;     /* ARCH_SNF_* */
    uint8_t nargs;     /* CALL: arguments */
    uint32_t a, b, c;  /* operands: node indices, or ARCH_SNIP_NONE */
    int64_t imm;       /* CONST: the value; ARG: its index; LOAD, STORE, ADD_TO, TIMER_*,
                        * CALL: an address (rel32 reach of the code, except CALL) */
    uint32_t args[ARCH_SNIP_MAXARGS]; /* CALL: argument nodes */
} arch_snip_t;

/* Where a snippet runs: which values exist there. */
enum {
    ARCH_SNX_ENTRY = 1u << 0,      /* a procedure's first instruction (arguments in their
                                    * registers, flags dead, no red zone in use) */
    ARCH_SNX_CALL = 1u << 1,       /* before a call instruction (its arguments are set) */
    ARCH_SNX_RETURN = 1u << 2,     /* before a return (the return value is set) */
    ARCH_SNX_AFTER_CALL = 1u << 3, /* right after a call returned */
};

/* The place a snippet is compiled for. Zero-initialise for the safest assumptions. */
typedef struct arch_snip_ctx {
    uint32_t where;      /* ARCH_SNX_* that hold there (0: anywhere) */
    uint32_t dead_regs;  /* bit (1u << ARCH_REG_*) for registers known dead there (not
                          * saved when the snippet uses them); 0: all are live */
    uint8_t live_flags;  /* ARCH_FLAG_* live there (saved when the snippet changes them) */
    uint8_t no_red_zone; /* the 128 bytes below %rsp are not in use (entries) */
} arch_snip_ctx_t;

/* Is the imm of an OP node an address of memory it uses (LOAD, STORE, ADD_TO, TIMER_*,
 * THREAD_SLOT, KEY_SLOT, ADDR: what a rewriter relocates)? */
int arch_snip_imm_is_addr(uint8_t op);

/*
 * Check the snippet NODES[0..N) rooted at ROOT: every index in range, the tree acyclic
 * and at most 64 deep, each operation's operands and sizes as it needs them, ARG and
 * RETVAL only where CTX says they exist. Returns 0, or QP_EINVAL with one line in WHY
 * (WHYLEN bytes; may be NULL) naming the node.
 */
int arch_snip_check(const arch_snip_t *nodes, size_t n, uint32_t root,
                    const arch_snip_ctx_t *ctx, char *why, size_t whylen);

/*
 * Compile the snippet to code that runs at ADDR, into OUT (CAP bytes); returns its
 * length, which does not depend on ADDR. The code keeps every register (saving those it
 * uses that CTX does not say are dead), the flags when CTX says they are live, the red
 * zone, and the stack pointer. QP_EINVAL (see arch_snip_check), QP_ERANGE (an address
 * out of rel32 reach, or a tree needing more than 12 registers at once), or QP_ENOMEM
 * when CAP is too small. With OUT NULL only the length is computed.
 */
int arch_snip_emit(const arch_snip_t *nodes, size_t n, uint32_t root,
                   const arch_snip_ctx_t *ctx, uint64_t addr, uint8_t *out /*OUT*/,
                   size_t cap);

/*
 * The estimated cost of one run of the snippet compiled as arch_snip_emit would, in
 * cycles, into *CYCLES: a model of its instructions (plain ones a tenth of a cycle, the
 * serialising and slow ones their latency: locked, popf, rdtsc, calls, system calls); a
 * called procedure's own cost is not in it. QP_E* as arch_snip_emit.
 */
int arch_snip_cycles(const arch_snip_t *nodes, size_t n, uint32_t root,
                     const arch_snip_ctx_t *ctx, uint64_t addr, double *cycles /*OUT*/);

/*
 * Indirect jumps whose targets are unknown, translated at run time (seed 004, section
 * 3.2). The moved `jmp *OP` becomes arch_emit_jmp_xlate's `lea -128(%rsp),%rsp;
 * push OP; push $MISS; jmp STUB` (OP re-encoded for its new place; the red zone is
 * skipped; MISS is the site's miss counter relative to the table, or 0), and one stub
 * per file (arch_emit_xlate_stub) looks the target T up in a table of the file's
 * procedure entries: a moved one continues at its new code, anything else at T itself;
 * a T inside the file's code that is no entry adds one to the site's miss counter (the
 * jump did not leave its procedure for another: flow through it is not what the CFG
 * says). The stub keeps every register, the flags (DF and AC: it does not touch them)
 * and the red zone, and ends in `ret $136`.
 * The table (8-byte aligned, read-only, link-time addresses; the stub finds the load
 * bias from SELF) is a hash table of the entries, open addressing with linear probing:
 *   int64_t self;      link-time address of the table
 *   uint64_t mask;     slots - 1 (slots: a power of two, at most half full)
 *   uint64_t lo;       base of the offsets below
 *   uint64_t span;     T - lo >= span: not this file's code (another module's, say);
 *                      span < 2^32 - 1
 *   uint64_t unused;
 *   uint64_t shift;    32 - log2(slots): the first slot of key K is
 *                      ((uint32_t)(K * 0x9e3779b1) >> shift) & mask, K = T - lo
 *   struct { uint32_t key1; int32_t new_; } slot[mask + 1];
 *                      key1 = K + 1 (0: an empty slot), new_ = where it goes - lo
 */
#define ARCH_XLATE_STUB_LEN 141
#define ARCH_XLATE_HDR 48
int arch_emit_jmp_xlate(const uint8_t *buf, const arch_insn_t *in, uint64_t addr,
                        uint64_t stub, int32_t miss, uint8_t *out /*OUT*/, size_t cap);
int arch_emit_xlate_stub(uint64_t addr, uint64_t table, uint8_t *out /*OUT*/, size_t cap);

/*
 * A stub as arch_emit_xlate_stub's (same table, same site code), for a live procedure
 * relocated whole (patch/pt_reloc.c) whose unknown jumps may leave it: a T the table
 * has continues at its new code; any other T continues at MISS with the stack as the
 * site left it but for its miss slot, [%rsp] = T and the 128 bytes skipped above, so that
 * MISS may run code there (an exit's snippet) and then arch_emit_xlate_go's `ret $128`,
 * which goes to T with %rsp as it was at the jump.
 */
#define ARCH_XLATE_STUB_OUT_LEN 136
int arch_emit_xlate_stub_out(uint64_t addr, uint64_t table, uint64_t miss,
                             uint8_t *out /*OUT*/, size_t cap);
#define ARCH_XLATE_GO_LEN 3
int arch_emit_xlate_go(uint8_t *out /*OUT*/, size_t cap);

/*
 * A rewritten shared library's start that points its own PLT at the moved code
 * (patch/pt_gotfix.c builds it whole; the rewriter makes it the library's DT_INIT). The
 * library's calls of its own exported functions go through its PLT and a JUMP_SLOT
 * word, which the dynamic linker fills with the exported (old) entry, where a redirect
 * jumps on to the new code. The code, called as init(argc, argv, envp), reads the
 * header that follows it (at the length the emitter returns, a multiple of 8) and the
 * entries after the header; BIAS = the header's run-time address - SELF. For each entry
 * whose slot holds BIAS + OLD (the symbol resolved to this library: not interposed, not
 * left lazy), it writes BIAS + NEW; a slot holding anything else is left alone. The
 * whole pages inside [RELRO_LO, RELRO_HI) + BIAS (what the dynamic linker made read-only
 * already: its page size from the auxiliary vector after ENVP on AArch64, 4096 on
 * x86-64) are made writable around the writes and read-only again; when that fails,
 * nothing is written. It then tail-calls NEXT + BIAS with the same arguments, or
 * returns when NEXT is 0. It keeps every callee-saved register and uses no stack (but
 * x86-64's three argument registers, pushed and popped).
 */
typedef struct arch_got_fix_hdr {
    uint64_t self;     /* link-time address of this header */
    uint64_t count;    /* entries after the header */
    uint64_t relro_lo; /* PT_GNU_RELRO's link-time extent, [lo, hi); 0 and 0 when none */
    uint64_t relro_hi;
    uint64_t next;     /* link-time address of the start to go on to (DT_INIT), or 0 */
} arch_got_fix_hdr_t;

typedef struct arch_got_fix_entry {
    uint64_t slot;     /* link-time address of the JUMP_SLOT word */
    uint64_t old;      /* the exported entry, with a redirect to NEW */
    uint64_t new_;     /* the procedure's new entry */
} arch_got_fix_entry_t;

/* The code above into OUT (position independent): its length (a multiple of 8), or
 * QP_EINVAL when CAP is too small. */
int arch_emit_got_fix(uint8_t *out /*OUT*/, size_t cap);

/* LEN bytes of the recommended multi-byte nops (for padding). */
int arch_emit_nops(size_t len, uint8_t *out /*OUT*/, size_t cap);

/* A trap (ud2, 2 bytes) for places control must never reach. */
int arch_emit_trap(uint8_t *out /*OUT*/, size_t cap);

/*****************************************************************************
 * ISA selection at run time (Capstone's per-architecture module table). The functions
 * above are the host ISA's (x86-64) and are what cfg/, driver/ and editor/ call today;
 * an arch_isa_t offers the same contracts for any supported ISA, chosen from the ELF
 * header's e_machine. Only the fields listed are provided; a NULL member means the ISA
 * does not have that emitter yet.
 */
#define ARCH_EM_X86_64 62   /* ELF e_machine numbers (arch/ never reads ELF itself) */
#define ARCH_EM_AARCH64 183

/*
 * A switch table found before an indirect jump (arch_isa_t.jump_table): entry k is the
 * ENTRY_SIZE-byte word at TABLE + k * ENTRY_SIZE (sign-extended when IS_SIGNED) and the
 * jump goes to BASE + (entry << SHIFT). COUNT entries when a bound check proves it, else
 * 0 (unknown: the caller must find the extent another way or give up). ANCHOR is the
 * address of the instruction that forms BASE (AArch64's `adr`) when the editor may make
 * it form another base and rewrite the entries to match: only the dispatch reads the
 * register it writes (the sequence is the compiler's, whole and unbroken); else 0.
 */
typedef struct arch_jtab {
    uint64_t table;
    uint64_t base;
    uint32_t count;
    uint8_t entry_size; /* 1, 2 or 4 */
    uint8_t is_signed;
    uint8_t shift;
    uint8_t pad;
    uint64_t anchor;
    /* The table's address spilled to the stack (sqlite's VM: formed once, stored in a
     * frame slot, reloaded before each dispatch): SLOT_LOAD is the address of the
     * `ldr xT, [sp, #SLOT]` that gives it, TABLE is 0, and the caller must prove what
     * the slot holds (arch_isa_t.sp_access, slot_store) before it takes the table.
     * SLOT_LOAD is 0 when the table's address is formed in the code before the jump. */
    uint64_t slot_load;
    int64_t slot;
} arch_jtab_t;

/*
 * What one instruction does with the stack pointer (arch_isa_t.sp_access), for proving
 * that a frame slot holds one value: flags ARCH_SP_*, with the bytes [LO, HI) above sp
 * that it stores to (ARCH_SP_STORE), or the lowest offset above sp that the address it
 * copies into a register may reach (ARCH_SP_ADDR: LO, anything above it).
 */
enum {
    ARCH_SP_WRITES_SP = 1, /* sp changes: the frame's slots are others' from here */
    ARCH_SP_STORE = 2,     /* a store to [sp + LO, sp + HI) */
    ARCH_SP_ADDR = 4,      /* sp + LO (or a frame-pointer address) lands in a register */
    ARCH_SP_UNKNOWN = 8,   /* a use of sp or the frame pointer not described above */
};
typedef struct arch_sp_access {
    unsigned flags; /* ARCH_SP_* */
    int64_t lo, hi; /* as the flags say */
} arch_sp_access_t;

typedef struct arch_isa {
    const char *name;       /* "x86-64", "AArch64" */
    uint16_t elf_machine;   /* ARCH_EM_* */
    uint8_t insn_align;     /* every instruction starts at a multiple of this (1, 4) */
    uint8_t max_insn;       /* longest instruction in bytes (15, 4) */
    uint8_t jmp_len;        /* bytes of emit_jmp (5, 4) */
    uint8_t has_red_zone;   /* the ABI lets leaf code use memory below sp (x86-64: 128) */
    uint32_t jmp_reach_log2;/* emit_jmp reaches +-2^this bytes (31; 27) */
    int (*decode)(const uint8_t *buf, size_t len, uint64_t addr, arch_insn_t *out);
    int (*is_padding)(const uint8_t *buf, size_t len);
    /* arch_frame_entry, or NULL when the ISA has none yet */
    int (*frame_entry)(const uint8_t *buf, size_t len);
    /* arch_looks_like_data, or NULL when the ISA has none yet (with frame_entry: what
     * cfg_proc_starts_like_function asks) */
    int (*looks_like_data)(const uint8_t *buf, size_t len);
    int (*reloc_insn)(const uint8_t *buf, const arch_insn_t *in, uint64_t new_addr,
                      uint64_t new_target, int short_ok, uint8_t *out, size_t cap);
    int (*emit_jmp)(uint64_t addr, uint64_t target, uint8_t *out, size_t cap);
    int (*emit_call)(uint64_t addr, uint64_t target, uint8_t *out, size_t cap);
    int (*emit_counter_inc)(uint64_t addr, uint64_t counter, int mode, uint8_t *out,
                            size_t cap);
    int (*emit_flags_save)(uint8_t *out, size_t cap);
    int (*emit_flags_restore)(uint8_t *out, size_t cap);
    int (*emit_nops)(size_t len, uint8_t *out, size_t cap);
    int (*emit_trap)(uint8_t *out, size_t cap);
    /* Counter increments and runtime hook calls at a point, as the counting drivers
     * need them (added for AArch64; x86-64's are the functions it always used):
     * emit_counter_inc_at adds one to COUNTER as MODE says, using the registers CTX
     * (NULL: nothing known) says are dead and keeping the flags CTX says are live
     * (x86-64: arch_emit_flags_save/restore around `incq` when they are; AArch64's
     * increments never write NZCV; see a64_emit_counter_inc_at). emit_call_protected
     * calls a hook that keeps every register and the flags (arch_emit_call_protected;
     * a64_emit_call_protected). */
    int (*emit_counter_inc_at)(uint64_t addr, uint64_t counter, int mode,
                               const arch_snip_ctx_t *ctx, uint8_t *out, size_t cap);
    /* arch_emit_counter_add_reg at a point, the flags kept as emit_counter_inc_at keeps
     * them; NULL where the ISA has none (AArch64): no loop is then counted from its
     * induction variable. */
    int (*emit_counter_add_reg_at)(uint64_t addr, uint64_t counter, int mode, uint8_t reg,
                                   int subtract, const arch_snip_ctx_t *ctx, uint8_t *out,
                                   size_t cap);
    int (*emit_call_protected)(uint64_t addr, uint64_t target, uint8_t *out, size_t cap);
    /* The switch table whose indirect jump is the last instruction of BUF[0..LEN) (code
     * at ADDR, normally the procedure up to that jump): 0, QP_ENOTFOUND, QP_EINVAL.
     * NULL for x86-64, whose tables cfg/cfg_jtab.c finds with arch_decode_ops. */
    int (*jump_table)(const uint8_t *buf, size_t len, uint64_t addr, arch_jtab_t *out);

    /* --- cfg/'s questions about code (issue 34: AArch64 programs through cfg/) ---
     * x86-64 answers them with arch_decode_ops and cfg/'s own recognisers (decode_ops
     * set, the rest NULL); AArch64 the other way round. */
    /* arch_decode_ops, or NULL when the ISA has no operand decoder. */
    int (*decode_ops)(const uint8_t *buf, size_t len, uint64_t addr, arch_ops_t *out);
    /* The address the instruction at BUF (LEN bytes readable from it, the code after it
     * included) forms with the ones after it, into *OUT: ARCH_REF_ADDR (an address
     * value, as adr or adrp + add), ARCH_REF_MEM (memory it reads or writes, as ldr
     * literal or adrp + ldr), or 0 when it forms none it can prove. */
    int (*code_ref)(const uint8_t *buf, size_t len, uint64_t addr, uint64_t *out);
    /* Does the indirect jump that ends BUF[0..LEN) go through a pointer loaded from one
     * memory slot (a GOT entry, a struct field: a tail call), not a table? 1 or 0. */
    int (*ptr_jump)(const uint8_t *buf, size_t len, uint64_t addr);
    /* The PLT stub at BUF (code at ADDR): its length, with the GOT slot it jumps
     * through in *SLOT; 0 when BUF is no PLT stub. */
    int (*plt_slot)(const uint8_t *buf, size_t len, uint64_t addr, uint64_t *slot);
    /* The system call number the instruction PREV (just before a syscall) sets, or -1. */
    long (*syscall_nr)(const uint8_t *prev, size_t len);
    /* The Linux system calls that never return: exit, exit_group, rt_sigreturn. */
    long sys_noreturn[3];

    /* --- the editor's relocation (issue 34: AArch64 programs rewritten) --- */
    /* An upper bound of reloc_insn's length for IN (decoded from BUF) wherever the new
     * code goes within emit_jmp's reach of the old code and of its data: what a layout
     * reserves before it knows the final addresses. A shorter final encoding is padded
     * with emit_nops. Returns the bound, or QP_E* as reloc_insn. */
    int (*reloc_max_len)(const uint8_t *buf, const arch_insn_t *in);
    /* arch_emit_jmp_xlate and arch_emit_xlate_stub (the run-time translation of
     * indirect jumps of unknown targets), or NULL when the ISA has none: such a
     * procedure then stays in place. */
    int (*emit_jmp_xlate)(const uint8_t *buf, const arch_insn_t *in, uint64_t addr,
                          uint64_t stub, int32_t miss, uint8_t *out, size_t cap);
    int (*emit_xlate_stub)(uint64_t addr, uint64_t table, uint8_t *out, size_t cap);

    /* --- tables whose address goes through a stack slot (arch_jtab_t.slot_load) --- */
    /* What the instruction at BUF (code at ADDR) does with sp and the frame pointer:
     * 0 with *OUT filled (flags 0 when nothing), QP_EDECODE. */
    int (*sp_access)(const uint8_t *buf, size_t len, uint64_t addr, arch_sp_access_t *out);
    /* The last instruction of BUF[0..LEN) (code at ADDR) stores a whole register to
     * [sp, #SLOT]: the address that register holds, formed in BUF by the instructions
     * from *FIRST on (ADDR-relative; nothing else writes the register after them):
     * 0, or QP_ENOTFOUND. */
    int (*slot_store)(const uint8_t *buf, size_t len, uint64_t addr, int64_t slot,
                      uint64_t *value /*OUT*/, uint64_t *first /*OUT*/);
    /* arch_emit_got_fix: the start of a shared library that points its own PLT at
     * the moved code. */
    int (*emit_got_fix)(uint8_t *out, size_t cap);

    /* --- code patched in place in a Go program (patch/pt_go.c) --- */
    /* arch_go_may_fault: may the instruction fault on a bad address in Go (a memory
     * access other than on the stack, pc-relative, thread-local or through the
     * goroutine's register)? NULL: the ISA has no such test, every instruction may. */
    int (*go_may_fault)(const uint8_t *buf, size_t len, uint64_t addr);
} arch_isa_t;

/* arch_isa_t.code_ref's answers. */
enum { ARCH_REF_ADDR = 1, ARCH_REF_MEM = 2 };

/* The ISA for ELF machine number MACHINE, or NULL when qpt has none. */
const arch_isa_t *arch_isa_for_machine(unsigned machine);

/*
 * As arch_isa_for_machine, and on NULL one line in WHY (WHYLEN bytes; may be NULL)
 * naming the machine: "ELF machine 40 (32-bit ARM) is not supported".
 */
const arch_isa_t *arch_isa_select(unsigned machine, char *why, size_t whylen);

/* The ISA the free functions above implement (the one cfg/ and editor/ use): x86-64. */
const arch_isa_t *arch_isa_host(void);

#endif
