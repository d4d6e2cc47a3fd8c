"""Runs a command and passes when it exits with the given code.

usage: exits-with.py CODE COMMAND [ARG...]

The command's stdout and stderr go to stdout (for FileCheck). Exits 0 when
the command exits with CODE; 1 when it exits otherwise, is killed, or runs
past 120 s (a plan that should have been refused may hang on its ranks'
communication).
"""
import subprocess
import sys

if len(sys.argv) < 3:
    sys.exit(__doc__)
want = int(sys.argv[1])
try:
    done = subprocess.run(sys.argv[2:], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=120)
except subprocess.TimeoutExpired as e:
    sys.stdout.buffer.write(e.output or b"")
    sys.exit("exits-with.py: '%s' ran past 120 s" % " ".join(sys.argv[2:]))
sys.stdout.buffer.write(done.stdout)
sys.stdout.flush()
if done.returncode != want:
    sys.exit("exits-with.py: '%s' exited with %d, not %d" %
             (" ".join(sys.argv[2:]), done.returncode, want))
