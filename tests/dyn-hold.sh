#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# dyn's loader guard (dynamic/dyn_ptrace_guard.c) with a held thread that takes a signal,
# and with a forked child: deterministic, the program (tests/dynhold/main.c) puts one of
# its threads where such a thread is (its SIGILL handler sets the interrupted pc to the
# trampoline's instruction after the futex call) while dyn follows it
# (-c 'libnope*:f': it waits for a library, so it follows the loader):
#  (a) live: the handler returns into the wait at once; while dyn lives the thread must
#      be seen and let go (it counts itself each time round the loop);
#  (b) after: the handler waits until dyn's session has ended (SIGTERM) and then returns
#      into the trampoline: it must return from there (the code stays, all rets), not
#      fault on an unmapped page; and the shared page (qpt-brk) is gone;
#  (c) child: a forked child calls its copy of the trampoline: it returns at once
#      (never held while dyn lives);
#  (c2) the same with a child made with CLONE_NEWPID of a program that is process 1 of
#      its pid namespace (unshare -p -f; skipped where not allowed);
#  (d) no guard: the program refuses memfd_create (seccomp), so dyn falls back to the
#      int3: dyn says so, once, with what a kill would do; killed, `dyn clean` puts the
#      loader's r_brk back and the program's dlopen then works;
#  (d3) the guard with MADV_WIPEONFORK refused (seccomp): dyn says the pid alone tells
#      a forked child from the process, once;
#  (d2) the same with --commands: the note still on standard error (not an answer);
#  (e) dyn clean leaves alone a jump at r_brk that does not lead to a trampoline of
#      dyn's (one clear line), and closes a descriptor named like a killed dyn's memfd;
#  (e2) dyn clean aimed at a running dyn (a tracer) closes none of its descriptors;
#  (e3) nor those of a tracer whose tracing thread is not its first, and says so; nor
#      one the process maps itself (a mutator's own, its target gone);
#  (f) a library loaded and unloaded again and again (-c 'libqt.so:lib_sum'): the
#      process's /memfd:qpt-vars mappings do not grow with the cycles (5, then 15), and
#      the counts of the unloaded copies are all reported (15 calls);
#  (g) sessions one after the other reuse the trampoline's page: 3 sessions, one
#      address; (g2) a killed dyn's (SIGKILL) too, once `dyn clean` has retired its
#      code to rets (the code a new session writes over is never live); and a thread that returns from its handler into the page while a later
#      session follows is held and let go by that one.
# Skips (77) without gcc or when ptrace is not allowed. Exit: 0 pass, 1 fail, 99 error.
set -u
: "${top_srcdir:=.}"
: "${top_builddir:=.}"
. "$top_srcdir/tests/lib.sh"
DYN=$top_builddir/tools/dyn
dyn_setup dyn-hold
d=$dir
qp_have gcc || { echo "SKIP: gcc not installed"; exit 77; }
gcc -O2 -fPIC -shared -o "$d/libqt.so" "$top_srcdir/tests/dynlib/lib.c" || exit 99
gcc -O1 -o "$d/main" "$top_srcdir/tests/dynhold/main.c" -ldl -lpthread || exit 99

# start MODE: the program and a dyn following it; waits for dyn's start and the guard.
start() {
    rm -f "$d/go"
    "$d/main" "$1" "$d" >"$d/$1.out" 2>&1 &
    tpid=$!
    wait_lines "$d/$1.out" '^ready' 1 20 || bad "$1: the program never started"
    "$DYN" attach $tpid -c 'libnope*:f' >"$d/$1.dyn" 2>"$d/$1.err" &
    dpid=$!
    dyn_wait_for "$d/$1.err" "^dyn: $tpid: "
    dyn_skip_untraced "$d/$1.err"
    wait_lines "$d/$1.out" '^guard' 1 20 || bad "$1: the guard never seen: $(cat "$d/$1.out")"
}

# stop_dyn: end the dyn session cleanly (SIGTERM), as a user does.
stop_dyn() {
    kill -TERM $dpid 2>/dev/null
    wait $dpid 2>/dev/null
    dpid=
}

# finish MODE: the program's end: status 0, "returned".
finish() {
    wait $tpid
    rc=$?
    tpid=
    expect_eq "$1: the program's exit status" $rc 0
    grep -q '^returned' "$d/$1.out" && ok "$1: the call returned" \
        || bad "$1: no return: $(cat "$d/$1.out")"
}

