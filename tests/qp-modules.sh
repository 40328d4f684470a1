#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# One report over a whole process: `qp report` given the profiles of a rewritten program
# (tests/shlib/main.c) and of a rewritten library it loads (tests/shlib/lib.c, through
# its RUNPATH $ORIGIN/lib), run twice (plain, then with 4 threads). Checked: the combined
# flat profile's total is the sum of the single-module totals, and so is its module
# table; the module column; the CSV with its module field (lib_sum is called 10 times a
# run); the program's PLT stubs counted from its calls; MODULE:FUNC for the
# per-procedure views, a name found in one module only, and a name in both refused; the
# whole-module outputs refused with one line and status 2; the line saying what the
# total leaves out; one module's output unchanged.
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
QP=${QP:-$top_builddir/tools/qp}
dir=$top_builddir/tests/qp-modules.d
rm -rf "$dir"
mkdir -p "$dir/lib" || exit 99
fails=0
qp_have gcc || { echo "SKIP: gcc not installed"; exit 77; }
src=$top_srcdir/tests/shlib
export LC_ALL=C
unset QP_PROFILE

gcc -O2 -g -shared -fPIC -o "$dir/libqt.so" "$src/lib.c" || exit 99
gcc -O2 -g -o "$dir/main" "$src/main.c" -L"$dir" -lqt -pthread -ldl -Wl,-rpath,'$ORIGIN/lib' || exit 99
"$QPT_REWRITE" "$dir/libqt.so" -o "$dir/lib/libqt.so" >"$dir/rw.log" 2>&1 &&
    "$QPT_REWRITE" "$dir/main" -o "$dir/main.inst" >>"$dir/rw.log" 2>&1 ||
    { echo "FAIL rewrite: $(tail -n 1 "$dir/rw.log")"; exit 1; }
"$dir/main.inst" >/dev/null && "$dir/main.inst" threads >/dev/null || bad "the rewritten program failed"
main=$dir/main.inst.qp lib=$dir/lib/libqt.so.qp
[ -f "$main" ] && [ -f "$lib" ] || { echo "FAIL no profiles: $(ls "$dir" "$dir/lib")"; exit 1; }

# total FILE: the instructions on the `total:` line of a flat profile
total() { sed -n 's/^total: \([0-9]*\) instructions.*/\1/p' "$1"; }

"$QP" report "$main" >"$dir/main.flat" && "$QP" report "$lib" >"$dir/lib.flat" ||
    bad "single-module reports failed"
"$QP" report "$main" "$lib" >"$dir/both" 2>"$dir/both.err" || bad "combined report: $(cat "$dir/both.err")"
tm=$(total "$dir/main.flat") tl=$(total "$dir/lib.flat") tb=$(total "$dir/both")
[ -n "$tm" ] && [ -n "$tl" ] && [ "$tb" = $((tm + tl)) ] &&
    ok "total $tb = $tm (main.inst) + $tl (libqt.so)" || bad "total '$tb', modules '$tm' + '$tl'"
head -n 1 "$dir/both" | grep -qx 'Flat profile of main.inst and 1 library' &&
    ok "title" || bad "title: $(head -n 1 "$dir/both")"
# The module table: each module's instructions as its own report has them, then the sum.
grep -Eq "^ +[0-9.]+ +$tm +2 +[0-9]+ +[0-9]+  main.inst +/.*/main.inst\$" "$dir/both" &&
    grep -Eq "^ +[0-9.]+ +$tl +2 +[0-9]+ +[0-9]+  libqt.so +/.*/lib/libqt.so\$" "$dir/both" &&
    ok "module table" || bad "module table: $(sed -n '3,8p' "$dir/both")"
grep -q '^not in the total: code outside these 2 modules (the dynamic loader, the vDSO, libraries not rewritten)' "$dir/both" &&
    ok "what the total leaves out" || bad "no 'not in the total' line"
grep -Eq '^ +[0-9.]+ +[0-9]+ +20  libqt.so   lib_sum$' "$dir/both" &&
    grep -Eq '^ +[0-9.]+ +[0-9]+ +2  main.inst  main$' "$dir/both" &&
    grep -Eq '^ +[0-9.]+ +800000 +200000  libqt.so   lib_tick$' "$dir/both" &&
    ok "module column" || bad "module column: $(grep -E 'lib_sum|  main$' "$dir/both")"
# Sorted across modules: the library's hot loop first.
awk '/^ % insns .* name$/ { getline; print; exit }' "$dir/both" | grep -q 'libqt.so   lib_tick$' &&
    ok "sorted across modules" || bad "first row: $(awk '/^ % insns .* name$/ { getline; print; exit }' "$dir/both")"

# CSV: one header, a module field.
"$QP" report --csv "$main" "$lib" >"$dir/both.csv" || bad "--csv failed"
head -n 1 "$dir/both.csv" | grep -qx 'module,name,calls,instructions,flags' && ok "CSV header" ||
    bad "CSV header: $(head -n 1 "$dir/both.csv")"
