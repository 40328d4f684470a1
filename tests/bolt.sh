#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# qp report --bolt, read by its consumer: tests/qp/calls.c built for BOLT (gcc -O2,
# --emit-relocs, no hot/cold partition, which BOLT 16 mislays here) is rewritten and run;
# llvm-bolt lays the original out with qp's .fdata (every profiled function accepted,
# none stale) and the result prints the same. The edge and call lines are those of
# BOLT's own instrumentation (llvm-bolt -instrument) on the same program: every line
# BOLT writes for a branch or a call from a function is in qp's file, with the same count.
# Skips when llvm-bolt (Debian's bolt-16) is not installed.
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
QP=${QP:-$top_builddir/tools/qp}
BOLT=${BOLT:-/usr/lib/llvm-16/bin/llvm-bolt}
[ -x "$BOLT" ] || { echo "SKIP: $BOLT not installed (apt-get install bolt-16)"; exit 77; }
qp_have gcc || { echo "SKIP: no gcc"; exit 77; }
dir=$top_builddir/tests/bolt.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
dir=$(cd "$dir" && pwd)
fails=0
gcc -O2 -g -fno-reorder-blocks-and-partition -Wl,--emit-relocs -o "$dir/k" \
    "$top_srcdir/tests/qp/calls.c" || exit 99
"$QPT_REWRITE" "$dir/k" -o "$dir/k.inst" >"$dir/rewrite.log" 2>&1 || { cat "$dir/rewrite.log"; exit 1; }
want=$("$dir/k")
"$dir/k.inst" >/dev/null
"$QP" report --bolt --original="$dir/k" -o "$dir/qp.fdata" "$dir/k.inst.qp" 2>"$dir/qp.err" ||
    bad "qp report --bolt: $(cat "$dir/qp.err")"
[ -s "$dir/qp.err" ] && bad "qp report --bolt complained: $(cat "$dir/qp.err")"

# BOLT reads it and lays the program out.
"$BOLT" "$dir/k" -o "$dir/k.bolt" -data="$dir/qp.fdata" -reorder-blocks=ext-tsp \
    -reorder-functions=hfsort -split-functions >"$dir/bolt.log" 2>&1 || bad "llvm-bolt failed: $(tail -n 3 "$dir/bolt.log")"
grep -q 'invalid (possibly stale) profile' "$dir/bolt.log" && bad "BOLT: stale profile: $(grep stale "$dir/bolt.log")"
nprof=$(sed -n 's/^BOLT-INFO: \([0-9]*\) out of [0-9]* functions in the binary.*non-empty execution profile/\1/p' "$dir/bolt.log")
[ "${nprof:-0}" -ge 10 ] && ok "BOLT: $nprof functions with a profile" || bad "BOLT: ${nprof:-no} functions profiled: $(grep -i profile "$dir/bolt.log")"
[ "$("$dir/k.bolt")" = "$want" ] && ok "BOLT's layout runs and prints the same" || bad "the BOLTed program prints something else"

# Against BOLT's own instrumentation of the same program.
if "$BOLT" "$dir/k" -instrument -o "$dir/k.binstr" --instrumentation-file="$dir/bolt.fdata" \
    >"$dir/instr.log" 2>&1 && "$dir/k.binstr" >/dev/null 2>&1 && [ -s "$dir/bolt.fdata" ]; then
    key() { awk '$1 == 1 && $4 == 1 { print $2 ":" $3 ":" $5 ":" $6, $8 }' "$1" | sort; }
    key "$dir/qp.fdata" >"$dir/qp.keys"
    key "$dir/bolt.fdata" >"$dir/bolt.keys"
    missing=$(join -v 2 "$dir/qp.keys" "$dir/bolt.keys")
    differ=$(join "$dir/qp.keys" "$dir/bolt.keys" | awk '$2 != $3')
    n=$(join "$dir/qp.keys" "$dir/bolt.keys" | wc -l)
    [ -z "$missing" ] && ok "every branch and call line of BOLT's instrumentation is in qp's" ||
        bad "lines of BOLT's instrumentation missing from qp's: $missing"
    [ -z "$differ" ] && [ "$n" -gt 30 ] && ok "$n lines, every count equal to BOLT's instrumentation" ||
        bad "counts differ from BOLT's instrumentation ($n lines): $differ"
else
    echo "SKIP comparison: BOLT's instrumentation did not run here: $(grep -i error "$dir/instr.log" | head -n 1)"
fi
[ $fails -eq 0 ] || exit 1
echo "bolt: all checks passed"
exit 0
