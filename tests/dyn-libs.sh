#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# dyn counts procedures of shared libraries (MODULE:GLOB patterns) exactly: a library
# built here (tests/dynlib/lib.c as libqt.so: each lib_sum(100) calls lib_square 34
# times) and libc.so.6, in a program that calls them a known number of times
# (tests/dynlib/main.c):
#  (a) dyn run: lib_sum, lib_square, strverscmp exact, malloc at least the program's
#      own calls; CSV and table rows named MODULE:name; the program's output and exit
#      status unchanged; the executable's rows (work) keep their plain names;
#  (b) --time and --calls-from in a library; a MODULE naming no library loaded during
#      the run (the program runs, one line at the end) (metrics of library procedures,
#      dyn -e: tests/dyn-metrics-lib.sh); a bare library name (malloc) answered with the
#      MODULE:NAME spelling; a library named by its soname as well as by its file name;
#  (c) dyn attach to a program serving requests (a FIFO): the counts of a window exact,
#      live tables (--interval) and --trace name the library rows, SIGTERM and
#      --duration remove everything (dyn clean finds nothing);
#  (d) dyn killed (SIGKILL) while its library trampolines are in: dyn clean puts the
#      library's code back, and a fresh attach counts the next window exactly;
#  at the end the program exits 3 with the answers of a plain run.
# Skips (77) without gcc or when ptrace is not allowed. Exit: 0 pass, 1 fail, 99 error.
set -u
: "${top_srcdir:=.}"
: "${top_builddir:=.}"
. "$top_srcdir/tests/lib.sh"
DYN=$top_builddir/tools/dyn
dyn_setup dyn-libs
d=$dir
dyn_build_qtlib "$d"

# csv FILE NAME: the calls of row NAME in the CSV FILE (empty when there is none).
csv() {
    awk -F, -v n="$2" '$1 == n { print $2 }' "$1"
}

"$d/main" run 10 >"$d/plain.out"
plain_rc=$?
[ "$plain_rc" = 3 ] || { echo "plain run exited $plain_rc"; exit 99; }

# (a) dyn run
"$DYN" run --count 'libqt.so:lib_sum' --count 'libqt.so:lib_square' \
    -c 'libc.so.6:strverscmp' -c 'libc.so.6:malloc' -c work -o "$d/a.csv" \
    -- "$d/main" run 10 >"$d/a.out" 2>"$d/a.err"
rc=$?
if [ $rc != 3 ] && grep -q -i 'ptrace\|not permitted' "$d/a.err"; then
    echo "SKIP: dyn cannot trace here: $(head -n 1 "$d/a.err")"
    exit 77
fi
expect_eq "dyn run: exit status" "$rc" 3
if [ "$(head -n 1 "$d/a.out")" = "$(cat "$d/plain.out")" ]; then
    ok "dyn run: the program's output unchanged"
else
    bad "dyn run: output $(head -n 1 "$d/a.out"), plain $(cat "$d/plain.out")"
fi
expect_eq "run: libqt.so:lib_sum" "$(csv "$d/a.csv" libqt.so:lib_sum)" 10
expect_eq "run: libqt.so:lib_square" "$(csv "$d/a.csv" libqt.so:lib_square)" 340
expect_eq "run: libc.so.6:strverscmp" "$(csv "$d/a.csv" libc.so.6:strverscmp)" 10
expect_eq "run: work (the executable's)" "$(csv "$d/a.csv" work)" 1
m=$(csv "$d/a.csv" libc.so.6:malloc)
if [ -n "$m" ] && [ "$m" -ge 10 ]; then ok "run: libc.so.6:malloc $m >= 10"; else
    bad "run: libc.so.6:malloc '$m', want >= 10"; fi
grep -q '^ *340  libqt.so:lib_square$' "$d/a.out" && ok "run: table row libqt.so:lib_square" \
    || bad "run: no table row '340  libqt.so:lib_square': $(cat "$d/a.out")"
grep -q ': 5 procedures instrumented, 0 refused' "$d/a.err" && ok "run: 5 instrumented" \
    || bad "run: $(cat "$d/a.err")"

# (b) --time, --calls-from; errors
"$DYN" run --time 'libqt.so:lib_sum' -f 'libqt.so:lib_sum' -o "$d/b.csv" \
    -- "$d/main" run 7 >"$d/b.out" 2>"$d/b.err"
expect_eq "--time/--calls-from: exit status" $? 3
expect_eq "--calls-from: the call of lib_square" \
    "$(grep -c '^libqt.so:lib_sum+0x[0-9a-f]*->lib_square@plt,238,$' "$d/b.csv")" 1
grep -q '^libqt.so:lib_sum,7,[0-9][0-9]*$' "$d/b.csv" && ok "--time: libqt.so:lib_sum timed" \
    || bad "--time: $(cat "$d/b.csv")"
"$DYN" run -c 'libnope*:f' -- "$d/main" run 1 >"$d/c.out" 2>"$d/c.err"
# (the program may still dlopen it: it runs, and the end says the MODULE never matched)
expect_eq "unknown MODULE: exit status" $? 3
grep -q "no library matching 'libnope\*' (in 'libnope\*:f') was loaded during the session" \
    "$d/c.err" && ok "unknown MODULE: one clear line" || bad "unknown MODULE: $(cat "$d/c.err")"

