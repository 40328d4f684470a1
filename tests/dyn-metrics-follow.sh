#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# dyn -e follows the process as --count does (metrics/qm_live.c on libqpt's events),
# against ground truth (tests/dynfollow/main.c, tests/dynlib/lib.c built as libqt.so:
# each lib_sum(100) calls lib_square 34 times, with i = 0, 3, ..., 99):
#  (1) a library loaded by dlopen after the start: its metrics wait for it and go in
#      before its code runs: calls per procedure and in total, a `where`, a timer
#      exact; a library never loaded said at the end (in a static program, refused);
#  (2) dlclose and dlopen again: the values until the dlclose are kept and the calls
#      after the second dlopen added to them (a max over both; averages apart);
#  (3) exec: the new program gets every metric again, the first image's rows apart
#      (main[1]:...), each image exact (also with --follow-exec, taken with -e);
#  (4) exec, then a dlopen in the new program: measured there;
#  (5) fork after a dlopen: the children count with the parent;
#  (6) attach --commands with --interval and --histogram: a metric added for a library
#      not loaded yet waits, and counts exactly once the program dlopens it;
#  (7) several processes (attach P1,P2) steered at once with --commands, -i and
#      --histogram: one add for both (answered by each), their live tables together,
#      exact per process and summed, the histogram of both; a syntax error answered once.
# The program's output and exit status (3) are unchanged in every case.
# Skips (77) without gcc or when ptrace is not allowed. Exit: 0 pass, 1 fail, 99 error.
set -u
: "${top_srcdir:=.}"
: "${top_builddir:=.}"
. "$top_srcdir/tests/lib.sh"
DYN=$top_builddir/tools/dyn
dyn_setup dyn-metrics-follow
d=$dir
qp_have gcc || { echo "SKIP: gcc not installed"; exit 77; }
gcc -O2 -fPIC -shared -o "$d/libqt.so" "$top_srcdir/tests/dynlib/lib.c" || exit 99
gcc -O2 -o "$d/main" "$top_srcdir/tests/dynfollow/main.c" -ldl -lpthread || exit 99
lib=$(cd "$d" && pwd)/libqt.so

# row FILE METRIC FOCUS: the value of a row of the CSV FILE (empty when there is none).
row() {
    awk -F, -v m="$2" -v f="$3" '$1 == m && $2 == f { print $4 }' "$1"
}
# same NAME: dyn's run NAME exited 3 with the plain run's output
same() {
    expect_eq "$1: exit status" "$rc" 3
    expect_eq "$1: output unchanged" "$(cat "$d/$1.out")" "$(cat "$d/$1.plain")"
}

# (1) dlopen after the start
"$d/main" dl "$lib" 7 >"$d/dl.plain"
"$DYN" run -e 'count calls(libqt.so:lib_sum)' -e 'count calls(libqt.so:lib_square) total' \
    -e 'count calls(libqt.so:lib_square) where arg1 > 50' -e 'time wall(libqt.so:lib_sum)' \
    -e 'count calls(libnone.so:x)' -e 'count calls(work) total' \
    -o "$d/dl.csv" -- "$d/main" dl "$lib" 7 >"$d/dl.out" 2>"$d/dl.err"
rc=$?
if [ $rc != 3 ] && grep -q -i 'ptrace\|not permitted' "$d/dl.err"; then
    echo "SKIP: dyn cannot trace here: $(head -n 1 "$d/dl.err")"
    exit 77
fi
head -n 1 "$d/dl.out" >"$d/dl.first" && mv "$d/dl.first" "$d/dl.out"
same dl
expect_eq "dl: libqt.so:lib_sum" \
    "$(row "$d/dl.csv" 'count calls(libqt.so:lib_sum)' libqt.so:lib_sum)" 7
expect_eq "dl: lib_square in total" \
    "$(row "$d/dl.csv" 'count calls(libqt.so:lib_square) total' total)" 238
# 51, 54, ..., 99: 17 a call of lib_sum
expect_eq "dl: lib_square where arg1 > 50" \
    "$(row "$d/dl.csv" 'count calls(libqt.so:lib_square) where arg1 > 50' libqt.so:lib_square)" 119
ns=$(row "$d/dl.csv" 'time wall(libqt.so:lib_sum)' libqt.so:lib_sum)
[ -n "$ns" ] && [ "$ns" -gt 0 ] && ok "dl: time wall(libqt.so:lib_sum) $ns ns" \
    || bad "dl: time wall: '$ns'"
