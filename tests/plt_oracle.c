/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/*
 * The names we give x86-64 PLT stubs against BFD's synthetic symbols (issue 31). usage:
 * plt_oracle FILE... ; prints one line per file: "same (N PLT symbols)", "DIFFERS: <the first
 * difference>", "bfd (N PLT symbols)" (we leave its stubs to BFD) or "skip: <why it does not open>".
 * tests/plt-oracle.sh runs it over every program and library of the system. Exit
 * status: 1 when any differs, else 0.
 */
#include <stdio.h>

#include "cfg/cfg_priv.h"

int
main(int argc, char **argv)
{
    int bad = 0;
    for (int i = 1; i < argc; i++) {
        char why[512] = "";
        int rc = cfg_bfd_plt_check(argv[i], why, sizeof(why));
        if (rc == 0)
            printf("%s: same (%s)\n", argv[i], why);
        else if (rc == 1)
            printf("%s: DIFFERS: %s\n", argv[i], why), bad = 1;
        else if (rc == 2)
            printf("%s: bfd (%s)\n", argv[i], why);
        else
            printf("%s: skip: %s (%d)\n", argv[i], why, rc);
    }
    return bad;
}
