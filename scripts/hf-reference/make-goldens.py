#!/usr/bin/env python3
"""Make the Hugging Face reference golden files for dsc's model-family importers.

A developer runs this by hand (never CI): it needs torch and transformers from
PyPI, see scripts/hf-reference/README.md for the virtualenv.  It builds tiny
random models of each family (gpt2, gpt-neox, gpt-neox-sequential, llama,
mistral, mixtral), runs one fp32 forward/backward on fixed tokens, and writes
under test/Integration/Inputs/hf/<family>/:

  config.json, model.safetensors   as model.save_pretrained() writes them
  golden.safetensors               tokens, targets, logits, losses, grads
                                   (mixtral also: router logits, top-k choice
                                   and weights per layer, the router aux loss)

It also checks its own understanding of each family's conventions (fused QKV
row order, rotate_half rotary, partial rotary, sliding window, GQA/MQA head
mapping, Mixtral's top-2 routing and per-expert w1/w2/w3) with an independent
float64 implementation written here from those conventions, which reads the
SAVED config.json and model.safetensors; any disagreement aborts the run.  The
numbers it prints are the ones quoted in the README.
"""

import argparse
import copy
import json
import math
import os
import re
import sys

import numpy as np
import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import load_file, save_file

SEED = 0              # model init
NOISE_SEED = 1        # perturbation of norm weights and biases
TOKEN_SEED = 2        # token ids
NOISE_STD = 0.1
# The families' own init, but with initializer_range 0.2 instead of HF's 0.02:
# at 0.02 these tiny models are almost linear with near-uniform attention and
# logits, and a wrong activation (gelu erf vs tanh) moves the logits by only
# ~1e-6 of their scale, no more than fp32 rounding.  At 0.2 every deliberate
# mistake checked below moves them by >= 2e-4 (structural ones by ~1).
INIT_STD = 0.2
BATCH = 2
SEQ = 12

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEFAULT_OUT = os.path.join(REPO, "test", "Integration", "Inputs", "hf")


# --------------------------------------------------------------------------
# Family definitions
# --------------------------------------------------------------------------

def make_config(family):
    """Returns (model class, config) for one family."""
    common = dict(attn_implementation="eager", initializer_range=INIT_STD)
    if family == "gpt2":
        cfg = transformers.GPT2Config(
            n_layer=2, n_embd=32, n_head=4, n_positions=16, vocab_size=96,
            activation_function="gelu_new", bos_token_id=None, eos_token_id=None, resid_pdrop=0.0, embd_pdrop=0.0,
            attn_pdrop=0.0, tie_word_embeddings=True, **common)
        return transformers.GPT2LMHeadModel, cfg
    if family in ("gpt-neox", "gpt-neox-sequential"):
        parallel = family == "gpt-neox"
        cfg = transformers.GPTNeoXConfig(
            num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
            intermediate_size=128, rotary_pct=0.25 if parallel else 1.0,
            rotary_emb_base=10000, use_parallel_residual=parallel,
            tie_word_embeddings=False, vocab_size=100,
            max_position_embeddings=16, layer_norm_eps=1e-5, hidden_act="gelu",
            attention_dropout=0.0, hidden_dropout=0.0, **common)
        return transformers.GPTNeoXForCausalLM, cfg
    if family == "llama":
        cfg = transformers.LlamaConfig(
            num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
            num_key_value_heads=2, intermediate_size=88, rms_norm_eps=1e-6,
            rope_theta=10000.0, tie_word_embeddings=False, vocab_size=100,
            max_position_embeddings=16, hidden_act="silu",
            attention_bias=False, mlp_bias=False, attention_dropout=0.0,
            **common)
        return transformers.LlamaForCausalLM, cfg
    if family == "mistral":
        cfg = transformers.MistralConfig(
            num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
            num_key_value_heads=1, intermediate_size=88, rms_norm_eps=1e-6,
            rope_theta=10000.0, tie_word_embeddings=False, vocab_size=100,
            max_position_embeddings=16, hidden_act="silu", sliding_window=4,
            attention_dropout=0.0, **common)
        return transformers.MistralForCausalLM, cfg
    if family == "mixtral":
        # Llama's tiny shapes with a top-2 of 4 SwiGLU experts in place of the
        # MLP.  experts_implementation="eager" (the default would be
        # "grouped_mm"), like attn_implementation; it is not written to
        # config.json.  output_router_logits=False is HF's default: the loss of
        # the main forward has no aux term (run_family records it separately).
        cfg = transformers.MixtralConfig(
            num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
            num_key_value_heads=2, intermediate_size=48, num_local_experts=4,
            num_experts_per_tok=2, rms_norm_eps=1e-6, rope_theta=10000.0,
            tie_word_embeddings=False, vocab_size=100,
            max_position_embeddings=16, hidden_act="silu", sliding_window=None,
            attention_dropout=0.0, output_router_logits=False,
            router_aux_loss_coef=0.02, router_jitter_noise=0.0,
            experts_implementation="eager", **common)
        return transformers.MixtralForCausalLM, cfg
    raise ValueError(family)


