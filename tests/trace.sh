#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Control-flow tracing (issue 17): every test program is rewritten with --driver=trace-naive
# (a record per block: the oracle) and --driver=trace (records only where the CFG cannot
# say the way), both run (same output as the original), and `qp trace blocks` of the two
# must be equal record for record - C at -O0/-O2, PIE, non-PIE and static, calls,
# recursion, function pointers, switch tables, computed gotos, threads (a trace per
# thread), a record where only the carry flag is live (tests/trace/flags.c), a procedure
# that is only a tail call of a C library leaf, called in a loop (tests/trace/leaftail.c), signal
# handlers that interrupt traced code and return (their entry records the interrupted
# instruction: tests/trace/sighandler.c). Where the walk cannot follow exactly (longjmp,
# signal handlers, exceptions)
# the blocks must still be equal and the places marked ('#' lines); a process killed
# before it could flush ends with a cut mark. The chord trace must be the smaller, and no
# profile (.qp) is left beside a trace.
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
QP=${QP:-$top_builddir/tools/qp}
dir=$top_builddir/tests/trace.d
rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/n" "$dir/t" || exit 99
dir=$(cd "$dir" && pwd)
fails=0
P=$top_srcdir/tests/progs
T=$top_srcdir/tests/trace

# Runs without address randomization: code whose path depends on addresses (memcpy's
# alignment loops, hashing pointers) takes the same path in both runs.
norand=
setarch "$(uname -m)" -R true 2>/dev/null && norand="setarch $(uname -m) -R"

# build NAME SRC CC FLAGS...
build() {
    name=$1 src=$2
    shift 2
    "$@" -o "$dir/bin/$name" "$src" -pthread >"$dir/bin/$name.log" 2>&1 ||
        { bad "$name: does not build: $(head -n 1 "$dir/bin/$name.log")"; return 1; }
}

# Sum of the sizes of the trace files PREFIX.trace.*, less their signal records (which
# the naive tracer does not write: a handler's entry and where it came).
trace_bytes() {
    python3 "$T/damage.py" bytes "$1".trace.*
}

# pair NAME EXPECT: both tracers on $dir/bin/NAME; EXPECT is "exact", or a word every
# mark must contain ("longjmp", "async|longjmp", "exception"). $LEAVE: procedures the
# rewrites leave in place (QPT_LEAVE); $ARGS: the program's arguments.
pair() {
    name=$1 expect=$2
    exe=$dir/bin/$name
    for d in n t; do
        drv=trace-naive
        [ $d = t ] && drv=trace
        QPT_LEAVE=${LEAVE:-} "$QPT_REWRITE" --driver=$drv "$exe" -o "$dir/$d/$name" >/dev/null 2>&1 ||
            { bad "$name: --driver=$drv: rewrite failed"; return; }
    done
    # shellcheck disable=SC2086
    (cd "$dir/bin" && $norand "./$name" ${ARGS:-} >"$name.out" 2>&1)
    for d in n t; do
        # shellcheck disable=SC2086
        (cd "$dir/$d" && $norand "./$name" ${ARGS:-} >"$name.out" 2>&1)
        cmp -s "$dir/bin/$name.out" "$dir/$d/$name.out" ||
            { bad "$name ($d): output differs: $(diff "$dir/bin/$name.out" "$dir/$d/$name.out" | head -n 2)"; return; }
        "$QP" trace blocks "$dir/$d/$name" >"$dir/$d/$name.blocks" 2>"$dir/$d/$name.err" ||
            { bad "$name ($d): qp trace blocks: $(head -n 1 "$dir/$d/$name.err")"; return; }
        # A trace leaves no (empty) profile beside it.
        [ -e "$dir/$d/$name.qp" ] && bad "$name ($d): a profile $name.qp was left beside the trace"
    done
    # Threads' traces are headed by their (different) ids; which thread runs what may
    # differ from run to run (pthread_once): then the blocks are compared sorted.
    grep -v '^# thread ' "$dir/n/$name.blocks" >"$dir/n/$name.b"
    grep -v '^# thread ' "$dir/t/$name.blocks" >"$dir/t/$name.b"
    if grep -q '^# thread ' "$dir/n/$name.blocks"; then
        sort "$dir/n/$name.b" >"$dir/n/$name.s" && mv "$dir/n/$name.s" "$dir/n/$name.b"
        sort "$dir/t/$name.b" >"$dir/t/$name.s" && mv "$dir/t/$name.s" "$dir/t/$name.b"
    fi
    nb=$(grep -vc '^#' "$dir/n/$name.b")
    marks=$(grep -c '^#' "$dir/t/$name.b")
    [ "$nb" -ge 10 ] || bad "$name: only $nb blocks in the naive trace (nothing to compare)"
    if [ "$expect" = exact ]; then
        cmp -s "$dir/n/$name.b" "$dir/t/$name.b" && ok "$name: $nb blocks, equal" ||
            bad "$name: traces differ: $(diff "$dir/n/$name.b" "$dir/t/$name.b" | head -n 3 | tr '\n' ' ')"
    else
        grep -v '^#' "$dir/t/$name.b" | cmp -s "$dir/n/$name.b" - &&
            ok "$name: $nb blocks, equal, $marks places marked" ||
            bad "$name: blocks differ: $(grep -v '^#' "$dir/t/$name.b" | diff "$dir/n/$name.b" - | head -n 3 | tr '\n' ' ')"
        [ "$marks" -gt 0 ] || bad "$name: no mark where the walk cannot follow ($expect)"
        other=$(grep '^#' "$dir/t/$name.b" | grep -Evc "$expect")
        [ "$other" -eq 0 ] || bad "$name: $other marks other than '$expect': $(grep '^#' "$dir/t/$name.b" | grep -Ev "$expect" | head -n 1)"
    fi
    grep -q '^#' "$dir/n/$name.b" && bad "$name: the naive trace has marks: $(grep '^#' "$dir/n/$name.b" | head -n 1)"
    bn=$(trace_bytes "$dir/n/$name") bt=$(trace_bytes "$dir/t/$name")
    [ "$bt" -lt "$bn" ] || bad "$name: the chord trace ($bt bytes) is not smaller than the naive one ($bn)"
}

