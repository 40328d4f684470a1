#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Regression tests of the hardening issue: what a careless or hostile user can do with
# qpt-rewrite, qp and an instrumented program must never gain a privilege, clobber a
# file, hang, or lose counts without saying so.
#   files     -o never replaces a device or FIFO; an output in a missing folder or that is
#             a folder fails before the analysis; a FIFO input is refused at once; the
#             output never keeps set-user-ID; a rewritten program is not rewritten again;
#             qp report -o never truncates its inputs; SIGTERM leaves no temporary file
#   secure    a set-user-ID-root rewrite run by nobody ignores QP_PROFILE (root only)
#   attacks   a run stopped while it holds the profile's lock hangs no other run, and
#             the counts stay exact; links planted at a profile's or a trace file's name
#             are not followed; an empty file or a file of another user at a profile's
#             name, and a file at a trace file's name that is not a trace of the user's,
#             are neither filled nor emptied; a set-user-ID program's trace left by an
#             earlier run (another user's) is kept when a later run gets its thread id
#   counts    forked children, simultaneous starts, threads, kill -9, a rewrite again
#             (the stale profile moved aside by one of 6 simultaneous runs): exact counts
#   saturate  a saturated counter is marked in the flat report, the CSV and after merge
#   mutants   mutated profiles through tests/fuzz_profile, mutated executables through
#             bench/mutate.sh (a short run; make corpus runs a long one)
# HARDEN_HEAVY=1 repeats the concurrency cases (40 rounds of simultaneous starts, 10 of
# fork and threads); HARDEN_MUTANTS=N sets the mutants (120). make corpus runs both.
# Work in $top_builddir/tests/harden.d. Exit status: 0 pass, 1 fail, 99 hard error.
set -u

# shellcheck source=tests/lib.sh
. "${top_srcdir:-.}/tests/lib.sh"

QP=${QP:-$top_builddir/tools/qp}
D=${HARDEN_DIR:-$top_builddir/tests/harden.d}
rm -rf "$D"
mkdir -p "$D" || exit 99
D=$(cd "$D" && pwd)
fails=0
bad() {
    echo "FAIL $*"
    fails=$((fails + 1))
}
ok() { echo "ok   $*"; }

qp_have gcc || { echo "SKIP: no gcc"; exit 77; }

# --- test programs -------------------------------------------------------------------
cat >"$D/work.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static volatile long sink;
__attribute__((noinline)) void work(long i) { sink += i; }
static long n;
static void *loop(void *a) { for (long i = 0; i < n; i++) work(i); return a; }
/* work MODE K N: call work() N times in each of K forked children and the parent
 * (fork), or in K threads (thread), or once in this process (one). */
int main(int argc, char **argv) {
    if (argc < 4) return 2;
    int k = atoi(argv[2]);
    n = atol(argv[3]);
    if (strcmp(argv[1], "fork") == 0) {
        for (int i = 0; i < k; i++)
            if (fork() == 0) { loop(0); _exit(0); }
        loop(0);
        while (wait(NULL) > 0) ;
    } else if (strcmp(argv[1], "thread") == 0) {
        pthread_t t[64];
        for (int i = 0; i < k && i < 64; i++) pthread_create(&t[i], 0, loop, 0);
        for (int i = 0; i < k && i < 64; i++) pthread_join(t[i], 0);
    } else
        loop(0);
    puts("done");
    return 0;
}
EOF
gcc -O2 -pthread -o "$D/work" "$D/work.c" || exit 99
gcc -O2 -static -pthread -o "$D/work.static" "$D/work.c" || exit 99
for v in work work.static; do
    "$QPT_REWRITE" "$D/$v" -o "$D/$v.inst" 2>"$D/$v.rw" || { cat "$D/$v.rw"; exit 99; }
done

# calls_of PROFILE: the calls of work in the CSV report (the static program is
# stripped of nothing, so the name is there).
calls_of() {
    "$QP" report --csv "$1" 2>/dev/null | awk -F, '$1 == "work" { print $2 }'
}

# --- files ---------------------------------------------------------------------------
mkfifo "$D/fifo" || exit 99
if "$QPT_REWRITE" "$D/work" -o "$D/fifo" 2>"$D/err" || [ ! -p "$D/fifo" ]; then
    bad "qpt-rewrite -o FIFO replaced it"
else
    grep -q "not a regular file" "$D/err" && ok "qpt-rewrite -o FIFO refused" \
        || bad "qpt-rewrite -o FIFO: $(cat "$D/err")"
