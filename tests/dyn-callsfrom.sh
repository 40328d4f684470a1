#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# dyn --calls-from on the one live engine (issue 30: it ran on dynamic/dyn_run.c, which
# refused a procedure's entry when a counted call was in its first 5 bytes, and followed
# an exec only with --follow-exec). tests/dyncalls:
#  (a) --count and --calls-from of cs_first (its first instruction a 5-byte call) and
#      cs_reg (its first instruction `call *%rdi`, 2 bytes): the entries and the calls
#      counted exactly (the procedures run as copies, a counter before each call),
#      nothing refused, the output unchanged;
#  (b) `--calls-from loop` (a bare pattern, no --follow-exec) of a program that calls
#      work 5 times at loop's one site, then execs itself to do it 9 times: rows
#      cs[1]:loop+0xOFF->work 5 and loop+0xOFF->work 9;
#  (c) --calls-from '*:lib_sum' in a library loaded (dlopen) after an exec: the site
#      lib_sum+0xOFF->lib_square@plt 7 x 34 times, no "no procedure matches" line;
#  (d) `-e 'count calls(*) per call site from(cs_reg)'`: the language's spelling, exact;
#  (e) `--calls-from loop` patches loop's call site only: the entry of a procedure it
#      does not call (cs_leaf) keeps its bytes, and -e's spelling says nothing of
#      procedures outside loop (the engine put a counter at the entry of every
#      procedure calls(*) named, in a row past the metric's own, and said which it
#      could not take; -e's cost sampling still counts their calls for a moment).
#  (f) --calls-from a procedure without calls runs and prints an empty table (the
#      metric's zero rows were a zero-byte allocation, refused).
# Skips (77) when ptrace is not allowed. Exit status: 0 pass, 1 fail, 99 error.
set -u
: "${top_srcdir:=.}"
: "${top_builddir:=.}"
. "$top_srcdir/tests/lib.sh"
DYN=$top_builddir/tools/dyn
dyn_setup dyn-callsfrom
d=$dir

qp_have gcc || { echo "SKIP: gcc not installed"; exit 77; }
gcc -O2 -o "$d/cs" "$top_srcdir/tests/dyncalls/main.c" -ldl || exit 99
gcc -O2 -fPIC -shared -o "$d/libqt.so" "$top_srcdir/tests/dynlib/lib.c" || exit 99
lib=$(cd "$d" && pwd)/libqt.so

"$DYN" run --count loop -- "$d/cs" loop 1 >"$d/probe.out" 2>"$d/probe.err"
dyn_skip_untraced "$d/probe.err"

csv() { awk -F, -v n="$2" '$1 == n { print $2 }' "$1"; }
# site FILE PREFIX CALLEE: the calls of the row PREFIX+0xOFF->CALLEE (any OFF).
site() {
    awk -F, -v p="$2" -v c="$3" 'index($1, p "+0x") == 1 && substr($1, length($1) - length(c) + 1) == c &&
        substr($1, length($1) - length(c) - 1, 2) == "->" { print $2 }' "$1"
}

# (a) calls in a procedure's first bytes, counted with its entry.
n=1000
"$d/cs" run $n >"$d/a.plain"
"$DYN" run -v --count cs_first --calls-from cs_first --count cs_reg --calls-from cs_reg \
    -o "$d/a.csv" -- "$d/cs" run $n >"$d/a.out" 2>"$d/a.err"
rc=$?
expect_eq "(a) exit status" "$rc" 3
grep -q "^$(cat "$d/a.plain")\$" "$d/a.out" && ok "(a) output unchanged" ||
    bad "(a) output: $(cat "$d/a.out")"
