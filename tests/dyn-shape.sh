#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Procedures of the shapes dyn used to refuse (tests/dynshape/main.c says which):
#  (a) `dyn run` counts every one exactly (a `ret` alone, a call as first instruction,
#      indirect jumps with unknown targets, a tail call, a conditional tail call, ret
#      blocks of 4 bytes, `call *%rax` with --calls-from), nothing refused; --time of the
#      procedures that sleep (tail call, conditional tail call, short ret blocks, a
#      one-byte ret between blocks) within [1, 2] x their sleeps (a timer left running
#      by an exit that missed its stop would count most of the 10 s session), leaf's
#      time not included in its tail caller's;
#  (b) dyn attach to a running program (a thread mostly inside call_first_slow's callee,
#      its return address right after the entry's jump) for a window, detach: the code
#      (every executable mapping of the program, read from /proc/PID/mem) is byte for
#      byte what it was before, and every result was right;
#  (c) dyn killed (SIGKILL) while instrumented: the program goes on right (its results
#      checked), `dyn clean` puts every byte back;
#  (d) with strace: dyn killed at every 2nd write of process memory (trampolines,
#      padding jumps, jumps, the stub) and every 6th ptrace call of a session with all
#      the shapes: each time the program goes on and `dyn clean` leaves its code as it
#      was; at the end every result it computed meanwhile was right;
#  (e) -e 'time wall(...)' times the shapes --time times (a lone ret, tail calls, short
#      ret blocks after a call first, a jcc leaving both ways), within the same bounds.
# Skips (77) when ptrace is not allowed. Exit status: 0 pass, 1 fail, 99 error.
set -u
: "${top_srcdir:=${srcdir:-.}}"
: "${srcdir:=$top_srcdir}"
. "$top_srcdir/tests/lib.sh"
DYN=$top_builddir/tools/dyn
dyn_setup dyn-shape

command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
${CC:-cc} -O2 -pthread -o "$dir/prog" "$srcdir/tests/dynshape/main.c" || exit 99
P=$dir/prog
SHAPES="--count ret_only --count call_first --count call_first_slow --count ind_long
    --count ind_short --time timed_tail --time timed_ctail --time timed_mid
    --time timed_dtail --count leaf2 --time quick_chk
    --time timed_short --time leaf
    --calls-from call_reg --calls-from call_far"

"$DYN" run --count ret_only -- "$P" 1 >"$dir/probe.out" 2>"$dir/probe.err"
dyn_skip_untraced "$dir/probe.err"

# (a) exact counts, nothing refused, times within bounds (1000 calls of 2 ms sleeps).
N=1000
# shellcheck disable=SC2086
"$DYN" run -v $SHAPES -o "$dir/run.csv" -- "$P" $N 2000 >"$dir/run.out" 2>"$dir/run.err"
grep -q "^ok n=$N" "$dir/run.out" || bad "(a) results: $(cat "$dir/run.out" "$dir/run.err")"
grep -q '15 points instrumented, 0 refused' "$dir/run.err" ||
    bad "(a) refused: $(cat "$dir/run.err")"
for p in ret_only call_first ind_long ind_short timed_tail timed_ctail timed_mid timed_dtail \
    timed_short \
    'call_reg+0x8->*indirect' 'call_far+0x9e->*indirect'; do
    awk -v p="$p" -v n=$N '$NF == p && $1 == n { ok = 1 } END { exit !ok }' "$dir/run.out" ||
        bad "(a) $p: $(grep -F "$p" "$dir/run.out")"
done
# leaf: tail-called by timed_tail (N), by timed_ctail and timed_dtail when their argument
# is odd (N/2 each), by quick_chk when it is even (N/2), called by call_reg and call_far
# (2 N); leaf2 fallen into (N/2). quick_chk (no sleep) takes little time.
grep -E -q "^ +$((N * 9 / 2)) +[0-9.]+ +leaf\$" "$dir/run.out" ||
    bad "(a) leaf: $(grep leaf "$dir/run.out")"
grep -E -q "^ +$((N / 2)) +leaf2\$" "$dir/run.out" || bad "(a) leaf2: $(grep leaf2 "$dir/run.out")"
awk -v n=$N '
    $NF == "leaf" { leaf = $2 }
    $NF == "quick_chk" && ($1 != n || $2 > 100) { print "FAIL (a) quick_chk: " $0; bad = 1 }
    $NF ~ /^timed_/ { if ($2 < n * 2 || $2 > n * 2 * 2) { print "FAIL (a) " $NF " " $2 " ms"; bad = 1 }
                      t[$NF] = $2 }
    END { if (leaf == "" || leaf > t["timed_tail"] / 10) { print "FAIL (a) leaf " leaf " ms"; bad = 1 }
          exit bad }' "$dir/run.out" || fails=$((fails + 1))

