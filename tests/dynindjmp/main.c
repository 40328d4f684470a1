/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * A live procedure with an indirect jump of unknown targets (tests/dyn-indjmp.sh): dyn
 * once refused it ("an indirect jump with unknown targets might land in its first
 * bytes", "... may leave it"). Written in assembly so that its shape does not depend on
 * the compiler:
 *  disp(x, ms)  x > 3: -1. Else `jmp *%rax` to disp + 64 + 16 x, computed (no table, no
 *               label the analysis could see):
 *               0: returns 10;
 *               1: calls sleep_ms(ms) (a return site in the copy), returns 11;
 *               2: jumps (unknown target again) back to disp + 1, the entry's second
 *                  instruction, inside the 5 bytes the entry's jump takes, with x = 0:
 *                  returns 10 (in the original, once patched, that would land inside
 *                  the jump);
 *               3: leaves through the unknown jump for leaf13 (a tail call: returns 13).
 * And three procedures back to back, no padding between them: nb_prev and nb_next (long,
 * x + 40), and between them nb_tiny, `xor %eax,%eax; ret` (3 bytes: too short for a jump,
 * no padding or code of its own for a slot within a short jump's reach: once refused,
 * "another procedure starts within 5 bytes of its entry", "no padding within reach of a
 * 2-byte jump for a 5-byte one"; its short jump now goes to a slot in nb_next's code,
 * relocated whole). Then nb_r (calls nb_prev twice; its `pop; ret` after the second
 * call too short for a jump and followed by nb_last, with no padding in reach: timed, it
 * is relocated whole, and that return site's short jump goes to a slot in nb_last's
 * code, relocated whole too) and nb_last (x + 40).
 * And loopy(n, acc) = acc + n + ... + 1, whose loop branches back to its entry (once
 * refused: "a branch inside the procedure goes back to its entry"; relocated whole, the
 * branch goes to the entry's copy, after its counter: a loop, not a call).
 * `prog N MS` runs N rounds of disp(i % 5, MS), each followed by a sleep of 3 x MS outside
 * it (a timer left running would count those), and nb_prev 3 times, nb_tiny 2 times and
 * nb_next, nb_r (nb_prev 2 more times) and nb_last once, loopy(3, i) once, one_ret 3
 * times (a lone ret between one_prev and one_next, which starts with a REX prefix) and
 * one_prev and one_next once, pe_fn(i, 2) once (a return site on a page's last byte);
 * checks every result and prints "ok n=N".
 * `prog wait FILE` does rounds (MS 1) until FILE exists, then prints "ok same" when
 * every round was right.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

long disp(long x, long ms);

__attribute__((noinline, used)) void
sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

__asm__(".text\n"
        ".globl leaf13\n.type leaf13,@function\n"
        "leaf13:\n"
        "mov $13,%eax\n"
        "ret\n"
        ".size leaf13,.-leaf13\n"
        ".balign 64, 0x90\n"
        ".globl disp\n.type disp,@function\n"
        "disp:\n"
        "push %rbx\n"
        "mov %rsi,%rbx\n"
        "mov %rdi,%rcx\n"
        "cmp $3,%rcx\n"
        "ja .Ldisp_def\n"
        "lea disp(%rip),%rax\n"
        "shl $4,%rcx\n"
        "lea 64(%rax,%rcx),%rax\n"
        "jmp *%rax\n"
        ".Ldisp_def:\n"
        "mov $-1,%rax\n"
        ".Ldisp_out:\n"
        "pop %rbx\n"
        "ret\n"
        ".balign 64, 0x90\n" /* disp + 64: x = 0 */
        "mov $10,%eax\n"
        "jmp .Ldisp_out\n"
        ".balign 16, 0x90\n" /* x = 1 */
        "mov %rbx,%rdi\n"
        "call sleep_ms\n"
        "mov $11,%eax\n"
        "jmp .Ldisp_out\n"
        ".balign 16, 0x90\n" /* x = 2: to disp + 1 with x = 0 */
        "xor %edi,%edi\n"
        "lea disp(%rip),%rax\n"
        "inc %rax\n"
        "jmp *%rax\n"
        ".balign 16, 0x90\n" /* x = 3: out, to leaf13 */
        "pop %rbx\n"
        "lea leaf13(%rip),%rax\n"
        "jmp *%rax\n"
        ".size disp,.-disp\n"
        ".balign 16, 0x90\n"
        ".globl dfill\n.type dfill,@function\n"
        "dfill:\n"
        ".rept 40\nlea 1(%rax),%rax\n.endr\n"
        "ret\n"
        ".size dfill,.-dfill\n"
        ".balign 16, 0x90\n"
        ".globl nb_prev\n.type nb_prev,@function\n"
        "nb_prev:\n"
        "mov %rdi,%rax\n"
        ".rept 40\nlea 1(%rax),%rax\n.endr\n"
        "ret\n"
        ".size nb_prev,.-nb_prev\n"
        ".globl nb_tiny\n.type nb_tiny,@function\n"
        "nb_tiny:\n"
        "xor %eax,%eax\n"
        "ret\n"
        ".size nb_tiny,.-nb_tiny\n"
        ".globl nb_next\n.type nb_next,@function\n"
        "nb_next:\n"
        "mov %rdi,%rax\n"
        ".rept 40\nlea 1(%rax),%rax\n.endr\n"
        "ret\n"
        ".size nb_next,.-nb_next\n"
        ".globl nb_r\n.type nb_r,@function\n"
        "nb_r:\n"
        "push %rbx\n"
        "call nb_prev\n"
        "call nb_prev\n"
        "pop %rbx\n"
        "ret\n"
        ".size nb_r,.-nb_r\n"
        ".globl nb_last\n.type nb_last,@function\n"
        "nb_last:\n"
        "mov %rdi,%rax\n"
        ".rept 40\nlea 1(%rax),%rax\n.endr\n"
        "ret\n"
        ".size nb_last,.-nb_last\n"
        /* A 1-byte procedure (a lone ret) between two others, the next starting with a
         * REX prefix (mov %rdi,%rax): counted through a punned jump. */
        ".globl one_prev\n.type one_prev,@function\n"
        "one_prev:\n"
        "mov %rdi,%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "ret\n"
        ".size one_prev,.-one_prev\n"
        ".globl one_ret\n.type one_ret,@function\n"
        "one_ret:\n"
        "ret\n"
        ".size one_ret,.-one_ret\n"
        ".globl one_next\n.type one_next,@function\n"
        "one_next:\n"
        "mov %rdi,%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "ret\n"
        ".size one_next,.-one_next\n"
        /* pe_fn(x, k): k + 1 rounds of x += 33, looping back to its entry (so relocated
         * whole), each calling pe_callee (a lone ret), whose return site is the last byte
         * of a page (its jump taken as a pun: the byte after it, 0x48, the displacement). */
        ".p2align 12\n"
        ".skip 4096 - 64, 0xcc\n"
        ".globl pe_fn\n.type pe_fn,@function\n"
        "pe_fn:\n"
        "mov %rdi,%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "nop\nnop\n"
        "push %rbx\n"
        "call pe_callee\n"
        "pop %rbx\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "lea 1(%rax),%rax\n"
        "dec %rsi\n"
        "js 1f\n"
        "mov %rax,%rdi\n"
        "jmp pe_fn\n"
        "1: ret\n"
        ".size pe_fn,.-pe_fn\n"
        ".p2align 4\n"
        ".globl pe_callee\n.type pe_callee,@function\n"
        "pe_callee:\n"
        "ret\n"
        ".size pe_callee,.-pe_callee\n"
        ".balign 16, 0x90\n"
        ".globl loopy\n.type loopy,@function\n"
        "loopy:\n"
        "add %rdi,%rsi\n"
        "dec %rdi\n"
        "jnz loopy\n"
        "mov %rsi,%rax\n"
        "ret\n"
        ".size loopy,.-loopy\n");

long loopy(long n, long acc);

long nb_prev(long x);
long nb_tiny(void);
long nb_next(long x);
long nb_r(long x);
long nb_last(long x);
long one_prev(long x);
void one_ret(void);
long one_next(long x);
long pe_fn(long x, long k);

static const long truth[5] = { 10, 11, 10, 13, -1 };

/* N rounds with sleeps of MS: 0 when every result is right. */
static int
rounds(long n, long ms)
{
    int bad = 0;
    for (long i = 0; i < n; i++) {
        bad |= disp(i % 5, ms) != truth[i % 5];
        sleep_ms(3 * ms);
        for (long k = 0; k < 3; k++)
            bad |= nb_prev(i + k) != i + k + 40;
        bad |= nb_tiny() != 0 || nb_tiny() != 0;
        bad |= nb_next(i) != i + 40;
        bad |= nb_r(i) != i + 40 || nb_last(i) != i + 40;
        bad |= loopy(3, i) != i + 6;
        one_ret();
        one_ret();
        one_ret();
        bad |= one_prev(i) != i + 4 || one_next(i) != i + 25;
        bad |= pe_fn(i, 2) != i + 99;
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
