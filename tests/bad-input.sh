#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Bad inputs for `qpt-rewrite --dump-cfg FILE`. Three kinds of case:
#   strict   (not an x86-64 executable: empty, text, missing, directory, /dev/null,
#            ELF32, another machine, a truncated file): the exit
#            status is 1..127 and stderr is exactly one line "qpt-rewrite: FILE: reason".
#   lenient  (corrupted header fields, section and program header entries, seeded
#            random byte flips): the exit status is 0 or 1, never a signal, never a
#            hang; when it is 1, stderr is exactly that one line; when it is 0, stderr
#            holds nothing but "qpt-rewrite: " lines (libraries never print).
#   layout   (a g++ -O2 program whose section header for SECTION no longer matches the
#            segment that loads it: sh_addr or sh_offset moved, or both moved together
#            away from PT_GNU_EH_FRAME or PT_DYNAMIC, .text longer than its segment's
#            bytes, .bss outside its memory; the file is layout-SECTION-WHAT):
#            --dump-cfg and the rewrite (--driver=none -o OUT) both exit 1 with the one
#            line "qpt-rewrite: FILE: section SECTION at 0x... does not match its
#            segment (...)", OUT is not written and FILE is unchanged.
# The inputs are made in $top_builddir/tests/bad.d from a program of tests/progs (or a
# copy of /bin/true when no compiler is there); failing inputs are kept there. When
# tests/fuzz_reader has been built, it is also run on every input (it must not crash).
# Exit status: 0 pass, 1 fail, 99 hard error.
set -u

# shellcheck source=tests/lib.sh
. "${top_srcdir:-.}/tests/lib.sh"

QP_BAD_TIMEOUT=${QP_BAD_TIMEOUT:-60}
export LC_ALL=C

# check_layout FILE: a layout case (see above); prints "ok" or "fail FILE REASON".
check_layout() {
    local file=$1 sec st line sum out err n mode
    sec=${file##*/layout-}
    sec=.${sec%-*}
    sum=$(cksum <"$file")
    out=$file.out
    err=$QP_BAD_DIR/stderr/${file//\//_}
    for mode in dump rewrite; do
        rm -f "$out"
        if [ "$mode" = dump ]; then
            timeout "$QP_BAD_TIMEOUT" "$QPT_REWRITE" --dump-cfg "$file" >/dev/null 2>"$err"
        else
            timeout "$QP_BAD_TIMEOUT" "$QPT_REWRITE" --driver=none "$file" -o "$out" \
                >/dev/null 2>"$err"
        fi
        st=$?
        n=$(wc -l <"$err")
        read -r line <"$err"
        if [ "$st" -ne 1 ] || [ "$n" -ne 1 ]; then
            echo "fail layout $file $mode: exit $st with $n stderr lines, expected 1 and 1: $line"
            return
        fi
        if [[ $line != "qpt-rewrite: $file: section $sec at 0x"*" does not match its segment ("*")" ]]; then
            echo "fail layout $file $mode: not the expected refusal: $line"
            return
        fi
        if [ -e "$out" ]; then
            echo "fail layout $file $mode: exit 1 but $out was written"
            return
        fi
    done
    if [ "$(cksum <"$file")" != "$sum" ]; then
        echo "fail layout $file: the input changed"
        return
    fi
    echo "ok layout $file 1"
}

# check_one KIND FILE: run the tool and print "ok" or "fail FILE REASON".
check_one() {
    local kind=$1 file=$2 st n line first='' err
    if [ "$kind" = layout ]; then
        check_layout "$file"
        return
    fi
    err=$QP_BAD_DIR/stderr/${file//\//_}
    timeout "$QP_BAD_TIMEOUT" "$QPT_REWRITE" --dump-cfg "$file" >/dev/null 2>"$err"
    st=$?
    n=0
    while IFS= read -r line || [ -n "$line" ]; do
        [ "$n" -eq 0 ] && first=$line
        n=$((n + 1))
    done <"$err"
    if [ "$st" -eq 124 ]; then
        echo "fail $kind $file timed out after ${QP_BAD_TIMEOUT}s"
        return
    fi
    if [ "$st" -ge 128 ]; then
        echo "fail $kind $file killed by signal $((st - 128)) ($first)"
        return
    fi
    case $kind.$st in
    strict.0)
        echo "fail $kind $file exit status 0, expected an error"
        return
        ;;
    lenient.0)
        # Accepted: only the tool may speak, never a library (BFD warnings, say).
        if [ "$n" -gt 0 ] && [ "$(grep -v -c '^qpt-rewrite: ' "$err")" -gt 0 ]; then
            echo "fail $kind $file exit 0 but stderr has lines not from qpt-rewrite:" \
                "$(grep -v -m 1 '^qpt-rewrite: ' "$err")"
        else
            echo "ok $kind $file 0"
        fi
        return
        ;;
    lenient.1 | strict.*) ;;
    *)
        echo "fail $kind $file exit status $st, expected 0 or 1"
        return
        ;;
    esac
    if [ "$n" -ne 1 ]; then
        echo "fail $kind $file exit $st with $n stderr lines, expected 1: $first"
    elif [[ $first != "qpt-rewrite: $file: "?* ]]; then
        echo "fail $kind $file exit $st, stderr not 'qpt-rewrite: $file: reason': $first"
    else
        echo "ok $kind $file $st"
    fi
}

