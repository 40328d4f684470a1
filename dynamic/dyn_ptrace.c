/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Process control: the only ptrace user. Every thread is seized and interrupted
 * (PTRACE_SEIZE + PTRACE_INTERRUPT, so detaching never leaves one stopped); memory goes
 * through process_vm_readv, /proc/PID/mem and PEEK/POKE; system calls run on the
 * process's behalf by single-stepping a `syscall` instruction with a thread's saved
 * registers.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dynamic/dyn.h"

#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

typedef struct dyn_thread {
    int tid;         /* thread id */
    int stopped;     /* in a ptrace stop we caused or saw */
    int pending_sig; /* signal to deliver when it is let go, or 0 */
    int gone;        /* exited while attached */
} dyn_thread_t;

struct dyn_proc {
    int pid;          /* process id */
    int child;        /* started by dyn_proc_spawn (our child) */
    int stopped;      /* every thread is stopped by us */
    int memfd;        /* /proc/PID/mem, or -1 */
    int reaped;       /* child: waitpid reported its end */
    int status;       /* child: its wait status */
    dyn_thread_t *th; /* the threads we are attached to */
    size_t nth;       /* their number */
    size_t cap;       /* allocated entries */
};

/*****************************************************************************
 * Threads: attach, wait for a stop, detach
 */

static int
add_thread(dyn_proc_t *p, int tid)
{
    if (p->nth == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 16;
        dyn_thread_t *n = realloc(p->th, cap * sizeof(*n));
        if (n == NULL)
            return QP_ENOMEM;
        p->th = n;
        p->cap = cap;
    }
    memset(&p->th[p->nth], 0, sizeof(p->th[0]));
    p->th[p->nth++].tid = tid;
    return 0;
}

static dyn_thread_t *
find_thread(dyn_proc_t *p, int tid)
{
    for (size_t i = 0; i < p->nth; i++)
        if (p->th[i].tid == tid)
            return &p->th[i];
    return NULL;
}

/*
 * Wait until thread T stops. A signal-delivery stop keeps its signal for later delivery;
 * an exit marks the thread gone. Returns 0 or QP_EIO.
 */
static int
wait_stop(dyn_proc_t *p, dyn_thread_t *t)
{
    int st;

    for (;;) {
        pid_t r = waitpid(t->tid, &st, __WALL);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno == ECHILD) { /* already gone and reaped */
                t->gone = 1;
                return 0;
            }
            return QP_EIO;
        }
        if (WIFEXITED(st) || WIFSIGNALED(st)) {
            t->gone = 1;
            if (t->tid == p->pid && p->child) {
                p->reaped = 1;
                p->status = st;
            }
            return 0;
        }
        if (!WIFSTOPPED(st))
            continue;
        t->stopped = 1;
        if ((st >> 16) == 0) {
            int sig = WSTOPSIG(st);
            /* Signal-delivery stop: keep the signal, but not a stop signal we caused. */
            if (sig != SIGTRAP || t->pending_sig == 0)
                t->pending_sig = sig == SIGTRAP ? 0 : sig;
        }
        return 0;
    }
}

/* Read the thread ids of /proc/PID/task; seize and interrupt the new ones. *CHANGED. */
static int
seize_new(dyn_proc_t *p, int *changed /*OUT*/)
{
    char path[64];
    DIR *d;
    struct dirent *e;
    int rc = 0, any = 0;

    *changed = 0;
    snprintf(path, sizeof(path), "/proc/%d/task", p->pid);
    d = opendir(path);
    if (d == NULL) {
        if (errno == ENOENT)
            errno = ESRCH;
        return QP_EIO;
    }
    while ((e = readdir(d)) != NULL) {
        char *end;
        long tid = strtol(e->d_name, &end, 10);
        if (e->d_name[0] < '0' || e->d_name[0] > '9' || *end != '\0')
            continue;
        any = 1;
        if (find_thread(p, (int)tid) != NULL)
            continue;
        if (ptrace(PTRACE_SEIZE, (pid_t)tid, NULL, NULL) < 0) {
            if (errno == ESRCH) /* exited meanwhile */
                continue;
            rc = QP_EIO;
            break;
        }
        if ((rc = add_thread(p, (int)tid)) < 0)
            break;
        if (ptrace(PTRACE_INTERRUPT, (pid_t)tid, NULL, NULL) < 0 && errno != ESRCH) {
            rc = QP_EIO;
            break;
        }
        *changed = 1;
    }
    {
        int saved = errno;
        closedir(d);
        errno = saved;
    }
    if (rc == 0 && !any) {
        errno = ESRCH;
        rc = QP_EIO;
    }
    return rc;
}

