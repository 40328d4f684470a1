#!/usr/bin/env python3
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
"""damage.py desc PROG OUTDIR: copies of PROG (rewritten with --driver=trace --trace-mem)
whose .qpt.trace section is damaged one way each (patched in place, or cut short through
its section header's size); damage.py trace TRACE NEVENTS OUTDIR: damaged copies of the
trace file TRACE. Prints one line per copy: its name, a tab, and a piece of the one-line
error qp must give for it (tests/trace-bad.sh). damage.py fuzz TRACE NEVENTS COUNT OUTDIR:
COUNT trace files of random records with TRACE's header (their names). damage.py bytes
TRACE...: the bytes of the trace files less those of their signal records."""
import os
import struct
import sys


def section(data, want):
    """(file offset, size, offset of the size field) of section WANT of an ELF64 file."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    def sh(i):
        return struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
    stroff = sh(shstrndx)[4]
    for i in range(shnum):
        name, _, _, _, off, size = sh(i)
        end = data.index(b"\0", stroff + name)
        if data[stroff + name:end] == want:
            return off, size, shoff + i * shentsize + 32
    sys.exit("damage.py: no section " + want.decode())


def rounded(n):
    return (n + 7) & ~7


def desc(prog, out):
    data = bytearray(open(prog, "rb").read())
    off, size, size_at = section(data, b".qpt.trace")
    sec = bytes(data[off:off + size])
    nprocs, nblocks, nedges, nevents = struct.unpack_from("<IIII", sec, 24)
    procs = rounded(40)
    blocks = procs + rounded(24 * nprocs)
    edges = blocks + rounded(48 * nblocks)
    events = edges + rounded(16 * nedges)
    ins = events + rounded(8 * nevents)
    ninsns, = struct.unpack_from("<I", sec, ins + 12)
    lens = ins + 16 + rounded(4 * (nblocks + 1))
    new = lens + rounded(ninsns)
    slots = new + rounded(48)
    mem = slots + rounded(12 * ninsns)
    if sec[mem:mem + 8] != b"QPTTRMEM":
        sys.exit("damage.py: no address-trace part (rewrite with --trace-mem)")
    nrefs, = struct.unpack_from("<I", sec, mem + 12)
    outs = mem + 16 + rounded(16 * nblocks) + rounded(24 * nrefs)
    if sec[outs:outs + 8] != b"QPTTROUT":
        sys.exit("damage.py: no list of the code not traced")
    # the first edge to a block (QPT_TE_BLOCK): its `to` is checked
    edge = next(edges + 16 * k for k in range(nedges)
                if struct.unpack_from("<I", sec, edges + 16 * k + 8)[0] == 0)
    cases = []

    def patch(name, at, fmt, value, expect):
        d = bytearray(data)
        struct.pack_into(fmt, d, off + at, value)
        cases.append((name, d, expect))

    def cut(name, n, expect):
        d = bytearray(data)
        struct.pack_into("<Q", d, size_at, n)
        cases.append((name, d, expect))

    patch("magic", 0, "<8s", b"QPTTRXX1", "malformed trace description")
    patch("version", 8, "<I", 2, "trace description of version 2; this qp reads versions 4 to 5")
    patch("version-new", 8, "<I", 99, "of version 99")
    patch("kind", 12, "<I", 7, "malformed trace description")
    patch("nblocks-huge", 28, "<I", 0x7fffffff, "trace description truncated")
    cut("header-only", 20, "trace description too short")
    cut("cut-in-blocks", blocks + 48 * nblocks // 2, "trace description truncated")
    cut("cut-in-insns", lens + 8, "malformed instruction part")
    cut("cut-in-new", slots + 8, "malformed new code part")
    patch("proc-block", procs + 8, "<I", nblocks, "index out of range")
    patch("proc-enter", procs + 20, "<I", nevents + 5, "index out of range")
    patch("block-proc", blocks + 8, "<I", nprocs, "index out of range")
    patch("block-edges", blocks + 20, "<I", nedges + 1, "index out of range")
    patch("block-call", blocks + 28, "<I", 9, "index out of range")
    patch("edge-to", edge + 4, "<I", nblocks + 3, "index out of range")
    patch("edge-kind", edges + 8, "<I", 77, "index out of range")
    patch("edge-event", edges + 12, "<I", nevents, "index out of range")
    patch("event-kind", events, "<I", 9, "index out of range")
    patch("event-a", events + 4, "<I", 0xfffffff0, "index out of range")
    patch("ins-magic", ins, "<8s", b"QPTTRXXX", "malformed instruction part")
    patch("ins-len", lens, "<B", 0, "malformed instruction part")
    patch("ins-first", ins + 16 + 4, "<I", ninsns + 9, "malformed instruction part")
    patch("new-magic", new, "<8s", b"QPTTRXXX", "malformed new code part")
    patch("new-slot", slots, "<I", 0x7ffffff0, "malformed new code part")
    patch("mem-nblocks", mem + 8, "<I", nblocks + 1, "malformed address-trace description")
    patch("mem-ref", mem + 16, "<I", nrefs + 1, "malformed address-trace description")
    patch("mem-kind", mem + 16 + rounded(16 * nblocks) + 16, "<B", 99,
          "malformed address-trace description")
    patch("outs-magic", outs, "<8s", b"QPTTRXXX", "malformed list of the code not traced")
    patch("outs-name", outs + 16 + 8, "<I", 0xffffff, "malformed list of the code not traced")
    patch("outs-kind", outs + 16 + 12, "<I", 99, "malformed list of the code not traced")
    os.makedirs(out, exist_ok=True)
    for name, d, expect in cases:
        path = os.path.join(out, name)
        open(path, "wb").write(d)
        os.chmod(path, 0o755)
        print(name + "\t" + expect)


FL1, FL2 = b"QPTTRFL1", b"QPTTRFL2"  # 32-bit words; 16-bit units (qpt_trace_format.h)
NARROW = (FL2, b"QPTTRFL3")  # 16-bit units, converted by the runtime or the snippets' own


def words_of(data):
    """The words of a trace file's records, whichever its encoding."""
    body = data[32:]
    if data[:8] == FL1:
        return list(struct.unpack("<%dI" % (len(body) // 4), body))
    u = list(struct.unpack("<%dH" % (len(body) // 2), body))
    words, i = [], 0
    while i < len(u):
        x = u[i]
        i += 1
        if x < 0xf000:
            words.append(x)
        elif x < 0xff00:
            words.append((x - 0xf000) << 16 | u[i])
            i += 1
        elif x < 0xffe0:
            words.append(0xf0000000 + x - 0xff00 + 1)
        elif x == 0xffe0:
            words.append(u[i + 1] << 16 | u[i])
            i += 2
        elif 0xfff0 <= x < 0xfff5:
            words += [0xfffffff0 + x - 0xfff0, u[i + 1] << 16 | u[i], u[i + 3] << 16 | u[i + 2]]
            i += 4
        else:
            words.append({0xfffc: 0xfffffffc, 0xfffe: 0xfffffffe, 0xffff: 0xffffffff}[x])
    return words


def signal_bytes(data):
    """Bytes of the signal and fault records of a trace file."""
    body, n = data[32:], 0
    if data[:8] == FL1:
        w = struct.unpack("<%dI" % (len(body) // 4), body[:len(body) // 4 * 4])
        i = 0
        while i < len(w):
            if w[i] in (0xfffffff0, 0xfffffff1, 0xfffffff2, 0xfffffff3, 0xfffffff4):
                n += 12 if w[i] in (0xfffffff2, 0xfffffff3) else 0
                i += 3
            else:
                i += 1
        return n
    u = struct.unpack("<%dH" % (len(body) // 2), body[:len(body) // 2 * 2])
    i = 0
    while i < len(u):
        x = u[i]
        if 0xf000 <= x < 0xff00:
            i += 2
        elif x == 0xffe0:
            i += 3
        elif 0xfff0 <= x < 0xfff5:
            n += 10 if x in (0xfff2, 0xfff3) else 0
            i += 5
        else:
            i += 1
    return n


def units_of(words):
    """WORDS in 16-bit units, as the runtime writes them (bytes)."""
    u, i = [], 0
    while i < len(words):
        x = words[i]
        i += 1
        if 0xfffffff0 <= x <= 0xfffffff4 and i + 2 <= len(words):
            u += [0xfff0 + x - 0xfffffff0, words[i] & 0xffff, words[i] >> 16,
                  words[i + 1] & 0xffff, words[i + 1] >> 16]
            i += 2
        elif x < 0xf000:
            u.append(x)
        elif x < 0x0f000000:
            u += [0xf000 + (x >> 16), x & 0xffff]
        elif 0xf0000000 < x <= 0xf00000e0:
            u.append(0xff00 + x - 0xf0000001)
        elif x in (0xfffffffc, 0xfffffffe, 0xffffffff):
            u.append(x - 0xffff0000)
        else:
            u += [0xffe0, x & 0xffff, x >> 16]
    return struct.pack("<%dH" % len(u), *u)


def encode(head, words):
    """A trace file of WORDS in HEAD's encoding."""
    if head[:8] in NARROW:
        return head + units_of(words)
    return head + struct.pack("<%dI" % len(words), *words)


def trace(path, nevents, out):
    data = open(path, "rb").read()
    head = data[:32]
    words = words_of(data)
    cases = [
        ("short-header", data[:20], "not a qpt trace file"),
        ("magic", b"QPTTRFL9" + data[8:], "not a qpt trace file"),
        ("other-id", head[:8] + bytes([head[8] ^ 1]) + data[9:], "another program"),
        ("event", encode(head, words[:-1] + [nevents + 3, words[-1]]), "a record names no event"),
        ("half-word", data[:-1] if head[:8] in NARROW else data[:-2], "ends in the middle of a record"),
        ("signal-cut", encode(head, words[:-1] + [0xfffffff2, 7]),
         "value or signal record cut short"),
        ("repeat-first", encode(head, [0xf0000005, 1]), "repeat count with no record before it"),
        # the other encoding of the same records is read alike: one wrong record in it
        ("event-words", encode(FL1 + head[8:], words[:-1] + [nevents + 3, words[-1]]),
         "a record names no event"),
    ]
    if head[:8] in NARROW:
        cases += [
            ("unit-none", data + struct.pack("<H", 0xfff5), "a 16-bit unit that stands for no record"),
            ("unit-long-cut", data + struct.pack("<H", 0xf001), "ends in the middle of a record"),
            ("unit-value-cut", data + struct.pack("<3H", 0xfff0, 1, 2), "ends in the middle of a record"),
        ]
    os.makedirs(out, exist_ok=True)
    for name, d, expect in cases:
        open(os.path.join(out, name + ".trace"), "wb").write(d)
        print(name + ".trace\t" + expect)


def fuzz(path, nevents, count, out):
    """COUNT trace files of random records (seeded: the same each time), mostly events of
    the description, with markers (signal records whose rips are addresses of the
    original records' neighbourhood or anything, repeats, EMPTY, LOST, END, values)."""
    import random
    rnd = random.Random(17)
    data = open(path, "rb").read()
    head = data[:32]
    words = words_of(data)
    rips = [w for w in words if w > 0x1000 and w < 0xf0000000] or [0x1000]
    os.makedirs(out, exist_ok=True)
    for i in range(count):
        rec = []
        if rnd.random() < 0.5:  # a real beginning, then noise
            rec += words[:rnd.randrange(1, len(words))]
        event = False  # the last record was an event (a repeat count may follow)
        for _ in range(rnd.randrange(1, 400)):
            x = rnd.random()
            last, event = event, False
            if x < 0.75:
                rec.append(rnd.randrange(nevents))
                event = True
            elif x < 0.83:
                rip = rnd.choice(rips) + rnd.randrange(-64, 64) if rnd.random() < 0.7 else rnd.getrandbits(32)
                rec += [rnd.choice((0xfffffff2, 0xfffffff3, 0xfffffff4)), rip & 0xffffffff, 0]
            elif x < 0.87:
                if last:  # else refused at once (tested above)
                    rec.append(0xf0000000 + rnd.randrange(1, 5))
                    event = True
            elif x < 0.90:
                rec += [0xfffffff0, rnd.getrandbits(32), rnd.getrandbits(32)]
            else:
                rec.append(rnd.choice((0xfffffffc, 0xfffffffe, 0xffffffff)))
        name = "fuzz%03d.trace" % i
        if i % 4 == 3 and head[:8] in NARROW:  # random units too
            d = head + units_of(rec)
            d = d + bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(0, 9)))
        elif i % 2:  # the other encoding
            d = encode((FL1 if head[:8] in NARROW else FL2) + head[8:], rec)
        else:
            d = encode(head, rec)
        open(os.path.join(out, name), "wb").write(d)
        print(name)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "desc":
        desc(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 6 and sys.argv[1] == "fuzz":
        fuzz(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    elif len(sys.argv) >= 2 and sys.argv[1] == "bytes":
        total = 0
        for p in sys.argv[2:]:
            if not os.path.exists(p):  # an unmatched pattern: no trace
                continue
            data = open(p, "rb").read()
            total += len(data) - signal_bytes(data)
        print(total)
    elif len(sys.argv) == 5 and sys.argv[1] == "trace":
        trace(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        sys.exit(__doc__)
