/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The AArch64 qp runtime (runtime/qprt_a64.bin) run the way a rewritten program runs it,
 * under qemu-aarch64 (tests/a64.sh cross-compiles this with arch/aarch64/). The blob is
 * mapped at a load bias from the link-time addresses in its parameter block (as in a PIE),
 * with its state page and counters after it, as editor/elfw_rewrite.c lays them out; its
 * start is entered on an initial stack (argc, argv, envp, auxv) with every register set
 * to a marker, and must continue at the "original entry" with all of them (but x16, which
 * carries the jump) and NZCV as they were. A second copy, loaded from a file as a
 * rewritten library's, is started as its DT_INIT and must go on to the library's own with
 * the same arguments, counting into a profile named after that file (it asks for
 * switchable increments, which AArch64 has not: the profile must say QP_PROF_RACY and a
 * line must say why). Then code emitted by arch/aarch64/ counts through the mapped
 * counters: plain increments (spilled, and with dead registers), a forked child after the
 * fork hook, four threads with atomic increments (ldxr/stxr and LSE) after the thread
 * hook, and the exit hook before exit (an exit dump, its registers and stack), also
 * around an exec that fails (the exec hook cancels that dump).
 *
 * Usage: rt_harness BLOB LIBRARY (the library's file, written here). The profiles go
 * where $QP_PROFILE says (the library's: $QP_PROFILE.LIBRARY's base name). Prints, for
 * the profile reader to confirm (tests/a64/profread.c), "expect KEY VALUE" lines
 * ("expectlib" for the library's profile), and "FAIL ..." lines for what it checks
 * itself; exit 0 when it found no failure.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arch/aarch64/a64_priv.h"
#include "base/qp_format.h"
#include "runtime/qprt.h"

#define LINK 0x10000000ull /* link-time address of the blob */
#define BIAS 0x05550000ull /* load bias (a page multiple) */
#define RUN (LINK + BIAS)
#define STATE_OFF 0x10000ull
#define CTR_OFF (STATE_OFF + QPRT_STATE_SIZE)
#define NCTR 16
#define CODE_OFF 0x20000ull
#define MAP_LEN 0x40000ull
/* A rewritten shared library's runtime: the same blob, loaded from a file (the runtime
 * names its profile after the file it finds in /proc/self/maps) at its own bias. */
#define LIB_LINK 0x30000000ull
#define LIB_BIAS 0x01230000ull
#define LIBRUN (LIB_LINK + LIB_BIAS)
#define NLIB 4
#define THREADS 4
#define PER_THREAD 20000

static int failures;
#define FAIL(...)                                                                        \
    do {                                                                                 \
        printf("FAIL ");                                                                 \
        printf(__VA_ARGS__);                                                             \
        printf("\n");                                                                    \
        failures++;                                                                      \
    } while (0)

/* The start's way in and out: qh_call_start(start, sp) sets every register to 0x1000 + n
 * and NZCV to Z|C, switches to SP and jumps to START; the runtime continues at qh_resume,
 * which records the registers in qh_after (x0..x30, NZCV, sp) and returns to the caller. */
uint64_t qh_saved_sp, qh_after[33], qh_call_sp, qh_call_fp, qh_call_ret;
void qh_call_start(uint64_t start, uint64_t *sp);
void qh_resume(void);
/* Call FN, recording sp, x29 and the return address there (for the exit dump). */
void qh_call_record(void (*fn)(void));
__asm__(".text\n"
        ".globl qh_call_start\n"
        "qh_call_start:\n"
        "    stp x29, x30, [sp, #-96]!\n"
        "    stp x19, x20, [sp, #16]\n"
        "    stp x21, x22, [sp, #32]\n"
        "    stp x23, x24, [sp, #48]\n"
        "    stp x25, x26, [sp, #64]\n"
        "    stp x27, x28, [sp, #80]\n"
        "    adrp x2, qh_saved_sp\n"
        "    mov x3, sp\n"
        "    str x3, [x2, :lo12:qh_saved_sp]\n"
        "    mov sp, x1\n"
        "    mov x16, x0\n"
        "    movz x0, #0x6000, lsl #16\n" /* Z and C */
        "    msr nzcv, x0\n"
        "    .irp n,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,17,18,19,20,21,22,23,24,25,26,27,28,29,30\n"
        "    movz x\\n, #(0x1000 + \\n)\n"
        "    .endr\n"
        "    br x16\n"
        ".globl qh_resume\n"
        "qh_resume:\n"
        "    stp x0, x1, [sp, #-16]!\n"
        "    adrp x0, qh_after\n"
        "    add x0, x0, :lo12:qh_after\n"
        "    stp x2, x3, [x0, #16]\n"
        "    stp x4, x5, [x0, #32]\n"
        "    stp x6, x7, [x0, #48]\n"
        "    stp x8, x9, [x0, #64]\n"
        "    stp x10, x11, [x0, #80]\n"
        "    stp x12, x13, [x0, #96]\n"
        "    stp x14, x15, [x0, #112]\n"
        "    stp x16, x17, [x0, #128]\n"
        "    stp x18, x19, [x0, #144]\n"
        "    stp x20, x21, [x0, #160]\n"
        "    stp x22, x23, [x0, #176]\n"
        "    stp x24, x25, [x0, #192]\n"
        "    stp x26, x27, [x0, #208]\n"
        "    stp x28, x29, [x0, #224]\n"
        "    str x30, [x0, #240]\n"
        "    mrs x1, nzcv\n"
        "    str x1, [x0, #248]\n"
        "    add x1, sp, #16\n"
        "    str x1, [x0, #256]\n"
        "    ldp x2, x3, [sp], #16\n"
        "    stp x2, x3, [x0]\n"
        "    adrp x2, qh_saved_sp\n"
        "    ldr x3, [x2, :lo12:qh_saved_sp]\n"
        "    mov sp, x3\n"
        "    ldp x19, x20, [sp, #16]\n"
        "    ldp x21, x22, [sp, #32]\n"
        "    ldp x23, x24, [sp, #48]\n"
        "    ldp x25, x26, [sp, #64]\n"
        "    ldp x27, x28, [sp, #80]\n"
        "    ldp x29, x30, [sp], #96\n"
        "    ret\n"
        ".globl qh_call_record\n"
        "qh_call_record:\n"
        "    stp x29, x30, [sp, #-16]!\n"
        "    mov x29, sp\n"
        "    adrp x1, qh_call_sp\n"
        "    mov x2, sp\n"
        "    str x2, [x1, :lo12:qh_call_sp]\n"
        "    adrp x1, qh_call_fp\n"
        "    str x29, [x1, :lo12:qh_call_fp]\n"
        "    adr x2, 1f\n"
        "    adrp x1, qh_call_ret\n"
        "    str x2, [x1, :lo12:qh_call_ret]\n"
        "    blr x0\n"
        "1:  ldp x29, x30, [sp], #16\n"
        "    ret\n");

static uint8_t *code_next;

/* A function of the emitted code: EMIT writes the body at AT (run-time address), then a
 * `ret` follows. */
typedef int (*body_fn)(uint64_t at, uint8_t *out, size_t cap, const void *arg);

static void (*make_fn(body_fn emit, const void *arg))(void)
{
    uint8_t *at = code_next;
    int n = emit((uint64_t)(uintptr_t)at, at, 256, arg);
    if (n < 0) {
        FAIL("emitting code at %p: error %d", (void *)at, n);
        exit(1);
    }
    const uint8_t ret[4] = {0xc0, 0x03, 0x5f, 0xd6};
    memcpy(at + n, ret, 4);
    code_next = at + ((n + 4 + 15) & ~15);
    return (void (*)(void))(uintptr_t)at;
}

typedef struct inc {
    unsigned counter;
    int mode;
    uint32_t dead; /* registers dead there (a64_emit_counter_inc_at); 0: nothing known,
                    * a64_emit_counter_inc (which has no LSE form) */
    int lib;       /* a counter of the library's runtime, not the program's */
} inc_t;

/* The counter increment INC. */
static int
emit_inc(uint64_t at, uint8_t *out, size_t cap, const void *arg)
{
    const inc_t *i = arg;
    uint64_t ctr = (i->lib ? LIBRUN : RUN) + CTR_OFF + 8ull * i->counter;
    if (i->dead == 0 && i->mode != ARCH_INC_ATOMIC_LSE)
        return a64_emit_counter_inc(at, ctr, i->mode, out, cap);
    arch_snip_ctx_t ctx = {0};
    ctx.dead_regs = i->dead;
    return a64_emit_counter_inc_at(at, ctr, i->mode, &ctx, out, cap);
}

static int
emit_hook(uint64_t at, uint8_t *out, size_t cap, const void *arg)
{
    return a64_emit_call_protected(at, RUN + *(const unsigned *)arg, out, cap);
}

static uint64_t expect[NCTR];

static void
run_n(void (*fn)(void), unsigned counter, unsigned n)
{
    for (unsigned k = 0; k < n; k++)
        fn();
    expect[counter] += n;
}

static void (*thread_inc[2])(void);
static void *
thread_main(void *arg)
{
    (void)arg;
    for (int k = 0; k < PER_THREAD; k++) {
        thread_inc[0]();
        thread_inc[1]();
    }
    return NULL;
}

/* Does this kernel (or qemu-user, which ignores madvise) give a forked child a zeroed
 * MADV_WIPEONFORK page? The runtime knows a forked child by it (runtime/qprt.c). */
static int
wipeonfork_works(void)
{
    volatile uint8_t *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || madvise((void *)m, 4096, MADV_WIPEONFORK) != 0)
        return 0;
    m[0] = 1;
    pid_t pid = fork();
    if (pid == 0)
        _exit(m[0] == 0 ? 0 : 1);
    int status;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status)
           && WEXITSTATUS(status) == 0;
}

