/* Code of a stripped file without unwind tables, built by clang with frame pointers except
 * in leaf functions, one section per function, linked by lld (which fills between
 * sections with int3), that only a lea reaches and that calls nothing vouched for twice:
 *  - twice, inc3: leaves without a frame after lld's int3 fill;
 *  - after_trap: sets up its frame, after guard, whose last block is a CHECK's trap
 *    (`int3; ud2`, of which the analysis decodes the int3 only);
 *  - sections_after_call (sections_data.S): sets up its frame right after a call to
 *    abort that ends sections_check, with no padding;
 *  - table (sections_data.S): data in the text section of an assembler file, after an
 *    alignment's nops, that decodes as a function (`mov %rdi,%rax; ret`): it may be data.
 * main prints what they computed. */
#include <stdio.h>

#define HIDDEN __attribute__((noinline)) static

extern const unsigned char sections_table[16];
int sections_check(int x);
int sections_after_call(int x);

HIDDEN int twice(int x) { return 2 * x; }
HIDDEN int inc3(int x) { return x + 3; }
__attribute__((noinline)) int sink(int x) { static volatile int s; s += x; return s; }

HIDDEN int
guard(int x)
{
    if (__builtin_expect(x > 1000000, 0)) {
        __asm__ volatile("int3\n\tud2");
        __builtin_unreachable();
    }
    return sink(x) + 1;
}

HIDDEN int after_trap(int x) { return sink(x) + sink(x + 1); }

HIDDEN int
apply(int (*volatile f)(int), int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += f(i);
    return s;
}

int
main(void)
{
    const unsigned char *volatile t = sections_table;
    int sum = 0;
    for (int i = 0; i < 16; i++)
        sum += t[i];
    printf("twice %d inc3 %d guard %d after_trap %d check %d after_call %d table %d\n",
           apply(twice, 11), apply(inc3, 7), apply(guard, 3), apply(after_trap, 5),
           apply(sections_check, 2), apply(sections_after_call, 9), sum);
    return 0;
}
