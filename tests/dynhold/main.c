/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The program of tests/dyn-hold.sh: a thread put by the program itself where a thread
 * held in dyn's loader guard is (dynamic/dyn_ptrace_guard.c) while it takes a signal.
 * It prints "ready", waits until dyn's jump is at the loader's r_brk (_r_debug.r_brk), reads the
 * trampoline it jumps to, prints "guard", then:
 *   main live DIR   calls held(), whose ud2's SIGILL handler sets the interrupted pc
 *                   to the trampoline's instruction after its futex call (as a thread
 *                   interrupted in the wait returns there from its handler), and
 *                   returns at once: while dyn lives the thread must be let go;
 *   main after DIR  the same, but the handler prints "handler" and waits for the file
 *                   DIR/go (created once dyn has ended) before it returns into the
 *                   trampoline: it must return from there, not fault;
 *   main child DIR  forks; the child calls the trampoline as r_brk would: a forked
 *                   child's copy must return at once (never held while dyn lives).
 *   main nschild DIR  the same with a child made by clone(CLONE_NEWPID): process 1 of
 *                   a new pid namespace (run under `unshare -p -f`, main is process 1
 *                   of its own too: both see getpid() == 1).
 *   main nomemfd DIR  memfd_create refused (a seccomp filter: EPERM), so that dyn
 *                   cannot make its guard's shared page and falls back to the int3;
 *                   prints "ready" and waits for DIR/go, then dlopens libm.so.6.
 *   main nowipe DIR  the same with madvise(MADV_WIPEONFORK) refused: dyn keeps the
 *                   guard (a forked copy told by the pid alone) and says so.
 *   main leftover DIR  a jump of its own at r_brk (not to a dyn trampoline) and an open
 *                   memfd named qpt-brk, as a killed dyn's; prints "ready", waits for
 *                   DIR/go (after `dyn clean`), and returns when the jump was left
 *                   alone and the descriptor closed (r_brk's bytes then put back).
 *   main cycles DIR LIB  prints "ready"; for each line N on its input dlopens LIB,
 *                   calls its lib_sum(100) and dlcloses it, N times, then prints
 *                   "done N"; exits 0 at the end of its input.
 *   main tracer DIR  a memfd named qpt-vars, its own, open and mapped, and a thread (not
 *                   the first) tracing a child; prints "ready", waits for DIR/go, and
 *                   returns when the descriptor is still open.
 *   main ownfd DIR   the same without the tracing thread.
 *   main tramps DIR  prints "ready", then "session ADDR" each time dyn's jump appears at
 *                   r_brk (ADDR: the trampoline), and "out rets" (or "out code") each
 *                   time it goes again, whether the trampoline's code is then all
 *                   rets (retired), until DIR/go exists.
 * Each prints "returned" and exits 0 when the call came back. Without dyn's jump
 * within 20 s: "no guard", exit 2.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

extern struct r_debug _r_debug;
void held(void);
/* held: its caller's return address on top of the stack at the ud2, as at r_brk. */
__asm__(".text\n.globl held\n.type held,@function\nheld:\n\tud2\n\tret\n");

static const char *dir;
static uint64_t tramp, resume; /* the trampoline; its instruction after the futex call */
static int wait_for_go;

static void
nap_ms(int ms)
{
    struct timespec d = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&d, NULL);
}

static void
on_sigill(int sig, siginfo_t *si, void *ctx)
{
    ucontext_t *uc = ctx;
    char go[4096];
    (void)sig;
    (void)si;
    uc->uc_mcontext.gregs[REG_RIP] = (greg_t)resume;
    if (!wait_for_go)
        return;
    snprintf(go, sizeof(go), "%s/go", dir);
    printf("handler\n");
    fflush(stdout);
    while (access(go, F_OK) != 0)
        nap_ms(10);
}

/* System call NR fails with EPERM from now on, in every thread (the others allowed);
 * only when its third argument is ARG2 (its low 32 bits), unless ARG2 is -1. */
