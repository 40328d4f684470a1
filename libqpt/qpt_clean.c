/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Processes as a whole, outside a space: the children of a launcher, and what a killed
 * mutator left in a process taken out (dynamic/'s dyn_proc_children and dyn_clean_pid
 * behind the public names).
 */
#include "config.h"

#include <string.h>

#include "dynamic/dyn.h"
#include "include/qpt/qpt.h"

int
qpt_children(int pid, int **pids, size_t *n)
{
    if (pid <= 0 || pids == NULL || n == NULL)
        return QP_EINVAL;
    return dyn_proc_children(pid, pids, n);
}

int
qpt_clean(int pid, qpt_clean_report_t *out, char *why, size_t whylen)
{
    dyn_clean_report_t r;
    if (out == NULL)
        return QP_EINVAL;
    memset(&r, 0, sizeof(r));
    int rc = dyn_clean_pid(pid, &r, why, whylen);
    *out = (qpt_clean_report_t) { r.regions, r.jumps, r.moved, r.unmapped, r.kept, r.busy,
                                  r.breaks, r.stub, r.fds, r.foreign_brk, r.tracer_fds,
                                  r.mapped_fds };
    return rc;
}
