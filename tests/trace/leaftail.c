/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * A procedure whose whole body is a tail call of a C library leaf (cmp: `jmp
 * strcmp@plt` at -O2), called in a binary search: its activations record nothing, so a
 * loop through its call sites is silent unless the tracer counts the leaf's return as
 * this procedure's. The walk took a later iteration's record for an earlier one (dash's
 * builtin lookup: one compare fewer, no mark).
 */
#include <stdio.h>
#include <string.h>

static const char *const names[] = {
    "alias", "bg", "break", "cd", "command", "continue", "echo", "eval", "exec", "exit",
    "export", "false", "fg", "getopts", "hash", "jobs", "kill", "local", "printf", "pwd",
    "read", "readonly", "return", "set", "shift", "test", "times", "trap", "true", "type",
    "ulimit", "umask", "unalias", "unset", "wait",
};

__attribute__((noipa)) static int
cmp(const char *const *a, const char *const *b)
{
    return strcmp(*a, *b);
}

__attribute__((noipa)) static int
find(const char *key)
{
    size_t lo = 0, hi = sizeof(names) / sizeof(names[0]);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = cmp(&key, &names[mid]);
        if (c == 0)
            return (int)mid;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return -1;
}

int main(void)
{
    static const char *const keys[] = { "echo", "[", "test", "zz", "alias", "wait", "kill" };
    int s = 0;
    for (int r = 0; r < 50; r++)
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
            s += find(keys[i]) + 1;
    printf("%d\n", s);
    return 0;
}
