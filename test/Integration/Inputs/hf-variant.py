#!/usr/bin/env python3
"""Makes a broken copy of a Hugging Face model directory for error tests.

usage: hf-variant.py SRC DST [--config OLD NEW]... [--truncate-weights N]
Copies SRC/config.json (with each OLD text replaced by NEW, which must
occur) and SRC/model.safetensors (its first N bytes with --truncate-weights)
into DST.
"""

import os
import sys


def main(argv):
    src, dst, rest = argv[0], argv[1], argv[2:]
    os.makedirs(dst, exist_ok=True)
    config = open(os.path.join(src, "config.json")).read()
    truncate = None
    i = 0
    while i < len(rest):
        if rest[i] == "--config":
            old, new = rest[i + 1], rest[i + 2]
            if old not in config:
                sys.exit(f"hf-variant.py: '{old}' is not in {src}/config.json")
            config = config.replace(old, new)
            i += 3
        elif rest[i] == "--truncate-weights":
            truncate = int(rest[i + 1])
            i += 2
        else:
            sys.exit(f"hf-variant.py: unknown argument '{rest[i]}'")
    open(os.path.join(dst, "config.json"), "w").write(config)
    weights = open(os.path.join(src, "model.safetensors"), "rb").read()
    if truncate is not None:
        weights = weights[:truncate]
    open(os.path.join(dst, "model.safetensors"), "wb").write(weights)


if __name__ == "__main__":
    main(sys.argv[1:])
