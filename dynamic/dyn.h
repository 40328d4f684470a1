/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#ifndef QP_DYN_H
#define QP_DYN_H
/*
 * PURPOSE: live instrumentation of a running process. dyn_proc_* controls the process
 * (stop and resume every thread, remote memory, system calls run on its behalf) and is
 * the only ptrace user (dyn_ptrace.c); dyn_space_ops is the editor's qp_space_ops_t over
 * it; dyn_session_* places entry counters (and timers at entries and exits, and counters
 * at call sites) with trampolines built by arch/'s emitters and
 * instruction relocation (the same ones the static editor uses), and takes them out
 * again (libqpt's live spaces run sessions on them; what they count is in libqpt's own
 * memory, the snippets' words);
 * dyn_clean takes out what a killed dyn left. dynamic/ never sees the ELF writer or
 * libelf, never prints, exits or installs signal handlers.
 * Errors: 0 or a negative QP_E* code; QP_EIO means a system call failed and errno is kept
 * (EPERM: not allowed to trace, ESRCH: the process is gone).
 * Lifetimes: a session points into its dyn_proc_t and cfg_prog_t, which must outlive it.
 */
#include <stddef.h>
#include <stdint.h>

#include "arch/arch.h"
#include "cfg/cfg.h"
#include "editor/ed.h"

/*****************************************************************************
 * Process control (dyn_ptrace.c)
 */

typedef struct dyn_proc dyn_proc_t;

/*
 * Attach to process PID and stop every thread: each task of /proc/PID/task is seized and
 * interrupted, and the task list is read again until it no longer changes. On success the
 * process is stopped and *OUT is owned by the caller (dyn_proc_destroy). QP_EIO with
 * errno EPERM (ptrace not permitted) or ESRCH (no such process).
 */
int
dyn_proc_attach(int pid, dyn_proc_t **out /*OUT*/);

/*
 * Start ARGV[0] (looked up in PATH) with ARGV as a child of the caller, stopped right
 * after its execve (the executable and the dynamic loader are mapped; no code of the
 * program has run). QP_EIO when the program cannot be started (errno kept), QP_ENOMEM.
 */
int
dyn_proc_spawn(char *const argv[], dyn_proc_t **out /*OUT*/);

/* Stop every thread again after dyn_proc_resume (re-attaches, new threads included). */
int
dyn_proc_stop(dyn_proc_t *p);

/*
 * Let the process run: detach from every thread (signals that arrived while it was
 * stopped are delivered). Never leaves a thread stopped that was running before the
 * attach.
 */
int
dyn_proc_resume(dyn_proc_t *p);

/* Resume the process if it is stopped, then free P. NULL is fine. */
void
dyn_proc_destroy(dyn_proc_t *p);

/*
 * For a process started by dyn_proc_spawn that is not to run: kill it (SIGKILL), reap
 * it, and free P. Any other process is only let go, as dyn_proc_destroy does. NULL is
 * fine.
 */
void
dyn_proc_kill(dyn_proc_t *p);

/* The process id. */
int
dyn_proc_pid(const dyn_proc_t *p);

/*
 * Why tracing (or reading /proc/PID/exe of) process PID failed with ERR (errno), as one
 * phrase in BUF (CAP bytes) or a static text: "no such process", "is a zombie (...)",
 * "is already traced by process N (strace): ...", "belongs to another user (uid N):
 * ...", what kernel.yama.ptrace_scope allows, else strerror(ERR) (dyn_why.c).
 */
const char *
dyn_proc_why(int pid, int err, char *buf, size_t cap);

/*
 * The stopped process P's bytes where dyn_proc_syscall puts its stub (the slack after the
 * executable's code segment), back to the file's when they differ (a dyn killed while
 * its stub was in), once every thread inside the stub has finished it (a thread the
 * killed dyn set to run a system call there, not run since): 1 when they were put back,
 * 0 when they were right, QP_ERANGE when a thread would not leave (the bytes stay),
 * QP_E*.
 */
int
dyn_proc_stub_reset(dyn_proc_t *p);

/* True while dyn_proc_* holds the threads stopped. */
int
dyn_proc_is_stopped(const dyn_proc_t *p);

/*
 * For a process started by dyn_proc_spawn: 1 and its wait status in *STATUS once it has
 * ended (reaped), 0 while it runs. For an attached process: 1 once it is gone or a zombie
 * (*STATUS = 0). Never blocks; must not be called while the process is stopped.
 */
int
dyn_proc_ended(dyn_proc_t *p, int *status /*OUT*/);

/*
 * Read LEN bytes at ADDR of the process (running or stopped: process_vm_readv, falling
 * back to /proc/PID/mem and PTRACE_PEEKDATA). QP_EIO (errno kept).
 */
int
dyn_proc_read(dyn_proc_t *p, uint64_t addr, void *buf, size_t len);

/*
 * Write LEN bytes at ADDR, also into read-only code (/proc/PID/mem, falling back to
 * PTRACE_POKEDATA). The process must be stopped. QP_EIO (errno kept), QP_EINVAL.
 */
