/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */

/* Preloaded: this f interposes the library's own. */
int
f(int x)
{
    return x + 1000000;
}
