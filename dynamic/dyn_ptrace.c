/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Process control: the only ptrace user. Every thread is seized and interrupted
 * (PTRACE_SEIZE + PTRACE_INTERRUPT, so detaching never leaves one stopped); memory goes
 * through process_vm_readv, /proc/PID/mem and PEEK/POKE; system calls run on the
 * process's behalf through a small stub (see dyn_proc_syscall).
 *
 * Nothing here single-steps or plants a breakpoint (but dyn_proc_run_to_entry, in a
 * program dyn started and that is killed with dyn): if dyn dies (SIGKILL) at any moment,
 * the kernel detaches the threads and each one must be able to go on as if nothing had
 * happened. A single step leaves the trap flag and the syscall-exit trap set in a thread
 * until its tracer resumes it, and a tracer that dies never does: the thread then dies
 * of SIGTRAP. So threads only ever run under PTRACE_SYSCALL (syscall stops; with
 * PTRACE_O_TRACESYSGOOD their SIGTRAP|0x80 is not a valid signal, so a thread whose
 * tracer died in one gets none) and PTRACE_CONT, and are stopped with PTRACE_INTERRUPT.
 * A signal that arrives while dyn runs a thread is taken from it and queued again
 * (rt_tgsigqueueinfo, or tgkill) as soon as the thread is parked: it is never held
 * only in dyn's memory for long.
 */
#include "config.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dynamic/dyn.h"

#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

/* Options of every seized thread: syscall stops report SIGTRAP|0x80 (see the top). */
#define SEIZE_OPTS PTRACE_O_TRACESYSGOOD
#define SYSCALL_STOP (SIGTRAP | 0x80)
#ifndef PTRACE_EVENT_CLONE
#define PTRACE_EVENT_CLONE 3
#endif
#define FOLLOW_OPTS                                                                     \
    (SEIZE_OPTS | PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEEXEC)

typedef struct dyn_thread {
    int tid;         /* thread id */
    int stopped;     /* in a ptrace stop we caused or saw */
    int pending_sig; /* its current stop is a signal-delivery stop of this signal */
    int gone;        /* exited while attached */
    int event;       /* the PTRACE_EVENT_* of its last stop, or 0 */
    int at_brk;      /* following: stopped on the breakpoint (its int3 done) */
    int group;       /* following: in a group stop (resumed with PTRACE_LISTEN) */
    int exit_seen;   /* its end was waited for: its status is known */
    int zombie;      /* following: the first thread, ended before the others (gone set:
                      * it stops no more; its end is reported once theirs are reaped) */
} dyn_thread_t;

struct dyn_proc {
    int pid;          /* process id */
    int child;        /* started by dyn_proc_spawn (our child) */
    int stopped;      /* every thread is stopped by us */
    int memfd;        /* /proc/PID/mem, or -1 */
    int reaped;       /* child: waitpid reported its end */
    int status;       /* child: its wait status */
    uint64_t stub;    /* where dyn_proc_syscall puts its stub (0: not found yet) */
    uint8_t stub_orig[64]; /* the bytes the stub covers, put back when the threads run */
    int64_t stub_off; /* the stub's offset in the executable's file (-1: the vDSO's) */
    int stub_dirty;   /* the stub is written over them */
    dyn_thread_t *th; /* the threads we are attached to */
    size_t nth;       /* their number */
    size_t cap;       /* allocated entries */
    int follow;       /* dyn_proc_follow: threads stay seized while the process runs */
    uint64_t brk;     /* ... the breakpoint (dyn_proc_set_break), 0: none */
    uint8_t brk_orig; /* ... the byte it replaced */
    int execed;       /* ... an exec was seen while stopping (for dyn_proc_poll) */
    int forks[16];    /* ... forked children seen while stopping (for dyn_proc_poll) */
    int nforks;
    int report_threads; /* ... threads' starts and ends are events (dyn_proc_report_threads) */
    dyn_event_t *tev; /* ... those not yet returned by dyn_proc_poll, oldest first */
    size_t ntev, captev;
};

static void follow_seen(dyn_proc_t *p, size_t i, int st);
static int follow_stop_all(dyn_proc_t *p);
static int cont_all(dyn_proc_t *p);
static int take_child(dyn_proc_t *p, int cpid, dyn_proc_t **out);

/* Signals taken from a thread while dyn ran it, to queue again (requeue_held). */
typedef struct held {
    int n;
    int sig[8];
    siginfo_t info[8];
    int has_info[8];
} held_t;

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

/* Queue a thread event (dyn_proc_report_threads) for dyn_proc_poll. */
static void
thread_event(dyn_proc_t *p, int kind, int tid, int st)
{
    if (!p->report_threads)
        return;
    if (p->ntev == p->captev) {
        size_t cap = p->captev ? 2 * p->captev : 16;
        dyn_event_t *v = realloc(p->tev, cap * sizeof(*v));
        if (v == NULL)
            return; /* (out of memory: the event is lost, the thread is still handled) */
        p->tev = v;
        p->captev = cap;
    }
    p->tev[p->ntev++] = (dyn_event_t) { .kind = kind, .tid = tid, .status = st };
}

/* Note the end of thread T from wait status ST. */
static void
mark_gone(dyn_proc_t *p, dyn_thread_t *t, int st)
{
    if (!t->gone && t->tid != p->pid)
        thread_event(p, DYN_EV_THREAD_EXIT, t->tid, st);
    t->gone = 1;
    t->stopped = 0;
    t->exit_seen = 1;
    if (t->tid == p->pid) {
        p->reaped = p->child;
        p->status = st;
    }
}

