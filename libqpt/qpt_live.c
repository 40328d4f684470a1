/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * libqpt for live processes, over dynamic/: the process is stopped (attach, spawn,
 * qpt_stop), its executable read from /proc/PID/exe with the same reader and CFGs as a
 * file, and a commit replaces the installed set of snippets with the current one in one
 * stop: the snippets at one point are joined into one (in insertion order), the old
 * session is taken out and a new one installed; when the new set does not go in whole,
 * it is taken out again and the old one put back, so a commit is all or nothing.
 *
 * This file: the process attached, spawned and closed, its libraries, its memory
 * (qpt_alloc, read, write), running and stopping it, what an event changes, threads'
 * stacks and blocks. qpt_live_commit.c: points checked and the commit itself.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dynamic/dyn.h"
#include "libqpt/qpt_priv.h"

int qpt_load_live_program(qpt_space_t *s, const char *exe, char *why, size_t whylen);

/* The variables with a copy of ours holding [ADDR, ADDR + LEN) wholly, of S or of its
 * libraries' spaces, or NULL: those still in the process first (an address of memory
 * gone with a dlclose or an execve may have been given again). */
static const qpt_live_vars_t *
vars_at(const qpt_space_t *s, uint64_t addr, size_t len)
{
    for (int gone = 0; gone < 2; gone++)
        for (const qpt_space_t *x = s; x != NULL; x = x == s ? s->libs : x->next_lib) {
            const qpt_live_vars_t *v = x->lvars;
            for (size_t i = 0; i < x->nlvars; i++)
                if (v[i].gone == gone && v[i].local != NULL && addr >= v[i].remote
                    && addr + len <= v[i].remote + v[i].len && addr + len >= addr)
                    return &v[i];
        }
    return NULL;
}

/*
 * Map LEN bytes of a new memfd of ours into the stopped process near the code (never in
 * the NAVOID ranges AVOID: qpt_live_gone_ranges): it opens
 * /proc/OURPID/fd/N (the path written into a scratch page of its) and maps it shared.
 * 0 with *OUT filled, or QP_E* (then nothing is left in the process).
 */
/* 1 when [ADDR, ADDR + LEN) meets a gone variable of S's process without a copy of
 * ours (private memory: its values left with it). */
static int
lost_var_at(const qpt_space_t *s, uint64_t addr, size_t len)
{
    const qpt_space_t *top = s->parent != NULL ? s->parent : s;
    for (const qpt_space_t *x = top; x != NULL; x = x == top ? top->libs : x->next_lib)
        for (size_t i = 0; i < x->nlvars; i++) {
            const qpt_live_vars_t *v = &x->lvars[i];
            if (v->gone && v->local == NULL && addr < v->remote + v->len
                && v->remote < addr + len)
                return 1;
        }
    return 0;
}

static int
map_shared(qpt_space_t *s, uint64_t lo, uint64_t hi, size_t len, const uint64_t *avoid,
           size_t navoid, qpt_live_vars_t *out)
{
    dyn_proc_t *p = s->proc;
    char path[96];
    uint64_t scratch = 0, a[6] = { 0 };
    int64_t rfd = -1, r;
    int rc;
    out->fd = (int)syscall(SYS_memfd_create, "qpt-vars", 1u /* MFD_CLOEXEC */);
    if (out->fd < 0 || ftruncate(out->fd, (off_t)len) < 0)
        return QP_EIO;
    out->local = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, out->fd, 0);
    if (out->local == MAP_FAILED) {
        out->local = NULL;
        return QP_EIO;
    }
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getpid(), out->fd);
    rc = dyn_space_ops.alloc_near(p, lo, hi, 4096, ED_PROT_R | ED_PROT_W, &scratch);
    if (rc == 0)
        rc = dyn_proc_write(p, scratch, path, strlen(path) + 1);
    if (rc == 0) {
        a[0] = (uint64_t)(int64_t)AT_FDCWD;
        a[1] = scratch;
        a[2] = O_RDWR | O_CLOEXEC;
        rc = dyn_proc_syscall(p, SYS_openat, a, &rfd);
        if (rc == 0 && rfd < 0) {
            errno = (int)-rfd;
            rc = QP_EIO;
        }
    }
    if (rc == 0)
        rc = dyn_space_map_near_avoid(p, lo, hi, len, ED_PROT_R | ED_PROT_W, (int)rfd, avoid,
                                      navoid, &out->remote);
    if (rfd >= 0) {
        memset(a, 0, sizeof(a));
        a[0] = (uint64_t)rfd;
        dyn_proc_syscall(p, SYS_close, a, &r);
    }
    if (scratch != 0)
        dyn_space_free(p, scratch, 4096);
    return rc;
}

