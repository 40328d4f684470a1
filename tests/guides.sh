#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# doc/guides.md as a newcomer runs it: qpt installed into a scratch prefix
# (`make install prefix=P`, P/bin first in PATH, P's qpt.pc for pkg-config), then every
# ```sh block of the page in order, in one empty folder, each with `set -e`; every line
# of the ```text block that follows a block must be a line of its output (standard output
# and error), except lines with "…" (what changes from run to run). The live guide
# (dyn) is skipped when ptrace is not permitted here.
# Exit: 0 pass, 1 fail, 77 skip, 99 error.
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
B=$(cd "$top_builddir" && pwd)
S=$(cd "$top_srcdir" && pwd)
D=$B/tests/guides.d
rm -rf "$D"
mkdir -p "$D/work" "$D/blocks" || exit 99
fails=0
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }
command -v gcc >/dev/null || { echo "SKIP: gcc not installed"; exit 77; }
command -v pkg-config >/dev/null || { echo "SKIP: no pkg-config"; exit 77; }

make -s -C "$B" install prefix="$D/prefix" >"$D/install.log" 2>&1 \
    || { tail -n 5 "$D/install.log"; echo "FAIL make install prefix=$D/prefix"; exit 1; }
export PATH=$D/prefix/bin:$PATH PKG_CONFIG_PATH=$D/prefix/lib/pkgconfig
unset PKG_CONFIG_SYSROOT_DIR QP_PROFILE LD_LIBRARY_PATH

# The blocks: blocks/N.sh, and blocks/N.want for the text block after block N.
awk -v d="$D/blocks" '
    /^```sh$/   { n++; f = d "/" n ".sh"; on = 1; next }
    /^```text$/ { if (n) { f = d "/" n ".want"; on = 1 }; next }
    /^```/      { on = 0; next }
    on          { print > f }
' "$S/doc/guides.md"
nblocks=$(find "$D/blocks" -name '*.sh' | wc -l)
[ "$nblocks" -ge 7 ] || { echo "FAIL doc/guides.md: $nblocks sh blocks, expected 7 or more"; exit 1; }

# May this process ptrace its children? (the dyn guide needs it)
ptrace_ok=1
gcc -x c -o "$D/true" - <<<'int main(void) { return 0; }' || exit 99
if ! command -v dyn >/dev/null; then
    ptrace_ok=0 # (./configure --disable-dynamic)
elif ! dyn run --count main -- "$D/true" >/dev/null 2>"$D/ptrace.err"; then
    grep -qi 'permi' "$D/ptrace.err" && ptrace_ok=0
fi

for i in $(seq 1 "$nblocks"); do
    blk=$D/blocks/$i.sh
    title=$(head -n 1 "$blk")
    if [ $ptrace_ok = 0 ] && grep -q '^dyn ' "$blk"; then
        echo "skip block $i ($title): no dyn, or ptrace not permitted here"
        continue
    fi
    (cd "$D/work" && bash -e "$blk") >"$D/blocks/$i.out" 2>&1
    st=$?
    if [ $st -ne 0 ]; then
        bad "block $i ($title): exit $st: $(tail -n 3 "$D/blocks/$i.out" | tr '\n' ' ')"
        continue
    fi
    missing=0
    if [ -f "$D/blocks/$i.want" ]; then
        while IFS= read -r line; do
            case $line in *…*|'') continue ;; esac
            grep -qxF -- "$line" "$D/blocks/$i.out" || {
                bad "block $i ($title): no line '$line' in: $(head -n 12 "$D/blocks/$i.out")"
                missing=1
            }
        done <"$D/blocks/$i.want"
    fi
    [ $missing = 0 ] && ok "block $i ($title)"
done

make -s -C "$B" uninstall prefix="$D/prefix" >>"$D/install.log" 2>&1
[ "$fails" -eq 0 ] || exit 1
rm -rf "$D"
exit 0
