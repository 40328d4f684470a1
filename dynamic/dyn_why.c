/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * Why a process cannot be traced: EPERM says nothing by itself, so the process is
 * looked at in /proc (gone, a zombie, a kernel thread, traced by someone else, another
 * user's) and so is what Yama allows. Shared by every live session (dyn's, libqpt's).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dynamic/dyn.h"

/* The first line of /proc/PID/status starting with KEY, or 0 when none (into BUF). */
static int
status_field(int pid, const char *key, char *buf, size_t cap)
{
    char path[64], line[256];
    size_t n = strlen(key);
    FILE *f;
    int found = 0;

    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    while (!found && fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, key, n) == 0) {
            snprintf(buf, cap, "%s", line + n + strspn(line + n, " \t"));
            buf[strcspn(buf, "\n")] = '\0';
            found = 1;
        }
    fclose(f);
    return found;
}

/* kernel.yama.ptrace_scope, or -1 without Yama. */
static int
yama_scope(void)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    int scope = -1;

    if (f != NULL) {
        if (fscanf(f, "%d", &scope) != 1)
            scope = -1;
        fclose(f);
    }
    return scope;
}

/* Is PID a kernel thread (PF_KTHREAD in the flags of /proc/PID/stat)? */
static int
is_kthread(int pid)
{
    char path[64], buf[1024];
    unsigned long flags = 0;
    FILE *f;
    char *rp = NULL;

    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    if ((f = fopen(path, "r")) != NULL) {
        if (fgets(buf, sizeof(buf), f) != NULL)
            rp = strrchr(buf, ')');
        fclose(f);
    }
    /* ") S ppid pgrp session tty_nr tpgid flags" */
    return rp != NULL && sscanf(rp + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags) == 1
        && (flags & 0x00200000ul) != 0;
}

const char *
dyn_proc_why(int pid, int err, char *buf, size_t cap)
{
    char st[64] = "", tracer[64] = "", uid[64] = "", comm[64] = "";
    int scope = yama_scope();
    long tp = 0, ruid = -1, euid = -1;

    if (!status_field(pid, "State:", st, sizeof(st)))
        return "no such process";
    if (st[0] == 'Z' || st[0] == 'X')
        return "is a zombie (exited, not yet reaped by its parent)";
    if (err != EPERM && err != EACCES)
        return strerror(err);
    if (is_kthread(pid))
        return "is a kernel thread (it has no program to instrument)";
    if (status_field(pid, "TracerPid:", tracer, sizeof(tracer))
        && (tp = strtol(tracer, NULL, 10)) > 0) {
        char path[64];
        FILE *f;
        snprintf(path, sizeof(path), "/proc/%ld/comm", tp);
        if ((f = fopen(path, "r")) != NULL) {
            if (fgets(comm, sizeof(comm), f) == NULL)
                comm[0] = '\0';
            comm[strcspn(comm, "\n")] = '\0';
            fclose(f);
        }
        snprintf(buf, cap,
            "is already traced by process %ld (%s): only one tracer at a time; detach "
            "the debugger or strace first",
            tp, comm[0] ? comm : "?");
        return buf;
    }
    if (status_field(pid, "Uid:", uid, sizeof(uid))
        && sscanf(uid, "%ld %ld", &ruid, &euid) == 2 && geteuid() != 0
        && (ruid != (long)geteuid() || euid != (long)geteuid())) {
        snprintf(buf, cap,
            "belongs to another user (uid %ld): ptrace not permitted; run dyn as that "
            "user or as root",
            euid);
        return buf;
    }
    if (scope >= 1 && geteuid() != 0) {
        snprintf(buf, cap, "ptrace not permitted by kernel.yama.ptrace_scope = %d (%s)",
            scope,
            scope == 1       ? "only descendants: use `dyn run`, run as root, or `sysctl "
                               "kernel.yama.ptrace_scope=0`"
                : scope == 2 ? "only root may attach"
                             : "no attaching at all until reboot");
        return buf;
    }
    return "ptrace not permitted (the process is not dumpable: setuid, or made so by "
           "prctl; or a security module refuses)";
}