void
qpt_live_set_free(qpt_live_set_t *l)
{
    if (l == NULL)
        return;
    dyn_session_destroy(l->sess);
    for (size_t i = 0; i < l->njoined; i++)
        free(l->joined[i]);
    free(l->joined);
    for (size_t i = 0; i < l->nexits; i++)
        free(l->exits[i]);
    free(l->exits);
    for (size_t i = 0; i < l->nsites; i++)
        free(l->sites[i]);
    free(l->sites);
    free(l->in);
    free(l->row_ins);
    free(l);
}

static int
open_process(qpt_space_t *s, dyn_proc_t *p, char *why, size_t whylen)
{
    char exe[64];
    s->proc = p;
    int rc = qpt_load_live_program(s, dyn_proc_exe_path(p, exe, sizeof(exe)), why, whylen);
    if (rc == 0 && (rc = dyn_proc_load_bias(p, s->img->entry, &s->bias)) < 0 && why != NULL)
        snprintf(why, whylen, "%d: cannot find where the executable is loaded",
                 dyn_proc_pid(p));
    return rc;
}

static void link_live(qpt_space_t *s);

/*****************************************************************************
 * The end of the process (qpt_alive): one code, QPT_EEXITED, for every call after it
 */

static int
say_gone(qpt_space_t *s)
{
    const qpt_space_t *top = s->parent != NULL ? s->parent : s;
    int pid = top->proc != NULL ? dyn_proc_pid(top->proc) : 0, st = top->exit_status;
    if (s->stale)
        return QP_EEXITED; /* (its message was set when it went stale) */
    if (st == -1)
        return qpt_fail(s, QP_EEXITED, "the process %d has exited (status unknown: it was "
                        "attached, not watched, and its parent got it)", pid);
    if (WIFSIGNALED(st))
        return qpt_fail(s, QP_EEXITED, "the process %d has exited (killed by signal %d, %s)",
                        pid, WTERMSIG(st), strsignal(WTERMSIG(st)));
    return qpt_fail(s, QP_EEXITED, "the process %d has exited (status %d)", pid,
                    WEXITSTATUS(st));
}

int
qpt_live_gone(qpt_space_t *s, int probe)
{
    qpt_space_t *top = s->parent != NULL ? s->parent : s;
    if (s->stale || top->exited)
        return say_gone(s);
    int st;
    if (!probe || top->proc == NULL || dyn_proc_exited(top->proc, &st) != 1)
        return 0;
    top->exited = 1;
    top->exit_status = st;
    return say_gone(s);
}

/* S must be stopped for this call: QPT_EEXITED when it cannot be, for it has ended. */
int
qpt_live_must_be_stopped(qpt_space_t *s)
{
    QP_CHECK(qpt_live_gone(s, 1));
    return qpt_fail(s, QP_EINVAL, "the process must be stopped (qpt_stop)");
}

int
qpt_live_alive(qpt_space_t *s)
{
    return qpt_live_gone(s, 1) == 0;
}

/*
 * The executable is read and analysed while the process runs (that takes long on a
 * large program); then it is stopped, and it must still run the same file.
 */
int
qpt_live_attach(qpt_space_t *s, int pid, char *why, size_t whylen)
{
    char exe[64];
    struct stat before, after;
    snprintf(exe, sizeof(exe), "/proc/%d/exe", pid);
    char buf[256];
    if (stat(exe, &before) < 0) {
        if (why != NULL)
            snprintf(why, whylen, "%d: %s", pid, dyn_proc_why(pid, errno, buf, sizeof(buf)));
        return QP_EIO;
    }
    int rc = qpt_load_live_program(s, exe, why, whylen);
    if (rc < 0)
        return rc;
    dyn_proc_t *p = NULL;
    errno = 0;
    rc = dyn_proc_attach(pid, &p);
    if (rc < 0) {
        if (why != NULL)
            snprintf(why, whylen, "%d: %s", pid,
                     rc == QP_EIO && errno ? dyn_proc_why(pid, errno, buf, sizeof(buf))
                                           : qp_strerror(rc));
        return rc;
    }
    s->proc = p;
    if (stat(exe, &after) < 0 || after.st_dev != before.st_dev || after.st_ino != before.st_ino) {
        if (why != NULL)
            snprintf(why, whylen, "%d: it started another program while it was analysed", pid);
        return QP_EINVAL;
    }
    if ((rc = dyn_proc_load_bias(p, s->img->entry, &s->bias)) < 0) {
        if (why != NULL)
            snprintf(why, whylen, "%d: cannot find where the executable is loaded", pid);
        return rc;
    }
    link_live(s);
    return 0;
}

int
qpt_live_spawn(qpt_space_t *s, char *const argv[], char *why, size_t whylen)
{
    dyn_proc_t *p = NULL;
    errno = 0;
    int rc = dyn_proc_spawn(argv, &p);
    if (rc < 0) {
        if (why != NULL)
            snprintf(why, whylen, "%s: %s", argv[0],
                     rc == QP_EIO && errno ? strerror(errno) : qp_strerror(rc));
        return rc;
    }
    s->spawned = 1;
    rc = open_process(s, p, why, whylen);
    if (rc == 0)
        link_live(s);
    s->at_exec = 1;
    return rc;
}

