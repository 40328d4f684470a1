/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/*
 * varread: print the memory a mutator named (qpt_alloc_named) in a rewritten program,
 * as its runs left it in their profile - knowing only the profile and the names, not
 * the addresses the writing mutator got.
 *
 *   varread PROFILE NAME...      one line per name: NAME WORD... (each word summed over
 *                                the runs); exit 1 if a name is not there
 *
 * Build: cc varread.c $(pkg-config --cflags --libs qpt) -o varread
 */
#include <stdio.h>
#include <stdlib.h>

#include <qpt/qpt.h>

int
main(int argc, char **argv)
{
    int status = 0;
    if (argc < 3) {
        fprintf(stderr, "usage: varread PROFILE NAME...\n");
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        char why[512];
        uint64_t addr;
        size_t bytes;
        if (qpt_profile_var(argv[1], argv[i], &addr, &bytes, why, sizeof(why)) < 0) {
            fprintf(stderr, "varread: %s\n", why);
            status = 1;
            continue;
        }
        uint64_t *w = calloc(bytes / 8 + 1, sizeof(*w));
        if (w == NULL
            || qpt_profile_read_named(argv[1], argv[i], w, bytes / 8, why, sizeof(why)) < 0) {
            fprintf(stderr, "varread: %s\n", w == NULL ? "out of memory" : why);
            free(w);
            status = 1;
            continue;
        }
        printf("%s", argv[i]);
        for (size_t k = 0; k < bytes / 8; k++)
            printf(" %llu", (unsigned long long)w[k]);
        printf("\n");
        free(w);
    }
    return status;
}
