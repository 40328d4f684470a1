#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# CPython's own regression suite (`python3.11 -m test`, Debian's libpython3.11-testsuite)
# over python3.11 rewritten with --driver=none and with qp (`make corpus`, not part of
# `make check`): each rewrite must pass and fail the same tests as the original.
#
# Usage: bench/python-tests.sh [path/to/qpt-rewrite] [WORKDIR]
#
# Each run happens in a private mount namespace (root and `unshare -m`) with an overlay
# over /usr/bin whose upper layer is a scratch folder: the program under test is
# /usr/bin/python3.11 itself (sys.executable, the subprocesses the tests start, the
# interpreter's prefix are those of the original), and the qp profile it writes beside
# itself lands in the scratch layer, never in /usr/bin. The environment is clean (HOME,
# TMPDIR and the working directory fresh), LANG=C.UTF-8, JOBS (2) workers, each test at
# most TEST_TIMEOUT (600) seconds; TESTS names a subset (all by default); EXCLUDE names
# tests left out (default test_socket: without a network it waits out its timeout, in
# the original too).
# Exit status: 0 same results, 1 a difference, 77 skipped (not root, no unshare or
# overlay, no test suite and no apt-get), 99 hard error.
set -u
QPT_REWRITE=${1:-tools/qpt-rewrite}
W=${2:-python-tests.d}
PY=/usr/bin/python3.11
JOBS=${JOBS:-2}
JOBS_SAVED=$JOBS
TEST_TIMEOUT=${TEST_TIMEOUT:-600}
EXCLUDE=${EXCLUDE-test_socket}
TESTS=${TESTS:-}

[ "$(id -u)" -eq 0 ] || { echo "python-tests: SKIP (needs root for the mount namespace)"; exit 77; }
[ -x "$PY" ] || { echo "python-tests: SKIP (no $PY)"; exit 77; }
if [ ! -f /usr/lib/python3.11/test/test_grammar.py ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libpython3.11-testsuite >/dev/null 2>&1 ||
        { echo "python-tests: SKIP (libpython3.11-testsuite cannot be installed)"; exit 77; }
fi
rm -rf "$W"
mkdir -p "$W" || exit 99
W=$(cd "$W" && pwd)
unshare -m true 2>/dev/null || { echo "python-tests: SKIP (unshare -m fails)"; exit 77; }

# run NAME FILE [TESTS]: the suite (or TESTS) with FILE (empty: the original) as
# /usr/bin/python3.11; the failed tests' names, sorted, into $W/NAME.failed (with the
# output in $W/NAME.log).
run() {
    local name=$1 file=$2 tests=${3:-$TESTS} d=$W/$1
    mkdir -p "$d/up" "$d/work" "$d/home" "$d/tmp" || return 99
    chmod 1777 "$d/tmp"
    # shellcheck disable=SC2086
    unshare -m sh -c '
        mount -t overlay overlay -o lowerdir=/usr/bin,upperdir="$1/up",workdir="$1/work" /usr/bin || exit 99
        [ -z "$2" ] || cp "$2" /usr/bin/python3.11 || exit 99
        cd "$1/home" && exec env -i HOME="$1/home" TMPDIR="$1/tmp" PATH=/usr/bin:/bin LANG=C.UTF-8 \
            /usr/bin/python3.11 -m test -j"$3" --timeout "$4" $5' \
        sh "$d" "$file" "$JOBS" "$TEST_TIMEOUT" "${tests:-${EXCLUDE:+-x $EXCLUDE}}" >"$W/$name.log" 2>&1
    local st=$?
    # The summary lists the failed (and environment-altering, and crashed) tests after
    # "N tests failed:" lines, indented; take every indented name of those blocks.
    awk '/^[0-9]+ tests? (failed|crashed|altered the execution environment)/ { grab = 1; next }
         /^$/ { grab = 0 } grab && /^    / { for (i = 1; i <= NF; i++) print $i }' "$W/$name.log" |
        sort -u >"$W/$name.failed"
    grep -E '^(== )?Tests result:|^Total tests:|^Result:' "$W/$name.log" | tail -n 2 | tr '\n' ' ' >"$W/$name.summary"
    echo "python-tests: $name: exit $st, $(wc -l <"$W/$name.failed") failed: $(tr '\n' ' ' <"$W/$name.failed")"
    return 0
}

start=$(date +%s)
run original "" || exit 99
fails=0
for drv in none qp; do
    "$QPT_REWRITE" --driver=$drv "$PY" -o "$W/python3.11.$drv" >"$W/rewrite.$drv.log" 2>&1 ||
        { echo "python-tests: FAIL $drv: rewrite: $(tail -n 1 "$W/rewrite.$drv.log")"; fails=$((fails + 1)); continue; }
    run "$drv" "$W/python3.11.$drv" || exit 99
    # Not vacuous: the suite ran (a summary line) in both.
    if ! grep -q 'Tests result' "$W/$drv.log" || ! grep -q 'Tests result' "$W/original.log"; then
        echo "python-tests: FAIL $drv: no test summary (see $W/$drv.log)"
        fails=$((fails + 1))
    elif cmp -s "$W/original.failed" "$W/$drv.failed"; then
        echo "python-tests: ok   $drv: the same tests pass and fail as with the original"
    else
        # A test whose result differs runs again alone (-j1) under both: a timing test
        # that failed under load agrees then, and is only named.
        differ=$(comm -3 "$W/original.failed" "$W/$drv.failed" | tr -d '\t' | tr '\n' ' ')
        JOBS=1
        run "original-again-$drv" "" "$differ" >/dev/null || exit 99
        run "$drv-again" "$W/python3.11.$drv" "$differ" >/dev/null || exit 99
        JOBS=$JOBS_SAVED
        if cmp -s "$W/original-again-$drv.failed" "$W/$drv-again.failed"; then
            echo "python-tests: ok   $drv: the same tests pass and fail as with the original (these differed under load and agree alone: $differ)"
        else
            echo "python-tests: FAIL $drv: results differ, also alone (< original, > $drv):"
            diff "$W/original-again-$drv.failed" "$W/$drv-again.failed" | grep '^[<>]'
            fails=$((fails + 1))
        fi
    fi
done
[ -f "$W/qp/up/python3.11.qp" ] && echo "python-tests: qp: the profile of the qp run: $(stat -c %s "$W/qp/up/python3.11.qp") bytes"
echo "python-tests: $(($(date +%s) - start)) s"
[ $fails -eq 0 ] || exit 1
exit 0
