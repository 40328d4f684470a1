#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# qp report --pprof, read by pprof itself (`go tool pprof`, Debian's golang-go): the
# total equals qp's, every function's flat instructions equal qp's CSV, the build-id of
# the mapping is the program's, and the executions of leaf equal its calls (its one
# block). Also: binary output is refused on a terminal (exit 2), accepted with -o.
# Skips when go is not installed.
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
QP=${QP:-$top_builddir/tools/qp}
qp_have go || { echo "SKIP: go not installed (apt-get install golang-go)"; exit 77; }
qp_have gcc || { echo "SKIP: no gcc"; exit 77; }
dir=$top_builddir/tests/pprof.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
dir=$(cd "$dir" && pwd)
fails=0
export HOME="$dir" # pprof keeps a cache under $HOME
gcc -O1 -g -o "$dir/k" "$top_srcdir/tests/qp/calls.c" || exit 99
"$QPT_REWRITE" "$dir/k" -o "$dir/k.inst" >/dev/null 2>&1 || { bad "rewrite failed"; exit 1; }
"$dir/k.inst" >/dev/null
p=$dir/k.inst.qp
"$QP" report --pprof -o "$dir/k.pb.gz" "$p" || bad "--pprof failed"
gzip -t "$dir/k.pb.gz" && ok "gzip stream" || bad "not gzip"
go tool pprof -top -nodecount=1000 -nodefraction=0 "$dir/k.pb.gz" >"$dir/top" 2>"$dir/top.err" ||
    bad "pprof -top failed: $(head -n 3 "$dir/top.err")"
total=$("$QP" report "$p" | sed -n 's/^total: \([0-9]*\) instructions.*/\1/p')
grep -q "^Type: instructions$" "$dir/top" && ok "default type: instructions" || bad "type: $(grep Type "$dir/top")"
grep -q " of $total total$" "$dir/top" && ok "pprof total $total" || bad "pprof total: $(grep total "$dir/top")"
"$QP" report --csv "$p" | tail -n +2 | awk -F, '$3 > 0 { print $1, $3 }' | sort >"$dir/qp.flat"
awk '$NF !~ /%$/ && $1 ~ /^[0-9]+$/ && $2 ~ /%$/ { print $NF, $1 }' "$dir/top" | sort >"$dir/pprof.flat"
if [ -s "$dir/qp.flat" ] && cmp -s "$dir/qp.flat" "$dir/pprof.flat"; then
    ok "every function's instructions equal qp's ($(wc -l <"$dir/qp.flat") functions)"
else
    bad "flat counts differ: $(diff "$dir/qp.flat" "$dir/pprof.flat" | head -n 6)"
fi
bid=$(readelf -n "$dir/k.inst" | awk '/Build ID/ { print $3 }')
grep -q "^Build ID: $bid$" "$dir/top" && ok "mapping build-id" || bad "build-id: $(grep 'Build ID' "$dir/top")"
go tool pprof -top -sample_index=executions -nodecount=1000 -nodefraction=0 "$dir/k.pb.gz" 2>/dev/null |
    grep -Eq '^ +53 .* leaf$' && ok "executions of leaf: 53" || bad "executions of leaf"
# Binary data on a terminal is refused (script gives stdout a terminal when available).
if qp_have script; then
    script -qec "$QP report --pprof $p" /dev/null >"$dir/tty" 2>&1
    grep -q 'give -o FILE' "$dir/tty" && ok "refused on a terminal" || bad "on a terminal: $(head -c 200 "$dir/tty")"
fi
[ $fails -eq 0 ] || exit 1
echo "pprof: all checks passed"
exit 0
