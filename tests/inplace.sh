#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# In-place measurement (editor/ed_inplace.c): procedures left in place are patched where
# they are and counted exactly. tests/qp/truth.c (calls fixed by construction,
# tests/qp/truth.expect) is built -O0 and -O2, PIE and static (glibc in place too), and
# rewritten with QPT_LEAVE_ALL (every procedure in place) and with QPT_LEAVE naming a few
# (the others move), with --driver=qp and --driver=naive, run normally and through exit()
# three frames below main:
#  - output and exit status equal the original's;
#  - the summary says procedures were measured in place;
#  - `qp report --csv` gives exactly the expected calls, and the same calls and
#    instructions for the procedures of truth.c as a naive rewrite that moves them;
#  - qp and naive agree on every procedure of truth.c, and no flow is violated.
# And --driver=none with every procedure in place changes no behaviour.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
norand=
setarch "$(uname -m)" -R true 2>/dev/null && norand="setarch $(uname -m) -R"
QP=${QP:-$top_builddir/tools/qp}
qp_have gcc || { echo "inplace.sh: SKIP: no gcc"; exit 77; }
dir=$top_builddir/tests/inplace.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
src=$top_srcdir/tests/qp/truth.c
fail=0

bad() {
    echo "FAIL $*"
    fail=1
}

names=$(grep -v '^#' "$top_srcdir/tests/qp/truth.expect" | awk '{ print $1 }')

# expect_calls CSV OPT RUN: the calls of the listed procedures, as qp-truth.sh.
expect_calls() {
    csv=$1 opt=$2 run=$3
    {
        grep -v '^#' "$top_srcdir/tests/qp/truth.expect"
        if [ "$opt" = O0 ]; then echo "countdown 105"; else echo "countdown 5"; fi
        if [ "$run" = exit ]; then printf 'depth1 1\ndepth2 1\ndepth3 1\n'; fi
    } | while read -r name calls; do
        [ -n "$name" ] || continue
        got=$(awk -F, -v n="$name" '$1 == n { print $2 }' "$csv")
        [ "$got" = "$calls" ] || echo "$name: $got calls, expected $calls"
    done
}

# truth_rows CSV: the rows of truth.c's procedures (name, calls, instructions).
truth_rows() {
    for n in $names countdown depth1 depth2 depth3; do
        awk -F, -v n="$n" '$1 == n { print $1 "," $2 "," $3 }' "$1"
    done
}

# run_one INST RUN: run INST as the original was run; 0 when output and status match.
run_one() {
    inst=$1 run=$2 arg=
    [ "$run" = exit ] && arg=exit
    rm -f "$inst.$run.qp"
    QP_PROFILE=$inst.$run.qp $norand "$inst" $arg >"$inst.$run.out" 2>&1
    echo $? >"$inst.$run.status"
    cmp -s "$prog.$run.out" "$inst.$run.out" && cmp -s "$prog.$run.status" "$inst.$run.status"
}

for opt in O0 O2; do
    for link in "pie:-fPIE -pie" "static:-static"; do
        name=${link%%:*} flags=${link#*:}
        prog=$dir/truth-$opt-$name
        # shellcheck disable=SC2086
        gcc -$opt -g $flags -o "$prog" "$src" 2>"$prog.cc.log" || {
            echo "skip $opt $name: cannot build ($(head -n 1 "$prog.cc.log"))"
            continue
        }
        for run in main exit; do
            arg=
            [ "$run" = exit ] && arg=exit
            $norand "$prog" $arg >"$prog.$run.out" 2>&1
            echo $? >"$prog.$run.status"
        done
        # The reference: a naive rewrite that moves what it can.
        ref=$dir/m/${prog##*/}
        mkdir -p "$dir/m"
        "$QPT_REWRITE" --driver=naive "$prog" -o "$ref" 2>"$ref.log" || {
            bad "$opt $name: reference rewrite: $(head -n 1 "$ref.log")"
            continue
        }
        for run in main exit; do
            run_one "$ref" $run || bad "$opt $name reference $run: output or status differs"
            "$QP" report --csv "$ref.$run.qp" >"$ref.$run.csv" 2>/dev/null
            truth_rows "$ref.$run.csv" >"$ref.$run.rows"
        done
        for how in all some; do
            for drv in qp naive none; do
                sub=$dir/$how-$(echo "$drv" | cut -c1-2)
                mkdir -p "$sub"
                inst=$sub/${prog##*/}
                if [ $how = all ]; then
                    QPT_LEAVE_ALL=1 "$QPT_REWRITE" --driver=$drv "$prog" -o "$inst" 2>"$inst.log"
                else
                    QPT_LEAVE=fib,dispatch,op_a,thirds,main "$QPT_REWRITE" --driver=$drv \
                        "$prog" -o "$inst" 2>"$inst.log"
                fi || {
                    bad "$opt $name $how $drv: qpt-rewrite: $(head -n 1 "$inst.log")"
                    continue
                }
                if [ $drv = none ]; then
                    for run in main exit; do
                        run_one "$inst" $run || bad "$opt $name $how none $run: output or status differs"
                    done
                    continue
                fi
                nin=$(sed -n 's/.*in place: \([0-9]*\) procedures measured where they are.*/\1/p' "$inst.log")
                [ "${nin:-0}" -gt 0 ] || { bad "$opt $name $how $drv: nothing measured in place"; continue; }
                for run in main exit; do
                    run_one "$inst" $run || { bad "$opt $name $how $drv $run: output or status differs"; continue; }
                    "$QP" report --csv "$inst.$run.qp" >"$inst.$run.csv" 2>"$inst.$run.err" || {
                        bad "$opt $name $how $drv $run: qp report: $(head -n 1 "$inst.$run.err")"
                        continue
                    }
                    "$QP" report "$inst.$run.qp" >"$inst.$run.report" 2>&1
                    grep -qi 'violation' "$inst.$run.report" && bad "$opt $name $how $drv $run: flow conservation violated"
                    wrong=$(expect_calls "$inst.$run.csv" "$opt" "$run")
                    [ -z "$wrong" ] || { bad "$opt $name $how $drv $run: wrong calls:"; echo "$wrong" | sed 's/^/  /'; }
                    truth_rows "$inst.$run.csv" >"$inst.$run.rows"
                    if cmp -s "$ref.$run.rows" "$inst.$run.rows"; then
                        echo "ok $opt $name $how $drv $run: $nin procedures in place; calls and instructions as moved code's"
                    else
                        bad "$opt $name $how $drv $run: counts differ from moved code's:"
                        diff "$ref.$run.rows" "$inst.$run.rows" | head -n 6 | sed 's/^/  /'
                    fi
                done
            done
        done
    done
done
exit $fail
