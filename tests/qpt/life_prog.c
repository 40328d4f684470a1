/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The truth program of tests/check_qpt_life.c: each mode does one thing whose events
 * and counts are known - N threads (exit 3), a fork (both halves call work N times),
 * an execve of itself into "loop N" (exit 7), a dlopen of a library whose lib_work it
 * calls N times (then dlclose), N such loads in turn ("cycles": the Kth calls it K
 * times), work N times then exit N, or waiting on stdin; "privexec N": an execve into
 * "exec N" with opening a file read-write refused (EPERM, a seccomp filter its execs keep), so that
 * libqpt cannot share memory with it (it opens our memfd so): qpt_alloc's is private;
 * "short N": a procedure shorter than a jump called N times (exit 0 when right).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

volatile long total;
long work(long i);

__attribute__((noinline)) long
work(long i)
{
    total += i;
    return total;
}

static void *
thread_main(void *arg)
{
    work((long)arg);
    return NULL;
}

/* A procedure shorter than a jump, another right after it, and int3s before it (after a
 * ret): dyn patches its entry with a 2-byte jmp to a jump within its reach (the "short"
 * mode's). */
__asm__(".text\n.p2align 4\n.type shortpre,@function\nshortpre:\nret\n.size shortpre,1\n"
        ".fill 15,1,0xcc\n.globl shortfn\n.type shortfn,@function\nshortfn:\n"
        "lea 1(%rdi),%eax\nret\n.size shortfn,4\n.type shortnext,@function\nshortnext:\n"
        "lea 2(%rdi),%eax\nret\n.size shortnext,4\n");
int shortfn(int x);

/* openat with FLAGS refused (EPERM) from now on, in every later image too: 0, or 1. */
static int
refuse_openat(unsigned flags)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, flags, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
        || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0;
}

int
main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";
    long n = argc > 2 ? atol(argv[2]) : 0;
    if (strcmp(what, "threads") == 0) {
        pthread_t t[64];
        for (long i = 0; i < n && i < 64; i++)
            if (pthread_create(&t[i], NULL, thread_main, (void *)(i + 1)) != 0)
                return 1;
        for (long i = 0; i < n && i < 64; i++)
            pthread_join(t[i], NULL);
        return 3;
    }
    if (strcmp(what, "fork") == 0) {
        pid_t c = fork();
        if (c < 0)
            return 1;
        for (long i = 1; i <= n; i++)
            work(i);
        if (c == 0)
            _exit(5);
        int st;
        waitpid(c, &st, 0);
        return WIFEXITED(st) && WEXITSTATUS(st) == 5 ? 0 : 1;
    }
    if (strcmp(what, "short") == 0) { /* shortfn N times: exit 0 when it always added 1 */
        long sum = 0;
        for (long i = 1; i <= n; i++)
            sum += shortfn((int)(i & 0xffff));
        long want = 0;
        for (long i = 1; i <= n; i++)
            want += (i & 0xffff) + 1;
        return sum == want ? 0 : 9;
    }
    if (strcmp(what, "privexec") == 0) { /* into "exec N", the filter kept */
        if (refuse_openat(O_RDWR | O_CLOEXEC) != 0)
            return 1;
        char *args[] = { argv[0], "exec", argv[2], NULL };
        execv("/proc/self/exe", args);
        return 1;
    }
    if (strcmp(what, "exec") == 0) {
        work(100);
        char num[32];
        snprintf(num, sizeof(num), "%ld", n);
        char *args[] = { argv[0], "loop", num, NULL };
        execv("/proc/self/exe", args);
        return 1;
    }
    if (strcmp(what, "cycles") == 0 && argc > 3) {
        for (long k = 1; k <= n; k++) {
            void *h = dlopen(argv[3], RTLD_NOW);
            long (*f)(long) = h != NULL ? (long (*)(long))dlsym(h, "lib_work") : NULL;
            if (f == NULL)
                return 1;
            for (long i = 1; i <= k; i++)
                f(i);
            dlclose(h);
        }
        return 0;
    }
    if (strcmp(what, "dlopen") == 0 && argc > 3) {
        void *h = dlopen(argv[3], RTLD_NOW);
        long (*f)(long) = h != NULL ? (long (*)(long))dlsym(h, "lib_work") : NULL;
        if (f == NULL)
            return 1;
        for (long i = 1; i <= n; i++)
            f(i);
        dlclose(h);
        for (long i = 1; i <= n; i++)
            work(i);
        return 0;
    }
    if (strcmp(what, "dlexec") == 0 && argc > 3) { /* dlopen, dlclose, then exec */
        void *h = dlopen(argv[3], RTLD_NOW);
        long (*f)(long) = h != NULL ? (long (*)(long))dlsym(h, "lib_work") : NULL;
        if (f == NULL)
            return 1;
        for (long i = 1; i <= n; i++)
            f(i);
        dlclose(h);
        for (long i = 1; i <= n; i++)
            work(i);
        char *args[] = { argv[0], "loop", argv[2], NULL };
        execv("/proc/self/exe", args);
        return 1;
    }
    if (strcmp(what, "loop") == 0) {
        for (long i = 1; i <= n; i++)
            work(i);
        return 7;
    }
    if (strcmp(what, "exit") == 0) {
        for (long i = 1; i <= n; i++)
            work(i);
        return (int)n;
    }
    if (strcmp(what, "wait") == 0) { /* until stdin ends, then exit 4 */
        char c;
        while (read(0, &c, 1) > 0)
            ;
        return 4;
    }
    return 2;
}
