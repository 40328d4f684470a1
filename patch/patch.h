/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * PURPOSE: the patch layer between arch/ and the two ways of placing code (editor/ for
 * files, dynamic/ for processes): one point model, one rule for which flags are live
 * where (and so when a snippet must save them), and one trampoline builder with every
 * shape either mode needs. Pure: from (what, where) to bytes, written by the caller (dyn
 * into a process, a test into its own memory). patch/ includes arch/ only: it never
 * knows of CFGs, ELF files or ptrace.
 */
#ifndef QPT_PATCH_H
#define QPT_PATCH_H

#include <stddef.h>
#include <stdint.h>

#include "arch/arch.h"

/*****************************************************************************
 * Points
 */

/*
 * Where a snippet runs, the one vocabulary of the layer (the values of the public
 * qpt_point_kind_t; dyn's DYN_PT_* and the editor's probes name a subset of them).
 */
typedef enum pt_point_kind {
    PT_POINT_ENTRY = 1,  /* a procedure's first instruction (called by the ABI) */
    PT_POINT_EXIT,       /* before a return (the return value is set) */
    PT_POINT_CALL,       /* before a call instruction (its arguments are set) */
    PT_POINT_AFTER_CALL, /* right after a call returned */
    PT_POINT_BLOCK,      /* a basic block's first instruction */
    PT_POINT_EDGE,       /* control going from one block to another */
    PT_POINT_INSN,       /* before any instruction (a source line's first, an address) */
} pt_point_kind_t;

/*
 * What holds where a snippet runs at a point of KIND with the flags LIVE_FLAGS live
 * there (pt_flags_*): the arguments at an entry or a call, the return value at an exit
 * or after a call, and the red zone free where the ABI says so (an ABI entry: live
 * flags 0 say it is one). The context arch_snip_emit compiles for.
 */
arch_snip_ctx_t
pt_point_ctx(uint32_t kind, uint8_t live_flags);

/*****************************************************************************
 * Flags liveness: the one rule for when flags must be saved
 */

/* What calls and returns do to the flags. */
typedef enum pt_abi {
    PT_ABI_SYSV = 0,      /* the SysV ABI: a call may change every flag, a return leaves
                           * them undefined */
    PT_ABI_FLAGS_KEPT = 1 /* no such promise: a callee may keep them for its caller (Go:
                           * runtime.duffzero), so they stay live across calls and returns */
} pt_abi_t;

/*
 * The flags live before instruction IN given LIVE after it: what it reads, plus what was
 * live and it does not always write. Under PT_ABI_SYSV a call reads only what the call
 * itself reads (nothing after it reads the flags unset) and a ret leaves none live; under
 * PT_ABI_FLAGS_KEPT a call passes LIVE through and a ret leaves them all live.
 */
uint8_t
pt_flags_live_before(const arch_insn_t *in, uint8_t live, pt_abi_t abi);

/*
 * LIVE[i] = the flags live before each of the N instructions V under PT_ABI_SYSV, given
 * LIVE_OUT after the last (ARCH_FLAGS_STATUS when nothing is known of what follows).
 */
void
pt_flags_live_in(
    const arch_insn_t *v, size_t n, uint8_t live_out, uint8_t *live /*OUT: n*/);

/* The flags live at a procedure's entry: none where it is entered by the ABI (ABI_ENTRY:
 * it is called, or exported by name), else all of them. */
uint8_t
pt_flags_at_entry(int abi_entry);

/* Must a snippet that changes CLOBBERS save the flags where LIVE are live? */
static inline int
pt_flags_must_save(uint8_t live, uint8_t clobbers)
{
    return (live & clobbers) != 0;
}

/*****************************************************************************
 * Trampolines of points patched in place. A point's first instructions (at least the 5
 * bytes of a jump) are replaced by a jump to a trampoline that runs its snippets and
 * the moved instructions, then goes back (or leaves as the moved code did).
 */

typedef enum pt_shape {
    PT_TRAMP_BEFORE = 0, /* snippet, the moved instructions, jump back (an entry, a block,
                          * an instruction) */
    PT_TRAMP_CALL,       /* snippet, the moved instructions ending with a call, the after
                          * snippet (where the callee returns), jump back */
    PT_TRAMP_EXIT, /* the moved instructions but the last (a ret), snippet, the ret */
    PT_TRAMP_OWN,  /* the code runs to its own end: before snippet, every
                    * instruction but the last moved, then per call_ret, rlen and
                    * tail below (else: after snippet, the last one moved) */
    PT_TRAMP_CALL_NEXT, /* a short call moved with what follows it (call_len): snippet,
                         * the call (returning into the trampoline, after it), the
                         * rest moved, jump back */
} pt_shape_t;

