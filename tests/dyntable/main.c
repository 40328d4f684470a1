/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * A procedure with a jump table relocated whole (tests/dyn-table.sh): dyn --time once
 * refused it ("a jump table (its targets would run the original code)"). Written in
 * assembly so that its shape does not depend on the compiler:
 *  sw(x, ms)  a PIC jump table (lea; movslq; add; jmp *) over x = 0..3, else -1; case 1
 *             calls sleep_ms(ms) (a return site in the copy); returns 10 + x. jumper3
 *             jumps into its ret path, so it cannot be timed in place: relocated, each
 *             target of the table gets a jump into the copy (the table is data: as it
 *             was).
 * `prog N MS` runs N rounds of sw(i % 5, MS), each followed by a sleep of 3 x MS outside
 * it (a timer left running would count those), and jumper3(); checks every result and
 * prints "ok n=N". `prog wait FILE` does rounds (MS 1) until FILE exists, then prints
 * "ok same" when every round was right.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

long sw(long x, long ms);
long jumper3(void);

__attribute__((noinline, used)) void
sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

__asm__(".text\n"
        ".globl tfill_a\n.type tfill_a,@function\n"
        "tfill_a:\n"
        ".rept 40\nlea 1(%rax),%rax\n.endr\n"
        "ret\n"
        ".size tfill_a,.-tfill_a\n"
        ".globl sw\n.type sw,@function\n"
        "sw:\n"
        "push %rbx\n"
        "sub $16,%rsp\n"
        "mov %rsi,%rbx\n"
        "cmp $3,%rdi\n"
        "ja .Lsw_def\n"
        "lea .Lsw_tab(%rip),%rdx\n"
        "movslq (%rdx,%rdi,4),%rax\n"
        "add %rdx,%rax\n"
        "jmp *%rax\n"
        ".Lsw_0:\n"
        "mov $10,%eax\n"
        "jmp .Lsw_out\n"
        ".Lsw_1:\n"
        "mov %rbx,%rdi\n"
        "call sleep_ms\n"
        "mov $11,%eax\n"
        "jmp .Lsw_out\n"
        ".Lsw_2:\n"
        "mov $12,%eax\n"
        "jmp .Lsw_out\n"
        ".Lsw_3:\n"
        "mov $13,%eax\n"
        "jmp .Lsw_out\n"
        ".Lsw_def:\n"
        "mov $-1,%rax\n"
        ".Lsw_out:\n"
        "add $16,%rsp\n"
        "pop %rbx\n"
        "ret\n"
        ".size sw,.-sw\n"
        ".globl jumper3\n.type jumper3,@function\n"
        "jumper3:\n"
        "push %rbx\n"
        "sub $16,%rsp\n"
        "xor %eax,%eax\n"
        "jmp .Lsw_out\n"
        ".size jumper3,.-jumper3\n"
        ".globl tfill_b\n.type tfill_b,@function\n"
        "tfill_b:\n"
        ".rept 40\nlea 1(%rax),%rax\n.endr\n"
        "ret\n"
        ".size tfill_b,.-tfill_b\n"
        ".section .rodata\n"
        ".balign 4\n"
        ".Lsw_tab:\n"
        ".long .Lsw_0-.Lsw_tab, .Lsw_1-.Lsw_tab, .Lsw_2-.Lsw_tab, .Lsw_3-.Lsw_tab\n"
        ".text\n");

/* N rounds with sleeps of MS: 0 when every result is right. */
static int
rounds(long n, long ms)
{
    int bad = 0;
    for (long i = 0; i < n; i++) {
        long x = i % 5;
        bad |= sw(x, ms) != (x < 4 ? 10 + x : -1);
        sleep_ms(3 * ms);
        bad |= jumper3() != 0;
    }
    return bad;
}

int
main(int argc, char **argv)
{
    if (argc == 3 && argv[1][0] == 'w') { /* wait FILE */
        int bad = 0;
        while (access(argv[2], F_OK) != 0)
            bad |= rounds(5, 1);
        printf("ok %s\n", bad ? "differs" : "same");
        return bad;
    }
    if (argc != 3)
        return 2;
    long n = atol(argv[1]);
    if (rounds(n, atol(argv[2])) != 0) {
        printf("wrong results\n");
        return 1;
    }
    printf("ok n=%ld\n", n);
    return 0;
}