FAMILIES = ["gpt2", "gpt-neox", "gpt-neox-sequential", "llama", "mistral", "mixtral"]


def build_model(family):
    cls, cfg = make_config(family)
    torch.manual_seed(SEED)
    np.random.seed(SEED)
    model = cls(cfg).to(torch.float32)
    model.eval()
    assert model.config._attn_implementation == "eager", model.config._attn_implementation
    if family == "mixtral":
        assert model.config._experts_implementation == "eager", model.config._experts_implementation
    # Perturb every LayerNorm/RMSNorm weight and every bias, so that a missing
    # bias or a norm taken as identity shows in the logits.
    norm_params = set()
    for mname, mod in model.named_modules():
        if isinstance(mod, torch.nn.LayerNorm) or "RMSNorm" in type(mod).__name__:
            for pname, _ in mod.named_parameters(recurse=False):
                norm_params.add(f"{mname}.{pname}" if mname else pname)
    gen = torch.Generator().manual_seed(NOISE_SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name in norm_params or name.endswith(".bias") or name == "bias":
                p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * NOISE_STD)
    return model


def make_tokens(vocab):
    gen = torch.Generator().manual_seed(TOKEN_SEED)
    ids = torch.randint(0, vocab, (BATCH, SEQ + 1), generator=gen)
    return ids[:, :SEQ].contiguous(), ids[:, 1:].contiguous()


# --------------------------------------------------------------------------
# Independent float64 reference, written from the conventions in the README.
# It takes the saved config.json (a dict) and model.safetensors (a dict of
# tensors) and knows nothing of transformers.  `variant` switches on one
# deliberate mistake, to show how far such a mistake moves the logits.
# --------------------------------------------------------------------------

def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def rms_norm(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def gelu_tanh(x):  # "gelu_new"
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):  # "gelu"
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def rope(x, rot_dims, base, variant):
    """x: [B, heads, T, hd].  Rotates the first rot_dims dims of each head.

    rotate_half convention: for i < rot_dims/2 the pair (i, i + rot_dims/2) is
    rotated by angle t * base^(-2i/rot_dims)."""
    T = x.shape[2]
    half = rot_dims // 2
    inv = base ** (-torch.arange(half, dtype=torch.float64) * 2.0 / rot_dims)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]   # [T, half]
    cos, sin = torch.cos(ang), torch.sin(ang)
    xr, xp = x[..., :rot_dims], x[..., rot_dims:]
    if variant == "interleaved-rope":   # the GPT-J / Meta pairing (2i, 2i+1): wrong for HF
        a, b = xr[..., 0::2], xr[..., 1::2]
        ra, rb = a * cos - b * sin, a * sin + b * cos
        xr = torch.stack([ra, rb], dim=-1).flatten(-2)
    else:
        a, b = xr[..., :half], xr[..., half:]
        xr = torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
    return torch.cat([xr, xp], dim=-1)


