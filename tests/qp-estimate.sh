#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# The static estimate's branch heuristics (driver/drv_qp.c, edge_odds), each on a program
# where it moves a counter to the edge that runs less: the status a call returned is
# zero 3:1 (tests/qp/status.c: work's one counter goes on its rare way out, 10 runs, not
# on the common one, 9,990, where the fall-through heuristic alone puts it). Skipped for
# a compiler that does not emit the shape (`call; test %eax,%eax; je`).
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
[ $ran = 1 ] || exit 77
[ $fails -eq 0 ]
