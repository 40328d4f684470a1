/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * fork + waitpid, and a program that execs itself: the parent forks a child that computes
 * and exits with a status; then it forks again and the child execs /proc/self/exe with
 * an argument, so the same binary runs a second time in "child" mode and exits 7. The
 * parent waits for each child before printing, so the output order is fixed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static long __attribute__((noinline)) work(long n)
{
    long s = 0;
    for (long i = 1; i <= n; i++)
        s = (s * 31 + i) % 65521;
    return s;
}

static int __attribute__((noinline)) report(const char* what, int status)
{
    if (WIFEXITED(status)) {
        printf("%s: exited %d\n", what, WEXITSTATUS(status));
        return WEXITSTATUS(status);
    }
    if (WIFSIGNALED(status))
        printf("%s: killed by signal %d\n", what, WTERMSIG(status));
    return -1;
}

int
main(int argc, char** argv)
{
    int status;
    pid_t pid;

    if (argc == 2 && strcmp(argv[1], "child") == 0) {
        printf("exec child: work=%ld\n", work(5000));
        return 7;
    }
    printf("parent: work=%ld\n", work(1000));
    fflush(stdout); /* or the child would print the buffer again */

    pid = fork();
    if (pid < 0)
        return 100;
    if (pid == 0) {
        printf("fork child: work=%ld\n", work(2000));
        exit(5);
    }
    if (waitpid(pid, &status, 0) != pid)
        return 101;
    int a = report("fork child", status);

    fflush(stdout);
    pid = fork();
    if (pid < 0)
        return 102;
    if (pid == 0) {
        execl("/proc/self/exe", argv[0], "child", (char*)NULL);
        perror("execl");
        _exit(127);
    }
    if (waitpid(pid, &status, 0) != pid)
        return 103;
    int b = report("exec child", status);
    return a + b; /* 5 + 7 */
}
