#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Go programs, every procedure patched in place (editor/ed_inplace.c): their runtime
# finds functions by return address, so nothing moves and no return address may point
# into new code.
#  - tests/inplace/truth.go (calls fixed by construction; goroutines on several threads,
#    panics recovered, the GC running) rewritten with qp and naive: same output, and
#    main.leaf, main.mayPanic, main.worker, main.deep, main.churn and main.main called
#    exactly as it says: main.deep's stack grows in its prologue (runtime.morestack
#    resumes it at the return address, which jumps back to the entry: no new call), and
#    main.worker calls runtime.Gosched (runtime.mcall, resumed likewise); main.thrower
#    too (runtime.gopanic never returns), while main.middle, whose frame its panics
#    abandon, and main.catcher, which recovers them further up (resumed at its
#    deferreturn call, which no jump reaches), show their counts marked (~ or !);
#    main.deref's nil dereferences panic too (and are recovered in main.catcher): the
#    runtime finds the function by the faulting instruction's address, so no
#    instruction that may fault is displaced into a trampoline (the output would
#    differ: "fatal error: unknown caller pc");
#    the same with qp once stripped (names from .gopclntab), built as a PIE
#    (-buildmode=pie: .data.rel.ro.gopclntab), and as a cgo PIE linked externally by
#    lld (its table is runtime.pclntab inside .data.rel.ro, its textStart word 0 in
#    the file, left to a relocation: runtime.text, 0x100 bytes after .text's start,
#    where C code comes first; taking .text's start shifts every name, and the
#    rewritten program crashes), both stripped too;
#  - the stripped program with its .gopclntab section renamed (the runtime finds its
#    table through its moduledata, not the section header: it still runs), so that no
#    name can be read: rewritten with qp, it runs the same, and the rewrite and the
#    report say that a stack growth may count as a call and mark every count
#    approximate (main.deep, whose stack grows, among them); its recovered panics
#    (landing pads) have the report's general note on exceptions as well;
#  - tests/inplace/avx, whose assembly faults on nil through a memory operand in third
#    place (3-operand AVX), rewritten with qp and naive: same output (an instruction
#    with such an operand is never displaced either);
#  - Debian's gofmt rewritten with none and qp formats Go's own go/ sources exactly as
#    the original does;
#  - Debian's go rewritten with none and qp builds a small module into the same binary.
# Skipped without Go (Debian's golang-go).
set -u
. "${top_srcdir:-.}/tests/lib.sh"
QP=${QP:-$top_builddir/tools/qp}
goroot=/usr/lib/go-1.19
GO=$goroot/bin/go
[ -x "$GO" ] || { echo "inplace-go.sh: SKIP: no $GO (apt-get install golang-go)"; exit 77; }
dir=$top_builddir/tests/inplace-go.d
rm -rf "$dir"
mkdir -p "$dir" && dir=$(cd "$dir" && pwd) || exit 99
mkdir -p "$dir/mod/greet" || exit 99
fail=0
bad() {
    echo "FAIL $*"
    fail=1
}
# (No VCS stamp: a commit in the checkout between two builds would make them differ.)
GOCACHE=$dir/gocache GOPATH=$dir/gopath GOFLAGS="-mod=mod -buildvcs=false" GOTOOLCHAIN=local HOME=$dir
GOPROXY=off
export GOCACHE GOPATH GOFLAGS GOTOOLCHAIN HOME GOPROXY

# The truth program.
cp "$top_srcdir/tests/inplace/truth.go" "$dir/truth.go" || exit 99
(cd "$dir" && "$GO" build -o truth truth.go) >"$dir/build.log" 2>&1 || {
    echo "inplace-go.sh: SKIP: cannot build a Go program: $(head -n 1 "$dir/build.log")"
    exit 77
}
"$dir/truth" >"$dir/truth.out" 2>&1 || bad "truth: the original fails"
# Stripped as Debian ships Go programs: the names come from its .gopclntab.
strip -o "$dir/truth.stripped" "$dir/truth" || exit 99
# ... and without names: main.deep by its address.
objcopy --rename-section .gopclntab=.gopclnfoo "$dir/truth.stripped" "$dir/truth.noname" \
    || exit 99
deep=$(nm "$dir/truth" | awk '$3 == "main.deep" { sub(/^0+/, "", $1); print "sub_" $1 }')
[ -n "$deep" ] || exit 99
variants="qp naive qp.stripped qp.noname"
# A stripped PIE.
if (cd "$dir" && "$GO" build -buildmode=pie -o truth.pie.full truth.go) >>"$dir/build.log" 2>&1; then
    strip -o "$dir/truth.pie" "$dir/truth.pie.full" && variants="$variants qp.pie"
else
    bad "truth: go build -buildmode=pie fails: $(tail -n 1 "$dir/build.log")"