int
dyn_proc_write(dyn_proc_t *p, uint64_t addr, const void *buf, size_t len);

/*
 * Run system call NR with arguments ARGS[0..5] in the stopped process, on one of its
 * threads, whose registers are restored afterwards (an interrupted system call of that
 * thread is still restarted). *RET gets the raw return value (-errno on failure).
 * The thread runs a small stub written in the slack after the end of the program's (or
 * else the vDSO's) executable segment, where no code of the process runs: `syscall`,
 * then code that puts the thread's registers back and jumps to where it was. dyn stops
 * it right after the `syscall` (PTRACE_SYSCALL) and restores the registers itself, so
 * the rest of the stub only runs if dyn dies in between. QP_EIO (ENOSPC: no slack
 * anywhere), QP_EINVAL when not stopped.
 */
int
dyn_proc_syscall(dyn_proc_t *p, long nr, const uint64_t args[6], int64_t *ret /*OUT*/);

/*
 * Call the process's procedure at FN with NARGS (<= 6) integer arguments on one of its
 * threads (the others stay stopped), as the ABI says (stack aligned to 16, the red zone
 * kept, the direction flag clear); its return value into *RET. The thread's registers,
 * vector state included, are put back afterwards. The call runs in a stub on a page
 * mapped for it, which puts everything back itself if dyn dies during the call. A
 * procedure that waits for another thread of the process never returns. QP_EIO (ESRCH:
 * the thread ended, the process died), QP_EINVAL when not stopped.
 */
int
dyn_proc_call(dyn_proc_t *p, uint64_t fn, const uint64_t *args, int nargs, uint64_t *ret);

/*
 * The processes whose parent is PID (a launcher's: mpirun's ranks), from /proc, into
 * *OUT (malloc'ed) and *N. QP_ENOTFOUND when it has none, QP_EIO, QP_ENOMEM.
 */
int dyn_proc_children(int pid, int **out /*OUT*/, size_t *n /*OUT*/);

/* One stopped thread, as dyn_proc_threads reports it. */
typedef struct dyn_thread_info {
    int tid;     /* thread id */
    uint64_t pc; /* program counter */
    uint64_t sp; /* stack pointer */
    uint64_t tp; /* thread pointer (%fs base) */
} dyn_thread_info_t;

/*
 * The stopped threads: up to CAP entries into OUT, their number in *N (which may exceed
 * CAP). QP_EINVAL when not stopped.
 */
int
dyn_proc_threads(
    dyn_proc_t *p, dyn_thread_info_t *out /*OUT*/, size_t cap, size_t *n /*OUT*/);

/*
 * The call stack of every stopped thread, unwound with its call frame information
 * (libdw): FN(ARG, THREAD, PCS, N) for each, PCS innermost first, the thread's pc and
 * then each return address less 1 (an address inside the call, so inside the caller
 * even after a call that does not return), at most 1024. A stack whose unwinding stops
 * early (code without CFI, a snippet's trampoline) gives the frames found so far. FN
 * returns 0 to go on. QP_EINVAL when not stopped, QP_EIO, QP_ENOMEM.
 */
typedef int (*dyn_stack_fn)(void *arg, const dyn_thread_info_t *thread, const uint64_t *pcs,
                            size_t n);
int dyn_proc_stacks(dyn_proc_t *p, dyn_stack_fn fn, void *arg);

/*
 * Per-CPU words (arch's ARCH_SN_ADD_CPU) in P: the offset of glibc's rseq area from the
 * thread pointer into *OFFSET and the possible CPUs (/sys/devices/system/cpu/possible)
 * into *NCPU. 1 when the stopped threads registered their areas (rseq(2), read with
 * PTRACE_GET_RSEQ_CONFIGURATION; a thread not started yet has not, and one whose
 * registration failed adds with a lock) with ARCH_RSEQ_SIG at one offset inside the
 * thread block (0 to 4,095 bytes above the thread pointer: glibc's struct pthread, so
 * that threads started later have it at the same offset), or when P is stopped at its
 * exec (no thread pointer yet) with dyn's own dynamic linker, whose glibc will register
 * every thread at dyn's own __rseq_offset unless its environment turns rseq off; 0
 * with *WHY (a static string) when not (rseq turned off, an old kernel or glibc,
 * another registrar, another dynamic linker); QP_EINVAL when not stopped.
 */
int dyn_proc_rseq(dyn_proc_t *p, int32_t *offset /*OUT*/, unsigned *ncpu /*OUT*/,
                  const char **why /*OUT*/);

/*
 * The pc of every stopped thread and every 8-byte word in the SCAN bytes above its stack
 * pointer (return addresses, and the saved pcs of signal frames), sorted, into *OUT
 * (free() it) and their number *N.
 */
int
dyn_proc_words(dyn_proc_t *p, size_t scan, uint64_t **out /*OUT*/, size_t *n /*OUT*/);

