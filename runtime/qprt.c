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

/*****************************************************************************
 * The profile file
 */

/* The file's layout for this program (qp_format.h). */
typedef struct layout {
    uint64_t cbytes; /* bytes of one set of counters */
    uint64_t dumps_off, slots_off, slotc_off;
} layout_t;

static void
layout_of(const qprt_params_t *p, layout_t *l)
{
    l->cbytes = QP_PROF_CBYTES(p->ncounters);
    l->dumps_off = QP_PROF_HDR_SIZE + l->cbytes;
    l->slots_off = l->dumps_off + (uint64_t)QP_PROF_MAX_DUMPS * QP_PROF_DUMP_SIZE;
    l->slotc_off = l->slots_off + QP_PROF_TABLE_SIZE;
}

/*
 * Make [OFF, OFF + LEN) of FD exist on disk: a write through a shared mapping into a
 * hole would kill the program with SIGBUS when the disk is full. Where the file system
 * cannot allocate ahead, only extend the file.
 */
static int
reserve(long fd, uint64_t off, uint64_t len)
{
    long r;
    do
        r = sys6(SYS_fallocate, fd, 0, (long)off, (long)len, 0, 0);
    while (r == -EINTR);
    if (r == -EOPNOTSUPP) {
        kstat_t st;
        if ((r = sys3(SYS_fstat, fd, (long)&st, 0)) < 0)
            return (int)r;
        if ((uint64_t)st.size < off + len)
            r = sys3(SYS_ftruncate, fd, (long)(off + len), 0);
        else
            r = 0;
    }
    return r < 0 ? (int)r : 0; /* -errno */
}

/*
 * The rank of this process in a parallel job, from the launcher's environment (Open MPI,
 * PMI/MPICH, PMIx, Slurm): its digits (at most 10; anything else is not a rank), or NULL.
 */
static const char *
rank_of(char **envp, const char *var, size_t len)
{
    for (char **e = envp; *e; e++) {
        if (!mem_eq(*e, var, len))
            continue;
        const char *v = *e + len;
        size_t d = 0;
        while (v[d] >= '0' && v[d] <= '9' && d < 11)
            d++;
        if (d > 0 && d <= 10 && v[d] == '\0')
            return v;
    }
    return NULL;
}

static const char *
job_rank(char **envp)
{
    /* (No table of names: the blob may hold no absolute relocation.) */
    const char *r = rank_of(envp, "OMPI_COMM_WORLD_RANK=", 21);
    if (r == NULL)
        r = rank_of(envp, "PMI_RANK=", 9);
    if (r == NULL)
        r = rank_of(envp, "PMIX_RANK=", 10);
    if (r == NULL)
        r = rank_of(envp, "SLURM_PROCID=", 13);
    return r;
}

/* The last component of PATH. */
static const char *
base_name(const char *path)
{
    const char *b = path;
    for (const char *c = path; *c; c++)
        if (*c == '/')
            b = c + 1;
    return b;
}

/* The profile's absolute path into ST->path: $QP_PROFILE (%p expanded to the process
 * id, %r to the job rank or, outside a job, the process id; not in a secure-execution
 * program), else the executable's path + ".qp". A library's profile is the library's
 * path + ".qp", or $QP_PROFILE expanded + "." + the library's file name (the program
 * and each of its libraries count into profiles of their own). */
static int
profile_path(uint64_t argc, char **argv, char **envp, qprt_state_t *st)
{
    char *buf = st->path;
    size_t cap = sizeof(st->path), n = 0;
    buf[0] = '\0';
    for (char **e = envp; e != NULL && !st->secure && *e; e++) {
        const char *v = *e;
        if (!mem_eq(v, "QP_PROFILE=", 11))
            continue;
        v += 11;
        if (*v == '\0')
            break;
        if (*v != '/') {
            long r = sys3(SYS_getcwd, (long)buf, (long)cap, 0);
            if (r <= 0)
                return -1;
            while (n < cap && buf[n])
                n++;
            append(buf, cap, &n, "/");
        }
        for (; *v && n + 1 < cap; v++) {
            const char *rank = v[0] == '%' && v[1] == 'r' ? job_rank(envp) : NULL;
            if (rank != NULL) {
                append(buf, cap, &n, rank);
                v++;
            } else if (v[0] == '%' && (v[1] == 'p' || v[1] == 'r')) {
                append_u64(buf, cap, &n, (uint64_t)sys3(SYS_getpid, 0, 0, 0));
                v++;
            } else {
                buf[n++] = *v;
                buf[n] = '\0';
            }
        }
        if (st->module[0] != '\0') {
            append(buf, cap, &n, ".");
            append(buf, cap, &n, base_name(st->module));
        }
        return n + 1 < cap ? 0 : -1;
    }
    if (st->module[0] != '\0') {
        append(buf, cap - 3, &n, st->module);
        append(buf, cap, &n, ".qp");
        return n + 1 < cap ? 0 : -1;
    }
    long r = sys_readlink("/proc/self/exe", buf, (long)cap - 4);
    if (r <= 0) {
        if (st->secure || argc == 0 || argv[0] == NULL || argv[0][0] != '/')
            return -1;
        append(buf, cap - 3, &n, argv[0]);
    } else
        n = (size_t)r;
    buf[n] = '\0';
    if (n + 4 >= cap)
        return -1;
    append(buf, cap, &n, ".qp");
    return 0;
}

/* Sleep NS nanoseconds (below a second). */
static void
nap(long ns)
{
    int64_t t[2] = { 0, ns };
    sys3(SYS_nanosleep, (long)t, 0, 0);
}

/* May this run write FD's file (*KS: its status)? It must be a regular file of the
 * effective user and, in a secure-execution program, have one link. NULL, or why not. */
static const char *
not_ours(long fd, int secure, kstat_t *ks)
{
    if (sys3(SYS_fstat, fd, (long)ks, 0) < 0 || (ks->mode & S_IFMT) != S_IFREG)
        return "not a regular file";
    if (ks->uid != (uint32_t)sys3(SYS_geteuid, 0, 0, 0))
        return "not owned by the effective user";
    if (secure && ks->nlink != 1)
        return "has several links (secure execution)";
    return NULL;
}

/* Write the header of a new profile (no other process sees the file yet) and size it. */
static int
init_profile(long fd, const qprt_params_t *p, const layout_t *l, const qprt_state_t *st)
{
    qp_prof_hdr_t h;
    mem_zero(&h, sizeof(h));
    mem_copy(h.magic, QP_PROF_MAGIC, 8);
    h.version = QP_PROF_VERSION;
    h.id = p->id;
    h.ncounters = p->ncounters;
    h.dumps_off = l->dumps_off;
    h.slots_off = l->slots_off;
    h.nslots = QP_PROF_MAX_SLOTS;
    h.slotc_off = l->slotc_off;
    if (st->module[0] != '\0') {
        size_t n = 0;
        append(h.exe, sizeof(h.exe), &n, st->module);
    } else if (sys_readlink("/proc/self/exe", h.exe, sizeof(h.exe) - 1)
        < 0)
        h.exe[0] = '\0';
    int r = reserve(fd, 0, l->slotc_off);
    if (r < 0)
        return r;
    long w = sys6(SYS_pwrite64, fd, (long)&h, sizeof(h), 0, 0, 0);
    return w == (long)sizeof(h) ? 0 : w < 0 ? (int)w : -ENOSPC; /* -errno */
}

/*
 * Create the profile at ST->path, its header written before it appears there: an
 * unnamed file (O_TMPFILE) linked in place or, where the file system has none, a file
 * of a new name (O_EXCL, never through a symbolic link) linked there and unlinked. A
 * link never replaces anything, so a file already there is never filled by this run.
 * Returns the fd, -EEXIST when a file appeared there meanwhile, or another error.
 */
static long
new_profile(const qprt_state_t *st, const qprt_params_t *p, const layout_t *l)
{
    long mode = st->secure ? 0600 : 0666;
    char dir[PATH_CAP], tmp[PATH_CAP + 48];
    size_t n = 0, cut = 0;
    append(dir, sizeof(dir), &n, st->path);
    for (size_t i = 0; i < n; i++)
        if (dir[i] == '/')
            cut = i;
    dir[cut == 0 ? 1 : cut] = '\0';
    long fd = sys_open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, mode);
    if (fd >= 0) {
        n = 0;
        append(tmp, sizeof(tmp), &n, "/proc/self/fd/");
        append_u64(tmp, sizeof(tmp), &n, (uint64_t)fd);
        long r = init_profile(fd, p, l, st) < 0 ? -1
            : sys6(SYS_linkat, AT_FDCWD, (long)tmp, AT_FDCWD, (long)st->path,
                AT_SYMLINK_FOLLOW, 0);
        if (r == 0)
            return fd;
        sys3(SYS_close, fd, 0, 0);
        if (r == -EEXIST)
            return r;
    }
    /* PATH.PID.CYCLES.new: left behind only by a run killed in the next lines. */
    n = 0;
    append(tmp, sizeof(tmp), &n, st->path);
    append(tmp, sizeof(tmp), &n, ".");
    append_u64(tmp, sizeof(tmp), &n, (uint64_t)sys3(SYS_getpid, 0, 0, 0));
    append(tmp, sizeof(tmp), &n, ".");
    append_u64(tmp, sizeof(tmp), &n, cycles() & 0xffffffff);
    append(tmp, sizeof(tmp), &n, ".new");
    if (n + 1 >= sizeof(tmp))
        return -1;
    fd = sys_open(tmp,
        O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, mode);
    if (fd < 0) /* (not EEXIST: that one would be of the temporary name) */
        return fd == -EEXIST ? -EIO : fd;
    long r = init_profile(fd, p, l, st);
    if (r == 0)
        r = sys_link(tmp, st->path);
    sys_unlink(tmp);
    if (r < 0) {
        sys3(SYS_close, fd, 0, 0);
        return r;
    }
    return fd;
}

