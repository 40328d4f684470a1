#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Neighbour slots on libqpt's live points (issue 29): --count and -e run on the metrics'
# engine (metrics/qm_live.c over libqpt), whose points once refused what dyn's own
# selections took through a neighbour's bytes. tests/dynindjmp/main.c: nb_tiny, 3 bytes
# between nb_prev and nb_next with no padding ("another procedure starts within 5 bytes
# of its entry", "no padding within reach of a 2-byte jump for a 5-byte one"); nb_r,
# whose `pop; ret` after its second call is too short for a jump, followed by nb_last
# ("no padding ..." under -e's timers); one_ret, a 1-byte procedure (a lone ret: "a block
# ending in ret is shorter than the 5-byte jump, with no padding after it") before
# one_next, which starts with a REX prefix: its jmp rel8 opcode alone, the displacement
# being one_next's first byte, kept before one_next's own jump (a pun). Each round calls
# nb_prev 5 times, nb_tiny twice, nb_next, nb_r and nb_last once, one_ret 3 times,
# one_prev and one_next once, and pe_fn once: relocated whole (a loop back to its entry),
# its call's return site on a page's last byte ("a call's return site crosses a page
# boundary"), that byte a jmp rel8 opcode whose displacement is the next one (a pun):
#  (a) --count 'nb_*' and --count 'one_*': none refused, every count exact (N rounds);
#  (b) -e 'count calls(nb_*)' -e 'time wall(nb_*)', the same of one_*: no procedure "not
#      measured", every count exact, a time for each;
#  (e) --count pe_fn, --time pe_fn (dyn's own engine), -e 'count calls(pe_fn)': N;
#  (c) dyn attach -e (nb_*, one_*, pe_fn) for a window, detach: the code (every executable mapping) byte for
#      byte what it was, no mapping left;
#  (d) dyn killed (SIGKILL) while its -e snippets are in: the program goes on right,
#      `dyn clean` puts every byte back.
# Skips (77) when ptrace is not allowed. Exit status: 0 pass, 1 fail, 99 error.
set -u
: "${top_srcdir:=${srcdir:-.}}"
: "${srcdir:=$top_srcdir}"
. "$top_srcdir/tests/lib.sh"
DYN=${DYN:-$top_builddir/tools/dyn}
dyn_setup dyn-borrow

${CC:-cc} -O2 -o "$dir/prog" "$srcdir/tests/dynindjmp/main.c" || exit 99
P=$dir/prog

"$DYN" run --count sleep_ms -- "$P" 1 1 >"$dir/probe.out" 2>"$dir/probe.err"
dyn_skip_untraced "$dir/probe.err"

N=100
# exact COLUMN FILE LABEL: the count in COLUMN of each nb_* row of FILE (its name last)
# is its calls in N rounds; every one of the five is there.
exact() {
    awk -v c="$1" -v n=$N -v what="$3" '
        $NF == "nb_prev" { seen++; if ($c != 5 * n) { print "FAIL " what " " $0; bad = 1 } }
        $NF == "nb_tiny" { seen++; if ($c != 2 * n) { print "FAIL " what " " $0; bad = 1 } }
        $NF ~ /^nb_(next|r|last)$/ { seen++; if ($c != n) { print "FAIL " what " " $0; bad = 1 } }
        END { if (seen != 5) { print "FAIL " what " rows: " seen; bad = 1 }; exit bad }' "$2" ||
        fails=$((fails + 1))
}

# one COLUMN FILE LABEL: as exact, for one_* (one_ret 3N, one_prev and one_next N).
one() {
    awk -v c="$1" -v n=$N -v what="$3" '
        $NF == "one_ret" { seen++; if ($c != 3 * n) { print "FAIL " what " " $0; bad = 1 } }
        $NF ~ /^one_(prev|next)$/ { seen++; if ($c != n) { print "FAIL " what " " $0; bad = 1 } }
        END { if (seen != 3) { print "FAIL " what " rows: " seen; bad = 1 }; exit bad }' "$2" ||
        fails=$((fails + 1))
}

# (a) --count.
"$DYN" run -v --count 'nb_*' -- "$P" $N 1 >"$dir/cnt.out" 2>"$dir/cnt.err"
grep -q "^ok n=$N" "$dir/cnt.out" || bad "(a) results: $(cat "$dir/cnt.out" "$dir/cnt.err")"
grep -q "5 procedures instrumented, 0 refused" "$dir/cnt.err" ||
    bad "(a) refused: $(cat "$dir/cnt.err")"
