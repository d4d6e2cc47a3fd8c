"""transformers' greedy generation on GPT-2 small, timed like dsc-generate.

usage: hf_generate.py PROMPTS_FILE NEW_TOKENS THREADS
PROMPTS_FILE holds one prompt's token ids per line (all the same length);
all prompts run as one batch. Prints one line:
  hf batch=B prefill_s=X decode_s=Y decode_tokens=N tokens_per_s=Z
Decode time is generate(NEW_TOKENS) minus generate(1) (the prefill and the
first token), so that it counts the same decode forwards dsc-generate's
decode counter does. Random weights (GPT2Config's defaults, vocabulary
padded to 50304 as dsc's GPT-2 small): the cost does not depend on them.
"""
import sys
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def main():
    path, new_tokens, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    prompts = [[int(t) for t in line.split()] for line in open(path) if line.strip()]
    ids = torch.tensor(prompts, dtype=torch.long)
    config = GPT2Config(vocab_size=50304, n_positions=1024)
    model = GPT2LMHeadModel(config).eval()
    kwargs = dict(do_sample=False, pad_token_id=0, eos_token_id=None,
                  use_cache=True)
    with torch.inference_mode():
        model.generate(ids, max_new_tokens=2, min_new_tokens=2, **kwargs)
        best_first, best_all = float("inf"), float("inf")
        for _ in range(2):
            start = time.perf_counter()
            model.generate(ids, max_new_tokens=1, min_new_tokens=1, **kwargs)
            best_first = min(best_first, time.perf_counter() - start)
            start = time.perf_counter()
            model.generate(ids, max_new_tokens=new_tokens,
                           min_new_tokens=new_tokens, **kwargs)
            best_all = min(best_all, time.perf_counter() - start)
    decode = best_all - best_first
    count = len(prompts) * (new_tokens - 1)
    print(f"hf batch={len(prompts)} prefill_s={best_first:.3f} "
          f"decode_s={decode:.3f} decode_tokens={count} "
          f"tokens_per_s={count / decode:.1f}")


if __name__ == "__main__":
    main()
