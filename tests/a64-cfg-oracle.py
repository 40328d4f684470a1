#!/usr/bin/env python3
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
"""Check `qpt-rewrite --dump-cfg=text` of an AArch64 program against binutils and qemu.

usage: a64-cfg-oracle.py DUMP OBJDUMP_D SYMS [QEMU_LOG] [--strict-br]

  DUMP       qpt-rewrite --dump-cfg=text FILE
  OBJDUMP_D  aarch64-linux-gnu-objdump -d FILE (every instruction, objdump's decoding)
  SYMS       aarch64-linux-gnu-readelf -sW FILE (mapping symbols $x/$d: data in code)
  QEMU_LOG   qemu-aarch64 -d in_asm,exec,nochain of one run (optional; one thread)

Checks (the oracle is objdump, the ELF mapping symbols and qemu, never qpt itself):
  1. blocks are whole instructions of objdump's listing and lie in no $d (data) range;
  2. a direct branch (b, b.cond, cbz, cbnz, tbz, tbnz) in a block ends it, and its
     target starts a block or a procedure; a bl's target is a procedure's entry;
  3. every block ends where control leaves it (the next instruction is a leader);
  4. with QEMU_LOG: every executed code address lies in a block, and every executed
     `br` the CFG resolved went to a target it gives that block (a table, indirect or
     tail call edge; a tail call through a pointer: to a procedure, or out of the file);
  5. --strict-br: no `br` is left unresolved.
Prints one summary line; the failures (at most 20 of each kind) on stderr; exit 1 on any.
"""
import re
import sys


def parse_dump(path):
    blocks = {}  # start -> (end, [(target or None, kind)], proc)
    procs = {}  # entry -> name
    proc = None
    for line in open(path):
        m = re.match(r'proc (\S+) 0x([0-9a-f]+)-0x([0-9a-f]+)', line)
        if m:
            proc = m.group(1)
            procs[int(m.group(2), 16)] = proc
            continue
        m = re.match(r'  block 0x([0-9a-f]+)-0x([0-9a-f]+) .*->(.*)$', line)
        if m:
            edges = []
            for e in m.group(3).split():
                t, _, kind = e.rpartition(':')
                t = t.lstrip('->')
                edges.append((int(t, 16) if t else None, kind or e))
            blocks[int(m.group(1), 16)] = (int(m.group(2), 16), edges, proc)
    return blocks, procs


BRANCH = re.compile(r'^(b|b\.\w+|bc\.\w+|cbz|cbnz|tbz|tbnz|bl)$')


def parse_objdump(path):
    insns = {}  # addr -> (mnemonic, operands, target or None)
    for line in open(path):
        m = re.match(r'\s*([0-9a-f]+):\s+([0-9a-f]{8})\s+(\S+)\s*(.*)$', line)
        if not m:
            continue
        addr, mnem, ops = int(m.group(1), 16), m.group(3), m.group(4)
        target = None
        if BRANCH.match(mnem):
            t = re.search(r'(?:^|, )([0-9a-f]+) <', ops)
            if t:
                target = int(t.group(1), 16)
        insns[addr] = (mnem, ops, target)
    return insns


def data_ranges(path):
    """[start, end) of the $d mapping-symbol ranges of code sections."""
    marks = []
    for line in open(path):
        f = line.split()
        if len(f) >= 8 and (f[7] == '$d' or f[7].startswith('$d.')
                            or f[7] == '$x' or f[7].startswith('$x.')):
            marks.append((int(f[1], 16), f[7][1]))
    marks.sort()
    out = []
    for i, (a, k) in enumerate(marks):
        if k == 'd':
            end = marks[i + 1][0] if i + 1 < len(marks) else a + 4
            if end > a:
                out.append((a, end))
    return out


def parse_qemu(path):
    """The executed TB starts in order as (cpu, address), each TB's last instruction,
    and where _start ran. A thread is a cpu of its own: its TBs follow each other."""
    last = {}  # tb pc -> (addr, mnemonic) of its last instruction
    seq = []
    cur = None
    start = None  # where _start ran: the load bias of a PIE
    name = None
    for line in open(path, errors='replace'):
        if line.startswith('IN:'):
            cur = None
            name = line[3:].strip()
            continue
        m = re.match(r'0x([0-9a-f]+):\s+([0-9a-f]{8})\s+(\S+)', line)
        if m:
            a = int(m.group(1), 16)
            if cur is None:
                cur = a
                if name == '_start' and start is None:
                    start = a
            last[cur] = (a, m.group(3))
            continue
        m = re.match(r'Trace (\d+): \S+ \[[0-9a-f]+/([0-9a-f]+)/', line)
        if m:
            seq.append((int(m.group(1)), int(m.group(2), 16)))
    return seq, last, start


