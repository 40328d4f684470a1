/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Entry counters in a live process. Each patched procedure entry gets a 5-byte jump to
 * its trampoline: `lock incq counter(%rip)` (flags saved around it only where the ABI
 * does not say they are dead), the original instructions it replaced, relocated with
 * arch_reloc_insn, and a jump back. A point is patched only when the CFG proves that no
 * branch lands inside the replaced bytes and no thread is inside them (pcs, and return
 * addresses found near the top of each stack for signal frames). Removal writes back
 * every original byte; the trampoline memory is unmapped unless a thread may still be
 * in it. Counters live in a memfd mapped shared into the process and into ours when the
 * process can open it, so they are read without a system call and survive its exit;
 * otherwise in anonymous memory read with process_vm_readv.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dynamic/dyn.h"

/* Bytes of a trampoline at most: flags save, counter, 5 relocated insns, restore, jump.
 */
#define TRAMP_MAX 192
/* Bytes of stack scanned above each thread's stack pointer for return addresses. */
#define STACK_SCAN (32u << 10)
/* Instructions a thread is single-stepped at most to leave a trampoline. */
#define STEP_MAX 64
#define JMP_LEN 5

typedef struct point {
    uint32_t proc;      /* procedure index in prog->procs */
    const char *name;   /* the name the procedure was chosen by (owned by the image) */
    uint64_t entry;     /* runtime address of the entry */
    uint8_t len;        /* bytes replaced (whole instructions, >= 5) */
    uint8_t ninsns;     /* instructions replaced */
    uint8_t save_flags; /* flags may be live at the entry */
    uint8_t orig[32];   /* the original bytes */
    uint8_t patch[32];  /* the bytes written over them */
    uint64_t tramp;     /* runtime address of the trampoline */
} point_t;

typedef struct refusal {
    const char *name; /* procedure name (owned by the image) */
    const char *why;  /* static text */
} refusal_t;

struct dyn_session {
    dyn_proc_t *p;          /* the process */
    const cfg_prog_t *prog; /* its executable's CFGs */
    uint64_t bias;          /* load bias (runtime - link address) */
    uint8_t *chosen;        /* per procedure: already selected or refused */
    point_t *cand;          /* selected, not yet installed */
    size_t ncand, capcand;
    point_t *pts; /* installed points */
    size_t npts;
    refusal_t *ref; /* refused procedures */
    size_t nref, capref;
    uint64_t code, code_size; /* trampoline memory in the process */
    uint64_t ctr, ctr_size;   /* counter memory in the process */
    int memfd;                /* our end of shared counters, or -1 */
    volatile uint64_t *local; /* counters mapped here (shared), or NULL */
    uint64_t *last;           /* last sampled values (not shared) */
    int installed;            /* patches are in */
    int atomic;               /* lock prefix on increments */
};

static int
refuse(dyn_session_t *s, uint32_t proc, const char *why)
{
    if (s->nref == s->capref) {
        size_t cap = s->capref ? 2 * s->capref : 16;
        refusal_t *n = realloc(s->ref, cap * sizeof(*n));
        if (n == NULL)
            return QP_ENOMEM;
        s->ref = n;
        s->capref = cap;
    }
    s->ref[s->nref].name = s->prog->procs[proc].name;
    s->ref[s->nref++].why = why;
    return 0;
}

int
dyn_session_create(
    dyn_proc_t *p, const cfg_prog_t *prog, uint64_t bias, dyn_session_t **out /*OUT*/)
{
    dyn_session_t *s;

    if (p == NULL || prog == NULL || out == NULL)
        return QP_EINVAL;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return QP_ENOMEM;
    s->chosen = calloc(prog->nprocs ? prog->nprocs : 1, 1);
    if (s->chosen == NULL) {
        free(s);
        return QP_ENOMEM;
    }
    s->p = p;
    s->prog = prog;
    s->bias = bias;
    s->memfd = -1;
    s->atomic = 1;
    *out = s;
    return 0;
}

void
dyn_session_set_atomic(dyn_session_t *s, int atomic)
{
    if (s != NULL)
        s->atomic = atomic != 0;
}

/*****************************************************************************
 * What the file proves: the replaced bytes are one block's, no branch lands inside
 */

