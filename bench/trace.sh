#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Control-flow tracing (issue 17): the chord tracer (--driver=trace) against the naive
# one (--driver=trace-naive, a 4-byte record per block run) on the overhead workloads
# (bench/workloads.sh builds them): lua5.4 running bench/bench.lua, bzip2 -9 on the
# small generated text, sqlite's speedtest1 --memdb.
#   bytes/block   trace bytes written per block run (blocks: the naive trace's records);
#                 the naive tracer writes 32-bit records, the chord tracer 16-bit ones
#   recs/blk      records per block run (events, as qp trace stats counts them: a run of
#                 equal records counts each): the chord tracer's own gain, apart from the
#                 width of its records
#   time          medians of ROUNDS runs: wall time, and cpu time (user + sys), and the
#                 cpu time added to native's
# The chord trace is checked against the naive one: `qp trace stats` must regenerate as
# many blocks with the same hash of their sequence, and no mark - on bzip2 and sqlite;
# lua seeds its string hashes from the clock and from addresses (luai_makeseed), so two
# runs differ by a few blocks: its check is the count, within 0.001%. Runs are made
# without address randomization (setarch -R), the binaries in folders of one length.
#   M instr       instructions executed under valgrind (cachegrind, no cache simulation:
#                 "I refs"), medians of IROUNDS runs, in millions, added to native's: the
#                 steady measure on a shared machine (cpu time varies with the load)
# "trace+w": the chord tracer whose silent ways out come from a qp profile of the same
# run (--weights; the best a profile can do), besides the static layout heuristic.
# Targets (issue 17): >= 5x fewer bytes and >= 2x less added time than naive; (issue 31)
# >= 4x fewer added instructions than naive.
# Environment: ROUNDS (5), IROUNDS (3; 0: no valgrind runs), LUA_SCALE (2), SQLITE_SIZE
# (10), WORKLOADS ("lua bzip2 sqlite").
# Usage: bench/trace.sh [DIR [qpt-rewrite [qp]]]
set -eu
BENCH=$(cd "$(dirname "$0")" && pwd)
. "$BENCH/record.sh"
DIR=${1:-${QPT_BENCH_DIR:-bench-workloads}}
QPT=${2:-tools/qpt-rewrite}
QP=${3:-tools/qp}
ROUNDS=${ROUNDS:-5}
IROUNDS=${IROUNDS:-3}
LUA_SCALE=${LUA_SCALE:-2}
SQLITE_SIZE=${SQLITE_SIZE:-10}
WORKLOADS=${WORKLOADS:-lua bzip2 sqlite}
die() { echo "trace-bench: $*" >&2; exit 1; }
[ -x "$QPT" ] && [ -x "$QP" ] || die "usage: $0 [DIR [qpt-rewrite [qp]]]"
QPT=$(cd "$(dirname "$QPT")" && pwd)/$(basename "$QPT")
QP=$(cd "$(dirname "$QP")" && pwd)/$(basename "$QP")
"$BENCH/workloads.sh" "$DIR" >"${TMPDIR:-/tmp}/qpt-workloads.$$.log" 2>&1 ||
    { cat "${TMPDIR:-/tmp}/qpt-workloads.$$.log" >&2; die "bench/workloads.sh $DIR failed"; }
rm -f "${TMPDIR:-/tmp}/qpt-workloads.$$.log"
DIR=$(cd "$DIR" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/qpt-trace.XXXXXX")
trap 'rm -rf "$T"' EXIT

prog_of() { case $1 in lua) echo lua ;; bzip2) echo bzip2 ;; sqlite) echo speedtest1 ;; esac; }
args() {
    case $1 in
    lua) ARGS=("$DIR/inputs/bench.lua" "$LUA_SCALE") ;;
    bzip2) ARGS=(-9 -c "$DIR/inputs/bzip2-small.txt") ;;
    sqlite) ARGS=(--memdb --verify --size "$SQLITE_SIZE") ;;
    esac
}
NORAND=
setarch "$(uname -m)" -R true 2>/dev/null && NORAND="setarch $(uname -m) -R"
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# run BIN OUT: one run, trace files and profile under $T/run; "wall cpu" seconds on
# stdout (cpu: user + sys, writing the trace included; steadier than wall time when
# other work shares the machine).
run() {
    rm -rf "$T/run"
    mkdir -p "$T/run"
    QP_PROFILE=$T/run/p.qp /usr/bin/time -f '%e %U %S' -o "$T/time" $NORAND "$1" "${ARGS[@]}" \
        >"$2" 2>/dev/null </dev/null || true
    awk '{printf "%s %.3f\n", $1, $2 + $3}' "$T/time"
}

