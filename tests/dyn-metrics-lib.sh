#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# dyn -e measures procedures of shared libraries (LIB:PROC, LIB with ".so" in it)
# exactly, with the library built by tests/dyn-libs.sh's sources (tests/dynlib/lib.c as
# libqt.so: each lib_sum(100) calls lib_square 34 times) and libc.so.6, in a program
# that calls them a known number of times (tests/dynlib/main.c):
#  (a) dyn run -e: calls per procedure and in total exact, rows named LIB:PROC, a
#      wall-clock timer of a library procedure, a `where` on its argument; the
#      program's output and exit status unchanged;
#  (b) a library not loaded: the metric waits for it (a note at the start and one at the
#      end, the program's run and other metrics unchanged, as --count does; the
#      libraries loaded later are tests/dyn-metrics-follow.sh's); errors: inside()
#      mixing the executable and a library, per call site in a library;
#  (c) dyn attach -e to a program serving requests: the counts of a window exact; after
#      SIGTERM dyn clean finds nothing; with --commands, a library's metric added
#      while attached exact from then on, a library not loaded answered (it waits); the
#      answers are those of plain runs.
# Skips (77) without gcc or when ptrace is not allowed. Exit: 0 pass, 1 fail, 99 error.
set -u
: "${top_srcdir:=.}"
: "${top_builddir:=.}"
. "$top_srcdir/tests/lib.sh"
DYN=$top_builddir/tools/dyn
dyn_setup dyn-metrics-lib
d=$dir
dyn_build_qtlib "$d"

# row FILE METRIC FOCUS: the value of a row of the CSV FILE (empty when there is none).
row() {
    awk -F, -v m="$2" -v f="$3" '$1 == m && $2 == f { print $4 }' "$1"
}

"$d/main" run 10 >"$d/plain.out"
[ $? = 3 ] || { echo "plain run failed"; exit 99; }

# (a) dyn run -e
"$DYN" run -e 'count calls(libqt.so:lib_sum)' -e 'count calls(libqt.so:lib_square) total' \
    -e 'count calls(libc.so.6:strverscmp)' -e 'time wall(libqt.so:lib_sum)' \
    -e 'count calls(libqt.so:lib_square) where arg1 > 50' -e 'count calls(work) total' \
    -o "$d/a.csv" -- "$d/main" run 10 >"$d/a.out" 2>"$d/a.err"
rc=$?
if [ $rc != 3 ] && grep -q -i 'ptrace\|not permitted' "$d/a.err"; then
    echo "SKIP: dyn cannot trace here: $(head -n 1 "$d/a.err")"
    exit 77
fi
expect_eq "run -e: exit status" "$rc" 3
expect_eq "run -e: the program's output" "$(head -n 1 "$d/a.out")" "$(cat "$d/plain.out")"
expect_eq "run -e: libqt.so:lib_sum" \
    "$(row "$d/a.csv" 'count calls(libqt.so:lib_sum)' libqt.so:lib_sum)" 10
expect_eq "run -e: lib_square in total" \
    "$(row "$d/a.csv" 'count calls(libqt.so:lib_square) total' total)" 340
expect_eq "run -e: libc.so.6 strverscmp (its procedure's name)" \
    "$(grep -c '^count calls(libc.so.6:strverscmp),libc.so.6:[_a-z]*strverscmp,count,10,1$' \
        "$d/a.csv")" 1
# i = 0, 3, ..., 99: those over 50 are 51, 54, ..., 99 (17 of them) a call of lib_sum
expect_eq "run -e: lib_square where arg1 > 50" \
    "$(row "$d/a.csv" 'count calls(libqt.so:lib_square) where arg1 > 50' libqt.so:lib_square)" 170
expect_eq "run -e: the executable's work beside them" \
    "$(row "$d/a.csv" 'count calls(work) total' total)" 1
ns=$(row "$d/a.csv" 'time wall(libqt.so:lib_sum)' libqt.so:lib_sum)
if [ -n "$ns" ] && [ "$ns" -gt 0 ]; then ok "run -e: time wall(libqt.so:lib_sum) $ns ns"; else
    bad "run -e: time wall: '$ns': $(cat "$d/a.csv" "$d/a.err")"; fi

# (b) a library not loaded: waited for
"$DYN" run -e 'count calls(libnope.so:f)' -e 'count calls(libqt.so:lib_sum) total' \
    -o "$d/b.csv" -- "$d/main" run 1 >"$d/b.out" 2>"$d/b.err"
expect_eq "library not loaded: exit status (the program's)" $? 3
grep -q '#1 count calls(libnope.so:f): no library matching libnope.so is loaded: measured once one is (dlopen)' \
    "$d/b.err" && ok "library not loaded: said at the start" \
    || bad "library not loaded: $(cat "$d/b.err")"
grep -q '#1 count calls(libnope.so:f): no library matching libnope.so was loaded during the session' \
    "$d/b.err" && ok "library not loaded: said at the end" \
    || bad "library not loaded: $(cat "$d/b.err")"
