#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# PLT stubs counted from the calls of measured code. A program that calls puts 1000
# times, abs 700 times and strlen 300 times (by a tail call; gcc -O2 -fno-builtin keeps
# every call), PIE and not, bound at start (-z now) and lazily (-z lazy), with the IBT
# PLT (.plt.sec, `endbr64; bnd jmp`) where the linker makes one: rewritten, run, and
# `qp report --csv` gives puts@plt exactly 1000 calls and 1000 x (1, or 2 in .plt.sec)
# instructions, and likewise abs@plt and strlen@plt; lazily bound stubs are marked '~';
# the total is the sum of the rows and says how many stubs it counts; the footnotes say
# how stubs are counted. Against valgrind (when installed): callgrind's Ir of the
# original program's own code (its object, and the code outside .text it files under
# ???: .init, the PLT sections, .fini) equals qp's total when bound at start, and
# exceeds it when bound lazily by a few instructions per symbol (the rest of the PLT
# entry and PLT0 on each symbol's first call).
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
QP=${QP:-$top_builddir/tools/qp}
dir=$top_builddir/tests/qp-plt.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
fails=0
qp_have gcc || { echo "SKIP: gcc not installed"; exit 77; }
export LC_ALL=C
unset QP_PROFILE LD_BIND_NOW

cat >"$dir/plt.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((noipa)) size_t len(const char *s)
{
    return strlen(s); /* a tail call: jmp strlen@plt */
}
int main(int argc, char **argv)
{
    long s = 0;
    fprintf(stderr, "%p\n", (void *)main); /* where it runs (for callgrind) */
    for (int i = 0; i < 1000; i++)
        puts("x");
    for (int i = 0; i < 700; i++)
        s += abs(i - 350 + argc);
    for (int i = 0; i < 300; i++)
        s += (long)len(argv[0] + (i & 1));
    return (int)(s & 1);
}
EOF

# The Ir callgrind gives the code of the program in FILE (-v prog=PATH): the functions
# of its object, and those it lists under ??? whose address is in one of RANGES (its
# executable segments, "vaddr:memsz ...", hex) moved by BASE (where a PIE was loaded).
cgsum='
function hex(s,    i, c, v) {
    sub(/^0[xX]/, "", s)
    v = 0
    for (i = 1; i <= length(s); i++) {
        c = index("0123456789abcdef", tolower(substr(s, i, 1)))
        if (c == 0)
            break
        v = v * 16 + c - 1
    }
    return v
}
BEGIN {
    n = split(ranges, r, " ")
    for (i = 1; i <= n; i++) { split(r[i], p, ":"); lo[i] = hex(p[1]) + base; hi[i] = lo[i] + hex(p[2]) }
}
/^ob=/ { ob = substr($0, 4); next }
/^fn=/ {
    mine = ob == prog
    if (ob == "???") {
        a = hex(substr($0, 4, 18))
        for (i = 1; i <= n; i++)
            if (a >= lo[i] && a < hi[i])
                mine = 1
    }
    next
}
/^(cob|cfi|cfl|cfn|fl|fi|fe)=/ { next }
/^calls=/ { skip = 1; next }
/^[0-9+-]/ { if (skip) { skip = 0; next } if (mine) s += $2 }
END { print s + 0 }'

# row CSV NAME CALLS INSNS FLAGS: the CSV has exactly that row
row() {
    if grep -qx "$2,$3,$4,$5" "$1"; then
        ok "$v: $2 $3 calls, $4 instructions, flags '$5'"
    else
        bad "$v: want '$2,$3,$4,$5', have '$(grep "^$2," "$1")'"
    fi
}

