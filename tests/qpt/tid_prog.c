/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * For tests/mdl-fields.sh: instrumentation of one thread (`where tid() == chosen_tid`).
 * Four workers record their kernel thread ids, wait until main has published worker 2's
 * id in chosen_tid, then call tick() 100, 200, 300 and 400 times; main calls it 7 times
 * after joining them. It prints its truth on stderr: the calls of the chosen thread and
 * the sum over all calls of the caller's thread id.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

void tick(void);
long chosen_tid; /* read by the metric's condition */

static long tids[4];
static volatile long ticks;
static pthread_barrier_t ready, go;

__attribute__((noipa)) void
tick(void)
{
    ticks++;
}

static void *
worker(void *arg)
{
    long i = (long)arg;
    tids[i] = gettid();
    pthread_barrier_wait(&ready);
    pthread_barrier_wait(&go);
    for (long j = 0; j < (i + 1) * 100; j++)
        tick();
    return NULL;
}

int
main(void)
{
    pthread_t t[4];
    pthread_barrier_init(&ready, NULL, 5);
    pthread_barrier_init(&go, NULL, 5);
    for (long i = 0; i < 4; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)i) != 0)
            return 1;
    pthread_barrier_wait(&ready);
    chosen_tid = tids[2];
    pthread_barrier_wait(&go);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    for (int j = 0; j < 7; j++)
        tick();
    long sum = 7L * gettid();
    for (long i = 0; i < 4; i++)
        sum += tids[i] * (i + 1) * 100;
    fprintf(stderr, "truth chosen 300\ntruth sumtid %ld\n", sum);
    return 0;
}