# A bare name of a library's procedure: the line says how to name it (issue 32).
"$DYN" run -c malloc -- "$d/main" run 1 >"$d/h.out" 2>"$d/h.err"
expect_eq "bare library name: the hint" "$(grep -c "^dyn: no procedure matches 'malloc' in the \
executable; a shared library's procedure is named with its library: 'libc.so.6:malloc' \
(or '\*:malloc', any library)\$" "$d/h.err")" 1
# A library named as ldd shows it (its soname, libqv.so.0) while its file, as the
# process maps it, is libqv.so.0.8.6: both names choose it; rows keep the file's name.
mkdir -p "$d/v"
gcc -O2 -fPIC -shared -Wl,-soname,libqv.so.0 -o "$d/v/libqv.so.0.8.6" \
    "$top_srcdir/tests/dynlib/lib.c" && ln -sf libqv.so.0.8.6 "$d/v/libqv.so.0" \
    && ln -sf libqv.so.0 "$d/v/libqv.so" \
    && gcc -O2 -o "$d/v/main" "$top_srcdir/tests/dynlib/main.c" -L"$d/v" -lqv -Wl,-rpath,'$ORIGIN' \
    || exit 99
for name in libqv.so.0 libqv.so.0.8.6; do
    "$DYN" run -c "$name:lib_sum" -o "$d/v/$name.csv" -- "$d/v/main" run 4 >/dev/null 2>"$d/v/$name.err"
    expect_eq "library named $name: libqv.so.0.8.6:lib_sum" \
        "$(csv "$d/v/$name.csv" libqv.so.0.8.6:lib_sum)" 4
done

# (c) dyn attach to a server
dyn_serve "$d"
# attach TAG ARGS...: dyn attach in the background, once its points are in.
attach() {
    tag=$1
    shift
    "$DYN" attach "$tpid" "$@" >"$d/$tag.out" 2>"$d/$tag.err" &
    dpid=$!
    wait_lines "$d/$tag.err" 'instrumented' 1 || bad "$tag: never instrumented: $(cat "$d/$tag.err")"
}
attach att -c 'libqt.so:lib_*' -c 'libc.so.6:strverscmp' -o "$d/att.csv" -i 0.05 \
    --trace "$d/att.json"
dyn_req 20
sleep 0.2
kill -TERM $dpid
wait $dpid
expect_eq "attach: exit status after SIGTERM" $? 0
expect_eq "attach: libqt.so:lib_sum" "$(csv "$d/att.csv" libqt.so:lib_sum)" 20
expect_eq "attach: libqt.so:lib_square" "$(csv "$d/att.csv" libqt.so:lib_square)" 680
expect_eq "attach: libc.so.6:strverscmp" "$(csv "$d/att.csv" libc.so.6:strverscmp)" 20
grep -q ' libqt.so:lib_sum$' "$d/att.out" && ok "attach: live tables name libqt.so:lib_sum" \
    || bad "attach: live tables: $(head -n 5 "$d/att.out")"
grep -q '"name":"libqt.so:lib_square"' "$d/att.json" && ok "attach: --trace names the rows" \
    || bad "attach: --trace: $(head -c 300 "$d/att.json")"
"$DYN" clean "$tpid" >"$d/clean0.out" 2>&1
grep -q 'nothing of dyn.s found' "$d/clean0.out" && ok "attach: nothing left after SIGTERM" \
    || bad "attach: left behind: $(cat "$d/clean0.out")"
"$DYN" attach "$tpid" -c 'libqt.so:lib_sum' -c 'libc.so.6:malloc' --duration 0.3 \
    -o "$d/dur.csv" >"$d/dur.out" 2>"$d/dur.err"
expect_eq "attach --duration: exit status" $? 0
expect_eq "attach --duration: rows" "$(grep -c '^libqt.so:lib_sum,0,$\|^libc.so.6:malloc,' "$d/dur.csv")" 2

# (d) dyn killed, dyn clean
attach kill -c 'libqt.so:lib_*' -c 'libc.so.6:strverscmp'
dyn_req 3
kill -KILL $dpid
wait $dpid 2>/dev/null
"$DYN" clean "$tpid" >"$d/clean.out" 2>&1
expect_eq "clean: exit status" $? 0
grep -q '4 jumps put back' "$d/clean.out" && ok "clean: library jumps put back" \
    || bad "clean: $(cat "$d/clean.out")"
dyn_req 4
attach again -c 'libqt.so:lib_sum' -c 'libc.so.6:strverscmp' -o "$d/again.csv"
dyn_req 6
kill -INT $dpid
wait $dpid
expect_eq "after clean: attach exit status" $? 0
expect_eq "after clean: libqt.so:lib_sum" "$(csv "$d/again.csv" libqt.so:lib_sum)" 6
expect_eq "after clean: libc.so.6:strverscmp" "$(csv "$d/again.csv" libc.so.6:strverscmp)" 6

# The end: the program's answers are those of plain runs.
exec 7>&-
wait $tpid
expect_eq "serve: exit status" $? 3
tpid=
for n in 20 3 4 6; do
    want=$("$d/main" run $n | sed 's/^sum=//')
    grep -q "^done $n $want\$" "$d/serve.out" && ok "serve: answer to $n" \
        || bad "serve: answer to $n: want $want: $(cat "$d/serve.out")"
done
[ $fails -eq 0 ] || exit 1
exit 0
