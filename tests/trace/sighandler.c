/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Signal handlers that interrupt traced code before a branch and a call, and return
 * (tests/trace.sh: the chord trace must equal the naive one block for block, unmarked):
 * a signal sent to the thread itself by a `syscall` instruction in the middle of a
 * block (delivered as the system call returns), and a store to a read-only page whose
 * SIGSEGV handler makes the page writable and returns (the store runs again). Both
 * handlers call traced code that the program also calls directly and through a
 * pointer, and the interrupted code goes on silently (a branch's silent way, its join)
 * into calls of both kinds: without the handler's entry known, a walk would take the
 * handler for the pointer's callee and print those blocks before it.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile long sum;
static volatile int usr1, segv, even, odd;
static char *page;
static long pid, tid;

static int __attribute__((noinline))
work(int x)
{
    int r = 0;
    for (int i = 0; i < x % 5 + 1; i++)
        r += (i & 1) ? i * x : x - i;
    return r;
}

static int (*volatile work_ptr)(int) = work;

static void
on_usr1(int sig)
{
    usr1++;
    sum += work(sig + usr1);
}

static void
on_segv(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    segv++;
    if ((char *)si->si_addr != page)
        _exit(3);
    mprotect(page, 4096, PROT_READ | PROT_WRITE);
    sum += work_ptr(sig + segv);
}

/* tgkill(pid, tid, SIGUSR1) by a syscall instruction of this block: the handler runs as
 * the system call returns, between this block's other instructions. */
static inline void
self_signal(void)
{
    long rc;
    __asm__ volatile("syscall"
                     : "=a"(rc)
                     : "0"((long)SYS_tgkill), "D"(pid), "S"(tid), "d"((long)SIGUSR1)
                     : "rcx", "r11", "memory");
    (void)rc;
}

int
main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL) != 0)
        return 100;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, NULL) != 0)
        return 101;
    page = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return 102;
    pid = getpid();
    tid = syscall(SYS_gettid);

    for (int i = 0; i < 40; i++) {
        if (i % 3 == 0) {
            sum += i;
            self_signal();
        } else if (i % 3 == 1) {
            mprotect(page, 4096, PROT_READ);
            sum ^= i;
            page[0] = (char)i; /* faults once: the handler opens the page */
        } else {
            sum -= i;
            self_signal();
        }
        /* Blocks without a record between the interruption and the next call: a branch
         * (one way records, the other is silent) and its join. */
        if (i & 2)
            even = i;
        else
            odd = i;
        if (i % 5 == 0)
            sum += work(i);     /* a direct call */
        else
            sum += work_ptr(i); /* a call through a pointer: code not traced, maybe */
    }
    printf("usr1=%d segv=%d sum=%ld\n", usr1, segv, (long)sum);
    return 0;
}
