#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Cost per hit of procedures relocated whole by dyn (issue 29; a benchmark, not a test):
# bench/relochit's two procedures, the same loop turn, one patched in place (inplace_e),
# one relocated (reloc_e, entered through a slot), 50M calls each, plain, under
# --count and under --time (median of 3). Usage: bench/dyn-reloc-bench.sh BUILDDIR
set -u
b=${1:-.}
src=$(dirname "$0")
DYN=$b/tools/dyn
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
${CC:-cc} -O2 -o "$tmp/relochit" "$src/relochit.c" || exit 1
n=50000000
med() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
run3() {
    i=0
    while [ $i -lt 3 ]; do
        i=$((i + 1))
        "$@" 2>/dev/null | sed -n 's/ ns\/call$//p' | head -n 1
    done | med
}
for p in inplace reloc; do
    plain=$(run3 "$tmp/relochit" $p $n)
    cnt=$(run3 "$DYN" run --count ${p}_e -- "$tmp/relochit" $p $n)
    tim=$(run3 "$DYN" run --time ${p}_e -- "$tmp/relochit" $p $n)
    echo "${p}_e: plain $plain ns/call; --count ${cnt:-refused} ns; --time ${tim:-refused} ns"
done
