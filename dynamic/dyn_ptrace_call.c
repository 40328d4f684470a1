/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Process control (dyn_ptrace.c), code run on the process's behalf: system calls through
 * a small stub (dyn_proc_syscall), calls of its own procedures (dyn_proc_call), and
 * threads led out of a range of code before it changes.
 */
#include "config.h"

#include "dynamic/dyn_ptrace_priv.h"

/*****************************************************************************
 * System calls on the process's behalf
 */

/*
 * The stub a system call runs in: `syscall`, then the registers the call changed are
 * popped from a block dyn wrote below the thread's red zone (rsp last), and a jump
 * through the word after it goes back to where the thread was. dyn normally stops the
 * thread right after the `syscall` and puts its registers back itself; the rest of the
 * stub only runs if dyn died meanwhile, and then the thread goes on unharmed.
 */
static const uint8_t stub_code[] = {
    0x0f, 0x05,                         /* syscall */
    0x58, 0x5f, 0x5e, 0x5a,             /* pop %rax; pop %rdi; pop %rsi; pop %rdx */
    0x41, 0x5a, 0x41, 0x58, 0x41, 0x59, /* pop %r10; pop %r8; pop %r9 */
    0x59, 0x41, 0x5b,                   /* pop %rcx; pop %r11 */
    0x5c,                               /* pop %rsp */
    0xff, 0x25, 0, 0, 0, 0,             /* jmp *0(%rip): the word that follows */
};
#define STUB_LEN (sizeof(stub_code) + 8)
_Static_assert(STUB_LEN <= sizeof(((dyn_proc_t *)0)->stub_orig), "stub_orig too small");

/* The bytes under the stub back (the process is stopped; no system call of ours runs). */
void
dyn_pt_stub_restore(dyn_proc_t *p)
{
    if (p->stub_dirty && dyn_proc_write(p, p->stub, p->stub_orig, STUB_LEN) == 0)
        p->stub_dirty = 0;
}
/* Words of the block the stub pops: rax rdi rsi rdx r10 r8 r9 rcx r11 rsp. */
#define STUB_WORDS 10
#define RED_ZONE 128

/*
 * The slack after the end of an executable PT_LOAD (PHDRS, N of them, at load bias BIAS)
 * up to the end of its page: mapped, executable, and no code of the process runs there.
 * 0 when no page has room for the stub.
 */
static uint64_t
slack_in(const Elf64_Phdr *ph, size_t n, uint64_t bias, int64_t *off /*OUT*/)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t end = bias + ph[i].p_vaddr + ph[i].p_memsz, page_end, a;
        if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X))
            continue;
        page_end = (end + 4095) & ~4095ull;
        if (page_end - end >= STUB_LEN + 16) {
            a = (page_end - STUB_LEN) & ~15ull;
            /* The file's bytes are mapped there (the rest of the segment's last page). */
            *off = (int64_t)(ph[i].p_offset + (a - (bias + ph[i].p_vaddr)));
            return a;
        }
    }
    return 0;
}

/*
 * The bytes under the stub as they should be, into P->stub_orig: the executable file's
 * (what its mapping shows there: a killed dyn may have left a stub in memory), zeros
 * past its end; the vDSO's from memory.
 */
