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
  checkpoint-tools.py close STEP_A STEP_B [--rtol R] [--norm]
      The parameters of two step directories (saved by any plans) agree
      within R relative (default 0), per tensor, or with --norm as one
      vector. Prints "OK N parameters, max relative difference X".
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


def tensors(step):
    """The step directory's whole tensors, by name, each assembled from its
    pieces (checksums, boxes and coverage checked)."""
    import numpy as np  # only here: `resumed` runs without it
    dtypes = {"F32": np.float32, "F64": np.float64, "I32": np.int32,
              "F16": np.float16, "BF16": np.uint16}
    with open(os.path.join(step, "manifest.json")) as f:
        m = json.load(f)
    assert m["format"] == "dsc-checkpoint" and m["version"] == 2
    files = {name: read_header(os.path.join(step, name)) for name in m["files"]}
    result = {}
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
        result[t["name"]] = whole.reshape(t["shape"])
    return m, result


def read(argv):
    step = argv[0]
    m, whole = tensors(step)
    elements = sum(t.size for t in whole.values())
    try:
        from safetensors import safe_open
        for name in m["files"]:
            with safe_open(os.path.join(step, name), framework="numpy") as f:
                for key in f.keys():
                    f.get_tensor(key)
    except ImportError:
        pass
    print(f"OK {len(m['files'])} files, {len(m['tensors'])} tensors, "
          f"{elements} elements")


def close(argv):
    """close STEP_A STEP_B [--rtol R] [--norm]: the two steps' parameters
    (the tensors of both whose names are not optimizer or gradient state)
    have the same names and shapes, and each differs from the other by at
    most R relative to the larger of their largest magnitudes; with
    --norm, ||A - B|| / ||A|| over all of them is at most R. Prints "OK N
    parameters, max relative difference X"."""
    import numpy as np
    rtol = 0.0
    if "--rtol" in argv:
        i = argv.index("--rtol")
        rtol = float(argv[i + 1])
        del argv[i:i + 2]
    whole = "--norm" in argv
    if whole:
        argv.remove("--norm")
    _, a = tensors(argv[0])
    _, b = tensors(argv[1])
    def params(d):
        return {k: v for k, v in d.items()
                if not k.startswith(("grad.", "adam.", "sgd."))}
    a, b = params(a), params(b)
    if sorted(a) != sorted(b):
        sys.exit(f"parameters differ: {sorted(set(a) ^ set(b))}")
    worst, where = 0.0, ""
    diff2 = norm2 = 0.0
    for name in sorted(a):
        x, y = a[name].astype(np.float64), b[name].astype(np.float64)
        if x.shape != y.shape:
            sys.exit(f"{name}: shapes {x.shape} and {y.shape}")
        diff2 += float(((x - y) ** 2).sum())
        norm2 += float((x ** 2).sum())
        scale = max(np.abs(x).max(), np.abs(y).max(), 1e-30)
        d = float(np.abs(x - y).max() / scale)
        if d > worst:
            worst, where = d, name
    if whole:
        # ||A - B|| / ||A|| over all parameters together: Adam divides
        # each gradient by the root of its second moment, so an element
        # whose gradient is rounding noise moves by a whole step either
        # way; a per-tensor bound would measure that noise, not the run.
        worst, where = (diff2 / max(norm2, 1e-300)) ** 0.5, "the parameters"
    if worst > rtol:
        sys.exit(f"{where}: relative difference {worst:.3g} > {rtol:g}")
    print(f"OK {len(a)} parameters, max relative difference {worst:.3g}")


if __name__ == "__main__":
    {"resumed": resumed, "read": read, "close": close}[sys.argv[1]](sys.argv[2:])
