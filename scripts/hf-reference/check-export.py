#!/usr/bin/env python3
"""Check a dsc --export-hf directory with transformers itself (a developer
runs this by hand, never CI: it needs torch and transformers, see README.md).

It loads the exported directory with AutoModelForCausalLM.from_pretrained,
unchanged, runs one fp32 forward and backward on seeded tokens, and writes
those tokens, the loss over all positions and every gradient as a golden
file in make-goldens.py's layout. Then dsc imports the same directory
(dsc-translate --import-hf) and dsc-hf-check compares dsc's loss and
gradients with transformers' on it: the exported state computes in
transformers what it computes in dsc.

usage: check-export.py EXPORTED_DIR --dsc-bin BUILD/bin [--seq 12] [--batch 2]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import load_file, save_file


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("exported")
    ap.add_argument("--dsc-bin", required=True)
    ap.add_argument("--seq", type=int, default=12)
    ap.add_argument("--batch", type=int, default=2)
    args = ap.parse_args()

    model = transformers.AutoModelForCausalLM.from_pretrained(
        args.exported, dtype=torch.float32)
    model.train(False)
    V = model.config.vocab_size
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, V, (args.batch, args.seq + 1), generator=g)
    tokens, targets = ids[:, :-1], ids[:, 1:]
    logits = model(input_ids=tokens).logits
    loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
    loss.backward()
    print(f"transformers {transformers.__version__} loads {args.exported}: "
          f"loss {loss.item():.9f}")

    # Gradients under the names model.safetensors uses (as make-goldens.py).
    saved = load_file(os.path.join(args.exported, "model.safetensors"))
    params = dict(model.named_parameters())
    golden = {"tokens": tokens.to(torch.int32).contiguous(),
              "targets": targets.to(torch.int32).contiguous(),
              "logits": logits.detach().contiguous(),
              "loss_all_positions": loss.detach().double().reshape(1)}
    for name in saved:
        p = params.get(name)
        if p is None:  # a legacy saved name: match by value
            hits = [n for n, q in params.items()
                    if q.shape == saved[name].shape and torch.equal(q.detach(), saved[name])]
            assert len(hits) == 1, (name, hits)
            p = params[hits[0]]
        golden["grad." + name] = p.grad.detach().contiguous()

    with tempfile.TemporaryDirectory() as tmp:
        gpath = os.path.join(tmp, "golden.safetensors")
        save_file(golden, gpath)
        mlir = os.path.join(tmp, "model.mlir")
        ckpt = os.path.join(tmp, "ckpt")
        config = os.path.join(args.exported, "config.json")
        subprocess.run([os.path.join(args.dsc_bin, "dsc-translate"), "--import-hf", config,
                        "--import-hf-checkpoint", ckpt, "--import-hf-seq-length", str(args.seq),
                        "--import-hf-micro-batch-size", str(args.batch), "-o", mlir], check=True)
        r = subprocess.run([os.path.join(args.dsc_bin, "dsc-hf-check"), mlir, "--load", ckpt,
                            "--golden", gpath, "--config", config, "--loss-rtol", "1e-6"])
    sys.exit(r.returncode)


if __name__ == "__main__":
    main()
