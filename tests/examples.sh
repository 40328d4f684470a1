#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# The mutators of examples/, built on libqpt's public header, on tests/qpt/api_prog:
# callcount on the file (rewritten and run) and live (started, and attached to a
# running process), coverage on the file, repipe on a running shell loop; loops on
# tests/qpt/cfg_prog, file and live; libcount (events and callbacks) on
# tests/qpt/life_prog.
set -u
: "${top_builddir:=.}"
B=$top_builddir
D=$B/tests/examples.d
rm -rf "$D"
mkdir -p "$D" || exit 99
fails=0
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }
cp "$B/tests/qpt/api_prog" "$D/prog" || exit 99

out=$("$B/examples/callcount" work "$D/prog" 20 2>&1)
[ "$(echo "$out" | awk '$2 == "work" { print $1 }')" = 20 ] && ok "callcount, file: 20 calls" \
    || bad "callcount, file: $out"
out=$("$B/examples/coverage" "$D/prog" 20 2>&1)
echo "$out" | grep -q '^ *[0-9]*/[0-9]* *work$' && echo "$out" | grep -q 'blocks covered' \
    && ok "coverage, file: $(echo "$out" | tail -n 1)" || bad "coverage: $out"

# loops: nested(10) of tests/qpt/cfg_prog (-O2) has two loops, the second inside the
# first; their headers run 10 and 45 times (a rotated loop's header runs once an
# iteration; -O0's tested headers would run 11 and 55).
cp "$B/tests/qpt/cfg_prog_O2" "$D/cfg_prog" || exit 99
out=$("$B/examples/loops" nested "$D/cfg_prog" 10 2>&1)
echo "$out" | grep -q '^loop 1: header block .* depth 2, .* inside loop 0' \
    && echo "$out" | grep -q '^loop 0: header ran 10 times$' \
    && echo "$out" | grep -q '^loop 1: header ran 45 times$' \
    && ok "loops, file: nested's two loops, headers ran 10 and 45 times" || bad "loops: $out"

if [ -x "$B/examples/repipe" ]; then
    out=$("$B/examples/callcount" -r work "$D/prog" 20 2>&1)
    if echo "$out" | grep -q "ermission"; then
        echo "skip live examples: ptrace not permitted"
    else
        [ "$(echo "$out" | awk '$2 == "work" { print $1 }' | tail -n 1)" = 20 ] \
            && ok "callcount, started live: 20 calls" || bad "callcount -r: $out"
        out=$("$B/examples/loops" -r nested "$D/cfg_prog" 10 2>&1)
        echo "$out" | grep -q '^loop 0: header ran 10 times$' \
            && echo "$out" | grep -q '^loop 1: header ran 45 times$' \
            && ok "loops, started live: headers ran 10 and 45 times" || bad "loops -r: $out"
        "$D/prog" 2000000000 >/dev/null &
        pid=$!
        sleep 0.2
        out=$("$B/examples/callcount" -p $pid -t 0.3 work 2>&1)
        n=$(echo "$out" | awk '$2 == "work" { print $1 }')
        kill -0 $pid 2>/dev/null && [ -n "$n" ] && [ "$n" -gt 0 ] \
            && ok "callcount, attached: $n calls in 0.3 s, the process runs on" \
            || bad "callcount -p: $out"
        kill $pid 2>/dev/null
        wait $pid 2>/dev/null
        sh -c 'while :; do echo tick; sleep 0.05; done' >/dev/null &
        pid=$!
        sleep 0.2
        "$B/examples/repipe" $pid "$D/piped.txt" >"$D/repipe.out" 2>&1
        sleep 0.4
        kill $pid 2>/dev/null
        wait $pid 2>/dev/null
        [ "$(grep -c tick "$D/piped.txt" 2>/dev/null)" -gt 0 ] \
            && ok "repipe: the loop's output went to the file" \
            || bad "repipe: $(cat "$D/repipe.out")"
        # libcount: a library loaded by dlopen counted from its load's callback; threads
        lib=$(cd "$B/tests/qpt" && pwd)/liblife.so
        out=$("$B/examples/libcount" '*work' "$B/tests/qpt/life_prog" dlopen 5 "$lib" 2>&1)
        echo "$out" | grep -q '^libcount: library liblife.so loaded$' \
            && echo "$out" | grep -q '^libcount: library liblife.so unloaded$' \
            && echo "$out" | grep -q '^libcount: exit status 0$' \
            && echo "$out" | grep -q '^ *5  liblife.so:lib_work$' \
            && echo "$out" | grep -q '^ *5  exe:work$' \
            && ok "libcount: dlopen'ed library instrumented at its load: 5 calls" \
            || bad "libcount dlopen: $out"
        # each load of a library loaded 4 times its own counter, at its own address (the
        # Kth load's lib_work called K times), each read through its library's space
        out=$("$B/examples/libcount" lib_work "$B/tests/qpt/life_prog" cycles 4 "$lib" 2>&1)
        [ "$(echo "$out" | awk '$2 == "liblife.so:lib_work" { print $1 }' | sort | tr '\n' ' ')" \
            = "1 2 3 4 " ] && echo "$out" | grep -q '^libcount: exit status 0$' \
            && ok "libcount: 4 loads of a library counted apart: 1 2 3 4 calls" \
            || bad "libcount cycles: $out"
        out=$("$B/examples/libcount" work "$B/tests/qpt/life_prog" threads 4 2>&1)
        [ "$(echo "$out" | grep -c '^libcount: thread [0-9]* started$')" = 4 ] \
            && [ "$(echo "$out" | grep -c '^libcount: thread [0-9]* ended$')" = 4 ] \
            && echo "$out" | grep -q '^libcount: exit status 3$' \
            && echo "$out" | grep -q '^ *4  exe:work$' \
            && ok "libcount: 4 threads started and ended, exit status 3, 4 calls" \
            || bad "libcount threads: $out"
    fi
fi
[ "$fails" -eq 0 ]
