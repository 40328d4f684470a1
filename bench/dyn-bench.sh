#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# dyn speed (a benchmark, not a test): the cost per hit of an entry counter (an empty
# procedure called 100M times, plain vs under `dyn run --count empty`: per-CPU (rseq),
# locked and plain increments, median of 5, wall and CPU time), of a timed call (a
# start and a stop: `--time`, `-e 'time wall(empty)'`, `-e 'time cpu(empty)'`), and
# attach/instrument/detach times with --all on python3.11.
# Usage: bench/dyn-bench.sh BUILDDIR   (DYN=PATH: another dyn, e.g. main's, for a
# side-by-side run; DYN_BENCH_PARTS=timers: the timers only; callsfrom: the stop of
# --calls-from only)
set -u
b=${1:-.}
DYN=${DYN:-$b/tools/dyn}
E=$b/tests/dyn/empty
n=100000000
med() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
run5() {
    i=0
    while [ $i -lt 5 ]; do
        i=$((i + 1))
        "$@" 2>/dev/null | sed -n 's/ ns\/call$//p' | head -n 1
    done | med
}
# A timed call: a start at the entry and a stop at the exit (cpu: two system calls, so
# fewer calls).
timers() {
    m=$((n / 10))
    c=$((n / 500))
    p=$(run5 "$E" $m)
    pc=$(run5 "$E" $c)
    tw=$(run5 "$DYN" run --time empty -- "$E" $m)
    ew=$(run5 "$DYN" run -e 'time wall(empty)' -- "$E" $m)
    ec=$(run5 "$DYN" run -e 'time cpu(empty)' -- "$E" $c)
    echo "timed call (start + stop, median of 5; empty call $p ns): --time $tw ns (+$(echo "$tw - $p" | bc) ns), -e 'time wall' $ew ns (+$(echo "$ew - $p" | bc) ns), -e 'time cpu' $ec ns (+$(echo "$ec - $pc" | bc) ns)"
}
# The stop of --calls-from (its call sites chosen before it): python3.11's Py_RunMain,
# 105 sites, median of 5 (dyn -v's "stopped N ms").
callsfrom() {
    i=0
    while [ $i -lt 5 ]; do
        i=$((i + 1))
        "$DYN" run -v --calls-from Py_RunMain -- /usr/bin/python3.11 -c pass 2>&1 >/dev/null |
            sed -n 's/.*instrumented, [0-9]* refused, stopped \([0-9.]*\) ms.*/\1/p'
    done | med
}
if [ "${DYN_BENCH_PARTS:-all}" = timers ]; then
    timers
    exit 0
fi
if [ "${DYN_BENCH_PARTS:-all}" = callsfrom ]; then
    echo "--calls-from Py_RunMain (python3.11, 105 sites): stopped $(callsfrom) ms to install (median of 5)"
    exit 0
fi
# The counter's three forms: per CPU (rseq, the default), locked (the target's rseq
# turned off: the fallback), plain (--no-atomic); wall and CPU time per call.
cpu5() {
    i=0
    while [ $i -lt 5 ]; do
        i=$((i + 1))
        "$@" 2>/dev/null | sed -n 's/ cpu ns\/call$//p' | head -n 1
    done | med
}
add() { echo "$1 - $2" | bc; }
plain=$(run5 "$E" $n)
percpu=$(run5 "$DYN" run --count empty -- "$E" $n)
locked=$(run5 env GLIBC_TUNABLES=glibc.pthread.rseq=0 "$DYN" run --count empty -- "$E" $n)
fast=$(run5 "$DYN" run --no-atomic --count empty -- "$E" $n)
echo "empty call: $plain ns; with entry counter: per CPU (rseq) $percpu ns (+$(add "$percpu" "$plain") ns), lock incq $locked ns (+$(add "$locked" "$plain") ns), incq $fast ns (+$(add "$fast" "$plain") ns)"
plain=$(cpu5 "$E" $n)
percpu=$(cpu5 "$DYN" run --count empty -- "$E" $n)
locked=$(cpu5 env GLIBC_TUNABLES=glibc.pthread.rseq=0 "$DYN" run --count empty -- "$E" $n)
fast=$(cpu5 "$DYN" run --no-atomic --count empty -- "$E" $n)
echo "empty call, CPU time: $plain ns; with entry counter: per CPU (rseq) $percpu ns (+$(add "$percpu" "$plain") ns), lock incq $locked ns (+$(add "$locked" "$plain") ns), incq $fast ns (+$(add "$fast" "$plain") ns)"
timers

PY=/usr/bin/python3.11
[ -x $PY ] || exit 0
$PY -c 'import time
t = time.time()
def f(x): return x + 1
s = 0
while time.time() - t < 600:
    for i in range(10000): s = f(s)' &
pid=$!
sleep 1
i=0
while [ $i -lt 5 ]; do
    i=$((i + 1))
    rm -f /tmp/dyn-bench.$$.csv # dyn -o replaces only a regular file
    /usr/bin/time -f '%e' "$DYN" attach $pid --all --duration 0.5 -v -o /tmp/dyn-bench.$$.csv 2>&1 >/dev/null |
        sed -n -e 's/.*instrumented, \([0-9]*\) refused, stopped \([0-9.]*\) ms, \([0-9.]*\) s after.*/install \2 ready \3 /p' \
            -e 's/.*removed, stopped \([0-9.]*\) ms/remove \1 /p' -e '/^[0-9.]*$/p' | tr -d '\n'
    echo
done | awk '{print $2, $6, $7, $4}' | sort -n > /tmp/dyn-bench.$$
echo "python3.11 --all (median of 5): attached and instrumented $(awk '{print $4}' /tmp/dyn-bench.$$ | med) s after dyn started (reading and analysis included), stopped for install $(awk '{print $1}' /tmp/dyn-bench.$$ | med) ms, for removal $(awk '{print $2}' /tmp/dyn-bench.$$ | med) ms, whole session incl. the 0.5 s window $(awk '{print $3}' /tmp/dyn-bench.$$ | med) s"
rm -f /tmp/dyn-bench.$$ /tmp/dyn-bench.$$.csv
kill $pid
