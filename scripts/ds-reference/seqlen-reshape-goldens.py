#!/usr/bin/env python3
"""Record what Megatron-DeepSpeed's own curriculum data post-processing does
to a micro-batch, as golden files for dsc's "seqlen_reshape" and
"seqlen_truncate" implementation (a developer runs this by hand, never CI).

The oracle is `data_post_process(data, data_sampler_state_dict)` from
Megatron-DeepSpeed's pretrain_gpt.py, run as is: this script does NOT carry a
copy of it. It reads pretrain_gpt.py from a Megatron-DeepSpeed checkout (or a
bare clone), takes the `data_post_process` FunctionDef out of it with `ast`,
and executes that function alone in a namespace holding only `torch`, `math`
and a stub `get_args()`, so none of Megatron's imports are needed. The stub
answers exactly the attributes the function reads
(`data_efficiency_curriculum_learning` = True, `seq_length` = S) and accepts
the one it writes (`data_efficiency_curriculum_learning_seqlen_type`); any
other attribute read raises, and so does any free name the function uses
beyond those three, so a changed upstream function stops the run instead of
being fed a guess.

Input per case: `data = {'text': int64 tensor [micro_batch, S+1]}` with the
id at row r, position j equal to 1000*r + j (every output id says where it
came from), and `data_sampler_state_dict = {'current_difficulties':
{TYPE: L}}`, TYPE being "seqlen_reshape" or "seqlen_truncate". The output
`data['text']` is recorded: R rows of L+1 ids (S+1 when L >= S, where the
function leaves the batch alone). As in Megatron, tokens are row[:-1] and
labels row[1:].

It writes one JSON file:
  {"source": "<repo>@<commit> pretrain_gpt.py data_post_process",
   "torch": "<version>",
   "cases": [{"type", "micro_batch", "seq_length", "length", "rows",
              "text": [[...], ...]}, ...]}

Rerunning it (how the committed file was made):

  python3 -m venv /tmp/mds-venv
  /tmp/mds-venv/bin/pip install torch      # the PyPI wheel; runs on CPU
  # Megatron-DeepSpeed, any checkout or bare clone, e.g.
  git clone https://github.com/deepspeedai/Megatron-DeepSpeed /tmp/mds
  git -C /tmp/mds checkout 4efb479d5317ce9b86096b9d8e3e8030b0b5263b
  /tmp/mds-venv/bin/python scripts/ds-reference/seqlen-reshape-goldens.py \\
      --megatron-deepspeed /tmp/mds

The committed file came from deepspeedai/Megatron-DeepSpeed at
4efb479d5317ce9b86096b9d8e3e8030b0b5263b (2025-07-16; pretrain_gpt.py last
changed in 676a482c, 2024-12-04) with the torch PyPI wheel on CPU (the
version is recorded in the file). Integer slicing only: runs repeat exactly.

usage: seqlen-reshape-goldens.py --megatron-deepspeed DIR [--rev REV]
          [--repo-name OWNER/NAME]
          [--out test/Runtime/Inputs/curriculum/seqlen-reshape-goldens.json]

DIR may be a work tree (pretrain_gpt.py is read from the file; the commit
recorded is `git rev-parse HEAD` when DIR is a git work tree) or a bare git
directory (pretrain_gpt.py is read with `git show REV:pretrain_gpt.py`, REV
defaulting to HEAD). With --rev the file is always read from git at REV.
"""

import argparse
import ast
import json
import math
import os
import subprocess
import sys

import torch

TYPES = ("seqlen_reshape", "seqlen_truncate")

# (micro_batch, seq_length, lengths)
GRID = [
    (2, 32, [8, 16, 24, 31, 32]),
    (3, 64, [8, 15, 16, 24, 40, 63]),
    (1, 32, [8, 16]),
]

FUNCTION = "data_post_process"
ALLOWED_FREE_NAMES = {"torch", "math", "get_args"}


def git(directory, *args):
    return subprocess.run(["git", "-C", directory] + list(args), check=True,
                          capture_output=True, text=True).stdout.strip()


def is_git(directory):
    try:
        git(directory, "rev-parse", "--git-dir")
        return True
    except (subprocess.CalledProcessError, FileNotFoundError):
        return False


def read_source(directory, rev):
    """pretrain_gpt.py's text and the commit it came from (or None)."""
    path = os.path.join(directory, "pretrain_gpt.py")
    if rev is None and os.path.isfile(path):
        with open(path) as f:
            text = f.read()
        commit = None
        if is_git(directory):
            commit = git(directory, "rev-parse", "HEAD")
            if git(directory, "status", "--porcelain", "--",
                   "pretrain_gpt.py"):
                commit += "+modified"
        return text, commit
    if not is_git(directory):
        sys.exit(f"{directory}: no pretrain_gpt.py and not a git directory")
    rev = rev or "HEAD"
    commit = git(directory, "rev-parse", rev + "^{commit}")
    return git(directory, "show", f"{commit}:pretrain_gpt.py"), commit


def guess_repo_name(directory):
    if not is_git(directory):
        return "Megatron-DeepSpeed"
    try:
        url = git(directory, "remote", "get-url", "origin")
    except subprocess.CalledProcessError:
        url = ""
    if "github.com" in url:
        tail = url.split("github.com", 1)[1].lstrip(":/")
        return tail[:-4] if tail.endswith(".git") else tail
    # The fetch tool's mirrors live in .../<owner>+<name>/repo.
    parts = os.path.abspath(directory).split(os.sep)
    for part in reversed(parts):
        if "+" in part:
            return part.replace("+", "/", 1)
    return "Megatron-DeepSpeed"


