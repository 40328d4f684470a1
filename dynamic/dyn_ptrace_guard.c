/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The loader's breakpoint guarded by dyn's life (see "Following a running process" in
 * dyn_ptrace_follow.c): r_brk jumps to a trampoline of ours that holds the thread only
 * while a lock word still names dyn's thread, a robust, process-shared mutex in a page
 * dyn and the process share (a memfd the process made and closed again). When dyn's
 * thread ends, however it ends (SIGKILL, a crash, the OOM killer), the kernel's walk of
 * its robust list writes FUTEX_OWNER_DIED into that word, and the trampoline is a bare
 * return from then on: no trap, no signal is ever involved.
 *
 *     tramp: cmpl  $TID, lock(%rip)     the lock is not dyn's (dead, or let go):
 *            jne   out                  the routine's own return
 *            lock incl waiting(%rip)    tell dyn (dyn_proc_poll reads the count)
 *     hold:  futex(&lock, FUTEX_WAIT, TID, 5 ms)   blocked while the word is TID;
 *            cmpl  $TID, lock(%rip)     held while dyn lives, until dyn moves the
 *            je    hold                 thread out (it does the return for it)
 *     out:   ret
 *
 * The stack is the routine's at its entry all along (a jump, no call), so a thread
 * anywhere in it is let go by doing the return for it, or put back at r_brk itself
 * (its futex call cancelled: orig_rax -1). The wait's timeout lets a held thread see
 * dyn's death within 5 ms (the kernel wakes only waiters that marked the word, which
 * these do not). Only registers a call may clobber are used (rax, rcx, rdx, rsi, rdi,
 * r10, r11, the flags).
 */
#include "config.h"

#include <pthread.h>

#include "dynamic/dyn_ptrace_priv.h"

#define PAGE 4096u
#define WAITING_OFF 64 /* the count of held threads, in the shared page */
#define HOLD_OFF 19 /* offsets in the trampoline (the code above) */
#define OUT_OFF 59
#define TS_OFF 64 /* the wait's timeout, a struct timespec */
#define TRAMP_LEN 80
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 1u
#endif
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x8u
#endif

/* Is the padding from ADDR (in B, which starts at ADDR - 1 with the routine's `ret`) up to
 * the next 16-byte boundary made of nops and int3s only, and 4 bytes at least (room for
 * the rel32 of the jump)? The one-byte routine is followed by the alignment of the next
 * function; nothing jumps into it. */
static int
padding_after_ret(uint64_t addr, const uint8_t *b, size_t n)
{
    static const uint8_t nopl[][8] = { { 3, 0x0f, 0x1f, 0x00 }, { 4, 0x0f, 0x1f, 0x40, 0x00 },
        { 5, 0x0f, 0x1f, 0x44, 0x00, 0x00 }, { 7, 0x0f, 0x1f, 0x80, 0, 0, 0, 0 } };
    static const uint8_t nopw84[8] = { 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0 };
    uint64_t end = (addr + 15) & ~(uint64_t)15;
    size_t i = 1;

    if (end < addr + 4 || end - addr + 1 > n)
        return 0;
    while (addr + i - 1 < end) {
        const uint8_t *c = b + i;
        size_t left = (size_t)(end - (addr + i - 1)), k = 0;
        if (*c == 0x90 || *c == 0xcc) {
            i++;
            continue;
        }
        while (k < left && (c[k] == 0x66 || c[k] == 0x2e))
            k++; /* operand-size and segment prefixes of the long nops */
        if (k < left && c[k] == 0x90 && k > 0) {
            i += k + 1;
            continue;
        }
        size_t m = 0;
        if (left - k >= 8 && memcmp(c + k, nopw84, 8) == 0)
            m = 8;
        for (size_t j = 0; m == 0 && j < sizeof(nopl) / sizeof(nopl[0]); j++)
            if (left - k >= nopl[j][0] && memcmp(c + k, nopl[j] + 1, nopl[j][0]) == 0)
                m = nopl[j][0];
        if (m == 0)
            return 0;
        i += k + m;
    }
    return addr + i - 1 == end;
}