static int
stub_save(dyn_proc_t *p)
{
    char path[64];
    ssize_t n = 0;
    int fd;

    if (p->stub_off < 0)
        return dyn_proc_read(p, p->stub, p->stub_orig, STUB_LEN);
    snprintf(path, sizeof(path), "/proc/%d/exe", p->pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return dyn_proc_read(p, p->stub, p->stub_orig, STUB_LEN);
    memset(p->stub_orig, 0, STUB_LEN);
    n = pread(fd, p->stub_orig, STUB_LEN, (off_t)p->stub_off);
    close(fd);
    return n < 0 ? dyn_proc_read(p, p->stub, p->stub_orig, STUB_LEN) : 0;
}

/* Program headers at ADDR (N <= 64) into PH. */
static int
read_phdrs(dyn_proc_t *p, uint64_t addr, size_t n, Elf64_Phdr *ph)
{
    if (n == 0 || n > 64)
        return QP_EFORMAT;
    return dyn_proc_read(p, addr, ph, n * sizeof(*ph));
}

/*
 * Where the stub goes: the slack after the main program's executable segment (its
 * program headers are in memory at AT_PHDR), else after the vDSO's code.
 */
static int
find_stub(dyn_proc_t *p)
{
    char path[64];
    uint64_t av[2], phdr = 0, phnum = 0, vdso = 0;
    Elf64_Phdr ph[64];
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/auxv", p->pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return QP_EIO;
    while (read(fd, av, sizeof(av)) == (ssize_t)sizeof(av) && av[0] != AT_NULL) {
        phdr = av[0] == AT_PHDR ? av[1] : phdr;
        phnum = av[0] == AT_PHNUM ? av[1] : phnum;
        vdso = av[0] == AT_SYSINFO_EHDR ? av[1] : vdso;
    }
    close(fd);
    if (read_phdrs(p, phdr, phnum, ph) == 0) {
        for (size_t i = 0; i < phnum && p->stub == 0; i++)
            if (ph[i].p_type == PT_PHDR)
                p->stub = slack_in(ph, phnum, phdr - ph[i].p_vaddr, &p->stub_off);
    }
    if (p->stub == 0 && vdso != 0) {
        Elf64_Ehdr eh;
        if (dyn_proc_read(p, vdso, &eh, sizeof(eh)) == 0
            && read_phdrs(p, vdso + eh.e_phoff, eh.e_phnum, ph) == 0) {
            p->stub = slack_in(ph, eh.e_phnum, vdso, &p->stub_off);
            p->stub_off = -1;
        }
    }
    if (p->stub == 0) {
        errno = ENOSPC;
        return QP_EIO;
    }
    return 0;
}

/* Times a thread is let run alone at most to finish a killed dyn's stub. */
#define STUB_LEAVE_TRIES 100

int
dyn_proc_leave_range(dyn_proc_t *p, uint64_t lo, uint64_t hi, unsigned max_tries,
                     unsigned *moved)
{
    dyn_thread_info_t *ti;
    size_t nt = 0;
    int rc = 0;

    QP_CHECK(dyn_proc_threads(p, NULL, 0, &nt));
    if ((ti = calloc(nt ? nt : 1, sizeof(*ti))) == NULL)
        return QP_ENOMEM;
    if (dyn_proc_threads(p, ti, nt, &nt) < 0) {
        free(ti);
        return QP_EIO;
    }
    for (size_t i = 0; i < nt; i++) {
        if (ti[i].pc < lo || ti[i].pc >= hi)
            continue;
        int r = dyn_proc_leave(p, ti[i].tid, lo, hi, max_tries);
        if (r == 0 && moved != NULL)
            (*moved)++;
        else if (r < 0 && rc == 0)
            rc = r;
    }
    free(ti);
    return rc;
}

/*
 * Let every thread whose pc is in the stub finish it. A dyn killed after it set a
 * thread to run a system call there leaves that thread to make the call, pop its
 * registers and jump back (write_stub); a thread the scheduler had not run yet when
 * this process stopped it is still inside, and the bytes must not go back under it.
 * 0 when none is inside, QP_ERANGE when one stays (its bytes then stay too).
 */
static int
stub_leave(dyn_proc_t *p)
{
    return dyn_proc_leave_range(p, p->stub, p->stub + STUB_LEN, STUB_LEAVE_TRIES, NULL);
}

int
dyn_proc_stub_reset(dyn_proc_t *p)
{
    uint8_t mem[sizeof(p->stub_orig)];

    if (p == NULL || !p->stopped)
        return QP_EINVAL;
    if (p->stub == 0)
        QP_CHECK(find_stub(p));
    if (p->stub_off < 0)
        return 0; /* the vDSO's: its bytes are not known from a file */
    if (!p->stub_dirty)
        QP_CHECK(stub_save(p));
    QP_CHECK(dyn_proc_read(p, p->stub, mem, STUB_LEN));
    if (memcmp(mem, p->stub_orig, STUB_LEN) == 0)
        return 0;
    if (p->stub_dirty) /* our own stub is in: it goes at the next resume */
        return 0;
    QP_CHECK(stub_leave(p));
    QP_CHECK(dyn_proc_write(p, p->stub, p->stub_orig, STUB_LEN));
    return 1;
}

/*
 * What the registers of a thread stopped with SAVED become when it goes on: an
 * interrupted system call is restarted (as the kernel does when no handler runs).
 */
static void
restarted(const struct user_regs_struct *saved, uint64_t *rax, uint64_t *rip)
{
    int64_t r = (int64_t)saved->rax;

    *rax = saved->rax;
    *rip = saved->rip;
    if ((int64_t)saved->orig_rax < 0)
        return;
    if (r == -512 || r == -513 || r == -514) { /* -ERESTARTSYS, NOINTR, NOHAND */
        *rax = saved->orig_rax;
        *rip -= 2;
    } else if (r == -516) { /* -ERESTART_RESTARTBLOCK */
        *rax = SYS_restart_syscall;
        *rip -= 2;
    }
}

/* Write the stub and the block that puts back SAVED; the block's address in *BLOCK. */
static int
write_stub(dyn_proc_t *p, const struct user_regs_struct *saved, uint64_t *block /*OUT*/)
{
    uint8_t code[STUB_LEN];
    uint64_t w[STUB_WORDS], rip;

    memcpy(code, stub_code, sizeof(stub_code));
    restarted(saved, &w[0], &rip);
    memcpy(code + sizeof(stub_code), &rip, 8);
    w[1] = saved->rdi;
    w[2] = saved->rsi;
    w[3] = saved->rdx;
    w[4] = saved->r10;
    w[5] = saved->r8;
    w[6] = saved->r9;
    w[7] = saved->rcx;
    w[8] = saved->r11;
    w[9] = saved->rsp;
    *block = (saved->rsp - RED_ZONE - sizeof(w)) & ~15ull;
    QP_CHECK(dyn_proc_write(p, *block, w, sizeof(w)));
    if (!p->stub_dirty) {
        QP_CHECK(stub_save(p));
        p->stub_dirty = 1;
    }
    return dyn_proc_write(p, p->stub, code, sizeof(code));
}

/* Run the system call of REGS (set on T, which is at the stub) to its exit; *RET. */
static int
run_syscall(dyn_proc_t *p, dyn_thread_t *t, held_t *h, int64_t *ret /*OUT*/)
{
    struct user_regs_struct regs;
    int st, stops = 0;

    /* The syscall-entry stop, then the exit stop (other stops: group stops). */
    while (stops < 2) {
        QP_CHECK(dyn_pt_run_to_stop(p, t, PTRACE_SYSCALL, h, &st));
        stops += WSTOPSIG(st) == SYSCALL_STOP;
    }
    if (ptrace(PTRACE_GETREGS, t->tid, NULL, &regs) < 0)
        return QP_EIO;
    if (regs.rip != p->stub + 2) {
        errno = EAGAIN;
        return QP_EIO;
    }
    *ret = (int64_t)regs.rax;
    return 0;
}

int
dyn_proc_syscall(dyn_proc_t *p, long nr, const uint64_t args[6], int64_t *ret /*OUT*/)
{
    struct user_regs_struct saved, regs;
    dyn_thread_t *t;
    held_t h = { 0 };
    uint64_t block;
    int rc;

    if (p == NULL || args == NULL || ret == NULL || !p->stopped)
        return QP_EINVAL;
    if ((t = dyn_pt_live_thread(p)) == NULL) {
        errno = ESRCH;
        return QP_EIO;
    }
    if (p->stub == 0)
        QP_CHECK(find_stub(p));
    /* A thread still inside a killed dyn's stub finishes it before the stub is written
     * again (its jump back is the stub's last word). */
    if (!p->stub_dirty)
        QP_CHECK(stub_leave(p));
    if (ptrace(PTRACE_GETREGS, t->tid, NULL, &saved) < 0)
        return QP_EIO;
    QP_CHECK(write_stub(p, &saved, &block));
    regs = saved;
    regs.rip = p->stub;
    regs.rsp = block;
    regs.rax = (unsigned long long)nr;
    regs.orig_rax = (unsigned long long)-1; /* no system-call restart on the way */
    regs.rdi = args[0];
    regs.rsi = args[1];
    regs.rdx = args[2];
    regs.r10 = args[3];
    regs.r8 = args[4];
    regs.r9 = args[5];
    /* From here until the registers are back, a dyn that dies leaves the stub to
       finish: the call is made and the thread goes on where it was. */
    if (ptrace(PTRACE_SETREGS, t->tid, NULL, &regs) < 0)
        return QP_EIO;
    rc = run_syscall(p, t, &h, ret);
    dyn_pt_give_back(p, t, &h, &saved);
    return rc;
}

/*****************************************************************************
 * Calls of the process's own procedures (one-time code)
 */

/*
 * The stub a procedure call runs in, on the thread's stack below its red zone: a block
 * of XS bytes for xsave (the vector state), then the third argument, the result, and
 * the thread's registers (rax .. r15, rflags, rsp) that the stub pops at the end:
 *
 *   xsave64 (%rsp)             every enabled component (rax = rdx = -1 set by dyn)
 *   mov XS(%rsp), %rdx         the third argument
 *   movabs $fn, %rax; call *%rax
 *   mov %rax, XS+8(%rsp)       the result
 *   mov $-1, %eax; mov $-1, %edx; xrstor64 (%rsp)
 *   mov $SYS_getpid, %eax; syscall      <- dyn stops here (PTRACE_SYSCALL) and puts the
 *                                          registers back itself; the rest only runs
 *   lea XS+16(%rsp), %rsp                  if dyn died during the call
 *   pop rax .. r15; popfq; pop %rsp; jmp *rip(%rip)
 */
#define CALL_WORDS 19 /* arg 2, result, rax..r15 (15), rflags, rsp */

/* The size of the xsave area for the enabled components, a multiple of 64. */
static uint32_t
xsave_size(void)
{
    uint32_t a, b, c, d;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0xd), "c"(0));
    return (b + 63) & ~63u;
}

