#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# The qp command line: usage errors (exit 2, one line), unusable profiles (missing,
# empty, garbage, truncated, a directory: exit 1, one line "qp: FILE: why"), --help and
# --version. Then, when gcc and qpt-rewrite can instrument a small program, every report
# on its profile: the CSV contract (calls of known procedures, qp's reconstructed counts
# equal naive's measured ones), a profile refused by another executable, merge, blocks,
# edges, DOT, annotate and lcov; and what qpt-rewrite reads from the environment for the
# library (QPT_LEAVE=name,..., QPT_LEAVE=@FILE, QP_DEBUG), and that its phases give the
# heap's free pages back.
# Exit status: 0 pass, 1 fail, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
QP=${QP:-$top_builddir/tools/qp}
dir=$top_builddir/tests/qp-cli.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
fail=0

bad() {
    echo "FAIL $*"
    fail=1
}

# expect STATUS CMD...: the exit status is STATUS and stderr is one line starting with
# "qp: " (or empty when STATUS is 0).
expect() {
    want=$1
    shift
    "$@" >"$dir/out" 2>"$dir/err"
    st=$?
    n=$(wc -l <"$dir/err")
    if [ "$st" -ne "$want" ]; then
        bad "$*: exit $st, expected $want ($(head -n 1 "$dir/err"))"
    elif [ "$want" -ne 0 ] && { [ "$n" -ne 1 ] || ! grep -q '^qp: ' "$dir/err"; }; then
        bad "$*: stderr is not one 'qp: ' line: $(cat "$dir/err")"
    elif [ "$want" -eq 0 ] && [ "$n" -ne 0 ]; then
        bad "$*: unexpected stderr: $(cat "$dir/err")"
    fi
}

# Usage errors.
expect 2 "$QP"
expect 2 "$QP" frobnicate
expect 2 "$QP" report
expect 2 "$QP" report --nope x.qp
expect 2 "$QP" report --exe
expect 2 "$QP" report --csv --lcov x.qp
expect 2 "$QP" report --original=x x.qp
expect 2 "$QP" merge x.qp
expect 2 "$QP" merge -o out.qp --csv x.qp
expect 0 "$QP" --help
grep -q '^Usage: qp report' "$dir/out" || bad "--help: no usage"
expect 0 "$QP" report --version
grep -q '^qp (qpt) ' "$dir/out" || bad "--version: $(cat "$dir/out")"

# Unusable profiles.
expect 1 "$QP" report "$dir/missing.qp"
grep -q 'No such file' "$dir/err" || bad "missing: $(cat "$dir/err")"
: >"$dir/empty.qp"
expect 1 "$QP" report "$dir/empty.qp"
head -c 10000 /dev/urandom >"$dir/garbage.qp" 2>/dev/null || dd if=/dev/zero of="$dir/garbage.qp" bs=1000 count=10 2>/dev/null
expect 1 "$QP" report "$dir/garbage.qp"
grep -q 'not a qp profile' "$dir/err" || bad "garbage: $(cat "$dir/err")"
expect 1 "$QP" report "$dir"
expect 1 "$QP" merge -o "$dir/m.qp" "$dir/garbage.qp"

# A real profile, when the rewriter can make one.
QPT_REWRITE=${QPT_REWRITE:-$top_builddir/tools/qpt-rewrite}
cat >"$dir/p.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) void maybe(int n) { if (n > 2) exit(n); }
__attribute__((noinline)) int sq(int x) { return x * x; }
__attribute__((noinline)) void mid(int n)
{
    int s = 0;
    for (int i = 0; i < n; i++) {
        maybe(i);
        s += sq(i);
    }
    printf("%d\n", s);
}
int main(int argc, char **argv)
{
    (void)argv;
    mid(2);
    mid(argc + 3);
    return 0;
}
EOF
if ! qp_have gcc || ! gcc -g -O0 -o "$dir/p" "$dir/p.c" ||
    ! "$QPT_REWRITE" --driver=qp "$dir/p" -o "$dir/p.qp.inst" 2>"$dir/rw.err" ||
    ! "$QPT_REWRITE" --driver=naive "$dir/p" -o "$dir/p.naive.inst" 2>>"$dir/rw.err"; then
    echo "qp-cli: instrumented runs skipped (no gcc, or the rewriter failed: $(head -n 1 "$dir/rw.err" 2>/dev/null))"
    [ "$fail" -eq 0 ] && echo "qp-cli: PASS" && exit 0
    exit 1