def attention(q, k, v, window, variant):
    """q: [B, H, T, hd], k/v: [B, KVH, T, hd].  Query head h uses kv head
    h // (H / KVH).  Causal; with a window W, query t sees keys t-W+1 .. t."""
    B, H, T, hd = q.shape
    kvh = k.shape[1]
    rep = H // kvh
    if variant == "kv-head-modulo":      # wrong GQA mapping h % KVH
        idx = torch.arange(H) % kvh
    else:
        idx = torch.arange(H) // rep
    k, v = k[:, idx], v[:, idx]
    s = q @ k.transpose(-1, -2) / math.sqrt(hd)
    t = torch.arange(T)
    allowed = t[None, :] <= t[:, None]
    if window is not None and variant != "no-window":
        allowed = allowed & (t[None, :] > t[:, None] - window)
    s = s.masked_fill(~allowed, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def heads(x, n, hd):  # [B, T, n*hd] -> [B, n, T, hd]
    B, T, _ = x.shape
    return x.view(B, T, n, hd).transpose(1, 2)


def merge(x):  # [B, n, T, hd] -> [B, T, n*hd]
    B, n, T, hd = x.shape
    return x.transpose(1, 2).reshape(B, T, n * hd)


def ref_gpt2(cfg, W, tokens, variant):
    E, nH = cfg["n_embd"], cfg["n_head"]
    hd = E // nH
    eps = cfg["layer_norm_epsilon"]
    T = tokens.shape[1]
    x = W["transformer.wte.weight"][tokens] + W["transformer.wpe.weight"][:T]
    for l in range(cfg["n_layer"]):
        p = f"transformer.h.{l}."
        h = layer_norm(x, W[p + "ln_1.weight"], W[p + "ln_1.bias"], eps)
        # Conv1D: weight is [in, out], y = x @ W + b.  Columns = [Q | K | V].
        qkv = h @ W[p + "attn.c_attn.weight"] + W[p + "attn.c_attn.bias"]
        q, k, v = qkv.split(E, dim=-1)
        a = merge(attention(heads(q, nH, hd), heads(k, nH, hd), heads(v, nH, hd), None, variant))
        wo = W[p + "attn.c_proj.weight"]
        if variant == "conv1d-as-linear":   # wrong: treating the [in, out] weight as [out, in]
            wo = wo.T
        x = x + a @ wo + W[p + "attn.c_proj.bias"]
        h = layer_norm(x, W[p + "ln_2.weight"], W[p + "ln_2.bias"], eps)
        act = gelu_erf if variant == "gelu-erf" else gelu_tanh
        m = act(h @ W[p + "mlp.c_fc.weight"] + W[p + "mlp.c_fc.bias"])
        x = x + m @ W[p + "mlp.c_proj.weight"] + W[p + "mlp.c_proj.bias"]
    x = layer_norm(x, W["transformer.ln_f.weight"], W["transformer.ln_f.bias"], eps)
    return x @ W["transformer.wte.weight"].T          # tied head


def ref_neox(cfg, W, tokens, variant):
    E, nH = cfg["hidden_size"], cfg["num_attention_heads"]
    hd = E // nH
    eps = cfg["layer_norm_eps"]
    rp = cfg["rope_parameters"]
    rot = hd if variant == "rope-full-head" else int(hd * rp["partial_rotary_factor"])
    base = rp["rope_theta"]
    B, T = tokens.shape
    lin = lambda x, n: x @ W[n + ".weight"].T + W[n + ".bias"]
    x = W["gpt_neox.embed_in.weight"][tokens]
    for l in range(cfg["num_hidden_layers"]):
        p = f"gpt_neox.layers.{l}."
        h = layer_norm(x, W[p + "input_layernorm.weight"], W[p + "input_layernorm.bias"], eps)
        qkv = lin(h, p + "attention.query_key_value")            # [B, T, 3E]
        if variant == "qkv-blocked":   # wrong: [Q | K | V] blocks as in GPT-2
            q, k, v = (heads(t, nH, hd) for t in qkv.split(E, dim=-1))
        else:                          # right: per head [q_h, k_h, v_h]
            qkv = qkv.view(B, T, nH, 3 * hd).transpose(1, 2)     # [B, nH, T, 3hd]
            q, k, v = qkv.split(hd, dim=-1)
        q, k = rope(q, rot, base, variant), rope(k, rot, base, variant)
        a = lin(merge(attention(q, k, v, None, variant)), p + "attention.dense")
        if cfg["use_parallel_residual"] != (variant == "wrong-residual"):
            h2 = layer_norm(x, W[p + "post_attention_layernorm.weight"], W[p + "post_attention_layernorm.bias"], eps)
            x = x + a + lin(gelu_erf(lin(h2, p + "mlp.dense_h_to_4h")), p + "mlp.dense_4h_to_h")
        else:
            x = x + a
            h2 = layer_norm(x, W[p + "post_attention_layernorm.weight"], W[p + "post_attention_layernorm.bias"], eps)
            x = x + lin(gelu_erf(lin(h2, p + "mlp.dense_h_to_4h")), p + "mlp.dense_4h_to_h")
    x = layer_norm(x, W["gpt_neox.final_layer_norm.weight"], W["gpt_neox.final_layer_norm.bias"], eps)
    return x @ W["embed_out.weight"].T   # saved name of HF's lm_head


def moe(h, W, p, cfg, variant, trace):
    """Mixtral's sparse MoE block on h [B, T, E], from the saved per-expert
    layout: router p+"block_sparse_moe.gate.weight" [n_exp, E]; expert e has
    w1 (gate) [F, E], w3 (up) [F, E], w2 (down) [E, F].  Router: softmax over
    all experts, the top-k probabilities renormalised to sum 1; expert e's
    output down(silu(w1 x) * w3 x) is weighted by its renormalised probability.
    Every expert runs on every token and the unchosen ones get weight 0, which
    is the same function and gradient as HF's gather."""
    n_exp, k = cfg["num_local_experts"], cfg["num_experts_per_tok"]
    B, T, E = h.shape
    x = h.reshape(B * T, E)
    q = p + "block_sparse_moe."
    logits = x @ W[q + "gate.weight"].T                      # [N, n_exp]
    probs = torch.softmax(logits, dim=-1)
    top_p, top_i = probs.topk(k, dim=-1)
    if variant != "no-topk-renorm":
        top_p = top_p / top_p.sum(-1, keepdim=True)
    if trace is not None:
        trace.append((logits, top_i))
    out = torch.zeros_like(x)
    for e in range(n_exp):
        w1, w2, w3 = (W[f"{q}experts.{e}.{n}.weight"] for n in ("w1", "w2", "w3"))
        if variant == "w1-w3-swapped":      # gate and up exchanged
            w1, w3 = w3, w1
        y = (F.silu(x @ w1.T) * (x @ w3.T)) @ w2.T
        out = out + (top_p * (top_i == e)).sum(-1, keepdim=True) * y
    return out.view(B, T, E)


def aux_loss_ref(trace, n_exp, k, variant=None):
    """HF's load_balancing_loss_func: the layers' rows are pooled (as if the
    [N, n_exp] router logits of all L layers were concatenated):
    n_exp * sum_e f_e * P_e, f_e = (top-k slots on e) / (L*N) (sums to k),
    P_e = mean softmax probability of e over the L*N rows.  The variant
    'per-layer-mean' averages the per-layer losses instead."""
    if variant == "per-layer-mean":
        return sum(aux_loss_ref([t], n_exp, k) for t in trace) / len(trace)
    logits = torch.cat([t[0] for t in trace])
    top_i = torch.cat([t[1] for t in trace])
    f = F.one_hot(top_i, n_exp).to(logits.dtype).sum(1).mean(0)
    P = torch.softmax(logits, dim=-1).mean(0)
    return n_exp * (f * P).sum()


def ref_llama(cfg, W, tokens, variant, trace=None):
    E, nH, nKV = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or E // nH
    eps = cfg["rms_norm_eps"]
    base = cfg["rope_parameters"]["rope_theta"]
    window = cfg.get("sliding_window")
    mm = lambda x, n: x @ W[n + ".weight"].T
    x = W["model.embed_tokens.weight"][tokens]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        q = rope(heads(mm(h, p + "self_attn.q_proj"), nH, hd), hd, base, variant)
        k = rope(heads(mm(h, p + "self_attn.k_proj"), nKV, hd), hd, base, variant)
        v = heads(mm(h, p + "self_attn.v_proj"), nKV, hd)
        x = x + mm(merge(attention(q, k, v, window, variant)), p + "self_attn.o_proj")
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        if "num_local_experts" in cfg:   # Mixtral
            x = x + moe(h, W, p, cfg, variant, trace)
            continue
        g = mm(h, p + "mlp.gate_proj")
        x = x + mm(F.silu(g) * mm(h, p + "mlp.up_proj"), p + "mlp.down_proj")
    x = rms_norm(x, W["model.norm.weight"], eps)
    return x @ W["lm_head.weight"].T


REFERENCE = {"gpt2": ref_gpt2, "gpt-neox": ref_neox, "gpt-neox-sequential": ref_neox,
             "llama": ref_llama, "mistral": ref_llama, "mixtral": ref_llama}
VARIANTS = {"gpt2": ["conv1d-as-linear", "gelu-erf"],
            "gpt-neox": ["qkv-blocked", "rope-full-head", "wrong-residual"],
            "gpt-neox-sequential": ["qkv-blocked", "interleaved-rope", "wrong-residual"],
            "llama": ["interleaved-rope", "kv-head-modulo"],
            "mistral": ["interleaved-rope", "no-window"],
            "mixtral": ["interleaved-rope", "kv-head-modulo", "no-topk-renorm", "w1-w3-swapped"]}


# --------------------------------------------------------------------------

def rel(a, b):
    """max |a - b| / max |b|: the error relative to the tensor's scale."""
    a, b = a.double(), b.double()
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-300)).item()


