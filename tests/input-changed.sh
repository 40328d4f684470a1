#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# An input changed while qpt-rewrite rewrites it (doc/hardening.md): truncated while the
# library reads it through its mapping (a read past the new end faults: SIGBUS), changed
# in place, appended to, replaced, or touched before the output is renamed. Each gives
# exit status 1, exactly one line on stderr ("qpt-rewrite: IN: input changed while it was
# rewritten"), no output and no temporary output; an input left alone is rewritten.
# Deterministic: QPT_TEST_STOP_AT (a test hook, qpt-rewrite(1)) stops the rewrite at the
# end of a named phase, the input is changed, the rewrite continued.
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

# case NAME PHASE THREADS CHANGE [ok]: rewrite a copy of bash, stopped at the end of
# PHASE, run the shell command CHANGE on it ($D/in), continue; the rewrite must refuse
# (or succeed, with "ok").
case_() {
    name=$1 phase=$2 threads=$3 change=$4 want=${5:-refused}
    rm -f "$D"/in "$D"/out "$D"/out.tmp* "$D"/err
    cp "$SRC" "$D/in" || exit 99
    QPT_TEST_STOP_AT=$phase "$QPT_REWRITE" --threads="$threads" "$D/in" -o "$D/out" \
        2>"$D/err" &
    pid=$!
    n=0
    while ! stopped $pid; do
        if ! kill -0 $pid 2>/dev/null || [ $n -ge 1200 ]; then
            bad "$name: the rewrite did not stop at '$phase'"
            kill $pid 2>/dev/null
            wait $pid
            return
        fi
        n=$((n + 1))
        sleep 0.1
    done
    (cd "$D" && eval "$change")
    kill -CONT $pid
    wait $pid
    rc=$?
    tmps=$(ls "$D"/out.tmp* 2>/dev/null | wc -l)
    if [ "$want" = ok ]; then
        if [ $rc -eq 0 ] && [ -f "$D/out" ] && [ "$tmps" -eq 0 ]; then
            ok "$name: rewritten"
        else
            bad "$name: exit $rc, $(head -1 "$D/err")"
        fi
        return
    fi
    line="qpt-rewrite: $D/in: input changed while it was rewritten"
    if [ $rc -ne 1 ]; then
        bad "$name: exit status $rc, not 1 ($(head -1 "$D/err"))"
    elif [ "$(wc -l <"$D/err")" -ne 1 ] || [ "$(cat "$D/err")" != "$line" ]; then
        bad "$name: stderr is not the one line: $(head -3 "$D/err")"
    elif [ -e "$D/out" ] || [ "$tmps" -ne 0 ]; then
        bad "$name: an output or a temporary output was left"
    else
        ok "$name: refused in one line"
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

[ $fails -eq 0 ] || exit 1
exit 0
