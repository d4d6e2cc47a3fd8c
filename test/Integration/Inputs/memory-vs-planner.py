#!/usr/bin/env python3
"""The cost model's bytes per GPU for an fp32 plan against the memory
planner's arena for the same plan compiled.

usage: memory-vs-planner.py DSC_TRANSLATE DSC_OPT CLUSTER CONFIG OPTIONS
                            [--tolerance 0.02]

OPTIONS are the plan's knobs as --dsc-compile spells them (dp= tp= zero=
recompute= sequence-parallel=); the same plan is priced by --dsc-estimate
precision=fp32. Prints "OK ..." when the two agree within the tolerance
(relative to the planner's arena), else the numbers and exits 1.
"""
import argparse
import re
import subprocess
import sys


def run(cmd, stdin=None):
    done = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr}")
    return done


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("translate")
    ap.add_argument("opt")
    ap.add_argument("cluster")
    ap.add_argument("config")
    ap.add_argument("options")
    ap.add_argument("--tolerance", type=float, default=0.02)
    a = ap.parse_args()

    knobs = dict(kv.split("=", 1) for kv in a.options.split())
    graph = run([a.translate, "--import-neox", a.config,
                 "--mlir-print-debuginfo"]).stdout
    compiled = run([a.opt, f"--dsc-compile={a.options}"], graph).stdout
    arena = re.search(r"arena_bytes = (\d+)", compiled)
    if not arena:
        sys.exit("the compiled module has no dsc.memory arena_bytes")
    planner = int(arena.group(1))

    estimate = {"dp": knobs.get("dp", "1"), "tp": knobs.get("tp", "1"),
                "zero": knobs.get("zero", "0"),
                "recompute": "1" if knobs.get("recompute", "none") == "full"
                else "0",
                "sequence-parallel": knobs.get("sequence-parallel", "0")}
    spelled = " ".join(f"{k}={v}" for k, v in estimate.items())
    remark = run([a.opt, f"--dsc-estimate=cluster={a.cluster} {spelled} "
                  "precision=fp32", "-o", "/dev/null"], graph).stderr
    model = re.search(r"(\d+) bytes per GPU before the (\d+) reserved "
                      r"\(states (\d+), activations (\d+), temporaries (\d+)\)",
                      remark)
    if not model:
        sys.exit(f"no fp32 bytes in --dsc-estimate's remark:\n{remark}")
    predicted = int(model.group(1))
    diff = (predicted - planner) / planner
    line = (f"{a.options}: model {predicted} bytes (states {model.group(3)}, "
            f"activations {model.group(4)}, temporaries {model.group(5)}), "
            f"planner {planner}, difference {100 * diff:+.2f}%")
    if abs(diff) > a.tolerance:
        print("MISMATCH " + line)
        return 1
    print("OK " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