# poke FILE OFFSET BYTE...: overwrite bytes (decimal values) in place.
poke() {
    local f=$1 off=$2 s='' b
    shift 2
    for b; do
        s+=$(printf '\\%03o' "$((b & 255))")
    done
    # A scratch file per worker rather than a pipe: fork+exec is the cost here.
    # shellcheck disable=SC2059 # the format is the bytes, as octal escapes
    printf "$s" >"$QP_BAD_DIR/.poke.$$"
    dd if="$QP_BAD_DIR/.poke.$$" of="$f" bs=1 seek="$off" conv=notrunc status=none
}

# poke_le FILE OFFSET NBYTES VALUE: a little-endian integer.
poke_le() {
    local f=$1 off=$2 n=$3 v=$4 i bytes=()
    for ((i = 0; i < n; i++)); do
        bytes+=($(((v >> (8 * i)) & 255)))
    done
    poke "$f" "$off" "${bytes[@]}"
}

# make_case FILE OP ARGS...: create a derived input in the worker, so that making the
# inputs runs in parallel too.
#   field SRC OFFSET NBYTES VALUE   a copy of SRC with one little-endian field changed
#   field2 SRC OFF1 N1 V1 OFF2 N2 V2  ... with two
#   flips SRC LO HI SEED            a copy of SRC with 1-4 random bytes in [LO, HI)
make_case() {
    local out=$1 op=$2 j nb off
    cp "$3" "$out"
    case $op in
    field) poke_le "$out" "$4" "$5" "$6" ;;
    field2)
        poke_le "$out" "$4" "$5" "$6"
        poke_le "$out" "$7" "$8" "$9"
        ;;
    flips)
        RANDOM=$6
        nb=$((RANDOM % 4 + 1))
        for ((j = 0; j < nb; j++)); do
            off=$(($4 + (RANDOM * 32768 + RANDOM) % ($5 - $4)))
            poke "$out" "$off" $((RANDOM % 256))
        done
        ;;
    esac
}

if [ "${1:-}" = "--one" ]; then
    # Arguments: DIR, then cases "KIND FILE [OP ARGS...] ;".
    shift
    QP_BAD_DIR=$1
    shift
    c=()
    for a; do
        if [ "$a" != ";" ]; then
            c+=("$a")
            continue
        fi
        [ "${#c[@]}" -le 2 ] || make_case "${c[@]:1}"
        check_one "${c[0]}" "${c[1]}"
        c=()
    done
    exit 0
fi

if [ ! -x "$QPT_REWRITE" ]; then
    echo "bad-input.sh: ERROR: $QPT_REWRITE not found (build it first)"
    exit 99
fi
for t in timeout xargs od dd; do
    qp_have "$t" || { echo "bad-input.sh: ERROR: $t not found"; exit 99; }
done

