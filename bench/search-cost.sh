#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# The bottleneck search's own cost (issue 33): python3.11 runs a fixed CPU-bound
# workload (the same number of iterations each time), natively and under `dyn search
# --max-overhead 5% run`; the ratio of their wall times, median of ROUNDS (3) runs,
# side by side in one run. The search keeps inserting and removing timers while the
# program runs: the ratio is what a user pays for the answer. Then the work alone (timed
# by the program, after a 2 s sleep during which `dyn search attach` starts and reads
# the program): the search's own instrumentation against its --max-overhead budget.
# Then postgres (Debian's postgresql-15, when installed and run as root): a server in a
# temporary directory; one connection's backend runs a CPU-bound query (about 6 s)
# natively, then with `dyn search --max-overhead 5 attach` on that backend (attached
# while the backend sleeps 2 s first, so the search's own start is not in the query's
# time); the ratio of the query's times, median of ROUNDS.
# Usage: bench/search-cost.sh [DYN]   (ROUNDS=N, ITER=N: 40M, about 3 s natively;
#        PGROWS=N: the query's rows, 8M)
set -u
DYN=${1:-${top_builddir:-.}/tools/dyn}
PY=/usr/bin/python3.11
ROUNDS=${ROUNDS:-3}
ITER=${ITER:-40000000}
[ -x "$PY" ] || { echo "search-cost: no $PY: skipped"; exit 0; }
. "$(dirname "$0")/record.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/work.py" <<PY
import sys, time
def inner(i):
    return (i * i) % 7
def outer(n):
    s = 0
    for i in range(n):
        s += inner(i)
    return s
time.sleep(float(sys.argv[1]))  # an attaching search starts meanwhile
t = time.perf_counter()
print(outer($ITER))
print("work %.3f" % (time.perf_counter() - t), file=sys.stderr)
PY
now() { date +%s.%N; }
med() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
work() { awk '/^work / { print $2 }' "$1"; }
i=0
: >"$tmp/native"
: >"$tmp/search"
: >"$tmp/wnative"
: >"$tmp/wsearch"
while [ $i -lt "$ROUNDS" ]; do
    i=$((i + 1))
    # The whole run, dyn's start and analysis included (dyn search run).
    t0=$(now)
    "$PY" "$tmp/work.py" 0 >/dev/null 2>"$tmp/n.err"
    t1=$(now)
    "$DYN" search --max-overhead 5 run -- "$PY" "$tmp/work.py" 0 >"$tmp/out" 2>&1
    t2=$(now)
    echo "$t1 - $t0" | bc -l >>"$tmp/native"
    echo "$t2 - $t1" | bc -l >>"$tmp/search"
    # The work alone, timed by the program, with the search attached while it sleeps.
    work "$tmp/n.err" >>"$tmp/wnative"
    "$PY" "$tmp/work.py" 2 >/dev/null 2>"$tmp/a.err" &
    p=$!
    sleep 0.2
    "$DYN" search --max-overhead 5 attach $p >"$tmp/aout" 2>&1
    wait $p
    work "$tmp/a.err" >>"$tmp/wsearch"
done
n=$(med <"$tmp/native")
s=$(med <"$tmp/search")
printf 'search cost (python3.11, %s iterations, median of %s): native %.2f s, under dyn search run %.2f s, ratio %.3f (with dyn start and analysis)\n' \
    "$ITER" "$ROUNDS" "$n" "$s" "$(echo "$s / $n" | bc -l)"
grep -E "^ 1\. |stopped" "$tmp/out" | head -3
bench_record search.python "\`dyn search --max-overhead 5 run\`: a CPU-bound python3.11 run ($(printf '%.1f' "$n") s), dyn's start and analysis included" \
    "$(printf '%.3f' "$(echo "$s / $n" | bc -l)")x native wall time (median of $ROUNDS$(bench_load))"
n=$(med <"$tmp/wnative")
s=$(med <"$tmp/wsearch")
printf 'search cost (python3.11, the work alone, attached, median of %s): native %.2f s, under dyn search %.2f s, ratio %.3f\n' \
    "$ROUNDS" "$n" "$s" "$(echo "$s / $n" | bc -l)"
