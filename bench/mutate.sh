#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Mutation campaign over real executables: corrupt a few bytes of a seed (its ELF
# header, a program header, a section header, or anywhere), rewrite it, and check what a
# user must be able to rely on whatever the input:
#   - qpt-rewrite exits 0 or 1, never by a signal, never hangs (timeout);
#   - on 1: exactly one stderr line "qpt-rewrite: MUTANT: reason", no output file and
#     no temporary file left; the reason names the input's defect, not the output
#     ("cannot write OUTPUT" for a defect of the input is a failure);
#   - the mutant itself is never modified;
#   - on 0, when the mutant runs to completion natively (exit status below 128), the
#     rewritten one gives the same stdout, stderr and exit status (--driver=none and qp).
# Usage: bench/mutate.sh QPT-REWRITE N [SEED...]   (default seeds: a few corpus programs
# and /usr/bin/true, /usr/bin/ls). MUTATE_SECTIONS="NAME..." changes bytes of those
# sections only (".eh_frame .eh_frame_hdr .gcc_except_table": the unwind tables). Failing mutants are kept in $MUTATE_DIR (default
# ./mutate.d/fail; with MUTATE_SHOW=1 every refusal is printed and its mutant kept as rN).
# Prints the totals; exit 1 when anything failed.
#
# bench/mutate.sh --unwind QPT-REWRITE [SEED...]: the unwind classes instead (see
# tests/unwind-mutants.py; default seeds tests/progs/exceptions.cc and eh_deep.cc built
# with g++ -O2). Only mutants that still run natively with the seed's output count. Each
# is rewritten with --driver=none --verbose and with qp; per class: tried, left in place
# with a note naming the unwind defect of the FDE, refused in one line, harmed (a
# rewritten mutant behaves differently), and silent (a certain inconsistency rewritten
# without a note). Exit 1 when any mutant was harmed or silent.
set -u
unwind=0
[ "${1:-}" = --unwind ] && { unwind=1; shift; }
[ $# -ge $((2 - unwind)) ] || { echo "usage: $0 QPT-REWRITE N [SEED...] | --unwind QPT-REWRITE [SEED...]" >&2; exit 2; }
QPT=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
N=${2:-0}
if [ "$unwind" = 1 ]; then N=0; shift 1; else shift 2; fi
DIR=${MUTATE_DIR:-./mutate.d}
TIMEOUT=${MUTATE_TIMEOUT:-60}
mkdir -p "$DIR/fail" "$DIR/work"
DIR=$(cd "$DIR" && pwd)
W=$DIR/work
# unwind_run SEED...: the unwind classes (see the usage above).
unwind_run() {
    local gen seed m cls start must st drv why line
    local -A tried noted refused harmed silent
    gen=$(cd "$(dirname "$0")/../tests" && pwd)/unwind-mutants.py
    for seed in "$@"; do
        rm -rf "$W/u"
        mkdir -p "$W/u"
        run_prog "$seed" "$W/s" "$seed" 2>/dev/null
        while read -r m cls start must; do
            m=$W/u/$m
            run_prog "$m" "$W/n" "$seed" 2>/dev/null
            cmp -s "$W/s.out" "$W/n.out" && cmp -s "$W/s.st" "$W/n.st" || continue
            tried[$cls]=$((${tried[$cls]:-0} + 1))
            why='' st=0
            for drv in none qp; do
                rm -f "$W/o.$drv"
                timeout "$TIMEOUT" "$QPT" --driver=$drv --verbose "$m" -o "$W/o.$drv" 2>"$W/err.$drv"
                st=$?
                [ "$st" -eq 0 ] || break
                run_prog "$W/o.$drv" "$W/r" "$seed" 2>/dev/null
                if ! cmp -s "$W/n.out" "$W/r.out" || ! cmp -s "$W/n.st" "$W/r.st"; then
                    native_stable "$m" "$seed" || { why=unstable; break; }
                    why="harmed ($drv: status $(cat "$W/n.st") -> $(cat "$W/r.st"))"
                    break
                fi
            done
            line=$(grep -m1 "left in place: .*unwind.*$start" "$W/err.none" 2>/dev/null)
            if [ -z "$why" ] && [ "$st" -eq 1 ]; then
                if [ "$(wc -l <"$W/err.$drv")" -eq 1 ]; then
                    refused[$cls]=$((${refused[$cls]:-0} + 1))
                else
                    why="refused in more than one line"
                fi
            elif [ -z "$why" ] && [ "$st" -ne 0 ]; then
                why="status $st"
            elif [ -z "$why" ] && [ -n "$line" ]; then
                noted[$cls]=$((${noted[$cls]:-0} + 1))
            elif [ -z "$why" ] && [ "$must" = 1 ]; then
                why="silent (an inconsistent FDE at $start rewritten without a note)"
            fi
            case $why in
            unstable) unstable=$((unstable + 1)); why='' ;;
            harmed*) harmed[$cls]=$((${harmed[$cls]:-0} + 1)) ;;
            silent*) silent[$cls]=$((${silent[$cls]:-0} + 1)) ;;
            esac
            if [ -n "$why" ]; then
                fails=$((fails + 1))
                cp "$m" "$DIR/fail/${seed##*/}.${m##*/}"
                echo "FAIL ${seed##*/} ${m##*/} (FDE $start): $why"
            elif [ -n "${MUTATE_SHOW:-}" ]; then
                echo "ok ${seed##*/} ${m##*/}: ${line:-$(head -n 1 "$W/err.none")}"
            fi
        done < <(python3 "$gen" "$seed" "$W/u" "${MUTATE_PER_CLASS:-1000}")
    done
    echo "mutate --unwind: class: tried (running natively), left in place with a note, refused, harmed, silent ($unstable mutants not compared: two native runs differ)"
    for cls in pcbegin hdrloc range overlap advance csstart lpad; do
        printf '  %-8s %4d %4d %4d %4d %4d\n' "$cls" "${tried[$cls]:-0}" "${noted[$cls]:-0}" \
            "${refused[$cls]:-0}" "${harmed[$cls]:-0}" "${silent[$cls]:-0}"
    done
    [ "$fails" -eq 0 ]
}