fi
# An output that cannot be written fails before the analysis: one line, nothing written.
"$QPT_REWRITE" "$D/work" -o "$D/missing/dir/w.inst" 2>"$D/err"
st=$?
[ $st -eq 1 ] && [ "$(wc -l <"$D/err")" -eq 1 ] && grep -q "cannot write $D/missing/dir/w.inst" "$D/err" &&
    ok "qpt-rewrite -o into a missing folder refused at once" || bad "-o missing folder: exit $st, $(cat "$D/err")"
mkdir -p "$D/adir"
"$QPT_REWRITE" "$D/work" -o "$D/adir" 2>"$D/err" && bad "qpt-rewrite -o a folder succeeded"
grep -q "Is a directory" "$D/err" && ok "qpt-rewrite -o a folder refused" || bad "-o a folder: $(cat "$D/err")"
if [ "$(id -u)" -eq 0 ] && mknod "$D/null" c 1 3 2>/dev/null; then
    "$QPT_REWRITE" "$D/work" -o "$D/null" 2>/dev/null
    [ -c "$D/null" ] && ok "qpt-rewrite -o a character device refused" \
        || bad "qpt-rewrite -o a character device replaced it"
    "$QP" merge -o "$D/null" "$D/work.inst.qp" 2>/dev/null
    [ -c "$D/null" ] && ok "qp merge -o a character device refused" \
        || bad "qp merge -o a character device replaced it"
fi
timeout 20 "$QPT_REWRITE" --dump-cfg "$D/fifo" >/dev/null 2>"$D/err"
st=$?
[ "$st" -eq 1 ] && [ "$(wc -l <"$D/err")" -eq 1 ] && ok "--dump-cfg FIFO refused at once" \
    || bad "--dump-cfg FIFO: status $st: $(cat "$D/err")"
timeout 20 "$QP" report "$D/fifo" >/dev/null 2>"$D/err"
st=$?
[ "$st" -eq 1 ] && ok "qp report FIFO refused at once" || bad "qp report FIFO: status $st"

# Every tool's inputs and outputs as the profiles': a FIFO input refused at once, a FIFO
# output refused and left a FIFO (outputs are written beside and renamed), exit 1 (2 for
# a --metrics file, a usage error), one line, no temporary file left.
(cd "$D" && ./work.inst one 1 10 >/dev/null)
"$QPT_REWRITE" --driver=trace --trace-mem "$D/work" -o "$D/work.t" >/dev/null 2>&1 &&
    "$QPT_REWRITE" -e 'count calls(work) total' "$D/work" -o "$D/work.m" >/dev/null 2>&1 &&
    (cd "$D" && ./work.m one 1 10 >/dev/null) || exit 99
fifo_case() { # WANT-STATUS DESCRIPTION CMD...
    local want=$1 what=$2
    shift 2
    timeout 10 "$@" >/dev/null 2>"$D/err"
    local st=$?
    [ "$st" -eq "$want" ] && [ "$(wc -l <"$D/err")" -eq 1 ] && [ -p "$D/fifo" ] &&
        grep -q "not a regular file" "$D/err" && ok "$what: refused at once" ||
        bad "$what: status $st: $(head -c 300 "$D/err")"
}
for c in blocks stats insns mem; do
    fifo_case 1 "qp trace $c PROG FIFO" "$QP" trace $c "$D/work.t" "$D/fifo"
done
fifo_case 1 "qp report -o FIFO" "$QP" report "$D/work.inst.qp" -o "$D/fifo"
fifo_case 1 "qp report --lcov -o FIFO" "$QP" report --lcov "$D/work.inst.qp" -o "$D/fifo"
fifo_case 1 "qp report --csv -o FIFO" "$QP" report --csv "$D/work.inst.qp" -o "$D/fifo"
fifo_case 1 "qp metrics --layout FIFO" "$QP" metrics --layout "$D/fifo" "$D/work.m.qp"
fifo_case 1 "qp metrics -o FIFO" "$QP" metrics "$D/work.m.qp" -o "$D/fifo"
fifo_case 2 "qpt-rewrite --metrics FIFO" "$QPT_REWRITE" --metrics "$D/fifo" "$D/work" -o "$D/x.inst"
if [ -x "$top_builddir/tools/dyn" ]; then
    DYN=$top_builddir/tools/dyn
    fifo_case 2 "dyn run --metrics FIFO" "$DYN" run --metrics "$D/fifo" -- "$D/work" one 1 10
    fifo_case 1 "dyn run -o FIFO" "$DYN" run --count work -o "$D/fifo" -- "$D/work" one 1 10
    fifo_case 1 "dyn run --trace FIFO" "$DYN" run --count work --trace "$D/fifo" -- "$D/work" one 1 10
    fifo_case 1 "dyn run -e -o FIFO" "$DYN" run -e 'count calls(work)' -o "$D/fifo" -- "$D/work" one 1 10