/* Why procedure I cannot get an entry counter, or NULL; fills *PT. */
static const char *
check_proc(const dyn_session_t *s, uint32_t i, point_t *pt /*OUT*/)
{
    const cfg_prog_t *prog = s->prog;
    const cfg_proc_t *pr = &prog->procs[i];
    const cfg_block_t *b;
    const uint8_t *bytes;
    size_t avail, len = 0;

    if (pr->flags & CFG_PROC_FRAGMENT)
        return "a cold fragment of another procedure, not an entry";
    if (pr->unsafe != NULL)
        return "the analysis could not prove its code safe";
    if (pr->nind_unresolved > 0)
        return "an indirect jump with unknown targets might land in its first bytes";
    if (pr->nblocks == 0)
        return "no code";
    b = &prog->blocks[pr->block];
    if (b->start != pr->entry)
        return "its entry does not start a block";
    if (b->npred > 0)
        return "a branch inside the procedure goes back to its entry";
    if (i + 1 < prog->nprocs && prog->procs[i + 1].entry < pr->entry + JMP_LEN)
        return "another procedure starts within 5 bytes of its entry";
    bytes = cfg_image_ptr(prog->img, pr->entry, &avail);
    if (bytes == NULL)
        return "no bytes in the file";
    memset(pt, 0, sizeof(*pt));
    pt->proc = i;
    pt->entry = pr->entry + s->bias;
    while (len < JMP_LEN) {
        arch_insn_t in;
        if (arch_decode(bytes + len, avail - len, pt->entry + len, &in) < 0)
            return "an instruction at its entry does not decode";
        if (pr->entry + len + in.len > b->end)
            return "its entry block is shorter than the 5-byte jump";
        if (in.flags & ARCH_F_PRIV)
            return "a privileged instruction at its entry";
        switch (in.kind) {
        case ARCH_KIND_SEQ:
        case ARCH_KIND_NOP:
        case ARCH_KIND_ENDBR:
        case ARCH_KIND_JMP:
        case ARCH_KIND_JCC:
        case ARCH_KIND_JMP_IND:
        case ARCH_KIND_RET: break;
        case ARCH_KIND_CALL:
        case ARCH_KIND_CALL_IND:
            return "a call in its first 5 bytes (the return address would be in the "
                   "trampoline)";
        case ARCH_KIND_SYSCALL: return "a system call in its first 5 bytes";
        default: return "an instruction in its first 5 bytes cannot be moved";
        }
        if ((in.kind == ARCH_KIND_JMP || in.kind == ARCH_KIND_JCC)
            && in.target >= pt->entry && in.target < pt->entry + len + in.len)
            return "a branch in its first bytes targets them";
        len += in.len;
        pt->ninsns++;
    }
    if (len > sizeof(pt->orig))
        return "its first instructions are too long";
    pt->len = (uint8_t)len;
    memcpy(pt->orig, bytes, len);
    /* At an ABI entry (called, or named as a function) the flags are dead. */
    pt->save_flags = (pr->sources
                         & (CFG_SRC_SYMBOL | CFG_SRC_EH_FRAME | CFG_SRC_CALL
                             | CFG_SRC_ENTRY | CFG_SRC_INIT | CFG_SRC_PLT))
        == 0;
    return NULL;
}

/*
 * The name of procedure PR that matches PATTERN: its own, or another function symbol at
 * its entry (an alias: `malloc` for `__libc_malloc`); NULL when none does.
 */
static const char *
match_name(const cfg_image_t *img, const cfg_proc_t *pr, const char *pattern)
{
    size_t lo = 0, hi = img->nsymbols;

    if (fnmatch(pattern, pr->name, 0) == 0)
        return pr->name;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (img->symbols[mid].addr < pr->entry)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < img->nsymbols && img->symbols[lo].addr == pr->entry; lo++) {
        const cfg_symbol_t *sym = &img->symbols[lo];
        if ((sym->kind == CFG_SYM_FUNC || sym->kind == CFG_SYM_IFUNC)
            && fnmatch(pattern, sym->name, 0) == 0)
            return sym->name;
    }
    return NULL;
}