static int
refuse(unsigned nr, long arg2)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)arg2, 0, arg2 == -1 ? 0 : 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
        || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0;
}

/* The `tracer` mode (see the top): a thread, not the first, traces child ARG. */
static void *
tracer_thread(void *arg)
{
    pid_t c = (pid_t)(intptr_t)arg;
    char go[4096];
    if (ptrace(PTRACE_SEIZE, c, NULL, NULL) != 0)
        return (void *)1;
    printf("ready\n");
    fflush(stdout);
    snprintf(go, sizeof(go), "%s/go", dir);
    while (access(go, F_OK) != 0)
        nap_ms(10);
    ptrace(PTRACE_DETACH, c, NULL, NULL);
    return NULL;
}

/* The `tracer` mode, or with TRACING 0 the `ownfd` one; its exit status. */
static int
tracer(int tracing)
{
    pid_t c = fork();
    if (c == 0) {
        for (;;)
            pause();
    }
    /* (after the fork: the child holds none of it) */
    int fd = (int)syscall(SYS_memfd_create, "qpt-vars", 0);
    void *m = fd >= 0 && ftruncate(fd, 4096) == 0
        ? mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    pthread_t t;
    void *r = (void *)1;
    if (m != MAP_FAILED && !tracing) {
        char go[4096];
        printf("ready\n");
        fflush(stdout);
        snprintf(go, sizeof(go), "%s/go", dir);
        while (access(go, F_OK) != 0)
            nap_ms(10);
        r = NULL;
    } else if (m != MAP_FAILED
               && pthread_create(&t, NULL, tracer_thread, (void *)(intptr_t)c) == 0)
        pthread_join(t, &r);
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
    if (r != NULL || fcntl(fd, F_GETFD) < 0) /* (closed under it: harmed) */
        return 1;
    printf("returned\n");
    return 0;
}

/* The `leftover` mode (see the top); its exit status. */
static int
leftover(void)
{
    uint8_t *b = (uint8_t *)_r_debug.r_brk, old[5], jmp[5] = { 0xe9, 0, 0, 0, 0 };
    uintptr_t pg = (uintptr_t)b & ~(uintptr_t)4095;
    char go[4096];
    int fd = (int)syscall(SYS_memfd_create, "qpt-brk", 0), rc = 0;

    if (b == NULL || fd < 0 || mprotect((void *)pg, 8192, PROT_READ | PROT_WRITE | PROT_EXEC))
        return 1;
    memcpy(old, b, 5);
    memcpy(b, jmp, 5); /* (to r_brk + 5: never run, no dlopen meanwhile) */
    printf("ready\n");
    fflush(stdout);
    snprintf(go, sizeof(go), "%s/go", dir);
    while (access(go, F_OK) != 0)
        nap_ms(10);
    if (memcmp(b, jmp, 5) != 0) {
        printf("the jump was taken out\n");
        rc = 1;
    }
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) {
        printf("the descriptor is still open\n");
        rc = 1;
    }
    memcpy(b, old, 5);
    if (rc == 0)
        printf("returned\n");
    return rc;
}

/* The `cycles` mode (see the top) with the library LIB; its exit status. */
static int
cycles(const char *lib)
{
    char line[64];
    printf("ready\n");
    fflush(stdout);
    while (fgets(line, sizeof(line), stdin) != NULL) {
        int n = atoi(line);
        for (int i = 0; i < n; i++) {
            void *h = dlopen(lib, RTLD_NOW);
            long (*f)(int) = h != NULL ? (long (*)(int))dlsym(h, "lib_sum") : NULL;
            if (f == NULL)
                return 1;
            f(100);
            dlclose(h);
        }
        printf("done %d\n", n);
        fflush(stdout);
    }
    return 0;
}

