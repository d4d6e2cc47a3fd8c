#!/usr/bin/env python3
"""Rewrites an MoE GPT-NeoX config (JSON) for GPT-NeoX's dropless MoE:
moe_type megablocks with the topk router, the DeepSpeed-only keys removed.

usage: moe-dropless.py SRC DST
"""

import json
import sys

src, dst = sys.argv[1], sys.argv[2]
config = json.load(open(src))
for key in ("moe_use_residual", "moe_token_dropping",
            "moe_train_capacity_factor", "moe_min_capacity", "moe_loss_coeff"):
    config.pop(key, None)
config["moe_type"] = "megablocks"
config["moe_router_type"] = "topk"
json.dump(config, open(dst, "w"), indent=2)
