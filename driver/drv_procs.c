/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Processes and threads: where the program may fork (a forked child must move to
 * counters of its own before it counts, so the runtime's fork hook goes right after
 * every call or system call that may have forked), and whether it may run its code in
 * several threads at once (plain increments of shared counters then lose counts, so
 * counters are locked by default there).
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"
#include "patch/patch.h"

enum {
    NR_CLONE = 56, /* x86-64 system call numbers */
    NR_FORK = 57,
    NR_CLONE3 = 435,
    FLAG_CLONE_VM = 0x100,
};

/* NAME up to an "@" (fork@plt, pthread_create@GLIBC_2.34): its length. */
static size_t
base_len(const char *name)
{
    const char *at = strchr(name, '@');
    return at != NULL ? (size_t)(at - name) : strlen(name);
}

/* Do NAME and the non-empty WORD differ in their first two characters, so that NAME
 * neither is WORD nor starts with it? (Most names fail here, before any length is
 * measured: cc1's qp rewrite asks 883,000 times, 0.36 G instructions in all.) */
static int
differs_early(const char *name, const char *word)
{
    return word[0] != name[0] || (word[1] != '\0' && word[1] != name[1]);
}

/* NAME (without a version or @plt) equals one of NAMES, or starts with one of PREFIXES
 * (none of them empty). */
static int
name_matches(const char *name, const char *const *names, const char *const *prefixes)
{
    if (name == NULL)
        return 0;
    size_t n = SIZE_MAX; /* base_len(NAME), once a word is not ruled out early */
    for (; names && *names; names++) {
        if (differs_early(name, *names))
            continue;
        n = n == SIZE_MAX ? base_len(name) : n;
        if (strlen(*names) == n && strncmp(name, *names, n) == 0)
            return 1;
    }
    for (; prefixes && *prefixes; prefixes++) {
        if (differs_early(name, *prefixes))
            continue;
        n = n == SIZE_MAX ? base_len(name) : n;
        if (strlen(*prefixes) <= n && strncmp(name, *prefixes, strlen(*prefixes)) == 0)
            return 1;
    }
    return 0;
}

int
drv_name_in(const char *name, const char *const *names)
{
    size_t n = strlen(name);
    if (n > 4 && strcmp(name + n - 4, "@plt") == 0)
        n -= 4;
    for (; *names; names++)
        if (strlen(*names) == n && strncmp(name, *names, n) == 0)
            return 1;
    return 0;
}

/*
 * Functions after whose return the caller may be a new process: fork itself, the
 * wrappers of daemon() and forkpty(), and syscall() (SYS_fork). vfork, posix_spawn,
 * system and popen are not here: their children share the parent's memory until they
 * exec, or run no code of the program.
 */
static const char *const fork_names[]
    = { "fork", "_Fork", "__fork", "__libc_fork", "daemon", "forkpty", "syscall", NULL };

/* Functions that start threads, which may run the program's code. */
static const char *const thread_names[] = { "pthread_create", "__pthread_create_2_1",
    "thrd_create", "uv_thread_create", "clone", "__clone", "__clone2", "__clone3", NULL };
static const char *const thread_prefixes[] = {
    "GOMP_parallel",
    "GOMP_teams",
    "__kmpc_fork",
    "g_thread_new",
    "g_thread_try_new",
    "g_thread_pool_new",
    "_ZNSt6thread", /* std::thread */
    NULL,
};

int
drv_is_fork_name(const char *name)
{
    return name_matches(name, fork_names, NULL);
}

int
drv_syscall_may_fork(long nr)
{
    /* An unknown number may be any of them. */
    return nr < 0 || nr == NR_CLONE || nr == NR_FORK || nr == NR_CLONE3;
}

int
drv_is_thread_name(const char *name)
{
    return name_matches(name, thread_names, thread_prefixes);
}

/* The tail calls between PROG's procedures (but from fragments): caller and callee
 * pairs in *OUT (malloc'd), *N of them; callees looked up in ENTRIES. 0 or QP_ENOMEM. */
