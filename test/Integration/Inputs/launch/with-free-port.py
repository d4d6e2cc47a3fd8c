#!/usr/bin/env python3
"""Runs COMMAND with every "{port}" in its words replaced by a TCP port that
was free a moment ago (tests that start a rendezvous store cannot share a
fixed one); exits with COMMAND's status.

usage: with-free-port.py COMMAND...
"""

import socket
import subprocess
import sys

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = str(s.getsockname()[1])
sys.exit(subprocess.run([a.replace("{port}", port) for a in sys.argv[1:]])
         .returncode)
