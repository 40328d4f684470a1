/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Process control: with dyn_ptrace_call.c (system calls and calls on the process's
 * behalf) and dyn_ptrace_follow.c (the program's entry, its children, following it),
 * through dyn_ptrace_priv.h, the only ptrace user. Every thread is seized and interrupted
 * (PTRACE_SEIZE + PTRACE_INTERRUPT, so detaching never leaves one stopped); memory goes
 * through process_vm_readv, /proc/PID/mem and PEEK/POKE; system calls run on the
 * process's behalf through a small stub (see dyn_proc_syscall).
 *
 * Nothing here single-steps or plants a breakpoint (but dyn_proc_run_to_entry, in a
 * program dyn started and that is killed with dyn, and the int3 dyn_proc_set_break falls
 * back to when its guarded jump cannot be put in): if dyn dies (SIGKILL) at any moment,
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

#include "dynamic/dyn_ptrace_priv.h"

/*****************************************************************************
 * Threads: attach, wait for a stop, detach
 */

int
dyn_pt_add_thread(dyn_proc_t *p, int tid)
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

dyn_thread_t *
dyn_pt_find_thread(dyn_proc_t *p, int tid)
{
    for (size_t i = 0; i < p->nth; i++)
        if (p->th[i].tid == tid)
            return &p->th[i];
    return NULL;
}

/* Queue a thread event (dyn_proc_report_threads) for dyn_proc_poll. */
void
dyn_pt_thread_event(dyn_proc_t *p, int kind, int tid, int st)
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
void
dyn_pt_mark_gone(dyn_proc_t *p, dyn_thread_t *t, int st)
{
    if (!t->gone && t->tid != p->pid)
        dyn_pt_thread_event(p, DYN_EV_THREAD_EXIT, t->tid, st);
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
int
dyn_pt_wait_stop(dyn_proc_t *p, dyn_thread_t *t)
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
            dyn_pt_mark_gone(p, t, st);
            return 0;
        }
        if (!WIFSTOPPED(st))
            continue;
        t->stopped = 1;
        t->event = st >> 16;
        t->pending_sig = t->event == 0 && WSTOPSIG(st) != SYSCALL_STOP ? WSTOPSIG(st) : 0;
        if (p->follow)
            dyn_pt_follow_seen(p, (size_t)(t - p->th), st); /* (may move p->th) */
        return 0;
    }
}

/*
 * Why PTRACE_SEIZE of thread TID failed with EPERM when the thread is on its way out
 * (a zombie or dead thread cannot be traced): 1 when /proc says it is exiting or gone,
 * so that it can be skipped like one that has vanished (ESRCH).
 */
int
dyn_pt_thread_exiting(int pid, int tid)
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
        if (errno == ESRCH || (errno == EPERM && dyn_pt_thread_exiting(p->pid, tid)))
            return 1;
        return QP_EIO;
    }
    QP_CHECK(dyn_pt_add_thread(p, tid));
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
        if (dyn_pt_find_thread(p, (int)tid) != NULL)
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
            if (!p->th[i].stopped && !p->th[i].gone
                && (rc = dyn_pt_wait_stop(p, &p->th[i])) < 0)
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

int
dyn_pt_open_mem(dyn_proc_t *p)
{
    char path[64];

    if (p->memfd >= 0)
        return 0;
    snprintf(path, sizeof(path), "/proc/%d/mem", p->pid);
    p->memfd = open(path, O_RDWR | O_CLOEXEC);
    return 0; /* PEEK/POKE remain when /proc/PID/mem cannot be opened */
}

int
dyn_pt_proc_new(int pid, dyn_proc_t **out)
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
    QP_CHECK(dyn_pt_proc_new(pid, &p));
    if ((rc = stop_all(p)) < 0) {
        int saved = errno;
        dyn_proc_destroy(p);
        errno = saved;
        return rc;
    }
    dyn_pt_open_mem(p);
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
        QP_CHECK(dyn_pt_wait_stop(p, t));
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
    if (err != 0 || dyn_pt_proc_new(pid, &p) < 0) {
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
            ;
        errno = err != 0 ? err : ENOMEM;
        return err != 0 ? QP_EIO : QP_ENOMEM;
    }
    p->child = 1;
    if (dyn_pt_add_thread(p, pid) < 0 || wait_exec(p, &p->th[0]) < 0 || p->th[0].gone) {
        err = p->th && p->th[0].gone ? ECHILD : errno;
        if (!p->reaped)
            kill(pid, SIGKILL);
        dyn_proc_destroy(p);
        errno = err;
        return QP_EIO;
    }
    p->stopped = 1;
    dyn_pt_open_mem(p);
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
    return p->follow ? dyn_pt_follow_stop_all(p) : stop_all(p);
}

int
dyn_proc_resume(dyn_proc_t *p)
{
    if (p == NULL)
        return QP_EINVAL;
    /* The stub's bytes back as they were: no system call of ours is under way now, and
     * the process is then as if dyn had not been there (but for what a session left). */
    if (p->stopped)
        dyn_pt_stub_restore(p);
    if (p->stopped && p->follow)
        return dyn_pt_cont_all(p);
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
        if (!p->stopped && dyn_pt_follow_stop_all(p) < 0)
            p->stopped = 1; /* (gone: detach what is left) */
        dyn_proc_unfollow(p);
    }
    dyn_proc_resume(p);
    if (p->memfd >= 0)
        close(p->memfd);
    free(p->th);
    free(p->tev);
    free(p->left);
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
        dyn_thread_t *lead = dyn_pt_find_thread(p, p->pid);
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
            alive = !dyn_pt_thread_exiting(pid, atoi(e->d_name));
    closedir(d);
    return alive;
}

int
dyn_proc_exited(dyn_proc_t *p, int *status /*OUT*/)
{
    if (p == NULL || status == NULL)
        return QP_EINVAL;
    dyn_thread_t *lead = dyn_pt_find_thread(p, p->pid);
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
                dyn_pt_mark_gone(p, t, st);
        }
        int st;
        pid_t r = waitpid(p->pid, &st, WNOHANG | __WALL);
        if (r == p->pid && (WIFEXITED(st) || WIFSIGNALED(st))) {
            if (lead != NULL)
                dyn_pt_mark_gone(p, lead, st);
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
dyn_thread_t *
dyn_pt_live_thread(dyn_proc_t *p)
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
void
dyn_pt_requeue_held(dyn_proc_t *p, dyn_thread_t *t, held_t *h)
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
int
dyn_pt_run_to_stop(dyn_proc_t *p, dyn_thread_t *t, int req, held_t *h, int *st /*OUT*/)
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
            dyn_pt_mark_gone(p, t, *st);
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
int
dyn_pt_park(dyn_proc_t *p, dyn_thread_t *t, held_t *h)
{
    int st;

    if (ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL) < 0)
        return QP_EIO;
    do
        QP_CHECK(dyn_pt_run_to_stop(p, t, PTRACE_CONT, h, &st));
    while ((st >> 16) != PTRACE_EVENT_STOP);
    return 0;
}

/* After an injected call or system call: park thread T again, give it back its
 * registers SAVED and the signals it held (errno kept). */
void
dyn_pt_give_back(dyn_proc_t *p, dyn_thread_t *t, held_t *h,
                 const struct user_regs_struct *saved)
{
    if (t->gone)
        return;
    int saved_errno = errno;
    if (dyn_pt_park(p, t, h) == 0)
        ptrace(PTRACE_SETREGS, t->tid, NULL, saved);
    dyn_pt_requeue_held(p, t, h);
    errno = saved_errno;
}

