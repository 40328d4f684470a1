#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# A library truncated while dyn attach analyses it (dyn reads it through a mapping: a read
# past the new end faults): dyn ends in one line ("dyn: LIB: changed while it was read:
# dyn ended, and what it put in the process stays until 'dyn clean PID'"), exit 1, never
# by SIGBUS; `dyn clean PID` then takes out what it left, and the target runs on to its
# end. Not deterministic (dyn has no phase hook inside its analysis): a 23 MB copy of
# libz3 (about 2 s of analysis) is truncated 0.3 to 1.5 s into the attach, until one
# attempt hits the analysis; skipped (77) when none does, or without gcc, libz3 or ptrace.
# Exit: 0 pass, 1 fail, 77 skip, 99 error.
set -u
: "${top_srcdir:=.}"
: "${top_builddir:=.}"
. "$top_srcdir/tests/lib.sh"
DYN=${DYN:-$top_builddir/tools/dyn}
LIB=/usr/lib/x86_64-linux-gnu/libz3.so.4
[ -r "$LIB" ] || { echo "SKIP: no $LIB"; exit 77; }
command -v gcc >/dev/null || { echo "SKIP: no gcc"; exit 77; }
dyn_setup dyn-truncated
d=$(cd "$dir" && pwd)
cat >"$d/t.c" <<EOC
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>
__attribute__((noinline)) int tick(int i) { return i * 2 + 1; }
int main(void)
{
    if (dlopen("$d/libcopy.so", RTLD_NOW) == NULL)
        return 2;
    volatile int s = 0;
    for (int i = 0; i < 200; i++) {
        s += tick(i);
        usleep(50000);
    }
    printf("done %d\n", s);
    fflush(stdout);
    _exit(0); /* not the library's destructors: its file is truncated */
}
EOC
gcc -O1 -o "$d/t" "$d/t.c" -ldl || exit 99

hit=0
for delay in 0.3 0.6 0.9 1.2 1.5; do
    cp "$LIB" "$d/libcopy.so" || exit 99
    "$d/t" >"$d/t.out" 2>&1 &
    tpid=$!
    sleep 0.3
    "$DYN" attach $tpid -c tick -c 'libcopy.so:*' -d 0.2 >"$d/dyn.out" 2>"$d/dyn.err" &
    dpid=$!
    sleep $delay
    truncate -s 1000000 "$d/libcopy.so"
    wait $dpid
    rc=$?
    dpid=
    if [ $rc -eq 0 ]; then
        echo "delay $delay: the analysis was over before the truncation"
        kill $tpid 2>/dev/null
        wait $tpid
        continue
    fi
    hit=1
    line="dyn: */libcopy.so: changed while it was read: dyn ended, and what it put in the process stays until 'dyn clean PID'"
    if [ $rc -ne 1 ]; then
        bad "delay $delay: dyn exit status $rc, not 1 ($(head -1 "$d/dyn.err"))"
    elif [ "$(wc -l <"$d/dyn.err")" -ne 1 ] \
        || ! case "$(cat "$d/dyn.err")" in $line) true ;; *) false ;; esac; then
        bad "delay $delay: stderr is not the one line: $(head -3 "$d/dyn.err")"
    else
        ok "delay $delay: dyn ended in one line"
    fi
    "$DYN" clean $tpid >/dev/null 2>&1 || bad "delay $delay: dyn clean failed"
    wait $tpid
    trc=$?
    tpid=
    if [ $trc -eq 0 ] && grep -q '^done 40000$' "$d/t.out"; then
        ok "delay $delay: the target ran on to its end"
    else
        bad "delay $delay: the target ended with status $trc: $(head -1 "$d/t.out")"
    fi
    break
done
[ $hit -eq 1 ] || { echo "SKIP: no truncation hit the analysis"; exit 77; }
[ $fails -eq 0 ] || exit 1
exit 0
