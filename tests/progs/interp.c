/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * A switch-dispatch bytecode interpreter: a stack machine whose main loop is one dense
 * switch (a jump table inside a loop). The program counts the primes below 3000 by
 * trial division; the opcode counts are printed, so a profile can be checked against
 * them.
 */
#include <stdio.h>
#include <stdlib.h>

/* clang-format off */
enum op { PUSH, LOAD, STORE, ADD, SUB, MUL, MOD, LT, EQ, JMP, JZ, PRINT, HALT, DUP, POP, NOP };
/* clang-format on */

static const char* const names[] = { "push", "load", "store", "add", "sub", "mul", "mod",
    "lt", "eq", "jmp", "jz", "print", "halt", "dup", "pop", "nop" };

static long __attribute__((noinline))
run(const long* code, long* vars, unsigned long* counts)
{
    long st[64];
    int sp = 0;
    long pc = 0;
    for (;;) {
        long op = code[pc++];
        counts[op]++;
        switch (op) {
        case PUSH: st[sp++] = code[pc++]; break;
        case LOAD: st[sp++] = vars[code[pc++]]; break;
        case STORE: vars[code[pc++]] = st[--sp]; break;
        case ADD: sp--, st[sp - 1] += st[sp]; break;
        case SUB: sp--, st[sp - 1] -= st[sp]; break;
        case MUL: sp--, st[sp - 1] *= st[sp]; break;
        case MOD: sp--, st[sp - 1] %= st[sp]; break;
        case LT: sp--, st[sp - 1] = st[sp - 1] < st[sp]; break;
        case EQ: sp--, st[sp - 1] = st[sp - 1] == st[sp]; break;
        case JMP: pc = code[pc]; break;
        case JZ: pc = st[--sp] ? pc + 1 : code[pc]; break;
        case PRINT: printf("out %ld\n", st[--sp]); break;
        case DUP: sp++, st[sp - 1] = st[sp - 2]; break;
        case POP: sp--; break;
        case NOP: break;
        case HALT: return sp ? st[sp - 1] : 0;
        default: fprintf(stderr, "bad op %ld\n", op); exit(9);
        }
    }
}

static long code[256];
static int ncode;
static void
e1(long op)
{
    code[ncode++] = op;
}
static void
e2(long op, long arg)
{
    code[ncode++] = op;
    code[ncode++] = arg;
}
static int
here(void)
{
    return ncode;
}
static void
patch(int at, long to)
{
    code[at + 1] = to;
}

enum { N, D, ISP, COUNT };

int
main(void)
{
    unsigned long counts[16] = { 0 };
    long vars[4] = { 0 };
    int outer, jend, inner, jbody, jdone, body, jcomp, comp, done, jnext, jprint, jnext2,
        next;

    /* clang-format off */
    e2(PUSH, 0); e2(STORE, COUNT);
    e2(PUSH, 2); e2(STORE, N);
    outer = here();                 /* while (n < 3000) */
    e2(LOAD, N); e2(PUSH, 3000); e1(LT); jend = here(); e2(JZ, 0);
    e2(PUSH, 1); e2(STORE, ISP); e2(PUSH, 2); e2(STORE, D);
    inner = here();                 /* while (!(n < d * d)) */
    e2(LOAD, N); e2(LOAD, D); e1(DUP); e1(MUL); e1(LT); jbody = here(); e2(JZ, 0);
    jdone = here(); e2(JMP, 0);
    body = here();                  /* if (n % d == 0) composite */
    e2(LOAD, N); e2(LOAD, D); e1(MOD); jcomp = here(); e2(JZ, 0);
    e2(LOAD, D); e2(PUSH, 1); e1(ADD); e2(STORE, D); e2(JMP, inner);
    comp = here();
    e2(PUSH, 0); e2(STORE, ISP); e1(NOP);
    done = here();
    e2(LOAD, ISP); jnext = here(); e2(JZ, 0);
    e2(LOAD, COUNT); e2(PUSH, 1); e1(ADD); e2(STORE, COUNT);
    e2(LOAD, N); e2(PUSH, 2950); e1(LT); jprint = here(); e2(JZ, 0);
    jnext2 = here(); e2(JMP, 0);
    patch(jprint, here());
    e2(LOAD, N); e1(PRINT);
    next = here();
    e2(LOAD, N); e2(PUSH, 1); e1(ADD); e2(STORE, N); e2(JMP, outer);
    patch(jend, here());
    e2(LOAD, COUNT); e1(DUP); e1(PRINT); e1(DUP); e1(POP); e1(HALT);
    /* clang-format on */
    patch(jbody, body);
    patch(jdone, done);
    patch(jcomp, comp);
    patch(jnext, next);
    patch(jnext2, next);

    long r = run(code, vars, counts);
    for (int op = 0; op < 16; op++)
        printf("%-5s %lu\n", names[op], counts[op]);
    printf("primes below 3000: %ld (code size %d)\n", r, ncode);
    return r == 430 ? 0 : 1;
}
