#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# README's Measurements table is made from the figures the bench scripts record
# (bench/record.sh, bench/measurements.sh; issue 31): a script run again replaces its own
# figures, rows come in README's order with the script, day and commit of each, and
# --update replaces only the table between README's two comment lines, never leaving a
# half-written README (nor touching one without those lines).
. "${top_srcdir:-.}/tests/lib.sh"
set -u
fails=0
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
b=$top_srcdir/bench

# Three figures from two "scripts"; the second run of the first replaces its figure.
cat >"$d/overhead.sh" <<EOS
. "$b/record.sh"
bench_record overhead.instr.qp "Instructions, qp" "\$1"
bench_record overhead.instr.none "Instructions, null rewrite" "1.001x"
EOS
cat >"$d/search-cost.sh" <<EOS
. "$b/record.sh"
bench_record search.python "search, python" "1.033x"
bench_record zz.new "a figure README has not seen" "42"
EOS
BENCH_RESULTS=$d/r.tsv sh "$d/search-cost.sh"
BENCH_RESULTS=$d/r.tsv sh "$d/overhead.sh" 1.100x
BENCH_RESULTS=$d/r.tsv sh "$d/overhead.sh" 1.052x
# (unset, nothing is recorded and nothing fails)
sh "$d/overhead.sh" 9.9x || bad "bench_record without BENCH_RESULTS failed"
[ "$(wc -l <"$d/r.tsv")" -eq 4 ] && ok "one record a figure" || bad "records: $(cat "$d/r.tsv")"
bash "$b/measurements.sh" "$d/r.tsv" >"$d/table" || bad "measurements.sh failed"
day=$(date -u +%Y-%m-%d)
if sed -n 3p "$d/table" | grep -q "^| Instructions, qp | 1.052x | \`bench/overhead.sh\` | $day, " &&
    sed -n 4p "$d/table" | grep -q "^| Instructions, null rewrite | 1.001x |" &&
    sed -n 5p "$d/table" | grep -q "^| search, python | 1.033x | \`bench/search-cost.sh\` |" &&
    sed -n 6p "$d/table" | grep -q "^| a figure README has not seen | 42 |" &&
    ! grep -q "1.100x\|9.9x" "$d/table"; then
    ok "the table: README's order, the newest figure, script and day"
else
    bad "the table: $(cat "$d/table")"
fi

begin='<!-- measurements: made by bench/measurements.sh from make bench'"'"'s records; do not edit by hand -->'
end='<!-- end of measurements -->'
printf '# README\n\n## Measurements\n\ntext kept\n\n%s\n| old | table |\n%s\n\n## License\n' "$begin" "$end" >"$d/README.md"
bash "$b/measurements.sh" --update "$d/README.md" "$d/r.tsv" || bad "--update failed"
if grep -q "^text kept$" "$d/README.md" && grep -q "^## License$" "$d/README.md" &&
    ! grep -q "old | table" "$d/README.md" && grep -q "| search, python | 1.033x" "$d/README.md" &&
    [ "$(grep -c "^|" "$d/README.md")" -eq 6 ]; then
    ok "--update replaces the table and nothing else"
else
    bad "--update: $(cat "$d/README.md")"
fi
printf '# README without the lines\n' >"$d/plain.md"
cp "$d/plain.md" "$d/plain.orig"
if bash "$b/measurements.sh" --update "$d/plain.md" "$d/r.tsv" 2>"$d/err"; then
    bad "--update of a README without the lines succeeded"
elif cmp -s "$d/plain.md" "$d/plain.orig" && [ "$(wc -l <"$d/err")" -eq 1 ] &&
    [ "$(ls "$d" | grep -c '^plain')" -eq 2 ]; then
    ok "a README without the lines: one line, the file untouched, no temporary left"
else
    bad "a README without the lines: $(cat "$d/err"); $(ls "$d")"
fi
: >"$d/empty.tsv"
if bash "$b/measurements.sh" "$d/empty.tsv" 2>/dev/null; then bad "no records: exit 0"; else ok "no records: refused"; fi
[ "$fails" -eq 0 ]
