#!/usr/bin/env python3
"""Starts a command, waits until its standard output has printed a line
containing MARKER, kills it with SIGKILL (as a cluster's scheduler or the
OOM killer would) and prints "killed" (a bounded wait: "never saw MARKER"
and exit 1 after TIMEOUT seconds or if the command ends first).

usage: kill-after.py MARKER TIMEOUT -- COMMAND...
"""

import signal
import subprocess
import sys
import threading


def main():
    marker, timeout = sys.argv[1], float(sys.argv[2])
    command = sys.argv[sys.argv.index("--") + 1:]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    seen = False
    for line in proc.stdout:
        if marker in line:
            seen = True
            proc.send_signal(signal.SIGKILL)
            break
    timer.cancel()
    proc.wait()
    if not seen:
        print(f"never saw {marker!r}")
        sys.exit(1)
    print("killed")


if __name__ == "__main__":
    main()
