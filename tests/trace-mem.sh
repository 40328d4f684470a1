#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Address tracing (issue 17, --trace-mem): tests/trace/mem.c (globals, stack, heap,
# structs, rep movs/stos, movs, %fs, SSE, locked read-modify-writes, calls through
# pointers, recursion, a switch table) at -O0/-O2, non-PIE and PIE (stack protector on),
# rewritten with --driver=trace --trace-mem and with --driver=trace-naive --trace-mem;
# and statically linked (-O2, -O0): lackey on the program's own code (static_own below).
# Truth: `qp trace mem` (and `qp trace insns`, the instructions run) equals valgrind --tool=lackey --trace-mem=yes of the original
# program, access for access, for the program's own code (the instructions of
# `qp trace text`); the rewritten program runs under valgrind --tool=none so that its
# stack and heap lie where lackey's run had them (program and folder names of one
# length: the same environment ($PWD) and arguments, hence the same stack). tests/trace/lackey-compare.py states the three differences it allows.
# Both tracers regenerate the same address trace. qp trace cachesim agrees with
# cachegrind (see below). Bad input is refused.
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

# A static program (tests/trace/mem.c linked with -static): the C library is inside it
# and traced too, but its startup and exit run differently in the rewritten file - the
# program headers moved (more of them: loops over them run longer, at other addresses),
# _dl_find_object mallocs 32 bytes more per added PT_LOAD segment (the brk heap starts
# that much higher), __libc_start_main registers the runtime's exit function with atexit.
# So lackey is compared on the program's own code: the functions a dynamic link of the
# same program has (tests/trace/own-code.py) - its objects and the start files - into
# $D/text (replacing qp trace text's), with its heap addresses $heapshift bytes higher.
loads() {
    readelf -lW "$1" | grep -c '^ *LOAD '
}
# static_own D CCFLAGS...
static_own() {
    sd=$1
    shift
    flags=$(echo "$*" | sed 's/ *-static//')
    gcc $flags -o "$sd/dyn" "$T/mem.c" >>"$sd/cc.log" 2>&1 ||
        { bad "$tag: the dynamic build does not build"; return 1; }
    python3 "$T/own-code.py" "$sd/dyn" "$sd/prog" >"$sd/text" 2>"$sd/own.err" ||
        { bad "$tag: own code: $(head -n 1 "$sd/own.err")"; return 1; }
    heapshift=$((32 * ($(loads "$sd/t/p") - $(loads "$sd/prog"))))
    [ "$heapshift" -gt 0 ] || { bad "$tag: the rewritten file has no more PT_LOAD segments?"; return 1; }
}

# marks_ok TAG MEM: no mark in the address trace; a static program's ends with one:
# its last block (exit's `call _exit`) runs after the final flush, so its values are
# not in the trace.
marks_ok() {
    if [ -n "$static" ]; then
        [ "$(grep -c '^#' "$2")" -eq 1 ] && tail -n 1 "$2" | grep -q '^# cut: the address values end here' ||
            bad "$1: a static program's address trace must end with one mark: $(grep '^#' "$2" | head -n 2 | tr '\n' ' ')"
    else
        grep -q '^#' "$2" && bad "$1: marks in the address trace: $(grep '^#' "$2" | head -n 1)"
    fi
}

