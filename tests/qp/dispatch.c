/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * A threaded-code interpreter whose handlers each end in their own `goto *table[op]`
 * (GNU computed goto), reading its program from a global that the compiler cannot fold:
 * every dispatch block may go to every handler, so the indirect edges (which cannot
 * carry a counter) make cycles. qp must still count every block exactly
 * (tests/qp-truth.sh compares its counts with naive's).
 */
#include <stdio.h>

enum { LOADI, ADD, MUL, MOD, DEC, JNZ, PRINT, HALT };

/* r0 = sum of i*i for i = 1..50, r1 = 50! mod 1000003, printed every 10 steps. */
int prog[][4] = {
    { LOADI, 0, 0 }, { LOADI, 1, 1 }, { LOADI, 2, 50 }, { LOADI, 3, 1000003 },
    { LOADI, 4, 10 }, { LOADI, 5, 0 },
    { MUL, 6, 2, 2 }, /* 6: loop */
    { ADD, 0, 0, 6 }, { MUL, 1, 1, 2 }, { MOD, 1, 1, 3 }, { MOD, 7, 2, 4 },
    { JNZ, 7, 13 }, { PRINT, 0 },
    { DEC, 2 }, /* 13 */
    { JNZ, 2, 6 }, { PRINT, 1 }, { HALT, 0 },
};

/* Called from a handler only: in a position-independent build, qp counts its calls at
 * that call site (QP_PROC_BY_CALLS), which rest on run's computed gotos. */
static long __attribute__((noinline)) modulo(long a, long b)
{
    return a % b;
}

static long __attribute__((noinline)) run(int (*code)[4], int *nprint)
{
    static void *table[] = { &&op_loadi, &&op_add, &&op_mul, &&op_mod, &&op_dec,
        &&op_jnz, &&op_print, &&op_halt };
    long r[8] = { 0 };
    int *in;
    int pc = 0;

#define NEXT                                                                             \
    do {                                                                                 \
        in = code[pc++];                                                                 \
        goto *table[in[0]];                                                              \
    } while (0)
    NEXT;
op_loadi:
    r[in[1]] = in[2];
    NEXT;
op_add:
    r[in[1]] = r[in[2]] + r[in[3]];
    NEXT;
op_mul:
    r[in[1]] = r[in[2]] * r[in[3]];
    NEXT;
op_mod:
    r[in[1]] = modulo(r[in[2]], r[in[3]]);
    NEXT;
op_dec:
    r[in[1]]--;
    NEXT;
op_jnz:
    if (r[in[1]] != 0)
        pc = in[2];
    NEXT;
op_print:
    printf("r%d=%ld\n", in[1], r[in[1]]);
    ++*nprint;
    NEXT;
op_halt:
#undef NEXT
    return r[in[1]];
}

int
main(int argc, char **argv)
{
    int nprint = 0;
    long v = 0;
    (void)argv;
    for (int i = 0; i < 2 + argc; i++)
        v += run(prog, &nprint);
    printf("%ld %d\n", v, nprint);
    return 0;
}
