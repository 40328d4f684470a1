#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Shared libraries rewritten and measured (issue 13). tests/shlib/lib.c is built with
# gcc and clang at -O0 and -O2, with and without -fno-plt; the program tests/shlib/main.c
# (not rewritten) loads the rewritten copy through its RUNPATH ($ORIGIN/lib), and the
# original through LD_LIBRARY_PATH. Checked:
#   - the same stdout and exit status as with the original library, in three runs (plain,
#     4 threads calling into the library, an exit from inside the library);
#   - exact counts in the library's profile (lib/libqt.so.qp), from the code's truth:
#     a hot loop, calls through the library's own PLT, threads (atomic increments), the
#     IFUNC resolver (run before the library's start: its count is kept), the exit;
#   - a library loaded with dlopen; $QP_PROFILE (the library's profile is
#     $QP_PROFILE.libqt.so); a library without DT_INIT (a spare dynamic entry becomes
#     one); a rewritten program with a rewritten library (two profiles);
#   - real libraries, when installed: libsqlite3 (sqlite3), libjq (jq), libstdc++ and
#     libgcc_s (a C++ program whose exceptions cross their frames) and libc.so.6 under
#     that program: identical outputs, and counts in each library's profile (exact where
#     the truth is known: 286 exceptions allocated and deleted);
#   - --with-libs: the program and every library it loads rewritten into one folder
#     (the test program, sqlite3, jq, lua5.4, python3.11, the C++ program): identical
#     outputs, the libraries
#     loaded from the folder (even with LD_LIBRARY_PATH naming the originals, for a
#     program without DT_RUNPATH), every
#     module's profile, a folder with other files refused unless --force;
#   - a callback of the program that throws through a library's frame (tests/shlib/cb.c):
#     marked in the report over both modules, a note in the library's report alone.
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
QP=${QP:-$top_builddir/tools/qp}
dir=$top_builddir/tests/shlib.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
fails=0
qp_have gcc || { echo "SKIP: gcc not installed"; exit 77; }
src=$top_srcdir/tests/shlib
export LC_ALL=C
unset QP_PROFILE

# count CSV NAME: the calls of procedure NAME in a `qp report --csv` output
count() {
    awk -F, -v n="$2" '$1 == n { print $2; found = 1 } END { if (!found) print "none" }' "$1"
}

# expect WHAT CSV NAME N
expect() {
    local got
    got=$(count "$2" "$3")
    if [ "$got" = "$4" ]; then ok "$1: $3 called $4 times"; else bad "$1: $3 called $got times, expected $4"; fi
}

# same WHAT D ARGS...: the program's output and status with the rewritten library equal
# those with the original one
same() {
    local what=$1 d=$2
    shift 2
    LD_LIBRARY_PATH=$d "$d/main" "$@" >"$d/want" 2>&1
    local ws=$?
    "$d/main" "$@" >"$d/got" 2>&1
    local gs=$?
    if [ "$ws" = "$gs" ] && cmp -s "$d/want" "$d/got"; then
        ok "$what ${*:-plain}: same output and status ($gs)"
    else
        bad "$what ${*:-plain}: status $gs (want $ws), output: $(head -c 300 "$d/got")"
    fi
}

