#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Live procedures relocated whole (issue 29): dyn --time of procedures whose exits do
# not fit in place, or that other code jumps into (tests/dynreloc/main.c says which):
#  (a) `dyn run`: all timed, none refused; calls exact (me and sc 3N/2, lp 2N, spin and
#      se N; --count of se exact too);
#      me's and sc's wall time within [1, 2] x their sleeps (me's callee runs through
#      me's middle before its sleep: a timer stopped there would miss the sleep); the
#      program's results right (a callee returning into the copy at a 3-byte and a
#      4-byte return site, a loop in the copy);
#  (b) dyn attach to the running program (asleep in the callees, their return addresses
#      at the return sites, or in spin's loop) for a window, detach: the code (every
#      executable mapping) byte for byte what it was, no mapping left (a thread inside
#      a copy is moved to the same instruction of the original), the counts there;
#      (b2) the same with -e 'time wall(spin)';
#  (c) dyn killed (SIGKILL) while instrumented: the program goes on right, `dyn clean`
#      puts every byte back; at the end every result the program computed was right;
#  (d) -e 'time wall(...)' of the same procedures (entry and exits in the copy): times
#      within the same bounds, nothing left unmeasured, calls of me exact.
# Skips (77) when ptrace is not allowed. Exit status: 0 pass, 1 fail, 99 error.
set -u
: "${top_srcdir:=${srcdir:-.}}"
: "${srcdir:=$top_srcdir}"
. "$top_srcdir/tests/lib.sh"
DYN=$top_builddir/tools/dyn
dyn_setup dyn-reloc

command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
${CC:-cc} -O2 -o "$dir/prog" "$srcdir/tests/dynreloc/main.c" || exit 99
P=$dir/prog
WHAT="--time me --time sc --time lp --time spin --time se"

"$DYN" run --count me -- "$P" 1 1 >"$dir/probe.out" 2>"$dir/probe.err"
dyn_skip_untraced "$dir/probe.err"

# (a) exact counts, nothing refused, times within bounds (N rounds of 2 ms sleeps).
N=200
# shellcheck disable=SC2086
"$DYN" run -v $WHAT -- "$P" $N 2 >"$dir/run.out" 2>"$dir/run.err"
grep -q "^ok n=$N" "$dir/run.out" || bad "(a) results: $(cat "$dir/run.out" "$dir/run.err")"
grep -q '5 procedures instrumented, 0 refused' "$dir/run.err" ||
    bad "(a) refused: $(cat "$dir/run.err")"
awk -v n=$N '
    $NF == "me" || $NF == "sc" {
        if ($1 != n * 3 / 2) { print "FAIL (a) " $NF " calls: " $0; bad = 1 }
        if ($2 < n * 2 || $2 > n * 2 * 2) { print "FAIL (a) " $NF " time: " $0; bad = 1 }
        seen++ }
    $NF == "lp" { if ($1 != n * 2) { print "FAIL (a) lp calls: " $0; bad = 1 }; seen++ }
    $NF == "spin" || $NF == "se" { if ($1 != n) { print "FAIL (a) " $NF " calls: " $0; bad = 1 }; seen++ }
    END { if (seen != 5) { print "FAIL (a) rows missing"; bad = 1 }; exit bad }' \
    "$dir/run.out" || fails=$((fails + 1))

# ... and se counted alone (its entry through a slot of its own code).
"$DYN" run -v --count se -- "$P" $N 1 >"$dir/cnt.out" 2>"$dir/cnt.err"
grep -E -q "^ +$N +se\$" "$dir/cnt.out" || bad "(a) --count se: $(cat "$dir/cnt.out" "$dir/cnt.err")"

# (b) attach for a window, detach: the code as it was; (c) dyn killed while
# instrumented: the program goes on right, dyn clean puts the code back.
dyn_leaves_no_trace b c 5 lp

