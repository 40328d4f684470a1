#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# gdb on a rewritten program: `break` on a relocated function stops in the new code, and
# `bt` unwinds through relocated frames (new .eh_frame/.eh_frame_hdr) up to main.
# First without -g (.symtab names the new code), then with -g (gcc DWARF 5 and 4, clang):
# the rewritten DWARF must make `break func` and `break file:line` stop in the new code at
# that line, `bt` show file:line, readelf and llvm-dwarfdump find no errors, and the
# rewrite stay deterministic.
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

# With debug information.
src=$top_srcdir/tests/known/known.c
line=$(grep -n 's += i \* straight(i);' "$src" | cut -d: -f1)
[ -n "$line" ] || { echo "gdb.sh: no line to break at in known.c"; exit 99; }
for cc in "gcc -g -O0" "gcc -g -O2" "gcc -gdwarf-4 -O2" "clang -g -O1"; do
    set -- $cc
    qp_have "$1" || { echo "skip ($cc): no $1"; continue; }
    prog=$dir/knowng$(echo "$cc" | tr -d ' -')
    $cc -o "$prog" "$src" || exit 99
    "$QPT_REWRITE" --driver=none "$prog" -o "$prog.inst" 2>/dev/null || {
        echo "FAIL ($cc): qpt-rewrite failed"; fail=1; continue; }
    gdb -batch -nx -ex 'break straight' -ex "break known.c:$line" -ex run -ex bt \
        -ex 'info symbol $pc' -ex continue -ex bt -ex 'info symbol $pc' \
        "$prog.inst" </dev/null >"$prog.gdb" 2>&1
    # The line has two locations: the old code (still in the file; never run) and the new.
    if ! grep -q "^Breakpoint 2\(\.[0-9]\)\{0,1\}, count_loop (.*) at .*known\.c:$line\$" "$prog.gdb"; then
        echo "FAIL ($cc): break known.c:$line does not stop there:"; sed 's/^/  /' "$prog.gdb"; fail=1
    elif ! grep -q '^count_loop + [0-9]* in section .qpt.text' "$prog.gdb"; then
        echo "FAIL ($cc): known.c:$line stopped outside the relocated code"; fail=1
    elif ! grep -q '^Breakpoint 1, straight (.*) at .*known\.c:[0-9]*$' "$prog.gdb" \
        || ! grep -q '^straight\( + [0-9]*\)\{0,1\} in section .qpt.text' "$prog.gdb"; then
        echo "FAIL ($cc): break straight does not stop in the relocated code:"
        sed 's/^/  /' "$prog.gdb"; fail=1
    elif ! grep -q "^#1 .* in count_loop (.*) at .*known\.c:$line\$" "$prog.gdb" \
        || ! grep -q '^#2 .* in main (.*) at .*known\.c:[0-9]*$' "$prog.gdb"; then
        echo "FAIL ($cc): bt shows no file:line for relocated frames:"; sed 's/^/  /' "$prog.gdb"
        fail=1
    else
        echo "ok ($cc): break func, break file:line and bt with lines in relocated code"
    fi
    # The DWARF readers find nothing wrong (where they find nothing wrong in the input:
    # llvm-dwarfdump 14 does not finish verifying some gcc -O2 inputs).
    if readelf --debug-dump=line,info,aranges,ranges "$prog.inst" 2>&1 >/dev/null \
        | grep . >"$prog.readelf"; then
        echo "FAIL ($cc): readelf complains:"; sed 's/^/  /' "$prog.readelf"; fail=1
    fi
    if qp_have llvm-dwarfdump && qp_have timeout \
        && timeout 20 llvm-dwarfdump --verify "$prog" 2>&1 | grep -q '^No errors'; then
        timeout 60 llvm-dwarfdump --verify "$prog.inst" >"$prog.verify" 2>&1
        if ! grep -q '^No errors' "$prog.verify"; then
            echo "FAIL ($cc): llvm-dwarfdump --verify:"; sed 's/^/  /' "$prog.verify"; fail=1
        fi
    fi
    "$QPT_REWRITE" --driver=none "$prog" -o "$prog.inst2" 2>/dev/null \
        && cmp -s "$prog.inst" "$prog.inst2" || { echo "FAIL ($cc): not deterministic"; fail=1; }
done

# A separate debug file (as Debian's -dbgsym packages install under
# /usr/lib/debug/.build-id) describes the old code: the output has a build-id of its own,
# so gdb does not take the input's debug file for it.
if qp_have objcopy && qp_have strip && qp_have readelf; then
    prog=$dir/knownsep
    dbg=$dir/debug-files
    gcc -g -O1 -o "$prog" "$src" || exit 99
    id=$(readelf -n "$prog" | sed -n 's/.*Build ID: //p')
    if [ -n "$id" ]; then
        mkdir -p "$dbg/.build-id/${id%"${id#??}"}" || exit 99
        objcopy --only-keep-debug "$prog" "$dbg/.build-id/${id%"${id#??}"}/${id#??}.debug" &&
            strip --strip-debug "$prog" || exit 99
        "$QPT_REWRITE" --driver=none "$prog" -o "$prog.inst" 2>/dev/null || {
            echo "FAIL (separate debug file): qpt-rewrite failed"; fail=1; }
        nid=$(readelf -n "$prog.inst" | sed -n 's/.*Build ID: //p')
        gdb -batch -nx -iex "set debug-file-directory $dbg" -ex 'break straight' -ex run             -ex 'info symbol $pc' "$prog.inst" </dev/null >"$prog.gdb" 2>&1
        if [ -z "$nid" ] || [ "$nid" = "$id" ]; then
            echo "FAIL (separate debug file): build-id '$nid' not renewed (input $id)"; fail=1
        elif grep -q "$id" "$prog.gdb" || ! grep -q '^straight .*in section .qpt.text' "$prog.gdb"; then
            echo "FAIL (separate debug file): gdb used the input's debug file:"
            sed 's/^/  /' "$prog.gdb"; fail=1
        else
            echo "ok (separate debug file): new build-id, the input's debug file is not used"
        fi
    fi
fi
exit $fail
