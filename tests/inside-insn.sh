#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Code whose entry lies inside an instruction of the code before it (cfg_build.c's
# check_entries_inside_insns). The function symbol q starts in the imm32 of a `movq` of
# p, and its bytes from there (nops, add, pop, ret) decode as valid code too. p's range
# ends at q's entry, so the `movq` runs past it: p stays where it is. q must stay as well:
# moved, its entry's redirect would overwrite the `movq` and what follows, which p runs
# (chromium 156 had such a procedure, noted by a call decoded inside a `movq`; its
# rewrite crashed the renderer in some runs). With --driver=none and qp:
#  - the rewritten program prints what the original prints, and exits 0 (it crashed);
#  - -v names both procedures as left in place, q for its entry inside p's instruction.
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
dir=$top_builddir/tests/inside-insn.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
qp_have gcc || exit 77

cat > "$dir/inside.s" <<'ASM'
	.text
	.globl	p
	.type	p, @function
p:	push	%rbp
	mov	%rsp, %rbp
	mov	%edi, %eax
	.byte	0x48, 0xc7, 0x45, 0xe8	# movq $0x90909090, -0x18(%rbp): q starts in its imm32
	.globl	q
	.type	q, @function
q:	.byte	0x90, 0x90, 0x90, 0x90
	add	$1, %eax
	pop	%rbp
	ret
	.size	q, .-q
	.size	p, .-p
	.section .note.GNU-stack,"",@progbits
ASM
cat > "$dir/main.c" <<'C'
#include <stdio.h>
int p(int);
int main(int argc, char **argv)
{
    (void)argv;
    int s = 0;
    for (int i = 0; i < 1000; i++)
        s += p(i + argc);
    printf("%d\n", s);
    return 0;
}
C
exe=$dir/inside
gcc -O1 -o "$exe" "$dir/main.c" "$dir/inside.s" || exit 99
want=$("$exe") || exit 99
for drv in none qp; do
    out=$exe.$drv
    if ! "$QPT_REWRITE" -v --driver=$drv "$exe" -o "$out" > "$out.log" 2>&1; then
        bad "$drv: the rewrite failed: $(tail -1 "$out.log")"
        continue
    fi
    got=$(QP_PROFILE="$out.qp" "$out" 2>&1)
    rc=$?
    [ $rc -eq 0 ] && [ "$got" = "$want" ] && ok "$drv: runs as the original" ||
        bad "$drv: exit $rc, printed '$got' (want '$want')"
    grep -q "left in place: p at .*runs past its code's end into" "$out.log" &&
        grep -q "left in place: q at .*its entry lies inside an instruction of the code at" "$out.log" &&
        ok "$drv: p and q left in place, each with its reason" ||
        bad "$drv: p and q not both left in place with their reasons (see $out.log)"
done
[ $fails -eq 0 ] || exit 1
echo "inside-insn: all checks passed"
exit 0