exact 1 "$dir/cnt.out" "(a)"
"$DYN" run -v --count 'one_*' -- "$P" $N 1 >"$dir/one.out" 2>"$dir/one.err"
grep -q "^ok n=$N" "$dir/one.out" || bad "(a) results: $(cat "$dir/one.out" "$dir/one.err")"
grep -q "3 procedures instrumented, 0 refused" "$dir/one.err" ||
    bad "(a) one_*: refused: $(cat "$dir/one.err")"
one 1 "$dir/one.out" "(a) one_*"

# (b) -e: counts and timers.
E1='count calls(nb_*)' E2='time wall(nb_*)'
"$DYN" run -e "$E1" -e "$E2" -- "$P" $N 1 >"$dir/e.out" 2>"$dir/e.err"
grep -q "^ok n=$N" "$dir/e.out" || bad "(b) results: $(cat "$dir/e.out" "$dir/e.err")"
grep -q 'not measured' "$dir/e.out" "$dir/e.err" &&
    bad "(b) refused: $(grep 'not measured' "$dir/e.out" "$dir/e.err")"
grep '^count ' "$dir/e.out" >"$dir/e.count"
exact 3 "$dir/e.count" "(b)"
[ "$(grep -c '^time wall(nb_\*) .* ms  nb_' "$dir/e.out")" = 5 ] ||
    bad "(b) times: $(cat "$dir/e.out")"
"$DYN" run -e 'count calls(one_*)' -e 'time wall(one_*)' -- "$P" $N 1 >"$dir/e1.out" 2>"$dir/e1.err"
grep -q "^ok n=$N" "$dir/e1.out" || bad "(b) results: $(cat "$dir/e1.out" "$dir/e1.err")"
grep -q 'not measured' "$dir/e1.out" "$dir/e1.err" &&
    bad "(b) one_*: refused: $(grep 'not measured' "$dir/e1.out" "$dir/e1.err")"
grep '^count ' "$dir/e1.out" >"$dir/e1.count"
one 3 "$dir/e1.count" "(b) one_*"
[ "$(grep -c '^time wall(one_\*) .* ms  one_' "$dir/e1.out")" = 3 ] ||
    bad "(b) one_* times: $(cat "$dir/e1.out")"

# (e) the return site on a page's last byte.
for mode in --count --time; do
    "$DYN" run -v $mode pe_fn -- "$P" $N 1 >"$dir/pe.out" 2>"$dir/pe.err"
    grep -q "^ok n=$N" "$dir/pe.out" || bad "(e) $mode results: $(cat "$dir/pe.out" "$dir/pe.err")"
    grep -q '1 procedures instrumented, 0 refused' "$dir/pe.err" ||
        bad "(e) $mode refused: $(cat "$dir/pe.err")"
    grep -E -q "^ +$N +([0-9.]+ +)?pe_fn\$" "$dir/pe.out" || bad "(e) $mode: $(cat "$dir/pe.out")"
done
"$DYN" run -e 'count calls(pe_fn)' -- "$P" $N 1 >"$dir/pe.out" 2>"$dir/pe.err"
grep -E -q "^count calls\(pe_fn\) +$N +pe_fn\$" "$dir/pe.out" ||
    bad "(e) -e: $(cat "$dir/pe.out" "$dir/pe.err")"

# (c) attach for a window, detach: the code as it was.
dyn_wait_start
E3='count calls(one_*)' E4='time wall(pe_fn)'
"$DYN" attach $tpid -e "$E1" -e "$E2" -e "$E3" -e "$E4" --duration 0.5 >"$dir/att.out" 2>"$dir/att.err" ||
    bad "(c) attach: $(cat "$dir/att.err")"
grep -q 'not measured' "$dir/att.out" "$dir/att.err" && bad "(c) refused: $(cat "$dir/att.err")"
grep -E -q '^count calls\(nb_\*\) +[1-9][0-9]* +nb_tiny$' "$dir/att.out" &&
    grep -E -q '^count calls\(one_\*\) +[1-9][0-9]* +one_ret$' "$dir/att.out" &&
    grep -E -q '^time wall\(pe_fn\) +[0-9.]+ ms +pe_fn$' "$dir/att.out" ||
    bad "(c) counts: $(cat "$dir/att.out")"
dyn_detached_clean c "$dir/att.err"

# (d) dyn killed while the snippets are in (the code differs), then dyn clean.
"$DYN" attach $tpid -e "$E1" -e "$E2" -e "$E3" -e "$E4" >"$dir/kill.out" 2>"$dir/kill.err" &
dpid=$!
i=0
while [ "$_before" = "$(text_of $tpid)" ] && [ $i -lt 200 ]; do
    i=$((i + 1))
    sleep 0.05
done
[ $i -lt 200 ] || bad "(d) the snippets never went in: $(cat "$dir/kill.err")"
dyn_killed_clean d
dyn_wait_end

[ $fails -eq 0 ] || exit 1
echo "PASS: dyn-borrow"
