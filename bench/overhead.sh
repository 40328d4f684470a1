#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Run-time overhead of rewritten programs against the original, on three workloads built
# from Debian source packages by bench/workloads.sh (run first, cached in DIR):
#   lua     lua5.4 (its VM dispatching by computed gotos, as Debian builds it) running bench/bench.lua
#   bzip2   bzip2 -9 compressing a generated 30 MB text file
#   sqlite  sqlite3's speedtest1 (--memdb --verify)
# Variants of each: native (gcc -O2), none (qpt-rewrite --driver=none of native), qp and
# naive (--driver=qp / --driver=naive of native; skipped with a note while qpt-rewrite
# refuses them), qpw (qp with --weights: counters placed by the counts of a first qp run
# on the small input, the one the valgrind part measures), gcc (gcc -O2 -fprofile-arcs).
#
# 1. Wall time: a warm-up run of every variant, then ROUNDS rounds; each round runs
#    native and every variant once, in an order rotated from round to round, so that
#    noise from other load hits all of them alike. Reported: the median wall time of
#    each, the ratio of medians variant/native, the median of the per-round ratios, the
#    ratio of median CPU (user+sys) times, and the geometric mean over the workloads.
# 2. Instructions executed under valgrind (cachegrind, no cache simulation: "I refs") on
#    smaller inputs, once per variant: deterministic, so the ratios are not noisy. Exact:
#    --vex-guest-chase=no (valgrind >= 3.17 builds superblocks through conditional
#    branches, and cachegrind then counts more than the code runs: lua's matchbracketclass
#    3 instructions more per loop iteration than its loop has; by how much depends on the
#    layout, so native and rewritten code were miscounted differently: lua native
#    3,399.9M counted, 3,380.7M run, as callgrind and exp-bbv, which never chase, count),
#    every variant run as the same path (its stack, hence lua's hash seed, stays put) with
#    time() pinned (bench/fixed-time.c: lua also seeds with the time). The --weights
#    line checks the estimate qpt-rewrite prints (what its counters add over the profiled
#    run) against the instructions they add: qp --weights minus none, the null rewrite's
#    own cost (jumps at the old entries of procedures called through pointers) not being
#    the counters'. VALGRIND=0 skips this part.
# Every run's output must equal native's (lua and speedtest1 stdout without speedtest1's
# timings; bzip2's compressed bytes, and each variant must decompress the data back),
# and every run must exit 0: otherwise the script stops, says how to reproduce, keeps its
# scratch directory and exits 1. Instrumented variants run with QP_PROFILE (and
# GCOV_PREFIX for gcc) naming a scratch path that is removed between runs.
#
# Usage: bench/overhead.sh [DIR [path/to/qpt-rewrite]]
#   DIR defaults to $QPT_BENCH_DIR or ./bench-workloads
# Environment: ROUNDS (10), WORKLOADS ("lua bzip2 sqlite"), VARIANTS ("none qp qpw naive
#   gcc"), VALGRIND (1), LUA_SCALE (30) / LUA_SMALL_SCALE (3), SQLITE_SIZE (100) /
#   SQLITE_SMALL_SIZE (15); bzip2 input sizes: see bench/workloads.sh.
set -eu
BENCH=$(cd "$(dirname "$0")" && pwd)
. "$BENCH/record.sh"
DIR=${1:-${QPT_BENCH_DIR:-bench-workloads}}
QPT=${2:-tools/qpt-rewrite}
ROUNDS=${ROUNDS:-10}
WORKLOADS=${WORKLOADS:-lua bzip2 sqlite}
VARIANTS=${VARIANTS:-none qp qpw naive gcc}
VALGRIND=${VALGRIND:-1}
LUA_SCALE=${LUA_SCALE:-30}
LUA_SMALL_SCALE=${LUA_SMALL_SCALE:-3}
SQLITE_SIZE=${SQLITE_SIZE:-100}
SQLITE_SMALL_SIZE=${SQLITE_SMALL_SIZE:-15}

