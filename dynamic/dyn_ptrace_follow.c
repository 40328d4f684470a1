/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Process control (dyn_ptrace.c), the program as a whole: its load bias, running a
 * program dyn started to its entry, its executable and children, and following a running
 * process (dyn_proc_follow: its threads stay seized while it runs, to see its clones,
 * forks, execs and the loader's breakpoint, held only while dyn lives).
 */
#include "config.h"

#include "dynamic/dyn_ptrace_priv.h"

static int take_child(dyn_proc_t *p, int cpid, dyn_proc_t **out);
static void forget_break(dyn_proc_t *p);

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

    if (p == NULL || !p->stopped || !p->follow || dyn_pt_find_thread(p, p->pid) == NULL
        || dyn_pt_find_thread(p, p->pid)->gone)
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
    dyn_pt_open_mem(p);
    p->stub = 0;
    p->stub_dirty = 0; /* (the old image is gone) */
    forget_break(p);
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
            dyn_pt_mark_gone(p, t, st);
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
 * linker load and unload libraries (a breakpoint on r_brk, the routine it calls after
 * each change of the link map), forks and execs, the threads stay seized under
 * PTRACE_CONT (never a single step) while the process runs, with PTRACE_O_TRACECLONE,
 * _TRACEFORK and _TRACEEXEC. Signals are passed on at once, group stops kept
 * (PTRACE_LISTEN). The breakpoint routine is a bare return (`ret` before alignment
 * padding, or `endbr64; ret`, checked), so a thread held on it is let go by doing that
 * return for it.
 *
 * The breakpoint never outlives dyn (dyn_ptrace_guard.c): r_brk jumps to a trampoline
 * that holds the thread (a futex wait, no trap, no signal) only while a robust lock in
 * a page shared with the process is held by dyn's thread; the kernel marks that lock
 * when the thread ends, however it ends, and the trampoline is a bare return from then
 * on. A held thread counts itself in the page (each time round its wait); dyn_proc_poll
 * reads the count, stops the process and reports DYN_EV_BREAK. dyn_proc_unfollow
 * retires the trampoline (all rets, never unmapped) rather than unmapping it. Should dyn die, the threads go on and so do their
 * dlopens; `dyn clean` puts r_brk's bytes back. Only when the jump has no room (a `ret`
 * with no padding after it) or the page cannot be made is it the int3 of old instead
 * (at_break): that one stays when dyn dies, and the next dlopen kills the process with
 * SIGTRAP unless `dyn clean` ran first.
 */

/* Is the stop ST of thread TID the int3 of P's breakpoint (its unguarded form)? */
static int
at_break(dyn_proc_t *p, int tid, int st)
{
    struct user_regs_struct regs;
    return p->brk != 0 && p->brk_len == 1 && (st >> 16) == 0 && WSTOPSIG(st) == SIGTRAP
        && ptrace(PTRACE_GETREGS, tid, NULL, &regs) == 0 && regs.rip == p->brk + 1;
}

