/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * IFUNC: a GNU indirect function whose resolver picks an implementation at load time
 * (R_X86_64_IRELATIVE in static and PIE binaries, a PLT/GOT entry otherwise), plus a
 * call through libc's own IFUNCs (memcpy, strlen, memset). The resolver's choice does not
 * change the output: both implementations compute the same value.
 */
#include <stdio.h>
#include <string.h>

typedef unsigned long (*sum_fn)(const unsigned char*, unsigned long);

static unsigned long
sum_bytes_plain(const unsigned char* p, unsigned long n)
{
    unsigned long s = 0;
    for (unsigned long i = 0; i < n; i++)
        s += p[i] * (i % 5 + 1);
    return s;
}

static unsigned long
sum_bytes_unrolled(const unsigned char* p, unsigned long n)
{
    unsigned long s = 0, i = 0;
    for (; i + 5 <= n; i += 5)
        s += p[i] + 2ul * p[i + 1] + 3ul * p[i + 2] + 4ul * p[i + 3] + 5ul * p[i + 4];
    for (; i < n; i++)
        s += p[i] * (i % 5 + 1);
    return s;
}

static int resolver_calls;

static __attribute__((used)) sum_fn
resolve_sum_bytes(void)
{
    __builtin_cpu_init();
    resolver_calls++; /* runs during relocation processing, before main */
    return __builtin_cpu_supports("sse2") ? sum_bytes_unrolled : sum_bytes_plain;
}

unsigned long
sum_bytes(const unsigned char* p, unsigned long n)
    __attribute__((ifunc("resolve_sum_bytes")));

int
main(void)
{
    unsigned char buf[1000];
    char text[128];
    for (int i = 0; i < 1000; i++)
        buf[i] = (unsigned char)(i * 37 + 11);
    memset(text, 0, sizeof text);
    memcpy(text, "indirect functions resolve once", 31);
    unsigned long a = sum_bytes(buf, 1000), b = sum_bytes_plain(buf, 1000);
    printf("sum=%lu plain=%lu same=%d len=%zu\n", a, b, a == b, strlen(text));
    printf("resolver ran: %d\n", resolver_calls > 0);
    return a == b ? 0 : 1;
}
