#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# The largest program of the corpus (`make corpus`): Debian's chromium (about 236 MB of
# text, stripped, mostly without .eh_frame), rewritten with --driver=none and
# --driver=qp. Each rewritten copy runs beside the original's resources (a folder of
# symbolic links to /usr/lib/chromium/*: chromium finds them beside /proc/self/exe) and
#   chromium --headless --no-sandbox --dump-dom file:///.../page.html
# must print the DOM the original prints, byte for byte; `--screenshot` of the same page
# must give the original's PNG (when the original gives the same PNG twice; otherwise
# that is said). The qp profile of those runs (all of chromium's processes: browser,
# zygote, renderer, GPU and utility processes are the same executable and share
# chromium.qp) must report without error. Time and peak RSS of each rewrite are printed.
#
# Usage: bench/chromium.sh [path/to/qpt-rewrite [path/to/qp]]
# When chromium is missing it is installed with apt-get (root) or the script says how
# and exits 0 (skipped). Environment: KEEP=DIR keeps the work folder in DIR.
set -u
export LC_ALL=C
QPT=${1:-tools/qpt-rewrite}
QP=${2:-tools/qp}
CHR=/usr/lib/chromium/chromium
if [ ! -x "$CHR" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "chromium: not installed; apt-get install chromium"
        DEBIAN_FRONTEND=noninteractive apt-get install -y chromium >/dev/null 2>&1 || true
    fi
    if [ ! -x "$CHR" ]; then
        echo "chromium: SKIPPED: $CHR missing (install it: apt-get install chromium)"
        exit 0
    fi
fi
work=${KEEP:-$(mktemp -d /tmp/qpt-chromium.XXXXXX)}
mkdir -p "$work"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
cat > "$work/page.html" <<'EOF'
<!DOCTYPE html>
<html><head><title>qpt test page</title>
<style>body{font-family:sans-serif;background:#eef} .box{width:200px;height:80px;background:linear-gradient(#f80,#08f);border-radius:12px}</style>
</head><body>
<h1 id="t">Hello, qpt</h1>
<div class="box"></div>
<ul id="list"></ul>
<table border=1><tr><td>1</td><td>2</td></tr></table>
<script>
var l = document.getElementById('list');
for (var i = 0; i < 10; i++) { var li = document.createElement('li'); li.textContent = 'item ' + i * i; l.appendChild(li); }
var s = 0; for (var k = 0; k < 100000; k++) s += Math.sqrt(k);
document.getElementById('t').setAttribute('data-sum', Math.floor(s));
document.body.appendChild(document.createTextNode(JSON.stringify({a:[1,2,3], b:'x'.repeat(5)})));
</script>
</body></html>
EOF
page=file://$work/page.html

# A folder FOLDER/chromium (the file BIN) with links to the other files of chromium.
setup() {
    mkdir -p "$1"
    for f in "$(dirname "$CHR")"/*; do
        [ "$(basename "$f")" = chromium ] || ln -sf "$f" "$1/"
    done
    cp "$2" "$1/chromium"
}

# Run chromium from folder $1 with a fresh profile; ARGS follow; stdout to $2.
run() {
    local dir=$1 out=$2
    shift 2
    rm -rf "$work/home"
    mkdir -p "$work/home"
    (cd "$work" && HOME=$work/home timeout 120 "$dir/chromium" --headless --no-sandbox \
        --user-data-dir="$work/home/ud" "$@" > "$out" 2>> "$work/stderr.log")
}

st=0
setup "$work/orig" "$CHR"
run "$work/orig" "$work/dom.orig" --dump-dom "$page" || { echo "chromium: the original fails"; exit 1; }
run "$work/orig" /dev/null --screenshot="$work/shot.orig.png" --window-size=400,300 "$page"
run "$work/orig" /dev/null --screenshot="$work/shot.orig2.png" --window-size=400,300 "$page"
deterministic=0
cmp -s "$work/shot.orig.png" "$work/shot.orig2.png" && deterministic=1
for drv in none qp; do
    r=$(/usr/bin/time -f '%e %M' "$QPT" --driver=$drv "$CHR" -o "$work/chromium.$drv" 2>&1 >/dev/null)
    if [ ! -x "$work/chromium.$drv" ]; then
        echo "chromium $drv: REWRITER FAILED: $(echo "$r" | tail -3)"
        st=1
        continue
    fi
    echo "chromium $drv: rewritten in $(echo "$r" | tail -1 | awk '{printf "%s s, peak %.2f GiB", $1, $2 / 1048576}')"
    setup "$work/$drv" "$work/chromium.$drv"
    rm -f "$work/chromium.$drv"
    if run "$work/$drv" "$work/dom.$drv" --dump-dom "$page" && cmp -s "$work/dom.orig" "$work/dom.$drv"; then
        echo "chromium $drv: --dump-dom identical"
    else
        echo "chromium $drv: --dump-dom DIFFERENT (status $?; stderr in $work/stderr.log)"
        st=1
    fi
    run "$work/$drv" /dev/null --screenshot="$work/shot.$drv.png" --window-size=400,300 "$page"
    if cmp -s "$work/shot.orig.png" "$work/shot.$drv.png"; then
        echo "chromium $drv: --screenshot identical"
    elif [ $deterministic = 0 ]; then
        echo "chromium $drv: --screenshot differs, as two runs of the original do"
    else
        echo "chromium $drv: --screenshot DIFFERENT"
        st=1
    fi
    if [ $drv = qp ]; then
        if "$QP" report --limit 10 "$work/qp/chromium.qp" > "$work/report.txt" 2>&1; then
            echo "chromium qp: the profile reports ($(grep -c . "$work/report.txt") lines)"
        else
            echo "chromium qp: qp report FAILED: $(tail -2 "$work/report.txt")"
            st=1
        fi
    fi
done
exit $st
