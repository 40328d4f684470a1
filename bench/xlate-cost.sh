#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# The cost of one indirect jump translated at run time (issue 13): a loop of N indirect
# tail calls through a table of pointers (targets the analysis cannot know), native and
# after `qpt-rewrite --driver=none`; prints the medians of ROUNDS runs (CPU time) and the
# difference per jump in ns and cycles (at the clock /proc/cpuinfo reports).
# Usage: bench/xlate-cost.sh [path/to/qpt-rewrite]   (N, ROUNDS from the environment)
set -u
QPT_REWRITE=${1:-tools/qpt-rewrite}
N=${N:-50000000}
ROUNDS=${ROUNDS:-5}
dir=$(mktemp -d /tmp/qpt-xlate.XXXXXX) || exit 1
trap 'rm -rf "$dir"' EXIT
cat >"$dir/cost.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
typedef long (*op_t)(long);
__attribute__((noinline)) long inc1(long a) { return a + 1; }
__attribute__((noinline)) long inc2(long a) { return a + 2; }
op_t volatile ops[2] = { inc1, inc2 };
/* jmp *(%rax,%rdx,8): an indirect tail call of unknown targets */
__attribute__((noinline)) long step(long i, long a) { return ops[i & 1](a); }
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000, a = 0;
    for (long i = 0; i < n; i++)
        a = step(i, a);
    printf("%ld\n", a);
    return 0;
}
C
gcc -O2 -o "$dir/cost" "$dir/cost.c" || exit 1
"$QPT_REWRITE" --driver=none "$dir/cost" -o "$dir/cost.xl" 2>"$dir/log" || { cat "$dir/log"; exit 1; }
grep -q " 1 jumps of unknown targets translated" "$dir/log" || { echo "xlate-cost: no jump translated: $(head -n 1 "$dir/log")"; exit 1; }
[ "$("$dir/cost" 1000)" = "$("$dir/cost.xl" 1000)" ] || { echo "xlate-cost: outputs differ"; exit 1; }
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
run() { for _ in $(seq "$ROUNDS"); do /usr/bin/time -f "%U %S" "$1" "$N" 2>&1 >/dev/null | awk '{print $1 + $2}'; done | median; }
native=$(run "$dir/cost")
xlate=$(run "$dir/cost.xl")
mhz=$(awk -F: '/cpu MHz/ {print $2; exit}' /proc/cpuinfo)
awk -v a="$native" -v b="$xlate" -v n="$N" -v mhz="${mhz:-0}" 'BEGIN {
    ns = (b - a) * 1e9 / n
    printf "xlate-cost: %d translated jumps: native %.2f s, rewritten %.2f s: %.1f ns per jump", n, a, b, ns
    if (mhz > 0) printf " (%.0f cycles at %.0f MHz)", ns * mhz / 1000, mhz
    printf "\n"
}'
