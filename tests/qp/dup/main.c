/* tests/names.sh: calls a() and b() ten times each. */
#include <stdio.h>
int a(int); int b(int);
int main(void) { int s = 0; for (int i = 0; i < 10; i++) s += a(i) + b(i); printf("%d\n", s); return 0; }
