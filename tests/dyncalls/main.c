/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * The program of tests/dyn-callsfrom.sh: calls that in-place patching cannot count with
 * the entry of their procedure, and calls in a program that execs and loads a library.
 *   run N            N times: cs_first (its first instruction a call, 5 bytes),
 *                    cs_reg (its first instruction `call *%rdi`, 2 bytes), then prints
 *                    "run N SUM"
 *   loop M           loop(M): M calls of work
 *   peek M           loop(M), then prints "cs_leaf intact" when cs_leaf's first bytes
 *                    are its own (no jump of an instrumentation there), else "... patched"
 *   exec K M         loop(K), then exec itself as `loop M`
 *   execdl K LIB M   loop(K), then exec itself as `dl LIB M`
 *   dl LIB M         dlopen LIB, call its lib_sum(100) M times (each calls lib_square 34
 *                    times), print "dl SUM"
 * Each mode exits 3.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cs_first(int x);
int cs_reg(int (*fn)(int), int x);

/* cs_leaf(x) = 2x; cs_first(x) = cs_leaf(x) + 1; cs_leaf2(self, x) = 2x; cs_reg(fn, x) =
 * fn(fn, x) + 1 (through %rdi, which holds fn). Aligned, with padding after each. */
__asm__(".text\n"
        ".p2align 4\n"
        ".globl cs_leaf\n.type cs_leaf,@function\n"
        "cs_leaf:\n"
        "  lea (%rdi,%rdi,1), %eax\n"
        "  ret\n"
        ".size cs_leaf,.-cs_leaf\n"
        ".p2align 4\n"
        ".globl cs_first\n.type cs_first,@function\n"
        "cs_first:\n"
        "  call cs_leaf\n"
        "  add $1, %eax\n"
        "  ret\n"
        ".size cs_first,.-cs_first\n"
        ".p2align 4\n"
        ".globl cs_leaf2\n.type cs_leaf2,@function\n"
        "cs_leaf2:\n"
        "  lea (%rsi,%rsi,1), %eax\n"
        "  ret\n"
        ".size cs_leaf2,.-cs_leaf2\n"
        ".p2align 4\n"
        ".globl cs_reg\n.type cs_reg,@function\n"
        "cs_reg:\n"
        "  call *%rdi\n"
        "  add $1, %eax\n"
        "  ret\n"
        ".size cs_reg,.-cs_reg\n");

int cs_leaf2(void *self, int x);
int cs_leaf(int x);
static volatile long sink;

__attribute__((noinline)) void
work(int i)
{
    sink += i;
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void
loop(int k)
{
    for (int i = 0; i < k; i++)
        work(i);
}

int
main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "run") == 0) {
        long s = 0;
        for (int i = 0, n = atoi(argv[2]); i < n; i++)
            s += cs_first(i) + cs_reg((int (*)(int))(void (*)(void))cs_leaf2, i);
        printf("run %s %ld\n", argv[2], s);
        return 3;
    }
    if (argc == 3 && strcmp(argv[1], "loop") == 0) {
        loop(atoi(argv[2]));
        printf("loop %s\n", argv[2]);
        return 3;
    }
    if (argc == 3 && strcmp(argv[1], "peek") == 0) {
        static const unsigned char own[4] = { 0x8d, 0x04, 0x3f, 0xc3 }; /* lea; ret */
        loop(atoi(argv[2]));
        printf("cs_leaf %s\n", memcmp((const void *)cs_leaf, own, 4) == 0 ? "intact" : "patched");
        return 3;
    }
    if (argc == 4 && strcmp(argv[1], "exec") == 0) {
        loop(atoi(argv[2]));
        printf("exec %s\n", argv[2]);
        fflush(stdout);
        execl("/proc/self/exe", argv[0], "loop", argv[3], (char *)NULL);
        perror("exec");
        return 2;
    }
    if (argc == 5 && strcmp(argv[1], "execdl") == 0) {
        loop(atoi(argv[2]));
        printf("execdl %s\n", argv[2]);
        fflush(stdout);
        execl("/proc/self/exe", argv[0], "dl", argv[3], argv[4], (char *)NULL);
        perror("exec");
        return 2;
    }
    if (argc == 4 && strcmp(argv[1], "dl") == 0) {
        void *h = dlopen(argv[2], RTLD_NOW);
        long (*sum)(int) = h != NULL ? (long (*)(int))dlsym(h, "lib_sum") : NULL;
        if (sum == NULL) {
            fprintf(stderr, "dlopen %s: %s\n", argv[2], dlerror());
            return 2;
        }
        long s = 0;
        for (int i = 0, m = atoi(argv[3]); i < m; i++)
            s += sum(100);
        printf("dl %ld\n", s);
        return 3;
    }
    fprintf(stderr, "usage: main run N | loop M | peek M | exec K M | execdl K LIB M | dl LIB M\n");
    return 2;
}
