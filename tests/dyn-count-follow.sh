#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# dyn --count on the one live session engine (issue 30): a bare pattern follows the
# process without --follow-exec, as -e always did (the earlier --count engine followed
# only with --follow-exec or a MODULE: pattern, and otherwise lost an exec's new
# program and forked children's later counts):
#  (a) `dyn run -c work -- main exec 3 5` (3 calls, execve of itself, 5 calls): rows
#      main[1]:work 3 and work 5, the program's output and status unchanged;
#  (b) 2,000 thread starts (bench/dynthreads.c) followed: the count exact (the earlier
#      engine took 23 s to follow them, this one 0.4 s: bench/dyn-threads.sh).
# Skips (77) without gcc or when ptrace is not allowed. Exit: 0 pass, 1 fail, 99 error.
set -u
: "${top_srcdir:=${srcdir:-.}}"
: "${srcdir:=$top_srcdir}"
. "$top_srcdir/tests/lib.sh"
DYN=$top_builddir/tools/dyn
dyn_setup dyn-count-follow
# csv FILE NAME: the calls of row NAME of dyn's CSV.
csv() { awk -F, -v n="$2" '$1 == n { print $2 }' "$1"; }
qp_have gcc || { echo "SKIP: gcc not installed"; exit 77; }
gcc -O2 -o "$dir/main" "$top_srcdir/tests/dynfollow/main.c" -ldl -lpthread || exit 99
gcc -O2 -pthread -o "$dir/threads" "$top_srcdir/bench/dynthreads.c" || exit 99

"$DYN" run -c work -- "$dir/main" exec 1 1 >"$dir/probe.out" 2>"$dir/probe.err"
dyn_skip_untraced "$dir/probe.err"

# (a) an exec followed with a bare pattern, no --follow-exec.
"$dir/main" exec 3 5 >"$dir/plain.out"
prc=$?
"$DYN" run -c work -o "$dir/x.csv" -- "$dir/main" exec 3 5 >"$dir/x.out" 2>"$dir/x.err"
rc=$?
expect_eq "exec: exit status" "$rc" "$prc"
expect_eq "exec: the program's output" "$(head -n 1 "$dir/x.out")" "$(head -n 1 "$dir/plain.out")"
expect_eq "exec: work of the first image" "$(csv "$dir/x.csv" 'main[1]:work')" 3
expect_eq "exec: work of the new image" "$(csv "$dir/x.csv" work)" 5
[ "$(grep -c 'procedures instrumented' "$dir/x.err")" = 2 ] && ok "exec: instrumented again" ||
    bad "exec: $(cat "$dir/x.err")"

# (b) 2,000 thread starts, followed: exact.
"$DYN" run -c work -o "$dir/t.csv" -- "$dir/threads" 2000 >"$dir/t.out" 2>"$dir/t.err"
expect_eq "threads: exit status" $? 0
expect_eq "threads: work" "$(csv "$dir/t.csv" work)" 2000

[ $fails -eq 0 ] || exit 1
echo "PASS dyn-count-follow"
