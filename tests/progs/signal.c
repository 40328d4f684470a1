/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Signals: handlers installed with sigaction and delivered synchronously by raise() and
 * kill(getpid()), a blocked signal delivered when unblocked, and a real SIGSEGV (a store
 * through a null pointer the compiler cannot see) caught by a handler running on an
 * alternate stack (sigaltstack) that leaves with siglongjmp. Handlers only count.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t usr1, usr2, segv, on_altstack;
static sigjmp_buf recover;
static char altstack[65536];

static void
on_usr1(int sig)
{
    usr1 += sig == SIGUSR1;
}

static void
on_usr2(int sig, siginfo_t* si, void* ctx)
{
    (void)ctx;
    if (sig == SIGUSR2 && si->si_pid == getpid())
        usr2++;
}

static void
on_segv(int sig)
{
    char here;
    (void)sig;
    segv++;
    on_altstack = &here >= altstack && &here < altstack + sizeof altstack;
    siglongjmp(recover, 1);
}

static int* volatile nowhere;

static void __attribute__((noinline)) fault(void) { *nowhere = 1; }

int
main(void)
{
    struct sigaction sa;
    sigset_t set;
    stack_t ss;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL) != 0)
        return 100;
    sa.sa_handler = NULL;
    sa.sa_sigaction = on_usr2;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    if (sigaction(SIGUSR2, &sa, NULL) != 0)
        return 101;

    for (int i = 0; i < 5; i++)
        raise(SIGUSR1);
    for (int i = 0; i < 3; i++)
        kill(getpid(), SIGUSR2);
    printf("usr1=%d usr2=%d\n", (int)usr1, (int)usr2);

    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, NULL);
    raise(SIGUSR1);
    raise(SIGUSR1); /* merged with the pending one */
    printf("blocked: usr1=%d\n", (int)usr1);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    printf("unblocked: usr1=%d\n", (int)usr1);

    ss.ss_sp = altstack;
    ss.ss_size = sizeof altstack;
    ss.ss_flags = 0;
    if (sigaltstack(&ss, NULL) != 0)
        return 102;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sa.sa_flags = SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    for (int i = 0; i < 3; i++) {
        if (sigsetjmp(recover, 1) == 0)
            fault();
    }
    printf("segv=%d on_altstack=%d\n", (int)segv, (int)on_altstack);
    signal(SIGUSR1, SIG_IGN);
    raise(SIGUSR1);
    printf("ignored: usr1=%d\n", (int)usr1);
    return usr1 + usr2 + segv; /* 6 + 3 + 3 */
}
