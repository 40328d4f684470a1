/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * A threaded-code interpreter: every handler ends in `goto *table[op]` (GNU computed
 * goto), so the CFG has indirect jumps whose targets are the address-taken labels.
 */
#include <stdio.h>

enum { LOADI, ADD, MUL, MOD, DEC, JNZ, PRINT, HALT };

/* Instructions are {op, a, b, c}: r[a] = r[b] OP r[c]; LOADI r[a] = b; JNZ r[a] -> b. */
static long __attribute__((noinline)) run(const int (*code)[4], int* nprint)
{
    static void* const table[] = { &&op_loadi, &&op_add, &&op_mul, &&op_mod, &&op_dec,
        &&op_jnz, &&op_print, &&op_halt };
    long r[8] = { 0 };
    const int* in;
    int pc = 0;

#define NEXT                                                                             \
    do {                                                                                 \
        in = code[pc++];                                                                 \
        goto* table[in[0]];                                                              \
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
    r[in[1]] = r[in[2]] % r[in[3]];
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
main(void)
{
    /* r0 = sum of i*i for i = 1..50, r1 = 50! mod 1000003, printed every 10 steps */
    static const int prog[][4] = {
        { LOADI, 0, 0 }, /* 0: r0 = 0 */
        { LOADI, 1, 1 }, /* 1: r1 = 1 */
        { LOADI, 2, 50 }, /* 2: r2 = i = 50 */
        { LOADI, 3, 1000003 },
        { LOADI, 5, 10 }, /* 4: r5 = 10, print countdown */
        { MUL, 4, 2, 2 }, /* 5: r4 = i*i */
        { ADD, 0, 0, 4 },
        { MUL, 1, 1, 2 },
        { MOD, 1, 1, 3 },
        { DEC, 5 },
        { JNZ, 5, 13 }, /* 10: skip the print */
        { PRINT, 0 },
        { LOADI, 5, 10 },
        { DEC, 2 }, /* 13 */
        { JNZ, 2, 5 },
        { PRINT, 1 },
        { ADD, 0, 0, 1 },
        { HALT, 0 },
    };
    int nprint = 0;
    long res = run(prog, &nprint);
    printf("result=%ld prints=%d\n", res, nprint);
    return (int)(res % 7);
}
