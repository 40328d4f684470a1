/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_QPRT_ISA_H
#define QP_QPRT_ISA_H
/*
 * PURPOSE: what the runtime (qprt.c) needs from the ISA and the kernel's ABI on it, one
 * block per ISA: the system call instruction, the call numbers, the open flags and the
 * kernel's struct stat (both differ between x86-64 and the generic table AArch64 uses),
 * a spin-wait hint, a cycle counter, and how an exit hook's saved registers become an
 * exit dump (qp_dump_hdr_t). AArch64 has no open, stat, link, unlink, rename or
 * readlink system calls: the sys_* wrappers below take their *at forms there.
 * Included by runtime/qprt.c only (freestanding: no libc).
 */
#include <stdint.h>

#include "base/qp_format.h"

#if defined(__x86_64__)

static long
sys3(long nr, long a, long b, long c)
{
    long r;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(nr), "D"(a), "S"(b), "d"(c)
                     : "rcx", "r11", "memory");
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
    SYS_read = 0,
    SYS_write = 1,
    SYS_open = 2,
    SYS_close = 3,
    SYS_stat = 4,
    SYS_fstat = 5,
    SYS_mmap = 9,
    SYS_mprotect = 10,
    SYS_munmap = 11,
    SYS_nanosleep = 35,
    SYS_rt_sigprocmask = 14,
    SYS_pread64 = 17,
    SYS_lseek = 8,
    SYS_pwrite64 = 18,
    SYS_madvise = 28,
    SYS_getpid = 39,
    SYS_kill = 62,
    SYS_flock = 73,
    SYS_ftruncate = 77,
    SYS_getcwd = 79,
    SYS_rename = 82,
    SYS_link = 86,
    SYS_unlink = 87,
    SYS_readlink = 89,
    SYS_geteuid = 107,
    SYS_gettid = 186,
    SYS_linkat = 265,
    SYS_fallocate = 285,
    SYS_process_vm_readv = 310,
};
enum {
    O_RDONLY = 0,
    O_RDWR = 2,
    O_CREAT = 0100,
    O_EXCL = 0200,
    O_NOCTTY = 0400,
    O_NONBLOCK = 04000,
    O_NOFOLLOW = 0400000,
    O_CLOEXEC = 02000000,
    O_TMPFILE = 020200000, /* with O_DIRECTORY */
};

/* The kernel's struct stat on x86-64 (the fields used). */
typedef struct kstat {
    uint64_t dev, ino, nlink;
    uint32_t mode, uid, gid, pad0;
    uint64_t rdev;
    int64_t size, blksize, blocks;
    uint64_t times[6], unused[3];
} kstat_t;
_Static_assert(sizeof(kstat_t) == 144, "struct stat on x86-64");

static long sys_open(const char *path, long flags, long mode)
{
    return sys3(SYS_open, (long)path, flags, mode);
}
static long sys_stat(const char *path, kstat_t *ks)
{
    return sys3(SYS_stat, (long)path, (long)ks, 0);
}
static long sys_link(const char *from, const char *to)
{
    return sys3(SYS_link, (long)from, (long)to, 0);
}
static long sys_unlink(const char *path)
{
    return sys3(SYS_unlink, (long)path, 0, 0);
}
static long sys_rename(const char *from, const char *to)
{
    return sys3(SYS_rename, (long)from, (long)to, 0);
}
static long sys_readlink(const char *path, char *buf, long cap)
{
    return sys3(SYS_readlink, (long)path, (long)buf, cap);
}

static inline void
cpu_relax(void)
{
    __asm__ volatile("pause");
}

static uint64_t
cycles(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
}

/*
 * The registers an exit hook saved (qprt_entry.S: r15 r14 r13 r12 r11 r10 r9 r8 rbp rdi
 * rsi rdx rcx rbx rax flags, then the hook's return address; the snippet moved %rsp down
 * by 128 before calling) into D's pc and regs (DWARF x86-64 numbering). Returns the
 * program's stack pointer at the snippet.
 */
static uint64_t
dump_regs(qp_dump_hdr_t *d, const uint64_t *saved)
{
    uint64_t ret = saved[16];
    uint64_t rsp = (uint64_t)(uintptr_t)(saved + 17) + 128;
    d->pc = ret - 10;       /* the snippet's start: same unwind row as the exit call */
    d->regs[0] = saved[14]; /* rax */
    d->regs[1] = saved[11]; /* rdx */
    d->regs[2] = saved[12]; /* rcx */
    d->regs[3] = saved[13]; /* rbx */
    d->regs[4] = saved[10]; /* rsi */
    d->regs[5] = saved[9];  /* rdi */
    d->regs[6] = saved[8];  /* rbp */
    d->regs[7] = rsp;
    for (int r = 8; r < 16; r++)
        d->regs[r] = saved[7 - (r - 8)]; /* r8 .. r15 */
    d->regs[16] = d->pc;
    return rsp;
}

#elif defined(__aarch64__)

