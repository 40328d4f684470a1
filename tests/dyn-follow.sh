#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# dyn follows the process when a pattern names a library (MODULE:GLOB), against ground
# truth (tests/dynfollow/main.c, with tests/dynlib/lib.c built as libqt.so):
#  (1) a library loaded by dlopen after the start is instrumented once loaded: exact
#      counts, its dlclose says the counts are those until then; a MODULE never loaded
#      is reported at the end, not an error;
#  (2) threads calling the library: every call counted;
#  (3) fork: the children keep the patches and add to the same rows (shared counters):
#      counts of the executable's, a library's and a timed procedure's rows equal parent
#      plus children exactly, the children's status unchanged and the loader's int3 out
#      of them (their dlopen works);
#  (4) exec: the new program is run to its entry and instrumented again; the counts of
#      each image exact and apart (the first image's rows named main[1]:...), with a
#      MODULE: pattern and with --follow-exec and bare patterns only;
#  (5) dyn killed (SIGKILL) while its breakpoint is in: dyn clean puts it back and the
#      program's dlopen then works;
#  (6) dyn killed (SIGKILL) with forked children running: they were let go (not traced,
#      not stopped), run the patched code on and dlopen (no int3 left in them) and exit
#      right, one with `dyn clean` run on it, one without.
# The program's output and exit status (3) are unchanged in every case.
# Skips (77) without gcc or when ptrace is not allowed. Exit: 0 pass, 1 fail, 99 error.
set -u
: "${top_srcdir:=.}"
: "${top_builddir:=.}"
. "$top_srcdir/tests/lib.sh"
DYN=$top_builddir/tools/dyn
d=$top_builddir/tests/dyn-follow.d
fails=0
dpid=

rm -rf "$d"
mkdir -p "$d" || exit 99
qp_have gcc || { echo "SKIP: gcc not installed"; exit 77; }
gcc -O2 -fPIC -shared -o "$d/libqt.so" "$top_srcdir/tests/dynlib/lib.c" || exit 99
gcc -O2 -o "$d/main" "$top_srcdir/tests/dynfollow/main.c" -ldl -lpthread || exit 99
lib=$(cd "$d" && pwd)/libqt.so

cleanup() {
    exec 7>&- 2>/dev/null
    touch "$d/go" 2>/dev/null # (6): the program and its children end
    [ -n "$dpid" ] && kill -9 "$dpid" 2>/dev/null
}
trap cleanup EXIT

csv() { awk -F, -v n="$2" '$1 == n { print $2 }' "$1"; }
# same NAME: dyn's run NAME exited 3 with the plain run's output
same() {
    expect_eq "$1: exit status" "$rc" 3
    if [ "$(head -n 1 "$d/$1.out")" = "$(head -n 1 "$d/$1.plain")" ]; then
        ok "$1: output unchanged"
    else
        bad "$1: output '$(head -n 1 "$d/$1.out")', plain '$(head -n 1 "$d/$1.plain")'"
    fi
}

# (1) dlopen after the start
"$d/main" dl "$lib" 7 >"$d/dl.plain"
"$DYN" run -c 'libqt.so:lib_sum' -c 'libqt.so:lib_square' -c 'libnone.so:x' \
    -o "$d/dl.csv" -- "$d/main" dl "$lib" 7 >"$d/dl.out" 2>"$d/dl.err"
rc=$?
if [ $rc != 3 ] && grep -q -i 'ptrace\|not permitted' "$d/dl.err"; then
    echo "SKIP: dyn cannot trace here: $(head -n 1 "$d/dl.err")"
    exit 77
fi
same dl
expect_eq "dl: libqt.so:lib_sum" "$(csv "$d/dl.csv" libqt.so:lib_sum)" 7
expect_eq "dl: libqt.so:lib_square" "$(csv "$d/dl.csv" libqt.so:lib_square)" 238
grep -q 'libqt.so loaded: 2 procedures instrumented' "$d/dl.err" && ok "dl: loaded note" \
    || bad "dl: no 'loaded' note: $(cat "$d/dl.err")"
grep -q 'libqt.so unloaded: its counts are those until then' "$d/dl.err" \
    && ok "dl: unloaded note" || bad "dl: no 'unloaded' note"