/* The initial stack the kernel would build: argc, argv, NULL, envp, NULL, auxv. */
static uint64_t *
initial_stack(int argc, char **argv, char **envp)
{
    size_t len = 1 << 20;
    uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    size_t nenv = 0;
    while (envp[nenv])
        nenv++;
    size_t words = 1 + (size_t)argc + 1 + nenv + 1 + 6;
    uint64_t *sp = (uint64_t *)(m + len - 64) - words;
    sp = (uint64_t *)((uintptr_t)sp & ~(uintptr_t)15);
    size_t k = 0;
    sp[k++] = (uint64_t)argc;
    for (int i = 0; i < argc; i++)
        sp[k++] = (uint64_t)(uintptr_t)argv[i];
    sp[k++] = 0;
    for (size_t i = 0; i < nenv; i++)
        sp[k++] = (uint64_t)(uintptr_t)envp[i];
    sp[k++] = 0;
    sp[k++] = 6; /* AT_PAGESZ */
    sp[k++] = 4096;
    sp[k++] = 23; /* AT_SECURE */
    sp[k++] = 0;
    sp[k++] = 0; /* AT_NULL */
    sp[k++] = 0;
    return sp;
}

/* The library's own DT_INIT, which its runtime's start must call with its arguments. */
static int lib_init_calls, lib_init_argc;
static char **lib_init_argv, **lib_init_envp;
static void
lib_own_init(int argc, char **argv, char **envp)
{
    lib_init_calls++;
    lib_init_argc = argc;
    lib_init_argv = argv;
    lib_init_envp = envp;
}

