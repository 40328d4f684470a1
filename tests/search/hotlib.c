/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/* A shared library whose CPU-bound procedure lies two calls deep: hot_entry -> hot_mid
 * -> hot_crunch, beside a light hot_check; used by libdeep.c. */
volatile double hot_sink;
/* Each procedure ends with a store after its last call: room for a live exit snippet. */
volatile int hot_done;

__attribute__((noinline)) void
hot_crunch(int n)
{
    double x = 0;
    for (int i = 0; i < n; i++)
        x += (double)i * 0.5;
    hot_sink = x;
    hot_done = 3;
}

__attribute__((noinline)) void
hot_check(int k)
{
    hot_sink += k;
    hot_done = 4;
}

__attribute__((noinline)) void
hot_mid(int n)
{
    hot_crunch(n);
    hot_check(n);
    hot_done = 2;
}

void
hot_entry(int n)
{
    hot_mid(n);
    hot_done = 1;
}
