#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# dyn must never harm the process it instruments, whatever happens to dyn itself:
#  (a) dyn killed (SIGKILL) at many moments of install, sampling and removal of sessions
#      on a running multithreaded target (tests/dyn/target serve 2, busy with threads
#      that come and go): at its N-th ptrace call and its N-th write of process memory
#      (strace's fault injection), and at increasing delays against `target spin 2`
#      (threads that never pause and check every result). After each kill the target
#      keeps answering, `dyn clean PID` exits 0 with one line, and every few rounds a
#      fresh `dyn attach --count work` counts a known window exactly; at the end the
#      targets exit 0 with the output of a plain run (spin: errors=0);
#  (b) SIGPIPE: `dyn attach PID --count work -i ... | head -1` exits 1 with one line,
#      leaves nothing behind (dyn clean finds nothing), and the next attach counts;
#  (c) SIGINT, SIGTERM and SIGHUP at many moments of install and removal (strace
#      injection at the N-th ptrace call): dyn removes everything and exits 0 (or 1,
#      "interrupted before anything was instrumented"); nothing is left behind;
#  (d) the error lines: a zombie, a pid that does not exist, a process traced by strace,
#      another user's process: one line each, with the right reason;
#  (e) 30 attach/detach cycles while the target creates and ends threads nonstop: none
#      fails (a thread exiting while dyn seizes the threads gave EPERM).
# DYN_KILL_HEAVY=1 runs the heavy version (every ptrace call up to 150, 60 timed kills,
# 600 attach/detach cycles under thread churn) and prints its figures. Skips (77) when ptrace is not allowed. Exit status: 0 pass, 1 fail, 99 error.
set -u
: "${top_builddir:=.}"
DYN=$top_builddir/tools/dyn
T=$top_builddir/tests/dyn/target
dir=$top_builddir/tests/dyn-kill.d
heavy=${DYN_KILL_HEAVY:-0}
rm -rf "$dir"
mkdir -p "$dir" || exit 99
fail=0
bg_pids=

bad() {
    echo "FAIL $*"
    fail=1
}

cleanup() {
    exec 3>&- 2>/dev/null
    for p in $bg_pids; do kill "$p" 2>/dev/null; done
}
trap cleanup EXIT

# wait_for FILE PATTERN [COUNT]: up to 20 s until FILE has COUNT (1) lines matching.
wait_for() {
    i=0
    while wn=$(grep -c "$2" "$1" 2>/dev/null); [ "${wn:-0}" -lt "${3:-1}" ]; do
        i=$((i + 1))
        [ $i -gt 400 ] && return 1
        sleep 0.05
    done
    return 0
}

"$DYN" run --count work -- "$T" count 10 >"$dir/probe.out" 2>"$dir/probe.err" || {
    echo "SKIP: dyn cannot trace here: $(head -n 1 "$dir/probe.err")"
    exit 77
}
have_strace=0
strace -o /dev/null true 2>/dev/null && have_strace=1

# The serve target: each line N on its input makes 2 threads call work() N times each.
mkfifo "$dir/in" || exit 99
"$T" serve 2 <"$dir/in" >"$dir/serve.out" 2>&1 &
tpid=$!
bg_pids=$tpid
exec 3>"$dir/in"
wait_for "$dir/serve.out" '^ready' || { bad "serve: never ready"; exit 1; }
ncmd=0
sent=""
# cmd N: one command; the target must answer it.
cmd() {
    echo "$1" >&3
    ncmd=$((ncmd + 1))
    sent="$sent$1
"
    wait_for "$dir/serve.out" '^done' $ncmd || bad "serve: no answer to command $ncmd ($2)"
}

# alive WHAT: the target runs, is not stopped, and dyn clean finds nothing or cleans.
clean_after() {
    if ! kill -0 $tpid 2>/dev/null; then
        bad "$1: the target is gone"
        return 1
    fi
    grep -q '^State:.*[tT]' /proc/$tpid/status && bad "$1: the target is left stopped"
    "$DYN" clean $tpid >"$dir/clean.out" 2>"$dir/clean.err" ||
        bad "$1: dyn clean: $(cat "$dir/clean.err")"
    [ "$(wc -l <"$dir/clean.out")" -eq 1 ] || bad "$1: dyn clean printed: $(cat "$dir/clean.out")"
    cat "$dir/clean.out" >>"$dir/cleans"
    "$DYN" clean $tpid >"$dir/clean2.out" 2>&1
    grep -q -e "nothing of dyn's found" -e 'nothing to take out' "$dir/clean2.out" ||
        bad "$1: a second dyn clean still found: $(cat "$dir/clean2.out")"
    return 0
}