fi
# What qpt-rewrite reads from the environment for the library (which never reads it):
# QPT_LEAVE=name,... and QPT_LEAVE=@FILE keep procedures in place, QP_DEBUG prints the
# analysis' phases.
QPT_LEAVE=sq,mid "$QPT_REWRITE" -v "$dir/p" -o "$dir/p.leave" 2>"$dir/leave.err" ||
    bad "QPT_LEAVE: $(tail -n 1 "$dir/leave.err")"
for f in sq mid; do
    grep -q "left in place: $f at 0x[0-9a-f]*: named in QPT_LEAVE" "$dir/leave.err" ||
        bad "QPT_LEAVE=sq,mid: $f moved"
done
printf 'maybe\nmain\n' >"$dir/leave.list"
QPT_LEAVE=@$dir/leave.list "$QPT_REWRITE" -v "$dir/p" -o "$dir/p.leave" 2>"$dir/leave.err" ||
    bad "QPT_LEAVE=@FILE: $(tail -n 1 "$dir/leave.err")"
[ "$(grep -c 'named in QPT_LEAVE' "$dir/leave.err")" -eq 2 ] ||
    bad "QPT_LEAVE=@FILE: $(grep 'QPT_LEAVE' "$dir/leave.err")"
QP_DEBUG=1 "$QPT_REWRITE" --dump-cfg "$dir/p" >/dev/null 2>"$dir/debug.err"
grep -q '^qp-debug: *[0-9.]* s *[0-9.]* cpu *[0-9.]* main *[0-9]* rss *[0-9]* peak stats ([0-9]* procedures)$' "$dir/debug.err" ||
    bad "QP_DEBUG: $(head -n 2 "$dir/debug.err")"
# The description is made beside the unwind tables (editor/elfw_rewrite.c): one phase.
QP_DEBUG=1 "$QPT_REWRITE" --threads=2 "$dir/p" -o "$dir/p.debug" >/dev/null 2>"$dir/debug.err"
grep -q ' peak unwind tables, description (0 procedures)$' "$dir/debug.err" &&
    grep -q ' peak runtime, build-id (0 procedures)$' "$dir/debug.err" ||
    bad "QP_DEBUG: the writer's phases: $(grep -c qp-debug "$dir/debug.err") lines"
# The end of each phase gives the heap's free pages back (tools/tool_heap.c): once the
# analysis has copied its per-procedure CFGs into the program's arrays and freed them,
# bash's rewrite is resident below its peak by a few MiB (the heap kept them resident:
# rss was the peak).
if [ -f /usr/bin/bash ]; then
    QP_DEBUG=1 "$QPT_REWRITE" --threads=1 --driver=none /usr/bin/bash -o "$dir/bash.none" \
        2>"$dir/heap.err"
    awk '/ peak flattened / { for (i = 1; i < NF; i++) { if ($(i + 1) == "rss") r = $i
                                                         if ($(i + 1) == "peak") p = $i }
                              ok = p - r >= 2 }
         END { exit !ok }' "$dir/heap.err" ||
        bad "heap: not given back after the analysis: $(grep 'peak flattened' "$dir/heap.err")"
fi
# The input's pages the analysis and the driver read are let go before the layout
# (ed_plan_apply: cfg_image_release_pages; read again from the page cache where
# needed): python3.11's qp rewrite is resident below its driver's end once its points in
# place are patched, by a few MiB (it was the same or above).
if [ -f /usr/bin/python3.11 ]; then
    QP_DEBUG=1 "$QPT_REWRITE" --threads=1 --driver=qp /usr/bin/python3.11 -o "$dir/py.qp" \
        2>"$dir/pages.err"
    awk '/ peak measured \(driver\) / { for (i = 1; i < NF; i++) if ($(i + 1) == "rss") m = $i }
         / peak patched in place / { for (i = 1; i < NF; i++) if ($(i + 1) == "rss") p = $i }
         END { exit !(m != "" && p != "" && m - p >= 2) }' "$dir/pages.err" ||
        bad "input pages: not released before the layout: $(grep 'measured\|patched' "$dir/pages.err")"
    rm -f "$dir/py.qp"
