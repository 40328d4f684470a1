#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Procedures left without returning, on tests/progs/errors.c (an error reporter that
# returns for notices and longjmps or exits for errors, called where the compiler put
# nothing after the call): every procedure is measured (none refused because "a call
# assumed never to return goes to a procedure that returns"); the rewritten program
# prints and exits as the original does; and every count that longjmps can make wrong is
# either exact or marked '~': check() is entered 37 times, twice left by a longjmp;
# main, left at exit(), is called once and balances (its abandoned flow is read). And
# a profile read while its program runs, or after a kill -9, says so in a warning line;
# exec is accounted like exit (tests/qp/exec.c); frames left by a callback's exception
# are marked '~' (tests/progs/eh_asm.cc).
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
QP=${QP:-$top_builddir/tools/qp}
dir=$top_builddir/tests/qp-leave.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
dir=$(cd "$dir" && pwd)
fails=0
for v in "gcc -O0" "gcc -O2" "clang -O0" "clang -O2"; do
    cc=${v% *}
    qp_have "$cc" || continue
    exe=$dir/$(echo "$v" | tr -d ' -')
    $v -o "$exe" "$top_srcdir/tests/progs/errors.c" || exit 99
    "$QPT_REWRITE" --dump-cfg=text "$exe" | grep -q 'assumed never to return' &&
        bad "$v: a caller left unsafe"
    "$exe" >"$exe.out1" 2>&1
    st1=$?
    "$QPT_REWRITE" "$exe" -o "$exe.inst" >/dev/null 2>&1 || { bad "$v: rewrite failed"; continue; }
    "$exe.inst" >"$exe.out2" 2>&1
    st2=$?
    [ $st1 -eq $st2 ] && cmp -s "$exe.out1" "$exe.out2" && ok "$v: same output, exit $st1" ||
        bad "$v: exit $st1/$st2, $(diff "$exe.out1" "$exe.out2" | head -n 3)"
    "$QP" report --csv "$exe.inst.qp" >"$exe.csv" 2>/dev/null
    for f in check fail_range sum_checked report; do
        grep -q "^$f," "$exe.csv" || bad "$v: $f not measured"
    done
    row=$(grep '^check,' "$exe.csv")
    calls=$(echo "$row" | cut -d, -f2)
    flags=$(echo "$row" | cut -d, -f4)
    if [ "$calls" = 37 ] || [ "${flags#*~}" != "$flags" ]; then
        ok "$v: check: $calls calls${flags:+ (marked $flags)}"
    else
        bad "$v: check: $calls calls, not 37, and not marked approximate"
    fi
    # main, left at exit() (a frame of the exit back-trace): its abandoned flow is read,
    # so it is called once and violates nothing (not '*': the flow would not balance).
    grep -Eq '^main,1,[0-9]+,[^*]*$' "$exe.csv" && ok "$v: main: 1 call, left at exit" ||
        bad "$v: main left at exit: $(grep '^main,' "$exe.csv")"