# exact WHAT: attach --count work over a window of one command (2 x 1000 calls).
exact() {
    rm -f "$dir/x.csv" "$dir/x.err"
    "$DYN" attach $tpid --count work -o "$dir/x.csv" >/dev/null 2>"$dir/x.err" &
    xp=$!
    wait_for "$dir/x.err" 'instrumented' || bad "$1: attach after clean: $(cat "$dir/x.err")"
    cmd 1000 "$1"
    kill -INT $xp
    wait $xp || bad "$1: attach after clean: exit $?: $(cat "$dir/x.err")"
    grep -qx 'work,2000,' "$dir/x.csv" ||
        bad "$1: attach after clean: $(grep work "$dir/x.csv"), expected work,2000"
}

# (a) SIGKILL at the N-th call of SYSCALL, while the target's threads are busy.
# kill_at SYSCALL N
kill_at() {
    echo 400000 >&3
    ncmd=$((ncmd + 1))
    sent="${sent}400000
"
    strace -f -o /dev/null -e trace="$1" -e inject="$1":signal=KILL:when="$2" \
        "$DYN" attach $tpid --count work --count 'serve*' --time other --calls-from serve_thread \
        --duration 0.02 >/dev/null 2>"$dir/k.err"
    st=$?
    wait_for "$dir/serve.out" '^done' $ncmd || bad "kill at $1 #$2: the target stopped answering"
    clean_after "kill at $1 #$2"
    [ $st -eq 137 ] && nkilled=$((nkilled + 1))
    rounds=$((rounds + 1))
}
rounds=0
nkilled=0
if [ $have_strace -eq 1 ]; then
    step=4 last=120
    [ "$heavy" = 1 ] && step=1 last=150
    n=1
    while [ $n -le $last ]; do
        kill_at ptrace $n
        [ $((rounds % 8)) -eq 0 ] && exact "after kill at ptrace #$n"
        n=$((n + step))
    done
    n=1
    while [ $n -le 20 ]; do
        kill_at pwrite64 $n
        n=$((n + 1))
    done
    exact "after the kill rounds"
else
    echo "note: no strace: kills at every ptrace call skipped"
fi

# (b) SIGPIPE: the live table into a pipe that closes after one line.
{
    "$DYN" attach $tpid --count work -i 0.05 -d 3 2>"$dir/pipe.err"
    echo $? >"$dir/pipe.st"
} | head -n 1 >/dev/null
[ "$(cat "$dir/pipe.st")" = 1 ] || bad "SIGPIPE: dyn exited $(cat "$dir/pipe.st"), expected 1"
grep -q 'standard output was closed' "$dir/pipe.err" || bad "SIGPIPE: $(cat "$dir/pipe.err")"
[ "$(grep -vc 'instrumented' "$dir/pipe.err")" -eq 1 ] || bad "SIGPIPE: more than one line: $(cat "$dir/pipe.err")"
"$DYN" clean $tpid >"$dir/pipe.clean" 2>&1
grep -q -e "nothing of dyn's found" -e 'nothing to take out' "$dir/pipe.clean" ||
    bad "SIGPIPE: left behind: $(cat "$dir/pipe.clean")"
exact "after SIGPIPE"

# (c) SIGINT, SIGTERM, SIGHUP at the N-th ptrace call: a clean removal, exit 0.
if [ $have_strace -eq 1 ]; then
    for sig in INT TERM HUP; do
        n=3
        while [ $n -le 110 ]; do
            strace -f -o /dev/null -e trace=ptrace -e inject=ptrace:signal=$sig:when=$n \
                "$DYN" attach $tpid --count work --calls-from serve_thread --duration 0.3 \
                >/dev/null 2>"$dir/sig.err"
            st=$?
            if [ $st -ne 0 ] && ! { [ $st -eq 1 ] && grep -q 'interrupted before' "$dir/sig.err"; }; then
                bad "SIG$sig at ptrace #$n: exit $st: $(cat "$dir/sig.err")"
            fi
            "$DYN" clean $tpid >"$dir/sig.clean" 2>&1
            grep -q -e "nothing of dyn's found" -e 'nothing to take out' "$dir/sig.clean" ||
                bad "SIG$sig at ptrace #$n: left behind: $(cat "$dir/sig.clean")"
            n=$((n + 9))
        done
    done
    exact "after the signal rounds"
fi

# (d) Error lines: one line each, the right reason.
# one_line WHAT FILE PATTERN
one_line() {
    [ "$(wc -l <"$2")" -eq 1 ] && grep -q "$3" "$2" || bad "$1: $(cat "$2")"
}
# A zombie: a child that exits and that its parent never waits for (perl, not a shell,
# which may reap it on its own).
perl -e '$| = 1; my $p = fork; exit 0 if !$p; open(my $f, ">", $ARGV[0]); print $f "$p\n";
    close($f); sleep 5' "$dir/zpid" &
