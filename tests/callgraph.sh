#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# The call graph (issue 15) against counts known from the code of tests/qp/calls.c, built
# with gcc -O0, gcc -O2 (tail calls become jumps) and clang -O2, PIE: callers per caller
# with the calls through a pointer in their own line, tail calls marked, mutual recursion
# as a cycle, a library function by its PLT stub's name, callees with inclusive counts
# (a leaf's is its own; a caller's is its own plus its share), and the callgrind export
# read by callgrind_annotate (same total and same inclusive count for main), its C++ names
# demangled.
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
QP=${QP:-$top_builddir/tools/qp}
dir=$top_builddir/tests/callgraph.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
fails=0
qp_have gcc || { echo "SKIP: gcc not installed"; exit 77; }
src=$top_srcdir/tests/qp/calls.c

# row FILE COUNT CALLER: the callers table of FILE has the row
row() {
    if grep -Eq "^ +$2 +[0-9.]+ +[0-9]* +$3\$" "$1"; then ok "$v: $2 from $3"; else bad "$v: no row '$2 $3' in: $(cat "$1")"; fi
}

for v in "gcc -O0" "gcc -O2" "clang -O2"; do
    cc=${v% *}
    qp_have "$cc" || continue
    tag=$(echo "$v" | tr -d ' -')
    exe=$dir/$tag
    $v -g -fPIE -pie -o "$exe" "$src" || exit 99
    "$QPT_REWRITE" --call-targets "$exe" -o "$exe.inst" >"$exe.log" 2>&1 || { bad "$v: rewrite: $(tail -n 1 "$exe.log")"; continue; }
    [ "$("$exe.inst")" = "$("$exe")" ] || bad "$v: output differs"
    p=$exe.inst.qp
    "$QP" report --callers=leaf "$p" >"$exe.leaf" 2>&1
    grep -q '^Callers of leaf: 53 calls$' "$exe.leaf" && ok "$v: leaf called 53 times" ||
        bad "$v: leaf: $(head -n 1 "$exe.leaf")"
    row "$exe.leaf" 44 mid
    row "$exe.leaf" 5 viaptr
    row "$exe.leaf" 1 other
    row "$exe.leaf" 3 "tailer( \(tail calls\))?"
    "$QP" report --callers=viaptr "$p" >"$exe.ptr" 2>&1
    grep -Eq '^ +5 +100.00 +[0-9]+  main \(through a pointer\)$' "$exe.ptr" &&
        ok "$v: calls through a pointer, their target recorded" || bad "$v: viaptr: $(cat "$exe.ptr")"
    # Without --call-targets (the default) those calls are one row.
    "$QPT_REWRITE" "$exe" -o "$exe.plain" >/dev/null 2>&1 && "$exe.plain" >/dev/null &&
        "$QP" report --callers=viaptr "$exe.plain.qp" 2>&1 |
        grep -Eq '^ +5 +100.00 +\(through pointers, or from code not measured\)$' &&
        ok "$v: without --call-targets, one row" || bad "$v: the default rewrite's callers of viaptr"
    "$QP" report --callers=is_odd "$p" >"$exe.odd" 2>&1
    row "$exe.odd" 4 "is_even( \(tail calls\))?"
    "$QP" report --callers=puts "$p" >"$exe.puts" 2>&1
    grep -q '^Callers of puts@plt' "$exe.puts" && row "$exe.puts" 2 main
    "$QP" report --call-graph "$p" >"$exe.graph" 2>&1
    grep -q ' is_even <cycle [0-9]*>$' "$exe.graph" && grep -q ' is_odd <cycle [0-9]*>$' "$exe.graph" &&
        ok "$v: mutual recursion is a cycle" || bad "$v: no cycle: $(grep is_ "$exe.graph")"
    if [ "$v" = "gcc -O0" ]; then
        "$QP" report --callers=fib "$p" >"$exe.fib" 2>&1
        grep -q '^Callers of fib: 177 calls$' "$exe.fib" && row "$exe.fib" 176 fib && row "$exe.fib" 1 main
    fi
    # Inclusive: leaf's is its own count; mid's its own plus 44/53 of leaf's.
    "$QP" report --csv "$p" >"$exe.csv"
    self() { awk -F, -v n="$1" '$1 == n { print $3 }' "$exe.csv"; }
    "$QP" report --callees=mid "$p" >"$exe.mid" 2>&1
    want=$(awk -v m="$(self mid)" -v l="$(self leaf)" 'BEGIN { printf "%.0f", m + l * 44 / 53 }')
    grep -Eq "^Callees of mid: 11 calls, $(self mid) instructions in it, $want ~ inclusive\$" "$exe.mid" &&
        ok "$v: mid inclusive $want" || bad "$v: mid: want $want: $(head -n 1 "$exe.mid")"
    "$QP" report --callees=leaf "$p" | grep -q "^Callees of leaf: 53 calls, $(self leaf) instructions in it, $(self leaf) inclusive\$" &&
        ok "$v: leaf inclusive exact" || bad "$v: leaf inclusive"
    # callgrind format, read by its own tool.
    if qp_have callgrind_annotate; then
        "$QP" report --callgrind -o "$exe.cg" "$p" || bad "$v: --callgrind failed"
        total=$("$QP" report "$p" | sed -n 's/^total: \([0-9]*\) instructions.*/\1/p')
        callgrind_annotate "$exe.cg" >"$exe.cga" 2>"$exe.cgerr"
        [ -s "$exe.cgerr" ] && bad "$v: callgrind_annotate complains: $(head -n 2 "$exe.cgerr")"
        t=$(sed -n 's/^\([0-9,]*\) .*PROGRAM TOTALS/\1/p' "$exe.cga" | tr -d ,)
        [ "$t" = "$total" ] && ok "$v: callgrind total $t" || bad "$v: callgrind total '$t', qp $total"
        inc=$(callgrind_annotate --inclusive=yes "$exe.cg" 2>/dev/null |
            sed -n 's/^ *\([0-9,]*\) (.*:main .*/\1/p' | tr -d ,)
        ours=$(awk '$NF == "main" && $1 ~ /^[0-9.]+$/ { print $2; exit }' "$exe.graph")
        [ -n "$inc" ] && [ "$inc" = "$ours" ] && ok "$v: callgrind inclusive of main $inc" ||
            bad "$v: callgrind_annotate says main's inclusive is '$inc', qp '$ours'"
    fi