/* Patch the blob at BLOB (N bytes) into the library's, write it to PATH and map it from
 * there at LIBRUN, its state and counters after it. */
static int
load_lib(const char *blob_path, const char *path)
{
    static uint8_t b[STATE_OFF];
    int fd = open(blob_path, O_RDONLY);
    ssize_t n = fd < 0 ? -1 : read(fd, b, sizeof b);
    if (fd >= 0)
        close(fd);
    if (n < (ssize_t)sizeof(qprt_params_t))
        return -1;
    qprt_params_t p;
    memcpy(&p, b, sizeof p);
    p.self = LIB_LINK;
    p.entry = 0;
    p.state = LIB_LINK + STATE_OFF;
    p.counters = LIB_LINK + CTR_OFF;
    p.counters_size = 4096;
    p.ncounters = NLIB;
    p.id = 0x11b5a64a64ull;
    /* Switchable increments are an x86-64 prefix byte: asked for anyway, the AArch64
     * runtime must say that counts may be lost (QP_PROF_RACY and a line), not pretend. */
    p.flags = QPRT_F_LIBRARY | QPRT_F_SWITCH | QPRT_F_LOCK_AT_START;
    p.init = (uint64_t)(uintptr_t)lib_own_init - LIB_BIAS;
    memcpy(b, &p, sizeof p);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, b, (size_t)n) != n) {
        perror(path);
        return -1;
    }
    void *m = mmap((void *)(uintptr_t)LIBRUN, (size_t)n, PROT_READ | PROT_EXEC,
                   MAP_PRIVATE | MAP_FIXED_NOREPLACE, fd, 0);
    close(fd);
    void *st = mmap((void *)(uintptr_t)(LIBRUN + STATE_OFF), QPRT_STATE_SIZE + 4096,
                    PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                    -1, 0);
    if (m != (void *)(uintptr_t)LIBRUN || st != (void *)(uintptr_t)(LIBRUN + STATE_OFF)) {
        perror("mmap the library");
        return -1;
    }
    __builtin___clear_cache((char *)m, (char *)m + n);
    return 0;
}

