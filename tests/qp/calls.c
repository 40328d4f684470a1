/* Known call counts for tests/callgraph.sh: every number below follows from the code. */
#include <stdio.h>
#if defined(__clang__)
#define NOI __attribute__((noinline))
#else
#define NOI __attribute__((noipa))
#endif
static NOI int leaf(int x) { return x * 3 + 1; }
static NOI int mid(int x)
{
    int s = 0;
    for (int i = 0; i < 4; i++)
        s += leaf(x + i);
    return s;
}
static NOI int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
static NOI int is_odd(int n);
static NOI int is_even(int n) { return n == 0 ? 1 : is_odd(n - 1); }
static NOI int is_odd(int n) { return n == 0 ? 0 : is_even(n - 1); }
static NOI int viaptr(int x) { return leaf(x) + 1; }
static NOI int tailer(int x) { return leaf(x + 1); }
int (*volatile fp)(int) = viaptr;
NOI int other(int x) { return mid(x) + leaf(x); }
int main(int argc, char **argv)
{
    (void)argv;
    long s = 0;
    for (int i = 0; i < 10; i++)
        s += mid(i);          /* mid 10 (+1 from other), leaf 44 from mid */
    for (int i = 0; i < 5; i++)
        s += fp(i);           /* viaptr 5 through a pointer, leaf 5 from viaptr */
    for (int i = 0; i < 3; i++)
        s += tailer(i);       /* leaf 3 from tailer */
    s += other(argc);         /* leaf 1 from other */
    s += fib(10);             /* fib 177 calls: 1 from main, 176 from fib */
    s += is_even(7);          /* is_even 4 (1 from main, 3 from is_odd), is_odd 4 */
    for (int i = 0; i < 2; i++)
        puts("k");            /* puts 2 (or its PLT stub) */
    printf("%ld\n", s);
    return 0;
}
