#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# A rewritten shared library's calls of its own exported functions reach the new code
# directly (editor/elfw_gotfix.c): tests/selfplt/lib.c's g calls its exported f through
# the library's own PLT in a loop. The library, built -shared -fPIC -Wl,-z,now, is
# rewritten with none, qp and naive and loaded by tests/selfplt/main.c (not rewritten):
#   - the output equals the original's, and -v says one JUMP_SLOT word is pointed at the
#     new code;
#   - none: the loop's instructions (a run of 3000 iterations minus one of 1000) equal
#     the original's: the redirect at f's old entry no longer runs (valgrind's lackey on
#     x86-64; qemu-aarch64's -d in_asm,exec,nochain on AArch64, cross-built);
#   - an LD_PRELOAD library defining f still wins over the rewritten library's f;
#   - built without DT_INIT (-nostartfiles): a spare dynamic entry becomes the start's;
#   - bound lazily (-Wl,-z,lazy): nothing is done (-v says why), the runs are correct.
# Each ISA's part is skipped without its tools. Exit status: 0 pass, 1 fail, 77 skip.
. "${top_srcdir:-.}/tests/lib.sh"
src=$top_srcdir/tests/selfplt
dir=$top_builddir/tests/selfplt.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
fails=0
ran=0
export LC_ALL=C
unset QP_PROFILE

# x86-64: instructions of a whole run under lackey
icount_x86() { # DIR N
    valgrind --tool=lackey --basic-counts=yes "$1/main" "$2" 2>&1 >/dev/null |
        awk '/guest instrs:/ { gsub(/,/, "", $NF); print $NF }'
}
# AArch64: instructions of a whole run under qemu
icount_a64() { # DIR N
    qemu-aarch64 -L /usr/aarch64-linux-gnu -d in_asm,exec,nochain -D "$1/q.log" \
        "$1/main" "$2" >/dev/null 2>&1 && python3 "$top_srcdir/tests/qemu-icount.py" "$1/q.log"
    rm -f "$1/q.log"
}
# run ISA DIR ARGS: the program's output (qemu for AArch64)
run() {
    if [ "$1" = a64 ]; then
        _d=$2
        shift 2
        qemu-aarch64 -L /usr/aarch64-linux-gnu ${PRE:+-E LD_PRELOAD=$PRE} "$_d/main" "$@"
    else
        _d=$2
        shift 2
        LD_PRELOAD=${PRE:-} "$_d/main" "$@"
    fi
}