grep -q "no library matching 'libnone.so' (in 'libnone.so:x') was loaded" "$d/dl.err" \
    && ok "dl: never-loaded MODULE reported at the end" || bad "dl: no never-loaded note"

# (2) threads
"$d/main" threads "$lib" 4 500 >"$d/th.plain"
"$DYN" run -c 'libqt.so:lib_sum' -o "$d/th.csv" -- "$d/main" threads "$lib" 4 500 \
    >"$d/th.out" 2>"$d/th.err"
rc=$?
same th
expect_eq "threads: libqt.so:lib_sum" "$(csv "$d/th.csv" libqt.so:lib_sum)" 2000

# (3) fork (followed: a library pattern)
"$d/main" fork 11 >"$d/fork.plain"
"$DYN" run -c work -c 'libc.so.6:fork' -o "$d/fork.csv" -- "$d/main" fork 11 \
    >"$d/fork.out" 2>"$d/fork.err"
rc=$?
same fork
expect_eq "fork: work (parent 11, child 5)" "$(csv "$d/fork.csv" work)" 16
grep -q ': 1 child forked: counted with the parent (its later dlopen and exec not followed)' \
    "$d/fork.err" && ok "fork: child note" || bad "fork: no child note: $(cat "$d/fork.err")"
# ... 3 children, each (and the parent) calling work and libqt.so's lib_sum 40 times
"$d/main" forks "$lib" 3 40 >"$d/forks.plain"
"$DYN" run -c work -c 'libqt.so:lib_sum' -c 'libc.so.6:fork' -o "$d/forks.csv" \
    -- "$d/main" forks "$lib" 3 40 >"$d/forks.out" 2>"$d/forks.err"
rc=$?
same forks
grep -q '^forks 3 children, 3 ran right$' "$d/forks.out" && ok "forks: children ran right" \
    || bad "forks: output '$(cat "$d/forks.out")'"
expect_eq "forks: work (4 x 40)" "$(csv "$d/forks.csv" work)" 160
expect_eq "forks: libqt.so:lib_sum (4 x 40)" "$(csv "$d/forks.csv" libqt.so:lib_sum)" 160
expect_eq "forks: libc.so.6:fork" "$(csv "$d/forks.csv" libc.so.6:fork)" 3
grep -q ': 3 children forked: counted with the parent' "$d/forks.err" \
    && ok "forks: children note" || bad "forks: no children note: $(cat "$d/forks.err")"
# ... timed (the depth is shared too: the time some thread of any of them was inside)
"$DYN" run --follow-exec -t work -o "$d/ft.csv" -- "$d/main" forks "$lib" 3 40 \
    >"$d/ft.out" 2>"$d/ft.err"
rc=$?
cp "$d/forks.plain" "$d/ft.plain"
same ft
expect_eq "forks timed: work" "$(csv "$d/ft.csv" work)" 160
ns=$(awk -F, '$1 == "work" { print $3 }' "$d/ft.csv")
[ -n "$ns" ] && [ "$ns" -gt 0 ] && [ "$ns" -lt 1000000000 ] && ok "forks timed: $ns ns" \
    || bad "forks timed: time '$ns'"

# (4) exec
"$d/main" exec 4 6 >"$d/exec.plain"
"$DYN" run -c work -c 'libc.so.6:execl' -o "$d/exec.csv" -- "$d/main" exec 4 6 \
    >"$d/exec.out" 2>"$d/exec.err"
rc=$?
same exec
grep -q '^work 6$' "$d/exec.out" && ok "exec: the new program ran" || bad "exec: output"
expect_eq "exec: work of the first image" "$(csv "$d/exec.csv" 'main[1]:work')" 4
expect_eq "exec: work of the new image" "$(csv "$d/exec.csv" work)" 6
expect_eq "exec: execl of the first image" \
    "$(csv "$d/exec.csv" 'main[1]:libc.so.6:execl')" 1
expect_eq "exec: execl of the new image" "$(csv "$d/exec.csv" libc.so.6:execl)" 0
grep -q 'ran execve.*kept apart (rows main\[1\]:' "$d/exec.err" && ok "exec: note" \
    || bad "exec: no note: $(cat "$d/exec.err")"
[ "$(grep -c 'procedures instrumented' "$d/exec.err")" = 2 ] \
    && ok "exec: instrumented again" || bad "exec: not instrumented again: $(cat "$d/exec.err")"