def free_names(fn):
    """Names the function loads that it neither binds nor takes."""
    bound = {a.arg for a in fn.args.args}
    loaded = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Store):
                bound.add(node.id)
            else:
                loaded.add(node.id)
    builtins = set(dir(__builtins__)) if not isinstance(__builtins__, dict) \
        else set(__builtins__)
    return loaded - bound - builtins


class StrictArgs:
    """get_args()'s stand-in: only the attributes the function reads."""

    def __init__(self, **values):
        object.__setattr__(self, "_values", dict(values))
        object.__setattr__(self, "_written", {})

    def __getattr__(self, name):
        values = object.__getattribute__(self, "_values")
        written = object.__getattribute__(self, "_written")
        if name in written:
            return written[name]
        if name in values:
            return values[name]
        raise AttributeError(
            f"data_post_process read args.{name}, which this script does "
            f"not provide: upstream changed, look before extending the stub")

    def __setattr__(self, name, value):
        object.__getattribute__(self, "_written")[name] = value


def load_function(source):
    tree = ast.parse(source)
    found = [n for n in tree.body
             if isinstance(n, ast.FunctionDef) and n.name == FUNCTION]
    if len(found) != 1:
        sys.exit(f"pretrain_gpt.py: {len(found)} top-level {FUNCTION}")
    fn = found[0]
    extra = free_names(fn) - ALLOWED_FREE_NAMES
    if extra:
        sys.exit(f"{FUNCTION} uses {sorted(extra)} beyond "
                 f"{sorted(ALLOWED_FREE_NAMES)}: upstream changed")
    holder = {"args": None}
    namespace = {"torch": torch, "math": math,
                 "get_args": lambda: holder["args"]}
    module = ast.Module(body=[fn], type_ignores=[])
    exec(compile(module, "pretrain_gpt.py", "exec"), namespace)
    return namespace[FUNCTION], holder


def check(case, text, seq_length, micro_batch):
    """Sanity checks on the output; they describe it, they do not judge."""
    length = case["length"]
    width = (length if length < seq_length else seq_length) + 1
    assert text.dtype == torch.int64, text.dtype
    assert text.dim() == 2 and text.size(1) == width, tuple(text.size())
    for row in text.tolist():
        r, j = divmod(row[0], 1000)
        assert r < micro_batch and j + width <= seq_length + 1, row
        assert row == [1000 * r + j + k for k in range(width)], row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megatron-deepspeed", required=True, metavar="DIR")
    parser.add_argument("--rev", default=None)
    parser.add_argument("--repo-name", default=None)
    parser.add_argument(
        "--out",
        default="test/Runtime/Inputs/curriculum/seqlen-reshape-goldens.json")
    opts = parser.parse_args()

    source, commit = read_source(opts.megatron_deepspeed, opts.rev)
    repo = opts.repo_name or guess_repo_name(opts.megatron_deepspeed)
    post_process, holder = load_function(source)

    cases = []
    for kind in TYPES:
        for micro_batch, seq_length, lengths in GRID:
            for length in lengths:
                args = StrictArgs(data_efficiency_curriculum_learning=True,
                                  seq_length=seq_length)
                holder["args"] = args
                ids = [[1000 * r + j for j in range(seq_length + 1)]
                       for r in range(micro_batch)]
                data = {"text": torch.tensor(ids, dtype=torch.int64)}
                state = {"current_difficulties": {kind: length}}
                out = post_process(data, state)
                text = out["text"]
                seqlen_type = args.data_efficiency_curriculum_learning_seqlen_type
                assert seqlen_type == kind, seqlen_type
                case = {"type": kind, "micro_batch": micro_batch,
                        "seq_length": seq_length, "length": length,
                        "rows": int(text.size(0)), "text": text.tolist()}
                check(case, text, seq_length, micro_batch)
                cases.append(case)
                print(f"{kind:16} b={micro_batch} S={seq_length:3} "
                      f"L={length:3} -> {text.size(0)} x {text.size(1)}")

    doc = {"source": f"{repo}@{commit} pretrain_gpt.py {FUNCTION}",
           "torch": torch.__version__, "cases": cases}
    # One case per block, one row per line: small and readable in a diff.
    lines = ["{",
             f' "source": {json.dumps(doc["source"])},',
             f' "torch": {json.dumps(doc["torch"])},',
             ' "cases": [']
    for i, case in enumerate(cases):
        head = ", ".join(f"{json.dumps(k)}: {json.dumps(case[k])}"
                         for k in ("type", "micro_batch", "seq_length",
                                   "length", "rows"))
        rows = ",\n".join("   " + json.dumps(row, separators=(",", ":"))
                          for row in case["text"])
        tail = "," if i + 1 < len(cases) else ""
        lines.append("  {" + head + ', "text": [\n' + rows + "\n  ]}" + tail)
    lines += [" ]", "}"]
    rendered = "\n".join(lines) + "\n"
    assert json.loads(rendered) == doc
    os.makedirs(os.path.dirname(os.path.abspath(opts.out)), exist_ok=True)
    with open(opts.out, "w") as f:
        f.write(rendered)
    print(f"wrote {opts.out} ({len(cases)} cases, {len(rendered)} bytes)")


if __name__ == "__main__":
    main()