die() { echo "overhead: $*" >&2; exit 1; }
[ -x "$QPT" ] || die "$QPT: not an executable (usage: $0 [DIR [qpt-rewrite]])"
QPT=$(cd "$(dirname "$QPT")" && pwd)/$(basename "$QPT")
[ "$ROUNDS" -ge 1 ] 2>/dev/null || die "ROUNDS=$ROUNDS: not a positive number"
[ "$ROUNDS" -ge 10 ] || echo "overhead: note: ROUNDS=$ROUNDS (< 10): a smoke run, not a measurement"
if [ "$VALGRIND" != 0 ] && ! command -v valgrind >/dev/null; then
    echo "overhead: note: no valgrind (apt-get install valgrind): instruction counts skipped"
    VALGRIND=0
fi

"$BENCH/workloads.sh" "$DIR" >"${TMPDIR:-/tmp}/qpt-workloads.$$.log" 2>&1 ||
    { cat "${TMPDIR:-/tmp}/qpt-workloads.$$.log" >&2; die "bench/workloads.sh $DIR failed"; }
rm -f "${TMPDIR:-/tmp}/qpt-workloads.$$.log"
DIR=$(cd "$DIR" && pwd)

T=$(mktemp -d "${TMPDIR:-/tmp}/qpt-overhead.XXXXXX")
KEEP=0
trap '[ $KEEP = 1 ] || rm -rf "$T"' EXIT
mkdir -p "$T/bin" "$T/out" "$T/times"
# The same environment for every variant (its size moves the stack): instrumented
# ones write their counts here, removed after every run.
export QP_PROFILE=$T/profile.qp
export GCOV_PREFIX=$T/gcov

fail() {
    KEEP=1
    echo "overhead: FAILED: $*" >&2
    echo "overhead: scratch files kept in $T" >&2
    exit 1
}

prog_of() { case $1 in lua) echo lua ;; bzip2) echo bzip2 ;; sqlite) echo speedtest1 ;; *) die "unknown workload $1 (lua bzip2 sqlite)" ;; esac; }

# args WORKLOAD SIZE(large|small): sets ARGS, the command line after the program.
args() {
    case $1 in
    lua) ARGS=("$DIR/inputs/bench.lua" "$([ "$2" = large ] && echo "$LUA_SCALE" || echo "$LUA_SMALL_SCALE")") ;;
    bzip2) ARGS=(-9 -c "$DIR/inputs/bzip2-$2.txt") ;;
    sqlite) ARGS=(--memdb --verify --size "$([ "$2" = large ] && echo "$SQLITE_SIZE" || echo "$SQLITE_SMALL_SIZE")") ;;
    esac
}

# normalize WORKLOAD FILE: what must be identical across variants (speedtest1 prints
# the time of each step).
normalize() {
    if [ "$1" = sqlite ]; then
        # the padding before the time depends on its width (a slow run takes 100 s)
        sed -E -i 's/ +[0-9]+\.[0-9]+s$/ TIME/' "$2"
    fi
}

clean_profiles() { rm -rf "$QP_PROFILE" "$GCOV_PREFIX"; }

# run WORKLOAD VARIANT SIZE OUT: one run; its stdout (normalized) in OUT, and
# "wall user sys" in OUT.time.
run() {
    local wl=$1 v=$2 size=$3 out=$4 bin st
    bin=$T/bin/$v/$(prog_of "$wl")
    args "$wl" "$size"
    clean_profiles
    local TIMEFORMAT='%3R %3U %3S'
    st=0
    { time "$bin" "${ARGS[@]}" </dev/null >"$out" 2>"$out.err"; } 2>"$out.time" || st=$?
    [ $st -eq 0 ] || fail "$wl/$v exited with status $st: $(head -c 300 "$out.err")
  reproduce: QP_PROFILE=/tmp/p.qp $bin ${ARGS[*]} >/tmp/out"
    clean_profiles
    normalize "$wl" "$out"
}

