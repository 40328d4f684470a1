#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# How long `qp report` takes and how much memory it needs on big profiles (issue 31:
# chromium's, about 365 MB of counters over 4 million counters and 9.6 million blocks;
# target 3 s and 300 MB). Two programs: python3.11 (mid-size: 7 MB, 7,000 procedures
# measured) running a small workload, and Debian's chromium (--dump-dom of a page; its
# browser, zygote, renderer and GPU processes share one profile), when it is installed.
# For each: the wall time (median of ROUNDS runs), the CPU time and the peak RSS of
# `qp report PROFILE`; with a second qp (BASE, e.g. main's), the same for it, side by
# side, and whether both print the same bytes (the flat profile, --csv, --call-graph).
# Chromium's line says whether QP meets the target (MAX_CPU seconds of CPU, MAX_MB of
# peak): the script fails when it does not.
#
# Usage: bench/report-speed.sh QPT_REWRITE QP [BASE_QP]
# Environment: ROUNDS (3), KEEP=DIR keeps the work folder (the rewritten chromium takes
# 400 MB and its rewrite 1.5 to 5 minutes); CHR_PROFILE=FILE measures that profile of a
# rewritten chromium (its executable where the profile says) instead of making one;
# MAX_CPU (3), MAX_MB (300).
set -u
export LC_ALL=C
QPT=${1:?usage: report-speed.sh QPT_REWRITE QP [BASE_QP]}
QP=${2:?usage: report-speed.sh QPT_REWRITE QP [BASE_QP]}
BASE=${3:-}
ROUNDS=${ROUNDS:-3}
MAX_CPU=${MAX_CPU:-3}
MAX_MB=${MAX_MB:-300}
work=${KEEP:-$(mktemp -d /tmp/qpt-report-speed.XXXXXX)}
mkdir -p "$work"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
st=0

# "WALL CPU RSS_KB": the median wall time of ROUNDS runs of `QP report PROFILE`, and the
# CPU time and peak RSS of that run.
measure() {
    local qp=$1 prof=$2 i
    for i in $(seq "$ROUNDS"); do
        /usr/bin/time -f '%e %U %S %M' -o "$work/time" "$qp" report "$prof" > /dev/null 2>&1
        awk '{ printf "%s %.2f %s\n", $1, $2 + $3, $4 }' "$work/time"
    done | sort -n | awk -v n="$ROUNDS" 'NR == int((n + 1) / 2)'
}

# Print the line of program NAME with profile PROF; TARGET set: with whether QP meets
# MAX_CPU and MAX_MB.
report() {
    local name=$1 prof=$2 target=${3:-} new base o same=yes
    new=$(measure "$QP" "$prof")
    set -- $new
    local line
    line=$(printf 'report-speed %s: qp report %s s wall (%s s CPU), peak %.0f MB' "$name" \
        "$1" "$2" "$(echo "$3" | awk '{ print $1 / 1024 }')")
    if [ -n "$target" ]; then
        if awk -v c="$2" -v kb="$3" -v mc="$MAX_CPU" -v mm="$MAX_MB" \
            'BEGIN { exit !(c <= mc && kb / 1024 <= mm) }'; then
            line="$line (target $MAX_CPU s, $MAX_MB MB: met)"
        else
            line="$line (target $MAX_CPU s, $MAX_MB MB: MISSED)"
            st=1
        fi
    fi
    if [ -n "$BASE" ]; then
        base=$(measure "$BASE" "$prof")
        set -- $base
        line="$line; base $(printf '%s s wall (%s s CPU), peak %.0f MB' "$1" "$2" \
            "$(echo "$3" | awk '{ print $1 / 1024 }')")"
        for o in "" --csv --call-graph; do
            "$QP" report $o "$prof" > "$work/new.txt" 2>&1
            "$BASE" report $o "$prof" > "$work/base.txt" 2>&1
            cmp -s "$work/new.txt" "$work/base.txt" || same="NO (${o:-flat} differs)"
        done
        line="$line; same output: $same"
        [ "$same" = yes ] || st=1
    fi
    echo "$line"
}

# The mid-size program.
if [ -x /usr/bin/python3.11 ]; then
    if "$QPT" --driver=qp /usr/bin/python3.11 -o "$work/python3.11" 2> "$work/rewrite.log"; then
        "$work/python3.11" -c 'import json, re
print(sum(len(json.dumps({"a": [i] * 10})) for i in range(20000)))' > /dev/null
        report python3.11 "$work/python3.11.qp"
    else
        echo "report-speed python3.11: REWRITE FAILED: $(tail -1 "$work/rewrite.log")"
        st=1
    fi
else
    echo "report-speed python3.11: SKIPPED (not installed)"
fi

# Chromium: the rewritten file runs beside the original's resources (bench/chromium.sh).
if [ -n "${CHR_PROFILE:-}" ]; then
    report chromium "$CHR_PROFILE" target
    exit $st
fi
CHR=/usr/lib/chromium/chromium
if [ ! -x "$CHR" ]; then
    echo "report-speed chromium: SKIPPED ($CHR missing: apt-get install chromium)"
    exit $st
fi
mkdir -p "$work/chr"
for f in "$(dirname "$CHR")"/*; do
    [ "$(basename "$f")" = chromium ] || ln -sf "$f" "$work/chr/"
done
if [ ! -x "$work/chr/chromium" ] \
    && ! "$QPT" --driver=qp "$CHR" -o "$work/chr/chromium" 2> "$work/rewrite.log"; then
    echo "report-speed chromium: REWRITE FAILED: $(tail -1 "$work/rewrite.log")"
    exit 1
fi
cat > "$work/page.html" <<'EOF'
<!DOCTYPE html><html><body><h1>qpt</h1><script>
var s = 0; for (var k = 0; k < 100000; k++) s += Math.sqrt(k);
document.body.appendChild(document.createTextNode(s));
</script></body></html>
EOF
rm -rf "$work/home" "$work/chr/chromium.qp"
mkdir -p "$work/home"
if ! (cd "$work" && HOME=$work/home timeout 300 "$work/chr/chromium" --headless --no-sandbox \
    --user-data-dir="$work/home/ud" --dump-dom "file://$work/page.html" > /dev/null 2>&1); then
    echo "report-speed chromium: the rewritten chromium FAILED"
    exit 1
fi
report chromium "$work/chr/chromium.qp" target
exit $st
