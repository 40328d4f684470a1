#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# New code in the old text (issue 14's output sizes): by default qpt-rewrite puts the
# new code into the bytes of moved procedures that nothing reaches any more, seen
# through a second PT_LOAD that maps the old text's file bytes again; --keep-old-text
# and tracing leave those bytes alone. For a program with jump tables and function
# pointers, at -O0 and -O2:
#  - both rewrites (qp) print what the original prints and exit as it does;
#  - the default output is the smaller one, has a PT_LOAD at a new address over the
#    file offset of the old text's, and says with -v how many bytes it reused;
#  - --keep-old-text's output has no such segment, nor has a --driver=trace output;
#  - qp report --annotate of each procedure lists the same instructions from either
#    output (the original ones, rebuilt from the relocated copies when overwritten);
#  - the new unwind tables go over the old ones when they fit (not in static programs),
#    and backtrace() still walks through moved code;
#  - a hot procedure reached through data whose cold part jumps into its middle is not
#    taken for that cold part's fragment (its head would stay and run into new code);
#  - a procedure with a jump table cut where other data starts keeps its old bytes.
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
QP=${QP:-$top_builddir/tools/qp}
dir=$top_builddir/tests/reuse.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
qp_have gcc || exit 77

# The file offsets of the executable PT_LOADs of FILE, one per line with its address.
x_loads() {
    readelf -lW "$1" | awk '$1 == "LOAD" && / R E / { print $2, $3 }'
}

# A program with enough code to reuse (at least 8 KB: below that a second segment is
# not worth it): 300 procedures of many sizes with a switch each, called through a table
# of pointers.
{
    echo '#include <stdio.h>'
    i=0
    while [ $i -lt 300 ]; do
        # sizes from 1 to 8 steps: procedures of many sizes, so that some fit into others
        echo "__attribute__((noinline)) unsigned f$i(unsigned x) {"
        k=0
        while [ $k -le $((i % 8)) ]; do
            echo "    if (x & $((1 << k))) x = x * $((k * 2 + 3)) + $i; else x ^= x >> $((k + 1));"
            k=$((k + 1))
        done
        echo "    switch (x % 9) {"
        echo "case 0: return x * $i + 1; case 1: return x ^ $((i * 7)); case 2: return x / 3 + $i;"
        echo "case 3: return x << 2; case 4: return x - $i; case 5: return (x >> 1) + $((i * 3));"
        echo "case 6: return x * x; case 7: return x + x / 7; default: return x | $i; } }"
        i=$((i + 1))
    done
    echo 'static unsigned (*const table[])(unsigned) = {'
    i=0
    while [ $i -lt 300 ]; do echo "f$i,"; i=$((i + 1)); done
    echo '};'
    echo 'int main(int argc, char **argv) { unsigned acc = (unsigned)argc;'
    echo '    (void)argv; for (unsigned k = 0; k < 3000; k++) acc = table[(acc + k) % 300](acc + k);'
    printf '%s\n' '    printf("%u\n", acc); return (int)(acc & 3); }'
} >"$dir/many.c"

