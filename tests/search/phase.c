/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/* A phase change half-way (the when axis): for argv[1]/2 seconds cpu_phase() computes
 * (crunch), then io_phase() waits in read() for a child that writes every 20 ms
 * (next_message). */
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

volatile double sink;
volatile int done; /* stores after the last calls: room for live exit snippets */

static double
now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

__attribute__((noinline)) void
crunch(int n)
{
    double x = 0;
    for (int i = 0; i < n; i++)
        x += (double)i * 0.5;
    sink = x;
    done = 1;
}

__attribute__((noinline)) void
cpu_phase(double secs)
{
    double end = now() + secs;
    while (now() < end)
        crunch(200000);
    done = 2;
}

__attribute__((noinline)) int
next_message(int fd, char *buf, size_t len)
{
    int n = (int)read(fd, buf, len);
    done = 3;
    return n;
}

__attribute__((noinline)) void
io_phase(double secs)
{
    int fd[2];
    if (pipe(fd) < 0)
        exit(1);
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
    while (next_message(fd[0], buf, sizeof(buf)) > 0)
        sink += buf[0];
    waitpid(child, NULL, 0);
    done = 4;
}

int
main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 10;
    cpu_phase(secs / 2);
    io_phase(secs / 2);
    return 0;
}