def elem_rel(a, b, floor=1e-30):
    a, b = a.double(), b.double()
    return ((a - b).abs() / b.abs().clamp_min(floor)).max().item()


def forward_loss(model, tokens, targets):
    out = model(input_ids=tokens, labels=tokens)
    logits = out.logits
    V = logits.shape[-1]
    loss_all = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
    return logits, loss_all, out.loss


def check_sliding_window(model, tokens, logits):
    """Mistral: the window must change the logits at positions >= W and only
    there (positions < W see at most W keys in every layer)."""
    W = model.config.sliding_window
    full = copy.deepcopy(model)
    full.config.sliding_window = None
    for m in full.modules():
        if hasattr(m, "config"):
            m.config.sliding_window = None
    with torch.no_grad():
        lf = full(input_ids=tokens).logits
    d = (logits.detach() - lf).abs().amax(dim=(0, 2))   # per position
    print(f"    sliding window {W}: max |logit diff| vs no window, per position: "
          + " ".join(f"{v:.1e}" for v in d.tolist()))
    assert d[:W].max() <= 1e-6, "window changed positions that it cannot reach"
    assert d[W:].min() > 1e-5, "sliding_window ignored by this transformers version (eager)"
    # One attention row by hand: layer 0, head 0, the last query.
    attn = model.model.layers[0].self_attn
    captured = {}
    def hook(mod, args, kwargs, out):
        captured["w"] = out[1]
    handle = attn.register_forward_hook(hook, with_kwargs=True)
    with torch.no_grad():
        model(input_ids=tokens, output_attentions=True)
    handle.remove()
    w = captured["w"][0, 0, -1]                      # [T] probabilities of the last query
    T = tokens.shape[1]
    assert torch.all(w[: T - W] == 0), w
    assert abs(w[T - W:].sum().item() - 1) < 1e-6
    emb = model.model.embed_tokens.weight[tokens[0]].double()
    hn = rms_norm(emb, model.model.layers[0].input_layernorm.weight.double(), model.config.rms_norm_eps)
    hd = model.config.head_dim
    q = rope((hn @ attn.q_proj.weight.double().T).view(T, -1, hd).transpose(0, 1)[None], hd,
             model.config.rope_parameters["rope_theta"], None)[0, 0, -1]
    k = rope((hn @ attn.k_proj.weight.double().T).view(T, -1, hd).transpose(0, 1)[None], hd,
             model.config.rope_parameters["rope_theta"], None)[0, 0]
    s = (k[T - W:] @ q) / math.sqrt(hd)
    by_hand = torch.softmax(s, 0)
    err = (by_hand - w[T - W:].double()).abs().max().item()
    print(f"    attention row (layer 0, head 0, query {T-1}) by hand: keys {T-W}..{T-1}, "
          f"max diff {err:.1e}")
    assert err < 1e-5


