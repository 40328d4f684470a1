#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Indirect jumps of unknown targets translated at run time (issue 13): tests/xlate/tails.c
# built with gcc and clang -O2, PIE and not, rewritten with --driver=none and qp. The
# rewrite says it translated jumps; the output is the original's; tail calls through
# pointers count exactly (the translated jump lands on the callee's new entry); a jump into
# the middle of another procedure runs the original code there, and the procedure that
# made it is marked approximate (~), while the others stay exact; a label whose address
# the program holds gets a redirect and is counted (interior entry); calls into a
# procedure left in place (QPT_LEAVE) are counted in the report's summary.
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
QP=${QP:-$top_builddir/tools/qp}
dir=$top_builddir/tests/xlate.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
fails=0
qp_have gcc || { echo "SKIP: gcc not installed"; exit 77; }
src=$top_srcdir/tests/xlate/tails.c

# row CSV NAME CALLS FLAGS
row() {
    local got
    got=$(awk -F, -v n="$3" '$1 == n { print $2 "," $4 }' "$2")
    if [ "$got" = "$4,$5" ]; then ok "$1: $3 called $4 times${5:+, marked $5}"; else bad "$1: $3: '$got', expected '$4,$5'"; fi
}

for v in "gcc -O2 -fPIE -pie" "gcc -O2 -fno-pie -no-pie" "clang -O2 -fPIE -pie"; do
    cc=${v%% *}
    qp_have "$cc" || continue
    tag=$(echo "$v" | tr -d ' -')
    exe=$dir/$tag
    # shellcheck disable=SC2086
    $v -g -o "$exe" "$src" || exit 99
    want=$("$exe")
    for drv in none qp; do
        out=$exe.$drv
        if ! "$QPT_REWRITE" --driver=$drv "$exe" -o "$out" >"$out.log" 2>&1; then
            bad "$v $drv: rewrite: $(tail -n 1 "$out.log")"
            continue
        fi
        n=$(sed -n 's/.* \([0-9]*\) jumps of unknown targets translated at run time.*/\1/p' "$out.log")
        [ "${n:-0}" -ge 2 ] && ok "$v $drv: $n jumps translated" || bad "$v $drv: ${n:-no} jumps translated: $(head -n 1 "$out.log")"
        grep -q "left in place: \(apply\|jumper\) " "$out.log" && bad "$v $drv: apply or jumper left in place"
        [ "$("$out")" = "$want" ] && ok "$v $drv: same output" || bad "$v $drv: output differs"
    done
    "$QP" report --csv "$exe.qp.qp" >"$exe.csv" 2>&1
    row "$v" "$exe.csv" apply 1000 ""
    row "$v" "$exe.csv" add 333 ""
    row "$v" "$exe.csv" mul 334 ""
    row "$v" "$exe.csv" sub 333 ""
    row "$v" "$exe.csv" twoentry 104 ""
    row "$v" "$exe.csv" jumper 107 "~"
    # twoentry_inner: main holds its address; its redirect runs the new, measured code.
    # 2 runs through the je, 3 through the pointer.
    got=$("$QP" report --annotate twoentry "$exe.qp.qp" 2>&1 | awk '/mov +\$0x2,%eax/ { print $1 }')
    [ "$got" = 5 ] && ok "$v: twoentry_inner's block ran 5 times" ||
        bad "$v: twoentry_inner's block: '$got' runs, expected 5"
    # The trace regenerates the naive trace (an interior entry writes a record).
    for drv in trace trace-naive; do
        "$QPT_REWRITE" --driver=$drv "$exe" -o "$exe.$drv" >/dev/null 2>&1 && "$exe.$drv" >/dev/null &&
            "$QP" trace blocks "$exe.$drv" 2>/dev/null | grep -v '^# thread ' >"$exe.$drv.blocks" ||
            bad "$v: $drv failed"
    done
    # Not vacuous: both list twoentry_inner's block exactly 5 times, as it ran.
    inner=$(nm "$exe" | awk '$3 == "twoentry_inner" { print $1 }' | sed 's/^0*/0x/')
    nn=$(grep -cx "$inner" "$exe.trace-naive.blocks")
    if [ -n "$inner" ] && [ "$nn" = 5 ] && cmp -s "$exe.trace.blocks" "$exe.trace-naive.blocks"; then
        ok "$v: trace equals the naive trace ($(wc -l <"$exe.trace.blocks") blocks, twoentry_inner 5 times)"
    else
        bad "$v: trace differs from the naive trace, or twoentry_inner ($inner) is listed $nn times, not 5"
    fi
    # A procedure left in place: the report says how often measured code went into it.
    if [ "$tag" = gccO2fPIEpie ]; then
        QPT_LEAVE=apply "$QPT_REWRITE" "$exe" -o "$exe.left" >/dev/null 2>&1 && "$exe.left" >/dev/null
        "$QP" report "$exe.left.qp" 2>&1 | grep -q "1 procedures not measured, called 1000 times from measured code" &&
            ok "$v: calls into a procedure left in place counted (1000)" ||
            bad "$v: $("$QP" report "$exe.left.qp" 2>&1 | sed -n 3p)"
    fi
