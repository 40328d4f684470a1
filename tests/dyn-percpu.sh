#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Live counts per CPU (restartable sequences on glibc's rseq areas: no locked add), on
# tests/dynpercpu/percpu.c (threads calling f(); each checks at its end that its rseq
# area no longer points at dyn's code):
#  (a) `dyn run -v --count f` with 4 threads x 1,000,000 calls, running flat out, yielding
#      every 100 calls, and moving themselves from CPU to CPU (sched_setaffinity): exactly
#      4,000,000, counted per CPU (-v says so), and the program's own count the same;
#  (b) `dyn run -e 'count calls(f)'`: the metric the same; --calls-from body (dyn's own
#      sessions): the call site's row the same, per CPU, and locked (said) with rseq
#      turned off;
#  (c) the program started with rseq turned off (GLIBC_TUNABLES=glibc.pthread.rseq=0):
#      locked adds, said once, and still exact;
#  (d) dyn attach to the running program: per CPU (its threads' areas read with
#      PTRACE_GET_RSEQ_CONFIGURATION); detached, its code and mappings as they were;
#      attached again and killed with -9, `dyn clean` puts its code back; at its end
#      no thread's rseq area points at code of dyn's;
#  (e) a static program: started by dyn run, locked (said: where its rseq areas will be
#      is not known before it runs); attached once running, per CPU.
# Skips (77) when ptrace is not allowed or the kernel and C library have no rseq.
# Exit status: 0 pass, 1 fail, 99 error.
set -u
: "${top_srcdir:=${srcdir:-.}}"
: "${srcdir:=$top_srcdir}"
. "$top_srcdir/tests/lib.sh"
DYN=$top_builddir/tools/dyn
dyn_setup dyn-percpu

${CC:-cc} -O2 -pthread -o "$dir/prog" "$srcdir/tests/dynpercpu/percpu.c" || exit 99
P=$dir/prog

"$DYN" run -v --count f -- "$P" run 1 10 >"$dir/probe.out" 2>"$dir/probe.err"
dyn_skip_untraced "$dir/probe.err"
if grep -q 'not per CPU' "$dir/probe.err"; then
    echo "SKIP: no per-CPU counts here: $(grep 'not per CPU' "$dir/probe.err")"
    exit 77
fi

# (a) exact under threads, per CPU.
for mode in run yield move; do
    "$DYN" run -v --count f -- "$P" $mode 4 1000000 >"$dir/$mode.out" 2>"$dir/$mode.err"
    grep -q '^ok 4000000$' "$dir/$mode.out" || bad "(a) $mode: program: $(head -n 1 "$dir/$mode.out")"
    grep -E -q '^ +4000000 +f$' "$dir/$mode.out" ||
        bad "(a) $mode: count: $(cat "$dir/$mode.out" "$dir/$mode.err")"
    grep -q 'counts per CPU (rseq)' "$dir/$mode.err" ||
        bad "(a) $mode: not per CPU: $(cat "$dir/$mode.err")"
done

# (b) the metric.
"$DYN" run -e 'count calls(f)' -- "$P" yield 4 1000000 >"$dir/metric.out" 2>"$dir/metric.err"
grep -E -q '^count calls\(f\) +4000000 ' "$dir/metric.out" ||
    bad "(b) metric: $(cat "$dir/metric.out" "$dir/metric.err")"

# (b2) call sites (--calls-from: dyn's own sessions): the same, and rseq turned off.
"$DYN" run -v --calls-from body -- "$P" move 4 1000000 >"$dir/cf.out" 2>"$dir/cf.err"
grep -E -q '^ +4000000 +body\+0x[0-9a-f]+->f$' "$dir/cf.out" ||
    bad "(b2) call site: $(cat "$dir/cf.out" "$dir/cf.err")"
grep -q 'counts per CPU (rseq)' "$dir/cf.err" || bad "(b2) not per CPU: $(cat "$dir/cf.err")"
GLIBC_TUNABLES=glibc.pthread.rseq=0 "$DYN" run --calls-from body -- "$P" yield 4 1000000 \
    >"$dir/cfoff.out" 2>"$dir/cfoff.err"
grep -E -q '^ +4000000 +body\+0x[0-9a-f]+->f$' "$dir/cfoff.out" ||
    bad "(b2) call site, rseq off: $(cat "$dir/cfoff.out" "$dir/cfoff.err")"
[ "$(grep -c 'counts with locked adds, not per CPU' "$dir/cfoff.err")" = 1 ] ||
    bad "(b2) the fallback is not said once: $(cat "$dir/cfoff.err")"

# (c) rseq turned off: locked, said once, exact.
GLIBC_TUNABLES=glibc.pthread.rseq=0 "$DYN" run --count f -- "$P" yield 4 1000000 \
    >"$dir/off.out" 2>"$dir/off.err"
grep -E -q '^ +4000000 +f$' "$dir/off.out" || bad "(c) count: $(cat "$dir/off.out" "$dir/off.err")"
[ "$(grep -c 'counts with locked adds, not per CPU' "$dir/off.err")" = 1 ] ||
    bad "(c) the fallback is not said once: $(cat "$dir/off.err")"

# (d) attach: per CPU; detached, and killed with -9 then cleaned: no trace left.
WHAT="-v --count f"
dyn_leaves_no_trace d d 1 f
grep -q 'counts per CPU (rseq)' "$dir/att.err" || bad "(d) not per CPU: $(cat "$dir/att.err")"

# (e) a static program: started by dyn run, where its rseq areas will be is not known
# (locked, said); attached once running, per CPU.
if ${CC:-cc} -O2 -static -pthread -o "$dir/static" "$srcdir/tests/dynpercpu/percpu.c" \
    2>/dev/null; then
    "$DYN" run --count f -- "$dir/static" yield 4 1000000 >"$dir/st.out" 2>"$dir/st.err"
    grep -E -q '^ +4000000 +f$' "$dir/st.out" || bad "(e) count: $(cat "$dir/st.out" "$dir/st.err")"
    grep -q 'not per CPU: a static program' "$dir/st.err" ||
        bad "(e) the fallback is not said: $(cat "$dir/st.err")"
    rm -f "$dir/stop"
    "$dir/static" wait "$dir/stop" >"$dir/sw.out" &
    tpid=$!
    sleep 0.3
    "$DYN" attach $tpid -v --count f --duration 0.3 >"$dir/satt.out" 2>"$dir/satt.err" ||
        bad "(e) attach: $(cat "$dir/satt.err")"
    grep -q 'counts per CPU (rseq)' "$dir/satt.err" ||
        bad "(e) attached: not per CPU: $(cat "$dir/satt.err")"
    touch "$dir/stop"
    wait $tpid
    tpid=
    [ "$(cat "$dir/sw.out")" = "ok same" ] || bad "(e) program: $(cat "$dir/sw.out")"
else
    echo "# no static C library: (e) not run"
fi

[ $fails -eq 0 ] || exit 1
echo "PASS dyn-percpu"
