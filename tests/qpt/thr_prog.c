/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * For tests/check_libqpt: per-thread variables and timers. main sleeps in nap(50 ms),
 * then 8 threads run; thread i calls tick() (i + 1) * 1000 times and burns 20 ms of its
 * CPU time in burn().
 */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

volatile long sink;
void tick(long k);
void nap(long ms);
void burn(long ms);

__attribute__((noinline)) void
tick(long k)
{
    __atomic_add_fetch(&sink, k, __ATOMIC_RELAXED);
}

__attribute__((noinline)) void
nap(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static long
cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1000000000l + t.tv_nsec;
}

__attribute__((noinline)) void
burn(long ms)
{
    long end = cpu_ns() + ms * 1000000;
    volatile long x = 0;
    while (cpu_ns() < end)
        for (int i = 0; i < 1000; i++)
            x += i;
}

static void *
thread(void *arg)
{
    long i = (long)arg;
    for (long j = 0; j < (i + 1) * 1000; j++)
        tick(j);
    burn(20);
    return NULL;
}

int
main(void)
{
    pthread_t th[8];
    nap(50);
    for (long i = 0; i < 8; i++)
        pthread_create(&th[i], NULL, thread, (void *)i);
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    printf("%ld\n", sink);
    return 0;
}
