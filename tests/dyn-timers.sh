#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Timers read while running (issue 33, seed 001 section 3.3): a wall or CPU timer read
# by dyn includes the running part of the calls active now, in every thread
# (tests/dyntimers/main.c: calls of 2.5 s, sampled every 0.5 s):
#  (a) dyn --time: a sleeping call's time grows with the time between two tables while
#      it runs (not 0 until it returns); its total at the end is the call's 2.5 s;
#  (b) -e 'time wall(f)', the same; -e 'time cpu(f)' of a spinning call grows (by at
#      most the wall time between tables) before it returns, and ends at its 2.5 s;
#  (c) two threads in the call at once: dyn --time (the union of their intervals)
#      grows with the time, -e 'time wall(f)' (summed over threads) twice as fast,
#      -e 'time cpu(f)' by at most twice the time (each thread's own CPU clock);
#  (d) recursion: 5 nested activations count once;
#  (e) a thread inside the call when dyn attaches: --time and -e catch the call up
#      (timed from the attach, Paradyn's catch-up: the first table shows it), then the
#      next call's 1 s (--time read 0 until the next call before issue 30 put it on
#      -e's engine);
#  (f) -e --histogram: the call's time spread over the buckets it ran in (about 0.1 s
#      each), not all in the bucket of its return.
# Tolerances are wide (0.15 s and 20% per table, 10% at the end): no timing races.
# Skips (77) when ptrace is not allowed. Exit status: 0 pass, 1 fail, 99 error.
set -u
: "${top_srcdir:=${srcdir:-.}}"
: "${srcdir:=$top_srcdir}"
. "$top_srcdir/tests/lib.sh"
DYN=$top_builddir/tools/dyn
dyn_setup dyn-timers

${CC:-cc} -O1 -fno-inline -pthread -o "$dir/prog" "$srcdir/tests/dyntimers/main.c" || exit 99
P=$dir/prog

"$DYN" run --count wait_call -- "$P" sleep 0.01 >"$dir/probe.out" 2>"$dir/probe.err"
dyn_skip_untraced "$dir/probe.err"

# series FILE NAME: "T MS" for each table of dyn's output FILE (T: its t=, "end" for
# the final one) and row NAME's time in ms (dyn --time: a procedure; -e: a metric).
series() {
    awk -v n="$2" '
        /^dyn: pid [0-9]+  t=/ { match($0, /t=[0-9.]+s/); t = substr($0, RSTART + 2, RLENGTH - 3) }
        /^dyn: pid [0-9]+, / || /^dyn: [0-9]+ procedures, / { t = "end" }
        t != "" && NF == 4 && $4 == n { print t, $3 }            # dyn --time, live
        t == "end" && NF == 3 && $3 == n { print t, $2 }         # dyn --time, final
        t != "" && $4 == "ms" && ($1 " " $2) == n { print t, $3 } # -e
    ' "$1"
}

# check WHAT FILE NAME RATE TOTAL: row NAME of FILE never reads lower than before; at
# least 2 tables read mid-call (above 0, 200 ms below the end) and between two of them
# the time grows by RATE x the time between them (RATE "cpu", "cpu2": by at most 1 or 2 x
# the time, and by more than 0 in at least half of them); the end reads TOTAL ms within
# 10%.
check() {
    series "$2" "$3" >"$dir/$1.series"
    awk -v what="$1" -v rate="$4" -v total="$5" '
        { t[NR] = $1; v[NR] = $2 + 0; n = NR }
        END {
            if (n == 0 || t[n] != "end") { print "FAIL " what ": no final value"; exit 1 }
            fin = v[n]; err = ""
            if (fin < total * 0.9 || fin > total * 1.1 + 50)
                err = err sprintf(" total %.1f ms, truth %d ms;", fin, total)
            mid = 0
            for (i = 1; i < n; i++) {
                if (i > 1 && v[i] + 0.001 < v[i - 1])
                    err = err sprintf(" read lower at t=%s (%.1f after %.1f);", t[i], v[i], v[i - 1])
                if (v[i] <= 0 || v[i] >= fin - 200)
                    continue
                if (mid > 0) {
                    dt = (t[i] - t[p]) * 1000; dv = v[i] - v[p]
                    if (rate ~ /^cpu/) {
                        # (a loaded machine may give the threads no CPU for a while)
                        k = rate == "cpu2" ? 2 : 1
                        grew += dv > 0
                        if (dv > k * dt + 150)
                            err = err sprintf(" t=%s: +%.1f ms of CPU in %.0f ms;", t[i], dv, dt)
                    } else if (dv < rate * dt * 0.8 - 150 || dv > rate * dt * 1.2 + 150)
                        err = err sprintf(" t=%s: +%.1f ms in %.0f ms (x%s expected);", t[i], dv, dt, rate)
                }
                mid++; p = i
            }
            if (mid < 2)
                err = err sprintf(" %d tables read mid-call (0 until it returns?);", mid)
            else if (rate ~ /^cpu/ && grew < (mid - 1) / 2)
                err = err sprintf(" grew in %d of %d intervals;", grew, mid - 1)
            if (err != "") { print "FAIL " what ":" err; exit 1 }
            print "ok   " what ": " mid " tables mid-call, total " fin " ms"
        }' "$dir/$1.series" || { fails=$((fails + 1)); cat "$dir/$1.series"; }
}

