#!/usr/bin/env python3
"""Copies a GPT-NeoX config with TEXT inserted after its opening brace
(and, with --drop OLD, the text OLD removed; it must occur).

usage: with-key.py SRC DST TEXT [--drop OLD]
"""

import sys

src, dst, text = sys.argv[1], sys.argv[2], sys.argv[3]
config = open(src).read()
if len(sys.argv) > 4:
    if sys.argv[4] != "--drop" or sys.argv[5] not in config:
        sys.exit(f"with-key.py: cannot drop {sys.argv[5:]!r} from {src}")
    config = config.replace(sys.argv[5], "")
brace = config.index("{")
open(dst, "w").write(config[:brace + 1] + "\n  " + text + config[brace + 1:])
