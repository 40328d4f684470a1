#!/bin/sh
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# libbfd from two threads at once (issue 31): tests/bfd_threads opens, reads lines from
# and closes images of itself in one thread while the other looks lines up in another
# image (as qpt_wait closing an unloaded library's BFD while a thread reads another
# space's lines). BFD's state is global (its list of open files, the cache of their
# descriptors, its error); cfg_bfd.c makes every call into it under one lock. Natively,
# many rounds must succeed; under valgrind's helgrind (when installed; not with
# --enable-sanitizers), which sees inside libbfd (ThreadSanitizer does not: libbfd is
# not instrumented), a few rounds must show no data race. The code without the lock:
# 66 to 81 "Possible data race" reports in 20 rounds (bfd_seek, bfd_cache_init, bfd_close).
# Work in $top_builddir/tests/bfd-threads.d. Exit status: 0 pass, 1 fail, 77 skip.
set -u

# shellcheck source=tests/lib.sh
. "${top_srcdir:-.}/tests/lib.sh"

prog=$top_builddir/tests/bfd_threads
[ -x "$prog" ] || { echo "SKIP: no $prog"; exit 77; }
dir=$top_builddir/tests/bfd-threads.d
rm -rf "$dir"
mkdir -p "$dir" || exit 99
fails=0

if "$prog" "$prog" 1000 2>"$dir/native.err"; then
    ok "native: 1000 rounds"
else
    bad "native: $(head -n 1 "$dir/native.err")"
fi
if ! qp_have valgrind; then
    echo "SKIP helgrind: valgrind is not installed"
elif nm "$prog" 2>/dev/null | grep -q __asan_init; then
    echo "SKIP helgrind: built with sanitizers"
else
    valgrind --tool=helgrind --error-exitcode=3 -q "$prog" "$prog" 20 >"$dir/hg.log" 2>&1
    st=$?
    races=$(count_lines "$dir/hg.log" 'Possible data race')
    [ $st -eq 0 ] && [ "$races" -eq 0 ] && ok "helgrind: 20 rounds, no race" ||
        bad "helgrind: exit $st, $races data races (see $dir/hg.log)"
fi
[ $fails -eq 0 ] || exit 1
rm -rf "$dir"
exit 0