/*
 * Let thread TID run alone (the others stay stopped) until its pc is outside [LO, HI):
 * it is let go and parked again (PTRACE_CONT, PTRACE_INTERRUPT) at most MAX_TRIES times.
 * No single step: a dyn killed meanwhile leaves no trap behind. 0 when it is out,
 * QP_ERANGE when it is still inside, QP_EIO (ESRCH: it exited).
 */
int
dyn_proc_leave(dyn_proc_t *p, int tid, uint64_t lo, uint64_t hi, unsigned max_tries);

/* A pc moved elsewhere (dyn_proc_leave_map). */
typedef struct dyn_pc_map {
    uint64_t from; /* an instruction of a copy */
    uint64_t to;   /* the same instruction in the original */
} dyn_pc_map_t;

/*
 * dyn_proc_leave, and a thread parked at the FROM of an entry of MAP (N, sorted by
 * from) is moved to its TO instead (the original of a relocated procedure, its bytes
 * back: a thread in a long loop of the copy would not leave it by running).
 */
int
dyn_proc_leave_map(dyn_proc_t *p, int tid, uint64_t lo, uint64_t hi,
    const dyn_pc_map_t *map, size_t n, unsigned max_tries);

/*
 * Every thread parked at the FROM of an entry of MAP (N, sorted by from) moved to its TO,
 * as though it had taken the jump there: a thread stopped on a patch's jump, or on the
 * jump in padding that a short jump at an entry leads to, would run the bytes put back
 * under it (the padding's: another procedure's code) instead. A thread whose interrupted
 * system call will restart is left: it goes on at the `syscall` before its pc. *MOVED (when not NULL)
 * counts them. 0, QP_EIO, QP_EINVAL when P is not stopped.
 */
int
dyn_proc_move_pcs(dyn_proc_t *p, const dyn_pc_map_t *map, size_t n, unsigned *moved);

/* MAP (N) sorted by from, for dyn_proc_move_pcs and dyn_proc_leave_map. */
void
dyn_pc_map_sort(dyn_pc_map_t *map, size_t n);

/*
 * dyn_proc_leave for every thread whose pc is in [LO, HI); *MOVED (when not NULL) counts
 * those that left. 0, or the first error (QP_ERANGE: one is still inside) after trying
 * them all.
 */
int
dyn_proc_leave_range(dyn_proc_t *p, uint64_t lo, uint64_t hi, unsigned max_tries,
                     unsigned *moved);

/*
 * The load bias of the main executable: AT_ENTRY of /proc/PID/auxv minus LINK_ENTRY (the
 * ELF entry of the file); 0 for a non-PIE executable. QP_EIO, QP_EFORMAT.
 */
int
dyn_proc_load_bias(dyn_proc_t *p, uint64_t link_entry, uint64_t *bias /*OUT*/);

/* "/proc/PID/exe" into BUF (CAP bytes), for cfg_image_open_bfd. */
const char *
dyn_proc_exe_path(const dyn_proc_t *p, char *buf, size_t cap);

/*
 * For a process started by dyn_proc_spawn and still stopped at its execve: let it run
 * until its entry point (AT_ENTRY), so that the dynamic loader has mapped, relocated
 * and initialised the libraries it needs (DT_NEEDED) and no code of the program itself
 * has run. A breakpoint is written there and taken out again; while it is in, the
 * process is killed if dyn dies (PTRACE_O_EXITKILL). Signals that arrive on the way are
 * delivered. QP_EIO with ESRCH when the program ended before its entry, QP_EINVAL when
 * P is not such a process.
 */
int
dyn_proc_run_to_entry(dyn_proc_t *p);

/*
 * After DYN_EV_EXEC (dyn_proc_poll): the followed process P, stopped in its new image,
 * is let run to that image's entry point the same way (its libraries are then loaded),
 * and stays followed, stopped there, without breakpoint (dyn_proc_set_break again).
 * Nothing of the old image is touched. QP_EIO with ESRCH when it ended before.
 */
int
dyn_proc_exec_to_entry(dyn_proc_t *p);

/*
 * Follow the stopped process P from now on: its threads stay seized while it runs
 * (dyn_proc_resume lets them go on instead of detaching), new threads are seized as
 * they start, and forks, execs and the breakpoint of dyn_proc_set_break are reported
 * by dyn_proc_poll. dyn_proc_unfollow (or dyn_proc_destroy) ends it. Should dyn die
 * meanwhile, the threads go on (the breakpoint's jump stays in, harmless, until
 * `dyn clean`; see dyn_proc_set_break).
 */
int
dyn_proc_follow(dyn_proc_t *p);

/*
 * A breakpoint at ADDR of the stopped, followed process P, where a routine that only
 * returns must be (`ret`, or `endbr64; ret`: QP_EUNSUPP otherwise): the dynamic linker's
 * r_brk (dyn_proc_r_debug). A thread that hits it is reported by dyn_proc_poll, and let
 * go by dyn_proc_resume, which does the return for it. One at a time. It holds threads
 * only while the calling thread of dyn lives (a jump to a trampoline that waits on a
 * robust lock this thread holds, in a page shared with P: that thread must be the one
 * that follows P until dyn_proc_unfollow); when there is no room for the jump (`ret`
 * with no padding after it) or P cannot make the page, an int3, which a killed dyn
 * leaves behind.
 */