for v in "gcc -O0" "gcc -O2" "clang -O0" "clang -O2" "gcc -O2 -fno-plt" "clang -O2 -fno-plt"; do
    cc=${v%% *}
    qp_have "$cc" || continue
    tag=$(echo "$v" | tr -d ' -')
    d=$dir/$tag
    mkdir -p "$d/lib"
    # shellcheck disable=SC2086
    $v -g -shared -fPIC -o "$d/libqt.so" "$src/lib.c" || exit 99
    gcc -O2 -g -o "$d/main" "$src/main.c" -L"$d" -lqt -pthread -ldl -Wl,-rpath,'$ORIGIN/lib' || exit 99
    if ! "$QPT_REWRITE" "$d/libqt.so" -o "$d/lib/libqt.so" >"$d/log" 2>&1; then
        bad "$v: rewrite: $(tail -n 1 "$d/log")"
        continue
    fi
    same "$v" "$d"
    same "$v" "$d" threads
    same "$v" "$d" quit
    same "$v" "$d" fork
    "$QP" report --csv "$d/lib/libqt.so.qp" >"$d/csv" 2>"$d/err"
    [ -s "$d/err" ] && bad "$v: qp report says: $(head -n 2 "$d/err")"
    expect "$v" "$d/csv" lib_sum 70 # 3 runs of 10, one of 10 + 3 children of 10
    expect "$v" "$d/csv" lib_square 2384 # 70 * 34 + 4
    expect "$v" "$d/csv" lib_apply 4
    expect "$v" "$d/csv" lib_tick 200000
    expect "$v" "$d/csv" lib_quit 1
    expect "$v" "$d/csv" quit_inner 1
    expect "$v" "$d/csv" lib_pick 4 # the IFUNC symbol names its resolver
    # What was not measured is said: as many listed under -v as the summary counts.
    "$QP" report -v "$d/lib/libqt.so.qp" >"$d/v" 2>&1
    nm=$(sed -n 's/.*; \([0-9]*\) procedures not measured.*/\1/p' "$d/v" | head -n 1)
    nl=$(sed -n '/^Not measured:/,/^$/p' "$d/v" | grep -c '^  ')
    [ -n "$nm" ] && [ "$nm" = "$nl" ] && ok "$v: $nm procedures not measured, all named" ||
        bad "$v: summary says '${nm:-?}' not measured, -v names $nl"
    if [ "$tag" = gccO2 ]; then
        rm -f "$d"/lib/*.qp
        out=$("$d/main" dlopen "$d/lib/libqt.so")
        [ "$out" = "$(LD_LIBRARY_PATH=$d "$d/main" dlopen "$d/libqt.so")" ] || bad "$v: dlopen output: $out"
        "$QP" report --csv "$d/lib/libqt.so.qp" >"$d/csv.dl" 2>&1
        expect "$v dlopen" "$d/csv.dl" lib_sum 5
        rm -f "$d"/lib/*.qp
        QP_PROFILE=$d/run-%p.qp "$d/main" >/dev/null 2>&1
        p=$(ls "$d"/run-*.qp.libqt.so 2>/dev/null | head -n 1)
        if [ -n "$p" ] && [ ! -e "$d/lib/libqt.so.qp" ]; then
            "$QP" report --csv "$p" >"$d/csv.env" 2>&1
            expect "$v QP_PROFILE" "$d/csv.env" lib_sum 10
        else
            bad "$v: QP_PROFILE: no $d/run-PID.qp.libqt.so ($(ls "$d"))"
        fi
        # A rewritten program with a rewritten library: each has its profile.
        "$QPT_REWRITE" "$d/main" -o "$d/main.inst" >/dev/null 2>&1 || bad "$v: rewrite main"
        rm -f "$d"/lib/*.qp
        [ "$("$d/main.inst")" = "$(LD_LIBRARY_PATH=$d "$d/main")" ] || bad "$v: main.inst output"
        "$QP" report --csv "$d/main.inst.qp" >"$d/csv.exe" 2>&1
        "$QP" report --csv "$d/lib/libqt.so.qp" >"$d/csv.lib" 2>&1
        expect "$v program and library" "$d/csv.exe" main 1
        expect "$v program and library" "$d/csv.lib" lib_sum 10
        # The whole program: main, libqt.so and libc.so.6 into one folder, found there.
        # (A program whose RUNPATH names the original library's folder: lib/ holds the
        # rewritten copy, which is not rewritten again.)
        w=$d/whole
        gcc -O2 -g -o "$d/mainw" "$src/main.c" -L"$d" -lqt -pthread -ldl -Wl,-rpath,"\$ORIGIN" || exit 99
        if "$QPT_REWRITE" --with-libs "$d/mainw" -o "$w" >"$d/log.whole" 2>&1; then
            for f in mainw libqt.so libc.so.6; do
                [ -f "$w/$f" ] || bad "$v --with-libs: no $w/$f"
            done
            [ -e "$w/ld-linux-x86-64.so.2" ] && bad "$v --with-libs: the dynamic linker was rewritten"
            # libc rewritten too: it makes every module's increments atomic when the
            # first thread starts, and gives forked children their own slots.
            grep -q "libc.so.6: counters: switchable increments (made atomic when the process's first thread starts" "$d/log.whole" &&
                ok "$v --with-libs: libc watches threads and forks" || bad "$v --with-libs: libc is no watcher"
            for a in threads fork; do
                LD_LIBRARY_PATH=$d "$d/main" $a >"$d/want.whole" 2>&1
                "$w/mainw" $a >"$d/got.whole" 2>&1
                cmp -s "$d/want.whole" "$d/got.whole" && ok "$v --with-libs $a: same output" ||
                    bad "$v --with-libs $a: output: $(head -c 200 "$d/got.whole")"
                if [ $a = threads ]; then
                    "$QP" report --csv "$w/mainw.qp" >"$d/csv.we" 2>&1
                    expect "$v --with-libs" "$d/csv.we" main 1
                fi
            done
            "$QP" report --csv "$w/libqt.so.qp" >"$d/csv.wl" 2>&1
            expect "$v --with-libs" "$d/csv.wl" lib_tick 200000
            expect "$v --with-libs" "$d/csv.wl" lib_sum 50 # 10 + 10 and 3 children of 10
            "$QP" report "$w/libqt.so.qp" 2>&1 | grep -q "(2 runs, 3 forked processes)" &&
                ok "$v --with-libs: the children counted in slots of their own" ||
                bad "$v --with-libs: $("$QP" report "$w/libqt.so.qp" 2>&1 | sed -n 2p)"
            "$QP" report --csv "$w/libc.so.6.qp" >"$d/csv.wc" 2>&1
            c=$(count "$d/csv.wc" pthread_create@@GLIBC_2.34)
            [ "$c" = none ] && c=$(count "$d/csv.wc" pthread_create)
            [ "$c" = 4 ] && ok "$v --with-libs: libc's pthread_create called 4 times" ||
                bad "$v --with-libs: libc's pthread_create: $c"
            # A folder with other files is refused, unless --force.
            "$QPT_REWRITE" --with-libs "$d/mainw" -o "$w" >"$d/log.again" 2>&1
            st=$?
            [ "$st" = 2 ] && [ "$(wc -l <"$d/log.again")" = 1 ] && ok "$v --with-libs: a folder with other files refused" ||
                bad "$v --with-libs: again into $w: status $st: $(cat "$d/log.again")"
            "$QPT_REWRITE" --with-libs --force "$d/mainw" -o "$w" >/dev/null 2>&1 &&
                ok "$v --with-libs --force" || bad "$v --with-libs --force failed"
            # A folder where a library would go: the program would load it, and not start.
            wd=$d/whole.dir
            mkdir -p "$wd/libqt.so"
            "$QPT_REWRITE" --with-libs --force "$d/mainw" -o "$wd" >"$d/log.dir" 2>&1
            st=$?
            [ "$st" = 1 ] && [ "$(wc -l <"$d/log.dir")" = 1 ] && grep -q "$wd/libqt.so: exists and is not a regular file" "$d/log.dir" &&
                [ ! -e "$wd/mainw" ] && ok "$v --with-libs --force: a folder named as a library refused, nothing written" ||
                bad "$v --with-libs --force, a folder libqt.so: status $st: $(cat "$d/log.dir")"
            # A FIFO named as the library in a folder searched first: passed over, not
            # waited on (the next folder has the library).
            mkdir -p "$d/fifodir" && rm -f "$d/fifodir/libqt.so" && mkfifo "$d/fifodir/libqt.so"
            gcc -O2 -o "$d/mainf" "$src/main.c" -L"$d" -lqt -pthread -ldl -Wl,-rpath,"$(cd "$d" && pwd)/fifodir:$(cd "$d" && pwd)" || exit 99
            timeout 60 "$QPT_REWRITE" --with-libs "$d/mainf" -o "$d/whole.fifo" >"$d/log.fifo" 2>&1
            st=$?
            [ "$st" = 0 ] && [ -f "$d/whole.fifo/libqt.so" ] && [ -p "$d/fifodir/libqt.so" ] &&
                ok "$v --with-libs: a FIFO in the library path passed over, not waited on" ||
                bad "$v --with-libs, a FIFO libqt.so: status $st: $(tail -n 2 "$d/log.fifo")"
            # A library named by a path in DT_NEEDED never chooses where a file is written
            # (../libevil.so once made OUT/../libevil.so).
            h=$(cd "$d" && pwd)/hostile
            mkdir -p "$h/sub"
            cp "$d/libqt.so" "$h/libevil.so"
            if (cd "$h/sub" && gcc -O2 -o prog "$OLDPWD/$src/main.c" ../libevil.so -pthread -ldl 2>/dev/null) &&
                readelf -d "$h/sub/prog" | grep -q 'NEEDED.*\[\.\./libevil.so\]'; then
                qr=$(cd "$(dirname "$QPT_REWRITE")" && pwd)/${QPT_REWRITE##*/}
                (cd "$h/sub" && "$qr" --with-libs prog -o out >"$h/log" 2>&1)
                [ -f "$h/sub/out/prog" ] && [ ! -e "$h/sub/libevil.so" ] &&
                    grep -q "named by a path: left as it is" "$h/log" &&
                    ok "$v --with-libs: a NEEDED path is left as it is, nothing written outside" ||
                    bad "$v --with-libs: NEEDED by path: $(cat "$h/log")"
            else
                bad "$v: could not link a program that needs ../libevil.so"
            fi
            # A program that cannot be rewritten leaves no folder behind.
            printf 'not an executable\n' >"$d/junk"
            "$QPT_REWRITE" --with-libs "$d/junk" -o "$d/junkdir" >/dev/null 2>&1
            st=$?
            [ "$st" = 1 ] && [ ! -e "$d/junkdir" ] && ok "$v --with-libs: a bad program leaves no folder" ||
                bad "$v --with-libs of junk: status $st, $(ls -d "$d/junkdir" 2>&1)"
        else
            bad "$v --with-libs: $(tail -n 1 "$d/log.whole")"
        fi
    fi
