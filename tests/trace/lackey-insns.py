#!/usr/bin/env python3
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
"""lackey-insns.py TEXT BIAS LACKEY OURS

Compare `qp trace insns` (OURS: an instruction address a line, '#' marks) with the
"I addr,size" lines of valgrind --tool=lackey --trace-mem=yes (LACKEY) for the program's
own code: the instructions in the ranges "0xSTART 0xEND" of TEXT (qp trace text; for a
static program the functions of its own objects), lackey's addresses less BIAS (hex, the load bias of the lackey run). One difference is allowed:
valgrind runs a `rep` string instruction as a loop and prints it once per iteration; qp
counts it once, so runs of one address are compared as one. Prints a summary; exit
status 1 on any other difference.
"""
import bisect
import sys

r = sorted(tuple(int(x, 16) for x in line.split()) for line in open(sys.argv[1]) if line.strip())
starts = [a for a, _ in r]
bias = int(sys.argv[2], 16) if sys.argv[2] else 0


def inside(a):
    i = bisect.bisect_right(starts, a) - 1
    return i >= 0 and a < r[i][1]


def runs(v):
    out = []
    for x in v:
        if not out or out[-1] != x:
            out.append(x)
    return out


lackey = []
for line in open(sys.argv[3]):
    if line.startswith("I "):
        a = int(line.split()[1].split(",")[0], 16) - bias
        if inside(a):
            lackey.append(a)
ours = [a for a in (int(line, 16) for line in open(sys.argv[4]) if not line.startswith("#"))
        if inside(a)]
if len(ours) < 100 or len(lackey) < 100:
    print("too few instructions to compare (lackey %d, qp %d)" % (len(lackey), len(ours)))
    sys.exit(1)
a, b = runs(lackey), runs(ours)
if a != b:
    i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    print("differ at instruction %d: lackey %s, qp %s" % (
        i, hex(a[i]) if i < len(a) else "end", hex(b[i]) if i < len(b) else "end"))
    sys.exit(1)
print("%d instructions (%d with rep iterations as lackey counts them)" % (len(ours), len(lackey)))
