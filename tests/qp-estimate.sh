#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# The static estimate's branch heuristics (driver/drv_qp.c, edge_odds), each on a program
# where it moves a counter to the edge that runs less: the status a call returned is
# zero 3:1 (tests/qp/status.c: work's one counter goes on its rare way out, 10 runs, not
# on the common one, 9,990, where the fall-through heuristic alone puts it). Skipped for
# a compiler that does not emit the shape (`call; test %eax,%eax; je`). Loops run a few
# times a visit: tests/qp/partition.c (below); a loop counted from its induction variable,
# priced only: tests/qp/ivloop.c.
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
# profiled EXE: rewrite EXE, run it (its profile EXE.qp), rewrite it again with -v
# --weights=EXE.qp into EXE.w, the summary into EXE.log; and the least any placement's
# counters add over that run into $least; a failure is told.
profiled() {
    "$QPT_REWRITE" "$1" -o "$1.inst" >/dev/null 2>&1 &&
        (cd "$dir" && QP_PROFILE=$1.qp "$1.inst" >"$1.out") &&
        "$QPT_REWRITE" -v --weights="$1.qp" "$1" -o "$1.w" >"$1.log" 2>&1 || {
        bad "gcc: ${1##*/}: rewrite, run or --weights rewrite failed"
        return 1
    }
    least=$(sed -n 's/.*over the profiled run the counters add \([0-9]*\) instructions.*/\1/p' "$1.log")
}
if qp_have gcc; then
    ran=1
    gcc -O2 -o "$dir/partition" "$top_srcdir/tests/qp/partition.c" || exit 99
    gcc -O1 -o "$dir/ivloop" "$top_srcdir/tests/qp/ivloop.c" || exit 99
    # Loops run a few times a visit (back edge 3:1, tests/qp/partition.c): the counters
    # the static estimate places in gcc's partition loop cost at most 12% more than the
    # least any placement can (with the compilers' 9:1, 16%: a stub's jump back ran
    # 650,000 times).
    exe=$dir/partition
    if profiled "$exe"; then
        static=$(sed -n 's/.*placed without --weights they would add \([0-9]*\) instructions.*/\1/p' "$exe.log")
        if [ -n "$least" ] && [ -n "$static" ] && [ $((static * 100)) -le $((least * 112)) ]; then
            ok "gcc: partition's static counters add $static instructions, the least $least"
        else
            bad "gcc: partition's static counters add ${static:-?} instructions, more than 112% of the least, ${least:-?}: $(grep -- --weights "$exe.log")"
        fi
    fi
    # Loops counted from their induction variables, priced by -v --weights (not built
    # yet: doc/qp.md): fill's loop (tests/qp/ivloop.c) runs 1,000,000 rounds in 1,000
    # visits, so the counters would add about 2,000 instructions, not a round's 1,000,000.
    exe=$dir/ivloop
    if profiled "$exe"; then
        iv=$(sed -n 's/.*from induction variables .* would add \([0-9]*\) instructions, [0-9]* placed without --weights: \([0-9]*\) of.*/\1 \2/p' "$exe.log")
        if [ -n "$least" ] && [ -n "$iv" ] && [ "${iv#* }" -ge 1 ] &&
            [ $((least - ${iv% *})) -ge 990000 ] && grep -q 'most gained in fill +' "$exe.log"; then
            ok "gcc: fill's loop counted from its induction variable: ${iv% *} instructions instead of $least"
        else
            bad "gcc: the induction-variable projection: ${iv:-?} against ${least:-?}: $(grep -- induction "$exe.log")"
        fi
    fi
fi
[ $ran = 1 ] || exit 77
[ $fails -eq 0 ]
