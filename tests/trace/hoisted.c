/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * A switch whose table base is loaded before its loop, far from the jump and after more
 * `lea`s of read-only data than the CFG tries at first (bash's main, at -O2, holds its
 * option switch's base in r15 so): hoisted() resolves it - no way into the jump passes another write of r15
 * after the `lea` - while clobbered() rewrites r15 on a path back into the loop, so its
 * jump stays unresolved (translated at run time); pathwin's switch block follows code of
 * another path that the linear window read (lua5.4's lexer): resolved from the path's
 * window. tests/trace.sh checks them with --dump-cfg, and the traces of the program.
 */
#include <stdio.h>
#include <stdlib.h>

const char *sink[12];
int hoisted(int n);
int clobbered(int n);
int pathwin(int n);

#define STRS                                                                             \
    "    lea .Lh0(%rip), %rax\n    mov %rax, sink(%rip)\n"                               \
    "    lea .Lh1(%rip), %rax\n    mov %rax, sink+8(%rip)\n"                             \
    "    lea .Lh2(%rip), %rax\n    mov %rax, sink+16(%rip)\n"                            \
    "    lea .Lh3(%rip), %rax\n    mov %rax, sink+24(%rip)\n"                            \
    "    lea .Lh4(%rip), %rax\n    mov %rax, sink+32(%rip)\n"                            \
    "    lea .Lh5(%rip), %rax\n    mov %rax, sink+40(%rip)\n"                            \
    "    lea .Lh6(%rip), %rax\n    mov %rax, sink+48(%rip)\n"                            \
    "    lea .Lh7(%rip), %rax\n    mov %rax, sink+56(%rip)\n"                            \
    "    lea .Lh8(%rip), %rax\n    mov %rax, sink+64(%rip)\n"

__asm__(".text\n"
        ".globl hoisted\n.type hoisted,@function\nhoisted:\n"
        "    push %r15\n    push %rbx\n" STRS
        "    lea .Ltab1(%rip), %r15\n" STRS
        "    xor %ebx, %ebx\n    mov %edi, %ecx\n"
        "1:  test %ecx, %ecx\n    je 9f\n"
        "    mov %ecx, %eax\n    and $3, %eax\n    cmp $3, %eax\n    ja 8f\n"
        "    movslq (%r15,%rax,4), %rax\n    add %r15, %rax\n    jmp *%rax\n"
        ".La0: add $1, %ebx\n    jmp 8f\n"
        ".La1: add $10, %ebx\n    jmp 8f\n"
        ".La2: add $100, %ebx\n    jmp 8f\n"
        ".La3: add $1000, %ebx\n"
        "8:  dec %ecx\n    jmp 1b\n"
        "9:  mov %ebx, %eax\n    pop %rbx\n    pop %r15\n    ret\n"
        ".size hoisted, .-hoisted\n"
        ".globl clobbered\n.type clobbered,@function\nclobbered:\n"
        "    push %r15\n    push %rbx\n" STRS
        "    lea .Ltab2(%rip), %r15\n" STRS
        "    xor %ebx, %ebx\n    mov %edi, %ecx\n"
        "1:  test %ecx, %ecx\n    je 9f\n"
        "    mov %ecx, %eax\n    and $3, %eax\n    cmp $3, %eax\n    ja 8f\n"
        "    movslq (%r15,%rax,4), %rax\n    add %r15, %rax\n    jmp *%rax\n"
        ".Lb0: add $1, %ebx\n    jmp 8f\n"
        ".Lb1: add $10, %ebx\n    jmp 8f\n"
        ".Lb2: add $100, %ebx\n    push %r15\n    pop %r15\n    jmp 8f\n" /* writes r15 */
        ".Lb3: add $1000, %ebx\n"
        "8:  dec %ecx\n    jmp 1b\n"
        "9:  mov %ebx, %eax\n    pop %rbx\n    pop %r15\n    ret\n"
        ".size clobbered, .-clobbered\n"
        /* lua5.4's lexer shape: the switch's block is entered by a jg, and follows the
         * `jbe; jmp` of another path, which the linear window read */
        ".globl pathwin\n.type pathwin,@function\npathwin:\n"
        "    push %r12\n    lea .Ltab3(%rip), %r12\n    push %rbx\n"
        "    xor %ebx, %ebx\n    mov %edi, %ecx\n"
        "1:  test %ecx, %ecx\n    je 9f\n"
        "    mov %ecx, %eax\n    and $7, %eax\n"
        "    cmp $3, %eax\n    jg 2f\n"
        "    lea 1(%rax), %edx\n    cmp $2, %edx\n    jbe 7f\n    jmp 8f\n"
        "2:  lea -4(%rax), %eax\n    cmp $3, %eax\n    ja 8f\n"
        "    movslq (%r12,%rax,4), %rax\n    add %r12, %rax\n    jmp *%rax\n"
        ".Lc0: add $1, %ebx\n    jmp 8f\n"
        ".Lc1: add $10, %ebx\n    jmp 8f\n"
        ".Lc2: add $100, %ebx\n    jmp 8f\n"
        ".Lc3: add $1000, %ebx\n    jmp 8f\n"
        "7:  add $5, %ebx\n"
        "8:  dec %ecx\n    jmp 1b\n"
        "9:  mov %ebx, %eax\n    pop %rbx\n    pop %r12\n    ret\n"
        ".size pathwin, .-pathwin\n"
        ".section .rodata\n.align 4\n"
        ".Ltab1: .long .La0-.Ltab1, .La1-.Ltab1, .La2-.Ltab1, .La3-.Ltab1\n"
        ".Ltab2: .long .Lb0-.Ltab2, .Lb1-.Ltab2, .Lb2-.Ltab2, .Lb3-.Ltab2\n"
        ".Ltab3: .long .Lc0-.Ltab3, .Lc1-.Ltab3, .Lc2-.Ltab3, .Lc3-.Ltab3\n"
        ".Lh0: .string \"h0\"\n.Lh1: .string \"h1\"\n.Lh2: .string \"h2\"\n"
        ".Lh3: .string \"h3\"\n.Lh4: .string \"h4\"\n.Lh5: .string \"h5\"\n"
        ".Lh6: .string \"h6\"\n.Lh7: .string \"h7\"\n.Lh8: .string \"h8\"\n"
        ".text\n");

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1003;
    int h = hoisted(n), c = clobbered(n), p = pathwin(n);
    printf("%d %d %d %s\n", h, c, p, sink[8]);
    return 0;
}