/* A new thread TID (its clone event was seen): seized, wait for its first stop. */
static int
new_thread(dyn_proc_t *p, int tid)
{
    int st;
    dyn_thread_t *t;

    if (dyn_pt_find_thread(p, tid) != NULL)
        return 0;
    QP_CHECK(dyn_pt_add_thread(p, tid));
    t = &p->th[p->nth - 1];
    dyn_pt_thread_event(p, DYN_EV_THREAD_START, tid, 0);
    for (;;) {
        pid_t r = waitpid(tid, &st, __WALL);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || WIFEXITED(st) || WIFSIGNALED(st)) {
            dyn_pt_mark_gone(p, t, r < 0 ? -1 : st);
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
void
dyn_pt_follow_seen(dyn_proc_t *p, size_t i, int st)
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
int
dyn_pt_follow_stop_all(dyn_proc_t *p)
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
                dyn_pt_mark_gone(p, t, st);
            else if (r > 0 && WIFSTOPPED(st)) {
                t->stopped = 1;
                t->event = st >> 16;
                t->pending_sig
                    = t->event == 0 && WSTOPSIG(st) != SYSCALL_STOP ? WSTOPSIG(st) : 0;
                dyn_pt_follow_seen(p, i, st); /* (may move p->th) */
            } else if (t->tid == p->pid && spin % 32 == 0
                       && dyn_pt_thread_exiting(p->pid, t->tid)) {
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

/* Do the return of the breakpoint routine for thread T (stopped after its int3, or held
 * in the guard's trampoline: its futex wait, if it is in one, not restarted). */
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
    regs.orig_rax = (unsigned long long)-1;
    return ptrace(PTRACE_SETREGS, t->tid, NULL, &regs) < 0 ? QP_EIO : 0;
}

/* Let every stopped thread of a followed process go on (still seized). */
int
dyn_pt_cont_all(dyn_proc_t *p)
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

/* The breakpoint's guarded form (see the top): the jump to the trampoline written over
 * r_brk at BRK, whose routine is B (N bytes read); a thread stopped inside the bytes it
 * covers (on the `ret` after endbr64) is let return first. */
static int
set_guarded(dyn_proc_t *p, uint64_t brk, const uint8_t *b, size_t n)
{
    uint8_t jmp[5];

    if (dyn_pt_guard_fits(brk, b, n) == 0 || dyn_pt_guard_make(p, brk) < 0)
        return QP_EUNSUPP;
    for (size_t i = 0; i < p->nth; i++) {
        struct user_regs_struct regs;
        dyn_thread_t *t = &p->th[i];
        if (!t->gone && ptrace(PTRACE_GETREGS, t->tid, NULL, &regs) == 0
            && regs.rip > brk && regs.rip < brk + 5 && step_over(t) < 0) {
            dyn_pt_guard_drop(p, DYN_GUARD_UNMAP);
            return QP_EIO;
        }
    }
    dyn_pt_guard_jump(p, brk, jmp);
    if (dyn_proc_write(p, brk, jmp, sizeof(jmp)) < 0) {
        dyn_pt_guard_drop(p, DYN_GUARD_UNMAP);
        return QP_EIO;
    }
    memcpy(p->brk_orig, b, sizeof(jmp));
    p->brk_len = (int)sizeof(jmp);
    return 0;
}

int
dyn_proc_set_break(dyn_proc_t *p, uint64_t addr)
{
    static const uint8_t endbr_ret[5] = { 0xf3, 0x0f, 0x1e, 0xfa, 0xc3 };
    uint8_t b[16], trap = 0xcc;
    size_t n = sizeof(b);

    if (p == NULL || !p->stopped || !p->follow || p->brk != 0 || addr == 0)
        return QP_EINVAL;
    if (dyn_proc_read(p, addr, b, n) < 0)
        QP_CHECK(dyn_proc_read(p, addr, b, n = 5));
    if (b[0] != 0xc3 && memcmp(b, endbr_ret, sizeof(endbr_ret)) != 0)
        return QP_EUNSUPP;
    if (set_guarded(p, addr, b, n) == 0) {
        p->brk = addr;
        return 0;
    }
    /* No room for the jump (a bare `ret` before code), or the process could not make
     * the shared page: the plain int3, which outlives a killed dyn (see the top). */
    QP_CHECK(dyn_proc_write(p, addr, &trap, 1));
    p->brk = addr;
    p->brk_orig[0] = b[0];
    p->brk_len = 1;
    return 0;
}

int
dyn_proc_break_unguarded(const dyn_proc_t *p)
{
    if (p == NULL || p->brk == 0)
        return 0;
    return p->brk_len == 1 ? 1 : p->guard.no_wipe ? 2 : 0;
}

int
dyn_pt_note_left_stopped(dyn_proc_t *p, int pid)
{
    if (p->nleft == p->capleft) {
        size_t cap = p->capleft ? 2 * p->capleft : 8;
        int *v = realloc(p->left, cap * sizeof(*v));
        if (v == NULL) {
            dyn_pt_note_unnamed_left_stopped(p);
            return QP_ENOMEM;
        }
        p->left = v;
        p->capleft = cap;
    }
    p->left[p->nleft++] = pid;
    return 0;
}

void
dyn_pt_note_unnamed_left_stopped(dyn_proc_t *p)
{
    p->nunnamed++;
}

int
dyn_proc_left_stopped(dyn_proc_t *p)
{
    if (p == NULL || (p->nleft == 0 && p->nunnamed == 0))
        return 0;
    if (p->nleft == 0) {
        p->nunnamed--;
        return -1;
    }
    int pid = p->left[0];
    memmove(p->left, p->left + 1, --p->nleft * sizeof(*p->left));
    return pid;
}

/* The process ran execve: its breakpoint went with the old image (dyn's side of the
 * guard let go too). */
static void
forget_break(dyn_proc_t *p)
{
    dyn_pt_guard_drop(p, DYN_GUARD_FORGET);
    p->brk = 0;
    p->brk_len = 0;
}

int
dyn_proc_unfollow(dyn_proc_t *p)
{
    int rc = 0;

    if (p == NULL || !p->stopped)
        return QP_EINVAL;
    if (!p->follow)
        return 0;
    if (p->brk != 0 && dyn_proc_write(p, p->brk, p->brk_orig, (size_t)p->brk_len) < 0)
        rc = QP_EIO;
    for (size_t i = 0; i < p->nth; i++) {
        dyn_thread_t *t = &p->th[i];
        struct user_regs_struct regs;
        if (t->gone)
            continue;
        if (p->brk != 0 && ptrace(PTRACE_GETREGS, t->tid, NULL, &regs) == 0
            && (t->at_brk || dyn_pt_guard_in(p, regs.rip))) {
            regs.rip = p->brk; /* the original routine runs again, for real */
            regs.orig_rax = (unsigned long long)-1; /* (no futex call to restart) */
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
        else if (errno == EFAULT) /* (no memory to note it: counted, told as -1) */
            (void)dyn_pt_note_left_stopped(p, p->forks[i]);
    }
    p->nforks = 0;
    /* A thread may still return into the trampoline from a signal handler: its code
     * stays, all rets (dyn_ptrace_guard.c). */
    dyn_pt_guard_drop(p, DYN_GUARD_RETIRE);
    p->brk = 0;
    p->brk_len = 0;
    p->follow = 0;
    return rc;
}

/*
 * Forked child CPID of followed process P (seized with it): wait for its first stop,
 * take P's breakpoint out of its copy of the code, and hand it over stopped as a new
 * dyn_proc_t (*OUT; dyn_proc_destroy lets it go). QP_EIO with ESRCH when it ended, with
 * EFAULT when P's int3 could not be taken out of it (then it is left stopped, detached).
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
    QP_CHECK(dyn_pt_proc_new(cpid, &c));
    if (dyn_pt_add_thread(c, cpid) < 0) {
        free(c);
        ptrace(PTRACE_DETACH, cpid, NULL, NULL);
        return QP_ENOMEM;
    }
    c->th[0].stopped = 1;
    c->stopped = 1;
    dyn_pt_open_mem(c);
    /* (the guard's pages stay in its copy, unused) */
    if (p->brk != 0 && dyn_proc_write(c, p->brk, p->brk_orig, (size_t)p->brk_len) < 0) {
        /* Both ways of writing failed: the child has ended (seen as such), or, alive,
         * it keeps the jump into its copy of the trampoline, a bare return there
         * (dyn_ptrace_guard.c: not the followed process), until `dyn clean CHILD`.
         * An int3 (no guard) would kill it at its next dlopen: it is left stopped
         * (dyn_pt_detach_stopped: `dyn clean CHILD`, then SIGCONT), QP_EIO (EFAULT),
         * which the callers report (DYN_EV_CHILD_LEFT, dyn_proc_left_stopped). */
        if (kill(cpid, 0) < 0 || dyn_pt_thread_exiting(cpid, cpid)) {
            dyn_proc_destroy(c);
            errno = ESRCH;
            return QP_EIO;
        }
        if (p->brk_len == 1) {
            dyn_pt_detach_stopped(cpid, cpid);
            c->nth = 0; /* (let go already) */
            dyn_proc_destroy(c);
            errno = EFAULT;
            return QP_EIO;
        }
    }
    *out = c;
    return 0;
}

/* Let thread TID of process PID (traced, in a ptrace stop) go, stopped. The SIGSTOP is
 * queued first: PTRACE_DETACH's own signal is dropped when TID is in an event stop (a
 * seized fork child's first stop), and the child would run on. */
int
dyn_pt_detach_stopped(int pid, int tid)
{
    syscall(SYS_tgkill, pid, tid, SIGSTOP);
    return ptrace(PTRACE_DETACH, tid, NULL, NULL) < 0 ? QP_EIO : 0;
}

/* Forked child CPID of P into *EV: 1 with DYN_EV_FORK, or DYN_EV_CHILD_LEFT when it was
 * left stopped (take_child); 0 when it ended. */
static int
child_event(dyn_proc_t *p, int cpid, dyn_event_t *ev)
{
    if (take_child(p, cpid, &ev->child) == 0) {
        ev->kind = DYN_EV_FORK;
        return 1;
    }
    if (errno != EFAULT)
        return 0;
    ev->kind = DYN_EV_CHILD_LEFT;
    ev->tid = cpid;
    return 1;
}

/* Every stopped thread held in the guard's trampoline is on the breakpoint (all stopped:
 * the count of those held is then exact, and they leave it when resumed). */
static void
mark_held(dyn_proc_t *p)
{
    for (size_t i = 0; i < p->nth; i++) {
        struct user_regs_struct regs;
        dyn_thread_t *t = &p->th[i];
        if (!t->gone && t->stopped && ptrace(PTRACE_GETREGS, t->tid, NULL, &regs) == 0
            && dyn_pt_guard_holds(p, regs.rip))
            t->at_brk = 1;
    }
    dyn_pt_guard_settled(p);
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
        if (child_event(p, cpid, ev))
            return 0;
    }
    if (p->execed) {
        p->execed = 0;
        goto exec;
    }
    if (dyn_pt_guard_waiting(p)) { /* a thread is held in the guard's trampoline */
        int rc = dyn_pt_follow_stop_all(p);
        if (rc == 0) {
            mark_held(p);
            ev->kind = DYN_EV_BREAK;
            return 0;
        }
        if (errno != ESRCH)
            return rc;
        dyn_pt_guard_settled(p); /* no thread left to hold: the end is seen below */
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
                dyn_pt_mark_gone(p, t, st);
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
            dyn_pt_mark_gone(p, t, st);
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
            QP_CHECK(dyn_pt_follow_stop_all(p));
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
            if (e == PTRACE_EVENT_FORK && child_event(p, (int)msg, ev))
                return 0;
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
    forget_break(p);
    p->stopped = 1;
    ev->kind = DYN_EV_EXEC;
    return 0;
}