# (a) returned into the wait while dyn lives: seen and let go before dyn ends
start live
if wait_lines "$d/live.out" '^returned' 1 10; then
    ok "live: the thread was let go while dyn lived"
else
    bad "live: the thread is still held after 10 s (dyn never saw it again)"
fi
stop_dyn
finish live

# (b) returned into the trampoline after dyn's session ended
start after
wait_lines "$d/after.out" '^handler' 1 20 || bad "after: the handler never ran"
stop_dyn
expect_eq "after: shared pages left" "$(grep -c 'qpt-brk' /proc/$tpid/maps)" 0
touch "$d/go"
finish after

# (c) a forked child's copy of the trampoline
start child
if wait_lines "$d/child.out" '^child returned' 1 10; then
    ok "child: its copy returned at once"
else
    bad "child: held in its copy of the trampoline while dyn lives"
fi
stop_dyn
finish child

# (c2) a child that is process 1 of a new pid namespace, of a program that is process 1
# of its own (both see getpid() == 1): its copy returns at once too
if unshare -p -f true 2>/dev/null; then
    rm -f "$d/go"
    unshare -p -f "$d/main" nschild "$d" >"$d/nschild.out" 2>&1 &
    upid=$!
    wait_lines "$d/nschild.out" '^ready' 1 20 || bad "nschild: the program never started"
    tpid=$(cat /proc/$upid/task/$upid/children 2>/dev/null | awk '{ print $1 }')
    "$DYN" attach $tpid -c 'libnope*:f' >"$d/nschild.dyn" 2>"$d/nschild.err" &
    dpid=$!
    dyn_wait_for "$d/nschild.err" "^dyn: $tpid: "
    wait_lines "$d/nschild.out" '^guard' 1 20 || bad "nschild: the guard never seen"
    if wait_lines "$d/nschild.out" '^child returned' 1 10; then
        ok "nschild: the copy of a child in a new pid namespace returned at once"
    else
        bad "nschild: held in its copy of the trampoline while dyn lives"
    fi
    stop_dyn
    wait $upid
    expect_eq "nschild: the program's exit status" $? 0
    tpid=
else
    echo "skip nschild: unshare -p not allowed here"
fi

# (d) the int3 fallback, said
rm -f "$d/go"
"$d/main" nomemfd "$d" >"$d/nomemfd.out" 2>&1 &
tpid=$!
wait_lines "$d/nomemfd.out" '^ready' 1 20 || bad "nomemfd: the program never started"
"$DYN" attach $tpid -c 'libnope*:f' >"$d/nomemfd.dyn" 2>"$d/nomemfd.err" &
dpid=$!
dyn_wait_for "$d/nomemfd.err" "waiting for the libraries"
expect_eq "nomemfd: the int3 said, once" \
    "$(grep -c "the loader's breakpoint is a plain int3 here .*unless 'dyn clean $tpid' runs first" \
        "$d/nomemfd.err")" 1
kill -9 $dpid
wait $dpid 2>/dev/null
dpid=
"$DYN" clean $tpid >"$d/nomemfd.clean" 2>&1
grep -q "loader's breakpoint .* put back" "$d/nomemfd.clean" && ok "nomemfd: clean" \
    || bad "nomemfd: clean said: $(cat "$d/nomemfd.clean")"
touch "$d/go"
finish nomemfd

# (d3) MADV_WIPEONFORK refused: the guard, the pid alone telling a child; said once
rm -f "$d/go"
"$d/main" nowipe "$d" >"$d/nowipe.out" 2>&1 &
tpid=$!
wait_lines "$d/nowipe.out" '^ready' 1 20 || bad "nowipe: the program never started"
"$DYN" attach $tpid -c 'libnope*:f' >"$d/nowipe.dyn" 2>"$d/nowipe.err" &
dpid=$!
dyn_wait_for "$d/nowipe.err" "waiting for the libraries"
expect_eq "nowipe: the missing MADV_WIPEONFORK said, once" \
    "$(grep -c "cannot tell a forked child from the process but by its pid (MADV_WIPEONFORK refused)" \
        "$d/nowipe.err")" 1
expect_eq "nowipe: no int3 said" "$(grep -c "plain int3" "$d/nowipe.err")" 0
touch "$d/go"
wait_lines "$d/nowipe.out" '^returned' 1 20 || bad "nowipe: the dlopen did not return"
stop_dyn
finish nowipe

