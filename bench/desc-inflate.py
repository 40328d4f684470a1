#!/usr/bin/env python3
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
"""desc-inflate.py DESC: a description (.qpt.desc) with its body decompressed, on
stdout: the 64-byte header, then the raw body (versions 8 and 9: its index's parts one after
another, version 9's zstd frames by the zstd command; earlier versions: the one stream
after the header). A seed for make fuzz
(tests/fuzz_desc.c reads its input both ways)."""
import lzma
import struct
import subprocess
import sys

FILTERS = [{"id": lzma.FILTER_LZMA2, "dict_size": 8 << 20, "lc": 1, "lp": 0, "pb": 0}]


def uleb(d, p):
    v = s = 0
    while True:
        b = d[p]
        p += 1
        v |= (b & 0x7F) << s
        s += 7
        if b < 0x80:
            return v, p


def inflate(d):
    (version,) = struct.unpack_from("<I", d, 8)
    if version < 8:
        return lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=FILTERS).decompress(d[64:])
    n, p = uleb(d, 64)
    sizes = []
    for _ in range(n):
        r, p = uleb(d, p)
        z, p = uleb(d, p)
        sizes.append(z)
    out = b""
    for z in sizes:
        if version >= 9:
            out += subprocess.run(["zstd", "-dc"], input=d[p:p + z], stdout=subprocess.PIPE,
                                  check=True).stdout
        else:
            out += lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=FILTERS).decompress(d[p:p + z])
        p += z
    return out


data = open(sys.argv[1], "rb").read()
sys.stdout.buffer.write(data[:64] + inflate(data))
