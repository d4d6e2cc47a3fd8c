"""Prompts from, and comparison with, transformers' greedy generation goldens.

  generate-goldens.py prompts GENERATE_JSON OUT   one prompt's ids per line
  generate-goldens.py compare GENERATE_JSON OUTPUT_JSONL
      dsc-generate's output against the golden tokens: prints one line per
      prompt and exits 1 at the first prompt whose tokens differ.

The goldens (scripts/hf-reference/generate-goldens.py) are transformers'
`generate(do_sample=False, max_new_tokens=64)`, each step's top-two logit
margin >= 1e-3, so fp32 rounding cannot flip a choice.
"""
import json
import sys


def main():
    mode, golden_path, other = sys.argv[1:4]
    golden = json.load(open(golden_path))
    if mode == "prompts":
        with open(other, "w") as f:
            for prompt in golden["prompts"]:
                f.write(" ".join(map(str, prompt)) + "\n")
        return 0
    outputs = [json.loads(line) for line in open(other)]
    if len(outputs) != len(golden["generated"]):
        print(f"{len(outputs)} outputs for {len(golden['generated'])} prompts")
        return 1
    for i, (out, ref) in enumerate(zip(outputs, golden["generated"])):
        got = out["tokens"]
        if got != ref:
            first = next((k for k, (a, b) in enumerate(zip(got, ref)) if a != b),
                         min(len(got), len(ref)))
            print(f"prompt {i} ({len(golden['prompts'][i])} tokens): differs "
                  f"at new token {first}: {got[first:first + 4]} vs "
                  f"{ref[first:first + 4]}")
            return 1
        print(f"prompt {i} ({len(golden['prompts'][i])} tokens): "
              f"{len(got)} tokens same")
    print(f"{golden['family']}: all {len(outputs)} prompts same")
    return 0


if __name__ == "__main__":
    sys.exit(main())