static void
detach_all(dyn_proc_t *p)
{
    for (size_t i = 0; i < p->nth; i++) {
        dyn_thread_t *t = &p->th[i];
        if (!t->gone)
            ptrace(PTRACE_DETACH, t->tid, NULL, (void *)(long)t->pending_sig);
    }
    p->nth = 0;
    p->stopped = 0;
}

/* Seize every thread, rescanning the task list until it is stable. */
static int
stop_all(dyn_proc_t *p)
{
    int changed, rc, live = 0;

    do {
        rc = seize_new(p, &changed);
        if (rc < 0)
            break;
        for (size_t i = 0; i < p->nth; i++)
            if (!p->th[i].stopped && !p->th[i].gone && (rc = wait_stop(p, &p->th[i])) < 0)
                break;
    } while (rc == 0 && changed);
    if (rc == 0) {
        for (size_t i = 0; i < p->nth; i++)
            live += !p->th[i].gone;
        if (live == 0) {
            errno = ESRCH;
            rc = QP_EIO;
        }
    }
    if (rc < 0) {
        int saved = errno;
        detach_all(p);
        errno = saved;
        return rc;
    }
    p->stopped = 1;
    return 0;
}

static int
open_mem(dyn_proc_t *p)
{
    char path[64];

    if (p->memfd >= 0)
        return 0;
    snprintf(path, sizeof(path), "/proc/%d/mem", p->pid);
    p->memfd = open(path, O_RDWR | O_CLOEXEC);
    return 0; /* PEEK/POKE remain when /proc/PID/mem cannot be opened */
}

static int
proc_new(int pid, dyn_proc_t **out)
{
    dyn_proc_t *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return QP_ENOMEM;
    p->pid = pid;
    p->memfd = -1;
    *out = p;
    return 0;
}

int
dyn_proc_attach(int pid, dyn_proc_t **out /*OUT*/)
{
    dyn_proc_t *p;
    int rc;

    if (out == NULL || pid <= 0)
        return QP_EINVAL;
    QP_CHECK(proc_new(pid, &p));
    if ((rc = stop_all(p)) < 0) {
        int saved = errno;
        dyn_proc_destroy(p);
        errno = saved;
        return rc;
    }
    open_mem(p);
    *out = p;
    return 0;
}

int
dyn_proc_spawn(char *const argv[], dyn_proc_t **out /*OUT*/)
{
    int pipefd[2], st, err = 0;
    pid_t pid;
    dyn_proc_t *p;

    if (argv == NULL || argv[0] == NULL || out == NULL)
        return QP_EINVAL;
    if (pipe2(pipefd, O_CLOEXEC) < 0)
        return QP_EIO;
    pid = fork();
    if (pid < 0)
        return QP_EIO;
    if (pid == 0) {
        close(pipefd[0]);
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) == 0)
            execvp(argv[0], argv);
        err = errno;
        if (write(pipefd[1], &err, sizeof(err)) < 0)
            _exit(127);
        _exit(127);
    }
    close(pipefd[1]);
    if (read(pipefd[0], &err, sizeof(err)) == (ssize_t)sizeof(err)) {
        close(pipefd[0]);
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        errno = err;
        return QP_EIO;
    }
    close(pipefd[0]);
    if (proc_new(pid, &p) < 0) {
        kill(pid, SIGKILL);
        return QP_ENOMEM;
    }
    p->child = 1;
    if (add_thread(p, pid) < 0 || wait_stop(p, &p->th[0]) < 0 || p->th[0].gone) {
        err = p->th && p->th[0].gone ? ECHILD : errno;
        if (!p->reaped)
            kill(pid, SIGKILL);
        dyn_proc_destroy(p);
        errno = err;
        return QP_EIO;
    }
    p->th[0].pending_sig = 0; /* the SIGTRAP of execve */
    p->stopped = 1;
    open_mem(p);
    *out = p;
    return 0;
}

int
dyn_proc_stop(dyn_proc_t *p)
{
    if (p == NULL)
        return QP_EINVAL;
    if (p->stopped)
        return 0;
    if (p->reaped) {
        errno = ESRCH;
        return QP_EIO;
    }
    return stop_all(p);
}

int
dyn_proc_resume(dyn_proc_t *p)
{
    if (p == NULL)
        return QP_EINVAL;
    if (p->stopped)
        detach_all(p);
    return 0;
}

void
dyn_proc_destroy(dyn_proc_t *p)
{
    if (p == NULL)
        return;
    dyn_proc_resume(p);
    if (p->memfd >= 0)
        close(p->memfd);
    free(p->th);
    free(p);
}

