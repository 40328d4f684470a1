#!/bin/sh
# Run `qpt-rewrite --dump-cfg` over every ELF executable in a directory (default /usr/bin)
# plus cc1, and total what it found: coverage (weighted by text bytes, and the worst),
# indirect jumps resolved/unresolved, unsafe procedures, refusals and crashes.
# Usage: bench/scan-bins.sh [path/to/qpt-rewrite] [DIR...]
set -u
QPT=${1:-tools/qpt-rewrite}
[ $# -gt 0 ] && shift
DIRS=${*:-/usr/bin}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
files=$(for d in $DIRS; do find "$d" -maxdepth 1 -type f; done; \
        ls /usr/lib/gcc/x86_64-linux-gnu/12/cc1 2>/dev/null)
n=0
for f in $files; do
    head -c 4 "$f" 2>/dev/null | grep -q 'ELF' || continue
    n=$((n + 1))
    "$QPT" --dump-cfg "$f" >"$out/$n.out" 2>"$out/$n.err"
    echo "$? $f" >"$out/$n.st"
done
cat "$out"/*.st | awk '$1 >= 128 { print "CRASH (status " $1 "): " $2 }'
echo "ELF files: $n"
echo "refused (exit 1): $(cat "$out"/*.st | awk '$1 == 1' | wc -l)"
cat "$out"/*.err | sed 's/^[^:]*: [^:]*: //' | sort | uniq -c | sort -rn | head -5
echo "crashes (signal): $(cat "$out"/*.st | awk '$1 >= 128' | wc -l)"
cat "$out"/*.out | awk '
    /^text bytes:/ { t = $3 + 0; tt += t; cur = t }
    /^coverage:/ { c = $2 + 0; cov += c * cur / 100; if (min == "" || c < min) { min = c } ; nf++;
                   if (c < 99) low++ }
    /^indirect jumps:/ { res += $3; unr += $8; tail += $NF }
    /^unsafe procedures:/ { uns += $3 }
    /^procedures:/ { procs += $2 }
    END {
        printf "executables analysed: %d, procedures: %d\n", nf, procs
        printf "coverage: %.2f%% of all text bytes (worst file %.2f%%, %d files below 99%%)\n", 100 * cov / tt, min, low
        printf "indirect jumps: %d resolved, %d unresolved (%.2f%% resolved); indirect tail calls %d\n", res, unr, 100 * res / (res + unr), tail
        printf "unsafe procedures: %d (%.3f%% of procedures)\n", uns, 100 * uns / procs
    }'