static size_t
put32(uint8_t *o, size_t k, uint32_t v)
{
    memcpy(o + k, &v, 4);
    return k + 4;
}

/* The stub's code for FN (XS: the xsave area's size) into OUT; its length. *MARK: the
 * offset just after the marker syscall. */
static size_t
call_stub(uint8_t *o, uint64_t fn, uint32_t xs, uint64_t back, size_t *mark)
{
    static const uint8_t pops[] = { 0x58, 0x5b, 0x59, 0x5a, 0x5e, 0x5f, 0x5d, 0x41, 0x58,
        0x41, 0x59, 0x41, 0x5a, 0x41, 0x5b, 0x41, 0x5c, 0x41, 0x5d, 0x41, 0x5e, 0x41, 0x5f,
        0x9d, 0x5c };
    size_t k = 0;
    o[k++] = 0x48, o[k++] = 0x0f, o[k++] = 0xae, o[k++] = 0x24, o[k++] = 0x24; /* xsave64 */
    o[k++] = 0x48, o[k++] = 0x8b, o[k++] = 0x94, o[k++] = 0x24; /* mov XS(%rsp), %rdx */
    k = put32(o, k, xs);
    o[k++] = 0x48, o[k++] = 0xb8; /* movabs $fn, %rax */
    memcpy(o + k, &fn, 8);
    k += 8;
    o[k++] = 0xff, o[k++] = 0xd0; /* call *%rax */
    o[k++] = 0x48, o[k++] = 0x89, o[k++] = 0x84, o[k++] = 0x24; /* mov %rax, XS+8(%rsp) */
    k = put32(o, k, xs + 8);
    o[k++] = 0xb8, k = put32(o, k, 0xffffffffu); /* mov $-1, %eax */
    o[k++] = 0xba, k = put32(o, k, 0xffffffffu); /* mov $-1, %edx */
    o[k++] = 0x48, o[k++] = 0x0f, o[k++] = 0xae, o[k++] = 0x2c, o[k++] = 0x24; /* xrstor64 */
    o[k++] = 0xb8, k = put32(o, k, SYS_getpid);
    o[k++] = 0x0f, o[k++] = 0x05; /* syscall */
    *mark = k;
    o[k++] = 0x48, o[k++] = 0x8d, o[k++] = 0xa4, o[k++] = 0x24; /* lea XS+16(%rsp), %rsp */
    k = put32(o, k, xs + 16);
    memcpy(o + k, pops, sizeof(pops));
    k += sizeof(pops);
    o[k++] = 0xff, o[k++] = 0x25, k = put32(o, k, 0); /* jmp *0(%rip) */
    memcpy(o + k, &back, 8);
    return k + 8;
}