/* The `tramps` mode (see the top); its exit status. */
static int
sessions(void)
{
    const volatile uint8_t *b = (const uint8_t *)_r_debug.r_brk;
    char go[4096];
    int in = 0;
    printf("ready\n");
    fflush(stdout);
    snprintf(go, sizeof(go), "%s/go", dir);
    uint64_t was = 0;
    while (b != NULL && access(go, F_OK) != 0) {
        if (b[0] == 0xe9 && !in) {
            int32_t rel;
            memcpy(&rel, (const void *)(b + 1), 4);
            was = (uint64_t)(uintptr_t)b + 5 + (uint64_t)(int64_t)rel;
            printf("session %#llx\n", (unsigned long long)was);
            fflush(stdout);
        }
        if (b[0] != 0xe9 && in) { /* r_brk put back: the trampoline's code retired? */
            const volatile uint8_t *t = (const uint8_t *)(uintptr_t)was;
            int rets = 1;
            for (int i = 0; i < 88; i++) /* (TS_OFF) */
                rets &= t[i] == 0xc3;
            printf("out %s\n", rets ? "rets" : "code");
            fflush(stdout);
        }
        in = b[0] == 0xe9;
        nap_ms(2);
    }
    printf("returned\n");
    return 0;
}

/* The trampoline r_brk jumps to, and the instruction after its futex call (a syscall
 * followed by the loop's cmpl of the lock word); 0 when dyn's jump is not there. */
static int
find_guard(void)
{
    const uint8_t *b = (const uint8_t *)_r_debug.r_brk;
    int32_t rel;
    if (b == NULL || b[0] != 0xe9)
        return 0;
    memcpy(&rel, b + 1, 4);
    tramp = (uint64_t)(uintptr_t)b + 5 + (uint64_t)(int64_t)rel;
    const uint8_t *t = (const uint8_t *)(uintptr_t)tramp;
    for (int i = 0; i < 120; i++)
        if (t[i] == 0x0f && t[i + 1] == 0x05 && t[i + 2] == 0x81 && t[i + 3] == 0x3d)
            resume = tramp + (uint64_t)i + 2;
    return resume != 0;
}

int
main(int argc, char **argv)
{
    struct sigaction sa;
    int i;

    if (argc == 4 && strcmp(argv[1], "cycles") == 0)
        return cycles(argv[3]);
    if (argc != 3)
        return 2;
    dir = argv[2];
    if (strcmp(argv[1], "leftover") == 0)
        return leftover();
    if (strcmp(argv[1], "tramps") == 0)
        return sessions();
    if (strcmp(argv[1], "tracer") == 0 || strcmp(argv[1], "ownfd") == 0)
        return tracer(argv[1][0] == 't');
    if (strcmp(argv[1], "nomemfd") == 0 || strcmp(argv[1], "nowipe") == 0) {
        char go[4096];
        if (argv[1][2] == 'm' ? refuse(SYS_memfd_create, -1) != 0
                              : refuse(SYS_madvise, 18 /* MADV_WIPEONFORK */) != 0)
            return 1;
        printf("ready\n");
        fflush(stdout);
        snprintf(go, sizeof(go), "%s/go", dir);
        while (access(go, F_OK) != 0)
            nap_ms(10);
        if (dlopen("libm.so.6", RTLD_NOW) == NULL)
            return 1;
        printf("returned\n");
        return 0;
    }
    printf("ready\n");
    fflush(stdout);
    for (i = 0; i < 2000 && !find_guard(); i++)
        nap_ms(10);
    if (i == 2000) {
        printf("no guard\n");
        return 2;
    }
    printf("guard\n");
    fflush(stdout);
    if (strcmp(argv[1], "child") == 0 || strcmp(argv[1], "nschild") == 0) {
        pid_t c = argv[1][0] == 'c' ? fork()
                                    : (pid_t)syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0);
        int st;
        if (c == 0) {
            ((void (*)(void))(uintptr_t)tramp)();
            printf("child returned\n");
            fflush(stdout);
            _exit(0);
        }
        if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return 1;
        printf("returned\n");
        return 0;
    }
    wait_for_go = strcmp(argv[1], "after") == 0;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_sigill;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGILL, &sa, NULL);
    held();
    printf("returned\n");
    return 0;
}
