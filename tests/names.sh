#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Names in reports of stripped and C++ programs (issue 15):
#  - a stripped program: `main` and `_start` named from the code (static and PIE);
#  - its symbols from a separate debug file: by build-id under --debug-dir, by
#    .gnu_debuglink next to it (a CRC that does not match is ignored), from MiniDebugInfo
#    (.gnu_debugdata, xz);
#  - C++: demangled in the flat profile and annotate, FUNC given demangled, with or
#    without the parameters, a template function without its return type, overloads
#    refused as ambiguous, --mangled; PLT stubs named in annotate.
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
QP=${QP:-$top_builddir/tools/qp}
dir=$top_builddir/tests/names.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
fails=0
for t in gcc g++ objcopy strip xz readelf; do
    qp_have $t || { echo "SKIP: $t not installed"; exit 77; }
done

cat >"$dir/p.c" <<'EOF'
#include <stdio.h>
static int __attribute__((noinline)) square(int x) { return x * x; }
int __attribute__((noinline)) sum_squares(int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += square(i);
    return s;
}
int main(int argc, char **argv) { (void)argv; printf("%d\n", sum_squares(argc * 10)); return 0; }
EOF

# rewrite_run NAME INPUT [OPTIONS]: rewrite, run with 2 arguments, the flat profile in NAME.csv
rewrite_run() {
    n=$1 in=$2
    shift 2
    rm -f "$dir/$n.inst.qp"
    if ! "$QPT_REWRITE" "$@" "$in" -o "$dir/$n.inst" >"$dir/$n.log" 2>&1; then
        bad "$n: rewrite failed: $(tail -n 1 "$dir/$n.log")"
        return 1
    fi
    out=$("$dir/$n.inst" a b)
    [ "$out" = 8555 ] || bad "$n: output '$out', expected 8555"
    "$QP" report --csv "$dir/$n.inst.qp" >"$dir/$n.csv" 2>"$dir/$n.err" ||
        bad "$n: qp report failed: $(cat "$dir/$n.err")"
}

# has NAME ROW: the CSV has the row (name,calls,instructions prefix)
has() {
    if grep -q "^$2" "$dir/$1.csv"; then ok "$1: $2"; else bad "$1: no row '$2' in $(tr '\n' ' ' <"$dir/$1.csv")"; fi
}

gcc -O1 -g -o "$dir/p" "$dir/p.c" || exit 99
strip -o "$dir/p.stripped" "$dir/p" || exit 99
gcc -O1 -static -o "$dir/ps" "$dir/p.c" 2>/dev/null && strip "$dir/ps" || rm -f "$dir/ps"

# 1. Stripped: main and _start from the code.
rewrite_run stripped "$dir/p.stripped" && has stripped "main,1," && has stripped "_start,1,"
if [ -f "$dir/ps" ]; then
    rewrite_run static "$dir/ps" && has static "main,1,"
fi

