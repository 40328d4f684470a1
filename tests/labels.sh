#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Tables of label addresses retargeted (issue 29): tests/progs/computed_goto.c
# dispatches with `goto *table[op]`, table a static array of `&&label` words. Built
# without PIE (-O2: the words in .rodata) and as a PIE (-O1 and -Os: the words written
# at load time from R_X86_64_RELATIVE relocations), rewritten with --driver=none:
#  - every word of `table` in the output (without PIE: the word in the file; in a PIE:
#    its relocation's addend) is the address of new code: inside an executable PT_LOAD
#    of the output and outside the input's executable sections, where the input's
#    words all are;
#  - the output prints what the original prints and exits as it does;
#  - with QPT_KEEP_TABLES set the words stay as they are;
#  - rewritten with --driver=qp and --driver=naive, both print the same, and qp's counts
#    of every procedure equal naive's; --driver=trace prints the same too.
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
. "${top_srcdir:-.}/tests/lib.sh"
QP=${QP:-$top_builddir/tools/qp}
dir=$top_builddir/tests/labels.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
for t in gcc readelf nm od; do
    qp_have $t || { echo "labels.sh: SKIP: no $t"; exit 77; }
done
src=$top_srcdir/tests/progs/computed_goto.c
fail=0

bad() {
    echo "FAIL $*"
    fail=1
}

