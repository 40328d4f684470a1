#!/usr/bin/env python3
# Copyright 2026 the qpt authors
# SPDX-License-Identifier: MIT
#
# The instructions a qemu-user run executed, from its log of `-d in_asm,exec,nochain`:
# the sum over executed translation blocks of their instructions (nochain: every
# block's run is logged). Usage: qemu-icount.py LOG
import sys

n, total, cur = {}, 0, None
with open(sys.argv[1], errors='replace') as f:
    for line in f:
        if line.startswith('Trace '):
            total += n.get(int(line.split('[')[1].split('/')[1], 16), 0)
        elif line.startswith('IN:'):
            cur, cnt = None, 0
        elif line.startswith('0x') and ':' in line[:20]:
            if cur is None:
                cur = int(line.split(':')[0], 16)
            cnt += 1
            n[cur] = cnt
print(total)