# (b) attach for a window, detach: the code as it was, the results right.
dyn_wait_start
# shellcheck disable=SC2086
"$DYN" attach $tpid $SHAPES --duration 0.5 >"$dir/att.out" 2>"$dir/att.err" ||
    bad "(b) attach: $(cat "$dir/att.err")"
grep -q '15 points instrumented, 0 refused' "$dir/att.err" ||
    bad "(b) refused: $(cat "$dir/att.err")"
grep -E -q '^ +[1-9][0-9]* +ret_only$' "$dir/att.out" || bad "(b) counts: $(cat "$dir/att.out")"
after=$(text_of $tpid)
[ "$_before" = "$after" ] || bad "(b) the code differs after the detach"
# ... and with every procedure of libc timed (tail calls, short ret blocks, calls first).
"$DYN" attach $tpid --time 'libc.so.6:*' --duration 0.5 >"$dir/libc.out" 2>"$dir/libc.err" ||
    bad "(b) libc: $(cat "$dir/libc.err")"
grep -E -q '[0-9]{4} procedures instrumented' "$dir/libc.err" ||
    bad "(b) libc: $(cat "$dir/libc.err")"
after=$(text_of $tpid)
[ "$_before" = "$after" ] || bad "(b) the code differs after the detach from libc"

# (c) dyn killed while instrumented: the program goes on right; dyn clean.
# shellcheck disable=SC2086
"$DYN" attach $tpid $SHAPES >"$dir/kill.out" 2>"$dir/kill.err" &
dpid=$!
dyn_wait_for "$dir/kill.err" instrumented
grep -q '15 points instrumented' "$dir/kill.err" || bad "(c) attach: $(cat "$dir/kill.err")"
dyn_killed_clean c
# (d) SIGKILL at the N-th memory write or ptrace call.
if command -v strace >/dev/null 2>&1; then
    for what in pwrite64:2:62 ptrace:6:76; do
        sc=${what%%:*}
        step=${what#*:}
        last=${step#*:}
        step=${step%%:*}
        n=1
        while [ $n -le "$last" ]; do
            # shellcheck disable=SC2086
            strace -f -o /dev/null -e trace=$sc -e inject=$sc:signal=KILL:when=$n \
                "$DYN" attach $tpid $SHAPES --duration 0.05 >/dev/null 2>"$dir/k.err"
            kill -0 $tpid 2>/dev/null || { bad "(d) kill at $sc #$n: the program died"; break 2; }
            "$DYN" clean $tpid >"$dir/kclean.out" 2>&1 ||
                bad "(d) kill at $sc #$n: dyn clean: $(cat "$dir/kclean.out")"
            after=$(text_of $tpid)
            [ "$_before" = "$after" ] || bad "(d) kill at $sc #$n: the code differs after dyn clean"
            n=$((n + step))
        done
    done
else
    echo "note: no strace: (d) skipped"
fi

dyn_wait_end

# (e) -e takes the shapes --time takes (issue 29): a lone ret, tail calls (plain,
# conditional, both sides leaving), a call first with short ret blocks, one block leaving
# by a jcc to two procedures, a one-byte ret reached three ways; each timed within [1, 2] x its sleeps (a missed stop
# would leave its timer running), quick_chk under 100 ms.
"$DYN" run -e 'time wall(ret_only)' -e 'time wall(timed_tail)' -e 'time wall(timed_ctail)' \
    -e 'time wall(timed_dtail)' -e 'time wall(timed_short)' -e 'time wall(quick_chk)' \
    -e 'time wall(timed_mid)' \
    -- "$P" $N 2000 >"$dir/e.out" 2>"$dir/e.err"
grep -q "^ok n=$N" "$dir/e.out" || bad "(e) results: $(cat "$dir/e.out" "$dir/e.err")"
grep -q 'not measured' "$dir/e.err" && bad "(e) refused: $(grep 'not measured' "$dir/e.err")"
awk -v n=$N '
    $1 == "time" && $NF == "quick_chk" { seen++; if ($3 > 100) { print "FAIL (e) " $0; bad = 1 } }
    $1 == "time" && $NF == "ret_only" { seen++ }
    $1 == "time" && $NF ~ /^timed_/ { seen++
        if ($3 < n * 2 || $3 > n * 2 * 2) { print "FAIL (e) " $0; bad = 1 } }
    END { if (seen != 7) { print "FAIL (e) rows: " seen; bad = 1 }; exit bad }' "$dir/e.out" ||
    fails=$((fails + 1))

[ $fails -eq 0 ] || exit 1
echo "PASS dyn-shape"