int
dyn_proc_set_break(dyn_proc_t *p, uint64_t addr);

/* 1 when the breakpoint of P (dyn_proc_set_break) is the int3, which a killed dyn leaves
 * behind (the process dies of SIGTRAP at its next dlopen or dlclose unless `dyn clean`
 * runs first); 2 when it is the guarded jump but P refused MADV_WIPEONFORK on its marker
 * page (a forked copy is told by its pid alone: a child that is process 1 of a new pid
 * namespace, forked by a P that is process 1 of its own, would be held until dyn ends);
 * 0 when it is the guarded jump, or there is none. */
int
dyn_proc_break_unguarded(const dyn_proc_t *p);

/* 1 when CODE, the target of a jump found at r_brk in the stopped process P, is the
 * trampoline of a dyn's guarded breakpoint (dyn_ptrace_guard.c: page-aligned, its lock
 * word in a /memfd:qpt-brk mapping, or retired: all rets), else 0; QP_EINVAL. */
int
dyn_proc_is_guard(dyn_proc_t *p, uint64_t code);

/* The trampoline at CODE of a killed dyn's guard (dyn_proc_is_guard), r_brk put back
 * (`dyn clean`), in the stopped process P: its code made all rets, as dyn_proc_unfollow
 * leaves its own (a thread stopped in it returns, the routine's own return), so that a
 * later following may reuse the page (it takes only retired ones). 0; QP_EINVAL when
 * CODE is not such a page; QP_EIO. Written from its start: a write failing midway leaves
 * each instruction whole or beginning with a ret. */
int
dyn_proc_guard_retire(dyn_proc_t *p, uint64_t code);

/* Stop following the stopped process P: the breakpoint out, threads on it put back
 * before it, the guard's trampoline left as one page of rets (a thread in a signal
 * handler may still return into it: dyn_ptrace_guard.c); dyn_proc_resume then detaches
 * as usual. 0 when P was not followed. A child forked meanwhile whose copy kept the
 * int3 is let go stopped (DYN_EV_CHILD_LEFT): dyn_proc_left_stopped tells each. */
int
dyn_proc_unfollow(dyn_proc_t *p);

/* The pid of a child of P that dyn_proc_unfollow let go stopped (the int3 of the
 * breakpoint still in it: DYN_EV_CHILD_LEFT), the oldest not asked for yet, taken from
 * P's list (call again for the next); then -1 for each such child whose pid could not
 * be noted (no memory); 0 when none. */
int
dyn_proc_left_stopped(dyn_proc_t *p);

/* What dyn_proc_poll saw. */
enum {
    DYN_EV_NONE = 0,  /* nothing: the process runs (or ended: dyn_proc_ended) */
    DYN_EV_BREAK = 1, /* a thread is on the breakpoint: P is stopped; dyn_proc_resume */
    DYN_EV_FORK = 2,  /* a child was forked (not a thread, nor vfork): CHILD holds it
                       * stopped, with the parent's code, patches included (the
                       * breakpoint taken out); dyn_proc_destroy lets it go (detached).
                       * The parent runs. */
    DYN_EV_EXEC = 3,  /* the process ran execve: P is stopped (one thread) in the new
                       * image; the old code, sessions' memory included, is gone */
    DYN_EV_THREAD_START = 4, /* (dyn_proc_report_threads) thread TID started: it runs */
    DYN_EV_THREAD_EXIT = 5,  /* (dyn_proc_report_threads) thread TID (not the process's
                              * first) ended with wait status STATUS (-1: unknown) */
    DYN_EV_CHILD_LEFT = 6,   /* a child TID was forked but the int3 of the breakpoint
                              * could not be taken out of its copy: it was let go stopped
                              * (SIGSTOP), to be cleaned (`dyn clean TID`) and continued
                              * (SIGCONT) by the user. The parent runs. */
};
typedef struct dyn_event {
    int kind;          /* DYN_EV_* */
    dyn_proc_t *child; /* DYN_EV_FORK */
    int tid;           /* DYN_EV_THREAD_*: the thread; DYN_EV_CHILD_LEFT: the child */
    int status;        /* DYN_EV_THREAD_EXIT: its wait status */
    int handled;       /* DYN_EV_NONE: stops and ends handled silently (a poller may
                        * look again soon: the process is busy with them) */
} dyn_event_t;

/*
 * A followed process P: report its threads' starts and ends through dyn_proc_poll (ON
 * 1) as well, oldest first, or not (0, the default: they are handled silently).
 */
int
dyn_proc_report_threads(dyn_proc_t *p, int on);