grep -E "^ 1\. |stopped" "$tmp/aout" | head -3
bench_record search.attached "\`dyn search --max-overhead 5 attach\`: the same work, the search attached" \
    "$(printf '%.3f' "$(echo "$s / $n" | bc -l)")x native wall time (median of $ROUNDS$(bench_load))"

# postgres
PGBIN=/usr/lib/postgresql/15/bin
PGROWS=${PGROWS:-8000000}
if [ ! -x "$PGBIN/postgres" ] || [ "$(id -u)" != 0 ] || ! id postgres >/dev/null 2>&1; then
    echo "search cost (postgres): skipped (needs postgresql-15 and root)"
    exit 0
fi
chown postgres "$tmp"
pg() { runuser -u postgres -- "$@"; }
pg "$PGBIN/initdb" -A trust -D "$tmp/pg" >"$tmp/initdb.log" 2>&1 ||
    { echo "search cost (postgres): initdb failed: $(tail -n 1 "$tmp/initdb.log")"; exit 0; }
pg "$PGBIN/pg_ctl" -D "$tmp/pg" -o "-k $tmp -c listen_addresses=" -l "$tmp/pg.log" -w start >/dev/null ||
    { echo "search cost (postgres): the server did not start: $(tail -n 1 "$tmp/pg.log")"; exit 0; }
trap 'pg "$PGBIN/pg_ctl" -D "$tmp/pg" -m immediate stop >/dev/null 2>&1; rm -rf "$tmp"' EXIT
query="SELECT count(*) FROM generate_series(1, $PGROWS) g WHERE md5(g::text) LIKE '0%';"
# psql's \timing line for the query: milliseconds.
query_ms() { awk '/^Time: / { v = $2 } END { print v }' "$1"; }
: >"$tmp/pg-native"
: >"$tmp/pg-search"
i=0
while [ $i -lt "$ROUNDS" ]; do
    i=$((i + 1))
    printf 'SELECT pg_sleep(2);\n\\timing on\n%s\n' "$query" |
        "$PGBIN/psql" -X -h "$tmp" -U postgres -d postgres >"$tmp/pn.out" 2>&1
    query_ms "$tmp/pn.out" >>"$tmp/pg-native"
    printf 'SELECT pg_backend_pid() AS pid \\gset\n\\setenv BACKEND :pid\n\\! %s search --max-overhead 5 attach $BACKEND >%s 2>&1 &\nSELECT pg_sleep(2);\n\\timing on\n%s\n' \
        "$DYN" "$tmp/pg-dyn.out" "$query" |
        "$PGBIN/psql" -X -h "$tmp" -U postgres -d postgres >"$tmp/ps.out" 2>&1
    query_ms "$tmp/ps.out" >>"$tmp/pg-search"
    # The search ends with the backend.
    k=0
    while [ $k -lt 50 ] && ! grep -q "^dyn search: [0-9.]* s," "$tmp/pg-dyn.out" 2>/dev/null; do
        sleep 0.2
        k=$((k + 1))
    done
done
n=$(med <"$tmp/pg-native")
s=$(med <"$tmp/pg-search")
if [ -z "$n" ] || [ -z "$s" ]; then
    echo "search cost (postgres): no timing: $(tail -n 2 "$tmp/ps.out")"
    exit 0
fi
printf 'search cost (postgres backend, %s rows, median of %s): native %.2f s, under dyn search %.2f s, ratio %.3f\n' \
    "$PGROWS" "$ROUNDS" "$(echo "$n / 1000" | bc -l)" "$(echo "$s / 1000" | bc -l)" "$(echo "$s / $n" | bc -l)"
bench_record search.postgres "\`dyn search --max-overhead 5 attach\`: a postgres backend's $(printf '%.0f' "$(echo "$n / 1000" | bc -l)") s query" \
    "$(printf '%.3f' "$(echo "$s / $n" | bc -l)")x native (budget 5%; median of $ROUNDS$(bench_load))"
grep -v "note:" "$tmp/pg-dyn.out" | tail -n 25 >&2