# check WORKLOAD VARIANT SIZE OUT: OUT must equal native's reference output.
check() {
    local wl=$1 v=$2 size=$3 out=$4 ref=$T/out/$1.$3.ref
    if ! cmp -s "$ref" "$out"; then
        args "$wl" "$size"
        fail "$wl/$v: output differs from native's ($(cmp "$ref" "$out" 2>&1 | head -n 1))
  reproduce: $DIR/native/$(prog_of "$wl") ${ARGS[*]} >/tmp/native.out
             $T/bin/$v/$(prog_of "$wl") ${ARGS[*]} >/tmp/$v.out
             cmp /tmp/native.out /tmp/$v.out$([ "$wl" = sqlite ] && echo "   # after sed -E 's/[0-9]+\\.[0-9]+s\$//'")
  (rewritten with: $QPT --driver=$v $DIR/native/$(prog_of "$wl") -o $T/bin/$v/$(prog_of "$wl"))"
    fi
}

# --- variants ----------------------------------------------------------------------
declare -A HAVE NOTE EST
for wl in $WORKLOADS; do
    p=$(prog_of "$wl")
    mkdir -p "$T/bin/native" && cp "$DIR/native/$p" "$T/bin/native/$p"
    for v in $VARIANTS; do
        mkdir -p "$T/bin/$v"
        case $v in
        gcc) cp "$DIR/gcc/$p" "$T/bin/gcc/$p" && HAVE[$wl.$v]=1 ;;
        none | qp | naive)
            if "$QPT" --driver="$v" "$DIR/native/$p" -o "$T/bin/$v/$p" >"$T/rewrite.log" 2>&1; then
                HAVE[$wl.$v]=1
                echo "overhead: $wl/$v: $(tail -n 1 "$T/rewrite.log")"
            else
                NOTE[$wl.$v]=$(head -n 1 "$T/rewrite.log")
                echo "overhead: $wl/$v: skipped: ${NOTE[$wl.$v]}"
                [ "$v" != none ] || fail "$wl: the null rewrite failed: ${NOTE[$wl.$v]}"
            fi
            ;;
        qpw)
            # A first qp run on the small input; its counts place the counters.
            mkdir -p "$T/bin/qpw.first"
            args "$wl" small
            if "$QPT" "$DIR/native/$p" -o "$T/bin/qpw.first/$p" >"$T/rewrite.log" 2>&1 &&
                QP_PROFILE=$T/qpw.first.qp "$T/bin/qpw.first/$p" "${ARGS[@]}" </dev/null >/dev/null 2>>"$T/rewrite.log" &&
                "$QPT" --weights="$T/qpw.first.qp" "$DIR/native/$p" -o "$T/bin/qpw/$p" >"$T/rewrite.log" 2>&1; then
                HAVE[$wl.$v]=1
                echo "overhead: $wl/$v: $(grep -- '--weights' "$T/rewrite.log" | tail -n 1)"
                EST[$wl]=$(sed -n 's/.*--weights: over the profiled run the counters add \([0-9]*\) instructions.*/\1/p' "$T/rewrite.log" | tail -n 1)
            else
                NOTE[$wl.$v]=$(head -n 1 "$T/rewrite.log")
                echo "overhead: $wl/$v: skipped: ${NOTE[$wl.$v]}"
            fi
            rm -f "$T/qpw.first.qp"
            ;;
        *) die "unknown variant $v (none qp qpw naive gcc)" ;;
        esac
    done
done
active() { # WORKLOAD: native and the variants it has
    local v
    echo native
    for v in $VARIANTS; do [ -z "${HAVE[$1.$v]:-}" ] || echo "$v"; done
}

median() { sort -g | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else printf "%.6f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.3f", a / b; else print "-"}'; }
geomean() { awk '$1 != "-" {s += log($1); n++} END {if (n) printf "%.3f", exp(s / n); else print "-"}'; }

loadavg() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?"; }
LOAD_START=$(loadavg)