seeds=("$@")
if [ "$unwind" = 1 ]; then
    [ ${#seeds[@]} -gt 0 ] || for p in exceptions eh_deep; do
        g++ -O2 -o "$W/seed.$p" "$(dirname "$0")/../tests/progs/$p.cc" && seeds+=("$W/seed.$p")
    done
elif [ ${#seeds[@]} -eq 0 ]; then
    src=$(cd "$(dirname "$0")/.." && pwd)/tests/progs
    for p in exceptions switch_dense recursion; do
        for f in "$src/$p".c*; do
            [ -f "$f" ] || continue
            case $f in
            *.c) gcc -O2 -o "$W/seed.$p" "$f" 2>/dev/null && seeds+=("$W/seed.$p") ;;
            *.cc) g++ -O2 -o "$W/seed.$p" "$f" 2>/dev/null && seeds+=("$W/seed.$p") ;;
            esac
        done
    done
    seeds+=(/usr/bin/true /usr/bin/ls)
fi

# mutate IN OUT SEED: copy IN to OUT with 1 to 4 bytes changed (perl: deterministic per seed).
mutate() {
    perl -e '
        my ($in, $out, $seed) = @ARGV; srand($seed);
        open(my $f, "<", $in) or die; binmode $f; local $/; my $b = <$f>; close $f;
        my $n = length($b);
        my ($phoff, $shoff) = (unpack("Q<", substr($b, 32, 8)), unpack("Q<", substr($b, 40, 8)));
        my ($phnum, $shentsize, $shnum) = (unpack("v", substr($b, 56, 2)), 64,
                                            unpack("v", substr($b, 60, 2)));
        # MUTATE_SECTIONS: the file ranges of the sections named there, if any.
        my %want = map { $_ => 1 } split(" ", $ENV{MUTATE_SECTIONS} // "");
        my @ranges;
        if (%want && $shoff + $shnum * 64 <= $n) {
            my $shstrndx = unpack("v", substr($b, 62, 2));
            my $stroff = $shstrndx < $shnum
                ? unpack("Q<", substr($b, $shoff + 64 * $shstrndx + 24, 8)) : $n;
            for my $i (0 .. $shnum - 1) {
                my ($name, $type) = unpack("VV", substr($b, $shoff + 64 * $i, 8));
                my ($off, $size) = unpack("Q<Q<", substr($b, $shoff + 64 * $i + 24, 16));
                next if $stroff + $name >= $n || $off + $size > $n || $size == 0;
                my $nm = unpack("Z*", substr($b, $stroff + $name, 64));
                push @ranges, [$off, $size] if $want{$nm};
            }
        }
        my $k = 1 + int(rand(4));
        for (1 .. $k) {
            my $where = int(rand(4)); my $off;
            if (@ranges) { my $r = $ranges[int(rand(@ranges))]; $off = $r->[0] + int(rand($r->[1])); }
            elsif ($where == 0) { $off = int(rand(64)); }
            elsif ($where == 1 && $phnum) { $off = $phoff + int(rand($phnum * 56)); }
            elsif ($where == 2 && $shnum) { $off = $shoff + int(rand($shnum * 64)); }
            else { $off = int(rand($n)); }
            next if $off >= $n;
            substr($b, $off, 1) = chr(int(rand(256)));
        }
        open(my $o, ">", $out) or die; binmode $o; print $o $b; close $o;
        chmod 0755, $out;' "$@"
}

# run_prog BIN OUT SEED: stdout, stderr and status of BIN into OUT.* (corpus programs
# take no arguments; ls lists a fixed directory, not the work directory).
run_prog() {
    local bin=$1 out=$2 args=()
    case ${3##*/} in ls) args=(/) ;; esac
    # The same argv[0] for both: programs print it in their messages.
    (cd "$W" && timeout 10 bash -c 'exec -a prog "$0" "$@"' "$bin" "${args[@]}" \
        >"$out.out" 2>"$out.err" </dev/null)
    echo $? >"$out.st"
}

# native_stable MUTANT SEED: does a second native run of MUTANT give what the first gave
# ($W/n.*)? A mutant that reads garbage may not: then its rewrite is not compared.
native_stable() {
    run_prog "$1" "$W/n2" "$2" 2>/dev/null
    cmp -s "$W/n.out" "$W/n2.out" && cmp -s "$W/n.st" "$W/n2.st" && cmp -s "$W/n.err" "$W/n2.err"
}

total=0 accepted=0 refused=0 ran=0 compared=0 fails=0 unstable=0
if [ "$unwind" = 1 ]; then
    unwind_run "${seeds[@]}"
    exit $?
fi
declare -A reasons
for ((i = 0; i < N; i++)); do
    seed=${seeds[$((i % ${#seeds[@]}))]}
    m=$W/m$i
    mutate "$seed" "$m" "$i"
    sum=$(sha256sum <"$m")
    rm -f "$W"/o.* "$W"/o.tmp*
    timeout "$TIMEOUT" "$QPT" --driver=none "$m" -o "$W/o.none" 2>"$W/err"
    st=$?
    total=$((total + 1))
    why=''
    if [ "$st" -ge 124 ]; then
        why="status $st (signal or timeout)"
    elif [ "$st" -eq 1 ]; then
        refused=$((refused + 1))
        line=$(head -n 1 "$W/err")
        r=${line#"qpt-rewrite: $m: "}
        r=${r%% at 0x*}
        r=${r%% (*}
        reasons[$r]=$((${reasons[$r]:-0} + 1))
        [ -n "${MUTATE_SHOW:-}" ] && echo "refused m$i (seed ${seed##*/}): $line" \
            && cp "$m" "$DIR/fail/r$i"
        if [ "$(wc -l <"$W/err")" -ne 1 ] || [[ $line != "qpt-rewrite: $m: "?* ]]; then
            why="not one 'qpt-rewrite: INPUT: reason' line: $(head -c 300 "$W/err")"
        elif [[ $line == *"cannot write $W/o.none"* ]] && [[ $line != *"No space"* ]]; then
            why="an input defect reported as an output error: $line"
        elif ls "$W"/o.none* >/dev/null 2>&1; then
            why="an output or temporary file was left behind"
        fi
    elif [ "$st" -eq 0 ]; then
        accepted=$((accepted + 1))
        run_prog "$m" "$W/n" "$seed" 2>/dev/null
        if [ "$(cat "$W/n.st")" -lt 124 ]; then
            ran=$((ran + 1))
            for drv in none qp; do
                [ "$drv" = qp ] && { timeout "$TIMEOUT" "$QPT" "$m" -o "$W/o.qp" 2>/dev/null || continue; }
                run_prog "$W/o.$drv" "$W/r" "$seed" 2>/dev/null
                compared=$((compared + 1))
                if ! cmp -s "$W/n.out" "$W/r.out" || ! cmp -s "$W/n.st" "$W/r.st" \
                    || ! cmp -s <(sed "s|$m|PROG|g" "$W/n.err") <(sed "s|$W/o.$drv|PROG|g" "$W/r.err"); then
                    if ! native_stable "$m" "$seed"; then
                        unstable=$((unstable + 1))
                        break
                    fi
                    why="$drv: the rewritten mutant behaves differently (status $(cat "$W/n.st") -> $(cat "$W/r.st"))"
                    break
                fi
            done
        fi
    else
        why="status $st"
    fi
    [ "$(sha256sum <"$m")" = "$sum" ] || why="the input was modified"
    if [ -n "$why" ]; then
        fails=$((fails + 1))
        cp "$m" "$DIR/fail/m$i"
        echo "FAIL m$i (seed ${seed##*/}): $why"
    fi
    rm -f "$m"
done
echo "mutate: $total mutants: $accepted rewritten ($ran ran natively, $compared rewrites compared), $refused refused, $fails failures; $unstable whose two native runs differ (not compared)"
echo "mutate: refusals by reason:"
for r in "${!reasons[@]}"; do echo "  ${reasons[$r]}  $r"; done | sort -rn | head -25
[ "$fails" -eq 0 ]