for opt in -O0 -O2; do
    exe=$dir/many$opt
    gcc $opt -o "$exe" "$dir/many.c" || exit 99
    "$exe" >"$exe.want" 2>&1
    want_st=$?
    "$QPT_REWRITE" -v "$exe" -o "$exe.qp" >"$exe.log" 2>&1 || { bad "$opt: rewrite: $(tail -n 1 "$exe.log")"; continue; }
    "$QPT_REWRITE" --keep-old-text "$exe" -o "$exe.keep" >/dev/null 2>&1 || { bad "$opt: --keep-old-text rewrite failed"; continue; }
    QP_PROFILE=$exe.qp.qp "$exe.qp" >"$exe.got" 2>&1
    st=$?
    QP_PROFILE=$exe.keep.qp "$exe.keep" >"$exe.got2" 2>&1
    st2=$?
    if [ $st -eq $want_st ] && [ $st2 -eq $want_st ] && cmp -s "$exe.want" "$exe.got" && cmp -s "$exe.want" "$exe.got2"; then
        ok "$opt: both rewrites print what the original prints"
    else
        bad "$opt: outputs differ (exit $st, $st2, want $want_st)"
    fi
    small=$(stat -c %s "$exe.qp") big=$(stat -c %s "$exe.keep")
    [ "$small" -lt "$big" ] && ok "$opt: the default output is smaller ($small < $big bytes)" ||
        bad "$opt: default output $small bytes, --keep-old-text $big"
    grep -q 'old text reused: [1-9][0-9]* bytes of new code' "$exe.log" &&
        ok "$opt: -v says how much of the old text was reused" || bad "$opt: no 'old text reused' line"
    # The mirror: an executable PT_LOAD whose file offset is the old text's, at another address.
    x_loads "$exe" >"$dir/old"
    x_loads "$exe.qp" >"$dir/new"
    mirror=$(awk 'NR == FNR { off[$1] = $2; next } ($1 in off) && off[$1] != $2' "$dir/old" "$dir/new")
    [ -n "$mirror" ] && ok "$opt: a second PT_LOAD maps the old text ($mirror)" || bad "$opt: no mirror segment"
    x_loads "$exe.keep" >"$dir/keep"
    mirror=$(awk 'NR == FNR { off[$1] = $2; next } ($1 in off) && off[$1] != $2' "$dir/old" "$dir/keep")
    [ -z "$mirror" ] && ok "$opt: --keep-old-text maps the old text once" || bad "$opt: --keep-old-text has a mirror: $mirror"
    # The same instructions listed from both outputs.
    for f in f0 f150 f299 main; do
        "$QP" report --annotate=$f "$exe.qp.qp" >"$dir/a1" 2>&1
        "$QP" report --annotate=$f "$exe.keep.qp" >"$dir/a2" 2>&1
        # Not vacuous: a listing of the procedure, with its instructions.
        if ! grep -q "^$f at 0x" "$dir/a1" || [ "$(grep -c ':  [0-9a-f][0-9a-f] ' "$dir/a1")" -lt 3 ]; then
            bad "$opt: annotate $f: no listing: $(head -n 1 "$dir/a1")"
        elif cmp -s "$dir/a1" "$dir/a2"; then
            ok "$opt: annotate $f lists the original instructions"
        else
            bad "$opt: annotate $f differs: $(diff "$dir/a1" "$dir/a2" | head -n 3 | tr '\n' ' ')"
        fi
    done
done

# A hot procedure that only a pointer in data reaches (no relocation holds it: the
# program is not position independent) and that only its cold part jumps into, in its
# middle, while another procedure jumps to the cold part too: the hot part is no
# fragment of the cold one (tied, its head stayed in place, unreached, and ran into new
# code placed over the rest: SIGSEGV). Stripped, so that no name tells them apart.
cat >"$dir/cycle.S" <<'EOF2'
/* A hot procedure reached only through a pointer in .data (no relocation: not position
 * independent) whose cold part is also entered by another procedure: the cold part is
 * jumped to from two procedures, the hot one only from its cold part, in its middle. */
        .section .text.unlikely,"ax",@progbits
        .type   cold, @function
cold:
        .cfi_startproc
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -16
        subl    $5, %ebx
        jmp     .Lback
        .cfi_endproc
        .size   cold, .-cold

        .text
        .p2align 4
        .type   hot, @function
hot:
        .cfi_startproc
        pushq   %rbx
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -16
        movl    %edi, %ebx
        addl    $7, %ebx
        imull   $3, %ebx, %ebx
        testl   $1, %ebx
        jne     cold
.Lback:
        leal    1(%rbx), %eax
        imull   $5, %eax, %eax
        xorl    $0x55, %eax
        leal    11(%rax,%rax,2), %eax
        imull   $7, %eax, %eax
        xorl    $0x1234, %eax
        leal    3(%rax,%rax,4), %eax
        imull   $9, %eax, %eax
        xorl    $0x4321, %eax
        leal    17(%rax,%rax,8), %eax
        imull   $13, %eax, %eax
        xorl    $0x777, %eax
        popq    %rbx
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc
        .size   hot, .-hot

        .p2align 4
        .globl  other
        .type   other, @function
other:
        .cfi_startproc
        pushq   %rbx
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -16
        movl    %edi, %ebx
        jmp     cold
        .cfi_endproc
        .size   other, .-other

        .data
        .p2align 3
        .globl  hook_ops
hook_ops:
        .quad   hot
        .section .note.GNU-stack,"",@progbits