/* The loaded libraries of V[N] (not the executable) as "a, b, c" into BUF. */
static void
list_libs(const dyn_module_t *v, size_t n, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && len + 1 < cap; i++)
        if (!v[i].exe)
            len += (size_t)snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", v[i].name);
    if (len == 0)
        snprintf(buf, cap, "none");
}

/* A new space for library M of S's process (its file read and analysed). */
static int
open_library(qpt_space_t *s, const dyn_module_t *m, qpt_space_t **out, char *why, size_t whylen)
{
    char path[4200];
    const char *bad = NULL;
    qpt_space_t *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return QP_ENOMEM;
    l->ops = &qpt_live_ops;
    l->parent = s;
    l->proc = s->proc;
    l->lib_lo = m->lo;
    int rc = (l->lib_name = strdup(m->name)) == NULL ? QP_ENOMEM : 0;
    if (rc == 0 && (rc = dyn_module_path(dyn_proc_pid(s->proc), m, path, sizeof(path), &bad)) < 0)
        snprintf(why, whylen, "%s: %s", m->name, bad ? bad : qp_strerror(rc));
    if (rc == 0)
        rc = qpt_load_live_program(l, path, why, whylen);
    if (rc == 0 && (rc = dyn_module_bias(m, l->img, &l->bias)) < 0)
        snprintf(why, whylen, "%s: cannot find where it is loaded: %s", m->name,
                 qp_strerror(rc));
    if (rc < 0) {
        qpt_close(l);
        return rc;
    }
    l->next_lib = s->libs;
    s->libs = l;
    *out = l;
    return 0;
}

int
qpt_live_library(qpt_space_t *s, const char *module, qpt_space_t **out, char *why,
                 size_t whylen)
{
    if (s->parent != NULL)
        s = s->parent;
    int rc0 = qpt_live_gone(s, 0);
    if (rc0 < 0) {
        snprintf(why, whylen, "%s", s->err);
        return rc0;
    }
    for (qpt_space_t *l = s->libs; l != NULL; l = l->next_lib)
        if (!l->stale && strcmp(l->lib_name, module) == 0) {
            *out = l;
            return 0;
        }
    dyn_proc_t *p = s->proc;
    int pid = dyn_proc_pid(p), rc;
    /* It may run meanwhile: the library is read and analysed without stopping it. */
    if (s->at_exec) { /* stopped at its execve: its libraries are not mapped yet */
        errno = 0;
        if ((rc = dyn_proc_run_to_entry(p)) < 0) {
            if (qpt_live_gone(s, 1) < 0) {
                snprintf(why, whylen, "%s (before its entry point)", s->err);
                return QP_EEXITED;
            }
            snprintf(why, whylen, "%d: %s before its entry point", pid,
                     rc == QP_EIO && errno == ESRCH ? "it ended"
                     : rc == QP_EIO && errno        ? strerror(errno)
                                                    : qp_strerror(rc));
            return rc;
        }
        s->at_exec = 0;
    }
    dyn_module_t *v = NULL;
    size_t n = 0, found = 0, k = 0;
    if ((rc = dyn_proc_modules(pid, &v, &n)) < 0) {
        if (qpt_live_gone(s, 1) < 0) {
            snprintf(why, whylen, "%s", s->err);
            return QP_EEXITED;
        }
        snprintf(why, whylen, "%d: cannot read its memory map: %s", pid, strerror(errno));
        return rc;
    }
    for (size_t i = 0; i < n; i++)
        if (!v[i].exe && qpt_module_matches(module, v[i].name) && found++ == 0)
            k = i;
    char list[1024];
    list_libs(v, n, list, sizeof(list));
    if (found != 1) {
        rc = found == 0 ? QP_ENOTFOUND : QP_EINVAL;
        if (found == 0)
            snprintf(why, whylen, "%s: no such library loaded in process %d (one loaded later "
                     "by dlopen is not seen); loaded: %s", module, pid, list);
        else
            snprintf(why, whylen, "%s: %zu libraries loaded in process %d match it (%s): "
                     "name one", module, found, pid, list);
    } else {
        for (qpt_space_t *l = s->libs; l != NULL && *out == NULL; l = l->next_lib)
            if (!l->stale && l->lib_lo == v[k].lo && strcmp(l->lib_name, v[k].name) == 0)
                *out = l;
        if (*out == NULL)
            rc = open_library(s, &v[k], out, why, whylen);
    }
    dyn_modules_free(v, n);
    return qpt_public_rc(rc);
}