grep -Eq '^libqt.so,lib_sum,20,[0-9]+,$' "$dir/both.csv" && grep -Eq '^main.inst,main,2,[0-9]+,$' "$dir/both.csv" &&
    grep -Eq '^libqt.so,lib_tick,200000,800000,$' "$dir/both.csv" && ok "CSV rows" ||
    bad "CSV rows: $(grep -E 'lib_sum|,main,' "$dir/both.csv")"
# The program's calls of the library go through its PLT: stubs counted from their callers.
grep -Eq '^main.inst,lib_tick@plt,200000,200000,\^~?$' "$dir/both.csv" &&
    grep -Eq '^total: [0-9]+ instructions executed in [0-9]+ measured procedures and [0-9]+ PLT stubs of 2 modules;' "$dir/both" &&
    ok "PLT stubs counted" || bad "PLT stubs: $(grep -E 'lib_tick@plt|^total:' "$dir/both.csv" "$dir/both")"
sum=$(awk -F, 'NR > 1 { s += $4 } END { print s }' "$dir/both.csv")
[ "$sum" = "$tb" ] && ok "CSV sums to the total" || bad "CSV sum $sum, total $tb"
"$QP" report --csv "$lib" | head -n 1 | grep -qx 'name,calls,instructions,flags' &&
    ok "one module's CSV header unchanged" || bad "one module's CSV header"

# --limit, --min, -v, -o
"$QP" report --limit 2 "$main" "$lib" >"$dir/limit"
rows=$(awk '/^ % insns .* name$/ { on = 1; next } on && /^$/ { exit } on' "$dir/limit")
[ "$(echo "$rows" | grep -Ec '  (main.inst|libqt.so ) +[a-z_]+$')" = 2 ] && echo "$rows" | grep -q 'more procedures: --limit, --min)' &&
    ok "--limit 2" || bad "--limit 2: $rows"
"$QP" report --min 45 "$main" "$lib" | grep -Eq '^ +[0-9.]+ +800000 +200000  libqt.so   lib_tick$' && ok "--min" || bad "--min 45"
"$QP" report -v "$main" "$lib" >"$dir/verbose"
grep -Eq '^ +0.00 +0 +0  libqt.so   lib_quit$' "$dir/verbose" && ok "-v: procedures that never ran" ||
    bad "-v: no lib_quit row"
for m in main.inst:"$main" libqt.so:"$lib"; do
    if "$QP" report -v "${m#*:}" | grep -q '^Not measured:$'; then
        grep -q "^Not measured in ${m%%:*}:\$" "$dir/verbose" && ok "-v: not measured in ${m%%:*}" ||
            bad "-v: no 'Not measured in ${m%%:*}:'"
    fi
done
"$QP" report -o "$dir/out" "$main" "$lib" && cmp -s "$dir/out" "$dir/both" && ok "-o" || bad "-o"

# A procedure: MODULE:FUNC, or a name that one module only has.
"$QP" report --blocks=libqt.so:lib_sum "$main" "$lib" 2>&1 | grep -q '^lib_sum at 0x[0-9a-f]*: 20 calls' &&
    ok "--blocks=libqt.so:lib_sum" || bad "--blocks=libqt.so:lib_sum"
"$QP" report --callees=ticker "$main" "$lib" 2>&1 | grep -q '^Callees of ticker: 4 calls' &&
    ok "--callees=ticker (main.inst's only)" || bad "--callees=ticker"
"$QP" report --callers=main.inst:lib_sum "$main" "$lib" 2>&1 | grep -Eq '^ +20 +100.00 +[0-9]+  main$' &&
    ok "--callers=main.inst:lib_sum (its PLT stub)" || bad "--callers=main.inst:lib_sum"
"$QP" report --dot=_fini "$main" "$lib" >"$dir/out" 2>"$dir/err"
st=$?
[ "$st" = 1 ] && [ "$(wc -l <"$dir/err")" = 1 ] && grep -q 'is in several modules (main.inst, libqt.so): give MODULE:NAME' "$dir/err" &&
    ok "a name in both modules refused" || bad "--dot=_fini: status $st: $(cat "$dir/err")"

# The outputs of one module's whole profile: refused with one line, status 2.
for opt in --lcov --call-graph --callgrind --blocks; do
    "$QP" report $opt "$main" "$lib" >"$dir/out" 2>"$dir/err"
    st=$?
    [ "$st" = 2 ] && [ "$(wc -l <"$dir/err")" = 1 ] && [ ! -s "$dir/out" ] &&
        grep -q "^qp: $opt.* takes the profiles of one module; these are of 2 (main.inst, libqt.so)" "$dir/err" &&
        ok "$opt refused" || bad "$opt: status $st: $(cat "$dir/err")"
done

[ "$fails" -eq 0 ]
