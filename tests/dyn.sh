#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# dyn against ground truth (tests/dyn/target.c knows how often it calls work()):
#  - usage errors exit 2;
#  - `dyn run --count work -o CSV -- target count N`: work has exactly N calls, the CSV
#    has its header, and the program prints what a plain run prints;
#  - attach to a running multithreaded target, measure a window in which a known number
#    of calls is made, detach: the count is exact, no mapping of ours is left, and the
#    target's whole output equals an unattached run's;
#  - 20 attach/detach cycles on a target whose threads call work() without pause: it
#    finishes with every result correct.
# Skips (77) when this system does not allow ptrace. Exit status: 0 pass, 1 fail, 99 error.
set -u
: "${top_srcdir:=.}"
: "${top_builddir:=.}"
DYN=$top_builddir/tools/dyn
T=$top_builddir/tests/dyn/target
dir=$top_builddir/tests/dyn.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
fail=0
bg_pids=

bad() {
    echo "FAIL $*"
    fail=1
}

cleanup() {
    exec 3>&- 4>&- 2>/dev/null
    for p in $bg_pids; do kill "$p" 2>/dev/null; done
}
trap cleanup EXIT

# wait_for FILE PATTERN: up to 20 s until FILE has a line matching PATTERN.
wait_for() {
    i=0
    while ! grep -q "$2" "$1" 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 400 ] && return 1
        sleep 0.05
    done
    return 0
}

# Usage errors.
for args in "" "frob" "attach" "attach x --count a" "attach 1" "run --count a" \
    "run --count a --duration -1 -- true" "attach 1 --time work"; do
    # shellcheck disable=SC2086
    "$DYN" $args >/dev/null 2>&1
    st=$?
    [ $st -eq 2 ] || bad "dyn $args: exit $st, expected 2"
done

# Is ptrace allowed here?
scope=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0)
"$DYN" run --count work -- "$T" count 10 >"$dir/probe.out" 2>"$dir/probe.err"
if [ $? -ne 0 ]; then
    if grep -q -i -e 'not permitted' -e 'ptrace' "$dir/probe.err"; then
        echo "SKIP: ptrace not permitted (yama ptrace_scope=$scope): $(head -n 1 "$dir/probe.err")"
        exit 77
    fi
    bad "dyn run probe: $(cat "$dir/probe.err")"
    exit 1
fi

# dyn run: exact totals.
n=123457
"$T" count $n >"$dir/plain.out" 2>&1
"$DYN" run --count work --count 'oth*' -o "$dir/run.csv" -- "$T" count $n \
    >"$dir/run.out" 2>"$dir/run.err"
st=$?
[ $st -eq 0 ] || bad "dyn run: exit $st: $(cat "$dir/run.err")"
[ "$(head -n 1 "$dir/run.csv")" = "name,calls,wall_ns" ] || bad "dyn run: CSV header"
grep -qx "work,$n," "$dir/run.csv" || bad "dyn run: work: $(grep work "$dir/run.csv"), expected $n"
grep -qx "other,$(((n + 1) / 2))," "$dir/run.csv" ||
    bad "dyn run: other: $(grep other "$dir/run.csv"), expected $(((n + 1) / 2))"
grep -q "$(cat "$dir/plain.out")" "$dir/run.out" || bad "dyn run: the program's output differs"
# The program's exit status comes through.
"$DYN" run --count work -- "$T" frob >/dev/null 2>"$dir/status.err"
st=$?
{ [ $st -eq 2 ] && grep -q '^usage: target' "$dir/status.err"; } ||
    bad "dyn run: exit status $st, expected the program's 2"

# Attach: a window with a known number of calls (2 threads x 1000 x 5 commands).
printf '50\n1000\n1000\n1000\n1000\n1000\n7\n' >"$dir/serve.in"
"$T" serve 2 <"$dir/serve.in" >"$dir/serve.plain" 2>&1
mkfifo "$dir/fifo" || exit 99
"$T" serve 2 <"$dir/fifo" >"$dir/serve.out" 2>&1 &
tpid=$!
bg_pids="$tpid"
exec 3>"$dir/fifo"
wait_for "$dir/serve.out" '^ready' || bad "attach: the target never got ready"
echo 50 >&3
wait_for "$dir/serve.out" '^done' || bad "attach: no answer before the attach"
"$DYN" attach $tpid --count work -o "$dir/attach.csv" >"$dir/attach.out" 2>"$dir/attach.err" &
dpid=$!
bg_pids="$tpid $dpid"
wait_for "$dir/attach.err" 'instrumented' || bad "attach: not instrumented: $(cat "$dir/attach.err")"
for i in 1 2 3 4 5; do
    echo 1000 >&3
done
i=0
while [ "$(grep -c '^done' "$dir/serve.out")" -lt 6 ]; do
    i=$((i + 1))
    [ $i -gt 400 ] && { bad "attach: the target stopped answering"; break; }
    sleep 0.05
done
kill -INT $dpid
wait $dpid
st=$?
[ $st -eq 0 ] || bad "dyn attach: exit $st: $(cat "$dir/attach.err")"
grep -qx "work,10000," "$dir/attach.csv" ||
    bad "dyn attach: work: $(grep work "$dir/attach.csv"), expected 10000"
if grep -q 'qpt-dyn' "/proc/$tpid/maps" 2>/dev/null; then
    bad "dyn attach: counter memory left mapped after detach"
fi
grep -q '^State:.*[Tt]' "/proc/$tpid/status" && bad "dyn attach: the target is left stopped"
echo 7 >&3
exec 3>&-
wait $tpid
cmp -s "$dir/serve.plain" "$dir/serve.out" || bad "attach: the target's output differs"

# 20 attach/detach cycles on threads that never pause.
mkfifo "$dir/fifo2" || exit 99
"$T" spin 2 <"$dir/fifo2" >"$dir/spin.out" 2>&1 &
tpid=$!
bg_pids="$tpid"
exec 4>"$dir/fifo2"
wait_for "$dir/spin.out" '^ready' || bad "spin: the target never got ready"
k=0
while [ $k -lt 20 ]; do
    k=$((k + 1))
    "$DYN" attach $tpid --count work --count small --duration 0.05 -o "$dir/spin$k.csv" \
        >/dev/null 2>>"$dir/spin.err" || bad "spin: attach $k failed: $(tail -n 1 "$dir/spin.err")"
done
exec 4>&-
wait $tpid
st=$?
[ $st -eq 0 ] || bad "spin: the target exited with $st"
grep -qx 'errors=0' "$dir/spin.out" || bad "spin: $(cat "$dir/spin.out")"
grep -q '^work,[1-9]' "$dir/spin20.csv" || bad "spin: no calls counted in the last window"
grep -q '^small,[1-9]' "$dir/spin20.csv" || bad "spin: small was not instrumented: $(grep small "$dir/spin.err")"

[ $fail -eq 0 ] && echo "dyn: run, attach and 20 attach/detach cycles: counts exact, output unchanged"
exit $fail
