/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The runtime's ways in. The start and the hooks keep every register and the flags: the
 * program's entry code may rely on any register the kernel or the dynamic linker set
 * (rdx holds the dynamic linker's fini function), and exit snippets run in the middle of
 * a procedure. A library's start is called as a function, and keeps what the ABI keeps.
 */
/* The flags and the 15 general registers: 128 bytes, %r15 at the lowest address. */
    .macro SAVE_ALL
    pushfq
    push    %rax
    push    %rbx
    push    %rcx
    push    %rdx
    push    %rsi
    push    %rdi
    push    %rbp
    push    %r8
    push    %r9
    push    %r10
    push    %r11
    push    %r12
    push    %r13
    push    %r14
    push    %r15
    .endm
    .macro RESTORE_ALL
    pop     %r15
    pop     %r14
    pop     %r13
    pop     %r12
    pop     %r11
    pop     %r10
    pop     %r9
    pop     %r8
    pop     %rbp
    pop     %rdi
    pop     %rsi
    pop     %rdx
    pop     %rcx
    pop     %rbx
    pop     %rax
    popfq
    .endm

    .section .qprt.start,"ax"
    .globl qprt_start
    .hidden qprt_start
qprt_start:
    sub     $8, %rsp            /* slot for the address to continue at */
    SAVE_ALL
    lea     136(%rsp), %rdi     /* the initial stack: argc, argv, envp, auxv */
    mov     %rsp, %rbx
    and     $-16, %rsp
    call    qprt_init           /* returns the original entry's runtime address */
    mov     %rbx, %rsp
    mov     %rax, 128(%rsp)
    RESTORE_ALL
    ret                         /* to the original entry, %rsp as the kernel left it */

    .section .qprt.hook,"ax"
    .globl qprt_exit_hook
    .hidden qprt_exit_hook
/* Called by `lea -128(%rsp),%rsp; call qprt_exit_hook; lea 128(%rsp),%rsp`. */
qprt_exit_hook:
    SAVE_ALL
    mov     %rsp, %rdi          /* the saved registers, r15 first */
    mov     %rsp, %rbx
    and     $-16, %rsp
    call    qprt_exit_dump
    mov     %rbx, %rsp
    RESTORE_ALL
    ret

    .section .qprt.fork,"ax"
    .globl qprt_fork_hook
    .hidden qprt_fork_hook
/* Called like the exit hook, after every call or system call that may have forked. */
qprt_fork_hook:
    SAVE_ALL
    mov     %rsp, %rbx
    and     $-16, %rsp
    call    qprt_after_fork
    mov     %rbx, %rsp
    RESTORE_ALL
    ret

    .section .qprt.thread,"ax"
    .globl qprt_thread_hook
    .hidden qprt_thread_hook
/* Called like the exit hook, before every call that may start a thread. */
qprt_thread_hook:
    SAVE_ALL
    mov     %rsp, %rbx
    and     $-16, %rsp
    call    qprt_before_thread
    mov     %rbx, %rsp
    RESTORE_ALL
    ret

    .section .qprt.exec,"ax"
    .globl qprt_exec_hook
    .hidden qprt_exec_hook
/* Called like the exit hook, after every call to an exec function: it returned, so the
 * exec failed and the process goes on. */
qprt_exec_hook:
    SAVE_ALL
    mov     %rsp, %rbx
    and     $-16, %rsp
    call    qprt_exec_failed
    mov     %rbx, %rsp
    RESTORE_ALL
    ret
    .section .qprt.libinit,"ax"
    .globl qprt_lib_start
    .hidden qprt_lib_start
/* A rewritten shared library's DT_INIT, called by the dynamic linker as a function:
 * init(argc, argv, envp). Starts the runtime, then tail-calls the library's own DT_INIT,
 * if it had one, with the same arguments. */
qprt_lib_start:
    push    %rdi
    push    %rsi
    push    %rdx                /* %rsp is 16-byte aligned again */
    call    qprt_lib_init       /* (argc, argv, envp): the original DT_INIT, or 0 */
    pop     %rdx
    pop     %rsi
    pop     %rdi
    test    %rax, %rax
    jz      1f
    jmp     *%rax
1:  ret

    .section .qprt.trace,"ax"
    .globl qprt_trace_refill_entry
    .hidden qprt_trace_refill_entry
/* A trace record's call when its thread's buffer is full or absent (ARCH_SN_TRACE_REC):
 * every register and the flags kept (the runtime uses no vector registers). */
qprt_trace_refill_entry:
    SAVE_ALL
    mov     %rsp, %rbx
    and     $-16, %rsp
    call    qprt_trace_refill
    mov     %rbx, %rsp
    RESTORE_ALL
    ret
    .section .note.GNU-stack,"",@progbits