run() { # NAME DYN-ARGS... -- PROG-ARGS
    name=$1
    shift
    "$DYN" "$@" >"$dir/$name.out" 2>"$dir/$name.err"
    rc=$?
    [ $rc -eq 0 ] || bad "$name: dyn exit status $rc: $(cat "$dir/$name.err")"
}

# (a) dyn --time, one sleeping call.
run time-sleep run --time wait_call --interval 0.5 -- "$P" sleep 2.5
check time-sleep "$dir/time-sleep.out" wait_call 1 2500
grep -q '^sleep 2.5 done$' "$dir/time-sleep.out" || bad "(a) program output"

# (b) -e wall, -e cpu.
run e-sleep run -e 'time wall(wait_call)' --interval 0.5 -- "$P" sleep 2.5
check e-wall "$dir/e-sleep.out" 'time wall(wait_call)' 1 2500
run e-spin run -e 'time cpu(spin_call)' --interval 0.5 -- "$P" spin 2.5
check e-cpu "$dir/e-spin.out" 'time cpu(spin_call)' cpu 2500

# (c) two threads in the call at once.
run time-threads run --time wait_call --interval 0.5 -- "$P" threads 2.5
check time-threads "$dir/time-threads.out" wait_call 1 2500
run e-threads run -e 'time wall(wait_call)' --interval 0.5 -- "$P" threads 2.5
check e-threads "$dir/e-threads.out" 'time wall(wait_call)' 2 5000

run e-spins run -e 'time cpu(spin_call)' --interval 0.5 -- "$P" spins 2.5
check e-spins "$dir/e-spins.out" 'time cpu(spin_call)' cpu2 5000

# (d) recursion: counted once.
run time-rec run --time rec_call --interval 0.5 -- "$P" recurse 2.5
check time-rec "$dir/time-rec.out" rec_call 1 2500
run e-rec run -e 'time wall(rec_call)' --interval 0.5 -- "$P" recurse 2.5
check e-rec "$dir/e-rec.out" 'time wall(rec_call)' 1 2500

# (e) attached while a thread is inside: 0 (no start known), then the next call's 1 s.
for how in time e; do
    rm -f "$dir/inside"
    "$P" inside 3 "$dir/inside" >"$dir/inside-$how.prog" &
    tpid=$!
    wait_file=0
    until [ -e "$dir/inside" ] || [ $wait_file -gt 200 ]; do
        wait_file=$((wait_file + 1))
        sleep 0.05
    done
    if [ $how = time ]; then
        run inside-$how attach $tpid --time wait_call --interval 0.5
        name=wait_call
    else
        run inside-$how attach $tpid -e 'time wall(wait_call)' --interval 0.5
        name='time wall(wait_call)'
    fi
    wait $tpid
    tpid=
    series "$dir/inside-$how.out" "$name" >"$dir/inside-$how.series"
    # Caught up: the call under way is timed from the attach (the first table already
    # shows it), then the next call's 1 s: 3 s less the attach, plus 1 s.
    awk 'NR == 1 && $2 < 300 { bad = 1 } $1 == "end" { fin = $2 }
         END { exit !(!bad && fin >= 3000 && fin <= 4150) }' "$dir/inside-$how.series" ||
        bad "(e) $how: attached inside the call (caught up): $(tr '\n' ' ' <"$dir/inside-$how.series")"
done

# (f) the histogram: buckets of 0.1 s while the call runs, each about 0.1 s (in ns).
run e-hist run -e 'time wall(wait_call)' --histogram -- "$P" sleep 2.5
awk '/^metrics over time/ { on = 1; next } on && NF == 2 && $1 ~ /^[0-9.]+$/ {
        n++; if ($2 >= 50000000 && $2 <= 150000000) mid++ }
     END { exit !(n >= 20 && mid >= n / 2) }' "$dir/e-hist.out" ||
    bad "(f) histogram: $(sed -n '/^metrics over time/,$p' "$dir/e-hist.out" | tr -s ' \n' ' ')"

[ $fails -eq 0 ] || exit 1
echo "PASS dyn-timers"