/*
 * Open the profile at ST->path (CREATE: creating it if there is none, new_profile) and
 * check what it is: reached without a symbolic link, a regular file of the effective
 * user, in a secure-execution program with one link. Its contents are check_profile's.
 * Returns the fd or -1 with *WHY.
 */
static long
open_profile(qprt_state_t *st, const qprt_params_t *p, const layout_t *l, int create,
    kstat_t *ks, const char **why)
{
    long flags = O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW;
    long fd = sys_open(st->path, flags, 0);
    for (int i = 0; create && fd == -ENOENT && i < 3; i++) {
        fd = new_profile(st, p, l);
        if (fd == -EEXIST)
            fd = sys_open(st->path, flags, 0);
    }
    if (fd < 0) {
        *why = fd == -ELOOP ? "a symbolic link (never followed)"
            : create        ? "cannot open or create the profile"
                            : "cannot open the profile";
        st->err = fd == -ELOOP ? 0 : (uint64_t)-fd;
        return -1;
    }
    *why = not_ours(fd, (int)st->secure, ks);
    if (*why == NULL)
        return fd;
    sys3(SYS_close, fd, 0, 0);
    return -1;
}

/* Is the file a profile of this program? 1 yes, -1 no, -2 a profile of another rewrite
 * (of this qp version: it can be moved aside). An empty file is none: a run creates its
 * profile with its header (new_profile) and never fills a file it finds. */
static int
check_profile(long fd, const qprt_params_t *p, const layout_t *l, const kstat_t *ks,
    const char **why)
{
    qp_prof_hdr_t h;
    long r = ks->size == 0 ? 0 : sys6(SYS_pread64, fd, (long)&h, sizeof(h), 0, 0, 0);
    if (r == 0) {
        *why = "an empty file, not a qp profile (a run creates its own: remove it)";
    } else if (r != (long)sizeof(h) || !mem_eq(h.magic, QP_PROF_MAGIC, 8)) {
        *why = "not a qp profile";
    } else if (h.version != QP_PROF_VERSION) {
        *why = "a profile of another qp version (remove it, or set QP_PROFILE)";
    } else if (h.id != p->id || h.ncounters != p->ncounters || h.dumps_off != l->dumps_off
        || h.slots_off != l->slots_off || h.nslots != QP_PROF_MAX_SLOTS
        || h.slotc_off != l->slotc_off) {
        *why = "profile of another program or rewrite (remove it or set QP_PROFILE)";
        return -2;
    } else if ((uint64_t)ks->size < l->slotc_off) {
        *why = "profile is truncated";
    } else
        return 1;
    return -1;
}

/*****************************************************************************
 * Slots
 */

static void
store64(volatile uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_SEQ_CST);
}

/* Finish the journal of slot S (whose counters are at C), if it holds a step. */
static void
finish_journal(volatile qp_prof_slot_t *s, volatile uint64_t *base, volatile uint64_t *c)
{
    if (!s->jour_valid)
        return;
    uint64_t i = s->jour_index, sum = s->jour_base + s->jour_value;
    store64(&base[i], sum < s->jour_base ? UINT64_MAX : sum);
    store64(&c[i], 0);
    store64(&s->jour_valid, 0);
}

/* Add the counters of slot K (its owner is gone, the file is locked) into the base
 * counters and free the slot. 0, or -1 when its counters cannot be mapped (it stays). */
static int
fold_slot(long fd, volatile qp_prof_hdr_t *h, uint64_t k, const qprt_params_t *p,
    const layout_t *l)
{
    volatile qp_prof_slot_t *s
        = (volatile qp_prof_slot_t *)((uintptr_t)h + l->slots_off) + k;
    volatile uint64_t *base = (volatile uint64_t *)((uintptr_t)h + QP_PROF_HDR_SIZE);
    long m = sys6(SYS_mmap, 0, (long)l->cbytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
        (long)(l->slotc_off + k * l->cbytes));
    if (is_err(m))
        return -1;
    volatile uint64_t *c = (volatile uint64_t *)(uintptr_t)m;
    __atomic_store_n(&s->state, QP_SLOT_FOLDING, __ATOMIC_SEQ_CST);
    finish_journal(s, base, c); /* a folder before us died half-way */
    for (uint64_t i = 0; i < p->ncounters; i++) {
        uint64_t v = c[i];
        if (v == 0)
            continue;
        s->jour_index = i;
        s->jour_base = base[i];
        s->jour_value = v;
        store64(&s->jour_valid, 1);
        if (base[i] + v < base[i])
            __atomic_fetch_or(&h->flags, QP_PROF_SATURATED, __ATOMIC_RELAXED);
        finish_journal(s, base, c);
    }
    __atomic_store_n(&s->state, QP_SLOT_FREE, __ATOMIC_SEQ_CST);
    sys3(SYS_munmap, m, (long)l->cbytes, 0);
    return 0;
}

/*
 * A library's code can run before its DT_INIT: IFUNC resolvers during relocation, and
 * the constructors of libraries loaded with it. Its counts are in the anonymous
 * counters that the profile's mapping replaces: keep them in a copy (returned, or 0 when
 * there is nothing to keep) and add them to the slot once it is mapped.
 */
