/* A cache workload (tests/trace-mem.sh, qp trace cachesim against cachegrind): rows and
 * columns of a 4 MB matrix, random updates of a 1 MB table. */
#include <stdio.h>
#define N 1024
static int m[N][N];
static long tab[1 << 17];
static long walk(void)
{
    long s = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            m[i][j] = i ^ j;
    for (int j = 0; j < N; j += 3)
        for (int i = 0; i < N; i++)
            s += m[i][j];
    unsigned x = 12345;
    for (int k = 0; k < 400000; k++) {
        x = x * 1103515245u + 12345u;
        tab[(x >> 8) & ((1 << 17) - 1)] += k;
    }
    for (int k = 0; k < (1 << 17); k += 7)
        s += tab[k];
    return s;
}
int main(void)
{
    printf("%ld\n", walk());
    return 0;
}
