#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# What vouches for code that a stripped file without unwind tables reaches only through
# pointers (editor/ed_select.c, edl_vouched_procs; most of chromium's code). tests/vouch/
# hidden.c, gcc -O2 PIE, stripped, no .eh_frame, rewritten with --driver=qp:
#  - op_add and op_sub, whose entries only relocated words of data hold (a vtable's
#    slots), are measured: 15 calls each;
#  - mixer, whose address only a lea forms, is measured because it calls two procedures
#    vouched for (scale, offset): 17 calls;
#  - lone (a lea's address, no calls) stays in place: "may be data";
#  - the output is the original's.
# tests/vouch/framed.c, the same way but with frame pointers: square and cube (a lea's
# address, no calls) start as compiled functions start (16-byte aligned after padding,
# push %rbp; mov %rsp,%rbp) and are measured: 11 and 7 calls; so is leaf, which only a
# jump of hop reaches: 3 calls; bare and hop (no frame, a lea's address) stay in place,
# "may be data"; the output is the original's.
# tests/vouch/sections.c with sections_data.S, clang -O2 with frame pointers but in
# leaves, -ffunction-sections, linked by lld (int3 between sections), stripped, no
# .eh_frame: twice and inc3 (leaves, no frame) and guard (its frame set up past an early
# exit), a lea's address each, after lld's int3 fill, are measured: 11, 7 and 3 calls;
# after_trap (a frame, after guard's `int3; ud2`) too: 5 calls; so is
# sections_after_call (a frame, right after a call to abort, no padding): 9 calls;
# sections_table, data
# after an alignment's nops in the assembler file's section that decodes as
# `mov %rdi,%rax; ret`, stays in place, "may be data", and so do exactly the two
# pieces of it that decode as code and sections_check (a leaf right after it, no int3
# fill): nothing else; the output is the original's.
# And data kept in .text behind a lea (tests/progs/data_in_text.c, stripped) stays
# untouched: the rewritten program prints what the original prints.
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
QP=${QP:-$top_builddir/tools/qp}
qp_have gcc || { echo "vouch.sh: SKIP: no gcc"; exit 77; }
dir=$top_builddir/tests/vouch.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
fails=0
cflags="-O2 -fPIE -pie -fno-asynchronous-unwind-tables -fno-unwind-tables"

exe=$dir/hidden
# shellcheck disable=SC2086
gcc $cflags -o "$exe.full" "$top_srcdir/tests/vouch/hidden.c" || exit 99
strip -o "$exe" "$exe.full" || exit 99
want=$("$exe") && [ -n "$want" ] || exit 99 # the original runs and prints
if ! "$QPT_REWRITE" -v --driver=qp "$exe" -o "$exe.qp" >"$exe.log" 2>&1; then
    bad "hidden: rewrite: $(tail -n 1 "$exe.log")"
    exit 1
