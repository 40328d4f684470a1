#!/bin/bash
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Output sizes (issue 14): for ls, python3.11 and cc1 (those installed, or the files
# named), the input file, the null rewrite and the qp rewrite in bytes and as a ratio to
# the input (targets: null <= 1.3x, qp <= 1.5x), and where the added bytes go: the new
# code that did not fit into the dead bytes of moved code (the .qpt.text that is not a
# mirror; the rest is in the old text, seen again through a mirror), the runtime
# (.qpt.rt), the new unwind tables (.eh_frame, when they did not go over the old), the
# lock-site table (.qpt.locks), the symbols of moved procedures (.symtab + .strtab) and
# the description (.qpt.desc, never loaded: format version 5). The input's own sections
# stay in the output (its old text is the translation target of the old addresses).
# Usage: bench/output-size.sh [path/to/qpt-rewrite] [FILE...]
set -u
QPT_REWRITE=${1:-tools/qpt-rewrite}
shift
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
    for f in /usr/bin/ls /usr/bin/python3.11 /usr/lib/gcc/x86_64-linux-gnu/12/cc1; do
        [ -f "$f" ] && files+=("$f")
    done
fi
dir=$(mktemp -d /tmp/qpt-size.XXXXXX) || exit 1
trap 'rm -rf "$dir"' EXIT

# The bytes of the sections named NAME of FILE (0 when absent; NOBITS count 0: no file
# bytes) whose file offset is at least MIN (default 0) and that do not map the old text
# again (a .qpt.text aligned to a page adds no bytes): with MIN the input's size, only
# bytes added after it (unwind tables written over the old ones add none).
sec() {
    local t=0 off size
    while read -r off size; do
        [ $((0x$off)) -ge "${3:-0}" ] && t=$((t + 0x$size))
    done < <(readelf -SW "$2" | awk -v n="$1" '{ sub(/^.*\]/, "") } $1 == n && $2 != "NOBITS" && $NF != 4096 { print $4, $5 }')
    echo "$t"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
mb() { awk -v a="$1" 'BEGIN { printf "%.2f", a / 1e6 }'; }

echo "Output sizes (MB; ratio to the input file; targets: null <= 1.3x, qp <= 1.5x)"
printf '%-12s %8s %8s %6s %8s %6s | qp: %7s %6s %6s %6s %6s %6s\n' file input null ratio qp ratio \
    text rt eh_frame locks symtab desc
st=0
for f in "${files[@]}"; do
    b=$(basename "$f")
    if ! "$QPT_REWRITE" --driver=none "$f" -o "$dir/$b.none" 2>"$dir/err" ||
        ! "$QPT_REWRITE" --driver=qp "$f" -o "$dir/$b.qp" 2>>"$dir/err"; then
        echo "$b: rewrite failed: $(tail -n 1 "$dir/err")"
        st=1
        continue
    fi
    in=$(stat -c %s "$f") none=$(stat -c %s "$dir/$b.none") qp=$(stat -c %s "$dir/$b.qp")
    q=$dir/$b.qp
    sym=$(( $(sec .symtab "$q") + $(sec .strtab "$q") - $(sec .symtab "$f") - $(sec .strtab "$f") ))
    printf '%-12s %8s %8s %6s %8s %6s | qp: %7s %6s %6s %6s %6s %6s\n' "$b" "$(mb "$in")" \
        "$(mb "$none")" "$(ratio "$none" "$in")" "$(mb "$qp")" "$(ratio "$qp" "$in")" \
        "$(mb "$(sec .qpt.text "$q")")" "$(mb "$(sec .qpt.rt "$q")")" \
        "$(mb "$(sec .eh_frame "$q" "$in")")" "$(mb "$(sec .qpt.locks "$q")")" "$(mb "$sym")" \
        "$(mb "$(sec .qpt.desc "$q")")"
    rm -f "$dir/$b.none" "$dir/$b.qp"
done
exit $st
