#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# libqpt as a user gets it: `make install` into a scratch DESTDIR, then the examples and
# the qpt(3) man page's example built with `cc tool.c $(pkg-config --cflags --libs qpt)`
# against the installed header and library (shared, then static), and run; the shared
# library exports qpt_* only; the man pages render without warnings; `make uninstall`
# takes every file away again.
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
B=$(cd "$top_builddir" && pwd)
S=$(cd "$top_srcdir" && pwd)
D=$B/tests/install.d
rm -rf "$D"
mkdir -p "$D/root" || exit 99
fails=0
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }
command -v pkg-config >/dev/null || { echo "skip: no pkg-config (apt-get install pkg-config)"; exit 77; }

make -s -C "$B" install DESTDIR="$D/root" >"$D/install.log" 2>&1 \
    || { tail -20 "$D/install.log"; echo "FAIL make install"; exit 1; }
pc=$(find "$D/root" -name qpt.pc | head -n 1)
hdr=$(find "$D/root" -path '*/include/qpt/qpt.h' | head -n 1)
so=$(find "$D/root" -name 'libqpt.so.0' | head -n 1)
ar=$(find "$D/root" -name 'libqpt.a' | head -n 1)
man3=$(find "$D/root" -name 'qpt.3*' | head -n 1)
for f in pc hdr so ar man3; do
    [ -n "${!f}" ] || bad "make install: no $f"
done
[ "$fails" -eq 0 ] && ok "make install: qpt.pc, include/qpt/qpt.h, libqpt.so.0, libqpt.a, qpt(3)"
[ -n "$pc" ] || exit 1

export PKG_CONFIG_PATH=${pc%/*} PKG_CONFIG_SYSROOT_DIR=$D/root
flags=$(pkg-config --cflags --libs qpt) || { echo "FAIL pkg-config qpt"; exit 1; }
libdir=${so%/*}

# Only the public names leave the shared library.
other=$(nm -D --defined-only "$so" | awk '$3 !~ /^qpt_/ { print $3 }' | head -n 5)
[ -z "$other" ] && ok "libqpt.so exports qpt_* only ($(nm -D --defined-only "$so" | wc -l) symbols)" \
    || bad "libqpt.so exports: $other"

# The man page's example, as printed.
sed -n '/^\.EX$/,/^\.EE$/p' "$S/doc/qpt.3" | sed '1d;$d' | sed -e 's/\\-/-/g' -e 's/\\e/\\/g' \
    >"$D/manex.c"
for ex in "$S/examples/callcount.c" "$S/examples/coverage.c" "$S/examples/repipe.c" "$D/manex.c"; do
    n=$(basename "$ex" .c)
    # shellcheck disable=SC2086
    if cc -std=gnu11 -Wall -Wextra -Werror "$ex" $flags -o "$D/$n" 2>"$D/$n.err"; then
        ok "cc $n.c \$(pkg-config --cflags --libs qpt)"
    else
        bad "cc $n.c: $(head -n 3 "$D/$n.err")"
    fi
done

# Run against the installed shared library.
cp "$B/tests/qpt/api_prog" "$D/prog" || exit 99
if [ -x "$D/callcount" ]; then
    out=$(LD_LIBRARY_PATH=$libdir "$D/callcount" work "$D/prog" 20 2>&1)
    [ "$(echo "$out" | awk '$2 == "work" { print $1 }')" = 20 ] \
        && ok "callcount (shared): 20 calls" || bad "callcount (shared): $out"
    LD_LIBRARY_PATH=$libdir ldd "$D/callcount" | grep -q "$libdir/libqpt.so.0" \
        && ok "callcount runs on the installed libqpt.so.0" || bad "ldd callcount: not the installed library"
fi

# The man page's example, attached to a running program.
if [ -x "$D/manex" ]; then
    "$D/prog" 2000000000 >/dev/null &
    pid=$!
    sleep 0.2
    out=$(LD_LIBRARY_PATH=$libdir "$D/manex" $pid work 2>&1)
    n=$(echo "$out" | awk '$2 == "work" { print $1 }')
    if echo "$out" | grep -q "ermission"; then
        echo "skip the man page's example: ptrace not permitted"
    elif kill -0 $pid 2>/dev/null && [ -n "$n" ] && [ "$n" -gt 0 ]; then
        ok "qpt(3) example: $n calls in 1 s, the process runs on"
    else
        bad "qpt(3) example: $out"
    fi
    kill $pid 2>/dev/null
    wait $pid 2>/dev/null
fi

# The static library: the same tool, no libqpt.so needed.
static_libs=$(pkg-config --static --libs-only-l qpt | sed 's/-lqpt//')
# shellcheck disable=SC2086
if cc -std=gnu11 -Wall -Werror "$S/examples/callcount.c" $(pkg-config --cflags qpt) "$ar" \
    $static_libs -o "$D/callcount.static" 2>"$D/static.err"; then
    out=$("$D/callcount.static" work "$D/prog" 20 2>&1)
    ldd "$D/callcount.static" | grep -q libqpt && bad "callcount.static needs libqpt.so"
    [ "$(echo "$out" | awk '$2 == "work" { print $1 }')" = 20 ] \
        && ok "callcount (static libqpt.a): 20 calls" || bad "callcount (static): $out"
else
    bad "static link: $(head -n 3 "$D/static.err")"
fi

# Man pages render cleanly.
if command -v groff >/dev/null; then
    for m in "$S"/doc/*.[135]; do
        w=$(groff -man -ww -z "$m" 2>&1)
        [ -z "$w" ] || bad "groff $(basename "$m"): $(echo "$w" | head -n 2)"
    done
    ok "man pages render without warnings"
fi

make -s -C "$B" uninstall DESTDIR="$D/root" >>"$D/install.log" 2>&1 || bad "make uninstall"
left=$(find "$D/root" -type f | head -n 3)
[ -z "$left" ] && ok "make uninstall leaves no file" || bad "make uninstall left: $left"

[ "$fails" -eq 0 ] || exit 1
rm -rf "$D"
exit 0
