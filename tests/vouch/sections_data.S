/* A function and, after an alignment's nops in the same section, a table that decodes
 * as a function (mov %rdi,%rax; ret): data in code, as assembler files keep it. */
        .section .text.sections_asm,"ax",@progbits
        .globl sections_fn
        .p2align 4
sections_fn:
        lea 1(%rdi), %rax
        ret
        .p2align 4
        .globl sections_table
sections_table:
        .byte 0x48, 0x89, 0xf8, 0xc3, 0x48, 0x8d, 0x47, 0x01, 0xc3, 0x90, 0x90, 0x90, 0x48, 0x31, 0xc0, 0xc3

/* A function whose last instruction calls abort, 32 bytes, and right after it, with no
 * padding, one that sets up its frame (a lea's address only): it starts like a function. */
        .section .text.sections_noret,"ax",@progbits
        .p2align 4
        .globl sections_check
sections_check:
        cmp $1000000, %edi
        jge 1f
        lea 2(%rdi), %eax
        ret
        .fill 15, 1, 0x90
1:      call abort@PLT
        .globl sections_after_call
sections_after_call:
        push %rbp
        mov %rsp, %rbp
        lea 5(%rdi), %eax
        pop %rbp
        ret
        .section .note.GNU-stack,"",@progbits