int
dyn_proc_pid(const dyn_proc_t *p)
{
    return p ? p->pid : -1;
}

int
dyn_proc_is_stopped(const dyn_proc_t *p)
{
    return p != NULL && p->stopped;
}

int
dyn_proc_ended(dyn_proc_t *p, int *status /*OUT*/)
{
    char path[64], buf[512];
    FILE *f;

    if (p == NULL || status == NULL || p->stopped)
        return QP_EINVAL;
    if (p->child) {
        if (!p->reaped) {
            int st;
            pid_t r = waitpid(p->pid, &st, WNOHANG);
            if (r == p->pid && (WIFEXITED(st) || WIFSIGNALED(st))) {
                p->reaped = 1;
                p->status = st;
            }
        }
        *status = p->status;
        return p->reaped;
    }
    *status = 0;
    snprintf(path, sizeof(path), "/proc/%d/stat", p->pid);
    f = fopen(path, "r");
    if (f == NULL)
        return 1;
    if (fgets(buf, sizeof(buf), f) != NULL) {
        char *rp = strrchr(buf, ')');
        fclose(f);
        return rp != NULL && (rp[2] == 'Z' || rp[2] == 'X');
    }
    fclose(f);
    return 1;
}

/*****************************************************************************
 * Memory
 */

int
dyn_proc_read(dyn_proc_t *p, uint64_t addr, void *buf, size_t len)
{
    struct iovec l = { buf, len }, r = { (void *)(uintptr_t)addr, len };
    uint8_t *b = buf;
    size_t done = 0;

    if (p == NULL || (buf == NULL && len != 0))
        return QP_EINVAL;
    if (len == 0)
        return 0;
    if (process_vm_readv(p->pid, &l, 1, &r, 1, 0) == (ssize_t)len)
        return 0;
    if (p->memfd >= 0 && pread(p->memfd, buf, len, (off_t)addr) == (ssize_t)len)
        return 0;
    if (!p->stopped)
        return QP_EIO;
    while (done < len) {
        uint64_t a = (addr + done) & ~7ull;
        size_t off = (size_t)(addr + done - a), n = 8 - off;
        long w;
        errno = 0;
        w = ptrace(PTRACE_PEEKDATA, p->pid, (void *)(uintptr_t)a, NULL);
        if (errno != 0)
            return QP_EIO;
        if (n > len - done)
            n = len - done;
        memcpy(b + done, (uint8_t *)&w + off, n);
        done += n;
    }
    return 0;
}

int
dyn_proc_write(dyn_proc_t *p, uint64_t addr, const void *buf, size_t len)
{
    const uint8_t *b = buf;
    size_t done = 0;

    if (p == NULL || (buf == NULL && len != 0) || !p->stopped)
        return QP_EINVAL;
    if (len == 0)
        return 0;
    if (p->memfd >= 0 && pwrite(p->memfd, buf, len, (off_t)addr) == (ssize_t)len)
        return 0;
    while (done < len) {
        uint64_t a = (addr + done) & ~7ull;
        size_t off = (size_t)(addr + done - a), n = 8 - off;
        long w;
        errno = 0;
        w = ptrace(PTRACE_PEEKDATA, p->pid, (void *)(uintptr_t)a, NULL);
        if (errno != 0)
            return QP_EIO;
        if (n > len - done)
            n = len - done;
        memcpy((uint8_t *)&w + off, b + done, n);
        if (ptrace(PTRACE_POKEDATA, p->pid, (void *)(uintptr_t)a, (void *)w) < 0)
            return QP_EIO;
        done += n;
    }
    return 0;
}

/*****************************************************************************
 * Registers, single steps and system calls on the process's behalf
 */

static dyn_thread_t *
live_thread(dyn_proc_t *p)
{
    for (size_t i = 0; i < p->nth; i++)
        if (!p->th[i].gone && p->th[i].stopped)
            return &p->th[i];
    return NULL;
}

/*
 * One single step of T. Stops that are not the step's trap (a leftover interrupt, a
 * signal that arrived) are absorbed (signals kept for later) and the step is retried.
 */
static int
step_once(dyn_thread_t *t)
{
    for (int tries = 0; tries < 32; tries++) {
        int st;
        pid_t r;
        if (ptrace(PTRACE_SINGLESTEP, t->tid, NULL, NULL) < 0)
            return QP_EIO;
        while ((r = waitpid(t->tid, &st, __WALL)) < 0 && errno == EINTR)
            ;
        if (r < 0)
            return QP_EIO;
        if (WIFEXITED(st) || WIFSIGNALED(st)) {
            t->gone = 1;
            errno = ESRCH;
            return QP_EIO;
        }
        if (!WIFSTOPPED(st))
            continue;
        if ((st >> 16) == 0 && WSTOPSIG(st) == SIGTRAP)
            return 0;
        if ((st >> 16) == 0 && WSTOPSIG(st) != SIGTRAP)
            t->pending_sig = WSTOPSIG(st);
    }
    errno = EAGAIN;
    return QP_EIO;
}

