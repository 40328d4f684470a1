#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Live timers of procedures that end in a call that never returns (issue 29: once
# refused, "a call returns into another procedure's code"; -e: "no exit to patch"; a
# relocated one's timer left running after the raise). tests/dynnoret/main.c: nr (in
# place), nr_rel (relocated whole: jumped into) and die (no ret) each end in a call of
# raise_err, which longjmps back to main; every call sleeps MS, and main sleeps 3 x MS
# after each, outside them (a timer left running by a raise would count those):
#  (a) `dyn run --time`: none refused; calls exact (nr, nr_rel N; die N/4); nr's and
#      nr_rel's wall time within [1, 2] x their own sleeps (N x MS); results right;
#  (b) -e 'time wall(...)' of the same: the same bounds, nothing unmeasured, calls exact;
#  (c) dyn attach for a window, detach: the code (every executable mapping) byte for
#      byte what it was, no mapping left;
#  (d) dyn killed (SIGKILL) while instrumented: the program goes on right, `dyn clean`
#      puts every byte back;
#  (e) C++ (tests/dynnoret/throw.cc): leaver's throw leaves it, an exit (calls exact, its
#      time under the sleeps main makes after each call); thrower catches what it
#      throws: its timer is refused with the reason (stopped at the throw it would miss
#      the handler); `count calls(thrower) post` counts its returns only (N).
# Skips (77) when ptrace is not allowed. Exit status: 0 pass, 1 fail, 99 error.
set -u
: "${top_srcdir:=${srcdir:-.}}"
: "${srcdir:=$top_srcdir}"
. "$top_srcdir/tests/lib.sh"
DYN=$top_builddir/tools/dyn
dyn_setup dyn-noret

command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
${CC:-cc} -O2 -o "$dir/prog" "$srcdir/tests/dynnoret/main.c" || exit 99
P=$dir/prog
WHAT="--time nr --time nr_rel --time die"

"$DYN" run --count nr -- "$P" 1 1 >"$dir/probe.out" 2>"$dir/probe.err"
dyn_skip_untraced "$dir/probe.err"

# (a) exact counts, nothing refused, times within bounds (N rounds of 2 ms sleeps).
N=100
MS=2
# shellcheck disable=SC2086
"$DYN" run -v $WHAT -- "$P" $N $MS >"$dir/run.out" 2>"$dir/run.err"
grep -q "^ok n=$N raised=$((N + N / 4))" "$dir/run.out" ||
    bad "(a) results: $(cat "$dir/run.out" "$dir/run.err")"
grep -q '3 procedures instrumented, 0 refused' "$dir/run.err" ||
    bad "(a) refused: $(cat "$dir/run.err")"
awk -v n=$N -v ms=$MS '
    $NF == "nr" || $NF == "nr_rel" {
        if ($1 != n) { print "FAIL (a) " $NF " calls: " $0; bad = 1 }
        if ($2 < n * ms || $2 > n * ms * 2) { print "FAIL (a) " $NF " time: " $0; bad = 1 }
        seen++ }
    $NF == "die" { if ($1 != n / 4) { print "FAIL (a) die calls: " $0; bad = 1 }; seen++ }
    END { if (seen != 3) { print "FAIL (a) rows missing"; bad = 1 }; exit bad }' \
    "$dir/run.out" || fails=$((fails + 1))

# (b) -e: the same shapes, the same bounds.
"$DYN" run -e 'time wall(nr)' -e 'time wall(nr_rel)' -e 'time wall(die)' \
    -e 'count calls(nr)' -e 'count calls(die)' -- "$P" $N $MS >"$dir/e.out" 2>"$dir/e.err"
grep -q "^ok n=$N" "$dir/e.out" || bad "(b) results: $(cat "$dir/e.out" "$dir/e.err")"
grep -q 'not measured' "$dir/e.err" && bad "(b) refused: $(grep 'not measured' "$dir/e.err")"
awk -v n=$N -v ms=$MS '
    $1 == "time" && ($NF == "nr" || $NF == "nr_rel") { seen++
        if ($3 < n * ms || $3 > n * ms * 2) { print "FAIL (b) " $0; bad = 1 } }
    $1 == "time" && $NF == "die" { seen++ }
    $1 == "count" && $NF == "nr" { seen++; if ($3 != n) { print "FAIL (b) " $0; bad = 1 } }
    $1 == "count" && $NF == "die" { seen++; if ($3 != n / 4) { print "FAIL (b) " $0; bad = 1 } }
    END { if (seen != 5) { print "FAIL (b) rows: " seen; bad = 1 }; exit bad }' "$dir/e.out" ||
    fails=$((fails + 1))

# (c) attach for a window, detach: the code as it was; (d) dyn killed while
# instrumented: the program goes on right, dyn clean puts the code back.
dyn_leaves_no_trace c d 3 nr_rel

# (e) C++ throws.
if command -v "${CXX:-g++}" >/dev/null && "${CXX:-g++}" -O2 -o "$dir/throw" "$srcdir/tests/dynnoret/throw.cc"; then
    "$DYN" run -v --time leaver --time thrower -- "$dir/throw" $N $MS >"$dir/cc.out" 2>"$dir/cc.err"
    want=$("$dir/throw" $N 0)
    grep -qx "$want" "$dir/cc.out" ||
        bad "(e) results: $(cat "$dir/cc.out" "$dir/cc.err")"
    grep -q 'thrower: not instrumented: it throws an exception it may catch itself' "$dir/cc.err" ||
        bad "(e) thrower not refused: $(cat "$dir/cc.err")"
    awk -v n=$N -v ms=$MS '
        $NF == "leaver" { seen++
            if ($1 != n) { print "FAIL (e) leaver calls: " $0; bad = 1 }
            if ($2 > n * ms / 2) { print "FAIL (e) leaver time (a timer left running): " $0; bad = 1 } }
        END { if (seen != 1) { print "FAIL (e) leaver row missing"; bad = 1 }; exit bad }' \
        "$dir/cc.out" || fails=$((fails + 1))
    "$DYN" run -e 'count calls(thrower) post' -- "$dir/throw" $N 0 >"$dir/post.out" 2>"$dir/post.err"
    awk -v n=$N '$1 == "count" && $NF == "thrower" { seen++; if ($4 != n) { print "FAIL (e) post: " $0; bad = 1 } }
        END { if (seen != 1) { print "FAIL (e) post row missing"; bad = 1 }; exit bad }' \
        "$dir/post.out" || { cat "$dir/post.out" "$dir/post.err"; fails=$((fails + 1)); }
else
    echo "skip (e): no C++ compiler"
fi

[ $fails -eq 0 ] || exit 1
echo "PASS: dyn-noret"