def expert_slices(name, cfg):
    """Mixtral: transformers 5 holds each layer's experts fused, as
    mlp.experts.gate_up_proj [n_exp, 2F, E] (rows :F gate = w1, F: up = w3)
    and mlp.experts.down_proj [n_exp, E, F], but save_pretrained writes them
    per expert in the Hub layout, block_sparse_moe.experts.<e>.w1/w3 [F, E]
    and w2 [E, F].  Returns {saved name: function of the fused tensor}, or
    None for any other parameter."""
    m = re.fullmatch(r"model\.layers\.(\d+)\.mlp\.experts\.(gate_up_proj|down_proj)", name)
    if not m:
        return None
    layer, kind = m.groups()
    Fi = cfg.intermediate_size
    out = {}
    for e in range(cfg.num_local_experts):
        q = f"model.layers.{layer}.block_sparse_moe.experts.{e}."
        if kind == "gate_up_proj":
            out[q + "w1.weight"] = lambda t, e=e: t[e, :Fi]
            out[q + "w3.weight"] = lambda t, e=e: t[e, Fi:]
        else:
            out[q + "w2.weight"] = lambda t, e=e: t[e]
    return out


def check_routing(model, tokens, logits, loss_hf, saved_cfg, W64, report_r):
    """Mixtral: records the routing in fp32 and checks that it is not
    degenerate, that the float64 reference makes the same choices, and that
    the aux loss is HF's.  Returns the golden tensors to add."""
    cfg = model.config
    n_exp, k, L = cfg.num_local_experts, cfg.num_experts_per_tok, cfg.num_hidden_layers
    with torch.no_grad():
        out = model(input_ids=tokens, labels=tokens, output_router_logits=True)
    assert torch.equal(out.logits, logits.detach()), "output_router_logits changed the logits"
    assert len(out.router_logits) == L
    coef = cfg.router_aux_loss_coef
    assert abs(out.loss.item() - (loss_hf.item() + coef * out.aux_loss.item())) < 1e-6
    trace = []
    with torch.no_grad():
        ref_llama(saved_cfg, W64, tokens, None, trace)
    golden, min_gap, min_gap12, counts = {}, float("inf"), float("inf"), []
    min_lgap, max_err = float("inf"), 0.0
    for l, rl in enumerate(out.router_logits):
        rl = rl.detach().float()
        assert rl.shape == (tokens.numel(), n_exp), rl.shape
        probs = torch.softmax(rl, dim=-1)
        srt = probs.sort(dim=-1, descending=True).values
        min_gap = min(min_gap, (srt[:, k - 1] - srt[:, k]).min().item())
        min_gap12 = min(min_gap12, (srt[:, 0] - srt[:, 1]).min().item())
        lsrt = rl.sort(dim=-1, descending=True).values          # same order as probs
        min_lgap = min(min_lgap, (lsrt[:, k - 1] - lsrt[:, k]).min().item())
        top_p, top_i = torch.topk(probs, k, dim=-1)
        top_w = top_p / top_p.sum(-1, keepdim=True)
        c = torch.bincount(top_i.reshape(-1), minlength=n_exp)
        counts.append(c.tolist())
        assert c.min() > 0, f"layer {l}: an expert gets no tokens {c.tolist()}"
        ref_logits, ref_i = trace[l]
        assert rel(rl, ref_logits) < 1e-5, (l, rel(rl, ref_logits))
        max_err = max(max_err, (rl.double() - ref_logits).abs().max().item())
        assert torch.equal(ref_i, top_i), f"layer {l}: float64 reference routes differently"
        golden[f"router_logits.{l}"] = rl.contiguous()
        golden[f"router_topk_experts.{l}"] = top_i.to(torch.int32).contiguous()
        golden[f"router_topk_weights.{l}"] = top_w.contiguous()
        print(f"    layer {l}: top-{k} slots per expert {c.tolist()}")
    # The choice is unambiguous when the k-th and (k+1)-th router logits of
    # every row are much further apart than fp32 rounding moves them (measured
    # here against the float64 reference).
    assert min_lgap > 100 * max_err, f"near-tie in the top-{k} choice: logit gap {min_lgap}, fp32 error {max_err}"
    aux = out.aux_loss.detach()
    ref_aux = aux_loss_ref(trace, n_exp, k).item()
    per_layer = aux_loss_ref(trace, n_exp, k, "per-layer-mean").item()
    assert abs(aux.item() - ref_aux) / ref_aux < 1e-5, (aux.item(), ref_aux)
    golden["aux_loss"] = aux.double().reshape(1)
    golden["loss_hf_shifted_with_aux"] = out.loss.detach().double().reshape(1)
    print(f"    router: min gap between the top-{k} boundary probabilities (#{k} vs #{k+1}) {min_gap:.3e} "
          f"(logits {min_lgap:.3e}, {min_lgap / max_err:.0f}x the fp32 vs float64 router logit "
          f"error {max_err:.2e}); min gap 1st vs 2nd probability {min_gap12:.3e}")
    print(f"    aux_loss {aux.item():.9f} (float64 reference {ref_aux:.9f}; "
          f"mean of per-layer losses instead {per_layer:.9f}); "
          f"loss_hf_shifted + {coef} * aux_loss = {out.loss.item():.9f}")
    report_r.update({"router_min_gap_k_vs_next": min_gap, "router_min_gap_1st_vs_2nd": min_gap12,
                     "router_min_logit_gap_k_vs_next": min_lgap, "router_logits_fp32_vs_ref64_abs": max_err,
                     "router_slots_per_expert": counts, "aux_loss": aux.item(),
                     "aux_loss_ref64": ref_aux, "aux_loss_per_layer_mean": per_layer,
                     "loss_hf_shifted_with_aux": out.loss.item()})
    return golden


