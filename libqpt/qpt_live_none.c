/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * libqpt built without dynamic/ (./configure --disable-dynamic): no live processes.
 * qpt_attach and qpt_spawn refuse, so a live space never outlives its creation: its
 * kind needs only a close; a file's kind refuses every call of a process's life.
 */
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

int
qpt_children(int pid, int **pids, size_t *n)
{
    (void)pid;
    (void)pids;
    (void)n;
    return QP_EUNSUPP;
}

int
qpt_watch_unguarded(const qpt_space_t *s)
{
    return s == NULL ? QP_EINVAL : 0; /* (no process is ever watched) */
}

int
qpt_clean(int pid, qpt_clean_report_t *out, char *why, size_t whylen)
{
    (void)pid;
    (void)out;
    return refuse(why, whylen);
}

static void
none_close(qpt_space_t *s, int kill)
{
    (void)s;
    (void)kill;
}

const qpt_space_ops_t qpt_live_ops = {
    .kind = "process",
    .live = 1,
    .close = none_close,
};
