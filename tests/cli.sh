#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# A bad command line of any of the three tools: one line on stderr naming the option or
# command, "(try --help)" for the rest, exit status 2, nothing on stdout (issue 32; dyn
# printed 71 lines of usage, `dyn attach 1234 --bogus` said "1234: unrecognized option").
set -u
B=${top_builddir:-.}/tools
fail=0
err=${top_builddir:-.}/tests/cli.err
# expect "EXPECTED LINE" TOOL ARGS...
expect() {
    want=$1
    shift
    out=$("$@" 2>"$err")
    st=$?
    got=$(cat "$err")
    if [ $st -eq 2 ] && [ -z "$out" ] && [ "$got" = "$want" ]; then
        echo "ok   ${*#"$B"/}"
    else
        echo "FAIL $*: status $st, stderr:"
        sed 's/^/    /' "$err"
        fail=1
    fi
}
expect "qpt-rewrite: unknown option '--bogus' (try --help)" "$B/qpt-rewrite" --bogus
expect "qpt-rewrite: unknown option '-x' (try --help)" "$B/qpt-rewrite" -x a.out
expect "qpt-rewrite: missing argument to '-o' (try --help)" "$B/qpt-rewrite" a.out -o
expect "qpt-rewrite: missing argument to '--output' (try --help)" "$B/qpt-rewrite" a.out --output
expect "dyn: unknown option '--bogus' (try --help)" "$B/dyn" --bogus
expect "dyn: unknown command 'frob' (attach, run, search or clean; try --help)" "$B/dyn" frob
expect "dyn: unknown option '--bogus' (try --help)" "$B/dyn" attach 1234 --bogus
expect "dyn: unknown option '--bogus' (try --help)" "$B/dyn" run --bogus -- true
expect "dyn: missing argument to '--count' (try --help)" "$B/dyn" attach 1234 --count
expect "dyn search: unknown option '--bogus' (try --help)" "$B/dyn" search --bogus
expect "qp: unknown option '--bogus' (try --help)" "$B/qp" report --bogus x.qp
rm -f "$err"
exit $fail
