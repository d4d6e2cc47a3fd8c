#!/usr/bin/env python3
# ===- search-top-plans.py - the search's top plans compile and train -----===#
#
# Runs --dsc-auto-parallel (knobs=buildable, fp32) on a model for a cluster,
# takes the top plans' strings from the report's JSON (`summary`), and
# trains each for two steps with nothing but that string:
#   dsc-run MODEL --np N --steps 2 --compile "<summary> warmup=1".
# Prints one line per plan ("ok" with the steps' losses, or FAIL with the
# error's last lines) and exits 1 if any plan failed.
#
# ===----------------------------------------------------------------------===#

import argparse
import json
import math
import os
import re
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dsc_translate")
    parser.add_argument("dsc_opt")
    parser.add_argument("dsc_run")
    parser.add_argument("model", help="a GPT-NeoX config")
    parser.add_argument("cluster", help="a cluster JSON (examples/clusters)")
    parser.add_argument("gpus", type=int)
    parser.add_argument("global_batch", type=int)
    parser.add_argument("workdir")
    parser.add_argument("--top", type=int, default=5)
    args = parser.parse_args()

    os.makedirs(args.workdir, exist_ok=True)
    graph = os.path.join(args.workdir, "graph.mlir")
    subprocess.run([args.dsc_translate, "--import-neox", args.model, "-o",
                    graph], check=True)
    report = os.path.join(args.workdir, "report.md")
    search = (f"cluster={args.cluster} gpus={args.gpus} "
              f"global-batch={args.global_batch} precision=fp32 "
              f"knobs=buildable top={args.top} report={report}")
    subprocess.run([args.dsc_opt, graph, f"--dsc-auto-parallel={search}",
                    "-o", os.devnull], check=True)
    with open(os.path.join(args.workdir, "report.json")) as f:
        top = json.load(f)["top"][:args.top]
    if len(top) < args.top:
        print(f"FAIL: the search proposed {len(top)} plans, not {args.top}")
        return 1

    # One thread a rank: the ranks share the machine's cores.
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    failed = 0
    for i, estimate in enumerate(top):
        plan = estimate["plan"]
        summary = estimate["summary"]
        ranks = plan["dp"] * plan["tp"] * plan["pp"]
        log = os.path.join(args.workdir, f"plan{i}.jsonl")
        run = subprocess.run(
            [args.dsc_run, args.model, "--np", str(ranks), "--steps", "2",
             "--compile", f"{summary} warmup=1", "--log-json", log],
            env=env, capture_output=True, text=True)
        records = []
        if run.returncode == 0 and os.path.exists(log):
            with open(log) as f:
                records = [json.loads(line) for line in f if line.strip()]
        losses = [r["lm_loss"] for r in records]
        # The plan as it ran: its micro-batch size (the import's), its
        # micro-batches, and a step of the search's global batch.
        ran = re.search(r"micro-batch (\d+) x (\d+) per step", run.stdout)
        wanted = (plan["micro_batch_size"], plan["microbatches"])
        problems = []
        if run.returncode != 0:
            problems.append(f"exit {run.returncode}")
        elif len(losses) != 2 or not all(math.isfinite(x) for x in losses):
            problems.append(f"losses {losses}")
        elif not ran or (int(ran.group(1)), int(ran.group(2))) != wanted:
            problems.append("ran micro-batch {} x {} per step, planned {} x {}"
                            .format(*(ran.groups() if ran else ("?", "?")),
                                    *wanted))
        elif records[0]["consumed_samples"] != args.global_batch:
            problems.append(f"a step consumed "
                            f"{records[0]['consumed_samples']} samples, not "
                            f"{args.global_batch}")
        if problems:
            failed += 1
            tail = "\n    ".join((run.stderr or run.stdout).strip()
                                  .splitlines()[-6:])
            print(f"plan {i} on {ranks} ranks: {summary}: FAIL "
                  f"({'; '.join(problems)})\n    {tail}")
            continue
        print(f"plan {i} on {ranks} ranks: {summary}: ok, losses "
              + " ".join(f"{x:.4f}" for x in losses))
    print(f"{len(top) - failed} of {len(top)} plans trained")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
