/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A thread blocked in a system call whose `syscall` instruction is right before a call
 * that dyn patches (tests/dyn-clean.sh (e)): when a stop interrupts it, the kernel
 * restarts the call by moving the pc back two bytes, so the thread's pc, the patch's
 * address, is not where it goes on. Prints "ticks 2" and exits 0 when both calls ran.
 *   sysnext SECONDS   the first sleep's length
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile long ticks;

__attribute__((noinline)) static void
tick(void)
{
    ticks++;
}

/* Two sleeps made by hand, each syscall instruction right before the call of tick. */
__attribute__((noinline)) void
waiter(long first)
{
    for (int i = 0; i < 2; i++) {
        struct timespec ts = { i == 0 ? first : 0, 1000 };
        long r;
        __asm__ volatile("syscall"
                         : "=a"(r)
                         : "0"((long)SYS_nanosleep), "D"(&ts), "S"(0L)
                         : "rcx", "r11", "memory");
        tick();
    }
}

int
main(int argc, char **argv)
{
    waiter(argc > 1 ? atol(argv[1]) : 1);
    printf("ticks %ld\n", ticks);
    return ticks == 2 ? 0 : 1;
}
