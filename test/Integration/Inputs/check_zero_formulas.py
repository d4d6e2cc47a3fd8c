#!/usr/bin/env python3
"""Checks a compiled plan's summary (dsc-opt --dsc-plan-summary) against the
ZeRO paper's analysis in fp32 form, computed here from Psi alone:

  model states per rank (elements): weights Psi; gradients Psi, or Psi/dp
  with ZeRO-2; Adam moments 2*Psi, or 2*Psi/dp with ZeRO-1/2;
  bytes sent per rank per step (4-byte elements, ring collectives):
  DP: all-reduce 2(dp-1)/dp*4Psi; ZeRO-1: reduce-scatter + all-gather,
  (dp-1)/dp*4Psi each; ZeRO-2: the reduce-scatter once per micro-batch;
  ZeRO-1/2/3 add one f64 all-reduce for the gradient norm, of which rank 0
  (whose bytes the summary reports) sends 8: the ring sends every chunk but
  its own and then every chunk but its successor's, and one element makes
  one one-element chunk, rank 0's.
  ZeRO-3: weights, gradients and moments all 1/dp (16*Psi/dp bytes); per
  micro-batch one reduce-scatter and two all-gathers of the parameters,
  3(dp-1)/dp*4Psi. The backward gathers only the parameters it reads
  (Psi_b = backward_gathered_elements <= Psi: a bias's or a layer norm
  beta's gradient does not need the parameter), so the all-gathers are
  (dp-1)/dp*4(Psi + Psi_b), which is the paper's 2(dp-1)/dp*4Psi when the
  backward reads every parameter.

usage: check_zero_formulas.py SUMMARY.json DP ZERO MICROBATCHES
"""
import json
import sys

s = json.load(open(sys.argv[1]))
dp, zero, m = (int(x) for x in sys.argv[2:5])
psi = s["whole_parameters"]
ring = lambda b: (dp - 1) * b // dp
want = {
    "parameters": psi // dp if zero >= 3 else psi,
    "gradient_elements": psi // dp if zero >= 2 else psi,
    "optimizer_state_elements": 2 * psi // dp if zero >= 1 else 2 * psi,
}
want["model_state_bytes"] = 4 * sum(want.values())
coll = s["collective_bytes_per_step"]
if zero == 0:
    want_coll = {"all_reduce": 2 * ring(4 * psi), "reduce_scatter": 0, "all_gather": 0}
elif zero == 3:
    psi_b = s["backward_gathered_elements"]
    ok_b = 0 < psi_b <= psi
    print(f"backward gathers {psi_b} of Psi={psi} elements "
          f"{'ok' if ok_b else 'MISMATCH'}; paper bound 3(dp-1)/dp*4Psi*m = "
          f"{3 * ring(4 * psi) * m}")
    want_coll = {"all_reduce": 8,
                 "reduce_scatter": ring(4 * psi) * m,
                 "all_gather": (ring(4 * psi) + ring(4 * psi_b)) * m}
else:
    want_coll = {"all_reduce": 8,
                 "reduce_scatter": ring(4 * psi) * (m if zero >= 2 else 1),
                 "all_gather": ring(4 * psi)}
ok = zero != 3 or ok_b
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