# ... bare patterns only: --follow-exec
"$DYN" run -c work --follow-exec -o "$d/fx.csv" -- "$d/main" exec 3 5 \
    >"$d/fx.out" 2>"$d/fx.err"
rc=$?
"$d/main" exec 3 5 >"$d/fx.plain"
same fx
expect_eq "follow-exec: work of the first image" "$(csv "$d/fx.csv" 'main[1]:work')" 3
expect_eq "follow-exec: work of the new image" "$(csv "$d/fx.csv" work)" 5

# (5) dyn killed while its breakpoint is in; the program waits on a FIFO to dlopen
mkfifo "$d/fifo" || exit 99
"$DYN" run -c 'libqt.so:lib_sum' -- "$d/main" dlwait "$lib" 5 <"$d/fifo" \
    >"$d/kill.out" 2>"$d/kill.err" &
dpid=$!
exec 7>"$d/fifo"
ppid=
for _ in $(seq 100); do
    ppid=$(sed -n 's/^dyn: \([0-9]*\): waiting for the libraries.*/\1/p' "$d/kill.err")
    [ -n "$ppid" ] && break
    sleep 0.1
done
kill -9 "$dpid"
wait "$dpid" 2>/dev/null
dpid=
if [ -z "$ppid" ]; then
    bad "kill: dyn did not start: $(cat "$d/kill.err")"
else
    "$DYN" clean "$ppid" >"$d/clean.out" 2>&1
    grep -q "loader's breakpoint .* put back" "$d/clean.out" && ok "kill: clean" \
        || bad "kill: clean said: $(cat "$d/clean.out")"
    echo go >&7
    exec 7>&-
    for _ in $(seq 100); do kill -0 "$ppid" 2>/dev/null || break; sleep 0.1; done
    grep -q '^dl ' "$d/kill.out" && ok "kill: the program's dlopen worked after clean" \
        || bad "kill: program output '$(cat "$d/kill.out")'"
fi

# (6) dyn killed with forked children running; they wait for the file go
pids_of() { awk -v p="$1" '$4 == p { print $1 }' /proc/[0-9]*/stat 2>/dev/null; }
tracer() { awk '/^TracerPid:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
"$DYN" run -c work -c 'libqt.so:lib_sum' -- "$d/main" forks "$lib" 2 30 "$d/go" \
    >"$d/fk.out" 2>"$d/fk.err" &
dpid=$!
ppid= kids= free=0
for _ in $(seq 100); do
    ppid=$(pids_of "$dpid")
    [ -n "$ppid" ] && kids=$(pids_of "$ppid")
    free=0
    for k in $kids; do [ "$(tracer "$k")" = 0 ] && free=$((free + 1)); done
    [ $free = 2 ] && break
    sleep 0.1
done
[ $free = 2 ] && ok "kill+fork: both children let go (not traced)" \
    || bad "kill+fork: children '$kids' not let go: $(cat "$d/fk.err")"
kill -9 "$dpid"
wait "$dpid" 2>/dev/null
dpid=
set -- $kids
if [ -z "$ppid" ] || [ $# != 2 ]; then
    bad "kill+fork: no parent or children: $(cat "$d/fk.err")"
else
    stopped=$(awk '/^State:/ { print $2 }' "/proc/$ppid/status" "/proc/$1/status" \
        "/proc/$2/status" | grep -c '[tT]')
    expect_eq "kill+fork: processes left stopped" "$stopped" 0
    "$DYN" clean "$ppid" >"$d/fk-clean.out" 2>&1
    "$DYN" clean "$1" >"$d/fk-clean1.out" 2>&1
    grep -q "$1: 2 jumps put back" "$d/fk-clean1.out" && ok "kill+fork: clean of a child" \
        || bad "kill+fork: clean of child $1 said: $(cat "$d/fk-clean1.out")"
    touch "$d/go"
    for _ in $(seq 100); do kill -0 "$ppid" 2>/dev/null || break; sleep 0.1; done
    grep -q '^forks 2 children, 2 ran right$' "$d/fk.out" \
        && ok "kill+fork: parent and children ran right (one child not cleaned)" \
        || bad "kill+fork: program output '$(cat "$d/fk.out")'"
fi

[ $fails = 0 ] && exit 0 || exit 1
