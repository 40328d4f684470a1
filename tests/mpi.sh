#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# A parallel job (Open MPI, mpirun -np 4 on this machine; skipped without mpicc and
# mpirun): tests/qpt/mpi_prog's rank r calls work() 100 (r + 1) times.
#  - rewritten: QP_PROFILE=prof.%r.qp gives a profile per rank; qp metrics over the four
#    shows each rank (100, 200, 300, 400) and the sum, min, max and mean (1000, 100, 400,
#    250);
#  - live: dyn attach --children MPIRUN measures every rank at once, the same values;
#  - dyn search over the 2 ranks of a job with a planted imbalance names it
#    (tests/qpt/mpi_imbalance.c).
set -u
# shellcheck source=tests/lib.sh
. "${top_srcdir:-.}/tests/lib.sh"
B=$top_builddir
S=$top_srcdir
D=$B/tests/mpi.d
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    echo "skip: no mpicc/mpirun (Debian: openmpi-bin libopenmpi-dev)"
    exit 77
fi
rm -rf "$D"
mkdir -p "$D" || exit 99
R=$B/tools/qpt-rewrite
Q=$B/tools/qp
DYN=$B/tools/dyn
MPIRUN=(mpirun --oversubscribe -np 4)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
mpicc -O2 -o "$D/mpi_prog" "$S/tests/qpt/mpi_prog.c" || { echo "skip: mpicc failed"; exit 77; }
want="4 ranks, 149500" # the sum of i < 100 (r + 1) over the ranks

# Rewritten: a profile per rank.
"$R" -e 'count calls(work) total' "$D/mpi_prog" -o "$D/mpi.inst" 2>"$D/rw.err" ||
    bad "rewrite: $(cat "$D/rw.err")"
out=$(QP_PROFILE="$D/prof.%r.qp" "${MPIRUN[@]}" -x QP_PROFILE "$D/mpi.inst" 2>&1)
[ "$out" = "$want" ] || bad "the rewritten job printed: $out"
csv=$("$Q" metrics --csv "$D"/prof.[0-3].qp 2>&1)
exp="count calls(work) total,prof.0.qp: total,count,100,1
count calls(work) total,prof.1.qp: total,count,200,1
count calls(work) total,prof.2.qp: total,count,300,1
count calls(work) total,prof.3.qp: total,count,400,1
count calls(work) total,sum: total,count,1000,1
count calls(work) total,min: total,count,100,1
count calls(work) total,max: total,count,400,1
count calls(work) total,mean: total,count,250,1"
[ "$csv" = "metric,focus,kind,value,measured
$exp" ] && ok "rewritten job: a profile per rank (100/200/300/400), sum 1000, min 100, max 400, mean 250" ||
    bad "qp metrics over the ranks: $csv"

# Live: every rank of a running job.
if [ -x "$DYN" ]; then
    "${MPIRUN[@]}" "$D/mpi_prog" "$D" >"$D/job.out" 2>&1 &
    job=$!
    # The ranks: the launcher's children running mpi_prog.
    for i in $(seq 100); do
        [ "$(pgrep -c -P $job -f mpi_prog)" = 4 ] && break
        sleep 0.1
    done
    "$DYN" attach --children $job -e 'count calls(work) total' -d 60 -o "$D/live.csv" \
        >"$D/dyn.out" 2>&1 &
    dp=$!
    # dyn says when each process's metrics are in: then the ranks may work.
    wait_lines "$D/dyn.out" ': measuring (stopped' 4 60
    touch "$D/go"
    # The ranks worked: the session ends (Ctrl-C, as a user would).
    for i in $(seq 600); do
        [ "$(ls "$D"/done.* 2>/dev/null | wc -l)" = 4 ] && break
        sleep 0.1
    done
    kill -INT $dp
    wait $dp
    st=$?
    touch "$D/stop"
    wait $job
    if grep -q "ermission" "$D/dyn.out"; then
        echo "skip live: ptrace not permitted"
    else
        got=$(grep -E '^count calls\(work\) total,(rank [0-3]|sum|min|max|mean): total,' \
            "$D/live.csv" | cut -d, -f2,4 | tr '\n' ' ')
        [ $st = 0 ] && [ "$got" = "rank 0: total,100 rank 1: total,200 rank 2: total,300 rank 3: total,400 sum: total,1000 min: total,100 max: total,400 mean: total,250 " ] &&
            [ "$(cat "$D/job.out")" = "$want" ] &&
            ok "dyn attach --children mpirun: every rank (100/200/300/400), sum 1000; the job's output unchanged" ||
            bad "live job ($st): $got / $(cat "$D/dyn.out") / $(cat "$D/job.out")"
    fi
fi

# The search over the ranks (dyn search attach P0,P1): a job of 2 ranks (one a core:
# ranks that wait yield, and oversubscribed ones would share a core with the one they
# wait for), rank 1 computes four times as long as rank 0, which waits for it at a barrier;
# the comparison across the processes names crunch in rank 1 as the imbalance.
# The job runs at a higher priority where it may (root): on a machine busy with other tests
# the ranks, which spin while they wait, are descheduled in turn and each waits for the
# other, which hides the imbalance (crunch's shares 48% and 40% beside a busy loop and
# two builds); niced, 7% and 96%. It runs until killed (the search takes 10-40 s).
if [ -x "$DYN" ] && mpicc -O1 -g -o "$D/imb" "$S/tests/qpt/mpi_imbalance.c"; then
    MPIRUN2=(mpirun --oversubscribe -np 2)
    [ "$(id -u)" = 0 ] && MPIRUN2=(nice -n -10 "${MPIRUN2[@]}" --allow-run-as-root)
    "${MPIRUN2[@]}" "$D/imb" 300 >"$D/imb.out" 2>&1 &
    job=$!
    for i in $(seq 100); do
        [ "$(pgrep -c -P $job -f "$D/imb")" = 2 ] && break
        sleep 0.1
    done
    pids=$(pgrep -P $job -f "$D/imb" | sort -n | tr '\n' ',' | sed 's/,$//')
    rank1=$(for p in ${pids//,/ }; do
        tr '\0' '\n' </proc/$p/environ | grep -qx 'OMPI_COMM_WORLD_RANK=1' && echo $p; done)
    # (a loaded machine skews one window's shares: a second search before failing)
    for try in 1 2; do
        "$DYN" search --step 0.6 attach "$pids" >"$D/search.out" 2>"$D/search.err"
        st=$?
        [ $st = 0 ] && grep -Eq "^  CPU-bound +crunch .* imbalance: pid $rank1 \(rank 1\)" "$D/search.out" &&
            break
    done
    kill $job 2>/dev/null
    wait $job 2>/dev/null
    if grep -q "ermission" "$D/search.err"; then
        echo "skip search: ptrace not permitted"
    elif [ $st = 0 ] && grep -Eq "^  CPU-bound +crunch .* imbalance: pid $rank1 \(rank 1\)" "$D/search.out"; then
        ok "dyn search over 2 ranks: crunch in rank 1 (pid $rank1) is the imbalance"
    else
        bad "dyn search over the ranks ($st, rank 1 is $rank1): $(grep -A3 '^across' "$D/search.out") $(cat "$D/search.err")"
    fi
fi

[ "$fails" -eq 0 ] || exit 1
rm -rf "$D"
exit 0