/* Run T (at the stub) until the syscall-exit stop at MARK; other system calls of the
 * procedure pass (entry and exit stops alternate). */
static int
run_call(dyn_proc_t *p, dyn_thread_t *t, held_t *h, uint64_t mark)
{
    int st, entry = 1;
    for (;;) {
        struct user_regs_struct regs;
        QP_CHECK(dyn_pt_run_to_stop(p, t, PTRACE_SYSCALL, h, &st));
        if ((st >> 16) != 0 || WSTOPSIG(st) != SYSCALL_STOP)
            continue; /* a ptrace event or a group stop */
        int was_entry = entry;
        entry = !entry;
        if (was_entry)
            continue;
        if (ptrace(PTRACE_GETREGS, t->tid, NULL, &regs) < 0)
            return QP_EIO;
        if (regs.rip == mark)
            return 0;
    }
}

int
dyn_proc_call(dyn_proc_t *p, uint64_t fn, const uint64_t *args, int nargs, uint64_t *ret)
{
    struct user_regs_struct saved, regs;
    dyn_thread_t *t;
    held_t h = { 0 };
    uint64_t a[6] = { 0 }, w[CALL_WORDS], rip, page, block;
    uint8_t code[128];
    size_t len, mark;
    int64_t r;
    int rc;

    if (p == NULL || ret == NULL || nargs < 0 || nargs > 6 || (nargs > 0 && args == NULL)
        || !p->stopped)
        return QP_EINVAL;
    memcpy(a, args, (size_t)nargs * sizeof(uint64_t));
    if ((t = dyn_pt_live_thread(p)) == NULL) {
        errno = ESRCH;
        return QP_EIO;
    }
    /* A page of our own for the stub (it stays if we die during the call). */
    {
        uint64_t mm[6] = { 0, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
            (uint64_t)-1, 0 };
        QP_CHECK(dyn_proc_syscall(p, SYS_mmap, mm, &r));
        if (r < 0 && r > -4096) {
            errno = (int)-r;
            return QP_EIO;
        }
        page = (uint64_t)r;
    }
    if (ptrace(PTRACE_GETREGS, t->tid, NULL, &saved) < 0) {
        rc = QP_EIO;
        goto unmap;
    }
    uint32_t xs = xsave_size();
    block = (saved.rsp - RED_ZONE - xs - sizeof(w)) & ~63ull;
    restarted(&saved, &w[2], &rip);
    w[0] = a[2];
    w[1] = 0;
    w[3] = saved.rbx, w[4] = saved.rcx, w[5] = saved.rdx, w[6] = saved.rsi;
    w[7] = saved.rdi, w[8] = saved.rbp, w[9] = saved.r8, w[10] = saved.r9;
    w[11] = saved.r10, w[12] = saved.r11, w[13] = saved.r12, w[14] = saved.r13;
    w[15] = saved.r14, w[16] = saved.r15, w[17] = saved.eflags, w[18] = saved.rsp;
    len = call_stub(code, fn, xs, rip, &mark);
    {
        static const uint8_t zero[64];
        /* The xsave header must be zero before xsave (its reserved bytes). */
        if ((rc = dyn_proc_write(p, block + 512, zero, sizeof(zero))) < 0
            || (rc = dyn_proc_write(p, block + xs, w, sizeof(w))) < 0
            || (rc = dyn_proc_write(p, page, code, len)) < 0)
            goto unmap;
    }
    regs = saved;
    regs.rip = page;
    regs.rsp = block;
    regs.rax = (unsigned long long)-1;
    regs.rdx = (unsigned long long)-1;
    regs.orig_rax = (unsigned long long)-1; /* no system-call restart on the way */
    regs.rdi = a[0], regs.rsi = a[1], regs.rcx = a[3], regs.r8 = a[4], regs.r9 = a[5];
    regs.eflags &= ~0x400ull; /* the ABI's direction flag, clear */
    /* From here until the registers are back, a dyn that dies leaves the stub to finish
       the call and take the thread back where it was. */
    if (ptrace(PTRACE_SETREGS, t->tid, NULL, &regs) < 0) {
        rc = QP_EIO;
        goto unmap;
    }
    rc = run_call(p, t, &h, page + mark);
    if (rc == 0)
        rc = dyn_proc_read(p, block + xs + 8, ret, 8);
    dyn_pt_give_back(p, t, &h, &saved);
    if (rc < 0)
        return rc; /* the page stays: the thread may still be in the stub */
unmap : {
    uint64_t mu[6] = { page, 4096, 0, 0, 0, 0 };
    int saved_errno = errno;
    if (!t->gone)
        dyn_proc_syscall(p, SYS_munmap, mu, &r);
    errno = saved_errno;
}
    return rc;
}

