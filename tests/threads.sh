#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# The analysis and the drivers' per-procedure work split by procedure over threads
# (base/qp_pool.c, qpt-rewrite --threads N), and so the writing of the relocated code,
# the references to tables of labels and the description's chunks (their records
# encoded, then compressed): the outputs do not
# depend on the number of threads. On two test programs (a switch interpreter, computed gotos: built here), ls, bash,
# python3.11 and qpt-rewrite itself (cc1 too, when installed: the analysis only),
# --dump-cfg=text and the null, qp and trace rewrites with --threads 1, 2 and 3 are
# byte-identical; and a --threads that is not a number from 1 to 16 is a usage error
# (exit 2).
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
dir=$top_builddir/tests/threads.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
fails=0
for n in 0 17 x 2x -1; do
    "$QPT_REWRITE" --threads="$n" --dump-cfg /usr/bin/ls >/dev/null 2>"$dir/err"
    st=$?
    [ $st -eq 2 ] && grep -q 'threads' "$dir/err" && ok "--threads=$n: usage error" ||
        bad "--threads=$n: exit $st, $(head -n 1 "$dir/err")"
done
cc1=$(ls /usr/lib/gcc/x86_64-linux-gnu/*/cc1 2>/dev/null | tail -n 1)
prog=
for c in interp computed_goto; do
    if ${CC:-gcc} -O2 -o "$dir/$c" "${top_srcdir:-.}/tests/progs/$c.c" 2>/dev/null; then
        prog="$prog $dir/$c"
    else
        echo "# $c.c does not build here: not rewritten"
    fi
done
for f in $prog /usr/bin/ls /usr/bin/bash /usr/bin/python3.11 "$top_builddir/tools/qpt-rewrite" $cc1; do
    [ -f "$f" ] || continue
    b=$dir/$(basename "$f")
    for t in 1 2 3; do
        "$QPT_REWRITE" --threads=$t --dump-cfg=text "$f" >"$b.cfg$t" 2>/dev/null ||
            bad "$f: --dump-cfg with $t threads failed"
        [ "$f" = "$cc1" ] && continue
        for d in none qp trace; do
            # (The output's name is part of it: the profile's name.)
            "$QPT_REWRITE" --threads=$t --driver=$d "$f" -o "$b.out" >/dev/null 2>"$b.err" &&
                mv "$b.out" "$b.$d$t" ||
                bad "$f: --driver=$d with $t threads failed (exit $?): $(tail -3 "$b.err")"
        done
    done
    for t in 2 3; do
        for o in cfg none qp trace; do
            [ -f "$b.${o}1" ] || continue
            cmp -s "$b.${o}1" "$b.$o$t" && ok "$(basename "$f") $o: $t threads as 1" ||
                bad "$(basename "$f") $o: $t threads differ from 1"
        done
    done
    rm -f "$b".*
done
[ $fails -eq 0 ] || exit 1
rm -rf "$dir"
exit 0