expect_eq "library not loaded: the program ran" "$(head -n 1 "$d/b.out")" \
    "$("$d/main" run 1)"
expect_eq "library not loaded: the other metric" \
    "$(row "$d/b.csv" 'count calls(libqt.so:lib_sum) total' total)" 1
expect_eq "library not loaded: no row of its own" \
    "$(grep -c '^count calls(libnope.so:f)' "$d/b.csv")" 0
# errors
"$DYN" run -e 'count calls(libqt.so:lib_square) inside(work)' -- "$d/main" run 1 \
    >/dev/null 2>"$d/b2.err"
expect_eq "inside() of the executable for a library: exit status" $? 2
grep -q 'inside() names procedures of the same shared library' "$d/b2.err" \
    && ok "inside() mixing: refused with its caret" || bad "inside() mixing: $(cat "$d/b2.err")"
"$DYN" run -e 'count calls(libqt.so:lib_square) inside(libqt.so:lib_sum)' -o "$d/b3.csv" \
    -- "$d/main" run 2 >/dev/null 2>"$d/b3.err"
expect_eq "inside() in the same library" \
    "$(row "$d/b3.csv" 'count calls(libqt.so:lib_square) inside(libqt.so:lib_sum)' libqt.so:lib_square)" 68
"$DYN" run -e 'count calls(libqt.so:lib_square) per call site' -- "$d/main" run 1 \
    >/dev/null 2>"$d/b4.err"
expect_eq "per call site in a library: exit status" $? 2
grep -q 'per call site: not for a shared library' "$d/b4.err" \
    && ok "per call site in a library: refused" || bad "call site: $(cat "$d/b4.err")"

# (c) dyn attach -e to a server
dyn_serve "$d"
dyn_req 4
# The live tables (-i) start once the metrics are in.
"$DYN" attach "$tpid" -e 'count calls(libqt.so:lib_sum)' \
    -e 'count calls(libqt.so:lib_square) total' -e 'count calls(libc.so.6:strverscmp) total' \
    -i 0.05 -o "$d/att.csv" >"$d/att.out" 2>"$d/att.err" &
dpid=$!
wait_lines "$d/att.out" '^metric' 1 || bad "attach -e: no live table: $(cat "$d/att.err")"
dyn_req 20
kill -TERM $dpid
wait $dpid
expect_eq "attach -e: exit status after SIGTERM" $? 0
expect_eq "attach -e: libqt.so:lib_sum" \
    "$(row "$d/att.csv" 'count calls(libqt.so:lib_sum)' libqt.so:lib_sum)" 20
expect_eq "attach -e: lib_square in total" \
    "$(row "$d/att.csv" 'count calls(libqt.so:lib_square) total' total)" 680
expect_eq "attach -e: strverscmp in total" \
    "$(row "$d/att.csv" 'count calls(libc.so.6:strverscmp) total' total)" 20
"$DYN" clean "$tpid" >"$d/clean.out" 2>&1
grep -q 'nothing of dyn.s found' "$d/clean.out" && ok "attach -e: nothing left after SIGTERM" \
    || bad "attach -e: left behind: $(cat "$d/clean.out")"
dyn_req 3
# --commands: a library's metric added while attached (exact from then on), a library
# not loaded answered, the session ends with nothing left.
mkfifo "$d/cin" || exit 99
"$DYN" attach "$tpid" --commands <"$d/cin" >"$d/cmd.out" 2>&1 &
dpid=$!
exec 8>"$d/cin"
echo 'add count calls(libqt.so:lib_square) total' >&8
wait_lines "$d/cmd.out" '^added #1' 1 || bad "--commands: add: $(cat "$d/cmd.out")"
dyn_req 5
echo 'add count calls(libnope.so:f)' >&8
echo show >&8
echo quit >&8
wait $dpid
expect_eq "--commands: exit status" $? 0
exec 8>&-
expect_eq "--commands: lib_square in total after the add" \
    "$(awk '/^count calls\(libqt.so:lib_square\) total/ { v = $(NF - 1) } END { print v }' \
        "$d/cmd.out")" 170
grep -q '^added #2 count calls(libnope.so:f) (waiting for its library)' "$d/cmd.out" \
    && ok "--commands: a library not loaded answered" || bad "--commands: $(cat "$d/cmd.out")"
"$DYN" clean "$tpid" >"$d/clean2.out" 2>&1
grep -q 'nothing of dyn.s found' "$d/clean2.out" && ok "--commands: nothing left after quit" \
    || bad "--commands: left behind: $(cat "$d/clean2.out")"
dyn_req 2

# The end: the program's answers are those of plain runs.
exec 7>&-
wait $tpid
expect_eq "serve: exit status" $? 3
tpid=
for n in 4 20 3 5 2; do
    want=$("$d/main" run $n | sed 's/^sum=//')
    grep -q "^done $n $want\$" "$d/serve.out" && ok "serve: answer to $n" \
        || bad "serve: answer to $n: want $want: $(cat "$d/serve.out")"
done
[ $fails -eq 0 ] || exit 1
exit 0
