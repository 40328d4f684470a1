/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The runtime an instrumented program carries (freestanding: no libc, no relocations,
 * no writable data of its own; static binaries have no libc to offer and the blob runs
 * before the dynamic linker's clients are initialised).
 *
 * At start (qprt_init, before the program's entry point): find the profile path
 * ($QP_PROFILE with %p expanded to the process id and %r to the job rank, else the
 * executable's path + ".qp";
 * in a secure-execution program, AT_SECURE, only the latter), open the profile (never
 * through a symbolic link; only a profile of the effective user's) or create it (its
 * header written before it appears: a file found there is never filled), check that it
 * belongs to this rewrite, claim a slot of counters of its own (qp_format.h; no run
 * waits for another's lock more than a moment) and map it MAP_SHARED|MAP_FIXED over the
 * program's counter pages. From then on every increment lands in the page cache: counts
 * survive a crash or SIGKILL and cost nothing extra per hit; no other process increments
 * the same words, so plain increments lose nothing between processes. If anything fails the program runs on
 * with its anonymous counters and one line on stderr says the counts are not saved.
 *
 * After fork (qprt_after_fork, called by a snippet after every call or system call that
 * may fork): a forked child shares its parent's slot until it claims one of its own. It
 * recognises itself by a page marked MADV_WIPEONFORK, which only a child with its own
 * address space finds zeroed (not a thread, not a vfork child).
 *
 * At exit() below main (qprt_exit_dump, called by the snippet before such a call): copy
 * the registers and the top of the stack into a dump slot of the profile, so that qp can
 * unwind it and restore flow conservation for the frames that never return.
 */
#include <stddef.h>
#include <stdint.h>

#include "base/qp_format.h"
#include "base/qp_leb.h"
#include "runtime/qprt.h"
#include "runtime/qprt_isa.h"

#define HIDDEN __attribute__((visibility("hidden")))

/* Filled in by the rewriter (the blob's first bytes). Not const: never folded. */
HIDDEN qprt_params_t qprt_params __attribute__((section(".qprt.params"), used)) = {
    .magic = QPRT_MAGIC,
};

#define PATH_CAP 1100

/* The runtime's writable state, in the page before counter 0 (a forked child has a copy).
 */
typedef struct qprt_state {
    uint64_t stack_top;  /* the initial stack pointer (main thread) */
    uint64_t prof;       /* address of the mapped profile (header to slot table), or 0 */
    uint64_t prof_len;   /* its length */
    uint64_t dumped;     /* an exit dump was taken by this process */
    uint64_t dump_index; /* ... its index (hdr.ndumps when it was taken) */
    uint64_t marker;     /* address of the MADV_WIPEONFORK page, or 0 */
    uint64_t dev, ino;   /* the profile file, to find it again after fork */
    uint64_t secure;     /* AT_SECURE: no environment, no symbolic links */
    uint64_t slot;       /* the slot this process counts into, or UINT64_MAX */
    uint64_t locked;     /* switchable increments: 0 plain, 1 being made atomic, 2 atomic
                          * (or could not be: see QP_PROF_RACY) */
    uint64_t started;    /* a library's start ran (DT_INIT is called once per load) */
    char path[PATH_CAP]; /* the profile's absolute path */
    char module[PATH_CAP]; /* a library: its file (as mapped); empty for the executable */
    uint64_t trace;      /* QPRT_F_TRACE: the trace registry (tr_reg_t), or 0 */
    uint64_t trace_fini; /* ... the dynamic linker's fini function it calls first, or 0 */
    uint64_t err;        /* the errno of the call that kept the profile from use, or 0 */
} qprt_state_t;
_Static_assert(sizeof(qprt_state_t) <= QPRT_STATE_SIZE, "state fits its page");

/* Entry points (qprt_entry.S calls them). */
uint64_t
qprt_init(uint64_t *sp) HIDDEN;
uint64_t
qprt_lib_init(long argc, char **argv, char **envp) HIDDEN;
void
qprt_exit_dump(uint64_t *saved) HIDDEN;
void qprt_exec_failed(void) HIDDEN;
void
qprt_after_fork(void) HIDDEN;
void
qprt_before_thread(void) HIDDEN;
void
qprt_trace_refill(void) HIDDEN;
static void trace_start(const qprt_params_t *p, qprt_state_t *st, uint64_t *sp);
static void trace_flush_all(void);
static void trace_after_fork(void);
static void trace_reap(void);

/*****************************************************************************
 * System calls
 */

/* The same on x86-64 and AArch64 (the rest of the kernel's ABI: runtime/qprt_isa.h). */
enum {
    PROT_READ = 1,
    PROT_WRITE = 2,
    PROT_EXEC = 4,
    MAP_SHARED = 1,
    MAP_PRIVATE = 2,
    MAP_FIXED = 0x10,
    MAP_ANONYMOUS = 0x20,
    MAP_FIXED_NOREPLACE = 0x100000
};
enum { LOCK_EX = 2, LOCK_NB = 4, LOCK_UN = 8, MADV_WIPEONFORK = 18, AT_SECURE = 23 };
enum { ENOENT = 2, ESRCH = 3, EINTR = 4, EAGAIN = 11, EFAULT = 14, EEXIST = 17, ENOSYS = 38,
       ELOOP = 40, EOPNOTSUPP = 95, S_IFMT = 0170000, S_IFREG = 0100000 };
enum { EPERM = 1, EIO = 5, ENOMEM = 12, EACCES = 13, ENOTDIR = 20, EISDIR = 21, ENFILE = 23,
       EMFILE = 24, EFBIG = 27, ENOSPC = 28, EROFS = 30, ENAMETOOLONG = 36, EDQUOT = 122 };
enum { AT_FDCWD = -100, AT_SYMLINK_FOLLOW = 0x400 };


/*****************************************************************************
 * Small helpers (no libc)
 */

/* A system call's return value that is an error (-4095 .. -1). */
static int
is_err(long r)
{
    return (unsigned long)r >= (unsigned long)-4095L;
}

static void
mem_copy(void *d, const void *s, size_t n)
{
    volatile uint8_t *dd = d; /* volatile: keep the compiler from calling memcpy */
    const uint8_t *ss = s;
    for (size_t i = 0; i < n; i++)
        dd[i] = ss[i];
}

static void
mem_zero(void *d, size_t n)
{
    volatile uint8_t *dd = d;
    for (size_t i = 0; i < n; i++)
        dd[i] = 0;
}

static int
mem_eq(const void *a, const void *b, size_t n)
{
    const uint8_t *x = a, *y = b;
    for (size_t i = 0; i < n; i++)
        if (x[i] != y[i])
            return 0;
    return 1;
}

/* Append S to BUF (CAP bytes, *N used, always NUL-terminated). */
static void
append(char *buf, size_t cap, size_t *n, const char *s)
{
    while (*s && *n + 1 < cap)
        buf[(*n)++] = *s++;
    buf[*n] = '\0';
}

static void
append_u64(char *buf, size_t cap, size_t *n, uint64_t v)
{
    char d[24];
    int k = 0;
    do {
        d[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    char s[24];
    for (int i = 0; i < k; i++)
        s[i] = d[k - 1 - i];
    s[k] = '\0';
    append(buf, cap, n, s);
}

/* The decimal number at *P (advanced past it). */
static uint64_t
parse_u64(const char **p)
{
    uint64_t v = 0;
    while (**p >= '0' && **p <= '9')
        v = v * 10 + (uint64_t)(*(*p)++ - '0');
    return v;
}

/* One line on stderr: "qp: WHAT: WHY; TAIL". */
static void
warn_line(const char *what, const char *why, const char *tail)
{
    char line[1400];
    size_t n = 0;
    append(line, sizeof(line), &n, "qp: ");
    append(line, sizeof(line), &n, what);
    append(line, sizeof(line), &n, ": ");
    append(line, sizeof(line), &n, why);
    append(line, sizeof(line), &n, tail);
    sys3(SYS_write, 2, (long)line, (long)n);
}

/* strerror's text for the errors a profile's file meets (no libc here). */
static const char *
errno_text(uint64_t e)
{
    switch (e) {
    case EPERM: return "Operation not permitted";
    case ENOENT: return "No such file or directory";
    case EIO: return "Input/output error";
    case ENOMEM: return "Cannot allocate memory";
    case EACCES: return "Permission denied";
    case ENOTDIR: return "Not a directory";
    case EISDIR: return "Is a directory";
    case ENFILE: return "Too many open files in system";
    case EMFILE: return "Too many open files";
    case EFBIG: return "File too large";
    case ENOSPC: return "No space left on device";
    case EROFS: return "Read-only file system";
    case ENAMETOOLONG: return "File name too long";
    case EDQUOT: return "Disk quota exceeded";
    default: return NULL;
    }
}

/* "qp: PATH: WHY[: ERRNO TEXT]; counts of this process are not saved". */
static void
warn(const char *path, const char *why, uint64_t err)
{
    char text[400];
    size_t n = 0;
    append(text, sizeof(text), &n, why);
    if (err != 0) {
        const char *e = errno_text(err);
        append(text, sizeof(text), &n, ": ");
        if (e != NULL)
            append(text, sizeof(text), &n, e);
        else {
            append(text, sizeof(text), &n, "errno ");
            append_u64(text, sizeof(text), &n, err);
        }
    }
    warn_line(path, text, "; counts of this process are not saved\n");
}

/*****************************************************************************
 * Processes: who owns a slot, and is it still running
 */

/* Field 22 of /proc/PID/stat (PID 0: self), the start time in clock ticks; 0 unknown. */
static uint64_t
start_time(uint64_t pid)
{
    char path[48], buf[1024];
    size_t n = 0;
    append(path, sizeof(path), &n, "/proc/");
    if (pid == 0)
        append(path, sizeof(path), &n, "self");
    else
        append_u64(path, sizeof(path), &n, pid);
    append(path, sizeof(path), &n, "/stat");
    long fd = sys_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    long r = sys3(SYS_read, fd, (long)buf, sizeof(buf) - 1);
    sys3(SYS_close, fd, 0, 0);
    if (r <= 0)
        return 0;
    buf[r] = '\0';
    /* The name (field 2) may hold anything: fields 3.. follow the last ')'. */
    const char *p = NULL;
    for (long i = 0; i < r; i++)
        if (buf[i] == ')')
            p = buf + i;
    if (p == NULL)
        return 0;
    for (int field = 2; field < 22; p++) {
        if (*p == '\0')
            return 0;
        if (*p == ' ')
            field++;
    }
    return parse_u64(&p);
}

/* The inode of this process's pid namespace ("pid:[N]"), 0 unknown. */
static uint64_t
pid_namespace(void)
{
    char buf[64];
    long r = sys_readlink("/proc/self/ns/pid", buf, sizeof(buf) - 1);
    if (r <= 5)
        return 0;
    buf[r] = '\0';
    const char *p = buf + 5;
    return parse_u64(&p);
}

/* Who is counting: this process. */
typedef struct owner {
    uint64_t pid, start, pidns;
} owner_t;

static void
owner_self(owner_t *o)
{
    o->pid = (uint64_t)sys3(SYS_getpid, 0, 0, 0);
    o->start = start_time(0);
    o->pidns = pid_namespace();
}

/* Has the owner of slot S ended? When unsure, no (its slot is then kept, never lost). */
static int
owner_gone(const volatile qp_prof_slot_t *s, const owner_t *me)
{
    if (s->pidns != 0 && me->pidns != 0 && s->pidns != me->pidns)
        return 0; /* another pid namespace: its pids mean nothing here */
    if (s->pid == me->pid)
        return 1; /* an earlier program this process ran before exec */
    if (sys3(SYS_kill, (long)s->pid, 0, 0) == -ESRCH)
        return 1;
    uint64_t t = s->start ? start_time(s->pid) : 0;
    return t != 0 && t != s->start; /* the pid was reused */
}

/*
 * The rest of the runtime, in this order. The parts are included, not compiled as
 * objects of their own: the blob stays one -Os translation unit, whose static helpers
 * inline across the parts and whose bytes (carried by every rewrite) do not depend on
 * how the source is cut into files.
 */
#include "runtime/qprt_profile.c"
#include "runtime/qprt_start.c"
#include "runtime/qprt_trace.c"