int
dyn_proc_threads(
    dyn_proc_t *p, dyn_thread_info_t *out /*OUT*/, size_t cap, size_t *n /*OUT*/)
{
    size_t k = 0;

    if (p == NULL || n == NULL || (out == NULL && cap != 0) || !p->stopped)
        return QP_EINVAL;
    for (size_t i = 0; i < p->nth; i++) {
        struct user_regs_struct regs;
        if (p->th[i].gone)
            continue;
        if (ptrace(PTRACE_GETREGS, p->th[i].tid, NULL, &regs) < 0) {
            if (errno == ESRCH) { /* killed while stopped (exit_group) */
                p->th[i].gone = 1;
                continue;
            }
            return QP_EIO;
        }
        if (k < cap) {
            out[k].tid = p->th[i].tid;
            out[k].pc = regs.rip;
            out[k].sp = regs.rsp;
            out[k].tp = regs.fs_base;
        }
        k++;
    }
    *n = k;
    return 0;
}

/* The number of possible CPUs (the highest in /sys/devices/system/cpu/possible, plus
 * one: the kernel's nr_cpu_ids, above every rseq cpu_id), or 0. */
static unsigned
possible_cpus(void)
{
    char buf[256];
    unsigned long hi = 0;
    int fd = open("/sys/devices/system/cpu/possible", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* "0-63", "0,2-5", "0": the last number is the highest */
    for (char *s = buf, *e; *s >= '0' && *s <= '9'; s = e + (*e == ',' || *e == '-')) {
        hi = strtoul(s, &e, 10) + 1;
        if (e == s || hi > 65536)
            return 0;
    }
    return (unsigned)hi;
}

/* The device and inode of the file mapped at ADDR in /proc/PID/maps (PID 0: our own),
 * into KEY ("MAJ:MIN INODE"), or, with ADDR 0, whether a mapping of file KEY exists:
 * 1, or 0. */
static int
mapped_file(int pid, uint64_t addr, char *key, size_t len)
{
    char path[64], line[512], dev[32];
    unsigned long long lo, hi, ino;
    int found = 0;
    snprintf(path, sizeof(path), pid ? "/proc/%d/maps" : "/proc/self/maps", pid);
    FILE *f = fopen(path, "re");
    while (f != NULL && !found && fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "%llx-%llx %*s %*s %31s %llu", &lo, &hi, dev, &ino) != 4
            || ino == 0)
            continue;
        char k[64];
        snprintf(k, sizeof(k), "%s %llu", dev, ino);
        if (addr == 0)
            found = strcmp(k, key) == 0;
        else if (addr >= lo && addr < hi && (found = 1))
            snprintf(key, len, "%s", k);
    }
    if (f != NULL)
        fclose(f);
    return found;
}