for v in "O0 -O0 -fno-pie -no-pie" "O2 -O2 -fno-pie -no-pie -fstack-protector-all" \
    "pie -O2 -fPIE -pie -fstack-protector-all" "static -O2 -static -fstack-protector-all" \
    "static0 -O0 -static"; do
    set -- $v
    tag=$1
    shift
    d=$dir/$tag
    case $tag in static*) static=1 ;; *) static= ;; esac
    mkdir -p "$d/o" "$d/t" "$d/n" || exit 99
    gcc "$@" -o "$d/prog" "$T/mem.c" >"$d/cc.log" 2>&1 || { bad "$tag: does not build"; continue; }
    cp "$d/prog" "$d/o/p"
    "$QPT_REWRITE" --driver=trace --trace-mem "$d/prog" -o "$d/t/p" >"$d/rw.log" 2>&1 ||
        { bad "$tag: rewrite failed: $(tail -n 1 "$d/rw.log")"; continue; }
    "$QPT_REWRITE" --driver=trace-naive --trace-mem "$d/prog" -o "$d/n/p" >"$d/rwn.log" 2>&1 ||
        { bad "$tag: naive rewrite failed: $(tail -n 1 "$d/rwn.log")"; continue; }
    (cd "$d/o" && valgrind --tool=lackey --trace-mem=yes --log-file=lackey ./p >out 2>&1)
    for k in t n; do
        (cd "$d/$k" && valgrind --tool=none -q ./p >out 2>&1)
        cmp -s "$d/o/out" "$d/$k/out" || { bad "$tag ($k): output differs"; continue 2; }
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
    heap=
    if [ -n "$static" ]; then
        static_own "$d" "$@" || continue
        heap=--heap-shift=$(printf %x "$heapshift")
        : >"$d/exit"
    fi
    if $CMP $heap "$d/text" "$bias" "$d/o/lackey" "$d/t/mem" "$d/exit" >"$d/cmp" 2>&1; then
        ok "$tag: equals lackey: $(cat "$d/cmp")"
    else
        bad "$tag: differs from lackey: $(head -n 2 "$d/cmp" | tr '\n' ' ')"
    fi
    marks_ok "$tag" "$d/t/mem"
    # qp trace insns: the instructions run, against lackey's "I" lines
    if "$QP" trace insns "$d/t/p" >"$d/t/insns" 2>"$d/t/ierr" &&
        python3 "$T/lackey-insns.py" "$d/text" "$bias" "$d/o/lackey" "$d/t/insns" >"$d/icmp" 2>&1; then
        ok "$tag: qp trace insns equals lackey: $(cat "$d/icmp")"
    else
        bad "$tag: qp trace insns differs from lackey: $(head -n 1 "$d/icmp" "$d/t/ierr" | tr '\n' ' ')"
    fi
done

# qp trace cachesim against cachegrind configured alike (D1 32k:8:64, LL 8m:16:64) on
# tests/trace/cache.c (all in main, -O2): the references of main equal cachegrind's for
# main (ours less the accesses of the program's other code: _start, the destructors),
# and the misses differ by at most those few accesses (their cold misses; cachegrind's
# state also holds the C library's lines, ours does not).
d=$dir/cache
mkdir -p "$d/o" "$d/t" || exit 99
if gcc -O2 -fno-pie -no-pie -o "$d/prog" "$T/cache.c" >"$d/cc.log" 2>&1 &&
    "$QPT_REWRITE" --driver=trace --trace-mem "$d/prog" -o "$d/t/p" >"$d/rw.log" 2>&1; then
    cp "$d/prog" "$d/o/p"
    (cd "$d/o" && valgrind --tool=cachegrind --cache-sim=yes --I1=32768,8,64 --D1=32768,8,64 \
        --LL=8388608,16,64 --cachegrind-out-file=cg.out ./p >out 2>cg.log)
    (cd "$d/t" && valgrind --tool=none -q ./p >out 2>&1)
    "$QP" trace cachesim --l1 32k:8:64 --ll 8m:16:64 "$d/t/p" >"$d/sim" 2>&1 ||
        bad "cachesim: $(head -n 1 "$d/sim")"
    cg=$(python3 "$T/cg-sum.py" "$d/o/cg.out" main)
    main=$(nm "$d/prog" | awk '$3 == "main" {print $1}')
    "$QP" trace mem "$d/t/p" >"$d/mem"
    if python3 - "$d/sim" "$cg" "$d/mem" "$main" "$d/prog" >"$d/cmp" 2>&1 <<'PY2'
