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
 * Output never depends on timing, so a run under dyn must print what a plain run prints.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    fprintf(stderr, "usage: target count N | serve THREADS | spin THREADS\n");
    return 2;
}
