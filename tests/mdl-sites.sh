#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Timers per call site (qpt-metrics(5): `time wall(nap) per call site`, seed 001's call
# site level of the code hierarchy): on tests/qpt/site_timers.c, whose sites sleep known
# times, each site's row in a rewritten file (qp metrics) and live (dyn run) is within
# [truth, truth + 60%] (or, on a loaded machine, over by no more than all the naps were);
# a PLT stub's sites (nanosleep@plt) too; the rows are the sites only (no "other calls"
# row for a timer). A process attached while its thread sleeps in
# the timed callee, the timer then taken out while the callee still runs (by a steering
# command, then by the detach): the callee returns past the removed timer's snippets (once
# it returned into them and crashed), the program ends as it would, its code as it was.
set -u
# shellcheck source=tests/lib.sh
. "${top_srcdir:-.}/tests/lib.sh"
B=$top_builddir
R=$B/tools/qpt-rewrite
Q=$B/tools/qp
DYN=$B/tools/dyn
dyn_setup mdl-sites
${CC:-cc} -O0 -g -o "$dir/prog" "$top_srcdir/tests/qpt/site_timers.c" || exit 99

# check OUT WHAT: the rows of OUT (qp metrics / dyn's table) against the truth.
check() {
    rows=$(grep -c ' -> ' "$1")
    [ "$rows" = 5 ] || bad "$2: $rows rows, want 5 (4 sites of nap, 1 of nanosleep@plt): $(cat "$1")"
    # The sites in address order: work's first (5 x 30 ms), its second (5 x 10 ms);
    # main's loop (not run here), then its nap(20). A loaded machine wakes the sleeper
    # late: a site may also be over its truth by as much as all the naps together were
    # over theirs in the same run (nanosleep@plt's row, 220 ms of naps; at load 8,
    # work's second site took 86 ms of its 50 when the naps took 283 ms of 220).
    late=$(grep -F -- '-> nanosleep@plt' "$1" |
        awk '{ for (i = 1; i < NF; i++) if ($(i + 1) == "ms" && $i > 220) print $i - 220 }')
    for want in "work+:1:150" "work+:2:50" "main+:2:20" "-> nanosleep@plt:1:220"; do
        site=${want%%:*} nth=${want#*:} nth=${nth%%:*} ms=${want##*:}
        v=$(grep -F -- "$site" "$1" | grep -F -- ' -> ' | sed -n "${nth}p" |
            awk '{ for (i = 1; i < NF; i++) if ($(i + 1) == "ms") print $i }')
        if [ -n "$v" ] && awk -v v="$v" -v t="$ms" -v late="${late:-0}" \
            'BEGIN { exit !(v >= t && (v <= 1.6 * t || (t < 220 && v <= t + late))) }'; then
            ok "$2: $site ($nth) $v ms (truth $ms)"
        else
            bad "$2: $site ($nth) '$v' ms, truth $ms: $(cat "$1")"
        fi
    done
}
M1='time wall(nap) per call site'
M2='time wall(nanosleep@plt) per call site'

"$R" -e "$M1" -e "$M2" "$dir/prog" -o "$dir/prog.m" 2>"$dir/rw.err" || bad "qpt-rewrite: $(cat "$dir/rw.err")"
(cd "$dir" && ./prog.m >run.out) && [ "$(cat "$dir/run.out")" = slept ] || bad "rewritten: output"
"$Q" metrics "$dir/prog.m.qp" >"$dir/file.out" 2>&1 || bad "qp metrics: $(cat "$dir/file.out")"
check "$dir/file.out" "file"

"$DYN" run -e "$M1" -e "$M2" -- "$dir/prog" >"$dir/live.out" 2>"$dir/live.err"
dyn_skip_untraced "$dir/live.err"
check "$dir/live.out" "live"
grep -q '^slept$' "$dir/live.out" || bad "live: output $(cat "$dir/live.out")"

# attach NAME DYN-OPTIONS...: attach to "prog 40" (40 naps of 200 ms from one site) for
# a while, the options saying how the timer goes out; the program must end well.
attach() {
    name=$1
    shift
    "$dir/prog" 40 >"$dir/$name.prog" &
    tpid=$!
    sleep 0.5
    before=$(text_of $tpid)
    "$DYN" attach $tpid -e "$M1" "$@" >"$dir/$name.out" 2>"$dir/$name.err" ||
        bad "($name) dyn: $(cat "$dir/$name.err")"
    [ "$before" = "$(text_of $tpid)" ] || bad "($name) the code differs after the detach"
    wait $tpid
    rc=$?
    tpid=
    if [ $rc -eq 0 ] && [ "$(cat "$dir/$name.prog")" = slept ]; then
        ok "($name) the program ended well (status 0, its output)"
    else
        bad "($name) the program: status $rc, '$(cat "$dir/$name.prog")'"
    fi
}
attach detach --duration 1
printf 'remove #1\n' >"$dir/remove.cmds"
( sleep 0.7; cat "$dir/remove.cmds"; sleep 0.7; echo quit ) |
    attach remove --commands

[ "$fails" -eq 0 ] || exit 1
echo "PASS mdl-sites"
