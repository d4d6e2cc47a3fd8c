#!/usr/bin/env python3
"""Checks a compiled plan's summary (dsc-opt --dsc-plan-summary) against the
ZeRO paper's analysis in fp32 form, computed here from Psi alone:

  model states per rank (elements): weights Psi; gradients Psi, or Psi/dp
  with ZeRO-2; Adam moments 2*Psi, or 2*Psi/dp with ZeRO-1/2;
  bytes sent per rank per step (4-byte elements, ring collectives):
  DP: all-reduce 2(dp-1)/dp*4Psi; ZeRO-1: reduce-scatter + all-gather,
  (dp-1)/dp*4Psi each; ZeRO-2: the reduce-scatter once per micro-batch;
  ZeRO-1/2 add one f64 all-reduce for the gradient norm, of which rank 0
  (whose bytes the summary reports) sends 8: the ring sends every chunk but
  its own and then every chunk but its successor's, and one element makes
  one one-element chunk, rank 0's.

usage: check_zero_formulas.py SUMMARY.json DP ZERO MICROBATCHES
"""
import json
import sys

s = json.load(open(sys.argv[1]))
dp, zero, m = (int(x) for x in sys.argv[2:5])
psi = s["parameters"]
ring = lambda b: (dp - 1) * b // dp
want = {
    "gradient_elements": psi // dp if zero >= 2 else psi,
    "optimizer_state_elements": 2 * psi // dp if zero >= 1 else 2 * psi,
}
coll = s["collective_bytes_per_step"]
if zero == 0:
    want_coll = {"all_reduce": 2 * ring(4 * psi), "reduce_scatter": 0, "all_gather": 0}
else:
    want_coll = {"all_reduce": 8,
                 "reduce_scatter": ring(4 * psi) * (m if zero >= 2 else 1),
                 "all_gather": ring(4 * psi)}
ok = True
for key, value in want.items():
    status = "ok" if s[key] == value else "MISMATCH"
    ok &= s[key] == value
    print(f"{key}: {s[key]} want {value} {status}")
for key, value in want_coll.items():
    got = coll.get(key, 0)
    status = "ok" if got == value else "MISMATCH"
    ok &= got == value
    print(f"{key}: {got} want {value} {status}")
print(f"Psi={psi} dp={dp} zero={zero} microbatches={m}: {'all match' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
