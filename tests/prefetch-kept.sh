#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# The analysis' walks of the procedures ask the ones ahead into the cache (cfg_priv.h's
# cfg_bproc_walk, the noreturn fixpoint's queue and callers, the walk of
# rebuild_stale_noreturn_callers). GCC 12 at -O2 deleted every one of those
# __builtin_prefetch calls (under a bounds check or in a loop, its dead code elimination
# does not count them as an effect): qp_prefetch (base/qp_prefetch.h) is an asm statement
# it keeps. This checks that the compiled objects hold prefetch instructions. x86-64 and
# aarch64 builds; skipped without objdump or the objects.
set -u
case $(uname -m) in
x86_64) insn=prefetcht0 ;;
aarch64) insn=prfm ;;
*) echo "prefetch-kept: not x86-64 or aarch64"; exit 77 ;;
esac
command -v objdump >/dev/null 2>&1 || { echo "prefetch-kept: no objdump"; exit 77; }
fail=0
for m in cfg_noreturn cfg_build cfg_discover; do
    o=
    for f in cfg/.libs/$m.o cfg/$m.o; do
        [ -f "$f" ] && { o=$f; break; }
    done
    [ -n "$o" ] || { echo "prefetch-kept: no object for cfg/$m.c"; exit 77; }
    n=$(objdump -d "$o" | grep -c "	$insn ")
    echo "prefetch-kept: $o: $n prefetch instructions"
    if [ "$n" -eq 0 ]; then
        echo "prefetch-kept: FAIL: $o has none (deleted by the compiler?)"
        fail=1
    fi
done
exit $fail