/* Does the environment of process PID turn glibc's rseq off (GLIBC_TUNABLES)? */
static int
rseq_tuned_off(int pid)
{
    char path[64], buf[65536];
    snprintf(path, sizeof(path), "/proc/%d/environ", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    for (char *s = buf; s < buf + n; s += strlen(s) + 1)
        if (strncmp(s, "GLIBC_TUNABLES=", 15) == 0
            && strstr(s, "glibc.pthread.rseq=0") != NULL)
            return 1;
    return 0;
}

/*
 * A process stopped at its exec, before its dynamic linker ran (no thread pointer, no
 * rseq area yet): glibc will register each thread's area at __rseq_offset, a constant
 * of its build, so known when its dynamic linker is the file ours is (our own
 * __rseq_offset, which glibc sets whether it registers or not). As dyn_proc_rseq.
 */
static int
rseq_before_start(dyn_proc_t *p, int32_t *offset, const char **why)
{
#ifdef RSEQ_SIG
    char key[64];
    if (rseq_tuned_off(p->pid)) {
        *why = "rseq is turned off (GLIBC_TUNABLES=glibc.pthread.rseq=0)";
        return 0;
    }
    if (!mapped_file(0, (uint64_t)(uintptr_t)&__rseq_offset, key, sizeof(key))
        || !mapped_file(p->pid, 0, key, sizeof(key)) || __rseq_offset < 0
        || __rseq_offset > 4095 - 32) {
        *why = "a static program, or one whose dynamic linker is not dyn's, started: "
               "where its threads' rseq areas will be is not known before it runs";
        return 0;
    }
    *offset = (int32_t)__rseq_offset;
    return 1;
#else
    (void)p;
    (void)offset;
    *why = "dyn was built with a C library before glibc 2.35 (no __rseq_offset)";
    return 0;
#endif
}

int
dyn_proc_rseq(dyn_proc_t *p, int32_t *offset, unsigned *ncpu, const char **why)
{
    struct rseq_conf {
        uint64_t abi_pointer; /* struct ptrace_rseq_configuration (Linux 5.13) */
        uint32_t abi_size, signature, flags, pad;
    } c;
    int64_t off = -1;
    size_t unregistered = 0;

    if (p == NULL || offset == NULL || ncpu == NULL || why == NULL || !p->stopped)
        return QP_EINVAL;
    for (size_t i = 0; i < p->nth; i++) {
        struct user_regs_struct regs;
        if (p->th[i].gone)
            continue;
        memset(&c, 0, sizeof(c));
        if (ptrace(PTRACE_GETREGS, p->th[i].tid, NULL, &regs) < 0
            || ptrace(PTRACE_GET_RSEQ_CONFIGURATION, p->th[i].tid, (void *)sizeof(c), &c)
                   < 0) {
            *why = "the kernel does not say where a thread's rseq area is (Linux 5.13's "
                   "PTRACE_GET_RSEQ_CONFIGURATION)";
            return 0;
        }
        if (c.abi_size == 0 && regs.fs_base == 0 && p->nth == 1) {
            int32_t o32;
            if (rseq_before_start(p, &o32, why) == 0)
                return 0;
            off = o32;
            break;
        }
        if (c.abi_size == 0) {
            /* A thread just made, before its start registered it (or whose registration
             * failed: cpu_id -2, ARCH_SN_ADD_CPU's locked add); rseq is off for the
             * process when no thread has it. */
            unregistered++;
            continue;
        }
        int64_t o = (int64_t)(c.abi_pointer - regs.fs_base);
        if (c.signature != ARCH_RSEQ_SIG || o < 0 || o > 4095 - 32
            || (off >= 0 && o != off)) {
            *why = "rseq is registered by something other than glibc";
            return 0;
        }
        off = o;
    }
    if (off < 0) {
        *why = unregistered > 0 ? "rseq is not registered (glibc before 2.35, "
                                  "GLIBC_TUNABLES=glibc.pthread.rseq=0, or a static "
                                  "program without it)"
                                : "no thread";
        return 0;
    }
    if ((*ncpu = possible_cpus()) == 0) {
        *why = "the possible CPUs are not known (/sys/devices/system/cpu/possible)";
        return 0;
    }
    *offset = (int32_t)off;
    return 1;
}

static int
u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int
dyn_proc_words(dyn_proc_t *p, size_t scan, uint64_t **out /*OUT*/, size_t *n /*OUT*/)
{
    dyn_thread_info_t *ti;
    size_t nt = 0, k = 0;
    uint64_t *w;

    if (p == NULL || out == NULL || n == NULL)
        return QP_EINVAL;
    scan &= ~(size_t)7;
    QP_CHECK(dyn_proc_threads(p, NULL, 0, &nt));
    ti = calloc(nt ? nt : 1, sizeof(*ti));
    w = malloc((nt ? nt : 1) * (scan / 8 + 1) * sizeof(*w));
    if (ti == NULL || w == NULL) {
        free(ti);
        free(w);
        return QP_ENOMEM;
    }
    if (dyn_proc_threads(p, ti, nt, &nt) < 0) {
        free(ti);
        free(w);
        return QP_EIO;
    }
    for (size_t i = 0; i < nt; i++) {
        uint64_t sp = ti[i].sp & ~7ull;
        w[k++] = ti[i].pc;
        /* Page by page: the stack may end before SCAN bytes. */
        for (uint64_t off = 0; off < scan;) {
            uint64_t chunk = 4096 - ((sp + off) & 4095);
            if (chunk > scan - off)
                chunk = scan - off;
            if (dyn_proc_read(p, sp + off, &w[k], chunk) < 0)
                break;
            k += chunk / 8;
            off += chunk;
        }
    }
    free(ti);
    qsort(w, k, sizeof(*w), u64_cmp);
    *out = w;
    *n = k;
    return 0;
}

/* The entry of MAP (N, sorted by from) whose from is PC, or NULL. */
static const dyn_pc_map_t *
pc_map_find(const dyn_pc_map_t *map, size_t n, uint64_t pc)
{
    size_t a = 0, b = n;
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (map[mid].from < pc)
            a = mid + 1;
        else
            b = mid;
    }
    return a < n && map[a].from == pc ? &map[a] : NULL;
}

