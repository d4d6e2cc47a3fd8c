#!/usr/bin/env python3
"""Imports mutated copies of a Hugging Face directory's model.safetensors
with dsc-translate --import-hf and checks that each run ends with exit 0
or 1 and, on 1, an error message (never a crash, a hang or a silent
failure).

The mutations target the header, where a hostile file lies: a digit of a
shape or offset changed, a dtype swapped, a tensor name altered, a byte of
the length prefix changed, the file cut short.

usage: fuzz-hf-import.py DSC_TRANSLATE SRC_DIR WORK_DIR RUNS
"""

import os
import random
import shutil
import struct
import subprocess
import sys


def mutate(data, rng):
    (n,) = struct.unpack("<Q", data[:8])
    header = bytearray(data[8:8 + n])
    body = data[8 + n:]
    kind = rng.randrange(6)
    if kind == 0:  # a digit of a shape or offset
        digits = [i for i, c in enumerate(header) if chr(c).isdigit()]
        header[rng.choice(digits)] = ord(rng.choice("0123456789"))
    elif kind == 1:  # a dtype
        text = header.decode()
        for a, b in (("F32", "I32"), ("F32", "BF16"), ("F32", "F64"), ("F32", "U8")):
            if a in text:
                text = text.replace(a, b, 1 + rng.randrange(3))
                break
        header = bytearray(text.encode())
        n = len(header)
    elif kind == 2:  # a tensor's name
        text = header.decode()
        pos = text.find("proj", rng.randrange(max(1, len(text) - 8)))
        if pos >= 0:
            text = text[:pos] + "prox" + text[pos + 4:]
        header = bytearray(text.encode())
    elif kind == 3:  # the length prefix
        n = (n + rng.choice([-7, -1, 1, 9, 1 << 20])) & ((1 << 64) - 1)
    elif kind == 4:  # a structural character
        structural = [i for i, c in enumerate(header) if chr(c) in '[]{},:"']
        header[rng.choice(structural)] = ord(rng.choice(' x0'))
    else:  # cut short
        return data[: rng.randrange(len(data))]
    return struct.pack("<Q", n) + bytes(header) + body


def main(argv):
    tool, src, work, runs = argv[0], argv[1], argv[2], int(argv[3])
    os.makedirs(work, exist_ok=True)
    shutil.copy(os.path.join(src, "config.json"), os.path.join(work, "config.json"))
    data = open(os.path.join(src, "model.safetensors"), "rb").read()
    rng = random.Random(7)
    errors = 0
    for i in range(runs):
        with open(os.path.join(work, "model.safetensors"), "wb") as f:
            f.write(mutate(data, rng))
        r = subprocess.run([tool, "--import-hf", os.path.join(work, "config.json"),
                            "--import-hf-checkpoint", os.path.join(work, f"ckpt{i}"),
                            "-o", os.devnull], capture_output=True, text=True, timeout=60)
        if r.returncode not in (0, 1) or (r.returncode == 1 and "error:" not in r.stderr):
            sys.exit(f"run {i}: exit {r.returncode}\n{r.stderr}")
        errors += r.returncode
        shutil.rmtree(os.path.join(work, f"ckpt{i}"), ignore_errors=True)
    print(f"OK {runs} mutated files, {errors} refused with an error, "
          f"{runs - errors} imported")


if __name__ == "__main__":
    main(sys.argv[1:])