fi
"$QP" report "$D/work.inst.qp" -o "$D/rep.txt" 2>"$D/err" && grep -q work "$D/rep.txt" &&
    "$QP" metrics "$D/work.m.qp" -o "$D/met.txt" 2>>"$D/err" && grep -q 10 "$D/met.txt" &&
    ! ls "$D" | grep -q '\.tmp' && ok "qp report -o, qp metrics -o: written, no temporary file left" ||
    bad "qp -o: $(cat "$D/err"; ls "$D" | grep tmp)"

cp "$D/work" "$D/suid" && chmod 4755 "$D/suid"
"$QPT_REWRITE" --driver=none "$D/suid" -o "$D/suid.inst" 2>"$D/err"
mode=$(stat -c %a "$D/suid.inst")
[ "$mode" = 755 ] && grep -q "set-user-ID" "$D/err" && ok "setuid bit not copied, and said so" \
    || bad "setuid rewrite: mode $mode: $(cat "$D/err")"

"$QPT_REWRITE" "$D/work.inst" -o "$D/again" 2>"$D/err"
st=$?
[ "$st" -eq 1 ] && [ ! -e "$D/again" ] && grep -q "already rewritten" "$D/err" \
    && ok "a rewritten program is refused" || bad "rewrite of a rewrite: status $st"

(cd "$D" && ./work.inst one 1 10 >/dev/null)
cp "$D/work.inst.qp" "$D/keep.qp"
"$QP" report -o "$D/work.inst.qp" "$D/work.inst.qp" 2>/dev/null
cmp -s "$D/work.inst.qp" "$D/keep.qp" && ok "qp report -o PROFILE refused" \
    || bad "qp report -o PROFILE truncated the profile"

# QP_PROFILE naming a file of the user's (one that starts with zeros, as a disk image
# does; a text file): left exactly as it was, and the program runs on.
head -c 3000000 /dev/zero >"$D/disk.img"
printf 'precious\n' >"$D/notes.txt"
sums=$(cat "$D/disk.img" "$D/notes.txt" | cksum)
for f in disk.img notes.txt; do
    out=$(cd "$D" && QP_PROFILE=$D/$f ./work.inst one 1 10 2>/dev/null)
    [ "$out" = done ] || bad "QP_PROFILE=$f: the program did not run"
done
[ "$(cat "$D/disk.img" "$D/notes.txt" | cksum)" = "$sums" ] \
    && ok "QP_PROFILE naming a file that is not a profile leaves it untouched" \
    || bad "QP_PROFILE overwrote a file that is not a profile"

# dyn -o into a directory that does not exist: refused before the session, not after it.
if [ -x "$top_builddir/tools/dyn" ]; then
    start=$(date +%s)
    "$top_builddir/tools/dyn" run --count work -o "$D/no/such/dir.csv" -- "$D/work" one 1 10 \
        >/dev/null 2>"$D/dyn.err"
    st=$?
    [ "$st" -eq 1 ] && [ "$(wc -l <"$D/dyn.err")" -eq 1 ] && [ $(($(date +%s) - start)) -lt 5 ] \
        && ok "dyn -o an unwritable CSV fails at once" || bad "dyn -o unwritable: status $st"
fi

# SIGTERM at several moments of a rewrite of a larger program: never a temporary file.
big=$top_builddir/tools/qpt-rewrite
left=0
for delay in 0.05 0.1 0.2 0.3 0.5; do
    "$QPT_REWRITE" "$big" -o "$D/big.out" 2>/dev/null &
    pid=$!
    sleep "$delay"
    kill -TERM "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    ls "$D"/big.out.tmp* >/dev/null 2>&1 && left=$((left + 1))
    rm -f "$D"/big.out*
done
[ "$left" -eq 0 ] && ok "SIGTERM during a rewrite leaves no temporary file" \
    || bad "SIGTERM left $left temporary files"