# (b2) the same with -e: `time wall(spin)` attached for a window, three times, while the
# program is mostly inside spin's loop: no mapping left after each detach (the thread
# in the loop's trampoline let out once the exits are back; main left the code and
# its counters mapped).
rm -f "$dir/stop"
"$P" wait "$dir/stop" >"$dir/wait2.out" &
tpid=$!
sleep 0.3
_maps=$(maps_of $tpid)
for _k in 1 2 3; do
    "$DYN" attach $tpid -e 'time wall(spin)' --duration 0.3 >"$dir/e-att.out" 2>"$dir/e-att.err" ||
        bad "(b2) attach: $(cat "$dir/e-att.err")"
    [ "$_maps" = "$(maps_of $tpid)" ] ||
        { bad "(b2) -e 'time wall(spin)': mappings left after detach $_k"; break; }
done
touch "$dir/stop"
wait $tpid
tpid=
[ "$(cat "$dir/wait2.out")" = "ok same" ] || bad "(b2) program: $(cat "$dir/wait2.out")"

# (d) -e takes the same shapes (their entry and exits in the copy): each timed within
# [1, 2] x its sleeps, nothing left unmeasured, the calls of me counted exactly.
"$DYN" run -e 'time wall(me)' -e 'time wall(sc)' -e 'time wall(lp)' -e 'time wall(spin)' \
    -e 'count calls(me)' -- "$P" $N 2 >"$dir/e.out" 2>"$dir/e.err"
grep -q "^ok n=$N" "$dir/e.out" || bad "(d) results: $(cat "$dir/e.out" "$dir/e.err")"
grep -q 'not measured' "$dir/e.err" && bad "(d) refused: $(grep 'not measured' "$dir/e.err")"
awk -v n=$N '
    $1 == "time" && ($NF == "me" || $NF == "sc") { seen++
        if ($3 < n * 2 || $3 > n * 2 * 2) { print "FAIL (d) " $0; bad = 1 } }
    $1 == "time" && ($NF == "lp" || $NF == "spin") { seen++ }
    $1 == "count" && $NF == "me" { seen++; if ($3 != n * 3 / 2) { print "FAIL (d) " $0; bad = 1 } }
    END { if (seen != 5) { print "FAIL (d) rows: " seen; bad = 1 }; exit bad }' "$dir/e.out" ||
    fails=$((fails + 1))

# (e) A real program: python3.11 with --time '*' (thousands of copies, return-site jumps
# that cover padding other jumps may want). After detach its code must equal the file
# byte for byte (a wide return-site jump and another jump's slot once shared padding:
# 7 of them stayed written, and each broke the other while installed).
PY=/usr/bin/python3.11
if [ -x "$PY" ]; then
    "$PY" -c 'import time
while True:
    sum(range(1000)); time.sleep(0.001)' &
    ppid=$!
    sleep 1
    "$DYN" attach $ppid --time '*' -d 0.3 -o "$dir/py.csv" >/dev/null 2>"$dir/py.err" ||
        bad "(e) python3.11 --time: $(tail -n 2 "$dir/py.err")"
    python3 - "$ppid" "$PY" <<'PYEOF' || bad "(e) python3.11's code differs after detach"
import struct, sys
pid, path = int(sys.argv[1]), sys.argv[2]
f = open(path, "rb").read()
phoff, phnum = struct.unpack_from("<Q", f, 0x20)[0], struct.unpack_from("<H", f, 0x38)[0]
base = 0
for line in open("/proc/%d/maps" % pid):
    if line.split()[-1] == path and line.split()[2] == "00000000":
        base = int(line.split("-")[0], 16)
        break
pie = struct.unpack_from("<H", f, 0x10)[0] == 3
mem, bad = open("/proc/%d/mem" % pid, "rb"), 0
for i in range(phnum):
    t, fl, off, va, pa, fs, ms, al = struct.unpack_from("<IIQQQQQQ", f, phoff + 56 * i)
    if t == 1 and fl & 1:  # PT_LOAD, executable
        mem.seek(va + (base if pie else 0))
        m = mem.read(fs)
        bad += sum(1 for a, b in zip(m, f[off:off + fs]) if a != b)
print("ok   (e) python3.11 --time '*': code equal to the file after detach" if bad == 0
      else "FAIL (e) %d bytes differ" % bad)
sys.exit(1 if bad else 0)
PYEOF
    kill $ppid 2>/dev/null
    wait $ppid 2>/dev/null
fi

[ $fails -eq 0 ] || exit 1
echo "PASS: dyn-reloc"
