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
#    finishes with every result correct;
#  - `--calls-from caller`: exact counts at caller's two direct call sites, the call
#    through a register refused (or, if a compiler made it >= 5 bytes, exact too);
#  - `--time rec --time napper` on `target sleep 10 20` (10 x 20 ms, each under 6 nested
#    calls of rec): wall_ns in [150 ms, 1 s] for both, calls exact, and rec's time is not
#    multiplied by its nesting;
#  - attach with --time and --calls-from in the middle of those calls (the return address
#    of a moved call is on the stack at removal): the target finishes correctly.
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
    "run --count a --duration -1 -- true" "run --time" "run --calls-from"; do
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
# --histogram: the buckets of the time histogram add up to the total.
n=2000000
"$DYN" run --histogram --count work -- "$T" count $n >"$dir/hist.out" 2>"$dir/hist.err" ||
    bad "dyn run --histogram: $(head -n 1 "$dir/hist.err")"
sum=$(awk '/^calls over time/ { on = 1; next } on && /^ *[0-9.]+ +[0-9]+$/ { s += $2 } END { print s + 0 }' \
    "$dir/hist.out")
[ "$sum" = "$n" ] || bad "dyn run --histogram: buckets add up to $sum, expected $n"
# The program's exit status comes through.
"$DYN" run --count work -- "$T" frob >/dev/null 2>"$dir/status.err"
st=$?
{ [ $st -eq 2 ] && grep -q '^usage: target' "$dir/status.err"; } ||
    bad "dyn run: exit status $st, expected the program's 2"

# --calls-from: exact counts per call site.
n=3001
"$T" calls $n >"$dir/calls.plain" 2>&1
"$DYN" run --calls-from caller -o "$dir/calls.csv" -- "$T" calls $n \
    >"$dir/calls.out" 2>"$dir/calls.err"
st=$?
[ $st -eq 0 ] || bad "dyn run --calls-from: exit $st: $(cat "$dir/calls.err")"
[ "$(head -n 1 "$dir/calls.csv")" = "name,calls,wall_ns" ] || bad "--calls-from: CSV header"
grep -qx "caller+0x[0-9a-f]*->work,$n," "$dir/calls.csv" ||
    bad "--calls-from: work: $(grep work "$dir/calls.csv"), expected $n"
grep -qx "caller+0x[0-9a-f]*->other,$(((n + 2) / 3))," "$dir/calls.csv" ||
    bad "--calls-from: other: $(grep other "$dir/calls.csv"), expected $(((n + 2) / 3))"
grep -q 'caller+0x[0-9a-f]*->\*indirect: not instrumented: the call is shorter' \
    "$dir/calls.err" || grep -qx "caller+0x[0-9a-f]*->\*indirect,$n," "$dir/calls.csv" ||
    bad "--calls-from: the indirect call: $(grep indirect "$dir/calls.err" "$dir/calls.csv")"
grep -q "$(cat "$dir/calls.plain")" "$dir/calls.out" || bad "--calls-from: the program's output differs"

# --time: 10 x 20 ms in napper, each under rec(5): 6 nested calls of rec.
"$DYN" run --time rec --time napper -o "$dir/time.csv" -- "$T" sleep 10 20 \
    >"$dir/time.out" 2>"$dir/time.err"
st=$?
[ $st -eq 0 ] || bad "dyn run --time: exit $st: $(cat "$dir/time.err")"
grep -qx 'sum=60' "$dir/time.out" || bad "--time: the program's output: $(cat "$dir/time.out")"
# check_time NAME CALLS: the row has CALLS calls and wall_ns in [150 ms, 1 s].
check_time() {
    line=$(grep "^$1," "$dir/time.csv")
    c=$(echo "$line" | cut -d, -f2)
    w=$(echo "$line" | cut -d, -f3)
    [ "$c" = "$2" ] || bad "--time: $1: $c calls, expected $2"
    { [ -n "$w" ] && [ "$w" -ge 150000000 ] && [ "$w" -le 1000000000 ]; } ||
        bad "--time: $1: wall_ns '$w', expected 150..1000 ms"
}
check_time napper 10
check_time rec 60
wn=$(grep '^napper,' "$dir/time.csv" | cut -d, -f3)
wr=$(grep '^rec,' "$dir/time.csv" | cut -d, -f3)
[ -n "$wn" ] && [ -n "$wr" ] && [ "$wr" -le $((wn * 3 / 2)) ] ||
    bad "--time: rec ($wr ns) counted more than once per nesting (napper: $wn ns)"

# Attach with timers and call sites while calls are under way, detach mid-call.
"$T" sleep 40 25 >"$dir/sleep.out" 2>&1 &
tpid=$!
bg_pids="$tpid"
sleep 0.2
"$DYN" attach $tpid --time rec --calls-from rec --calls-from napper --duration 0.3 \
    -o "$dir/sleep.csv" >/dev/null 2>"$dir/sleep.err" || bad "attach --time: $(cat "$dir/sleep.err")"
grep -q '^rec,[1-9][0-9]*,[1-9]' "$dir/sleep.csv" || bad "attach --time: $(cat "$dir/sleep.csv")"
grep -q '^rec+0x[0-9a-f]*->napper,[1-9]' "$dir/sleep.csv" || bad "attach --calls-from: $(cat "$dir/sleep.csv")"
if grep -q 'qpt-dyn' "/proc/$tpid/maps" 2>/dev/null; then
    bad "attach --time: counter memory left mapped after detach"
fi
wait $tpid
st=$?
{ [ $st -eq 0 ] && grep -qx 'sum=240' "$dir/sleep.out"; } ||
    bad "attach --time: the target: exit $st, $(cat "$dir/sleep.out")"

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

[ $fail -eq 0 ] && echo "dyn: run, attach, 20 attach/detach cycles, --calls-from, --time: counts exact, times in range, output unchanged"
exit $fail