int
dyn_pt_guard_fits(uint64_t brk, const uint8_t *b, size_t n)
{
    static const uint8_t endbr_ret[5] = { 0xf3, 0x0f, 0x1e, 0xfa, 0xc3 };
    if (n >= 5 && memcmp(b, endbr_ret, 5) == 0)
        return 5;
    if (n >= 1 && b[0] == 0xc3 && padding_after_ret(brk + 1, b, n))
        return 1;
    return 0;
}

/* System call NR of the stopped process P with A0..A2; its result, or -errno. */
static int64_t
call3(dyn_proc_t *p, long nr, uint64_t a0, uint64_t a1, uint64_t a2)
{
    uint64_t a[6] = { a0, a1, a2, 0, 0, 0 };
    int64_t r;
    if (dyn_proc_syscall(p, nr, a, &r) < 0)
        return -EIO;
    return r;
}

static void
put32(uint8_t *c, uint32_t v)
{
    memcpy(c, &v, 4);
}

/* The trampoline (see the top) at CODE for the lock word at LOCK, TID's. */
static void
tramp_bytes(uint8_t *c, uint64_t code, uint64_t lock, uint32_t tid)
{
    const int64_t ts[2] = { 0, 5000000 };
    memset(c, 0xcc, TRAMP_LEN);
    c[0] = 0x81; /* cmpl $tid, lock(%rip) */
    c[1] = 0x3d;
    put32(c + 2, (uint32_t)(lock - (code + 10)));
    put32(c + 6, tid);
    c[10] = 0x75; /* jne out */
    c[11] = OUT_OFF - 12;
    c[12] = 0xf0; /* lock incl waiting(%rip) */
    c[13] = 0xff;
    c[14] = 0x05;
    put32(c + 15, (uint32_t)(lock + WAITING_OFF - (code + 19)));
    c[HOLD_OFF] = 0xb8; /* mov $SYS_futex, %eax */
    put32(c + 20, SYS_futex);
    c[24] = 0x48; /* lea lock(%rip), %rdi */
    c[25] = 0x8d;
    c[26] = 0x3d;
    put32(c + 27, (uint32_t)(lock - (code + 31)));
    c[31] = 0x31; /* xor %esi, %esi (FUTEX_WAIT) */
    c[32] = 0xf6;
    c[33] = 0xba; /* mov $tid, %edx */
    put32(c + 34, tid);
    c[38] = 0x4c; /* lea ts(%rip), %r10 */
    c[39] = 0x8d;
    c[40] = 0x15;
    put32(c + 41, (uint32_t)(TS_OFF - 45));
    c[45] = 0x0f; /* syscall */
    c[46] = 0x05;
    c[47] = 0x81; /* cmpl $tid, lock(%rip) */
    c[48] = 0x3d;
    put32(c + 49, (uint32_t)(lock - (code + 57)));
    put32(c + 53, tid);
    c[57] = 0x74; /* je hold */
    c[58] = (uint8_t)(HOLD_OFF - 59);
    c[OUT_OFF] = 0xc3; /* ret */
    memcpy(c + TS_OFF, ts, sizeof(ts));
}

/* Lock the robust, process-shared mutex at the start of PAGE (dyn's side): its word is
 * then our thread's id, *TID. */
static int
lock_page(void *page, uint32_t *tid)
{
    pthread_mutexattr_t a;
    pthread_mutex_t *m = page;
    int rc = pthread_mutexattr_init(&a);
    if (rc == 0)
        rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    if (rc == 0)
        rc = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    if (rc == 0)
        rc = pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
    if (rc != 0 || pthread_mutex_lock(m) != 0)
        return QP_EIO;
    *tid = (uint32_t)syscall(SYS_gettid);
    /* (glibc's lock word is the first int of the mutex: checked, not assumed) */
    if (*(volatile uint32_t *)page != *tid) {
        pthread_mutex_unlock(m);
        return QP_EUNSUPP;
    }
    return 0;
}

