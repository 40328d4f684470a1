#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# An input changed while qpt-rewrite rewrites it (doc/hardening.md): truncated while the
# library reads it through its mapping (a read past the new end faults: SIGBUS), changed
# in place, appended to, replaced, or touched before the output is renamed. Each gives
# exit status 1, exactly one line on stderr ("qpt-rewrite: IN: input changed while it was
# rewritten"), no output and no temporary output; an input left alone is rewritten.
# The same on the metrics path (-e), and for a separate debug file; SIGTERM and SIGHUP
# leave no temporary output on either path. qp report: the rewritten executable (its
# description is read through a mapping) truncated while it is read gives "qp: EXE:
# changed while it was read", a profile truncated "qp: PROFILE: profile truncated...".
# Deterministic: QPT_TEST_STOP_AT (a test hook, qpt-rewrite(1), qp(1)) stops the tool at
# a named phase, the input is changed, the tool continued.
# Work in $top_builddir/tests/input-changed.d. Exit status: 0 pass, 1 fail, 77 skip.
set -u

# shellcheck source=tests/lib.sh
. "${top_srcdir:-.}/tests/lib.sh"

SRC=/usr/bin/bash
[ -r "$SRC" ] || { echo "SKIP: no $SRC"; exit 77; }
D=$top_builddir/tests/input-changed.d
rm -rf "$D"
mkdir -p "$D" || exit 99
fails=0

# stopped PID: is the process stopped (by its own SIGSTOP)?
stopped() {
    [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)" = T ]
}

# run_stopped NAME PHASE CHANGE CMD...: run CMD (stderr into $D/err) stopped at PHASE
# (QPT_TEST_STOP_AT), run the shell command CHANGE in $D, continue it; its exit status
# in $rc (255 and a failure when it did not stop).
run_stopped() {
    name=$1 phase=$2 change=$3
    shift 3
    QPT_TEST_STOP_AT=$phase "$@" >"$D/stdout" 2>"$D/err" &
    pid=$!
    n=0
    while ! stopped $pid; do
        if ! kill -0 $pid 2>/dev/null || [ $n -ge 1200 ]; then
            bad "$name: it did not stop at '$phase'"
            kill $pid 2>/dev/null
            wait $pid
            rc=255
            return
        fi
        n=$((n + 1))
        sleep 0.1
    done
    (cd "$D" && eval "$change")
    kill -CONT $pid
    wait $pid
    rc=$?
}

# refused NAME LINE: the command run_stopped ran ended with status 1, one line on stderr
# that LINE (a shell pattern) matches, and no output or temporary output ($D/out*) left.
refused() {
    tmps=$(ls "$D"/out.tmp* 2>/dev/null | wc -l)
    if [ $rc -eq 255 ]; then
        return
    elif [ $rc -ne 1 ]; then
        bad "$1: exit status $rc, not 1 ($(head -1 "$D/err"))"
    elif [ "$(wc -l <"$D/err")" -ne 1 ] || ! case "$(cat "$D/err")" in $2) true ;; *) false ;; esac; then
        bad "$1: stderr is not the one line: $(head -3 "$D/err")"
    elif [ -e "$D/out" ] || [ "$tmps" -ne 0 ]; then
        bad "$1: an output or a temporary output was left"
    else
        ok "$1: refused in one line"
    fi
}

# case NAME PHASE THREADS CHANGE [ok|METRIC]: rewrite a copy of bash, stopped at the end
# of PHASE, run the shell command CHANGE on it ($D/in), continue; the rewrite must
# refuse (or succeed, with "ok"). With METRIC: the rewrite measures it (-e: the metrics
# path) and must refuse.
case_() {
    name=$1 phase=$2 threads=$3 change=$4 want=${5:-refused}
    rm -f "$D"/in "$D"/out "$D"/out.tmp* "$D"/err
    cp "$SRC" "$D/in" || exit 99
    if [ "$want" = ok ] || [ "$want" = refused ]; then
        run_stopped "$name" "$phase" "$change" \
            "$QPT_REWRITE" --threads="$threads" "$D/in" -o "$D/out"
    else
        run_stopped "$name" "$phase" "$change" "$QPT_REWRITE" -e "$want" "$D/in" -o "$D/out"
    fi
    if [ "$want" = ok ]; then
        tmps=$(ls "$D"/out.tmp* 2>/dev/null | wc -l)
        if [ $rc -eq 0 ] && [ -f "$D/out" ] && [ "$tmps" -eq 0 ]; then
            ok "$name: rewritten"
        else
            bad "$name: exit $rc, $(head -1 "$D/err")"
        fi
        return
    fi
    refused "$name" "qpt-rewrite: $D/in: input changed while it was rewritten"
}

# signalled NAME SIG [METRIC]: a rewrite of a copy of bash (with METRIC: the metrics
# path) sent SIG once its temporary output exists ends by SIG, its temporary output
# removed.
signalled() {
    name=$1 sig=$2
    rm -f "$D"/in "$D"/out "$D"/out.tmp* "$D"/err
    cp "$SRC" "$D/in" || exit 99
    if [ $# -ge 3 ]; then
        run_stopped "$name" "temporary output" "kill -$sig \$pid" \
            "$QPT_REWRITE" -e "$3" "$D/in" -o "$D/out"
    else
        run_stopped "$name" "temporary output" "kill -$sig \$pid" \
            "$QPT_REWRITE" "$D/in" -o "$D/out"
    fi
    tmps=$(ls "$D"/out.tmp* 2>/dev/null | wc -l)
    if [ $rc -eq 255 ]; then
        return
    elif [ $rc -ne $((128 + $(case $sig in HUP) echo 1 ;; INT) echo 2 ;; *) echo 15 ;; esac))) ]; then
        bad "$name: exit status $rc, not that of SIG$sig"
    elif [ -e "$D/out" ] || [ "$tmps" -ne 0 ]; then
        bad "$name: an output or a temporary output was left"
    else
        ok "$name: ended, nothing left"
    fi
}

