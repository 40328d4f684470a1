#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# qpt-rewrite --iv-loops (experimental; doc/qp.md): a block counted from an induction
# variable (its register subtracted on the ways into its loop, added on the ways out)
# counts exactly what an increment would.
#  - tests/qp/ivloop.c: fill's loop runs 1,000,000 rounds in 1,000 visits; counted from
#    its register, its block count is 1,000,000, the summary says a block was so counted,
#    and every block and edge count equals that of the rewrite without --iv-loops; the
#    same with 4 threads (counters made atomic when the threads start: `ds` becomes
#    `lock`), 4,000,000;
#  - tests/qp-truth.sh (exact counts against ground truth and qp against naive, -O0 and
#    -O2, PIE, non-PIE, static and static-pie, libc included) passes with --iv-loops
#    given to every rewrite.
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
QP=${QP:-$top_builddir/tools/qp}
qp_have gcc || { echo "iv-loops.sh: SKIP: no gcc"; exit 77; }
dir=$top_builddir/tests/iv-loops.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
dir=$(cd "$dir" && pwd)
case $QPT_REWRITE in /*) ;; *) QPT_REWRITE=$(pwd)/$QPT_REWRITE ;; esac
case $QP in /*) ;; *) QP=$(pwd)/$QP ;; esac
fails=0

# counts VARIANT OPTS...: rewrite $exe with OPTS into $exe.VARIANT, run it (its output
# must be the original's), its blocks' and edges' counts into $exe.VARIANT.counts (without
# the column that says which were measured: that changes).
counts() {
    v=$1
    shift
    "$QPT_REWRITE" -v "$@" "$exe" -o "$exe.$v" >"$exe.$v.log" 2>&1 &&
        (cd "$dir" && QP_PROFILE=$exe.$v.qp "$exe.$v" >"$exe.$v.out") &&
        cmp -s "$exe.$v.out" "$exe.out" &&
        "$QP" report --blocks "$exe.$v.qp" >"$exe.$v.counts" 2>&1 &&
        "$QP" report --edges "$exe.$v.qp" >>"$exe.$v.counts" 2>&1 &&
        sed -i 's/  *\(measured\|reconstructed\)$//' "$exe.$v.counts"
}

for t in 1 4; do
    exe=$dir/ivloop$t
    gcc -O1 -DTHREADS=$t -o "$exe" "$top_srcdir/tests/qp/ivloop.c" -lpthread || exit 99
    "$exe" >"$exe.out" || exit 99
    if ! counts plain || ! counts iv --iv-loops; then
        bad "ivloop ($t threads): a rewrite or its run failed: $(tail -3 "$exe.iv.log")"
        continue
    fi
    nblk=$(sed -n 's/.*--iv-loops: \([0-9]*\) blocks counted from an induction variable.*/\1/p' "$exe.iv.log")
    fill=$("$QP" report --blocks=fill "$exe.iv.qp" 2>/dev/null | awk '$0 ~ /0x/ {print $2}' | sort -n | tail -1)
    if [ "${nblk:-0}" -ge 1 ] && cmp -s "$exe.plain.counts" "$exe.iv.counts" &&
        [ "$fill" = "$((t * 1000000))" ]; then
        ok "ivloop ($t threads): $nblk block(s) counted from an induction variable; fill's loop $fill; every count as without --iv-loops"
    else
        bad "ivloop ($t threads): ${nblk:-no} block(s) so counted, fill's largest block count ${fill:-?} (want $((t * 1000000))); $(diff "$exe.plain.counts" "$exe.iv.counts" | head -5)"
    fi
done

# qp-truth.sh with --iv-loops on every rewrite, in a tree of its own (its work folder is
# $top_builddir/tests/truth.d).
tb=$dir/tree
mkdir -p "$tb/tests" || exit 99
ln -s "$(cd "$top_builddir/tools" && pwd)" "$tb/tools"
# (the wrapper keeps each rewrite's --iv-loops line: how many blocks it so counted)
cat >"$dir/rewrite-iv" <<EOW
#!/bin/sh
err=\$(mktemp)
"$QPT_REWRITE" --iv-loops "\$@" 2>"\$err"
st=\$?
cat "\$err" >&2
grep -- '--iv-loops:' "\$err" >>"$dir/iv-lines"
rm -f "\$err"
exit \$st
EOW
chmod +x "$dir/rewrite-iv"
if top_builddir=$tb QPT_REWRITE=$dir/rewrite-iv QP=$QP sh "$top_srcdir/tests/qp-truth.sh" \
    >"$dir/truth.log" 2>&1; then
    nb=$(sed -n 's/.*--iv-loops: \([0-9]*\) blocks.*/\1/p' "$dir/iv-lines" | awk '{s += $1} END {print s + 0}')
    if [ "$nb" -gt 0 ]; then
        ok "qp-truth.sh with --iv-loops: $(grep -c '^ok' "$dir/truth.log") checks passed; $nb blocks counted from induction variables"
    else
        bad "qp-truth.sh with --iv-loops: no block was counted from an induction variable"
    fi
else
    bad "qp-truth.sh with --iv-loops: $(grep -E '^FAIL' "$dir/truth.log" | head -5)"
fi

[ "$fails" -eq 0 ] || exit 1
rm -rf "$dir"
exit 0