int
dyn_proc_syscall(dyn_proc_t *p, long nr, const uint64_t args[6], int64_t *ret /*OUT*/)
{
    static const uint8_t sc[2] = { 0x0f, 0x05 };
    struct user_regs_struct saved, regs;
    dyn_thread_t *t;
    uint8_t before[2], orig[2];
    uint64_t at;
    int wrote = 0, rc;

    if (p == NULL || args == NULL || ret == NULL || !p->stopped)
        return QP_EINVAL;
    t = live_thread(p);
    if (t == NULL) {
        errno = ESRCH;
        return QP_EIO;
    }
    if (ptrace(PTRACE_GETREGS, t->tid, NULL, &saved) < 0)
        return QP_EIO;
    at = saved.rip;
    if (dyn_proc_read(p, at - 2, before, 2) == 0 && memcmp(before, sc, 2) == 0) {
        at -= 2; /* an existing `syscall` (the thread is usually stopped in one) */
    } else {
        QP_CHECK(dyn_proc_read(p, at, orig, 2));
        QP_CHECK(dyn_proc_write(p, at, sc, 2));
        wrote = 1;
    }
    regs = saved;
    regs.rip = at;
    regs.rax = (unsigned long long)nr;
    regs.orig_rax = (unsigned long long)-1; /* no system-call restart on the way */
    regs.rdi = args[0];
    regs.rsi = args[1];
    regs.rdx = args[2];
    regs.r10 = args[3];
    regs.r8 = args[4];
    regs.r9 = args[5];
    rc = ptrace(PTRACE_SETREGS, t->tid, NULL, &regs) < 0 ? QP_EIO : 0;
    for (int i = 0; rc == 0 && i < 4; i++) {
        rc = step_once(t);
        if (rc == 0 && ptrace(PTRACE_GETREGS, t->tid, NULL, &regs) < 0)
            rc = QP_EIO;
        if (rc == 0 && regs.rip == at + 2)
            break;
        if (rc == 0 && i == 3) {
            errno = EAGAIN;
            rc = QP_EIO;
        }
    }
    if (rc == 0)
        *ret = (int64_t)regs.rax;
    if (!t->gone) {
        int saved_errno = errno;
        if (wrote)
            dyn_proc_write(p, at, orig, 2);
        ptrace(PTRACE_SETREGS, t->tid, NULL, &saved);
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
        }
        k++;
    }
    *n = k;
    return 0;
}

int
dyn_proc_step_out(dyn_proc_t *p, int tid, uint64_t lo, uint64_t hi, unsigned max_steps)
{
    dyn_thread_t *t;

    if (p == NULL || !p->stopped || (t = find_thread(p, tid)) == NULL || t->gone)
        return QP_EINVAL;
    for (unsigned i = 0; i <= max_steps; i++) {
        struct user_regs_struct regs;
        if (ptrace(PTRACE_GETREGS, tid, NULL, &regs) < 0)
            return QP_EIO;
        if (regs.rip < lo || regs.rip >= hi)
            return 0;
        if (i == max_steps)
            break;
        QP_CHECK(step_once(t));
    }
    return QP_ERANGE;
}

/*****************************************************************************
 * The main executable
 */

int
dyn_proc_load_bias(dyn_proc_t *p, uint64_t link_entry, uint64_t *bias /*OUT*/)
{
    char path[64];
    uint64_t av[2];
    int fd;

    if (p == NULL || bias == NULL)
        return QP_EINVAL;
    snprintf(path, sizeof(path), "/proc/%d/auxv", p->pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return QP_EIO;
    while (read(fd, av, sizeof(av)) == (ssize_t)sizeof(av) && av[0] != 0) {
        if (av[0] == 9 /* AT_ENTRY */) {
            close(fd);
            *bias = av[1] - link_entry;
            return 0;
        }
    }
    close(fd);
    return QP_EFORMAT;
}

const char *
dyn_proc_exe_path(const dyn_proc_t *p, char *buf, size_t cap)
{
    if (p == NULL || buf == NULL || cap == 0)
        return NULL;
    snprintf(buf, cap, "/proc/%d/exe", p->pid);
    return buf;
}
