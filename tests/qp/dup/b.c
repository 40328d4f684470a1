/* tests/names.sh: a static function with the same name as one in a.c. */
static int __attribute__((noinline)) helper(int x) { int s = 1; for (int i = 0; i < x; i++) s *= 3; return s + x; }
int b(int x) { return helper(x) + 5; }
