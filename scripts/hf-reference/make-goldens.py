#!/usr/bin/env python3
"""Make the Hugging Face reference golden files for dsc's model-family importers.

A developer runs this by hand (never CI): it needs torch and transformers from
PyPI, see scripts/hf-reference/README.md for the virtualenv.  It builds tiny
random models of each family (gpt2, gpt-neox, gpt-neox-sequential, llama,
mistral), runs one fp32 forward/backward on fixed tokens, and writes under
test/Integration/Inputs/hf/<family>/:

  config.json, model.safetensors   as model.save_pretrained() writes them
  golden.safetensors               tokens, targets, logits, losses, grads

It also checks its own understanding of each family's conventions (fused QKV
row order, rotate_half rotary, partial rotary, sliding window, GQA/MQA head
mapping) with an independent float64 implementation written here from those
conventions, which reads the SAVED config.json and model.safetensors; any
disagreement aborts the run.  The numbers it prints are the ones quoted in the
README.
"""

import argparse
import copy
import json
import math
import os
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
    raise ValueError(family)


FAMILIES = ["gpt2", "gpt-neox", "gpt-neox-sequential", "llama", "mistral"]


def build_model(family):
    cls, cfg = make_config(family)
    torch.manual_seed(SEED)
    np.random.seed(SEED)
    model = cls(cfg).to(torch.float32)
    model.eval()
    assert model.config._attn_implementation == "eager", model.config._attn_implementation
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


def ref_llama(cfg, W, tokens, variant):
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
        g = mm(h, p + "mlp.gate_proj")
        x = x + mm(F.silu(g) * mm(h, p + "mlp.up_proj"), p + "mlp.down_proj")
    x = rms_norm(x, W["model.norm.weight"], eps)
    return x @ W["lm_head.weight"].T


REFERENCE = {"gpt2": ref_gpt2, "gpt-neox": ref_neox, "gpt-neox-sequential": ref_neox,
             "llama": ref_llama, "mistral": ref_llama}
VARIANTS = {"gpt2": ["conv1d-as-linear", "gelu-erf"],
            "gpt-neox": ["qkv-blocked", "rope-full-head", "wrong-residual"],
            "gpt-neox-sequential": ["qkv-blocked", "interleaved-rope", "wrong-residual"],
            "llama": ["interleaved-rope", "kv-head-modulo"],
            "mistral": ["interleaved-rope", "no-window"]}


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
    params = {n: p.detach() for n, p in model.named_parameters()}
    to_saved = {n: n for n in params if n in saved}
    extra = [k for k in saved if k not in to_saved.values()]
    for n in params:
        if n not in to_saved:
            hits = [k for k in extra if saved[k].shape == params[n].shape and torch.equal(saved[k], params[n])]
            assert len(hits) == 1, (n, hits)
            to_saved[n] = hits[0]
            print(f"    note: parameter {n} is saved as {hits[0]}")
    assert sorted(to_saved.values()) == sorted(saved), (to_saved, list(saved))
    for n, t in params.items():
        assert torch.equal(saved[to_saved[n]], t), n
    grads = {to_saved[n]: g for n, g in grads.items()}
    grads64 = {to_saved[n]: g for n, g in grads64.items()}

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
    # One metadata key: safetensors writes several keys in hash order, which
    # would make reruns differ byte-wise.
    save_file(golden, os.path.join(d, "golden.safetensors"),
              metadata={"dsc_golden": json.dumps(meta, sort_keys=True)})

    # Independent float64 reference from the saved files.
    with open(os.path.join(d, "config.json")) as f:
        saved_cfg = json.load(f)
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
        if k != "variants":
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
