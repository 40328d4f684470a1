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
        .section .note.GNU-stack,"",@progbits