/*
 * Spaces whose snippets come out when the mutator exits without closing them (exit(),
 * a return from main): an atexit handler closes each. A mutator killed by a signal
 * leaves them in (the kernel detaches it); dyn clean takes them out.
 */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static qpt_space_t *live_spaces;
static int live_hooked;

static void
restore_at_exit(void)
{
    for (;;) {
        pthread_mutex_lock(&live_lock);
        qpt_space_t *s = live_spaces;
        while (s != NULL && s->keep_on_exit)
            s = s->next_live;
        pthread_mutex_unlock(&live_lock);
        if (s == NULL)
            return;
        qpt_close(s); /* unlinks it */
    }
}

/* A child of the mutator traces nothing: its exit must not touch the parent's. */
static void
forget_in_child(void)
{
    live_spaces = NULL;
    pthread_mutex_init(&live_lock, NULL);
}

static void
link_live(qpt_space_t *s)
{
    pthread_mutex_lock(&live_lock);
    if (!live_hooked)
        live_hooked = atexit(restore_at_exit) == 0
                      && pthread_atfork(NULL, NULL, forget_in_child) == 0;
    s->next_live = live_spaces;
    live_spaces = s;
    pthread_mutex_unlock(&live_lock);
}

static void
unlink_live(qpt_space_t *s)
{
    pthread_mutex_lock(&live_lock);
    for (qpt_space_t **p = &live_spaces; *p != NULL; p = &(*p)->next_live)
        if (*p == s) {
            *p = s->next_live;
            break;
        }
    pthread_mutex_unlock(&live_lock);
}

int
qpt_live_keep_on_exit(qpt_space_t *s, int keep)
{
    pthread_mutex_lock(&live_lock);
    s->keep_on_exit = keep != 0;
    pthread_mutex_unlock(&live_lock);
    return 0;
}

/* Library space L out of its executable's list. */
static void
unlink_library(qpt_space_t *l)
{
    for (qpt_space_t **p = &l->parent->libs; *p != NULL; p = &(*p)->next_lib)
        if (*p == l) {
            *p = l->next_lib;
            break;
        }
}

struct pt_decoded *
qpt_live_decoded(qpt_space_t *s)
{
    if (s->decoded == NULL)
        s->decoded = dyn_decoded_new(); /* (NULL: its sessions decode each time) */
    return s->decoded;
}

/* Must variable V of library space S (closing, unlinked) outlive S: gone (its address
 * stays the session's), or used by an insertion of another space of the process? */
static int
outlives(const qpt_space_t *s, const qpt_live_vars_t *v)
{
    const qpt_space_t *top = s->parent;
    size_t k;
    if (v->gone)
        return 1;
    for (const qpt_space_t *x = top; x != NULL; x = x == top ? top->libs : x->next_lib)
        if (x != s && qpt_live_uses(x, v->remote, v->remote + v->len, &k) != 0)
            return 1;
    return 0;
}

/* The variables of library space S, closing, that must outlive it, handed to its
 * program's space: a gone one's address stays avoided (qpt_live_gone_ranges) and refused
 * (qpt_live_point_ok), its last values readable, as long as the session lasts; one that
 * another space's snippet uses stays mapped in the process until that space frees it. */
static void
keep_vars(qpt_space_t *s)
{
    qpt_space_t *top = s->parent;
    size_t k = 0;
    for (size_t i = 0; top != NULL && i < s->nlvars; i++)
        k += outlives(s, &s->lvars[i]);
    if (k == 0)
        return;
    qpt_live_vars_t *v = realloc(top->lvars, (top->nlvars + k) * sizeof(*v));
    if (v == NULL) {
        /* Without memory to hand them over they are left mapped (marked gone: S's close
         * does not unmap them under a snippet that uses them); their addresses may then
         * be given again. */
        for (size_t i = 0; i < s->nlvars; i++)
            if (outlives(s, &s->lvars[i]))
                s->lvars[i].gone = 1;
        return;
    }
    top->lvars = v;
    for (size_t i = 0; i < s->nlvars; i++)
        if (outlives(s, &s->lvars[i])) {
            v[top->nlvars++] = s->lvars[i];
            s->lvars[i--] = s->lvars[--s->nlvars];
        }
}

