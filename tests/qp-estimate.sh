#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# The static estimate's branch heuristics (driver/drv_qp.c, edge_odds), each on a program
# where it moves a counter to the edge that runs less: the status a call returned is
# zero 3:1 (tests/qp/status.c: work's one counter goes on its rare way out, 10 runs, not
# on the common one, 9,990, where the fall-through heuristic alone puts it). Skipped for
# a compiler that does not emit the shape (`call; test %eax,%eax; je`). Loops run a few
# times a visit: tests/qp/partition.c (below).
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
QP=${QP:-$top_builddir/tools/qp}
dir=$top_builddir/tests/qp-estimate.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
dir=$(cd "$dir" && pwd)
fails=0
ran=0
for v in "gcc -O2" "clang -O2"; do
    cc=${v% *}
    qp_have "$cc" || continue
    exe=$dir/status$(echo "$v" | tr -d ' -')
    $v -o "$exe" "$top_srcdir/tests/qp/status.c" || exit 99
    if ! objdump -d --no-show-raw-insn "$exe" | awk '/<work>:/,/^$/' |
        grep -A1 'test *%eax,%eax' | grep -q 'je '; then
        echo "skip $v: work does not test the status by test; je"
        continue
    fi
    ran=1
    "$QPT_REWRITE" "$exe" -o "$exe.inst" >/dev/null 2>&1 || { bad "$v: rewrite failed"; continue; }
    (cd "$dir" && QP_PROFILE=$exe.qp "$exe.inst" >"$exe.out") || { bad "$v: the rewritten program failed"; continue; }
    "$QP" report --edges=work "$exe.qp" >"$exe.edges" 2>&1 || { bad "$v: qp report failed"; continue; }
    got=$(awk '$NF == "measured" {print $(NF - 1)}' "$exe.edges" | tr '\n' ' ')
    [ "$got" = "10 " ] && ok "$v: work's counter on its rare way out (10 runs)" ||
        bad "$v: work's counters count ${got:-nothing}, not the rare way out (10): $(cat "$exe.edges")"
done
# Loops run a few times a visit (back edge 3:1, tests/qp/partition.c): the counters the
# static estimate places in gcc's partition loop cost at most 12% more than the least any
# placement can (with the compilers' 9:1, 16%: a stub's jump back ran 650,000 times).
if qp_have gcc; then
    ran=1
    exe=$dir/partition
    gcc -O2 -o "$exe" "$top_srcdir/tests/qp/partition.c" || exit 99
    if "$QPT_REWRITE" "$exe" -o "$exe.inst" >/dev/null 2>&1 &&
        (cd "$dir" && QP_PROFILE=$exe.qp "$exe.inst" >"$exe.out") &&
        "$QPT_REWRITE" -v --weights="$exe.qp" "$exe" -o "$exe.w" >"$exe.log" 2>&1; then
        least=$(sed -n 's/.*over the profiled run the counters add \([0-9]*\) instructions.*/\1/p' "$exe.log")
        static=$(sed -n 's/.*placed without --weights they would add \([0-9]*\) instructions.*/\1/p' "$exe.log")
        if [ -n "$least" ] && [ -n "$static" ] && [ $((static * 100)) -le $((least * 112)) ]; then
            ok "gcc: partition's static counters add $static instructions, the least $least"
        else
            bad "gcc: partition's static counters add ${static:-?} instructions, more than 112% of the least, ${least:-?}: $(grep -- --weights "$exe.log")"
        fi
    else
        bad "gcc: partition: rewrite, run or --weights rewrite failed"
    fi
fi
[ $ran = 1 ] || exit 77
[ $fails -eq 0 ]