rm -rf "$top_builddir/tests/bad.d"
mkdir -p "$top_builddir/tests/bad.d" || exit 99
dir=$(cd "$top_builddir/tests/bad.d" && pwd)
QP_BAD_DIR=$dir
mkdir -p "$dir/stderr"
cases=$dir/CASES
: >"$cases"

# add KIND FILE [OP ARGS...]: one case (see make_case).
add() {
    echo "$* ;" >>"$cases"
}

# peek_le FILE OFFSET NBYTES: a little-endian unsigned integer.
peek_le() {
    od -An -v -t "u$3" -j "$2" -N "$3" "$1" | tr -d ' '
}

# variant NAME SRC OFFSET NBYTES VALUE: a copy of SRC with one field changed, lenient.
variant() {
    add lenient "$dir/$1" field "$2" "$3" "$4" "$5"
}

# The base executables.
base=$dir/base
if qp_have gcc && gcc -O2 -g -o "$base" "$QP_PROGS_DIR/switch_dense.c" 2>/dev/null; then
    :
elif qp_have clang && clang -O2 -g -o "$base" "$QP_PROGS_DIR/switch_dense.c" 2>/dev/null; then
    :
else
    cp /bin/true "$base" || exit 99
fi
basexx=$dir/basexx
if ! { qp_have g++ && g++ -O2 -g -o "$basexx" "$QP_PROGS_DIR/exceptions.cc" 2>/dev/null; }; then
    cp "$base" "$basexx"
fi
size=$(stat -c %s "$base")

# Not executables at all.
: >"$dir/empty"
add strict "$dir/empty"
printf 'This is a text file, not an executable.\nSecond line.\n' >"$dir/text"
add strict "$dir/text"
printf '#!/bin/sh\necho hello\n' >"$dir/script.sh"
add strict "$dir/script.sh"
printf '\177ELF' >"$dir/magic-only"
add strict "$dir/magic-only"
add strict "$dir/does-not-exist"
mkdir -p "$dir/a-directory"
add strict "$dir/a-directory"
add strict /dev/null
head -c 4096 /dev/zero >"$dir/zeros"
add strict "$dir/zeros"

# ELF32: a real one if gcc -m32 works, always a minimal hand-made header (EM_386), and
# copies of the base with EI_CLASS = ELFCLASS32 (whole and truncated).
if qp_have gcc && gcc -m32 -o "$dir/elf32-real" "$QP_PROGS_DIR/switch_dense.c" 2>/dev/null; then
    add strict "$dir/elf32-real"
fi
printf '\177ELF\001\001\001\000\000\000\000\000\000\000\000\000' >"$dir/elf32-header"
printf '\002\000\003\000\001\000\000\000\000\200\004\010\064\000\000\000' >>"$dir/elf32-header"
printf '\000\000\000\000\000\000\000\000\064\000\040\000\000\000\050\000\000\000\000\000' \
    >>"$dir/elf32-header"
add strict "$dir/elf32-header"
cp "$dir/elf32-header" "$dir/elf32-header-x86_64"
poke "$dir/elf32-header-x86_64" 18 62 0
add strict "$dir/elf32-header-x86_64"
cp "$base" "$dir/elf32-class"
poke "$dir/elf32-class" 4 1
add strict "$dir/elf32-class"
head -c 2000 "$dir/elf32-class" >"$dir/elf32-class-truncated"
add strict "$dir/elf32-class-truncated"
for c in 0 3 255; do
    cp "$base" "$dir/bad-class-$c"
    poke "$dir/bad-class-$c" 4 "$c"
    add strict "$dir/bad-class-$c"
done
cp "$base" "$dir/big-endian"
poke "$dir/big-endian" 5 2
add strict "$dir/big-endian"

# Other machines. AArch64 is analysed (--dump-cfg): x86-64 code read as AArch64 is
# lenient (garbage instructions, never a crash).
for m in 183:aarch64 3:i386 40:arm 243:riscv 0:none; do
    cp "$base" "$dir/machine-${m#*:}"
    poke_le "$dir/machine-${m#*:}" 18 2 "${m%%:*}"
    kind=strict
    [ "${m%%:*}" = 183 ] && kind=lenient
    add $kind "$dir/machine-${m#*:}"
