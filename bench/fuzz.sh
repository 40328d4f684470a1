#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# The fuzzing campaign, runnable by anyone from the repository (`make fuzz`): builds the
# four fuzz targets of tests/ for libFuzzer with ASan and UBSan in BUILD (a separate
# clang build of the libraries, with coverage), makes seeds, runs each target for
# FUZZ_SECONDS (default 60) and prints executions, new inputs and crashes:
#   fuzz_reader   the ELF reader and the CFG builder (tests/fuzz_reader.c)
#   fuzz_rewrite  the whole static rewrite into a file read back (tests/fuzz_rewrite.c)
#   fuzz_profile  reading, reporting, merging and writing profiles (tests/fuzz_profile.c)
#   fuzz_desc     the description parser, .qpt.desc sections (tests/fuzz_desc.c)
# Crashes are kept in BUILD/crashes-TARGET/; replay one with the `make check` build of the
# target (tests/fuzz_X FILE) or BUILD/fuzz_X FILE. Exit 1 when a target crashed.
# Needs clang with libFuzzer (Debian: clang, libclang-rt-14-dev).
# Usage: FUZZ_SRC=SRCDIR bench/fuzz.sh BUILD
set -u
BUILD=${1:?usage: FUZZ_SRC=SRCDIR $0 BUILD}
SRC=${FUZZ_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
SECS=${FUZZ_SECONDS:-60}
say() { echo "fuzz: $*"; }
command -v clang >/dev/null || { say "needs clang (apt-get install clang)"; exit 2; }
mkdir -p "$BUILD" && cd "$BUILD" || exit 2
printf 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }\n' >probe.c
clang -fsanitize=fuzzer probe.c -o probe 2>/dev/null ||
    { say "clang cannot link -fsanitize=fuzzer (apt-get install libclang-rt-14-dev)"; exit 2; }

# A copy of the sources (the source tree may be configured in place, which forbids a
# second build directory), configured with clang, coverage and sanitizers. The copy is
# brought up to date on every run (the fuzzers must test today's code); a changed build
# description starts it afresh.
copy_sources() {
    if git -C "$SRC" rev-parse >/dev/null 2>&1; then
        git -C "$SRC" ls-files -z | (cd "$SRC" && xargs -0 tar cf -) | tar xf - -C src
    else
        (cd "$SRC" && tar cf - --exclude=fuzz-build .) | tar xf - -C src
        (cd src && make distclean >/dev/null 2>&1)
    fi
}
if [ -f src/Makefile ] && cmp -s src/configure.ac "$SRC/configure.ac" \
    && cmp -s src/Makefile.am "$SRC/Makefile.am"; then
    copy_sources
else
    say "configuring a clang build with coverage and sanitizers in $BUILD/src"
    rm -rf src && mkdir src
    copy_sources
    (cd src && { [ -x configure ] || autoreconf -fi; } &&
        CC=clang CFLAGS="-g -O1 -fsanitize=fuzzer-no-link" ./configure --enable-sanitizers \
            --disable-dynamic) >configure.log 2>&1 ||
        { say "configure failed: $BUILD/configure.log"; exit 2; }
fi
# The fuzz targets' link lists come from Makefile.am (`make fuzz-ldadd`: the replay
# builds' lists), so that a library added there is linked here too; the folders' libtool
# convenience libraries named in them are built and their archives (src/.libs) used.
links=$(make -s --no-print-directory -C src fuzz-ldadd) ||
    { say "no link lists from src/Makefile (make fuzz-ldadd)"; exit 2; }
lts=$(echo "$links" | tr ' ' '\n' | grep '\.la$' | sort -u)
make -C src -j2 $lts >make.log 2>&1 || { say "build failed: $BUILD/make.log"; exit 2; }
for a in $lts; do
    cp "src/.libs/${a%.la}.a" .
done
LF=(-g -O1 -fsanitize=fuzzer,address,undefined -Isrc)
SRC=$PWD/src
while read -r t libs; do
    args=()
    for l in $libs; do
        case $l in *.la) args+=("${l%.la}.a") ;; *) args+=("$l") ;; esac
    done
    clang "${LF[@]}" "$SRC/tests/fuzz_$t.c" "$SRC/tests/fuzz_util.c" "${args[@]}" -o "fuzz_$t" ||
        { say "linking fuzz_$t failed"; exit 2; }
done <<<"$links"

# Seeds: small stripped programs (C, C++ with exceptions, a jump table), and profiles of
# a rewritten one (one run; runs with forked children, whose slots are in use).
mkdir -p seeds-elf seeds-prof seeds-desc
if [ -z "$(ls seeds-elf)" ]; then
    for p in switch_dense recursion exceptions; do
        f=$(ls "$SRC/tests/progs/$p".c* 2>/dev/null | head -n 1)
        case $f in
        *.c) gcc -O2 -o "seeds-elf/$p" "$f" ;;
        *.cc) g++ -O2 -o "seeds-elf/$p" "$f" ;;
        esac && strip "seeds-elf/$p"
    done
    cp /usr/bin/true seeds-elf/true
fi
if [ -z "$(ls seeds-prof)" ]; then
    qpt=${QPT_REWRITE:-$(command -v qpt-rewrite)}
    "$qpt" seeds-elf/recursion -o prof.inst 2>/dev/null &&
        QP_PROFILE=$PWD/seeds-prof/one.qp ./prof.inst >/dev/null 2>&1
    cp seeds-prof/one.qp seeds-prof/two.qp 2>/dev/null &&
        QP_PROFILE=$PWD/seeds-prof/two.qp ./prof.inst >/dev/null 2>&1
fi
if [ -z "$(ls seeds-desc)" ]; then
    qpt=${QPT_REWRITE:-$(command -v qpt-rewrite)}
    for p in recursion exceptions; do
        for drv in qp naive; do
            "$qpt" --driver=$drv seeds-elf/$p -o desc.inst 2>/dev/null &&
                objcopy --dump-section .qpt.desc="seeds-desc/$p.$drv" desc.inst 2>/dev/null &&
                # also decompressed: the target reads its input both ways (tests/fuzz_desc.c)
                python3 "$SRC/bench/desc-inflate.py" "seeds-desc/$p.$drv" \
                    >"seeds-desc/$p.$drv.inflated" ||
                echo "fuzz.sh: seeds-desc/$p.$drv: not inflated" >&2
        done
    done
fi

st=0
for t in reader rewrite profile desc; do
    case $t in
    profile) seeds=seeds-prof max=1600000 ;;
    desc) seeds=seeds-desc max=65536 ;;
    *) seeds=seeds-elf max=65536 ;;
    esac
    mkdir -p "corpus-$t" "crashes-$t"
    ./fuzz_$t -max_total_time="$SECS" -max_len=$max -timeout=30 -rss_limit_mb=4096 \
        -print_final_stats=1 -artifact_prefix="crashes-$t/" "corpus-$t" "$seeds" \
        >"fuzz-$t.log" 2>&1
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "fuzz-$t.log")
    crashes=$(ls "crashes-$t" | wc -l)
    say "$t: ${execs:-?} executions in ${SECS}s, $(ls "corpus-$t" | wc -l) inputs in its corpus, $crashes crashes"
    [ "$crashes" -eq 0 ] || st=1
done
exit $st
