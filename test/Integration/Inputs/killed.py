#!/usr/bin/env python3
"""Runs a command that must die of SIGKILL (a crash test's kill point).

usage: killed.py COMMAND [ARGS...]
Exits 0 when COMMAND was killed by SIGKILL, else 1 with what happened.
"""

import signal
import subprocess
import sys

rc = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL)
if rc != -signal.SIGKILL:
    sys.exit(f"expected {sys.argv[1]} to die of SIGKILL, it exited {rc}")
print("killed")
