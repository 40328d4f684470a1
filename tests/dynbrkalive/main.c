/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The program of tests/dyn-brkalive.sh: `main LIB N MS` dlopens LIB, calls its
 * lib_sum(100) and dlcloses it, N times, MS milliseconds apart (each time the loader calls
 * its r_brk four times), from two threads at once; prints "loops 2N sum S" and exits 0.
 * A process left with the loader's int3 dies at its next dlopen (SIGTRAP).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const char *lib;
static int n, ms;

static void *
loop(void *arg)
{
    long *sum = arg;
    struct timespec d = { ms / 1000, (ms % 1000) * 1000000L };
    for (int i = 0; i < n; i++) {
        void *h = dlopen(lib, RTLD_NOW);
        long (*f)(int) = h != NULL ? (long (*)(int))dlsym(h, "lib_sum") : NULL;
        if (f == NULL) {
            fprintf(stderr, "dlopen %s: %s\n", lib, dlerror());
            exit(1);
        }
        *sum += f(100);
        dlclose(h);
        nanosleep(&d, NULL);
    }
    return NULL;
}

int
main(int argc, char **argv)
{
    pthread_t t;
    long s1 = 0, s2 = 0;

    if (argc != 4)
        return 2;
    lib = argv[1];
    n = atoi(argv[2]);
    ms = atoi(argv[3]);
    if (pthread_create(&t, NULL, loop, &s1) != 0)
        return 1;
    loop(&s2);
    pthread_join(t, NULL);
    printf("loops %d sum %ld\n", 2 * n, s1 + s2);
    return 0;
}