/*
 * 1 once the process has ended (gone, or a zombie), in any state (stopped by us
 * included: it may be killed meanwhile), with its wait status in *STATUS when it is
 * known (our child, or traced by us when it ended: a followed process), else -1; its
 * threads are then no longer held. 0 while some thread of it is alive.
 */
int
dyn_proc_exited(dyn_proc_t *p, int *status /*OUT*/);

/*
 * Handle what the threads of the running, followed process P did since the last call,
 * without blocking: signals are passed on, new threads seized, ended ones reaped. The
 * first event that needs the caller goes into *EV (DYN_EV_NONE: none). QP_EINVAL when
 * P is stopped or not followed.
 */
int
dyn_proc_poll(dyn_proc_t *p, dyn_event_t *ev /*OUT*/);

/*
 * The dynamic linker's debugger interface of P (struct r_debug, <link.h>): its address
 * from the DT_DEBUG entry of the executable's dynamic section in memory, and its r_brk
 * (the routine called after each change of the link map). QP_ENOTFOUND when there is
 * none (a static executable, or the loader has not run yet), QP_EIO.
 */
int
dyn_proc_r_debug(dyn_proc_t *p, uint64_t *rdebug /*OUT*/, uint64_t *brk /*OUT*/);

/* r_state of the r_debug at RDEBUG: 0 RT_CONSISTENT, 1 RT_ADD, 2 RT_DELETE; < 0. */
int
dyn_proc_r_state(dyn_proc_t *p, uint64_t rdebug);

/*****************************************************************************
 * The files mapped in a process: executable and shared libraries (dyn_module.c)
 */

/* One ELF file mapped executable in a process, from /proc/PID/maps. */
typedef struct dyn_module {
    char *name;     /* base name of the file as maps shows it ("libc.so.6") */
    char *path;     /* its path in maps (" (deleted)" kept when the file is gone) */
    uint64_t dev;   /* device (major << 32 | minor, as maps shows it) */
    uint64_t ino;   /* inode */
    uint64_t base;  /* start of its mapping of file offset 0 (0: none seen) */
    uint64_t lo;    /* lowest address of its mappings */
    uint64_t hi;    /* ... and highest end */
    uint64_t one[2]; /* one of its mappings, [start, end) (for /proc/PID/map_files) */
    int exe;        /* the main executable (/proc/PID/exe) */
} dyn_module_t;

/*
 * The files of process PID with an executable mapping, by address, into *OUT (free
 * with dyn_modules_free) and *N. QP_EIO (errno kept), QP_ENOMEM.
 */
int
dyn_proc_modules(int pid, dyn_module_t **out /*OUT*/, size_t *n /*OUT*/);

/* Free what dyn_proc_modules returned. NULL is fine. */
void
dyn_modules_free(dyn_module_t *v, size_t n);

/*
 * A path through which the very file M of process PID can be read (for
 * cfg_image_open_bfd) into BUF (CAP bytes): PID's view of M's path
 * (/proc/PID/root/PATH) when its device and inode are M's, else /proc/PID/map_files/
 * (allowed to root only). QP_ENOTFOUND with *WHY (static text) when neither is the
 * file mapped: it was replaced or deleted since it was loaded.
 */
int
dyn_module_path(int pid, const dyn_module_t *m, char *buf, size_t cap,
    const char **why /*OUT*/);

/*
 * The load bias of module M whose file IMG describes: the start of the mapping of file
 * offset 0 minus the lowest PT_LOAD's p_vaddr rounded down to the page. QP_EFORMAT
 * when IMG has no PT_LOAD or M no mapping of offset 0.
 */
int
dyn_module_bias(const dyn_module_t *m, const cfg_image_t *img, uint64_t *bias /*OUT*/);

/*****************************************************************************
 * The address space of a live process (dyn_space.c)
 */

/*
 * qp_space_ops_t over a dyn_proc_t (pass the dyn_proc_t as SELF): read and write as
 * dyn_proc_read/write; alloc_near maps anonymous memory in the stopped process with a
 * remote mmap(MAP_FIXED_NOREPLACE) into a free gap of /proc/PID/maps within rel32 reach
 * of [LO, HI), nearest first, never right above the heap's break.
 */
extern const qp_space_ops_t dyn_space_ops;

/*
 * As dyn_space_ops.alloc_near, with FD: -1 for anonymous private memory, else a file
 * descriptor of the process whose file is mapped shared from offset 0.
 */
int
dyn_space_map_near(dyn_proc_t *p, uint64_t lo, uint64_t hi, size_t len, uint32_t prot,
    int fd, uint64_t *out /*OUT*/);

/*
 * As dyn_space_map_near, never in one of the NAVOID ranges AVOID (pairs address, length:
 * addresses the caller keeps for itself though nothing is mapped there now).
 */
int
dyn_space_map_near_avoid(dyn_proc_t *p, uint64_t lo, uint64_t hi, size_t len,
    uint32_t prot, int fd, const uint64_t *avoid, size_t navoid, uint64_t *out /*OUT*/);

