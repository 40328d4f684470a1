# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Sourced by the bench scripts: bench_record KEY WHAT FIGURE records one figure for
# README's Measurements table (bench/measurements.sh makes the table from the records).
# A record is one line of $BENCH_RESULTS (make bench sets it to bench-results.tsv in the
# build tree; unset, nothing is recorded):
#
#   KEY <tab> WHAT <tab> FIGURE <tab> SCRIPT <tab> DATE <tab> COMMIT
#
# A script run again replaces its own keys, so the file holds the newest figure of each,
# with the day and the commit it was measured on.

# The commit of the tree the running bench script is in ("-dirty" when it has changes).
bench_commit() {
    git -C "$(dirname "$0")" describe --always --dirty --abbrev=7 2>/dev/null ||
        echo unknown
}

# The commit is taken when this file is sourced: source it at the start of a script, so
# that a commit made while the script runs is not credited with its figures.
BENCH_COMMIT=${BENCH_COMMIT:-$(bench_commit)}

# ", load average L": the 1-minute load when a wall-time figure was taken (2 cores here:
# above 2, other work shared the machine and the wall times say little)
bench_load() {
    printf ', load average %s' "$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo '?')"
}

bench_record() { # KEY WHAT FIGURE
    [ -n "${BENCH_RESULTS:-}" ] || return 0
    local key=$1 what=$2 figure=$3 script tmp
    script=bench/$(basename "$0")
    tmp=$BENCH_RESULTS.$$
    touch "$BENCH_RESULTS" || return 1
    awk -F'\t' -v k="$key" '$1 != k' "$BENCH_RESULTS" >"$tmp" &&
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$key" "$what" "$figure" "$script" \
            "$(date -u +%Y-%m-%d)" "$BENCH_COMMIT" >>"$tmp" &&
        mv "$tmp" "$BENCH_RESULTS"
}
