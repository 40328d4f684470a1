/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * For tests/metrics.sh: dyn's per-thread rows name threads by id and name. main calls
 * tick() 7 times, then 4 threads named worker0..worker3 call it 100, 200, 300 and 400
 * times; every thread lives 0.6 s at least, so a live session sees each alive.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <time.h>

void tick(void);

__attribute__((noinline)) void
tick(void)
{
    __asm__ volatile("");
}

static void
nap_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void *
worker(void *arg)
{
    long i = (long)arg;
    char name[16];
    snprintf(name, sizeof(name), "worker%ld", i);
    pthread_setname_np(pthread_self(), name);
    nap_ms(300);
    for (long j = 0; j < (i + 1) * 100; j++)
        tick();
    nap_ms(300);
    return NULL;
}

int
main(void)
{
    pthread_t t[4];
    for (int j = 0; j < 7; j++)
        tick();
    for (long i = 0; i < 4; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)i) != 0)
            return 1;
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    nap_ms(200);
    return 0;
}