# --- secure execution ----------------------------------------------------------------
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    mkdir -p "$D/sec" && chmod 755 "$D/sec"
    cp "$D/work.inst" "$D/sec/prog" && chown root:root "$D/sec/prog" && chmod 4755 "$D/sec/prog"
    mkdir -p "$D/victim" && chmod 777 "$D/victim"
    out=$(cd / && QP_PROFILE="$D/victim/evil" setpriv --reuid=nobody --regid=nogroup \
        --clear-groups "$D/sec/prog" one 1 5 2>"$D/sec.err")
    if [ -e "$D/victim/evil" ]; then
        bad "secure execution: QP_PROFILE created $(stat -c '%U %a' "$D/victim/evil")"
    elif [ "$out" != done ]; then
        bad "secure execution: the program did not run: $out $(cat "$D/sec.err")"
    else
        ok "secure execution ignores QP_PROFILE"
    fi
    # Its own profile, root's: a symbolic link planted there is not followed.
    rm -f "$D/sec/prog.qp"
    ln -s "$D/victim/target" "$D/sec/prog.qp"
    (cd / && setpriv --reuid=nobody --regid=nogroup --clear-groups "$D/sec/prog" one 1 5 \
        >/dev/null 2>&1)
    [ ! -e "$D/victim/target" ] && ok "secure execution does not follow a planted link" \
        || bad "secure execution followed a symbolic link"
    rm -f "$D/sec/prog.qp"
    (cd / && setpriv --reuid=nobody --regid=nogroup --clear-groups "$D/sec/prog" one 1 5 \
        >/dev/null 2>&1)
    m=$(stat -c '%U %a' "$D/sec/prog.qp" 2>/dev/null)
    [ "$m" = "root 600" ] && [ "$(calls_of "$D/sec/prog.qp")" = 5 ] \
        && ok "secure execution counts into a root-only profile" || bad "secure profile: $m"
    # A trace rewrite (--driver=trace) writes PROG.trace.TID files: links planted at
    # every likely TID are not followed, and no file of another owner is emptied.
    if "$QPT_REWRITE" --driver=trace "$D/work" -o "$D/sec/tprog" >/dev/null 2>&1 &&
        chown root:root "$D/sec/tprog" && chmod 4755 "$D/sec/tprog"; then
        echo keep >"$D/victim/ttarget" && chmod 600 "$D/victim/ttarget"
        python3 -c "
import os, sys
base = int(open('/proc/sys/kernel/ns_last_pid').read())
for i in range(base, base + 3000):
    os.symlink(sys.argv[1], '%s.trace.%d' % (sys.argv[2], i))" "$D/victim/ttarget" "$D/sec/tprog"
        (cd / && setpriv --reuid=nobody --regid=nogroup --clear-groups "$D/sec/tprog" one 1 5 \
            >/dev/null 2>&1)
        [ "$(cat "$D/victim/ttarget")" = keep ] &&
            ok "secure execution: a trace does not follow links planted at its file names" ||
            bad "secure execution: a trace wrote through a planted link"
        find "$D/sec" -name 'tprog.trace.*' -type l -delete
        (cd / && setpriv --reuid=nobody --regid=nogroup --clear-groups "$D/sec/tprog" one 1 5 \
            >/dev/null 2>&1)
        m=$(stat -c '%U %a' "$D"/sec/tprog.trace.* 2>/dev/null | sort -u)
        [ "$m" = "root 600" ] && ok "secure execution: root-only trace files" ||
            bad "secure trace files: ${m:-none}"
    else
        bad "secure execution: the trace rewrite failed"
    fi
else
    echo "skip secure execution (needs root and setpriv)"
fi

# --- local attacks on instrumented programs ------------------------------------------
# planted PLANT CMD...: run CMD once `PLANT PID` has planted what an attacker would at
# the names CMD will use (CMD is exec'd by a shell whose pid, its main thread's id and so
# its trace file's name, is known before it starts: no guess). CMD's stdout is its own.
planted() {
    local plant=$1 w
    shift
    rm -f "$D/run.pid" "$D/run.go"
    sh -c 'echo $$ >"$0.pid"; while [ ! -e "$0.go" ]; do sleep 0.02; done; exec "$@"' \
        "$D/run" "$@" &
    w=$!
    while [ ! -s "$D/run.pid" ]; do sleep 0.02; done
    "$plant" "$(cat "$D/run.pid")"
    touch "$D/run.go"
    wait "$w"
}
# as_nobody CMD...: CMD as the unprivileged user (the attacker, or another user).
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }

# The profile's lock: a run that holds it and is stopped (SIGSTOP, Ctrl-Z) hangs no other
# run; the runs meanwhile keep their counts, exactly, once the stopped one goes on.
if command -v flock >/dev/null; then
    rm -f "$D/work.inst.qp" "$D/lock.err" "$D/holder.pid"
    (cd "$D" && ./work.inst one 1 1000 >/dev/null)
    flock "$D/work.inst.qp" sh -c 'echo $$ >"$0"; kill -STOP $$' "$D/holder.pid" &
    holder=$!
    while [ ! -s "$D/holder.pid" ]; do sleep 0.02; done
    t0=$(date +%s)
    o1=$(cd "$D" && timeout 20 ./work.inst one 1 2000 2>>"$D/lock.err")
    s1=$?
    o2=$(cd "$D" && timeout 20 ./work.inst fork 3 1000 2>>"$D/lock.err")
    s2=$?
    many=
    for i in 1 2 3 4 5 6; do # at once: slots claimed without the lock never collide
        (cd "$D" && timeout 20 ./work.inst one 1 3000 >/dev/null 2>>"$D/lock.err") &
        many="$many $!"
    done
    # shellcheck disable=SC2086 # (word splitting wanted)
    wait $many
    t=$(($(date +%s) - t0))
    kill -CONT "$(cat "$D/holder.pid")"
    wait "$holder"
    (cd "$D" && ./work.inst one 1 500 >/dev/null)
    c=$(calls_of "$D/work.inst.qp")
    if [ "$s1 $s2 $o1 $o2" = "0 0 done done" ] && [ "$c" = 25500 ] && [ ! -s "$D/lock.err" ]; then
        ok "a run stopped holding the profile's lock hangs no other (8 runs, ${t}s); counts exact"
    else
        bad "profile lock held by a stopped run: status $s1 $s2, $c calls (25500), $(head -n 2 "$D/lock.err")"
    fi
else
    echo "skip the profile's lock (needs flock)"
fi
# The same with an instrumented run as the holder: strace holds it 5 s inside the flock
# that got the lock. Another run ends long before; then both runs' counts are there.
if command -v strace >/dev/null && strace -o /dev/null true 2>/dev/null; then
    rm -f "$D/work.inst.qp" "$D/lock.err"
    (cd "$D" && ./work.inst one 1 1000 >/dev/null)
    (cd "$D" && exec strace -o /dev/null -e trace=flock -e inject=flock:delay_exit=5000000:when=1 \
        ./work.inst one 1 700 >/dev/null) &
    holder=$!
    for i in $(seq 100); do flock -n "$D/work.inst.qp" true || break; sleep 0.02; done
    t0=$(date +%s%N)
    o1=$(cd "$D" && timeout 20 ./work.inst one 1 2000 2>>"$D/lock.err")
    t=$((($(date +%s%N) - t0) / 1000000))
    wait "$holder"
    (cd "$D" && ./work.inst one 1 500 >/dev/null)
    c=$(calls_of "$D/work.inst.qp")
    [ "$o1" = done ] && [ "$t" -lt 2500 ] && [ "$c" = 4200 ] && [ ! -s "$D/lock.err" ] \
        && ok "a run holding the profile's lock 5 s: another ends in ${t} ms; counts exact" \
        || bad "a run holding the lock 5 s: another took $t ms, $c calls (4200): $(head -n 2 "$D/lock.err")"
fi

