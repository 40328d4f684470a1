/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * For the cost per hit of a procedure relocated whole (bench/dyn-reloc-bench.sh, not a
 * test): `relochit inplace|reloc N` calls N times a procedure that dyn patches in place
 * (inplace_e: a 6-byte entry block) or one it relocates whole (reloc_e: a 2-byte entry
 * block, entered through a slot of its own code), both one turn of the same loop, and
 * prints the time per call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

long inplace_e(long n);
long reloc_e(long n);

__asm__(".text\n"
        ".globl fill_a\n.type fill_a,@function\nfill_a:\n"
        ".rept 40\nlea 1(%rax),%rax\n.endr\nret\n"
        ".globl inplace_e\n.type inplace_e,@function\ninplace_e:\n"
        ".byte 0x0f, 0x1f, 0x40, 0x00\n" /* nopl 0(%rax) */
        "xor %eax,%eax\n"
        ".Lip:\ndec %rdi\njg .Lip\nret\n"
        ".globl fill_b\n.type fill_b,@function\nfill_b:\n"
        ".rept 40\nlea 1(%rax),%rax\n.endr\nret\n"
        ".globl reloc_e\n.type reloc_e,@function\nreloc_e:\n"
        "xor %eax,%eax\n"
        ".Lre:\ndec %rdi\njg .Lre\nret\n"
        ".globl fill_c\n.type fill_c,@function\nfill_c:\n"
        ".rept 40\nlea 1(%rax),%rax\n.endr\nret\n");

int
main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    long (*f)(long) = strcmp(argv[1], "reloc") == 0 ? reloc_e : inplace_e;
    long n = atol(argv[2]), s = 0;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++)
        s += f(1);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)n;
    printf("%.2f ns/call\n", ns + 0 * (double)s);
    return 0;
}
