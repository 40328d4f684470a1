#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Jump tables found by scanning stop where the next table starts (issue 29, cfg/cfg_scanend.c).
# tests/scantab/enums.c switches twice in one function on enums loaded from memory, with
# no bounding compare; its two tables follow each other in .rodata, and the first one's
# scan ran into the second's entries (offsets from another base in a PIE), whose targets
# fell inside instructions: the procedure was left in place, unmeasured. Built with clang
# and gcc -O2, PIE and not, rewritten with --driver=none and qp: `step` moves, the output
# is the original's, and its counts are exact (calls, and a case of each switch).
# tests/scantab/hoisted.c: a table followed by a word that a `lea` of the procedure forms
# far from its use (no table of its own), whose value leads into an instruction: `pick`
# moves, same output, exact counts.
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
QP=${QP:-$top_builddir/tools/qp}
dir=$top_builddir/tests/scantab.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
fails=0
src=$top_srcdir/tests/scantab/enums.c
n=5600 # a multiple of 56: each op case runs 700 times, each kind case 800
built=0

# count ANNOTATION PATTERN: the count of the instruction matching PATTERN.
count() {
    awk -v p="$2" '$0 ~ p { print $1; exit }' "$1"
}

# rewrite_moves LABEL EXE PROC ARG WANT: EXE rewritten with none and qp moves PROC, and
# each copy run with ARG prints WANT and exits 0.
rewrite_moves() {
    for drv in none qp; do
        out=$2.$drv
        if ! "$QPT_REWRITE" -v --driver=$drv "$2" -o "$out" >"$out.log" 2>&1; then
            bad "$1 $drv: rewrite: $(tail -n 1 "$out.log")"
            continue
        fi
        if grep -q "left in place: $3 " "$out.log"; then
            bad "$1 $drv: $(grep "left in place: $3 " "$out.log")"
        else
            ok "$1 $drv: $3 relocated"
        fi
        got=$("$out" "$4") && [ "$got" = "$5" ] && ok "$1 $drv: same output" ||
            bad "$1 $drv: output or exit status differs"
    done
}

for v in "clang -O2 -fPIE -pie" "gcc -O2 -fPIE -pie" "clang -O2 -fno-pie -no-pie"; do
    cc=${v%% *}
    qp_have "$cc" || continue
    tag=$(echo "$v" | tr -d ' -')
    exe=$dir/$tag
    # shellcheck disable=SC2086
    $v -o "$exe" "$src" || exit 99
    built=1
    want=$("$exe" $n)
    rewrite_moves "$v" "$exe" step "$n" "$want"
    "$QP" report --csv "$exe.qp.qp" >"$exe.csv" 2>&1
    got=$(awk -F, '$1 == "step" { print $2 "," $4 }' "$exe.csv")
    [ "$got" = "$n," ] && ok "$v: step called $n times, exact" || bad "$v: step: '$got', expected '$n,'"
    "$QP" report --annotate step "$exe.qp.qp" >"$exe.ann" 2>&1
    got=$(count "$exe.ann" 'or +\$0x40,')
    [ "$got" = 700 ] && ok "$v: case G ran 700 times" || bad "$v: case G ran '${got}' times, expected 700"
    got=$(count "$exe.ann" 'xor +\$0x12345,')
    [ "$got" = 800 ] && ok "$v: case K3 ran 800 times" || bad "$v: case K3 ran '${got}' times, expected 800"
done
src=$top_srcdir/tests/scantab/hoisted.c
for cc in gcc clang; do
    qp_have "$cc" || continue
    exe=$dir/hoisted.$cc
    $cc -O2 -fPIE -pie -o "$exe" "$src" || exit 99
    want=$("$exe" 400)
    rewrite_moves "hoisted $cc" "$exe" pick 400 "$want"
    "$QP" report --annotate pick "$exe.qp.qp" >"$exe.ann" 2>&1
    got=$(count "$exe.ann" 'mov +\$0x14,')
    [ "$got" = 100 ] && ok "hoisted $cc: case 1 ran 100 times" || bad "hoisted $cc: case 1 ran '${got}' times, expected 100"
    got=$(count "$exe.ann" 'mov +\$0x1e,')
    [ "$got" = 200 ] && ok "hoisted $cc: case 2 ran 200 times" || bad "hoisted $cc: case 2 ran '${got}' times, expected 200"
done
[ $built = 1 ] || { echo "SKIP: neither clang nor gcc"; exit 77; }
[ $fails = 0 ] || exit 1
echo "scantab.sh: PASS"