expect_eq "dl: the executable's metric beside them" \
    "$(row "$d/dl.csv" 'count calls(work) total' total)" 0
grep -q '#1 count calls(libqt.so:lib_sum): no library matching libqt.so is loaded: measured once one is (dlopen)' \
    "$d/dl.err" && ok "dl: waiting said" || bad "dl: no waiting note: $(cat "$d/dl.err")"
grep -q ': libqt.so loaded: metrics #1, #2, #3, #4 measured from now on' "$d/dl.err" \
    && ok "dl: loaded note" || bad "dl: no loaded note: $(cat "$d/dl.err")"
grep -q ': libqt.so unloaded (dlclose): the values of metrics #1, #2, #3, #4 are those until then' \
    "$d/dl.err" && ok "dl: unloaded note" || bad "dl: no unloaded note: $(cat "$d/dl.err")"
grep -q '#5 count calls(libnone.so:x): no library matching libnone.so was loaded during the session' \
    "$d/dl.err" && ok "dl: never-loaded library said at the end" \
    || bad "dl: no never-loaded note: $(cat "$d/dl.err")"
# ... a static program has no loader to dlopen with: refused at once, as before
if gcc -O2 -static -o "$d/static" "$top_srcdir/tests/dynfollow/main.c" -lpthread 2>/dev/null
then
    "$DYN" run -e 'count calls(libqt.so:lib_sum)' -- "$d/static" work 3 >"$d/st.out" \
        2>"$d/st.err"
    expect_eq "static: refused" $? 2
    grep -q 'libqt.so: no such library loaded in process [0-9]*.*loaded: none' "$d/st.err" \
        && [ "$(wc -l <"$d/st.err")" = 1 ] && ok "static: one line" \
        || bad "static: $(cat "$d/st.err")"
fi

# (2) dlclose, dlopen again
"$d/main" dl2 "$lib" 3 4 >"$d/dl2.plain"
"$DYN" run -e 'count calls(libqt.so:lib_sum)' -e 'count calls(libqt.so:lib_square) total' \
    -e 'max(arg1) calls(libqt.so:lib_square) total' \
    -e 'avg(arg1) calls(libqt.so:lib_square) total' \
    -o "$d/dl2.csv" -- "$d/main" dl2 "$lib" 3 4 >"$d/dl2.out" 2>"$d/dl2.err"
rc=$?
head -n 1 "$d/dl2.out" >"$d/dl2.first" && mv "$d/dl2.first" "$d/dl2.out"
same dl2
expect_eq "dl2: libqt.so:lib_sum (3 + 4)" \
    "$(row "$d/dl2.csv" 'count calls(libqt.so:lib_sum)' libqt.so:lib_sum)" 7
expect_eq "dl2: lib_square in total" \
    "$(row "$d/dl2.csv" 'count calls(libqt.so:lib_square) total' total)" 238
expect_eq "dl2: max(arg1) over both" \
    "$(row "$d/dl2.csv" 'max(arg1) calls(libqt.so:lib_square) total' total)" 99
# (0 + 3 + ... + 99) / 34 = 49.5, rounded down
expect_eq "dl2: the first average apart" \
    "$(row "$d/dl2.csv" 'avg(arg1) calls(libqt.so:lib_square) total' 'total (until dlclose 1)')" 49
expect_eq "dl2: the second average apart" \
    "$(row "$d/dl2.csv" 'avg(arg1) calls(libqt.so:lib_square) total' 'total (until dlclose 2)')" 49
expect_eq "dl2: loaded twice" "$(grep -c ': libqt.so loaded: metrics' "$d/dl2.err")" 2

# (3) exec
"$d/main" exec 4 6 >"$d/exec.plain"
"$DYN" run -e 'count calls(work)' -e 'count calls(work) total' \
    -e 'count calls(libc.so.6:execl) total' -e 'time wall(work)' \
    -o "$d/exec.csv" -- "$d/main" exec 4 6 >"$d/exec.out" 2>"$d/exec.err"
rc=$?
head -n 2 "$d/exec.out" >"$d/exec.first" && mv "$d/exec.first" "$d/exec.out"
same exec
expect_eq "exec: work of the first image" \
    "$(row "$d/exec.csv" 'count calls(work)' 'main[1]:work')" 4
