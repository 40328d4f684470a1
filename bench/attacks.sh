#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Local attacks on instrumented programs (issue 28, section 2), N times each: what an
# unprivileged user (nobody) can plant where a run of another user (root) writes, and a
# process that holds the profile's lock while stopped. For each class: tried, refused
# (the run went on and said so on stderr), harmed (a file not the run's was created,
# filled or emptied; a run did not end within 2 s).
#   symlink at PROG.qp: to an empty file, a file with data, nothing (dangling), a folder
#   symlink at PROG.trace.TID: to a file, to nothing
#   hard link of root's empty file at PROG.qp
#   an empty 0666 file of root's at QP_PROFILE (sticky folder), run by nobody
#   a file of nobody's at PROG.trace.TID (sticky folder), run by root
#   set-user-ID: an earlier run's trace (root's, our format) at the TID of a later run
#   by another user
#   the profile's lock held by a stopped process: each run must end within 2 s; the
#   counts at the end must be exact
# Links are planted in a folder nobody owns (fs.protected_symlinks does not apply), and
# every run that writes a trace is started with its pid known before it runs (no guess).
# Usage (as root, with setpriv and flock): bench/attacks.sh QPT-REWRITE [N]; QP (the qp
# beside QPT-REWRITE by default); work in $ATTACK_DIR (default ./attacks.d). Exit 1 when
# anything was harmed.
set -u
[ $# -ge 1 ] || { echo "usage: $0 QPT-REWRITE [N]" >&2; exit 2; }
RW=$1
N=${2:-10}
QP=${QP:-$(dirname "$RW")/qp}
W=${ATTACK_DIR:-./attacks.d}
if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null || ! command -v flock >/dev/null; then
    echo "attacks: needs root, setpriv and flock" >&2
    exit 77
fi
rm -rf "$W"
mkdir -p "$W" && chmod 755 "$W" && W=$(cd "$W" && pwd) || exit 99
cat >"$W/work.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
static volatile long sink;
__attribute__((noinline)) void work(long i) { sink += i; }
int main(int argc, char **argv) {
    long n = argc > 3 ? atol(argv[3]) : 1;
    for (long i = 0; i < n; i++) work(i);
    puts("done");
    return 0;
}
C
gcc -O2 -o "$W/work" "$W/work.c" || exit 99
"$RW" "$W/work" -o "$W/prog" >/dev/null 2>&1 || exit 99
"$RW" --driver=trace "$W/work" -o "$W/tprog" >/dev/null 2>&1 || exit 99
harmed=0
nob() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
planted() { # planted PLANT CMD...
    local plant=$1 w; shift
    rm -f "$W/run.pid" "$W/run.go"
    sh -c 'echo $$ >"$0.pid"; while [ ! -e "$0.go" ]; do sleep 0.01; done; exec "$@"' "$W/run" "$@" &
    w=$!
    while [ ! -s "$W/run.pid" ]; do sleep 0.01; done
    "$plant" "$(cat "$W/run.pid")"
    touch "$W/run.go"; wait "$w"
}
report() { echo "$1: $N tried, $2 refused, $3 harmed"; harmed=$((harmed + $3)); }
A=$W/att; O=$W/own; mkdir -p "$A" "$O"; chown nobody "$A"
cp "$W/prog" "$W/tprog" "$A/"
# 1. symlink at PROG.qp (root runs a program in nobody's folder): targets of 4 kinds
ref=0; harm=0
for i in $(seq "$N"); do
    rm -f "$A/prog.qp" "$O"/t*; rm -rf "$O/d"
    case $((i % 4)) in
    0) : >"$O/t$i" ;; 1) echo data >"$O/t$i" ;; 2) ;; 3) mkdir "$O/d" ;;
    esac
    sum=$(cat "$O"/t* 2>/dev/null | cksum)
    tgt=$O/t$i; [ $((i % 4)) = 3 ] && tgt=$O/d
    nob ln -s "$tgt" "$A/prog.qp"
    out=$(cd / && "$A/prog" one 1 5 2>&1)
    if [ "$(cat "$O"/t* 2>/dev/null | cksum)" != "$sum" ] || { [ $((i % 4)) = 2 ] && [ -e "$O/t$i" ]; }; then harm=$((harm+1));
    elif echo "$out" | grep -q "not saved"; then ref=$((ref+1)); fi
