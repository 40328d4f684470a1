#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Outputs of two qpt-rewrite binaries, byte for byte: REF (e.g. main's, before a change)
# and NEW rewrite each PROGRAM with each driver; the outputs must be identical, and so
# must what each prints on stderr and its exit status. Also each NEW rewrite's time.
#   bench/identical.sh REF NEW [PROGRAM...]
# Default programs: /usr/bin/ls, /usr/bin/python3.11, gcc's cc1, and Go's gofmt when
# golang-go is installed. QPT_DRIVERS overrides "none qp naive trace". Exit 1 on any
# difference. By hand or in make corpus (cc1 takes minutes): not in make check, which
# runs tests/rewrite-engine.sh, the small version.
set -u
ref=${1:?usage: identical.sh REF NEW [PROGRAM...]}
new=${2:?usage: identical.sh REF NEW [PROGRAM...]}
shift 2
ref=$(realpath "$ref") new=$(realpath "$new") || exit 2
progs=("$@")
if [ ${#progs[@]} -eq 0 ]; then
    progs=(/usr/bin/ls /usr/bin/python3.11 "$(gcc -print-prog-name=cc1)")
    [ -x /usr/lib/go-1.19/bin/gofmt ] && progs+=(/usr/lib/go-1.19/bin/gofmt)
fi
drivers=${QPT_DRIVERS:-none qp naive trace}
dir=$(mktemp -d "${TMPDIR:-/tmp}/identical.XXXXXX") || exit 2
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/ref" "$dir/new"
fail=0
printf '%-28s %-7s %-9s %s\n' program driver identical "new's time (s)"
for p in "${progs[@]}"; do
    [ -x "$p" ] || { echo "identical.sh: $p: not found, skipped"; continue; }
    for d in $drivers; do
        # The same relative output name in two folders: the messages name it alike.
        (cd "$dir/ref" && "$ref" --driver="$d" "$p" -o out >out.log 2>err.log; echo $? >rc)
        start=$(date +%s.%N)
        (cd "$dir/new" && "$new" --driver="$d" "$p" -o out >out.log 2>err.log; echo $? >rc)
        secs=$(echo "$(date +%s.%N) - $start" | bc)
        same=yes
        for f in rc out.log err.log; do
            cmp -s "$dir/ref/$f" "$dir/new/$f" || same="no ($f)"
        done
        if [ -e "$dir/ref/out" ] || [ -e "$dir/new/out" ]; then
            cmp -s "$dir/ref/out" "$dir/new/out" || same="no (output)"
        fi
        [ "$same" = yes ] || fail=1
        printf '%-28s %-7s %-9s %.1f\n' "$(basename "$p")" "$d" "$same" "$secs"
        rm -f "$dir"/ref/out* "$dir"/new/out*
    done
done
exit $fail
