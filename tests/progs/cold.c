/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Hot/cold splitting: gcc -O2 moves paths that lead to a cold function or are marked
 * unlikely (__builtin_expect) out of line into .text.unlikely as `foo.cold` fragments,
 * reached from foo by a jump and jumping back into it. Some unlikely paths run (once),
 * so a profile must count blocks in the fragments too. decode() has a jump table some
 * of whose entries point into decode.cold.
 */
#include <stdio.h>
#include <stdlib.h>

static int errors;

static void __attribute__((cold, noinline)) report_error(const char* what, long v)
{
    errors++;
    fprintf(stderr, "cold: %s %ld\n", what, v);
}

static void __attribute__((cold, noreturn, noinline)) fatal(const char* what)
{
    fprintf(stderr, "fatal: %s\n", what);
    exit(100);
}

static long __attribute__((noinline)) process(long* buf, int n)
{
    long s = 0;
    for (int i = 0; i < n; i++) {
        if (__builtin_expect(buf[i] < 0, 0)) {
            report_error("negative", buf[i]);
            buf[i] = -buf[i] * 3 + i;
            s -= buf[i] / 2;
            continue;
        }
        if (__builtin_expect(buf[i] > 1000000, 0))
            fatal("value out of range"); /* never happens */
        s += buf[i] * (i & 3);
    }
    return s;
}

static int __attribute__((noinline)) parse_digit(int c)
{
    if (__builtin_expect(c < '0' || c > '9', 0)) {
        report_error("not a digit", c);
        return c % 10;
    }
    return c - '0';
}

static long __attribute__((noinline)) checked_div(long a, long b)
{
    if (__builtin_expect(b == 0, 0)) {
        report_error("division by zero, numerator", a);
        return 0;
    }
    return a / b;
}

/* A jump table whose holes and default lead to the cold fragment (gcc -O2). */
static int __attribute__((noinline)) decode(unsigned k)
{
    switch (k) {
    case 0: return 11;
    case 1: return 23;
    case 2: return 35;
    case 3: return 47;
    case 4: return 59;
    case 8: return 61;
    case 9: return 73;
    case 10: return 85;
    case 11: return 97;
    case 12: return 109;
    default: fatal("bad opcode"); /* never happens */
    }
}

int
main(void)
{
    long buf[64];
    long sum = 0;
    for (int i = 0; i < 64; i++)
        buf[i] = (i % 17 == 5) ? -i : i * i;
    sum += process(buf, 64);
    for (const char* p = "12345x78"; *p; p++)
        sum = sum * 10 + parse_digit(*p);
    for (long b = -2; b <= 2; b++)
        sum += checked_div(1000, b);
    for (unsigned k = 0; k < 13; k++)
        if (k < 5 || k > 7)
            sum += decode(k);
    printf("sum=%ld errors=%d\n", sum, errors);
    return errors;
}
