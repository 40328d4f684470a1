#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Entries too short for a 5-byte jump get a 2-byte jmp rel8 to a 5-byte jump placed in
# the padding after them (tests/dynshort/main.c: short_fn is `xor %eax,%eax; ret`):
#  (a) `dyn run --count short_fn` counts its calls exactly; the program's output and
#      exit status are those of a plain run;
#  (b) dyn attach, then dyn killed (SIGKILL) while instrumented: `dyn clean PID` puts
#      every byte back (the program compares its code with what it was at start), and a
#      second clean finds nothing.
# Skips (77) when ptrace is not allowed. Exit status: 0 pass, 1 fail, 99 error.
set -u
: "${top_srcdir:=${srcdir:-.}}"
: "${srcdir:=$top_srcdir}"
. "$top_srcdir/tests/lib.sh"
DYN=$top_builddir/tools/dyn
dyn_setup dyn-short

${CC:-cc} -O2 -o "$dir/prog" "$srcdir/tests/dynshort/main.c" || exit 99
P=$dir/prog

"$DYN" run --count short_fn -- "$P" 1 >"$dir/probe.out" 2>"$dir/probe.err"
dyn_skip_untraced "$dir/probe.err"

# (a) exact count, output and status unchanged.
"$P" 4321 >"$dir/plain.out"
plain_rc=$?
"$DYN" run --count short_fn -- "$P" 4321 >"$dir/run.out" 2>"$dir/run.err"
run_rc=$?
[ $run_rc -eq $plain_rc ] || bad "(a) exit status $run_rc, plain run $plain_rc"
head -n 1 "$dir/run.out" | cmp -s - "$dir/plain.out" ||
    bad "(a) output differs: $(head -n 1 "$dir/run.out")"
grep -E -q '^ +4321 +short_fn$' "$dir/run.out" ||
    bad "(a) count: $(cat "$dir/run.out" "$dir/run.err")"
grep -q '1 procedures instrumented, 0 refused' "$dir/run.err" ||
    bad "(a) not instrumented: $(cat "$dir/run.err")"

# (b) dyn killed while attached; dyn clean restores every byte.
rm -f "$dir/stop"
"$P" wait "$dir/stop" >"$dir/wait.out" &
tpid=$!
sleep 0.2
"$DYN" attach $tpid --count short_fn >"$dir/att.out" 2>"$dir/att.err" &
dpid=$!
dyn_wait_for "$dir/att.err" instrumented
grep -q '1 procedures instrumented' "$dir/att.err" || bad "(b) attach: $(cat "$dir/att.err")"
sleep 0.2
kill -9 $dpid
wait $dpid 2>/dev/null
dpid=
"$DYN" clean $tpid >"$dir/clean.out" 2>"$dir/clean.err" ||
    bad "(b) dyn clean: $(cat "$dir/clean.err")"
"$DYN" clean $tpid >"$dir/clean2.out" 2>&1
grep -q -e "nothing of dyn's found" -e 'nothing to take out' "$dir/clean2.out" ||
    bad "(b) a second dyn clean still found: $(cat "$dir/clean2.out")"
touch "$dir/stop"
wait $tpid
trc=$?
tpid=
[ $trc -eq 0 ] || bad "(b) program exit status $trc"
[ "$(cat "$dir/wait.out")" = same ] || bad "(b) code after clean: $(cat "$dir/wait.out")"

[ $fails -eq 0 ] || exit 1
echo "PASS dyn-short"
