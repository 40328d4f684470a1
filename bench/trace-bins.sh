#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Control-flow tracing on Debian's own binaries (make corpus): each program below is
# rewritten with --driver=trace-naive and --driver=trace, both copies run the same
# small workload from the same path with the same environment (so that the runs are
# alike: same argv[0], same $QP_PROFILE, no address randomization), and `qp trace
# stats` of the two traces must agree: same blocks, same hash of their sequence.
#   equal    the chord trace regenerates the naive one exactly
#   marked   they differ, and the chord trace marks where it could not follow (longjmp,
#            signals, a forked child's trace, code left in place or an unresolved jump
#            that ran old code): never silent, not a failure
#   addr     they differ where the program's path depends on addresses, which differ
#            between the two binaries: grep, diff and m4 parse /proc/self/maps (gnulib's
#            c-stack), python3.11's allocator and collector follow its heap's layout
#            (first difference checked by hand for each); not a failure
#   FAIL     they differ without a mark: a silently wrong regeneration
# The outputs must be equal too. Prints one line per program, then the totals.
# Usage: bench/trace-bins.sh [qpt-rewrite [qp]]
set -u
QPT=${1:-tools/qpt-rewrite}
QP=${2:-tools/qp}
QPT=$(cd "$(dirname "$QPT")" && pwd)/$(basename "$QPT")
QP=$(cd "$(dirname "$QP")" && pwd)/$(basename "$QP")
T=$(mktemp -d "${TMPDIR:-/tmp}/qpt-trace-bins.XXXXXX")
trap 'rm -rf "$T"' EXIT
NORAND=
setarch "$(uname -m)" -R true 2>/dev/null && NORAND="setarch $(uname -m) -R"
mkdir -p "$T/n" "$T/c" "$T/run" "$T/work"
cp /usr/share/common-licenses/GPL-3 "$T/work/gpl.txt" 2>/dev/null || seq 1 3000 >"$T/work/gpl.txt"
seq 1 20000 | sort -R --random-source=/dev/zero >"$T/work/nums.txt"
printf 'int main(){int s=0;for(int i=0;i<10;i++)s+=i;return s;}\n' >"$T/work/t.c"
printf 'scale=200; 4*a(1)\n' >"$T/work/pi.bc"
printf 'all:\n\t@echo hi\n' >"$T/work/Makefile"
printf 'create table t(a,b); insert into t values(1,2),(3,4); select sum(a*b) from t;\n' >"$T/work/t.sql"
ADDR=" grep diff m4 python3.11 "

# one NAME BIN ARGS...
one() {
    local name=$1 bin=$2 d st
    shift 2
    [ -x "$bin" ] || { echo "skip    $name: no $bin"; nskip=$((nskip + 1)); return; }
    "$QPT" --driver=trace-naive "$bin" -o "$T/n/$name" >/dev/null 2>&1 &&
        "$QPT" --driver=trace "$bin" -o "$T/c/$name" >/dev/null 2>&1 ||
        { echo "FAIL    $name: a rewrite failed"; nfail=$((nfail + 1)); return; }
    for d in n c; do
        rm -rf "$T/run/"* "$T/$d/$name.trace."*
        cp "$T/$d/$name" "$T/run/$name"
        rm -rf "$T/w2" && cp -r "$T/work" "$T/w2"
        (cd "$T/w2" && QP_PROFILE=$T/run/$name.qp timeout 120 $NORAND "$T/run/$name" "$@" \
            >"$T/$d/$name.out" 2>&1 </dev/null)
        echo "status $?" >>"$T/$d/$name.out"
        mv "$T/run/$name.trace."* "$T/$d/" 2>/dev/null
        "$QP" trace stats "$T/$d/$name" "$T/$d/$name.trace."* 2>&1 |
            grep -o '[0-9]* blocks, [0-9.]* bytes per block, [0-9]* marks, blocks hash [0-9a-f]*' \
            >"$T/$d/$name.st"
    done
    if ! cmp -s "$T/n/$name.out" "$T/c/$name.out"; then
        echo "FAIL    $name: the two runs' outputs differ"
        nfail=$((nfail + 1))
        return
    fi
    local sum marks
    sum=$(sed 's/[0-9.]* bytes per block, //' "$T/c/$name.st" | tr '\n' ' ')
    marks=$(awk '{for (i = 1; i <= NF; i++) if ($(i + 1) == "marks,") s += $i} END {print s + 0}' "$T/c/$name.st")
    if [ "$sum" = "$(sed 's/[0-9.]* bytes per block, //' "$T/n/$name.st" | tr '\n' ' ')" ] && [ -s "$T/c/$name.st" ]; then
        echo "equal   $name: $(head -n 1 "$T/c/$name.st" | sed 's/, [0-9]* marks.*//')"
        nequal=$((nequal + 1))
    elif [ "$marks" -gt 0 ]; then
        echo "marked  $name: $marks marks; naive $(awk '{print $1}' "$T/n/$name.st" | tr '\n' ' ')blocks, chords $(awk '{print $1}' "$T/c/$name.st" | tr '\n' ' ')"
        nmarked=$((nmarked + 1))
    elif [[ "$ADDR" == *" $name "* ]]; then
        echo "addr    $name: differ where its path depends on addresses; $marks marks"
        naddr=$((naddr + 1))
    else
        echo "FAIL    $name: differ without a mark: naive $(tr '\n' ' ' <"$T/n/$name.st")/ chords $(tr '\n' ' ' <"$T/c/$name.st")"
        nfail=$((nfail + 1))
    fi
}

nequal=0 nmarked=0 naddr=0 nfail=0 nskip=0
one ls /usr/bin/ls -la /usr/share/common-licenses
one sort /usr/bin/sort -n nums.txt
one grep /usr/bin/grep -c -E 'the [a-z]+ of' gpl.txt
one sed /usr/bin/sed -E 's/(t)he/\1HE/g' gpl.txt
one gzip /usr/bin/gzip -9 -c gpl.txt
one diff /usr/bin/diff gpl.txt nums.txt
one find /usr/bin/find /usr/share/common-licenses -name 'G*'
one sha256sum /usr/bin/sha256sum gpl.txt
one od /usr/bin/od -c gpl.txt
one factor /usr/bin/factor 1234567890123 987654321987
one ptx /usr/bin/ptx gpl.txt
one mawk /usr/bin/mawk '{n+=NF; w[$1]++} END {print n, length(w)}' gpl.txt
one bc /usr/bin/bc -l pi.bc
one dash /usr/bin/dash -c 'i=0; while [ $i -lt 200 ]; do i=$((i+1)); done; echo $i'
one bash /usr/bin/bash -c 'x=0; for i in {1..300}; do x=$((x+i)); done; echo $x'
one m4 /usr/bin/m4 /dev/null
one make /usr/bin/make -s
one objdump /usr/bin/objdump -d /usr/bin/true
one strings /usr/bin/strings /usr/bin/ls
one readelf /usr/bin/readelf -a /usr/bin/ls
one sqlite3 /usr/bin/sqlite3 :memory: '.read t.sql'
one cppcheck /usr/bin/cppcheck --quiet t.c
one cmake /usr/bin/cmake --version
one ldconfig /sbin/ldconfig -p
PYTHONHASHSEED=0 one python3.11 /usr/bin/python3.11 -c 'import json; print(sum(len(json.dumps({"a": [i] * i})) for i in range(100)))'
echo "$nequal equal, $nmarked marked, $naddr address-dependent, $nfail failed, $nskip skipped"
[ "$nfail" -eq 0 ]
