#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# A live procedure with indirect jumps of unknown targets, relocated whole with its
# jumps translated at run time (issue 29: once refused, "an indirect jump with unknown
# targets might land in its first bytes" for --count, "... may leave it" for --time, "...
# might land in the bytes to patch" for -e). tests/dynindjmp/main.c: disp jumps to a
# computed address (no table); one case calls a sleep of MS, one jumps back into the
# entry's second instruction (inside the bytes its jump takes), one leaves through the
# unknown jump (a tail call); after each call main sleeps 3 x MS outside it:
#  (a) `dyn run --time disp`: not refused; calls exact (N); its wall time within [1, 2] x
#      its own sleeps (N / 5 x MS: a timer not stopped where the jump leaves would count
#      main's); results right (every case, through the copy);
#  (b) --count disp exact (the jump back into the entry is no second call), -e 'count
#      calls(disp)' exact, -e 'time wall(disp)' within the bounds;
#  (c) dyn attach for a window, detach: the code (every executable mapping) byte for
#      byte what it was, no mapping left;
#  (d) dyn killed (SIGKILL) while instrumented: the program goes on right, `dyn clean`
#      puts every byte back.
# Skips (77) when ptrace is not allowed. Exit status: 0 pass, 1 fail, 99 error.
set -u
: "${top_srcdir:=${srcdir:-.}}"
: "${srcdir:=$top_srcdir}"
. "$top_srcdir/tests/lib.sh"
DYN=${DYN:-$top_builddir/tools/dyn}
dyn_setup dyn-indjmp

${CC:-cc} -O2 -o "$dir/prog" "$srcdir/tests/dynindjmp/main.c" || exit 99
P=$dir/prog
WHAT="--time disp"

"$DYN" run --count sleep_ms -- "$P" 1 1 >"$dir/probe.out" 2>"$dir/probe.err"
dyn_skip_untraced "$dir/probe.err"

# (a) exact counts, not refused, the time within bounds (N rounds, MS ms sleeps).
N=100
MS=2
"$DYN" run -v $WHAT -- "$P" $N $MS >"$dir/run.out" 2>"$dir/run.err"
grep -q "^ok n=$N" "$dir/run.out" || bad "(a) results: $(cat "$dir/run.out" "$dir/run.err")"
grep -q '1 procedures instrumented, 0 refused' "$dir/run.err" ||
    bad "(a) refused: $(cat "$dir/run.err")"
awk -v n=$N -v ms=$MS '
    $NF == "disp" { seen++
        if ($1 != n) { print "FAIL (a) calls: " $0; bad = 1 }
        if ($2 < n / 5 * ms || $2 > n / 5 * ms * 2) { print "FAIL (a) time: " $0; bad = 1 } }
    END { if (seen != 1) { print "FAIL (a) row missing"; bad = 1 }; exit bad }' \
    "$dir/run.out" || fails=$((fails + 1))

# (b) --count and -e.
"$DYN" run -v --count disp -- "$P" $N 1 >"$dir/cnt.out" 2>"$dir/cnt.err"
grep -q "^ok n=$N" "$dir/cnt.out" || bad "(b) results: $(cat "$dir/cnt.out" "$dir/cnt.err")"
grep -E -q "^ +$N +disp\$" "$dir/cnt.out" ||
    bad "(b) --count disp: $(cat "$dir/cnt.out" "$dir/cnt.err")"
"$DYN" run -e 'time wall(disp)' -e 'count calls(disp)' -- "$P" $N $MS >"$dir/e.out" 2>"$dir/e.err"
grep -q "^ok n=$N" "$dir/e.out" || bad "(b) results: $(cat "$dir/e.out" "$dir/e.err")"
grep -q 'not measured' "$dir/e.err" && bad "(b) refused: $(grep 'not measured' "$dir/e.err")"
awk -v n=$N -v ms=$MS '
    $1 == "time" && $NF == "disp" { seen++
        if ($3 < n / 5 * ms || $3 > n / 5 * ms * 2) { print "FAIL (b) " $0; bad = 1 } }
    $1 == "count" && $NF == "disp" { seen++; if ($3 != n) { print "FAIL (b) " $0; bad = 1 } }
    END { if (seen != 2) { print "FAIL (b) rows: " seen; bad = 1 }; exit bad }' "$dir/e.out" ||
    fails=$((fails + 1))

# (c) attach for a window, detach: the code as it was; (d) dyn killed while
# instrumented: the program goes on right, dyn clean puts the code back.
dyn_leaves_no_trace c d 1 disp

[ $fails -eq 0 ] || exit 1
echo "PASS: dyn-indjmp"