def check_reload(model, d, tokens, logits):
    """Mixtral: from_pretrained must turn the per-expert file back into the
    fused parameters, giving the same logits."""
    m2 = type(model).from_pretrained(d, attn_implementation="eager",
                                     experts_implementation="eager").to(torch.float32).eval()
    for (n, p), (n2, p2) in zip(model.named_parameters(), m2.named_parameters()):
        assert n == n2 and torch.equal(p, p2), n
    with torch.no_grad():
        assert torch.equal(m2(input_ids=tokens).logits, logits.detach())
    print("    from_pretrained of the saved folder: same parameters, same logits")


def run_family(family, outdir, report):
    print(f"== {family}")
    model = build_model(family)
    cfg = model.config
    V = cfg.vocab_size
    tokens, targets = make_tokens(V)

    # fp32 forward + one backward of the all-positions loss.
    model.zero_grad(set_to_none=True)
    logits, loss_all, loss_hf = forward_loss(model, tokens, targets)
    loss_all.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}

    # HF in float64 (note: HF keeps some pieces in fp32, see README).
    m64 = copy.deepcopy(model).double()
    m64.zero_grad(set_to_none=True)
    logits64, loss64, loss_hf64 = forward_loss(m64, tokens, targets)
    loss64.backward()
    grads64 = {n: p.grad.detach() for n, p in m64.named_parameters()}

    # Save.
    d = os.path.join(outdir, family)
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
    gc = os.path.join(d, "generation_config.json")
    if os.path.exists(gc):
        os.remove(gc)
    saved = load_file(os.path.join(d, "model.safetensors"))
    # save_pretrained may write a legacy name (GPT-NeoX: lm_head -> embed_out).
    # Key the gradients by the name in model.safetensors, matched by value.
    # Mixtral's fused experts are saved split per expert (expert_slices).
    params = {n: p.detach() for n, p in model.named_parameters()}
    ident = lambda t: t
    to_saved = {n: {n: ident} for n in params if n in saved}
    for n in params:
        if n not in to_saved and expert_slices(n, cfg) is not None:
            to_saved[n] = expert_slices(n, cfg)
            print(f"    note: parameter {n} {tuple(params[n].shape)} is saved as "
                  f"{len(to_saved[n])} tensors {', '.join(list(to_saved[n])[:3])}, ...")
    taken = {s for m in to_saved.values() for s in m}
    extra = [k for k in saved if k not in taken]
    for n in params:
        if n not in to_saved:
            hits = [k for k in extra if saved[k].shape == params[n].shape and torch.equal(saved[k], params[n])]
            assert len(hits) == 1, (n, hits)
            to_saved[n] = {hits[0]: ident}
            print(f"    note: parameter {n} is saved as {hits[0]}")
    assert sorted(s for m in to_saved.values() for s in m) == sorted(saved), (to_saved, list(saved))
    for n, t in params.items():
        for s, f in to_saved[n].items():
            assert torch.equal(saved[s], f(t)), (n, s)
    grads = {s: f(g) for n, g in grads.items() for s, f in to_saved[n].items()}
    grads64 = {s: f(g) for n, g in grads64.items() for s, f in to_saved[n].items()}

    golden = {
        "tokens": tokens.to(torch.int32),
        "targets": targets.to(torch.int32),
        "logits": logits.detach().to(torch.float32).contiguous(),
        "loss_all_positions": loss_all.detach().double().reshape(1),
        "loss_hf_shifted": loss_hf.detach().double().reshape(1),
    }
    for n in sorted(grads):
        golden["grad." + n] = grads[n].to(torch.float32).contiguous()
    meta = {"family": family, "torch": torch.__version__,
            "transformers": transformers.__version__,
            "seeds": f"init={SEED} noise={NOISE_SEED} tokens={TOKEN_SEED}",
            "loss_all_positions": "mean CE over all B*T positions, targets[b,t]=ids[b,t+1] (13 ids per row)",
            "loss_hf_shifted": "HF labels=tokens loss, mean over the first T-1 positions"}
    if family == "mixtral":
        meta.update({
            "router_logits.<l>": "layer l's router logits [B*T, n_experts] fp32, row b*T+t",
            "router_topk_experts.<l>": "torch.topk(softmax(router_logits), k) indices, by descending probability",
            "router_topk_weights.<l>": "their probabilities renormalised to sum 1 (the experts' output weights)",
            "aux_loss": "HF load_balancing_loss_func over all layers (output_router_logits=True), not in loss_all_positions nor in the grads",
            "loss_hf_shifted_with_aux": "loss_hf_shifted + router_aux_loss_coef * aux_loss, HF's loss with output_router_logits=True"})
    with open(os.path.join(d, "config.json")) as f:
        saved_cfg = json.load(f)
    extra_report = {}
    if family == "mixtral":
        W_nograd = {n: t.double() for n, t in saved.items()}
        golden.update(check_routing(model, tokens, logits, loss_hf, saved_cfg, W_nograd, extra_report))
        check_reload(model, d, tokens, logits)
    # One metadata key: safetensors writes several keys in hash order, which
    # would make reruns differ byte-wise.
    save_file(golden, os.path.join(d, "golden.safetensors"),
              metadata={"dsc_golden": json.dumps(meta, sort_keys=True)})

    # Independent float64 reference from the saved files.
    W64 = {n: t.double().requires_grad_(True) for n, t in saved.items()}
    ref = REFERENCE[family]
    ref_logits = ref(saved_cfg, W64, tokens, None)
    ref_loss = F.cross_entropy(ref_logits.reshape(-1, V), targets.reshape(-1))
    ref_grads = dict(zip(W64, torch.autograd.grad(ref_loss, list(W64.values()))))

    r = {
        "hf32_vs_hf64_logits": rel(logits, logits64),
        "hf32_vs_hf64_logits_elem": elem_rel(logits, logits64),
        "hf32_vs_ref64_logits": rel(logits, ref_logits),
        "hf32_vs_ref64_logits_elem": elem_rel(logits, ref_logits),
        "hf64_vs_ref64_logits": rel(logits64, ref_logits),
        "hf32_vs_ref64_loss": abs(loss_all.item() - ref_loss.item()) / ref_loss.item(),
        "hf32_vs_hf64_loss": abs(loss_all.item() - loss64.item()) / loss64.item(),
        "hf32_vs_ref64_grad": max(rel(grads[n], ref_grads[n]) for n in grads),
        "hf32_vs_hf64_grad": max(rel(grads[n], grads64[n]) for n in grads),
        "loss_all_positions": loss_all.item(),
        "loss_hf_shifted": loss_hf.item(),
        "logit_absmax": logits.detach().abs().max().item(),
        "n_params": sum(p.numel() for p in model.parameters()),
        "variants": {},
    }
    r.update(extra_report)
    worst_grad = max(grads, key=lambda n: rel(grads[n], ref_grads[n]))
    r["hf32_vs_ref64_grad_worst"] = worst_grad
    assert r["hf32_vs_ref64_logits"] < 1e-5, r
    assert r["hf32_vs_ref64_grad"] < 1e-4, r
    assert r["hf64_vs_ref64_logits"] < 1e-5, r
    with torch.no_grad():
        for var in VARIANTS[family]:
            r["variants"][var] = rel(ref(saved_cfg, W64, tokens, var), ref_logits)
            assert r["variants"][var] > 1e-4, (var, r["variants"][var])

    if family == "mistral":
        check_sliding_window(model, tokens, logits)

    for k, v in r.items():
        if k != "variants" and k not in extra_report:
            print(f"    {k}: {v:.3e}" if isinstance(v, float) else f"    {k}: {v}")
    for k, v in r["variants"].items():
        print(f"    deliberate mistake '{k}': logits move by {v:.3e} (relative to max |logit|)")
    report[family] = r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT, help="output folder (default: %(default)s)")
    ap.add_argument("--only", nargs="*", choices=FAMILIES, help="families to make (default: all)")
    ap.add_argument("--report", help="also write the measured numbers as JSON here")
    args = ap.parse_args()
    torch.set_num_threads(1)   # deterministic reductions, same numbers on any machine
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    report = {}
    for fam in args.only or FAMILIES:
        run_family(fam, args.out, report)
    if args.report:
        with open(args.report, "w") as f:
            json.dump({"torch": torch.__version__, "transformers": transformers.__version__,
                       "families": report}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
