#!/usr/bin/env python3
"""Writes a minimal `tokenizers` tokenizer.json: N vocabulary ids and A
added tokens after them.

usage: make-tokenizer.py OUT N A
"""

import json
import sys

out, n, added = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tokenizer = {
    "version": "1.0",
    "added_tokens": [{"id": n + i, "content": f"<|extra_{i}|>", "special": True}
                     for i in range(added)],
    "model": {"type": "BPE", "vocab": {f"t{i}": i for i in range(n)}, "merges": []},
}
with open(out, "w") as f:
    json.dump(tokenizer, f)
