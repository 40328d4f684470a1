/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * setjmp/longjmp out of nested calls: an error raised four frames down returns to the
 * setjmp site with a code; a second buffer is used for a retry loop; sigsetjmp and
 * siglongjmp are used once too. Locals modified after setjmp are volatile.
 */
#include <setjmp.h>
#include <stdio.h>

static jmp_buf env;
static sigjmp_buf senv;
static int frames;

static void __attribute__((noinline)) level4(int x)
{
    frames++;
    if (x % 5 == 0)
        longjmp(env, x + 1);
    printf("level4 x=%d\n", x);
}

static void __attribute__((noinline)) level3(int x)
{
    frames++;
    level4(x * 2 + 1);
}
static void __attribute__((noinline)) level2(int x)
{
    frames++;
    level3(x + 3);
}
static void __attribute__((noinline)) level1(int x)
{
    frames++;
    level2(x);
}

static void __attribute__((noinline)) deep_siglongjmp(int n)
{
    if (n == 0)
        siglongjmp(senv, 42);
    deep_siglongjmp(n - 1);
}

int
main(void)
{
    volatile int jumps = 0, normal = 0;
    for (volatile int i = 0; i < 12; i++) {
        int r = setjmp(env);
        if (r == 0) {
            level1(i);
            normal++;
        } else {
            jumps++;
            printf("i=%d: longjmp returned %d\n", i, r);
        }
    }
    volatile int tries = 0;
    if (setjmp(env) < 3) {
        tries++;
        if (tries < 3)
            longjmp(env, tries);
    }
    int s = sigsetjmp(senv, 1);
    if (s == 0)
        deep_siglongjmp(10);
    printf("jumps=%d normal=%d frames=%d tries=%d siglongjmp=%d\n", jumps, normal, frames,
        tries, s);
    return jumps;
}