int
dyn_pt_guard_make(dyn_proc_t *p, uint64_t brk)
{
    static const char name[] = "qpt-brk";
    dyn_guard_t *g = &p->guard;
    char path[64];
    int64_t fd = -1;
    int lfd, rc;
    uint8_t c[TRAMP_LEN];

    memset(g, 0, sizeof(*g));
    /* The code page first, its start the memfd's name meanwhile. */
    QP_CHECK(dyn_space_map_near(p, brk, brk + 5, PAGE, ED_PROT_R | ED_PROT_X, -1, &g->code));
    rc = dyn_proc_write(p, g->code, name, sizeof(name));
    if (rc == 0) {
        /* Never executed: sealed so (vm.memfd_noexec=2 refuses an executable memfd,
         * and the guard would then fall back to the int3). */
        fd = call3(p, SYS_memfd_create, g->code, MFD_CLOEXEC | MFD_NOEXEC_SEAL, 0);
        if (fd == -EINVAL) /* a kernel before MFD_NOEXEC_SEAL (6.3) */
            fd = call3(p, SYS_memfd_create, g->code, MFD_CLOEXEC, 0);
        if (fd < 0 || call3(p, SYS_ftruncate, (uint64_t)fd, PAGE, 0) != 0)
            rc = QP_EIO;
    }
    if (rc == 0) {
        snprintf(path, sizeof(path), "/proc/%d/fd/%d", p->pid, (int)fd);
        if ((lfd = open(path, O_RDWR | O_CLOEXEC)) < 0)
            rc = QP_EIO;
        else {
            void *m = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, lfd, 0);
            close(lfd);
            if (m == MAP_FAILED)
                rc = QP_EIO;
            else {
                g->page = m;
                madvise(m, PAGE, MADV_DONTFORK); /* (a child of dyn holds no lock) */
            }
        }
    }
    if (rc == 0)
        rc = dyn_space_map_near(p, g->code, g->code + PAGE, PAGE, ED_PROT_R | ED_PROT_W,
            (int)fd, &g->shared);
    if (fd >= 0)
        call3(p, SYS_close, (uint64_t)fd, 0, 0); /* nothing left open in the process */
    if (rc == 0)
        rc = lock_page(g->page, &g->tid);
    if (rc == 0) {
        g->locked = 1;
        tramp_bytes(c, g->code, g->shared, g->tid);
        rc = dyn_proc_write(p, g->code, c, sizeof(c));
    }
    if (rc < 0) {
        dyn_pt_guard_drop(p, 1);
        return rc;
    }
    return 0;
}

void
dyn_pt_guard_jump(const dyn_proc_t *p, uint64_t brk, uint8_t jmp[5])
{
    jmp[0] = 0xe9;
    put32(jmp + 1, (uint32_t)(p->guard.code - (brk + 5)));
}

int
dyn_pt_guard_waiting(const dyn_proc_t *p)
{
    return p->guard.page != NULL
        && __atomic_load_n((uint32_t *)((char *)p->guard.page + WAITING_OFF),
               __ATOMIC_ACQUIRE)
        != 0;
}

void
dyn_pt_guard_settled(const dyn_proc_t *p)
{
    if (p->guard.page != NULL)
        __atomic_store_n((uint32_t *)((char *)p->guard.page + WAITING_OFF), 0,
            __ATOMIC_RELEASE);
}

int
dyn_pt_guard_holds(const dyn_proc_t *p, uint64_t rip)
{
    return p->guard.code != 0 && rip >= p->guard.code + HOLD_OFF
        && rip < p->guard.code + OUT_OFF;
}

int
dyn_pt_guard_in(const dyn_proc_t *p, uint64_t rip)
{
    return p->guard.code != 0 && rip >= p->guard.code && rip <= p->guard.code + OUT_OFF;
}

void
dyn_pt_guard_drop(dyn_proc_t *p, int in_process)
{
    dyn_guard_t *g = &p->guard;

    if (in_process && g->shared != 0)
        dyn_space_free(p, g->shared, PAGE);
    if (in_process && g->code != 0)
        dyn_space_free(p, g->code, PAGE);
    /* A robust mutex still locked is on its thread's robust list, which glibc and the
     * kernel walk: its page stays mapped unless the unlock worked (it fails when called
     * from another thread than dyn_proc_set_break's, which owns the guard). */
    if (g->page != NULL && (!g->locked || pthread_mutex_unlock((pthread_mutex_t *)g->page) == 0))
        munmap(g->page, PAGE);
    memset(g, 0, sizeof(*g));
}