expect_eq "(a) cs_first" "$(csv "$d/a.csv" cs_first)" $n
expect_eq "(a) cs_first+0x0->cs_leaf" "$(csv "$d/a.csv" 'cs_first+0x0->cs_leaf')" $n
expect_eq "(a) cs_reg" "$(csv "$d/a.csv" cs_reg)" $n
expect_eq "(a) cs_reg+0x0->*indirect" "$(csv "$d/a.csv" 'cs_reg+0x0->*indirect')" $n
grep -q ': 4 points instrumented, 0 refused' "$d/a.err" && ok "(a) nothing refused" ||
    bad "(a) refused: $(cat "$d/a.err")"

# (b) a bare --calls-from pattern follows the exec.
"$DYN" run --calls-from loop -o "$d/b.csv" -- "$d/cs" exec 5 9 >"$d/b.out" 2>"$d/b.err"
rc=$?
expect_eq "(b) exit status" "$rc" 3
grep -q '^loop 9$' "$d/b.out" && ok "(b) the new program ran" || bad "(b) output: $(cat "$d/b.out")"
expect_eq "(b) loop's site in the first image" "$(site "$d/b.csv" 'cs[1]:loop' work)" 5
expect_eq "(b) loop's site in the new image" "$(site "$d/b.csv" loop work)" 9

# (c) a library glob, in a library loaded after an exec.
"$DYN" run --calls-from '*:lib_sum' -o "$d/c.csv" -- "$d/cs" execdl 5 "$lib" 7 \
    >"$d/c.out" 2>"$d/c.err"
rc=$?
expect_eq "(c) exit status" "$rc" 3
expect_eq "(c) lib_sum's call of lib_square" \
    "$(site "$d/c.csv" libqt.so:lib_sum lib_square@plt)" $((7 * 34))
grep -q 'no procedure matches' "$d/c.err" && bad "(c) $(grep 'no procedure matches' "$d/c.err")" ||
    ok "(c) no spurious 'no procedure matches'"

# (d) the metric --calls-from is.
"$DYN" run -e 'count calls(*) per call site from(cs_reg)' -- "$d/cs" run $n >"$d/d.out" 2>"$d/d.err"
rc=$?
expect_eq "(d) exit status" "$rc" 3
grep -Eq "^count calls\(\*\) per call site from\(cs_reg\) +$n  cs_reg\+0x0 -> \*indirect\$" "$d/d.out" &&
    ok "(d) cs_reg's call: $n" || bad "(d) $(cat "$d/d.out" "$d/d.err")"

# (e) nothing but the sites.
"$DYN" run --calls-from loop -o "$d/e.csv" -- "$d/cs" peek 4 >"$d/e.out" 2>"$d/e.err"
rc=$?
expect_eq "(e) exit status" "$rc" 3
grep -q '^cs_leaf intact$' "$d/e.out" && ok "(e) cs_leaf's entry untouched" ||
    bad "(e) $(cat "$d/e.out" "$d/e.err")"
expect_eq "(e) loop's site" "$(site "$d/e.csv" loop work)" 4
"$DYN" run -e 'count calls(*) per call site from(loop)' -- "$d/cs" peek 4 >"$d/e2.out" 2>"$d/e2.err"
grep -q 'not measured' "$d/e2.err" && bad "(e) -e: a note of a procedure not from(loop): $(cat "$d/e2.err")" ||
    ok "(e) -e: no note of other procedures"

# (f) a procedure that makes no calls: an empty table, not a refused allocation.
"$DYN" run --calls-from cs_leaf -o "$d/f.csv" -- "$d/cs" peek 4 >"$d/f.out" 2>"$d/f.err"
rc=$?
expect_eq "(f) exit status" "$rc" 3
grep -q 'from(cs_leaf): ' "$d/f.err" &&
    bad "(f) $(cat "$d/f.err")" || ok "(f) cs_leaf, no call sites: counted nothing, said no error"
[ "$(head -n 1 "$d/f.csv" 2>/dev/null)" = "name,calls,wall_ns" ] && [ "$(wc -l < "$d/f.csv")" = 1 ] &&
    ok "(f) an empty table (its header only)" || bad "(f) table: $(cat "$d/f.csv" 2>&1)"

[ $fails -eq 0 ] || exit 1
exit 0
