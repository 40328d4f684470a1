/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Procedures whose last instruction is a call that never returns (tests/dyn-noret.sh):
 * dyn --time once refused them ("a call returns into another procedure's code"), and -e
 * found "no exit to patch" in one that has no ret. Written in assembly so that their
 * shape does not depend on the compiler; raise_err longjmps back to main:
 *  nr(ms, r)      sleeps MS, then returns 0, or with R raises R (its last instruction
 *                 `call raise_err`, the next procedure's code right after it): timed in
 *                 place, the timer stopped before that call;
 *  nr_rel(ms, r)  the same, and jumper2 jumps into its ret path: relocated whole, the
 *                 copy's leave snippet before the call;
 *  die(r)         raises R: no ret at all, its only exit the call.
 * `prog N MS` runs N rounds: nr(MS, i & 1), nr_rel(MS, i & 1), die(1) when i % 4 == 0,
 * jumper2(), each followed by a sleep of 3 x MS outside them (a timer left running by a
 * raise would count it); checks every result and prints "ok n=N raised=R" (R: raises).
 * `prog wait FILE` does rounds of one (MS 1) until FILE exists, then prints "ok same"
 * when every round was right.
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

long nr(long ms, long r);
long nr_rel(long ms, long r);
long jumper2(void);
long die(long r);

static jmp_buf env;

__attribute__((noinline, used)) void
sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

__attribute__((noinline, noreturn, used)) void
raise_err(long r)
{
    longjmp(env, (int)r);
}

__asm__(".text\n"
        ".globl nfill_a\n.type nfill_a,@function\n"
        "nfill_a:\n"
        ".rept 40\nlea 1(%rax),%rax\n.endr\n"
        "ret\n"
        ".size nfill_a,.-nfill_a\n"
        /* nr(ms, r): sleep_ms(ms); r ? raise_err(r) : 0 */
        ".globl nr\n.type nr,@function\n"
        "nr:\n"
        "push %rbx\n"
        "sub $16,%rsp\n"
        "mov %rsi,%rbx\n"
        "call sleep_ms\n"
        "test %rbx,%rbx\n"
        "jne .Lnr_raise\n"
        "xor %eax,%eax\n"
        "add $16,%rsp\n"
        "pop %rbx\n"
        "ret\n"
        ".Lnr_raise:\n"
        "mov %rbx,%rdi\n"
        "call raise_err\n"
        ".size nr,.-nr\n"
        /* die(r): raise_err(r), no ret */
        ".globl die\n.type die,@function\n"
        "die:\n"
        "push %rbx\n"
        "mov %rdi,%rbx\n"
        "mov %rbx,%rdi\n"
        "call raise_err\n"
        ".size die,.-die\n"
        /* nr_rel: as nr; jumper2 jumps into its ret path */
        ".globl nr_rel\n.type nr_rel,@function\n"
        "nr_rel:\n"
        "push %rbx\n"
        "sub $16,%rsp\n"
        "mov %rsi,%rbx\n"
        "call sleep_ms\n"
        "test %rbx,%rbx\n"
        "jne .Lnrr_raise\n"
        ".Lnrr_ret:\n"
        "xor %eax,%eax\n"
        "add $16,%rsp\n"
        "pop %rbx\n"
        "ret\n"
        ".Lnrr_raise:\n"
        "mov %rbx,%rdi\n"
        "call raise_err\n"
        ".size nr_rel,.-nr_rel\n"
        ".globl jumper2\n.type jumper2,@function\n"
        "jumper2:\n"
        "push %rbx\n"
        "sub $16,%rsp\n"
        "jmp .Lnrr_ret\n"
        ".size jumper2,.-jumper2\n"
        ".globl nfill_b\n.type nfill_b,@function\n"
        "nfill_b:\n"
        ".rept 40\nlea 1(%rax),%rax\n.endr\n"
        "ret\n"
        ".size nfill_b,.-nfill_b\n");

/* One call of F(MS, R) under setjmp: 1 when it raised R, 0 when it returned 0, else
 * -1; then a sleep of 3 x MS outside. */
static int
one(long (*f)(long, long), long ms, long r)
{
    volatile int got;
    int v = setjmp(env);
    if (v == 0)
        got = f(ms, r) == 0 && r == 0 ? 0 : -1;
    else
        got = v == r ? 1 : -1;
    sleep_ms(3 * ms);
    return got;
}

static long
die2(long ms, long r)
{
    (void)ms;
    return die(r);
}

/* N rounds with sleeps of MS; the raises in *RAISED; 0 when every result is right. */
static int
rounds(long n, long ms, long *raised)
{
    int bad = 0;
    for (long i = 0; i < n; i++) {
        int a = one(nr, ms, i & 1), b = one(nr_rel, ms, i & 1);
        bad |= a < 0 || b < 0 || jumper2() != 0;
        *raised += a + b;
        if (i % 4 == 0) {
            int c = one(die2, 0, 1);
            bad |= c != 1;
            *raised += c;
        }
    }
    return bad;
}

int
main(int argc, char **argv)
{
    long raised = 0;
    if (argc == 3 && argv[1][0] == 'w') { /* wait FILE */
        int bad = 0;
        while (access(argv[2], F_OK) != 0)
            bad |= rounds(1, 1, &raised);
        printf("ok %s\n", bad ? "differs" : "same");
        return bad;
    }
    if (argc != 3)
        return 2;
    long n = atol(argv[1]);
    if (rounds(n, atol(argv[2]), &raised) != 0) {
        printf("wrong results\n");
        return 1;
    }
    printf("ok n=%ld raised=%ld\n", n, raised);
    return 0;
}
