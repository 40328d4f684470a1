/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/* Two threads contending on one of three mutexes: both take lock_a and lock_c often and
 * briefly (no contention worth a name), and lock_b around 2 ms of work each (the planted
 * bottleneck: one thread waits while the other works). A short sleep outside lock_b
 * lets the waiter in (no barging). Runs for argv[1] seconds. */
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
    pthread_mutex_lock(&lock_b);
    busy_ms(2);
    pthread_mutex_unlock(&lock_b);
}

static void *
worker(void *arg)
{
    (void)arg;
    struct timespec pause = { 0, 200 * 1000 };
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
        nanosleep(&pause, NULL);
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
