/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * libqpt: the public calls of a process's life (qpt_alive, qpt_run, events...), their
 * arguments checked here and the work done by the space's kind (S->ops): a process's
 * in qpt_live.c and qpt_events.c, a file's refusal in qpt_file.c.
 */
#include "config.h"

#include <stddef.h>

#include "libqpt/qpt_priv.h"

int
qpt_alive(qpt_space_t *s)
{
    if (s == NULL)
        return QP_EINVAL;
    return s->ops->alive(s);
}

int
qpt_library(qpt_space_t *s, const char *module, qpt_space_t **out, char *why, size_t whylen)
{
    char dummy[8];
    if (why == NULL || whylen == 0) {
        why = dummy;
        whylen = sizeof(dummy);
    }
    if (s == NULL || module == NULL || out == NULL)
        return QP_EINVAL;
    *out = NULL;
    return s->ops->library(s, module, out, why, whylen);
}

int
qpt_run(qpt_space_t *s)
{
    if (s == NULL)
        return qpt_fail(s, QP_EUNSUPP, "not a process");
    return s->ops->run(s);
}

int
qpt_stop(qpt_space_t *s)
{
    if (s == NULL)
        return qpt_fail(s, QP_EUNSUPP, "not a process");
    return s->ops->stop(s);
}

int
qpt_ended(qpt_space_t *s, int *status)
{
    if (s == NULL || status == NULL)
        return QP_EINVAL;
    return s->ops->ended(s, status);
}

int
qpt_syscall(qpt_space_t *s, long nr, const uint64_t args[6], int64_t *ret)
{
    if (s == NULL || args == NULL || ret == NULL)
        return QP_EINVAL;
    return s->ops->syscall(s, nr, args, ret);
}

int
qpt_call_now(qpt_space_t *s, uint64_t fn, const uint64_t *args, int nargs, uint64_t *ret)
{
    if (s == NULL || ret == NULL || nargs < 0 || nargs > 6 || (nargs > 0 && args == NULL))
        return QP_EINVAL;
    return s->ops->call_now(s, fn, args, nargs, ret);
}

int
qpt_pid(const qpt_space_t *s)
{
    return s != NULL ? s->ops->pid(s) : 0;
}

int
qpt_watch(qpt_space_t *s, unsigned mask)
{
    if (s == NULL)
        return QP_EINVAL;
    return s->ops->watch(s, mask);
}

int
qpt_next_event(qpt_space_t *s, qpt_event_t *ev, int timeout_ms)
{
    if (s == NULL || ev == NULL)
        return QP_EINVAL;
    return s->ops->next_event(s, ev, timeout_ms);
}

int
qpt_set_callback(qpt_space_t *s, uint32_t kind, qpt_event_fn fn, void *arg)
{
    if (s == NULL || kind < QPT_EV_THREAD_START || kind > QPT_EV_EXIT)
        return qpt_fail(s, QP_EINVAL, "%u: not an event kind (QPT_EV_*)", kind);
    return s->ops->set_callback(s, kind, fn, arg);
}

int
qpt_wait(qpt_space_t *s, int timeout_ms)
{
    if (s == NULL)
        return QP_EINVAL;
    return s->ops->wait(s, timeout_ms);
}

int
qpt_commit_refused(const qpt_space_t *s, qpt_space_t **where, qpt_handle_t *h)
{
    if (s == NULL || where == NULL || h == NULL)
        return QP_EINVAL;
    if (s->refused != 0) {
        *where = (qpt_space_t *)s;
        *h = s->refused - 1;
        return 0;
    }
    for (qpt_space_t *l = s->libs; l != NULL; l = l->next_lib)
        if (!l->stale && l->refused != 0) {
            *where = l;
            *h = l->refused - 1;
            return 0;
        }
    return QP_ENOTFOUND;
}

