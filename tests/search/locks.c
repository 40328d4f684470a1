/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/* Two threads contending on one of three mutexes: both take lock_a and lock_c often and
 * briefly (no contention worth a name), and lock_b around a 2 ms wait each (the planted
 * bottleneck: one thread waits for the lock while the other holds it), then 0.5 ms of
 * work outside any lock, which gives the waiter its turn. The holder sleeps rather than
 * computes, so a busy machine does not change who waits. Runs for argv[1] seconds. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

pthread_mutex_t lock_a = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t lock_b = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t lock_c = PTHREAD_MUTEX_INITIALIZER;
volatile long shared_a, shared_c;
volatile double sink;
static double secs = 3;

static double
now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

__attribute__((noinline)) static void
busy_ms(double ms)
{
    double end = now() + ms / 1e3;
    while (now() < end)
        sink += 1;
}

__attribute__((noinline)) static void
update_b(void)
{
    struct timespec hold = { 0, 2 * 1000 * 1000 };
    pthread_mutex_lock(&lock_b);
    nanosleep(&hold, NULL);
    pthread_mutex_unlock(&lock_b);
}

static void *
worker(void *arg)
{
    (void)arg;
    double end = now() + secs;
    while (now() < end) {
        for (int i = 0; i < 20; i++) {
            pthread_mutex_lock(&lock_a);
            shared_a++;
            pthread_mutex_unlock(&lock_a);
            pthread_mutex_lock(&lock_c);
            shared_c++;
            pthread_mutex_unlock(&lock_c);
        }
        update_b();
        busy_ms(0.5);
    }
    return NULL;
}

int
main(int argc, char **argv)
{
    if (argc > 1)
        secs = atof(argv[1]);
    pthread_t t1, t2;
    pthread_create(&t1, NULL, worker, NULL);
    pthread_create(&t2, NULL, worker, NULL);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    return 0;
}
