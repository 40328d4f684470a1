/* tests/dyn-trace.sh: chunk called every 10 ms for 0.6 s (60 times), each calling leaf
 * 1000 times; rare once. */
#include <stdio.h>
#include <time.h>
static __attribute__((noipa)) int leaf(int x) { return x * 3 + 1; }
static __attribute__((noipa)) int rare(int x) { int r = x; for (int k = 0; k < x; k++) r += k * 7; return r; }
static __attribute__((noipa)) long chunk(void)
{
    long s = 0;
    for (int i = 0; i < 1000; i++)
        s += leaf(i);
    return s;
}
int main(void)
{
    long s = 0;
    struct timespec ts = { 0, 10 * 1000 * 1000 };
    for (int round = 0; round < 60; round++) {
        s += chunk();
        if (round == 10)
            s += rare(round);
        nanosleep(&ts, NULL);
    }
    printf("%ld\n", s);
    return 0;
}
