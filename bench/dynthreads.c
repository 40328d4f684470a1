/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/* N threads started one after another (each joined before the next), each calling
 * work() once: what following thread starts costs a live session. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

volatile long sink;

__attribute__((noinline)) void
work(void)
{
    sink++;
}

static void *
body(void *arg)
{
    (void)arg;
    work();
    return NULL;
}

int
main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 2000;
    for (long i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, body, NULL) != 0 || pthread_join(t, NULL) != 0)
            return 1;
    }
    printf("%ld threads, work %ld\n", n, sink);
    return 0;
}
