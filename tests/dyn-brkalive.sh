#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# A dyn killed at any moment never lets its loader breakpoint kill the program it
# follows (libraries loaded later, MODULE:GLOB patterns). The program
# (tests/dynbrkalive/main.c) dlopens, calls and dlcloses tests/dynlib's libqt.so in a
# loop from two threads, 10 ms apart; dyn attach follows it (-c 'libqt.so:lib_sum') and
# is killed (SIGKILL) at several delays after it is ready, the loader calling its r_brk
# meanwhile (a thread may be held there at that very moment):
#  (a) while dyn lives it sees the loads ("libqt.so loaded: 1 procedures instrumented");
#  (b) after the kill the program goes on dlopening and exits 0 with the answers of a
#      plain run (with the int3 of old, the next dlopen died of SIGTRAP: status 133);
#  (c) `dyn clean PID` after a kill puts the loader's r_brk back ("the loader's
#      breakpoint ... put back") and the program still ends right; a second clean finds
#      nothing more to put back;
#  (d) a session that ends by itself (--duration) leaves no shared page (qpt-brk).
# Skips (77) without gcc or when ptrace is not allowed. Exit: 0 pass, 1 fail, 99 error.
set -u
: "${top_srcdir:=.}"
: "${top_builddir:=.}"
. "$top_srcdir/tests/lib.sh"
DYN=$top_builddir/tools/dyn
dyn_setup dyn-brkalive
d=$dir
qp_have gcc || { echo "SKIP: gcc not installed"; exit 77; }
gcc -O2 -fPIC -shared -o "$d/libqt.so" "$top_srcdir/tests/dynlib/lib.c" || exit 99
gcc -O2 -o "$d/main" "$top_srcdir/tests/dynbrkalive/main.c" -ldl -lpthread || exit 99
lib=$(cd "$d" && pwd)/libqt.so
N=120

"$d/main" "$lib" 5 1 >"$d/plain.out" || exit 99
want="loops $((2 * N)) sum $(($(awk '{ print $4 }' "$d/plain.out") / 10 * 2 * N))"

# round NAME DELAY [clean]: the program started, dyn attached and killed DELAY s after
# its first line; the program must end with status 0 and the plain answers.
round() {
    "$d/main" "$lib" $N 10 >"$d/$1.out" 2>&1 &
    tpid=$!
    sleep 0.1
    "$DYN" attach $tpid -c 'libqt.so:lib_sum' >"$d/$1.dyn" 2>"$d/$1.err" &
    dpid=$!
    dyn_wait_for "$d/$1.err" "^dyn: $tpid: "
    dyn_skip_untraced "$d/$1.err"
    sleep "$2"
    kill -9 $dpid
    wait $dpid 2>/dev/null
    dpid=
    if [ "${3:-}" = clean ]; then
        "$DYN" clean $tpid >"$d/$1.clean" 2>&1
        grep -q "loader's breakpoint .* put back" "$d/$1.clean" && ok "$1: clean" \
            || bad "$1: clean said: $(cat "$d/$1.clean")"
        "$DYN" clean $tpid >"$d/$1.clean2" 2>&1
        grep -q "loader's breakpoint" "$d/$1.clean2" \
            && bad "$1: a second clean: $(cat "$d/$1.clean2")" || ok "$1: a second clean"
    fi
    wait $tpid
    rc=$?
    tpid=
    expect_eq "$1: the program's exit status after dyn's kill" $rc 0
    expect_eq "$1: the program's answers" "$(cat "$d/$1.out")" "$want"
}

for t in 0 0.05 0.2 0.35 0.5 0.8; do
    round "r$t" $t
done
grep -q -h 'libqt.so loaded: 1 procedures instrumented' "$d"/r0.8.err \
    && ok "dyn saw the loads while it lived" || bad "no load seen: $(cat "$d/r0.8.err")"
round c 0.3 clean

# (d) a session that ends (--duration) takes everything out: no shared page left
"$d/main" "$lib" $N 10 >"$d/dur.out" 2>&1 &
tpid=$!
sleep 0.1
"$DYN" attach $tpid -c 'libqt.so:lib_sum' --duration 0.5 >/dev/null 2>"$d/dur.err"
expect_eq "duration: dyn's exit status" $? 0
grep -q 'libqt.so loaded: 1 procedures instrumented' "$d/dur.err" \
    && ok "duration: loads seen" || bad "duration: no load seen: $(cat "$d/dur.err")"
expect_eq "duration: shared pages left" "$(grep -c 'qpt-brk' /proc/$tpid/maps)" 0
wait $tpid
rc=$?
tpid=
expect_eq "duration: the program's exit status" $rc 0

[ $fails -eq 0 ] || exit 1
exit 0
