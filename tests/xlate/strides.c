/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * An interpreter whose handlers sit at fixed 32-byte strides (tests/xlate.sh): the
 * dispatch jumps to base + 32 * op, a target no table describes, so the analysis cannot
 * know it; the handlers are only reached that way. run() executes 1,000 opcodes ten times;
 * main prints how often each opcode ran, the truth for the handlers' blocks. tabled()
 * jumps the same way, and reads bytes of its own that decode as code (`mov $42,%eax;
 * ret`) but are its data: they must keep their value.
 */
#include <stdio.h>

long run(const unsigned char *code, long n);
__asm__(".text\n.globl run\n.type run,@function\n"
        "run:\n"
        "  xor %eax,%eax\n"
        "  xor %ecx,%ecx\n"
        "  lea .Lhandlers(%rip),%r8\n"
        ".Lnext:\n"
        "  cmp %rsi,%rcx\n"
        "  jae .Ldone\n"
        "  movzbl (%rdi,%rcx),%edx\n"
        "  inc %rcx\n"
        "  shl $5,%rdx\n"
        "  add %r8,%rdx\n"
        "  jmp *%rdx\n"
        ".Ldone:\n"
        "  ret\n"
        ".p2align 5\n"
        ".Lhandlers:\n"
        "  add $1,%rax\n  jmp .Lnext\n"
        ".p2align 5\n"
        "  add %rax,%rax\n  jmp .Lnext\n"
        ".p2align 5\n"
        "  sub $3,%rax\n  jmp .Lnext\n"
        ".p2align 5\n"
        "  imul $3,%rax,%rax\n  and $0xffffff,%rax\n  jmp .Lnext\n"
        ".size run,.-run\n");

long tabled(long i);
__asm__(".text\n.globl tabled\n.type tabled,@function\n"
        "tabled:\n"
        "  lea .Ldat(%rip),%rcx\n"
        "  mov (%rcx),%eax\n"
        "  lea .Lhalves(%rip),%rdx\n"
        "  and $1,%edi\n"
        "  shl $4,%edi\n"
        "  add %rdi,%rdx\n"
        "  jmp *%rdx\n"
        ".p2align 4\n"
        ".Lhalves:\n"
        "  add $1,%eax\n  ret\n"
        ".p2align 4\n"
        "  add $2,%eax\n  ret\n"
        ".p2align 4\n"
        ".Ldat:\n"
        "  .byte 0xb8,0x2a,0,0,0,0xc3\n"
        ".size tabled,.-tabled\n");

int
main(void)
{
    unsigned char code[1000];
    long ops[4] = { 0 }, s = 0;
    for (int i = 0; i < 1000; i++)
        ops[code[i] = (unsigned char)((i * 7 + i / 3) % 4)]++;
    for (int k = 0; k < 10; k++)
        s += run(code, 1000);
    printf("%ld %ld %ld %ld %ld\n", s, 10 * ops[0], 10 * ops[1], 10 * ops[2], 10 * ops[3]);
    printf("%ld %ld\n", tabled(0), tabled(1));
    return 0;
}