done

# A library without DT_INIT (no crti.o): a spare DT_NULL becomes the runtime's DT_INIT.
d=$dir/noinit
mkdir -p "$d/lib"
if gcc -O2 -shared -fPIC -nostartfiles -o "$d/libqt.so" "$src/lib.c" 2>/dev/null &&
    ! readelf -d "$d/libqt.so" | grep -q '(INIT)' &&
    gcc -O2 -o "$d/main" "$src/main.c" -L"$d" -lqt -pthread -ldl -Wl,-rpath,'$ORIGIN/lib'; then
    if "$QPT_REWRITE" "$d/libqt.so" -o "$d/lib/libqt.so" >"$d/log" 2>&1; then
        same "no DT_INIT" "$d"
        "$QP" report --csv "$d/lib/libqt.so.qp" >"$d/csv" 2>&1
        expect "no DT_INIT" "$d/csv" lib_sum 10
    else
        bad "no DT_INIT: rewrite: $(tail -n 1 "$d/log")"
    fi
fi

# Real libraries, rewritten one at a time; the program runs with LD_LIBRARY_PATH.
L=/usr/lib/x86_64-linux-gnu
# real WHAT LIB PROC N CMD...: rewrite LIB into $dir/real, run CMD with and without it;
# PROC is called N times (+: at least once)
real() {
    local what=$1 lib=$2 proc=$3 n=$4 r=$dir/real
    shift 4
    [ -f "$L/$lib" ] || { echo "# $what: $L/$lib not installed"; return; }
    mkdir -p "$r"
    if ! "$QPT_REWRITE" "$L/$lib" -o "$r/$lib" >"$r/$lib.log" 2>&1; then
        bad "$what: rewrite $lib: $(tail -n 1 "$r/$lib.log")"
        return
    fi
    rm -f "$r/$lib.qp"
    "$@" >"$r/$lib.want" 2>&1
    local ws=$?
    LD_LIBRARY_PATH=$r "$@" >"$r/$lib.got" 2>&1
    local gs=$?
    if [ "$ws" = "$gs" ] && cmp -s "$r/$lib.want" "$r/$lib.got"; then
        ok "$what with a rewritten $lib: same output and status"
    else
        bad "$what with a rewritten $lib: status $gs (want $ws): $(diff "$r/$lib.want" "$r/$lib.got" | head -n 5)"
    fi
    "$QP" report --csv "$r/$lib.qp" >"$r/$lib.csv" 2>"$r/$lib.err"
    local c
    c=$(count "$r/$lib.csv" "$proc")
    if [ "$c" != none ] && [ "$c" -gt 0 ] && { [ "$n" = + ] || [ "$c" = "$n" ]; } &&
        [ ! -s "$r/$lib.err" ]; then
        ok "$what: $lib's profile counts $proc ($c calls)"
    else
        bad "$what: $lib's profile: $proc $c (expected $n); $(head -n 2 "$r/$lib.err")"
    fi
}