# words FILE pie|file: the words of `table` in FILE, in hex (0x...), one per line: its
# RELA relocations' addends, or the bytes of the file (also the addends of RELR ones).
words() {
    set -- "$1" "$2" "$(nm -S "$1" | awk '$4 ~ /^table\./ { print $1, $2; exit }')"
    [ -n "$3" ] || return 0
    a=$((0x${3% *})) s=$((0x${3#* }))
    if [ "$2" = pie ]; then
        readelf -rW "$1" | awk '$3 == "R_X86_64_RELATIVE" { print $1, $4 }' |
            while read -r o v; do
                [ $((0x$o)) -ge "$a" ] && [ $((0x$o)) -lt $((a + s)) ] && echo "0x$v"
            done
        return 0
    fi
    # the section holding it: its address and file offset
    readelf -SW "$1" | sed 's/^ *\[ *[0-9]*\] *//' | while read -r _ _ addr off size _; do
        case $addr$off$size in *[!0-9a-f]* | "") continue ;; esac
        [ "$a" -ge $((0x$addr)) ] && [ "$a" -lt $((0x$addr + 0x$size)) ] || continue
        od -An -v -tx8 -j $((0x$off + a - 0x$addr)) -N "$s" "$1" | tr -s ' ' '\n' |
            sed -n 's/^\([0-9a-f]\)/0x\1/p'
        break
    done
}

# in_ranges ADDR RANGES: is ADDR in one of RANGES ("lo hi" lines)?
in_ranges() {
    echo "$2" | while read -r lo hi; do
        [ -n "$lo" ] && [ $(($1)) -ge $((lo)) ] && [ $(($1)) -lt $((hi)) ] && echo yes && break
    done | grep -q yes
}

# The executable sections of FILE and its executable PT_LOADs, as "lo hi" lines.
x_sections() {
    readelf -SW "$1" | sed 's/^ *\[ *[0-9]*\] *//' | awk '$7 ~ /X/ { print $3, $5 }' |
        while read -r a s; do echo "$((0x$a)) $((0x$a + 0x$s))"; done
}
x_loads() {
    readelf -lW "$1" | awk '$1 == "LOAD" && / R E / { print $3, $6 }' |
        while read -r a s; do echo "$((a)) $((a + s))"; done
}

relr=
gcc -O1 -fPIE -pie -Wl,-z,pack-relative-relocs -o "$dir/relr-probe" "$src" >/dev/null 2>&1 &&
    readelf -SW "$dir/relr-probe" | grep -q ' RELR ' && relr="file relr:-fPIE -pie -O1 -Wl,-z,pack-relative-relocs"
[ -n "$relr" ] || echo "skip relr: no -z pack-relative-relocs"
# gcc -O2 -fPIE reads the table for the first dispatch in a way taken for a jump table:
# the other dispatches' targets are its words all the same (run was reported with 418
# calls, one per dispatch translated at run time, where main calls it once).
for v in "file nopie-O2:-fno-pie -no-pie -O2" "pie pie-O1:-fPIE -pie -O1" "pie pie-Os:-fPIE -pie -Os" \
    "pie pie-O2:-fPIE -pie -O2" \
    ${relr:+"$relr"}; do
    name=${v%%:*} flags=${v#*:} link=${name%% *} name=${name#* }
    prog=$dir/cg-$name
    # shellcheck disable=SC2086
    gcc $flags -o "$prog" "$src" 2>"$prog.cc.log" || { bad "$name: cannot build"; continue; }
    "$prog" >"$prog.out" 2>&1
    echo $? >"$prog.status"
    old=$(words "$prog" "$link")
    [ "$(echo "$old" | grep -c .)" = 8 ] || { bad "$name: table has $(echo "$old" | grep -c .) words, not 8"; continue; }
    oldx=$(x_sections "$prog")
    for w in $old; do
        in_ranges "$w" "$oldx" || bad "$name: input word $w is not in its code"
    done
    for keep in 0 1; do
        out=$prog.none$keep
        if [ $keep = 1 ]; then
            QPT_KEEP_TABLES=1 "$QPT_REWRITE" --driver=none "$prog" -o "$out" >"$out.log" 2>&1
        else
            "$QPT_REWRITE" --driver=none "$prog" -o "$out" >"$out.log" 2>&1
        fi || { bad "$name: qpt-rewrite: $(head -n 1 "$out.log")"; continue; }
        "$out" >"$out.out" 2>&1
        echo $? >"$out.status"
        cmp -s "$prog.out" "$out.out" && cmp -s "$prog.status" "$out.status" ||
            bad "$name: output or status of the rewrite differs (keep $keep)"
        new=$(words "$out" "$link")
        if [ $keep = 1 ]; then
            [ "$new" = "$old" ] || bad "$name: QPT_KEEP_TABLES: table changed"
            continue
        fi
        newx=$(x_loads "$out")
        n=0
        for w in $new; do
            if in_ranges "$w" "$newx" && ! in_ranges "$w" "$oldx"; then
                n=$((n + 1))
            else
                bad "$name: word $w of the output's table is no address of new code"
            fi
        done
        [ $n = 8 ] && echo "ok $name: the 8 words of the table point into the new code"
    done
    for drv in qp naive trace; do
        out=$prog.$drv
        "$QPT_REWRITE" --driver=$drv "$prog" -o "$out" >"$out.log" 2>&1 ||
            { bad "$name $drv: qpt-rewrite: $(head -n 1 "$out.log")"; continue; }
        rm -rf "$out.qp"
        QP_PROFILE=$out.qp "$out" >"$out.out" 2>&1
        echo $? >"$out.status"
        cmp -s "$prog.out" "$out.out" && cmp -s "$prog.status" "$out.status" ||
            bad "$name $drv: output or status differs"
        [ $drv = trace ] && continue
        "$QP" report --csv "$out.qp" 2>"$out.err" | sort >"$out.csv" ||
            bad "$name $drv: qp report: $(head -n 1 "$out.err")"
        grep -q '^run,1,' "$out.csv" || bad "$name $drv: run is called once, reported $(grep '^run,' "$out.csv")"
    done
    if [ -s "$prog.qp.csv" ] && cmp -s "$prog.qp.csv" "$prog.naive.csv"; then
        echo "ok $name: qp = naive on $(($(wc -l <"$prog.qp.csv") - 1)) procedures"
    else
        bad "$name: qp and naive counts differ"
        diff "$prog.qp.csv" "$prog.naive.csv" | head -n 10 | sed 's/^/  /'
    fi
done
exit $fail
