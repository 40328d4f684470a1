#!/usr/bin/env python3
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
"""drop-procs.py PROG NAME... < blocks: the `qp trace blocks` lines (0xADDR) outside the
functions NAME... of PROG (their ranges from `nm -S`), without the '#' marks: what a
program did besides its signal handlers (tests/trace.sh, tests/trace/timer.c)."""
import subprocess
import sys

ranges = []
for line in subprocess.run(["nm", "-S", sys.argv[1]], capture_output=True, text=True,
                           check=True).stdout.splitlines():
    f = line.split()
    if len(f) == 4 and f[3] in sys.argv[2:]:
        ranges.append((int(f[0], 16), int(f[0], 16) + int(f[1], 16)))
if len(ranges) != len(sys.argv) - 2:
    sys.exit("drop-procs.py: not every function found in " + sys.argv[1])
for line in sys.stdin:
    if line.startswith("#"):
        continue
    x = int(line, 16)
    if not any(lo <= x < hi for lo, hi in ranges):
        sys.stdout.write(line)
