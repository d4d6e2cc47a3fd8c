#!/usr/bin/env python3
"""Runs a command that must end within a time limit.

usage: within.py SECONDS COMMAND [ARGS...]
Passes the command's output through and exits with its exit status (a
signal's death as 128 + the signal); if it is still running after SECONDS,
kills it (and its process group) and exits 124 saying so.
"""

import os
import shutil
import signal
import subprocess
import sys
import time

limit = float(sys.argv[1])
start = time.monotonic()
# lit's PATH holds the tools only; %mpirun starts with `env`.
command = sys.argv[2:]
command[0] = shutil.which(command[0], path=os.environ.get("PATH", "") +
                          os.pathsep + os.defpath) or command[0]
proc = subprocess.Popen(command, start_new_session=True)
try:
    rc = proc.wait(timeout=limit)
except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    sys.exit(f"within.py: {sys.argv[2]} still ran after {limit:g} s")
print(f"within.py: ended in {time.monotonic() - start:.1f} s with status {rc}",
      file=sys.stderr)
sys.exit(128 - rc if rc < 0 else rc)