# instr BIN: the instructions one run executes under valgrind ("I refs"); the trace files
# and the profile under $T/run as run's.
instr() {
    rm -rf "$T/run"
    mkdir -p "$T/run"
    QP_PROFILE=$T/run/p.qp $NORAND valgrind --tool=cachegrind --cache-sim=no \
        --cachegrind-out-file=/dev/null "$1" "${ARGS[@]}" >/dev/null 2>"$T/vg" </dev/null || true
    awk '/I +refs:/ {gsub(",", "", $4); print $4}' "$T/vg"
}

command -v /usr/bin/time >/dev/null || die "needs /usr/bin/time (apt-get install time)"
[ "$IROUNDS" = 0 ] || command -v valgrind >/dev/null ||
    die "needs valgrind (apt-get install valgrind), or IROUNDS=0"
printf '%-7s %-12s %9s %8s %11s %7s %7s %8s %9s %22s\n' workload variant "bytes/blk" "recs/blk" bytes \
    "wall s" "cpu s" "added" "M instr" "vs naive"
BYTES_X= INSTR_X=
for wl in $WORKLOADS; do
    p=$(prog_of "$wl")
    args "$wl"
    native=$DIR/native/$p
    mkdir -p "$T/qp" "$T/v1" "$T/v2" "$T/v3"
    "$QPT" "$native" -o "$T/qp/$p" >/dev/null 2>&1 || die "$wl: qp rewrite failed"
    QP_PROFILE=$T/qp/$p.qp "$T/qp/$p" "${ARGS[@]}" >/dev/null 2>&1 </dev/null
    "$QPT" --driver=trace-naive "$native" -o "$T/v1/$p" >/dev/null 2>&1 || die "$wl: trace-naive rewrite failed"
    "$QPT" --driver=trace "$native" -o "$T/v2/$p" >/dev/null 2>&1 || die "$wl: trace rewrite failed"
    "$QPT" --driver=trace --weights "$T/qp/$p.qp" "$native" -o "$T/v3/$p" >/dev/null 2>&1 ||
        die "$wl: trace --weights rewrite failed"
    "$native" "${ARGS[@]}" >"$T/native.out" 2>/dev/null </dev/null
    [ "$wl" = sqlite ] && sed -E -i 's/ +[0-9]+\.[0-9]+s$//' "$T/native.out"
    declare -A wall cpu bytes ins
    for v in native trace-naive trace trace+w; do
        case $v in
        native) bin=$native ;;
        trace-naive) bin=$T/v1/$p ;;
        trace) bin=$T/v2/$p ;;
        *) bin=$T/v3/$p ;;
        esac
        ts=() cs=()
        for r in $(seq 0 "$ROUNDS"); do # round 0: warm-up, and the checks
            read -r t c < <(run "$bin" "$T/out")
            [ "$r" -eq 0 ] || ts+=("$t")
            [ "$r" -eq 0 ] || cs+=("$c")
            [ "$r" -eq 0 ] || continue
            [ "$wl" = sqlite ] && sed -E -i 's/ +[0-9]+\.[0-9]+s$//' "$T/out"
            cmp -s "$T/out" "$T/native.out" || die "$wl: $v: output differs from native's"
            [ $v = native ] && continue
            bytes[$v]=$(cat "$T"/run/p.trace.* | wc -c)
            "$QP" trace stats "$bin" "$T"/run/p.trace.* >"$T/$v.stats" || die "$wl: $v: qp trace stats failed"
        done
        wall[$v]=$(printf '%s\n' "${ts[@]}" | median)
        cpu[$v]=$(printf '%s\n' "${cs[@]}" | median)
        ins[$v]=0
        if [ "$IROUNDS" != 0 ]; then
            is=()
            for r in $(seq 1 "$IROUNDS"); do
                i=$(instr "$bin")
                [ -n "$i" ] || die "$wl: $v: no 'I refs' line from valgrind: $(tail -3 "$T/vg")"
                is+=("$i")
            done
            ins[$v]=$(printf '%s\n' "${is[@]}" | median)
        fi
    done
    blocks=$(awk '{for (i = 1; i <= NF; i++) if ($(i + 1) == "blocks,") s += $i} END {print s}' "$T/trace-naive.stats")
    for v in trace trace+w; do
        # Equal block sequences, nothing marked.
        grep -q ' 0 marks' "$T/$v.stats" || die "$wl: $v: marks: $(cat "$T/$v.stats")"
        if [ "$wl" = lua ]; then
            b=$(awk '{for (i = 1; i <= NF; i++) if ($(i + 1) == "blocks,") s += $i} END {print s}' "$T/$v.stats")
            awk -v a="$blocks" -v b="$b" 'BEGIN {d = a - b; if (d < 0) d = -d; exit !(d <= a / 100000)}' ||
                die "$wl: $v: $b blocks regenerated, the naive trace has $blocks"
            continue
        fi
        a=$(grep -o 'blocks hash [0-9a-f]*' "$T/trace-naive.stats" | sort | tr '\n' ' ')
        b=$(grep -o 'blocks hash [0-9a-f]*' "$T/$v.stats" | sort | tr '\n' ' ')
        [ "$a" = "$b" ] || die "$wl: $v: the regenerated blocks differ from the naive trace's ($a / $b)"
    done
    for v in native trace-naive trace trace+w; do
        added=$(echo "${cpu[$v]} - ${cpu[native]}" | bc -l)
        if [ $v = native ]; then
            printf '%-7s %-12s %9s %8s %11s %7.3f %7.3f %8s %9.1f %22s\n' "$wl" "$v" - - - "${wall[$v]}" \
                "${cpu[$v]}" - "$(echo "${ins[$v]} / 1000000" | bc -l)" -
            continue
        fi
        nadded=$(echo "${cpu[trace-naive]} - ${cpu[native]}" | bc -l)
        iadded=$(echo "${ins[$v]} - ${ins[native]}" | bc -l)
        niadded=$(echo "${ins[trace-naive]} - ${ins[native]}" | bc -l)
        recs=$(awk '{for (i = 1; i <= NF; i++) if ($(i + 1) == "records,") s += $i} END {print s}' "$T/$v.stats")
        nrecs=$(awk '{for (i = 1; i <= NF; i++) if ($(i + 1) == "records,") s += $i} END {print s}' "$T/trace-naive.stats")
        printf '%-7s %-12s %9.3f %8.3f %11d %7.3f %7.3f %8.3f %9.1f %22s\n' "$wl" "$v" \
            "$(echo "${bytes[$v]} / $blocks" | bc -l)" "$(echo "$recs / $blocks" | bc -l)" "${bytes[$v]}" \
            "${wall[$v]}" "${cpu[$v]}" "$added" "$(echo "$iadded / 1000000" | bc -l)" \
            "$(awk -v a="${bytes[trace-naive]}" -v b="${bytes[$v]}" -v x="$nadded" -v y="$added" \
                -v ra="$nrecs" -v rb="$recs" -v xi="$niadded" -v yi="$iadded" \
                'BEGIN {printf "%.1fx/%.1fx/%s/%s", a / b, ra / rb, (y > 0.001 ? sprintf("%.1fx", x / y) : "-"),
                        (yi > 0 ? sprintf("%.2fx", xi / yi) : "-")}')"
    done
    # README's figures (bench/record.sh): the chord tracer's gains over naive, per workload
    BYTES_X="$BYTES_X${BYTES_X:+, }$(awk -v a="${bytes[trace-naive]}" -v b="${bytes[trace]}" 'BEGIN {printf "%.1fx", a / b}')"
    iadded=$(echo "${ins[trace]} - ${ins[native]}" | bc -l)
    niadded=$(echo "${ins[trace-naive]} - ${ins[native]}" | bc -l)
    INSTR_X="$INSTR_X${INSTR_X:+, }$(awk -v x="$niadded" -v y="$iadded" 'BEGIN {if (y > 0) printf "%.1fx", x / y; else printf "-"}')"
    echo "$wl: $blocks blocks run; added: cpu s over native's; M instr: millions of instructions (native: all; the others: added to native's); 'vs naive': bytes, records, added cpu time and added instructions, naive's / this one's; the chord traces regenerate the naive one exactly"
    unset wall cpu bytes ins
    rm -rf "$T/qp" "$T/v1" "$T/v2" "$T/v3" "$T/run"