done

# Shared libraries are read (tests/shlib.sh rewrites them): libc (which has a PT_INTERP
# and runs) and a tiny one.
for so in /lib/x86_64-linux-gnu/libc.so.6 /lib/x86_64-linux-gnu/libm.so.6; do
    [ -f "$so" ] && add lenient "$so"
done
printf 'int qp_tiny(int x) { return x * 3 + 1; }\n' >"$dir/tiny.c"
if qp_have gcc && gcc -shared -fPIC -O2 -o "$dir/tiny.so" "$dir/tiny.c" 2>/dev/null; then
    add lenient "$dir/tiny.so"
    # An object file and an archive are not executables either; what the tool says
    # about them is free, but it must not crash.
    if gcc -c -O2 -o "$dir/tiny.o" "$dir/tiny.c" 2>/dev/null; then
        add lenient "$dir/tiny.o"
        if qp_have ar && ar rcs "$dir/tiny.a" "$dir/tiny.o" 2>/dev/null; then
            add lenient "$dir/tiny.a"
        fi
    fi
fi

# Truncated copies: fixed lengths and ten spread over the file.
lengths="0 1 4 16 52 63 64 65 100 1000 4096"
for k in 1 2 3 4 5 6 7 8 9 10; do
    lengths+=" $((size * k / 11))"
done
lengths+=" $((size - 1))"
for len in $lengths; do
    [ "$len" -lt "$size" ] || continue
    head -c "$len" "$base" >"$dir/truncated-$len"
    add strict "$dir/truncated-$len"
done
xxsize=$(stat -c %s "$basexx")
for k in 1 3 5 7 9; do
    len=$((xxsize * k / 10))
    head -c "$len" "$basexx" >"$dir/truncatedxx-$len"
    add strict "$dir/truncatedxx-$len"
done

# Corrupted ELF header fields.
huge=$((0x7ffffffffffff000))
shoff=$(peek_le "$base" 40 8)
shnum=$(peek_le "$base" 60 2)
phoff=$(peek_le "$base" 32 8)
phnum=$(peek_le "$base" 56 2)
for v in 0 1 $huge -1 $size $((size - 1)) $((size - 64)) $((shoff + 1)) 64; do
    variant "e_shoff-$v" "$base" 40 8 "$v"
done
for v in 0 1 $huge -1 $size $((size - 8)) $shoff; do
    variant "e_phoff-$v" "$base" 32 8 "$v"
done
for v in 0 1 2 $((shnum + 1)) 255 4096 65535; do
    variant "e_shnum-$v" "$base" 60 2 "$v"
done
for v in 0 1 $((shnum - 1)) $shnum 255 65279 65535; do
    variant "e_shstrndx-$v" "$base" 62 2 "$v"
done
for v in 0 1 $((phnum + 1)) 100 65535; do
    variant "e_phnum-$v" "$base" 56 2 "$v"
done
for v in 0 1 32 63 65 65535; do
    variant "e_shentsize-$v" "$base" 58 2 "$v"
    variant "e_phentsize-$v" "$base" 54 2 "$v"
done
for v in 0 1 $huge -1 4096; do
    variant "e_entry-$v" "$base" 24 8 "$v"
done
for v in 0 1 4 65535; do
    variant "e_type-$v" "$base" 16 2 "$v"
done
variant e_ehsize-0 "$base" 52 2 0
variant e_ehsize-65535 "$base" 52 2 65535
variant ei_version-0 "$base" 6 1 0
variant ei_osabi-97 "$base" 7 1 97
variant e_version-7 "$base" 20 4 7

