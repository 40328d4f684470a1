#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Exact counts against ground truth. tests/qp/truth.c fixes the number of calls of every
# procedure by construction (tests/qp/truth.expect). For -O0 and -O2, PIE, non-PIE,
# static and static-pie builds, rewritten with --driver=qp and --driver=naive, run
# normally and through exit() three frames below main:
#  - the output and exit status equal the original's;
#  - `qp report --csv` gives exactly the expected calls;
#  - qp's reconstructed counts equal naive's measured ones: the instructions executed
#    per procedure (sum of block count x block length) are the same in both reports,
#    for every procedure of the program (libc included in static builds);
#  - the report finds no flow-conservation violation;
#  - some taken-edge stubs fall into their target block (ED_PROBE_FALL_IN), counted
#    exactly all the same;
#  - qp counts the calls of some procedures at their call sites (QP_PROC_BY_CALLS) in
#    the position-independent builds, of none in the others.
# Then a program killed with SIGKILL leaves its counts in the profile.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
# Without address randomisation: static-pie glibc sorts its mappings by address, and the
# number of steps must be the same in every run compared.
norand=
setarch "$(uname -m)" -R true 2>/dev/null && norand="setarch $(uname -m) -R"
QP=${QP:-$top_builddir/tools/qp}
qp_have gcc || { echo "qp-truth.sh: SKIP: no gcc"; exit 77; }
dir=$top_builddir/tests/truth.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
src=$top_srcdir/tests/qp/truth.c
fail=0
total_fall=0

bad() {
    echo "FAIL $*"
    fail=1
}

# expect_calls CSV OPT RUN: the calls of the listed procedures.
expect_calls() {
    csv=$1 opt=$2 run=$3
    {
        grep -v '^#' "$top_srcdir/tests/qp/truth.expect"
        # countdown's tail recursion is a loop at -O2 (5 calls), 5 x 21 calls at -O0.
        if [ "$opt" = O0 ]; then echo "countdown 105"; else echo "countdown 5"; fi
        if [ "$run" = exit ]; then printf 'depth1 1\ndepth2 1\ndepth3 1\n'; fi
    } | while read -r name calls; do
        [ -n "$name" ] || continue
        got=$(awk -F, -v n="$name" '$1 == n { print $2 }' "$csv")
        [ "$got" = "$calls" ] || echo "$name: $got calls, expected $calls"
    done
}

