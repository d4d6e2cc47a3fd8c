#!/usr/bin/env python3
"""Starts the ranks of a world by hand, torchrun-style: each a process of
COMMAND with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR
(127.0.0.1) and MASTER_PORT (a port that was free a moment ago) set, and
"{rank}" in COMMAND replaced by its rank. Prints each rank's output lines
as "rank R: LINE", then "rank R exit CODE", in rank order; exits 0 when
every started rank exited 0, else 1. Ranks still running after TIMEOUT
seconds are killed and reported as "rank R hung" (exit 2).

usage: tcp-ranks.py WORLD TIMEOUT [--slurm] [--ranks R,R...] -- COMMAND...
  --slurm: Slurm's variables instead of torchrun's, as srun sets them
           without PMI (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
           SLURM_NTASKS_PER_NODE, SLURM_STEP_ID), with MASTER_ADDR and
           MASTER_PORT
  --ranks: start only these ranks (the others never arrive)
"""

import os
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv):
    world, timeout = int(argv[0]), float(argv[1])
    split = argv.index("--")
    options, command = argv[2:split], argv[split + 1:]
    ranks = list(range(world))
    slurm = "--slurm" in options
    if slurm:
        options.remove("--slurm")
    if options[:1] == ["--ranks"]:
        ranks = [int(r) for r in options[1].split(",")]
    port = str(free_port())
    procs = {}
    outputs = {}
    for r in ranks:
        if slurm:
            env = dict(os.environ, SLURM_PROCID=str(r),
                       SLURM_NTASKS=str(world), SLURM_LOCALID=str(r),
                       SLURM_NTASKS_PER_NODE=str(world), SLURM_STEP_ID="0",
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        else:
            env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world),
                       LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(world),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        outputs[r] = tempfile.TemporaryFile(mode="w+")
        procs[r] = subprocess.Popen(
            [a.replace("{rank}", str(r)) for a in command], env=env,
            stdout=outputs[r], stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + timeout
    hung = []
    for r, p in procs.items():
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            hung.append(r)
    status = 0
    for r in ranks:
        outputs[r].seek(0)
        for line in outputs[r].read().splitlines():
            print(f"rank {r}: {line}")
        if r in hung:
            print(f"rank {r} hung")
            status = 2
        else:
            print(f"rank {r} exit {procs[r].returncode}")
            if procs[r].returncode != 0 and status == 0:
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
