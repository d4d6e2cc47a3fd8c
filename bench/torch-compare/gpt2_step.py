#!/usr/bin/env python3
# ===- bench/torch-compare/gpt2_step.py - GPT-2 small step in PyTorch ------=== #
#
# The model and step that bench/train-step/bench-train-step.sh runs in dsc,
# in plain PyTorch: GPT-2 small as examples/configs/gpt2-small.yml spells it
# (12 layers, h=768, 12 heads, GPT-2's 50257 tokens padded to 50304, learned
# positions up to SEQ, pre-LayerNorm with eps 1e-5, tanh GELU, tied input and
# output embeddings, fp32, no dropout), cross-entropy over the 50257 real
# classes, and one training step = forward + backward + clip_grad_norm_(1.0)
# + AdamW (lr 6e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on the 2-D
# weights and 0 on biases and norms, as dsc's plan has it).
#
# Usage: gpt2_step.py --mode eager|compile --seq S [--batch 4] [--steps N]
#                     [--warmup W] [--threads 2]
# Prints one line: RESULT mode=... seq=... ms_per_step=<median> ...
# Run by compare.sh inside a throw-away virtual environment; never in CI.
# ===----------------------------------------------------------------------=== #
import argparse
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, PADDED_VOCAB = 50257, 50304
LAYERS, HIDDEN, HEADS = 12, 768, 12


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(HIDDEN, eps=1e-5)
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.proj = nn.Linear(HIDDEN, HIDDEN)
        self.ln_2 = nn.LayerNorm(HIDDEN, eps=1e-5)
        self.fc = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.mlp_proj = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(HIDDEN, dim=2)
        q, k, v = (t.view(b, s, HEADS, h // HEADS).transpose(1, 2)
                   for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, s, h))
        return x + self.mlp_proj(
            F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, seq):
        super().__init__()
        self.wte = nn.Embedding(PADDED_VOCAB, HIDDEN)
        self.wpe = nn.Embedding(seq, HIDDEN)
        self.h = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(HIDDEN, eps=1e-5)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, ids, labels):
        s = ids.shape[1]
        x = self.wte(ids) + self.wpe(torch.arange(s, device=ids.device))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied embeddings
        return F.cross_entropy(logits[..., :VOCAB].reshape(-1, VOCAB),
                               labels.reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("eager", "compile"), required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(1234)
    model = GPT2(a.seq)
    params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1},
              {"params": no_decay, "weight_decay": 0.0}]
    try:  # the fused CPU kernel (torch >= 2.4), else the default loop
        opt = torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8,
                                fused=True)
        fused = True
    except (RuntimeError, TypeError, ValueError):
        opt = torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
        fused = False
    fwd = torch.compile(model) if a.mode == "compile" else model

    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (a.batch, a.seq), generator=g)
    labels = torch.randint(0, VOCAB, (a.batch, a.seq), generator=g)

    def step():
        loss = fwd(ids, labels)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item(), norm.item()

    times, losses = [], []
    t_first = None
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        loss, norm = step()
        dt = (time.perf_counter() - t0) * 1e3
        if i == 0:
            t_first = dt
        if i >= a.warmup:
            times.append(dt)
        losses.append(loss)
        print(f"  {a.mode} s={a.seq} step {i + 1}: {dt:.1f} ms  loss {loss:.4f}"
              f"  grad norm {norm:.3f}", file=sys.stderr, flush=True)
    assert all(math.isfinite(l) for l in losses)
    print(f"RESULT mode={a.mode} seq={a.seq} batch={a.batch} "
          f"ms_per_step={statistics.median(times):.1f} "
          f"first_step_ms={t_first:.1f} steps={len(times)} params={params} "
          f"threads={torch.get_num_threads()} fused_adamw={fused} "
          f"torch={torch.__version__} loss={losses[0]:.4f}->{losses[-1]:.4f}",
          flush=True)


if __name__ == "__main__":
    main()
