#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# How the cost grows with the input (a benchmark, not a test): wall time and peak RSS of
# the CFG analysis (--dump-cfg), the null rewrite (--driver=none) and the qp rewrite, on
# ls, bash, python3.11, cc1, gdb and chromium (those installed): wall and CPU (user +
# system) seconds, peak RSS in MB, CPU seconds per MB of text, and (RSS/MB) the null
# rewrite's peak RSS per MB of text; then the growth exponent k of time ~ text^k and of
# RSS ~ text^k (least squares on the logs; k = 1 is linear; the smallest inputs, whose
# cost is mostly fixed, pull k down). One run each (the large inputs take minutes), or
# the medians of SCALE_ROUNDS runs. cc1's and chromium's null and qp figures are
# recorded for README (bench/record.sh).
#
# Usage: bench/scale.sh [path/to/qpt-rewrite]
# Environment: SCALE_INPUTS (space-separated paths, instead of the list above),
# SCALE_OUT (folder for the outputs, default a temporary one, removed).
set -u
export LC_ALL=C
QPT=${1:-tools/qpt-rewrite}
command -v /usr/bin/time >/dev/null || { echo "scale: needs /usr/bin/time (apt-get install time)"; exit 1; }
inputs=${SCALE_INPUTS:-"/usr/bin/ls /usr/bin/bash /usr/bin/python3.11 /usr/lib/gcc/x86_64-linux-gnu/12/cc1 /usr/bin/gdb /usr/lib/chromium/chromium"}
out=${SCALE_OUT:-}
ROUNDS=${SCALE_ROUNDS:-1}
. "$(dirname "$0")/record.sh"
if [ -z "$out" ]; then
    out=$(mktemp -d /tmp/qpt-scale.XXXXXX)
    trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"

# "wall-seconds cpu-seconds MB" of one command (user + system time; peak RSS in MB), or
# "fail fail fail". On a shared machine the CPU time is the steadier figure.
measure() {
    local r
    if r=$(/usr/bin/time -f '%e %U %S %M' "$@" 2>&1 >/dev/null | tail -1) \
        && [[ $r =~ ^[0-9.]+\ [0-9.]+\ [0-9.]+\ [0-9]+$ ]]; then
        echo "$r" | awk '{printf "%.2f %.2f %.0f", $1, $2 + $3, $4 / 1024}'
    else
        echo "fail fail fail"
    fi
}

# measure_median COMMAND...: measure's three figures, each the median of ROUNDS runs
measure_median() {
    local r
    for r in $(seq "$ROUNDS"); do measure "$@"; echo; done | awk '
        $1 == "fail" { failed = 1 }
        NF == 3 { n++; w[n] = $1; c[n] = $2; m[n] = $3 }
        function med(a,    i, j, t) {
            for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        END { if (failed || !n) print "fail fail fail"; else printf "%.2f %.2f %.0f\n", med(w), med(c), med(m) }'
}

rows=$out/rows
: > "$rows"
printf '%-11s %7s | %6s %6s %6s | %6s %6s %6s %6s | %6s %6s %6s %6s | %6s\n' input "text MB" \
    "cfg s" "cpu s" "MB" "none s" "cpu s" "MB" "cpu/MB" "qp s" "cpu s" "MB" "cpu/MB" "RSS/MB"
for f in $inputs; do
    [ -f "$f" ] || { echo "$f: not installed, skipped"; continue; }
    n=$(basename "$f")
    text=$(size -A "$f" | awk '$1 ~ /^\.(text|init|fini|plt)/ {s += $2} END {printf "%.2f", s / 1048576}')
    read -r cs cc cm <<<"$(measure "$QPT" --dump-cfg "$f")"
    read -r ns nc nm <<<"$(measure_median "$QPT" --driver=none "$f" -o "$out/$n.none")"
    rm -f "$out/$n.none"
    read -r qs qc qm <<<"$(measure_median "$QPT" --driver=qp "$f" -o "$out/$n.qp")"
    rm -f "$out/$n.qp"
    per() { awk -v a="$1" -v t="$text" 'BEGIN { if (a == "fail") print "-"; else printf "%.2f", a / t }'; }
    printf '%-11s %7s | %6s %6s %6s | %6s %6s %6s %6s | %6s %6s %6s %6s | %6s\n' "$n" "$text" \
        "$cs" "$cc" "$cm" "$ns" "$nc" "$nm" "$(per "$nc")" "$qs" "$qc" "$qm" "$(per "$qc")" "$(per "$nm")"
    echo "$n $text $cs $cc $cm $ns $nc $nm $qs $qc $qm" >> "$rows"
    runs="1 run"; [ "$ROUNDS" -eq 1 ] || runs="medians of $ROUNDS runs"
    case $n in cc1 | chromium)
        [ "$ns" = fail ] || [ "$qs" = fail ] ||
            bench_record "scale.$n" "Null / qp rewrite of $n ($text MB of text)" \
                "$ns s / $qs s wall, $nc s / $qc s CPU; $nm / $qm MB ($runs, $(nproc) cores$(bench_load))" ;;
    esac
done
# Growth exponents: slope of log(y) against log(text) over the inputs measured.
awk '
function fit(col,    i, sx, sy, sxx, sxy, m, x, y) {
    m = 0; sx = sy = sxx = sxy = 0
    for (i = 1; i <= n; i++) {
        if (v[i, col] == "fail" || v[i, col] <= 0) continue
        x = log(t[i]); y = log(v[i, col]); m++
        sx += x; sy += y; sxx += x * x; sxy += x * y
    }
    if (m < 2 || m * sxx - sx * sx == 0) return "-"
    return sprintf("%.2f", (m * sxy - sx * sy) / (m * sxx - sx * sx))
}
{ n++; t[n] = $2; for (c = 3; c <= 11; c++) v[n, c] = $c }
END {
    if (n < 2) exit
    printf "growth exponent k (y ~ text^k; 1 is linear):\n"
    printf "  cfg:  wall %s, cpu %s, RSS %s\n", fit(3), fit(4), fit(5)
    printf "  none: wall %s, cpu %s, RSS %s\n", fit(6), fit(7), fit(8)
    printf "  qp:   wall %s, cpu %s, RSS %s\n", fit(9), fit(10), fit(11)
}' "$rows"