fi
# A stripped cgo PIE linked externally by lld (a module without dependencies).
if command -v gcc >/dev/null && command -v ld.lld >/dev/null; then
    mkdir -p "$dir/cgo" && cp "$dir/truth.go" "$dir/cgo/" || exit 99
    printf 'module example.com/truth\n\ngo 1.19\n' >"$dir/cgo/go.mod"
    printf 'package main\n\n// static int cgo_one(void) { return 1; }\nimport "C"\n\nfunc cgoOne() int { return int(C.cgo_one()) }\n' \
        >"$dir/cgo/cgo.go"
    if (cd "$dir/cgo" && "$GO" build -buildmode=pie \
        -ldflags="-linkmode=external -extldflags=-fuse-ld=lld" -o ../truth.cgopie.full .) \
        >>"$dir/build.log" 2>&1; then
        strip -o "$dir/truth.cgopie" "$dir/truth.cgopie.full" && variants="$variants qp.cgopie"
        # The case it is for: the table's textStart left to its relocation, and the
        # functions not at .text's start.
        text=$(readelf -SW "$dir/truth.cgopie" | sed -n 's/.*] \.text  *PROGBITS  *\([0-9a-f]*\) .*/\1/p')
        rtext=$(nm "$dir/truth.cgopie.full" | awk '$3 == "runtime.text" { print $1 }')
        [ -n "$text" ] && [ -n "$rtext" ] && [ $((0x$text)) -ne $((0x$rtext)) ] \
            || echo "note: truth.cgopie: runtime.text (0x$rtext) is .text's start (0x$text): the case is not tested"
    else
        bad "truth: a cgo PIE linked by lld does not build: $(tail -n 1 "$dir/build.log")"
    fi
else
    echo "SKIP truth qp.cgopie: no gcc or ld.lld (a cgo PIE linked externally by lld)"
