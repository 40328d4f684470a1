#!/bin/sh
# CFG construction speed: wall time and peak memory of `qpt-rewrite --dump-cfg` on cc1
# (20 MB of text), python3.11 and ls. Median of 5 runs. A benchmark, not a test.
# Usage: bench/bench-cfg.sh [path/to/qpt-rewrite]
set -eu
QPT=${1:-tools/qpt-rewrite}
RUNS=${RUNS:-5}
command -v /usr/bin/time >/dev/null || { echo "bench: needs /usr/bin/time (apt-get install time)"; exit 1; }
printf '%-48s %10s %12s %14s\n' "input" "text MB" "wall s (med)" "peak RSS MiB"
for f in /usr/lib/gcc/x86_64-linux-gnu/12/cc1 /usr/bin/python3.11 /usr/bin/ls; do
    [ -f "$f" ] || { echo "$f: missing, skipped"; continue; }
    text=$(size -A "$f" | awk '$1 ~ /^\.(text|init|fini|plt)/ {s += $2} END {printf "%.1f", s / 1048576}')
    results=""
    for i in $(seq "$RUNS"); do
        r=$(/usr/bin/time -f '%e %M' "$QPT" --dump-cfg "$f" 2>&1 >/dev/null | tail -1)
        results="$results$r
"
    done
    wall=$(printf '%s' "$results" | awk 'NF {print $1}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    rss=$(printf '%s' "$results" | awk 'NF {print $2}' | sort -n | tail -1)
    printf '%-48s %10s %12s %14.1f\n' "$f" "$text" "$wall" "$(awk -v r="$rss" 'BEGIN { print r / 1024 }')"
done