if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    # A folder the attacker (nobody) owns holds a program root runs, a counting one and a
    # tracing one: links planted at its profile and at its trace file are never followed
    # (whatever fs.protected_symlinks says: the links are the folder owner's).
    A=$D/attacker
    mkdir -p "$A" "$D/owner" && chmod 755 "$D/owner" || exit 99
    cp "$D/work.inst" "$A/prog" || exit 99
    "$QPT_REWRITE" --driver=trace "$D/work" -o "$A/tprog" >/dev/null 2>&1 || exit 99
    chown nobody "$A" && chmod 755 "$A"
    : >"$D/owner/empty"
    echo keep >"$D/owner/keep"
    as_nobody ln -s "$D/owner/empty" "$A/prog.qp"
    out=$(cd / && "$A/prog" one 1 5 2>"$D/att.err")
    [ "$out" = done ] && [ ! -s "$D/owner/empty" ] && grep -q "symbolic link" "$D/att.err" \
        && ok "a link planted at a program's profile is not followed" \
        || bad "a link at the profile: $(stat -c %s "$D/owner/empty") bytes written: $out $(cat "$D/att.err")"
    plant_link() { as_nobody ln -s "$D/owner/keep" "$A/tprog.trace.$1"; }
    out=$(cd / && planted plant_link "$A/tprog" one 1 5 2>"$D/att.err")
    [ "$out" = done ] && [ "$(cat "$D/owner/keep")" = keep ] && grep -q "symbolic link" "$D/att.err" \
        && ok "a link planted at a trace file's name is not followed" \
        || bad "a link at the trace name: $(head -c 20 "$D/owner/keep" | od -c | head -n 1): $out"

    # A sticky world-writable folder: a file another user left where a run writes is never
    # filled nor emptied: an empty profile, a trace-named file; a file of the user's own
    # that is not a profile (empty) or not a trace is kept as well.
    P=$D/pub
    mkdir -p "$P" && chmod 1777 "$P"
    cp "$A/tprog" "$P/tprog"
    : >"$P/shared.qp" && chmod 666 "$P/shared.qp"
    as_nobody sh -c ": >'$P/mine.qp'"
    for f in shared mine; do
        out=$(cd / && QP_PROFILE=$P/$f.qp as_nobody "$D/work.inst" one 1 5 2>"$D/pub.err")
        [ "$out" = done ] && [ ! -s "$P/$f.qp" ] && [ -s "$D/pub.err" ] \
            && ok "an empty file ($f.qp, $(stat -c %U "$P/$f.qp")'s) is not taken for a profile" \
            || bad "QP_PROFILE=$f.qp, empty, $(stat -c %U "$P/$f.qp")'s: filled ($(stat -c %s "$P/$f.qp") bytes)"
    done
    (cd / && QP_PROFILE=$P/nob.qp as_nobody "$D/work.inst" one 1 5 >/dev/null 2>&1)
    sum=$(cksum <"$P/nob.qp")
    out=$(cd / && QP_PROFILE=$P/nob.qp "$D/work.inst" one 1 5 2>"$D/pub.err")
    [ "$(stat -c %U "$P/nob.qp")" = nobody ] && [ "$(calls_of "$P/nob.qp")" = 5 ] \
        && [ "$(cksum <"$P/nob.qp")" = "$sum" ] && [ "$out" = done ] \
        && grep -q "not owned by the effective user" "$D/pub.err" \
        && ok "a profile is its creator's: another user's run does not count into it" \
        || bad "another user's profile: $(calls_of "$P/nob.qp") calls: $out $(cat "$D/pub.err")"
    plant_other() { as_nobody sh -c "echo theirs >'$P/tprog.trace.$1'"; }
    plant_mine() { echo notes >"$P/tprog.trace.$1"; }
    for who in other mine; do
        out=$(cd / && planted plant_$who "$P/tprog" one 1 5 2>"$D/pub.err")
        kept=$(cat "$P"/tprog.trace.* 2>/dev/null | tr -d '\000\n')
        rm -f "$P"/tprog.trace.*
        [ "$out" = done ] && { [ "$kept" = theirs ] || [ "$kept" = notes ]; } \
            && ok "a file at a trace file's name ($who, not a trace) is kept" \
            || bad "a file at a trace name ($who) emptied: '$kept' $out $(cat "$D/pub.err")"
    done

    # A set-user-ID program: a trace its earlier run left (as another user, root's file
    # and our format) is not emptied by a later run that gets the same thread id.
    if [ -x "$D/sec/tprog" ]; then
        rm -f "$D"/sec/tprog.trace.*
        (cd / && as_nobody "$D/sec/tprog" one 1 7 >/dev/null 2>&1)
        earlier=$(ls "$D"/sec/tprog.trace.* | head -n 1)
        plant_reuse() { cp -p "$earlier" "$D/sec/tprog.trace.$1"; }
        out=$(cd / && planted plant_reuse setpriv --reuid=12345 --regid=12345 --clear-groups \
            "$D/sec/tprog" one 1 5 2>"$D/reuse.err")
        changed=0
        for f in "$D"/sec/tprog.trace.*; do cmp -s "$f" "$earlier" || changed=$((changed + 1)); done
        [ "$out" = done ] && [ "$changed" = 0 ] && [ "$(ls "$D"/sec/tprog.trace.* | wc -l)" = 2 ] \
            && ok "secure execution: another user's earlier trace at a reused thread id is kept" \
            || bad "secure execution: an earlier trace emptied at a reused thread id ($changed changed): $out"
    fi
else
    echo "skip local attacks (needs root and setpriv)"
fi

# --- counts --------------------------------------------------------------------------
reps=1
[ -n "${HARDEN_HEAVY:-}" ] && reps=10
for v in work.inst work.static.inst; do
    wrong=0
    for r in $(seq "$reps"); do
        rm -f "$D/$v.qp"
        (cd "$D" && ./"$v" fork 4 200000 >/dev/null)
        c=$(calls_of "$D/$v.qp")
        [ "$c" = 1000000 ] || { wrong=$((wrong + 1)); echo "$v fork: $c calls"; }
        rm -f "$D/$v.qp"
        (cd "$D" && ./"$v" thread 8 200000 >/dev/null)
        c=$(calls_of "$D/$v.qp")
        [ "$c" = 1600000 ] || { wrong=$((wrong + 1)); echo "$v threads: $c calls"; }
    done
    [ "$wrong" -eq 0 ] && ok "$v: 4 forked children and the parent, 8 threads: exact ($reps times)" \
        || bad "$v: $wrong of $((2 * reps)) runs wrong"
