"""Kills one rank of a dsc-launch job with SIGKILL at random times and checks
the restart (issue 36's fault test).

  fault-restarts.py --seed S --same N --elastic K [--after-final-save F]
                    --steps T --interval I --out DIR
                    -- dsc-launch [launch options] -- dsc-run ...

The dsc-run command must train dp=4 on 4 ranks under mpirun and write
--log-json and --save; this script appends them. It runs:

  1. the uninterrupted job (--max-restarts 0);
  2. N jobs with --max-restarts 1, each with one rank (random, 0-3) killed
     with SIGKILL at a random moment (after iteration k's log line, k random
     in [I, T-1], plus a random part of a step): the launcher must report
     the failure within 30 s of the kill, name the killed rank, restart from
     the newest checkpoint (a multiple of I, at most one save lost), whose
     piece files equal the uninterrupted run's at that step byte for byte,
     and finish with exactly the uninterrupted run's losses after it;
  3. K jobs as in 2 with --elastic 2:4: the launcher must continue on 2
     ranks (dp=2, 2 micro-batches a rank) from that checkpoint, resharded,
     with losses within 1e-5 of a straight 2-rank run (dsc-run --np 2) from
     the same checkpoint, and of the uninterrupted 4-rank run;
  4. F jobs (--after-final-save F) with --max-restarts 1 whose rank (random)
     SIGKILLs itself once its dsc-run finished (Inputs/launch/kill-after-
     run.sh), after the final save every time: the launcher must say that
     training is complete and exit 0 without a restart, the final
     checkpoint equal to the uninterrupted run's, every step logged with
     its loss.

A kill can land late (the step time is the uninterrupted run's median, and
a loaded machine stretches it): after the final step's save, the launcher
must not restart but say that training is complete and exit 0, with the
final checkpoint equal to the uninterrupted run's and every logged loss
bit-equal (the last step's --log-json line is written after its save, so a
kill between the two leaves it out); after the rank's exit, the job must
simply have finished with the uninterrupted run's losses. Both count as
recovered and are reported as such. The log of the last elastic job that
restarted is copied to DIR/elastic-restarted.log.

The kill times come from random.Random(seed): rerun with the printed seed to
repeat a kill's iteration, rank and delay. Prints one line per job, then
"OK ..." or "FAIL ..." lines; exits 1 on any failure.
"""

import argparse
import glob
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid

KILL_AFTER_RUN = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              "kill-after-run.sh")
STOP_LIMIT_S = 30.0
JOB_TIMEOUT_S = 120.0
ELASTIC_TOLERANCE = 1e-5

failures = []


def fail(message):
    failures.append(message)
    print("FAIL: " + message, flush=True)


def losses(path):
    out = {}
    with open(path) as f:
        for line in f:
            row = json.loads(line)
            out[row["iteration"]] = row["lm_loss"]
    return out


def check_losses(name, path, reference, iterations):
    """True when `path` logged exactly `iterations`, each with the
    uninterrupted run's loss bit for bit; else a failure."""
    got = losses(path)
    want = list(iterations)
    if sorted(got) != want:
        fail(f"{name}: logged iterations {sorted(got)}, expected "
             f"{want[0]}-{want[-1]}")
        return False
    bad = [i for i in want if got[i] != reference[i]]
    if bad:
        fail(f"{name}: iteration {bad[0]}: loss {got[bad[0]]!r}, the "
             f"uninterrupted run's {reference[bad[0]]!r}")
        return False
    return True


def rank_pids(token):
    """The dsc-run processes of this job (their environment carries the
    job's token), by MPI world rank."""
    pids = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm") as f:
                if f.read().strip() != "dsc-run":
                    continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if f"DSC_FAULT_TOKEN={token}".encode() not in env:
            continue
        for var in env:
            if var.startswith(b"OMPI_COMM_WORLD_RANK="):
                pids[int(var.split(b"=", 1)[1])] = int(entry)
    return pids