/* A snippet tree and what holds where it runs. */
typedef struct pt_snip {
    const arch_snip_t *nodes; /* NULL: none */
    size_t n;                 /* nodes */
    uint32_t root;            /* the tree's root node */
    arch_snip_ctx_t ctx;      /* what holds there (pt_point_ctx) */
} pt_snip_t;

typedef struct pt_tramp {
    uint32_t shape;        /* pt_shape_t */
    uint64_t addr;         /* runtime address of the first replaced byte */
    const uint8_t *orig;   /* the replaced bytes: whole instructions */
    uint32_t len;          /* bytes replaced (spill included): at least 5 unless padded */
    uint32_t ninsns;       /* instructions in them */
    pt_snip_t before;      /* before the moved code; EXIT: before the ret */
    pt_snip_t after;       /* CALL: after the call; OWN: before the last instruction */
    uint8_t spill;         /* bytes of padding at the end of orig (never run), covered by
                            * the jump, not moved */
    uint8_t call_ret;      /* OWN: the last instruction is a direct call: the trampoline
                            * calls a stub that stores the original return address over
                            * its own and jumps to the callee (nothing returns into it);
                            * the after snippet (if any) runs before it (a call that never
                            * returns into the procedure is one of its exits) */
    uint8_t tail;          /* OWN: the last instruction is a tail jump: 1; 2 a jcc (the
                            * after snippet only when taken, not taken: jump back); 3 a
                            * jcc whose both sides leave (the after snippet on both) */
    uint8_t padded;        /* BEFORE, CALL, EXIT: the point is entered by a short jump to
                            * a jump in padding, so fewer than 5 bytes are replaced: nops
                            * before them make up the 5 the trampoline moves */
    uint8_t call_len;      /* CALL_NEXT: the call's length (the first instruction) */
    const uint8_t *rbytes; /* OWN: a short return block's bytes (plain instructions,
                            * then its ret) that the last instruction goes to: they run
                            * here, the after snippet before their ret; NULL: none */
    uint32_t rlen, rninsns; /* ... their bytes and instructions */
    uint64_t raddr;         /* ... their runtime address */
} pt_tramp_t;

/*
 * The trampoline of T placed at AT into OUT (CAP bytes):
 * its length, or QP_E* (QP_EINVAL when T's instructions do not cover its bytes,
 * QP_ERANGE when a moved instruction or a jump cannot reach). *RET_AT (may be NULL):
 * CALL and CALL_NEXT, the return address the moved call pushes (in the trampoline).
 */
int
pt_tramp_emit(
    const pt_tramp_t *t, uint64_t at, uint8_t *out, size_t cap, uint64_t *ret_at /*OUT*/);

/* The jump written at ADDR (over a point's first bytes, or padding) to the trampoline at
 * TRAMP: 5 bytes into OUT (CAP >= 5), or QP_E*. */
int
pt_tramp_patch(uint64_t addr, uint64_t tramp, uint8_t *out, size_t cap);

/*
 * The usual bytes of "system call number NR" as compilers and libc write them (x86-64:
 * `mov $NR,%eax; syscall`, 7 bytes), to look for in code that no CFG reaches (a static
 * program's clone3 wrapper, driver/drv_procs.c). Its length into OUT (CAP bytes), or
 * QP_EINVAL (NR out of range, CAP too small).
 */
int
pt_syscall_pattern(long nr, uint8_t *out /*OUT*/, size_t cap);

/* The bytes snippet SN compiles to where it runs at AT (its variables are in rel32
 * reach from there), or QP_E* (the length cannot be known). */
int
pt_snip_size(const pt_snip_t *sn, uint64_t at);

/*****************************************************************************
 * Counting code of a file where it is (pt_inplace.c)
 */

/* The trampoline of a point of a file patched in place (editor/ed_inplace.c) to count
 * a block: pure, from (what, where) to bytes (pt_inplace.c). */
typedef struct pt_inplace {
    uint64_t addr;       /* the point: the first displaced byte */
    const uint8_t *orig; /* the displaced bytes: whole instructions */
    uint32_t len;        /* their number (>= 1) */
    uint64_t counter;    /* the 8-byte counter to add one to (0: none) */
    int inc_mode;        /* ARCH_INC_PLAIN or ARCH_INC_ATOMIC */
    int save_flags;      /* the arithmetic flags are live at the point */
} pt_inplace_t;

/* An upper bound of the trampoline's size for LEN displaced bytes. */
#define PT_INPLACE_MAX(len) (32u + 40u * (len))