for opt in O0 O2; do
    for link in "pie:-fPIE -pie" "nopie:-fno-pie -no-pie" "static:-static" \
        "static-pie:-fPIE -static-pie"; do
        name=${link%%:*} flags=${link#*:}
        prog=$dir/truth-$opt-$name
        # shellcheck disable=SC2086
        gcc -$opt -g $flags -o "$prog" "$src" 2>"$prog.cc.log" || {
            echo "skip $opt $name: cannot build ($(head -n 1 "$prog.cc.log"))"
            continue
        }
        for run in main exit; do
            arg=
            [ "$run" = exit ] && arg=exit
            $norand "$prog" $arg >"$prog.$run.out" 2>&1
            echo $? >"$prog.$run.status"
        done
        for drv in qp naive; do
            # Same path length for both: the program reads its own path (static glibc's
            # _dl_get_origin loops over it), and the counts must not differ by that.
            sub=$dir/$(echo "$drv" | cut -c1)
            mkdir -p "$sub"
            inst=$sub/${prog##*/}
            "$QPT_REWRITE" --driver=$drv "$prog" -o "$inst" 2>"$inst.log" || {
                bad "$opt $name $drv: qpt-rewrite: $(head -n 1 "$inst.log")"
                continue
            }
            # qp counts the calls of most procedures at their call sites, in position-
            # independent programs only (elsewhere an address may hide in an immediate).
            if [ "$drv" = qp ]; then
                # Taken-edge stubs that fall into their target (no jmp back): counted
                # exactly all the same (qp = naive below).
                nfall=$(sed -n 's/.*(\([0-9][0-9]*\) falling into their target).*/\1/p' "$inst.log")
                total_fall=$((total_fall + ${nfall:-0}))
                nby=$(sed -n 's/.* \([0-9][0-9]*\) counted by their call sites.*/\1/p' "$inst.log")
                case $name in
                pie | static-pie)
                    [ "${nby:-0}" -gt 0 ] || bad "$opt $name: no procedure counted by its call sites" ;;
                *)
                    [ "${nby:-0}" = 0 ] || bad "$opt $name: $nby procedures counted by their call sites" ;;
                esac
            fi
            for run in main exit; do
                arg=
                [ "$run" = exit ] && arg=exit
                rm -f "$inst.$run.qp"
                QP_PROFILE=$inst.$run.qp $norand "$inst" $arg >"$inst.$run.out" 2>&1
                echo $? >"$inst.$run.status"
                cmp -s "$prog.$run.out" "$inst.$run.out" \
                    && cmp -s "$prog.$run.status" "$inst.$run.status" \
                    || { bad "$opt $name $drv $run: output or status differs"; continue; }
                "$QP" report --csv "$inst.$run.qp" >"$inst.$run.csv" 2>"$inst.$run.err" || {
                    bad "$opt $name $drv $run: qp report: $(head -n 1 "$inst.$run.err")"
                    continue
                }
                "$QP" report "$inst.$run.qp" >"$inst.$run.report" 2>&1
                if grep -qi 'violation' "$inst.$run.report"; then
                    bad "$opt $name $drv $run: flow conservation violated:"
                    grep -i -A3 'violation' "$inst.$run.report" | head -n 8 | sed 's/^/  /'
                fi
                wrong=$(expect_calls "$inst.$run.csv" "$opt" "$run")
                [ -z "$wrong" ] || { bad "$opt $name $drv $run: wrong calls:"; echo "$wrong" | sed 's/^/  /'; }
            done
        done
        for run in main exit; do
            q=$dir/q/${prog##*/}.$run.csv n=$dir/n/${prog##*/}.$run.csv
            [ -s "$q" ] && [ -s "$n" ] || continue
            sort "$q" >"$q.sorted"
            sort "$n" >"$n.sorted"
            if cmp -s "$q.sorted" "$n.sorted"; then
                echo "ok $opt $name $run: qp = naive on $(($(wc -l <"$q") - 1)) procedures, calls as expected"
            else
                bad "$opt $name $run: qp and naive counts differ:"
                diff "$q.sorted" "$n.sorted" | head -n 10 | sed 's/^/  /'
            fi
        done
    done
done

if [ "$total_fall" -gt 0 ]; then
    echo "ok $total_fall taken-edge stubs fall into their target block"
else
    bad "no taken-edge stub falls into its target block (ED_PROBE_FALL_IN)"
fi

# --weights: counters placed by a first run's counts give the same counts; a profile of
# another program is refused.
w=$dir/q/truth-O2-pie
if [ -s "$w.main.qp" ]; then
    if "$QPT_REWRITE" --weights "$w.main.qp" "$dir/truth-O2-pie" -o "$w.w" 2>"$w.w.log"; then
        rm -f "$w.w.qp"
        "$w.w" >/dev/null 2>&1
        "$QP" report --csv "$w.w.qp" >"$w.w.csv" 2>/dev/null
        if cmp -s "$w.main.csv" "$w.w.csv"; then
            echo "ok --weights: same counts with counters placed by an earlier profile"
        else
            bad "--weights: counts differ"
        fi
        # It says what its counters cost over the profiled run (the least for its counts).
        if grep -Eq -- '--weights: over the profiled run the counters add [1-9][0-9]* instructions \([1-9][0-9]* increments\)' "$w.w.log"; then
            echo "ok $(grep -o -- '--weights: over.*' "$w.w.log")"
        else
            bad "--weights: no cost line: $(tail -n 1 "$w.w.log")"
        fi
    else
        bad "--weights: $(head -n 1 "$w.w.log")"
    fi
    if "$QPT_REWRITE" --weights "$w.main.qp" "$dir/truth-O0-pie" -o "$w.x" 2>"$w.x.log"; then
        bad "--weights: a profile of another program was accepted"
    else
        echo "ok --weights: $(head -n 1 "$w.x.log")"
    fi
fi

# Computed gotos: tests/qp/dispatch.c's handlers each dispatch through one table of
# label addresses, so the edges that cannot carry a counter (into the handlers) make
# cycles. qp places its counters by the spanning tree all the same (no procedure counted
# per block; those edges' counts stay unknown, as naive's) and counts every procedure and
# block as naive does. In the position-independent build, the helper called from a
# handler (modulo) is counted at its call site, in the interpreter: its calls exact, and
# marked approximate as the interpreter's counts are (its computed gotos' targets are a
# guess).
d=$dir/dispatch
mkdir -p "$d"
for cc in "gcc -O2 -fno-pie -no-pie" "gcc -O3 -fno-pie -no-pie" "clang -O2 -fno-pie -no-pie" \
    "gcc -O2 -fPIE -pie"; do
    set -- $cc
    qp_have "$1" || { echo "skip dispatch $cc: no $1"; continue; }
    p=$d/$1$2$3
    # shellcheck disable=SC2086
    $cc -g -o "$p" "$top_srcdir/tests/qp/dispatch.c" 2>"$p.cc.log" || {
        echo "skip dispatch $cc: cannot build ($(head -n 1 "$p.cc.log"))"
        continue
    }
    "$p" >"$p.out" 2>&1
    ok=1
    for drv in qp naive; do
        "$QPT_REWRITE" --driver=$drv "$p" -o "$p.$drv" 2>"$p.$drv.log" || {
            bad "dispatch $cc $drv: qpt-rewrite: $(head -n 1 "$p.$drv.log")"
            ok=0
            continue
        }
        rm -f "$p.$drv.qp"
        "$p.$drv" >"$p.$drv.out" 2>&1
        cmp -s "$p.out" "$p.$drv.out" || { bad "dispatch $cc $drv: output differs"; ok=0; }
        "$QP" report --csv "$p.$drv.qp" | sort >"$p.$drv.csv"
        cut -d, -f1-3 "$p.$drv.csv" >"$p.$drv.counts" # (flags: qp's by calls inherit marks)
        "$QP" report --blocks "$p.$drv.qp" | sed -E 's/ +(measured|reconstructed)$//' >"$p.$drv.blocks"
    done
    [ $ok = 1 ] || continue
    nper=$(sed -n 's/.*measured (\([0-9]*\) per block.*/\1/p' "$p.qp.log")
    if [ "$nper" != 0 ]; then
        bad "dispatch $cc: qp counts ${nper:-?} procedures per block"
    elif cmp -s "$p.qp.counts" "$p.naive.counts" && cmp -s "$p.qp.blocks" "$p.naive.blocks"; then
        echo "ok dispatch $cc: qp = naive on every procedure and block, none counted per block"
        case $cc in *-fPIE*)
            flags=$(awk -F, '$1 == "modulo" { print $4 }' "$p.qp.csv")
            nby=$(sed -n 's/.* \([0-9][0-9]*\) counted by their call sites.*/\1/p' "$p.qp.log")
            if [ "$flags" = "~" ]; then
                echo "ok dispatch $cc: modulo counted by its call site in the interpreter ($nby procedures by calls), marked approximate"
            else
                bad "dispatch $cc: modulo not counted by its call site in the interpreter (flags '$flags', $nby procedures by calls)"
            fi ;;
        esac
    else
        bad "dispatch $cc: qp and naive counts differ:"
        diff "$p.qp.blocks" "$p.naive.blocks" | head -n 10 | sed 's/^/  /'
    fi