done

names=$(echo "$WORKLOADS" | sed 's/ /, /g')
[ -z "${BYTES_X:-}" ] || bench_record trace.bytes "Trace size, chord trace vs a record per block ($names)" "$BYTES_X fewer bytes"
[ "$IROUNDS" = 0 ] || [ -z "${INSTR_X:-}" ] ||
    bench_record trace.instr "Trace cost, instructions added: naive / chord tracer (same runs)" "$INSTR_X"

# Address tracing (--trace-mem) against valgrind lackey: bzip2 -9 on the first MEM_KB
# (300) kB of the small text (lackey runs some 200x slower than native: a short run).
# Medians of ROUNDS runs of the rewritten program (cpu: user + sys); lackey once, its
# log to /dev/null. bytes/access: every record of the trace (events and values) over
# the accesses of bzip2's own code that qp trace mem regenerates.
if [[ " $WORKLOADS " == *" bzip2 "* ]]; then
    head -c $((${MEM_KB:-300} * 1000)) "$DIR/inputs/bzip2-small.txt" >"$T/mem.in"
    mkdir -p "$T/m"
    "$QPT" --driver=trace --trace-mem "$DIR/native/bzip2" -o "$T/m/bzip2" >/dev/null 2>&1 ||
        die "bzip2: --trace-mem rewrite failed"
    ARGS=(-9 -c "$T/mem.in")
    ts=() cs=() ns=()
    for r in $(seq 0 "$ROUNDS"); do
        read -r t c < <(run "$DIR/native/bzip2" "$T/mem.native")
        [ "$r" -eq 0 ] || ns+=("$c")
        read -r t c < <(run "$T/m/bzip2" "$T/mem.out")
        [ "$r" -eq 0 ] || { ts+=("$t"); cs+=("$c"); }
    done
    cmp -s "$T/mem.out" "$T/mem.native" || die "bzip2 --trace-mem: output differs from native's"
    bytes=$(cat "$T"/run/p.trace.* | wc -c)
    "$QP" trace stats "$T/m/bzip2" "$T"/run/p.trace.* >"$T/mem.stats" || die "bzip2 --trace-mem: qp trace stats failed"
    grep -q ' 0 marks' "$T/mem.stats" || die "bzip2 --trace-mem: marks: $(cat "$T/mem.stats")"
    acc=$(grep -o '[0-9]* data accesses' "$T/mem.stats" | awk '{s += $1} END {print s}')
    /usr/bin/time -f '%e %U %S' -o "$T/time" valgrind --tool=lackey --trace-mem=yes \
        --log-file=/dev/null "$DIR/native/bzip2" "${ARGS[@]}" >/dev/null 2>&1 </dev/null
    read -r lw lu ls <"$T/time"
    wall_m=$(printf '%s\n' "${ts[@]}" | median)
    cpu_m=$(printf '%s\n' "${cs[@]}" | median)
    cpu_n=$(printf '%s\n' "${ns[@]}" | median)
    printf 'bzip2 --trace-mem (%s kB): %d accesses, %d bytes, %.2f bytes/access; cpu %.3f s (native %.3f), wall %.3f s; lackey wall %.1f s, cpu %.1f s: %.0fx faster (cpu)\n' \
        "${MEM_KB:-300}" "$acc" "$bytes" "$(echo "$bytes / $acc" | bc -l)" "$cpu_m" "$cpu_n" "$wall_m" \
        "$lw" "$(echo "$lu + $ls" | bc -l)" "$(echo "($lu + $ls) / $cpu_m" | bc -l)"
fi