static int
load_blob(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        perror(path);
        return -1;
    }
    uint8_t *m = mmap((void *)(uintptr_t)RUN, MAP_LEN, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (m != (uint8_t *)(uintptr_t)RUN) {
        perror("mmap at the load address");
        return -1;
    }
    ssize_t n = read(fd, m, STATE_OFF);
    close(fd);
    if (n < (ssize_t)sizeof(qprt_params_t) || n >= (ssize_t)STATE_OFF) {
        fprintf(stderr, "%s: not a runtime blob (%zd bytes)\n", path, n);
        return -1;
    }
    qprt_params_t p;
    memcpy(&p, m, sizeof p);
    if (memcmp(p.magic, QPRT_MAGIC, 8) != 0) {
        fprintf(stderr, "%s: no parameter block\n", path);
        return -1;
    }
    /* As editor/elfw_rewrite.c fills it: link-time addresses. */
    p.self = LINK;
    p.entry = (uint64_t)(uintptr_t)qh_resume - BIAS;
    p.state = LINK + STATE_OFF;
    p.counters = LINK + CTR_OFF;
    p.counters_size = 4096;
    p.ncounters = NCTR;
    p.id = 0x5151a64a64a64ull;
    p.flags = 0;
    memcpy(m, &p, sizeof p);
    __builtin___clear_cache((char *)m, (char *)m + STATE_OFF);
    if (mprotect(m, STATE_OFF, PROT_READ | PROT_EXEC) != 0) {
        perror("mprotect");
        return -1;
    }
    return 0;
}

