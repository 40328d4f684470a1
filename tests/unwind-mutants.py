#!/usr/bin/env python3
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# Unwind-data mutants of an x86-64 ELF executable (a g++ -O2 program with exceptions):
# one defect each, of the kinds a program can carry and still run natively, because
# libgcc finds FDEs through .eh_frame_hdr and only ever asks about return addresses.
#   pcbegin   an FDE's pc_begin off by one (bit 0 flipped); the .eh_frame_hdr entry still
#             names the right start, and libgcc takes the start from there
#   advance   a DW_CFA_advance_loc of an FDE's CFA program 2 bytes longer
#   range     an FDE's pc_range with bit 28 set (0x10f8 -> 0x100010f8)
#   overlap   an FDE's pc_range reaching 16 bytes into the next FDE's code
#   csstart   an LSDA call-site start 4 bytes later (9 -> 13), its length unchanged
#   hdrloc    an .eh_frame_hdr initial location off by one (bit 0 flipped)
#   lpad      an LSDA landing pad one byte later (never MUST: after a call that does not
#             return, the byte skipped is decoded by nothing but a linear disassembly, so
#             the pad may well start the instruction the program means)
# Usage: unwind-mutants.py SEED OUTDIR [MAX-PER-CLASS]
# Writes OUTDIR/CLASS.N and prints one line per mutant:
#   NAME CLASS START MUST
# START is the (hdr) start of the FDE concerned; MUST is 1 when the mutant is
# inconsistent for certain (a location off an instruction boundary of objdump's
# disassembly, a start the hdr contradicts, a range past its section or over another
# FDE), so a rewriter must notice it; 0 when the mutant may be a consistent program.
import os
import struct
import subprocess
import sys


def uleb(b, p):
    v = s = 0
    while True:
        x = b[p]
        p += 1
        v |= (x & 0x7F) << s
        s += 7
        if not x & 0x80:
            return v, p


def sleb(b, p):
    v = s = 0
    while True:
        x = b[p]
        p += 1
        v |= (x & 0x7F) << s
        s += 7
        if not x & 0x80:
            if x & 0x40:
                v -= 1 << s
            return v, p


def sections(b):
    shoff, = struct.unpack_from("<Q", b, 40)
    shnum, shstrndx = struct.unpack_from("<HH", b, 60)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + 64 * i) for i in range(shnum)]
    stroff = hdrs[shstrndx][4]
    out = {}
    for h in hdrs:
        name = b[stroff + h[0]:b.index(b"\0", stroff + h[0])].decode()
        out[name] = (h[3], h[4], h[5], h[2])  # addr, offset, size, flags
    return out


def insn_starts(path):
    """Instruction starts of the executable sections, from objdump."""
    starts = set()
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        head = line.split(":", 1)[0].strip()
        if line.startswith("  ") and head and all(c in "0123456789abcdef" for c in head):
            starts.add(int(head, 16))
    return starts