void
qpt_live_close(qpt_space_t *s)
{
    int followed = s->parent == NULL && s->watch != NULL;
    qpt_watch_free(s);
    while (s->libs != NULL)
        qpt_close(s->libs); /* unlinks it */
    if (s->parent != NULL)
        unlink_library(s);
    else
        unlink_live(s);
    qpt_live_set_t *l = s->sess;
    dyn_proc_t *p = s->proc;
    if (p != NULL && l != NULL && l->sess != NULL) {
        if (!dyn_proc_is_stopped(p))
            dyn_proc_stop(p);
        if (dyn_proc_is_stopped(p))
            dyn_session_remove(l->sess, NULL);
    }
    qpt_live_set_free(l);
    s->sess = NULL;
    dyn_session_destroy(s->check);
    s->check = NULL;
    dyn_decoded_free(s->decoded); /* (after the sessions that used it) */
    s->decoded = NULL;
    qpt_live_index_free(s);
    free(s->lent);
    s->lent = NULL;
    keep_vars(s);
    qpt_live_vars_t *v = s->lvars;
    for (size_t i = 0; i < s->nlvars; i++) {
        /* The process's mapping goes when no snippet reads it any more (not one gone
         * with an execve or a dlclose: its address is no longer ours). */
        if (p != NULL && dyn_proc_is_stopped(p) && !v[i].gone)
            dyn_space_free(p, v[i].remote, v[i].len);
        if (v[i].local != NULL)
            munmap(v[i].local, v[i].len);
        if (v[i].fd >= 0)
            close(v[i].fd);
    }
    free(s->lvars);
    s->lvars = NULL;
    s->nlvars = 0;
    /* (dyn_proc_destroy would unfollow too, and its children left stopped be lost) */
    if (followed && p != NULL && (dyn_proc_is_stopped(p) || dyn_proc_stop(p) == 0))
        qpt_live_unfollow(s);
    if (s->parent == NULL && s->kill_on_close)
        dyn_proc_kill(p);
    else if (s->parent == NULL)
        dyn_proc_destroy(p); /* lets it run, detached */
    s->proc = NULL;
}

/* (qpt_priv.h) */
int
qpt_live_gone_ranges(const qpt_space_t *top, uint64_t **out, size_t *n)
{
    size_t k = 0;
    *out = NULL;
    *n = 0;
    for (const qpt_space_t *x = top; x != NULL; x = x == top ? top->libs : x->next_lib)
        for (size_t i = 0; i < x->nlvars; i++)
            k += x->lvars[i].gone != 0;
    if (k == 0)
        return 0;
    if ((*out = malloc(2 * k * sizeof(**out))) == NULL)
        return QP_ENOMEM;
    for (const qpt_space_t *x = top; x != NULL; x = x == top ? top->libs : x->next_lib)
        for (size_t i = 0; i < x->nlvars; i++)
            if (x->lvars[i].gone) {
                (*out)[2 * *n] = x->lvars[i].remote;
                (*out)[2 * (*n)++ + 1] = x->lvars[i].len;
            }
    return 0;
}

int
qpt_live_alloc(qpt_space_t *s, size_t bytes, uint64_t *addr)
{
    dyn_proc_t *p = s->proc;
    QP_CHECK(qpt_live_gone(s, 0));
    if (!dyn_proc_is_stopped(p))
        return qpt_live_must_be_stopped(s);
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < s->img->nsections; i++)
        if (s->img->sections[i].flags & CFG_SEC_ALLOC) {
            const cfg_section_t *c = &s->img->sections[i];
            lo = c->vma < lo ? c->vma : lo;
            hi = c->vma + c->size > hi ? c->vma + c->size : hi;
        }
    size_t len = (bytes + 4095) & ~(size_t)4095;
    qpt_live_vars_t *v = realloc(s->lvars, (s->nlvars + 1) * sizeof(qpt_live_vars_t));
    if (v == NULL)
        return QP_ENOMEM;
    s->lvars = v;
    qpt_live_vars_t *nv = &v[s->nlvars];
    memset(nv, 0, sizeof(*nv));
    nv->fd = -1;
    nv->len = len;
    uint64_t *gone;
    size_t ngone;
    int rc = qpt_live_gone_ranges(s->parent != NULL ? s->parent : s, &gone, &ngone);
    if (rc < 0)
        return rc;
    rc = map_shared(s, lo + s->bias, hi + s->bias, len, gone, ngone, nv);
    if (rc < 0) { /* private memory then: read from the process while it lives */
        if (nv->local != NULL)
            munmap(nv->local, len);
        if (nv->fd >= 0)
            close(nv->fd);
        nv->local = NULL;
        nv->fd = -1;
        rc = dyn_space_map_near_avoid(p, lo + s->bias, hi + s->bias, len,
                                      ED_PROT_R | ED_PROT_W, -1, gone, ngone, &nv->remote);
    }
    free(gone);
    if (rc < 0)
        return qpt_fail(s, rc, "cannot map %zu bytes near the code: %s", len,
                        rc == QP_EIO ? strerror(errno) : qp_strerror(rc));
    s->nlvars++;
    *addr = nv->remote;
    /* Memory gone at the same addresses (none: qpt_live_gone_ranges keeps them; as a
     * safeguard): forgotten, so that a read there is of the new memory. */
    uint64_t at = nv->remote;
    for (size_t i = 0; i < s->nlvars; i++)
        if (v[i].gone && v[i].remote < at + len && at < v[i].remote + v[i].len) {
            if (v[i].local != NULL)
                munmap(v[i].local, v[i].len);
            if (v[i].fd >= 0)
                close(v[i].fd);
            v[i--] = v[--s->nlvars];
        }
    return 0;
}