done

# An interpreter whose handlers are reached only by `jmp *(base + 32 * op)` (strides.c):
# the procedure's unreached bytes are swept into blocks, entered through redirects, so
# its handlers are measured: each handler's count is the program's own opcode count and
# run's instructions equal callgrind's (before: 100 instructions, the loop unmeasured).
# tabled's bytes that it reads as data (and that decode as code) keep their value: the
# output is the original's.
for pie in -fPIE -no-pie; do
    exe=$dir/strides$pie
    gcc -O2 -g $pie -o "$exe" "$top_srcdir/tests/xlate/strides.c" || exit 99
    want=$("$exe")
    rm -f "$exe.qp.qp"
    if ! "$QPT_REWRITE" "$exe" -o "$exe.qp" >"$exe.log" 2>&1 || [ "$("$exe.qp")" != "$want" ]; then
        bad "strides $pie: rewrite or output: $(tail -n 1 "$exe.log")"
        continue
    fi
    got=$("$QP" report --annotate run "$exe.qp.qp" 2>/dev/null |
        awk '/add +\$0x1,%rax/ || /add +%rax,%rax/ || /sub +\$0x3,%rax/ || /imul +\$0x3,%rax,%rax/ { printf "%s ", $1 }')
    truth=$(echo "$want" | head -n 1 | cut -d' ' -f2-)
    [ "$got" = "$truth " ] && ok "strides $pie: handlers ran $truth times, as the program counted" ||
        bad "strides $pie: handlers '$got', expected '$truth'"
    if qp_have valgrind && qp_have callgrind_annotate; then
        valgrind --tool=callgrind --callgrind-out-file="$exe.cg" "$exe" >/dev/null 2>&1
        cg=$(callgrind_annotate "$exe.cg" 2>/dev/null | awk '/:run / { gsub(",", "", $1); print $1; exit }')
        qp=$("$QP" report --csv "$exe.qp.qp" 2>/dev/null | awk -F, '$1 == "run" { print $3 }')
        [ -n "$cg" ] && [ "$qp" = "$cg" ] && ok "strides $pie: run's instructions $qp, callgrind's $cg" ||
            bad "strides $pie: run's instructions '$qp', callgrind's '$cg'"
    fi
done
# A redirect over a place where the old code is entered (chromium 156's renderer crashed
# so): a block that the translated jump may reach (covered.c: a miss runs the old code),
# an address the program holds inside a block (heldmid.c). The old code there must not be
# a redirect's middle: the procedure stays in place, and says why; the output is the
# original's.
for v in "gcc -O2 -fPIE -pie" "gcc -O2 -fno-pie -no-pie"; do
    for t in covered:dispatch heldmid:f; do
        name=${t%%:*} proc=${t##*:}
        exe=$dir/$name$(echo "$v" | tr -d ' -')
        # shellcheck disable=SC2086
        $v -o "$exe" "$top_srcdir/tests/xlate/$name.c" || exit 99
        want=$("$exe")
        for drv in none qp; do
            if ! "$QPT_REWRITE" -v --driver=$drv "$exe" -o "$exe.$drv" >"$exe.$drv.log" 2>&1; then
                bad "$name $v $drv: rewrite: $(tail -n 1 "$exe.$drv.log")"
                continue
            fi
            [ "$("$exe.$drv" 2>&1)" = "$want" ] && ok "$name $v $drv: same output ($want)" ||
                bad "$name $v $drv: output differs from '$want'"
            grep -q "left in place: $proc .*a redirect would cover" "$exe.$drv.log" &&
                ok "$name $v $drv: $proc left in place, the reason said" ||
                bad "$name $v $drv: $proc not left in place for the place its redirect covers"
        done
    done
done
[ "$fails" -eq 0 ]
