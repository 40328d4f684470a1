#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# dyn --time and '*:NAME' patterns on the one live session engine (issue 30: they ran on
# dynamic/dyn_run.c, which followed an exec only with --follow-exec and said "no
# procedure matches" of a library glob wherever the image had none). tests/dynfollow:
#  (a) `dyn run --time work` (a bare pattern, no --follow-exec) of a program that calls
#      work 4 times, then execs itself to call it 6 times: rows main[1]:work 4 and work
#      6, both timed; the program's output and status unchanged;
#  (b) `--time '*:lib_sum' --count '*:malloc'` of a program that execs itself and then
#      dlopens libqt.so: lib_sum (in a library loaded after the exec) 5 calls, timed;
#      malloc counted in libc in both images; no "no procedure matches" line;
#  (c) a library glob that nothing matches: one line says so, the table is printed and
#      the status is the program's;
#  (d) --time with several processes (attach P1,P2) and with --commands (refused
#      before): the metric time wall(P) shared, each process's napper timed;
#  (e) -e 'count calls(*) per call site from(caller)' (the language of --calls-from):
#      exact counts per site, no row of other calls;
#  (f) --time _start (no exit to patch): 1 call, time 0, a note, not refused.
# Skips (77) when ptrace is not allowed. Exit status: 0 pass, 1 fail, 99 error.
set -u
: "${top_srcdir:=.}"
: "${top_builddir:=.}"
. "$top_srcdir/tests/lib.sh"
DYN=$top_builddir/tools/dyn
d=$top_builddir/tests/dyn-onelive.d
fails=0

rm -rf "$d"
mkdir -p "$d" || exit 99
qp_have gcc || { echo "SKIP: gcc not installed"; exit 77; }
gcc -O2 -fPIC -shared -o "$d/libqt.so" "$top_srcdir/tests/dynlib/lib.c" || exit 99
gcc -O2 -o "$d/main" "$top_srcdir/tests/dynfollow/main.c" -ldl -lpthread || exit 99
lib=$(cd "$d" && pwd)/libqt.so

"$DYN" run --count work -- "$d/main" work 1 >"$d/probe.out" 2>"$d/probe.err"
dyn_skip_untraced "$d/probe.err"

csv() { awk -F, -v n="$2" '$1 == n { print $2 }' "$1"; }
ns() { awk -F, -v n="$2" '$1 == n { print $3 }' "$1"; }
timed() { # FILE ROW: its wall_ns is a number above 0
    _w=$(ns "$1" "$2")
    [ -n "$_w" ] && [ "$_w" -gt 0 ] 2>/dev/null
}

# (a) a bare --time pattern follows the exec.
"$d/main" exec 4 6 >"$d/a.plain"
"$DYN" run --time work -o "$d/a.csv" -- "$d/main" exec 4 6 >"$d/a.out" 2>"$d/a.err"
rc=$?
expect_eq "(a) exit status" "$rc" 3
grep -q '^work 6$' "$d/a.out" && ok "(a) the new program ran" || bad "(a) output: $(cat "$d/a.out")"
expect_eq "(a) work of the first image" "$(csv "$d/a.csv" 'main[1]:work')" 4
expect_eq "(a) work of the new image" "$(csv "$d/a.csv" work)" 6
timed "$d/a.csv" work && timed "$d/a.csv" 'main[1]:work' && ok "(a) both timed" ||
    bad "(a) not timed: $(cat "$d/a.csv")"

# (b) library globs, in a library loaded after an exec.
"$d/main" execdl 3 "$lib" 5 >"$d/b.plain"
"$DYN" run --time '*:lib_sum' --count '*:malloc' -o "$d/b.csv" \
    -- "$d/main" execdl 3 "$lib" 5 >"$d/b.out" 2>"$d/b.err"
rc=$?
expect_eq "(b) exit status" "$rc" 3
grep -q "$(tail -n 1 "$d/b.plain")" "$d/b.out" && ok "(b) output unchanged" ||
    bad "(b) output: $(cat "$d/b.out")"
expect_eq "(b) libqt.so:lib_sum" "$(csv "$d/b.csv" libqt.so:lib_sum)" 5
timed "$d/b.csv" libqt.so:lib_sum && ok "(b) lib_sum timed" || bad "(b) lib_sum: $(cat "$d/b.csv")"
m=$(csv "$d/b.csv" libc.so.6:malloc)
m1=$(csv "$d/b.csv" 'main[1]:libc.so.6:malloc')
[ -n "$m" ] && [ -n "$m1" ] && ok "(b) malloc counted in both images ($m1, $m)" ||
    bad "(b) malloc: $(cat "$d/b.csv")"
