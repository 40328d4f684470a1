#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# gdb on a rewritten program: `break` on a relocated function stops in the new code, and
# `bt` unwinds through relocated frames (new .eh_frame/.eh_frame_hdr) up to main.
# The program is built without -g: DWARF debug info still names the old addresses
# (README: rewriting DWARF is not done yet), while .symtab names the new code.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
qp_have gdb || { echo "gdb.sh: SKIP: no gdb"; exit 77; }
qp_have gcc || { echo "gdb.sh: SKIP: no gcc"; exit 77; }
dir=$top_builddir/tests/gdb.d
mkdir -p "$dir" || exit 99
fail=0
for flags in "-O1 -fPIE -pie" "-O2 -fno-pie -no-pie" "-O0 -static"; do
    prog=$dir/known$(echo "$flags" | tr -d ' -')
    gcc $flags -o "$prog" "$top_srcdir/tests/known/known.c" || exit 99
    "$QPT_REWRITE" --driver=none "$prog" -o "$prog.inst" 2>/dev/null || {
        echo "FAIL ($flags): qpt-rewrite failed"; fail=1; continue; }
    gdb -batch -nx -ex 'break straight' -ex run -ex bt -ex 'info symbol $pc' \
        "$prog.inst" </dev/null >"$prog.gdb" 2>&1
    if ! grep -q '^Breakpoint 1, .* in straight ()' "$prog.gdb"; then
        echo "FAIL ($flags): no stop in straight"; fail=1
    elif ! grep -q '^straight\( + [0-9]*\)\{0,1\} in section .qpt.text' "$prog.gdb"; then
        echo "FAIL ($flags): stopped outside the relocated code"; fail=1
    elif ! grep -q '^#1 .* in count_loop ()' "$prog.gdb" || ! grep -q '^#2 .* in main ()' "$prog.gdb"; then
        echo "FAIL ($flags): bt does not unwind to main:"; sed 's/^/  /' "$prog.gdb"; fail=1
    else
        echo "ok ($flags): break and bt in relocated code"
    fi
done
exit $fail
