/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_DYN_PTRACE_PRIV_H
#define QP_DYN_PTRACE_PRIV_H
/*
 * PURPOSE: what the files of process control share (dyn_ptrace.c: threads, memory,
 * running a thread; dyn_ptrace_call.c: system calls and calls on the process's behalf;
 * dyn_ptrace_follow.c: the program's entry, its children, following it): the process
 * and thread records and the helpers called across them. Only dynamic/dyn_ptrace*.c
 * include this header; they are the only users of ptrace and waitpid.
 */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18 /* (Linux 4.14; older headers) */
#endif
#include <sys/ptrace.h>
#include <sys/rseq.h>
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

/* The loader's breakpoint guarded by dyn's life (dyn_ptrace_guard.c). */
typedef struct dyn_guard {
    void *page;      /* dyn's mapping of the page shared with the process, or NULL */
    uint64_t shared; /* the process's mapping of it (the lock word, the held count) */
    uint64_t code;   /* the process's page with the trampoline, or 0 */
    uint64_t mark;   /* its private page with the marker word (wiped in a fork), or 0 */
    uint32_t tid;    /* our thread, the lock's owner */
    int locked;      /* the lock is ours */
    int reused;      /* the code page is an earlier following's (never unmapped) */
    int no_wipe;     /* the process refused MADV_WIPEONFORK on the marker page: a forked
                      * copy is told by the getpid test alone */
} dyn_guard_t;

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
    uint8_t brk_orig[5]; /* ... the bytes it replaced */
    int brk_len;      /* ... their number: 1 (an int3) or 5 (a jump to the guard) */
    dyn_guard_t guard; /* ... the trampoline r_brk jumps to (brk_len 5) */
    int execed;       /* ... an exec was seen while stopping (for dyn_proc_poll) */
    int forks[16];    /* ... forked children seen while stopping (for dyn_proc_poll) */
    int nforks;
    int *left;        /* ... those of them left stopped (take_child), oldest first, until
                       * the caller takes them (dyn_proc_left_stopped) */
    size_t nleft, capleft;
    size_t nunnamed;  /* ... and those whose pid could not be noted */
    int report_threads; /* ... threads' starts and ends are events (dyn_proc_report_threads) */
    dyn_event_t *tev; /* ... those not yet returned by dyn_proc_poll, oldest first */
    size_t ntev, captev;
};

/* Signals taken from a thread while dyn ran it, to queue again (requeue_held). */
typedef struct held {
    int n;
    int sig[8];
    siginfo_t info[8];
    int has_info[8];
} held_t;

/* dyn_ptrace.c: threads, the process record, running a thread (each commented at its
 * definition). */
int dyn_pt_add_thread(dyn_proc_t *p, int tid);
dyn_thread_t *dyn_pt_find_thread(dyn_proc_t *p, int tid);
void dyn_pt_give_back(dyn_proc_t *p, dyn_thread_t *t, held_t *h,
                      const struct user_regs_struct *saved);
dyn_thread_t *dyn_pt_live_thread(dyn_proc_t *p);
void dyn_pt_mark_gone(dyn_proc_t *p, dyn_thread_t *t, int st);
int dyn_pt_open_mem(dyn_proc_t *p);
int dyn_pt_park(dyn_proc_t *p, dyn_thread_t *t, held_t *h);
int dyn_pt_proc_new(int pid, dyn_proc_t **out);
void dyn_pt_requeue_held(dyn_proc_t *p, dyn_thread_t *t, held_t *h);
int dyn_pt_run_to_stop(dyn_proc_t *p, dyn_thread_t *t, int req, held_t *h,
                       int *st /*OUT*/);
void dyn_pt_thread_event(dyn_proc_t *p, int kind, int tid, int st);
int dyn_pt_thread_exiting(int pid, int tid);
int dyn_pt_wait_stop(dyn_proc_t *p, dyn_thread_t *t);

/* dyn_ptrace_call.c: the syscall stub's bytes put back. */
void dyn_pt_stub_restore(dyn_proc_t *p);

/* dyn_ptrace_follow.c: following a running process. */
void dyn_pt_follow_seen(dyn_proc_t *p, size_t i, int st);
int dyn_pt_follow_stop_all(dyn_proc_t *p);
int dyn_pt_cont_all(dyn_proc_t *p);
int dyn_pt_detach_stopped(int pid, int tid);

/* Child PID of P left stopped (take_child), noted for dyn_proc_left_stopped. 0, or
 * QP_ENOMEM: then only counted (dyn_pt_note_unnamed_left_stopped). */
int dyn_pt_note_left_stopped(dyn_proc_t *p, int pid);
/* A child of P left stopped whose pid could not be noted: counted, and told by
 * dyn_proc_left_stopped as -1 (never lost silently). */
void dyn_pt_note_unnamed_left_stopped(dyn_proc_t *p);

/* dyn_ptrace_guard.c: the breakpoint guarded by dyn's life (each commented at its
 * definition). */
int dyn_pt_guard_fits(uint64_t brk, const uint8_t *b, size_t n);
int dyn_pt_guard_make(dyn_proc_t *p, uint64_t brk);
void dyn_pt_guard_jump(const dyn_proc_t *p, uint64_t brk, uint8_t jmp[5]);
int dyn_pt_guard_waiting(const dyn_proc_t *p);
void dyn_pt_guard_settled(const dyn_proc_t *p);
int dyn_pt_guard_holds(const dyn_proc_t *p, uint64_t rip);
int dyn_pt_guard_in(const dyn_proc_t *p, uint64_t rip);
enum { /* how dyn_pt_guard_drop leaves the process */
    DYN_GUARD_FORGET, /* as it is (an execve took the pages) */
    DYN_GUARD_UNMAP,  /* all its pages unmapped (nothing ever jumped there) */
    DYN_GUARD_RETIRE, /* the code all rets, kept; the shared and marker pages unmapped */
};
void dyn_pt_guard_drop(dyn_proc_t *p, int how);

#endif