done

# A recursion through a hub (tests/qp/hub.c): the helpers that call the hub back are
# counted by their call sites all the same (the hub alone keeps a counter of its own), as
# many procedures as without the calls back but for the hub; counts as naive's.
h=$dir/hub
mkdir -p "$h"
if gcc -O2 -fPIE -pie -g -o "$h/hub" "$top_srcdir/tests/qp/hub.c" 2>"$h/cc.log" \
    && gcc -O2 -fPIE -pie -g -DFLAT -o "$h/flat" "$top_srcdir/tests/qp/hub.c" 2>>"$h/cc.log"; then
    "$h/hub" >"$h/hub.out"
    for v in hub.qp:hub flat.qp:flat hub.naive:hub; do
        drv=${v%%:*} drv=${drv#*.}
        "$QPT_REWRITE" --driver="$drv" "$h/${v#*:}" -o "$h/${v%%:*}" 2>"$h/${v%%:*}.log" \
            || bad "hub: qpt-rewrite $v: $(head -n 1 "$h/${v%%:*}.log")"
    done
    for v in qp naive; do
        rm -f "$h/hub.$v.qp"
        "$h/hub.$v" >"$h/hub.$v.out" 2>&1
        cmp -s "$h/hub.out" "$h/hub.$v.out" || bad "hub $v: output differs"
        "$QP" report --csv "$h/hub.$v.qp" | cut -d, -f1-3 | sort >"$h/hub.$v.counts"
    done
    nhub=$(sed -n 's/.* \([0-9][0-9]*\) counted by their call sites.*/\1/p' "$h/hub.qp.log")
    nflat=$(sed -n 's/.* \([0-9][0-9]*\) counted by their call sites.*/\1/p' "$h/flat.qp.log")
    if ! cmp -s "$h/hub.qp.counts" "$h/hub.naive.counts"; then
        bad "hub: qp and naive counts differ"
    elif [ -n "$nhub" ] && [ -n "$nflat" ] && [ "$nhub" -ge $((nflat - 1)) ]; then
        echo "ok hub: $nhub procedures counted by their call sites ($nflat without the calls back), counts as naive's"
    else
        bad "hub: ${nhub:-?} procedures counted by their call sites, ${nflat:-?} without the calls back"
    fi
else
    echo "skip hub: cannot build ($(head -n 1 "$h/cc.log"))"
fi

# --weights' estimate of what the counters add, against the increments that the
# counters then take (every counter summed: base and per-process slots). clang -O2 gives
# tests/progs/computed_goto.c's dispatch blocks one table of targets shared by all; the
# estimate must include every counter, those of blocks the driver counts one by one
# too. The counters also hold the misses of jumps translated at run time (one here): the
# estimate is never above, and within 1%. The same for what the line says the counters
# placed without --weights would take: the first rewrite's, over the same run.
prof_incs() {
    set -- "$1" "$(od -An -t u8 -j 32 -N 8 "$1" | tr -d ' ')" "$(od -An -t u8 -j 72 -N 8 "$1" | tr -d ' ')"
    { od -An -v -t u8 -j 4096 -N $(($2 - 4096)) "$1"; od -An -v -t u8 -j "$3" "$1"; } \
        | tr -s ' ' '\n' | awk '{ s += $1 } END { printf "%d\n", s }'
}
c=$dir/q/cgoto-clang
if ! qp_have clang; then
    echo "skip --weights estimate: no clang"
elif ! clang -O2 -g -o "$c" "$top_srcdir/tests/progs/computed_goto.c" 2>"$c.cc.log"; then
    echo "skip --weights estimate: cannot build ($(head -n 1 "$c.cc.log"))"
elif "$QPT_REWRITE" "$c" -o "$c.q" 2>"$c.q.log" && rm -f "$c.q.qp" \
    && { "$c.q" >/dev/null 2>&1; [ -s "$c.q.qp" ]; } \
    && "$QPT_REWRITE" -v --weights "$c.q.qp" "$c" -o "$c.w" 2>"$c.w.log" && rm -f "$c.w.qp" \
    && { "$c.w" >/dev/null 2>&1; [ -s "$c.w.qp" ]; }; then
    est=$(sed -n 's/.*counters add [0-9]* instructions (\([0-9]*\) increments).*/\1/p' "$c.w.log")
    got=$(prof_incs "$c.w.qp")
    if [ -n "$est" ] && [ "$est" -le "$got" ] && [ $((est * 100)) -ge $((got * 99)) ]; then
        echo "ok --weights estimate: $est increments, $got counted"
    else
        bad "--weights estimate: ${est:-no} increments, $got counted"
    fi
    est=$(sed -n 's/.*placed without --weights they would add [0-9]* instructions (\([0-9]*\) increments).*/\1/p' "$c.w.log")
    got=$(prof_incs "$c.q.qp")
    if [ -n "$est" ] && [ "$est" -le "$got" ] && [ $((est * 100)) -ge $((got * 99)) ]; then
        echo "ok --weights estimate without them: $est increments, $got counted"
    else
        bad "--weights estimate without them: ${est:-no} increments, $got counted"
    fi
    # -v: the same instructions by kind (increments, flag saves, stub jumps back, jumps
    # over stubs), for both trees.
    kinds=$(awk '
        /over the profiled run the counters add/ {
            match($0, /add [0-9]+ instructions \([0-9]+ increments\)/); split(substr($0, RSTART, RLENGTH), a, /[ (]+/)
            total["by the weights"] = a[2]; incs["by the weights"] = a[4]
            match($0, /would add [0-9]+ instructions \([0-9]+ increments\)/); split(substr($0, RSTART, RLENGTH), a, /[ (]+/)
            total["without --weights"] = a[3]; incs["without --weights"] = a[5]
        }
        / the counters add [0-9]+ increments, / {
            t = $0 ~ /placed by the weights/ ? "by the weights" : "without --weights"
            match($0, /add [0-9]+ increments, [0-9]+ instructions saving flags, [0-9]+ stub jumps back, [0-9]+ jumps over/)
            split(substr($0, RSTART, RLENGTH), a, /[^0-9]+/)
            sum[t] = a[2] + a[3] + a[4] + a[5]; inc[t] = a[2]; n++
        }
        END {
            for (t in total) if (sum[t] != total[t] || inc[t] != incs[t]) { print "bad " t; exit }
            print n + 0
        }' "$c.w.log")
    if [ "$kinds" = 2 ]; then
        echo "ok --weights -v: the instructions of both trees by kind add up to their totals"
    else
        bad "--weights -v: instructions by kind: $kinds ($(grep -c 'by kind\|stub jumps back' "$c.w.log") lines)"
    fi
    # -v: where the tree without --weights costs most over this one, per procedure: at
    # most 5, largest first, each "+D (S against W)" with D = S - W and S within the
    # total without --weights; there is one when that total is above this one's.
    gaps=$(awk '
        /over the profiled run the counters add/ {
            match($0, /add [0-9]+ instructions/); split(substr($0, RSTART, RLENGTH), a, " "); w = a[2] + 0
            match($0, /would add [0-9]+ instructions/); split(substr($0, RSTART, RLENGTH), a, " "); s = a[3] + 0
        }
        /where a rewrite without --weights would add most over this one: / {
            line = substr($0, index($0, "over this one: ") + 15); nl++
        }
        END {
            n = split(line, e, ", "); prev = -1
            if (nl > 1 || n > 5 || (s > w && n == 0)) { print "bad count " n; exit }
            for (i = 1; i <= n; i++) {
                if (split(e[i], f, /[ +()]+/) < 5 || f[4] != "against") { print "bad " e[i]; exit }
                d = f[2] + 0; st = f[3] + 0; wt = f[5] + 0
                if (d != st - wt || d <= 0 || st > s || (prev >= 0 && d > prev)) { print "bad " e[i]; exit }
                prev = d
            }
            print n
        }' "$c.w.log")
    case $gaps in
    [1-5]) echo "ok --weights -v: $gaps procedures where the tree without --weights costs most" ;;
    *) bad "--weights -v: per-procedure gaps: $gaps: $(grep 'would add most' "$c.w.log")" ;;
    esac
else
    bad "--weights estimate: $(tail -n 1 "$c.w.log" "$c.q.log" 2>/dev/null | head -n 3)"
fi

# A profile that cannot be written, or is not this program's, leaves the program running
# unchanged with one line on stderr; %p names a profile per process.
p=$dir/q/truth-O2-pie
if [ -x "$p" ]; then
    echo garbage >"$dir/garbage.qp"
    for prof in /nonexistent/dir/x.qp "$dir/garbage.qp" "$dir/q/truth-O0-pie.main.qp"; do
        QP_PROFILE=$prof "$p" >"$dir/rt.out" 2>"$dir/rt.err"
        st=$?
        if [ "$st" -ne 0 ] || ! cmp -s "$dir/rt.out" "$dir/truth-O2-pie.main.out" \
            || [ "$(wc -l <"$dir/rt.err")" -ne 1 ]; then
            bad "runtime with QP_PROFILE=$prof: status $st, $(wc -l <"$dir/rt.err") lines on stderr"
        else
            echo "ok runtime: $(cat "$dir/rt.err")"
        fi
    done
    rm -f "$dir"/pid.*.qp
    QP_PROFILE=$dir/pid.%p.qp "$p" >/dev/null 2>&1
    if ls "$dir"/pid.[0-9]*.qp >/dev/null 2>&1; then
        echo "ok runtime: QP_PROFILE %p expands to the process id"
    else
        bad "runtime: QP_PROFILE=pid.%p.qp wrote no pid.<pid>.qp"
    fi
fi

# Relocations packed as RELR (-z pack-relative-relocs): a procedure called directly and
# through a pointer only relocated data holds (tests/qp/relr.c) was counted at its call
# sites alone (1,000 of its 1,150 calls, silently), the RELR section being unread.
for opt in O0 O2; do
    for link in "pie:-fPIE -pie" "static-pie:-fPIE -static-pie"; do
        name=${link%%:*} flags=${link#*:}
        prog=$dir/relr-$opt-$name
        # shellcheck disable=SC2086
        gcc -$opt $flags -Wl,-z,pack-relative-relocs -o "$prog" "$top_srcdir/tests/qp/relr.c" \
            2>"$prog.cc.log" || { echo "skip relr $opt $name: cannot build"; continue; }
        readelf -SW "$prog" | grep -q ' RELR ' || { echo "skip relr $opt $name: no RELR section"; continue; }
        for drv in qp naive; do
            "$QPT_REWRITE" --driver=$drv "$prog" -o "$prog.$drv" >"$prog.$drv.log" 2>&1 ||
                { bad "relr $opt $name $drv: qpt-rewrite: $(tail -n 1 "$prog.$drv.log")"; continue; }
            rm -f "$prog.$drv.qp"
            QP_PROFILE=$prog.$drv.qp "$prog.$drv" >"$prog.$drv.out" 2>&1
            "$prog" | cmp -s - "$prog.$drv.out" || { bad "relr $opt $name $drv: output differs"; continue; }
            got=$("$QP" report --csv "$prog.$drv.qp" 2>/dev/null | awk -F, '$1 == "twice" || $1 == "thrice" { printf "%s=%s ", $1, $2 }')
            if [ "$got" = "twice=1150 thrice=150 " ]; then
                echo "ok relr $opt $name $drv: $got"
            else
                bad "relr $opt $name $drv: $got(expected twice=1150 thrice=150)"
            fi
        done
    done
done

# SIGKILL: the counters live in the profile's pages, so they survive.
if [ -x "$dir/q/truth-O2-pie" ]; then
    cat >"$dir/spin.c" <<'EOF'
#include <unistd.h>
volatile unsigned long n;
__attribute__((noinline)) static void tick(void) { n++; }
int main(void) { for (;;) { tick(); if ((n & 0xfffff) == 0) usleep(1000); } }
EOF
    if gcc -O2 -o "$dir/spin" "$dir/spin.c" && "$QPT_REWRITE" "$dir/spin" -o "$dir/spin.qp" 2>/dev/null; then
        rm -f "$dir/spin.qp.qp"
        "$dir/spin.qp" &
        pid=$!
        sleep 1
        kill -9 $pid
        wait $pid 2>/dev/null
        calls=$("$QP" report --csv "$dir/spin.qp.qp" 2>/dev/null | awk -F, '$1 == "tick" { print $2 }')
        if [ -n "$calls" ] && [ "$calls" -gt 0 ]; then
            echo "ok kill -9: the profile kept $calls calls of tick"
        else
            bad "kill -9: no counts in the profile (tick: '$calls')"
        fi
    fi
fi
exit $fail
