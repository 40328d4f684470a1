/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * A switch table without a bound, followed in .rodata by a word that a `lea` of the
 * same procedure forms far from its use (a hoisted base, no table's): read as the
 * table's fourth entry, that word's value leads into the middle of `mov $20,%eax`.
 * The table must end before it (tests/scantab.sh). Run with N: case 0 runs N/4 times,
 * case 1 N/4, case 2 N/2 when N is a multiple of 4.
 */
#include <stdio.h>
#include <stdlib.h>

int pick(const int *p);

__asm__(".text\n"
        ".globl pick\n"
        ".type pick, @function\n"
        "pick:\n"
        "    lea word(%rip), %rcx\n"
        "    movslq (%rdi), %rax\n"
        "    lea tab(%rip), %rdx\n"
        "    movslq (%rdx,%rax,4), %rax\n"
        "    add %rdx, %rax\n"
        "    jmp *%rax\n"
        "c0: mov (%rcx), %eax\n"
        "    sub $0x7000, %eax\n"
        "    ret\n"
        "c1: mov $20, %eax\n"
        "    ret\n"
        "c2: mov $30, %eax\n"
        "    add $0x1234, %eax\n"
        "    ret\n"
        ".size pick, .-pick\n"
        ".section .rodata\n"
        ".p2align 2\n"
        "tab: .long c0-tab, c1-tab, c2-tab\n"
        "word: .long c1+1-tab\n"
        ".text\n");

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 400;
    static const int which[4] = { 0, 1, 2, 2 };
    long sum = 0;
    for (int i = 0; i < n; i++)
        sum += pick(&which[i % 4]) & 0xff;
    printf("%ld\n", sum);
    return 0;
}
