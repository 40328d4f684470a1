#!/usr/bin/env python3
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
"""own-code.py DYN STATIC

The program's own code in a static executable STATIC: the functions that the same
program linked dynamically (DYN: same sources and flags, without -static) defines in its
executable - the program's objects and the C runtime's start files (main, its helpers,
_start, _init, _fini, frame_dummy, __do_global_dtors_aux, ...) - as they lie in STATIC.
The C library and its startup, linked into STATIC, are not the program's own code. Prints
"0xSTART 0xEND" per function (a symbol without size: up to the next function or the
end of its section). A function
of DYN missing from STATIC, or defined there more than once (a local of the same name in
the C library), is an error: the ranges would be wrong.
"""
import subprocess
import sys


def readelf(flag, path):
    return subprocess.run(['readelf', flag, path], capture_output=True, text=True,
                          check=True).stdout.splitlines()


def functions(path):
    """(address, size, name, section end) of the defined FUNC symbols of PATH"""
    ends = {}
    for line in readelf('-SW', path):
        f = line.replace('[ ', '[').split()
        if len(f) > 5 and f[0].startswith('[') and f[0][1:-1].isdigit():
            ends[f[0][1:-1]] = int(f[3], 16) + int(f[5], 16)
    out = []
    for line in readelf('-sW', path):
        f = line.split()
        if len(f) == 8 and f[3] == 'FUNC' and f[6] in ends:
            out.append((int(f[1], 16), int(f[2], 0), f[7], ends[f[6]]))
    return out


names = {n for _, _, n, _ in functions(sys.argv[1])}
static = functions(sys.argv[2])
addrs = sorted({a for a, _, _, _ in static})
where = {}
for a, size, n, send in static:
    where.setdefault(n, set()).add((a, size, send))
bad = False
for n in sorted(names):
    got = where.get(n, set())
    if len(got) != 1:
        print('own-code.py: %s: %s in %s' % (n, 'defined %d times' % len(got) if got else 'not found',
                                            sys.argv[2]), file=sys.stderr)
        bad = True
        continue
    a, size, send = got.pop()
    end = a + size if size else min([x for x in addrs if x > a] + [send])
    print('0x%x 0x%x' % (a, end))
sys.exit(1 if bad else 0)
