/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Procedures dyn --time refused in place and now relocates whole (tests/dyn-reloc.sh),
 * written in assembly so that their shape does not depend on the compiler:
 *  me        other code jumps into its middle (jumper lands on its `xor; pop; ret`
 *            path); me(ms) calls work(ms), which calls jumper first and then sleeps: a
 *            timer stopped by jumper's pass through me's ret would miss the sleep;
 *  sc        its return site after the call is a 2-byte `pop; ret` with its other
 *            return block right after it and no padding within a short jump's reach
 *            (fillers around it): in place its exits do not fit; the return site's
 *            jump into the copy covers the next block;
 *  lp        a loop around a call (the callee returns into the copy every time),
 *            then a call whose return site is a 4-byte `pop; pop; pop; ret` followed
 *            by its zero path: in place its exit does not fit;
 *  spin      a leaf loop jumped into by spin_j (on its ret): in `wait` mode the
 *            program is mostly inside its copy when dyn leaves;
 *  se        its entry block is a 2-byte xor with no padding in reach: entered by a
 *            jmp rel8 to a jump in a slot of its own original code.
 * `prog N MS` calls me(MS) N times and me(0) N/2 times, sc(MS) N times and sc(0) N/2
 * times, lp(3) and lp(0) N times each (3 calls of tick), spin(1000) and se(5) N times, checks every result and prints
 * "ok n=N"; `prog wait FILE` does so in rounds of one with spin(3e8) (mostly inside
 * spin) until FILE exists, then prints "ok same" if every round was right.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

long me(long ms);
long jumper(void);
long sc(long ms);
long lp(long n);
long spin(long n);
long spin_j(long x);
long se(long n);

static volatile long ticks;

__attribute__((noinline, used)) void
sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* me's callee: through me's middle first (jumper returns 0), then the sleep. */
__attribute__((noinline, used)) long
work(long ms)
{
    long r = jumper();
    sleep_ms(ms);
    return r;
}

__attribute__((noinline, used)) void
tick(void)
{
    ticks++;
}

__attribute__((noinline, used)) long
ident(long x)
{
    return x;
}

