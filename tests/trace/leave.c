/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Traced code entered from code that is not traced (tests/trace.sh rewrites it with
 * QPT_LEAVE=stay,stay2: both left in place): leaf1 and leaf2 are called only by stay,
 * directly - their callers record nothing, so they must record ENTER themselves; jumper
 * tail-jumps through a pointer into stay, which calls two traced procedures before it
 * returns for jumper (the ENTER after the jump names a callback, not the jump's target);
 * stay2 calls back through a pointer too. Found on python3.11 (a procedure left in place
 * that calls a traced one; _Py_Dealloc's `jmp *0x30(%rax)` into code that calls two).
 */
#include <stdio.h>

static volatile int sink;

__attribute__((noipa)) int leaf1(int x)
{
    if (x & 1)
        sink += x;
    return x + 1;
}

__attribute__((noipa)) int leaf2(int x)
{
    for (int i = 0; i < x % 5; i++)
        sink += i;
    return x * 2;
}

__attribute__((noipa)) int stay(int x)
{
    int a = leaf1(x);
    return leaf2(a) + a;
}

int (*volatile cb)(int) = leaf2;

__attribute__((noipa)) int stay2(int x)
{
    return cb(x) + leaf1(x) + 1;
}

int (*volatile fp)(int) = stay;
int (*volatile fp2)(int) = stay2;

__attribute__((noipa)) int jumper(int x)
{
    return fp(x + 1); /* a tail call through a pointer at -O2 */
}

__attribute__((noipa)) int jumper2(int x)
{
    return fp2(x ^ 3);
}

int main(void)
{
    int s = 0;
    for (int i = 0; i < 100; i++)
        s += jumper(i) + (i % 3 ? stay(i) : jumper2(i));
    printf("%d %d\n", s, sink);
    return 0;
}