fi
for v in qp naive; do
    "$dir/p.$v.inst" >/dev/null
    st=$?
    [ "$st" -eq 3 ] || bad "p.$v.inst: exit $st, expected 3"
    expect 0 "$QP" report --csv "$dir/p.$v.inst.qp"
    cp "$dir/out" "$dir/$v.csv"
    [ "$(head -n 1 "$dir/$v.csv")" = "name,calls,instructions,flags" ] || bad "$v: CSV header"
    for want in "mid 2" "maybe 6" "sq 5" "main 1"; do
        got=$(awk -F, -v n="${want% *}" '$1 == n { print $2 }' "$dir/$v.csv")
        [ "$got" = "${want#* }" ] || bad "$v: ${want% *}: $got calls, expected ${want#* }"
    done
    expect 0 "$QP" report "$dir/p.$v.inst.qp"
    grep -q '^Flat profile of' "$dir/out" || bad "$v: no flat profile"
    grep -q ' !' "$dir/out" && bad "$v: flow conservation violated: $(grep ' !' "$dir/out")"
done
sort "$dir/qp.csv" >"$dir/qp.sorted"
sort "$dir/naive.csv" >"$dir/naive.sorted"
cmp -s "$dir/qp.sorted" "$dir/naive.sorted" ||
    bad "qp and naive disagree: $(diff "$dir/qp.sorted" "$dir/naive.sorted" | head -n 4)"

prof=$dir/p.qp.inst.qp
# --limit and --min: the first rows only, what is left out summed in one line.
expect 0 "$QP" report --limit 1 "$prof"
rows=$(awk '/^ % insns/ { on = 1; next } on && /^$/ { exit } on' "$dir/out")
[ "$(echo "$rows" | wc -l)" = 2 ] && echo "$rows" | tail -n 1 | grep -q 'more procedures: --limit, --min)' ||
    bad "--limit 1: $rows"
expect 0 "$QP" report --min 100 "$prof"
echo "$(cat "$dir/out")" | grep -q '^ *100.00 .* more procedures: --limit, --min)$' ||
    bad "--min 100: $(cat "$dir/out")"
expect 2 "$QP" report --limit x "$prof"
expect 2 "$QP" report --min 200 "$prof"
expect 1 "$QP" report --exe="$dir/p.naive.inst" "$prof"
grep -q 'belongs to another executable or another rewrite' "$dir/err" ||
    bad "foreign profile: $(cat "$dir/err")"
# ... refused from the description's header, before the rest is read (chromium's took
# 900 MB to refuse): a description whose body is corrupt does not get that far.
cp "$dir/p.naive.inst" "$dir/p.corrupt.inst"
set -- $(readelf -SW "$dir/p.corrupt.inst" |
    awk '/\.qpt\.desc/ { for (i = 1; i <= NF; i++) if ($i == "PROGBITS") print $(i + 2), $(i + 3) }')
printf '\377' | dd of="$dir/p.corrupt.inst" bs=1 seek=$((0x$1 + 0x$2 - 1)) conv=notrunc 2>/dev/null
expect 1 "$QP" report --exe="$dir/p.corrupt.inst" "$prof"
grep -q 'belongs to another executable or another rewrite' "$dir/err" ||
    bad "foreign profile, corrupt description: $(cat "$dir/err")"
expect 1 "$QP" report --exe="$dir/p" "$prof"
grep -q 'no .qpt.desc section' "$dir/err" || bad "uninstrumented exe: $(cat "$dir/err")"
# The description is a non-alloc section (the program never loads it), and one of an
# older format (version 2 here) is refused, saying that the program must be rewritten.
readelf -lW "$dir/p.qp.inst" | sed -n '/Section to Segment/,$p' | grep -q '\.qpt\.desc' &&
    bad ".qpt.desc is in a segment"
desc_off=$(readelf -SW "$dir/p.qp.inst" | sed -n 's/^.*\] \.qpt\.desc *[A-Z]* *[0-9a-f]* \([0-9a-f]*\) .*$/\1/p')
if [ -z "$desc_off" ]; then
    bad "no .qpt.desc section header in $dir/p.qp.inst"