done
# C++: callgrind's fn= and cfn= names are demangled, as callgrind writes them (--mangled
# keeps them as stored).
if qp_have g++; then
    g++ -O1 -o "$dir/virt" "$top_srcdir/tests/progs/virtual.cc" || exit 99
    "$QPT_REWRITE" "$dir/virt" -o "$dir/virt.inst" >/dev/null 2>&1 || bad "virtual.cc: rewrite failed"
    "$dir/virt.inst" >/dev/null # (it exits 5)
    "$QP" report --callgrind -o "$dir/virt.cg" "$dir/virt.inst.qp" || bad "virtual.cc: --callgrind failed"
    grep -q '^fn=_Z' "$dir/virt.cg" && bad "--callgrind: mangled names: $(grep -m 1 '^fn=_Z' "$dir/virt.cg")"
    grep -q '^fn=Shape::' "$dir/virt.cg" && ok "--callgrind: demangled (fn=$(sed -n 's/^fn=\(Shape::.*\)/\1/p' "$dir/virt.cg" | head -n 1))" \
        || bad "--callgrind: no fn=Shape:: in $(grep '^fn=' "$dir/virt.cg" | head -n 3 | tr '\n' ' ')"
    "$QP" report --callgrind --mangled -o "$dir/virt.m.cg" "$dir/virt.inst.qp"
    grep -q '^fn=_ZNK5Shape4nameEv$' "$dir/virt.m.cg" && ok "--callgrind --mangled: stored names" \
        || bad "--callgrind --mangled: $(grep '^fn=' "$dir/virt.m.cg" | head -n 3 | tr '\n' ' ')"
fi

"$QP" report --callers=nonesuch "$dir/gccO0.inst.qp" >/dev/null 2>"$dir/err"
[ $? -eq 1 ] && grep -q "no procedure named 'nonesuch'" "$dir/err" && ok "unknown FUNC refused" ||
    bad "unknown FUNC: $(cat "$dir/err")"

[ $fails -eq 0 ] || exit 1
echo "callgraph: all checks passed"
exit 0