# Corrupted section header entries: every section of both bases, several fields each.
# Offsets within an Elf64_Shdr: name 0, type 4, flags 8, addr 16, offset 24, size 32,
# link 40, info 44, addralign 48, entsize 56.
for b in base basexx; do
    f=$dir/$b
    shoff=$(peek_le "$f" 40 8)
    shnum=$(peek_le "$f" 60 2)
    fsize=$(stat -c %s "$f")
    for ((i = 1; i < shnum; i++)); do
        e=$((shoff + 64 * i))
        variant "$b-sh$i-offset-huge" "$f" $((e + 24)) 8 $huge
        variant "$b-sh$i-size-huge" "$f" $((e + 32)) 8 $huge
        variant "$b-sh$i-link-huge" "$f" $((e + 40)) 4 $((0xfffffff0))
        variant "$b-sh$i-entsize-0" "$f" $((e + 56)) 8 0
        variant "$b-sh$i-type-nobits" "$f" $((e + 4)) 4 8
        [ "$b" = base ] || continue
        variant "$b-sh$i-offset-end" "$f" $((e + 24)) 8 $((fsize - 1))
        variant "$b-sh$i-size-file" "$f" $((e + 32)) 8 "$fsize"
        variant "$b-sh$i-name-huge" "$f" "$e" 4 $((0xfffffff0))
        variant "$b-sh$i-addr-huge" "$f" $((e + 16)) 8 $huge
    done
    # Program header entries: offset 8, vaddr 16, filesz 32, memsz 40, align 48, type 0.
    phoff=$(peek_le "$f" 32 8)
    phnum=$(peek_le "$f" 56 2)
    for ((i = 0; i < phnum; i++)); do
        e=$((phoff + 56 * i))
        variant "$b-ph$i-offset-huge" "$f" $((e + 8)) 8 $huge
        variant "$b-ph$i-filesz-huge" "$f" $((e + 32)) 8 $huge
        variant "$b-ph$i-memsz-0" "$f" $((e + 40)) 8 0
        variant "$b-ph$i-vaddr-huge" "$f" $((e + 16)) 8 $huge
        variant "$b-ph$i-type-dynamic" "$f" "$e" 4 2
        # BFD 2.40 itself prints a warning for this one (never a line of ours to stderr).
        variant "$b-ph$i-align-3" "$f" $((e + 48)) 8 3
    done
done

# Section headers that disagree with the segments (the program runs: the loader uses
# only segments), in the g++ -O2 program: the sections the analysis and the editor read.
# shdr_entry FILE NAME: the file offset of the section header named NAME (empty if none).
shdr_entry() {
    local idx
    qp_have readelf || return 0
    idx=$(readelf -SW "$1" 2>/dev/null | sed -n "s/^ *\[ *\([0-9]*\)\] $2 .*/\1/p" | head -n 1)
    [ -n "$idx" ] || return 0
    echo $(($(peek_le "$1" 40 8) + 64 * idx))
}
if [ "$(cksum <"$basexx")" != "$(cksum <"$base")" ]; then
    for sec in .eh_frame .text .gcc_except_table .eh_frame_hdr .dynamic .init_array .bss; do
        e=$(shdr_entry "$basexx" "$sec")
        [ -n "$e" ] || continue
        addr=$(peek_le "$basexx" $((e + 16)) 8)
        off=$(peek_le "$basexx" $((e + 24)) 8)
        name=$dir/layout-${sec#.}
        if [ "$sec" = .bss ]; then
            # No bytes in the file: only its address can be wrong.
            add layout "$name-addr" field "$basexx" $((e + 16)) 8 $((addr + 0x100000))
            continue
        fi
        add layout "$name-addr" field "$basexx" $((e + 16)) 8 $((addr + 16))
        add layout "$name-offset" field "$basexx" $((e + 24)) 8 $((off + 16))
        case $sec in
        .eh_frame_hdr | .dynamic)
            # Both moved together: consistent with PT_LOAD, not with PT_GNU_EH_FRAME or
            # PT_DYNAMIC.
            add layout "$name-both" field2 "$basexx" $((e + 16)) 8 $((addr + 8)) \
                $((e + 24)) 8 $((off + 8))
            ;;
        .text)
            # Up to the end of the file: past the segment's file part, not the file's.
            add layout "$name-size" field "$basexx" $((e + 32)) 8 $((xxsize - off))
            ;;
        esac
    done
fi

