#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# One rewrite engine (include/qpt/qpt_rewrite.h): a mutator on the public headers
# (tests/qpt/rewrite_prog) gives byte for byte what qpt-rewrite gives, and prints the
# same lines, for /usr/bin/ls and a test program with every driver; qpt_write of a space
# with nothing inserted gives what --driver=none gives (the same plan options: old text
# reused; a Go program too, every procedure in place). With QPT_REF_REWRITE naming another qpt-rewrite (main's, before a change),
# its outputs must be the same too (bench/identical.sh does this for large programs).
set -u
. "${top_srcdir:-.}/tests/lib.sh"
RW=$top_builddir/tests/qpt/rewrite_prog
dir=$top_builddir/tests/rewrite-engine.d
rm -rf "$dir"
mkdir -p "$dir/tool" "$dir/lib" "$dir/ref" && dir=$(cd "$dir" && pwd) || exit 99
tool=$(cd "$(dirname "$QPT_REWRITE")" && pwd)/$(basename "$QPT_REWRITE")
rw=$(cd "$(dirname "$RW")" && pwd)/$(basename "$RW")
fail=0
bad() {
    echo "FAIL $*"
    fail=1
}
progs="$top_builddir/tests/qpt/metric_prog"
[ -x /usr/bin/ls ] && progs="/usr/bin/ls $progs"
for p in $progs; do
    p=$(cd "$(dirname "$p")" && pwd)/$(basename "$p")
    name=$(basename "$p")
    for d in none qp naive trace; do
        (cd "$dir/tool" && "$tool" --threads=2 --driver=$d "$p" -o out 2>err >/dev/null) ||
            { bad "$name $d: qpt-rewrite failed: $(tail -n 1 "$dir/tool/err")"; continue; }
        (cd "$dir/lib" && "$rw" engine $d "$p" out 2>err >sum) ||
            { bad "$name $d: qpt_rewrite_run failed: $(tail -n 1 "$dir/lib/err")"; continue; }
        cmp -s "$dir/tool/out" "$dir/lib/out" || bad "$name $d: qpt_rewrite_run's output differs"
        cmp -s "$dir/tool/err" "$dir/lib/err" || bad "$name $d: the engine's lines differ"
        grep -q "^relocated [1-9]" "$dir/lib/sum" || bad "$name $d: summary: $(cat "$dir/lib/sum")"
        if [ -n "${QPT_REF_REWRITE:-}" ]; then
            (cd "$dir/ref" && "$QPT_REF_REWRITE" --threads=2 --driver=$d "$p" -o out 2>err >/dev/null)
            cmp -s "$dir/tool/out" "$dir/ref/out" || bad "$name $d: differs from $QPT_REF_REWRITE"
            cmp -s "$dir/tool/err" "$dir/ref/err" || bad "$name $d: lines differ from $QPT_REF_REWRITE"
        fi
        if [ $d = none ]; then
            (cd "$dir/lib" && "$rw" write "$p" written 2>err) ||
                bad "$name: qpt_write failed: $(tail -n 1 "$dir/lib/err")"
            cmp -s "$dir/tool/out" "$dir/lib/written" ||
                bad "$name: qpt_write (nothing inserted) differs from --driver=none"
        fi
        [ $fail -eq 0 ] && echo "ok $name $d"
    done
done
# A Go program (every procedure in place): qpt_write writes it as --driver=none does
# (it was refused before the engine was shared), and it runs.
g=/usr/lib/go-1.19/bin/gofmt
if [ -x $g ]; then
    (cd "$dir/tool" && "$tool" --driver=none $g -o gofmt 2>/dev/null) || bad "gofmt: qpt-rewrite"
    (cd "$dir/lib" && "$rw" write $g gofmt 2>err) || bad "gofmt: qpt_write: $(cat "$dir/lib/err")"
    cmp -s "$dir/tool/gofmt" "$dir/lib/gofmt" || bad "gofmt: qpt_write differs from --driver=none"
    printf 'package main\nfunc  main( ) { }\n' >"$dir/x.go"
    "$dir/lib/gofmt" "$dir/x.go" >"$dir/x.new" 2>&1
    $g "$dir/x.go" >"$dir/x.orig" 2>&1
    cmp -s "$dir/x.orig" "$dir/x.new" || bad "gofmt written by qpt_write formats differently"
    [ $fail -eq 0 ] && echo "ok gofmt: qpt_write = --driver=none, runs"
else
    echo "rewrite-engine.sh: no $g (golang-go): the Go check skipped"
fi
# The rewritten test program runs as the original does.
p=$(cd "$top_builddir/tests/qpt" && pwd)/metric_prog
(cd "$dir/lib" && "$rw" engine qp "$p" mp >/dev/null 2>&1) || bad "metric_prog: rewrite"
"$p" 5 >"$dir/orig.out" 2>&1
QP_PROFILE=$dir/mp.qp "$dir/lib/mp" 5 >"$dir/new.out" 2>&1
cmp -s "$dir/orig.out" "$dir/new.out" || bad "metric_prog rewritten by the engine runs differently"
[ $fail -eq 0 ] && rm -rf "$dir"
exit $fail