def main():
    args = [a for a in sys.argv[1:] if not a.startswith('--')]
    strict_br = '--strict-br' in sys.argv
    blocks, procs = parse_dump(args[0])
    insns = parse_objdump(args[1])
    data = data_ranges(args[2])
    qlog = args[3] if len(args) > 3 else None
    fails = {}

    def fail(kind, msg):
        fails.setdefault(kind, []).append(msg)

    starts = sorted(blocks)
    leaders = set(starts) | set(procs)
    nbr = nunres = 0
    # 1-3: static checks
    import bisect
    for s in starts:
        end, edges, proc = blocks[s]
        lo = bisect.bisect_left(data, (s + 1,)) - 1
        for k in (lo, lo + 1):
            if 0 <= k < len(data) and data[k][0] < end and s < data[k][1]:
                fail('data', '%s: block 0x%x-0x%x runs into data 0x%x-0x%x'
                     % (proc, s, end, data[k][0], data[k][1]))
        for a in range(s, end, 4):
            ins = insns.get(a)
            if ins is None:
                fail('insn', '%s: block 0x%x-0x%x: no instruction at 0x%x in objdump'
                     % (proc, s, end, a))
                break
            mnem, ops, target = ins
            if mnem in ('.word', '.inst', 'udf') or mnem.startswith('.'):
                fail('insn', '%s: block 0x%x-0x%x holds %s at 0x%x' % (proc, s, end, mnem, a))
            if target is not None and mnem != 'bl':
                if a + 4 != end:
                    fail('branch', '%s: branch at 0x%x does not end its block 0x%x-0x%x'
                         % (proc, a, s, end))
                if target not in leaders:
                    fail('branch', '%s: target 0x%x of the branch at 0x%x starts no block'
                         % (proc, target, a))
            if mnem == 'bl' and target is not None and target not in procs:
                fail('call', '%s: bl at 0x%x calls 0x%x, no procedure entry'
                     % (proc, a, target))
            if mnem == 'br' and a + 4 == end:
                nbr += 1
                if any(k == 'unresolved' for _, k in edges):
                    nunres += 1
                    if strict_br:
                        fail('br', '%s: br at 0x%x unresolved' % (proc, a))
        if any(k in ('fall', 'callret') for _, k in edges) and end not in leaders:
            fail('end', '%s: block 0x%x-0x%x falls into 0x%x, no leader' % (proc, s, end, end))
    # 4: the run under qemu
    nexec = nbrexec = nunresexec = 0
    if qlog:
        seq, last, start = parse_qemu(qlog)
        entry = [a for a, n in procs.items() if n == '_start']
        bias = start - entry[0] if start is not None and entry else 0
        seq = [(cpu, pc - bias) for cpu, pc in seq]
        last = {pc - bias: (a - bias, m) for pc, (a, m) in last.items()}
        code = set(insns)
        bidx = starts
        after = {}  # index in seq -> the next TB of the same cpu
        prev = {}
        for i, (cpu, pc) in enumerate(seq):
            if cpu in prev:
                after[prev[cpu]] = pc
            prev[cpu] = i
        for i, (cpu, pc) in enumerate(seq):
            if pc not in code:
                continue  # the dynamic linker, libc.so, vdso
            nexec += 1
            k = bisect.bisect_right(bidx, pc) - 1
            if k < 0 or not (bidx[k] <= pc < blocks[bidx[k]][0]):
                fail('exec', 'executed 0x%x lies in no block' % pc)
            la = last.get(pc)
            if la is None or la[1] != 'br' or i not in after:
                continue
            nxt = after[i]
            kb = bisect.bisect_right(bidx, la[0]) - 1
            if kb < 0 or blocks[bidx[kb]][0] != la[0] + 4:
                fail('exec-br', 'br at 0x%x ends no block' % la[0])
                continue
            edges = blocks[bidx[kb]][1]
            if any(k == 'unresolved' for _, k in edges):
                nunresexec += 1  # targets unknown, and said so: not wrong
                continue
            nbrexec += 1
            targets = {t for t, kind in edges if kind in ('table', 'indirect', 'tailcall')}
            # a tail call through a pointer (no target known): to a procedure, or out
            anywhere = any(k == 'tailcall' and t is None for t, k in edges)
            if nxt not in targets and not (anywhere and (nxt in procs or nxt not in code)):
                fail('exec-br', 'br at 0x%x went to 0x%x: not among its %d targets'
                     % (la[0], nxt, len(targets)))
    nfail = sum(len(v) for v in fails.values())
    print('%d procedures, %d blocks, %d data ranges, %d br (%d unresolved); %d executed '
          'blocks, %d executed br checked (%d more unresolved); %d failures'
          % (len(procs), len(blocks), len(data), nbr, nunres, nexec, nbrexec, nunresexec,
             nfail))
    for kind, msgs in sorted(fails.items()):
        for m in msgs[:20]:
            print('FAIL %s: %s' % (kind, m), file=sys.stderr)
        if len(msgs) > 20:
            print('FAIL %s: ... %d more' % (kind, len(msgs) - 20), file=sys.stderr)
    return 1 if nfail else 0


if __name__ == '__main__':
    sys.exit(main())