/*
 * The trampoline of T placed at AT into OUT (CAP bytes): flags saved if live (below the
 * red zone), the counter, the displaced instructions relocated (a last call made with
 * its original return address, a last jump or return kept as it is), a jump back to
 * T->addr + T->len when they fall through. Its length, or QP_E* (QP_EUNSUPP: an
 * instruction that cannot be moved; QP_ERANGE: out of rel32 reach).
 */
int
pt_inplace_emit(const pt_inplace_t *t, uint64_t at, uint8_t *out /*OUT*/, size_t cap);

/*
 * The SPAN bytes written over T's point to enter its trampoline at TRAMP: a jmp rel32,
 * then int3 over the rest of the span (never run: nothing enters past the jump) into
 * OUT (CAP bytes). Returns SPAN, or QP_EINVAL (SPAN shorter than the jump or longer
 * than CAP), QP_ERANGE (TRAMP out of rel32 reach).
 */
int
pt_inplace_patch(const pt_inplace_t *t, uint64_t tramp, uint32_t span,
    uint8_t *out /*OUT*/, size_t cap);

/*****************************************************************************
 * Code patched in place in a Go program (pt_go.c): no instruction that may fault is
 * displaced (the runtime turns a fault into a panic by the faulting pc, which must be
 * in its .gopclntab: in a trampoline or a procedure's copy, the panic's walk of the
 * stack stops the program with "fatal error: unknown caller pc")
 */

/* Why such a point is refused, the one phrase both modes print. */
extern const char pt_go_fault_why[];

/*
 * May the instruction at BUF (LEN bytes readable, code at ADDR) fault on a bad address
 * in a Go program (ISA->go_may_fault)? 1 or 0; 1 when the ISA has no such test or the
 * bytes do not decode.
 */
int
pt_go_may_fault(const arch_isa_t *isa, const uint8_t *buf, size_t len, uint64_t addr);

/* Does any of the whole instructions BUF[0..LEN) (code at ADDR) - the bytes a point
 * displaces, or a procedure's copy - fault as pt_go_may_fault says? 1 or 0. */
int
pt_go_faults_in(const arch_isa_t *isa, const uint8_t *buf, size_t len, uint64_t addr);

/*****************************************************************************
 * Instructions decoded once (pt_decoded.c), for callers that size and emit the same
 * code many times
 */

typedef struct pt_decoded pt_decoded_t;

/* An empty set of decoded instructions (NULL: no memory). Not for several threads at
 * once. */
pt_decoded_t *
pt_decoded_new(void);

void
pt_decoded_free(pt_decoded_t *d);

/*
 * arch_decode(BUF, LEN, ADDR, OUT), kept in D: an instruction decoded before at ADDR
 * from the same bytes is not decoded again (BUF may be any memory: the bytes are
 * compared). D NULL: arch_decode.
 */
int
pt_decode(pt_decoded_t *d, const uint8_t *buf, size_t len, uint64_t addr,
    arch_insn_t *out /*OUT*/);

/* How many of D's pt_decode calls were answered from what it kept, not decoded (what
 * it saves; 0 for NULL). */
size_t
pt_decoded_hits(const pt_decoded_t *d);

/*****************************************************************************
 * Procedures relocated whole (pt_reloc.c): a live procedure whose points do not fit
 * in place runs as a copy, entered by the jump at its entry (Dyninst's technique)
 */

/* A run of whole instructions of the procedure (one block, or several back to back). */
typedef struct pt_run {
    uint64_t addr;        /* runtime address of its first instruction */
    const uint8_t *bytes; /* its bytes */
    uint32_t len;         /* their number */
} pt_run_t;

/* A call of the procedure with a snippet before it in the copy. */
typedef struct pt_site {
    uint64_t addr;  /* runtime address of the call instruction */
    pt_snip_t snip; /* what runs before it (the call then made as every call is) */
} pt_site_t;