static int
tail_call_pairs(const cfg_prog_t *prog, const drv_entries_t *entries, uint32_t **out, size_t *n)
{
    uint32_t *v = NULL;
    size_t cap = 0;
    *n = 0;
    for (uint32_t i = 0; i < prog->nprocs; i++) {
        const cfg_proc_t *p = &prog->procs[i];
        if (p->flags & CFG_PROC_FRAGMENT)
            continue;
        for (uint32_t k = 0; k < p->nblocks; k++) {
            const cfg_block_t *b = &prog->blocks[p->block + k];
            for (uint32_t e = 0; e < b->nsucc; e++) {
                const cfg_edge_t *ed = cfg_block_succ(prog, b, e);
                uint32_t t = ed->kind == CFG_EDGE_TAILCALL
                    ? drv_entered(entries, ed->target) : CFG_NONE;
                if (t == CFG_NONE)
                    continue;
                if (cfg_vec_grow((void **)&v, &cap, 2 * (*n + 1), sizeof(uint32_t)) < 0) {
                    free(v);
                    return QP_ENOMEM;
                }
                v[2 * *n] = i;
                v[2 * (*n)++ + 1] = t;
            }
        }
    }
    *out = v;
    return 0;
}

/*
 * The sorted entries of the procedures whose name IS_NAME accepts, and of those that
 * tail-call one of them (a call of either returns the same way); *TAKEN is set when
 * one of them has its address taken (it may be called where no hook sees it). The
 * fixpoint goes over the tail calls collected once (it went over every edge of the
 * program in each round: cc1 0.05 s).
 */
static int
callee_set(const cfg_prog_t *prog, const drv_entries_t *entries, int (*is_name)(const char *),
    uint64_t **out, size_t *n, int *taken)
{
    *out = NULL;
    *n = 0;
    *taken = 0;
    uint8_t *is = calloc(prog->nprocs + 1, 1);
    uint64_t *v = malloc((prog->nprocs + 1) * sizeof(uint64_t));
    if (is == NULL || v == NULL) {
        free(is);
        free(v);
        return QP_ENOMEM;
    }
    int any = 0; /* (none: no procedure tail-calls one either) */
    for (uint32_t i = 0; i < prog->nprocs; i++)
        any |= is[i] = (uint8_t)is_name(prog->procs[i].name);
    uint32_t *tc = NULL;
    size_t ntc = 0;
    if (any && tail_call_pairs(prog, entries, &tc, &ntc) < 0) {
        free(is);
        free(v);
        return QP_ENOMEM;
    }
    for (int changed = any; changed;) {
        changed = 0;
        for (size_t k = 0; k < ntc; k++)
            if (!is[tc[2 * k]] && is[tc[2 * k + 1]])
                is[tc[2 * k]] = changed = 1;
    }
    free(tc);
    for (uint32_t i = 0; i < prog->nprocs; i++)
        if (is[i]) {
            v[(*n)++] = prog->procs[i].entry; /* procs are sorted by entry */
            *taken |= (prog->procs[i].sources & CFG_SRC_ADDR) != 0;
        }
    free(is);
    *out = v;
    return 0;
}

int
drv_forkers(const cfg_prog_t *prog, const drv_entries_t *entries, uint64_t **out, size_t *n)
{
    int taken;
    return callee_set(prog, entries, drv_is_fork_name, out, n, &taken);
}

int
drv_starters(const cfg_prog_t *prog, const drv_entries_t *entries, uint64_t **out, size_t *n,
             int *taken)
{
    return callee_set(prog, entries, drv_is_thread_name, out, n, taken);
}

/*
 * Does the clone system call at instruction K of V (a block's instructions V[0..K]) make
 * a thread? Yes unless the last write to its flags register is a constant without
 * CLONE_VM (glibc's fork: CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD).
 */