static int
pc_map_cmp(const void *a, const void *b)
{
    const dyn_pc_map_t *x = a, *y = b;
    return x->from < y->from ? -1 : x->from > y->from;
}

void
dyn_pc_map_sort(dyn_pc_map_t *map, size_t n)
{
    if (n > 1)
        qsort(map, n, sizeof(*map), pc_map_cmp);
}

int
dyn_proc_move_pcs(dyn_proc_t *p, const dyn_pc_map_t *map, size_t n, unsigned *moved)
{
    if (p == NULL || (map == NULL && n != 0) || !p->stopped)
        return QP_EINVAL;
    for (size_t i = 0; i < p->nth && n != 0; i++) {
        struct user_regs_struct regs;
        const dyn_pc_map_t *m;
        if (p->th[i].gone)
            continue;
        if (ptrace(PTRACE_GETREGS, p->th[i].tid, NULL, &regs) < 0) {
            if (errno == ESRCH) { /* killed while stopped (exit_group) */
                p->th[i].gone = 1;
                continue;
            }
            return QP_EIO;
        }
        uint64_t rax, rip;
        restarted(&regs, &rax, &rip);
        if (rip != regs.rip || (m = pc_map_find(map, n, regs.rip)) == NULL)
            continue;
        regs.rip = m->to;
        if (ptrace(PTRACE_SETREGS, p->th[i].tid, NULL, &regs) < 0)
            return QP_EIO;
        if (moved != NULL)
            (*moved)++;
    }
    return 0;
}

