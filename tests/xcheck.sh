#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Cross-check arch/ (Zydis) against libopcodes on real code: tests/xcheck_opcodes walks
# the CFG blocks of each input and compares every instruction's length, control-flow
# class, direct target and rip-relative address with libopcodes' reading.
# Inputs: up to QP_XCHECK_MAX (default 40) binaries of the test corpus
# ($top_builddir/tests/corpus.d, built by tests/corpus.sh; used when present), spread
# over its variants, plus /usr/bin/ls, /usr/bin/bash and GCC's cc1 when they exist.
# Exit status: 0 pass, 1 a mismatch, 77 skip (no input exists), 99 hard error.

: "${top_srcdir:=.}"
: "${top_builddir:=.}"
XCHECK=$top_builddir/tests/xcheck_opcodes
QP_XCHECK_MAX=${QP_XCHECK_MAX:-40}
QP_XCHECK_TIMEOUT=${QP_XCHECK_TIMEOUT:-600}
export LC_ALL=C

if [ ! -x "$XCHECK" ]; then
    echo "xcheck: $XCHECK is not built" >&2
    exit 99
fi

# The corpus: one binary from each run of k lines of its MANIFEST (sorted by program,
# then variant), taking the next variant in each run, so that the sample covers every
# program and rotates through compilers, optimisation levels and linkages.
corpus=$top_builddir/tests/corpus.d
set --
if [ -f "$corpus/MANIFEST" ]; then
    n=$(grep -c . "$corpus/MANIFEST")
    step=$(( (n + QP_XCHECK_MAX - 1) / QP_XCHECK_MAX ))
    [ "$step" -ge 1 ] || step=1
    for f in $(awk -v s="$step" 'NF && (NR - 1) % s == int((NR - 1) / s) % s' \
        "$corpus/MANIFEST"); do
        [ -f "$f" ] && set -- "$@" "$f"
    done
    echo "xcheck: $# of $n corpus binaries"
else
    echo "xcheck: no corpus in $corpus (tests/corpus.sh builds it); system binaries only"
fi
for f in /usr/bin/ls /usr/bin/bash /usr/lib/gcc/x86_64-linux-gnu/12/cc1; do
    [ -f "$f" ] && set -- "$@" "$f"
done
if [ $# -eq 0 ]; then
    echo "xcheck: SKIP: no input binaries"
    exit 77
fi

if command -v timeout >/dev/null 2>&1; then
    timeout "$QP_XCHECK_TIMEOUT" "$XCHECK" "$@"
else
    "$XCHECK" "$@"
fi
st=$?
case $st in
0)
    echo "xcheck: PASS: $# files, no mismatches"
    exit 0
    ;;
1)
    echo "xcheck: FAIL: arch/ and libopcodes disagree (mismatches listed above)"
    exit 1
    ;;
124)
    echo "xcheck: ERROR: timed out after ${QP_XCHECK_TIMEOUT}s"
    exit 99
    ;;
*)
    echo "xcheck: ERROR: xcheck_opcodes exited with status $st"
    exit 99
    ;;
esac
