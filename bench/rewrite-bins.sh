#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# The real-program corpus of the exec editor (`make corpus`, not part of `make check`):
# every ELF executable of a directory (default /usr/bin) is rewritten with
# --driver=none, and `PROG --version` (or `--help` when --version fails) must print the
# same stdout and stderr and exit with the same status as the original. A refusal must be
# one clear line. Totals: identical / refused / different.
# Usage: bench/rewrite-bins.sh [path/to/qpt-rewrite] [DIR]
set -u
QPT=${1:-tools/qpt-rewrite}
DIR=${2:-/usr/bin}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
n=0 same=0 refused=0 diff=0
for f in "$DIR"/*; do
    [ -f "$f" ] && [ -x "$f" ] || continue
    head -c 4 "$f" 2>/dev/null | grep -q ELF || continue
    n=$((n + 1))
    inst=$out/prog
    if ! "$QPT" --driver=none "$f" -o "$inst" >/dev/null 2>"$out/log"; then
        refused=$((refused + 1))
        echo "refused: $f: $(head -n 1 "$out/log")"
        continue
    fi
    arg=--version
    timeout 10 "$f" $arg </dev/null >"$out/o1" 2>"$out/e1"; s1=$?
    if [ $s1 -ne 0 ]; then
        arg=--help
        timeout 10 "$f" $arg </dev/null >"$out/o1" 2>"$out/e1"; s1=$?
    fi
    # argv[0] may appear in the output: run the copy under the original's name.
    mkdir -p "$out/bin" && cp "$inst" "$out/bin/${f##*/}"
    timeout 10 "$out/bin/${f##*/}" $arg </dev/null >"$out/o2" 2>"$out/e2"; s2=$?
    sed -i "s|$out/bin/|${f%/*}/|g" "$out/o2" "$out/e2"
    if [ $s1 -eq $s2 ] && cmp -s "$out/o1" "$out/o2" && cmp -s "$out/e1" "$out/e2"; then
        same=$((same + 1))
    else
        diff=$((diff + 1))
        echo "DIFFERENT: $f $arg: status $s1 -> $s2"
    fi
    rm -f "$out/bin/${f##*/}" "$inst"
done
echo "rewrite-bins: $n ELF files in $DIR: $same identical, $refused refused, $diff different"
[ $diff -eq 0 ]
