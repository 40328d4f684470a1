#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# The names cfg/ gives x86-64 PLT stubs against BFD's synthetic symbols, over every ELF
# program in /usr/bin and every library in /usr/lib/x86_64-linux-gnu (issue 31; minutes:
# not in make check). usage: tests/plt-oracle.sh [DIR...]; prints the files that differ
# and a count of each outcome; exit status 1 when any differs.
set -u
ORACLE=${ORACLE:-$(dirname "$0")/plt_oracle}
[ -x "$ORACLE" ] || { echo "plt-oracle.sh: build $ORACLE first (make tests/plt_oracle)" >&2; exit 2; }
[ $# -gt 0 ] || set -- /usr/bin /usr/lib/x86_64-linux-gnu
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for d in "$@"; do
    case $d in
    */bin) find "$d" -maxdepth 1 -type f ;;
    *) find "$d" -type f -name '*.so*' ;;
    esac
done | while read -r f; do
    [ "$(head -c 4 "$f" 2>/dev/null | od -An -c | tr -d ' ')" = 177ELF ] && echo "$f"
done | xargs -d '\n' -n 50 "$ORACLE" >"$out"
grep ': DIFFERS' "$out"
echo "same: $(grep -c ': same' "$out"), differ: $(grep -c ': DIFFERS' "$out"), left to BFD: $(grep -c ': bfd (' "$out"), not opened: $(grep -c ': skip' "$out")"
echo "PLT symbols compared: $(sed -n 's/.*: same (\([0-9]*\) PLT symbols)/\1/p' "$out" | awk '{s += $1} END {print s + 0}')"
grep ': bfd (' "$out" | head -20
! grep -q ': DIFFERS' "$out"