int
main(int argc, char **argv, char **envp)
{
    if (argc != 3) {
        fprintf(stderr, "usage: rt_harness BLOB LIBRARY\n");
        return 2;
    }
    if (load_blob(argv[1]) != 0 || load_lib(argv[1], argv[2]) != 0)
        return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);

    /* 1. The start: every register and NZCV kept, sp as the kernel left it. */
    uint64_t *sp = initial_stack(argc, argv, envp);
    if (sp == NULL)
        return 2;
    qh_call_start(RUN + QPRT_START_OFF, sp);
    for (unsigned r = 0; r <= 30; r++)
        if (r != 16 && qh_after[r] != 0x1000u + r)
            FAIL("start: x%u is %#llx after the runtime's start, was %#x", r,
                 (unsigned long long)qh_after[r], 0x1000u + r);
    if (qh_after[16] != (uint64_t)(uintptr_t)qh_resume)
        FAIL("start: continued with x16 = %#llx, not the entry",
             (unsigned long long)qh_after[16]);
    if (qh_after[31] != 0x60000000u)
        FAIL("start: NZCV %#llx, was 0x60000000", (unsigned long long)qh_after[31]);
    if (qh_after[32] != (uint64_t)(uintptr_t)sp)
        FAIL("start: sp moved by %lld", (long long)(qh_after[32] - (uint64_t)(uintptr_t)sp));
    printf("expect runs 1\n");

    /* The code region, after the counters (as the rewriter's new text). */
    code_next = (uint8_t *)(uintptr_t)(RUN + CODE_OFF);
    uint8_t *code0 = code_next;
    static const inc_t incs[] = {
        {0, ARCH_INC_PLAIN, 0, 0},                 /* spilled x16/x17 */
        {1, ARCH_INC_PLAIN, 1u << 3 | 1u << 9, 0}, /* x3, x9 dead: no spill */
        {2, ARCH_INC_ATOMIC, 0, 0},                /* ldxr/stxr, spilled */
        {3, ARCH_INC_ATOMIC, 0x7u << 10, 0},       /* ... with x10-x12 dead */
        {4, ARCH_INC_ATOMIC_LSE, 0, 0},            /* stadd, spilled */
        {5, ARCH_INC_ATOMIC_LSE, 1u << 0 | 1u << 1, 0}, /* ... x0, x1 dead */
        {6, ARCH_INC_PLAIN, 0, 0},                 /* the forked child's */
        {7, ARCH_INC_PLAIN, 0, 0},                 /* the parent's after the fork */
        {8, ARCH_INC_ATOMIC, 0, 0},                /* threads: ldxr/stxr */
        {9, ARCH_INC_ATOMIC_LSE, 0, 0},            /* threads: stadd */
        {NCTR - 1, ARCH_INC_PLAIN, 0, 0},          /* the last counter */
    };
    void (*fn[sizeof incs / sizeof incs[0]])(void);
    for (size_t i = 0; i < sizeof incs / sizeof incs[0]; i++)
        fn[i] = make_fn(emit_inc, &incs[i]);
    static const inc_t lib_incs[] = {{0, ARCH_INC_PLAIN, 0, 1},
                                     {NLIB - 1, ARCH_INC_ATOMIC, 0, 1}};
    void (*lib_fn[2])(void) = {make_fn(emit_inc, &lib_incs[0]), make_fn(emit_inc, &lib_incs[1])};
    static const unsigned hooks[] = {QPRT_HOOK_OFF, QPRT_FORK_OFF, QPRT_THREAD_OFF,
                                     QPRT_EXEC_OFF};
    void (*exit_hook)(void) = make_fn(emit_hook, &hooks[0]);
    void (*fork_hook)(void) = make_fn(emit_hook, &hooks[1]);
    void (*thread_hook)(void) = make_fn(emit_hook, &hooks[2]);
    void (*exec_hook)(void) = make_fn(emit_hook, &hooks[3]);
    __builtin___clear_cache((char *)code0, (char *)code_next);
    if (mprotect(code0, MAP_LEN - CODE_OFF, PROT_READ | PROT_EXEC) != 0) {
        perror("mprotect code");
        return 2;
    }

    /* 1b. A library's start, called by the dynamic linker as DT_INIT(argc, argv, envp):
     * it goes on to the library's own DT_INIT with the same arguments, and counts into a
     * profile named after the library's file. */
    typedef void (*dt_init_fn)(int, char **, char **);
    ((dt_init_fn)(uintptr_t)(LIBRUN + QPRT_LIBINIT_OFF))(argc, argv, envp);
    if (lib_init_calls != 1 || lib_init_argc != argc || lib_init_argv != argv
        || lib_init_envp != envp)
        FAIL("library start: its own DT_INIT called %d times, with (%d, %p, %p)",
             lib_init_calls, lib_init_argc, (void *)lib_init_argv, (void *)lib_init_envp);
    for (size_t i = 0; i < 2; i++) {
        for (unsigned k = 0; k < 11 + 20 * i; k++)
            lib_fn[i]();
        printf("expectlib counter%u %u\n", lib_incs[i].counter, 11 + 20 * (unsigned)i);
    }
    printf("expectlib runs 1\n");
    printf("expectlib flags %#x\n", QP_PROF_RACY);
    printf("expectlib id %#llx\n", 0x11b5a64a64ull);

    /* 2. Plain and atomic increments in one thread. */
    for (unsigned i = 0; i < 6; i++)
        run_n(fn[i], incs[i].counter, 100 * (i + 1) + 7);
    run_n(fn[10], NCTR - 1, 3);

    /* 3. fork: the child counts into a slot of its own after the fork hook. */
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 2;
    }
    fork_hook();
    if (pid == 0) {
        for (int k = 0; k < 1000; k++)
            fn[6]();
        _exit(0);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        FAIL("fork: the child did not exit 0 (status %#x)", status);
    expect[6] += 1000;
    run_n(fn[7], 7, 500);
    if (wipeonfork_works()) {
        printf("expect forks 1\n");
    } else {
        /* The child then counts on in its parent's slot: the sums stay exact here
         * because the parent waits; with both counting at once plain increments race. */
        printf("expect forks 0\n");
        printf("note: MADV_WIPEONFORK is ignored here (qemu-user): a forked child is not "
               "seen, it counts in its parent's slot\n");
    }

    /* 4. Threads, after the thread hook: atomic increments lose nothing. */
    thread_hook();
    thread_inc[0] = fn[8];
    thread_inc[1] = fn[9];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, thread_main, NULL) != 0) {
            FAIL("pthread_create");
            return 1;
        }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    expect[8] += THREADS * PER_THREAD;
    expect[9] += THREADS * PER_THREAD;

    /* 5. The exit hook before an exec that fails (the exec hook cancels that dump), and
     * again before exit: one dump kept, with the registers where the exit call was. */
    qh_call_record(exit_hook);
    char *no_argv[] = {"/nonexistent/qpt-a64", NULL};
    execve(no_argv[0], no_argv, envp);
    exec_hook();
    qh_call_record(exit_hook);
    uint64_t stack0 = *(volatile uint64_t *)(uintptr_t)qh_call_sp;
    printf("expect ndumps 2\n");
    printf("expect cancelled 1\n");
    printf("expect kept_dumps 1\n");
    printf("expect dump_bias %#llx\n", (unsigned long long)BIAS);
    printf("expect dump_pc %#llx\n", (unsigned long long)(uintptr_t)exit_hook);
    printf("expect dump_sp %#llx\n", (unsigned long long)qh_call_sp);
    printf("expect dump_x29 %#llx\n", (unsigned long long)qh_call_fp);
    printf("expect dump_x30 %#llx\n", (unsigned long long)qh_call_ret);
    printf("expect dump_tid %d\n", (int)getpid());
    /* the stack saved from sp up: its first word is what qh_call_record stored there
     * (x29), read before anything else runs below main's frame */
    printf("expect dump_stack0 %#llx\n", (unsigned long long)stack0);
    for (unsigned c = 0; c < NCTR; c++)
        printf("expect counter%u %llu\n", c, (unsigned long long)expect[c]);
    /* The counters the runtime mapped are the program's: what the process sees. */
    const volatile uint64_t *ctr = (const uint64_t *)(uintptr_t)(RUN + CTR_OFF);
    for (unsigned c = 0; c < NCTR; c++)
        if (c != 6 && ctr[c] != expect[c]) /* 6: the child's slot */
            FAIL("counter %u reads %llu in the process, expected %llu", c,
                 (unsigned long long)ctr[c], (unsigned long long)expect[c]);
    printf("rt_harness: %d failures\n", failures);
    exit(failures ? 1 : 0);
}