zparent=$!
bg_pids="$tpid $zparent"
wait_for "$dir/zpid" . && sleep 0.2
zpid=$(cat "$dir/zpid")
"$DYN" attach "$zpid" --count work >/dev/null 2>"$dir/zombie.err"
[ $? -eq 1 ] || bad "zombie: exit status"
one_line zombie "$dir/zombie.err" "^dyn: $zpid: is a zombie"
kill $zparent 2>/dev/null
nopid=$(($(cat /proc/sys/kernel/pid_max) + 1))
"$DYN" attach $nopid --count work >/dev/null 2>"$dir/nopid.err"
[ $? -eq 1 ] || bad "no such process: exit status"
one_line "no such process" "$dir/nopid.err" "^dyn: $nopid: no such process"
"$DYN" clean $nopid >/dev/null 2>"$dir/nopid2.err"
one_line "clean: no such process" "$dir/nopid2.err" "^dyn: $nopid: no such process"
if [ $have_strace -eq 1 ]; then
    strace -o /dev/null -p $tpid 2>/dev/null &
    spid=$!
    sleep 0.3
    "$DYN" attach $tpid --count work >/dev/null 2>"$dir/traced.err"
    one_line "traced" "$dir/traced.err" "^dyn: $tpid: is already traced by process [0-9]* (strace)"
    kill -INT $spid
    wait $spid
fi
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    setpriv --reuid=65534 --regid=65534 --clear-groups "$DYN" attach $tpid --count work \
        >/dev/null 2>"$dir/user.err"
    one_line "other user" "$dir/user.err" "^dyn: $tpid: belongs to another user"
fi

# Attach/detach cycles while threads come and go nonstop (200 commands of 2 short-lived
# threads each, sent before every cycle): a thread that exits while dyn seizes the
# threads must not fail the attach (the kernel says EPERM for a zombie thread).
ncyc=30
[ "$heavy" = 1 ] && ncyc=600
cyc=0 errs=0
: >"$dir/cycles.err"
while [ $cyc -lt $ncyc ]; do
    cyc=$((cyc + 1))
    yes 100 | head -n 200 >&3
    ncmd=$((ncmd + 200))
    sent="$sent$(yes 100 | head -n 200)
"
    "$DYN" attach $tpid --count work --duration 0.005 >/dev/null 2>>"$dir/cycles.err" ||
        errs=$((errs + 1))
done
[ $errs -eq 0 ] || bad "cycles: $errs of $cyc attach/detach cycles failed: $(grep -v instrumented "$dir/cycles.err" | sort | uniq -c)"
wait_for "$dir/serve.out" '^done' $ncmd || bad "cycles: the target stopped answering"
[ "$heavy" = 1 ] && echo "heavy: $cyc attach/detach cycles under thread churn, $errs failed"

# The serve target ends normally with the output of a plain run of the same commands.
exec 3>&-
wait $tpid
st=$?
[ $st -eq 0 ] || bad "serve: the target exited $st"
printf '%s' "$sent" | "$T" serve 2 >"$dir/plain.out" 2>&1
cmp -s "$dir/plain.out" "$dir/serve.out" || bad "serve: output differs from a plain run"

# Timed kills against threads that never pause (and check every result).
mkfifo "$dir/in2" || exit 99
"$T" spin 2 <"$dir/in2" >"$dir/spin.out" 2>&1 &
tpid=$!
bg_pids=$tpid
exec 3>"$dir/in2"
wait_for "$dir/spin.out" '^ready' || bad "spin: never ready"
last=20
[ "$heavy" = 1 ] && last=60
k=0
while [ $k -lt $last ]; do
    k=$((k + 1))
    "$DYN" attach $tpid --count work --count small --duration 0.01 >/dev/null 2>&1 &
    dp=$!
    sleep "$(awk -v k=$k -v n=$last 'BEGIN { printf "%.4f", k * 0.02 / n }')"
    kill -KILL $dp 2>/dev/null
    wait $dp 2>/dev/null
    clean_after "spin: kill at delay $k of $last"
    rounds=$((rounds + 1))
done
exec 3>&-
wait $tpid
st=$?
{ [ $st -eq 0 ] && grep -qx 'errors=0' "$dir/spin.out"; } ||
    bad "spin: the target exited $st: $(cat "$dir/spin.out")"

echo "dyn-kill: $rounds kill rounds ($nkilled by SIGKILL at a ptrace call or memory write), targets unharmed, dyn clean after each, counts exact after clean; SIGPIPE, signals, error lines"
if [ "$heavy" = 1 ]; then
    echo "heavy: cleans that took something out: $(grep -vc -e "nothing of dyn's" -e 'nothing to take' "$dir/cleans")"
fi
exit $fail
