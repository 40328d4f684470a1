#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# dyn killed (SIGKILL) at a random moment, then `dyn clean`: is the target's code the
# file's again, and does the target live on and end as it should?
#
#   bench/dyn-kill-stress.sh DYN ROUNDS [TARGET...]
#
# TARGET: python (/usr/bin/python3.11 in a CPU-bound loop) or small (bench/killtarget.c,
# built here: many small procedures of the shapes dyn patches: 1-byte rets, short
# entries, padding, relocated loops, call sites). Default: both. Each round starts the
# target, attaches `dyn attach PID MODE` with one of the modes (--time '*', --all, -e
# 'time cpu(*) total', --calls-from), and kills dyn with -9, in turn: at its N-th
# write of the target's memory (strace fault injection, N random over the writes of a
# whole attach/detach: install, sampling and removal alike), at its N-th ptrace call
# (stops, single steps, system calls run in the target), and after a random delay
# (within the time a whole attach/detach took; the only way without strace: 0-4 s).
# Then `dyn clean PID`; then the code of every executable file mapping is compared
# with the file (what differs is listed: address, bytes in memory, bytes in
# the file) and the target is stopped (python: SIGTERM, must die of it; small: told to
# finish, must print the result of a plain run and exit 0).
# Prints one line per round and a table: rounds and leftovers per target and mode.
# Exit 0 when no round left anything, 1 otherwise. For `make corpus` (minutes), never
# `make check`. Env: STRESS_SEED (random seed), STRESS_MODES (a subset of the modes by
# their short names: time all e calls), STRESS_KILL (write, ptrace or delay: that way
# only), STRESS_DIR (scratch; default a mktemp dir).
set -u -f
DYN=${1:?usage: dyn-kill-stress.sh DYN ROUNDS [python|small...]}
ROUNDS=${2:-20}
shift 2
targets=${*:-small python}
here=$(cd "$(dirname "$0")" && pwd)
dir=${STRESS_DIR:-$(mktemp -d /tmp/dyn-kill-stress.XXXXXX)}
mkdir -p "$dir"
find "$dir" -maxdepth 1 -name 'left.*' -delete
RANDOM=${STRESS_SEED:-$$}
modes=${STRESS_MODES:-time all e calls}
have_strace=0
strace -o /dev/null true 2>/dev/null && have_strace=1

# The differences between the executable file mappings of $1 and their files.
code_diff() {
    python3 - "$1" <<'PY'
import sys
pid = sys.argv[1]
with open('/proc/%s/maps' % pid) as maps, open('/proc/%s/mem' % pid, 'rb') as mem:
    for line in maps:
        f = line.split()
        if len(f) < 6 or f[1][2] != 'x' or not f[5].startswith('/'):
            continue
        lo, hi = (int(x, 16) for x in f[0].split('-'))
        off = int(f[2], 16)
        mem.seek(lo)
        m = mem.read(hi - lo)
        with open(f[5], 'rb') as fh:
            fh.seek(off)
            fb = fh.read(hi - lo).ljust(len(m), b'\0')
        i = 0
        while i < len(m):
            if m[i] == fb[i]:
                i += 1
                continue
            j = i + 1
            while j < len(m) and any(m[k] != fb[k] for k in range(j, min(j + 3, len(m)))):
                j += 1
            print('%x %s+%x mem=%s file=%s' % (lo + i, f[5], off + i, m[i:j].hex(), fb[i:j].hex()))
            i = j
PY
}

args_of() {
    case $1 in
    time) echo "--time *" ;;
    all) echo "--all" ;;
    e) echo "-e time_cpu_total" ;;
    calls) echo "--calls-from $2" ;;
    esac
}

if [[ " $targets " == *" small "* ]]; then
    gcc -O2 -falign-functions=1 -pthread -o "$dir/small" "$here/killtarget.c" || exit 99
fi

start_target() { # TARGET: its pid in $tpid
    case $1 in
    python)
        /usr/bin/python3.11 -c 'while True: sum(range(1000))' >/dev/null 2>&1 &
        tpid=$! calls_of=_PyEval_EvalFrameDefault ;;
    small)
        rm -f "$dir/stop"
        "$dir/small" "$dir/stop" >"$dir/small.out" 2>&1 &
        tpid=$! calls_of=work ;;
    esac
    sleep 0.3
}

stop_target() { # TARGET: 0 when it ended as it should
    case $1 in
    python)
        kill -TERM $tpid 2>/dev/null
        wait $tpid
        [ $? -eq 143 ] ;;
    small)
        touch "$dir/stop"
        wait $tpid
        st=$?
        [ $st -eq 0 ] && [ "$(cat "$dir/small.out")" = "$("$dir/small" -)" ] ;;
    esac
}

