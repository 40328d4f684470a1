/* Code that a stripped file without unwind tables reaches only through pointers (as most
 * of chromium's): nothing but the pointers and the code's own calls vouch for it.
 *  - op_add, op_sub: leaves whose addresses only the table `ops` holds (relocated words
 *    of .data.rel.ro in a PIE, as a vtable's slots);
 *  - mixer: its address only formed by a lea, passed to apply(); it calls scale and
 *    offset, which main calls directly too;
 *  - lone: a lea's address, no calls: nothing vouches for it (it may be data).
 * Each prints nothing; main prints what they computed. */
#include <stdio.h>

#define HIDDEN __attribute__((noipa)) static

HIDDEN int op_add(int a, int b) { return a + b; }
HIDDEN int op_sub(int a, int b) { return a - b; }
static int (*const ops[])(int, int) = { op_add, op_sub };

HIDDEN int scale(int x) { return 3 * x + 1; }
HIDDEN int offset(int x) { return x ^ 0x55; }
HIDDEN int mixer(int x) { return scale(x) + offset(x); }
HIDDEN int lone(int x) { return x * x; }

HIDDEN int
apply(int (*f)(int), int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += f(i);
    return s;
}

int
main(int argc, char **argv)
{
    (void)argv;
    volatile int pick = argc; /* the calls through ops stay indirect */
    int acc = 0;
    for (int i = 0; i < 30; i++)
        acc = ops[(pick + i) % 2](acc, i);
    printf("ops %d mixer %d lone %d direct %d\n", acc, apply(mixer, 17), apply(lone, 9),
           scale(2) + offset(5));
    return 0;
}
