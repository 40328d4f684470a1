#!/usr/bin/env python3
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
"""lackey-compare.py [--heap-shift=D] TEXT BIAS LACKEY OURS [EXIT]

Compare `qp trace mem` (OURS: "L|S|M 0xADDR SIZE 0xINSN" lines, '#' marks) with
valgrind --tool=lackey --trace-mem=yes (LACKEY, its log) for the program's own code: the
accesses whose instruction (lackey: the "I addr,size" line before them; OURS: INSN) lies
in one of the ranges "0xSTART 0xEND" of TEXT (qp trace text: the traced code; for a
static program the functions of its own objects, tests/trace/own-code.py). BIAS (hex): the load bias of
the lackey run, taken from its instruction addresses. EXIT: ranges "0xSTART 0xEND" of
code that runs at exit (destructors called by the dynamic linker's fini function).

Exact, record for record, except three documented differences (four with D):
- valgrind makes a locked read-modify-write (lock add, xchg, lock cmpxchg) a load and
  a compare-and-swap: lackey prints "L a" then "M a"; both are one M here.
- valgrind drops a load whose value is never used (`pop %rax` before `mov ..,%rax`):
  lackey prints the instruction without its load; qp trace mem has it.
- at exit the runtime's fini function calls the dynamic linker's first: the program's
  destructors (EXIT) run one frame deeper, so their stack addresses differ (same
  instructions, kinds and sizes).
- --heap-shift=D (hex): a static program's heap (brk) addresses lie D bytes higher in
  the rewritten program (glibc's static startup mallocs 32 bytes per PT_LOAD segment for
  _dl_find_object, and the rewritten file has more): an access whose address is exactly
  D higher, all else equal, is counted as shifted.
Prints a summary; exit status 1 on any other difference.
"""
import bisect
import sys


def ranges_of(path):
    if path is None:
        return [], []
    r = sorted(tuple(int(x, 16) for x in line.split()) for line in open(path) if line.strip())
    return r, [x[0] for x in r]


def inside(rs, a):
    r, starts = rs
    i = bisect.bisect_right(starts, a) - 1
    return i >= 0 and a < r[i][1]


heap_shift = None
if len(sys.argv) > 1 and sys.argv[1].startswith('--heap-shift='):
    heap_shift = int(sys.argv.pop(1).split('=', 1)[1], 16)
text = ranges_of(sys.argv[1])
bias = int(sys.argv[2], 16)
exitr = ranges_of(sys.argv[5] if len(sys.argv) > 5 else None)

# lackey: accesses, and "N insn" for instructions of the text that made none
lk = []
keep = False
insn = 0
made = True
for line in open(sys.argv[3]):
    if line.startswith('I'):
        if keep and not made:
            lk.append(('N', 0, 0, insn))
        insn = int(line[1:].split(',')[0], 16) - bias
        keep = inside(text, insn)
        made = False
    elif keep and line[:1] == ' ' and line[1:2] in 'LSM':
        addr, size = line[2:].strip().split(',')
        rec = (line[1], int(addr, 16), int(size), insn)
        made = True
        if rec[0] == 'M' and lk and lk[-1] == ('L',) + rec[1:]:
            lk.pop()
        lk.append(rec)
if keep and not made:
    lk.append(('N', 0, 0, insn))

ours = []
marks = 0
for line in open(sys.argv[4]):
    f = line.split()
    if not f or f[0].startswith('#'):
        marks += 1
        continue
    rec = (f[0], int(f[1], 16), int(f[2]), int(f[3], 16))
    if inside(text, rec[3]):
        ours.append(rec)

if len(ours) < 100 or len(lk) < 100:
    print('too few accesses to compare (lackey %d, qp %d)' % (len(lk), len(ours)))
    sys.exit(1)
i = j = 0
equal = dead = shifted = heap = 0
while i < len(lk) or j < len(ours):
    a = lk[i] if i < len(lk) else None
    b = ours[j] if j < len(ours) else None
    if a is not None and a[0] == 'N':
        if b is not None and b[0] == 'L' and b[3] == a[3]:
            dead += 1  # the load valgrind dropped
            j += 1
        i += 1
        continue
    if a == b:
        equal += 1
    elif (a is not None and b is not None and a[0] == b[0] and a[2:] == b[2:]
          and inside(exitr, a[3])):
        shifted += 1
    elif (heap_shift is not None and a is not None and b is not None and a[0] == b[0]
          and a[2:] == b[2:] and b[1] - a[1] == heap_shift):
        heap += 1
    else:
        print('differ at lackey record %d, ours %d: lackey %s, ours %s' % (i, j, a, b))
        sys.exit(1)
    i += 1
    j += 1
print('%d accesses equal, %d dead loads lackey drops, %d at exit one frame deeper, '
      '%d marks' % (equal, dead, shifted, marks)
      + ('' if heap_shift is None else ', %d heap addresses 0x%x higher' % (heap, heap_shift)))