for v in "gcc -O0" "gcc -O2" "gcc -O2 -fno-pie -no-pie" "gcc -O2 -static" "clang -O2"; do
    cc=${v%% *}
    qp_have "$cc" || continue
    tag=$(echo "$v" | tr -d ' ' | tr -c 'a-zA-Z0-9\n' _)
    for prog in "$T/calls.c" "$P/recursion.c" "$P/fptr.c" "$P/switch_dense.c" "$P/setjmp.c" \
        "$T/sighandler.c" "$T/leaftail.c"; do
        base=${prog##*/}
        name=${base%.c}.$tag
        build "$name" "$prog" $v || continue
        # leaftail's comparator must be the tail call it is about (gcc and clang -O2)
        if [ "$base" = leaftail.c ] && [ "$tag" = gcc_O2 ] && qp_have objdump; then
            objdump -d "$dir/bin/$name" | awk '/<cmp>:/ {f = 1} f && /jmp/ {print; exit}' |
                grep -q 'strcmp@plt' || bad "$name: cmp is not a tail call of strcmp@plt"
        fi
        case $base in
        setjmp.c) pair "$name" "longjmp" ;;
        *) pair "$name" exact ;;
        esac
    done
done
for v in "gcc -O0" "gcc -O2"; do
    tag=$(echo "$v" | tr -d ' ' | tr -c 'a-zA-Z0-9\n' _)
    for prog in "$P/tailcall.c" "$P/switch_sparse.c" "$P/computed_goto.c" "$P/cold.c" \
        "$P/noreturn.c" "$P/threads.c" "$P/signal.c" "$T/flags.c"; do
        base=${prog##*/}
        name=${base%.c}.$tag
        build "$name" "$prog" $v || continue
        case $base in
        signal.c) pair "$name" "async|longjmp" ;;
        *) pair "$name" exact ;;
        esac
    done
    if qp_have g++; then
        cxx=$(echo "$v" | sed 's/^gcc/g++/')
        for prog in "$P/exceptions.cc" "$P/eh_deep.cc" "$P/virtual.cc"; do
            base=${prog##*/}
            name=${base%.cc}.$tag
            build "$name" "$prog" $cxx || continue
            case $base in
            virtual.cc) pair "$name" exact ;;
            *) pair "$name" "exception" ;;
            esac
        done
    fi
done
build interp.O2 "$P/interp.c" gcc -O2 && pair interp.O2 exact
# A procedure called directly and through a pointer held only by an RELR relocation
# (-z pack-relative-relocs): it records ENTER (tests/qp/relr.c: 300 marks before).
if gcc -O2 -fPIE -pie -Wl,-z,pack-relative-relocs -o "$dir/bin/relr.O2" "$top_srcdir/tests/qp/relr.c" \
    >/dev/null 2>&1 && readelf -SW "$dir/bin/relr.O2" | grep -q ' RELR '; then
    pair relr.O2 exact