else
    cp "$dir/p.qp.inst" "$dir/p.old.inst"
    printf '\002' | dd of="$dir/p.old.inst" bs=1 seek=$((0x$desc_off + 8)) conv=notrunc 2>/dev/null
    expect 1 "$QP" report --exe="$dir/p.old.inst" "$prof"
    grep -q 'description version 2, made by an older qpt.*rewrite the program again' "$dir/err" ||
        bad "old description: $(cat "$dir/err")"
fi
# The description parser under its fuzz harness (built by make check): the section and
# damaged copies of it (cut in half, a byte changed) neither crash nor fail to round-trip.
fuzz=$top_builddir/tests/fuzz_desc
if [ -x "$fuzz" ] && objcopy --dump-section .qpt.desc="$dir/desc.bin" "$dir/p.qp.inst" \
        "$dir/objcopy.out" 2>/dev/null; then
    n=$(wc -c <"$dir/desc.bin")
    head -c $((n / 2)) "$dir/desc.bin" >"$dir/desc.half"
    cp "$dir/desc.bin" "$dir/desc.flip"
    printf 'x' | dd of="$dir/desc.flip" bs=1 seek=$((n / 2)) conv=notrunc 2>/dev/null
    "$fuzz" "$dir/desc.bin" "$dir/desc.half" "$dir/desc.flip" >"$dir/fuzz.out" 2>&1 ||
        bad "fuzz_desc: $(tail -n 3 "$dir/fuzz.out")"
fi
# An input make fuzz found (tests/desc/many-calls.desc, 8,989 bytes) whose header states
# 220 million call sites: under a 1 GB limit it is refused for its bytes, not for memory
# (the index took 12 bytes for each stated site first: 2.6 GB).
if [ -x "$fuzz" ]; then
    (ulimit -v 1000000 && "$fuzz" "$top_srcdir/tests/desc/many-calls.desc") >"$dir/fuzz.out" 2>&1 ||
        bad "fuzz_desc on many-calls.desc: $(tail -n 3 "$dir/fuzz.out")"
fi
expect 1 "$QP" report --annotate=nosuchproc "$prof"
expect 0 "$QP" merge -o "$dir/m.qp" "$prof" "$prof"
expect 0 "$QP" report --csv "$dir/m.qp"
got=$(awk -F, '$1 == "maybe" { print $2 }' "$dir/out")
[ "$got" = 12 ] || bad "merge: maybe: $got calls, expected 12"

expect 0 "$QP" report --blocks=mid "$prof"
grep -q 'left at exit' "$dir/out" || bad "--blocks: no abandoned call block at exit"
expect 0 "$QP" report --blocks mid "$prof"
grep -q '^mid at ' "$dir/out" || bad "--blocks FUNC: $(head -n 1 "$dir/out")"
expect 0 "$QP" report --edges "$prof"
grep -q ' entry ' "$dir/out" || bad "--edges: no entry edge"
expect 0 "$QP" report --dot=mid "$prof"
grep -q '^digraph "mid"' "$dir/out" || bad "--dot: $(head -n 1 "$dir/out")"
cp "$dir/out" "$dir/full.dot"
expect 0 "$QP" report --dot=mid --min=60 "$prof"
grep -q '^  COLD \[shape=folder' "$dir/out" || bad "--dot --min: no COLD node"
[ "$(grep -c '^  b[0-9]* \[' "$dir/out")" -lt "$(grep -c '^  b[0-9]* \[' "$dir/full.dot")" ] ||
    bad "--dot --min: no block collapsed"
if command -v dot >/dev/null 2>&1; then
    dot -Tsvg "$dir/out" >/dev/null 2>"$dir/dot.err" && dot -Tsvg "$dir/full.dot" >/dev/null 2>>"$dir/dot.err" ||
        bad "--dot: Graphviz refuses it: $(head -n 2 "$dir/dot.err")"
