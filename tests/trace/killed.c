/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/* Control-flow tracing: a process killed by a signal flushes nothing at its end; the
 * trace holds what filled buffers wrote, and its walk must say it was cut. */
#include <signal.h>
#include <stdio.h>

static volatile long sink;

static void __attribute__((noinline)) work(int i)
{
    if (i % 3 == 0)
        sink += i;
    else
        sink -= 1;
}

int main(void)
{
    for (int i = 0; i < 2000000; i++)
        work(i);
    printf("%ld\n", sink);
    fflush(stdout);
    raise(SIGKILL);
    return 0;
}
