#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Build the test corpus (tests/progs in every compiler/flag/linkage variant) into
# $top_builddir/tests/corpus.d and check, for every binary:
#   - `qpt-rewrite --dump-cfg BIN` exits 0 and prints exactly one line
#     "coverage: NN.NN% of text bytes", with NN.NN >= QP_MIN_COVERAGE (default 99.0;
#     not for data_in_text, whose .text holds data on purpose);
#   - the original program is deterministic: two runs give the same stdout, stderr and
#     status, and it does not die from a signal or time out. The first run is kept as
#     BIN.out, BIN.err and BIN.status for the differential tests.
# Environment: QP_MIN_COVERAGE, QP_JOBS, QP_CFG_TIMEOUT (seconds per dump, default 300).
# Exit status: 0 pass, 1 fail, 77 skip (no C compiler), 99 hard error.
set -u

# shellcheck source=tests/lib.sh
. "${top_srcdir:-.}/tests/lib.sh"

QP_MIN_COVERAGE=${QP_MIN_COVERAGE:-99.0}
QP_CFG_TIMEOUT=${QP_CFG_TIMEOUT:-300}
QP_RUN_TIMEOUT=${QP_RUN_TIMEOUT:-60}
export LC_ALL=C

# One binary (run in parallel through xargs): writes BIN.cfg, BIN.cfgerr, BIN.out,
# BIN.err, BIN.status and prints result lines: "cov BIN NN.NN" when a coverage was
# read, then "ok BIN" or one or more "fail BIN REASON".
check_one() {
    local bin=$1 st n=0 cov='' line r1 ok=1 f min=$QP_MIN_COV100
    # Its .text holds data on purpose (tests/progs/data_in_text.c): bytes not code.
    case ${bin##*/} in data_in_text.*) min=0 ;; esac
    timeout "$QP_CFG_TIMEOUT" "$QPT_REWRITE" --dump-cfg "$bin" >"$bin.cfg" 2>"$bin.cfgerr"
    st=$?
    if [ "$st" -eq 124 ]; then
        echo "fail $bin dump-cfg timed out after ${QP_CFG_TIMEOUT}s"
        ok=0
    elif [ "$st" -ge 128 ]; then
        echo "fail $bin dump-cfg killed by signal $((st - 128))"
        ok=0
    elif [ "$st" -ne 0 ]; then
        read -r line <"$bin.cfgerr"
        echo "fail $bin dump-cfg exit $st: $line"
        ok=0
    fi
    # Shell builtins only: forks are the cost here.
    while IFS= read -r line; do
        case $line in
        coverage:*)
            n=$((n + 1))
            if [[ $line =~ ^coverage:\ ([0-9]+\.[0-9][0-9])%\ of\ text\ bytes$ ]]; then
                cov=${BASH_REMATCH[1]}
            fi
            ;;
        esac
    done <"$bin.cfg"
    if [ "$ok" = 1 ]; then
        if [ "$n" -ne 1 ] || [ -z "$cov" ]; then
            echo "fail $bin expected one line 'coverage: NN.NN% of text bytes', found $n" \
                "coverage lines ($(grep -m 2 '^coverage' "$bin.cfg" | tr '\n' '|'))"
            ok=0
        elif [ "$((10#${cov/./}))" -lt "$min" ]; then
            echo "fail $bin coverage $cov% below $QP_MIN_COVERAGE%"
            ok=0
        fi
    fi
    [ -z "$cov" ] || echo "cov $bin $cov"
    # A call the compiler ends a procedure with, to a procedure that may return: its
    # callers stay measurable (the analysis gives the call its way on).
    case ${bin##*/} in errors.*)
        if "$QPT_REWRITE" --dump-cfg=text "$bin" 2>/dev/null | grep -q 'assumed never to return'; then
            echo "fail $bin a caller of a procedure that may return was left unsafe"
            ok=0
        fi ;;
    esac

    # The original program, twice, from the corpus directory with no input: the first
    # run is kept for the differential tests, the second one is compared with it.
    (cd "${bin%/*}" && timeout "$QP_RUN_TIMEOUT" "$bin" </dev/null >"$bin.out" 2>"$bin.err"
        echo $? >"$bin.status")
    (cd "${bin%/*}" && timeout "$QP_RUN_TIMEOUT" "$bin" </dev/null >"$bin.run2.out" 2>"$bin.run2.err"
        echo $? >"$bin.run2.status")
    read -r r1 <"$bin.status"
    if [ "$r1" -eq 124 ] || [ "$r1" -ge 128 ]; then
        read -r line <"$bin.err"
        echo "fail $bin the original program died (status $r1): $line"
        ok=0
    fi
    for f in out err status; do
        if ! cmp -s "$bin.$f" "$bin.run2.$f"; then
            echo "fail $bin the original program is not deterministic: $f differs between runs"
            ok=0
        fi
    done
    rm -f "$bin.run2.out" "$bin.run2.err" "$bin.run2.status"
    [ "$ok" = 0 ] || echo "ok $bin"
}

# The threshold in hundredths of a percent, for integer comparison.
QP_MIN_COV100=$(awk -v m="$QP_MIN_COVERAGE" 'BEGIN { printf "%d", m * 100 + 0.5 }')

if [ "${1:-}" = "--one" ]; then
    shift
    for b in "$@"; do
        check_one "$b"
    done
    exit 0
fi

if ! qp_have gcc && ! qp_have clang; then
    echo "corpus.sh: SKIP: no C compiler (gcc or clang)"
    exit 77
fi
if [ ! -x "$QPT_REWRITE" ]; then
    echo "corpus.sh: ERROR: $QPT_REWRITE not found (build it first)"
    exit 99
fi
for t in timeout xargs awk cmp; do
    qp_have "$t" || { echo "corpus.sh: ERROR: $t not found"; exit 99; }
done

mkdir -p "$top_builddir/tests/corpus.d" || exit 99
dir=$(cd "$top_builddir/tests/corpus.d" && pwd)
build_corpus "$dir" || { echo "corpus.sh: ERROR: no binary could be built"; exit 99; }
if [ -s "$dir/FAILED" ]; then
    echo "variants that failed to build (logs in BIN.failed):"
    while read -r b; do
        echo "  ${b##*/}: $(qp_fail_reason "$b")"
    done <"$dir/FAILED"
fi

results=$dir/.check
start=$(date +%s)
xargs -P "$QP_JOBS" -n 4 bash "$0" --one <"$dir/MANIFEST" >"$results"
end=$(date +%s)

total=$(wc -l <"$dir/MANIFEST")
nok=$(grep -c '^ok ' "$results")
nfail=$(awk '$1 == "fail" { print $2 }' "$results" | sort -u | wc -l)

echo "worst coverages:"
awk '$1 == "cov" { print $3, $2 }' "$results" | sort -n | head -n 5 |
    while read -r c b; do echo "  $c% ${b##*/}"; done
awk '$1 == "cov" { s += $3; n++ } END {
    if (n) printf "mean coverage: %.2f%% over %d binaries\n", s / n, n }' "$results"

if [ "$nfail" -gt 0 ]; then
    echo "FAILURES (binaries in $dir; reproduce with: $QPT_REWRITE --dump-cfg BIN):"
    grep '^fail ' "$results" | sort | sed "s|^fail $dir/|  |"
fi
echo "corpus.sh: $total binaries checked in $((end - start)) s (threshold $QP_MIN_COVERAGE%)"
echo "corpus: $nok passed, $nfail failed"
[ "$nfail" -eq 0 ]
