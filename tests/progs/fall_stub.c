/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Loops whose back edge qp counts in a taken-edge stub that falls into the loop head
 * (ED_PROBE_FALL_IN), in the two layouts the editor handles: nothing falls into the
 * head (the loop is entered by a jump to its test: fall_free_loop), and the block before
 * falls into the head (it then jumps over the stub: fall_jump_loop). tests/check_elfw.c
 * places such stubs by hand; tests/corpus.sh compares every rewrite's output with the
 * original's. The sums are printed.
 */
#include <stdio.h>
#include <stdlib.h>

#if defined(__x86_64__)
long fall_free_loop(long n);
long fall_jump_loop(long n);
__asm__(".text\n"
        ".globl fall_free_loop\n"
        ".type fall_free_loop, @function\n"
        "fall_free_loop:\n"
        ".cfi_startproc\n"
        "    xorl %eax, %eax\n"
        "    jmp 2f\n"
        "1:  addq %rdi, %rax\n"      /* the head: the block before ends in a jmp */
        "2:  subq $1, %rdi\n"
        "    jns 1b\n"
        "    ret\n"
        ".cfi_endproc\n"
        ".size fall_free_loop, .-fall_free_loop\n"
        ".globl fall_jump_loop\n"
        ".type fall_jump_loop, @function\n"
        "fall_jump_loop:\n"
        ".cfi_startproc\n"
        "    pushq %rbx\n"
        ".cfi_def_cfa_offset 16\n"
        "    xorl %eax, %eax\n"
        "    movq %rdi, %rbx\n"
        "1:  addq %rbx, %rax\n"      /* the head: the entry block falls into it */
        "    subq $1, %rbx\n"
        "    jg 1b\n"
        "    popq %rbx\n"
        ".cfi_def_cfa_offset 8\n"
        "    ret\n"
        ".cfi_endproc\n"
        ".size fall_jump_loop, .-fall_jump_loop\n");
#else
static long
fall_free_loop(long n)
{
    long s = 0;
    while (--n >= 0)
        s += n;
    return s;
}

static long
fall_jump_loop(long n)
{
    long s = 0;
    do
        s += n;
    while (--n > 0);
    return s;
}
#endif

int
main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    long a = 0, b = 0;
    for (int i = 0; i < 10; i++) {
        a += fall_free_loop(n + i);
        b += fall_jump_loop(n + i);
    }
    printf("fall_free_loop %ld\nfall_jump_loop %ld\n", a, b);
    return 0;
}
