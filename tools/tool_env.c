/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * PURPOSE: the environment variables the tools read for the library, which never reads
 * the environment itself: QP_DEBUG (the analysis' phase times, through the library's
 * phase callbacks) and QPT_LEAVE (procedures to leave in place, for ed_opts_t.leave).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tools/tool.h"

/*****************************************************************************
 * QP_DEBUG: the time of each phase of the analysis, on stderr
 */

static double
mono_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Seconds are counted from the first phase of the first analysis. */
static double debug_t0 = -1;

/* The resident set now, in MiB (/proc/self/statm's second field; 0 if unreadable). */
static size_t
rss_mib(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL)
        return 0;
    if (fscanf(f, "%lu %lu", &size, &resident) != 2)
        resident = 0;
    fclose(f);
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE) >> 20;
}

/* The peak resident set so far, in MiB (getrusage's ru_maxrss is in KiB). */
static size_t
peak_rss_mib(void)
{
    struct rusage u;
    return getrusage(RUSAGE_SELF, &u) == 0 ? (size_t)u.ru_maxrss >> 10 : 0;
}

int
tool_debug_on(void)
{
    return getenv("QP_DEBUG") != NULL;
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

void
tool_phase_end(void *arg, const char *phase, size_t nprocs)
{
    (void)arg;
    (void)nprocs;
    tool_heap_release();
    tool_test_stop(phase);
}

void
tool_debug_phase(void *arg, const char *phase, size_t nprocs)
{
    tool_phase_end(arg, phase, nprocs);
    double t = mono_now();
    if (debug_t0 < 0)
        debug_t0 = t;
    /* The CPU time of every thread, beside the wall time: --threads shows in the two.
     * And the main thread's: what is left on one core (the wall time of a quiet machine
     * with a core for every thread, which a loaded machine's wall time does not tell). */
    struct timespec c, m;
    double cpu = clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c) == 0
        ? (double)c.tv_sec + (double)c.tv_nsec / 1e9 : 0;
    double main_cpu = clock_gettime(CLOCK_THREAD_CPUTIME_ID, &m) == 0
        ? (double)m.tv_sec + (double)m.tv_nsec / 1e9 : 0;
    fprintf(stderr, "qp-debug: %8.3f s %8.3f cpu %8.3f main %6zu rss %6zu peak %s (%zu procedures)\n",
            t - debug_t0, cpu, main_cpu, rss_mib(), peak_rss_mib(), phase, nprocs);
}

void
tool_debug_note(void *arg, const char *line)
{
    (void)arg;
    fprintf(stderr, "qp-debug: %s\n", line);
}

/*****************************************************************************
 * QPT_LEAVE=name,name,... or QPT_LEAVE=@FILE (one name a line)
 */

/* The whole of the file PATH, NUL-terminated, or NULL (also when it cannot be read). */
static char *
read_file(const char *path)
{
    char why[256];
    FILE *f = tool_fopen_read(path, why, sizeof(why)); /* a FIFO is not waited on */
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        if (n + 1 >= cap) {
            char *v = realloc(buf, cap *= 2);
            if (v == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = v;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        if (got == 0)
            break;
        n += got;
    }
    fclose(f);
    if (buf != NULL)
        buf[n] = '\0';
    return buf;
}

int
tool_leave_names(tool_names_t *out)
{
    memset(out, 0, sizeof(*out));
    const char *list = getenv("QPT_LEAVE");
    if (list == NULL)
        return 0;
    char sep = ',';
    if (list[0] == '@') {
        /* A file that cannot be read leaves nothing in place, as it always did. */
        if ((out->buf = read_file(list + 1)) == NULL)
            return 0;
        sep = '\n';
    } else if ((out->buf = strdup(list)) == NULL)
        return -1;
    size_t cap = 1;
    for (const char *p = out->buf; *p; p++)
        cap += *p == sep;
    if ((out->v = malloc(cap * sizeof(*out->v))) == NULL) {
        tool_names_free(out);
        return -1;
    }
    for (char *p = out->buf; p != NULL;) {
        char *e = strchr(p, sep);
        if (e != NULL)
            *e++ = '\0';
        if (*p != '\0')
            out->v[out->n++] = p;
        p = e;
    }
    return 0;
}

void
tool_names_free(tool_names_t *names)
{
    free(names->v);
    free(names->buf);
    memset(names, 0, sizeof(*names));
}

int
tool_writable(const char *path, int via_rename)
{
    struct stat st;
    if (via_rename && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        errno = EISDIR;
        return 0;
    }
    if (!via_rename && access(path, W_OK) == 0)
        return 1;
    if (!via_rename && errno != ENOENT)
        return 0;
    char dir[4096];
    const char *slash = strrchr(path, '/');
    size_t n = slash == NULL ? 0 : (size_t)(slash - path);
    if (n >= sizeof(dir)) {
        errno = ENAMETOOLONG;
        return 0;
    }
    memcpy(dir, path, n);
    strcpy(dir + n, slash == NULL ? "." : n == 0 ? "/" : "");
    return access(dir, W_OK | X_OK) == 0;
}

int
tool_option_error(const char *prog, char *const *argv, int c)
{
    /* A long option as written (without "=VALUE"), else the short one getopt saw. */
    char name[64] = { '-', (char)optopt, '\0' };
    const char *arg = optind > 0 ? argv[optind - 1] : "";
    if (strncmp(arg, "--", 2) == 0 || optopt == 0)
        snprintf(name, sizeof(name), "%.*s", (int)strcspn(arg, "="), arg);
    fprintf(stderr, "%s: %s '%s' (try --help)\n", prog,
            c == ':' ? "missing argument to" : "unknown option", name);
    return 2;
}
