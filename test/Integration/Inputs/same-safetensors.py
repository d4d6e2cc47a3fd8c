#!/usr/bin/env python3
"""Compares two safetensors files tensor by tensor: the same names, dtypes,
shapes and bytes (exits 1 naming the first difference); with --differ, the
same names, dtypes and shapes but at least one tensor's bytes different
(a trained state is not the one it started from); with --whole-file, also
the same bytes from the first to the last (header text and tensor order).

usage: same-safetensors.py A B [--differ | --whole-file]
"""

import json
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        tensors[name] = (t["dtype"], t["shape"], data[base + begin:base + end])
    return meta, tensors


def main(argv):
    a_meta, a = read(argv[0])
    b_meta, b = read(argv[1])
    differ = "--differ" in argv[2:]
    if sorted(a) != sorted(b):
        sys.exit(f"tensors differ: {sorted(set(a) ^ set(b))}")
    changed = 0
    for name in sorted(a):
        (ad, ashape, abytes), (bd, bshape, bbytes) = a[name], b[name]
        if ad != bd or ashape != bshape:
            sys.exit(f"{name}: {ad}{ashape} vs {bd}{bshape}")
        if abytes != bbytes:
            if not differ:
                sys.exit(f"{name}: the values differ")
            changed += 1
    if differ and not changed:
        sys.exit("no tensor differs")
    if "--whole-file" in argv[2:]:
        with open(argv[0], "rb") as f, open(argv[1], "rb") as g:
            x, y = f.read(), g.read()
        if x != y:
            at = next((i for i in range(min(len(x), len(y))) if x[i] != y[i]),
                      min(len(x), len(y)))
            sys.exit(f"the files differ from byte {at} on ({len(x)} and "
                     f"{len(y)} bytes)")
        print(f"whole file identical, {len(x)} bytes")
    print(f"OK {len(a)} tensors" + (f", {changed} changed" if differ else "")
          + f", metadata {a_meta}")


if __name__ == "__main__":
    main(sys.argv[1:])