static int
clone_makes_thread(const cfg_image_t *img, const arch_insn_t *v, size_t k)
{
    while (k-- > 0) {
        size_t avail;
        const uint8_t *p = cfg_image_ptr(img, v[k].addr, &avail);
        arch_ops_t ops;
        if (p == NULL
            || arch_decode_ops(p, avail < v[k].len ? avail : v[k].len, v[k].addr, &ops)
                < 0)
            return 1;
        if (!(ops.regs_written & (1u << ARCH_REG_SYSARG0)))
            continue;
        return !(ops.op == ARCH_OP_MOV && ops.dst.kind == ARCH_OPND_REG
            && ops.dst.reg == ARCH_REG_SYSARG0 && ops.src.kind == ARCH_OPND_IMM
            && !(ops.src.imm & FLAG_CLONE_VM));
    }
    return 1;
}

/* A system call in block B that starts a thread: clone3, or clone that may share memory.
 */
static int
block_starts_thread(const cfg_prog_t *prog, const cfg_block_t *b)
{
    arch_insn_t v[64];
    size_t n = 0;
    for (uint64_t a = b->start; a < b->end;) {
        arch_insn_t in;
        if (cfg_image_decode(prog->img, a, 0, &in) < 0)
            return 0;
        if (in.kind == ARCH_KIND_SYSCALL) {
            long nr = cfg_syscall_nr(prog->img, n ? &v[n - 1] : NULL, &in);
            if (nr == NR_CLONE3
                || (nr == NR_CLONE && clone_makes_thread(prog->img, v, n)))
                return 1;
        }
        if (n == sizeof(v) / sizeof(v[0])) {
            memmove(v, v + 1, (n - 1) * sizeof(v[0]));
            n--;
        }
        v[n++] = in;
        a += in.len;
    }
    return 0;
}

const char *
drv_threads_reason(const cfg_prog_t *prog, char *buf, size_t len, int *unhooked)
{
    *unhooked = 0;
    if (prog == NULL || buf == NULL || len == 0)
        return NULL;
    for (uint32_t i = 0; i < prog->nprocs; i++)
        if (drv_is_thread_name(prog->procs[i].name)) {
            snprintf(buf, len, "it calls %s", prog->procs[i].name);
            return buf;
        }
    /* Named only by a relocation: called through its GOT slot (seen), or through a
     * pointer loaded from it (not seen). */
    const cfg_image_t *img = prog->img;
    for (size_t i = 0; i < img->nrelocs; i++)
        if (drv_is_thread_name(img->relocs[i].sym)) {
            snprintf(buf, len, "it calls %s", img->relocs[i].sym);
            return buf;
        }
    *unhooked = 1; /* what follows has no call site to hook */
    /* A static program has its own clone: look at the system calls (a dynamic one
     * starts threads through its libraries' functions, named above). */
    if (img->flags & CFG_IMG_DYNAMIC) {
        *unhooked = 0;
        return NULL;
    }
    /* The system call numbers and the pattern below are x86-64's (AArch64's openat is
     * x86-64's clone): another ISA's static program is taken to start threads. */
    if (cfg_image_isa(img) != arch_isa_host()) { /* TODO(#34): AArch64's clone, clone3 */
        snprintf(buf, len, "a static %s program, whose clone system calls are not "
                 "looked for yet", cfg_image_isa(img)->name);
        return buf;
    }
    /* glibc's clone3 wrapper (pthread_create, also posix_spawn) lies outside the CFG of
     * its FDE, after its end: look for the bytes. */
    uint8_t pat[16];
    int np = pt_syscall_pattern(NR_CLONE3, pat, sizeof(pat));
    for (size_t i = 0; np > 0 && i < img->nsections; i++) {
        const cfg_section_t *sec = &img->sections[i];
        if ((sec->flags & CFG_SEC_CODE) && sec->bytes != NULL
            && memmem(sec->bytes, sec->size, pat, (size_t)np) != NULL) {
            snprintf(buf, len, "it makes clone3 system calls (pthread_create)");
            return buf;
        }
    }
    for (uint32_t i = 0; i < prog->nblocks; i++)
        if (block_starts_thread(prog, &prog->blocks[i])) {
            snprintf(buf, len,
                "it makes a clone system call that shares memory (at 0x%llx)",
                (unsigned long long)prog->blocks[i].start);
            return buf;
        }
    *unhooked = 0;
    return NULL;
}