done
report "symlink at PROG.qp (empty, data, dangling, folder)" $ref $harm
# 2. symlink at PROG.trace.TID (root runs)
ref=0; harm=0
for i in $(seq "$N"); do
    rm -f "$A"/tprog.trace.* "$O"/t*; echo keep >"$O/t"
    case $((i % 2)) in 0) tgt=$O/t ;; 1) tgt=$O/new$i ;; esac
    pl() { nob ln -s "$tgt" "$A/tprog.trace.$1"; }
    out=$(cd / && planted pl "$A/tprog" one 1 5 2>&1)
    if [ "$(cat "$O/t")" != keep ] || [ -e "$O/new$i" ]; then harm=$((harm+1));
    elif echo "$out" | grep -q "symbolic link"; then ref=$((ref+1)); fi
done
report "symlink at PROG.trace.TID (existing, dangling)" $ref $harm
# 3. hard link of root's empty file at PROG.qp (fs.protected_hardlinks does not stop root's own runs)
ref=0; harm=0
for i in $(seq "$N"); do
    rm -f "$A/prog.qp" "$O/e"; : >"$O/e"; ln "$O/e" "$A/prog.qp"
    out=$(cd / && "$A/prog" one 1 5 2>&1)
    if [ -s "$O/e" ]; then harm=$((harm+1)); elif echo "$out" | grep -q "not saved"; then ref=$((ref+1)); fi
done
rm -f "$A/prog.qp"
report "hard link of an empty file at PROG.qp" $ref $harm
# 4. empty file of another user (root's, 0666) at QP_PROFILE in a sticky folder, nobody runs
P=$W/pub; mkdir -p "$P"; chmod 1777 "$P"
ref=0; harm=0
for i in $(seq "$N"); do
    rm -f "$P/s.qp"; : >"$P/s.qp"; chmod 666 "$P/s.qp"
    out=$(cd / && QP_PROFILE=$P/s.qp nob "$W/prog" one 1 5 2>&1)
    if [ -s "$P/s.qp" ]; then harm=$((harm+1)); elif echo "$out" | grep -q "not saved"; then ref=$((ref+1)); fi
done
report "empty 0666 file of another user at QP_PROFILE" $ref $harm
# 5. another user's file (not a trace) at PROG.trace.TID in a sticky folder, root runs
cp "$W/tprog" "$P/"
ref=0; harm=0
for i in $(seq "$N"); do
    rm -f "$P"/tprog.trace.*
    pl() { nob sh -c "echo theirs >'$P/tprog.trace.$1'"; }
    out=$(cd / && planted pl "$P/tprog" one 1 5 2>&1)
    if [ "$(cat "$P"/tprog.trace.* | tr -d '\000')" != theirs ]; then harm=$((harm+1));
    elif echo "$out" | grep -q "not written"; then ref=$((ref+1)); fi
done
report "another user's file at PROG.trace.TID (sticky folder)" $ref $harm
# 6. set-user-ID: an earlier run's trace (root's, our format) at a reused TID, uid 12345 runs
S=$W/sec; mkdir -p "$S"; cp "$W/tprog" "$S/"; chmod 4755 "$S/tprog"
rm -f "$S"/tprog.trace.*; (cd / && nob "$S/tprog" one 1 7 >/dev/null 2>&1)
E=$W/earlier; mv "$S"/tprog.trace.* "$E"
ref=0; harm=0
for i in $(seq "$N"); do
    rm -f "$S"/tprog.trace.*
    pl() { cp -p "$E" "$S/tprog.trace.$1"; }
    out=$(cd / && planted pl setpriv --reuid=12345 --regid=12345 --clear-groups "$S/tprog" one 1 5 2>&1)
    if ! cmp -s "$S"/tprog.trace.* "$E"; then harm=$((harm+1));
    elif echo "$out" | grep -q "not written"; then ref=$((ref+1)); fi
done
report "set-user-ID: earlier trace at a reused TID" $ref $harm
# 7. lock DoS: holder stopped; each run must end within 2 s
ref=0; harm=0
rm -f "$W/prog.qp"; (cd "$W" && ./prog one 1 1 >/dev/null)
for i in $(seq "$N"); do
    rm -f "$W/h.pid"
    flock "$W/prog.qp" sh -c 'echo $$ >"$0"; kill -STOP $$' "$W/h.pid" & h=$!
    while [ ! -s "$W/h.pid" ]; do sleep 0.01; done
    out=$(cd "$W" && timeout 2 ./prog one 1 100 2>&1); st=$?
    kill -CONT "$(cat "$W/h.pid")"; wait $h
    if [ $st -ne 0 ] || [ "$out" != done ]; then harm=$((harm+1)); else ref=$((ref+1)); fi
done
c=$("$QP" report --csv "$W/prog.qp" 2>/dev/null | awk -F, '$1=="work"{print $2}')
[ "$c" = $((N * 100 + 1)) ] || harm=$((harm + 1))
report "lock held by a stopped process (runs that ended in 2 s: refused; calls $c of $((N * 100 + 1)))" $ref $harm
[ "$harmed" -eq 0 ]
