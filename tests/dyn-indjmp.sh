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
# And a procedure of 3 bytes between two others, no padding (nb_tiny: its short jump
# through a slot in its neighbour nb_next, relocated whole; once refused "another
# procedure starts within 5 bytes of its entry" and "no padding within reach of a 2-byte
# jump for a 5-byte one"):
# and a return site too short for a jump, in a procedure relocated whole with no slot in
# its own code (nb_r, timed: through a slot in its neighbour nb_last, relocated whole):
#  (e) --time 'nb_*' and --count 'nb_*' (on the metrics' live engine: libqpt's points
#      borrow a neighbour's slot too, tests/dyn-borrow.sh): none refused, every call
#      counted (nb_prev 5N, nb_tiny 2N, nb_next, nb_r and nb_last N);
#  (f), (g) as (c), (d) with --time 'nb_*'.
# And a procedure whose loop branches back to its entry (loopy; once refused "a branch
# inside the procedure goes back to its entry"): relocated whole,
#  (h) --count loopy and --time loopy count N calls (not the 3N times its entry runs).
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
dyn_timed_exactly disp $N $MS

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

# (e) the neighbour's slot (--time, --count).
for mode in --count --time; do
    want=5 refused=0
    "$DYN" run -v $mode 'nb_*' -- "$P" $N 1 >"$dir/nb.out" 2>"$dir/nb.err"
    grep -q "^ok n=$N" "$dir/nb.out" || bad "(e) $mode results: $(cat "$dir/nb.out" "$dir/nb.err")"
    grep -q "$want procedures instrumented, $refused refused" "$dir/nb.err" ||
        bad "(e) $mode refused: $(cat "$dir/nb.err")"
    [ $refused = 0 ] || grep -q "nb_tiny: not instrumented: .*another procedure starts" "$dir/nb.err" ||
        bad "(e) $mode: nb_tiny's refusal not said: $(cat "$dir/nb.err")"
    awk -v n=$N -v want=$want '
        $NF == "nb_prev" { seen++; if ($1 != 5 * n) { print "FAIL (e) " $0; bad = 1 } }
        $NF == "nb_tiny" { seen++; if ($1 != 2 * n) { print "FAIL (e) " $0; bad = 1 } }
        $NF ~ /^nb_(next|r|last)$/ { seen++; if ($1 != n) { print "FAIL (e) " $0; bad = 1 } }
        END { if (seen != want) { print "FAIL (e) rows: " seen; bad = 1 }; exit bad }' \
        "$dir/nb.out" || fails=$((fails + 1))
done

# (h) a loop back to the entry.
for mode in --count --time; do
    "$DYN" run -v $mode loopy -- "$P" $N 1 >"$dir/lp.out" 2>"$dir/lp.err"
    grep -q "^ok n=$N" "$dir/lp.out" || bad "(h) $mode results: $(cat "$dir/lp.out" "$dir/lp.err")"
    grep -q '1 procedures instrumented, 0 refused' "$dir/lp.err" ||
        bad "(h) $mode refused: $(cat "$dir/lp.err")"
    awk -v n=$N '$NF == "loopy" { seen++; if ($1 != n) { print "FAIL (h) " $0; bad = 1 } }
        END { if (seen != 1) { print "FAIL (h) row missing"; bad = 1 }; exit bad }' \
        "$dir/lp.out" || fails=$((fails + 1))
done

# (f), (g) no trace left, the slot's bytes in nb_next's code included.
set -f # ($WHAT is split unquoted: no file names for its pattern)
WHAT="--time nb_*"
rm -f "$dir/kill.err" # (the helper waits for its line: not the first call's)
dyn_leaves_no_trace f g 5 nb_tiny

[ $fails -eq 0 ] || exit 1
echo "PASS: dyn-indjmp"