done
# What a forked child's calls are (qp(1), FORKED PROCESSES): main forks once, the child
# calls work(5) and _exit()s inside main, the parent calls work(3). One entry of main
# happened (gcov: 1), but the child, counted from where fork returned, ran main's code:
# flow conservation credits it with main's entry and the path to the fork (work(10)):
# main 2 calls, work 4 (3 ran); the report says so in a note.
cat >"$D/fk.c" <<'EOF'
#include <sys/wait.h>
#include <unistd.h>
volatile long sink;
__attribute__((noinline)) void work(long n) { for (long i = 0; i < n; i++) sink += i; }
int main(void) {
    work(10);
    pid_t p = fork();
    if (p == 0) { work(5); _exit(0); }
    waitpid(p, 0, 0);
    work(3);
    return 0;
}
EOF
if gcc -O1 -o "$D/fk" "$D/fk.c" && "$QPT_REWRITE" "$D/fk" -o "$D/fk.inst" 2>/dev/null &&
    (cd "$D" && ./fk.inst); then
    "$QP" report --csv "$D/fk.inst.qp" >"$D/fk.csv" 2>&1
    "$QP" report "$D/fk.inst.qp" >"$D/fk.txt" 2>&1
    m=$(awk -F, '$1 == "main" { print $2 }' "$D/fk.csv")
    w=$(awk -F, '$1 == "work" { print $2 }' "$D/fk.csv")
    [ "$m" = 2 ] && [ "$w" = 4 ] &&
        grep -q "^note: 1 forked process counted from where fork returned" "$D/fk.txt" &&
        ok "a child forked in main: main 2 calls, work 4, as documented, with the note" ||
        bad "fork in main: main $m, work $w: $(grep note "$D/fk.txt")"
else
    bad "fork in main: the program"
fi

# Simultaneous starts with no profile yet: none lost, every run counted.
rounds=5
[ -n "${HARDEN_HEAVY:-}" ] && rounds=40
lost=0
for round in $(seq "$rounds"); do
    rm -f "$D/work.inst.qp"
    for i in 1 2 3 4 5 6; do (cd "$D" && ./work.inst one 1 30000 >/dev/null 2>>"$D/sim.err") & done
    wait
    c=$(calls_of "$D/work.inst.qp")
    runs=$("$QP" report "$D/work.inst.qp" 2>/dev/null | sed -n 's/.*(\([0-9]*\) runs.*/\1/p')
    [ "$c" = 180000 ] && [ "$runs" = 6 ] || lost=$((lost + 1))
done
[ "$lost" -eq 0 ] && [ ! -s "$D/sim.err" ] && ok "$rounds rounds of 6 simultaneous first runs: exact" \
    || bad "simultaneous starts: $lost rounds wrong: $(head -n 2 "$D/sim.err")"
# Rewritten again (another rewrite, the old profile still there): the first run moves
# the old profile to .old and starts a new one; 6 simultaneous first runs over a stale
# profile: exactly one moves it, none loses its counts.
stale=0
for round in $(seq "$rounds"); do
    rm -f "$D/work.inst.qp" "$D/work.inst.qp.old" "$D/stale.err"
    (cd "$D" && ./work.inst one 1 1000 >/dev/null)
    "$QPT_REWRITE" --driver naive "$D/work" -o "$D/work.inst" 2>/dev/null || stale=$((stale + 1))
    for i in 1 2 3 4 5 6; do (cd "$D" && ./work.inst one 1 30000 >/dev/null 2>>"$D/stale.err") & done
    wait
    c=$(calls_of "$D/work.inst.qp")
    moved=$(grep -c "moved to .*work.inst.qp.old; this run starts a new profile" "$D/stale.err")
    [ "$c" = 180000 ] && [ "$moved" = 1 ] && [ "$(wc -l <"$D/stale.err")" = 1 ] || {
        stale=$((stale + 1))
        echo "stale round $round: $c calls, moved $moved: $(head -n 3 "$D/stale.err")"
    }
    "$QPT_REWRITE" "$D/work" -o "$D/work.inst" 2>/dev/null # back to the qp driver
done
[ "$stale" -eq 0 ] && ok "$rounds rounds of a rewrite again: the old profile moved aside once, 6 simultaneous runs exact" \
    || bad "rewrite again: $stale rounds wrong"
