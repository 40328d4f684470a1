/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Part of the runtime (runtime/qprt.c includes it): the process's modules (a program
 * and its libraries, each with a runtime of its own), switchable increments made atomic
 * when threads start, the start and after fork, and the exit dumps.
 *
 * Not compiled alone: the runtime is one translation unit (see the end of qprt.c); this
 * part uses the declarations and helpers of qprt.c and of the parts before it.
 */

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
            while (leb_step(&d, &shift, *q++) && shift < 35)
                ;
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

