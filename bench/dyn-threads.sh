#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Following thread starts (issue 30; a benchmark, not a test): a program that starts
# 2,000 threads one after another, each calling work() once, run plain and under
# `dyn run --count work` (and with --follow-exec, which made the earlier engine follow
# too), wall seconds, median of 3; the count must be 2000.
# Usage: bench/dyn-threads.sh BUILDDIR   (DYN=PATH: another dyn, e.g. main's)
set -u
b=${1:-.}
DYN=${DYN:-$b/tools/dyn}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
cc -O2 -pthread -o "$tmp/threads" "$here/dynthreads.c" || exit 99
med() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
secs() {
    i=0
    while [ $i -lt 3 ]; do
        i=$((i + 1))
        /usr/bin/time -f '%e' -o "$tmp/t" "$@" >"$tmp/out" 2>"$tmp/err"
        grep -q '^ *2000  work$' "$tmp/out" || [ "$1" = "$tmp/threads" ] ||
            echo "count wrong: $(grep work "$tmp/out")" >&2
        cat "$tmp/t"
    done | med
}
printf 'plain %s s; dyn run --count work %s s; with --follow-exec %s s\n' \
    "$(secs "$tmp/threads" 2000)" "$(secs "$DYN" run --count work -- "$tmp/threads" 2000)" \
    "$(secs "$DYN" run --count work --follow-exec -- "$tmp/threads" 2000)"
