/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * tests/dyn-percpu.sh's program. `percpu MODE THREADS CALLS`: THREADS threads each
 * call f() CALLS times, all at once. MODE: run (no pause), yield (sched_yield every 100
 * calls: the threads are preempted and migrate), move (each thread moves itself to the
 * next CPU with sched_setaffinity every 1,000 calls). Prints "ok N" (the calls made).
 * `percpu wait FILE`: 2 threads call f() (a short sleep every 1,000 calls) until FILE
 * exists, then "ok same". Either way a thread whose rseq area still points at a
 * critical section when it is done (per-CPU counts leave it 0) makes it print
 * "rseq_cs left" instead.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/rseq.h>
#include <time.h>
#include <unistd.h>

static volatile long made[64];
static volatile int left, stop;
static const char *mode;
static long calls;
static pthread_barrier_t go;

__attribute__((noinline)) void
f(long *n)
{
    __asm__ volatile("" ::: "memory");
    ++*n;
}

/* The calling thread's rseq area's rseq_cs is not 0. */
static void
check_rseq_cs(void)
{
    if (__rseq_size == 0)
        return;
    uint64_t tp;
    __asm__("mov %%fs:0, %0" : "=r"(tp));
    if (*(volatile uint64_t *)(tp + (uint64_t)__rseq_offset + 8) != 0)
        left = 1;
}

static void *
body(void *arg)
{
    long k = (long)arg, n = 0;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN) > 0 ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
    int yield = strcmp(mode, "yield") == 0, move = strcmp(mode, "move") == 0;
    pthread_barrier_wait(&go);
    for (long i = 0; i < calls || (calls == 0 && !stop); i++) {
        f(&n);
        if (yield && i % 100 == 0)
            sched_yield();
        if (move && i % 1000 == 0) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET((int)((k + i / 1000) % ncpu), &set);
            sched_setaffinity(0, sizeof(set), &set);
        }
        if (calls == 0 && i % 1000 == 0)
            nanosleep(&(struct timespec) { 0, 100000 }, NULL);
    }
    check_rseq_cs();
    made[k] = n;
    return NULL;
}

int
main(int argc, char **argv)
{
    if (argc != 3 && argc != 4)
        return 2;
    mode = argv[1];
    int wait = strcmp(mode, "wait") == 0;
    long nt = wait ? 2 : atol(argv[2]), total = 0;
    calls = wait ? 0 : argc == 4 ? atol(argv[3]) : 0;
    if (nt < 1 || nt > 64 || (!wait && calls < 1))
        return 2;
    pthread_t t[64];
    pthread_barrier_init(&go, NULL, (unsigned)nt);
    for (long k = 0; k < nt; k++)
        if (pthread_create(&t[k], NULL, body, (void *)k) != 0)
            return 1;
    while (wait && access(argv[2], F_OK) != 0)
        nanosleep(&(struct timespec) { 0, 10000000 }, NULL);
    stop = 1;
    for (long k = 0; k < nt; k++) {
        pthread_join(t[k], NULL);
        total += made[k];
    }
    if (left)
        printf("rseq_cs left\n");
    else if (wait)
        printf("ok same\n");
    else
        printf("ok %ld\n", total);
    return left;
}