int
dyn_session_select(
    dyn_session_t *s, const char *pattern, uint32_t flags, unsigned *nmatch /*OUT*/)
{
    unsigned k = 0;

    if (s == NULL || (pattern == NULL && !(flags & DYN_SEL_ALL)) || s->installed)
        return QP_EINVAL;
    for (uint32_t i = 0; i < s->prog->nprocs; i++) {
        const cfg_proc_t *pr = &s->prog->procs[i];
        const char *why;
        point_t pt;
        const char *name = pr->name;
        if (!(flags & DYN_SEL_ALL)
            && (name = match_name(s->prog->img, pr, pattern)) == NULL)
            continue;
        if ((flags & DYN_SEL_ALL) && (pr->flags & CFG_PROC_FRAGMENT))
            continue;
        k++;
        if (s->chosen[i])
            continue;
        s->chosen[i] = 1;
        why = check_proc(s, i, &pt);
        pt.name = name;
        if (why != NULL) {
            QP_CHECK(refuse(s, i, why));
            continue;
        }
        if (s->ncand == s->capcand) {
            size_t cap = s->capcand ? 2 * s->capcand : 64;
            point_t *n = realloc(s->cand, cap * sizeof(*n));
            if (n == NULL)
                return QP_ENOMEM;
            s->cand = n;
            s->capcand = cap;
        }
        s->cand[s->ncand++] = pt;
    }
    if (nmatch != NULL)
        *nmatch = k;
    return 0;
}

/*****************************************************************************
 * What the process proves: nobody is inside the bytes, and they are the file's
 */

static int
u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/*
 * The pcs of every thread and every 8-byte word in the top STACK_SCAN bytes of each stack
 * (saved pcs of signal frames, return addresses), sorted, into *OUT.
 */