__asm__(".text\n"
        ".globl filler_a\n.type filler_a,@function\n"
        "filler_a:\n"
        ".rept 40\nlea 1(%rax),%rax\n.endr\n"
        "ret\n"
        ".size filler_a,.-filler_a\n"
        /* me(ms): ms ? (work(ms), 1) : 0 */
        ".globl me\n.type me,@function\n"
        "me:\n"
        "push %rbx\n"
        "test %rdi,%rdi\n"
        "je .Lme_zero\n"
        "call work\n"
        "mov $1,%eax\n"
        "pop %rbx\n"
        "ret\n"
        ".Lme_zero:\n"
        "xor %eax,%eax\n"
        "pop %rbx\n"
        "ret\n"
        ".size me,.-me\n"
        /* jumper(): me's zero path, entered in the middle */
        ".globl jumper\n.type jumper,@function\n"
        "jumper:\n"
        "push %rbx\n"
        "jmp .Lme_zero\n"
        ".size jumper,.-jumper\n"
        ".globl filler_b\n.type filler_b,@function\n"
        "filler_b:\n"
        ".rept 40\nlea 1(%rax),%rax\n.endr\n"
        "ret\n"
        ".size filler_b,.-filler_b\n"
        /* sc(ms): ms ? (sleep_ms(ms), ms) : 0, its return site `pop; ret` */
        ".globl sc\n.type sc,@function\n"
        "sc:\n"
        "push %rbx\n"
        "mov %rdi,%rbx\n"
        "test %rdi,%rdi\n"
        "je .Lsc_zero\n"
        "call sleep_ms\n"
        "mov %rbx,%rax\n"
        "pop %rbx\n"
        "ret\n"
        ".Lsc_zero:\n"
        "xor %eax,%eax\n"
        "pop %rbx\n"
        "ret\n"
        ".size sc,.-sc\n"
        ".globl filler_c\n.type filler_c,@function\n"
        "filler_c:\n"
        ".rept 40\nlea 1(%rax),%rax\n.endr\n"
        "ret\n"
        ".size filler_c,.-filler_c\n"
        /* lp(n): n calls of tick in a loop (its return site `dec; jne`), then
         * ident(n) (its return site the 4-byte `pop; pop; pop; ret`, the zero path
         * right after it) */
        ".globl lp\n.type lp,@function\n"
        "lp:\n"
        "push %rbx\n"
        "push %rbp\n"
        "push %rax\n"
        "mov %rdi,%rbx\n"
        "mov %rdi,%rbp\n"
        "test %rdi,%rdi\n"
        "jle .Llp_zero\n"
        ".Llp_loop:\n"
        "call tick\n"
        "dec %rbx\n"
        "jne .Llp_loop\n"
        "mov %rbp,%rdi\n"
        "call ident\n"
        "pop %rcx\n"
        "pop %rbp\n"
        "pop %rbx\n"
        "ret\n"
        ".Llp_zero:\n"
        "xor %eax,%eax\n"
        "pop %rcx\n"
        "pop %rbp\n"
        "pop %rbx\n"
        "ret\n"
        ".size lp,.-lp\n"
        /* spin(n): n turns of a loop, returns n; spin_j(x) jumps into its ret */
        ".globl spin\n.type spin,@function\n"
        "spin:\n"
        "mov %rdi,%rax\n"
        "mov %rdi,%rcx\n"
        "test %rcx,%rcx\n"
        "je .Lspin_tail\n"
        ".Lspin_loop:\n"
        "dec %rcx\n"
        "jne .Lspin_loop\n"
        ".Lspin_tail:\n"
        "ret\n"
        ".size spin,.-spin\n"
        ".globl spin_j\n.type spin_j,@function\n"
        "spin_j:\n"
        "mov %rdi,%rax\n"
        "jmp .Lspin_tail\n"
        ".size spin_j,.-spin_j\n"
        /* se(n) = n + ... + 1: its entry block is the 2-byte xor (a loop comes back
         * after it), with no padding in reach */
        ".globl se\n.type se,@function\n"
        "se:\n"
        "xor %eax,%eax\n"
        ".Lse_loop:\n"
        "add %rdi,%rax\n"
        "dec %rdi\n"
        "jg .Lse_loop\n"
        "ret\n"
        ".size se,.-se\n"
        ".globl filler_d\n.type filler_d,@function\n"
        "filler_d:\n"
        ".rept 40\nlea 1(%rax),%rax\n.endr\n"
        "ret\n"
        ".size filler_d,.-filler_d\n");

/* N rounds with sleeps of MS and SPIN turns of spin: 0 when every result is right. */
static int
rounds(long n, long ms, long turns)
{
    int bad = 0;
    for (long i = 0; i < n; i++) {
        bad |= spin(turns) != turns || spin_j(i) != i || se(5) != 15;
        bad |= me(ms) != 1 || sc(ms) != ms;
        if (i % 2 == 0)
            bad |= me(0) != 0 || sc(0) != 0;
        long t0 = ticks;
        bad |= lp(3) != 3 || ticks != t0 + 3 || lp(0) != 0;
    }
    bad |= jumper() != 0;
    return bad;
}

int
main(int argc, char **argv)
{
    long a = 0;
    if (argc == 3 && argv[1][0] == 'w') { /* wait FILE */
        int bad = 0;
        while (access(argv[2], F_OK) != 0)
            bad |= rounds(1, 1, 300000000);
        printf("ok %s\n", bad ? "differs" : "same");
        return bad;
    }
    if (argc != 3)
        return 2;
    a = atol(argv[1]);
    if (rounds(a, atol(argv[2]), 1000) != 0) {
        printf("wrong results\n");
        return 1;
    }
    printf("ok n=%ld\n", a);
    return 0;
}