def main():
    seed, outdir = sys.argv[1], sys.argv[2]
    per = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    b = bytearray(open(seed, "rb").read())
    sec = sections(b)
    text_addr, _, text_size, _ = sec[".text"]
    eh_addr, eh_off, eh_size, _ = sec[".eh_frame"]
    hd_addr, hd_off, _, _ = sec[".eh_frame_hdr"]
    starts = insn_starts(seed)
    # .eh_frame_hdr: the encodings g++ and ld write (pcrel sdata4, udata4, datarel sdata4).
    if bytes(b[hd_off:hd_off + 4]) != b"\x01\x1b\x03\x3b":
        sys.exit("unwind-mutants: unexpected .eh_frame_hdr encodings")
    count, = struct.unpack_from("<I", b, hd_off + 8)
    hdr = {}  # FDE address -> (initial location, file offset of the loc field)
    for i in range(count):
        loc, fde = struct.unpack_from("<ii", b, hd_off + 12 + 8 * i)
        hdr[hd_addr + fde] = (hd_addr + loc, hd_off + 12 + 8 * i)
    # .eh_frame: CIEs ("zR", "zPLR" with pcrel sdata4 pointers) and their FDEs.
    cies, fdes = {}, []
    p = 0
    while p + 4 <= eh_size:
        ln, = struct.unpack_from("<I", b, eh_off + p)
        if ln == 0:
            break
        body = eh_off + p + 4
        cid, = struct.unpack_from("<I", b, body)
        end = body + ln
        if cid == 0:
            q = body + 5
            aug = b[q:b.index(b"\0", q)].decode()
            q += len(aug) + 1
            _, q = uleb(b, q)
            _, q = sleb(b, q)
            _, q = uleb(b, q)
            cies[eh_off + p] = aug
        else:
            aug = cies[body - cid]
            fo = body + 4
            pcb, rng = struct.unpack_from("<iI", b, fo)
            start = eh_addr + (fo - eh_off) + pcb
            q = fo + 8
            alen, q = uleb(b, q)
            lsda = 0
            if "L" in aug and alen >= 4:
                lp, = struct.unpack_from("<i", b, q)
                lsda = eh_addr + (q - eh_off) + lp
            fdes.append(dict(addr=eh_addr + p, fo=fo, start=start, range=rng, lsda=lsda,
                             insns=(q + alen, end)))
        p += 4 + ln
    fdes = [f for f in fdes if text_addr <= f["start"] < text_addr + text_size
            and f["addr"] in hdr]
    fdes.sort(key=lambda f: f["start"])
    os.makedirs(outdir, exist_ok=True)
    n = {}

    def emit(cls, f, patches, must):
        k = n.get(cls, 0)
        if k >= per:
            return
        n[cls] = k + 1
        m = bytearray(b)
        for off, val in patches:
            m[off:off + len(val)] = val
        name = "%s.%d" % (cls, k)
        with open(os.path.join(outdir, name), "wb") as o:
            o.write(m)
        os.chmod(os.path.join(outdir, name), 0o755)
        print(name, cls, hex(f["start"]), 1 if must else 0)

    for i, f in enumerate(fdes):
        fo, start, rng = f["fo"], f["start"], f["range"]
        pcb, = struct.unpack_from("<i", b, fo)
        emit("pcbegin", f, [(fo, struct.pack("<i", pcb ^ 1))], True)
        emit("range", f, [(fo + 4, struct.pack("<I", rng | 0x10000000))], True)
        if i + 1 < len(fdes) and fdes[i + 1]["start"] + 16 <= start + rng + 64:
            nxt = fdes[i + 1]["start"]
            emit("overlap", f, [(fo + 4, struct.pack("<I", nxt + 16 - start))], True)
        loc, lfo = hdr[f["addr"]]
        emit("hdrloc", f, [(lfo, struct.pack("<i", (loc ^ 1) - hd_addr))], True)
        # The first DW_CFA_advance_loc (delta 1..61) of the program.
        q, qend, at = f["insns"][0], f["insns"][1], start
        while q < qend:
            op = b[q]
            if op & 0xC0 == 0x40:
                d = op & 0x3F
                if d + 2 < 0x40 and at + d + 2 < start + rng:
                    emit("advance", f, [(q, bytes([0x40 | (d + 2)]))],
                         at + d + 2 not in starts)
                    break
                at += d
                q += 1
            elif op & 0xC0 in (0x80,):
                _, q = uleb(b, q + 1)
            elif op & 0xC0 == 0xC0 or op in (0x00, 0x0A, 0x0B):
                q += 1
            elif op == 0x0E:
                _, q = uleb(b, q + 1)
            else:
                break  # anything else: stop looking in this FDE
        # The first call-site record whose start is one ULEB128 byte below 0x7c.
        if f["lsda"]:
            lo = f["lsda"] - sec[".gcc_except_table"][0] + sec[".gcc_except_table"][1]
            q = lo
            lpenc = b[q]
            q += 1
            if lpenc != 0xFF:
                continue
            ttenc = b[q]
            q += 1
            if ttenc != 0xFF:
                _, q = uleb(b, q)
            if b[q] != 0x01:
                continue
            cslen, q = uleb(b, q + 1)
            cend = q + cslen
            cs_done = lp_done = False
            while q < cend:
                s0 = q
                s, q = uleb(b, q)
                ln, q = uleb(b, q)
                l0 = q
                lp, q = uleb(b, q)
                _, q = uleb(b, q)
                if not cs_done and s < 0x7C and b[s0] < 0x80 and ln > 4:
                    emit("csstart", f, [(s0, bytes([s + 4]))], start + s + 4 not in starts)
                    cs_done = True
                if not lp_done and lp > 0 and b[l0] & 0x7F < 0x7F:  # lp + 1, same length
                    emit("lpad", f, [(l0, bytes([b[l0] + 1]))], False)
                    lp_done = True


main()
