/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The program of tests/dyn-follow.sh; every mode prints its answers and exits 3:
 *   dl LIB N        dlopen LIB after start, call its lib_sum(100) N times, dlclose it
 *   dlwait LIB N    the same once a line was read from standard input
 *   threads LIB T N dlopen LIB, T threads each call lib_sum(100) N times
 *   fork N          a child calls work 5 times and exits 7; the parent calls work N
 *                   times and prints the child's status
 *   exec K M        call work K times, then exec itself as `work M`
 *   work M          call work M times
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile long sink;

__attribute__((noinline)) void
work(int i)
{
    sink += i;
    __asm__ volatile("" ::: "memory");
}

static long (*sum)(int);
static int per_thread;

static void *
thread_main(void *arg)
{
    long s = 0;
    (void)arg;
    for (int i = 0; i < per_thread; i++)
        s += sum(100);
    return (void *)s;
}

static void *
open_lib(const char *path)
{
    void *h = dlopen(path, RTLD_NOW);
    if (h == NULL || (sum = (long (*)(int))dlsym(h, "lib_sum")) == NULL) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        exit(2);
    }
    return h;
}

int
main(int argc, char **argv)
{
    long s = 0;

    if (argc == 4 && strcmp(argv[1], "dlwait") == 0) {
        char line[64];
        if (fgets(line, sizeof(line), stdin) == NULL)
            return 2;
        argv[1] = "dl";
    }
    if (argc == 4 && strcmp(argv[1], "dl") == 0) {
        void *h = open_lib(argv[2]);
        for (int i = 0, n = atoi(argv[3]); i < n; i++)
            s += sum(100);
        dlclose(h);
        printf("dl %ld\n", s);
    } else if (argc == 5 && strcmp(argv[1], "threads") == 0) {
        int t = atoi(argv[3]);
        pthread_t th[16];
        open_lib(argv[2]);
        per_thread = atoi(argv[4]);
        for (int i = 0; i < t && i < 16; i++)
            pthread_create(&th[i], NULL, thread_main, NULL);
        for (int i = 0; i < t && i < 16; i++) {
            void *r;
            pthread_join(th[i], &r);
            s += (long)r;
        }
        printf("threads %ld\n", s);
    } else if (argc == 3 && strcmp(argv[1], "fork") == 0) {
        int st = 0;
        pid_t c = fork();
        if (c == 0) {
            for (int i = 0; i < 5; i++)
                work(i);
            _exit(7);
        }
        for (int i = 0, n = atoi(argv[2]); i < n; i++)
            work(i);
        waitpid(c, &st, 0);
        printf("fork child exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    } else if (argc == 4 && strcmp(argv[1], "exec") == 0) {
        for (int i = 0, k = atoi(argv[2]); i < k; i++)
            work(i);
        printf("exec %s\n", argv[2]);
        fflush(stdout);
        execl("/proc/self/exe", argv[0], "work", argv[3], (char *)NULL);
        perror("exec");
        return 2;
    } else if (argc == 3 && strcmp(argv[1], "work") == 0) {
        for (int i = 0, m = atoi(argv[2]); i < m; i++)
            work(i);
        printf("work %s\n", argv[2]);
    } else {
        fprintf(stderr, "usage: main dl|threads|fork|exec|work ...\n");
        return 2;
    }
    return 3;
}