done
# exec: a dump before each exec call, cancelled when the exec fails and returns; the
# frames an exec that succeeds leaves behind are accounted like exit()'s: run_it is called
# 3 times, main once; the procedure calling vfork is marked (its child counts into the
# parent's counters) and the vfork child's exec takes no dump of the parent's frames.
for v in "gcc -O0" "gcc -O2"; do
    exe=$dir/exec$(echo "$v" | tr -d ' -')
    $v -o "$exe" "$top_srcdir/tests/qp/exec.c" || exit 99
    "$QPT_REWRITE" "$exe" -o "$exe.inst" >/dev/null 2>&1 || { bad "$v: exec.c: rewrite failed"; continue; }
    (cd "$dir" && "$exe" >"$exe.o1" 2>&1; echo $? >>"$exe.o1"; "$exe.inst" >"$exe.o2" 2>&1; echo $? >>"$exe.o2")
    cmp -s "$exe.o1" "$exe.o2" && ok "$v: exec.c: same output" || bad "$v: exec.c output: $(diff "$exe.o1" "$exe.o2" | head -n 4)"
    "$QP" report --csv "$exe.inst.qp" >"$exe.csv" 2>&1
    for want in "run_it,3," "main,1," "work,3,"; do
        grep -q "^$want[0-9]*,\$" "$exe.csv" && ok "$v: exec.c: $want exact" ||
            bad "$v: exec.c: want $want: $(grep "^${want%%,*}," "$exe.csv")"
    done
    grep -q '^spawn,[0-9]*,[0-9]*,.*~' "$exe.csv" && ok "$v: exec.c: the vfork caller marked" ||
        bad "$v: exec.c: spawn: $(grep '^spawn,' "$exe.csv")"
    "$QP" report "$exe.inst.qp" | grep -q '^warning' && bad "$v: exec.c: a warning: $("$QP" report "$exe.inst.qp" | grep '^warning')"
done

# A profile read while its program runs, or after it was killed, says so (main shows
# fewer calls than runs otherwise without a word); a normal run has no such line.
if qp_have gcc && gcc -O1 -o "$dir/tick" "$top_srcdir/tests/qp/tick.c" &&
    "$QPT_REWRITE" "$dir/tick" -o "$dir/tick.inst" >/dev/null 2>&1; then
    "$dir/tick.inst" >/dev/null &
    pid=$!
    sleep 0.3
    "$QP" report "$dir/tick.inst.qp" 2>&1 | grep -q "^warning: the program is still running (pid $pid)" &&
        ok "a running program's profile says so" || bad "running: $("$QP" report "$dir/tick.inst.qp" 2>&1 | sed -n 3p)"
    kill -9 $pid
    wait $pid 2>/dev/null
    "$QP" report "$dir/tick.inst.qp" 2>&1 | grep -q "^warning: 1 run ended inside main without returning" &&
        ok "a killed run's profile says so" || bad "killed: $("$QP" report "$dir/tick.inst.qp" 2>&1 | sed -n 3p)"
    "$QP" report --csv "$dir/tick.inst.qp" | grep -q '^main,0,[0-9]*,.*\*' && ok "CSV: main marked '*'" ||
        bad "CSV after the kill: $("$QP" report --csv "$dir/tick.inst.qp" | grep '^main,')"
    rm -f "$dir/tick.inst.qp"
    "$dir/tick.inst" >/dev/null
    "$QP" report "$dir/tick.inst.qp" 2>&1 | grep -q '^warning' &&
        bad "a normal run warns: $("$QP" report "$dir/tick.inst.qp" 2>&1 | grep '^warning')" || ok "a normal run: no warning"
fi

# An exception thrown by a callback leaves the frames that called it through a pointer:
# tests/progs/eh_asm.cc's assembly functions call cb, which throws half of the time; their
# counts (2 of 4 calls return) are marked '~', never silently short.
if qp_have g++; then
    exe=$dir/eh_asm
    g++ -O2 -o "$exe" "$top_srcdir/tests/progs/eh_asm.cc" || exit 99
    if "$QPT_REWRITE" "$exe" -o "$exe.inst" >/dev/null 2>&1 && "$exe.inst" >/dev/null; then
        "$QP" report --csv "$exe.inst.qp" >"$exe.csv" 2>/dev/null
        for f in asm_pair_a asm_pair_b asm_padded; do
            grep -Eq "^$f,[0-9]+,[0-9]+,.*~" "$exe.csv" && ok "eh_asm: $f marked ~ (left by a callback's throw)" ||
                bad "eh_asm: $f: $(grep "^$f," "$exe.csv")"
        done
    else
        bad "eh_asm: rewrite or run failed"
    fi
fi

[ $fails -eq 0 ] || exit 1
echo "qp-leave: all checks passed"
exit 0