int
qpt_live_read(qpt_space_t *s, uint64_t addr, void *buf, size_t len)
{
    const qpt_live_vars_t *v = vars_at(s, addr, len);
    if (v != NULL) {
        /* Word by word, atomically: snippets may be adding to them right now. */
        const uint8_t *src = (const uint8_t *)v->local + (addr - v->remote);
        if (addr % 8 == 0 && len % 8 == 0)
            for (size_t i = 0; i < len / 8; i++)
                ((uint64_t *)buf)[i] = __atomic_load_n((const uint64_t *)src + i,
                                                       __ATOMIC_RELAXED);
        else
            memcpy(buf, src, len);
        return 0;
    }
    if (lost_var_at(s, addr, len))
        return qpt_fail(s, QP_EINVAL, "0x%llx: memory qpt_alloc gave that left the process "
                        "with its values (private, gone with an execve or a dlclose)",
                        (unsigned long long)addr);
    QP_CHECK(qpt_live_gone(s, 0));
    int rc = dyn_proc_read(s->proc, addr, buf, len);
    if (rc < 0 && qpt_live_gone(s, 1) < 0)
        return QP_EEXITED;
    if (rc < 0)
        return qpt_fail(s, rc, "cannot read 0x%llx: %s", (unsigned long long)addr,
                        strerror(errno));
    return 0;
}

int
qpt_live_write(qpt_space_t *s, uint64_t addr, const void *buf, size_t len)
{
    QP_CHECK(qpt_live_gone(s, 0));
    if (!dyn_proc_is_stopped(s->proc))
        return qpt_live_must_be_stopped(s);
    int rc = dyn_proc_write(s->proc, addr, buf, len);
    if (rc < 0 && qpt_live_gone(s, 1) < 0)
        return QP_EEXITED;
    if (rc < 0)
        return qpt_fail(s, rc, "cannot write 0x%llx: %s", (unsigned long long)addr,
                        strerror(errno));
    return 0;
}

int
qpt_live_run(qpt_space_t *s)
{
    QP_CHECK(qpt_live_gone(s, 0));
    int rc = dyn_proc_resume(s->proc);
    if (rc == 0)
        (s->parent != NULL ? s->parent : s)->at_exec = 0;
    if (rc < 0 && qpt_live_gone(s, 1) < 0)
        return QP_EEXITED;
    return rc < 0 ? qpt_fail(s, rc, "cannot resume: %s", strerror(errno)) : 0;
}

int
qpt_live_stop(qpt_space_t *s)
{
    QP_CHECK(qpt_live_gone(s, 0));
    int rc = dyn_proc_stop(s->proc);
    if (rc < 0 && qpt_live_gone(s, 1) < 0)
        return QP_EEXITED;
    return rc < 0 ? qpt_fail(s, rc, "cannot stop: %s", strerror(errno)) : 0;
}

int
qpt_live_ended(qpt_space_t *s, int *status)
{
    qpt_space_t *top = s->parent != NULL ? s->parent : s;
    if (qpt_live_gone(top, 1) < 0) {
        *status = top->exit_status;
        return 1;
    }
    return 0;
}

int
qpt_live_syscall(qpt_space_t *s, long nr, const uint64_t args[6], int64_t *ret)
{
    QP_CHECK(qpt_live_gone(s, 0));
    if (!dyn_proc_is_stopped(s->proc))
        return qpt_live_must_be_stopped(s);
    int rc = dyn_proc_syscall(s->proc, nr, args, ret);
    if (rc < 0 && qpt_live_gone(s, 1) < 0)
        return QP_EEXITED;
    return rc < 0 ? qpt_fail(s, rc, "system call %ld: %s", nr, strerror(errno)) : 0;
}

int
qpt_live_call_now(qpt_space_t *s, uint64_t fn, const uint64_t *args, int nargs, uint64_t *ret)
{
    QP_CHECK(qpt_live_gone(s, 0));
    if (!dyn_proc_is_stopped(s->proc))
        return qpt_live_must_be_stopped(s);
    /* Right after qpt_spawn nothing is loaded or initialised: a call would run in a
     * process without its libraries (or fail in the loader), so it is refused. */
    if ((s->parent != NULL ? s->parent : s)->at_exec)
        return qpt_fail(s, QP_EINVAL, "the process has not started: qpt_run it (and "
                                      "qpt_stop) before qpt_call_now");
    int rc = dyn_proc_call(s->proc, fn, args, nargs, ret);
    if (rc < 0 && qpt_live_gone(s, 1) < 0)
        return QP_EEXITED;
    return rc < 0 ? qpt_fail(s, rc, "calling 0x%llx: %s", (unsigned long long)fn,
                             rc == QP_EIO ? strerror(errno) : qp_strerror(rc))
                  : 0;
}