int
dyn_proc_leave(dyn_proc_t *p, int tid, uint64_t lo, uint64_t hi, unsigned max_tries)
{
    return dyn_proc_leave_map(p, tid, lo, hi, NULL, 0, max_tries);
}

int
dyn_proc_leave_map(dyn_proc_t *p, int tid, uint64_t lo, uint64_t hi,
    const dyn_pc_map_t *map, size_t n, unsigned max_tries)
{
    dyn_thread_t *t;
    held_t h = { 0 };
    int rc = QP_ERANGE;

    if (p == NULL || !p->stopped || (t = dyn_pt_find_thread(p, tid)) == NULL || t->gone)
        return QP_EINVAL;
    for (unsigned i = 0; i <= max_tries; i++) {
        struct user_regs_struct regs;
        struct timespec ts = { 0, 20000L * (i < 50 ? i : 50) };
        if (ptrace(PTRACE_GETREGS, tid, NULL, &regs) < 0) {
            rc = QP_EIO;
            break;
        }
        if (regs.rip < lo || regs.rip >= hi) {
            rc = 0;
            break;
        }
        /* At an instruction of a copy: on at the same instruction of the original. */
        const dyn_pc_map_t *m = pc_map_find(map, n, regs.rip);
        if (m != NULL) {
            regs.rip = m->to;
            rc = ptrace(PTRACE_SETREGS, tid, NULL, &regs) < 0 ? QP_EIO : 0;
            break;
        }
        if (i == max_tries)
            break;
        /* Let it run alone a moment (a few instructions take it out), then park it. */
        if (ptrace(PTRACE_CONT, tid, NULL, NULL) < 0) {
            rc = QP_EIO;
            break;
        }
        t->stopped = 0;
        nanosleep(&ts, NULL);
        if ((rc = dyn_pt_park(p, t, &h)) < 0)
            break;
        rc = QP_ERANGE;
    }
    if (!t->gone)
        dyn_pt_requeue_held(p, t, &h);
    return rc;
}