/*
 * Wait until thread T stops. A signal-delivery stop keeps its signal, which the detach
 * delivers (the thread stays in that stop until then); an exit marks the thread gone.
 * Returns 0 or QP_EIO.
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
            mark_gone(p, t, st);
            return 0;
        }
        if (!WIFSTOPPED(st))
            continue;
        t->stopped = 1;
        t->event = st >> 16;
        t->pending_sig = t->event == 0 && WSTOPSIG(st) != SYSCALL_STOP ? WSTOPSIG(st) : 0;
        if (p->follow)
            follow_seen(p, (size_t)(t - p->th), st); /* (may move p->th) */
        return 0;
    }
}

/*
 * Why PTRACE_SEIZE of thread TID failed with EPERM when the thread is on its way out
 * (a zombie or dead thread cannot be traced): 1 when /proc says it is exiting or gone,
 * so that it can be skipped like one that has vanished (ESRCH).
 */
static int
thread_exiting(int pid, int tid)
{
    char path[64], buf[512];
    FILE *f;
    char *rp;

    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
    f = fopen(path, "r");
    if (f == NULL)
        return 1;
    rp = fgets(buf, sizeof(buf), f) != NULL ? strrchr(buf, ')') : NULL;
    fclose(f);
    return rp == NULL || rp[1] == '\0' || rp[2] == 'Z' || rp[2] == 'X' || rp[2] == 'x';
}

