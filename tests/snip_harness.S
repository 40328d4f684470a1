/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * void snip_run(uint64_t regs[18], void *code)
 * For tests/check_snip.c: load rax..r15 (regs[0..15], hardware order; regs[4], rsp, is
 * not loaded) and the status flags (regs[16]) , fill the 128 bytes below the stack
 * pointer CODE will see with a canary, call CODE (a snippet followed by ret), then store
 * every register and the flags back into regs[0..16], and regs[17] = the number of
 * canary words that changed.
 */
    .text
    .globl snip_run
    .type snip_run, @function
snip_run:
    push    %rbx
    push    %rbp
    push    %r12
    push    %r13
    push    %r14
    push    %r15
    mov     %rdi, regs_ptr(%rip)
    mov     %rsi, code_ptr(%rip)
    /* canary: 16 words below where the call will leave %rsp (%rsp - 8) */
    mov     $0x5a5a5a5a5a5a5a5a, %rax
    mov     $16, %ecx
1:  mov     %rax, -144(%rsp,%rcx,8)
    dec     %ecx
    jnz     1b
    push    128(%rdi)
    popfq
    mov     0(%rdi), %rax
    mov     8(%rdi), %rcx
    mov     16(%rdi), %rdx
    mov     24(%rdi), %rbx
    mov     40(%rdi), %rbp
    mov     48(%rdi), %rsi
    mov     64(%rdi), %r8
    mov     72(%rdi), %r9
    mov     80(%rdi), %r10
    mov     88(%rdi), %r11
    mov     96(%rdi), %r12
    mov     104(%rdi), %r13
    mov     112(%rdi), %r14
    mov     120(%rdi), %r15
    mov     56(%rdi), %rdi
    call    *code_ptr(%rip)
    mov     %rax, saved_rax(%rip)
    pushfq                          /* at %rsp - 8: not a canary word */
    pop     saved_flags(%rip)
    mov     regs_ptr(%rip), %rax
    mov     %rcx, 8(%rax)
    mov     %rdx, 16(%rax)
    mov     %rbx, 24(%rax)
    mov     %rbp, 40(%rax)
    mov     %rsi, 48(%rax)
    mov     %rdi, 56(%rax)
    mov     %r8, 64(%rax)
    mov     %r9, 72(%rax)
    mov     %r10, 80(%rax)
    mov     %r11, 88(%rax)
    mov     %r12, 96(%rax)
    mov     %r13, 104(%rax)
    mov     %r14, 112(%rax)
    mov     %r15, 120(%rax)
    mov     saved_rax(%rip), %rcx
    mov     %rcx, 0(%rax)
    mov     saved_flags(%rip), %rcx
    mov     %rcx, 128(%rax)
    /* count the changed canary words */
    xor     %edx, %edx
    mov     $0x5a5a5a5a5a5a5a5a, %rsi
    mov     $16, %ecx
2:  cmp     %rsi, -144(%rsp,%rcx,8)
    je      3f
    inc     %rdx
3:  dec     %ecx
    jnz     2b
    mov     %rdx, 136(%rax)
    pop     %r15
    pop     %r14
    pop     %r13
    pop     %r12
    pop     %rbp
    pop     %rbx
    ret
    .size snip_run, .-snip_run

/* int64_t snip_align_probe(void): %rsp % 16 at its entry (8 when called from a stack
 * aligned to 16, as the ABI wants). */
    .globl snip_align_probe
    .type snip_align_probe, @function
snip_align_probe:
    mov     %rsp, %rax
    and     $15, %rax
    ret
    .size snip_align_probe, .-snip_align_probe

    .data
regs_ptr: .quad 0
code_ptr: .quad 0
saved_rax: .quad 0
saved_flags: .quad 0
    .section .note.GNU-stack,"",@progbits
