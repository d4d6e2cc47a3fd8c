#!/usr/bin/env python3
"""Checks dsc checkpoints and resumed runs (docs/checkpoints.md).

usage:
  checkpoint-tools.py resumed REFERENCE.jsonl RESUMED.jsonl [--rtol R]
      RESUMED's iterations must be the last ones of REFERENCE's; each
      lm_loss within R relative (default 0: bit-equal). Prints
      "OK resumed N steps (A-B), max relative difference X".
  checkpoint-tools.py read STEP_DIR
      Reads the step directory as a loader written from the docs would,
      with nothing but json and numpy: every data file's safetensors header
      (8-byte little-endian length, JSON, contiguous data_offsets), every
      piece's checksum (XXH3-64) and box, every whole tensor assembled
      from its pieces with no element missing or written twice. With the
      `safetensors` package installed, also opens each file with it.
      Prints "OK F files, T tensors, E elements".
"""

import json
import os
import struct
import sys


def losses(path):
    with open(path) as f:
        return {r["iteration"]: r["lm_loss"] for r in map(json.loads, f)
                if r}


def resumed(argv):
    rtol = 0.0
    if "--rtol" in argv:
        i = argv.index("--rtol")
        rtol = float(argv[i + 1])
        del argv[i:i + 2]
    ref, other = losses(argv[0]), losses(argv[1])
    its = sorted(other)
    if not its or its != sorted(ref)[-len(its):]:
        sys.exit(f"{argv[1]}: iterations {its} are not the last of "
                 f"{argv[0]}'s {sorted(ref)}")
    worst = 0.0
    for it in its:
        a, b = ref[it], other[it]
        rel = abs(a - b) / max(abs(a), 1e-30)
        if (rtol == 0 and a != b) or rel > rtol:
            sys.exit(f"{argv[1]}: iteration {it}: loss {b!r} differs from "
                     f"{a!r} by {rel:.3g} relative (> {rtol:g})")
        worst = max(worst, rel)
    print(f"OK resumed {len(its)} steps ({its[0]}-{its[-1]}), "
          f"max relative difference {worst:.3g}")


def xxh3_64(data):
    import xxhash  # Debian's python3-xxhash; only `read` needs it
    return xxhash.xxh3_64_intdigest(data)


def read_header(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    start, at = 8 + n, 0
    entries = sorted((v["data_offsets"], k) for k, v in header.items()
                     if k != "__metadata__")
    for (begin, end), key in entries:
        assert begin == at, f"{path}: gap or overlap before {key}"
        at = end
    assert start + at == len(raw), f"{path}: trailing bytes"
    return header, start, raw


def read(argv):
    import numpy as np  # only here: `resumed` runs without it
    dtypes = {"F32": np.float32, "F64": np.float64, "I32": np.int32,
              "F16": np.float16, "BF16": np.uint16}
    step = argv[0]
    with open(os.path.join(step, "manifest.json")) as f:
        m = json.load(f)
    assert m["format"] == "dsc-checkpoint" and m["version"] == 2
    files = {name: read_header(os.path.join(step, name)) for name in m["files"]}
    elements = 0
    for t in m["tensors"]:
        dtype = dtypes[t["dtype"]]
        whole = np.zeros(int(np.prod(t["shape"])), dtype=dtype)
        seen = np.zeros(whole.size, dtype=np.int32)
        for p in t["pieces"]:
            header, start, raw = files[p["file"]]
            entry = header[p["key"]]
            assert entry["dtype"] == t["dtype"]
            begin, end = entry["data_offsets"]
            assert (start + begin, end - begin) == (p["byte_offset"],
                                                    p["byte_length"])
            data = raw[start + begin:start + end]
            assert f"{xxh3_64(data):016x}" == p["xxh3_64"], \
                f"{t['name']}: checksum"
            values = np.frombuffer(data, dtype=dtype)
            # The box's whole-tensor flat indices, then the flat range.
            view, off, size = p["view"], p["offsets"], p["sizes"]
            index = np.arange(whole.size).reshape(view)
            box = index[tuple(slice(o, o + s) for o, s in zip(off, size))]
            box = box.reshape(-1)
            if "flat" in p:
                box = box[p["flat"][0]:p["flat"][0] + p["flat"][1]]
            whole[box] = values
            seen[box] += 1
        assert (seen == 1).all(), f"{t['name']}: coverage"
        elements += whole.size
    try:
        from safetensors import safe_open
        for name in m["files"]:
            with safe_open(os.path.join(step, name), framework="numpy") as f:
                for key in f.keys():
                    f.get_tensor(key)
    except ImportError:
        pass
    print(f"OK {len(files)} files, {len(m['tensors'])} tensors, "
          f"{elements} elements")


if __name__ == "__main__":
    {"resumed": resumed, "read": read}[sys.argv[1]](sys.argv[2:])
