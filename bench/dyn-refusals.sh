#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Live refusals (issue 29): for each running target, how many procedures dyn refuses
# with --all (counts), --time '*' (timers) and -e 'time cpu(*) total' (a metric), as
# "refused / procedures". Usage: bench/dyn-refusals.sh [-r] [DYN]; targets: python3.11
# and lua5.4 (their executables), libc (through python3.11's libc.so.6). -r: then the
# refusals by reason, per target and mode (the reason dyn prints for each).
set -u
reasons=0
[ "${1:-}" = -r ] && { reasons=1; shift; }
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
    # (-v: --all lists its refusals too; the counts are the same)
    if [ "$name" = libc ]; then
        "$DYN" attach "$pid" --count "$pat" -v -d 0.2 >"$tmp/c" 2>&1
    else
        "$DYN" attach "$pid" --all -v -d 0.2 >"$tmp/c" 2>&1
    fi
    "$DYN" attach "$pid" --time "$pat" -d 0.2 >"$tmp/t" 2>&1
    "$DYN" attach "$pid" -e "time cpu($pat) total" -d 0.2 >"$tmp/e" 2>&1
    ct=$(counts "$tmp/t")
    printf '%-12s %14s %14s %14s\n' "$name" "$(counts "$tmp/c")" "$ct" \
        "$(metric "$tmp/e" "${ct#*/}")"
    for m in c t e; do
        cp "$tmp/$m" "$tmp/$name.$m"
    done
done
[ $reasons -eq 1 ] || exit 0
# The reasons: "count reason" lines, most first, per target and mode.
for t in python3.11 lua5.4 libc; do
    for m in c t e; do
        case $m in c) mode=--count ;; t) mode=--time ;; e) mode="-e time cpu" ;; esac
        printf '\n%s %s\n' "$t" "$mode"
        if [ $m = e ]; then
            sed -n 's/.* not measured: //p' "$tmp/$t.$m" | sed 's/^[^ ]* at 0x[0-9a-f]*: //'
        else
            sed -n 's/.*: not instrumented: //p' "$tmp/$t.$m"
        fi | sort | uniq -c | sort -rn
    done
done
