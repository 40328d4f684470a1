#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Real programs from Debian packages, rewritten with every driver, must behave exactly
# like the originals: python3.11 (LTO + PGO build with hot/cold splitting: it exposed two
# silent miscompilations the test corpus did not) running a script, and ls, bash.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
dir=$top_builddir/tests/real.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
fail=0
ran=0
script='import json, re, collections
words = collections.Counter(re.findall(r"[a-z]+", open("/etc/services").read().lower()))
print(len(words), sum(words.values()), json.dumps(sorted(words.items())[:5]))'
for prog in python3.11 ls bash; do
    [ -x "/usr/bin/$prog" ] || continue # Debian's own, not a wrapper earlier in PATH
    bin=$(readlink -f "/usr/bin/$prog")
    case $prog in
    python3.11) set -- -c "$script" ;;
    ls) set -- -la /usr/share/doc ;;
    bash) set -- -c 'for i in 1 2 3; do echo "$i $((i * i))"; done; type cd' ;;
    esac
    "$bin" "$@" >"$dir/$prog.out" 2>&1
    echo $? >>"$dir/$prog.out"
    for drv in none qp naive; do
        inst=$dir/$prog.$drv
        if ! "$QPT_REWRITE" --driver=$drv "$bin" -o "$inst" 2>"$inst.log"; then
            echo "FAIL $prog --driver=$drv: $(head -n 1 "$inst.log")"
            fail=1
            continue
        fi
        QP_PROFILE=$inst.qp "$inst" "$@" >"$inst.out" 2>&1
        echo $? >>"$inst.out"
        if cmp -s "$dir/$prog.out" "$inst.out"; then
            echo "ok $prog --driver=$drv: same output and status"
        else
            echo "FAIL $prog --driver=$drv: output differs (diff $dir/$prog.out $inst.out)"
            fail=1
        fi
        ran=1
    done
done
# Valgrind's tool executables hand the page of their own trampoline code to the program
# they run: those procedures must stay in place (a taken address that points at a trap
# ends a range of code used as data), else the guest dies of SIGSEGV.
tool=/usr/libexec/valgrind/memcheck-amd64-linux
if [ -x "$tool" ] && command -v valgrind >/dev/null; then
    lib=$dir/vglib
    mkdir -p "$lib"
    cp -r /usr/libexec/valgrind/. "$lib/"
    want=$(valgrind -q ls -d /usr/share/doc 2>&1; echo $?)
    for drv in none qp; do
        if ! "$QPT_REWRITE" --driver=$drv "$tool" -o "$lib/memcheck-amd64-linux" \
            2>"$dir/vg.$drv.log"; then
            echo "FAIL valgrind --driver=$drv: $(head -n 1 "$dir/vg.$drv.log")"
            fail=1
            continue
        fi
        got=$(VALGRIND_LIB=$lib QP_PROFILE=$dir/vg.$drv.qp valgrind -q ls -d /usr/share/doc 2>&1;
            echo $?)
        if [ "$got" = "$want" ]; then
            echo "ok valgrind (memcheck tool) --driver=$drv: same output and status"
        else
            echo "FAIL valgrind (memcheck tool) --driver=$drv: $got"
            fail=1
        fi
        ran=1
    done
    rm -rf "$lib"
fi
# A moved program header table lies where Linux before 5.18 and valgrind look for it (the
# first PT_LOAD's address less its offset, plus e_phoff): a static program's libc reads
# its TLS segment there, and died of SIGSEGV under valgrind.
if command -v gcc >/dev/null && command -v valgrind >/dev/null &&
    printf '#include <stdio.h>\nint main(void) { puts("static"); return 3; }\n' >"$dir/st.c" &&
    gcc -O2 -static -o "$dir/st" "$dir/st.c" 2>/dev/null; then
    for drv in none qp; do
        if "$QPT_REWRITE" --driver=$drv "$dir/st" -o "$dir/st.$drv" 2>/dev/null; then
            got=$(QP_PROFILE=$dir/st.$drv.qp valgrind -q --tool=none "$dir/st.$drv" 2>&1; echo $?)
            want=$(printf 'static\n3')
            [ "$got" = "$want" ] && echo "ok static program --driver=$drv under valgrind" ||
                { echo "FAIL static program --driver=$drv under valgrind: $got"; fail=1; }
        else
            echo "FAIL static program --driver=$drv: rewrite failed"
            fail=1
        fi
    done
fi
# qpt's own rewriter, rewritten by itself, rewrites a program as the original does. (It
# carries the GHC marker string the reader looks for: it was once refused as a GHC program.)
self=$top_builddir/tools/qpt-rewrite
if [ -f "$self" ] && head -c 4 "$self" | grep -q ELF; then
    if ! "$QPT_REWRITE" "$self" -o "$dir/self.inst" 2>"$dir/self.log"; then
        echo "FAIL qpt-rewrite on itself: $(head -n 1 "$dir/self.log")"
        fail=1
    else
        "$QPT_REWRITE" --driver=none /usr/bin/true -o "$dir/true.a" 2>/dev/null
        QP_PROFILE=$dir/self.qp "$dir/self.inst" --driver=none /usr/bin/true -o "$dir/true.b" \
            2>/dev/null
        if cmp -s "$dir/true.a" "$dir/true.b"; then
            echo "ok qpt-rewrite rewritten by itself writes the same output"
        else
            echo "FAIL qpt-rewrite rewritten by itself writes another output"
            fail=1
        fi
    fi
fi
[ $ran -eq 1 ] || { echo "real.sh: SKIP: none of python3.11, ls, bash found"; exit 77; }
exit $fail