# --- 1. wall time --------------------------------------------------------------------
echo
echo "overhead: wall time, $ROUNDS rounds per workload (plus a warm-up run each)"
for wl in $WORKLOADS; do
    mapfile -t vs < <(active "$wl")
    p=$(prog_of "$wl")
    # Warm-up, reference output and checks.
    run "$wl" native large "$T/out/$wl.large.ref"
    for v in "${vs[@]}"; do
        run "$wl" "$v" large "$T/out/$wl.$v"
        check "$wl" "$v" large "$T/out/$wl.$v"
        if [ "$wl" = bzip2 ]; then # the variant must also decompress
            if ! "$T/bin/$v/$p" -dc "$T/out/$wl.$v" >"$T/out/$wl.$v.d" 2>"$T/out/$wl.$v.d.err" ||
                ! cmp -s "$T/out/$wl.$v.d" "$DIR/inputs/bzip2-large.txt"; then
                fail "$wl/$v: decompression does not give the input back
  reproduce: $T/bin/$v/$p -dc $T/out/$wl.$v | cmp - $DIR/inputs/bzip2-large.txt"
            fi
            rm -f "$T/out/$wl.$v.d"
        fi
        : >"$T/times/$wl.$v"
    done
    n=${#vs[@]}
    for r in $(seq "$ROUNDS"); do
        for i in $(seq 0 $((n - 1))); do
            v=${vs[$(((i + r) % n))]}
            run "$wl" "$v" large "$T/out/$wl.$v"
            check "$wl" "$v" large "$T/out/$wl.$v"
            cat "$T/out/$wl.$v.time" >>"$T/times/$wl.$v"
        done
        [ ! -t 1 ] || printf '\r  %s: round %d/%d' "$wl" "$r" "$ROUNDS"
    done
    [ ! -t 1 ] || printf '\r'
    for v in "${vs[@]}"; do
        awk '{print $1}' "$T/times/$wl.$v" | median >"$T/times/$wl.$v.wall"
        awk '{print $2 + $3}' "$T/times/$wl.$v" | median >"$T/times/$wl.$v.cpu"
        awk '{print $1}' "$T/times/$wl.$v" | sort -g | head -n 1 >"$T/times/$wl.$v.min"
    done
    for v in "${vs[@]}"; do
        [ "$v" != native ] || continue
        paste -d' ' "$T/times/$wl.$v" "$T/times/$wl.native" |
            awk '{print $1 / $4}' | median >"$T/times/$wl.$v.paired"
        printf '  %-7s %-7s wall median %7.3f s (native %7.3f s): ratio %s, paired-round median %.3f, ratio of minimums %s; cpu ratio %s\n' \
            "$wl" "$v" "$(cat "$T/times/$wl.$v.wall")" "$(cat "$T/times/$wl.native.wall")" \
            "$(ratio "$(cat "$T/times/$wl.$v.wall")" "$(cat "$T/times/$wl.native.wall")")" \
            "$(cat "$T/times/$wl.$v.paired")" \
            "$(ratio "$(cat "$T/times/$wl.$v.min")" "$(cat "$T/times/$wl.native.min")")" \
            "$(ratio "$(cat "$T/times/$wl.$v.cpu")" "$(cat "$T/times/$wl.native.cpu")")"
    done
    printf '  %-7s all rounds (wall s): ' "$wl"
    for v in "${vs[@]}"; do printf '%s [%s] ' "$v" "$(awk '{printf "%s%s", s, $1; s = " "}' "$T/times/$wl.$v")"; done
    echo
done

# --- 2. instructions under valgrind ---------------------------------------------------
if [ "$VALGRIND" != 0 ]; then
    echo
    echo "overhead: instructions executed (valgrind --tool=cachegrind --cache-sim=no --vex-guest-chase=no), small inputs"
    cc -O2 -shared -fPIC -o "$T/fixed-time.so" "$BENCH/fixed-time.c" || die "cannot build bench/fixed-time.c"
    mkdir -p "$T/vg"
    for wl in $WORKLOADS; do
        mapfile -t vs < <(active "$wl")
        p=$(prog_of "$wl")
        args "$wl" small
        "$T/bin/native/$p" "${ARGS[@]}" </dev/null >"$T/out/$wl.small.ref" 2>/dev/null ||
            fail "$wl/native (small input) exited with status $?"
        normalize "$wl" "$T/out/$wl.small.ref"
        for v in "${vs[@]}"; do
            clean_profiles
            cp "$T/bin/$v/$p" "$T/vg/$p"
            st=0
            LD_PRELOAD=$T/fixed-time.so valgrind --tool=cachegrind --cache-sim=no --vex-guest-chase=no \
                --cachegrind-out-file=/dev/null "$T/vg/$p" "${ARGS[@]}" </dev/null >"$T/out/$wl.$v.small" 2>"$T/out/$wl.$v.vg" || st=$?
            clean_profiles
            [ $st -eq 0 ] || fail "$wl/$v under valgrind exited with status $st: $(grep -v '^==' "$T/out/$wl.$v.vg" | head -c 300)
  reproduce: LD_PRELOAD=fixed-time.so valgrind --tool=cachegrind --cache-sim=no --vex-guest-chase=no $T/bin/$v/$p ${ARGS[*]}"
            normalize "$wl" "$T/out/$wl.$v.small"
            check "$wl" "$v" small "$T/out/$wl.$v.small"
            awk '/I +refs:/ {gsub(",", "", $4); print $4}' "$T/out/$wl.$v.vg" >"$T/times/$wl.$v.instr"
            [ -s "$T/times/$wl.$v.instr" ] || fail "$wl/$v: no 'I refs' line from valgrind"
            printf '  %-7s %-7s %15s instructions' "$wl" "$v" "$(cat "$T/times/$wl.$v.instr")"
            [ "$v" = native ] && echo || echo ": ratio $(ratio "$(cat "$T/times/$wl.$v.instr")" "$(cat "$T/times/$wl.native.instr")")"
        done
    done
fi

# --- table ---------------------------------------------------------------------------
label() { case $1 in none) echo "none/native" ;; qp) echo "qp/native" ;; qpw) echo "qp --weights/native" ;; naive) echo "naive/native" ;; gcc) echo "gcc -fprofile-arcs/native" ;; esac; }
# table KIND(wall|cpu|paired|instr) TITLE
table() {
    local kind=$1 v wl row cell nat
    echo
    echo "$2"
    echo
    row="| workload | native |"
    for v in $VARIANTS; do row="$row $(label "$v") |"; done
    echo "$row"
    row="|---|---:|"
    for v in $VARIANTS; do row="$row---:|"; done
    echo "$row"
    for wl in $WORKLOADS; do
        nat=$T/times/$wl.native.$kind
        [ "$kind" != paired ] || nat=$T/times/$wl.native.wall
        [ -s "$nat" ] || continue
        if [ "$kind" = instr ]; then
            row="| $wl | $(awk '{printf "%.3g", $1}' "$nat") |"
        else
            row="| $wl | $(awk '{printf "%.3f", $1}' "$nat") s |"
        fi
        for v in $VARIANTS; do
            if [ -n "${HAVE[$wl.$v]:-}" ]; then
                if [ "$kind" = paired ]; then
                    cell=$(awk '{printf "%.3f", $1}' "$T/times/$wl.$v.paired")
                else
                    cell=$(ratio "$(cat "$T/times/$wl.$v.$kind")" "$(cat "$nat")")
                fi
                echo "$cell" >>"$T/times/geo.$kind.$v"
            else
                cell="n/a"
            fi
            row="$row $cell |"
        done
        echo "$row"
    done
    row="| geometric mean | |"
    for v in $VARIANTS; do
        if [ -s "$T/times/geo.$kind.$v" ]; then
            row="$row $(geomean <"$T/times/geo.$kind.$v") |"
        else
            row="$row n/a |"
        fi
    done
    echo "$row"
}
echo
echo "## Run-time overhead ($(date -u +%Y-%m-%d), $(nproc) cores, ROUNDS=$ROUNDS, load average $LOAD_START at the start, $(loadavg) at the end)"
table wall "Wall time: median of $ROUNDS alternating rounds, ratio of medians to native (native column: median seconds)"
table paired "Wall time: median of the $ROUNDS per-round ratios to native"
table cpu "CPU time (user+sys): ratio of medians to native"
[ "$VALGRIND" = 0 ] || table instr "Instructions executed under valgrind (small inputs; native column: count), ratio to native"
if [ "$VALGRIND" != 0 ] && [[ " $VARIANTS " = *" qpw "* && " $VARIANTS " = *" none "* ]]; then
    echo
    echo "The --weights estimate of what the counters add over the profiled run, against the instructions they add (qp --weights minus none)"
    echo
    echo "| workload | estimate | measured | estimate/measured - 1 |"
    echo "|---|---:|---:|---:|"
    for wl in $WORKLOADS; do
        [ -n "${EST[$wl]:-}" ] && [ -s "$T/times/$wl.qpw.instr" ] && [ -s "$T/times/$wl.none.instr" ] || continue
        awk -v e="${EST[$wl]}" -v q="$(cat "$T/times/$wl.qpw.instr")" -v n="$(cat "$T/times/$wl.none.instr")" -v w="$wl" \
            'BEGIN {m = q - n; printf "| %s | %d | %d | %s |\n", w, e, m, (m > 0 ? sprintf("%+.2f%%", 100 * (e / m - 1)) : "-")}'
    done
