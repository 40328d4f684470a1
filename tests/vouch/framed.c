/* Code of a stripped file without unwind tables, built with frame pointers, that only a
 * lea reaches and that calls nothing: nothing vouches for it but the way it starts, as a
 * compiled function starts (on a 16-byte boundary after padding, `push %rbp; mov
 * %rsp,%rbp`).
 *  - square, cube: a lea's address passed to apply(), no calls;
 *  - bare: the same, without a frame (omit-frame-pointer): it may be data;
 *  - hop: as bare, with a tail call to leaf, which sets up its frame: leaf, a jump's
 *    target, is measured, hop may be data.
 * main prints what they computed. */
#include <stdio.h>

#define HIDDEN __attribute__((noipa)) static

HIDDEN int square(int x) { volatile int t = x; return t * t; }
HIDDEN int cube(int x) { volatile int t = x; return t * t * t; }
HIDDEN __attribute__((optimize("omit-frame-pointer"))) int bare(int x) { return x + 7; }
HIDDEN int leaf(int x) { volatile int t = x; return t + 1; }
HIDDEN __attribute__((optimize("omit-frame-pointer"))) int hop(int x) { return leaf(x + 2); }

HIDDEN int
apply(int (*f)(int), int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += f(i);
    return s;
}

int
main(void)
{
    printf("square %d cube %d bare %d hop %d\n", apply(square, 11), apply(cube, 7),
           apply(bare, 5), apply(hop, 3));
    return 0;
}