sql="create table t(a,b); insert into t values(1,2),(3,4),(5,6); select sum(a*b), group_concat(b) from t; select upper('qpt');"
qp_have sqlite3 && real sqlite3 libsqlite3.so.0 sqlite3_prepare_v2 + sqlite3 :memory: "$sql"
# whole WHAT PROG ARGS...: PROG and all its libraries rewritten with --with-libs
whole() {
    local what=$1 prog=$2 r=$dir/whole-$1
    shift 2
    [ -x "$prog" ] || return
    if ! "$QPT_REWRITE" --with-libs "$prog" -o "$r" >"$r.log" 2>&1; then
        bad "$what --with-libs: $(tail -n 1 "$r.log")"
        return
    fi
    "$prog" "$@" >"$r.want" 2>&1
    local ws=$?
    "$r/${prog##*/}" "$@" >"$r.got" 2>&1
    local gs=$?
    if [ "$ws" = "$gs" ] && cmp -s "$r.want" "$r.got"; then
        ok "$what --with-libs ($(ls "$r" | grep -vc '\.qp$') files): same output and status"
    else
        bad "$what --with-libs: status $gs (want $ws): $(diff "$r.want" "$r.got" | head -n 5)"
    fi
    [ -f "$r/libc.so.6.qp" ] && ok "$what --with-libs: libc.so.6 measured" || bad "$what --with-libs: no libc profile"
    # A program without DT_RUNPATH gets DT_RPATH: its folder wins over LD_LIBRARY_PATH.
    if ! readelf -d "$prog" | grep -q RUNPATH; then
        rm -f "$r/libc.so.6.qp"
        LD_LIBRARY_PATH=/lib/x86_64-linux-gnu "$r/${prog##*/}" "$@" >/dev/null 2>&1
        [ -f "$r/libc.so.6.qp" ] && ok "$what --with-libs: the folder's libc even with LD_LIBRARY_PATH" ||
            bad "$what --with-libs: LD_LIBRARY_PATH won over the folder"
    fi
}
qp_have sqlite3 && whole sqlite3 /usr/bin/sqlite3 :memory: "$sql"
printf '{"a":[1,2,3],"b":{"c":"x"}}\n' >"$dir/in.json"
qp_have jq && real jq libjq.so.1 jq_next + jq -c '.a|map(.*2), (.b|keys)' "$dir/in.json"
qp_have jq && whole jq /usr/bin/jq -c '.a|map(.*2), (.b|keys)' "$dir/in.json"
# Interpreters with every library rewritten, libc included.
cat >"$dir/w.lua" <<'LUA'
local t = {}
for i = 1, 20000 do t[i] = string.format("%05d", (i * 7919) % 20011) end
table.sort(t)
local s = 0
for i = 1, #t, 97 do s = s + tonumber(t[i]) end
print(#t, t[1], t[#t], s, string.rep("ab", 3):upper())
LUA
qp_have lua5.4 && whole lua5.4 /usr/bin/lua5.4 "$dir/w.lua"
qp_have python3.11 && whole python3.11 /usr/bin/python3.11 -c 'import json, re, collections
d = [{"k": i, "v": str(i) * 3} for i in range(3000)]
s = json.dumps(d)
print(len(s), len(re.findall(r"\d+", s)), collections.Counter(len(x["v"]) for x in json.loads(s)).most_common(2))'
if qp_have g++ && g++ -O2 -o "$dir/ex" "$src/ex.cc"; then
    # 286 exceptions: each allocated and deleted once.
    real "C++ exceptions" libstdc++.so.6 __cxa_allocate_exception 286 "$dir/ex"
    real "C++ exceptions" libgcc_s.so.1 _Unwind_DeleteException 286 "$dir/ex"
    real "C++ exceptions" libc.so.6 __libc_malloc + "$dir/ex"
    whole "C++" "$dir/ex"
fi
# A callback of the program that throws through the library's frame: the library sees no
# throw, the report over both modules marks its counts approximate, and the library's
# report alone says what it cannot see.
if qp_have g++ && mkdir -p "$dir/cb/lib" && gcc -O2 -fPIC -shared -o "$dir/cb/libcb.so" "$src/cb.c" &&
    g++ -O2 -o "$dir/cb/cb_main" "$src/cb_main.cc" -L"$dir/cb" -lcb -Wl,-rpath,'$ORIGIN/lib'; then
    c=$dir/cb
    if "$QPT_REWRITE" "$c/libcb.so" -o "$c/lib/libcb.so" >"$c/log" 2>&1 &&
        "$QPT_REWRITE" "$c/cb_main" -o "$c/cb.inst" >>"$c/log" 2>&1; then
        LD_LIBRARY_PATH=$c "$c/cb_main" >"$c/want" 2>&1
        "$c/cb.inst" >"$c/got" 2>&1
        cmp -s "$c/want" "$c/got" && ok "callback that throws through a library: same output" ||
            bad "callback that throws through a library: output differs"
        "$QP" report "$c/cb.inst.qp" "$c/lib/libcb.so.qp" >"$c/both" 2>&1
        grep -q 'libcb.so  lib_apply ~' "$c/both" &&
            ok "callback that throws: lib_apply marked approximate in the process report" ||
            bad "callback that throws: lib_apply not marked: $(grep lib_apply "$c/both")"
        "$QP" report "$c/lib/libcb.so.qp" >"$c/alone" 2>&1
        grep -q '^note: a library alone: a throw or longjmp of another module' "$c/alone" &&
            ok "callback that throws: the library's report alone says what it cannot see" ||
            bad "callback that throws: no note in the library's report alone"
    else
        bad "callback that throws: rewrite failed: $(tail -n 1 "$c/log")"
    fi
fi
[ "$fails" -eq 0 ]