else
    echo "skip relr: no -z pack-relative-relocs"
fi
# A switch whose table base is loaded far before its jump, after more `lea`s than the
# CFG tries at first (tests/trace/hoisted.c): resolved when no other write of the
# register reaches the jump (hoisted), not when one does (clobbered).
for v in "gcc -O0" "gcc -O2"; do
    tag=$(echo "$v" | tr -d ' ' | tr -c 'a-zA-Z0-9\n' _)
    build "hoisted.$tag" "$T/hoisted.c" $v || continue
    cfgs=$("$QPT_REWRITE" --dump-cfg=text "$dir/bin/hoisted.$tag" 2>/dev/null)
    if echo "$cfgs" | grep -q '^proc hoisted .* tables=1' && echo "$cfgs" | grep -q '^proc clobbered .* tables=0' \
        && echo "$cfgs" | grep -q '^proc pathwin .* tables=1'; then
        ok "hoisted.$tag: the proven tables resolved (hoisted, pathwin), the clobbered one not"
    else
        bad "hoisted.$tag: $(echo "$cfgs" | grep -E '^proc (hoisted|clobbered|pathwin) ' | tr '\n' ' ')"
    fi
    pair "hoisted.$tag" exact
done
# A tail call through a register to a procedure whose address the program computes
# (no ENTER): the jump records its target (tests/trace/jumpval.c: f's address less g's).
for v in "gcc -O2" "clang -O2"; do
    qp_have "${v%% *}" || continue
    tag=$(echo "$v" | tr -d ' ' | tr -c 'a-zA-Z0-9\n' _)
    build "jumpval.$tag" "$T/jumpval.c" $v || continue
    syms=$(nm "$dir/bin/jumpval.$tag")
    f=$(echo "$syms" | awk '$3 == "f" { print $1 }') g=$(echo "$syms" | awk '$3 == "g" { print $1 }')
    [ -n "$f" ] && [ -n "$g" ] || { bad "jumpval.$tag: no symbols f and g"; continue; }
    ARGS=$((0x$f - 0x$g)) pair "jumpval.$tag" exact
    # the jump did go to f (not g): sink counts g's calls only
    [ "$(cut -d' ' -f2 "$dir/bin/jumpval.$tag.out")" = 0 ] ||
        bad "jumpval.$tag: the computed target was not f: $(cat "$dir/bin/jumpval.$tag.out")"
done
# Traced code called directly by code left in place, and a tail jump through a pointer
# into such code that calls traced code twice before it returns (tests/trace/leave.c).
for v in "gcc -O0" "gcc -O2" "clang -O2"; do
    qp_have "${v%% *}" || continue
    tag=$(echo "$v" | tr -d ' ' | tr -c 'a-zA-Z0-9\n' _)
    build "leave.$tag" "$T/leave.c" $v || continue
    # (the procedures must really stay: else the test proves nothing)
    n=$(QPT_LEAVE=stay,stay2 "$QPT_REWRITE" -v --driver=trace "$dir/bin/leave.$tag" -o "$dir/leave.chk" 2>&1 |
        grep -c 'left in place: stay2\? at .*QPT_LEAVE')
    [ "$n" -eq 2 ] || bad "leave.$tag: $n of stay, stay2 left in place"
    LEAVE=stay,stay2 pair "leave.$tag" exact
done
# Static at -O0 too (the C library's code is traced with the program's).
for prog in "$T/calls.c" "$P/recursion.c"; do
    base=${prog##*/}
    build "${base%.c}.gcc_O0_static" "$prog" gcc -O0 -static && pair "${base%.c}.gcc_O0_static" exact
done

# Never silently partial: what ran outside the traced code is stated - qp trace stats
# (per trace: the calls of code not traced, by name; the procedures left in place) and a
# note on stderr after qp trace blocks. calls.c calls qsort and printf through the PLT,
# _start calls __libc_start_main through the GOT; both tracers count alike (the counts
# come from the regenerated blocks). A static program has no PLT calls left.
untraced_line() {
    "$QP" trace stats "$1" | sed -n 's/^[^:]*: tid [0-9]*: not traced: //p'
}
if [ -f "$dir/t/calls.gcc_O2.blocks" ]; then
    u=$(untraced_line "$dir/t/calls.gcc_O2")
    case $u in
    [1-9]*" calls of code that is not traced"*qsort@plt*printf@plt*__libc_start_main*)
        ok "calls.gcc_O2: stats: not traced: ${u%% (*}" ;;
    *) bad "calls.gcc_O2: stats do not state the calls of code not traced: $u" ;;
    esac
    [ "$u" = "$(untraced_line "$dir/n/calls.gcc_O2")" ] || bad "calls.gcc_O2: the naive trace counts other calls: $(untraced_line "$dir/n/calls.gcc_O2")"
    grep -q '^qp: trace: not traced: [1-9][0-9]* calls .*qsort@plt' "$dir/t/calls.gcc_O2.err" &&
        ok "calls.gcc_O2: qp trace blocks notes them on stderr" ||
        bad "calls.gcc_O2: no note of the calls not traced: $(cat "$dir/t/calls.gcc_O2.err")"
