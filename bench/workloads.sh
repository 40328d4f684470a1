#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Builds the workloads of the run-time overhead benchmark (bench/overhead.sh) in DIR,
# once (every step is cached; delete DIR or a file in it to redo that step):
#   lua        lua5.4 from Debian's source, built as Debian builds it: gcc makes its VM
#              dispatch by computed gotos (lvm.c's default; LUA_JUMPTABLE=0 builds the
#              switch-dispatch VM instead), running bench/bench.lua
#   bzip2      bzip2 from Debian's source, compressing a generated 30 MB text file
#   sqlite     sqlite3's test/speedtest1.c with the amalgamation sqlite3.c, both from
#              Debian's sqlite3 source (the amalgamation is made with its makefile)
# Each is built twice with gcc: DIR/native/PROG (-O2) and DIR/gcc/PROG (-O2
# -fprofile-arcs). Inputs go to DIR/inputs. The sources come from Debian's package
# registry with `apt-get source`, through a private deb-src list (no root needed).
# Needs: gcc, make, apt-get, dpkg-source (dpkg-dev), tclsh (tcl), the Debian archive
# keyring (debian-archive-keyring).
# Usage: bench/workloads.sh DIR
set -eu
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
BENCH=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$1"
DIR=$(cd "$1" && pwd)
SUITE=${DEBIAN_SUITE:-bookworm}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
CC=${CC:-gcc}
CFLAGS_NATIVE=(-O2)
CFLAGS_GCC=(-O2 -fprofile-arcs)
BZIP2_BYTES=${BZIP2_BYTES:-30000000}
BZIP2_SMALL_BYTES=${BZIP2_SMALL_BYTES:-3000000}

say() { echo "workloads: $*"; }
die() { echo "workloads: $*" >&2; exit 1; }
need() { command -v "$1" >/dev/null || die "needs $1 (apt-get install $2)"; }
need "$CC" gcc
need make make
need apt-get apt
need dpkg-source dpkg-dev
[ -f "$KEYRING" ] || die "needs $KEYRING (apt-get install debian-archive-keyring)"

# --- sources -----------------------------------------------------------------------
APT=$DIR/apt
APTOPT=(-o "Dir::Etc::SourceList=$APT/debian-src.sources" -o "Dir::Etc::SourceParts=/dev/null"
    -o "Dir::State::Lists=$APT/lists" -o "Dir::Cache=$APT/cache"
    -o "Dir::State::status=$APT/status" -o "Debug::NoLocking=1" -q)
# As root apt drops to the _apt user to download, which cannot write into DIR.
[ "$(id -u)" -ne 0 ] || APTOPT+=(-o APT::Sandbox::User=root)

fetch() { # PKG: unpacks the source package into DIR/src/PKG-VERSION (once)
    local pkg=$1 d
    d=$(find "$DIR/src" -maxdepth 1 -type d -name "$pkg-[0-9]*" 2>/dev/null | head -n 1)
    if [ -n "$d" ] && [ -f "$d/.fetched" ]; then
        echo "$d"
        return
    fi
    if [ ! -f "$APT/.updated" ]; then
        mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial"
        : >"$APT/status"
        cat >"$APT/debian-src.sources" <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $SUITE
Components: main
Signed-By: $KEYRING
EOF
        say "apt-get update (private deb-src list for $SUITE)" >&2
        apt-get "${APTOPT[@]}" update >&2 || die "apt-get update failed"
        touch "$APT/.updated"
    fi
    mkdir -p "$DIR/src"
    say "apt-get source $pkg" >&2
    (cd "$DIR/src" && apt-get "${APTOPT[@]}" source "$pkg" >"$DIR/src/$pkg.log" 2>&1) ||
        { cat "$DIR/src/$pkg.log" >&2; die "apt-get source $pkg failed"; }
    d=$(find "$DIR/src" -maxdepth 1 -type d -name "$pkg-[0-9]*" | head -n 1)
    [ -n "$d" ] || die "apt-get source $pkg: no $pkg-VERSION directory"
    touch "$d/.fetched"
    echo "$d"
}

LUA_SRC=$(fetch lua5.4)
BZ_SRC=$(fetch bzip2)
SQL_SRC=$(fetch sqlite3)

# --- builds ------------------------------------------------------------------------
mkdir -p "$DIR/native" "$DIR/gcc" "$DIR/inputs" "$DIR/logs"

# build NAME OUT FLAGS... -- SOURCES... -- LIBS...: one gcc command, atomic result.
build() {
    local name=$1 out=$2 flags=() srcs=() libs=()
    shift 2
    while [ "$1" != -- ]; do flags+=("$1"); shift; done
    shift
    while [ "$1" != -- ]; do srcs+=("$1"); shift; done
    shift
    libs=("$@")
    # Rebuilt when the command line changes (flags, sources, compiler).
    local cmd
    cmd=$(printf '%s\n' "$CC" "${flags[@]}" "${srcs[@]}" "${libs[@]}")
    [ -x "$out" ] && [ "$cmd" = "$(cat "$DIR/logs/$name.cmd" 2>/dev/null)" ] && return 0
    say "building $out"
    # -fprofile-arcs names the .gcda files after the output (OUT-SOURCE.gcda): keep
    # them named after OUT, not the temporary OUT.tmp.
    if ! "$CC" "${flags[@]}" -dumpbase "$out" -o "$out.tmp" "${srcs[@]}" \
        "${libs[@]}" >"$DIR/logs/$name.log" 2>&1; then
        cat "$DIR/logs/$name.log" >&2
        die "build of $out failed"
    fi
    mv -f "$out.tmp" "$out"
    printf '%s\n' "$cmd" >"$DIR/logs/$name.cmd"
}

