#!/usr/bin/env python3
"""Writes a GPT-NeoX config holding a small model and every training key
the model reader knows (kTrainingKeys in lib/Target/NeoXConfig.cpp) set to
null, GPT-NeoX's None: dsc-run must classify each one.

usage: all-neox-training-keys.py NEOXCONFIG_CPP OUT.yml
"""
import re
import sys

source = open(sys.argv[1]).read()
table = re.search(r"kTrainingKeys\[\] = \{(.*?)\};", source, re.S).group(1)
keys = re.findall(r'"([a-z0-9_]+)"', table)
model = ['"num_layers": 1', '"hidden_size": 32', '"num_attention_heads": 2',
         '"seq_length": 8', '"max_position_embeddings": 8',
         '"vocab_size": 64', '"train_micro_batch_size_per_gpu": 2']
with open(sys.argv[2], "w") as f:
    f.write("{\n  " + ",\n  ".join(model + [f'"{k}": ~' for k in keys]) +
            "\n}\n")
print(f"{len(keys)} training keys")
