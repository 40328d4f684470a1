/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * Two switches in one function, each on an enum loaded from memory whose default cannot
 * be reached: clang and gcc -O2 emit no bounding compare, and the two tables (relative
 * 4-byte entries in a PIE, absolute 8-byte ones outside) follow each other in .rodata.
 * Run with N: each `op` case runs N/8 times, each `kind` case N/7 times when N is a
 * multiple of 56 (tests/scantab.sh).
 */
#include <stdio.h>
#include <stdlib.h>
enum op { A, B, C, D, E, F, G, H };
enum kind { K0, K1, K2, K3, K4, K5, K6 };
struct ins { enum op op; enum kind kind; int v; };

__attribute__((noinline)) int step(const struct ins *p, int acc)
{
    switch (p->op) {
    case A: acc += p->v; break;
    case B: acc -= p->v * 3; break;
    case C: acc ^= p->v; break;
    case D: acc = acc * 7 + 1; break;
    case E: acc <<= 1; break;
    case F: acc = acc / 3 + p->v; break;
    case G: acc |= 0x40; break;
    case H: acc = ~acc; break;
    default: __builtin_unreachable();
    }
    switch (p->kind) {
    case K0: return acc * 11 + 0x1111;
    case K1: return acc * 13 + 0x2222;
    case K2: return acc * 17 - 0x3333;
    case K3: return acc ^ 0x12345;
    case K4: return (acc >> 2) + 0x4444;
    case K5: return acc + acc / 5;
    case K6: return (acc & 0xffff) * 3 + 0x5555;
    default: __builtin_unreachable();
    }
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    struct ins prog[56];
    for (int i = 0; i < 56; i++) prog[i] = (struct ins){ i % 8, i % 7, i };
    int acc = 0;
    for (int k = 0; k < n; k++)
        acc = step(&prog[k % 56], acc);
    printf("%d\n", acc);
    return 0;
}
