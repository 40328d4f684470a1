#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# V8's embedded builtins stay in place (editor/ed_v8.c). A program built here carries a
# block of 300 "builtins" laid out as V8 lays out its embedded code blob: each aligned to
# 64 bytes, the gap after it int3, and a layout table in .rodata (three 8-byte hashes,
# then offset, length and metadata offset of each builtin from the blob's start). As V8
# does, main calls each builtin at blob start + offset, and the builtin calls back into
# C, which checks that its return address lies in [blob start, blob start + size) - what
# V8's stack walk asks of every return address in a builtin. Checked: the original
# passes; the rewrite (none and qp) names all 300 as left in place and passes; qp's
# summary counts them unmeasured under a reason of their own (V8 may run a copy of the
# blob, where jumps to trampolines would land elsewhere: node 20 does); and the
# same program whose blob breaks the layout (one gap of nops, not int3) gets no such
# line, and its rewrite fails the check (the test sees a relocated builtin).
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
dir=$top_builddir/tests/v8-blob.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
dir=$(cd "$dir" && pwd)
fails=0
qp_have gcc || { echo "v8-blob: SKIP: no gcc"; exit 77; }
N=300

# The blob and its table, as assembly; $1 is the fill of the gap after builtin 7.
gen_blob() {
    echo '    .text'
    echo '    .balign 4096'
    echo '    .globl blob_start'
    echo 'blob_start:'
    i=0
    while [ $i -lt $N ]; do
        echo "    .type B$i, @function"
        echo "B$i:"
        # A different length for each: some nops, then a call back into C.
        k=$((i % 13))
        while [ $k -gt 0 ]; do echo '    nop'; k=$((k - 1)); done
        echo '    sub $8, %rsp'
        echo "    mov \$$i, %edi"
        echo '    call check_pc'
        echo '    add $8, %rsp'
        echo '    ret'
        echo "E$i:"
        echo "    .size B$i, E$i - B$i"
        if [ $i -eq 7 ]; then
            echo "    .byte $1"
            echo "    .balign 64, $1"
        else
            echo '    .byte 0xcc'
            echo '    .balign 64, 0xcc'
        fi
        i=$((i + 1))
    done
    echo 'blob_end:'
    echo '    .section .rodata'
    echo '    .balign 64'
    echo '    .globl blob_data'
    echo 'blob_data:'
    echo '    .quad 0x1234567, 0x89abcdef, 0x13572468'
    echo '    .globl blob_table'
    echo 'blob_table:'
    i=0
    while [ $i -lt $N ]; do
        echo "    .long B$i - blob_start, E$i - B$i, $((i * 16))"
        i=$((i + 1))
    done
    echo '    .section .note.GNU-stack,"",@progbits'
}

cat >"$dir/main.c" <<EOF
#include <stdint.h>
#include <stdio.h>
extern const char blob_start[];
extern const uint32_t blob_table[];
static const char *lo, *hi;
static int bad;
/* Called by builtin I: is its return address in the blob, as V8's stack walk needs? */
__attribute__((noinline)) void check_pc(int i)
{
    const char *ret = __builtin_return_address(0);
    if (ret < lo || ret >= hi) {
        if (bad++ < 3)
            printf("builtin %d: return address outside the blob\n", i);
    }
}
int main(void)
{
    const uint32_t *last = blob_table + 3 * ($N - 1);
    lo = blob_start;
    hi = blob_start + ((last[0] + last[1] + 1 + 63) / 64 * 64);
    for (int i = 0; i < $N; i++)
        ((void (*)(void))(blob_start + blob_table[3 * i]))();
    printf("%d builtins, %d bad\n", $N, bad);
    return bad != 0;
}
EOF

for variant in good broken; do
    fill=0xcc
    [ $variant = good ] || fill=0x90
    gen_blob $fill >"$dir/blob.$variant.s"
    exe=$dir/prog.$variant
    gcc -O2 -o "$exe" "$dir/main.c" "$dir/blob.$variant.s" || exit 99
    "$exe" >"$exe.out" 2>&1 || { bad "$variant: the original fails: $(head -n 2 "$exe.out")"; continue; }
    for drv in none qp; do
        "$QPT_REWRITE" -v --driver=$drv "$exe" -o "$exe.$drv" >/dev/null 2>"$exe.$drv.err" ||
            { bad "$variant $drv: rewrite failed: $(tail -n 1 "$exe.$drv.err")"; continue; }
        nleft=$(grep -c "left in place: B[0-9]* at .*V8's embedded builtins" "$exe.$drv.err")
        (cd "$dir" && "$exe.$drv" >"$exe.$drv.out" 2>&1)
        st=$?
        if [ $variant = good ]; then
            [ "$nleft" -eq $N ] && ok "$drv: $N builtins left in place" ||
                bad "$drv: $nleft of $N builtins left in place as V8's"
            [ $st -eq 0 ] && cmp -s "$exe.out" "$exe.$drv.out" && ok "$drv: the rewrite runs" ||
                bad "$drv: the rewrite fails: $(head -n 2 "$exe.$drv.out")"
            if [ $drv = qp ]; then
                grep -q "unmeasured *$N procedures .*: one of V8's embedded builtins: V8 may run a copy" \
                    "$exe.$drv.err" && ok "qp: $N builtins unmeasured, V8's reason given" ||
                    bad "qp: the summary does not count $N builtins under V8's reason"
            fi
        else
            [ "$nleft" -eq 0 ] && ok "broken layout, $drv: no blob found" ||
                bad "broken layout, $drv: $nleft builtins taken for V8's"
            # Shows that the check sees relocated builtins (else the test proves nothing).
            [ $st -ne 0 ] && ok "broken layout, $drv: relocated builtins fail the pc check" ||
                bad "broken layout, $drv: the pc check passes with relocated builtins"
        fi
    done
done

[ $fails -eq 0 ] || exit 1
echo "v8-blob: all checks passed"
exit 0