EOF2
cat >"$dir/cyc.c" <<'EOF2'
#include <stdio.h>
extern int other(int);
extern int (*hook_ops)(int);
int many_main(int, char **);
int main(int argc, char **argv) {
    many_main(argc, argv);
    (void)argv;
    int (*volatile f)(int) = hook_ops;
    int a = f(argc + 1), b = f(argc + 2), c = other(argc + 10);
    printf("%d %d %d\n", a, b, c);
    return 0;
}
EOF2
if gcc -O2 -no-pie -Dmain=many_main -c "$dir/many.c" -o "$dir/many-nopie.o" &&
    gcc -O2 -no-pie -o "$dir/cyc" "$dir/cyc.c" "$dir/cycle.S" "$dir/many-nopie.o" && strip "$dir/cyc"; then
    want=$("$dir/cyc")
    for drv in none qp; do
        "$QPT_REWRITE" -v --driver=$drv "$dir/cyc" -o "$dir/cyc.$drv" >"$dir/cyc.$drv.log" 2>&1 ||
            { bad "cycle $drv: rewrite: $(tail -n 1 "$dir/cyc.$drv.log")"; continue; }
        # Not vacuous: new code went into the old text.
        grep -q 'old text reused: [1-9]' "$dir/cyc.$drv.log" || bad "cycle $drv: no old text reused"
        got=$(QP_PROFILE=$dir/cyc.$drv.qp "$dir/cyc.$drv" 2>&1)
        [ "$got" = "$want" ] && ok "cycle $drv: the hot part reached through data runs as it did" ||
            bad "cycle $drv: prints '$got', the original '$want'"
    done
    "$QPT_REWRITE" --dump-cfg=text "$dir/cyc" | grep -q 'fragment-of' &&
        bad "cycle: a procedure was tied as a fragment: $("$QPT_REWRITE" --dump-cfg=text "$dir/cyc" | grep fragment-of)" ||
        ok "cycle: neither procedure is tied to the other"
else
    exit 99
fi

