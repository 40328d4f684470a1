/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/* libqpt built without dynamic/ (./configure --disable-dynamic): no live processes. */
#include "config.h"

#include <stdio.h>

#include "libqpt/qpt_priv.h"

static int
refuse(char *why, size_t whylen)
{
    if (why != NULL && whylen > 0)
        snprintf(why, whylen, "live processes are not supported by this build "
                              "(configured with --disable-dynamic)");
    return QP_EUNSUPP;
}

int
qpt_live_attach(qpt_space_t *s, int pid, char *why, size_t whylen)
{
    (void)s;
    (void)pid;
    return refuse(why, whylen);
}

int
qpt_live_spawn(qpt_space_t *s, char *const argv[], char *why, size_t whylen)
{
    (void)s;
    (void)argv;
    return refuse(why, whylen);
}

void
qpt_live_close(qpt_space_t *s)
{
    (void)s;
}

int
qpt_live_alloc(qpt_space_t *s, size_t bytes, uint64_t *addr)
{
    (void)bytes;
    (void)addr;
    return qpt_fail(s, QP_EUNSUPP, "no live processes in this build");
}

int
qpt_live_read(qpt_space_t *s, uint64_t addr, void *buf, size_t len)
{
    (void)addr;
    (void)buf;
    (void)len;
    return qpt_fail(s, QP_EUNSUPP, "no live processes in this build");
}

int
qpt_library(qpt_space_t *s, const char *module, qpt_space_t **out, char *why, size_t whylen)
{
    (void)s;
    (void)module;
    if (out != NULL)
        *out = NULL;
    return refuse(why, whylen);
}

int
qpt_live_commit(qpt_space_t *s)
{
    return qpt_fail(s, QP_EUNSUPP, "no live processes in this build");
}

int
qpt_live_point_ok(qpt_space_t *s, qpt_ins_t *ins, const char **why)
{
    (void)s;
    (void)ins;
    *why = "no live processes in this build";
    return QP_EUNSUPP;
}

int
qpt_run(qpt_space_t *s)
{
    return qpt_fail(s, QP_EUNSUPP, "no live processes in this build");
}

int
qpt_stop(qpt_space_t *s)
{
    return qpt_fail(s, QP_EUNSUPP, "no live processes in this build");
}

int
qpt_ended(qpt_space_t *s, int *status)
{
    (void)status;
    return qpt_fail(s, QP_EUNSUPP, "no live processes in this build");
}

int
qpt_syscall(qpt_space_t *s, long nr, const uint64_t args[6], int64_t *ret)
{
    (void)nr;
    (void)args;
    (void)ret;
    return qpt_fail(s, QP_EUNSUPP, "no live processes in this build");
}

int
qpt_call_now(qpt_space_t *s, uint64_t fn, const uint64_t *args, int nargs, uint64_t *ret)
{
    (void)fn;
    (void)args;
    (void)nargs;
    (void)ret;
    return qpt_fail(s, QP_EUNSUPP, "no live processes in this build");
}

int
qpt_live_free(qpt_space_t *s, uint64_t addr)
{
    (void)addr;
    return qpt_fail(s, QP_EUNSUPP, "no live processes in this build");
}

int
qpt_live_set_active(qpt_space_t *s, int on)
{
    (void)on;
    return qpt_fail(s, QP_EUNSUPP, "no live processes in this build");
}

int
qpt_live_keep_on_exit(qpt_space_t *s, int keep)
{
    (void)keep;
    return qpt_fail(s, QP_EUNSUPP, "no live processes in this build");
}

int
qpt_pid(const qpt_space_t *s)
{
    (void)s;
    return 0;
}

int
qpt_live_write(qpt_space_t *s, uint64_t addr, const void *buf, size_t len)
{
    (void)addr;
    (void)buf;
    (void)len;
    return qpt_fail(s, QP_EUNSUPP, "no live processes in this build");
}

/* The life of a process (qpt_alive, events): no process here. */
int
qpt_live_gone(qpt_space_t *s, int probe)
{
    (void)s;
    (void)probe;
    return 0;
}

int
qpt_alive(qpt_space_t *s)
{
    return qpt_fail(s, QP_EUNSUPP, "not a process");
}

int
qpt_watch(qpt_space_t *s, unsigned mask)
{
    (void)mask;
    return qpt_fail(s, QP_EUNSUPP, "not a process");
}

int
qpt_next_event(qpt_space_t *s, qpt_event_t *ev, int timeout_ms)
{
    (void)ev;
    (void)timeout_ms;
    return qpt_fail(s, QP_EUNSUPP, "not a process");
}

int
qpt_set_callback(qpt_space_t *s, uint32_t kind, qpt_event_fn fn, void *arg)
{
    (void)kind;
    (void)fn;
    (void)arg;
    return qpt_fail(s, QP_EUNSUPP, "not a process");
}

int
qpt_wait(qpt_space_t *s, int timeout_ms)
{
    (void)timeout_ms;
    return qpt_fail(s, QP_EUNSUPP, "not a process");
}

int
qpt_live_stacks(qpt_space_t *s, qpt_stack_fn fn, void *arg)
{
    (void)fn;
    (void)arg;
    return qpt_fail(s, QP_EUNSUPP, "live processes are not in this build");
}

int
qpt_live_thread_block(qpt_space_t *s, uint64_t var, size_t bytes, uint64_t tp, uint64_t *addr)
{
    (void)var;
    (void)bytes;
    (void)tp;
    (void)addr;
    return qpt_fail(s, QP_EUNSUPP, "live processes are not in this build");
}
