/* SPDX-License-Identifier: MIT */
/* A constructor and a destructor reached only through .init_array and .fini_array, beside
 * pointers in .data.rel.ro whose relocations a linker may write before theirs
 * (check_cfg's test_cfg_init_funcs_unsorted_relocs). */
#include <stdio.h>
#include <stdlib.h>

static int hits;
static void f0(void) { hits += 1; }
static void f1(void) { hits += 2; }
static void f2(void) { hits += 3; }
static void f3(void) { hits += 4; }
static void (*const table[])(void) = { f0, f1, f2, f3, f0, f1, f2, f3 };

/* Not a constant store: clang would evaluate the constructor and drop it. */
__attribute__((constructor)) void known_ctor(void) { hits = 100 + (getenv("QPT_KNOWN_CTOR") != NULL); }
__attribute__((destructor)) void known_dtor(void) { fflush(stdout); }

int
main(int argc, char **argv)
{
    (void)argv;
    table[argc & 7]();
    printf("%d\n", hits);
    return 0;
}
