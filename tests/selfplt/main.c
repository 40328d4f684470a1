/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>

int g(int n);

int
main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 10;
    printf("g(%d) = %d\n", n, g(n));
    return 0;
}