fi
if [ -f "$dir/t/calls.gcc_O2_static.blocks" ]; then
    u=$(untraced_line "$dir/t/calls.gcc_O2_static")
    p=$("$QP" trace stats "$dir/t/calls.gcc_O2_static" | grep -m 1 ' procedures traced, ')
    case $u in
    *@plt*) bad "calls.gcc_O2_static: PLT calls in a static program: $u" ;;
    *" calls of code that is not traced"*) ok "calls.gcc_O2_static: not traced: ${u%% (*}; ${p#*: }" ;;
    *) bad "calls.gcc_O2_static: no not-traced line: $u" ;;
    esac
fi

# Asynchronous signals (tests/trace/timer.c: SIGALRM every 25 us, hundreds of handlers
# anywhere: in records being written, between a record's reservation and its write, in
# buffer refills, in C library leaf calls, several in a row): where they come differs
# from run to run, so the program's own blocks (the handler's dropped) must be equal, no
# cut mark, and every handler either placed exactly or marked "async". TRACE_TIMER=N
# (`make corpus`: 20) runs each program N times.
for v in "gcc -O2" "gcc -O0" "clang -O2" "clang -O0"; do
    cc=${v%% *}
    qp_have "$cc" && qp_have python3 || continue
    tag=$(echo "$v" | tr -d ' ' | tr -c 'a-zA-Z0-9\n' _)
    name=timer.$tag
    build "$name" "$T/timer.c" $v || continue
    for d in n t; do
        drv=trace-naive
        [ $d = t ] && drv=trace
        "$QPT_REWRITE" --driver=$drv "$dir/bin/$name" -o "$dir/$d/$name" >/dev/null 2>&1 ||
            { bad "$name ($d): rewrite failed"; continue 2; }
    done
    h=$(nm "$dir/bin/$name" | awk '$3 == "on_alarm" {print $1}' | sed 's/^0*/0x/')
    runs=${TRACE_TIMER:-1} fail=0 nh=0 marks=0 nb=0
    for k in $(seq "$runs"); do
        for d in n t; do
            [ $d = n ] && [ "$k" -gt 1 ] && continue # the program's own blocks: the same
            # The naive run is the oracle: one whose trace lost a record (it says so with
            # a cut: a handler filled the buffer between a record's reservation and its
            # write, and the naive tracer writes no signal record to read it back from)
            # is no oracle: run it again (a few times in a thousand runs).
            for try in 1 2 3 4 5; do
                rm -f "$dir/$d/$name".trace.*
                (cd "$dir/$d" && $norand timeout 120 ./"$name" 300000 25 >"$name.out" 2>&1) &&
                    "$QP" trace blocks "$dir/$d/$name" >"$dir/$d/$name.blocks" 2>"$dir/$d/$name.err" &&
                    python3 "$T/drop-procs.py" "$dir/bin/$name" on_alarm tick_work \
                        <"$dir/$d/$name.blocks" >"$dir/$d/$name.own" ||
                    { bad "$name ($d): run or qp trace blocks failed: $(head -n 1 "$dir/$d/$name.err" 2>/dev/null)"; continue 4; }
                [ $d = n ] && grep -q '^# cut' "$dir/n/$name.blocks" || break
                echo "note: $name (n): the naive trace lost a record (run $try), run again"
            done
        done
        nh=$((nh + $(grep -c "^$h\$" "$dir/t/$name.blocks")))
        marks=$((marks + $(grep -c '^#' "$dir/t/$name.blocks")))
        other=$(grep '^#' "$dir/t/$name.blocks" | grep -vc '^# async: a signal handler')
        nb=$(wc -l <"$dir/n/$name.own")
        cmp -s "$dir/n/$name.own" "$dir/t/$name.own" ||
            { fail=1; bad "$name (run $k): the program's blocks differ: $(diff "$dir/n/$name.own" "$dir/t/$name.own" | head -n 3 | tr '\n' ' ')"; }
        [ "$other" -eq 0 ] ||
            { fail=1; bad "$name (run $k): $other marks other than a signal handler's: $(grep '^#' "$dir/t/$name.blocks" | grep -v '^# async: a signal handler' | head -n 1)"; }
        [ $fail -eq 0 ] || { cp "$dir/t/$name".trace.* "$dir/t/$name.blocks" "$dir/bin/" 2>/dev/null; break; }
    done
    [ "$nb" -ge 100000 ] || bad "$name: only $nb blocks in the naive trace"
    [ "$nh" -gt 0 ] || bad "$name: no handler ran in the chord runs"
    [ $fail -eq 0 ] &&
        ok "$name: the program's $nb blocks equal in $runs runs; $nh handlers, $((nh - marks)) placed exactly, $marks marked"