fi
for drv in $variants; do
    inst=$dir/truth.$drv
    in=$dir/truth.${drv#*.}
    [ "$drv" = "${drv#*.}" ] && in=$dir/truth
    "$QPT_REWRITE" --driver=${drv%.*} "$in" -o "$inst" 2>"$inst.log" || {
        bad "truth $drv: qpt-rewrite: $(head -n 1 "$inst.log")"
        continue
    }
    grep -q 'in place: [1-9][0-9]* procedures measured' "$inst.log" \
        || bad "truth $drv: nothing measured in place"
    # A point moved past an instruction that may fault saves the flags only where they
    # are live there (Go 1.19, names read: about 1 in 10 points; saving at every such
    # point: 1 in 5).
    saves=$(sed -n 's/.* counted through \([0-9]*\) jumps .*, \([0-9]*\) saving the flags.*/\2 \1/p' "$inst.log")
    [ "$drv" = qp.noname ] || { [ -n "$saves" ] && [ $((${saves% *} * 8)) -le "${saves#* }" ]; } \
        || bad "truth $drv: more than 1 point in 8 saves the flags ($saves)"
    unread=$(grep -c 'function names could not be read.*marked approximate' "$inst.log")
    if [ "$drv" = qp.noname ]; then
        [ "$unread" = 1 ] || bad "truth $drv: the rewrite does not say once that counts are approximate"
    else
        [ "$unread" = 0 ] || bad "truth $drv: names read, yet counts said approximate"
    fi
    for run in 1 2; do
        rm -f "$inst.qp"
        GOGC=5 "$inst" >"$inst.out" 2>&1
        cmp -s "$dir/truth.out" "$inst.out" || { bad "truth $drv run $run: output differs"; continue; }
        "$QP" report --csv "$inst.qp" >"$inst.csv" 2>"$inst.err" || {
            bad "truth $drv: qp report: $(head -n 1 "$inst.err")"
            continue
        }
        if [ "$drv" = qp.noname ]; then
            # Every count marked, main.deep's too, and the report says why.
            "$QP" report "$inst.qp" >"$inst.rep" 2>&1
            unmarked=$(awk -F, 'NR > 1 && $4 !~ /~/' "$inst.csv" | wc -l)
            d=$(awk -F, -v n="$deep" '$1 == n && $4 ~ /~/ { print $2 }' "$inst.csv")
            # Its panics, recovered, mark counts too (a landing pad: main.catcher's
            # deferreturn call, which no jump reaches): both notes, each for its cause.
            notes=$(grep -c -e '^~  in a Go program whose function names could not be read' \
                -e '^~  has exception landing pads' "$inst.rep")
            if [ "$unmarked" = 0 ] && [ -n "$d" ] && [ "$notes" = 2 ]; then
                echo "ok truth $drv run $run: no names: every count marked approximate, and why (main.deep, $deep: $d calls, 1000 made), the panics' note as well"
            else
                bad "truth $drv run $run: counts not marked approximate or a note missing ($unmarked rows unmarked; main.deep, $deep: ${d:-unmarked or missing}; $notes of 2 notes)"
            fi
            continue
        fi
        wrong=
        for want in main.leaf,40600 main.mayPanic,700 main.worker,8 main.deep,1000 \
            main.churn,1 main.main,1 main.thrower,500 main.twice,300; do
            name=${want%,*}
            got=$(awk -F, -v n="$name" '$1 == n { print $2 }' "$inst.csv")
            [ "$got" = "${want#*,}" ] || wrong="$wrong $name=$got (expected ${want#*,})"
        done
        for name in main.middle main.catcher; do
            awk -F, -v n="$name" '$1 == n && $4 ~ /[~!]/ { f = 1 } END { exit !f }' \
                "$inst.csv" || wrong="$wrong $name unmarked"
        done
        if [ -z "$wrong" ]; then
            echo "ok truth $drv run $run: calls exact (leaf 40600 from 8 goroutines, mayPanic 700 with 100 panics recovered, deep 1000 with its stack grown, thrower 500 with 100 panics, twice 300 beside 100 nil dereferences), middle and catcher marked"
        else
            bad "truth $drv run $run: wrong calls:$wrong"
        fi
    done
done

# A memory operand in third place (tests/inplace/avx: VPCMPEQB (SI), Y1, Y2 in Go
# assembly, first in its loop's block, faulting on nil 100 times, recovered): never
# displaced (the old two-operand test did not see it, and the program stopped with
# "fatal error: unknown caller pc"). Needs AVX2.
if grep -q '^flags.* avx2' /proc/cpuinfo; then
    mkdir -p "$dir/avx" && cp "$top_srcdir"/tests/inplace/avx/* "$dir/avx/" || exit 99
    (cd "$dir/avx" && "$GO" build -o avx .) >"$dir/avx.build" 2>&1 || bad "avx: go build: $(head -n 1 "$dir/avx.build")"
    "$dir/avx/avx" >"$dir/avx.out" 2>&1 || bad "avx: the original fails"
    for drv in qp naive; do
        "$QPT_REWRITE" --driver=$drv "$dir/avx/avx" -o "$dir/avx.$drv" 2>"$dir/avx.$drv.log" || {
            bad "avx $drv: qpt-rewrite: $(head -n 1 "$dir/avx.$drv.log")"
            continue
        }
        "$dir/avx.$drv" >"$dir/avx.$drv.out" 2>"$dir/avx.$drv.err"
        if cmp -s "$dir/avx.out" "$dir/avx.$drv.out"; then
            echo "ok avx $drv: a fault in a third operand recovered 100 times, the same output"
        else
            bad "avx $drv: output differs: $(grep -m 1 fatal "$dir/avx.$drv.err")"
        fi
    done
else
    echo "skip avx: no AVX2 here"
fi

# gofmt of Go's own sources.
src=$(readlink -f "$goroot/src")
for drv in none qp; do
    g=$dir/gofmt.$drv
    "$QPT_REWRITE" --driver=$drv "$goroot/bin/gofmt" -o "$g" 2>"$g.log" || {
        bad "gofmt $drv: qpt-rewrite: $(head -n 1 "$g.log")"
        continue
    }
    "$goroot/bin/gofmt" -l -d "$src/go" >"$dir/gofmt.ref" 2>&1
    echo $? >>"$dir/gofmt.ref"
    "$g" -l -d "$src/go" >"$g.out" 2>&1
    echo $? >>"$g.out"
    if cmp -s "$dir/gofmt.ref" "$g.out"; then
        echo "ok gofmt $drv: $src/go formatted as the original does ($(wc -l <"$g.out") lines)"
    else
        bad "gofmt $drv: output differs"
    fi
done

# go build of a small module.
printf 'module example.com/hello\n\ngo 1.19\n' >"$dir/mod/go.mod"
printf 'package greet\n\nimport "strings"\n\nfunc Hello(n string) string { return "hello, " + strings.ToUpper(n) }\n' \
    >"$dir/mod/greet/greet.go"
printf 'package main\n\nimport (\n\t"fmt"\n\n\t"example.com/hello/greet"\n)\n\nfunc main() { fmt.Println(greet.Hello("qpt")) }\n' \
    >"$dir/mod/main.go"
(cd "$dir/mod" && GOCACHE=$dir/gc.ref "$GO" build -trimpath -o ../hello.ref .) || bad "go build: the original fails"
for drv in none qp; do
    g=$dir/go.$drv
    "$QPT_REWRITE" --driver=$drv "$GO" -o "$g" 2>"$g.log" || {
        bad "go $drv: qpt-rewrite: $(head -n 1 "$g.log")"
        continue
    }
    (cd "$dir/mod" && GOCACHE=$dir/gc.$drv "$g" build -trimpath -o "../hello.$drv" .) >"$g.out" 2>&1 || {
        bad "go $drv: go build fails: $(head -n 1 "$g.out")"
        continue
    }
    if cmp -s "$dir/hello.ref" "$dir/hello.$drv" && [ "$("$dir/hello.$drv")" = "hello, QPT" ]; then
        echo "ok go $drv: go build gives the same binary"
    else
        bad "go $drv: go build gives another binary"
    fi
done
exit $fail
