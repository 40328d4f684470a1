#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# `dyn clean` after a killed dyn puts every byte of the code back, whatever the moment
# of the kill:
#  (a) the state a killed dyn can leave, made by hand (tests/dynclean/leftover.c): a
#      trampoline region and three jumps into it, where other bytes read as patches
#      too: a jump whose displacement holds 0xeb 0xf0 (a jmp rel8 by its look, to
#      another jump), and a jump right after the bytes e9 ff (as a call's displacement
#      can end), which with its first bytes read as a jump into the region. dyn clean
#      puts all three back whole (it once put back two bytes of the first alone, and
#      skipped the third behind the false jump: jumps leading nowhere were left);
#  (b) dyn attach --time '*', --all and -e 'time cpu(*) total' on bench/killtarget.c
#      (1-byte rets, short entries, padding, loops, two busy threads), killed with -9 at
#      its N-th write of the target's memory (strace fault injection) for N spread over
#      install and removal: after dyn clean the code is the file's, and the target ends
#      with the result of a plain run;
#  (c) a dyn killed with -9 and not reaped yet (a zombie: its parent, perl here, has not
#      waited for it) is not "a dyn still running": dyn clean takes out what it left;
#  (d) a thread stopped on the jump in padding that a short entry's jmp rel8 leads to
#      (tests/dynclean/parkat.c puts it there, the process stopped) is moved to where
#      that jump leads before the padding's bytes go back: it once ran them (nops into
#      the next procedure, which returned a wrong value: the target's result differed,
#      about one kill in a hundred in (b); a CI run failed so); the process being
#      group-stopped, the thread moved into the trampoline cannot be let out and that
#      memory stays mapped (most runs): after SIGCONT a second clean leaves nothing of
#      dyn's (a third finds nothing);
#  (e) a thread blocked in a system call right before a patched call site is left where
#      it is (the kernel restarts the call two bytes before its pc: moved into the
#      trampoline, it ran two bytes before that and died).
# Skips (77) when ptrace is not allowed; (b) without strace. Exit status: 0 pass, 1
# fail, 99 error.
set -u
: "${top_srcdir:=${srcdir:-.}}"
: "${srcdir:=$top_srcdir}"
. "$top_srcdir/tests/lib.sh"
DYN=$top_builddir/tools/dyn
dyn_setup dyn-clean
qp_have gcc || { echo "SKIP: gcc not installed"; exit 77; }
gcc -O1 -no-pie -o "$dir/leftover" "$srcdir/tests/dynclean/leftover.c" || exit 99
gcc -O2 -falign-functions=1 -pthread -o "$dir/small" "$srcdir/bench/killtarget.c" || exit 99
gcc -O1 -o "$dir/parkat" "$srcdir/tests/dynclean/parkat.c" || exit 99
gcc -O1 -no-pie -o "$dir/sysnext" "$srcdir/tests/dynclean/sysnext.c" || exit 99

"$DYN" run --count r0 -- "$dir/small" - >"$dir/probe.out" 2>"$dir/probe.err"
dyn_skip_untraced "$dir/probe.err"

# (a) The hand-made leftover.
mkdir -p "$dir/a"
"$dir/leftover" "$dir/a" >"$dir/a.out" &
tpid=$!
wait_lines "$dir/a.out" '^ready' 1 || { bad "(a) never ready"; exit 1; }
before=$(text_of $tpid)
touch "$dir/a/craft"
wait_lines "$dir/a.out" '^\(crafted\|skip\)' 1
if grep -q '^skip' "$dir/a.out"; then
    echo "note: (a) skipped: $(cat "$dir/a.out")"
    kill $tpid
else
    "$DYN" clean $tpid >"$dir/a.clean" 2>&1 || bad "(a) dyn clean: $(cat "$dir/a.clean")"
    grep -q '3 jumps put back' "$dir/a.clean" || bad "(a) dyn clean: $(cat "$dir/a.clean")"
    [ "$before" = "$(text_of $tpid)" ] || bad "(a) the code differs after dyn clean"
    touch "$dir/a/stop"
    wait $tpid
    [ $? -eq 0 ] || bad "(a) the program: $(cat "$dir/a.out")"
    grep -q '^ok same' "$dir/a.out" || bad "(a) the program: $(cat "$dir/a.out")"