# How many memory writes and ptrace calls a whole attach/detach of TARGET MODE makes
# (strace counts).
declare -A nwrites nptrace took
count_writes() {
    start_target "$1"
    local a
    a=$(args_of "$2" $calls_of)
    if [ "$2" = e ]; then set -- "$1" "$2" -e 'time cpu(*) total'; else set -- "$1" "$2" $a; fi
    local t=$1 m=$2
    shift 2
    local t0 t1
    t0=$(date +%s%N)
    strace -f -c -o "$dir/count.txt" -e trace=pwrite64,ptrace "$DYN" attach $tpid "$@" \
        --duration 0.3 >/dev/null 2>"$dir/count.err"
    t1=$(date +%s%N)
    took[$t.$m]=$(( (t1 - t0) / 1000000 ))
    nwrites[$t.$m]=$(awk '$NF == "pwrite64" { print $4 }' "$dir/count.txt")
    nptrace[$t.$m]=$(awk '$NF == "ptrace" { print $4 }' "$dir/count.txt")
    stop_target "$t" >/dev/null 2>&1
    echo "$t $m: ${nwrites[$t.$m]:-0} writes and ${nptrace[$t.$m]:-0} ptrace calls in a whole attach/detach ($(grep ' instrumented, ' "$dir/count.err" | sed 's/^dyn: [0-9]*: //'))"
}

declare -A nround nleft
total_left=0
for t in $targets; do
    for m in $modes; do
        [ $have_strace -eq 1 ] && count_writes "$t" "$m"
        nround[$t.$m]=0 nleft[$t.$m]=0
    done
done
for ((k = 1; k <= ROUNDS; k++)); do
    for t in $targets; do
        for m in $modes; do
            start_target "$t"
            a=$(args_of "$m" $calls_of)
            if [ "$m" = e ]; then set -- -e 'time cpu(*) total'; else set -- $a; fi
            way=$((k % 3))
            case ${STRESS_KILL:-} in write) way=0 ;; ptrace) way=1 ;; delay) way=2 ;; esac
            call=pwrite64 nw=${nwrites[$t.$m]:-0}
            [ $way -eq 1 ] && call=ptrace nw=${nptrace[$t.$m]:-0}
            if [ $have_strace -eq 1 ] && [ $way -lt 2 ] && [ "$nw" -gt 0 ]; then
                at=$(( (RANDOM * 32768 + RANDOM) % nw + 1 ))
                how="$call #$at of $nw"
                # (The shell's "Killed" line to /dev/null.)
                { strace -f -o /dev/null -e trace=$call -e inject=$call:signal=KILL:when=$at \
                    "$DYN" attach $tpid "$@" --duration 0.3 >/dev/null 2>"$dir/att.err"; } 2>/dev/null
            else
                "$DYN" attach $tpid "$@" >/dev/null 2>"$dir/att.err" &
                dp=$!
                d=$(awk -v r=$RANDOM -v ms=${took[$t.$m]:-4000} 'BEGIN { printf "%.3f", r / 32768 * ms / 1000 }')
                how="after ${d}s"
                sleep "$d"
                kill -9 $dp 2>/dev/null
                wait $dp 2>/dev/null
            fi
            "$DYN" clean $tpid >"$dir/clean.out" 2>&1
            code_diff $tpid >"$dir/diff.txt"
            left=$(wc -l <"$dir/diff.txt")
            alive=yes
            kill -0 $tpid 2>/dev/null || alive=no
            ended=ok
            stop_target "$t" || ended=BAD
            nround[$t.$m]=$((nround[$t.$m] + 1))
            verdict=clean
            if [ "$left" -gt 0 ] || [ $alive = no ] || [ $ended = BAD ]; then
                verdict=LEFT
                nleft[$t.$m]=$((nleft[$t.$m] + 1))
                total_left=$((total_left + 1))
                cp "$dir/diff.txt" "$dir/left.$t.$m.$k.txt"
            fi
            echo "round $k $t $m: killed at $how: $(head -n 1 "$dir/clean.out"); $left differing runs; alive $alive, end $ended: $verdict"
            [ "$left" -gt 0 ] && sed 's/^/    /' "$dir/diff.txt" | head -n 8
        done
    done
done
echo
printf '%-8s %-6s %7s %10s\n' target mode rounds leftovers
for t in $targets; do
    for m in $modes; do
        printf '%-8s %-6s %7d %10d\n' "$t" "$m" "${nround[$t.$m]}" "${nleft[$t.$m]}"
    done
done
echo "(scratch and the differences of each round that left something: $dir)"
[ $total_left -eq 0 ]
