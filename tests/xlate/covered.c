/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * A redirect over a block that a jump translated at run time reaches (tests/xlate.sh;
 * chromium 156's renderer crashed so). dispatch() jumps through a table whose base it
 * loads from memory, so the analysis knows none of its targets: the jump is translated
 * at run time and a miss (any target that is not a procedure's entry) runs the old code.
 * Its cases are found by sweeping the procedure's unreached bytes: .Lcase1 and .Lcase2
 * get redirects. .Lcase2 is 2 bytes long and falls into .Ljoin, which .Lcase1 reaches by
 * a jump (so it is no swept entry and has no redirect of its own) and which is also case
 * 0 of the table. A 5-byte redirect at .Lcase2 covers .Ljoin's first bytes: a miss there
 * ran the middle of that jump instruction (a crash), unless the procedure stays.
 */
#include <stdio.h>

long dispatch(long sel);
__asm__(".text\n.globl dispatch\n.type dispatch,@function\n"
        "dispatch:\n"
        "  mov $100,%eax\n"
        "  mov .Ltabp(%rip),%rsi\n"
        "  movzbl %dil,%edi\n"
        "  dec %edi\n"
        "  movslq (%rsi,%rdi,4),%rdi\n"
        "  add %rsi,%rdi\n"
        "  jmp *%rdi\n"
        ".Lcase1:\n"
        "  mov $10,%eax\n"
        "  jmp .Ljoin\n"
        ".p2align 3\n"
        ".Lcase2:\n"
        "  xor %eax,%eax\n"
        ".Ljoin:\n"
        "  add $1,%eax\n"
        "  ret\n"
        ".size dispatch,.-dispatch\n"
        ".section .rodata\n"
        ".p2align 2\n"
        ".Ltable:\n"
        "  .long .Ljoin-.Ltable, .Lcase1-.Ltable, .Lcase2-.Ltable\n"
        ".data\n"
        ".p2align 3\n"
        ".Ltabp:\n"
        "  .quad .Ltable\n"
        ".text\n");

int
main(void)
{
    long s[4] = { 0 };
    for (int i = 0; i < 30; i++)
        s[1 + i % 3] += dispatch(1 + i % 3);
    printf("%ld %ld %ld\n", s[1], s[2], s[3]);
    return 0;
}
