#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# libqpt as a user gets it: `make install` into a scratch DESTDIR, then the examples and
# the qpt(3) man page's example built with `cc tool.c $(pkg-config --cflags --libs qpt)`
# against the installed header and library (shared, then static), and run; the shared
# library exports qpt_* (and <qpt/qpt_metrics.h>'s qm_*) only; one version everywhere; the man pages render without
# warnings; `make uninstall` takes every file away again. Then `make install prefix=P`:
# the examples built with plain pkg-config and run from P.
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

# Only the public names leave the shared library, each with the symbol version QPT_0
# (the version node itself is the one other name): qpt_* calls, and the metric
# language's qm_* calls that <qpt/qpt_metrics.h> declares.
other=$(nm -D --defined-only "$so" | awk '$3 !~ /^q(pt|m)_[a-z0-9_]*@@QPT_0$/ && $3 != "QPT_0" { print $3 }' \
    | head -n 5)
for m in $(nm -D --defined-only "$so" | awk '$3 ~ /^q(pt|m)_/ { sub(/@.*/, "", $3); print $3 }'); do
    cat "$(dirname "$hdr")"/*.h | grep -q "[ *]$m(" || other="$other $m (in no installed header)"
done
[ -z "$other" ] && ok "libqpt.so exports its headers' qpt_* and qm_* calls only ($(nm -D --defined-only "$so" | wc -l) symbols)" \
    || bad "libqpt.so exports: $other"
# The metric language through the installed header: parse a metric, free it.
cat >"$D/mlang.c" <<'MEOF'
#include <stdio.h>
#include <qpt/qpt_metrics.h>
int main(void)
{
    char why[256];
    qm_set_t *set = NULL;
    if (qm_parse("count calls(main) total", "-e", 1, &set, why, sizeof(why)) != 0)
        return 1;
    printf("%zu %s\n", qm_count(set), qm_name(set, 0));
    qm_free(set);
    return 0;
}
MEOF
# shellcheck disable=SC2086
if cc -std=gnu11 -Wall -Wextra -Werror "$D/mlang.c" $flags -o "$D/mlang" 2>"$D/mlang.err" &&
    [ "$(LD_LIBRARY_PATH=$(dirname "$so") "$D/mlang")" = "1 count calls(main) total" ]; then
    ok "<qpt/qpt_metrics.h>: a metric parsed through the installed library"
else
    bad "<qpt/qpt_metrics.h>: $(head -n 3 "$D/mlang.err")"
fi

# The man page's example (its EXAMPLE section's .EX block), as printed.
awk '/^\.SH EXAMPLE/ { on = 1 } on && /^\.EE$/ { exit } on && ex { print } on && /^\.EX$/ { ex = 1 }' \
    "$S/doc/qpt.3" | sed -e 's/\\-/-/g' -e 's/\\e/\\/g' >"$D/manex.c"
for ex in "$S/examples/callcount.c" "$S/examples/coverage.c" "$S/examples/repipe.c" \
    "$S/examples/loops.c" "$S/examples/libcount.c" "$S/examples/varread.c" "$D/manex.c"; do
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

# The static library: the same tool, no libqpt.so needed, linked as qpt(3) says.
# shellcheck disable=SC2046
if cc -std=gnu11 -Wall -Werror "$S/examples/callcount.c" $(pkg-config --cflags qpt) \
    -Wl,-Bstatic -lqpt -Wl,-Bdynamic,--as-needed $(pkg-config --static --libs qpt) \
    -o "$D/callcount.static" 2>"$D/static.err"; then
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

# One version: the package's (qpt.pc), the header's, the library file's, the man pages'.
v=$(pkg-config --modversion qpt)
hv=$(sed -n 's/^#define QPT_VERSION_STRING "\(.*\)"$/\1/p' "$hdr")
[ "$hv" = "$v" ] || bad "version: qpt.pc $v, qpt.h $hv"
[ -e "$libdir/libqpt.so.0.${v#0.}" ] || bad "version: no libqpt.so.0.${v#0.} for $v"
for m in "$S"/doc/*.[135]; do
    grep -q "^\.TH .* \"qpt $v\"" "$m" || bad "version: $(basename "$m") is not qpt $v"
done
[ "$fails" -eq 0 ] && ok "one version $v: qpt.pc, qpt.h, libqpt.so.0.${v#0.}, man pages"

make -s -C "$B" uninstall DESTDIR="$D/root" >>"$D/install.log" 2>&1 || bad "make uninstall"
left=$(find "$D/root" -type f | head -n 3)
[ -z "$left" ] && ok "make uninstall leaves no file" || bad "make uninstall left: $left"

# `make install prefix=P` (no DESTDIR, no sysroot): qpt.pc names P, and a plain
# `cc x.c $(pkg-config --cflags --libs qpt)` builds the examples, which find libqpt.so in
# P by the run path qpt(3) gives.
P=$D/prefix
make -s -C "$B" install prefix="$P" >>"$D/install.log" 2>&1 || bad "make install prefix=$P"
unset PKG_CONFIG_SYSROOT_DIR
export PKG_CONFIG_PATH=$P/lib/pkgconfig
[ "$(pkg-config --variable=prefix qpt)" = "$P" ] && ok "make install prefix=P: qpt.pc says P" \
    || bad "qpt.pc after prefix=P: $(head -n 3 "$P/lib/pkgconfig/qpt.pc" | tr '\n' ' ')"
for n in callcount coverage; do
    # shellcheck disable=SC2046
    cc -std=gnu11 -Wall -Werror "$S/examples/$n.c" $(pkg-config --cflags --libs qpt) \
        -Wl,-rpath,"$(pkg-config --variable=libdir qpt)" -o "$D/p-$n" 2>"$D/p-$n.err" \
        || bad "prefix: cc $n.c: $(head -n 3 "$D/p-$n.err")"
done
if [ -x "$D/p-callcount" ]; then
    out=$("$D/p-callcount" work "$D/prog" 20 2>&1)
    [ "$(echo "$out" | awk '$2 == "work" { print $1 }')" = 20 ] \
        && ok "prefix: callcount runs on $P/lib/libqpt.so.0 (run path): 20 calls" \
        || bad "prefix: callcount: $out"
fi
if [ -x "$D/p-coverage" ]; then
    "$D/p-coverage" "$D/prog" 20 2>&1 | grep -q 'blocks covered' && ok "prefix: coverage runs" \
        || bad "prefix: coverage: $("$D/p-coverage" "$D/prog" 20 2>&1 | tail -n 2)"
fi
make -s -C "$B" uninstall prefix="$P" >>"$D/install.log" 2>&1 || bad "make uninstall prefix=P"
left=$(find "$P" -type f | head -n 3)
[ -z "$left" ] && ok "make uninstall prefix=P leaves no file" || bad "make uninstall prefix=P left: $left"

[ "$fails" -eq 0 ] || exit 1
rm -rf "$D"
exit 0
