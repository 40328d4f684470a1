/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Part of the runtime (runtime/qprt.c includes it): control-flow tracing
 * (QPRT_F_TRACE), or its empty entries in the runtime without it (QPRT_NO_TRACE).
 *
 * Not compiled alone: the runtime is one translation unit (see the end of qprt.c); this
 * part uses the declarations and helpers of qprt.c and of the parts before it.
 */

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