# (d2) the same note in --commands mode: on standard error, not among the answers
rm -f "$d/go"
"$d/main" nomemfd "$d" >"$d/nmcmd.out" 2>&1 &
tpid=$!
wait_lines "$d/nmcmd.out" '^ready' 1 20 || bad "nomemfd --commands: the program never started"
(sleep 2; echo quit) | "$DYN" attach $tpid -c 'libnope*:f' --commands >"$d/nmcmd.dyn" \
    2>"$d/nmcmd.err"
expect_eq "nomemfd --commands: the int3 said on standard error" \
    "$(grep -c "the loader's breakpoint is a plain int3 here" "$d/nmcmd.err")" 1
touch "$d/go"
finish nmcmd

# (e) a jump at r_brk that is not dyn's; a descriptor a killed dyn left
rm -f "$d/go"
"$d/main" leftover "$d" >"$d/leftover.out" 2>&1 &
tpid=$!
wait_lines "$d/leftover.out" '^ready' 1 20 || bad "leftover: the program never started"
"$DYN" clean $tpid >"$d/leftover.clean" 2>"$d/leftover.cerr"
expect_eq "leftover: dyn clean's exit status" $? 0
grep -q "^dyn: $tpid: the loader's r_brk jumps to 0x[0-9a-f]*, which is not a trampoline of dyn's: left alone$" \
    "$d/leftover.cerr" && ok "leftover: the foreign jump refused, said" \
    || bad "leftover: clean said: $(cat "$d/leftover.cerr" "$d/leftover.clean")"
grep -q "1 descriptor a killed dyn left open closed" "$d/leftover.clean" \
    && ok "leftover: the descriptor closed, said" \
    || bad "leftover: clean said: $(cat "$d/leftover.clean")"
touch "$d/go"
finish leftover

# (e3) dyn clean aimed at a tracer whose tracing thread is not its first (TracerPid is
# that thread's id): its own memfd left open, said
rm -f "$d/go"
"$d/main" tracer "$d" >"$d/tracer.out" 2>&1 &
tpid=$!
wait_lines "$d/tracer.out" '^ready' 1 20 || bad "tracer: the program never started"
"$DYN" clean $tpid >"$d/tracer.clean" 2>"$d/tracer.cerr"
grep -q "^dyn: $tpid: a dyn or a tracer (a running mutator): its 1 descriptor named like a killed dyn's memfds left open" \
    "$d/tracer.cerr" && ok "tracer: its memfd left open, said" \
    || bad "tracer: clean said: $(cat "$d/tracer.cerr" "$d/tracer.clean")"
touch "$d/go"
finish tracer
rm -f "$d/go"
"$d/main" ownfd "$d" >"$d/ownfd.out" 2>&1 &
tpid=$!
wait_lines "$d/ownfd.out" '^ready' 1 20 || bad "ownfd: the program never started"
"$DYN" clean $tpid >"$d/ownfd.clean" 2>"$d/ownfd.cerr"
grep -q "^dyn: $tpid: 1 descriptor named like a killed dyn's memfds, mapped by the process itself, left open" \
    "$d/ownfd.cerr" && ok "ownfd: a memfd the process maps itself left open, said" \
    || bad "ownfd: clean said: $(cat "$d/ownfd.cerr" "$d/ownfd.clean")"
touch "$d/go"
finish ownfd

# (e2) dyn clean aimed at a running dyn: the memfds it holds are its own, left open
rm -f "$d/go"
"$d/main" tramps "$d" >"$d/running.out" 2>&1 &
tpid=$!
wait_lines "$d/running.out" '^ready' 1 20 || bad "running: the program never started"
"$DYN" attach $tpid -c 'main' >"$d/running.dyn" 2>"$d/running.err" &
dpid=$!
dyn_wait_for "$d/running.err" "procedures instrumented"
n0=$(ls -l /proc/$dpid/fd 2>/dev/null | grep -c 'memfd:qpt-')
"$DYN" clean $dpid >"$d/running.clean" 2>&1
n1=$(ls -l /proc/$dpid/fd 2>/dev/null | grep -c 'memfd:qpt-')
if [ "$n0" -gt 0 ] && [ "$n1" = "$n0" ]; then
    ok "running: dyn clean of a running dyn left its $n0 memfd descriptor(s) open"
