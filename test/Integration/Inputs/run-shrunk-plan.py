#!/usr/bin/env python3
"""Runs dsc-run with the knobs of a plan --dsc-auto-parallel chose for a
large model, shrunk to a small one: each of dp, tp and pp that is above 1
becomes 2, the micro-batches per data-parallel rank 2, the model chunks
per pipeline rank 2 when interleaved; ZeRO, the pipeline schedule, sequence
parallelism and recompute stay as the plan has them.
Prints the compile options it used, then runs the command.

usage: run-shrunk-plan.py PLANNED.mlir DSC-RUN ARGS... (the compile
options are passed to DSC-RUN as --compile "warmup=1 <knobs>")
"""
import re
import subprocess
import sys

text = open(sys.argv[1]).read()
# The typed plan in its textual form (docs/architecture.md): keys at their
# defaults are left out.
found = re.search(r'dsc\.parallel_plan = #dsc\.parallel_plan<"([^"]*)">', text)
if not found:
    sys.exit(f"{sys.argv[1]}: no dsc.parallel_plan")
plan = {"dp": "1", "tp": "1", "pp": "1", "zero": "0",
        "pipeline-schedule": "1f1b", "virtual-stages": "1",
        "sequence-parallel": "false", "recompute": "none"}
plan.update(word.split("=", 1) for word in found.group(1).split())
shrunk = lambda key: 2 if int(plan[key]) > 1 else 1
knobs = [
    f"dp={shrunk('dp')}", f"tp={shrunk('tp')}", f"pp={shrunk('pp')}",
    f"zero={plan['zero']}", "microbatches=2",
    f"pipeline-schedule={plan['pipeline-schedule']}",
    f"virtual-stages={shrunk('virtual-stages')}",
    f"sequence-parallel={1 if plan['sequence-parallel'] == 'true' else 0}",
    f"recompute={plan['recompute']}",
]
compile_options = " ".join(knobs)
print(f"knobs: {compile_options}", flush=True)
ranks = shrunk("dp") * shrunk("tp") * shrunk("pp")
command = sys.argv[2:] + ["--np", str(ranks), "--compile",
                          "warmup=1 " + compile_options]
sys.exit(subprocess.run(command).returncode)
