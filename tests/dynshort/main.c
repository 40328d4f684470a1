/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * A procedure of 3 bytes (xor %eax,%eax; ret) followed by int3 padding, for
 * tests/dyn-short.sh: `prog N` calls it N times and prints the sum; `prog wait FILE`
 * calls it until FILE exists, then says whether its code is byte for byte as at start.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__asm__(".text\n"
        ".p2align 4\n"
        ".globl short_fn\n"
        ".type short_fn,@function\n"
        "short_fn:\n"
        "    xor %eax,%eax\n"
        "    ret\n"
        ".size short_fn,.-short_fn\n"
        ".fill 29,1,0xcc\n"
        ".p2align 4\n");

int short_fn(void);

int
main(int argc, char **argv)
{
    static unsigned char before[64];
    const unsigned char *code = (const unsigned char *)(void *)short_fn;
    long sum = 0;

    memcpy(before, code, sizeof(before));
    if (argc == 3 && strcmp(argv[1], "wait") == 0) {
        while (access(argv[2], F_OK) != 0) {
            sum += short_fn() + 1;
            usleep(1000);
        }
        printf("%s\n", memcmp(before, code, sizeof(before)) == 0 ? "same" : "differs");
        return 0;
    }
    for (long i = 0, n = argc > 1 ? atol(argv[1]) : 0; i < n; i++)
        sum += short_fn() + 1;
    printf("sum=%ld\n", sum);
    return 3;
}