fi
[ "$("$exe.qp")" = "$want" ] && ok "hidden: same output" || bad "hidden: output differs"
"$QP" report --csv "$exe.qp.qp" >"$exe.csv" 2>&1
# The stripped file names a procedure sub_<its address in hex>.
for row in op_add:15 op_sub:15 mixer:17; do
    name=${row%%:*} want_calls=${row##*:}
    sub=sub_$(nm "$exe.full" | awk -v n="$name" '$3 == n { sub(/^0+/, "", $1); print $1 }')
    got=$(awk -F, -v n="$sub" '$1 == n { print $2 }' "$exe.csv")
    [ "$got" = "$want_calls" ] && ok "hidden: $name ($sub) measured, $got calls" ||
        bad "hidden: $name ($sub): '$got' calls, expected $want_calls"
done
lone=$(nm "$exe.full" | awk '$3 == "lone" { sub(/^0+/, "", $1); print $1 }')
grep -q "left in place: sub_$lone at 0x$lone: .*may be data" "$exe.log" &&
    ok "hidden: lone (a lea's address, no calls) left in place" ||
    bad "hidden: lone (sub_$lone) not left in place as may be data"
n=$(grep -c "left in place: .*may be data" "$exe.log")
[ "$n" = 1 ] && ok "hidden: only lone may be data" ||
    bad "hidden: $n procedures may be data, expected 1"

exe=$dir/framed
# shellcheck disable=SC2086
gcc $cflags -fno-omit-frame-pointer -o "$exe.full" "$top_srcdir/tests/vouch/framed.c" || exit 99
strip -o "$exe" "$exe.full" || exit 99
want=$("$exe") && [ -n "$want" ] || exit 99 # the original runs and prints
if ! "$QPT_REWRITE" -v --driver=qp "$exe" -o "$exe.qp" >"$exe.log" 2>&1; then
    bad "framed: rewrite: $(tail -n 1 "$exe.log")"
    exit 1
fi
[ "$("$exe.qp")" = "$want" ] && ok "framed: same output" || bad "framed: output differs"
"$QP" report --csv "$exe.qp.qp" >"$exe.csv" 2>&1
for row in square:11 cube:7 leaf:3; do
    name=${row%%:*} want_calls=${row##*:}
    sub=sub_$(nm "$exe.full" | awk -v n="$name" '$3 == n { sub(/^0+/, "", $1); print $1 }')
    got=$(awk -F, -v n="$sub" '$1 == n { print $2 }' "$exe.csv")
    [ "$got" = "$want_calls" ] && ok "framed: $name ($sub) measured, $got calls" ||
        bad "framed: $name ($sub): '$got' calls, expected $want_calls"
done
for name in bare hop; do
    a=$(nm "$exe.full" | awk -v n="$name" '$3 == n { sub(/^0+/, "", $1); print $1 }')
    grep -q "left in place: sub_$a at 0x$a: .*may be data" "$exe.log" &&
        ok "framed: $name (no frame, a lea's address) left in place" ||
        bad "framed: $name (sub_$a) not left in place as may be data"
done
n=$(grep -c "left in place: .*may be data" "$exe.log")
[ "$n" = 2 ] && ok "framed: only bare and hop may be data" ||
    bad "framed: $n procedures may be data, expected 2"

exe=$dir/sections
if qp_have clang && qp_have ld.lld; then
    # shellcheck disable=SC2086
    clang $cflags -fno-omit-frame-pointer -momit-leaf-frame-pointer -ffunction-sections \
        -fuse-ld=lld -o "$exe.full" "$top_srcdir/tests/vouch/sections.c" \
        "$top_srcdir/tests/vouch/sections_data.S" || exit 99
    strip -o "$exe" "$exe.full" || exit 99
    want=$("$exe") && [ -n "$want" ] || exit 99 # the original runs and prints
    if ! "$QPT_REWRITE" -v --driver=qp "$exe" -o "$exe.qp" >"$exe.log" 2>&1; then
        bad "sections: rewrite: $(tail -n 1 "$exe.log")"
        exit 1
    fi
    [ "$("$exe.qp")" = "$want" ] && ok "sections: same output" || bad "sections: output differs"
    "$QP" report --csv "$exe.qp.qp" >"$exe.csv" 2>&1
    for row in twice:11 inc3:7 guard:3 after_trap:5 sections_after_call:9; do
        name=${row%%:*} want_calls=${row##*:}
        sub=sub_$(nm "$exe.full" | awk -v n="$name" '$3 == n { sub(/^0+/, "", $1); print $1 }')
        got=$(awk -F, -v n="$sub" '$1 == n { print $2 }' "$exe.csv")
        [ "$got" = "$want_calls" ] && ok "sections: $name ($sub) measured, $got calls" ||
            bad "sections: $name ($sub): '$got' calls, expected $want_calls"
    done
    # Exactly these may be data: the table and the two pieces of it that decode as
    # code on their own (lea 1(%rdi),%rax; ret at +4, xor %rax,%rax; ret at +12), and
    # sections_check, a leaf right after the table's ret with no int3 fill before it
    # (a leaf needs lld's fill to start like a function).
    a=$(nm "$exe.full" | awk '$3 == "sections_table" { print $1 }')
    c=$(nm "$exe.full" | awk '$3 == "sections_check" { print $1 }')
    want_data=$(printf '%x\n' $((0x$a)) $((0x$a + 4)) $((0x$a + 12)) $((0x$c)) | sort)
    got_data=$(sed -n 's/.*left in place: sub_\([0-9a-f]*\) at 0x[0-9a-f]*: .*may be data$/\1/p' \
        "$exe.log" | sort)
    if [ "$got_data" = "$want_data" ] && [ -n "$a" ] && [ -n "$c" ]; then
        ok "sections: exactly the table after nops (decodes as code), its 2 pieces and sections_check left in place as may be data"
    else
        bad "sections: may be data: $(echo $got_data), expected $(echo $want_data)"
    fi
else
    echo "vouch.sh: sections: SKIP: no clang or ld.lld"
fi

exe=$dir/data_in_text
# shellcheck disable=SC2086
gcc $cflags -o "$exe" "$QP_PROGS_DIR/data_in_text.c" && strip "$exe" || exit 99
want=$("$exe") && [ -n "$want" ] || exit 99 # the original runs and prints
for drv in none qp; do
    if "$QPT_REWRITE" --driver=$drv "$exe" -o "$exe.$drv" >"$exe.$drv.log" 2>&1 &&
        [ "$("$exe.$drv")" = "$want" ]; then
        ok "data_in_text $drv: same output"
    else
        bad "data_in_text $drv: output differs or rewrite failed: $(tail -n 1 "$exe.$drv.log")"
    fi
done
[ "$fails" = 0 ] || exit 1
exit 0
