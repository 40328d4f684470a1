#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# README's Measurements table, made from the figures the bench scripts record
# (bench/record.sh) in RESULTS (make bench: bench-results.tsv in the build tree):
#
#   bench/measurements.sh RESULTS              print the table (Markdown)
#   bench/measurements.sh --update README RESULTS
#                                              replace the table in README, between its
#                                              "measurements:" and "end of measurements"
#                                              comment lines (written atomically)
#
# Rows come in the order of ORDER below (the figures README has always shown first);
# keys not listed follow in the order recorded. Each row names the script that measured
# it, the day and the commit. Exit 1 when RESULTS has no record.
set -u
update=
if [ "${1:-}" = --update ]; then
    update=${2:?usage: $0 [--update README] RESULTS}
    shift 2
fi
results=${1:?usage: $0 [--update README] RESULTS}
[ -s "$results" ] || { echo "measurements: $results: no figures recorded (run make bench)" >&2; exit 1; }

ORDER="overhead.instr.qp overhead.instr.qpw overhead.instr.none overhead.wall.qp
trace.bytes trace.instr scale.cc1 scale.chromium search.python search.attached search.postgres"

table() {
    echo "| what | figure | script | measured |"
    echo "|---|---|---|---|"
    awk -F'\t' -v order="$ORDER" '
        BEGIN { n = split(order, o, /[ \n]+/); for (i = 1; i <= n; i++) rank[o[i]] = i }
        NF >= 6 { if (!($1 in row)) keys[++m] = $1
                  row[$1] = sprintf("| %s | %s | `%s` | %s, %s |", $2, $3, $4, $5, $6) }
        END {
            for (i = 1; i <= n; i++) if (o[i] in row) { print row[o[i]]; done[o[i]] = 1 }
            for (j = 1; j <= m; j++) if (!(keys[j] in done)) print row[keys[j]]
        }' "$results"
}

if [ -z "$update" ]; then
    table
    exit 0
fi
begin='<!-- measurements: made by bench/measurements.sh from make bench'"'"'s records; do not edit by hand -->'
end='<!-- end of measurements -->'
grep -qF -- "$begin" "$update" && grep -qF -- "$end" "$update" ||
    { echo "measurements: $update: no \"$begin\" ... \"$end\" lines to replace between" >&2; exit 1; }
tmp=$(mktemp "$update.XXXXXX") || exit 1
trap 'rm -f "$tmp"' EXIT
table >"$tmp.table" || exit 1
awk -v b="$begin" -v e="$end" -v t="$tmp.table" '
    $0 == b { print; while ((getline l < t) > 0) print l; skip = 1; next }
    $0 == e { skip = 0 }
    !skip' "$update" >"$tmp" && rm -f "$tmp.table" && chmod --reference="$update" "$tmp" &&
    mv "$tmp" "$update" && trap - EXIT