else
    bad "running: dyn's memfd descriptors $n0 before dyn clean of it, $n1 after: $(cat "$d/running.clean")"
fi
stop_dyn
touch "$d/go"
finish running

# (f) variables of a library loaded again and again
mkfifo "$d/in" || exit 99
"$d/main" cycles "$d" "$(cd "$d" && pwd)/libqt.so" <"$d/in" >"$d/cycles.out" 2>&1 &
tpid=$!
exec 7>"$d/in"
wait_lines "$d/cycles.out" '^ready' 1 20 || bad "cycles: the program never started"
"$DYN" attach $tpid -c 'libqt.so:lib_sum' -o "$d/cycles.csv" >"$d/cycles.dyn" \
    2>"$d/cycles.err" &
dpid=$!
dyn_wait_for "$d/cycles.err" "waiting for the libraries"
echo 5 >&7
wait_lines "$d/cycles.out" '^done' 1 20 || bad "cycles: no answer to 5"
n5=$(grep -c 'qpt-vars' /proc/$tpid/maps)
echo 10 >&7
wait_lines "$d/cycles.out" '^done' 2 20 || bad "cycles: no answer to 10"
n15=$(grep -c 'qpt-vars' /proc/$tpid/maps)
if [ "$n15" -le "$n5" ] && [ "$n5" -le 1 ]; then
    ok "cycles: qpt-vars mappings after 5 cycles $n5, after 15 $n15"
else
    bad "cycles: qpt-vars mappings grow: $n5 after 5 cycles, $n15 after 15"
fi
stop_dyn
expect_eq "cycles: libqt.so:lib_sum's calls over 15 loads" \
    "$(awk -F, '$1 == "libqt.so:lib_sum" { print $2 }' "$d/cycles.csv")" 15
exec 7>&-
wait $tpid
expect_eq "cycles: the program's exit status" $? 0
tpid=

# (g) one page for every session
rm -f "$d/go"
"$d/main" tramps "$d" >"$d/tramps.out" 2>&1 &
tpid=$!
wait_lines "$d/tramps.out" '^ready' 1 20 || bad "tramps: the program never started"
for i in 1 2 3; do
    "$DYN" attach $tpid -c 'libnope*:f' --duration 0.5 >/dev/null 2>"$d/tramps$i.err"
    wait_lines "$d/tramps.out" '^session' $i 10 || bad "tramps: session $i not seen"
done
expect_eq "tramps: sessions seen" "$(grep -c '^session' "$d/tramps.out")" 3
expect_eq "tramps: trampoline addresses" "$(grep '^session' "$d/tramps.out" | sort -u | wc -l)" 1
# (g2) a killed dyn's trampoline: live code until dyn clean retires it (then reused)
"$DYN" attach $tpid -c 'libnope*:f' >/dev/null 2>"$d/tramps4.err" &
dpid=$!
wait_lines "$d/tramps.out" '^session' 4 10 || bad "tramps: session 4 not seen"
kill -9 $dpid
wait $dpid 2>/dev/null
dpid=
"$DYN" clean $tpid >"$d/tramps.clean" 2>&1
wait_lines "$d/tramps.out" '^out' 4 10 || bad "tramps: r_brk not put back by dyn clean"
expect_eq "tramps: the trampolines retired (sessions ended, dyn clean)" \
    "$(grep -c '^out rets' "$d/tramps.out")" 4
"$DYN" attach $tpid -c 'libnope*:f' --duration 0.5 >/dev/null 2>"$d/tramps5.err"
wait_lines "$d/tramps.out" '^session' 5 10 || bad "tramps: session 5 not seen"
expect_eq "tramps: the killed dyn's page reused once retired" \
    "$(grep '^session' "$d/tramps.out" | sort -u | wc -l)" 1
touch "$d/go"
finish tramps
start after
wait_lines "$d/after.out" '^handler' 1 20 || bad "again: the handler never ran"
stop_dyn
"$DYN" attach $tpid -c 'libnope*:f' >"$d/again.dyn" 2>"$d/again.err" &
dpid=$!
dyn_wait_for "$d/again.err" "waiting for the libraries"
touch "$d/go"
if wait_lines "$d/after.out" '^returned' 1 10; then
    ok "again: the thread back in the page was let go by the next session"
else
    bad "again: the thread is still held after 10 s"
fi
stop_dyn
finish after

[ $fails -eq 0 ] || exit 1
exit 0
