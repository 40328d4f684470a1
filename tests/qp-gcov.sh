#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Line counts against gcov. Each source is built twice at -O0: with -fprofile-arcs
# -ftest-coverage (gcov's own counters, compiled in) and plain -g (rewritten with qp,
# counted from the binary alone). After one run of each, the execution count of every
# source line that both report must be the same: `qp report --lcov` (DWARF lines of
# the original code) against gcov's .gcov file. Branches likewise: per source line, the
# taken counts of every outcome (BRDA) against gcov -b -c's "branch N taken M" (one line
# may hold several branches: compared as sorted lists). A switch compiled to a jump table
# is one branch in both; one compiled to a tree of compares (switch_sparse) is one branch
# per compare for qp (the machine's branches) but one per case for gcov (its source
# view): its branches are not compared. When lcov is installed, genhtml renders qp's
# tracefile with its branch column.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
QP=${QP:-$top_builddir/tools/qp}
qp_have gcc || { echo "qp-gcov.sh: SKIP: no gcc"; exit 77; }
qp_have gcov || { echo "qp-gcov.sh: SKIP: no gcov"; exit 77; }
dir=$top_builddir/tests/gcov.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
dir=$(cd "$dir" && pwd)
# The work happens in per-program directories: make the tools' paths absolute.
case $QPT_REWRITE in /*) ;; *) QPT_REWRITE=$(pwd)/$QPT_REWRITE ;; esac
case $QP in /*) ;; *) QP=$(pwd)/$QP ;; esac
fail=0
for src in "$top_srcdir/tests/qp/truth.c" "$top_srcdir/tests/progs/loops.c" \
    "$top_srcdir/tests/progs/switch_dense.c" "$top_srcdir/tests/progs/switch_sparse.c" \
    "$top_srcdir/tests/progs/recursion.c" "$top_srcdir/tests/progs/fptr.c" \
    "$top_srcdir/tests/progs/tailcall.c" "$top_srcdir/tests/qp/calls.c"; do
    base=$(basename "$src" .c)
    w=$dir/$base
    mkdir -p "$w"
    cp "$src" "$w/$base.c"
    (
        cd "$w" || exit 99
        gcc -O0 -fprofile-arcs -ftest-coverage -o cov "$base.c" || exit 99
        ./cov >/dev/null 2>&1
        gcov -b -c -o . "cov-$base" >/dev/null 2>&1 || gcov -b -c "$base.c" >/dev/null 2>&1
        gcc -O0 -g -o plain "$base.c" || exit 99
        "$QPT_REWRITE" plain -o plain.inst 2>rewrite.log || exit 98
        rm -f plain.inst.qp
        ./plain.inst >/dev/null 2>&1
        "$QP" report --lcov plain.inst.qp >qp.info 2>qp.err || exit 97
    )
    case $? in
    0) ;;
    98) echo "FAIL $base: qpt-rewrite: $(head -n 1 "$w/rewrite.log")"; fail=1; continue ;;
    97) echo "FAIL $base: qp report --lcov: $(head -n 1 "$w/qp.err")"; fail=1; continue ;;
    *) echo "FAIL $base: cannot build or run"; fail=1; continue ;;
    esac
    if [ ! -f "$w/$base.c.gcov" ]; then
        echo "FAIL $base: gcov wrote no $base.c.gcov"
        fail=1
        continue
    fi
    # line count, from gcov ("   12:   34: code", "#####" = 0) and from lcov (DA:line,count
    # of the record whose SF is this source).
    grep -E '^ *([0-9]+|#####)\*?:' "$w/$base.c.gcov" |
        awk -F: '{ c = $1; gsub(/[ *]/, "", c); if (c == "#####") c = 0;
                   l = $2; gsub(/ /, "", l); print l, c }' | sort -k1,1 >"$w/gcov.lines"
    awk -F'[:,]' -v f="$base.c" '
        /^SF:/ { n = split($0, p, "/"); on = (p[n] == f || $2 == f) }
        on && /^DA:/ { print $2, $3 }' "$w/qp.info" | sort -k1,1 >"$w/qp.lines"
    both=$(join "$w/qp.lines" "$w/gcov.lines" | wc -l)
    diff=$(join "$w/qp.lines" "$w/gcov.lines" | awk '$2 != $3')
    if [ "$both" -eq 0 ]; then
        echo "FAIL $base: no line seen by both"
        fail=1
    elif [ -n "$diff" ]; then
        echo "FAIL $base: line counts differ (line qp gcov):"
        echo "$diff" | head -n 10 | sed 's/^/  /'
        fail=1
    else
        echo "ok $base: $both lines, every count equal to gcov's"
    fi
    # A line holding only the `{` of a function is never a line of its own (gcov counts
    # the prologue on the declaration line, and so does qp).
    brace=$(join -v 1 "$w/qp.lines" "$w/gcov.lines" | while read -r l c; do
        [ "$(sed -n "${l}p" "$w/$base.c" | tr -d ' \t')" = "{" ] && echo "$l"; done)
    if [ -n "$brace" ]; then
        echo "FAIL $base: lines with only '{' counted: $brace"
        fail=1
    fi
    # Branches: "line count,count,..." with the counts sorted, from both.
    awk '/^ *([0-9]+|#####|-)\*?:/ { split($0, p, ":"); l = p[2]; gsub(/ /, "", l) }
         /^branch +[0-9]+ +taken/ { print l, $4 }
         /^branch +[0-9]+ +never executed/ { print l, 0 }' "$w/$base.c.gcov" |
        sort -k1,1n -k2,2n | awk '{ if ($1 != l) { if (l != "") print l, c; l = $1; c = $2 }
                                  else c = c "," $2 } END { if (l != "") print l, c }' |
        sort -k1,1 >"$w/gcov.branches"
    awk -F'[:,]' -v f="$base.c" '
        /^SF:/ { n = split($0, p, "/"); on = (p[n] == f || $2 == f) }
        on && /^BRDA:/ { print $2, ($5 == "-" ? 0 : $5) }' "$w/qp.info" |
        sort -k1,1n -k2,2n | awk '{ if ($1 != l) { if (l != "") print l, c; l = $1; c = $2 }
                                  else c = c "," $2 } END { if (l != "") print l, c }' |
        sort -k1,1 >"$w/qp.branches"
    nb=$(join "$w/qp.branches" "$w/gcov.branches" | wc -l)
    bdiff=$(join "$w/qp.branches" "$w/gcov.branches" | awk '$2 != $3')
    if [ "$base" = switch_sparse ]; then
        echo "ok $base: branches not compared (a tree of compares: see above)"
    elif [ "$(wc -l <"$w/gcov.branches")" -gt 0 ] && [ "$nb" -eq 0 ]; then
        echo "FAIL $base: no branch line seen by both"
        fail=1
    elif [ -n "$bdiff" ]; then
        echo "FAIL $base: branch counts differ (line qp gcov):"
        echo "$bdiff" | head -n 10 | sed 's/^/  /'
        fail=1
    else
        echo "ok $base: $nb lines with branches, every outcome's count equal to gcov's"
    fi
    if qp_have genhtml; then
        if genhtml -q --branch-coverage -o "$w/html" "$w/qp.info" >"$w/genhtml.log" 2>&1 &&
            grep -q 'Branches' "$w/html/index.html"; then
            echo "ok $base: genhtml renders the tracefile with branches"
        else
            echo "FAIL $base: genhtml: $(grep -v '^Subroutine' "$w/genhtml.log" | head -n 2)"
            fail=1
        fi
    fi
done
exit $fail
