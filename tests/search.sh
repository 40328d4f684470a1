#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# dyn search finds planted bottlenecks as its top result (tests/search/*.c), attached
# to each program while it runs:
#  (a) deep.c: a CPU-bound procedure (crunch) under main -> run_app -> stage1 -> stage2;
#  (b) locks.c: two threads contending on lock_b, one of three mutexes: the object named;
#  (c) piperead.c: next_message blocked in read on a pipe, down to its call of read;
#  (d) --json holds the tree and the bottlenecks; refuted metrics were taken out;
#  (e) phase.c (dyn search --repeat run): computes (crunch) for 5 s, then waits in read
#      (next_message): an early round finds crunch, a later one next_message;
#  (g) libdeep.c: the CPU-bound procedure two calls deep in a shared library
#      (hot_entry, called through the PLT -> hot_mid -> hot_crunch): named in its library.
#  (h) wide.c: the CPU-bound procedure is its caller's 21st callee (more than are tested
#      at once): the callees on the threads' stacks are tested first.
# Skips (77) when ptrace is not allowed. Exit status: 0 pass, 1 fail, 99 error.
set -u
: "${top_srcdir:=${srcdir:-.}}"
: "${srcdir:=$top_srcdir}"
. "$top_srcdir/tests/lib.sh"
DYN=$top_builddir/tools/dyn
dyn_setup search

for p in deep locks piperead phase wide; do
    # -O0: every procedure has room for a live entry and exit snippet.
    ${CC:-cc} -O0 -g -pthread -o "$dir/$p" "$srcdir/tests/search/$p.c" || exit 99
done
${CC:-cc} -O0 -g -shared -fPIC -o "$dir/libsearchhot.so" "$srcdir/tests/search/hotlib.c" &&
    ${CC:-cc} -O0 -g -o "$dir/libdeep" "$srcdir/tests/search/libdeep.c" -L"$dir" -lsearchhot \
        -Wl,-rpath,"$dir" || exit 99

# search NAME EXPECTED [OPTIONS]: attach to NAME, the first bottleneck must match.
search() {
    name=$1 want=$2
    shift 2
    "$dir/$name" 30 &
    tpid=$!
    sleep 0.3
    "$DYN" search --step 0.3 "$@" attach $tpid >"$dir/$name.out" 2>"$dir/$name.err"
    rc=$?
    kill $tpid 2>/dev/null
    wait $tpid 2>/dev/null
    tpid=
    dyn_skip_untraced "$dir/$name.err"
    [ $rc -eq 0 ] || bad "$name: dyn search exit $rc: $(cat "$dir/$name.err")"
}

search deep crunch
top=$(grep -A1 '^bottlenecks, ranked' "$dir/deep.out" | sed -n 2p)
case $top in
*CPU-bound*crunch*) ok "(a) deep: $top" ;;
*) bad "(a) deep: top result '$top'"; cat "$dir/deep.out" ;;
esac

search locks lock_b
top=$(grep -A1 '^bottlenecks, ranked' "$dir/locks.out" | sed -n 2p)
if grep -q "__lll_lock_wait.*not measured" "$dir/locks.out"; then
    echo "SKIP (b): glibc's __lll_lock_wait has no symbol here (libc6-dbg)"
else
    case $top in
    *sync-waiting*lock_b*) ok "(b) locks: $top" ;;
    *) bad "(b) locks: top result '$top'"; cat "$dir/locks.out" ;;
    esac
fi

search piperead next_message --json
python3 - "$dir/piperead.out" <<'PY' || bad "(c)/(d) piperead: $(cat "$dir/piperead.out")"
import json, sys
r = json.load(open(sys.argv[1]))
top = r["tree"][r["bottlenecks"][0]]
assert top["hypothesis"] == "IO-waiting" and top["focus"].startswith("next_message+0x"), top
assert top["focus"].endswith("-> read"), top  # the call site level
assert top["state"] == "true" and top["value"] > top["threshold"], top
refuted = [n for n in r["tree"] if n["state"] == "false" and n["metric"]]
assert refuted and r["metrics_removed"] >= len(refuted), (refuted, r["metrics_removed"])
print("ok   (c) piperead:", top["focus"], "%.0f%%" % (100 * top["value"]))
PY