# A procedure with a scanned jump table cut where other data starts keeps its old bytes:
# an index past the cut would read a word that is no redirect and run the old code
# (editor/ed_reuse.c). tests/scantab/enums.c's `step` (two tables, the first one cut)
# linked with many.c's 300 procedures, so that the old text is reused: the bytes of
# `step` past its entry's redirect differ from the original's only by redirects (a
# 5-byte jmp at a table's target), never by new code placed over them.
# diff_not_redirects EXE OUT FUNC: the differing bytes of FUNC (past its first 5) that no
# `e9` within the 4 bytes before them in OUT explains.
diff_not_redirects() {
    set -- "$1" "$2" "$(nm -S "$1" | awk -v f="$3" '$4 == f { print $1, $2 }')"
    set -- "$1" "$2" ${3% *} ${3#* } "$(readelf -SW "$1" | awk '$2 == ".text" { print $4, $5 }')"
    off=$((0x$3 - 0x${5% *} + 0x${5#* } + 5)) n=$((0x$4 - 5))
    tail -c +$((off + 1)) "$2" | head -c $n | od -An -v -tx1 | tr -s ' ' '\n' | grep . >"$dir/out.hex"
    tail -c +$((off + 1)) "$1" | head -c $n | od -An -v -tx1 | tr -s ' ' '\n' | grep . >"$dir/in.hex"
    paste "$dir/in.hex" "$dir/out.hex" | awk '{ last = ($2 == "e9") ? NR : last }
        $1 != $2 && !(last && NR - last < 5) { n++ } END { print n + 0 }'
}
for cc in gcc clang; do
    qp_have "$cc" || continue
    exe=$dir/cut.$cc
    printf '%s\n' 'int many_main(int, char **); int enums_main(int, char **);' \
        'int main(int argc, char **argv) { char *a[] = { argv[0], "5600", 0 };' \
        '    many_main(argc, argv); return enums_main(2, a); }' >"$dir/cut.c"
    $cc -O2 -fPIE -pie -Dmain=many_main -c "$dir/many.c" -o "$dir/many.$cc.o" 2>/dev/null &&
        $cc -O2 -fPIE -pie -Dmain=enums_main -c "$top_srcdir/tests/scantab/enums.c" -o "$dir/enums.$cc.o" 2>/dev/null &&
        $cc -O2 -fPIE -pie -o "$exe" "$dir/cut.c" "$dir/many.$cc.o" "$dir/enums.$cc.o" 2>/dev/null || exit 99
    want=$("$exe")
    "$QPT_REWRITE" -v "$exe" -o "$exe.qp" >"$exe.log" 2>&1 || { bad "cut $cc: rewrite: $(tail -n 1 "$exe.log")"; continue; }
    # Not vacuous: the old text is reused, and step's bytes changed (its redirects).
    grep -q 'old text reused: [1-9]' "$exe.log" || bad "cut $cc: no old text reused"
    cmp -s "$exe" "$exe.qp" && bad "cut $cc: the output is the input"
    got=$(QP_PROFILE=$exe.qp.qp "$exe.qp")
    [ "$got" = "$want" ] && ok "cut $cc: the rewrite prints what the original prints" || bad "cut $cc: prints '$got', the original '$want'"
    n=$(diff_not_redirects "$exe" "$exe.qp" step)
    [ "$n" = 0 ] && ok "cut $cc: step's old bytes stay, but for redirects" ||
        bad "cut $cc: $n bytes of step's old code overwritten by other than redirects"
done

# Tracing decodes the old code: never reused.
exe=$dir/many-O2
if "$QPT_REWRITE" --driver=trace "$exe" -o "$exe.tr" >/dev/null 2>&1; then
    x_loads "$exe.tr" >"$dir/tr"
    mirror=$(awk 'NR == FNR { off[$1] = $2; next } ($1 in off) && off[$1] != $2' "$dir/old" "$dir/tr")
    [ -z "$mirror" ] && ok "trace: the old text stays as it was" || bad "trace: a mirror segment: $mirror"
else
    bad "trace: rewrite failed"
fi

# The unwind tables over the old ones (a program with an interpreter and no LSDA to copy):
# .eh_frame and .eh_frame_hdr keep their addresses and PT_GNU_EH_FRAME its place, the
# output has no second table, and backtrace() (libgcc's unwinder, through
# PT_GNU_EH_FRAME) walks through moved code as far as in the original: the same
# functions, at the same depth. A static program keeps the old tables where crtbeginT's
# registry reads them (its records do not start at the section's start).
cat >"$dir/bt.c" <<'EOF2'
#include <execinfo.h>
#include <stdio.h>
__attribute__((noinline)) int down(int n) {
    if (n > 0) return down(n - 1) + 1;
    void *pc[64];
    return backtrace(pc, 64);
}
int main(void) { printf("%d frames\n", down(5)); return 0; }
EOF2
for link in -pie -static; do
    exe=$dir/bt$link
    gcc -O0 $link -o "$exe" "$dir/bt.c" 2>/dev/null || { [ $link = -static ] && continue; exit 99; }
    want=$("$exe")
    # Not vacuous: the original walks main, down's six frames and the C library's.
    case $want in *" frames") [ "${want%% *}" -ge 8 ] || bad "bt$link: the original says '$want'" ;;
        *) bad "bt$link: the original says '$want'" ;; esac
    for drv in none qp; do
        "$QPT_REWRITE" --driver=$drv "$exe" -o "$exe.$drv" >/dev/null 2>&1 || { bad "bt$link $drv: rewrite failed"; continue; }
        got=$(QP_PROFILE=$exe.$drv.qp "$exe.$drv")
        [ "$got" = "$want" ] && ok "bt$link $drv: backtrace() walks moved code ($got)" ||
            bad "bt$link $drv: backtrace() gives '$got', the original '$want'"
        sec() { readelf -SW "$1" | awk -v n="$2" '$2 == n { print $4 } $3 == n { print $5 }'; }
        if [ $link = -pie ]; then
            [ -n "$(sec "$exe" .eh_frame)" ] && [ -n "$(sec "$exe" .eh_frame_hdr)" ] &&
                [ "$(sec "$exe.$drv" .eh_frame)" = "$(sec "$exe" .eh_frame)" ] &&
                [ "$(sec "$exe.$drv" .eh_frame_hdr)" = "$(sec "$exe" .eh_frame_hdr)" ] &&
                ! readelf -SW "$exe.$drv" | grep -q qpt.old.eh_frame &&
                ok "bt$link $drv: the unwind tables went over the old ones" ||
                bad "bt$link $drv: the unwind tables did not go over the old ones"
        else
            readelf -SW "$exe.$drv" | grep -q qpt.old.eh_frame &&
                ok "bt$link $drv: the old tables stay (crtbeginT's registry)" ||
                bad "bt$link $drv: a static program's old unwind tables were overwritten"
        fi
    done
done

[ $fails -eq 0 ] || exit 1
echo "reuse: all checks passed"
exit 0