/* svc #0: the number in x8, arguments in x0..x5, the result in x0. */
static long
sys6(long nr, long a, long b, long c, long d, long e, long f)
{
    register long x8 __asm__("x8") = nr;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    register long x5 __asm__("x5") = f;
    __asm__ volatile("svc #0"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                     : "memory");
    return x0;
}

static long
sys3(long nr, long a, long b, long c)
{
    return sys6(nr, a, b, c, 0, 0, 0);
}

/* The generic system call table (include/uapi/asm-generic/unistd.h). */
enum {
    SYS_getcwd = 17,
    SYS_flock = 32,
    SYS_unlinkat = 35,
    SYS_linkat = 37,
    SYS_renameat = 38,
    SYS_ftruncate = 46,
    SYS_fallocate = 47,
    SYS_openat = 56,
    SYS_close = 57,
    SYS_lseek = 62,
    SYS_read = 63,
    SYS_write = 64,
    SYS_pread64 = 67,
    SYS_pwrite64 = 68,
    SYS_readlinkat = 78,
    SYS_newfstatat = 79,
    SYS_fstat = 80,
    SYS_nanosleep = 101,
    SYS_kill = 129,
    SYS_rt_sigprocmask = 135,
    SYS_getpid = 172,
    SYS_geteuid = 175,
    SYS_gettid = 178,
    SYS_munmap = 215,
    SYS_mmap = 222,
    SYS_mprotect = 226,
    SYS_madvise = 233,
    SYS_process_vm_readv = 270,
};
/* arch/arm64/include/uapi/asm/fcntl.h: O_DIRECTORY and O_NOFOLLOW differ from x86-64. */
enum {
    O_RDONLY = 0,
    O_RDWR = 2,
    O_CREAT = 0100,
    O_EXCL = 0200,
    O_NOCTTY = 0400,
    O_NONBLOCK = 04000,
    O_NOFOLLOW = 0100000,
    O_CLOEXEC = 02000000,
    O_TMPFILE = 020040000, /* __O_TMPFILE with O_DIRECTORY (040000) */
};

/* The kernel's generic struct stat (AArch64; the fields used). */
typedef struct kstat {
    uint64_t dev, ino;
    uint32_t mode, nlink, uid, gid;
    uint64_t rdev, pad1;
    int64_t size;
    int32_t blksize, pad2;
    int64_t blocks;
    uint64_t times[6];
    uint32_t unused[2];
} kstat_t;
_Static_assert(sizeof(kstat_t) == 128, "struct stat on AArch64");

enum { AT_FDCWD_ = -100 };
static long sys_open(const char *path, long flags, long mode)
{
    return sys6(SYS_openat, AT_FDCWD_, (long)path, flags, mode, 0, 0);
}
static long sys_stat(const char *path, kstat_t *ks)
{
    return sys6(SYS_newfstatat, AT_FDCWD_, (long)path, (long)ks, 0, 0, 0);
}
static long sys_link(const char *from, const char *to)
{
    return sys6(SYS_linkat, AT_FDCWD_, (long)from, AT_FDCWD_, (long)to, 0, 0);
}
static long sys_unlink(const char *path)
{
    return sys6(SYS_unlinkat, AT_FDCWD_, (long)path, 0, 0, 0, 0);
}
static long sys_rename(const char *from, const char *to)
{
    return sys6(SYS_renameat, AT_FDCWD_, (long)from, AT_FDCWD_, (long)to, 0, 0);
}
static long sys_readlink(const char *path, char *buf, long cap)
{
    return sys6(SYS_readlinkat, AT_FDCWD_, (long)path, (long)buf, cap, 0, 0);
}

static inline void
cpu_relax(void)
{
    __asm__ volatile("yield");
}

/* The virtual counter (readable at EL0 on Linux): only a seed for back-off here. */
static uint64_t
cycles(void)
{
    uint64_t v;
    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
    return v;
}

/*
 * The registers an exit hook saved (qprt_entry_a64.S: x0..x30 at saved[0..30], x30 being
 * the return into the snippet, NZCV at saved[31], the hook's sp at entry at saved[32]);
 * the snippet `stp x29, x30, [sp, #-16]!; bl hook` ran before, so the program's sp is 16
 * above and its x30 at sp - 8. Into D (qp_format.h, the AArch64 assignment of regs[]):
 * regs[0..5] x19..x24, regs[6] x29, regs[7] sp, regs[8..11] x25..x28, regs[15] x30,
 * regs[16] pc (the snippet's start: the unwind row of the exit call). Returns sp.
 */
static uint64_t
dump_regs(qp_dump_hdr_t *d, const uint64_t *saved)
{
    uint64_t sp = saved[32] + 16;
    d->pc = saved[30] - 8;
    for (int r = 0; r < 6; r++)
        d->regs[r] = saved[19 + r];
    d->regs[6] = saved[29];
    d->regs[7] = sp;
    for (int r = 8; r < 12; r++)
        d->regs[r] = saved[25 + (r - 8)];
    d->regs[15] = *(const uint64_t *)(uintptr_t)(sp - 8);
    d->regs[16] = d->pc;
    return sp;
}

#else
#error "the qp runtime supports x86-64 and AArch64"
#endif

#endif