for variant in "pie-now:1:-fPIE -pie -Wl,-z,now" "pie-lazy:1:-fPIE -pie -Wl,-z,lazy" \
    "nopie-now:1:-fno-pie -no-pie -Wl,-z,now" "nopie-lazy:1:-fno-pie -no-pie -Wl,-z,lazy" \
    "ibt-now:2:-fPIE -pie -Wl,-z,ibtplt -Wl,-z,now" \
    "ibt-lazy:2:-fno-pie -no-pie -Wl,-z,ibtplt -Wl,-z,lazy"; do
    v=${variant%%:*} rest=${variant#*:}
    k=${rest%%:*} flags=${rest#*:}
    exe=$dir/$v
    # shellcheck disable=SC2086
    gcc -O2 -fno-builtin $flags -o "$exe" "$dir/plt.c" 2>"$exe.cc" || {
        echo "skip $v: cannot build ($(head -n 1 "$exe.cc"))"
        continue
    }
    if [ "$k" = 2 ] && ! readelf -SW "$exe" | grep -q ' \.plt\.sec '; then
        echo "skip $v: the linker made no .plt.sec"
        continue
    fi
    "$QPT_REWRITE" "$exe" -o "$exe.inst" >"$exe.log" 2>&1 || { bad "$v: rewrite: $(tail -n 1 "$exe.log")"; continue; }
    "$exe" >"$exe.out" 2>/dev/null
    "$exe.inst" >"$exe.inst.out" 2>/dev/null
    cmp -s "$exe.out" "$exe.inst.out" || bad "$v: the rewritten program's output differs"
    "$QP" report --csv "$exe.inst.qp" >"$exe.csv" 2>"$exe.err" || { bad "$v: qp report --csv: $(cat "$exe.err")"; continue; }
    "$QP" report "$exe.inst.qp" >"$exe.flat" 2>&1 || bad "$v: qp report failed"
    f='^'
    case $v in *-lazy) f='^~' ;; esac
    row "$exe.csv" puts@plt 1000 $((1000 * k)) "$f"
    row "$exe.csv" abs@plt 700 $((700 * k)) "$f"
    row "$exe.csv" strlen@plt 300 $((300 * k)) "$f"
    total=$(sed -n 's/^total: \([0-9]*\) instructions.*/\1/p' "$exe.flat")
    sum=$(awk -F, 'NR > 1 { s += $3 } END { print s + 0 }' "$exe.csv")
    nstubs=$(grep -c '^[^,]*,[0-9]*,[0-9]*,^' "$exe.csv")
    [ -n "$total" ] && [ "$total" = "$sum" ] && ok "$v: total $total = the rows' sum" ||
        bad "$v: total '$total', rows $sum"
    grep -Eq "^total: [0-9]+ instructions executed in [0-9]+ measured procedures and $nstubs PLT stubs; " "$exe.flat" &&
        ok "$v: the total counts $nstubs PLT stubs" || bad "$v: $(grep '^total:' "$exe.flat")"
    grep -Eq '^ +[0-9.]+ +[0-9]+ +1000  puts@plt \^' "$exe.flat" && ok "$v: flat profile row" ||
        bad "$v: flat row: $(grep puts "$exe.flat")"
    grep -q '^\^  PLT stubs: counted from the calls that measured code made to them.*calls from code not measured are not seen' "$exe.flat" &&
        ok "$v: footnote" || bad "$v: no PLT footnote"
    lazy=$(grep -c '^~  on a PLT stub: its module binds symbols lazily' "$exe.flat")
    case $v in
    *-lazy) [ "$lazy" = 1 ] && ok "$v: lazy binding said" || bad "$v: no lazy footnote" ;;
    *) [ "$lazy" = 0 ] && ok "$v: no lazy footnote" || bad "$v: a lazy footnote" ;;
    esac

    # valgrind: the same run's instructions in the original program's own code.
    qp_have valgrind || continue
    valgrind --tool=callgrind --callgrind-out-file="$exe.cg" --compress-pos=no \
        --compress-strings=no "$exe" >/dev/null 2>"$exe.vg" || { bad "$v: valgrind failed"; continue; }
    at=$(grep -m 1 '^0x' "$exe.vg")
    link=$(nm "$exe" | awk '$3 == "main" { print $1 }')
    [ -n "$at" ] && [ -n "$link" ] || { bad "$v: where main runs: '$at', '$link'"; continue; }
    base=$((at - 0x$link))
    ranges=$(readelf -lW "$exe" | awk '$1 == "LOAD" && / R.E / { printf "%s:%s ", $3, $6 }')
    cg=$(awk -v prog="$(cd "$dir" && pwd)/$v" -v ranges="$ranges" -v base="$base" "$cgsum" "$exe.cg")
    # Lazily bound symbols the program called (the rows marked ~ that ran).
    nlazy=$(grep -c '^[^,]*,[1-9][0-9]*,[0-9]*,^~' "$exe.csv")
    diff=$((cg - total))
    case $v in
    *-lazy)
        [ "$diff" -gt 0 ] && [ "$diff" -le $((8 * nlazy)) ] &&
            ok "$v: callgrind $cg, qp $total: $diff more for $nlazy lazily bound symbols" ||
            bad "$v: callgrind $cg, qp $total ($nlazy lazily bound symbols)" ;;
    *)
        [ "$diff" = 0 ] && ok "$v: callgrind $cg = qp $total" ||
            bad "$v: callgrind $cg, qp $total" ;;
    esac
done

[ "$fails" -eq 0 ]
