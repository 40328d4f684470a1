/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Procedures for tests/check_livepatch.c (assembly, so that the compiler cannot change
 * their shapes):
 *  both(x)     x + 1, one block (an entry, its block and its first instruction at one
 *              address);
 *  twoway(x)   x >= 0 ? x + 2 : -x: a block and the branch's edge into a block whose
 *              first instruction also gets a point;
 *  loopcall(n) calls tick n times: its loop header is `mov; call` (a call in the bytes
 *              a block's jump replaces);
 *  ret_only()  a `ret` alone (its entry and its exit in one byte).
 * `patch_prog N` calls each N times (twoway with i and -i-1: N each way), then prints
 * the sum of their results and tick's count.
 */
#include <stdio.h>
#include <stdlib.h>

long both(long);
long twoway(long);
long loopcall(long);
void ret_only(void);
long ticks;

__asm__(".text\n"
        ".p2align 4\n"
        ".globl both\n.type both,@function\n"
        "both:\n"
        "    mov %rdi,%rax\n"
        "    add $1,%rax\n"
        "    ret\n"
        ".size both,.-both\n"
        ".p2align 4\n"
        ".globl twoway\n.type twoway,@function\n"
        "twoway:\n"
        "    test %rdi,%rdi\n"
        "    js 1f\n"
        "    mov %rdi,%rax\n"
        "    add $2,%rax\n"
        "    ret\n"
        "1:  mov %rdi,%rax\n"
        "    neg %rax\n"
        "    ret\n"
        ".size twoway,.-twoway\n"
        ".p2align 4\n"
        ".globl tick\n.type tick,@function\n"
        "tick:\n"
        "    addq $1,ticks(%rip)\n"
        "    ret\n"
        ".size tick,.-tick\n"
        ".p2align 4\n"
        ".globl loopcall\n.type loopcall,@function\n"
        "loopcall:\n"
        "    push %rbx\n"
        "    mov %rdi,%rbx\n"
        "2:  mov %rbx,%rdi\n"
        "    call tick\n"
        "    dec %rbx\n"
        "    jnz 2b\n"
        "    mov %rdi,%rax\n"
        "    pop %rbx\n"
        "    ret\n"
        ".size loopcall,.-loopcall\n"
        ".p2align 4\n"
        ".globl ret_only\n.type ret_only,@function\n"
        "ret_only:\n"
        "    ret\n"
        ".size ret_only,.-ret_only\n"
        ".p2align 4\n");

int
main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 10, sum = 0;
    for (long i = 0; i < n; i++) {
        sum += both(i);
        sum += twoway(i);
        sum += twoway(-i - 1);
        sum += loopcall(3);
        ret_only();
    }
    printf("sum=%ld ticks=%ld\n", sum, ticks);
    return 0;
}
