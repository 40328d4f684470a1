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
 *     hold:  cmpl  $TID, mark(%rip)     a forked child's copy never holds (its
 *            jne   out                  marker page wiped: MADV_WIPEONFORK)
 *            getpid() != PID: jne out   nor a child sharing the memory (vfork)
 *            lock incl waiting(%rip)    tell dyn, each time round (dyn_proc_poll reads
 *                                       the count, and zeroes it once all are stopped)
 *            futex(&lock, FUTEX_WAIT, TID, 5 ms)   blocked while the word is TID;
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
 *
 * The count is raised inside the loop, not once before it: a held thread that takes a
 * signal runs its handler outside the trampoline, and dyn, stopping the process
 * meanwhile, does not see it there and zeroes the count; the handler's return brings
 * it back into the loop, where it counts itself again and is seen at dyn's next poll.
 *
 * The trampoline's code page is never unmapped while the process lives (the shared
 * page is, once the code no longer reads it). A thread may be in a signal handler whose
 * frame returns into the trampoline (interrupted in the wait or anywhere else in it):
 * dyn cannot know (the saved context is in the thread's stack, handlers nest, run on an
 * alternate stack or never return), so no moment is safe to unmap it. Instead,
 * dyn_proc_unfollow retires it: every byte of the code becomes a `ret` (the stack being
 * the routine's at every instruction of it, a return from any of them is the routine's
 * own), and the shared page goes (`dyn clean` retires a killed dyn's code the same way,
 * dyn_proc_guard_retire). The next following (this dyn's or a later one's) puts
 * its trampoline into that same page (reuse_page: found by its tag, a page of the same
 * layout, retired: never a killed dyn's live code): a thread that returns there from a handler finds, at each instruction
 * boundary it can return to, the same instruction, now of the new trampoline (only
 * immediates and displacements differ: a futex call with a stale address fails with
 * EFAULT and the loop goes on), so the process keeps one page of ours, whatever the
 * number of sessions. The shared page can go: every thread is stopped then, those
 * whose pc is in the trampoline (in the futex call too) are moved back to r_brk first,
 * and once the code is rets no instruction reads the page (a forked child keeps its own
 * mapping of it); the marker page with it. All the pages are unmapped only when the jump
 * at r_brk was never written (a failure while putting it in), so no thread ever
 * entered. After an execve nothing of it is left; a killed dyn leaves the three pages,
 * and the lock word marked dead makes the code a return. The code is written from its
 * end backwards (write_code), so that a reused page written halfway is still rets
 * wherever the new code is not whole yet.
 *
 * A forked child shares the page (MAP_SHARED) and has a copy of the code, in which the
 * lock word still names dyn's thread; its copy of the marker page (private, and wiped in
 * a fork) reads 0, which makes that copy a bare return, so a child is never held (and
 * never raises the parent's count), also one that is process 1 of a new pid namespace
 * in a followed process 1 of its own (a pid test alone would hold it). A child that
 * shares the memory (vfork, CLONE_VM) sees the marker: the pid test returns there
 * (unless both are process 1 of their namespaces), whatever happened to the
 * jump at its r_brk (take_child puts the routine's bytes back: when that write fails,
 * the child keeps a harmless detour, which `dyn clean CHILD` takes out).
 */
#include "config.h"

#include <pthread.h>

#include "dynamic/dyn_ptrace_priv.h"

#define PAGE 4096u
#define WAITING_OFF 64 /* the count of held threads, in the shared page */
#define HOLD_OFF 12 /* offsets in the trampoline (the code above) */
#define OUT_OFF 85
#define TS_OFF 88 /* the wait's timeout, a struct timespec */
#define TRAMP_LEN 104
#define TAG_OFF 128 /* the page's tag (reuse_page), never executed */
#define NAME_OFF 160 /* the memfd's name, while it is made */
/* The tag of a code page of this trampoline's layout (its instruction boundaries):
 * bump the version whenever they change. */
#define LAYOUT 3
static const uint8_t page_tag[16] = { 'q', 'p', 't', '-', 'b', 'r', 'k', 0, 'l', 'a', 'y',
    'o', 'u', 't', LAYOUT, 0 };
/* The offsets above are those of layout 3: a change of them without a new LAYOUT fails
 * here (a thread returning into a reused page would meet another instruction). */
_Static_assert(LAYOUT == 3 && HOLD_OFF == 12 && OUT_OFF == 85 && TS_OFF == 88
        && TRAMP_LEN == TS_OFF + 16 && TRAMP_LEN <= TAG_OFF,
    "the trampoline's layout changed: bump LAYOUT and these figures");
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

/* An instruction `cmpl $V, AT(%rip)` into C at CODE + OFF (10 bytes). */
static void
cmpl_rip(uint8_t *c, uint64_t code, size_t off, uint64_t at, uint32_t v)
{
    c[off] = 0x81;
    c[off + 1] = 0x3d;
    put32(c + off + 2, (uint32_t)(at - (code + off + 10)));
    put32(c + off + 6, v);
}

/* The trampoline (see the top) at CODE for the lock word at LOCK, TID's, the marker word
 * at MARK (TID in the process, 0 in a forked copy), in process PID (its own id, as
 * getpid gives it there). */
static void
tramp_bytes(uint8_t *c, uint64_t code, uint64_t lock, uint64_t mark, uint32_t tid,
    uint32_t pid)
{
    const int64_t ts[2] = { 0, 5000000 };
    memset(c, 0xcc, TRAMP_LEN);
    cmpl_rip(c, code, 0, lock, tid); /* cmpl $tid, lock(%rip) */
    c[10] = 0x75; /* jne out */
    c[11] = OUT_OFF - 12;
    cmpl_rip(c, code, HOLD_OFF, mark, tid); /* hold: cmpl $tid, mark(%rip) */
    c[22] = 0x75; /* jne out */
    c[23] = OUT_OFF - 24;
    c[24] = 0xb8; /* mov $SYS_getpid, %eax */
    put32(c + 25, SYS_getpid);
    c[29] = 0x0f; /* syscall */
    c[30] = 0x05;
    c[31] = 0x3d; /* cmp $pid, %eax */
    put32(c + 32, pid);
    c[36] = 0x75; /* jne out */
    c[37] = OUT_OFF - 38;
    c[38] = 0xf0; /* lock incl waiting(%rip) */
    c[39] = 0xff;
    c[40] = 0x05;
    put32(c + 41, (uint32_t)(lock + WAITING_OFF - (code + 45)));
    c[45] = 0xb8; /* mov $SYS_futex, %eax */
    put32(c + 46, SYS_futex);
    c[50] = 0x48; /* lea lock(%rip), %rdi */
    c[51] = 0x8d;
    c[52] = 0x3d;
    put32(c + 53, (uint32_t)(lock - (code + 57)));
    c[57] = 0x31; /* xor %esi, %esi (FUTEX_WAIT) */
    c[58] = 0xf6;
    c[59] = 0xba; /* mov $tid, %edx */
    put32(c + 60, tid);
    c[64] = 0x4c; /* lea ts(%rip), %r10 */
    c[65] = 0x8d;
    c[66] = 0x15;
    put32(c + 67, (uint32_t)(TS_OFF - 71));
    c[71] = 0x0f; /* syscall */
    c[72] = 0x05;
    cmpl_rip(c, code, 73, lock, tid); /* cmpl $tid, lock(%rip) */
    c[83] = 0x74; /* je hold */
    c[84] = (uint8_t)(HOLD_OFF - 85);
    c[OUT_OFF] = 0xc3; /* ret */
    memcpy(c + TS_OFF, ts, sizeof(ts));
}

/* A code page an earlier following left in P within a jump's reach of BRK (see the
 * top: a page of this layout, by its tag, among the small anonymous r-x mappings of
 * /proc/PID/maps), retired (its code all rets: dyn_proc_unfollow's, or a killed dyn's
 * after `dyn clean`, dyn_proc_guard_retire), or 0. A killed dyn's live code is never
 * written over: a thread stopped in it would meet old and new instructions mixed. */
/* 1 when the code at CODE in P is all `ret`s (TS_OFF bytes: retired). */
static int
all_rets(dyn_proc_t *p, uint64_t code)
{
    uint8_t c[TS_OFF];
    if (dyn_proc_read(p, code, c, sizeof(c)) < 0)
        return 0;
    for (size_t i = 0; i < sizeof(c); i++)
        if (c[i] != 0xc3)
            return 0;
    return 1;
}

static uint64_t
reuse_page(dyn_proc_t *p, uint64_t brk)
{
    char path[64], line[512];
    uint64_t found = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/maps", p->pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    while (found == 0 && fgets(line, sizeof(line), f) != NULL) {
        unsigned long long lo, hi, ino;
        char perms[8];
        int end = 0; /* (the blanks after the inode skipped: the end, when no name) */
        if (sscanf(line, "%llx-%llx %7s %*s %*s %llu %n", &lo, &hi, perms, &ino, &end) < 4
            || strcmp(perms, "r-xp") != 0 || ino != 0 || line[end] != '\0'
            || hi - lo > 64 * PAGE) /* (not a JIT's code heap: read page by page) */
            continue;
        for (uint64_t a = lo; found == 0 && a < hi; a += PAGE) {
            uint8_t t[sizeof(page_tag)];
            int64_t d = (int64_t)(a - (brk + 5));
            if (d > INT32_MAX - (int64_t)PAGE || d < INT32_MIN + (int64_t)PAGE)
                continue;
            if (dyn_proc_read(p, a + TAG_OFF, t, sizeof(t)) == 0
                && memcmp(t, page_tag, sizeof(t)) == 0 && all_rets(p, a))
                found = a;
        }
    }
    fclose(f);
    return found;
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

/* The marker page of G (see the top) in P: private, wiped in a forked copy, the marker
 * word at its start G's thread id. Without MADV_WIPEONFORK (Linux before 4.14, or
 * refused: g->no_wipe, which dyn_proc_break_unguarded tells) a copy keeps the word: the
 * getpid test is then the only one (a copy that is process 1 of a new pid namespace, in
 * a followed process 1 of its own, would be held). */
static int
make_mark(dyn_proc_t *p, dyn_guard_t *g)
{
    QP_CHECK(dyn_space_map_near(
        p, g->code, g->code + PAGE, PAGE, ED_PROT_R | ED_PROT_W, -1, &g->mark));
    g->no_wipe = call3(p, SYS_madvise, g->mark, PAGE, MADV_WIPEONFORK) != 0;
    return dyn_proc_write(p, g->mark, &g->tid, sizeof(g->tid));
}

/* The LEN bytes of C written at CODE, 8 at a time from the end: a write that fails
 * midway (dyn_proc_write's word-by-word fallback) leaves a reused page's head its `ret`s,
 * so an instruction a thread returns to is either whole or a `ret` (all stopped). */
static int
write_code(dyn_proc_t *p, uint64_t code, const uint8_t *c, size_t len)
{
    for (size_t end = len; end > 0;) {
        size_t at = (end - 1) & ~(size_t)7;
        QP_CHECK(dyn_proc_write(p, code + at, c + at, end - at));
        end = at;
    }
    return 0;
}

int
dyn_pt_guard_make(dyn_proc_t *p, uint64_t brk)
{
    static const char name[] = "qpt-brk";
    dyn_guard_t *g = &p->guard;
    char path[64];
    int64_t fd = -1, pid;
    int lfd, rc;
    uint8_t c[TAG_OFF + sizeof(page_tag)];

    memset(g, 0, sizeof(*g));
    if ((pid = call3(p, SYS_getpid, 0, 0, 0)) <= 0) /* (its own, in its pid namespace) */
        return QP_EIO;
    /* The code page first (an earlier following's, or a new one), the memfd's name in
     * it meanwhile. */
    if ((g->code = reuse_page(p, brk)) != 0)
        g->reused = 1;
    else
        QP_CHECK(dyn_space_map_near(
            p, brk, brk + 5, PAGE, ED_PROT_R | ED_PROT_X, -1, &g->code));
    rc = dyn_proc_write(p, g->code + NAME_OFF, name, sizeof(name));
    if (rc == 0) {
        /* Never executed: sealed so (vm.memfd_noexec=2 refuses an executable memfd,
         * and the guard would then fall back to the int3). */
        fd = call3(p, SYS_memfd_create, g->code + NAME_OFF, MFD_CLOEXEC | MFD_NOEXEC_SEAL, 0);
        if (fd == -EINVAL) /* a kernel before MFD_NOEXEC_SEAL (6.3) */
            fd = call3(p, SYS_memfd_create, g->code + NAME_OFF, MFD_CLOEXEC, 0);
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
        rc = make_mark(p, g);
    }
    if (rc == 0) {
        memset(c, 0, sizeof(c));
        tramp_bytes(c, g->code, g->shared, g->mark, g->tid, (uint32_t)pid);
        memcpy(c + TAG_OFF, page_tag, sizeof(page_tag));
        rc = write_code(p, g->code, c, sizeof(c));
    }
    if (rc < 0) {
        dyn_pt_guard_drop(p, DYN_GUARD_UNMAP);
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

/* Retire the trampoline of P (see the top): its code all `ret`s, the shared page
 * unmapped once nothing reads it; 0, or < 0 when the code could not be written (then
 * both pages stay: the lock word, let go, makes the code a return). */
static int
retire(dyn_proc_t *p)
{
    uint8_t rets[TS_OFF];
    memset(rets, 0xc3, sizeof(rets));
    QP_CHECK(dyn_proc_write(p, p->guard.code, rets, sizeof(rets)));
    if (p->guard.shared != 0)
        dyn_space_free(p, p->guard.shared, PAGE);
    if (p->guard.mark != 0)
        dyn_space_free(p, p->guard.mark, PAGE);
    return 0;
}

void
dyn_pt_guard_drop(dyn_proc_t *p, int how)
{
    dyn_guard_t *g = &p->guard;

    /* (a page an earlier following left is never unmapped: see the top) */
    if (g->code != 0 && (how == DYN_GUARD_RETIRE || (how == DYN_GUARD_UNMAP && g->reused)))
        retire(p);
    else if (how == DYN_GUARD_UNMAP) {
        if (g->shared != 0)
            dyn_space_free(p, g->shared, PAGE);
        if (g->mark != 0)
            dyn_space_free(p, g->mark, PAGE);
        if (g->code != 0)
            dyn_space_free(p, g->code, PAGE);
    }
    /* A robust mutex still locked is on its thread's robust list, which glibc and the
     * kernel walk: its page stays mapped unless the unlock worked (it fails when called
     * from another thread than dyn_proc_set_break's, which owns the guard). */
    if (g->page != NULL && (!g->locked || pthread_mutex_unlock((pthread_mutex_t *)g->page) == 0))
        munmap(g->page, PAGE);
    memset(g, 0, sizeof(*g));
}

int
dyn_proc_guard_retire(dyn_proc_t *p, uint64_t code)
{
    uint8_t rets[TS_OFF];
    if (p == NULL || dyn_proc_is_guard(p, code) != 1)
        return QP_EINVAL;
    memset(rets, 0xc3, sizeof(rets));
    return dyn_proc_write(p, code, rets, sizeof(rets));
}

int
dyn_proc_is_guard(dyn_proc_t *p, uint64_t code)
{
    uint8_t c[16], rets[16], t[sizeof(page_tag)];
    uint32_t rel;
    char path[64], line[512];
    FILE *f;
    int ours = 0;

    if (p == NULL)
        return QP_EINVAL;
    memset(rets, 0xc3, sizeof(rets));
    if (code % PAGE != 0 || dyn_proc_read(p, code, c, sizeof(c)) < 0)
        return 0;
    if (memcmp(c, rets, sizeof(rets)) == 0) /* retired (dyn_proc_unfollow could not put
                                                * r_brk back): a page of ours by its tag */
        return dyn_proc_read(p, code + TAG_OFF, t, sizeof(t)) == 0
            && memcmp(t, page_tag, sizeof(t) - 2) == 0; /* (any layout's) */
    if (c[0] != 0x81 || c[1] != 0x3d)
        return 0;
    memcpy(&rel, c + 2, 4);
    uint64_t lock = code + 10 + (uint64_t)(int64_t)(int32_t)rel;
    snprintf(path, sizeof(path), "/proc/%d/maps", p->pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    while (!ours && fgets(line, sizeof(line), f) != NULL) {
        unsigned long long lo;
        ours = sscanf(line, "%llx-", &lo) == 1 && lo == lock
            && strstr(line, " /memfd:qpt-brk") != NULL;
    }
    fclose(f);
    return ours;
}