/* Unmap [ADDR, ADDR + LEN) in the stopped process (remote munmap). */
int
dyn_space_free(dyn_proc_t *p, uint64_t addr, size_t len);

/*****************************************************************************
 * Sessions: entry counters (dyn_patch.c)
 */

typedef struct dyn_session dyn_session_t;

/* A snippet for a live point (arch_snip_t trees: the caller's until install). */
typedef struct dyn_snippet {
    const arch_snip_t *nodes;
    size_t n;
    uint32_t root;
} dyn_snippet_t;

/* Where dyn_session_add_point patches. */
enum {
    DYN_PT_ENTRY = 0, /* a procedure's entry (refused when a branch inside it goes back) */
    DYN_PT_CALL = 1,  /* a call instruction of 5 bytes or more: before and after it */
    DYN_PT_EXIT = 2,  /* a ret: the tail of its block (>= 5 bytes) moves */
    DYN_PT_BLOCK = 3, /* a block's start (its first 5 bytes of instructions move) */
    DYN_PT_INSN = 4,  /* any instruction, when 5 bytes of instructions from it stay in
                       * its block (they move, as for a block) */
    DYN_PT_WHOLE = 5, /* a procedure's entry whose block ends in its ret, the block moved
                       * whole (short ones too, with padding): BEFORE at the entry, AFTER
                       * before the ret */
    DYN_PT_PROC = 6,  /* a procedure relocated whole (its exits do not fit in place, or
                       * other code jumps into it): BEFORE at its entry, AFTER before each
                       * ret and each jump that leaves it, in its copy */
};

/*
 * A new session over process P (which need not be stopped yet) whose main executable is
 * described by PROG, loaded at bias BIAS (dyn_proc_load_bias). Free with
 * dyn_session_destroy.
 */
int
dyn_session_create(
    dyn_proc_t *p, const cfg_prog_t *prog, uint64_t bias, dyn_session_t **out /*OUT*/);

struct pt_decoded;

/*
 * The instructions of S's procedures relocated whole are decoded into D (patch/'s
 * pt_decoded_t; the caller's, outliving S, shared by its sessions): each is decoded
 * once, not at every check and emit of its copy. NULL (the default): each time.
 */
void
dyn_session_keep_decoded(dyn_session_t *s, struct pt_decoded *d);

/* A set for dyn_session_keep_decoded (NULL: no memory), and its end. */
struct pt_decoded *
dyn_decoded_new(void);

void
dyn_decoded_free(struct pt_decoded *d);

/*
 * Ask for snippet BEFORE (and, at a DYN_PT_CALL or DYN_PT_WHOLE, AFTER; either may be
 * NULL, not both but at a DYN_PT_PROC: then its copy runs its row's counter, or nothing
 * at its entry when dyn_session_set_sites gives it call sites)
 * at the point of KIND at link-time address ADDR (the entry, the call, the ret, the
 * block's start) of procedure PROC; NAME names its row. *ROW (may be NULL) gets the row.
 * QP_EUNSUPP with *WHY (static text) when the point cannot be patched as the file shows
 * it (install may still refuse it: dyn_session_refusal_row).
 */
int
dyn_session_add_point(dyn_session_t *s, int kind, uint32_t proc, uint64_t addr,
    const dyn_snippet_t *before, const dyn_snippet_t *after, const char *name,
    uint32_t *row /*OUT*/, const char **why /*OUT*/);

/* A call site of a procedure relocated whole with a snippet before the call. */
typedef struct dyn_site {
    uint64_t addr;      /* link address of the call instruction */
    dyn_snippet_t snip; /* what runs before it (the caller's until install) */
} dyn_site_t;

/*
 * The calls of the procedure of ROW (a DYN_PT_PROC point's) with a snippet before them
 * in its copy: SITES (N, sorted by address, the caller's until install; each a call of
 * the procedure, else install refuses the row). The calls are made as every call of a
 * copy is, with their original return address. 0, QP_ENOTFOUND (no such point),
 * QP_EINVAL.
 */
int
dyn_session_set_sites(dyn_session_t *s, uint32_t row, const dyn_site_t *sites, size_t n);

/*
 * The exits of the procedure of ROW (a DYN_PT_PROC point's) where its AFTER snippet runs:
 * EXITS (N link addresses of rets and leaving jumps, sorted; the caller's until
 * install); by default every one. 0, QP_ENOTFOUND (no such point), QP_EINVAL.
 */
int
dyn_session_set_exits(dyn_session_t *s, uint32_t row, const uint64_t *exits, size_t n);

/* Whether dyn_session_add_point would take the point (nothing is added): 0 with the
 * run-time bytes its jump would replace, [*LO, *HI) (either may be NULL), or QP_EUNSUPP
 * with *WHY. */
int
dyn_session_check_point(const dyn_session_t *s, int kind, uint32_t proc, uint64_t addr,
    uint64_t *lo, uint64_t *hi, const char **why);

