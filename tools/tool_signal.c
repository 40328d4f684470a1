/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * PURPOSE: the signals of the tools that read files through mappings and write an output
 * through a temporary file (qpt-rewrite, qp): a SIGBUS at an address of a mapped input
 * (the file was truncated while it was read) ends the process in one line, exit status
 * 1, and SIGINT, SIGTERM, SIGHUP end it as they would; either way the temporary output
 * is removed first. And the test hook QPT_TEST_STOP_AT. The handlers use only
 * async-signal-safe calls (unlink, write, raise, pause, _exit).
 */
#include "config.h"

#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/qpt/qpt_rewrite.h"
#include "tools/tool_cli.h"

static const char *sig_prog = "qpt";   /* the tool's name, first on the line */
static const char *sig_why = "changed while it was read"; /* after the input's path */
static char tmp_path[PATH_MAX];        /* the temporary output */
/* tmp_path holds it: stored with release after tmp_path is written, loaded with acquire
 * by the handlers, which may run on any thread (a pool's too) */
static atomic_int tmp_live;
static atomic_int progress_live; /* a progress line is on the terminal */

void
tool_signal_temp(void *arg, const char *path)
{
    (void)arg;
    atomic_store_explicit(&tmp_live, 0, memory_order_release);
    if (path != NULL && strlen(path) < sizeof(tmp_path)) {
        memcpy(tmp_path, path, strlen(path) + 1);
        atomic_store_explicit(&tmp_live, 1, memory_order_release);
    }
    if (path != NULL)
        tool_test_stop("temporary output");
}

void
tool_signal_progress(int on)
{
    atomic_store(&progress_live, on != 0);
}

/* Append the N bytes of S to LINE (of SIZE bytes, *AT used), cut at its end. */
static void
append(char *line, size_t size, size_t *at, const char *s, size_t n)
{
    if (n > size - *at)
        n = size - *at;
    memcpy(line + *at, s, n);
    *at += n;
}

/*
 * A SIGBUS at an address of a mapped input (qpt_mapped_input_at): "PROG: PATH: WHY",
 * the temporary output removed, exit status 1, from whichever thread faulted first
 * (others that fault wait for it). Any other SIGBUS is a bug: it takes its default
 * action.
 */
static void
on_sigbus(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    const char *input = si->si_code > 0 ? qpt_mapped_input_at(si->si_addr) : NULL;
    if (input == NULL) {
        signal(sig, SIG_DFL);
        if (si->si_code <= 0)
            raise(sig); /* sent: the fault would not come again */
        return;         /* the faulting instruction runs again, without the handler */
    }
    static atomic_flag ending = ATOMIC_FLAG_INIT;
    if (atomic_flag_test_and_set(&ending))
        for (;;)
            pause(); /* another thread faulted too: its _exit ends this one */
    if (atomic_load_explicit(&tmp_live, memory_order_acquire))
        unlink(tmp_path);
    char line[PATH_MAX + 256];
    size_t n = 0;
    if (atomic_load(&progress_live)) /* the progress line goes first */
        append(line, sizeof(line) - 1, &n, "\r\033[K", 4);
    append(line, sizeof(line) - 1, &n, sig_prog, strlen(sig_prog));
    append(line, sizeof(line) - 1, &n, ": ", 2);
    append(line, sizeof(line) - 1, &n, input, strlen(input));
    append(line, sizeof(line) - 1, &n, ": ", 2);
    append(line, sizeof(line) - 1, &n, sig_why, strlen(sig_why));
    line[n++] = '\n';
    (void)!write(STDERR_FILENO, line, n);
    _exit(1);
}

static void
on_signal(int sig)
{
    if (atomic_load_explicit(&tmp_live, memory_order_acquire))
        unlink(tmp_path);
    signal(sig, SIG_DFL);
    raise(sig);
}

void
tool_signal_on_bus(const char *prog, const char *why)
{
    sig_prog = prog;
    sig_why = why;
    struct sigaction bus;
    memset(&bus, 0, sizeof(bus));
    bus.sa_sigaction = on_sigbus;
    bus.sa_flags = SA_SIGINFO;
    sigemptyset(&bus.sa_mask);
    sigaction(SIGBUS, &bus, NULL);
}

void
tool_signal_setup(const char *prog, const char *why)
{
    tool_signal_on_bus(prog, why);
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        /* Keep an ignored signal ignored (nohup). */
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        sigaction(sigs[i], &sa, NULL);
    }
}

void
tool_test_stop(const char *phase)
{
    static const char *at; /* QPT_TEST_STOP_AT, read once ("" when not set) */
    if (at == NULL)
        at = getenv("QPT_TEST_STOP_AT") != NULL ? getenv("QPT_TEST_STOP_AT") : "";
    if (phase != NULL && at[0] != '\0' && strcmp(at, phase) == 0)
        raise(SIGSTOP); /* every thread stops until a SIGCONT */
}
