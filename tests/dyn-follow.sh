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
#  (3) fork: the child runs unpatched (its status unchanged), the parent's counts exact;
#  (4) exec: the new program is run to its entry and instrumented again; the counts of
#      each image exact and apart (the first image's rows named main[1]:...), with a
#      MODULE: pattern and with --follow-exec and bare patterns only;
#  (5) dyn killed (SIGKILL) while its breakpoint is in: dyn clean puts it back and the
#      program's dlopen then works.
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
    [ -n "$dpid" ] && kill -9 "$dpid" 2>/dev/null
}
trap cleanup EXIT

csv() { awk -F, -v n="$2" '$1 == n { print $2 }' "$1"; }
expect() {
    if [ "$2" = "$3" ]; then ok "$1 = $3"; else bad "$1: got '$2', want '$3'"; fi
}
# same NAME: dyn's run NAME exited 3 with the plain run's output
same() {
    expect "$1: exit status" "$rc" 3
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
expect "dl: libqt.so:lib_sum" "$(csv "$d/dl.csv" libqt.so:lib_sum)" 7
expect "dl: libqt.so:lib_square" "$(csv "$d/dl.csv" libqt.so:lib_square)" 238
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
expect "threads: libqt.so:lib_sum" "$(csv "$d/th.csv" libqt.so:lib_sum)" 2000

# (3) fork (followed: a library pattern)
"$d/main" fork 11 >"$d/fork.plain"
"$DYN" run -c work -c 'libc.so.6:fork' -o "$d/fork.csv" -- "$d/main" fork 11 \
    >"$d/fork.out" 2>"$d/fork.err"
rc=$?
same fork
expect "fork: work (the parent's)" "$(csv "$d/fork.csv" work)" 11
grep -q ': 1 child forked: not measured' "$d/fork.err" && ok "fork: child note" \
    || bad "fork: no child note: $(cat "$d/fork.err")"

# (4) exec
"$d/main" exec 4 6 >"$d/exec.plain"
"$DYN" run -c work -c 'libc.so.6:execl' -o "$d/exec.csv" -- "$d/main" exec 4 6 \
    >"$d/exec.out" 2>"$d/exec.err"
rc=$?
same exec
grep -q '^work 6$' "$d/exec.out" && ok "exec: the new program ran" || bad "exec: output"
expect "exec: work of the first image" "$(csv "$d/exec.csv" 'main[1]:work')" 4
expect "exec: work of the new image" "$(csv "$d/exec.csv" work)" 6
expect "exec: execl of the first image" \
    "$(csv "$d/exec.csv" 'main[1]:libc.so.6:execl')" 1
expect "exec: execl of the new image" "$(csv "$d/exec.csv" libc.so.6:execl)" 0
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
expect "follow-exec: work of the first image" "$(csv "$d/fx.csv" 'main[1]:work')" 3
expect "follow-exec: work of the new image" "$(csv "$d/fx.csv" work)" 5

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

[ $fails = 0 ] && exit 0 || exit 1
