/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/* A procedure blocked in read on a pipe: a child writes a short message every 20 ms;
 * next_message() waits for each in read(), then a little work (checksum) follows. Runs
 * for argv[1] seconds. */
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

volatile unsigned sum;
volatile int last_n; /* a store after the call: room for a live exit snippet */

__attribute__((noinline)) static int
next_message(int fd, char *buf, size_t len)
{
    int n = (int)read(fd, buf, len);
    last_n = n;
    return n;
}

__attribute__((noinline)) static void
checksum(const char *buf, int n)
{
    for (int i = 0; i < n; i++)
        sum += (unsigned char)buf[i];
}

int
main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 3;
    int fd[2];
    if (pipe(fd) < 0)
        return 1;
    pid_t child = fork();
    if (child == 0) {
        close(fd[0]);
        struct timespec ts = { 0, 20 * 1000 * 1000 };
        for (int i = 0; i < (int)(secs * 50); i++) {
            nanosleep(&ts, NULL);
            if (write(fd[1], "message\n", 8) != 8)
                _exit(1);
        }
        _exit(0);
    }
    close(fd[1]);
    char buf[64];
    int n;
    while ((n = next_message(fd[0], buf, sizeof(buf))) > 0)
        checksum(buf, n);
    waitpid(child, NULL, 0);
    return 0;
}