expect_eq "exec: work of the new image" "$(row "$d/exec.csv" 'count calls(work)' work)" 6
expect_eq "exec: in total, the first image" \
    "$(row "$d/exec.csv" 'count calls(work) total' 'main[1]:total')" 4
expect_eq "exec: in total, the new image" \
    "$(row "$d/exec.csv" 'count calls(work) total' total)" 6
expect_eq "exec: execl of the first image" \
    "$(row "$d/exec.csv" 'count calls(libc.so.6:execl) total' 'main[1]:total')" 1
expect_eq "exec: execl of the new image" \
    "$(row "$d/exec.csv" 'count calls(libc.so.6:execl) total' total)" 0
for f in 'main[1]:work' work; do
    ns=$(row "$d/exec.csv" 'time wall(work)' "$f")
    [ -n "$ns" ] && [ "$ns" -gt 0 ] && ok "exec: time wall(work) $f $ns ns" \
        || bad "exec: time wall(work) $f: '$ns'"
done
grep -q 'ran execve (.*main): the values up to the exec are kept apart (rows main\[1\]:...); measuring the new program' \
    "$d/exec.err" && ok "exec: note" || bad "exec: no note: $(cat "$d/exec.err")"
# ... --follow-exec is taken with -e (the metrics follow anyway)
"$DYN" run --follow-exec -e 'count calls(work)' -o "$d/fx.csv" -- "$d/main" exec 1 2 \
    >/dev/null 2>"$d/fx.err"
expect_eq "exec: --follow-exec with -e: exit status" $? 3
expect_eq "exec: --follow-exec with -e: the new image" \
    "$(row "$d/fx.csv" 'count calls(work)' work)" 2

# (4) exec, then dlopen in the new program
"$d/main" execdl 2 "$lib" 5 >"$d/execdl.plain"
"$DYN" run -e 'count calls(libqt.so:lib_sum)' -e 'count calls(work) total' \
    -o "$d/execdl.csv" -- "$d/main" execdl 2 "$lib" 5 >"$d/execdl.out" 2>"$d/execdl.err"
rc=$?
head -n 2 "$d/execdl.out" >"$d/execdl.first" && mv "$d/execdl.first" "$d/execdl.out"
same execdl
expect_eq "execdl: lib_sum in the new program" \
    "$(row "$d/execdl.csv" 'count calls(libqt.so:lib_sum)' libqt.so:lib_sum)" 5
expect_eq "execdl: work of the first image" \
    "$(row "$d/execdl.csv" 'count calls(work) total' 'main[1]:total')" 2
expect_eq "execdl: work of the new image" \
    "$(row "$d/execdl.csv" 'count calls(work) total' total)" 0

# (5) fork after a dlopen: 3 children, each (and the parent) 40 calls of each
"$d/main" forks "$lib" 3 40 >"$d/forks.plain"
"$DYN" run -e 'count calls(work) total' -e 'count calls(libqt.so:lib_sum) total' \
    -e 'count calls(libc.so.6:fork) total' \
    -o "$d/forks.csv" -- "$d/main" forks "$lib" 3 40 >"$d/forks.out" 2>"$d/forks.err"
rc=$?
head -n 1 "$d/forks.out" >"$d/forks.first" && mv "$d/forks.first" "$d/forks.out"
same forks
expect_eq "forks: work (4 x 40)" "$(row "$d/forks.csv" 'count calls(work) total' total)" 160
expect_eq "forks: lib_sum (4 x 40)" \
    "$(row "$d/forks.csv" 'count calls(libqt.so:lib_sum) total' total)" 160
expect_eq "forks: fork" "$(row "$d/forks.csv" 'count calls(libc.so.6:fork) total' total)" 3
grep -q ': 3 children forked: counted with the parent' "$d/forks.err" \
    && ok "forks: children note" || bad "forks: no children note: $(cat "$d/forks.err")"

# (6) attach --commands (with -i and --histogram) to a program that dlopens when told
mkfifo "$d/pin" "$d/cin" || exit 99
"$d/main" dlwait "$lib" 5 <"$d/pin" >"$d/cmd.prog" 2>&1 &
tpid=$!
exec 7>"$d/pin"
# (attached once the shell that opened the FIFO runs the program)
for _ in $(seq 100); do
    [ "$(readlink "/proc/$tpid/exe")" = "$(cd "$d" && pwd)/main" ] && break
    sleep 0.05