grep -q 'no procedure matches' "$d/b.err" && bad "(b) $(grep 'no procedure matches' "$d/b.err")" ||
    ok "(b) no spurious 'no procedure matches'"

# (c) a glob that matches nothing anywhere.
"$DYN" run --count '*:no_such_proc' -- "$d/main" work 2 >"$d/c.out" 2>"$d/c.err"
rc=$?
expect_eq "(c) exit status" "$rc" 3
expect_eq "(c) said once" "$(grep -c "no procedure matches '\*:no_such_proc'" "$d/c.err")" 1
grep -q '^dyn: 0 procedures' "$d/c.out" && ok "(c) the table" || bad "(c) no table: $(cat "$d/c.out")"

# (d) --time with several processes and with --commands: the metric it is.
T=$top_builddir/tests/dyn/target
"$T" sleep 100 20 >/dev/null &
p1=$!
"$T" sleep 100 20 >/dev/null &
p2=$!
sleep 0.3
"$DYN" attach $p1,$p2 --time napper -d 0.4 >"$d/d.out" 2>"$d/d.err"
rc=$?
expect_eq "(d) several processes: exit status" "$rc" 0
for p in $p1 $p2; do
    # napper sleeps 20 ms at a time, nearly all the window: 0.2 .. 0.6 s of it
    awk -v p="pid $p: napper" '$1 == "time" && index($0, p) && $5 == "ms" { v = $4 }
        END { exit !(v >= 200 && v <= 600) }' "$d/d.out" && ok "(d) pid $p: napper timed" ||
        bad "(d) pid $p: $(cat "$d/d.out" "$d/d.err")"
done
printf 'show\nquit\n' | "$DYN" attach $p1 --time napper --commands >"$d/c2.out" 2>"$d/c2.err"
rc=$?
expect_eq "(d) --commands: exit status" "$rc" 0
grep -q '^time wall(napper) shared .* ms  napper$' "$d/c2.out" && ok "(d) --commands: the timer" ||
    bad "(d) --commands: $(cat "$d/c2.out" "$d/c2.err")"
kill $p1 $p2 2>/dev/null
wait 2>/dev/null

# (e) 'per call site from(F)': the calls made inside caller, site by site, exactly.
n=3001
"$DYN" run -e 'count calls(*) per call site from(caller)' -- "$T" calls $n >"$d/e.out" 2>"$d/e.err"
rc=$?
expect_eq "(e) exit status" "$rc" 0
grep -Eq "^count calls\(\*\) per call site from\(caller\) +$n  caller\+0x[0-9a-f]+ -> work\$" "$d/e.out" &&
    ok "(e) work's site: $n" || bad "(e) work: $(cat "$d/e.out" "$d/e.err")"
grep -Eq " $(((n + 2) / 3))  caller\+0x[0-9a-f]+ -> other\$" "$d/e.out" &&
    ok "(e) other's site: $(((n + 2) / 3))" || bad "(e) other: $(cat "$d/e.out")"
grep -Eq " ($n|not measured)  caller\+0x[0-9a-f]+ -> \*indirect\$" "$d/e.out" &&
    ok "(e) the call through a pointer: exact or not measured" || bad "(e) indirect: $(cat "$d/e.out")"
grep -q 'other calls' "$d/e.out" && bad "(e) a row of other calls" || ok "(e) no row of other calls"

# (f) --time of a procedure with no exit to patch (_start never returns): its calls
# counted, its time 0, with a note, not refused (the metric refused it as "no exit to
# patch"; dyn_run counted it so).
"$DYN" run -v --time _start -- "$d/main" work 1 >"$d/f.out" 2>"$d/f.err"
grep -q '1 procedures instrumented, 0 refused' "$d/f.err" &&
    grep -E -q '^ +1 +0\.000 +_start$' "$d/f.out" && grep -q 'no exit to patch' "$d/f.err" &&
    ok "(f) _start: 1 call, time 0, a note" || bad "(f) _start: $(cat "$d/f.out" "$d/f.err")"

[ $fails -eq 0 ] || exit 1
exit 0