# 2. A debug file by build-id, in a debug root given with --debug-dir.
objcopy --only-keep-debug "$dir/p" "$dir/p.debug" || exit 99
id=$(readelf -n "$dir/p" | awk '/Build ID/ { print $3 }')
rest=${id#??}
mkdir -p "$dir/root/.build-id/${id%"$rest"}" || exit 99
cp "$dir/p.debug" "$dir/root/.build-id/${id%"$rest"}/$rest.debug" || exit 99
"$QPT_REWRITE" --dump-cfg --debug-dir="$dir/none:$dir/root" "$dir/p.stripped" >"$dir/dump" 2>&1
grep -q "^symbols from: $dir/root/.build-id/" "$dir/dump" && ok "build-id: found" ||
    bad "build-id: debug file not used: $(cat "$dir/dump")"
rewrite_run buildid "$dir/p.stripped" --debug-dir="$dir/none:$dir/root" &&
    has buildid "sum_squares,1,193" && has buildid "square,30,90"
# Without it: the default root has no such file.
"$QPT_REWRITE" --dump-cfg "$dir/p.stripped" | grep -q "^symbols from" &&
    bad "build-id: a debug file found outside --debug-dir"

# 3. .gnu_debuglink next to the program; a file that fails the CRC check is ignored.
mkdir -p "$dir/dl" || exit 99
cp "$dir/p.debug" "$dir/dl/q.dbg" && cp "$dir/p.stripped" "$dir/dl/q" || exit 99
(cd "$dir/dl" && objcopy --add-gnu-debuglink=q.dbg q) || exit 99
rewrite_run debuglink "$dir/dl/q" && has debuglink "sum_squares,1,193"
echo junk >>"$dir/dl/q.dbg"
"$QPT_REWRITE" --dump-cfg=text "$dir/dl/q" | grep -q "^proc sum_squares " &&
    bad "debuglink: a debug file with another CRC was used" || ok "debuglink: CRC checked"

# 4. MiniDebugInfo.
mkdir -p "$dir/mini" && cp "$dir/p.stripped" "$dir/mini/r" || exit 99
xz -c "$dir/p.debug" >"$dir/mini/d.xz" && objcopy --add-section .gnu_debugdata="$dir/mini/d.xz" "$dir/mini/r" || exit 99
rewrite_run mini "$dir/mini/r" && has mini "sum_squares,1,193"
# A corrupt one is ignored (no names, no error).
printf 'not xz at all' >"$dir/mini/bad.xz"
cp "$dir/p.stripped" "$dir/mini/r2" && objcopy --add-section .gnu_debugdata="$dir/mini/bad.xz" "$dir/mini/r2" || exit 99
rewrite_run mini-bad "$dir/mini/r2" && has mini-bad "main,1,"

# 5. C++: demangled names.
cat >"$dir/c.cc" <<'EOF'
#include <cstdio>
namespace geo {
struct V { int x; };
int __attribute__((noinline)) norm(const V &v) { return v.x * v.x; }
int __attribute__((noinline)) norm(int a, int b) { return a * a + b * b; }
}
int __attribute__((noinline)) never_called(int a) { return a * 3 + 1; }
template <typename T> T __attribute__((noinline)) twice(T t) { asm volatile(""); return t + t + t * t * t; }
int main(int argc, char **)
{
    int s = 0;
    for (int i = 0; i < 10; i++)
        s += geo::norm(geo::V{i}) + geo::norm(i, argc) + twice(i);
    std::printf("%d\n", s);
}
EOF
g++ -O1 -fno-inline -o "$dir/c" "$dir/c.cc" || exit 99
"$QPT_REWRITE" "$dir/c" -o "$dir/c.inst" >/dev/null 2>&1 || bad "c++: rewrite failed"
want=$("$dir/c")
[ "$("$dir/c.inst")" = "$want" ] || bad "c++: output differs"
"$QP" report "$dir/c.inst.qp" >"$dir/flat" 2>&1
grep -q ' geo::norm(int, int)$' "$dir/flat" && grep -q ' geo::norm(geo::V const&)$' "$dir/flat" &&
    ok "c++: demangled in the flat profile" || bad "c++: not demangled: $(cat "$dir/flat")"
"$QP" report --mangled "$dir/c.inst.qp" | grep -q ' _ZN3geo4normEii$' && ok "c++: --mangled" ||
    bad "c++: --mangled does not print the stored name"
"$QP" report --blocks='geo::norm(int, int)' "$dir/c.inst.qp" >"$dir/blk" 2>&1 &&
    grep -q '^geo::norm(int, int) at .*: 10 calls' "$dir/blk" && ok "c++: FUNC demangled" ||
    bad "c++: --blocks='geo::norm(int, int)': $(head -n 2 "$dir/blk")"
"$QP" report --blocks=_ZN3geo4normEii "$dir/c.inst.qp" >/dev/null 2>&1 && ok "c++: FUNC mangled" ||
    bad "c++: --blocks=_ZN3geo4normEii fails"
"$QP" report --blocks='twice<int>' "$dir/c.inst.qp" >"$dir/blk" 2>&1 &&
    grep -q ': 10 calls' "$dir/blk" && ok "c++: template without its return type" ||
    bad "c++: --blocks='twice<int>': $(head -n 2 "$dir/blk")"
"$QP" report --blocks='geo::norm' "$dir/c.inst.qp" >/dev/null 2>"$dir/err"
st=$?
[ $st -eq 1 ] && grep -q "names several procedures" "$dir/err" && ok "c++: overloads ambiguous" ||
    bad "c++: --blocks=geo::norm: exit $st, $(cat "$dir/err")"
"$QPT_REWRITE" --dump-cfg=text "$dir/c" | grep -q '^proc _ZN3geo4normEii .* demangled="geo::norm(int, int)"$' &&
    ok "c++: --dump-cfg=text adds the demangled name" || bad "c++: --dump-cfg=text without demangled names"
"$QPT_REWRITE" --dump-cfg=dot --proc 'geo::norm(int, int)' "$dir/c" | grep -q '^digraph "geo::norm(int, int)"' &&
    ok "c++: --dump-cfg=dot --proc with a demangled name" || bad "c++: --dump-cfg=dot --proc 'geo::norm(int, int)'"
"$QP" report --annotate=main "$dir/c.inst.qp" >"$dir/ann" 2>&1
grep -q 'call .*<geo::norm(int, int)>' "$dir/ann" && grep -q 'call .*<printf@plt>' "$dir/ann" &&
    ok "c++: annotate names callees and PLT stubs" || bad "c++: annotate: $(grep call "$dir/ann")"

# Static functions of two files with one name: rows told apart by file, FUNC as
# FILE:NAME, the bare name refused as ambiguous.
D=$top_srcdir/tests/qp/dup
if gcc -O1 -g -o "$dir/dup" "$D/a.c" "$D/b.c" "$D/main.c" &&
    "$QPT_REWRITE" "$dir/dup" -o "$dir/dup.inst" >/dev/null 2>&1 && "$dir/dup.inst" >/dev/null; then
    "$QP" report "$dir/dup.inst.qp" >"$dir/dup.flat" 2>&1
    grep -q ' helper \[a\.c\]$' "$dir/dup.flat" && grep -q ' helper \[b\.c\]$' "$dir/dup.flat" &&
        ok "static duplicates: rows name their file" || bad "static duplicates: $(grep helper "$dir/dup.flat")"
    "$QP" report --blocks=b.c:helper "$dir/dup.inst.qp" | grep -q '^helper \[b\.c\] at .*: 10 calls, 240 instructions$' &&
        ok "FILE:NAME" || bad "--blocks=b.c:helper: $("$QP" report --blocks=b.c:helper "$dir/dup.inst.qp" 2>&1 | head -n 1)"
    "$QP" report --blocks=helper "$dir/dup.inst.qp" >/dev/null 2>"$dir/err"
    [ $? -eq 1 ] && grep -q 'give the source file as FILE:NAME' "$dir/err" && ok "a shared name refused" ||
        bad "--blocks=helper: $(cat "$dir/err")"
else
    bad "the duplicate-name program could not be built or rewritten"
fi

# dyn: patterns match demangled names; the table prints them, rows never called are
# counted in one line unless --zeros.
DYN=$top_builddir/tools/dyn
if [ -x "$DYN" ] && "$DYN" run --count main -- true >/dev/null 2>&1; then
    "$DYN" run --count 'geo::norm(int, int)' --count 'geo::*V*' --count never_called \
        -- "$dir/c" >"$dir/dyn" 2>"$dir/dyn.err"
    grep -q '^ *10  geo::norm(int, int)$' "$dir/dyn" && grep -q '^ *10  geo::norm(geo::V const&)$' "$dir/dyn" &&
        ok "dyn: demangled patterns and names" || bad "dyn: $(cat "$dir/dyn" "$dir/dyn.err")"
    grep -q '(1 more never called: --zeros lists them)' "$dir/dyn" && ! grep -q never_called "$dir/dyn" &&
        ok "dyn: a row never called is hidden" || bad "dyn: zero row: $(cat "$dir/dyn")"
    "$DYN" run --zeros --count never_called -- "$dir/c" 2>/dev/null | grep -q '^ *0  never_called(int)$' &&
        ok "dyn: --zeros" || bad "dyn: --zeros does not list the row"
    "$DYN" run --debug-dir="$dir/root" --count sum_squares -- "$dir/p.stripped" a b 2>/dev/null |
        grep -q '^ *1  sum_squares$' && ok "dyn: a stripped program's debug file (--debug-dir)" ||
        bad "dyn --debug-dir: sum_squares not found"
    "$DYN" --help | grep -q -- '--trace=FILE.json' && "$DYN" --help | grep -q -- '--zeros' &&
        ok "dyn --help lists --trace and --zeros" || bad "dyn --help misses --trace or --zeros"
else
    echo "SKIP dyn checks: dyn cannot trace here"
fi

# The lazy-binding halves of PLT entries are named after their stub, the resolver's
# entry ".plt": no sub_ADDR in .plt (a lazily bound PIE, as gcc links by default).
gcc -O1 -fPIE -pie -Wl,-z,lazy -o "$dir/lazy" "$dir/p.c" 2>/dev/null &&
    "$top_builddir/tools/qpt-rewrite" --dump-cfg=text "$dir/lazy" >"$dir/lazy.cfg" 2>&1
if grep -q '^proc printf@plt.lazy ' "$dir/lazy.cfg" && grep -q '^proc \.plt ' "$dir/lazy.cfg" &&
    ! grep '^proc sub_' "$dir/lazy.cfg" | grep -q plt; then
    ok "PLT: lazy halves named printf@plt.lazy, the first entry .plt"
else
    bad "PLT lazy halves: $(grep -i 'plt\|sub_' "$dir/lazy.cfg" | head -5)"
fi

[ $fails -eq 0 ] || exit 1
echo "names: all checks passed"
exit 0