import re, subprocess, sys
sim = open(sys.argv[1]).read()
cg = dict(kv.split('=') for kv in sys.argv[2].split())
cg = {k: int(v) for k, v in cg.items()}
refs = re.search(r'D   refs: \d+ \((\d+) reads, (\d+) writes', sim)
d1 = re.search(r'D1  misses: \d+ \((\d+) reads, (\d+) writes', sim)
ll = re.search(r'LLd misses: \d+ \((\d+) reads, (\d+) writes', sim)
# main's extent: from its symbol to the next one
syms = sorted(int(l.split()[0], 16) for l in subprocess.run(['nm', sys.argv[5]], capture_output=True,
              text=True).stdout.splitlines() if len(l.split()) == 3 and l.split()[1] in 'tT')
lo = int(sys.argv[4], 16)
hi = min(a for a in syms if a > lo)
outr = outw = 0
for l in open(sys.argv[3]):
    f = l.split()
    if f and not f[0].startswith('#') and not lo <= int(f[3], 16) < hi:
        outr += f[0] != 'S'
        outw += f[0] == 'S'
ok = (int(refs[1]) - outr == cg['Dr'] and int(refs[2]) - outw == cg['Dw']
      and 0 <= int(d1[1]) - cg['D1mr'] <= outr and 0 <= int(d1[2]) - cg['D1mw'] <= outw
      and 0 <= int(ll[1]) - cg['DLmr'] <= outr and 0 <= int(ll[2]) - cg['DLmw'] <= outw)
print('main: %d reads, %d writes as cachegrind; D1 misses %s+%s (cachegrind %d+%d), LL %s+%s '
      '(cachegrind %d+%d); %d+%d accesses outside main' % (int(refs[1]) - outr, int(refs[2]) - outw,
      d1[1], d1[2], cg['D1mr'], cg['D1mw'], ll[1], ll[2], cg['DLmr'], cg['DLmw'], outr, outw))
sys.exit(0 if ok else 1)
PY2
    then
        ok "cachesim: $(cat "$d/cmp")"
    else
        bad "cachesim differs from cachegrind: $(tr '\n' ' ' <"$d/cmp")"
    fi
else
    bad "cache: not built or rewritten"
fi

# Buffers that end at every phase (tests/trace/bufends.c: some forty 1 MB buffers of
# events and value records): both tracers regenerate the same 3,500,019 blocks and
# accesses, nothing marked. A buffer whose last value record lay just below its limit,
# followed by another, was dropped whole and silently (the cursor then lay past its end).
d=$dir/bufends
mkdir -p "$d"
if gcc -O2 -o "$d/prog" "$T/bufends.c" >"$d/cc.log" 2>&1; then
    "$d/prog" >"$d/out"
    for k in n t; do
        drv=trace
        [ $k = n ] && drv=trace-naive
        mkdir -p "$d/$k"
        "$QPT_REWRITE" --driver=$drv --trace-mem "$d/prog" -o "$d/$k/p" >/dev/null 2>&1 ||
            { bad "bufends ($k): rewrite failed"; continue; }
        (cd "$d/$k" && ./p >out)
        cmp -s "$d/out" "$d/$k/out" || bad "bufends ($k): output differs"
        "$QP" trace stats "$d/$k/p" >"$d/$k/stats" 2>&1 || bad "bufends ($k): qp trace stats: $(head -n 1 "$d/$k/stats")"
        sed -n 's/.* \([0-9][0-9]* blocks\), .* \([0-9][0-9]* marks\), \(blocks hash [0-9a-f]*\).*/\1 \2 \3/p; s/.*: \([0-9]* data accesses, [0-9]* address values\).*/\1/p' \
            "$d/$k/stats" >"$d/$k/sum"
        rm -f "$d/$k"/p.trace.*
    done
    if cmp -s "$d/n/sum" "$d/t/sum" && grep -q '^3500019 blocks 0 marks' "$d/t/sum"; then
        ok "bufends: both tracers: $(tr '\n' ' ' <"$d/t/sum")"
    else
        bad "bufends: naive $(tr '\n' ' ' <"$d/n/sum"), chords $(tr '\n' ' ' <"$d/t/sum")"
    fi
else
    bad "bufends: does not build"
fi

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
