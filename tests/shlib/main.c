/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The program of tests/shlib.sh: calls the library a known number of times.
 *   main                 10 lib_sum(100), 1 lib_square, 7 lib_pick, lib_apply(cb, 1000)
 *   main threads         and 4 threads calling lib_tick 50000 times each
 *   main quit            and lib_quit(3): exits from inside the library with status 3
 *   main fork            and 3 forked children calling lib_sum(100) 10 times each
 *   main dlopen PATH     opens PATH with dlopen and calls its lib_sum(30) 5 times
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

long lib_sum(int n);
int lib_square(int x);
int lib_pick(int x);
int lib_apply(int (*f)(int), int n);
void lib_tick(void);
int lib_ctor_ran(void);
void lib_quit(int code);

static int
cb(int i)
{
    return i & 7;
}

static void *
ticker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 50000; i++)
        lib_tick();
    return NULL;
}

int
main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "dlopen") == 0) {
        void *h = dlopen(argv[2], RTLD_NOW);
        long (*sum)(int) = h ? (long (*)(int))dlsym(h, "lib_sum") : NULL;
        if (sum == NULL) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            return 2;
        }
        long t = 0;
        for (int k = 0; k < 5; k++)
            t += sum(30);
        printf("dlopen %ld\n", t);
        return 0;
    }
    long t = 0;
    for (int k = 0; k < 10; k++)
        t += lib_sum(100);
    int p = 0;
    for (int k = 0; k < 7; k++)
        p += lib_pick(k);
    printf("%ld %d %d %d %d\n", t, lib_square(argc + 6), p, lib_apply(cb, 1000),
        lib_ctor_ran());
    if (argc == 2 && strcmp(argv[1], "threads") == 0) {
        pthread_t th[4];
        for (int i = 0; i < 4; i++)
            pthread_create(&th[i], NULL, ticker, NULL);
        for (int i = 0; i < 4; i++)
            pthread_join(th[i], NULL);
        printf("threads joined\n");
    }
    if (argc == 2 && strcmp(argv[1], "quit") == 0)
        lib_quit(3);
    if (argc == 2 && strcmp(argv[1], "fork") == 0) {
        for (int c = 0; c < 3; c++) {
            pid_t pid = fork();
            if (pid == 0) {
                long u = 0;
                for (int k = 0; k < 10; k++)
                    u += lib_sum(100);
                _exit(u == t ? 0 : 1);
            }
        }
        int ok = 0, st;
        while (wait(&st) > 0)
            ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
        printf("children %d\n", ok);
    }
    return 0;
}
