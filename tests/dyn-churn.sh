#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# The live session engine (qm_live, which -e, --count and --all run on) attached again
# and again to a target whose threads come and go without pause (tests/dyn/target
# serve 2: each input line starts 2 threads): it follows the process, so a thread may be
# stopped inside clone3 when the metrics go in. No remote system call may run on such a
# thread (its clone would return -ENOSYS and glibc's fallback to clone(2) start a thread
# at address 0: the target crashed about every other cycle). 12 cycles of -e and 12 of
# --count; the target answers every command and exits 0.
# Skips (77) when ptrace is not allowed. Exit status: 0 pass, 1 fail, 99 error.
set -u
: "${top_srcdir:=${srcdir:-.}}"
: "${srcdir:=$top_srcdir}"
. "$top_srcdir/tests/lib.sh"
DYN=$top_builddir/tools/dyn
T=$top_builddir/tests/dyn/target
dyn_setup dyn-churn

"$DYN" run --count work -- "$T" count 10 >"$dir/probe.out" 2>"$dir/probe.err"
dyn_skip_untraced "$dir/probe.err"

mkfifo "$dir/in" || exit 99
"$T" serve 2 <"$dir/in" >"$dir/serve.out" 2>&1 &
tpid=$!
exec 7>"$dir/in"
i=0
while ! grep -q '^ready' "$dir/serve.out" 2>/dev/null; do
    i=$((i + 1)); [ $i -gt 400 ] && { bad "serve: never ready"; exit 1; }; sleep 0.05
done
ncmd=0
for what in "-e" "--count"; do
    n=0
    while [ $n -lt 12 ]; do
        n=$((n + 1))
        yes 100 | head -n 200 >&7
        ncmd=$((ncmd + 200))
        if [ "$what" = -e ]; then
            "$DYN" attach $tpid -e 'count calls(work)' --duration 0.005 >/dev/null 2>"$dir/c.err"
        else
            "$DYN" attach $tpid --count work --duration 0.005 >/dev/null 2>"$dir/c.err"
        fi
        st=$?
        kill -0 $tpid 2>/dev/null || { bad "$what cycle $n: the target died"; break 2; }
        [ $st -eq 0 ] || bad "$what cycle $n: exit $st: $(cat "$dir/c.err")"
    done
done
exec 7>&-
wait $tpid
st=$?
tpid=
[ $st -eq 0 ] || bad "the target exited with status $st (139: SIGSEGV)"
[ "$(grep -c '^done' "$dir/serve.out")" -eq $ncmd ] ||
    bad "the target answered $(grep -c '^done' "$dir/serve.out") of $ncmd commands"

[ $fails -eq 0 ] || exit 1
echo "PASS dyn-churn"
