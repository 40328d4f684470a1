#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Unwind data that disagrees with itself or with the code (issue 28, section 3): mutants
# of a g++ -O2 program that throws across frames (tests/progs/exceptions.cc), made by
# tests/unwind-mutants.py, that still run natively with the program's output: an FDE's
# pc_begin off by one, an .eh_frame_hdr start off by one, an FDE range past its section
# or over the next FDE, a DW_CFA_advance_loc or an LSDA call-site start moved inside an
# instruction, a landing pad a byte later (that one need only behave alike: see the
# generator). Each is rewritten with --driver=none and with qp (bench/mutate.sh
# --unwind): the rewritten program must behave as the mutant does, and the procedure of
# a defective FDE must be left in place with a note naming the unwind defect (or the
# input refused in one line). Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u

# shellcheck source=tests/lib.sh
. "${top_srcdir:-.}/tests/lib.sh"

qp_have g++ || { echo "SKIP: no g++"; exit 77; }
qp_have python3 && qp_have objdump || { echo "SKIP: no python3 or objdump"; exit 77; }
D=$top_builddir/tests/unwind-mutants.d
rm -rf "$D"
mkdir -p "$D" || exit 99
D=$(cd "$D" && pwd)
g++ -O2 -o "$D/exceptions" "$top_srcdir/tests/progs/exceptions.cc" || exit 99
MUTATE_DIR=$D bash "$top_srcdir/bench/mutate.sh" --unwind \
    "$top_builddir/tools/qpt-rewrite" "$D/exceptions" >"$D/out" 2>&1
st=$?
cat "$D/out"
# The premise: every class made mutants that run natively.
for cls in pcbegin hdrloc range overlap advance csstart; do
    n=$(awk -v c="$cls" '$1 == c { print $2 }' "$D/out")
    [ "${n:-0}" -gt 0 ] || { echo "FAIL no $cls mutant ran natively"; st=1; }
done
[ "$st" -eq 0 ] || exit 1
rm -rf "$D"
exit 0
