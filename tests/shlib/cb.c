// Copyright 2026 the qpt authors
// SPDX-License-Identifier: MIT
// A library that calls back into its program (tests/shlib.sh): the program's callback
// throws through lib_apply's frame, which the library cannot see.
int lib_apply(int (*cb)(int), int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += cb(i) & 3 ? cb(i) : 1;
    return s;
}