/*****************************************************************************
 * What an event changes (qpt_events.c): an exec, a library unloaded, a fork
 */

/* Take the insertions of S out of the books (their code is gone, or goes with S). 1 when
 * their trampolines stay in the process (a thread's pc in them: dyn_session_drop), else 0. */
static int
forget_insertions(qpt_space_t *s, int gone_all)
{
    qpt_live_set_t *l = s->sess;
    int kept = l != NULL && l->sess != NULL && dyn_session_drop(l->sess, gone_all) == 1;
    qpt_live_set_free(l);
    s->sess = NULL;
    dyn_session_destroy(s->check);
    s->check = NULL;
    free(s->lent);
    s->lent = NULL;
    for (size_t i = 0; i < s->nins; i++) {
        s->ins[i].removed = 1;
    }
    s->inactive = 0;
    return kept;
}

/*
 * The variables of library space L, just unloaded (its insertions forgotten), out of the
 * stopped process: each one no insertion of the process's other spaces uses. Its
 * mapping is unmapped (else every load of a library would leave one more), its last
 * values kept in our copy (a private one copied first: its values are final, the
 * library's code is gone), readable as before; gone from then on.
 */
static void
retire_vars(qpt_space_t *l)
{
    qpt_space_t *top = l->parent;
    dyn_proc_t *p = top->proc;
    qpt_live_vars_t *v = l->lvars;
    if (p == NULL || !dyn_proc_is_stopped(p))
        return;
    for (size_t i = 0; i < l->nlvars; i++) {
        uint64_t lo = v[i].remote, hi = lo + v[i].len;
        size_t k;
        int used = 0;
        for (const qpt_space_t *x = top; x != NULL && !used;
             x = x == top ? top->libs : x->next_lib)
            used = x != l && qpt_live_uses(x, lo, hi, &k) != 0;
        if (used || v[i].gone)
            continue;
        if (v[i].local == NULL) {
            void *m = mmap(NULL, v[i].len, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED)
                continue;
            if (dyn_proc_read(p, lo, m, v[i].len) < 0) {
                munmap(m, v[i].len);
                continue;
            }
            v[i].local = m;
        }
        if (dyn_space_free(p, lo, v[i].len) < 0)
            continue;
        if (v[i].fd >= 0)
            close(v[i].fd); /* (our mapping keeps the memfd) */
        v[i].fd = -1;
        v[i].gone = 1;
    }
}

void
qpt_live_lib_gone(qpt_space_t *l, int gone_all, const char *why)
{
    /* An execve takes every variable, also those an unloaded library (stale already)
     * kept mapped: no longer the process's to unmap (qpt_live_close). */
    qpt_live_vars_t *v = l->lvars;
    for (size_t i = 0; gone_all && i < l->nlvars; i++)
        v[i].gone = 1;
    if (l->stale)
        return;
    /* A thread still in a kept trampoline may yet add to them: they stay mapped as long
     * as the process lives, marked gone so that no close unmaps them (nor gives their
     * addresses again, nor lets a snippet use them). */
    int kept = forget_insertions(l, gone_all);
    if (!gone_all && !kept)
        retire_vars(l);
    for (size_t i = 0; kept && i < l->nlvars; i++)
        v[i].gone = 1;
    l->stale = 1;
    snprintf(l->err, sizeof(l->err), "%s: %s", l->lib_name, why);
    /* Its procedures' names are still read (a mutator prints them at the end), its file
     * no longer: its descriptor let go, else one stays open for each dlopen/dlclose
     * cycle (the fd limit after a thousand). Out of memory, the file stays open. */
    (void)cfg_image_release_file(l->img);
}

int
qpt_live_new_image(qpt_space_t *s, char *why, size_t whylen)
{
    char exe[64];
    dyn_proc_t *p = s->proc;
    for (qpt_space_t *l = s->libs; l != NULL; l = l->next_lib)
        qpt_live_lib_gone(l, 1, "gone with the program that ran execve");
    forget_insertions(s, 1);
    /* Memory we shared keeps its values; private memory went with the process's (its
     * values with it: qpt_live_read refuses it), its address still never given again. */
    qpt_live_vars_t *v = s->lvars;
    for (size_t i = 0; i < s->nlvars; i++)
        v[i].gone = 1;
    for (size_t i = 0; i < s->nnamed; i++)
        free(s->named[i].name);
    s->nnamed = 0;
    /* The new program, into a scratch space first: S keeps the old one on failure. */
    qpt_space_t *n = calloc(1, sizeof(*n));
    if (n == NULL)
        return QP_ENOMEM;
    n->ops = &qpt_live_ops;
    int rc = qpt_load_live_program(n, dyn_proc_exe_path(p, exe, sizeof(exe)), why, whylen);
    uint64_t bias = 0;
    if (rc == 0 && (rc = dyn_proc_load_bias(p, n->img->entry, &bias)) < 0)
        snprintf(why, whylen, "%d: cannot find where the new program is loaded",
                 dyn_proc_pid(p));
    if (rc == 0) {
        cfg_image_t *img = s->img;
        cfg_prog_t *prog = s->prog;
        char *path = s->path;
        s->img = n->img;
        s->prog = n->prog;
        s->path = n->path;
        n->img = img;
        n->prog = prog;
        n->path = path;
        s->bias = bias;
        s->at_exec = 0;
    }
    n->ops = &qpt_file_ops; /* (closed as a file: its process is S's) */
    qpt_close(n);
    return rc;
}

