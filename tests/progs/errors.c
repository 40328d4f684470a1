/*
 * An error reporter in the style of PostgreSQL's ereport: it returns for notices and
 * longjmps or exits for errors. Where the caller knows the level is an error, the
 * compiler puts nothing after the call (__builtin_unreachable), so the next function's
 * code follows it directly. The analysis must keep those callers measurable (the call
 * returns, in general) and the rewritten program must behave the same (tests/corpus.sh).
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

static jmp_buf recover;
static int notices, errors;

__attribute__((noinline)) void report(int level, const char *msg, int arg)
{
    if (level < 20) {
        notices++;
        printf("notice: %s %d\n", msg, arg);
        return;
    }
    errors++;
    printf("error: %s %d\n", msg, arg);
    if (level >= 30) {
        printf("fatal: %d notices, %d errors\n", notices, errors);
        exit(3);
    }
    longjmp(recover, 1);
}

__attribute__((noinline)) void fail_range(int v)
{
    report(20, "out of range", v);
    __builtin_unreachable();
}

__attribute__((noinline)) int check(int v)
{
    if (v % 7 == 3)
        report(10, "odd value", v);
    if (v > 40)
        fail_range(v);
    return v * 2;
}

__attribute__((noinline)) void fail_fatal(int v)
{
    report(30, "fatal value", v);
    __builtin_unreachable();
}

__attribute__((noinline)) int sum_checked(int from, int to)
{
    int s = 0;
    for (int v = from; v < to; v++)
        s += check(v);
    return s;
}

int main(void)
{
    for (int round = 0; round < 4; round++) {
        if (setjmp(recover) == 0)
            printf("round %d: %d\n", round, sum_checked(round * 15, round * 15 + 12));
        else
            printf("round %d: recovered\n", round);
    }
    fail_fatal(notices + errors);
}

/* Keeps main, which ends with a call to fail_fatal, from ending the text section: a call
 * with no procedure after it cannot be given its way on, and its caller would stay in
 * place (correct, but not what this program tests). */
__attribute__((noinline, used)) int after_main(int x)
{
    return x + 1;
}