# Seeded random byte flips: in the ELF header and program headers, in the section
# header table, inside named sections, and anywhere. RANDOM=42 makes it repeatable.
RANDOM=42
# flips NAME SRC COUNT LO HI: COUNT mutants, each seeded from RANDOM.
flips() {
    local m
    [ "$5" -gt "$4" ] || return 0
    for ((m = 0; m < $3; m++)); do
        add lenient "$dir/$1-$m" flips "$2" "$4" "$5" $RANDOM
    done
}
# section_range FILE NAME: "offset end" of a section, from readelf (empty if absent).
section_range() {
    local r
    qp_have readelf || return 0
    r=$(readelf -SW "$1" 2>/dev/null | awk -v n="$2" '{
        sub(/^ *\[ *[0-9]+\] */, "")
        if ($1 == n) { print $4, $5; exit } }')
    [ -n "$r" ] || return 0
    # shellcheck disable=SC2086 # two words
    set -- $r
    echo "$((16#$1)) $((16#$1 + 16#$2))"
}
phend=$(($(peek_le "$base" 32 8) + 56 * $(peek_le "$base" 56 2)))
flips flip-header "$base" 30 0 64
flips flip-phdrs "$base" 30 0 "$phend"
shoff=$(peek_le "$base" 40 8)
flips flip-shdrs "$base" 40 "$shoff" "$size"
flips flip-anywhere "$base" 20 0 "$size"
for s in .eh_frame .eh_frame_hdr .gcc_except_table .dynamic .rela.dyn .rela.plt .symtab \
    .strtab .dynsym .text .init_array .note.gnu.property .debug_info; do
    r=$(section_range "$basexx" "$s")
    [ -n "$r" ] || continue
    # shellcheck disable=SC2086 # two words: offset and end
    flips "flipxx$s" "$basexx" 10 $r
done

ncases=$(wc -l <"$cases")
echo "bad-input.sh: $ncases inputs in $dir"
results=$dir/RESULTS
start=$(date +%s)
xargs -P "$QP_JOBS" -L 16 bash "$0" --one "$dir" <"$cases" >"$results"
end=$(date +%s)

nok=$(grep -c '^ok ' "$results")
nfail=$(grep -c '^fail ' "$results")
nzero=$(grep -c '^ok lenient .* 0$' "$results")
echo "layout inputs refused as expected: $(grep -c '^ok layout ' "$results") of $(grep -c '^layout ' "$cases")"
echo "lenient inputs accepted (exit 0): $nzero of $(grep -c '^lenient ' "$cases")"
echo "rejected (the first stderr line of each kind of reason):"
cat "$dir"/stderr/* 2>/dev/null | sed 's/^qpt-rewrite: [^:]*: //' | sort | uniq -c | sort -rn |
    head -n 12 | sed 's/^/  /'

# The reader under the fuzz harness, when built (make check builds it): no crash.
fuzz=$top_builddir/tests/fuzz_reader
fuzz_fail=0
if [ -x "$fuzz" ]; then
    awk '{ print $2 }' "$cases" | grep -v '^/dev/' | grep -v -e '/does-not-exist$' -e '/a-directory$' |
        xargs -n 50 "$fuzz" >"$dir/fuzz_reader.log" 2>&1
    st=$?
    if [ "$st" -ne 0 ]; then
        fuzz_fail=1
        echo "FAIL: $fuzz exited $st on the bad inputs (see $dir/fuzz_reader.log):"
        tail -n 5 "$dir/fuzz_reader.log" | sed 's/^/  /'
    else
        echo "fuzz_reader: no crash on $(grep -c . "$cases") inputs"
    fi
fi

if [ "$nfail" -gt 0 ]; then
    echo "FAILURES (reproduce with: $QPT_REWRITE --dump-cfg FILE):"
    grep '^fail ' "$results" | sort | sed 's/^fail /  /'
fi
rm -f "$dir"/.poke.*
# Keep only the inputs that failed (and the bases), to save space.
awk '$1 == "ok" && $3 ~ /^\// { print $3 }' "$results" | grep "^$dir/" |
    grep -v -e "^$dir/base$" -e "^$dir/basexx$" | xargs rm -rf
echo "bad-input.sh: $((end - start)) s for $ncases inputs"
echo "bad-input: $nok passed, $nfail failed"
[ "$nfail" -eq 0 ] && [ "$fuzz_fail" -eq 0 ]
