#!/usr/bin/env python3
"""Writes a Megatron MMapIndexedDataset (PREFIX.bin/.idx) of random tokens.

usage: write-indexed.py PREFIX VOCAB DOCUMENTS LENGTH [SEED]
DOCUMENTS documents of LENGTH int32 tokens drawn uniformly in [0, VOCAB):
data for models whose vocabulary is smaller than the byte corpus's 256.
"""

import random
import struct
import sys

prefix, vocab, docs, length = sys.argv[1], *map(int, sys.argv[2:5])
rng = random.Random(int(sys.argv[5]) if len(sys.argv) > 5 else 0)
sizes, pointers, offset = [], [], 0
with open(prefix + ".bin", "wb") as bin_file:
    for _ in range(docs):
        tokens = [rng.randrange(vocab) for _ in range(length)]
        bin_file.write(struct.pack(f"<{length}i", *tokens))
        sizes.append(length)
        pointers.append(offset)
        offset += 4 * length
with open(prefix + ".idx", "wb") as idx:
    idx.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 4, docs, docs + 1))
    idx.write(struct.pack(f"<{docs}i", *sizes))
    idx.write(struct.pack(f"<{docs}q", *pointers))
    idx.write(struct.pack(f"<{docs + 1}q", *range(docs + 1)))
