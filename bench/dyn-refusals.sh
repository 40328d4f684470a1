#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Live refusals (issue 29): for each running target, how many procedures dyn refuses
# with --all (counts), --time '*' (timers) and -e 'time cpu(*) total' (a metric), as
# "refused / procedures". Usage: bench/dyn-refusals.sh [DYN]; targets: python3.11 and
# lua5.4 (their executables), libc (through python3.11's libc.so.6).
set -u
DYN=${1:-${top_builddir:-.}/tools/dyn}
tmp=$(mktemp -d)
trap 'kill $py $lu 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
/usr/bin/python3.11 -c 'import time; time.sleep(600)' >/dev/null 2>&1 &
py=$!
lua5.4 -e 'local t = os.time(); while os.time() - t < 600 do local x = 0; for i = 1, 1e6 do x = x + i end end' \
    >/dev/null 2>&1 &
lu=$!
sleep 0.5
# counts FILE: "refused/total" from dyn's summary line
counts() {
    sed -n 's/.*: \([0-9]*\) procedures instrumented, \([0-9]*\) refused.*/\2 \1/p' "$1" |
        tail -1 | awk '{ printf "%d/%d", $1, $1 + $2 }'
}
# metric FILE TOTAL: "not measured/TOTAL" from -e's notes
metric() {
    printf '%d/%s' "$(grep -c 'note: .* not measured: ' "$1")" "$2"
}
printf '%-12s %14s %14s %14s\n' target --count --time "-e time cpu"
for t in python3.11:$py lua5.4:$lu libc:$py; do
    name=${t%%:*} pid=${t#*:}
    pat='*'
    [ "$name" = libc ] && pat='libc.so.6:*'
    if [ "$name" = libc ]; then
        "$DYN" attach "$pid" --count "$pat" -d 0.2 >"$tmp/c" 2>&1
    else
        "$DYN" attach "$pid" --all -d 0.2 >"$tmp/c" 2>&1
    fi
    "$DYN" attach "$pid" --time "$pat" -d 0.2 >"$tmp/t" 2>&1
    "$DYN" attach "$pid" -e "time cpu($pat) total" -d 0.2 >"$tmp/e" 2>&1
    ct=$(counts "$tmp/t")
    printf '%-12s %14s %14s %14s\n' "$name" "$(counts "$tmp/c")" "$ct" \
        "$(metric "$tmp/e" "${ct#*/}")"
done
