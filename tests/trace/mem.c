/* Address tracing test (tests/trace-mem.sh): globals, the stack, the heap, structs,
 * strings ops (rep movs/stos, movs), %fs (the stack protector), SSE, modify accesses,
 * calls through pointers, recursion, a switch table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int g[256];
struct rec { int a, b; long c; double d; } recs[16];
static volatile long counter;

static int sum(const int *v, int n) { int s = 0; for (int i = 0; i < n; i++) s += v[i]; return s; }
static void fill(struct rec *p, int n)
{
    for (int i = 0; i < n; i++) {
        p[i].a = i;
        p[i].b = i * 2;
        p[i].c += p[i].a + p[i].b;
        p[i].d = p[i].c * 0.5;
    }
}
static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
static int op(int k, int x)
{
    switch (k) {
    case 0: return x + 1;
    case 1: return x * 3;
    case 2: return x - 7;
    case 3: return x ^ 0x55;
    case 4: return x << 2;
    case 5: return x / 3;
    default: return 0;
    }
}
static int (*fp[2])(const int *, int) = { sum, sum };

static void strings(char *dst, const char *src, long n)
{
    long c = n;
    char *d = dst;
    const char *s = src;
    __asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(c) : : "memory");
    long q = n / 8;
    unsigned long v = 0x0101010101010101ul;
    d = dst + n;
    __asm__ volatile("rep stosq" : "+D"(d), "+c"(q) : "a"(v) : "memory");
    d = dst;
    s = src + 1;
    __asm__ volatile("movsb" : "+D"(d), "+S"(s) : : "memory");
    q = 0;
    __asm__ volatile("rep stosb" : "+D"(d), "+c"(q) : "a"(v) : "memory"); /* rcx 0 */
}

int main(int argc, char **argv)
{
    int loc[64];
    char buf[300];
    for (int i = 0; i < 256; i++)
        g[i] = i * argc;
    for (int i = 0; i < 64; i++)
        loc[i] = g[i] + g[i + 64];
    fill(recs, 16);
    int *h = malloc(100 * sizeof(int));
    for (int i = 0; i < 100; i++)
        h[i] = op(i % 7, i);
    strings(buf, (const char *)g, 100);
    for (int i = 0; i < 20; i++) {
        counter++;
        __atomic_fetch_add(&g[i], 1, __ATOMIC_SEQ_CST);
    }
    long x = 5;
    __atomic_exchange_n(&x, 7, __ATOMIC_SEQ_CST);
    long exp = 7;
    __atomic_compare_exchange_n(&x, &exp, 9, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    double dv[8];
    for (int i = 0; i < 8; i++)
        dv[i] = recs[i].d * 2;
    printf("%d %d %ld %d %d %g %ld\n", fp[argc & 1](loc, 64), sum(h, 100), recs[3].c, fib(15),
           buf[150], dv[3], x);
    free(h);
    return 0;
}
