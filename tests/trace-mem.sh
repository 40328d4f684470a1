#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Address tracing (issue 17, --trace-mem): tests/trace/mem.c (globals, stack, heap,
# structs, rep movs/stos, movs, %fs, SSE, locked read-modify-writes, calls through
# pointers, recursion, a switch table) at -O0/-O2, non-PIE and PIE (stack protector on),
# rewritten with --driver=trace --trace-mem and with --driver=trace-naive --trace-mem.
# Truth: `qp trace mem` equals valgrind --tool=lackey --trace-mem=yes of the original
# program, access for access, for the program's own code (the instructions of
# `qp trace text`); the rewritten program runs under valgrind --tool=none so that its
# stack and heap lie where lackey's run had them (the same path length, hence the same
# stack contents). tests/trace/lackey-compare.py states the three differences it allows.
# Both tracers regenerate the same address trace. Bad input is refused.
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
QP=${QP:-$top_builddir/tools/qp}
qp_have valgrind || { echo "SKIP: no valgrind"; exit 77; }
qp_have python3 || { echo "SKIP: no python3"; exit 77; }
dir=$top_builddir/tests/trace-mem.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
dir=$(cd "$dir" && pwd)
fails=0
T=$top_srcdir/tests/trace
CMP="python3 $T/lackey-compare.py"

for v in "O0 -O0 -fno-pie -no-pie" "O2 -O2 -fno-pie -no-pie -fstack-protector-all" \
    "pie -O2 -fPIE -pie -fstack-protector-all"; do
    set -- $v
    tag=$1
    shift
    d=$dir/$tag
    mkdir -p "$d/orig" "$d/t" "$d/n" || exit 99
    gcc "$@" -o "$d/prog" "$T/mem.c" >"$d/cc.log" 2>&1 || { bad "$tag: does not build"; continue; }
    cp "$d/prog" "$d/orig/p"
    "$QPT_REWRITE" --driver=trace --trace-mem "$d/prog" -o "$d/t/p" >"$d/rw.log" 2>&1 ||
        { bad "$tag: rewrite failed: $(tail -n 1 "$d/rw.log")"; continue; }
    "$QPT_REWRITE" --driver=trace-naive --trace-mem "$d/prog" -o "$d/n/p" >"$d/rwn.log" 2>&1 ||
        { bad "$tag: naive rewrite failed: $(tail -n 1 "$d/rwn.log")"; continue; }
    (cd "$d/orig" && valgrind --tool=lackey --trace-mem=yes --log-file=lackey ./p >out 2>&1)
    for k in t n; do
        (cd "$d/$k" && valgrind --tool=none -q ./p >out 2>&1)
        cmp -s "$d/orig/out" "$d/$k/out" || { bad "$tag ($k): output differs"; continue 2; }
        "$QP" trace mem "$d/$k/p" >"$d/$k/mem" 2>"$d/$k/err" ||
            { bad "$tag ($k): qp trace mem: $(head -n 1 "$d/$k/err")"; continue 2; }
    done
    cmp -s "$d/t/mem" "$d/n/mem" && ok "$tag: both tracers: the same $(grep -vc '^#' "$d/t/mem") accesses" ||
        bad "$tag: the chord and naive address traces differ: $(diff "$d/n/mem" "$d/t/mem" | head -n 3 | tr '\n' ' ')"
    "$QP" trace text "$d/t/p" >"$d/text"
    bias=$("$QP" trace stats "$d/t/p" | sed -n 's/.*load bias //p')
    # code run at exit by the dynamic linker's fini (destructors): one frame deeper
    nm -n "$d/prog" | awk '/ (__do_global_dtors_aux|deregister_tm_clones|_fini)$/ {
        s = $1; if ((getline) > 0) printf "0x%s 0x%s\n", s, $1 }' >"$d/exit"
    if $CMP "$d/text" "$bias" "$d/orig/lackey" "$d/t/mem" "$d/exit" >"$d/cmp" 2>&1; then
        ok "$tag: equals lackey: $(cat "$d/cmp")"
    else
        bad "$tag: differs from lackey: $(head -n 2 "$d/cmp" | tr '\n' ' ')"
    fi
    grep -q '^#' "$d/t/mem" && bad "$tag: marks in the address trace: $(grep '^#' "$d/t/mem" | head -n 1)"
done

# Bad input: --trace-mem without a tracer; qp trace mem of a trace without addresses.
"$QPT_REWRITE" --driver=qp --trace-mem "$dir/O0/prog" -o "$dir/x" >/dev/null 2>"$dir/err1" &&
    bad "--trace-mem accepted with --driver=qp" ||
    { grep -q 'needs --driver=trace' "$dir/err1" && ok "--trace-mem without a tracer: refused" ||
        bad "--trace-mem with --driver=qp: $(cat "$dir/err1")"; }
if "$QPT_REWRITE" --driver=trace "$dir/O0/prog" -o "$dir/plain" >/dev/null 2>&1; then
    "$QP" trace mem "$dir/plain" >/dev/null 2>"$dir/err2" &&
        bad "qp trace mem accepts a program rewritten without --trace-mem" ||
        { grep -q 'not rewritten with --trace-mem' "$dir/err2" && ok "no address description: refused" ||
            bad "no address description: $(cat "$dir/err2")"; }
fi
# A value record cut short: refused.
{ printf 'QPTTRFL1'; head -c 24 /dev/zero; printf '\360\377\377\377\001\000\000\000'; } >"$dir/bad.trace"
"$QP" trace mem "$dir/O0/t/p" "$dir/bad.trace" >/dev/null 2>"$dir/err3" &&
    bad "a trace with a value record cut short accepted" ||
    { grep -q 'cut short' "$dir/err3" && ok "a value record cut short: refused" ||
        bad "a value record cut short: $(cat "$dir/err3")"; }

[ $fails -eq 0 ] || exit 1
exit 0
