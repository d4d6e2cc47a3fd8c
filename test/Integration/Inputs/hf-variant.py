#!/usr/bin/env python3
"""Makes a broken copy of a Hugging Face model directory for error tests.

usage: hf-variant.py SRC DST [--config OLD NEW]... [--truncate-weights N]
                     [--drop-tensor NAME]...
Copies SRC/config.json (with each OLD text replaced by NEW, which must
occur) and SRC/model.safetensors (its first N bytes with --truncate-weights,
without the tensors NAME, which must be there, with --drop-tensor) into DST.
"""

import json
import os
import struct
import sys


def drop_tensors(weights, names):
    """The safetensors file `weights` without the tensors `names`."""
    (n,) = struct.unpack("<Q", weights[:8])
    header = json.loads(weights[8:8 + n])
    data = weights[8 + n:]
    kept, parts, at = {}, [], 0
    for name in names:
        if name not in header:
            sys.exit(f"hf-variant.py: no tensor '{name}' to drop")
    for name, entry in header.items():
        if name == "__metadata__":
            kept[name] = entry
            continue
        if name in names:
            continue
        begin, end = entry["data_offsets"]
        parts.append(data[begin:end])
        kept[name] = dict(entry, data_offsets=[at, at + end - begin])
        at += end - begin
    text = json.dumps(kept).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(parts)


def main(argv):
    src, dst, rest = argv[0], argv[1], argv[2:]
    os.makedirs(dst, exist_ok=True)
    config = open(os.path.join(src, "config.json")).read()
    truncate = None
    dropped = []
    i = 0
    while i < len(rest):
        if rest[i] == "--config":
            old, new = rest[i + 1], rest[i + 2]
            if old not in config:
                sys.exit(f"hf-variant.py: '{old}' is not in {src}/config.json")
            config = config.replace(old, new)
            i += 3
        elif rest[i] == "--drop-tensor":
            dropped.append(rest[i + 1])
            i += 2
        elif rest[i] == "--truncate-weights":
            truncate = int(rest[i + 1])
            i += 2
        else:
            sys.exit(f"hf-variant.py: unknown argument '{rest[i]}'")
    open(os.path.join(dst, "config.json"), "w").write(config)
    weights = open(os.path.join(src, "model.safetensors"), "rb").read()
    if dropped:
        weights = drop_tensors(weights, dropped)
    if truncate is not None:
        weights = weights[:truncate]
    open(os.path.join(dst, "model.safetensors"), "wb").write(weights)


if __name__ == "__main__":
    main(sys.argv[1:])
