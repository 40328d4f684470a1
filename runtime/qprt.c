/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The runtime an instrumented program carries (freestanding: no libc, no relocations,
 * no writable data of its own; static binaries have no libc to offer and the blob runs
 * before the dynamic linker's clients are initialised).
 *
 * At start (qprt_init, before the program's entry point): find the profile path
 * ($QP_PROFILE with %p expanded to the process id, else the executable's path + ".qp"),
 * open or create the profile, check that it belongs to this rewrite, and map its
 * counter pages MAP_SHARED|MAP_FIXED over the program's counter pages. From then on
 * every increment lands in the page cache: counts survive a crash or SIGKILL, cost
 * nothing extra per hit, and several runs (and forked children, which share the
 * mapping) accumulate. If anything fails the program runs on with its anonymous
 * counters and one line on stderr says the counts are not saved.
 *
 * At exit() below main (qprt_exit_dump, called by the snippet before such a call): copy
 * the registers and the top of the stack into a dump slot of the profile, so that qp can
 * unwind it and restore flow conservation for the frames that never return.
 */
#include <stddef.h>
#include <stdint.h>

#include "driver/qp_format.h"
#include "runtime/qprt.h"

#define HIDDEN __attribute__((visibility("hidden")))

/* Filled in by the rewriter (the blob's first bytes). Not const: never folded. */
HIDDEN qprt_params_t qprt_params __attribute__((section(".qprt.params"), used)) = {
    .magic = QPRT_MAGIC,
};

/* The runtime's writable state, in the page before counter 0. */
typedef struct qprt_state {
    uint64_t stack_top;   /* the initial stack pointer (main thread) */
    uint64_t prof;        /* address of the mapped profile (header, counters, dumps), or 0 */
    uint64_t dumped;      /* an exit dump was taken by this process */
} qprt_state_t;

/* Entry points (qprt_entry.S calls them). */
uint64_t qprt_init(uint64_t *sp) HIDDEN;
void qprt_exit_dump(uint64_t *saved) HIDDEN;

/*****************************************************************************
 * System calls
 */

static long
sys3(long nr, long a, long b, long c)
{
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return r;
}

static long
sys6(long nr, long a, long b, long c, long d, long e, long f)
{
    long r;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return r;
}

enum {
    SYS_read = 0, SYS_write = 1, SYS_open = 2, SYS_close = 3, SYS_lseek = 8, SYS_mmap = 9,
    SYS_munmap = 11, SYS_pread64 = 17, SYS_pwrite64 = 18, SYS_getpid = 39, SYS_ftruncate = 77,
    SYS_readlink = 89, SYS_gettid = 186, SYS_process_vm_readv = 310,
};
enum { O_RDWR = 2, O_CREAT = 0100, O_EXCL = 0200, O_CLOEXEC = 02000000 };
enum { PROT_READ = 1, PROT_WRITE = 2, MAP_SHARED = 1, MAP_FIXED = 0x10 };
#define EEXIST 17

/*****************************************************************************
 * Small helpers (no libc)
 */

/* A system call's return value that is an error (-4095 .. -1). */
static int
is_err(long r)
{
    return (unsigned long)r >= (unsigned long)-4095L;
}

static void
mem_copy(void *d, const void *s, size_t n)
{
    volatile uint8_t *dd = d; /* volatile: keep the compiler from calling memcpy */
    const uint8_t *ss = s;
    for (size_t i = 0; i < n; i++)
        dd[i] = ss[i];
}

static int
mem_eq(const void *a, const void *b, size_t n)
{
    const uint8_t *x = a, *y = b;
    for (size_t i = 0; i < n; i++)
        if (x[i] != y[i])
            return 0;
    return 1;
}

/* Append S to BUF (CAP bytes, *N used, always NUL-terminated). */
static void
append(char *buf, size_t cap, size_t *n, const char *s)
{
    while (*s && *n + 1 < cap)
        buf[(*n)++] = *s++;
    buf[*n] = '\0';
}

static void
append_u64(char *buf, size_t cap, size_t *n, uint64_t v)
{
    char d[24];
    int k = 0;
    do {
        d[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    char s[24];
    for (int i = 0; i < k; i++)
        s[i] = d[k - 1 - i];
    s[k] = '\0';
    append(buf, cap, n, s);
}

static void
warn(const char *path, const char *why)
{
    char line[1400];
    size_t n = 0;
    append(line, sizeof(line), &n, "qp: ");
    append(line, sizeof(line), &n, path);
    append(line, sizeof(line), &n, ": ");
    append(line, sizeof(line), &n, why);
    append(line, sizeof(line), &n, "; counts of this run are not saved\n");
    sys3(SYS_write, 2, (long)line, (long)n);
}

/* $QP_PROFILE with %p expanded, else the executable's path + ".qp", into BUF. */
static int
profile_path(uint64_t *sp, char *buf, size_t cap)
{
    uint64_t argc = sp[0];
    char **argv = (char **)(sp + 1);
    char **envp = argv + argc + 1;
    size_t n = 0;
    buf[0] = '\0';
    for (char **e = envp; *e; e++) {
        const char *v = *e;
        if (!mem_eq(v, "QP_PROFILE=", 11))
            continue;
        v += 11;
        if (*v == '\0')
            break;
        for (; *v && n + 1 < cap; v++) {
            if (v[0] == '%' && v[1] == 'p') {
                append_u64(buf, cap, &n, (uint64_t)sys3(SYS_getpid, 0, 0, 0));
                v++;
            } else {
                buf[n++] = *v;
                buf[n] = '\0';
            }
        }
        return n + 1 < cap ? 0 : -1;
    }
    long r = sys3(SYS_readlink, (long)"/proc/self/exe", (long)buf, (long)cap - 4);
    if (r <= 0) {
        if (argc == 0 || argv[0] == NULL)
            return -1;
        append(buf, cap - 3, &n, argv[0]);
    } else
        n = (size_t)r;
    buf[n] = '\0';
    if (n + 4 >= cap)
        return -1;
    append(buf, cap, &n, ".qp");
    return 0;
}

/*****************************************************************************
 * Start
 */

/* Bytes from the profile's start to the end of the last dump slot. */
static uint64_t
profile_size(const qprt_params_t *p, uint64_t *dumps_off)
{
    uint64_t cbytes = (p->ncounters * 8 + 4095) & ~(uint64_t)4095;
    *dumps_off = QP_PROF_HDR_SIZE + cbytes;
    return *dumps_off + (uint64_t)QP_PROF_MAX_DUMPS * QP_PROF_DUMP_SIZE;
}

/* Open or create the profile; returns its fd or a message in *WHY. */
static long
open_profile(const qprt_params_t *p, const char *path, const char **why)
{
    uint64_t dumps_off, size = profile_size(p, &dumps_off);
    long fd = sys3(SYS_open, (long)path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
        /* A new profile: size it, then write its header. */
        qp_prof_hdr_t h;
        uint8_t *hb = (uint8_t *)&h;
        for (size_t i = 0; i < sizeof(h); i++)
            hb[i] = 0;
        mem_copy(h.magic, QP_PROF_MAGIC, 8);
        h.version = QP_FORMAT_VERSION;
        h.id = p->id;
        h.ncounters = p->ncounters;
        h.dumps_off = dumps_off;
        long r = sys3(SYS_readlink, (long)"/proc/self/exe", (long)h.exe, sizeof(h.exe) - 1);
        if (r < 0)
            h.exe[0] = '\0';
        if (sys3(SYS_ftruncate, fd, (long)size, 0) < 0
            || sys6(SYS_pwrite64, fd, (long)&h, sizeof(h), 0, 0, 0) != (long)sizeof(h)) {
            sys3(SYS_close, fd, 0, 0);
            *why = "cannot write the profile";
            return -1;
        }
        return fd;
    }
    if (fd != -EEXIST) {
        *why = "cannot create the profile";
        return -1;
    }
    fd = sys3(SYS_open, (long)path, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
        *why = "cannot open the profile";
        return -1;
    }
    qp_prof_hdr_t h;
    long r = sys6(SYS_pread64, fd, (long)&h, sizeof(h), 0, 0, 0);
    if (r != (long)sizeof(h) || !mem_eq(h.magic, QP_PROF_MAGIC, 8)
        || h.version != QP_FORMAT_VERSION) {
        *why = "not a qp profile (remove it to start a new one)";
    } else if (h.id != p->id || h.ncounters != p->ncounters || h.dumps_off != dumps_off) {
        *why = "profile of another program or rewrite (remove it or set QP_PROFILE)";
    } else if (sys3(SYS_lseek, fd, 0, 2 /* SEEK_END */) < (long)size) {
        *why = "profile is truncated";
    } else
        return fd;
    sys3(SYS_close, fd, 0, 0);
    return -1;
}

uint64_t
qprt_init(uint64_t *sp)
{
    const qprt_params_t *p = &qprt_params;
    uint64_t bias = (uint64_t)(uintptr_t)p - p->self;
    qprt_state_t *st = (qprt_state_t *)(uintptr_t)(p->state + bias);
    st->stack_top = (uint64_t)(uintptr_t)sp;
    char path[1100];
    const char *why = "cannot name the profile";
    long fd = -1;
    if (profile_path(sp, path, sizeof(path)) == 0)
        fd = open_profile(p, path, &why);
    if (fd < 0) {
        warn(path[0] ? path : "profile", why);
        return p->entry + bias;
    }
    uint64_t dumps_off, size = profile_size(p, &dumps_off);
    long whole = sys6(SYS_mmap, 0, (long)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    long ctr = 0;
    if (!is_err(whole) && p->counters_size > 0)
        ctr = sys6(SYS_mmap, (long)(p->counters + bias), (long)p->counters_size,
                   PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, QP_PROF_HDR_SIZE);
    sys3(SYS_close, fd, 0, 0);
    if (is_err(whole) || is_err(ctr)) {
        if (!is_err(whole))
            sys3(SYS_munmap, whole, (long)size, 0);
        warn(path, "cannot map the profile");
        return p->entry + bias;
    }
    st->prof = (uint64_t)whole;
    __atomic_fetch_add(&((qp_prof_hdr_t *)(uintptr_t)whole)->runs, 1, __ATOMIC_RELAXED);
    return p->entry + bias;
}

/*****************************************************************************
 * Exit dumps
 */

void
qprt_exit_dump(uint64_t *saved)
{
    const qprt_params_t *p = &qprt_params;
    uint64_t bias = (uint64_t)(uintptr_t)p - p->self;
    qprt_state_t *st = (qprt_state_t *)(uintptr_t)(p->state + bias);
    if (st->prof == 0 || st->dumped)
        return;
    st->dumped = 1;
    qp_prof_hdr_t *h = (qp_prof_hdr_t *)(uintptr_t)st->prof;
    uint64_t i = __atomic_fetch_add(&h->ndumps, 1, __ATOMIC_RELAXED);
    if (i >= QP_PROF_MAX_DUMPS)
        return;
    uint8_t *slot = (uint8_t *)(uintptr_t)(st->prof + h->dumps_off + i * QP_PROF_DUMP_SIZE);
    qp_dump_hdr_t *d = (qp_dump_hdr_t *)slot;
    /* saved[]: r15 r14 r13 r12 r11 r10 r9 r8 rbp rdi rsi rdx rcx rbx rax flags, then the
     * hook's return address; the snippet moved %rsp down by 128 before calling. */
    uint64_t ret = saved[16];
    uint64_t rsp = (uint64_t)(uintptr_t)(saved + 17) + 128;
    d->bias = bias;
    d->pc = ret - 10; /* the snippet's start: same unwind row as the exit call */
    d->regs[0] = saved[14];  /* rax */
    d->regs[1] = saved[11];  /* rdx */
    d->regs[2] = saved[12];  /* rcx */
    d->regs[3] = saved[13];  /* rbx */
    d->regs[4] = saved[10];  /* rsi */
    d->regs[5] = saved[9];   /* rdi */
    d->regs[6] = saved[8];   /* rbp */
    d->regs[7] = rsp;
    for (int r = 8; r < 16; r++)
        d->regs[r] = saved[7 - (r - 8)]; /* r8 .. r15 */
    d->regs[16] = d->pc;
    d->tid = (uint64_t)sys3(SYS_gettid, 0, 0, 0);
    /* The stack: up to the main thread's initial stack pointer, or as much as is mapped
     * (process_vm_readv stops at the first unmapped page instead of faulting). */
    uint64_t len = QP_PROF_DUMP_STACK;
    if (rsp <= st->stack_top && st->stack_top - rsp < len)
        len = st->stack_top - rsp;
    struct iov { uint64_t base, len; } local = { (uint64_t)(uintptr_t)(slot + 4096), len },
                                        remote = { rsp, len };
    long got = sys6(SYS_process_vm_readv, sys3(SYS_getpid, 0, 0, 0), (long)&local, 1,
                    (long)&remote, 1, 0);
    d->stack_len = got > 0 ? (uint64_t)got : 0;
    __atomic_store_n(&d->valid, 1, __ATOMIC_RELEASE);
}