fi
tpid=

# (c) A killed dyn that is still a zombie.
plain=$("$dir/small" -)
rm -f "$dir/stop"
"$dir/small" "$dir/stop" >"$dir/small.out" 2>&1 &
tpid=$!
sleep 0.2
before=$(text_of $tpid)
perl -e '$| = 1; my $p = fork; if (!$p) { open(STDERR, ">", shift); exec @ARGV; exit 99 }
    print "$p\n"; sleep 60' "$dir/c.err" "$DYN" attach $tpid --time '*' >"$dir/c.pid" &
ppid=$!
wait_lines "$dir/c.err" 'instrumented' 1 || bad "(c) attach: $(cat "$dir/c.err")"
dp=$(cat "$dir/c.pid")
kill -9 "$dp"
sleep 0.2
if [ "$(sed 's/.*) //' /proc/"$dp"/stat | cut -c1)" = Z ]; then
    wait_untraced $tpid
    "$DYN" clean $tpid >"$dir/c.clean" 2>&1 || bad "(c) dyn clean: $(cat "$dir/c.clean")"
    grep -q 'jumps put back' "$dir/c.clean" || bad "(c) dyn clean: $(cat "$dir/c.clean")"
    [ "$before" = "$(text_of $tpid)" ] || bad "(c) the code differs after dyn clean"
else
    echo "note: (c) skipped: dyn $dp is not a zombie"
fi
kill $ppid 2>/dev/null
wait $ppid 2>/dev/null
touch "$dir/stop"
wait $tpid
st=$?
tpid=
[ $st -eq 0 ] && [ "$(cat "$dir/small.out")" = "$plain" ] ||
    bad "(c) the target exited $st: $(cat "$dir/small.out")"

# (d) A thread stopped on a short entry's padding jump (t0's: 4 bytes, lea and ret).
rm -f "$dir/stop"
"$dir/small" "$dir/stop" >"$dir/small.out" 2>&1 &
tpid=$!
sleep 0.2
"$DYN" attach $tpid --time '*' >"$dir/d.out" 2>"$dir/d.err" &
dpid=$!
dyn_wait_for "$dir/d.err" instrumented
kill -9 $dpid
wait $dpid 2>/dev/null
dpid=
wait_untraced $tpid
base=$(awk '$6 ~ /\/small$/ && $3 == "00000000" { split($1, r, "-"); print r[1]; exit }' /proc/$tpid/maps)
t0=$(nm "$dir/small" | awk '$3 == "t0" { print $1 }')
"$dir/parkat" $tpid "$(printf '%x' $((0x$base + 0x$t0)))" >"$dir/d.park" 2>&1
pst=$?
if [ $pst -eq 0 ]; then
    "$DYN" clean $tpid >"$dir/d.clean" 2>&1 || bad "(d) dyn clean: $(cat "$dir/d.clean")"
elif [ $pst -eq 77 ]; then
    echo "note: (d) skipped: $(cat "$dir/d.park")"
    "$DYN" clean $tpid >"$dir/d.clean" 2>&1
else
    bad "(d) parkat: $(cat "$dir/d.park")"
fi
kill -CONT $tpid
# Group-stopped by parkat's SIGSTOP, the process lets no thread run: one moved onto the
# trampoline the padding jump led to cannot be let out of it, and that memory stays
# mapped (most runs). Once continued, a second clean lets it out and unmaps the rest:
# then nothing of dyn's is left.
if [ $pst -eq 0 ]; then
    "$DYN" clean $tpid >"$dir/d.clean2" 2>&1 || bad "(d) dyn clean after SIGCONT: $(cat "$dir/d.clean2")"
    "$DYN" clean $tpid >"$dir/d.clean3" 2>&1
    grep -q "nothing of dyn's found" "$dir/d.clean3" ||
        bad "(d) dyn's memory left after SIGCONT and a second clean: $(cat "$dir/d.clean" "$dir/d.clean2" "$dir/d.clean3")"
