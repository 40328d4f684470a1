#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# A live procedure with a jump table relocated whole (issue 29: once refused, "a jump
# table (its targets would run the original code)"). tests/dyntable/main.c: sw switches
# through a PIC jump table (case 1 calls a sleep of MS), and another procedure jumps
# into its ret path (so it cannot be timed in place); after each call main sleeps 3 x MS
# outside it:
#  (a) `dyn run --time sw`: not refused; calls exact (N); its wall time within [1, 2] x
#      its own sleeps (N / 5 x MS); results right (every case, through the copy);
#  (b) --count sw and -e 'count calls(sw)' exact, -e 'time wall(sw)' within the bounds;
#  (c) dyn attach for a window, detach: the code (every executable mapping) byte for
#      byte what it was, no mapping left;
#  (d) dyn killed (SIGKILL) while instrumented: the program goes on right, `dyn clean`
#      puts every byte back.
# Skips (77) when ptrace is not allowed. Exit status: 0 pass, 1 fail, 99 error.
set -u
: "${top_srcdir:=${srcdir:-.}}"
: "${srcdir:=$top_srcdir}"
. "$top_srcdir/tests/lib.sh"
DYN=$top_builddir/tools/dyn
dyn_setup dyn-table

command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
${CC:-cc} -O2 -o "$dir/prog" "$srcdir/tests/dyntable/main.c" || exit 99
P=$dir/prog
WHAT="--time sw"

"$DYN" run --count sw -- "$P" 1 1 >"$dir/probe.out" 2>"$dir/probe.err"
dyn_skip_untraced "$dir/probe.err"

# (a) exact counts, not refused, the time within bounds (N rounds, MS ms sleeps).
N=100
MS=2
dyn_timed_exactly sw $N $MS

# (b) --count and -e.
"$DYN" run -v --count sw -- "$P" $N 1 >"$dir/cnt.out" 2>"$dir/cnt.err"
grep -E -q "^ +$N +sw\$" "$dir/cnt.out" || bad "(b) --count sw: $(cat "$dir/cnt.out" "$dir/cnt.err")"
"$DYN" run -e 'time wall(sw)' -e 'count calls(sw)' -- "$P" $N $MS >"$dir/e.out" 2>"$dir/e.err"
grep -q "^ok n=$N" "$dir/e.out" || bad "(b) results: $(cat "$dir/e.out" "$dir/e.err")"
grep -q 'not measured' "$dir/e.err" && bad "(b) refused: $(grep 'not measured' "$dir/e.err")"
awk -v n=$N -v ms=$MS '
    $1 == "time" && $NF == "sw" { seen++
        if ($3 < n / 5 * ms || $3 > n / 5 * ms * 2) { print "FAIL (b) " $0; bad = 1 } }
    $1 == "count" && $NF == "sw" { seen++; if ($3 != n) { print "FAIL (b) " $0; bad = 1 } }
    END { if (seen != 2) { print "FAIL (b) rows: " seen; bad = 1 }; exit bad }' "$dir/e.out" ||
    fails=$((fails + 1))

# (c) attach for a window, detach: the code as it was; (d) dyn killed while
# instrumented: the program goes on right, dyn clean puts the code back.
dyn_leaves_no_trace c d 1 sw

[ $fails -eq 0 ] || exit 1
echo "PASS: dyn-table"
