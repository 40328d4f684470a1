/* Copyright 2026 the qpt authors
 * SPDX-License-Identifier: MIT */
/* The library tests/qpt/life_prog dlopens (tests/check_qpt_life.c). */
volatile long lib_total;
long lib_work(long i);

__attribute__((noinline)) long
lib_work(long i)
{
    lib_total += i;
    return lib_total;
}
