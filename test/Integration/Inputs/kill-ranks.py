#!/usr/bin/env python3
"""Kills one rank of an MPI training run, again and again, and checks what
the survivors say.

usage: kill-ranks.py RUNS SEED NP STEPS -- MPIRUN [ARGS...] -- DSC-RUN [ARGS...]
Each run picks a world rank r and an iteration k (a seeded random choice),
starts `MPIRUN ARGS -np NP -x DSC_FAIL_RANK_AT=r:k DSC-RUN ARGS --steps
STEPS`, which makes rank r SIGKILL itself before iteration k, and requires:
the job ends within 30 s and fails; every survivor that reports the failure
(a "dsc-run: error: rank N: ..." line) names world rank r as the dead one;
and at least one survivor reports. Prints one line per run and OK at the
end; exits 1 at the first run that breaks a rule.
"""

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

args = sys.argv[1:]
runs, seed, np_, steps = int(args[0]), int(args[1]), int(args[2]), int(args[3])
rest = args[5:]
split = rest.index("--")
mpirun, dscrun = rest[:split], rest[split + 1:]
mpirun[0] = shutil.which(mpirun[0], path=os.environ.get("PATH", "") +
                         os.pathsep + os.defpath) or mpirun[0]
rng = random.Random(seed)
report = re.compile(r"dsc-run: error: rank (\d+): (.*)")
for run in range(runs):
    dead = rng.randrange(np_)
    at = rng.randrange(2, steps)
    command = (mpirun + ["-np", str(np_), "-x", f"DSC_FAIL_RANK_AT={dead}:{at}"]
               + dscrun + ["--steps", str(steps)])
    start = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        sys.exit(f"FAIL run {run}: rank {dead} killed at {at}: still running "
                 f"after 30 s")
    took = time.monotonic() - start
    if proc.returncode == 0:
        sys.exit(f"FAIL run {run}: rank {dead} killed at {at}, yet the job "
                 f"succeeded")
    reports = [(int(m.group(1)), m.group(2)) for m in
               map(report.match, err.splitlines()) if m]
    if not reports:
        sys.exit(f"FAIL run {run}: rank {dead} killed at {at}: no survivor "
                 f"reported it:\n{err}")
    for rank, text in reports:
        named = re.match(r"world rank (\d+) ", text)
        if rank == dead or not named or int(named.group(1)) != dead:
            sys.exit(f"FAIL run {run}: rank {dead} killed at {at}, but rank "
                     f"{rank} says: {text}")
    print(f"run {run}: rank {dead} killed before iteration {at}: "
          f"{len(reports)} survivors named it, in {took:.1f} s")
print(f"OK {runs} runs")