/* ON: dyn_session_install writes nothing when a point is refused before its code is
 * written (overlap, a thread inside, code that differs): it returns 0 not installed,
 * with the refusals (dyn_session_nrefused), for a caller whose commit is all or nothing
 * (libqpt). Off by default: the other rows go in. */
void
dyn_session_set_all_or_nothing(dyn_session_t *s, int on);

/* The N ranges AVOID (pairs address, length, copied) where dyn_session_install maps
 * neither trampolines nor counters (dyn_space_map_near_avoid): memory of the caller's
 * that left the process, whose addresses stay its own (libqpt's gone variables). */
int
dyn_session_set_avoid(dyn_session_t *s, const uint64_t *avoid, size_t n);

/*
 * Neighbour slots, for a caller that chooses its points one by one (libqpt; the
 * selections above find theirs themselves). Procedure PROC's point of KIND (DYN_PT_ENTRY,
 * DYN_PT_WHOLE or DYN_PT_PROC) at ADDR, its entry, too short for a jump with no padding
 * in reach, through a 2-byte jump to a slot in the original code of a neighbour relocated
 * whole (its original idle: Dyninst's and e9patch's borrowed bytes); relocated whole
 * (DYN_PT_PROC), the short jump may be a return site's; a 1-byte procedure's
 * (DYN_PT_WHOLE) is its jmp rel8 opcode alone, the displacement being the first byte of
 * the procedure after it, kept before that one's entry jump (a pun). LEND(ARG, J) says which
 * procedures may be relocated whole for it. Nothing is added: 0 with *LENDER the
 * neighbour, *NEAR the link address of the short jump (for dyn_session_want_slot) and
 * the run-time bytes the point's entry jump replaces in [*LO, *HI) (either may be NULL),
 * QP_EUNSUPP with *WHY, QP_ENOMEM, QP_EINVAL.
 */
int
dyn_session_check_borrow(const dyn_session_t *s, int kind, uint32_t proc, uint64_t addr,
    int (*lend)(void *arg, uint32_t proc), void *arg, uint32_t *lender /*OUT*/,
    uint64_t *near /*OUT*/, uint64_t *lo /*OUT*/, uint64_t *hi /*OUT*/,
    const char **why /*OUT*/);

/*
 * To add such a pair: dyn_session_want_slot(S, NEAR as dyn_session_check_borrow gave); the
 * lender's DYN_PT_PROC point (dyn_session_add_point, or dyn_session_add_lender when it
 * takes no snippet of the caller's: its row's counter runs); dyn_session_slot_kept (1:
 * it kept a slot, which the next short jump that wants one in its reach takes: add the borrower's
 * point next; 0: none, the borrower does not fit); then dyn_session_want_slot(S, 0). A
 * refusal at install removes the whole session (the caller's rule), so the borrower
 * never jumps into a lender that is not in.
 */
int
dyn_session_want_slot(dyn_session_t *s, uint64_t near);
int
dyn_session_slot_kept(dyn_session_t *s);
int
dyn_session_add_lender(dyn_session_t *s, uint32_t proc, const char *name,
    uint32_t *row /*OUT*/, const char **why /*OUT*/);

/*
 * Patch the selected points of the stopped process: allocate trampoline and counter
 * memory near the code, write the trampolines (counter increment, relocated original
 * instructions, jump back) and a 5-byte jump at each entry. A point whose bytes hold a
 * thread's pc, or a return address found on a thread's stack, or whose bytes differ from
 * the file, is refused (recorded). Returns 0 (also when every point was refused: see
 * dyn_session_nrefused), QP_E* with nothing patched otherwise.
 */
int
dyn_session_install(dyn_session_t *s);

/*
 * Take the instrumentation out of the stopped process: restore every original byte
 * (checking that each entry still holds our jump), step threads out of trampolines, then
 * unmap the trampoline and counter memory unless a thread may still return into it (a pc,
 * or an address on a stack: then the mapping is left, *LEAKED = 1; call-site trampoline
 * code always stays, *LEAKED = 2). LEAKED may be NULL. When the threads on the jumps in
 * padding of short entries cannot be moved off them (QP_ENOMEM, QP_EIO returned), those
 * points stay in and the mapping is left (*LEAKED = 1): `dyn clean` can take them out.
 */
int
dyn_session_remove(dyn_session_t *s, int *leaked /*OUT*/);

/*
 * Call-site trampolines of the removed session S that run snippets after their call (a
 * QPT_AFTER_CALL insertion's): a callee still running returns into one, whose snippets
 * may use memory freed once S is out. The first bytes after each such call become a
 * jump: to the same call's return in NEXT (its snippets, when NEXT has some after that
 * call: a timer started in S stops there), or (NEXT NULL, or none there) back to the
 * original code after the call. dyn_session_remove does the latter; a caller that
 * installed NEXT over the same process calls this after. The process is stopped.
 */
int
dyn_session_reroute_returns(dyn_session_t *s, const dyn_session_t *next);

