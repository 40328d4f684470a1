/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A target for tests/dyn.sh with known call counts of work():
 *   target count N         calls work() exactly N times (and other() N/2 times)
 *   target serve THREADS   prints "ready"; for each line N on stdin, THREADS new threads
 *                          call work() N times each, then prints "done"; at end of input
 *                          prints a checksum of everything
 *   target spin THREADS    prints "ready"; THREADS threads call work() and check every
 *                          result until end of input, then print "errors=E"
 *   target calls N         caller() calls work() N times at one call site, other() (N+2)/3
 *                          times at another, and small() through a function pointer
 *   target sleep N MS      napper() sleeps MS milliseconds, N times, each time called
 *                          through rec(5), which recurses 5 levels deep
 * Output never depends on timing, so a run under dyn must print what a plain run prints.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__GNUC__) && !defined(__clang__)
#define NOIPA __attribute__((noinline, noipa))
#else
#define NOIPA __attribute__((noinline))
#endif

NOIPA unsigned long
work(unsigned long x);
NOIPA unsigned long
other(unsigned long x);
NOIPA unsigned long
small(unsigned long x);

NOIPA unsigned long
work(unsigned long x)
{
    unsigned long r = x * 2654435761u;
    r ^= r >> 13;
    return r + 7;
}

NOIPA unsigned long
other(unsigned long x)
{
    return x * 3 + 1;
}

/* Short first instructions: threads are often stopped between them. */
NOIPA unsigned long
small(unsigned long x)
{
    return (x >> 1) ^ (x + 5);
}

/* Two call sites with known counts, and an indirect call (through a register). */
static unsigned long (*volatile indirect)(unsigned long) = small;

NOIPA unsigned long
caller(long n);
NOIPA unsigned long
caller(long n)
{
    unsigned long s = 0;
    for (long i = 0; i < n; i++) {
        s += work((unsigned long)i);
        if (i % 3 == 0)
            s += other((unsigned long)i);
        s += indirect((unsigned long)i);
    }
    return s;
}

/* Known wall time, nested and recursive. */
static volatile unsigned long sink;

NOIPA void
napper(long ms);
NOIPA void
napper(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0)
        ;
    sink++;
}

NOIPA unsigned long
rec(int depth, long ms);
NOIPA unsigned long
rec(int depth, long ms)
{
    unsigned long r;
    if (depth == 0) {
        napper(ms);
        return 1;
    }
    r = rec(depth - 1, ms);
    sink += r; /* not a tail call */
    return r + 1;
}

/* work() computed another way, to check results under instrumentation. */
static unsigned long
expect(unsigned long x)
{
    volatile unsigned long m = 2654435761u;
    unsigned long r = x * m;
    return (r ^ (r >> 13)) + 7;
}

static volatile int stop;
static long per_thread;

static void *
serve_thread(void *arg)
{
    unsigned long *sum = arg, s = 0;
    for (long i = 0; i < per_thread; i++)
        s += work((unsigned long)i);
    *sum = s;
    return NULL;
}

static void *
spin_thread(void *arg)
{
    unsigned long *errors = arg, i = 0;
    while (!stop) {
        if (work(i) != expect(i) || small(i) != ((i >> 1) ^ (i + 5)))
            (*errors)++;
        i++;
    }
    return NULL;
}

int
main(int argc, char **argv)
{
    char line[64];
    unsigned long sum = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 3 && strcmp(argv[1], "count") == 0) {
        long n = atol(argv[2]);
        for (long i = 0; i < n; i++) {
            sum += work((unsigned long)i);
            if (i % 2 == 0)
                sum += other((unsigned long)i);
        }
        printf("sum=%lu\n", sum);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "calls") == 0) {
        printf("sum=%lu\n", caller(atol(argv[2])));
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "sleep") == 0) {
        long n = atol(argv[2]), ms = atol(argv[3]);
        for (long i = 0; i < n; i++)
            sum += rec(5, ms);
        printf("sum=%lu\n", sum);
        return 0;
    }
    if (argc == 3 && (strcmp(argv[1], "serve") == 0 || strcmp(argv[1], "spin") == 0)) {
        int nt = atoi(argv[2]);
        pthread_t th[16];
        unsigned long res[16] = { 0 };
        if (nt < 1 || nt > 16)
            return 2;
        printf("ready\n");
        if (argv[1][1] == 'p') {
            unsigned long errors = 0;
            for (int t = 0; t < nt; t++)
                pthread_create(&th[t], NULL, spin_thread, &res[t]);
            while (fgets(line, sizeof(line), stdin) != NULL)
                ;
            stop = 1;
            for (int t = 0; t < nt; t++) {
                pthread_join(th[t], NULL);
                errors += res[t];
            }
            printf("errors=%lu\n", errors);
            return errors != 0;
        }
        while (fgets(line, sizeof(line), stdin) != NULL) {
            per_thread = atol(line);
            for (int t = 0; t < nt; t++)
                pthread_create(&th[t], NULL, serve_thread, &res[t]);
            for (int t = 0; t < nt; t++) {
                pthread_join(th[t], NULL);
                sum += res[t];
            }
            printf("done\n");
        }
        printf("sum=%lu\n", sum);
        return 0;
    }
    fprintf(stderr,
        "usage: target count N | serve THREADS | spin THREADS | calls N | "
        "sleep N MS\n");
    return 2;
}