typedef struct pt_proc {
    const pt_run_t *runs; /* the procedure's code (its cold fragments' too), sorted by
                           * address, disjoint */
    size_t nruns;         /* runs */
    uint64_t entry;       /* runtime address of the entry (an instruction of a run) */
    pt_snip_t enter;      /* at the copy's start, before the entry's first instruction
                           * (a jump back to the entry inside the procedure skips it) */
    pt_snip_t ret;        /* before every ret */
    pt_snip_t leave;      /* before every jump out of the runs (a tail call, a jcc
                           * leaving, falling out of the last run) and every call whose
                           * return address is outside them (it never returns) */
    const uint64_t *exits; /* the rets, leaving jumps and calls that never return
                            * (runtime addresses, sorted) that get RET or LEAVE; NULL:
                            * every one */
    size_t nexits;
    const uint64_t *noret; /* calls whose callee never returns (runtime addresses,
                            * sorted): exits, LEAVE before them, as before a call whose
                            * return address is outside the runs; NULL: none */
    size_t nnoret;
    const uint64_t *inner; /* indirect jumps whose every target is inside (a jump table
                            * of proven bounds; runtime addresses, sorted): relocated as
                            * they are, no snippet (the caller writes a jump into the
                            * copy at each target: the table, data, is not changed);
                            * NULL: none */
    size_t ninner;
    const uint64_t *unknown; /* indirect jumps whose targets are not known (runtime
                              * addresses, sorted): translated at run time (see
                              * pt_proc_emit); NULL: none */
    size_t nunknown;
    const pt_site_t *sites; /* calls (direct or not) with a snippet before them, sorted
                             * by address, each a call of the runs; NULL: none */
    size_t nsites;
    pt_decoded_t *decoded; /* where its instructions are decoded once (NULL: each
                            * time); pt_proc_size and pt_proc_emit fill it */
} pt_proc_t;

/* Where an instruction of the procedure runs in its copy. */
typedef struct pt_map {
    uint64_t orig; /* its runtime address */
    uint64_t copy; /* the address of its relocated code in the copy */
} pt_map_t;

/*
 * The copy of P placed at AT into OUT (CAP bytes): its length, or QP_E* (QP_EUNSUPP: an
 * instruction that cannot run elsewhere - a call to the next instruction or into the
 * procedure's middle, a branch into an instruction, a privileged one; QP_ERANGE: out of
 * rel32 reach or CAP; QP_EINVAL: a site that is not a call of the runs). Every
 * instruction relocated; branches inside the runs go to the
 * copy; a direct call is made with its original return address on the stack (`call T;
 * int3; T: store the original return address over it; jmp callee`), an indirect one
 * with arch_emit_call_ret: no return address into the copy is ever left on a stack, the
 * callee returns to the original code, which the caller patches (a jump from each
 * return site to its copy, pt_proc_at); a call of SITES runs its snippet first (a
 * branch to the call lands before the snippet). A jcc leaving the procedure goes to a stub after
 * the body (the leave snippet, a jmp to its target). An indirect jump of P's unknown
 * list is translated where it runs (arch_emit_jmp_xlate, a stub and a table after the
 * stubs): a target that is an instruction of P goes to its copy, any other runs the
 * leave snippet (if the jump is chosen, or any exit is: no list can name it) and goes
 * where the jump went; so no such jump ever lands in
 * the original code, whose patched bytes it could split. MAP (MAPCAP entries, at least the
 * number of instructions: PT_PROC_MAPCAP): every instruction's copy address, by
 * original address; *NMAP their number.
 */
int
pt_proc_emit(const pt_proc_t *p, uint64_t at, uint8_t *out /*OUT*/, size_t cap,
    pt_map_t *map /*OUT*/, size_t mapcap, size_t *nmap /*OUT*/);

/* Enough map entries for P: its bytes (an instruction has one at least). */
size_t
pt_proc_mapcap(const pt_proc_t *p);

/* The copy address of the instruction at ORIG in MAP (N entries, sorted by orig), or 0. */
uint64_t
pt_proc_at(const pt_map_t *map, size_t n, uint64_t orig);

/* An upper bound of pt_proc_emit's length for P with snippets of at most SNIP bytes. */
size_t
pt_proc_size(const pt_proc_t *p, size_t snip);

/*****************************************************************************
 * A shared library's start that points its own PLT at the moved code
 */

/*
 * The bytes of arch_emit_got_fix's start (arch/arch.h says what it does), run at ADDR,
 * for the N entries E: the ISA's code, its header (NEXT, RELRO_LO and RELRO_HI as
 * there), then the entries sorted by slot (the same input gives the same bytes), into
 * OUT (CAP bytes). Returns the length, or QP_EINVAL (CAP too small: pt_got_fix_size),
 * QP_EUNSUPP (the ISA has none).
 */
int
pt_got_fix_emit(const arch_isa_t *isa, uint64_t addr, const arch_got_fix_entry_t *e,
    size_t n, uint64_t relro_lo, uint64_t relro_hi, uint64_t next, uint8_t *out /*OUT*/,
    size_t cap);

/* The length pt_got_fix_emit needs for N entries, or 0 when the ISA has no such start. */
size_t
pt_got_fix_size(const arch_isa_t *isa, size_t n);

#endif