"$DYN" search --repeat --step 0.3 --json run -- "$dir/phase" 10 >"$dir/phase.out" 2>"$dir/phase.err" ||
    bad "(e) phase: dyn search: $(cat "$dir/phase.err")"
python3 - "$dir/phase.out" <<'PY' || bad "(e) phase: $(cat "$dir/phase.out")"
import json, sys
r = json.load(open(sys.argv[1]))
tops = {}
for i in r["bottlenecks"]:  # ranked by round: the first of each round is its top
    tops.setdefault(r["tree"][i]["round"], r["tree"][i])
cpu = [k for k, n in tops.items() if n["hypothesis"] == "CPU-bound" and n["focus"] == "crunch"]
io = [k for k, n in tops.items() if n["hypothesis"] == "IO-waiting" and n["focus"].startswith("next_message")]
assert cpu and io and min(cpu) < min(io) and max(cpu) < min(io), tops
print("ok   (e) phase: crunch (CPU) in round %d at %.1f s, next_message (I/O) from round %d at %.1f s"
      % (min(cpu) + 1, tops[min(cpu)]["tested_to"], min(io) + 1, tops[min(io)]["tested_to"]))
PY

# (f) Timers across re-commits: a metric added and taken out 15 times while
# 'time cpu(now)' stays (phase.c's now() runs about 0.1% of the time), under load (two
# busy loops). A thread let out of a trampoline while a commit takes the old one out
# must still pass its procedure's exit stop: once that was taken out with the entries,
# the timer's depth stuck at 1 and now() read 1-2 s.
( for i in $(seq 1 15); do echo "add count calls(crunch) total"; sleep 0.2
    echo "remove #$((i + 1))"; sleep 0.2; done; echo quit ) >"$dir/churn.cmds"
( timeout 12 sh -c 'while :; do :; done' ) & b1=$!
( timeout 12 sh -c 'while :; do :; done' ) & b2=$!
"$DYN" run -e 'time cpu(now) total' --interval 0.5 --commands -- "$dir/phase" 8 \
    <"$dir/churn.cmds" >"$dir/churn.out" 2>&1
kill $b1 $b2 2>/dev/null
wait $b1 $b2 2>/dev/null
ms=$(awk '/^time cpu\(now\) total/ { v = $4 } END { print v }' "$dir/churn.out")
if [ -n "$ms" ] && awk -v v="$ms" 'BEGIN { exit !(v < 200) }'; then
    ok "(f) re-commits: time cpu(now) $ms ms over 8 s (not stuck)"
else
    bad "(f) re-commits: time cpu(now) '$ms' ms: $(tail -n 5 "$dir/churn.out")"
fi

search libdeep hot_crunch
top=$(grep -A1 '^bottlenecks, ranked' "$dir/libdeep.out" | sed -n 2p)
case $top in
*CPU-bound*libsearchhot.so:hot_crunch*) ok "(g) into a library: $top" ;;
*) bad "(g) into a library: top result '$top'"; cat "$dir/libdeep.out" ;;
esac

# (h) The hot procedure is its caller's 21st callee (more than are tested at once): the
# callees on the threads' stacks are tested first.
search wide crunch
top=$(grep -A1 '^bottlenecks, ranked' "$dir/wide.out" | sed -n 2p)
case $top in
*CPU-bound*crunch*) ok "(h) the 21st callee: $top" ;;
*) bad "(h) the 21st callee: top result '$top'"; cat "$dir/wide.out" ;;
esac

[ $fails -eq 0 ] || exit 1
echo "PASS search"