/*
 * Drop S without touching the code it patched, which is gone: GONE_ALL (after an exec)
 * when the whole address space is, and nothing of the process is touched; else (the
 * module was unmapped: dlclose) the trampoline and counter memory is unmapped from the
 * stopped process unless a thread's pc is in it. 1 when it was kept so (a thread may
 * still run the trampoline's code: the memory its snippets use must stay too), 0 when
 * nothing is left, QP_EINVAL when the process runs.
 */
int
dyn_session_drop(dyn_session_t *s, int gone_all);

/*
 * Put the original bytes back at every point of S in CHILD, a stopped copy of S's
 * process (a fork): it then runs its own code, unmeasured. The trampoline and counter
 * memory stays mapped there, unused.
 */
int
dyn_session_unpatch_copy(const dyn_session_t *s, dyn_proc_t *child);

/* Procedures refused so far: their number, and name and reason of refusal I. */
size_t
dyn_session_nrefused(const dyn_session_t *s);
const char *
dyn_session_refusal(const dyn_session_t *s, size_t i, const char **why /*OUT*/);
/* The row (as dyn_session_add_point gave it) of refusal I when it was refused at
 * install, or UINT32_MAX. */
uint32_t
dyn_session_refusal_row(const dyn_session_t *s, size_t i);

/* Free S (does not touch the process). NULL is fine. */
void
dyn_session_destroy(dyn_session_t *s);

/*****************************************************************************
 * Leftovers of a dyn that was killed (dyn_clean.c)
 */

/*
 * The first bytes of every trampoline memory a session maps (anonymous, r-x): how a
 * later dyn recognises what a killed one left. Written before any jump points there.
 */
typedef struct dyn_tramp_hdr {
    char magic[8];     /* DYN_TRAMP_MAGIC */
    uint64_t size;     /* bytes of the mapping */
    uint64_t ctr;      /* the counter mapping, 0 while there is none */
    uint64_t ctr_size; /* its size */
    uint32_t flags;    /* DYN_HDR_* */
    uint32_t dyn_pid;  /* the dyn that made it */
    uint64_t spare[3]; /* 0 */
} dyn_tramp_hdr_t;

#define DYN_TRAMP_MAGIC "qpt-dyn\1"
enum {
    DYN_HDR_CALLS = 1u << 0, /* call-site trampolines: the code must stay mapped */
};

/*
 * In the header of the trampoline memory at CODE (in the stopped process P), forget the
 * counters once they are unmapped while the code stays.
 */
int
dyn_tramp_forget_counters(dyn_proc_t *p, uint64_t code);

/* What dyn_clean found and did. */
typedef struct dyn_clean_report {
    unsigned regions;  /* trampoline memories found */
    unsigned jumps;    /* jumps into them put back to the file's bytes */
    unsigned moved;    /* threads moved out of trampolines */
    unsigned unmapped; /* mappings unmapped (trampolines and counters) */
    unsigned kept;     /* trampoline memories left mapped (see dyn_clean) */
    unsigned busy;     /* trampoline memories of a dyn still running: left alone */
    unsigned breaks;   /* breakpoints on the loader's r_brk put back */
    unsigned stub;     /* system-call stubs (dyn_proc_syscall's) put back to the file's
                        * bytes */
    unsigned fds;      /* descriptors of a killed dyn's memfds closed */
    uint64_t foreign_brk; /* r_brk jumps here, not to a dyn's trampoline: left alone
                        * (0: no such jump) */
    unsigned tracer_fds; /* descriptors named like those left open: the process is a
                        * dyn or traces another (its own memfds), left open */
    unsigned mapped_fds; /* ... the process maps them itself (a mutator's own): left open */
} dyn_clean_report_t;

/*
 * Take out what a killed dyn left in the stopped process P whose main executable is IMG
 * loaded at BIAS: every trampoline memory (found by its header in /proc/PID/maps), every
 * 5-byte jump of the program's code into one (found by comparing the code in memory with
 * the file; the file's bytes are written back), and of the shared libraries' code (each
 * executable mapping compared with its file, read through dyn_module_path; when one
 * cannot be, every trampoline memory stays mapped, counted in kept), then threads
 * inside a trampoline are let
 * run out of it, and the memory is unmapped by the rule dyn_session_remove follows: not
 * when a thread's pc or a word near the top of its stack points into it, and never the
 * code of call-site trampolines (a callee may still return there); the counters go with
 * the code unless such a word was found. Memory of a dyn that still runs (its session
 * is live; the header names it) is left alone. *OUT says what was done.
 */
int
dyn_clean(dyn_proc_t *p, const cfg_image_t *img, uint64_t bias,
    dyn_clean_report_t *out /*OUT*/);


/*
 * `dyn clean PID`: attach to process PID, read its executable, stop it and take out what
 * a killed dyn left (dyn_clean), then let it go. Returns 0 with *OUT filled, or QP_E*
 * with one line in WHY ("PID: what: reason").
 */
int
dyn_clean_pid(int pid, dyn_clean_report_t *out /*OUT*/, char *why, size_t whylen);

#endif