fi
expect 0 "$QP" report --annotate=mid "$prof"
grep -q 'call.*<maybe>' "$dir/out" || bad "--annotate: no call to maybe"
grep -q 'push *%rbp' "$dir/out" || bad "--annotate: the entry's original code is not shown"
grep -Eq '^ +[0-9]+ +[0-9]+\.[0-9][0-9] +[0-9a-f]+:  ' "$dir/out" || bad "--annotate: no percentages"
grep -Eq '^ +[0-9]+:  .*[a-z]' "$dir/out" || bad "--annotate: no source lines between the instructions"
# A RIP-relative operand that addresses data (a string literal in .rodata) is named by
# its section, not as an offset into the code before it (issue 32: stderr showed as
# <sub_35988+0x15cd8>).
printf '#include <stdio.h>\nint main(void) { puts("a literal"); return 0; }\n' >"$dir/lit.c"
if gcc -O1 -o "$dir/lit" "$dir/lit.c" && "$QPT_REWRITE" "$dir/lit" -o "$dir/lit.inst" 2>/dev/null &&
    "$dir/lit.inst" >/dev/null; then
    expect 0 "$QP" report --annotate=main "$dir/lit.inst.qp"
    { grep -q 'lea .*(%rip).*<\.rodata+0x' "$dir/out" && ! grep -q 'lea .*(%rip).*<_fini' "$dir/out"; } ||
        bad "--annotate: data named after code: $(grep 'lea .*(%rip)' "$dir/out")"
else
    bad "--annotate of data: the literal program could not be built, rewritten or run"
fi
expect 0 "$QP" report --lcov -o "$dir/p.info" "$prof"
grep -q '^SF:.*p\.c$' "$dir/p.info" || bad "--lcov: no SF line"
grep -q '^FNDA:2,mid$' "$dir/p.info" || bad "--lcov: no FNDA:2,mid"
grep -q '^end_of_record$' "$dir/p.info" || bad "--lcov: no end_of_record"
# -o FILE: the data synced to disk before the rename publishes it (a crash right after
# must never leave an empty FILE); checked where strace runs.
if strace -o /dev/null true 2>/dev/null; then
    strace -f -o "$dir/st" -e trace=fsync,fdatasync,rename,renameat,renameat2 \
        "$QP" report --lcov -o "$dir/p2.info" "$prof" >/dev/null 2>&1
    grep -Eo '^[0-9]+ +(fsync|fdatasync|rename|renameat|renameat2)\(' "$dir/st" | sed 's/.* //' \
        | tr -d '(' | tr '\n' ' ' | grep -Eq '^(fsync|fdatasync) (rename|renameat|renameat2) $' \
        || bad "-o: not synced before the rename: $(grep -E 'sync|rename' "$dir/st" | tr '\n' ';')"
else
    echo "note: -o sync check skipped: no strace"
fi
# A profile that cannot be written: the line names the system's reason (errno).
QP_PROFILE=$dir/nodir/x.qp "$dir/p.qp.inst" >/dev/null 2>"$dir/err"
[ "$(sed 's|^qp: .*/nodir/|qp: nodir/|' "$dir/err")" = "qp: nodir/x.qp: cannot open or create the profile: No such file or directory; counts of this process are not saved" ] \
    || bad "unwritable profile: $(cat "$dir/err")"
QP_PROFILE=/sys/x.qp "$dir/p.qp.inst" >/dev/null 2>"$dir/err"
[ "$(cat "$dir/err")" = "qp: /sys/x.qp: cannot open or create the profile: Permission denied; counts of this process are not saved" ] \
    || bad "profile in /sys: $(cat "$dir/err")"
# A stripped program has no line information: refused, -o FILE not written (an empty
# tracefile would read as "nothing covered").
strip -o "$dir/ps" "$dir/p" && "$QPT_REWRITE" "$dir/ps" -o "$dir/ps.inst" 2>/dev/null \
    && { "$dir/ps.inst" >/dev/null; true; } || bad "stripped p: not rewritten"
rm -f "$dir/ps.info"
expect 1 "$QP" report --lcov -o "$dir/ps.info" "$dir/ps.inst.qp"
[ "$(sed 's|^qp: .*/ps\.inst: |qp: ps.inst: |' "$dir/err")" = "qp: ps.inst: no line information for the measured code (build it with -g, unstripped): no tracefile written" ] \
    || bad "--lcov, stripped: $(cat "$dir/err")"
[ -e "$dir/ps.info" ] && bad "--lcov, stripped: $dir/ps.info written"

if [ "$fail" -eq 0 ]; then
    echo "qp-cli: PASS"
    exit 0
fi
exit 1
