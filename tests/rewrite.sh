#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Differential test of the exec editor: every corpus binary (built and run by corpus.sh,
# which records BIN.out, BIN.err and BIN.status) is rewritten with --driver=none, and the
# rewritten program must print the same stdout and stderr and exit with the same status.
# A second pass rewrites in "stretch" mode (a nop after every relocated instruction), so
# that hidden layout assumptions fail loudly. A refusal must be one line on stderr.
# Environment: QP_JOBS, QP_RUN_TIMEOUT (seconds, default 60), QP_REWRITE_STRETCH=0 to skip
# the stretch pass.
set -u

. "${top_srcdir:-.}/tests/lib.sh"
QP_RUN_TIMEOUT=${QP_RUN_TIMEOUT:-60}
export LC_ALL=C

# One binary: prints "ok BIN", "refused BIN WHY" or "fail BIN WHY".
check_one() {
    local bin=$1 mode=$2 inst st line f
    [ "$mode" = . ] && mode=
    inst=$bin.inst$mode
    case $mode in
    .stretch) QPT_STRETCH=1 "$QPT_REWRITE" --driver=none "$bin" -o "$inst" 2>"$inst.log" >/dev/null ;;
    .qp) rm -f "$inst.qp" # with the targets of indirect calls too: the most code added
        "$QPT_REWRITE" --driver=qp --call-targets "$bin" -o "$inst" 2>"$inst.log" >/dev/null ;;
    .naive) rm -f "$inst.qp"
        "$QPT_REWRITE" --driver=naive "$bin" -o "$inst" 2>"$inst.log" >/dev/null ;;
    *) "$QPT_REWRITE" --driver=none "$bin" -o "$inst" 2>"$inst.log" >/dev/null ;;
    esac
    st=$?
    if [ "$st" -ne 0 ]; then
        if [ "$st" -ge 128 ]; then
            echo "fail $bin qpt-rewrite killed by signal $((st - 128))"
        elif [ "$(grep -vc ': driver ' "$inst.log")" -ne 1 ]; then
            echo "fail $bin qpt-rewrite exit $st without one clear line"
        else
            read -r line <"$inst.log"
            echo "refused $bin $line"
        fi
        return
    fi
    (cd "${bin%/*}" && timeout "$QP_RUN_TIMEOUT" "$inst" </dev/null >"$inst.out" 2>"$inst.err"
        echo $? >"$inst.status")
    for f in out err status; do
        if ! cmp -s "$bin.$f" "$inst.$f"; then
            echo "fail $bin $f differs (status $(cat "$bin.status") -> $(cat "$inst.status")): diff $bin.$f $inst.$f"
            return
        fi
    done
    echo "ok $bin"
}

if [ "${1:-}" = "--one" ]; then
    mode=$2
    shift 2
    for b in "$@"; do
        check_one "$b" "$mode"
    done
    exit 0
fi

dir=$top_builddir/tests/corpus.d
if [ ! -s "$dir/MANIFEST" ]; then
    echo "rewrite.sh: SKIP: no corpus (tests/corpus.sh builds it)"
    exit 77
fi
dir=$(cd "$dir" && pwd)
# Modes: the null rewrite, stretch, and the two measuring drivers (the instrumented
# programs must behave exactly like the originals too).
modes=""
[ "${QP_REWRITE_STRETCH:-1}" = 0 ] || modes=".stretch"
modes="$modes ${QP_REWRITE_DRIVERS:-.qp .naive}"
nfail=0
for mode in "" $modes; do
    results=$dir/.rewrite$mode
    # Only binaries whose original run was recorded.
    while read -r b; do [ -f "$b.status" ] && echo "$b"; done <"$dir/MANIFEST" |
        xargs -P "$QP_JOBS" -n 4 bash "$0" --one "${mode:-.}" >"$results"
    total=$(wc -l <"$results")
    nok=$(grep -c '^ok ' "$results")
    nref=$(grep -c '^refused ' "$results")
    nf=$(grep -c '^fail ' "$results")
    echo "rewrite${mode:- (null rewrite)}: $total binaries: $nok identical, $nref refused, $nf failed"
    grep '^refused ' "$results" | sed "s|$dir/||" | sort | head -n 20 | sed 's/^/  /'
    grep '^fail ' "$results" | sed "s|$dir/||" | sort | sed 's/^/  /'
    nfail=$((nfail + nf))
done
[ "$nfail" -eq 0 ]
