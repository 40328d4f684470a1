/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/* A library whose exported g calls its exported f through its own PLT (f may be
 * interposed, so the compiler neither inlines it nor calls it directly). */
__attribute__((noinline)) int
f(int x)
{
    return x * 3 + 1;
}

int
g(int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += f(i);
    return s;
}