int
qpt_live_fork_child(qpt_space_t *s, dyn_proc_t *child)
{
    int counted = 1;
    for (qpt_space_t *x = s; x != NULL && counted; x = x == s ? s->libs : x->next_lib) {
        const qpt_live_vars_t *v = x->lvars;
        for (size_t i = 0; i < x->nlvars; i++)
            counted &= v[i].local != NULL || v[i].gone;
    }
    for (qpt_space_t *x = s; x != NULL && !counted; x = x == s ? s->libs : x->next_lib) {
        const qpt_live_set_t *l = x->sess;
        if (l != NULL && l->sess != NULL && !x->stale)
            dyn_session_unpatch_copy(l->sess, child);
    }
    return counted;
}

int
qpt_live_pid(const qpt_space_t *s)
{
    return s->proc != NULL ? dyn_proc_pid(s->proc) : 0;
}

/*****************************************************************************
 * Threads' stacks and blocks (qpt_thread_stacks, qpt_thread_block)
 */

typedef struct stacks_arg {
    qpt_stack_fn fn;
    void *arg;
} stacks_arg_t;

static int
each_stack(void *arg, const dyn_thread_info_t *t, const uint64_t *pcs, size_t n)
{
    stacks_arg_t *a = arg;
    return a->fn(a->arg, t->tid, t->tp, pcs, n) != 0 ? 1 : 0;
}

int
qpt_live_stacks(qpt_space_t *s, qpt_stack_fn fn, void *arg)
{
    qpt_space_t *top = s->parent != NULL ? s->parent : s;
    if (!dyn_proc_is_stopped(top->proc))
        return qpt_fail(s, QP_EINVAL, "the process runs: stop it first (qpt_stop)");
    stacks_arg_t a = { fn, arg };
    int rc = dyn_proc_stacks(top->proc, each_stack, &a);
    return rc < 0 ? qpt_fail(s, rc, "the threads' stacks could not be read") : 0;
}

int
qpt_live_cpu_slots(qpt_space_t *s, int32_t *rseq_offset, unsigned *ncpu)
{
    qpt_space_t *top = s->parent != NULL ? s->parent : s;
    const char *why = NULL;
    if (!dyn_proc_is_stopped(top->proc))
        return qpt_fail(s, QP_EINVAL, "the process runs: stop it first (qpt_stop)");
    int rc = dyn_proc_rseq(top->proc, rseq_offset, ncpu, &why);
    if (rc < 0)
        return qpt_fail(s, rc, "the threads' rseq areas could not be read");
    return rc == 0 ? qpt_fail(s, QP_EUNSUPP, "%s", why) : 0;
}

int
qpt_live_thread_block(qpt_space_t *s, uint64_t var, size_t bytes, uint64_t tp, uint64_t *addr)
{
    qpt_space_t *top = s->parent != NULL ? s->parent : s;
    if (!dyn_proc_is_stopped(top->proc))
        return qpt_fail(s, QP_EINVAL, "the process runs: stop it first (qpt_stop)");
    if (tp == 0)
        return qpt_fail(s, QP_EINVAL, "a thread pointer of 0");
    uint64_t keys[ARCH_SNIP_THREADS];
    QP_CHECK(qpt_live_read(top, var, keys, sizeof(keys)));
    /* As the snippets probe (ARCH_SN_THREAD_SLOT): from the hash, linearly. */
    uint64_t h = arch_snip_thread_hash(tp);
    for (uint64_t k = 0; k < ARCH_SNIP_THREADS; k++) {
        uint64_t i = (h + k) & (ARCH_SNIP_THREADS - 1);
        if (keys[i] == 0)
            QP_CHECK(qpt_live_write(top, var + 8 * i, &tp, 8));
        if (keys[i] == 0 || keys[i] == tp) {
            *addr = var + 8 * ARCH_SNIP_THREADS + i * bytes;
            return 0;
        }
    }
    return qpt_fail(s, QP_ERANGE, "every thread block is taken");
}
