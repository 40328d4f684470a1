/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * An address the program holds inside a block, under the block's redirect
 * (tests/xlate.sh): f's entry gets a 5-byte redirect, and main calls f at .Lmid, 3 bytes
 * further, through a pointer that get_mid takes with a `lea`. Entered there, the old code
 * runs (no redirect is at .Lmid): it must be the old code, not the middle of the redirect's
 * jump, so f stays in place.
 */
#include <stdio.h>

long f(long x);
void *get_mid(void);
__asm__(".text\n.globl f\n.type f,@function\n"
        "f:\n"
        "  mov %rdi,%rax\n" /* 3 bytes: .Lmid is inside the entry's redirect */
        ".Lmid:\n"
        "  add $5,%rax\n"
        "  ret\n"
        ".size f,.-f\n"
        ".globl get_mid\n.type get_mid,@function\n"
        "get_mid:\n"
        "  lea .Lmid(%rip),%rax\n"
        "  ret\n"
        ".size get_mid,.-get_mid\n");

int
main(void)
{
    long s = 0, r;
    void *mid = get_mid();
    for (int i = 0; i < 10; i++)
        s += f(i);
    /* f from .Lmid with %rax = 7: 12 */
    __asm__ volatile("mov $7,%%eax\n\tcall *%%rsi"
                     : "=a"(r)
                     : "S"(mid)
                     : "rdi", "rdx", "rcx", "r8", "r9", "r10", "r11", "memory", "cc");
    printf("%ld %ld\n", s, r);
    return 0;
}