class Job:
    """dsc-launch in its own session, its output read line by line with
    the time each line arrived."""

    def __init__(self, argv, log_path, token, env=None):
        self.lines = []
        self.log = open(log_path, "w")
        env = dict(os.environ, DSC_FAULT_TOKEN=token, **(env or {}))
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True,
                                     env=env, start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))
            self.log.write(line)
            self.log.flush()

    def wait(self):
        try:
            rc = self.proc.wait(timeout=JOB_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            rc = self.proc.wait()
            fail(f"the job ran past {JOB_TIMEOUT_S:.0f} s and was killed")
        self.reader.join()
        self.log.close()
        return rc

    def first(self, pattern):
        for t, line in self.lines:
            m = re.search(pattern, line)
            if m:
                return t, m
        return None, None


def run_job(base, extra, out, name, token, kill_after_run=None):
    argv = base[:]
    # dsc-launch's own options go before its '--'.
    sep = argv.index("--")
    argv[sep:sep] = extra
    argv += ["--save", f"{out}/{name}", "--log-json", f"{out}/{name}.jsonl"]
    env = None
    if kill_after_run is not None:
        # kill-after-run.sh runs dsc-run, then SIGKILLs itself on that rank.
        sep += len(extra)
        argv[sep + 1:sep + 1] = [KILL_AFTER_RUN]
        env = {"KILL_AFTER_RUN": f"{kill_after_run}:0"}
    return Job(argv, f"{out}/{name}.log", token, env)


def wait_for_iteration(jsonl, k, job):
    """Until `jsonl` has iteration k's line (or the job ended)."""
    while job.proc.poll() is None:
        try:
            with open(jsonl) as f:
                if sum(1 for _ in f) >= k:
                    return True
        except OSError:
            pass
        time.sleep(0.005)
    return False


def same_files(a, b):
    """True when the piece files of checkpoint steps a and b are equal."""
    fa = sorted(os.path.basename(p) for p in glob.glob(f"{a}/*.safetensors"))
    fb = sorted(os.path.basename(p) for p in glob.glob(f"{b}/*.safetensors"))
    if not fa or fa != fb:
        return False
    for name in fa:
        with open(f"{a}/{name}", "rb") as x, open(f"{b}/{name}", "rb") as y:
            if x.read() != y.read():
                return False
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--same", type=int, required=True)
    ap.add_argument("--elastic", type=int, required=True)
    ap.add_argument("--after-final-save", type=int, default=0)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--interval", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dsc-run", required=True)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    base = args.command[1:] if args.command[:1] == ["--"] else args.command
    # dsc-run's arguments after its name, for the straight 2-rank runs.
    run_args = base[base.index("--") + 2:] + ["--steps", str(args.steps)]
    base += ["--steps", str(args.steps), "--save-interval", str(args.interval)]
    out, steps, iv = args.out, args.steps, args.interval
    os.makedirs(out, exist_ok=True)
    rng = random.Random(args.seed)
    print(f"seed {args.seed} (rerun with --seed {args.seed} for the same "
          f"kills)", flush=True)

    token = uuid.uuid4().hex
    straight = run_job(base, ["--max-restarts", "0"], out, "straight", token)
    if straight.wait() != 0:
        fail(f"the uninterrupted run failed: {out}/straight.log")
        return 1
    reference = losses(f"{out}/straight.jsonl")
    if sorted(reference) != list(range(1, steps + 1)):
        fail(f"the uninterrupted run logged {sorted(reference)}")
        return 1

    # A kill lands at a random point of a step (or of its save).
    times = sorted(json.loads(line)["elapsed_time_per_iteration_ms"]
                   for line in open(f"{out}/straight.jsonl"))
    step_s = times[len(times) // 2] / 1000.0

    # How each recovered kill ended: restarted (on 2 ranks with --elastic),
    # after the final save, after the job's end.
    ended = {False: [0, 0, 0], True: [0, 0, 0]}
    for trial in range(args.same + args.elastic):
        elastic = trial >= args.same
        name = f"{'elastic' if elastic else 'same'}-{trial}"
        k = rng.randint(iv, steps - 1)
        victim = rng.randrange(4)
        delay = rng.uniform(0.0, 1.0) * step_s
        extra = ["--max-restarts", "1"]
        if elastic:
            extra += ["--elastic", "2:4"]
        token = uuid.uuid4().hex
        job = run_job(base, extra, out, name, token)
        errors_before = len(failures)
        killed_at = None
        reached = wait_for_iteration(f"{out}/{name}.jsonl", k, job)
        if reached:
            time.sleep(delay)
            pid = rank_pids(token).get(victim)
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                killed_at = time.monotonic()
        rc = job.wait()
        if not reached:
            fail(f"{name}: the job ended before iteration {k}'s log line")
            continue
        t_failed, failed = job.first(
            r"dsc-launch: the job failed \(exit (\d+)\); restart 1 of 1 from "
            r"checkpoint step-(\d+)( on (\d+) ranks)?")
        t_done, done = job.first(
            r"dsc-launch: the job failed \(exit (\d+)\) after its last "
            r"checkpoint step-(\d+) reached the final step (\d+) .*: "
            r"training is complete, not restarting")
        if rc != 0:
            fail(f"{name}: dsc-launch exited {rc}: {out}/{name}.log")
        if killed_at is None or (rc == 0 and not failed and not done):
            # Too late: the rank had exited (or was exiting, and the kill
            # hit nothing), and the job finished on its own.
            if rc != 0 or failed:
                fail(f"{name}: rank {victim} had exited before its kill, "
                     f"yet the job failed: {out}/{name}.log")
                continue
            if not check_losses(name, f"{out}/{name}.jsonl", reference,
                                range(1, steps + 1)):
                continue
            print(f"{name}: rank {victim} had exited {delay * 1000:.1f} ms "
                  f"after iteration {k}'s log line, before its kill; the "
                  f"job finished; {steps} steps, losses bit-equal to the "
                  f"uninterrupted run", flush=True)
            if len(failures) == errors_before:
                ended[elastic][2] += 1
            continue
        if done:
            # After the final save: training is complete, no restart.
            stop_s = t_done - killed_at
            if stop_s > STOP_LIMIT_S:
                fail(f"{name}: the job stopped {stop_s:.1f} s after the kill")
            _, dead = job.first(r"dsc-launch: world rank (\d+) .* died")
            # The others may have finished before the kill: then no rank
            # reports it.
            if dead and int(dead.group(1)) != victim:
                fail(f"{name}: the launcher named rank {dead.group(1)}, "
                     f"rank {victim} was killed")
            if failed or int(done.group(2)) != steps or \
                    int(done.group(3)) != steps:
                fail(f"{name}: training reported complete at step "
                     f"{done.group(2)} of {done.group(3)}, or restarted too "
                     f"(--steps {steps}): {out}/{name}.log")
                continue
            ckpt = f"{out}/{name}/step-{steps:08d}"
            if not same_files(ckpt, f"{out}/straight/step-{steps:08d}"):
                fail(f"{name}: {ckpt}'s pieces differ from the uninterrupted "
                     f"run's")
            got = losses(f"{out}/{name}.jsonl")
            if sorted(got) != list(range(1, steps + 1)):
                want = range(1, steps)
            else:
                want = range(1, steps + 1)
            if not check_losses(name, f"{out}/{name}.jsonl", reference, want):
                continue
            print(f"{name}: rank {victim} killed {delay * 1000:.1f} ms after "
                  f"iteration {k}'s log line; stopped {stop_s:.1f} s later; "
                  f"not restarted: step {steps}, the last, was saved; "
                  f"{len(got)} steps logged, losses bit-equal to the "
                  f"uninterrupted run", flush=True)
            if len(failures) == errors_before:
                ended[elastic][1] += 1
            continue
        if not failed:
            fail(f"{name}: no restart from a checkpoint in {out}/{name}.log")
            continue
        stop_s = t_failed - killed_at
        if stop_s > STOP_LIMIT_S:
            fail(f"{name}: the job stopped {stop_s:.1f} s after the kill")
        _, dead = job.first(r"dsc-launch: world rank (\d+) .* died")
        if not dead or int(dead.group(1)) != victim:
            fail(f"{name}: the launcher named rank "
                 f"{dead.group(1) if dead else 'none'}, rank {victim} was "
                 f"killed")
        step = int(failed.group(2))
        # Rank 0 prints iteration n's line before n's save and after n-1's:
        # the newest complete save is the last line's step when that save
        # was committed before the kill, else the one before it.
        logged = [int(m.group(1)) for t, line in job.lines if t < t_failed
                  for m in [re.match(r" iteration +(\d+)/", line)] if m]
        last = max(logged, default=0)
        if step == 0 or step not in (last // iv * iv, (last - 1) // iv * iv):
            fail(f"{name}: restarted from step {step}; the first attempt "
                 f"logged iterations up to {max(logged, default=0)} "
                 f"(saves every {iv})")
            continue
        ckpt = f"{out}/{name}/step-{step:08d}"
        if not same_files(ckpt, f"{out}/straight/step-{step:08d}"):
            fail(f"{name}: {ckpt}'s pieces differ from the uninterrupted "
                 f"run's")
        if not job.first(rf"resumed from '.*step-{step:08d}' at iteration "
                         rf"{step + 1} ")[1]:
            fail(f"{name}: dsc-run did not resume at iteration {step + 1}")
        got = losses(f"{out}/{name}.jsonl")
        want_steps = list(range(step + 1, steps + 1))
        if sorted(got) != want_steps:
            fail(f"{name}: the restart logged iterations {sorted(got)}, "
                 f"expected {want_steps[0]}-{want_steps[-1]}")
            continue
        if not elastic:
            bad = [i for i in want_steps if got[i] != reference[i]]
            if bad:
                i = bad[0]
                fail(f"{name}: iteration {i}: loss {got[i]!r}, the "
                     f"uninterrupted run's {reference[i]!r}")
            summary = "losses bit-equal to the uninterrupted run"
        else:
            if failed.group(4) != "2" or not job.first(
                    r"dp=4 -> dp=2 \(tp=1 pp=1 kept\), 1 -> 2 micro-batches")[1] \
                    or not job.first(r"mesh dp=2 on 2 ranks \(mpi\)")[1]:
                fail(f"{name}: the restart did not run dp=2 on 2 ranks")
            ref2 = f"{out}/{name}-ref2"
            with open(ref2 + ".log", "w") as log:
                r = subprocess.run(
                    [args.dsc_run] + run_args +
                    ["--np", "2", "--compile", "dp=2", "--microbatches", "2",
                     "--load", ckpt, "--log-json", ref2 + ".jsonl"],
                    stdout=log, stderr=subprocess.STDOUT,
                    timeout=JOB_TIMEOUT_S)
            if r.returncode != 0:
                fail(f"{name}: the straight 2-rank run failed: {ref2}.log")
                continue
            two = losses(ref2 + ".jsonl")
            worst2 = max(abs(got[i] - two.get(i, float("inf")))
                         for i in want_steps)
            worst4 = max(abs(got[i] - reference[i]) for i in want_steps)
            if not worst2 <= ELASTIC_TOLERANCE:
                fail(f"{name}: losses differ from the straight 2-rank run "
                     f"by {worst2:.3g}")
            if not worst4 <= ELASTIC_TOLERANCE:
                fail(f"{name}: losses differ from the uninterrupted 4-rank "
                     f"run by {worst4:.3g}")
            summary = (f"on 2 ranks, losses within {worst2:.1g} of a "
                       f"straight 2-rank run, {worst4:.1g} of the 4-rank one")
        print(f"{name}: rank {victim} killed {delay * 1000:.1f} ms after "
              f"iteration {k}'s log line; stopped {stop_s:.1f} s later; "
              f"restarted from step {step}; {len(want_steps)} steps, "
              f"{summary}", flush=True)
        if len(failures) == errors_before:
            ended[elastic][0] += 1
            if elastic:
                shutil.copyfile(f"{out}/{name}.log",
                                f"{out}/elastic-restarted.log")

    final_ok = 0
    for trial in range(args.after_final_save):
        name = f"final-{trial}"
        victim = rng.randrange(4)
        token = uuid.uuid4().hex
        errors_before = len(failures)
        job = run_job(base, ["--max-restarts", "1"], out, name, token,
                      kill_after_run=victim)
        rc = job.wait()
        _, done = job.first(
            r"dsc-launch: the job failed \(exit (\d+)\) after its last "
            r"checkpoint step-(\d+) reached the final step (\d+) .*: "
            r"training is complete, not restarting")
        if rc != 0 or not done or job.first(r"restart 1 of 1")[1] or \
                int(done.group(2)) != steps or int(done.group(3)) != steps:
            fail(f"{name}: rank {victim} died after the final save; expected "
                 f"exit 0 and 'training is complete' without a restart: "
                 f"{out}/{name}.log (exit {rc})")
            continue
        ckpt = f"{out}/{name}/step-{steps:08d}"
        if not same_files(ckpt, f"{out}/straight/step-{steps:08d}"):
            fail(f"{name}: {ckpt}'s pieces differ from the uninterrupted "
                 f"run's")
        if not check_losses(name, f"{out}/{name}.jsonl", reference,
                            range(1, steps + 1)):
            continue
        print(f"{name}: rank {victim} killed after its run's end (exit "
              f"{done.group(1)}); not restarted: step {steps}, the last, was "
              f"saved; {steps} steps logged, losses bit-equal to the "
              f"uninterrupted run", flush=True)
        if len(failures) == errors_before:
            final_ok += 1

    same_ok, elastic_ok = sum(ended[False]), sum(ended[True])
    if args.elastic and not ended[True][0]:
        fail("no elastic job restarted: every kill landed after the final "
             "save or the job's end")
    print(f"{'OK' if same_ok == args.same else 'FAIL'}: {same_ok} of "
          f"{args.same} kills recovered on 4 ranks with the uninterrupted "
          f"run's losses ({ended[False][0]} restarted, {ended[False][1]} "
          f"after the final save, {ended[False][2]} after the job's end)")
    print(f"{'OK' if elastic_ok == args.elastic else 'FAIL'}: {elastic_ok} of "
          f"{args.elastic} kills recovered with --elastic 2:4 "
          f"({ended[True][0]} continued on 2 ranks, {ended[True][1]} after "
          f"the final save, {ended[True][2]} after the job's end)")
    if args.after_final_save:
        print(f"{'OK' if final_ok == args.after_final_save else 'FAIL'}: "
              f"{final_ok} of {args.after_final_save} kills after the final "
              f"save ended without a restart, training complete")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