# lua: every file of src/ but luac.c; Debian's luaconf.h includes a multiarch header
# that its build generates. The string-hash seed is fixed (it mixes time() and
# addresses by default) so that every run does the same work: instruction counts are
# then deterministic.
mkdir -p "$DIR/lua-include"
echo '#define DEB_HOST_MULTIARCH "x86_64-linux-gnu"' >"$DIR/lua-include/lua5.4-deb-multiarch.h"
LUA_SRCS=()
for f in "$LUA_SRC"/src/*.c; do
    [ "${f##*/}" = luac.c ] || LUA_SRCS+=("$f")
done
LUA_FLAGS=(-I"$DIR/lua-include" -DLUA_COMPAT_5_3 -DLUA_USE_LINUX
    ${LUA_JUMPTABLE:+-DLUA_USE_JUMPTABLE="$LUA_JUMPTABLE"} "-Dluai_makeseed(L)=0x2545f491u")

# bzip2: the command-line program and the library, linked statically together.
BZ_SRCS=()
for f in blocksort huffman crctable randtable compress decompress bzlib bzip2; do
    BZ_SRCS+=("$BZ_SRC/$f.c")
done
BZ_FLAGS=(-D_FILE_OFFSET_BITS=64 -w)

# sqlite: the amalgamation, made by the tree's own makefile (needs tclsh).
AMALG=$DIR/sqlite-amalgamation
if [ ! -f "$AMALG/sqlite3.c" ]; then
    need tclsh tcl
    say "making the sqlite3 amalgamation"
    rm -rf "$AMALG.tmp" && mkdir -p "$AMALG.tmp"
    (cd "$AMALG.tmp" && "$SQL_SRC/configure" --disable-tcl >"$DIR/logs/sqlite-configure.log" 2>&1 &&
        make sqlite3.c >"$DIR/logs/sqlite-amalgamation.log" 2>&1) ||
        { tail -n 20 "$DIR/logs/sqlite-"*.log >&2; die "sqlite3 amalgamation failed"; }
    rm -rf "$AMALG" && mv "$AMALG.tmp" "$AMALG"
fi
SQL_FLAGS=(-I"$AMALG" -w)
SQL_SRCS=("$SQL_SRC/test/speedtest1.c" "$AMALG/sqlite3.c")

# Two compilers at a time (the machine has 2 cores).
pids=()
build lua-native "$DIR/native/lua" "${CFLAGS_NATIVE[@]}" "${LUA_FLAGS[@]}" -- "${LUA_SRCS[@]}" -- -lm &
pids+=($!)
build lua-gcc "$DIR/gcc/lua" "${CFLAGS_GCC[@]}" "${LUA_FLAGS[@]}" -- "${LUA_SRCS[@]}" -- -lm &
pids+=($!)
for p in "${pids[@]}"; do wait "$p"; done
pids=()
build bzip2-native "$DIR/native/bzip2" "${CFLAGS_NATIVE[@]}" "${BZ_FLAGS[@]}" -- "${BZ_SRCS[@]}" -- &
pids+=($!)
build bzip2-gcc "$DIR/gcc/bzip2" "${CFLAGS_GCC[@]}" "${BZ_FLAGS[@]}" -- "${BZ_SRCS[@]}" -- &
pids+=($!)
for p in "${pids[@]}"; do wait "$p"; done
pids=()
build sqlite-native "$DIR/native/speedtest1" "${CFLAGS_NATIVE[@]}" "${SQL_FLAGS[@]}" -- "${SQL_SRCS[@]}" -- -lm &
pids+=($!)
build sqlite-gcc "$DIR/gcc/speedtest1" "${CFLAGS_GCC[@]}" "${SQL_FLAGS[@]}" -- "${SQL_SRCS[@]}" -- -lm &
pids+=($!)
for p in "${pids[@]}"; do wait "$p"; done

# --- inputs ------------------------------------------------------------------------
cp -f "$BENCH/bench.lua" "$DIR/inputs/bench.lua"
if [ ! -x "$DIR/gendata" ]; then
    "$CC" -O2 -o "$DIR/gendata.tmp" "$BENCH/gendata.c" && mv -f "$DIR/gendata.tmp" "$DIR/gendata"
fi
gen() { # FILE BYTES
    if [ ! -f "$1" ] || [ "$(stat -c %s "$1")" -ne "$2" ]; then
        say "generating $1 ($2 bytes)"
        "$DIR/gendata" "$2" >"$1.tmp" && mv -f "$1.tmp" "$1"
    fi
}
gen "$DIR/inputs/bzip2-large.txt" "$BZIP2_BYTES"
gen "$DIR/inputs/bzip2-small.txt" "$BZIP2_SMALL_BYTES"

say "ready in $DIR:"
for f in "$DIR"/native/* "$DIR"/gcc/* "$DIR"/inputs/*; do
    case $f in *.gcda) ;; *) printf '  %10d %s\n' "$(stat -c %s "$f")" "$f" ;; esac
done