done

# A process killed before its exit: what filled buffers wrote, then a cut mark.
if build killed "$T/killed.c" gcc -O2 &&
    "$QPT_REWRITE" --driver=trace "$dir/bin/killed" -o "$dir/t/killed" >/dev/null 2>&1; then
    (cd "$dir/t" && exec ./killed) >/dev/null 2>&1
    "$QP" trace blocks "$dir/t/killed" >"$dir/t/killed.blocks" 2>"$dir/t/killed.err"
    last=$(tail -n 1 "$dir/t/killed.blocks")
    n=$(grep -vc '^#' "$dir/t/killed.blocks")
    case $last in
    "# cut: the trace ends here"*) [ "$n" -gt 100000 ] && ok "killed: $n blocks, then the cut mark" ||
        bad "killed: only $n blocks before the cut"
        untraced_line "$dir/t/killed" | grep -q ', 1 places cut' ||
            bad "killed: qp trace stats does not count the cut: $(untraced_line "$dir/t/killed")" ;;
    *) bad "killed: the trace does not end with a cut mark: $last" ;;
    esac
else
    bad "killed: not built or rewritten"
fi

# Bad input: a program without a trace description; a trace of another program.
"$QP" trace blocks "$dir/bin/interp.O2" >/dev/null 2>"$dir/err1" &&
    bad "qp trace blocks accepts a program that was not rewritten for tracing" ||
    { grep -q 'no trace description' "$dir/err1" && ok "no trace description: refused" ||
        bad "no trace description: $(cat "$dir/err1")"; }
f=$(ls "$dir"/t/calls.gcc_O2.trace.* 2>/dev/null | head -n 1)
if [ -n "$f" ]; then
    "$QP" trace blocks "$dir/t/interp.O2" "$f" >/dev/null 2>"$dir/err2" &&
        bad "qp trace blocks reads another program's trace" ||
        { grep -q 'another program' "$dir/err2" && ok "another program's trace: refused" ||
            bad "another program's trace: $(cat "$dir/err2")"; }
fi
"$QP" trace frobnicate x >/dev/null 2>&1 && bad "qp trace frobnicate accepted"
# A repeat count with no record before it (QPT_TRACE_REPEAT + 5 first): refused.
{ printf 'QPTTRFL1'; head -c 24 /dev/zero; printf '\005\000\000\360'; } >"$dir/bad.trace"
"$QP" trace blocks "$dir/t/interp.O2" "$dir/bad.trace" >/dev/null 2>"$dir/err3" &&
    bad "a trace starting with a repeat count accepted" ||
    { grep -q 'repeat count' "$dir/err3" && ok "a repeat count first: refused" ||
        bad "a repeat count first: $(cat "$dir/err3")"; }

# Progress on a terminal (stderr a terminal, the output not): each trace's phase on one
# line rewritten in place, then cleared; the output itself the same as without.
if command -v script >/dev/null 2>&1 && [ -n "$f" ]; then
    "$QP" trace stats "$dir/t/calls.gcc_O2" "$f" >"$dir/plain.st" 2>/dev/null
    script -qec "'$QP' trace stats '$dir/t/calls.gcc_O2' '$f' >'$dir/tty.st'" /dev/null >"$dir/tty.err" 2>&1
    if grep -q "qp: trace: .* (1 of 1): regenerating" "$dir/tty.err" &&
        [ "$(tail -c 4 "$dir/tty.err" | od -An -c | tr -d ' ')" = '\r033[K' ] &&
        cmp -s "$dir/plain.st" "$dir/tty.st"; then
        ok "qp trace: progress on a terminal, cleared at the end; the same output"
    else
        bad "qp trace progress: $(od -c "$dir/tty.err" | head -5)"
    fi
else
    echo "SKIP progress check: no script(1), or no trace of calls.gcc_O2"
fi

[ $fails -eq 0 ] || exit 1
exit 0
