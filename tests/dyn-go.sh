#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Go's fault rule in dyn (patch/pt_go.c): a live Go program's procedure runs as a copy
# only when none of its instructions may fault, nor does a point displace one, since
# the runtime turns a fault into a panic by the faulting pc. libqpt (and so dyn) refuses
# Go processes today, so tests/dyn/gorule drives dynamic/'s session itself: on
# tests/inplace/truth.go, stopped at its entry, main.deref (100 recovered nil
# dereferences) is asked for relocated whole, as dyn counts a Go procedure, and refused
# for the rule; main.leaf and main.twice go in; the program then prints
# what it prints alone. Without the rule main.deref's copy faults and the program stops
# ("fatal error: unknown caller pc").
# Skipped without Go (Debian's golang-go) or where ptrace is not allowed.
set -u
: "${top_srcdir:=.}"
: "${top_builddir:=.}"
GO=/usr/lib/go-1.19/bin/go
[ -x "$GO" ] || { echo "dyn-go.sh: SKIP: no $GO (apt-get install golang-go)"; exit 77; }
dir=$top_builddir/tests/dyn-go.d
rm -rf "$dir"
mkdir -p "$dir" && dir=$(cd "$dir" && pwd) || exit 99
GOCACHE=$dir/gocache GOPATH=$dir/gopath GOFLAGS="-mod=mod -buildvcs=false" GOTOOLCHAIN=local HOME=$dir
export GOCACHE GOPATH GOFLAGS GOTOOLCHAIN HOME
cp "$top_srcdir/tests/inplace/truth.go" "$dir/truth.go" || exit 99
(cd "$dir" && "$GO" build -o truth truth.go) >"$dir/build.log" 2>&1 || {
    echo "dyn-go.sh: SKIP: cannot build a Go program: $(head -n 1 "$dir/build.log")"
    exit 77
}
fail=0
bad() {
    echo "FAIL $*"
    fail=1
}
"$dir/truth" >"$dir/plain.out" 2>&1 || bad "the original fails"
"$top_builddir/tests/dyn/gorule" "$dir/truth" main.deref main.leaf main.twice \
    >"$dir/live.out" 2>"$dir/live.err"
st=$?
if [ $st = 77 ]; then
    echo "dyn-go.sh: SKIP: $(head -n 1 "$dir/live.err")"
    exit 77
fi
[ $st = 0 ] || bad "exit status $st: $(grep -m 1 -e fatal -e gorule "$dir/live.err")"
cmp -s "$dir/plain.out" "$dir/live.out" || bad "the output differs: $(head -c 200 "$dir/live.out")"
grep -qx 'main.deref: a Go instruction that may fault (its panic needs its address)' \
    "$dir/live.err" || bad "main.deref not refused for the rule: $(grep main.deref "$dir/live.err")"
for f in main.leaf main.twice; do
    grep -qx "$f: in" "$dir/live.err" || bad "$f: $(grep "^$f:" "$dir/live.err")"
done
grep -q 'refused at install' "$dir/live.err" && bad "$(grep -m 1 'refused at install' "$dir/live.err")"
[ $fail = 0 ] && echo "ok: main.deref refused (a Go instruction that may fault), main.leaf and main.twice relocated whole: the same output ($(cat "$dir/plain.out"))"
exit $fail
