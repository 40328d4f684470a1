/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The program of tests/dyn-libs.sh, linked against libqt.so. The work of N (one call of
 * work): N calls of lib_sum(100), of strverscmp and of malloc (each freed).
 *   main run N     work of N at once, prints "sum=S", exits with status 3
 *   main serve     prints "ready", then for each line N on its input the work of N and
 *                  "done N"; exits with status 3 at the end of its input
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long lib_sum(int n);

__attribute__((noinline)) static long
work(int n)
{
    long s = 0;
    for (int i = 0; i < n; i++) {
        void *volatile p = malloc(16 + (size_t)i % 64);
        s += lib_sum(100);
        s += strverscmp(i % 2 ? "a10" : "a9", "a9") > 0;
        free(p);
    }
    return s;
}

int
main(int argc, char **argv)
{
    char line[64];

    if (argc == 3 && strcmp(argv[1], "run") == 0) {
        printf("sum=%ld\n", work(atoi(argv[2])));
        return 3;
    }
    if (argc != 2 || strcmp(argv[1], "serve") != 0) {
        fprintf(stderr, "usage: main run N | main serve\n");
        return 2;
    }
    printf("ready\n");
    fflush(stdout);
    while (fgets(line, sizeof(line), stdin) != NULL) {
        int n = atoi(line);
        long s = work(n);
        printf("done %d %ld\n", n, s);
        fflush(stdout);
    }
    return 3;
}