# Truncated during the analysis (its pool's threads read the code).
case_ "truncated while it is analysed" "discovered" 2 "truncate -s 4096 in"
# Truncated inside ed_plan_apply (the code emitted from the mapping, on the pool's
# threads and on one), and after it (its pages released: the unwind tables read them).
case_ "truncated while code is emitted" "tables of labels retargeted" 2 "truncate -s 4096 in"
case_ "truncated, one thread" "tables of labels retargeted" 1 "truncate -s 4096 in"
case_ "truncated after the plan" "relocated (plan applied)" 2 "truncate -s 500000 in"
# Changed without a fault: the bytes the writer reads are not those analysed.
case_ "changed in place" "measured (driver)" 2 \
    "printf abcd | dd of=in bs=1 seek=100000 conv=notrunc 2>/dev/null"
case_ "appended to" "debug information" 2 "printf x >>in"
case_ "replaced by another file" "measured (driver)" 2 "cp in in.new && mv in.new in"
# Changed once the writer has read it, before the output is renamed into place.
case_ "touched before the rename" "temporary output" 2 "touch -d '2000-01-01' in"
case_ "left alone" "temporary output" 2 "true" ok

# The metrics path (-e) tells its temporary output too: removed by a refusal and by
# SIGTERM and SIGHUP (SIGINT the same, but a background job here ignores it), as the
# default path's.
M='count calls(main)'
case_ "metrics: touched before the rename" "temporary output" 2 "touch -d '2000-01-01' in" "$M"
case_ "metrics: truncated before the rename" "temporary output" 2 "truncate -s 4096 in" "$M"
for sig in TERM HUP; do
    signalled "SIG$sig" $sig
    signalled "metrics: SIG$sig" $sig "$M"
done

# A separate debug file (found by .gnu_debuglink) is an input too: changed once its
# symbols are read, before the output is renamed, the rewrite is refused.
if command -v gcc >/dev/null && command -v objcopy >/dev/null && command -v strip >/dev/null
then
    rm -f "$D"/dbg* "$D"/out "$D"/out.tmp*
    printf 'int f(int x) { return x * 3; }\nint main(int c, char **v) { (void)v; return f(c) - 3; }\n' \
        >"$D/dbg.c"
    (cd "$D" && gcc -O1 -g -o dbg dbg.c && objcopy --only-keep-debug dbg dbg.debug \
        && strip dbg && objcopy --add-gnu-debuglink=dbg.debug dbg) || exit 99
    if "$QPT_REWRITE" --dump-cfg "$D/dbg" | grep -q "^symbols from: .*dbg.debug"; then
        run_stopped "debug file touched before the rename" "temporary output" \
            "touch -d '2000-01-01' dbg.debug" "$QPT_REWRITE" "$D/dbg" -o "$D/out"
        refused "debug file touched before the rename" \
            "qpt-rewrite: $D/dbg: input changed while it was rewritten (its separate debug file */dbg.debug)"
    else
        bad "the debug file of a stripped program is not read"
    fi
else
    echo "SKIP debug file: no gcc, objcopy or strip"
fi

# qp report reads the profiles (read, not mapped: a profile truncated meanwhile is
# "profile truncated") and the rewritten executable's description through its mapping:
# the executable truncated while qp report reads it is refused in one line, never a
# SIGBUS. QPT_TEST_STOP_AT names the phase that starts (qp report's progress line).
rm -f "$D"/in "$D"/out "$D"/out.tmp* "$D"/err
cp "$SRC" "$D/in" && "$QPT_REWRITE" "$D/in" -o "$D/prog" 2>/dev/null \
    && (cd "$D" && ./prog -c true) && [ -f "$D/prog.qp" ] || exit 99
cp "$D/prog" "$D/prog.keep" && cp "$D/prog.qp" "$D/prog.qp.keep" || exit 99
QP=${QP:-$top_builddir/tools/qp}
# qp_case NAME PHASE CHANGE LINE: qp report stopped at PHASE, CHANGE run, continued.
qp_case() {
    cp "$D/prog.keep" "$D/prog" && cp "$D/prog.qp.keep" "$D/prog.qp" || exit 99
    run_stopped "qp report: $1" "$2" "$3" "$QP" report "$D/prog.qp"
    refused "qp report: $1" "$4"
}
for phase in "reading the description" "summing the profiles" "solving the counts" \
             "ordering the procedures" \
             "counting PLT stubs"; do
    qp_case "executable truncated, $phase" "$phase" "truncate -s 4096 prog" \
        "qp: */tests/input-changed.d/prog: changed while it was read"
done
# Truncated while the report is written to -o FILE (--annotate reads the code then): its
# temporary output removed too.
rm -f "$D"/out "$D"/out.tmp*
cp "$D/prog.keep" "$D/prog" && cp "$D/prog.qp.keep" "$D/prog.qp" || exit 99
run_stopped "qp report -o" "temporary output" "truncate -s 4096 prog" \
    "$QP" report --annotate=main -o "$D/out" "$D/prog.qp"
refused "qp report -o: executable truncated while the report is written" \
    "qp: */tests/input-changed.d/prog: changed while it was read"
qp_case "profile truncated while it is read" "reading the profiles" "truncate -s 8192 prog.qp" \
    "qp: $D/prog.qp: profile truncated*"

[ $fails -eq 0 ] || exit 1
exit 0