/* Seize thread TID and ask it to stop. 1 when it vanished meanwhile, 0, or QP_EIO. */
static int
seize_one(dyn_proc_t *p, int tid)
{
    if (ptrace(PTRACE_SEIZE, (pid_t)tid, NULL, (void *)(long)SEIZE_OPTS) < 0) {
        /* A thread that exits while we read the task list: ESRCH, or EPERM once it is
           a zombie. The main thread may stay a zombie while others run (it called
           pthread_exit): not traced, the others are. */
        if (errno == ESRCH || (errno == EPERM && thread_exiting(p->pid, tid)))
            return 1;
        return QP_EIO;
    }
    QP_CHECK(add_thread(p, tid));
    if (ptrace(PTRACE_INTERRUPT, (pid_t)tid, NULL, NULL) < 0 && errno != ESRCH)
        return QP_EIO;
    return 0;
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
        if ((rc = seize_one(p, (int)tid)) < 0)
            break;
        *changed |= rc == 0;
        rc = 0;
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

/*
 * The child of dyn_proc_spawn: wait until the parent has seized it (it closes the
 * pipe), then exec. A failure is written to the pipe as an errno.
 */
static void
spawn_child(char *const argv[], int go, int report)
{
    char c;
    int err;

    while (read(go, &c, 1) < 0 && errno == EINTR)
        ;
    execvp(argv[0], argv);
    err = errno;
    if (write(report, &err, sizeof(err)) < 0)
        _exit(127);
    _exit(127);
}

/* Wait for the PTRACE_EVENT_EXEC stop of T; signals before it are delivered. */
static int
wait_exec(dyn_proc_t *p, dyn_thread_t *t)
{
    for (;;) {
        QP_CHECK(wait_stop(p, t));
        if (t->gone || t->event == PTRACE_EVENT_EXEC)
            return 0;
        if (ptrace(PTRACE_CONT, t->tid, NULL, (void *)(long)t->pending_sig) < 0)
            return QP_EIO;
        t->stopped = 0;
        t->pending_sig = 0;
    }
}

int
dyn_proc_spawn(char *const argv[], dyn_proc_t **out /*OUT*/)
{
    int go[2], report[2], err = 0;
    pid_t pid;
    dyn_proc_t *p;

    if (argv == NULL || argv[0] == NULL || out == NULL)
        return QP_EINVAL;
    if (pipe2(go, O_CLOEXEC) < 0)
        return QP_EIO;
    if (pipe2(report, O_CLOEXEC) < 0) {
        close(go[0]);
        close(go[1]);
        return QP_EIO;
    }
    pid = fork();
    if (pid < 0)
        return QP_EIO;
    if (pid == 0) {
        close(go[1]);
        close(report[0]);
        spawn_child(argv, go[0], report[1]);
    }
    close(go[0]);
    close(report[1]);
    /* Seized (not PTRACE_TRACEME): stopped at its execve by PTRACE_EVENT_EXEC, and
       interruptible like an attached process. */
    if (ptrace(PTRACE_SEIZE, pid, NULL, (void *)(long)(SEIZE_OPTS | PTRACE_O_TRACEEXEC))
        < 0) {
        err = errno;
        kill(pid, SIGKILL);
    }
    close(go[1]);
    if (err == 0 && read(report[0], &err, sizeof(err)) != (ssize_t)sizeof(err))
        err = 0;
    close(report[0]);
    if (err != 0 || proc_new(pid, &p) < 0) {
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
            ;
        errno = err != 0 ? err : ENOMEM;
        return err != 0 ? QP_EIO : QP_ENOMEM;
    }
    p->child = 1;
    if (add_thread(p, pid) < 0 || wait_exec(p, &p->th[0]) < 0 || p->th[0].gone) {
        err = p->th && p->th[0].gone ? ECHILD : errno;
        if (!p->reaped)
            kill(pid, SIGKILL);
        dyn_proc_destroy(p);
        errno = err;
        return QP_EIO;
    }
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
    return p->follow ? follow_stop_all(p) : stop_all(p);
}

static void
stub_restore(dyn_proc_t *p);

int
dyn_proc_resume(dyn_proc_t *p)
{
    if (p == NULL)
        return QP_EINVAL;
    /* The stub's bytes back as they were: no system call of ours is under way now, and
     * the process is then as if dyn had not been there (but for what a session left). */
    if (p->stopped)
        stub_restore(p);
    if (p->stopped && p->follow)
        return cont_all(p);
    if (p->stopped)
        detach_all(p);
    return 0;
}

void
dyn_proc_destroy(dyn_proc_t *p)
{
    if (p == NULL)
        return;
    if (p->follow) { /* stop it to take the breakpoint out, then let it go */
        if (!p->stopped && follow_stop_all(p) < 0)
            p->stopped = 1; /* (gone: detach what is left) */
        dyn_proc_unfollow(p);
    }
    dyn_proc_resume(p);
    if (p->memfd >= 0)
        close(p->memfd);
    free(p->th);
    free(p->tev);
    free(p);
}

void
dyn_proc_kill(dyn_proc_t *p)
{
    if (p == NULL)
        return;
    int pid = p->pid, child = p->child && !p->reaped;
    if (child)
        kill(pid, SIGKILL);
    dyn_proc_destroy(p);
    if (child)
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
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
    if (p->follow) { /* dyn_proc_poll reaps */
        dyn_thread_t *lead = find_thread(p, p->pid);
        *status = p->status;
        return p->reaped || lead == NULL || (lead->gone && !lead->zombie);
    }
    if (p->child) {
        if (!p->reaped) {
            int st;
            pid_t r = waitpid(p->pid, &st, WNOHANG | __WALL);
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

int
dyn_proc_report_threads(dyn_proc_t *p, int on)
{
    if (p == NULL)
        return QP_EINVAL;
    p->report_threads = on != 0;
    if (!on)
        p->ntev = 0;
    return 0;
}

/* Is some thread of process PID still there (not a zombie, not dead)? */
static int
any_thread_alive(int pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", pid);
    DIR *d = opendir(path);
    struct dirent *e;
    int alive = 0;
    if (d == NULL)
        return 0;
    while (!alive && (e = readdir(d)) != NULL)
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9')
            alive = !thread_exiting(pid, atoi(e->d_name));
    closedir(d);
    return alive;
}

int
dyn_proc_exited(dyn_proc_t *p, int *status /*OUT*/)
{
    if (p == NULL || status == NULL)
        return QP_EINVAL;
    dyn_thread_t *lead = find_thread(p, p->pid);
    if (p->reaped || (lead != NULL && lead->exit_seen)) {
        *status = p->status;
        return 1;
    }
    if (any_thread_alive(p->pid))
        return 0;
    /* Gone, or a zombie. Ours to wait for when it is our child or its threads are
     * traced by us: their ends come to us, the leader's last (a dead thread is in no
     * ptrace stop, so no event of a live thread is taken here). */
    *status = -1;
    if (p->child || p->nth > 0) {
        for (size_t i = 0; i < p->nth; i++) {
            dyn_thread_t *t = &p->th[i];
            int st;
            if (t->gone || t->tid == p->pid)
                continue;
            if (waitpid(t->tid, &st, WNOHANG | __WALL) == t->tid
                && (WIFEXITED(st) || WIFSIGNALED(st)))
                mark_gone(p, t, st);
        }
        int st;
        pid_t r = waitpid(p->pid, &st, WNOHANG | __WALL);
        if (r == p->pid && (WIFEXITED(st) || WIFSIGNALED(st))) {
            if (lead != NULL)
                mark_gone(p, lead, st);
            p->reaped = p->child;
            p->status = st;
            *status = st;
        }
    }
    for (size_t i = 0; i < p->nth; i++) { /* nothing is held any more */
        p->th[i].gone = 1;
        p->th[i].stopped = 0;
    }
    p->stopped = 0;
    return 1;
}

/*****************************************************************************
 * Memory
 */

/*
 * LEN bytes at ADDR through PTRACE_PEEKDATA (and, with WRITE, PTRACE_POKEDATA) a word at
 * a time: each aligned word is read, READ gets its part of it or WRITE's part is put in
 * it and it goes back. The slow way, for a stopped process whose memory file is closed.
 */
static int
peek_poke(dyn_proc_t *p, uint64_t addr, uint8_t *read, const uint8_t *write, size_t len)
{
    for (size_t done = 0; done < len;) {
        uint64_t a = (addr + done) & ~7ull;
        size_t off = (size_t)(addr + done - a), n = 8 - off;
        long w;
        errno = 0;
        w = ptrace(PTRACE_PEEKDATA, p->pid, (void *)(uintptr_t)a, NULL);
        if (errno != 0)
            return QP_EIO;
        if (n > len - done)
            n = len - done;
        if (read != NULL)
            memcpy(read + done, (uint8_t *)&w + off, n);
        else {
            memcpy((uint8_t *)&w + off, write + done, n);
            if (ptrace(PTRACE_POKEDATA, p->pid, (void *)(uintptr_t)a, (void *)w) < 0)
                return QP_EIO;
        }
        done += n;
    }
    return 0;
}

int
dyn_proc_read(dyn_proc_t *p, uint64_t addr, void *buf, size_t len)
{
    struct iovec l = { buf, len }, r = { (void *)(uintptr_t)addr, len };

    if (p == NULL || (buf == NULL && len != 0))
        return QP_EINVAL;
    if (len == 0)
        return 0;
    if (process_vm_readv(p->pid, &l, 1, &r, 1, 0) == (ssize_t)len)
        return 0;
    if (p->memfd >= 0) {
        ssize_t n = pread(p->memfd, buf, len, (off_t)addr);
        /* The memory file reads what PTRACE_PEEKDATA reads (both past page protections):
         * where it stops short, a word at a time would fail at the same place, after a
         * system call per word (reads of 64 KB windows ending past a mapping cost tens of
         * ms of a stop each). */
        if (n == (ssize_t)len)
            return 0;
        if (n >= 0 || errno == EIO)
            return QP_EIO;
    }
    if (!p->stopped)
        return QP_EIO;
    return peek_poke(p, addr, buf, NULL, len);
}

int
dyn_proc_write(dyn_proc_t *p, uint64_t addr, const void *buf, size_t len)
{
    if (p == NULL || (buf == NULL && len != 0) || !p->stopped)
        return QP_EINVAL;
    if (len == 0)
        return 0;
    if (p->memfd >= 0 && pwrite(p->memfd, buf, len, (off_t)addr) == (ssize_t)len)
        return 0;
    return peek_poke(p, addr, NULL, buf, len);
}

/*****************************************************************************
 * Running a thread: only PTRACE_SYSCALL and PTRACE_CONT, stopped by PTRACE_INTERRUPT
 */

/* Is thread T stopped inside a system call whose result the kernel has yet to give it
 * (a followed process's clone, fork, vfork or exec event stop)? */
static int
in_event_call(const dyn_thread_t *t)
{
    return t->event == PTRACE_EVENT_CLONE || t->event == PTRACE_EVENT_FORK
        || t->event == PTRACE_EVENT_VFORK || t->event == PTRACE_EVENT_VFORK_DONE
        || t->event == PTRACE_EVENT_EXEC;
}

/*
 * A stopped live thread for a system call: one not holding a signal, if any; one
 * stopped inside a clone (or fork, exec) only when there is no other. Such a thread
 * would be sent to the stub with its call still to return: the kernel then writes the
 * call's result over the stub's system-call number, and the registers put back after
 * it make the clone return -ENOSYS (glibc's pthread_create then falls back to clone(2)
 * with a stack made for clone3: the new thread jumps to 0).
 */
static dyn_thread_t *
live_thread(dyn_proc_t *p)
{
    dyn_thread_t *any = NULL, *in_call = NULL;

    for (size_t i = 0; i < p->nth; i++) {
        dyn_thread_t *t = &p->th[i];
        if (t->gone || !t->stopped)
            continue;
        if (in_event_call(t)) {
            if (in_call == NULL)
                in_call = t;
            continue;
        }
        if (t->pending_sig == 0)
            return t;
        if (any == NULL)
            any = t;
    }
    return any != NULL ? any : in_call;
}

/* Keep signal SIG (taken from T's signal-delivery stop) in H, with its siginfo. */
static void
hold(held_t *h, dyn_thread_t *t, int sig)
{
    int i;

    for (i = 0; i < h->n; i++)
        if (h->sig[i] == sig && sig < SIGRTMIN)
            return; /* a standard signal is pending once */
    if (h->n == 8)
        return; /* (an eighth different signal in one system call: not seen) */
    i = h->n++;
    h->sig[i] = sig;
    h->has_info[i] = ptrace(PTRACE_GETSIGINFO, t->tid, NULL, &h->info[i]) == 0;
}

/*
 * Queue the signals of H to thread T again, now that it is parked: with their siginfo
 * where the kernel lets us (rt_tgsigqueueinfo refuses kernel-made ones), else tgkill.
 */
static void
requeue_held(dyn_proc_t *p, dyn_thread_t *t, held_t *h)
{
    int saved = errno;

    for (int i = 0; i < h->n; i++) {
        if (h->has_info[i]
            && syscall(SYS_rt_tgsigqueueinfo, p->pid, t->tid, h->sig[i], &h->info[i])
                == 0)
            continue;
        syscall(SYS_tgkill, p->pid, t->tid, h->sig[i]);
    }
    h->n = 0;
    errno = saved;
}

/*
 * Restart thread T with REQ (PTRACE_SYSCALL or PTRACE_CONT; T may also be running
 * already, t->stopped clear) and wait for its next stop that is not a signal:
 * signal-delivery stops on the way are taken into H and the thread goes on. Its
 * signal-delivery stop, if it was in one, is taken into H first. *ST is the wait status.
 * QP_EIO with ESRCH when the thread ended.
 */
static int
run_to_stop(dyn_proc_t *p, dyn_thread_t *t, int req, held_t *h, int *st /*OUT*/)
{
    if (t->pending_sig != 0) {
        hold(h, t, t->pending_sig);
        t->pending_sig = 0;
    }
    for (;;) {
        pid_t r;
        if (t->stopped && ptrace(req, t->tid, NULL, NULL) < 0)
            return QP_EIO;
        t->stopped = 0;
        while ((r = waitpid(t->tid, st, __WALL)) < 0 && errno == EINTR)
            ;
        if (r < 0)
            return QP_EIO;
        if (WIFEXITED(*st) || WIFSIGNALED(*st)) {
            mark_gone(p, t, *st);
            errno = ESRCH;
            return QP_EIO;
        }
        if (!WIFSTOPPED(*st))
            continue;
        t->stopped = 1;
        if ((*st >> 16) == 0 && WSTOPSIG(*st) != SYSCALL_STOP) {
            hold(h, t, WSTOPSIG(*st));
            continue;
        }
        return 0;
    }
}

/*
 * Park thread T (stopped, or running after PTRACE_CONT) in a PTRACE_EVENT_STOP:
 * a stop inside the kernel's signal handling, from which an interrupted system call of
 * the registers set there is restarted when the thread goes on (a syscall-exit stop
 * would return -ERESTARTSYS to the program instead).
 */
static int
park(dyn_proc_t *p, dyn_thread_t *t, held_t *h)
{
    int st;

    if (ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL) < 0)
        return QP_EIO;
    do
        QP_CHECK(run_to_stop(p, t, PTRACE_CONT, h, &st));
    while ((st >> 16) != PTRACE_EVENT_STOP);
    return 0;
}

/* After an injected call or system call: park thread T again, give it back its
 * registers SAVED and the signals it held (errno kept). */
static void
give_back(dyn_proc_t *p, dyn_thread_t *t, held_t *h, const struct user_regs_struct *saved)
{
    if (t->gone)
        return;
    int saved_errno = errno;
    if (park(p, t, h) == 0)
        ptrace(PTRACE_SETREGS, t->tid, NULL, saved);
    requeue_held(p, t, h);
    errno = saved_errno;
}

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
static void
stub_restore(dyn_proc_t *p)
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
        QP_CHECK(run_to_stop(p, t, PTRACE_SYSCALL, h, &st));
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
    if ((t = live_thread(p)) == NULL) {
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
    give_back(p, t, &h, &saved);
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
        QP_CHECK(run_to_stop(p, t, PTRACE_SYSCALL, h, &st));
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
    if ((t = live_thread(p)) == NULL) {
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
    give_back(p, t, &h, &saved);
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

    if (p == NULL || !p->stopped || (t = find_thread(p, tid)) == NULL || t->gone)
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
        size_t a = 0, b = n;
        while (a < b) {
            size_t mid = a + (b - a) / 2;
            if (map[mid].from < regs.rip)
                a = mid + 1;
            else
                b = mid;
        }
        if (a < n && map[a].from == regs.rip) {
            regs.rip = map[a].to;
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
        if ((rc = park(p, t, &h)) < 0)
            break;
        rc = QP_ERANGE;
    }
    if (!t->gone)
        requeue_held(p, t, &h);
    return rc;
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

/* AT_ENTRY of process PID, or 0. */
static uint64_t
at_entry(int pid)
{
    char path[64];
    uint64_t av[2], entry = 0;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/auxv", pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return 0;
    while (entry == 0 && read(fd, av, sizeof(av)) == (ssize_t)sizeof(av) && av[0] != 0)
        if (av[0] == 9 /* AT_ENTRY */)
            entry = av[1];
    close(fd);
    return entry;
}

/*
 * The one exception to "no breakpoint" (see the top): a program started by dyn, not yet
 * run, is let run to its entry point through an int3 there. Should dyn die meanwhile,
 * PTRACE_O_EXITKILL kills the program, which had not started its own work yet.
 */
static int to_entry(dyn_proc_t *p, dyn_thread_t *t);

int
dyn_proc_run_to_entry(dyn_proc_t *p)
{
    if (p == NULL || !p->child || !p->stopped || p->nth != 1 || p->th[0].gone)
        return QP_EINVAL;
    return to_entry(p, &p->th[0]);
}

int
dyn_proc_exec_to_entry(dyn_proc_t *p)
{
    int rc, follow;

    if (p == NULL || !p->stopped || !p->follow || find_thread(p, p->pid) == NULL
        || find_thread(p, p->pid)->gone)
        return QP_EINVAL;
    /* One thread left, the process's own id; the new memory, a new stub place. */
    for (size_t i = 0; i < p->nth; i++)
        if (p->th[i].tid == p->pid) {
            p->th[0] = p->th[i];
            p->nth = 1;
            break;
        }
    if (p->memfd >= 0)
        close(p->memfd);
    p->memfd = -1;
    open_mem(p);
    p->stub = 0;
    p->stub_dirty = 0; /* (the old image is gone) */
    p->brk = 0;
    p->execed = 0;
    follow = p->follow;
    p->follow = 0;
    rc = to_entry(p, &p->th[0]);
    p->follow = follow;
    if (rc == 0 || p->th[0].stopped) /* the options of a followed thread again */
        ptrace(PTRACE_SETOPTIONS, p->pid, NULL, (void *)(long)FOLLOW_OPTS);
    return rc;
}

/* Run the one stopped thread T of P to the entry point of its image (see above). */
static int
to_entry(dyn_proc_t *p, dyn_thread_t *t)
{
    uint64_t entry;
    uint8_t orig, trap = 0xcc;
    int rc = 0, st, sig = 0;

    if ((entry = at_entry(p->pid)) == 0)
        return QP_EFORMAT;
    QP_CHECK(dyn_proc_read(p, entry, &orig, 1));
    if (ptrace(PTRACE_SETOPTIONS, t->tid, NULL,
            (void *)(long)(SEIZE_OPTS | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL))
        < 0)
        return QP_EIO;
    QP_CHECK(dyn_proc_write(p, entry, &trap, 1));
    sig = t->pending_sig;
    t->pending_sig = 0;
    for (;;) {
        struct user_regs_struct regs;
        pid_t r;
        if (ptrace(PTRACE_CONT, t->tid, NULL, (void *)(long)sig) < 0) {
            rc = QP_EIO;
            break;
        }
        t->stopped = 0;
        p->stopped = 0;
        sig = 0;
        while ((r = waitpid(t->tid, &st, __WALL)) < 0 && errno == EINTR)
            ;
        if (r < 0) {
            rc = QP_EIO;
            break;
        }
        if (WIFEXITED(st) || WIFSIGNALED(st)) {
            mark_gone(p, t, st);
            p->status = st; /* (followed: dyn_proc_ended says it) */
            errno = ESRCH;
            return QP_EIO;
        }
        if (!WIFSTOPPED(st))
            continue;
        t->stopped = 1;
        p->stopped = 1;
        if ((st >> 16) != 0)
            continue; /* an event stop (a group stop): go on */
        if (WSTOPSIG(st) == SIGTRAP && ptrace(PTRACE_GETREGS, t->tid, NULL, &regs) == 0
            && regs.rip == entry + 1) {
            regs.rip = entry;
            if (ptrace(PTRACE_SETREGS, t->tid, NULL, &regs) < 0)
                rc = QP_EIO;
            break;
        }
        sig = WSTOPSIG(st); /* the program's own signal: delivered */
    }
    if (t->stopped) {
        int saved = errno;
        dyn_proc_write(p, entry, &orig, 1);
        ptrace(PTRACE_SETOPTIONS, t->tid, NULL,
            (void *)(long)(SEIZE_OPTS | PTRACE_O_TRACEEXEC));
        errno = saved;
    }
    return rc;
}

const char *
dyn_proc_exe_path(const dyn_proc_t *p, char *buf, size_t cap)
{
    if (p == NULL || buf == NULL || cap == 0)
        return NULL;
    snprintf(buf, cap, "/proc/%d/exe", p->pid);
    return buf;
}

int
dyn_proc_children(int pid, int **out, size_t *n)
{
    if (out == NULL || n == NULL || pid <= 0)
        return QP_EINVAL;
    *out = NULL;
    *n = 0;
    DIR *d = opendir("/proc");
    if (d == NULL)
        return QP_EIO;
    size_t cap = 16;
    int *v = malloc(cap * sizeof(int)), rc = v ? 0 : QP_ENOMEM;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        char *end, path[64], buf[512];
        long p = strtol(e->d_name, &end, 10);
        if (*end != '\0' || p <= 0)
            continue;
        snprintf(path, sizeof(path), "/proc/%ld/stat", p);
        FILE *f = fopen(path, "r");
        size_t k = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        if (f != NULL)
            fclose(f);
        buf[k] = '\0';
        char *rp = strrchr(buf, ')'); /* after the command name, which may hold anything */
        int ppid;
        if (rp == NULL || sscanf(rp + 1, " %*c %d", &ppid) != 1 || ppid != pid)
            continue;
        if (*n == cap) {
            int *w = realloc(v, 2 * cap * sizeof(int));
            if (w == NULL) {
                rc = QP_ENOMEM;
                break;
            }
            v = w;
            cap *= 2;
        }
        v[(*n)++] = (int)p;
    }
    closedir(d);
    if (rc == 0 && *n == 0)
        rc = QP_ENOTFOUND;
    if (rc < 0) {
        free(v);
        *n = 0;
        return rc;
    }
    *out = v;
    return 0;
}

/*****************************************************************************
 * Following a running process (dyn_proc_follow): seized while it runs
 *
 * The second exception to "detached while it runs" (see the top): to see the dynamic
 * linker load and unload libraries (an int3 on r_brk, the routine it calls after each
 * change of the link map), forks and execs, the threads stay seized under PTRACE_CONT
 * (never a single step) while the process runs, with PTRACE_O_TRACECLONE, _TRACEFORK and
 * _TRACEEXEC. Signals are passed on at once, group stops kept (PTRACE_LISTEN). The
 * breakpoint routine is a bare return (`ret`, or `endbr64; ret`, checked), so a thread
 * that hit it is let go by doing that return for it. Should dyn die, the threads go on;
 * the int3 stays until `dyn clean` (the next dlopen in between kills the process with
 * SIGTRAP).
 */

/* Is the stop ST of thread TID the int3 of P's breakpoint? */
static int
at_break(dyn_proc_t *p, int tid, int st)
{
    struct user_regs_struct regs;
    return p->brk != 0 && (st >> 16) == 0 && WSTOPSIG(st) == SIGTRAP
        && ptrace(PTRACE_GETREGS, tid, NULL, &regs) == 0 && regs.rip == p->brk + 1;
}

/* A new thread TID (its clone event was seen): seized, wait for its first stop. */
static int
new_thread(dyn_proc_t *p, int tid)
{
    int st;
    dyn_thread_t *t;

    if (find_thread(p, tid) != NULL)
        return 0;
    QP_CHECK(add_thread(p, tid));
    t = &p->th[p->nth - 1];
    thread_event(p, DYN_EV_THREAD_START, tid, 0);
    for (;;) {
        pid_t r = waitpid(tid, &st, __WALL);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || WIFEXITED(st) || WIFSIGNALED(st)) {
            mark_gone(p, t, r < 0 ? -1 : st);
            return 0;
        }
        if (WIFSTOPPED(st))
            break;
    }
    t->stopped = 1;
    return 0;
}

/* Thread I stopped with ST (seen by wait_stop while stopping the process): note what
 * it says (new thread, fork, exec, the breakpoint, a group stop). */
static void
follow_seen(dyn_proc_t *p, size_t i, int st)
{
    int ev = st >> 16, tid = p->th[i].tid;
    unsigned long msg = 0;

    if (ev == PTRACE_EVENT_CLONE || ev == PTRACE_EVENT_FORK) {
        if (ptrace(PTRACE_GETEVENTMSG, tid, NULL, &msg) < 0 || msg == 0)
            return;
        if (ev == PTRACE_EVENT_CLONE)
            new_thread(p, (int)msg);
        else if (p->nforks < (int)(sizeof(p->forks) / sizeof(p->forks[0])))
            p->forks[p->nforks++] = (int)msg;
    } else if (ev == PTRACE_EVENT_EXEC) {
        p->execed = 1;
    } else if (ev == PTRACE_EVENT_STOP && WSTOPSIG(st) != SIGTRAP) {
        p->th[i].group = 1;
    } else if (at_break(p, tid, st)) {
        p->th[i].at_brk = 1;
        p->th[i].pending_sig = 0;
    }
}

/* Stop every thread of a followed process (PTRACE_INTERRUPT; they are seized). */
static int
follow_stop_all(dyn_proc_t *p)
{
    int rc = 0, live = 0;

    for (size_t i = 0; i < p->nth; i++)
        if (!p->th[i].gone && !p->th[i].stopped
            && ptrace(PTRACE_INTERRUPT, p->th[i].tid, NULL, NULL) < 0 && errno != ESRCH)
            rc = QP_EIO;
    /* Waited for without blocking: a first thread that ended before the others (a
     * zombie, at the process's end or after its pthread_exit) reports nothing until they
     * are reaped, and a blocking wait for it would never return. */
    for (unsigned spin = 1; rc == 0; spin++) {
        int waiting = 0;
        for (size_t i = 0; rc == 0 && i < p->nth; i++) { /* (nth grows with new threads) */
            dyn_thread_t *t = &p->th[i];
            int st;
            if (t->stopped || t->gone)
                continue;
            pid_t r = waitpid(t->tid, &st, WNOHANG | __WALL);
            if (r < 0 && errno == ECHILD)
                t->gone = 1;
            else if (r < 0 && errno != EINTR)
                rc = QP_EIO;
            else if (r > 0 && (WIFEXITED(st) || WIFSIGNALED(st)))
                mark_gone(p, t, st);
            else if (r > 0 && WIFSTOPPED(st)) {
                t->stopped = 1;
                t->event = st >> 16;
                t->pending_sig
                    = t->event == 0 && WSTOPSIG(st) != SYSCALL_STOP ? WSTOPSIG(st) : 0;
                follow_seen(p, i, st); /* (may move p->th) */
            } else if (t->tid == p->pid && spin % 32 == 0 && thread_exiting(p->pid, t->tid)) {
                t->gone = 1;
                t->zombie = 1;
            } else
                waiting = 1;
        }
        if (!waiting)
            break;
        struct timespec d = { 0, 50000 };
        nanosleep(&d, NULL);
    }
    for (size_t i = 0; i < p->nth; i++)
        live += !p->th[i].gone;
    if (rc == 0 && live == 0) {
        errno = ESRCH;
        rc = QP_EIO;
    }
    if (rc == 0)
        p->stopped = 1;
    return rc;
}

/* Do the return of the breakpoint routine for thread T (stopped after its int3). */
static int
step_over(dyn_thread_t *t)
{
    struct user_regs_struct regs;
    errno = 0;
    if (ptrace(PTRACE_GETREGS, t->tid, NULL, &regs) < 0)
        return QP_EIO;
    long ret = ptrace(PTRACE_PEEKDATA, t->tid, (void *)(uintptr_t)regs.rsp, NULL);
    if (errno != 0)
        return QP_EIO;
    regs.rip = (uint64_t)ret;
    regs.rsp += 8;
    return ptrace(PTRACE_SETREGS, t->tid, NULL, &regs) < 0 ? QP_EIO : 0;
}

/* Let every stopped thread of a followed process go on (still seized). */
static int
cont_all(dyn_proc_t *p)
{
    int rc = 0;

    for (size_t i = 0; i < p->nth; i++) {
        dyn_thread_t *t = &p->th[i];
        if (t->gone || !t->stopped)
            continue;
        if (t->at_brk && step_over(t) < 0 && rc == 0)
            rc = QP_EIO;
        t->at_brk = 0;
        if (ptrace(t->group ? PTRACE_LISTEN : PTRACE_CONT, t->tid, NULL,
                (void *)(long)(t->group ? 0 : t->pending_sig))
                < 0
            && errno != ESRCH && rc == 0)
            rc = QP_EIO;
        t->stopped = 0;
        t->pending_sig = 0;
        t->group = 0;
    }
    p->stopped = 0;
    return rc;
}

int
dyn_proc_follow(dyn_proc_t *p)
{
    if (p == NULL || !p->stopped)
        return QP_EINVAL;
    for (size_t i = 0; i < p->nth; i++)
        if (!p->th[i].gone
            && ptrace(PTRACE_SETOPTIONS, p->th[i].tid, NULL, (void *)(long)FOLLOW_OPTS) < 0
            && errno != ESRCH)
            return QP_EIO;
    p->follow = 1;
    return 0;
}

int
dyn_proc_set_break(dyn_proc_t *p, uint64_t addr)
{
    static const uint8_t endbr_ret[5] = { 0xf3, 0x0f, 0x1e, 0xfa, 0xc3 };
    uint8_t b[5], trap = 0xcc;

    if (p == NULL || !p->stopped || !p->follow || p->brk != 0 || addr == 0)
        return QP_EINVAL;
    QP_CHECK(dyn_proc_read(p, addr, b, sizeof(b)));
    if (b[0] != 0xc3 && memcmp(b, endbr_ret, sizeof(b)) != 0)
        return QP_EUNSUPP;
    QP_CHECK(dyn_proc_write(p, addr, &trap, 1));
    p->brk = addr;
    p->brk_orig = b[0];
    return 0;
}

int
dyn_proc_unfollow(dyn_proc_t *p)
{
    int rc = 0;

    if (p == NULL || !p->stopped)
        return QP_EINVAL;
    if (!p->follow)
        return 0;
    if (p->brk != 0 && dyn_proc_write(p, p->brk, &p->brk_orig, 1) < 0)
        rc = QP_EIO;
    for (size_t i = 0; i < p->nth; i++) {
        dyn_thread_t *t = &p->th[i];
        struct user_regs_struct regs;
        if (t->gone)
            continue;
        if (t->at_brk && ptrace(PTRACE_GETREGS, t->tid, NULL, &regs) == 0) {
            regs.rip = p->brk; /* the original routine runs again, for real */
            if (ptrace(PTRACE_SETREGS, t->tid, NULL, &regs) < 0 && rc == 0)
                rc = QP_EIO;
        }
        t->at_brk = 0;
        ptrace(PTRACE_SETOPTIONS, t->tid, NULL, (void *)(long)SEIZE_OPTS);
    }
    /* Children forked while stopping: let them go, the breakpoint out of them. */
    for (int i = 0; i < p->nforks; i++) {
        dyn_proc_t *c = NULL;
        if (take_child(p, p->forks[i], &c) == 0)
            dyn_proc_destroy(c);
    }
    p->nforks = 0;
    p->brk = 0;
    p->follow = 0;
    return rc;
}

/*
 * Forked child CPID of followed process P (seized with it): wait for its first stop,
 * take P's breakpoint out of its copy of the code, and hand it over stopped as a new
 * dyn_proc_t (*OUT; dyn_proc_destroy lets it go). QP_EIO with ESRCH when it ended.
 */
static int
take_child(dyn_proc_t *p, int cpid, dyn_proc_t **out)
{
    dyn_proc_t *c;
    int st;

    *out = NULL;
    for (;;) {
        pid_t r = waitpid(cpid, &st, __WALL);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || WIFEXITED(st) || WIFSIGNALED(st)) {
            errno = ESRCH;
            return QP_EIO;
        }
        if (WIFSTOPPED(st))
            break;
    }
    QP_CHECK(proc_new(cpid, &c));
    if (add_thread(c, cpid) < 0) {
        free(c);
        ptrace(PTRACE_DETACH, cpid, NULL, NULL);
        return QP_ENOMEM;
    }
    c->th[0].stopped = 1;
    c->stopped = 1;
    open_mem(c);
    if (p->brk != 0)
        dyn_proc_write(c, p->brk, &p->brk_orig, 1);
    *out = c;
    return 0;
}

int
dyn_proc_poll(dyn_proc_t *p, dyn_event_t *ev /*OUT*/)
{
    if (p == NULL || ev == NULL)
        return QP_EINVAL;
    memset(ev, 0, sizeof(*ev));
    if (!p->follow || p->stopped)
        return QP_EINVAL;
    if (p->ntev > 0) { /* threads started or ended, seen earlier */
        *ev = p->tev[0];
        memmove(p->tev, p->tev + 1, --p->ntev * sizeof(p->tev[0]));
        return 0;
    }
    while (p->nforks > 0) { /* seen while stopping */
        int cpid = p->forks[--p->nforks];
        if (take_child(p, cpid, &ev->child) == 0) {
            ev->kind = DYN_EV_FORK;
            return 0;
        }
    }
    if (p->execed) {
        p->execed = 0;
        goto exec;
    }
    for (size_t i = 0; i < p->nth; i++) {
        dyn_thread_t *t = &p->th[i];
        unsigned long msg = 0;
        int st, tid = t->tid, e;
        pid_t r;
        if (t->gone && !t->zombie)
            continue;
        while ((r = waitpid(tid, &st, WNOHANG | __WALL)) < 0 && errno == EINTR)
            ;
        if (t->zombie) { /* only its end is to come */
            if (r > 0 && (WIFEXITED(st) || WIFSIGNALED(st))) {
                t->zombie = 0;
                t->gone = 0;
                mark_gone(p, t, st);
            } else if (r < 0)
                t->zombie = 0;
            continue;
        }
        if (r == 0)
            continue;
        ev->handled++;
        if (r < 0) { /* ECHILD: gone (an exec took it) */
            t->gone = 1;
            continue;
        }
        if (WIFEXITED(st) || WIFSIGNALED(st)) {
            mark_gone(p, t, st);
            if (tid == p->pid)
                p->status = st;
            continue;
        }
        if (!WIFSTOPPED(st))
            continue;
        e = st >> 16;
        if (e == PTRACE_EVENT_EXEC) {
            t->stopped = 1;
            goto exec;
        }
        if (at_break(p, tid, st)) {
            t->stopped = 1;
            t->at_brk = 1;
            QP_CHECK(follow_stop_all(p));
            ev->kind = DYN_EV_BREAK;
            return 0;
        }
        if ((e == PTRACE_EVENT_CLONE || e == PTRACE_EVENT_FORK)
            && ptrace(PTRACE_GETEVENTMSG, tid, NULL, &msg) == 0 && msg != 0) {
            if (e == PTRACE_EVENT_CLONE)
                new_thread(p, (int)msg); /* (moves p->th) */
            t = &p->th[i];
            if (t->tid == tid && ptrace(PTRACE_CONT, tid, NULL, NULL) < 0 && errno != ESRCH)
                return QP_EIO;
            for (size_t k = 0; k < p->nth; k++) /* the new thread, stopped: go on */
                if (p->th[k].stopped && !p->th[k].gone
                    && ptrace(PTRACE_CONT, p->th[k].tid, NULL, NULL) == 0)
                    p->th[k].stopped = 0;
            if (e == PTRACE_EVENT_FORK && take_child(p, (int)msg, &ev->child) == 0) {
                ev->kind = DYN_EV_FORK;
                return 0;
            }
            continue;
        }
        if (e == PTRACE_EVENT_STOP && WSTOPSIG(st) != SIGTRAP) /* a group stop: kept */
            ptrace(PTRACE_LISTEN, tid, NULL, NULL);
        else if (e != 0 || WSTOPSIG(st) == SYSCALL_STOP) /* an interrupt seen late */
            ptrace(PTRACE_CONT, tid, NULL, NULL);
        else /* the program's own signal */
            ptrace(PTRACE_CONT, tid, NULL, (void *)(long)WSTOPSIG(st));
    }
    if (p->ntev > 0) { /* threads that started or ended just now */
        *ev = p->tev[0];
        memmove(p->tev, p->tev + 1, --p->ntev * sizeof(p->tev[0]));
    }
    return 0;
exec:
    /* A new image: the other threads are gone, the breakpoint with the old code. */
    for (size_t i = 0; i < p->nth; i++) {
        dyn_thread_t *t = &p->th[i];
        if (t->tid != p->pid)
            t->gone = 1;
        else {
            t->gone = 0;
            t->stopped = 1;
            t->at_brk = 0;
            t->pending_sig = 0;
        }
    }
    p->brk = 0;
    p->stopped = 1;
    ev->kind = DYN_EV_EXEC;
    return 0;
}