rm -f "$D/work.inst.qp.old"
# kill -9 in the middle of a run: its counts so far stay, the next run folds them in.
rm -f "$D/work.inst.qp"
(cd "$D" && exec ./work.inst one 1 4000000000 >/dev/null) &
pid=$!
sleep 0.3
kill -KILL "$pid"
wait "$pid" 2>/dev/null
c1=$(calls_of "$D/work.inst.qp")
(cd "$D" && ./work.inst one 1 1000 >/dev/null)
c2=$(calls_of "$D/work.inst.qp")
[ -n "$c1" ] && [ "$c1" -gt 0 ] && [ "$c2" = $((c1 + 1000)) ] \
    && ok "kill -9: counts kept ($c1), folded into the next run" || bad "kill -9: $c1 then $c2"

# --- saturation ----------------------------------------------------------------------
rm -f "$D/work.inst.qp"
(cd "$D" && ./work.inst one 1 10 >/dev/null && ./work.inst one 1 10 >/dev/null)
# The second run folded the first: set every base counter that is not 0 to 2^64-1
# (which of them give work's count depends on where the spanning tree put them).
perl -e 'open(my $f, "+<", $ARGV[0]) or exit 1; binmode $f; read($f, my $h, 64);
    my $n = unpack("Q<", substr($h, 24, 8)); seek($f, 4096, 0); read($f, my $c, 8 * $n);
    my @c = unpack("Q<*", $c);
    for my $i (0 .. $#c) { next if $c[$i] == 0; seek($f, 4096 + 8 * $i, 0);
        print $f pack("Q<", 0xffffffffffffffff); }' "$D/work.inst.qp" || exit 99
line=$("$QP" report --csv "$D/work.inst.qp" | awk -F, '$1 == "work"')
case $line in
work,,*,*+*) ok "a saturated count is marked in the CSV ($line)" ;;
*) bad "saturated CSV line: $line" ;;
esac
"$QP" report "$D/work.inst.qp" | grep -q "^+  a counter reached 2^64-1" \
    && ok "the flat report explains the + marker" || bad "no saturation note"
"$QP" merge -o "$D/m.qp" "$D/work.inst.qp" "$D/work.inst.qp" 2>/dev/null
case $("$QP" report --csv "$D/m.qp" --exe "$D/work.inst" | awk -F, '$1 == "work"') in
work,,*,*+*) ok "qp merge keeps the saturation mark" ;;
*) bad "qp merge dropped the saturation mark" ;;
esac

# --- mutated inputs ------------------------------------------------------------------
# Profiles: 300 copies of a real one (forked children: slots in use) with bytes changed in
# the header, the counters or the slot table, through the profile fuzz target (read,
# report, merge, write, read back): no crash, no mismatch.
rm -f "$D/work.inst.qp"
(cd "$D" && ./work.inst fork 2 100 >/dev/null)
mkdir -p "$D/prof"
perl -e '
    my ($in, $dir) = @ARGV; open(my $f, "<", $in) or die; binmode $f; local $/; my $b = <$f>;
    my $slots = unpack("Q<", substr($b, 56, 8));
    for my $i (0 .. 299) {
        srand($i); my $c = $b;
        for (1 .. 1 + int(rand(3))) {
            my $r = rand(); my $off = $r < 0.4 ? int(rand(160)) : $r < 0.7 ? 4096 + int(rand(64))
                : $slots + int(rand(256));
            substr($c, $off, 1) = chr(int(rand(256))) if $off < length($c);
        }
        open(my $o, ">", "$dir/p$i") or die; binmode $o; print $o $c; close $o;
    }' "$D/work.inst.qp" "$D/prof" || exit 99
if "$top_builddir/tests/fuzz_profile" "$D"/prof/p* >"$D/prof.out" 2>&1; then
    ok "300 mutated profiles: read, reported, merged, written and read back"
else
    bad "mutated profiles: $(tail -n 3 "$D/prof.out")"
fi
rm -rf "$D/prof"
# Executables: 120 mutants of small programs and of /usr/bin/true and ls (bench/mutate.sh:
# one-line refusals naming the input's defect, no output left, input unchanged, and the
# rewritten mutant behaves as the mutant does).
if MUTATE_DIR=$D/mutate bash "$top_srcdir/bench/mutate.sh" "$QPT_REWRITE" "${HARDEN_MUTANTS:-120}" \
    >"$D/mutate.out" 2>/dev/null; then
    ok "$(grep '^mutate: [0-9]' "$D/mutate.out")"
else
    bad "mutated executables: $(grep -m 3 '^FAIL' "$D/mutate.out")"
fi

[ "$fails" -eq 0 ] || exit 1
exit 0
