/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The runtime's ways in on AArch64 (runtime/qprt_entry.S is x86-64's; same sections, so
 * qprt.ld puts each at the offset qprt.h names). The start and the hooks keep every
 * general register and NZCV: the program's entry code may rely on any register the
 * kernel or the dynamic linker set (x0 holds the dynamic linker's fini function), and
 * hooks run in the middle of a procedure. The runtime is built -mgeneral-regs-only, so
 * the SIMD&FP registers are never touched. Every entry begins with `bti c` (a hint:
 * a nop without BTI), so a BTI-guarded program may reach it with blr.
 *
 * Hooks are called by the 12-byte snippet
 *     stp x29, x30, [sp, #-16]!; bl HOOK; ldp x29, x30, [sp], #16
 * (AAPCS64 has no red zone on Linux: nothing below sp is live; sp stays 16-aligned);
 * the exit dump (runtime/qprt_isa.h, dump_regs) relies on that shape.
 */
/*
 * The frame: x0..x30, NZCV and the sp before it: 34 slots, 272 bytes, x0 at [sp]. Each
 * entry has 128 bytes (qprt.ld), too few for 38 loads and stores: an entry allocates the
 * frame and saves x30 itself, and qprt_save_rest / qprt_restore_rest (called with bl,
 * so x30 is theirs to use) do the rest.
 */
#define FRAME 272
    .text
    .globl  qprt_save_rest
    .hidden qprt_save_rest
qprt_save_rest:
    stp     x0, x1, [sp, #0]
    stp     x2, x3, [sp, #16]
    stp     x4, x5, [sp, #32]
    stp     x6, x7, [sp, #48]
    stp     x8, x9, [sp, #64]
    stp     x10, x11, [sp, #80]
    stp     x12, x13, [sp, #96]
    stp     x14, x15, [sp, #112]
    stp     x16, x17, [sp, #128]
    stp     x18, x19, [sp, #144]
    stp     x20, x21, [sp, #160]
    stp     x22, x23, [sp, #176]
    stp     x24, x25, [sp, #192]
    stp     x26, x27, [sp, #208]
    stp     x28, x29, [sp, #224]
    mrs     x0, nzcv
    str     x0, [sp, #248]
    add     x0, sp, #FRAME
    str     x0, [sp, #256]
    ret
    .globl  qprt_restore_rest
    .hidden qprt_restore_rest
qprt_restore_rest:
    ldr     x0, [sp, #248]
    msr     nzcv, x0
    ldp     x0, x1, [sp, #0]
    ldp     x2, x3, [sp, #16]
    ldp     x4, x5, [sp, #32]
    ldp     x6, x7, [sp, #48]
    ldp     x8, x9, [sp, #64]
    ldp     x10, x11, [sp, #80]
    ldp     x12, x13, [sp, #96]
    ldp     x14, x15, [sp, #112]
    ldp     x16, x17, [sp, #128]
    ldp     x18, x19, [sp, #144]
    ldp     x20, x21, [sp, #160]
    ldp     x22, x23, [sp, #176]
    ldp     x24, x25, [sp, #192]
    ldp     x26, x27, [sp, #208]
    ldp     x28, x29, [sp, #224]
    ret

    .macro SAVE_ALL
    sub     sp, sp, #FRAME      /* sub, not subs: NZCV stays */
    str     x30, [sp, #240]
    bl      qprt_save_rest
    .endm
    .macro RESTORE_ALL
    bl      qprt_restore_rest
    ldr     x30, [sp, #240]
    add     sp, sp, #FRAME
    .endm
/* A hook: every register kept around a call of FN (its argument: the saved frame). */
    .macro HOOK name, fn
    .globl  \name
    .hidden \name
\name:
    hint    #34                 /* bti c */
    SAVE_ALL
    mov     x0, sp
    bl      \fn
    RESTORE_ALL
    ret
    .endm

    .section .qprt.start,"ax"
    .globl qprt_start
    .hidden qprt_start
/* The new e_entry: sp is the initial stack (argc, argv, envp, auxv), 16-aligned. */
qprt_start:
    hint    #34
    SAVE_ALL
    add     x0, sp, #FRAME      /* the initial stack */
    bl      qprt_init           /* returns the original entry's runtime address */
    str     x0, [sp, #128]      /* restored into x16 (IP0): free at an entry point, */
    RESTORE_ALL                 /* and a br through it may land on bti c */
    br      x16

    .section .qprt.hook,"ax"
    HOOK qprt_exit_hook, qprt_exit_dump
    .section .qprt.fork,"ax"
/* After every call or system call that may have forked. */
    HOOK qprt_fork_hook, qprt_after_fork
    .section .qprt.thread,"ax"
/* Before every call that may start a thread. */
    HOOK qprt_thread_hook, qprt_before_thread
    .section .qprt.exec,"ax"
/* After every call to an exec function: it returned, so the exec failed. */
    HOOK qprt_exec_hook, qprt_exec_failed

    .section .qprt.libinit,"ax"
    .globl qprt_lib_start
    .hidden qprt_lib_start
/* A rewritten shared library's DT_INIT, called by the dynamic linker as a function:
 * init(argc, argv, envp). Starts the runtime, then tail-calls the library's own DT_INIT,
 * if it had one, with the same arguments and return address. */
qprt_lib_start:
    hint    #34
    stp     x29, x30, [sp, #-48]!
    mov     x29, sp
    stp     x0, x1, [sp, #16]
    str     x2, [sp, #32]
    bl      qprt_lib_init       /* (argc, argv, envp): the original DT_INIT, or 0 */
    mov     x16, x0
    ldp     x0, x1, [sp, #16]
    ldr     x2, [sp, #32]
    ldp     x29, x30, [sp], #48
    cbz     x16, 1f
    br      x16
1:  ret

    .section .qprt.trace,"ax"
/* Control-flow tracing is x86-64 only: nothing calls this. */
    .globl qprt_trace_refill_entry
    .hidden qprt_trace_refill_entry
qprt_trace_refill_entry:
    udf     #0
    .section .note.GNU-stack,"",@progbits