fi
touch "$dir/stop"
wait $tpid
st=$?
tpid=
[ $st -eq 0 ] && [ "$(cat "$dir/small.out")" = "$plain" ] ||
    bad "(d) the target exited $st after a thread parked on a padding jump: $(cat "$dir/small.out") ($(cat "$dir/d.park"); $(cat "$dir/d.clean"))"

# (e) A thread blocked in a system call right before a patched call site (--calls-from):
# its pc is the patch's address, but the kernel restarts the call two bytes before; dyn
# clean moved it into the trampoline (the restart then ran two bytes before that: SIGSEGV).
# (The compiler's code must put the call right after the syscall, else (e) tests nothing.)
if ! objdump -d --no-show-raw-insn "$dir/sysnext" | awk '/<waiter>:/ { w = 1 } w && prev ~ /\tsyscall/ && /\tcall / { ok = 1 } { prev = $0 } END { exit !ok }'; then
    bad "(e) sysnext's waiter has no call right after its syscall: nothing tested"
fi
"$dir/sysnext" 6 >"$dir/e.out" 2>&1 &
tpid=$!
sleep 0.2
"$DYN" attach $tpid --calls-from waiter >/dev/null 2>"$dir/e.err" &
dpid=$!
dyn_wait_for "$dir/e.err" instrumented
kill -9 $dpid
wait $dpid 2>/dev/null
dpid=
wait_untraced $tpid
"$DYN" clean $tpid >"$dir/e.clean" 2>&1 || bad "(e) dyn clean: $(cat "$dir/e.clean")"
grep -q 'jumps put back' "$dir/e.clean" || bad "(e) dyn clean: $(cat "$dir/e.err" "$dir/e.clean")"
wait $tpid
st=$?
tpid=
[ $st -eq 0 ] && grep -q '^ticks 2$' "$dir/e.out" ||
    bad "(e) the target exited $st: $(cat "$dir/e.out"; cat "$dir/e.clean")"

# (b) Kills at the N-th memory write of a session.
if ! strace -o /dev/null true 2>/dev/null; then
    echo "note: (b) skipped: no strace"
    exit $((fails > 0))
fi
kills=0
# kill_at N ARGS...: dyn attach ARGS killed at its N-th write.
kill_at() {
    _n=$1
    shift
    rm -f "$dir/stop"
    "$dir/small" "$dir/stop" >"$dir/small.out" 2>&1 &
    tpid=$!
    sleep 0.2
    _before=$(text_of $tpid)
    { strace -f -o /dev/null -e trace=pwrite64 -e inject=pwrite64:signal=KILL:when=$_n \
        "$DYN" attach $tpid "$@" --duration 0.2 >/dev/null 2>"$dir/b.err"; } 2>/dev/null
    [ $? -eq 137 ] && kills=$((kills + 1))
    wait_untraced $tpid
    "$DYN" clean $tpid >"$dir/b.clean" 2>&1 || bad "(b) $* #$_n: dyn clean: $(cat "$dir/b.clean")"
    [ "$_before" = "$(text_of $tpid)" ] ||
        bad "(b) $* killed at write #$_n: the code differs after dyn clean: $(cat "$dir/b.clean")"
    touch "$dir/stop"
    wait $tpid
    _st=$?
    tpid=
    [ $_st -eq 0 ] && [ "$(cat "$dir/small.out")" = "$plain" ] ||
        bad "(b) $* #$_n: the target exited $_st: $(cat "$dir/small.out")"
}
for n in 20 45 75 98; do
    kill_at $n --time '*'
done
for n in 30 70; do
    kill_at $n --all
done
for n in 60 150; do
    kill_at $n -e 'time cpu(*) total'
done
# (The numbers of writes depend on the compiler's code: some attaches may end first.)
[ $kills -ge 1 ] || bad "(b) none of the 8 attaches was killed"
echo "dyn-clean: hand-made leftovers, a zombie dyn's and a thread on a padding jump and one in a system call before a patch put back; $kills of 8 attaches killed at chosen writes, cleaned"
exit $((fails > 0))
