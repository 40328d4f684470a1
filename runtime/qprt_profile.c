/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Part of the runtime (runtime/qprt.c includes it): the profile file (its path,
 * opening or creating it, checking that it belongs to this rewrite) and the slots of
 * counters that runs claim in it.
 *
 * Not compiled alone: the runtime is one translation unit (see the end of qprt.c); this
 * part uses the declarations and helpers of qprt.c and of the parts before it.
 */

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

