/* tests/names.sh: a static function with the same name as one in b.c. */
static int __attribute__((noinline)) helper(int x) { int s = 0; for (int i = 0; i < x; i++) s += i ^ x; return s + 1; }
int a(int x) { return helper(x) * 2; }
