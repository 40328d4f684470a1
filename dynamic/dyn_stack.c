/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Call stacks of a stopped process's threads (dyn_proc_stacks), unwound by libdw's
 * Dwfl from the modules' call frame information. The threads are already stopped by us
 * under ptrace, which libdw is told (assume_ptrace_stopped): it reads their registers
 * and memory through the same tracer, from this thread.
 */
#include "config.h"

#include <elfutils/libdwfl.h>
#include <stdlib.h>

#include "dynamic/dyn.h"

#define MAX_FRAMES 1024

typedef struct walk {
    uint64_t *pcs;
    size_t n;
} walk_t;

static int
frame_cb(Dwfl_Frame *f, void *arg)
{
    walk_t *w = arg;
    Dwarf_Addr pc;
    bool activation;
    if (!dwfl_frame_pc(f, &pc, &activation) || pc == 0 || w->n == MAX_FRAMES)
        return DWARF_CB_ABORT;
    w->pcs[w->n++] = activation ? pc : pc - 1;
    return DWARF_CB_OK;
}

int
dyn_proc_stacks(dyn_proc_t *p, dyn_stack_fn fn, void *arg)
{
    static const Dwfl_Callbacks cb = {
        .find_elf = dwfl_linux_proc_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
    };
    size_t nth = 0;
    int rc = dyn_proc_threads(p, NULL, 0, &nth);
    if (rc < 0)
        return rc;
    dyn_thread_info_t *th = calloc(nth + 1, sizeof(*th));
    uint64_t *pcs = malloc(MAX_FRAMES * sizeof(uint64_t));
    Dwfl *d = th && pcs ? dwfl_begin(&cb) : NULL;
    if (d == NULL) {
        free(th);
        free(pcs);
        return th && pcs ? QP_EIO : QP_ENOMEM;
    }
    int pid = dyn_proc_pid(p);
    if ((rc = dyn_proc_threads(p, th, nth, &nth)) == 0
        && (dwfl_linux_proc_report(d, pid) != 0 || dwfl_report_end(d, NULL, NULL) != 0
            || dwfl_linux_proc_attach(d, pid, true) != 0))
        rc = QP_EIO;
    for (size_t i = 0; rc == 0 && i < nth; i++) {
        walk_t w = { pcs, 0 };
        /* (the innermost frame is the thread's pc even when nothing unwinds) */
        if (dwfl_getthread_frames(d, th[i].tid, frame_cb, &w) != 0 && w.n == 0)
            pcs[w.n++] = th[i].pc;
        rc = fn(arg, &th[i], pcs, w.n);
    }
    dwfl_end(d);
    free(th);
    free(pcs);
    return rc;
}
