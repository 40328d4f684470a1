#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Damaged trace descriptions and trace files (tests/trace/damage.py): a program rewritten
# with --driver=trace --trace-mem whose .qpt.trace section is damaged one way at a time
# (a wrong magic, version or kind; cut short in each part; an index out of range in the
# procedures, blocks, edges, events, instructions, new code slots, address accesses and
# the list of code not traced), and trace files damaged one way at a time (a short
# header, a wrong magic, another program's id, a record naming no event, a file ending
# in the middle of a word or of a signal record, a repeat count first): qp trace refuses
# each with one line naming the damage and exit status 1 - never a crash. Then 200 trace
# files of random records (fixed seed) through qp trace blocks, insns, mem and stats:
# each read (marks where the walk cannot follow) or refused in one line, never a crash
# or a hang.
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
QP=${QP:-$top_builddir/tools/qp}
qp_have gcc && qp_have python3 || exit 77
dir=$top_builddir/tests/trace-bad.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
fails=0
T=$top_srcdir/tests/trace

gcc -O2 -o "$dir/calls" "$T/calls.c" 2>"$dir/build.log" || { echo "calls.c does not build"; exit 99; }
"$QPT_REWRITE" --driver=trace --trace-mem "$dir/calls" -o "$dir/calls.t" >/dev/null 2>&1 ||
    { echo "qpt-rewrite --driver=trace --trace-mem failed"; exit 99; }
(cd "$dir" && ./calls.t >/dev/null) || { echo "calls.t does not run"; exit 99; }
trace=$(ls "$dir"/calls.t.trace.* | head -n 1)
"$QP" trace blocks "$dir/calls.t" "$trace" >/dev/null 2>&1 || { echo "qp trace does not read the good trace"; exit 99; }
nevents=$(python3 -c 'import struct, sys
d = open(sys.argv[1], "rb").read()
print(struct.unpack_from("<I", d, d.find(b"QPTTRDS1") + 36)[0])' "$dir/calls.t")

# refused CMD EXPECT NAME: CMD must exit 1 with one line on stderr containing EXPECT.
refused() {
    $1 >/dev/null 2>"$dir/err"
    rc=$?
    lines=$(wc -l <"$dir/err")
    if [ $rc -eq 1 ] && [ "$lines" -eq 1 ] && grep -q -F -- "$2" "$dir/err"; then
        ok "$3: refused: $(sed 's/^qp: [^:]*: //' "$dir/err")"
    else
        bad "$3: exit $rc, $lines lines, not '$2': $(head -n 2 "$dir/err" | tr '\n' ' ')"
    fi
}

python3 "$T/damage.py" desc "$dir/calls.t" "$dir/desc" >"$dir/desc.list" || exit 99
tab=$(printf '\t')
while IFS="$tab" read -r name expect; do
    refused "$QP trace blocks $dir/desc/$name $trace" "$expect" "description $name"
    refused "$QP trace mem $dir/desc/$name $trace" "$expect" "description $name (mem)"
done <"$dir/desc.list"
[ "$(wc -l <"$dir/desc.list")" -ge 20 ] || bad "only $(wc -l <"$dir/desc.list") damaged descriptions"

python3 "$T/damage.py" trace "$trace" "$nevents" "$dir/tr" >"$dir/tr.list" || exit 99
while IFS="$tab" read -r name expect; do
    refused "$QP trace blocks $dir/calls.t $dir/tr/$name" "$expect" "trace file $name"
    refused "$QP trace stats $dir/calls.t $dir/tr/$name" "$expect" "trace file $name (stats)"
done <"$dir/tr.list"

# Random records: read or refused, never a crash (status >= 2) or a hang.
python3 "$T/damage.py" fuzz "$trace" "$nevents" 200 "$dir/fz" >"$dir/fz.list" || exit 99
read_ok=0 refused_n=0 crash=0
while read -r name; do
    for m in blocks insns mem stats; do
        timeout 20 "$QP" trace $m "$dir/calls.t" "$dir/fz/$name" >/dev/null 2>"$dir/err"
        rc=$?
        if [ $rc -eq 0 ]; then
            read_ok=$((read_ok + 1))
        elif [ $rc -eq 1 ] && [ "$(wc -l <"$dir/err")" -eq 1 ]; then
            refused_n=$((refused_n + 1))
        else
            crash=$((crash + 1))
            [ $crash -le 3 ] && bad "random records $name ($m): exit $rc: $(head -n 1 "$dir/err")"
        fi
    done
done <"$dir/fz.list"
[ $crash -eq 0 ] && ok "random records: 200 files x 4 commands: $read_ok read, $refused_n refused, no crash" ||
    bad "random records: $crash crashes, hangs or unclear refusals"

[ $fails -eq 0 ] || exit 1
exit 0
