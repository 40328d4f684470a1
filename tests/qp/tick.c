/* tests/dyn-trace.sh: leaf called 1000 times every 10 ms for 0.6 s, rare once. */
#include <time.h>
#include <stdio.h>
static __attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }
static __attribute__((noinline)) int rare(int x) { int r = x; for (int k = 0; k < x; k++) r += k * 7; return r; }
int main(void)
{
    long s = 0;
    struct timespec ts = { 0, 10 * 1000 * 1000 };
    for (int round = 0; round < 60; round++) {
        for (int i = 0; i < 1000; i++)
            s += leaf(i);
        if (round == 10)
            s += rare(round);
        nanosleep(&ts, NULL);
    }
    printf("%ld\n", s);
    return 0;
}
