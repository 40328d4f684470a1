/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A thread of a process that a killed dyn left instrumented, parked where a stop can
 * find it (tests/dyn-clean.sh (d)): on the jump in padding that the short jump of a
 * short entry leads to. Its first thread is single-stepped until its pc is there, then
 * the process is stopped (SIGSTOP, queued before the thread is let go: it stays there).
 *   parkat PID ENTRY   ENTRY: the run-time address (hex) of a procedure whose entry holds
 *                      such a short jump; "parked at PAD" (exit 0), "skip: why" (77) when
 *                      ENTRY is not one, "never there" (1) after many steps
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_STEPS 20000000L

static int
read_mem(int pid, uint64_t addr, void *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/mem", pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = pread(fd, buf, len, (off_t)addr);
    close(fd);
    return n == (ssize_t)len ? 0 : -1;
}

int
main(int argc, char **argv)
{
    uint8_t b[5];
    int32_t rel;
    int st;

    if (argc != 3)
        return 2;
    int pid = atoi(argv[1]);
    uint64_t entry = strtoull(argv[2], NULL, 16);
    if (read_mem(pid, entry, b, 2) < 0 || b[0] != 0xeb) {
        printf("skip: no short jump at %#llx\n", (unsigned long long)entry);
        return 77;
    }
    uint64_t pad = entry + 2 + (uint64_t)(int64_t)(int8_t)b[1];
    if (read_mem(pid, pad, b, 5) < 0 || b[0] != 0xe9) {
        printf("skip: no jump at the pad %#llx\n", (unsigned long long)pad);
        return 77;
    }
    memcpy(&rel, b + 1, 4);
    if (ptrace(PTRACE_SEIZE, pid, NULL, NULL) < 0 || ptrace(PTRACE_INTERRUPT, pid, NULL, NULL) < 0
        || waitpid(pid, &st, __WALL) != pid) {
        printf("error: cannot trace %d: %s\n", pid, strerror(errno));
        return 99;
    }
    for (long i = 0; i < MAX_STEPS; i++) {
        struct user_regs_struct regs;
        if (ptrace(PTRACE_GETREGS, pid, NULL, &regs) < 0) {
            printf("error: registers: %s\n", strerror(errno));
            return 99;
        }
        if (regs.rip == pad) {
            /* Stopped with the group before it is let go: it never runs from here. */
            kill(pid, SIGSTOP);
            ptrace(PTRACE_DETACH, pid, NULL, NULL);
            printf("parked at %#llx after %ld steps\n", (unsigned long long)pad, i);
            return 0;
        }
        if (ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL) < 0 || waitpid(pid, &st, __WALL) != pid
            || !WIFSTOPPED(st)) {
            printf("error: single step: %s\n", strerror(errno));
            return 99;
        }
    }
    ptrace(PTRACE_DETACH, pid, NULL, NULL);
    printf("never there\n");
    return 1;
}
