/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Procedures of the shapes dyn used to refuse, for tests/dyn-shape.sh (written in
 * assembly so that the compiler cannot change them):
 *  ret_only      `ret` alone: its jump covers the padding after it;
 *  call_first    a call as its first instruction (the trampoline pushes the return
 *                address in the original code and jumps to the callee);
 *  ind_long      an indirect jump with unknown targets, first instruction of 7 bytes;
 *  ind_short     the same, first instruction of 2 bytes (a jmp rel8 inside it);
 *  timed_tail    sleeps, then tail-calls leaf (timed: the tail jump stops its timer);
 *  timed_ctail   sleeps, then a conditional tail call of leaf (jne: its timer stops
 *                only when it is taken);
 *  timed_dtail   sleeps, then a jcc to leaf that otherwise falls into leaf2 (both
 *                sides leave: the timer stops on both);
 *  quick_chk     one block, a jcc to leaf that otherwise falls into leaf3 (timed: moved
 *                whole, the timer starts and stops on both sides in one trampoline);
 *  timed_mid     sleeps, then returns through a `ret` of one byte between two blocks,
 *                reached by a jcc, a jmp and falling into it (the timer stops in each);
 *  timed_short   a call in its first bytes, and two ret blocks of 4 bytes (one before
 *                the next block: through padding; one at the end: covering padding);
 *  call_reg      `call *%rax` (2 bytes), for --calls-from;
 *  call_far      the same with no padding within 128 bytes: the jump covers the
 *                instructions after the call too (its return site).
 * `prog N` calls each N times and prints the sums; `prog wait FILE` calls them until FILE
 * exists (a second thread sits in call_first's callee most of the time), then prints
 * whether every result was right and whether its code is byte for byte as at start.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void
sleep_us(long us)
{
    struct timespec ts = { 0, us * 1000 };
    if (us > 0)
        nanosleep(&ts, NULL);
}

int
helper(int x)
{
    return x + 1;
}

volatile long slow_us = 0;

int
slow_helper(int x)
{
    sleep_us(slow_us);
    return x + 1;
}

__asm__(".text\n"
        ".p2align 4\n"
        ".globl ret_only\n.type ret_only,@function\n"
        "ret_only:\n"
        "    ret\n"
        ".size ret_only,.-ret_only\n"
        ".p2align 4\n"
        ".globl call_first\n.type call_first,@function\n"
        "call_first:\n" /* int call_first(int x): helper(x) + 1 */
        "    call helper\n"
        "    add $1,%eax\n"
        "    ret\n"
        ".size call_first,.-call_first\n"
        ".p2align 4\n"
        ".globl call_first_slow\n.type call_first_slow,@function\n"
        "call_first_slow:\n" /* int call_first_slow(int x): slow_helper(x) + 1 */
        "    call slow_helper\n"
        "    add $1,%eax\n"
        "    ret\n"
        ".size call_first_slow,.-call_first_slow\n"
        ".p2align 4\n"
        ".globl ind_long\n.type ind_long,@function\n"
        "ind_long:\n" /* int ind_long(long k): 7 (k = 0) */
        "    lea ind_long_a(%rip),%rax\n"
        "    add %rdi,%rax\n"
        "    jmp *%rax\n"
        "ind_long_a:\n"
        "    mov $7,%eax\n"
        "    ret\n"
        ".size ind_long,.-ind_long\n"
        ".p2align 4\n"
        ".globl ind_short\n.type ind_short,@function\n"
        "ind_short:\n" /* int ind_short(long k): 9 (k = 0) */
        "    push %r12\n"
        "    lea ind_short_a(%rip),%rax\n"
        "    add %rdi,%rax\n"
        "    jmp *%rax\n"
        "ind_short_a:\n"
        "    mov $9,%eax\n"
        "    pop %r12\n"
        "    ret\n"
        ".size ind_short,.-ind_short\n"
        ".fill 12,1,0xcc\n"
        ".p2align 4\n"
        ".globl leaf\n.type leaf,@function\n"
        "leaf:\n" /* int leaf(int x): 3x + 1 */
        "    lea 1(%rdi,%rdi,2),%eax\n"
        "    ret\n"
        ".size leaf,.-leaf\n"
        ".p2align 4\n"
        ".globl timed_tail\n.type timed_tail,@function\n"
        "timed_tail:\n" /* int timed_tail(int x): sleeps slow_us, then leaf(x + 1) */
        "    push %rbx\n"
        "    mov %edi,%ebx\n"
        "    mov slow_us(%rip),%rdi\n"
        "    call sleep_us\n"
        "    lea 1(%rbx),%edi\n"
        "    pop %rbx\n"
        "    jmp leaf\n"
        ".size timed_tail,.-timed_tail\n"
        ".p2align 4\n"
        ".globl timed_ctail\n.type timed_ctail,@function\n"
        "timed_ctail:\n" /* int timed_ctail(int x): sleeps, then x ? leaf(x) : 5 */
        "    push %rbx\n"
        "    mov %edi,%ebx\n"
        "    mov slow_us(%rip),%rdi\n"
        "    call sleep_us\n"
        "    mov %ebx,%edi\n"
        "    pop %rbx\n"
        "    test %edi,%edi\n"
        "    jne leaf\n"
        "    mov $5,%eax\n"
        "    ret\n"
        ".size timed_ctail,.-timed_ctail\n"
        ".p2align 4\n"
        ".globl timed_dtail\n.type timed_dtail,@function\n"
        "timed_dtail:\n" /* int timed_dtail(int x): sleeps, then x ? leaf(x) : leaf2(x) */
        "    push %rbx\n"
        "    mov %edi,%ebx\n"
        "    mov slow_us(%rip),%rdi\n"
        "    call sleep_us\n"
        "    mov %ebx,%edi\n"
        "    pop %rbx\n"
        "    test %edi,%edi\n"
        "    jne leaf\n"
        ".size timed_dtail,.-timed_dtail\n"
        ".globl leaf2\n.type leaf2,@function\n"
        "leaf2:\n" /* int leaf2(int x): 7 (timed_dtail falls into it) */
        "    mov $7,%eax\n"
        "    ret\n"
        ".size leaf2,.-leaf2\n"
        ".p2align 4\n"
        ".globl quick_chk\n.type quick_chk,@function\n"
        "quick_chk:\n" /* int quick_chk(int x, int y): x < y ? leaf(x) : leaf3() */
        "    cmp %esi,%edi\n"
        "    jl leaf\n"
        ".size quick_chk,.-quick_chk\n"
        ".globl leaf3\n.type leaf3,@function\n"
        "leaf3:\n" /* int leaf3(void): 9 (quick_chk falls into it) */
        "    mov $9,%eax\n"
        "    ret\n"
        ".size leaf3,.-leaf3\n"
        ".p2align 4\n"
        ".globl timed_mid\n.type timed_mid,@function\n"
        "timed_mid:\n" /* int timed_mid(int x): sleeps, then 1, 20 or 30 for x = 1, 2, other */
        "    push %rbx\n"
        "    mov %edi,%ebx\n"
        "    mov slow_us(%rip),%rdi\n"
        "    call sleep_us\n"
        "    mov %ebx,%eax\n"
        "    pop %rbx\n"
        "    cmp $1,%eax\n"
        "    je 2f\n"
        "    cmp $2,%eax\n"
        "    jne 3f\n"
        "    mov $20,%eax\n"
        "2:  ret\n"
        "3:  mov $30,%eax\n"
        "    jmp 2b\n"
        ".size timed_mid,.-timed_mid\n"
        ".p2align 4\n"
        ".globl timed_short\n.type timed_short,@function\n"
        "timed_short:\n" /* int timed_short(int x): x ? x : 0, after sleeping slow_us */
        "    push %rbx\n"
        "    mov %edi,%ebx\n"
        "    call slow_helper\n"
        "    test %ebx,%ebx\n"
        "    je 1f\n"
        "    mov %ebx,%eax\n"
        "    pop %rbx\n"
        "    ret\n"
        "1:  xor %eax,%eax\n"
        "    pop %rbx\n"
        "    ret\n"
        ".size timed_short,.-timed_short\n"
        ".fill 12,1,0xcc\n"
        ".p2align 4\n"
        ".globl call_reg\n.type call_reg,@function\n"
        "call_reg:\n" /* int call_reg(int x): leaf(x) through a register */
        "    push %rbx\n"
        "    lea leaf(%rip),%rax\n"
        "    call *%rax\n"
        "    pop %rbx\n"
        "    ret\n"
        ".size call_reg,.-call_reg\n"
        ".fill 12,1,0xcc\n"
        ".p2align 4\n"
        ".globl call_far\n.type call_far,@function\n"
        "call_far:\n" /* int call_far(int x): leaf(x) + 1 through a register, no padding
                         * within reach of a jmp rel8 */
        "    push %rbx\n"
        "    .rept 50\n"
        "    add $0,%ebx\n"
        "    .endr\n"
        "    lea leaf(%rip),%rax\n"
        "    call *%rax\n"
        "    mov %eax,%ebx\n"
        "    add $1,%ebx\n"
        "    .rept 50\n"
        "    add $0,%ebx\n"
        "    .endr\n"
        "    mov %ebx,%eax\n"
        "    pop %rbx\n"
        "    ret\n"
        ".size call_far,.-call_far\n"
        ".p2align 4\n");

void ret_only(void);
int call_first(int);
int call_first_slow(int);
int ind_long(long);
int ind_short(long);
int leaf(int);
int timed_tail(int);
int timed_short(int);
int timed_ctail(int);
int timed_mid(int);
int timed_dtail(int);
int quick_chk(int, int);
int call_reg(int);
int call_far(int);

extern char __executable_start[], etext[];

/* One round of every shape: 0 when every result is right. */
static int
round_once(int i)
{
    int bad = 0;
    ret_only();
    bad |= call_first(i) != i + 2;
    bad |= ind_long(0) != 7;
    bad |= ind_short(0) != 9;
    bad |= timed_tail(i) != 3 * (i + 1) + 1;
    bad |= timed_short(i & 1) != (i & 1);
    bad |= timed_ctail(i & 1) != ((i & 1) ? 4 : 5);
    bad |= timed_dtail(i & 1) != ((i & 1) ? 4 : 7);
    bad |= quick_chk(i & 1, 1) != ((i & 1) ? 9 : 1);
    bad |= timed_mid(i % 3) != (i % 3 == 1 ? 1 : i % 3 == 2 ? 20 : 30);
    bad |= call_reg(i) != 3 * i + 1;
    bad |= call_far(i) != 3 * i + 2;
    return bad;
}

static volatile int done;
static volatile int thread_bad;

static void *
slow_caller(void *arg)
{
    (void)arg;
    for (int i = 0; !done; i++)
        if (call_first_slow(i) != i + 2)
            thread_bad = 1;
    return NULL;
}

int
main(int argc, char **argv)
{
    size_t tlen = (size_t)(etext - __executable_start);
    char *before = malloc(tlen);
    int bad = 0;

    if (before == NULL)
        return 99;
    memcpy(before, __executable_start, tlen);
    if (argc == 3 && strcmp(argv[1], "wait") == 0) {
        pthread_t t;
        slow_us = 20000;
        pthread_create(&t, NULL, slow_caller, NULL);
        for (int i = 0; access(argv[2], F_OK) != 0; i++) {
            bad |= round_once(i);
            usleep(1000);
        }
        done = 1;
        pthread_join(t, NULL);
        printf("%s %s\n", bad || thread_bad ? "bad" : "ok",
            memcmp(before, __executable_start, tlen) == 0 ? "same" : "differs");
        return 0;
    }
    slow_us = argc > 2 ? atol(argv[2]) : 0;
    long n = argc > 1 ? atol(argv[1]) : 0;
    for (long i = 0; i < n; i++)
        bad |= round_once((int)i);
    printf("%s n=%ld\n", bad ? "bad" : "ok", n);
    return bad;
}
