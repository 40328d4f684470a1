/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * For tests/metrics.sh, a per-lock focus: linked statically (pthread_mutex_lock is then
 * the program's own code). Four threads; thread t takes `big` 1,000 t times and `small`
 * 10 times: big 10,000, small 40. Prints both counts and both addresses.
 */
#include <pthread.h>
#include <stdio.h>

pthread_mutex_t big = PTHREAD_MUTEX_INITIALIZER, small = PTHREAD_MUTEX_INITIALIZER;
long nbig, nsmall;

static void *
run(void *arg)
{
    long t = (long)arg;
    for (long i = 0; i < 1000 * t; i++) {
        pthread_mutex_lock(&big);
        nbig++;
        pthread_mutex_unlock(&big);
    }
    for (int i = 0; i < 10; i++) {
        pthread_mutex_lock(&small);
        nsmall++;
        pthread_mutex_unlock(&small);
    }
    return NULL;
}

int
main(void)
{
    pthread_t th[4];
    for (long t = 0; t < 4; t++)
        pthread_create(&th[t], NULL, run, (void *)(t + 1));
    for (int t = 0; t < 4; t++)
        pthread_join(th[t], NULL);
    printf("%ld %ld %#lx %#lx\n", nbig, nsmall, (unsigned long)&big, (unsigned long)&small);
    return 0;
}