done
"$DYN" attach "$tpid" --commands -i 0.05 --histogram <"$d/cin" >"$d/cmd.out" 2>"$d/cmd.err" &
dpid=$!
exec 8>"$d/cin"
echo 'add count calls(libqt.so:lib_sum) total' >&8
wait_lines "$d/cmd.out" '^added #1' 1 || bad "--commands: add: $(cat "$d/cmd.out" "$d/cmd.err")"
grep -q '^added #1 count calls(libqt.so:lib_sum) total (waiting for its library)' "$d/cmd.out" \
    && ok "--commands: a library not loaded yet waited for" \
    || bad "--commands: $(cat "$d/cmd.out")"
echo go >&7
exec 7>&-
wait $tpid
expect_eq "--commands: the program's exit status" $? 3
tpid=
wait $dpid
expect_eq "--commands: dyn's exit status" $? 0
dpid=
exec 8>&-
grep -q '^dl ' "$d/cmd.prog" && ok "--commands: the program ran" \
    || bad "--commands: program output '$(cat "$d/cmd.prog")'"
grep -q ': libqt.so loaded: metrics #1 measured from now on' "$d/cmd.out" \
    && ok "--commands: loaded answered" || bad "--commands: $(cat "$d/cmd.out")"
expect_eq "--commands: lib_sum in total after the dlopen" \
    "$(awk '/^count calls\(libqt.so:lib_sum\) total/ { v = $(NF - 1) } END { print v }' \
        "$d/cmd.out")" 5

# (7) several processes steered at once: attach P1,P2 --commands -i
mkdir -p "$d/srv" && dyn_build_qtlib "$d/srv"
mkfifo "$d/s1" "$d/s2" "$d/mcin" || exit 99
"$d/srv/main" serve <"$d/s1" >"$d/s1.out" 2>&1 &
p1=$!
"$d/srv/main" serve <"$d/s2" >"$d/s2.out" 2>&1 &
p2=$!
exec 5>"$d/s1" 6>"$d/s2"
wait_lines "$d/s1.out" '^ready' 1 && wait_lines "$d/s2.out" '^ready' 1 \
    || bad "many: the servers did not start"
"$DYN" attach "$p1,$p2" --commands -i 0.1 --histogram -o "$d/many.csv" <"$d/mcin" >"$d/many.out" \
    2>"$d/many.err" &
dpid=$!
exec 8>"$d/mcin"
echo 'add count calls(libqt.so:lib_sum) total' >&8
wait_lines "$d/many.out" '^pid [0-9]*: added #1 count calls(libqt.so:lib_sum) total' 2 \
    && ok "many: the add answered by each process" || bad "many: add: $(cat "$d/many.out")"
echo 3 >&5
echo 4 >&6
wait_lines "$d/s1.out" '^done 3' 1 && wait_lines "$d/s2.out" '^done 4' 1 \
    || bad "many: the servers did not answer"
echo 'add count calls(nope(' >&8
echo show >&8
echo quit >&8
wait $dpid
expect_eq "many: dyn's exit status" $? 0
dpid=
exec 8>&- 5>&- 6>&-
wait $p1
expect_eq "many: a server's exit status" $? 3
wait $p2
expect_eq "many: the other's exit status" $? 3
expect_eq "many: process 1" "$(row "$d/many.csv" 'count calls(libqt.so:lib_sum) total' "pid $p1: total")" 3
expect_eq "many: process 2" "$(row "$d/many.csv" 'count calls(libqt.so:lib_sum) total' "pid $p2: total")" 4
expect_eq "many: the sum" "$(row "$d/many.csv" 'count calls(libqt.so:lib_sum) total' 'sum: total')" 7
expect_eq "many: a syntax error answered once" \
    "$(grep -c "^add:1:17: expected ')' after the pattern" "$d/many.out")" 1
grep -q '^dyn: 2 processes  t=' "$d/many.out" && ok "many: live tables (-i)" \
    || bad "many: no live table: $(cat "$d/many.out")"
awk '/^dyn: 2 processes/ { t = 1 } t && /pid '"$p1"': total/ { v = $(NF - 3) } END { print v }' \
    "$d/many.out" >"$d/many.last"
expect_eq "many: the last table" "$(cat "$d/many.last")" 3
expect_eq "many: the histogram over both processes" \
    "$(awk '/^metrics over time/ { h = 1; getline; next } h { s += $2 } END { print s }' \
        "$d/many.out")" 7

[ $fails -eq 0 ] || exit 1
exit 0