fi
echo
echo "Inputs: lua bench.lua $LUA_SCALE (small $LUA_SMALL_SCALE); bzip2 -9 on $(stat -c %s "$DIR/inputs/bzip2-large.txt") bytes (small $(stat -c %s "$DIR/inputs/bzip2-small.txt")); speedtest1 --memdb --verify --size $SQLITE_SIZE (small $SQLITE_SMALL_SIZE)."
for wl in $WORKLOADS; do
    for v in $VARIANTS; do
        [ -z "${NOTE[$wl.$v]:-}" ] || echo "n/a: $wl/$v: ${NOTE[$wl.$v]}"
    done
done

# --- README's figures (bench/record.sh, sourced at the start; make bench sets BENCH_RESULTS)
wl_name() { case $1 in sqlite) echo "sqlite speedtest1" ;; *) echo "$1" ;; esac; }
# ratios KIND VARIANT: "1.052x, 1.059x, 1.060x" over the workloads that have it
ratios() {
    local kind=$1 v=$2 wl s=""
    for wl in $WORKLOADS; do
        [ -n "${HAVE[$wl.$v]:-}" ] && [ -s "$T/times/$wl.$v.$kind" ] && [ -s "$T/times/$wl.native.$kind" ] ||
            continue
        s="$s${s:+, }$(ratio "$(cat "$T/times/$wl.$v.$kind")" "$(cat "$T/times/$wl.native.$kind")")x"
    done
    echo "$s"
}
names=
for wl in $WORKLOADS; do names="$names${names:+, }$(wl_name "$wl")"; done
if [ "$VALGRIND" != 0 ]; then
    for v in $VARIANTS; do
        r=$(ratios instr "$v")
        [ -n "$r" ] || continue
        case $v in
        qp)
            g=$(ratios instr gcc)
            bench_record overhead.instr.qp "Instructions, qp profiling ($names; valgrind, small inputs)" \
                "$r native${g:+ (gcc \`-fprofile-arcs\`: $g)}" ;;
        qpw)
            # the estimate's largest miss over the workloads, as the table above computes it
            miss=$(for wl in $WORKLOADS; do
                [ -n "${EST[$wl]:-}" ] && [ -s "$T/times/$wl.qpw.instr" ] && [ -s "$T/times/$wl.none.instr" ] || continue
                awk -v e="${EST[$wl]}" -v q="$(cat "$T/times/$wl.qpw.instr")" -v n="$(cat "$T/times/$wl.none.instr")" \
                    'BEGIN {m = q - n; if (m > 0) {d = 100 * (e / m - 1); print (d < 0 ? -d : d)}}'
            done | sort -g | tail -n 1)
            est=
            [ -z "$miss" ] ||
                est="; the rewrite's own estimate of their cost within $(awk -v m="$miss" 'BEGIN {printf "%.1f", m < 0.1 ? 0.1 : m}')%"
            bench_record overhead.instr.qpw "Instructions, qp \`--weights\` (same runs)" "$r native$est" ;;
        none)
            bench_record overhead.instr.none "Instructions, null rewrite (same runs)" "$r native" ;;
        naive)
            bench_record overhead.instr.naive "Instructions, naive counters, one per block (same runs)" "$r native" ;;
        esac
    done
fi
# Wall times only from enough rounds to take a median of.
if [ "$ROUNDS" -ge 5 ]; then
    r=$(ratios wall qp)
    g=$(ratios wall gcc)
    [ -z "$r" ] || bench_record overhead.wall.qp "Wall time, qp profiling ($names; median of $ROUNDS alternating rounds)" \
        "$r native${g:+ (gcc \`-fprofile-arcs\`: $g)}"
fi