/* Has PROG's ISA increments made atomic in place (ARCH_INC_SWITCH)? AArch64 has not. */
static int
switchable(const cfg_prog_t *prog)
{
    uint8_t probe[64];
    return cfg_image_isa(prog->img)->emit_counter_inc(0, 0, ARCH_INC_SWITCH, probe,
                                                      sizeof(probe)) > 0;
}

void
drv_choose_inc(const cfg_prog_t *prog, drv_result_t *res, int force, drv_inc_t *out)
{
    char tbuf[256];
    int unhooked;
    const char *threads = drv_threads_reason(prog, tbuf, sizeof(tbuf), &unhooked);
    memset(out, 0, sizeof(*out));
    res->threads = threads != NULL;
    if ((prog->img->flags & CFG_IMG_SHLIB) && force < 0 && !switchable(prog)) {
        /* A library cannot know whether the process starts threads, and this ISA has
         * no increments to make atomic later (AArch64): atomic from the start. */
        res->threads = 1;
        out->mode = ARCH_INC_ATOMIC;
        snprintf(out->buf, sizeof(out->buf), "atomic from the start (a shared library, "
            "and %s has no switchable increments)", cfg_image_isa(prog->img)->name);
        out->why = out->buf;
        res->atomic = 1;
        return;
    }
    if ((prog->img->flags & CFG_IMG_SHLIB) && force < 0) {
        /* A library sees none of the calls of the program that loads it: its threads
         * and forks are seen by the process's libc, when that is rewritten too (the
         * watcher; a libc with a fork nobody hooks is none). */
        res->threads = 1;
        out->mode = ARCH_INC_SWITCH;
        out->watcher = res->watcher && res->nfork_unseen == 0;
        out->lock_at_start = out->watcher ? 0 : 2;
        snprintf(out->buf, sizeof(out->buf), "%s",
            out->watcher ? "made atomic when the process's first thread starts (this "
                           "library's pthread_create is hooked; it does so for every "
                           "rewritten module of the process)"
                         : "a shared library: made atomic when the process's first thread "
                           "starts if its libc is rewritten too (its hooks see every thread "
                           "start), else atomic from the start");
        out->why = out->buf;
        res->atomic = 1;
        return;
    }
    if (force >= 0) {
        out->mode = force ? ARCH_INC_ATOMIC : ARCH_INC_PLAIN;
        snprintf(out->buf, sizeof(out->buf), "%s%s%s", force ? "--atomic" : "--no-atomic",
            threads ? "; the program can start threads: " : "", threads ? threads : "");
    } else if (threads == NULL && res->nfork_unseen == 0) {
        out->mode = ARCH_INC_PLAIN;
        snprintf(out->buf, sizeof(out->buf),
            "no thread creation found: exact for one thread at a time");
    } else if (!switchable(prog)) {
        out->mode = ARCH_INC_ATOMIC;
        snprintf(out->buf, sizeof(out->buf), "atomic from the start (%s has no switchable "
            "increments)%s%s", cfg_image_isa(prog->img)->name,
            threads ? "; the program can start threads: " : "", threads ? threads : "");
    } else {
        out->mode = ARCH_INC_SWITCH;
        out->lock_at_start = unhooked || res->nthread_unseen > 0 || res->nfork_unseen > 0;
        const char *when = !out->lock_at_start
            ? "made atomic before the first thread starts"
            : res->nfork_unseen > 0 ? "atomic from the start: a child may fork "
                                      "where no hook sees it"
                                    : "atomic from the start: a thread may start "
                                      "where no hook sees it";
        snprintf(out->buf, sizeof(out->buf), "%s%s%s", when,
            threads ? "; the program can start threads: " : "", threads ? threads : "");
    }
    out->why = out->buf;
    res->atomic = out->mode != ARCH_INC_PLAIN;
}
