/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The program of tests/dyn-follow.sh; every mode prints its answers and exits 3:
 *   dl LIB N        dlopen LIB after start, call its lib_sum(100) N times, dlclose it
 *   dlwait LIB N    the same once a line was read from standard input
 *   dl2 LIB N M     dl LIB N, then dlopen LIB again, call lib_sum(100) M times, dlclose
 *   execdl K LIB N  call work K times, then exec itself as `dl LIB N`
 *   threads LIB T N dlopen LIB, T threads each call lib_sum(100) N times
 *   fork N          a child calls work 5 times and exits 7; the parent calls work N
 *                   times and prints the child's status
 *   forks LIB N K [GO]  dlopen LIB, fork N children; each one (and then the parent)
 *                   waits for the file GO to exist (if given), calls work and lib_sum(100)
 *                   K times each, and the children dlopen libm.so.6 (a process left with
 *                   the loader's int3 dies there) and exit 10+i when all went right; the
 *                   parent prints how many did
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

/* Wait until the file GO exists (NULL: no wait). */
static void
wait_go(const char *go)
{
    while (go != NULL && access(go, F_OK) != 0)
        usleep(10000);
}

/* Call work and sum(100) K times each: 1 when every sum was the same. */
static int
work_and_sum(int k)
{
    long first = 0;
    int same = 1;
    for (int i = 0; i < k; i++) {
        long v = sum(100);
        work(i);
        first = i == 0 ? v : first;
        same &= v == first;
    }
    return same;
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
    if (argc == 5 && strcmp(argv[1], "dl2") == 0) {
        for (int round = 0; round < 2; round++) {
            void *h = open_lib(argv[2]);
            for (int i = 0, n = atoi(argv[3 + round]); i < n; i++)
                s += sum(100);
            dlclose(h);
        }
        printf("dl2 %ld\n", s);
    } else if (argc == 5 && strcmp(argv[1], "execdl") == 0) {
        for (int i = 0, k = atoi(argv[2]); i < k; i++)
            work(i);
        printf("execdl %s\n", argv[2]);
        fflush(stdout);
        execl("/proc/self/exe", argv[0], "dl", argv[3], argv[4], (char *)NULL);
        perror("exec");
        return 2;
    } else if (argc == 4 && strcmp(argv[1], "dl") == 0) {
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
    } else if ((argc == 5 || argc == 6) && strcmp(argv[1], "forks") == 0) {
        int n = atoi(argv[3]), k = atoi(argv[4]), good = 0;
        const char *go = argc == 6 ? argv[5] : NULL;
        pid_t c[16];
        open_lib(argv[2]);
        for (int j = 0; j < n && j < 16; j++)
            if ((c[j] = fork()) == 0) {
                wait_go(go);
                int ok = work_and_sum(k) && dlopen("libm.so.6", RTLD_NOW) != NULL;
                _exit(ok ? 10 + j : 1);
            }
        wait_go(go);
        work_and_sum(k);
        for (int j = 0; j < n && j < 16; j++) {
            int st = 0;
            waitpid(c[j], &st, 0);
            good += WIFEXITED(st) && WEXITSTATUS(st) == 10 + j;
        }
        printf("forks %d children, %d ran right\n", n, good);
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
        fprintf(stderr,
                "usage: main dl|dlwait|dl2|threads|fork|forks|exec|execdl|work ...\n");
        return 2;
    }
    return 3;
}