static int
thread_words(dyn_session_t *s, uint64_t **out /*OUT*/, size_t *n /*OUT*/)
{
    dyn_thread_info_t *ti;
    size_t nt = 0, k = 0;
    uint64_t *w;

    QP_CHECK(dyn_proc_threads(s->p, NULL, 0, &nt));
    ti = calloc(nt ? nt : 1, sizeof(*ti));
    w = malloc((nt ? nt : 1) * (STACK_SCAN / 8 + 1) * sizeof(*w));
    if (ti == NULL || w == NULL) {
        free(ti);
        free(w);
        return QP_ENOMEM;
    }
    if (dyn_proc_threads(s->p, ti, nt, &nt) < 0) {
        free(ti);
        free(w);
        return QP_EIO;
    }
    for (size_t i = 0; i < nt; i++) {
        uint64_t sp = ti[i].sp & ~7ull;
        w[k++] = ti[i].pc;
        /* Page by page: the stack may end before STACK_SCAN bytes. */
        for (uint64_t off = 0; off < STACK_SCAN;) {
            uint64_t chunk = 4096 - ((sp + off) & 4095);
            if (chunk > STACK_SCAN - off)
                chunk = STACK_SCAN - off;
            if (dyn_proc_read(s->p, sp + off, &w[k], chunk) < 0)
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

/* True when a word of the sorted W lies in [LO, HI). */
static int
any_in(const uint64_t *w, size_t n, uint64_t lo, uint64_t hi)
{
    size_t i = cfg_u64_lower_bound(w, n, lo);
    return i < n && w[i] < hi;
}

/*****************************************************************************
 * Counters
 */

/* Shared counters: a memfd of ours that the process opens through /proc. */
static int
counters_shared(dyn_session_t *s, size_t size)
{
    char path[96];
    uint64_t a[6] = { 0 };
    int64_t rfd, r;
    void *m;
    int rc;

    s->memfd = (int)syscall(SYS_memfd_create, "qpt-dyn-counters", 1u /* MFD_CLOEXEC */);
    if (s->memfd < 0)
        return QP_EIO;
    if (ftruncate(s->memfd, (off_t)size) < 0)
        return QP_EIO;
    m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, s->memfd, 0);
    if (m == MAP_FAILED)
        return QP_EIO;
    s->local = m;
    /* The path goes into the (not yet used) trampoline memory for the remote open. */
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getpid(), s->memfd);
    QP_CHECK(dyn_proc_write(s->p, s->code, path, strlen(path) + 1));
    a[0] = (uint64_t)(int64_t)AT_FDCWD;
    a[1] = s->code;
    a[2] = O_RDWR | O_CLOEXEC;
    QP_CHECK(dyn_proc_syscall(s->p, SYS_openat, a, &rfd));
    if (rfd < 0) {
        errno = (int)-rfd;
        return QP_EIO;
    }
    rc = dyn_space_map_near(s->p, s->code, s->code + s->code_size, size,
        ED_PROT_R | ED_PROT_W, (int)rfd, &s->ctr);
    memset(a, 0, sizeof(a));
    a[0] = (uint64_t)rfd;
    dyn_proc_syscall(s->p, SYS_close, a, &r);
    return rc;
}

static void
counters_local_free(dyn_session_t *s)
{
    if (s->local != NULL)
        munmap((void *)s->local, s->ctr_size);
    if (s->memfd >= 0)
        close(s->memfd);
    s->local = NULL;
    s->memfd = -1;
}

static int
counters_alloc(dyn_session_t *s, size_t n)
{
    size_t size = (n * 8 + 4095) & ~(size_t)4095;

    s->ctr_size = size;
    s->last = calloc(n ? n : 1, sizeof(uint64_t));
    if (s->last == NULL)
        return QP_ENOMEM;
    if (counters_shared(s, size) == 0)
        return 0;
    counters_local_free(s);
    return dyn_space_ops.alloc_near(
        s->p, s->code, s->code + s->code_size, size, ED_PROT_R | ED_PROT_W, &s->ctr);
}

/*****************************************************************************
 * Installing
 */

/* Emit the trampoline of PT at address AT into OUT; returns its size or QP_E*. */
static int
emit_tramp(const dyn_session_t *s, const point_t *pt, uint64_t at, uint64_t counter,
    uint8_t *out, size_t cap)
{
    size_t k = 0, off = 0;
    int n;

    if (pt->save_flags) {
        QP_CHECK(n = arch_emit_flags_save(out + k, cap - k));
        k += (size_t)n;
    }
    QP_CHECK(n = arch_emit_counter_inc(at + k, counter, s->atomic, out + k, cap - k));
    k += (size_t)n;
    if (pt->save_flags) {
        QP_CHECK(n = arch_emit_flags_restore(out + k, cap - k));
        k += (size_t)n;
    }
    for (unsigned i = 0; i < pt->ninsns; i++) {
        arch_insn_t in;
        QP_CHECK(arch_decode(pt->orig + off, pt->len - off, pt->entry + off, &in));
        QP_CHECK(n = arch_reloc_insn(
                     pt->orig + off, &in, at + k, in.target, 0, out + k, cap - k));
        k += (size_t)n;
        off += in.len;
    }
    QP_CHECK(n = arch_emit_jmp(at + k, pt->entry + pt->len, out + k, cap - k));
    k += (size_t)n;
    return (int)k;
}

static int
point_cmp(const void *a, const void *b)
{
    const point_t *x = a, *y = b;
    return x->entry < y->entry ? -1 : x->entry > y->entry;
}

/* The candidate whose replaced bytes hold PC after their first, or NULL (cand sorted). */
static const point_t *
cand_inside(const dyn_session_t *s, uint64_t pc)
{
    size_t lo = 0, hi = s->ncand;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->cand[mid].entry < pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* s->cand[lo - 1] is the last entry below PC. */
    if (lo > 0 && pc < s->cand[lo - 1].entry + s->cand[lo - 1].len)
        return &s->cand[lo - 1];
    return NULL;
}

/*
 * A thread stopped inside the bytes a jump would replace is single-stepped until it is
 * out of them (a few instructions); one that cannot be is left, and its point refused.
 */
static void
step_threads_out(dyn_session_t *s)
{
    dyn_thread_info_t *ti;
    size_t nt = 0;

    if (dyn_proc_threads(s->p, NULL, 0, &nt) < 0 || nt == 0)
        return;
    ti = calloc(nt, sizeof(*ti));
    if (ti == NULL || dyn_proc_threads(s->p, ti, nt, &nt) < 0) {
        free(ti);
        return;
    }
    for (size_t i = 0; i < nt; i++) {
        const point_t *pt;
        for (int k = 0; k < 4 && (pt = cand_inside(s, ti[i].pc)) != NULL; k++) {
            size_t n1 = 0;
            if (dyn_proc_step_out(s->p, ti[i].tid, pt->entry + 1, pt->entry + pt->len, 8)
                < 0)
                break;
            /* Where every thread is now (same order): it may be in another's bytes. */
            if (dyn_proc_threads(s->p, ti, nt, &n1) < 0 || n1 != nt)
                break;
        }
    }
    free(ti);
}

int
dyn_session_install(dyn_session_t *s)
{
    uint64_t *w = NULL, lo = UINT64_MAX, hi = 0;
    size_t nw = 0, k = 0;
    uint8_t *code = NULL;
    uint64_t at;
    int rc;

    if (s == NULL || s->installed || !dyn_proc_is_stopped(s->p))
        return QP_EINVAL;
    qsort(s->cand, s->ncand, sizeof(*s->cand), point_cmp);
    step_threads_out(s);
    QP_CHECK(thread_words(s, &w, &nw));
    s->pts = calloc(s->ncand ? s->ncand : 1, sizeof(*s->pts));
    if (s->pts == NULL) {
        free(w);
        return QP_ENOMEM;
    }
    for (size_t i = 0; i < s->ncand; i++) {
        point_t *pt = &s->cand[i];
        uint8_t mem[32];
        if (any_in(w, nw, pt->entry + 1, pt->entry + pt->len)) {
            QP_CHECK(refuse(s, pt->proc,
                "a thread is inside its first bytes (pc or "
                "signal frame): try again"));
            continue;
        }
        if (dyn_proc_read(s->p, pt->entry, mem, pt->len) < 0
            || memcmp(mem, pt->orig, pt->len) != 0) {
            QP_CHECK(refuse(s, pt->proc,
                "its code in memory differs from the file "
                "(patched already?)"));
            continue;
        }
        s->pts[k++] = *pt;
        lo = pt->entry < lo ? pt->entry : lo;
        hi = pt->entry + pt->len > hi ? pt->entry + pt->len : hi;
    }
    free(w);
    s->npts = k;
    if (k == 0) {
        s->installed = 1;
        return 0;
    }
    s->code_size = (k * TRAMP_MAX + 4095) & ~(uint64_t)4095;
    rc = dyn_space_ops.alloc_near(
        s->p, lo, hi, s->code_size, ED_PROT_R | ED_PROT_X, &s->code);
    if (rc < 0)
        return rc;
    if ((rc = counters_alloc(s, k)) < 0)
        goto fail;
    code = calloc(1, s->code_size);
    if (code == NULL) {
        rc = QP_ENOMEM;
        goto fail;
    }
    /* Trampolines, packed; a point whose code cannot be relocated is refused. */
    at = 0;
    k = 0;
    for (size_t i = 0; i < s->npts; i++) {
        point_t *pt = &s->pts[i];
        int n = emit_tramp(
            s, pt, s->code + at, s->ctr + 8 * k, code + at, s->code_size - at);
        if (n < 0) {
            if ((rc = refuse(s, pt->proc,
                     "its first instructions cannot be relocated "
                     "to the trampoline"))
                < 0)
                goto fail;
            continue;
        }
        pt->tramp = s->code + at;
        at += (uint64_t)n;
        s->pts[k++] = *pt;
    }
    s->npts = k;
    if ((rc = dyn_proc_write(s->p, s->code, code, s->code_size)) < 0)
        goto fail;
    /* The entries, last: until here the process is unchanged but for new memory. */
    for (size_t i = 0; i < s->npts; i++) {
        point_t *pt = &s->pts[i];
        if ((rc = arch_emit_jmp(pt->entry, pt->tramp, pt->patch, sizeof(pt->patch))) < 0)
            goto undo;
        arch_emit_nops(
            pt->len - JMP_LEN, pt->patch + JMP_LEN, sizeof(pt->patch) - JMP_LEN);
        if ((rc = dyn_proc_write(s->p, pt->entry, pt->patch, pt->len)) < 0) {
            /* Take back what is in: every patch before this one. */
            s->npts = i;
            goto undo;
        }
    }
    free(code);
    s->installed = 1;
    return 0;
undo:
    for (size_t i = 0; i < s->npts; i++)
        dyn_proc_write(s->p, s->pts[i].entry, s->pts[i].orig, s->pts[i].len);
fail : {
    int saved = errno;
    free(code);
    if (s->ctr != 0)
        dyn_space_free(s->p, s->ctr, s->ctr_size);
    dyn_space_free(s->p, s->code, s->code_size);
    counters_local_free(s);
    s->code = s->ctr = 0;
    s->npts = 0;
    errno = saved;
}
    return rc;
}

size_t
dyn_session_npoints(const dyn_session_t *s)
{
    return s ? s->npts : 0;
}

const char *
dyn_session_point(const dyn_session_t *s, size_t i, uint64_t *addr /*OUT*/)
{
    if (s == NULL || i >= s->npts)
        return NULL;
    if (addr != NULL)
        *addr = s->pts[i].entry;
    return s->pts[i].name;
}

int
dyn_session_shared(const dyn_session_t *s)
{
    return s != NULL && s->local != NULL;
}

int
dyn_session_sample(dyn_session_t *s, uint64_t *counts /*OUT*/)
{
    int rc = 0;

    if (s == NULL || (counts == NULL && s->npts != 0))
        return QP_EINVAL;
    if (s->npts == 0)
        return 0;
    if (s->local != NULL) {
        for (size_t i = 0; i < s->npts; i++)
            s->last[i] = __atomic_load_n(&s->local[i], __ATOMIC_RELAXED);
    } else if (s->ctr != 0 && s->installed) {
        rc = dyn_proc_read(s->p, s->ctr, s->last, s->npts * 8);
    }
    memcpy(counts, s->last, s->npts * sizeof(*counts));
    return rc;
}

/*****************************************************************************
 * Removing
 */

int
dyn_session_remove(dyn_session_t *s, int *leaked /*OUT*/)
{
    dyn_thread_info_t *ti = NULL;
    uint64_t *w = NULL;
    size_t nt = 0, nw = 0;
    int rc = 0, keep = 0;

    if (leaked != NULL)
        *leaked = 0;
    if (s == NULL || !dyn_proc_is_stopped(s->p))
        return QP_EINVAL;
    if (!s->installed || s->code == 0) {
        s->installed = 0;
        return 0;
    }
    /* Every entry back first: threads in a trampoline jump back into original code. */
    for (size_t i = 0; i < s->npts; i++) {
        point_t *pt = &s->pts[i];
        uint8_t mem[32];
        if (dyn_proc_read(s->p, pt->entry, mem, pt->len) == 0
            && memcmp(mem, pt->patch, pt->len) != 0)
            continue; /* someone else changed it since: leave it alone */
        if (dyn_proc_write(s->p, pt->entry, pt->orig, pt->len) < 0 && rc == 0)
            rc = QP_EIO;
    }
    /* Threads inside a trampoline are stepped out (no calls, no loops there). */
    if (dyn_proc_threads(s->p, NULL, 0, &nt) == 0 && nt > 0
        && (ti = calloc(nt, sizeof(*ti))) != NULL
        && dyn_proc_threads(s->p, ti, nt, &nt) == 0) {
        for (size_t i = 0; i < nt; i++)
            if (ti[i].pc >= s->code && ti[i].pc < s->code + s->code_size
                && dyn_proc_step_out(
                       s->p, ti[i].tid, s->code, s->code + s->code_size, STEP_MAX)
                    < 0)
                keep = 1;
    } else {
        keep = 1;
    }
    free(ti);
    /* A signal frame or return address pointing into the trampolines keeps them. */
    if (!keep && thread_words(s, &w, &nw) == 0)
        keep = any_in(w, nw, s->code, s->code + s->code_size);
    else
        keep = 1;
    free(w);
    dyn_session_sample(s, s->last);
    if (!keep) {
        dyn_space_free(s->p, s->code, s->code_size);
        dyn_space_free(s->p, s->ctr, s->ctr_size);
    } else if (leaked != NULL) {
        *leaked = 1;
    }
    s->installed = 0;
    return rc;
}

size_t
dyn_session_nrefused(const dyn_session_t *s)
{
    return s ? s->nref : 0;
}

const char *
dyn_session_refusal(const dyn_session_t *s, size_t i, const char **why /*OUT*/)
{
    if (s == NULL || i >= s->nref)
        return NULL;
    if (why != NULL)
        *why = s->ref[i].why;
    return s->ref[i].name;
}

void
dyn_session_destroy(dyn_session_t *s)
{
    if (s == NULL)
        return;
    counters_local_free(s);
    free(s->last);
    free(s->pts);
    free(s->cand);
    free(s->ref);
    free(s->chosen);
    free(s);
}
