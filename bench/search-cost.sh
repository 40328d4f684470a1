#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# The bottleneck search's own cost (issue 33): python3.11 runs a fixed CPU-bound
# workload (the same number of iterations each time), natively and under `dyn search
# --max-overhead 5% run`; the ratio of their wall times, median of ROUNDS (3) runs,
# side by side in one run. The search keeps inserting and removing timers while the
# program runs: the ratio is what a user pays for the answer.
# Usage: bench/search-cost.sh [DYN]   (ROUNDS=N, ITER=N: 40M, about 3 s natively)
set -u
DYN=${1:-${top_builddir:-.}/tools/dyn}
PY=/usr/bin/python3.11
ROUNDS=${ROUNDS:-3}
ITER=${ITER:-40000000}
[ -x "$PY" ] || { echo "search-cost: no $PY: skipped"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/work.py" <<PY
import sys
def inner(i):
    return (i * i) % 7
def outer(n):
    s = 0
    for i in range(n):
        s += inner(i)
    return s
print(outer($ITER))
PY
now() { date +%s.%N; }
med() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
i=0
: >"$tmp/native"
: >"$tmp/search"
while [ $i -lt "$ROUNDS" ]; do
    i=$((i + 1))
    t0=$(now)
    "$PY" "$tmp/work.py" >/dev/null
    t1=$(now)
    "$DYN" search --max-overhead 5 run -- "$PY" "$tmp/work.py" >"$tmp/out" 2>&1
    t2=$(now)
    echo "$t1 - $t0" | bc -l >>"$tmp/native"
    echo "$t2 - $t1" | bc -l >>"$tmp/search"
done
n=$(med <"$tmp/native")
s=$(med <"$tmp/search")
printf 'search cost (python3.11, %s iterations, median of %s): native %.2f s, under dyn search %.2f s, ratio %.3f\n' \
    "$ITER" "$ROUNDS" "$n" "$s" "$(echo "$s / $n" | bc -l)"
grep -E "^ 1\. |stopped" "$tmp/out" | head -3