# check ISA CC COUNTER: build, rewrite, compare, count
check() {
    isa=$1 cc=$2 counter=$3
    d=$dir/$isa
    mkdir -p "$d/orig" "$d/lazy" || return
    for v in now lazy; do
        o=$d/orig
        [ $v = lazy ] && o=$d/lazy
        $cc -O2 -shared -fPIC -Wl,-z,$v -o "$o/libself.so" "$src/lib.c" &&
            $cc -O2 -o "$o/main" "$src/main.c" -L"$o" -lself -Wl,-rpath,'$ORIGIN' ||
            { bad "$isa: build ($v)"; return; }
    done
    $cc -O2 -shared -fPIC -o "$d/libpre.so" "$src/pre.c" || { bad "$isa: build pre.c"; return; }
    run "$isa" "$d/orig" 1000 > "$d/want" 2>&1
    PRE=$d/libpre.so run "$isa" "$d/orig" 5 > "$d/want.pre" 2>&1
    grep -q "g(5) = 5000010" "$d/want.pre" || { bad "$isa: LD_PRELOAD's f not taken by the original"; return; }
    for drv in none qp naive; do
        r=$d/$drv
        mkdir -p "$r"
        cp "$d/orig/main" "$r/" || return
        if ! "$QPT_REWRITE" -v --driver=$drv "$d/orig/libself.so" -o "$r/libself.so" \
            > "$r/log" 2>&1; then
            bad "$isa: $drv: rewrite: $(tail -n 1 "$r/log")"
            continue
        fi
        if grep -q "1 JUMP_SLOT word of the library's own PLT point at the new code" "$r/log"; then
            ok "$isa: $drv: -v: one JUMP_SLOT word pointed at the new code"
        else
            bad "$isa: $drv: -v does not say the PLT's word is pointed at the new code"
        fi
        QP_PROFILE=$r/p.qp run "$isa" "$r" 1000 > "$r/got" 2>&1
        if cmp -s "$d/want" "$r/got"; then ok "$isa: $drv: same output"; else bad "$isa: $drv: output differs"; fi
        QP_PROFILE=$r/p.qp PRE=$d/libpre.so run "$isa" "$r" 5 > "$r/got.pre" 2>&1
        if cmp -s "$d/want.pre" "$r/got.pre"; then
            ok "$isa: $drv: LD_PRELOAD's f still wins ($(cat "$r/got.pre"))"
        else
            bad "$isa: $drv: with LD_PRELOAD: $(cat "$r/got.pre")"
        fi
    done
    if [ -n "$counter" ]; then
        a=$($counter "$d/orig" 1000) b=$($counter "$d/orig" 3000)
        c=$($counter "$d/none" 1000) e=$($counter "$d/none" 3000)
        if [ -z "$a" ] || [ -z "$b" ] || [ -z "$c" ] || [ -z "$e" ]; then
            bad "$isa: no instruction count ($a $b $c $e)"
        elif [ $((b - a)) -eq $((e - c)) ]; then
            ok "$isa: none: 2000 iterations cost $((b - a)) instructions, as the original's"
        else
            bad "$isa: none: 2000 iterations cost $((e - c)) instructions, the original's $((b - a))"
        fi
    fi
    # No DT_INIT (-nostartfiles): a spare dynamic entry becomes one, for the start alone.
    r=$d/noinit
    mkdir -p "$r/orig" || return
    $cc -O2 -shared -fPIC -nostartfiles -Wl,-z,now -o "$r/orig/libself.so" "$src/lib.c" &&
        cp "$d/orig/main" "$r/orig/" && cp "$d/orig/main" "$r/" || { bad "$isa: build (no DT_INIT)"; return; }
    if ! "$QPT_REWRITE" -v --driver=none "$r/orig/libself.so" -o "$r/libself.so" > "$r/log" 2>&1; then
        bad "$isa: no DT_INIT: rewrite: $(tail -n 1 "$r/log")"
    elif ! grep -q "1 JUMP_SLOT word of the library's own PLT point at the new code" "$r/log"; then
        bad "$isa: no DT_INIT: -v does not say the PLT's word is pointed at the new code"
    else
        run "$isa" "$r" 1000 > "$r/got" 2>&1
        PRE=$d/libpre.so run "$isa" "$r" 5 > "$r/got.pre" 2>&1
        if cmp -s "$d/want" "$r/got" && cmp -s "$d/want.pre" "$r/got.pre"; then
            ok "$isa: no DT_INIT: started from a spare entry, same output, with and without LD_PRELOAD"
        else
            bad "$isa: no DT_INIT: output differs"
        fi
        if [ -n "$counter" ]; then
            a=$($counter "$r/orig" 1000) b=$($counter "$r/orig" 3000)
            c=$($counter "$r" 1000) e=$($counter "$r" 3000)
            if [ -n "$a" ] && [ -n "$c" ] && [ $((b - a)) -eq $((e - c)) ]; then
                ok "$isa: no DT_INIT: none: the loop costs the original's instructions"
            else
                bad "$isa: no DT_INIT: none: the loop costs $((e - c)), the original's $((b - a))"
            fi
        fi
    fi
    # Bound lazily: nothing done, and said so.
    r=$d/lazy/none
    mkdir -p "$r" && cp "$d/lazy/main" "$r/" || return
    if ! "$QPT_REWRITE" -v --driver=none "$d/lazy/libself.so" -o "$r/libself.so" > "$r/log" 2>&1; then
        bad "$isa: lazy: rewrite: $(tail -n 1 "$r/log")"
        return
    fi
    if grep -q "binds lazily" "$r/log"; then ok "$isa: lazy: -v says nothing is done"; else bad "$isa: lazy: -v is silent"; fi
    run "$isa" "$r" 1000 > "$r/got" 2>&1
    PRE=$d/libpre.so run "$isa" "$r" 5 > "$r/got.pre" 2>&1
    if cmp -s "$d/want" "$r/got" && cmp -s "$d/want.pre" "$r/got.pre"; then
        ok "$isa: lazy: same output, with and without LD_PRELOAD"
    else
        bad "$isa: lazy: output differs"
    fi
}

if qp_have gcc; then
    ran=1
    counter=
    if qp_have valgrind; then counter=icount_x86; else echo "x86-64: no valgrind: not counted"; fi
    check x86 gcc "$counter"
fi
if qp_have aarch64-linux-gnu-gcc && qp_have qemu-aarch64 && qp_have python3 &&
    [ -d /usr/aarch64-linux-gnu ]; then
    ran=1
    check a64 aarch64-linux-gnu-gcc icount_a64
else
    echo "AArch64: no aarch64-linux-gnu-gcc, qemu-aarch64 or python3: skipped"
fi
[ $ran = 1 ] || exit 77
[ "$fails" -eq 0 ] || exit 1
exit 0
