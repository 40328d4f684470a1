#!/usr/bin/env python3
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
"""cg-sum.py CACHEGRIND.OUT FN...: the counts (Dr D1mr DLmr Dw D1mw DLmw) cachegrind
gave the functions FN (its output file, summed over their lines), one line."""
import sys

want = set(sys.argv[2:])
events = []
tot = {}
cur = None
for line in open(sys.argv[1]):
    if line.startswith('events:'):
        events = line.split()[1:]
        tot = dict.fromkeys(events, 0)
    elif line.startswith('fn='):
        cur = line[3:].strip()
    elif cur in want and line[:1].isdigit():
        v = line.split()[1:]
        for e, x in zip(events, v):
            tot[e] += int(x)
print(' '.join('%s=%d' % (e, tot.get(e, 0)) for e in ('Dr', 'D1mr', 'DLmr', 'Dw', 'D1mw', 'DLmw')))