static uint64_t
save_early_counts(const qprt_params_t *p, uint64_t bias)
{
    const volatile uint64_t *c = (const volatile uint64_t *)(uintptr_t)(p->counters + bias);
    uint64_t i = 0;
    while (i < p->ncounters && c[i] == 0)
        i++;
    if (i == p->ncounters)
        return 0;
    long m = sys6(SYS_mmap, 0, (long)p->counters_size, PROT_READ | PROT_WRITE,
        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (is_err(m))
        return 0;
    mem_copy((void *)(uintptr_t)m, (const void *)(uintptr_t)(p->counters + bias),
        p->ncounters * 8);
    return (uint64_t)m;
}

static void
add_early_counts(const qprt_params_t *p, uint64_t bias, uint64_t early)
{
    volatile uint64_t *c = (volatile uint64_t *)(uintptr_t)(p->counters + bias);
    const uint64_t *e = (const uint64_t *)(uintptr_t)early;
    for (uint64_t i = 0; i < p->ncounters; i++)
        if (e[i] != 0)
            __atomic_fetch_add(&c[i], e[i], __ATOMIC_RELAXED);
    sys3(SYS_munmap, (long)early, (long)p->counters_size, 0);
}

/* A slot's state and pad as one word (qp_prof_slot_t: state, then pad). */
static volatile uint64_t *
slot_word(volatile qp_prof_slot_t *s)
{
    return (volatile uint64_t *)(uintptr_t)&s->state;
}

#define SLOT_FREE ((uint64_t)QP_SLOT_FREE)
#define SLOT_OWNED ((uint64_t)QP_SLOT_OWNED)
#define SLOT_CLAIMING ((uint64_t)1 << 32 | QP_SLOT_OWNED) /* owned, its owner not written */

/*
 * Fold the slots of processes that are gone when LOCKED (the file's lock held: only
 * its holder folds), then claim the first free slot for ME (CHILD: a forked child) and
 * map its counters over the program's. A claim needs no lock: it takes a free slot
 * with one compare-and-swap and marks it being claimed (pad 1) until its owner is
 * written, and a folder leaves such a slot alone. Returns the slot, or -1.
 */
static long
claim_slot(long fd, volatile qp_prof_hdr_t *h, const qprt_params_t *p, uint64_t bias,
    const layout_t *l, const owner_t *me, int child, int locked, const char **why)
{
    volatile qp_prof_slot_t *tab
        = (volatile qp_prof_slot_t *)((uintptr_t)h + l->slots_off);
    long k = -1;
    /* First the folds a killed process left half-done: their journals name base
     * counters that no other fold may change before they are completed. */
    for (uint64_t i = 0; locked && i < QP_PROF_MAX_SLOTS; i++)
        if (tab[i].state == QP_SLOT_FOLDING)
            fold_slot(fd, h, i, p, l);
    for (uint64_t i = 0; locked && i < QP_PROF_MAX_SLOTS; i++)
        if (__atomic_load_n(slot_word(&tab[i]), __ATOMIC_ACQUIRE) == SLOT_OWNED
            && owner_gone(&tab[i], me))
            fold_slot(fd, h, i, p, l);
    for (uint64_t i = 0; k < 0 && i < QP_PROF_MAX_SLOTS; i++) {
        uint64_t w = SLOT_FREE;
        if (*slot_word(&tab[i]) == SLOT_FREE
            && __atomic_compare_exchange_n(slot_word(&tab[i]), &w, SLOT_CLAIMING, 0,
                __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            k = (long)i;
    }
    *why = "more processes than profile slots at once";
    if (k < 0)
        return -1;
    volatile qp_prof_slot_t *s = &tab[k];
    uint64_t off = l->slotc_off + (uint64_t)k * l->cbytes;
    *why = "no space for the counters";
    if (l->cbytes > 0 && reserve(fd, off, l->cbytes) < 0) {
        store64(slot_word(s), SLOT_FREE);
        return -1;
    }
    *why = "cannot map the profile";
    /* (Not in a forked child: what its counters hold is its parent's.) */
    uint64_t early = (p->flags & QPRT_F_LIBRARY) && !child ? save_early_counts(p, bias) : 0;
    if (p->counters_size > 0
        && is_err(sys6(SYS_mmap, (long)(p->counters + bias), (long)p->counters_size,
            PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, (long)off))) {
        if (early != 0)
            sys3(SYS_munmap, (long)early, (long)p->counters_size, 0);
        store64(slot_word(s), SLOT_FREE);
        return -1;
    }
    if (early != 0)
        add_early_counts(p, bias, early);
    s->pid = me->pid;
    s->start = me->start;
    s->pidns = me->pidns;
    s->jour_valid = 0;
    store64(slot_word(s), SLOT_OWNED);
    return k;
}

/* Zero anonymous pages over the program's counters (a child that could not get a slot
 * of its own must not count into its parent's with plain increments). */
static void
private_counters(const qprt_params_t *p, uint64_t bias)
{
    if (p->counters_size > 0)
        sys6(SYS_mmap, (long)(p->counters + bias), (long)p->counters_size,
            PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
}

/*
 * Take the profile's lock, waiting a quarter of a second at most: its holder may be
 * stopped (SIGSTOP, Ctrl-Z, a debugger) and must never hang every later run, root's
 * included. 1 locked; 0 not (the run then claims a slot without folding any).
 */
static int
lock_profile(long fd)
{
    for (int i = 0; i < 50; i++) {
        long r = sys3(SYS_flock, fd, LOCK_EX | LOCK_NB, 0);
        if (r == 0)
            return 1;
        if (r != -EAGAIN && r != -EINTR)
            return 0;
        nap(5000000);
    }
    return 0;
}

/*
 * Open or create the profile, lock it if it can be had soon (lock_profile), check it,
 * claim a slot and map it. CHILD: a forked child, whose profile is already mapped
 * (ST->prof) and is found again by path and inode. Returns 0, or with *WHY -2 when no slot could be claimed (the profile's
 * `unsaved` counts it) or -1 when the profile could not be used at all.
 */
static int
attach(
    qprt_state_t *st, const qprt_params_t *p, uint64_t bias, int child, const char **why)
{
    layout_t l;
    layout_of(p, &l);
    kstat_t ks;
    st->err = 0;
    long fd = open_profile(st, p, &l, !child, &ks, why);
    if (fd < 0)
        return -1;
    int rc = -1;
    if (child && (ks.dev != st->dev || ks.ino != st->ino)) {
        *why = "the profile was replaced since the program started";
        goto out;
    }
    int locked = lock_profile(fd);
    if (!child) {
        *why = "cannot read the profile";
        if (sys3(SYS_fstat, fd, (long)&ks, 0) < 0)
            goto out;
        int c = check_profile(fd, p, &l, &ks, why);
        if (c == -2 && !st->secure && !locked) {
            *why = "profile of another rewrite, its lock held by a process that does not "
                   "let it go (stopped?)";
        } else if (c == -2 && !st->secure) {
            /* A run never drops its counts: the other rewrite's profile goes to PATH.old
             * (replacing an older one), and this run starts a new PATH. Only the process
             * holding the lock of the file PATH names renames it, so a profile another
             * run just created is never the one moved. (Not in secure execution: no
             * file is renamed there.) */
            kstat_t now;
            char old[PATH_CAP + 8];
            size_t n = 0;
            append(old, sizeof(old), &n, st->path);
            append(old, sizeof(old), &n, ".old");
            rc = -3; /* open again */
            if (sys_stat(st->path, &now) == 0 && now.dev == ks.dev
                && now.ino == ks.ino && n + 1 < sizeof(old)
                && sys_rename(st->path, old) == 0) {
                append(old, sizeof(old), &n, "; this run starts a new profile\n");
                warn_line(st->path, "the profile of another rewrite was moved to ", old);
            }
            goto out;
        }
        if (c < 0)
            goto out;
        long m = sys6(
            SYS_mmap, 0, (long)l.slotc_off, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        *why = "cannot map the profile";
        if (is_err(m)) {
            st->err = (uint64_t)-m;
            goto out;
        }
        st->prof = (uint64_t)m;
        st->prof_len = l.slotc_off;
        st->dev = ks.dev;
        st->ino = ks.ino;
    }
    volatile qp_prof_hdr_t *h = (volatile qp_prof_hdr_t *)(uintptr_t)st->prof;
    owner_t me;
    owner_self(&me);
    long k = claim_slot(fd, h, p, bias, &l, &me, child, locked, why);
    if (k < 0) {
        __atomic_fetch_add(&h->unsaved, 1, __ATOMIC_RELAXED);
        if (!child) {
            sys3(SYS_munmap, (long)st->prof, (long)st->prof_len, 0);
            st->prof = 0;
        }
        rc = -2;
        goto out;
    }
    st->slot = (uint64_t)k;
    __atomic_fetch_add(child ? &h->forks : &h->runs, 1, __ATOMIC_RELAXED);
    rc = 0;
out:
    /* Explicitly: the file stays open while a mapping of it exists, and so would a lock.
     */
    sys3(SYS_flock, fd, LOCK_UN, 0);
    sys3(SYS_close, fd, 0, 0);
    return rc;
}

/* The MADV_WIPEONFORK page that tells a forked child from its parent (0 if none). */
static uint64_t
fork_marker(void)
{
    long m = sys6(
        SYS_mmap, 0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (is_err(m))
        return 0;
    if (sys3(SYS_madvise, m, 4096, MADV_WIPEONFORK) < 0) {
        sys3(SYS_munmap, m, 4096, 0);
        return 0;
    }
    *(volatile uint64_t *)(uintptr_t)m = 1;
    return (uint64_t)m;
}

/*****************************************************************************
 * The process's modules: a program and its libraries, each with a runtime of its own
 */

/*
 * A page at a fixed address that the runtimes of one process share (each module of a
 * rewritten program has its own runtime; a library sees none of the program's calls).
 * The watcher - a rewritten libc, whose pthread_create entry and fork system calls are
 * hooked - makes every module's increments atomic before the first thread starts and
 * gives every module its own slot in a forked child. A library whose increments would
 * otherwise be atomic from the start (QPRT_F_LOCK_UNWATCHED) stays plain while a watcher
 * is there and no thread has started. Private memory: a child has a copy, exec none.
 */
#define REG_ADDR 0x3a5a00000000ull
#define REG_MAX 500
typedef struct qprt_reg {
    char magic[8];       /* REG_MAGIC */
    uint32_t lock;       /* a spin lock over what follows */
    uint32_t threads;    /* a thread started (the watcher saw it) */
    uint32_t watcher;    /* a watcher is registered */
    uint32_t n;          /* modules registered */
    uint64_t params[REG_MAX]; /* each module's qprt_params (run-time address) */
} qprt_reg_t;
_Static_assert(sizeof(qprt_reg_t) <= 4096, "the registry fits its page");
#define REG_MAGIC "QPTREG01"

/* The registry: mapped by the first library's runtime (CREATE), found by the others;
 * NULL when there is none, the address is taken by something else or the kernel cannot
 * place it there. A program without rewritten libraries never maps it. */
static qprt_reg_t *
registry(int create)
{
    long m = sys6(SYS_mmap, (long)REG_ADDR, 4096, create ? PROT_READ | PROT_WRITE : 0,
        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    qprt_reg_t *r = (qprt_reg_t *)(uintptr_t)REG_ADDR;
    if (!is_err(m) && (uint64_t)m == REG_ADDR && !create) {
        sys3(SYS_munmap, m, 4096, 0); /* there was none */
        return NULL;
    }
    if (!is_err(m) && (uint64_t)m == REG_ADDR) {
        mem_copy(r->magic, REG_MAGIC, 8); /* modules start one at a time (the loader) */
        return r;
    }
    if (!is_err(m)) { /* an old kernel took the address as a hint */
        sys3(SYS_munmap, m, 4096, 0);
        return NULL;
    }
    if (m != -EEXIST)
        return NULL;
    /* Something is mapped there: ours if it reads as ours (read without faulting). */
    char magic[8];
    struct iov {
        uint64_t base, len;
    } local = { (uint64_t)(uintptr_t)magic, 8 }, remote = { REG_ADDR, 8 };
    long got = sys6(SYS_process_vm_readv, sys3(SYS_getpid, 0, 0, 0), (long)&local, 1,
        (long)&remote, 1, 0);
    return got == 8 && mem_eq(magic, REG_MAGIC, 8) ? r : NULL;
}

static void
reg_lock(qprt_reg_t *r)
{
    while (__atomic_exchange_n(&r->lock, 1, __ATOMIC_ACQUIRE))
        cpu_relax();
}

static void
reg_unlock(qprt_reg_t *r)
{
    __atomic_store_n(&r->lock, 0, __ATOMIC_RELEASE);
}

/* Module Q's load bias and state. */
static uint64_t
bias_of(const qprt_params_t *q)
{
    return (uint64_t)(uintptr_t)q - q->self;
}

static qprt_state_t *
state_of(const qprt_params_t *q)
{
    return (qprt_state_t *)(uintptr_t)(q->state + bias_of(q));
}

static void make_atomic(const qprt_params_t *p, uint64_t bias, qprt_state_t *st);

/* Is module Q still there (a library may have been closed since it registered)? Its
 * parameter block is read without faulting and must still be one. */
static int
module_alive(const qprt_params_t *q)
{
    qprt_params_t copy;
    struct iov {
        uint64_t base, len;
    } local = { (uint64_t)(uintptr_t)&copy, sizeof(copy) },
      remote = { (uint64_t)(uintptr_t)q, sizeof(copy) };
    long got = sys6(SYS_process_vm_readv, sys3(SYS_getpid, 0, 0, 0), (long)&local, 1,
        (long)&remote, 1, 0);
    return got == (long)sizeof(copy) && mem_eq(copy.magic, QPRT_MAGIC, 8)
        && copy.state + ((uint64_t)(uintptr_t)q - copy.self) != 0;
}

/*
 * Enter module P in the registry. Returns 1 when its increments must be made atomic
 * now (QPRT_F_LOCK_UNWATCHED, and no watcher will do it before a thread starts).
 */
static int
register_module(const qprt_params_t *p)
{
    qprt_reg_t *r = registry((p->flags & QPRT_F_LIBRARY) != 0);
    int unwatched = (p->flags & QPRT_F_LOCK_UNWATCHED) != 0;
    if (r == NULL)
        return unwatched;
    reg_lock(r);
    if (p->flags & QPRT_F_WATCHER)
        r->watcher = 1;
    int listed = r->n < REG_MAX;
    if (listed)
        r->params[r->n++] = (uint64_t)(uintptr_t)p;
    int now = unwatched && (!r->watcher || r->threads || !listed);
    reg_unlock(r);
    return now;
}

/* The modules of the registry, copied out under its lock into OUT (REG_MAX entries);
 * SET_THREADS: a thread is about to start. */
static uint64_t
reg_modules(qprt_reg_t *r, uint64_t *out, int set_threads)
{
    reg_lock(r);
    if (set_threads)
        r->threads = 1;
    uint64_t n = r->n;
    for (uint64_t i = 0; i < n; i++)
        out[i] = r->params[i];
    reg_unlock(r);
    return n;
}

/*****************************************************************************
 * Threads: switchable increments made atomic
 */

/* Set FLAG in the profile's header, if one is mapped. */
static void
profile_flag(const qprt_state_t *st, uint32_t flag)
{
    if (st->prof != 0)
        __atomic_fetch_or(&((volatile qp_prof_hdr_t *)(uintptr_t)st->prof)->flags, flag,
            __ATOMIC_RELAXED);
}

/*
 * Make every switchable increment of the relocated code atomic, once: before the
 * program can run its code in a second thread. The code stays executable throughout
 * (threads a library started may be running it); each site's first byte goes from the
 * ignored prefix to the lock prefix, both valid forms of the same instruction.
 */
static void
make_atomic(const qprt_params_t *p, uint64_t bias, qprt_state_t *st)
{
    if (!(p->flags & QPRT_F_SWITCH)
        || __atomic_load_n(&st->locked, __ATOMIC_ACQUIRE) == 2)
        return;
    uint64_t zero = 0;
    if (!__atomic_compare_exchange_n(
            &st->locked, &zero, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        while (__atomic_load_n(&st->locked, __ATOMIC_ACQUIRE) != 2)
            cpu_relax();
        return;
    }
#if !defined(__x86_64__)
    /* The switch is a prefix byte (x86-64): an AArch64 rewrite uses ARCH_INC_ATOMIC
     * increments where threads may race and never sets QPRT_F_SWITCH. */
    (void)bias;
    profile_flag(st, QP_PROF_RACY);
    warn_line("counters", "cannot make them atomic (switchable increments are x86-64 only)",
        "; counts may be lost where threads race\n");
#else
    uint64_t text = p->text + bias;
    uint64_t lo = text & ~(uint64_t)4095,
             hi = (text + p->text_size + 4095) & ~(uint64_t)4095;
    if (sys3(SYS_mprotect, (long)lo, (long)(hi - lo), PROT_READ | PROT_WRITE | PROT_EXEC)
        < 0) {
        profile_flag(st, QP_PROF_RACY);
        warn_line("counters",
            "cannot make them atomic before a thread starts (mprotect "
            "refused)",
            "; counts may be lost where threads race\n");
    } else {
        const uint8_t *q = (const uint8_t *)(uintptr_t)(p->locks + bias);
        volatile uint8_t *code = (volatile uint8_t *)(uintptr_t)text;
        uint64_t site = 0;
        for (uint64_t i = 0; i < p->nlocks; i++) {
            uint64_t d = 0;
            unsigned shift = 0;
            uint8_t c;
            do {
                c = *q++;
                d |= (uint64_t)(c & 0x7f) << shift;
                shift += 7;
            } while ((c & 0x80) && shift < 35);
            site += d;
            if (site < p->text_size && code[site] == p->plain_byte)
                code[site] = p->lock_byte;
        }
        sys3(SYS_mprotect, (long)lo, (long)(hi - lo), PROT_READ | PROT_EXEC);
        profile_flag(st, QP_PROF_LOCKED);
    }
#endif
    __atomic_store_n(&st->locked, 2, __ATOMIC_RELEASE);
}

typedef void (*module_fn_t)(const qprt_params_t *p, uint64_t bias, qprt_state_t *st);

/* The watcher (QPRT_F_WATCHER): FN on every module of the process the registry lists
 * that is still mapped (SET_THREADS: a thread is about to start, as reg_modules takes
 * it). Nothing for another module. */
static void
watched_modules(module_fn_t fn, int set_threads)
{
    if (!(qprt_params.flags & QPRT_F_WATCHER))
        return;
    qprt_reg_t *r = registry(0);
    uint64_t mods[REG_MAX];
    uint64_t n = r != NULL ? reg_modules(r, mods, set_threads) : 0;
    for (uint64_t i = 0; i < n; i++) {
        const qprt_params_t *q = (const qprt_params_t *)(uintptr_t)mods[i];
        if (module_alive(q))
            fn(q, bias_of(q), state_of(q));
    }
}

void
qprt_before_thread(void)
{
    const qprt_params_t *p = &qprt_params;
    uint64_t bias = (uint64_t)(uintptr_t)p - p->self;
    make_atomic(p, bias, (qprt_state_t *)(uintptr_t)(p->state + bias));
    if (p->flags & QPRT_F_TRACE)
        trace_reap();
    /* The watcher: every module of the process, before the thread exists. */
    watched_modules(make_atomic, 1);
}

/*****************************************************************************
 * Start, and after fork
 */

/* Is this a secure-execution program (set-user-ID, capabilities)? From the auxv. */
static int
secure_execution(uint64_t *sp)
{
    uint64_t argc = sp[0];
    uint64_t *v = sp + 1 + argc + 1;
    while (*v)
        v++; /* the environment */
    for (v++; v[0] != 0; v += 2)
        if (v[0] == AT_SECURE)
            return v[1] != 0;
    return 0;
}

/* Name the profile, attach to it and, if asked, make the increments atomic. */
static void
start(const qprt_params_t *p, uint64_t bias, qprt_state_t *st, uint64_t argc, char **argv,
    char **envp)
{
    const char *why = "cannot name the profile";
    int rc = profile_path(argc, argv, envp, st);
    /* A trace has no counts to save (metrics are not made with a tracing driver): no
     * profile is made, its path only names the trace files. */
    if (rc == 0 && !(p->flags & QPRT_F_TRACE))
        rc = attach(st, p, bias, 0, &why);
    for (int again = 0; rc == -3 && again < 3; again++)
        rc = attach(st, p, bias, 0, &why);
    if (rc < 0)
        warn(st->path[0] ? st->path : "profile", why, st->err);
    else
        st->marker = fork_marker();
    if (register_module(p) || (p->flags & QPRT_F_LOCK_AT_START))
        make_atomic(p, bias, st);
}

uint64_t
qprt_init(uint64_t *sp)
{
    const qprt_params_t *p = &qprt_params;
    uint64_t bias = (uint64_t)(uintptr_t)p - p->self;
    qprt_state_t *st = (qprt_state_t *)(uintptr_t)(p->state + bias);
    st->stack_top = (uint64_t)(uintptr_t)sp;
    st->slot = UINT64_MAX;
    st->secure = (uint64_t)secure_execution(sp);
    char **argv = (char **)(sp + 1);
    start(p, bias, st, sp[0], argv, argv + sp[0] + 1);
    if (p->flags & QPRT_F_TRACE)
        trace_start(p, st, sp);
    return p->entry + bias;
}

/* Secure execution, from /proc/self/auxv (a library's start has no initial stack: the
 * environment it gets may have been moved by setenv). Unknown counts as secure. */
static int
secure_from_auxv(void)
{
    uint64_t v[128];
    long fd = sys_open("/proc/self/auxv", O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return 1;
    long r = sys3(SYS_read, fd, (long)v, sizeof(v));
    sys3(SYS_close, fd, 0, 0);
    for (long i = 0; i + 1 < r / 8; i += 2) {
        if (v[i] == 0)
            break;
        if (v[i] == AT_SECURE)
            return v[i + 1] != 0;
    }
    return r <= 0;
}

/* The hexadecimal number at *P (advanced past it). */
static uint64_t
parse_hex(const char **p)
{
    uint64_t v = 0;
    for (;; (*p)++) {
        char c = **p;
        if (c >= '0' && c <= '9')
            v = v * 16 + (uint64_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v = v * 16 + (uint64_t)(c - 'a' + 10);
        else
            return v;
    }
}

/*
 * If the /proc/self/maps line L maps ADDR: its end into *HI, whether it is readable into
 * *READABLE, and 1 with the path into BUF when it maps a file, else 0. -1: not ADDR's.
 */
static int
maps_line(const char *l, uint64_t addr, char *buf, size_t cap, uint64_t *hi, int *readable)
{
    uint64_t lo = parse_hex(&l);
    if (*l++ != '-')
        return -1;
    *hi = parse_hex(&l);
    if (addr < lo || addr >= *hi)
        return -1;
    *readable = l[0] == ' ' && l[1] == 'r';
    for (int field = 0; field < 4; field++) { /* perms, offset, device, inode */
        while (*l == ' ')
            l++;
        while (*l && *l != ' ')
            l++;
    }
    while (*l == ' ')
        l++;
    if (*l != '/')
        return 0;
    size_t n = 0;
    append(buf, cap, &n, l);
    static const char deleted[] = " (deleted)";
    size_t d = sizeof(deleted) - 1;
    if (n > d && mem_eq(buf + n - d, deleted, d))
        buf[n - d] = '\0';
    return n + 1 < cap;
}

/* The mapping that holds ADDR, from /proc/self/maps (maps_line's answer), or -1. */
static int
maps_lookup(uint64_t addr, char *buf, size_t cap, uint64_t *hi, int *readable)
{
    char chunk[4096 + PATH_CAP];
    size_t have = 0;
    int found = -1;
    long fd = sys_open("/proc/self/maps", O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    while (found < 0) {
        long r = sys3(SYS_read, fd, (long)(chunk + have), (long)(sizeof(chunk) - 1 - have));
        if (r <= 0)
            break;
        have += (size_t)r;
        size_t line = 0;
        for (size_t i = 0; i < have && found < 0; i++)
            if (chunk[i] == '\n') {
                chunk[i] = '\0';
                found = maps_line(chunk + line, addr, buf, cap, hi, readable);
                line = i + 1;
            }
        if (line == 0 && have == sizeof(chunk) - 1)
            line = have; /* a line longer than any path we keep: skip it */
        for (size_t i = line; i < have; i++)
            chunk[i - line] = chunk[i];
        have -= line;
    }
    sys3(SYS_close, fd, 0, 0);
    return found;
}

/* The file mapped at ADDR (this library), from /proc/self/maps, into BUF. 0 or -1. */
static int
module_path(uint64_t addr, char *buf, size_t cap)
{
    uint64_t hi;
    int readable;
    return maps_lookup(addr, buf, cap, &hi, &readable) == 1 ? 0 : -1;
}

/*
 * Copy up to LEN bytes from FROM to TO without faulting: process_vm_readv, which stops at
 * the first unmapped page; where it is missing (qemu-user, a kernel without
 * CONFIG_CROSS_MEMORY_ATTACH) a plain copy as far as FROM's readable mapping goes
 * (/proc/self/maps). The bytes copied, or a negative errno.
 */
static long
copy_mapped(uint64_t from, void *to, uint64_t len)
{
    struct iov {
        uint64_t base, len;
    } local = { (uint64_t)(uintptr_t)to, len }, remote = { from, len };
    long got = sys6(SYS_process_vm_readv, sys3(SYS_getpid, 0, 0, 0), (long)&local, 1,
        (long)&remote, 1, 0);
    if (got != -ENOSYS)
        return got;
    char path[8];
    uint64_t hi = 0;
    int readable = 0;
    if (maps_lookup(from, path, sizeof(path), &hi, &readable) < 0 || !readable)
        return -EFAULT;
    if (hi - from < len)
        len = hi - from;
    mem_copy(to, (const void *)(uintptr_t)from, len);
    return (long)len;
}

uint64_t
qprt_lib_init(long argc, char **argv, char **envp)
{
    const qprt_params_t *p = &qprt_params;
    uint64_t bias = (uint64_t)(uintptr_t)p - p->self;
    qprt_state_t *st = (qprt_state_t *)(uintptr_t)(p->state + bias);
    uint64_t init = p->init != 0 ? p->init + bias : 0;
    if (st->started)
        return init;
    st->started = 1;
    /* Frames of the main thread lie below its arguments. */
    st->stack_top = (uint64_t)(uintptr_t)argv;
    st->slot = UINT64_MAX;
    st->secure = (uint64_t)secure_from_auxv();
    if (module_path((uint64_t)(uintptr_t)p, st->module, sizeof(st->module)) < 0) {
        warn("profile", "cannot find the library's file in /proc/self/maps", 0);
        return init;
    }
    start(p, bias, st, argc < 0 ? 0 : (uint64_t)argc, argv, envp);
    return init;
}

/* In a forked child: module P's counters go to a slot of the child's own. */
static void
fork_module(const qprt_params_t *p, uint64_t bias, qprt_state_t *st)
{
    volatile uint64_t *m = (volatile uint64_t *)(uintptr_t)st->marker;
    /* Same address space (the parent, a thread, a vfork child) or nothing to move. */
    if (m == NULL || *m != 0)
        return;
    *m = 1;
    st->dumped = 0;
    st->slot = UINT64_MAX;
    const char *why;
    int rc = st->prof != 0 ? attach(st, p, bias, 1, &why) : 0;
    if (rc < 0) {
        private_counters(p, bias);
        if (rc == -1)
            __atomic_fetch_add(&((volatile qp_prof_hdr_t *)(uintptr_t)st->prof)->unsaved,
                1, __ATOMIC_RELAXED);
        warn(st->path, why, st->err);
    }
}

void
qprt_after_fork(void)
{
    const qprt_params_t *p = &qprt_params;
    uint64_t bias = (uint64_t)(uintptr_t)p - p->self;
    fork_module(p, bias, (qprt_state_t *)(uintptr_t)(p->state + bias));
    if (p->flags & QPRT_F_TRACE)
        trace_after_fork();
    /* The watcher: every module of the process sees the fork (a library sees none of the
     * program's calls). In the parent, and in a vfork child, the markers say so. */
    watched_modules(fork_module, 0);
}

/*****************************************************************************
 * Exit dumps
 */

/*
 * Is this process the one counting into the state's slot? A vfork child (or a clone
 * sharing the memory) is not: its dump would take the parent's frames, which the parent
 * returns through, for abandoned ones.
 */
static int
owns_slot(const qprt_state_t *st)
{
    if (st->slot == UINT64_MAX)
        return 0;
    const qp_prof_hdr_t *h = (const qp_prof_hdr_t *)(uintptr_t)st->prof;
    const qp_prof_slot_t *s = (const qp_prof_slot_t *)(uintptr_t)(st->prof + h->slots_off)
        + st->slot;
    return s->pid == (uint64_t)sys3(SYS_getpid, 0, 0, 0);
}

/* After an exec returned (it failed): the dump taken before it is no exit after all. */
void
qprt_exec_failed(void)
{
    const qprt_params_t *p = &qprt_params;
    uint64_t bias = (uint64_t)(uintptr_t)p - p->self;
    qprt_state_t *st = (qprt_state_t *)(uintptr_t)(p->state + bias);
    if (st->prof == 0 || !st->dumped || !owns_slot(st))
        return;
    qp_prof_hdr_t *h = (qp_prof_hdr_t *)(uintptr_t)st->prof;
    if (st->dump_index < QP_PROF_MAX_DUMPS) {
        qp_dump_hdr_t *d = (qp_dump_hdr_t *)(uintptr_t)(st->prof + h->dumps_off
                                                         + st->dump_index * QP_PROF_DUMP_SIZE);
        __atomic_store_n(&d->valid, 2, __ATOMIC_RELEASE);
    }
    __atomic_fetch_add(&h->cancelled, 1, __ATOMIC_RELAXED);
    st->dumped = 0;
}

void
qprt_exit_dump(uint64_t *saved)
{
    const qprt_params_t *p = &qprt_params;
    uint64_t bias = (uint64_t)(uintptr_t)p - p->self;
    qprt_state_t *st = (qprt_state_t *)(uintptr_t)(p->state + bias);
    if (p->flags & QPRT_F_TRACE)
        trace_flush_all();
    if (st->prof == 0 || st->dumped || !owns_slot(st))
        return;
    st->dumped = 1;
    qp_prof_hdr_t *h = (qp_prof_hdr_t *)(uintptr_t)st->prof;
    uint64_t i = __atomic_fetch_add(&h->ndumps, 1, __ATOMIC_RELAXED);
    st->dump_index = i;
    if (i >= QP_PROF_MAX_DUMPS)
        return;
    uint8_t *slot
        = (uint8_t *)(uintptr_t)(st->prof + h->dumps_off + i * QP_PROF_DUMP_SIZE);
    qp_dump_hdr_t *d = (qp_dump_hdr_t *)slot;
    /* saved[]: the registers as the ISA's exit hook saved them (qprt_isa.h). */
    d->bias = bias;
    uint64_t rsp = dump_regs(d, saved);
    d->tid = (uint64_t)sys3(SYS_gettid, 0, 0, 0);
    /* The stack: up to the main thread's initial stack pointer, or as much as is mapped
     * (copy_mapped stops at the first unmapped page instead of faulting). */
    uint64_t len = QP_PROF_DUMP_STACK;
    if (rsp <= st->stack_top && st->stack_top - rsp < len)
        len = st->stack_top - rsp;
    long got = copy_mapped(rsp, slot + 4096, len);
    d->stack_len = got > 0 ? (uint64_t)got : 0;
    __atomic_store_n(&d->valid, 1, __ATOMIC_RELEASE);
}

#ifdef QPRT_NO_TRACE
/* The runtime without tracing (qprt_blob_plain): the drivers that count carry it. A
 * refill call cannot come (nothing traces), and the other entries do nothing. */
static void trace_start(const qprt_params_t *p, qprt_state_t *st, uint64_t *sp)
{
    (void)p;
    (void)st;
    (void)sp;
}
static void trace_flush_all(void) {}
static void trace_after_fork(void) {}
static void trace_reap(void) {}
void
qprt_trace_refill(void)
{
    __builtin_trap();
}
#else
#if !defined(__x86_64__)
#error "control-flow tracing is x86-64 only: build the runtime with -DQPRT_NO_TRACE"
#endif
/*****************************************************************************
 * Control-flow tracing (QPRT_F_TRACE; driver/drv_trace.c, base/qpt_trace_format.h)
 *
 * Each thread appends 32-bit event ids to a buffer of its own. The blob has no
 * thread-local storage, so a thread's cursor and limit live in two words of glibc's
 * thread control block, %fs:0x38 and %fs:0x40: tcbhead_t.unused_vgetcpu_cache[2],
 * which glibc (2.x, x86-64) neither reads nor writes, and which is zero in a new
 * thread's block - so a thread's first event finds cursor 0 >= limit 0 and calls
 * qprt_trace_refill, which gives it a buffer and a file PROG.trace.TID. A full buffer
 * calls it again: written out, reset. The registry (one mapping) lists the buffers.
 * glibc reuses the block of a thread that ended (its stack cache) without clearing
 * those words: the thread hook (before every pthread_create) flushes and forgets the
 * buffers of threads that ended, and clears their words; a reuse it did not see is
 * noticed at the next refill (another thread id on the same block), and the trace gets
 * QPT_TRACE_LOST there. A static program runs code before glibc sets %fs: the start
 * gives it a block of the runtime's own until then (same thread id: one buffer).
 * Exit hooks and the fini function (put in place of the dynamic linker's, which
 * __libc_start_main registers with atexit, and called after it) write every buffer and
 * QPT_TRACE_END.
 */
#include "base/qpt_trace_format.h"

#define TR_BYTES (1u << 20) /* a thread's buffer */
#define TR_MAX 1024         /* buffers at once */
#define TR_SCRATCH 4096     /* where events go when no buffer can be had (discarded) */
#define TR_SLACK 16         /* room past the limit: a value record (12 bytes) is written
                             * after the check that the cursor is below the limit; slots
                             * reserved past it are not written */
_Static_assert(TR_SLACK == QPT_TRACE_SLACK, "the snippets know the slack");

enum { SYS_tgkill = 234, SYS_arch_prctl = 158, SYS_process_vm_writev = 311,
       ARCH_SET_FS = 0x1002, ARCH_GET_FS = 0x1003, O_WRONLY_ = 1 };

typedef struct tr_buf {
    uint64_t tp;      /* the thread control block it belongs to */
    uint64_t tid;
    uint64_t data;    /* TR_BYTES bytes */
    uint64_t flushed; /* written up to here */
    int64_t fd;       /* its file, or -1 */
    uint64_t live;
} tr_buf_t;

typedef struct tr_reg {
    volatile uint32_t lock;
    uint32_t pad;
    uint64_t pid;
    uint64_t id;
    uint64_t n;       /* entries of b[] in use (live or not) */
    uint64_t secure;  /* secure execution: no symbolic link, files the effective user owns */
    char base[PATH_CAP]; /* file names: base ".trace." tid */
    uint8_t scratch[TR_SCRATCH];
    tr_buf_t b[TR_MAX];
    uint32_t pack[TR_BYTES / 4]; /* a buffer's records as written (runs counted; no
                                  * more units than the buffer's) */
} tr_reg_t;

static qprt_state_t *
tr_state(void)
{
    const qprt_params_t *p = &qprt_params;
    uint64_t bias = (uint64_t)(uintptr_t)p - p->self;
    return (qprt_state_t *)(uintptr_t)(p->state + bias);
}

static tr_reg_t *
tr_reg(void)
{
    return (tr_reg_t *)(uintptr_t)tr_state()->trace;
}

/* The registry, made on first use: code may run before the start (IFUNC resolvers, run
 * by the dynamic linker); its buffers get their files at the start. */
static tr_reg_t *
tr_reg_make(void)
{
    qprt_state_t *st = tr_state();
    if (st->trace == 0) {
        long m = sys6(SYS_mmap, 0, sizeof(tr_reg_t), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (is_err(m))
            return NULL;
        st->trace = (uint64_t)m;
        ((tr_reg_t *)(uintptr_t)m)->pid = (uint64_t)sys3(SYS_getpid, 0, 0, 0);
    }
    return (tr_reg_t *)(uintptr_t)st->trace;
}

static void
tr_lock(tr_reg_t *r)
{
    while (__atomic_exchange_n(&r->lock, 1, __ATOMIC_ACQUIRE))
        cpu_relax();
}

static void
tr_unlock(tr_reg_t *r)
{
    __atomic_store_n(&r->lock, 0, __ATOMIC_RELEASE);
}

/* The lock with every signal blocked (*OLD: the mask before): a handler that ran while
 * this thread holds it would record events, call the refill again and wait for the lock
 * forever. A signal that comes meanwhile runs once the mask is back (tr_unlock_sig). */
static void
tr_lock_sig(tr_reg_t *r, uint64_t *old)
{
    uint64_t all = ~0ull;
    *old = 0;
    sys6(SYS_rt_sigprocmask, 0 /* SIG_BLOCK */, (long)&all, (long)old, 8, 0, 0);
    tr_lock(r);
}

static void
tr_unlock_sig(tr_reg_t *r, const uint64_t *old)
{
    tr_unlock(r);
    sys6(SYS_rt_sigprocmask, 2 /* SIG_SETMASK */, (long)old, 0, 8, 0, 0);
}

static uint64_t
tp_self(void)
{
    uint64_t v;
    __asm__ volatile("mov %%fs:0, %0" : "=r"(v));
    return v;
}

static uint64_t
tcb_cur(void)
{
    uint64_t v;
    __asm__ volatile("mov %%fs:0x38, %0" : "=r"(v));
    return v;
}

static void
tcb_set(uint64_t cur, uint64_t lim)
{
    __asm__ volatile("mov %0, %%fs:0x38\n\tmov %1, %%fs:0x40" : : "r"(cur), "r"(lim) : "memory");
}

/* Copy N bytes between this process's ADDR and LOCAL (WRITE: to ADDR) with a system
 * call, which fails instead of faulting when ADDR is no longer mapped. */
static int
remote_copy(uint64_t addr, void *local, uint64_t n, int write)
{
    uint64_t liov[2] = { (uint64_t)(uintptr_t)local, n }, riov[2] = { addr, n };
    long pid = sys3(SYS_getpid, 0, 0, 0);
    long r = sys6(write ? SYS_process_vm_writev : SYS_process_vm_readv, pid, (long)liov, 1,
                  (long)riov, 1, 0);
    return r == (long)n ? 0 : -1;
}

static void
tr_write(int64_t fd, const void *p, uint64_t n)
{
    const uint8_t *c = p;
    while (fd >= 0 && n > 0) {
        long w = sys3(SYS_write, fd, (long)(uintptr_t)c, (long)n);
        if (w == -EINTR)
            continue;
        if (w <= 0)
            return;
        c += w;
        n -= (uint64_t)w;
    }
}

/* Do the files take 16-bit units, which the snippets write (QPT_TRACE_FMAGIC3)? */
static int
tr_narrow(void)
{
    return (qprt_params.flags & QPRT_F_TRACE16) != 0;
}

/* Append word X to O[*K]: as it is, or in 16-bit units (O as uint16_t[]; *K counts
 * units). A value record's marker says so with VALUE: its two value words follow as
 * plain words (the units of the marker tell the reader). */
static void
tr_put(void *o, uint64_t *k, uint32_t x, int narrow, int value)
{
    if (!narrow) {
        ((uint32_t *)o)[(*k)++] = x;
        return;
    }
    uint16_t *u = o;
    if (value && x >= QPT_TRACE_VAL && x <= QPT_TRACE_JUMP)
        u[(*k)++] = (uint16_t)(QPT_TRACE_U16_VAL + (x - QPT_TRACE_VAL));
    else if (x < QPT_TRACE_U16_LONG)
        u[(*k)++] = (uint16_t)x;
    else if (x < QPT_TRACE_U16_MAXEVENTS) {
        u[(*k)++] = (uint16_t)(QPT_TRACE_U16_LONG + (x >> 16));
        u[(*k)++] = (uint16_t)x;
    } else if (x > QPT_TRACE_REPEAT
               && x - QPT_TRACE_REPEAT <= QPT_TRACE_U16_RAW - QPT_TRACE_U16_REPEAT)
        u[(*k)++] = (uint16_t)(QPT_TRACE_U16_REPEAT + (x - QPT_TRACE_REPEAT - 1));
    else if (x == QPT_TRACE_EMPTY)
        u[(*k)++] = QPT_TRACE_U16_EMPTY;
    else if (x == QPT_TRACE_LOST)
        u[(*k)++] = QPT_TRACE_U16_LOST;
    else if (x == QPT_TRACE_END)
        u[(*k)++] = QPT_TRACE_U16_END;
    else {
        u[(*k)++] = QPT_TRACE_U16_RAW;
        u[(*k)++] = (uint16_t)x;
        u[(*k)++] = (uint16_t)(x >> 16);
    }
}

/* A value word (after a marker put with VALUE): two units, or a word. */
static void
tr_put_value(void *o, uint64_t *k, uint32_t x, int narrow)
{
    if (!narrow) {
        ((uint32_t *)o)[(*k)++] = x;
        return;
    }
    uint16_t *u = o;
    u[(*k)++] = (uint16_t)x;
    u[(*k)++] = (uint16_t)(x >> 16);
}

/* Append run count N (>= 1 more times) to units O[*K]. */
static void
tr_put_repeat(uint16_t *o, uint64_t *k, uint64_t n)
{
    if (n <= QPT_TRACE_U16_RAW - QPT_TRACE_U16_REPEAT) {
        o[(*k)++] = (uint16_t)(QPT_TRACE_U16_REPEAT + n - 1);
        return;
    }
    uint32_t x = QPT_TRACE_REPEAT + (uint32_t)n;
    o[(*k)++] = QPT_TRACE_U16_RAW;
    o[(*k)++] = (uint16_t)x;
    o[(*k)++] = (uint16_t)(x >> 16);
}

typedef uint64_t tr_u64_any __attribute__((aligned(1), may_alias));
#define TR_LANES(x) (0x0001000100010001ull * (uint64_t)(x)) /* X in each 16-bit lane */

/*
 * The units the snippets wrote at V (QPT_TRACE_FMAGIC3), as the file takes them, into O:
 * a run of equal records as one and a count. Records start below unit N and end by
 * unit ALL (N <= ALL). Returns the units put in O (never more than ALL). Most of a
 * buffer is events of one unit, none equal to the one before: those go four at a time,
 * copied as they are after one test of the four (no unit at or above
 * QPT_TRACE_U16_LONG, none equal to the one before it); the others one at a time.
 */
static uint64_t __attribute__((noinline, optimize("O2")))
tr_pack16(uint16_t *o, const uint16_t *v, uint64_t n, uint64_t all)
{
    const uint16_t *p = v, *stop = v + n, *end = v + all;
    uint16_t *w = o;
    _Static_assert(sizeof(uint64_t) == sizeof(unsigned long long), "ctzll on 64 bits");
    /* The unit put last when a repeat count may follow it (an event, EMPTY), else END,
     * which no record equals. */
    uint64_t last = QPT_TRACE_U16_END;
    /* The fast stretch runs while four units start below N. */
    const uint16_t *fast = n >= 4 ? v + n - 3 : v;
    while (p < stop) {
        /* Four units that are all events below 0x8000 (QPT_TRACE_U16_LONG and more, and
         * a few events, have bit 15 set) with no two equal side by side (nor the first
         * equal to LAST) are put as they are. `same`: bit 15 of a lane set when its unit
         * equals the one before (a lane of d is 0), exact in the lowest such lane. The
         * lowest lane that stops is exact: the units below it go as they are, and the
         * one there goes the slow way. */
        uint64_t top = last << 48;
        while (p < fast) {
            uint64_t q = *(const tr_u64_any *)p, d = q;
            __asm__("shldq $16, %1, %0" : "+r"(d) : "r"(top)); /* q << 16 | top >> 48 */
            d ^= q;
            uint64_t stops = (((d - TR_LANES(1)) & ~d) | q) & TR_LANES(0x8000);
            *(tr_u64_any *)w = q; /* (O has room: W never passes P) */
            if (stops != 0) {
                uint64_t lanes = (uint64_t)__builtin_ctzll(stops) >> 4;
                top = lanes > 0 ? q << (16 * (4 - lanes)) : top;
                w += lanes;
                p += lanes;
                break;
            }
            w += 4;
            p += 4;
            top = q;
        }
        last = top >> 48;
        if (p >= stop)
            break;
        uint64_t u = *p;
        if (u == last) { /* a run of the unit put last: its count */
            uint64_t max = QPT_TRACE_REPEAT_MAX - 1;
            const uint16_t *r = p + 1;
            const uint16_t *rstop = (uint64_t)(stop - p) > max ? p + max : stop;
            while (rstop - r >= 4 && *(const tr_u64_any *)r == TR_LANES(u))
                r += 4;
            while (r < rstop && *r == u)
                r++;
            uint64_t k = 0;
            tr_put_repeat(w, &k, (uint64_t)(r - p));
            w += k;
            p = r;
            last = QPT_TRACE_U16_END;
            continue;
        }
        if (u < QPT_TRACE_U16_LONG || u == QPT_TRACE_U16_EMPTY) {
            *w++ = (uint16_t)u;
            p++;
            last = u;
            continue;
        }
        last = QPT_TRACE_U16_END;
        uint64_t len = u < QPT_TRACE_U16_REPEAT ? 2
                     : u >= QPT_TRACE_U16_VAL
                         && u <= QPT_TRACE_U16_VAL + (QPT_TRACE_JUMP - QPT_TRACE_VAL)
                     ? 5 : 0;
        if (len == 0 || (uint64_t)(end - p) < len) {
            /* No unit the snippets write, or a record cut: say so, never silently. */
            *w++ = QPT_TRACE_U16_LOST;
            p += len ? len : 1;
            continue;
        }
        for (uint64_t m = 0; m < len; m++)
            *w++ = p[m];
        p += len;
        if (len == 5)
            continue;
        /* A long event: a run of it, pair by pair. */
        uint64_t c = 0;
        while (p < stop && end - p >= 2 && c < QPT_TRACE_REPEAT_MAX - 1 && p[0] == w[-2]
               && p[1] == w[-1]) {
            p += 2;
            c++;
        }
        if (c > 0) {
            uint64_t k = 0;
            tr_put_repeat(w, &k, c);
            w += k;
        }
    }
    return (uint64_t)(w - o);
}

/* Write B's records up to CUR, a run of equal ones as one and a QPT_TRACE_REPEAT count
 * (packed into the registry's buffer: B's own may be another thread's, still writing;
 * no larger than B's records). */
static void tr_mark(tr_buf_t *b, uint32_t what);

static void
tr_flush(tr_buf_t *b, uint64_t cur)
{
    if (cur <= b->flushed)
        return;
    /* The cursor's furthest: a value record (12 bytes) that starts just below the limit
     * ends 8 bytes past it, and the next reservation (12 more) finds it full. Past
     * that the cursor is not this buffer's: say the records are lost, never silently. */
    if (cur > b->data + TR_BYTES + TR_SLACK) {
        tr_mark(b, QPT_TRACE_LOST);
        b->flushed = cur;
        return;
    }
    uint32_t *o = tr_reg()->pack;
    const uint32_t *v = (const uint32_t *)(uintptr_t)b->flushed;
    uint64_t k = 0;
    /* Slots reserved at or past the limit were never written (their records went to
     * the next buffer): the records that start below it, and no further (a stale word
     * past it must not extend a run; the cursor may lie past the mapping). */
    uint64_t lim = b->data + TR_BYTES - TR_SLACK;
    uint64_t end = (cur < b->data + TR_BYTES ? cur : b->data + TR_BYTES) - b->flushed;
    uint64_t below = b->flushed < lim ? lim - b->flushed : 0;
    if (below > end)
        below = end;
    if (tr_narrow()) {
        k = tr_pack16((uint16_t *)o, (const uint16_t *)v, below / 2, end / 2);
        tr_write(b->fd, o, k * 2);
        b->flushed = cur;
        return;
    }
    uint64_t all = end / 4, n = below / 4;
    for (uint64_t i = 0; i < n;) {
        uint32_t x = v[i];
        if ((x == QPT_TRACE_VAL || x == QPT_TRACE_SIGNAL || x == QPT_TRACE_FAULT
             || x == QPT_TRACE_JUMP)
            && i + 3 <= all) { /* a value record: copied as it is */
            tr_put(o, &k, x, 0, 1);
            tr_put_value(o, &k, v[i + 1], 0);
            tr_put_value(o, &k, v[i + 2], 0);
            i += 3;
            continue;
        }
        uint64_t j = i + 1;
        while (j < n && j < all && v[j] == x && j - i < QPT_TRACE_REPEAT_MAX)
            j++;
        tr_put(o, &k, x, 0, 0);
        if (j - i > 1)
            tr_put(o, &k, QPT_TRACE_REPEAT + (uint32_t)(j - i - 1), 0, 0);
        i = j;
    }
    tr_write(b->fd, o, k * 4);
    b->flushed = cur;
}

/*
 * Fill B's slots below its limit with QPT_TRACE_EMPTY before it takes records again. A
 * record reserves its slot (xadd) and writes it in the next instructions; a signal
 * handler that comes between them and fills the buffer has it written out unwritten,
 * and the interrupted record is then written into the buffer's next round, where later
 * records overwrite it. Its slot then says so (not a stale record of the round before),
 * and the regenerator reads the lost record's id in the snippet at the handler's rip.
 */
static void
tr_empty(tr_buf_t *b)
{
    if (tr_narrow()) { /* EMPTY units, one rep stosq (the slot of a record: as many) */
        uint64_t dst = b->data, cnt = (TR_BYTES - TR_SLACK) / 8;
        __asm__ volatile("rep stosq"
                         : "+D"(dst), "+c"(cnt)
                         : "a"(TR_LANES(QPT_TRACE_U16_EMPTY))
                         : "memory");
        return;
    }
    /* volatile: no call of memset, which the blob does not have */
    volatile uint64_t *v = (volatile uint64_t *)(uintptr_t)b->data;
    for (uint64_t i = 0; i < (TR_BYTES - TR_SLACK) / 8; i++)
        v[i] = (uint64_t)QPT_TRACE_EMPTY << 32 | QPT_TRACE_EMPTY;
}

static void
tr_mark(tr_buf_t *b, uint32_t what)
{
    uint32_t o[2];
    uint64_t k = 0;
    int narrow = tr_narrow();
    tr_put(o, &k, what, narrow, 0);
    tr_write(b->fd, o, k * (narrow ? 2 : 4));
}

static void tr_open_file(tr_reg_t *r, tr_buf_t *b);

/* A buffer and a file for thread TID on block TP; NULL when none can be had. */
static tr_buf_t *
tr_open(tr_reg_t *r, uint64_t tp, uint64_t tid)
{
    tr_buf_t *b = NULL;
    for (uint64_t i = 0; i < r->n && b == NULL; i++)
        if (!r->b[i].live)
            b = &r->b[i];
    if (b == NULL && r->n < TR_MAX)
        b = &r->b[r->n++];
    if (b == NULL)
        return NULL;
    long m = sys6(SYS_mmap, 0, TR_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (is_err(m))
        return NULL;
    *b = (tr_buf_t) { tp, tid, (uint64_t)m, (uint64_t)m, -1, 1 };
    tr_empty(b);
    if (r->base[0])
        tr_open_file(r, b);
    return b;
}

static void
tr_close(tr_buf_t *b)
{
    if (b->fd >= 0)
        sys3(SYS_close, b->fd, 0, 0);
    sys3(SYS_munmap, (long)b->data, TR_BYTES, 0);
    b->live = 0;
}

/* Open B's file (the registry knows its name) and write its header. */
static void
tr_open_file(tr_reg_t *r, tr_buf_t *b)
{
    char path[PATH_CAP + 40];
    size_t n = 0;
    path[0] = '\0';
    append(path, sizeof(path), &n, r->base);
    append(path, sizeof(path), &n, ".trace.");
    append_u64(path, sizeof(path), &n, b->tid);
    /* Created here (O_EXCL), never through a symbolic link. A file already there is
     * an earlier run's of the same thread id: emptied only if it is a trace of the
     * effective user, and never in a secure-execution program (the earlier run may have
     * been another user's; the file is kept and this thread's trace is not written). */
    long flags = O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW;
    long fd = sys_open(path, O_WRONLY_ | O_CREAT | O_EXCL | flags,
                   r->secure ? 0600 : 0644);
    const char *why = fd == -ELOOP ? "a symbolic link (never followed)"
                                   : "cannot create the trace";
    if (fd == -EEXIST && r->secure) {
        why = "a file of an earlier run is there (kept in secure execution)";
    } else if (fd == -EEXIST) {
        kstat_t ks;
        char magic[8];
        fd = sys_open(path, O_RDWR | flags, 0);
        why = fd == -ELOOP ? "a symbolic link (never followed)" : "cannot open the trace";
        if (fd >= 0 && (why = not_ours(fd, 0, &ks)) == NULL
            && (sys6(SYS_pread64, fd, (long)magic, 8, 0, 0, 0) != 8
                || (!mem_eq(magic, QPT_TRACE_FMAGIC, 8)
                    && !mem_eq(magic, QPT_TRACE_FMAGIC16, 8)
                    && !mem_eq(magic, QPT_TRACE_FMAGIC3, 8))))
            why = "a file that is not a trace is there (it is kept)";
        if (fd >= 0 && why == NULL && sys3(SYS_ftruncate, fd, 0, 0) < 0)
            why = "cannot empty the earlier trace";
        if (fd >= 0 && why != NULL) {
            sys3(SYS_close, fd, 0, 0);
            fd = -1;
        }
    }
    if (fd < 0) {
        warn_line(path, why, "; this thread's trace is not written\n");
        return;
    }
    b->fd = fd;
    qpt_trace_file_t h;
    mem_zero(&h, sizeof(h));
    int narrow = tr_narrow();
    mem_copy(h.magic, narrow ? QPT_TRACE_FMAGIC3 : QPT_TRACE_FMAGIC, 8);
    h.id = r->id;
    h.pid = r->pid;
    h.tid = b->tid;
    tr_write(b->fd, &h, sizeof(h));
    /* Where the program was loaded (link-time addresses + bias), for address traces. */
    const qprt_params_t *p = &qprt_params;
    uint64_t bias = (uint64_t)(uintptr_t)p - p->self;
    uint32_t rb[3];
    uint64_t k = 0;
    tr_put(rb, &k, QPT_TRACE_BIAS, narrow, 1);
    tr_put_value(rb, &k, (uint32_t)bias, narrow);
    tr_put_value(rb, &k, (uint32_t)(bias >> 32), narrow);
    tr_write(b->fd, rb, k * (narrow ? 2 : 4));
}

void
qprt_trace_refill(void)
{
    tr_reg_t *r = tr_reg_make();
    if (r == NULL) {
        /* No memory at all: the snippet would store at address 0. */
        sys3(SYS_kill, sys3(SYS_getpid, 0, 0, 0), 9, 0);
        return;
    }
    uint64_t mask;
    tr_lock_sig(r, &mask);
    uint64_t tp = tp_self(), cur = tcb_cur(), tid = (uint64_t)sys3(SYS_gettid, 0, 0, 0);
    tr_buf_t *b = NULL, *same_thread = NULL;
    for (uint64_t i = 0; i < r->n; i++) {
        if (r->b[i].live && r->b[i].tp == tp)
            b = &r->b[i];
        else if (r->b[i].live && r->b[i].tid == tid)
            same_thread = &r->b[i];
    }
    if (b != NULL && b->tid != tid) {
        /* A block reused unseen: what it holds may be partly this thread's. */
        tr_flush(b, cur);
        tr_mark(b, QPT_TRACE_LOST);
        tr_close(b);
        b = NULL;
    }
    if (b == NULL && same_thread != NULL) {
        /* The same thread on a new block (a static program's glibc set %fs). */
        b = same_thread;
        uint64_t old = 0;
        if (remote_copy(b->tp + QPT_TRACE_TCB_CUR, &old, 8, 0) == 0)
            tr_flush(b, old);
        b->tp = tp;
        cur = b->flushed;
    }
    if (b == NULL)
        b = tr_open(r, tp, tid);
    else {
        tr_flush(b, cur);
        tr_empty(b);
    }
    if (b != NULL) {
        b->flushed = b->data;
        tcb_set(b->data, b->data + TR_BYTES - TR_SLACK);
    } else {
        tcb_set((uint64_t)(uintptr_t)r->scratch,
                (uint64_t)(uintptr_t)r->scratch + TR_SCRATCH - TR_SLACK);
    }
    tr_unlock_sig(r, &mask);
}

/* Write every buffer, then QPT_TRACE_END in each file. */
static void
trace_flush_all(void)
{
    tr_reg_t *r = tr_reg();
    if (r == NULL)
        return;
    uint64_t mask;
    tr_lock_sig(r, &mask);
    uint64_t tp = tp_self();
    for (uint64_t i = 0; i < r->n; i++) {
        tr_buf_t *b = &r->b[i];
        if (!b->live)
            continue;
        uint64_t cur = 0;
        if (b->tp == tp)
            cur = tcb_cur();
        else if (remote_copy(b->tp + QPT_TRACE_TCB_CUR, &cur, 8, 0) < 0)
            cur = 0;
        tr_flush(b, cur);
        tr_mark(b, QPT_TRACE_END);
    }
    tr_unlock_sig(r, &mask);
}

/* Before a thread starts: forget the buffers of threads that ended (their control
 * blocks may be given to the new one). */
static void
trace_reap(void)
{
    tr_reg_t *r = tr_reg();
    if (r == NULL)
        return;
    uint64_t mask;
    tr_lock_sig(r, &mask);
    long pid = sys3(SYS_getpid, 0, 0, 0);
    for (uint64_t i = 0; i < r->n; i++) {
        tr_buf_t *b = &r->b[i];
        if (!b->live || sys3(SYS_tgkill, pid, (long)b->tid, 0) != -ESRCH)
            continue;
        uint64_t cur = 0, zero[2] = { 0, 0 };
        if (remote_copy(b->tp + QPT_TRACE_TCB_CUR, &cur, 8, 0) == 0) {
            tr_flush(b, cur);
            remote_copy(b->tp + QPT_TRACE_TCB_CUR, zero, 16, 1);
        }
        tr_mark(b, QPT_TRACE_END);
        tr_close(b);
    }
    tr_unlock_sig(r, &mask);
}

/* After a fork: in the child, the parent's buffers are the parent's (it writes them);
 * this thread starts a file of its own at its next event. */
static void
trace_after_fork(void)
{
    tr_reg_t *r = tr_reg();
    long pid = sys3(SYS_getpid, 0, 0, 0);
    if (r == NULL || (uint64_t)pid == r->pid)
        return;
    r->lock = 0; /* another thread of the parent may have held it */
    r->pid = (uint64_t)pid;
    for (uint64_t i = 0; i < r->n; i++)
        if (r->b[i].live)
            tr_close(&r->b[i]);
    tcb_set(0, 0);
}

/* In place of the dynamic linker's fini (atexit): it, then the buffers. */
static void
trace_fini(void)
{
    const qprt_params_t *p = &qprt_params;
    uint64_t bias = (uint64_t)(uintptr_t)p - p->self;
    qprt_state_t *st = (qprt_state_t *)(uintptr_t)(p->state + bias);
    if (st->trace_fini != 0)
        ((void (*)(void))(uintptr_t)st->trace_fini)();
    trace_flush_all();
}

static void
trace_start(const qprt_params_t *p, qprt_state_t *st, uint64_t *sp)
{
    tr_reg_t *r = tr_reg_make();
    if (r == NULL) {
        warn("trace", "no memory for the trace registry", 0);
        return;
    }
    r->id = p->id;
    /* PROG.inst.qp (or $QP_PROFILE) without ".qp". */
    size_t n = 0;
    while (st->path[n] && n + 1 < PATH_CAP)
        n++;
    if (n > 3 && mem_eq(st->path + n - 3, ".qp", 3))
        n -= 3;
    mem_copy(r->base, st->path, n);
    r->base[n] = '\0';
    r->secure = st->secure;
    for (uint64_t i = 0; i < r->n && r->base[0]; i++) /* threads that ran before */
        if (r->b[i].live && r->b[i].fd < 0)
            tr_open_file(r, &r->b[i]);
    /* The dynamic linker's fini function is in %rdx at the entry (saved by qprt_start
     * six words below the initial stack); __libc_start_main registers it with atexit. */
    st->trace_fini = sp[-6];
    sp[-6] = (uint64_t)(uintptr_t)&trace_fini;
    /* A static program's code runs before glibc sets %fs: give it a control block
     * until then (its first word points to itself, as glibc's does). */
    uint64_t fs = 0;
    if (sys3(SYS_arch_prctl, ARCH_GET_FS, (long)&fs, 0) == 0 && fs == 0) {
        long t = sys6(SYS_mmap, 0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
        if (!is_err(t)) {
            *(uint64_t *)(uintptr_t)t = (uint64_t)t;
            sys3(SYS_arch_prctl, ARCH_SET_FS, t, 0);
        }
    }
}
#endif /* QPRT_NO_TRACE */
